;;; lispm-edit-test.el --- Tests of editing, change records and revert  -*- lexical-binding: t; -*-

;;; Commentary:

;; Real buffers, real files in a temporary folder, real undo.  The
;; user's typing is simulated as the command loop does it: an
;; `undo-boundary' after each command.

;;; Code:

(require 'ert)
(require 'lispm-edit)
(require 'lispm-tools)
(require 'lispm-test-fixtures)

(defun lispm-edit-test--type (buffer position text)
  "Insert TEXT at POSITION in BUFFER as one user command does."
  (with-current-buffer buffer
    (goto-char position)
    (insert text)
    (undo-boundary)))

(defun lispm-edit-test--undo (buffer)
  "Undo once in BUFFER, as one `undo' command does."
  (with-current-buffer buffer
    (let ((last-command nil))
      (undo))
    (undo-boundary)))

(defun lispm-edit-test--buffers-and-files (files)
  "Return the state of FILES: for each, its buffer's text and its disk text."
  (mapcar (lambda (file)
            (list (and (find-buffer-visiting file)
                       (with-current-buffer (find-buffer-visiting file) (buffer-string)))
                  (and (file-exists-p file) (lispm-test-read-file file))))
          files))

;;; Reading

(ert-deftest lispm-edit-test-file-text-is-what-emacs-sees ()
  (lispm-test-in-folder
    (let ((file (lispm-test-write-file folder "a.txt" "disk\n")))
      (should (equal (lispm-edit-file-text file) "disk\n"))
      (with-current-buffer (find-file-noselect file)
        (goto-char (point-min))
        (insert "unsaved ")
        (narrow-to-region 1 3))
      (should (equal (lispm-edit-file-text file) "unsaved disk\n"))
      (should-not (lispm-edit-file-text (expand-file-name "none" folder)))
      (should-not (lispm-edit-file-dos-p file)))))

;;; One undo step

(ert-deftest lispm-edit-test-each-agent-edit-is-one-undo-step ()
  "The user types between two agent edits; one undo takes back only the last."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "u.el" "(a)\n(b)\n(c)\n"))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer (buffer-enable-undo))
      (lispm-edit-test--type buffer 1 ";; one\n")
      (let ((first (lispm-edit-replace buffer ";; one\n(a)\n(B)\n(c)\n" :save t)))
        (should (lispm-change-p first))
        (should (equal (lispm-change-before first) "b"))
        (should (equal (lispm-change-after first) "B")))
      (should (equal (lispm-test-read-file file) ";; one\n(a)\n(B)\n(c)\n"))
      (lispm-edit-test--type buffer (with-current-buffer buffer (point-max)) ";; two\n")
      (let ((second (lispm-edit-replace buffer ";; one\n(a)\n(B)\n(C C)\n;; two\n")))
        (should (equal (lispm-change-before second) "c"))
        (should (equal (lispm-change-after second) "C C"))
        (with-current-buffer buffer
          (should (equal (buffer-substring (lispm-change-beg second) (lispm-change-end second))
                         "C C"))))
      ;; Each undo takes back one step: the agent's, the user's, the agent's.
      (lispm-edit-test--undo buffer)
      (with-current-buffer buffer
        (should (equal (buffer-string) ";; one\n(a)\n(B)\n(c)\n;; two\n")))
      (with-current-buffer buffer
        (let ((last-command 'undo)) (undo-more 1)))
      (with-current-buffer buffer
        (should (equal (buffer-string) ";; one\n(a)\n(B)\n(c)\n"))
        (undo-more 1)
        (should (equal (buffer-string) ";; one\n(a)\n(b)\n(c)\n"))))))

(ert-deftest lispm-edit-test-a-failed-save-puts-the-text-back ()
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "s.txt" "one\n"))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (add-hook 'write-contents-functions (lambda () (error "No saving today")) nil t))
      (should-error (lispm-edit-replace buffer "two\n" :save t))
      (with-current-buffer buffer
        (should (equal (buffer-string) "one\n"))
        (should-not (buffer-modified-p)))
      (should (equal (lispm-test-read-file file) "one\n")))))

;;; Revert

