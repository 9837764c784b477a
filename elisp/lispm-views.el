;;; lispm-views.el --- Emacs as the agents see it: the editor-state push  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Agents ask cheap questions about Emacs all the time: what is selected,
;; which files are open, which have unsaved changes, what the checkers
;; report.  The sidecar answers them from a mirror, so that no agent
;; ever waits for Emacs's garbage collector or a busy command; this file
;; keeps the mirror current.  While `lispm-views-mode' is on, Emacs sends
;; the sidecar the notification `lispm/editor-state', a full snapshot:
;;
;;   {"buffers": [{"name", "file", "truename", "dirty", "mode"}, ...],
;;    "selection": {"buffer", "file", "truename", "text",
;;                  "start": {"line", "character"}, "end": {...},
;;                  "is_empty"} | null,
;;    "diagnostics": [{"file", "truename",
;;                     "items": [{"message", "severity", "source",
;;                                "range": {"start", "end"}}]}]}
;;
;; Lines and characters are 0-based; a character is a code point.
;; `buffers' holds every live buffer but the internal ones (whose names
;; start with a space); `dirty' is the unsaved changes of a file's
;; buffer, so always false without a file.  `selection' is the selected
;; window's buffer (the window the minibuffer was entered from, while it
;; is active); its text is the active region, cut at 100,000 characters,
;; else "".  `diagnostics' has one entry per file buffer where Flymake
;; (or Flycheck, when it is loaded) is on, even with no items; severity
;; is "error", "warning", "info" or "hint".
;;
;; Hooks only raise a flag and start a timer, once: the snapshot is built
;; and sent at most once per `lispm-views-push-delay', and only if it
;; differs from the last one sent.  What raises the flag: the buffer list
;; changing, a file buffer's modified flag changing, a command moving
;; point or the region or changing the selected buffer (in buffers with a
;; process, such as terminals, only a change of buffer counts), Flymake
;; or Flycheck reporting, and a fresh sidecar.
;;
;; Reading never changes anything: building the snapshot and answering
;; `emacs/buffer-text' move no point, create no buffer and run no hook.
;;
;; No secret goes: the text of a buffer visiting a file of keys or
;; tokens (`lispm-secrets-file-p') is never sent, and every text sent,
;; the selection's and a buffer's, has the secrets Emacs knows of
;; withheld (`lispm-secrets-redact').
;;
;; Request from the sidecar:
;;   emacs/buffer-text {buffer}
;;     -> {buffer, file, truename, dirty, text}: the whole text, unsaved
;;        changes included, narrowing ignored, secrets withheld;
;;        `lispm-no-buffer' (-32050) for an unknown or internal buffer,
;;        `lispm-policy-denied' (-32056) for one visiting a file of keys
;;        or tokens, -32602 for bad params.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-secrets)

(declare-function flymake-diagnostic-text "flymake" (diag))
(declare-function flymake-diagnostic-type "flymake" (diag))
(declare-function flymake-diagnostic-backend "flymake" (diag))
(declare-function flycheck-error-line "ext:flycheck" (err))
(declare-function flycheck-error-column "ext:flycheck" (err))
(declare-function flycheck-error-end-line "ext:flycheck" (err))
(declare-function flycheck-error-end-column "ext:flycheck" (err))
(declare-function flycheck-error-message "ext:flycheck" (err))
(declare-function flycheck-error-level "ext:flycheck" (err))
(declare-function flycheck-error-checker "ext:flycheck" (err))
(declare-function flycheck-error-filename "ext:flycheck" (err))
(defvar flycheck-current-errors)

;;; Limits

