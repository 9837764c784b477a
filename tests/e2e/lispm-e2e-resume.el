;;; lispm-e2e-resume.el --- Agents come back after Emacs is killed  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_resume.py inside a loopback-only network
;; namespace, with the scripted gateway playing the models (the script is
;; in that file).
;;
;; The earlier Emacs is a child batch Emacs (`lispm-e2e-resume-first-life'):
;; it runs Claude, Codex and claude-2; Codex is busy with a long turn, and
;; Claude and claude-2 each ask it something, so both requests wait in the
;; ledger.  Then it is SIGKILLed, with its sidecar; its CLIs die with their
;; terminals.  This Emacs, the next one, resumes Claude and Codex with
;; their CLIs' own resume: Codex gets Claude's request and replies, and
;; Claude's next input is the reply.  claude-2 is not resumed: a new
;; claude-2 starts, and the request the old one asked ends, undelivered.

;;; Code:

(require 'lispm-e2e)

(defvar lispm-directory-root (file-name-directory (directory-file-name lispm-directory))
  "The LispM checkout: the folder above elisp/.")

(defconst lispm-e2e-resume-answer
  "notes-parse-header takes (substring line 0 colon) with colon nil when the line has no colon, so it signals wrong-type-argument. Check the colon first and return nil for a line without one."
  "What the scripted Codex answers.")

(defun lispm-e2e-resume--ready-file ()
  "Return the file the earlier Emacs writes once it is ready to be killed."
  (lispm-e2e-dir "first-life-ready.eld"))

(defun lispm-e2e-resume--remembered-session (name)
  "Return the CLI session id the agents file remembers for NAME, or nil."
  (cl-loop for life in (ignore-errors (lispm-resume--read))
           thereis (cl-loop for agent in (plist-get life :agents)
                            when (equal (plist-get agent :name) name)
                            return (plist-get agent :session))))

(defun lispm-e2e-resume-first-life ()
  "Be the earlier Emacs: leave two requests waiting for busy Codex, then wait.
Write `lispm-e2e-resume--ready-file' with the pids the next Emacs kills."
  (let* ((project (lispm-e2e-project "project"))
         (claude (lispm-agent-start 'claude project))
         (codex (lispm-agent-start 'codex project))
         (claude-2 (lispm-agent-start 'claude project)))
    (mapc #'lispm-e2e-wait-ready (list claude codex claude-2))
    (lispm-e2e-submit codex "Hello Codex: other agents may ask you for reviews.")
    (lispm-e2e-wait-activity codex 'idle 60)
    ;; Codex is busy for longer than this Emacs lives.
    (lispm-e2e-submit codex "Work very slowly, please.")
    (lispm-e2e-wait-activity codex 'busy 30)
    (lispm-e2e-submit claude "Get Codex's review of notes-parse-header in notes.el, please.")
    (lispm-e2e-asked "anthropic" "Get Codex's review" "codex")
    (lispm-e2e-submit claude-2 "Ask Codex once more, please.")
    (lispm-e2e-asked "anthropic" "Ask Codex once more" "codex")
    (lispm-e2e-wait (lambda () (and (lispm-e2e-resume--remembered-session "claude")
                                    (lispm-e2e-resume--remembered-session "codex")
                                    (lispm-e2e-resume--remembered-session "claude-2")))
                    60 "every agent's session id in the agents file")
    (with-temp-file (lispm-e2e-resume--ready-file)
      (prin1 (list :sidecar (lispm-sidecar-pid)
                   :clis (mapcar #'lispm-agent-pid (lispm-agents)))
             (current-buffer)))
    (message "LispM e2e: the first life is ready")
    (while t (accept-process-output nil 1))))

(defun lispm-e2e-resume--pid-alive-p (pid)
  "Return non-nil if process PID exists and is not a zombie."
  (let ((attributes (process-attributes pid)))
    (and attributes (not (equal (alist-get 'state attributes) "Z")))))

(defun lispm-e2e-resume--live-first-life ()
  "Run the earlier Emacs until it is ready; return what it wrote, a plist."
  (let* ((output (get-buffer-create " *lispm-e2e first life*"))
         (child (make-process
                 :name "lispm-e2e-first-life" :buffer output :noquery t
                 :command (list (expand-file-name invocation-name invocation-directory)
                                "--batch" "-Q" "-L" (expand-file-name "elisp" lispm-directory-root)
                                "-L" (expand-file-name "elisp/apps" lispm-directory-root)
                                "-L" (expand-file-name "tests/e2e" lispm-directory-root)
                                "-l" "lispm-e2e-resume"
                                "--eval" "(lispm-e2e-resume-first-life)"))))
    (condition-case err
        (lispm-e2e-wait (lambda () (or (file-exists-p (lispm-e2e-resume--ready-file))
                                       (not (process-live-p child))))
                        400 "the earlier Emacs to be ready")
      (ert-test-failed
       (signal (car err) (append (cdr err) (list (with-current-buffer output (buffer-string)))))))
    (unless (file-exists-p (lispm-e2e-resume--ready-file))
      (ert-fail (list "The earlier Emacs ended before it was ready"
                      (with-current-buffer output (buffer-string)))))
    (let ((ready (with-temp-buffer
                   (insert-file-contents (lispm-e2e-resume--ready-file))
                   (read (current-buffer)))))
      ;; Killed, as by the OOM killer: no exit hook runs.
      (signal-process (process-id child) 'SIGKILL)
      (signal-process (plist-get ready :sidecar) 'SIGKILL)
      (lispm-e2e-wait (lambda () (not (process-live-p child))) 20 "the earlier Emacs to die")
      ;; Their terminals gone, the CLIs get SIGHUP.
      (lispm-e2e-wait (lambda () (not (cl-some #'lispm-e2e-resume--pid-alive-p
                                               (plist-get ready :clis))))
                      30 "the earlier Emacs's CLIs to end")
      ready)))

(defun lispm-e2e-resume--ledger ()
  "Return the ledger's entries, oldest first."
  (reverse (append (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 1000)) :entries)
                   nil)))

(defun lispm-e2e-resume--entry (kind request-id)
  "Return the ledger entry of KIND for REQUEST-ID."
  (seq-find (lambda (e) (and (equal (plist-get e :kind) kind)
                             (equal (plist-get e :request_id) request-id)))
            (lispm-e2e-resume--ledger)))

(defun lispm-e2e-resume--command (agent)
  "Return the command line AGENT's terminal runs, as one string.
A backend may run it through a shell, quoted."
  (string-join (process-command (lispm-term-process (lispm-agent-buffer agent))) " "))

(ert-deftest lispm-e2e-resume-after-emacs-killed ()
  "Resumed agents get what waits for them; a new agent of a name gets nothing."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((restarted (progn (lispm-e2e-resume--live-first-life) (float-time)))
             (remembered (lispm-resume-remembered))
             (sessions (mapcar (lambda (r) (cons (plist-get r :name) (plist-get r :session)))
                               remembered)))
        ;; The agents file tells an unclean exit, with each CLI's session.
        (should (equal (sort (mapcar #'car sessions) #'string<) '("claude" "claude-2" "codex")))
        (should (cl-every #'cdr sessions))
        (should-not (cl-some (lambda (r) (plist-get r :clean)) remembered))
        (should (lispm-resume--worth-offering remembered))
        (let* ((resumed (lispm-resume-agents '("claude" "codex")))
               (claude (lispm-agent-get "claude"))
               (codex (lispm-agent-get "codex"))
               ;; Not resumed: a new claude-2 takes the name.
               (fresh (lispm-agent-start 'claude (lispm-e2e-project "project"))))
          (should (equal (mapcar #'lispm-agent-name resumed) '("claude" "codex")))
          (should (equal (lispm-agent-name fresh) "claude-2"))
          (lispm-e2e-wait (lambda () (cl-every (lambda (a) (buffer-live-p (lispm-agent-buffer a)))
                                               (list claude codex fresh)))
                          60 "the terminals to open")
          ;; Each CLI resumes its own session.
          (should (string-search (concat "--resume " (alist-get "claude" sessions nil nil #'equal))
                                 (lispm-e2e-resume--command claude)))
          (should-not (string-search "--session-id" (lispm-e2e-resume--command claude)))
          (should (string-match-p (concat "/codex resume --no-daemon .*"
                                          (alist-get "codex" sessions nil nil #'equal))
                                  (lispm-e2e-resume--command codex)))
          (should (string-search "--session-id" (lispm-e2e-resume--command fresh)))
          ;; Codex gets Claude's request and replies; Claude's next input is the reply.
          (let ((id (plist-get (seq-find (lambda (e) (and (equal (plist-get e :kind) "request")
                                                          (equal (plist-get e :sender) "claude")))
                                         (lispm-e2e-resume--ledger))
                               :request_id)))
            (lispm-e2e-wait-prompt
             "anthropic" (format "[Reply from codex to request %s]\n%s" id lispm-e2e-resume-answer)
             180)
            (should (equal (plist-get (lispm-e2e-resume--entry "request" id) :request_state)
                           "answered")))
          ;; claude-2's request ended undelivered, and the ledger says why.
          (let ((old (seq-find (lambda (e) (and (equal (plist-get e :kind) "request")
                                                (equal (plist-get e :sender) "claude-2")))
                               (lispm-e2e-resume--ledger))))
            (should (equal (plist-get old :state) "failed"))
            (should (equal (plist-get old :request_state) "ended"))
            (should (equal (plist-get old :reason)
                           "claude-2 was not resumed: a new claude-2 started"))
            (lispm-ledger)
            (with-current-buffer lispm-ledger-buffer-name
              (goto-char (point-min))
              (should (search-forward "claude-2 was not resumed: a new claude-2 started" nil t))))
          ;; Nothing is remembered from the earlier Emacs any more.
          (should (cl-every #'lispm-resume--alive-p (lispm-resume--read)))
          (lispm-e2e-wait-activity codex 'idle 60)
          (lispm-e2e-wait-activity claude 'idle 60)
          ;; Written for test_resume.py: which gateway requests came after the restart.
          (with-temp-file (lispm-e2e-dir "restart.eld")
            (prin1 (list :restarted restarted
                         :sessions sessions
                         :fresh-session (plist-get (lispm-agent-launch fresh) :session_id))
                   (current-buffer)))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-resume)
;;; lispm-e2e-resume.el ends here
