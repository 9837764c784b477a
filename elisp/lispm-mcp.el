;;; lispm-mcp.el --- The user's MCP servers, their tools LispM's tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The user's MCP servers give LispM's own agent their tools.  They
;; come from `lispm-mcp-servers', the shape of the `mcpServers' of
;; Claude Code's JSON, and from a project's `.mcp.json' once the user
;; trusts the project (`lispm-trust-project': it names commands to run).
;;
;; The sidecar runs the clients (python/lispm_sidecar/mcp_clients.py):
;; `lispm-mcp-sync' tells it the whole set of servers (`lispm/mcp-servers'),
;; it starts those not running, lists their tools, and this file makes
;; each one a LispM tool (`lispm-tools-define'):
;;
;;   mcp__SERVER__TOOL   its name for the model, and in run_lisp the
;;                       function mcp--SERVER--TOOL
;;   kind                `read' if the server says the tool only reads
;;                       (its readOnlyHint), else `mcp', which asks by
;;                       default; a role's rules narrowed by patterns
;;                       match SERVER/TOOL, so a role allows or denies a
;;                       server or a tool by name
;;   schema              the server's, sent as it came
;;
;; A call goes through the one pipeline like any other: validated,
;; decided by the policy (the approval shows the server, the tool and
;; the arguments), then sent to the sidecar (`lispm/mcp-call') with a
;; deadline, never waited for.  The sidecar says when a server's tools
;; changed or it died (`lispm/mcp-changed'); the next sync follows.
;;
;; Syncing happens when an own agent starts (its folder may bring a
;; project's servers), when the option changes, when the sidecar
;; restarts, and when a server says its tools changed; a model is
;; offered what was registered by its request.  Past
;; `lispm-tools-offer-limit' tools of servers, their schemas are sent
;; only once `search_tools' found them.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'auth-source)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-tools)
(require 'lispm-trust)

;;; Options

(defgroup lispm-mcp nil
  "The user's MCP servers, whose tools LispM's own agent calls."
  :group 'lispm
  :prefix "lispm-mcp-")

(defun lispm-mcp--option-changed (symbol value)
  "Set SYMBOL to VALUE; tell a live sidecar of the servers."
  (set-default symbol value)
  (when (and (fboundp 'lispm-mcp-sync) (lispm-sidecar-live-p))
    (lispm-mcp-sync)))

(defcustom lispm-mcp-servers nil
  "The user's MCP servers: an alist (NAME . SPEC).
NAME is a string, which the tools' names carry (mcp__NAME__TOOL).
SPEC is a plist with the keys of an `mcpServers' entry of Claude
Code's JSON, for a server LispM runs and talks to over its standard
input and output:

  :command PROGRAM  :args (ARG...)  :env ((VAR . VALUE)...)  :cwd DIR

or for one it reaches by Streamable HTTP:

  :url URL  :headers ((HEADER . VALUE)...)

In every string, ${VAR} is the environment's VAR (a server whose
VAR is unset is not started, and says so) and ${VAR:-DEFAULT} falls
back to DEFAULT.  A VALUE may instead be (auth-source :host HOST
:user USER), the secret `auth-source' has for them, so that no key
is written here."
  :type '(alist :key-type (string :tag "Name")
                :value-type (plist :tag "Spec"))
  :set #'lispm-mcp--option-changed)

(defcustom lispm-mcp-call-timeout 60
  "Seconds a call of an MCP server's tool may take before it fails."
  :type 'natnum)

(defcustom lispm-mcp-connect-timeout 30
  "Seconds a server may take to start and list its tools."
  :type 'natnum)

(defconst lispm-mcp-project-file ".mcp.json"
  "The file naming a project's MCP servers, at its root.")

(defvar lispm-mcp-project-file-limit (* 1024 1024)
  "The largest `.mcp.json' read, in bytes; a larger one is refused unread.")

(defconst lispm-mcp-description-limit 2000
  "The most characters of a server tool's description a model is sent.")

;;; Errors

;; SERVER
(lispm-define-error 'lispm-mcp-error "MCP server error"
                    '(lispm-tool-error lispm-for-the-model) -32073)

;;; Configuration

(defun lispm-mcp--expand (string server)
  "Return STRING with ${VAR} and ${VAR:-DEFAULT} taken from the environment.
Signal `lispm-mcp-error' naming SERVER if a VAR without default is unset."
  (replace-regexp-in-string
   "\\${\\([A-Za-z_][A-Za-z0-9_]*\\)\\(?::-\\([^}]*\\)\\)?}"
   (lambda (match)
     (let* ((var (match-string 1 match))
            (default (match-string 2 match))
            (value (getenv var)))
       (cond ((and value (not (string-empty-p value))) value)
             (default default)
             (t (lispm-signal 'lispm-mcp-error (list server)
                              "MCP server %s: the environment variable %s is not set"
                              server var)))))
   string t t))

(defun lispm-mcp--secret (spec server)
  "Return the secret that SPEC, (auth-source :host HOST ...), names, for SERVER."
  (let* ((found (car (apply #'auth-source-search :max 1 (cdr spec))))
         (secret (plist-get found :secret)))
    (cond ((functionp secret) (funcall secret))
          ((stringp secret) secret)
          (t (lispm-signal 'lispm-mcp-error (list server)
                           "MCP server %s: auth-source has no secret for %S"
                           server (cdr spec))))))

(defun lispm-mcp--value (value server)
  "Return VALUE of SERVER's spec, expanded: a string."
  (cond ((eq (car-safe value) 'auth-source) (lispm-mcp--secret value server))
        ((stringp value) (lispm-mcp--expand value server))
        ((numberp value) (number-to-string value))
        (t (lispm-signal 'lispm-mcp-error (list server)
                         "MCP server %s: %S is not a string" server value))))

(defun lispm-mcp--pairs (pairs server)
  "Return PAIRS, an alist or a plist or a hash table, as a hash table of strings.
Their values are expanded for SERVER."
  (let ((table (make-hash-table :test #'equal)))
    (cond ((hash-table-p pairs)
           (maphash (lambda (k v) (puthash (format "%s" k) (lispm-mcp--value v server) table))
                    pairs))
          ((and (consp pairs) (keywordp (car pairs)))
           (cl-loop for (k v) on pairs by #'cddr
                    do (puthash (substring (symbol-name k) 1) (lispm-mcp--value v server) table)))
          (t (pcase-dolist (`(,k . ,v) pairs)
               (puthash (format "%s" k) (lispm-mcp--value v server) table))))
    table))

