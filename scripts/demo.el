;;; demo.el --- `make demo': LispM's list with Claude Code and Codex  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded by python/lispm_sidecar/testing/demo.py in `emacs -nw -Q'.
;; The CLIs talk to the scripted gateway, never to a real model.

;;; Code:

(require 'lispm)

(defun lispm-demo--start-in (window kind project)
  "Start an agent of KIND in PROJECT, its terminal sized for and shown in WINDOW."
  (with-selected-window window
    (let ((agent (lispm-agent-start kind project))
          (deadline (+ (float-time) 20)))
      (while (and (not (buffer-live-p (lispm-agent-buffer agent)))
                  (< (float-time) deadline))
        (accept-process-output nil 0.05))
      (when (buffer-live-p (lispm-agent-buffer agent))
        (set-window-buffer window (lispm-agent-buffer agent))))))

(defun lispm-demo-start ()
  "Lay out the demo: the list on top, Claude and Codex side by side below."
  (let ((project (getenv "LISPM_DEMO_PROJECT")))
    (lispm)
    (delete-other-windows)
    (let* ((left (split-window nil 8))
           (right (split-window left nil t)))
      (lispm-demo--start-in left 'claude project)
      (lispm-demo--start-in right 'codex project)
      (select-window left))
    (message "%s" (substitute-command-keys
                   "LispM demo: type \"list agents\" + RET in a terminal.  \
In *LispM*: RET visits, k closes, g refreshes.  \\[save-buffers-kill-terminal] quits."))))

(add-hook 'emacs-startup-hook #'lispm-demo-start)

;;; demo.el ends here
