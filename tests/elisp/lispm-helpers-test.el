;;; lispm-helpers-test.el --- Tests of helpers started from roles  -*- lexical-binding: t; -*-

;;; Commentary:

;; Helpers are made the way the sidecar makes them, by calling the
;; `emacs/start-helper' handler; the sidecar itself is a fake that
;; keeps what Emacs sends it and answers `lispm/agent-start' at once,
;; and the model is a script: each request of a turn takes the next
;; answer of `lispm-test-model-script', given to the turn from a
;; timer as the sidecar's events are.  Sessions go to a folder of the
;; test's own.
;;
;; The tests: the handler's answer and errors; a helper's decisions
;; under reviewer and tester for callers whose roles allow or deny
;; (and two levels of helpers); a tool outside its role refused
;; without an approval; retirement once its turn is over; a helper's
;; approvals in `*LispM approvals*' and in its caller's session;
;; `emacs/list-agents' and the `list_agents' tool; the Roles shelf.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-helpers)
(require 'lispm-apps)
(require 'lispm-test-fixtures)

(defvar lispm-helpers-test--sent nil
  "What Emacs sent the fake sidecar, newest first: (METHOD . PARAMS).")

(defun lispm-helpers-test--request (method params &rest keys)
  "Keep METHOD and PARAMS as the fake sidecar; answer `lispm/agent-start'.
KEYS are those of `lispm-sidecar-async-request'."
  (push (cons method params) lispm-helpers-test--sent)
  (when (eq method 'lispm/agent-start)
    (funcall (plist-get keys :on-success) (list :name (plist-get params :name))))
  nil)

(defun lispm-helpers-test--sent (method &optional name)
  "Return the params of what was sent as METHOD (for NAME), newest first."
  (cl-loop for (sent . params) in lispm-helpers-test--sent
           when (and (eq sent method)
                     (or (null name) (equal (plist-get params :name) name)))
           collect params))

(defun lispm-helpers-test--until (predicate &optional seconds)
  "Run timers until PREDICATE returns non-nil or SECONDS (5) pass; return it."
  (let ((deadline (+ (float-time) (or seconds 5)))
        value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.01))
    value))

(defmacro lispm-helpers-test--with (&rest body)
  "Run BODY with a registry, a fake sidecar, a scripted model and fresh folders.
In BODY, `folder' is the project (a truename with a slash, holding
notes.el), and `user' a folder of the user's roles."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-helpers-test-" t))))
          (folder (expand-file-name "project/" root))
          (user (expand-file-name "roles/" root))
          (lispm-sessions-directory (expand-file-name "sessions/" root))
          (lispm-models '(("scripted" :api anthropic :base-url "http://127.0.0.1:9"
                           :model "m")
                          ("scripted-2" :api anthropic :base-url "http://127.0.0.1:9"
                           :model "m2")))
          (lispm-agents-changed-hook (default-value 'lispm-agents-changed-hook))
          (lispm-policy--grants nil)
          (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
          (lispm-roles--cache (make-hash-table :test #'equal))
          (lispm-roles-directories (list user))
          (lispm-approvals--pending nil)
          (lispm-approvals--counter 0)
          (lispm-approvals-changed-hook nil)
          (global-mode-string nil)
          (lispm-messages--registered nil)
          (lispm-helpers-test--sent nil)
          (lispm-test-model-script nil)
          (lispm-test-model-requests nil)
          (text-quoting-style 'grave))
     (make-directory folder t)
     (make-directory user t)
     (lispm-test-write-file folder "notes.el" ";;; notes.el\n(defun notes () 1)\n")
     (lispm-test-with-played-sidecar (#'lispm-helpers-test--request lispm-helpers-test--sent)
       (unwind-protect
           (save-window-excursion
             (lispm-test-with-registry
               (unwind-protect (progn ,@body)
                 (dolist (buffer (buffer-list))
                   (when (buffer-local-value 'lispm-session-file buffer)
                     (with-current-buffer buffer (set-buffer-modified-p nil))
                     (let ((kill-buffer-query-functions nil)) (kill-buffer buffer)))))))
         (when (get-buffer lispm-approvals-buffer-name)
           (kill-buffer lispm-approvals-buffer-name))
         (lispm-sessions-wait-for-commits 10)
         (lispm-test-remove-folder root)))))

(defun lispm-helpers-test--start (role caller)
  "Start a helper of ROLE for CALLER through `emacs/start-helper'; return it."
  (let ((answer (lispm-sidecar-dispatch-request
                 'emacs/start-helper (list :role role :caller (lispm-actor-name caller)
                                           :caller_instance (lispm-actor-serial caller)))))
    (lispm-agent-from-params answer)))

(defun lispm-helpers-test--own-agent (folder &optional role)
  "Make an own agent of ROLE (default the default role) in FOLDER; return it."
  (lispm-own-agent-make folder "scripted-2"
                       (lambda (name) (lispm-session-create folder "scripted-2" name))
                       role))

(defun lispm-helpers-test--text (buffer)
  "Return the whole text of BUFFER."
  (with-current-buffer buffer
    (save-restriction (widen) (buffer-substring-no-properties (point-min) (point-max)))))

(defun lispm-helpers-test--call (actor tool args)
  "Call TOOL with ARGS, a plist, as ACTOR through the pipeline; return the outcome.
Wait for it, 5 seconds at most."
  (let (outcome)
    (lispm-calls-invoke actor tool args (lambda (o) (setq outcome o)))
    (lispm-helpers-test--until (lambda () outcome))))

(defun lispm-helpers-test--call-event (id name arguments)
  "Return a model event asking for the call ID of the tool NAME with ARGUMENTS."
  (list :type "tool_call" :id id :name name :arguments arguments))

