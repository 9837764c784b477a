;;; lispm-holon.el --- Holon agents in LispM, through their daemon  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The adapter for Holon (holon-run/holon), a daemon that keeps
;; long-lived agents.  The Holon daemon must already run (`holon serve'
;; or `holon daemon start'), as the same user, at the address the
;; sidecar's environment names (`HOLON_HTTP_ADDR', default
;; 127.0.0.1:7878; `HOLON_HOME', default ~/.holon).
;;
;; A LispM agent named holon, holon-2, ... is the daemon's agent of the
;; same id; the sidecar creates its home folder if it is missing.  Its
;; terminal shows `holon tui --agent NAME'.  Holon has no MCP client, so
;; the agent reaches LispM's tools with the shell command `lispm-tool',
;; taught by a skill the sidecar writes into the agent's skills folder
;; while the terminal is open.  Messages for it go to the daemon's
;; prompt endpoint, not through the terminal.

;;; Code:

(require 'lispm-agents)

;;;###autoload (autoload 'lispm-holon "lispm-holon" "Show a Holon agent in a LispM terminal, working at the project's root." t)
(lispm-define-agent-kind holon
  :title "Holon"
  :program "holon"
  :arguments-doc "Extra arguments after `holon tui --agent NAME' for every Holon terminal."
  :doc "Show a Holon agent in a LispM terminal, working at the project's root.
With a prefix argument, ask for the FOLDER it works in.")

(cl-defmethod lispm-agent-install-hint ((_kind (eql 'holon)))
  "Say how to get Holon, which is not on npm."
  "install Holon from https://github.com/holon-run/holon (its release \
tarball, the Homebrew tap holon-run/tap, or `cargo install holon'), start \
its daemon with `holon daemon start',")

(cl-defmethod lispm-agent-command ((kind (eql 'holon)) agent)
  "Return the command to show AGENT, of KIND, in a terminal."
  (append (list (lispm-agent-executable kind) "tui" "--agent" (lispm-agent-name agent))
          lispm-holon-arguments))

(cl-defmethod lispm-agent-environment ((_kind (eql 'holon)) agent)
  "Point AGENT's terminal at the daemon the sidecar talks to."
  (let ((launch (lispm-agent-launch agent)))
    (delq nil (list (when-let* ((addr (plist-get launch :holon_http_addr)))
                      (concat "HOLON_HTTP_ADDR=" addr))
                    (when-let* ((home (plist-get launch :holon_home)))
                      (concat "HOLON_HOME=" home))))))

(provide 'lispm-holon)
;;; lispm-holon.el ends here
