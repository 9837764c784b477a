;;; lispm-plan.el --- The own agent's plan, as Org TODO items in its session  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The `plan' tool (as Codex's update_plan and gptel-agent's
;; TodoWrite) writes the agent's steps as Org TODO items under its
;; turn, in its session:
;;
;;   ** Plan
;;   *** DONE Read the parser
;;   *** DOING Write the test
;;   *** TODO Fix the colon case
;;
;; The document is the plan's truth: the user edits, reorders, adds or
;; cancels items there (Org's own keys: S-RIGHT, M-UP, M-RET,
;; C-c C-t), and the agent reads the plan back from it at its next
;; request (`lispm-plan-note': a note after the conversation when the
;; document's plan is not the one the model last saw; not in the
;; system prompt, which must stay the same to cache).  The inspector
;; shows an agent's plan, the agent list its current step
;; (`lispm-actor-step').

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-agents)
(require 'lispm-session)
(require 'lispm-tools)

(defconst lispm-plan-step-limit 100
  "The most steps a plan has: requests hold it.")

(defconst lispm-plan-marks
  '((todo . "[ ]") (doing . "[>]") (done . "[x]") (cancelled . "[-]"))
  "How a step's state is written for the model, and read from it.")

(defun lispm-plan--step (text)
  "Return TEXT, a step the model wrote, as (:state STATE :text TEXT)."
  (let ((text (string-trim (replace-regexp-in-string "[\n\r\t]+" " " text))))
    (if-let* ((mark (cl-find-if (lambda (entry) (string-prefix-p (cdr entry) text))
                                lispm-plan-marks)))
        (list :state (car mark) :text (string-trim (substring text (length (cdr mark)))))
      (list :state 'todo :text text))))

(defun lispm-plan-text (plan)
  "Return PLAN, items of `lispm-session-plan', as text for the model."
  (mapconcat (lambda (item)
               (format "%s %s" (alist-get (plist-get item :state) lispm-plan-marks)
                       (plist-get item :text)))
             plan "\n"))

(defun lispm-plan-current-step (plan)
  "Return the text of PLAN's current step: the first under way, else to do."
  (plist-get (or (cl-find 'doing plan :key (lambda (item) (plist-get item :state)))
                 (cl-find 'todo plan :key (lambda (item) (plist-get item :state))))
             :text))

(defun lispm-plan--session (agent)
  "Return AGENT's session buffer, or signal that AGENT has no plan to keep."
  (let ((buffer (lispm-actor-home-buffer agent)))
    (unless (and (buffer-live-p buffer)
                 (eq (buffer-local-value 'major-mode buffer) 'lispm-session-mode))
      (lispm-signal 'lispm-tool-error (list (lispm-actor-name agent))
                    "Only LispM's own agents keep a plan, in their session; %s has none"
                    (lispm-actor-name agent)))
    buffer))

(lispm-define-tool plan (agent (steps (array string) "The whole plan, a step each, in order.  Begin a step with [x] once done, [>] while under way, [-] if dropped; a step without a mark is to do."))
  "Write your plan for this turn: its steps, as TODO items in your session.
Call it with the whole plan whenever it changes (a step begun, done,
added or dropped).  The user sees it, and may edit, reorder, add or
cancel steps: the plan your next request shows you is the document's.
Returns the plan as it now stands."
  :kind 'plan
  (when (null steps)
    (lispm-signal 'lispm-tool-bad-args (list "steps") "Give at least one step"))
  (when (> (length steps) lispm-plan-step-limit)
    (lispm-signal 'lispm-tool-bad-args (list "steps")
                  "A plan has at most %d steps; give fewer, larger ones" lispm-plan-step-limit))
  (lispm-plan-text (lispm-session-set-plan (lispm-plan--session agent)
                                           (mapcar #'lispm-plan--step steps))))

(defconst lispm-plan-note-heading
  "[LispM: your plan, as your session holds it now; the user may have changed it. \
Keep to it, and update it with the plan tool.]"
  "The first line of a note that tells the model its plan.")

(defun lispm-plan--last-shown (messages)
  "Return the plan's text as MESSAGES last showed it to the model, or nil.
That is the result of the last `plan' call, or the last note."
  (cl-loop for message in (reverse messages)
           for content = (plist-get message :content)
           when (and (equal (plist-get message :role) "tool")
                     (equal (plist-get message :name) "plan"))
           return content
           when (and (equal (plist-get message :role) "user") (stringp content)
                     (string-prefix-p lispm-plan-note-heading content))
           return (substring content (min (length content)
                                          (1+ (length lispm-plan-note-heading))))))

(defun lispm-plan-note (buffer messages)
  "Return a message telling the model the plan in BUFFER's session, or nil.
Nil when there is no plan, or MESSAGES last showed it as it is: the
model's own plan calls show it, and the note only comes when the user
changed it in the document.  The plan is not in the system prompt, so
that the prompt stays the same from one request to the next and caches."
  (when-let* ((plan (lispm-session-plan buffer)))
    (let ((text (lispm-plan-text plan)))
      (unless (equal text (lispm-plan--last-shown messages))
        (list :role "user" :content (concat lispm-plan-note-heading "\n" text))))))

(provide 'lispm-plan)
;;; lispm-plan.el ends here
