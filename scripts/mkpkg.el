;;; mkpkg.el --- Write lispm-pkg.el for a package tar  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -l scripts/mkpkg.el elisp/lispm.el DIR
;; `eask package' needs package-build, which cannot be installed offline;
;; this writes the descriptor from lispm.el's headers instead.

;;; Code:

(require 'package)
(let* ((main (pop command-line-args-left))
       (dir (pop command-line-args-left))
       (desc (with-temp-buffer
               (insert-file-contents main)
               (package-buffer-info))))
  (package-generate-description-file
   desc (expand-file-name "lispm-pkg.el" dir)))

;;; mkpkg.el ends here
