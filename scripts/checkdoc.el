;;; checkdoc.el --- Run checkdoc over LispM's files, failing on any remark  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l scripts/checkdoc.el FILE...

;;; Code:

(require 'checkdoc)
(let ((remarks 0))
  (dolist (file command-line-args-left)
    (let ((checkdoc-diagnostic-buffer "*checkdoc*"))
      (when (get-buffer checkdoc-diagnostic-buffer)
        (kill-buffer checkdoc-diagnostic-buffer))
      (checkdoc-file file)
      (when-let* ((buffer (get-buffer checkdoc-diagnostic-buffer)))
        (with-current-buffer buffer
          (goto-char (point-min))
          (while (re-search-forward "^.+:[0-9]+: .*$" nil t)
            (setq remarks (1+ remarks))
            (message "%s" (match-string 0)))))))
  (setq command-line-args-left nil)
  (message "checkdoc: %d remark(s)" remarks)
  (kill-emacs (if (zerop remarks) 0 1)))

;;; checkdoc.el ends here
