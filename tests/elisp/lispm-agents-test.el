;;; lispm-agents-test.el --- Tests of the agent registry and the adapters  -*- lexical-binding: t; -*-

;;; Commentary:

;; The registry, naming, the adapters' command lines and the user's
;; mistakes.  The real CLIs run in tests/e2e; here nothing is started
;; but the sidecar.

;;; Code:

(require 'ert)
(require 'lispm)

(defmacro lispm-agents-test--with-registry (&rest body)
  "Run BODY with an empty agent registry of its own."
  (declare (indent 0) (debug t))
  `(let ((lispm-agents--by-name (make-hash-table :test #'equal))
         (lispm-agents--serial 0)
         (lispm-agents-changed-hook nil))
     ,@body))

(defun lispm-agents-test--add (name kind)
  "Put a fake live agent NAME of KIND in the registry."
  (puthash name (lispm-agent--make :name name :kind kind :folder "/tmp/"
                                   :serial (cl-incf lispm-agents--serial))
           lispm-agents--by-name))

(ert-deftest lispm-agents-test-names-count-up-and-reuse-gaps ()
  (lispm-agents-test--with-registry
    (should (equal (lispm-agents--unique-name 'claude) "claude"))
    (lispm-agents-test--add "claude" 'claude)
    (should (equal (lispm-agents--unique-name 'claude) "claude-2"))
    (lispm-agents-test--add "claude-2" 'claude)
    (lispm-agents-test--add "codex" 'codex)
    (should (equal (lispm-agents--unique-name 'claude) "claude-3"))
    (should (equal (lispm-agents--unique-name 'codex) "codex-2"))
    (remhash "claude" lispm-agents--by-name)
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
    (should (equal (lispm-sidecar-handle-request 'emacs/list-agents nil)
                   '(:agents [(:name "claude" :kind "claude" :folder "/tmp" :state "running")
                              (:name "codex" :kind "codex" :folder "/tmp" :state "starting")])))
    (clrhash lispm-agents--by-name)
    (should (equal (lispm-sidecar-handle-request 'emacs/list-agents nil) '(:agents [])))))

(ert-deftest lispm-agents-test-connected-marks-running ()
  (lispm-agents-test--with-registry
    (let ((changes 0))
      (add-hook 'lispm-agents-changed-hook (lambda () (cl-incf changes)))
      (lispm-agents-test--add "codex" 'codex)
      (lispm-sidecar-handle-notification 'lispm/agent-connected '(:name "codex"))
      (should (eq (lispm-agent-state (lispm-agent-get "codex")) 'running))
      (should (= changes 1))
      ;; Unknown names are ignored.
      (lispm-sidecar-handle-notification 'lispm/agent-connected '(:name "nobody"))
      (should (= changes 1)))))

(defun lispm-agents-test--agent-with-launch (kind)
  "Return an agent of KIND with launch facts like the sidecar's."
  (lispm-agent--make :name (symbol-name kind) :kind kind :folder "/tmp/"
                     :launch '(:url "http://127.0.0.1:4711/mcp"
                               :session_id "0b6f2f1c-8a52-4c1e-9c1e-0d7c3c1f6a11"
                               :token_file "/run/lispm/agents/1-x-1/token"
                               :claude_mcp_config "/run/lispm/agents/1-x-1/claude-mcp.json")))

(ert-deftest lispm-agents-test-claude-command-points-at-its-config ()
  (let* ((lispm-claude-program "sh")
         (command (lispm-agent-command 'claude (lispm-agents-test--agent-with-launch 'claude))))
    (should (equal (cdr command)
                   '("--session-id" "0b6f2f1c-8a52-4c1e-9c1e-0d7c3c1f6a11"
                     "--mcp-config" "/run/lispm/agents/1-x-1/claude-mcp.json"
                     "--allowedTools" "mcp__lispm__*")))
    (should-not (member "--strict-mcp-config" command))))

(ert-deftest lispm-agents-test-codex-command-keeps-the-token-off-the-command-line ()
  (let* ((lispm-codex-program "sh")
         (command (lispm-agent-command 'codex (lispm-agents-test--agent-with-launch 'codex))))
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
        (delete-file file)))))

(ert-deftest lispm-agents-test-openclaw-command-shows-its-session ()
  (let* ((lispm-openclaw-program "sh")
         (lispm-openclaw-node-directory "/opt/node24/bin/")
         (agent (lispm-agent--make
                 :name "openclaw-2" :kind 'openclaw :folder "/tmp/"
                 :launch '(:openclaw_session "agent:main:lispm-openclaw-2"
                           :openclaw_port 18789 :openclaw_token_file nil))))
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
        (delete-file file)))))

(ert-deftest lispm-agents-test-all-five-kinds-can-start ()
  (should (equal (sort (mapcar (lambda (kind) (symbol-name (car kind))) lispm-agent-kinds)
                       #'string<)
                 '("claude" "codex" "hermes" "holon" "openclaw"))))

(provide 'lispm-agents-test)
;;; lispm-agents-test.el ends here
