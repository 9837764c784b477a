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
;; recipient, request id, state and text.  Agent names, request ids and
;; the links in a message are presentations (lispm-present.el).  `f'
;; shows one agent's traffic only, `r' one request's, `RET' a whole
;; message, `g' refreshes.  `lispm-ledger-show-request' shows one
;; request's entries: a request's presentation follows to it.

;;; Code:

(require 'tabulated-list)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-present)

(defconst lispm-ledger-buffer-name "*LispM ledger*"
  "The name of the ledger view's buffer.")

(defvar-local lispm-ledger--agent nil
  "The agent whose messages the ledger view shows, or nil for all.")

(defvar-local lispm-ledger--request nil
  "The request whose entries the ledger view shows, or nil for all.")

(defvar-local lispm-ledger--entries nil
  "The entries shown, as plists from the sidecar.")

(defvar-keymap lispm-ledger-mode-map
  :doc "Keymap of the LispM ledger view."
  "RET" #'lispm-ledger-show-entry
  "f" #'lispm-ledger-filter
  "r" #'lispm-ledger-show-request)

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
  "Return a table cell for the agent NAME, a presentation when it is live."
  (if (and name (lispm-agent-get name))
      (lispm-present-string 'agent name)
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
                      (concat (lispm-present-string 'request request) " "
                              (or (plist-get entry :request_state) ""))
                    "")
                  (or (plist-get entry :state) "")
                  (concat (if-let* ((reason (plist-get entry :reason)))
                              (format "(%s) " reason)
                            "")
                          (lispm-present-text (car (split-string text "\n"))))))))

(defun lispm-ledger--newest (agent request)
  "Return the newest entries from the sidecar: AGENT's, REQUEST's, or all.
AGENT or REQUEST nil means any.  The sidecar gives the newest 500,
which the request's are looked for in."
  (let ((answer (lispm-sidecar-request
                 'lispm/ledger (append '(:limit 500) (and agent (list :agent agent))))))
    (seq-filter (lambda (entry)
                  (or (null request) (equal (plist-get entry :request_id) request)))
                (append (plist-get answer :entries) nil))))

(defun lispm-ledger--fetch (&optional entries)
  "Fill the table with ENTRIES, by default the newest from the sidecar."
  (setq lispm-ledger--entries (or entries
                                  (lispm-ledger--newest lispm-ledger--agent
                                                        lispm-ledger--request))
        tabulated-list-entries (mapcar #'lispm-ledger--row lispm-ledger--entries))
  (setq mode-line-process
        (and (or lispm-ledger--agent lispm-ledger--request)
             (format " [%s]" (string-join (delq nil (list lispm-ledger--agent
                                                          lispm-ledger--request))
                                          " ")))))

(defun lispm-ledger-filter (agent)
  "Limit the view to what AGENT sent or received; empty means everyone."
  (interactive
   (list (completing-read "Agent (empty for all): "
                          (mapcar #'lispm-actor-name (lispm-agents))))
   lispm-ledger-mode)
  (setq lispm-ledger--agent (and (not (string-empty-p agent)) agent)
        lispm-ledger--request nil)
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
(defun lispm-ledger-show-request (request)
  "Show the ledger's entries of REQUEST, an id such as \"R1\", newest first.
Interactively, the request of the entry on this line, or one asked
for.  Signal a `user-error', changing nothing, if the ledger's newest
entries know no such request."
  (interactive
   (list (or (and (derived-mode-p 'lispm-ledger-mode)
                  (when-let* ((id (tabulated-list-get-id))
                              (entry (seq-find (lambda (e) (equal (plist-get e :id) id))
                                               lispm-ledger--entries)))
                    (plist-get entry :request_id)))
             (read-string "Request: "))))
  (let ((entries (or (lispm-ledger--newest nil request)
                     (user-error "The ledger knows no request %s" request)))
        (buffer (get-buffer-create lispm-ledger-buffer-name)))
    (with-current-buffer buffer
      (unless (derived-mode-p 'lispm-ledger-mode)
        (lispm-ledger-mode))
      (setq lispm-ledger--agent nil
            lispm-ledger--request request)
      (lispm-ledger--fetch entries)
      (tabulated-list-print t)
      (goto-char (point-min)))
    (pop-to-buffer buffer)
    buffer))

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
      (setq lispm-ledger--agent agent
            lispm-ledger--request nil)
      (lispm-ledger--fetch)
      (tabulated-list-print t))
    (pop-to-buffer-same-window buffer)))

;;; Presentations of requests

(cl-defmethod lispm-present-follow ((_type (eql 'request)) id &optional _arg)
  "Show the request ID in the ledger."
  (lispm-ledger-show-request id))

(cl-defmethod lispm-present-type-actions ((_type (eql 'request)) id)
  "Return the action on the request ID: show it in the ledger."
  (list (lispm-present-follow-action "Show the request in the ledger" 'request id)))

(provide 'lispm-ledger)
;;; lispm-ledger.el ends here
