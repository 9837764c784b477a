;;; lispm-list.el --- The list of LispM agents  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `M-x lispm' shows every live agent in one list: name, kind, folder,
;; state, queued messages, MCP port, and why the agent needs you, if it
;; does (`lispm-notice-reasons'), after a "!".  The list follows the
;; registry live.  RET visits an agent's terminal, `k' closes the agent, `g'
;; refreshes, `s' starts a new agent, `A' shows what the agent on the
;; line waits for the user to approve.

;;; Code:

(require 'tabulated-list)
(require 'lispm-agents)
(require 'lispm-resume)
(require 'lispm-notice)
(require 'lispm-present)

(declare-function lispm-start-agent "lispm" (kind &optional folder))
(declare-function lispm-inspect "lispm-inspect" (agent))

(defconst lispm-list-buffer-name "*LispM*"
  "The name of the agent list's buffer.")

(defvar-keymap lispm-list-mode-map
  :doc "Keymap of the LispM agent list."
  "RET" #'lispm-list-visit
  "A" #'lispm-approvals-show
  "i" #'lispm-inspect
  "k" #'lispm-list-close
  "s" #'lispm-start-agent)

(define-derived-mode lispm-list-mode tabulated-list-mode "LispM"
  "The list of LispM's agents.
\\{lispm-list-mode-map}"
  (setq tabulated-list-format
        [("Name" 12 t) ("Kind" 8 t) ("Role" 10 t) ("Folder" 36 t) ("State" 30 t)
         ("Queued" 7 t :right-align t) ("MCP port" 8 t :right-align t)
         ("Used" 16 t) ("Needs you" 30 t)])
  (setq tabulated-list-padding 1)
  (add-hook 'tabulated-list-revert-hook #'lispm-list--fill nil t)
  (tabulated-list-init-header))

(defgroup lispm-list nil
  "The list of LispM's agents."
  :group 'lispm
  :prefix "lispm-list-")

(defface lispm-list-starting '((t :inherit shadow))
  "Face of the state of an agent that is starting.")

(defface lispm-list-running '((t :inherit success))
  "Face of the state of an agent that is running.")

(defface lispm-list-idle '((t :inherit success))
  "Face of the state of an agent that waits for its user.")

(defface lispm-list-busy '((t :inherit warning))
  "Face of the state of an agent that is working.")

(defface lispm-list-waiting-for-approval '((t :inherit error))
  "Face of the state of an agent whose CLI waits for the user's approval.")

(defface lispm-list-needs-you '((t :inherit warning))
  "Face of why an agent needs the user.")

(defun lispm-list--entry (agent)
  "Return the tabulated-list entry of AGENT."
  (let ((state (symbol-name (lispm-agent-display-state agent))))
    (list (lispm-actor-name agent)
          (vector (lispm-present-string 'agent (lispm-actor-name agent))
                  (symbol-name (lispm-actor-kind agent))
                  (symbol-name (lispm-actor-effective-role agent))
                  (abbreviate-file-name (lispm-actor-folder agent))
                  (concat (propertize state 'face (intern-soft (concat "lispm-list-" state)))
                          (if-let* ((step (lispm-actor-step agent)))
                              (concat ": " step)
                            ""))
                  (if (lispm-agent-p agent) (number-to-string (lispm-agent-queued agent)) "")
                  (if-let* ((port (and (lispm-agent-p agent) (lispm-agent-port agent))))
                      (number-to-string port)
                    "")
                  (if-let* ((usage (lispm-actor-usage agent)))
                      (format "%s%s" (lispm-list--tokens (+ (plist-get usage :input)
                                                            (plist-get usage :output)))
                              (if (plist-get usage :cost)
                                  (format " $%.2f" (plist-get usage :cost))
                                ""))
                    "")
                  (if-let* ((reasons (lispm-notice-reasons agent)))
                      (propertize (concat "! " (mapconcat #'cdr reasons ", "))
                                  'face 'lispm-list-needs-you)
                    "")))))

(defun lispm-list--tokens (count)
  "Return COUNT tokens in few characters: 950, 12.3k, 4.1M."
  (cond ((< count 1000) (number-to-string count))
        ((< count 1000000) (format "%.1fk" (/ count 1000.0)))
        (t (format "%.1fM" (/ count 1000000.0)))))

(defun lispm-list--fill ()
  "Fill the list from the registry."
  (setq tabulated-list-entries (mapcar #'lispm-list--entry (lispm-agents))))

(defun lispm-list--refresh ()
  "Redisplay the agent list, if it is open, keeping point on its agent."
  (when-let* ((buffer (get-buffer lispm-list-buffer-name)))
    (with-current-buffer buffer
      (lispm-list--fill)
      (tabulated-list-print t))))

(add-hook 'lispm-agents-changed-hook #'lispm-list--refresh)
(add-hook 'lispm-notice-changed-hook #'lispm-list--refresh)

(defun lispm-list--agent ()
  "Return the agent on the current line, or signal a `user-error'."
  (or (when-let* ((name (tabulated-list-get-id))) (lispm-agent-get name))
      (user-error "No agent on this line")))

(defun lispm-list-visit ()
  "Visit the buffer of the agent on this line: a terminal agent's terminal."
  (interactive nil lispm-list-mode)
  (let ((buffer (lispm-actor-home-buffer (lispm-list--agent))))
    (if (buffer-live-p buffer)
        (pop-to-buffer buffer)
      (user-error "That agent's buffer is not open yet"))))

(defun lispm-list--close-warning (agent)
  "Return why closing AGENT now would cut something short, or nil."
  (let ((state (lispm-agent-display-state agent))
        (queued (if (lispm-agent-p agent) (lispm-agent-queued agent) 0)))
    (cond ((eq state 'busy) "is working")
          ((eq state 'waiting-for-approval) "waits for your approval in its terminal")
          ((> queued 0) (format "has %d message%s waiting" queued (if (= queued 1) "" "s"))))))

(defun lispm-list-close ()
  "Close the agent on this line: end its CLI and stop its server.
Ask first if it is working, waits for an approval or has messages
waiting for it; an idle agent closes at once."
  (interactive nil lispm-list-mode)
  (let* ((agent (lispm-list--agent))
         (warning (lispm-list--close-warning agent)))
    (when (or (null warning)
              (y-or-n-p (format "%s %s; close it anyway? " (lispm-actor-name agent) warning)))
      (lispm-agent-close agent))))

;;;###autoload
(defun lispm ()
  "Show the list of LispM's agents.
The first time after Emacs exited with agents running uncleanly, offer
to resume them (see `lispm-resume-offer')."
  (interactive)
  (let ((buffer (get-buffer-create lispm-list-buffer-name)))
    (with-current-buffer buffer
      (unless (derived-mode-p 'lispm-list-mode)
        (lispm-list-mode))
      (lispm-list--fill)
      (tabulated-list-print t))
    (pop-to-buffer-same-window buffer)
    (lispm-resume-offer)))

(provide 'lispm-list)
;;; lispm-list.el ends here
