;;; lispm-e2e-openclaw.el --- Claude Code asks OpenClaw, on a local Gateway  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_openclaw.py inside a loopback-only network
;; namespace, with the scripted gateway playing both models (the script
;; is in that file).  Real Claude Code and real OpenClaw (Gateway and
;; TUI, from `LISPM_OPENCLAW_BIN').
;;
;; No Gateway is configured, so LispM starts one.  OpenClaw's session is
;; kept busy by a slow turn typed into its TUI; Claude asks it a question
;; meanwhile.  The request waits until the turn is over, then goes in
;; through the Gateway's `agent' request; OpenClaw's model answers with
;; LispM's `reply' tool, which only its own session is given, and
;; Claude's next input is the reply.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-openclaw--config ()
  "Return OpenClaw's config file in the test's home, parsed."
  (json-parse-string
   (with-temp-buffer
     (insert-file-contents (lispm-e2e-dir "home" ".openclaw" "openclaw.json"))
     (buffer-string))
   :object-type 'alist :false-object :false))

(defun lispm-e2e-openclaw--servers ()
  "Return the names of the MCP servers in OpenClaw's config, as strings."
  (mapcar (lambda (entry) (symbol-name (car entry)))
          (alist-get 'servers (alist-get 'mcp (lispm-e2e-openclaw--config)))))

(defun lispm-e2e-openclaw--tool-search ()
  "Return `tools.toolSearch' in OpenClaw's config: nil if unset, :false if false."
  (let ((tools (alist-get 'tools (lispm-e2e-openclaw--config))))
    (alist-get 'toolSearch tools)))

(defun lispm-e2e-openclaw--gateway-pid ()
  "Return the pid of the Gateway LispM started, from its pid file."
  (with-temp-buffer
    (insert-file-contents (expand-file-name ".local/state/lispm/openclaw-gateway.pid"
                                            (getenv "HOME")))
    (string-to-number (buffer-string))))

(ert-deftest lispm-e2e-openclaw-answers-claude-after-its-run ()
  "A request reaching a busy OpenClaw session waits for the run, then is answered."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (openclaw (lispm-agent-start 'openclaw (lispm-e2e-project "project"))))
        (should (equal (lispm-agent-name openclaw) "openclaw"))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready openclaw)
        ;; The session is on the Gateway LispM started, and reached.
        (lispm-e2e-wait (lambda () (eq (lispm-agent-state openclaw) 'running))
                        90 "openclaw's session on the Gateway")
        (should (equal (plist-get (lispm-agent-launch openclaw) :openclaw_session)
                       "agent:main:lispm-openclaw"))
        (let ((servers (lispm-e2e-openclaw--servers)))
          (should (= (length servers) 1))
          (should (string-match-p "\\`lispm_[0-9]+_openclaw\\'" (car servers))))
        ;; Tool Search was at its default: LispM turned it off, so the tools
        ;; reach the model directly.
        (should (eq (lispm-e2e-openclaw--tool-search) :false))
        (lispm-e2e-wait-activity openclaw 'idle 60)
        ;; Claude's first prompt: it takes messages from now on.
        (lispm-e2e-submit claude "Hello Claude.")
        (lispm-e2e-wait-activity claude 'idle 60)
        ;; OpenClaw's user starts a slow turn.
        (lispm-e2e-submit openclaw "Take your time with the long job.")
        (lispm-e2e-wait-activity openclaw 'busy 60)
        (lispm-e2e-submit claude "Ask OpenClaw for the capital of France.")
        (let ((id (lispm-e2e-asked "anthropic" "Ask OpenClaw" "openclaw")))
          ;; The request came while OpenClaw's run was going: it waits.
          (should (eq (lispm-agent-activity openclaw) 'busy))
          (should (equal (plist-get (lispm-e2e-ledger-entry "request" id) :state) "queued"))
          (lispm-e2e-wait-prompt
           "anthropic" (format "[Reply from openclaw to request %s]\nParis." id) 180)
          (lispm-e2e-wait-activity openclaw 'idle 60)
          (should (string-search "Finished the long job"
                                 (lispm-term-text (lispm-agent-buffer openclaw)))))
        ;; The sidecar dies.  The next one finds the Gateway still there,
        ;; gives the session its server back, and messages go on.
        (let ((old-pid (lispm-sidecar-pid))
              (gateway (lispm-e2e-openclaw--gateway-pid)))
          (should (process-attributes gateway))
          (signal-process old-pid 'SIGKILL)
          (lispm-e2e-wait (lambda () (and (lispm-sidecar-live-p)
                                          (not (eql (lispm-sidecar-pid) old-pid))))
                          20 "the sidecar to restart")
          ;; Claude's server must be back before its model calls a tool;
          ;; OpenClaw's may still be on its way.
          (lispm-e2e-wait (lambda () (lispm-e2e-served-p "claude")) 30
                          "Claude's server to be back")
          (lispm-e2e-submit claude "Tell OpenClaw we are back.")
          (lispm-e2e-wait-prompt "chat" "[Message from claude]\nStill there after the restart?"
                                 120)
          ;; Closing the terminal takes the server out of the Gateway's
          ;; config, and Tool Search back to its default.
          (lispm-agent-close openclaw)
          (lispm-e2e-wait (lambda () (and (null (lispm-e2e-openclaw--servers))
                                          (null (lispm-e2e-openclaw--tool-search))))
                          30 "the Gateway's config to be as it was")
          ;; The new sidecar took the Gateway over: it stops it in turn.
          (should (equal (lispm-e2e-openclaw--gateway-pid) gateway))
          (lispm-e2e-cleanup)
          (lispm-e2e-wait (lambda () (null (process-attributes gateway)))
                          20 "the Gateway LispM started to stop")))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-openclaw)
;;; lispm-e2e-openclaw.el ends here
