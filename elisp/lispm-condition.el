;;; lispm-condition.el --- A failed turn, stopped at its condition, with restarts  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; When a turn of LispM's own agent stops at a condition, this buffer
;; shows it, as SLIME's debugger does: the condition's message, its
;; type, the numbered restarts, and the turn's trace.
;;
;;   LispM's own agent `emacs', turn 3: HTTP 529: overloaded
;;   [Condition of type lispm-model-http-error]
;;
;;   Restarts:
;;    0: [RETRY] Send the request again (or run the failing call again)
;;    1: [OTHER-MODEL] Send the request again to another of `lispm-models'
;;    4: [ABORT] End the turn, keeping what was done
;;
;;   Trace:
;;    …
;;
;; The restarts are values (`lispm-restart'), made by whoever stopped
;; the turn: this buffer knows none by name.  It shows each with its
;; number, and the digits 0-9 are bound in a loop, as in SLY's sldb.
;; A digit or RET on a restart chooses it; TAB on a trace line shows
;; its details (made when first asked for); q buries the buffer and
;; leaves the turn stopped (reopen it from the agent's buffer).

;;; Code:

(require 'cl-lib)
(require 'pp)
(require 'text-property-search)
(require 'lispm-turn)

(defvar-local lispm-condition--turn nil
  "The stopped turn this buffer shows.")

(defvar-keymap lispm-condition-mode-map
  :doc "Keymap of a LispM condition buffer."
  :parent special-mode-map
  "a" #'lispm-condition-abort
  "RET" #'lispm-condition-restart-at-point
  "TAB" #'lispm-condition-toggle-detail
  "n" #'forward-button
  "p" #'backward-button)

(dotimes (number 10)
  (keymap-set lispm-condition-mode-map (number-to-string number)
              #'lispm-condition-restart-number))

(define-derived-mode lispm-condition-mode special-mode "LispM-Condition"
  "Major mode of a turn stopped at a condition.
\\{lispm-condition-mode-map}"
  (setq truncate-lines t))

(defun lispm-condition-buffer-name (turn)
  "Return the name of TURN's condition buffer."
  (format "*LispM condition: %s turn %s*"
          (lispm-actor-name (lispm-turn-actor turn)) (lispm-turn-number turn)))

(defun lispm-condition--trace-line (entry)
  "Return a one-line summary of the trace ENTRY, (TIME WHAT DETAIL)."
  (pcase-let ((`(,time ,what ,detail) entry))
    (format "%s %-10s %s" (format-time-string "%T" time) what
            (truncate-string-to-width
             (replace-regexp-in-string "\n" " " (format "%S" detail)) 90 nil nil "…"))))

(defun lispm-condition--insert (turn)
  "Insert TURN's condition, restarts and trace."
  (pcase-let ((`(,type ,message ,_data) (lispm-turn-condition turn)))
    (insert (propertize (format "LispM's own agent %s, turn %s: %s\n"
                                (lispm-actor-name (lispm-turn-actor turn))
                                (lispm-turn-number turn) message)
                        'face 'error)
            (format "[Condition of type %s]\n\nRestarts:\n" type))
    (pcase-dolist (`(,number . ,restart) (lispm-turn-numbered-restarts turn))
      (let ((name (lispm-restart-name restart)))
        (insert " ")
        (insert-text-button (format "%d: [%s]" number (upcase (symbol-name name)))
                            'lispm-restart name
                            'action (lambda (_) (lispm-condition-restart name))
                            'help-echo "RET: choose this restart")
        (insert " " (lispm-restart-describe restart) "\n")))
    (insert "\nTrace (TAB shows a line's details):\n")
    (dolist (entry (reverse (lispm-turn-trace turn)))
      (insert (propertize (concat " " (lispm-condition--trace-line entry))
                          'lispm-trace entry)
              "\n"))))

(defun lispm-condition-show (turn)
  "Show the condition TURN stopped at, with its restarts; return the buffer."
  (let ((buffer (get-buffer-create (lispm-condition-buffer-name turn))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (lispm-condition-mode)
        (setq lispm-condition--turn turn)
        (lispm-condition--insert turn)
        (goto-char (point-min))
        (let ((match (text-property-search-forward 'lispm-restart)))
          (when match (goto-char (prop-match-beginning match))))))
    (display-buffer buffer)
    buffer))

(defun lispm-condition-restart (name &optional argument)
  "Choose the restart NAME of this buffer's turn, with ARGUMENT if it needs one.
Interactively, ask for the argument."
  (let ((turn lispm-condition--turn)
        (buffer (current-buffer)))
    (unless (and turn (eq (lispm-turn-state turn) 'stopped))
      (user-error "This turn is not stopped any more"))
    (let* ((restart (or (cl-find name (lispm-turn-restarts turn) :key #'lispm-restart-name)
                        (user-error "No restart %s here" name)))
           (argument (or argument (and (lispm-restart-reader restart)
                                       (funcall (lispm-restart-reader restart))))))
      (quit-window nil (get-buffer-window buffer))
      (kill-buffer buffer)
      (lispm-turn-restart turn name argument))))

(defun lispm-condition-restart-number ()
  "Choose the restart whose number is the digit typed."
  (interactive nil lispm-condition-mode)
  (let* ((number (- (event-basic-type last-command-event) ?0))
         (numbered (assq number (and lispm-condition--turn
                                     (lispm-turn-numbered-restarts lispm-condition--turn)))))
    (unless numbered
      (user-error "No restart %d here" number))
    (lispm-condition-restart (lispm-restart-name (cdr numbered)))))

(defun lispm-condition-abort ()
  "Choose the restart `abort' of this turn."
  (interactive nil lispm-condition-mode)
  (lispm-condition-restart 'abort))

(defun lispm-condition-restart-at-point ()
  "Choose the restart at point, or show the details of the trace line there."
  (interactive nil lispm-condition-mode)
  (cond ((get-text-property (point) 'lispm-restart)
         (lispm-condition-restart (get-text-property (point) 'lispm-restart)))
        ((get-text-property (point) 'lispm-trace) (lispm-condition-toggle-detail))
        (t (user-error "No restart here"))))

(defun lispm-condition-toggle-detail ()
  "Show or hide the details of the trace line at point."
  (interactive nil lispm-condition-mode)
  (let ((entry (get-text-property (point) 'lispm-trace))
        (inhibit-read-only t))
    (unless entry (user-error "No trace line here"))
    (save-excursion
      (forward-line 1)
      (if (get-text-property (point) 'lispm-detail)
          (delete-region (point) (or (next-single-property-change (point) 'lispm-detail)
                                     (point-max)))
        (insert (propertize (replace-regexp-in-string
                             "^" "     " (pp-to-string (nth 2 entry)))
                            'lispm-detail t 'face 'shadow))))))

(provide 'lispm-condition)
;;; lispm-condition.el ends here
