;;; lispm-session-record-test.el --- A call's changes in the session, reverted from it  -*- lexical-binding: t; -*-

;;; Commentary:

;; What a call changed in files is written in the session with its
;; result, as a diff; a turn whose Emacs died is reverted from that
;; record (`lispm-session-turn-changes', `lispm-turn-revert-recorded').
;; The SIGKILL of a real Emacs in a real own-agent turn, then the
;; revert in a new Emacs, is tests/python/test_crash_own_turn.py.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-turn)
(require 'lispm-test-fixtures)

(defmacro lispm-session-record-test--with (&rest body)
  "Run BODY with `project' and `sessions', fresh folders, and no git."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-session-record" t))))
          (project (file-name-as-directory (expand-file-name "project" root)))
          (sessions (file-name-as-directory (expand-file-name "sessions" root)))
          (lispm-sessions-directory sessions)
          (lispm-sessions-git-program "/nonexistent/git"))
     (make-directory project t)
     (unwind-protect
         (progn ,@body)
       (dolist (buffer (buffer-list))
         (when (or (with-current-buffer buffer (derived-mode-p 'lispm-session-mode))
                   (and (buffer-file-name buffer)
                        (string-prefix-p root (buffer-file-name buffer))))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (let ((kill-buffer-query-functions nil)) (kill-buffer buffer))))
       (delete-directory root t))))

(defun lispm-session-record-test--call (buffer id changes)
  "Record in BUFFER the call ID whose edits were CHANGES, `lispm-change's."
  (lispm-session-insert-call buffer (list :id id :name "edit_file" :arguments "{}"))
  (lispm-session-insert-result buffer id (format "call %s done" id) nil
                               (delq nil (mapcar #'lispm-turn-record changes))))

(defun lispm-session-record-test--die (buffer)
  "Let BUFFER's Emacs die: what is on disk stays; return the session's file."
  (prog1 (buffer-local-value 'lispm-session-file buffer)
    (with-current-buffer buffer (set-buffer-modified-p nil))
    (kill-buffer buffer)))

(defconst lispm-session-record-test--odd
  "* a heading\n#+end_src\n#+begin_example\n-- a comment\n++ more\n\\ back\n@@ x @@\n--- a/x\ntail é"
  "Lines that look like Org's or a diff's own, and no final newline.")

(ert-deftest lispm-session-record-a-cut-turn-reverts-from-the-file ()
  "Two edits and a file made, Emacs gone: the new Emacs reverts them from the session."
  (lispm-session-record-test--with
    (let* ((a (lispm-test-write-file project "a.txt" "one\ntwo\nthree\n"))
           (b (lispm-test-write-file project "b.el" ";;; b\n(defun b () 1)\n;;; end\n"))
           (c (expand-file-name "sub/c.txt" project))
           (buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "Change a and b, make c")
      (lispm-session-record-test--call
       buffer "e1" (list (lispm-edit-replace a "one\ntwo AGENT\nthree\n" :save t)
                         (lispm-edit-replace a "one\ntwo AGENT\nthree\nfour\n" :save t)))
      (lispm-session-record-test--call
       buffer "e2" (list (lispm-edit-replace b ";;; b\n;;; end\n" :save t)))
      (lispm-session-record-test--call
       buffer "e3" (list (lispm-edit-replace c lispm-session-record-test--odd :save t)))
      (lispm-session-insert-call buffer '(:id "s1" :name "run_shell" :arguments "{}"))
      (lispm-session-insert-approval buffer "s1" "Approve run_shell: make check")
      (let ((file (lispm-session-record-test--die buffer)))
        ;; The next Emacs: no buffer, no change record of the old one.
        (dolist (f (list a b c))
          (let ((kill-buffer-query-functions nil))
            (kill-buffer (find-buffer-visiting f))))
        (let* ((buffer (lispm-session-open file))
               (text (with-current-buffer buffer (buffer-string))))
          (should (lispm-session-end-cut-turn buffer))
          (should (string-search "**** Changes\n#+begin_src diff\n--- a/a.txt\n+++ b/a.txt\n\
@@ -2,1 +2,1 @@\n-two\n+two AGENT\n" text))
          (should (string-search "--- /dev/null\n+++ b/sub/c.txt\n" text))
          ;; The record is no part of the conversation.
          (should-not (cl-some (lambda (m) (string-search "two AGENT" (or (plist-get m :content) "")))
                               (lispm-session-messages buffer)))
          (let ((changes (lispm-session-turn-changes buffer 1)))
            (should (equal (mapcar (lambda (c) (plist-get c :file)) changes) (list a a b c)))
            (should (equal (plist-get (nth 3 changes) :new) lispm-session-record-test--odd))
            (should (plist-get (nth 3 changes) :created))
            ;; The user's own edit elsewhere stays.
            (lispm-test-write-file project "a.txt" "zero\none\ntwo AGENT\nthree\nfour\n")
            (should (= 3 (lispm-turn-revert-recorded changes))))
          (should (equal (lispm-test-read-file a) "zero\none\ntwo\nthree\n"))
          (should (equal (lispm-test-read-file b) ";;; b\n(defun b () 1)\n;;; end\n"))
          (should-not (file-exists-p c)))))))

(ert-deftest lispm-session-record-a-conflict-changes-nothing ()
  "The user changed a line the turn wrote: the revert names it and changes nothing."
  (lispm-session-record-test--with
    (let* ((a (lispm-test-write-file project "a.txt" "one\ntwo\n"))
           (b (lispm-test-write-file project "b.txt" "x\n"))
           (buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "Change a and b")
      (lispm-session-record-test--call
       buffer "e1" (list (lispm-edit-replace a "one\ntwo AGENT\n" :save t)
                         (lispm-edit-replace b "x AGENT\n" :save t)))
      (let* ((buffer (lispm-session-open (lispm-session-record-test--die buffer)))
             (changes (lispm-session-turn-changes buffer 1)))
        (with-current-buffer (find-file-noselect b)
          (goto-char (point-min))
          (insert "USER "))
        (let ((err (should-error (lispm-turn-revert-recorded changes)
                                 :type 'lispm-revert-conflict)))
          (should (equal (plist-get (car (nth 2 err)) :file) b)))
        (should (equal (lispm-test-read-file a) "one\ntwo AGENT\n"))
        (should (equal (with-current-buffer (find-file-noselect b) (buffer-string))
                       "USER x AGENT\n"))))))

(ert-deftest lispm-session-record-a-shell-call-reverts-from-the-file ()
  "What a shell call did on disk (a file changed, one deleted) is recorded and reverted."
  (lispm-session-record-test--with
    (let* ((a (lispm-test-write-file project "a.txt" "1\n2\n3\n4\n"))
           (gone (lispm-test-write-file project "gone.txt" "keep me\n"))
           (buffer (lispm-session-create project))
           (snapshot (lispm-edit-snapshot project)))
      (lispm-session-begin-turn buffer "Run the script")
      (sleep-for 0.01)
      (lispm-test-write-file project "a.txt" "1\n3\n4\n")
      (delete-file gone)
      (lispm-session-record-test--call buffer "s1" (lispm-edit-snapshot-changes snapshot))
      (let* ((buffer (lispm-session-open (lispm-session-record-test--die buffer)))
             (changes (lispm-session-turn-changes buffer 1)))
        (should (= 2 (length changes)))
        (should (= 2 (lispm-turn-revert-recorded changes)))
        (should (equal (lispm-test-read-file a) "1\n2\n3\n4\n"))
        (should (equal (lispm-test-read-file gone) "keep me\n"))))))

(ert-deftest lispm-session-record-too-big-is-named ()
  "A change past the limit is recorded as not kept; reverting it is a conflict."
  (lispm-session-record-test--with
    (let* ((a (lispm-test-write-file project "a.txt" "x\n"))
           (buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "Write a lot")
      (lispm-session-record-test--call
       buffer "e1" (list (lispm-edit-replace
                          a (make-string (1+ lispm-session-result-limit) ?y) :save t)))
      (let* ((buffer (lispm-session-open (lispm-session-record-test--die buffer)))
             (changes (lispm-session-turn-changes buffer 1)))
        (should (plist-get (car changes) :lost))
        (should (< (buffer-size buffer) 8000))
        (should-error (lispm-turn-revert-recorded changes) :type 'lispm-revert-conflict)))))

;; A turn whose call waited on a request is made again when resumed:
;; its revert takes back what it did in the Emacs before, too.
(ert-deftest lispm-session-record-a-rebuilt-turn-reverts-the-earlier-edits ()
  "The turn rebuilt around a waiting ask reverts the edit made before Emacs died."
  (lispm-session-record-test--with
    (let* ((a (lispm-test-write-file project "a.txt" "one\n"))
           (buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "Edit a, then ask")
      (lispm-session-record-test--call
       buffer "e1" (list (lispm-edit-replace a "one AGENT\n" :save t)))
      (lispm-session-insert-call buffer '(:id "q1" :name "ask_agent" :arguments "{}"))
      (lispm-session-record-request buffer "q1" "R7")
      (let* ((buffer (lispm-session-open (lispm-session-record-test--die buffer)))
             (waiting (lispm-session-waiting-step buffer))
             (turn (lispm-turn-rebuild nil buffer waiting "scripted")))
        (should (equal (lispm-turn-waiting-requests turn) '("R7")))
        (should (= 1 (lispm-turn-revert turn)))
        (should (equal (lispm-test-read-file a) "one\n"))))))

(provide 'lispm-session-record-test)
;;; lispm-session-record-test.el ends here
