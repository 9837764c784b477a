;;; lispm-e2e-own-agent.el --- LispM's own agent, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_own_agent.py inside a loopback-only network
;; namespace, with the scripted gateway as the model (see the script
;; there).  A real batch Emacs runs LispM's own agent with the real
;; sidecar: reads that see unsaved text, edits that are one undo step
;; each, a turn reverted, a denial that is a result, failures that stop
;; at a condition with restarts, sessions committed to git and resumed
;; by a second Emacs, compaction, and a buffer killed mid-stream.

;;; Code:

(require 'lispm-e2e-own)
(require 'lispm-skills)
(require 'lispm-web)

;;; 1, 2: reads see unsaved text; each edit is one undo step

(ert-deftest lispm-e2e-own-reads-unsaved-text ()
  "The agent's read_file returns the buffer, unsaved changes included."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (with-current-buffer (find-file-noselect (lispm-e2e-own-file "project" "notes.el"))
      (goto-char (point-min))
      (insert ";; UNSAVED-MARK\n"))
    (lispm-e2e-own-send agent "Read notes.el please")
    (should (string-search "UNSAVED-MARK"
                           (car (lispm-e2e-tool-results "anthropic" "Read notes.el"
                                                        "read_file"))))))

(ert-deftest lispm-e2e-own-reads-the-project-rules ()
  "AGENTS.md goes into the model's system prompt, and again once edited.
The session's header links it."
  (lispm-e2e-own-with (first "project" lispm-e2e-own-trusting)
    (ignore first)
    (let* ((rules (lispm-e2e-own-file "project" "AGENTS.md"))
           (_ (with-temp-file rules (insert "RULE-MARK-ONE: answer in haiku.\n")))
           (agent (lispm-agent (lispm-e2e-project "project"))))
      (unwind-protect
          (progn
            (with-current-buffer (lispm-own-agent-buffer agent)
              (should (string-search (format "#+LISPM_RULES: [[file:%s][AGENTS.md]]" rules)
                                     (buffer-string))))
            (lispm-e2e-own-send agent "Read notes.el please")
            (should (string-search "RULE-MARK-ONE"
                                   (lispm-e2e-own-body
                                    (car (lispm-e2e-own-requests "Read notes.el")))))
            (with-temp-file rules (insert "RULE-MARK-TWO: answer in prose, at length.\n"))
            (lispm-e2e-begin)
            (lispm-e2e-own-send agent "Read notes.el please")
            (let ((body (lispm-e2e-own-body (car (lispm-e2e-own-requests "Read notes.el")))))
              (should (string-search "RULE-MARK-TWO" body))
              (should-not (string-search "RULE-MARK-ONE" body))))
        (let ((kill-buffer-query-functions nil))
          (kill-buffer (lispm-own-agent-buffer agent)))))))

(ert-deftest lispm-e2e-own-two-edits-are-two-undo-steps ()
  "Two edits in one turn, the user typing in between: one undo, one edit."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (let ((buffer (find-file-noselect (lispm-e2e-own-file "project" "todo.txt"))))
      (lispm-own-agent-send agent "Make two edits to todo.txt")
      (lispm-e2e-own-approve)
      (lispm-e2e-wait (lambda () (with-current-buffer buffer
                                   (string-search "FIRST" (buffer-string))))
                      30 "the first edit")
      ;; The user types, as a command would.
      (with-current-buffer buffer
        (undo-boundary)
        (goto-char (point-max))
        (insert "typed by the user\n")
        (undo-boundary))
      ;; The second is approved from its TODO item in the agent's buffer.
      (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30 "the second approval")
      (with-current-buffer (lispm-own-agent-buffer agent)
        (goto-char (point-max))
        (should (re-search-backward "^\\*+ TODO " nil t))
        (lispm-own-agent-send-input))
      (lispm-e2e-own-settle agent)
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (= 2 (how-many "^\\*+ DONE " (point-min) (point-max)))))
      (with-current-buffer buffer
        (should (string-search "SECOND" (buffer-string)))
        (let ((last-command nil)) (undo))
        (should-not (string-search "SECOND" (buffer-string)))
        (should (string-search "FIRST" (buffer-string)))
        (should (string-search "typed by the user" (buffer-string))))
      ;; The request after the second edit holds both results.
      (let ((last (car (last (lispm-e2e-own-requests "Make two edits")))))
        (should (= 2 (length (plist-get last :tool_results)))))
      ;; The session reads back as the model answered: two answers of one
      ;; call each (not one of two calls), the conversation the next turn
      ;; sends and the prompt cache's prefix.
      (let ((turn (cdar (lispm-own-agent-turns agent))))
        (should (equal (last (lispm-session-messages (lispm-own-agent-buffer agent)) 5)
                       (last (lispm-turn-messages turn) 5)))
        (should (equal (mapcar (lambda (m) (length (plist-get m :tool_calls)))
                               (cl-remove "assistant" (lispm-turn-messages turn)
                                          :key (lambda (m) (plist-get m :role))
                                          :test-not #'equal))
                       '(1 1 0)))))))

;;; 3: revert a whole turn

(ert-deftest lispm-e2e-own-revert-a-turn ()
  "A turn edits two files and creates a third; reverting restores them all.
The user's later edit elsewhere survives; an edit of the agent's text
is a conflict, and nothing changes."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let* ((todo (lispm-e2e-own-file "project" "todo.txt"))
           (notes (lispm-e2e-own-file "project" "notes.el"))
           (created (lispm-e2e-own-file "project" "new-file.txt"))
           (todo-before (with-temp-buffer (insert-file-contents todo) (buffer-string)))
           (notes-before (with-temp-buffer (insert-file-contents notes) (buffer-string))))
      (should (eq 'done (lispm-turn-state
                         (lispm-e2e-own-send agent "Change two files and make one"))))
      (should (file-exists-p created))
      (with-current-buffer (find-file-noselect notes)
        (goto-char (point-max))
        (insert ";; the user's own line\n"))
      (lispm-own-agent-revert-turn agent (car (car (lispm-own-agent-turns agent))))
      (should-not (file-exists-p created))
      (should (equal (with-current-buffer (find-file-noselect todo) (buffer-string))
                     todo-before))
      (with-current-buffer (find-file-noselect notes)
        (should (equal (buffer-string) (concat notes-before ";; the user's own line\n")))))
    ;; The user edits the text the agent wrote: a conflict.
    (should (eq 'done (lispm-turn-state
                       (lispm-e2e-own-send agent "Change two files and make one"))))
    (let ((todo (find-file-noselect (lispm-e2e-own-file "project" "todo.txt"))))
      (with-current-buffer todo
        (goto-char (point-min))
        (should (search-forward "AGENT-LINE" nil t))
        (replace-match "USER-CHANGED"))
      (let ((before (with-current-buffer todo (buffer-string))))
        (should-error (lispm-own-agent-revert-turn agent (car (car (lispm-own-agent-turns agent))))
                      :type 'lispm-revert-conflict)
        (should (equal (with-current-buffer todo (buffer-string)) before))
        (should (file-exists-p (lispm-e2e-own-file "project" "new-file.txt")))))))

;;; 3b: rewind with choices, undone; a fork

(defun lispm-e2e-own--text (file)
  "Return FILE's text on disk."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(defun lispm-e2e-own--last-body (prompt-part)
  "Return the body of the newest request whose prompt holds PROMPT-PART."
  (lispm-e2e-own-body (car (last (lispm-e2e-own-requests prompt-part)))))

(ert-deftest lispm-e2e-own-rewind-undo-and-fork ()
  "Rewind code and conversation to a turn, undo it after the user typed, fork earlier."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (require 'lispm-rewind)
    (let* ((todo (lispm-e2e-own-file "project" "todo.txt"))
           (notes (lispm-e2e-own-file "project" "notes.el"))
           (created (lispm-e2e-own-file "project" "new-file.txt"))
           (todo-before (lispm-e2e-own--text todo))
           (notes-before (lispm-e2e-own--text notes)))
      (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "My name is Ada."))))
      (should (eq 'done (lispm-turn-state
                         (lispm-e2e-own-send agent "Change two files and make one"))))
      (let ((todo-after (lispm-e2e-own--text todo))
            (notes-after (lispm-e2e-own--text notes)))
        ;; Both: the files as before turn 2, the turn out of the conversation.
        (lispm-rewind-both agent 2)
        (should (equal (lispm-e2e-own--text todo) todo-before))
        (should (equal (lispm-e2e-own--text notes) notes-before))
        (should-not (file-exists-p created))
        (should-error (lispm-own-agent-revert-turn agent 2) :type 'user-error)
        (with-current-buffer (lispm-own-agent-buffer agent)
          (should (string-match-p "^\\* Turn 2: .*:REWOUND:$" (buffer-string)))
          ;; The turn's words are back in the input area.
          (should (string-search "Change two files" (lispm-session-input (current-buffer))))
          (lispm-session-take-input (current-buffer)))
        (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "What is my name?"))))
        (let ((body (lispm-e2e-own--last-body "What is my name?")))
          (should (string-search "My name is Ada." body))
          (should-not (string-search "Change two files" body)))
        ;; The user types at the top of notes.el; the undo keeps it.
        (with-current-buffer (find-file-noselect notes)
          (goto-char (point-min))
          (insert ";; the user's own line\n")
          (save-buffer))
        (lispm-rewind-undo agent 2)
        (should (equal (lispm-e2e-own--text todo) todo-after))
        (should (equal (lispm-e2e-own--text notes) (concat ";; the user's own line\n" notes-after)))
        (should (file-exists-p created))
        (should-not (plist-get (nth 1 (lispm-session-turns (lispm-own-agent-buffer agent)))
                               :rewound))
        ;; Undone twice: nothing more to undo.
        (should-error (lispm-rewind-undo agent 2) :type 'user-error)
        ;; A fork at turn 1 knows only turn 1; the first session goes on as it was.
        (let* ((session (with-current-buffer (lispm-own-agent-buffer agent)
                          (buffer-string)))
               (fork (lispm-rewind-fork agent 1)))
          (unwind-protect
              (progn
                (should-not (eq fork agent))
                (should (eq 'done (lispm-turn-state (lispm-e2e-own-send fork "Thank you."))))
                (let ((body (lispm-e2e-own--last-body "Thank you.")))
                  (should (string-search "My name is Ada." body))
                  (should-not (string-search "Change two files" body))
                  (should-not (string-search "What is my name?" body)))
                (let ((now (with-current-buffer (lispm-own-agent-buffer agent) (buffer-string))))
                  (should (string-search "* Turn 3: What is my name?" now))
                  (should-not (string-search "Thank you." now))
                  (should (string-prefix-p (substring session 0 (string-search "* Your message" session))
                                           now))))
            (let ((kill-buffer-query-functions nil))
              (kill-buffer (lispm-own-agent-buffer fork)))))
        ;; Summarised from turn 2 on; turn 1 stays whole.
        (lispm-rewind-summarize agent 2)
        (lispm-e2e-wait (lambda () (not (lispm-own-agent-busy-p agent))) 30 "the summary")
        (with-current-buffer (lispm-own-agent-buffer agent)
          (should (string-match-p "^\\* Summary of turns 2-3$" (buffer-string)))
          (should (string-match-p "^\\* Turn 2: .*:ARCHIVE:$" (buffer-string)))
          (should-not (string-match-p "^\\* Turn 1: .*:ARCHIVE:" (buffer-string))))
        (let ((messages (lispm-session-messages (lispm-own-agent-buffer agent))))
          (should (equal (plist-get (nth 1 messages) :content) "Hello, Ada."))
          (should (string-prefix-p "Summary of turns 2-3:"
                                   (plist-get (car (last messages)) :content))))))))

;;; 3c: a plan the user edits

(ert-deftest lispm-e2e-own-plan-the-user-edits ()
  "The agent writes a plan; the user cancels a step; the next request has the edited plan."
  (lispm-e2e-own-with (agent "project" (list (cons 'default (lispm-policy-rules 'default))))
    (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "Plan the parser fix"))))
    (should (equal (lispm-actor-step agent) "2/3 Write the test"))
    (lispm)
    (with-current-buffer "*LispM*"
      (should (string-search "idle: 2/3 Write the test" (buffer-string))))
    (with-current-buffer (lispm-own-agent-buffer agent)
      (goto-char (point-min))
      (should (re-search-forward "^\\*\\*\\* TODO Fix the colon case$" nil t))
      (replace-match "*** CANCELLED Fix the colon case"))
    (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "Thank you."))))
    (let ((body (lispm-e2e-own--last-body "Thank you.")))
      (should (string-search "[x] Read the parser\\n[>] Write the test\\n[-] Fix the colon case"
                             body)))))

