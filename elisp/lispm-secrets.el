;;; lispm-secrets.el --- What no tool shows an agent: keys, passwords, tokens  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Agents read the user's files, buffers and Emacs's state through
;; LispM's tools, most of them without asking anyone (the kinds `read'
;; and `introspect').  No secret may reach an agent that way: not an
;; API key in the environment, not a password auth-source has read, not
;; the tokens of LispM's own servers.  This file knows what the secrets
;; are and where they live; the tools ask it.
;;
;; Files.  `lispm-secrets-file-p' says whether a file holds keys or
;; tokens: those of `lispm-secrets-files' (~/.authinfo, ~/.netrc,
;; ~/.ssh/, ~/.gnupg/, ...), any whose name matches
;; `lispm-secrets-file-name-regexp', auth-source's files
;; (`auth-sources'), LispM's runtime directory (the agents' tokens, and
;; the model keys on their way to the sidecar) and the ledger.  The
;; tools refuse them, whatever the agent's folder (lispm-tools.el).
;;
;; Strings.  `lispm-secrets-known' lists the secrets this Emacs holds,
;; each with where it comes from: the values of the environment's
;; variables whose names say they hold one (`lispm-secrets-name-p':
;; ANTHROPIC_API_KEY, GITHUB_TOKEN, ...), in the global environment,
;; the initial one and any buffer's own; the passwords auth-source has
;; read and cached; the keys `lispm-models' names; the tokens in LispM's
;; runtime directory and in Claude Code's IDE lock files; and what the
;; files of keys hold (~/.authinfo, ~/.netrc, ...), read or not.
;; `lispm-secrets-redact' withholds every one of them from a text:
;; every tool's result passes through it (`lispm-tools-run'), and so
;; does every buffer's text the agents' views are given.
;;
;; Values.  `lispm-secrets-value-problem' looks through a Lisp value
;; before it is shown (variable_value): bounded, without recursion and
;; safe with circular structures, it refuses a value in which a string
;; has a secret's shape (`lispm-secrets-shapes'), is an assignment
;; NAME=VALUE to a secret's name, or sits under a secret's name in a
;; plist, an alist or a hash table.
;;
;; Only what this Emacs already holds is looked at: nothing is asked of
;; auth-source, nothing is decrypted, and no one is prompted.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-policy)

(defvar auth-sources)
(defvar auth-source-netrc-cache)
(defvar password-data)
(defvar lispm-models)

;;; Options

(defgroup lispm-secrets nil
  "The secrets LispM never shows an agent."
  :group 'lispm
  :prefix "lispm-secrets-")

(defcustom lispm-secrets-name-regexp
  (concat "pass\\(?:word\\|wd\\|phrase\\)\\|secret\\|token\\|credential\\|cookie"
          "\\|api[-_]?key\\|access[-_]?key\\|private[-_]?key\\|auth[-_]?\\(?:key\\|token\\)"
          "\\|authorization")
  "Names of things that hold secrets match this regexp, ignoring case.
The things are environment variables (an environment variable whose
name ends in \"key\" also holds one: OPENROUTER_KEY), and the keys of
plists, alists and hash tables: the value under :password is one."
  :type 'regexp)

(defcustom lispm-secrets-min-length 6
  "The fewest characters a string has to count as a secret.
Shorter values of secret names (\"1\", \"false\") would make common
text look secret."
  :type 'natnum)

(defcustom lispm-secrets-files
  '("~/.authinfo" "~/.authinfo.gpg" "~/.netrc" "~/.ssh/" "~/.gnupg/"
    "~/.password-store/" "~/.aws/" "~/.git-credentials" "~/.pgpass"
    "~/.docker/config.json" "~/.config/gh/hosts.yml" "~/.pypirc"
    "~/.claude/.credentials.json" "~/.claude/ide/" "~/.codex/auth.json")
  "Files and directories that hold keys or tokens; no tool reads them.
A name ending in a slash is a directory: everything under it counts.
auth-source's files, LispM's runtime directory and its ledger count
too without being named here (see `lispm-secrets-file-list')."
  :type '(repeat file))

(defcustom lispm-secrets-file-name-regexp
  (concat "\\`\\(?:\\.authinfo\\(?:\\..*\\)?\\|\\.netrc\\|_netrc\\|\\.pgpass"
          "\\|\\.git-credentials\\|id_\\(?:rsa\\|dsa\\|ecdsa\\|ed25519\\)\\(?:_sk\\)?"
          "\\|lispm-key-.*\\)\\'")
  "Files whose names match this regexp hold keys or tokens, in any directory."
  :type 'regexp)

(defcustom lispm-secrets-shapes
  (let ((start "\\(?:\\`\\|[^[:alnum:]_-]\\)"))
    (list (concat start "sk-[[:alnum:]_-]\\{16,\\}")              ; OpenAI, Anthropic
          (concat start "gh[opsur]_[[:alnum:]]\\{20,\\}")         ; GitHub
          (concat start "github_pat_[[:alnum:]_]\\{20,\\}")
          (concat start "glpat-[[:alnum:]_-]\\{20,\\}")           ; GitLab
          (concat start "xox[abprs]-[[:alnum:]-]\\{10,\\}")       ; Slack
          (concat start "AKIA[0-9A-Z]\\{16\\}")                   ; AWS
          (concat start "AIza[[:alnum:]_-]\\{35\\}")              ; Google
          (concat start "hf_[[:alnum:]]\\{30,\\}")                ; Hugging Face
          "-----BEGIN [A-Z ]*PRIVATE KEY-----"
          "\\_<Bearer[ \t]+[[:alnum:]._~+/=-]\\{16,\\}"
          "eyJ[[:alnum:]_-]\\{10,\\}\\.eyJ[[:alnum:]_-]\\{10,\\}\\."))  ; a JWT
  "Regexps that match strings shaped like API keys, tokens or private keys.
A value in which a string matches one is not shown, even if no known
secret is in it."
  :type '(repeat regexp))

(defconst lispm-secrets-walk-limit 200000
  "The most objects `lispm-secrets-value-problem' looks at in one value.")

(defconst lispm-secrets-file-size-limit 65536
  "The largest file, in bytes, whose tokens `lispm-secrets-known' reads.")

;;; Names

(defun lispm-secrets-name-p (name &optional environment)
  "Return non-nil if NAME, a string or symbol, names a secret.
With ENVIRONMENT, NAME is an environment variable's: one whose name
ends in \"key\" counts too."
  (let ((name (if (symbolp name) (symbol-name name) name))
        (case-fold-search t))
    (and (stringp name)
         (or (string-match-p lispm-secrets-name-regexp name)
             (and environment (string-match-p "key\\'" name))))))

(defun lispm-secrets--candidate-p (value &optional file-names)
  "Return non-nil if VALUE, a string, may be a secret.
It must be long enough (`lispm-secrets-min-length') and not a number;
unless FILE-NAMES, not a file's name either: an environment variable
such as PASSWORD_STORE_DIR names where secrets are, and is none."
  (and (stringp value)
       (>= (length value) lispm-secrets-min-length)
       (not (string-match-p "\\`[0-9.:]+\\'" value))
       (or file-names (not (string-match-p "\\`[/~]" value)))))

(defun lispm-secrets-shape (string)
  "Return non-nil if a part of STRING is shaped like a key or a token.
See `lispm-secrets-shapes'."
  (let ((case-fold-search nil))
    (string-match-p (mapconcat #'identity lispm-secrets-shapes "\\|") string)))

;;; Files

(defun lispm-secrets--runtime-directories ()
  "Return the directories where LispM's sidecar may keep its tokens.
As python/lispm_sidecar/runtime.py chooses: `LISPM_RUNTIME_DIR', else
`$XDG_RUNTIME_DIR/lispm', else /tmp/lispm-UID; and the one the running
sidecar named."
  (delete-dups
   (delq nil (list (plist-get (lispm-sidecar-info) :runtime_dir)
                   (getenv "LISPM_RUNTIME_DIR")
                   (when-let* ((xdg (getenv "XDG_RUNTIME_DIR")))
                     (expand-file-name "lispm" xdg))
                   (format "/tmp/lispm-%d" (user-uid))))))

(defun lispm-secrets--claude-directories ()
  "Return the directories of Claude Code's configuration, which hold its tokens."
  (delete-dups (delq nil (list (getenv "CLAUDE_CONFIG_DIR") "~/.claude"))))

(defun lispm-secrets--auth-source-files ()
  "Return the files `auth-sources' names."
  (and (boundp 'auth-sources) (listp auth-sources)
       (delq nil (mapcar (lambda (source)
                           (cond ((stringp source) source)
                                 ((stringp (plist-get source :source))
                                  (plist-get source :source))))
                         auth-sources))))

(defun lispm-secrets--ledger-files ()
  "Return the ledger's files: its database, and the database's journals."
  (when-let* ((ledger (or (plist-get (lispm-sidecar-info) :ledger_file)
                          lispm-ledger-file)))
    (mapcar (lambda (suffix) (concat ledger suffix)) '("" "-wal" "-shm" "-journal"))))

(defun lispm-secrets-file-list ()
  "Return the files and directories that no tool may read, as truenames.
A directory's name ends in a slash.  They are `lispm-secrets-files',
auth-source's files, LispM's runtime directories, the ledger's files,
and Claude Code's IDE lock files."
  (let ((file-name-handler-alist nil))
    (delete-dups
     (mapcar (lambda (file)
               (let ((true (file-truename (expand-file-name file))))
                 (if (or (directory-name-p file) (file-directory-p true))
                     (file-name-as-directory true)
                   true)))
             (append lispm-secrets-files
                     (lispm-secrets--auth-source-files)
                     (mapcar #'file-name-as-directory (lispm-secrets--runtime-directories))
                     (lispm-secrets--ledger-files)
                     (mapcar (lambda (dir) (file-name-as-directory (expand-file-name "ide" dir)))
                             (lispm-secrets--claude-directories)))))))

(defun lispm-secrets-file-p (file &optional list)
  "Return why FILE is a file of keys or tokens, a string; or nil.
FILE is an absolute file name, best a truename.  LIST is what
`lispm-secrets-file-list' returns, computed once for many files."
  (let* ((file-name-handler-alist nil)
         (case-fold-search nil)
         (file (directory-file-name (expand-file-name file)))
         (as-directory (file-name-as-directory file))
         (secret (cl-find-if (lambda (secret)
                               (if (directory-name-p secret)
                                   (string-prefix-p secret as-directory)
                                 (equal secret file)))
                             (or list (lispm-secrets-file-list)))))
    (cond ((member secret (list file as-directory))
           (format "%s is a %s of keys or tokens" (abbreviate-file-name file)
                   (if (equal secret file) "file" "directory")))
          (secret
           (format "%s is in %s, which holds keys or tokens"
                   (abbreviate-file-name file) (abbreviate-file-name secret)))
          ((string-match-p lispm-secrets-file-name-regexp (file-name-nondirectory file))
           (format "%s is a file of keys or tokens, by its name"
                   (abbreviate-file-name file))))))

;;; Walking values

(defun lispm-secrets--function-object-p (object)
  "Return non-nil if OBJECT is a function object (a closure), not a symbol."
  (or (byte-code-function-p object)
      (and (fboundp 'interpreted-function-p)
           (funcall 'interpreted-function-p object))
      (eq (car-safe object) 'closure)))

(defun lispm-secrets-walk (value function &optional limit)
  "Call FUNCTION on VALUE and on every object in it, until one is non-nil.
Return FUNCTION's first non-nil value; nil if it returned none; the
symbol `too-big' if VALUE holds more than LIMIT objects (default
`lispm-secrets-walk-limit').  Conses, vectors, records, closures and
hash tables (keys and values) are looked into; each object once, so
circular values end.  No recursion: any depth is fine."
  (let ((stack (list value))
        (seen (make-hash-table :test #'eq))
        (count 0)
        (limit (or limit lispm-secrets-walk-limit))
        found)
    (while (and stack (not found))
      (let ((object (pop stack)))
        (unless (or (null object) (symbolp object) (numberp object)
                    (gethash object seen))
          (puthash object t seen)
          (if (> (cl-incf count) limit)
              (setq found 'too-big)
            (setq found (funcall function object))
            (unless found
              (cond ((consp object)
                     (push (cdr object) stack)
                     (push (car object) stack))
                    ((hash-table-p object)
                     (maphash (lambda (key val) (push val stack) (push key stack)) object))
                    ((or (vectorp object) (recordp object)
                         (lispm-secrets--function-object-p object))
                     (let ((length (condition-case nil (length object) (error 0))))
                       (dotimes (i length)
                         (push (aref object (- length i 1)) stack))))))))))
    found))

(defun lispm-secrets--pairs (object function)
  "Call FUNCTION with KEY and VALUE of the pairs of OBJECT, until one is non-nil.
A cons (KEY . VALUE) is a pair, and so is a list (KEY VALUE ...) if
KEY is a symbol (in a list of strings, one string is no other's key);
a hash table's entries are its pairs.  Return FUNCTION's first
non-nil value."
  (cond ((consp object)
         (or (funcall function (car object) (cdr object))
             (and (consp (cdr object)) (symbolp (car object))
                  (funcall function (car object) (cadr object)))))
        ((hash-table-p object)
         (catch 'found
           (maphash (lambda (key val)
                      (when-let* ((found (funcall function key val)))
                        (throw 'found found)))
                    object)
           nil))))

(defun lispm-secrets--key-name (key)
  "Return KEY's name if KEY, a symbol or a name's string, names a secret.
Else nil.  A function's name is no key: (lispm-secrets-refuse ...) is
code."
  (and (or (and key (symbolp key) (or (keywordp key) (not (fboundp key))))
           (and (stringp key) (string-match-p "\\`[[:alnum:]_:.-]\\{1,64\\}\\'" key)))
       (lispm-secrets-name-p key)
       (if (symbolp key) (symbol-name key) key)))

;;; Known secrets

(defun lispm-secrets--assignments (string)
  "Return what STRING assigns to secrets' names: (VALUE . NAME) for each.
An assignment is NAME=VALUE, as in an environment, a shell command or
a URL's query; NAME must name a secret (`lispm-secrets-name-p', as an
environment variable)."
  (let ((start (if (string-search "=" string) 0 (length string))) found)
    (while (string-match
            "\\(?:\\`\\|[^[:alnum:]_]\\)\\([[:alpha:]_][[:alnum:]_]*\\)=\\(\"[^\"\n]*\"\\|'[^'\n]*'\\|[^ \t\n\"'&;]+\\)"
            string start)
      (setq start (match-end 0))
      (let ((name (match-string 1 string))
            (value (string-trim (match-string 2 string) "[\"']" "[\"']")))
        (when (and (lispm-secrets-name-p name t) (lispm-secrets--candidate-p value))
          (push (cons value name) found))))
    (nreverse found)))

(defvar lispm-secrets--environment-cache nil
  "The environments last scanned, and their secrets: (ENVIRONMENTS . FOUND).
ENVIRONMENTS is a copy.  Every tool's result is checked against the
secrets; the environments seldom change, and comparing them costs far
less than matching each name again.")

(defun lispm-secrets--environment ()
  "Return the secrets of the environments: (VALUE . WHERE) for each.
Those are the values of the variables whose names say they hold
secrets, in `process-environment' (global, and every buffer's own)
and `initial-environment'."
  (let ((environments (append (list initial-environment
                                    (default-value 'process-environment)
                                    process-environment)
                              (cl-loop for buffer in (buffer-list)
                                       when (local-variable-p 'process-environment buffer)
                                       collect (buffer-local-value
                                                'process-environment buffer))))
        found)
    (if (equal environments (car lispm-secrets--environment-cache))
        (cdr lispm-secrets--environment-cache)
      (dolist (environment environments)
        (dolist (entry environment)
          (when (and (stringp entry) (string-match "\\`\\([^=]+\\)=\\(.*\\)\\'" entry))
            (let ((name (match-string 1 entry)) (value (match-string 2 entry)))
              (when (and (lispm-secrets-name-p name t) (lispm-secrets--candidate-p value))
                (push (cons value (format "the environment variable %s" name)) found))))))
      ;; A copy: `setenv' changes the lists in place.
      (setq lispm-secrets--environment-cache (cons (copy-tree environments) found))
      found)))

(defvar lispm-secrets--closure-secrets (make-hash-table :test #'eq :weakness 'key)
  "The secrets `lispm-secrets--closure-secret' found, by closure.
Undoing auth-source's obfuscation decrypts; once per closure is enough.")

(defun lispm-secrets--closure-secret (function)
  "Return the secret in the closure FUNCTION, or nil; without asking anyone.
FUNCTION is what auth-source puts under `:secret'.  It is called only
if all it does is undo auth-source's obfuscation; a closure that only
returns what it captured gives that without being called."
  (cond
   ((byte-code-function-p function)
    (let ((constants (append (aref function 2) nil)))
      (cond ((memq 'auth-source--deobfuscate constants)
             (with-memoization (gethash function lispm-secrets--closure-secrets)
               (let ((secret (ignore-errors
                               (let ((inhibit-interaction t)) (funcall function)))))
                 (and (stringp secret) secret))))
            ((cl-every (lambda (c) (or (stringp c) (null c))) constants)
             (cl-find-if #'stringp constants)))))
   ((lispm-secrets--function-object-p function)
    ;; Emacs 30's interpreted closure is an object of ARGS BODY ENV;
    ;; Emacs 29's the list (closure ENV ARGS . BODY).
    (let* ((env (if (consp function) (nth 1 function) (aref function 2)))
           (body (if (consp function) (nthcdr 3 function) (aref function 1))))
      (and (proper-list-p body) (= (length body) 1) (symbolp (car body)) (listp env)
           (let ((value (cdr-safe (assq (car body) env))))
             (and (stringp value) value)))))))

(defun lispm-secrets-in-text (text where &optional token)
  "Return the secrets written in TEXT, a file's or a cache's: (VALUE . WHERE) each.
They are the passwords of netrc lines (\"password VALUE\"), assignments
to secret names (NAME=VALUE, NAME = VALUE, NAME: VALUE, \"NAME\":
\"VALUE\"), the passwords of URLs (https://USER:VALUE@HOST), bearer
tokens, and the lines of private keys.  With TOKEN, TEXT is a token
file's, and its one word of at least 16 characters is a secret too."
  (let ((found nil) (case-fold-search t)
        (trimmed (string-trim text)))
    (when (and token (string-match-p "\\`[^ \t\n]\\{16,\\}\\'" trimmed))
      (push trimmed found))
    (pcase-dolist (`(,regexp . ,name-group)
                   '(("\\_<\\(?:password\\|passwd\\|secret\\)[ \t]+\\(\"[^\"\n]*\"\\|[^ \t\n]+\\)")
                     ("\"\\([^\"\n]+\\)\"[ \t]*:[ \t]*\\(\"[^\"\n]+\"\\)" . 1)
                     ("^[ \t]*\\(?:export[ \t]+\\)?\\([[:alnum:]_.-]+\\)[ \t]*[=:][ \t]*\\(.*?\\)[ \t\r]*$" . 1)
                     ("://[^:/@ \t\n]+:\\([^@/ \t\n]+\\)@")
                     ("\\_<Bearer[ \t]+\\([[:alnum:]._~+/=-]+\\)")))
      (let ((start 0))
        (while (string-match regexp text start)
          (setq start (match-end 0))
          (when (or (null name-group)
                    (lispm-secrets-name-p (match-string name-group text) t))
            (push (string-trim (match-string (if name-group 2 1) text) "[\"']" "[\"']")
                  found)))))
    (let ((start 0))
      (while (string-match "-----BEGIN [A-Z ]*PRIVATE KEY-----\n\\(\\(?:.*\n\\)*?\\)-----END"
                           text start)
        (setq found (append (split-string (match-string 1 text) "\n" t "[ \t\r]+") found))
        (setq start (match-end 0))))
    (cl-loop for value in (append (mapcar #'car (lispm-secrets--assignments text)) found)
             when (lispm-secrets--candidate-p value t)
             collect (cons value where))))

(defun lispm-secrets--cached (cache function)
  "Call FUNCTION on each secret in CACHE under a key that names a secret.
A secret is a string there, or what the closure there returns
\(`lispm-secrets--closure-secret')."
  (lispm-secrets-walk
   cache
   (lambda (object)
     (lispm-secrets--pairs
      object
      (lambda (key value)
        (when-let* (((lispm-secrets--key-name key))
                    (secret (cond ((stringp value) value)
                                  ((lispm-secrets--function-object-p value)
                                   (lispm-secrets--closure-secret value)))))
          (funcall function secret))
        nil)))))

(defun lispm-secrets--auth-source ()
  "Return the secrets auth-source has read and cached: (VALUE . WHERE) each.
They are in the password cache (`password-data'), where auth-source
keeps its results, and in its cache of the netrc files it read
\(`auth-source-netrc-cache')."
  (let (found)
    (when (and (boundp 'password-data) (hash-table-p password-data))
      (maphash (lambda (key value)
                 (when (stringp value)
                   (push (cons value (format "the password cached for %s" key)) found)))
               password-data)
      (lispm-secrets--cached
       password-data
       (lambda (secret)
         (when (lispm-secrets--candidate-p secret t)
           (push (cons secret "a password auth-source has read") found)))))
    (when (boundp 'auth-source-netrc-cache)
      (lispm-secrets--cached
       auth-source-netrc-cache
       (lambda (text)
         (setq found (append (lispm-secrets-in-text
                              text "a password auth-source has read")
                             found)))))
    found))

(defun lispm-secrets--models ()
  "Return the keys in `lispm-models', written or named: (VALUE . WHERE) each.
A `:key' that is not a host's name is a key written there; (:env
VARIABLE) names an environment variable whose value is one."
  (when (boundp 'lispm-models)
    (cl-loop for (name . properties) in (and (listp lispm-models) lispm-models)
             for key = (and (listp properties) (plist-get properties :key))
             for value = (pcase key
                           ;; A host is short, or has dots; a key is neither.
                           ((pred stringp)
                            (and (or (lispm-secrets-shape key)
                                     (not (or (< (length key) 20) (string-search "." key))))
                                 key))
                           (`(:env ,(and (pred stringp) variable)) (getenv variable)))
             when (lispm-secrets--candidate-p value)
             collect (cons value (format "the key of the model %s" name)))))

(defun lispm-secrets--file-secrets (file token)
  "Return the secrets written in FILE: (VALUE . WHERE) each.
Only a small regular text file is read, never a database; TOKEN as for
`lispm-secrets-in-text'."
  (let ((file-name-handler-alist nil)
        ;; Reading decodes; the caller's idea of what was decoded last stays.
        (last-coding-system-used last-coding-system-used)
        (size (file-attribute-size (file-attributes file))))
    (when (and size (<= size lispm-secrets-file-size-limit)
               (file-regular-p file) (file-readable-p file)
               (not (string-match-p "\\.sqlite3?\\(?:-\\|\\'\\)" file)))
      (with-temp-buffer
        (when (and (ignore-errors (lispm-insert-file-text file) t)
                   (not (eq (coding-system-base last-coding-system-used) 'no-conversion)))
          (lispm-secrets-in-text (buffer-string)
                                 (format "%s %s" (if token "the token file" "the file")
                                         (abbreviate-file-name file))
                                 token))))))

(defun lispm-secrets--files ()
  "Return the secrets in files: (VALUE . WHERE) each.
They are the tokens in LispM's runtime directories (but for the
launchers in bin/) and in Claude Code's lock files, and what the files
of `lispm-secrets-files' (not its directories) and of `auth-sources'
hold: a password there is withheld before auth-source has read it."
  (let ((file-name-handler-alist nil) found)
    (dolist (directory (append (lispm-secrets--runtime-directories)
                               (mapcar (lambda (dir) (expand-file-name "ide" dir))
                                       (lispm-secrets--claude-directories))))
      (when (file-directory-p directory)
        (dolist (file (ignore-errors
                        (directory-files-recursively
                         directory "" nil
                         (lambda (dir) (not (equal (file-name-nondirectory dir) "bin"))))))
          (setq found (append (lispm-secrets--file-secrets file t) found)))))
    (dolist (file (append (lispm-secrets--auth-source-files)
                          (cl-remove-if #'directory-name-p lispm-secrets-files)))
      (setq found (append (lispm-secrets--file-secrets (expand-file-name file) nil) found)))
    found))

(defun lispm-secrets-known ()
  "Return the secrets this Emacs knows of: a list of (VALUE . WHERE).
VALUE is the secret, or the secret as Lisp prints it when that
differs (its quotes and backslashes escaped); WHERE says where it
comes from, for the one who is refused it (never the secret itself).
Longest first, each once.  See the Commentary for where they are
found."
  (let ((seen (make-hash-table :test #'equal)) known)
    (dolist (secret (append (lispm-secrets--environment)
                            (lispm-secrets--models)
                            (lispm-secrets--auth-source)
                            (lispm-secrets--files)))
      (dolist (form (lispm-secrets--forms (car secret)))
        (unless (gethash form seen)
          (puthash form t seen)
          (push (cons form (cdr secret)) known))))
    (sort known (lambda (a b) (> (length (car a)) (length (car b)))))))

;;; Texts

(defun lispm-secrets--forms (secret)
  "Return the ways SECRET may be written in a text: itself, and as printed."
  (delete-dups
   (delq nil (list secret
                   (substring (prin1-to-string secret) 1 -1)
                   (let ((print-escape-newlines t))
                     (substring (prin1-to-string secret) 1 -1))))))

(cl-defun lispm-secrets-find (text &optional (known (lispm-secrets-known)))
  "Return the first known secret in TEXT, as (VALUE . WHERE), or nil.
KNOWN is what `lispm-secrets-known' returns, the default."
  (and (stringp text)
       (cl-find-if (lambda (secret) (string-search (car secret) text))
                   known)))

(cl-defun lispm-secrets-redact-window (text start end &optional (known (lispm-secrets-known)))
  "Return TEXT from START to END with each known secret there withheld.
Each is replaced by \"[secret withheld: WHERE]\", WHERE saying whose it
is.  A secret the window's edges cut is withheld too, the part of it
inside: a text read in windows never gives a secret away piece by
piece.  KNOWN is what `lispm-secrets-known' returns, the default."
  (let ((cuts nil))
    (dolist (secret known)
      (let* ((value (car secret))
             (from (max 0 (- start (length value) -1)))
             (at nil))
        (while (and (setq at (string-search value text from)) (< at end))
          (when (> (+ at (length value)) start)
            (push (list (max at start) (min (+ at (length value)) end) (cdr secret)) cuts))
          (setq from (1+ at)))))
    (let ((pieces nil) (point start))
      (pcase-dolist (`(,from ,to ,where) (sort cuts (lambda (a b) (< (car a) (car b)))))
        (cond ((<= to point))
              ((< from point) (setq point to))
              (t (push (substring text point from) pieces)
                 (push (format "[secret withheld: %s]" where) pieces)
                 (setq point to))))
      (apply #'concat (nreverse (cons (substring text point end) pieces))))))

(cl-defun lispm-secrets-redact (text &optional (known (lispm-secrets-known)))
  "Return TEXT with each known secret in it withheld.
As `lispm-secrets-redact-window' does, for the whole of TEXT.  KNOWN
is what `lispm-secrets-known' returns, the default.  TEXT is returned
unchanged (`eq') if no secret is in it, or if it is not a string."
  (if (and (stringp text) (lispm-secrets-find text known))
      (lispm-secrets-redact-window text 0 (length text) known)
    text))

;;; Values

(defun lispm-secrets--string-problem (string known)
  "Return why STRING must not be shown, or nil; KNOWN as `lispm-secrets-known'."
  (if-let* ((secret (lispm-secrets-find string known)))
      (format "it holds a secret (%s)" (cdr secret))
    (cond ((lispm-secrets-shape string)
           "a string in it is shaped like an API key, a token or a private key")
          ((lispm-secrets--assignments string)
           (format "a string in it sets %s"
                   (cdr (car (lispm-secrets--assignments string))))))))

(cl-defun lispm-secrets-value-problem (value &optional (known (lispm-secrets-known)))
  "Return why VALUE must not be shown, a string, or nil if it may be.
It may not if a string in it is or holds a known secret (KNOWN, by
default `lispm-secrets-known'), has a secret's shape
\(`lispm-secrets-shapes'), or assigns one (NAME=VALUE, NAME a
secret's name); if a string or a closure in it is under a key that
names a secret (:password \"...\", (token . \"...\")); or if it is too
big to look through (`lispm-secrets-walk-limit' objects)."
  (let ((problem
          (lispm-secrets-walk
           value
           (lambda (object)
             (or (and (stringp object) (lispm-secrets--string-problem object known))
                 (lispm-secrets--pairs
                  object
                  (lambda (key val)
                    (when-let* ((name (lispm-secrets--key-name key)))
                      (when (or (lispm-secrets--candidate-p val)
                                (lispm-secrets--function-object-p val))
                        (format "it holds a %s under the key %s"
                                (if (stringp val) "string" "closure") name))))))))))
    (if (eq problem 'too-big)
        (format "it is too big to be looked through for secrets (more than %d objects)"
                lispm-secrets-walk-limit)
      problem)))

;;; Refusing

(defun lispm-secrets-refuse (what kind reason)
  "Signal `lispm-policy-denied': WHAT, an action of KIND, is refused for REASON.
The message reads \"WHAT refused: REASON\"; the agent reads it."
  (signal 'lispm-policy-denied (list (format "%s refused: %s" what reason) kind 'policy reason)))

(provide 'lispm-secrets)
;;; lispm-secrets.el ends here
