;;; lispm-roles.el --- Roles: Org files of a prompt, tools and a policy  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A role is an Org file NAME.org:
;;
;;   #+TITLE: reviewer
;;   #+DESCRIPTION: Reads and comments; never edits.
;;
;;   * System prompt
;;   You review code ...
;;
;;   * Tools
;;   - read_file
;;   - grep
;;
;;   * Policy
;;   | kind | decision | paths            |
;;   |------+----------+------------------|
;;   | read | allow    |                  |
;;   | edit | allow    | test/** tests/** |
;;   | edit | deny     |                  |
;;
;; Its name is the #+TITLE: (else the file's name without .org).  The
;; Tools are a plain list of tool names, or the word `all'.  The Policy
;; is rules as in `lispm-policy-roles': each row a kind, a decision and
;; optional glob patterns separated by spaces; the first row that
;; matches wins, and none means `ask'.  Other headings, prose and Org
;; comments are allowed and ignored.  A file that does not read as a
;; role is skipped with a warning naming its file and line (the
;; condition `lispm-role-broken').
;;
;; Roles come from, first match by name winning:
;;
;;   1. the project: `.lispm/roles/' in the agent's folder or above;
;;   2. the user: each folder of `lispm-roles-directories';
;;   3. LispM's own: the `roles' folder next to this file.
;;
;; The policy (`lispm-policy-rules') takes a role's rules from here
;; when `lispm-policy-roles' does not name the role: the user's alist
;; wins over every file.
;;
;; A helper started from a role can never do more than its caller: for
;; each kind and target it gets the stricter (deny over ask over allow)
;; of its role's decision and its caller's, up the chain of callers
;; (`lispm-policy-decide'; `lispm-roles-helper-decision' for one not
;; started yet), its folder is within the caller's, and its tools are
;; its role's that the caller may use too (`lispm-roles-actor-tools').

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-agents)
;; This file requires the policy, for its kinds, decisions and rules;
;; the policy reaches the roles through `lispm-policy-role-functions',
;; which this file sets, so there is no require cycle.
(require 'lispm-policy)

;;; Options and errors

(defgroup lispm-roles nil
  "Roles: Org files giving an agent a prompt, tools and a policy."
  :group 'lispm
  :prefix "lispm-roles-")

(defcustom lispm-roles-directories (list (locate-user-emacs-file "lispm/roles/"))
  "The folders of the user's own roles, Org files.
A project's roles (in its `.lispm/roles/') win over these, and these
over LispM's own."
  :type '(repeat directory))

(defcustom lispm-roles-from-projects nil
  "Non-nil means a project's own roles, in its `.lispm/roles/', are used.
Off by default: a project you cloned could give a role more than you
would (a `tester' that may run any command without asking).  Turn it
on for projects whose roles you have read.  A helper can never do more
than its caller whatever its role says (`lispm-roles-helper-decision')."
  :type 'boolean)

(defconst lispm-roles-project-subdirectory ".lispm/roles/"
  "Where a project keeps its roles, relative to its root.")

(defconst lispm-roles-shipped-directory (expand-file-name "roles" lispm-directory)
  "The folder of LispM's own roles, the App Store's.")

;; Data: (TEXT FILE LINE NAME): the message, the role's file, the line
;; that is wrong and the name the file would give its role.
(lispm-define-error 'lispm-role-broken "Broken role" 'lispm-policy-error -32057)
;; Data: (TEXT NAME).
(lispm-define-error 'lispm-role-unknown "Unknown role" 'lispm-policy-error -32058)

;;; Reading role files

(cl-defstruct (lispm-role (:constructor lispm-role--make) (:copier nil))
  "A role: who an agent is, what it may use and what it may do."
  (name nil :documentation "The role's name, a symbol: the #+TITLE:, else the file's name.")
  (description "" :documentation "One line saying what the role is for.")
  (prompt nil :documentation "The system prompt, a string.")
  (tools nil :documentation "The tool names, strings, or `all'.")
  (rules nil :documentation "The policy: rules (KIND DECISION [PATTERNS]), first match wins.")
  (file nil :documentation "The Org file's truename.")
  (source nil :documentation "Where it comes from: `project', `user' or `shipped'."))

(defun lispm-roles--broken (file line name format-string &rest args)
  "Signal `lispm-role-broken' of FILE at LINE, whose role would be NAME.
The message is FILE:LINE: and FORMAT-STRING formatted with ARGS."
  (lispm-signal 'lispm-role-broken (list file line name)
                "%s:%d: %s" file line (apply #'format-message format-string args)))

(defconst lispm-roles--sections '(("system prompt" . prompt) ("tools" . tools)
                                  ("policy" . policy))
  "The headings of a role file, downcased, and the part each holds.")

(defun lispm-roles--keyword (name)
  "Return the value of the Org keyword NAME in the buffer, or nil."
  (save-excursion
    (goto-char (point-min))
    (let ((case-fold-search t))
      (when (re-search-forward (format "^#\\+%s:[ \t]*\\(.*?\\)[ \t]*$" name) nil t)
        (match-string-no-properties 1)))))

(defun lispm-roles--tool-line (line fail)
  "Return the tool LINE of a Tools section names: a name, `all' or nil.
Call FAIL with a message if it says something else."
  (cond ((string-match "\\`[ \t]*\\(?:[-+]\\|[0-9]+[.)]\\)[ \t]+\\(.*?\\)[ \t]*\\'" line)
         (let ((item (match-string 1 line)))
           (cond ((equal (downcase item) "all") 'all)
                 ((string-match-p "\\`[A-Za-z0-9_-]+\\'" item) item)
                 (t (funcall fail "not a tool's name: %S (one name per item)" item)))))
        ((equal (downcase (string-trim line)) "all") 'all)))

(defun lispm-roles--policy-line (line fail)
  "Return the rule of LINE, a table row of a Policy section, or nil.
nil for a header or separator row and for a line that is no row.
Call FAIL with a message if the row is no rule."
  (when (string-match-p "\\`[ \t]*|" line)
    (unless (string-match-p "\\`[ \t]*|-" line)
      (let* ((cells (mapcar #'string-trim
                            (split-string (string-trim line "[ \t]*|" "|?[ \t]*") "|")))
             (kind (intern (downcase (or (nth 0 cells) ""))))
             (decision (intern (downcase (or (nth 1 cells) ""))))
             (paths (split-string (or (nth 2 cells) "") nil t)))
        (cond
         ((and (equal (downcase (car cells)) "kind")
               (equal (downcase (or (nth 1 cells) "")) "decision"))
          nil)
         ((cl-some (lambda (cell) (not (string-empty-p cell))) (nthcdr 3 cells))
          (funcall fail "a rule has three cells, kind, decision and paths: %s"
                   (string-trim line)))
         ((not (memq kind lispm-policy-kinds))
          (funcall fail "unknown kind `%s' (the kinds: %s)" (car cells)
                   (mapconcat #'symbol-name lispm-policy-kinds ", ")))
         ((not (memq decision lispm-policy-decisions))
          (funcall fail "unknown decision `%s' for %s (allow, ask or deny)"
                   (or (nth 1 cells) "") kind))
         (t (if paths (list kind decision paths) (list kind decision))))))))

(defun lispm-roles-parse (file &optional source text)
  "Read the role in FILE, an Org file from SOURCE; return a `lispm-role'.
SOURCE is `project', `user' or `shipped'.  TEXT, if non-nil, is read
as FILE's text instead of what is on disk.  Signal
`lispm-role-broken', naming FILE and the line, if it is no role."
  (with-temp-buffer
    (if text (insert text) (lispm-insert-file-text file))
    (let* ((name (intern (or (let ((title (lispm-roles--keyword "title")))
                               (and title (not (string-empty-p title)) title))
                             (file-name-base file))))
           (description (or (lispm-roles--keyword "description") ""))
           (seen nil) (section nil) (line 0)
           (prompt nil) (tools nil) (rules nil))
      (goto-char (point-min))
      (while (not (eobp))
        (cl-incf line)
        (let* ((content (buffer-substring-no-properties (point) (line-end-position)))
               (fail (lambda (format-string &rest args)
                       (apply #'lispm-roles--broken file line name format-string args))))
          (if (string-match "\\`\\*[ \t]+\\(.*?\\)[ \t]*\\'" content)
              (let ((part (cdr (assoc (downcase (match-string 1 content))
                                      lispm-roles--sections))))
                (when (and part (memq part seen))
                  (funcall fail "a second \"* %s\" heading" (match-string 1 content)))
                (when part (push part seen))
                (setq section part))
            (pcase section
              ('prompt (push content prompt))
              ('tools
               (unless (string-match-p "\\`[ \t]*#" content)
                 (when-let* ((tool (lispm-roles--tool-line content fail)))
                   (when (or (and (eq tool 'all) tools) (eq tools 'all))
                     (funcall fail "`all' and tool names together"))
                   (setq tools (if (eq tool 'all) 'all (cons tool tools))))))
              ('policy
               (when-let* ((rule (lispm-roles--policy-line content fail)))
                 (push rule rules))))))
        (forward-line 1))
      (pcase-dolist (`(,heading . ,part) lispm-roles--sections)
        (unless (memq part seen)
          (lispm-roles--broken file 1 name "no \"* %s\" heading"
                               (capitalize heading))))
      (setq prompt (string-trim (string-join (nreverse prompt) "\n")))
      (when (string-empty-p prompt)
        (lispm-roles--broken file 1 name "the \"* System prompt\" is empty"))
      (lispm-role--make :name name :description description :prompt prompt
                        :tools (if (eq tools 'all) 'all (nreverse tools))
                        :rules (nreverse rules) :file file :source source))))

;;; Where roles come from

(defvar lispm-roles--cache (make-hash-table :test #'equal)
  "The roles read from their files.
A table from a file's truename to (MTIME . ROLE), ROLE a `lispm-role'
or the file's `lispm-role-broken' error.")

(defun lispm-roles--read (file source)
  "Return FILE's role, from SOURCE, or its `lispm-role-broken' error.
A file is read again only when its modification time changed; a
broken one is reported once, when it is read."
  (let ((mtime (file-attribute-modification-time (file-attributes file)))
        (cached (gethash file lispm-roles--cache)))
    (if (and cached (equal (car cached) mtime))
        (cdr cached)
      (let ((role (condition-case err
                      (lispm-roles-parse file source)
                    (lispm-role-broken
                     (display-warning 'lispm (format "Role skipped: %s" (cadr err)))
                     err))))
        (puthash file (cons mtime role) lispm-roles--cache)
        role))))

(defvar lispm-roles--listings (make-hash-table :test #'equal)
  "The role files of each folder: folder -> (MODIFIED . FILES).
Asked at every tool call; a folder's listing changes its time.")

(defun lispm-roles--files (directory)
  "Return the Org files directly in DIRECTORY, as truenames, sorted."
  (when-let* ((directory directory)
              (attributes (file-attributes directory))
              ((eq (file-attribute-type attributes) t)))
    (let ((modified (file-attribute-modification-time attributes))
          (known (gethash directory lispm-roles--listings)))
      (if (equal (car known) modified)
          (cdr known)
        (cdr (puthash directory
                      (cons modified
                            (mapcar #'file-truename
                                    (directory-files directory t "\\`[^.#].*\\.org\\'")))
                      lispm-roles--listings))))))

(defun lispm-roles--project-directory (folder)
  "Return the `.lispm/roles/' of the project around FOLDER, or nil.
That of the nearest folder, FOLDER or above, which has one."
  (when-let* ((folder folder)
              (root (locate-dominating-file
                     folder (lambda (dir)
                              (file-directory-p
                               (expand-file-name lispm-roles-project-subdirectory dir))))))
    (expand-file-name lispm-roles-project-subdirectory root)))

(defun lispm-roles--all (folder)
  "Return every role file's role or error, for an agent in FOLDER, in order."
  (let (found)
    (pcase-dolist (`(,source . ,directories)
                   `((project ,(and lispm-roles-from-projects
                                    (lispm-roles--project-directory folder)))
                     (user ,@lispm-roles-directories)
                     (shipped ,lispm-roles-shipped-directory)))
      (dolist (directory directories)
        (dolist (file (lispm-roles--files directory))
          (push (lispm-roles--read file source) found))))
    (nreverse found)))

(defun lispm-roles-list (&optional folder)
  "Return the roles an agent working in FOLDER can have, a list of `lispm-role'.
When two have the same name, a project's wins over the user's, and
the user's over LispM's own; broken files are skipped."
  (cl-remove-duplicates (cl-remove-if-not #'lispm-role-p (lispm-roles--all folder))
                        :key #'lispm-role-name :from-end t))

(defun lispm-roles-broken (&optional folder)
  "Return the `lispm-role-broken' errors of the role files FOLDER sees."
  (cl-remove-if #'lispm-role-p (lispm-roles--all folder)))

(defun lispm-roles--name (name)
  "Return NAME, a role's name as a string or a symbol, as a symbol."
  (if (stringp name) (intern name) name))

(defun lispm-roles-get (name &optional folder)
  "Return the role NAME, a string or symbol, of an agent in FOLDER, or nil.
Signal `lispm-role-broken' if only a broken file would give NAME."
  (let ((name (lispm-roles--name name))
        (all (lispm-roles--all folder)))
    (or (cl-find-if (lambda (role) (and (lispm-role-p role) (eq (lispm-role-name role) name)))
                    all)
        (when-let* ((err (cl-find-if (lambda (err)
                                       (and (not (lispm-role-p err)) (eq (nth 4 err) name)))
                                     all)))
          (signal (car err) (cdr err))))))

(defun lispm-roles--policy-entry (role folder)
  "Return the entry (ROLE . RULES) of the role file named ROLE, for FOLDER."
  (when-let* ((found (lispm-roles-get role folder)))
    (cons role (lispm-role-rules found))))

(add-hook 'lispm-policy-role-functions #'lispm-roles--policy-entry)

;;; Helpers: never more than their caller

(defun lispm-roles-check (role folder)
  "Signal `lispm-role-unknown' unless ROLE, a symbol, names a role for FOLDER.
The error's message lists the roles an agent in FOLDER can have."
  (unless (or (assq role lispm-policy-roles) (lispm-roles-get role folder))
    (lispm-signal 'lispm-role-unknown (list role) "Unknown role %s; the roles are: %s"
                  role (mapconcat (lambda (role) (symbol-name (lispm-role-name role)))
                                  (lispm-roles-list folder) ", "))))

(defun lispm-roles-helper-decision (role caller kind target &optional helper)
  "Return `allow', `ask' or `deny' for a helper of ROLE doing KIND on TARGET.
CALLER is the actor that starts the helper; HELPER, once it exists,
the helper itself, an actor whose folder its role's path patterns are
relative to (without it, CALLER's folder).  This is what
`lispm-policy-decide' gives the helper, whose caller is CALLER: the
stricter of ROLE's decision and CALLER's, up CALLER's own callers
\(`lispm-policy-chain-decision'), lifted only by HELPER's own session
grant.  A HELPER whose folder is not within CALLER's is denied
everything.  Signal `lispm-role-unknown' if ROLE is no role."
  (let* ((role (lispm-roles--name role))
         (agent (or helper caller)))
    (lispm-roles-check role (lispm-actor-folder agent))
    (let ((decision (lispm-policy-chain-decision agent role kind target caller)))
      (if helper (lispm-policy-granted-decision helper kind decision) decision))))

(defun lispm-roles--tools (role folder)
  "Return the tools of ROLE for an agent in FOLDER: names, or `all'.
A role only `lispm-policy-roles' names, which says nothing of tools,
has all of them; an unknown role has the default role's."
  (let ((found (lispm-roles-get role folder)))
    (cond (found (lispm-role-tools found))
          ((assq role lispm-policy-roles) 'all)
          ((not (eq role lispm-policy-default-role))
           (lispm-roles--tools lispm-policy-default-role folder))
          (t 'all))))

(defun lispm-roles--both (mine theirs)
  "Return the tools in both MINE and THEIRS, lists of names or `all'.
In MINE's order; `all' only if both are."
  (cond ((eq mine 'all) theirs)
        ((eq theirs 'all) mine)
        (t (cl-remove-if-not (lambda (tool) (member tool theirs)) mine))))

(defun lispm-roles-actor-tools (actor)
  "Return the tools ACTOR may use: tool names, or `all'.
They are its role's; for a helper, only those its caller may use too,
up the chain of callers."
  (let ((mine (lispm-roles--tools (lispm-actor-effective-role actor)
                                  (lispm-actor-folder actor)))
        (caller (lispm-actor-caller actor)))
    (if caller
        (lispm-roles--both mine (lispm-roles-actor-tools caller))
      mine)))

(defun lispm-roles-helper-tools (role caller)
  "Return the tools a helper of ROLE started by CALLER may use.
They are ROLE's tools that CALLER may use too (`lispm-roles-actor-tools'),
in ROLE's order: tool names, or `all' when both have every tool."
  (let* ((role (lispm-roles--name role))
         (folder (lispm-actor-folder caller)))
    (lispm-roles-check role folder)
    (lispm-roles--both (lispm-roles--tools role folder)
                       (lispm-roles-actor-tools caller))))

(provide 'lispm-roles)
;;; lispm-roles.el ends here
