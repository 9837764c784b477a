;;; lispm-app-doctor.el --- Doctor in a window of its own  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A front-end for the Doctor that ships with Emacs (doctor.el, an
;; ELIZA-style Rogerian psychotherapist).  It runs doctor.el's own code
;; and copies none of it; plain `M-x doctor' is left as it is.
;;
;; `M-x lispm-doctor' opens the buffer "*LispM Doctor*".  One RET sends
;; a line (the stock Doctor needs two), an empty line does nothing, the
;; conversation so far is read-only, and the New Session button or
;; `C-c C-n' starts over.  The front-end handles the traps of doctor.el:
;; it reads only the text after the last reply (the stock Doctor reads
;; back to the last sentence and answers its own reply on an empty
;; line); the input is always the last text of the buffer; and when the
;; Doctor asks a question in the minibuffer in the middle of a turn,
;; quitting that question leaves the input in place to be sent again.
;;
;; `lispm-doctor-say' drives the Doctor from Lisp: it sends one line and
;; returns the reply.

;;; Code:

(require 'lispm-apps)
(require 'doctor)

(lispm-define-app doctor
  :title "Doctor"
  :shelf classic-ai
  :summary "An ELIZA-style psychotherapist (1966), via GNU Emacs's doctor.el."
  :command lispm-doctor)

(defconst lispm-doctor-buffer-name "*LispM Doctor*"
  "The name of the Doctor's buffer.")

;;; The mode

(defun lispm-doctor--insert-header ()
  "Insert the New Session button and a line of key hints."
  (insert-button "New Session" 'action (lambda (_) (lispm-doctor-new-session))
                 'follow-link t 'help-echo "Start a fresh conversation")
  (insert (propertize "   RET sends a line  C-c C-n new session  \
C-c C-q close" 'face 'shadow)
          "\n\n"))

(defun lispm-doctor--fix-greeting ()
  "Replace the greeting's \"type RET twice\", since one RET sends here."
  (save-excursion
    (goto-char (point-min))
    (when (re-search-forward "Each time[ \n]+you are finished talking, \
type RET twice\\." nil t)
      (replace-match "Each time you are finished talking, press RET."))))

(defvar-keymap lispm-doctor-mode-map
  :doc "Keys of the LispM Doctor."
  "RET" #'lispm-doctor-send
  "C-j" #'lispm-doctor-send
  "C-c C-n" #'lispm-doctor-new-session
  "C-c C-q" #'lispm-apps-quit
  "q" #'lispm-apps-quit-or-insert)

(define-derived-mode lispm-doctor-mode doctor-mode "LispM Doctor"
  "Major mode for talking to the Doctor, one RET per line.
Type a line after the Doctor's last reply and press RET.  The
conversation above is read-only; `q' there closes the window.

\\{lispm-doctor-mode-map}"
  :interactive nil
  (auto-fill-mode -1)
  (visual-line-mode 1)
  (lispm-doctor--fix-greeting)
  (lispm-apps-open-input))

(defun lispm-doctor--start ()
  "Start a fresh conversation in the current buffer."
  (let ((inhibit-read-only t))
    (erase-buffer)
    (lispm-doctor--insert-header)
    (lispm-doctor-mode)))

;;; Commands

;;;###autoload
(defun lispm-doctor ()
  "Talk to the Doctor in a window of its own; one RET sends a line."
  (interactive)
  (let ((buffer (get-buffer-create lispm-doctor-buffer-name)))
    (with-current-buffer buffer
      (unless (derived-mode-p 'lispm-doctor-mode)
        (lispm-doctor--start)))
    (lispm-apps-display buffer)))

(defun lispm-doctor-new-session ()
  "Start over with a fresh conversation.
Words the Doctor learned (\"my laptop is like a computer\") are
remembered by doctor.el for the whole Emacs session; they survive."
  (interactive nil lispm-doctor-mode)
  (lispm-doctor--start))

(defun lispm-doctor--reply-to (input-start)
  "Let the Doctor answer the input between INPUT-START and the end.
Return non-nil if it did.  If the user quits a question the Doctor
asks in the minibuffer, the partial turn is removed and the input is
left to be sent again."
  (let ((input (buffer-substring input-start (point-max)))
        (inhibit-read-only t))
    (condition-case nil
        (save-restriction
          (narrow-to-region input-start (point-max))
          (doctor-read-print)
          t)
      (quit
       (delete-region input-start (point-max))
       (insert input)
       (message "The Doctor's question was not answered; RET sends the line again")
       nil))))

(defun lispm-doctor-send ()
  "Send the line typed after the Doctor's last reply, and show the reply.
An empty line does nothing."
  (interactive nil lispm-doctor-mode)
  (let ((start (marker-position lispm-apps-input-start)))
    (if (string-empty-p (lispm-apps-take-input))
        (message "Type something first, then RET")
      (when (lispm-doctor--reply-to start)
        (lispm-apps-open-input)))))

(defun lispm-doctor-say (line)
  "Send LINE to the Doctor in its buffer and return the reply.
The buffer is created if needed, but not shown.  Return nil if no
turn took place, as when LINE is empty."
  (with-current-buffer (get-buffer-create lispm-doctor-buffer-name)
    (unless (derived-mode-p 'lispm-doctor-mode)
      (lispm-doctor--start))
    (goto-char (point-max))
    (insert line)
    (let ((start (marker-position lispm-apps-input-start)))
      (lispm-doctor-send)
      (when (> lispm-apps-input-start start)
        (string-trim (buffer-substring-no-properties
                      (+ start (length (string-trim line)))
                      lispm-apps-input-start))))))

(provide 'lispm-app-doctor)
;;; lispm-app-doctor.el ends here
