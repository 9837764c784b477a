;;; lispm-introspect.el --- Tools that read Emacs itself: documentation, source, Info  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, help

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Emacs documents itself.  These tools give an agent cheap reads of
;; it, each capped at `lispm-introspect-text-limit' characters:
;;
;;   apropos(pattern)             symbols whose names match, with the
;;                                first line of their documentation
;;   describe_function(name)      a function's arglist and documentation
;;   describe_variable(name)      a variable's documentation (not its value)
;;   function_source(name)        the file and text of its definition
;;   info_node(node)              an Info node's text: "(elisp) Undo",
;;                                from the manuals Info finds by name
;;   variable_value(name)         a variable's value, printed with caps
;;
;; All but the last are of the kind `introspect', which the default
;; role allows.  A value is Emacs's state, so `variable_value' is a
;; `read', which the policy decides; the default role allows it too.
;; None of them leaves a buffer behind, and none shows a secret: what
;; they return passes through `lispm-secrets-redact' (`lispm-tools-run'),
;; info_node reads no file but an installed manual, and function_source
;; no file of keys (`lispm-secrets-file-p').
;;
;; Which values variable_value shows: a deny-list, checked on the value.
;; An allow-list of variables cannot be made safe: whether a value holds
;; a secret depends on the value, not on the variable's name or kind
;; (`process-environment' is documented, `lispm-models' is an option,
;; and either may hold a key), and one short enough to trust would not
;; show an agent the state it needs.  So a value is refused, as
;; `lispm-policy-denied' and before anyone is asked, if
;;
;;   - the variable's name looks like a secret's
;;     (`lispm-introspect-secret-regexp'), or it is, or is an alias of,
;;     one of `lispm-introspect-secret-variables': the environments,
;;     auth-source's caches, the kill ring, `lispm-models', ...;
;;   - or the value, looked through whole (`lispm-secrets-value-problem':
;;     bounded, circular-safe), holds a secret Emacs knows of (an
;;     environment variable's key, a password auth-source read, LispM's
;;     tokens: `lispm-secrets-known'), a string shaped like a key, an
;;     assignment to a secret's name (FOO_TOKEN=...), or a string under a
;;     secret's name (:password "...");
;;   - or its printed text does.
;;
;; Only the global value is shown, never a buffer's own.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'help-fns)
(require 'find-func)
(require 'lispm-base)
(require 'lispm-policy)
(require 'lispm-tools)
(require 'lispm-secrets)

(declare-function Info-find-node "info" (filename nodename &optional no-going-back strict-case))
(declare-function Info-mode "info" ())
(defvar Info-current-file)

;;; Options

(defcustom lispm-introspect-text-limit 20000
  "The most characters an introspection tool returns; the rest is cut, with a note."
  :type 'integer
  :group 'lispm-tools)

(defcustom lispm-introspect-apropos-limit 60
  "The most symbols `apropos' lists."
  :type 'integer
  :group 'lispm-tools)

(defconst lispm-introspect-secret-regexp
  "password\\|passwd\\|passphrase\\|token\\|secret\\|key\\|auth\\|credential\\|cookie"
  "Variables whose names match this, ignoring case, have their values refused.")

(defcustom lispm-introspect-secret-variables
  '((process-environment . "the environment, where API keys and tokens are")
    (initial-environment . "the environment Emacs started with, where API keys and tokens are")
    (password-data . "the password cache, where auth-source keeps what it found")
    (auth-source-netrc-cache . "auth-source's cache of the netrc files it read")
    (auth-source--session-nonce . "the key to auth-source's cached secrets")
    (lispm-models . "where the models' keys come from, or the keys")
    (url-cookie-storage . "cookies, which log in")
    (url-cookie-secure-storage . "cookies, which log in")
    (url-request-extra-headers . "HTTP headers, which may carry a key")
    (kill-ring . "text the user copied, keys and passwords included")
    (kill-ring-yank-pointer . "text the user copied, keys and passwords included")
    (register-alist . "the registers, with text the user copied"))
  "Variables whose values `variable_value' never shows, each with what it holds.
What it holds is the reason the agent is given.  An alias of one of
them is refused too.  Whatever the variable, a value that holds a
secret is refused anyway (`lispm-secrets-value-problem'); these are
the variables that hold secrets by nature."
  :type '(alist :key-type variable :value-type string)
  :group 'lispm-tools)

;;; Helpers

(defun lispm-introspect--cap (text)
  "Return TEXT cut to `lispm-introspect-text-limit' characters, with a note.
A secret the cut halves is withheld, its part that would be shown
\(`lispm-secrets-redact-window')."
  (if (<= (length text) lispm-introspect-text-limit)
      text
    (format "%s\n[%d characters cut: %d shown]"
            (lispm-secrets-redact-window text 0 lispm-introspect-text-limit)
            (- (length text) lispm-introspect-text-limit)
            lispm-introspect-text-limit)))

(defun lispm-introspect--symbol (name what)
  "Return the symbol NAME names, or signal a `lispm-tool-error'.
WHAT is a predicate it must satisfy, such as `fboundp'."
  (let ((symbol (and (stringp name) (intern-soft (string-trim name)))))
    (unless (and symbol (funcall what symbol))
      (lispm-signal 'lispm-tool-error (list name)
                    "No %s named %s; apropos finds names"
                    (if (eq what #'fboundp) "function" "variable")
                    name))
    symbol))

(defun lispm-introspect--first-line (doc)
  "Return the first line of the docstring DOC, or \"\" if there is none."
  (if (stringp doc) (car (split-string doc "\n")) ""))

;;; The tools

(lispm-define-tool apropos ((pattern string "A regexp, or words, that symbol names must match."))
  "List Emacs Lisp functions and variables whose names match a pattern.
Each with its kind and the first line of its documentation; at most
`lispm-introspect-apropos-limit' of them."
  :kind 'introspect
  (let* ((regexp (condition-case nil
                     (progn (string-match-p pattern "") pattern)
                   (invalid-regexp (regexp-quote pattern))))
         (symbols (sort (apropos-internal regexp
                                          (lambda (s) (or (fboundp s) (boundp s))))
                        #'string<))
         (shown (seq-take symbols lispm-introspect-apropos-limit))
         (lines (mapcar
                 (lambda (symbol)
                   (format "%s (%s): %s" symbol
                           (cond ((and (fboundp symbol) (boundp symbol)) "function, variable")
                                 ((special-form-p symbol) "special form")
                                 ((macrop symbol) "macro")
                                 ((fboundp symbol)
                                  (if (commandp symbol) "command" "function"))
                                 ((custom-variable-p symbol) "user option")
                                 (t "variable"))
                           (lispm-introspect--first-line
                            (ignore-errors
                              (if (fboundp symbol)
                                  (documentation symbol)
                                (documentation-property symbol 'variable-documentation))))))
                 shown)))
    (cond ((null symbols) (format "No function or variable matches %S." pattern))
          (t (lispm-introspect--cap
              (concat (string-join lines "\n")
                      (if (> (length symbols) (length shown))
                          (format "\n[%d more match; narrow the pattern]"
                                  (- (length symbols) (length shown)))
                        "")))))))

(lispm-define-tool describe-function ((name string "The function's name, such as buffer-substring."))
  "Return an Emacs Lisp function's arglist and documentation."
  :kind 'introspect
  (let* ((symbol (lispm-introspect--symbol name #'fboundp))
         (arglist (help-function-arglist symbol t))
         (file (ignore-errors (find-lisp-object-file-name symbol (symbol-function symbol)))))
    (lispm-introspect--cap
     (format "(%s%s)\n%s%s\n\n%s"
             symbol
             (if (listp arglist)
                 (mapconcat (lambda (arg) (concat " " (upcase (format "%s" arg)))) arglist "")
               " ...")
             (cond ((special-form-p symbol) "A special form")
                   ((macrop symbol) "A macro")
                   ((commandp symbol) "An interactive command")
                   (t "A function"))
             (cond ((eq file 'C-source) ", defined in C.")
                   ((stringp file) (format " in %s." (file-name-nondirectory file)))
                   (t "."))
             (or (ignore-errors (documentation symbol)) "Not documented.")))))

(lispm-define-tool describe-variable ((name string "The variable's name, such as fill-column."))
  "Return an Emacs Lisp variable's documentation (not its value)."
  :kind 'introspect
  (let ((symbol (lispm-introspect--symbol name #'boundp)))
    (lispm-introspect--cap
     (format "%s\n%s\n\n%s"
             symbol
             (concat (if (custom-variable-p symbol) "A user option" "A variable")
                     (if (local-variable-if-set-p symbol) ", buffer-local when set" "")
                     ".")
             (or (ignore-errors (documentation-property symbol 'variable-documentation))
                 "Not documented.")))))

(defun lispm-introspect--definition-text (symbol)
  "Return (FILE . TEXT): where SYMBOL's function is defined, and the definition.
The file is visited only as long as it takes to read it, unless it was
visited already."
  (let* ((before (buffer-list))
         (place (find-function-noselect symbol t))
         (buffer (car place)))
    (unwind-protect
        (with-current-buffer buffer
          (save-excursion
            (save-restriction
              (widen)
              (goto-char (or (cdr place) (point-min)))
              (let ((start (point)))
                (condition-case nil (forward-sexp 1)
                  (scan-error (goto-char (point-max))))
                (cons (or buffer-file-name (buffer-name))
                      (buffer-substring-no-properties start (point)))))))
      (unless (memq buffer before)
        (kill-buffer buffer)))))

(lispm-define-tool function-source ((name string "The function's name."))
  "Return the file an Emacs Lisp function is defined in, and its definition's text."
  :kind 'introspect
  (let* ((symbol (lispm-introspect--symbol name #'fboundp))
         (file (ignore-errors (find-lisp-object-file-name symbol (symbol-function symbol)))))
    (cond
     ((eq file 'C-source)
      (format "%s is defined in Emacs's C source, which has no Lisp definition to show; \
describe_function gives its documentation." symbol))
     ((null file)
      (format "%s has no known source file (it was defined by evaluation)." symbol))
     ((lispm-secrets-file-p file)
      (lispm-secrets-refuse "function_source" 'introspect
                            (format "%s, and LispM never shows such a file"
                                    (lispm-secrets-file-p file))))
     (t
      (pcase-let ((`(,where . ,text)
                   (condition-case err
                       (lispm-introspect--definition-text symbol)
                     (error (lispm-signal 'lispm-tool-error (list name)
                                          "Cannot find the definition of %s in %s: %s"
                                          symbol file (error-message-string err))))))
        (lispm-introspect--cap (format ";; %s\n%s" (abbreviate-file-name where) text)))))))

(defun lispm-introspect--parse-node (node)
  "Return (FILE . NODE-NAME) of NODE, \"(FILE) NODE-NAME\" or \"(FILE)\".
FILE must name a manual, not a file: a name with a directory in it
\(\"(~/.authinfo) *\" would show that file whole) is refused."
  (unless (string-match "\\`[ \t]*(\\([^)]+\\))[ \t]*\\(.*?\\)[ \t]*\\'" node)
    (lispm-signal 'lispm-tool-bad-args (list node)
                  "info_node: %S is not an Info node such as \"(elisp) Change Groups\"" node))
  (let ((file (match-string 1 node))
        (name (match-string 2 node)))
    (when (string-match-p "[/\\~]\\|\\`\\.\\|\\`[[:alpha:]]:" file)
      (lispm-secrets-refuse
       "info_node" 'introspect
       (format "%s is a file's name; info_node reads only the manuals installed in \
this Emacs, by name, such as (elisp)" file)))
    (cons file (if (string-empty-p name) "Top" name))))

(lispm-define-tool info-node ((node string "The node, such as \"(elisp) Change Groups\"."))
  "Return the text of an Info node, from the manuals installed in this Emacs."
  :kind 'introspect
  :target (progn (lispm-introspect--parse-node node) nil)
  (require 'info)
  (pcase-let ((`(,file . ,name) (lispm-introspect--parse-node node)))
    (with-temp-buffer
      (let ((inhibit-interaction t))
        (condition-case err
            (progn
              (Info-mode)
              (Info-find-node file name t))
          (error (lispm-signal 'lispm-tool-error (list node)
                               "No Info node %s: %s" node (error-message-string err)))))
      (when-let* ((why (and (stringp Info-current-file)
                            (lispm-secrets-file-p Info-current-file))))
        (lispm-secrets-refuse "info_node" 'introspect
                              (format "%s, and LispM never shows such a file" why)))
      (lispm-introspect--cap
       (buffer-substring-no-properties (point-min) (point-max))))))

(defun lispm-introspect--refuse-secret (name)
  "Refuse, with `lispm-policy-denied', the variable NAME if it seems a secret."
  (when (let ((case-fold-search t))
          (string-match-p lispm-introspect-secret-regexp name))
    (lispm-secrets-refuse
     "variable_value" 'read
     (format "the name %s looks like a secret's (it matches %s), \
and LispM never shows such values" name
             (string-replace "\\|" ", " lispm-introspect-secret-regexp)))))

(defun lispm-introspect--value-text (name)
  "Return the global value of the variable NAME, printed, unless it is secret.
Refuse it, with `lispm-policy-denied', if it may hold one: see the
Commentary.  Signal `lispm-tool-error' if there is no such variable."
  (lispm-introspect--refuse-secret name)
  (let* ((symbol (lispm-introspect--symbol name #'boundp))
         (target (indirect-variable symbol))
         (refuse (lambda (reason)
                   (lispm-secrets-refuse "variable_value" 'read
                                         (format "the value of %s cannot be shown: %s; \
LispM never shows an agent a secret" symbol reason)))))
    (unless (eq target symbol)
      (lispm-introspect--refuse-secret (symbol-name target)))
    (when-let* ((holds (alist-get target lispm-introspect-secret-variables)))
      (funcall refuse (format "it holds %s" holds)))
    (let* ((known (lispm-secrets-known))
           (value (default-value symbol))
           (text (let ((print-length 50) (print-level 6) (print-escape-newlines t))
                   (prin1-to-string value))))
      (when-let* ((problem (or (lispm-secrets-value-problem value known)
                               (lispm-secrets-value-problem text known))))
        (funcall refuse problem))
      text)))

(lispm-define-tool variable-value ((name string "The variable's name, such as fill-column."))
  "Return an Emacs Lisp variable's global value, printed.
Long lists and deep structures are cut (`print-length', `print-level').
A value that may hold a secret is refused: a variable whose name looks
like a secret's (password, token, key, auth, ...), one that holds the
environment, auth-source's caches or copied text, and any value in
which a key, a password or a token is."
  :kind 'read
  :target (progn (lispm-introspect--value-text name)
                 (list :text (format "the value of the variable %s" name)))
  (lispm-introspect--cap (lispm-introspect--value-text name)))

(provide 'lispm-introspect)
;;; lispm-introspect.el ends here
