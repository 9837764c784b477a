;;; lispm-approvals-test.el --- Tests of LispM's approvals  -*- lexical-binding: t; -*-

;;; Commentary:

;; Requests return at once; the buffer shows who asks and what; each
;; key answers exactly once; several wait at once; agents that leave
;; have theirs withdrawn; the ledger hears every decision; the agent
;; list finds an agent's approvals; whatever an agent sends shows cut
;; to size, without its text properties, and whole on request.  (The
;; mode line: lispm-notice-test.el.)

;;; Code:

(require 'ert)
(require 'lispm-approvals)
(require 'lispm-list)
(require 'lispm-edit)
(require 'lispm-test-fixtures)

(defvar lispm-approvals-test--audits nil
  "The `lispm/audit' notifications sent, newest first.")

(defmacro lispm-approvals-test--with-state (&rest body)
  "Run BODY with an empty registry, no approvals, grants or mode line.
`folder' is a fresh directory; sidecar notifications are captured in
`lispm-approvals-test--audits' instead of sent."
  (declare (indent 0) (debug t))
  `(let* ((lispm-agents-changed-hook (default-value 'lispm-agents-changed-hook))
          (lispm-policy--grants nil)
          (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t))
          (lispm-approvals--pending nil)
          (lispm-approvals--withdrawn nil)
          (lispm-approvals--counter 0)
          (lispm-approvals-changed-hook nil)
          (global-mode-string nil)
          (lispm-approvals-test--audits nil)
          (folder (file-name-as-directory (file-truename (make-temp-file "lispm-approvals-" t)))))
     (cl-letf (((symbol-function 'lispm-sidecar-notify)
                (lambda (method params)
                  (push (cons method params) lispm-approvals-test--audits))))
       (unwind-protect
           (save-window-excursion
             (lispm-test-with-registry ,@body))
         (when (get-buffer lispm-approvals-buffer-name)
           (kill-buffer lispm-approvals-buffer-name))
         (dolist (buffer (buffer-list))
           (when (string-match-p "\\`\\*LispM A[0-9]+ " (buffer-name buffer))
             (kill-buffer buffer)))
         (delete-directory folder t)))))

(defun lispm-approvals-test--agent (name folder)
  "Register a live agent NAME working in FOLDER; return it."
  (lispm-test-add-agent :name name :folder folder))

(defun lispm-approvals-test--recorder ()
  "Return (CALLBACK . CALLS): CALLBACK pushes its argument on CALLS's car."
  (let ((calls (list nil)))
    (cons (lambda (result) (push result (car calls))) calls)))

(defun lispm-approvals-test--text ()
  "Return the approvals buffer's text."
  (with-current-buffer lispm-approvals-buffer-name
    (buffer-substring-no-properties (point-min) (point-max))))

