;;; lispm-skills-test.el --- Tests of skills and of trusting projects  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each test has a user skills folder, a project with `.lispm/skills/',
;; and a trust file of its own, all temporary.  The skills' code sets
;; `lispm-skills-test--effect' and defines tools: the tests check
;; whether that happened.  Then the skills an agent writes with
;; `write_skill'.

;;; Code:

(require 'ert)
(require 'lispm-skills)
(require 'lispm-calls)
(require 'lispm-test-fixtures)

(defvar lispm-skills-test--effect nil
  "Set by the test skills' code when it runs.")

(defconst lispm-skills-test--greet
  "#+title: Greeting
#+description: Greet people in the house style.

* How to greet

Call the =lispm_test_hello= tool with the person's name.

#+begin_src emacs-lisp
(setq lispm-skills-test--effect 'greet)
(lispm-define-tool lispm-test-hello ((who string \"Whom to greet.\"))
  \"Greet WHO.\"
  :kind 'message
  (format \"Hello, %s!\" who))
#+end_src

#+begin_src emacs-lisp :eval no
(lispm_test_hello \"example\")
#+end_src

Never greet twice.
"
  "A project skill whose code has a side effect and defines a tool.")

(defmacro lispm-skills-test--fixture (&rest body)
  "Run BODY with `root' (a temporary folder), `project', `user' and `agent'.
