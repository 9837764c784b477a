;;; lispm-notice.el --- When an agent needs the user  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; An agent needs the user when (`lispm-notice-reasons'):
;;
;;   approval  an approval of it waits in LispM (`lispm-approvals')
;;   prompt    its CLI shows an approval prompt: the sidecar reports the
;;             terminal agent `waiting-for-approval'.  Only Claude Code's
;;             records tell one; Codex's, Hermes's, OpenClaw's and
;;             Holon's say busy meanwhile
;;   stopped   an own agent's turn stopped at a condition: a restart waits
;;   done      a turn the user started is over, and its buffer has not
;;             been shown since
;;   no-answer an own agent, reopened after a restart, waits on a request
;;             asked of an agent that runs nowhere here: no answer can
;;             come until it is resumed or forgotten
;;             (`lispm-actor-awaiting-absent')
;;
;; A turn "the user started": an own agent's whose prompt is not a
;; message from another agent; a terminal agent's that went busy while
;; its terminal was shown (or had been, a moment before), since its
;; records do not say who typed.  It is "done" when it ends while that
;; buffer is shown in no window, and seen once a window shows it.
;;
;; The agent list (a column) and the mode line (`lispm-notice-mode-line')
;; read this; `lispm-notice-changed-hook' runs when any of it changes.
;; `lispm-notice-visit' goes to what waits.  With `lispm-notice-desktop',
;; each new reason is also a desktop notification.

;;; Code:

(require 'cl-lib)
(require 'lispm-agents)
(require 'lispm-approvals)

(declare-function lispm-turn-messages "lispm-turn" (turn))
(declare-function notifications-notify "notifications" (&rest params))

;;; Options

(defgroup lispm-notice nil
  "Telling the user that an agent needs them."
  :group 'lispm
  :prefix "lispm-notice-")

(defcustom lispm-notice-desktop nil
  "Non-nil means a desktop notification says when an agent starts needing you.
It needs Emacs built with D-Bus and a notification daemon; without
them nothing is shown, and nothing fails."
  :type 'boolean)

(defcustom lispm-notice-started-grace 3
  "Seconds a terminal agent's turn may start after its terminal was hidden.
Such a turn is still taken to be yours (you typed, then looked away);
one that starts later, with the terminal shown in no window, was
started by a message from another agent, not by you."
  :type 'number)

(defvar lispm-notice-changed-hook nil
  "Hook run whenever what needs the user changes.")

;;; State

(defvar lispm-notice--unseen (make-hash-table :test #'eq)
  "The actors whose turn the user started ended unseen, to t.")

(defvar lispm-notice--shown (make-hash-table :test #'eq)
  "Terminal agents whose buffer shows in a window, to t.")

(defvar lispm-notice--hidden-at (make-hash-table :test #'eq)
  "Terminal agents, to when their buffer was last seen going out of sight.")

(defvar lispm-notice--activity (make-hash-table :test #'eq)
  "Terminal agents, to their last known activity, never nil.")

(defvar lispm-notice--yours (make-hash-table :test #'eq)
  "Terminal agents whose turn under way the user started, to t.")

(defvar lispm-notice--last nil
  "What needed the user at the last change: (NAME . REASON-SYMBOLS) each.")

(defun lispm-notice--shown-p (actor)
  "Return non-nil if a window of a visible frame displays ACTOR's home buffer."
  (when-let* ((buffer (lispm-actor-home-buffer actor)))
    (and (buffer-live-p buffer) (get-buffer-window buffer 'visible) t)))

(defun lispm-notice-reasons (actor)
  "Return why ACTOR needs the user now, a list of (SYMBOL . TEXT), or nil.
SYMBOL is `approval', `prompt', `stopped', `done' or `no-answer' (see
the Commentary of lispm-notice.el); TEXT says it in a few words."
  (let ((approvals (lispm-approvals-count actor))
        (activity (lispm-actor-activity actor)))
    (append
     (and (> approvals 0)
          (list (cons 'approval (format "%d approval%s" approvals (if (= approvals 1) "" "s")))))
     (and (lispm-agent-p actor) (eq activity 'waiting-for-approval)
          (list (cons 'prompt "approval prompt")))
     (and (eq activity 'stopped) (list (cons 'stopped "stopped at a condition")))
     (and (gethash actor lispm-notice--unseen) (list (cons 'done "turn done")))
     (and-let* ((absent (lispm-actor-awaiting-absent actor)))
       (list (cons 'no-answer
                   (mapconcat (lambda (request)
                                (format "%s waits on %s, which is not running"
                                        (car request) (cdr request)))
                              absent ", ")))))))

(defun lispm-notice-needs-you-p (actor)
  "Return non-nil if ACTOR waits for the user (see `lispm-notice-reasons')."
  (and (lispm-notice-reasons actor) t))

(defun lispm-notice-waiting ()
  "Return who needs the user now: (ACTOR . REASONS) each, oldest first.
The live actors, then those no longer (or never) in the registry whose
approvals still wait."
  (let ((actors (lispm-agents)))
    (dolist (approval (lispm-approvals-pending))
      (let ((asker (lispm-approval-agent approval)))
        (unless (memq asker actors)
          (setq actors (append actors (list asker))))))
    (cl-loop for actor in actors
             for reasons = (lispm-notice-reasons actor)
             when reasons collect (cons actor reasons))))

;;; Turns that end unseen

(defun lispm-notice--prompt (turn)
  "Return the text TURN of an own agent started with: its last user message."
  (plist-get (cl-find "user" (lispm-turn-messages turn)
                      :key (lambda (m) (plist-get m :role)) :test #'equal :from-end t)
             :content))

(defun lispm-notice--turn-ended (agent turn)
  "Note that own AGENT's TURN is over: unseen, if the user started it."
  (let ((prompt (lispm-notice--prompt turn)))
    (when (and (null (lispm-actor-caller agent))
               (stringp prompt)
               ;; How the sidecar writes what another agent (or LispM) sent.
               (not (string-match-p "\\`\\[\\(?:Message\\|Request\\|Reply\\) " prompt))
               (not (lispm-notice--shown-p agent)))
      (puthash agent t lispm-notice--unseen)
      (lispm-notice--update))))

(defun lispm-notice--started-by-user-p (agent)
  "Return non-nil if a turn of terminal AGENT starting now is the user's."
  (or (lispm-notice--shown-p agent)
      (when-let* ((hidden (gethash agent lispm-notice--hidden-at)))
        (< (- (float-time) hidden) lispm-notice-started-grace))))

(defun lispm-notice--follow-activity (agent)
  "Follow terminal AGENT's activity: a turn of the user's going idle unseen."
  (let ((activity (lispm-actor-activity agent))
        (before (gethash agent lispm-notice--activity)))
    ;; Nothing said (the sidecar restarting) is no change.
    (when (and activity (not (eq activity before)))
      (puthash agent activity lispm-notice--activity)
      (cond ((not (eq activity 'idle))
             (when (memq before '(nil idle))
               (if (lispm-notice--started-by-user-p agent)
                   (puthash agent t lispm-notice--yours)
                 (remhash agent lispm-notice--yours))))
            ((gethash agent lispm-notice--yours)
             (remhash agent lispm-notice--yours)
             (unless (lispm-notice--shown-p agent)
               (puthash agent t lispm-notice--unseen)))))))

(defun lispm-notice--windows-changed (&optional _frame)
  "Note which agents' buffers the windows show now: a shown one is seen."
  (let ((changed nil))
    (dolist (actor (lispm-agents))
      (let ((shown (lispm-notice--shown-p actor)))
        (when (and shown (gethash actor lispm-notice--unseen))
          (remhash actor lispm-notice--unseen)
          (setq changed t))
        (when (lispm-agent-p actor)
          (cond (shown (puthash actor t lispm-notice--shown))
                ((gethash actor lispm-notice--shown)
                 (remhash actor lispm-notice--shown)
                 (puthash actor (float-time) lispm-notice--hidden-at))))))
    (when changed
      (lispm-notice--update))))

;;; Telling

(defun lispm-notice--forget-gone ()
  "Forget what is known of actors that left the registry."
  (dolist (table (list lispm-notice--unseen lispm-notice--shown lispm-notice--hidden-at
                       lispm-notice--activity lispm-notice--yours))
    (maphash (lambda (actor _) (unless (lispm-agent-live-p actor) (remhash actor table)))
             table)))

(defun lispm-notice--agents-changed ()
  "Take in a change of the agents: their activity, arrivals and departures."
  (lispm-notice--forget-gone)
  (dolist (actor (lispm-agents))
    (when (lispm-agent-p actor)
      (lispm-notice--follow-activity actor)))
  (lispm-notice--update))

(defun lispm-notice--summary (waiting)
  "Return WAITING, (ACTOR . REASONS) each, as lines: NAME: REASON, ..."
  (mapconcat (lambda (entry)
               (format "%s: %s" (lispm-actor-name (car entry))
                       (mapconcat #'cdr (cdr entry) ", ")))
             waiting "\n"))

(defun lispm-notice--update ()
  "Show what needs the user now, and tell those who watch if it changed."
  (let* ((waiting (lispm-notice-waiting))
         (now (mapcar (lambda (entry)
                        (cons (lispm-actor-name (car entry)) (mapcar #'car (cdr entry))))
                      waiting))
         (texts (mapcar (lambda (entry) (mapcar #'cdr (cdr entry))) waiting)))
    (unless (equal (cons now texts) lispm-notice--last)
      (let ((before (car lispm-notice--last)))
        (setq lispm-notice--last (cons now texts))
        (lispm-notice--update-mode-line waiting)
        (when lispm-notice-desktop
          (dolist (entry waiting)
            (let ((old (cdr (assoc (lispm-actor-name (car entry)) before))))
              (when-let* ((new (cl-remove-if (lambda (r) (memq (car r) old)) (cdr entry))))
                (lispm-notice--desktop (car entry) new)))))
        (run-hooks 'lispm-notice-changed-hook)))))

(defun lispm-notice--desktop (actor reasons)
  "Tell the desktop that ACTOR needs the user for REASONS, if it can be told."
  (when (and (require 'notifications nil t)
             (featurep 'dbusbind)
             (fboundp 'notifications-notify))
    (condition-case err
        (notifications-notify
         :title (format "LispM: %s needs you" (lispm-actor-name actor))
         :body (mapconcat #'cdr reasons ", ")
         :app-name "LispM")
      (error (message "LispM: no desktop notification: %s" (error-message-string err))))))

;;; The mode line

(defvar lispm-notice-mode-line ""
  "The mode line notice that agents need the user: \" LispM: NAME needs you\".
It is in `global-mode-string' while any agent needs the user.")
(put 'lispm-notice-mode-line 'risky-local-variable t)

(defvar-keymap lispm-notice--mode-line-map
  :doc "Keymap of the mode line notice that agents need the user."
  "<mode-line> <mouse-1>" #'lispm-notice-visit)

(defun lispm-notice--update-mode-line (waiting)
  "Show in the mode line who of WAITING, (ACTOR . REASONS) each, needs the user."
  (if (null waiting)
      (progn
        (setq lispm-notice-mode-line "")
        (when (listp global-mode-string)
          (setq global-mode-string (delq 'lispm-notice-mode-line global-mode-string))))
    (setq lispm-notice-mode-line
          (propertize (if (cdr waiting)
                          (format " LispM: %d agents need you" (length waiting))
                        (format " LispM: %s needs you" (lispm-actor-name (caar waiting))))
                      'face 'warning
                      'mouse-face 'mode-line-highlight
                      'help-echo (concat (lispm-notice--summary waiting)
                                         "\nmouse-1: go to what waits")
                      'local-map lispm-notice--mode-line-map))
    ;; A list whose first element is a symbol is a conditional (SYMBOL
    ;; THEN ELSE) to the mode line: start it with a string.
    (unless (and (consp global-mode-string) (stringp (car global-mode-string)))
      (setq global-mode-string (cons "" (ensure-list global-mode-string))))
    (unless (memq 'lispm-notice-mode-line global-mode-string)
      (setq global-mode-string (append global-mode-string '(lispm-notice-mode-line)))))
  (force-mode-line-update t))

;;; Going there

;;;###autoload
(defun lispm-notice-visit ()
  "Go to the first thing that waits for you.
An approval in LispM shows in the approvals buffer; anything else, in
the agent's own buffer (its terminal or its session)."
  (interactive)
  (pcase (car (lispm-notice-waiting))
    ('nil (message "LispM: no agent needs you"))
    (`(,actor . ,reasons)
     (let ((buffer (lispm-actor-home-buffer actor)))
       (if (or (assq 'approval reasons) (not (buffer-live-p buffer)))
           (lispm-approvals-show actor)
         (pop-to-buffer buffer))))))

(add-hook 'lispm-agents-changed-hook #'lispm-notice--agents-changed)
(add-hook 'lispm-approvals-changed-hook #'lispm-notice--update)
(add-hook 'lispm-own-agent-turn-end-functions #'lispm-notice--turn-ended)
(add-hook 'window-buffer-change-functions #'lispm-notice--windows-changed)

(provide 'lispm-notice)
;;; lispm-notice.el ends here
