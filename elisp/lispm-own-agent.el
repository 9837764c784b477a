;;; lispm-own-agent.el --- LispM's own agent, inside Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; LispM's own agent lives in this Emacs, in the same event loop as
;; the editor, and reaches everything by calling LispM's tools: Lisp
;; functions, each call under the user's policy.
;;
;;   M-x lispm-agent              start it at the current project's root
;;                                (C-u: ask for the folder and the model)
;;   M-x lispm-own-agent-resume       reopen a session, newest first
;;   M-x lispm-own-agent-revert-turn  take back what a turn changed
;;   M-x lispm-own-agent-compact      summarise the older turns
;;
;; Its buffer is the session's Org document (lispm-session.el): a
;; heading per turn, the user's words, the model's text as it streams,
;; each tool call a subheading.  Type at the end and send with C-c C-c;
;; what is sent while it works waits for the turn's end; C-c C-k
;; interrupts; C-c C-r on a turn's heading reverts that turn.
;;
;; It is an actor like the agents in terminals: in the agent list and
;; in every agent's `list_agents', named `emacs' (then `emacs-2', ...),
;; so it is never taken for LispM's own notices, which come from
;; `lispm'.  Other agents' messages reach it through the sidecar's
;; delivery queue, only while it is idle, and start a turn.
;;
;; Its `ask_agent' blocks the call, not Emacs: the answer to a request
;; one of its calls waits on is handed over at once, whatever it does,
;; and is that call's result (`lispm-own-agent-waiting-requests' lists the
;; requests it waits on).  An answer no call waits on any more (the
;; user interrupted the wait) is input like any message.  Reopened
;; after its Emacs died, a session whose last turn waited on requests
;; waits on them again, and what was asked of it meanwhile is its input.

;;; Code:

