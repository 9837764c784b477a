;;; lispm-trust.el --- What of a project the user trusts to run  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A project can bring things that run: its skills' Lisp code
;; (lispm-skills.el) and the MCP servers its `.mcp.json' names
;; (lispm-mcp.el).  None of it runs until the user trusts the project
;; with \\[lispm-trust-project], which records the SHA-256 of each such
;; file as it is then, in `lispm-trust-file'.  A file that changed
;; afterwards is no longer trusted until the user trusts it again.
;;
;; Each feature says what it would trust in a folder through
;; `lispm-trust-project-functions', and asks `lispm-trusted-p' before
;; it runs anything of a project.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'project)

(defcustom lispm-trust-file (locate-user-emacs-file "lispm/trust.eld")
  "The file recording which files of projects the user trusts to run."
  :type 'file
  :group 'lispm)

(defvar lispm-trust-project-functions nil
  "Functions saying what of a project could be trusted.
Each is called with a folder and returns a list of (FILE HASH WHAT):
FILE a truename, HASH the SHA-256 of what in it would run, and WHAT
a short description for the user (\"skill greet\", \"MCP servers
github, time\").  Trusting the project records each HASH.")

(defun lispm-trust-records ()
  "Return the trust records: an alist (FILE . SHA-256)."
  (when (file-readable-p lispm-trust-file)
    (with-temp-buffer
      (insert-file-contents lispm-trust-file)
      (condition-case nil
          (let ((records (read (current-buffer))))
            (and (proper-list-p records) (cl-every #'consp records) records))
        (error nil)))))

(defun lispm-trust--save (records)
  "Write RECORDS to `lispm-trust-file', atomically, mode 0600."
  (let* ((file (expand-file-name lispm-trust-file))
         (dir (file-name-directory file)))
    (with-file-modes #o700 (make-directory dir t))
    (with-file-modes #o600
      (lispm-write-file-whole
       file (with-temp-buffer
              (insert ";; Files of projects the user trusts to run: (FILE . SHA-256).\n")
              (let ((print-length nil) (print-level nil))
                (pp records (current-buffer)))
              (buffer-string))
       'utf-8-unix))
    (set-file-modes file #o600)))

(defun lispm-trusted-p (file hash)
  "Return non-nil if the user trusted FILE when the SHA-256 of it was HASH."
  (equal (cdr (assoc file (lispm-trust-records))) hash))

(defun lispm-trust-recorded-p (file)
  "Return non-nil if the user ever trusted FILE, as it is or was."
  (and (assoc file (lispm-trust-records)) t))

;;;###autoload
(defun lispm-trust-project (folder &optional confirm)
  "Trust the code and servers the project at FOLDER has, as they are now.
That is its skills' code (Org files in `.lispm/skills/') and the MCP
servers its `.mcp.json' names, each found in FOLDER or the nearest
folder above that has one.  They may then run; a file that changes
afterwards needs trusting again.  Interactively, ask for FOLDER (the
current project by default) and, with CONFIRM, ask before trusting.
Return the descriptions of what was trusted."
  (interactive
   (list (read-directory-name
          "Trust the project: "
          (if-let* ((project (project-current))) (project-root project) default-directory)
          nil t)
         t))
  (let* ((folder (expand-file-name folder))
         (items (apply #'append (mapcar (lambda (f) (funcall f folder))
                                        lispm-trust-project-functions)))
         (what (mapconcat (lambda (item) (nth 2 item)) items ", ")))
    (unless items
      (user-error "Nothing in %s to trust: no skills in .lispm/skills/, no .mcp.json"
                  (abbreviate-file-name folder)))
    (when (or (not confirm)
              (yes-or-no-p (format "Let %s of %s run? " what (abbreviate-file-name folder))))
      (let ((records (lispm-trust-records)))
        (pcase-dolist (`(,file ,hash ,_) items)
          (setf (alist-get file records nil nil #'equal) hash))
        (lispm-trust--save records))
      (message "LispM: trusted %s" what)
      (mapcar (lambda (item) (nth 2 item)) items))))

(provide 'lispm-trust)
;;; lispm-trust.el ends here
