;;; approval-bench.el --- Time showing an approval of an edit with a 1 MB line  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/approval-bench.el
;;
;; An agent asks to change one character in the middle of a file's
;; line of 1 MiB (a minified bundle, a data URI): the diff has the line
;; twice, removed and added.  The same edit of a line of 1 KiB is the
;; baseline.  Each round times `lispm-approvals-request' for each
;; (which draws `*LispM approvals*' and displays it), then withdraws
;; them, untimed.  21 rounds after a warm-up; prints one JSON line:
;; {"approval_show_1mb_line_ms": MEDIAN, "approval_show_1kb_line_ms":
;; MEDIAN, "rounds_1mb": [MS...], "rounds_1kb": [MS...]}.

;;; Code:

(require 'lispm-approvals)
(require 'lispm-edit)

(defconst approval-bench-rounds 21 "How many timed rounds.")

(defun approval-bench-diff (length)
  "Return the diff of an edit in the middle of a line of LENGTH characters."
  (let ((start "(defun notes-parse (line)\n  (split-string line \":\"))\n")
        (half (make-string (/ length 2) ?x)))
    (lispm-edit-diff (concat start half "a" half "\n")
                     (concat start half "b" half "\n")
                     "notes.el")))

(defun approval-bench-show (agent file diff)
  "Return the milliseconds AGENT's approval of DIFF to FILE takes to show."
  (garbage-collect)
  (let* ((inhibit-message t)
         (start (float-time))
         (id (lispm-approvals-request agent 'default 'edit
                                      (list :files (list file) :diff diff)
                                      #'ignore "edit_file notes.el"))
         (ms (* 1000 (- (float-time) start))))
    (lispm-approvals-withdraw id "bench")
    ms))

(defun approval-bench-median (rounds)
  "Return the median of ROUNDS, an odd number of them."
  (nth (/ (length rounds) 2) (sort (copy-sequence rounds) #'<)))

(let* ((folder (file-name-as-directory (make-temp-file "lispm-approval-bench" t)))
       (file (expand-file-name "notes.el" folder))
       (agent (lispm-agents-register 'codex folder "codex"))
       (big (approval-bench-diff (* 1024 1024)))
       (small (approval-bench-diff 1024))
       (rounds-big nil)
       (rounds-small nil))
  (unwind-protect
      (progn
        ;; Warm up: diff-mode, font-lock, the buffer and its window.
        (approval-bench-show agent file small)
        (approval-bench-show agent file big)
        (dotimes (_ approval-bench-rounds)
          (push (approval-bench-show agent file big) rounds-big)
          (push (approval-bench-show agent file small) rounds-small)))
    (delete-directory folder t))
  (princ (format (concat "{\"approval_show_1mb_line_ms\": %.3f, \"approval_show_1kb_line_ms\": %.3f, "
                         "\"rounds_1mb\": [%s], \"rounds_1kb\": [%s]}\n")
                 (approval-bench-median rounds-big) (approval-bench-median rounds-small)
                 (mapconcat (lambda (ms) (format "%.3f" ms)) (nreverse rounds-big) ", ")
                 (mapconcat (lambda (ms) (format "%.3f" ms)) (nreverse rounds-small) ", "))))

;;; approval-bench.el ends here
