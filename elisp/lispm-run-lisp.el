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
;; Where it runs.  In a batch Emacs of its own (lispm-lisp-child.el),
;; which asks this one, over its standard input and output, for each
;; tool call and for more fuel.  So however long a program computes,
;; this Emacs is not blocked: it answers keys, timers and processes as
;; ever, and it makes every tool call itself, with its own state.  A
;; program cannot reach this Emacs's variables, buffers or functions at
;; all, whatever the check missed.  (Emacs's threads are no way to do
;; this: in a terminal, C-g is a SIGINT that Emacs handles as if the
;; main thread ran, and it corrupts a Lisp thread that runs then.)
;;
;; Stopping it.  C-g while a program computes stops it: the key runs
;; `keyboard-quit' (seen on `pre-command-hook'), or, typed while Emacs
;; runs a timer or a filter, it is a `quit' that reaches the command
;; loop (seen before `command-error-function').  A program
;; waiting for an approval or for fuel is not computing, and C-g
;; leaves it be.  `lispm-run-lisp-abort' stops one from Lisp.  Either
;; kills its Emacs.  When its fuel runs out, the actor decides whether
;; it gets more (`lispm-actor-refuel'): LispM's own agent stops the
;; turn at the condition `lispm-lisp-fuel-exhausted', whose restarts
;; give more fuel or end the program; for other actors it ends.
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
(require 'lispm-lisp-child)

;;; Options and conditions

(defcustom lispm-run-lisp-output-limit 20000
  "The most characters of a program's value, and of its output, the agent gets."
  :type 'natnum
  :group 'lispm)

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
  "A run_lisp program running in an Emacs of its own."
  (actor nil :documentation "Who runs it: a `lispm-actor', for the policy.")
  (process nil :documentation "The Emacs it runs in.")
  (stderr nil :documentation "The buffer of that Emacs's standard error.")
  (pending "" :documentation "What that Emacs wrote after its last whole line.")
  (waiting nil :documentation "Non-nil while it waits for an answer that comes later.")
  (result nil :documentation "Once it ended: how, a plist.")
  (changes nil :documentation "The `lispm-change's of its calls, newest first.")
  (calls 0 :documentation "How many tool calls it made.")
  (approval nil :documentation "The approval one of its calls waits for, or nil.")
  (caller nil :documentation "Its caller's `lispm-calls-caller'.")
  (done nil :documentation "Called once with the tool's result plist."))

(defvar lispm-run-lisp--runs nil
  "The programs running now, newest first.")

(defun lispm-run-lisp-running (&optional actor)
  "Return the programs running now, those of ACTOR if it is non-nil."
  (if actor
      (cl-remove-if-not (lambda (run) (eq (lispm-run-actor run) actor)) lispm-run-lisp--runs)
    (copy-sequence lispm-run-lisp--runs)))

(defun lispm-run-lisp-computing-p (run)
  "Return non-nil if RUN's program computes, rather than waits for an answer."
  (and (not (lispm-run-waiting run)) (not (lispm-run-result run))))

;;; Talking with the program's Emacs

(defun lispm-run--send (run object)
  "Send OBJECT to RUN's Emacs, a line."
  (when (process-live-p (lispm-run-process run))
    (process-send-string (lispm-run-process run) (concat (lispm-lisp-child-print object) "\n"))))

(defun lispm-run--filter (run output)
  "Take OUTPUT, what RUN's Emacs wrote, and act on each whole line."
  (let ((lines (split-string (concat (lispm-run-pending run) output) "\n")))
    (setf (lispm-run-pending run) (car (last lines)))
    (dolist (line (butlast lines))
      (unless (or (lispm-run-result run) (string-empty-p line))
        (let ((object (condition-case nil (car (read-from-string line)) (error line))))
          (if (and (consp object) (keywordp (car object)))
              (lispm-run--serve run object)
            (lispm-run--end run (list :error 'lispm-lisp-error :printed ""
                                      :message (format "The program's Emacs wrote %S"
                                                       (truncate-string-to-width
                                                        line 200 nil nil "…"))))))))))

(defun lispm-run--sentinel (run process)
  "End RUN if PROCESS, its Emacs, exited before it said how the program ended."
  (unless (or (process-live-p process) (lispm-run-result run))
    (lispm-run--end
     run (list :error 'lispm-lisp-error :printed ""
               :message (format "The program's Emacs ended (%s %s) before the program did%s"
                                (process-status process) (process-exit-status process)
                                (lispm-run--stderr-tail run))))))

(defun lispm-run--stderr-tail (run)
  "Return the end of what RUN's Emacs wrote to its standard error, or \"\"."
  (let ((buffer (lispm-run-stderr run)))
    (if (and (buffer-live-p buffer) (> (buffer-size buffer) 0))
        (with-current-buffer buffer
          (concat ": " (string-trim (buffer-substring (max (point-min) (- (point-max) 500))
                                                      (point-max)))))
      "")))

