;;; lispm-e2e-own.el --- Helpers of the own agent's end-to-end tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; What the ERT files that drive LispM's own agent against the scripted
;; gateway share: its models, two policies, a project put back as
;; committed, an agent made and killed around a body, and waits for
;; its turn and for approvals.

;;; Code:

(require 'lispm-e2e)
(require 'lispm-own-agent)

(defun lispm-e2e-own-models ()
  "Return `lispm-models' for the run's gateway: a main and a backup model."
  (let ((gateway (getenv "LISPM_E2E_GATEWAY")))
    `(("scripted" :api anthropic :base-url ,gateway :model "scripted-main"
       :key (:env "LISPM_E2E_KEY"))
      ("backup" :api chat :base-url ,(concat gateway "/v1") :model "scripted-backup"))))

(defconst lispm-e2e-own-trusting
  '((default (read allow) (introspect allow) (message allow)
             (edit allow) (shell allow) (eval allow)))
  "A policy that lets the agent do everything at once.")

(defconst lispm-e2e-own-asking
  '((default (read allow) (introspect allow) (message allow)
             (edit ask) (shell ask) (eval ask)))
  "A policy that asks before every change.")

(defun lispm-e2e-own-reset (project)
  "Put PROJECT's files back as committed, with no buffer visiting them."
  (let ((folder (lispm-e2e-project project)))
    (dolist (buffer (buffer-list))
      (when (and (buffer-file-name buffer)
                 (file-in-directory-p (buffer-file-name buffer) folder))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))
    (let ((default-directory folder))
      (call-process "git" nil nil nil "checkout" "-q" "--" ".")
      (call-process "git" nil nil nil "clean" "-fdq"))))

(defmacro lispm-e2e-own-with (spec &rest body)
  "Run BODY with an own agent: SPEC is (AGENT PROJECT POLICY).
PROJECT names a project folder of the run; POLICY is `lispm-policy-roles'."
  (declare (indent 1))
  (let ((agent (nth 0 spec)) (project (nth 1 spec)) (policy (nth 2 spec)))
    `(let* ((_ (lispm-e2e-own-reset ,project))
            (lispm-models (lispm-e2e-own-models))
            (lispm-policy-roles ,policy)
            (lispm-sessions-directory (lispm-e2e-dir "sessions/"))
            (process-environment (cons "LISPM_E2E_KEY=not-a-real-key" process-environment))
            (,agent (lispm-agent (lispm-e2e-project ,project))))
       (lispm-e2e-begin)
       (unwind-protect (progn ,@body)
         (when (buffer-live-p (lispm-own-agent-buffer ,agent))
           (let ((kill-buffer-query-functions nil))
             (kill-buffer (lispm-own-agent-buffer ,agent))))))))

(defun lispm-e2e-own-send (agent text)
  "Give AGENT TEXT and wait until its turn is over (or stopped)."
  (lispm-own-agent-send agent text)
  (lispm-e2e-own-settle agent))

(defun lispm-e2e-own-settle (agent)
  "Wait until AGENT is idle, or stopped at a condition; return its turn."
  (let ((turn (cdr (car (lispm-own-agent-turns agent)))))
    (lispm-e2e-wait (lambda () (or (not (lispm-turn-live-p turn))
                                   (eq (lispm-turn-state turn) 'stopped)))
                    60 (format "the turn of %s to end" (lispm-actor-name agent)))
    turn))

(defun lispm-e2e-own-requests (prompt-part)
  "Return the main requests of any API whose prompt contains PROMPT-PART."
  (cl-loop for request in (lispm-e2e-requests)
           when (and (equal (plist-get request :kind) "main")
                     (string-search prompt-part (or (plist-get request :prompt) "")))
           collect request))

(defun lispm-e2e-own-body (request)
  "Return the body the gateway logged for REQUEST, as text."
  (with-temp-buffer
    (insert-file-contents (plist-get request :body_file))
    (buffer-string)))

(defun lispm-e2e-own-file (project name)
  "Return the file NAME of PROJECT."
  (expand-file-name name (lispm-e2e-project project)))

(defun lispm-e2e-own-approve (&optional deny reason)
  "Wait for an approval and allow it (or DENY it with REASON)."
  (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30 "an approval")
  (let ((approval (car (lispm-approvals-pending))))
    (if deny
        (lispm-approvals-deny approval reason)
      (lispm-approvals-allow approval))))

(provide 'lispm-e2e-own)
;;; lispm-e2e-own.el ends here
