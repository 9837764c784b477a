;;; lispm-calls.el --- The one call pipeline: any actor calling LispM's tools, under the policy  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The one way a tool is called, by any actor: LispM's own agent, and
;; the other agents through their MCP servers.
;;
;;   (lispm-calls-invoke ACTOR TOOL-NAME ARGS CALLBACK &key ON-ASK)
;;
;; runs, in order:
;;
;;   1. validate: the tool must exist (`lispm-tool-unknown') and its
;;      arguments, a plist or a JSON object's text, match its schema
;;      (`lispm-tool-bad-args'); a tool outside the actor's role (for a
;;      helper, outside its callers' too: `lispm-roles-actor-tools') is
;;      refused by the policy, audited, and no one is asked;
;;   2. target: what it would touch must lie in the actor's folder
;;      (`lispm-tool-outside-folder'), and be neither a file of keys nor
;;      one of LispM's sessions, refused before anyone is asked;
;;   3. decide, with the policy of the ACTOR's role, and of its callers
;;      up a helper's chain: allow runs it, deny refuses it (naming the
;;      caller and role that refuse), ask shows it in the approvals
;;      buffer and goes on when the user answers
;;      (`lispm-approvals-authorize');
;;   4. run (`lispm-tools-run');
;;   5. audit, by one rule for every caller: every refusal (steps 1-3,
;;      and what a tool refused or a program LispM refused or ended at
;;      a limit, `lispm-calls--refusals'), under the role that refused,
;;      and the user's answers, always; actions allowed at once if their
;;      kind is in `lispm-approvals-audit-automatic'.
;;
;; CALLBACK gets one outcome, exactly once: (:ok t :text TEXT :changes
;; CHANGES), or (:ok nil :error MESSAGE :condition ERR).  A refusal is
;; the condition `lispm-policy-denied', whose data is (MESSAGE KIND BY
;; REASON): BY is `policy', `user' or `withdrawn'.
;;
;; A tool that makes calls of its own (`run_lisp') makes them through
;; this pipeline too, as the same actor; while its body runs,
;; `lispm-calls-caller' holds its caller's ON-ASK and ON-DECIDED, so
;; that the approvals its calls wait for show where the caller shows
;; its own.
;;
;; The sidecar forwards three MCP tools of every agent to Emacs:
;; `search_tools', `skill' and `call_tool'.  `call_tool' is glue over
;; `lispm-calls-invoke': jsonrpc.el must answer a request at once, so a
;; call that waits (for the user, or for a shell command) answers
;; `(:pending t)', and its result follows as the notification
;; `lispm/tool-result'.  A call the sidecar gives up (at its deadline,
;; or cancelled by the agent's client) comes back as
;; `lispm/tool-abandoned', and the approval it waited for is withdrawn.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-agents)
(require 'lispm-tools)
(require 'lispm-skills)
(require 'lispm-secrets)
(require 'lispm-policy)
;; The roles need the policy, not the pipeline: no cycle.
(require 'lispm-roles)
(require 'lispm-approvals)

;;; The pipeline

(defvar lispm-calls-caller nil
  "While a tool's body runs: how its caller hears of approvals.
A plist (:on-ask FUNCTION :on-decided FUNCTION), as given to
`lispm-calls-invoke', for the calls the tool makes of its own.")

(defun lispm-calls--tool (name)
  "Return the registered tool NAME, or signal `lispm-tool-unknown'."
  (or (and (stringp name) (lispm-tool-get name))
      (lispm-signal 'lispm-tool-unknown (list name)
                    "no tool %s; search_tools finds LispM's tools"
                    (if (stringp name) name (format "%S" name)))))

(defun lispm-calls--args (tool args)
  "Return ARGS of a call of TOOL as a plist.
ARGS is a plist, a hash table, nil, or the text of a JSON object (empty
text means no arguments).  Signal `lispm-tool-bad-args' for text that
is not valid JSON."
  (if (not (stringp args))
      args
    (if (string-empty-p (string-trim args))
        nil
      (condition-case err
          (let ((value (json-parse-string args :object-type 'plist)))
            (if (and (listp value) (cl-evenp (length value)))
                value
              (lispm-signal 'lispm-tool-bad-args (list args)
                            "%s: the arguments must be a JSON object, not %s"
                            (lispm-tool-name tool)
                            (truncate-string-to-width args 60 nil nil "..."))))
        (json-error
         (lispm-signal 'lispm-tool-bad-args (list args)
                       "%s: the arguments are not valid JSON (%s): %s"
                       (lispm-tool-name tool) (error-message-string err)
                       (truncate-string-to-width args 60 nil nil "...")))))))

(defun lispm-calls--summary (tool args)
  "Return a one-line summary of calling TOOL with ARGS, for the audit."
  (let ((first (and (proper-list-p args) (cadr args))))
    (truncate-string-to-width
     (format "%s %s" (lispm-tool-name tool) (if (stringp first) first ""))
     200 nil nil "…")))

(defun lispm-calls--failure (err &optional changes)
  "Return the outcome of a call that failed with ERR, a condition object.
CHANGES, if any, are what it changed before it failed."
  (append (list :ok nil :error (lispm-error-message err) :condition err)
          (and changes (list :changes changes))))

(defun lispm-calls--outcome (result)
  "Return the outcome of RESULT, what `lispm-tools-run' gave."
  (if (plist-get result :ok)
      (append (list :ok t :text (or (plist-get result :text) "")
                    :changes (plist-get result :changes))
              ;; An accepted ask's request, which its call waits on.
              (and (plist-get result :request_id)
                   (list :request_id (plist-get result :request_id))))
    (let* ((text (or (plist-get result :error) "failed"))
           (condition (plist-get result :condition))
           (err (cond ((consp condition) condition)
                      ((and (stringp condition) (get (intern condition) 'error-conditions))
                       (list (intern condition) text))
                      (t (list 'lispm-tool-error text)))))
      (append (list :ok nil :error text :condition err)
              (and (plist-get result :changes)
                   (list :changes (plist-get result :changes)))))))

(defun lispm-calls--run (tool actor args callback caller &optional answer)
  "Run TOOL for ACTOR with ARGS; give CALLBACK its outcome.
CALLER is the plist `lispm-calls-caller' holds while the body runs.
ANSWER is the user's, if asked: its `:review', the hunks of an edit
the user let through (`lispm-review-accepted'), and its `:sandbox',
what a shell command may do beyond its sandbox
\(`lispm-sandbox-widened'), hold while the body runs."
  (let ((lispm-calls-caller caller)
        (lispm-review-accepted (plist-get answer :review))
        (lispm-sandbox-widened (plist-get answer :sandbox)))
    (lispm-tools-run tool actor args
                     (lambda (result) (funcall callback (lispm-calls--outcome result))))))

(defun lispm-calls--decided (tool actor args callback answer caller)
  "Go on with ACTOR's call of TOOL with ARGS after the decision ANSWER.
ANSWER is what `lispm-approvals-authorize' gives; CALLBACK gets the
call's outcome; CALLER is the caller's plist of `lispm-calls-caller'."
  (pcase (plist-get answer :decision)
    ('allow (lispm-calls--run tool actor args callback caller answer))
    (decision
     ;; A refusal from a caller up a helper's chain names that caller's
     ;; role, and why; the policy of the actor's own role needs no more.
     (funcall callback
              (lispm-calls--failure
               (lispm-policy-denial (lispm-tool-kind tool)
                                    (cond ((eq decision 'withdrawn) 'withdrawn)
                                          ((plist-get answer :by))
                                          (t 'user))
                                    (and (or (not (eq (plist-get answer :by) 'policy))
                                             (plist-get answer :denier))
                                         (plist-get answer :reason))
                                    (or (plist-get answer :role)
                                        (lispm-actor-effective-role actor))))))))

(defun lispm-calls--tool-refusal (actor tool)
  "Return why ACTOR may not use TOOL at all, or nil if it may.
That is (REASON . ROLE): REASON a string, naming who refuses, and ROLE
the refusing role.  An actor may use the tools of its role, and a
helper only those its callers may use too (`lispm-roles-actor-tools'):
the one who refuses is the last up the chain that may not use it."
  (let ((name (lispm-tool-name tool)))
    (cl-flet ((allowed-p (actor)
                (let ((tools (lispm-roles-actor-tools actor)))
                  (or (eq tools 'all) (member name tools)))))
      (unless (allowed-p actor)
        (let ((denier actor))
          (while (and (lispm-actor-caller denier) (not (allowed-p (lispm-actor-caller denier))))
            (setq denier (lispm-actor-caller denier)))
          (cons (if (eq denier actor)
                    (format "%s is not among the tools of role %s"
                            name (lispm-actor-effective-role actor))
                  (format "%s is not among the tools of %s (role %s), whose helper %s is"
                          name (lispm-actor-name denier) (lispm-actor-effective-role denier)
                          (lispm-actor-name actor)))
                (lispm-actor-effective-role denier)))))))

(defconst lispm-calls--refusals
  '(lispm-policy-denied lispm-tool-outside-folder lispm-lisp-refused
                        lispm-lisp-fuel-exhausted)
  "The conditions of a call's failure that are refusals, each audited.")

(defun lispm-calls--refusal-p (outcome)
  "Return non-nil if OUTCOME is a failure that LispM refused.
A denial, a path outside the folder, a run_lisp program LispM will
not run, or ended at one of its limits (its fuel, memory, time, calls
or approvals, `lispm-lisp-limit-exceeded' a kind of running out of
fuel)."
  (and (not (plist-get outcome :ok))
       (let* ((condition (plist-get outcome :condition))
              (symbol (cond ((consp condition) (car condition))
                            ((stringp condition) (intern-soft condition))
                            (t condition))))
         (and symbol (symbolp symbol)
              (cl-intersection (get symbol 'error-conditions) lispm-calls--refusals)))))

(cl-defun lispm-calls-invoke (actor tool-name args callback &key on-ask on-decided within)
  "Call the tool TOOL-NAME with ARGS as ACTOR, under the policy of its role.
ACTOR is a `lispm-actor'.  ARGS is a plist with keyword keys, as
`json-parse-string' gives with `:object-type' `plist', or the text of a
JSON object.  The call is validated, its target confined to ACTOR's
folder, decided by the policy of ACTOR's role (asking the user if it
says so), run and audited; see the Commentary.

CALLBACK is called exactly once, perhaps before this returns, with the
outcome: (:ok t :text TEXT :changes CHANGES), CHANGES a list of the
`lispm-change's the call made, or (:ok nil :error MESSAGE :condition
ERR), ERR the condition object (SYMBOL . DATA).  (A failure inside
the tool carries its condition's symbol and message, not its other
data: `lispm-tools-run' keeps only those.)  A refusal is
`lispm-policy-denied'; an unknown tool `lispm-tool-unknown'; bad or
unreadable arguments `lispm-tool-bad-args'; a path outside the folder
`lispm-tool-outside-folder'; and whatever the tool itself signals.
When the user is asked, ON-ASK, if non-nil, is called with the
`lispm-approval' before this returns, and ON-DECIDED, if non-nil, with
the approval and the answer (a plist whose `:decision' is `allow',
`deny' or `withdrawn', and `:reason') once the user decides, before
the call runs.  WITHIN, if non-nil, says what the call is part of (\"call
3 of the run_lisp program ...\"), and the approval's title says it too.
Return nil; never signal."
  (let* ((called nil)
         (audited nil)
         (known nil)
         (done (lambda (outcome)
                 (unless called
                   (setq called t)
                   ;; Every refusal is audited, once: those no decision
                   ;; step recorded too (a path outside the folder, a file
                   ;; of keys, a program refused or past its limits).
                   (when (and known (not audited) (lispm-calls--refusal-p outcome))
                     (lispm-approvals-refuse actor (lispm-actor-effective-role actor)
                                             (lispm-tool-kind known) nil #'ignore
                                             (lispm-calls--summary known args)
                                             (plist-get outcome :error)))
                   (funcall callback outcome))))
         (caller (list :on-ask on-ask :on-decided on-decided))
         (approval nil)
         tool target)
    (condition-case err
        (setq tool (lispm-calls--tool tool-name)
              args (lispm-calls--args tool args)
              known tool)
      (error (setq tool nil)
             (funcall done (lispm-calls--failure err))))
    (when-let* ((refused tool)
                (refusal (lispm-calls--tool-refusal actor refused)))
      (setq tool nil audited t)
      (let ((kind (lispm-tool-kind refused)))
        ;; Audited under the role that refuses: a caller's, up the chain.
        (lispm-approvals-refuse
         actor (cdr refusal) kind nil
         (lambda (_answer)
           (funcall done (lispm-calls--failure
                          (lispm-policy-denial kind 'policy (car refusal) (cdr refusal)))))
         (lispm-calls--summary refused args) (car refusal))))
    (when tool
      (condition-case err
          (setq target (lispm-tool-target tool actor args))
        (error (setq tool nil)
               (funcall done (lispm-calls--failure err)))))
    (when tool
      ;; Outside the `condition-case': an error of CALLBACK's own, called
      ;; from here when the tool runs at once, is not the call's failure.
      (let ((approval-id
             (lispm-approvals-authorize
              actor (lispm-actor-effective-role actor) (lispm-tool-kind tool) target
              (lambda (answer)
                ;; Every answer but `allow' is in the ledger already.
                (unless (eq (plist-get answer :decision) 'allow)
                  (setq audited t))
                (when (and approval on-decided)
                  (lispm-calls--tell on-decided approval approval answer))
                (lispm-calls--decided tool actor args done answer caller))
              (if within
                  (format "%s (%s)" (lispm-calls--summary tool args) within)
                (lispm-calls--summary tool args)))))
        (when approval-id
          (setq approval (lispm-approvals-get approval-id))
          (when on-ask
            (lispm-calls--tell on-ask approval approval)))))
    nil))

(defun lispm-calls--tell (function approval &rest args)
  "Call FUNCTION with ARGS, telling a caller of APPROVAL; report its errors."
  (condition-case err
      (apply function args)
    (error (message "LispM: telling of approval %s failed: %s"
                    (lispm-approval-id approval) (error-message-string err)))))

;;; The MCP tools that Emacs answers

(defun lispm-calls--agent (params)
  "Return the live actor PARAMS name, or signal `lispm-unknown-agent'."
  (or (lispm-agent-from-params params)
      (lispm-signal 'lispm-unknown-agent
                    (list (plist-get params :name) (plist-get params :instance))
                    "no live agent %s" (plist-get params :name))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/search-tools)) params)
  "Find the tools and skills PARAMS' query names.
The messaging tools are left out: an agent with an MCP server has its
own `send_message', `ask_agent' and `reply' there; and the plan tool,
as such an agent has no session to keep a plan in."
  (let ((agent (lispm-calls--agent params)))
    (list :results (vconcat (cl-remove-if
                             (lambda (found) (member (plist-get found :kind) '("message" "plan")))
                             (lispm-tools-search (or (plist-get params :query) "")
                                                 (lispm-actor-folder agent)))))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/skill)) params)
  "Load the skill PARAMS name for the agent they name.
The secrets Emacs knows of are withheld from its instructions, as from
every tool's result (`lispm-secrets-redact')."
  (let ((loaded (lispm-skill-load (plist-get params :skill) (lispm-calls--agent params))))
    (plist-put (copy-sequence loaded) :instructions
               (lispm-secrets-redact (plist-get loaded :instructions)))))

(defun lispm-calls--json (outcome)
  "Return OUTCOME as the sidecar takes a tool's result: text or error, for JSON."
  (if (plist-get outcome :ok)
      (list :ok t :text (plist-get outcome :text))
    (list :ok nil :error (plist-get outcome :error))))

(defun lispm-calls--finish (call-id result)
  "Send the sidecar RESULT, a plist, of the waiting call CALL-ID."
  (lispm-sidecar-notify 'lispm/tool-result (append (list :call_id call-id) result)))

(defun lispm-calls--running-bound ()
  "Return the seconds within which a running tool's result is sent.
The longest a deferred tool may run (its own timeout kills it), plus
a margin; the sidecar abandons the call after that."
  (+ (max lispm-tools-shell-timeout lispm-tools-grep-timeout) 30))

(defvar lispm-calls--asking (make-hash-table :test 'equal)
  "The approvals the sidecar's calls wait for, by the call's id.")

(cl-defmethod lispm-sidecar-handle-notification ((_method (eql 'lispm/tool-abandoned)) params)
  "Withdraw the approval of the call PARAMS name, which the sidecar gave up.
It gave up at its deadline, or the agent's client cancelled the call:
no answer would reach anyone."
  (let ((call-id (plist-get params :call_id)))
    (when-let* ((approval (gethash call-id lispm-calls--asking)))
      (remhash call-id lispm-calls--asking)
      (lispm-approvals-withdraw
       approval (if (equal (plist-get params :reason) "deadline")
                    "the sidecar gave up the call at its deadline"
                  (format "%s cancelled the call"
                          (lispm-actor-name (lispm-approval-agent approval))))))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/call-tool)) params)
  "Run the tool named in PARAMS for the agent named there, under the policy.
The answer is the result, if it is there at once; else (:pending t),
with `:within' SECONDS when the tool is running rather than waiting for
the user, and the result follows as `lispm/tool-result'."
  (let ((agent (lispm-calls--agent params))
        (call-id (plist-get params :call_id))
        (answer nil)
        (answered nil)
        (asked nil))
    (lispm-calls-invoke agent (plist-get params :tool) (plist-get params :args)
                        (lambda (outcome)
                          (remhash call-id lispm-calls--asking)
                          (if answered
                              (lispm-calls--finish call-id (lispm-calls--json outcome))
                            (setq answer (lispm-calls--json outcome))))
                        :on-ask (lambda (approval)
                                  (setq asked t)
                                  (puthash call-id approval lispm-calls--asking)))
    (setq answered t)
    (cond (answer)
          ;; A program waits for the approvals of its own calls, and
          ;; its fuel bounds the rest: no deadline of a process's.
          ((or asked (equal (plist-get params :tool) "run_lisp")) (list :pending t))
          (t (list :pending t :within (lispm-calls--running-bound))))))

(provide 'lispm-calls)
;;; lispm-calls.el ends here