;;; 3d: the model switched mid-session, across dialects

(ert-deftest lispm-e2e-own-switch-model-across-dialects ()
  "A tool call on Anthropic's dialect, then the model switched to Chat Completions."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "Read notes.el please"))))
    (with-current-buffer (lispm-own-agent-buffer agent)
      (cl-letf (((symbol-function 'completing-read) (lambda (&rest _) "backup")))
        (call-interactively (keymap-lookup lispm-own-agent-mode-map "C-c C-m"))))
    (should (equal (lispm-own-agent-model agent) "backup"))
    (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "What is my name?"))))
    (let* ((request (car (last (lispm-e2e-own-requests "What is my name?"))))
           (body (lispm-e2e-own-body request)))
      ;; Chat Completions got the whole history: the call and its result.
      (should (string-search "scripted-backup" body))
      (should (string-search "\"tool_calls\"" body))
      (should (string-search "\"role\":\"tool\"" body))
      (should (string-search "Read notes.el please" body)))
    (with-current-buffer (lispm-own-agent-buffer agent)
      (let ((text (buffer-string)))
        (should (string-match-p "^#\\+LISPM_MODEL: backup$" text))
        (should (string-match-p ":LISPM_MODEL: scripted\n[^*]*\nRead notes.el please" text))
        (should (string-match-p ":LISPM_MODEL: backup\n[^*]*\nWhat is my name" text))
        (should (string-search ": Model: backup, after scripted" text))))))

