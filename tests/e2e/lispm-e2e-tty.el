;;; lispm-e2e-tty.el --- End to end in a terminal Emacs: real keys, the real C-g  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_run_lisp_tty.py: `inside.py --tty' runs
;; `emacs -nw' on a pseudo-terminal with this file, inside the
;; loopback-only namespace, the scripted gateway as the model.  A
;; batch Emacs has no keyboard; this one does, and the tests type on
;; it: `lispm-e2e-tty-press' asks inside.py to write bytes to the
;; terminal, as a user's keys (C-g is SIGINT there, as in any
;; terminal).  The tests run from the command line (`-f
;; lispm-e2e-tty-run'), before Emacs's command loop starts; while a
;; test waits for what keys do, it waits in a recursive edit
;; (`lispm-e2e-tty-wait'), so Emacs's command loop reads the keys and
;; runs their commands, as it does for a user.  The runner writes what
;; batch ERT would print to the run's folder and exits with the number
;; of unexpected results.
;;
;; The tests: a run_lisp program of LispM's own agent that loops
;; forever computes while Emacs answers a key, and the user's C-g
;; stops it; a program that would sleep in a handler catching
;; everything is refused before it runs; hostile programs (one that
;; sleeps while its macros expand, a 64 MB string, a 30 MB value, a
;; long `string-distance') leave Emacs answering every key.

;;; Code:

(require 'lispm-e2e-own)

;;; Keys, and waiting in the command loop

(defun lispm-e2e-tty-wait (predicate seconds what)
  "Wait up to SECONDS in Emacs's command loop for PREDICATE to return non-nil.
Return its value.  Meanwhile keys typed run their commands, and timers
and processes run, as while a user waits.  On time-out fail the test,
saying WHAT was awaited."
  (let* ((deadline (+ (float-time) seconds))
         (value nil)
         (failure nil)
         (timer (run-at-time 0.01 0.01
                             (lambda ()
                               (condition-case err (setq value (funcall predicate))
                                 (error (setq failure err)))
                               (when (or value failure (> (float-time) deadline))
                                 (exit-recursive-edit))))))
    (unwind-protect (recursive-edit)
      (cancel-timer timer))
    (cond (failure (signal (car failure) (cdr failure)))
          (value)
          (t (ert-fail (format "Timed out after %ss waiting for %s" seconds what))))))

(defvar lispm-e2e-tty--keys 0
  "How many keys the tests asked for.")

(defun lispm-e2e-tty-press (bytes &optional until seconds what)
  "Type BYTES on Emacs's terminal; return (SENT . VALUE).
SENT is when inside.py wrote them, in seconds since the epoch.  Wait
in the command loop, at most SECONDS (default 10), until it has, and
until UNTIL, if given, returns non-nil: VALUE is what it returned.
WHAT says what is awaited, for a failure."
  (let* ((dir (file-name-as-directory (lispm-e2e-dir "keys")))
         (name (expand-file-name (format "%04d" (cl-incf lispm-e2e-tty--keys)) dir))
         (sent (concat name ".sent")))
    (make-directory dir t)
    (let ((coding-system-for-write 'no-conversion))
      (write-region bytes nil (concat name ".part") nil 'silent))
    (rename-file (concat name ".part") (concat name ".key"))
    (let ((value (lispm-e2e-tty-wait (lambda () (and (file-exists-p sent)
                                                     (if until (funcall until) t)))
                                     (or seconds 10)
                                     (format "%S to be typed%s" bytes
                                             (if what (concat " and " what) "")))))
      (cons (string-to-number (with-temp-buffer (insert-file-contents sent)
                                                (buffer-string)))
            (and until value)))))

;;; The runner

(defun lispm-e2e-tty-run ()
  "Run every ERT test loaded; write what batch ERT prints; exit.
The run's folder gets `tty-started' at once and `tty-results.txt',
*Messages* with ERT's report, at the end; the exit status is the
number of unexpected results (255 if the run itself failed)."
  (write-region "" nil (lispm-e2e-dir "tty-started") nil 'silent)
  (setq message-log-max t)
  (let ((status 255))
    (unwind-protect
        (condition-case err
            (setq status (min 254 (ert-stats-completed-unexpected (ert-run-tests-batch))))
          (error (message "LispM e2e tty: the runner failed: %S" err)))
      (with-current-buffer (messages-buffer)
        (let ((coding-system-for-write 'utf-8))
          (write-region nil nil (lispm-e2e-dir "tty-results.txt") nil 'silent)))
      (kill-emacs status))))

;;; The tests

(defvar lispm-e2e-tty--answered nil
  "When `lispm-e2e-tty-note-key' last ran: (TIME . PROGRAMS) running then.")

(defun lispm-e2e-tty-note-key ()
  "Note the time, and the run_lisp programs running now."
  (interactive)
  (setq lispm-e2e-tty--answered (cons (float-time) (lispm-run-lisp-running))))

(defun lispm-e2e-tty--cpu ()
  "Return the CPU time Emacs has used, in seconds."
  (let ((now (current-cpu-time)))
    (/ (float (car now)) (cdr now))))

(ert-deftest lispm-e2e-tty-c-g-stops-a-program ()
  "A program loops: Emacs answers a key meanwhile, and the quit key stops it.
The turn stops at `lispm-turn-tool-failed'; abort ends it."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((old-f5 (global-key-binding [f5]))
          (started 0) run)
      (global-set-key [f5] #'lispm-e2e-tty-note-key)
      (advice-add 'lispm-run-lisp-start :before (lambda (&rest _) (cl-incf started))
                  '((name . lispm-e2e-tty-count)))
      (unwind-protect
          (progn
            ;; The program's fuel is the option's value when it starts.
            (let ((lispm-lisp-default-fuel 1000000000))
              (lispm-own-agent-send agent "Count forever in Lisp")
              (setq run (car (lispm-e2e-tty-wait (lambda () (lispm-run-lisp-running agent))
                                                 60 "the program to run"))))
            (let* ((turn (cdr (car (lispm-own-agent-turns agent))))
                   (wall (float-time))
                   (cpu (lispm-e2e-tty--cpu)))
              ;; It computes, and keeps computing.
              (lispm-e2e-tty-wait (lambda () (> (float-time) (+ wall 0.5))) 5 "half a second")
              (should (memq run (lispm-run-lisp-running agent)))
              (should-not (or (lispm-run-waiting run) (lispm-run-result run)))
              (setq lispm-e2e-tty--answered nil)
              (pcase-let* ((`(,sent . (,ran . ,programs))
                            (lispm-e2e-tty-press "\e[15~" (lambda () lispm-e2e-tty--answered)
                                                 10 "F5 to run its command"))
                           (ms (* 1000 (- ran sent))))
                (message "LispM e2e tty: F5 answered in %.1f ms while the program ran \
(Emacs's CPU %.0f%% of the wall time before)"
                         ms (* 100 (/ (- (lispm-e2e-tty--cpu) cpu) (- (float-time) wall))))
                (should (memq run programs))
                (should (< ms 2000)))
              (should (memq run (lispm-run-lisp-running agent)))
              (should-not (lispm-run-result run))
              ;; C-g stops it; the turn stops at the call's failure.
              (pcase-let ((`(,sent . ,_)
                           (lispm-e2e-tty-press "\C-g"
                                                (lambda () (eq (lispm-turn-state turn) 'stopped))
                                                10 "the turn to stop")))
                (message "LispM e2e tty: C-g stopped the program and its turn in %.1f ms"
                         (* 1000 (- (float-time) sent))))
              (should-not (lispm-run-lisp-running))
              (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
              (should (string-search "The program was stopped (C-g)"
                                     (nth 1 (lispm-turn-condition turn))))
              (lispm-turn-restart turn 'abort)
              (should (eq (lispm-turn-state turn) 'aborted))
              (should (= started 1))))
        (advice-remove 'lispm-run-lisp-start 'lispm-e2e-tty-count)
        (global-set-key [f5] old-f5)
        (when run (lispm-run-lisp-abort run "the test ended"))))))

(ert-deftest lispm-e2e-tty-sleeping-handler-refused ()
  "A loop sleeping in a handler for everything is refused: nothing of it runs.
Its own Emacs refuses it, before any of its calls; the refusal is the
model's result, with its reason; the turn goes on."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((calls 0))
      (advice-add 'lispm-run-lisp--serve-call :before (lambda (&rest _) (cl-incf calls))
                  '((name . lispm-e2e-tty-count)))
      (unwind-protect
          (let ((turn (lispm-e2e-own-send agent "Sleep in a handler")))
            (should (eq (lispm-turn-state turn) 'done))
            (should (= calls 0))
            (let ((result (car (lispm-e2e-tool-results "anthropic" "Sleep in a handler"
                                                       "run_lisp"))))
              (should (string-search "run_lisp refused (sleep-for 1)" result))
              (should (string-search "neither a tool nor a pure function" result))))
        (advice-remove 'lispm-run-lisp--serve-call 'lispm-e2e-tty-count)))))

(ert-deftest lispm-e2e-tty-hostile-programs-leave-emacs-answering ()
  "Programs that block their Emacs, fill its memory or make huge values:
this Emacs answers every key within 100 ms throughout, and the turn ends.
A press's time is counted without the time Emacs's own garbage
collector took meanwhile (about 50 ms of CPU for this Emacs's heap,
twice that on a busy machine): that pause is Emacs's, whatever runs."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((old-f5 (global-key-binding [f5]))
          (answers nil)
          (collecting 0))
      (global-set-key [f5] #'lispm-e2e-tty-note-key)
      (unwind-protect
          (progn
            (lispm-own-agent-send agent "Hostile programs")
            (let ((turn (lispm-e2e-tty-wait
                         (lambda () (cdr (car (lispm-own-agent-turns agent)))) 30 "the turn")))
              (while (lispm-turn-live-p turn)
                (setq lispm-e2e-tty--answered nil)
                (let ((gc gc-elapsed))
                  (pcase-let ((`(,sent . (,ran . ,_))
                               (lispm-e2e-tty-press "\e[15~" (lambda () lispm-e2e-tty--answered)
                                                    10 "F5 to run its command")))
                    (let ((gc-ms (* 1000 (- gc-elapsed gc))))
                      (setq collecting (max collecting gc-ms))
                      (push (- (* 1000 (- ran sent)) gc-ms) answers))))
                (let ((now (float-time)))
                  (lispm-e2e-tty-wait (lambda () (> (float-time) (+ now 0.05))) 5 "a moment")))
              (message "LispM e2e tty: %d keys answered while hostile programs ran, the slowest \
in %.1f ms (Emacs's garbage collection apart: at most %.1f ms during one)"
                       (length answers) (apply #'max answers) collecting)
              (should (eq (lispm-turn-state turn) 'done))
              (should (> (length answers) 10))
              (should (< (apply #'max answers) 100))
              ;; Each request repeats the results before it: the last four.
              (let ((results (last (lispm-e2e-tool-results "anthropic" "Hostile programs"
                                                           "run_lisp")
                                   4)))
                (should (string-search "run_lisp refused" (nth 0 results)))
                (should (string-search "Value: 67108864" (nth 1 results)))
                (should (string-search "[LispM cut the value" (nth 2 results)))
                (should (string-search "Value: 3000" (nth 3 results))))))
        (global-set-key [f5] old-f5)))))

(provide 'lispm-e2e-tty)
;;; lispm-e2e-tty.el ends here