(defun lispm-mcp--spec (name spec)
  "Return the SPEC of the server NAME as the sidecar takes it: a plist.
Strings are expanded and secrets fetched; signal `lispm-mcp-error'
for a spec that is neither a command nor a URL."
  (let ((get (lambda (key) (if (hash-table-p spec)
                               (gethash (substring (symbol-name key) 1) spec)
                             (plist-get spec key)))))
    (cond
     ((funcall get :command)
      (append (list :command (lispm-mcp--value (funcall get :command) name)
                    :args (vconcat (mapcar (lambda (arg) (lispm-mcp--value arg name))
                                           (funcall get :args))))
              (and (funcall get :env) (list :env (lispm-mcp--pairs (funcall get :env) name)))
              (and (funcall get :cwd)
                   (list :cwd (expand-file-name (lispm-mcp--value (funcall get :cwd) name))))))
     ((funcall get :url)
      (let ((url (lispm-mcp--value (funcall get :url) name)))
        (unless (string-match-p "\\`https?://" url)
          (lispm-signal 'lispm-mcp-error (list name)
                        "MCP server %s: its URL must be http or https, not %s" name url))
        (append (list :url url)
                (and (funcall get :headers)
                     (list :headers (lispm-mcp--pairs (funcall get :headers) name))))))
     (t (lispm-signal 'lispm-mcp-error (list name)
                      "MCP server %s: it needs :command or :url" name)))))

(defun lispm-mcp--project-file (folder)
  "Return the truename of the `.mcp.json' of the project at FOLDER, or nil.
It is in FOLDER or the nearest folder above with one."
  (when-let* ((folder folder)
              (root (locate-dominating-file folder lispm-mcp-project-file)))
    (file-truename (expand-file-name lispm-mcp-project-file root))))

