;;; lispm-run-lisp.el --- The run_lisp tool: programs whose every tool call passes the policy  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, lisp

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `run_lisp' runs a program the agent writes in Emacs Lisp, in which
;; each of LispM's tools is a function: `read_file' is `read-file',
;; called with the tool's arguments in the order of its schema, or as
;; keywords, or both, positional ones first:
;;
;;   (let ((count 0))
;;     (dolist (file (split-string (list-files nil "*.org") "\n" t) count)
;;       (when (string-search "TODO" (read-file file))
;;         (cl-incf count))))
;;
;; Those names exist only inside the program (`grep' there is the
;; tool, not Emacs's command), and `run_lisp' itself is not one of
;; them.  The program is read and checked by lispm-lisp.el before
;; anything of it runs, and runs on fuel.
;;
;; Every tool call inside goes through `lispm-calls-invoke', as the
;; actor who ran the program, so the policy decides it: reads run at
;; once; an edit waits for the user's approval, and the program waits
;; with it, while Emacs does not.  A call that fails signals its
;; condition inside the program, where `condition-case' may handle it:
;; a refusal is `lispm-policy-denied', whose data is (MESSAGE KIND BY
;; REASON).  The changes of the calls are the run_lisp call's changes,
;; so a turn's revert takes them back as any other.
;;
;; How it runs without blocking Emacs.  The program runs in a thread
;; of its own, but never beside Emacs: the two hand control to each
;; other (`lispm-run--hand-over'), so that at any time exactly one of
;; them runs.  The main thread lets the program run for up to
;; `lispm-run-lisp--slice' seconds at a time, from a timer, and goes
;; back to the command loop sooner when input is pending; the program
;; gives control back about every `lispm-lisp-pause-interval' seconds,
;; and whenever it calls a tool.  Every tool call is made by the main
;; thread, with Emacs's usual state, never by the program's thread.
;;
;; Stopping it.  C-g while the program computes stops it: the quit
;; reaches it in its own thread; or the main thread finds it when it
;; takes control back; or, typed between two slices, it runs
;; `keyboard-quit', and `pre-command-hook' stops the programs that
;; compute.  A program waiting for an approval or for fuel is not
;; computing: C-g leaves it be.  `lispm-run-lisp-abort' stops one from
;; Lisp.
;; When its fuel runs out, the actor decides whether it gets more
;; (`lispm-actor-refuel'): LispM's own agent stops the turn at the
;; condition `lispm-lisp-fuel-exhausted', whose restarts give more fuel
;; or end the program; for other actors it ends.
;;
;; The tool's result is the program's value, printed, then what it
;; printed, each cut at `lispm-run-lisp-output-limit' with a note.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-tools)
(require 'lispm-calls)
(require 'lispm-lisp)

;;; Options and conditions

(defcustom lispm-run-lisp-output-limit 20000
  "The most characters of a program's value, and of its output, the agent gets."
  :type 'natnum
  :group 'lispm)

(defconst lispm-run-lisp--slice 0.05
  "The longest, in seconds, Emacs lets a program run before it looks at input.")

(lispm-define-error 'lispm-lisp-program-error "A run_lisp program signalled an error"
                    'lispm-lisp-error -32089)
(lispm-define-error 'lispm-lisp-interrupted "A run_lisp program was stopped"
                    'lispm-lisp-error -32090)

;;; Refuelling

(cl-defgeneric lispm-actor-refuel (actor used callback)
  "Decide whether ACTOR's program, out of fuel, may go on; it burnt USED.
Call CALLBACK once, now or later, with more fuel, a natural number, or
with nil to let the program end with `lispm-lisp-fuel-exhausted'.  By
default it ends."
  (ignore actor used)
  (funcall callback nil))

;;; Runs

(cl-defstruct (lispm-run (:constructor lispm-run--make) (:copier nil))
  "A run_lisp program running, and what it and Emacs say to each other."
  (actor nil :documentation "Who runs it: a `lispm-actor', for the policy.")
  (thread nil :documentation "The thread the program runs in.")
  (mutex nil :documentation "The mutex of CONDVAR.")
  (condvar nil :documentation "What each side waits on for its turn.")
  (holder 'main :documentation "Who runs now: `main' (Emacs) or `program'.")
  (request nil :documentation "What the program asks of Emacs:
\(:call NAME ARGS), (:fuel USED) or (:pause).")
  (answer nil :documentation "Emacs's answer to the request.")
  (waiting nil :documentation "Non-nil while an answer comes later.")
  (result nil :documentation "Once the program ended: how it ended.")
  (changes nil :documentation "The `lispm-change's of its calls, newest first.")
  (calls 0 :documentation "How many tool calls it made.")
  (approval nil :documentation "The approval one of its calls waits for, or nil.")
  (aborting nil :documentation "Why it is to stop, once it is.")
  (caller nil :documentation "Its caller's `lispm-calls-caller'.")
  (done nil :documentation "Called once with the tool's result plist.")
  (scheduled nil :documentation "Non-nil while a timer will let it go on.")
  (driving nil :documentation "Non-nil while Emacs lets it run."))

(defvar lispm-run-lisp--runs nil
  "The programs running now, newest first.")

(defun lispm-run-lisp-running (&optional actor)
  "Return the programs running now, those of ACTOR if it is non-nil."
  (if actor
      (cl-remove-if-not (lambda (run) (eq (lispm-run-actor run) actor)) lispm-run-lisp--runs)
    (copy-sequence lispm-run-lisp--runs)))

;;; Handing control over

(defun lispm-run--hand-over (run to)
  "Give RUN's control to TO, `main' or `program', and wait to get it back."
  (let ((inhibit-quit t))
    (with-mutex (lispm-run-mutex run)
      (setf (lispm-run-holder run) to)
      (condition-notify (lispm-run-condvar run) t)
      (while (eq (lispm-run-holder run) to)
        (condition-wait (lispm-run-condvar run))))))

;;; The program's side, in its thread

(defun lispm-run--ask (run request)
  "Ask Emacs REQUEST for RUN's program; return the answer.
If RUN is to stop, stop it instead: `lispm-lisp-abort' cannot be
caught."
  (setf (lispm-run-request run) request
        (lispm-run-answer run) nil)
  (lispm-run--hand-over run 'main)
  (when (lispm-run-aborting run)
    (lispm-lisp-abort (lispm-run-aborting run)))
  (lispm-run-answer run))

(defun lispm-run--call (run tool args)
  "Call TOOL with ARGS, as RUN's program wrote them; return its text.
Signal the call's condition if it failed."
  (let* ((plist (lispm-run-lisp--arguments tool args))
         (outcome (lispm-run--ask run (list :call (lispm-tool-name tool) plist))))
    (if (plist-get outcome :ok)
        (plist-get outcome :text)
      (let ((condition (plist-get outcome :condition)))
        (signal (car condition) (cdr condition))))))

(defun lispm-run-lisp--arguments (tool args)
  "Return ARGS, a program's arguments to TOOL, as the plist of a call.
Positional arguments come first, in the order of TOOL's schema; then
keywords, each a JSON name of TOOL's.  A boolean argument is t or nil."
  (let ((specs (lispm-tool-args tool))
        (plist nil))
    (while (and args (not (keywordp (car args))))
      (unless specs
        (lispm-signal 'lispm-tool-bad-args (list args)
                      "%s takes at most %d arguments" (lispm-tool-name tool)
                      (length (lispm-tool-args tool))))
      (let ((spec (pop specs)) (value (pop args)))
        (when value
          (setq plist (plist-put plist (lispm-run-lisp--key spec) value)))))
    (while args
      (let ((key (pop args)))
        (unless (and (keywordp key) args)
          (lispm-signal 'lispm-tool-bad-args (list key)
                        "%s: `%S' must be a keyword followed by its value"
                        (lispm-tool-name tool) key))
        (setq plist (plist-put plist key (pop args)))))
    (cl-loop for (key value) on plist by #'cddr
             for spec = (cl-find key (lispm-tool-args tool) :key #'lispm-run-lisp--key)
             unless (and (eq (nth 1 spec) 'boolean) (null value))
             append (list key (if (and (eq (nth 1 spec) 'boolean) (eq value t)) t value)))))

(defun lispm-run-lisp--key (spec)
  "Return the keyword of the tool argument SPEC: `:path' for path."
  (intern (concat ":" (lispm-tools-json-name (car spec)))))

(defun lispm-run--program (run checked bindings fuel)
  "Run CHECKED, RUN's program, with BINDINGS on FUEL; return how it ended.
This is the body of the program's thread."
  (condition-case err
      (lispm-lisp-run checked
                      :bindings bindings
                      :fuel fuel
                      :catch t
                      :on-empty (lambda (used) (lispm-run--ask run (list :fuel used)))
                      :pause (lambda () (lispm-run--ask run '(:pause))))
    (error (list :error err :printed ""))))

(defun lispm-run--thread (run checked bindings limits)
  "Wait for control, run CHECKED for RUN with BINDINGS, give control back.
LIMITS is (FUEL MAX-DEPTH MAX-SIZE), the values of the options
`lispm-lisp-default-fuel', `lispm-lisp-max-depth' and
`lispm-lisp-max-size' where the program was started: a thread sees
the options' global values, not the bindings of the code that made it."
  (unwind-protect
      (progn
        (with-mutex (lispm-run-mutex run)
          (while (eq (lispm-run-holder run) 'main)
            (condition-wait (lispm-run-condvar run))))
        (pcase-let ((`(,fuel ,lispm-lisp-max-depth ,lispm-lisp-max-size) limits))
          (setf (lispm-run-result run) (lispm-run--program run checked bindings fuel))))
    (unless (lispm-run-result run)
      (setf (lispm-run-result run)
            (list :error '(error "The program's thread ended abnormally") :printed "")))
    (with-mutex (lispm-run-mutex run)
      (setf (lispm-run-holder run) 'main)
      (condition-notify (lispm-run-condvar run) t))))

;;; Emacs's side

(defun lispm-run--schedule (run)
  "Let RUN go on from a timer, soon."
  (unless (lispm-run-scheduled run)
    (setf (lispm-run-scheduled run) t)
    (run-at-time 0 nil (lambda ()
                         (setf (lispm-run-scheduled run) nil)
                         (lispm-run--drive run)))))

(defun lispm-run--drive (run)
  "Let RUN's program run for a slice of time, answering what it asks.
Return when it ended, when it waits for an answer that comes later,
or when the slice is over or input is pending (then a timer goes on)."
  (unless (lispm-run-driving run)
    (setf (lispm-run-driving run) t)
    (unwind-protect
        (let ((deadline (+ (float-time) lispm-run-lisp--slice))
              (more t))
          (while more
            (let ((request (lispm-run-request run)))
              (setf (lispm-run-request run) nil)
              (cond
               ((lispm-run-result run) (setq more nil) (lispm-run--finish run))
               (request (lispm-run--serve run request))
               ((lispm-run-waiting run) (setq more nil))
               ((or (> (float-time) deadline) (input-pending-p))
                (setq more nil)
                (lispm-run--schedule run))
               (t
                (lispm-run--hand-over run 'program)
                ;; A C-g while the program ran is for the program.
                (when (and quit-flag (not (lispm-run-result run)))
                  (setq quit-flag nil)
                  (setf (lispm-run-aborting run) "C-g")))))))
      (setf (lispm-run-driving run) nil))))

(defun lispm-run--serve (run request)
  "Answer REQUEST of RUN's program, now or later."
  (pcase request
    (`(:call ,name ,args) (lispm-run--serve-call run name args))
    (`(:fuel ,used)
     (if (lispm-run-aborting run)
         (setf (lispm-run-answer run) nil)
       (lispm-run--later run (lambda (answer)
                               (lispm-actor-refuel (lispm-run-actor run) used answer)))))
    (_ (setf (lispm-run-answer run) nil))))

(defun lispm-run--later (run start)
  "Answer RUN's program with what START gives its callback, now or later."
  (let ((returned nil) (answered nil))
    (funcall start (lambda (answer)
                     (unless answered
                       (setq answered t)
                       (setf (lispm-run-answer run) answer
                             (lispm-run-waiting run) nil)
                       (when returned (lispm-run--schedule run)))))
    (setq returned t)
    (unless answered
      (setf (lispm-run-waiting run) t))))

(defun lispm-run--serve-call (run name args)
  "Call the tool NAME with ARGS for RUN's program, through the pipeline."
  (cl-incf (lispm-run-calls run))
  (let ((caller (lispm-run-caller run)))
    (lispm-run--later
     run
     (lambda (answer)
       (lispm-calls-invoke
        (lispm-run-actor run) name args
        (lambda (outcome)
          (setf (lispm-run-changes run)
                (append (reverse (plist-get outcome :changes)) (lispm-run-changes run)))
          (funcall answer outcome))
        :on-ask (lambda (approval)
                  (setf (lispm-run-approval run) approval)
                  (when (plist-get caller :on-ask)
                    (funcall (plist-get caller :on-ask) approval)))
        :on-decided (lambda (approval decision)
                      (setf (lispm-run-approval run) nil)
                      (when (plist-get caller :on-decided)
                        (funcall (plist-get caller :on-decided) approval decision))))))))

(defun lispm-run-lisp--cut (text what)
  "Return TEXT, WHAT of a program, cut at `lispm-run-lisp-output-limit'."
  (if (<= (length text) lispm-run-lisp-output-limit)
      text
    (format "%s\n[LispM cut the %s: %d of %d characters shown]"
            (substring text 0 lispm-run-lisp-output-limit) what
            lispm-run-lisp-output-limit (length text))))

(defun lispm-run-lisp--printed (printed)
  "Return the lines that show PRINTED, a program's output, or nil."
  (unless (string-empty-p printed)
    (concat "\nOutput:\n" (lispm-run-lisp--cut printed "output"))))

(defun lispm-run-lisp--result (run)
  "Return the tool's result plist for RUN, which ended."
  (let* ((result (lispm-run-result run))
         (printed (or (lispm-run-lisp--printed (or (plist-get result :printed) "")) ""))
         (err (plist-get result :error))
         (stopped (if (eq (car err) 'quit) "C-g" (plist-get result :aborted)))
         (plist
          (cond
           (stopped
            (list :ok nil :condition "lispm-lisp-interrupted"
                  :error (format "The program was stopped (%s) after %d tool calls%s"
                                 stopped (lispm-run-calls run) printed)))
           ((plist-member result :value)
            (list :ok t
                  :text (concat "Value: "
                                (lispm-run-lisp--cut
                                 (let ((print-length nil) (print-level nil) (print-circle t))
                                   (prin1-to-string (plist-get result :value)))
                                 "value")
                                printed)))
           ((eq (car err) 'lispm-lisp-fuel-exhausted)
            (list :ok nil :condition "lispm-lisp-fuel-exhausted"
                  :error (concat (lispm-error-message err) printed)))
           (t
            (list :ok nil :condition "lispm-lisp-program-error"
                  :error (format "The program signalled %s: %s%s" (car err)
                                 (lispm-error-message err) printed))))))
    (append plist (list :changes (reverse (lispm-run-changes run))))))

(defun lispm-run-lisp--keyboard-quit ()
  "Stop the programs that compute if the user typed \\[keyboard-quit].
On `pre-command-hook' while a program runs."
  (when (or (eq last-command-event ?\C-g) (eq this-command 'keyboard-quit))
    (dolist (run lispm-run-lisp--runs)
      (unless (lispm-run-waiting run)
        (lispm-run-lisp-abort run "C-g")))))

(defun lispm-run--finish (run)
  "Give RUN's result to its caller, once."
  (setq lispm-run-lisp--runs (delq run lispm-run-lisp--runs))
  (unless lispm-run-lisp--runs
    (remove-hook 'pre-command-hook #'lispm-run-lisp--keyboard-quit))
  (when-let* ((done (lispm-run-done run)))
    (setf (lispm-run-done run) nil)
    (funcall done (lispm-run-lisp--result run))))

(defun lispm-run-lisp-abort (run &optional reason)
  "Stop RUN's program, REASON (a string) saying why; its result follows.
A call it waits for approval of is withdrawn.  Unless RUN is running
its slice now, it ends before this returns."
  (unless (lispm-run-result run)
    (setf (lispm-run-aborting run) (or reason "aborted"))
    (when-let* ((approval (lispm-run-approval run)))
      (lispm-approvals-withdraw approval "the program was stopped"))
    (when (lispm-run-waiting run)
      (setf (lispm-run-waiting run) nil
            (lispm-run-answer run) nil))
    (lispm-run--drive run)))

(defun lispm-run-lisp-abort-actor (actor &optional reason)
  "Stop each program of ACTOR, REASON saying why; return how many."
  (let ((runs (lispm-run-lisp-running actor)))
    (dolist (run runs)
      (lispm-run-lisp-abort run reason))
    (length runs)))

;;; The tool

(defun lispm-run-lisp--tools ()
  "Return the tools a program may call, an alist (SYMBOL . TOOL)."
  (cl-loop for tool in lispm-tools
           for name = (lispm-tool-name tool)
           unless (equal name "run_lisp")
           collect (cons (intern (string-replace "_" "-" name)) tool)))

(defun lispm-run-lisp-check (source)
  "Read and check SOURCE, a program; return it as `lispm-lisp-checked'.
Its tools are those of `lispm-run-lisp--tools'.  Signal
`lispm-lisp-unreadable' or `lispm-lisp-refused'; nothing runs."
  (lispm-lisp-check (lispm-lisp-read source) (mapcar #'car (lispm-run-lisp--tools))))

(defun lispm-run-lisp-start (actor checked done)
  "Start CHECKED, a program `lispm-run-lisp-check' returned, for ACTOR.
Return the `lispm-run'; DONE gets the tool's result plist once it ends."
  (unless (fboundp 'make-thread)
    (lispm-signal 'lispm-lisp-error nil
                  "run_lisp needs an Emacs built with threads, and this one has none"))
  (let* ((tools (lispm-run-lisp--tools))
         (mutex (make-mutex "lispm-run"))
         (run (lispm-run--make :actor actor :mutex mutex
                               :condvar (make-condition-variable mutex "lispm-run")
                               :caller lispm-calls-caller :done done))
         (bindings (mapcar (lambda (symbol)
                             (let ((tool (alist-get symbol tools)))
                               (cons symbol (lambda (&rest args)
                                              (lispm-run--call run tool args)))))
                           (lispm-lisp-checked-tools checked))))
    (setf (lispm-run-thread run)
          (make-thread (let ((limits (list lispm-lisp-default-fuel lispm-lisp-max-depth
                                           lispm-lisp-max-size)))
                         (lambda () (lispm-run--thread run checked bindings limits)))
                       (format "lispm-run-lisp %s" (lispm-actor-name actor))))
    (push run lispm-run-lisp--runs)
    (add-hook 'pre-command-hook #'lispm-run-lisp--keyboard-quit)
    (lispm-run--schedule run)
    run))

(lispm-define-tool run-lisp (agent (program string "Emacs Lisp forms; LispM's tools are functions in them."))
  "Run PROGRAM, Emacs Lisp in which each of LispM's tools is a function.
A tool's name with dashes is its function, taking the tool's arguments
in order or as keywords: (read-file \"notes.el\"), (grep \"TODO\" :path
\"src\").  A tool returns its text; a failed or refused call signals a
condition the program may handle with `condition-case' (a refusal is
`lispm-policy-denied', its reason in its data).  Every call passes
the user's policy: edits wait for approval.  Besides the tools, only
pure functions on LispM's allow-list may be called, and the program is
checked before it runs: it may not read or set global variables,
define functions or macros, or call `eval'; loops and recursion burn
fuel.  Returns the value of the last form, printed, and what the
program printed."
  :kind 'read
  (let ((caller lispm-calls-caller)
        (checked (lispm-run-lisp-check program)))
    (lispm-tools-defer
     (lambda (done)
       (let ((lispm-calls-caller caller))
         (lispm-run-lisp-start agent checked done))))))

(provide 'lispm-run-lisp)
;;; lispm-run-lisp.el ends here
