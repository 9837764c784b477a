;;; lispm-e2e-room.el --- LispM's own agents in the room, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_room.py inside a loopback-only network
;; namespace, with the scripted gateway playing every model (the script
;; is in that file): real Claude Code and Codex in terminals, LispM's own
;; agents in this Emacs.  Issue 13's scenarios 1, 2, 3, 5 and 6; the
;; restart (4) is lispm-e2e-room-restart.el.

;;; Code:

(require 'lispm-e2e-own)
(require 'lispm-helpers)

(defconst lispm-e2e-room-policy
  '((default (read allow) (introspect allow) (message allow)
             (edit ask) (shell ask) (eval ask)))
  "The user's policy in these tests: every change is asked for.")

(defconst lispm-e2e-room-no-shell
  '((default (read allow) (introspect allow) (message allow)
             (edit ask) (shell deny) (eval deny)))
  "A caller's policy that denies commands and Lisp.")

(defvar lispm-e2e-room--claude nil
  "The Claude Code agent the tests share, started once.")

(defvar lispm-e2e-room--codex nil
  "The Codex agent the tests share, started once.")

(defun lispm-e2e-room--claude ()
  "Return the shared Claude Code agent, started and ready."
  (unless (and lispm-e2e-room--claude (lispm-agent-live-p lispm-e2e-room--claude))
    (setq lispm-e2e-room--claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
    (lispm-e2e-wait-ready lispm-e2e-room--claude))
  lispm-e2e-room--claude)

(defun lispm-e2e-room--codex ()
  "Return the shared Codex agent, started, greeted and idle."
  (unless (and lispm-e2e-room--codex (lispm-agent-live-p lispm-e2e-room--codex))
    (setq lispm-e2e-room--codex (lispm-agent-start 'codex (lispm-e2e-project "project")))
    (lispm-e2e-wait-ready lispm-e2e-room--codex)
    (lispm-e2e-submit lispm-e2e-room--codex "Hello Codex: other agents may ask you things.")
    (lispm-e2e-wait-activity lispm-e2e-room--codex 'idle 60))
  lispm-e2e-room--codex)

(defun lispm-e2e-room--session (agent)
  "Return the text of AGENT's session buffer."
  (with-current-buffer (lispm-own-agent-buffer agent)
    (save-restriction (widen) (buffer-substring-no-properties (point-min) (point-max)))))

(defun lispm-e2e-room--ledger ()
  "Return the ledger's entries, newest first."
  (append (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 200)) :entries) nil))

(defun lispm-e2e-room--request (asker asked &optional state)
  "Return the newest request in the ledger from ASKER to ASKED, or nil.
With STATE, only one in that state (\"open\", \"answered\", ...)."
  (cl-find-if (lambda (entry) (and (equal (plist-get entry :kind) "request")
                                   (equal (plist-get entry :sender) asker)
                                   (equal (plist-get entry :recipient) asked)
                                   (or (null state)
                                       (equal (plist-get entry :request_state) state))))
              (lispm-e2e-room--ledger)))

(defmacro lispm-e2e-room--counting-approvals (counter &rest body)
  "Run BODY, counting in COUNTER, a variable, each approval the user is asked."
  (declare (indent 1))
  `(let ((count (lambda () (setq ,counter (max ,counter (lispm-approvals-count))))))
     (add-hook 'lispm-approvals-changed-hook count)
     (unwind-protect (progn ,@body)
       (remove-hook 'lispm-approvals-changed-hook count))))

(defun lispm-e2e-room--kill (agent)
  "Kill own AGENT's session buffer, ending it."
  (when (buffer-live-p (lispm-own-agent-buffer agent))
    (let ((kill-buffer-query-functions nil))
      (kill-buffer (lispm-own-agent-buffer agent)))))

;;; 1. Claude asks the own agent

(ert-deftest lispm-e2e-room-claude-asks-the-own-agent ()
  "Claude's request reaches the own agent as its input; its reply is Claude's next."
  (let ((claude (lispm-e2e-room--claude)))
    (lispm-e2e-own-with (agent "project" lispm-e2e-room-policy)
      (should (equal (lispm-actor-name agent) "emacs"))
      (lispm-e2e-submit claude "Ask the emacs agent about notes-parse-header, please.")
      (let ((id (lispm-e2e-asked "anthropic" "Ask the emacs agent" "emacs")))
        ;; No composer, no paste: the request is the own agent's turn.
        (lispm-e2e-wait (lambda () (string-search (format "[Request %s from claude]" id)
                                                  (lispm-e2e-room--session agent)))
                        60 "the request in the own agent's session")
        (lispm-e2e-wait (lambda () (lispm-e2e-ledger-entry "reply" id))
                        60 "the own agent's reply in the ledger")
        (let ((answer (lispm-e2e-ledger-entry "reply" id)))
          (should (equal (plist-get answer :sender) "emacs"))
          (should (equal (plist-get answer :recipient) "claude")))
        (lispm-e2e-wait (lambda () (lispm-e2e-main-requests
                                    "anthropic" (format "[Reply from emacs to request %s]" id)))
                        90 "Claude's next input to be the reply")))))

;;; 2. One step asks Codex and another own agent

(ert-deftest lispm-e2e-room-two-asks-in-one-step ()
  "Both asks of one step wait together while Emacs keeps working; each answer lands."
  (let ((codex (lispm-e2e-room--codex))
        (ticks 0) (typed 0) (both-open nil)
        (timer nil))
    (ignore codex)
    (lispm-e2e-own-with (agent "project" lispm-e2e-room-policy)
      (let ((other (lispm-agent (lispm-e2e-project "project")))
            (scratch (get-buffer-create "*lispm-e2e user edits*")))
        (unwind-protect
            (progn
              (should (equal (lispm-actor-name other) "emacs-2"))
              (setq timer (run-at-time 0.1 0.1 (lambda () (cl-incf ticks))))
              (lispm-own-agent-send agent "Ask codex and emacs-2 together, please.")
              (lispm-e2e-wait (lambda () (eq (lispm-actor-activity agent) 'waiting-for-reply))
                              60 "the agent to wait for replies")
              ;; While both work, the user types and the timer ticks.
              (let ((deadline (+ (float-time) 60)))
                (while (and (lispm-turn-live-p (cdr (car (lispm-own-agent-turns agent))))
                            (< (float-time) deadline))
                  (with-current-buffer scratch (insert "x") (cl-incf typed))
                  (when (and (not both-open)
                             (lispm-e2e-room--request "emacs" "codex" "open")
                             (lispm-e2e-room--request "emacs" "emacs-2" "open"))
                    (setq both-open t))
                  (accept-process-output nil 0.05)))
              (let ((turn (lispm-e2e-own-settle agent))
                    (session (lispm-e2e-room--session agent)))
                (should (eq (lispm-turn-state turn) 'done))
                (should both-open)
                (should (> ticks 20))
                (should (> typed 20))
                (should (= (with-current-buffer scratch (buffer-size)) typed))
                (should (string-match-p "Reply from codex to request R[0-9]+\\]\n.*one two three"
                                        session))
                (should (string-match-p "Reply from emacs-2 to request R[0-9]+\\]\n.*teal"
                                        session))))
          (cancel-timer timer)
          (kill-buffer scratch)
          (lispm-e2e-room--kill other))))))

;;; 3. An ask back is refused

(ert-deftest lispm-e2e-room-ask-back-refused ()
  "Asked by emacs, emacs-2 asks emacs back: refused at once, naming the cycle."
  (lispm-e2e-own-with (agent "project" lispm-e2e-room-policy)
    (let ((other (lispm-agent (lispm-e2e-project "project"))))
      (unwind-protect
          (let ((turn (progn (lispm-own-agent-send agent "Ask emacs-2 something it must check with you.")
                             (lispm-e2e-wait (lambda () (lispm-e2e-room--request "emacs" "emacs-2"))
                                             30 "the request to emacs-2")
                             (lispm-e2e-own-settle agent))))
            (should (eq (lispm-turn-state turn) 'done))
            (lispm-e2e-own-settle other)
            (should (string-search "emacs-2 → emacs → emacs-2" (lispm-e2e-room--session other)))
            (should (string-search "I could not ask back: " (lispm-e2e-room--session agent)))
            ;; No request from emacs-2 to emacs was written.
            (should-not (lispm-e2e-room--request "emacs-2" "emacs")))
        (lispm-e2e-room--kill other)))))

;;; 5. Claude gets a reviewer

(ert-deftest lispm-e2e-room-claude-gets-a-reviewer ()
  "A reviewer helper starts in Claude's folder, reads, is refused an edit, replies, retires."
  (let ((claude (lispm-e2e-room--claude))
        (asked 0) (helper nil) (session-file nil))
    (lispm-e2e-room--counting-approvals asked
      (lispm-e2e-own-reset "project")
      (let ((lispm-models (lispm-e2e-own-models))
            (lispm-policy-roles lispm-e2e-room-policy)
            (lispm-sessions-directory (lispm-e2e-dir "sessions/"))
            (process-environment (cons "LISPM_E2E_KEY=not-a-real-key" process-environment))
            (before (file-attribute-modification-time
                     (file-attributes (lispm-e2e-own-file "project" "notes.el")))))
        (lispm-e2e-submit claude "Get a LispM reviewer to look over notes.el, please.")
        (setq helper (lispm-e2e-wait (lambda () (lispm-agent-get "reviewer")) 90
                                     "the reviewer helper"))
        (setq session-file (buffer-local-value 'lispm-session-file
                                               (lispm-own-agent-buffer helper)))
        (should (eq (lispm-actor-role helper) 'reviewer))
        (should (eq (lispm-actor-caller helper) claude))
        (should (equal (lispm-actor-folder helper) (lispm-actor-folder claude)))
        (let ((id (lispm-e2e-asked "anthropic" "Get a LispM reviewer" "reviewer")))
          (lispm-e2e-wait (lambda () (lispm-e2e-ledger-entry "reply" id)) 90
                          "the reviewer's reply in the ledger")
          (should (equal (plist-get (lispm-e2e-ledger-entry "reply" id) :sender) "reviewer"))
          (lispm-e2e-wait (lambda () (not (lispm-agent-live-p helper))) 60
                          "the reviewer to retire")
          (should-not (lispm-agent-get "reviewer"))
          (lispm-e2e-wait (lambda () (lispm-e2e-main-requests
                                      "anthropic"
                                      (format "[Reply from reviewer to request %s]" id)))
                          90 "Claude's next input to be the review"))
        ;; The edit was refused by the role: nothing asked, nothing changed.
        (should (= asked 0))
        (should (equal before (file-attribute-modification-time
                               (file-attributes (lispm-e2e-own-file "project" "notes.el")))))
        ;; Its session stays saved, with the request and the refusal.
        (let ((text (with-temp-buffer (insert-file-contents session-file) (buffer-string))))
          (should (string-search "Please review notes.el for me" text))
          (should (string-search "Refused" text)))))))

;;; 6. A tester under a caller that may not run commands

(ert-deftest lispm-e2e-room-tester-shell-denied-by-caller ()
  "The tester's role asks for shell, its caller's denies it: denied without asking."
  (let ((asked 0))
    (lispm-e2e-room--counting-approvals asked
      (lispm-e2e-own-with (agent "project" lispm-e2e-room-no-shell)
        (let ((turn (progn (lispm-own-agent-send agent "Get a tester to run the tests, please.")
                           (lispm-e2e-own-settle agent))))
          (should (eq (lispm-turn-state turn) 'done))
          (should (= asked 0))
          (let ((session (lispm-e2e-room--session agent)))
            (should (string-match-p "Reply from tester to request R[0-9]+\\]\n.*I could not run it: Refused"
                                    session)))
          (lispm-e2e-wait (lambda () (not (lispm-agent-get "tester"))) 60
                          "the tester to retire"))))))

(provide 'lispm-e2e-room)
;;; lispm-e2e-room.el ends here
