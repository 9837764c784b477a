;;; mkpkg.el --- Write lispm-pkg.el for a package tar  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -l scripts/mkpkg.el elisp/lispm.el DIR
;; `eask package' needs package-build, which cannot be installed offline;
;; this writes the descriptor from lispm.el's headers instead.

;;; Code:

(require 'package)
(let* ((main (pop command-line-args-left))
       (dir (pop command-line-args-left))
       (file (expand-file-name "lispm-pkg.el" dir))
       (desc (with-temp-buffer
               (insert-file-contents main)
               (package-buffer-info))))
  (package-generate-description-file desc file)
  ;; Emacs 30 warns about a file without a lexical-binding cookie.
  (with-temp-file file
    (insert-file-contents file)
    (goto-char (point-min))
    (when (re-search-forward "-\\*- no-byte-compile: t -\\*-" (line-end-position) t)
      (replace-match "-*- no-byte-compile: t; lexical-binding: t -*-" t t))))

;;; mkpkg.el ends here
