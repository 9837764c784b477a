;;; lispm-notice-test.el --- Tests of the notice that an agent needs the user  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each reason an agent needs the user appears and clears, in
;; `lispm-notice-reasons', the agent list and the mode line: an approval
;; in LispM, an approval prompt in a CLI, an own agent stopped at a
;; condition, a turn of the user's that ended unseen (an own agent's, a
;; terminal agent's) until its buffer is shown.  A desktop notification
;; is sent for each new reason when asked for, and never fails.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-turn)
(require 'lispm-test-fixtures)

(defmacro lispm-notice-test--with-state (&rest body)
  "Run BODY with an empty registry, no approvals, notices or mode line.
`folder' is a fresh directory; nothing is sent to a sidecar."
  (declare (indent 0) (debug t))
  `(let* ((lispm-approvals--pending nil)
          (lispm-approvals--counter 0)
          (lispm-notice--unseen (make-hash-table :test #'eq))
          (lispm-notice--shown (make-hash-table :test #'eq))
          (lispm-notice--hidden-at (make-hash-table :test #'eq))
          (lispm-notice--activity (make-hash-table :test #'eq))
          (lispm-notice--yours (make-hash-table :test #'eq))
          (lispm-notice--last nil)
          (lispm-notice-mode-line "")
          (lispm-notice-desktop nil)
          (global-mode-string nil)
          (folder (file-name-as-directory (file-truename (make-temp-file "lispm-notice-" t)))))
     (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore)
               ((symbol-function 'lispm-sidecar-async-request) #'ignore)
               ((symbol-function 'lispm-sidecar-live-p) #'ignore))
       (unwind-protect
           (save-window-excursion
             (lispm-test-with-registry ,@body))
         (when (get-buffer lispm-approvals-buffer-name)
           (kill-buffer lispm-approvals-buffer-name))
         (delete-directory folder t)))))

(defun lispm-notice-test--mode-line (construct)
  "Return the text of the mode line CONSTRUCT: strings, symbols and lists.
\(`format-mode-line' gives nothing in batch mode.)"
  (cond ((stringp construct) (substring-no-properties construct))
        ((null construct) "")
        ((symbolp construct) (lispm-notice-test--mode-line (symbol-value construct)))
        ((consp construct) (mapconcat #'lispm-notice-test--mode-line construct ""))
        (t "")))

(defun lispm-notice-test--list-mark (agent)
  "Return the agent list's \"Needs you\" column for AGENT."
  (with-temp-buffer
    (lispm-list-mode)
    (lispm-list--fill)
    (aref (cadr (assoc (lispm-actor-name agent) tabulated-list-entries)) 8)))

(defun lispm-notice-test--show (buffer)
  "Show BUFFER in the selected window, as the user would, or nothing if nil."
  (set-window-buffer (selected-window) (or buffer (get-buffer-create "*scratch*")))
  ;; Redisplay runs the window change functions; batch Emacs has none.
  (lispm-notice--windows-changed (selected-frame)))

(defun lispm-notice-test--own-agent (folder buffer &optional caller)
  "Register an own agent in FOLDER whose session is BUFFER; return it.
CALLER, if non-nil, makes it a helper of that actor."
  (lispm-agents-add-actor
   (lispm-own-agent--make :name "agent" :kind 'lispm :folder folder :state 'running
                          :activity 'idle :buffer buffer :caller caller)))

(defun lispm-notice-test--turn-ends (agent prompt)
  "End a turn of own AGENT begun with PROMPT, as `lispm-own-agent--turn-ended' does."
  (run-hook-with-args 'lispm-own-agent-turn-end-functions agent
                      (lispm-turn--make :actor agent
                                        :messages `((:role "user" :content "earlier")
                                                    (:role "assistant" :content "ok")
                                                    (:role "user" :content ,prompt)
                                                    (:role "assistant" :content "done")))))

;;; An approval in LispM

(ert-deftest lispm-notice-test-approval-appears-and-clears ()
  (lispm-notice-test--with-state
    (let* ((codex (lispm-test-add-agent :name "codex" :folder folder :state 'running
                                        :activity 'busy))
           (id1 (lispm-approvals-request codex nil 'shell '(:command "a") #'ignore)))
      (should (equal (lispm-notice-reasons codex) '((approval . "1 approval"))))
      (should (lispm-notice-needs-you-p codex))
      (should (equal (lispm-notice-test--list-mark codex) "! 1 approval"))
      (should (memq 'lispm-notice-mode-line global-mode-string))
      ;; Not (SYMBOL ...), which the mode line reads as a conditional.
      (should (stringp (car global-mode-string)))
      (should (equal (lispm-notice-test--mode-line global-mode-string)
                     " LispM: codex needs you"))
      (should (equal (get-text-property 0 'help-echo lispm-notice-mode-line)
                     "codex: 1 approval\nmouse-1: go to what waits"))
      (should (eq (keymap-lookup (get-text-property 0 'local-map lispm-notice-mode-line)
                                 "<mode-line> <mouse-1>")
                  #'lispm-notice-visit))
      (let ((id2 (lispm-approvals-request codex nil 'shell '(:command "b") #'ignore)))
        (should (equal (lispm-notice-test--list-mark codex) "! 2 approvals"))
        (should (= (cl-count 'lispm-notice-mode-line global-mode-string) 1))
        ;; mouse-1 goes to the approvals buffer.
        (lispm-notice-visit)
        (should (eq (window-buffer (selected-window)) (get-buffer lispm-approvals-buffer-name)))
        (lispm-approvals-allow id1)
        (should (equal (lispm-notice-reasons codex) '((approval . "1 approval"))))
        (lispm-approvals-deny id2 "no"))
      (should-not (lispm-notice-needs-you-p codex))
      (should (equal (lispm-notice-test--list-mark codex) ""))
      (should-not (memq 'lispm-notice-mode-line global-mode-string))
      (should (equal (lispm-notice-test--mode-line global-mode-string) "")))))

(ert-deftest lispm-notice-test-mode-line-counts-agents-and-keeps-a-string ()
  (lispm-notice-test--with-state
    (let ((codex (lispm-test-add-agent :name "codex" :folder folder :state 'running))
          (claude (lispm-test-add-agent :kind 'claude :folder folder :state 'running)))
      (lispm-approvals-request codex nil 'shell '(:command "a") #'ignore)
      (lispm-agents-set-activity claude 'waiting-for-approval)
      (should (equal (mapcar (lambda (e) (lispm-actor-name (car e))) (lispm-notice-waiting))
                     '("codex" "claude")))
      (should (equal (lispm-notice-test--mode-line global-mode-string)
                     " LispM: 2 agents need you"))
      (lispm-agents-set-activity claude 'busy)
      (should (equal (lispm-notice-test--mode-line global-mode-string)
                     " LispM: codex needs you"))
      ;; An approval of an asker no longer (or never) registered still counts.
      (lispm-agents-unregister codex)
      (let ((stranger (lispm-test-actor--make :name "ghost" :kind 'lispm :folder folder)))
        (lispm-approvals-request stranger nil 'eval '(:form "1") #'ignore)
        (should (equal (lispm-notice-test--mode-line global-mode-string)
                       " LispM: ghost needs you")))
      ;; A string `global-mode-string' is kept.
      (let ((global-mode-string "clock"))
        (lispm-notice--update-mode-line (lispm-notice-waiting))
        (should (equal (lispm-notice-test--mode-line global-mode-string)
                       "clock LispM: ghost needs you"))))))

;;; An approval prompt in a CLI

(ert-deftest lispm-notice-test-cli-approval-prompt-appears-and-clears ()
  (lispm-notice-test--with-state
    (let ((claude (lispm-test-add-agent :kind 'claude :folder folder :state 'running
                                        :activity 'busy))
          (changes 0))
      (add-hook 'lispm-notice-changed-hook (lambda () (cl-incf changes)))
      (unwind-protect
          (progn
            (should-not (lispm-notice-needs-you-p claude))
            ;; As the sidecar reports it.
            (lispm-sidecar-handle-notification
             'lispm/agent-activity (list :name "claude" :activity "waiting-for-approval"
                                         :queued 0))
            (should (equal (lispm-notice-reasons claude) '((prompt . "approval prompt"))))
            (should (equal (lispm-notice-test--list-mark claude) "! approval prompt"))
            (should (= changes 1))
            ;; mouse-1 goes to its terminal.
            (let ((terminal (get-buffer-create " *lispm-notice-test terminal*")))
              (unwind-protect
                  (progn (setf (lispm-agent-buffer claude) terminal)
                         (lispm-notice-visit)
                         (should (eq (window-buffer (selected-window)) terminal)))
                (setf (lispm-agent-buffer claude) nil)
                (kill-buffer terminal)))
            (lispm-sidecar-handle-notification
             'lispm/agent-activity (list :name "claude" :activity "busy" :queued 0))
            (should-not (lispm-notice-needs-you-p claude))
            (should (= changes 2))
            (should (equal (lispm-notice-test--list-mark claude) "")))
        (setq lispm-notice-changed-hook (butlast lispm-notice-changed-hook))))))

(ert-deftest lispm-notice-test-own-agent-approval-counts-once ()
  "An own agent waiting for approval waits in LispM: one reason, not two."
  (lispm-notice-test--with-state
    (let ((own (lispm-test-add-actor :folder folder :activity 'waiting-for-approval)))
      (lispm-approvals-request own nil 'eval '(:form "1") #'ignore)
      (should (equal (lispm-notice-reasons own) '((approval . "1 approval"))))
      (lispm-agents-set-activity own 'stopped)
      (should (equal (mapcar #'car (lispm-notice-reasons own)) '(approval stopped))))))

;;; A turn of the user's, ended unseen

(ert-deftest lispm-notice-test-own-agent-turn-done-until-shown ()
  (lispm-notice-test--with-state
    (let* ((session (get-buffer-create " *lispm-notice-test session*"))
           (agent (lispm-notice-test--own-agent folder session)))
      (unwind-protect
          (progn
            (lispm-notice-test--show nil)
            ;; Ended while shown: seen.
            (lispm-notice-test--show session)
            (lispm-notice-test--turn-ends agent "Fix the bug, please.")
            (should-not (lispm-notice-needs-you-p agent))
            ;; Ended while hidden: done, until its session is shown.
            (lispm-notice-test--show nil)
            (lispm-notice-test--turn-ends agent "Fix the bug, please.")
            (should (equal (lispm-notice-reasons agent) '((done . "turn done"))))
            (should (equal (lispm-notice-test--list-mark agent) "! turn done"))
            (should (equal (lispm-notice-test--mode-line global-mode-string)
                           " LispM: agent needs you"))
            ;; mouse-1 shows the session, which makes it seen.
            (lispm-notice-visit)
            (lispm-notice--windows-changed (selected-frame))
            (should (eq (window-buffer (selected-window)) session))
            (should-not (lispm-notice-needs-you-p agent))
            (should (equal (lispm-notice-test--mode-line global-mode-string) ""))
            ;; A turn another agent (or LispM) started is not the user's.
            (lispm-notice-test--show nil)
            (dolist (prompt '("[Message from codex]\nFYI" "[Request R1 from codex]\nLook?"
                              "[Reply from codex to request R2]\nFine."))
              (lispm-notice-test--turn-ends agent prompt)
              (should-not (lispm-notice-needs-you-p agent)))
            ;; Nor is a helper's: its caller's.
            (let ((helper (lispm-notice-test--own-agent folder session agent)))
              (lispm-notice-test--turn-ends helper "Review this.")
              (should-not (lispm-notice-needs-you-p helper)))
            ;; An agent that leaves takes its notice with it.
            (lispm-notice-test--turn-ends agent "Again.")
            (should (lispm-notice-needs-you-p agent))
            (lispm-agents-unregister agent)
            (should-not (lispm-notice-waiting))
            (should (zerop (hash-table-count lispm-notice--unseen))))
        (kill-buffer session)))))

(ert-deftest lispm-notice-test-terminal-turn-done-until-shown ()
  (lispm-notice-test--with-state
    (let* ((terminal (get-buffer-create " *lispm-notice-test terminal*"))
           (codex (lispm-test-add-agent :name "codex" :folder folder :state 'running
                                        :buffer terminal :activity 'idle)))
      (unwind-protect
          (progn
            (lispm-notice-test--show nil)
            ;; The user types in its terminal, then looks elsewhere.
            (lispm-notice-test--show terminal)
            (lispm-agents-set-activity codex 'busy)
            (lispm-notice-test--show nil)
            (lispm-agents-set-activity codex 'waiting-for-approval)
            (lispm-agents-set-activity codex 'busy)
            ;; Nothing said for a while (the sidecar restarting) changes nothing.
            (lispm-agents-set-activity codex nil)
            (should-not (lispm-notice-needs-you-p codex))
            (lispm-agents-set-activity codex 'idle)
            (should (equal (lispm-notice-reasons codex) '((done . "turn done"))))
            (should (equal (lispm-notice-test--list-mark codex) "! turn done"))
            (lispm-notice-test--show terminal)
            (should-not (lispm-notice-needs-you-p codex))
            ;; Typed, hidden at once: the busy report comes after, still the user's.
            (lispm-notice-test--show nil)
            (lispm-agents-set-activity codex 'busy)
            (lispm-agents-set-activity codex 'idle)
            (should (lispm-notice-needs-you-p codex))
            (lispm-notice-test--show terminal)
            ;; A turn that starts long after it was hidden is a message's.
            (lispm-notice-test--show nil)
            (puthash codex (- (float-time) 60) lispm-notice--hidden-at)
            (lispm-agents-set-activity codex 'busy)
            (lispm-agents-set-activity codex 'idle)
            (should-not (lispm-notice-needs-you-p codex))
            ;; A turn that ends while shown is seen.
            (lispm-notice-test--show terminal)
            (lispm-agents-set-activity codex 'busy)
            (lispm-agents-set-activity codex 'idle)
            (should-not (lispm-notice-needs-you-p codex)))
        (kill-buffer terminal)))))

;;; The desktop

(ert-deftest lispm-notice-test-desktop-notification ()
  (lispm-notice-test--with-state
    (let ((claude (lispm-test-add-agent :kind 'claude :folder folder :state 'running))
          (sent nil))
      (require 'notifications nil t)
      (cl-letf (((symbol-function 'notifications-notify)
                 (lambda (&rest params) (push params sent) 1)))
        ;; Off by default: nothing sent.
        (lispm-agents-set-activity claude 'waiting-for-approval)
        (should-not sent)
        (lispm-agents-set-activity claude 'busy)
        (setq lispm-notice-desktop t)
        (lispm-agents-set-activity claude 'waiting-for-approval)
        (if (featurep 'dbusbind)
            (should (equal sent '((:title "LispM: claude needs you" :body "approval prompt"
                                          :app-name "LispM"))))
          (should-not sent))
        ;; Only a new reason is told: an approval added to the prompt.
        (setq sent nil)
        (lispm-approvals-request claude nil 'shell '(:command "a") #'ignore)
        (when (featurep 'dbusbind)
          (should (equal (plist-get (car sent) :body) "1 approval"))
          (should (= (length sent) 1))))
      ;; A notification that fails (no D-Bus session) is only a message.
      (cl-letf (((symbol-function 'notifications-notify)
                 (lambda (&rest _) (signal 'dbus-error '("No session bus")))))
        (lispm-agents-set-activity claude 'busy)
        (lispm-agents-set-activity claude 'waiting-for-approval)
        (should (lispm-notice-needs-you-p claude))))))

(provide 'lispm-notice-test)
;;; lispm-notice-test.el ends here
