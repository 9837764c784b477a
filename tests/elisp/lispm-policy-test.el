;;; lispm-policy-test.el --- Tests of LispM's policy and session grants  -*- lexical-binding: t; -*-

;;; Commentary:

;; The default role, rules narrowed by path patterns, the glob patterns
;; themselves, and session grants: that they turn `ask' into `allow',
;; never override `deny', belong to one agent (name and serial), and go
;; when the agent leaves.

;;; Code:

(require 'ert)
(require 'lispm-policy)
(require 'lispm-test-fixtures)

(defmacro lispm-policy-test--with-agents (&rest body)
  "Run BODY with an empty registry, no grants and the standard roles.
In BODY, `folder' is a fresh directory (a truename, with a slash)."
  (declare (indent 0) (debug t))
  `(let* ((lispm-agents-changed-hook (default-value 'lispm-agents-changed-hook))
          (lispm-policy--grants nil)
          (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
          (lispm-policy-default-role 'default)
          (folder (file-name-as-directory (file-truename (make-temp-file "lispm-policy-" t)))))
     (unwind-protect
         (lispm-test-with-registry ,@body)
       (delete-directory folder t))))

(defun lispm-policy-test--agent (name folder)
  "Register a live agent NAME working in FOLDER; return it."
  (lispm-test-add-agent :name name :folder folder))

(ert-deftest lispm-policy-test-default-role ()
  (lispm-policy-test--with-agents
    (let ((codex (lispm-policy-test--agent "codex" folder))
          (file (expand-file-name "notes.el" folder)))
      (should (eq (lispm-policy-decide codex 'default 'read (list :files (list file))) 'allow))
      (should (eq (lispm-policy-decide codex 'default 'message nil) 'allow))
      (should (eq (lispm-policy-decide codex 'default 'edit (list :files (list file))) 'ask))
      (should (eq (lispm-policy-decide codex 'default 'shell '(:command "ls")) 'ask))
      (should (eq (lispm-policy-decide codex 'default 'eval '(:form "(+ 1 2)")) 'ask))
      ;; No role, or a role no one defined: the default role's rules.
      (should (eq (lispm-policy-decide codex nil 'read nil) 'allow))
      (should (eq (lispm-policy-decide codex 'no-such-role 'edit nil) 'ask))
      (should (eq (lispm-policy-decide codex 'no-such-role 'read nil) 'allow))
      ;; A kind no rule names waits for the user.
      (should (eq (lispm-policy-decide codex 'default 'teleport nil) 'ask))
      ;; Bad arguments are errors, not decisions.
      (should-error (lispm-policy-decide "codex" 'default 'read nil) :type 'lispm-policy-error)
      (should-error (lispm-policy-decide codex 'default "read" nil) :type 'lispm-error))))

(ert-deftest lispm-policy-test-default-role-value ()
  (should (equal (eval (car (get 'lispm-policy-roles 'standard-value)) t)
                 '((default (read allow) (introspect allow) (message allow) (remember allow)
                            (plan allow)
                            (edit ask) (shell ask) (eval ask) (network ask) (mcp ask)))))
  (should (eq (eval (car (get 'lispm-policy-default-role 'standard-value)) t) 'default))
  ;; The :type accepts the default and narrowed rules.
  (require 'wid-edit)
  (let ((widget (widget-convert (get 'lispm-policy-roles 'custom-type))))
    (should (widget-apply widget :match (eval (car (get 'lispm-policy-roles 'standard-value)) t)))
    (should (widget-apply widget :match '((writer (edit allow ("docs/**" "*.md")) (eval deny)))))
    (should-not (widget-apply widget :match '((writer (edit maybe)))))))

(ert-deftest lispm-policy-test-globs ()
  (cl-flet ((match (pattern file)
              (let ((case-fold-search nil))
                (string-match-p (lispm-policy--glob-regexp pattern) file))))
    (should (match "docs/**" "docs/a.md"))
    (should (match "docs/**" "docs/a/b/c.txt"))
    (should-not (match "docs/**" "src/docs/a.md"))
    (should-not (match "docs/**" "docsx/a.md"))
    (should (match "*.md" "README.md"))
    (should (match "*.md" "docs/deep/x.md"))
    (should-not (match "*.md" "README.mdx"))
    (should-not (match "*.md" "READMEmd"))
    (should (match "src/*.el" "src/a.el"))
    (should-not (match "src/*.el" "src/sub/a.el"))
    (should (match "src/**/*.el" "src/a.el"))
    (should (match "src/**/*.el" "src/sub/deep/a.el"))
    (should (match "?.el" "a.el"))
    (should-not (match "?.el" "ab.el"))
    (should-not (match "a+b.el" "aab.el"))
    (should (match "a+b.el" "a+b.el"))))

(ert-deftest lispm-policy-test-path-narrowed-rules ()
  (lispm-policy-test--with-agents
    (setq lispm-policy-roles
          '((writer (edit allow ("docs/**" "*.md"))
                    (edit deny ("secrets/**"))
                    (edit ask)
                    (read deny ("secrets/**"))
                    (read allow)
                    (eval deny))))
    (let ((codex (lispm-policy-test--agent "codex" folder)))
      (cl-flet ((edit (&rest files)
                  (lispm-policy-decide codex 'writer 'edit
                                       (list :files (mapcar (lambda (f) (expand-file-name f folder))
                                                            files)))))
        (should (eq (edit "docs/guide/intro.txt") 'allow))
        (should (eq (edit "README.md") 'allow))
        (should (eq (edit "src/NOTES.md") 'allow))
        (should (eq (edit "docs/a.txt" "notes/b.md") 'allow))
        ;; Every file must match for the narrowed rule to apply.
        (should (eq (edit "docs/a.txt" "src/main.el") 'ask))
        (should (eq (edit "secrets/key") 'deny))
        (should (eq (edit "src/main.el") 'ask))
        ;; A narrowed rule needs files.
        (should (eq (lispm-policy-decide codex 'writer 'edit nil) 'ask))
        ;; File names relative to the agent's folder work too.
        (should (eq (lispm-policy-decide codex 'writer 'edit '(:files ("docs/x.txt"))) 'allow))
        ;; Outside the folder, no pattern matches, even a name-only one.
        (let ((outside (make-temp-file "lispm-policy-outside-" nil ".md")))
          (unwind-protect
              (progn
                (should (eq (lispm-policy-decide codex 'writer 'edit (list :files (list outside)))
                            'ask))
                (should (eq (edit "../escape.md") 'ask))
                ;; Nor through a symbolic link out of the folder.
                (make-directory (expand-file-name "docs" folder))
                (make-symbolic-link outside (expand-file-name "docs/link.md" folder))
                (should (eq (edit "docs/link.md") 'ask)))
            (delete-file outside)))
        (should (eq (lispm-policy-decide codex 'writer 'read
                                         (list :files (list (expand-file-name "secrets/k" folder))))
                    'deny))
        (should (eq (lispm-policy-decide codex 'writer 'read
                                         (list :files (list (expand-file-name "a.el" folder))))
                    'allow))
        (should (eq (lispm-policy-decide codex 'writer 'eval '(:form "(+ 1 2)")) 'deny))))))

(ert-deftest lispm-policy-test-grants ()
  (lispm-policy-test--with-agents
    (setq lispm-policy-roles
          '((default (read allow) (edit deny ("secrets/**")) (edit ask) (shell ask) (eval deny))))
    (let* ((codex (lispm-policy-test--agent "codex" folder))
           (claude (lispm-policy-test--agent "claude" folder))
           (file (list :files (list (expand-file-name "a.el" folder))))
           (secret (list :files (list (expand-file-name "secrets/k" folder)))))
      (should (eq (lispm-policy-decide codex nil 'edit file) 'ask))
      (lispm-policy-grant codex 'edit)
      (should (lispm-policy-granted-p codex 'edit))
      (should (equal (lispm-policy-grants codex) '(edit)))
      (should (eq (lispm-policy-decide codex nil 'edit file) 'allow))
      ;; Only that kind, only that agent.
      (should (eq (lispm-policy-decide codex nil 'shell '(:command "ls")) 'ask))
      (should (eq (lispm-policy-decide claude nil 'edit file) 'ask))
      ;; A deny is never overridden, narrowed or not.
      (should (eq (lispm-policy-decide codex nil 'edit secret) 'deny))
      (lispm-policy-grant codex 'eval)
      (should (eq (lispm-policy-decide codex nil 'eval '(:form "(+ 1 2)")) 'deny))
      ;; Granting twice keeps one grant.
      (lispm-policy-grant codex 'edit)
      (should (equal (sort (lispm-policy-grants codex) #'string<) '(edit eval)))
      ;; Revoking.
      (lispm-policy-revoke codex 'eval)
      (should (equal (lispm-policy-grants codex) '(edit)))
      ;; The agent leaves: its grants go with it.
      (lispm-agents-unregister codex)
      (should-not (lispm-policy-granted-p codex 'edit))
      (should-not (cl-find codex lispm-policy--grants :key #'lispm-policy--grant-agent))
      ;; A later agent of the same name does not inherit anything.
      (let ((codex-again (lispm-policy-test--agent "codex" folder)))
        (should (eq (lispm-policy-decide codex-again nil 'edit file) 'ask))
        (should-not (lispm-policy-grants codex-again))))))

(ert-deftest lispm-policy-test-grants-follow-liveness-without-the-hook ()
  (lispm-policy-test--with-agents
    (let* ((codex (lispm-policy-test--agent "codex" folder))
           (file (list :files (list (expand-file-name "a.el" folder)))))
      (lispm-policy-grant codex 'edit)
      ;; Gone, and a new codex registered, no hook run: the grant is
      ;; neither the new one's nor still in force.
      (let ((successor (let ((lispm-agents-changed-hook nil))
                         (lispm-agents-unregister codex)
                         (lispm-policy-test--agent "codex" folder))))
        (should (eq (lispm-policy-decide successor nil 'edit file) 'ask))
        (should (eq (lispm-policy-decide codex nil 'edit file) 'ask)))
      (should (memq #'lispm-policy--forget-gone lispm-agents-changed-hook)))))

(ert-deftest lispm-policy-test-unregistered-agent-keeps-grants-until-revoked ()
  (lispm-policy-test--with-agents
    ;; An actor that was never in the registry: a bare record.
    (let ((own (lispm-test-actor--make :name "lispm" :kind 'lispm :folder folder :serial 99))
          (codex (lispm-policy-test--agent "codex" folder)))
      (lispm-policy-grant own 'shell)
      (lispm-agents-unregister codex)
      (should (eq (lispm-policy-decide own nil 'shell '(:command "ls")) 'allow))
      ;; Another of the same name, but not the same serial, has no grant.
      (let ((other (lispm-test-actor--make :name "lispm" :kind 'lispm :folder folder
                                           :serial 100)))
        (should (eq (lispm-policy-decide other nil 'shell '(:command "ls")) 'ask)))
      (lispm-policy-revoke own)
      (should (eq (lispm-policy-decide own nil 'shell '(:command "ls")) 'ask)))))

(ert-deftest lispm-policy-test-an-actor-without-a-terminal-is-decided-by-its-role ()
  (lispm-policy-test--with-agents
    (let* ((lispm-policy-roles '((default (read allow) (edit ask))
                                 (reviewer (read allow) (edit deny))))
           (own (lispm-test-add-actor :folder folder))
           (reviewer (lispm-test-add-actor :name "reviewer" :folder folder :role 'reviewer))
           (file (list :files (list (expand-file-name "a.el" folder)))))
      (should (eq (lispm-policy-decide own (lispm-actor-role own) 'edit file) 'ask))
      (should (eq (lispm-policy-decide reviewer (lispm-actor-role reviewer) 'edit file) 'deny))
      (lispm-policy-grant own 'edit)
      (should (eq (lispm-policy-decide own nil 'edit file) 'allow))
      ;; Its grants go when it leaves, as a terminal agent's do.
      (lispm-agents-unregister own)
      (should-not (lispm-policy-granted-p own 'edit))
      (should-error (lispm-policy-decide "emacs" nil 'edit file) :type 'lispm-policy-error))))

(defun lispm-policy-test--type-accepts-p (type value)
  "Return non-nil if the Customize TYPE accepts VALUE."
  (widget-apply (widget-convert type) :match value))

(ert-deftest lispm-policy-test-the-kinds-are-defined-once ()
  (require 'lispm-tools)
  (require 'lispm-approvals)
  (should (equal lispm-policy-kinds
                 '(read introspect edit shell eval network message remember plan mcp)))
  (should (equal lispm-tools-kinds lispm-policy-kinds))
  ;; The options' types offer exactly these kinds, and nothing else.
  (let ((audit (get 'lispm-approvals-audit-automatic 'custom-type))
        (roles (get 'lispm-policy-roles 'custom-type)))
    (dolist (kind lispm-policy-kinds)
      (should (lispm-policy-test--type-accepts-p 'lispm-policy-kind kind))
      (should (lispm-policy-test--type-accepts-p audit (list kind)))
      (should (lispm-policy-test--type-accepts-p roles `((r (,kind allow)))))
      (should (lispm-policy-test--type-accepts-p roles `((r (,kind deny ("docs/**")))))))
    ;; Customize shows each kind by its name and what it covers.
    (pcase-let ((`(choice :tag "Kind" . ,consts)
                 (plist-get (cdr (get 'lispm-policy-kind 'widget-type)) :type)))
      (should (equal (mapcar (lambda (const) (car (last const))) consts) lispm-policy-kinds))
      (cl-loop for const in consts
               for (kind . what) in lispm-policy-kind-alist
               do (should (equal (plist-get (cdr const) :tag) (format "%s (%s)" kind what)))))
    (dolist (value '(write nil "read"))
      (should-not (lispm-policy-test--type-accepts-p 'lispm-policy-kind value))
      (should-not (lispm-policy-test--type-accepts-p audit (list value)))
      (should-not (lispm-policy-test--type-accepts-p roles `((r (,value allow)))))))
  (should-not (lispm-policy-test--type-accepts-p
               (get 'lispm-policy-roles 'custom-type) '((r (read maybe)))))
  ;; Every tool's kind is one of them, and a tool of another is refused.
  (dolist (tool lispm-tools)
    (should (memq (lispm-tool-kind tool) lispm-policy-kinds)))
  (should-error (macroexpand '(lispm-define-tool lispm-policy-test-nothing ()
                                "Do nothing."
                                :kind 'write
                                ""))))

(provide 'lispm-policy-test)
;;; lispm-policy-test.el ends here
