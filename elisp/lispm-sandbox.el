;;; lispm-sandbox.el --- Commands confined by bubblewrap  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The one place that builds bubblewrap's command lines.  `run_shell'
;; runs each command through
;;
;;   (lispm-sandbox-command MODE FOLDER ARGV &key network)
;;
;; and run_lisp's Emacs starts under `lispm-sandbox-system-arguments'.
;; In a confined mode (`folder', `read-only') a command sees the system
;; read-only (/usr, /bin, /lib..., /etc without its shadow files and
;; host keys), the agent's FOLDER (writable in `folder' mode, but its
;; .git read-only, as Codex keeps it), a private /tmp, and nothing else
;; of $HOME: none of ~/.ssh, ~/.gnupg, auth-source's files or LispM's
;; runtime directory, and those of them inside FOLDER are masked too
;; (`lispm-secrets-file-list').  It has its own PID namespace, so
;; /proc shows no other process (no Emacs's environment to read), no
;; network unless allowed, no capability, and dies with its parent.
;; Its environment is Emacs's, without the variables whose names say
;; they hold secrets (`lispm-secrets-name-p').
;;
;; Without bubblewrap, commands run unconfined, and LispM says so once
;; and in every shell approval (`lispm-sandbox-describe').

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-secrets)

(defgroup lispm-sandbox nil
  "Confining the shell commands agents run, with bubblewrap."
  :group 'lispm
  :prefix "lispm-sandbox-")

(defcustom lispm-sandbox-shell-mode 'folder
  "How `run_shell' confines a command, with bubblewrap when it is installed.
`folder': the system read-only, the agent's folder writable (its .git
read-only), a private /tmp, nothing else of $HOME, no network unless
allowed.  `read-only': the same, but the folder read-only too.
`off': unconfined, as the user's own shell.  Without bubblewrap every
mode is unconfined, and the approvals say so.  An approval can allow
one command the network (\\<lispm-approvals-mode-map>\\[lispm-approvals-allow-network]) or no sandbox (\\[lispm-approvals-allow-unconfined]); a
role whose policy allows `network' outright gives its shell commands
the network."
  :type '(choice (const :tag "The folder writable" folder)
                 (const :tag "Nothing writable but a private /tmp" read-only)
                 (const :tag "Unconfined" off)))

(defconst lispm-sandbox-system-folders '("/usr" "/bin" "/sbin" "/lib" "/lib32" "/lib64" "/libx32")
  "The system's folders a confined process sees, read-only.")

(defconst lispm-sandbox-masked-system-files
  '("/etc/shadow" "/etc/gshadow" "/etc/shadow-" "/etc/gshadow-" "/etc/ssh/" "/etc/sudoers"
    "/etc/sudoers.d/")
  "What of /etc a confined command does not see: passwords and host keys.")