;;; emacs/start-helper

(ert-deftest lispm-helpers-test-start-helper-handler ()
  (lispm-helpers-test--with
    (let* ((claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
           (answer (lispm-sidecar-dispatch-request
                    'emacs/start-helper (list :role "reviewer" :caller "claude"
                                              :caller_instance (lispm-actor-serial claude))))
           (helper (lispm-agent-get "reviewer")))
      ;; Answered at once: its name (the role's) and instance (its serial).
      (should (equal answer (list :name "reviewer" :instance (lispm-actor-serial helper))))
      (should (lispm-own-agent-p helper))
      (should (eq (lispm-actor-kind helper) 'lispm))
      (should (eq (lispm-actor-role helper) 'reviewer))
      (should (eq (lispm-actor-caller helper) claude))
      (should (equal (lispm-actor-folder helper) (lispm-actor-folder claude)))
      ;; A terminal caller has no model: the default one.
      (should (equal (lispm-own-agent-model helper) "scripted"))
      ;; Registered with the sidecar as every own agent is.
      (let ((start (car (lispm-helpers-test--sent 'lispm/agent-start "reviewer"))))
        (should (equal (plist-get start :kind) "lispm"))
        (should (eql (plist-get start :instance) (lispm-actor-serial helper))))
      (should (memq helper lispm-messages--registered))
      ;; Its session says who asked.
      (should (string-search "a helper of claude"
                             (lispm-helpers-test--text (lispm-own-agent-buffer helper))))
      ;; A second one of the same role; an own agent's helper has its model.
      (should (equal (lispm-actor-name (lispm-helpers-test--start "reviewer" claude))
                     "reviewer-2"))
      (let* ((emacs (lispm-helpers-test--own-agent folder))
             (tester (lispm-helpers-test--start "tester" emacs)))
        (should (equal (lispm-actor-name tester) "tester"))
        (should (eq (lispm-actor-caller tester) emacs))
        (should (equal (lispm-own-agent-model tester) "scripted-2")))
      ;; An unknown role: -32058, naming the roles; nothing made.
      (let ((count (length (lispm-agents)))
            (err (should-error (lispm-sidecar-dispatch-request
                                'emacs/start-helper
                                (list :role "poet" :caller "claude"
                                      :caller_instance (lispm-actor-serial claude)))
                               :type 'jsonrpc-error)))
        (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32058))
        (should (string-search "Unknown role poet; the roles are: default, reviewer, tester"
                               (alist-get 'jsonrpc-error-message (cdr err))))
        (should (= count (length (lispm-agents)))))
      ;; An unknown caller, or another instance of its name: -32001.
      (dolist (params (list '(:role "reviewer" :caller "nobody" :caller_instance 1)
                            (list :role "reviewer" :caller "claude"
                                  :caller_instance (1+ (lispm-actor-serial claude)))))
        (let ((err (should-error (lispm-sidecar-dispatch-request 'emacs/start-helper params)
                                 :type 'jsonrpc-error)))
          (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32001)))))))

;;; The policy of a helper

(ert-deftest lispm-helpers-test-a-helper-never-asked-retires ()
  ;; The sidecar may give up waiting for a helper it asked for.
  (lispm-helpers-test--with
    (let* ((lispm-helpers-unasked-seconds 0.1)
           (claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
           (asked (lispm-helpers-test--start "reviewer" claude))
           (unasked (lispm-helpers-test--start "tester" claude)))
      (lispm-own-agent-send asked "Hold on.")
      (should (lispm-own-agent-turns asked))
      ;; One that was given something is not retired so.
      (lispm-helpers--retire-if-unasked asked)
      (should (lispm-agent-live-p asked))
      (let ((deadline (+ (float-time) 5)))
        (while (and (lispm-agent-live-p unasked) (< (float-time) deadline))
          (accept-process-output nil 0.02)))
      (should-not (lispm-agent-live-p unasked)))))

(ert-deftest lispm-helpers-test-decisions-under-reviewer-and-tester ()
  (lispm-helpers-test--with
    (let* ((lispm-policy-roles (append '((open (read allow) (edit allow) (shell allow))
                                         (no-shell (read allow) (edit ask) (shell deny)))
                                       lispm-policy-roles))
           (open (lispm-test-add-actor :name "open" :folder folder :role 'open))
           (no-shell (lispm-test-add-actor :name "strict" :folder folder :role 'no-shell))
           (plain (lispm-test-add-actor :name "plain" :folder folder))
           (test (list :files (list (expand-file-name "tests/a.el" folder))))
           (src (list :files (list (expand-file-name "notes.el" folder)))))
      (cl-flet ((decide (helper kind &optional target)
                  (let ((decision (lispm-policy-decide helper (lispm-actor-role helper)
                                                       kind target)))
                    ;; One rule: the roles' function agrees on a real helper.
                    (should (eq (lispm-roles-helper-decision (lispm-actor-role helper)
                                                             (lispm-actor-caller helper)
                                                             kind target helper)
                                decision))
                    decision)))
        ;; The reviewer: edits and shell denied, whatever its caller allows.
        (let ((reviewer (lispm-helpers-test--start "reviewer" open)))
          (should (eq (decide reviewer 'read src) 'allow))
          (should (eq (decide reviewer 'edit src) 'deny))
          (should (eq (decide reviewer 'shell) 'deny)))
        ;; The tester: a caller allowing all gives the tester's own rules.
        (let ((tester (lispm-helpers-test--start "tester" open)))
          (should (eq (decide tester 'edit test) 'allow))
          (should (eq (decide tester 'edit src) 'deny))
          (should (eq (decide tester 'shell) 'ask))
          ;; Its own session grant lifts its ask; never a deny.
          (lispm-policy-grant tester 'shell)
          (lispm-policy-grant tester 'edit)
          (should (eq (decide tester 'shell) 'allow))
          (should (eq (decide tester 'edit src) 'deny)))
        ;; A caller denying shell: the tester's shell, which would ask, is denied.
        (let ((tester (lispm-helpers-test--start "tester" no-shell)))
          (should (eq (decide tester 'shell) 'deny))
          (should (eq (decide tester 'edit test) 'ask))
          ;; Two levels: a default helper of that tester, denied shell by
          ;; the caller two up; asked for edits under tests/, denied elsewhere.
          (let ((deep (lispm-helpers-test--start "default" tester)))
            (should (eq (lispm-actor-caller deep) tester))
            (should (eq (decide deep 'shell) 'deny))
            (should (eq (decide deep 'edit test) 'ask))
            (should (eq (decide deep 'edit src) 'deny))
            (should (eq (decide deep 'read src) 'allow))))
        ;; The caller's grants are its own: its tester still asks.
        (lispm-policy-grant plain 'shell)
        (lispm-policy-grant plain 'edit)
        (should (eq (lispm-policy-decide plain nil 'shell nil) 'allow))
        (let ((tester (lispm-helpers-test--start "tester" plain)))
          (should (eq (decide tester 'shell) 'ask))
          (should (eq (decide tester 'edit test) 'ask))
          ;; A helper whose folder is not within its caller's: denied everything.
          (setf (lispm-actor-folder tester) user)
          (should (eq (decide tester 'read nil) 'deny)))
        ;; `lispm-helper-make' refuses such a folder from the start.
        (should-error (lispm-helper-make 'reviewer user plain) :type 'lispm-policy-error)))))

;;; Tools outside the role

(ert-deftest lispm-helpers-test-a-tool-outside-the-role-is-refused-unasked ()
  (lispm-helpers-test--with
    (let* ((open (lispm-test-add-actor :name "open" :folder folder))
           (reviewer (lispm-helpers-test--start "reviewer" open))
           (before (lispm-test-read-file (expand-file-name "notes.el" folder))))
      ;; The default role would ask for an edit; the reviewer has no edit_file.
      (should (eq (lispm-policy-decide open nil 'edit nil) 'ask))
      (let ((outcome (lispm-helpers-test--call
                      reviewer "write_file" '(:path "notes.el" :content "gone"))))
        (should-not (plist-get outcome :ok))
        (should (eq (car (plist-get outcome :condition)) 'lispm-policy-denied))
        (should (equal (plist-get outcome :error)
                       "edit denied by the policy of role reviewer: write_file is not among the tools of role reviewer")))
      ;; No one was asked; the ledger has the denial; nothing changed.
      (should (= (lispm-approvals-count) 0))
      (let ((audit (car (lispm-helpers-test--sent 'lispm/audit))))
        (should (equal (plist-get audit :agent) "reviewer"))
        (should (equal (plist-get audit :decision) "deny"))
        (should (equal (plist-get audit :kind) "edit"))
        (should (string-search "write_file" (plist-get audit :what))))
      (should (equal (lispm-test-read-file (expand-file-name "notes.el" folder)) before))
      ;; A tool of its role runs.
      (should (plist-get (lispm-helpers-test--call reviewer "read_file" '(:path "notes.el"))
                         :ok))
      ;; A tester's run_shell, when its caller is a reviewer: the caller's tools.
      (let* ((strict (lispm-test-add-actor :name "strict" :folder folder :role 'reviewer))
             (tester (lispm-helpers-test--start "tester" strict))
             (outcome (lispm-helpers-test--call tester "run_shell" '(:command "touch x"))))
        (should (equal (plist-get outcome :error)
                       (concat "shell denied by the policy of role reviewer: run_shell is not "
                               "among the tools of strict (role reviewer), whose helper tester is")))
        (should-not (file-exists-p (expand-file-name "x" folder)))
        (should (= (lispm-approvals-count) 0))))))

;;; Retiring

(ert-deftest lispm-helpers-test-retires-after-its-turn ()
  (lispm-helpers-test--with
    (let* ((claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
           (helper (lispm-helpers-test--start "reviewer" claude))
           (buffer (lispm-own-agent-buffer helper))
           (file (buffer-local-value 'lispm-session-file buffer)))
      (setq lispm-test-model-script
            (list (list (lispm-helpers-test--call-event
                         "c1" "edit_file"
                         "{\"path\": \"notes.el\", \"old\": \"1\", \"new\": \"2\"}")
                        '(:type "done"))
                  '((:type "text" :text "It looks fine.") (:type "done"))))
      (lispm-own-agent-send helper "[Request R1 from claude]\nPlease review notes.el for me.")
      (should (lispm-helpers-test--until (lambda () (not (lispm-agent-live-p helper)))))
      ;; Two model requests, neither offering a tool outside the role.
      (should (= (length lispm-test-model-requests) 2))
      (let ((offered (mapcar (lambda (tool) (plist-get tool :name))
                             (plist-get (car lispm-test-model-requests) :tools))))
        (should (member "read_file" offered))
        (should-not (member "edit_file" offered)))
      ;; It left: the registry, the sidecar (which ends what waits for it).
      (should-not (lispm-agent-get "reviewer"))
      (should (eq (lispm-actor-state helper) 'exited))
      (should (lispm-helpers-test--sent 'lispm/agent-stop "reviewer"))
      (should-not (memq helper lispm-messages--registered))
      ;; Its buffer, shown nowhere, is gone; its session is saved.
      (should-not (buffer-live-p buffer))
      (let ((text (lispm-test-read-file file)))
        (should (string-search "Please review notes.el for me" text))
        (should (string-search "Refused" text))
        (should (string-search "It looks fine." text)))
      (should (= (lispm-approvals-count) 0))
      (should (string-search "(defun notes () 1)"
                             (lispm-test-read-file (expand-file-name "notes.el" folder)))))))

(ert-deftest lispm-helpers-test-a-shown-helper-keeps-its-buffer ()
  (lispm-helpers-test--with
    (let* ((claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
           (helper (lispm-helpers-test--start "reviewer" claude))
           (buffer (lispm-own-agent-buffer helper)))
      (switch-to-buffer buffer)
      (lispm-own-agent-send helper "Review notes.el.")
      (should (lispm-helpers-test--until (lambda () (not (lispm-agent-live-p helper)))))
      ;; Shown: it stays, no longer an agent's; reopening it shows it
      ;; read-only: a helper never acts without its caller.
      (should (buffer-live-p buffer))
      (should-not (lispm-own-agent-of-session buffer))
      (should-not (buffer-modified-p buffer))
      (should (string-search "Nothing more." (lispm-helpers-test--text buffer)))
      (should-not (lispm-own-agent-resume (buffer-local-value 'lispm-session-file buffer)))
      (should (buffer-local-value 'buffer-read-only buffer))
      (should-not (lispm-own-agent-of-session buffer)))))

(ert-deftest lispm-helpers-test-the-users-helper-does-not-retire ()
  (lispm-helpers-test--with
    (let ((default-directory folder))
      (let ((agent (lispm-helper-start "tester")))
        (should (eq (lispm-actor-role agent) 'tester))
        (should-not (lispm-actor-caller agent))
        (should (equal (lispm-actor-name agent) "tester"))
        (should (equal (lispm-actor-folder agent) folder))
        (should (string-search "started by the user"
                               (lispm-helpers-test--text (lispm-own-agent-buffer agent))))
        (lispm-own-agent-send agent "Hello.")
        (should (lispm-helpers-test--until (lambda () (= (length lispm-test-model-requests) 1))))
        (should (lispm-helpers-test--until (lambda () (not (lispm-own-agent-busy-p agent)))))
        ;; Past the turn's end and the timer a helper would retire from.
        (accept-process-output nil 0.05)
        (should (lispm-agent-live-p agent))
        (should (buffer-live-p (lispm-own-agent-buffer agent)))))))

;;; Approvals of a helper

(ert-deftest lispm-helpers-test-approvals-name-role-and-caller ()
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder))
           (caller-buffer (lispm-own-agent-buffer emacs))
           (tester (lispm-helpers-test--start "tester" emacs))
           outcome)
      (should (equal (lispm-actor-name emacs) "emacs"))
      (lispm-calls-invoke tester "run_shell" '(:command "echo checked")
                          (lambda (o) (setq outcome o)))
      (should (= (lispm-approvals-count tester) 1))
      (let ((approval (car (lispm-approvals-pending))))
        ;; In *LispM approvals*: its name, role and caller.
        (with-current-buffer lispm-approvals-buffer-name
          (should (string-search
                   (format "%s  tester (role tester, helper of emacs) asks for shell"
                           (lispm-approval-id approval))
                   (buffer-string))))
        ;; In the caller's session, which C-c C-c on it allows.
        (let ((text (lispm-helpers-test--text caller-buffer))
              (line (format "Approval %s: tester (role tester, helper of emacs) asks for shell"
                            (lispm-approval-id approval))))
          (should (string-search line text))
          (with-current-buffer caller-buffer
            (goto-char (point-min))
            (search-forward line)
            (should (eq (key-binding (kbd "C-c C-c")) #'lispm-helpers-decide-approval))
            (call-interactively #'lispm-helpers-decide-approval)
            ;; Answered once: no second time.
            (should-error (call-interactively #'lispm-helpers-decide-approval)
                          :type 'user-error)))
        (should (= (lispm-approvals-count) 0))
        ;; The helper goes on: its command ran.
        (should (lispm-helpers-test--until (lambda () outcome)))
        (should (plist-get outcome :ok))
        (should (string-search "checked" (plist-get outcome :text)))
        (should (string-search (format "Approval %s allowed once" (lispm-approval-id approval))
                               (lispm-helpers-test--text caller-buffer))))
      ;; A denial from the caller's session, with its reason.
      (setq outcome nil)
      (lispm-calls-invoke tester "run_shell" '(:command "echo again")
                          (lambda (o) (setq outcome o)))
      (let ((approval (car (lispm-approvals-pending))))
        (with-current-buffer caller-buffer
          (goto-char (point-min))
          (search-forward (format "Approval %s:" (lispm-approval-id approval)))
          (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "not now")))
            (lispm-helpers-decide-approval t)))
        (should (string-search (format "Approval %s denied: not now" (lispm-approval-id approval))
                               (lispm-helpers-test--text caller-buffer))))
      (should (lispm-helpers-test--until (lambda () outcome)))
      (should (equal (plist-get outcome :error) "shell denied by the user: not now"))
      ;; A caller that is no own agent: shown in the approvals buffer only.
      (let* ((claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
             (other (lispm-helpers-test--start "tester" claude)))
        (lispm-calls-invoke other "run_shell" '(:command "true") #'ignore)
        (with-current-buffer lispm-approvals-buffer-name
          (should (string-search "tester-2 (role tester, helper of claude) asks for shell"
                                 (buffer-string))))
        (lispm-approvals-withdraw (car (lispm-approvals-pending)))))))

;;; Helpers end with their caller (issue 23 §3)

(ert-deftest lispm-helpers-test-a-helper-ends-with-its-caller ()
  "Closing the caller retires its helpers down the chain; nothing approved runs."
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder))
           (tester (lispm-helpers-test--start "tester" emacs))
           (reviewer (lispm-helpers-test--start "reviewer" tester))
           (marker (expand-file-name "ran" folder))
           outcome)
      (lispm-calls-invoke tester "run_shell" (list :command (format "touch %s" marker))
                          (lambda (o) (setq outcome o)))
      (should (= (lispm-approvals-count tester) 1))
      (let ((approval (car (lispm-approvals-pending)))
            (tester-buffer (lispm-own-agent-buffer tester)))
        (with-current-buffer tester-buffer
          (add-hook 'kill-buffer-query-functions #'ignore nil t))
        (lispm-agent-close emacs)
        ;; The helpers left with it, down the chain.
        (should-not (lispm-agent-live-p tester))
        (should-not (lispm-agent-live-p reviewer))
        ;; Its approval was withdrawn, saying why; allowing it now does nothing.
        (should (= (lispm-approvals-count) 0))
        (should (lispm-helpers-test--until (lambda () outcome)))
        (should-not (plist-get outcome :ok))
        (should-error (lispm-approvals-allow approval))
        (should-not (file-exists-p marker))
        ;; The ledger's audit says so, naming the helper and its role.
        (should (cl-some (lambda (entry)
                           (and (equal (plist-get entry :decision) "withdrawn")
                                (equal (plist-get entry :agent) "tester")
                                (equal (plist-get entry :role) "tester")
                                (string-search "its caller emacs closed"
                                               (or (plist-get entry :reason) ""))))
                         (lispm-helpers-test--sent 'lispm/audit)))))))

(ert-deftest lispm-helpers-test-a-helpers-session-records-its-role-and-callers ()
  "A helper's session names its role and callers; it reopens read-only, never wider."
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder))
           (tester (lispm-helpers-test--start "tester" emacs))
           (reviewer (lispm-helpers-test--start "reviewer" tester))
           (file (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer reviewer))))
      (lispm-session-save (lispm-own-agent-buffer reviewer))
      (let ((text (lispm-test-read-file file)))
        (should (string-match-p "^#\\+LISPM_ROLE: reviewer$" text))
        (should (string-match-p "^#\\+LISPM_CALLERS: tester emacs$" text)))
      (lispm-agent-close emacs)
      (should-not (lispm-agent-live-p reviewer))
      (should-not (lispm-own-agent-resume file))
      (let ((buffer (find-buffer-visiting file)))
        (should (buffer-local-value 'buffer-read-only buffer))
        (should-not (lispm-own-agent-of-session buffer))
        ;; Its header line says why, naming its role and callers.
        (should (string-search "reviewer was a helper (role reviewer) of tester, then emacs"
                               (buffer-local-value 'header-line-format buffer)))
        ;; No turn runs there, even once it is made writable.
        (with-current-buffer buffer
          (let ((inhibit-read-only t))
            (goto-char (point-max))
            (insert "Go on, with edits."))
          (should-error (lispm-own-agent-send-input) :type 'user-error))
        (should-not lispm-test-model-requests)
        ;; Nor again: it reopens read-only, whoever is live now.
        (should-not (lispm-own-agent-resume file))
        (should-not (lispm-agent-get "reviewer"))))))

(ert-deftest lispm-helpers-test-the-users-helper-resumes-with-its-role ()
  "A helper the user started (no caller) resumes with its role, not the default."
  (lispm-helpers-test--with
    (let* ((reviewer (lispm-helper-start "reviewer" folder))
           (buffer (lispm-own-agent-buffer reviewer))
           (file (buffer-local-value 'lispm-session-file buffer)))
      (lispm-session-save buffer)
      (lispm-agent-close reviewer)
      (when (buffer-live-p buffer)
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer))
      (let ((again (lispm-own-agent-resume file)))
        (should again)
        (should (eq (lispm-actor-role again) 'reviewer))))))

(ert-deftest lispm-helpers-test-every-refusal-is-audited-naming-who-refused ()
  "A path outside the folder and a caller's denial both reach the ledger's audit."
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder 'reviewer))
           (tester (lispm-helpers-test--start "tester" emacs))
           (audits (lambda () (lispm-helpers-test--sent 'lispm/audit))))
      ;; Outside the folder: refused before anyone is asked, and audited.
      (dolist (path '("/etc/passwd" "../outside.txt"))
        (let ((outcome (lispm-helpers-test--call tester "read_file" (list :path path))))
          (should-not (plist-get outcome :ok))
          (should (eq (car (plist-get outcome :condition)) 'lispm-tool-outside-folder))))
      (should (= 2 (cl-count-if (lambda (entry)
                                  (and (equal (plist-get entry :decision) "deny")
                                       (equal (plist-get entry :agent) "tester")
                                       (string-search "outside the folder"
                                                      (plist-get entry :reason))))
                                (funcall audits))))
      ;; Denied by its caller up the chain: the audit names that caller and role.
      (let ((outcome (lispm-helpers-test--call tester "run_shell" '(:command "make check"))))
        (should-not (plist-get outcome :ok))
        (should (equal (plist-get outcome :error)
                       (concat "shell denied by the policy of role reviewer: run_shell is "
                               "not among the tools of emacs (role reviewer), whose helper "
                               "tester is"))))
      (let ((entry (car (funcall audits))))
        (should (equal (plist-get entry :decision) "deny"))
        (should (equal (plist-get entry :agent) "tester"))
        ;; The role that refused: the caller's, not the helper's own.
        (should (equal (plist-get entry :role) "reviewer"))
        (should (string-search "tools of emacs (role reviewer)" (plist-get entry :reason)))))))

;;; One way to decide an approval from a session

(ert-deftest lispm-helpers-test-a-session-decides-approvals-one-way ()
  "A TODO set to DONE, C-u C-c C-c on a call, C-c C-c on a helper's note:
each decides through `lispm-approvals-decide'."
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder))
           (buffer (lispm-own-agent-buffer emacs))
           (tester (lispm-helpers-test--start "tester" emacs))
           (decide (symbol-function 'lispm-approvals-decide))
           (decided nil))
      (cl-letf (((symbol-function 'lispm-approvals-decide)
                 (lambda (approval &optional deny)
                   (push (list (lispm-approval-id approval) deny) decided)
                   (funcall decide approval deny)))
                ((symbol-function 'read-string) (lambda (&rest _) "not that")))
        (setq lispm-test-model-script
              (list (list (lispm-helpers-test--call-event "e1" "run_shell" "{\"command\": \"true\"}")
                          '(:type "done"))
                    (list (lispm-helpers-test--call-event "e2" "run_shell" "{\"command\": \"true\"}")
                          '(:type "done"))))
        (lispm-own-agent-send emacs "Run it twice.")
        ;; Its own call's TODO item, set to DONE.
        (should (lispm-helpers-test--until (lambda () (= (lispm-approvals-count) 1))))
        (let ((first (lispm-approval-id (car (lispm-approvals-pending)))))
          (with-current-buffer buffer
            (widen)
            (goto-char (point-min))
            (re-search-forward "^\\*\\{4\\} TODO ")
            (org-todo "DONE"))
          (should (equal decided (list (list first nil)))))
        ;; The next call: C-u C-c C-c on it denies it.
        (should (lispm-helpers-test--until (lambda () (= (lispm-approvals-count) 1))))
        (let ((second (lispm-approval-id (car (lispm-approvals-pending)))))
          (with-current-buffer buffer
            (goto-char (point-min))
            (re-search-forward "^\\*\\{4\\} TODO ")
            (lispm-own-agent-send-input t))
          (should (equal (car decided) (list second t))))
        ;; A helper's approval, in its caller's session: C-c C-c on it.
        (lispm-calls-invoke tester "run_shell" '(:command "true") #'ignore)
        (should (lispm-helpers-test--until (lambda () (= (lispm-approvals-count) 1))))
        (let ((third (lispm-approval-id (car (lispm-approvals-pending)))))
          (with-current-buffer buffer
            (goto-char (point-min))
            (search-forward (format "Approval %s:" third))
            (call-interactively (key-binding (kbd "C-c C-c"))))
          (should (equal (car decided) (list third nil))))
        (should (= (length decided) 3))
        (should (= (lispm-approvals-count) 0))))))

(defun lispm-helpers-test--todo (file call-id)
  "Return the text of the approval entry of the call CALL-ID in the session FILE."
  (let ((text (lispm-test-read-file file)))
    (and (string-match (concat ":LISPM_CALL_ID: " (regexp-quote call-id)
                               "\\(?:.\\|\n\\)*?\\(\\*\\*\\*\\* \\(?:TODO\\|DONE\\|CANCELLED\\)"
                               "\\(?:.\\|\n\\)*?\\)\n\\*")
                       text)
         (match-string 1 text))))

(ert-deftest lispm-helpers-test-closing-an-agent-ends-everything-it-ran ()
  "Closed from the agent list, an own agent's turn ends; its helpers' turns too.
Each approval still awaited is withdrawn: the session's entry and the
approvals buffer say so, and allowing it runs nothing; no model is
asked again; the session's buffer is no agent's, and takes no input."
  (lispm-helpers-test--with
    (let* ((emacs (lispm-helpers-test--own-agent folder))
           (emacs-buffer (lispm-own-agent-buffer emacs))
           (tester (lispm-helpers-test--start "tester" emacs))
           (tester-buffer (lispm-own-agent-buffer tester))
           (tester-file (buffer-local-value 'lispm-session-file tester-buffer))
           (mine (expand-file-name "emacs-ran" folder))
           (theirs (expand-file-name "tester-ran" folder)))
      (with-current-buffer tester-buffer
        (add-hook 'kill-buffer-query-functions #'ignore nil t))
      ;; Each in a turn, at a shell call that waits for the user.
      (setq lispm-test-model-script
            (list (list (lispm-helpers-test--call-event
                         "e1" "run_shell" (format "{\"command\": \"touch %s\"}" mine))
                        '(:type "done"))
                  (list (lispm-helpers-test--call-event
                         "t1" "run_shell" (format "{\"command\": \"touch %s\"}" theirs))
                        '(:type "done"))
                  ;; What a model would say next, were it asked again.
                  (list (lispm-helpers-test--call-event
                         "x1" "run_shell" (format "{\"command\": \"touch %s\"}" mine))
                        '(:type "done"))
                  (list (lispm-helpers-test--call-event
                         "x2" "run_shell" (format "{\"command\": \"touch %s\"}" mine))
                        '(:type "done"))))
      (lispm-own-agent-send emacs "Run make check.")
      (should (lispm-helpers-test--until (lambda () (= (lispm-approvals-count) 1))))
      (lispm-own-agent-send tester "[Request R1 from emacs]\nRun the tests.")
      (should (lispm-helpers-test--until (lambda () (= (lispm-approvals-count) 2))))
      (let ((approvals (lispm-approvals-pending))
            (asked (length lispm-test-model-requests)))
        ;; The close command of the agent list.
        (lispm-agent-close emacs)
        (accept-process-output nil 0.1)
        (lispm-helpers-test--until (lambda () nil) 0.2)
        ;; Both turns are over, and no model was asked again.
        (should-not (lispm-own-agent-busy-p emacs))
        (should-not (lispm-agent-live-p tester))
        (should (= (length lispm-test-model-requests) asked))
        ;; Nothing waits, and allowing what waited runs nothing.
        (should (= (lispm-approvals-count) 0))
        (dolist (approval approvals)
          (should-error (lispm-approvals-allow approval) :type 'user-error))
        (accept-process-output nil 0.1)
        (should-not (file-exists-p mine))
        (should-not (file-exists-p theirs))
        ;; The approvals buffer says they were withdrawn, and why.
        (with-current-buffer lispm-approvals-buffer-name
          (should (string-search "withdrawn: emacs (role default)'s shell" (buffer-string)))
          (should (string-search "(its caller emacs closed); nothing of it runs"
                                 (buffer-string)))))
      ;; The sessions' entries say withdrawn, and why.
      (should (string-search "CANCELLED" (lispm-helpers-test--todo tester-file "t1")))
      (should (string-search "Reason: withdrawn, its caller emacs closed"
                             (lispm-helpers-test--todo tester-file "t1")))
      (should (string-search "Reason: withdrawn, emacs closed"
                             (lispm-helpers-test--text emacs-buffer)))
      ;; The closed agent's session stays, no agent's: it takes no input.
      (should (buffer-live-p emacs-buffer))
      (should-not (lispm-own-agent-of-session emacs-buffer))
      (should-error (lispm-own-agent-send emacs "Go on.") :type 'user-error)
      (should (= (length lispm-test-model-requests) 2)))))

(ert-deftest lispm-helpers-test-a-caller-chain-denial-names-the-caller ()
  "A policy denial from a caller up the chain names its role, to the helper and in the audit."
  (lispm-helpers-test--with
    (let* ((lispm-policy-roles (append '((no-shell (read allow) (edit ask) (shell deny)))
                                       lispm-policy-roles))
           (strict (lispm-test-add-actor :name "strict" :folder folder :role 'no-shell))
           (tester (lispm-helpers-test--start "tester" strict))
           (outcome (lispm-helpers-test--call tester "run_shell" '(:command "make check"))))
      (should-not (plist-get outcome :ok))
      (should (equal (plist-get outcome :error)
                     (concat "shell denied by the policy of role no-shell: shell is denied to "
                             "tester (role tester), a helper of strict, by strict's policy "
                             "(role no-shell)")))
      (should (= (lispm-approvals-count) 0))
      (let ((entry (car (lispm-helpers-test--sent 'lispm/audit))))
        (should (equal (plist-get entry :decision) "deny"))
        (should (equal (plist-get entry :agent) "tester"))
        (should (equal (plist-get entry :role) "no-shell"))
        (should (string-search "by strict's policy (role no-shell)"
                               (plist-get entry :reason))))
      ;; Its own role's denial names its own role, as before.
      (let ((outcome (lispm-helpers-test--call tester "eval_elisp" '(:form "(+ 1 2)"))))
        (should-not (plist-get outcome :ok))
        (should (string-prefix-p "eval denied by the policy of role tester"
                                 (plist-get outcome :error)))))))

(ert-deftest lispm-helpers-test-refusals-of-files-are-audited ()
  "A file of keys, and LispM's own sessions, are refused to every agent, and audited.
An agent started in a folder that holds `lispm-sessions-directory'
\(the home folder) cannot rewrite a session's header, such as a
helper's role and callers: the header is trusted when it reopens."
  (lispm-helpers-test--with
    (let* ((lispm-policy-roles (append '((open (read allow) (edit allow) (shell allow)))
                                       lispm-policy-roles))
           (home (file-name-directory (directory-file-name folder)))
           (emacs (lispm-helpers-test--own-agent folder))
           (reviewer (lispm-helpers-test--start "reviewer" emacs))
           (session (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer reviewer)))
           (open (lispm-test-add-actor :name "open" :folder home :role 'open)))
      (lispm-session-save (lispm-own-agent-buffer reviewer))
      (lispm-test-write-file folder "id_rsa" "-----BEGIN OPENSSH PRIVATE KEY-----\n")
      (let ((before (lispm-test-read-file session))
            (relative (file-relative-name session home)))
        (dolist (call (list (list emacs "read_file" '(:path "id_rsa") "id_rsa")
                            (list open "write_file"
                                  (list :path relative
                                        :content (replace-regexp-in-string
                                                  "^#\\+LISPM_\\(ROLE\\|CALLERS\\):.*\n" ""
                                                  before))
                                  "sessions/")
                            (list open "edit_file"
                                  (list :path relative :old "LISPM_CALLERS" :new "LISPM_X")
                                  "sessions/")))
          (pcase-let* ((`(,actor ,tool ,args ,name) call)
                       (outcome (lispm-helpers-test--call actor tool args)))
            (should-not (plist-get outcome :ok))
            (should (eq (car (plist-get outcome :condition)) 'lispm-policy-denied))
            (should (string-search "LispM's tools never read or change it"
                                   (plist-get outcome :error)))
            (let ((entry (car (lispm-helpers-test--sent 'lispm/audit))))
              (should (equal (plist-get entry :decision) "deny"))
              (should (equal (plist-get entry :agent) (lispm-actor-name actor)))
              (should (equal (plist-get entry :role)
                             (symbol-name (lispm-actor-effective-role actor))))
              (should (string-search name (plist-get entry :reason))))))
        ;; Nothing was asked, and the session is as LispM wrote it.
        (should (= (lispm-approvals-count) 0))
        (should (equal (lispm-test-read-file session) before))))))

;;; The agents and the roles

(ert-deftest lispm-helpers-test-list-agents ()
  (lispm-helpers-test--with
    (let* ((lispm-roles-from-projects t)
           (claude (lispm-test-add-agent :kind 'claude :name "claude" :folder folder))
           (emacs (lispm-helpers-test--own-agent folder)))
      (lispm-test-write-file user "poet.org"
                             "#+TITLE: poet\n#+DESCRIPTION: Writes verse.\n\n* System prompt\nRhyme.\n\n* Tools\n- read_file\n\n* Policy\n| read | allow |\n")
      (lispm-test-write-file folder ".lispm/roles/local.org"
                             "#+TITLE: local\n#+DESCRIPTION: Only here.\n\n* System prompt\nHi.\n\n* Tools\nall\n\n* Policy\n")
      (let* ((answer (lispm-sidecar-dispatch-request 'emacs/list-agents nil))
             (roles (append (plist-get answer :roles) nil)))
        (should (equal (mapcar (lambda (agent) (plist-get agent :name)) (plist-get answer :agents))
                       '("claude" "emacs")))
        (should (equal (mapcar (lambda (role) (plist-get role :name)) roles)
                       '("poet" "default" "reviewer" "tester")))
        (should (equal (plist-get (nth 2 roles) :description)
                       "Reads and comments; never edits, runs nothing.")))
      ;; An asker named: the roles its folder sees, the project's first.
      (let ((answer (lispm-sidecar-dispatch-request
                     'emacs/list-agents (list :name "claude"
                                              :instance (lispm-actor-serial claude)))))
        (should (equal (plist-get (aref (plist-get answer :roles) 0) :name) "local")))
      ;; The own agent's tool: the same, and who it is.
      (let* ((outcome (lispm-helpers-test--call emacs "list_agents" nil))
             (json (json-parse-string (plist-get outcome :text) :object-type 'plist
                                      :array-type 'list :null-object nil)))
        (should (plist-get outcome :ok))
        (should (equal (plist-get json :you) "emacs"))
        (should (equal (mapcar (lambda (agent) (plist-get agent :name)) (plist-get json :agents))
                       '("claude" "emacs")))
        (should (equal (mapcar (lambda (role) (plist-get role :name)) (plist-get json :roles))
                       '("local" "poet" "default" "reviewer" "tester"))))
      ;; A kind the policy allows, which terminal agents find on their own server.
      (should (eq (lispm-tool-kind (lispm-tool-get "list_agents")) 'message))
      (should (member "list_agents" (lispm-role-tools (lispm-roles-get 'reviewer))))
      (should (member "list_agents" (lispm-role-tools (lispm-roles-get 'tester)))))))

;;; The Roles shelf

(ert-deftest lispm-helpers-test-roles-shelf ()
  (lispm-helpers-test--with
    (lispm-test-write-file user "poet.org"
                           "#+TITLE: poet\n#+DESCRIPTION: Writes verse.\n\n* System prompt\nRhyme.\n\n* Tools\n- read_file\n\n* Policy\n| read | allow |\n")
    (let ((default-directory folder))
      (let ((apps (lispm-apps-on-shelf 'roles)))
        (should (equal (mapcar #'lispm-app-id apps)
                       '(role-poet role-default role-reviewer role-tester)))
        (let ((poet (car apps))
              (reviewer (nth 2 apps)))
          (should (equal (lispm-app-summary poet) "Writes verse."))
          (should (equal (lispm-app-page poet) (file-truename (expand-file-name "poet.org" user))))
          ;; The page: the role's file, its prompt, tools and policy.
          (save-window-excursion
            (lispm-apps-page reviewer)
            (should (equal (buffer-name) "*LispM Page: reviewer*"))
            (let ((text (buffer-string)))
              (dolist (part '("#+DESCRIPTION: Reads and comments" "* System prompt"
                              "* Tools" "- read_file" "* Policy" "| edit       | deny"))
                (should (string-search part text))))
            (kill-buffer))
          ;; The store shows the shelf, and opening it starts a helper here.
          (save-window-excursion
            (lispm-apps)
            (should (string-search "Roles\n" (buffer-string)))
            (should (string-search "Writes verse." (buffer-string)))
            (should (equal default-directory folder))
            (goto-char (point-min))
            (search-forward "Reads and comments")
            (lispm-apps-open (lispm-apps--app-at-point))
            (let ((agent (lispm-agent-get "reviewer")))
              (should (lispm-own-agent-p agent))
              (should (eq (lispm-actor-role agent) 'reviewer))
              (should-not (lispm-actor-caller agent))
              (should (equal (lispm-actor-folder agent) folder))
              (should (eq (window-buffer) (lispm-own-agent-buffer agent)))))
          (kill-buffer lispm-apps-buffer-name))))))

;;; What is remembered

(ert-deftest lispm-helpers-test-a-helper-remembers-too ()
  "A helper's system prompt has what is remembered, as its caller's has."
  (lispm-helpers-test--with
    (lispm-memory-add 'user folder "The user's name is Ada.")
    (let* ((caller (lispm-helpers-test--own-agent folder))
           (helper (lispm-helpers-test--start "tester" caller)))
      (should (string-search "- (user, [" (lispm-own-agent-system-prompt helper)))
      (should (string-search "The user's name is Ada." (lispm-own-agent-system-prompt helper)))
      (should (string-search "The user's name is Ada." (lispm-own-agent-system-prompt caller))))))

(provide 'lispm-helpers-test)
;;; lispm-helpers-test.el ends here
