;;; demo.el --- `make demo': Claude Code asks Codex for a review, in LispM  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by python/lispm_sidecar/testing/demo.py in `emacs -nw -Q'.
;; The CLIs and LispM's own agent talk to the scripted gateway, never
;; to a real model.  The demo plays LispM's main scenario in the two
;; terminals: it greets Codex, then asks Claude to get Codex's review of
;; notes.el; from there the agents talk through LispM by themselves.
;; Once Claude has Codex's review, LispM's own agent (`emacs', in the
;; window below the terminals) is asked to fix the function: it looks
;; up a built-in function, reads notes.el, and asks the user before it
;; edits the file.
;;
;; The own agent's part runs alone too (the tests do, in batch):
;; `lispm-demo-start-own-agent', then `lispm-demo-play-own-agent'.

;;; Code:

(require 'lispm)
(require 'lispm-own-agent)

(setq lispm-ledger-file (or (getenv "LISPM_DEMO_LEDGER") lispm-ledger-file))

;;; The own agent

(defconst lispm-demo-own-prompt "Fix notes-parse-header as Codex suggested."
  "What the demo asks LispM's own agent, once Claude has Codex's review.")

(defun lispm-demo-configure-own-agent ()
  "Give the own agent the demo's model and sessions folder.
The model is the scripted gateway at LISPM_DEMO_GATEWAY, spoken to in
the Chat Completions dialect (Claude speaks Anthropic's and Codex the
Responses one, so the demo's script tells them apart); the sessions go
to LISPM_DEMO_SESSIONS, which each demo starts without."
  (when-let* ((gateway (getenv "LISPM_DEMO_GATEWAY")))
    (setq lispm-models `(("demo" :api chat :base-url ,(concat gateway "/v1")
                          :model "lispm-demo"))))
  (when-let* ((sessions (getenv "LISPM_DEMO_SESSIONS")))
    (setq lispm-sessions-directory (file-name-as-directory sessions))))

(lispm-demo-configure-own-agent)

(defun lispm-demo-start-own-agent (project &optional window)
  "Start LispM's own agent in PROJECT; show its buffer in WINDOW if given.
Its long lines wrap, to be read in a small window.  Return the agent."
  (let ((agent (lispm-agent project)))
    (with-current-buffer (lispm-own-agent-buffer agent)
      (visual-line-mode 1))
    (when window
      (set-window-buffer window (lispm-own-agent-buffer agent)))
    agent))

(defun lispm-demo--show-approval (agent)
  "Select the approvals window once AGENT waits for an approval, and say so."
  (lispm-demo--when
   (lambda () (or (eq (lispm-actor-activity agent) 'waiting-for-approval)
                  (not (and (lispm-own-agent-turn agent)
                            (lispm-turn-live-p (lispm-own-agent-turn agent))))))
   (lambda ()
     (when-let* (((eq (lispm-actor-activity agent) 'waiting-for-approval))
                 (buffer (get-buffer lispm-approvals-buffer-name))
                 (window (get-buffer-window buffer)))
       (unless noninteractive
         (select-window window))
       (message "%s" (substitute-command-keys
                      (format "LispM demo: %s asks to edit notes.el: the diff is in %s, \
and a TODO in its buffer.  Press \\<lispm-approvals-mode-map>\\[lispm-approvals-allow] \
to allow, \\[lispm-approvals-deny] to deny."
                              (lispm-actor-name agent) lispm-approvals-buffer-name)))))))

(defun lispm-demo-play-own-agent (agent)
  "Give AGENT, LispM's own agent, the demo's prompt; point at its approval.
AGENT's window is selected first, so that the user is there, at the end
of its buffer, once the approval is decided."
  (when-let* ((window (get-buffer-window (lispm-own-agent-buffer agent))))
    (select-window window)
    (goto-char (point-max)))
  (lispm-own-agent-send agent lispm-demo-own-prompt)
  (lispm-demo--show-approval agent))

;;; Approvals

(defvar lispm-demo--own-window nil
  "The window of the own agent's buffer, where approvals show too.")

(defun lispm-demo--display-approvals (buffer _alist)
  "Show BUFFER, the approvals, in the own agent's window, half the frame high.
An action function for `display-buffer': the demo's small frame has no
room for a side window.  Once nothing waits, the approvals go and the
agent's buffer comes back, in the now taller window."
  (when (window-live-p lispm-demo--own-window)
    (let ((window lispm-demo--own-window))
      (display-buffer-record-window 'reuse window buffer)
      (set-window-buffer window buffer)
      (ignore-errors
        (window-resize window (max 0 (- (/ (frame-height) 2) (window-total-height window)))))
      window)))

;;; The terminals

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
  "Call ACTION as soon as PREDICATE gives non-nil; poll five times a second."
  (if (funcall predicate)
      (funcall action)
    (run-at-time 0.2 nil #'lispm-demo--when predicate action)))

(defun lispm-demo--ready-p (agent mark)
  "Return non-nil when MARK, its composer, is in AGENT's terminal."
  (and (buffer-live-p (lispm-agent-buffer agent))
       (string-search mark (lispm-term-text (lispm-agent-buffer agent)))))

(defun lispm-demo--type (agent text)
  "Type TEXT into AGENT's composer, then Return, as a user would."
  (lispm-paste-submit agent text))

(defun lispm-demo--play (claude codex own)
  "Play the main scenario with CLAUDE and CODEX, then OWN's part."
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
\\[lispm-ledger] shows the ledger.  \\[save-buffers-kill-terminal] quits."))
           ;; Claude's answer to Codex's reply says so: the review is in.
           (lispm-demo--when
            (lambda () (and (lispm-demo--ready-p claude "Codex reviewed it")
                            (eq (lispm-agent-activity claude) 'idle)))
            (lambda ()
              (run-at-time 2 nil #'lispm-demo-play-own-agent own))))))))))

;;; The layout

(defun lispm-demo-start ()
  "Lay out the demo: the list on top, Claude and Codex, then the own agent.
Claude and Codex sit side by side below the list; LispM's own agent
gets the full width at the bottom."
  (let ((project (getenv "LISPM_DEMO_PROJECT")))
    (lispm)
    (delete-other-windows)
    (let* ((list-height 6)
           (own-height (max 6 (/ (- (frame-height) list-height) 3)))
           (left (split-window nil list-height))
           (bottom (split-window left (- own-height)))
           (right (split-window left nil t))
           (claude (lispm-demo--start-in left 'claude project))
           (codex (lispm-demo--start-in right 'codex project))
           (own (lispm-demo-start-own-agent project bottom)))
      (setq lispm-demo--own-window bottom
            lispm-approvals-display-action
            '((display-buffer-reuse-window lispm-demo--display-approvals)))
      (select-window left)
      (message "LispM demo: starting Claude Code and Codex...")
      (lispm-demo--play claude codex own))))

(unless noninteractive
  (add-hook 'emacs-startup-hook #'lispm-demo-start))

;;; demo.el ends here