(defun lispm-approvals-test--press (key id)
  "Press KEY on the section of the approval ID in the approvals buffer."
  (with-current-buffer lispm-approvals-buffer-name
    (goto-char (lispm-approvals--position-of (lispm-approvals-get id)))
    (forward-line 3)
    (should (eq (get-text-property (point) 'lispm-approval) (lispm-approvals-get id)))
    (call-interactively (key-binding (kbd key)))))

(defconst lispm-approvals-test--diff
  "--- a/notes.el
+++ b/notes.el
@@ -1,3 +1,3 @@
 (defun notes-parse-header (line)
-  (split-string line \":\"))
+  (split-string line \": \"))
 ;; end
"
  "A unified diff of an edit.")

;;; Asking

(ert-deftest lispm-approvals-test-request-returns-at-once ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec (lispm-approvals-test--recorder))
           (selected (selected-window))
           (start (float-time))
           (id (lispm-approvals-request codex 'default 'shell
                                        (list :command "ls -la" :directory folder)
                                        (car rec) "run_shell: ls -la")))
      (should (< (- (float-time) start) 1.0))
      (should (stringp id))
      (should (equal id "A1"))
      (should-not (car (cdr rec)))
      (should (= (lispm-approvals-count) 1))
      (should (eq (lispm-approval-agent (lispm-approvals-get id)) codex))
      ;; Shown, not selected.
      (should (get-buffer-window lispm-approvals-buffer-name))
      (should (eq (selected-window) selected))
      (should-not (eq (window-buffer selected) (get-buffer lispm-approvals-buffer-name)))
      ;; A second one gets another id.
      (should (equal (lispm-approvals-request codex 'default 'eval '(:form "(+ 1 2)") #'ignore)
                     "A2"))
      (should-not (car (cdr rec)))
      ;; Bad calls are errors, and nothing waits for them.
      (should-error (lispm-approvals-request "codex" 'default 'eval nil #'ignore)
                    :type 'lispm-approvals-error)
      (should-error (lispm-approvals-request codex 'default 'eval nil "not a function")
                    :type 'lispm-error)
      (should (= (lispm-approvals-count) 2)))))

(ert-deftest lispm-approvals-test-buffer-shows-who-and-what ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (long-form "(defun notes-greet (name) \"Greet NAME.\" (let ((greeting (concat \"Hello, \" name))) (message \"%s\" greeting) (list greeting greeting greeting greeting)))"))
      (lispm-approvals-request codex 'default 'edit
                               (list :files (list (expand-file-name "notes.el" folder))
                                     :diff lispm-approvals-test--diff)
                               #'ignore "edit_file notes.el")
      (lispm-approvals-request claude 'reviewer 'shell
                               (list :command "make test" :directory (expand-file-name "sub/" folder))
                               #'ignore)
      (lispm-approvals-request codex 'default 'eval (list :form long-form) #'ignore)
      (lispm-approvals-request codex 'default 'eval (list :form "(unbalanced") #'ignore)
      (let ((text (lispm-approvals-test--text)))
        ;; Who asks, in which role, what kind.
        (should (string-match-p "codex (role default) asks for edit: edit_file notes.el" text))
        (should (string-match-p "claude (role reviewer) asks for shell" text))
        ;; The edit: its file and its diff.
        (should (string-match-p "File: notes\\.el" text))
        (should (string-search "-  (split-string line \":\"))" text))
        (should (string-search "+  (split-string line \": \"))" text))
        ;; The shell command, with its folder.
        (should (string-search "$ make test" text))
        (should (string-search (concat "In: " (abbreviate-file-name (expand-file-name "sub/" folder)))
                               text))
        ;; The eval form, pretty-printed; an unreadable one as it came.
        (let ((pretty (pp-to-string (car (read-from-string long-form)))))
          (should (string-match-p "\n" (string-trim pretty)))
          (should (string-search pretty text)))
        (should (string-search "(unbalanced" text))
        ;; Buttons.
        (should (string-search "[Allow once] [Allow for session] [Always...] [Deny...]" text))
        ;; Newest last.
        (should (< (string-search "asks for edit" text) (string-search "asks for shell" text))))
      ;; The diff has diff-mode's faces.
      (with-current-buffer lispm-approvals-buffer-name
        (goto-char (point-min))
        (search-forward "+  (split-string")
        (let ((face (get-text-property (1- (point)) 'face)))
          (should (memq 'diff-added (ensure-list face))))
        (goto-char (point-min))
        (search-forward "-  (split-string")
        (should (memq 'diff-removed (ensure-list (get-text-property (1- (point)) 'face))))
        (should (derived-mode-p 'lispm-approvals-mode))
        (should buffer-read-only)
        ;; Who asks is a presentation of that agent.
        (goto-char (point-min))
        (search-forward "claude (role reviewer)")
        (should (equal (seq-take (lispm-present-at (match-beginning 0)) 2) '(agent "claude")))))))

(ert-deftest lispm-approvals-test-org-file-shown-as-org ()
  (require 'org)
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (file (expand-file-name ".lispm/skills/hello.org" folder))
           (org (format "#+title: Hello\n#+SETUPFILE: %s\n* How to greet\n\
See [[https://example.com][the site]].\n" (expand-file-name "setup.org" folder)))
           (read-setup nil))
      (cl-letf (((symbol-function 'org-file-contents)
                 (lambda (&rest args) (push args read-setup) "")))
        ;; A new file: the Org text, not its diff too.
        (lispm-approvals-request codex 'default 'edit
                                 (list :files (list file) :org org
                                       :diff (lispm-edit-diff "" org ".lispm/skills/hello.org"))
                                 #'ignore "write_skill hello")
        (let ((text (lispm-approvals-test--text)))
          (should (string-search (concat "File: .lispm/skills/hello.org\n" org) text))
          (should-not (string-search "+#+title" text))
          (should-not (string-search "The whole file" text)))
        (with-current-buffer lispm-approvals-buffer-name
          (goto-char (point-min))
          (search-forward "#+title")
          (should (memq 'org-document-info-keyword
                        (ensure-list (get-text-property (1- (point)) 'face))))
          (search-forward "How to greet")
          (should (memq 'org-level-1 (ensure-list (get-text-property (1- (point)) 'face))))
          ;; The link as written, brackets and all, and not a button.
          (search-forward "[[https://example.com][the site]]")
          (should (memq 'org-link (ensure-list (get-text-property (- (point) 4) 'face))))
          (let ((start (match-beginning 0)) (end (match-end 0)))
            (should-not (text-property-not-all start end 'invisible nil))
            (should-not (text-property-not-all start end 'keymap nil))))
        (lispm-approvals-deny (car (lispm-approvals-pending)) "no")
        ;; A file that exists: its diff, then the whole file.
        (lispm-approvals-request codex 'default 'edit
                                 (list :files (list file) :org org
                                       :diff (lispm-edit-diff "* Old\n" org
                                                              ".lispm/skills/hello.org"))
                                 #'ignore "write_skill hello")
        (let ((text (lispm-approvals-test--text)))
          (should (string-search "-* Old" text))
          (should (string-search "+#+title: Hello" text))
          (should (< (string-search "+#+title: Hello" text)
                     (string-search "The whole file, as it would be:\n#+title: Hello" text)))))
      ;; Showing it read no file the text names.
      (should-not read-setup))))

;;; Answering

(ert-deftest lispm-approvals-test-allow-once-key ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec (lispm-approvals-test--recorder))
           (id (lispm-approvals-request codex 'default 'shell '(:command "ls") (car rec)))
           (approval (lispm-approvals-get id)))
      (lispm-approvals-test--press "a" id)
      (should (equal (car (cdr rec)) '((:decision allow))))
      ;; Once: it is gone, and a second answer is refused.
      (should-not (lispm-approvals-get id))
      (should-error (lispm-approvals-allow id) :type 'user-error)
      (should-error (lispm-approvals-deny id "late") :type 'user-error)
      (should (= (length (car (cdr rec))) 1))
      ;; Not even when withdrawn by the caller afterwards.
      (should-not (lispm-approvals-withdraw approval "late"))
      (should (= (length (car (cdr rec))) 1))
      ;; Only once: nothing granted.
      (should (eq (lispm-policy-decide codex 'default 'shell '(:command "ls")) 'ask))
      (should-not (string-search "asks for" (lispm-approvals-test--text))))))

(ert-deftest lispm-approvals-test-a-helper-is-named-with-its-chain ()
  (lispm-approvals-test--with-state
    (let* ((top (lispm-test-add-actor :name "emacs" :folder folder))
           (middle (lispm-test-add-actor :name "planner" :folder folder :role 'planner))
           (bottom (lispm-test-add-actor :name "tester" :folder folder :role 'tester))
           (rec (lispm-approvals-test--recorder)))
      (setf (lispm-actor-caller middle) top
            (lispm-actor-caller bottom) middle)
      (let ((id (lispm-approvals-request bottom 'tester 'shell '(:command "ls") (car rec))))
        (should (equal (lispm-approvals-asker (lispm-approvals-get id))
                       "tester (role tester, helper of planner of emacs)"))
        (should (string-search "tester (role tester, helper of planner of emacs) asks for shell"
                               (lispm-approvals-test--text)))))))

(ert-deftest lispm-approvals-test-allow-always-writes-a-narrow-rule ()
  (lispm-approvals-test--with-state
    (let* ((custom-file (make-temp-file "lispm-custom-" nil ".el"))
           (user-init-file custom-file)
           (codex (lispm-approvals-test--agent "codex" folder))
           (notes (expand-file-name "notes.el" folder))
           (rec (lispm-approvals-test--recorder))
           (edit (lispm-approvals-request codex 'default 'edit
                                          (list :files (list notes)
                                                :diff lispm-approvals-test--diff)
                                          (car rec)))
           (shell (lispm-approvals-request codex 'default 'shell '(:command "make")
                                           (car rec))))
      (unwind-protect
          (progn
            (should (equal (lispm-approvals-always-rule (lispm-approvals-get edit))
                           '(edit allow ("notes.el"))))
            (should (equal (lispm-approvals-allow-always edit)
                           (format "saved in %s" (abbreviate-file-name custom-file))))
            (should (equal (car (cdr rec)) '((:decision allow))))
            ;; First among the role's rules, the others kept, and saved.
            (should (equal (car (alist-get 'default lispm-policy-roles)) '(edit allow ("notes.el"))))
            (should (member '(shell ask) (alist-get 'default lispm-policy-roles)))
            (should (string-match-p "(edit allow (\"notes.el\"))"
                                    (with-temp-buffer (insert-file-contents custom-file)
                                                      (buffer-string))))
            ;; That file, from now on, by any agent of the role; no other file.
            (should (eq (lispm-policy-decide codex 'default 'edit (list :files (list notes)))
                        'allow))
            (should (eq (lispm-policy-decide codex 'default 'edit
                                             (list :files (list (expand-file-name "other.el" folder))))
                        'ask))
            ;; A shell command: LispM cannot tell one from another.
            (should (equal (lispm-approvals-always-rule (lispm-approvals-get shell))
                           '(shell allow)))
            (should (cl-find-if (lambda (n) (and (eq (car n) 'lispm/audit)
                                                 (string-match-p "allowed always by the rule"
                                                                 (or (plist-get (cdr n) :reason) ""))))
                                lispm-approvals-test--audits)))
        (delete-file custom-file)))))

(ert-deftest lispm-approvals-test-allow-for-session-key ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (rec (lispm-approvals-test--recorder))
           (id (lispm-approvals-request codex 'default 'shell '(:command "ls") (car rec))))
      (lispm-approvals-test--press "S" id)
      (should (equal (car (cdr rec)) '((:decision allow :for-session t))))
      (should (eq (lispm-policy-decide codex 'default 'shell '(:command "rm x")) 'allow))
      (should (eq (lispm-policy-decide codex 'default 'eval '(:form "1")) 'ask))
      (should (eq (lispm-policy-decide claude 'default 'shell '(:command "ls")) 'ask))
      (should-error (lispm-approvals-allow-session id) :type 'user-error)
      (should (= (length (car (cdr rec))) 1)))))

(ert-deftest lispm-approvals-test-session-grant-settles-the-agents-other-waiting-ones ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (first (lispm-approvals-test--recorder))
           (second (lispm-approvals-test--recorder))
           (other-kind (lispm-approvals-test--recorder))
           (other-agent (lispm-approvals-test--recorder))
           (id (lispm-approvals-request codex nil 'shell '(:command "ls") (car first))))
      (lispm-approvals-request codex nil 'shell '(:command "pwd") (car second))
      (lispm-approvals-request codex nil 'eval '(:form "1") (car other-kind))
      (lispm-approvals-request claude nil 'shell '(:command "ls") (car other-agent))
      (lispm-approvals-allow-session id)
      (should (equal (car (cdr first)) '((:decision allow :for-session t))))
      (should (equal (car (cdr second)) '((:decision allow :for-session t))))
      (should-not (car (cdr other-kind)))
      (should-not (car (cdr other-agent)))
      (should (= (lispm-approvals-count) 2)))))

(ert-deftest lispm-approvals-test-deny-key-with-and-without-reason ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec1 (lispm-approvals-test--recorder))
           (rec2 (lispm-approvals-test--recorder))
           (id1 (lispm-approvals-request codex 'default 'eval '(:form "(delete-file \"x\")") (car rec1)))
           (id2 (lispm-approvals-request codex 'default 'eval '(:form "(kill-emacs)") (car rec2))))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "too risky")))
        (lispm-approvals-test--press "d" id1))
      (should (equal (car (cdr rec1)) '((:decision deny :reason "too risky"))))
      (should-not (car (cdr rec2)))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "  ")))
        (lispm-approvals-test--press "d" id2))
      (should (equal (car (cdr rec2)) '((:decision deny :reason "denied by the user"))))
      (should (= (length (car (cdr rec1))) 1))
      ;; A deny grants nothing.
      (should (eq (lispm-policy-decide codex 'default 'eval '(:form "1")) 'ask)))))

(ert-deftest lispm-approvals-test-real-keys-and-buttons ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec1 (lispm-approvals-test--recorder))
           (rec2 (lispm-approvals-test--recorder))
           (rec3 (lispm-approvals-test--recorder))
           (lispm-approvals-hide-when-done nil))
      (lispm-approvals-request codex nil 'shell '(:command "one") (car rec1))
      (lispm-approvals-request codex nil 'eval '(:form "two") (car rec2))
      (lispm-approvals-request codex nil 'edit '(:files ("three.el")) (car rec3))
      (switch-to-buffer lispm-approvals-buffer-name)
      (goto-char (point-min))
      ;; n to the first, n to the second; a allows that one.
      (execute-kbd-macro (kbd "n n a"))
      (should-not (car (cdr rec1)))
      (should (equal (car (cdr rec2)) '((:decision allow))))
      ;; p goes back to the first; its [Deny...] button asks the reason.
      (execute-kbd-macro (kbd "p"))
      (should (eq (get-text-property (point) 'lispm-approval)
                  (car (lispm-approvals-pending))))
      (search-forward "[Deny...]")
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "no")))
        (push-button (1- (point))))
      (should (equal (car (cdr rec1)) '((:decision deny :reason "no"))))
      ;; The [Allow for session] button of the last.
      (goto-char (point-min))
      (search-forward "[Allow for session]")
      (push-button (1- (point)))
      (should (equal (car (cdr rec3)) '((:decision allow :for-session t))))
      (should (= (lispm-approvals-count) 0))
      ;; No approval left: keys say so.
      (goto-char (point-min))
      (should-error (execute-kbd-macro (kbd "a")) :type 'user-error))))

(ert-deftest lispm-approvals-test-two-waiting-answered-in-the-other-order ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (rec1 (lispm-approvals-test--recorder))
           (rec2 (lispm-approvals-test--recorder))
           (id1 (lispm-approvals-request codex 'default 'edit
                                         (list :files '("a.el") :diff lispm-approvals-test--diff)
                                         (car rec1)))
           (id2 (lispm-approvals-request claude 'default 'shell '(:command "ls") (car rec2))))
      (should (= (lispm-approvals-count) 2))
      (should (equal (mapcar #'lispm-approval-id (lispm-approvals-pending)) (list id1 id2)))
      (lispm-approvals-test--press "a" id2)
      (should (equal (car (cdr rec2)) '((:decision allow))))
      (should-not (car (cdr rec1)))
      (should (equal (mapcar #'lispm-approval-id (lispm-approvals-pending)) (list id1)))
      (should-not (string-search "claude" (lispm-approvals-test--text)))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) "")))
        (lispm-approvals-test--press "d" id1))
      (should (equal (car (cdr rec1)) '((:decision deny :reason "denied by the user"))))
      (should (= (length (car (cdr rec2))) 1))
      (should (= (lispm-approvals-count) 0)))))

;;; Agents that leave

(ert-deftest lispm-approvals-test-withdrawn-when-the-agent-leaves ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (rec1 (lispm-approvals-test--recorder))
           (rec2 (lispm-approvals-test--recorder))
           (rec3 (lispm-approvals-test--recorder)))
      (lispm-approvals-request codex nil 'shell '(:command "ls") (car rec1))
      (lispm-approvals-request claude nil 'shell '(:command "pwd") (car rec2))
      (lispm-approvals-request codex nil 'eval '(:form "1") (car rec3))
      (lispm-agents-unregister codex)
      (should (equal (car (cdr rec1)) '((:decision withdrawn :reason "codex closed"))))
      (should (equal (car (cdr rec3)) '((:decision withdrawn :reason "codex closed"))))
      (should-not (car (cdr rec2)))
      (should (= (lispm-approvals-count) 1))
      (should-not (string-search "codex (role default) asks" (lispm-approvals-test--text)))
      (should (string-search "claude (role default) asks" (lispm-approvals-test--text)))
      ;; The buffer says they were withdrawn, and why; nothing there allows them.
      (dolist (line '("A1  withdrawn: codex (role default)'s shell: shell: ls (codex closed)"
                      "A3  withdrawn: codex (role default)'s eval: eval: 1 (codex closed)"))
        (should (string-search line (lispm-approvals-test--text)))
        (with-current-buffer lispm-approvals-buffer-name
          (goto-char (point-min))
          (search-forward line)
          (should-not (get-text-property (point) 'lispm-approval))
          (should-error (call-interactively (key-binding (kbd "a"))) :type 'user-error)))
      (should (= (lispm-approvals-count) 1))
      (should (= (length (car (cdr rec1))) 1))
      ;; Another change of the registry does not call them again.
      (run-hooks 'lispm-agents-changed-hook)
      (should (= (length (car (cdr rec1))) 1))
      ;; A new agent of the same name has nothing waiting.
      (should-not (lispm-approvals-for-agent (lispm-approvals-test--agent "codex" folder)))
      (should (memq #'lispm-approvals--withdraw-gone lispm-agents-changed-hook)))))

(ert-deftest lispm-approvals-test-agent-gone-before-asking-is-withdrawn-later ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec (lispm-approvals-test--recorder)))
      (lispm-agents-unregister codex)
      (let ((id (lispm-approvals-request codex nil 'shell '(:command "ls") (car rec))))
        (should (stringp id))
        (should-not (car (cdr rec)))
        (let ((deadline (+ (float-time) 2)))
          (while (and (null (car (cdr rec))) (< (float-time) deadline))
            (accept-process-output nil 0.01)))
        (should (equal (car (cdr rec)) '((:decision withdrawn :reason "codex closed"))))
        (should (= (lispm-approvals-count) 0))))))

(ert-deftest lispm-approvals-test-withdraw-by-id ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (rec (lispm-approvals-test--recorder))
           (id (lispm-approvals-request codex nil 'shell '(:command "ls") (car rec))))
      (should (lispm-approvals-withdraw id "the tool call was cancelled"))
      (should (equal (car (cdr rec))
                     '((:decision withdrawn :reason "the tool call was cancelled"))))
      (should-not (lispm-approvals-withdraw id "again"))
      (should-not (lispm-approvals-withdraw (lispm-approval--make :id id) "a stranger"))
      (should (= (length (car (cdr rec))) 1)))))

;;; The ledger

(ert-deftest lispm-approvals-test-every-decision-is-audited ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (id1 (lispm-approvals-request codex 'default 'edit
                                         (list :files (list (expand-file-name "notes.el" folder)))
                                         #'ignore "edit_file notes.el"))
           (id2 (lispm-approvals-request codex 'default 'shell '(:command "ls -la") #'ignore))
           (id3 (lispm-approvals-request claude 'reviewer 'eval '(:form "(+ 1\n 2)") #'ignore)))
      (lispm-approvals-request claude 'reviewer 'shell '(:command "make") #'ignore)
      (should-not lispm-approvals-test--audits)
      (lispm-approvals-allow id1)
      (lispm-approvals-allow-session id2)
      (lispm-approvals-deny id3 "not now")
      (lispm-agents-unregister claude)
      (let ((audits (reverse lispm-approvals-test--audits)))
        (should (equal (mapcar #'car audits) '(lispm/audit lispm/audit lispm/audit lispm/audit)))
        (should (cl-every (lambda (a) (numberp (plist-get (cdr a) :time))) audits))
        (should (equal (mapcar (lambda (a) (let ((p (copy-sequence (cdr a))))
                                             (cl-remf p :time) p))
                               audits)
                       '((:agent "codex" :role "default" :kind "edit" :what "edit_file notes.el"
                                 :decision "allow" :reason nil)
                         (:agent "codex" :role "default" :kind "shell" :what "shell: ls -la"
                                 :decision "allow-session" :reason nil)
                         (:agent "claude" :role "reviewer" :kind "eval" :what "eval: (+ 1 2)"
                                 :decision "deny" :reason "not now")
                         (:agent "claude" :role "reviewer" :kind "shell" :what "shell: make"
                                 :decision "withdrawn" :reason "claude closed"))))
        (should (<= (abs (- (plist-get (cdar audits) :time) (float-time))) 60))))))

;;; Policy and approvals together

(ert-deftest lispm-approvals-test-authorize ()
  (lispm-approvals-test--with-state
    (setq lispm-policy-roles
          '((default (read allow) (edit ask) (shell ask) (eval ask))
            (locked (read allow) (eval deny) (shell ask))))
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (read (lispm-approvals-test--recorder))
           (eval (lispm-approvals-test--recorder))
           (edit (lispm-approvals-test--recorder)))
      ;; Reads run at once, unaudited.
      (should-not (lispm-approvals-authorize codex 'locked 'read '(:files ("a.el")) (car read)))
      (should (equal (car (cdr read)) '((:decision allow))))
      (should-not lispm-approvals-test--audits)
      ;; Eval while eval is denied: a clear error, nothing asked, audited.
      (should-not (lispm-approvals-authorize codex 'locked 'eval '(:form "(kill-emacs)") (car eval)))
      (should (equal (car (cdr eval))
                     '((:decision deny :by policy
                                  :reason "eval is denied to codex (role locked) by LispM's policy"
                                  :role locked))))
      (should (= (lispm-approvals-count) 0))
      (should (equal (plist-get (cdar lispm-approvals-test--audits) :decision) "deny"))
      ;; Asks go to the user.
      (let ((id (lispm-approvals-authorize codex nil 'edit '(:files ("a.el")) (car edit))))
        (should (stringp id))
        (should-not (car (cdr edit)))
        (lispm-approvals-allow-session id))
      ;; Then, for the session, at once, and audited as such.
      (let ((again (lispm-approvals-test--recorder)))
        (should-not (lispm-approvals-authorize codex nil 'edit '(:files ("b.el")) (car again)
                                               "edit_file b.el"))
        (should (equal (car (cdr again)) '((:decision allow))))
        (should (equal (plist-get (cdar lispm-approvals-test--audits) :reason)
                       "allowed for the session"))
        (should (equal (plist-get (cdar lispm-approvals-test--audits) :what) "edit_file b.el"))))))

;;; The agent list

(ert-deftest lispm-approvals-test-from-the-agent-list ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (claude (lispm-approvals-test--agent "claude" folder))
           (ids (list (lispm-approvals-request codex nil 'shell '(:command "a") #'ignore)
                      (lispm-approvals-request claude nil 'shell '(:command "b") #'ignore)
                      (lispm-approvals-request claude nil 'eval '(:form "c") #'ignore))))
      (should (= (lispm-approvals-count) 3))
      (should (= (lispm-approvals-count codex) 1))
      (should (= (lispm-approvals-count claude) 2))
      (should (equal (mapcar #'lispm-approval-id (lispm-approvals-for-agent claude))
                     (cdr ids)))
      (let ((list-buffer (get-buffer-create " *lispm-approvals-test list*")))
        (unwind-protect
            (progn
              (with-current-buffer list-buffer
                (lispm-list-mode)
                (lispm-list--fill)
                (tabulated-list-print)
                (goto-char (point-min))
                (while (not (equal (tabulated-list-get-id) "claude")) (forward-line 1))
                (call-interactively #'lispm-approvals-show))
              (should (eq (window-buffer) (get-buffer lispm-approvals-buffer-name)))
              (should (eq (get-text-property (window-point) 'lispm-approval
                                             (window-buffer))
                          (lispm-approvals-get (nth 1 ids)))))
          (kill-buffer list-buffer)))
      ;; Without an agent: the first that waits.
      (lispm-approvals-show)
      (should (eq (get-text-property (window-point) 'lispm-approval (window-buffer))
                  (lispm-approvals-get (car ids)))))))

(ert-deftest lispm-approvals-test-buffer-hides-when-nothing-waits ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (id (lispm-approvals-request codex nil 'shell '(:command "a") #'ignore)))
      (should (get-buffer-window lispm-approvals-buffer-name))
      (lispm-approvals-allow id)
      (should-not (get-buffer-window lispm-approvals-buffer-name))
      (should (string-search "Nothing waits" (lispm-approvals-test--text))))))

;;; Any text, at little cost

(defun lispm-approvals-test--uncut (line)
  "Return LINE without the note that says how much of it was cut."
  (replace-regexp-in-string "\\[… [0-9]+ more characters?\\]\\'" "" line))

(ert-deftest lispm-approvals-test-a-1mb-line-shows-cut-and-whole-on-request ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (long (make-string (* 1024 1024) ?x))
           (diff (lispm-edit-diff (concat "(setq a 1)\n" long "\n")
                                  (concat "(setq a 2)\n" long "y\n")
                                  "big.txt"))
           (rec (lispm-approvals-test--recorder))
           (id (lispm-approvals-request codex 'default 'edit
                                        (list :files (list (expand-file-name "big.txt" folder))
                                              :diff diff)
                                        (car rec) "edit_file big.txt"))
           (text (lispm-approvals-test--text)))
      ;; No line is longer than the bound, but for the note that says so.
      (dolist (line (split-string text "\n"))
        (should (<= (length (lispm-approvals-test--uncut line)) lispm-approvals-line-limit)))
      (should (< (length text) 4000))
      ;; The cut is announced, how much was cut, and how to see it all.
      (should (string-search (format "\n-%s[… %d more characters]\n"
                                     (make-string (1- lispm-approvals-line-limit) ?x)
                                     (- (1+ (length long)) lispm-approvals-line-limit))
                             text))
      (should (string-search (format "[… %d more characters]" (- (+ 2 (length long))
                                                                 lispm-approvals-line-limit))
                             text))
      (should (string-search "Cut to fit: [Show the whole diff] (or v)" text))
      ;; What is short shows as it is, with diff-mode's faces.
      (should (string-search "\n-(setq a 1)\n" text))
      (should (string-search "\n+(setq a 2)\n" text))
      (with-current-buffer lispm-approvals-buffer-name
        (goto-char (point-min))
        (search-forward "+(setq a 2")
        (should (memq 'diff-added (ensure-list (get-text-property (1- (point)) 'face))))
        (search-forward "more characters")
        (should (memq 'lispm-approvals-note (ensure-list (get-text-property (1- (point)) 'face)))))
      ;; v on the diff shows it whole, in diff-mode, unrefined.
      (lispm-approvals-test--press "v" id)
      (with-current-buffer (format "*LispM %s diff*" id)
        (should (equal (buffer-string) diff))
        (should (derived-mode-p 'diff-mode))
        (should buffer-read-only)
        (should-not diff-refine)
        (should-not diff-font-lock-syntax)
        (should (eq bidi-paragraph-direction 'left-to-right))
        (should (string-match-p "codex (role default) asks for edit: the whole diff"
                                header-line-format)))
      ;; And so does the button, again.
      (kill-buffer (format "*LispM %s diff*" id))
      (with-current-buffer lispm-approvals-buffer-name
        (goto-char (point-min))
        (search-forward "[Show the whole diff]")
        (push-button (1- (point))))
      (should (equal (with-current-buffer (format "*LispM %s diff*" id) (buffer-string)) diff))
      ;; The decision is as ever.
      (lispm-approvals-test--press "a" id)
      (should (equal (car (cdr rec)) '((:decision allow)))))))

(ert-deftest lispm-approvals-test-many-lines-show-cut ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (lispm-approvals-max-lines 40)
           (lines 200000)
           (diff (concat (format "@@ -0,0 +1,%d @@\n" lines)
                         (mapconcat (lambda (n) (format "+line %d\n" n))
                                    (number-sequence 1 lines) "")))
           (id (lispm-approvals-request codex 'default 'edit (list :diff diff) #'ignore))
           (shown (lispm-approvals-test--text)))
      (should (string-search "\n+line 39\n" shown))
      (should-not (string-search "\n+line 40\n" shown))
      (should (string-search (format "\n[… %d more lines]\n  Cut to fit" (- lines 39)) shown))
      (should (< (length shown) 2000))
      ;; g cuts it again, to what is asked now.
      (let ((lispm-approvals-max-lines 50))
        (with-current-buffer lispm-approvals-buffer-name
          (call-interactively (key-binding "g"))))
      (should (string-search (format "\n+line 49\n[… %d more lines]\n" (- lines 49))
                             (lispm-approvals-test--text)))
      ;; v anywhere in the section shows what was cut.
      (with-current-buffer lispm-approvals-buffer-name
        (goto-char (lispm-approvals--position-of (lispm-approvals-get id)))
        (call-interactively (key-binding "v")))
      (with-current-buffer (format "*LispM %s diff*" id)
        (should (equal (buffer-string) diff))))))

(ert-deftest lispm-approvals-test-agent-text-shown-as-text ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (evil (lambda (string)
                   (propertize string 'display "ALLOWED" 'invisible t 'lispm-from-agent t
                               'face 'default)))
           ;; Control characters, an escape sequence, a raw byte, a bidi override.
           (raw (concat "nul:\0 esc:\e[2J bell:\a cr:\r raw:" (string-to-multibyte "\377")
                        " rtl:\u202e"))
           (long-form (format "(list %s)" (mapconcat #'number-to-string
                                                      (number-sequence 1 5000) " ")))
           (edit (lispm-approvals-request
                  codex 'default 'edit
                  (list :files (list (funcall evil (expand-file-name "a.el" folder)))
                        :diff (funcall evil (concat "--- a/a.el\n+++ b/a.el\n@@ -1 +1 @@\n-"
                                                    raw "\n+" raw "!\n"))
                        :text (funcall evil raw))
                  #'ignore (funcall evil "edit_file a.el"))))
      (lispm-approvals-request codex 'default 'shell
                               (list :command (funcall evil "make check")
                                     :directory (funcall evil folder))
                               #'ignore)
      (lispm-approvals-request codex 'default 'eval
                               (list :form (funcall evil "(message \"hi\")")
                                     :touches (list (funcall evil "calls: message")))
                               #'ignore)
      (lispm-approvals-request codex 'default 'eval (list :form (funcall evil long-form))
                               #'ignore)
      ;; Invalid UTF-8: bytes, in a unibyte string.
      (lispm-approvals-request codex 'default 'eval (list :text "bytes: \377\376\0 end")
                               #'ignore)
      (with-current-buffer lispm-approvals-buffer-name
        ;; None of the agent's properties.
        (dolist (property '(display invisible lispm-from-agent))
          (should-not (text-property-not-all (point-min) (point-max) property nil)))
        (let ((text (lispm-approvals-test--text)))
          ;; Shown as the characters they are.
          (should (string-search (concat "\n-" raw "\n+" raw "!\n") text))
          (should (string-search (concat "\n" raw "\n") text))
          (should (string-search "$ make check\n" text))
          (should (string-search "(message \"hi\")" text))
          (should (string-search (string-to-multibyte "bytes: \377\376\0 end\n") text))
          ;; A form too long to pretty-print shows as written, cut.
          (should (string-search (concat "\n" (substring long-form 0 lispm-approvals-line-limit)
                                         (format "[… %d more characters]\n"
                                                 (- (length long-form) lispm-approvals-line-limit)))
                                 text))))
      ;; Nor in the whole texts.
      (dolist (part '(:diff :text))
        (with-current-buffer (lispm-approvals-view-whole (lispm-approvals-get edit) part)
          (should (string-search raw (buffer-string)))
          (dolist (property '(display invisible lispm-from-agent))
            (should-not (text-property-not-all (point-min) (point-max) property nil))))))))

(ert-deftest lispm-approvals-test-summary-of-a-long-action ()
  (lispm-approvals-test--with-state
    (let* ((codex (lispm-approvals-test--agent "codex" folder))
           (words (mapconcat #'identity (make-list 200000 "ab\tcd") " \n"))
           (id (lispm-approvals-request codex 'default 'eval
                                        (list :form (concat "  \n" words)) #'ignore))
           (summary (lispm-approvals-summary (lispm-approvals-get id))))
      (should (= (length summary) 200))
      (should (string-prefix-p "eval: ab cd ab cd" summary))
      (should (string-suffix-p "..." summary))
      (should (equal (lispm-approvals--one-line "  a \n b   " 200) "a b")))))

(provide 'lispm-approvals-test)
;;; lispm-approvals-test.el ends here
