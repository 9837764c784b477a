;;; lispm-e2e-openclaw-remote.el --- A remote OpenClaw answers by its final reply  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_openclaw.py inside a loopback-only network
;; namespace.  OpenClaw's config names a remote Gateway (another real
;; OpenClaw Gateway, with a state of its own, that LispM did not start
;; and whose sessions never get LispM's tools).  Claude asks the session
;; a question and sends it a message; the session's final reply is the
;; answer, recorded in the ledger like any reply.

;;; Code:

(require 'lispm-e2e)

(ert-deftest lispm-e2e-openclaw-remote-answers-by-final-reply ()
  "A remote OpenClaw session gets messages, and its final reply answers a request."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (openclaw (lispm-agent-start 'openclaw (lispm-e2e-project "project"))))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready openclaw)
        (lispm-e2e-wait (lambda () (eq (lispm-agent-state openclaw) 'running))
                        90 "openclaw's session on the remote Gateway")
        (let ((launch (lispm-agent-launch openclaw)))
          (should (eq (plist-get launch :openclaw_remote) t))
          (should (equal (plist-get launch :openclaw_gateway)
                         (getenv "LISPM_E2E_OPENCLAW_REMOTE"))))
        (lispm-e2e-wait-activity openclaw 'idle 60)
        (lispm-e2e-submit claude "Hello Claude.")
        (lispm-e2e-wait-activity claude 'idle 60)
        (lispm-e2e-submit claude "Greet OpenClaw, then ask it for the capital of Italy.")
        (let* ((text (lispm-e2e-wait
                      (lambda () (car (lispm-e2e-tool-results "anthropic" "Greet OpenClaw"
                                                              "ask_agent")))
                      120 "Claude's ask_agent result"))
               (id (progn (should (string-match "asked openclaw, request \\(R[0-9]+\\)" text))
                          (match-string 1 text)))
               (reply (format "[Reply from openclaw to request %s]\nRome, from far away." id)))
          (lispm-e2e-wait (lambda () (cl-some (lambda (r) (equal (plist-get r :prompt) reply))
                                              (lispm-e2e-main-requests "anthropic")))
                          180 "Claude's model to be sent OpenClaw's final reply")
          ;; The ledger holds the answer as openclaw's reply to the request.
          (let ((entries (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 50))
                                    :entries)))
            (should (cl-some (lambda (e) (and (equal (plist-get e :kind) "reply")
                                              (equal (plist-get e :sender) "openclaw")
                                              (equal (plist-get e :request_id) id)
                                              (equal (plist-get e :text)
                                                     "Rome, from far away.")))
                             entries)))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-openclaw-remote)
;;; lispm-e2e-openclaw-remote.el ends here