(ert-deftest lispm-edit-test-revert-keeps-the-users-edits-elsewhere ()
  "Two files edited and a third created; the user edits elsewhere; revert."
  (lispm-test-in-folder
    (let* ((a (lispm-test-write-file folder "a.txt" "alpha\nbeta\ngamma\n"))
           (b (lispm-test-write-file folder "b.txt" "one\ntwo\nthree\n"))
           (c (expand-file-name "new/dir/c.txt" folder))
           (changes (list (lispm-edit-replace a "alpha\nBETA\ngamma\n" :save t)
                          (lispm-edit-replace b "one\ntwo\nthree\nfour\n" :save t)
                          (lispm-edit-replace c "brand new\n" :save t))))
      (should (equal (lispm-test-read-file c) "brand new\n"))
      (should (lispm-change-created (nth 2 changes)))
      (should-not (lispm-change-created (car changes)))
      ;; The user edits a.txt above and below the agent's text, unsaved,
      ;; and b.txt at the start, saved.
      (lispm-edit-test--type (find-buffer-visiting a) 1 "user: ")
      (with-current-buffer (find-buffer-visiting a)
        (lispm-edit-test--type (current-buffer) (point-max) "end\n"))
      (lispm-edit-test--type (find-buffer-visiting b) 1 "zero\n")
      (with-current-buffer (find-buffer-visiting b) (save-buffer))
      (should-not (lispm-edit-conflicts changes))
      ;; The order of the list does not matter.
      (should (= (lispm-edit-revert (reverse changes)) 3))
      (with-current-buffer (find-buffer-visiting a)
        (should (equal (buffer-string) "user: alpha\nbeta\ngamma\nend\n"))
        ;; It had unsaved changes: it still has, and is not saved.
        (should (buffer-modified-p)))
      (should (equal (lispm-test-read-file a) "alpha\nBETA\ngamma\n"))
      (with-current-buffer (find-buffer-visiting b)
        (should (equal (buffer-string) "zero\none\ntwo\nthree\n"))
        (should-not (buffer-modified-p)))
      (should (equal (lispm-test-read-file b) "zero\none\ntwo\nthree\n"))
      ;; The created file is gone, with its buffer and its directories.
      (should-not (file-exists-p c))
      (should-not (find-buffer-visiting c))
      (should-not (file-exists-p (expand-file-name "new" folder)))
      ;; The revert is one undo step in each buffer.
      (lispm-edit-test--undo (find-buffer-visiting b))
      (with-current-buffer (find-buffer-visiting b)
        (should (equal (buffer-string) "zero\none\ntwo\nthree\nfour\n"))))))

(ert-deftest lispm-edit-test-a-conflict-changes-nothing ()
  (lispm-test-in-folder
    (let* ((a (lispm-test-write-file folder "a.txt" "alpha\nbeta\ngamma\n"))
           (b (lispm-test-write-file folder "b.txt" "one\n"))
           (c (expand-file-name "c.txt" folder))
           (changes (list (lispm-edit-replace a "alpha\nBETA\ngamma\n" :save t)
                          (lispm-edit-replace b "ONE\n" :save t)
                          (lispm-edit-replace c "new\n" :save t))))
      ;; The user changes a letter of the agent's BETA.
      (with-current-buffer (find-buffer-visiting a)
        (goto-char (point-min))
        (search-forward "BE")
        (insert "-")
        (undo-boundary))
      (let* ((files (list a b c))
             (state (lispm-edit-test--buffers-and-files files))
             (conflicts (lispm-edit-conflicts changes))
             (err (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict)))
        (should (equal conflicts (list (list :file a :reason "text LispM wrote was changed since"))))
        (should (equal (nth 2 err) conflicts))
        (should (string-match-p "a.txt (text LispM wrote was changed since)"
                                (lispm-error-message err)))
        (should (equal (lispm-edit-test--buffers-and-files files) state))
        (should (file-exists-p c))))))

(ert-deftest lispm-edit-test-revert-two-edits-of-the-same-text ()
  "A later edit that rewrites an earlier one's text reverts to the start."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "t.txt" "aaa\nbbb\nccc\nddd\n"))
           (changes (list (lispm-edit-replace file "aaa\nBBB\nccc\nddd\n" :save t))))
      (lispm-edit-test--type (find-buffer-visiting file) 1 "top\n")
      ;; Overlapping the first edit's end, then all of it and more.
      (push (lispm-edit-replace file "top\naaa\nBBx\nCCC\nddd\n" :save t) changes)
      (push (lispm-edit-replace file "top\nZ\nddd\n" :save t) changes)
      (should (= (lispm-edit-revert changes) 1))
      (with-current-buffer (find-buffer-visiting file)
        (should (equal (buffer-string) "top\naaa\nbbb\nccc\nddd\n"))))))