;;; 3e: tokens, cost and a budget

(ert-deftest lispm-e2e-own-budget-stops-at-a-restart ()
  "A budget of one token stops the turn before its second request; raised, it goes on."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((lispm-own-agent-budget '(:turn-tokens 1))
          (lispm-models (mapcar (lambda (model)
                                  (append model '(:price (:input 3 :output 15))))
                                lispm-models)))
      (let ((turn (lispm-e2e-own-send agent "Read notes.el please")))
        (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-budget-exceeded))
        (should (= 1 (length (lispm-e2e-own-requests "Read notes.el please"))))
        (should (> (plist-get (lispm-turn-spent turn) :input) 0))
        (should (> (plist-get (lispm-turn-spent turn) :cost) 0))
        (lispm-turn-restart turn 'raise-budget 1000000)
        (lispm-e2e-own-settle agent)
        (should (eq (lispm-turn-state turn) 'done))
        (should (equal (lispm-own-agent-budget-of agent) '(:turn-tokens 1000000))))
      (let ((usage (lispm-actor-usage agent)))
        (should (> (plist-get usage :input) 0))
        (should (> (plist-get usage :cost) 0)))
      (should (string-match-p
               "^- Used in this session: [0-9]+ input ([0-9]+ cached), [0-9]+ output tokens, \\$"
               (with-current-buffer (lispm-inspect agent) (buffer-string))))
      ;; The second request read from the cache what the first wrote, as the
      ;; gateway counts it from what it got.
      (should (> (plist-get (lispm-actor-usage agent) :cached) 0))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-match-p "^:LISPM_USAGE: [0-9]+ [0-9]+ [1-9][0-9]* 0 [0-9.]+$"
                                (buffer-string)))
        (should (string-match-p
                 "^#\\+LISPM_USAGE: .*input ([1-9][0-9]* cached), [0-9]+ output tokens, \\$"
                 (buffer-string)))))))

;;; 3e': reasoning, folded in its answer and sent back

(ert-deftest lispm-e2e-own-reasoning-folded-and-sent-back ()
  "Anthropic thinking around a tool call: shown folded, sent back signed, read back
from the session in the next turn; Chat Completions' reasoning shown, kept to itself."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((lispm-models (mapcar (lambda (model) (append model '(:reasoning (:budget 4000))))
                                lispm-models)))
      ;; The gateway refuses a request whose turn with tools lacks its signed thinking.
      (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "Read notes.el please"))))
      (let ((body (lispm-e2e-own--last-body "Read notes.el please")))
        (should (string-search "\"type\":\"thinking\"" body))
        (should (string-search "\"signature\":\"" body)))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (goto-char (point-max))
        (should (re-search-backward
                 "^#\\+begin_reasoning :signature [0-9a-f]\\{64\\}\nThe user asked: Read notes.el please. Tool results so far: 1\\.$"
                 nil t))
        (forward-line 1)
        ;; Folded.
        (should (invisible-p (point))))
      ;; The next turn's history comes from the session: the signatures hold.
      (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "What is my name?"))))
      (should (= 2 (cl-count-if (lambda (message) (plist-get message :reasoning))
                                (lispm-session-messages (lispm-own-agent-buffer agent))
                                :end 4)))
      ;; Chat Completions' reasoning shows too, and is not sent back.
      (lispm-own-agent-set-model agent "backup")
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "reasoning stays here, but goes only to the API that wrote it"
                               (buffer-string))))
      (should (eq 'done (lispm-turn-state (lispm-e2e-own-send agent "Thank you, backup"))))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "#+begin_reasoning\nThe user asked: Thank you, backup."
                               (buffer-string))))
      (should (string-search "\"reasoning_effort\":\"low\""
                             (lispm-e2e-own--last-body "Thank you, backup")))
      (should-not (string-search "The user asked: Read notes.el"
                                 (lispm-e2e-own--last-body "Thank you, backup"))))))

