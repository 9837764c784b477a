;;; lispm-agents.el --- The registry of LispM's agents and their lifecycle  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Emacs is the source of truth about agents: it creates them, names
;; them, runs their terminals and knows their state.  An agent's life:
;;
;;   starting  the sidecar starts its MCP server, then its CLI starts in a
;;             terminal (state set by `lispm-agent-start')
;;   running   its CLI has reached its MCP server (set when the sidecar
;;             sends `lispm/agent-connected')
;;   exited    its terminal closed: the process ended or the buffer was
;;             killed; its server stops and it leaves the registry
;;
;; While it runs, the sidecar's watcher of the CLI's own records (its
;; transcript or session file) reports its activity: idle, busy or
;; waiting-for-approval, and how many messages wait for it.
;;
;; Each kind of CLI (claude, codex, ...) is an adapter: methods of the
;; generic functions in the "Adapters" chapter, in a file of its own.

;;; Code:

(require 'cl-lib)
(require 'project)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-term)
(require 'lispm-present)

;;; Actors and agents

(cl-defstruct (lispm-actor (:constructor nil) (:copier nil))
  "Whoever acts through LispM's tools: a terminal agent, or one without a terminal.
The tools, the policy, the approvals, the ledger and the agent list
know an actor by these slots alone; a kind of actor includes this
struct and adds its own slots."
  (name nil :documentation "Unique among live actors: claude, claude-2, emacs, ...")
  (kind nil :documentation "What it is, a symbol such as `claude' or `lispm'.")
  (folder nil :documentation "The directory it works in, a truename.")
  (role nil :documentation "Its policy role, a key of `lispm-policy-roles';
nil means `lispm-policy-default-role'.")
  (caller nil :documentation "The actor that started it as a helper, or nil.
A helper never does more than its caller (`lispm-policy-decide').")
  (serial 0 :documentation "Creation order among all actors of this session.")
  (state 'starting :documentation "One of `starting', `running', `exited'.")
  (activity nil :documentation "What it is doing: `idle', `busy' (thinking),
`running-tool', `waiting-for-approval', `waiting-for-reply', or nil
while nothing says."))

(cl-defstruct (lispm-agent (:include lispm-actor)
                           (:constructor lispm-agent--make) (:copier nil))
  "One agent: a CLI in a terminal, with its own MCP server."
  (pid nil :documentation "The process id of the CLI's terminal process.")
  (buffer nil :documentation "The terminal buffer, once the CLI started.")
  (port nil :documentation "The port of the agent's MCP server.")
  (launch nil :documentation "The sidecar's launch facts, a plist.")
  (queued 0 :documentation "Messages waiting for delivery to the agent.")
  (session nil :documentation "The CLI's own session id, as the sidecar reports it.")
  (usage nil :documentation "The tokens its CLI's records say it used, as the
sidecar reports them: (:input N :cached N :output N :reasoning N), or nil.")
  (resumes nil :documentation "Non-nil if the agent resumes one of an earlier Emacs:
the CLI's session id to resume, or t if it had none."))

(defvar lispm-policy-default-role)

(defun lispm-agents--default-role ()
  "Return the role of an actor no one gave one to."
  (if (boundp 'lispm-policy-default-role) lispm-policy-default-role 'default))

(defun lispm-actor-effective-role (actor)
  "Return ACTOR's policy role: its own, else `lispm-policy-default-role'."
  (or (lispm-actor-role actor) (lispm-agents--default-role)))

(cl-defgeneric lispm-actor-usage (actor)
  "Return what ACTOR used, (:input N :output N :cost C ...), or nil if unknown.
:cached and :reasoning may say which of the input and output tokens were
read from the model's cache and spent reasoning.
The agent list shows it."
  (ignore actor)
  nil)

(cl-defgeneric lispm-actor-step (actor)
  "Return the step ACTOR is at in its plan, a line of text, or nil.
The agent list shows it beside the state."
  (ignore actor)
  nil)

(cl-defgeneric lispm-actor-home-buffer (actor)
  "Return the buffer where the user meets ACTOR, or nil if it has none.
The agent list's RET, the approvals' and the ledger's links visit it."
  (ignore actor)
  nil)

(cl-defmethod lispm-actor-home-buffer ((agent lispm-agent))
  "Return AGENT's terminal buffer."
  (lispm-agent-buffer agent))

(cl-defgeneric lispm-actor-left (actor)
  "Do what must be done once ACTOR has left the registry.
Called by `lispm-agents-unregister', after ACTOR is `exited'."
  (ignore actor)
  nil)

(cl-defgeneric lispm-actor-awaiting-absent (actor)
  "Return the requests ACTOR waits on, asked of an agent not running here.
Each is (REQUEST-ID . NAME), NAME the agent asked: after a restart, no
answer can come until NAME is resumed (`lispm-resume-agents') or
forgotten (`lispm-forget-agents', which ends the request and so the
wait).  The default: none, as a terminal agent's asks do not wait."
  (ignore actor)
  nil)

(cl-defmethod lispm-actor-left ((agent lispm-agent))
  "Stop AGENT's MCP server, if it has one yet."
  ;; Without a port its server is still starting; `lispm-agents--launch'
  ;; stops it when the sidecar answers.
  (when (lispm-agent-port agent)
    (lispm-agents--stop-server agent)))

(defvar lispm-agents--by-name (make-hash-table :test #'equal)
  "The live actors, by name.")

(defvar lispm-agents-changed-hook nil
  "Hook run whenever an agent appears, changes state or leaves.")

(defvar lispm-agents--serial 0
  "Counter that orders agents by creation.")

(defun lispm-agents ()
  "Return the live actors, terminal agents and others, oldest first."
  (sort (cl-loop for agent being the hash-values of lispm-agents--by-name
                 collect agent)
        (lambda (a b) (< (lispm-actor-serial a) (lispm-actor-serial b)))))

(defun lispm-agent-get (name)
  "Return the live actor named NAME, or nil."
  (gethash name lispm-agents--by-name))

(defun lispm-agent-live-p (agent)
  "Return non-nil if AGENT, an actor, is still in the registry."
  (eq (gethash (lispm-actor-name agent) lispm-agents--by-name) agent))

(defun lispm-agents--changed ()
  "Tell everyone who watches agents that something changed."
  (run-hooks 'lispm-agents-changed-hook))

(defun lispm-agents--set-state (agent state)
  "Set AGENT's STATE and announce it."
  (unless (eq (lispm-actor-state agent) state)
    (setf (lispm-actor-state agent) state)
    (lispm-agents--changed)))

(cl-defgeneric lispm-actor-activity-changed (actor)
  "Do what ACTOR's kind does once its activity changed.
Called by `lispm-agents-set-activity', after those who watch agents
were told.  The default: nothing, as the sidecar tells Emacs a
terminal agent's activity, not the reverse."
  (ignore actor)
  nil)

(defun lispm-agents-set-activity (actor activity)
  "Set ACTOR's ACTIVITY, a symbol or nil, and announce it if it changed.
This is the one way an actor's activity changes."
  (unless (eq (lispm-actor-activity actor) activity)
    (setf (lispm-actor-activity actor) activity)
    (lispm-agents--changed)
    (lispm-actor-activity-changed actor)))

(defun lispm-agents--unique-name (base)
  "Return the first free name from BASE, a kind or a string: claude, claude-2, ..."
  (let ((base (if (symbolp base) (symbol-name base) base)))
    (cl-loop for n from 1
             for name = (if (= n 1) base (format "%s-%d" base n))
             unless (lispm-agent-get name) return name)))

;;; Adapters

(defvar lispm-agent-kinds nil
  "The kinds of agent LispM can start, as (KIND . DESCRIPTION), in order.")

(defun lispm-agents-register-kind (kind description)
  "Make KIND, a symbol, an agent kind that can be started; DESCRIPTION names it.
`lispm-define-agent-kind' calls this, with all else a kind needs."
  (setf (alist-get kind lispm-agent-kinds) description))

(defmacro lispm-define-agent-kind (kind &rest properties)
  "Define KIND, a symbol, as a kind of agent, with what every kind has.
PROPERTIES are keywords with literal strings:

  :title          what the kind is called, such as \"Claude Code\"
  :program        the default of the option `lispm-KIND-program'
  :npm            the CLI's npm package, or nil (the default) if it
                  is not on npm: the kind then needs its own
                  `lispm-agent-install-hint'
  :arguments-doc  the docstring of `lispm-KIND-arguments'; the
                  default says they are extra command-line arguments
  :doc            the docstring of the command `lispm-KIND'; the
                  default says it starts TITLE at the project's root
  :prompt         the command's prompt for a folder

This defines the group `lispm-KIND', the options `lispm-KIND-program'
and `lispm-KIND-arguments', registers KIND in `lispm-agent-kinds',
defines the methods `lispm-agent-program' and `lispm-agent-npm-package'
for it, and the command `lispm-KIND', which starts an agent of KIND (in
a folder asked for, with a prefix argument).  The kind's file still
defines its `lispm-agent-command' and whatever else is its own.  Its
autoload cookie names the command: autoload generation does not expand
this macro."
  (declare (indent 1) (debug (symbolp &rest [keywordp form])))
  (let* ((name (symbol-name kind))
         (title (plist-get properties :title))
         (program (plist-get properties :program))
         (npm (plist-get properties :npm))
         (arguments-doc
          (or (plist-get properties :arguments-doc)
              (format "Extra command-line arguments for every %s that LispM starts."
                      title)))
         (doc (or (plist-get properties :doc)
                  (format "Start %s in a LispM terminal at the current project's root.
With a prefix argument, ask for the FOLDER to work in." title)))
         (prompt (or (plist-get properties :prompt) (format "%s in folder: " title)))
         (group (intern (format "lispm-%s" name)))
         (program-option (intern (format "lispm-%s-program" name)))
         (arguments-option (intern (format "lispm-%s-arguments" name))))
    (dolist (key '(:title :program))
      (unless (stringp (plist-get properties key))
        (error "Agent kind %s: %s must be a string" kind key)))
    (cl-loop for (key value) on properties by #'cddr
             unless (memq key '(:title :program :npm :arguments-doc :doc :prompt))
             do (error "Agent kind %s: unknown property %s" kind key)
             unless (or (stringp value) (and (eq key :npm) (null value)))
             do (error "Agent kind %s: %s must be a literal string" kind key))
    `(progn
       (defgroup ,group nil
         ,(format "%s in LispM." title)
         :group 'lispm
         :prefix ,(format "lispm-%s-" name))
       (defcustom ,program-option ,program
         ,(format "The %s executable: a name looked up in variable `exec-path', or a file."
                  title)
         :type 'string
         :group ',group)
       (defcustom ,arguments-option nil
         ,arguments-doc
         :type '(repeat string)
         :group ',group)
       (lispm-agents-register-kind ',kind ,title)
       (cl-defmethod lispm-agent-program ((_kind (eql ',kind)))
         ,(format "Return the %s executable." title)
         ,program-option)
       (cl-defmethod lispm-agent-npm-package ((_kind (eql ',kind)))
         ,(if npm
              (format "Return %s's npm package." title)
            (format "%s is not on npm: return nil." title))
         ,npm)
       (defun ,group (&optional folder)
         ,doc
         (interactive (list (and current-prefix-arg (read-directory-name ,prompt))))
         (lispm-agent-start-and-show ',kind folder))
       ;; `find-function' and `find-variable' then land on this macro's
       ;; call, `(lispm-define-agent-kind KIND', which no regexp of theirs
       ;; finds by the names it defines.
       ,@(mapcar (lambda (symbol) `(put ',symbol 'definition-name ',kind))
                 (list group program-option arguments-option)))))

(cl-defgeneric lispm-agent-program (kind)
  "Return the executable of agents of KIND.")

(cl-defgeneric lispm-agent-npm-package (kind)
  "Return the npm package of the CLI of KIND.")

(cl-defgeneric lispm-agent-command (kind agent)
  "Return the command, a list of program and args, to start AGENT of KIND.
AGENT's launch facts from the sidecar are in `lispm-agent-launch'.")

(cl-defgeneric lispm-agent-start-options (_kind)
  "Return a plist of parameters the sidecar needs to serve an agent of a kind."
  nil)

(cl-defgeneric lispm-agent-dialog (_kind _buffer)
  "Return a description of the dialog open in a CLI's terminal BUFFER, or nil.
Only a dialog that a paste and Return would answer counts: while one is
open, no message is pasted.  The default knows of none."
  nil)

(defvar-local lispm-agent--composer-seen nil
  "When this terminal's composer was first seen drawn, or t once it takes input.")

(defvar-local lispm-agent--composer-awaited nil
  "When a paste first waited for this terminal's composer.")

(defconst lispm-agent--composer-patience 20
  "Seconds a paste waits for a composer that is never seen, before it goes in.")

(defun lispm-agent-composer-pending (buffer mark)
  "Return why nothing may be pasted into the CLI's terminal BUFFER yet, or nil.
An agent that resumes a session is told what waits for it as soon as
its CLI is idle, before anyone typed into it; but a CLI that has just
started takes input reliably only a second after it drew its composer,
which shows MARK.  A composer never seen holds pastes back for
`lispm-agent--composer-patience' seconds at most.  Other agents got
their first input from their user, and are not held back."
  (with-current-buffer buffer
    (let ((now (float-time))
          (agent (lispm-agent-of-buffer buffer)))
      (unless lispm-agent--composer-awaited
        (setq lispm-agent--composer-awaited now))
      (cond ((or (eq lispm-agent--composer-seen t)
                 (not (and agent (lispm-agent-resumes agent))))
             nil)
            ((or (and lispm-agent--composer-seen (>= (- now lispm-agent--composer-seen) 1))
                 (> (- now lispm-agent--composer-awaited) lispm-agent--composer-patience))
             (setq lispm-agent--composer-seen t)
             nil)
            (lispm-agent--composer-seen "its composer, drawn a moment ago")
            ((string-search mark (lispm-term-tail buffer 3000))
             (setq lispm-agent--composer-seen now)
             "its composer, drawn a moment ago")
            (t "its composer, not drawn yet")))))

(cl-defgeneric lispm-agent-start-timeout (_kind)
  "Return how many seconds the sidecar may take to get an agent of a kind ready."
  30)

(cl-defgeneric lispm-agent-environment (_kind _agent)
  "Return extra environment entries (\"VAR=value\") for an agent of a kind."
  nil)

(cl-defgeneric lispm-agent-install-hint (kind)
  "Return how to install the CLI of KIND, a phrase for an error message."
  (format "install it with `npm install -g %s'" (lispm-agent-npm-package kind)))

(defun lispm-agent-token-launcher (variable file command)
  "Return COMMAND run with the environment VARIABLE set to FILE's first line.
A shell reads the secret from FILE (mode 0600): it never stands on a
command line, where any local user could read it."
  (append (list "/bin/sh" "-c"
                (format "read -r %1$s < \"$0\" && export %1$s && exec \"$@\"" variable)
                file)
          command))

(define-error 'lispm-cli-missing "An agent's CLI is not installed"
  '(lispm-error file-missing user-error))

(defun lispm-agent-executable (kind)
  "Return the full path of KIND's CLI.
Signal `lispm-cli-missing' if it is not installed, with a message that
says how to install it.  The condition is a `user-error' (the user has
something to install) and a `file-missing' (as when `call-process'
cannot find a program), so its data is that message alone."
  (let ((program (lispm-agent-program kind)))
    (or (executable-find program)
        (signal 'lispm-cli-missing
                (list (format-message "Cannot find `%s' for %s: %s or set `lispm-%s-program'"
                                      program (alist-get kind lispm-agent-kinds)
                                      (lispm-agent-install-hint kind) kind))))))

;;; Starting

(defun lispm-agents-default-folder ()
  "Return the folder a new agent works in: the current project's root."
  (file-name-as-directory
   (file-truename (if-let* ((project (project-current)))
                      (project-root project)
                    default-directory))))

(defun lispm-agents-register (kind folder &optional name resume role)
  "Register a new agent of KIND working in FOLDER, announce it, and return it.
The agent is `starting': nothing is launched (`lispm-agent-start'
launches its CLI).  NAME, if given, is its name, which must be free; it
defaults to the first free name for KIND.  RESUME is as for
`lispm-agent-start'.  ROLE is its policy role, by default
`lispm-policy-default-role'.  Signal a `user-error' if FOLDER is not a
directory or NAME is taken."
  (let ((folder (file-name-as-directory (file-truename folder)))
        (name (or name (lispm-agents--unique-name kind))))
    (unless (file-directory-p folder)
      (user-error "No such folder: %s" folder))
    (when (lispm-agent-get name)
      (user-error "An agent named %s is already running" name))
    (let ((agent (lispm-agent--make :name name :kind kind :folder folder :resumes resume
                                    :role (or role (lispm-agents--default-role))
                                    :serial (cl-incf lispm-agents--serial))))
      (puthash name agent lispm-agents--by-name)
      (lispm-agents--changed)
      agent)))

(defun lispm-agents-add-actor (actor)
  "Register ACTOR, an actor without a terminal, announce it, and return it.
ACTOR's name is the base of its name: it becomes the first free name
from it (\"emacs\", \"emacs-2\", ...).  Its folder becomes a truename ending
in a slash, its role `lispm-policy-default-role' if it had none, and
it gets the next serial.  Nothing is launched, and its state stays
what it is.  Signal a `user-error' if its folder is not a directory,
and a `wrong-type-argument' if ACTOR is not a `lispm-actor'."
  (cl-check-type actor lispm-actor)
  (let ((folder (file-name-as-directory (file-truename (lispm-actor-folder actor)))))
    (unless (file-directory-p folder)
      (user-error "No such folder: %s" folder))
    (setf (lispm-actor-name actor) (lispm-agents--unique-name
                                    (or (lispm-actor-name actor)
                                        (lispm-actor-kind actor)))
          (lispm-actor-folder actor) folder
          (lispm-actor-role actor) (or (lispm-actor-role actor)
                                       (lispm-agents--default-role))
          (lispm-actor-serial actor) (cl-incf lispm-agents--serial))
    (puthash (lispm-actor-name actor) actor lispm-agents--by-name)
    (lispm-agents--changed)
    actor))

(defun lispm-agent-start (kind &optional folder display name resume role)
  "Start an agent of KIND working in FOLDER, and return it.
FOLDER defaults to the current project's root.  The agent shows in the
list at once as `starting'; its terminal opens when its MCP server is
up, and is displayed then if DISPLAY is non-nil.  Signal
`lispm-cli-missing', a `user-error', if KIND's CLI is not installed.
NAME, if given, is the agent's name (it must be free); RESUME, if
non-nil, makes the agent resume one of an earlier Emacs: the CLI's
session id to resume (see `lispm-agent-resumes'), or t if it had none.
ROLE is the agent's policy role, by default `lispm-policy-default-role'.
An actor without a terminal is not started so: see
`lispm-agents-add-actor'."
  (unless (assq kind lispm-agent-kinds)
    (user-error "Unknown agent kind %s; known: %s" kind
                (mapconcat (lambda (k) (symbol-name (car k))) lispm-agent-kinds ", ")))
  (lispm-agent-executable kind)
  (let ((agent (lispm-agents-register
                kind (or folder (lispm-agents-default-folder)) name resume role)))
    (condition-case err
        (lispm-sidecar-async-request
         'lispm/agent-start
         (append (lispm-agents--identity agent)
                 (and resume (list :resume t))
                 (and (stringp resume) (list :session_id resume))
                 (lispm-agent-start-options kind))
         :timeout (lispm-agent-start-timeout kind)
         :on-success (lambda (launch) (lispm-agents--launch agent launch display))
         :on-error (lambda (text) (lispm-agents--failed agent text)))
      (error (lispm-agents--failed agent (error-message-string err))))
    agent))

(defun lispm-agents--identity (agent &rest more)
  "Return the params that name AGENT to the sidecar, followed by MORE.
Names are reused, so the serial number tells this agent from an earlier
agent of the same name."
  (append (list :name (lispm-actor-name agent)
                :kind (symbol-name (lispm-actor-kind agent))
                :folder (directory-file-name (lispm-actor-folder agent))
                :instance (lispm-actor-serial agent))
          more))

(defun lispm-agents--stop-server (agent)
  "Ask the sidecar to stop AGENT's server."
  (when (lispm-sidecar-live-p)
    (lispm-sidecar-async-request
     'lispm/agent-stop (list :name (lispm-actor-name agent)
                             :instance (lispm-actor-serial agent))
     :on-error (lambda (text)
                 (message "LispM: stopping %s's server: %s" (lispm-actor-name agent) text)))))

(defun lispm-agents--failed (agent text)
  "Drop AGENT, which could not start, and say why (TEXT)."
  (remhash (lispm-agent-name agent) lispm-agents--by-name)
  (lispm-agents--changed)
  (message "LispM: %s could not start: %s" (lispm-agent-name agent) text))

(defun lispm-agents--launch (agent launch display)
  "Start AGENT's CLI in a terminal, now that its server is up (LAUNCH).
Display the terminal if DISPLAY is non-nil."
  (setf (lispm-agent-launch agent) launch
        (lispm-agent-port agent) (plist-get launch :port))
  (if (not (lispm-agent-live-p agent))
      ;; Closed while its server was starting: it is up now, stop it.
      (lispm-agents--stop-server agent)
    (condition-case err
        (let* ((kind (lispm-agent-kind agent))
               (window (and display (lispm-agents--window-for-display)))
               (buffer (with-selected-window (or window (selected-window))
                         ;; The pty takes the size of the selected window:
                         ;; the one the terminal will show in.
                         (lispm-term-start
                          (format "*lispm: %s*" (lispm-agent-name agent))
                          (lispm-agent-command kind agent)
                          :directory (lispm-agent-folder agent)
                          :environment (lispm-agent-environment kind agent)))))
          (setf (lispm-agent-buffer agent) buffer
                (lispm-agent-pid agent) (process-id (lispm-term-process buffer)))
          (lispm-agents--attach agent)
          (with-current-buffer buffer
            (setq-local lispm-agent--this agent)
            (add-hook 'kill-buffer-hook #'lispm-agents--buffer-killed nil t))
          (lispm-term-add-exit-function
           buffer (lambda (_buffer _status) (lispm-agents-unregister agent)))
          (lispm-agents--changed)
          (when window
            (set-window-buffer window buffer)
            (select-window window))
          (run-hook-with-args 'lispm-agent-started-functions agent))
      (error
       (lispm-agents-unregister agent)
       (message "LispM: %s could not start: %s" (lispm-agent-name agent)
                (error-message-string err))))))

(defun lispm-agents--attach (agent &optional restore)
  "Tell the sidecar the process of AGENT's CLI, so it can watch its records.
With RESTORE, say so: a restarted sidecar binds to what the CLI already wrote."
  (lispm-sidecar-async-request
   'lispm/agent-attached
   (lispm-agents--identity agent :pid (lispm-agent-pid agent)
                           :session_id (plist-get (lispm-agent-launch agent) :session_id)
                           :restore (if restore t :json-false))
   :on-error (lambda (text)
               (message "LispM: cannot watch %s: %s" (lispm-agent-name agent) text))))

(defun lispm-agents--window-for-display ()
  "Return the window `pop-to-buffer' would show a new terminal in."
  (let ((placeholder (get-buffer-create " *lispm: starting*")))
    (prog1 (display-buffer placeholder '(nil (inhibit-same-window . nil)))
      (bury-buffer placeholder))))

(defvar lispm-agent-started-functions nil
  "Functions called with an agent whose terminal has just started.")

(defvar-local lispm-agent--this nil
  "The agent whose terminal this buffer is.")

(defun lispm-agent-of-buffer (&optional buffer)
  "Return the agent whose terminal is BUFFER (default: the current buffer)."
  (buffer-local-value 'lispm-agent--this (or buffer (current-buffer))))

(defun lispm-agent-start-and-show (kind &optional folder)
  "Start an agent of KIND in FOLDER and show its terminal when it opens."
  (lispm-agent-start kind folder t)
  (message "LispM: starting %s..." (alist-get kind lispm-agent-kinds)))

;;; Closing

(defun lispm-agents--buffer-killed ()
  "Close the agent whose terminal buffer is being killed."
  (when lispm-agent--this
    (lispm-agents-unregister lispm-agent--this)))

(defun lispm-agents-unregister (agent)
  "Note that AGENT, an actor, has left: forget it.
A terminal agent's terminal has closed; its server stops.  AGENT is
`exited' from then on, `lispm-actor-left' is called, and the change is
announced.  Nothing happens if AGENT has already left."
  (when (lispm-agent-live-p agent)
    (remhash (lispm-actor-name agent) lispm-agents--by-name)
    (setf (lispm-actor-state agent) 'exited)
    (lispm-actor-left agent)
    (lispm-agents--changed)))

(defun lispm-agent-close (agent)
  "End AGENT, an actor.
A terminal agent's terminal is killed, which ends its CLI and stops
its server; any other actor leaves the registry."
  (let ((buffer (and (lispm-agent-p agent) (lispm-agent-buffer agent))))
    (if (buffer-live-p buffer)
        (let ((kill-buffer-query-functions nil))
          (kill-buffer buffer))
      (lispm-agents-unregister agent))))

;;; What the sidecar asks and tells

(defun lispm-agent-describe (agent)
  "Return AGENT, an actor, as the agents see it: a plist for JSON.
Its name, kind, role, folder, state (as the list shows it) and
activity (null when nothing says)."
  (list :name (lispm-actor-name agent)
        :kind (symbol-name (lispm-actor-kind agent))
        :role (symbol-name (lispm-actor-effective-role agent))
        :folder (directory-file-name (lispm-actor-folder agent))
        :state (symbol-name (lispm-agent-display-state agent))
        ;; nil is JSON's null on the link (jsonrpc.el's :null-object).
        :activity (and (lispm-actor-activity agent)
                       (symbol-name (lispm-actor-activity agent)))))

(defun lispm-agent-from-params (params)
  "Return the live agent PARAMS name, if it is the instance they mean.
PARAMS is a request's plist from the sidecar: `:name', and optionally
`:instance', the agent's serial number, which tells it from an earlier
agent of the same name."
  (when-let* ((agent (lispm-agent-get (plist-get params :name))))
    (when (or (null (plist-get params :instance))
              (eql (plist-get params :instance) (lispm-actor-serial agent)))
      agent)))

(cl-defmethod lispm-sidecar-handle-notification ((_method (eql 'lispm/agent-connected)) params)
  "Mark the agent named in PARAMS as running: its CLI reached its server."
  (when-let* ((agent (lispm-agent-from-params params)))
    (lispm-agents--set-state agent 'running)))

(cl-defmethod lispm-sidecar-handle-notification ((_method (eql 'lispm/agent-activity)) params)
  "Record the activity and queued messages PARAMS report for an agent.
Only a terminal agent's: an actor without a terminal tells its own."
  (when-let* ((agent (lispm-agent-from-params params))
              ((lispm-agent-p agent)))
    (let ((activity (pcase (plist-get params :activity)
                      ("idle" 'idle) ("busy" 'busy)
                      ("waiting-for-approval" 'waiting-for-approval)
                      (_ nil)))
          (queued (or (plist-get params :queued) 0))
          (session (or (plist-get params :session) (lispm-agent-session agent)))
          (usage (when-let* ((usage (plist-get params :usage)))
                   (cl-loop for key in '(:input :cached :output :reasoning)
                            for count = (plist-get usage key)
                            append (list key (if (natnump count) count 0))))))
      (unless (and (eq activity (lispm-agent-activity agent))
                   (eql queued (lispm-agent-queued agent))
                   (equal session (lispm-agent-session agent))
                   (equal usage (lispm-agent-usage agent)))
        (setf (lispm-agent-activity agent) activity
              (lispm-agent-queued agent) queued
              (lispm-agent-session agent) session
              (lispm-agent-usage agent) usage)
        (lispm-agents--changed)))))

(cl-defmethod lispm-actor-usage ((agent lispm-agent))
  "Return what AGENT used, as its CLI's own records tell, or nil.
Claude Code's transcript and Codex's rollout carry it; no price applies."
  (lispm-agent-usage agent))

(defun lispm-agent-display-state (agent)
  "Return the state of AGENT, an actor, to show in the list, a symbol.
Once it runs (a terminal agent's CLI has reached its server), its
activity (idle, busy, waiting-for-approval, ...) when one is known,
else `running'."
  (or (and (eq (lispm-actor-state agent) 'running) (lispm-actor-activity agent))
      (lispm-actor-state agent)))

(defun lispm-agents--reregister ()
  "Give a restarted sidecar every live agent back, with the same port and token."
  (dolist (agent (lispm-agents))
    (when-let* (((lispm-agent-p agent))
                (port (lispm-agent-port agent)))
      (lispm-sidecar-async-request
       'lispm/agent-start
       (append
        (lispm-agents--identity
         agent :port port :restore t
         :session_id (plist-get (lispm-agent-launch agent) :session_id)
         :ide_port (plist-get (lispm-agent-launch agent) :ide_port))
        (lispm-agent-start-options (lispm-agent-kind agent)))
       :timeout (lispm-agent-start-timeout (lispm-agent-kind agent))
       :on-success (lambda (_launch)
                     (when (lispm-agent-pid agent) (lispm-agents--attach agent t)))
       :on-error (lambda (text)
                   (message "LispM: %s lost its MCP server: %s"
                            (lispm-agent-name agent) text))))))

(add-hook 'lispm-sidecar-connected-hook #'lispm-agents--reregister)

;;; Presentations of agents

(defun lispm-agents-presented (name)
  "Return the live agent NAME, or signal a `user-error' that it is gone."
  (or (lispm-agent-get name)
      (user-error "No agent %s: it is gone" name)))

(cl-defgeneric lispm-actor-actions (actor)
  "Return what else can be done with ACTOR, a list of (NAME . FUNCTION).
They come after showing it (and inspecting it) and before closing it,
in its menu.")

(cl-defmethod lispm-actor-actions ((_actor lispm-actor))
  "Return nothing more for an actor."
  nil)

(cl-defmethod lispm-present-follow ((_type (eql 'agent)) id &optional _arg)
  "Show the home buffer of the agent named ID."
  (let ((buffer (lispm-actor-home-buffer (lispm-agents-presented id))))
    (unless (buffer-live-p buffer)
      (user-error "%s has no buffer open" id))
    (pop-to-buffer buffer)))

(cl-defmethod lispm-present-type-actions ((_type (eql 'agent)) id)
  "Return the actions on the agent named ID: show it, its kind's, close it."
  (append
   (list (lispm-present-follow-action "Show the agent's buffer" 'agent id))
   (when-let* ((agent (lispm-agent-get id)))
     (lispm-actor-actions agent))
   (list (cons "Close it"
               (lambda ()
                 (let ((agent (lispm-agents-presented id)))
                   (when (yes-or-no-p (format "Close %s? " id))
                     (lispm-agent-close agent))))))))

(define-button-type 'lispm-agent :supertype 'lispm-presentation)

(cl-defmethod lispm-present-button-type ((_type (eql 'agent)))
  "An agent's button is of type `lispm-agent'."
  'lispm-agent)

(cl-defmethod lispm-present-names ((_type (eql 'agent)))
  "The names of the live agents."
  (mapcar #'lispm-actor-name (lispm-agents)))

(provide 'lispm-agents)
;;; lispm-agents.el ends here
