;;; lispm-test-fixtures-test.el --- Tests of the tests' agents  -*- lexical-binding: t; -*-

;;; Commentary:

;; The fixtures register agents through the front door and take them
;; away the same way, in a registry of the test's own, and never touch
;; the registry or the agents file outside.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(ert-deftest lispm-test-fixtures-test-an-agent-comes-and-goes-by-the-front-door ()
  (let* ((seen nil)
         (lispm-agents-changed-hook
          (cons (lambda () (push (mapcar #'lispm-agent-name (lispm-agents)) seen))
                (default-value 'lispm-agents-changed-hook)))
         (outside (make-temp-file "lispm-test-fixtures-" t))
         (lispm-agents-file (expand-file-name "lispm/agents.eld" outside))
         (lispm-resume--exited nil)
         (kept nil)
         (folder nil))
    (unwind-protect
        (progn
          (lispm-test-with-agent (agent :kind 'claude :state 'running :queued 2)
            (setq kept agent
                  folder (lispm-agent-folder agent))
            (should (eq (lispm-agent-get "claude") agent))
            (should (= (lispm-agent-serial agent) 1))
            (should (eq (lispm-agent-state agent) 'running))
            (should (= (lispm-agent-queued agent) 2))
            (should (file-directory-p folder))
            (should (equal folder (file-name-as-directory (file-truename folder))))
            ;; Announced when registered, and again when its slots were set.
            (should (equal seen '(("claude") ("claude"))))
            ;; The hook remembered it in the registry's own agents file.
            (should-not (string-prefix-p outside lispm-agents-file))
            (should (file-exists-p lispm-agents-file)))
          ;; It left as when its terminal closes, and that was announced.
          (should (eq (lispm-agent-state kept) 'exited))
          (should (equal seen '(nil ("claude") ("claude"))))
          (should-not (file-exists-p folder))
          ;; The registry and the agents file outside were never touched.
          (should-not (lispm-agent-get "claude"))
          (should-not (file-exists-p lispm-agents-file)))
      (delete-directory outside t))))

(ert-deftest lispm-test-fixtures-test-a-registry-of-its-own ()
  (let ((folder (file-name-as-directory (file-truename (make-temp-file "lispm-test-fixtures-" t))))
        (agents nil))
    (unwind-protect
        (progn
          (lispm-test-with-registry
            (setq agents (list (lispm-test-add-agent :folder folder)
                               (lispm-test-add-agent :kind 'claude :name "reviewer"
                                                     :folder folder :resume t)))
            (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("codex" "reviewer")))
            (should (equal (mapcar #'lispm-agent-serial (lispm-agents)) '(1 2)))
            (should (eq (lispm-agent-resumes (cadr agents)) t))
            ;; A key that is not an agent's: an error, and nothing registered.
            (should-error (lispm-test-add-agent :folder folder :colour 'red))
            (should (= (length (lispm-agents)) 2))
            ;; A registry within starts empty and leaves the outer one be.
            (lispm-test-with-registry
              (should-not (lispm-agents))
              (should (= (lispm-agent-serial (lispm-test-add-agent :folder folder)) 1)))
            (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("codex" "reviewer")))
            ;; An agent that leaves mid-test is gone from then on.
            (lispm-agents-unregister (car agents))
            (should (equal (mapcar #'lispm-agent-name (lispm-agents)) '("reviewer"))))
          ;; Those left at the end left as when their terminals close; a
          ;; folder given is the test's own, and stays.
          (should (equal (mapcar #'lispm-agent-state agents) '(exited exited)))
          (should (file-directory-p folder))
          ;; Outside a registry of its own, a test gets no agent.
          (should-error (lispm-test-add-agent :folder folder))
          (should-not (lispm-agent-get "codex")))
      (delete-directory folder t))))

(provide 'lispm-test-fixtures-test)
;;; lispm-test-fixtures-test.el ends here
