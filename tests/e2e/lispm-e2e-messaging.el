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

(defun lispm-e2e-messaging--asked-id (prompt-part)
  "Return the request id Claude got from ask_agent after PROMPT-PART."
  (let ((text (lispm-e2e-wait
               (lambda () (car (lispm-e2e-tool-results "anthropic" prompt-part "ask_agent")))
               90 "Claude's ask_agent result")))
    (should (string-match "\\`asked codex, request \\(R[0-9]+\\)\\'" text))
    (match-string 1 text)))

(defun lispm-e2e-messaging--wait-prompt (api prompt seconds)
  "Wait up to SECONDS until the model of API is sent PROMPT."
  (lispm-e2e-wait (lambda () (member prompt (lispm-e2e-messaging--prompts api)))
                  seconds (format "the %s model to be sent %S" api prompt)))

(ert-deftest lispm-e2e-messaging-main-scenario ()
  "Claude asks Codex for a review through LispM and gets the answer."
  (setq lispm-e2e-messaging--typed nil)
  (lispm-e2e-begin)
  (unwind-protect
      (pcase-let ((`(,claude ,codex) (lispm-e2e-messaging--start)))
        (lispm-e2e-messaging--type
         claude "Get Codex's review of notes-parse-header in notes.el, please.")
        (let ((id (lispm-e2e-messaging--asked-id "Get Codex's review")))
          ;; Claude's next input is Codex's reply.
          (lispm-e2e-messaging--wait-prompt
           "anthropic" (format "[Reply from codex to request %s]\n%s" id lispm-e2e-messaging-answer)
           120)
          ;; What Codex saw, exactly, and what its tools answered.
          (should (member (format "[Request %s from claude]\nPlease review notes-parse-header in [[file:%snotes.el::9]]: it crashes on a header line with no colon.\n\n(claude waits for your answer: give it with your reply tool, request %s.)"
                                  id (lispm-e2e-project "project") id)
                          (lispm-e2e-messaging--prompts "responses")))
          (should (string-search (format "replied to claude, request %s" id)
                                 (car (lispm-e2e-tool-results "responses" "Please review" "reply"))))
          (should (string-search "(defun notes-parse-header"
                                 (car (lispm-e2e-tool-results "responses" "Please review"
                                                              "exec_command"))))
          ;; The ledger: the request answered, both messages picked up.
          (should (equal (plist-get (lispm-e2e-messaging--entry "request" id) :state) "picked_up"))
          (should (equal (plist-get (lispm-e2e-messaging--entry "request" id) :request_state)
                         "answered"))
          (lispm-e2e-wait (lambda () (equal (plist-get (lispm-e2e-messaging--entry "reply" id)
                                                       :state)
                                            "picked_up"))
                          30 "the reply to be recorded as picked up"))
        ;; The ledger view shows it, newest first, with live agent names.
        (lispm-ledger)
        (with-current-buffer lispm-ledger-buffer-name
          (goto-char (point-min))
          (should (re-search-forward "request +claude +codex +R[0-9]+ answered +picked_up" nil t))
          (goto-char (point-min))
          (should (re-search-forward "reply +codex +claude" nil t))
          (should (eq (button-type (button-at (- (match-end 0) 1))) 'lispm-agent))
          (lispm-ledger-filter "codex")
          (should (string-search "codex" (buffer-string))))
        ;; The test typed only the two first prompts.
        (should (equal (length lispm-e2e-messaging--typed) 2))
        (lispm-e2e-wait-activity claude 'idle 30))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-messaging-sidecar-killed-between-ask-and-reply ()
  "The sidecar dies while a request waits for busy Codex; the reply still comes."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (codex (lispm-agent-start 'codex (lispm-e2e-project "project"))))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready codex)
        ;; Codex is busy for a while, so the request must wait in the ledger.
        (lispm-e2e-submit codex "Work slowly for a moment.")
        (lispm-e2e-wait-activity codex 'busy 30)
        (lispm-e2e-submit claude "Get Codex's review of notes-parse-header in notes.el, please.")
        (let ((id (lispm-e2e-messaging--asked-id "Get Codex's review"))
              (old-pid (lispm-sidecar-pid)))
          (should (equal (plist-get (lispm-e2e-messaging--entry "request" id) :state) "queued"))
          (signal-process old-pid 'SIGKILL)
          (lispm-e2e-wait (lambda () (and (lispm-sidecar-live-p)
                                          (not (eql (lispm-sidecar-pid) old-pid))))
                          20 "the sidecar to restart")
          (lispm-e2e-messaging--wait-prompt
           "anthropic" (format "[Reply from codex to request %s]\n%s" id lispm-e2e-messaging-answer)
           120)
          (should (equal (plist-get (lispm-e2e-messaging--entry "request" id) :request_state)
                         "answered"))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-messaging-codex-closes-before-replying ()
  "Claude is told when the agent it asked closes without replying."
  (lispm-e2e-begin)
  (unwind-protect
      (pcase-let ((`(,claude ,codex) (lispm-e2e-messaging--start)))
        (lispm-e2e-submit claude "Ask Codex once more, please.")
        (let ((id (lispm-e2e-messaging--asked-id "Ask Codex once more")))
          ;; Codex got the request and works on it, slowly; then it closes.
          (lispm-e2e-wait (lambda () (equal (plist-get (lispm-e2e-messaging--entry "request" id)
                                                       :state)
                                            "picked_up"))
                          60 "Codex to pick the request up")
          (lispm-agent-close codex)
          (lispm-e2e-messaging--wait-prompt
           "anthropic"
           (format "[Message from lispm]\ncodex ended without replying to request %s." id) 90)
          (should (equal (plist-get (lispm-e2e-messaging--entry "request" id) :request_state)
                         "ended"))))
    (lispm-e2e-cleanup)))

