;;; lispm-e2e-notice.el --- Real Claude Code's approval prompt shows as "needs you"  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_notice.py inside a loopback-only network
;; namespace, with the scripted gateway playing the model.  The user
;; asks real Claude Code to run a shell command, in its terminal, and
;; looks away; Claude asks for approval in its terminal.  Within a second
;; of the prompt appearing on Claude's screen the agent list marks Claude
;; "! approval prompt", and the mode line names it; Escape declines, and
;; the mark goes.  Claude then ends the turn while its terminal is
;; hidden: "! turn done", until the terminal is shown again.

;;; Code:

(require 'lispm-e2e)

(defconst lispm-e2e-notice--prompt "Do you want to proceed"
  "Text Claude Code's approval prompt shows.")

(defun lispm-e2e-notice--list-line (name)
  "Return the agent list's line of agent NAME, or nil."
  (with-current-buffer lispm-list-buffer-name
    (save-excursion
      (goto-char (point-min))
      (and (re-search-forward (format "^ %s .*$" (regexp-quote name)) nil t)
           (match-string-no-properties 0)))))

(defun lispm-e2e-notice--marked-p (name reason)
  "Return non-nil if the list's line of NAME ends with \"! REASON\"."
  (when-let* ((line (lispm-e2e-notice--list-line name)))
    (string-suffix-p (concat "! " reason) line)))

(defun lispm-e2e-notice--show (buffer)
  "Show BUFFER in the selected window, as the user would.
Batch Emacs never redisplays, so the window change functions are run here."
  (set-window-buffer (selected-window) buffer)
  (run-hook-with-args 'window-buffer-change-functions (selected-frame)))

(ert-deftest lispm-e2e-notice-claude-approval-prompt-needs-you ()
  "Claude's approval prompt marks it in the list within a second; answering clears it."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
             (list (get-buffer-create lispm-list-buffer-name))
             (elsewhere (get-buffer-create "*notes*"))
             prompt-shown marked)
        (with-current-buffer list
          (lispm-list-mode)
          (lispm-list--fill)
          (tabulated-list-print))
        (lispm-e2e-wait-ready claude)
        (should-not (lispm-notice-needs-you-p claude))
        ;; The user types in Claude's terminal, then looks elsewhere.
        (lispm-e2e-notice--show (lispm-agent-buffer claude))
        (lispm-e2e-submit claude "Touch the flag file, please.")
        (lispm-e2e-notice--show elsewhere)
        ;; When the prompt appears on Claude's screen, and when the list marks it.
        (lispm-e2e-wait
         (lambda ()
           (let ((now (float-time)))
             (unless prompt-shown
               (when (string-search lispm-e2e-notice--prompt
                                    (lispm-term-text (lispm-agent-buffer claude)))
                 (setq prompt-shown now)))
             (unless marked
               (when (lispm-e2e-notice--marked-p "claude" "approval prompt")
                 (setq marked now)))
             (and prompt-shown marked)))
         60 "Claude's approval prompt, on its screen and in the list")
        (message "LispM e2e: the list marked Claude %.3f s after its prompt appeared"
                 (- marked prompt-shown))
        (should (< (- marked prompt-shown) 1.0))
        (should (eq (lispm-agent-activity claude) 'waiting-for-approval))
        (should (equal (lispm-notice-reasons claude) '((prompt . "approval prompt"))))
        (should (equal (substring-no-properties lispm-notice-mode-line)
                       " LispM: claude needs you"))
        (should (memq 'lispm-notice-mode-line global-mode-string))
        ;; The user declines with Escape: the mark goes.
        (let ((answered (float-time)))
          (lispm-term-send (lispm-agent-buffer claude) "\e")
          (lispm-e2e-wait (lambda () (not (lispm-e2e-notice--marked-p "claude" "approval prompt")))
                          10 "the approval prompt's mark to go")
          (message "LispM e2e: the mark went %.3f s after Escape" (- (float-time) answered)))
        (should-not (assq 'prompt (lispm-notice-reasons claude)))
        (should-not (file-exists-p (expand-file-name "approved-flag.txt"
                                                     (lispm-e2e-project "project"))))
        ;; Claude ends the turn the user started, unseen: done until shown.
        (lispm-e2e-wait-activity claude 'idle 60)
        (should (lispm-e2e-notice--marked-p "claude" "turn done"))
        (should (equal (lispm-notice-reasons claude) '((done . "turn done"))))
        (lispm-e2e-notice--show (lispm-agent-buffer claude))
        (should-not (lispm-notice-needs-you-p claude))
        (should-not (string-search "!" (lispm-e2e-notice--list-line "claude")))
        (should (equal lispm-notice-mode-line "")))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-notice)
;;; lispm-e2e-notice.el ends here
