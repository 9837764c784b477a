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

(ert-deftest lispm-calls-test-outside-the-folder-is-refused-before-anyone-is-asked ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (dolist (path '("../x.txt" "/etc/passwd" "~/.bashrc"))
      (let ((answer (lispm-calls-test--call "edit_file" (list :path path :old "a" :new "b"))))
        (should-not (plist-get answer :ok))
        (should (string-match-p "outside" (plist-get answer :error)))))
    (should-not (lispm-approvals-pending))))

(ert-deftest lispm-calls-test-reads-run-at-once ()
  (lispm-calls-test--with-agent agent
    (ignore agent)
    (let ((answer (lispm-calls-test--call "read_file" '(:path "a.txt"))))
      (should (eq (plist-get answer :ok) t))
      (should (equal (plist-get answer :text) "alpha\n")))
    (should (equal (plist-get (cdr (assq 'lispm/audit notified)) :decision) "allow"))))

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

(provide 'lispm-calls-test)
;;; lispm-calls-test.el ends here
