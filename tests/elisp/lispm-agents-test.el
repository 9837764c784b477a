;;; lispm-agents-test.el --- Tests of the agent registry and the adapters  -*- lexical-binding: t; -*-

;;; Commentary:

;; The registry, naming, the adapters' command lines and the user's
;; mistakes.  The real CLIs run in tests/e2e; here nothing is started
;; but the sidecar.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defmacro lispm-agents-test--with-registry (&rest body)
  "Run BODY with an empty agent registry of its own and nothing on its hook."
  (declare (indent 0) (debug t))
  `(let ((lispm-agents-changed-hook nil))
     (lispm-test-with-registry ,@body)))

(defun lispm-agents-test--add (name kind)
  "Register a live agent NAME of KIND, working in /tmp/."
  (lispm-test-add-agent :name name :kind kind :folder "/tmp/"))

(ert-deftest lispm-agents-test-names-count-up-and-reuse-gaps ()
  ;; The registry's own naming: `lispm-agents--unique-name' is asked directly.
  (lispm-agents-test--with-registry
    (should (equal (lispm-agents--unique-name 'claude) "claude"))
    (lispm-agents-test--add "claude" 'claude)
    (should (equal (lispm-agents--unique-name 'claude) "claude-2"))
    (lispm-agents-test--add "claude-2" 'claude)
    (lispm-agents-test--add "codex" 'codex)
    (should (equal (lispm-agents--unique-name 'claude) "claude-3"))
    (should (equal (lispm-agents--unique-name 'codex) "codex-2"))
    (lispm-agents-unregister (lispm-agent-get "claude"))
    (should (equal (lispm-agents--unique-name 'claude) "claude"))
    (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude-2" "codex")))))

(ert-deftest lispm-agents-test-missing-cli-names-its-npm-package ()
  (lispm-agents-test--with-registry
    (let ((exec-path '("/nonexistent"))
          (lispm-claude-program "claude-not-installed"))
      (let ((err (should-error (lispm-agent-start 'claude "/tmp/") :type 'user-error)))
        (should (string-match-p "npm install -g @anthropic-ai/claude-code" (cadr err))))
      (should-not (lispm-agents)))
    (let ((exec-path '("/nonexistent"))
          (lispm-codex-program "codex-not-installed"))
      (let ((err (should-error (lispm-agent-start 'codex "/tmp/") :type 'user-error)))
        (should (string-match-p "npm install -g @openai/codex" (cadr err)))))))

(ert-deftest lispm-agents-test-unknown-kind-and-folder-are-user-errors ()
  (lispm-agents-test--with-registry
    (should-error (lispm-agent-start 'no-such-agent "/tmp/") :type 'user-error)
    (let ((lispm-claude-program "sh"))
      (should-error (lispm-agent-start 'claude "/nonexistent/folder/") :type 'user-error))
    (should-not (lispm-agents))))

(ert-deftest lispm-agents-test-list-agents-answer ()
  (lispm-agents-test--with-registry
    (lispm-agents-test--add "claude" 'claude)
    (lispm-agents-test--add "codex" 'codex)
    (setf (lispm-agent-state (lispm-agent-get "claude")) 'running)
    (let ((answer (lispm-sidecar-dispatch-request 'emacs/list-agents nil)))
      (should (equal (plist-get answer :agents)
                     [(:name "claude" :kind "claude" :role "default" :folder "/tmp"
                             :state "running" :activity nil)
                      (:name "codex" :kind "codex" :role "default" :folder "/tmp"
                             :state "starting" :activity nil)]))
      ;; As jsonrpc.el encodes it for the link: nil is null.
      (should (string-search "\"activity\":null"
                             (json-serialize answer :null-object nil
                                             :false-object :json-false))))
    (mapc #'lispm-agents-unregister (lispm-agents))
    (should (equal (plist-get (lispm-sidecar-dispatch-request 'emacs/list-agents nil) :agents)
                   []))))

;;; Actors without a terminal

(cl-defstruct (lispm-agents-test--actor (:include lispm-actor)
                                        (:constructor lispm-agents-test--actor-make)
                                        (:copier nil))
  "An actor without a terminal, as LispM's own agent is one."
  (left nil :documentation "Set when `lispm-actor-left' ran for it."))

(cl-defmethod lispm-actor-left ((actor lispm-agents-test--actor))
  "Note that ACTOR left."
  (setf (lispm-agents-test--actor-left actor) t))

(ert-deftest lispm-agents-test-an-actor-without-a-terminal-joins-the-registry ()
  (lispm-agents-test--with-registry
    (let* ((changes 0)
           (lispm-agents-changed-hook (list (lambda () (cl-incf changes))))
           (first (lispm-agents-add-actor
                   (lispm-agents-test--actor-make :name "emacs" :kind 'lispm :folder "/tmp"
                                                  :state 'running :activity 'idle)))
           (codex (lispm-agents-register 'codex "/tmp/" nil nil 'reviewer))
           (second (lispm-agents-add-actor
                    (lispm-agents-test--actor-make :name "emacs" :kind 'lispm
                                                   :folder "/tmp/" :role 'reviewer))))
      (should (= changes 3))
      (should (equal (mapcar #'lispm-actor-name (lispm-agents)) '("emacs" "codex" "emacs-2")))
      (should (equal (mapcar #'lispm-actor-serial (lispm-agents)) '(1 2 3)))
      (should (equal (lispm-actor-folder first) "/tmp/"))
      (should (eq (lispm-actor-role first) lispm-policy-default-role))
      (should (eq (lispm-actor-role second) 'reviewer))
      (should (eq (lispm-actor-role codex) 'reviewer))
      (should (eq (lispm-agent-from-params '(:name "emacs" :instance 1)) first))
      (should-not (lispm-agent-from-params '(:name "emacs" :instance 3)))
      ;; Everyone sees it, with what it is doing.
      (should (equal (aref (plist-get (lispm-sidecar-dispatch-request 'emacs/list-agents nil)
                                      :agents)
                           0)
                     '(:name "emacs" :kind "lispm" :role "default" :folder "/tmp"
                             :state "idle" :activity "idle")))
      (lispm-agents-set-activity first 'running-tool)
      (should (= changes 4))
      (lispm-agents-set-activity first 'running-tool)
      (should (= changes 4))
      (should (equal (plist-get (lispm-agent-describe first) :state) "running-tool"))
      ;; A terminal's activity report never lands on it.
      (lispm-sidecar-handle-notification 'lispm/agent-activity
                                         '(:name "emacs" :instance 1 :activity "busy"))
      (should (eq (lispm-actor-activity first) 'running-tool))
      ;; It leaves as any agent does.
      (lispm-agent-close first)
      (should-not (lispm-agent-live-p first))
      (should (eq (lispm-actor-state first) 'exited))
      (should (lispm-agents-test--actor-left first))
      (should-not (lispm-agents-test--actor-left second))
      (should (equal (mapcar #'lispm-actor-name (lispm-agents)) '("codex" "emacs-2")))
      (should-error (lispm-agents-add-actor
                     (lispm-agents-test--actor-make :name "x" :kind 'lispm
                                                    :folder "/nonexistent/folder/"))
                    :type 'user-error)
      (should-error (lispm-agents-add-actor "emacs") :type 'wrong-type-argument))))

(ert-deftest lispm-agents-test-connected-marks-running ()
  (lispm-agents-test--with-registry
    (let ((changes 0))
      (lispm-agents-test--add "codex" 'codex)
      (add-hook 'lispm-agents-changed-hook (lambda () (cl-incf changes)))
      (lispm-sidecar-handle-notification 'lispm/agent-connected '(:name "codex"))
      (should (eq (lispm-agent-state (lispm-agent-get "codex")) 'running))
      (should (= changes 1))
      ;; Unknown names are ignored.
      (lispm-sidecar-handle-notification 'lispm/agent-connected '(:name "nobody"))
      (should (= changes 1)))))

(ert-deftest lispm-agents-test-register-names-numbers-and-announces ()
  (lispm-agents-test--with-registry
    (let* ((changes 0)
           (lispm-agents-changed-hook (list (lambda () (cl-incf changes))))
           (claude (lispm-agents-register 'claude "/tmp"))
           (claude-2 (lispm-agents-register 'claude "/tmp/" nil "session-1")))
      (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude" "claude-2")))
      (should (equal (mapcar #'lispm-agent-serial (list claude claude-2)) '(1 2)))
      (should (equal (lispm-agent-folder claude) "/tmp/"))
      (should (eq (lispm-agent-state claude) 'starting))
      (should-not (lispm-agent-resumes claude))
      (should (equal (lispm-agent-resumes claude-2) "session-1"))
      (should (= changes 2))
      ;; A taken name, a missing folder: nothing registered, nothing announced.
      (should-error (lispm-agents-register 'codex "/tmp/" "claude") :type 'user-error)
      (should-error (lispm-agents-register 'codex "/nonexistent/folder/") :type 'user-error)
      (should (eq (lispm-agent-get "claude") claude))
      (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude" "claude-2")))
      (should (= changes 2)))))

(ert-deftest lispm-agents-test-start-registers-before-the-server-is-up ()
  (lispm-agents-test--with-registry
    (let ((lispm-claude-program "sh")
          (asked nil))
      (cl-letf (((symbol-function 'lispm-sidecar-async-request)
                 (lambda (method params &rest _) (push (cons method params) asked))))
        (lispm-agents-test--add "claude" 'claude)
        (let ((agent (lispm-agent-start 'claude "/tmp")))
          (should (eq (lispm-agent-get "claude-2") agent))
          (should (eq (lispm-agent-state agent) 'starting))
          (should (equal (lispm-agent-folder agent) "/tmp/"))
          (should (equal (caar asked) 'lispm/agent-start))
          (should (equal (seq-take (cdar asked) 8)
                         '(:name "claude-2" :kind "claude" :folder "/tmp" :instance 2))))
        (should-error (lispm-agent-start 'claude "/tmp/" nil "claude") :type 'user-error)
        (should (= (length asked) 1))))))

(ert-deftest lispm-agents-test-unregister-forgets-stops-and-announces ()
  (lispm-agents-test--with-registry
    (let* ((codex (lispm-test-add-agent :folder "/tmp/" :port 4711))
           (changes 0)
           (lispm-agents-changed-hook (list (lambda () (cl-incf changes))))
           (asked nil))
      (cl-letf (((symbol-function 'lispm-sidecar-live-p) (lambda () t))
                ((symbol-function 'lispm-sidecar-async-request)
                 (lambda (method params &rest _) (push (cons method params) asked))))
        (lispm-agents-unregister codex)
        (should-not (lispm-agent-live-p codex))
        (should-not (lispm-agents))
        (should (eq (lispm-agent-state codex) 'exited))
        (should (equal asked '((lispm/agent-stop :name "codex" :instance 1))))
        (should (= changes 1))
        ;; Gone already: nothing more happens.
        (lispm-agents-unregister codex)
        (should (= (length asked) 1))
        (should (= changes 1))
        ;; Its name is free again.
        (should (equal (lispm-agent-name (lispm-test-add-agent :folder "/tmp/")) "codex"))))))

(defconst lispm-agents-test--launch
  '(:url "http://127.0.0.1:4711/mcp"
    :session_id "0b6f2f1c-8a52-4c1e-9c1e-0d7c3c1f6a11"
    :token_file "/run/lispm/agents/1-x-1/token"
    :claude_mcp_config "/run/lispm/agents/1-x-1/claude-mcp.json")
  "Launch facts like the sidecar's.")

(ert-deftest lispm-agents-test-claude-command-points-at-its-config ()
  (lispm-test-with-agent (agent :kind 'claude :folder "/tmp/" :launch lispm-agents-test--launch)
    (let* ((lispm-claude-program "sh")
           (command (lispm-agent-command 'claude agent)))
      (should (equal (cdr command)
                     '("--session-id" "0b6f2f1c-8a52-4c1e-9c1e-0d7c3c1f6a11"
                       "--mcp-config" "/run/lispm/agents/1-x-1/claude-mcp.json"
                       "--allowedTools" "mcp__lispm__*")))
      (should-not (member "--strict-mcp-config" command)))))

(ert-deftest lispm-agents-test-codex-command-keeps-the-token-off-the-command-line ()
  (lispm-test-with-agent (agent :kind 'codex :folder "/tmp/" :launch lispm-agents-test--launch)
    (let* ((lispm-codex-program "sh")
           (command (lispm-agent-command 'codex agent)))
      (should (equal (seq-take command 2) '("/bin/sh" "-c")))
      ;; The token file's path, never a token, and the settings for this run only.
      (should (member "/run/lispm/agents/1-x-1/token" command))
      (should (member "--no-daemon" command))
      (dolist (setting '("mcp_servers.lispm.url=\"http://127.0.0.1:4711/mcp\""
                         "mcp_servers.lispm.bearer_token_env_var=\"LISPM_MCP_TOKEN\""
                         "mcp_servers.lispm.default_tools_approval_mode=\"approve\""
                         "mcp_servers.lispm.tool_timeout_sec=3600"
                         "shell_environment_policy.exclude=[\"LISPM_MCP_TOKEN\"]"))
        (should (member setting command)))
      ;; The launcher reads the token and hands it to Codex only.
      (let ((file (make-temp-file "lispm-token")))
        (unwind-protect
            (progn
              (with-temp-file file (insert "s3cret\n"))
              (should (equal (with-output-to-string
                               (call-process "/bin/sh" nil standard-output nil "-c"
                                             (nth 2 command) file "sh" "-c"
                                             "printf %s \"$LISPM_MCP_TOKEN\""))
                             "s3cret")))
          (delete-file file))))))

(ert-deftest lispm-agents-test-openclaw-command-shows-its-session ()
  (lispm-test-with-agent (agent :name "openclaw-2" :kind 'openclaw :folder "/tmp/"
                                :launch (list :openclaw_session "agent:main:lispm-openclaw-2"
                                              :openclaw_port 18789 :openclaw_token_file nil))
    (let* ((lispm-openclaw-program "sh")
           (lispm-openclaw-node-directory "/opt/node24/bin/"))
      ;; A Gateway with a token in OpenClaw's config: the TUI finds it there.
      (should (equal (cdr (lispm-agent-command 'openclaw agent))
                     '("tui" "--session" "agent:main:lispm-openclaw-2")))
      (let ((environment (lispm-agent-environment 'openclaw agent)))
        (should (string-prefix-p "PATH=/opt/node24/bin:" (car environment)))
        (should (member "OPENCLAW_GATEWAY_PORT=18789" environment)))
      ;; The sidecar tells where OpenClaw and its Node are.
      (let ((options (plist-get (lispm-agent-start-options 'openclaw) :openclaw)))
        (should (equal (plist-get options :program) (executable-find "sh")))
        (should (string-prefix-p "/opt/node24/bin:" (plist-get options :path))))
      ;; LispM's own Gateway token: read from its file by a launcher, never
      ;; on a command line.
      (setf (lispm-agent-launch agent)
            (plist-put (lispm-agent-launch agent) :openclaw_token_file "/state/gw-token"))
      (let ((command (lispm-agent-command 'openclaw agent))
            (file (make-temp-file "lispm-token")))
        (should (equal (seq-take command 2) '("/bin/sh" "-c")))
        (should (equal (nth 3 command) "/state/gw-token"))
        (unwind-protect
            (progn
              (with-temp-file file (insert "gw-s3cret\n"))
              (should (equal (with-output-to-string
                               (call-process "/bin/sh" nil standard-output nil "-c"
                                             (nth 2 command) file "sh" "-c"
                                             "printf %s \"$OPENCLAW_GATEWAY_TOKEN\""))
                             "gw-s3cret")))
          (delete-file file))))))

(ert-deftest lispm-agents-test-all-five-kinds-can-start ()
  (should (equal (sort (mapcar (lambda (kind) (symbol-name (car kind))) lispm-agent-kinds)
                       #'string<)
                 '("claude" "codex" "hermes" "holon" "openclaw"))))

(provide 'lispm-agents-test)
;;; lispm-agents-test.el ends here
