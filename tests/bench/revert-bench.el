;;; revert-bench.el --- Time reverting a turn that edited 40 files  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/revert-bench.el
;;
;; A turn edits 40 files of 400 lines each (one edit in the middle of
;; each, through its buffer, saved), the user then types at the top of
;; every fourth of them, and `lispm-edit-revert' takes the turn back.
;; Seven rounds; prints one JSON line: {"agent_revert_40_files_ms":
;; MEDIAN, "rounds": [MS...]}.

;;; Code:

(require 'lispm-edit)

(defconst revert-bench-files 40 "How many files the turn edits.")

(defun revert-bench-text (n)
  "Return the text of file N: 400 numbered lines."
  (mapconcat (lambda (i) (format "(defun f%d-%d () \"Line %d.\" %d)\n" n i i i))
             (number-sequence 1 400) ""))

(defun revert-bench-round (folder)
  "Edit the files of FOLDER as a turn does, revert it; return the milliseconds."
  (let ((changes nil))
    (dotimes (n revert-bench-files)
      (let* ((file (expand-file-name (format "f%02d.el" n) folder))
             (text (revert-bench-text n))
             (middle (/ (length text) 2)))
        (push (lispm-edit-replace
               file (concat (substring text 0 middle) ";; agent\n" (substring text middle))
               :save t)
              changes)))
    (dotimes (n revert-bench-files)
      (when (zerop (% n 4))
        (with-current-buffer (find-buffer-visiting
                              (expand-file-name (format "f%02d.el" n) folder))
          (goto-char (point-min))
          (insert ";; user\n")
          (undo-boundary))))
    (garbage-collect)
    (let ((start (float-time)))
      (unless (= (lispm-edit-revert changes) revert-bench-files)
        (error "Not every file was restored"))
      (prog1 (* 1000 (- (float-time) start))
        ;; Back to the start for the next round.
        (dolist (buffer (buffer-list))
          (when (and (buffer-file-name buffer)
                     (string-prefix-p folder (buffer-file-name buffer)))
            (with-current-buffer buffer (set-buffer-modified-p nil))
            (kill-buffer buffer)))
        (dotimes (n revert-bench-files)
          (with-temp-file (expand-file-name (format "f%02d.el" n) folder)
            (insert (revert-bench-text n))))))))

(let* ((folder (file-name-as-directory (make-temp-file "lispm-revert-bench" t)))
       (make-backup-files nil)
       (rounds nil))
  (unwind-protect
      (progn
        (dotimes (n revert-bench-files)
          (with-temp-file (expand-file-name (format "f%02d.el" n) folder)
            (insert (revert-bench-text n))))
        (revert-bench-round folder)     ; Warm up.
        (dotimes (_ 7)
          (push (revert-bench-round folder) rounds)))
    (delete-directory folder t))
  (let ((sorted (sort (copy-sequence rounds) #'<)))
    (princ (format "{\"agent_revert_40_files_ms\": %.3f, \"rounds\": [%s]}\n"
                   (nth 3 sorted)
                   (mapconcat (lambda (ms) (format "%.3f" ms)) (nreverse rounds) ", ")))))

;;; revert-bench.el ends here
