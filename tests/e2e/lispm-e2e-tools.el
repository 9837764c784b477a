;;; lispm-e2e-tools.el --- Other agents call LispM's tools, under the user's policy  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_tools.py inside a loopback-only network
;; namespace, with the scripted gateway playing both models.  Real Codex
;; searches LispM's tools and edits a file through `call_tool': the
;; approval shows in Emacs with the diff and the test answers it with the
;; approvals buffer's keys, once allowing and once denying with a reason.
;; Real Claude Code asks to run a shell command and is denied; nothing
;; runs.  Real Claude Code's edit of two hunks is decided hunk by hunk:
;; only the accepted one is written, and Claude's model is told which
;; was not.  A project's skill loads only once the project is trusted,
;; and asks again when its code changes.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-tools--approval ()
  "Wait for an approval, then return the approvals buffer with point on it."
  (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 60 "an approval in Emacs")
  (let ((buffer (get-buffer "*LispM approvals*")))
    (with-current-buffer buffer
      (goto-char (point-min))
      (lispm-approvals-next))
    buffer))

(defun lispm-e2e-tools--press (buffer key)
  "Press KEY on the approval at point in BUFFER."
  (with-current-buffer buffer
    (call-interactively (keymap-lookup (current-local-map) key))))

(ert-deftest lispm-e2e-tools-codex-edits-through-an-approval ()
  "Codex finds edit_file, and its edit waits for the user: allowed, then denied."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((project (lispm-e2e-project "project"))
             (notes (find-file-noselect (expand-file-name "notes.el" project)))
             (original (with-current-buffer notes (buffer-string)))
             (codex (lispm-agent-start 'codex project)))
        (lispm-e2e-wait-ready codex)
        (lispm-e2e-submit codex "Search the tools and edit the parser.")
        (let ((approvals (lispm-e2e-tools--approval)))
          (with-current-buffer approvals
            ;; The agent, its role, and the edit as a diff.
            (should (string-search "codex" (buffer-string)))
            (should (string-search "default" (buffer-string)))
            (should (string-search "+    (when colon" (buffer-string))))
          ;; Nothing has changed while the approval waits.
          (should (equal (with-current-buffer notes (buffer-string)) original))
          (lispm-e2e-tools--press approvals "a"))
        (lispm-e2e-wait (lambda () (lispm-e2e-tool-results "responses" "Search the tools" "call_tool"))
                        60 "Codex's call_tool result")
        (should (string-search "edit_file"
                               (car (lispm-e2e-tool-results "responses" "Search the tools" "search_tools"))))
        (with-current-buffer notes
          (should (string-search "(when colon" (buffer-string)))
          (deactivate-mark)
          (let ((last-command nil)) (undo))
          (should (equal (buffer-string) original))
          (save-buffer))
        ;; Denied, with a reason that reaches Codex's model.
        (lispm-e2e-wait-activity codex 'idle 60)
        (lispm-e2e-submit codex "Edit the parser once more.")
        (let ((approvals (lispm-e2e-tools--approval)))
          (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "not now, thanks")))
            (lispm-e2e-tools--press approvals "d")))
        (let ((result (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "responses" "once more" "call_tool")))
                       60 "Codex's denied call_tool result")))
          (should (string-search "not now, thanks" result)))
        (should (equal (with-current-buffer notes (buffer-string)) original))
        ;; Every decision is in the ledger.
        (let ((decisions (append (plist-get (lispm-sidecar-request 'lispm/decisions '(:agent "codex"))
                                            :decisions)
                                 nil)))
          (should (equal (mapcar (lambda (d) (plist-get d :decision)) decisions)
                         '("deny" "allow"))))
        ;; ... and shown in the ledger view, with the reason.
        (lispm-ledger)
        (with-current-buffer lispm-ledger-buffer-name
          (should (string-match-p "decision +codex +.*deny: edit_file notes.el (not now, thanks)"
                                  (buffer-string)))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-tools-claude-shell-denied ()
  "Claude asks to run a shell command through call_tool; it is denied and nothing runs."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((project (lispm-e2e-project "project"))
             (claude (lispm-agent-start 'claude project)))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-submit claude "Run the flag command, please.")
        (let ((approvals (lispm-e2e-tools--approval)))
          (with-current-buffer approvals
            (should (string-search "touch ran-flag.txt" (buffer-string)))
            (should (string-search (directory-file-name project) (buffer-string))))
          (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "no shell today")))
            (lispm-e2e-tools--press approvals "d")))
        (let ((result (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "anthropic" "Run the flag" "call_tool")))
                       60 "Claude's denied call_tool result")))
          (should (string-search "no shell today" result)))
        (should-not (file-exists-p (expand-file-name "ran-flag.txt" project))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-tools-claude-edit-reviewed-hunk-by-hunk ()
  "Claude writes two changes through call_tool; the user takes one hunk, rejects the other."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((project (lispm-e2e-project "project"))
             (file (expand-file-name "notes.el" project))
             (original (with-temp-buffer (insert-file-contents file) (buffer-string)))
             (claude (lispm-agent-start 'claude project)))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-submit claude "Make both changes to notes.el.")
        (let ((approvals (lispm-e2e-tools--approval)))
          (with-current-buffer approvals
            (goto-char (point-min))
            (let ((first (text-property-any (point-min) (point-max) 'lispm-approvals-hunk 1)))
              (should first)
              (goto-char first)
              (should (looking-at "@@ -1,"))
              (lispm-e2e-tools--press approvals "k"))
            (goto-char (text-property-any (point-min) (point-max) 'lispm-approvals-hunk 2))
            ;; The last hunk decided answers the approval.
            (lispm-e2e-tools--press approvals "s")))
        (let ((result (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "anthropic" "Make both" "call_tool")))
                       60 "Claude's reviewed call_tool result")))
          (should (string-search "hunk 2 of 2 applied, 1 rejected" result))
          (should (string-search "Hunk 1 (at line 1) was NOT applied" result)))
        (let ((text (with-temp-buffer (insert-file-contents file) (buffer-string))))
          (should (string-search "A tiny note-file parser" text))
          (should (string-search "(when colon" text))
          (should-not (equal text original)))
        (when-let* ((buffer (find-buffer-visiting file)))
          (with-current-buffer buffer
            (erase-buffer)
            (insert original)
            (save-buffer))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-tools-claude-shell-in-the-sandbox ()
  "Claude's allowed shell command runs in bubblewrap: its folder only, no Emacs to read."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((project (lispm-e2e-project "project"))
             (claude (lispm-agent-start 'claude project)))
        (lispm-e2e-wait-ready claude)
        ;; A secret of Emacs's environment, for the command to look for.
        (setenv "E2E_SECRET_TOKEN" "tok-e2e-0123456789")
        (lispm-e2e-submit claude "Try to escape the sandbox.")
        (let ((approvals (lispm-e2e-tools--approval)))
          (with-current-buffer approvals
            (should (string-search "Runs: in the sandbox: the folder writable" (buffer-string))))
          (lispm-e2e-tools--press approvals "a"))
        (let ((result (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "anthropic" "Try to escape" "call_tool")))
                       60 "Claude's sandboxed call_tool result")))
          (should (string-search "Read-only file system" result))
          (should (string-search "[exit status 3]" result))
          (should (string-search "It ran in LispM's sandbox" result))
          ;; The secret is neither in its environment nor in bwrap's.
          (should (string-match-p "^0\n0\n" result)))
        (should (file-exists-p (expand-file-name "inside-ran.txt" project)))
        (delete-file (expand-file-name "inside-ran.txt" project))
        (should-not (file-exists-p "/usr/local/escaped.txt")))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-tools-skill-needs-trust ()
  "A project's skill code runs only once the project is trusted, and again only if unchanged."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((project (lispm-e2e-project "skill-project"))
             (skill-file (expand-file-name ".lispm/skills/greet.org" project))
             (codex (lispm-agent-start 'codex project)))
        (lispm-e2e-wait-ready codex)
        ;; Before trust: the instructions, not the code; the error says how to trust.
        (lispm-e2e-submit codex "Learn the greet skill (first).")
        (let ((loaded (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "responses" "(first)" "skill")))
                       60 "the skill's first answer"))
              (greeted (lispm-e2e-wait
                        (lambda () (car (lispm-e2e-tool-results "responses" "(first)" "call_tool")))
                        60 "the first greet call")))
          (should (string-search "How to greet" loaded))
          (should (string-search "lispm-trust-project" loaded))
          (should-not (string-search "Hello, Ada" greeted))
          (should-not (lispm-tool-get "greet")))
        ;; After trust: the tool works on the next step.
        (lispm-trust-project project)
        (lispm-e2e-wait-activity codex 'idle 60)
        (lispm-e2e-submit codex "Learn the greet skill (second).")
        (should (string-search "Hello, Ada, from the greet skill."
                               (lispm-e2e-wait
                                (lambda () (car (lispm-e2e-tool-results "responses" "(second)" "call_tool")))
                                60 "the trusted greet call")))
        ;; Changed code asks again.
        (with-temp-file skill-file
          (insert-file-contents skill-file)
          (goto-char (point-max))
          (insert "\n#+begin_src emacs-lisp\n(setq lispm-e2e-tools--changed t)\n#+end_src\n"))
        (lispm-e2e-wait-activity codex 'idle 60)
        (lispm-e2e-submit codex "Learn the greet skill (third).")
        (should (string-search "lispm-trust-project"
                               (lispm-e2e-wait
                                (lambda () (car (lispm-e2e-tool-results "responses" "(third)" "skill")))
                                60 "the changed skill's answer")))
        (should-not (boundp 'lispm-e2e-tools--changed)))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-tools)
;;; lispm-e2e-tools.el ends here
