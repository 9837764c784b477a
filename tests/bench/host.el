;;; host.el --- A batch Emacs hosting one agent's MCP server for the benchmarks  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/__main__.py) as
;; `emacs --batch -Q -L elisp -l tests/bench/host.el'.
;;
;; It loads LispM, starts the sidecar and registers one agent the way
;; `lispm-agent-start' does, but without launching a CLI: the agent goes
;; into the registry and the sidecar starts its MCP server.  It then
;; writes the server's URL and token file, as JSON, to the file named by
;; `LISPM_BENCH_HOST_OUT', and idles, answering the sidecar from the real
;; registry (`emacs/list-agents'), until the file named by
;; `LISPM_BENCH_HOST_STOP' appears or `lispm-bench-host-lifetime' seconds
;; have passed.

;;; Code:

(require 'cl-lib)
(require 'json)
;; Whatever LispM keeps under the user's Emacs directory (such as its
;; ledger) goes to the benchmark's own folder instead.
(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))

(require 'lispm)

(defvar lispm-bench-host-lifetime 600
  "Seconds after which the host gives up waiting for its stop file.")

(defun lispm-bench-host--env (name)
  "Return the environment variable NAME, or signal an error if it is unset."
  (or (getenv name) (error "%s is not set" name)))

(defun lispm-bench-host--register (kind folder)
  "Register an agent of KIND in FOLDER and start its server; return the agent."
  (let ((agent (lispm-agents-register kind folder)))
    (let ((launch (lispm-sidecar-request 'lispm/agent-start
                                         (lispm-agents--identity agent) 60)))
      (setf (lispm-agent-launch agent) launch
            (lispm-agent-port agent) (plist-get launch :port)))
    agent))

(defun lispm-bench-host--write (file data)
  "Write DATA, a plist, to FILE as JSON, atomically."
  (let ((temp (concat file ".tmp")))
    (with-temp-file temp
      (insert (json-serialize data)))
    (rename-file temp file t)))

(defun lispm-bench-host-run ()
  "Host one agent until the stop file appears, then stop the sidecar."
  (let* ((out (lispm-bench-host--env "LISPM_BENCH_HOST_OUT"))
         (stop (lispm-bench-host--env "LISPM_BENCH_HOST_STOP"))
         (agent (lispm-bench-host--register 'claude default-directory))
         (launch (lispm-agent-launch agent))
         (deadline (+ (float-time) lispm-bench-host-lifetime)))
    (lispm-bench-host--write out (list :name (lispm-agent-name agent)
                                       :url (plist-get launch :url)
                                       :token_file (plist-get launch :token_file)
                                       :sidecar_pid (lispm-sidecar-pid)
                                       :emacs_pid (emacs-pid)))
    (unwind-protect
        (while (and (not (file-exists-p stop)) (< (float-time) deadline))
          (accept-process-output nil 0.1))
      (lispm-sidecar-stop))))

(lispm-bench-host-run)

;;; host.el ends here
