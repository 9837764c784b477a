;;; lispm-turn-test.el --- A turn driven to its conditions, each restart chosen  -*- lexical-binding: t; -*-

;;; Commentary:

;; A turn writes nothing itself: it tells its sink what happens
;; (`lispm-turn-report').  Here the sink is a list, the model is
;; scripted (`lispm-test-scripted-stream') and the tools are the test's
;; own, so a turn runs without a session, a sidecar or a model.  Each
;; test drives a turn to a condition and chooses one of its restarts:
;; what the restart does shows in the next request, in the result the
;; model gets and in what the sink was told.

;;; Code:

(require 'ert)
(require 'lispm-turn)
(require 'lispm-own-agent)
(require 'lispm-test-fixtures)

(cl-defstruct (lispm-turn-test-sink (:constructor lispm-turn-test-sink-make) (:copier nil))
  "A sink that keeps what it is told, newest first."
  (events nil))

(cl-defmethod lispm-turn-report ((sink lispm-turn-test-sink) _turn what &rest args)
  "Keep WHAT and ARGS in SINK."
  (push (cons what args) (lispm-turn-test-sink-events sink)))

(defvar lispm-turn-test--models nil
  "The models asked, newest first.")

(defvar lispm-turn-test--checks 0
  "How often `lispm_turn_test_check' ran.")

(defvar lispm-turn-test--refuelled nil
  "The fuel the thirsty tool was given, or nil.")

(lispm-define-tool lispm-turn-test-check ((ok string "Say yes."))
  "Succeed only if OK is yes."
  :kind 'read
  (cl-incf lispm-turn-test--checks)
  (if (equal ok "yes") "fine" (error "Not yes: %s" ok)))

(lispm-define-tool lispm-turn-test-thirsty (agent)
  "Run out of fuel, and go on with what the user gives."
  :kind 'read
  (lispm-tools-defer
   (lambda (done)
     (lispm-actor-refuel agent 100
                         (lambda (fuel)
                           (setq lispm-turn-test--refuelled fuel)
                           (funcall done (if fuel (list :ok t :text (format "fuel %d" fuel))
                                           (list :ok nil :error "out of fuel"
                                                 :condition 'lispm-lisp-fuel-exhausted))))))))

(defvar lispm-turn-test--budget nil
  "The tokens a test's turn may use, or nil for no budget.")

(defun lispm-turn-test--over-budget (turn)
  "Return why TURN may not go on, past `lispm-turn-test--budget', or nil."
  (let ((spent (lispm-turn-spent turn)))
    (when (and lispm-turn-test--budget
               (>= (+ (plist-get spent :input) (plist-get spent :output))
                   lispm-turn-test--budget))
      (list :message "over the test's budget"
            :reader (lambda () 1000)
            :raise (lambda (value) (setq lispm-turn-test--budget value))))))

(defvar lispm-turn-test--touched nil
  "Set when the tool that asks first ran.")

(lispm-define-tool lispm-turn-test-touch ()
  "Touch something, once the user allows it."
  :kind 'edit
  (setq lispm-turn-test--touched t)
  "touched")

(defmacro lispm-turn-test--with (spec script &rest body)
  "Run BODY with a turn started on SCRIPT, the model's answers.
SPEC is (TURN SINK): TURN is bound to the turn, once it stopped or
ended, SINK to its sink.  The actor is an own agent without a session."
  (declare (indent 2) (debug ((symbolp symbolp) form body)))
  `(lispm-test-in-folder
     (let ((lispm-policy-roles '((default (read allow))))
           (lispm-models '(("scripted" :api anthropic :base-url "http://127.0.0.1:9" :model "m"
                            :price (:input 3 :output 10))
                           ("backup" :api anthropic :base-url "http://127.0.0.1:9" :model "m")))
           (lispm-test-model-script ,script)
           (lispm-test-model-requests nil)
           (lispm-turn-test--models nil)
           (lispm-turn-test--checks 0)
           (lispm-turn-test--refuelled nil)
           (sent nil))
       (lispm-test-with-registry
         (lispm-test-with-played-sidecar ((lambda (&rest _) nil) sent)
           (cl-letf (((symbol-function 'lispm-model-stream)
                      (lambda (model request handler)
                        (push model lispm-turn-test--models)
                        (lispm-test-scripted-stream model request handler))))
             (let* ((agent (lispm-agents-add-actor
                            (lispm-own-agent--make :name "own" :kind 'lispm :folder folder
                                                   :state 'running :activity 'idle)))
                    (,(cadr spec) (lispm-turn-test-sink-make))
                    (,(car spec) (lispm-turn-start
                                  agent nil 1 "scripted"
                                  (list (list :role "user" :content "Go"))
                                  :sink ,(cadr spec)
                                  :budget #'lispm-turn-test--over-budget)))
               (ignore ,(cadr spec))
               (setf (lispm-own-agent-turn agent) ,(car spec))
               (lispm-turn-test--settle ,(car spec))
               ,@body)))))))

(defvar lispm-turn-test--until '(stopped done aborted)
  "The states `lispm-turn-test--settle' waits for.")

(defun lispm-turn-test--settle (turn)
  "Wait until TURN is in one of `lispm-turn-test--until'."
  (let ((deadline (+ (float-time) 10)))
    (while (and (not (memq (lispm-turn-state turn) lispm-turn-test--until))
                (< (float-time) deadline))
      (accept-process-output nil 0.01))))

(defun lispm-turn-test--restart (turn restart &optional argument)
  "Choose RESTART of TURN with ARGUMENT; wait until it stops or ends again."
  (lispm-turn-restart turn restart argument)
  (lispm-turn-test--settle turn))

(defun lispm-turn-test--told (sink what)
  "Return the arguments of each WHAT SINK was told, oldest first."
  (mapcar #'cdr (cl-remove-if-not (lambda (event) (eq (car event) what))
                                  (reverse (lispm-turn-test-sink-events sink)))))

(defun lispm-turn-test--last-request-results ()
  "Return the tool results the newest model request sent, as (ID . CONTENT)."
  (delq nil (mapcar (lambda (message)
                      (and (equal (plist-get message :role) "tool")
                           (cons (plist-get message :tool_call_id)
                                 (plist-get message :content))))
                    (plist-get (car lispm-test-model-requests) :messages))))

(defun lispm-turn-test--call (id name arguments)
  "Return the model's answer asking for the call ID of NAME with ARGUMENTS."
  (list (list :type "tool_call" :id id :name name :arguments arguments)
        (list :type "done" :stop_reason "tool_use")))

(defconst lispm-turn-test--overloaded
  '((:type "error" :kind "http" :status 529 :message "Overloaded"))
  "The model's answer: an HTTP error.")

(defconst lispm-turn-test--hello
  '((:type "text" :text "Hello") (:type "done" :stop_reason "end_turn"))
  "The model's answer: a text, the turn's end.")

;;; The model failed: retry, other-model, abort

(ert-deftest lispm-turn-test-http-error-offers-its-restarts-and-aborts ()
  (lispm-turn-test--with (turn sink) (list lispm-turn-test--overloaded)
    (should (eq (lispm-turn-state turn) 'stopped))
    (should (eq (car (lispm-turn-condition turn)) 'lispm-model-http-error))
    (should (equal (lispm-turn-available-restarts turn) '(retry other-model abort)))
    (should (equal (mapcar #'car (lispm-turn-numbered-restarts turn)) '(0 1 4)))
    (should (equal (lispm-turn-test--told sink 'note)
                   '(("Stopped at lispm-model-http-error: HTTP 529: Overloaded"))))
    (should (equal (lispm-turn-test--told sink 'stopped) '(nil)))
    (should-error (lispm-turn-restart turn 'skip-tool) :type 'lispm-turn-no-restart)
    (lispm-turn-test--restart turn 4)
    (should (eq (lispm-turn-state turn) 'aborted))
    (should (= (length lispm-test-model-requests) 1))
    (should (equal (car (last (lispm-turn-test--told sink 'note))) '("Restart ABORT chosen")))
    (should (equal (car (lispm-turn-test-sink-events sink)) '(end)))))

(ert-deftest lispm-turn-test-retry-sends-the-same-request-again ()
  (lispm-turn-test--with (turn sink) (list lispm-turn-test--overloaded lispm-turn-test--hello)
    (should (eq (car (lispm-turn-condition turn)) 'lispm-model-http-error))
    (lispm-turn-test--restart turn 'retry)
    (should (eq (lispm-turn-state turn) 'done))
    (should (= (length lispm-test-model-requests) 2))
    (should (equal (plist-get (nth 0 lispm-test-model-requests) :messages)
                   (plist-get (nth 1 lispm-test-model-requests) :messages)))
    ;; The failed request does not count as a step.
    (should (= (lispm-turn-steps turn) 1))
    (should (equal (lispm-turn-test--told sink 'text) '(("Hello"))))
    (should (equal (lispm-turn-test--told sink 'text-end) '(nil)))
    (should (equal (car (lispm-turn-test-sink-events sink)) '(end)))))

(ert-deftest lispm-turn-test-other-model-asks-the-model-chosen ()
  (lispm-turn-test--with (turn sink) (list '((:type "error" :kind "timeout" :message "read"))
                                           lispm-turn-test--hello)
    (should (eq (car (lispm-turn-condition turn)) 'lispm-model-timeout))
    (should (equal (lispm-turn-available-restarts turn) '(retry other-model abort)))
    ;; A model that does not exist: the turn stays stopped, its restarts offered.
    (should-error (lispm-turn-restart turn 'other-model "nonesuch") :type 'lispm-model-unknown)
    (should (eq (car (lispm-turn-condition turn)) 'lispm-model-timeout))
    (should (equal (lispm-turn-available-restarts turn) '(retry other-model abort)))
    (lispm-turn-test--restart turn 1 "backup")
    (should (equal lispm-turn-test--models '("backup" "scripted")))
    (should (equal (lispm-turn-model turn) "backup"))
    (should (eq (lispm-turn-state turn) 'done))
    (should (equal (plist-get (nth 0 lispm-test-model-requests) :messages)
                   (plist-get (nth 1 lispm-test-model-requests) :messages)))
    (should (equal (car (last (lispm-turn-test--told sink 'note)))
                   '("Restart OTHER-MODEL chosen (backup)")))))

;;; The kind of a model's error is its condition

(ert-deftest lispm-turn-test-each-kind-of-model-error-stops-at-its-condition ()
  (pcase-dolist (`(,kind . ,condition) '(("http" . lispm-model-http-error)
                                         ("timeout" . lispm-model-timeout)
                                         ("malformed" . lispm-model-malformed-reply)
                                         ("cut" . lispm-model-stream-cut)
                                         ("link" . lispm-model-unavailable)))
    (lispm-turn-test--with (turn sink)
        (list `((:type "error" :kind ,kind :message "the model failed")))
      (should (eq (car (lispm-turn-condition turn)) condition))
      (should (memq 'lispm-model-error (get condition 'error-conditions)))
      (should (equal (lispm-turn-available-restarts turn) '(retry other-model abort))))))

(ert-deftest lispm-turn-test-the-models-own-mistake-is-its-result ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "no_such_tool" "{}") lispm-turn-test--hello)
    (should (eq (lispm-turn-state turn) 'done))
    (should (string-prefix-p "Error: no tool no_such_tool"
                             (cdar (lispm-turn-test--last-request-results))))
    (should (equal (mapcar #'cadr (lispm-turn-test--told sink 'result))
                   (list (cdar (lispm-turn-test--last-request-results)))))))

;;; A tool failed: retry, skip-tool, edit-args

(ert-deftest lispm-turn-test-tool-failure-retry-runs-the-call-again ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"no\"}")
            lispm-turn-test--hello)
    (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
    (should (equal (lispm-turn-available-restarts turn) '(retry skip-tool edit-args abort)))
    (should (equal (mapcar #'car (lispm-turn-numbered-restarts turn)) '(0 2 3 4)))
    (should (= lispm-turn-test--checks 1))
    ;; A failure that is not the model's is not its result yet.
    (should-not (lispm-turn-test--told sink 'result))
    (should (equal (mapcar (lambda (args) (lispm-turn-call-id (car args)))
                           (lispm-turn-test--told sink 'call))
                   '("c1")))
    (lispm-turn-test--restart turn 'retry)
    (should (= lispm-turn-test--checks 2))
    (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
    (should (= (length lispm-test-model-requests) 1))))

(ert-deftest lispm-turn-test-skip-tool-gives-the-model-the-error ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"no\"}")
            lispm-turn-test--hello)
    (lispm-turn-test--restart turn 2)
    (should (eq (lispm-turn-state turn) 'done))
    (should (= lispm-turn-test--checks 1))
    (should (equal (lispm-turn-test--last-request-results)
                   '(("c1" . "Error: Not yes: no"))))
    (pcase-let ((`((,call ,text ,error ,_records)) (lispm-turn-test--told sink 'result)))
      (should (equal (lispm-turn-call-id call) "c1"))
      (should (equal text "Error: Not yes: no"))
      (should error))))

(ert-deftest lispm-turn-test-edit-args-runs-the-call-with-new-ones ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"no\"}")
            lispm-turn-test--hello)
    (lispm-turn-test--restart turn 'edit-args "{\"ok\": \"yes\"}")
    (should (eq (lispm-turn-state turn) 'done))
    (should (= lispm-turn-test--checks 2))
    (should (equal (lispm-turn-test--last-request-results) '(("c1" . "fine"))))
    ;; The model sees its call as it ran.
    (should (equal (plist-get (car (plist-get (cadr (plist-get (car lispm-test-model-requests)
                                                                :messages))
                                              :tool_calls))
                              :arguments)
                   "{\"ok\": \"yes\"}"))
    (should (equal (cdr (car (lispm-turn-test--told sink 'result)))
                   '("fine" nil nil)))))

;;; The step limit

(ert-deftest lispm-turn-test-step-limit-retry-starts-the-count-again ()
  (let ((lispm-turn-step-limit 1))
    (lispm-turn-test--with (turn sink)
        (list (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"yes\"}")
              lispm-turn-test--hello)
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-step-limit))
      (should (equal (lispm-turn-available-restarts turn) '(retry abort)))
      (should (= (length lispm-test-model-requests) 1))
      (lispm-turn-test--restart turn 'retry)
      (should (eq (lispm-turn-state turn) 'done))
      (should (= (lispm-turn-steps turn) 1))
      (should (equal (lispm-turn-test--last-request-results) '(("c1" . "fine")))))))

;;; A program out of fuel: more-fuel, skip-tool, abort

(ert-deftest lispm-turn-test-more-fuel-lets-the-program-go-on ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_thirsty" "{}")
            lispm-turn-test--hello)
    (should (eq (car (lispm-turn-condition turn)) 'lispm-lisp-fuel-exhausted))
    (should (equal (lispm-turn-available-restarts turn) '(more-fuel skip-tool abort)))
    (should (equal (mapcar #'car (lispm-turn-numbered-restarts turn)) '(5 2 4)))
    (lispm-turn-test--restart turn 5 500)
    (should (eq (lispm-turn-state turn) 'done))
    (should (eql lispm-turn-test--refuelled 500))
    (should (equal (lispm-turn-test--last-request-results) '(("c1" . "fuel 500"))))
    (should (equal (car (lispm-turn-test-sink-events sink)) '(end)))))

(ert-deftest lispm-turn-test-skip-tool-of-a-program-out-of-fuel ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_thirsty" "{}")
            lispm-turn-test--hello)
    (lispm-turn-test--restart turn 'skip-tool)
    (should (eq (lispm-turn-state turn) 'done))
    (should (equal (lispm-turn-test--last-request-results)
                   '(("c1" . "Error: out of fuel"))))))

(ert-deftest lispm-turn-test-abort-of-a-program-out-of-fuel ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_thirsty" "{}"))
    (lispm-turn-test--restart turn 'abort)
    (should (eq (lispm-turn-state turn) 'aborted))
    (should (null lispm-turn-test--refuelled))
    (should (= (length lispm-test-model-requests) 1))
    ;; The program ends without fuel: its failure is the call's result.
    (should (equal (plist-get (car (last (lispm-turn-messages turn))) :content)
                   "Error: out of fuel"))
    (should (equal (cdr (car (lispm-turn-test--told sink 'result)))
                   '("Error: out of fuel" t nil)))
    (should (equal (car (lispm-turn-test-sink-events sink)) '(end)))))

;;; Interrupted

(ert-deftest lispm-turn-test-an-interrupt-stops-with-the-request-restarts ()
  (let ((lispm-turn-test--until '(stream)))
    (lispm-turn-test--with (turn sink)
        (list '((:type "text" :text "Thinking")))
      ;; The stream never ends: the user interrupts it.
      (lispm-turn-interrupt turn)
      (should (equal (lispm-turn-test--told sink 'text-end) '(nil)))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-interrupted))
      (should (equal (lispm-turn-available-restarts turn) '(retry other-model abort)))
      (let ((lispm-turn-test--until '(stopped done aborted)))
        (lispm-turn-test--restart turn 'retry))
      (should (eq (lispm-turn-state turn) 'done)))))

(defmacro lispm-turn-test--with-waiting-approval (turn &rest body)
  "Run BODY with TURN bound to a turn whose edit waits for the user's approval."
  (declare (indent 1) (debug (symbolp body)))
  `(let ((lispm-turn-test--until '(tools))
         (lispm-turn-test--touched nil)
         (lispm-approvals--pending nil)
         (lispm-approvals--withdrawn nil))
     (lispm-turn-test--with (,turn _sink)
         (list (lispm-turn-test--call "c1" "lispm_turn_test_touch" "{}")
               lispm-turn-test--hello)
       (should (= (length (lispm-approvals-pending)) 1))
       ,@body
       ;; Nothing is left to decide for nothing, and nothing ran.
       (should-not (lispm-approvals-pending))
       (should-not lispm-turn-test--touched))))

(ert-deftest lispm-turn-test-an-interrupt-withdraws-the-approval-a-call-waits-for ()
  (lispm-turn-test--with-waiting-approval turn
    (lispm-turn-interrupt turn)
    (should (equal (cdr (car lispm-approvals--withdrawn)) "the turn was interrupted"))
    (let ((lispm-turn-test--until '(stopped done aborted)))
      (lispm-turn-test--settle turn))
    (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-interrupted))))

(ert-deftest lispm-turn-test-an-aborted-turn-withdraws-its-approvals ()
  (lispm-turn-test--with-waiting-approval turn
    (lispm-turn-end turn)
    (should (equal (cdr (car lispm-approvals--withdrawn)) "the turn was aborted"))
    (should (eq (lispm-turn-state turn) 'aborted))))

;;; The budget

(ert-deftest lispm-turn-test-a-budget-stops-before-the-next-request ()
  (let ((lispm-turn-test--budget 100))
    (lispm-turn-test--with (turn sink)
        (list (append '((:type "usage" :input_tokens 90 :output_tokens 30))
                      (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"yes\"}"))
              lispm-turn-test--hello)
      ;; The call ran; the next request was not sent.
      (should (= lispm-turn-test--checks 1))
      (should (= (length lispm-test-model-requests) 1))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-budget-exceeded))
      (should (equal (lispm-turn-available-restarts turn) '(raise-budget other-model abort)))
      (should (equal (lispm-turn-spent turn)
                     '(:input 90 :output 30 :cached 0 :reasoning 0 :cost 0.00057)))
      (lispm-turn-test--restart turn 'raise-budget 1000)
      (should (= lispm-turn-test--budget 1000))
      (should (eq (lispm-turn-state turn) 'done))
      (should (= (length lispm-test-model-requests) 2)))))

(ert-deftest lispm-turn-test-cached-tokens-cost-their-own-price ()
  (let ((lispm-models '(("m" :api chat :base-url "http://x" :model "m"
                         :price (:input 3 :output 15 :cached 0.3 :cache-write 3.75))
                        ("plain" :api chat :base-url "http://x" :model "m"
                         :price (:input 3 :output 15))))
        (usage '(:input_tokens 1000000 :cached_tokens 600000 :cache_write_tokens 100000
                               :output_tokens 10000 :reasoning_tokens 4000)))
    ;; 0.3 M uncached at 3, 0.6 M read at 0.3, 0.1 M written at 3.75, 0.01 M out at 15.
    (should (< (abs (- (lispm-turn-cost "m" usage) (+ 0.9 0.18 0.375 0.15))) 1e-9))
    ;; Without cache prices, every input token is an input token.
    (should (< (abs (- (lispm-turn-cost "plain" usage) (+ 3.0 0.15))) 1e-9))
    (should-not (lispm-turn-cost "unknown" usage))))

(ert-deftest lispm-turn-test-a-budget-other-model-sends-once ()
  (let ((lispm-turn-test--budget 100))
    (lispm-turn-test--with (turn sink)
        (list (append '((:type "usage" :input_tokens 90 :output_tokens 30))
                      (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"yes\"}"))
              lispm-turn-test--hello)
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-budget-exceeded))
      (lispm-turn-test--restart turn 'other-model "backup")
      ;; One request, to the model chosen; the budget is checked again after.
      (should (equal (car lispm-turn-test--models) "backup"))
      (should (eq (lispm-turn-state turn) 'done))
      (should (= (length lispm-test-model-requests) 2))
      (should (lispm-turn-budget turn)))))

(ert-deftest lispm-turn-test-a-budget-abort-ends-the-turn ()
  (let ((lispm-turn-test--budget 10))
    (lispm-turn-test--with (turn sink)
        (list (append '((:type "usage" :input_tokens 90 :output_tokens 30))
                      (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"yes\"}"))
              lispm-turn-test--hello)
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-budget-exceeded))
      (lispm-turn-test--restart turn 'abort)
      (should (eq (lispm-turn-state turn) 'aborted))
      (should (= (length lispm-test-model-requests) 1)))))

;;; The condition buffer

(ert-deftest lispm-turn-test-the-condition-buffer-numbers-its-restarts ()
  (lispm-turn-test--with (turn sink)
      (list (lispm-turn-test--call "c1" "lispm_turn_test_check" "{\"ok\": \"no\"}")
            lispm-turn-test--hello)
    (let ((buffer (lispm-condition-show turn)))
      (unwind-protect
          (with-current-buffer buffer
            (should (string-match-p "^ 0: \\[RETRY\\] Send the request again" (buffer-string)))
            (should (string-match-p "^ 3: \\[EDIT-ARGS\\] Edit the arguments of lispm_turn_test_check"
                                    (buffer-string)))
            (should (string-match-p "^ 4: \\[ABORT\\]" (buffer-string)))
            (should-not (string-match-p "^ 1: " (buffer-string)))
            (dotimes (n 10)
              (should (eq (keymap-lookup lispm-condition-mode-map (number-to-string n))
                          #'lispm-condition-restart-number)))
            (should-error (let ((last-command-event ?1))
                            (call-interactively #'lispm-condition-restart-number))
                          :type 'user-error)
            (let ((last-command-event ?2))
              (call-interactively #'lispm-condition-restart-number)))
        (when (buffer-live-p buffer) (kill-buffer buffer)))
      (lispm-turn-test--settle turn)
      (should (eq (lispm-turn-state turn) 'done))
      (should (equal (lispm-turn-test--last-request-results)
                     '(("c1" . "Error: Not yes: no")))))))

(provide 'lispm-turn-test)
;;; lispm-turn-test.el ends here
