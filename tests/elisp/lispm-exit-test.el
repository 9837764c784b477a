;;; lispm-exit-test.el --- Emacs exits with agents open, and leaves nothing private  -*- lexical-binding: t; -*-

;;; Commentary:

;; A second batch Emacs, with the real sidecar, starts a Claude agent
;; and a Codex agent (their CLIs stand-ins that sleep, in real
;; terminals) and exits through `kill-emacs', or first closes both and
;; at once stops the sidecar.  Afterwards no agent folder (with its
;; token files), no IDE lock file and no sidecar may remain.

;;; Code:

(require 'ert)
(require 'lispm-base)

(defun lispm-exit-test--wait (predicate seconds)
  "Wait up to SECONDS for PREDICATE to return non-nil; return its value."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    value))

(defconst lispm-exit-test--child
  '(progn
     (require 'lispm)
     (let* ((folder (file-name-as-directory (getenv "LISPM_EXIT_TEST_FOLDER")))
            (cli (expand-file-name "fake-cli" folder)))
       (setq lispm-claude-program cli
             lispm-codex-program cli)
       (let ((agents (list (lispm-agent-start 'claude folder)
                           (lispm-agent-start 'codex folder)))
             (deadline (+ (float-time) 60)))
         (while (and (< (float-time) deadline)
                     (not (cl-every (lambda (agent) (buffer-live-p (lispm-agent-buffer agent)))
                                    agents)))
           (accept-process-output nil 0.05))
         (princ (format "sidecar %d\n" (lispm-sidecar-pid)))
         (princ (format "open %d\n" (length (directory-files
                                              (expand-file-name "agents" (getenv "LISPM_RUNTIME_DIR"))
                                              nil "-claude-\\|-codex-"))))
         (when (equal (getenv "LISPM_EXIT_TEST_HOW") "close-then-stop")
           (mapc #'lispm-agent-close agents)
           (lispm-sidecar-stop)
           (princ (format "stopped %s\n" (not (lispm-sidecar-live-p)))))
         (kill-emacs 0))))
  "What the exiting Emacs runs.")

(defun lispm-exit-test--run (how)
  "Run the exiting Emacs, which ends its agents HOW; check nothing is left."
  (let* ((top (file-name-as-directory (file-truename (make-temp-file "lispm-exit" t))))
         (home (expand-file-name "home/" top))
         (runtime (expand-file-name "run/" top))
         (locks (expand-file-name ".claude/ide/" home))
         (cli (expand-file-name "fake-cli" top))
         (process-environment
          (append (list (concat "HOME=" home)
                        (concat "CLAUDE_CONFIG_DIR=" (expand-file-name ".claude" home))
                        (concat "LISPM_RUNTIME_DIR=" runtime)
                        (concat "LISPM_EXIT_TEST_FOLDER=" top)
                        (concat "LISPM_EXIT_TEST_HOW=" how))
                  process-environment)))
    (unwind-protect
        (progn
          (make-directory home t)
          (with-temp-file cli (insert "#!/bin/sh\nexec sleep 600\n"))
          (set-file-modes cli #o755)
          (let* ((output
                  (with-output-to-string
                    (should (eql 0 (call-process
                                    "timeout" nil standard-output nil "90"
                                    (expand-file-name invocation-name invocation-directory)
                                    "--batch" "-Q"
                                    "-L" lispm-directory
                                    "-L" (expand-file-name "apps" lispm-directory)
                                    "--eval" (format "(setq lispm-ledger-file %S)"
                                                     (expand-file-name "ledger.sqlite3" top))
                                    "--eval" (prin1-to-string lispm-exit-test--child))))))
                 (sidecar (and (string-match "^sidecar \\([0-9]+\\)$" output)
                               (string-to-number (match-string 1 output)))))
            (should (string-match-p "^open 2$" output))
            (when (equal how "close-then-stop")
              (should (string-match-p "^stopped t$" output)))
            (should sidecar)
            (should (lispm-exit-test--wait (lambda () (not (process-attributes sidecar))) 10))
            (should (equal (directory-files (expand-file-name "agents" runtime) nil
                                            directory-files-no-dot-files-regexp)
                           nil))
            (should (file-directory-p locks))
            (should (equal (directory-files locks nil "\\.lock\\'") nil))))
      (delete-directory top t))))

(ert-deftest lispm-exit-test-kill-emacs-leaves-no-private-file ()
  (lispm-exit-test--run "exit"))

(ert-deftest lispm-exit-test-closing-all-then-stopping-leaves-no-private-file ()
  (lispm-exit-test--run "close-then-stop"))

(provide 'lispm-exit-test)
;;; lispm-exit-test.el ends here
