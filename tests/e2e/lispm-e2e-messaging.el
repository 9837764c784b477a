;;; lispm-e2e-messaging.el --- Claude Code and Codex talk through LispM  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_messaging.py inside a loopback-only network
;; namespace, with the scripted gateway playing both models (the script
;; is in that file).  The fixture project holds notes.el, whose
;; `notes-parse-header' crashes on a header line with no colon.
;;
;; The main scenario: the user asks Claude Code to get Codex's review;
;; Claude calls ask_agent and ends its turn; Codex, idle, receives the
;; request in its composer, reads the file and calls reply; Claude's next
;; input is the reply.  After the first prompts the test types nothing.
;; Then: the sidecar SIGKILLed between an ask and its reply; a message
;; held back while each CLI shows an approval prompt; Codex closing before
;; it replies.

;;; Code:

(require 'lispm-e2e)

(defvar lispm-e2e-messaging--typed nil
  "Every text the test typed into a terminal, newest first.")

(defun lispm-e2e-messaging--type (agent text)
  "Type TEXT into AGENT's composer, as the user would, and remember it."
  (push (cons (lispm-agent-name agent) text) lispm-e2e-messaging--typed)
  (lispm-e2e-submit agent text))

(defun lispm-e2e-messaging--start ()
  "Start Claude and Codex in the project, and give each its first prompt.
A just-opened agent has no transcript, so it takes messages only once its
user has spoken to it."
  (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
        (codex (lispm-agent-start 'codex (lispm-e2e-project "project"))))
    (lispm-e2e-wait-ready claude)
    (lispm-e2e-wait-ready codex)
    (lispm-e2e-messaging--type codex "Hello Codex: other agents may ask you for reviews.")
    (lispm-e2e-wait-activity codex 'idle 60)
    (list claude codex)))

(defun lispm-e2e-wait-activity (agent activity seconds)
  "Wait up to SECONDS until AGENT's activity is ACTIVITY."
  (lispm-e2e-wait (lambda () (eq (lispm-agent-activity agent) activity))
                  seconds (format "%s to be %s" (lispm-agent-name agent) activity)))

(defun lispm-e2e-messaging--prompts (api)
  "Return the distinct prompts the model of API was sent, oldest first."
  (seq-uniq (mapcar (lambda (r) (plist-get r :prompt)) (lispm-e2e-main-requests api))))

(defun lispm-e2e-messaging--ledger ()
  "Return the ledger's entries, oldest first."
  (reverse (append (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 1000)) :entries)
                   nil)))

(defun lispm-e2e-messaging--entry (kind request-id)
  "Return the ledger entry of KIND for REQUEST-ID."
  (seq-find (lambda (e) (and (equal (plist-get e :kind) kind)
                             (equal (plist-get e :request_id) request-id)))
            (lispm-e2e-messaging--ledger)))

(defconst lispm-e2e-messaging-answer
  "notes-parse-header takes (substring line 0 colon) with colon nil when the line has no colon, so it signals wrong-type-argument. Check the colon first and return nil for a line without one."
  "What the scripted Codex answers.")

(ert-deftest lispm-e2e-messaging-main-scenario ()
  "Claude asks Codex for a review through LispM and gets the answer."
  (setq lispm-e2e-messaging--typed nil)
  (unwind-protect
      (pcase-let ((`(,claude ,codex) (lispm-e2e-messaging--start)))
        (lispm-e2e-messaging--type
         claude "Get Codex's review of notes-parse-header in notes.el, please.")
        ;; Claude's next input is Codex's reply.
        (let ((reply (format "[Reply from codex to request R1]\n%s" lispm-e2e-messaging-answer)))
          (lispm-e2e-wait (lambda () (member reply (lispm-e2e-messaging--prompts "anthropic")))
                          120 "Claude to receive Codex's reply"))
        ;; What each model saw, exactly.
        (should (equal (car (lispm-e2e-tool-results "anthropic" "Get Codex's review" "ask_agent"))
                       "asked codex, request R1"))
        (should (member (format "[Request R1 from claude]\nPlease review notes-parse-header in [[file:%snotes.el::9]]: it crashes on a header line with no colon.\n\n(claude waits for your answer: give it with your reply tool, request R1.)"
                                (lispm-e2e-project "project"))
                        (lispm-e2e-messaging--prompts "responses")))
        (should (string-search "replied to claude, request R1"
                               (car (lispm-e2e-tool-results "responses" "[Request R1" "reply"))))
        (should (string-search "(defun notes-parse-header"
                               (car (lispm-e2e-tool-results "responses" "[Request R1" "exec_command"))))
        ;; The ledger: the request answered, both messages picked up.
        (should (equal (plist-get (lispm-e2e-messaging--entry "request" "R1") :state) "picked_up"))
        (lispm-e2e-wait (lambda () (equal (plist-get (lispm-e2e-messaging--entry "reply" "R1") :state)
                                          "picked_up"))
                        30 "the reply to be recorded as picked up")
        (should (equal (plist-get (lispm-e2e-messaging--entry "request" "R1") :request_state)
                       "answered"))
        ;; The test typed only the two first prompts.
        (should (equal (length lispm-e2e-messaging--typed) 2))
        (should (eq (lispm-agent-activity claude) 'idle)))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-messaging)
;;; lispm-e2e-messaging.el ends here
