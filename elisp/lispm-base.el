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
;;   -32075  lispm-skill-error               a skill's code failed
;;   -32076  lispm-skill-unknown             no skill of that name
;;   -32077  lispm-skill-broken              a skill's code does not read
;;   -32078  lispm-model-error               a model cannot be asked (none, no key)
;;   -32079  lispm-turn-no-restart           no such restart for this condition
;;   -32080  lispm-turn-failed               a turn of the own agent stopped
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

(eval-when-compile (require 'cl-lib))

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
;; once: the new text goes to a new file in the same folder, which is
;; flushed to disk and then renamed over the old name.  A crash at any
;; moment leaves the old file or the new one, never one cut short.  The
;; file keeps its modes, its extended attributes and, where the system
;; allows it, its owner and group; a symbolic link stays a link, and
;; its target gets the new text.  A hard link no longer shares the new
;; text: the name gets a new file.

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
are given only where the system allows it (root, or a group of the
user's own): a refusal is ignored, the text matters more."
  (pcase-let ((`(,attributes ,modes ,extended) traits))
    (when attributes
      (let ((uid (file-attribute-user-id attributes))
            (gid (file-attribute-group-id attributes)))
        (unless (and (eql uid (user-uid)) (eql gid (group-gid)))
          (when-let* ((chown (executable-find "chown")))
            (call-process chown nil nil nil (format "%d:%d" uid gid) "--" file)))))
    (when extended (ignore-errors (set-file-extended-attributes file extended)))
    (set-file-modes file modes)))

(defun lispm-write-file-whole (file text &optional coding no-flush)
  "Make TEXT, a string, the whole text of FILE, at once.
TEXT is written with CODING (default `no-conversion': TEXT is bytes)
to a new file beside FILE's target, flushed unless NO-FLUSH is
non-nil, given FILE's modes, attributes and owner, and renamed over
it.  A symbolic link FILE stays one.  If anything fails, FILE is as it
was, no new file is left, and the error goes on."
  (let* ((file (expand-file-name file))
         (target (if (file-symlink-p file) (file-chase-links file) file))
         (traits (lispm--file-traits target))
         (temp (make-temp-file (expand-file-name ".lispm-save-" (file-name-directory target)))))
    (condition-case err
        (let ((coding-system-for-write (or coding 'no-conversion))
              (write-region-inhibit-fsync no-flush)
              (write-region-annotate-functions nil)
              (write-region-post-annotation-function nil)
              (file-name-handler-alist nil))
          (write-region text nil temp nil 'silent)
          (lispm--give-traits temp traits)
          (rename-file temp target t))
      (error (ignore-errors (delete-file temp))
             (signal (car err) (cdr err))))))

(defun lispm-save-buffer-whole ()
  "Save the current buffer as `save-buffer' does, its file replaced at once.
The hooks, the coding system, the backup and the visited file's time
are `save-buffer''s; the file is written as `lispm-write-file-whole'
writes (Emacs's `file-precious-flag'), flushed, and gets the old
file's modes, attributes and owner before it takes its name.  A
folder LispM may not write in gets a `file-error': there the file
cannot be replaced whole."
  (let* ((target (expand-file-name (file-chase-links buffer-file-name)))
         (directory (file-name-directory target))
         (traits (lispm--file-traits target))
         (rename (symbol-function 'rename-file)))
    (when (and (file-directory-p directory) (not (file-writable-p directory)))
      (signal 'file-error (list "Cannot save whole (folder not writable)" directory)))
    (let ((file-precious-flag t)
          (file-preserve-symlinks-on-save t)
          (write-region-inhibit-fsync nil))
      ;; `save-buffer' gives the new file the old one's modes only
      ;; after renaming it: a crash between the two would leave 0600.
      (cl-letf (((symbol-function 'rename-file)
                 (lambda (from to &optional ok-if-exists)
                   (when (equal (expand-file-name to) target)
                     (lispm--give-traits from traits))
                   (funcall rename from to ok-if-exists))))
        (save-buffer)))))

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
