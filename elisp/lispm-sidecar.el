;;; lispm-sidecar.el --- The link between Emacs and LispM's Python sidecar  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; LispM's sockets, file watchers and durable state live in a Python
;; process, the sidecar.  This file starts it on first use, talks to it
;; with JSON-RPC 2.0 over its stdio (`jsonrpc.el' here, pygls there),
;; answers its requests, and restarts it if it dies.
;;
;; It knows nothing about agents or buffers: other files add methods to
;; `lispm-sidecar-handle-request' and `lispm-sidecar-handle-notification',
;; and re-establish their state from `lispm-sidecar-connected-hook', which
;; runs after every (re)start.  So a test can load this file alone.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'seq)
(require 'lispm-base)

;;; Options

(defgroup lispm-sidecar nil
  "The Python sidecar of LispM."
  :group 'lispm
  :prefix "lispm-sidecar-")

(defcustom lispm-sidecar-python nil
  "The Python interpreter that runs the sidecar, or nil to find one.
When nil, LispM uses the environment variable `LISPM_SIDECAR_PYTHON',
then the `.venv' of a source checkout, then the virtual environment
that \\[lispm-install-sidecar] creates in `lispm-sidecar-venv-directory'."
  :type '(choice (const :tag "Find it" nil) file))

(defcustom lispm-sidecar-venv-directory (locate-user-emacs-file "lispm/venv")
  "Where \\[lispm-install-sidecar] creates the sidecar's virtual environment."
  :type 'directory)

(defcustom lispm-sidecar-exit-wait 3
  "Seconds an exiting Emacs waits for the sidecar to stop.
The sidecar deletes the agents' token files and Claude's IDE lock
files as it stops; a sidecar that takes longer is killed."
  :type 'number)

(defcustom lispm-ledger-file (locate-user-emacs-file "lispm/ledger.sqlite3")
  "The file of the durable ledger of messages, requests and replies.
The sidecar keeps it, and opens it when it starts: a change takes
effect at the next start (\\[lispm-restart-sidecar])."
  :type 'file)

(defconst lispm-sidecar-protocol-version 1
  "The version of the Emacs-sidecar protocol this file speaks.")

(lispm-define-error 'lispm-sidecar-error "LispM sidecar error" 'lispm-error -32054)
(lispm-define-error 'lispm-sidecar-version-mismatch
  "LispM and its sidecar do not match" 'lispm-sidecar-error -32005)
(lispm-define-error 'lispm-unknown-method "No such method" 'lispm-error -32601)

(defconst lispm-sidecar--internal-error-code -32603
  "The JSON-RPC code of an error no LispM condition describes.")

;;; Finding Python and the sidecar's sources

(defun lispm-sidecar-source-directory ()
  "Return the directory of the `lispm_sidecar' Python package.
An installed package carries it in its `python' folder; a source
checkout has it in `python' next to `elisp'."
  (cl-loop for dir in (list (expand-file-name "python" lispm-directory)
                            (expand-file-name "../python" lispm-directory))
           when (file-exists-p (expand-file-name "lispm_sidecar/__main__.py" dir))
           return (file-name-as-directory (expand-file-name dir))
           finally (signal 'lispm-sidecar-error
                           (list "LispM's Python sources are missing"
                                 lispm-directory))))

(defun lispm-sidecar-find-python ()
  "Return the Python interpreter for the sidecar, or signal a `user-error'."
  (let ((candidates
         (list lispm-sidecar-python
               (getenv "LISPM_SIDECAR_PYTHON")
               (expand-file-name "../.venv/bin/python" lispm-directory)
               (expand-file-name "bin/python" lispm-sidecar-venv-directory))))
    (or (cl-find-if (lambda (file) (and file (file-executable-p file))) candidates)
        (user-error "No Python for the LispM sidecar: run M-x lispm-install-sidecar"))))

;;; The connection

(defclass lispm-sidecar-jsonrpc-connection (jsonrpc-process-connection) ()
  :documentation "The JSON-RPC connection to LispM's sidecar.")

(defvar lispm-sidecar--connection nil
  "The live connection to the sidecar, or nil.")

(defvar lispm-sidecar--stopping nil
  "Non-nil while LispM stops the sidecar on purpose.")

(defvar lispm-sidecar--deaths nil
  "Times at which the sidecar died unexpectedly, newest first.")

(defvar lispm-sidecar--info nil
  "The sidecar's answer to `lispm/hello': a plist.")

(defvar lispm-sidecar-exited-hook nil
  "Hook run when the sidecar has exited, whether asked to or not.
Whatever waited on the dead sidecar fails from here.")

(defvar lispm-sidecar-connected-hook nil
  "Hook run after the sidecar has started and greeted Emacs.
It runs after the first start and after every restart, so functions
on it re-register whatever the sidecar must know, such as live agents.")

(defvar lispm-sidecar--log-size 0
  "Size of the protocol log in characters; 0 turns it off.")

(defun lispm-sidecar--events-config ()
  "Return the `jsonrpc-connection' initargs for the protocol log."
  ;; jsonrpc.el logs every message by default, unbounded: off, unless debugging.
  (if (slot-exists-p 'jsonrpc-connection '-events-buffer-config)
      (list :events-buffer-config (list :size lispm-sidecar--log-size :format 'full))
    (list :events-buffer-scrollback-size lispm-sidecar--log-size)))

(defun lispm-sidecar--set-log-size (connection size)
  "Make CONNECTION keep SIZE characters of protocol log."
  (if (slot-exists-p connection '-events-buffer-config)
      (setf (slot-value connection '-events-buffer-config)
            (list :size size :format 'full))
    (setf (slot-value connection '-events-buffer-scrollback-size) size)))

(defun lispm-sidecar--make-process ()
  "Start the sidecar process and return it."
  (let ((process-environment
         (cons (concat "PYTHONPATH=" (lispm-sidecar-source-directory)
                       (when-let* ((old (getenv "PYTHONPATH"))) (concat ":" old)))
               process-environment)))
    ;; Adaptive read buffering makes Emacs skip a pipe for up to 50 ms
    ;; after a small read from it; the sidecar sends many small messages,
    ;; and a paste request would wait that out.
    (let ((process-adaptive-read-buffering nil))
      (make-process
       :name "lispm-sidecar"
       :command (list (lispm-sidecar-find-python) "-m" "lispm_sidecar")
       :connection-type 'pipe
       :coding 'utf-8-emacs-unix
       :noquery t
       ;; jsonrpc.el expects exactly this name for the stderr buffer.
       :stderr (get-buffer-create "*lispm-sidecar stderr*")))))

(defun lispm-sidecar--stderr-tail (connection)
  "Return the last lines the sidecar of CONNECTION wrote to stderr."
  (let ((buffer (jsonrpc-stderr-buffer connection)))
    (if (buffer-live-p buffer)
        (with-current-buffer buffer
          (string-trim (buffer-substring-no-properties
                        (save-excursion (goto-char (point-max))
                                        (forward-line -8) (point))
                        (point-max))))
      "")))

(defun lispm-sidecar--start ()
  "Start the sidecar, greet it and return the connection."
  (let* ((connection
          (apply #'make-instance 'lispm-sidecar-jsonrpc-connection
                 :name "lispm-sidecar"
                 :process #'lispm-sidecar--make-process
                 :request-dispatcher #'lispm-sidecar--dispatch-request
                 :notification-dispatcher #'lispm-sidecar--dispatch-notification
                 :on-shutdown #'lispm-sidecar--on-shutdown
                 (lispm-sidecar--events-config)))
         (hello
          (condition-case err
              (jsonrpc-request connection 'lispm/hello
                               (list :protocol lispm-sidecar-protocol-version
                                     :version lispm-version
                                     :emacs_pid (emacs-pid)
                                     :ledger_file (expand-file-name lispm-ledger-file))
                               :timeout 30)
            (jsonrpc-error
             (let ((tail (lispm-sidecar--stderr-tail connection))
                   (message (alist-get 'jsonrpc-error-message (cdr err)))
                   (code (alist-get 'jsonrpc-error-code (cdr err))))
               (lispm-sidecar--end connection 0)
               (if (eql code (lispm-error-jsonrpc-code 'lispm-sidecar-version-mismatch))
                   (signal 'lispm-sidecar-version-mismatch (list message))
                 (signal 'lispm-sidecar-error
                         (list (format "The sidecar did not start: %s" message)
                               tail))))))))
    (unless (eql (plist-get hello :protocol) lispm-sidecar-protocol-version)
      (lispm-sidecar--end connection 0)
      (signal 'lispm-sidecar-version-mismatch
              (list (format "the sidecar speaks protocol %s, LispM %s"
                            (plist-get hello :protocol)
                            lispm-sidecar-protocol-version))))
    (setq lispm-sidecar--connection connection
          lispm-sidecar--info hello)
    (run-hooks 'lispm-sidecar-connected-hook)
    connection))

(defun lispm-sidecar-info ()
  "Return the sidecar's answer to `lispm/hello', a plist, or nil if none ran."
  lispm-sidecar--info)

(defun lispm-sidecar-live-p ()
  "Return non-nil if the sidecar is running."
  (and lispm-sidecar--connection (jsonrpc-running-p lispm-sidecar--connection)))

(defun lispm-sidecar-connection ()
  "Return the connection to the sidecar, starting the sidecar if needed."
  (if (lispm-sidecar-live-p)
      lispm-sidecar--connection
    (lispm-sidecar--start)))

(defun lispm-sidecar-request (method params &optional timeout)
  "Ask the sidecar METHOD with PARAMS, wait for the answer and return it.
TIMEOUT is in seconds; the default is `jsonrpc-default-request-timeout'.
Never use this for anything that waits on a human."
  (jsonrpc-request (lispm-sidecar-connection) method params
                   :timeout (or timeout jsonrpc-default-request-timeout)))

(cl-defun lispm-sidecar-async-request (method params &key on-success on-error
                                             (timeout 30))
  "Ask the sidecar METHOD with PARAMS, and return at once.
ON-SUCCESS is called with the result.  ON-ERROR is called with a
message string when the sidecar answers with an error, dies or does
not answer within TIMEOUT seconds (30 by default)."
  (let ((fail (lambda (text) (if on-error (funcall on-error text)
                               (message "LispM: %s failed: %s" method text)))))
    (jsonrpc-async-request
     (lispm-sidecar-connection) method params
     :success-fn (or on-success #'ignore)
     :error-fn (lambda (err) (funcall fail (plist-get err :message)))
     :timeout-fn (lambda () (funcall fail "the sidecar did not answer"))
     :timeout timeout)))

(defun lispm-sidecar-notify (method params)
  "Send the sidecar the notification METHOD with PARAMS, if it is running."
  (when (lispm-sidecar-live-p)
    (jsonrpc-notify lispm-sidecar--connection method params)))

(defun lispm-sidecar-pid ()
  "Return the process id of the running sidecar, or nil."
  (and (lispm-sidecar-live-p)
       (process-id (jsonrpc--process lispm-sidecar--connection))))

;;; Requests and notifications from the sidecar

(cl-defgeneric lispm-sidecar-handle-request (method params)
  "Answer the sidecar's request METHOD, a symbol, with PARAMS, a plist.
Return the result: a plist, a vector, a string or a number.  Methods
are added with `cl-defmethod' specialised on (eql \\='emacs/...).")

(cl-defmethod lispm-sidecar-handle-request (method _params)
  "Refuse METHOD, which no one handles."
  (lispm-signal 'lispm-unknown-method (list method) "Emacs has no method %s" method))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/ping)) params)
  "Return PARAMS: the round trip of the benchmarks."
  (or params (make-hash-table)))

(cl-defgeneric lispm-sidecar-handle-notification (method params)
  "Handle the sidecar's notification METHOD, a symbol, with PARAMS, a plist.")

(cl-defmethod lispm-sidecar-handle-notification (_method _params)
  "Ignore a notification no one handles."
  nil)

(defun lispm-sidecar-dispatch-request (method params)
  "Answer the sidecar's request METHOD with PARAMS: the one error boundary.
Return what `lispm-sidecar-handle-request' returns, or signal a
`jsonrpc-error' for whatever it signals: a LispM error has the code of
its condition (see `lispm-error-jsonrpc-code') and its message; a
`user-error' has the code of `lispm-error'; any other error is an
internal error, its message prefixed with METHOD.  A `jsonrpc-error'
goes as it is.  (A plain function, not an :around method: uncompiled,
as a source checkout runs it, such a method cost 35 us a request.)"
  (condition-case err
      (lispm-sidecar-handle-request method params)
    (jsonrpc-error (signal (car err) (cdr err)))
    (lispm-error
     (jsonrpc-error :code (lispm-error-jsonrpc-code (car err))
                    :message (lispm-error-message err)))
    (user-error
     (jsonrpc-error :code (lispm-error-jsonrpc-code 'lispm-error)
                    :message (error-message-string err)))
    ((debug error)
     (jsonrpc-error :code lispm-sidecar--internal-error-code
                    :message (format "%s: %s" method (error-message-string err))))))

(defun lispm-sidecar--dispatch-request (_connection method params)
  "Dispatch the sidecar's request METHOD with PARAMS."
  (lispm-sidecar-dispatch-request method params))

(defun lispm-sidecar--dispatch-notification (_connection method params)
  "Dispatch the sidecar's notification METHOD with PARAMS."
  (lispm-sidecar-handle-notification method params))

;;; Stopping, dying and restarting

(defconst lispm-sidecar--max-deaths 5
  "How many unexpected deaths in a minute LispM tolerates before giving up.")

(defun lispm-sidecar--on-shutdown (connection)
  "Note that the sidecar of CONNECTION has exited; restart it unless asked to stop."
  (when (eq connection lispm-sidecar--connection)
    (setq lispm-sidecar--connection nil)
    (run-hooks 'lispm-sidecar-exited-hook)
    (unless lispm-sidecar--stopping
      (let ((now (float-time)))
        (push now lispm-sidecar--deaths)
        (setq lispm-sidecar--deaths
              (seq-filter (lambda (time) (< (- now time) 60)) lispm-sidecar--deaths))
        (if (> (length lispm-sidecar--deaths) lispm-sidecar--max-deaths)
            (message "LispM: the sidecar died %d times in a minute; not restarting it.  %s"
                     (length lispm-sidecar--deaths)
                     (lispm-sidecar--stderr-tail connection))
          (message "LispM: the sidecar died; restarting it")
          (run-at-time 0.1 nil #'lispm-sidecar--revive))))))

(defun lispm-sidecar--revive ()
  "Start the sidecar again after it died, unless something already did."
  (unless (lispm-sidecar-live-p)
    (condition-case err
        (lispm-sidecar--start)
      (error (message "LispM: could not restart the sidecar: %s"
                      (error-message-string err))))))

(defun lispm-sidecar--end (connection grace)
  "End CONNECTION's sidecar: wait GRACE seconds for it to exit, then kill it."
  (let ((lispm-sidecar--stopping t)
        (process (jsonrpc--process connection))
        (deadline (+ (float-time) grace)))
    (while (and (process-live-p process) (< (float-time) deadline))
      (accept-process-output process 0.05))
    (delete-process process)
    (jsonrpc-shutdown connection t)))

(defun lispm-sidecar-stop (&optional timeout)
  "Stop the sidecar, if it is running, without restarting it.
It deletes the agents' private files and exits; wait for that at
most TIMEOUT seconds (default 8), then kill it.  The ledger stays as
it is: what waits for the agents waits for them to be resumed."
  (when (lispm-sidecar-live-p)
    (let* ((lispm-sidecar--stopping t)
           (connection lispm-sidecar--connection)
           (deadline (+ (float-time) (or timeout 8))))
      (ignore-errors (jsonrpc-request connection 'lispm/shutdown nil
                                      :timeout (* 0.8 (or timeout 8))))
      (lispm-sidecar--end connection (max 0 (- deadline (float-time)))))))

(defun lispm-sidecar--exit ()
  "Stop the sidecar as Emacs exits, within `lispm-sidecar-exit-wait' seconds.
Emacs would otherwise kill it before it deletes the agents' files."
  (lispm-sidecar-stop lispm-sidecar-exit-wait))

(add-hook 'kill-emacs-hook #'lispm-sidecar--exit)

;;;###autoload
(defun lispm-restart-sidecar ()
  "Restart the sidecar; live agents keep their servers, ports and tokens."
  (interactive)
  (when (lispm-sidecar-live-p)
    ;; A kill, not `lispm/shutdown': the agents' tokens must stay on disk.
    (lispm-sidecar--end lispm-sidecar--connection 0))
  (lispm-sidecar--start)
  (message "LispM: sidecar restarted (pid %s)" (lispm-sidecar-pid)))

;;; Debugging

(defcustom lispm-sidecar-debug-log-size 2000000
  "Characters of protocol log kept while debugging is on.
See \\[lispm-toggle-debug]."
  :type 'natnum)

(defun lispm-sidecar-debug-p ()
  "Return non-nil if the log of the Emacs-sidecar traffic is on."
  (not (zerop lispm-sidecar--log-size)))

;;;###autoload
(defun lispm-toggle-debug ()
  "Turn the log of the Emacs-sidecar traffic on or off, and show it when on.
Tokens never cross this link, so the log holds none."
  (interactive)
  (setq lispm-sidecar--log-size
        (if (zerop lispm-sidecar--log-size) lispm-sidecar-debug-log-size 0))
  (let ((connection (lispm-sidecar-connection)))
    (lispm-sidecar--set-log-size connection lispm-sidecar--log-size)
    (if (zerop lispm-sidecar--log-size)
        (message "LispM: protocol log off")
      (display-buffer (jsonrpc-events-buffer connection))
      (message "LispM: protocol log on"))))

;;; Installing the sidecar

;;;###autoload
(defun lispm-install-sidecar ()
  "Create the sidecar's virtual environment and install it there.
Runs `python3 -m venv' and `pip install' in `lispm-sidecar-venv-directory',
showing the output in a buffer; needs access to PyPI."
  (interactive)
  (let* ((venv (expand-file-name lispm-sidecar-venv-directory))
         (python (or (executable-find "python3")
                     (user-error "Python 3 is not installed: install python3 and python3-venv")))
         (source (directory-file-name (lispm-sidecar-source-directory)))
         (buffer (get-buffer-create "*lispm install*")))
    (make-directory (file-name-directory (directory-file-name venv)) t)
    (with-current-buffer buffer
      (let ((inhibit-read-only t)) (erase-buffer))
      (special-mode))
    (display-buffer buffer)
    (make-process
     :name "lispm-install"
     :buffer buffer
     :command (list "sh" "-c" "\"$1\" -m venv \"$2\" && \"$2/bin/pip\" install \"$3\""
                    "sh" python venv source)
     :sentinel (lambda (process _event)
                 (unless (process-live-p process)
                   (message (if (zerop (process-exit-status process))
                                "LispM: sidecar installed in %s"
                              "LispM: installing the sidecar failed; see *lispm install* (%s)")
                            venv))))))

(provide 'lispm-sidecar)
;;; lispm-sidecar.el ends here
