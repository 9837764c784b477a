;;; lispm-e2e-foundation.el --- Real Claude Code and Codex in LispM terminals  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_foundation.py inside a loopback-only network
;; namespace, with the scripted gateway answering both CLIs.  The script
;; makes each model call `list_agents' when a prompt says "list agents",
;; then echo the result.
;;
;; What is checked: each real CLI reaches its own MCP server (the answer
;; says which agent asked, and only that agent's token opens its server);
;; the answer names both agents with their folders; the list shows both,
;; running; after the sidecar is SIGKILLed both servers come back on the
;; same ports with the same tokens and the running CLIs keep working;
;; closing an agent, even mid-start, leaves the list and the sidecar true.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-foundation--ask-both (claude codex prompt)
  "Send PROMPT to CLAUDE and CODEX; return their `list_agents' answers.
The value is ((YOU . AGENTS) for Claude, (YOU . AGENTS) for Codex)."
  (lispm-e2e-submit claude prompt)
  (lispm-e2e-submit codex prompt)
  (let ((claude-text
         (lispm-e2e-wait (lambda () (car (lispm-e2e-tool-results "anthropic" prompt "list_agents")))
                         90 (format "Claude's list_agents result for %S" prompt)))
        (codex-text
         (lispm-e2e-wait (lambda () (car (lispm-e2e-tool-results "responses" prompt "list_agents")))
                         90 (format "Codex's list_agents result for %S" prompt))))
    (list (lispm-e2e-parse-agents claude-text) (lispm-e2e-parse-agents codex-text))))

(defun lispm-e2e-foundation--folders (agents)
  "Return AGENTS, plists from `list_agents', as an alist of name to folder."
  (sort (mapcar (lambda (a) (cons (plist-get a :name) (plist-get a :folder))) agents)
        (lambda (a b) (string< (car a) (car b)))))

