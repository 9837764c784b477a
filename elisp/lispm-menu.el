;;; lispm-menu.el --- One menu of what LispM does  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; M-x lispm-menu: a transient menu of LispM's commands, each entry
;; the command itself, none new:
;;
;;   Start   an agent of any kind (one key per kind of
;;           `lispm-agent-kinds'), LispM's own agent, a helper from a role
;;   Look    the agent list, approvals (with how many wait), the ledger,
;;           the inspector, the App Store
;;   Resume  a session of the own agent, the agents of the last Emacs
;;   Here    mention the region, or the line, to Claude
;;   Sidecar restart it, the protocol log and its events buffer
;;
;; An entry that cannot run here is greyed out (inapt) and says what it
;; needs: a folder to start in, a model, a file, a running Claude, the
;; kind's CLI.  Only transient features of the transient bundled with
;; Emacs 29.1 (0.4.1) are used: zero-argument description functions,
;; `:inapt-if', `:if' and a group's `:setup-children'.

;;; Code:

(require 'cl-lib)
(require 'transient)
(require 'lispm-agents)
(require 'lispm-approvals)
(require 'lispm-model)
(require 'lispm-sidecar)
(require 'lispm-ide)

;;; What an entry needs

(defun lispm-menu--folder ()
  "Return the folder an agent started from here works in, or nil if none.
It is the current project's root, or `default-directory' if that is an
existing directory."
  (let ((folder (lispm-agents-default-folder)))
    (and (file-directory-p folder) folder)))

(defun lispm-menu--label (label missing)
  "Return LABEL, followed by what it needs if MISSING, a string, is non-nil."
  (if missing (format "%s (needs %s)" label missing) label))

(defun lispm-menu--missing-folder ()
  "Return \"a folder\" if no agent can be started from here, else nil."
  (and (not (lispm-menu--folder)) "a folder"))

(defun lispm-menu--missing-model ()
  "Return what LispM's own agent lacks to start from here, or nil."
  (or (lispm-menu--missing-folder)
      (and (null lispm-models) "a model in `lispm-models'")))

(defun lispm-menu--missing-mention ()
  "Return what `lispm-send-region' lacks in this buffer, or nil."
  (cond ((not buffer-file-name) "a buffer visiting a file")
        ((not (lispm-ide-claude-agents)) "a running Claude Code")))

(defun lispm-menu--missing-cli (kind)
  "Return what starting an agent of KIND lacks here, or nil."
  (or (lispm-menu--missing-folder)
      (condition-case nil
          (progn (lispm-agent-executable kind) nil)
        (lispm-cli-missing (format "%s installed" (alist-get kind lispm-agent-kinds))))))

;;; Descriptions

(defun lispm-menu--start-heading ()
  "Return the heading of the Start group: where agents start."
  (if-let* ((folder (lispm-menu--folder)))
      (format "Start, in %s" (abbreviate-file-name folder))
    "Start (needs a folder)"))

(defun lispm-menu--any-kind-description ()
  "Describe the entry that asks for the kind of agent to start."
  (lispm-menu--label "An agent of any kind..." (lispm-menu--missing-folder)))

(defun lispm-menu--own-agent-description ()
  "Describe the entry for LispM's own agent, with its model."
  (lispm-menu--label (if lispm-models
                         (format "LispM's own agent (%s)" (lispm-model-default))
                       "LispM's own agent")
                     (lispm-menu--missing-model)))

(defun lispm-menu--helper-description ()
  "Describe the entry for a helper from a role."
  (lispm-menu--label "A helper from a role..." (lispm-menu--missing-folder)))

(defun lispm-menu--approvals-description ()
  "Return the description of the approvals entry, with how many wait."
  (let ((count (lispm-approvals-count)))
    (if (zerop count)
        "Approvals (none waits)"
      (format "Approvals (%d waiting)" count))))

(defun lispm-menu--mention-description ()
  "Return the description of the entry that mentions code to Claude."
  (lispm-menu--label (if (use-region-p)
                         "Mention the region to Claude"
                       "Mention this line to Claude")
                     (lispm-menu--missing-mention)))

(defun lispm-menu--sidecar-description ()
  "Return the description of the entry that restarts the sidecar."
  (if (lispm-sidecar-live-p) "Restart the sidecar" "Start the sidecar"))

;;; One entry per kind

(defun lispm-menu--with-kinds (children)
  "Return CHILDREN, then an entry for each agent kind, keys 1 to 9.
Each runs the kind's command `lispm-KIND', made by
`lispm-define-agent-kind'; kinds without one, or past the ninth, are
started by the entry for any kind."
  (append
   children
   (transient-parse-suffixes
    'lispm-menu
    (cl-loop for (kind . title) in lispm-agent-kinds
             for command = (intern (format "lispm-%s" kind))
             for missing = (lispm-menu--missing-cli kind)
             for key from 1 to 9
             when (commandp command)
             collect (list (number-to-string key)
                           (lispm-menu--label title missing)
                           command
                           :inapt-if (if missing 'always 'ignore))))))

;;; The menu

;;;###autoload (autoload 'lispm-menu "lispm-menu" "Show a menu of what LispM does." t)
(transient-define-prefix lispm-menu ()
  "Show a menu of what LispM does; an entry that cannot run here is greyed out."
  [:description lispm-menu--start-heading :setup-children lispm-menu--with-kinds
   ("s" lispm-start-agent :description lispm-menu--any-kind-description
    :inapt-if lispm-menu--missing-folder)
   ("a" lispm-agent :description lispm-menu--own-agent-description
    :inapt-if lispm-menu--missing-model)
   ("h" lispm-helper-start :description lispm-menu--helper-description
    :inapt-if lispm-menu--missing-folder)]
  [["Look"
    ("l" "Agents" lispm)
    ("p" lispm-approvals-show :description lispm-menu--approvals-description)
    ("L" "Ledger" lispm-ledger)
    ;; `lispm-inspect' comes with the inspector (issue 14, part 2):
    ;; until it is defined, the entry is not shown at all.
    ("i" "Inspector" lispm-inspect :if (lambda () (fboundp 'lispm-inspect)))
    ("A" "App Store" lispm-apps)]
   ["Resume"
    ("r" "A session of the own agent..." lispm-own-agent-resume)
    ("M" "The model of an own agent..." lispm-own-agent-set-model)
    ("R" "The agents of the last Emacs..." lispm-resume-agents)]]
  [["Here"
    ("m" lispm-send-region :description lispm-menu--mention-description
     :inapt-if lispm-menu--missing-mention)]
   ["Sidecar"
    ("S" lispm-restart-sidecar :description lispm-menu--sidecar-description)
    ("d" lispm-toggle-debug
     :description (lambda () (if (lispm-sidecar-debug-p)
                                 "Protocol log: on (turn it off)"
                               "Protocol log: off (turn it on, and show it)")))]]
  (interactive)
  ;; The kinds, and the autoloads of the commands above, come with `lispm'.
  (require 'lispm)
  (transient-setup 'lispm-menu))

(provide 'lispm-menu)
;;; lispm-menu.el ends here
