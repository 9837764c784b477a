;;; lispm-skills.el --- Skills: Org files of instructions and Lisp tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A skill is an Org file: instructions for the model, and Emacs Lisp
;; source blocks (#+begin_src emacs-lisp ... #+end_src) whose code
;; usually defines tools with `lispm-define-tool'.  Its name is the
;; file's name without `.org' (an app's page `lispm-app-ID.org' is the
;; skill ID); its title is the #+TITLE:, else the first heading; its
;; description the #+DESCRIPTION:, else the first line of text.
;;
;; The instructions are the file's text without the Lisp blocks: the
;; code is for Emacs, the tools it defines describe themselves.  A
;; block whose header says `:eval no' or `:eval never' is an example:
;; it stays in the instructions and is never run.
;;
;; Skills come from, first match by name winning:
;;
;;   1. the project: `.lispm/skills/' in the agent's folder or above;
;;   2. the user: each folder of `lispm-skills-directories';
;;   3. the apps: the pages of LispM's apps (`elisp/apps/*.org').
;;
;; The `skill' tool (`lispm-skill-load') returns a skill's instructions
;; and evaluates its code, so its tools exist from the agent's next
;; step on.  The user's skills and the apps' are trusted.  A project's
;; skill code runs only after the user trusts that project with
;; \\[lispm-trust-project], which records the SHA-256 of each skill's
;; code in `lispm-trust-file' (lispm-trust.el): code that changed is no longer
;; trusted until the user trusts the project again.  An untrusted
;; skill's instructions can still be read.  All of a skill's forms are
;; read before any is evaluated, so broken Lisp runs nothing.
;;
;; The `write_skill' tool (kind `edit') lets an agent write itself a
;; skill: `.lispm/skills/NAME.org' in its folder, the project's
;; skills, written as write_file writes (one undo step, taken back
;; with its turn).  Before the user is asked, every Lisp block of it
;; must read as `skill' reads them; the approval shows the Org file it
;; would become.  Writing a skill runs nothing of it: `skill' loads
;; it, and its code runs only once the user trusts the project.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-agents)
(require 'lispm-tools)
(require 'lispm-trust)

;;; Options and errors

(defgroup lispm-skills nil
  "Skills: Org files that teach agents, and the code they bring."
  :group 'lispm
  :prefix "lispm-skills-")

(defcustom lispm-skills-directories (list (locate-user-emacs-file "lispm/skills/"))
  "The folders of the user's own skills, Org files; their code is trusted."
  :type '(repeat directory)
  :group 'lispm-skills)

(defconst lispm-skills-project-subdirectory ".lispm/skills/"
  "Where a project keeps its skills, relative to its root.")

;; The data of each is its message, then the skill's name.
(lispm-define-error 'lispm-skill-error "LispM skill error" 'lispm-tool-error -32075)
(lispm-define-error 'lispm-skill-unknown "Unknown skill" 'lispm-skill-error -32076)
(lispm-define-error 'lispm-skill-broken "Broken skill" 'lispm-skill-error -32077)

;;; Reading skill files

(cl-defstruct (lispm-skill (:constructor lispm-skill--make) (:copier nil))
  "A skill: instructions for the model, and Lisp code."
  (name nil :documentation "The skill's name: its file's name without .org.")
  (title nil :documentation "The #+TITLE:, else the first heading, else the name.")
  (description nil :documentation "One line saying what the skill is for.")
  (file nil :documentation "The Org file's truename.")
  (source nil :documentation "Where it comes from: `project', `user' or `app'.")
  (project nil :documentation "For a project's skill, the project's root.")
  (instructions nil :documentation "The text without the Lisp blocks.")
  (code nil :documentation "The Lisp blocks' text, a list of strings.")
  (broken nil :documentation "Why the file cannot be read as a skill, or nil."))

(defun lispm-skills--unescape (text)
  "Return TEXT, a source block's body, without Org's escaping commas."
  (replace-regexp-in-string "^\\([ \t]*\\),\\([*,]\\|#\\+\\)" "\\1\\2" text t))

(defun lispm-skills--parse (file source &optional project text)
  "Read the skill in FILE, an Org file from SOURCE; return a `lispm-skill'.