;;; 3f: local servers' quirks never kill a turn

(ert-deftest lispm-e2e-own-local-server-quirks ()
  "Each quirk of a local server, a mode of the gateway: the read still runs, the turn ends."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let* ((gateway (getenv "LISPM_E2E_GATEWAY"))
           (quirks '("text-calls" "bare-json" "no-ids" "object-args" "no-usage" "reasoning"
                     "odd-finish"))
           (lispm-models (append lispm-models
                                 (mapcar (lambda (quirk)
                                           (list (concat "local-" quirk) :api 'chat
                                                 :base-url (concat gateway "/v1")
                                                 :model (concat "local " quirk)))
                                         quirks))))
      (dolist (quirk quirks)
        (lispm-own-agent-set-model agent (concat "local-" quirk))
        (let ((turn (lispm-e2e-own-send agent (format "Read notes.el please (%s)" quirk))))
          (ert-info ((format "quirk %s" quirk))
            (should (eq (lispm-turn-state turn) 'done))
            (should (string-search "notes-parse-header"
                                   (car (lispm-e2e-tool-results
                                         "chat" (format "(%s)" quirk) "read_file"))))
            (with-current-buffer (lispm-own-agent-buffer agent)
              ;; Reasoning (reasoning_content, a <think> block) is not the
              ;; answer's text: it is the answer's folded reasoning.
              (should-not (cl-some (lambda (message)
                                     (string-search "thinking aloud"
                                                    (or (plist-get message :content) "")))
                                   (lispm-session-messages (current-buffer))))
              (when (equal quirk "reasoning")
                (should (string-search
                         "#+begin_reasoning\nLet me think about it.thinking aloud\n#+end_reasoning"
                         (buffer-string))))
              (should-not (string-search "<tool_call>" (buffer-string))))))))))

;;; 4: a denial is a result

(ert-deftest lispm-e2e-own-denied-edit-is-a-result ()
  "An edit denied with a reason: the model reads the reason; the turn goes on."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (lispm-own-agent-send agent "Edit todo.txt if allowed")
    (lispm-e2e-own-approve t "not that file today")
    (let ((turn (lispm-e2e-own-settle agent)))
      (should (eq (lispm-turn-state turn) 'done))
      (should (string-search "not that file today"
                             (car (lispm-e2e-tool-results "anthropic" "Edit todo.txt if allowed"
                                                          "edit_file"))))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "CANCELLED" (buffer-string)))))))