The project has `.lispm/skills/'; the agent works in the project."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-skills-test" t))))
          (project (file-name-as-directory (expand-file-name "project" root)))
          (user (file-name-as-directory (expand-file-name "user-skills" root)))
          (lispm-skills-directories (list user))
          (lispm-trust-file (expand-file-name "config/lispm/trust.eld" root))
          (lispm-tools lispm-tools)
          (lispm-skills-test--effect nil)
          (text-quoting-style 'grave))
     (make-directory (expand-file-name ".lispm/skills" project) t)
     (make-directory user t)
     (unwind-protect
         (lispm-test-with-agent (agent :folder project)
           (ignore agent)
           ,@body)
       (fmakunbound 'lispm-tool-lispm-test-hello)
       (fmakunbound 'lispm-tool-lispm-test-bye)
       ;; The buffers write_skill visited.
       (dolist (buffer (buffer-list))
         (when (and (buffer-file-name buffer)
                    (string-prefix-p root (buffer-file-name buffer)))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory root t))))

(defun lispm-skills-test--write (dir name text)
  "Write TEXT to the file NAME in DIR; return its name."
  (let ((file (expand-file-name name dir)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))
    file))

(defun lispm-skills-test--project-skill (project name text)
  "Write the skill NAME with TEXT into PROJECT's skills."
  (lispm-skills-test--write (expand-file-name ".lispm/skills" project)
                            (concat name ".org") text))

(ert-deftest lispm-skills-test-parse ()
  (lispm-skills-test--fixture
    (lispm-skills-test--project-skill project "greet" lispm-skills-test--greet)
    (let ((skill (lispm-skills-get "greet" project)))
      (should (equal (lispm-skill-title skill) "Greeting"))
      (should (equal (lispm-skill-description skill) "Greet people in the house style."))
      (should (eq (lispm-skill-source skill) 'project))
      (should (equal (lispm-skill-project skill) project))
      (should (equal (length (lispm-skill-code skill)) 1))
      (should (string-prefix-p "(setq lispm-skills-test--effect 'greet)"
                               (car (lispm-skill-code skill))))
      ;; The instructions: everything but the code; the example stays.
      (let ((text (lispm-skill-instructions skill)))
        (should (string-match-p "Call the =lispm_test_hello= tool" text))
        (should (string-match-p "Never greet twice\\." text))
        (should (string-match-p "(lispm_test_hello \"example\")" text))
        (should-not (string-match-p "setq\\|lispm-define-tool\\|#\\+begin_src emacs-lisp\n" text))))
    ;; Without #+title, the first heading; without #+description, the first line.
    (lispm-skills-test--write user "plain.org" "Some words first.\n* Plain Title\nMore.\n")
    (let ((skill (lispm-skills-get "plain" project)))
      (should (equal (lispm-skill-title skill) "Plain Title"))
      (should (equal (lispm-skill-description skill) "Some words first."))
      (should (eq (lispm-skill-source skill) 'user)))))

(ert-deftest lispm-skills-test-sources-and-search ()
  (lispm-skills-test--fixture
    (lispm-skills-test--project-skill project "greet" lispm-skills-test--greet)
    (lispm-skills-test--write user "greet.org" "#+title: The user's greet\n")
    (lispm-skills-test--write user "farewell.org" "#+title: Farewell\nSay goodbye nicely.\n")
    (let ((names (mapcar #'lispm-skill-name (lispm-skills-list project))))
      (should (member "greet" names))
      (should (member "farewell" names))
      ;; The apps' pages are skills too.
      (should (member "doctor" names))
      (should (= (length names) (length (delete-dups (copy-sequence names))))))
    ;; The project's skill wins over the user's of the same name.
    (should (eq (lispm-skill-source (lispm-skills-get "greet" project)) 'project))
    (should (eq (lispm-skill-source (lispm-skills-get "doctor" project)) 'app))
    ;; Without the project, the user's.
    (should (eq (lispm-skill-source (lispm-skills-get "greet" user)) 'user))
    ;; A subfolder of the project finds the project's skills.
    (make-directory (expand-file-name "src" project))
    (should (eq (lispm-skill-source (lispm-skills-get "greet" (expand-file-name "src" project)))
                'project))
    (let ((hits (lispm-skills-search "house style greeting" project)))
      (should (equal (plist-get (car hits) :name) "greet"))
      (should (equal (plist-get (car hits) :type) "skill")))
    (should (equal (mapcar (lambda (h) (plist-get h :name))
                           (lispm-skills-search "goodbye" project))
                   '("farewell")))
    ;; search_tools finds tools and skills together.
    (let ((text (plist-get (lispm-tools-call "search_tools" agent '(:query "psychotherapist doctor"))
                           :text)))
      (should (string-prefix-p "doctor (skill): How to talk to LispM's Doctor app" text)))))

(ert-deftest lispm-skills-test-untrusted-code-does-not-run ()
  (lispm-skills-test--fixture
    (lispm-skills-test--project-skill project "greet" lispm-skills-test--greet)
    (let ((result (lispm-skill-load "greet" agent)))
      (should (eq (plist-get result :loaded) nil))
      (should (string-match-p "Call the =lispm_test_hello= tool" (plist-get result :instructions)))
      (should (string-match-p
               (regexp-quote (format "type M-x lispm-trust-project RET %s RET"
                                     (directory-file-name project)))
               (plist-get result :reason)))
      (should (string-match-p "does not trust the project" (plist-get result :reason))))
    (should-not lispm-skills-test--effect)
    (should-not (lispm-tool-get "lispm_test_hello"))
    (should-not (fboundp 'lispm-tool-lispm-test-hello))
    ;; Through the tool: the instructions, and how to trust.
    (let ((result (lispm-tools-call "skill" agent '(:name "greet"))))
      (should (eq (plist-get result :ok) t))
      (should (string-match-p "Never greet twice\\.\n\n\\[The code of skill greet was not run"
                              (plist-get result :text)))
      (should (string-match-p "lispm-trust-project" (plist-get result :text))))
    (should-not lispm-skills-test--effect)
    (should-not (lispm-tool-get "lispm_test_hello"))))

(ert-deftest lispm-skills-test-trust-then-change ()
  (lispm-skills-test--fixture
    (let ((file (lispm-skills-test--project-skill project "greet" lispm-skills-test--greet)))
      (should (equal (lispm-trust-project project) '("skill greet")))
      ;; The trust file: private, readable, no temporary files left.
      (should (file-exists-p lispm-trust-file))
      (should (= (file-modes lispm-trust-file) #o600))
      (should (equal (directory-files (file-name-directory lispm-trust-file) nil
                                      directory-files-no-dot-files-regexp)
                     '("trust.eld")))
      (should (equal (car (car (lispm-trust-records))) file))
      (should (lispm-skills-trusted-p (lispm-skills-get "greet" project)))
      (let ((result (lispm-skill-load "greet" agent)))
        (should (eq (plist-get result :loaded) t))
        (should (equal (plist-get result :tools) ["lispm_test_hello"]))
        (should (json-serialize result :false-object :json-false :null-object nil)))
      (should (eq lispm-skills-test--effect 'greet))
      (should (eq (lispm-tool-kind (lispm-tool-get "lispm_test_hello")) 'message))
      (should (equal (lispm-tools-call "lispm_test_hello" agent '(:who "Ada"))
                     '(:ok t :text "Hello, Ada!")))
      ;; The code changes: it is no longer trusted, and does not run.
      (setq lispm-skills-test--effect nil)
      (lispm-skills-test--project-skill
       project "greet"
       (concat (string-replace "'greet)" "'changed)" lispm-skills-test--greet)
               "#+begin_src emacs-lisp\n(lispm-define-tool lispm-test-bye () \"Say bye.\" :kind 'message \"Bye\")\n#+end_src\n"))
      (should-not (lispm-skills-trusted-p (lispm-skills-get "greet" project)))
      (let ((result (lispm-skill-load "greet" agent)))
        (should (eq (plist-get result :loaded) nil))
        (should (string-match-p "it changed since the user trusted the project"
                                (plist-get result :reason)))
        (should (string-match-p "M-x lispm-trust-project RET" (plist-get result :reason))))
      (should-not lispm-skills-test--effect)
      (should-not (lispm-tool-get "lispm_test_bye"))
      ;; Only the instructions changed: still trusted.
      (lispm-trust-project (expand-file-name ".lispm" project))
      (lispm-skills-test--project-skill
       project "greet"
       (concat (string-replace "Never greet twice." "Greet once." (string-replace "'greet)" "'changed)" lispm-skills-test--greet))
               "#+begin_src emacs-lisp\n(lispm-define-tool lispm-test-bye () \"Say bye.\" :kind 'message \"Bye\")\n#+end_src\n"))
      (let ((result (lispm-skill-load "greet" agent)))
        (should (eq (plist-get result :loaded) t))
        (should (string-match-p "Greet once\\." (plist-get result :instructions)))
        (should (equal (plist-get result :tools) ["lispm_test_hello" "lispm_test_bye"])))
      (should (eq lispm-skills-test--effect 'changed))
      (should (lispm-tool-get "lispm_test_bye")))))

(ert-deftest lispm-skills-test-broken-lisp-runs-nothing ()
  (lispm-skills-test--fixture
    ;; A user's skill (trusted): a good first block, a broken second one.
    (lispm-skills-test--write
     user "broken.org"
     "#+title: Broken\nText.\n#+begin_src emacs-lisp\n(setq lispm-skills-test--effect 'first)\n#+end_src\n\
#+begin_src emacs-lisp\n;; fine\n(message \"ok\")\n\n(setq lispm-skills-test--effect 'second\n#+end_src\n")
    (let ((err (should-error (lispm-skill-load "broken" agent) :type 'lispm-skill-broken)))
      (should (string-match-p "Skill broken has broken Lisp in block 2, at the form on its line 4 .*nothing was run"
                              (cadr err))))
    (should-not lispm-skills-test--effect)
    (let ((result (lispm-tools-call "skill" agent '(:name "broken"))))
      (should (eq (plist-get result :ok) nil))
      (should (equal (plist-get result :condition) "lispm-skill-broken")))
    (should-not lispm-skills-test--effect)
    ;; Invalid syntax, and a block without its end.
    (lispm-skills-test--write
     user "bad-syntax.org"
     "#+begin_src emacs-lisp\n(setq lispm-skills-test--effect 'first)\n(foo . . bar)\n#+end_src\n")
    (should-error (lispm-skill-load "bad-syntax" agent) :type 'lispm-skill-broken)
    (lispm-skills-test--write
     user "unended.org"
     "#+begin_src emacs-lisp\n(setq lispm-skills-test--effect 'first)\n")
    (let ((err (should-error (lispm-skill-load "unended" agent) :type 'lispm-skill-broken)))
      (should (string-match-p "no #\\+end_src" (cadr err))))
    (should-not lispm-skills-test--effect)
    ;; A user's good skill runs without any trusting.
    (lispm-skills-test--write
     user "good.org" "#+begin_src elisp\n(setq lispm-skills-test--effect 'good)\n#+end_src\n")
    (should (eq (plist-get (lispm-skill-load "good" agent) :loaded) t))
    (should (eq lispm-skills-test--effect 'good))))

(ert-deftest lispm-skills-test-unknown-skill-and-apps ()
  (lispm-skills-test--fixture
    (let ((err (should-error (lispm-skill-load "nope" agent) :type 'lispm-skill-unknown)))
      (should (string-match-p "Unknown skill nope; the skills are: .*doctor" (cadr err))))
    (should (equal (plist-get (lispm-tools-call "skill" agent '(:name "nope")) :condition)
                   "lispm-skill-unknown"))
    (let ((result (lispm-skill-load "doctor" agent)))
      (should (eq (plist-get result :loaded) t))
      (should (string-match-p "Rogerian psychotherapist" (plist-get result :instructions))))
    ;; Trusting a folder without skills is the user's mistake.
    (should-error (lispm-trust-project root) :type 'user-error)))

;;; Writing skills

(defconst lispm-skills-test--written
  "#+title: Hello
* How to greet

Call =lispm_test_hello=.

#+begin_src emacs-lisp
(setq lispm-skills-test--effect 'written)
(lispm-define-tool lispm-test-hello ((who string \"Whom to greet.\"))
  \"Greet WHO.\"
  :kind 'message
  (format \"Hi, %s!\" who))
#+end_src
"
  "The text of a skill an agent writes: its code has a side effect.")

(defun lispm-skills-test--skill-file (project name)
  "Return the file of PROJECT's skill NAME."
  (expand-file-name (concat ".lispm/skills/" name ".org") project))

(ert-deftest lispm-skills-test-write-skill-names ()
  (lispm-skills-test--fixture
    (should (eq (lispm-tool-kind (lispm-tool-get "write_skill")) 'edit))
    (dolist (name '("../escape" "a b" "greet.org" "sub/greet" ".hidden" "grüß" "x\0y"))
      (let ((err (should-error (lispm-tool-target "write_skill" agent
                                                  (list :name name :text "Text.\n"))
                               :type 'lispm-tool-bad-args)))
        (should (string-match-p "cannot name a skill: use only letters, digits, - and _"
                                (cadr err))))
      ;; The body refuses it too, when called without its target.
      (should (equal (plist-get (lispm-tools-call "write_skill" agent
                                                  (list :name name :text "Text.\n"))
                                :condition)
                     "lispm-tool-bad-args")))
    (should (equal (directory-files (expand-file-name ".lispm/skills" project) nil
                                    directory-files-no-dot-files-regexp)
                   nil))
    (should-not (file-exists-p (expand-file-name "escape.org" root)))
    (let ((target (lispm-tool-target "write_skill" agent '(:name "My-skill_2" :text "Text.\n"))))
      (should (equal (plist-get target :files)
                     (list (lispm-skills-test--skill-file project "My-skill_2")))))))

(ert-deftest lispm-skills-test-write-skill-broken-lisp-refused-before-asking ()
  (lispm-skills-test--fixture
    (let* ((lispm-policy-roles '((default (read allow) (edit ask))))
           (lispm-approvals--pending nil)
           (asked nil) (outcomes nil)
           (text (concat lispm-skills-test--written
                         "#+begin_src emacs-lisp\n(setq lispm-skills-test--effect 'broken\n\
#+end_src\n")))
      (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
        (lispm-calls-invoke agent "write_skill" (list :name "hello" :text text)
                            (lambda (outcome) (push outcome outcomes))
                            :on-ask (lambda (approval) (push approval asked))))
      (should-not asked)
      (should-not (lispm-approvals-pending))
      (should (= (length outcomes) 1))
      (should (eq (car (plist-get (car outcomes) :condition)) 'lispm-skill-broken))
      (should (string-match-p "Skill hello has broken Lisp in block 2, at the form on its line 1 \
.*; nothing was written" (plist-get (car outcomes) :error)))
      (should-not (file-exists-p (lispm-skills-test--skill-file project "hello")))
      (should-not (find-buffer-visiting (lispm-skills-test--skill-file project "hello")))
      ;; A block without its end, through the body.
      (let ((result (lispm-tools-call "write_skill" agent
                                      '(:name "hello" :text "#+begin_src emacs-lisp\n(+ 1 2)\n"))))
        (should (equal (plist-get result :condition) "lispm-skill-broken"))
        (should (string-match-p "no #\\+end_src; nothing was written" (plist-get result :error))))
      (should-not (file-exists-p (lispm-skills-test--skill-file project "hello")))
      (should-not lispm-skills-test--effect))))

(ert-deftest lispm-skills-test-write-skill-asks-with-the-org-text-then-writes ()
  (lispm-skills-test--fixture
    (let* ((lispm-policy-roles '((default (read allow) (edit ask))))
           (lispm-approvals--pending nil)
           (file (lispm-skills-test--skill-file project "hello"))
           (asked nil) (outcomes nil))
      ;; No `.lispm/skills/' yet: it is made, and taken back with the file.
      (delete-directory (expand-file-name ".lispm" project) t)
      (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
        (lispm-calls-invoke agent "write_skill"
                            (list :name "hello" :text lispm-skills-test--written)
                            (lambda (outcome) (push outcome outcomes))
                            :on-ask (lambda (approval) (push approval asked)))
        (should (= (length asked) 1))
        (should-not outcomes)
        (should-not (file-exists-p file))
        (let ((target (lispm-approval-target (car asked))))
          (should (eq (plist-get target :kind) 'edit))
          (should (equal (plist-get target :tool) "write_skill"))
          (should (equal (plist-get target :files) (list file)))
          (should (equal (plist-get target :org) lispm-skills-test--written))
          (should (string-match-p "^\\+\\+\\+ b/\\.lispm/skills/hello\\.org$"
                                  (plist-get target :diff)))
          (should (string-search "+(setq lispm-skills-test--effect 'written)"
                                 (plist-get target :diff))))
        (lispm-approvals-allow (car asked)))
      (should (= (length outcomes) 1))
      (let ((outcome (car outcomes)))
        (should (eq (plist-get outcome :ok) t))
        (should (string-match-p "\\`Created \\.lispm/skills/hello\\.org ([0-9]+ characters)\\.  \
Nothing in it was run\\.  The skill tool (name hello) loads it, but its code runs only once \
the user has reviewed it and trusts the project (M-x lispm-trust-project)\\.\\'"
                                (plist-get outcome :text)))
        (should (equal (lispm-test-read-file file) lispm-skills-test--written))
        ;; One undo step; undoing the undo brings it back.
        (with-current-buffer (find-buffer-visiting file)
          (let ((last-command nil)) (undo))
          (should (equal (buffer-string) ""))
          (undo-boundary)
          (let ((last-command nil)) (undo))
          (should (equal (buffer-string) lispm-skills-test--written))
          (save-buffer))
        ;; Its change record takes it back, the folders made for it too.
        (let ((changes (plist-get outcome :changes)))
          (should (= (length changes) 1))
          (should (equal (lispm-change-file (car changes)) file))
          (should (= (lispm-edit-revert changes) 1)))
        (should-not (file-exists-p file))
        (should-not (file-exists-p (expand-file-name ".lispm" project))))
      (should-not lispm-skills-test--effect))))

