;;; lisp-bench.el --- Time checking a 200-line run_lisp program  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/lisp-bench.el
;;
;; A program of 200 lines, as a model writes one (lets, dolists,
;; string work, a local function, tool calls), is read and checked by
;; `lispm-lisp-read' and `lispm-lisp-check'.  21 rounds after a warm-up,
;; first with lispm-lisp.el byte-compiled (into a temporary directory),
;; as a package installs it, then loaded from source.  Prints one JSON
;; line: {"run_lisp_check_ms": MEDIAN, "run_lisp_check_source_ms":
;; MEDIAN, "lines": N, "rounds": [MS...]}.

;;; Code:

(require 'bytecomp)

(defconst lisp-bench-tools '(read-file grep list-files edit-file)
  "The tools the program may call.")

(defun lisp-bench-block (n)
  "Return block N of the program: 10 lines."
  (format "(let* ((files-%d (list-files :path \"src/m%d\"))
       (hits-%d nil))
  (dolist (file files-%d)
    (let ((text (read-file file)))
      (when (and (string-suffix-p \".el\" file) (string-match \"(defun \\\\([^ ]+\\\\)\" text))
        (push (cons (match-string 1 text) (length (split-string text \"\\n\"))) hits-%d))))
  (setq hits-%d (sort hits-%d (lambda (a b) (> (cdr a) (cdr b)))))
  (dotimes (i (min 3 (length hits-%d)))
    (princ (format \"%%s: %%d lines\\n\" (car (nth i hits-%d)) (cdr (nth i hits-%d)))))
  (push (cons %d (mapconcat #'car hits-%d \", \")) summary))
" n n n n n n n n n n n n n))

(defun lisp-bench-program ()
  "Return the source of the program: 200 lines."
  (concat ";; Count what each module defines, and the TODOs.\n"
          "(let ((summary nil))\n"
          "  (cl-labels ((count-matches (regexp text)\n"
          "                (let ((start 0) (n 0))\n"
          "                  (while (string-match regexp text start)\n"
          "                    (setq n (1+ n) start (match-end 0)))\n"
          "                  n)))\n"
          (mapconcat #'lisp-bench-block (number-sequence 1 19) "")
          "    (dolist (hit (grep :pattern \"TODO\" :path \"src\"))\n"
          "      (push (count-matches \"TODO\" hit) summary))\n"
          "    (if (null summary) \"nothing\" (reverse summary))))\n"))

(defun lisp-bench-rounds (source)
  "Check SOURCE 21 times after a warm-up; return the milliseconds of each."
  (let ((rounds nil))
    (declare-function lispm-lisp-check "lispm-lisp" (forms tools))
    (declare-function lispm-lisp-read "lispm-lisp" (source))
    (lispm-lisp-check (lispm-lisp-read source) lisp-bench-tools)
    (dotimes (_ 21)
      (garbage-collect)
      (let ((start (float-time)))
        (lispm-lisp-check (lispm-lisp-read source) lisp-bench-tools)
        (push (* 1000 (- (float-time) start)) rounds)))
    (nreverse rounds)))

(defun lisp-bench-median (rounds)
  "Return the median of ROUNDS."
  (nth (/ (length rounds) 2) (sort (copy-sequence rounds) #'<)))

(let* ((source (lisp-bench-program))
       (lines (length (split-string source "\n" t)))
       (elisp (file-name-directory (locate-library "lispm-lisp.el")))
       (dir (file-name-as-directory (make-temp-file "lispm-lisp-bench" t)))
       (compiled nil)
       (interpreted nil))
  (unwind-protect
      (let ((load-path (cons dir load-path)))
        (dolist (file '("lispm-base.el" "lispm-lisp.el"))
          (copy-file (expand-file-name file elisp) dir)
          (unless (byte-compile-file (expand-file-name file dir))
            (error "Cannot compile %s" file)))
        (load (expand-file-name "lispm-base.elc" dir) nil t)
        (load (expand-file-name "lispm-lisp.elc" dir) nil t)
        (setq compiled (lisp-bench-rounds source))
        (load (expand-file-name "lispm-lisp.el" elisp) nil t)
        (setq interpreted (lisp-bench-rounds source)))
    (delete-directory dir t))
  (princ (format (concat "{\"run_lisp_check_ms\": %.3f, \"run_lisp_check_source_ms\": %.3f, "
                         "\"lines\": %d, \"rounds\": [%s]}\n")
                 (lisp-bench-median compiled) (lisp-bench-median interpreted) lines
                 (mapconcat (lambda (ms) (format "%.3f" ms)) compiled ", "))))

;;; lisp-bench.el ends here
