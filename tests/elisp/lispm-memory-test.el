;;; lispm-memory-test.el --- The own agent's memory: Org files in git  -*- lexical-binding: t; -*-

;;; Commentary:

;; The remember tool writes a fact to the user's or the project's Org
;; file in the sessions repository, and the commit follows; the
;; prompt's part is bounded and ordered (relevant, then newest); a
;; buffer visiting the file keeps the user's unsaved edits; secrets are
;; withheld; bad facts are refused or made harmless to the file.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-test-fixtures)
(require 'lispm-own-agent)
(require 'lispm-memory)

(defmacro lispm-memory-test--with (&rest body)
  "Run BODY with a sessions repository of its own and an agent in a project.
`folder' is the project's root (it has a .git), `sessions' the
sessions folder and `agent' an actor working in the project."
  (declare (indent 0) (debug t))
  `(lispm-test-in-folder
     (let* ((sessions (file-name-as-directory
                       (file-truename (make-temp-file "lispm-memory-sessions" t))))
            (lispm-sessions-directory sessions)
            (lispm-sessions--queues (make-hash-table :test #'equal))
            (lispm-memory--cache (make-hash-table :test #'equal))
            (text-quoting-style 'grave))
       (make-directory (expand-file-name ".git" folder))
       (unwind-protect
           (lispm-test-with-agent (agent :folder folder :name "emacs")
             (ignore agent)
             ,@body)
         (lispm-sessions-wait-for-commits 30)
         (lispm-sessions-stop)
         (lispm-test-remove-folder sessions)))))

(defun lispm-memory-test--remember (agent &rest args)
  "Call the remember tool for AGENT with ARGS, a plist; return the result."
  (lispm-tools-call "remember" agent args 30))

(defun lispm-memory-test--git (directory &rest args)
  "Return the output of git with ARGS in DIRECTORY."
  (with-temp-buffer
    (let ((default-directory directory))
      (apply #'call-process "git" nil t nil args)
      (buffer-string))))

(ert-deftest lispm-memory-test-the-tool-writes-and-commits ()
  "A fact goes to the chosen file, as an Org heading, and is committed."
  (lispm-memory-test--with
    (let ((result (lispm-memory-test--remember agent :fact "The user's name is Ada."
                                               :scope "user")))
      (should (plist-get result :ok))
      (should (string-match-p "user.org" (plist-get result :text))))
    (should (plist-get (lispm-memory-test--remember
                        agent :fact "Tests run with make check.") :ok))
    (let* ((user (expand-file-name "memory/user.org" sessions))
           (project (lispm-memory-file 'project folder))
           (text (lispm-test-read-file user)))
      ;; Readable, stable and collision-free names.
      (should (string-prefix-p (expand-file-name "memory/projects/" sessions) project))
      (should (string-match-p (concat "/" (regexp-quote (file-name-nondirectory
                                                         (directory-file-name folder)))
                                      "-[0-9a-f]\\{8\\}\\.org\\'")
                              project))
      (should (equal project (lispm-memory-file 'project (expand-file-name "sub/" folder))))
      (should-not (equal project (lispm-memory-file 'project temporary-file-directory)))
      (should (string-match-p "^\\* The user's name is Ada\\.\n:PROPERTIES:\n:CREATED: +\\[[0-9]\\{4\\}-"
                              text))
      (should (string-match-p ":BY: +emacs" text))
      (should (string-search "* Tests run with make check." (lispm-test-read-file project)))
      (should-not (string-search "make check" text))
      ;; The entries, as read back.
      (should (equal (mapcar (lambda (e) (plist-get e :text)) (lispm-memory-entries user))
                     '("The user's name is Ada.")))
      ;; Committed in the sessions repository, under memory/.
      (should (lispm-sessions-wait-for-commits 30))
      (let ((files (lispm-memory-test--git sessions "ls-tree" "-r" "--name-only" "HEAD")))
        (should (string-match-p "^memory/user.org$" files))
        (should (string-match-p "^memory/projects/.*\\.org$" files)))
      (should (string-search "The user's name is Ada."
                             (lispm-memory-test--git sessions "show" "HEAD:memory/user.org")))
      (should-not (file-directory-p (expand-file-name "memory/.git" sessions))))
    ;; An unknown scope is the caller's error.
    (let ((result (lispm-memory-test--remember agent :fact "x y z" :scope "team")))
      (should-not (plist-get result :ok))
      (should (string-match-p "scope must be user or project" (plist-get result :error))))))

(ert-deftest lispm-memory-test-the-prompt-is-ordered-and-bounded ()
  "Relevant facts first, then the newest; cut at the limit with a note."
  (lispm-memory-test--with
    (let ((user (lispm-memory-file 'user folder)))
      (lispm-test-write-file
       (file-name-directory user) (file-name-nondirectory user)
       "#+TITLE: memory\n\n* Old fact about coffee\n:PROPERTIES:\n:CREATED:  [2020-01-01 Wed 10:00]\n:END:\n\
* The user's name is Ada\n:PROPERTIES:\n:CREATED:  [2021-01-01 Fri 10:00]\n:END:\n\
* Newest fact about tea\n:PROPERTIES:\n:CREATED:  [2022-01-01 Sat 10:00]\n:END:\n\
* A fact the user wrote, no time\nwith a body line\n")
      (lispm-memory-add 'project folder "The project uses tabs.")
      ;; No query: newest first; a fact without a time is the oldest.
      (let ((texts (mapcar (lambda (e) (plist-get e :text)) (lispm-memory-ranked folder))))
        (should (equal texts '("The project uses tabs." "Newest fact about tea"
                               "The user's name is Ada" "Old fact about coffee"
                               "A fact the user wrote, no time with a body line"))))
      ;; A query: the facts sharing its words first.
      (let ((texts (mapcar (lambda (e) (plist-get e :text))
                           (lispm-memory-ranked folder "What is my name?"))))
        (should (equal (car texts) "The user's name is Ada")))
      (let ((prompt (lispm-memory-prompt-text folder "coffee please")))
        (should (string-prefix-p "- (user, [2020-01-01 Wed 10:00]) Old fact about coffee" prompt))
        (should (string-search "- (project, [" prompt)))
      ;; Bounded: whole lines only, and a note of what was left out.
      (let* ((lispm-memory-prompt-limit 100)
             (prompt (lispm-memory-prompt-text folder)))
        (should (< (length prompt) 200))
        (should (string-match-p "[0-9]+ more remembered facts left out, past 100 characters"
                                prompt)))
      ;; In the own agent's system prompt; none: no memory part.
      (let ((own (lispm-own-agent--make :name "emacs" :kind 'lispm :folder folder
                                        :state 'running)))
        (should (string-search "What you remember from earlier sessions"
                               (lispm-own-agent-system-prompt own)))
        (should (string-search "The user's name is Ada" (lispm-own-agent-system-prompt own)))
        (delete-file user)
        (delete-file (lispm-memory-file 'project folder))
        (should-not (string-search "What you remember" (lispm-own-agent-system-prompt own)))))))

(ert-deftest lispm-memory-test-a-visiting-buffer-keeps-the-users-edits ()
  "Written through the buffer: its unsaved edits kept; its edits re-read."
  (lispm-memory-test--with
    (lispm-memory-add 'user folder "First fact.")
    (let* ((file (lispm-memory-file 'user folder))
           (buffer (find-file-noselect file)))
      (unwind-protect
          (progn
            (with-current-buffer buffer
              (goto-char (point-max))
              (insert "* Typed by the user, not saved\n"))
            ;; The prompt sees the buffer's text at once.
            (should (string-search "Typed by the user" (lispm-memory-prompt-text folder)))
            (should (plist-get (lispm-memory-test--remember agent :fact "Second fact."
                                                            :scope "user")
                               :ok))
            (with-current-buffer buffer
              (should-not (buffer-modified-p))
              (should (string-search "* Typed by the user, not saved\n* Second fact."
                                     (buffer-string))))
            (should (string-search "Typed by the user" (lispm-test-read-file file)))
            ;; Edited on disk behind an unmodified buffer: the disk's text wins.
            (with-temp-file file
              (insert "* Rewritten on disk\n"))
            (should (string-search "Rewritten on disk" (lispm-memory-prompt-text folder)))
            (lispm-memory-add 'user folder "Third fact.")
            (let ((text (lispm-test-read-file file)))
              (should (string-prefix-p "* Rewritten on disk\n* Third fact." text))
              (should (equal text (with-current-buffer buffer (buffer-string))))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(ert-deftest lispm-memory-test-secrets-are-withheld ()
  "A known secret never reaches the file, nor the prompt."
  (lispm-memory-test--with
    (cl-letf (((symbol-function 'lispm-secrets-known)
               (lambda () '(("sk-test-0123456789abcdef" . "OPENAI_API_KEY")))))
      (should (plist-get (lispm-memory-test--remember
                          agent :fact "The staging key is sk-test-0123456789abcdef.")
                         :ok))
      (let ((text (lispm-test-read-file (lispm-memory-file 'project folder))))
        (should-not (string-search "sk-test-0123456789abcdef" text))
        (should (string-search "secret withheld" text)))
      ;; Typed in by the user: withheld from the prompt still.
      (lispm-test-write-file (lispm-memory-directory) "user.org"
                             "* My key: sk-test-0123456789abcdef\n")
      (let ((prompt (lispm-memory-prompt-text folder)))
        (should-not (string-search "sk-test-0123456789abcdef" prompt))
        (should (string-search "My key: [secret withheld" prompt))))))

(ert-deftest lispm-memory-test-bad-facts ()
  "Huge, empty or control characters: refused; Org structure: made one line."
  (lispm-memory-test--with
    (let ((file (lispm-memory-file 'project folder)))
      (dolist (case `((,(make-string 5000 ?x) . "more than 1000 (`lispm-memory-entry-limit')")
                      (,(make-string 1500 ?x) . "more than 1000")
                      ("" . "the fact is empty")
                      ("  \n\t " . "the fact is empty")
                      ("bell \a here" . "control character (U+0007)")
                      ("nul \0 here" . "control character (U+0000)")))
        (let ((result (lispm-memory-test--remember agent :fact (car case))))
          (should-not (plist-get result :ok))
          (should (string-search (cdr case) (plist-get result :error)))))
      (should-not (file-exists-p file))
      (let ((result (lispm-memory-test--remember agent :fact 42)))
        (should-not (plist-get result :ok)))
      ;; Headings and drawers injected: one line, one heading.
      (should (plist-get (lispm-memory-test--remember
                          agent :fact "Line one\n* Injected heading\n:PROPERTIES:\n\
:CREATED: [1999-01-01]\n:END:\r\n** deeper\u2028last")
                         :ok))
      (let* ((text (lispm-test-read-file file))
             (entries (lispm-memory-entries file)))
        (should (= (length entries) 1))
        (should (equal (plist-get (car entries) :text)
                       "Line one * Injected heading :PROPERTIES: :CREATED: [1999-01-01] \
:END: ** deeper last"))
        (should-not (equal (plist-get (car entries) :stamp) "[1999-01-01]"))
        (with-temp-buffer
          (insert text)
          (goto-char (point-min))
          (should (= (how-many "^\\*") 1))
          (should (= (how-many "^:PROPERTIES:") 1))))
      ;; The file's bound: a clear error, the file unchanged.
      (let* ((lispm-memory-file-limit (+ (length (lispm-test-read-file file)) 50))
             (before (lispm-test-read-file file))
             (result (lispm-memory-test--remember agent :fact (make-string 200 ?y))))
        (should-not (plist-get result :ok))
        (should (string-search "`lispm-memory-file-limit'" (plist-get result :error)))
        (should (equal before (lispm-test-read-file file)))))))

;; The approval shows the change; a bad fact fails before anyone is asked.
(ert-deftest lispm-memory-test-the-target-is-the-change ()
  "The remember tool's target: no files of the agent's, the memory file's diff."
  (lispm-memory-test--with
    (let ((target (lispm-tool-target "remember" agent '(:fact "Tabs, not spaces."))))
      (should (eq (plist-get target :kind) 'remember))
      (should (null (plist-get target :files)))
      (should (string-match-p "^\\+\\* Tabs, not spaces\\.$" (plist-get target :diff)))
      (should (string-search "memory/projects/" (plist-get target :diff)))
      (should-not (file-exists-p (lispm-memory-file 'project folder))))
    (should-error (lispm-tool-target "remember" agent '(:fact "")) :type 'lispm-tool-bad-args)))

(ert-deftest lispm-memory-test-the-user-visits-and-saves ()
  "`lispm-memory-visit': the file as Org, with its header; a save is committed."
  (lispm-memory-test--with
    (let* ((default-directory folder)
           (buffer (save-window-excursion (lispm-memory-visit))))
      (unwind-protect
          (with-current-buffer buffer
            (should (equal buffer-file-name (lispm-memory-file 'project folder)))
            (should (derived-mode-p 'org-mode))
            (should (string-prefix-p "#+TITLE: LispM's memory: " (buffer-string)))
            (goto-char (point-max))
            (insert "* Written by the user\n")
            (save-buffer)
            (should (lispm-sessions-wait-for-commits 30))
            (should (string-search "* Written by the user"
                                   (lispm-memory-test--git
                                    sessions "show"
                                    (concat "HEAD:" (file-relative-name buffer-file-name
                                                                        sessions)))))
            (should (equal (lispm-memory-test--git sessions "log" "-1" "--format=%s")
                           "The user edited the memory\n")))
        (kill-buffer buffer)))
    (let ((buffer (save-window-excursion (lispm-memory-visit t))))
      (should (equal (buffer-file-name buffer) (lispm-memory-file 'user)))
      (kill-buffer buffer))))

(ert-deftest lispm-memory-test-the-kind-and-roles ()
  "The remember kind: allowed by the default role, denied to reviewers and testers."
  (should (assq 'remember lispm-policy-kind-alist))
  (should (eq (lispm-tool-kind (lispm-tool-get "remember")) 'remember))
  (lispm-test-with-agent (codex :kind 'codex)
    (let ((lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t)))
      (should (eq (lispm-policy-decide codex 'default 'remember nil) 'allow)))
    (let ((lispm-policy-roles nil))
      (should (eq (lispm-policy-decide codex 'default 'remember nil) 'allow))
      (should (eq (lispm-policy-decide codex 'reviewer 'remember nil) 'deny))
      (should (eq (lispm-policy-decide codex 'tester 'remember nil) 'deny)))))

(provide 'lispm-memory-test)
;;; lispm-memory-test.el ends here
