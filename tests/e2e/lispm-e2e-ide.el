;;; lispm-e2e-ide.el --- Emacs as Claude Code and Codex see it  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_ide.py inside a loopback-only network namespace,
;; with the scripted gateway playing both models.  Real Claude Code
;; connects to its IDE server in the sidecar: the model is offered the IDE
;; tools, sees the selection made in Emacs, and its edits come to Emacs as
;; diffs that the test accepts and rejects with the diff buffer's keys.
;; Real Codex reads the selection and the open files through the views,
;; and is refused a file outside its folder.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-ide--notes ()
  "Visit notes.el in the selected window and return its buffer."
  (let ((buffer (find-file-noselect (expand-file-name "notes.el" (lispm-e2e-project "project")))))
    (switch-to-buffer buffer)
    buffer))

(defun lispm-e2e-ide--select-lines (buffer first last)
  "Select lines FIRST to LAST (1-based) of BUFFER, and push the editor state."
  ;; As a user would: in the selected window, with the region active.
  (transient-mark-mode 1)
  (switch-to-buffer buffer)
  (goto-char (point-min))
  (forward-line (1- first))
  (push-mark (point) t t)
  (forward-line (- last first))
  (end-of-line)
  (lispm-views-push t))

(defun lispm-e2e-ide--diff-buffer ()
  "Return the pending diff buffer, if one is shown."
  (seq-find (lambda (b) (string-prefix-p "*lispm diff: notes.el" (buffer-name b)))
            (buffer-list)))

