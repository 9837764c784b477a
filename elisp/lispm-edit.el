;;; lispm-edit.el --- Editing files as Emacs sees them, change records, revert  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, files

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Everything LispM does to a file's text, once, for the tools
;; (lispm-tools.el), Claude Code's diffs (lispm-ide.el) and LispM's own
;; agent:
;;
;; - `lispm-edit-file-text': a file's text as Emacs sees it (its buffer,
;;   unsaved changes included, else the disk, read literally).
;; - `lispm-edit-replace': make a text the whole text of a buffer or
;;   file, as ONE undo step (a change group opened and closed within one
;;   call, never held open across the user's commands), changing only
;;   the region between the common prefix and suffix, so that point and
;;   markers stay with unchanged text.  It returns a `lispm-change'.
;; - `lispm-edit-diff', `lispm-edit-diff-hunks', `lispm-edit-apply-diff' and
;;   `lispm-edit-apply-hunks': unified diffs, and their hunks.
;; - `lispm-edit-snapshot' and `lispm-edit-snapshot-changes': what a
;;   shell command or evaluated Lisp did to the files of a folder, as
;;   `lispm-change's too.
;; - `lispm-edit-conflicts' and `lispm-edit-revert': take back a set of
;;   changes (a turn's), newest first, keeping the user's later edits
;;   elsewhere in the same files, or, if the user changed text the
;;   agent wrote, change nothing and say where.
;;
;; A change in a buffer is tracked by two markers around the text the
;; agent wrote; what was there before is kept as text.  Reverting works
;; on a copy of each buffer first (so a conflict anywhere changes
;; nothing anywhere), then puts each buffer's result in place as one
;; undo step.  Nothing here touches git: no index, no refs, no stash.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)

;;; Options

(defgroup lispm-edit nil
  "How LispM changes files, and takes its changes back."
  :group 'lispm
  :prefix "lispm-edit-")

(defcustom lispm-edit-snapshot-file-limit (* 1024 1024)
  "The biggest file, in bytes, whose contents a snapshot keeps.
Before a shell command or evaluated Lisp runs, LispM notes the size
and time of every file of the agent's folder, and keeps the bytes of
those up to this size, so that what the call changed can be put back.
A bigger file it changed is reported, but cannot be restored."
  :type 'natnum)

(defcustom lispm-edit-snapshot-total-limit (* 64 1024 1024)
  "The most bytes of file contents one snapshot keeps, all files together."
  :type 'natnum)

(defcustom lispm-edit-snapshot-time-limit 0.25
  "The most seconds a snapshot spends keeping files' bytes.
Past it, the remaining files are only noted (size, time, inode): a
change to one of them is reported, but cannot be restored.  It bounds
how long a shell command or evaluated Lisp waits, and Emacs with it,
before it starts in a big folder."
  :type 'number)

(defcustom lispm-edit-snapshot-file-count-limit 20000
  "The most files a snapshot notes; the files past it are not tracked."
  :type 'natnum)

(defcustom lispm-edit-snapshot-skipped-directories
  '(".git" ".hg" ".svn" "node_modules" ".venv" "__pycache__")
  "Directories a snapshot does not enter, by name.
What a command does inside them is not tracked, and so not reverted.
LispM never changes what is in `.git'."
  :type '(repeat string))

(defconst lispm-edit-replace-max-seconds 1.0
  "Seconds `replace-buffer-contents' may spend on one change.
Past that, the changed region is replaced at once, and markers in it
move to its beginning.")

(defconst lispm-edit--recent-limit 64
  "How many of its latest changes a buffer remembers, for later ones.")

;;; Errors

(lispm-define-error 'lispm-edit-error "LispM editing error" 'lispm-error)
;; STATUS, the diff program's exit status
(lispm-define-error 'lispm-diff-failed "The diff program failed" 'lispm-edit-error -32071)
;; LINE, the line that cannot be read, or nothing
(lispm-define-error 'lispm-diff-malformed "Malformed diff" 'lispm-edit-error -32069)
;; HUNK LINE: the hunk's number, from 1, and its first old line
(lispm-define-error 'lispm-diff-does-not-apply "The diff does not apply"
                    'lispm-edit-error -32070)
;; CONFLICTS: a list of (:file FILE :reason REASON)
(lispm-define-error 'lispm-revert-conflict "The changes cannot be reverted"
                    'lispm-edit-error -32072)

;;; Change records

(defvar lispm-edit--serial 0
  "The serial number of the latest `lispm-change'.")

(cl-defstruct (lispm-change (:constructor lispm-change--make) (:copier nil))
  "What one call changed in one file or buffer."
  (file nil :documentation "The file's absolute name, or nil for a buffer without file.")
  (buffer nil :documentation "The buffer changed, or nil for a change on disk only.")
  (beg nil :documentation "A marker in BUFFER where the text the agent wrote begins.")
  (end nil :documentation "A marker in BUFFER where the text the agent wrote ends.")
  (before nil :documentation "What was there before: text in a buffer; for a
change on disk only, the file's whole old contents as bytes (a unibyte
string), nil if it did not exist or was not kept.")
  (after nil :documentation "What the agent wrote (bytes, for a change on disk only).")
  (created nil :documentation "Non-nil if the file did not exist before.")
  (deleted nil :documentation "Non-nil if the call deleted the file.")
  (serial nil :documentation "Increasing with each change made: which is newer.")
  (visited nil :documentation "Non-nil if a buffer visited FILE before the change.")
  (directory nil :documentation "Non-nil for a directory the call created; or
the outermost directory created for a created FILE.")
  (stamp nil :documentation "For a change on disk only: the file's size and
modification time after the call, or nil if it does not exist.")
  (kept t :documentation "Nil if BEFORE could not be kept (too big).")
  (fixups nil :documentation "Where older changes' markers were in BEFORE:
a list of (CHANGE SLOT OFFSET), SLOT `beg' or `end'."))

(defun lispm-edit--new-change (&rest slots)
  "Return a new `lispm-change' with SLOTS and the next serial number."
  (apply #'lispm-change--make :serial (cl-incf lispm-edit--serial) slots))

(defvar-local lispm-edit--recent nil
  "This buffer's latest changes, newest first.")
(put 'lispm-edit--recent 'permanent-local t)

(defvar-local lispm-edit--made-directory nil
  "The outermost directory `lispm-edit-visit' created for this buffer's file.")
(put 'lispm-edit--made-directory 'permanent-local t)

(defvar-local lispm-edit--fresh nil
  "Non-nil in a buffer `lispm-edit-visit' made, until its first change.")
(put 'lispm-edit--fresh 'permanent-local t)

(defun lispm-edit--buffer-killed ()
  "Keep what changed in the current buffer revertable once it is gone.
The markers of its recent changes become positions, which hold for the
file on disk if the buffer had no unsaved changes; else they are
dropped (the change then conflicts)."
  (let ((unsaved (buffer-modified-p)))
    (dolist (change lispm-edit--recent)
      (dolist (slot '(beg end))
        (let ((marker (if (eq slot 'beg) (lispm-change-beg change) (lispm-change-end change))))
          (when (markerp marker)
            (let ((position (and (not unsaved) (marker-position marker))))
              (set-marker marker nil)
              (if (eq slot 'beg)
                  (setf (lispm-change-beg change) position)
                (setf (lispm-change-end change) position)))))))))
(put 'lispm-edit--buffer-killed 'permanent-local-hook t)

(defun lispm-edit--remember (change)
  "Add CHANGE to the list of its buffer's latest ones."
  (with-current-buffer (lispm-change-buffer change)
    (unless (memq #'lispm-edit--buffer-killed kill-buffer-hook)
      (add-hook 'kill-buffer-hook #'lispm-edit--buffer-killed nil t))
    (push change lispm-edit--recent)
    (when (> (length lispm-edit--recent) lispm-edit--recent-limit)
      (setcdr (nthcdr (1- lispm-edit--recent-limit) lispm-edit--recent) nil))))

(defun lispm-edit--fixups (from to)
  "Return the fixups of a change of the current buffer's text FROM TO.
Those are where the markers of the buffer's recent changes lie in
that region now, as (CHANGE SLOT OFFSET)."
  (let (fixups)
    (dolist (change lispm-edit--recent)
      (dolist (slot '(beg end))
        (let ((marker (if (eq slot 'beg) (lispm-change-beg change) (lispm-change-end change))))
          (when (and (markerp marker) (eq (marker-buffer marker) (current-buffer))
                     (<= from marker to))
            (push (list change slot (- marker from)) fixups)))))
    fixups))

(defun lispm-edit-forget (changes)
  "Let go of a list of change records: they will not be reverted.
The list is CHANGES.  Their markers stop slowing down edits of their buffers."
  (dolist (change changes)
    (dolist (marker (list (lispm-change-beg change) (lispm-change-end change)))
      (when (markerp marker) (set-marker marker nil)))
    (let ((buffer (lispm-change-buffer change)))
      (when (buffer-live-p buffer)
        (with-current-buffer buffer
          (setq lispm-edit--recent (delq change lispm-edit--recent)))))))

;;; The text of a file

(defun lispm-edit--buffer-text (&optional buffer)
  "Return the whole text of BUFFER (default: the current one), widened."
  (with-current-buffer (or buffer (current-buffer))
    (save-restriction
      (widen)
      (buffer-substring-no-properties (point-min) (point-max)))))

(defun lispm-edit--live-buffer (file)
  "Return the buffer visiting FILE whose text is what Emacs has of it, or nil.
It counts if it has unsaved changes, agrees with the disk, or the file
does not exist."
  (when-let* ((buffer (find-buffer-visiting file)))
    (with-current-buffer buffer
      (and (or (buffer-modified-p) (verify-visited-file-modtime buffer)
               (not (file-exists-p file)))
           buffer))))

(defun lispm-edit-live-text (file)
  "Return FILE's text from the buffer visiting it, or nil.
Nil also when that buffer has no unsaved changes but the file has
changed on disk since: then the disk's text is what Emacs would see."
  (when-let* ((buffer (lispm-edit--live-buffer file)))
    (lispm-edit--buffer-text buffer)))

(defun lispm-edit-file-text (file)
  "Return FILE's text as Emacs sees it, or nil if there is none.
That is the text of the buffer visiting FILE, unsaved changes
included, if it has unsaved changes or agrees with the disk; else the
file's, read literally by `lispm-insert-file-text'.  Return nil if
the file does not exist and no buffer visits it."
  (or (lispm-edit-live-text file)
      (when (file-regular-p file)
        (with-temp-buffer
          (lispm-insert-file-text file)
          (buffer-string)))))

(defun lispm-edit-file-dos-p (file)
  "Return non-nil if FILE's lines end in CR LF, in its buffer or on disk."
  (if-let* ((buffer (find-buffer-visiting file)))
      (eql (coding-system-eol-type (buffer-local-value 'buffer-file-coding-system buffer)) 1)
    (and (file-readable-p file) (file-regular-p file)
         (with-temp-buffer
           (lispm-insert-file-text file)
           (eql (coding-system-eol-type last-coding-system-used) 1)))))

(defun lispm-edit--outermost-missing (directory)
  "Return the outermost of DIRECTORY and its parents that does not exist, or nil."
  (let ((dir (directory-file-name directory)) missing)
    (while (and dir (not (file-exists-p dir)))
      (setq missing dir
            dir (let ((up (directory-file-name (file-name-directory dir))))
                  (unless (equal up dir) up))))
    missing))

(defun lispm-edit-visit (file)
  "Return a buffer visiting FILE, visiting it if needed, asking nothing.
The directories FILE needs are created; a new file's buffer gets the
coding system `utf-8-unix'.  Only the file's safe local variables are
applied."
  (or (find-buffer-visiting file)
      (let ((enable-local-variables :safe)
            (large-file-warning-threshold nil)
            (inhibit-interaction t)
            (missing (lispm-edit--outermost-missing (file-name-directory file))))
        (make-directory (file-name-directory file) t)
        (let ((buffer (find-file-noselect file)))
          (with-current-buffer buffer
            (setq lispm-edit--made-directory missing
                  lispm-edit--fresh t)
            (unless (file-exists-p file)
              (setq buffer-file-coding-system 'utf-8-unix)))
          buffer))))

;;; Replacing text as one undo step

(defun lispm-edit--common-suffix (old new limit)
  "Return how many characters OLD and NEW share at their ends, at most LIMIT.
They are compared a block at a time from the end, in place: only the
block where they differ is copied, so a 12 MB text costs no copy."
  (let ((old-end (length old)) (new-end (length new)) (shared 0) (done nil))
    (while (and (not done) (< shared limit))
      (let ((block (min 4096 (- limit shared))))
        (if (eq t (compare-strings old (- old-end shared block) (- old-end shared)
                                   new (- new-end shared block) (- new-end shared)))
            (setq shared (+ shared block))
          (let ((cmp (compare-strings
                      (reverse (substring old (- old-end shared block) (- old-end shared))) nil nil
                      (reverse (substring new (- new-end shared block) (- new-end shared))) nil nil)))
            (setq shared (+ shared (1- (abs cmp)))
                  done t)))))
    shared))

(defun lispm-edit--affixes (old new)
  "Return (PREFIX . SUFFIX): how many characters OLD and NEW share at each end.
The two never overlap: PREFIX + SUFFIX is at most the shorter length."
  (let* ((shorter (min (length old) (length new)))
         (prefix (let ((cmp (compare-strings old nil nil new nil nil)))
                   (if (eq cmp t) shorter (min shorter (1- (abs cmp)))))))
    (cons prefix (lispm-edit--common-suffix old new (- shorter prefix)))))

(defun lispm-edit--replace-region (from to text)
  "Replace the current buffer's text FROM TO by TEXT.
Unchanged characters keep their markers, as `replace-buffer-contents'
does, within `lispm-edit-replace-max-seconds'."
  (let ((source (generate-new-buffer " *lispm-edit text*" t)))
    (unwind-protect
        (progn
          (with-current-buffer source (insert text))
          (save-restriction
            (narrow-to-region from to)
            (replace-buffer-contents source lispm-edit-replace-max-seconds)))
      (kill-buffer source))))

(defun lispm-edit--save ()
  "Save the current buffer, exactly as it is, even if unmodified.
The file is replaced whole (`lispm-save-buffer-whole'): a crash
mid-save leaves the old text or the new."
  (let ((require-final-newline nil))
    (set-buffer-modified-p t)
    (lispm-save-buffer-whole)))

(cl-defun lispm-edit-replace (buffer-or-file new-text &key save overwrite)
  "Make NEW-TEXT the whole text of BUFFER-OR-FILE, as one undo step.
BUFFER-OR-FILE is a buffer, or a file name, whose buffer is used (the
file is visited, by `lispm-edit-visit', if no buffer visits it).  Only
the region between the common prefix and suffix of the old and new
texts changes; point and markers stay with unchanged text.

With SAVE non-nil, the buffer is also saved, inside the same undo
step (so what a `before-save-hook' does is part of it); if saving
fails, the text is put back and the error goes on.  It is not saved
when nothing changed and its file agrees with it.  OVERWRITE non-nil
means the file may have changed on disk and is to be replaced anyway.

The change group is opened and closed within this call: the user's
edits before and after it are steps of their own.  Return the
`lispm-change', or nil if the text was NEW-TEXT already and nothing
was saved."
  (let* ((buffer (if (stringp buffer-or-file) (lispm-edit-visit buffer-or-file)
                   buffer-or-file))
         (visited (not (buffer-local-value 'lispm-edit--fresh buffer))))
    (with-current-buffer buffer
      (setq lispm-edit--fresh nil)
      (save-restriction
        (widen)
        (let* ((file buffer-file-name)
               (existed (and file (file-exists-p file)))
               (stale (and existed (not (verify-visited-file-modtime buffer))))
               (old (buffer-substring-no-properties (point-min) (point-max)))
               (was-modified (buffer-modified-p))
               (same (string= old new-text))
               (save (and save file
                          (or (not same) was-modified (not existed) stale))))
          (when (and stale overwrite)
            (set-visited-file-modtime))
          (unless (and same (not save))
            (let* ((affixes (lispm-edit--affixes old new-text))
                   (from (+ (point-min) (car affixes)))
                   (to (- (point-max) (cdr affixes)))
                   (fixups (lispm-edit--fixups from to))
                   (undo-outer-limit nil)
                   (undo-limit most-positive-fixnum)
                   (undo-strong-limit most-positive-fixnum)
                   (group nil)
                   (done nil))
              (undo-boundary)
              (unwind-protect
                  (progn
                    (setq group (prepare-change-group))
                    (activate-change-group group)
                    (unless same
                      (lispm-edit--replace-region
                       from to (substring new-text (car affixes)
                                          (- (length new-text) (cdr affixes)))))
                    (when save (lispm-edit--save))
                    (setq done t))
                (when group
                  (if done
                      (progn (accept-change-group group)
                             (undo-amalgamate-change-group group))
                    (cancel-change-group group)
                    (set-buffer-modified-p was-modified)))
                (undo-boundary))
              ;; A save hook may have changed more: the change is what
              ;; differs now.
              (let* ((now (buffer-substring-no-properties (point-min) (point-max)))
                     (affixes (if (string= now new-text) affixes
                                (lispm-edit--affixes old now))))
                (unless (and (string= old now) (or existed (not file)))
                  (let ((change
                         (lispm-edit--new-change
                          :file file :buffer buffer :visited (and visited t)
                          :beg (copy-marker (+ (point-min) (car affixes)) t)
                          :end (copy-marker (- (point-max) (cdr affixes)))
                          :before (substring old (car affixes) (- (length old) (cdr affixes)))
                          :after (substring now (car affixes) (- (length now) (cdr affixes)))
                          :created (and file (not existed))
                          :directory (and file (not existed) lispm-edit--made-directory)
                          :fixups fixups)))
                    (lispm-edit--remember change)
                    change))))))))))

;;; Diffs

(defun lispm-edit--temp-file (directory name text)
  "Write TEXT to the file NAME in DIRECTORY, as UTF-8; return its name."
  (let ((file (expand-file-name name directory))
        (coding-system-for-write 'utf-8-emacs-unix))
    (write-region text nil file nil 'silent)
    file))

(defun lispm-edit-diff (old new label)
  "Return the unified diff from the text OLD to the text NEW.
LABEL names the file in the headers: a string gives a/LABEL and
b/LABEL; a cons (OLD-LABEL . NEW-LABEL) gives those.  Return the empty
string if the texts are equal."
  (if (string= old new)
      ""
    (let ((dir (make-temp-file "lispm-diff" t)))
      (unwind-protect
          (let ((a (lispm-edit--temp-file dir "a" old))
                (b (lispm-edit--temp-file dir "b" new)))
            ;; `diff' of two small local files takes milliseconds and
            ;; cannot hang, so it runs synchronously: a process waited on
            ;; from inside a JSON-RPC dispatcher may never see its sentinel.
            (with-temp-buffer
              (let* ((default-directory dir)
                     (coding-system-for-read 'utf-8-emacs-unix)
                     (status (call-process "diff" nil t nil "-a" "-u"
                                           "--label" (if (consp label) (car label)
                                                       (concat "a/" label))
                                           "--label" (if (consp label) (cdr label)
                                                       (concat "b/" label))
                                           a b)))
                (unless (memql status '(0 1))
                  (lispm-signal 'lispm-diff-failed (list status)
                                "diff failed (%s): %s" status (buffer-string)))
                (buffer-string))))
        (delete-directory dir t)))))

(defun lispm-edit-lines (text)
  "Split TEXT into lines, each with its newline (the last one may lack it)."
  ;; `string-search', not `split-string': a regexp costs ms per MB.
  (let ((lines nil) (pos 0) (length (length text)) newline)
    (while (and (< pos length) (setq newline (string-search "\n" text pos)))
      (push (substring text pos (1+ newline)) lines)
      (setq pos (1+ newline)))
    (when (< pos length)
      (push (substring text pos) lines))
    (nreverse lines)))

(defun lispm-edit-diff-hunks (diff)
  "Return the hunks of DIFF, a unified diff of one file.
Each is (OLD-START OLD-LINES NEW-LINES), lines with their newlines:
OLD-LINES the hunk's context and removed lines, NEW-LINES its context
and added lines.  Signal `lispm-diff-malformed' if DIFF is not one."
  (let ((lines (lispm-edit-lines diff))
        hunks current last-kind)
    (dolist (line lines)
      (cond ((string-match "\\`@@ -\\([0-9]+\\)\\(?:,[0-9]+\\)? \\+[0-9]+\\(?:,[0-9]+\\)? @@" line)
             (when current (push current hunks))
             (setq current (list (string-to-number (match-string 1 line)) nil nil)
                   last-kind nil))
            ((and current (string-prefix-p "+++ " line))
             (lispm-signal 'lispm-diff-malformed (list line)
                           "The diff changes more than one file; give one file's diff"))
            ((not current))             ; Headers before the first hunk.
            ((string-prefix-p "\\" line)
             ;; "\ No newline at end of file": the line before has none.
             (dolist (slot (pcase last-kind (" " '(1 2)) ("-" '(1)) ("+" '(2))))
               (let ((last (car (nth slot current))))
                 (when (and last (string-suffix-p "\n" last))
                   (setf (car (nth slot current)) (substring last 0 -1))))))
            ((string-match "\\`\\([ +-]\\)" line)
             (let ((kind (match-string 1 line))
                   (text (substring line 1)))
               (setq last-kind kind)
               (when (member kind '(" " "-")) (push text (nth 1 current)))
               (when (member kind '(" " "+")) (push text (nth 2 current)))))
            ((member line '("\n" ""))
             ;; An empty context line whose space an editor removed.
             (setq last-kind " ")
             (push "\n" (nth 1 current))
             (push "\n" (nth 2 current)))
            (t (lispm-signal 'lispm-diff-malformed (list line)
                             "Cannot read the diff at line: %s" (string-trim-right line)))))
    (when current (push current hunks))
    (unless hunks
      (lispm-signal 'lispm-diff-malformed nil
                    "The diff has no hunks (lines starting with @@)"))
    (mapcar (lambda (h) (list (car h) (reverse (nth 1 h)) (reverse (nth 2 h))))
            (nreverse hunks))))

(defun lispm-edit--sublist-at-p (lines start block)
  "Return non-nil if BLOCK occurs in the vector LINES at START."
  (and (<= (+ start (length block)) (length lines))
       (cl-loop for line in block for i from start
                always (equal line (aref lines i)))))

(defun lispm-edit-apply-diff (text diff)
  "Return TEXT changed by DIFF, a unified diff; signal if it does not apply.
Each hunk must match exactly (no fuzz) but may have moved: the
nearest match to where it says it is, after the previous hunk, wins.
The errors are `lispm-diff-malformed' and `lispm-diff-does-not-apply'."
  (lispm-edit-apply-hunks text (lispm-edit-diff-hunks diff)))

(defun lispm-edit-apply-hunks (text hunks)
  "Return TEXT changed by HUNKS, as `lispm-edit-diff-hunks' gives them.
They apply as `lispm-edit-apply-diff' says; a hunk that does not
signals `lispm-diff-does-not-apply', whose data names its number."
  (let* ((lines (vconcat (lispm-edit-lines text)))
         (result nil)
         (pos 0)
         (n 0))
    (dolist (hunk hunks)
      (cl-incf n)
      (pcase-let* ((`(,start ,old ,new) hunk)
                   (want (max pos (if (null old) start (1- start))))
                   (at (if (null old)
                           (min want (length lines))
                         (cl-loop for d from 0 to (length lines)
                                  for before = (- want d)
                                  for after = (+ want d)
                                  when (and (>= after pos)
                                            (lispm-edit--sublist-at-p lines after old))
                                  return after
                                  when (and (>= before pos) (/= d 0)
                                            (lispm-edit--sublist-at-p lines before old))
                                  return before))))
        (unless at
          (lispm-signal 'lispm-diff-does-not-apply (list n (car old))
                        "Hunk %d of the diff does not apply: its lines (starting %S) \
are not in the file" n (string-trim-right (or (car old) ""))))
        (setq result (append (reverse new)
                             (reverse (append (cl-subseq lines pos at) nil))
                             result))
        (setq pos (+ at (length old)))))
    (apply #'concat (append (nreverse result) (cl-subseq lines pos) nil))))

;;; Snapshots of a folder

(cl-defstruct (lispm-edit--snapshot (:constructor lispm-edit--snapshot-make) (:copier nil))
  "What a folder's files were before a call."
  (folder nil :documentation "The folder, a directory name.")
  (time nil :documentation "When the snapshot was taken, a float.")
  (files nil :documentation "A hash table: file name -> (STAMP . BYTES).")
  (directories nil :documentation "A hash table of the folder's directories."))

(defun lispm-edit--stamp (attributes)
  "Return the stamp of a file with ATTRIBUTES: (SIZE MTIME INODE)."
  (list (file-attribute-size attributes)
        (file-attribute-modification-time attributes)
        (file-attribute-inode-number attributes)))

(defun lispm-edit--read-bytes (file)
  "Return FILE's contents as a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (let ((file-name-handler-alist nil)
          (coding-system-for-read 'no-conversion))
      (insert-file-contents-literally file))
    (buffer-string)))

(defun lispm-edit--walk (folder function)
  "Call FUNCTION with each file and directory under FOLDER and its attributes.
FUNCTION gets (NAME ATTRIBUTES DIRECTORY-P).  Skip the directories of
`lispm-edit-snapshot-skipped-directories' and symbolic links to
directories; stop after `lispm-edit-snapshot-file-count-limit' files."
  (let ((queue (list folder)) (count 0))
    (catch 'full
      (while queue
        (let ((dir (pop queue)))
          (dolist (entry (condition-case nil
                             (directory-files-and-attributes
                              dir t directory-files-no-dot-files-regexp t)
                           (file-error nil)))
            (let* ((name (car entry))
                   (attributes (cdr entry))
                   (type (file-attribute-type attributes)))
              (cond ((eq type t)
                     (unless (member (file-name-nondirectory name)
                                     lispm-edit-snapshot-skipped-directories)
                       (funcall function name attributes t)
                       (push name queue)))
                    ((null type)
                     (when (>= count lispm-edit-snapshot-file-count-limit)
                       (throw 'full nil))
                     (cl-incf count)
                     (funcall function name attributes nil))))))))))

(defun lispm-edit-snapshot (folder)
  "Return a snapshot of the files under FOLDER, to compare with later.
It notes each regular file's size, modification time and inode, and
keeps the bytes of the files up to `lispm-edit-snapshot-file-limit'
\(at most `lispm-edit-snapshot-total-limit' bytes in all, for at most
`lispm-edit-snapshot-time-limit' seconds).  See
`lispm-edit-snapshot-changes'."
  (let* ((file-name-handler-alist nil)
         (files (make-hash-table :test #'equal))
         (directories (make-hash-table :test #'equal))
         (deadline (+ (float-time) lispm-edit-snapshot-time-limit))
         (total 0))
    (lispm-edit--walk
     folder
     (lambda (name attributes directory-p)
       (if directory-p
           (puthash name t directories)
         (let* ((size (file-attribute-size attributes))
                (bytes (and (<= size lispm-edit-snapshot-file-limit)
                            (<= (+ total size) lispm-edit-snapshot-total-limit)
                            (< (float-time) deadline)
                            (ignore-errors (lispm-edit--read-bytes name)))))
           (when bytes (cl-incf total (length bytes)))
           (puthash name (cons (lispm-edit--stamp attributes) bytes) files)))))
    (lispm-edit--snapshot-make :folder folder :time (float-time)
                               :files files :directories directories)))

(defun lispm-edit--recent-p (stamp time)
  "Return non-nil if STAMP's modification time is within 2 s of TIME.
A file written again within the file system's clock tick keeps its
time, so such a file is compared by its contents."
  (> (float-time (nth 1 stamp)) (- time 2)))

(defun lispm-edit--disk-change (file before-entry after-attributes)
  "Return the change on disk to FILE, or nil if it did not change.
BEFORE-ENTRY is the snapshot's (STAMP . BYTES) of it, nil if it did not
exist; AFTER-ATTRIBUTES its attributes now, nil if it is gone."
  (let* ((stamp (and after-attributes (lispm-edit--stamp after-attributes)))
         (before (cdr before-entry))
         (after (and stamp (<= (car stamp) lispm-edit-snapshot-file-limit)
                     (ignore-errors (lispm-edit--read-bytes file)))))
    (when (if (and before after)
              (not (equal before after))
            (not (equal stamp (car before-entry))))
      (lispm-edit--new-change
       :file file :before before :after after
       :created (null before-entry) :deleted (null stamp)
       :kept (or (null before-entry) (and before t))
       :stamp stamp))))

(defun lispm-edit--refresh-buffer (change)
  "Show the disk change CHANGE in the buffer visiting its file, if that can be.
If an unmodified buffer visits the file, which still exists, its text
becomes the file's, as one undo step, and the buffer-level change that
made is returned (it replaces CHANGE).  Otherwise return CHANGE."
  (let* ((file (lispm-change-file change))
         (buffer (find-buffer-visiting file)))
    (if (and buffer (not (lispm-change-deleted change)) (not (lispm-change-created change))
             (lispm-change-kept change)
             (not (buffer-modified-p buffer)))
        (with-current-buffer buffer
          (let* ((text (with-temp-buffer
                         (lispm-insert-file-text file)
                         (buffer-string)))
                 (inhibit-read-only t)
                 (refreshed (progn
                              ;; The disk has it already: no question.
                              (set-visited-file-modtime)
                              (lispm-edit-replace buffer text))))
            (set-buffer-modified-p nil)
            (or refreshed change)))
      change)))

(defun lispm-edit-snapshot-changes (snapshot)
  "Return what changed under SNAPSHOT's folder since SNAPSHOT was taken.
Each file created, changed or deleted is a `lispm-change' on disk
\(BUFFER nil, BEFORE and AFTER the whole contents as bytes), except a
changed file an unmodified buffer visits: that buffer is brought up to
date with the disk, and the change is that buffer's.  A directory
created is a change too (its DIRECTORY slot t).  The changes come
oldest first: directories before the files in them."
  (let* ((file-name-handler-alist nil)
         (files (lispm-edit--snapshot-files snapshot))
         (directories (lispm-edit--snapshot-directories snapshot))
         (time (lispm-edit--snapshot-time snapshot))
         (seen (make-hash-table :test #'equal))
         new-directories changes)
    (lispm-edit--walk
     (lispm-edit--snapshot-folder snapshot)
     (lambda (name attributes directory-p)
       (if directory-p
           (unless (gethash name directories)
             (push (lispm-edit--new-change :file name :created t :directory t)
                   new-directories))
         (puthash name t seen)
         (let ((entry (gethash name files)))
           (when (or (null entry)
                     (not (equal (car entry) (lispm-edit--stamp attributes)))
                     (lispm-edit--recent-p (car entry) time))
             (when-let* ((change (lispm-edit--disk-change name entry attributes)))
               (push change changes)))))))
    (maphash (lambda (name entry)
               (unless (or (gethash name seen) (file-exists-p name))
                 (push (lispm-edit--disk-change name entry nil) changes)))
             files)
    (append (nreverse new-directories)
            (mapcar #'lispm-edit--refresh-buffer (nreverse changes)))))

;;; Conflicts and revert

(defun lispm-edit--conflict (change reason &rest args)
  "Return a conflict of CHANGE: (:file FILE :reason REASON formatted with ARGS)."
  (list :file (or (lispm-change-file change)
                  (let ((buffer (lispm-change-buffer change)))
                    (and (buffer-live-p buffer) (buffer-name buffer))))
        :reason (apply #'format-message reason args)))

(defun lispm-edit--group (changes)
  "Group a list of change records by what they changed.
The list is CHANGES.  The newest change comes first in each group.
Return a list of (KEY KIND CHANGES), KIND `buffer', `disk' or
`directory', the group with the newest change first."
  (let ((groups nil))
    (dolist (change (sort (copy-sequence changes)
                          (lambda (a b) (> (lispm-change-serial a) (lispm-change-serial b)))))
      (let* ((kind (cond ((eq (lispm-change-directory change) t) 'directory)
                         ((lispm-change-buffer change) 'buffer)
                         (t 'disk)))
             (key (or (lispm-change-file change) (lispm-change-buffer change)))
             (group (cl-find key groups :key #'car :test #'equal)))
        (if group
            (progn
              (unless (eq (nth 1 group) kind) (setf (nth 1 group) 'mixed))
              (setcar (nthcdr 2 group) (append (nth 2 group) (list change))))
          (push (list key kind (list change)) groups))))
    (nreverse groups)))

(defun lispm-edit--position (marker-or-position)
  "Return the position MARKER-OR-POSITION stands for, or nil."
  (if (markerp marker-or-position) (marker-position marker-or-position) marker-or-position))

(defun lispm-edit--buffer-plan (changes)
  "Work out reverting the change records of a buffer, on a copy of it.
CHANGES come newest first.  Return (:conflict CONFLICT) or (:buffer
BUFFER :text TEXT :delete DELETE :visit FILE): the buffer to change (nil
when it must be visited again, from FILE), the text it gets, and whether
its file is to be deleted (it was created), killing the buffer if it was
made for that.  The markers of the buffer's other changes, those not
reverted now, go where the text they marked is then: :markers, a list
of (CHANGE BEG END).

An edit whose text is its text from before (the user undid it) counts
as reverted already; a buffer whose file was moved or deleted since is
a conflict, as its file is when no buffer visits it."
  (let* ((newest (car changes))
         (oldest (car (last changes)))
         (buffer (lispm-change-buffer newest))
         (file (lispm-change-file newest))
         (live (buffer-live-p buffer)))
    (catch 'conflict
      (with-temp-buffer
        (cond (live
               (insert (lispm-edit--buffer-text buffer))
               (when (and file (not (buffer-modified-p buffer)) (file-exists-p file)
                          (not (verify-visited-file-modtime buffer)))
                 (throw 'conflict
                        (list :conflict
                              (lispm-edit--conflict newest "it changed on disk since"))))
               (when (and file (not (file-exists-p file))
                          (not (equal (with-current-buffer buffer (visited-file-modtime)) 0)))
                 (throw 'conflict
                        (list :conflict
                              (lispm-edit--conflict newest "it was moved or deleted since")))))
              ((and file (file-regular-p file))
               (lispm-insert-file-text file))
              (t (throw 'conflict
                        (list :conflict
                              (lispm-edit--conflict newest "it is gone since")))))
        (let ((marks (make-hash-table :test #'eq)))
          (dolist (change changes)
            (let* ((beg (lispm-change-beg change))
                   (end (lispm-change-end change))
                   (valid (if live
                              (and (markerp beg) (markerp end)
                                   (eq (marker-buffer beg) buffer)
                                   (eq (marker-buffer end) buffer))
                            (and (integerp beg) (integerp end)
                                 (eq (lispm-change-buffer change) buffer))))
                   (beg (lispm-edit--position beg))
                   (end (lispm-edit--position end)))
              (unless (and valid (<= 1 beg (point-max)) (<= 1 end (point-max)))
                (throw 'conflict
                       (list :conflict
                             (lispm-edit--conflict
                              change "its buffer was killed with unsaved changes"))))
              (puthash change (cons (copy-marker beg t) (copy-marker end)) marks)))
          ;; The buffer's other changes: where their text goes.
          (let ((others
                 (and live
                      (cl-loop for other in (buffer-local-value 'lispm-edit--recent buffer)
                               for beg = (lispm-change-beg other)
                               for end = (lispm-change-end other)
                               unless (or (memq other changes)
                                          (not (markerp beg)) (not (markerp end))
                                          (not (eq (marker-buffer beg) buffer))
                                          (not (eq (marker-buffer end) buffer)))
                               do (puthash other (cons (copy-marker (marker-position beg) t)
                                                       (copy-marker (marker-position end)))
                                           marks)
                               and collect other))))
            (dolist (change changes)
              (pcase-let* ((`(,beg . ,end) (gethash change marks))
                           (from (min beg end))
                           (to (max beg end))
                           (now (buffer-substring-no-properties from to))
                           (undone (and (not (string= now (lispm-change-after change)))
                                        (string= now (lispm-change-before change))
                                        (not (lispm-change-created change)))))
                (unless (or undone (string= now (lispm-change-after change)))
                  (throw 'conflict
                         (list :conflict
                               (lispm-edit--conflict change "text LispM wrote was changed since"))))
                (when (and (lispm-change-created change)
                           (not (string= (buffer-string) (lispm-change-after change))))
                  (throw 'conflict
                         (list :conflict
                               (lispm-edit--conflict change "text was added to it since"))))
                ;; An edit the user undid is reverted already.
                (unless undone
                  (goto-char from)
                  (delete-region from to)
                  (insert (lispm-change-before change))
                  (dolist (fixup (lispm-change-fixups change))
                    (pcase-let ((`(,older ,slot ,offset) fixup))
                      (when-let* ((pair (gethash older marks)))
                        (set-marker (if (eq slot 'beg) (car pair) (cdr pair))
                                    (+ from offset))))))))
            (list :buffer (and live buffer) :visit file
                  :text (buffer-string)
                  :markers (mapcar (lambda (other)
                                     (let ((pair (gethash other marks)))
                                       (list other (marker-position (car pair))
                                             (marker-position (cdr pair)))))
                                   others)
                  :delete (and (lispm-change-created oldest) file)
                  :kill (not (lispm-change-visited oldest)))))))))

(defun lispm-edit--disk-state (file)
  "Return FILE's state now: (STAMP . BYTES), STAMP nil if it does not exist."
  (if-let* ((attributes (file-attributes file)))
      (cons (lispm-edit--stamp attributes) nil)
    (cons nil nil)))

(defun lispm-edit--disk-plan (changes)
  "Work out reverting the change records on disk of one file.
CHANGES come newest first.  Return (:conflict CONFLICT) or (:file FILE
:bytes BYTES): what the file gets, nil BYTES meaning it is to be
deleted."
  (let* ((file (lispm-change-file (car changes)))
         (now (lispm-edit--disk-state file))
         (stamp (car now))
         (bytes nil)
         (real t))
    (catch 'conflict
      (dolist (change changes)
        (let ((ours (if (lispm-change-deleted change)
                        (null stamp)
                      (and stamp
                           (if real
                               (and (equal stamp (lispm-change-stamp change))
                                    (or (null (lispm-change-after change))
                                        (equal (lispm-edit--read-bytes file)
                                               (lispm-change-after change))))
                             (equal bytes (lispm-change-after change)))))))
          (unless ours
            (throw 'conflict
                   (list :conflict (lispm-edit--conflict change "it changed on disk since"))))
          (unless (lispm-change-kept change)
            (throw 'conflict
                   (list :conflict
                         (if (> (or (car (lispm-change-stamp change)) 0)
                                lispm-edit-snapshot-file-limit)
                             (lispm-edit--conflict
                              change "LispM kept no copy of it (over %d bytes)"
                              lispm-edit-snapshot-file-limit)
                           (lispm-edit--conflict
                            change "LispM kept no copy of it (past the snapshot limits)")))))
          (setq real nil
                bytes (lispm-change-before change)
                stamp (and (not (lispm-change-created change)) t))))
      (list :file file :bytes (and stamp bytes) :exists stamp))))

(defun lispm-edit--plans (changes)
  "Return the plans of reverting a list of records, and their conflicts.
The list is CHANGES; the value is (PLANS . CONFLICTS)."
  (let (plans conflicts)
    (pcase-dolist (`(,_key ,kind ,group) (lispm-edit--group changes))
      (let ((plan (pcase kind
                    ('buffer (lispm-edit--buffer-plan group))
                    ('disk (lispm-edit--disk-plan group))
                    ('directory (list :directory (lispm-change-file (car group))))
                    (_ (list :conflict
                             (lispm-edit--conflict
                              (car group) "it was changed both through its buffer and \
on disk; revert it by hand"))))))
        (if (plist-get plan :conflict)
            (push (plist-get plan :conflict) conflicts)
          (push plan plans))))
    (cons (nreverse plans) (nreverse conflicts))))

(defun lispm-edit-conflicts (changes)
  "Return the conflicts that keep change records from being reverted.
The list is CHANGES; the value is nil if there are none.  A conflict is
a plist (:file FILE :reason REASON): the user has changed text the agent
wrote, or a file changed on disk since in a way that is not LispM's.
Nothing is changed."
  (cdr (lispm-edit--plans changes)))

(defun lispm-edit--replace-untracked (buffer text &rest keys)
  "Call `lispm-edit-replace' with BUFFER, TEXT and KEYS, keeping no change record."
  (when-let* ((change (apply #'lispm-edit-replace buffer text keys)))
    (lispm-edit-forget (list change))))

(defun lispm-edit--apply-buffer-plan (plan)
  "Carry out PLAN, one buffer's part of a revert."
  (let* ((file (plist-get plan :visit))
         (buffer (or (plist-get plan :buffer)
                     (lispm-edit-visit file))))
    (if (plist-get plan :delete)
        (progn
          (when (file-exists-p file) (delete-file file))
          (if (plist-get plan :kill)
              (with-current-buffer buffer
                (set-buffer-modified-p nil)
                (let ((kill-buffer-query-functions nil))
                  (kill-buffer buffer)))
            (lispm-edit--replace-untracked buffer (plist-get plan :text))))
      (let ((saved (and file (not (buffer-modified-p buffer)))))
        (lispm-edit--replace-untracked buffer (plist-get plan :text)
                                       :save saved :overwrite t))
      (pcase-dolist (`(,other ,beg ,end) (plist-get plan :markers))
        (set-marker (lispm-change-beg other) beg buffer)
        (set-marker (lispm-change-end other) end buffer)))))

(defun lispm-edit--apply-disk-plan (plan)
  "Carry out PLAN, one file's part of a revert on disk."
  (let ((file (plist-get plan :file))
        (bytes (plist-get plan :bytes)))
    (if (not (plist-get plan :exists))
        (progn
          (when (file-exists-p file) (delete-file file))
          (when-let* ((buffer (find-buffer-visiting file)))
            (unless (buffer-modified-p buffer)
              (let ((kill-buffer-query-functions nil))
                (kill-buffer buffer)))))
      (make-directory (file-name-directory file) t)
      (lispm-write-file-whole file bytes)
      (when-let* ((buffer (find-buffer-visiting file)))
        (unless (buffer-modified-p buffer)
          (with-current-buffer buffer
            (set-visited-file-modtime)
            (let ((inhibit-read-only t))
              (lispm-edit--replace-untracked buffer (with-temp-buffer
                                                      (lispm-insert-file-text file)
                                                      (buffer-string))))
            (set-buffer-modified-p nil)))))))

(defun lispm-edit-revert (changes)
  "Take back a list of change records, newest first.
The list is CHANGES.  Return the number of files restored.  If any of
them conflicts (see `lispm-edit-conflicts'), signal
`lispm-revert-conflict', whose data is (MESSAGE CONFLICTS), and change
nothing.  Otherwise restore every buffer and file they changed, each
buffer as one undo step, keeping the user's edits elsewhere in it;
delete the files they created (killing the buffers made for them) and
the directories they created if empty; save each buffer that had no
unsaved changes.  CHANGES may come in any order.  Git is never touched."
  (pcase-let ((`(,plans . ,conflicts) (lispm-edit--plans changes)))
    (when conflicts
      (lispm-signal 'lispm-revert-conflict (list conflicts)
                    "Cannot revert: %s"
                    (mapconcat (lambda (c) (format "%s (%s)" (plist-get c :file)
                                                   (plist-get c :reason)))
                               conflicts "; ")))
    (let ((restored 0) (directories nil))
      (dolist (plan plans)
        (cond ((plist-member plan :directory)
               (push (plist-get plan :directory) directories))
              ((plist-member plan :text)
               (lispm-edit--apply-buffer-plan plan)
               (cl-incf restored))
              (t (lispm-edit--apply-disk-plan plan)
                 (cl-incf restored))))
      (dolist (change changes)
        (let ((top (lispm-change-directory change))
              (file (lispm-change-file change)))
          (when (stringp top)
            ;; Every directory from the file's up to TOP.
            (let ((dir (directory-file-name (file-name-directory file))))
              (while (and (string-prefix-p top dir) (not (equal dir top)))
                (push dir directories)
                (setq dir (directory-file-name (file-name-directory dir))))
              (push top directories)))))
      ;; Innermost first; a directory with anything in it stays.
      (dolist (dir (sort directories (lambda (a b) (> (length a) (length b)))))
        (ignore-errors (delete-directory dir)))
      (lispm-edit-forget changes)
      restored)))

(provide 'lispm-edit)
;;; lispm-edit.el ends here
