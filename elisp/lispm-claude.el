;;; lispm-claude.el --- Claude Code as a LispM agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The adapter for Claude Code (npm `@anthropic-ai/claude-code').  Claude
;; reaches its own MCP server through `--mcp-config', a file only the
;; user can read that holds the server's URL and token, so the token is
;; neither on the command line nor in the environment of the commands
;; Claude runs.  `--allowedTools' pre-approves LispM's tools; the user's
;; own MCP servers stay (no `--strict-mcp-config').
;;
;; Claude also gets Emacs through the protocol of its IDE extensions: the
;; sidecar serves a WebSocket for each Claude terminal and writes its lock
;; file, and `CLAUDE_CODE_SSE_PORT' in that terminal's environment names
;; it, so Claude connects at start-up.  Its edits then come to Emacs as
;; diffs to accept or reject (see lispm-ide.el).

;;; Code:

(require 'lispm-agents)

;;;###autoload (autoload 'lispm-claude "lispm-claude" "Start Claude Code in a LispM terminal at the current project's root." t)
(lispm-define-agent-kind claude
  :title "Claude Code"
  :program "claude"
  :npm "@anthropic-ai/claude-code")

(cl-defmethod lispm-agent-command ((kind (eql 'claude)) agent)
  "Return the command to start Claude Code as AGENT of KIND.
An agent that resumes one of an earlier Emacs resumes its session."
  (let ((launch (lispm-agent-launch agent))
        (resume (lispm-agent-resumes agent)))
    ;; A session id of LispM's choosing binds this terminal to its own
    ;; transcript from the start (the sidecar then follows /clear).
    (append (list (lispm-agent-executable kind))
            (if (stringp resume)
                (list "--resume" resume)
              (list "--session-id" (plist-get launch :session_id)))
            (list "--mcp-config" (plist-get launch :claude_mcp_config)
                  "--allowedTools" "mcp__lispm__*")
            lispm-claude-arguments)))

(cl-defmethod lispm-agent-dialog ((_kind (eql 'claude)) buffer)
  "Return why a paste into Claude Code's BUFFER waits: its composer not ready."
  (lispm-agent-composer-pending buffer "❯"))

(cl-defmethod lispm-agent-environment ((_kind (eql 'claude)) agent)
  "Point Claude Code, as AGENT, at its own IDE server in Emacs.
The port is set in this terminal's environment only; the lock file that
holds the server's token is private to the user."
  (when-let* ((port (plist-get (lispm-agent-launch agent) :ide_port)))
    (list (format "CLAUDE_CODE_SSE_PORT=%d" port))))

(provide 'lispm-claude)
;;; lispm-claude.el ends here
