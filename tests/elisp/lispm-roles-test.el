;;; lispm-roles-test.el --- Tests of roles as Org files and the stricter-of rule  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each test has a project folder, a user roles folder and a role cache
;; of its own, all temporary; LispM's shipped roles are the real ones.
;; The tests read role files (every part, broken ones, one name twice),
;; look roles up (project, user, shipped; a changed file read again),
;; decide with them through the policy (and `lispm-policy-roles' over
;; them), and check that a helper never does more than its caller: by
;; examples, and by a property over random role and caller policies.

;;; Code:

(require 'ert)
(require 'lispm-roles)
(require 'lispm-test-fixtures)

(defmacro lispm-roles-test--with-roles (&rest body)
  "Run BODY with a registry, no grants, the standard roles and no user roles.
In BODY, `folder' is a fresh project folder and `user' a fresh folder
of the user's roles (truenames, with a slash); the role cache is empty."
  (declare (indent 0) (debug t))
  `(let* ((lispm-agents-changed-hook (default-value 'lispm-agents-changed-hook))
          (lispm-policy--grants nil)
          (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
          (lispm-policy-default-role 'default)
          (lispm-roles--cache (make-hash-table :test #'equal))
          (folder (file-name-as-directory (file-truename (make-temp-file "lispm-roles-" t))))
          (user (file-name-as-directory (file-truename (make-temp-file "lispm-roles-user-" t))))
          (lispm-roles-directories (list user))
          (lispm-roles-from-projects t)
          (text-quoting-style 'grave)
          (warning-minimum-log-level :error)
          (warning-minimum-level :emergency))
     (unwind-protect
         (lispm-test-with-registry ,@body)
       (delete-directory folder t)
       (delete-directory user t))))

(defun lispm-roles-test--role-text (title policy &optional tools)
  "Return a role file's text: TITLE, POLICY rows (strings), TOOLS lines."
  (concat (if title (format "#+TITLE: %s\n" title) "")
          "#+DESCRIPTION: A test role.\n\n* System prompt\nYou test.\n\n* Tools\n"
          (or tools "all") "\n\n* Policy\n| kind | decision | paths |\n|-+-+-|\n"
          (mapconcat (lambda (row) (concat row "\n")) policy "")))

(defconst lispm-roles-test--full
  "#+title: Code checker
#+description: Checks code, writes notes.
#+startup: showall

Prose before the first heading is the page's, not the prompt's.

* System prompt
You check code.

** Style
Be brief.

* Tools
These are its tools:
- read_file
+ grep
1. write_file
# an Org comment

* Policy
What it may do:
| Kind | Decision | Paths               |
|------+----------+---------------------|
| read | allow    |                     |
| EDIT | Allow    | notes/** *.md       |
| edit | deny     |                     |
| shell| ask      |                     |

* Notes
A heading of its own is ignored.
"
  "A role file using every part of the format.")

;;; Reading role files

(ert-deftest lispm-roles-test-parse-every-part ()
  (lispm-roles-test--with-roles
    (let* ((file (lispm-test-write-file user "checker.org" lispm-roles-test--full))
           (role (lispm-roles-parse file 'user)))
      (should (eq (lispm-role-name role) (intern "Code checker")))
      (should (equal (lispm-role-description role) "Checks code, writes notes."))
      (should (equal (lispm-role-prompt role) "You check code.\n\n** Style\nBe brief."))
      (should (equal (lispm-role-tools role) '("read_file" "grep" "write_file")))
      (should (equal (lispm-role-rules role)
                     '((read allow) (edit allow ("notes/**" "*.md")) (edit deny) (shell ask))))
      (should (equal (lispm-role-file role) file))
      (should (eq (lispm-role-source role) 'user)))
    ;; No title: the file's name; `all' tools, as a word or an item.
    (let ((role (lispm-roles-parse "/x/helper.org" 'user
                                   (lispm-roles-test--role-text nil '("| eval | deny |")))))
      (should (eq (lispm-role-name role) 'helper))
      (should (eq (lispm-role-tools role) 'all))
      (should (equal (lispm-role-rules role) '((eval deny)))))
    (should (eq (lispm-role-tools (lispm-roles-parse "/x/h.org" 'user
                                                     (lispm-roles-test--role-text "h" nil "- all")))
                'all))
    ;; An empty table: no rules, so everything asks.
    (should (null (lispm-role-rules (lispm-roles-parse "/x/h.org" 'user
                                                       (lispm-roles-test--role-text "h" nil)))))))

(ert-deftest lispm-roles-test-malformed-files ()
  (lispm-roles-test--with-roles
    (pcase-dolist (`(,text ,line ,message)
                   `((,(lispm-roles-test--role-text "bad" '("| read | allow |" "| edti | allow |"))
                      14 "unknown kind `edti'")
                     (,(lispm-roles-test--role-text "bad" '("| edit | maybe |"))
                      13 "unknown decision `maybe' for edit")
                     (,(lispm-roles-test--role-text "bad" '("| edit | deny | a/** | x |"))
                      13 "three cells")
                     (,(lispm-roles-test--role-text "bad" '("| | |"))
                      13 "unknown kind")
                     (,(lispm-roles-test--role-text "bad" nil "- read_file grep")
                      8 "not a tool's name: \"read_file grep\"")
                     (,(lispm-roles-test--role-text "bad" nil "- grep\nall")
                      9 "`all' and tool names together")
                     ("#+TITLE: bad\n* System prompt\nHi.\n* Tools\nall\n"
                      1 "no \"* Policy\" heading")
                     ("* System prompt\n\n* Tools\nall\n* Policy\n"
                      1 "the \"* System prompt\" is empty")
                     ("* System prompt\nHi.\n* Tools\nall\n* Policy\n* Tools\n"
                      6 "a second \"* Tools\" heading")))
      (let ((err (should-error (lispm-roles-parse "/x/bad.org" 'user text)
                               :type 'lispm-role-broken)))
        (should (equal (nth 2 err) "/x/bad.org"))
        (should (equal (nth 3 err) line))
        (should (string-prefix-p (format "/x/bad.org:%d: " line) (lispm-error-message err)))
        (should (string-search message (lispm-error-message err)))))
    ;; In a folder, a broken file is skipped and named; the others stay;
    ;; the file is untouched.
    (let* ((broken-text (lispm-roles-test--role-text "reviewer" '("| edit | nope |")))
           (broken (lispm-test-write-file user "reviewer.org" broken-text))
           (good (lispm-test-write-file user "good.org" (lispm-roles-test--role-text "good" nil))))
      (should (equal (mapcar #'lispm-role-file
                             (cl-remove-if-not (lambda (role) (eq (lispm-role-source role) 'user))
                                               (lispm-roles-list folder)))
                     (list good)))
      (let ((errors (lispm-roles-broken folder)))
        (should (equal (mapcar (lambda (err) (nth 2 err)) errors) (list broken)))
        (should (string-search "unknown decision `nope'" (cadr (car errors)))))
      (should (equal (lispm-test-read-file broken) broken-text))
      ;; Its name falls to the next file of that name, LispM's reviewer.
      (should (eq (lispm-role-source (lispm-roles-get 'reviewer folder)) 'shipped))
      ;; A name only a broken file gives is an error, not the default role.
      (lispm-test-write-file user "lonely.org" (lispm-roles-test--role-text "lonely" '("| x | y |")))
      (should-error (lispm-roles-get "lonely" folder) :type 'lispm-role-broken)
      (let ((actor (lispm-test-add-actor :folder folder :role 'lonely)))
        (should-error (lispm-policy-decide actor 'lonely 'read nil) :type 'lispm-role-broken)))))

(ert-deftest lispm-roles-test-a-name-twice-first-wins ()
  (lispm-roles-test--with-roles
    (let ((first (lispm-test-write-file user "a.org" (lispm-roles-test--role-text "twin" '("| edit | deny |"))))
          (_second (lispm-test-write-file user "b.org" (lispm-roles-test--role-text "twin" '("| edit | allow |")))))
      (should (equal (lispm-role-file (lispm-roles-get 'twin folder)) first))
      (should (equal (cl-count 'twin (lispm-roles-list folder) :key #'lispm-role-name) 1))
      (should (equal (lispm-role-rules (lispm-roles-get "twin" folder)) '((edit deny)))))))

;;; Where roles come from

(ert-deftest lispm-roles-test-lookup-order ()
  (lispm-roles-test--with-roles
    (let* ((second-user (file-name-as-directory (make-temp-file "lispm-roles-user2-" t)))
           (lispm-roles-directories (list user second-user))
           (sub (expand-file-name "src/deep/" folder)))
      (unwind-protect
          (progn
            (make-directory sub t)
            ;; Nothing of the user's or the project's: LispM's own.
            (should (equal (mapcar #'lispm-role-name (lispm-roles-list sub))
                           '(default reviewer tester)))
            (should (eq (lispm-role-source (lispm-roles-get 'reviewer sub)) 'shipped))
            (should (equal (lispm-role-file (lispm-roles-get 'tester))
                           (expand-file-name "tester.org" lispm-roles-shipped-directory)))
            ;; The second user folder over LispM's, the first over the second.
            (lispm-test-write-file second-user "r.org"
                                   (lispm-roles-test--role-text "reviewer" '("| read | ask |")))
            (should (equal (lispm-role-rules (lispm-roles-get 'reviewer sub)) '((read ask))))
            (lispm-test-write-file user "r.org"
                                   (lispm-roles-test--role-text "reviewer" '("| read | deny |")))
            (should (equal (lispm-role-rules (lispm-roles-get 'reviewer sub)) '((read deny))))
            (should (eq (lispm-role-source (lispm-roles-get 'reviewer sub)) 'user))
            ;; The project's, found from a folder below its root, over all.
            (lispm-test-write-file folder ".lispm/roles/reviewer.org"
                                   (lispm-roles-test--role-text "reviewer" '("| read | allow |")))
            (let ((role (lispm-roles-get 'reviewer sub)))
              (should (eq (lispm-role-source role) 'project))
              (should (equal (lispm-role-rules role) '((read allow)))))
            ;; Unless projects' roles are turned on, they do not count.
            (let ((lispm-roles-from-projects nil))
              (should (eq (lispm-role-source (lispm-roles-get 'reviewer sub)) 'user)))
            ;; Elsewhere, the project's roles do not count.
            (should (eq (lispm-role-source (lispm-roles-get 'reviewer user)) 'user))
            (should (eq (lispm-role-source (lispm-roles-get 'reviewer)) 'user))
            (should (equal (mapcar #'lispm-role-name (lispm-roles-list sub))
                           '(reviewer default tester)))
            (should-not (lispm-roles-get 'no-such-role sub)))
        (delete-directory second-user t)))))

(ert-deftest lispm-roles-test-changed-file-is-read-again ()
  (lispm-roles-test--with-roles
    (let ((file (lispm-test-write-file user "r.org" (lispm-roles-test--role-text "r" '("| edit | deny |"))))
          (then 1700000000))
      (set-file-times file then)
      (should (equal (lispm-role-rules (lispm-roles-get 'r)) '((edit deny))))
      ;; The same modification time: the cached role, not the new text.
      (lispm-test-write-file user "r.org" (lispm-roles-test--role-text "r" '("| edit | allow |")))
      (set-file-times file then)
      (should (equal (lispm-role-rules (lispm-roles-get 'r)) '((edit deny))))
      ;; A new one: read again, broken and then mended.
      (set-file-times file 1700000001)
      (should (equal (lispm-role-rules (lispm-roles-get 'r)) '((edit allow))))
      (lispm-test-write-file user "r.org" (lispm-roles-test--role-text "r" '("| edit | often |")))
      (set-file-times file 1700000002)
      (should-error (lispm-roles-get 'r) :type 'lispm-role-broken)
      (lispm-test-write-file user "r.org" (lispm-roles-test--role-text "r" '("| edit | ask |")))
      (set-file-times file 1700000003)
      (should (equal (lispm-role-rules (lispm-roles-get 'r)) '((edit ask)))))))

;;; The policy, with roles from files

(ert-deftest lispm-roles-test-policy-uses-file-roles ()
  (lispm-roles-test--with-roles
    (let* ((actor (lispm-test-add-actor :folder folder :role 'writer))
           (doc (list :files (list (expand-file-name "docs/a.md" folder))))
           (src (list :files (list (expand-file-name "src/a.el" folder)))))
      ;; No role file `writer' yet: the default role's rules.
      (should (eq (lispm-policy-decide actor 'writer 'edit doc) 'ask))
      (should (eq (lispm-policy-decide actor 'writer 'read nil) 'allow))
      (lispm-test-write-file folder ".lispm/roles/writer.org"
                             (lispm-roles-test--role-text
                              "writer" '("| edit | allow | docs/** |" "| edit | deny |")))
      (should (eq (lispm-policy-decide actor 'writer 'edit doc) 'allow))
      (should (eq (lispm-policy-decide actor 'writer 'edit src) 'deny))
      ;; A kind the file's rules do not name asks: not the default's allow.
      (should (eq (lispm-policy-decide actor 'writer 'read nil) 'ask))
      (should (equal (lispm-policy-rules 'writer folder)
                     '((edit allow ("docs/**")) (edit deny))))
      ;; The project's role is not seen from elsewhere.
      (should (equal (lispm-policy-rules 'writer user) (lispm-policy-rules 'default)))
      ;; `lispm-policy-roles' names the role: it wins over the file.
      (let ((lispm-policy-roles (cons '(writer (edit ask)) lispm-policy-roles)))
        (should (eq (lispm-policy-decide actor 'writer 'edit doc) 'ask))
        (should (eq (lispm-policy-decide actor 'writer 'edit src) 'ask)))
      ;; Without `default' in `lispm-policy-roles', default.org is the default.
      (let ((lispm-policy-roles nil)
            (other (lispm-test-add-actor :folder folder :name "other")))
        (should (equal (lispm-policy-rules nil folder)
                       (cdr (assq 'default (eval (car (get 'lispm-policy-roles 'standard-value))
                                                 t)))))
        (should (eq (lispm-policy-decide other nil 'edit src) 'ask))
        (should (eq (lispm-policy-decide other 'reviewer 'edit src) 'deny))))))

(ert-deftest lispm-roles-test-shipped-roles-decisions ()
  (lispm-roles-test--with-roles
    (let ((actor (lispm-test-add-actor :folder folder))
          (standard (cdr (assq 'default lispm-policy-roles))))
      (cl-flet ((decide (role kind &optional file)
                  (lispm-policy-decide actor role kind
                                       (and file (list :files (list (expand-file-name file folder)))))))
        ;; default.org has today's default rules, and every tool.
        (should (equal (lispm-role-rules (lispm-roles-get 'default)) standard))
        (should (eq (lispm-role-tools (lispm-roles-get 'default)) 'all))
        (should (string-search "approval" (lispm-role-prompt (lispm-roles-get 'default))))
        ;; The reviewer reads and talks; never edits, runs or evaluates.
        (should (eq (decide 'reviewer 'read "a.el") 'allow))
        (should (eq (decide 'reviewer 'introspect) 'allow))
        (should (eq (decide 'reviewer 'message) 'allow))
        (should (eq (decide 'reviewer 'edit "a.el") 'deny))
        (should (eq (decide 'reviewer 'edit "tests/a.el") 'deny))
        (should (eq (decide 'reviewer 'shell) 'deny))
        (should (eq (decide 'reviewer 'eval) 'deny))
        (let ((tools (lispm-role-tools (lispm-roles-get 'reviewer))))
          (should (member "read_file" tools))
          (should (member "describe_function" tools))
          (should (member "reply" tools))
          (dolist (tool '("edit_file" "write_file" "run_shell" "eval_elisp" "write_skill"))
            (should-not (member tool tools))))
        ;; The tester writes under test folders only; asks to run commands.
        (should (eq (decide 'tester 'read "src/a.el") 'allow))
        (should (eq (decide 'tester 'edit "tests/a_test.el") 'allow))
        (should (eq (decide 'tester 'edit "tests/deep/b.py") 'allow))
        (should (eq (decide 'tester 'edit "test/c.el") 'allow))
        (should (eq (decide 'tester 'edit "src/a.el") 'deny))
        (should (eq (decide 'tester 'edit "src/tests/a.el") 'deny))
        (should (eq (decide 'tester 'edit "/elsewhere/tests/a.el") 'deny))
        (should (eq (decide 'tester 'shell) 'ask))
        (should (eq (decide 'tester 'eval) 'deny))
        (let ((tools (lispm-role-tools (lispm-roles-get 'tester))))
          (should (member "write_file" tools))
          (should (member "run_shell" tools))
          (should-not (member "eval_elisp" tools)))))))

;;; Helpers: never more than their caller

(ert-deftest lispm-roles-test-stricter ()
  (pcase-dolist (`(,a ,b ,stricter)
                 '((allow allow allow) (allow ask ask) (allow deny deny)
                   (ask allow ask) (ask ask ask) (ask deny deny)
                   (deny allow deny) (deny ask deny) (deny deny deny)))
    (should (eq (lispm-policy-stricter a b) stricter)))
  (should-error (lispm-policy-stricter 'allow 'maybe) :type 'lispm-policy-error))

(ert-deftest lispm-roles-test-helper-examples ()
  (lispm-roles-test--with-roles
    (let* ((lispm-policy-roles (append '((no-shell (read allow) (edit allow) (shell deny)))
                                       lispm-policy-roles))
           (caller (lispm-test-add-actor :name "caller" :folder folder :role 'no-shell))
           (plain (lispm-test-add-actor :name "plain" :folder folder))
           (src (list :files (list (expand-file-name "src/a.el" folder))))
           (test (list :files (list (expand-file-name "tests/a.el" folder)))))
      ;; A caller that denies shell: the tester's shell, which would ask, is denied.
      (should (eq (lispm-policy-decide caller 'tester 'shell nil) 'ask))
      (should (eq (lispm-roles-helper-decision 'tester caller 'shell nil) 'deny))
      ;; Its edits under tests/: both allow; elsewhere the role denies.
      (should (eq (lispm-roles-helper-decision 'tester caller 'edit test) 'allow))
      (should (eq (lispm-roles-helper-decision "tester" caller 'edit src) 'deny))
      ;; The default caller asks for edits: so does its tester, even under tests/.
      (should (eq (lispm-roles-helper-decision 'tester plain 'edit test) 'ask))
      ;; The caller's session grants are its own.
      (lispm-policy-grant plain 'edit)
      (should (eq (lispm-policy-decide plain nil 'edit test) 'allow))
      (should (eq (lispm-roles-helper-decision 'tester plain 'edit test) 'ask))
      (should (eq (lispm-roles-helper-decision 'default plain 'edit src) 'ask))
      ;; A helper's path patterns are relative to its own folder, within the caller's.
      (make-directory (expand-file-name "src/" folder) t)
      (let ((helper (lispm-test-add-actor :name "helper" :folder (expand-file-name "src/" folder)
                                          :role 'tester))
            (outside (lispm-test-add-actor :name "outside" :folder user :role 'tester)))
        (should (eq (lispm-roles-helper-decision
                     'tester caller 'edit
                     (list :files (list (expand-file-name "src/tests/a.el" folder)))
                     helper)
                    'allow))
        (should (eq (lispm-roles-helper-decision 'tester caller 'edit test helper) 'deny))
        (should (eq (lispm-roles-helper-decision 'tester caller 'read nil outside) 'deny)))
      (should-error (lispm-roles-helper-decision 'no-such-role caller 'read nil)
                    :type 'lispm-role-unknown))))

(ert-deftest lispm-roles-test-helper-folder ()
  (lispm-roles-test--with-roles
    (let ((caller (lispm-test-add-actor :folder folder))
          (sub (expand-file-name "sub/" folder))
          (link (expand-file-name "link" folder)))
      (make-directory sub)
      (make-symbolic-link user link)
      (should (lispm-policy-helper-folder-ok-p caller folder))
      (should (lispm-policy-helper-folder-ok-p caller (directory-file-name folder)))
      (should (lispm-policy-helper-folder-ok-p caller sub))
      (should (lispm-policy-helper-folder-ok-p caller (expand-file-name "sub/../sub/x" folder)))
      (should-not (lispm-policy-helper-folder-ok-p caller user))
      (should-not (lispm-policy-helper-folder-ok-p caller (expand-file-name ".." folder)))
      (should-not (lispm-policy-helper-folder-ok-p caller (concat (directory-file-name folder) "x")))
      ;; A link out of the folder is outside.
      (should-not (lispm-policy-helper-folder-ok-p caller link))
      (should-not (lispm-policy-helper-folder-ok-p caller nil)))))

(ert-deftest lispm-roles-test-helper-tools ()
  (lispm-roles-test--with-roles
    (let* ((plain (lispm-test-add-actor :name "plain" :folder folder))
           (reviewer (lispm-test-add-actor :name "reviewer" :folder folder :role 'reviewer))
           (reviewer-tools (lispm-role-tools (lispm-roles-get 'reviewer)))
           (tester-tools (lispm-role-tools (lispm-roles-get 'tester))))
      ;; A default caller has every tool: the role's own.
      (should (equal (lispm-roles-helper-tools 'reviewer plain) reviewer-tools))
      (should (eq (lispm-roles-helper-tools 'default plain) 'all))
      ;; A reviewer's tester gets no edit or shell tool: only what both have.
      (let ((tools (lispm-roles-helper-tools 'tester reviewer)))
        (should (equal tools (cl-remove-if-not (lambda (tool) (member tool reviewer-tools))
                                               tester-tools)))
        (should (member "read_file" tools))
        (dolist (tool '("edit_file" "write_file" "run_shell"))
          (should (member tool tester-tools))
          (should-not (member tool tools))))
      ;; A reviewer's default helper (all tools) has the reviewer's.
      (should (equal (lispm-roles-helper-tools 'default reviewer) reviewer-tools))
      ;; A role only `lispm-policy-roles' names has every tool.
      (let ((lispm-policy-roles (cons '(open (read allow)) lispm-policy-roles))
            (open (lispm-test-add-actor :name "open" :folder folder :role 'open)))
        (should (equal (lispm-roles-helper-tools 'tester open) tester-tools))
        (should (equal (lispm-roles-helper-tools 'open reviewer) reviewer-tools)))
      (should-error (lispm-roles-helper-tools 'no-such-role plain) :type 'lispm-role-unknown))))

;;; The property: a helper never does more than its role or its caller

(defconst lispm-roles-test--patterns '("tests/**" "test/**" "*.md" "docs/*" "src/*.el")
  "The path patterns the random rules use.")

(defconst lispm-roles-test--files
  '(("tests/a.el" "tests/**")
    ("tests/deep/c.md" "tests/**" "*.md")
    ("test/b.el" "test/**")
    ("docs/x.md" "*.md" "docs/*")
    ("docs/sub/y.md" "*.md")
    ("src/main.el" "src/*.el")
    ("src/sub/deep.el")
    ("README.md" "*.md")
    ("notes.txt")
    ("../outside.md"))
  "Files, relative to the folder, and the patterns each matches.
The last lies outside the folder, so no pattern matches it.  This
table, written by hand, is the test's oracle of the glob patterns.")

(defun lispm-roles-test--pick (list)
  "Return a random element of LIST."
  (nth (random (length list)) list))

(defun lispm-roles-test--random-rules ()
  "Return a random list of policy rules over every kind."
  (cl-loop repeat (random 7)
           collect (let ((kind (lispm-roles-test--pick lispm-policy-kinds))
                         (decision (lispm-roles-test--pick lispm-policy-decisions)))
                     (if (zerop (random 3))
                         (list kind decision
                               (cl-loop repeat (1+ (random 2))
                                        collect (lispm-roles-test--pick
                                                 lispm-roles-test--patterns)))
                       (list kind decision)))))

(defun lispm-roles-test--oracle (rules kind files)
  "Return the decision of RULES for KIND on FILES, relative names of the table.
First match wins; a rule with patterns matches when there are files
and each matches one of them; no match asks."
  (or (cl-loop for (rule-kind decision patterns) in rules
               when (and (eq rule-kind kind)
                         (or (null patterns)
                             (and files
                                  (cl-every (lambda (file)
                                              (cl-intersection
                                               patterns
                                               (cdr (assoc file lispm-roles-test--files))
                                               :test #'equal))
                                            files))))
               return decision)
      'ask))

(defun lispm-roles-test--rank (decision)
  "Return how strict DECISION is: 0 for allow, 1 for ask, 2 for deny."
  (pcase decision ('allow 0) ('ask 1) ('deny 2)))

(defun lispm-roles-test--random-grants (&rest actors)
  "Give each of ACTORS, afresh, session grants of random kinds."
  (dolist (actor actors)
    (lispm-policy-revoke actor)
    (dolist (kind lispm-policy-kinds)
      (when (zerop (random 4)) (lispm-policy-grant actor kind)))))

(defun lispm-roles-test--strictest (&rest decisions)
  "Return the strictest of DECISIONS, by the test's own ranking."
  (car (sort (copy-sequence decisions)
             (lambda (a b) (> (lispm-roles-test--rank a) (lispm-roles-test--rank b))))))

(ert-deftest lispm-roles-test-property-helper-never-more-than-either ()
  "Random role and caller policies, random targets: the stricter of both, always.
For a helper not started yet (`lispm-roles-helper-decision'), and for
real helper actors through `lispm-policy-decide', one level and two:
never more permissive than its role or any caller up the chain, the
callers' grants never counting, the helper's own lifting only an ask."
  (lispm-roles-test--with-roles
    (let* ((lispm-policy-roles lispm-policy-roles)
           (caller (lispm-test-add-actor :name "caller" :folder folder :role 'prop-caller))
           (helper (lispm-test-add-actor :name "helper" :folder folder :role 'prop-role))
           (mid (lispm-test-add-actor :name "mid" :folder folder :role 'prop-mid))
           (deep (lispm-test-add-actor :name "deep" :folder folder :role 'prop-role))
           (pairs (make-hash-table :test #'equal))
           (lifted 0)
           (cases 1000))
      (setf (lispm-actor-caller helper) caller
            (lispm-actor-caller mid) caller
            (lispm-actor-caller deep) mid)
      (random "lispm-roles-test-property")
      (dotimes (n cases)
        (let* ((role-rules (lispm-roles-test--random-rules))
               (caller-rules (lispm-roles-test--random-rules))
               (mid-rules (lispm-roles-test--random-rules))
               (kind (lispm-roles-test--pick lispm-policy-kinds))
               (files (cl-loop repeat (random 3)
                               collect (car (lispm-roles-test--pick lispm-roles-test--files))))
               (target (and files (list :files (mapcar (lambda (file) (expand-file-name file folder))
                                                       files)))))
          (setq lispm-policy-roles (list (cons 'prop-role role-rules)
                                         (cons 'prop-caller caller-rules)
                                         (cons 'prop-mid mid-rules)))
          (lispm-roles-test--random-grants caller mid helper deep)
          (let* ((role-decision (lispm-roles-test--oracle role-rules kind files))
                 (caller-decision (lispm-roles-test--oracle caller-rules kind files))
                 (mid-decision (lispm-roles-test--oracle mid-rules kind files))
                 (unstarted (lispm-roles-helper-decision 'prop-role caller kind target))
                 (one (lispm-policy-decide helper 'prop-role kind target))
                 (two (lispm-policy-decide deep 'prop-role kind target))
                 (report (list :case n :role role-rules :caller caller-rules :mid mid-rules
                               :kind kind :files files :unstarted unstarted :one one :two two)))
            (cl-flet ((check (got expected) (should (equal (cons report got)
                                                           (cons report expected))))
                      (lift (actor decision)
                        (if (and (eq decision 'ask) (lispm-policy-granted-p actor kind))
                            (progn (cl-incf lifted) 'allow)
                          decision))
                      (at-least (decision &rest others)
                        (cl-every (lambda (other) (>= (lispm-roles-test--rank decision)
                                                      (lispm-roles-test--rank other)))
                                  others)))
              ;; The oracle agrees with the policy on each side alone.
              (check (lispm-policy-rule-decision caller 'prop-role kind target) role-decision)
              (check (lispm-policy-rule-decision caller 'prop-caller kind target) caller-decision)
              ;; Not started yet: the stricter of the two, never more than either.
              (check (at-least unstarted role-decision caller-decision) t)
              (check unstarted (lispm-roles-test--strictest role-decision caller-decision))
              ;; A helper: the same, lifted only by its own grant.
              (check one (lift helper unstarted))
              (unless (lispm-policy-granted-p helper kind)
                (check (at-least one role-decision caller-decision) t))
              (check (lispm-roles-helper-decision 'prop-role caller kind target helper) one)
              ;; A helper's helper: never more than anyone up the chain.
              (check two (lift deep (lispm-roles-test--strictest
                                     role-decision mid-decision caller-decision)))
              (unless (lispm-policy-granted-p deep kind)
                (check (at-least two role-decision mid-decision caller-decision) t))
              (puthash (list role-decision caller-decision) t pairs)))))
      ;; Every pair of decisions came up, and grants lifted some asks:
      ;; the property was not vacuous.
      (should (= (hash-table-count pairs) 9))
      (should (> lifted 50)))))

(ert-deftest lispm-roles-test-property-policy-tables-read-back ()
  "Random rules written as a role's Policy table read back as the same rules."
  (random "lispm-roles-test-tables")
  (dotimes (n 300)
    (let* ((rules (lispm-roles-test--random-rules))
           (rows (mapcar (pcase-lambda (`(,kind ,decision ,patterns))
                           (format "| %s | %s | %s |" kind
                                   (if (zerop (random 2)) decision (upcase (symbol-name decision)))
                                   (string-join patterns (make-string (1+ (random 3)) ?\s))))
                         rules))
           (role (lispm-roles-parse "/x/t.org" 'user (lispm-roles-test--role-text "t" rows))))
      (should (equal (list n (lispm-role-rules role)) (list n rules))))))

(provide 'lispm-roles-test)
;;; lispm-roles-test.el ends here