(ert-deftest lispm-skills-test-writing-a-skill-runs-none-of-it ()
  (lispm-skills-test--fixture
    (let ((result (lispm-tools-call "write_skill" agent
                                    (list :name "hello" :text lispm-skills-test--written))))
      (should (eq (plist-get result :ok) t))
      (should (file-exists-p (lispm-skills-test--skill-file project "hello"))))
    (should-not lispm-skills-test--effect)
    (should-not (lispm-tool-get "lispm_test_hello"))
    ;; Loaded, untrusted: still nothing.
    (should (string-match-p "The code of skill hello was not run"
                            (plist-get (lispm-tools-call "skill" agent '(:name "hello")) :text)))
    (should-not lispm-skills-test--effect)
    (should-not (lispm-tool-get "lispm_test_hello"))
    ;; Trusted, then loaded: it runs.
    (lispm-trust-project project)
    (should-not lispm-skills-test--effect)
    (should (equal (plist-get (lispm-skill-load "hello" agent) :tools) ["lispm_test_hello"]))
    (should (eq lispm-skills-test--effect 'written))
    (should (equal (lispm-tools-call "lispm_test_hello" agent '(:who "Ada"))
                   '(:ok t :text "Hi, Ada!")))
    ;; Written again with the same code: trusted as it is, and said so.
    (setq lispm-skills-test--effect nil)
    (let ((result (lispm-tools-call
                   "write_skill" agent
                   (list :name "hello"
                         :text (string-replace "How to greet" "Greeting" lispm-skills-test--written)))))
      (should (string-match-p "Wrote \\.lispm/skills/hello\\.org .*its code is as the user \
trusted it, so it runs then\\." (plist-get result :text))))
    ;; New code: no longer trusted.
    (let ((result (lispm-tools-call
                   "write_skill" agent
                   (list :name "hello"
                         :text (string-replace "'written" "'rewritten" lispm-skills-test--written)))))
      (should (string-match-p "runs only once the user has reviewed it" (plist-get result :text))))
    (should-not (plist-get (lispm-skill-load "hello" agent) :loaded))
    (should-not lispm-skills-test--effect)
    ;; A skill without code needs no trust.
    (should (string-match-p "returns its instructions; it has no Lisp code\\."
                            (plist-get (lispm-tools-call "write_skill" agent
                                                         '(:name "plain" :text "* Just words\n"))
                                       :text)))))

(ert-deftest lispm-skills-test-write-skill-where ()
  (lispm-skills-test--fixture
    ;; An agent in a folder without skills writes them there.
    (let ((sub (file-name-as-directory (expand-file-name "elsewhere" root))))
      (make-directory sub)
      (lispm-test-with-agent (other :folder sub :name "other")
        (should (eq (plist-get (lispm-tools-call "write_skill" other
                                                 '(:name "mine" :text "Words.\n"))
                               :ok)
                    t))
        (should (file-exists-p (expand-file-name ".lispm/skills/mine.org" sub)))))
    ;; In a subfolder of a project with skills: they are outside its
    ;; folder, and a new `.lispm/skills/' would hide them.
    (let ((src (file-name-as-directory (expand-file-name "src" project))))
      (make-directory src)
      (lispm-test-with-agent (inner :folder src :name "inner")
        (let ((err (should-error (lispm-tool-target "write_skill" inner
                                                    '(:name "mine" :text "Words.\n"))
                                 :type 'lispm-tool-outside-folder)))
          (should (string-match-p "The project's skills are in .*outside the folder" (cadr err))))
        (should-not (file-exists-p (expand-file-name ".lispm" src)))))))

(provide 'lispm-skills-test)
;;; lispm-skills-test.el ends here
