;;; atomic-save-bench.el --- Time an agent's edit of a 12 MB file, saved whole  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/atomic-save-bench.el
;;
;; A 12 MB file is visited; each of nine rounds changes one line in its
;; middle five times, in an order that turns from round to round:
;;
;; - agent: an agent's edit (`lispm-edit-replace' with `:save t'), the
;;   file saved whole (`lispm-save-buffer-whole': a new file, flushed,
;;   renamed over the old);
;; - agent-noflush: the same, not flushed (`write-region-inhibit-fsync');
;; - agent-plain: the same edit saved by a plain `save-buffer' (in place,
;;   not flushed), as LispM saved before;
;; - save: an edit by hand, then `lispm-save-buffer-whole' alone;
;; - save-plain: an edit by hand, then a plain `save-buffer' alone.
;;
;; Prints one JSON line: {"KIND": [MS...], ...}, one list a kind, the
;; wall time of each round.  The agent's figures include its own work
;; beyond the save (comparing the old and new texts, the change record).

;;; Code:

(require 'lispm-edit)

(defvar atomic-save-bench-noflush nil
  "Non-nil while `write-region' is not to flush.")

(defun atomic-save-bench-noflush (write &rest args)
  "Call WRITE, `write-region', with ARGS; not flushed if asked."
  (if atomic-save-bench-noflush
      (let ((write-region-inhibit-fsync t)) (apply write args))
    (apply write args)))

(defun atomic-save-bench-line (buffer text)
  "Make TEXT the line in the middle of BUFFER's text."
  (with-current-buffer buffer
    (goto-char (/ (point-max) 2))
    (delete-region (line-beginning-position) (line-end-position))
    (insert text)))

(defun atomic-save-bench-agent-text (buffer text)
  "Return BUFFER's text with TEXT the line in its middle; BUFFER unchanged."
  (with-current-buffer buffer
    (save-excursion
      (atomic-save-bench-line buffer text)
      (prog1 (buffer-string)
        (primitive-undo 1 buffer-undo-list)
        (set-buffer-modified-p nil)))))

(defun atomic-save-bench-time (function)
  "Return the milliseconds FUNCTION takes, after a garbage collection."
  (garbage-collect)
  (let ((start (float-time)))
    (funcall function)
    (* 1000 (- (float-time) start))))

(defun atomic-save-bench-once (kind buffer round)
  "Time one edit of BUFFER of KIND, in ROUND; return the milliseconds."
  (let ((line (format "%s %d" kind round)))
    (pcase kind
      ((or 'agent 'agent-noflush 'agent-plain)
       (let ((new (atomic-save-bench-agent-text buffer line))
             (atomic-save-bench-noflush (eq kind 'agent-noflush)))
         (atomic-save-bench-time
          (if (eq kind 'agent-plain)
              (lambda ()
                (cl-letf (((symbol-function 'lispm-save-buffer-whole) #'save-buffer))
                  (lispm-edit-replace buffer new :save t)))
            (lambda () (lispm-edit-replace buffer new :save t))))))
      (_
       (atomic-save-bench-line buffer line)
       (with-current-buffer buffer
         (atomic-save-bench-time (if (eq kind 'save) #'lispm-save-buffer-whole #'save-buffer)))))))

(let* ((folder (file-name-as-directory (make-temp-file "lispm-atomic-bench" t)))
       (file (expand-file-name "big.txt" folder))
       (make-backup-files nil)
       (large-file-warning-threshold nil)
       (kinds '(agent agent-noflush agent-plain save save-plain))
       (times (mapcar #'list kinds)))
  (advice-add 'write-region :around #'atomic-save-bench-noflush)
  (unwind-protect
      (progn
        (with-temp-file file
          (dotimes (n (string-to-number (or (getenv "BENCH_LINES") "300000")))
            (insert (format "a line of a big file, numbered %07d\n" n))))
        (let ((buffer (find-file-noselect file)))
          (dotimes (round 9)
            (let ((order (append (nthcdr (% round 5) kinds)
                                 (take (% round 5) kinds))))
              (dolist (kind order)
                (push (atomic-save-bench-once kind buffer round)
                      (alist-get kind times)))))))
    (advice-remove 'write-region #'atomic-save-bench-noflush)
    (delete-directory folder t))
  (princ (concat "{"
                 (mapconcat (lambda (entry)
                              (format "\"%s\": [%s]" (car entry)
                                      (mapconcat (lambda (v) (format "%.3f" v))
                                                 (reverse (cdr entry)) ", ")))
                            times ", ")
                 "}\n")))

;;; atomic-save-bench.el ends here