(require 'cl-lib)
(require 'project)
(require 'lispm-base)
(require 'lispm-agents)
(require 'lispm-policy)
(require 'lispm-roles)
(require 'lispm-messages)
(require 'lispm-model)
(require 'lispm-session)
(require 'lispm-project-rules)
(require 'lispm-mcp)
(require 'lispm-memory)
(require 'lispm-plan)
(require 'lispm-turn)
(require 'lispm-condition)
(require 'lispm-run-lisp)
(require 'lispm-edit)
(require 'lispm-approvals)
(require 'lispm-present)
(require 'lispm-inspect)

(declare-function org-entry-get "org" (epom property &optional inherit literal-nil))

;;; Options

(defgroup lispm-own-agent nil
  "LispM's own agent, inside Emacs."
  :group 'lispm
  :prefix "lispm-own-agent-")

(defcustom lispm-own-agent-default-name "emacs"
  "The name LispM's own agent goes by; a second one gets a number."
  :type 'string)

(defcustom lispm-own-agent-compact-at 0.8
  "Compact the history before a turn once it fills this share of the window.
Only models whose :window `lispm-models' gives are ever compacted
automatically; `lispm-own-agent-compact' always runs."
  :type 'number)

(defcustom lispm-own-agent-budget nil
  "What an own agent may spend, or nil for no limit.
A plist of any of :turn-tokens and :session-tokens (input and output
tokens together) and :turn-cost and :session-cost (dollars, at the
models' `:price' in `lispm-models').  Reaching one stops the turn
before its next request, at the condition `lispm-turn-budget-exceeded',
whose restarts raise the budget (for that agent) and go on, send the
request to another model, or end the turn.
`lispm-own-agent-set-budget' sets one agent's."
  :type '(choice (const :tag "No limit" nil)
                 (plist :options ((:turn-tokens natnum) (:session-tokens natnum)
                                  (:turn-cost number) (:session-cost number)))))

(defconst lispm-own-agent-compact-prompt
  "Summarise the conversation below for your own later use: the facts \
learnt, the decisions made, the files changed and why, and what is left \
to do.  Be brief and concrete; do not repeat the user's instructions, \
they are kept word for word."
  "The instruction the model summarises older turns with.")

;;; The agent

(cl-defstruct (lispm-own-agent (:include lispm-actor)
                               (:constructor lispm-own-agent--make)
                               (:copier nil))
  "LispM's own agent: an actor whose body is a session buffer."
  (buffer nil :documentation "The session's buffer.")
  (model nil :documentation "The name of the model it asks, in `lispm-models'.")
  (turn nil :documentation "The turn under way, a `lispm-turn', or nil.")
  (turns nil :documentation "Alist of turn number to the turns of this Emacs.")
  (pending nil :documentation "Texts waiting for the turn's end, oldest first.")
  (answered nil :documentation "The requests whose answers a call of it took.")
  (asked nil :documentation "The ids of the requests asked of it that this Emacs handed it.")
  (awaited nil :documentation "Alist of the ids of the requests its calls waited on in an
earlier Emacs, still open, to the agent each was asked of.")
  (compacting nil :documentation "While the older turns are summarised: the
compaction's turn (`lispm-own-agent-summarize'), or t as it starts.")
  (budget 'default :documentation "Its budget, as `lispm-own-agent-budget';
`default': that option's.")
  (spent-before nil :documentation "What its session's earlier turns used, as
`lispm-session-usage' gives it, when its turn under way began.")
  (used nil :documentation "What its session's turns used, as of its last turn's
end (`lispm-session-usage'), or nil until then."))

(defvar-local lispm-own-agent--session-of nil
  "The own agent whose session this buffer is.")

(defun lispm-own-agent-of-session (&optional buffer)
  "Return the own agent of BUFFER (default: the current one), or nil."
  (buffer-local-value 'lispm-own-agent--session-of (or buffer (current-buffer))))

(defun lispm-own-agent-release-session (buffer)
  "Make BUFFER, an own agent's session, no agent's any more; keep its text.
`lispm-own-agent-resume' makes it an agent's again."
  (with-current-buffer buffer
    (setq lispm-own-agent--session-of nil)
    (lispm-own-agent-mode -1)))

(defun lispm-own-agent-current ()
  "Return the own agent of the current buffer, or signal a `user-error'."
  (or (lispm-own-agent-of-session)
      (user-error "This is not the buffer of LispM's own agent")))

(defun lispm-own-agent-busy-p (agent)
  "Return non-nil if AGENT is in a turn or compacting."
  (or (lispm-own-agent-compacting agent)
      (and (lispm-own-agent-turn agent)
           (lispm-turn-live-p (lispm-own-agent-turn agent)))))

(cl-defmethod lispm-actor-activity-changed ((agent lispm-own-agent))
  "Tell the sidecar AGENT's activity: it lives in Emacs, no watcher sees it."
  (when (lispm-sidecar-live-p)
    (lispm-messages-report-activity agent)))

;;; The system prompt

(defun lispm-own-agent--policy-text (agent)
  "Return AGENT's rules under the user's policy, as lines."
  (mapconcat (lambda (rule)
               (format "- %s: %s%s" (car rule) (cadr rule)
                       (if (nth 2 rule)
                           (format " (only %s)" (mapconcat #'identity (nth 2 rule) ", "))
                         "")))
             (lispm-policy-rules (lispm-actor-role agent) (lispm-actor-folder agent))
             "\n"))

(defun lispm-own-agent--first-user-text (agent)
  "Return the user's first text in AGENT's conversation, or nil."
  (when-let* ((turn (lispm-own-agent-turn agent)))
    (cl-loop for message in (lispm-turn-messages turn)
             when (and (equal (plist-get message :role) "user")
                       (stringp (plist-get message :content)))
             return (plist-get message :content))))

(defun lispm-own-agent-system-prompt (agent)
  "Return the system prompt of AGENT, made afresh for each request.
It holds the policy, the folder, the MCP tools not offered
\(`lispm-mcp-prompt-note'), the project's rules
\(`lispm-project-rules-text', read again when a file changed) and what
is remembered (`lispm-memory-prompt-text', the most relevant to the
conversation's first text first), so they survive compaction and
follow edits.  Nothing in it changes from one request to the next
unless one of those did: the prompt is the start of what the model's
API caches.  The plan comes as a note instead (`lispm-plan-note')."
  (format "You are %s, LispM's own agent, running inside the user's Emacs.
You work in the folder %s.
Your tools are Lisp functions of LispM.  Every call passes the user's
policy; when the user refuses one, its result says why: do not repeat
it unchanged.  Emacs documents itself: ask first (apropos,
describe_function, describe_variable, function_source, info_node),
read, then act.  Reading a file that is open in Emacs gives its buffer,
unsaved changes included.  Each of your edits is one undo step.
Messages from other agents come as \"[Message from NAME]\"; answer a
\"[Request R from NAME]\" with the reply tool.

Your role is %s; the user's policy for it (first match wins):
%s%s%s%s%s"
          (lispm-actor-name agent) (lispm-actor-folder agent)
          (lispm-actor-role agent) (lispm-own-agent--policy-text agent)
          (if-let* ((role (lispm-roles-get (lispm-actor-effective-role agent)
                                           (lispm-actor-folder agent)))
                    (prompt (lispm-role-prompt role))
                    ((not (string-empty-p (string-trim prompt)))))
              (concat "\n\n" (string-trim prompt))
            "")
          (if-let* ((note (lispm-mcp-prompt-note agent)))
              (concat "\n\n" note)
            "")
          (if-let* ((rules (lispm-project-rules-text (lispm-actor-folder agent))))
              (concat "\n\nThe project's rules, from its files (the root's first; a \
nearer folder's refine them).  They guide how you work here; the \
user's policy above still decides what runs:\n\n" rules)
            "")
          (if-let* ((memory (lispm-memory-prompt-text (lispm-actor-folder agent)
                                                      (lispm-own-agent--first-user-text agent))))
              (concat "\n\nWhat you remember from earlier sessions (LispM's memory: \
Org files the user reads and edits; the most relevant first).  Add to \
it with the remember tool:\n" memory)
            "")))

;;; Turns

(defun lispm-own-agent--turn-state-changed (agent turn)
  "Show what AGENT does now that TURN's state changed."
  (lispm-agents-set-activity agent (lispm-turn-activity turn)))

(defvar lispm-own-agent-turn-end-functions nil
  "Abnormal hook run with an own agent and its turn once the turn is over.
It runs after the agent is idle again, before what waits for it starts.")

(defun lispm-own-agent--turn-ended (agent turn)
  "Note that AGENT's TURN is over; start what waits."
  (when (eq (lispm-own-agent-turn agent) turn)
    (setf (lispm-own-agent-turn agent) nil))
  (lispm-agents-set-activity agent 'idle)
  (run-hook-with-args 'lispm-own-agent-turn-end-functions agent turn)
  (when (lispm-own-agent-pending agent)
    (run-at-time 0 nil #'lispm-own-agent--next agent)))

(defun lispm-own-agent--next (agent)
  "Start AGENT's oldest waiting text, if it is free."
  (when (and (lispm-own-agent-pending agent)
             (not (lispm-own-agent-busy-p agent))
             (buffer-live-p (lispm-own-agent-buffer agent)))
    (lispm-own-agent--start-turn agent (pop (lispm-own-agent-pending agent)))))

(defun lispm-own-agent--turn-keys (agent)
  "Return the keys `lispm-turn-start' gets for a turn of AGENT.
AGENT is the turn's sink: what happens goes to its session."
  (when-let* ((buffer (lispm-own-agent-buffer agent))
              ((buffer-live-p buffer))
              ((lispm-own-agent-budget-of agent)))
    (setf (lispm-own-agent-spent-before agent) (lispm-session-usage buffer)))
  (list :system (lambda () (lispm-own-agent-system-prompt agent))
        :conversation (format "%s#%d" (lispm-actor-name agent) (lispm-actor-serial agent))
        :context (lambda (turn)
                   (and (buffer-live-p (lispm-turn-buffer turn))
                        (lispm-plan-note (lispm-turn-buffer turn) (lispm-turn-messages turn))))
        :sink agent
        :budget (lambda (turn) (lispm-own-agent--over-budget agent turn))))

;;; Tokens, cost and the budget

(defun lispm-own-agent-budget-of (agent)
  "Return AGENT's budget, a plist as `lispm-own-agent-budget', or nil."
  (let ((budget (lispm-own-agent-budget agent)))
    (if (eq budget 'default) lispm-own-agent-budget budget)))

(defun lispm-own-agent--over-budget (agent turn)
  "Return why AGENT's TURN may not send its next request, or nil.
As the slot `budget' of `lispm-turn' says: (:message M :reader R :raise F)."
  (when-let* ((budget (lispm-own-agent-budget-of agent)))
    (let* ((spent (lispm-turn-spent turn))
           (before (or (lispm-own-agent-spent-before agent) '(:input 0 :output 0)))
           (tokens (+ (plist-get spent :input) (plist-get spent :output)))
           (cost (or (plist-get spent :cost) 0))
           (checks
            `((:turn-tokens ,tokens "tokens in this turn")
              (:session-tokens ,(+ tokens (plist-get before :input) (plist-get before :output))
                               "tokens in this session")
              (:turn-cost ,cost "dollars in this turn")
              (:session-cost ,(+ cost (or (plist-get before :cost) 0))
                             "dollars in this session"))))
      (cl-loop for (key used what) in checks
               for limit = (plist-get budget key)
               when (and limit (>= used limit))
               return
               (list :message (format "%s of %s %s: the budget (%s %s) is reached"
                                      (lispm-actor-name agent)
                                      (if (floatp used) (format "%.4f" used) used) what
                                      key limit)
                     :reader (lambda ()
                               (read-number (format "New %s (now %s): " key limit)
                                            (* 2 limit)))
                     :raise (lambda (value)
                              (unless (and (numberp value) (> value used))
                                (user-error "The new budget must be over %s" used))
                              (setf (lispm-own-agent-budget agent)
                                    (plist-put (copy-sequence budget) key value))))))))

;;;###autoload
(defun lispm-own-agent-set-budget (agent budget)
  "Set AGENT's BUDGET, a plist as `lispm-own-agent-budget', or nil for none.
Interactively, read each limit; an empty answer leaves it out."
  (interactive
   (let ((agent (lispm-own-agent-current)))
     (list agent
           (cl-loop for key in '(:turn-tokens :session-tokens :turn-cost :session-cost)
                    for answer = (string-trim (read-string (format "%s (empty: none): " key)))
                    unless (string-empty-p answer)
                    append (list key (string-to-number answer))))))
  (setf (lispm-own-agent-budget agent) budget)
  (message "LispM: %s's budget: %s" (lispm-actor-name agent) (or budget "none")))

;;; The session, the turn's sink

(cl-defmethod lispm-turn-sink-live-p ((_agent lispm-own-agent) turn)
  "Return non-nil if TURN's session buffer is still there."
  (buffer-live-p (lispm-turn-buffer turn)))

(cl-defmethod lispm-turn-report ((agent lispm-own-agent) turn (_what (eql state)))
  "Show what AGENT does now that TURN's state changed."
  (lispm-own-agent--turn-state-changed agent turn))

(defun lispm-own-agent--reply (turn)
  "Return the stream of TURN's current answer in its session, begun if need be."
  (or (lispm-turn-reply turn)
      (setf (lispm-turn-reply turn) (lispm-session-begin-reply (lispm-turn-buffer turn)))))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql text)) text)
  "Stream TEXT, a piece of TURN's answer, into its session."
  (lispm-session-stream-text (lispm-own-agent--reply turn) text))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql thinking)) text)
  "Stream TEXT, a piece of TURN's model's reasoning, into its answer."
  (lispm-session-stream-thinking (lispm-own-agent--reply turn) text))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql thought)) thought)
  "Write THOUGHT, a block of TURN's model's reasoning, folded in its answer."
  (lispm-session-insert-thought (lispm-own-agent--reply turn) thought))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql text-end)))
  "End the text of TURN's answer in its session."
  (lispm-session-end-reply (lispm-turn-reply turn)))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql call)) call)
  "Write CALL, which TURN's model asked for, in its session."
  (unless (lispm-turn-reply turn)
    ;; An answer of calls alone has a reply heading of its own too, so
    ;; that the session reads back as the model answered: one message
    ;; for each answer, and so the prefix its next request caches.
    (lispm-session-end-reply (lispm-own-agent--reply turn)))
  (lispm-session-insert-call (lispm-turn-buffer turn)
                             (list :id (lispm-turn-call-id call) :name (lispm-turn-call-name call)
                                   :arguments (lispm-turn-call-arguments call))))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql approval))
                                 call approval)
  "Write in TURN's session that CALL waits for APPROVAL."
  (when (buffer-live-p (lispm-turn-buffer turn))
    (lispm-session-insert-approval
     (lispm-turn-buffer turn) (lispm-turn-call-id call)
     (or (lispm-approval-title approval)
         (format "%s %s" (lispm-approval-kind approval) (lispm-turn-call-name call))))))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql decided))
                                 call state reason)
  "Mark CALL's approval in TURN's session as decided: STATE, with REASON."
  (lispm-session-decide-approval (lispm-turn-buffer turn) (lispm-turn-call-id call) state reason))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql request))
                                 call request-id)
  "Record in TURN's session that CALL waits on REQUEST-ID."
  (lispm-session-record-request (lispm-turn-buffer turn) (lispm-turn-call-id call) request-id))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql result))
                                 call text error records)
  "Write CALL's result TEXT in TURN's session, ERROR non-nil for a failure.
RECORDS are the changes CALL made, as the session records them."
  (lispm-session-insert-result (lispm-turn-buffer turn) (lispm-turn-call-id call)
                               text error records))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql note)) text)
  "Write the note TEXT in TURN's session."
  (lispm-session-insert-note (lispm-turn-buffer turn) text))

(cl-defmethod lispm-turn-report ((_agent lispm-own-agent) turn (_what (eql stopped)))
  "Show the condition TURN stopped at."
  (when (buffer-live-p (lispm-turn-buffer turn))
    (lispm-condition-show turn)))

(cl-defmethod lispm-turn-report ((agent lispm-own-agent) turn (_what (eql end)))
  "Record what TURN used, save and commit its session; start what waits.
AGENT is TURN's own agent."
  (when (buffer-live-p (lispm-turn-buffer turn))
    (when (lispm-turn-number turn)
      (lispm-session-record-usage (lispm-turn-buffer turn) (lispm-turn-number turn)
                                  (lispm-turn-spent turn))
      (setf (lispm-own-agent-used agent) (lispm-session-usage (lispm-turn-buffer turn))))
    (lispm-session-end-turn (lispm-turn-buffer turn)))
  (lispm-own-agent--turn-ended agent turn))

(defun lispm-own-agent--adopt (agent turn)
  "Make TURN, just started, AGENT's turn under way if it is; return TURN.
AGENT's activity is the turn's from then on."
  (when (lispm-turn-live-p turn)
    (setf (lispm-own-agent-turn agent) turn)
    (lispm-agents-set-activity agent (lispm-turn-activity turn)))
  (push (cons (lispm-turn-number turn) turn) (lispm-own-agent-turns agent))
  turn)

(defun lispm-own-agent--start-turn (agent text)
  "Start a turn of AGENT with TEXT, the user's words or a message."
  (if (lispm-own-agent--needs-compaction-p agent)
      (progn (push text (lispm-own-agent-pending agent))
             (lispm-own-agent-summarize agent))
    (let* ((buffer (lispm-own-agent-buffer agent))
           (number (lispm-session-begin-turn buffer text)))
      (lispm-own-agent--adopt
       agent (apply #'lispm-turn-start agent buffer number (lispm-own-agent-model agent)
                    (lispm-session-messages buffer) (lispm-own-agent--turn-keys agent))))))

(defun lispm-own-agent-send (agent text)
  "Give AGENT TEXT, to start a turn now or when the turn under way ends.
An agent that has left takes nothing: signal a `user-error'."
  (when (string-empty-p (string-trim text))
    (user-error "Nothing to send"))
  (unless (lispm-agent-live-p agent)
    (user-error "%s has closed; `lispm-own-agent-resume' reopens its session"
                (lispm-actor-name agent)))
  (if (lispm-own-agent-busy-p agent)
      (progn (setf (lispm-own-agent-pending agent)
                   (append (lispm-own-agent-pending agent) (list text)))
             (message "LispM: %s is busy; this waits for the turn's end"
                      (lispm-actor-name agent)))
    (lispm-own-agent--start-turn agent text)))

(cl-defmethod lispm-actor-deliver ((agent lispm-own-agent) text message)
  "Give AGENT the message TEXT from another agent; it is always taken.
MESSAGE is the sidecar's plist.  An answer to a request a call of
AGENT waits on is that call's result; one a call took already (the
ledger told it first, after a restart) is dropped; any other message
is AGENT's input, now or when the turn under way ends."
  (let ((request-id (lispm-messages-answer-p message)))
    (when (equal (plist-get message :kind) "request")
      (push (plist-get message :request_id) (lispm-own-agent-asked agent)))
    (unless (and request-id
                 (or (lispm-own-agent--answer agent request-id
                                          (lispm-messages-answer-outcome text message))
                     (member request-id (lispm-own-agent-answered agent))))
      (lispm-own-agent-send agent text)))
  t)

(defun lispm-own-agent--answer (agent request-id outcome)
  "Give OUTCOME, the answer to REQUEST-ID, to AGENT's call that waits on it.
Return non-nil if one waited."
  (when-let* ((turn (lispm-own-agent-turn agent))
              ((lispm-turn-answer turn request-id outcome)))
    (push request-id (lispm-own-agent-answered agent))
    t))

(defun lispm-own-agent-waiting-requests (agent)
  "Return the ids of the requests that AGENT waits on, in the order it asked."
  (when-let* ((turn (lispm-own-agent-turn agent)))
    (lispm-turn-waiting-requests turn)))

;;; After a restart

(defun lispm-own-agent--rebuild (agent)
  "Make the last turn of AGENT again if it ended while it waited for answers.
The turn waits on the same requests (`lispm-turn-rebuild'); return it,
or nil if there was none to make."
  (when-let* ((buffer (lispm-own-agent-buffer agent))
              (waiting (lispm-session-waiting-step buffer)))
    (let ((turn (apply #'lispm-turn-rebuild agent buffer waiting (lispm-own-agent-model agent)
                       (lispm-own-agent--turn-keys agent))))
      (lispm-session-insert-note
       buffer (format "Reopened: waiting again on %s"
                      (string-join (lispm-turn-waiting-requests turn) ", ")))
      (lispm-own-agent--adopt agent turn))))

(defun lispm-own-agent--resumed (agent outcome)
  "Go on with AGENT, reopened and registered with OUTCOME: ask the ledger.
Each request a call waits on that was answered or ended meanwhile
gives the call its answer; each request asked of AGENT that an earlier
Emacs took and never answered is AGENT's input, as if delivered now."
  (if (not (plist-get outcome :ok))
      (message "LispM: %s is not registered: %s" (lispm-actor-name agent)
               (plist-get outcome :error))
    (lispm-messages-requests
     agent (lispm-own-agent-waiting-requests agent)
     (lambda (answer)
       (if (not (plist-get answer :ok))
           (message "LispM: %s could not learn of its requests: %s"
                    (lispm-actor-name agent) (plist-get answer :error))
         (dolist (request (plist-get answer :requests))
           (if-let* ((result (lispm-messages-request-outcome request)))
               (lispm-own-agent--answer agent (plist-get request :request_id) result)
             (push (cons (plist-get request :request_id) (plist-get request :asked))
                   (lispm-own-agent-awaited agent))))
         (lispm-own-agent--say-absent agent)
         ;; The queue may have handed one over already, since registering.
         (dolist (request (plist-get answer :open_to_you))
           (unless (member (plist-get request :request_id) (lispm-own-agent-asked agent))
             (push (plist-get request :request_id) (lispm-own-agent-asked agent))
             (lispm-own-agent-send agent (plist-get request :text)))))))))

(cl-defmethod lispm-actor-awaiting-absent ((agent lispm-own-agent))
  "Return the requests AGENT waits on, asked of an agent not running here.
Only those an earlier Emacs's calls waited on: an ask of this Emacs
ends when its agent leaves (the ledger's notice answers it)."
  (let ((waiting (lispm-own-agent-waiting-requests agent)))
    (cl-loop for (id . asked) in (reverse (lispm-own-agent-awaited agent))
             when (and (member id waiting) (stringp asked) (not (lispm-agent-get asked)))
             collect (cons id asked))))

(defun lispm-own-agent--say-absent (agent)
  "Say in AGENT's session, and to the agent list, which waits cannot end yet.
Those are the requests asked of an agent that runs in no Emacs here."
  (when-let* ((absent (lispm-actor-awaiting-absent agent)))
    (lispm-session-insert-note
     (lispm-own-agent-buffer agent)
     (format "No answer can come to %s until %s runs again: M-x lispm-resume-agents \
resumes it; M-x lispm-forget-agents ends what waits on it, and so this wait"
             (string-join (mapcar #'car absent) ", ")
             (string-join (delete-dups (mapcar #'cdr absent)) ", ")))
    (run-hooks 'lispm-agents-changed-hook)))

;;; Starting and ending

(defun lispm-own-agent-make (folder model session &optional role name resume)
  "Make an own agent in FOLDER asking MODEL; register it and return it.
SESSION is a function of the agent's name that returns its session's
buffer.  ROLE defaults to `lispm-policy-default-role'.  NAME is the
base of its name, by default `lispm-own-agent-default-name'.  The agent is
registered with Emacs, which names it, and with the sidecar.  RESUME
non-nil says it goes on with the agent of that name of an earlier
Emacs: the turn that Emacs cut off while calls waited is made again
first, and once registered, it asks the ledger what became of its
requests (`lispm-own-agent--resumed')."
  (let ((agent (lispm-own-agent--make
                :name (or name lispm-own-agent-default-name) :kind 'lispm :folder folder
                :role (or role lispm-policy-default-role)
                :state 'running :activity 'idle :model model)))
    (lispm-agents-add-actor agent)
    (let ((buffer (condition-case err
                      (funcall session (lispm-actor-name agent))
                    (error (lispm-agents-unregister agent)
                           (signal (car err) (cdr err))))))
      (setf (lispm-own-agent-buffer agent) buffer)
      (with-current-buffer buffer
        (setq lispm-own-agent--session-of agent)
        (add-hook 'kill-buffer-hook #'lispm-own-agent--buffer-killed nil t)
        (add-hook 'org-after-todo-state-change-hook #'lispm-own-agent--todo-changed nil t)
        (lispm-own-agent-mode)))
    (when resume
      (lispm-own-agent--rebuild agent))
    ;; The MCP servers of the user and of a trusted project: their tools
    ;; are registered by the time the user has typed.
    (lispm-mcp-sync folder)
    (lispm-messages-register agent (if resume
                                       (lambda (outcome) (lispm-own-agent--resumed agent outcome))
                                     #'ignore)
                             resume)
    agent))

(cl-defmethod lispm-actor-home-buffer ((agent lispm-own-agent))
  "Return the session buffer of AGENT."
  (lispm-own-agent-buffer agent))

(cl-defmethod lispm-actor-refuel ((agent lispm-own-agent) used callback)
  "Stop AGENT's turn at `lispm-lisp-fuel-exhausted': the user's restart decides.
Its program ran out of fuel after USED steps; CALLBACK gets more fuel,
or nil."
  (let ((turn (lispm-own-agent-turn agent)))
    (if (not (and turn (eq (lispm-turn-state turn) 'tools)))
        (funcall callback nil)
      (lispm-turn-suspend
       turn 'lispm-lisp-fuel-exhausted
       (format "The run_lisp program ran out of fuel after %d steps" used)
       (list (lispm-restart-make
              :name 'more-fuel :number 5
              :description "Give the program more fuel and let it go on"
              ;; With a prefix argument, that much fuel; else the default.
              :reader (lambda () (and current-prefix-arg
                                      (prefix-numeric-value current-prefix-arg)))
              :function (lambda (fuel)
                          (lispm-turn-go-on turn)
                          (funcall callback (if (natnump fuel) fuel lispm-lisp-default-fuel))))
             (lispm-turn-skip-restart turn (lambda () (funcall callback nil)))
             (lispm-turn-abort-restart
              turn (lambda ()
                     (funcall callback nil)
                     (lispm-run-lisp-abort-actor agent "the turn ended"))))))))

(defun lispm-own-agent--buffer-killed ()
  "End the own agent of the buffer being killed, quietly."
  (when-let* ((agent lispm-own-agent--session-of))
    (when (lispm-own-agent-turn agent)
      (lispm-turn-cancel (lispm-own-agent-turn agent))
      ;; Its buffer goes: nothing of the turn is written any more.
      (setf (lispm-own-agent-turn agent) nil))
    (lispm-run-lisp-abort-actor agent "its session was closed")
    (setf (lispm-actor-state agent) 'exited)
    ;; Leaving the registry also ends it in the sidecar (lispm-messages.el).
    (lispm-agents-unregister agent)))

(cl-defmethod lispm-actor-left ((agent lispm-own-agent))
  "End what AGENT was doing, now that it left the registry, however it left.
Closed from the agent list (`lispm-agent-close'), retired, or its
buffer killed: its approvals still awaited are withdrawn, its turn
ends (nothing of it runs or asks the model any more), its program
stops, what waited for its turn is dropped, and its session's buffer
is no agent's any more (`lispm-own-agent-resume' reopens it).  Its helpers
retire too (lispm-helpers.el)."
  (let ((why (format "%s closed" (lispm-actor-name agent))))
    (dolist (approval (lispm-approvals-for-agent agent))
      (lispm-approvals-withdraw approval why))
    (setf (lispm-own-agent-pending agent) nil)
    (when-let* ((turn (lispm-own-agent-turn agent)))
      (lispm-turn-end turn))
    (lispm-run-lisp-abort-actor agent why)
    (let ((buffer (lispm-own-agent-buffer agent)))
      (when (and (buffer-live-p buffer) (eq (lispm-own-agent-of-session buffer) agent))
        (lispm-own-agent-release-session buffer)))))

(defun lispm-own-agent--read-folder-and-model ()
  "Read a folder and a model from the user."
  (list (read-directory-name "LispM agent in folder: ")
        (completing-read "Model: " (lispm-model-names) nil t nil nil
                         (lispm-model-default))))

(defun lispm-own-agent--default-folder ()
  "Return the current project's root, or `default-directory'."
  (if-let* ((project (project-current)))
      (project-root project)
    default-directory))

;;;###autoload
(defun lispm-agent (&optional folder model)
  "Start LispM's own agent in FOLDER, asking MODEL; show its buffer.
FOLDER defaults to the current project's root and MODEL to the first
of `lispm-models'; with a prefix argument, ask for both."
  (interactive (and current-prefix-arg (lispm-own-agent--read-folder-and-model)))
  (let* ((folder (or folder (lispm-own-agent--default-folder)))
         (model (or model (lispm-model-default))))
    (lispm-model-get model)
    (unless (file-directory-p folder)
      (user-error "No such folder: %s" folder))
    (let ((agent (lispm-own-agent-make
                  folder model (lambda (name) (lispm-session-create folder model name nil nil
                                                      (lispm-project-rules-find folder))))))
      (when (called-interactively-p 'any)
        (pop-to-buffer (lispm-own-agent-buffer agent)))
      agent)))

;;;###autoload
(defun lispm-own-agent-resume (file)
  "Reopen the session in FILE, and go on with its history; return the agent.
Interactively, choose among the sessions, newest first.  The agent
gets the name the session records, if no one has it: then it goes on
with that agent of an earlier Emacs.  Its requests still open wait
for their answers again, in the turn they were made in, and what was
asked of it meanwhile is its input.  It has the role the session
records.  A helper's session (one that records callers) opens
read-only, and no agent is made (return nil), even if an agent of its
caller's name is live: a name is not an identity, the request it was
made for is over, and a helper never acts without its caller's bounds.
The session's header is trusted: the file is the user's, and LispM's
tools never read or change a file in `lispm-sessions-directory'."
  (interactive
   (let* ((sessions (or (lispm-sessions-list) (user-error "No sessions yet")))
          (table (mapcar (lambda (session)
                           (cons (format "%s  %s  %s"
                                         (format-time-string "%F %R"
                                                             (plist-get session :time))
                                         (abbreviate-file-name
                                          (or (plist-get session :project) ""))
                                         (or (plist-get session :first-line) ""))
                                 (plist-get session :file)))
                         sessions)))
     (list (cdr (assoc (completing-read "Resume session: "
                                        (lambda (string predicate action)
                                          (if (eq action 'metadata)
                                              '(metadata (display-sort-function . identity))
                                            (complete-with-action action table string
                                                                  predicate)))
                                        nil t)
                       table)))))
  (if-let* ((open (cl-find-if (lambda (buffer)
                                (and (lispm-own-agent-of-session buffer)
                                     (equal (buffer-local-value 'lispm-session-file buffer)
                                            file)))
                              (buffer-list))))
      (progn (when (called-interactively-p 'any) (pop-to-buffer open))
             (lispm-own-agent-of-session open))
    (let* ((buffer (lispm-session-open file))
           (callers (buffer-local-value 'lispm-session-callers buffer))
           (role (when-let* ((name (buffer-local-value 'lispm-session-role buffer)))
                   (intern name)))
           (folder (buffer-local-value 'lispm-session-folder buffer))
           (model (buffer-local-value 'lispm-session-model buffer))
           (model (if (assoc model lispm-models) model (lispm-model-default)))
           (recorded (buffer-local-value 'lispm-session-agent buffer))
           (free (and recorded (not (lispm-agent-get recorded))))
           (folder (if (and folder (file-directory-p folder)) folder default-directory))
           (agent (unless callers
                    (when role (lispm-roles-check role folder))
                    ;; A turn its Emacs ended during says so, before anything runs.
                    (lispm-session-end-cut-turn buffer)
                    (lispm-own-agent-make folder model (lambda (_name) buffer)
                                      role (and free recorded) free))))
      (unless agent
        (with-current-buffer buffer
          (setq buffer-read-only t
                header-line-format
                (string-replace
                 "%" "%%"
                 (format "Read-only: %s was a helper (role %s) of %s; a helper's \
session is not resumed: it never acts outside its caller's bounds"
                         (or recorded "this agent") (or role lispm-policy-default-role)
                         (string-join callers ", then ")))))
        (message "LispM: %s was a helper of %s: its session is open read-only"
                 (or recorded "this agent") (string-join callers ", ")))
      (when (called-interactively-p 'any)
        (pop-to-buffer buffer))
      agent)))

;;; Commands in the session's buffer

(defun lispm-own-agent--approval-at-point (agent)
  "Return the approval AGENT waits for at point, or nil.
Point is in a tool call's entry, or in its TODO item."
  (when-let* ((turn (lispm-own-agent-turn agent))
              (id (org-entry-get nil "LISPM_CALL_ID" t)))
    (lispm-own-agent--call-approval turn id)))

(defun lispm-own-agent--todo-changed ()
  "Decide the approval whose TODO item the user just marked DONE or CANCELLED."
  (defvar org-state)
  (when-let* ((agent (lispm-own-agent-of-session))
              (approval (lispm-own-agent--approval-at-point agent)))
    (when (member org-state '("DONE" "CANCELLED"))
      (lispm-approvals-decide approval (equal org-state "CANCELLED")))))

(defun lispm-own-agent-send-input (&optional deny)
  "Send what was typed at the end of the buffer to the agent.
On a call that waits for approval, allow it; with a prefix argument
DENY, deny it with a reason.  Elsewhere in the buffer, do what
\\[org-ctrl-c-ctrl-c] does."
  (interactive "P")
  (let* ((agent (lispm-own-agent-current))
         (approval (lispm-own-agent--approval-at-point agent)))
    (cond
     (approval (lispm-approvals-decide approval deny))
     ((< (point) (lispm-session-input-start (current-buffer)))
      (call-interactively #'org-ctrl-c-ctrl-c))
     (t
      (let ((text (lispm-session-input (current-buffer))))
        (when (string-empty-p (string-trim text))
          (user-error "Type something to send, at the end of the buffer"))
        (lispm-session-take-input (current-buffer))
        (lispm-own-agent-send agent text))))))

(defun lispm-own-agent-interrupt ()
  "Interrupt the agent's turn: it stops at a condition with restarts."
  (interactive)
  (let* ((agent (lispm-own-agent-current))
         (turn (lispm-own-agent-turn agent)))
    (unless (and turn (lispm-turn-live-p turn))
      (user-error "%s is not in a turn" (lispm-actor-name agent)))
    (if (eq (lispm-turn-state turn) 'stopped)
        (lispm-condition-show turn)
      (lispm-turn-interrupt turn)
      (if (zerop (lispm-run-lisp-abort-actor agent "interrupted"))
          (message "LispM: %s stops after what runs now" (lispm-actor-name agent))
        (message "LispM: %s's program is stopped" (lispm-actor-name agent))))))

(defun lispm-own-agent-turn-at-point ()
  "Return the number of the turn whose heading point is in, or nil."
  (let ((value (org-entry-get nil "LISPM_TURN" t)))
    (and value (string-to-number value))))

;;;###autoload
(defun lispm-own-agent-revert-turn (agent number)
  "Take back everything turn NUMBER of AGENT changed.
Interactively, the turn point is in, or the last one.  The user's own
edits since, elsewhere in those files, stay; if the user changed text
the turn wrote, list the conflicts and change nothing."
  (interactive
   (let ((agent (lispm-own-agent-current)))
     (list agent (or (lispm-own-agent-turn-at-point)
                     (car (car (lispm-own-agent-turns agent)))
                     (user-error "No turn to revert")))))
  (let* ((buffer (lispm-own-agent-buffer agent))
         (turn (cdr (assq number (lispm-own-agent-turns agent))))
         (turn (and turn (lispm-turn-changes turn) turn))
         ;; A turn of an earlier Emacs, or reverted and reapplied since:
         ;; what the session recorded of it.
         (recorded (unless turn (lispm-session-turn-changes buffer number))))
    (when (plist-get (cl-find number (lispm-session-turns buffer)
                              :key (lambda (item) (plist-get item :turn)))
                     :reverted)
      (user-error "Turn %s is reverted already (M-x lispm-rewind-undo reapplies it)" number))
    (unless (or turn recorded)
      (user-error "Turn %s ran in an earlier Emacs, and its session records no change of it"
                  number))
    (when (and turn (lispm-turn-live-p turn))
      (user-error "Turn %s is still under way" number))
    (condition-case err
        (let ((files (if turn (lispm-turn-revert turn)
                       (lispm-turn-revert-recorded recorded))))
          (lispm-session-mark-reverted buffer number (lispm-session-time))
          (lispm-session-insert-note (lispm-own-agent-buffer agent)
                                     (format "Turn %d reverted: %d file%s restored"
                                             number files (if (= files 1) "" "s")))
          (message "LispM: turn %d reverted (%d file%s)" number files
                   (if (= files 1) "" "s"))
          files)
      (lispm-revert-conflict
       (message "LispM: turn %d not reverted: %s" number (lispm-error-message err))
       (signal (car err) (cdr err))))))

(declare-function lispm-rewind "lispm-rewind" (agent number))

(defvar-keymap lispm-own-agent-mode-map
  :doc "Keys of the own agent's session buffer."
  "C-c C-c" #'lispm-own-agent-send-input
  "C-c C-k" #'lispm-own-agent-interrupt
  "C-c C-r" #'lispm-own-agent-revert-turn
  "C-c C-m" #'lispm-own-agent-set-model
  ;; lispm-rewind.el, autoloaded: it builds on this file.
  "C-c C-z" #'lispm-rewind)

(define-minor-mode lispm-own-agent-mode
  "Minor mode of the buffer of LispM's own agent: its session's document.
Type at the end and send with \[lispm-own-agent-send-input] (on a call
that waits for approval, it allows it; with a prefix argument, it
denies it); interrupt
with \[lispm-own-agent-interrupt]; revert the turn at point with
\[lispm-own-agent-revert-turn]; rewind to it, with a choice of how, or
fork the session there, with \[lispm-rewind]; switch the model with
\[lispm-own-agent-set-model].

\{lispm-own-agent-mode-map}"
  :lighter " LispM-Agent")

;;; Switching the model

;;;###autoload
(defun lispm-own-agent-set-model (agent model)
  "Make MODEL, a name of `lispm-models', AGENT's model from its next request.
Any dialect to any other (Anthropic, Responses, Chat Completions): the
history is the session's neutral messages, which the sidecar writes in
each dialect, tool calls and results included.  The session's header
says the model from now on, and each turn's drawer the model it began
with.  A turn under way goes on with its model; the next one has the
new.  Interactively, the agent of this session, or the one at point
in the agent list, and MODEL read."
  (interactive
   (let ((agent (or (and (derived-mode-p 'tabulated-list-mode)
                         (when-let* ((id (tabulated-list-get-id))
                                     (found (and (stringp id) (lispm-agent-get id))))
                           (and (lispm-own-agent-p found) found)))
                    (lispm-own-agent-of-session)
                    (let ((agents (cl-remove-if-not #'lispm-own-agent-p (lispm-agents))))
                      (pcase agents
                        ('nil (user-error "No own agent runs"))
                        (`(,only) only)
                        (_ (lispm-agent-get
                            (completing-read "Own agent: "
                                             (mapcar #'lispm-actor-name agents) nil t))))))))
     (list agent (completing-read (format "Model of %s (now %s): " (lispm-actor-name agent)
                                          (lispm-own-agent-model agent))
                                  (mapcar #'car lispm-models) nil t))))
  (unless (assoc model lispm-models)
    (user-error "No model %s in `lispm-models'" model))
  (let ((old (lispm-own-agent-model agent))
        (buffer (lispm-own-agent-buffer agent)))
    (setf (lispm-own-agent-model agent) model)
    (when (buffer-live-p buffer)
      (lispm-session-set-model buffer model)
      (lispm-session-insert-note
       buffer (format "Model: %s, after %s%s%s" model old
                      (if (lispm-own-agent-busy-p agent) " (from the next turn)" "")
                      (if (and (not (eq (plist-get (cdr (assoc model lispm-models)) :api)
                                        (plist-get (cdr (assoc old lispm-models)) :api)))
                               (with-current-buffer buffer
                                 (save-excursion
                                   (goto-char (point-min))
                                   (let ((case-fold-search t))
                                     (re-search-forward "^#\\+begin_reasoning" nil t)))))
                          ".  The earlier answers' reasoning stays here, but goes only to \
the API that wrote it (signed): this one gets their text and calls"
                        ""))))
    (message "LispM: %s's model is %s" (lispm-actor-name agent) model)
    model))

;;; Compaction

(defun lispm-own-agent--needs-compaction-p (agent)
  "Return non-nil if AGENT's history nears its model's window."
  (let* ((window (lispm-model-window (lispm-own-agent-model agent)))
         (last (cdr (car (lispm-own-agent-turns agent))))
         (used (and last (plist-get (lispm-turn-usage last) :input_tokens))))
    (and window used (>= used (* lispm-own-agent-compact-at window)))))

(cl-defstruct (lispm-agent--compaction (:constructor lispm-agent--compaction-make)
                                        (:copier nil))
  "The sink of a compaction: a turn, offered no tools, that summarises."
  (agent nil :documentation "The own agent whose older turns are summarised.")
  (from nil :documentation "The first turn the summary replaces, if not the first.")
  (upto nil :documentation "The last turn the summary replaces.")
  (then nil :documentation "Called with nil or the error's text, at the end.")
  (error nil :documentation "The message of the condition it stopped at, if any."))

(defun lispm-own-agent--compacted (agent error-text then)
  "End AGENT's compaction, with ERROR-TEXT if it failed; call THEN with it."
  ;; The newest usage measured the history before this: forget it, or
  ;; the next turn would compact again.
  (when-let* ((last (cdr (car (lispm-own-agent-turns agent)))))
    (setf (lispm-turn-usage last) nil))
  (setf (lispm-own-agent-compacting agent) nil)
  (lispm-agents-set-activity agent 'idle)
  (when error-text
    (message "LispM: compaction of %s failed: %s" (lispm-actor-name agent) error-text))
  (when then (funcall then error-text))
  (run-at-time 0 nil #'lispm-own-agent--next agent))

(cl-defmethod lispm-turn-report ((sink lispm-agent--compaction) turn
                                 (_what (eql stopped)))
  "End the compaction TURN at once, keeping the history whole.
Its condition's message is SINK's error."
  (setf (lispm-agent--compaction-error sink) (cadr (lispm-turn-condition turn)))
  (lispm-turn-restart turn 'abort))

(cl-defmethod lispm-turn-report ((sink lispm-agent--compaction) turn (_what (eql end)))
  "Put the summary TURN answered in place of the older history SINK names."
  (let ((agent (lispm-agent--compaction-agent sink)))
    (lispm-own-agent--compacted
     agent
     (or (lispm-agent--compaction-error sink)
         (condition-case err
             (progn (lispm-session-compact
                     (lispm-own-agent-buffer agent)
                     (plist-get (car (last (lispm-turn-messages turn))) :content)
                     (lispm-agent--compaction-upto sink)
                     (lispm-agent--compaction-from sink))
                    nil)
           (lispm-error (lispm-error-message err))))
     (lispm-agent--compaction-then sink))))

(defun lispm-own-agent-summarize (agent &optional then from)
  "Compact the history of AGENT; then call THEN with nil or an error.
The summary is the answer of a turn offered no tools, whose sink is a
`lispm-agent--compaction'.  With FROM, summarise the turns from FROM
to the last instead of the older ones."
  (let* ((buffer (lispm-own-agent-buffer agent))
         (source (lispm-session-compaction-source buffer nil from)))
    (if (< (or (plist-get source :upto) 0) 1)
        (lispm-own-agent--compacted agent (if from (format "there are no turns from %d to \
summarise" from)
                                            "there are no older turns to summarise")
                                    then)
      (lispm-agents-set-activity agent 'thinking)
      (setf (lispm-own-agent-compacting agent) t)
      (setf (lispm-own-agent-compacting agent)
            (lispm-turn-start
             agent buffer nil (lispm-own-agent-model agent)
             (list (list :role "user"
                         :content (concat "Conversation to summarise:\n\n"
                                          (plist-get source :text))))
             :system (lambda () lispm-own-agent-compact-prompt)
             :offered nil
             :sink (lispm-agent--compaction-make :agent agent :then then :from from
                                                 :upto (plist-get source :upto))))
      (unless (lispm-turn-live-p (lispm-own-agent-compacting agent))
        ;; It ended at once (no such model, no key).
        (setf (lispm-own-agent-compacting agent) nil)))))

;;;###autoload
(defun lispm-own-agent-compact (agent)
  "Compact the session of AGENT, up to its last turn.
The summary is a heading you can read and edit; the old turns stay in
the file, archived, and in git."
  (interactive (list (lispm-own-agent-current)))
  (when (lispm-own-agent-busy-p agent)
    (user-error "%s is busy; compact once the turn is over" (lispm-actor-name agent)))
  (lispm-own-agent-summarize agent (lambda (error-text)
                                (unless error-text
                                  (message "LispM: %s's older turns are summarised"
                                           (lispm-actor-name agent))))))

;;; Presentations of turns and calls, and of the own agent

;; A turn is [[lispm:turn:SESSION/TURN]], a call
;; [[lispm:call:SESSION/TURN/CALL-ID]]: found again in the session's
;; live buffer, or in its file, opened read-only.

(defun lispm-own-agent--split-ref (id count)
  "Split ID at its first COUNT-1 slashes into COUNT parts; a turn's a number.
Signal a `user-error' if ID has fewer parts or its turn is no number."
  (let* ((parts (split-string id "/"))
         (parts (if (> (length parts) count)
                    (append (seq-take parts (1- count))
                            (list (string-join (seq-drop parts (1- count)) "/")))
                  parts)))
    (unless (and (= (length parts) count)
                 (string-match-p "\\`[0-9]+\\'" (nth 1 parts)))
      (user-error "Not a %s reference: %s" (if (= count 2) "turn" "call") id))
    (setf (nth 1 parts) (string-to-number (nth 1 parts)))
    parts))

(defun lispm-own-agent--of-session-id (session)
  "Return the live own agent whose session is SESSION, or nil."
  (seq-find (lambda (agent)
              (and (lispm-own-agent-p agent)
                   (buffer-live-p (lispm-own-agent-buffer agent))
                   (equal (buffer-local-value 'lispm-session-id
                                              (lispm-own-agent-buffer agent))
                          session)))
            (lispm-agents)))

(defun lispm-own-agent--in-session (session function)
  "Call FUNCTION in a buffer of the session SESSION, at its start.
Return its value.  The buffer is the live one, or else the session's
file, opened read-only, and closed again if FUNCTION signals.  Signal
a `user-error' if there is no such session."
  (let* ((live (seq-find (lambda (buffer)
                           (equal (buffer-local-value 'lispm-session-id buffer) session))
                         (buffer-list)))
         (file (unless live
                 (plist-get (or (seq-find (lambda (entry)
                                            (equal (plist-get entry :id) session))
                                          (lispm-sessions-list))
                                (user-error "No session %s: its file is gone" session))
                            :file)))
         (opened (and file (not (get-file-buffer file))))
         (buffer (or live (lispm-session-open file)))
         (done nil))
    (unwind-protect
        (with-current-buffer buffer
          (when opened (setq buffer-read-only t))
          (prog1 (save-restriction
                   (widen)
                   (save-excursion
                     (goto-char (point-min))
                     (let ((case-fold-search nil))
                       (funcall function))))
            (setq done t)))
      (when (and opened (not done))
        (kill-buffer buffer)))))

(defun lispm-own-agent--property-line (name value)
  "Return a regexp of the property line NAME: VALUE of a drawer."
  (format "^[ \t]*:%s:[ \t]+%s[ \t]*$" name
          (regexp-opt (list value (prin1-to-string value)))))

(defun lispm-own-agent--search-property (name value bound)
  "Move past the next property line NAME: VALUE of a drawer, before BOUND.
A line alike elsewhere (in a program or a result) is passed over.
Return nil, point unmoved, if there is none."
  (let ((regexp (lispm-own-agent--property-line name value))
        (start (point))
        (found nil))
    (while (and (not found) (re-search-forward regexp bound t))
      (setq found (save-excursion (goto-char (match-beginning 0)) (org-at-property-p))))
    (unless found (goto-char start))
    found))

(defun lispm-own-agent--find-turn (session number)
  "Move to turn NUMBER's heading in SESSION's buffer, which is current.
Return where its subtree ends; signal a `user-error' if there is no
such turn."
  (unless (lispm-own-agent--search-property "LISPM_TURN" (number-to-string number) nil)
    (user-error "Session %s has no turn %d" session number))
  (org-back-to-heading t)
  (save-excursion (org-end-of-subtree t t)))

(defun lispm-own-agent--turn-position (session number)
  "Return (BUFFER . POSITION) of turn NUMBER's heading in SESSION.
Signal a `user-error' if the session has no such turn."
  (lispm-own-agent--in-session
   session (lambda ()
             (lispm-own-agent--find-turn session number)
             (cons (current-buffer) (point)))))

(defun lispm-own-agent--call-position (session number call)
  "Return (BUFFER . POSITION) of CALL's heading in turn NUMBER of SESSION.
Signal a `user-error' if the turn has no such call."
  (lispm-own-agent--in-session
   session (lambda ()
             (let ((end (lispm-own-agent--find-turn session number)))
               (unless (lispm-own-agent--search-property "LISPM_CALL_ID" call end)
                 (user-error "Turn %d of session %s has no call %s" number session call))
               (org-back-to-heading t)
               (cons (current-buffer) (point))))))

(defun lispm-own-agent--live-turn (session number)
  "Return turn NUMBER of SESSION if it ran in this Emacs, else nil."
  (when-let* ((agent (lispm-own-agent--of-session-id session)))
    (cdr (assq number (lispm-own-agent-turns agent)))))

(defun lispm-own-agent--call-changes (session number call)
  "Return what CALL of turn NUMBER of SESSION changed, if this Emacs knows."
  (when-let* ((turn (lispm-own-agent--live-turn session number)))
    (plist-get (cdr (assoc call (lispm-turn-outcomes turn))) :changes)))

(defun lispm-own-agent--change-diff (change)
  "Return the unified diff of CHANGE, a `lispm-change', for the user."
  (let* ((file (lispm-change-file change))
         (label (if file (file-name-nondirectory file)
                  (buffer-name (lispm-change-buffer change))))
         (text (lambda (value)
                 (cond ((null value) "")
                       ((multibyte-string-p value) value)
                       (t (decode-coding-string value 'utf-8))))))
    (if (not (lispm-change-kept change))
        (format "%s: changed; its old text was too big to keep\n" label)
      (lispm-edit-diff (funcall text (lispm-change-before change))
                       (funcall text (lispm-change-after change))
                       label))))

(defun lispm-own-agent--show-diff (call edits)
  "Show in a buffer of its own the diff of EDITS, made by the call CALL."
  (let ((buffer (get-buffer-create (format "*LispM call %s*" call))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (mapconcat #'lispm-own-agent--change-diff (reverse edits) ""))
        (goto-char (point-min))
        (diff-mode)
        (lispm-agent-text-setup)
        (setq buffer-read-only t)))
    (display-buffer buffer)
    buffer))

(defun lispm-own-agent--call-approval (turn id)
  "Return the approval TURN's call ID waits for, while it waits; else nil."
  (when-let* ((call (cl-find id (lispm-turn-calls turn)
                             :key #'lispm-turn-call-id :test #'equal))
              (approval (lispm-turn-call-approval call)))
    (and (lispm-approvals-get (lispm-approval-id approval)) approval)))

(defun lispm-own-agent--session-call-approval (session number call)
  "Return the pending approval CALL of turn NUMBER of SESSION waits for, or nil."
  (when-let* ((turn (lispm-own-agent--live-turn session number)))
    (lispm-own-agent--call-approval turn call)))

(cl-defmethod lispm-present-follow ((_type (eql 'turn)) id &optional _arg)
  "Show the turn ID, SESSION/TURN, at its heading in its session."
  (pcase-let* ((`(,session ,number) (lispm-own-agent--split-ref id 2))
               (`(,buffer . ,position) (lispm-own-agent--turn-position session number)))
    (lispm-present-show buffer position)))

(cl-defmethod lispm-present-follow ((_type (eql 'call)) id &optional _arg)
  "Show the call ID, SESSION/TURN/CALL-ID, at its heading in its session.
If it changed files in this Emacs, show their diff too."
  (pcase-let* ((`(,session ,number ,call) (lispm-own-agent--split-ref id 3))
               (`(,buffer . ,position) (lispm-own-agent--call-position session number call))
               (changes (lispm-own-agent--call-changes session number call)))
    (lispm-present-show buffer position)
    (when changes
      (lispm-own-agent--show-diff call changes))))

(cl-defmethod lispm-present-type-actions ((_type (eql 'turn)) id)
  "Return the actions on the turn ID: show or revert it."
  (list (lispm-present-follow-action "Show the turn" 'turn id)
        (cons "Revert this turn"
              (lambda ()
                (pcase-let ((`(,session ,number) (lispm-own-agent--split-ref id 2)))
                  (lispm-own-agent-revert-turn
                   (or (lispm-own-agent--of-session-id session)
                       (user-error "No agent has session %s open" session))
                   number))))))

(cl-defmethod lispm-present-type-actions ((_type (eql 'call)) id)
  "Return the action on the call ID: show it."
  (list (lispm-present-follow-action "Show the call" 'call id)))

(defun lispm-own-agent--read-message (name)
  "Read a message for the agent NAME."
  (let ((text (read-string (format "Message to %s: " name))))
    (when (string-empty-p (string-trim text))
      (user-error "Nothing to send"))
    text))

(cl-defmethod lispm-actor-actions ((agent lispm-own-agent))
  "Return the action of messaging AGENT."
  (let ((name (lispm-actor-name agent)))
    (list (cons "Message it"
                (lambda ()
                  (let ((agent (lispm-agents-presented name)))
                    (lispm-own-agent-send agent (lispm-own-agent--read-message name))))))))

;;; Presentations in the session's buffer, at display time

(defun lispm-own-agent--session-ref (&optional call)
  "Return the reference of the turn at point in a session, or of its CALL.
That is SESSION/TURN, or SESSION/TURN/CALL-ID if CALL is non-nil and
point is in a call; nil if point is in no turn."
  (when-let* ((session lispm-session-id)
              (turn (org-entry-get nil "LISPM_TURN" t)))
    (if call
        (when-let* ((id (org-entry-get nil "LISPM_CALL_ID" t)))
          (format "%s/%s/%s" session turn id))
      (format "%s/%s" session turn))))

(defun lispm-own-agent--fontify-request ()
  "Return the properties of the request id just matched."
  (lispm-present-properties 'request (match-string-no-properties 1)))

(defun lispm-own-agent--fontify-sender ()
  "Return the properties of the sender just matched, if it is a live agent."
  (let ((name (match-string-no-properties 2)))
    (and (lispm-agent-get name) (lispm-present-properties 'agent name))))

(defun lispm-own-agent--fontify-stop ()
  "Return the properties of the \"Stopped at\" note just matched: its turn."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-own-agent--session-ref))))
    (lispm-present-properties 'turn ref)))

(defun lispm-own-agent--fontify-approval ()
  "Return the properties of the approval heading just matched, if it waits."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-own-agent--session-ref t)))
              (parts (ignore-errors (lispm-own-agent--split-ref ref 3)))
              (approval (apply #'lispm-own-agent--session-call-approval parts)))
    (lispm-present-properties 'approval (lispm-approval-id approval))))

(defun lispm-own-agent--fontify-heading (type)
  "Return the properties of the turn or call heading just matched, of TYPE."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-own-agent--session-ref (eq type 'call)))))
    (lispm-present-properties type ref)))

(defconst lispm-own-agent--session-keywords
  '(("^\\* \\(Turn [0-9]+\\)" (1 (lispm-own-agent--fontify-heading 'turn) prepend))
    ("^\\*\\*\\* \\(Call [^\n]+\\)$" (1 (lispm-own-agent--fontify-heading 'call) prepend))
    ("\\[Request \\(R[0-9]+\\) from \\([^]\n]+\\)\\]"
     (1 (lispm-own-agent--fontify-request) prepend)
     (2 (lispm-own-agent--fontify-sender) prepend))
    ("^: \\(Stopped at [^:\n]+\\)" (1 (lispm-own-agent--fontify-stop) prepend))
    ("^\\*\\{4\\} TODO \\(.+\\)$" (1 (lispm-own-agent--fontify-approval) prepend)))
  "What in a session stands for an object.
The headings of its turns and calls, its requests, senders, stops and
approvals.")

(defun lispm-own-agent--present-session ()
  "Set up the presentations of the session in the current buffer."
  (font-lock-add-keywords nil lispm-own-agent--session-keywords 'append)
  (setq-local font-lock-extra-managed-props
              (seq-union font-lock-extra-managed-props
                         '(keymap mouse-face follow-link lispm-presentation help-echo))))

(add-hook 'lispm-session-mode-hook #'lispm-own-agent--present-session)

;;; The own agent in the inspector

(defun lispm-own-agent--inspect-session-id (agent)
  "Return the id of own AGENT's session, or nil."
  (when-let* ((buffer (lispm-own-agent-buffer agent))
              ((buffer-live-p buffer)))
    (buffer-local-value 'lispm-session-id buffer)))

(defun lispm-own-agent--inspect-call-link (agent turn call)
  "Return a link to CALL, a `lispm-turn-call', of own AGENT's TURN."
  (let ((label (format "%s %s" (lispm-turn-call-name call) (lispm-turn-call-id call))))
    (if-let* ((session (lispm-own-agent--inspect-session-id agent)))
        (lispm-present-link 'call (format "%s/%s/%s" session (lispm-turn-number turn)
                                          (lispm-turn-call-id call))
                            label)
      label)))

(defun lispm-own-agent--inspect-outcome (turn id)
  "Return the outcome of TURN's call ID, or nil while it has none.
The turn keeps its current step's outcomes; its trace, every step's."
  (or (cdr (assoc id (lispm-turn-outcomes turn)))
      (cl-loop for (_time what detail) in (lispm-turn-trace turn)
               when (and (eq what 'result) (equal (car detail) id))
               return (cadr detail))))

(defun lispm-own-agent--inspect-call-state (turn call)
  "Return how CALL of TURN stands, as text."
  (let ((outcome (lispm-own-agent--inspect-outcome turn (lispm-turn-call-id call))))
    (cond
     ((eq (lispm-turn-call-state call) 'approval)
      (if-let* ((approval (lispm-turn-call-approval call)))
          (concat "waits for approval "
                  (lispm-present-link 'approval (lispm-approval-id approval)))
        "waits for approval"))
     ((eq (lispm-turn-call-state call) 'reply)
      (concat "waits on request " (lispm-present-link 'request (lispm-turn-call-request call))))
     ((plist-get outcome :skipped) "skipped")
     ((and outcome (plist-get outcome :ok)) "done")
     (outcome (format "failed: %s" (truncate-string-to-width
                                    (format "%s" (plist-get outcome :error)) 60 nil nil "...")))
     ((eq (lispm-turn-call-state call) 'running) "running")
     (t "not started"))))

(defun lispm-own-agent--inspect-turn-calls (agent)
  "Return own AGENT's tool use in this Emacs, newest first: (TIME TURN CALL)."
  (cl-loop for (_number . turn) in (lispm-own-agent-turns agent)
           nconc (cl-loop for (time what detail) in (lispm-turn-trace turn)
                          when (eq what 'call) collect (list time turn detail))
           into calls
           finally return (sort calls (lambda (a b) (> (car a) (car b))))))

(defun lispm-own-agent--inspect-session (agent)
  "Insert the part on own AGENT's session, model, each turn, and token use."
  (let* ((buffer (lispm-own-agent-buffer agent))
         (file (and (buffer-live-p buffer) (buffer-local-value 'lispm-session-file buffer)))
         (session (lispm-own-agent--inspect-session-id agent))
         (model (lispm-own-agent-model agent))
         (turns (lispm-own-agent-turns agent))
         (window (and model (lispm-model-window model)))
         (last-usage (and turns (lispm-turn-usage (cdr (car turns)))))
         (output (apply #'+ (mapcar (lambda (entry)
                                      (or (plist-get (lispm-turn-usage (cdr entry))
                                                     :output_tokens)
                                          0))
                                    turns))))
    (lispm-inspect-heading 1 'session "Session")
    (when file
      (lispm-inspect-insert-item (list 'file file) "- File: "
                                 (lispm-present-link 'file file (abbreviate-file-name file))))
    (lispm-inspect-line "- Id: " (or session "?"))
    (lispm-inspect-line "- Model: " (or model "?"))
    ;; As of the last turn's end: a redraw never parses the session.
    (when-let* ((usage (lispm-own-agent-used agent))
                ((> (plist-get usage :turns) 0)))
      (lispm-inspect-line "- Used in this session: " (lispm-session-usage-line usage)
                          (if-let* ((budget (lispm-own-agent-budget-of agent)))
                              (format "; budget %S" budget)
                            "")))
    (lispm-inspect-line
     (format "- Tokens: %s input in its last request%s, %d output in this Emacs's turns"
             (or (plist-get last-usage :input_tokens) "no")
             (if (and window (plist-get last-usage :input_tokens))
                 (format " (%d%% of its window of %d)"
                         (/ (* 100 (plist-get last-usage :input_tokens)) window) window)
               "")
             output))
    (when-let* (((buffer-live-p buffer))
                (plan (lispm-session-plan buffer)))
      (lispm-inspect-heading 2 'plan "Plan")
      (dolist (item plan)
        (lispm-inspect-line (format "- %s %s" (upcase (symbol-name (plist-get item :state)))
                                    (plist-get item :text)))))
    (lispm-inspect-heading 2 'turns (format "Turns of this Emacs (%d)" (length turns)))
    (if (null turns)
        (lispm-inspect-note "None yet.")
      (pcase-dolist (`(,number . ,turn) turns)
        (let ((usage (lispm-turn-usage turn)))
          (lispm-inspect-insert-item
           (list 'turn number)
           "- " (if session
                    (lispm-present-link 'turn (format "%s/%d" session number)
                                        (format "Turn %d" number))
                  (format "Turn %d" number))
           ": " (symbol-name (lispm-turn-state turn))
           (if usage
               (format ", %s input, %s output tokens"
                       (or (plist-get usage :input_tokens) "?")
                       (or (plist-get usage :output_tokens) "?"))
             "")))))))

(cl-defmethod lispm-actor-usage ((agent lispm-own-agent))
  "Return what AGENT's session used, as of its last turn's end, or nil."
  (lispm-own-agent-used agent))

(cl-defmethod lispm-actor-step ((agent lispm-own-agent))
  "Return the step AGENT is at in the plan of its session, or nil."
  (when-let* ((buffer (lispm-own-agent-buffer agent))
              ((buffer-live-p buffer))
              (plan (lispm-session-plan buffer)))
    (when-let* ((step (lispm-plan-current-step plan)))
      (format "%d/%d %s" (1+ (cl-position step plan :key (lambda (item) (plist-get item :text))
                                          :test #'equal))
              (length plan) step))))

(cl-defmethod lispm-inspect-kind-title ((_agent lispm-own-agent))
  "Return the title of the own agent's kind."
  (or (cl-call-next-method) "LispM's own agent"))

(cl-defmethod lispm-inspect-waiting-requests ((agent lispm-own-agent))
  "Return the ids of the requests AGENT waits on."
  (lispm-own-agent-waiting-requests agent))

(cl-defmethod lispm-inspect-insert ((agent lispm-own-agent) (_part (eql 'waiting)))
  "Insert each tool call of the turn AGENT has under way."
  (let ((turn (lispm-own-agent-turn agent)))
    (when (and turn (lispm-turn-live-p turn))
      (lispm-inspect-heading 2 'turn-calls
                             (format "Calls of turn %d, %s" (lispm-turn-number turn)
                                     (lispm-turn-state turn)))
      (let ((calls (lispm-turn-calls turn)))
        (if (null calls)
            (lispm-inspect-note "None yet.")
          (dolist (call calls)
            (lispm-inspect-insert-item
             (list 'call (lispm-turn-call-id call) (lispm-turn-number turn))
             "- " (lispm-own-agent--inspect-call-link agent turn call) ": "
             (lispm-own-agent--inspect-call-state turn call))
            (when-let* ((approval (lispm-turn-call-approval call)))
              (put-text-property (line-beginning-position 0) (point)
                                 'lispm-inspect-approval (lispm-approval-id approval)))))))))

(cl-defmethod lispm-inspect-insert ((agent lispm-own-agent) (_part (eql 'inbox)))
  "Insert what was given to AGENT that waits for its turn's end."
  (dolist (text (lispm-own-agent-pending agent))
    (lispm-inspect-insert-item
     (list 'pending text) "- waits for the turn's end: "
     (truncate-string-to-width (replace-regexp-in-string "[ \t\n\r]+" " " text)
                               80 nil nil "..."))))

(cl-defmethod lispm-inspect-insert ((agent lispm-own-agent) (_part (eql 'calls)))
  "Insert each tool call AGENT made in this Emacs, newest first."
  (lispm-inspect-heading 2 'own-calls "Its turns' calls in this Emacs")
  (if-let* ((calls (lispm-own-agent--inspect-turn-calls agent)))
      (pcase-dolist (`(,time ,turn ,call) (seq-take calls lispm-inspect-calls-limit))
        (lispm-inspect-insert-item
         (list 'call (lispm-turn-call-id call) (lispm-turn-number turn))
         "- " (lispm-inspect-time time) " " (lispm-own-agent--inspect-call-link agent turn call)
         (format " (turn %d): " (lispm-turn-number turn))
         (lispm-own-agent--inspect-call-state turn call)))
    (lispm-inspect-note "None.")))

(cl-defmethod lispm-inspect-insert ((agent lispm-own-agent) (_part (eql 'sections)))
  "Insert the part on AGENT's session."
  (lispm-own-agent--inspect-session agent))

(cl-defmethod lispm-inspect-revert ((agent lispm-own-agent) number)
  "Revert turn NUMBER of AGENT, once the user agrees."
  (when (yes-or-no-p (format "Revert turn %d of %s? " number (lispm-actor-name agent)))
    (lispm-own-agent-revert-turn agent number)))

;; A turn may end with its agent's activity as it was.
(add-hook 'lispm-own-agent-turn-end-functions #'lispm-inspect-changed)

;;; The short names

;; The own agent's commands are `lispm-own-agent-...'; these three were
;; named `lispm-agent-...' before it had a prefix of its own, and are
;; kept for the hands that learnt them (README names both).
(defalias 'lispm-agent-resume #'lispm-own-agent-resume)
(defalias 'lispm-agent-revert-turn #'lispm-own-agent-revert-turn)
(defalias 'lispm-agent-compact #'lispm-own-agent-compact)

(provide 'lispm-own-agent)
;;; lispm-own-agent.el ends here