(defvar lispm-sandbox-widened nil
  "What the user allowed the command that runs now beyond its sandbox.
nil, `network' (the network as well) or `off' (no sandbox).  Bound by
the call pipeline from the approval's answer while the tool runs.")

;;; Bubblewrap

(defvar lispm-sandbox--unconfined-told nil
  "The things the user was told run unconfined without bubblewrap.")

(defun lispm-sandbox-bwrap (&optional what)
  "Return bubblewrap's program, or nil if it is not installed.
WHAT, if non-nil, names what then runs unconfined; the user is told
once per WHAT."
  (or (executable-find "bwrap")
      (progn
        (when (and what (not (member what lispm-sandbox--unconfined-told)))
          (push what lispm-sandbox--unconfined-told)
          (display-warning
           'lispm (format "bubblewrap (bwrap) is not installed: %s run unconfined" what)
           :warning))
        nil)))

(defun lispm-sandbox-system-arguments (&optional extra)
  "Return bwrap's arguments that show the system read-only, and EXTRA folders.
A system folder that is a link stays a link.  A folder of EXTRA under
one already bound is not bound again."
  (let ((arguments nil) (bound nil))
    (dolist (folder lispm-sandbox-system-folders)
      (cond ((file-symlink-p folder)
             (setq arguments (append arguments (list "--symlink" (file-symlink-p folder) folder))))
            ((file-directory-p folder)
             (push (file-name-as-directory folder) bound)
             (setq arguments (append arguments (list "--ro-bind" folder folder))))))
    (dolist (folder extra)
      (let ((folder (file-name-as-directory (file-truename folder))))
        (unless (cl-some (lambda (outer) (string-prefix-p outer folder)) bound)
          (push folder bound)
          (setq arguments (append arguments (list "--ro-bind" folder folder))))))
    arguments))

(defun lispm-sandbox--mask (file)
  "Return bwrap's arguments that hide FILE, a file or a directory name."
  (if (directory-name-p file)
      (list "--tmpfs" (directory-file-name file))
    (list "--ro-bind" "/dev/null" file)))

(defun lispm-sandbox--masks (folder)
  "Return bwrap's arguments hiding the files of secrets under FOLDER and /etc."
  (let ((folder (file-name-as-directory folder)))
    (cl-loop for file in (append lispm-sandbox-masked-system-files (lispm-secrets-file-list))
             when (and (string-prefix-p (if (string-prefix-p "/etc/" file) "/etc/" folder) file)
                       (file-exists-p file))
             append (lispm-sandbox--mask file))))

(defun lispm-sandbox-environment ()
  "Return the environment of a confined command: Emacs's, without secrets.
A list of \"NAME=VALUE\" strings, one per name; the variables whose
names say they hold secrets (`lispm-secrets-name-p'), or whose values
are shaped like keys (`lispm-secrets-shape'), are left out."
  (let ((seen (make-hash-table :test 'equal)))
    ;; The first of a name wins, as for Emacs's own processes.
    (cl-remove-if (lambda (entry)
                    (let* ((at (string-search "=" entry))
                           (name (and at (substring entry 0 at))))
                      (or (null at) (gethash name seen)
                          (progn (puthash name t seen) nil)
                          (lispm-secrets-name-p name t)
                          (lispm-secrets-shape (substring entry (1+ at))))))
                  process-environment)))

(cl-defun lispm-sandbox-command (mode folder argv &key network)
  "Return the command line running ARGV in FOLDER, confined by MODE.
MODE is one of `lispm-sandbox-shell-mode''s values; NETWORK non-nil
lets the command reach the network.  With MODE `off', or without
bubblewrap, it is ARGV."
  (let ((bwrap (and (not (eq mode 'off)) (lispm-sandbox-bwrap "shell commands")))
        (folder (directory-file-name (file-truename folder))))
    (if (not bwrap)
        argv
      (append
       ;; bwrap itself starts with the cleaned environment: its process
       ;; inside the sandbox, PID 1 there, shows its own in /proc/1/environ.
       (list (or (executable-find "env") "/usr/bin/env") "-i")
       (lispm-sandbox-environment)
       (list bwrap "--unshare-all" "--die-with-parent" "--new-session" "--cap-drop" "ALL")
       (and network (list "--share-net"))
       ;; The private /tmp first: a folder under /tmp bound later shows on it.
       (list "--tmpfs" "/tmp")
       (lispm-sandbox-system-arguments)
       (list "--ro-bind" "/etc" "/etc")
       ;; A folder that is / itself would make the whole system writable.
       (list (if (and (eq mode 'folder) (not (equal folder "/"))) "--bind" "--ro-bind")
             folder folder)
       (let ((git (expand-file-name ".git" folder)))
         (and (eq mode 'folder) (file-exists-p git) (list "--ro-bind" git git)))
       (lispm-sandbox--masks folder)
       (list "--dev" "/dev" "--proc" "/proc" "--chdir" folder "--")
       argv))))

;;; Telling what a command may do

(defun lispm-sandbox-effective-mode (mode)
  "Return MODE as it will be: `off' when bubblewrap is not installed."
  (if (lispm-sandbox-bwrap) mode 'off))

(defun lispm-sandbox-describe (mode network)
  "Return, in a line, how a command would run in MODE, with NETWORK or not."
  (pcase (lispm-sandbox-effective-mode mode)
    ('off (if (eq mode 'off)
              "UNCONFINED: no sandbox (lispm-sandbox-shell-mode is off)"
            "UNCONFINED: bubblewrap is not installed"))
    (effective (format "in the sandbox: %s, %s"
                       (if (eq effective 'folder) "the folder writable (.git read-only)"
                         "nothing writable but a private /tmp")
                       (if network "the network on" "no network")))))

(defun lispm-sandbox-note (mode folder network)
  "Return the note for the model after a command failed in MODE in FOLDER.
NETWORK says whether it had the network.  Nil if it ran unconfined."
  (pcase (lispm-sandbox-effective-mode mode)
    ('off nil)
    (effective
     (format "\n[It ran in LispM's sandbox: %s; %s; nothing of $HOME outside it, no other \
process.  If it failed for that, say why you need more, and the user may allow it.]"
             (if (eq effective 'folder)
                 (format "only %s is writable (its .git is not) and a private /tmp"
                         (abbreviate-file-name folder))
               "nothing is writable but a private /tmp")
             (if network "the network was on" "the network was off")))))

(provide 'lispm-sandbox)
;;; lispm-sandbox.el ends here