(defconst lispm-views-push-delay 0.05
  "Seconds from the first change to the push of the editor state.
Changes within that time go in the same push.")

(defconst lispm-views-selection-max 100000
  "The most characters of a selection's text that go to the sidecar.")

;;; Strings the JSON encoder accepts

(defconst lispm-views--invalid-char-regexp
  (rx (any (#xd800 . #xdfff) (#x110000 . #x3fffff)))
  "Regexp matching the characters that are not Unicode scalar values.
Those are surrogates, raw bytes and Emacs's characters beyond Unicode.")

(defun lispm-views-json-string (string)
  "Return STRING without text properties, in a form `json-serialize' accepts.
A unibyte STRING is decoded as UTF-8.  Raw bytes, surrogates and
characters beyond Unicode become U+FFFD, so encoding never signals.
Return nil for nil."
  (when string
    (let ((text (if (multibyte-string-p string)
                    (substring-no-properties string)
                  (decode-coding-string string 'utf-8-unix t))))
      (if (string-match-p lispm-views--invalid-char-regexp text)
          (replace-regexp-in-string lispm-views--invalid-char-regexp
                                    (string #xfffd) text t t)
        text))))

(defun lispm-views--bool (value)
  "Return VALUE as a JSON boolean: t, or `:json-false'."
  (if value t :json-false))

;;; Buffers

(defun lispm-views-internal-buffer-p (buffer)
  "Return non-nil if BUFFER is internal, its name beginning with a space."
  (string-prefix-p " " (buffer-name buffer)))

(defvar lispm-views--truenames (make-hash-table :test #'eq :weakness 'key)
  "Cache of truenames: buffer -> (FILE-NAME . TRUENAME).")

(defun lispm-views-truename (&optional buffer)
  "Return the truename of the file BUFFER visits, or nil if none.
BUFFER defaults to the current buffer.  The truename is computed once
per buffer and file name, and never for a remote file (too slow: its
expanded name stands in)."
  (let* ((buffer (or buffer (current-buffer)))
         (file (buffer-file-name buffer)))
    (when file
      (let ((cached (gethash buffer lispm-views--truenames)))
        (if (equal (car cached) file)
            (cdr cached)
          (let ((truename (if (file-remote-p file)
                              (expand-file-name file)
                            (file-truename file))))
            (puthash buffer (cons file truename) lispm-views--truenames)
            truename))))))

(defun lispm-views--dirty-p (buffer)
  "Return non-nil if BUFFER is a file's buffer and is modified."
  (and (buffer-file-name buffer) (buffer-modified-p buffer) t))

(defun lispm-views--buffer (buffer)
  "Return BUFFER as the snapshot lists it: a plist."
  (list :name (lispm-views-json-string (buffer-name buffer))
        :file (lispm-views-json-string (buffer-file-name buffer))
        :truename (lispm-views-json-string (lispm-views-truename buffer))
        :dirty (lispm-views--bool (lispm-views--dirty-p buffer))
        :mode (lispm-views-json-string
               (symbol-name (buffer-local-value 'major-mode buffer)))))

(defun lispm-views--buffers ()
  "Return every live buffer but the internal ones, as the snapshot lists them."
  (vconcat (cl-loop for buffer in (buffer-list)
                    unless (lispm-views-internal-buffer-p buffer)
                    collect (lispm-views--buffer buffer))))

;;; Positions and the selection

(defun lispm-views-position (pos)
  "Return POS of the current buffer as a 0-based line and character: a plist.
Narrowing is ignored; the character is the number of characters between
the line's beginning and POS."
  (save-restriction
    (widen)
    (let ((pos (max (point-min) (min pos (point-max)))))
      (list :line (1- (line-number-at-pos pos t))
            :character (- pos (save-excursion (goto-char pos) (line-beginning-position)))))))

(defun lispm-views--selection-window ()
  "Return the window whose buffer is the user's selection.
That is the selected window, or, while the minibuffer is selected, the
window it was entered from."
  (let ((window (selected-window)))
    (if (window-minibuffer-p window)
        (let ((from (minibuffer-selected-window)))
          (if (window-live-p from) from window))
      window)))

(defun lispm-views--secret-file (&optional buffer)
  "Return why the file BUFFER visits is secret, or nil.
See `lispm-secrets-file-p'."
  (when-let* ((truename (lispm-views-truename buffer)))
    (and (not (file-remote-p truename))
         (lispm-secrets-file-p truename))))

(defun lispm-views--shown-text (text)
  "Return TEXT of the current buffer as an agent may see it.
Nothing if the buffer visits a file of keys or tokens; else TEXT with
the secrets Emacs knows of withheld."
  (cond ((string-empty-p text) text)
        ((lispm-views--secret-file) "")
        (t (lispm-secrets-redact text))))

(defun lispm-views--selection ()
  "Return the user's selection as the snapshot describes it, or nil."
  (let* ((window (lispm-views--selection-window))
         (buffer (window-buffer window)))
    (unless (lispm-views-internal-buffer-p buffer)
      (with-current-buffer buffer
        (save-restriction
          (widen)
          (let* ((point (window-point window))
                 (mark (and transient-mark-mode mark-active (mark t)))
                 (start (if mark (min point mark) point))
                 (end (if mark (max point mark) point)))
            (list :buffer (lispm-views-json-string (buffer-name))
                  :file (lispm-views-json-string buffer-file-name)
                  :truename (lispm-views-json-string (lispm-views-truename))
                  :text (lispm-views-json-string
                         (lispm-views--shown-text
                          (buffer-substring-no-properties
                           start (min end (+ start lispm-views-selection-max)))))
                  :start (lispm-views-position start)
                  :end (lispm-views-position end)
                  :is_empty (lispm-views--bool (= start end)))))))))

;;; Diagnostics

(defun lispm-views--flymake-severity (type)
  "Return the JSON severity of the Flymake diagnostic TYPE."
  (let ((severity (or (get type 'severity)
                      (let ((category (get type 'flymake-category)))
                        (and (symbolp category) category (get category 'severity)))))
        (error-level (or (get 'flymake-error 'severity) 3))
        (warning-level (or (get 'flymake-warning 'severity) 2)))
    (cond ((string-match-p "hint" (symbol-name type)) "hint")
          ((or (not (numberp severity)) (>= severity error-level)) "error")
          ((>= severity warning-level) "warning")
          (t "info"))))

(defun lispm-views--range (start end)
  "Return the range from START to END of the current buffer: a plist."
  (list :start (lispm-views-position start)
        :end (lispm-views-position (max start end))))

(defun lispm-views--flymake-items ()
  "Return the current buffer's Flymake diagnostics as snapshot items.
Positions come from the diagnostics' overlays, which follow edits."
  (save-restriction
    (widen)
    (cl-loop for overlay in (overlays-in (point-min) (point-max))
             for diag = (overlay-get overlay 'flymake-diagnostic)
             when diag
             collect
             (let ((backend (flymake-diagnostic-backend diag)))
               (list :message (lispm-views-json-string
                               (or (flymake-diagnostic-text diag) ""))
                     :severity (lispm-views--flymake-severity
                                (flymake-diagnostic-type diag))
                     :range (lispm-views--range (overlay-start overlay)
                                                (overlay-end overlay))
                     :source (lispm-views-json-string
                              (if (and backend (symbolp backend))
                                  (symbol-name backend)
                                "flymake")))))))

(defun lispm-views--flycheck-severity (level)
  "Return the JSON severity of the Flycheck error LEVEL."
  (pcase level
    ('error "error")
    ('warning "warning")
    ('info "info")
    (_ (let ((severity (get level 'flycheck-error-severity)))
         (cond ((not (numberp severity)) "info")
               ((>= severity 100) "error")
               ((>= severity 10) "warning")
               (t "info"))))))

(defun lispm-views--line-column (line column)
  "Return the position of 1-based LINE and COLUMN (nil: 1) in the current buffer."
  (save-restriction
    (widen)
    (save-excursion
      (goto-char (point-min))
      (forward-line (1- (max 1 (or line 1))))
      (min (+ (point) (max 0 (1- (or column 1)))) (line-end-position)))))

(defun lispm-views--flycheck-items ()
  "Return the current buffer's Flycheck errors as snapshot items."
  (cl-loop for err in (bound-and-true-p flycheck-current-errors)
           for file = (flycheck-error-filename err)
           when (or (null file) (equal (expand-file-name file) buffer-file-name))
           collect
           (let* ((start (lispm-views--line-column (flycheck-error-line err)
                                                   (flycheck-error-column err)))
                  (end-line (and (fboundp 'flycheck-error-end-line)
                                 (flycheck-error-end-line err)))
                  (end (if end-line
                           (lispm-views--line-column
                            end-line (and (fboundp 'flycheck-error-end-column)
                                          (flycheck-error-end-column err)))
                         start)))
             (list :message (lispm-views-json-string (or (flycheck-error-message err) ""))
                   :severity (lispm-views--flycheck-severity (flycheck-error-level err))
                   :range (lispm-views--range start end)
                   :source (lispm-views-json-string
                            (let ((checker (flycheck-error-checker err)))
                              (if checker (format "%s" checker) "flycheck")))))))

(defun lispm-views--diagnostics ()
  "Return the diagnostics of every file buffer where a checker is on."
  (vconcat
   (cl-loop for buffer in (buffer-list)
            when (buffer-file-name buffer)
            nconc
            (with-current-buffer buffer
              (let ((flymake (and (bound-and-true-p flymake-mode)
                                  (fboundp 'flymake-diagnostic-text)))
                    (flycheck (and (bound-and-true-p flycheck-mode)
                                   (fboundp 'flycheck-error-line))))
                (when (or flymake flycheck)
                  (list (list :file (lispm-views-json-string buffer-file-name)
                              :truename (lispm-views-json-string (lispm-views-truename))
                              :items (vconcat (and flymake (lispm-views--flymake-items))
                                              (and flycheck (lispm-views--flycheck-items)))))))))))

;;; The snapshot and its push

(defun lispm-views-snapshot ()
  "Return the editor state the sidecar mirrors: a plist ready for JSON."
  (list :buffers (lispm-views--buffers)
        :selection (lispm-views--selection)
        :diagnostics (lispm-views--diagnostics)))

(defvar lispm-views--last-sent nil
  "The last snapshot sent to the sidecar, or nil.")

(defvar lispm-views--timer nil
  "The timer of the next push, or nil if none is due.")

(defun lispm-views-push (&optional force)
  "Send the editor state to the sidecar now; return non-nil if sent.
Send nothing if the sidecar is not running.
Nothing is sent if the state is the one sent last, unless FORCE."
  (when lispm-views--timer
    (cancel-timer lispm-views--timer)
    (setq lispm-views--timer nil))
  (if (not (lispm-sidecar-live-p))
      (setq lispm-views--last-sent nil)
    (let ((snapshot (lispm-views-snapshot)))
      (unless (and (not force) (equal snapshot lispm-views--last-sent))
        (lispm-sidecar-notify 'lispm/editor-state snapshot)
        (setq lispm-views--last-sent snapshot)
        t))))

(defun lispm-views--push-from-timer ()
  "Push the editor state; the timer's function, which never signals."
  (setq lispm-views--timer nil)
  (condition-case err
      (lispm-views-push)
    (error (message "LispM: could not send the editor state: %s"
                    (error-message-string err)))))

(defun lispm-views--schedule (&rest _)
  "Note that the editor state changed: push it soon, once."
  (unless lispm-views--timer
    (setq lispm-views--timer
          (run-at-time lispm-views-push-delay nil #'lispm-views--push-from-timer))))

;;; What triggers a push

(defvar lispm-views--seen-buffer nil
  "The selection's buffer after the last command.")
(defvar lispm-views--seen-point nil
  "Point of the selection's window after the last command.")
(defvar lispm-views--seen-mark nil
  "The active mark of the selection's buffer after the last command, or nil.")
(defvar lispm-views--seen-dirty nil
  "Whether the selection's buffer had unsaved changes after the last command.")

(defun lispm-views--post-command ()
  "Schedule a push if the command changed the selection or its buffer's state."
  (let* ((window (lispm-views--selection-window))
         (buffer (window-buffer window)))
    (if (not (eq buffer lispm-views--seen-buffer))
        (progn (setq lispm-views--seen-buffer buffer
                     lispm-views--seen-point nil)
               (lispm-views--schedule))
      (unless (get-buffer-process buffer)
        (with-current-buffer buffer
          (let ((point (window-point window))
                (mark (and mark-active (mark t)))
                (dirty (and buffer-file-name (buffer-modified-p) t)))
            (unless (and (eql point lispm-views--seen-point)
                         (eql mark lispm-views--seen-mark)
                         (eq dirty lispm-views--seen-dirty))
              (setq lispm-views--seen-point point
                    lispm-views--seen-mark mark
                    lispm-views--seen-dirty dirty)
              (lispm-views--schedule))))))))

(defun lispm-views--first-change ()
  "Schedule a push when a file buffer gets its first unsaved change."
  (when buffer-file-name
    (lispm-views--schedule)))

(defun lispm-views--connected ()
  "Give a fresh sidecar the whole editor state."
  (setq lispm-views--last-sent nil)
  (condition-case err
      (lispm-views-push t)
    (error (message "LispM: could not send the editor state: %s"
                    (error-message-string err)))))

(defconst lispm-views--hooks
  '((post-command-hook . lispm-views--post-command)
    (buffer-list-update-hook . lispm-views--schedule)
    (window-selection-change-functions . lispm-views--schedule)
    (after-change-major-mode-hook . lispm-views--schedule)
    (first-change-hook . lispm-views--first-change)
    (after-save-hook . lispm-views--schedule)
    (after-revert-hook . lispm-views--schedule)
    (after-set-visited-file-name-hook . lispm-views--schedule)
    (flymake-mode-hook . lispm-views--schedule)
    (flycheck-mode-hook . lispm-views--schedule)
    (flycheck-after-syntax-check-hook . lispm-views--schedule)
    (lispm-sidecar-connected-hook . lispm-views--connected))
  "The hooks `lispm-views-mode' adds its functions to, globally.")

;;;###autoload
(define-minor-mode lispm-views-mode
  "Keep the sidecar's mirror of Emacs's state current.
While on, changes to the buffer list, the selection, unsaved changes
and diagnostics are pushed to the sidecar, at most once per
`lispm-views-push-delay', so agents read them without waiting for
Emacs."
  :global t
  :group 'lispm
  (dolist (hook lispm-views--hooks)
    (remove-hook (car hook) (cdr hook)))
  (advice-remove 'flymake--handle-report #'lispm-views--schedule)
  (when lispm-views--timer
    (cancel-timer lispm-views--timer)
    (setq lispm-views--timer nil))
  (setq lispm-views--last-sent nil
        lispm-views--seen-buffer nil)
  (when lispm-views-mode
    (dolist (hook lispm-views--hooks)
      (add-hook (car hook) (cdr hook)))
    ;; Flymake has no hook for "a backend reported".
    (advice-add 'flymake--handle-report :after #'lispm-views--schedule)
    (lispm-views--schedule)))

(defun lispm-views-ensure ()
  "Turn on `lispm-views-mode' unless it is on already."
  (unless lispm-views-mode
    (lispm-views-mode 1)))

;;; Requests from the sidecar

(lispm-define-error 'lispm-no-buffer "No such buffer" 'lispm-error -32050)

(cl-defmethod lispm-sidecar-handle-request ((method (eql 'emacs/buffer-text)) params)
  "Return the whole text of the buffer PARAMS name, with its file and state.
Neither point nor narrowing changes; no buffer is created.  An
internal buffer is no buffer, as far as the sidecar knows.  METHOD is
`emacs/buffer-text'."
  (let ((name (plist-get params :buffer)))
    (unless (and (stringp name) (not (string-empty-p name)))
      (lispm-signal 'lispm-invalid-params (list method) "%s"
                    "emacs/buffer-text: `buffer' must be a buffer name"))
    (let ((buffer (get-buffer name)))
      (unless (and buffer (not (lispm-views-internal-buffer-p buffer)))
        (lispm-signal 'lispm-no-buffer (list name) "no buffer named %s" name))
      (when-let* ((why (lispm-views--secret-file buffer)))
        (lispm-secrets-refuse "read_buffer" 'read
                              (format "%s, and LispM shows no agent its text" why)))
      (with-current-buffer buffer
        (save-restriction
          (widen)
          (list :buffer (lispm-views-json-string (buffer-name))
                :file (lispm-views-json-string buffer-file-name)
                :truename (lispm-views-json-string (lispm-views-truename))
                :dirty (lispm-views--bool (lispm-views--dirty-p buffer))
                :text (lispm-views-json-string
                       (lispm-secrets-redact
                        (buffer-substring-no-properties (point-min) (point-max))))))))))

(provide 'lispm-views)
;;; lispm-views.el ends here
