;;; lispm-names-test.el --- Tests that private names stay in their files  -*- lexical-binding: t; -*-

;;; Commentary:

;; A `lispm-...--' name is private to the file that defines it: another
;; file of LispM uses public names only.  The blocks app is one library
;; in three files (its world, parser and answers share the planner's
;; state), so its files count as one.

;;; Code:

(require 'ert)
(require 'lispm-base)

(defconst lispm-names-test--definition-regexp
  (rx (or (seq bol "(" (or "defun" "defmacro" "defsubst" "defvar" "defvar-local" "defconst"
                          "defcustom" "defface" "define-inline" "define-error" "defalias"
                          "cl-defun" "cl-defmacro" "cl-defgeneric" "cl-defstruct"
                          "define-derived-mode" "define-minor-mode")
               (+ space) (? "(") (? "'"))
          (seq ":constructor" (+ space)))
      (group "lispm" (* (any "a-z0-9-")) "--" (+ (any "a-z0-9-"))))
  "What defines a private name; the name is its first group.")

(defun lispm-names-test--files ()
  "Return LispM's Lisp files, those of the apps included."
  (cl-remove-if (lambda (file) (string-match-p "-\\(autoloads\\|pkg\\)\\.el\\'" file))
                (append (directory-files lispm-directory t "\\`lispm.*\\.el\\'")
                        (directory-files (expand-file-name "apps" lispm-directory) t
                                         "\\`lispm.*\\.el\\'"))))

(defun lispm-names-test--library (file)
  "Return the library FILE belongs to: its own name, or the blocks app's."
  (let ((name (file-name-base file)))
    (if (string-prefix-p "lispm-app-blocks" name) "lispm-app-blocks" name)))

(defun lispm-names-test--private-definitions (file)
  "Return the private names defined in FILE."
  (with-temp-buffer
    (insert-file-contents file)
    (let (names)
      (while (re-search-forward lispm-names-test--definition-regexp nil t)
        (cl-pushnew (match-string 1) names :test #'equal))
      names)))

(defun lispm-names-test--uses (files)
  "Return an alist from each of FILES to the `lispm' names in its text."
  (mapcar (lambda (file)
            (with-temp-buffer
              (insert-file-contents file)
              (let (names)
                (while (re-search-forward (rx symbol-start "lispm" (* (any "a-z0-9-"))
                                              symbol-end)
                                          nil t)
                  (cl-pushnew (match-string 0) names :test #'equal))
                (cons file names))))
          files))

(defun lispm-names-test--crossings (files)
  "Return (NAME DEFINED-IN USED-IN) for private names of FILES used elsewhere.
Elsewhere is a file of another library."
  (let ((uses (lispm-names-test--uses files)))
    (cl-loop for file in files
             nconc (cl-loop for name in (lispm-names-test--private-definitions file)
                            nconc (cl-loop for (other . names) in uses
                                           when (and (not (equal (lispm-names-test--library other)
                                                                 (lispm-names-test--library file)))
                                                     (member name names))
                                           collect (list name (file-name-nondirectory file)
                                                         (file-name-nondirectory other)))))))

(ert-deftest lispm-names-test-no-private-name-crosses-files ()
  (let ((files (lispm-names-test--files)))
    (should (> (length files) 25))
    (should (equal (lispm-names-test--crossings files) nil))))

(ert-deftest lispm-names-test-the-check-sees-a-crossing ()
  (let* ((dir (make-temp-file "lispm-names-test" t))
         (a (expand-file-name "lispm-a.el" dir))
         (b (expand-file-name "lispm-b.el" dir))
         (world (expand-file-name "lispm-app-blocks-world.el" dir))
         (answer (expand-file-name "lispm-app-blocks-answer.el" dir)))
    (unwind-protect
        (progn
          (with-temp-file a
            (insert "(defun lispm-a--helper () nil)\n(defvar lispm-a--state nil)\n"
                    "(cl-defstruct (lispm-a-thing (:constructor lispm-a--make)))\n"))
          (with-temp-file b
            (insert "(defun lispm-b-go () (lispm-a--helper) (lispm-a--make))\n"
                    ";; lispm-a--statey is another name\n(lispm-a-public)\n"))
          (with-temp-file world (insert "(defvar lispm-blocks--state nil)\n"))
          (with-temp-file answer (insert "(defun lispm-blocks-x () lispm-blocks--state)\n"))
          (should (equal (sort (lispm-names-test--crossings (list a b world answer))
                               (lambda (x y) (string< (car x) (car y))))
                         '(("lispm-a--helper" "lispm-a.el" "lispm-b.el")
                           ("lispm-a--make" "lispm-a.el" "lispm-b.el")))))
      (delete-directory dir t))))

(provide 'lispm-names-test)
;;; lispm-names-test.el ends here
