;;; lispm-app-harness.el --- The App Store's AI Harness shelf  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The AI Harness shelf has a page for each agent LispM can run: Claude
;; Code, Codex, Hermes, OpenClaw and Holon.  A page is an Org file,
;; lispm-app-harness-KIND.org, that says what the agent is, where it
;; comes from, its licence and how LispM connects to it.  What depends on
;; this machine is computed each time the page is drawn, into its
;; dynamic block
;;
;;   #+BEGIN: lispm-harness :kind KIND
;;   #+END:
;;
;; the version LispM is tested with (`lispm-harness-tested-version'),
;; whether the CLI is installed here (`lispm-harness-installed': on
;; variable `exec-path', under `lispm-harness-prefix', or in the .deps of
;; a LispM source checkout), and buttons: Install (see
;; lispm-app-harness-install.el), Start (`lispm-agent-start') and, on
;; Hermes's page, `lispm-hermes-setup'.  Where no installer can run the
;; block says what to run by hand.
;;
;; Opening an agent from the store starts it when it is installed, and
;; shows its page otherwise.

;;; Code:

(require 'lispm-apps)
(require 'lispm-agents)
(require 'lispm-app-harness-install)
(require 'org)

(declare-function lispm-hermes-setup "lispm-hermes" ())

(defconst lispm-harness-kinds '(claude codex hermes openclaw holon)
  "The agent kinds on the AI Harness shelf, in the shelf's order.")

(defun lispm-harness--require-kind (kind)
  "Load the adapter of KIND, for its program option."
  (require (intern (format "lispm-%s" kind))))

;;; Installed or not

(defvar lispm-harness-deps-directory (expand-file-name "../.deps/" lispm-directory)
  "The .deps folder of a LispM source checkout, where `make install' puts the CLIs.")

(defun lispm-harness--deps-executable (kind)
  "Return where `make install' puts KIND's CLI in `lispm-harness-deps-directory'."
  (when-let* ((file (pcase kind
                      ((or 'claude 'codex) (format "npm/node_modules/.bin/%s" kind))
                      ('hermes "hermes-venv/bin/hermes")
                      ('openclaw "openclaw/node_modules/.bin/openclaw"))))
    (expand-file-name file lispm-harness-deps-directory)))

(defun lispm-harness-installed (kind)
  "Return where KIND's CLI is installed here, (WHERE . FILE), or nil.
WHERE is `path' if its program option (`lispm-KIND-program') is found
on variable `exec-path' or is an executable file, `prefix' if it is under
`lispm-harness-prefix', `deps' if in the .deps of LispM's source checkout."
  (lispm-harness--require-kind kind)
  (if-let* ((found (executable-find (lispm-agent-program kind))))
      (cons 'path found)
    (cl-loop for (where . file) in `((prefix . ,(lispm-harness-prefix-executable kind))
                                     (deps . ,(lispm-harness--deps-executable kind)))
             when (and file (file-executable-p file))
             return (cons where file))))

(defun lispm-harness--adopt (kind)
  "Make LispM find KIND's CLI where it is installed, for this session.
A CLI installed only under the prefix or in .deps is not on variable
`exec-path': its program option is set to the file.  Return the file, or
nil if KIND is not installed."
  (pcase (lispm-harness-installed kind)
    (`(path . ,file) file)
    (`(,_ . ,file)
     (set (intern (format "lispm-%s-program" kind)) file)
     (message "LispM: lispm-%s-program is %s for this session (customize it to keep it)"
              kind (abbreviate-file-name file))
     file)))

(defun lispm-harness-start (kind)
  "Start an agent of KIND in the current project and show it, once installed."
  (unless (lispm-harness--adopt kind)
    (user-error "%s is not installed here" (alist-get kind lispm-agent-kinds)))
  (lispm-agent-start-and-show kind))

;;; The page's computed part

(defun lispm-harness--button (label action help)
  "Insert a button LABEL, to call ACTION with no arguments; HELP is its tooltip."
  (insert-button label 'action (lambda (_) (funcall action))
                 'follow-link t 'help-echo help)
  (insert "  "))

(defun lispm-harness--insert-installed (kind)
  "Insert whether KIND's CLI is installed here, with a Start button if so."
  (pcase (lispm-harness-installed kind)
    ('nil (insert "- Installed here :: no\n"))
    (`(,where . ,file)
     (insert (format "- Installed here :: yes, =%s= (%s)\n" (abbreviate-file-name file)
                     (pcase where
                       ('path "on exec-path")
                       ('prefix "under lispm-harness-prefix")
                       ('deps "in LispM's .deps, from make install"))))
     (insert "  ")
     (lispm-harness--button "[Start]" (lambda () (lispm-harness-start kind))
                            "Start this agent in the current project")
     (when (eq kind 'hermes)
       (lispm-harness--button "[M-x lispm-hermes-setup]"
                              (lambda ()
                                (lispm-harness--adopt 'hermes)
                                (require 'lispm-hermes)
                                (call-interactively #'lispm-hermes-setup))
                              "Add LispM's bridge to Hermes's config.yaml, once"))
     (insert "\n"))))

(defun lispm-harness--insert-install (kind)
  "Insert how KIND is installed: the command and its button, or what to do by hand."
  (let* ((recipe (lispm-harness-install-recipe kind))
         (command (plist-get recipe :command))
         (missing (plist-get recipe :missing)))
    (insert (format "- Install into :: =%s=\n"
                    (abbreviate-file-name (plist-get recipe :folder))))
    (cond ((null command)
           (insert "- By hand :: " (plist-get recipe :reason) ".\n"))
          (missing
           (insert (format "- By hand :: this needs %s, which is not on exec-path.  \
Install it, then run:\n" (string-join missing ", "))))
          (t
           (insert "  ")
           (lispm-harness--button "[Install]" (lambda ()
                                               (call-interactively
                                                (lambda (prefix)
                                                  (interactive
                                                   (list (and current-prefix-arg
                                                              (lispm-harness-read-prefix))))
                                                  (lispm-harness-install kind prefix))))
                                  "Run this command, once you approve it (C-u: another folder)")
           (insert "runs this, after your approval; by hand, without a network, the same:\n")))
    (when command
      (insert "#+begin_src sh\n" command "\n#+end_src\n"))))

(defun org-dblock-write:lispm-harness (params)
  "Write the computed part of an AI Harness page; PARAMS has its :kind.
The version LispM is tested with, whether the agent is installed here,
and how to install or start it."
  (let ((kind (plist-get params :kind)))
    (insert (format "- Tested with :: %s\n"
                    (cond ((eq kind 'openclaw)
                           (format "version %s, with Node %s"
                                   (lispm-harness-tested-version kind)
                                   (alist-get 'node lispm-harness-tested-versions)))
                          ((lispm-harness-tested-version kind)
                           (format "version %s" (lispm-harness-tested-version kind)))
                          (t "none: real Holon is untested"))))
    (lispm-harness--insert-installed kind)
    (lispm-harness--insert-install kind)
    (insert "  ")
    (lispm-harness--button "[Refresh]" #'lispm-harness-refresh-page
                           "Look again at what is installed")))

(defconst lispm-harness--block-regexp "^#\\+BEGIN: lispm-harness\\b"
  "The first line of an AI Harness page's computed part.")

(defun lispm-harness-refresh-page ()
  "Compute the machine-dependent part of the AI Harness page in this buffer."
  (interactive)
  (let ((inhibit-read-only t)
        (line (line-number-at-pos)))
    (save-excursion
      (goto-char (point-min))
      (while (re-search-forward lispm-harness--block-regexp nil t)
        (beginning-of-line)
        (let ((inhibit-message t) (message-log-max nil))
          (org-update-dblock))
        (forward-line 1)))
    (set-buffer-modified-p nil)
    (goto-char (point-min))
    (forward-line (1- line))))

(defun lispm-harness--page-opened ()
  "Fill in the computed part of an App Store page that has one."
  (when (and lispm-apps-page-mode
             (save-excursion (goto-char (point-min))
                             (re-search-forward lispm-harness--block-regexp nil t)))
    (lispm-harness-refresh-page)))

(add-hook 'lispm-apps-page-mode-hook #'lispm-harness--page-opened)

(defun lispm-harness--refresh-pages (&rest _)
  "Redraw the AI Harness pages that are open, after an installer ended."
  (dolist (buffer (buffer-list))
    (with-current-buffer buffer
      (when (bound-and-true-p lispm-apps-page-mode)
        (lispm-harness--page-opened)))))

(add-hook 'lispm-harness-installed-functions #'lispm-harness--refresh-pages)

;;; The shelf

(defun lispm-harness-app (kind)
  "Return the App Store's app for agents of KIND."
  (lispm-apps-get (intern (format "harness-%s" kind))))

(defun lispm-harness-open (kind)
  "Start an agent of KIND if it is installed here; else show its page."
  (if (lispm-harness-installed kind)
      (lispm-harness-start kind)
    (lispm-apps-page (lispm-harness-app kind))))

(defmacro lispm-harness--define-app (kind title summary)
  "Put agents of KIND on the AI Harness shelf as TITLE, with SUMMARY.
This defines the command `lispm-harness-open-KIND'."
  (let ((command (intern (format "lispm-harness-open-%s" kind))))
    `(progn
       (defun ,command ()
         ,(format "Start %s if it is installed here; else show its page." title)
         (interactive)
         (lispm-harness-open ',kind))
       (lispm-define-app ,(intern (format "harness-%s" kind))
         :title ,title
         :shelf ai-harness
         :summary ,summary
         :command ,command
         :page ,(format "lispm-app-harness-%s.org" kind)))))

(lispm-harness--define-app claude "Claude Code"
  "Anthropic's coding agent, in a terminal, with LispM's tools and IDE protocol.")
(lispm-harness--define-app codex "Codex"
  "OpenAI's coding agent CLI, in a terminal, with LispM's tools over MCP.")
(lispm-harness--define-app hermes "Hermes"
  "Nous Research's Hermes Agent, in a terminal, with LispM's tools over MCP.")
(lispm-harness--define-app openclaw "OpenClaw"
  "OpenClaw's sessions, through its Gateway, with LispM's tools over MCP.")
(lispm-harness--define-app holon "Holon"
  "Holon's long-lived agents, through its daemon (real Holon untested).")

(provide 'lispm-app-harness)
;;; lispm-app-harness.el ends here
