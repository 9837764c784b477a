;;; lispm-e2e-room-restart.el --- An own agent's request survives Emacs killed  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_room.py inside a loopback-only network
;; namespace, with the scripted gateway playing the models (the script
;; is in that file).  Issue 13's scenario 4.
;;
;; The earlier Emacs is a child batch Emacs
;; (`lispm-e2e-room-restart-first-life'): own agent emacs-2 is busy with
;; a long turn, and own agent emacs asks it for the magic word, so the
;; request waits in the ledger and emacs's call waits on it.  Then that
;; Emacs is SIGKILLed, with its sidecar.  This Emacs, the next one,
;; reopens both sessions: emacs waits again, emacs-2 takes the request
;; and answers, and the answer is the result of emacs's waiting call.

;;; Code:

(require 'lispm-e2e-own)

(defvar lispm-directory-root (file-name-directory (directory-file-name lispm-directory))
  "The LispM checkout: the folder above elisp/.")

(defun lispm-e2e-room-restart--ready-file ()
  "Return the file the earlier Emacs writes once it is ready to be killed."
  (lispm-e2e-dir "room-first-life-ready.eld"))

(defun lispm-e2e-room-restart--setup ()
  "Set the models, the policy and the sessions' folder of both Emacsen."
  (setq lispm-models (lispm-e2e-own-models)
        lispm-policy-roles lispm-e2e-own-asking
        lispm-sessions-directory (lispm-e2e-dir "sessions/"))
  (setenv "LISPM_E2E_KEY" "not-a-real-key"))

(defun lispm-e2e-room-restart--file-has (file text)
  "Return non-nil if FILE exists and contains TEXT."
  (and file (file-exists-p file)
       (with-temp-buffer (insert-file-contents file) (string-search text (buffer-string)))))

(defun lispm-e2e-room-restart-first-life ()
  "Be the earlier Emacs: leave emacs waiting on busy emacs-2, then wait.
Write `lispm-e2e-room-restart--ready-file' with the sidecar's pid and
both sessions' files."
  (lispm-e2e-room-restart--setup)
  (let* ((project (lispm-e2e-project "project"))
         (asker (lispm-agent project))
         (asked (lispm-agent project))
         (file (lambda (agent) (buffer-local-value 'lispm-session-file
                                                   (lispm-own-agent-buffer agent)))))
    ;; A first turn each, so that both sessions are on disk.
    (lispm-e2e-own-send asker "Hello.")
    (lispm-e2e-own-send asked "Hello.")
    (lispm-own-agent-send asked "Work very slowly, please.")
    (lispm-e2e-wait (lambda () (eq (lispm-actor-activity asked) 'thinking)) 30
                    "emacs-2 to be busy")
    (lispm-own-agent-send asker "Ask emacs-2 for the magic word, please.")
    (lispm-e2e-wait (lambda () (lispm-e2e-room-restart--file-has (funcall file asker)
                                                                 ":LISPM_REQUEST:"))
                    60 "the request in emacs's session file")
    (with-temp-file (lispm-e2e-room-restart--ready-file)
      (prin1 (list :sidecar (lispm-sidecar-pid)
                   :asker (funcall file asker) :asked (funcall file asked)
                   :names (list (lispm-actor-name asker) (lispm-actor-name asked)))
             (current-buffer)))
    (message "LispM e2e: the first life is ready")
    (while t (accept-process-output nil 1))))

(defun lispm-e2e-room-restart--first-life ()
  "Run the earlier Emacs until it is ready, then kill it; return what it wrote."
  (let* ((output (get-buffer-create " *lispm-e2e room first life*"))
         (child (make-process
                 :name "lispm-e2e-room-first-life" :buffer output :noquery t
                 :command (list (expand-file-name invocation-name invocation-directory)
                                "--batch" "-Q" "-L" (expand-file-name "elisp" lispm-directory-root)
                                "-L" (expand-file-name "elisp/apps" lispm-directory-root)
                                "-L" (expand-file-name "tests/e2e" lispm-directory-root)
                                "-l" "lispm-e2e-room-restart"
                                "--eval" "(lispm-e2e-room-restart-first-life)"))))
    (condition-case err
        (lispm-e2e-wait (lambda () (or (file-exists-p (lispm-e2e-room-restart--ready-file))
                                       (not (process-live-p child))))
                        200 "the earlier Emacs to be ready")
      (ert-test-failed
       (signal (car err) (append (cdr err) (list (with-current-buffer output (buffer-string)))))))
    (unless (file-exists-p (lispm-e2e-room-restart--ready-file))
      (ert-fail (list "The earlier Emacs ended before it was ready"
                      (with-current-buffer output (buffer-string)))))
    (let ((ready (with-temp-buffer
                   (insert-file-contents (lispm-e2e-room-restart--ready-file))
                   (read (current-buffer)))))
      ;; Killed, as by the OOM killer: no exit hook runs.
      (signal-process (process-id child) 'SIGKILL)
      (signal-process (plist-get ready :sidecar) 'SIGKILL)
      (lispm-e2e-wait (lambda () (not (process-live-p child))) 20 "the earlier Emacs to die")
      ready)))

(ert-deftest lispm-e2e-room-restart-request-survives ()
  "Emacs killed while emacs waits on emacs-2; reopened, emacs-2 answers into the call."
  (let* ((ready (lispm-e2e-room-restart--first-life))
         (_ (lispm-e2e-room-restart--setup))
         (asker (lispm-own-agent-resume (plist-get ready :asker))))
    (lispm-e2e-begin)
    (should (equal (plist-get ready :names) '("emacs" "emacs-2")))
    (should (equal (lispm-actor-name asker) "emacs"))
    ;; It waits again, before the asked agent is back.
    (lispm-e2e-wait (lambda () (eq (lispm-actor-activity asker) 'waiting-for-reply)) 30
                    "emacs to wait again")
    (let ((asked (lispm-own-agent-resume (plist-get ready :asked))))
      (should (equal (lispm-actor-name asked) "emacs-2"))
      (lispm-e2e-wait (lambda () (eq (lispm-actor-activity asker) 'idle)) 90
                      "emacs's call to complete and its turn to end")
      (let ((session (with-current-buffer (lispm-own-agent-buffer asker)
                       (buffer-substring-no-properties (point-min) (point-max)))))
        (should (string-match "\\[Reply from emacs-2 to request \\(R[0-9]+\\)\\]\nxyzzy"
                              session))
        (let* ((id (match-string 1 session))
               (answer (lispm-e2e-ledger-entry "reply" id)))
          (should (equal (plist-get answer :sender) "emacs-2"))
          (should (equal (plist-get answer :request_state) "answered")))
        (should (string-search "The magic word: " session))))))

(provide 'lispm-e2e-room-restart)
;;; lispm-e2e-room-restart.el ends here
