;;; approval-bench.el --- Time showing an approval of an edit with a 1 MB line  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/approval-bench.el
;;
;; An agent asks to change one character in the middle of a file's
;; line of 1 MiB (a minified bundle, a data URI): the diff has the line
;; twice, removed and added.  The same edit of a line of 1 KiB is the
;; baseline.  Each round times `lispm-approvals-request' for each
;; (which draws `*LispM approvals*' and displays it), then withdraws
;; them, untimed.  And an edit of 40 hunks, each its own part of the
;; approval to accept or reject (`approval_hunks_show_ms'), against an
;; edit of one hunk.  21 rounds after a warm-up; prints one JSON line:
;; {"approval_show_1mb_line_ms": MEDIAN, "approval_show_1kb_line_ms":
;; MEDIAN, "approval_hunks_show_ms": MEDIAN, "approval_one_hunk_show_ms":
;; MEDIAN, "rounds_1mb": [MS...], "rounds_1kb": [MS...], "rounds_hunks":
;; [MS...], "rounds_one_hunk": [MS...]}.

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

(defun approval-bench-hunks-diff (hunks)
  "Return the diff of an edit of a file in HUNKS places, far apart."
  (let ((old nil) (new nil))
    (dotimes (i (* 10 hunks))
      (let ((line (format "(defun notes-%d (x) (list x %d))\n" i i)))
        (push line old)
        (push (if (= (% i 10) 5) (string-replace "list" "vector" line) line) new)))
    (lispm-edit-diff (apply #'concat (nreverse old)) (apply #'concat (nreverse new))
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
       (hunks (approval-bench-hunks-diff 40))
       (one-hunk (approval-bench-hunks-diff 1))
       (rounds-big nil)
       (rounds-small nil)
       (rounds-hunks nil)
       (rounds-one-hunk nil))
  (unwind-protect
      (progn
        ;; Warm up: diff-mode, font-lock, the buffer and its window.
        (approval-bench-show agent file small)
        (approval-bench-show agent file big)
        (approval-bench-show agent file hunks)
        (let ((id (lispm-approvals-request agent 'default 'edit
                                           (list :files (list file) :diff hunks) #'ignore)))
          (unless (= (length (lispm-review-hunks
                              (lispm-approval-review (lispm-approvals-get id))))
                     40)
            (error "The 40-hunk edit is not reviewed hunk by hunk"))
          (lispm-approvals-withdraw id "bench"))
        (dotimes (_ approval-bench-rounds)
          (push (approval-bench-show agent file big) rounds-big)
          (push (approval-bench-show agent file small) rounds-small)
          (push (approval-bench-show agent file hunks) rounds-hunks)
          (push (approval-bench-show agent file one-hunk) rounds-one-hunk)))
    (delete-directory folder t))
  (cl-flet ((all (rounds) (mapconcat (lambda (ms) (format "%.3f" ms)) (reverse rounds) ", ")))
    (princ (format (concat "{\"approval_show_1mb_line_ms\": %.3f, \"approval_show_1kb_line_ms\": %.3f, "
                           "\"approval_hunks_show_ms\": %.3f, \"approval_one_hunk_show_ms\": %.3f, "
                           "\"rounds_1mb\": [%s], \"rounds_1kb\": [%s], "
                           "\"rounds_hunks\": [%s], \"rounds_one_hunk\": [%s]}\n")
                   (approval-bench-median rounds-big) (approval-bench-median rounds-small)
                   (approval-bench-median rounds-hunks) (approval-bench-median rounds-one-hunk)
                   (all rounds-big) (all rounds-small) (all rounds-hunks) (all rounds-one-hunk)))))

;;; approval-bench.el ends here
