;;; lispm-files-test.el --- Tests of writing files whole  -*- lexical-binding: t; -*-

;;; Commentary:

;; `lispm-write-file-whole' and `lispm-save-buffer-whole', on real
;; files: what the replaced file keeps, and that a failure leaves it as
;; it was.  The crash cases (SIGKILL mid-save of a 12 MB file) are in
;; tests/python/test_crash_save.py.

;;; Code:

(require 'ert)
(require 'lispm-base)
(require 'lispm-edit)
(require 'seq)

(defmacro lispm-files-test--in-folder (&rest body)
  "Run BODY with `default-directory' a new temporary folder."
  (declare (indent 0))
  `(let ((default-directory (file-name-as-directory (make-temp-file "lispm-files-" t))))
     (unwind-protect (progn ,@body)
       (delete-directory default-directory t))))

(defun lispm-files-test--bytes (file)
  "Return FILE's bytes."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (let ((coding-system-for-read 'no-conversion))
      (insert-file-contents-literally file))
    (buffer-string)))

(defun lispm-files-test--others ()
  "Return the names in the current folder other than \"file\" and \"link\"."
  (seq-difference (directory-files default-directory nil "\\`[^.]\\|\\`\\.lispm")
                  '("file" "link")))

(ert-deftest lispm-write-file-whole-keeps-modes-and-links ()
  "The new text keeps the file's modes; a link stays a link to it."
  (lispm-files-test--in-folder
    (write-region "old\n" nil "file" nil 'silent)
    (set-file-modes "file" #o640)
    (make-symbolic-link "file" "link")
    (lispm-write-file-whole "link" "new é\n" 'utf-8-unix)
    (should (equal (file-symlink-p "link") "file"))
    (should (equal (lispm-files-test--bytes "file") "new \303\251\n"))
    (should (= (file-modes "file") #o640))
    (should-not (lispm-files-test--others))))

(ert-deftest lispm-write-file-whole-failing-leaves-the-old-file ()
  "A write that fails leaves the old bytes and no new file beside them."
  (lispm-files-test--in-folder
    (write-region "old\n" nil "file" nil 'silent)
    (cl-letf (((symbol-function 'write-region)
               (lambda (&rest _) (signal 'file-error '("Writing" "disk full")))))
      (should-error (lispm-write-file-whole "file" "new\n") :type 'file-error))
    (cl-letf (((symbol-function 'rename-file)
               (lambda (&rest _) (signal 'file-error '("Renaming" "refused")))))
      (should-error (lispm-write-file-whole "file" "new\n") :type 'file-error))
    (should (equal (lispm-files-test--bytes "file") "old\n"))
    (should-not (lispm-files-test--others))))

(ert-deftest lispm-write-file-whole-keeps-the-owner-where-it-may ()
  "As root, a file of another user stays that user's."
  (skip-unless (and (zerop (user-uid)) (executable-find "chown")))
  (lispm-files-test--in-folder
    (write-region "old\n" nil "file" nil 'silent)
    (call-process "chown" nil nil nil "4321:4322" "file")
    (lispm-write-file-whole "file" "new\n")
    (let ((attributes (file-attributes "file" 'integer)))
      (should (= (file-attribute-user-id attributes) 4321))
      (should (= (file-attribute-group-id attributes) 4322)))))

(ert-deftest lispm-agent-edit-replaces-the-file-whole ()
  "An agent's edit saved gives a new file (a new inode), with the old modes.
Saved in place, as before, it kept its inode: a crash mid-write left
the file cut."
  (lispm-files-test--in-folder
    (write-region "one\ntwo\n" nil "file" nil 'silent)
    (set-file-modes "file" #o604)
    (let ((inode (file-attribute-inode-number (file-attributes "file")))
          (buffer (lispm-edit-visit (expand-file-name "file"))))
      (unwind-protect
          (progn
            (lispm-edit-replace buffer "one\nTWO\n" :save t)
            (should (equal (lispm-files-test--bytes "file") "one\nTWO\n"))
            (should-not (equal inode (file-attribute-inode-number (file-attributes "file"))))
            (should (= (file-modes "file") #o604))
            (should-not (buffer-modified-p buffer))
            (should (verify-visited-file-modtime buffer))
            (should-not (seq-remove (lambda (name) (string-suffix-p "~" name))
                                    (lispm-files-test--others))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(provide 'lispm-files-test)
;;; lispm-files-test.el ends here