PROJECT is the project's root for a project's skill.  TEXT, if
non-nil, is read as FILE's text instead of what is on disk."
  (with-temp-buffer
    (if text (insert text) (insert-file-contents file))
    (let ((case-fold-search t)
          (name (file-name-base file))
          title description code broken)
      (when (eq source 'app)
        (setq name (string-remove-prefix "lispm-app-" name)))
      (goto-char (point-min))
      (setq title (if (re-search-forward "^#\\+title:[ \t]*\\(.*?\\)[ \t]*$" nil t)
                      (match-string-no-properties 1)
                    (goto-char (point-min))
                    (and (re-search-forward "^\\*+[ \t]+\\(.*?\\)[ \t]*$" nil t)
                         (match-string-no-properties 1))))
      (goto-char (point-min))
      (when (re-search-forward "^#\\+description:[ \t]*\\(.*?\\)[ \t]*$" nil t)
        (setq description (match-string-no-properties 1)))
      (goto-char (point-min))
      (while (and (not broken)
                  (re-search-forward
                   "^[ \t]*#\\+begin_src[ \t]+\\(?:emacs-lisp\\|elisp\\)\\_>\\(.*\\)$" nil t))
        (let ((header (match-string 1))
              (start (match-beginning 0))
              (body (min (point-max) (1+ (line-end-position)))))
          (if (not (re-search-forward "^[ \t]*#\\+end_src" nil t))
              (setq broken (format "a Lisp block (line %d) has no #+end_src"
                                   (line-number-at-pos start)))
            (unless (string-match-p ":eval[ \t]+\\(?:no\\|never\\)\\_>" header)
              (push (lispm-skills--unescape
                     (buffer-substring-no-properties body (line-beginning-position)))
                    code)
              (delete-region start (min (point-max) (1+ (line-end-position))))
              (goto-char start)))))
      (let ((instructions (string-trim
                           (replace-regexp-in-string "\n\\(?:[ \t]*\n\\)\\{2,\\}" "\n\n"
                                                     (buffer-string)))))
        (unless description
          (setq description
                (or (cl-find-if (lambda (line)
                                  (not (or (string-blank-p line)
                                           (string-match-p "\\`[ \t]*\\(?:#\\|\\*\\)" line))))
                                (split-string instructions "\n"))
                    "")))
        (lispm-skill--make :name name :title (or title name)
                           :description (string-trim description)
                           :file file :source source :project project
                           :instructions instructions :code (nreverse code)
                           :broken broken)))))

(defun lispm-skills--files (directory)
  "Return the Org files directly in DIRECTORY, as truenames, sorted."
  (when (and directory (file-directory-p directory))
    (mapcar #'file-truename
            (directory-files directory t "\\`[^.#].*\\.org\\'"))))

