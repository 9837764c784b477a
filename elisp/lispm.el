;;; lispm.el --- A Lisp Machine for AI agents, built on Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;; Version: 0.1.0
;; Package-Requires: ((emacs "29.1"))
;; URL: https://example.invalid/lispm

;;; Commentary:

;; LispM runs the agent CLIs people already use (Claude Code, Codex, ...)
;; in Emacs terminals, all in one list, each with a private MCP server
;; of its own served by LispM's Python sidecar.
;;
;; Start here:
;;   M-x lispm-menu          one menu of all of it
;;   M-x lispm               the list of agents
;;   M-x lispm-agent         LispM's own agent, inside this Emacs
;;   M-x lispm-helper-start  an own agent of a role (reviewer, tester, ...)
;;   M-x lispm-claude        Claude Code at the current project's root
;;   M-x lispm-codex         Codex at the current project's root
;;   M-x lispm-holon         a Holon agent, through its daemon
;;   M-x lispm-hermes        Hermes Agent (once: M-x lispm-hermes-setup)
;;   M-x lispm-openclaw      an OpenClaw session, through its Gateway
;;   M-x lispm-start-agent   ask which agent to start
;;   M-x lispm-resume-agents the agents of the last Emacs, back
;;   M-x lispm-ledger        who said what to whom
;;   M-x lispm-inspect       one agent, whole: policy, approvals, inbox, calls
;;   M-x lispm-apps          the App Store and its Classic AI shelf
;;
;; The files, one concern each, by layer (magit's way: plumbing under
;; the domain, views over it, features on top).  A file requires files
;; of its own layer or of those under it, except lispm-approvals.el,
;; which draws with lispm-present.el (tests/elisp/lispm-layout-test.el
;; checks there is no cycle).
;;
;; Plumbing: processes and files, no agent in sight
;;   lispm-base.el      group, version, root error and codes; files read and written whole
;;   lispm-sidecar.el   start/restart the sidecar, JSON-RPC both ways
;;   lispm-term.el      terminal backends: vterm, eat, term (with fixes)
;;   lispm-edit.el      editing as one undo step, change records, revert
;;   lispm-review.el    an edit reviewed hunk by hunk: what is let through, what the model is told
;;   lispm-session-git.el  the sessions' commits, in order, through git fast-import
;;   lispm-model.el     the models (`lispm-models'), streamed by the sidecar
;;   lispm-lisp.el      run_lisp's language: reader, checker and fuel
;;   lispm-lisp-child.el  the Emacs a run_lisp program runs in
;;
;; Domain: agents, what they may do, and how they talk
;;   lispm-agents.el    the agent registry and its lifecycle
;;   lispm-claude.el, lispm-codex.el, lispm-holon.el   one adapter per CLI
;;   lispm-hermes.el    Hermes, with its MCP bridge and one-time setup
;;   lispm-openclaw.el  OpenClaw, a Gateway's session
;;   lispm-resume.el    agents remembered, resumed after Emacs restarts
;;   lispm-policy.el    allow / ask / deny per role and kind
;;   lispm-roles.el     roles as Org files (prompt, tools, policy); the stricter-of rule
;;   lispm-project-rules.el  a project's AGENTS.md and CLAUDE.md, for the own agent
;;   lispm-secrets.el   what no tool shows an agent: keys, passwords, tokens
;;   lispm-sandbox.el   bubblewrap's command lines: run_shell and run_lisp confined
;;   lispm-tools.el     LispM's tool registry and its base tools
;;   lispm-trust.el     what of a project the user trusts to run, by content hash
;;   lispm-skills.el    org-file skills, their code run once trusted
;;   lispm-mcp.el       the user's MCP servers; each of their tools a LispM tool
;;   lispm-introspect.el  tools that read Emacs itself: apropos, docs, source, Info
;;   lispm-web.el       fetch_url: the web as text, through url.el, never waited for
;;   lispm-approvals.el asking the user: the approvals and their buffer
;;   lispm-calls.el     the one call pipeline: any actor calling a tool, under the policy
;;   lispm-messages.el  messaging for actors that live in Emacs; list_agents
;;   lispm-paste.el     pasting a due message into a composer
;;   lispm-session.el   the own agent's session: an Org file, committed to git
;;   lispm-memory.el    the own agent's memory: Org files in git; the remember tool
;;   lispm-plan.el      the plan tool: the own agent's steps as Org TODO items
;;   lispm-turn.el      one turn of the own agent: its table, its calls, its sink, restarts
;;   lispm-run-lisp.el  the run_lisp tool: programs whose tool calls pass the policy
;;   lispm-helpers.el   helpers started from roles, and their retirement
;;
;; Views: what the user reads and acts on
;;   lispm-present.el   LispM's links; each type's methods live with its owner
;;   lispm-list.el      the agent list
;;   lispm-ledger.el    the ledger view
;;   lispm-inspect.el   the inspector: one agent, whole, live
;;   lispm-notice.el    when an agent needs you: the list's mark, the mode line
;;   lispm-condition.el a failed turn's condition and restarts, as in SLIME
;;
;; Features: what a user, or an agent, reaches first
;;   lispm.el           this file: the commands above, M-x lispm-start-agent
;;   lispm-own-agent.el LispM's own agent: M-x lispm-agent
;;   lispm-rewind.el    rewind a session to a turn (code, conversation, both,
;;                      summary), undo it, fork there
;;   lispm-menu.el      the one menu (transient)
;;   lispm-views.el     Emacs as the agents see it: the editor-state push
;;   lispm-ide.el       Claude Code's diffs reviewed in Emacs; lispm-send-region
;;   lispm-apps.el, apps/   the App Store and its apps

;;; Code:

(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-claude)
(require 'lispm-codex)
(require 'lispm-holon)
(require 'lispm-hermes)
(require 'lispm-openclaw)
(require 'lispm-resume)
(require 'lispm-list)
(require 'lispm-paste)
(require 'lispm-ledger)
(require 'lispm-views)
(require 'lispm-ide)
(require 'lispm-policy)
(require 'lispm-roles)
(require 'lispm-approvals)
(require 'lispm-notice)
(require 'lispm-tools)
(require 'lispm-skills)
(require 'lispm-mcp)
(require 'lispm-calls)
(require 'lispm-introspect)
(require 'lispm-web)
(require 'lispm-helpers)

;; The App Store and its apps load when first used.  These forms name
;; their commands in a source checkout, which has no generated
;; autoloads; the installed package's autoloads copy the apps' ones
;; (package.el makes none for apps/).  "apps/..." is found through the
;; directory of this file, on `load-path' in both.
(autoload 'lispm-apps "lispm-apps" "Open the LispM App Store." t)
(autoload 'lispm-menu "lispm-menu" "Show a menu of what LispM does." t)

;; LispM's own agent loads Org with its first session, so only when used.
(autoload 'lispm-agent "lispm-own-agent" "Start LispM's own agent." t)
(autoload 'lispm-own-agent-resume "lispm-own-agent" "Reopen a session of LispM's own agent." t)
(autoload 'lispm-own-agent-revert-turn "lispm-own-agent" "Take back what a turn changed." t)
(autoload 'lispm-own-agent-compact "lispm-own-agent" "Summarise a session's older turns." t)
(autoload 'lispm-rewind "lispm-rewind" "Rewind a session to a turn, or fork it there." t)
(autoload 'lispm-own-agent-set-model "lispm-own-agent" "Switch an own agent's model." t)
;; The inspector is an Org buffer: Org loads with the first one.
(autoload 'lispm-inspect "lispm-inspect" "Show an agent whole, in its inspector." t)
;;;###autoload
(autoload 'lispm-doctor "apps/lispm-app-doctor" "Talk with LispM's Doctor." t)
;;;###autoload
(autoload 'lispm-mycin "apps/lispm-app-mycin" "Start a MYCIN consultation." t)
;;;###autoload
(autoload 'lispm-blocks "apps/lispm-app-blocks" "Open the blocks world." t)

;;;###autoload
(defun lispm-start-agent (kind &optional folder)
  "Start an agent of KIND, asked for, at the current project's root.
With a prefix argument, also ask for the FOLDER to work in."
  (interactive
   (list (intern (completing-read
                  "Start agent: "
                  (mapcar (lambda (k) (symbol-name (car k))) lispm-agent-kinds)
                  nil t))
         (and current-prefix-arg (read-directory-name "In folder: "))))
  (lispm-agent-start-and-show kind folder))

(add-hook 'lispm-agent-started-functions
          (lambda (_agent) (lispm-views-ensure)))

(provide 'lispm)
;;; lispm.el ends here
