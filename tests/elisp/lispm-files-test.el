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
(require 'lispm-ide)
(require 'lispm-tools)
(require 'lispm-test-fixtures)
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

;;; Buffers saved whole

(defun lispm-files-test--left (folder)
  "Return the new files of a save left in FOLDER.
Those are Emacs's tmp* and LispM's .lispm-save-*."
  (directory-files folder nil "\\`\\(?:tmp\\|\\.lispm-save-\\)"))

(ert-deftest lispm-save-buffer-whole-failing-mid-write-leaves-the-old-file ()
  "A save whose write fails half-way leaves the old bytes and nothing beside them.
Saved in place, the file was cut; saved by Emacs's `file-precious-flag',
its new file stayed beside it."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "file" "old\n"))
           (buffer (lispm-edit-visit file))
           (write (symbol-function 'write-region)))
      (cl-letf (((symbol-function 'write-region)
                 (lambda (_start _end filename &rest _)
                   (funcall write "ne" nil filename nil 'silent)
                   (signal 'file-error (list "Writing" "No space left on device" filename)))))
        (should-error (lispm-edit-replace buffer "new text\n" :save t) :type 'file-error))
      (should (equal (lispm-files-test--bytes file) "old\n"))
      (should-not (lispm-files-test--left folder))
      (with-current-buffer buffer
        (should (equal (buffer-string) "old\n"))
        (should (verify-visited-file-modtime buffer))))))

(ert-deftest lispm-save-buffer-whole-through-a-link-writes-its-target ()
  "An edit of a file visited through a link in another folder.
The link stays; the target is replaced whole (a new file, its modes
kept); no new file is left in either folder."
  (lispm-test-in-folder
    (let* ((target (lispm-test-write-file folder "real/file" "one\ntwo\n"))
           (link (expand-file-name "links/file" folder)))
      (make-directory (file-name-directory link))
      (make-symbolic-link "../real/file" link)
      (set-file-modes target #o640)
      (let ((inode (file-attribute-inode-number (file-attributes target))))
        (lispm-edit-replace link "one\nTWO\n" :save t)
        (should (equal (file-symlink-p link) "../real/file"))
        (should (equal (lispm-files-test--bytes target) "one\nTWO\n"))
        (should-not (equal inode (file-attribute-inode-number (file-attributes target))))
        (should (= (file-modes target) #o640))
        (should-not (lispm-files-test--left (file-name-directory link)))
        (should-not (lispm-files-test--left (file-name-directory target)))))))

(ert-deftest lispm-save-buffer-whole-through-a-link-across-file-systems ()
  "A link on another file system: its target is still replaced whole.
Written beside the link, as Emacs's `file-precious-flag' writes, the
rename across file systems was a copy into the old file, in place."
  (let ((shm "/dev/shm/"))
    (skip-unless (and (file-writable-p shm)
                      (not (eql (file-attribute-device-number (file-attributes shm))
                                (file-attribute-device-number
                                 (file-attributes temporary-file-directory))))))
    (lispm-test-in-folder
      (let* ((target (lispm-test-write-file folder "file" "one\ntwo\n"))
             (links (file-name-as-directory (make-temp-file (concat shm "lispm-files-") t)))
             (link (expand-file-name "file" links)))
        (unwind-protect
            (let ((inode (file-attribute-inode-number (file-attributes target))))
              (make-symbolic-link target link)
              (let ((buffer (lispm-edit-visit link)))
                (unwind-protect
                    (progn
                      (lispm-edit-replace buffer "one\nTWO\n" :save t)
                      (should (equal (file-symlink-p link) target))
                      (should (equal (lispm-files-test--bytes target) "one\nTWO\n"))
                      (should-not (equal inode (file-attribute-inode-number
                                                (file-attributes target))))
                      (should-not (lispm-files-test--left links))
                      (should-not (lispm-files-test--left folder)))
                  (with-current-buffer buffer (set-buffer-modified-p nil))
                  (kill-buffer buffer))))
          (delete-directory links t))))))

;; A backup is made by copying: the file keeps its name all along.
(ert-deftest lispm-save-buffer-whole-backs-up-by-copying ()
  "The first save's backup is a copy; the file itself is then replaced whole.
Backed up by renaming, as a plain `save-buffer' does, the file had no
name until the save ended."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "file" "one\ntwo\n"))
           (inode (file-attribute-inode-number (file-attributes file)))
           (make-backup-files t)
           (backup-enable-predicate #'always)
           (backup-directory-alist nil)
           (backup-by-copying nil))
      (lispm-edit-replace file "one\nTWO\n" :save t)
      (should (equal (lispm-files-test--bytes (concat file "~")) "one\ntwo\n"))
      (should-not (equal inode (file-attribute-inode-number (file-attributes (concat file "~")))))
      (should (equal (lispm-files-test--bytes file) "one\nTWO\n")))))

;;; Every write for an agent

(defun lispm-files-test--old-file (folder name)
  "Write the file NAME in FOLDER, mode 0604 (as root, another user's).
Return (FILE . INODE)."
  (let ((file (lispm-test-write-file folder name "one\ntwo\n")))
    (set-file-modes file #o604)
    (when (and (zerop (user-uid)) (executable-find "chown"))
      (call-process "chown" nil nil nil "4321:4322" file))
    (cons file (file-attribute-inode-number (file-attributes file)))))

(defun lispm-files-test--replaced (old text)
  "Check that OLD, a (FILE . INODE), was replaced whole by TEXT.
A new file (a new inode) with TEXT, the old modes and, as root, the old
owner; no new file of the save left beside it."
  (let* ((file (car old))
         (attributes (file-attributes file 'integer)))
    (should (equal (lispm-files-test--bytes file) text))
    (should-not (equal (cdr old) (file-attribute-inode-number attributes)))
    (should (= (file-modes file) #o604))
    (when (and (zerop (user-uid)) (executable-find "chown"))
      (should (= (file-attribute-user-id attributes) 4321))
      (should (= (file-attribute-group-id attributes) 4322)))
    (should-not (lispm-files-test--left (file-name-directory file)))))

(ert-deftest lispm-every-agent-write-replaces-the-file-whole ()
  "The edit tools, a revert (buffer or disk), an IDE diff accepted or saved.
Each replaces the file whole; before, each wrote it in place."
  (lispm-test-in-folder
    (lispm-test-with-agent (agent :folder folder)
      ;; The tools.
      (let ((old (lispm-files-test--old-file folder "written.txt")))
        (should (eq t (plist-get (lispm-tools-call "write_file" agent
                                                   '(:path "written.txt" :content "new\n")
                                                   30)
                                 :ok)))
        (lispm-files-test--replaced old "new\n"))
      (let ((old (lispm-files-test--old-file folder "edited.txt")))
        (should (eq t (plist-get (lispm-tools-call
                                  "edit_file" agent
                                  '(:path "edited.txt"
                                    :diff "--- a/edited.txt\n+++ b/edited.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n")
                                  30)
                                 :ok)))
        (lispm-files-test--replaced old "one\nTWO\n")))
    ;; A revert, the buffer still open: saved through it.
    (let* ((file (car (lispm-files-test--old-file folder "open.txt")))
           (change (lispm-edit-replace file "one\nTWO\n" :save t))
           (old (cons file (file-attribute-inode-number (file-attributes file)))))
      (lispm-edit-revert (list change))
      (lispm-files-test--replaced old "one\ntwo\n"))
    ;; A revert, the buffer gone: written on disk.
    (let* ((file (car (lispm-files-test--old-file folder "closed.txt")))
           (change (lispm-edit-replace file "one\nTWO\n" :save t))
           (old (cons file (file-attribute-inode-number (file-attributes file)))))
      (kill-buffer (find-buffer-visiting file))
      (lispm-edit-revert (list change))
      (lispm-files-test--replaced old "one\ntwo\n"))
    ;; An IDE diff accepted, and a document saved for Claude Code.
    (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
      (let ((old (lispm-files-test--old-file folder "ide.txt"))
            (lispm-ide--diffs nil))
        (should (equal (lispm-sidecar-dispatch-request
                        'emacs/open-diff (list :id "d1" :agent "claude" :file (car old)
                                               :new_contents "one\nIDE\n"))
                       '(:shown t)))
        (lispm-ide-accept (car lispm-ide--diffs))
        (lispm-files-test--replaced old "one\nIDE\n")
        (lispm-ide-close-diffs #'always))
      (let* ((old (lispm-files-test--old-file folder "doc.txt"))
             (buffer (find-file-noselect (car old))))
        (with-current-buffer buffer (goto-char (point-max)) (insert "three\n"))
        (should (eq t (plist-get (lispm-sidecar-dispatch-request
                                  'emacs/save-document (list :file (car old)))
                                 :saved)))
        (lispm-files-test--replaced old "one\ntwo\nthree\n")))))

(provide 'lispm-files-test)
;;; lispm-files-test.el ends here
