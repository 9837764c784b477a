;;; lispm-base.el --- Shared definitions for LispM  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The customization group, the version, the root error condition,
;; the one way to read a file no buffer visits, the one way to write a
;; file whole (a crash leaves the old text or the new), and the one way
;; to set up a buffer that shows an agent's text, which every other LispM
;; file builds on.  It requires nothing, so any
;; LispM library (the protocol code included) can load it alone.
;;
;; Errors.  Every LispM condition descends from `lispm-error' and is
;; declared by `lispm-define-error', with the JSON-RPC code it has when
;; it reaches the sidecar (a condition without one has its nearest
;; parent's).  Its data is (TEXT . FIELDS): TEXT the whole message, as
;; an agent or the user reads it, and FIELDS what a handler needs to
;; act on it (a file, a buffer, the text that was not found).
;; `lispm-error-message' renders any error, LispM's or not.  One method
;; in lispm-sidecar.el turns whatever a handler of the sidecar's
;; requests signals into the JSON-RPC error the sidecar gets.
;;
;; The codes, one meaning each across Emacs and the sidecar (whose
;; codes are the `code' attributes of its `LispmError' classes):
;;
;;   Shared with the sidecar, in the same meaning:
;;   -32000  lispm-error                     LispmError: any LispM failure
;;                                           (also a `user-error')
;;   -32001  lispm-unknown-agent             UnknownAgent
;;   -32005  lispm-sidecar-version-mismatch  VersionMismatch
;;   -32007  lispm-paste-not-now             NotNow: the sidecar retries
;;   -32008  (a tool's failure in Emacs)     McpServerFailed: a user's MCP server
;;   -32030  lispm-tool-outside-folder       OutsideFolder
;;   -32040  lispm-tool-error                ToolFailed
;;   -32601  lispm-unknown-method            JSON-RPC: method not found
;;   -32602  lispm-invalid-params            JSON-RPC: invalid params
;;   -32603  (any other error)               JSON-RPC: internal error
;;
;;   Emacs's own, -32050 to -32099 (the sidecar's stop at -32045):
;;   -32050  lispm-no-buffer                 no (visible) buffer of that name
;;   -32051  lispm-no-such-file              no such file
;;   -32052  lispm-paste-refused             LispM will not paste that
;;   -32053  lispm-ide-error                 a proposed change cannot be shown
;;   -32054  lispm-sidecar-error             the sidecar cannot be started
;;   -32055  lispm-approvals-error           an approval asked for wrongly
;;   -32056  lispm-policy-denied             the policy or the user refused a call
;;   -32057  lispm-role-broken               a role's Org file does not read
;;   -32058  lispm-role-unknown              no role of that name
;;   -32060  lispm-tool-unknown              no tool of that name
;;   -32061  lispm-tool-bad-args             arguments against the schema
;;   -32062  lispm-tool-not-a-directory      a directory was expected
;;   -32063  lispm-tool-is-a-directory       a file was expected
;;   -32064  lispm-tool-file-converted       compressed or encrypted, unvisited
;;   -32065  lispm-buffer-read-only          the file's buffer is read-only
;;   -32066  lispm-buffer-conflict           unsaved changes, and changed on disk
;;   -32067  lispm-edit-old-text-not-found   edit_file's `old' is not there
;;   -32068  lispm-edit-old-text-ambiguous   edit_file's `old' occurs more than once
;;   -32069  lispm-diff-malformed            a diff that cannot be read
;;   -32070  lispm-diff-does-not-apply       a hunk whose lines are not there
;;   -32071  lispm-diff-failed               the diff program failed
;;   -32072  lispm-revert-conflict           the user changed what is to be reverted
;;   -32073  lispm-mcp-error                 an MCP server is misconfigured or failed
;;   -32074  lispm-review-error              a hunk of a reviewed edit asked for wrongly
;;   -32075  lispm-skill-error               a skill's code failed
;;   -32076  lispm-skill-unknown             no skill of that name
;;   -32077  lispm-skill-broken              a skill's code does not read
;;   -32078  lispm-model-error               a model cannot be asked (none, no key)
;;   -32079  lispm-turn-no-restart           no such restart for this condition
;;   -32085  lispm-lisp-error                a run_lisp program failed
;;   -32086  lispm-lisp-unreadable           a run_lisp program does not read
;;   -32087  lispm-lisp-refused              a run_lisp program may not run
;;   -32088  lispm-lisp-fuel-exhausted       a run_lisp program ran out of fuel
;;   -32089  lispm-lisp-program-error        a run_lisp program signalled an error
;;   -32090  lispm-lisp-interrupted          a run_lisp program was stopped
;;   -32091  lispm-lisp-limit-exceeded       a run_lisp program reached a limit
;;
;; `lispm-tool-no-such-file' has `lispm-no-such-file''s code: a tool's
;; missing file is a missing file.

;;; Code:

(defgroup lispm nil
  "A Lisp Machine for AI agents: agent terminals, a sidecar and apps."
  :group 'tools
  :prefix "lispm-")

(defconst lispm-version "0.1.0"
  "The version of the LispM package.")

(defconst lispm-directory
  (file-name-directory (or load-file-name buffer-file-name default-directory))
  "The directory LispM's Lisp files were loaded from.")

;;; Errors

(define-error 'lispm-error "LispM error")
(put 'lispm-error 'lispm-jsonrpc-code -32000)

(defun lispm-define-error (name message parent &optional code)
  "Define NAME as a LispM error condition, with MESSAGE and PARENT.
PARENT is `lispm-error', a condition under it, or a list of such.
CODE, an integer, is the JSON-RPC error code the sidecar gets when a
handler of its requests signals NAME; without it, NAME has its
parent's.  NAME's data is (TEXT . FIELDS), TEXT the whole message
\(see `lispm-error-message') and FIELDS what a handler may need."
  (define-error name message parent)
  (put name 'lispm-error-text-first t)
  (put name 'lispm-jsonrpc-code code))

;; A second parent of the conditions that are a call's result, not a
;; stop: the model gets the failure and goes on (a refusal, an unknown
;; tool, bad arguments, a program that does not read...).  Each owner
;; says so where it defines its condition.
(lispm-define-error 'lispm-for-the-model "A failure the model gets as the call's result"
                    'lispm-error)

(defun lispm-error-jsonrpc-code (condition)
  "Return the JSON-RPC error code of CONDITION, a LispM error condition.
That is its own code, or else that of its nearest parent with one."
  (let ((conditions (get condition 'error-conditions))
        (code nil))
    (while (and conditions (not code))
      (setq code (get (pop conditions) 'lispm-jsonrpc-code)))
    code))

(defun lispm-error-message (err)
  "Return the message of the error ERR, a (CONDITION . DATA) cons.
The message of a condition `lispm-define-error' defined is the text
its data begins with, as is that of another LispM condition whose only
datum is a string; everything else reads as `error-message-string'
renders it."
  (let ((condition (car err)) (data (cdr err)))
    (if (and (memq 'lispm-error (get condition 'error-conditions))
             (stringp (car-safe data))
             (or (get condition 'lispm-error-text-first) (null (cdr data))))
        (car data)
      (error-message-string err))))

(defun lispm-signal (condition fields format-string &rest args)
  "Signal CONDITION with FIELDS, its message made of FORMAT-STRING and ARGS.
CONDITION is one `lispm-define-error' defined; FIELDS is a list."
  (signal condition (cons (apply #'format-message format-string args) fields)))

(lispm-define-error 'lispm-invalid-params "Invalid parameters" 'lispm-error -32602)
(lispm-define-error 'lispm-unknown-agent "No live agent" 'lispm-error -32001)
(lispm-define-error 'lispm-no-such-file "No such file" 'lispm-error -32051)

;;; Files

(defun lispm-insert-file-text (file &optional beg end)
  "Insert the text of FILE at point, decoded but otherwise literally.
Unlike `insert-file-contents', no file name handler runs, so nothing
is decompressed (a small \".gz\" can hold gigabytes), decrypted (a
\".gpg\" would ask for a passphrase) or fetched by TRAMP, and no
format is decoded; the coding system is detected from the text and
decoded as usual (not from names such as \".gz\", which
`auto-coding-alist' makes binary because a handler would convert
them).  BEG and END are byte offsets, as for `insert-file-contents'.
Return what `insert-file-contents' returns."
  (let ((file-name-handler-alist nil)
        (auto-coding-alist nil)
        (format-alist nil)
        (after-insert-file-functions nil))
    (insert-file-contents file nil beg end)))

;;; Writing files whole

;; Every file LispM writes for an agent, or for itself, is replaced at
;; once: the new text goes to a new file (.lispm-save-XXXXXX) in the
;; folder of the file, which is flushed to disk, given the old file's
;; modes, extended attributes and owner, and then renamed over the old
;; name.  A crash at any moment leaves the old file or the new one,
;; never one cut short (at worst the new file stays beside it, unnamed);
;; a failure leaves the old file as it was and no new file.
;;
;; - A symbolic link stays a link pointing where it did: the new file is
;;   written beside the link's target and renamed over the target.
;; - The owner and group are kept where the system allows it: when the
;;   new file's differ from the old one's (Emacs runs as root and the
;;   file is another user's, or a folder gives new files its group),
;;   the new file is given them by `chown' before the rename; a refusal
;;   is ignored, the text matters more.  Emacs has no `chown' of its
;;   own, so that is one short process, only when they differ.
;; - A hard link no longer shares the new text: the name gets a new
;;   file, the other names keep the old text (as with Emacs's own
;;   `file-precious-flag').
;; - A folder LispM may not write in gets a `file-error': a file there
;;   cannot be replaced whole, and is not written in place instead.
;;
;; A buffer visiting the file is saved by `save-buffer' itself, whose
;; hooks, backup, coding system and visited-file time stay as they
;; are: only the writing is `lispm--save-visited-whole''s.  Emacs's
;; `file-precious-flag' alone is not enough: it writes beside the link
;; rather than its target (across file systems that rename is a copy,
;; in place), leaves its new file behind when the write fails, keeps
;; no owner, and gives the modes only after the rename.

(defun lispm--file-traits (file)
  "Return what FILE's replacement must keep of it: (ATTRIBUTES MODES EXTENDED).
For a FILE that does not exist, ATTRIBUTES and EXTENDED are nil and
MODES are those a new file gets."
  (let ((attributes (file-attributes file 'integer)))
    (list attributes
          (if attributes (file-modes file) (logand #o666 (default-file-modes)))
          (and attributes (ignore-errors (file-extended-attributes file))))))

(defun lispm--give-traits (file traits)
  "Give FILE, a new file to replace another, TRAITS of the other.
TRAITS is what `lispm--file-traits' returned.  The owner and group
are given only when FILE's differ, and where the system allows it:
a refusal is ignored."
  (pcase-let ((`(,attributes ,modes ,extended) traits))
    (when (and attributes (not (file-remote-p file)))
      (let ((uid (file-attribute-user-id attributes))
            (gid (file-attribute-group-id attributes))
            (own (file-attributes file 'integer)))
        (unless (and (eql uid (file-attribute-user-id own))
                     (eql gid (file-attribute-group-id own)))
          (when-let* ((chown (executable-find "chown")))
            (call-process chown nil nil nil (format "%d:%d" uid gid) "--" file)))))
    (when extended (ignore-errors (set-file-extended-attributes file extended)))
    (set-file-modes file modes)))

(defun lispm--file-target (file)
  "Return the name FILE's new text is to take: FILE's own, or its link's target."
  (let ((file (expand-file-name file)))
    (if (file-symlink-p file) (expand-file-name (file-chase-links file)) file)))

(defun lispm--replace-whole (target write)
  "Replace the file TARGET whole by what WRITE writes.
WRITE is called with the name of a new file beside TARGET, and
writes the new text there.  The new file gets TARGET's modes,
attributes and owner and is renamed over TARGET.  If anything fails,
TARGET is as it was, the new file is deleted and the error goes on."
  (let ((directory (file-name-directory target)))
    (when (and (file-directory-p directory) (not (file-writable-p directory)))
      (signal 'file-error (list "Cannot replace a file whole (folder not writable)"
                                directory)))
    (let ((traits (lispm--file-traits target))
          (temp (make-temp-file (expand-file-name ".lispm-save-" directory))))
      (condition-case err
          (progn
            (funcall write temp)
            (lispm--give-traits temp traits)
            (rename-file temp target t))
        ((debug error)
         (ignore-errors (delete-file temp))
         (signal (car err) (cdr err)))))))

(defun lispm-write-file-whole (file text &optional coding no-flush)
  "Make TEXT, a string, the whole text of FILE, at once.
TEXT is written with CODING (default `no-conversion': TEXT is bytes)
to a new file beside FILE's target, flushed unless NO-FLUSH is
non-nil, given FILE's modes, attributes and owner, and renamed over
it.  A symbolic link FILE stays one.  If anything fails, FILE is as it
was, no new file is left, and the error goes on."
  (lispm--replace-whole
   (lispm--file-target file)
   (lambda (temp)
     (let ((coding-system-for-write (or coding 'no-conversion))
           (write-region-inhibit-fsync no-flush)
           (write-region-annotate-functions nil)
           (write-region-post-annotation-function nil)
           (file-name-handler-alist nil))
       (write-region text nil temp nil 'silent)))))

(defun lispm--save-visited-whole ()
  "Write the current buffer to its visited file, whole and flushed; return t.
For `write-file-functions', where `lispm-save-buffer-whole' puts it:
it does what `basic-save-buffer-1' would (the backup, by copying; the
coding system; the visited file's time; asking before writing a
write-protected file), writing as `lispm--replace-whole' does.  If
the file's folder is gone, return nil: `save-buffer' then asks to
make it, and writes a file that had no old text to lose."
  (let ((file buffer-file-name)
        (target (lispm--file-target buffer-file-name))
        (old-modtime (visited-file-modtime)))
    (when (file-directory-p (file-name-directory target))
      (when (and (file-exists-p target) (not (file-writable-p target))
                 (not (yes-or-no-p (format "File %s is write-protected; try to save anyway? "
                                           (file-name-nondirectory file)))))
        (signal 'file-error (list "Attempt to save to a file that you aren't allowed to write"
                                  file)))
      (unless buffer-backed-up
        (let ((file-precious-flag t))   ; A backup by copying: the file stays.
          (with-demoted-errors "Backing up buffer: %s" (backup-buffer))))
      (let ((coding-system-for-write (or save-buffer-coding-system coding-system-for-write))
            (write-region-inhibit-fsync nil))
        ;; Cleared so that writing does not take the file's change on
        ;; disk (an agent's overwrite) for a threat, as Emacs does.
        (clear-visited-file-modtime)
        (condition-case err
            (lispm--replace-whole
             target (lambda (temp)
                      ;; nil nil: the whole buffer, as `save-buffer' writes it.
                      (write-region nil nil temp nil file buffer-file-truename)))
          (error (set-visited-file-modtime old-modtime)
                 (signal (car err) (cdr err)))))
      (when save-silently (message nil))
      (when buffer-file-coding-system-explicit
        (setcar buffer-file-coding-system-explicit last-coding-system-used))
      t)))

(defun lispm-save-buffer-whole ()
  "Save the current buffer as `save-buffer' does, its file replaced at once.
The hooks, the backup, the coding system and the visited file's time
are `save-buffer''s; only the writing differs: the buffer goes to a
new file beside the file's target, flushed, given the old file's
modes, attributes and owner, and renamed over it.  If the save fails,
the file is as it was and no new file is left.  A folder LispM may not
write in gets a `file-error': there the file cannot be replaced whole.
A hook of the buffer that writes the file itself still does."
  (let ((write-file-functions (append write-file-functions
                                      (list #'lispm--save-visited-whole))))
    (save-buffer)))

;;; Text from agents

(defconst lispm-pretty-print-limit 3000
  "The longest Lisp text, in characters, LispM pretty-prints to show it.
`pp' takes time growing faster than the text: longer text is shown as
it was written.")

(defun lispm-agent-text-setup ()
  "Make the current buffer cheap to show, whatever text an agent put in it.
Its long lines are wrapped, never truncated: a line of megabytes
costs Emacs little to show wrapped, but truncated it is laid out to
its end at each move along it.  Its paragraphs are read left to right,
which spares the display a search for the direction of each.  A diff
is neither refined word by word nor highlighted as the files it names:
the first takes time quadratic in a line's length, the second reads
and fontifies those files."
  (setq-local truncate-lines nil
              truncate-partial-width-windows nil
              bidi-paragraph-direction 'left-to-right
              bidi-inhibit-bpa t
              diff-refine nil
              diff-font-lock-syntax nil))

(provide 'lispm-base)
;;; lispm-base.el ends here
