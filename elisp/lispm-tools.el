;;; lispm-tools.el --- LispM's tool registry and base tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A tool is a Lisp function an agent may call.  One form defines it,
;; and everything an agent or a policy needs to know is derived from
;; that form, so nothing can drift apart:
;;
;;   (lispm-define-tool read-file (agent (path file "File path, relative
;;                                              to the folder."))
;;     "Return the text of the file at PATH.
;;   ..."
;;     :kind 'read
;;     BODY...)
;;
;; defines the function `lispm-tool-read-file', called as
;; (lispm-tool-read-file AGENT PATH), and registers a `lispm-tool' named
;; "read_file" (dashes become underscores) whose description is the
;; docstring's first paragraph and whose JSON schema comes from the
;; argument list.  Each argument is (NAME TYPE DESCRIPTION); those after
;; `&optional' are optional, the others required.  TYPE is one of
;;
;;   string           a JSON string
;;   file             a JSON string naming a file or directory; it is
;;                    confined to the agent's folder by
;;                    `lispm-tools-resolve' before anything else happens,
;;                    a file of keys or tokens is refused wherever it is
;;                    (`lispm-secrets-file-p'), and the body receives its
;;                    truename
;;   integer, number  JSON numbers
;;   boolean          true or false (the body gets t or nil)
;;   (array string)   a JSON array of strings (the body gets a list)
;;
;; A bare symbol first in the argument list names the parameter that
;; receives the agent (omit it if the body does not need the agent).
;; The keyword properties before the body are evaluated:
;;
;;   :kind    one of `read', `edit', `shell', `eval', `message'
;;   :target  a form, evaluated like the body with the same arguments
;;            bound, returning a plist of what a call would touch (see
;;            `lispm-tool-target'); it must not change anything
;;
;; The body returns the tool's text (a string; anything else is
;; printed), or a result plist (:ok t :text TEXT :changes CHANGES) when
;; it changed files (CHANGES a list of `lispm-change', lispm-edit.el),
;; or signals an error, which becomes the tool's error.  A tool that
;; finishes later returns `lispm-tools-defer's value instead.
;;
;; The caller's protocol: `lispm-tool-target' first (bad arguments and
;; paths outside the folder are refused there, before the policy or the
;; user is asked), then the policy, then `lispm-tools-run'.  Whatever a
;; tool returns, the secrets Emacs knows of are withheld from it
;; (`lispm-secrets-redact'): no key, password or token reaches an agent
;; in a tool's result.
;;
;; The base tools: read_file, list_files, grep, edit_file, write_file,
;; run_shell, eval_elisp and search_tools.  Skills (lispm-skills.el)
;; add `skill', `write_skill' and whatever tools the skills' code defines.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'pp)
(require 'lispm-base)
(require 'lispm-agents)
(require 'lispm-policy)
(require 'lispm-edit)
(require 'lispm-review)
(require 'lispm-sandbox)
(require 'lispm-secrets)

(declare-function lispm-skills-search "lispm-skills" (query &optional folder))

;;; Errors

;; The codes are in lispm-base.el's table.  Each condition's data is
;; its message, then the fields named in its comment.
(lispm-define-error 'lispm-tool-error "LispM tool error" 'lispm-error -32040)
(lispm-define-error 'lispm-tool-unknown "Unknown tool"
                    '(lispm-tool-error lispm-for-the-model) -32060)
(lispm-define-error 'lispm-tool-bad-args "Bad tool arguments"
                    '(lispm-tool-error lispm-for-the-model) -32061)
(lispm-define-error 'lispm-tool-outside-folder "Outside the agent's folder"
                    '(lispm-tool-error lispm-for-the-model) -32030)
;; FILE
(lispm-define-error 'lispm-tool-no-such-file "No such file"
                    '(lispm-no-such-file lispm-tool-error))
;; DIRECTORY
(lispm-define-error 'lispm-tool-not-a-directory "Not a directory" 'lispm-tool-error -32062)
;; FILE
(lispm-define-error 'lispm-tool-is-a-directory "Is a directory" 'lispm-tool-error -32063)
;; FILE
(lispm-define-error 'lispm-tool-file-converted "Compressed or encrypted file"
                    'lispm-tool-error -32064)
;; BUFFER
(lispm-define-error 'lispm-buffer-read-only "Read-only buffer" 'lispm-tool-error -32065)
;; BUFFER
(lispm-define-error 'lispm-buffer-conflict "Unsaved changes, and changed on disk"
                    'lispm-tool-error -32066)
;; FILE OLD
(lispm-define-error 'lispm-edit-old-text-not-found "The old text is not in the file"
                    'lispm-tool-error -32067)
;; FILE OLD COUNT
(lispm-define-error 'lispm-edit-old-text-ambiguous "The old text occurs more than once"
                    'lispm-tool-error -32068)

(defun lispm-tools--signal (condition format-string &rest args)
  "Signal CONDITION with the message made of FORMAT-STRING and ARGS."
  (signal condition (list (apply #'format-message format-string args))))

(defalias 'lispm-tools-error-message #'lispm-error-message
  "Return the message of the error ERR, for a tool's result.")

;;; Options

(defgroup lispm-tools nil
  "The tools LispM gives agents: their limits and timeouts."
  :group 'lispm
  :prefix "lispm-tools-")

(defcustom lispm-tools-shell-output-limit 100000
  "The most characters of output `run_shell' keeps; the rest is dropped."
  :type 'integer
  :group 'lispm-tools)

(defcustom lispm-tools-shell-timeout 60
  "Seconds a `run_shell' command may run before it is killed."
  :type 'number
  :group 'lispm-tools)

(defcustom lispm-tools-grep-output-limit 30000
  "The most characters of matches `grep' returns."
  :type 'integer
  :group 'lispm-tools)

(defcustom lispm-tools-grep-timeout 20
  "Seconds a `grep' search may run before it is killed."
  :type 'number
  :group 'lispm-tools)

(defcustom lispm-tools-list-limit 2000
  "The most file names `list_files' returns."
  :type 'integer
  :group 'lispm-tools)

(defcustom lispm-tools-read-limit 100000
  "The most characters one `read_file' call returns.
A longer file is read in pieces: the text ends with a note of how
much was left out and the `offset' that reads on.  A file that no
buffer visits is read only as far as that piece needs."
  :type 'natnum
  :group 'lispm-tools)

(defcustom lispm-tools-offer-limit 20
  "How many tools of the user's MCP servers are offered with every request.
With more than this many, a model is sent none of their schemas at
first: `search_tools' finds them, and those it finds are offered to
that agent from its next request on.  LispM's own tools are always
offered.  Many servers mean many tools, whose schemas would otherwise
fill every request."
  :type 'natnum)

(defcustom lispm-tools-eval-print-limit 20000
  "The most characters of a printed value `eval_elisp' returns."
  :type 'integer
  :group 'lispm-tools)

;;; Tools and the registry

(cl-defstruct (lispm-tool (:constructor lispm-tool--make) (:copier nil))
  "A tool an agent can call."
  (name nil :documentation "The tool's name for agents, a string: \"read_file\".")
  (kind nil :documentation "One of `read', `edit', `shell', `eval', `message'.")
  (description nil :documentation "The first paragraph of the docstring.")
  (args nil :documentation "A list of (SYMBOL TYPE DESCRIPTION REQUIRED).")
  (function nil :documentation "The Lisp function: (FUNCTION AGENT ARGS...).")
  (targeter nil :documentation "Function of the same arguments returning
what a call would touch, or nil.")
  (input-schema nil :documentation "The JSON schema of the arguments, a hash table,
for a tool defined from data (`lispm-tools-define'); nil for one
`lispm-define-tool' made, whose schema comes from ARGS.")
  (source nil :documentation "Where the tool comes from: nil for LispM's own,
else the name of the user's MCP server that has it, a string."))

(eval-and-compile
  (defconst lispm-tools-kinds lispm-policy-kinds
    "The kinds of tool, which the policy decides on: `lispm-policy-kinds'."))

(defvar lispm-tools nil
  "Every registered tool, a list of `lispm-tool', in definition order.")

(defvar lispm-tools-changed-hook nil
  "Hook run after a tool is defined or redefined.
Agents that list tools (MCP `tools/list') should be told then.")

(defun lispm-tools--register (tool)
  "Add TOOL to `lispm-tools', replacing a tool of the same name; return it."
  (unless (memq (lispm-tool-kind tool) lispm-tools-kinds)
    (error "Tool %s: :kind must be one of %s, not %S" (lispm-tool-name tool)
           lispm-tools-kinds (lispm-tool-kind tool)))
  (let ((cell (cl-member (lispm-tool-name tool) lispm-tools
                         :key #'lispm-tool-name :test #'equal)))
    (if cell
        (setcar cell tool)
      (setq lispm-tools (append lispm-tools (list tool)))))
  (run-hooks 'lispm-tools-changed-hook)
  tool)

(defun lispm-tools-remove (predicate)
  "Remove every registered tool that PREDICATE is non-nil for.
Return the names of those removed."
  (let ((gone (cl-remove-if-not predicate lispm-tools)))
    (when gone
      (setq lispm-tools (cl-remove-if predicate lispm-tools))
      (run-hooks 'lispm-tools-changed-hook))
    (mapcar #'lispm-tool-name gone)))

(defun lispm-tool-get (name)
  "Return the registered tool named NAME (a string such as \"read_file\"), or nil."
  (cl-find name lispm-tools :key #'lispm-tool-name :test #'equal))

(defun lispm-tools--tool (tool)
  "Return TOOL, a `lispm-tool' or a tool's name; signal if there is none."
  (cond ((lispm-tool-p tool) tool)
        ((and (stringp tool) (lispm-tool-get tool)))
        (t (lispm-tools--signal
            'lispm-tool-unknown
            "Unknown tool %s; the tools are: %s (search_tools finds tools and skills)"
            (if (stringp tool) tool (format "%S" tool))
            (mapconcat #'lispm-tool-name lispm-tools ", ")))))

;;; Defining tools

(eval-and-compile
(defun lispm-tools--valid-type-p (type)
  "Return non-nil if TYPE is an argument type of `lispm-define-tool'."
  (or (memq type '(string file integer number boolean))
      (equal type '(array string))))

(defun lispm-tools-json-name (symbol)
  "Return the JSON name of SYMBOL: its name with dashes made underscores."
  (string-replace "-" "_" (symbol-name symbol)))

(defun lispm-tools--parse-arglist (name arglist)
  "Parse ARGLIST of the tool NAME; return (AGENT-SYMBOL . SPECS).
AGENT-SYMBOL is nil when ARGLIST does not name the agent.  Each of
SPECS is (SYMBOL TYPE DESCRIPTION REQUIRED)."
  (let ((agent (and (symbolp (car arglist)) (not (eq (car arglist) '&optional))
                    (pop arglist)))
        (required t)
        specs)
    (dolist (spec arglist)
      (cond ((eq spec '&optional)
             (unless required
               (error "Tool %s: `&optional' twice" name))
             (setq required nil))
            ((and (consp spec) (= (length spec) 3)
                  (symbolp (car spec)) (lispm-tools--valid-type-p (nth 1 spec))
                  (stringp (nth 2 spec)))
             (push (list (car spec) (nth 1 spec) (nth 2 spec) required) specs))
            (t (error "Tool %s: bad argument %S; expected (NAME TYPE \
\"Description.\") with TYPE string, file, integer, number, boolean or \
\(array string)" name spec))))
    (cons agent (nreverse specs))))

(defun lispm-tools--split-properties (body)
  "Split BODY into the keyword properties before it and the rest.
Return (PLIST . FORMS)."
  (let (plist)
    (while (keywordp (car body))
      (unless (memq (car body) '(:kind :target))
        (error "`lispm-define-tool': unknown property %S" (car body)))
      (setq plist (plist-put plist (pop body) (pop body))))
    (cons plist body)))

(defun lispm-tools--first-paragraph (docstring)
  "Return the first paragraph of DOCSTRING, its lines joined by spaces."
  (string-trim
   (replace-regexp-in-string
    "[ \t]*\n[ \t]*" " "
    (car (split-string docstring "\n[ \t]*\n")))))

(defun lispm-tools--description (docstring specs)
  "Return the tool description from DOCSTRING, for a tool with args SPECS.
That is its first paragraph, with the arguments' names in upper case
replaced by their JSON names, as agents know them."
  (let ((case-fold-search nil)
        (text (lispm-tools--first-paragraph docstring)))
    (with-syntax-table (standard-syntax-table)
      (dolist (spec specs text)
        (setq text (replace-regexp-in-string
                    (concat "\\b" (regexp-quote (upcase (symbol-name (car spec)))) "\\b")
                    (lispm-tools-json-name (car spec)) text t t))))))

(defun lispm-tools--type-description (type)
  "Return the JSON type TYPE stands for, as a string for humans."
  (pcase type
    ('file "string, a path in the folder")
    ('(array string) "array of strings")
    (_ (symbol-name type))))

(defun lispm-tools--fill (text prefix)
    "Return TEXT filled to 76 columns, lines after the first starting with PREFIX."
    (with-temp-buffer
      (insert text)
      (let ((fill-column 76) (fill-prefix prefix))
        (fill-region-as-paragraph (point-min) (point-max)))
      (string-trim-right (buffer-string))))

  (defun lispm-tools--function-doc (name kind docstring specs)
    "Return the docstring of the function of tool NAME of KIND.
It is DOCSTRING followed by the tool's arguments, from SPECS."
    (concat docstring "\n\n"
            (lispm-tools--fill
             (format "This is the %s tool `%s'.  Call it as (FUNCTION AGENT%s)."
                     kind name
                     (mapconcat (lambda (spec) (concat " " (upcase (symbol-name (car spec)))))
                                specs ""))
             "")
            (if specs "\nIts arguments:\n" "\nIt takes no arguments.")
            (mapconcat (lambda (spec)
                         (pcase-let ((`(,symbol ,type ,doc ,required) spec))
                           (lispm-tools--fill
                            (format "  %s (%s%s): %s" (upcase (symbol-name symbol))
                                    (lispm-tools--type-description type)
                                    (if required "" ", optional") doc)
                            "    ")))
                       specs "\n"))))

(defun lispm-tools--check-function-name (function)
  "Signal an error if defining the tool FUNCTION would clobber other code."
  (when (and (fboundp function) (not (get function 'lispm-tool)))
    (error "Cannot define the tool function `%s': it is already a function" function)))

(defmacro lispm-define-tool (name arglist docstring &rest body)
  "Define the tool NAME, an agent may call, with ARGLIST, DOCSTRING and BODY.
NAME is a symbol; the function is `lispm-tool-NAME' and the tool's
name, for agents, is NAME with dashes made underscores.  ARGLIST is
an optional bare symbol bound to the calling agent, then argument
specs (SYMBOL TYPE DESCRIPTION), `&optional' before the optional
ones.  TYPE is `string', `file' (a path, confined to the agent's
folder and given to BODY as a truename), `integer', `number',
`boolean' or (array string).  DOCSTRING's first paragraph is the
tool's description.

BODY may start with keyword properties, which are evaluated:
`:kind' (`read', `edit', `shell', `eval' or `message'; required) and
`:target', a form evaluated like BODY that returns what a call would
touch (see `lispm-tool-target').  BODY returns the tool's text, or
the value of `lispm-tools-defer' to answer later."
  (declare (indent defun) (doc-string 3))
  (pcase-let* ((`(,agent . ,specs) (lispm-tools--parse-arglist name arglist))
               (`(,props . ,forms) (lispm-tools--split-properties body))
               (agent (or agent (make-symbol "_agent")))
               (function (intern (format "lispm-tool-%s" name)))
               (tool-name (lispm-tools-json-name name))
               (kind-form (or (plist-get props :kind)
                              (error "Tool %s: `:kind' is required" name)))
               (required (cl-remove-if-not (lambda (s) (nth 3 s)) specs))
               (optional (cl-remove-if (lambda (s) (nth 3 s)) specs))
               (lambda-list `(,agent ,@(mapcar #'car required)
                                     ,@(and optional
                                            (cons '&optional (mapcar #'car optional)))))
               (used (cl-remove-if (lambda (s) (string-prefix-p "_" (symbol-name s)))
                                   (cons agent (mapcar #'car specs)))))
    (unless (stringp docstring)
      (error "Tool %s: a docstring is required" name))
    (when (and (eq (car-safe kind-form) 'quote)
               (not (memq (cadr kind-form) lispm-tools-kinds)))
      (error "Tool %s: :kind must be one of %s" name lispm-tools-kinds))
    `(progn
       (lispm-tools--check-function-name ',function)
       (defun ,function ,lambda-list
         ,(lispm-tools--function-doc
           tool-name (if (eq (car-safe kind-form) 'quote) (cadr kind-form) kind-form)
           docstring specs)
         ,@forms)
       (put ',function 'lispm-tool ,tool-name)
       (lispm-tools--register
        (lispm-tool--make
         :name ,tool-name
         :kind ,kind-form
         :description ,(lispm-tools--description docstring specs)
         :args ',specs
         :function #',function
         :targeter ,(when (plist-get props :target)
                      `(lambda ,lambda-list
                         (ignore ,@used)
                         ,(plist-get props :target))))))))

(defun lispm-tools-defer (start)
  "Return a value with which a tool's body answers later.
START is called at once with one argument, DONE, a function to call
once with the result plist: (:ok t :text TEXT) or (:ok nil :error TEXT)."
  (list 'lispm-tools--deferred start))

(defun lispm-tools--deferred-p (value)
  "Return non-nil if VALUE was made by `lispm-tools-defer'."
  (eq (car-safe value) 'lispm-tools--deferred))

;;; Tools defined from data

(cl-defun lispm-tools-define (name kind description function
                                   &key schema source targeter)
  "Register the tool NAME, defined from data rather than by a form.
This is for tools known only at run time, as an MCP server's.  NAME
is the tool's name for agents, a string; KIND one of
`lispm-tools-kinds'; DESCRIPTION its text for the model.  SCHEMA is
the JSON schema of its arguments, a hash table as `json-parse-string'
makes with `:object-type' `hash-table', `:null-object' nil and
`:false-object' `:json-false' (so that it goes back to JSON as it
came).  FUNCTION is called with the agent and the arguments, one hash
table of the same shape, and returns what a tool's body returns.
TARGETER, if non-nil, is called the same way and returns what a call
would touch (see `lispm-tool-target').  SOURCE names where the tool
comes from (see `lispm-tool-source').  Return the tool."
  (unless (and (stringp name) (string-match-p "\\`[A-Za-z0-9_-]\\{1,64\\}\\'" name))
    (error "Tool name %S: must be 1 to 64 letters, digits, `_' or `-'" name))
  (unless (hash-table-p schema)
    (error "Tool %s: its schema must be a hash table" name))
  (lispm-tools--register
   (lispm-tool--make :name name :kind kind :description (or description "")
                     :input-schema schema :source source
                     :function function :targeter targeter)))

(defun lispm-tools--schema-get (object key)
  "Return KEY's value in OBJECT, a JSON object as a hash table, or nil."
  (and (hash-table-p object) (gethash key object)))

(defun lispm-tool-arg-names (tool)
  "Return the JSON names of TOOL's arguments, in the order of its schema.
Required arguments come first.  A program of run_lisp passes its
positional arguments in this order."
  (let ((tool (lispm-tools--tool tool)))
    (if-let* ((schema (lispm-tool-input-schema tool)))
        (let ((required (append (lispm-tools--schema-get schema "required") nil))
              (all nil))
          (when-let* ((properties (lispm-tools--schema-get schema "properties"))
                      ((hash-table-p properties)))
            (maphash (lambda (key _) (push key all)) properties))
          (setq all (nreverse all))
          (append (cl-remove-if-not #'stringp required)
                  (cl-remove-if (lambda (name) (member name required)) all)))
      (mapcar (lambda (spec) (lispm-tools-json-name (car spec))) (lispm-tool-args tool)))))

;;; Schemas

(defun lispm-tools--type-schema (type)
  "Return the JSON schema of the argument TYPE, a plist."
  (pcase type
    ((or 'string 'file) (list :type "string"))
    ('integer (list :type "integer"))
    ('number (list :type "number"))
    ('boolean (list :type "boolean"))
    ('(array string) (list :type "array" :items (list :type "string")))))

(defun lispm-tool-schema (tool)
  "Return the JSON schema of TOOL's arguments, for MCP's `inputSchema'.
TOOL is a `lispm-tool' or a tool's name.  The value is a plist whose
`:properties' is a hash table (so that no arguments encode as {}) and
whose `:required' is a vector; or, for a tool defined from data, its
`lispm-tool-input-schema', a hash table."
  (let ((tool (lispm-tools--tool tool)))
    (or (lispm-tool-input-schema tool)
        (lispm-tools--args-schema tool))))

(defun lispm-tools--args-schema (tool)
  "Return the JSON schema of TOOL's arguments, made from its ARGS."
  (let ((properties (make-hash-table :test #'equal)))
    (dolist (spec (lispm-tool-args tool))
      (puthash (lispm-tools-json-name (car spec))
               (append (lispm-tools--type-schema (nth 1 spec))
                       (list :description (nth 2 spec)))
               properties))
    (list :type "object"
          :properties properties
          :required (vconcat (mapcar (lambda (s) (lispm-tools-json-name (car s)))
                                     (cl-remove-if-not (lambda (s) (nth 3 s))
                                                       (lispm-tool-args tool))))
          :additionalProperties :json-false)))

(defun lispm-tool-mcp-description (tool)
  "Return TOOL's entry for MCP's `tools/list': name, description, inputSchema."
  (let ((tool (lispm-tools--tool tool)))
    (list :name (lispm-tool-name tool)
          :description (lispm-tool-description tool)
          :inputSchema (lispm-tool-schema tool))))

;;; Validating arguments

(defun lispm-tools--args-plist (tool args)
  "Return ARGS, the arguments of TOOL, as a plist; signal if it is not one."
  (cond ((hash-table-p args)
         (let (plist)
           (maphash (lambda (k v)
                      (setq plist (plist-put plist (intern (format ":%s" k)) v)))
                    args)
           plist))
        ((and (proper-list-p args) (cl-evenp (length args))
              (cl-loop for (key _) on args by #'cddr always (keywordp key)))
         args)
        (t (lispm-tools--signal 'lispm-tool-bad-args
                                "%s: the arguments must be a JSON object"
                                (lispm-tool-name tool)))))

(defun lispm-tools--absent-p (value)
  "Return non-nil if VALUE, from JSON, means no value: null."
  (memq value '(nil :null)))

(defun lispm-tools--coerce (tool spec value)
  "Check VALUE for SPEC of TOOL, and return it as the body takes it."
  (let ((type (nth 1 spec)))
    (if (pcase type
          ((or 'string 'file) (stringp value))
          ('integer (integerp value))
          ('number (numberp value))
          ('boolean (memq value '(t :json-false :false)))
          ('(array string) (and (or (vectorp value) (proper-list-p value))
                                (cl-every #'stringp value))))
        (pcase type
          ('boolean (eq value t))
          ('(array string) (append value nil))
          (_ value))
      (lispm-tools--signal
       'lispm-tool-bad-args "%s: argument `%s' must be %s, not %s"
       (lispm-tool-name tool) (lispm-tools-json-name (car spec))
       (pcase type
         ('integer "an integer") ('(array string) "an array of strings")
         (_ (concat "a " (car (split-string (lispm-tools--type-description type)
                                            ",")))))
       (let ((print-length 5) (print-level 2))
         (truncate-string-to-width (format "%S" value) 60 nil nil "..."))))))

(defun lispm-tools--check-args (tool args)
  "Check ARGS (a plist) against TOOL's arguments.
Return the values in the order of TOOL's arguments, nil for those absent."
  (let* ((plist (lispm-tools--args-plist tool args))
         (specs (lispm-tool-args tool))
         (names (mapcar (lambda (s) (lispm-tools-json-name (car s))) specs)))
    (cl-loop for (key _) on plist by #'cddr
             for name = (substring (symbol-name key) 1)
             unless (member name names)
             do (lispm-tools--signal
                 'lispm-tool-bad-args "%s: unknown argument `%s'; it takes %s"
                 (lispm-tool-name tool) name
                 (if names (mapconcat (lambda (n) (format-message "`%s'" n)) names ", ")
                   "no arguments")))
    (mapcar (lambda (spec)
              (let* ((key (intern (concat ":" (lispm-tools-json-name (car spec)))))
                     (value (plist-get plist key)))
                (cond ((not (lispm-tools--absent-p value))
                       (lispm-tools--coerce tool spec value))
                      ((nth 3 spec)
                       (lispm-tools--signal
                        'lispm-tool-bad-args "%s: missing required argument `%s' (%s)"
                        (lispm-tool-name tool) (lispm-tools-json-name (car spec))
                        (nth 2 spec))))))
            specs)))

;; A tool defined from data (an MCP server's) takes its arguments as one
;; JSON object, checked here as far as its schema's top level says, and
;; made exact for the link: arguments come as `json-parse-string' gives
;; them, with {} as nil, null as `:null' and false as `:false' (or
;; lists for arrays, from a run_lisp program), and go on as jsonrpc.el
;; sends them, objects as hash tables, null as nil, false as
;; `:json-false'.

(defun lispm-tools--json-value (value &optional type)
  "Return VALUE, an argument from JSON, as jsonrpc.el would send it.
TYPE is what the schema says VALUE is (\"array\", \"object\"...), if
known: it decides what nil, an empty object or array, stands for."
  (cond ((hash-table-p value)
         (let ((copy (make-hash-table :test #'equal)))
           (maphash (lambda (k v) (puthash (format "%s" k) (lispm-tools--json-value v) copy))
                    value)
           copy))
        ((null value) (if (equal type "array") [] (make-hash-table :test #'equal)))
        ((eq value :null) nil)
        ((memq value '(:false :json-false)) :json-false)
        ((and (consp value) (keywordp (car value)) (proper-list-p value)
              (cl-evenp (length value)))
         (let ((object (make-hash-table :test #'equal)))
           (cl-loop for (k v) on value by #'cddr
                    do (puthash (substring (symbol-name k) 1) (lispm-tools--json-value v)
                                object))
           object))
        ((or (vectorp value) (proper-list-p value))
         (vconcat (mapcar (lambda (item) (if (null item) nil (lispm-tools--json-value item)))
                          value)))
        (t value)))

(defun lispm-tools--json-type-p (value type)
  "Return non-nil if VALUE is of TYPE, VALUE as `lispm-tools--json-value' gives.
TYPE is a JSON schema type, a string; an unknown TYPE accepts anything."
  (pcase type
    ("string" (stringp value))
    ("integer" (integerp value))
    ("number" (numberp value))
    ("boolean" (memq value '(t :json-false)))
    ("array" (vectorp value))
    ("object" (hash-table-p value))
    ("null" (null value))
    (_ t)))

(defun lispm-tools--data-arguments (tool args)
  "Return ARGS of TOOL, a tool defined from data, as one JSON object.
Check them against the top level of TOOL's schema: its required
arguments are there, each argument has the type its schema names, and
no other is given if the schema forbids others."
  (let* ((schema (lispm-tool-input-schema tool))
         (properties (let ((p (lispm-tools--schema-get schema "properties")))
                       (and (hash-table-p p) p)))
         (plist (lispm-tools--args-plist tool args))
         (object (make-hash-table :test #'equal))
         (name (lispm-tool-name tool)))
    (cl-loop for (key value) on plist by #'cddr
             for arg = (substring (symbol-name key) 1)
             for type = (lispm-tools--schema-get
                         (and properties (gethash arg properties)) "type")
             for json = (lispm-tools--json-value value (and (stringp type) type))
             do (when (and properties (not (gethash arg properties))
                           (eq (lispm-tools--schema-get schema "additionalProperties")
                               :json-false))
                  (lispm-tools--signal
                   'lispm-tool-bad-args "%s: unknown argument `%s'; it takes %s" name arg
                   (mapconcat (lambda (n) (format-message "`%s'" n))
                              (lispm-tool-arg-names tool) ", ")))
             do (when (and (stringp type) (not (lispm-tools--json-type-p json type)))
                  (lispm-tools--signal
                   'lispm-tool-bad-args "%s: argument `%s' must be of type %s, not %s"
                   name arg type
                   (let ((print-length 5) (print-level 2))
                     (truncate-string-to-width (format "%S" value) 60 nil nil "..."))))
             do (puthash arg json object))
    (dolist (required (append (lispm-tools--schema-get schema "required") nil))
      (when (and (stringp required) (null (gethash required object)))
        (lispm-tools--signal 'lispm-tool-bad-args "%s: missing required argument `%s'%s"
                             name required
                             (if-let* ((doc (lispm-tools--schema-get
                                             (and properties (gethash required properties))
                                             "description"))
                                       ((stringp doc)))
                                 (format " (%s)" (truncate-string-to-width doc 80 nil nil "…"))
                               ""))))
    object))

(defun lispm-tools-validate (tool args)
  "Check ARGS, a plist from JSON, against the schema of TOOL; return t.
TOOL is a `lispm-tool' or a tool's name.  Signal `lispm-tool-unknown'
for an unknown tool, and `lispm-tool-bad-args', naming the argument,
for a missing required argument, one of the wrong type, or one TOOL
does not take."
  (let ((tool (lispm-tools--tool tool)))
    (if (lispm-tool-input-schema tool)
        (lispm-tools--data-arguments tool args)
      (lispm-tools--check-args tool args)))
  t)

(defvar lispm-sessions-directory)

(defun lispm-tools--record-p (file)
  "Return why FILE is one of LispM's records of sessions, a string; or nil.
The sessions' documents say which role and callers an agent had, and
what it did: an agent whose folder holds `lispm-sessions-directory'
\(one started in the home folder) must not rewrite them."
  (let ((file-name-handler-alist nil))
    (when-let* (((bound-and-true-p lispm-sessions-directory))
                (sessions (file-name-as-directory
                           (file-truename (expand-file-name lispm-sessions-directory))))
                ((string-prefix-p sessions (file-name-as-directory file))))
      (format "%s is in %s, LispM's record of its sessions"
              (abbreviate-file-name file) (abbreviate-file-name sessions)))))

(defun lispm-tools--arguments (tool agent args)
  "Return the argument values of a call of TOOL by AGENT with ARGS.
Validate ARGS, then confine `file' arguments to AGENT's folder,
replacing each with its truename, and refuse a file of keys or tokens
\(`lispm-secrets-file-p') and LispM's records of sessions
\(`lispm-tools--record-p'), whatever the folder.  A tool defined from
data gets one value, the arguments as one JSON object
\(`lispm-tools--data-arguments')."
  (if (lispm-tool-input-schema tool)
      (list (lispm-tools--data-arguments tool args))
    (lispm-tools--spec-arguments tool agent args)))

(defun lispm-tools--spec-arguments (tool agent args)
  "Return the argument values of a call of TOOL by AGENT with ARGS.
TOOL is one `lispm-define-tool' made; see `lispm-tools--arguments'."
  (cl-mapcar (lambda (spec value)
               (if (and value (eq (nth 1 spec) 'file))
                   (let ((file (lispm-tools-resolve agent value)))
                     (when-let* ((why (or (lispm-secrets-file-p file)
                                          (lispm-tools--record-p file))))
                       (lispm-secrets-refuse
                        (lispm-tool-name tool) (lispm-tool-kind tool)
                        (format "%s; LispM's tools never read or change it" why)))
                     file)
                 value))
             (lispm-tool-args tool)
             (lispm-tools--check-args tool args)))

;;; Confinement

(defun lispm-tools--folder (agent)
  "Return AGENT's folder: a truename with a trailing slash."
  (let ((folder (and (lispm-actor-p agent) (lispm-actor-folder agent))))
    (unless (stringp folder)
      (lispm-tools--signal 'lispm-tool-error "Agent %S has no folder"
                           (and (lispm-actor-p agent) (lispm-actor-name agent))))
    (let ((file-name-handler-alist nil))
      (file-name-as-directory (file-truename folder)))))

(defun lispm-tools-resolve (agent path)
  "Return the truename of PATH, relative to AGENT's folder.
Signal `lispm-tool-outside-folder' unless that truename is the folder
or under it: `..', `~', absolute paths elsewhere and symbolic links
that lead out are all refused.  Remote file names are never touched."
  (let* ((file-name-handler-alist nil)  ; No TRAMP, no decompression.
         (folder (lispm-tools--folder agent))
         (refuse (lambda ()
                   (lispm-tools--signal
                    'lispm-tool-outside-folder
                    "%s is outside the folder %s; refused (paths must be inside it)"
                    path (directory-file-name folder)))))
    (unless (and (stringp path) (not (string-search "\0" path)))
      (lispm-tools--signal 'lispm-tool-bad-args "Bad path %S" path))
    (let ((true (condition-case nil
                    (file-truename (expand-file-name path folder))
                  (error (funcall refuse)))))
      (cond ((equal (file-name-as-directory true) folder) folder)
            ((string-prefix-p folder true) true)
            (t (funcall refuse))))))

(defun lispm-tools--relative (agent file)
  "Return FILE's name relative to AGENT's folder."
  (let ((relative (file-relative-name file (lispm-tools--folder agent))))
    (if (equal relative "./") "." relative)))

;;; Running tools

(defun lispm-tool-target (tool agent args)
  "Return what a call of TOOL by AGENT with ARGS would touch, a plist.
Nothing is changed.  The plist always has `:kind' (TOOL's kind) and
`:tool' (its name); `:files' lists the truenames of its file
arguments.  Edit tools add `:diff', the unified diff of the change
they propose; `run_shell' gives `:command' and `:directory'; and
`eval_elisp' `:form', the form pretty-printed (as written if longer
than `lispm-pretty-print-limit').  Signal like
`lispm-tools-validate', and `lispm-tool-outside-folder' for a path
outside AGENT's folder: that refusal needs nobody's approval."
  (let* ((tool (lispm-tools--tool tool))
         (values (lispm-tools--arguments tool agent args))
         (files (cl-loop for spec in (lispm-tool-args tool)
                         for value in values
                         when (and value (eq (nth 1 spec) 'file)) collect value))
         (target (and (lispm-tool-targeter tool)
                      (condition-case err
                          (apply (lispm-tool-targeter tool) agent values)
                        (lispm-error (signal (car err) (cdr err)))
                        ;; Whatever else went wrong is still the call's
                        ;; error, for the agent to read, not the caller's.
                        (error (lispm-tools--signal 'lispm-tool-error "%s"
                                                    (error-message-string err)))))))
    (append (list :kind (lispm-tool-kind tool) :tool (lispm-tool-name tool))
            (unless (plist-member target :files) (list :files files))
            (cl-loop for (key value) on target by #'cddr
                     unless (memq key '(:kind :tool)) append (list key value)))))

(defun lispm-tools--text (value)
  "Return VALUE, a tool's result, as text."
  (cond ((stringp value) value)
        ((null value) "")
        (t (format "%S" value))))

(defun lispm-tools--result (value)
  "Return the result plist of a tool whose body returned VALUE."
  (if (and (consp value) (eq (car value) :ok))
      value
    (list :ok t :text (lispm-tools--text value))))

(defun lispm-tools--failure (err)
  "Return the result plist of a call that failed with the error ERR."
  (list :ok nil :error (lispm-tools-error-message err)
        :condition (symbol-name (car err))))

(defun lispm-tools--with-changes (result changes)
  "Return RESULT, a result plist, with more `lispm-change' records in it.
They are CHANGES, added to its `:changes' (nothing is added if nil)."
  (if changes
      (append result (list :changes (append (plist-get result :changes) changes)))
    result))

(defun lispm-tools-json-result (result)
  "Return RESULT, a tool's result plist, without what JSON cannot carry.
That is its `:changes', the `lispm-change' records of what the call
changed, which only Emacs's own callers use.  Whatever sends a result
out of Emacs passes it through this first."
  (if (plist-member result :changes)
      (cl-loop for (key value) on result by #'cddr
               unless (eq key :changes) append (list key value))
    result))

(defun lispm-tools--withhold-secrets (result)
  "Return RESULT, a result plist, with the known secrets in its texts withheld."
  (let ((known (lispm-secrets-known)))
    (cl-loop for (key value) on result by #'cddr
             append (list key (if (memq key '(:text :error))
                                  (lispm-secrets-redact value known)
                                value)))))

(defun lispm-tools-run (tool agent args callback)
  "Run TOOL for AGENT with ARGS, a plist from JSON; pass the result to CALLBACK.
TOOL is a `lispm-tool' or a tool's name.  The result is (:ok t :text
TEXT) or (:ok nil :error TEXT :condition NAME), NAME the error
condition's name as a string; either has `:changes', a list of
`lispm-change', when the call changed files (see
`lispm-tools-json-result').  ARGS are
validated and paths confined first; asking the policy is the caller's
business, before this.  Synchronous tools call CALLBACK before this
returns; others (run_shell, grep) later, from a process sentinel.
This never signals: every failure, an unknown tool included, goes to
CALLBACK, exactly once.  The secrets Emacs knows of are withheld from
the result's text and error (`lispm-secrets-redact')."
  (let* ((called nil)
         (done (lambda (result)
                 (unless called
                   (setq called t)
                   (funcall callback (lispm-tools--withhold-secrets result)))))
         (result
          (condition-case err
              (let* ((tool (lispm-tools--tool tool))
                     (values (lispm-tools--arguments tool agent args))
                     (value (apply (lispm-tool-function tool) agent values)))
                (if (lispm-tools--deferred-p value)
                    (progn (funcall (cadr value) done) nil)
                  (lispm-tools--result value)))
            (error (lispm-tools--failure err)))))
    (when result
      (funcall done result))
    nil))

(defun lispm-tools-call (tool agent args &optional timeout)
  "Run TOOL for AGENT with ARGS and wait for its result plist.
Wait at most TIMEOUT seconds (default: the shell timeout plus 5).
For tests and for callers that must block; agents never do."
  (let ((result nil)
        (deadline (+ (float-time) (or timeout (+ lispm-tools-shell-timeout 5)))))
    (lispm-tools-run tool agent args (lambda (r) (setq result r)))
    (while (and (not result) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or result (list :ok nil :error "No result in time"))))

;;; Processes, never waited for

(defun lispm-tools--kill (process)
  "Kill PROCESS and every process of its group."
  (when (process-live-p process)
    (condition-case nil
        (signal-process (- (process-id process)) 'KILL)
      (error nil))
    (when (process-live-p process)
      (kill-process process))))

(cl-defun lispm-tools--spawn (command directory done &key limit timeout finish)
  "Start COMMAND, a list, in DIRECTORY, and return at once.
Keep at most LIMIT characters of its output (stdout and stderr
together); kill it, and its children, after TIMEOUT seconds.  When it
has ended, call FINISH with its output, its exit status (nil when it
was killed by the timeout) and whether output was dropped; FINISH
returns the result plist, which goes to DONE."
  (let* ((buffer (generate-new-buffer " *lispm-tools process*" t))
         (truncated nil)
         (timed-out nil)
         (timer nil)
         (process
          (let ((default-directory (file-name-as-directory directory))
                (process-environment (cons "PAGER=cat" process-environment)))
            (make-process
             :name "lispm-tool" :buffer buffer :command command
             :connection-type 'pipe :noquery t :coding 'utf-8
             :filter
             (lambda (_process string)
               (when (buffer-live-p buffer)
                 (with-current-buffer buffer
                   (let ((room (- limit (buffer-size))))
                     (when (> (length string) room)
                       (setq truncated t
                             string (substring string 0 (max room 0))))
                     (goto-char (point-max))
                     (insert string)))))
             :sentinel
             (lambda (process _event)
               (unless (process-live-p process)
                 (when timer (cancel-timer timer))
                 (let ((output (if (buffer-live-p buffer)
                                   (with-current-buffer buffer (buffer-string))
                                 ""))
                       (status (and (not timed-out) (process-exit-status process))))
                   (when (buffer-live-p buffer) (kill-buffer buffer))
                   (funcall done
                            (condition-case err
                                (funcall finish output status truncated)
                              (error (list :ok nil
                                           :error (error-message-string err))))))))))))
    (ignore-errors (process-send-eof process)) ; No input: nothing waits on it.
    (setq timer (run-at-time timeout nil
                             (lambda ()
                               (when (process-live-p process)
                                 (setq timed-out t)
                                 (lispm-tools--kill process)))))
    process))

;;; Buffers and files

(defun lispm-tools--text-window (file offset limit)
  "Return (TEXT TOTAL BINARY SHOWN): LIMIT characters of FILE's text from OFFSET.
The text is FILE's buffer's if a buffer visits it, else the disk's,
read by `lispm-insert-file-text'.  The secrets Emacs knows of are
withheld from TEXT, even one the window cuts
\(`lispm-secrets-redact-window'); SHOWN is how many characters of the
file TEXT stands for.  TOTAL is the length of the whole text, or nil
when the file was too big to read whole: then only enough of it is
read for any window `lispm-tools-read-limit' allows (a character is
at most 4 bytes), and more of it follows.  BINARY is FILE's size in
bytes if it is not text (Emacs decoded it as `no-conversion'), else
nil.  Return nil if the file does not exist and no buffer visits it."
  (let* ((end (+ offset limit))
         (window (lambda (text)
                   (let ((from (min offset (length text))) (to (min end (length text))))
                     (list (lispm-secrets-redact-window text from to) (- to from))))))
    (if-let* ((text (lispm-edit-live-text file)))
        (pcase-let ((`(,shown-text ,shown) (funcall window text)))
          (list shown-text (length text) nil shown))
      (when (file-regular-p file)
        (let* ((size (file-attribute-size (file-attributes file)))
               ;; Enough for the longest window, and for a secret it
               ;; cuts; less would cut a small file short for a small LIMIT.
               (bytes (* 4 (+ offset (max limit lispm-tools-read-limit) 1024)))
               (whole (<= size bytes)))
          (with-temp-buffer
            (lispm-insert-file-text file (if whole nil 0) (if whole nil bytes))
            (let ((binary (and (eq (coding-system-base last-coding-system-used) 'no-conversion)
                               size)))
              (pcase-let ((`(,shown-text ,shown)
                           (funcall window (buffer-substring-no-properties
                                            (point-min) (point-max)))))
                (list shown-text (and whole (- (point-max) (point-min))) binary shown)))))))))

(defun lispm-tools--json-safe (text)
  "Return TEXT with each raw byte in it, which JSON cannot carry, made U+FFFD."
  (replace-regexp-in-string (rx (any (#x3fff80 . #x3fffff))) "\ufffd" text t t))

(defun lispm-tools--refuse-converted (agent file)
  "Signal unless FILE can be changed as the literal text LispM read of it.
A file name with a handler (a compressed or encrypted file, above
all) is read literally by the tools, but visiting it would convert
it, so AGENT may change such a file only while a buffer visits it:
the buffer's text is then what the tools read and write."
  (when (and (not (find-buffer-visiting file))
             (find-file-name-handler file 'insert-file-contents))
    (lispm-signal
     'lispm-tool-file-converted (list file)
     "%s is compressed or encrypted (Emacs converts it when visiting it); \
the tools change it only while a buffer in Emacs visits it"
     (lispm-tools--relative agent file))))

(defun lispm-tools--file-buffer (agent file)
  "Return a buffer visiting FILE, in step with the disk, to change it.
Create the directories FILE needs (inside AGENT's folder).  Signal if
the buffer is read-only, or has unsaved changes while the file has
changed on disk, or if FILE is one `lispm-tools--refuse-converted'
refuses."
  (lispm-tools--refuse-converted agent file)
  (let* ((visited (find-buffer-visiting file))
         (buffer (lispm-edit-visit file)))
    (with-current-buffer buffer
      (when (and visited (file-exists-p file)
                 (not (verify-visited-file-modtime buffer)))
        (if (buffer-modified-p)
            (lispm-signal 'lispm-buffer-conflict (list buffer)
                          "%s has unsaved changes in Emacs and changed on disk; \
the user must settle that first" (lispm-tools--relative agent file))
          (let ((inhibit-interaction t))
            (revert-buffer t t t))))
      (when buffer-read-only
        (lispm-signal 'lispm-buffer-read-only (list buffer)
                      "%s is read-only in Emacs" (lispm-tools--relative agent file))))
    buffer))

(defun lispm-tools--write-through-buffer (agent file text)
  "Make TEXT FILE's text through its buffer, as one undo step, and save it.
AGENT is the agent asking.  When the user let through only some of
the edit's hunks, or edited them (`lispm-review-accepted'), what is
written is the file's text with those hunks, and the result says so.
Return the result plist: a short report, and the `lispm-change' made,
if any, as `:changes'."
  (let* ((review (and lispm-review-accepted
                      (lispm-review-for-p lispm-review-accepted file)
                      (lispm-review-changed-p lispm-review-accepted)
                      lispm-review-accepted))
         (buffer (lispm-tools--file-buffer agent file))
         (existed (file-exists-p file))
         (written (if review
                      (lispm-review-apply review (or (lispm-edit-file-text file) ""))
                    text))
         (change (let ((inhibit-interaction t))
                   (lispm-edit-replace buffer written :save t))))
    (lispm-tools--with-changes
     (list :ok t :text (concat (format "%s %s (%d characters)" (if existed "Wrote" "Created")
                                       (lispm-tools--relative agent file) (length written))
                               (and review
                                    (lispm-review-note review text written
                                                       (lispm-tools--relative agent file)))))
     (and change (list change)))))

;;; Reading tools

(defun lispm-tools--read-note (offset shown total)
  "Return the note ending a read of SHOWN characters from OFFSET, or nil.
TOTAL is the whole text's length, or nil if it is not known and more
follows.  There is no note when the read reached the end."
  (let ((end (+ offset shown)))
    (cond ((null total)
           (format "\n[characters %d to %d shown; the file is longer (it was not read \
further); call read_file with offset %d to read on]" offset end end))
          ((< end total)
           (format "\n[%d characters left out: characters %d to %d of %d shown; \
call read_file with offset %d to read on]" (- total shown) offset end total end)))))

(lispm-define-tool read-file (agent (path file "File path, relative to the folder.")
                                    &optional
                                    (offset integer "Characters to skip from the start; default 0.")
                                    (limit integer "The most characters to return; default and at most `lispm-tools-read-limit'."))
  "Return the text of the file at PATH, or LIMIT characters of it from OFFSET.
If Emacs visits the file, its buffer's text is returned, unsaved
changes included.  Files are read as they are on disk: nothing is
decompressed or decrypted.  At most `lispm-tools-read-limit'
characters come back; a longer text ends with a note of how many
were left out and the OFFSET that reads on."
  :kind 'read
  (let* ((relative (lispm-tools--relative agent path))
         (offset (or offset 0))
         (limit (min (or limit lispm-tools-read-limit) lispm-tools-read-limit)))
    (when (< offset 0)
      (lispm-tools--signal 'lispm-tool-bad-args "read_file: `offset' must be 0 or more, not %d"
                           offset))
    (when (< limit 1)
      (lispm-tools--signal 'lispm-tool-bad-args "read_file: `limit' must be 1 or more, not %d"
                           limit))
    (when (file-directory-p path)
      (lispm-signal 'lispm-tool-is-a-directory (list path)
                    "%s is a directory; list_files lists it" relative))
    (pcase-let ((`(,text ,total ,binary ,shown)
                 (or (lispm-tools--text-window path offset limit)
                     (lispm-signal 'lispm-tool-no-such-file (list path)
                                   "No such file: %s" relative))))
      (when binary
        (lispm-tools--signal 'lispm-tool-error
                             "%s is not text (%d bytes of binary data); read_file reads text only"
                             relative binary))
      (when (and total (> offset total))
        (lispm-tools--signal 'lispm-tool-bad-args
                             "read_file: `offset' %d is past the end of %s (%d characters)"
                             offset relative total))
      (concat (lispm-tools--json-safe text)
              (lispm-tools--read-note offset shown total)))))

(defun lispm-tools--list (agent directory regexp limit)
  "Return the files under DIRECTORY matching REGEXP, relative to AGENT's folder.
Skip `.git' and the files and directories of keys or tokens
\(`lispm-secrets-file-p'), and do not follow symbolic links to
directories.  Stop after LIMIT files; the last element is then the
symbol `more'."
  (let ((queue (list directory)) files (count 0)
        (secrets (lispm-secrets-file-list)))
    (catch 'full
      (while queue
        (let ((dir (pop queue)))
          (dolist (name (condition-case nil
                            (directory-files dir nil directory-files-no-dot-files-regexp)
                          (file-error nil)))
            (let ((file (expand-file-name name dir)))
              (cond ((member name '(".git" ".hg" ".svn")))
                    ((lispm-secrets-file-p file secrets))
                    ((and (file-directory-p file) (not (file-symlink-p file)))
                     (setq queue (append queue (list file))))
                    ((or (null regexp) (string-match-p regexp name))
                     (when (>= count limit)
                       (push 'more files)
                       (throw 'full nil))
                     (cl-incf count)
                     (push (lispm-tools--relative agent file) files))))))))
    (let ((more (eq (car files) 'more)))
      (append (sort (delq 'more files) #'string<) (and more '(more))))))

(lispm-define-tool list-files (agent &optional
                                     (path file "Directory to list, relative to the folder; default the folder.")
                                     (pattern string "Glob the file names must match, such as *.el."))
  "List the files under a directory of the folder, recursively.
Names are relative to the folder; `.git' is skipped, and at most
`lispm-tools-list-limit' names are listed."
  :kind 'read
  (let* ((dir (or path (lispm-tools--folder agent)))
         (files (progn
                  (unless (file-directory-p dir)
                    (lispm-signal 'lispm-tool-not-a-directory (list dir)
                                  "Not a directory: %s" (lispm-tools--relative agent dir)))
                  (lispm-tools--list agent dir
                                     (and pattern (wildcard-to-regexp pattern))
                                     lispm-tools-list-limit))))
    (cond ((null files) "No files.")
          ((eq (car (last files)) 'more)
           (concat (mapconcat #'identity (butlast files) "\n")
                   (format "\n[more files: only the first %d are listed]"
                           lispm-tools-list-limit)))
          (t (mapconcat #'identity files "\n")))))

(defun lispm-tools--grep-command (pattern relative)
  "Return the grep command line for the regexp PATTERN in RELATIVE."
  (if (executable-find "rg")
      ;; No config file: one could turn on `--search-zip' or `--pre'.
      (list "rg" "--no-config" "--line-number" "--no-heading" "--with-filename"
            "--color=never" "-e" pattern "--" relative)
    (list "grep" "-r" "-n" "-I" "-E" "--exclude-dir=.git" "-e" pattern "--" relative)))

(defun lispm-tools--grep-without-secrets (folder output truncated)
  "Return OUTPUT of grep in FOLDER without the lines that could show a secret.
A line is FILE:LINE:TEXT, FILE relative to FOLDER; it goes if FILE is
one `lispm-secrets-file-p' names, or if a secret Emacs knows of is in
it: withheld, it would still tell a pattern that matched it, one
character at a time, from one that did not.  If the output was
TRUNCATED, its last line, cut short, goes too."
  (let* ((secrets (lispm-secrets-file-list))
         (known (lispm-secrets-known))
         (lines (split-string output "\n")))
    (mapconcat #'identity
               (cl-remove-if
                (lambda (line)
                  (or (lispm-secrets-find line known)
                      (and (string-match "\\`\\(.+?\\):[0-9]+:" line)
                           (lispm-secrets-file-p (expand-file-name (match-string 1 line) folder)
                                                 secrets))))
                (if truncated (butlast lines) lines))
               "\n")))

(lispm-define-tool grep (agent (pattern string "Extended regular expression to look for.")
                               &optional
                               (path file "File or directory to search, relative to the folder; default the folder."))
  "Search the folder's files for lines matching a regular expression.
Each match reads FILE:LINE:TEXT, FILE relative to the folder.  Uses
ripgrep if installed (Rust regexps), else grep -E; `.git' is skipped, and
compressed files are searched as they are, not decompressed.  No line
of a file of keys or tokens, and no line holding a secret, is shown.
The search runs without blocking Emacs, and stops after
`lispm-tools-grep-timeout' seconds or `lispm-tools-grep-output-limit'
characters."
  :kind 'read
  (let* ((folder (lispm-tools--folder agent))
         (relative (if path (lispm-tools--relative agent path) ".")))
    (lispm-tools-defer
     (lambda (done)
       (lispm-tools--spawn
        (lispm-tools--grep-command pattern relative) folder done
        :limit lispm-tools-grep-output-limit
        :timeout lispm-tools-grep-timeout
        :finish
        (lambda (output status truncated)
          (let ((matches (lispm-tools--grep-without-secrets
                          folder (replace-regexp-in-string "^\\./" "" output) truncated)))
            (pcase status
              ('nil (list :ok nil :error (format "grep took longer than %s seconds"
                                                 lispm-tools-grep-timeout)))
              ((guard (and (eql status 0) (string-blank-p matches)))
               (list :ok t :text "No matches."))
              (0 (list :ok t :text (concat matches
                                           (and truncated "\n[output truncated]"))))
              (1 (list :ok t :text "No matches."))
              (_ (list :ok nil :error (string-trim output)))))))))))

;;; Editing tools

(defun lispm-tools--edit-proposal (agent file old new diff)
  "Return FILE's text after the edit OLD -> NEW, or after DIFF.
AGENT is the agent asking.  Signal a clear error if the edit is
malformed or does not apply."
  (lispm-tools--refuse-converted agent file)
  (let ((text (lispm-edit-file-text file))
        (relative (lispm-tools--relative agent file)))
    (unless text
      (lispm-signal 'lispm-tool-no-such-file (list file)
                    "No such file: %s (write_file creates files)" relative))
    (cond ((and diff (or old new))
           (lispm-tools--signal
            'lispm-tool-bad-args
            "The edit_file tool takes either `old' and `new', or `diff', not both"))
          (diff (condition-case err
                    (lispm-edit-apply-diff text diff)
                  ((lispm-diff-malformed lispm-diff-does-not-apply)
                   (signal (car err) (cons (format "%s: %s" relative (cadr err)) (cddr err))))
                  (error (lispm-tools--signal 'lispm-tool-error "%s: %s" relative
                                              (error-message-string err)))))
          ((not (and old new))
           (lispm-tools--signal
            'lispm-tool-bad-args
            "The edit_file tool needs `old' and `new' (the text to replace and \
its replacement), or `diff'"))
          ((string-empty-p old)
           (lispm-tools--signal 'lispm-tool-bad-args
                                "`old' is empty; give the exact text to replace"))
          (t
           (let ((count 0) (start 0) found)
             (while (setq found (string-search old text start))
               (cl-incf count)
               (setq start (1+ found)))
             (pcase count
               (0 (lispm-signal 'lispm-edit-old-text-not-found (list file old)
                                "`old' is not in %s; it must match the file's text exactly, \
whitespace included" relative))
               (1 (let ((at (string-search old text)))
                    (concat (substring text 0 at) new (substring text (+ at (length old))))))
               (_ (lispm-signal 'lispm-edit-old-text-ambiguous (list file old count)
                                "`old' occurs %d times in %s; include more of the \
surrounding text so that it occurs once" count relative))))))))

(lispm-define-tool edit-file (agent (path file "File path, relative to the folder.")
                                    &optional
                                    (old string "Exact text to replace; it must occur once.")
                                    (new string "The text that replaces `old'.")
                                    (diff string "A unified diff of the file, instead of old and new."))
  "Change a file: replace the text OLD, which must occur once, by NEW.
Or apply DIFF, a unified diff.  The change goes through the file's
buffer in Emacs as one undo step (unsaved changes there are kept),
and the buffer is saved."
  :kind 'edit
  :target (let ((before (lispm-edit-file-text path)))
            (list :diff (lispm-edit-diff
                         (or before "")
                         (lispm-tools--edit-proposal agent path old new diff)
                         (lispm-tools--relative agent path))))
  (lispm-tools--write-through-buffer
   agent path (lispm-tools--edit-proposal agent path old new diff)))

(lispm-define-tool write-file (agent (path file "File path, relative to the folder.")
                                     (content string "The file's whole new text."))
  "Write CONTENT as the whole text of the file at PATH, creating it if needed.
Missing directories are created.  The change goes through the file's
buffer in Emacs as one undo step, and the buffer is saved."
  :kind 'edit
  :target (progn
            (lispm-tools--refuse-converted agent path)
            (list :diff (lispm-edit-diff (or (lispm-edit-file-text path) "")
                                          content (lispm-tools--relative agent path))))
  (when (file-directory-p path)
    (lispm-signal 'lispm-tool-is-a-directory (list path)
                  "%s is a directory" (lispm-tools--relative agent path)))
  (lispm-tools--write-through-buffer agent path content))

;;; Shell and Lisp

(defun lispm-tools--shell-network-p (agent)
  "Return non-nil if AGENT's shell commands may reach the network.
That is, if the user allowed this command the network at its
approval, or AGENT's role (or a session grant) allows `network' outright."
  (or (memq lispm-sandbox-widened '(network off))
      (eq (lispm-policy-decide agent (lispm-actor-effective-role agent) 'network nil) 'allow)))

(defun lispm-tools--shell-mode ()
  "Return the sandbox mode of the shell command about to run."
  (if (eq lispm-sandbox-widened 'off) 'off lispm-sandbox-shell-mode))

(lispm-define-tool run-shell (agent (command string "Shell command line to run."))
  "Run a shell command in the folder and return its output.
Standard output and error come together, up to
`lispm-tools-shell-output-limit' characters; the command gets no
input, and is killed after `lispm-tools-shell-timeout' seconds.
Emacs never waits for it.  The files of the folder it created,
changed or deleted are reported (see `lispm-edit-snapshot').  It runs
in bubblewrap's sandbox, as `lispm-sandbox-shell-mode' says: the
folder writable, the rest of the system read-only, no secrets of
$HOME, no network unless allowed."
  :kind 'shell
  :target (list :command command :directory (lispm-tools--folder agent)
                :sandbox (lispm-sandbox-describe lispm-sandbox-shell-mode
                                                 (lispm-tools--shell-network-p agent)))
  (let* ((folder (lispm-tools--folder agent))
         (snapshot (lispm-edit-snapshot folder))
         (mode (lispm-tools--shell-mode))
         (network (lispm-tools--shell-network-p agent)))
    (lispm-tools-defer
     (lambda (done)
       (lispm-tools--spawn
        (lispm-sandbox-command mode folder (list shell-file-name shell-command-switch command)
                               :network network)
        folder done
        :limit lispm-tools-shell-output-limit
        :timeout lispm-tools-shell-timeout
        :finish
        (lambda (output status truncated)
          (let ((text (concat (if (string-empty-p output) "(no output)" output)
                              (and truncated "\n[output truncated]"))))
            (lispm-tools--with-changes
             (cond ((null status)
                    (list :ok nil :error
                          (format "The command took longer than %s seconds and was \
killed.  Its output:\n%s" lispm-tools-shell-timeout text)))
                   ((zerop status) (list :ok t :text text :exit 0))
                   (t (list :ok t :exit status
                            :text (concat (format "%s\n[exit status %d]"
                                                  (string-trim-right text) status)
                                          (lispm-sandbox-note mode folder network)))))
             (lispm-edit-snapshot-changes snapshot)))))))))

(defun lispm-tools--read-one (string)
  "Return the one Lisp form in STRING; signal if there is not exactly one."
  (let ((read (condition-case err
                  (read-from-string string)
                (error (lispm-tools--signal
                        'lispm-tool-bad-args "Cannot read the form: %s"
                        (error-message-string err))))))
    (unless (string-blank-p
             (with-temp-buffer
               (emacs-lisp-mode)
               (insert (substring string (cdr read)))
               (goto-char (point-min))
               (forward-comment (buffer-size))
               (buffer-substring (point) (point-max))))
      (lispm-tools--signal 'lispm-tool-bad-args
                           "Give one form; text follows it: %s"
                           (truncate-string-to-width
                            (string-trim (substring string (cdr read))) 60 nil nil "...")))
    (car read)))

(defconst lispm-tools--touching
  '((defines defun defmacro defalias defsubst cl-defun cl-defmacro cl-defgeneric
             cl-defmethod define-advice advice-add fset lispm-define-tool
             define-minor-mode define-derived-mode defvar defvar-local defconst
             defcustom defface define-key keymap-set global-set-key)
    (files write-region delete-file delete-directory rename-file copy-file
           copy-directory make-directory make-symbolic-link add-name-to-file
           set-file-modes set-file-times write-file save-buffer save-some-buffers
           find-file find-file-noselect insert-file-contents with-temp-file)
    (processes shell-command async-shell-command call-process call-process-region
               process-file start-process start-file-process make-process
               make-pipe-process shell-command-to-string process-lines)
    (network url-retrieve url-retrieve-synchronously open-network-stream
             make-network-process)
    (buffers set-buffer switch-to-buffer pop-to-buffer kill-buffer erase-buffer
             insert delete-region replace-match replace-regexp-in-region
             with-current-buffer)
    (variables setq setq-default set set-default setf setq-local make-local-variable
               add-hook remove-hook add-to-list customize-set-variable)
    (unknown eval funcall apply funcall-interactively call-interactively
             command-execute load require autoload))
  "What a form calling these may touch, for the approval of `eval_elisp'.")

(defconst lispm-tools--plain-macros
  '(when unless dolist dotimes push pop lambda prog2 cl-incf cl-decf if-let* when-let*
    and-let* pcase pcase-let pcase-let* pcase-dolist cl-loop cl-case cl-block cl-flet
    cl-labels save-excursion save-restriction save-match-data with-temp-buffer
    ignore-errors condition-case-unless-debug thread-first thread-last named-let)
  "Macros whose expansion touches nothing their arguments do not.")

(defun lispm-tools-eval-touches (form)
  "Return what FORM is known to touch, a list of lines for its approval.
It looks at what FORM calls by name, without expanding a macro (that
would run the macro's code before anyone approved it): so it cannot
tell what a macro or a computed function does, and says so."
  (let ((seen (make-hash-table :test 'eq)) (stack (list form)) (defined nil) (macros nil)
        (known (apply #'append lispm-tools--plain-macros (mapcar #'cdr lispm-tools--touching))))
    (while stack
      (let ((object (pop stack)))
        (when (consp object)
          (let ((head (car object)))
            (when (symbolp head)
              (puthash head t seen)
              (when (and (memq head (cdr (assq 'defines lispm-tools--touching)))
                         (symbolp (car-safe (cdr object))))
                (push (format "%s %s" head (cadr object)) defined))))
          (while (consp object)
            (when (and (memq (car-safe (car object)) '(function quote))
                       (symbolp (cadr (car object))))
              (puthash (cadr (car object)) t seen))
            (push (car object) stack)
            (setq object (cdr object))))))
    (maphash (lambda (name _)
               (when (and (macrop name) (not (special-form-p name)) (not (memq name known)))
                 (push (symbol-name name) macros)))
             seen)
    (append
     (and defined (list (concat "defines: " (string-join (nreverse defined) ", "))))
     (delq nil (mapcar (pcase-lambda (`(,what . ,names))
                         (let ((used (cl-remove-if-not (lambda (name) (gethash name seen))
                                                       names)))
                           (and used (not (eq what 'defines))
                                (format "%s: %s"
                                        (if (eq what 'unknown)
                                            "code chosen when it runs (LispM cannot tell what)"
                                          what)
                                        (mapconcat #'symbol-name used ", ")))))
                       lispm-tools--touching))
     (and macros (list (concat "macros it does not expand (LispM cannot tell what they do): "
                               (string-join (sort macros #'string<) ", ")))))))

(lispm-define-tool eval-elisp (agent (form string "One Emacs Lisp form, as text."))
  "Evaluate one Emacs Lisp form in LispM's Emacs and return its printed value.
The form is evaluated with lexical binding; it may not ask the user
anything (`inhibit-interaction' is t).  The files of the folder it
created, changed or deleted are reported, even if it fails (see
`lispm-edit-snapshot')."
  :kind 'eval
  :target (let ((sexp (lispm-tools--read-one form)))
            (list :form (if (> (length form) lispm-pretty-print-limit)
                            form
                          (string-trim-right (pp-to-string sexp)))
                  :touches (lispm-tools-eval-touches sexp)))
  (let* ((sexp (lispm-tools--read-one form))
         (snapshot (lispm-edit-snapshot (lispm-tools--folder agent)))
         (failure nil)
         (value (condition-case err
                    (let ((inhibit-interaction t))
                      (eval sexp t))
                  (error (setq failure err) nil)))
         (changes (lispm-edit-snapshot-changes snapshot)))
    (lispm-tools--with-changes
     (if failure
         (lispm-tools--failure failure)
       (let ((printed (let ((print-length 200) (print-level 20))
                        (prin1-to-string value))))
         (list :ok t :text (if (> (length printed) lispm-tools-eval-print-limit)
                               (concat (substring printed 0 lispm-tools-eval-print-limit)
                                       "\n[truncated]")
                             printed))))
     changes)))

;;; Searching tools

(defun lispm-tools--words (string)
  "Return the lower-case words of STRING."
  (split-string (downcase (or string "")) "[^[:alnum:]]+" t))

(defun lispm-tools-score (query name description)
  "Return how well QUERY's words match NAME and DESCRIPTION, a number.
A word that is a word of NAME counts 4, one inside NAME 2, one among
DESCRIPTION's words 1, and 0 if it occurs nowhere."
  (let ((name-words (lispm-tools--words name))
        (doc-words (lispm-tools--words description))
        (name (downcase name)))
    (cl-loop for word in (lispm-tools--words query)
             sum (+ (cond ((member word name-words) 4)
                          ((string-search word name) 2)
                          (t 0))
                    (if (cl-some (lambda (w) (string-prefix-p word w)) doc-words) 1 0)))))

(defun lispm-tools--short (description)
  "Return DESCRIPTION's first sentence."
  (let ((description (or description "")))
    (if (string-match "\\`.*?[.!?]\\(?: \\|\\'\\)" description)
        (string-trim (match-string 0 description))
      description)))

(defvar lispm-tools--found (make-hash-table :test #'eq :weakness 'key)
  "The tools of MCP servers each agent found: actor -> their names.")

(defun lispm-tools-note-found (actor names)
  "Remember that ACTOR found the tools NAMES, so that they are offered to it."
  (let ((known (gethash actor lispm-tools--found)))
    (dolist (name names)
      (unless (member name known) (push name known)))
    (puthash actor known lispm-tools--found)))

(defun lispm-tools-offered-p (tool actor)
  "Return non-nil if TOOL's schema is sent to ACTOR's model with each request.
LispM's own tools are.  Those of MCP servers are while there are at
most `lispm-tools-offer-limit' of them; past that, only once ACTOR
found them with `search_tools' (`lispm-tools-note-found')."
  (or (null (lispm-tool-source tool))
      (<= (cl-count-if #'lispm-tool-source lispm-tools) lispm-tools-offer-limit)
      (and actor (member (lispm-tool-name tool) (gethash actor lispm-tools--found)) t)))

(defun lispm-tools-search (query &optional folder)
  "Return the tools and skills QUERY's words match, best first.
Each is a plist (:name :kind :description :type :score), ready for
JSON: `:type' is \"tool\" or \"skill\", `:kind' the tool's kind as a
string (nil for a skill), the description one sentence.  Skills
include those of the project at FOLDER.  An empty QUERY matches all."
  (let* ((all (null (lispm-tools--words query)))
         (tools (cl-loop for tool in lispm-tools
                         for score = (lispm-tools-score query (lispm-tool-name tool)
                                                        (lispm-tool-description tool))
                         when (or all (> score 0))
                         collect (list :name (lispm-tool-name tool)
                                       :kind (symbol-name (lispm-tool-kind tool))
                                       :source (lispm-tool-source tool)
                                       :description (lispm-tools--short
                                                     (lispm-tool-description tool))
                                       :type "tool" :score score)))
         (skills (and (fboundp 'lispm-skills-search)
                      (lispm-skills-search query folder))))
    (sort (append tools skills)
          (lambda (a b)
            (let ((sa (plist-get a :score)) (sb (plist-get b :score)))
              (if (= sa sb)
                  (string< (plist-get a :name) (plist-get b :name))
                (> sa sb)))))))

(lispm-define-tool search-tools (agent (query string "Words to look for in the names and descriptions."))
  "Find tools and skills by words in their names and descriptions.
A skill's instructions, and its tools, come from the skill tool."
  :kind 'read
  (let* ((found (lispm-tools-search query (lispm-tools--folder agent)))
         (served (cl-loop for hit in found
                          when (plist-get hit :source) collect (plist-get hit :name)))
         (new (cl-remove-if (lambda (name) (lispm-tools-offered-p (lispm-tool-get name) agent))
                            served)))
    (lispm-tools-note-found agent served)
    (if (null found)
        (format "Nothing matches %S." query)
      (concat
       (mapconcat (lambda (hit)
                    (format "%s (%s): %s" (plist-get hit :name)
                            (cond ((equal (plist-get hit :type) "skill") "skill")
                                  ((plist-get hit :source)
                                   (format "tool of MCP server %s, %s"
                                           (plist-get hit :source) (plist-get hit :kind)))
                                  (t (format "tool, %s" (plist-get hit :kind))))
                            (plist-get hit :description)))
                  found "\n")
       (and new (format "\n\nOffered to you from your next step: %s."
                        (string-join new ", ")))))))

(provide 'lispm-tools)
;;; lispm-tools.el ends here
