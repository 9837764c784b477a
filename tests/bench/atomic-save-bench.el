;;; atomic-save-bench.el --- Time an agent's edit of a 12 MB file, saved whole  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/atomic-save-bench.el
;;
;; A 12 MB file is visited; each round changes one line in its middle
;; twice: once as an agent's edit (`lispm-edit-replace' with `:save t',
;; which saves the file whole: a new file, flushed, renamed over the
;; old), and once by hand followed by a plain `save-buffer' (in place,
;; not flushed), alternately first.  Nine rounds; prints one JSON line:
;; {"atomic_ms": MEDIAN, "plain_ms": MEDIAN, "atomic": [MS...],
;; "plain": [MS...]}.  The agent's figure includes its own work beyond
;; the save (comparing the old and new texts, the change record).

;;; Code:

(require 'lispm-edit)

(defun atomic-save-bench-median (values)
  "Return the median of VALUES."
  (nth (/ (length values) 2) (sort (copy-sequence values) #'<)))

(defun atomic-save-bench-line (buffer text)
  "Make TEXT the line in the middle of BUFFER's text."
  (with-current-buffer buffer
    (goto-char (/ (point-max) 2))
    (delete-region (line-beginning-position) (line-end-position))
    (insert text)))

(let* ((folder (file-name-as-directory (make-temp-file "lispm-atomic-bench" t)))
       (file (expand-file-name "big.txt" folder))
       (make-backup-files nil)
       (large-file-warning-threshold nil)
       (atomic nil) (plain nil))
  (unwind-protect
      (progn
        (with-temp-file file
          (dotimes (n (string-to-number (or (getenv "BENCH_LINES") "300000")))
            (insert (format "a line of a big file, numbered %07d\n" n))))
        (let ((buffer (find-file-noselect file)))
          (dotimes (round 9)
            (let ((agent
                   (lambda ()
                     (let ((new (with-current-buffer buffer
                                  (save-excursion
                                    (atomic-save-bench-line buffer (format "agent %d" round))
                                    (prog1 (buffer-string)
                                      (primitive-undo 1 buffer-undo-list)
                                      (set-buffer-modified-p nil)))))
                           (start (progn (garbage-collect) (float-time))))
                       (lispm-edit-replace buffer new :save t)
                       (push (* 1000 (- (float-time) start)) atomic))))
                  (by-hand
                   (lambda ()
                     (atomic-save-bench-line buffer (format "hand %d" round))
                     (with-current-buffer buffer
                       (garbage-collect)
                       (let ((start (float-time)))
                         (save-buffer)
                         (push (* 1000 (- (float-time) start)) plain))))))
              (if (cl-evenp round)
                  (progn (funcall agent) (funcall by-hand))
                (funcall by-hand) (funcall agent))))))
    (delete-directory folder t))
  (princ (format "{\"atomic_ms\": %.3f, \"plain_ms\": %.3f, \"atomic\": [%s], \"plain\": [%s]}\n"
                 (atomic-save-bench-median atomic) (atomic-save-bench-median plain)
                 (mapconcat (lambda (v) (format "%.3f" v)) (reverse atomic) ", ")
                 (mapconcat (lambda (v) (format "%.3f" v)) (reverse plain) ", "))))

;;; atomic-save-bench.el ends here