(defun lispm-e2e-foundation--expected-folders ()
  "Return the folders both agents must report, as an alist."
  `(("claude" . ,(directory-file-name (lispm-e2e-project "proj-a")))
    ("codex" . ,(directory-file-name (lispm-e2e-project "proj-b")))))

(defun lispm-e2e-foundation--served ()
  "Return the sidecar's agents as an alist of name to port."
  (sort (mapcar (lambda (a) (cons (plist-get a :name) (plist-get a :port)))
                (plist-get (lispm-sidecar-request 'lispm/agents nil) :agents))
        (lambda (a b) (string< (car a) (car b)))))

(defun lispm-e2e-foundation--start-both ()
  "Start Claude in proj-a and Codex in proj-b at once; return both when ready."
  (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "proj-a")))
        (codex (lispm-agent-start 'codex (lispm-e2e-project "proj-b"))))
    (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude" "codex")))
    (should (eq (lispm-agent-state claude) 'starting))
    (lispm-e2e-wait-ready claude)
    (lispm-e2e-wait-ready codex)
    (list claude codex)))

(defun lispm-e2e-foundation--check-answers (answers)
  "Check ANSWERS from `lispm-e2e-foundation--ask-both'."
  (pcase-let ((`((,claude-you . ,claude-agents) (,codex-you . ,codex-agents)) answers))
    ;; Each server knows whose it is: so each CLI used its own server and token.
    (should (equal claude-you "claude"))
    (should (equal codex-you "codex"))
    (should (equal (lispm-e2e-foundation--folders claude-agents)
                   (lispm-e2e-foundation--expected-folders)))
    (should (equal (lispm-e2e-foundation--folders codex-agents)
                   (lispm-e2e-foundation--expected-folders)))))

(defun lispm-e2e-foundation--check-list (agents)
  "Check that the agent list shows AGENTS with their folders, states and ports."
  (lispm)
  (with-current-buffer lispm-list-buffer-name
    (let ((text (buffer-string)))
      (dolist (agent agents)
        (should (string-match-p
                 (format "%s +%s +%s +%s +%s +0 +%d"
                         (lispm-agent-name agent) (lispm-agent-kind agent)
                         (lispm-actor-effective-role agent)
                         (regexp-quote (abbreviate-file-name (lispm-agent-folder agent)))
                         (lispm-agent-display-state agent)
                         (lispm-agent-port agent))
                 text))))))

(defun lispm-e2e-foundation--scenario (backend)
  "Run both CLIs in BACKEND terminals and check `list_agents' and the list."
  (let ((lispm-terminal-backend backend))
    (lispm-e2e-begin)
  (unwind-protect
        (pcase-let ((`(,claude ,codex) (lispm-e2e-foundation--start-both)))
          (should (eq (lispm-term-backend (lispm-agent-buffer claude)) backend))
          (lispm-e2e-foundation--check-answers
           (lispm-e2e-foundation--ask-both claude codex
                                           (format "list agents please (%s)" backend)))
          (lispm-e2e-wait (lambda () (and (eq (lispm-agent-state claude) 'running)
                                          (eq (lispm-agent-state codex) 'running)))
                          10 "both agents running")
          ;; What each used, from its own records (Claude's transcript,
          ;; Codex's rollout), as the gateway's usage reported it.
          (dolist (agent (list claude codex))
            (lispm-e2e-wait (lambda () (> (or (plist-get (lispm-actor-usage agent) :input) 0) 0))
                            30 (format "%s's usage, from its records" (lispm-agent-name agent))))
          (should (> (plist-get (lispm-actor-usage claude) :output) 0))
          (lispm-e2e-foundation--check-list (list claude codex))
          (list claude codex))
      nil)))

(ert-deftest lispm-e2e-foundation-vterm-and-sidecar-restart ()
  "Both CLIs in vterm; then the sidecar is SIGKILLed; then Codex closes."
  (lispm-e2e-begin)
  (unwind-protect
      (pcase-let* ((`(,claude ,codex) (lispm-e2e-foundation--scenario 'vterm))
                   (ports (lispm-e2e-foundation--served))
                   (old-pid (lispm-sidecar-pid)))
        (should (equal ports `(("claude" . ,(lispm-agent-port claude))
                               ("codex" . ,(lispm-agent-port codex)))))
        ;; The sidecar dies while both agents run.
        (signal-process old-pid 'SIGKILL)
        (lispm-e2e-wait (lambda () (and (lispm-sidecar-live-p)
                                        (not (eql (lispm-sidecar-pid) old-pid))
                                        (= (length (lispm-e2e-foundation--served)) 2)))
                        20 "the restarted sidecar serving both agents")
        (should (equal (lispm-e2e-foundation--served) ports))
        (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude" "codex")))
        ;; The running CLIs use the same port and token without noticing.
        (lispm-e2e-foundation--check-answers
         (lispm-e2e-foundation--ask-both claude codex "list agents again after the restart"))
        ;; `k' in the list closes Codex: it leaves the list, its server stops.
        (lispm)
        (with-current-buffer lispm-list-buffer-name
          (goto-char (point-min))
          (while (not (equal (tabulated-list-get-id) "codex"))
            (forward-line 1))
          (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) t)))
            (call-interactively (keymap-lookup lispm-list-mode-map "k")))
          (should (equal (mapcar #'car tabulated-list-entries) '("claude"))))
        (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude")))
        (lispm-e2e-wait (lambda () (equal (mapcar #'car (lispm-e2e-foundation--served))
                                          '("claude")))
                        10 "Codex's server to stop")
        (lispm-e2e-submit claude "list agents once codex is gone")
        (let ((text (lispm-e2e-wait
                     (lambda () (car (lispm-e2e-tool-results
                                      "anthropic" "once codex is gone" "list_agents")))
                     90 "Claude's list_agents after Codex closed")))
          (should (equal (mapcar (lambda (a) (plist-get a :name))
                                 (cdr (lispm-e2e-parse-agents text)))
                         '("claude")))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-foundation-term ()
  "Both CLIs in built-in term terminals, with LispM's fixes."
  (lispm-e2e-begin)
  (unwind-protect
      (pcase-let ((`(,claude ,codex) (lispm-e2e-foundation--scenario 'term)))
        ;; The fixes keep escape sequences and window titles out of the text.
        (dolist (agent (list claude codex))
          (let ((text (lispm-term-text (lispm-agent-buffer agent))))
            (should-not (string-search "\e" text))
            (should-not (string-match-p "\\]0;" text)))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-foundation-closed-while-starting ()
  "Agents closed mid-start leave no trace; names count up while they live."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((first (lispm-agent-start 'claude (lispm-e2e-project "proj-a")))
             (second (lispm-agent-start 'claude (lispm-e2e-project "proj-a"))))
        (should (equal (mapcar #'lispm-agent-name (list first second)) '("claude" "claude-2")))
        ;; Closed before its server even answered.
        (lispm-agent-close first)
        (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("claude-2")))
        ;; Killed just after its terminal opened, while the CLI boots.
        (lispm-e2e-wait (lambda () (buffer-live-p (lispm-agent-buffer second)))
                        30 "claude-2's terminal")
        (let ((process (lispm-term-process (lispm-agent-buffer second))))
          (kill-buffer (lispm-agent-buffer second))
          (should-not (lispm-agents))
          (lispm-e2e-wait (lambda () (not (process-live-p process))) 10 "claude-2 to end"))
        (lispm-e2e-wait (lambda () (null (lispm-e2e-foundation--served)))
                        10 "the sidecar to stop both servers")
        ;; A third start reuses the first free name.
        (let ((third (lispm-agent-start 'claude (lispm-e2e-project "proj-a"))))
          (should (equal (lispm-agent-name third) "claude"))
          (lispm-e2e-wait-ready third)
          (should (equal (lispm-e2e-foundation--served)
                         `(("claude" . ,(lispm-agent-port third)))))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-foundation)
;;; lispm-e2e-foundation.el ends here
