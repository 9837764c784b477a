;;; compile.el --- Byte-compile LispM with warnings as errors  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -L elisp/apps -l scripts/compile.el FILE...
;; Exits non-zero on any warning; deletes the .elc files afterwards.

;;; Code:

(require 'bytecomp)
(setq byte-compile-error-on-warn t)
(let ((failed 0))
  (dolist (file command-line-args-left)
    (unless (byte-compile-file file)
      (setq failed (1+ failed)))
    (let ((elc (byte-compile-dest-file file)))
      (when (file-exists-p elc) (delete-file elc))))
  (setq command-line-args-left nil)
  (message "byte-compile: %d failed" failed)
  (kill-emacs (if (zerop failed) 0 1)))

;;; compile.el ends here
