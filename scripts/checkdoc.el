;;; checkdoc.el --- Run checkdoc over LispM's files, failing on any remark  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l scripts/checkdoc.el FILE...
;; checkdoc prints each remark as FILE:LINE: TEXT; this counts them.

;;; Code:

(require 'checkdoc)
(defvar lispm-checkdoc--remarks 0 "Remarks checkdoc made so far.")
(advice-add 'checkdoc-error :before
            (lambda (&rest _) (setq lispm-checkdoc--remarks (1+ lispm-checkdoc--remarks))))
(dolist (file command-line-args-left)
  (checkdoc-file file))
(setq command-line-args-left nil)
(message "checkdoc: %d remark(s)" lispm-checkdoc--remarks)
(kill-emacs (if (zerop lispm-checkdoc--remarks) 0 1))

;;; checkdoc.el ends here