(defun lispm-mcp--file-hash (file)
  "Return the SHA-256 of FILE's bytes.
Signal `lispm-mcp-error' if FILE is past `lispm-mcp-project-file-limit':
it is read each time an own agent starts, and Emacs must not wait."
  (let ((size (file-attribute-size (file-attributes file))))
    (when (and size (> size lispm-mcp-project-file-limit))
      (lispm-signal 'lispm-mcp-error (list file) "%s is %d bytes, past the %d LispM reads"
                    (abbreviate-file-name file) size lispm-mcp-project-file-limit)))
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (secure-hash 'sha256 (current-buffer))))

(defun lispm-mcp--read-project-file (file)
  "Return the servers FILE, a `.mcp.json', names: an alist (NAME . SPEC).
SPEC is a hash table.  Signal `lispm-mcp-error' if FILE is not such JSON."
  (let ((json (condition-case err
                  (with-temp-buffer
                    (insert-file-contents file)
                    (json-parse-buffer :object-type 'hash-table :null-object nil
                                       :false-object :json-false))
                (error (lispm-signal 'lispm-mcp-error (list file) "%s is not JSON: %s"
                                     (abbreviate-file-name file)
                                     (error-message-string err))))))
    (let ((servers (and (hash-table-p json) (gethash "mcpServers" json))))
      (unless (hash-table-p servers)
        (lispm-signal 'lispm-mcp-error (list file) "%s has no \"mcpServers\" object"
                      (abbreviate-file-name file)))
      (let (found)
        (maphash (lambda (name spec) (push (cons name spec) found)) servers)
        (nreverse found)))))

(defun lispm-mcp--to-trust (folder)
  "Return the project's `.mcp.json' around FOLDER to trust, as (FILE HASH WHAT).
For `lispm-trust-project-functions'."
  (when-let* ((file (lispm-mcp--project-file folder)))
    (list (list file (lispm-mcp--file-hash file)
                (format "the MCP servers of %s (%s)" (abbreviate-file-name file)
                        (condition-case nil
                            (mapconcat #'car (lispm-mcp--read-project-file file) ", ")
                          (lispm-mcp-error "not readable now")))))))

(add-hook 'lispm-trust-project-functions #'lispm-mcp--to-trust)

(defvar lispm-mcp--untrusted-said nil
  "The untrusted `.mcp.json' files the user was told of, with their hash.")

(defun lispm-mcp-project-servers (folder)
  "Return the servers of the project at FOLDER: an alist (NAME . SPEC).
Only if the user trusts its `.mcp.json' as it is now; nil otherwise,
and the user is told, once for each version of the file, how to
trust it."
  (when-let* ((file (lispm-mcp--project-file folder)))
    (let ((hash (lispm-mcp--file-hash file)))
      (if (lispm-trusted-p file hash)
          (lispm-mcp--read-project-file file)
        (unless (member (cons file hash) lispm-mcp--untrusted-said)
          (push (cons file hash) lispm-mcp--untrusted-said)
          (message "LispM: %s names MCP servers; %s.  Review it, then M-x lispm-trust-project"
                   (abbreviate-file-name file)
                   (if (lispm-trust-recorded-p file)
                       "it changed since you trusted it, so they do not run"
                     "they do not run until you trust the project")))
        nil))))

;;; The servers and their tools

(defvar lispm-mcp--folders nil
  "The folders of the agents that use MCP servers: their projects' count.")

(defvar lispm-mcp--status nil
  "How each server stands: an alist (NAME . PLIST).
PLIST has :tools, the number of its tools, :error, why it has
none, and :source, `user' or the `.mcp.json' it comes from.")

(defvar lispm-mcp--told nil
  "Non-nil once the sidecar was told of servers.")

(defun lispm-mcp--configured ()
  "Return the servers configured now: a list of (NAME SPEC SOURCE ERROR).
SPEC is as the sidecar takes it, or nil when ERROR says why it cannot
be.  The user's servers come first and win over a project's of the
same name."
  (let ((seen (make-hash-table :test #'equal)) found)
    (cl-flet ((add (name spec source)
                (unless (gethash name seen)
                  (puthash name t seen)
                  (push (condition-case err
                            (list name (lispm-mcp--spec name spec) source nil)
                          (lispm-mcp-error (list name nil source (lispm-error-message err))))
                        found))))
      (pcase-dolist (`(,name . ,spec) lispm-mcp-servers)
        (add (format "%s" name) spec 'user))
      (dolist (folder lispm-mcp--folders)
        (condition-case err
            (pcase-dolist (`(,name . ,spec) (lispm-mcp-project-servers folder))
              (add name spec (lispm-mcp--project-file folder)))
          (lispm-mcp-error
           (message "LispM: %s" (lispm-error-message err))))))
    (nreverse found)))

(defun lispm-mcp-tool-name (server tool)
  "Return the LispM name of the tool TOOL of SERVER: mcp__SERVER__TOOL.
Characters a model's tool name cannot hold become `_'; a name longer
than 64 characters is cut and ends with a hash of the whole."
  (let ((name (replace-regexp-in-string
               "[^A-Za-z0-9_-]" "_" (format "mcp__%s__%s" server tool))))
    (if (<= (length name) 64)
        name
      (concat (substring name 0 55) "_" (substring (secure-hash 'sha1 name) 0 8)))))

(defun lispm-mcp--schema (entry)
  "Return the input schema of ENTRY, a tool as the sidecar lists it.
A hash table, exact: the sidecar sends it as JSON text."
  (let ((text (plist-get entry :input_schema_json)))
    (or (and (stringp text)
             (ignore-errors
               (let ((schema (json-parse-string text :object-type 'hash-table
                                                :null-object nil :false-object :json-false)))
                 (and (hash-table-p schema) schema))))
        (let ((schema (make-hash-table :test #'equal)))
          (puthash "type" "object" schema)
          (puthash "properties" (make-hash-table :test #'equal) schema)
          schema))))

(defun lispm-mcp--description (server entry)
  "Return the description of ENTRY, a tool of SERVER, for the model."
  (let ((text (string-trim (replace-regexp-in-string
                            "[\0-\010\013-\037\177]" ""
                            (let ((d (plist-get entry :description))) (if (stringp d) d ""))))))
    (truncate-string-to-width
     (format "(MCP server %s) %s" server text) lispm-mcp-description-limit nil nil "…")))

(defun lispm-mcp--kind (entry)
  "Return the policy kind of ENTRY, a server's tool: `read' or `mcp'."
  (if (eq (plist-get (plist-get entry :annotations) :readOnlyHint) t) 'read 'mcp))

(defun lispm-mcp--arguments-text (arguments)
  "Return ARGUMENTS, a JSON object as a hash table, as indented JSON text."
  (with-temp-buffer
    (insert (json-serialize arguments :null-object nil :false-object :json-false))
    (ignore-errors (json-pretty-print-buffer))
    (buffer-string)))

(defun lispm-mcp--call (server tool arguments done)
  "Call SERVER's TOOL with ARGUMENTS through the sidecar; DONE gets the result."
  (lispm-sidecar-async-request
   'lispm/mcp-call (list :server server :tool tool :arguments arguments
                         :timeout lispm-mcp-call-timeout)
   :timeout (+ lispm-mcp-call-timeout 5)
   :on-success (lambda (result)
                 (funcall done (if (eq (plist-get result :is_error) t)
                                   (list :ok nil
                                         :error (format "MCP server %s, tool %s: %s"
                                                        server tool (plist-get result :text))
                                         :condition "lispm-mcp-error")
                                 (list :ok t :text (or (plist-get result :text) "")))))
   :on-error (lambda (text)
               (funcall done (list :ok nil
                                   :error (format "MCP server %s, tool %s: %s" server tool text)
                                   :condition "lispm-mcp-error")))))

(defun lispm-mcp--define (server entry)
  "Make ENTRY, a tool of SERVER as the sidecar lists it, a LispM tool."
  (let ((tool (plist-get entry :name)))
    (lispm-tools-define
     (lispm-mcp-tool-name server tool) (lispm-mcp--kind entry)
     (lispm-mcp--description server entry)
     (lambda (_agent arguments)
       (lispm-tools-defer (lambda (done) (lispm-mcp--call server tool arguments done))))
     :schema (lispm-mcp--schema entry)
     :source server
     :targeter (lambda (_agent arguments)
                 (list :names (list (format "%s/%s" server tool))
                       :text (format "MCP server %s, tool %s, arguments:\n%s"
                                     server tool (lispm-mcp--arguments-text arguments)))))))

(defun lispm-mcp--register (configured servers)
  "Register the tools of SERVERS, as the sidecar lists them, and no others.
CONFIGURED is what `lispm-mcp--configured' gave; the status of each
server is kept in `lispm-mcp--status'."
  (lispm-tools-remove #'lispm-tool-source)
  (setq lispm-mcp--status nil)
  (pcase-dolist (`(,name ,_spec ,source ,error) configured)
    (let* ((listed (cl-find name servers :key (lambda (s) (plist-get s :name)) :test #'equal))
           (tools (and listed (append (plist-get listed :tools) nil)))
           (why (or error (and listed (plist-get listed :error))
                    (and (not listed) "the sidecar did not list it"))))
      (dolist (entry tools)
        (condition-case err
            (lispm-mcp--define name entry)
          (error (setq why (format "tool %s: %s" (plist-get entry :name)
                                   (error-message-string err))))))
      (push (cons name (list :tools (length tools) :error why :source source))
            lispm-mcp--status)))
  (setq lispm-mcp--status (nreverse lispm-mcp--status)))

(defun lispm-mcp-sync (&optional folder callback)
  "Tell the sidecar which MCP servers there are, and register their tools.
FOLDER, if non-nil, is an agent's folder, whose project's servers count
from now on.  CALLBACK, if non-nil, is called with no argument once
the tools are registered (or the sidecar failed).  Return at once:
the sidecar starts the servers and lists their tools, each within
`lispm-mcp-connect-timeout' seconds."
  (when folder
    (cl-pushnew (file-name-as-directory (file-truename folder)) lispm-mcp--folders
                :test #'equal))
  (let* ((configured (lispm-mcp--configured))
         (servers (make-hash-table :test #'equal))
         (finish (lambda (listed)
                   (lispm-mcp--register configured listed)
                   (when callback (funcall callback)))))
    (pcase-dolist (`(,name ,spec) configured)
      (when spec (puthash name spec servers)))
    (if (and (zerop (hash-table-count servers)) (not lispm-mcp--told))
        (funcall finish nil)
      ;; Told only after the request: a sidecar this request starts
      ;; must not sync again from `lispm-sidecar-connected-hook'.
      (lispm-sidecar-async-request
       'lispm/mcp-servers (list :servers servers :timeout lispm-mcp-connect-timeout)
       ;; One declaration may wait for another before its own starts.
       :timeout (+ (* 2 lispm-mcp-connect-timeout) 10)
       :on-success (lambda (result)
                     (funcall finish (append (plist-get result :servers) nil)))
       :on-error (lambda (text)
                   (message "LispM: the MCP servers could not be reached: %s" text)
                   (funcall finish nil)))
      (setq lispm-mcp--told t))
    nil))

(defun lispm-mcp-status ()
  "Return how each MCP server stands: an alist (NAME . PLIST).
PLIST has :tools (how many it gave), :error (why none, or nil) and
:source (`user', or the project's `.mcp.json')."
  lispm-mcp--status)

;;;###autoload
(defun lispm-mcp-describe ()
  "Show the MCP servers, where each comes from, and their tools or error.
The servers are synced first, so what is shown is what the sidecar
has now."
  (interactive)
  (lispm-mcp-sync
   nil (lambda ()
         (with-help-window (get-buffer-create "*LispM MCP servers*")
           (if (null lispm-mcp--status)
               (princ "No MCP servers: set `lispm-mcp-servers', or trust a project \
whose .mcp.json names some (M-x lispm-trust-project).\n")
             (pcase-dolist (`(,name . ,status) lispm-mcp--status)
               (princ (format "%s  (%s)\n" name
                              (let ((source (plist-get status :source)))
                                (if (eq source 'user) "lispm-mcp-servers"
                                  (abbreviate-file-name source)))))
               (if-let* ((why (plist-get status :error)))
                   (princ (format "  no tools: %s\n" why))
                 (dolist (tool lispm-tools)
                   (when (equal (lispm-tool-source tool) name)
                     (princ (format "  %-40s %s\n" (lispm-tool-name tool)
                                    (lispm-tool-kind tool))))))
               (terpri)))))))

(defun lispm-mcp-prompt-note (actor)
  "Return the note of ACTOR's system prompt on the servers' tools not offered.
That is nil when it is offered all of them; else the servers and how
many tools each has, and that `search_tools' finds them."
  (let ((hidden (cl-loop for tool in lispm-tools
                         when (and (lispm-tool-source tool)
                                   (not (lispm-tools-offered-p tool actor)))
                         collect (lispm-tool-source tool))))
    (when hidden
      (format "The user's MCP servers have more tools than you are offered: %s.  \
search_tools finds them by words; those it finds are offered to you from your \
next step."
              (mapconcat (lambda (server)
                           (format "%s (%d)" server (cl-count server hidden :test #'equal)))
                         (seq-uniq hidden) ", ")))))

(defun lispm-mcp--resync ()
  "Sync again, soon, if an earlier sidecar was told of servers."
  (when lispm-mcp--told
    (run-at-time 0 nil #'lispm-mcp-sync)))

(defvar lispm-mcp--resync-timer nil
  "The timer of a sync a server's change asked for.")

(cl-defmethod lispm-sidecar-handle-notification ((_method (eql 'lispm/mcp-changed)) _params)
  "A server's tools changed, or it died: sync soon, once for a burst."
  (unless (timerp lispm-mcp--resync-timer)
    (setq lispm-mcp--resync-timer
          (run-at-time 0.2 nil (lambda ()
                                 (setq lispm-mcp--resync-timer nil)
                                 (when lispm-mcp--told (lispm-mcp-sync)))))))

(add-hook 'lispm-sidecar-connected-hook #'lispm-mcp--resync)

(provide 'lispm-mcp)
;;; lispm-mcp.el ends here
