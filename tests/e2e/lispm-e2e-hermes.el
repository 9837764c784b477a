;;; lispm-e2e-hermes.el --- Hermes talks to Claude Code through LispM  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_hermes.py inside a loopback-only network
;; namespace, with the scripted gateway playing both models (the script
;; is in that file).  Real Hermes (from `LISPM_HERMES_VENV') and real
;; Claude Code.
;;
;; `lispm-hermes-setup' adds LispM's bridge to the seeded config.yaml;
;; Hermes's model calls `ask_agent' to Claude through the bridge,
;; Claude's model answers with `reply', and Hermes's next input is the
;; reply.  A message from Claude waits while Hermes asks to confirm
;; `/new' (its Return would answer the dialog), then reaches the new
;; session, which the terminal follows.  When Hermes's terminal closes, its
;; bridge process is gone.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-hermes--program ()
  "Return the pinned Hermes executable."
  (expand-file-name "bin/hermes" (or (getenv "LISPM_HERMES_VENV")
                                     (error "LISPM_HERMES_VENV is not set"))))

(defun lispm-e2e-hermes--bridges (url)
  "Return the pids of LispM bridge processes whose LISPM_MCP_URL is URL."
  (cl-loop for pid in (list-system-processes)
           for dir = (format "/proc/%d/" pid)
           for cmdline = (ignore-errors
                           (with-temp-buffer
                             (insert-file-contents-literally (concat dir "cmdline"))
                             (buffer-string)))
           when (and cmdline (string-search "lispm_sidecar.bridge" cmdline)
                     (ignore-errors
                       (with-temp-buffer
                         (insert-file-contents-literally (concat dir "environ"))
                         (string-search (concat "LISPM_MCP_URL=" url "\0")
                                        (buffer-string)))))
           collect pid))

(defun lispm-e2e-hermes--session (&optional name)
  "Return the Hermes session the watcher of NAME (default hermes) is bound to."
  (let ((served (plist-get (lispm-sidecar-request 'lispm/agents nil) :agents)))
    (plist-get (plist-get (cl-find (or name "hermes") served
                                   :key (lambda (a) (plist-get a :name)) :test #'equal)
                          :watching)
               :session_id)))

(defun lispm-e2e-hermes--dialog-p (agent)
  "Return non-nil while AGENT, a Hermes, shows a confirmation dialog."
  (lispm-agent-dialog 'hermes (lispm-agent-buffer agent)))

(defun lispm-e2e-hermes--message-to-hermes ()
  "Return the newest plain message to hermes in the ledger."
  (cl-find-if (lambda (e) (and (equal (plist-get e :kind) "message")
                               (equal (plist-get e :recipient) "hermes")))
              (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 50)) :entries)))

(defun lispm-e2e-hermes--prompts ()
  "Return the distinct prompts Hermes's model (Chat Completions) was sent."
  (seq-uniq (mapcar (lambda (r) (plist-get r :prompt)) (lispm-e2e-main-requests "chat"))))

(ert-deftest lispm-e2e-hermes-asks-claude ()
  "Hermes asks Claude through the bridge; Claude's reply is Hermes's next input."
  (lispm-e2e-begin)
  (let ((lispm-hermes-program (lispm-e2e-hermes--program))
        (lispm-hermes-config-file (lispm-e2e-dir "home" ".hermes" "config.yaml")))
    (unwind-protect
        (progn
          ;; The one-time setup, as the user runs it.
          (pcase-let ((`(,code . ,output) (lispm-hermes-setup-run)))
            (should (equal (list code (string-search "added mcp_servers.lispm" output))
                           (list 0 0))))
          (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
                (hermes (lispm-agent-start 'hermes (lispm-e2e-project "project"))))
            (should (equal (lispm-agent-name hermes) "hermes"))
            (lispm-e2e-wait-ready claude)
            (lispm-e2e-wait-ready hermes)
            ;; Hermes's bridge reached its server: the agent is running.
            (lispm-e2e-wait (lambda () (eq (lispm-agent-state hermes) 'running))
                            60 "hermes to reach its MCP server")
            (let ((url (plist-get (lispm-agent-launch hermes) :url)))
              (should (lispm-e2e-hermes--bridges url))
              ;; Claude's first prompt: it takes messages from now on.
              (lispm-e2e-submit claude "Hello Claude.")
              (lispm-e2e-wait-activity claude 'idle 60)
              (lispm-e2e-submit hermes "Ask Claude what six times seven is.")
              (let* ((text (lispm-e2e-wait
                            (lambda () (car (lispm-e2e-tool-results "chat" "Ask Claude"
                                                                    "ask_agent")))
                            120 "Hermes's ask_agent result"))
                     (id (progn (should (string-match "asked claude, request \\(R[0-9]+\\)"
                                                      text))
                                (match-string 1 text)))
                     (reply (format "[Reply from claude to request %s]\nForty-two." id)))
                (lispm-e2e-wait (lambda () (member reply (lispm-e2e-hermes--prompts)))
                                180 "Hermes's model to be sent Claude's reply")
                ;; Its records may still say idle from before the reply
                ;; went in: wait for the answer on the screen itself.
                (lispm-e2e-wait (lambda () (string-search
                                            "Claude says:"
                                            (lispm-term-text (lispm-agent-buffer hermes))))
                                60 "Hermes's answer with Claude's reply")
                (lispm-e2e-wait-activity hermes 'idle 60))
              ;; /new: Hermes asks before it drops the conversation.  A
              ;; message that comes meanwhile waits: its Return would answer
              ;; the dialog.  Then the terminal follows the new session.
              (let ((before (lispm-e2e-hermes--session)))
                (should before)
                (lispm-e2e-submit hermes "/new")
                (lispm-e2e-wait (lambda () (lispm-e2e-hermes--dialog-p hermes))
                                30 "Hermes to ask about /new")
                (lispm-e2e-submit claude "Tell Hermes we are still here.")
                (lispm-e2e-wait (lambda () (lispm-e2e-tool-results "anthropic" "Tell Hermes"
                                                                   "send_message"))
                                60 "Claude's send_message")
                (lispm-e2e-sleep 3)
                (should (lispm-e2e-hermes--dialog-p hermes))
                (should (equal (plist-get (lispm-e2e-hermes--message-to-hermes) :state)
                               "queued"))
                (should (equal (lispm-e2e-hermes--session) before))
                ;; The user answers the dialog; the message goes in after.
                (lispm-term-send (lispm-agent-buffer hermes) "1")
                (lispm-e2e-wait-prompt "chat" "[Message from claude]\nStill with me after /new?"
                                       120)
                (lispm-e2e-wait (lambda () (let ((now (lispm-e2e-hermes--session)))
                                             (and now (not (equal now before)))))
                                60 "the watcher to follow the new session")
                (lispm-e2e-wait-activity hermes 'idle 60))
              ;; A second Hermes, in the same folder, is hermes-2, and keeps
              ;; its own session: a message for it goes to it alone.
              (let ((two (lispm-agent-start 'hermes (lispm-e2e-project "project")))
                    (first (lispm-e2e-hermes--session)))
                (should (equal (lispm-agent-name two) "hermes-2"))
                (lispm-e2e-wait-ready two)
                (lispm-e2e-submit two "Hello from the second terminal.")
                (lispm-e2e-wait (lambda () (lispm-e2e-hermes--session "hermes-2"))
                                60 "hermes-2 to bind to its session")
                (should-not (equal (lispm-e2e-hermes--session "hermes-2") first))
                (should (equal (lispm-e2e-hermes--session) first))
                (lispm-e2e-wait-activity two 'idle 60)
                (lispm-e2e-submit claude "Greet the second Hermes.")
                (lispm-e2e-wait-prompt "chat" "[Message from claude]\nHello, second Hermes." 120)
                (lispm-e2e-wait (lambda () (string-search "Hello, second Hermes."
                                                          (lispm-term-text
                                                           (lispm-agent-buffer two))))
                                30 "the message in hermes-2's terminal")
                (should-not (string-search "Hello, second Hermes."
                                           (lispm-term-text (lispm-agent-buffer hermes))))
                (lispm-agent-close two))
              ;; Closing the terminal ends Hermes, and with it its bridge.
              (lispm-agent-close hermes)
              (lispm-e2e-wait (lambda () (null (lispm-e2e-hermes--bridges url)))
                              30 "hermes's bridge to exit"))))
      (lispm-e2e-cleanup))))

(provide 'lispm-e2e-hermes)
;;; lispm-e2e-hermes.el ends here
