;;; lispm-sidecar-test.el --- Tests of the Emacs-sidecar link  -*- lexical-binding: t; -*-

;;; Commentary:

;; These run the real sidecar (the Python in `LISPM_SIDECAR_PYTHON').
;; Only lispm-sidecar.el is loaded: the protocol code stands alone.

;;; Code:

(require 'ert)
(require 'lispm-sidecar)

(defmacro lispm-sidecar-test--with-fresh-sidecar (&rest body)
  "Run BODY with a sidecar of its own, stopped afterwards."
  (declare (indent 0) (debug t))
  `(let ((lispm-sidecar--connection nil)
         (lispm-sidecar--deaths nil)
         (lispm-sidecar-connected-hook nil))
     (unwind-protect (progn ,@body)
       (lispm-sidecar-stop))))

(defun lispm-sidecar-test--wait (predicate seconds)
  "Wait up to SECONDS for PREDICATE to return non-nil; return its value."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    value))

(ert-deftest lispm-sidecar-test-starts-on-first-use-and-greets ()
  (lispm-sidecar-test--with-fresh-sidecar
    (should-not (lispm-sidecar-live-p))
    (should (equal (lispm-sidecar-request 'lispm/ping '(:hello "wörld ✓"))
                   '(:hello "wörld ✓")))
    (should (lispm-sidecar-live-p))
    (should (eql (plist-get lispm-sidecar--info :protocol) lispm-sidecar-protocol-version))
    (should (equal (plist-get lispm-sidecar--info :version) lispm-version))))

(ert-deftest lispm-sidecar-test-requests-flow-both-ways ()
  (lispm-sidecar-test--with-fresh-sidecar
    ;; The sidecar calls `emacs/ping' 20 times while answering us.
    (should (eql (plist-get (lispm-sidecar-request 'lispm/ping-emacs '(:count 20)) :count)
                 20))))

(ert-deftest lispm-sidecar-test-unknown-method-is-an-error ()
  (lispm-sidecar-test--with-fresh-sidecar
    (let ((err (should-error (lispm-sidecar-request 'lispm/no-such-thing nil)
                             :type 'jsonrpc-error)))
      (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32601)))
    (should-error (lispm-sidecar-dispatch-request 'emacs/no-such-thing nil)
                  :type 'jsonrpc-error)))

(ert-deftest lispm-sidecar-test-protocol-mismatch-is-a-clear-error ()
  (lispm-sidecar-test--with-fresh-sidecar
    (let* ((lispm-sidecar-protocol-version 99)
           (err (should-error (lispm-sidecar-connection)
                              :type 'lispm-sidecar-version-mismatch)))
      (should (string-match-p "protocol 99" (cadr err))))
    (should-not (lispm-sidecar-live-p))))

(ert-deftest lispm-sidecar-test-restarts-after-sigkill-and-runs-the-hook ()
  (lispm-sidecar-test--with-fresh-sidecar
    (let* ((connected 0)
           (lispm-sidecar-connected-hook (list (lambda () (cl-incf connected)))))
      (lispm-sidecar-connection)
      (should (= connected 1))
      (let ((old-pid (lispm-sidecar-pid)))
        (signal-process old-pid 'SIGKILL)
        (should (lispm-sidecar-test--wait
                 (lambda () (and (lispm-sidecar-live-p)
                                 (not (eql (lispm-sidecar-pid) old-pid))))
                 15))
        (should (= connected 2))
        (should (equal (lispm-sidecar-request 'lispm/ping '(:again t)) '(:again t)))))))

(ert-deftest lispm-sidecar-test-no-python-names-the-install-command ()
  (let ((lispm-sidecar-python nil)
        (lispm-directory (make-temp-file "lispm-empty" t))
        (lispm-sidecar-venv-directory "/nonexistent/venv")
        (process-environment (cons "LISPM_SIDECAR_PYTHON" process-environment)))
    (let ((err (should-error (lispm-sidecar-find-python) :type 'user-error)))
      (should (string-match-p "M-x lispm-install-sidecar" (cadr err))))))

(ert-deftest lispm-sidecar-test-debug-log-toggles-and-shows-traffic ()
  (lispm-sidecar-test--with-fresh-sidecar
    (let ((lispm-sidecar--log-size 0))
      (lispm-sidecar-request 'lispm/ping '(:before "toggle"))
      (let ((events (jsonrpc-events-buffer (lispm-sidecar-connection))))
        (should (zerop (buffer-size events)))
        (lispm-toggle-debug)
        (lispm-sidecar-request 'lispm/ping '(:after "toggle"))
        (should (string-match-p "\"after\":\"toggle\""
                                (with-current-buffer events (buffer-string))))
        (lispm-toggle-debug)
        (should (zerop lispm-sidecar--log-size))))))

(provide 'lispm-sidecar-test)
;;; lispm-sidecar-test.el ends here
