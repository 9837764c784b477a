;;; demo.el --- `make demo': Claude Code asks Codex for a review, in LispM  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by python/lispm_sidecar/testing/demo.py in `emacs -nw -Q'.
;; The CLIs talk to the scripted gateway, never to a real model.  The
;; demo plays LispM's main scenario in the two terminals: it greets Codex,
;; then asks Claude to get Codex's review of notes.el; from there the
;; agents talk through LispM by themselves.

;;; Code:

(require 'lispm)

(setq lispm-ledger-file (or (getenv "LISPM_DEMO_LEDGER") lispm-ledger-file))

(defun lispm-demo--start-in (window kind project)
  "Start an agent of KIND in PROJECT, its terminal sized for and shown in WINDOW."
  (with-selected-window window
    (let ((agent (lispm-agent-start kind project))
          (deadline (+ (float-time) 20)))
      (while (and (not (buffer-live-p (lispm-agent-buffer agent)))
                  (< (float-time) deadline))
        (accept-process-output nil 0.05))
      (when (buffer-live-p (lispm-agent-buffer agent))
        (set-window-buffer window (lispm-agent-buffer agent)))
      agent)))

(defun lispm-demo--when (predicate action)
  "Call ACTION once PREDICATE holds, checking five times a second."
  (if (funcall predicate)
      (funcall action)
    (run-at-time 0.2 nil #'lispm-demo--when predicate action)))

(defun lispm-demo--ready-p (agent mark)
  "Return non-nil when AGENT's terminal shows MARK, its composer."
  (and (buffer-live-p (lispm-agent-buffer agent))
       (string-search mark (lispm-term-text (lispm-agent-buffer agent)))))

(defun lispm-demo--type (agent text)
  "Type TEXT into AGENT's composer, then Return, as a user would."
  (lispm-paste-submit agent text))

(defun lispm-demo--play (claude codex)
  "Play the main scenario with CLAUDE and CODEX."
  (lispm-demo--when
   (lambda () (and (lispm-demo--ready-p claude "❯") (lispm-demo--ready-p codex "Ask Codex")))
   (lambda ()
     (run-at-time
      1.5 nil
      (lambda ()
        (lispm-demo--type codex "Hello Codex: claude may ask you for a review.")
        (lispm-demo--when
         (lambda () (eq (lispm-agent-activity codex) 'idle))
         (lambda ()
           (lispm-demo--type
            claude "Get Codex's review of notes-parse-header in notes.el, please.")
           (message "%s" (substitute-command-keys
                          "LispM demo: Claude asks Codex through LispM; watch both terminals.  \
\\[lispm-ledger] shows the ledger.  \\[save-buffers-kill-terminal] quits.")))))))))

(defun lispm-demo-start ()
  "Lay out the demo: the list on top, Claude and Codex side by side below."
  (let ((project (getenv "LISPM_DEMO_PROJECT")))
    (lispm)
    (delete-other-windows)
    (let* ((left (split-window nil 8))
           (right (split-window left nil t))
           (claude (lispm-demo--start-in left 'claude project))
           (codex (lispm-demo--start-in right 'codex project)))
      (select-window left)
      (message "LispM demo: starting Claude Code and Codex...")
      (lispm-demo--play claude codex))))

(add-hook 'emacs-startup-hook #'lispm-demo-start)

;;; demo.el ends here
