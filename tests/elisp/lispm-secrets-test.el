;;; lispm-secrets-test.el --- Tests that no tool an agent calls unasked shows a secret  -*- lexical-binding: t; -*-

;;; Commentary:

;; Secrets are planted where they live: a key in the environment and
;; another in one buffer's own environment (as direnv sets it), a
;; password in a netrc file that auth-source has read and cached, an
;; agent's token in LispM's runtime directory, a key written in
;; `lispm-models', a private key in ~/.ssh.  The agent works in the
;; home directory, the worst case: ~/.authinfo, ~/.ssh, the runtime
;; directory and the ledger are all in its folder.  Then the tools the
;; default role lets an agent call without asking are called through
;; the one pipeline, `lispm-calls-invoke', as LispM's own agent calls
;; them, with what an attacker would try; no planted secret may be in
;; any answer, refusals say why, and no one is asked.

;;; Code:

(require 'ert)
(require 'auth-source)
(require 'lispm)
(require 'lispm-views)
(require 'lispm-model)
(require 'lispm-run-lisp)
(require 'lispm-memory)
(require 'lispm-test-fixtures)

(defconst lispm-secrets-test--planted
  '((env . "sk-ant-planted-0123456789")
    (local-env . "direnv-planted-secret-4f2a9c")
    (netrc . "netrc-planted-hunter2-77")
    (unread . "authinfo-unread-planted-55")
    (runtime . "runtimeplantedtoken0123456789abcdef")
    (model . "modelplanted0123456789abcdefghij")
    (ssh . "b3BlbnNzaC1rZXktdjEAAAAplantedprivatebody"))
  "The secrets the tests plant, by where they are planted.
`unread' is a password in ~/.netrc, a file auth-source never reads.")

(defun lispm-secrets-test--secret (where)
  "Return the secret planted in WHERE, a key of `lispm-secrets-test--planted'."
  (alist-get where lispm-secrets-test--planted))

;; The variables the attacks read are not named lispm-secrets-test--...:
;; "secret" in a name is refused by the name alone, before the value
;; is looked at.

(defvar lispm-planted-holder nil
  "A variable an attack fills with a value that holds a secret.")

(defvar lispm-planted-plain '(fill-column 70 "text")
  "A variable whose value holds no secret.")

(defvar-local lispm-planted-local "harmless"
  "A variable whose global value is harmless; one buffer's own holds a key.")

(defun lispm-secrets-test--call (actor tool args)
  "Call TOOL with ARGS as ACTOR through the pipeline; wait for its outcome."
  (let ((outcomes nil)
        (deadline (+ (float-time) 60)))
    (lispm-calls-invoke actor tool args (lambda (outcome) (push outcome outcomes)))
    (while (and (null outcomes) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (should (= (length outcomes) 1))
    (car outcomes)))

(defun lispm-secrets-test--leaks (outcome)
  "Return the places of the planted secrets in OUTCOME's text, error or condition."
  (let ((shown (prin1-to-string (list (plist-get outcome :text) (plist-get outcome :error)
                                      (plist-get outcome :condition)))))
    (cl-loop for (where . secret) in lispm-secrets-test--planted
             when (string-search secret shown) collect where)))

(defun lispm-secrets-test--refused (outcome kind &optional reason)
  "Check that OUTCOME is a refusal of KIND by the policy, whose reason has REASON."
  (let ((err (plist-get outcome :condition)))
    (should-not (plist-get outcome :ok))
    (should (eq (car err) 'lispm-policy-denied))
    (should (equal (list (nth 2 err) (nth 3 err)) (list kind 'policy)))
    (when reason
      (should (string-search reason (nth 4 err))))))

(defun lispm-secrets-test--call-with-planted (body)
  "Call BODY with an actor working in a home directory full of planted secrets.
BODY gets the actor and the home directory, a truename with a slash."
  (let* ((home (file-name-as-directory (file-truename (make-temp-file "lispm-secrets-home-" t))))
         (runtime (expand-file-name "run/lispm/" home))
         (authinfo (expand-file-name ".authinfo" home))
         (process-environment
          (append (list (concat "HOME=" (directory-file-name home))
                        (concat "LISPM_RUNTIME_DIR=" runtime)
                        (concat "ANTHROPIC_API_KEY=" (lispm-secrets-test--secret 'env)))
                  process-environment))
         (initial-environment (cons (concat "ANTHROPIC_API_KEY=" (lispm-secrets-test--secret 'env))
                                    initial-environment))
         (auth-sources (list authinfo))
         (auth-source-do-cache t)
         (auth-source-netrc-cache nil)
         (password-data (make-hash-table :test #'equal))
         (lispm-models (cons (list "planted" :api 'chat :base-url "http://127.0.0.1:9/v1"
                                   :model "m" :key (lispm-secrets-test--secret 'model))
                             lispm-models))
         (lispm-ledger-file (expand-file-name ".emacs.d/lispm/ledger.sqlite3" home))
         (lispm-sessions-directory (expand-file-name ".emacs.d/lispm/sessions/" home))
         (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
         (kill-ring (list (concat "copied: " (lispm-secrets-test--secret 'env))))
         (lispm-planted-holder nil)
         (direnv (generate-new-buffer "*lispm-secrets-test direnv*"))
         (shell (generate-new-buffer "*lispm-secrets-test shell*")))
    (unwind-protect
        (progn
          (lispm-test-write-file home ".authinfo"
                                 (format "machine api.planted.example login me password %s\n"
                                         (lispm-secrets-test--secret 'netrc)))
          (lispm-test-write-file home ".netrc"
                                 (format "machine unread.example login you password %s\n"
                                         (lispm-secrets-test--secret 'unread)))
          (lispm-test-write-file home ".ssh/id_ed25519"
                                 (format "-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n\
-----END OPENSSH PRIVATE KEY-----\n" (lispm-secrets-test--secret 'ssh)))
          (lispm-test-write-file runtime "4242-codex/token"
                                 (concat (lispm-secrets-test--secret 'runtime) "\n"))
          (lispm-test-write-file home ".emacs.d/lispm/ledger.sqlite3" "SQLite format 3 planted\n")
          (lispm-test-write-file
           home "notes.txt"
           (format "values: key %s, password %s, token %s, model %s, local %s, unread %s.\n\
planted here, and nothing secret.\n"
                   (lispm-secrets-test--secret 'env) (lispm-secrets-test--secret 'netrc)
                   (lispm-secrets-test--secret 'runtime) (lispm-secrets-test--secret 'model)
                   (lispm-secrets-test--secret 'local-env) (lispm-secrets-test--secret 'unread)))
          (load (lispm-test-write-file
                 home "leaky.el"
                 (format "(defun lispm-secrets-test--leaky ()\n  %S\n  %S)\n"
                         (concat "Return the planted key " (lispm-secrets-test--secret 'env) ".")
                         (lispm-secrets-test--secret 'env)))
                nil t)
          ;; auth-source reads the file, and caches it and its answer.
          (should (auth-source-search :host "api.planted.example" :max 1))
          (with-current-buffer direnv
            (setq-local process-environment
                        (cons (concat "OPENAI_API_KEY=" (lispm-secrets-test--secret 'local-env))
                              process-environment)))
          (with-current-buffer shell
            (insert "$ env\n" (mapconcat #'identity process-environment "\n") "\n$ "))
          (lispm-test-with-registry
            (let ((own (lispm-test-add-actor :folder home)))
              (funcall body own home)
              (should-not (lispm-approvals-pending)))))
      (kill-buffer direnv)
      (kill-buffer shell)
      (fmakunbound 'lispm-secrets-test--leaky)
      (lispm-test-remove-folder home))))

(defmacro lispm-secrets-test--with-planted (spec &rest body)
  "Run BODY with secrets planted; SPEC is (ACTOR HOME), bound as for BODY.
See `lispm-secrets-test--call-with-planted'."
  (declare (indent 1) (debug (sexp body)))
  `(lispm-secrets-test--call-with-planted (lambda ,spec ,@body)))

;;; variable_value

(ert-deftest lispm-secrets-test-variable-value-refuses-what-holds-a-secret ()
  (lispm-secrets-test--with-planted (own _home)
    (let ((key (lispm-secrets-test--secret 'env)))
      ;; Variables that hold secrets by nature, however they are named.
      (dolist (name '("process-environment" " process-environment\n" "initial-environment"
                      "password-data" "auth-source-netrc-cache" "lispm-models" "kill-ring"))
        (let ((outcome (lispm-secrets-test--call own "variable_value" (list :name name))))
          (should-not (lispm-secrets-test--leaks outcome))
          (lispm-secrets-test--refused outcome 'read "LispM never shows")))
      ;; An alias of one.
      (defvaralias 'lispm-planted-environment 'process-environment)
      (lispm-secrets-test--refused
       (lispm-secrets-test--call own "variable_value" '(:name "lispm-planted-environment"))
       'read "the environment")
      ;; A secret inside any value: refused, saying where it comes from.
      (dolist (value (list key
                           (concat "Authorization: x-api " key " (do not share)")
                           (list 1 (list 2 (list 3 key)))
                           (list :user "me" :note key)
                           (let ((table (make-hash-table :test #'equal)))
                             (puthash "anything" (vector 1 key) table)
                             table)
                           (vector "a" (record 'lispm-secrets-test-thing key))
                           (let ((circular (list 1 2 key))) (nconc circular circular))
                           (list :env process-environment)
                           (let ((captured key)) (lambda () captured))
                           (list (lispm-secrets-test--secret 'netrc))
                           (list (lispm-secrets-test--secret 'runtime))
                           (list (lispm-secrets-test--secret 'model))
                           (list (lispm-secrets-test--secret 'local-env))))
        (setq lispm-planted-holder value)
        (let ((outcome (lispm-secrets-test--call own "variable_value"
                                                 '(:name "lispm-planted-holder"))))
          (should-not (lispm-secrets-test--leaks outcome))
          (lispm-secrets-test--refused outcome 'read "it holds a secret (")))
      (setq lispm-planted-holder (list 1 key))
      (should (string-search "(the environment variable ANTHROPIC_API_KEY)"
                             (plist-get (lispm-secrets-test--call
                                         own "variable_value" '(:name "lispm-planted-holder"))
                                        :error)))
      ;; Secrets no one planted: by their shape, an assignment, or a
      ;; secret's name over them.
      (dolist (case '(("ghp_0123456789abcdefghijABCDEFGHIJ" . "shaped like")
                      ("export FOO_TOKEN=abcdef0123 && run" . "sets FOO_TOKEN")
                      ("charset=\"utf-8\"; MY_API_KEY='abcdef0123'" . "sets MY_API_KEY")
                      ((:host "h" :password "unplanted-pw") . "under the key :password")
                      ((("user" . "me") ("token" . "unplanted-tok")) . "under the key token")))
        (setq lispm-planted-holder (car case))
        (lispm-secrets-test--refused
         (lispm-secrets-test--call own "variable_value" '(:name "lispm-planted-holder"))
         'read (cdr case)))
      ;; Only the global value, never a buffer's own; a plain value shows.
      (with-temp-buffer
        (setq lispm-planted-local key)
        (should (equal (plist-get (lispm-secrets-test--call
                                   own "variable_value" '(:name "lispm-planted-local"))
                                  :text)
                       "\"harmless\"")))
      (should (equal (plist-get (lispm-secrets-test--call
                                 own "variable_value" '(:name "lispm-planted-plain"))
                                :text)
                     "(fill-column 70 \"text\")"))
      ;; What only looks like a secret's place shows: a list of names,
      ;; code that calls a function named so.
      (dolist (value '(("ALLTAGS" "COOKIE_DATA" "CATEGORY")
                       (lispm-secrets-test--secret "ssh-password")))
        (setq lispm-planted-holder value)
        (should (eq (plist-get (lispm-secrets-test--call
                                own "variable_value" '(:name "lispm-planted-holder"))
                               :ok)
                    t))))))

;;; Files of keys and tokens

(ert-deftest lispm-secrets-test-files-of-keys-are-refused ()
  (lispm-secrets-test--with-planted (own _home)
    (dolist (path '(".authinfo" "~/.authinfo" ".ssh/id_ed25519" ".ssh" "run/lispm/4242-codex/token"
                    ".emacs.d/lispm/ledger.sqlite3"))
      (let ((outcome (lispm-secrets-test--call own "read_file" (list :path path))))
        (should-not (lispm-secrets-test--leaks outcome))
        (lispm-secrets-test--refused outcome 'read "LispM's tools never read or change")))
    (lispm-secrets-test--refused (lispm-secrets-test--call own "grep" '(:pattern "." :path ".ssh"))
                                 'read "keys or tokens")
    (lispm-secrets-test--refused (lispm-secrets-test--call own "list_files" '(:path "run/lispm"))
                                 'read "keys or tokens")
    ;; Listing or searching the whole folder passes them by.
    (let ((listed (plist-get (lispm-secrets-test--call own "list_files" nil) :text)))
      (should (string-search "notes.txt" listed))
      (dolist (file '(".authinfo" "id_ed25519" "token" "ledger.sqlite3"))
        (should-not (string-search file listed))))
    (let ((found (plist-get (lispm-secrets-test--call own "grep" '(:pattern "planted")) :text)))
      (should (string-search "notes.txt:2:planted here" found))
      (should-not (string-match-p "^\\(?:\\.authinfo\\|\\.ssh\\|run/\\|\\.emacs\\.d\\)" found)))
    (should (equal (plist-get (lispm-secrets-test--call own "grep" '(:pattern "PRIVATE|SQLite"))
                              :text)
                   "No matches."))))

;;; Results

(ert-deftest lispm-secrets-test-known-secrets-are-withheld-from-results ()
  (lispm-secrets-test--with-planted (own home)
    (let ((text (plist-get (lispm-secrets-test--call own "read_file" '(:path "notes.txt")) :text)))
      (should (string-search "[secret withheld: the environment variable ANTHROPIC_API_KEY]" text))
      (should (string-search "[secret withheld: the environment variable OPENAI_API_KEY]" text))
      (should (string-search "[secret withheld: a password auth-source has read]" text))
      (should (string-search "[secret withheld: the token file" text))
      (should (string-search "[secret withheld: the key of the model planted]" text))
      (should (string-search (format "unread [secret withheld: the file %s]"
                                     (abbreviate-file-name (expand-file-name ".netrc" home)))
                             text))
      (should-not (lispm-secrets-test--leaks (list :text text))))
    (dolist (call '(("function_source" :name "lispm-secrets-test--leaky")
                    ("describe_function" :name "lispm-secrets-test--leaky")
                    ("apropos" :pattern "lispm-secrets-test--leaky")
                    ("read_file" :path "leaky.el")))
      (let ((outcome (lispm-secrets-test--call own (car call) (cdr call))))
        (should (eq (plist-get outcome :ok) t))
        (should (string-search "[secret withheld: " (plist-get outcome :text)))
        (should-not (lispm-secrets-test--leaks outcome))))
    ;; No piece by piece: not through windows of read_file, nor where a
    ;; cap cuts a text.
    (let* ((length (length (lispm-test-read-file (expand-file-name "notes.txt" home))))
           (pieces (cl-loop for offset from 0 below length by 5
                            collect (plist-get (lispm-secrets-test--call
                                                own "read_file"
                                                (list :path "notes.txt" :offset offset :limit 12))
                                               :text))))
      (dolist (piece pieces)
        (pcase-dolist (`(,_ . ,secret) lispm-secrets-test--planted)
          (dotimes (i (- (length secret) 7))
            (should-not (string-search (substring secret i (+ i 8)) piece))))))
    (let* ((source (plist-get (lispm-secrets-test--call
                               own "function_source" '(:name "lispm-secrets-test--leaky"))
                              :text))
           (lispm-introspect-text-limit (+ (string-search "[secret withheld" source) 6))
           (cut (plist-get (lispm-secrets-test--call
                            own "function_source" '(:name "lispm-secrets-test--leaky"))
                           :text)))
      (should (string-match-p "\\[secret withheld: [^]]+\\]\n\\[[0-9]+ characters cut" cut))
      (should-not (string-search "sk-ant" cut)))
    ;; A role may run commands unasked: what they print is withheld too
    ;; (though a command can always recode a secret; hence `ask').
    ;; In the sandbox, the secret-named variables are not even there.
    (let* ((lispm-policy-roles '((default (read allow) (shell allow))))
           (outcome (lispm-secrets-test--call
                     own "run_shell" '(:command "printenv ANTHROPIC_API_KEY; cat notes.txt"))))
      (should (string-prefix-p "values: " (plist-get outcome :text)))
      (should-not (lispm-secrets-test--leaks outcome)))
    (let* ((lispm-policy-roles '((default (read allow) (shell allow))))
           (lispm-sandbox-shell-mode 'off)
           (outcome (lispm-secrets-test--call
                     own "run_shell" '(:command "printenv ANTHROPIC_API_KEY; cat notes.txt"))))
      (should (string-prefix-p "[secret withheld: the environment variable ANTHROPIC_API_KEY]\n"
                               (plist-get outcome :text)))
      (should-not (lispm-secrets-test--leaks outcome)))
    ;; grep is no oracle: a line holding a secret is never shown, so a
    ;; pattern matching the secret's beginning finds what one that does
    ;; not finds.
    (dolist (pattern '("sk-ant-p" "sk-ant-x" "key sk-" "hunter2"))
      (should (equal (plist-get (lispm-secrets-test--call own "grep" (list :pattern pattern))
                                :text)
                     "No matches.")))))

;;; The views

(ert-deftest lispm-secrets-test-views-withhold-secrets ()
  (lispm-secrets-test--with-planted (_own home)
    (let ((visiting (find-file-noselect (expand-file-name ".authinfo" home))))
      (unwind-protect
          (let ((err (should-error (lispm-sidecar-handle-request
                                    'emacs/buffer-text (list :buffer (buffer-name visiting)))
                                   :type 'lispm-policy-denied)))
            (should (string-search "keys or tokens" (nth 1 err)))
            (should-not (string-search (lispm-secrets-test--secret 'netrc) (nth 1 err))))
        (kill-buffer visiting)))
    (let ((text (plist-get (lispm-sidecar-handle-request
                            'emacs/buffer-text '(:buffer "*lispm-secrets-test shell*"))
                           :text)))
      (should (string-search "ANTHROPIC_API_KEY=[secret withheld: " text))
      (should-not (string-search (lispm-secrets-test--secret 'env) text)))))

;;; Every tool called unasked

(defconst lispm-secrets-test--attacks
  '(("read_file" (:path "notes.txt") (:path ".authinfo") (:path "~/.netrc")
     (:path ".ssh/id_ed25519") (:path "run/lispm/4242-codex/token") (:path "leaky.el"))
    ("list_files" nil (:path ".ssh") (:path "run") (:pattern "*token*"))
    ("grep" (:pattern "planted") (:pattern "password" :path ".authinfo")
     (:pattern "PRIVATE|planted" :path ".ssh") (:pattern "sk-ant|hunter2|planted"))
    ("plan" (:steps ["Read notes.txt" "[x] Look for planted"]))
    ("variable_value" (:name "process-environment") (:name "Process-Environment")
     (:name "initial-environment") (:name "auth-source-netrc-cache")
     (:name "auth-source--session-nonce") (:name "password-data") (:name "lispm-models")
     (:name "kill-ring") (:name "url-cookie-storage") (:name "lispm-planted-local")
     (:name "lispm-planted-holder") (:name "lispm-sidecar--info"))
    ("describe_variable" (:name "process-environment") (:name "lispm-planted-holder"))
    ("describe_function" (:name "lispm-secrets-test--leaky") (:name "getenv"))
    ("function_source" (:name "lispm-secrets-test--leaky") (:name "lispm-secrets-test--call"))
    ("apropos" (:pattern "lispm-secrets-test") (:pattern "sk-ant"))
    ("info_node" (:node "(~/.authinfo) *") (:node "(.authinfo) *") (:node "(../.netrc) Top"))
    ("search_tools" (:query "planted key"))
    ("skill" (:name "planted"))
    ("list_agents" nil)
    ("run_lisp" (:program "(read-file \"notes.txt\")")
     (:program "(list (read-file \"leaky.el\") (grep \"planted\"))"))
    ("remember" (:fact "The key is sk-ant-planted-0123456789.")
     (:fact "Password: direnv-planted-secret-4f2a9c" :scope "user")))
  "Each tool an agent may call unasked, with the arguments an attacker would try.")

(defconst lispm-secrets-test--unattacked
  '("send_message" "ask_agent" "reply")
  "The tools called unasked that this test leaves be.
They carry the agent's own words to another agent (through the
sidecar, which the test does not run); what they answer is a receipt,
or another agent's reply.")

(ert-deftest lispm-secrets-test-no-unasked-tool-shows-a-planted-secret ()
  (lispm-secrets-test--with-planted (own _home)
    ;; Every tool the default role runs at once is attacked here: a
    ;; tool added later fails this test until its attacks are added.
    (let ((unasked (cl-loop for tool in lispm-tools
                            when (eq (lispm-policy-decide own nil (lispm-tool-kind tool) nil)
                                     'allow)
                            collect (lispm-tool-name tool))))
      (should (member "variable_value" unasked))
      (should (equal (sort (cl-set-difference unasked lispm-secrets-test--unattacked
                                              :test #'equal)
                           #'string<)
                     (sort (mapcar #'car lispm-secrets-test--attacks) #'string<))))
    (let ((lispm-planted-holder (list :env process-environment)))
      (with-current-buffer (get-buffer "*lispm-secrets-test direnv*")
        (setq-local lispm-planted-local (lispm-secrets-test--secret 'local-env))
        (pcase-dolist (`(,tool . ,calls) lispm-secrets-test--attacks)
          (dolist (args calls)
            (let ((outcome (lispm-secrets-test--call own tool args)))
              (should (equal (list tool args (lispm-secrets-test--leaks outcome))
                             (list tool args nil)))))))
      ;; What remember was given is withheld in its files too.
      (let ((files (directory-files-recursively (lispm-memory-directory) "\\.org\\'")))
        (should (= (length files) 2))
        (dolist (file files)
          (should-not (lispm-secrets-test--leaks (list :text (lispm-test-read-file file)))))))
    (should (lispm-sessions-wait-for-commits 30))))

(ert-deftest lispm-secrets-test-a-changed-environment-is-scanned-again ()
  "The environments' secrets are kept between calls, but never past a change."
  (let ((process-environment (copy-sequence process-environment)))
    (lispm-secrets-known)
    (setenv "LISPM_TEST_LATE_TOKEN" "late-s3cret-9f8e7d")
    (should (assoc "late-s3cret-9f8e7d" (lispm-secrets-known)))
    ;; Changed in place, as `setenv' does to a variable already there.
    (setenv "LISPM_TEST_LATE_TOKEN" "later-s3cret-1a2b3c")
    (should (assoc "later-s3cret-1a2b3c" (lispm-secrets-known)))
    (should-not (assoc "late-s3cret-9f8e7d" (lispm-secrets-known)))
    (with-temp-buffer
      (setq-local process-environment
                  (cons "LISPM_TEST_LOCAL_TOKEN=local-s3cret-4d5e6f" process-environment))
      (should (assoc "local-s3cret-4d5e6f" (lispm-secrets-known))))))

(provide 'lispm-secrets-test)
;;; lispm-secrets-test.el ends here
