;;; lispm-ide.el --- Claude Code's IDE requests, answered by Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The sidecar speaks Claude Code's IDE protocol; what needs Emacs comes
;; here as `emacs/...' requests, each answered at once:
;;
;;   emacs/open-diff {id, agent, file, new_contents, tab_name?}
;;     -> {shown: true}.  Shows the proposed change as a diff in a side
;;     window.  The user decides later, and Emacs tells the sidecar with
;;     the notification `lispm/diff-resolved':
;;       {id, outcome: "saved", contents}   accepted; CONTENTS is exactly
;;                                          what was written to the file
;;       {id, outcome: "rejected"}          nothing changed
;;       {id, outcome: "closed"}            closed without a decision
;;   emacs/close-diff {id?, tab_name?, all?, agent?} -> {closed: N}
;;     closes (undecided: "closed") the pending diffs meant.
;;   emacs/open-file {file, start_text?, end_text?, select_to_eol?,
;;                    make_frontmost?} -> {opened: true, selected: BOOL}
;;   emacs/save-document {file} -> {saved: BOOL, message}
;;
;; A diff is two buffers: `*lispm diff: FILE (AGENT)*', the diff between
;; the file's text in Emacs (unsaved changes included; empty for a new
;; file) and the proposal, and `*lispm proposal: FILE (AGENT)*', the
;; proposal itself, which the user may edit before accepting.  The diff
;; shows in a side window; the window configuration is saved first and
;; restored when the last diff shown on that frame is resolved, unless
;; the user has rearranged the windows meanwhile (then only LispM's
;; windows go).  Accepting writes the proposal through the file's
;; buffer as one undo step, keeping point and markers where the text is
;; unchanged, and saves it.
;;
;; And one command goes the other way: \\[lispm-send-region] mentions the
;; region's lines to a Claude agent (`lispm/at-mention').

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'diff)
(require 'diff-mode)
(require 'lispm-base)
(require 'lispm-edit)
(require 'lispm-review)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-views)

(defvar diff-mode-read-only)            ; Emacs 30's diff-mode.

;;; Options

(defgroup lispm-ide nil
  "Claude Code's diffs and IDE requests in Emacs."
  :group 'lispm
  :prefix "lispm-ide-")

(defcustom lispm-ide-diff-display-action
  '((display-buffer-in-side-window)
    (side . right)
    (slot . 1)
    (window-width . 0.5))
  "How a proposed change's diff is displayed: a `display-buffer' action.
The proposal, when the user edits it, goes to the same side, one slot
further.  Entries of `display-buffer-alist' take precedence."
  :type '(cons (repeat function) (alist :key-type symbol :value-type sexp)))

(lispm-define-error 'lispm-ide-error "LispM diff error" 'lispm-error -32053)

;;; Diffs

(cl-defstruct (lispm-ide-diff (:constructor lispm-ide--diff-make) (:copier nil))
  "A change an agent proposes, waiting for the user's decision."
  (id nil :documentation "The sidecar's id of the request: a string or number.")
  (agent nil :documentation "The name of the agent that proposes the change.")
  (file nil :documentation "The absolute file name of the file to change.")
  (tab-name nil :documentation "The CLI's name for the diff, or nil.")
  (dos nil :documentation "Non-nil if the file's lines end in CR LF.")
  (diff-buffer nil :documentation "The buffer that shows the diff.")
  (proposal-buffer nil :documentation "The buffer that holds the proposal.")
  (frame nil :documentation "The frame the diff was shown on.")
  (state 'pending :documentation "`pending', or the outcome: `saved', `rejected', `closed'."))

(defvar lispm-ide--diffs nil
  "The pending diffs, oldest first.")

(defvar-local lispm-ide--this nil
  "The diff whose diff or proposal buffer this buffer is.")
(put 'lispm-ide--this 'permanent-local t)

(defun lispm-ide-pending-diffs ()
  "Return the pending diffs, oldest first."
  (copy-sequence lispm-ide--diffs))

(defun lispm-ide--own-buffer-p (buffer)
  "Return non-nil if BUFFER is the diff or proposal buffer of a diff."
  (and (buffer-live-p buffer)
       (buffer-local-value 'lispm-ide--this buffer)
       t))

(defun lispm-ide--pending (diff)
  "Return DIFF, or the current buffer's diff if nil, if it is pending.
Otherwise signal a `user-error'."
  (let ((diff (or diff lispm-ide--this)))
    (unless diff
      (user-error "Not in a LispM diff"))
    (unless (eq (lispm-ide-diff-state diff) 'pending)
      (user-error "This diff is decided already (%s)" (lispm-ide-diff-state diff)))
    diff))

;;; The texts

(defun lispm-ide--proposal-text (diff)
  "Return the text of DIFF's proposal buffer, as the user left it."
  (with-current-buffer (lispm-ide-diff-proposal-buffer diff)
    (save-restriction
      (widen)
      (buffer-substring-no-properties (point-min) (point-max)))))

;;; The diff buffer

(defvar-keymap lispm-ide-diff-mode-map
  :doc "Keymap of a proposed change's diff."
  :parent special-mode-map
  "C-c C-c" #'lispm-ide-accept
  "C-c C-k" #'lispm-ide-reject
  "C-c C-e" #'lispm-ide-edit-proposal
  "e" #'lispm-ide-edit-proposal
  "k" #'lispm-ide-reject-hunk
  "E" #'lispm-ide-ediff
  "g" #'lispm-ide-refresh-diff
  "n" #'diff-hunk-next
  "p" #'diff-hunk-prev
  "TAB" #'forward-button
  "<backtab>" #'backward-button)

(define-derived-mode lispm-ide-diff-mode diff-mode "LispM-Diff"
  "Major mode of a change an agent proposes.
\\<lispm-ide-diff-mode-map>
\\[lispm-ide-accept] accepts it, with your edits to the proposal.
\\[lispm-ide-reject] rejects it.
\\[lispm-ide-edit-proposal] shows the proposal, to edit it.
\\[lispm-ide-reject-hunk] takes the hunk at point out of the proposal.
\\[lispm-ide-ediff] merges the proposal by hand in Ediff.
\\[lispm-ide-refresh-diff] computes the diff again.
\\[quit-window] hides the diff; killing it closes it undecided.

\\{lispm-ide-diff-mode-map}"
  ;; Our keys, not diff-mode's: no hunk is applied to a temporary file.
  (setq-local diff-mode-read-only nil)
  (setq-local minor-mode-overriding-map-alist
              (assq-delete-all 'buffer-read-only
                               (copy-sequence minor-mode-overriding-map-alist)))
  (lispm-agent-text-setup)
  (setq buffer-read-only t
        truncate-lines nil))

(defun lispm-ide--escape (string)
  "Return STRING safe in a mode line construct."
  (string-replace "%" "%%" string))

(defun lispm-ide--header (diff)
  "Return the header line of DIFF's diff buffer."
  (concat (lispm-ide--escape
           (format "%s proposes a change to %s  "
                   (lispm-ide-diff-agent diff)
                   (file-name-nondirectory (lispm-ide-diff-file diff))))
          (substitute-command-keys
           "\\<lispm-ide-diff-mode-map>\\[lispm-ide-accept] accept  \
\\[lispm-ide-reject] reject  \\[lispm-ide-reject-hunk] reject hunk  \
\\[lispm-ide-edit-proposal] edit  \\[lispm-ide-ediff] ediff  \
\\[lispm-ide-refresh-diff] refresh")))

(defun lispm-ide--button (label action help)
  "Insert a button LABEL to call ACTION with no argument; HELP describes it."
  (insert-button label 'action (lambda (_button) (funcall action))
                 'follow-link t 'help-echo help)
  (insert " "))

(defun lispm-ide--render (diff)
  "Fill DIFF's diff buffer with the current diff from the file to the proposal."
  (let* ((file (lispm-ide-diff-file diff))
         (old (or (lispm-edit-file-text file) ""))
         (new (lispm-ide--proposal-text diff))
         (label (abbreviate-file-name file))
         (output (lispm-edit-diff
                  old new
                  (cons (if (file-exists-p file) label "/dev/null")
                        (format "%s (proposed by %s)" label (lispm-ide-diff-agent diff))))))
    (with-current-buffer (lispm-ide-diff-diff-buffer diff)
      (let ((inhibit-read-only t)
            (line (line-number-at-pos)))
        (erase-buffer)
        (delete-all-overlays)
        (insert (format "%s proposes a change to %s%s.\n"
                        (lispm-ide-diff-agent diff) label
                        (if (file-exists-p file) "" " (a new file)")))
        (lispm-ide--button "[Accept]" (lambda () (lispm-ide-accept diff))
                           "Write the proposal, as you may have edited it, to the file")
        (lispm-ide--button "[Reject]" (lambda () (lispm-ide-reject diff))
                           "Change nothing")
        (lispm-ide--button "[Edit the proposal]" (lambda () (lispm-ide-edit-proposal diff))
                           "Show the proposal, to edit it before accepting")
        (insert "\n\n")
        (insert (if (string-empty-p output)
                    "No difference: the proposal is the file's current text.\n"
                  output))
        (goto-char (point-min))
        (forward-line (1- line))
        (set-buffer-modified-p nil)))))

;;; The proposal buffer

(defvar-keymap lispm-ide-proposal-mode-map
  :doc "Keymap of the proposal of a change."
  "C-c C-c" #'lispm-ide-accept
  "C-c C-k" #'lispm-ide-reject
  "C-c C-d" #'lispm-ide-show-diff-of-proposal)

(define-minor-mode lispm-ide-proposal-mode
  "Minor mode of the proposal of a change, which the user may edit.
\\<lispm-ide-proposal-mode-map>
\\[lispm-ide-accept] accepts the proposal as it is now.
\\[lispm-ide-reject] rejects it.
\\[lispm-ide-show-diff-of-proposal] displays the diff, which follows the edits."
  :lighter " Proposal"
  (if lispm-ide-proposal-mode
      (add-hook 'after-change-functions #'lispm-ide--proposal-changed nil t)
    (remove-hook 'after-change-functions #'lispm-ide--proposal-changed t)))

(defvar-local lispm-ide--refresh-timer nil
  "The timer that refreshes the diff after the proposal changed.")

(defun lispm-ide--proposal-changed (&rest _)
  "Refresh the diff of the current proposal buffer soon."
  (unless lispm-ide--refresh-timer
    (let ((buffer (current-buffer)))
      (setq lispm-ide--refresh-timer
            (run-with-idle-timer
             0.3 nil
             (lambda ()
               (when (buffer-live-p buffer)
                 (with-current-buffer buffer
                   (setq lispm-ide--refresh-timer nil)
                   (when-let* ((diff lispm-ide--this))
                     (when (eq (lispm-ide-diff-state diff) 'pending)
                       (lispm-ide--render diff)))))))))))

(defun lispm-ide--set-mode-for (file)
  "Give the current buffer the major mode FILE would get, without its hooks.
The buffer visits no file, so hooks that expect one do not run."
  (condition-case nil
      (let ((buffer-file-name file))
        (delay-mode-hooks (set-auto-mode t)))
    (error (fundamental-mode)))
  (when font-lock-defaults
    (font-lock-mode 1)))

(defun lispm-ide--proposal-header (diff)
  "Return the header line of DIFF's proposal buffer."
  (concat (lispm-ide--escape
           (format "%s's proposal for %s, yours to edit  "
                   (lispm-ide-diff-agent diff)
                   (file-name-nondirectory (lispm-ide-diff-file diff))))
          (substitute-command-keys
           "\\<lispm-ide-proposal-mode-map>\\[lispm-ide-accept] accept  \
\\[lispm-ide-reject] reject  \\[lispm-ide-show-diff-of-proposal] diff")))

;;; Windows

(defvar lispm-ide--layouts nil
  "Window layouts saved before diffs were shown: (FRAME CONFIGURATION LAYOUT).")

(defun lispm-ide--layout (frame)
  "Return FRAME's layout: (SELECTED . WINDOWS).
WINDOWS are the windows with their buffers, or `:ours' for a diff's
buffer.  SELECTED is the selected window or, if it shows a diff, the
window the user used last before."
  (cl-flet ((buffer-of (window)
              (if (lispm-ide--own-buffer-p (window-buffer window)) :ours (window-buffer window))))
    (let ((windows (cl-loop for window in (window-list frame 'nomini (frame-first-window frame))
                            collect (cons window (buffer-of window))))
          (selected (frame-selected-window frame)))
      (when (eq (buffer-of selected) :ours)
        (setq selected nil)
        (pcase-dolist (`(,window . ,buffer) windows)
          (unless (or (eq buffer :ours)
                      (and selected (<= (window-use-time window) (window-use-time selected))))
            (setq selected window))))
      (cons selected windows))))

(defun lispm-ide--same-layout-p (saved now)
  "Return non-nil if the layout NOW is the SAVED one but for diff windows.
Windows made for diffs do not count; a window of SAVED that now shows a
diff counts as unchanged."
  (let ((windows (cl-remove-if (lambda (entry)
                                 (and (eq (cdr entry) :ours)
                                      (not (assq (car entry) (cdr saved)))))
                               (cdr now))))
    (and (eq (car now) (car saved))
         (= (length windows) (length (cdr saved)))
         (cl-every (lambda (a b)
                     (and (eq (car a) (car b))
                          (or (eq (cdr a) :ours) (eq (cdr a) (cdr b)))))
                   windows (cdr saved)))))

(defun lispm-ide--save-layout (frame)
  "Save FRAME's window configuration, unless diffs shown there saved it."
  (unless (assq frame lispm-ide--layouts)
    (push (list frame (current-window-configuration frame) (lispm-ide--layout frame))
          lispm-ide--layouts)))

(defun lispm-ide--restore-layout (frame)
  "Restore FRAME's saved window configuration and forget it.
Windows keep the point and start the user gave them since.  If the user
rearranged the windows since, leave them, but give a window a diff took
over its buffer back; killing the diff buffers removes LispM's windows."
  (when-let* ((saved (assq frame lispm-ide--layouts)))
    (setq lispm-ide--layouts (delq saved lispm-ide--layouts))
    (if (not (and (frame-live-p frame)
                  (lispm-ide--same-layout-p (nth 2 saved) (lispm-ide--layout frame))))
        (pcase-dolist (`(,window . ,buffer) (cdr (nth 2 saved)))
          (when (and (window-live-p window) (buffer-live-p buffer)
                     (lispm-ide--own-buffer-p (window-buffer window)))
            (ignore-errors (set-window-buffer window buffer))))
      (let ((positions (cl-loop for window in (window-list frame 'nomini)
                                collect (list window (window-buffer window)
                                              (window-point window) (window-start window)))))
        (save-current-buffer
          (set-window-configuration (nth 1 saved)))
        (pcase-dolist (`(,window ,buffer ,point ,start) positions)
          (when (and (window-live-p window) (eq (window-buffer window) buffer))
            (set-window-start window start t)
            (set-window-point window point)))))))

(defun lispm-ide--settle-layouts ()
  "Restore the layout of each frame where no pending diff is shown."
  (dolist (saved (copy-sequence lispm-ide--layouts))
    (let ((frame (car saved)))
      (unless (cl-find frame lispm-ide--diffs :key #'lispm-ide-diff-frame)
        (lispm-ide--restore-layout frame)))))

(defun lispm-ide--proposal-action ()
  "Return the `display-buffer' action for a proposal buffer."
  (let ((slot (or (alist-get 'slot (cdr lispm-ide-diff-display-action)) 0)))
    (cons (car lispm-ide-diff-display-action)
          (cons (cons 'slot (1+ slot)) (cdr lispm-ide-diff-display-action)))))

(defun lispm-ide--display (diff)
  "Show DIFF's diff on the selected frame, saving its window configuration first."
  (let ((frame (selected-frame)))
    (lispm-ide--save-layout frame)
    (setf (lispm-ide-diff-frame diff) frame)
    (display-buffer (lispm-ide-diff-diff-buffer diff) lispm-ide-diff-display-action)
    (lispm-ide--settle-layouts)))

;;; Opening and resolving

(defun lispm-ide--buffer-killed ()
  "Close the diff of the buffer being killed, without a decision."
  (when-let* ((diff lispm-ide--this))
    (when (eq (lispm-ide-diff-state diff) 'pending)
      (lispm-ide--resolve diff 'closed nil (current-buffer)))))
(put 'lispm-ide--buffer-killed 'permanent-local-hook t)

(defun lispm-ide--existing-directory (file)
  "Return the directory of FILE, or its nearest ancestor that exists."
  (let ((dir (file-name-directory file)))
    (while (and dir (not (file-directory-p dir)))
      (let ((parent (file-name-directory (directory-file-name dir))))
        (setq dir (unless (equal parent dir) parent))))
    (or dir temporary-file-directory)))

(defun lispm-ide--make-buffer (name diff)
  "Return a new buffer for DIFF, named after NAME."
  (let ((buffer (generate-new-buffer name)))
    (with-current-buffer buffer
      (setq lispm-ide--this diff
            default-directory (lispm-ide--existing-directory (lispm-ide-diff-file diff)))
      (add-hook 'kill-buffer-hook #'lispm-ide--buffer-killed nil t))
    buffer))

(defun lispm-ide-open-diff (id agent file contents &optional tab-name)
  "Show the change AGENT proposes to FILE, its new CONTENTS, and return the diff.
ID is the request's id and TAB-NAME the CLI's name for the diff.  The
decision comes later, from the user; see `lispm-ide-accept'."
  (when (cl-find id lispm-ide--diffs :key #'lispm-ide-diff-id :test #'equal)
    (signal 'lispm-ide-error (list (format "diff %s is already open" id))))
  (let* ((file (expand-file-name file))
         (dos (lispm-edit-file-dos-p file))
         (diff (lispm-ide--diff-make :id id :agent agent :file file
                                     :tab-name tab-name :dos dos))
         (base (format "%s (%s)" (file-name-nondirectory file) agent))
         (proposal (lispm-ide--make-buffer (format "*lispm proposal: %s*" base) diff))
         (shown (lispm-ide--make-buffer (format "*lispm diff: %s*" base) diff)))
    (setf (lispm-ide-diff-proposal-buffer diff) proposal
          (lispm-ide-diff-diff-buffer diff) shown)
    (condition-case err
        (progn
          (with-current-buffer proposal
            (insert (if dos (string-replace "\r\n" "\n" contents) contents))
            (lispm-ide--set-mode-for file)
            (setq lispm-ide--this diff)
            (lispm-ide-proposal-mode 1)
            (setq header-line-format (lispm-ide--proposal-header diff)
                  buffer-undo-list nil)
            (set-buffer-modified-p nil)
            (goto-char (point-min)))
          (with-current-buffer shown
            (let ((diff-update-on-the-fly nil))
              (lispm-ide-diff-mode))
            (setq header-line-format (lispm-ide--header diff)))
          (lispm-ide--render diff)
          (setq lispm-ide--diffs (append lispm-ide--diffs (list diff)))
          (lispm-ide--display diff))
      (error
       (setf (lispm-ide-diff-state diff) 'closed)
       (setq lispm-ide--diffs (delq diff lispm-ide--diffs))
       (dolist (buffer (list proposal shown))
         (when (buffer-live-p buffer) (kill-buffer buffer)))
       (lispm-ide--settle-layouts)
       (signal (car err) (cdr err))))
    (message "LispM: %s proposes a change to %s%s" agent (file-name-nondirectory file)
             (if (cdr lispm-ide--diffs)
                 (format " (%d diffs pending)" (length lispm-ide--diffs))
               ""))
    diff))

(defun lispm-ide--notify (diff outcome &optional contents)
  "Tell the sidecar DIFF's OUTCOME, with the CONTENTS written if saved."
  (condition-case err
      (lispm-sidecar-notify 'lispm/diff-resolved
                            (append (list :id (lispm-ide-diff-id diff)
                                          :outcome (symbol-name outcome))
                                    (when (eq outcome 'saved)
                                      (list :contents (lispm-views-json-string contents)))))
    (error (message "LispM: could not tell the sidecar about diff %s: %s"
                    (lispm-ide-diff-id diff) (error-message-string err)))))

(defun lispm-ide--resolve (diff outcome &optional contents dying)
  "Resolve DIFF with OUTCOME: tell the sidecar, then clean up.
CONTENTS is what was written, for `saved'.  DYING is a buffer of DIFF
being killed already."
  (when (eq (lispm-ide-diff-state diff) 'pending)
    (setf (lispm-ide-diff-state diff) outcome)
    (setq lispm-ide--diffs (delq diff lispm-ide--diffs))
    (lispm-ide--notify diff outcome contents)
    (let* ((frame (lispm-ide-diff-frame diff))
           (buffers (list (lispm-ide-diff-diff-buffer diff)
                          (lispm-ide-diff-proposal-buffer diff)))
           (next (cl-find frame lispm-ide--diffs :key #'lispm-ide-diff-frame)))
      (when (and next (frame-live-p frame)
                 (get-buffer-window (lispm-ide-diff-diff-buffer diff) frame))
        ;; Another diff waits on this frame: it takes this one's window.
        (with-selected-frame frame
          (display-buffer (lispm-ide-diff-diff-buffer next) lispm-ide-diff-display-action)))
      (lispm-ide--settle-layouts)
      (let ((kill-buffer-query-functions nil))
        (dolist (buffer buffers)
          (when (and (buffer-live-p buffer) (not (eq buffer dying)))
            (kill-buffer buffer)))))))

;;; Commands in a diff

(defun lispm-ide--write (diff text)
  "Write TEXT to DIFF's file through its buffer, as one undo step; save it.
Visit the file if no buffer does.  If saving fails, the buffer's text
is put back and the error goes on.  Return the text as written."
  (let* ((file (lispm-ide-diff-file diff))
         (buffer (lispm-edit-visit file)))
    (with-current-buffer buffer
      (barf-if-buffer-read-only)
      ;; The user accepted replacing whatever the disk has now.
      (when-let* ((change (lispm-edit-replace buffer text :save t :overwrite t)))
        (lispm-edit-forget (list change)))
      (let ((written (save-restriction
                       (widen)
                       (buffer-substring-no-properties (point-min) (point-max)))))
        (if (eql (coding-system-eol-type buffer-file-coding-system) 1)
            (string-replace "\n" "\r\n" written)
          written)))))

(defun lispm-ide-accept (&optional diff)
  "Accept DIFF, the current buffer's: write its proposal, as edited, and save.
The file's buffer changes in one undo step; the agent learns exactly
what was written."
  (interactive)
  (let* ((diff (lispm-ide--pending diff))
         (written (condition-case err
                      (lispm-ide--write diff (lispm-ide--proposal-text diff))
                    (error (user-error "Could not write %s: %s"
                                       (lispm-ide-diff-file diff)
                                       (error-message-string err))))))
    (lispm-ide--resolve diff 'saved written)
    (message "LispM: wrote %s's change to %s" (lispm-ide-diff-agent diff)
             (file-name-nondirectory (lispm-ide-diff-file diff)))))

(defun lispm-ide-reject (&optional diff)
  "Reject DIFF, the current buffer's: change nothing, and tell the agent."
  (interactive)
  (let ((diff (lispm-ide--pending diff)))
    (lispm-ide--resolve diff 'rejected)
    (message "LispM: rejected %s's change to %s" (lispm-ide-diff-agent diff)
             (file-name-nondirectory (lispm-ide-diff-file diff)))))

(defun lispm-ide-edit-proposal (&optional diff)
  "Show the proposal of DIFF, the current buffer's, and select it to edit."
  (interactive)
  (let* ((diff (lispm-ide--pending diff))
         (window (display-buffer (lispm-ide-diff-proposal-buffer diff)
                                 (lispm-ide--proposal-action))))
    (when window (select-window window))))

(defun lispm-ide--set-proposal (diff text)
  "Make TEXT the proposal of DIFF, and show the diff anew."
  (with-current-buffer (lispm-ide-diff-proposal-buffer diff)
    (save-restriction
      (widen)
      (let ((inhibit-read-only t))
        (replace-region-contents (point-min) (point-max) (lambda () text)))))
  (lispm-ide--render diff))

(defun lispm-ide-reject-hunk ()
  "Take the hunk at point out of the proposal, the file's lines kept there.
What is accepted later is the proposal without it, and the agent is
told exactly what was written."
  (interactive)
  (let* ((diff (lispm-ide--pending nil))
         (number (save-excursion
                   (end-of-line)
                   (let ((count 0))
                     (while (re-search-backward "^@@ " nil t)
                       (cl-incf count))
                     count))))
    (when (zerop number)
      (user-error "No hunk here"))
    (let* ((file (lispm-ide-diff-file diff))
           (old (or (lispm-edit-file-text file) ""))
           (review (or (lispm-review-make file (lispm-edit-diff old (lispm-ide--proposal-text diff)
                                                                file))
                       (user-error "No hunk here"))))
      (lispm-review-set review number 'rejected)
      (lispm-ide--set-proposal diff (lispm-review-apply review old))
      (message "LispM: hunk %d taken out of %s's proposal" number (lispm-ide-diff-agent diff)))))

(defun lispm-ide-ediff ()
  "Merge the proposal by hand in Ediff: the file's text against the proposal.
The proposal buffer is Ediff's buffer B: what it holds when you accept
is what is written."
  (interactive)
  (let* ((diff (lispm-ide--pending nil))
         (file (lispm-ide-diff-file diff))
         (now (get-buffer-create (format "*lispm now: %s*" (file-name-nondirectory file)))))
    (require 'ediff)
    (with-current-buffer now
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (or (lispm-edit-file-text file) "")))
      (setq buffer-read-only t))
    (ediff-buffers now (lispm-ide-diff-proposal-buffer diff)
                   (list (lambda ()
                           (add-hook 'ediff-quit-hook
                                     (lambda ()
                                       (when (eq (lispm-ide-diff-state diff) 'pending)
                                         (lispm-ide--render diff))
                                       (run-at-time 0 nil #'kill-buffer now))
                                     nil t))))))

(defun lispm-ide-refresh-diff (&optional diff)
  "Compute the diff of DIFF, the current buffer's, again."
  (interactive)
  (lispm-ide--render (lispm-ide--pending diff)))

(defun lispm-ide-show-diff-of-proposal ()
  "Show the diff of the current proposal, refreshed."
  (interactive)
  (let ((diff (lispm-ide--pending nil)))
    (lispm-ide--render diff)
    (display-buffer (lispm-ide-diff-diff-buffer diff) lispm-ide-diff-display-action)))

;;;###autoload
(defun lispm-ide-show-diff (diff)
  "Show the pending DIFF again; asked for among the pending ones."
  (interactive
   (list (let ((diffs (mapcar (lambda (d) (cons (buffer-name (lispm-ide-diff-diff-buffer d)) d))
                              lispm-ide--diffs)))
           (cond ((null diffs) (user-error "No diff is pending"))
                 ((null (cdr diffs)) (cdar diffs))
                 (t (cdr (assoc (completing-read "Show diff: " diffs nil t) diffs)))))))
  (lispm-ide--display diff))

(defun lispm-ide-close-diffs (predicate)
  "Close every pending diff PREDICATE accepts, without a decision.
Return how many were closed."
  (let ((count 0))
    (dolist (diff (copy-sequence lispm-ide--diffs))
      (when (funcall predicate diff)
        (lispm-ide--resolve diff 'closed)
        (cl-incf count)))
    count))

;;; Requests from the sidecar

(defun lispm-ide--bad-params (method format &rest args)
  "Signal `lispm-invalid-params' for METHOD; FORMAT and ARGS say why."
  (lispm-signal 'lispm-invalid-params (list method) "%s"
                (concat (symbol-name method) ": " (apply #'format format args))))

(defun lispm-ide--string (method params key &optional optional)
  "Return the non-empty string KEY of METHOD's PARAMS.
If OPTIONAL, nil is allowed too; anything else is an invalid params error."
  (let ((value (plist-get params key)))
    (cond ((and optional (null value)) nil)
          ((and (stringp value) (not (string-empty-p value))) value)
          (t (lispm-ide--bad-params method "`%s' must be a non-empty string"
                                    (substring (symbol-name key) 1))))))

(defun lispm-ide--file (method params)
  "Return the absolute file name `file' of METHOD's PARAMS."
  (let ((file (lispm-ide--string method params :file)))
    (unless (file-name-absolute-p file)
      (lispm-ide--bad-params method "`file' must be an absolute file name: %s" file))
    (expand-file-name file)))

(defun lispm-ide--flag (params key default)
  "Return the boolean KEY of PARAMS as t or nil; DEFAULT if absent or null."
  (let ((value (plist-get params key)))
    (cond ((null value) default)
          ((eq value :json-false) nil)
          (t t))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/open-diff)) params)
  "Show the diff PARAMS describe, and answer at once; see `lispm-ide-open-diff'."
  (let ((id (plist-get params :id))
        (agent (lispm-ide--string 'emacs/open-diff params :agent))
        (file (lispm-ide--file 'emacs/open-diff params))
        (contents (plist-get params :new_contents))
        (tab-name (lispm-ide--string 'emacs/open-diff params :tab_name t)))
    (unless (or (and (stringp id) (not (string-empty-p id))) (integerp id))
      (lispm-ide--bad-params 'emacs/open-diff "`id' must be a string or an integer"))
    (unless (stringp contents)
      (lispm-ide--bad-params 'emacs/open-diff "`new_contents' must be a string"))
    (when (file-directory-p file)
      (lispm-ide--bad-params 'emacs/open-diff "%s is a directory" file))
    (condition-case err
        (lispm-ide-open-diff id agent file contents tab-name)
      ;; The diff cannot be shown as the request asks, such as under an
      ;; id already open: the request is at fault.
      (lispm-ide-error (lispm-ide--bad-params 'emacs/open-diff "%s" (cadr err))))
    (list :shown t)))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/close-diff)) params)
  "Close, undecided, the pending diffs PARAMS name; answer how many.
PARAMS name them by `id', by `tab_name', or `all' of them, optionally
only those of `agent'."
  (let ((id (plist-get params :id))
        (tab-name (lispm-ide--string 'emacs/close-diff params :tab_name t))
        (agent (lispm-ide--string 'emacs/close-diff params :agent t))
        (all (lispm-ide--flag params :all nil)))
    (unless (or id tab-name all)
      (lispm-ide--bad-params 'emacs/close-diff "give `id', `tab_name' or `all'"))
    (list :closed
          (lispm-ide-close-diffs
           (lambda (diff)
             (and (or all
                      (and id (equal id (lispm-ide-diff-id diff)))
                      (and tab-name (equal tab-name (lispm-ide-diff-tab-name diff))))
                  (or (null agent) (equal agent (lispm-ide-diff-agent diff)))))))))

(defun lispm-ide--select (buffer start-text end-text to-eol)
  "Select in BUFFER from START-TEXT's first match to END-TEXT's, or line end.
With no END-TEXT (or no match of it), the selection ends where
START-TEXT's match does; TO-EOL extends it to the end of that line.
Return the selection as (START . END), or nil if START-TEXT is absent."
  (with-current-buffer buffer
    (let ((case-fold-search nil)
          start end)
      (save-excursion
        (save-restriction
          (widen)
          (goto-char (point-min))
          (when (search-forward start-text nil t)
            (setq start (match-beginning 0)
                  end (match-end 0))
            (when (and end-text (search-forward end-text nil t))
              (setq end (match-end 0)))
            (when to-eol
              (goto-char end)
              (setq end (line-end-position))))))
      (when start
        (when (or (< start (point-min)) (> end (point-max)))
          (widen))
        (goto-char end)
        (set-mark start)
        (cons start end)))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/open-file)) params)
  "Visit the file PARAMS name, select the range they describe, and show it.
With `make_frontmost' false, the file is visited in the background."
  (let* ((file (lispm-ide--file 'emacs/open-file params))
         (start-text (lispm-ide--string 'emacs/open-file params :start_text t))
         (end-text (lispm-ide--string 'emacs/open-file params :end_text t))
         (to-eol (lispm-ide--flag params :select_to_eol nil))
         (frontmost (lispm-ide--flag params :make_frontmost t)))
    (unless (file-exists-p file)
      (lispm-signal 'lispm-no-such-file (list file) "%s"
                    (format "emacs/open-file: no file %s" file)))
    (when (file-directory-p file)
      (lispm-ide--bad-params 'emacs/open-file "%s is a directory" file))
    (let* ((buffer (or (find-buffer-visiting file)
                       (let ((inhibit-interaction t))
                         (find-file-noselect file))))
           (window (and frontmost
                        (pop-to-buffer
                         buffer
                         `((display-buffer-reuse-window display-buffer-use-some-window
                                                        display-buffer-pop-up-window)
                           ;; Never cover an agent's terminal, or a shell.
                           (inhibit-same-window
                            . ,(and (get-buffer-process (window-buffer)) t))))))
           (range (and start-text (lispm-ide--select buffer start-text end-text to-eol))))
      (when (and range (window-live-p window) (eq (window-buffer window) buffer))
        (set-window-point window (cdr range)))
      (list :opened t :selected (if range t :json-false)))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/save-document)) params)
  "Save the buffer visiting the file PARAMS name, if it is modified."
  (let* ((file (lispm-ide--file 'emacs/save-document params))
         (buffer (find-buffer-visiting file)))
    (cond
     ((null buffer)
      (list :saved :json-false :message (format "Document not open: %s" file)))
     ((not (buffer-modified-p buffer))
      (list :saved t :message (format "No unsaved changes in %s" file)))
     ((not (verify-visited-file-modtime buffer))
      (list :saved :json-false
            :message (format "%s changed on disk since Emacs read it; not saved" file)))
     (t
      (condition-case err
          (let ((inhibit-interaction t))
            (with-current-buffer buffer (lispm-save-buffer-whole))
            (list :saved t :message (format "Saved %s" file)))
        (error (list :saved :json-false
                     :message (lispm-views-json-string
                               (format "Could not save %s: %s" file
                                       (error-message-string err))))))))))

;;; Mentioning a region to Claude

(defun lispm-ide-claude-agents ()
  "Return the live Claude agents with a live terminal, oldest first."
  (cl-loop for agent in (lispm-agents)
           when (and (lispm-agent-p agent)
                     (eq (lispm-agent-kind agent) 'claude)
                     (buffer-live-p (lispm-agent-buffer agent)))
           collect agent))

(defun lispm-ide--region-lines ()
  "Return the 0-based lines (FIRST . LAST) of the region, or of point's line.
A region that ends at the beginning of a line does not take that line."
  (let* ((active (use-region-p))
         (start (if active (region-beginning) (point)))
         (end (if active (region-end) (point)))
         (first (1- (line-number-at-pos start t)))
         (last (1- (line-number-at-pos end t))))
    (when (and active (> end start) (> last first)
               (save-excursion (goto-char end) (bolp)))
      (setq last (1- last)))
    (cons first last)))

;;;###autoload
(defun lispm-send-region (agent)
  "Mention the region's lines, or the current line, to the Claude AGENT.
The agent's composer gets a reference to the file and lines, like
`@notes.el#L3-7'; its terminal is shown.  Asks which agent if several
Claude agents run."
  (interactive
   (list (let ((agents (lispm-ide-claude-agents)))
           (unless buffer-file-name
             (user-error "This buffer visits no file"))
           (cond ((null agents) (user-error "No Claude agent is running"))
                 ((null (cdr agents)) (car agents))
                 (t (lispm-agent-get
                     (completing-read "Mention to: " (mapcar #'lispm-agent-name agents)
                                      nil t)))))))
  (unless buffer-file-name
    (user-error "This buffer visits no file"))
  (let ((lines (lispm-ide--region-lines))
        (name (lispm-agent-name agent)))
    (lispm-sidecar-async-request
     'lispm/at-mention
     (list :name name
           :instance (lispm-agent-serial agent)
           :file (lispm-views-truename)
           :line_start (car lines)
           :line_end (cdr lines))
     :on-error (lambda (text) (message "LispM: could not mention to %s: %s" name text)))
    (when (use-region-p) (deactivate-mark))
    (message "LispM: mentioned lines %d-%d of %s to %s%s" (1+ (car lines)) (1+ (cdr lines))
             (file-name-nondirectory buffer-file-name) name
             (if (buffer-modified-p) " (unsaved changes: it reads the file on disk)" ""))
    (pop-to-buffer (lispm-agent-buffer agent))))

(provide 'lispm-ide)
;;; lispm-ide.el ends here
