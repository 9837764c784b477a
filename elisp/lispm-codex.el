;;; lispm-codex.el --- Codex as a LispM agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The adapter for the Codex CLI (npm `@openai/codex').  Codex reaches
;; its own MCP server through `-c mcp_servers.lispm.*' settings for this
;; run only; the user's config.toml is never edited.  The bearer token
;; reaches Codex in the variable `LISPM_MCP_TOKEN', read from the agent's
;; private token file by a one-line shell launcher (so it is never on a
;; command line), and `shell_environment_policy' keeps that variable out
;; of the commands Codex runs.  LispM's tools are pre-approved.
;;
;; Codex runs with `--no-daemon': otherwise its first TUI starts a
;; detached app server that outlives the terminal and keeps the first
;; launcher's environment.

;;; Code:

(require 'lispm-agents)

;;;###autoload (autoload 'lispm-codex "lispm-codex" "Start Codex in a LispM terminal at the current project's root." t)
(lispm-define-agent-kind codex
  :title "Codex"
  :program "codex"
  :npm "@openai/codex")

(defconst lispm-codex--token-variable "LISPM_MCP_TOKEN"
  "The environment variable that carries the MCP token to Codex.")

(defun lispm-codex--settings (url)
  "Return Codex `-c' arguments that attach it to its MCP server at URL."
  (cl-loop for (key . value)
           in `(("mcp_servers.lispm.url" . ,(format "%S" url))
                ("mcp_servers.lispm.bearer_token_env_var"
                 . ,(format "%S" lispm-codex--token-variable))
                ("mcp_servers.lispm.default_tools_approval_mode" . "\"approve\"")
                ;; A LispM tool may wait for the user's approval in Emacs.
                ("mcp_servers.lispm.tool_timeout_sec" . "3600")
                ("shell_environment_policy.exclude"
                 . ,(format "[%S]" lispm-codex--token-variable)))
           append (list "-c" (concat key "=" value))))

(cl-defmethod lispm-agent-dialog ((_kind (eql 'codex)) buffer)
  "Return why a paste into Codex's BUFFER waits: its composer not ready."
  (lispm-agent-composer-pending buffer "›"))

(cl-defmethod lispm-agent-command ((kind (eql 'codex)) agent)
  "Return the command to start Codex as AGENT of KIND.
An agent that resumes one of an earlier Emacs resumes its thread
\=(`codex resume THREAD-ID')."
  (let ((launch (lispm-agent-launch agent))
        (resume (lispm-agent-resumes agent)))
    (lispm-agent-token-launcher
     lispm-codex--token-variable (plist-get launch :token_file)
     (append (list (lispm-agent-executable kind))
             (and (stringp resume) (list "resume"))
             (list "--no-daemon")
             (lispm-codex--settings (plist-get launch :url))
             lispm-codex-arguments
             (and (stringp resume) (list resume))))))

(provide 'lispm-codex)
;;; lispm-codex.el ends here
