;;; lispm-messages.el --- Messaging for actors that live in Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A terminal agent sends, asks and replies with the tools of its MCP
;; server; an actor without a terminal, such as LispM's own agent, does
;; the same over the link, through the sidecar's one `Messenger', with
;; the same checks and errors and the same ledger.
;;
;; The sidecar knows such an actor as an agent of kind `lispm': no
;; executable, no terminal, no MCP server.  `lispm-messages-register'
;; registers it (`lispm/agent-start'); it stays registered until it
;; leaves the registry, and a restarted sidecar gets it back.  What it
;; is doing is Emacs's to tell: `lispm-messages-report-activity' sends
;; its activity (`lispm/actor-activity'), and while that is `idle' the
;; sidecar hands it each due message (`emacs/deliver'), which goes to
;; the generic `lispm-actor-deliver'.  A message not taken waits in the
;; sidecar's queue for the next `idle'.
;;
;;   (lispm-messages-send ACTOR TO TEXT CALLBACK)
;;   (lispm-messages-ask ACTOR TO TEXT CALLBACK)
;;   (lispm-messages-reply ACTOR REQUEST-ID TEXT CALLBACK)
;;
;; return at once; CALLBACK gets one outcome, as `lispm-calls-invoke'
;; gives: (:ok t :text TEXT), with `:request_id' for an ask, or (:ok nil
;; :error MESSAGE :condition ERR), ERR a `lispm-message-failed'.  The
;; tools `send_message', `ask_agent' and `reply' (kind `message') give
;; the same to an actor that calls tools through the pipeline.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-tools)

(lispm-define-error 'lispm-message-failed "A message could not be sent" 'lispm-error)
;; Its data: the sidecar's message, then the method that failed.

;;; Registering with the sidecar

(defvar lispm-messages--registered nil
  "The actors `lispm-messages-register' registered with the sidecar.
An actor is one of them once the sidecar has answered.")

(defun lispm-messages--identity (actor &rest more)
  "Return the params that name ACTOR to the sidecar, followed by MORE.
Its serial tells it from an earlier actor of the same name."
  (append (list :name (lispm-actor-name actor) :instance (lispm-actor-serial actor))
          more))

(defun lispm-messages--failure (method text)
  "Return the outcome of METHOD, a link method, that failed with TEXT."
  (list :ok nil :error text :condition (list 'lispm-message-failed text method)))

(defun lispm-messages--request (method params callback on-success)
  "Ask the sidecar METHOD with PARAMS; give CALLBACK one outcome.
ON-SUCCESS turns the sidecar's result into the outcome.  A failure,
also a sidecar that cannot start, is a `lispm-message-failed'."
  (let* ((called nil)
         (done (lambda (outcome)
                 (unless called
                   (setq called t)
                   (funcall callback outcome)))))
    (condition-case err
        (lispm-sidecar-async-request
         method params
         :on-success (lambda (result) (funcall done (funcall on-success result)))
         :on-error (lambda (text) (funcall done (lispm-messages--failure method text))))
      (error (funcall done (lispm-messages--failure method (lispm-error-message err)))))
    nil))

(defun lispm-messages--start (actor restore callback)
  "Register ACTOR with the sidecar, with RESTORE after a restart.
CALLBACK gets the outcome.  Once registered, ACTOR is one of
`lispm-messages--registered' and the sidecar is told its activity; if
ACTOR left meanwhile, it is stopped there again."
  (lispm-messages--request
   'lispm/agent-start
   (lispm-messages--identity
    actor :kind "lispm"
    :folder (directory-file-name (lispm-actor-folder actor))
    :restore (if restore t :json-false))
   callback
   (lambda (_launch)
     (cl-pushnew actor lispm-messages--registered :test #'eq)
     (if (not (lispm-agent-live-p actor))
         (progn (lispm-messages-unregister actor)
                (lispm-messages--failure
                 'lispm/agent-start (format "%s left before it was registered"
                                            (lispm-actor-name actor))))
       (lispm-messages-report-activity actor)
       (list :ok t :text (format "%s is registered" (lispm-actor-name actor)))))))

(defun lispm-messages-register (actor callback)
  "Register ACTOR, a live actor without a terminal, with the sidecar.
The sidecar knows it from then on as an agent of kind `lispm', which
other agents can message and ask, and which messages and asks them
through `lispm-messages-send' and the like.  Return at once; CALLBACK
gets the outcome: (:ok t :text TEXT), or (:ok nil :error MESSAGE
:condition ERR).  ACTOR stays registered until it leaves the registry
\(`lispm-agents-unregister'), and a restarted sidecar gets it back."
  (cl-check-type actor lispm-actor)
  (lispm-messages--start actor nil callback))

(defun lispm-messages-unregister (actor)
  "Stop ACTOR's registration with the sidecar, if it has one.
What waits for ACTOR there ends, as for any agent that closes; those
who wait on it are told.  This happens by itself when ACTOR leaves the
registry."
  (when (memq actor lispm-messages--registered)
    (setq lispm-messages--registered (delq actor lispm-messages--registered))
    (when (lispm-sidecar-live-p)
      (lispm-sidecar-async-request
       'lispm/agent-stop (lispm-messages--identity actor)
       ;; The actor's own code may have stopped it already.
       :on-error #'ignore))))

(defun lispm-messages--left ()
  "Stop the registrations of the actors that have left the registry."
  (dolist (actor (copy-sequence lispm-messages--registered))
    (unless (lispm-agent-live-p actor)
      (lispm-messages-unregister actor))))

(defun lispm-messages--reregister ()
  "Give a restarted sidecar every registered actor back."
  (dolist (actor lispm-messages--registered)
    (lispm-messages--start
     actor t
     (lambda (outcome)
       (unless (plist-get outcome :ok)
         (message "LispM: %s lost its messages: %s"
                  (lispm-actor-name actor) (plist-get outcome :error)))))))

(add-hook 'lispm-agents-changed-hook #'lispm-messages--left)
(add-hook 'lispm-sidecar-connected-hook #'lispm-messages--reregister)

(defun lispm-messages-report-activity (actor)
  "Tell the sidecar what ACTOR is doing: its `lispm-actor-activity'.
While that is `idle', the sidecar hands ACTOR its due messages; any
other activity, or none, holds them back.  Nothing is sent for an actor
that is not registered, or while the sidecar does not run."
  (when (memq actor lispm-messages--registered)
    (lispm-sidecar-notify
     'lispm/actor-activity
     (lispm-messages--identity
      actor :activity (and (lispm-actor-activity actor)
                           (symbol-name (lispm-actor-activity actor)))))))

;;; Receiving

(cl-defgeneric lispm-actor-deliver (actor text message)
  "Give ACTOR, an actor without a terminal, the message TEXT.
TEXT is the message as its recipient reads it, header first, such as
\"[Request R1 from claude]\" and the request.  MESSAGE is the
sidecar's plist: `:message_id', `:kind' (\"message\", \"request\",
\"reply\" or \"notice\"), `:sender' and `:request_id'.  Return non-nil if
ACTOR took it; nil leaves it waiting until ACTOR is reported idle
again.  The default takes nothing."
  (ignore actor text message)
  nil)

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/deliver)) params)
  "Hand the message in PARAMS to the actor they name; say if it took it.
The sidecar asks only while that actor was reported idle."
  (let ((actor (lispm-agent-from-params params)))
    (unless (and actor (memq actor lispm-messages--registered))
      (lispm-signal 'lispm-unknown-agent
                    (list (plist-get params :name) (plist-get params :instance))
                    "no actor %s (instance %s) takes messages in this Emacs"
                    (plist-get params :name) (plist-get params :instance)))
    (list :taken (if (lispm-actor-deliver actor (plist-get params :text) params)
                     t
                   :json-false))))

;;; Sending

(defun lispm-messages--text (result)
  "Return the outcome of a sidecar's RESULT, a plist with `:text'."
  (list :ok t :text (plist-get result :text)))

(defun lispm-messages-send (actor to text callback)
  "Send TEXT from ACTOR to the agent named TO; return at once.
TO reads it as its next input, headed \"[Message from ACTOR]\".
CALLBACK gets the outcome: (:ok t :text \"sent to TO\"), or (:ok nil
:error MESSAGE :condition ERR) if it is refused (an unknown recipient,
ACTOR itself, empty or overlong text, ACTOR not registered)."
  (lispm-messages--request
   'lispm/send-message (lispm-messages--identity actor :to to :text text)
   callback #'lispm-messages--text))

(defun lispm-messages-ask (actor to text callback)
  "Ask the agent named TO, for ACTOR, the request TEXT; return at once.
The answer comes later, as a message to ACTOR headed \"[Reply from TO
to request R1]\".  CALLBACK gets the outcome: (:ok t :text \"asked TO,
request R1\" :request_id \"R1\"), or a failure as for
`lispm-messages-send'."
  (lispm-messages--request
   'lispm/ask-agent (lispm-messages--identity actor :to to :text text)
   callback
   (lambda (result)
     (list :ok t :text (plist-get result :text)
           :request_id (plist-get result :request_id)))))

(defun lispm-messages-reply (actor request-id text callback)
  "Answer REQUEST-ID, asked of ACTOR, with TEXT; return at once.
CALLBACK gets the outcome: (:ok t :text \"replied to ASKER, request
R1\"), or a failure: a request that is unknown, answered, ended or
asked of another agent, or empty text."
  (lispm-messages--request
   'lispm/reply (lispm-messages--identity actor :request_id request-id :text text)
   callback #'lispm-messages--text))

;;; Tools

(lispm-define-tool send-message (actor (to string "The name of the other agent, e.g. codex.")
                                       (text string "The message, as plain text."))
  "Send a message to another agent; it returns at once.
The message reaches the other agent as its next input, headed
\[Message from <your name>], when it is waiting for its user.  Use it
to inform; when you need an answer, use ask_agent instead.  Refer to
places as org links: [[file:/abs/path::LINE]], [[buffer:NAME]]."
  :kind 'message
  (lispm-tools-defer (lambda (done) (lispm-messages-send actor to text done))))

(lispm-define-tool ask-agent (actor (to string "The name of the other agent, e.g. codex.")
                                    (request string "What you ask of the other agent."))
  "Ask another agent to do something or to answer a question.
It returns at once with a request id such as R1; the other agent
receives [Request R1 from <your name>] with your request, and its
answer arrives later as your next input, headed [Reply from <agent> to
request R1].  So after asking, end your turn: do not wait, poll or ask
again.  Write the request so that it stands alone: the other agent does
not see your conversation."
  :kind 'message
  (lispm-tools-defer (lambda (done) (lispm-messages-ask actor to request done))))

(lispm-define-tool reply (actor (request string "The request id you were sent, e.g. R1.")
                                (text string "Your complete answer."))
  "Answer a request another agent sent you, received as [Request R1 from <agent>].
Pass its id and your answer.  Only the agent that was asked can reply,
and only once per request; the asker receives [Reply from <your name>
to request R1] and your text, which is all it gets: make it complete."
  :kind 'message
  (lispm-tools-defer (lambda (done) (lispm-messages-reply actor request text done))))

(provide 'lispm-messages)
;;; lispm-messages.el ends here
