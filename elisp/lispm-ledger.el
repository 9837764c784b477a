;;; lispm-ledger.el --- The ledger of messages, requests and replies  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `M-x lispm-ledger' shows what LispM's agents said to each other, newest
;; first, from the sidecar's durable ledger: time, kind, sender,
;; recipient, request id, state and text.  Agent names and the places in
;; a message ([[file:PATH::LINE]], [[buffer:NAME]]) are buttons.  `f'
;; shows one agent's traffic only, `RET' a whole message, `g' refreshes.

;;; Code:

(require 'tabulated-list)
(require 'lispm-sidecar)
(require 'lispm-present)

(defconst lispm-ledger-buffer-name "*LispM ledger*"
  "The name of the ledger view's buffer.")

(defvar-local lispm-ledger--agent nil
  "The agent whose messages the ledger view shows, or nil for all.")

(defvar-local lispm-ledger--entries nil
  "The entries shown, as plists from the sidecar.")

(defvar-keymap lispm-ledger-mode-map
  :doc "Keymap of the LispM ledger view."
  "RET" #'lispm-ledger-show-entry
  "f" #'lispm-ledger-filter)

(define-derived-mode lispm-ledger-mode tabulated-list-mode "LispM-Ledger"
  "The ledger of LispM's messages, requests and replies, newest first.
\\{lispm-ledger-mode-map}"
  (setq tabulated-list-format
        [("Time" 8 nil) ("Kind" 7 t) ("From" 10 t) ("To" 10 t) ("Request" 12 t)
         ("State" 10 t) ("Text" 0 nil)])
  (setq tabulated-list-padding 1)
  (add-hook 'tabulated-list-revert-hook #'lispm-ledger--fetch nil t)
  (tabulated-list-init-header))

(defun lispm-ledger--agent-cell (name)
  "Return a table cell for the agent NAME, a button when it is live."
  (if (and name (lispm-agent-get name))
      (list name 'type 'lispm-agent 'lispm-agent name)
    (or name "")))

(defun lispm-ledger--time (seconds)
  "Format SECONDS since the epoch as a time of day, or a date if not today."
  (if (not (numberp seconds))
      ""
    (format-time-string (if (equal (format-time-string "%F" seconds) (format-time-string "%F"))
                            "%T" "%m-%d")
                        seconds)))

(defun lispm-ledger--row (entry)
  "Return the tabulated-list row of the ledger ENTRY."
  (let ((text (or (plist-get entry :text) "")))
    (list (plist-get entry :id)
          (vector (lispm-ledger--time (plist-get entry :time))
                  (or (plist-get entry :kind) "")
                  (lispm-ledger--agent-cell (plist-get entry :sender))
                  (lispm-ledger--agent-cell (plist-get entry :recipient))
                  (if-let* ((request (plist-get entry :request_id)))
                      (format "%s %s" request (or (plist-get entry :request_state) ""))
                    "")
                  (or (plist-get entry :state) "")
                  (concat (if-let* ((reason (plist-get entry :reason)))
                              (format "(%s) " reason)
                            "")
                          (lispm-present-text (car (split-string text "\n"))))))))

(defun lispm-ledger--fetch ()
  "Fetch the newest entries from the sidecar and fill the table."
  (let ((answer (lispm-sidecar-request
                 'lispm/ledger (append '(:limit 500)
                                       (and lispm-ledger--agent
                                            (list :agent lispm-ledger--agent))))))
    (setq lispm-ledger--entries (append (plist-get answer :entries) nil)
          tabulated-list-entries (mapcar #'lispm-ledger--row lispm-ledger--entries))
    (setq mode-line-process (and lispm-ledger--agent (format " [%s]" lispm-ledger--agent)))))

(defun lispm-ledger-filter (agent)
  "Limit the view to what AGENT sent or received; empty means everyone."
  (interactive
   (list (completing-read "Agent (empty for all): "
                          (mapcar #'lispm-actor-name (lispm-agents))))
   lispm-ledger-mode)
  (setq lispm-ledger--agent (and (not (string-empty-p agent)) agent))
  (revert-buffer))

(defun lispm-ledger-show-entry ()
  "Show the whole message of the entry on this line, with live links."
  (interactive nil lispm-ledger-mode)
  (let* ((id (or (tabulated-list-get-id) (user-error "No entry on this line")))
         (entry (seq-find (lambda (e) (equal (plist-get e :id) id)) lispm-ledger--entries)))
    (with-help-window (format "*LispM message %s*" id)
      (with-current-buffer standard-output
        (insert (format "%s from %s to %s%s, %s%s\n\n"
                        (plist-get entry :kind) (plist-get entry :sender)
                        (plist-get entry :recipient)
                        (if-let* ((request (plist-get entry :request_id)))
                            (format " (request %s)" request) "")
                        (plist-get entry :state)
                        (if-let* ((reason (plist-get entry :reason)))
                            (format ": %s" reason) "")))
        (insert (lispm-present-text (or (plist-get entry :text) "")))))))

;;;###autoload
(defun lispm-ledger (&optional agent)
  "Show the ledger of LispM's messages, newest first.
With a prefix argument, ask for the AGENT whose messages to show."
  (interactive (list (and current-prefix-arg
                          (completing-read "Agent: " (mapcar #'lispm-actor-name (lispm-agents))))))
  (let ((buffer (get-buffer-create lispm-ledger-buffer-name)))
    (with-current-buffer buffer
      (unless (derived-mode-p 'lispm-ledger-mode)
        (lispm-ledger-mode))
      (setq lispm-ledger--agent agent)
      (lispm-ledger--fetch)
      (tabulated-list-print t))
    (pop-to-buffer-same-window buffer)))

(provide 'lispm-ledger)
;;; lispm-ledger.el ends here