(defun lispm-run--serve (run request)
  "Answer REQUEST of RUN's program, now or later."
  (pcase request
    (`(:call ,tool ,args) (lispm-run--serve-call run tool args))
    (`(:fuel ,used)
     (lispm-run--later run (lambda (answer)
                             (lispm-actor-refuel (lispm-run-actor run) used
                                                 (lambda (more)
                                                   (funcall answer (list :fuel more)))))))
    (`(:done . ,result) (lispm-run--end run result))
    (_ (lispm-run--end run (list :error 'lispm-lisp-error :printed ""
                                 :message (format "The program's Emacs asked %S" request))))))

(defun lispm-run--later (run start)
  "Answer RUN's program with what START gives its callback, now or later."
  (setf (lispm-run-waiting run) t)
  (funcall start (lambda (answer)
                   (when (lispm-run-waiting run)
                     (setf (lispm-run-waiting run) nil)
                     (lispm-run--send run answer)))))

(defun lispm-run--serve-call (run tool args)
  "Call TOOL with ARGS for RUN's program, through the pipeline."
  (cl-incf (lispm-run-calls run))
  (let ((caller (lispm-run-caller run))
        (registered (alist-get tool (lispm-run-lisp--tools))))
    (lispm-run--later
     run
     (lambda (answer)
       (condition-case err
           (let ((arguments (if registered (lispm-run-lisp--arguments registered args)
                              (lispm-signal 'lispm-tool-unknown (list tool)
                                            "no tool %s any more" tool))))
             (lispm-calls-invoke
              (lispm-run-actor run) (lispm-tool-name registered) arguments
              (lambda (outcome)
                (setf (lispm-run-changes run)
                      (append (reverse (plist-get outcome :changes)) (lispm-run-changes run)))
                (funcall answer (lispm-run--answer outcome)))
              :on-ask (lambda (approval)
                        (setf (lispm-run-approval run) approval)
                        (when (plist-get caller :on-ask)
                          (funcall (plist-get caller :on-ask) approval)))
              :on-decided (lambda (approval decision)
                            (setf (lispm-run-approval run) nil)
                            (when (plist-get caller :on-decided)
                              (funcall (plist-get caller :on-decided) approval decision)))))
         (lispm-error (funcall answer (lispm-run--answer
                                       (list :ok nil :error (lispm-error-message err)
                                             :condition err)))))))))

(defun lispm-run--answer (outcome)
  "Return OUTCOME of a tool call as the program's Emacs takes it."
  (if (plist-get outcome :ok)
      (list :ok t :text (or (plist-get outcome :text) ""))
    (let* ((condition (plist-get outcome :condition))
           (symbol (car condition)))
      (list :ok nil
            :condition (cons symbol (lispm-run--readable (cdr condition)))
            :conditions (get symbol 'error-conditions)
            :message (get symbol 'error-message)))))

(defun lispm-run--readable (data)
  "Return DATA, a condition's data, with what cannot be printed and read printed."
  (cond ((or (stringp data) (numberp data) (symbolp data)) data)
        ((consp data) (cons (lispm-run--readable (car data)) (lispm-run--readable (cdr data))))
        (t (format "%S" data))))

(defun lispm-run-lisp--arguments (tool args)
  "Return ARGS, a program's arguments to TOOL, as the plist of a call.
Positional arguments come first, in the order of TOOL's schema; then
keywords, each a JSON name of TOOL's.  A nil value is an argument not
given, so a boolean argument is t or nil."
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
    plist))

(defun lispm-run-lisp--key (spec)
  "Return the keyword of the tool argument SPEC: `:path' for path."
  (intern (concat ":" (lispm-tools-json-name (car spec)))))

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
         (plist
          (cond
           ((plist-get result :aborted)
            (list :ok nil :condition "lispm-lisp-interrupted"
                  :error (format "The program was stopped (%s) after %d tool calls%s"
                                 (plist-get result :aborted) (lispm-run-calls run) printed)))
           ((not err)
            (list :ok t :text (concat "Value: "
                                      (lispm-run-lisp--cut (plist-get result :value) "value")
                                      printed)))
           ((eq err 'lispm-lisp-fuel-exhausted)
            (list :ok nil :condition "lispm-lisp-fuel-exhausted"
                  :error (concat (plist-get result :message) printed)))
           ((eq err 'lispm-lisp-error)
            (list :ok nil :condition "lispm-lisp-error"
                  :error (concat (plist-get result :message) printed)))
           (t
            (list :ok nil :condition "lispm-lisp-program-error"
                  :error (format "The program signalled %s: %s%s" err
                                 (plist-get result :message) printed))))))
    (append plist (list :changes (reverse (lispm-run-changes run))))))

(defun lispm-run--end (run result)
  "End RUN with RESULT, how its program ended; give its caller the result, once."
  (unless (lispm-run-result run)
    (setf (lispm-run-result run) result
          (lispm-run-waiting run) nil)
    (when-let* ((approval (lispm-run-approval run)))
      (setf (lispm-run-approval run) nil)
      (lispm-approvals-withdraw approval "the program was stopped"))
    (when (process-live-p (lispm-run-process run))
      (delete-process (lispm-run-process run)))
    (when (buffer-live-p (lispm-run-stderr run))
      (kill-buffer (lispm-run-stderr run)))
    (setq lispm-run-lisp--runs (delq run lispm-run-lisp--runs))
    (unless lispm-run-lisp--runs
      (lispm-run-lisp--watch-quits nil))
    (funcall (lispm-run-done run) (lispm-run-lisp--result run))))

(defun lispm-run-lisp--stop-computing ()
  "Stop the programs that compute: the user typed \\[keyboard-quit]."
  (dolist (run lispm-run-lisp--runs)
    (when (lispm-run-lisp-computing-p run)
      (lispm-run-lisp-abort run "C-g"))))

(defun lispm-run-lisp--keyboard-quit ()
  "Stop the programs that compute if the user typed \\[keyboard-quit].
On `pre-command-hook' while a program runs."
  (when (or (eq last-command-event ?\C-g) (eq this-command 'keyboard-quit))
    (lispm-run-lisp--stop-computing)))

(defun lispm-run-lisp--quit (data &rest _)
  "Stop the programs that compute if DATA, an error at command level, is a quit.
Before `command-error-function' while a program runs: a
\\[keyboard-quit] typed while Emacs runs a timer or a filter, not a
command, is a `quit' there, and runs no command."
  (when (eq (car-safe data) 'quit)
    (lispm-run-lisp--stop-computing)))

(defun lispm-run-lisp--watch-quits (on)
  "Watch for \\[keyboard-quit] while programs run if ON is non-nil, else stop."
  (if on
      (progn (add-hook 'pre-command-hook #'lispm-run-lisp--keyboard-quit)
             (add-function :before command-error-function #'lispm-run-lisp--quit))
    (remove-hook 'pre-command-hook #'lispm-run-lisp--keyboard-quit)
    (remove-function command-error-function #'lispm-run-lisp--quit)))

(defun lispm-run-lisp-abort (run &optional reason)
  "Stop RUN's program now, REASON (a string) saying why.
Its Emacs is killed, a call it waits for approval of is withdrawn, and
its caller gets the result before this returns."
  (lispm-run--end run (list :aborted (or reason "aborted"))))

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

(defun lispm-run-lisp--command ()
  "Return the command line of a program's Emacs."
  (list (expand-file-name invocation-name invocation-directory)
        "--batch" "-Q" "-L" (directory-file-name lispm-directory)
        "-l" "lispm-lisp-child" "-f" "lispm-lisp-child-main"))

(defun lispm-run-lisp-start (actor source done)
  "Start SOURCE, a program `lispm-run-lisp-check' allowed, for ACTOR.
Return the `lispm-run'; DONE gets the tool's result plist once it ends.
The program's Emacs checks SOURCE again, against the same tools."
  (let* ((run (lispm-run--make :actor actor :caller lispm-calls-caller :done done
                               :stderr (generate-new-buffer " *lispm-run-lisp stderr*" t)))
         (default-directory (lispm-actor-folder actor))
         (process (make-process
                   :name (format "lispm-run-lisp %s" (lispm-actor-name actor))
                   :command (lispm-run-lisp--command)
                   :connection-type 'pipe
                   :coding 'utf-8-unix
                   :noquery t
                   :stderr (lispm-run-stderr run)
                   :filter (lambda (_process output) (lispm-run--filter run output))
                   :sentinel (lambda (process _event) (lispm-run--sentinel run process)))))
    (setf (lispm-run-process run) process)
    (push run lispm-run-lisp--runs)
    (lispm-run-lisp--watch-quits t)
    (lispm-run--send run (list :source source
                               :tools (mapcar #'car (lispm-run-lisp--tools))
                               :fuel lispm-lisp-default-fuel
                               :max-depth lispm-lisp-max-depth
                               :max-size lispm-lisp-max-size))
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
  (let ((caller lispm-calls-caller))
    (lispm-run-lisp-check program)
    (lispm-tools-defer
     (lambda (done)
       (let ((lispm-calls-caller caller))
         (lispm-run-lisp-start agent program done))))))

(provide 'lispm-run-lisp)
;;; lispm-run-lisp.el ends here
