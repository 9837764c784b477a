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
;; them.
;;
;; Where it runs.  Not a byte of the program is read, expanded or
;; evaluated in this Emacs.  It goes, as text, to a batch Emacs of its
;; own (lispm-lisp-child.el), which reads it, checks it (lispm-lisp.el:
;; the first line, which gives the model a precise reason) and runs it
;; on fuel.  That Emacs is a sandbox:
;;
;; - it is LispM's own absolute files, started with -Q in an empty
;;   private folder, with nothing of the user's or the project's on
;;   its load path;
;; - its environment is empty but for HOME, PATH, TMPDIR and LANG: no
;;   key or token of the user's or of LispM's reaches it;
;; - under bubblewrap (`lispm-run-lisp-sandbox'), it has no network,
;;   sees the system's programs and libraries read-only, nothing of
;;   $HOME or of any project, and a private writable /tmp of 64 MB;
;; - it runs at a lower priority (nice 10), and under resource limits
;;   set when it starts: memory
;;   (`lispm-run-lisp-memory-limit') and CPU time
;;   (`lispm-run-lisp-cpu-limit'); and this Emacs ends it when it
;;   computes longer than `lispm-run-lisp-time-limit' without asking
;;   anything, or when it makes more than `lispm-run-lisp-max-calls'
;;   tool calls or asks for more than `lispm-run-lisp-max-approvals'
;;   approvals.  Reaching a limit is `lispm-lisp-limit-exceeded', a
;;   kind of `lispm-lisp-fuel-exhausted', with its restarts.
;;
;; Its only way out is its standard output, read here as JSON lines:
;; plain data, cut to a size, never Lisp.  A tool call is a tool's
;; name and a JSON object of arguments, and goes through
;; `lispm-calls-invoke' as the actor who ran the program, so the
;; policy decides it: reads run at once; an edit waits for the user's
;; approval, and the program waits with it, while Emacs does not.
;; The approval says which program and which of its calls asks.  A
;; call that fails signals its condition inside the program, where
;; `condition-case' may handle it: a refusal is `lispm-policy-denied',
;; whose data is (MESSAGE KIND BY REASON).  The changes of the calls
;; are the run_lisp call's changes, so a turn's revert takes them back.
;; Anything the program's Emacs sends that is not such a line, or
;; comes when no answer is due, ends the program.
;;
;; Stopping it.  C-g while a program computes stops it: the key runs
;; `keyboard-quit' (seen on `pre-command-hook'), or, typed while Emacs
;; runs a timer or a filter, it is a `quit' that reaches the command
;; loop (seen before `command-error-function').  A program waiting for
;; an approval or for fuel is not computing, and C-g leaves it be.
;; `lispm-run-lisp-abort' stops one from Lisp.  Either kills its
;; Emacs.  When its fuel runs out, the actor decides whether it gets
;; more (`lispm-actor-refuel'): LispM's own agent stops the turn at
;; the condition `lispm-lisp-fuel-exhausted', whose restarts give more
;; fuel or end the program; for other actors it ends.
;;
;; The tool's result is the program's value, printed on one line, then
;; what it printed, each line behind "| " and without control
;; characters, so that nothing printed can pass for the value; each is
;; cut at `lispm-run-lisp-output-limit' characters, with a note.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-tools)
(require 'lispm-calls)
(require 'lispm-lisp)
(require 'lispm-lisp-child)
(require 'lispm-sandbox)

;;; Options and conditions

(defgroup lispm-run-lisp nil
  "The run_lisp tool: programs in a sandboxed Emacs of their own."
  :group 'lispm
  :prefix "lispm-run-lisp-")

(defcustom lispm-run-lisp-output-limit 20000
  "The most characters of a program's value, and of its output, the agent gets."
  :type 'natnum
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-sandbox 'bubblewrap
  "How a program's Emacs is confined, besides its limits and empty environment.
`bubblewrap': inside bwrap, when it is installed: no network, the
system read-only, nothing of $HOME or of any project, a private /tmp.
Without bwrap the program runs unconfined, and LispM says so once.
nil: never in bwrap."
  :type '(choice (const :tag "Bubblewrap, when installed" bubblewrap)
                 (const :tag "No sandbox" nil))
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-memory-limit 1024
  "The most memory, in MB, a program's Emacs may map (its address space)."
  :type 'natnum
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-cpu-limit 300
  "The most CPU time, in seconds, a program's Emacs may use in all."
  :type 'natnum
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-time-limit 30
  "The most seconds a program may compute without asking anything.
Its time waiting for an approval or for fuel does not count."
  :type 'number
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-max-calls 1000
  "The most tool calls one program may make."
  :type 'natnum
  :group 'lispm-run-lisp)

(defcustom lispm-run-lisp-max-approvals 10
  "The most approvals one program may ask the user for.
One more ends the program at `lispm-lisp-limit-exceeded': a program
that asks and asks is not one to answer."
  :type 'natnum
  :group 'lispm-run-lisp)

(defconst lispm-run-lisp--call-fuel 100
  "The fuel each tool call of a program burns.")

(defconst lispm-run-lisp--file-limit (* 64 1024 1024)
  "The most bytes a program's Emacs may write to its private /tmp, or to a file.")

(defconst lispm-run-lisp--line-limit (* 8 1024 1024)
  "The longest line, in characters, a program's Emacs may write.")

(lispm-define-error 'lispm-lisp-program-error "A run_lisp program signalled an error"
                    '(lispm-lisp-error lispm-for-the-model) -32089)
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

(cl-defstruct (lispm-run (:constructor lispm-run-lisp--make) (:copier nil))
  "A run_lisp program running in an Emacs of its own."
  (actor nil :documentation "Who runs it: a `lispm-actor', for the policy.")
  (name nil :documentation "How approvals name it: its first line, cut.")
  (process nil :documentation "The Emacs it runs in.")
  (stderr nil :documentation "The buffer of that Emacs's standard error.")
  (folder nil :documentation "Its private temporary folder, deleted at the end.")
  (pending nil :documentation "What that Emacs wrote after its last whole line, in pieces.")
  (pending-size 0 :documentation "How many characters PENDING holds.")
  (noise nil :documentation "The last line it wrote that was no request, cut.")
  (waiting nil :documentation "Non-nil while it waits for an answer that comes later.")
  (timer nil :documentation "The timer that ends it when it computes too long.")
  (result nil :documentation "Once it ended: how, a plist.")
  (changes nil :documentation "The `lispm-change's of its calls, newest first.")
  (calls 0 :documentation "How many tool calls it made.")
  (approvals 0 :documentation "How many approvals its calls asked for.")
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

(defun lispm-run-lisp--send (run object)
  "Send OBJECT to RUN's Emacs, a line, and start counting its computing time."
  (when (process-live-p (lispm-run-process run))
    (lispm-run-lisp--time run)
    (process-send-string (lispm-run-process run) (concat (lispm-lisp-child-print object) "\n"))))

(defun lispm-run-lisp--time (run)
  "Give RUN's program `lispm-run-lisp-time-limit' seconds to compute from now."
  (when (lispm-run-timer run)
    (cancel-timer (lispm-run-timer run)))
  (setf (lispm-run-timer run)
        (run-at-time lispm-run-lisp-time-limit nil
                     (lambda ()
                       (when (lispm-run-lisp-computing-p run)
                         (lispm-run-lisp--limit
                          run 'time "The program computed for %s s without asking anything \
\(`lispm-run-lisp-time-limit')" lispm-run-lisp-time-limit))))))

(defun lispm-run-lisp--filter (run output)
  "Take OUTPUT, what RUN's Emacs wrote, and act on each whole line.
Each piece of output is searched once, so a long line costs what it
is long; a line longer than `lispm-run-lisp--line-limit' ends RUN."
  (condition-case err
      (let ((start 0) newline)
        (while (and (not (lispm-run-result run))
                    (setq newline (string-search "\n" output start)))
          (let ((line (apply #'concat (nreverse (cons (substring output start newline)
                                                      (lispm-run-pending run))))))
            (setf (lispm-run-pending run) nil
                  (lispm-run-pending-size run) 0
                  start (1+ newline))
            (unless (string-empty-p line)
              (lispm-run-lisp--serve run (lispm-run-lisp--parse run line)))))
        (unless (or (lispm-run-result run) (= start (length output)))
          (push (substring output start) (lispm-run-pending run))
          (cl-incf (lispm-run-pending-size run) (- (length output) start))
          (when (> (lispm-run-pending-size run) lispm-run-lisp--line-limit)
            (lispm-run-lisp--limit run 'output "The program's Emacs wrote a line longer than %d \
characters" lispm-run-lisp--line-limit))))
    (error (lispm-run-lisp--fail run "LispM could not serve the program: %s"
                            (error-message-string err)))))

(defun lispm-run-lisp--parse (run line)
  "Return LINE, a line RUN's Emacs wrote, as a request plist, or nil.
A line that is no request ends RUN, but for Emacs's report of an error
nothing caught, \"Error: ...\", as it dies (out of memory, say): that
is kept, cut, for the message once RUN's Emacs ended."
  (if (string-prefix-p "Error: " line)
      (progn (setf (lispm-run-noise run)
                   (lispm-run-lisp--clean (truncate-string-to-width line 200 nil nil "…")))
             nil)
    (let ((message (condition-case nil
                       (json-parse-string line :object-type 'plist :array-type 'list)
                     (json-error nil))))
      (if (and (consp message) (keywordp (car message)))
          message
        (lispm-run-lisp--fail run "The program's Emacs wrote %S"
                         (lispm-run-lisp--clean (truncate-string-to-width line 200 nil nil "…")))
        nil))))

(defun lispm-run-lisp--fail (run format-string &rest args)
  "End RUN with `lispm-lisp-error', its message FORMAT-STRING and ARGS."
  (lispm-run-lisp--end run (list :error "lispm-lisp-error" :printed ""
                            :message (apply #'format format-string args))))

(defun lispm-run-lisp--limit (run limit format-string &rest args)
  "End RUN at its LIMIT, a symbol; FORMAT-STRING and ARGS say which."
  (lispm-run-lisp--end run (list :error "lispm-lisp-limit-exceeded" :limit limit :printed ""
                            :message (apply #'format format-string args))))

(defun lispm-run-lisp--sentinel (run process)
  "End RUN if PROCESS, its Emacs, exited before it said how the program ended."
  (unless (or (process-live-p process) (lispm-run-result run))
    (when-let* ((stderr (get-buffer-process (lispm-run-stderr run))))
      (accept-process-output stderr 0))
    (cond
     ((memq (process-exit-status process) '(24 152))
      ;; SIGXCPU, or bwrap's status when it ended its Emacs: the CPU limit.
      (lispm-run-lisp--limit run 'cpu "The program used its CPU time (`lispm-run-lisp-cpu-limit', \
%d s)" lispm-run-lisp-cpu-limit))
     ((string-search "Memory exhausted" (lispm-run-lisp--stderr-tail run))
      (lispm-run-lisp--limit run 'memory "The program ran out of memory (`lispm-run-lisp-memory-limit', \
%d MB)" lispm-run-lisp-memory-limit))
     (t
      (lispm-run-lisp--fail run "The program's Emacs ended (%s %s) before the program did%s"
                       (process-status process) (process-exit-status process)
                       (if (lispm-run-noise run)
                           (format ": %s" (lispm-run-noise run))
                         (lispm-run-lisp--stderr-tail run)))))))

(defun lispm-run-lisp--stderr-tail (run)
  "Return the end of what RUN's Emacs wrote to its standard error, or \"\"."
  (let ((buffer (lispm-run-stderr run)))
    (if (and (buffer-live-p buffer) (> (buffer-size buffer) 0))
        (with-current-buffer buffer
          (concat ": " (lispm-run-lisp--clean
                        (string-trim (buffer-substring-no-properties
                                      (max (point-min) (- (point-max) 500)) (point-max))))))
      "")))

(defun lispm-run-lisp--serve (run request)
  "Answer REQUEST of RUN's program, a plist, now or later."
  (cond
   ((null request))
   ((lispm-run-waiting run)
    (lispm-run-lisp--fail run "The program's Emacs asked again before it had its answer"))
   ((plist-member request :done) (lispm-run-lisp--end run request))
   ((natnump (plist-get request :fuel))
    (let ((used (plist-get request :fuel)))
      (lispm-run-lisp--later run (lambda (answer)
                              (lispm-actor-refuel (lispm-run-actor run) used
                                                  (lambda (more)
                                                    (funcall answer (list :fuel more))))))))
   ((and (stringp (plist-get request :call)) (lispm-run-lisp--plist-p (plist-get request :args)))
    (lispm-run-lisp--serve-call run (plist-get request :call) (plist-get request :args)))
   (t (lispm-run-lisp--fail run "The program's Emacs asked %s"
                       (lispm-run-lisp--clean (truncate-string-to-width
                                          (format "%S" request) 200 nil nil "…"))))))

(defun lispm-run-lisp--plist-p (object)
  "Return non-nil if OBJECT is a plist whose keys are keywords: a JSON object."
  (and (proper-list-p object) (cl-evenp (length object))
       (cl-loop for key in object by #'cddr always (keywordp key))))

(defun lispm-run-lisp--later (run start)
  "Answer RUN's program with what START gives its callback, now or later."
  (setf (lispm-run-waiting run) t)
  (when (lispm-run-timer run)
    (cancel-timer (lispm-run-timer run)))
  (funcall start (lambda (answer)
                   (when (lispm-run-waiting run)
                     (setf (lispm-run-waiting run) nil)
                     (lispm-run-lisp--send run answer)))))

(defun lispm-run-lisp--within (run)
  "Return how an approval asked by RUN's current call names it."
  (format "call %d of the run_lisp program %s" (lispm-run-calls run) (lispm-run-name run)))

(defun lispm-run-lisp--serve-call (run tool args)
  "Call TOOL with ARGS, a plist from JSON, for RUN's program, through the pipeline."
  (if (>= (lispm-run-calls run) lispm-run-lisp-max-calls)
      (lispm-run-lisp--limit run 'calls "The program made %d tool calls, its limit \
\(`lispm-run-lisp-max-calls')" lispm-run-lisp-max-calls)
    (cl-incf (lispm-run-calls run))
    (let ((caller (lispm-run-caller run)))
      (lispm-run-lisp--later
       run
       (lambda (answer)
         (lispm-calls-invoke
          (lispm-run-actor run) tool args
          (lambda (outcome)
            (setf (lispm-run-changes run)
                  (append (reverse (plist-get outcome :changes)) (lispm-run-changes run)))
            (funcall answer (lispm-run-lisp--answer outcome)))
          :within (lispm-run-lisp--within run)
          :on-ask (lambda (approval)
                    (if (> (cl-incf (lispm-run-approvals run)) lispm-run-lisp-max-approvals)
                        (lispm-run-lisp--limit run 'approvals "The program asked for more than %d \
approvals (`lispm-run-lisp-max-approvals')" lispm-run-lisp-max-approvals)
                      (setf (lispm-run-approval run) approval)
                      (when (plist-get caller :on-ask)
                        (funcall (plist-get caller :on-ask) approval))))
          :on-decided (lambda (approval decision)
                        (setf (lispm-run-approval run) nil)
                        (when (plist-get caller :on-decided)
                          (funcall (plist-get caller :on-decided) approval decision)))))))))

(defun lispm-run-lisp--answer (outcome)
  "Return OUTCOME of a tool call as the program's Emacs takes it."
  (if (plist-get outcome :ok)
      (list :ok t :text (or (plist-get outcome :text) ""))
    (let* ((condition (plist-get outcome :condition))
           (symbol (car condition)))
      (list :ok nil
            :condition (cons symbol (lispm-run-lisp--data (cdr condition)))
            :conditions (get symbol 'error-conditions)
            :message (get symbol 'error-message)))))

(defun lispm-run-lisp--data (data)
  "Return DATA, a condition's data, as plain readable data of a bounded size.
Its first eight elements are kept: strings (cut, without properties),
numbers and symbols as they are; anything else printed and cut."
  (mapcar (lambda (datum)
            (cond ((stringp datum) (substring-no-properties datum 0 (min (length datum) 2000)))
                  ((or (numberp datum) (symbolp datum)) datum)
                  (t (let ((print-length 20) (print-level 4) (print-circle t))
                       (truncate-string-to-width (format "%S" datum) 2000 nil nil "…")))))
          (take 8 (if (proper-list-p data) data (list data)))))

(defconst lispm-run-lisp--unclean
  (rx (any (#x00 . #x08) (#x0b . #x1f) (#x7f . #x9f) (#x202a . #x202e) (#x2066 . #x2069)
           (#xe0000 . #xe007f)))
  "What the agent never gets of a program's text, as of a message.
Controls but newline and tab, bidirectional overrides and isolates, and
tag characters.")

(defun lispm-run-lisp--clean (text)
  "Return TEXT, from a program's Emacs, without its properties.
What `lispm-run-lisp--unclean' matches is taken out too."
  (replace-regexp-in-string lispm-run-lisp--unclean ""
                            (substring-no-properties text) t t))

(defun lispm-run-lisp--cut (text what)
  "Return TEXT, WHAT of a program, cut at `lispm-run-lisp-output-limit'.
The program's Emacs cut it already, and noted that: this cuts only
what is longer than that."
  (if (<= (length text) (+ lispm-run-lisp-output-limit 100))
      text
    (format "%s\n[LispM cut the %s: %d of %d characters shown]"
            (substring text 0 lispm-run-lisp-output-limit) what
            lispm-run-lisp-output-limit (length text))))

(defun lispm-run-lisp--printed (printed)
  "Return the lines that show PRINTED, a program's output, or \"\".
Each line stands behind \"| \", so that none can pass for the value."
  (if (string-empty-p printed)
      ""
    (concat "\nOutput (what the program printed, each line after \"| \"):\n"
            (replace-regexp-in-string
             "^" "| " (string-remove-suffix "\n" (lispm-run-lisp--cut (lispm-run-lisp--clean printed)
                                                                 "output"))))))

(defun lispm-run-lisp--text (result key)
  "Return the text of RESULT under KEY, cleaned and cut, or \"\"."
  (let ((text (plist-get result key)))
    (if (stringp text) (lispm-run-lisp--cut (lispm-run-lisp--clean text) (substring (symbol-name key) 1))
      "")))

(defun lispm-run-lisp--result (run)
  "Return the tool's result plist for RUN, which ended."
  (let* ((result (lispm-run-result run))
         (printed (lispm-run-lisp--printed (or (plist-get result :printed) "")))
         (err (plist-get result :error))
         (known (car (member err '("lispm-lisp-fuel-exhausted" "lispm-lisp-limit-exceeded"
                                   "lispm-lisp-error" "lispm-lisp-refused"
                                   "lispm-lisp-unreadable"))))
         (plist
          (cond
           ((plist-get result :aborted)
            (list :ok nil :condition "lispm-lisp-interrupted"
                  :error (format "The program was stopped (%s) after %d tool calls%s"
                                 (plist-get result :aborted) (lispm-run-calls run) printed)))
           ((not err)
            (list :ok t :text (concat "Value: " (lispm-run-lisp--text result :value) printed)))
           (known
            (list :ok nil :condition known
                  :error (concat (lispm-run-lisp--text result :message) printed)))
           (t
            (list :ok nil :condition "lispm-lisp-program-error"
                  :error (format "The program signalled %s: %s%s"
                                 (lispm-run-lisp--clean (truncate-string-to-width
                                                    (format "%s" err) 100 nil nil "…"))
                                 (lispm-run-lisp--text result :message) printed))))))
    (append plist (list :changes (reverse (lispm-run-changes run))))))

(defun lispm-run-lisp--end (run result)
  "End RUN with RESULT, how its program ended; give its caller the result, once."
  (unless (lispm-run-result run)
    (setf (lispm-run-result run) result
          (lispm-run-waiting run) nil)
    (when (lispm-run-timer run)
      (cancel-timer (lispm-run-timer run)))
    (when-let* ((approval (lispm-run-approval run)))
      (setf (lispm-run-approval run) nil)
      (lispm-approvals-withdraw approval "the program was stopped"))
    (when (process-live-p (lispm-run-process run))
      (delete-process (lispm-run-process run)))
    (when (buffer-live-p (lispm-run-stderr run))
      (kill-buffer (lispm-run-stderr run)))
    (when (lispm-run-folder run)
      (delete-directory (lispm-run-folder run) t))
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
  (lispm-run-lisp--end run (list :aborted (or reason "aborted"))))

(defun lispm-run-lisp-abort-actor (actor &optional reason)
  "Stop each program of ACTOR, REASON saying why; return how many."
  (let ((runs (lispm-run-lisp-running actor)))
    (dolist (run runs)
      (lispm-run-lisp-abort run reason))
    (length runs)))

;;; The sandbox

(defun lispm-run-lisp--bwrap ()
  "Return bubblewrap's program if programs run inside it, else nil.
Without it, though `lispm-run-lisp-sandbox' asks for it, say so once."
  (when (eq lispm-run-lisp-sandbox 'bubblewrap)
    (lispm-sandbox-bwrap
     "run_lisp programs, with an empty environment and their limits only,")))

(defun lispm-run-lisp--emacs ()
  "Return the absolute file name of this Emacs's program, links resolved."
  (file-truename (expand-file-name invocation-name invocation-directory)))

(defun lispm-run-lisp--bwrap-arguments (emacs)
  "Return bwrap's arguments for the Emacs program EMACS, up to the command.
The system's folders read-only (a link stays a link), and those that
hold EMACS, its Lisp and LispM's, if they are elsewhere; a private
/tmp, the working folder; no network, no other namespace shared."
  ;; The private /tmp first: a folder under /tmp bound later shows on it.
  (let ((arguments (append
                    (list "--unshare-all" "--die-with-parent" "--new-session"
                          "--cap-drop" "ALL" "--clearenv"
                          "--size" (number-to-string lispm-run-lisp--file-limit) "--tmpfs" "/tmp")
                    (lispm-sandbox-system-arguments
                     (list (file-name-directory emacs) data-directory exec-directory
                           (file-name-directory (locate-library "subr")) lispm-directory)))))
    (append arguments
            (list "--dev" "/dev" "--proc" "/proc" "--chdir" "/tmp")
            (cl-loop for (name . value) in (lispm-run-lisp--environment "/tmp")
                     append (list "--setenv" name value)))))

(defun lispm-run-lisp--environment (home)
  "Return the environment of a program's Emacs whose home is HOME, an alist."
  `(("HOME" . ,home) ("TMPDIR" . ,home) ("PATH" . "/usr/bin:/bin") ("LANG" . "C.UTF-8")))

(defun lispm-run-lisp--command ()
  "Return the command line of a program's Emacs."
  (let ((emacs (lispm-run-lisp--emacs))
        (bwrap (lispm-run-lisp--bwrap))
        (prlimit (executable-find "prlimit"))
        (nice (executable-find "nice")))
    (append (if prlimit
                (list prlimit (format "--as=%d" (* lispm-run-lisp-memory-limit 1024 1024))
                      ;; SIGXCPU at the limit, SIGKILL 5 s later.
                      (format "--cpu=%d:%d" lispm-run-lisp-cpu-limit
                              (+ lispm-run-lisp-cpu-limit 5))
                      (format "--fsize=%d" lispm-run-lisp--file-limit)
                      "--core=0" "--")
              (list "/bin/sh" "-c"
                    (format "ulimit -v %d && ulimit -t %d && ulimit -c 0 && exec \"$@\""
                            (* lispm-run-lisp-memory-limit 1024) lispm-run-lisp-cpu-limit)
                    "sh"))
            ;; The user's Emacs comes first when both want the CPU.
            (and nice (list nice "-n" "10"))
            ;; bwrap starts with no environment: its process in the
            ;; sandbox would show Emacs's in /proc/1/environ.
            (and bwrap (append (list (or (executable-find "env") "/usr/bin/env") "-i" bwrap)
                               (lispm-run-lisp--bwrap-arguments emacs)))
            (list emacs "--batch" "-Q" "-L" (directory-file-name lispm-directory)
                  "-l" (expand-file-name "lispm-lisp-child" lispm-directory)
                  "-f" "lispm-lisp-child-main"))))

;;; The tool

(defun lispm-run-lisp--tools ()
  "Return the tools a program may call, an alist (SYMBOL . TOOL)."
  (cl-loop for tool in lispm-tools
           for name = (lispm-tool-name tool)
           unless (equal name "run_lisp")
           collect (cons (intern (string-replace "_" "-" name)) tool)))

(defun lispm-run-lisp--job (source)
  "Return the job of the program SOURCE, for its Emacs."
  (list :source source
        :tools (mapcar (pcase-lambda (`(,symbol . ,tool))
                         (list symbol (lispm-tool-name tool) (lispm-tool-arg-names tool)))
                       (lispm-run-lisp--tools))
        :fuel lispm-lisp-default-fuel
        :call-fuel lispm-run-lisp--call-fuel
        :max-depth lispm-lisp-max-depth
        :max-size lispm-lisp-max-size
        :output-limit lispm-run-lisp-output-limit
        :conditions (mapcar (lambda (symbol)
                              (list symbol (get symbol 'error-conditions)
                                    (get symbol 'error-message)))
                            '(lispm-tool-bad-args))))

(defun lispm-run-lisp--name (source)
  "Return how approvals name the program SOURCE: its first line, cut."
  (format "`%s'" (truncate-string-to-width
                  (lispm-run-lisp--clean (car (split-string (string-trim source) "\n"))) 60
                  nil nil "…")))

(defun lispm-run-lisp-start (actor source done)
  "Start SOURCE, a program's text, for ACTOR, in a sandboxed Emacs of its own.
Return the `lispm-run'; DONE gets the tool's result plist once it ends.
This Emacs never reads SOURCE: the program's Emacs reads and checks
it, and a refusal is its result."
  (let* ((folder (make-temp-file "lispm-run-lisp-" t))
         (run (lispm-run-lisp--make :actor actor :caller lispm-calls-caller :done done
                               :name (lispm-run-lisp--name source) :folder folder
                               :stderr (generate-new-buffer " *lispm-run-lisp stderr*" t)))
         (default-directory (file-name-as-directory folder))
         (process-environment (mapcar (pcase-lambda (`(,name . ,value))
                                        (concat name "=" value))
                                      (lispm-run-lisp--environment folder)))
         (process (make-process
                   :name (format "lispm-run-lisp %s" (lispm-actor-name actor))
                   :command (lispm-run-lisp--command)
                   :connection-type 'pipe
                   :coding 'utf-8-unix
                   :noquery t
                   :stderr (lispm-run-stderr run)
                   :filter (lambda (_process output) (lispm-run-lisp--filter run output))
                   :sentinel (lambda (process _event) (lispm-run-lisp--sentinel run process)))))
    (set-file-modes folder #o700)
    (setf (lispm-run-process run) process)
    (push run lispm-run-lisp--runs)
    (lispm-run-lisp--watch-quits t)
    (lispm-run-lisp--send run (lispm-run-lisp--job source))
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
define functions or macros, or call `eval'; loops, recursion and tool
calls burn fuel.  It runs in a sandboxed Emacs with no network and no
files, within limits of memory and time.  Returns the value of the
last form, printed, and what the program printed."
  :kind 'read
  (let ((caller lispm-calls-caller))
    (lispm-tools-defer
     (lambda (done)
       (let ((lispm-calls-caller caller))
         (lispm-run-lisp-start agent program done))))))

(provide 'lispm-run-lisp)
;;; lispm-run-lisp.el ends here
