;;; lispm-project-rules.el --- The project's rules, for LispM's own agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Many projects say how an agent should work in them in AGENTS.md
;; (Codex's, and a common convention) or CLAUDE.md (Claude Code's).
;; The own agent reads the files named in `lispm-project-rules-files'
;; in each folder from the project's root (the nearest folder above the
;; agent's with a .git) down to the agent's folder, the root's first,
;; so a nearer folder's rules come later and can refine the root's.
;; The same file under two names (CLAUDE.md a link to AGENTS.md) is
;; read once.
;;
;; They go into the system prompt, which is made for each request: a
;; file is read again when its time or size changed since it was last
;; read, else taken from a cache, so the agent follows rules edited
;; during a session from its next request on.  Together they are cut
;; at `lispm-project-rules-limit' characters, with a line saying so.
;; What `lispm-secrets-file-p' calls a secret file is never read, and a
;; known secret in a rules file is withheld as in any tool's result.
;;
;; The rules are text the model reads, not code: nothing in them runs,
;; and every call the model makes still passes the user's policy.  So
;; they need no trust, unlike a project's skills.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-secrets)

(defgroup lispm-project-rules nil
  "The project's rules (AGENTS.md and the like) in the own agent's prompt."
  :group 'lispm-own-agent
  :prefix "lispm-project-rules-")

(defcustom lispm-project-rules-files '("AGENTS.md" "CLAUDE.md")
  "The names of the files that hold a project's rules for agents.
In each folder from the project's root down to the agent's, those of
these files that exist are read, in this order."
  :type '(repeat string))

(defcustom lispm-project-rules-limit 32768
  "The most characters of project rules in the system prompt, all files together."
  :type 'natnum)

(defvar lispm-project-rules--cache (make-hash-table :test #'equal)
  "What each rules file held when last read: TRUENAME to (TIME SIZE TEXT).")

(defun lispm-project-rules-root (folder)
  "Return the root of FOLDER's project: the nearest folder with a .git, or FOLDER."
  (let ((folder (file-name-as-directory (expand-file-name folder))))
    (file-name-as-directory (expand-file-name (or (locate-dominating-file folder ".git")
                                                  folder)))))

(defun lispm-project-rules-find (folder)
  "Return the rules files of FOLDER, absolute, the project root's first.
Each folder from the root down to FOLDER gives those of
`lispm-project-rules-files' it has; a file that is another's name (a
link) is left out, and so is a secret file (`lispm-secrets-file-p')."
  (let* ((folder (file-name-as-directory (expand-file-name folder)))
         (root (lispm-project-rules-root folder))
         (folders (list folder))
         (seen nil))
    (while (and (string-prefix-p root (car folders))
                (not (equal (car folders) root)))
      (push (file-name-directory (directory-file-name (car folders))) folders))
    (cl-loop for directory in folders
             nconc (cl-loop for name in lispm-project-rules-files
                            for file = (expand-file-name name directory)
                            for truename = (and (file-regular-p file) (file-truename file))
                            when (and truename (not (member truename seen))
                                      (not (lispm-secrets-file-p truename)))
                            do (push truename seen)
                            and collect file))))

(defun lispm-project-rules--read (file)
  "Return FILE's text, from the cache while FILE's time and size are as then."
  (let* ((truename (file-truename file))
         (attributes (file-attributes truename))
         (time (file-attribute-modification-time attributes))
         (size (file-attribute-size attributes))
         (cached (gethash truename lispm-project-rules--cache)))
    (if (and cached (equal (car cached) time) (eql (cadr cached) size))
        (nth 2 cached)
      (let ((text (with-temp-buffer
                    ;; Bytes past the limit are never needed.
                    (lispm-insert-file-text truename 0 (* 4 lispm-project-rules-limit))
                    (buffer-substring-no-properties (point-min) (point-max)))))
        (puthash truename (list time size text) lispm-project-rules--cache)
        text))))

(defun lispm-project-rules-text (folder)
  "Return the rules of FOLDER's project as the system prompt gives them, or nil.
Each file's text comes under its name relative to the project root,
the root's first; known secrets are withheld; past
`lispm-project-rules-limit' characters the rest is cut, and a line
says so."
  (when-let* ((files (lispm-project-rules-find folder)))
    (let* ((root (lispm-project-rules-root folder))
           (text (mapconcat
                  (lambda (file)
                    (format "## %s\n\n%s" (file-relative-name file root)
                            (string-trim (lispm-project-rules--read file))))
                  files "\n\n"))
           (text (lispm-secrets-redact text)))
      (if (<= (length text) lispm-project-rules-limit)
          text
        (concat (substring text 0 lispm-project-rules-limit)
                (format "\n[LispM: the rules were cut here, at %d characters \
(`lispm-project-rules-limit')]"
                        lispm-project-rules-limit))))))

(provide 'lispm-project-rules)
;;; lispm-project-rules.el ends here
