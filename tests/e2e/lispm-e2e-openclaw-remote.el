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
        (let ((id (lispm-e2e-asked "anthropic" "Greet OpenClaw" "openclaw")))
          (lispm-e2e-wait-prompt
           "anthropic" (format "[Reply from openclaw to request %s]\nRome, from far away." id)
           180)
          ;; The ledger holds the answer as openclaw's reply to the request.
          (let ((reply (lispm-e2e-ledger-entry "reply" id)))
            (should (equal (list (plist-get reply :sender) (plist-get reply :text))
                           '("openclaw" "Rome, from far away."))))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-openclaw-remote)
;;; lispm-e2e-openclaw-remote.el ends here
