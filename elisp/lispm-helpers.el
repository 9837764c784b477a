;;; lispm-helpers.el --- Helpers started from roles, and the list of agents and roles  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Any agent can get a helper: `ask_agent' with a role instead of an
;; agent's name.  The sidecar then asks Emacs `emacs/start-helper'
;; (role, caller), and Emacs makes one of LispM's own agents:
;;
;;   role    the role asked for (`lispm-roles-list'), its base name the
;;           role's name: reviewer, reviewer-2, ...
;;   folder  the caller's
;;   model   the caller's, if the caller is an own agent, else
;;           `lispm-model-default'
;;   caller  the asking actor (`lispm-actor-caller'): the policy never
;;           lets the helper do more than it (`lispm-policy-decide'),
;;           and the helper has only the tools both may use
;;           (`lispm-roles-actor-tools')
;;
;; The sidecar then asks the helper as an ordinary request.  It does
;; the job, replies, and retires once its turn is over and nothing
;; waits for it: it leaves the registry (so its registration with the
;; sidecar ends, and a request it did not answer ends, its asker told),
;; its session stays saved, and its buffer is killed unless a window
;; shows it.  It never outlives its caller: when the caller leaves
;; (closed, retired, its buffer killed), its helpers retire at once,
;; down the chain, their awaited approvals withdrawn and their turns
;; ended.  A helper's session records its role and callers, and
;; reopens read-only (`lispm-own-agent-resume').
;;
;; A helper's approvals show who asks, "reviewer (role reviewer, helper
;; of claude)", in `*LispM approvals*'; when the caller is an own agent,
;; in the caller's session too, where C-c C-c on it allows it (C-u C-c
;; C-c denies it).
;;
;;   M-x lispm-helper-start  an own agent of a role, in the current
;;                           project, for the user: it does not retire
;;
;; The App Store's Roles shelf lists the roles; opening one runs
;; `lispm-helper-start'.  The roles a helper can be started from are
;; listed with the agents, by `list_agents' (lispm-messages.el).

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-policy)
(require 'lispm-roles)
(require 'lispm-approvals)
(require 'lispm-model)
(require 'lispm-session)
(require 'lispm-project-rules)
(require 'lispm-own-agent)

;;; Making a helper

(defun lispm-helper-make (role folder &optional caller)
  "Make an own agent of ROLE working in FOLDER, the helper of CALLER; return it.
ROLE is a role's name, a string or a symbol; its name is the base of
the agent's.  CALLER is the actor that asked for it, or nil for the
user: a helper with a caller never does more than it, and retires
once a turn of it is over.  Its model is CALLER's if CALLER is an own
agent, else `lispm-model-default'.  It is registered with Emacs and
with the sidecar, and its session notes who asked.  Signal
`lispm-role-unknown' if ROLE is no role for FOLDER, and a
`lispm-policy-error' if FOLDER is not within CALLER's."
  (let ((role (if (stringp role) (intern role) role))
        (folder (file-name-as-directory (file-truename folder))))
    (lispm-roles-check role folder)
    (when (and caller (not (lispm-policy-helper-folder-ok-p caller folder)))
      (lispm-signal 'lispm-policy-error (list folder)
                    "A helper of %s must work within %s, not in %s"
                    (lispm-actor-name caller) (lispm-actor-folder caller) folder))
    (let* ((model (if (lispm-own-agent-p caller)
                      (lispm-own-agent-model caller)
                    (lispm-model-default)))
           (callers (cl-loop for actor = caller then (lispm-actor-caller actor)
                             while actor collect (lispm-actor-name actor)))
           (agent (lispm-own-agent-make
                   folder model (lambda (name)
                                  (lispm-session-create folder model name (symbol-name role)
                                                        callers
                                                        (lispm-project-rules-find folder)))
                   role (symbol-name role))))
      (setf (lispm-actor-caller agent) caller)
      (lispm-session-insert-note
       (lispm-own-agent-buffer agent)
       (if caller
           (format "%s, role %s: a helper of %s, who asked for one." (lispm-actor-name agent)
                   role (lispm-actor-name caller))
         (format "%s, role %s: started by the user." (lispm-actor-name agent) role)))
      agent)))

(defconst lispm-helpers-unasked-seconds 60
  "Seconds after which a helper that was never given a request retires.")

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/start-helper)) params)
  "Make a helper of the role PARAMS name for their caller; answer who it is.
The answer is (:name NAME :instance SERIAL), the helper's.
PARAMS: `:role', `:caller' (the asking agent's name) and
`:caller_instance'.  The helper registers with the sidecar on its own
\(the answer does not wait for that).  An unknown caller is a
`lispm-unknown-agent', an unknown role a `lispm-role-unknown'."
  (let* ((name (plist-get params :caller))
         (instance (plist-get params :caller_instance))
         (caller (or (lispm-agent-from-params (list :name name :instance instance))
                     (lispm-signal 'lispm-unknown-agent (list name instance)
                                   "no live agent %s (instance %s) to start a helper for"
                                   name instance)))
         (role (plist-get params :role)))
    (unless (and (stringp role) (not (string-empty-p role)))
      (lispm-signal 'lispm-role-unknown (list role) "No role named: %S" role))
    (let ((helper (lispm-helper-make role (lispm-actor-folder caller) caller)))
      ;; The ask that follows may never come (the sidecar gave up on it).
      (run-at-time lispm-helpers-unasked-seconds nil #'lispm-helpers--retire-if-unasked helper)
      (list :name (lispm-actor-name helper) :instance (lispm-actor-serial helper)))))

(defun lispm-helpers--retire-if-unasked (helper)
  "Retire HELPER if it never had a turn and nothing waits for it."
  (when (null (lispm-own-agent-turns helper))
    (lispm-helpers--retire-if-done helper)))

(defun lispm-helpers--read-role (folder)
  "Read the name of a role an agent in FOLDER can have, with completion."
  (completing-read "Role: " (mapcar (lambda (role) (symbol-name (lispm-role-name role)))
                                    (lispm-roles-list folder))
                   nil t))

;;;###autoload
(defun lispm-helper-start (role &optional folder display)
  "Start LispM's own agent of ROLE in FOLDER, for the user; return it.
FOLDER defaults to the current project's root.  It is a helper without
a caller: its role's policy and tools, and it does not retire.  With
DISPLAY (always, interactively), show its buffer."
  (interactive
   (let ((folder (lispm-agents-default-folder)))
     (list (lispm-helpers--read-role folder) folder t)))
  (let ((agent (lispm-helper-make role (or folder (lispm-agents-default-folder)))))
    (when display
      (pop-to-buffer (lispm-own-agent-buffer agent)))
    agent))

;;; Retiring

(defun lispm-helper-retire (helper)
  "Retire HELPER, an own agent: take it out of the registry, keep its session.
Leaving ends its registration with the sidecar, and with it what
waits there for HELPER: a request it did not answer ends, and its
asker is told.  Its session is saved if it has unsaved changes; its
buffer is then killed, unless a window shows it (or it could not be
saved): the buffer stays, no longer an agent's, and
`lispm-own-agent-resume' brings the session back."
  (let ((buffer (lispm-own-agent-buffer helper)))
    (lispm-agents-unregister helper)
    (when (buffer-live-p buffer)
      (when (buffer-modified-p buffer)
        (lispm-session-save buffer (format "helper %s retired" (lispm-actor-name helper))))
      (if (or (get-buffer-window buffer t) (buffer-modified-p buffer))
          (lispm-own-agent-release-session buffer)
        (let ((kill-buffer-query-functions nil))
          (kill-buffer buffer))))))

(defun lispm-helpers--retire-if-done (helper)
  "Retire HELPER if it is still there, idle, and nothing waits for it."
  (when (and (lispm-agent-live-p helper)
             (not (lispm-own-agent-busy-p helper))
             (null (lispm-own-agent-pending helper)))
    (lispm-helper-retire helper)))

(defun lispm-helpers--turn-ended (agent _turn)
  "Retire AGENT, if it is a helper, once the turn that just ended is over.
From a timer: the turn's end finishes first, and what was given to
AGENT meanwhile keeps it."
  (when (lispm-actor-caller agent)
    (run-at-time 0 nil #'lispm-helpers--retire-if-done agent)))

(add-hook 'lispm-own-agent-turn-end-functions #'lispm-helpers--turn-ended)

(cl-defmethod lispm-actor-left :after ((caller lispm-actor))
  "Retire the helpers CALLER asked for, and theirs: none outlives its caller."
  (dolist (helper (lispm-agents))
    (when (and (eq (lispm-actor-caller helper) caller)
               (lispm-own-agent-p helper))
      ;; One helper's trouble must not keep the others, or CALLER's leaving.
      (condition-case err
          (lispm-helpers--retire-orphan helper caller)
        (error (lispm-agents-unregister helper)
               (message "LispM: retiring %s: %s" (lispm-actor-name helper)
                        (error-message-string err)))))))

(defun lispm-helpers--retire-orphan (helper caller)
  "Retire HELPER at once, as CALLER, its caller, left.
Its approvals still awaited are withdrawn (the approvals buffer and its
session say so, and nothing of them runs), and its session says why.
Retiring it ends its turn (`lispm-actor-left'), and its registration
with the sidecar, and with it the requests it asked and those asked of
it."
  (let ((why (format "its caller %s closed" (lispm-actor-name caller))))
    (dolist (approval (lispm-approvals-for-agent helper))
      (lispm-approvals-withdraw approval why))
    (lispm-session-insert-note (lispm-own-agent-buffer helper)
                               (format "%s retired: %s." (lispm-actor-name helper) why))
    (lispm-helper-retire helper)))

;;; Approvals in the caller's session

(defvar-keymap lispm-helpers-approval-map
  :doc "Keys on a helper's approval shown in its caller's session."
  "C-c C-c" #'lispm-helpers-decide-approval)

(defun lispm-helpers--caller-buffer (approval)
  "Return the live session buffer of the own agent that called APPROVAL's asker."
  (when-let* ((caller (lispm-actor-caller (lispm-approval-agent approval)))
              ((lispm-own-agent-p caller))
              (buffer (lispm-own-agent-buffer caller)))
    (and (buffer-live-p buffer) buffer)))

(defun lispm-helpers--approval-line (approval)
  "Return the first line of APPROVAL's note in its caller's session."
  (format "Approval %s: %s asks for %s: %s" (lispm-approval-id approval)
          (lispm-approvals-asker approval) (lispm-approval-kind approval)
          (lispm-approvals-summary approval)))

(defun lispm-helpers--note-region (buffer line)
  "Return (START . END) of the last note in BUFFER whose first line is LINE."
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (goto-char (point-max))
        (when (search-backward (concat ": " line "\n") nil t)
          (let ((start (point)))
            (forward-line 1)
            (while (looking-at-p "^:\\(?: \\|$\\)") (forward-line 1))
            (cons start (point))))))))

(defun lispm-helpers--approval-asked (approval)
  "Show APPROVAL of a helper in its caller's session, if it has one open.
There \\<lispm-helpers-approval-map>\\[lispm-helpers-decide-approval] on it
allows it; with a prefix argument, denies it."
  (when-let* ((buffer (lispm-helpers--caller-buffer approval)))
    (let ((line (lispm-helpers--approval-line approval)))
      (lispm-session-insert-note
       buffer (concat line "\n"
                      (substitute-command-keys
                       "\\<lispm-helpers-approval-map>\\[lispm-helpers-decide-approval] \
here allows it once, C-u \\[lispm-helpers-decide-approval] denies it; \
or answer it in *LispM approvals*.")))
      (when-let* ((region (lispm-helpers--note-region buffer line)))
        (with-current-buffer buffer
          (with-silent-modifications
            (add-text-properties (car region) (cdr region)
                                 (list 'lispm-approval approval
                                       'keymap lispm-helpers-approval-map
                                       'help-echo "C-c C-c: allow; C-u C-c C-c: deny"))))))))

(defun lispm-helpers--approval-decided (approval decision reason)
  "Note in the caller's session that APPROVAL got DECISION, for REASON."
  (when-let* ((buffer (lispm-helpers--caller-buffer approval)))
    (when-let* ((region (lispm-helpers--note-region
                         buffer (lispm-helpers--approval-line approval))))
      (with-current-buffer buffer
        (with-silent-modifications
          (remove-list-of-text-properties (car region) (cdr region)
                                          '(lispm-approval keymap help-echo)))))
    (lispm-session-insert-note
     buffer (format "Approval %s %s%s" (lispm-approval-id approval)
                    (pcase decision
                      ('allow "allowed once")
                      ('allow-session "allowed for the helper's session")
                      ('deny "denied")
                      (_ "withdrawn"))
                    (if (and reason (not (eq decision 'allow)) (not (eq decision 'allow-session)))
                        (concat ": " reason)
                      "")))))

(defun lispm-helpers-decide-approval (&optional deny)
  "Allow the helper's approval at point, shown in its caller's session.
With a prefix argument DENY, deny it, with a reason read from the user.
Either resumes the helper (`lispm-approvals-decide')."
  (interactive "P")
  (lispm-approvals-decide (or (get-text-property (point) 'lispm-approval)
                              (user-error "No approval of a helper here"))
                          deny))

(add-hook 'lispm-approvals-asked-functions #'lispm-helpers--approval-asked)
(add-hook 'lispm-approvals-decided-functions #'lispm-helpers--approval-decided)

(provide 'lispm-helpers)
;;; lispm-helpers.el ends here
