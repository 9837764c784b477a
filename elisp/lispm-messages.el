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
;;
;; An ask that was accepted is answered later: by the asked agent's
;; reply, or by the ledger's notice that it ended without replying.
;; The sidecar hands such an answer to the asker at once, whatever its
;; activity; `lispm-messages-answer-p' tells one, and
;; `lispm-messages-answer-outcome' makes it the outcome of the call
;; that waits on it, so that an own agent's `ask_agent' call blocks
;; until the answer (lispm-turn.el).  `lispm-messages-requests' asks
;; the ledger about requests, for an agent whose calls waited in an
;; earlier Emacs.
;;
;; Whom to message: `emacs/list-agents' answers the sidecar with the
;; live agents and the roles a helper can be started from, and the
;; tool `list_agents' gives an actor the same.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-roles)
(require 'lispm-tools)

(lispm-define-error 'lispm-message-failed "A message could not be sent"
                    '(lispm-error lispm-for-the-model))
;; Its data: the sidecar's message, then the method that failed.
(lispm-define-error 'lispm-message-unanswered "The asked agent ended without replying"
                    'lispm-message-failed)
;; Its data: the ledger's notice, then the request's id.

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

(defun lispm-messages--start (actor restore callback &optional resume)
  "Register ACTOR with the sidecar, with RESTORE after a restart.
RESUME non-nil says ACTOR is one of an earlier Emacs, reopened under
its name: what waits for it in the sidecar is kept.
CALLBACK gets the outcome.  Once registered, ACTOR is one of
`lispm-messages--registered' and the sidecar is told its activity; if
ACTOR left meanwhile, it is stopped there again."
  (lispm-messages--request
   'lispm/agent-start
   (lispm-messages--identity
    actor :kind "lispm"
    :folder (directory-file-name (lispm-actor-folder actor))
    :restore (if restore t :json-false)
    :resume (if resume t :json-false))
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

(defun lispm-messages-register (actor callback &optional resume)
  "Register ACTOR, a live actor without a terminal, with the sidecar.
The sidecar knows it from then on as an agent of kind `lispm', which
other agents can message and ask, and which messages and asks them
through `lispm-messages-send' and the like.  Return at once; CALLBACK
gets the outcome: (:ok t :text TEXT), or (:ok nil :error MESSAGE
:condition ERR).  ACTOR stays registered until it leaves the registry
\(`lispm-agents-unregister'), and a restarted sidecar gets it back.
RESUME non-nil says ACTOR goes on with an agent of an earlier Emacs,
under the same name: the messages, requests and answers that wait for
it are kept and delivered, not forgotten."
  (cl-check-type actor lispm-actor)
  (lispm-messages--start actor nil callback resume))

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

(defun lispm-messages-answer-p (message)
  "Return the request id MESSAGE answers, or nil.
MESSAGE is the plist `lispm-actor-deliver' gets.  A reply answers its
request, and so does the ledger's notice that the asked agent ended
without replying."
  (and (member (plist-get message :kind) '("reply" "notice"))
       (stringp (plist-get message :request_id))
       (plist-get message :request_id)))

(defun lispm-messages-answer-outcome (text message)
  "Return the outcome of the ask that the answer MESSAGE, read as TEXT, ends.
A reply gives (:ok t :text TEXT), TEXT headed \"[Reply from B to
request R1]\"; a notice that the asked agent ended without replying
gives (:ok nil :error TEXT :condition ERR), ERR a
`lispm-message-unanswered'."
  (if (equal (plist-get message :kind) "reply")
      (list :ok t :text text)
    (list :ok nil :error text
          :condition (list 'lispm-message-unanswered text (plist-get message :request_id)))))

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

(defun lispm-messages-ask (actor to text callback &optional role)
  "Ask the agent named TO, for ACTOR, the request TEXT; return at once.
With ROLE instead of TO (TO nil), a helper of that role is started in
ACTOR's folder, and asked.  The answer comes later, as a message to
ACTOR headed \"[Reply from TO to request R1]\".  CALLBACK gets the
outcome: (:ok t :text \"asked TO, request R1\" :request_id \"R1\" :to
TO), TO the agent asked, or a failure as for `lispm-messages-send'."
  (lispm-messages--request
   'lispm/ask-agent
   (apply #'lispm-messages--identity actor
          (append (and to (list :to to)) (and role (list :role role)) (list :text text)))
   callback
   (lambda (result)
     (list :ok t :text (plist-get result :text)
           :request_id (plist-get result :request_id)
           :to (plist-get result :to)))))

(defun lispm-messages-request-outcome (request)
  "Return the outcome of the ask REQUEST, as `lispm-messages-requests' gives it.
An answered request gives its reply as delivery renders it, an ended
one the ledger's notice, an unknown one a failure that says so, both as
`lispm-messages-answer-outcome' gives; an open one gives nil."
  (let ((id (plist-get request :request_id)))
    (pcase (plist-get request :state)
      ("open" nil)
      ("answered"
       (lispm-messages-answer-outcome
        (format "[Reply from %s to request %s]\n%s" (plist-get request :asked) id
                (plist-get request :reply))
        (list :kind "reply" :request_id id)))
      ("ended"
       (lispm-messages-answer-outcome
        (or (plist-get request :notice)
            (format "%s ended without replying to request %s." (plist-get request :asked) id))
        (list :kind "notice" :request_id id)))
      (_ (lispm-messages-answer-outcome
          (format "Request %s is unknown to the ledger: no answer will come." id)
          (list :kind "notice" :request_id id))))))

(defun lispm-messages--asked (to request-id)
  "Return the outcome of an ask of TO accepted as REQUEST-ID."
  (list :ok t :text (format "asked %s, request %s" to request-id) :request_id request-id))

(defun lispm-messages-asked-request (outcome)
  "Return the id of the request OUTCOME, an accepted ask's, made; or nil.
OUTCOME is what the tool `ask_agent' gave."
  (and (plist-get outcome :ok) (plist-get outcome :request_id)))

(defun lispm-messages-requests (actor ids callback)
  "Ask the ledger about the requests IDS that ACTOR asked; return at once.
CALLBACK gets (:ok t :requests REQUESTS :open_to_you OPEN), or a
failure as for `lispm-messages-send'.  REQUESTS has, for each id, a
plist (:request_id :asker :asked :state :reply :notice), `:state' one
of \"open\", \"answered\", \"ended\" and \"unknown\"; OPEN the open
requests asked of ACTOR that an earlier Emacs took and never answered,
each (:request_id :asker :text), TEXT as delivery renders a request."
  (lispm-messages--request
   'lispm/requests (lispm-messages--identity actor :ids (vconcat ids))
   callback
   (lambda (result)
     (list :ok t
           :requests (append (plist-get result :requests) nil)
           :open_to_you (append (plist-get result :open_to_you) nil)))))

(defun lispm-messages-reply (actor request-id text callback)
  "Answer REQUEST-ID, asked of ACTOR, with TEXT; return at once.
CALLBACK gets the outcome: (:ok t :text \"replied to ASKER, request
R1\"), or a failure: a request that is unknown, answered, ended or
asked of another agent, or empty text."
  (lispm-messages--request
   'lispm/reply (lispm-messages--identity actor :request_id request-id :text text)
   callback #'lispm-messages--text))

;;; Who can be messaged, and the roles a helper can have

(defun lispm-messages-list-agents (&optional asker)
  "Return the live agents and the roles, as `emacs/list-agents' answers.
A plist (:agents AGENTS :roles ROLES), vectors for JSON: each agent as
`lispm-agent-describe' gives it, each role (:name :description), the
roles a helper can be started from: those `lispm-roles-list' gives for
ASKER's folder, or for no folder without an ASKER."
  (list :agents (vconcat (mapcar #'lispm-agent-describe (lispm-agents)))
        :roles (vconcat (mapcar (lambda (role)
                                  (list :name (symbol-name (lispm-role-name role))
                                        :description (lispm-role-description role)))
                                (lispm-roles-list (and asker (lispm-actor-folder asker)))))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/list-agents)) params)
  "Return every live actor and the roles a helper can be started from.
Each actor with its name, kind, role, folder, state and activity;
each role with its name and description.  If PARAMS name a live agent
\(`:name', `:instance'), the roles its folder sees."
  (lispm-messages-list-agents (and (plist-get params :name) (lispm-agent-from-params params))))

(lispm-define-tool list-agents (actor)
  "List the live agents, and the roles a helper can be started from.
Returns JSON: {\"you\": your name, \"agents\": [{name, kind, role, folder,
state, activity}], \"roles\": [{name, description}]}.  Message an agent
with send_message or ask_agent; ask_agent with a role instead of an
agent starts a helper of that role in your folder, which does the job,
replies and retires."
  :kind 'message
  (json-serialize (append (list :you (lispm-actor-name actor))
                          (lispm-messages-list-agents actor))
                  :null-object nil))

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

(lispm-define-tool ask-agent (actor (request string "What you ask of the other agent.")
                                    &optional
                                    (to string "The name of the other agent, e.g. codex.")
                                    (role string "A role, e.g. reviewer: a helper of it is \
started in your folder and asked."))
  "Ask another agent, or a new helper of a role, to do something or to answer.
Give exactly one of to (an agent of list_agents) and role (one of the
roles list_agents lists: a helper of it starts in your folder, does
the job, replies and retires).  The other agent receives [Request R1
from <your name>] with your request.  The call waits for the answer:
its result is [Reply from <agent> to request R1] and the reply, or
that the agent ended without replying.  Several ask_agent calls in one
answer wait together.  Write the request so that it stands alone: the
other agent does not see your conversation."
  :kind 'message
  (let ((to (and to (not (string-empty-p to)) to))
        (role (and role (not (string-empty-p role)) role)))
    (unless (xor to role)
      (lispm-signal 'lispm-tool-bad-args (list to role)
                    "give exactly one of to (an agent's name) and role (a role's name), %s"
                    (if to "not both" "not neither")))
    (lispm-tools-defer
     (lambda (done)
       (lispm-messages-ask
        actor to request
        (lambda (outcome)
          (funcall done (if (plist-get outcome :ok)
                            (lispm-messages--asked (or (plist-get outcome :to) to role)
                                                   (plist-get outcome :request_id))
                          outcome)))
        role)))))

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
