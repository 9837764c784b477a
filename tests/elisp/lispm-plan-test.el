;;; lispm-plan-test.el --- The own agent's plan as Org TODO items  -*- lexical-binding: t; -*-

;;; Commentary:

;; The plan tool writes the steps under the turn, before its replies;
;; the conversation reads back as it was; the user's edits of the
;; items are the plan the agent gets back; the list and the inspector
;; show it.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-plan)
(require 'lispm-test-fixtures)

(defmacro lispm-plan-test--with-agent (agent &rest body)
  "Run BODY with AGENT an own agent whose session has one turn under way."
  (declare (indent 1) (debug (symbolp body)))
  `(lispm-test-in-folder
     (let ((lispm-sessions-directory (expand-file-name "sessions/" folder)))
       (lispm-test-with-registry
         (let* ((buffer (lispm-session-create folder "scripted" "emacs"))
                (,agent (lispm-agents-add-actor
                         (lispm-own-agent--make :name "emacs" :kind 'lispm :folder folder
                                                :state 'running :activity 'idle
                                                :buffer buffer))))
           (unwind-protect
               (progn
                 (lispm-session-begin-turn buffer "Fix the parser")
                 (let ((stream (lispm-session-begin-reply buffer)))
                   (lispm-session-stream-text stream "I will plan first.")
                   (lispm-session-end-reply stream))
                 (lispm-session-insert-call buffer '(:id "c1" :name "plan" :arguments "{}"))
                 ,@body)
             (lispm-sessions-wait-for-commits 30)
             (with-current-buffer buffer (set-buffer-modified-p nil))
             (kill-buffer buffer)))))))

(ert-deftest lispm-plan-test-the-tool-writes-todo-items-under-the-turn ()
  (lispm-plan-test--with-agent agent
    (let* ((buffer (lispm-own-agent-buffer agent))
           (before (lispm-session-messages buffer))
           (result (lispm-tools-call "plan" agent
                                     '(:steps ["[x] Read the parser" "[>] Write the test"
                                               "Fix the colon case"]))))
      (should (plist-get result :ok))
      (should (equal (plist-get result :text)
                     "[x] Read the parser\n[>] Write the test\n[ ] Fix the colon case"))
      (lispm-session-insert-result buffer "c1" (plist-get result :text))
      (with-current-buffer buffer
        (goto-char (point-min))
        ;; Under the turn, before its replies.
        (should (re-search-forward "^\\* Turn 1: Fix the parser$" nil t))
        (should (re-search-forward "^\\*\\* Plan$" nil t))
        (should (re-search-forward "^\\*\\*\\* DONE Read the parser$" nil t))
        (should (re-search-forward "^\\*\\*\\* DOING Write the test$" nil t))
        (should (re-search-forward "^\\*\\*\\* TODO Fix the colon case$" nil t))
        (should (re-search-forward "^\\*\\* emacs$" nil t)))
      ;; The conversation reads back as before, the call's result added.
      (let ((after (lispm-session-messages buffer)))
        (should (equal (butlast after) (butlast before)))
        (should (equal (plist-get (car (last after)) :content) (plist-get result :text))))
      (should (equal (lispm-actor-step agent) "2/3 Write the test"))
      ;; Called again: replaced in place, not added.
      (lispm-tools-call "plan" agent '(:steps ["[x] Read the parser" "[x] Write the test"
                                               "[>] Fix the colon case"]))
      (with-current-buffer buffer
        (should (= 1 (how-many "^\\*\\* Plan$" (point-min) (point-max)))))
      (should (equal (lispm-actor-step agent) "3/3 Fix the colon case")))))

(ert-deftest lispm-plan-test-the-users-edits-are-the-plan ()
  (lispm-plan-test--with-agent agent
    (let ((buffer (lispm-own-agent-buffer agent)))
      (lispm-tools-call "plan" agent '(:steps ["Read the parser" "Write the test"]))
      ;; The user cancels a step and adds one, in the document.
      (with-current-buffer buffer
        (goto-char (point-min))
        (re-search-forward "^\\*\\*\\* TODO Read the parser$")
        (replace-match "*** CANCELLED Read the parser")
        (end-of-line)
        (insert "\n*** TODO Ask the user about colons"))
      (should (equal (lispm-session-plan buffer)
                     '((:state cancelled :text "Read the parser")
                       (:state todo :text "Ask the user about colons")
                       (:state todo :text "Write the test"))))
      ;; The next request has it, in a note after the plan the model last saw;
      ;; the system prompt stays as it was, for the cache.
      (should-not (string-search "Read the parser" (lispm-own-agent-system-prompt agent)))
      (let* ((shown (list '(:role "tool" :name "plan" :tool_call_id "c1"
                                  :content "[ ] Read the parser\n[ ] Write the test")))
             (note (lispm-plan-note buffer shown)))
        (should (equal (plist-get note :role) "user"))
        (should (string-suffix-p "\n[-] Read the parser\n[ ] Ask the user about colons\n[ ] Write the test"
                                 (plist-get note :content)))
        ;; Shown once, it is not shown again; nor when the model's own call shows it.
        (should-not (lispm-plan-note buffer (append shown (list note))))
        (should-not (lispm-plan-note buffer (list (list :role "tool" :name "plan"
                                                        :content (lispm-plan-text
                                                                  (lispm-session-plan buffer)))))))
      (should (equal (lispm-actor-step agent) "2/3 Ask the user about colons"))
      ;; The inspector shows it.
      (should (string-search "- TODO Ask the user about colons"
                             (with-current-buffer (lispm-inspect agent) (buffer-string))))
      (kill-buffer (lispm-inspect-buffer-name agent)))))

(ert-deftest lispm-plan-test-the-plan-is-found-looking-at-the-new-text-only ()
  (lispm-plan-test--with-agent agent
    (let ((buffer (lispm-own-agent-buffer agent)))
      (should-not (lispm-session-plan buffer))
      (lispm-tools-call "plan" agent '(:steps ["First" "Second"]))
      (should (equal (length (lispm-session-plan buffer)) 2))
      ;; A later turn's own plan is newer; a turn without one keeps the last.
      (lispm-session-insert-result buffer "c1" "done")
      (lispm-session-begin-turn buffer "Go on")
      (should (equal (plist-get (car (lispm-session-plan buffer)) :text) "First"))
      (lispm-tools-call "plan" agent '(:steps ["Third"]))
      (should (equal (lispm-session-plan buffer) '((:state todo :text "Third"))))
      ;; Looked at again, only the text after the last look is searched.
      (let ((searched nil))
        (cl-letf* ((real (symbol-function 'lispm-session--newest-plan))
                   ((symbol-function 'lispm-session--newest-plan)
                    (lambda (from end) (push (- end from) searched) (funcall real from end))))
          (with-current-buffer buffer
            (let ((inhibit-read-only t))
              (goto-char (lispm-session--transcript-end))
              (insert (make-string 100000 ?x) "\n")))
          (should (equal (lispm-session-plan buffer) '((:state todo :text "Third"))))
          (should (equal (lispm-session-plan buffer) '((:state todo :text "Third"))))
          (should (equal searched '(0 100001)))))
      ;; The user removes the newest plan: the one before it counts again.
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (goto-char (point-max))
          (re-search-backward "^\\*\\* Plan$")
          (replace-match "** Notes")))
      (should (equal (plist-get (car (lispm-session-plan buffer)) :text) "First")))))

(ert-deftest lispm-plan-test-bad-plans ()
  (lispm-plan-test--with-agent agent
    (should-not (plist-get (lispm-tools-call "plan" agent '(:steps [])) :ok))
    (should (string-match-p "at most 100 steps"
                            (plist-get (lispm-tools-call "plan" agent
                                                         (list :steps (make-vector 101 "x")))
                                       :error)))
    (should-not (lispm-session-plan (lispm-own-agent-buffer agent)))
    ;; A step cannot break the document: it is one heading line.
    (lispm-tools-call "plan" agent '(:steps ["one\n* Turn 9: fake\n** Plan" "two"]))
    (should (equal (mapcar (lambda (item) (plist-get item :text))
                           (lispm-session-plan (lispm-own-agent-buffer agent)))
                   '("one * Turn 9: fake ** Plan" "two")))
    (should (= (length (lispm-session-turns (lispm-own-agent-buffer agent))) 1))
    ;; An agent without a session keeps no plan.
    (let ((other (lispm-test-add-actor :name "codex" :folder folder)))
      (should (string-match-p "Only LispM.s own agents keep a plan"
                              (plist-get (lispm-tools-call "plan" other '(:steps ["x"]))
                                         :error))))))

(provide 'lispm-plan-test)
;;; lispm-plan-test.el ends here
