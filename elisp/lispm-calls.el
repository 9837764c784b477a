;;; lispm-calls.el --- Other agents calling LispM's tools, under the user's policy  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The sidecar forwards three MCP tools of every agent to Emacs:
;; `search_tools', `skill' and `call_tool'.  A call runs as an agent of
;; `lispm-policy-default-role', in the caller's own folder:
;;
;;   1. the tool must exist and its arguments match its schema;
;;   2. what it would touch must lie in the agent's folder (refused before
;;      anyone is asked);
;;   3. the policy decides: allow runs it, deny refuses it, ask shows it in
;;      the approvals buffer and answers later;
;;   4. every decision goes to the ledger.
;;
;; jsonrpc.el must answer a request at once, so a call that waits (for
;; the user, or for a shell command) answers `(:pending t)', and its
;; result follows as the notification `lispm/tool-result'.

;;; Code:

(require 'lispm-agents)
(require 'lispm-tools)
(require 'lispm-skills)
(require 'lispm-policy)
(require 'lispm-approvals)

(defun lispm-calls--agent (params)
  "Return the live agent PARAMS name, or signal `lispm-unknown-agent'."
  (or (lispm-agent-from-params params)
      (lispm-signal 'lispm-unknown-agent
                    (list (plist-get params :name) (plist-get params :instance))
                    "no live agent %s" (plist-get params :name))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/search-tools)) params)
  "Find the tools and skills PARAMS' query names."
  (let ((agent (lispm-calls--agent params)))
    (list :results (vconcat (lispm-tools-search (or (plist-get params :query) "")
                                                (lispm-actor-folder agent))))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/skill)) params)
  "Load the skill PARAMS name for the agent they name."
  (lispm-skill-load (plist-get params :skill) (lispm-calls--agent params)))

(defun lispm-calls--summary (tool args)
  "Return a one-line summary of calling TOOL with ARGS, for the audit."
  (let ((first (cadr args)))
    (truncate-string-to-width
     (format "%s %s" (lispm-tool-name tool) (if (stringp first) first ""))
     200 nil nil "…")))

(defun lispm-calls--audit (agent role tool args decision &optional reason)
  "Record in the ledger the DECISION on AGENT (of ROLE) calling TOOL with ARGS."
  (lispm-sidecar-notify 'lispm/audit
                        (list :agent (lispm-actor-name agent) :role (symbol-name role)
                              :kind (symbol-name (lispm-tool-kind tool))
                              :what (lispm-calls--summary tool args)
                              :decision (symbol-name decision)
                              :reason reason)))

(defun lispm-calls--finish (call-id result)
  "Send the sidecar RESULT, a plist, of the waiting call CALL-ID."
  (lispm-sidecar-notify 'lispm/tool-result (append (list :call_id call-id) result)))

(defun lispm-calls--running-bound ()
  "Return the seconds within which a running tool's result is sent.
The longest a deferred tool may run (its own timeout kills it), plus
a margin; the sidecar abandons the call after that."
  (+ (max lispm-tools-shell-timeout lispm-tools-grep-timeout) 30))

(defun lispm-calls--run (tool agent args call-id)
  "Run TOOL for AGENT with ARGS; return its result, or a pending answer.
A result that comes later is sent as the result of CALL-ID; the pending
answer says within how many seconds it comes."
  (let (result (answered nil))
    (lispm-tools-run tool agent args
                     (lambda (value)
                       (if answered
                           (lispm-calls--finish call-id value)
                         (setq result value))))
    (setq answered t)
    (or result (list :pending t :within (lispm-calls--running-bound)))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/call-tool)) params)
  "Run the tool named in PARAMS for the agent named there, under the policy."
  (let* ((agent (lispm-calls--agent params))
         (call-id (plist-get params :call_id))
         (args (plist-get params :args))
         (role lispm-policy-default-role)
         (tool (lispm-tool-get (plist-get params :tool))))
    (condition-case err
        (progn
          (unless tool
            (signal 'lispm-tool-error
                    (list (format "no tool %s; search_tools finds LispM's tools"
                                  (plist-get params :tool)))))
          (lispm-tools-validate tool args)
          (let* ((target (lispm-tool-target tool agent args))
                 (decision (lispm-policy-decide agent role (lispm-tool-kind tool) target)))
            (pcase decision
              ('allow
               (lispm-calls--audit agent role tool args 'allow "by policy")
               (lispm-calls--run tool agent args call-id))
              ('deny
               (lispm-calls--audit agent role tool args 'deny "by policy")
               (list :ok nil :error (format "%s is denied by the user's policy for role %s"
                                            (lispm-tool-kind tool) role)))
              (_
               (lispm-approvals-request
                agent role (lispm-tool-kind tool) target
                (lambda (answer) (lispm-calls--decided tool agent args call-id answer))
                (lispm-calls--summary tool args))
               '(:pending t)))))
      (lispm-error (list :ok nil :error (lispm-tools-error-message err))))))

(defun lispm-calls--decided (tool agent args call-id answer)
  "Act on the user's ANSWER to AGENT calling TOOL with ARGS, the call CALL-ID."
  (pcase (plist-get answer :decision)
    ('allow
     (let ((result (lispm-calls--run tool agent args call-id)))
       (unless (plist-get result :pending)
         (lispm-calls--finish call-id result))))
    (_
     (lispm-calls--finish
      call-id (list :ok nil
                    :error (format "%s: %s" (if (eq (plist-get answer :decision) 'withdrawn)
                                                "withdrawn" "denied by the user")
                                   (or (plist-get answer :reason) "no reason given")))))))

(provide 'lispm-calls)
;;; lispm-calls.el ends here
