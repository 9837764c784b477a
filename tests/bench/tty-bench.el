;;; tty-bench.el --- Time a terminal Emacs answering keys while a run_lisp program computes  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/bench_tty.py) as
;; `emacs -nw -Q -L DIR -L DIR/apps -L tests/e2e -l tests/bench/tty-bench.el
;; -f tty-bench-run' on a pseudo-terminal that tests/e2e/inside.py's
;; `run_tty' drives, DIR a byte-compiled copy of LispM's `elisp'
;; folder, the run's folder in `LISPM_E2E_DIR' and the number of keys
;; in `LISPM_BENCH_PRESSES'.
;;
;; A run_lisp program that loops forever is started for an actor of
;; its own (`lispm-run-lisp-start', as the tool does; no model), on a
;; billion steps of fuel.  While it computes, F5 is typed again and
;; again (`lispm-e2e-tty-press', from lispm-e2e-tty.el), each after a
;; pause of 50 to 150 ms in the command loop.  A key's time is from
;; the moment `run_tty' wrote it to the terminal to the moment its
;; command ran; each must run while the program runs.  Then the
;; program is stopped from Lisp.  Writes tty-bench.json to the run's
;; folder: {"key_answer_ms": [MS...], "cpu_share": S}, S Emacs's CPU
;; time over the wall time of the presses (the program computes in
;; an Emacs of its own meanwhile), or {"error": TEXT}; exits 0, or 1 on an error.

;;; Code:

(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))
(require 'lispm-e2e-tty)

(cl-defstruct (tty-bench-actor (:include lispm-actor) (:constructor tty-bench-actor-make)
                               (:copier nil))
  "Who runs the benchmark's program.")

(defconst tty-bench-program "(let ((n 0)) (while t (setq n (1+ n))))"
  "The program: it computes until it is stopped.")

(defun tty-bench--write (data)
  "Write DATA, a plist, as tty-bench.json in the run's folder."
  (let ((coding-system-for-write 'utf-8))
    (write-region (json-serialize data) nil (lispm-e2e-dir "tty-bench.json") nil 'silent)))

(defun tty-bench--presses (run presses)
  "Type F5 PRESSES times while RUN's program computes; return the times in ms."
  (let ((times nil))
    (dotimes (n presses)
      (let ((until (+ (float-time) 0.05 (* 0.1 (/ (% (* n 7) presses) (float presses))))))
        (lispm-e2e-tty-wait (lambda () (> (float-time) until)) 5 "a pause"))
      (setq lispm-e2e-tty--answered nil)
      (pcase-let ((`(,sent . (,ran . ,programs))
                   (lispm-e2e-tty-press "\e[15~" (lambda () lispm-e2e-tty--answered)
                                        10 "F5 to run its command")))
        (unless (memq run programs)
          (error "F5 ran its command when the program no longer ran"))
        (push (* 1000 (- ran sent)) times)))
    (nreverse times)))

(defun tty-bench-run ()
  "Run the benchmark; write its numbers; exit."
  (write-region "" nil (lispm-e2e-dir "tty-started") nil 'silent)
  (let ((status 1) run)
    (unwind-protect
        (condition-case err
            (let ((lispm-lisp-default-fuel 1000000000)
                  (presses (string-to-number (or (getenv "LISPM_BENCH_PRESSES") "20"))))
              (global-set-key [f5] #'lispm-e2e-tty-note-key)
              (setq run (lispm-run-lisp-start
                         (tty-bench-actor-make :name "bench" :kind 'bench
                                               :folder default-directory)
                         tty-bench-program #'ignore))
              (lispm-e2e-tty-wait (lambda () (lispm-run-lisp-running)) 10 "the program")
              (let* ((wall (float-time))
                     (cpu (lispm-e2e-tty--cpu))
                     (times (tty-bench--presses run presses))
                     (share (/ (- (lispm-e2e-tty--cpu) cpu) (- (float-time) wall))))
                (lispm-run-lisp-abort run "the benchmark ended")
                (unless (lispm-run-result run)
                  (error "The program did not stop"))
                (tty-bench--write (list :key_answer_ms (vconcat times) :cpu_share share))
                (setq status 0)))
          (error
           (tty-bench--write (list :error (format "%S" err)))))
      (when (and run (not (lispm-run-result run)))
        (lispm-run-lisp-abort run "the benchmark failed"))
      (kill-emacs status))))

;;; tty-bench.el ends here
