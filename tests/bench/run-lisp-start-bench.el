;;; run-lisp-start-bench.el --- Time starting a run_lisp program's Emacs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/run-lisp-start-bench.el
;;
;; `run_lisp_child_start_ms': the time from `lispm-run-lisp-start' of
;; the program "nil" to its result, that is starting its Emacs (in
;; bubblewrap, under its limits, with LispM's lispm-lisp-child loaded),
;; reading, checking and running the program, and ending.  Beside it,
;; in the same rounds, the time of a bare `emacs --batch -Q' that
;; evaluates nil and exits, started the same way (`make-process').
;; 21 rounds after a warm-up, each round one of each.  LispM's files
;; are byte-compiled first, into a temporary directory, as a package
;; installs them.  Prints one JSON line: {"run_lisp_child_start_ms":
;; MEDIAN, "bare_emacs_start_ms": MEDIAN, "sandbox": "bwrap" or
;; "none", "rounds": [MS...]}.

;;; Code:

(require 'bytecomp)
(require 'cl-lib)

(defun run-lisp-start-bench-compiled ()
  "Byte-compile LispM's files the child needs into a temporary directory; return it."
  (let ((dir (make-temp-file "lispm-bench-elc" t))
        (source (file-name-directory (locate-library "lispm-base"))))
    (dolist (file '("lispm-base" "lispm-lisp" "lispm-lisp-child"))
      (copy-file (expand-file-name (concat file ".el") source) (file-name-as-directory dir)))
    (let ((load-path (cons dir load-path))
          (byte-compile-verbose nil))
      (dolist (file '("lispm-base" "lispm-lisp" "lispm-lisp-child"))
        (byte-compile-file (expand-file-name (concat file ".el") dir))))
    dir))

(defun run-lisp-start-bench-wait (predicate)
  "Let Emacs run until PREDICATE returns non-nil, at most 30 s."
  (let ((deadline (+ (float-time) 30)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.001))
    (or (funcall predicate) (error "Timed out"))))

(defun run-lisp-start-bench-child (actor)
  "Run the program nil for ACTOR; return the milliseconds it took."
  (let ((start (float-time)) (result nil))
    (lispm-run-lisp-start actor "nil" (lambda (outcome) (setq result outcome)))
    (run-lisp-start-bench-wait (lambda () result))
    (unless (equal (plist-get result :text) "Value: nil")
      (error "The program failed: %S" result))
    (* 1000 (- (float-time) start))))

(defun run-lisp-start-bench-bare ()
  "Run a bare batch Emacs that evaluates nil; return the milliseconds it took."
  (let* ((start (float-time))
         (process (make-process :name "bare" :connection-type 'pipe :noquery t
                                :command (list (file-truename
                                                (expand-file-name invocation-name
                                                                  invocation-directory))
                                               "--batch" "-Q" "--eval" "nil")
                                :buffer nil)))
    (run-lisp-start-bench-wait (lambda () (not (process-live-p process))))
    (* 1000 (- (float-time) start))))

(defun run-lisp-start-bench-median (numbers)
  "Return the median of NUMBERS."
  (nth (/ (length numbers) 2) (sort (copy-sequence numbers) #'<)))

(defvar run-lisp-start-bench-dir (run-lisp-start-bench-compiled)
  "Where LispM's compiled files are.")
(push run-lisp-start-bench-dir load-path)
(require 'lispm-run-lisp)
(cl-defstruct (run-lisp-start-bench-actor (:include lispm-actor)))

(let* ((lispm-directory (file-name-as-directory run-lisp-start-bench-dir))
       (actor (make-run-lisp-start-bench-actor :name "bench" :folder temporary-file-directory))
       (child nil) (bare nil))
  (run-lisp-start-bench-child actor)
  (run-lisp-start-bench-bare)
  (dotimes (_ 21)
    (garbage-collect)
    (push (run-lisp-start-bench-child actor) child)
    (push (run-lisp-start-bench-bare) bare))
  (princ (json-serialize
          (list :run_lisp_child_start_ms (run-lisp-start-bench-median child)
                :bare_emacs_start_ms (run-lisp-start-bench-median bare)
                :sandbox (if (lispm-run-lisp--bwrap) "bwrap" "none")
                :rounds (vconcat (reverse child)))))
  (terpri)
  (delete-directory run-lisp-start-bench-dir t))

;;; run-lisp-start-bench.el ends here
