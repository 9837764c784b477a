;;; delivery-host.el --- A batch Emacs delivering messages to a fake Claude Code  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by the delivery benchmark (tests/bench/delivery.py) as
;; `emacs --batch -Q -L elisp -l tests/bench/delivery-host.el'.
;;
;; It loads LispM and starts, with `lispm-agent-start', a Claude Code
;; agent whose program is the fake CLI's wrapper (the file named by
;; `LISPM_BENCH_FAKE_CLAUDE'), in the folder `LISPM_BENCH_PROJECT', in a
;; real LispM terminal.  It also registers a second agent without a CLI
;; (as host.el does), through whose MCP server the benchmark sends the
;; messages.  It writes both agents' facts, as JSON, to the file named
;; by `LISPM_BENCH_HOST_OUT', and idles until the file named by
;; `LISPM_BENCH_HOST_STOP' appears.
;;
;; Meanwhile it times, with `float-time', what Emacs does for each
;; delivery, and writes the times (in ms, in order) as JSON to the file
;; named by `LISPM_BENCH_DELIVERY_SAMPLES' before it exits:
;;
;;   paste    each call of `lispm-paste-submit' (the paste's write to
;;            the pty and the Return's timer);
;;   request  each `emacs/paste' request in `jsonrpc-connection-receive'
;;            (the handler, the paste and the answer's write);
;;   link     for each `emacs/paste' request, all the time spent on the
;;            sidecar's link since the one before: the process filter
;;            (reading and parsing the 4 KB request and the activity
;;            notifications) and every message's dispatch;
;;   return   each `lispm-term-send' (the Return, 0.4 s after a paste);
;;   gcs, gc_ms  the garbage collections while the rounds ran, and their time;
;;   paste_gcs   those that ran inside `lispm-paste-submit'.
;;
;; The advice is the benchmark's own; LispM's files are not changed.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'jsonrpc)
;; Whatever LispM keeps under the user's Emacs directory (such as its
;; ledger) goes to the benchmark's own folder instead.
(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))

(require 'lispm)

(defvar lispm-bench-delivery-lifetime 300
  "Seconds after which the host gives up waiting for its stop file.")

(defvar lispm-bench-delivery--paste nil
  "Seconds of each `lispm-paste-submit', newest first.")

(defvar lispm-bench-delivery--request nil
  "Seconds of each `emacs/paste' request's dispatch, newest first.")

(defvar lispm-bench-delivery--link nil
  "Seconds on the sidecar link per `emacs/paste' request, newest first.")

(defvar lispm-bench-delivery--return nil
  "Seconds of each `lispm-term-send', newest first.")

(defvar lispm-bench-delivery--link-pending 0.0
  "Seconds on the sidecar link since the last `emacs/paste' request.")

(defun lispm-bench-delivery--env (name)
  "Return the environment variable NAME, or signal an error if it is unset."
  (or (getenv name) (error "%s is not set" name)))

;;; Timing

(defvar lispm-bench-delivery--paste-gcs 0
  "How many times a garbage collection ran inside `lispm-paste-submit'.")

(defun lispm-bench-delivery--time-paste (function &rest args)
  "Call FUNCTION with ARGS and record its wall time as a paste."
  (let ((start (float-time))
        (gcs gcs-done))
    (unwind-protect (apply function args)
      (push (- (float-time) start) lispm-bench-delivery--paste)
      (cl-incf lispm-bench-delivery--paste-gcs (- gcs-done gcs)))))

(defun lispm-bench-delivery--time-send (function &rest args)
  "Call FUNCTION with ARGS and record its wall time as a Return."
  (let ((start (float-time)))
    (unwind-protect (apply function args)
      (push (- (float-time) start) lispm-bench-delivery--return))))

(defun lispm-bench-delivery--time-receive (function connection message)
  "Call FUNCTION with CONNECTION and MESSAGE and record its wall time.
An `emacs/paste' request closes the link time of one delivery."
  (let ((start (float-time))
        (paste (equal (format "%s" (plist-get message :method)) "emacs/paste")))
    (unwind-protect (funcall function connection message)
      (let ((elapsed (- (float-time) start)))
        (if (not paste)
            (cl-incf lispm-bench-delivery--link-pending elapsed)
          (push elapsed lispm-bench-delivery--request)
          (push (+ lispm-bench-delivery--link-pending elapsed) lispm-bench-delivery--link)
          (setq lispm-bench-delivery--link-pending 0.0))))))

(defun lispm-bench-delivery--time-filter (function process string)
  "Call FUNCTION, the sidecar's process filter, with PROCESS and STRING; time it."
  (let ((start (float-time)))
    (unwind-protect (funcall function process string)
      (cl-incf lispm-bench-delivery--link-pending (- (float-time) start)))))

(defun lispm-bench-delivery--ms (seconds)
  "Return SECONDS, a list, newest first, as a vector of ms, oldest first."
  (vconcat (mapcar (lambda (s) (* 1000 s)) (reverse seconds))))

;;; Agents

(defun lispm-bench-delivery--register (kind folder)
  "Register an agent of KIND in FOLDER without a CLI; return the agent."
  (let ((agent (lispm-agents-register kind folder)))
    (let ((launch (lispm-sidecar-request 'lispm/agent-start
                                         (lispm-agents--identity agent) 60)))
      (setf (lispm-agent-launch agent) launch
            (lispm-agent-port agent) (plist-get launch :port)))
    agent))

(defun lispm-bench-delivery--write (file data)
  "Write DATA, a plist, to FILE as JSON, atomically."
  (let ((temp (concat file ".tmp")))
    (with-temp-file temp
      (insert (json-serialize data)))
    (rename-file temp file t)))

(defun lispm-bench-delivery--wait (predicate seconds what)
  "Wait up to SECONDS for PREDICATE to return non-nil; signal an error naming WHAT."
  (let ((deadline (+ (float-time) seconds)))
    (while (not (funcall predicate))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun lispm-bench-delivery-run ()
  "Start the fake Claude and the sender, then idle until the stop file appears."
  (let* ((out (lispm-bench-delivery--env "LISPM_BENCH_HOST_OUT"))
         (stop (lispm-bench-delivery--env "LISPM_BENCH_HOST_STOP"))
         (samples (lispm-bench-delivery--env "LISPM_BENCH_DELIVERY_SAMPLES"))
         (project (lispm-bench-delivery--env "LISPM_BENCH_PROJECT"))
         (deadline (+ (float-time) lispm-bench-delivery-lifetime))
         (gcs gcs-done)
         (gc-seconds gc-elapsed))
    (setq lispm-claude-program (lispm-bench-delivery--env "LISPM_BENCH_FAKE_CLAUDE"))
    (advice-add 'lispm-paste-submit :around #'lispm-bench-delivery--time-paste)
    (advice-add 'lispm-term-send :around #'lispm-bench-delivery--time-send)
    (advice-add 'jsonrpc-connection-receive :around #'lispm-bench-delivery--time-receive)
    (let ((process (jsonrpc--process (lispm-sidecar-connection))))
      (add-function :around (process-filter process) #'lispm-bench-delivery--time-filter))
    (unwind-protect
        (let* ((claude (lispm-agent-start 'claude project))
               (sender (lispm-bench-delivery--register 'codex project)))
          (lispm-bench-delivery--wait (lambda () (lispm-agent-buffer claude)) 60
                                      "the fake Claude's terminal")
          (lispm-bench-delivery--write
           out (list :claude (lispm-agent-name claude)
                     :claude_pid (lispm-agent-pid claude)
                     :backend (symbol-name (lispm-term-backend (lispm-agent-buffer claude)))
                     :sender (lispm-agent-name sender)
                     :url (plist-get (lispm-agent-launch sender) :url)
                     :token_file (plist-get (lispm-agent-launch sender) :token_file)
                     :sidecar_pid (lispm-sidecar-pid)
                     :emacs_pid (emacs-pid)))
          (setq gcs gcs-done gc-seconds gc-elapsed)
          (while (and (not (file-exists-p stop)) (< (float-time) deadline))
            (accept-process-output nil 0.1)))
      (lispm-bench-delivery--write
       samples (list :paste (lispm-bench-delivery--ms lispm-bench-delivery--paste)
                     :request (lispm-bench-delivery--ms lispm-bench-delivery--request)
                     :link (lispm-bench-delivery--ms lispm-bench-delivery--link)
                     :return (lispm-bench-delivery--ms lispm-bench-delivery--return)
                     :paste_gcs lispm-bench-delivery--paste-gcs
                     :gcs (- gcs-done gcs)
                     :gc_ms (* 1000 (- gc-elapsed gc-seconds))))
      (dolist (agent (lispm-agents))
        (lispm-agent-close agent))
      (lispm-sidecar-stop))))

(lispm-bench-delivery-run)

;;; delivery-host.el ends here