;;; 4b: an edit decided hunk by hunk; an approval its turn left is withdrawn

(ert-deftest lispm-e2e-own-edit-reviewed-hunk-by-hunk ()
  "The agent rewrites notes.el in two places; the user rejects the first hunk.
Only the second is written, and the model's next request says so."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (let ((notes (lispm-e2e-own-file "project" "notes.el")))
      (lispm-own-agent-send agent "Rewrite notes.el in two places")
      (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30 "the approval of the rewrite")
      (lispm-approvals-show)
      (with-current-buffer lispm-approvals-buffer-name
        (goto-char (text-property-any (point-min) (point-max) 'lispm-approvals-hunk 1))
        (call-interactively (keymap-lookup lispm-approvals-mode-map "k"))
        (goto-char (text-property-any (point-min) (point-max) 'lispm-approvals-hunk 2))
        (call-interactively (keymap-lookup lispm-approvals-mode-map "s")))
      (let ((turn (lispm-e2e-own-settle agent)))
        (should (eq (lispm-turn-state turn) 'done)))
      (let ((text (with-temp-buffer (insert-file-contents notes) (buffer-string))))
        (should (string-search "A tiny note-file parser" text))
        (should (string-search ";; HUNK-TWO" text)))
      (let ((result (car (lispm-e2e-tool-results "anthropic" "Rewrite notes.el" "write_file"))))
        (should (string-search "hunk 2 of 2 applied, 1 rejected" result))
        (should (string-search "Hunk 1 (at line 1) was NOT applied" result))))))

(ert-deftest lispm-e2e-own-interrupt-withdraws-the-approval ()
  "Interrupted while its edit waits for approval: the approval is withdrawn, nothing runs."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (let ((todo (lispm-e2e-own-file "project" "todo.txt")))
      (lispm-own-agent-send agent "Edit todo.txt while I wait")
      (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30 "the approval of the edit")
      ;; What the user types and sends meanwhile answers no approval.
      (with-current-buffer (lispm-own-agent-buffer agent)
        (goto-char (point-max))
        (insert "yes")
        (call-interactively (keymap-lookup lispm-own-agent-mode-map "C-c C-c")))
      (should (= (lispm-approvals-count) 1))
      (should-not (string-search "NEVER" (with-temp-buffer (insert-file-contents todo)
                                                           (buffer-string))))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (call-interactively (keymap-lookup lispm-own-agent-mode-map "C-c C-k")))
      (should (zerop (lispm-approvals-count)))
      (let ((turn (lispm-e2e-own-settle agent)))
        (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-interrupted))
        (lispm-turn-restart turn 'abort))
      ;; The message sent meanwhile is a turn of its own, after.
      (lispm-e2e-wait (lambda () (with-current-buffer (lispm-own-agent-buffer agent)
                                   (string-match-p "^\\* Turn [0-9]+: yes$" (buffer-string))))
                      30 "the queued message's turn")
      (lispm-e2e-own-settle agent)
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "CANCELLED" (buffer-string)))
        (should (string-search "the turn was interrupted" (buffer-string))))
      (with-current-buffer lispm-approvals-buffer-name
        (should (string-search "withdrawn: " (buffer-string))))
      (should-not (string-search "NEVER" (with-temp-buffer (insert-file-contents todo)
                                                           (buffer-string)))))))

;;; 5: failures stop at a condition

(ert-deftest lispm-e2e-own-overloaded-then-other-model ()
  "A 529 stops at the condition buffer; OTHER-MODEL gets the answer from the backup."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Are you overloaded")))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-model-http-error))
      (let ((buffer (get-buffer (lispm-condition-buffer-name turn))))
        (should buffer)
        (with-current-buffer buffer
          (should (string-search "529" (buffer-string)))
          (should (string-search "0: [RETRY]" (buffer-string)))
          (should (string-search "1: [OTHER-MODEL]" (buffer-string)))
          (should (string-search "4: [ABORT]" (buffer-string)))
          (lispm-condition-restart 'other-model "backup")))
      (lispm-e2e-own-settle agent)
      (should (eq (lispm-turn-state turn) 'done))
      (should (lispm-e2e-main-requests "chat" "Are you overloaded"))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "The backup answers." (buffer-string)))))))

(ert-deftest lispm-e2e-own-cut-stream-then-abort ()
  "A stream cut in the middle stops at the condition; ABORT keeps the earlier edit."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Edit then get cut")))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-model-stream-cut))
      (lispm-turn-restart turn 4)
      (should (eq (lispm-turn-state turn) 'aborted))
      (with-current-buffer (find-file-noselect (lispm-e2e-own-file "project" "todo.txt"))
        (should (string-search "KEPT-EDIT" (buffer-string))))
      (should-not (lispm-own-agent-busy-p agent)))))

;;; 6: sessions in git, resumed by a new Emacs

(defun lispm-e2e-own--git (directory &rest args)
  "Return the output of git ARGS in DIRECTORY (a test may wait for git)."
  (with-temp-buffer
    (let ((default-directory directory))
      (apply #'call-process "git" nil t nil args))
    (buffer-string)))

(ert-deftest lispm-e2e-own-sessions-in-git-and-resumed ()
  "Three turns, three commits; the project's git is untouched; a new Emacs resumes."
  (lispm-e2e-own-reset "project")
  (let ((status-before (lispm-e2e-own--git (lispm-e2e-project "project")
                                           "status" "--porcelain"))
        file)
    (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
      (lispm-e2e-own-send agent "My name is Ada.")
      (lispm-e2e-own-send agent "Remember the number 42.")
      (lispm-e2e-own-send agent "Thank you.")
      (setq file (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer agent)))
      (lispm-sessions-wait-for-commits 30)
      (let ((log (lispm-e2e-own--git (file-name-directory file) "log" "--format=%s|%an"
                                     "--" (file-name-nondirectory file))))
        (should (= 3 (length (split-string log "\n" t))))
        (should (string-match-p "turn 3.*|LispM\n.*turn 2.*|LispM\n.*turn 1.*|LispM" log))))
    (should (equal (lispm-e2e-own--git (lispm-e2e-project "project") "status" "--porcelain")
                   status-before))
    ;; A new Emacs resumes the session; its request carries the history.
    (let* ((script (lispm-e2e-dir "resume.el"))
           (output (lispm-e2e-dir "resume-output.txt")))
      (with-temp-file script
        (prin1 `(progn
                  (require 'lispm-own-agent)
                  (setq lispm-models ',(lispm-e2e-own-models)
                        lispm-sessions-directory ,(lispm-e2e-dir "sessions/")
                        lispm-policy-roles ',lispm-e2e-own-trusting)
                  (setenv "LISPM_E2E_KEY" "not-a-real-key")
                  (let ((agent (lispm-own-agent-resume ,file)))
                    (lispm-own-agent-send agent "What is my name?")
                    (let ((deadline (+ (float-time) 60)))
                      (while (and (lispm-own-agent-busy-p agent) (< (float-time) deadline))
                        (accept-process-output nil 0.05)))
                    (lispm-sessions-wait-for-commits 30)
                    (kill-emacs (if (lispm-own-agent-busy-p agent) 1 0))))
               (current-buffer)))
      (should (= 0 (call-process (or (getenv "EMACS") "emacs") nil (list :file output) nil
                                 "--batch" "-Q" "-L" (expand-file-name "elisp" default-directory)
                                 "-l" script)))
      (let ((request (car (lispm-e2e-own-requests "What is my name?"))))
        (should request)
        (should (string-search "My name is Ada." (lispm-e2e-own-body request)))
        (should (string-search "Remember the number 42." (lispm-e2e-own-body request)))))))

;;; 7: compaction

(ert-deftest lispm-e2e-own-compaction-keeps-the-rule ()
  "After compaction the next request is smaller, and the first turn's rule is in it."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (lispm-e2e-own-send agent "Rule: always sign answers with -- Ada.")
    (lispm-e2e-own-send agent "Tell me a long story")
    (lispm-e2e-own-send agent "Tell me another long story")
    (let ((before (length (lispm-e2e-own-body
                           (car (last (lispm-e2e-own-requests "another long story")))))))
      (lispm-own-agent-compact agent)
      (lispm-e2e-wait (lambda () (not (lispm-own-agent-busy-p agent))) 30 "the compaction")
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (string-search "Summary" (buffer-string))))
      (lispm-e2e-own-send agent "After the summary")
      (let ((body (lispm-e2e-own-body (car (last (lispm-e2e-own-requests "After the summary"))))))
        (should (< (length body) before))
        (should (string-search "Rule: always sign answers with -- Ada." body))))))

;;; 8: the buffer killed mid-stream

(ert-deftest lispm-e2e-own-kill-buffer-mid-stream ()
  "Killing the buffer mid-stream signals nothing; the gateway sees the cancel."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (lispm-own-agent-send agent "Stream slowly now")
    (let ((buffer (lispm-own-agent-buffer agent)))
      (lispm-e2e-wait (lambda () (with-current-buffer buffer
                                   (string-search "slowly streaming" (buffer-string))))
                      30 "the first streamed words")
      (let ((kill-buffer-query-functions nil))
        (kill-buffer buffer))
      (should-not (buffer-live-p buffer))
      (should-not (lispm-agent-get (lispm-actor-name agent)))
      (lispm-e2e-wait (lambda () (cl-some (lambda (r) (plist-get r :cancelled))
                                          (lispm-e2e-own-requests "Stream slowly now")))
                      30 "the gateway to log the cancel"))))

;;; Bad input, limits and interrupts

(ert-deftest lispm-e2e-own-model-mistakes-are-results ()
  "An unknown tool and arguments that are not JSON come back as results."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Call things badly")))
      (should (eq (lispm-turn-state turn) 'done))
      (let ((results (plist-get (car (last (lispm-e2e-own-requests "Call things badly")))
                                :tool_results)))
        (should (= 2 (length results)))
        (should (string-search "no tool no_such_tool" (plist-get (aref results 0) :text)))
        (should (string-search "JSON" (plist-get (aref results 1) :text)))))))

(ert-deftest lispm-e2e-own-empty-and-huge-replies ()
  "An empty reply stops at a condition; a 10 MB reply arrives whole."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Say nothing at all")))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-model-malformed-reply))
      (lispm-turn-restart turn 'abort))
    (let ((turn (lispm-e2e-own-send agent "Give a huge answer")))
      (should (equal (list (lispm-turn-state turn) (lispm-turn-condition turn)) '(done nil)))
      (should (>= (length (plist-get (car (last (lispm-turn-messages turn))) :content))
                  10000000))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (should (> (buffer-size) 10000000))))))

(ert-deftest lispm-e2e-own-step-limit-and-repeats ()
  "The step limit and a call failing again and again each stop at a condition."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let* ((lispm-turn-step-limit 3)
           (turn (lispm-e2e-own-send agent "Read forever")))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-step-limit))
      (lispm-turn-restart turn 'abort)
      (should (eq (lispm-turn-state turn) 'aborted)))
    (let ((turn (lispm-e2e-own-send agent "Keep calling the missing tool")))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-repeated-failure))
      (should (= 3 (length (lispm-e2e-tool-results "anthropic" "Keep calling the missing"
                                                   "nope"))))
      (lispm-turn-restart turn 'abort))))

(ert-deftest lispm-e2e-own-tool-error-edit-args ()
  "A tool that fails stops at a condition; EDIT-ARGS runs it with new arguments."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Edit with a typo")))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
      (should (equal (lispm-turn-available-restarts turn)
                     '(retry skip-tool edit-args abort)))
      (lispm-turn-restart turn 3 "{\"path\": \"todo.txt\", \"old\": \"two\\n\", \"new\": \"two FIXED\\n\"}")
      (lispm-e2e-own-settle agent)
      (should (eq (lispm-turn-state turn) 'done))
      (with-current-buffer (find-file-noselect (lispm-e2e-own-file "project" "todo.txt"))
        (should (string-search "two FIXED" (buffer-string)))))
    (let ((turn (lispm-e2e-own-send agent "Edit with a typo")))
      (lispm-turn-restart turn 'skip-tool)
      (lispm-e2e-own-settle agent)
      (should (eq (lispm-turn-state turn) 'done))
      (should (string-search "Error:" (car (last (lispm-e2e-tool-results
                                                  "anthropic" "Edit with a typo"
                                                  "edit_file"))))))))

(ert-deftest lispm-e2e-own-interrupt-and-list ()
  "C-c C-k stops a streaming turn at a condition; the agent is in list_agents."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((listed (cl-find (lispm-actor-name agent)
                           (append (plist-get (lispm-sidecar-dispatch-request
                                               'emacs/list-agents nil)
                                              :agents)
                                   nil)
                           :key (lambda (a) (plist-get a :name)) :test #'equal)))
      (should (equal (plist-get listed :kind) "lispm"))
      (should (equal (plist-get listed :role) "default"))
      (should (equal (plist-get listed :activity) "idle")))
    (lispm-own-agent-send agent "Stream slowly now")
    (let ((buffer (lispm-own-agent-buffer agent)))
      (lispm-e2e-wait (lambda () (with-current-buffer buffer
                                   (string-search "slowly streaming" (buffer-string))))
                      30 "the first streamed words")
      (should (eq (lispm-actor-activity agent) 'thinking))
      (with-current-buffer buffer
        (call-interactively (keymap-lookup lispm-own-agent-mode-map "C-c C-k")))
      (let ((turn (cdr (car (lispm-own-agent-turns agent)))))
        (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-interrupted))
        (lispm-turn-restart turn 'abort)
        (should (eq (lispm-actor-activity agent) 'idle))))))

;;; Lisp as the agent's own language

(ert-deftest lispm-e2e-own-computes-with-eval-elisp ()
  "It defines a recursive function with an approved eval_elisp, and calls it."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (lispm-own-agent-send agent "What is the 30th Fibonacci number? Compute it, don't recall it.")
    (lispm-e2e-own-approve)
    (lispm-e2e-own-approve)
    (let ((turn (lispm-e2e-own-settle agent)))
      (should (eq (lispm-turn-state turn) 'done))
      (should (string-search "832040" (plist-get (car (last (lispm-turn-messages turn)))
                                                 :content)))
      (should (fboundp 'lispm-e2e-fibonacci)))))

(ert-deftest lispm-e2e-own-defines-a-tool-and-calls-it ()
  "A tool it defines with an approved eval_elisp is offered, and called, at its next step."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (unwind-protect
        (progn
          (lispm-own-agent-send agent "Make yourself a shout tool and use it")
          (lispm-e2e-own-approve)
          (let ((turn (lispm-e2e-own-settle agent)))
            (should (eq (lispm-turn-state turn) 'done))
            (let ((requests (lispm-e2e-own-requests "Make yourself a shout tool")))
              (should-not (member "shout" (append (plist-get (car requests) :tools) nil)))
              (should (member "shout" (append (plist-get (cadr requests) :tools) nil))))
            (should (equal (car (last (lispm-e2e-tool-results
                                       "anthropic" "Make yourself a shout tool" "shout")))
                           "HELLO FROM LISP"))))
      (setq lispm-tools (cl-remove "shout" lispm-tools :key #'lispm-tool-name
                                   :test #'equal)))))

(ert-deftest lispm-e2e-own-writes-a-skill-and-loads-it ()
  "It writes a skill, reviewed as Org; its tool is there once trusted and loaded."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (let ((lispm-trust-file (lispm-e2e-dir "trust.eld"))
          (file (lispm-e2e-own-file "project" ".lispm/skills/greeter.org")))
      (unwind-protect
          (progn
            (lispm-own-agent-send agent "Write yourself a skill that greets")
            (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30
                            "the approval of write_skill")
            (let ((target (lispm-approval-target (car (lispm-approvals-pending)))))
              (should (equal (plist-get target :tool) "write_skill"))
              (should (equal (plist-get target :files) (list (file-truename file))))
              (should (string-prefix-p "#+title: Greeter\n" (plist-get target :org)))
              (should (string-search "(lispm-define-tool e2e-greet" (plist-get target :org))))
            (with-current-buffer lispm-approvals-buffer-name
              (should (string-search "(lispm-define-tool e2e-greet" (buffer-string))))
            (should-not (file-exists-p file))
            (lispm-e2e-own-approve)
            (should (eq (lispm-turn-state (lispm-e2e-own-settle agent)) 'done))
            (should (file-exists-p file))
            ;; Written, and loaded by the skill tool, but the project is not trusted.
            (let ((results (lispm-e2e-tool-results "anthropic" "Write yourself a skill" "skill")))
              (should (string-search "Created .lispm/skills/greeter.org" (car results)))
              (should (string-search "Nothing in it was run" (car results)))
              (should (string-search "The code of skill greeter was not run: the user does not \
trust the project" (car (last results)))))
            (should-not (lispm-tool-get "e2e_greet"))
            (should-not (fboundp 'lispm-tool-e2e-greet))
            (lispm-trust-project (lispm-e2e-project "project"))
            (should-not (lispm-tool-get "e2e_greet"))
            (should (eq (lispm-turn-state
                         (lispm-e2e-own-send agent "Greet Ada with your greeter skill"))
                        'done))
            (should (lispm-tool-get "e2e_greet"))
            (let ((requests (lispm-e2e-own-requests "Greet Ada with your greeter skill")))
              (should-not (member "e2e_greet" (append (plist-get (car requests) :tools) nil)))
              (should (member "e2e_greet" (append (plist-get (cadr requests) :tools) nil))))
            (should (equal (car (last (lispm-e2e-tool-results
                                       "anthropic" "Greet Ada with your greeter" "e2e_greet")))
                           "Hello, Ada, from a skill!")))
        (setq lispm-tools (cl-remove "e2e_greet" lispm-tools :key #'lispm-tool-name
                                     :test #'equal))))))

;;; The web

(ert-deftest lispm-e2e-own-fetches-a-page ()
  "Its fetch_url asks, the approval shows the URL; allowed, the page reaches the model.
The page is served by tests/fixtures/web-server.py on the port the
script names (test_own_agent.py's WEB_PORT)."
  (let* ((url "http://127.0.0.1:18734/page")
         (server (make-process
                  :name "lispm-e2e-web" :buffer (generate-new-buffer " *lispm-e2e-web*")
                  :command (list "python3" "-u" (expand-file-name "../tests/fixtures/web-server.py"
                                                                  lispm-directory)
                                 "18734")
                  :connection-type 'pipe :noquery t)))
    (unwind-protect
        (progn
          (lispm-e2e-wait (lambda () (with-current-buffer (process-buffer server)
                                       (string-search "PORT 18734" (buffer-string))))
                          30 "the web server")
          (url-do-setup)
          (let ((url-proxy-services nil))
            (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
              (lispm-own-agent-send agent "Fetch the local page, please")
              (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30
                              "the approval of fetch_url")
              (let ((approval (car (lispm-approvals-pending))))
                (should (eq (lispm-approval-kind approval) 'network))
                (should (equal (plist-get (lispm-approval-target approval) :url) url)))
              (with-current-buffer lispm-approvals-buffer-name
                (should (string-search (concat "URL: " url) (buffer-string))))
              ;; Nothing was fetched before the user allowed it.
              (should-not (with-current-buffer (process-buffer server)
                            (string-search "GET /page" (buffer-string))))
              (lispm-e2e-own-approve)
              (should (eq (lispm-turn-state (lispm-e2e-own-settle agent)) 'done))
              (let ((text (car (lispm-e2e-tool-results "anthropic" "Fetch the local page"
                                                       "fetch_url"))))
                (should (string-search "Hello from the page" text))
                (should (string-search "[a relative link](http://127.0.0.1:18734/next)" text))))))
      (delete-process server)
      (kill-buffer (process-buffer server)))))

(provide 'lispm-e2e-own-agent)
;;; lispm-e2e-own-agent.el ends here