(defun lispm-skills--project-root (folder)
  "Return the root of the project around FOLDER with skills, or nil.
That is the nearest folder, FOLDER or above, with `.lispm/skills/'."
  (when-let* ((folder folder)
              (root (locate-dominating-file
                     folder (lambda (dir)
                              (file-directory-p
                               (expand-file-name lispm-skills-project-subdirectory dir))))))
    (file-name-as-directory (file-truename root))))

(defun lispm-skills--apps-directory ()
  "Return the folder of the apps' pages."
  (expand-file-name "apps" lispm-directory))

(defun lispm-skills-list (&optional folder)
  "Return the skills an agent working in FOLDER can load, a list of `lispm-skill'.
Without FOLDER, the projects of every live agent count.  When two
skills have the same name, a project's wins over the user's, and
the user's over an app's."
  (let ((roots (delete-dups
                (delq nil (mapcar #'lispm-skills--project-root
                                  (if folder (list folder)
                                    (mapcar #'lispm-actor-folder (lispm-agents)))))))
        skills)
    (dolist (root roots)
      (dolist (file (lispm-skills--files
                     (expand-file-name lispm-skills-project-subdirectory root)))
        (push (lispm-skills--parse file 'project root) skills)))
    (dolist (dir lispm-skills-directories)
      (dolist (file (lispm-skills--files dir))
        (push (lispm-skills--parse file 'user) skills)))
    (dolist (file (lispm-skills--files (lispm-skills--apps-directory)))
      (push (lispm-skills--parse file 'app) skills))
    (cl-remove-duplicates (nreverse skills) :key #'lispm-skill-name
                          :test #'equal :from-end t)))

(defun lispm-skills-get (name &optional folder)
  "Return the skill NAME an agent in FOLDER would load, or nil."
  (cl-find name (lispm-skills-list folder) :key #'lispm-skill-name :test #'equal))

(defun lispm-skills-search (query &optional folder)
  "Return the skills QUERY's words match, for an agent in FOLDER.
Each is a plist (:name :kind nil :description :type \"skill\" :score), as
`lispm-tools-search' returns them; an empty QUERY matches all."
  (let ((all (null (split-string query "[^[:alnum:]]+" t))))
    (cl-loop for skill in (lispm-skills-list folder)
             for score = (lispm-tools-score query (lispm-skill-name skill)
                                            (concat (lispm-skill-title skill) " "
                                                    (lispm-skill-description skill)))
             when (or all (> score 0))
             collect (list :name (lispm-skill-name skill) :kind nil
                           :description (lispm-skill-description skill)
                           :type "skill" :score score))))

;;; Trust

(defun lispm-skills--hash (skill)
  "Return the SHA-256 of SKILL's code, its Lisp blocks."
  (secure-hash 'sha256 (mapconcat #'identity (lispm-skill-code skill) "\0")))

(defun lispm-skills-trusted-p (skill)
  "Return non-nil if SKILL's code may run.
The user's skills and the apps' are trusted; a project's skill only if
the user trusted its project when its code was what it is now
\(`lispm-trust-project')."
  (or (memq (lispm-skill-source skill) '(user app))
      (lispm-trusted-p (lispm-skill-file skill) (lispm-skills--hash skill))))

(defun lispm-skills--to-trust (folder)
  "Return the skills of the project at FOLDER to trust, for `lispm-trust-project'.
Each is (FILE HASH WHAT)."
  (when-let* ((root (lispm-skills--project-root folder)))
    (mapcar (lambda (file)
              (let ((skill (lispm-skills--parse file 'project root)))
                (list (lispm-skill-file skill) (lispm-skills--hash skill)
                      (format "skill %s" (lispm-skill-name skill)))))
            (lispm-skills--files (expand-file-name lispm-skills-project-subdirectory root)))))

(add-hook 'lispm-trust-project-functions #'lispm-skills--to-trust)

;;; Loading

(defun lispm-skills--read-forms (skill &optional outcome)
  "Return every form of SKILL's code, read but not evaluated.
Signal `lispm-skill-broken', naming the block, if any does not read;
its message ends with OUTCOME, by default \"nothing was run\"."
  (setq outcome (or outcome "nothing was run"))
  (when (lispm-skill-broken skill)
    (lispm-signal 'lispm-skill-broken (list (lispm-skill-name skill))
                  "Skill %s is broken: %s; %s"
                  (lispm-skill-name skill) (lispm-skill-broken skill) outcome))
  (let ((n 0) forms)
    (dolist (block (lispm-skill-code skill))
      (cl-incf n)
      (with-temp-buffer
        (set-syntax-table emacs-lisp-mode-syntax-table)
        (insert block)
        (goto-char (point-min))
        (while (progn (forward-comment (buffer-size)) (not (eobp)))
          (let ((line (line-number-at-pos)))
            (push (condition-case err
                      (read (current-buffer))
                    (error
                     (lispm-signal
                      'lispm-skill-broken (list (lispm-skill-name skill))
                      "Skill %s has broken Lisp in block %d, at the form on its line %d (%s); %s"
                      (lispm-skill-name skill) n line (error-message-string err) outcome)))
                  forms)))))
    (nreverse forms)))

(defun lispm-skills--untrusted-reason (skill)
  "Say why SKILL's code did not run, and how the user can let it."
  (let ((changed (lispm-trust-recorded-p (lispm-skill-file skill)))
        (root (directory-file-name (lispm-skill-project skill))))
    (format "The code of skill %s was not run: %s.  Its instructions are above.  \
To let it run, the user must review it (%s) and type M-x lispm-trust-project RET %s RET"
            (lispm-skill-name skill)
            (if changed
                (format "it changed since the user trusted the project %s" root)
              (format "the user does not trust the project %s" root))
            (lispm-skill-file skill) root)))

(defun lispm-skill-load (name agent)
  "Return skill NAME's instructions for AGENT; load its code if trusted.
Return a plist (:instructions TEXT :loaded BOOL :reason TEXT :tools
NAMES), ready for JSON.  `:loaded' is t when the code ran (or there is
none), and `:tools' then names the tools it defined, in a vector;
else `:reason' says why not and how the user can trust it
\(`lispm-trust-project').  Signal
`lispm-skill-unknown' for an unknown skill and `lispm-skill-broken'
for one whose code does not read, before anything is evaluated."
  (let* ((folder (and agent (lispm-actor-folder agent)))
         (skill (or (lispm-skills-get name folder)
                    (lispm-signal
                     'lispm-skill-unknown (list name) "Unknown skill %s; the skills are: %s" name
                     (mapconcat #'lispm-skill-name (lispm-skills-list folder) ", "))))
         (instructions (lispm-skill-instructions skill)))
    (cond ((and (null (lispm-skill-code skill)) (not (lispm-skill-broken skill)))
           (list :instructions instructions :loaded t :tools []))
          ((not (lispm-skills-trusted-p skill))
           (list :instructions instructions :loaded nil
                 :reason (lispm-skills--untrusted-reason skill)))
          (t
           (let ((forms (lispm-skills--read-forms skill))
                 (before (mapcar (lambda (tool) (cons (lispm-tool-name tool) tool))
                                 lispm-tools)))
             (condition-case err
                 (dolist (form forms)
                   (eval form t))
               (error
                (lispm-signal 'lispm-skill-error (list name) "The code of skill %s failed: %s"
                              name (lispm-error-message err))))
             (list :instructions instructions :loaded t
                   :tools (vconcat
                           (cl-loop for tool in lispm-tools
                                    unless (eq (cdr (assoc (lispm-tool-name tool) before))
                                               tool)
                                    collect (lispm-tool-name tool)))))))))

(lispm-define-tool skill (agent (name string "The skill's name, as search_tools lists it."))
  "Return a skill's instructions and load its Lisp code, defining its tools.
Its tools can be called from the next step on.  A project's skill code
runs only if the user trusts the project; the instructions can be read
anyway."
  :kind 'read
  (let ((result (lispm-skill-load name agent)))
    (concat (plist-get result :instructions)
            (cond ((not (plist-get result :loaded))
                   (format "\n\n[%s]" (plist-get result :reason)))
                  ((> (length (plist-get result :tools)) 0)
                   (format "\n\n[Skill %s loaded; its tools: %s]" name
                           (string-join (append (plist-get result :tools) nil) ", ")))
                  (t "")))))

;;; Writing skills

(defun lispm-skills--check-name (name)
  "Signal `lispm-tool-bad-args' unless NAME can name a skill's file."
  (unless (string-match-p "\\`[A-Za-z0-9_-]+\\'" name)
    (lispm-signal 'lispm-tool-bad-args nil
                  "write_skill: %S cannot name a skill: use only letters, digits, - and _ \
\(it is the file's name, without .org)" name)))

(defun lispm-skills--new-file (agent name)
  "Return the file, a truename, in which AGENT writes the skill NAME.
That is NAME.org in the `.lispm/skills/' of AGENT's folder.  Signal
if NAME is no skill's name, or if the project's skills are in a
folder above: that is outside AGENT's folder, and a new
`.lispm/skills/' in it would hide them."
  (lispm-skills--check-name name)
  (let* ((folder (lispm-tools-resolve agent "."))
         (root (lispm-skills--project-root folder)))
    (when (and root (not (equal root folder)))
      (lispm-signal 'lispm-tool-outside-folder nil
                    "The project's skills are in %s, outside the folder %s; write_skill \
writes only inside the folder, and a new %s there would hide them"
                    (expand-file-name lispm-skills-project-subdirectory root)
                    (directory-file-name folder) lispm-skills-project-subdirectory))
    (lispm-tools-resolve agent (concat lispm-skills-project-subdirectory name ".org"))))

(defun lispm-skills--check-text (file text)
  "Signal `lispm-skill-broken' if any Lisp block of TEXT does not read.
TEXT is what the skill file FILE would hold.  It is read as `skill'
reads a skill, and nothing of it is evaluated."
  (lispm-skills--read-forms (lispm-skills--parse file 'project nil text)
                            "nothing was written"))

(defun lispm-skills--written-note (file name)
  "Return what the agent is told after writing the skill NAME in FILE."
  (let ((skill (lispm-skills--parse file 'project (lispm-skills--project-root file))))
    (format "Nothing in it was run.  The skill tool (name %s) %s" name
            (cond ((null (lispm-skill-code skill))
                   "returns its instructions; it has no Lisp code.")
                  ((lispm-skills-trusted-p skill)
                   "loads it; its code is as the user trusted it, so it runs then.")
                  (t "loads it, but its code runs only once the user has reviewed \
it and trusts the project (M-x lispm-trust-project).")))))

(lispm-define-tool write-skill (agent (name string "The skill's name: letters, digits, - and _ only (its file's name without .org).")
                                      (text string "The skill's whole Org file: instructions, and #+begin_src emacs-lisp blocks."))
  "Write yourself a skill, TEXT, as the project's Org file .lispm/skills/NAME.org.
A skill is instructions plus Emacs Lisp source blocks, whose code
usually defines tools with `lispm-define-tool'.  The user reviews
it before it is written; every Lisp block must read, or nothing
is.  Nothing in it runs now: the skill tool loads it later, and a
project's skill code runs only once the user trusts the project."
  :kind 'edit
  :target (let ((file (lispm-skills--new-file agent name)))
            (lispm-skills--check-text file text)
            (append (lispm-tool-target "write_file" agent (list :path file :content text))
                    (list :org text)))
  (let ((file (lispm-skills--new-file agent name)))
    (lispm-skills--check-text file text)
    (let ((result (copy-sequence (lispm-tool-write-file agent file text))))
      (plist-put result :text (format "%s.  %s" (plist-get result :text)
                                      (lispm-skills--written-note file name))))))

(provide 'lispm-skills)
;;; lispm-skills.el ends here