(ert-deftest lispm-edit-test-revert-after-the-buffer-is-killed ()
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "k.txt" "keep\nold\n"))
           (change (lispm-edit-replace file "keep\nnew\n" :save t)))
      (kill-buffer (find-buffer-visiting file))
      (should (= (lispm-edit-revert (list change)) 1))
      (should (equal (lispm-test-read-file file) "keep\nold\n")))
    ;; Killed with unsaved changes: where the text is is not known.
    (let* ((file (lispm-test-write-file folder "l.txt" "x\n"))
           (change (lispm-edit-replace file "y\n" :save t)))
      (with-current-buffer (find-buffer-visiting file)
        (insert "unsaved")
        (kill-buffer))
      (should (equal (lispm-edit-conflicts (list change))
                     (list (list :file file
                                 :reason "its buffer was killed with unsaved changes")))))))

;;; Shell and eval: snapshots

(ert-deftest lispm-edit-test-snapshot-sees-what-a-call-did ()
  (lispm-test-in-folder
    (let* ((kept (lispm-test-write-file folder "kept.txt" "same\n"))
           (changed (lispm-test-write-file folder "changed.txt" "before\n"))
           (gone (lispm-test-write-file folder "gone.txt" "bye\n"))
           (big (lispm-test-write-file folder "big.txt" "0123456789\n"))
           (_git (lispm-test-write-file folder ".git/config" "[core]\n"))
           (lispm-edit-snapshot-file-limit 10)
           (snapshot (lispm-edit-snapshot folder)))
      (ignore kept)
      (with-temp-file changed (insert "after\n"))
      (delete-file gone)
      (with-temp-file big (insert "9876543210\n"))
      (lispm-test-write-file folder "sub/made.txt" "new\n")
      (lispm-test-write-file folder ".git/config" "[changed]\n")
      (let* ((lispm-edit-snapshot-file-limit 100)
             (changes (lispm-edit-snapshot-changes snapshot))
             (by-name (mapcar (lambda (c) (cons (file-relative-name (lispm-change-file c) folder) c))
                              changes)))
        (should (equal (sort (mapcar #'car by-name) #'string<)
                       '("big.txt" "changed.txt" "gone.txt" "sub" "sub/made.txt")))
        (let ((c (cdr (assoc "changed.txt" by-name))))
          (should (equal (lispm-change-before c) "before\n"))
          (should (equal (lispm-change-after c) "after\n"))
          (should-not (lispm-change-buffer c)))
        (should (lispm-change-deleted (cdr (assoc "gone.txt" by-name))))
        (should (lispm-change-created (cdr (assoc "sub/made.txt" by-name))))
        (should (eq (lispm-change-directory (cdr (assoc "sub" by-name))) t))
        ;; A file too big to keep cannot be put back: that is a conflict.
        (let ((lispm-edit-snapshot-file-limit 10))
          (should (equal (lispm-edit-conflicts changes)
                         (list (list :file big
                                     :reason "LispM kept no copy of it (over 10 bytes)"))))
          (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict))
        (should (equal (lispm-test-read-file changed) "after\n"))
        ;; Without it, the rest reverts.
        (should (= (lispm-edit-revert (delq (cdr (assoc "big.txt" by-name)) changes)) 3))
        (should (equal (lispm-test-read-file changed) "before\n"))
        (should (equal (lispm-test-read-file gone) "bye\n"))
        (should-not (file-exists-p (expand-file-name "sub" folder)))
        (should (equal (lispm-test-read-file (expand-file-name ".git/config" folder))
                       "[changed]\n"))))))

(ert-deftest lispm-edit-test-a-snapshot-keeps-bytes-only-for-its-time ()
  ;; A big folder must not hold Emacs up: past the time limit, files are
  ;; only noted, and a change to one is a conflict, not half a revert.
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "f.txt" "one\n"))
           (lispm-edit-snapshot-time-limit 0)
           (snapshot (lispm-edit-snapshot folder)))
      (with-temp-file file (insert "two\n"))
      (let ((changes (lispm-edit-snapshot-changes snapshot)))
        (should (= (length changes) 1))
        (should-not (lispm-change-kept (car changes)))
        (should (equal (lispm-edit-conflicts changes)
                       (list (list :file file
                                   :reason "LispM kept no copy of it (past the snapshot limits)"))))
        (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict)
        (should (equal (lispm-test-read-file file) "two\n"))))))

