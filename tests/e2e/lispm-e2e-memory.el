;;; lispm-e2e-memory.el --- The own agent remembers across Emacs processes  -*- lexical-binding: t; -*-

;;; Commentary:

;; The issue's test of memory, run by tests/e2e/test_memory.py in two
;; Emacs processes one after the other, sharing one sessions
;; repository and one project, both beside the run's work folder.
;; The work folder's name says which half this Emacs plays: in `tell'
;; the user says their name and the model remembers it (the default
;; policy allows `remember': no approval), and this Emacs ends once
;; the commits are made; in `ask', a new session asks the name, and
;; the system prompt holds it.

;;; Code:

(require 'lispm-e2e-own)
(require 'lispm-memory)

(defun lispm-e2e-memory--phase ()
  "Return the half this Emacs plays: the name of the run's work folder."
  (file-name-nondirectory (directory-file-name (lispm-e2e-dir))))

(defmacro lispm-e2e-memory--with (agent &rest body)
  "Run BODY with AGENT, a new own agent in the project, under the default policy."
  (declare (indent 1))
  `(let* ((lispm-models (lispm-e2e-own-models))
          (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
          (lispm-sessions-directory (expand-file-name "../sessions/" (lispm-e2e-dir)))
          (process-environment (cons "LISPM_E2E_KEY=not-a-real-key" process-environment))
          (,agent (lispm-agent (file-name-as-directory
                                (file-truename (expand-file-name "../project" (lispm-e2e-dir)))))))
     (lispm-e2e-begin)
     (unwind-protect (progn ,@body)
       (when (buffer-live-p (lispm-own-agent-buffer ,agent))
         (let ((kill-buffer-query-functions nil))
           (kill-buffer (lispm-own-agent-buffer ,agent))))
       (should (lispm-sessions-wait-for-commits 30)))))

(defun lispm-e2e-memory--session-text (agent)
  "Return the text of AGENT's session."
  (with-current-buffer (lispm-own-agent-buffer agent)
    (buffer-substring-no-properties (point-min) (point-max))))

(ert-deftest lispm-e2e-memory-across-emacs ()
  "Tell the agent your name in one Emacs; in a new one, a new session knows it."
  (pcase (lispm-e2e-memory--phase)
    ("tell"
     (lispm-e2e-memory--with agent
       (should-not (file-exists-p (lispm-memory-file 'user)))
       (let ((turn (lispm-e2e-own-send agent "My name is Ada Lovelace. Remember it.")))
         (should (eq (lispm-turn-state turn) 'done)))
       (should (string-search "Remembered in the user's memory"
                              (lispm-e2e-memory--session-text agent)))
       (should (string-search "* The user's name is Ada Lovelace."
                              (with-temp-buffer
                                (insert-file-contents (lispm-memory-file 'user))
                                (buffer-string))))))
    ("ask"
     (lispm-e2e-memory--with agent
       (should (file-exists-p (lispm-memory-file 'user)))
       (should (eq (lispm-turn-state (lispm-e2e-own-send agent "What is my name?")) 'done))
       (should (string-search "Your name is Ada Lovelace."
                              (lispm-e2e-memory--session-text agent)))
       (should (lispm-e2e-own-requests "What is my name?"))
       (should (string-search "The user's name is Ada Lovelace."
                              (lispm-own-agent-system-prompt agent)))))
    (phase (ert-fail (format "No such half: %s" phase)))))

(provide 'lispm-e2e-memory)
;;; lispm-e2e-memory.el ends here
