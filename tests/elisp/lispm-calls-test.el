;;; lispm-calls-test.el --- Tests of other agents calling LispM's tools  -*- lexical-binding: t; -*-

;;; Commentary:

;; The `emacs/call-tool' request as the sidecar makes it: each bad call
;; gets a clear error and nothing runs that shouldn't.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defvar lispm-calls-test--ran nil
  "Set by a form the tests must never see evaluated.")

(defmacro lispm-calls-test--with-agent (agent &rest body)
  "Run BODY with AGENT bound to a live agent in a fresh temporary folder."
  (declare (indent 1) (debug t))
  `(let ((notified nil))
     (cl-letf (((symbol-function 'lispm-sidecar-notify)
                (lambda (method params) (push (cons method params) notified))))
       (lispm-test-with-agent (,agent)
         (with-temp-file (expand-file-name "a.txt" (lispm-agent-folder ,agent))
           (insert "alpha\n"))
         ,@body))))

(defun lispm-calls-test--call (tool args)
  "Ask to run TOOL with ARGS as the test's agent; return the answer."
  (lispm-sidecar-dispatch-request
   'emacs/call-tool (list :name "codex" :instance 1 :call_id "C1" :tool tool :args args)))

(ert-deftest lispm-calls-test-unknown-tool-and-bad-arguments ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (let ((answer (lispm-calls-test--call "no_such_tool" nil)))
      (should (eq (plist-get answer :ok) nil))
      (should (string-match-p "no tool no_such_tool.*search_tools" (plist-get answer :error))))
    (let ((answer (lispm-calls-test--call "read_file" '(:colour "red"))))
      (should-not (plist-get answer :ok))
      (should (string-match-p "colour" (plist-get answer :error))))
    (should-not (lispm-approvals-pending))))

(ert-deftest lispm-calls-test-search-leaves-out-the-messaging-tools ()
  ;; An agent with an MCP server has its own send_message, ask_agent, reply.
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (require 'lispm-messages)
    (should (lispm-tool-get "send_message"))
    (let ((names (mapcar (lambda (found) (plist-get found :name))
                         (plist-get (lispm-sidecar-dispatch-request
                                     'emacs/search-tools
                                     '(:name "codex" :instance 1 :query "send a message"))
                                    :results))))
      (should-not (member "send_message" names))
      (should-not (member "reply" names))
      (require 'lispm-plan)
      (should (lispm-tool-get "plan"))
      (should-not (member "plan" (mapcar (lambda (found) (plist-get found :name))
                                         (plist-get (lispm-sidecar-dispatch-request
                                                     'emacs/search-tools
                                                     '(:name "codex" :instance 1 :query "plan"))
                                                    :results))))
      (should (member "read_file" (mapcar (lambda (found) (plist-get found :name))
                                          (plist-get (lispm-sidecar-dispatch-request
                                                      'emacs/search-tools
                                                      '(:name "codex" :instance 1 :query ""))
                                                     :results)))))))

(ert-deftest lispm-calls-test-outside-the-folder-is-refused-before-anyone-is-asked ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (dolist (path '("../x.txt" "/etc/passwd" "~/.bashrc"))
      (let ((answer (lispm-calls-test--call "edit_file" (list :path path :old "a" :new "b"))))
        (should-not (plist-get answer :ok))
        (should (string-match-p "outside" (plist-get answer :error)))))
    (should-not (lispm-approvals-pending))))

(ert-deftest lispm-calls-test-reads-run-at-once ()
  ;; One audit rule for every caller: an action allowed at once is
  ;; audited only if its kind is in `lispm-approvals-audit-automatic'.
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (let ((answer (lispm-calls-test--call "read_file" '(:path "a.txt"))))
      (should (equal answer '(:ok t :text "alpha\n"))))
    (should-not (assq 'lispm/audit notified))
    (let ((lispm-approvals-audit-automatic '(read)))
      (lispm-calls-test--call "read_file" '(:path "a.txt")))
    (should (equal (mapcar (lambda (n) (plist-get (cdr n) :decision))
                           (cl-remove-if-not (lambda (n) (eq (car n) 'lispm/audit)) notified))
                   '("allow")))))

(ert-deftest lispm-calls-test-a-running-tool-says-when-its-result-comes ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (let ((answer (lispm-calls-test--call "grep" '(:pattern "alpha"))))
      (should (eq (plist-get answer :pending) t))
      (should (> (plist-get answer :within) lispm-tools-grep-timeout)))
    (let ((deadline (+ (float-time) 10)))
      (while (and (not (assq 'lispm/tool-result notified)) (< (float-time) deadline))
        (accept-process-output nil 0.05)))
    (let ((result (cdr (assq 'lispm/tool-result notified))))
      (should (equal (plist-get result :call_id) "C1"))
      (should (string-match-p "alpha" (plist-get result :text))))))

(ert-deftest lispm-calls-test-an-approval-the-sidecar-gave-up-is-withdrawn ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (let ((lispm-approvals--pending nil)
          (lispm-approvals--withdrawn nil))
      (should (equal (lispm-calls-test--call "eval_elisp" '(:form "(setq lispm-calls-test--ran t)"))
                     '(:pending t)))
      (should (= (length (lispm-approvals-pending)) 1))
      ;; Another call's notice withdraws nothing.
      (lispm-sidecar-handle-notification 'lispm/tool-abandoned
                                           '(:call_id "C9" :reason "deadline"))
      (should (= (length (lispm-approvals-pending)) 1))
      (lispm-sidecar-handle-notification 'lispm/tool-abandoned
                                           '(:call_id "C1" :reason "deadline"))
      (should-not (lispm-approvals-pending))
      (should (string-match-p "gave up the call at its deadline"
                              (cdr (car lispm-approvals--withdrawn))))
      (should-not lispm-calls-test--ran)
      ;; Again: nothing happens twice.
      (lispm-sidecar-handle-notification 'lispm/tool-abandoned
                                           '(:call_id "C1" :reason "deadline"))
      (should (= (length lispm-approvals--withdrawn) 1)))))

(ert-deftest lispm-calls-test-eval-denied-runs-nothing ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (setq lispm-calls-test--ran nil)
    (let ((lispm-policy-roles '((default (read allow) (eval deny)))))
      (let ((answer (lispm-calls-test--call
                     "eval_elisp" '(:form "(setq lispm-calls-test--ran t)"))))
        (should-not (plist-get answer :ok))
        (should (string-match-p "denied" (plist-get answer :error)))))
    (should-not lispm-calls-test--ran)
    (should-not (lispm-approvals-pending))
    (should (equal (plist-get (cdr (assq 'lispm/audit notified)) :decision) "deny"))))

(ert-deftest lispm-calls-test-an-approval-whose-agent-closes-is-withdrawn ()
  (lispm-calls-test--with-agent agent
    (setq lispm-calls-test--ran nil)
    (should (equal (lispm-calls-test--call "eval_elisp" '(:form "(setq lispm-calls-test--ran t)"))
                   '(:pending t)))
    (should (= (lispm-approvals-count) 1))
    ;; The agent leaves before the user decides.
    (lispm-agents-unregister agent)
    (accept-process-output nil 0.1)
    (should (= (lispm-approvals-count) 0))
    (let ((result (cdr (assq 'lispm/tool-result notified))))
      (should (equal (plist-get result :call_id) "C1"))
      (should-not (plist-get result :ok))
      (should (string-match-p "withdrawn" (plist-get result :error))))
    (should-not lispm-calls-test--ran)
    (ignore agent)))

;;; The pipeline itself

(defun lispm-calls-test--invoke (actor tool args &optional on-ask)
  "Call TOOL with ARGS as ACTOR through the pipeline; return (OUTCOMES).
OUTCOMES, the car of the list returned, holds every outcome given so
far, newest first, so a test sees outcomes that come later too."
  (let ((box (list nil)))
    (should-not (lispm-calls-invoke actor tool args
                                    (lambda (outcome) (push outcome (car box)))
                                    :on-ask on-ask))
    box))

(defun lispm-calls-test--audits (notified)
  "Return the decisions of the `lispm/audit' notifications in NOTIFIED, oldest first."
  (nreverse (cl-loop for (method . params) in notified
                     when (eq method 'lispm/audit)
                     collect (plist-get params :decision))))

(ert-deftest lispm-calls-test-invoke-allowed-runs-at-once ()
  (lispm-calls-test--with-agent agent
    (let ((own (lispm-test-add-actor :folder (lispm-actor-folder agent))))
      (dolist (args '((:path "a.txt") "{\"path\": \"a.txt\"}"))
        (let ((box (lispm-calls-test--invoke own "read_file" args)))
          (should (equal (car box) '((:ok t :text "alpha\n" :changes nil))))))
      (should-not (lispm-calls-test--audits notified))
      (should-not (lispm-approvals-pending)))))

(ert-deftest lispm-calls-test-invoke-uses-the-actors-role ()
  (lispm-calls-test--with-agent agent
    (let* ((lispm-policy-roles '((default (read allow)) (blind (read deny))))
           (own (lispm-test-add-actor :folder (lispm-actor-folder agent) :role 'blind))
           (box (lispm-calls-test--invoke own "read_file" '(:path "a.txt")))
           (outcome (caar box)))
      (should (= (length (car box)) 1))
      (should-not (plist-get outcome :ok))
      (should (equal (plist-get outcome :condition)
                     '(lispm-policy-denied "read denied by the policy of role blind"
                                           read policy nil)))
      (should (equal (plist-get outcome :error) "read denied by the policy of role blind"))
      (should (equal (lispm-calls-test--audits notified) '("deny")))
      (should (equal (plist-get (cdr (assq 'lispm/audit notified)) :role) "blind"))
      ;; The terminal agent, of the default role, may read.
      (should (plist-get (caar (lispm-calls-test--invoke agent "read_file" '(:path "a.txt")))
                         :ok)))))

(ert-deftest lispm-calls-test-invoke-denied-by-the-policy-runs-nothing ()
  (lispm-calls-test--with-agent agent
    (setq lispm-calls-test--ran nil)
    (let* ((lispm-policy-roles '((default (read allow) (eval deny))))
           (box (lispm-calls-test--invoke agent "eval_elisp"
                                          '(:form "(setq lispm-calls-test--ran t)")))
           (err (plist-get (caar box) :condition)))
      (should (eq (car err) 'lispm-policy-denied))
      (should (equal (cddr err) '(eval policy nil)))
      (should (memq 'lispm-error (get (car err) 'error-conditions)))
      (should-not lispm-calls-test--ran)
      (should-not (lispm-approvals-pending))
      (should (equal (lispm-calls-test--audits notified) '("deny"))))))

(ert-deftest lispm-calls-test-invoke-asks-and-runs-when-approved ()
  (lispm-calls-test--with-agent agent
    (let* ((asked nil)
           (own (lispm-test-add-actor :folder (lispm-actor-folder agent) :role 'helper))
           (lispm-policy-roles '((helper (read allow) (edit ask))))
           (box (lispm-calls-test--invoke own "write_file" '(:path "b.txt" :content "beta\n")
                                          (lambda (approval) (push approval asked)))))
      (should-not (car box))
      (should (= (length asked) 1))
      (should (equal (lispm-approval-id (car asked)) (lispm-approval-id (car (lispm-approvals-pending)))))
      (should (eq (lispm-approval-agent (car asked)) own))
      (should (eq (lispm-approval-role (car asked)) 'helper))
      (should (equal (lispm-approval-title (car asked)) "write_file b.txt"))
      (should-not (lispm-calls-test--audits notified))
      (lispm-approvals-allow (car asked))
      (should (= (length (car box)) 1))
      (should (plist-get (caar box) :ok))
      (should (equal (with-temp-buffer
                       (insert-file-contents (expand-file-name "b.txt" (lispm-actor-folder own)))
                       (buffer-string))
                     "beta\n"))
      ;; Audited once: the user's answer.
      (should (equal (lispm-calls-test--audits notified) '("allow")))
      (when-let* ((buffer (find-buffer-visiting (expand-file-name "b.txt" (lispm-actor-folder own)))))
        (kill-buffer buffer)))))

(ert-deftest lispm-calls-test-invoke-denied-by-the-user-with-a-reason ()
  (lispm-calls-test--with-agent agent
    (let* ((asked nil)
           (box (lispm-calls-test--invoke agent "edit_file"
                                          '(:path "a.txt" :old "alpha" :new "omega")
                                          (lambda (approval) (setq asked approval)))))
      (should asked)
      (lispm-approvals-deny asked "not that file")
      (let* ((outcome (caar box))
             (err (plist-get outcome :condition)))
        (should (= (length (car box)) 1))
        (should-not (plist-get outcome :ok))
        (should (equal err '(lispm-policy-denied "edit denied by the user: not that file"
                                                 edit user "not that file")))
        (should (equal (lispm-error-message err) "edit denied by the user: not that file"))
        (should (equal (plist-get outcome :error) "edit denied by the user: not that file")))
      (should (equal (with-temp-buffer
                       (insert-file-contents (expand-file-name "a.txt" (lispm-actor-folder agent)))
                       (buffer-string))
                     "alpha\n"))
      (should (equal (lispm-calls-test--audits notified) '("deny")))
      ;; Denied without a reason, the message says so and no more.
      (let ((box (lispm-calls-test--invoke agent "eval_elisp" '(:form "1"))))
        (lispm-approvals-deny (car (lispm-approvals-pending)) "")
        (should (equal (plist-get (caar box) :condition)
                       '(lispm-policy-denied "eval denied by the user" eval user nil)))))))

(ert-deftest lispm-calls-test-invoke-withdrawn-when-the-actor-leaves ()
  (lispm-calls-test--with-agent agent
    (let* ((own (lispm-test-add-actor :folder (lispm-actor-folder agent)))
           (box (lispm-calls-test--invoke own "run_shell" '(:command "true"))))
      (should (= (lispm-approvals-count own) 1))
      (lispm-agents-unregister own)
      (should (= (lispm-approvals-count) 0))
      (should (equal (plist-get (caar box) :condition)
                     '(lispm-policy-denied "shell withdrawn: emacs closed"
                                           shell withdrawn "emacs closed"))))))

(ert-deftest lispm-calls-test-invoke-refuses-bad-calls-before-anyone-is-asked ()
  (lispm-calls-test--with-agent agent
    (pcase-dolist (`(,tool ,args ,condition ,text)
                   '(("no_such_tool" nil lispm-tool-unknown "no tool no_such_tool")
                     ("read_file" "{\"path\": " lispm-tool-bad-args "not valid JSON")
                     ("read_file" "[1, 2]" lispm-tool-bad-args "must be a JSON object")
                     ("read_file" (:colour "red") lispm-tool-bad-args "colour")
                     ("edit_file" (:path "../x.txt" :old "a" :new "b")
                      lispm-tool-outside-folder "outside")
                     ("write_file" "{\"path\": \"/etc/passwd\", \"content\": \"\"}"
                      lispm-tool-outside-folder "outside")))
      (let* ((box (lispm-calls-test--invoke agent tool args))
             (outcome (caar box)))
        (should (= (length (car box)) 1))
        (should-not (plist-get outcome :ok))
        (should (eq (car (plist-get outcome :condition)) condition))
        (should (string-search text (plist-get outcome :error)))))
    (should-not (lispm-approvals-pending))
    ;; Only the refusals are audited (the paths outside the folder): no
    ;; bad call is an action anyone could allow.
    (should (equal (lispm-calls-test--audits notified) '("deny" "deny")))))

(ert-deftest lispm-calls-test-invoke-audits-once-per-call ()
  (lispm-calls-test--with-agent agent
    (let ((lispm-policy-roles '((default (read allow) (eval allow) (edit ask))))
          (lispm-approvals-audit-automatic '(eval)))
      ;; Allowed at once, of an audited kind: once.
      (lispm-calls-test--invoke agent "eval_elisp" '(:form "(+ 1 2)"))
      (should (equal (lispm-calls-test--audits notified) '("allow")))
      ;; Asked, allowed for the session: once; then at once, of a kind
      ;; not audited automatically: not at all.
      (lispm-calls-test--invoke agent "edit_file" '(:path "a.txt" :old "alpha" :new "beta"))
      (lispm-approvals-allow-session (car (lispm-approvals-pending)))
      (should (equal (lispm-calls-test--audits notified) '("allow" "allow-session")))
      (let ((box (lispm-calls-test--invoke agent "edit_file"
                                           '(:path "a.txt" :old "beta" :new "gamma"))))
        (should (plist-get (caar box) :ok)))
      (should (equal (lispm-calls-test--audits notified) '("allow" "allow-session")))
      (when-let* ((buffer (find-buffer-visiting (expand-file-name "a.txt" (lispm-actor-folder agent)))))
        (kill-buffer buffer)))))

(ert-deftest lispm-calls-test-invoke-a-running-tool-answers-later ()
  (lispm-calls-test--with-agent agent
    (let ((box (lispm-calls-test--invoke agent "grep" "{\"pattern\": \"alpha\"}"))
          (deadline (+ (float-time) 10)))
      (should-not (car box))
      (while (and (not (car box)) (< (float-time) deadline))
        (accept-process-output nil 0.05))
      (should (= (length (car box)) 1))
      (should (string-match-p "alpha" (plist-get (caar box) :text))))))

(provide 'lispm-calls-test)
;;; lispm-calls-test.el ends here