(defun lispm-e2e-ide--decide (key)
  "Wait for Claude's diff of notes.el, then press KEY in its buffer."
  (let ((diff (lispm-e2e-wait #'lispm-e2e-ide--diff-buffer 60 "Claude's diff in Emacs")))
    (with-current-buffer diff
      (should (string-search "+    (when colon" (buffer-string)))
      (call-interactively (keymap-lookup (current-local-map) key)))))

(defun lispm-e2e-ide--upgrade (port token)
  "Try a WebSocket upgrade on the IDE server at PORT with TOKEN; return the status."
  (with-temp-buffer
    (call-process (getenv "LISPM_SIDECAR_PYTHON") nil t nil "-c"
                  "import asyncio, sys, aiohttp
async def main():
    headers = {'X-Claude-Code-Ide-Authorization': sys.argv[2]} if sys.argv[2] else {}
    async with aiohttp.ClientSession() as s:
        try:
            async with s.ws_connect('ws://127.0.0.1:%s/' % sys.argv[1], protocols=['mcp'], headers=headers):
                print('open', end='')
        except aiohttp.WSServerHandshakeError as e:
            print(e.status, end='')
asyncio.run(main())"
                  (number-to-string port) (or token ""))
    (buffer-string)))

(defun lispm-e2e-ide--body (request)
  "Return the raw body the gateway logged for REQUEST, as a string."
  (with-temp-buffer
    (insert-file-contents (plist-get request :body_file))
    (buffer-string)))

(ert-deftest lispm-e2e-ide-claude-sees-emacs-and-edits-through-diffs ()
  "Claude's IDE connection: tools offered, the selection, diffs accepted and rejected."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((notes (lispm-e2e-ide--notes))
             (original (with-current-buffer notes (buffer-string)))
             (claude (lispm-agent-start 'claude (lispm-e2e-project "project"))))
        (lispm-e2e-wait-ready claude)
        ;; Claude connected to its IDE server at start-up.
        (lispm-e2e-wait (lambda () (seq-some (lambda (a) (plist-get a :ide_port))
                                             (plist-get (lispm-sidecar-request 'lispm/agents nil)
                                                        :agents)))
                        10 "Claude's IDE server")
        (let* ((port (plist-get (lispm-agent-launch claude) :ide_port))
               (lock (expand-file-name (format "~/.claude/ide/%d.lock" port))))
          ;; The lock file is the user's alone; a wrong token is refused.
          (should (= (file-modes lock) #o600))
          (should (equal (lispm-e2e-ide--upgrade port "not-the-token") "401"))
          (should (equal (lispm-e2e-ide--upgrade port nil) "401")))
        (lispm-e2e-ide--select-lines notes 9 10)
        (lispm-e2e-sleep 1)
        (lispm-e2e-submit claude "What did I select?")
        (let ((request (car (lispm-e2e-wait (lambda () (lispm-e2e-main-requests "anthropic" "What did I select?"))
                                            60 "Claude's model request"))))
          (should (member "mcp__ide__getDiagnostics" (append (plist-get request :tools) nil)))
          (should (string-search "The user selected the lines 9 to 10" (lispm-e2e-ide--body request))))
        ;; An edit comes as a diff; accepting writes it as one undo step.
        (lispm-e2e-wait-activity claude 'idle 60)
        (lispm-e2e-submit claude "Fix the header parser, please.")
        (lispm-e2e-ide--decide "C-c C-c")
        (lispm-e2e-wait (lambda () (lispm-e2e-tool-results "anthropic" "Fix the header parser" "Edit"))
                        60 "Claude's turn to go on after the accepted diff")
        (with-current-buffer notes
          (should (string-search "(when colon" (buffer-string)))
          (should (equal (buffer-string)
                         (with-temp-buffer
                           (insert-file-contents (buffer-file-name notes))
                           (buffer-string))))
          ;; One undo takes the accepted edit back, exactly.
          (deactivate-mark)             ; else undo would only undo in the region
          (let ((last-command nil)) (undo))
          (should (equal (buffer-string) original))
          (save-buffer))
        ;; Rejecting changes nothing.
        (lispm-e2e-wait-activity claude 'idle 60)
        (lispm-e2e-submit claude "Fix it once more, please.")
        (lispm-e2e-ide--decide "C-c C-k")
        ;; Claude takes the rejection and ends its turn without asking its model again.
        (lispm-e2e-wait (lambda () (string-match-p "User rejected update to notes.el"
                                                   (lispm-term-text (lispm-agent-buffer claude))))
                        60 "Claude to report the rejected edit")
        (lispm-e2e-wait-activity claude 'idle 60)
        (should-not (lispm-e2e-tool-results "anthropic" "Fix it once more" "Edit"))
        (should (equal (with-temp-buffer
                         (insert-file-contents (buffer-file-name notes))
                         (buffer-string))
                       (with-current-buffer notes (buffer-string))))
        (should-not (lispm-e2e-ide--diff-buffer))
        ;; M-x lispm-send-region mentions the region's lines in Claude's composer.
        (lispm-e2e-wait-activity claude 'idle 60)
        (lispm-e2e-ide--select-lines notes 9 10)
        (with-current-buffer notes (call-interactively #'lispm-send-region))
        (lispm-e2e-wait (lambda () (string-search "@notes.el#L9-10"
                                                  (lispm-term-text (lispm-agent-buffer claude))))
                        30 "the mention in Claude's composer")
        ;; Closing the terminal removes the lock file.
        (let ((lock (expand-file-name (format "~/.claude/ide/%d.lock"
                                              (plist-get (lispm-agent-launch claude) :ide_port)))))
          (lispm-agent-close claude)
          (lispm-e2e-wait (lambda () (not (file-exists-p lock))) 10 "the lock file to go")))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-ide-codex-reads-the-views-within-its-folder ()
  "Codex reads the selection and the open files, and is refused a file outside."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((notes (lispm-e2e-ide--notes))
             (codex (lispm-agent-start 'codex (lispm-e2e-project "project"))))
        (find-file-noselect (lispm-e2e-dir "outside" "secret.txt"))
        (lispm-e2e-wait-ready codex)
        (lispm-e2e-ide--select-lines notes 9 9)
        (lispm-e2e-submit codex "Look at what I have open.")
        (let ((selection (lispm-e2e-wait
                          (lambda () (car (lispm-e2e-tool-results "responses" "Look at what" "get_selection")))
                          60 "Codex's get_selection result"))
              (open (lispm-e2e-wait
                     (lambda () (car (lispm-e2e-tool-results "responses" "Look at what" "list_open_files")))
                     60 "Codex's list_open_files result"))
              (secret (lispm-e2e-wait
                       (lambda () (car (lispm-e2e-tool-results "responses" "Look at what" "read_buffer")))
                       60 "Codex's read_buffer result")))
          (should (string-search "(defun notes-parse-header (line)" selection))
          (should (string-search "notes.el" open))
          (should-not (string-search "secret.txt" open))
          (should-not (string-search "top secret" secret))
          (should (string-search "secret.txt" secret))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-ide)
;;; lispm-e2e-ide.el ends here
