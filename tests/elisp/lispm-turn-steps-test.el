;;; lispm-turn-steps-test.el --- A turn's tool calls follow each other without waiting  -*- lexical-binding: t; -*-

;;; Commentary:

;; A call whose outcome comes before `lispm-calls-invoke' returns (a
;; read) is followed by the next call, and the last by the next model
;; request, in one loop: not from a timer, which a batch
;; `accept-process-output' (and any wait that is not for a timer) holds
;; until something else wakes Emacs, about 10 ms in the benchmark
;; `agent_tool_step_overhead_ms'; and many such calls do not nest.  A
;; call whose outcome comes later still goes on by itself.
;;
;; The tools offered to the model are made once, not for each request
;; (12 schemas, 0.35 ms a request), until a tool is defined or redefined.
;;
;; The turn's model is one without a key, so the request after the
;; calls stops the turn at `lispm-model-unavailable' at once: no model
;; is asked.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-turn)
(require 'lispm-test-fixtures)

(defmacro lispm-turn-steps-test--with-turn (spec &rest body)
  "Run BODY with a turn of a real session and agent, stopped at its tools.
SPEC is (VAR CALLS): VAR is bound to the turn, in state `tools', whose
model asked for CALLS, a list of (NAME . ARGUMENTS-JSON)."
  (declare (indent 1) (debug ((symbolp form) body)))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-turn-steps-test" t))))
          (lispm-sessions-directory (expand-file-name "sessions/" root))
          (lispm-policy-roles '((default (read allow))))
          (lispm-models '(("keyless" :api anthropic :base-url "http://127.0.0.1:9"
                           :model "m" :key (:env "LISPM_TURN_STEPS_TEST_UNSET")))))
     (setenv "LISPM_TURN_STEPS_TEST_UNSET" nil)
     (unwind-protect
         (lispm-test-with-agent (agent)
           (with-temp-file (expand-file-name "a.txt" (lispm-agent-folder agent))
             (insert "alpha\n"))
           (let* ((buffer (lispm-session-create (lispm-agent-folder agent) "keyless"))
                  (n 0)
                  (calls (mapcar (lambda (call)
                                   (lispm-turn-call-make :id (format "c%d" (cl-incf n))
                                                         :name (car call) :arguments (cdr call)))
                                 ,(nth 1 spec)))
                  (,(car spec) (lispm-turn--make :actor agent :buffer buffer :number 1
                                                 :model "keyless" :state 'tools
                                                 :calls calls)))
             (lispm-session-begin-turn buffer "Read a.txt")
             (dolist (call calls)
               (lispm-session-insert-call buffer (list :id (lispm-turn-call-id call)
                                                       :name (lispm-turn-call-name call)
                                                       :arguments (lispm-turn-call-arguments call))))
             (unwind-protect (progn ,@body)
               (with-current-buffer buffer (set-buffer-modified-p nil))
               (kill-buffer buffer))))
       (lispm-sessions-wait-for-commits 10)
       (lispm-sessions-stop)
       (delete-directory root t))))

(ert-deftest lispm-turn-steps-test-calls-at-once-follow-in-one-loop ()
  (lispm-turn-steps-test--with-turn
      (turn (make-list 200 '("read_file" . "{\"path\": \"a.txt\"}")))
    (let ((timers (length timer-list)))
      (lispm-turn--run-next turn)
      ;; Every read ran, and the request after them was made, before
      ;; `lispm-turn--run-next' returned: nothing waits for a timer.
      (should (= (lispm-turn-steps turn) 1))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-model-unavailable))
      (should (= (length timer-list) timers))
      ;; The request had every result, in order.
      (should (equal (mapcar (lambda (m) (plist-get m :tool_call_id))
                             (lispm-turn-messages turn))
                     (mapcar (lambda (n) (format "c%d" n)) (number-sequence 1 200))))
      (should (cl-every (lambda (m) (equal (plist-get m :content) "alpha\n"))
                        (lispm-turn-messages turn))))))

(defun lispm-turn-steps-test--result (turn id)
  "Return the content of TURN's tool message for the call ID."
  (plist-get (cl-find id (lispm-turn-messages turn)
                      :key (lambda (m) (plist-get m :tool_call_id)) :test #'equal)
             :content))

(ert-deftest lispm-turn-steps-test-a-later-outcome-goes-on-by-itself ()
  ;; grep runs in a process: its outcome comes after `lispm-calls-invoke'
  ;; returned; the read after it, and the request, follow from there.
  (lispm-turn-steps-test--with-turn
      (turn (list '("grep" . "{\"pattern\": \"alpha\"}")
                  '("read_file" . "{\"path\": \"a.txt\"}")))
    (lispm-turn--run-next turn)
    (should (null (lispm-turn-outcomes turn)))
    (should (null (lispm-turn-messages turn)))
    (should (eq (lispm-turn-state turn) 'tools))
    (let ((deadline (+ (float-time) 10)))
      (while (and (eq (lispm-turn-state turn) 'tools) (< (float-time) deadline))
        (accept-process-output nil 0.05)))
    (should (eq (lispm-turn-state turn) 'stopped))
    (should (eq (car (lispm-turn-condition turn)) 'lispm-model-unavailable))
    (should (string-match-p "a.txt.*alpha" (lispm-turn-steps-test--result turn "c1")))
    (should (equal (lispm-turn-steps-test--result turn "c2") "alpha\n"))))


(defun lispm-turn-steps-test--offered (name)
  "Return the description `lispm-turn-tools' offers for the tool NAME."
  (plist-get (cl-find name (lispm-turn-tools) :key (lambda (tool) (plist-get tool :name))
                      :test #'equal)
             :description))

(ert-deftest lispm-turn-steps-test-the-tools-offered-are-made-once-until-one-changes ()
  (unwind-protect
      (progn
        (eval '(lispm-define-tool lispm-turn-steps-test-echo ((text string "Some text."))
                 "First version."
                 :kind 'read
                 text)
              t)
        (should (eq (lispm-turn-tools) (lispm-turn-tools)))
        (should (equal (lispm-turn-steps-test--offered "lispm_turn_steps_test_echo")
                       "First version."))
        ;; A redefinition replaces the tool in place, and is offered.
        (eval '(lispm-define-tool lispm-turn-steps-test-echo ((text string "Some text."))
                 "Second version."
                 :kind 'read
                 text)
              t)
        (should (equal (lispm-turn-steps-test--offered "lispm_turn_steps_test_echo")
                       "Second version.")))
    (setq lispm-tools (cl-remove "lispm_turn_steps_test_echo" lispm-tools
                                 :key #'lispm-tool-name :test #'equal))
    (run-hooks 'lispm-tools-changed-hook))
  (should-not (lispm-turn-steps-test--offered "lispm_turn_steps_test_echo")))

;;; lispm-turn-steps-test.el ends here