(defun lispm-e2e-messaging--approval-holds (asker asked ask-prompt message wait-shown)
  "Check that a message from ASKER waits while ASKED shows an approval prompt.
ASKED is told to run a command, which its CLI asks the user to approve;
WAIT-SHOWN is text its terminal shows then.  ASKER, told ASK-PROMPT, sends
ASKED MESSAGE.  Nothing is approved; after Escape declines, MESSAGE arrives."
  (let ((flag (expand-file-name "approved-flag.txt" (lispm-e2e-project "project")))
        (api (if (eq (lispm-agent-kind asked) 'claude) "anthropic" "responses")))
    (lispm-e2e-submit asked "Touch the flag file, please.")
    (lispm-e2e-wait (lambda () (string-search wait-shown (lispm-term-text (lispm-agent-buffer asked))))
                    60 (format "%s's approval prompt" (lispm-agent-name asked)))
    (lispm-e2e-submit asker ask-prompt)
    (lispm-e2e-wait (lambda () (cl-some (lambda (e) (and (equal (plist-get e :kind) "message")
                                                         (equal (plist-get e :sender)
                                                                (lispm-agent-name asker))))
                                        (lispm-e2e-messaging--ledger)))
                    60 "the message in the ledger")
    ;; It waits: queued, nothing pasted into the prompt, nothing approved.
    (lispm-e2e-sleep 5)
    (let ((entry (seq-find (lambda (e) (equal (plist-get e :kind) "message"))
                           (reverse (lispm-e2e-messaging--ledger)))))
      (should (equal (plist-get entry :state) "queued")))
    ;; Claude's records tell an approval prompt apart; Codex's only say busy.
    (should (eq (lispm-agent-activity asked)
                (if (eq (lispm-agent-kind asked) 'claude) 'waiting-for-approval 'busy)))
    (should (eql (lispm-agent-queued asked) 1))
    (should-not (file-exists-p flag))
    (should (string-search wait-shown (lispm-term-text (lispm-agent-buffer asked))))
    ;; The user declines; then the message goes in.
    (lispm-term-send (lispm-agent-buffer asked) "\e")
    (lispm-e2e-messaging--wait-prompt
     api (format "[Message from %s]\n%s" (lispm-agent-name asker) message) 90)
    (should-not (file-exists-p flag))))

(ert-deftest lispm-e2e-messaging-waits-out-codex-approval-prompt ()
  "A message for Codex waits while Codex asks to run a command."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (codex (lispm-agent-start 'codex (lispm-e2e-project "project"))))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready codex)
        (lispm-e2e-messaging--approval-holds claude codex "Tell Codex the news, please."
                                             "FYI: tests pass." "Would you like to run"))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-messaging-waits-out-claude-approval-prompt ()
  "A message for Claude waits while Claude asks to run a command."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (codex (lispm-agent-start 'codex (lispm-e2e-project "project"))))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready codex)
        (lispm-e2e-messaging--approval-holds codex claude "Tell Claude the news, please."
                                             "FYI: build is green." "Do you want to proceed")
        (lispm-e2e-wait-activity claude 'idle 30))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-messaging)
;;; lispm-e2e-messaging.el ends here
