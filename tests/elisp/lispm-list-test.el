;;; lispm-list-test.el --- Tests of the agent list  -*- lexical-binding: t; -*-

;;; Commentary:

;; `k' in the list: an idle agent closes at once; one that is working,
;; waits for an approval or has messages waiting is closed only if the
;; user says so.  The list shows live why an agent needs you.  The
;; agents are fakes without a terminal or a server.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defmacro lispm-list-test--with-agent (spec &rest body)
  "Run BODY in the agent list showing one agent, without a CLI.
SPEC is (AGENT ACTIVITY QUEUED): AGENT is bound to the agent, running
with ACTIVITY and QUEUED messages."
  (declare (indent 1) (debug t))
  (pcase-let ((`(,agent ,activity ,queued) spec))
    `(lispm-test-with-agent (,agent :folder "/tmp/" :state 'running :activity ,activity
                                    :queued ,queued)
       (cl-letf (((symbol-function 'lispm-sidecar-async-request) #'ignore)
                 ((symbol-function 'lispm-sidecar-notify) #'ignore))
         (unwind-protect
             (with-current-buffer (get-buffer-create lispm-list-buffer-name)
               (lispm-list-mode)
               (lispm-list--fill)
               (tabulated-list-print)
               (goto-char (point-min))
               ,@body)
           (kill-buffer lispm-list-buffer-name))))))

(defun lispm-list-test--close (answer)
  "Press `k' answering ANSWER if asked; return the question, or nil."
  (let (asked)
    (cl-letf (((symbol-function 'y-or-n-p)
               (lambda (prompt) (setq asked prompt) answer)))
      (call-interactively #'lispm-list-close))
    asked))

(ert-deftest lispm-list-test-idle-agent-closes-at-once ()
  (lispm-list-test--with-agent (agent 'idle 0)
    (should-not (lispm-list-test--close nil))
    (should-not (lispm-agent-live-p agent))
    (should (eq (lispm-agent-state agent) 'exited))))

(ert-deftest lispm-list-test-busy-agent-asks-first ()
  (dolist (case '((busy 0 "codex is working; close it anyway? ")
                  (waiting-for-approval 0 "codex waits for your approval in its \
terminal; close it anyway? ")
                  (idle 2 "codex has 2 messages waiting; close it anyway? ")))
    (pcase-let ((`(,activity ,queued ,question) case))
      (lispm-list-test--with-agent (agent activity queued)
        (should (equal (lispm-list-test--close nil) question))
        (should (lispm-agent-live-p agent))
        (should (equal (lispm-list-test--close t) question))
        (should-not (lispm-agent-live-p agent))))))

(ert-deftest lispm-list-test-every-actor-shows-with-its-role ()
  (lispm-test-with-agent (agent :folder "/tmp/" :state 'running :activity 'idle)
    (let ((own (lispm-test-add-actor :folder "/tmp/" :role 'reviewer :activity 'running-tool)))
      (with-temp-buffer
        (lispm-list-mode)
        (lispm-list--fill)
        (should (equal (mapcar (lambda (entry) (seq-take (append (cadr entry) nil) 5))
                               tabulated-list-entries)
                       '(("codex" "codex" "default" "/tmp/" "idle")
                         ("emacs" "lispm" "reviewer" "/tmp/" "running-tool"))))
        ;; An actor without a terminal has no queue or port of its own here.
        (should (equal (seq-subseq (cadr (assoc "emacs" tabulated-list-entries)) 5 7)
                       ["" ""]))
        (tabulated-list-print)
        (goto-char (point-min))
        (while (not (equal (tabulated-list-get-id) "emacs")) (forward-line 1))
        (should (equal (lispm-list-test--close nil) nil))
        (should-not (lispm-agent-live-p own))
        (should (lispm-agent-live-p agent))))))

(defun lispm-list-test--text ()
  "Return the agent list's text."
  (with-current-buffer lispm-list-buffer-name
    (buffer-substring-no-properties (point-min) (point-max))))

(ert-deftest lispm-list-test-shows-who-needs-you-live ()
  (lispm-list-test--with-agent (agent 'busy 0)
    (let ((lispm-approvals--pending nil))
      (should (string-match-p "^ codex +codex .* busy " (lispm-list-test--text)))
      (should-not (string-search "!" (lispm-list-test--text)))
      (let ((id (lispm-approvals-request agent nil 'shell '(:command "ls") #'ignore)))
        (should (string-match-p "^ codex .* busy .* ! 1 approval$" (lispm-list-test--text)))
        (lispm-approvals-allow id))
      (should (string-match-p "^ codex .* busy " (lispm-list-test--text)))
      (should-not (string-search "!" (lispm-list-test--text)))
      ;; The CLI's own prompt, as the sidecar reports it.
      (lispm-agents-set-activity agent 'waiting-for-approval)
      (should (string-match-p "^ codex .*waiting-for-approval.* ! approval prompt$"
                              (lispm-list-test--text))))))

(provide 'lispm-list-test)
;;; lispm-list-test.el ends here
