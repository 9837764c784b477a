;;; lispm-turn.el --- One turn of LispM's own agent: the loop, its state and its restarts  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A turn starts with the user's words and ends when the model answers
;; without asking for tools.  The loop is a recursion over the message
;; list, as in the agent in a hundred lines of Lisp: send the messages;
;; the model answers, or asks for tools; run the tools (every call
;; through `lispm-calls-invoke', the one pipeline, under the user's
;; policy); append the answer and the results; recurse.  Everything
;; is asynchronous, so Emacs never waits: each step goes on from a
;; callback (the model's stream, a tool's result, the user's decision).
;;
;; The turn's state is a `lispm-turn', explicit and inspectable; its
;; `state' moves along `lispm-turn-transitions', a table that says, for
;; each state, where it may go and what entering it does.  One
;; function, `lispm-turn--enter', moves the state and runs that:
;;
;;   request   a model request is under way, nothing heard yet
;;             (entering it sends the request, or stops at the limit)
;;   stream    the model's answer streams in
;;   tools     the tools it asked for run, one after the other; its
;;             asks (`lispm-turn-asking-tools') run together, each
;;             call waiting for its answer (entering it runs them)
;;   stopped   the turn stopped at a condition, waiting for a restart
;;             (entering it shows the condition)
;;   done      the model answered; the turn is over
;;   aborted   the user ended it, keeping what was done
;;
;; Each call is a `lispm-turn-call', whose own `state' says where it
;; stands: `new', `running', waiting for `approval' or for a `reply',
;; `done'.  A compaction is a turn too, offered no tools, whose sink
;; puts its answer in the session as the summary (lispm-own-agent.el).
;;
;; A call the user denies is that call's result, with the reason, and
;; the turn goes on; so are the model's own mistakes (an unknown tool,
;; arguments that are not JSON, a path outside the folder).  What the
;; model cannot fix stops the turn at a condition with restarts, as in
;; SLIME's debugger: an HTTP error or a time-out, a stream cut short,
;; an empty reply, an error inside a tool, the step limit, the same
;; call failing again and again, an interrupt.  A restart is a value, a
;; `lispm-restart' (its name, number, description, how to read its
;; argument, what it does), made by whoever stops the turn: the turn
;; for its own conditions, the own agent for a program out of fuel
;; (`lispm-turn-suspend').  `lispm-turn-restart' chooses one.
;;
;; The turn writes nothing itself: it tells its sink what happens (the
;; text, a call, a result, an approval, a note, the end) through
;; `lispm-turn-report', a generic function.  The own agent's session
;; is one sink; a test's list is another.
;;
;; Every change the turn's calls made is kept (`lispm-turn-changes'),
;; newest first, so that `lispm-turn-revert' can take the turn back.
;; Each call's changes are also written in the session with its result
;; (`lispm-turn-record'): a turn whose Emacs died is taken back from
;; that record (`lispm-turn-revert-recorded').
;;
;; An ask (`ask_agent') blocks its call, not Emacs: once the request is
;; accepted, the call records its id in the session (`:LISPM_REQUEST:',
;; saved at once) and waits; `lispm-turn-answer' ends the wait with the
;; answer.  The user's interrupt, the turn's abort and the session's
;; end are the ways out of a wait; the request stays open then, and a
;; later answer is the agent's input like any message.  A turn whose
;; Emacs died while its calls waited is made again from the session
;; by `lispm-turn-rebuild', waiting on the same requests.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-model)
(require 'lispm-tools)
(require 'lispm-calls)
(require 'lispm-edit)
(require 'lispm-session)
(require 'lispm-roles)
(require 'lispm-messages)

;;; Options

(defgroup lispm-turn nil
  "How LispM's own agent runs a turn."
  :group 'lispm
  :prefix "lispm-turn-")

(defcustom lispm-turn-step-limit 30
  "How many model requests one turn may make before it stops to ask."
  :type 'natnum)

(defcustom lispm-turn-repeat-limit 3
  "How often the same call may fail in one turn before the turn stops."
  :type 'natnum)

;;; Conditions

;; What a turn stops at, besides its model's failures (lispm-model.el)
;; and a program out of fuel (lispm-lisp.el).  They are the turn's
;; `condition', never signalled: they have no JSON-RPC code.
(lispm-define-error 'lispm-turn-failed "The turn failed" 'lispm-error)
(lispm-define-error 'lispm-turn-tool-failed "A tool failed" 'lispm-turn-failed)
(lispm-define-error 'lispm-turn-step-limit "The turn reached its step limit"
                    'lispm-turn-failed)
(lispm-define-error 'lispm-turn-repeated-failure "The same call keeps failing"
                    'lispm-turn-failed)
(lispm-define-error 'lispm-turn-interrupted "The user interrupted the turn"
                    'lispm-turn-failed)
(lispm-define-error 'lispm-turn-budget-exceeded "The turn reached its budget"
                    'lispm-turn-failed)
(lispm-define-error 'lispm-turn-wait-ended "A call stopped waiting for its answer"
                    'lispm-for-the-model)
;; Its data: the call's result, then the request's id.
(lispm-define-error 'lispm-turn-no-restart "No such restart here" 'lispm-error -32079)

;;; The turn

(cl-defstruct (lispm-turn (:constructor lispm-turn--make) (:copier nil))
  "One turn of LispM's own agent, from the user's words to the answer."
  (actor nil :documentation "Who acts: a `lispm-actor', for the policy.")
  (buffer nil :documentation "The session's buffer, where the turn shows.")
  (sink nil :documentation "What the turn tells what happens: see `lispm-turn-report'.")
  (number nil :documentation "The turn's number in its session.")
  (model nil :documentation "The name of the model in `lispm-models' it asks.")
  (system nil :documentation "Function of no arguments returning the system prompt.")
  (offered t :documentation "The tools offered: t, those of `lispm-turn-tools' its
actor may use; nil, none, as to a compaction, whose model's calls are
ignored.")
  (messages nil :documentation "The neutral messages the next request sends.")
  (conversation nil :documentation "The name the sidecar keeps its history under
between requests (see `lispm-model-stream'), or nil.")
  (state 'request :documentation "Where it is: see `lispm-turn-transitions'.")
  (steps 0 :documentation "How many model requests it has made.")
  (stream nil :documentation "The id of its model stream under way.")
  (reply nil :documentation "What the sink keeps of the current answer's text.")
  (text nil :documentation "The current answer's text pieces, newest first.")
  (thinking nil :documentation "The pieces of the current answer's block of
reasoning under way, newest first.")
  (thoughts nil :documentation "The current answer's blocks of reasoning, done, in
order: as `lispm-session-thought' makes them.")
  (calls nil :documentation "The current answer's tool calls, in order.")
  (outcomes nil :documentation "Alist of call id to outcome plist.")
  (changes nil :documentation "Every `lispm-change' its calls made, newest first.")
  (recorded nil :documentation "The changes an earlier Emacs made in it, as its
session recorded them (see `lispm-session-turn-changes'): a rebuilt turn's.")
  (failures (make-hash-table :test #'equal)
            :documentation "How often each (NAME . ARGUMENTS) failed.")
  (failing nil :documentation "The call whose failure stopped the turn.")
  (condition nil :documentation "When stopped: the condition, (SYMBOL . DATA).")
  (restarts nil :documentation "When stopped: its `lispm-restart's, in order.")
  (interrupted nil :documentation "Non-nil once the user asked it to stop.")
  (usage nil :documentation "The newest usage the model reported, a plist.")
  (spent (list :input 0 :output 0 :cached 0 :reasoning 0 :cost nil)
         :documentation "What its requests used so far: tokens in and out, those
in read from the model's cache and those out that were reasoning among
them, and their cost in dollars at the models' `:price' (nil while none
has one).")
  (context nil :documentation "Nil, or a function of the turn returning a message
to add to its conversation before its next request, or nil: a note of what
changed outside the conversation, such as the plan the user edited.")
  (budget nil :documentation "Nil, or a function of the turn returning nil while
it may send its next request, else (:message M :reader R :raise F): why
not, a function reading a new budget, and one of it that sets it.")
  (trace nil :documentation "What happened, newest first: (TIME WHAT DETAIL)."))

(cl-defstruct (lispm-turn-call (:constructor lispm-turn-call-make) (:copier nil))
  "A tool call the model asked for in a turn, and where it stands."
  (id nil :documentation "The model's id of the call.")
  (name nil :documentation "The tool's name.")
  (arguments nil :documentation "The arguments, a JSON object's text.")
  (state 'new :documentation "Where it stands: `new', not run yet; `running';
`approval', waiting for the user's decision; `reply', waiting for the
answer to its ask; `done', with its outcome.")
  (approval nil :documentation "The `lispm-approval' it waited for, once asked.")
  (request nil :documentation "The id of the request its ask made, once accepted.")
  (reported nil :documentation "Non-nil once its result was told to the sink.")
  (skip nil :documentation "Non-nil: its failure, when it comes, goes to the model
\(the restart `skip-tool' of a turn suspended in it)."))

(defun lispm-turn--call-message (call)
  "Return CALL as the assistant message and the sink give it: a plist."
  (list :id (lispm-turn-call-id call) :name (lispm-turn-call-name call)
        :arguments (lispm-turn-call-arguments call)))

(defconst lispm-turn-transitions
  '((request :to (stream stopped request) :enter lispm-turn--request)
    (stream :to (tools done stopped))
    (tools :to (tools request stopped) :enter lispm-turn--run-next)
    (stopped :to (request tools done aborted) :enter lispm-turn--stopped)
    (done :enter lispm-turn--finish)
    (aborted :enter lispm-turn--finish))
  "Each state of a turn: the states it may move to, and what entering it does.
`:enter' names the function of the turn that `lispm-turn--enter' calls
once the turn is in the state: `request' sends the request, `tools'
runs the calls, `stopped' shows the condition, `done' and `aborted'
end the turn.  A new turn is in `request', and enters it again.")

(defconst lispm-turn-asking-tools '("ask_agent")
  "The tools whose calls wait for the answer to the request they make.
Such a call's outcome, once the request is accepted, names the
request (`lispm-messages-asked-request'); the call then waits until
`lispm-turn-answer' gives it the answer.  The calls of these tools in
one step run together; every other call runs after the one before it
is over.")

(defun lispm-turn--trace (turn what &optional detail)
  "Record in TURN's trace WHAT happened, a symbol, with DETAIL."
  (push (list (float-time) what detail) (lispm-turn-trace turn)))

(defun lispm-turn--enter (turn state)
  "Move TURN to STATE, which `lispm-turn-transitions' must allow.
Then run what entering STATE does, as the table says.  A state is
entered only here."
  (let ((from (lispm-turn-state turn)))
    (unless (memq state (plist-get (cdr (assq from lispm-turn-transitions)) :to))
      (error "A turn cannot go from %s to %s" from state))
    (setf (lispm-turn-state turn) state)
    (lispm-turn--trace turn 'state state)
    (lispm-turn--tell turn 'state)
    (when-let* ((enter (plist-get (cdr (assq state lispm-turn-transitions)) :enter)))
      (funcall enter turn))))

(defun lispm-turn-live-p (turn)
  "Return non-nil if TURN is neither done nor aborted."
  (not (memq (lispm-turn-state turn) '(done aborted))))

(defun lispm-turn-activity (turn)
  "Return the activity of TURN, for the agent list."
  (pcase (lispm-turn-state turn)
    ((or 'request 'stream) 'thinking)
    ('tools (cond ((cl-some (lambda (call) (eq (lispm-turn-call-state call) 'approval))
                            (lispm-turn-calls turn))
                   'waiting-for-approval)
                  ((and (not (lispm-turn--running-call turn))
                        (lispm-turn-waiting-requests turn))
                   'waiting-for-reply)
                  (t 'running-tool)))
    ('stopped 'stopped)
    (_ 'idle)))

(defun lispm-turn--sink-live-p (turn)
  "Return non-nil if TURN's sink still takes what happens."
  (lispm-turn-sink-live-p (lispm-turn-sink turn) turn))

;;; The sink

(cl-defgeneric lispm-turn-report (sink turn what &rest args)
  "Tell SINK what happened in TURN: WHAT, a symbol, with ARGS.
The turn writes nothing itself; its sink shows it (the own agent's
session, a test's list).  WHAT and ARGS are:

  state                 the state changed, or what a call waits for
  text TEXT             a piece of the model's answer
  text-end              the answer's text is over (it may have none)
  thinking TEXT         a piece of the model's reasoning
  thought THOUGHT       a block of the model's reasoning is over, as
                        `lispm-session-thought' makes it
  call CALL             a call the model asked for
  approval CALL APPROVAL  CALL waits for the user's decision
  decided CALL STATE REASON  it was decided: STATE `done' or
                        `cancelled', with the REASON of a denial
  request CALL ID       CALL's ask was accepted as request ID
  result CALL TEXT ERROR RECORDS  CALL's result as the model gets it;
                        ERROR non-nil for a failure, RECORDS the
                        changes as `lispm-turn-record' makes them
  note TEXT             a line to show, not for the model
  stopped               the turn stopped at its condition, with its
                        restarts (`lispm-turn-restarts')
  end                   the turn is over: `done' or `aborted'

A sink ignores what it has no method for.")

(cl-defmethod lispm-turn-report (_sink _turn _what &rest _args)
  "Ignore what happened: a sink without a method for it."
  nil)

(cl-defgeneric lispm-turn-sink-live-p (sink turn)
  "Return non-nil if SINK still takes what happens in TURN.
A turn whose sink is gone runs no more: it is cancelled."
  (ignore sink turn)
  t)

(defun lispm-turn--tell (turn what &rest args)
  "Tell TURN's sink WHAT happened, with ARGS: see `lispm-turn-report'."
  (apply #'lispm-turn-report (lispm-turn-sink turn) turn what args))

;;; Asking the model

(defvar lispm-turn--tools nil
  "The tools offered, as made for `lispm-tools', or nil.
It is (REGISTRY ENTRIES . PLISTS): each of ENTRIES (TOOL . PLIST),
PLIST the tool as the request gives it to the model, and PLISTS all
of them, the list a request gets when none is left out.")

(defun lispm-turn--forget-tools ()
  "Forget the tools offered: a tool was defined or redefined."
  (setq lispm-turn--tools nil))

(add-hook 'lispm-tools-changed-hook #'lispm-turn--forget-tools)

(defun lispm-turn-tools (&optional actor)
  "Return the tools offered to the model: LispM's registry, for the request.
With ACTOR, only those it may use (`lispm-roles-actor-tools') and is
offered (`lispm-tools-offered-p': past a number of them, the tools of
MCP servers only once ACTOR found them).  They are made once, not for
each request, until a tool is defined or redefined; when none is left
out, the list is the same each time."
  (unless (and lispm-turn--tools (eq (car lispm-turn--tools) lispm-tools))
    (let ((entries (mapcar (lambda (tool)
                             (cons tool
                                   (list :name (lispm-tool-name tool)
                                         :description (lispm-tool-description tool)
                                         :parameters (lispm-tool-schema tool))))
                           lispm-tools)))
      (setq lispm-turn--tools (cons lispm-tools (cons entries (mapcar #'cdr entries))))))
  (pcase-let* ((`(,_ ,entries . ,plists) lispm-turn--tools)
               (allowed (if actor (lispm-roles-actor-tools actor) 'all))
               (kept (cl-loop for (tool . plist) in entries
                              when (and (or (eq allowed 'all)
                                            (member (lispm-tool-name tool) allowed))
                                        (lispm-tools-offered-p tool actor))
                              collect plist)))
    (if (= (length kept) (length plists)) plists kept)))

(cl-defun lispm-turn-start (actor buffer number model messages
                                  &key system sink (offered t) budget conversation context)
  "Start turn NUMBER of ACTOR in the session BUFFER; return the turn.
MODEL is a name in `lispm-models'; MESSAGES the conversation so far,
the user's new words last.  SYSTEM is a function returning the system
prompt; SINK is told what happens (`lispm-turn-report').  OFFERED nil
offers the model no tools: the turn is one answer, as a compaction's.
BUDGET, if non-nil, is checked before each request (see the slot
`budget' of `lispm-turn'); CONVERSATION names the history the sidecar
keeps between requests, so that each sends only what is new; CONTEXT
is as the slot `context' of `lispm-turn'."
  (let ((turn (lispm-turn--make :actor actor :buffer buffer :number number
                                :model model :messages messages :system system
                                :sink sink :offered offered :budget budget
                                :conversation conversation :context context)))
    (lispm-turn--trace turn 'start number)
    (lispm-turn--enter turn 'request)
    turn))

(defun lispm-turn--request (turn)
  "Send the messages of TURN to its model, or stop at the step limit."
  (cond
   ((lispm-turn-interrupted turn)
    (lispm-turn--stop-request turn 'lispm-turn-interrupted
                              "Interrupted before the next request"))
   ((when-let* ((budget (lispm-turn-budget turn))
                (over (funcall budget turn)))
      (lispm-turn--stop-budget turn over)
      t))
   ((>= (lispm-turn-steps turn) lispm-turn-step-limit)
    (lispm-turn--stop turn 'lispm-turn-step-limit
                      (format "%d model requests in this turn, the limit"
                              (lispm-turn-steps turn))
                      nil
                      (list (lispm-turn--retry-restart
                             turn (lambda (turn)
                               (setf (lispm-turn-steps turn) 0)
                               (lispm-turn--enter turn 'request)))
                            (lispm-turn-abort-restart turn))))
   (t
    (cl-incf (lispm-turn-steps turn))
    (when-let* ((context (lispm-turn-context turn))
                (note (funcall context turn)))
      (setf (lispm-turn-messages turn) (append (lispm-turn-messages turn) (list note))))
    (setf (lispm-turn-text turn) nil
          (lispm-turn-thinking turn) nil
          (lispm-turn-thoughts turn) nil
          (lispm-turn-calls turn) nil
          (lispm-turn-outcomes turn) nil
          (lispm-turn-reply turn) nil)
    (condition-case err
        (setf (lispm-turn-stream turn)
              (lispm-model-stream
               (lispm-turn-model turn)
               (list :system (if (lispm-turn-system turn)
                                 (funcall (lispm-turn-system turn))
                               "")
                     :messages (lispm-turn-messages turn)
                     :tools (and (lispm-turn-offered turn)
                                 (lispm-turn-tools (lispm-turn-actor turn)))
                     :conversation (lispm-turn-conversation turn))
               (lambda (event) (lispm-turn--event turn event))))
      ;; No model, no key, no sidecar: each stops here, with restarts.
      (error
       (lispm-turn--stop-request turn 'lispm-model-unavailable
                                 (lispm-error-message err)))))))

(defun lispm-turn--end-reply (turn)
  "End the model's text of TURN's current answer, if it began."
  (when (lispm-turn-text turn)
    (lispm-turn--tell turn 'text-end)))

(defun lispm-turn--event (turn event)
  "Take EVENT of TURN's model stream."
  (if (not (lispm-turn--sink-live-p turn))
      (lispm-turn-cancel turn)
    (unless (equal (plist-get event :type) "reasoning")
      (lispm-turn--end-thought turn nil))
    (pcase (plist-get event :type)
      ("reasoning"
       (when (eq (lispm-turn-state turn) 'request)
         (lispm-turn--enter turn 'stream))
       (when-let* ((text (plist-get event :text))
                   ((not (string-empty-p text))))
         (push text (lispm-turn-thinking turn))
         (lispm-turn--tell turn 'thinking text))
       (when (or (plist-get event :signature) (plist-get event :redacted))
         (lispm-turn--end-thought turn event)))
      ("text"
       (when (eq (lispm-turn-state turn) 'request)
         (lispm-turn--enter turn 'stream))
       (let ((text (plist-get event :text)))
         (push text (lispm-turn-text turn))
         (lispm-turn--tell turn 'text text)))
      ((and "tool_call" (guard (lispm-turn-offered turn)))
       (when (eq (lispm-turn-state turn) 'request)
         (lispm-turn--enter turn 'stream))
       (setf (lispm-turn-calls turn)
             (append (lispm-turn-calls turn)
                     (list (lispm-turn-call-make
                            :id (plist-get event :id)
                            :name (plist-get event :name)
                            :arguments (or (plist-get event :arguments) ""))))))
      ("usage" (setf (lispm-turn-usage turn) event)
       (lispm-turn--spend turn event))
      ("done" (setf (lispm-turn-stream turn) nil) (lispm-turn--answered turn event))
      ("error" (setf (lispm-turn-stream turn) nil) (lispm-turn--stream-failed turn event)))))

(defun lispm-turn--end-thought (turn end)
  "End TURN's block of reasoning under way, if any; END is the event saying so.
A signature or redacted data END gives goes with it (Anthropic's); a
block that ends as the text or a call begins has none.  The sink is
told (`thought')."
  (when (or (lispm-turn-thinking turn) end)
    (let ((thought (lispm-session-thought
                    (apply #'concat (reverse (lispm-turn-thinking turn)))
                    (plist-get end :signature) (plist-get end :redacted))))
      (setf (lispm-turn-thinking turn) nil
            (lispm-turn-thoughts turn) (append (lispm-turn-thoughts turn) (list thought)))
      (lispm-turn--tell turn 'thought thought))))

(defun lispm-turn--stream-failed (turn event)
  "Stop TURN at the condition EVENT, an error event of its stream, names."
  (lispm-turn--end-reply turn)
  (lispm-turn--trace turn 'model-error event)
  (let* ((status (plist-get event :status))
         (condition (lispm-model-error-condition event))
         (message (or (plist-get event :message) "the model failed")))
    (lispm-turn--stop-request
     turn
     (if (and (eq condition 'lispm-model-stream-cut) (lispm-turn-interrupted turn))
         'lispm-turn-interrupted
       condition)
     (if status
         (format "HTTP %s: %s%s" status message
                 (if (plist-get event :body)
                     (concat "\n" (plist-get event :body)) ""))
       message)
     event)))

(defun lispm-turn--answer-message (turn)
  "Return the assistant message of TURN's current answer."
  (let ((text (apply #'concat (reverse (lispm-turn-text turn))))
        (calls (mapcar #'lispm-turn--call-message (lispm-turn-calls turn))))
    (append (list :role "assistant" :content text)
            (and (lispm-turn-thoughts turn) (list :reasoning (lispm-turn-thoughts turn)))
            (and calls (list :tool_calls calls)))))

(defun lispm-turn--answered (turn event)
  "Go on from TURN's model answer, which ended with EVENT."
  (lispm-turn--end-reply turn)
  (lispm-turn--trace turn 'answer (plist-get event :stop_reason))
  (let ((message (lispm-turn--answer-message turn)))
    (cond
     ((and (string-empty-p (plist-get message :content))
           (null (lispm-turn-calls turn)))
      (lispm-turn--stop-request turn 'lispm-model-malformed-reply
                                "The model's reply was empty" event))
     (t
      (setf (lispm-turn-messages turn)
            (append (lispm-turn-messages turn) (list message)))
      (if (lispm-turn-calls turn)
          (progn (dolist (call (lispm-turn-calls turn))
                   (lispm-turn--tell turn 'call call))
                 (lispm-turn--enter turn 'tools))
        (lispm-turn--enter turn 'done))))))

;;; Running the tools

(defun lispm-turn--condition-symbol (outcome)
  "Return the condition symbol of a failed OUTCOME, or nil."
  (let ((condition (plist-get outcome :condition)))
    (cond ((consp condition) (car condition))
          ((stringp condition) (intern condition))
          ((symbolp condition) condition))))

(defun lispm-turn--for-the-model-p (outcome)
  "Return non-nil if the failed OUTCOME is for the model, as a result.
A refusal, and the model's own mistakes: an unknown tool, bad
arguments, a path outside the folder; a message the sidecar refused or
an ask left unanswered, and a wait the user ended."
  (memq 'lispm-for-the-model
        (get (lispm-turn--condition-symbol outcome) 'error-conditions)))

(defun lispm-turn--refused-p (outcome)
  "Return non-nil if OUTCOME is a refusal."
  (memq 'lispm-policy-denied
        (get (lispm-turn--condition-symbol outcome) 'error-conditions)))

(defun lispm-turn--result-text (outcome)
  "Return the text of OUTCOME, as the model gets it."
  (cond ((plist-get outcome :ok) (or (plist-get outcome :text) ""))
        ((lispm-turn--refused-p outcome)
         (format "Refused: %s.  Do not repeat this call unchanged."
                 (plist-get outcome :error)))
        (t (format "Error: %s" (plist-get outcome :error)))))

(defun lispm-turn--outcome (turn call)
  "Return the outcome of TURN's CALL, or nil."
  (cdr (assoc (lispm-turn-call-id call) (lispm-turn-outcomes turn))))

(defun lispm-turn--asking-p (call)
  "Return non-nil if CALL is of one of `lispm-turn-asking-tools'."
  (member (lispm-turn-call-name call) lispm-turn-asking-tools))

(defun lispm-turn--next-call (turn)
  "Return the first call of TURN not started yet, or nil."
  (cl-find-if (lambda (call)
                (eq (lispm-turn-call-state call) 'new))
              (lispm-turn-calls turn)))

(defun lispm-turn--running-call (turn)
  "Return the call of TURN under way that the next call waits for, or nil.
An ask, which runs together with the calls after it, is not one."
  (cl-find-if (lambda (call)
                (and (memq (lispm-turn-call-state call) '(running approval reply))
                     (not (lispm-turn--asking-p call))))
              (lispm-turn-calls turn)))

(defun lispm-turn--run-next (turn)
  "Start each call of TURN not started yet, in order; then go on.
A call starts once the one before it is over, or at once after an ask
\(`lispm-turn-asking-tools'): asks run together, with the calls after
them.  A call that calls back before `lispm-calls-invoke' returns (a
read, an edit) is followed by the next one in this loop: no timer, no
nesting.  Once every call has its outcome, the turn goes on.  Nothing
happens unless TURN is running its tools: a result that comes after
the user ended the turn, or stopped it, leaves it so."
  (let ((again t))
    (while again
      (setq again nil)
      (let ((call (lispm-turn--next-call turn)))
        (cond
         ((not (and (eq (lispm-turn-state turn) 'tools) (lispm-turn--sink-live-p turn))) nil)
         ((lispm-turn--running-call turn) nil)
         ((null call)
          (unless (cl-some (lambda (call) (not (lispm-turn--outcome turn call)))
                           (lispm-turn-calls turn))
            (lispm-turn--tools-done turn)))
         ((lispm-turn-interrupted turn)
          (lispm-turn--stop-request turn 'lispm-turn-interrupted
                                    "Interrupted between tool calls"))
         (t (setq again (lispm-turn--invoke turn call))))))))

(defun lispm-turn--invoke (turn call)
  "Run CALL of TURN through the pipeline.
Return non-nil if the next call may start now: CALL's outcome came at
once, before the pipeline returned, or CALL is an ask, which runs
together with the calls after it.  A later outcome runs the next call
from a timer, outside whatever delivered it.  An ask's request, once
accepted, makes CALL wait for its answer (`lispm-turn--await')."
  (let ((returned nil)
        (at-once nil))
    (lispm-turn--trace turn 'call call)
    (setf (lispm-turn-call-state call) 'running)
    (lispm-calls-invoke
     (lispm-turn-actor turn) (lispm-turn-call-name call) (lispm-turn-call-arguments call)
     (lambda (outcome)
       (if-let* (((lispm-turn--asking-p call))
                 (request-id (lispm-messages-asked-request outcome)))
           (lispm-turn--await turn call request-id)
         (lispm-turn--called turn call outcome)
         (if returned
             (run-at-time 0 nil #'lispm-turn--run-next turn)
           (setq at-once t))))
     :on-ask (lambda (approval)
               (setf (lispm-turn-call-state call) 'approval
                     (lispm-turn-call-approval call) approval)
               (lispm-turn--tell turn 'approval call approval)
               (lispm-turn--changed turn))
     :on-decided (lambda (_approval answer)
                   (setf (lispm-turn-call-state call) 'running)
                   (let ((denied (not (eq (plist-get answer :decision) 'allow)))
                         (reason (plist-get answer :reason)))
                     ;; Withdrawn (its agent left) is no one's denial: say so.
                     (when (eq (plist-get answer :decision) 'withdrawn)
                       (setq reason (concat "withdrawn" (and reason (concat ", " reason)))))
                     (lispm-turn--tell turn 'decided call (if denied 'cancelled 'done)
                                       (and denied reason)))
                   (lispm-turn--changed turn)))
    (setq returned t)
    (or at-once (lispm-turn--asking-p call))))

;;; Waiting for answers

(defun lispm-turn-waiting-requests (turn)
  "Return the ids of the requests that TURN waits on, in the order it asked."
  (delq nil (mapcar (lambda (call)
                      (and (eq (lispm-turn-call-state call) 'reply)
                           (lispm-turn-call-request call)))
                    (lispm-turn-calls turn))))

(defun lispm-turn--waiting-on (turn request-id)
  "Return the call of TURN that waits on REQUEST-ID, or nil."
  (cl-find-if (lambda (call) (and (eq (lispm-turn-call-state call) 'reply)
                                  (equal (lispm-turn-call-request call) request-id)))
              (lispm-turn-calls turn)))

(defun lispm-turn--await (turn call request-id)
  "Make TURN's CALL wait for the answer to REQUEST-ID, the request it made.
The session records the request and is saved at once, so that a
restart finds it.  A turn interrupted meanwhile ends the wait at once;
one that is over does not wait: the answer will be input."
  (lispm-turn--trace turn 'waiting (list (lispm-turn-call-id call) request-id))
  (setf (lispm-turn-call-request call) request-id)
  (when (lispm-turn--sink-live-p turn)
    (lispm-turn--tell turn 'request call request-id))
  (when (lispm-turn-live-p turn)
    (setf (lispm-turn-call-state call) 'reply)
    (if (lispm-turn-interrupted turn)
        (progn (lispm-turn--end-wait turn call "Interrupted by the user")
               (run-at-time 0 nil #'lispm-turn--run-next turn))
      (lispm-turn--changed turn))))

(defun lispm-turn-answer (turn request-id outcome)
  "End the wait of TURN's call on REQUEST-ID with OUTCOME, the answer.
OUTCOME is the call's result: (:ok t :text \"[Reply from B to request
R1]...\"), or a failure, given to the model too.  Return non-nil if a
call waited on REQUEST-ID; once every call has its outcome, the turn
goes on, from a timer, outside whatever delivered the answer."
  (when-let* ((call (lispm-turn--waiting-on turn request-id)))
    (setf (lispm-turn-call-state call) 'running)
    (lispm-turn--trace turn 'answered (list (lispm-turn-call-id call) request-id))
    (lispm-turn--called turn call outcome)
    (run-at-time 0 nil #'lispm-turn--run-next turn)
    t))

(defun lispm-turn--end-wait (turn call why)
  "End the wait of TURN's CALL without its answer, for the reason WHY."
  (let* ((request-id (lispm-turn-call-request call))
         (text (format "%s while waiting for the answer to request %s; the request \
stays open, and its answer will come as a message" why request-id)))
    (setf (lispm-turn-call-state call) 'running)
    (lispm-turn--trace turn 'wait-ended (list (lispm-turn-call-id call) request-id))
    (lispm-turn--called turn call (list :ok nil :error text
                                        :condition (list 'lispm-turn-wait-ended text
                                                         request-id)))))

(defun lispm-turn-end-waits (turn why)
  "End the wait of every call of TURN; the result of each gives WHY.
Return the ids of the requests they waited on.  The requests stay
open; their answers, when they come, are input like any message."
  (let ((ids (lispm-turn-waiting-requests turn)))
    (dolist (id ids)
      (lispm-turn--end-wait turn (lispm-turn--waiting-on turn id) why))
    ids))

(defun lispm-turn--changed (turn)
  "Tell TURN's sink that something of it changed."
  (lispm-turn--tell turn 'state))

(defun lispm-turn--called (turn call outcome)
  "Record OUTCOME of TURN's CALL and show it."
  (let* ((id (lispm-turn-call-id call))
         (outcome (if (plist-get outcome :ok)
                      outcome
                    (plist-put (copy-sequence outcome) :error
                               (or (plist-get outcome :error) "failed")))))
    (lispm-turn--trace turn 'result (list id outcome))
    (setf (lispm-turn-changes turn)
          (append (reverse (plist-get outcome :changes)) (lispm-turn-changes turn)))
    (when (plist-get outcome :changes)
      ;; As the call left them: the session's record of its changes.
      (setq outcome (plist-put outcome :records
                               (delq nil (mapcar #'lispm-turn-record
                                                 (plist-get outcome :changes))))))
    (setf (lispm-turn-call-state call) 'done)
    (when (lispm-turn-call-skip call)
      (setq outcome (plist-put outcome :skipped t)))
    (unless (plist-get outcome :ok)
      (cl-incf (gethash (cons (lispm-turn-call-name call) (lispm-turn-call-arguments call))
                        (lispm-turn-failures turn) 0)))
    (setf (alist-get id (lispm-turn-outcomes turn) nil nil #'equal) outcome)
    (when (or (plist-get outcome :ok) (plist-get outcome :skipped)
              (lispm-turn--for-the-model-p outcome))
      (lispm-turn--report turn call outcome))
    (lispm-turn--changed turn)))

(defun lispm-turn--report (turn call outcome)
  "Show OUTCOME of TURN's CALL in the session, unless it was shown."
  (unless (lispm-turn-call-reported call)
    (setf (lispm-turn-call-reported call) t)
    (when (lispm-turn--sink-live-p turn)
      (lispm-turn--tell turn 'result call
                        (if outcome (lispm-turn--capped outcome)
                          "Not run: the user ended the turn.")
                        (not (plist-get outcome :ok))
                        (plist-get outcome :records)))))

(defun lispm-turn--capped (outcome)
  "Return the result text of OUTCOME, cut at the source for model and buffer."
  (lispm-session-cap-result (lispm-turn--result-text outcome)))

(defun lispm-turn--repeated (turn)
  "Return the first call of TURN that failed too often, or nil."
  (cl-find-if (lambda (call)
                (>= (gethash (cons (lispm-turn-call-name call) (lispm-turn-call-arguments call))
                             (lispm-turn-failures turn) 0)
                    lispm-turn-repeat-limit))
              (lispm-turn-calls turn)))

(defun lispm-turn--tools-done (turn)
  "Go on when each call of TURN has an outcome: stop, or ask the model."
  (let* ((outcomes (lispm-turn-outcomes turn))
         (failing (cl-find-if
                   (lambda (call)
                     (let ((outcome (cdr (assoc (lispm-turn-call-id call) outcomes))))
                       (and (not (plist-get outcome :ok))
                            (not (plist-get outcome :skipped))
                            (not (lispm-turn--for-the-model-p outcome)))))
                   (lispm-turn-calls turn)))
         (repeated (and (not failing) (lispm-turn--repeated turn))))
    (cond
     (failing
      (setf (lispm-turn-failing turn) failing)
      (let ((outcome (cdr (assoc (lispm-turn-call-id failing) outcomes))))
        ;; A program that ended out of fuel (its calls nested too deep,
        ;; or it reached a limit) stops at the fuel condition, without
        ;; MORE-FUEL: it is over.
        (if (memq 'lispm-lisp-fuel-exhausted
                  (get (lispm-turn--condition-symbol outcome) 'error-conditions))
            (lispm-turn--stop turn 'lispm-lisp-fuel-exhausted
                              (format "%s failed: %s" (lispm-turn-call-name failing)
                                      (plist-get outcome :error))
                              outcome
                              (list (lispm-turn-skip-restart turn)
                                    (lispm-turn-abort-restart turn)))
          (lispm-turn--stop-call turn 'lispm-turn-tool-failed
                                 (format "%s failed: %s" (lispm-turn-call-name failing)
                                         (plist-get outcome :error))
                                 outcome))))
     (repeated
      (setf (lispm-turn-failing turn) repeated)
      (lispm-turn--stop-call turn 'lispm-turn-repeated-failure
                             (format "%s failed %d times with the same arguments"
                                     (lispm-turn-call-name repeated) lispm-turn-repeat-limit)))
     (t
      (dolist (call (lispm-turn-calls turn))
        (lispm-turn--report turn call (cdr (assoc (lispm-turn-call-id call) outcomes))))
      (setf (lispm-turn-messages turn)
            (append (lispm-turn-messages turn)
                    (mapcar (lambda (call)
                              (list :role "tool" :tool_call_id (lispm-turn-call-id call)
                                    :name (lispm-turn-call-name call)
                                    :content (lispm-turn--capped
                                              (cdr (assoc (lispm-turn-call-id call) outcomes)))))
                            (lispm-turn-calls turn))))
      (lispm-turn--enter turn 'request)))))

;;; Restarts

(cl-defstruct (lispm-restart (:constructor lispm-restart-make) (:copier nil))
  "A way to go on from the condition a turn stopped at, as in SLIME's debugger.
Whoever stops the turn makes its restarts; the condition buffer shows
them with their numbers, and `lispm-turn-restart' chooses one."
  (name nil :documentation "A symbol, such as `retry' or `abort'.")
  (number nil :documentation "Its key in the condition buffer, 0 to 9, fixed by name:
0 `retry', 1 `other-model', 2 `skip-tool', 3 `edit-args', 4 `abort',
5 `more-fuel', 6 `raise-budget'.  Nil: the first free one.")
  (description nil :documentation "What it does: a string, or a function of no
arguments returning one.")
  (reader nil :documentation "Nil, or a function of no arguments that asks the user
for its argument.")
  (function nil :documentation "The function of its argument that goes on."))

(defun lispm-restart-describe (restart)
  "Return what RESTART, a `lispm-restart', does."
  (let ((description (lispm-restart-description restart)))
    (if (functionp description) (funcall description) description)))

(defun lispm-turn--retry-restart (turn function)
  "Return the restart `retry' of TURN, calling FUNCTION with TURN when chosen."
  (lispm-restart-make
   :name 'retry :number 0
   :description "Send the request again (or run the failing call again)"
   :function (lambda (_) (funcall function turn))))

(defun lispm-turn--other-models (turn)
  "Return the names of the models of `lispm-models' but TURN's."
  (remove (lispm-turn-model turn) (lispm-model-names)))

(defun lispm-turn--other-model-restart (turn &optional go-on)
  "Return the restart `other-model' of TURN: its request, to another model.
GO-ON, a function of TURN, sends it once the model is set; by default
the failed request is sent again (`lispm-turn--retry-request')."
  (lispm-restart-make
   :name 'other-model :number 1
   :description (lambda ()
                  (format "Send the request again to another model (now %s; also: %s)"
                          (lispm-turn-model turn)
                          (string-join (lispm-turn--other-models turn) ", ")))
   :reader (lambda ()
             (completing-read "Other model: " (lispm-turn--other-models turn) nil t))
   :function (lambda (model)
               (lispm-model-get model)
               (setf (lispm-turn-model turn) model)
               (funcall (or go-on #'lispm-turn--retry-request) turn))))

(defun lispm-turn-skip-restart (turn &optional then)
  "Return the restart `skip-tool' of TURN: the failure is the call's result.
Of a turn suspended in its running call (`lispm-turn-suspend'), the
call's failure, when it comes, goes to the model; the turn runs its
tools again, then THEN is called with no arguments."
  (lispm-restart-make
   :name 'skip-tool :number 2
   :description "Give the error to the model as the tool's result"
   :function
   (lambda (_)
     (if-let* ((running (lispm-turn--running-call turn)))
         (progn (setf (lispm-turn-call-skip running) t)
                (lispm-turn-go-on turn)
                (when then (funcall then)))
       (let* ((call (lispm-turn-failing turn))
              (outcome (cdr (assoc (lispm-turn-call-id call) (lispm-turn-outcomes turn)))))
         (clrhash (lispm-turn-failures turn))
         (plist-put outcome :skipped t)
         ;; Every call has its outcome: the tools are done.
         (lispm-turn--enter turn 'tools))))))

(defun lispm-turn--edit-args-restart (turn)
  "Return the restart `edit-args' of TURN: its failing call, run with new ones."
  (lispm-restart-make
   :name 'edit-args :number 3
   :description (lambda ()
                  (format "Edit the arguments of %s and run it"
                          (lispm-turn-call-name (lispm-turn-failing turn))))
   :reader (lambda ()
             (let ((text (read-string "Arguments (JSON): "
                                      (lispm-turn-call-arguments (lispm-turn-failing turn)))))
               (condition-case err
                   (progn (ignore (json-parse-string text)) text)
                 (json-error (user-error "Not JSON: %s" (error-message-string err))))))
   :function (lambda (arguments)
               (let ((call (lispm-turn-failing turn)))
                 (setf (lispm-turn-call-arguments call) arguments)
                 (lispm-turn--set-call-arguments turn call)
                 (clrhash (lispm-turn-failures turn))
                 (lispm-turn--rerun turn call)))))

(defun lispm-turn-abort-restart (turn &optional before)
  "Return the restart `abort' of TURN: it ends, keeping what was done.
BEFORE, if non-nil, is called with no arguments first."
  (lispm-restart-make
   :name 'abort :number 4
   :description "End the turn, keeping what was done"
   :function (lambda (_)
               (when before (funcall before))
               (lispm-turn--abort turn))))

;;; Tokens, cost and the budget

(defun lispm-turn-cost (model usage)
  "Return the dollars USAGE, a usage event, costs on MODEL, or nil.
MODEL's `:price' in `lispm-models' is (:input DOLLARS :output DOLLARS
:cached DOLLARS :cache-write DOLLARS), per million tokens; the
prompt's tokens read from the API's cache cost `:cached' and those
written to it `:cache-write', each `:input' if not given.  Without a
price, nil."
  (when-let* ((price (plist-get (ignore-errors (lispm-model-get model)) :price)))
    (let* ((input (or (plist-get usage :input_tokens) 0))
           (cached (or (plist-get usage :cached_tokens) 0))
           (written (or (plist-get usage :cache_write_tokens) 0))
           (per-input (or (plist-get price :input) 0)))
      (/ (+ (* (- input cached written) per-input)
            (* cached (or (plist-get price :cached) per-input))
            (* written (or (plist-get price :cache-write) per-input))
            (* (or (plist-get usage :output_tokens) 0) (or (plist-get price :output) 0)))
         1e6))))

(defun lispm-turn--spend (turn usage)
  "Add USAGE, a usage event of TURN's model, to what TURN spent."
  (let ((spent (lispm-turn-spent turn))
        (cost (lispm-turn-cost (lispm-turn-model turn) usage)))
    (setf (lispm-turn-spent turn)
          (list :input (+ (plist-get spent :input) (or (plist-get usage :input_tokens) 0))
                :output (+ (plist-get spent :output) (or (plist-get usage :output_tokens) 0))
                :cached (+ (or (plist-get spent :cached) 0)
                           (or (plist-get usage :cached_tokens) 0))
                :reasoning (+ (or (plist-get spent :reasoning) 0)
                              (or (plist-get usage :reasoning_tokens) 0))
                :cost (if (or cost (plist-get spent :cost))
                          (+ (or (plist-get spent :cost) 0) (or cost 0))
                        nil)))))

(defun lispm-turn--stop-budget (turn over)
  "Stop TURN at its budget, for the reason in OVER, its budget function's answer.
Its restarts raise the budget and go on, send the request to another
model, or end the turn; nothing was sent, so nothing is cut mid-call."
  (lispm-turn--stop
   turn 'lispm-turn-budget-exceeded (plist-get over :message) nil
   (list (lispm-restart-make
          :name 'raise-budget :number 6
          :description "Raise the budget, and send the request"
          :reader (plist-get over :reader)
          :function (lambda (value)
                      (funcall (plist-get over :raise) value)
                      (lispm-turn--enter turn 'request)))
         (lispm-turn--other-model-restart
          turn (lambda (turn)
                 ;; Past the budget still: it goes on once, on the model
                 ;; chosen, and stops again at the next request.
                 (let ((budget (lispm-turn-budget turn)))
                   (setf (lispm-turn-budget turn) nil)
                   (lispm-turn--enter turn 'request)
                   (setf (lispm-turn-budget turn) budget))))
         (lispm-turn-abort-restart turn))))

;;; Stopping

(defun lispm-turn--stop (turn type message data restarts)
  "Stop TURN at the condition TYPE with MESSAGE and DATA, offering RESTARTS.
RESTARTS is a list of `lispm-restart's, in the order they are shown."
  (setf (lispm-turn-condition turn) (list type message data)
        (lispm-turn-restarts turn) restarts)
  (lispm-turn--enter turn 'stopped))

(defun lispm-turn--stopped (turn)
  "Show the condition TURN just stopped at, if any: note it, tell the sink.
A turn ended as its actor left stops without one (`lispm-turn-end')."
  (pcase-let ((`(,type ,message) (lispm-turn-condition turn)))
    (when type
      (lispm-turn--trace turn 'condition (list type message))
      (when (lispm-turn--sink-live-p turn)
        (lispm-turn--tell turn 'note (format "Stopped at %s: %s" type
                                             (car (split-string message "\n")))))
      (lispm-turn--tell turn 'stopped))))

(defun lispm-turn--stop-request (turn type message &optional data)
  "Stop TURN, whose request failed, at TYPE with MESSAGE and DATA.
Its restarts send the request again, to the same model or another."
  (lispm-turn--stop turn type message data
                    (list (lispm-turn--retry-restart turn #'lispm-turn--retry-request)
                          (lispm-turn--other-model-restart turn)
                          (lispm-turn-abort-restart turn))))

(defun lispm-turn--stop-call (turn type message &optional data)
  "Stop TURN, whose failing call failed, at TYPE with MESSAGE and DATA.
Its restarts run the call again, as it was or with other arguments, or
give its failure to the model."
  (lispm-turn--stop turn type message data
                    (list (lispm-turn--retry-restart
                           turn (lambda (turn)
                             (clrhash (lispm-turn-failures turn))
                             (lispm-turn--rerun turn (lispm-turn-failing turn))))
                          (lispm-turn-skip-restart turn)
                          (lispm-turn--edit-args-restart turn)
                          (lispm-turn-abort-restart turn))))

(defun lispm-turn-suspend (turn type message restarts)
  "Stop TURN at the condition TYPE, in the middle of its running call.
MESSAGE says what happened.  The call waits; RESTARTS, made by the
caller, say how it goes on: `lispm-turn-go-on' lets the turn run its
tools again, `lispm-turn-skip-restart' and `lispm-turn-abort-restart'
give the usual `skip-tool' and `abort'."
  (lispm-turn--stop turn type message nil restarts))

(defun lispm-turn-go-on (turn)
  "Let TURN, suspended in its running call, run its tools again."
  (lispm-turn--enter turn 'tools))

(defun lispm-turn-available-restarts (turn)
  "Return the names of the restarts of TURN, stopped at a condition, in order."
  (and (eq (lispm-turn-state turn) 'stopped)
       (mapcar #'lispm-restart-name (lispm-turn-restarts turn))))

(defun lispm-turn-numbered-restarts (turn)
  "Return the restarts of TURN, stopped, as (NUMBER . RESTART), in order.
A restart without a number of its own gets the first one free."
  (let* ((restarts (and (eq (lispm-turn-state turn) 'stopped) (lispm-turn-restarts turn)))
         (taken (delq nil (mapcar #'lispm-restart-number restarts)))
         (free 0))
    (mapcar (lambda (restart)
              (cons (or (lispm-restart-number restart)
                        (progn (while (memq free taken) (cl-incf free))
                               (push free taken)
                               free))
                    restart))
            restarts)))

(defun lispm-turn-restart (turn restart &optional argument)
  "Continue TURN, stopped at a condition, by RESTART: a name or a number.
For `other-model', ARGUMENT is the model's name; for `edit-args', the
new arguments, a JSON object's text.  A restart that signals an error
before the turn moves on (a model that does not exist) leaves it
stopped at its condition, with its restarts."
  (let ((chosen (cdr (cl-find-if (lambda (numbered)
                                   (if (integerp restart) (eql (car numbered) restart)
                                     (eq (lispm-restart-name (cdr numbered)) restart)))
                                 (lispm-turn-numbered-restarts turn)))))
    (unless chosen
      (lispm-signal 'lispm-turn-no-restart (list restart)
                    "No restart %s here; the restarts are: %s" restart
                    (mapconcat #'symbol-name (lispm-turn-available-restarts turn) ", ")))
    (let ((name (lispm-restart-name chosen)))
      (lispm-turn--trace turn 'restart (list name argument))
      (when (lispm-turn--sink-live-p turn)
        (lispm-turn--tell turn 'note (format "Restart %s chosen%s" (upcase (symbol-name name))
                                             (if (eq name 'other-model)
                                                 (format " (%s)" argument) ""))))
      (let ((condition (lispm-turn-condition turn))
            (restarts (lispm-turn-restarts turn)))
        (setf (lispm-turn-condition turn) nil
              (lispm-turn-restarts turn) nil
              (lispm-turn-interrupted turn) nil)
        (condition-case err
            (funcall (lispm-restart-function chosen) argument)
          (error
           (when (and (eq (lispm-turn-state turn) 'stopped)
                      (null (lispm-turn-condition turn)))
             (setf (lispm-turn-condition turn) condition
                   (lispm-turn-restarts turn) restarts))
           (signal (car err) (cdr err))))))))

(defun lispm-turn--retry-request (turn)
  "Send TURN's last request again, its failed answer forgotten."
  (cl-decf (lispm-turn-steps turn))
  (lispm-turn--enter turn 'request))

(defun lispm-turn--rerun (turn call)
  "Run TURN's CALL again, then go on."
  (setf (lispm-turn-outcomes turn)
        (cl-remove (lispm-turn-call-id call) (lispm-turn-outcomes turn) :key #'car :test #'equal))
  (setf (lispm-turn-call-state call) 'new)
  (lispm-turn--enter turn 'tools))

(defun lispm-turn--set-call-arguments (turn call)
  "Make the last assistant message of TURN show CALL's new arguments."
  (let* ((messages (lispm-turn-messages turn))
         (message (car (last messages))))
    ;; A new message, not one changed in place: what was sent stays as sent.
    (setf (lispm-turn-messages turn)
          (append (butlast messages)
                  (list (plist-put
                         (copy-sequence message) :tool_calls
                         (mapcar (lambda (sent)
                                   (if (equal (plist-get sent :id) (lispm-turn-call-id call))
                                       (plist-put (copy-sequence sent) :arguments
                                                  (lispm-turn-call-arguments call))
                                     sent))
                                 (plist-get message :tool_calls))))))))

(defun lispm-turn--withdraw-approvals (turn why)
  "Withdraw, giving WHY, each approval that a call of TURN waits for.
Return how many there were."
  (let ((count 0))
    (dolist (call (lispm-turn-calls turn))
      (when-let* (((eq (lispm-turn-call-state call) 'approval))
                  (approval (lispm-turn-call-approval call)))
        (when (lispm-approvals-withdraw approval why)
          (cl-incf count))))
    count))

(defun lispm-turn--abort (turn)
  "End TURN, keeping what was done; give each call not run a note.
A call that waits for an answer stops waiting; one that waits for the
user's approval has it withdrawn."
  (lispm-turn--withdraw-approvals turn "the turn was aborted")
  (lispm-turn-end-waits turn "The turn ended")
  (let ((outcomes (lispm-turn-outcomes turn))
        (message (car (last (lispm-turn-messages turn)))))
    (when (and (equal (plist-get message :role) "assistant") (lispm-turn-calls turn))
      (setf (lispm-turn-messages turn)
            (append (lispm-turn-messages turn)
                    (mapcar (lambda (call)
                              (let ((outcome (cdr (assoc (lispm-turn-call-id call) outcomes))))
                                (lispm-turn--report turn call outcome)
                                (list :role "tool" :tool_call_id (lispm-turn-call-id call)
                                      :name (lispm-turn-call-name call)
                                      :content (if outcome (lispm-turn--capped outcome)
                                                 "Not run: the user ended the turn."))))
                            (lispm-turn-calls turn))))))
  (lispm-turn--enter turn 'aborted))

(defun lispm-turn--finish (turn)
  "Tell the sink of TURN, `done' or `aborted' now, that it is over."
  (lispm-turn--tell turn 'end))

(defun lispm-turn-interrupt (turn)
  "Interrupt TURN: cancel its model stream, or stop after the running tool.
Its calls that wait for answers stop waiting, each with a result that
says so, and the approvals its calls wait for are withdrawn; the turn
stops once the tool that runs, if any, is over."
  (when (lispm-turn-live-p turn)
    (setf (lispm-turn-interrupted turn) t)
    (lispm-turn--withdraw-approvals turn "the turn was interrupted")
    (cond
     ((lispm-turn-stream turn)
      (lispm-model-cancel (lispm-turn-stream turn))
      (setf (lispm-turn-stream turn) nil)
      (lispm-turn--end-reply turn)
      (lispm-turn--stop-request turn 'lispm-turn-interrupted
                                "Interrupted while the model answered"))
     ((lispm-turn-end-waits turn "Interrupted by the user")
      (lispm-turn--run-next turn)))))

(defun lispm-turn-cancel (turn)
  "Cancel the model stream and the waits of TURN quietly: its buffer is gone."
  (when (lispm-turn-stream turn)
    (lispm-model-cancel (lispm-turn-stream turn))
    (setf (lispm-turn-stream turn) nil))
  (dolist (call (lispm-turn-calls turn))
    (when (eq (lispm-turn-call-state call) 'reply)
      (setf (lispm-turn-call-state call) 'running))))

(defun lispm-turn-end (turn)
  "End TURN at once, as its actor has left.
Its stream is cancelled; it ends `aborted', as when the user ends it,
keeping what was done.  Nothing of it runs or asks the model any more:
a result that comes later starts nothing."
  (when (lispm-turn-live-p turn)
    (setf (lispm-turn-interrupted turn) t
          (lispm-turn-condition turn) nil)
    (lispm-turn-cancel turn)
    (lispm-turn--end-reply turn)
    ;; Stopped without a condition to show: no one is there to choose.
    (unless (eq (lispm-turn-state turn) 'stopped)
      (lispm-turn--enter turn 'stopped))
    (lispm-turn--abort turn)))

;;; A turn cut off while it waited

(cl-defun lispm-turn-rebuild (actor buffer waiting model
                                    &key system sink budget conversation context)
  "Make again the turn of ACTOR that ended while it waited for answers.
BUFFER is the session's buffer and WAITING what
`lispm-session-waiting-step' found in it: the turn's number, its
conversation up to the reply that made the calls, and the calls.  A
call with a result has it as its outcome; one with a request waits on
it; any other did not run, and gets the result that says so.  MODEL,
SYSTEM, SINK, BUDGET, CONVERSATION and CONTEXT are as for
`lispm-turn-start'.
Return the turn, in state `tools': once the last wait ends
\(`lispm-turn-answer'), it goes on as any turn, and asks the model again."
  (let ((turn (lispm-turn--make
               :actor actor :buffer buffer :number (plist-get waiting :turn)
               :model model :system system :sink sink :budget budget
               :conversation conversation :context context :state 'tools :steps (plist-get waiting :steps)
               :messages (plist-get waiting :messages)
               :recorded (lispm-session-turn-changes buffer (plist-get waiting :turn)))))
    (dolist (saved (plist-get waiting :calls))
      (let ((call (lispm-turn-call-make :id (plist-get saved :id) :name (plist-get saved :name)
                                        :arguments (plist-get saved :arguments)
                                        :state 'running))
            (result (plist-get saved :result)))
        (setf (lispm-turn-calls turn) (append (lispm-turn-calls turn) (list call)))
        (cond (result
               (setf (lispm-turn-call-reported call) t
                     (lispm-turn-call-state call) 'done)
               (push (cons (lispm-turn-call-id call) (list :ok t :text result))
                     (lispm-turn-outcomes turn)))
              ((plist-get saved :request)
               (setf (lispm-turn-call-request call) (plist-get saved :request)
                     (lispm-turn-call-state call) 'reply))
              (t (lispm-turn--called turn call (list :ok t :text
                                                     lispm-session-not-run-result))))))
    (lispm-turn--trace turn 'rebuilt (lispm-turn-waiting-requests turn))
    turn))

;;; Revert

(defun lispm-turn--conflicts (conflicts)
  "Signal `lispm-revert-conflict' with CONFLICTS, as `lispm-edit-revert' does."
  (lispm-signal 'lispm-revert-conflict (list conflicts)
                "Cannot revert: %s"
                (mapconcat (lambda (c) (format "%s (%s)" (plist-get c :file)
                                               (plist-get c :reason)))
                           conflicts "; ")))

(defun lispm-turn-revert (turn)
  "Take back every change TURN made; return how many files were restored.
Signal `lispm-revert-conflict', changing nothing, if the user changed
text the turn wrote.  A turn rebuilt from its session also takes back
what its calls did in the Emacs before, from the session's record."
  (let ((changes (lispm-turn-changes turn))
        (recorded (lispm-turn-recorded turn)))
    (when (and changes recorded)
      ;; Both checked before anything changes.
      (let ((here (delq nil (mapcar #'lispm-change-file changes)))
            (conflicts (append (lispm-edit-conflicts changes)
                               (cdr (lispm-turn--recorded-plan recorded)))))
        (dolist (change recorded)
          (when (member (plist-get change :file) here)
            (push (list :file (plist-get change :file)
                        :reason "this turn changed it both in this Emacs and in the one \
before; revert it by hand")
                  conflicts)))
        (when conflicts
          (lispm-turn--conflicts (delete-dups conflicts)))))
    (prog1 (+ (if changes (lispm-edit-revert changes) 0)
              (if recorded (lispm-turn-revert-recorded recorded) 0))
      (lispm-turn--trace turn 'reverted nil)
      (setf (lispm-turn-changes turn) nil
            (lispm-turn-recorded turn) nil))))

;;; Revert from the session's record

(defun lispm-turn--text (bytes)
  "Return BYTES decoded as Emacs would decode a file; nil for no text."
  (let ((text (decode-coding-string bytes 'undecided t)))
    (unless (string-match-p "[\0\x3fff80-\x3fffff]" text)
      text)))

(defun lispm-turn--record-lines (file line old new &optional created deleted)
  "Return the record of a change in FILE from LINE: the lines OLD became NEW.
CREATED and DELETED say the file was made or deleted.  It is kept only
if small enough to be in the session (`lispm-session-result-limit')."
  (if (> (+ (length old) (length new)) lispm-session-result-limit)
      (list :file file :created created :deleted deleted
            :lost (format "a change of over %d characters" lispm-session-result-limit))
    (list :file file :line line :old old :new new :created created :deleted deleted)))

(defun lispm-turn--buffer-record (change file buffer)
  "Return the record of CHANGE, made in FILE's BUFFER: its whole lines.
A deletion or an insertion of whole lines gets the lines before and
after it: what it replaced is then never empty, and the record can be
found again to be applied once more after a revert (lispm-rewind.el),
wherever the user's edits moved it."
  (let ((beg (lispm-change-beg change)) (end (lispm-change-end change)))
    (if (not (and (buffer-live-p buffer) (markerp beg) (markerp end)
                  (eq (marker-buffer beg) buffer) (eq (marker-buffer end) buffer)))
        (list :file file :lost "its buffer was killed")
      (with-current-buffer buffer
        (save-excursion
          (save-restriction
            (widen)
            (let ((from (min beg end)) (to (max beg end)))
              (if (not (string= (buffer-substring-no-properties from to)
                                (lispm-change-after change)))
                  (list :file file :lost "its text was changed again within the call")
                (let* ((start (progn (goto-char from) (line-beginning-position)))
                       (stop (progn (goto-char to)
                                    (if (and (bolp) (> to start)) to
                                      (min (point-max) (1+ (line-end-position)))))))
                  (when (and (or (= start stop)
                                 (and (= from start) (= to stop)
                                      (string-empty-p (lispm-change-before change))))
                             (not (lispm-change-created change)))
                    ;; Whole lines deleted, or inserted: the lines around
                    ;; them show where.
                    (when (> start (point-min))
                      (goto-char start) (forward-line -1) (setq start (point)))
                    (when (< stop (point-max))
                      (goto-char stop) (forward-line 1) (setq stop (point))))
                  (lispm-turn--record-lines
                   file (line-number-at-pos start t)
                   (concat (buffer-substring-no-properties start from)
                           (lispm-change-before change)
                           (buffer-substring-no-properties to stop))
                   (buffer-substring-no-properties start stop)
                   (lispm-change-created change)))))))))))

(defun lispm-turn--disk-record (change file)
  "Return the record of CHANGE, made on disk to FILE: the lines that differ."
  (let* ((created (lispm-change-created change))
         (deleted (lispm-change-deleted change))
         (before (lispm-change-before change))
         (after (lispm-change-after change))
         (old (cond (created "") ((and before (lispm-change-kept change))
                                  (lispm-turn--text before))))
         (new (cond (deleted "") (after (lispm-turn--text after)))))
    (if (not (and old new))
        (list :file file :created created :deleted deleted
              :lost "LispM kept no copy of its text, or it is no text")
      (let* ((lo (length old)) (ln (length new))
             (shorter (min lo ln))
             (prefix (let ((cmp (compare-strings old nil nil new nil nil)))
                       (if (eq cmp t) shorter (min shorter (1- (abs cmp))))))
             (suffix 0))
        (while (and (< suffix (- shorter prefix))
                    (eq (aref old (- lo suffix 1)) (aref new (- ln suffix 1))))
          (cl-incf suffix))
        ;; Whole lines: the prefix ends, the suffix begins, after a newline.
        (setq prefix (if-let* ((newline (cl-position ?\n old :end prefix :from-end t)))
                         (1+ newline)
                       0))
        (unless (and (or (= suffix lo) (eq (aref old (- lo suffix 1)) ?\n))
                     (or (= suffix ln) (eq (aref new (- ln suffix 1)) ?\n)))
          (setq suffix (if-let* ((newline (string-search "\n" old (- lo suffix))))
                           (- lo newline 1)
                         0)))
        (when (and (or (= prefix (- ln suffix)) (= prefix (- lo suffix)))
                   (not deleted) (not created))
          ;; Lines deleted, or inserted: the lines before and after
          ;; them show where.
          (when (> prefix 0)
            (setq prefix (if-let* ((newline (cl-position ?\n old :end (1- prefix)
                                                         :from-end t)))
                             (1+ newline)
                           0)))
          (when (> suffix 0)
            (setq suffix (if-let* ((newline (string-search "\n" old (- lo suffix))))
                             (- lo newline 1)
                           0))))
        (let ((line 1) (at 0))
          (while (and (setq at (string-search "\n" old at)) (< at prefix))
            (cl-incf line)
            (cl-incf at))
          (lispm-turn--record-lines file line (substring old prefix (- lo suffix))
                                    (substring new prefix (- ln suffix)) created deleted))))))

(defun lispm-turn-record (change)
  "Return CHANGE, a `lispm-change', as the session records it, or nil.
As `lispm-session-turn-changes' gives it: the whole lines it changed,
before and after, or why there is no copy.  Nil for a change of a
buffer without a file, or a directory made."
  (let ((file (lispm-change-file change))
        (buffer (lispm-change-buffer change)))
    (cond ((or (null file) (eq (lispm-change-directory change) t)) nil)
          (buffer (lispm-turn--buffer-record change file buffer))
          (t (lispm-turn--disk-record change file)))))

(defun lispm-turn--find-lines (text line)
  "Return where TEXT, whole lines, is in the current buffer, nearest LINE.
Return nil if it is not there."
  (let ((case-fold-search nil)
        (want (save-excursion (goto-char (point-min)) (forward-line (1- line)) (point)))
        (best nil))
    (cond
     ((string-empty-p text) (and (= (buffer-size) 0) (point-min)))
     ((and (<= (+ want (length text)) (point-max))
           (string= (buffer-substring-no-properties want (+ want (length text))) text))
      want)
     (t (save-excursion
          (goto-char (point-min))
          (while (search-forward text nil t)
            (let ((at (match-beginning 0)))
              (when (and (or (= at (point-min)) (eq (char-before at) ?\n))
                         (or (null best) (< (abs (- at want)) (abs (- best want)))))
                (setq best at))
              (goto-char (1+ at)))))
        best))))

(defun lispm-turn--unrecord (text change)
  "Return (t . TEXT) with CHANGE, a recorded one, taken back, or (nil . WHY).
TEXT is the file's text, nil if there is no file; so is the TEXT returned."
  (cond
   ((plist-get change :lost)
    (cons nil (format "the session kept no copy of it (%s)" (plist-get change :lost))))
   ((plist-get change :created)
    (if (equal text (plist-get change :new))
        (cons t nil)
      (cons nil (if text "it was changed since" "it is gone since"))))
   ((plist-get change :deleted)
    (if text (cons nil "it is there again since") (cons t (plist-get change :old))))
   ((null text) (cons nil "it is gone since"))
   (t (with-temp-buffer
        (insert text)
        (let* ((new (plist-get change :new))
               (at (lispm-turn--find-lines new (plist-get change :line))))
          (if (not at)
              (cons nil "text LispM wrote is not there: changed since, or reverted")
            (delete-region at (+ at (length new)))
            (goto-char at)
            (insert (plist-get change :old))
            (cons t (buffer-string))))))))

(defun lispm-turn--recorded-plan (changes)
  "Work out how recorded edits would be taken back, changing nothing.
They are CHANGES, as `lispm-session-turn-changes' gives them.  Return
\(FILES . CONFLICTS): FILES a list of (FILE TEXT), TEXT what FILE
gets (nil: it is deleted); CONFLICTS as `lispm-edit-conflicts' gives
them."
  (let ((files nil) (conflicts nil))
    (dolist (change (reverse changes))
      (let* ((file (plist-get change :file))
             (entry (or (assoc file files)
                        (car (push (list file (lispm-edit-file-text file) t) files)))))
        (when (nth 2 entry)
          (pcase-let ((`(,ok . ,text) (lispm-turn--unrecord (nth 1 entry) change)))
            (if ok
                (setf (nth 1 entry) text)
              (setf (nth 2 entry) nil)
              (push (list :file file :reason text) conflicts))))))
    (cons (nreverse files) (nreverse conflicts))))

(defun lispm-turn-revert-recorded (changes)
  "Revert a turn's edits as its session recorded them; return the files restored.
The edits, CHANGES, are as `lispm-session-turn-changes' gives them.  It is the
revert of a turn whose Emacs is gone, and its change records with it.
Each file must still hold the lines the turn wrote (the user's edits
elsewhere in it stay); if one does not, or the session kept no copy of
a change, signal `lispm-revert-conflict', whose data is (MESSAGE
CONFLICTS) as for `lispm-edit-revert', and change nothing.  A buffer
visiting a file changes as one undo step, saved unless it has unsaved
changes; a file the turn made is deleted."
  (pcase-let ((`(,files . ,conflicts) (lispm-turn--recorded-plan changes))
              (kill-buffer-query-functions nil))
    (when conflicts
      (lispm-turn--conflicts conflicts))
    (pcase-dolist (`(,file ,text) files)
      (let ((buffer (find-buffer-visiting file)))
        (if (null text)
            (progn (when (file-exists-p file) (delete-file file))
                   (when (and buffer (not (buffer-modified-p buffer)))
                     (kill-buffer buffer)))
          (when-let* ((change (lispm-edit-replace
                               file text :save (not (and buffer (buffer-modified-p buffer)))
                               :overwrite t)))
            (lispm-edit-forget (list change)))
          (unless buffer
            ;; Visited for the revert only.
            (when-let* ((made (find-buffer-visiting file)))
              (unless (buffer-modified-p made) (kill-buffer made)))))))
    (length files)))

(provide 'lispm-turn)
;;; lispm-turn.el ends here