(ert-deftest lispm-edit-test-a-file-changed-on-disk-since-is-a-conflict ()
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "f.txt" "one\n"))
           (snapshot (lispm-edit-snapshot folder)))
      (with-temp-file file (insert "two\n"))
      (let ((changes (lispm-edit-snapshot-changes snapshot)))
        (should (= (length changes) 1))
        (sleep-for 0.01)
        (with-temp-file file (insert "three\n"))
        (should (equal (lispm-edit-conflicts changes)
                       (list (list :file file :reason "it changed on disk since"))))
        (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict)
        (should (equal (lispm-test-read-file file) "three\n"))))))

(ert-deftest lispm-edit-test-eval-that-writes-a-file-can-be-reverted ()
  "A turn that changed a file only through `write-region' in eval_elisp."
  (lispm-test-in-folder
    (lispm-test-with-agent (agent :folder folder)
      (let* ((file (lispm-test-write-file folder "e.txt" "original\n"))
             (result (lispm-tools-call
                      "eval_elisp" agent
                      (list :form (format "(write-region \"evaluated\\n\" nil %S)" file))
                      30)))
        (should (eq (plist-get result :ok) t))
        (should (equal (lispm-test-read-file file) "evaluated\n"))
        (let ((changes (plist-get result :changes)))
          (should (= (length changes) 1))
          (should (= (lispm-edit-revert changes) 1)))
        (should (equal (lispm-test-read-file file) "original\n"))
        ;; A form that fails after writing still reports what it wrote.
        (let ((result (lispm-tools-call
                       "eval_elisp" agent
                       (list :form (format "(progn (write-region \"x\" nil %S) (car 1))"
                                           (expand-file-name "x.txt" folder)))
                       30)))
          (should (eq (plist-get result :ok) nil))
          (should (equal (plist-get result :condition) "wrong-type-argument"))
          (should (= (lispm-edit-revert (plist-get result :changes)) 1))
          (should-not (file-exists-p (expand-file-name "x.txt" folder))))))))

(ert-deftest lispm-edit-test-shell-changes-can-be-reverted ()
  (lispm-test-in-folder
    (lispm-test-with-agent (agent :folder folder)
      (let* ((file (lispm-test-write-file folder "s.txt" "sh\n"))
             (buffer (find-file-noselect file))
             (result (lispm-tools-call
                      "run_shell" agent '(:command "echo more >> s.txt; echo x > t.txt")
                      30)))
        (should (eq (plist-get result :ok) t))
        ;; The unmodified buffer of a changed file shows the change.
        (with-current-buffer buffer
          (should (equal (buffer-string) "sh\nmore\n"))
          (should-not (buffer-modified-p)))
        (should (= (length (plist-get result :changes)) 2))
        (should (= (lispm-edit-revert (plist-get result :changes)) 2))
        (should (equal (lispm-test-read-file file) "sh\n"))
        (with-current-buffer buffer
          (should (equal (buffer-string) "sh\n"))
          (should-not (buffer-modified-p)))
        (should-not (file-exists-p (expand-file-name "t.txt" folder)))
        ;; A command that changes nothing reports no changes.
        (should-not (plist-member (lispm-tools-call "run_shell" agent '(:command "true") 30)
                                  :changes))))))

(ert-deftest lispm-edit-test-edit-tools-report-their-changes ()
  (lispm-test-in-folder
    (lispm-test-with-agent (agent :folder folder)
      (let* ((file (lispm-test-write-file folder "d.txt" "one\ntwo\n"))
             (edit (lispm-tools-call "edit_file" agent '(:path "d.txt" :old "two" :new "2") 30))
             (write (lispm-tools-call "write_file" agent '(:path "w/new.txt" :content "w\n") 30))
             (changes (append (plist-get edit :changes) (plist-get write :changes))))
        (should (equal (plist-get edit :text) "Wrote d.txt (6 characters)"))
        (should (= (length changes) 2))
        (should (equal (mapcar #'lispm-change-after changes) '("2" "w\n")))
        ;; The MCP answer has no change objects in it.
        (should (equal (lispm-tools-json-result edit) '(:ok t :text "Wrote d.txt (6 characters)")))
        (should (= (lispm-edit-revert changes) 2))
        (should (equal (lispm-test-read-file file) "one\ntwo\n"))
        (should-not (file-exists-p (expand-file-name "w" folder)))))))

(provide 'lispm-edit-test)
;;; lispm-edit-test.el ends here
