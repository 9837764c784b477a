;;; lispm-memory.el --- The own agent's memory: Org files in git  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; What LispM's own agent remembers across sessions and Emacs
;; processes: one Org file for the user and one per project, in the
;; sessions repository (`lispm-sessions-directory'), committed there
;; like the sessions:
;;
;;   memory/user.org                      about the user, in every project
;;   memory/projects/NAME-HASH.org        about one project: NAME its root's
;;                                        name, HASH a hash of its path
;;
;; The project is the one whose rules the agent reads
;; (`lispm-project-rules-root').  Each fact is a top-level heading with
;; the time it was remembered in a `CREATED' property, the newest last.
;; The user reads and edits them as Org (M-x lispm-memory-visit); a
;; save there is committed too.
;;
;; The agent adds a fact with the `remember' tool, whose kind,
;; `remember', writes only these files.  A fact is one line: its line
;; breaks become spaces, so nothing in it can make a heading or a
;; drawer of the file, and control characters are refused; known
;; secrets are withheld before it is written; a fact past
;; `lispm-memory-entry-limit' characters, or a file it would make
;; longer than `lispm-memory-file-limit', is refused with a clear error.
;; A file some buffer visits is written through that buffer, as the
;; file tools write, so its unsaved edits are kept (and saved).
;;
;; The system prompt gets the facts of both files
;; (`lispm-memory-prompt-text'), each file read again when it changed
;; on disk or in its buffer: the most relevant first, which here means
;; sharing the most words with the user's latest text, then the newest;
;; cut at `lispm-memory-prompt-limit' characters, with a line saying
;; how many were left out.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-edit)
(require 'lispm-secrets)
(require 'lispm-session)
(require 'lispm-session-git)
(require 'lispm-project-rules)
(require 'lispm-tools)

;;; Options

(defgroup lispm-memory nil
  "The own agent's memory: Org files in the sessions repository."
  :group 'lispm-own-agent
  :prefix "lispm-memory-")

(defcustom lispm-memory-entry-limit 1000
  "The most characters one remembered fact may have."
  :type 'natnum)

(defcustom lispm-memory-file-limit (* 64 1024)
  "The most characters a memory file may grow to by the `remember' tool.
The user may make it longer; the agent then cannot add to it until
the user prunes it."
  :type 'natnum)

(defcustom lispm-memory-prompt-limit 8000
  "The most characters of remembered facts in the system prompt."
  :type 'natnum)

;;; The files

(defun lispm-memory-directory ()
  "Return the folder of the memory files, in `lispm-sessions-directory'."
  (expand-file-name "memory/" (expand-file-name lispm-sessions-directory)))

(defun lispm-memory--project-name (root)
  "Return the base of ROOT's memory file: ROOT's name and a hash of its path."
  (let ((root (directory-file-name (expand-file-name root))))
    (format "%s-%s"
            (let ((name (replace-regexp-in-string
                         "[^A-Za-z0-9._-]+" "_" (file-name-nondirectory root))))
              (if (string-match-p "\\`[._]*\\'" name) "root" name))
            (substring (secure-hash 'sha256 root) 0 8))))

(defun lispm-memory-file (scope &optional folder)
  "Return the memory file of SCOPE, `user' or `project' (FOLDER's project)."
  (pcase scope
    ('user (expand-file-name "user.org" (lispm-memory-directory)))
    ('project
     (unless folder
       (error "The memory of a project needs its folder"))
     (expand-file-name (concat "projects/"
                               (lispm-memory--project-name (lispm-project-rules-root folder))
                               ".org")
                       (lispm-memory-directory)))
    (_ (error "No such memory: %S (user or project)" scope))))

(defun lispm-memory--header (scope folder)
  "Return the first text of a new memory file of SCOPE (FOLDER's project)."
  (format "#+TITLE: LispM's memory: %s
#+STARTUP: showall

What LispM's own agent remembers %s.  Each top-level heading is one
fact, the newest last; edit, reorder or delete them freely.  Saved,
this file is committed in LispM's sessions repository.

"
          (if (eq scope 'user) "the user" (abbreviate-file-name
                                           (lispm-project-rules-root folder)))
          (if (eq scope 'user) "about you, in every project"
            "about this project")))

;;; Reading

(defvar lispm-memory--cache (make-hash-table :test #'equal)
  "Each memory file's facts when last read: FILE to (KEY . ENTRIES).")

(defun lispm-memory--time (stamp)
  "Return the time an Org timestamp STAMP names, or nil."
  (when (and stamp (string-match "\\([0-9]\\{4\\}\\)-\\([0-9]\\{2\\}\\)-\\([0-9]\\{2\\}\\)\
\\(?:[^]>0-9]*\\([0-9]\\{1,2\\}\\):\\([0-9]\\{2\\}\\)\\)?" stamp))
    (let ((number (lambda (n) (string-to-number (or (match-string n stamp) "0")))))
      (ignore-errors
        (float-time (encode-time (list 0 (funcall number 5) (funcall number 4)
                                       (funcall number 3) (funcall number 2)
                                       (funcall number 1) nil -1 nil)))))))

(defun lispm-memory-parse (text)
  "Return the facts of TEXT, a memory file's, in the file's order.
Each is a plist (:text FACT :time SECONDS :stamp STAMP): FACT the
heading and its body as one line (its property drawer left out), TIME
from its `CREATED' property (0 without one)."
  (let ((entries nil))
    (with-temp-buffer
      (insert text)
      (goto-char (point-min))
      (while (re-search-forward "^\\* +\\(.*\\)$" nil t)
        (let* ((title (match-string-no-properties 1))
               (body-start (min (point-max) (1+ (point))))
               (end (save-excursion
                      (if (re-search-forward "^\\* " nil t) (match-beginning 0) (point-max))))
               (body (buffer-substring-no-properties body-start end))
               (stamp nil))
          (when (string-match "\\`[ \t]*:PROPERTIES:[ \t]*\n\\(\\(?:.*\n\\)*?\\)[ \t]*:END:[ \t]*\\(?:\n\\|\\'\\)"
                              body)
            (let ((drawer (match-string 1 body)))
              (setq body (substring body (match-end 0)))
              (when (string-match "^[ \t]*:CREATED:[ \t]*\\(.*\\)$" drawer)
                (setq stamp (string-trim (match-string 1 drawer))))))
          (let ((fact (string-trim (replace-regexp-in-string
                                    "[ \t\n]+" " " (concat title " " body)))))
            (unless (string-empty-p fact)
              (push (list :text fact :time (or (lispm-memory--time stamp) 0) :stamp stamp)
                    entries)))
          (goto-char end))))
    (nreverse entries)))

(defun lispm-memory-entries (file)
  "Return the facts of the memory FILE (see `lispm-memory-parse'), or nil.
FILE is read again when it changed on disk, or in a buffer visiting it
with unsaved changes (whose text is then what counts)."
  (let* ((buffer (find-buffer-visiting file))
         (key (if (and buffer (buffer-modified-p buffer))
                  (list buffer (buffer-chars-modified-tick buffer))
                (when-let* ((attributes (file-attributes file)))
                  (list (file-attribute-modification-time attributes)
                        (file-attribute-size attributes)))))
         (cached (gethash file lispm-memory--cache)))
    (cond ((null key) nil)
          ((equal key (car cached)) (cdr cached))
          (t (let ((entries (lispm-memory-parse (or (lispm-edit-file-text file) ""))))
               (puthash file (cons key entries) lispm-memory--cache)
               entries)))))

;;; The system prompt

(defconst lispm-memory--common-words
  '("about" "and" "are" "can" "could" "did" "does" "for" "from" "had" "has"
    "have" "her" "him" "his" "how" "its" "not" "our" "she" "that" "the"
    "their" "them" "then" "there" "they" "this" "was" "were" "what" "when"
    "where" "which" "who" "why" "will" "with" "would" "you" "your")
  "Words too common to make a fact relevant.")

(defun lispm-memory--words (text)
  "Return the distinct words of TEXT that can make a fact relevant."
  (cl-remove-if (lambda (word) (or (< (length word) 3)
                                   (member word lispm-memory--common-words)))
                (delete-dups (split-string (downcase (or text "")) "[^[:alnum:]]+" t))))

(defun lispm-memory-ranked (folder &optional query)
  "Return the facts of the user and of FOLDER's project, the first first.
The most relevant come first: those sharing the most words with QUERY
\(the user's latest text), then the newest; a fact gets :scope, `user'
or `project'."
  (let* ((words (lispm-memory--words query))
         (entries
          (cl-loop for scope in '(user project)
                   for file = (lispm-memory-file scope folder)
                   nconc (cl-loop for entry in (lispm-memory-entries file)
                                  for position from 0
                                  collect (append
                                           (list :scope scope :position position
                                                 :score (if words
                                                            (length (cl-intersection
                                                                     words
                                                                     (lispm-memory--words
                                                                      (plist-get entry :text))
                                                                     :test #'equal))
                                                          0))
                                           entry)))))
    (sort entries
          (lambda (a b)
            (let ((sa (plist-get a :score)) (sb (plist-get b :score))
                  (ta (plist-get a :time)) (tb (plist-get b :time)))
              (cond ((/= sa sb) (> sa sb))
                    ((/= ta tb) (> ta tb))
                    ((not (eq (plist-get a :scope) (plist-get b :scope)))
                     (eq (plist-get a :scope) 'project))
                    (t (> (plist-get a :position) (plist-get b :position)))))))))

(defun lispm-memory-prompt-text (folder &optional query)
  "Return what an agent in FOLDER remembers, as its prompt gives it, or nil.
The facts of the user and of FOLDER's project, the most relevant to
QUERY (the user's latest text) first, then the newest, each on a line;
known secrets withheld; past `lispm-memory-prompt-limit' characters
the rest is left out, and a line says how many."
  (when-let* ((entries (lispm-memory-ranked folder query)))
    (let ((lines nil) (used 0) (left 0))
      (dolist (entry entries)
        (let ((line (lispm-secrets-redact
                     (format "- (%s%s) %s"
                             (if (eq (plist-get entry :scope) 'user) "user" "project")
                             (if (plist-get entry :stamp)
                                 (format ", %s" (plist-get entry :stamp))
                               "")
                             (plist-get entry :text)))))
          (if (> (+ used (length line) 1) lispm-memory-prompt-limit)
              (cl-incf left)
            (push line lines)
            (cl-incf used (1+ (length line))))))
      (concat (mapconcat #'identity (nreverse lines) "\n")
              (if (> left 0)
                  (format "\n[LispM: %d more remembered fact%s left out, past %d characters \
\(`lispm-memory-prompt-limit')]" left (if (= left 1) "" "s") lispm-memory-prompt-limit)
                "")))))

;;; Writing

(defun lispm-memory--clean (fact)
  "Return FACT made one line with no secret, or signal why it cannot be remembered."
  (unless (stringp fact)
    (lispm-signal 'lispm-tool-bad-args (list fact) "remember: the fact must be text"))
  (when (> (length fact) (* 2 lispm-memory-entry-limit))
    (lispm-signal 'lispm-tool-bad-args (list (length fact))
                  "remember: the fact has %d characters, more than %d \
\(`lispm-memory-entry-limit'); remember something shorter"
                  (length fact) lispm-memory-entry-limit))
  ;; One line: nothing in it can begin a heading or a drawer.
  (let ((text (string-trim (replace-regexp-in-string
                            "[ \t\n\r\f\v\u0085\u2028\u2029]+" " " fact))))
    (when (string-match "[\0-\037\177\u0080-\u009f]" text)
      (lispm-signal 'lispm-tool-bad-args (list (aref text (match-beginning 0)))
                    "remember: the fact has a control character (U+%04X); remember text"
                    (aref text (match-beginning 0))))
    (when (string-empty-p text)
      (lispm-signal 'lispm-tool-bad-args nil "remember: the fact is empty"))
    (setq text (lispm-secrets-redact text))
    (when (> (length text) lispm-memory-entry-limit)
      (lispm-signal 'lispm-tool-bad-args (list (length text))
                    "remember: the fact has %d characters, more than %d \
\(`lispm-memory-entry-limit'); remember something shorter"
                    (length text) lispm-memory-entry-limit))
    text))

(defun lispm-memory--commit (file message)
  "Queue a commit of the memory FILE with MESSAGE in the sessions repository."
  (lispm-sessions-enqueue file message
                          (file-name-as-directory (expand-file-name lispm-sessions-directory))))

(defun lispm-memory--write (file text)
  "Make TEXT the memory FILE's, through a buffer visiting it if there is one.
Unsaved edits in that buffer are kept: TEXT was made from them."
  (let ((buffer (find-buffer-visiting file)))
    (if (null buffer)
        (lispm-write-file-whole file (encode-coding-string text 'utf-8-unix))
      (condition-case err
          (let ((inhibit-interaction t))
            (lispm-edit-replace buffer text :save t))
        ((inhibited-interaction file-error)
         (lispm-signal 'lispm-tool-error (list file)
                       "remember: %s could not be saved (%s); the user may have \
changed it both on disk and in its buffer"
                       (abbreviate-file-name file) (error-message-string err)))))))

(defun lispm-memory--plan (scope folder fact by)
  "Return (FILE FACT OLD NEW): FACT added to the memory of SCOPE (FOLDER's).
FACT comes back cleaned (`lispm-memory--clean'); OLD is FILE's text
now, nil if there is none, and NEW the text with FACT's heading added,
BY (if non-nil) naming who remembered it.  Nothing is written; a
memory that would grow past `lispm-memory-file-limit' is an error."
  (let* ((fact (lispm-memory--clean fact))
         (file (lispm-memory-file scope folder))
         (old (lispm-edit-file-text file))
         (base (or old (lispm-memory--header scope folder)))
         (entry (format "* %s\n:PROPERTIES:\n:CREATED:  %s\n%s:END:\n" fact
                        (let ((system-time-locale "C"))
                          (format-time-string "[%Y-%m-%d %a %H:%M]"))
                        (if by (format ":BY:       %s\n" by) "")))
         (new (concat base (if (or (string-empty-p base) (string-suffix-p "\n" base)) "" "\n")
                      entry)))
    (when (> (length new) lispm-memory-file-limit)
      (lispm-signal 'lispm-tool-error (list file)
                    "remember: %s would grow past %d characters \
\(`lispm-memory-file-limit'); ask the user to prune it (M-x lispm-memory-visit)"
                    (abbreviate-file-name file) lispm-memory-file-limit))
    (list file fact old new)))

(defun lispm-memory-add (scope folder fact &optional by)
  "Add FACT to the memory of SCOPE, `user' or FOLDER's `project'; return the file.
BY, if given, names who remembered it.  FACT is made one line, its
known secrets withheld (see `lispm-memory--clean'); the file is written
whole, through its buffer if one visits it, and its commit queued."
  (let* ((file (lispm-memory-file scope folder))
         (buffer (find-buffer-visiting file)))
    ;; A buffer behind the disk, with nothing of the user's: take the disk's.
    (when (and buffer (not (buffer-modified-p buffer)) (file-exists-p file)
               (not (verify-visited-file-modtime buffer)))
      (with-current-buffer buffer (revert-buffer t t t)))
    (pcase-let ((`(,file ,fact ,_old ,new) (lispm-memory--plan scope folder fact by)))
      (with-file-modes #o700 (make-directory (file-name-directory file) t))
      (lispm-memory--write file new)
      (lispm-memory--commit file (format "%s remembers: %s" (or by "LispM")
                                         (truncate-string-to-width fact 72 nil nil "...")))
      file)))

(defun lispm-memory--scope (scope)
  "Return SCOPE, a `remember' call's argument, as `user' or `project'."
  (pcase scope
    ((or 'nil "" "project") 'project)
    ("user" 'user)
    (_ (lispm-signal 'lispm-tool-bad-args (list scope)
                     "remember: scope must be user or project, not %S" scope))))

(lispm-define-tool remember (agent (fact string "The fact, one line: The user's name is Ada.")
                                   &optional
                                   (scope string "user, or project (the default)."))
  "Remember FACT in LispM's memory, for later sessions.
Keep facts that will still matter: the user's name and preferences,
the project's conventions and decisions.  SCOPE `user' is for facts
about the user, `project' (the default) for the project.  Remembered
facts come in your system prompt, in every session."
  :kind 'remember
  ;; LispM's own file, not the agent's: no :files for path rules; the
  ;; approval, if the user's policy asks, shows the change.
  :target (pcase-let ((`(,file ,_fact ,old ,new)
                       (lispm-memory--plan (lispm-memory--scope scope) (lispm-actor-folder agent)
                                           fact (lispm-actor-name agent))))
            (list :files nil
                  :diff (lispm-edit-diff (or old "") new
                                         (file-relative-name
                                          file (expand-file-name lispm-sessions-directory)))))
  (let* ((scope (lispm-memory--scope scope))
         (file (lispm-memory-add scope (lispm-actor-folder agent) fact (lispm-actor-name agent))))
    (format "Remembered in %s's memory (%s)." (if (eq scope 'user) "the user" "the project")
            (file-relative-name file (lispm-memory-directory)))))

;;; The user's view

(defun lispm-memory--commit-saved ()
  "Queue a commit of the memory file the current buffer just saved."
  (lispm-memory--commit buffer-file-name "The user edited the memory"))

(defun lispm-memory--setup-buffer ()
  "Make a save of the current buffer, a memory file's, a commit."
  (add-hook 'after-save-hook #'lispm-memory--commit-saved nil t))

;;;###autoload
(defun lispm-memory-visit (&optional user)
  "Visit the memory of the current project; with USER (\\[universal-argument]), the user's.
The file is Org; each top-level heading is one fact the own agent
remembers.  Saving it commits it in the sessions repository."
  (interactive "P")
  (let* ((scope (if user 'user 'project))
         (file (lispm-memory-file scope default-directory))
         (new (not (file-exists-p file)))
         (header (and new (lispm-memory--header scope default-directory))))
    (with-file-modes #o700 (make-directory (file-name-directory file) t))
    (pop-to-buffer (find-file-noselect file))
    (when (and new (= (buffer-size) 0))
      (insert header)
      (set-buffer-modified-p nil))
    (lispm-memory--setup-buffer)
    (current-buffer)))

(provide 'lispm-memory)
;;; lispm-memory.el ends here
