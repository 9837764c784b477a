;;; lispm-hermes.el --- Hermes Agent as a LispM agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The adapter for Hermes Agent (PyPI `hermes-agent[mcp,cli,pty]',
;; tested with 0.19.0), in its classic terminal interface.
;;
;; Hermes reads MCP servers only from its config.yaml, so a one-time
;; `M-x lispm-hermes-setup' adds one entry, `mcp_servers.lispm': LispM's
;; bridge (`python -m lispm_sidecar.bridge', run with the sidecar's
;; Python), an MCP server on stdio that forwards to the terminal's own
;; HTTP server.  Each terminal names that server in two variables the
;; entry passes on: `LISPM_MCP_URL' and `LISPM_MCP_TOKEN_FILE' (the
;; token file, mode 0600; the token itself is never in an environment or
;; on a command line).  A `hermes' started elsewhere gets a bridge with
;; no tools.
;;
;; Messages are pasted into Hermes's composer only while its conversation
;; database says it waits for its user: a Return during a run would
;; interrupt the run.

;;; Code:

(require 'lispm-agents)

;;;###autoload (autoload 'lispm-hermes "lispm-hermes" "Start Hermes in a LispM terminal at the current project's root." t)
(lispm-define-agent-kind hermes
  :title "Hermes"
  :program "hermes"
  :doc "Start Hermes in a LispM terminal at the current project's root.
With a prefix argument, ask for the FOLDER to work in.  Run
`lispm-hermes-setup' once before, so that Hermes finds LispM's tools.")

(defcustom lispm-hermes-config-file nil
  "Hermes's config.yaml for `lispm-hermes-setup'.
Nil means $HERMES_HOME/config.yaml, else ~/.hermes/config.yaml."
  :type '(choice (const :tag "Hermes's own" nil) file)
  :group 'lispm-hermes)

(defconst lispm-hermes-package "hermes-agent[mcp,cli,pty]==0.19.0"
  "The PyPI requirement of the Hermes LispM is tested with.")

(cl-defmethod lispm-agent-install-hint ((_kind (eql 'hermes)))
  "Say how to get Hermes, a PyPI package."
  (format "install it into a venv of its own with `python3 -m venv ~/.hermes-venv && \
~/.hermes-venv/bin/pip install \"%s\"', run `M-x lispm-hermes-setup' once,"
          lispm-hermes-package))

(cl-defmethod lispm-agent-command ((kind (eql 'hermes)) agent)
  "Return the command to start Hermes, of KIND, as AGENT.
An agent that resumes one of an earlier Emacs resumes its session."
  (let ((resume (lispm-agent-resumes agent)))
    (append (list (lispm-agent-executable kind))
            (and (stringp resume) (list "--resume" resume))
            lispm-hermes-arguments)))

(defconst lispm-hermes--dialog-regexp
  (rx (or "Approve Once" "type 1/2/3" "Type 1/2/3"))
  "What Hermes's confirmation dialogs show (as for `/new' or a risky command).")

(cl-defmethod lispm-agent-dialog ((_kind (eql 'hermes)) buffer)
  "Describe the confirmation dialog open in Hermes's BUFFER, or return nil.
Hermes's state database does not show a dialog the user opened (such as
`/new' asking before it drops the conversation), and its Return picks
the highlighted choice: so the screen's last lines are read."
  (and (string-match-p lispm-hermes--dialog-regexp (lispm-term-tail buffer 3000))
       "a confirmation dialog"))

(cl-defmethod lispm-agent-environment ((_kind (eql 'hermes)) agent)
  "Name AGENT's MCP server and token file for LispM's bridge."
  (let ((launch (lispm-agent-launch agent)))
    (list (concat "LISPM_MCP_URL=" (plist-get launch :url))
          (concat "LISPM_MCP_TOKEN_FILE=" (plist-get launch :token_file)))))

(defun lispm-hermes-setup-run ()
  "Add LispM's bridge to Hermes's config.yaml; return (EXIT-CODE . OUTPUT).
Nothing else in the file changes; a missing or malformed file is
refused (a non-zero EXIT-CODE, the reason in OUTPUT) and nothing is written."
  (let* ((hermes (lispm-agent-executable 'hermes))
         (python (lispm-sidecar-find-python))
         (source (directory-file-name (lispm-sidecar-source-directory)))
         (process-environment
          (cons (concat "PYTHONPATH=" source
                        (when-let* ((old (getenv "PYTHONPATH"))) (concat ":" old)))
                process-environment)))
    (with-temp-buffer
      (let ((code (apply #'call-process python nil t nil
                         "-m" "lispm_sidecar.hermes_setup" "--hermes" hermes
                         "--command" python "--pythonpath" source
                         (when lispm-hermes-config-file
                           (list "--config" (expand-file-name lispm-hermes-config-file))))))
        (cons code (string-trim (buffer-string)))))))

;;;###autoload
(defun lispm-hermes-setup ()
  "Add LispM's bridge to the `mcp_servers' of Hermes's config.yaml, once.
Hermes then offers LispM's tools in every terminal LispM starts, and
none in a Hermes started elsewhere.  Nothing else in the file changes;
a missing or malformed config file is reported and nothing is written."
  (interactive)
  (pcase-let ((`(,code . ,output) (lispm-hermes-setup-run)))
    (if (eql code 0)
        (message "LispM: %s" output)
      (user-error "LispM: Hermes setup failed: %s" output))))

(provide 'lispm-hermes)
;;; lispm-hermes.el ends here
