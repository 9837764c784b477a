;;; lispm-inspect-test.el --- Tests of the inspector  -*- lexical-binding: t; -*-

;;; Commentary:

;; The inspector of a terminal agent, of an own agent and of a helper,
;; each made the way LispM makes them; only the sidecar is played, at
;; `lispm-sidecar-async-request': `lispm/ledger' answers
;; `lispm-inspect-test--ledger' from a timer, as the sidecar answers
;; later, `lispm/ask-agent' accepts a request, the rest answers at
;; once; the model is a script.  The tests: each part's text, the
;; "loading" line before the ledger answers, the redraw when a message
;; is queued, an approval arrives and a request is answered; allow,
;; deny and revert in place; point kept on its item; `i' in the list.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-helpers)
(require 'lispm-inspect)
(require 'lispm-test-fixtures)

(defvar lispm-inspect-test--ledger nil
  "The entries `lispm/ledger' answers, a list of plists.")

(defvar lispm-inspect-test--sent nil
  "What Emacs sent the played sidecar, newest first: (METHOD . PARAMS).")

(defun lispm-inspect-test--request (method params &rest keys)
  "Play the sidecar's answer to METHOD with PARAMS; KEYS are the callbacks."
  (push (cons method params) lispm-inspect-test--sent)
  (let ((success (or (plist-get keys :on-success) #'ignore)))
    (pcase method
      ('lispm/ledger
       (let ((entries (vconcat lispm-inspect-test--ledger)))
         (run-at-time 0.05 nil (lambda () (funcall success (list :entries entries))))))
      ('lispm/ask-agent
       (run-at-time 0 nil (lambda ()
                            (funcall success (list :text "asked codex, request R1"
                                                   :request_id "R1" :to "codex")))))
      ('lispm/agent-start (funcall success (list :name (plist-get params :name))))
      (_ (funcall success nil))))
  nil)

(defun lispm-inspect-test--until (predicate &optional seconds)
  "Run timers until PREDICATE returns non-nil or SECONDS (5) pass; return it."
  (let ((deadline (+ (float-time) (or seconds 5)))
        value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.01))
    value))

(defmacro lispm-inspect-test--with (&rest body)
  "Run BODY with a registry, a played sidecar, a scripted model, fresh folders.
In BODY, `folder' is the project (a truename with a slash, holding a.txt)."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-inspect-test-" t))))
          (folder (expand-file-name "project/" root))
          (lispm-sessions-directory (expand-file-name "sessions/" root))
          (lispm-models '(("scripted" :api anthropic :base-url "http://127.0.0.1:9"
                           :model "m" :window 1000)))
          (lispm-policy--grants nil)
          (lispm-policy-roles
           '((default (read allow) (introspect allow) (message allow)
                      (edit ask) (shell ask) (eval ask))
             (careful (read ask) (introspect allow) (message allow)
                      (edit allow) (shell allow) (eval deny))))
          (lispm-roles--cache (make-hash-table :test #'equal))
          (lispm-roles-directories nil)
          (lispm-approvals--pending nil)
          (lispm-approvals--counter 0)
          (lispm-approvals-display-action '(display-buffer-no-window (allow-no-window . t)))
          (lispm-messages--registered nil)
          (lispm-inspect-test--ledger nil)
          (lispm-inspect-test--sent nil)
          (lispm-test-model-script nil)
          (lispm-test-model-requests nil))
     (make-directory folder t)
     (lispm-test-write-file folder "a.txt" "alpha\n")
     (lispm-test-with-played-sidecar (#'lispm-inspect-test--request lispm-inspect-test--sent)
       (unwind-protect
           (save-window-excursion
             (lispm-test-with-registry
               (unwind-protect (progn ,@body)
                 (dolist (buffer (buffer-list))
                   (when (or (buffer-local-value 'lispm-session-file buffer)
                             (eq (buffer-local-value 'major-mode buffer) 'lispm-inspect-mode))
                     (with-current-buffer buffer (set-buffer-modified-p nil))
                     (let ((kill-buffer-query-functions nil)) (kill-buffer buffer)))))))
         (when (get-buffer lispm-approvals-buffer-name)
           (kill-buffer lispm-approvals-buffer-name))
         (lispm-sessions-wait-for-commits 10)
         (lispm-test-remove-folder root)))))

(defun lispm-inspect-test--text (buffer)
  "Return the text of BUFFER."
  (with-current-buffer buffer (buffer-substring-no-properties (point-min) (point-max))))

(defun lispm-inspect-test--shows (buffer regexp)
  "Wait until BUFFER's text matches REGEXP; return non-nil if it did."
  (lispm-inspect-test--until
   (lambda () (string-match-p regexp (lispm-inspect-test--text buffer)))))

(defun lispm-inspect-test--goto (buffer string)
  "Put point, in BUFFER's window, at the start of the line holding STRING."
  (with-selected-window (get-buffer-window buffer)
    (goto-char (point-min))
    (search-forward string)
    (beginning-of-line)))

(defun lispm-inspect-test--key (buffer key)
  "Run the command KEY is bound to in BUFFER, in its window."
  (with-selected-window (get-buffer-window buffer)
    (call-interactively (keymap-lookup lispm-inspect-mode-map key))))

(defun lispm-inspect-test--ledger-asks (name)
  "Return how often the ledger was asked of NAME."
  (cl-count-if (lambda (sent) (and (eq (car sent) 'lispm/ledger)
                                   (equal (plist-get (cdr sent) :agent) name)))
               lispm-inspect-test--sent))

;;; A type of actor adds its parts by methods

(cl-defstruct (lispm-inspect-test-actor (:include lispm-actor)
                                        (:constructor lispm-inspect-test-actor--make)
                                        (:copier nil))
  "An actor of a type of the test's own.")

(cl-defmethod lispm-inspect-kind-title ((_actor lispm-inspect-test-actor))
  "Return the title of the test's type."
  "the test's own")

(cl-defmethod lispm-inspect-insert ((_actor lispm-inspect-test-actor) (_part (eql 'waiting)))
  "Insert the test's line in Waiting."
  (lispm-inspect-line "- the test's own wait"))

(cl-defmethod lispm-inspect-insert ((_actor lispm-inspect-test-actor) (_part (eql 'sections)))
  "Insert the test's own part."
  (lispm-inspect-heading 1 'test-own "Test part")
  (lispm-inspect-insert-item (list 'turn 7) "- its turn 7"))

(ert-deftest lispm-inspect-test-a-type-adds-its-parts ()
  "The inspector draws what a type's methods add, where they say; nothing else."
  (lispm-inspect-test--with
    (let* ((actor (lispm-agents-add-actor
                   (lispm-inspect-test-actor--make :name "tester" :kind 'lispm :folder folder
                                                   :state 'running)))
           (buffer (lispm-inspect actor))
           (text (lispm-inspect-test--text buffer)))
      (should (string-match-p "Kind: lispm (the test's own)" text))
      (should (string-match-p "No approval waits.\n- the test's own wait\n\\* Inbox" text))
      (should (string-match-p "\\* Test part\n- its turn 7\n\\'" text))
      (should-not (string-match-p "^\\* Session\\|turns' calls" text))
      ;; Reverting a turn is the type's to offer: this one does not.
      (lispm-inspect-test--goto buffer "its turn 7")
      (should-error (lispm-inspect-test--key buffer "r") :type 'user-error))))

;;; A terminal agent

(ert-deftest lispm-inspect-test-terminal-agent ()
  (lispm-inspect-test--with
    (let* ((agent (lispm-test-add-agent :kind 'codex :folder folder :name "codex"
                                        :state 'running :activity 'idle :port 4242))
           (buffer (lispm-inspect agent))
           (answers nil))
      (should (equal (buffer-name buffer) "*LispM inspect: codex*"))
      (with-current-buffer buffer
        (should (derived-mode-p 'org-mode))
        (should buffer-read-only))
      ;; Drawn at once, the ledger still to answer: asked, never waited for.
      (should (string-match-p "Loading: asking the ledger" (lispm-inspect-test--text buffer)))
      (should (equal (cdr (assq 'lispm/ledger lispm-inspect-test--sent))
                     '(:limit 30 :agent "codex")))
      (let ((text (lispm-inspect-test--text buffer)))
        (should (string-match-p "^\\* \\[\\[lispm:agent:codex\\]\\[codex\\]\\]$" text))
        (should (string-match-p "^- Kind: codex (Codex)$" text))
        (should (string-match-p "^- Role: default$" text))
        (should (string-search (format "- Folder: [[file:%s][" folder) text))
        (should (string-match-p "^- State: running, idle$" text))
        (should (string-match-p "^- MCP port: 4242$" text))
        (should (string-match-p "^- edit: ask$" text))
        (should (string-match-p "^| edit +| ask +| +| ask +|$" text))
        (should (string-match-p "^| read +| allow +| +| allow +|$" text))
        (should (string-match-p "No approval waits" text))
        (should-not (string-match-p "^\\* Session$" text)))
      (should (lispm-inspect-test--shows buffer "No message to it in the ledger"))
      (should-not (string-match-p "Loading" (lispm-inspect-test--text buffer)))
      ;; A session grant shows, and lifts edit's ask.
      (lispm-policy-grant agent 'edit)
      (lispm-inspect-test--redraw buffer)
      (should (string-match-p "^- edit: allowed until it leaves  (k revokes it)$"
                              (lispm-inspect-test--text buffer)))
      (should (string-match-p "^| edit +| ask +| granted +| allow +|$"
                              (lispm-inspect-test--text buffer)))
      ;; Revoked there, in place: edit asks again.
      (lispm-inspect-test--goto buffer "- edit: allowed until it leaves")
      (lispm-inspect-test--key buffer "k")
      (should-not (lispm-policy-granted-p agent 'edit))
      (should (string-match-p "^| edit +| ask +| +| ask +|$" (lispm-inspect-test--text buffer)))
      (should (string-match-p "None: nothing allowed for its session" (lispm-inspect-test--text buffer)))
      ;; A message is queued: the sidecar's report of the queue redraws it,
      ;; and the ledger is asked again.
      (setq lispm-inspect-test--ledger
            (list (list :id 7 :time (float-time) :kind "message" :sender "claude"
                        :recipient "codex" :request_id nil :state "queued"
                        :text "please review notes.el")
                  (list :id "D1" :time (float-time) :kind "decision" :sender "codex"
                        :recipient nil :request_id nil :state "allow" :tool_kind "shell"
                        :text "allow: shell: ls (allowed by the policy)")))
      (let ((asked (lispm-inspect-test--ledger-asks "codex")))
        (lispm-sidecar-handle-notification
         'lispm/agent-activity (list :name "codex" :instance (lispm-actor-serial agent)
                                     :activity "idle" :queued 1))
        (should (lispm-inspect-test--shows
                 buffer (regexp-quote "message from [[lispm:agent:claude][claude]] to [[lispm:agent:codex][codex]], queued: please review notes.el")))
        (should (= (lispm-inspect-test--ledger-asks "codex") (1+ asked))))
      (let ((text (lispm-inspect-test--text buffer)))
        (should (string-match-p "^\\* Inbox (1 queued)$" text))
        (should (string-search "shell, allow: shell: ls (allowed by the policy)" text)))
      ;; Point on the message stays on it when an approval arrives above it.
      (lispm-inspect-test--goto buffer "please review")
      (with-selected-window (get-buffer-window buffer) (forward-char 3))
      (lispm-approvals-request agent 'default 'shell '(:command "make test")
                               (lambda (answer) (push answer answers)) "run_shell make test")
      (should (lispm-inspect-test--shows buffer (regexp-quote "[[lispm:approval:A1][A1]] shell: run_shell make test")))
      (should (string-match-p "^\\* Waiting (1 approval)$" (lispm-inspect-test--text buffer)))
      (with-selected-window (get-buffer-window buffer)
        (should (equal (car (lispm-inspect--item-at)) 'message))
        (should (= (- (point) (line-beginning-position)) 3)))
      ;; Allowed in place with `a'.
      (lispm-inspect-test--goto buffer "[[lispm:approval:A1]")
      (lispm-inspect-test--key buffer "a")
      (should (equal answers '((:decision allow))))
      (should (lispm-inspect-test--shows buffer "No approval waits"))
      ;; Denied in place with `d', with a reason.
      (lispm-approvals-request agent 'default 'eval '(:form "(+ 1 2)")
                               (lambda (answer) (push answer answers)))
      (should (lispm-inspect-test--shows buffer (regexp-quote "[[lispm:approval:A2][A2]] eval")))
      (lispm-inspect-test--goto buffer "[[lispm:approval:A2]")
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "not now")))
        (lispm-inspect-test--key buffer "d"))
      (should (equal (car answers) '(:decision deny :reason "not now")))
      (should (lispm-inspect-test--shows buffer "No approval waits"))
      ;; The queued message withdrawn in place with `w'; then the ledger is asked again.
      (let ((asked (lispm-inspect-test--ledger-asks "codex")))
        (lispm-inspect-test--goto buffer "please review")
        (lispm-inspect-test--key buffer "w")
        (should (equal (cdr (assq 'lispm/withdraw lispm-inspect-test--sent)) '(:message_id 7)))
        (should (lispm-inspect-test--until
                 (lambda () (> (lispm-inspect-test--ledger-asks "codex") asked)))))
      ;; `w' on no message does nothing.
      (lispm-inspect-test--goto buffer "* Policy")
      (should-error (lispm-inspect-test--key buffer "w") :type 'user-error)
      (should (= 1 (cl-count 'lispm/withdraw lispm-inspect-test--sent :key #'car)))
      ;; The agent leaves: the inspector says so.
      (lispm-agents-unregister agent)
      (should (lispm-inspect-test--shows buffer "^\\* .*codex.* (has left)$")))))

(defun lispm-inspect-test--redraw (buffer)
  "Redraw BUFFER at once, as its timer would."
  (lispm-inspect-redraw buffer))

(ert-deftest lispm-inspect-test-redraws-only-while-shown ()
  (lispm-inspect-test--with
    (let* ((agent (lispm-test-add-agent :kind 'codex :folder folder :name "codex"
                                        :state 'running :activity 'idle))
           (buffer (lispm-inspect agent)))
      (should (lispm-inspect-test--shows buffer "No message to it"))
      (switch-to-buffer "*scratch*")
      (should-not (get-buffer-window buffer t))
      (lispm-agents-set-activity agent 'busy)
      (accept-process-output nil 0.4)
      (should (string-match-p "^- State: running, idle$" (lispm-inspect-test--text buffer)))
      (should (buffer-local-value 'lispm-inspect--stale buffer))
      (switch-to-buffer buffer)
      ;; Redisplay runs this hook; a batch Emacs never redisplays.
      (with-current-buffer buffer
        (run-hook-with-args 'window-buffer-change-functions (get-buffer-window buffer)))
      (should (lispm-inspect-test--shows buffer "^- State: running, busy$"))
      (should-not (buffer-local-value 'lispm-inspect--stale buffer)))))

;;; An own agent

(ert-deftest lispm-inspect-test-own-agent ()
  (lispm-inspect-test--with
    (let* ((codex (lispm-test-add-agent :kind 'codex :folder folder :name "codex"
                                        :state 'running :activity 'idle))
           (agent (lispm-own-agent-make folder "scripted"
                                    (lambda (name) (lispm-session-create folder "scripted" name))))
           (name (lispm-actor-name agent))
           (session (buffer-local-value 'lispm-session-id (lispm-own-agent-buffer agent)))
           (buffer (progn
                     (setq lispm-test-model-script
                           (list (list (list :type "tool_call" :id "c1" :name "edit_file"
                                             :arguments (json-encode '(:path "a.txt" :old "alpha"
                                                                       :new "beta")))
                                       '(:type "done"))
                                 (list (list :type "tool_call" :id "c2" :name "ask_agent"
                                             :arguments (json-encode '(:to "codex"
                                                                       :request "check a.txt")))
                                       '(:type "done"))
                                 '((:type "text" :text "All done.")
                                   (:type "usage" :input_tokens 120 :output_tokens 7)
                                   (:type "done"))))
                     (lispm-inspect agent))))
      (ignore codex)
      (let ((text (lispm-inspect-test--text buffer)))
        (should (string-match-p "^- Kind: lispm (LispM's own agent)$" text))
        (should (string-match-p "^\\* Session$" text))
        (should (string-match-p "^- Model: scripted$" text))
        (should (string-search (format "- Id: %s" session) text))
        (should (string-search "- File: [[file:" text))
        (should (string-match-p "Turns of this Emacs (0)" text)))
      ;; A turn: its edit waits for an approval, shown as the call's state.
      (lispm-own-agent-send agent "change a.txt")
      (should (lispm-inspect-test--shows
               buffer (regexp-quote (format "[[lispm:call:%s/1/c1][edit_file c1]]: waits for approval [[lispm:approval:A1][A1]]" session))))
      (should (string-search "[[lispm:approval:A1][A1]] edit" (lispm-inspect-test--text buffer)))
      ;; `a' on the call allows its approval; then it asks codex.
      (setq lispm-inspect-test--ledger
            (list (list :id 9 :time (float-time) :kind "request" :sender name
                        :recipient "codex" :request_id "R1" :state "delivered"
                        :request_state "open" :text "check a.txt")))
      (lispm-inspect-test--goto buffer "edit_file c1]]: waits")
      (lispm-inspect-test--key buffer "a")
      (should (lispm-inspect-test--shows
               buffer (concat (regexp-quote "[[lispm:call:")
                             ".*ask_agent c2\\]\\]: waits on request \\[\\[lispm:request:R1\\]\\[R1\\]\\]")))
      (should (equal (lispm-test-read-file (expand-file-name "a.txt" folder)) "beta\n"))
      (should (lispm-inspect-test--shows
               buffer (regexp-quote "- [[lispm:request:R1][R1]] to [[lispm:agent:codex][codex]], open: check a.txt")))
      ;; The request is answered: the turn ends, nothing is waited on.
      (setq lispm-inspect-test--ledger
            (list (list :id 9 :time (float-time) :kind "request" :sender name
                        :recipient "codex" :request_id "R1" :state "picked_up"
                        :request_state "answered" :text "check a.txt")))
      (lispm-sidecar-dispatch-request
       'emacs/deliver (list :name name :instance (lispm-actor-serial agent)
                            :text "[Reply from codex to request R1]\nlooks fine"
                            :message_id 10 :kind "reply" :sender "codex" :request_id "R1"))
      (should (lispm-inspect-test--shows
               buffer (regexp-quote (format "- [[lispm:turn:%s/1][Turn 1]]: done, 120 input, 7 output tokens" session))))
      (should (lispm-inspect-test--shows buffer "\\*\\* Requests it waits on\nNone\\."))
      (let ((text (lispm-inspect-test--text buffer)))
        (should (string-search "- Tokens: 120 input in its last request (12% of its window of 1000), 7 output" text))
        (should (string-match-p "edit_file c1\\]\\] (turn 1): done" text))
        (should (string-match-p "ask_agent c2\\]\\] (turn 1): done" text)))
      ;; `r' on the turn reverts it.
      (lispm-inspect-test--goto buffer "Turn 1]]: done")
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (&rest _) t)))
        (lispm-inspect-test--key buffer "r"))
      (should (equal (lispm-test-read-file (expand-file-name "a.txt" folder)) "alpha\n"))
      ;; `r' elsewhere says what it needs.
      (lispm-inspect-test--goto buffer "- Model:")
      (should-error (lispm-inspect-test--key buffer "r") :type 'user-error))))

;;; A helper

(ert-deftest lispm-inspect-test-helper ()
  (lispm-inspect-test--with
    (let* ((caller (lispm-test-add-agent :kind 'codex :folder folder :name "codex"
                                         :state 'running :activity 'idle))
           (_ (setf (lispm-actor-role caller) 'careful))
           (tester (lispm-helper-make 'tester folder caller))
           (reviewer (lispm-helper-make 'reviewer folder tester))
           (buffer (lispm-inspect tester)))
      (let ((text (lispm-inspect-test--text buffer)))
        (should (string-match-p "^- Role: tester$" text))
        (should (string-match-p "^- Caller: \\[\\[lispm:agent:codex\\]\\[codex\\]\\]$" text))
        (should (string-match-p "^| Kind +| Role's +| Caller's +| Effective +|$" text))
        ;; The stricter of its role's and its caller's, per kind.
        (should (string-match-p "^| read +| allow +| ask +| ask +|$" text))
        (should (string-match-p "^| edit +| deny +| allow +| deny +|$" text))
        (should (string-match-p "^| shell +| ask +| allow +| ask +|$" text))
        (should (string-match-p "^| eval +| deny +| deny +| deny +|$" text))
        (should (string-search "- edit: allow (only test/**, tests/**)" text))
        ;; The role's rules come from its Org file.
        (should (string-match-p "^From \\[\\[file:.*tester\\.org\\]" text)))
      ;; A helper of a helper: its chain of callers.
      (let ((text (lispm-inspect-test--text (lispm-inspect reviewer))))
        (should (string-search
                 (format "- Caller: [[lispm:agent:%s][%s]], under [[lispm:agent:codex][codex]]"
                         (lispm-actor-name tester) (lispm-actor-name tester))
                 text))
        (should (string-match-p "^| read +| allow +| ask +| ask +|$" text))
        (should (string-match-p "^| shell +| deny +| ask +| deny +|$" text)))
      ;; `i' on the caller's link inspects the caller.
      (lispm-inspect-test--goto buffer "- Caller: ")
      (with-selected-window (get-buffer-window buffer) (search-forward "[[lispm:agent:"))
      (lispm-inspect-test--key buffer "i")
      (should (equal (buffer-name (window-buffer (selected-window)))
                     "*LispM inspect: codex*")))))

;;; The agent list

(ert-deftest lispm-inspect-test-i-in-the-agent-list ()
  (lispm-inspect-test--with
    (lispm-test-add-agent :kind 'codex :folder folder :name "codex" :state 'running)
    (lispm)
    (goto-char (point-min))
    (should (equal (tabulated-list-get-id) "codex"))
    (should (eq (keymap-lookup lispm-list-mode-map "i") #'lispm-inspect))
    (call-interactively #'lispm-inspect)
    (should (equal (buffer-name) "*LispM inspect: codex*"))))

(provide 'lispm-inspect-test)
;;; lispm-inspect-test.el ends here
