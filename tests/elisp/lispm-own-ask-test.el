;;; lispm-own-ask-test.el --- The own agent's ask blocks its call, and survives a restart  -*- lexical-binding: t; -*-

;;; Commentary:

;; LispM's own agent, its turns, its session and its tools run for
;; real; only the sidecar is played, at `lispm-sidecar-async-request':
;; the model's answers are scripted (`lispm-own-ask-test--script'), and
;; the link's requests (`lispm/agent-start', `lispm/ask-agent',
;; `lispm/requests') answered as the sidecar answers them, a moment
;; later.  Answers reach the agent through the real `emacs/deliver'
;; handler.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-test-fixtures)

(defvar lispm-own-ask-test--script nil
  "The model's answers still to give, oldest first: each a list of events.")

(defvar lispm-own-ask-test--model-requests nil
  "The model requests made, newest first: their params.")

(defvar lispm-own-ask-test--link nil
  "The other link requests made, newest first: (METHOD . PARAMS).")

(defvar lispm-own-ask-test--requests-answer nil
  "What `lispm/requests' answers, a plist.")

(defvar lispm-own-ask-test--asked 0
  "How many requests `lispm/ask-agent' accepted.")

(defun lispm-own-ask-test--answer (method params)
  "Return the sidecar's result of METHOD with PARAMS, or an error's text."
  (pcase method
    ('lispm/agent-start (list :launch nil))
    ('lispm/ask-agent
     (let ((id (format "R%d" (cl-incf lispm-own-ask-test--asked)))
           (to (or (plist-get params :to) (plist-get params :role))))
       (list :text (format "asked %s, request %s" to id) :request_id id :to to)))
    ('lispm/requests lispm-own-ask-test--requests-answer)
    (_ (format "no method %s here" method))))

(defun lispm-own-ask-test--sidecar (method params &rest keys)
  "Play the sidecar's answer to METHOD with PARAMS; KEYS are the callbacks."
  (if (eq method 'lispm/model-stream)
      (let ((events (or (pop lispm-own-ask-test--script)
                        '((:type "text" :text "(no script left)") (:type "done"))))
            (id (plist-get params :stream)))
        (push params lispm-own-ask-test--model-requests)
        (run-at-time 0 nil (lambda ()
                             (dolist (event events)
                               (lispm-sidecar-handle-notification
                                'lispm/model-event (append (list :stream id) event))))))
    (push (cons method params) lispm-own-ask-test--link)
    (let ((result (lispm-own-ask-test--answer method params)))
      (run-at-time 0 nil (lambda ()
                           (if (stringp result)
                               (funcall (plist-get keys :on-error) result)
                             (funcall (or (plist-get keys :on-success) #'ignore) result)))))))

(defun lispm-own-ask-test--until (predicate &optional seconds)
  "Let timers run until PREDICATE gives non-nil, or SECONDS (10) pass.
Return PREDICATE's last value."
  (let ((deadline (+ (float-time) (or seconds 10)))
        value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.01))
    value))

(defmacro lispm-own-ask-test--with (spec &rest body)
  "Run BODY with a played sidecar, a project and a registry of their own.
SPEC is (FOLDER POLICY): FOLDER is bound to the project's folder,
which holds a.txt; POLICY is the default role's rules."
  (declare (indent 1) (debug ((symbolp form) body)))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-own-ask-test" t))))
          (,(car spec) (file-name-as-directory (expand-file-name "project" root)))
          (lispm-sessions-directory (expand-file-name "sessions/" root))
          (lispm-policy-roles (list (cons 'default ,(nth 1 spec))))
          (lispm-models '(("scripted" :api anthropic :base-url "http://127.0.0.1:9"
                           :model "m")))
          (lispm-sidecar--connection nil)
          (lispm-messages--registered nil)
          (lispm-own-ask-test--script nil)
          (lispm-own-ask-test--model-requests nil)
          (lispm-own-ask-test--link nil)
          (lispm-own-ask-test--requests-answer '(:requests [] :open_to_you []))
          (lispm-own-ask-test--asked 0))
     (make-directory ,(car spec) t)
     (lispm-test-write-file ,(car spec) "a.txt" "alpha\n")
     (unwind-protect
         (cl-letf (((symbol-function 'lispm-sidecar-async-request)
                    #'lispm-own-ask-test--sidecar))
           (lispm-test-with-registry
             (unwind-protect (progn ,@body)
               (dolist (buffer (buffer-list))
                 (when (buffer-local-value 'lispm-own-agent--session-of buffer)
                   (with-current-buffer buffer (set-buffer-modified-p nil))
                   (kill-buffer buffer))))))
       (lispm-sessions-wait-for-commits 10)
       (lispm-sessions-stop)
       (lispm-test-remove-folder root))))

(defun lispm-own-ask-test--call (id name &rest arguments)
  "Return the model's event asking for the tool NAME with ARGUMENTS, its id ID."
  (list :type "tool_call" :id id :name name :arguments (json-encode arguments)))

(defun lispm-own-ask-test--agent (folder)
  "Start an own agent in FOLDER and wait until it is registered."
  (let ((agent (lispm-agent folder "scripted")))
    (should (lispm-own-ask-test--until
             (lambda () (memq agent lispm-messages--registered))))
    agent))

(defun lispm-own-ask-test--deliver (agent kind request-id text)
  "Hand AGENT the message TEXT of KIND answering REQUEST-ID, as the sidecar does.
Return what the `emacs/deliver' handler answers."
  (lispm-sidecar-dispatch-request
   'emacs/deliver (list :name (lispm-actor-name agent) :instance (lispm-actor-serial agent)
                        :text text :message_id "M1" :kind kind :sender "b"
                        :request_id request-id)))

(defun lispm-own-ask-test--asks ()
  "Return the params of the `lispm/ask-agent' requests made, oldest first."
  (reverse (mapcar #'cdr (cl-remove 'lispm/ask-agent lispm-own-ask-test--link
                                    :key #'car :test-not #'eq))))

(defun lispm-own-ask-test--tool-results (params)
  "Return the tool messages of the model request PARAMS: (ID . CONTENT)."
  (delq nil (mapcar (lambda (message)
                      (and (equal (plist-get message :role) "tool")
                           (cons (plist-get message :tool_call_id)
                                 (plist-get message :content))))
                    (append (plist-get params :messages) nil))))

(defun lispm-own-ask-test--file-text (agent)
  "Return the text of AGENT's session file on disk."
  (lispm-test-read-file (buffer-local-value 'lispm-session-file
                                            (lispm-own-agent-buffer agent))))

(defun lispm-own-ask-test--calls-of-file (agent)
  "Return each call of the last reply in AGENT's session file, read back."
  (with-temp-buffer
    (insert (lispm-own-ask-test--file-text agent))
    (let ((turn (car (last (cdr (lispm-session--parse))))))
      (plist-get (car (last (plist-get turn :steps))) :calls))))

;;; Asks of one step wait together

(ert-deftest lispm-own-ask-test-asks-of-one-step-wait-together ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder)))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :request "colour?")
                        (lispm-own-ask-test--call "c2" "read_file" :path "a.txt")
                        (lispm-own-ask-test--call "c3" "ask_agent" :role "reviewer"
                                                  :request "review a.txt")
                        '(:type "done" :stop_reason "tool_use"))
                  '((:type "text" :text "Both answered.") (:type "done"))))
      (lispm-own-agent-send agent "Ask b and a reviewer.")
      (should (lispm-own-ask-test--until
               (lambda () (equal (lispm-own-agent-waiting-requests agent) '("R1" "R2")))))
      (should (eq (lispm-actor-activity agent) 'waiting-for-reply))
      ;; Both asks went out, the one with a role without `to', and the
      ;; read between them ran while the first waited.
      (should (equal (mapcar (lambda (p) (list (plist-get p :to) (plist-get p :role)
                                               (plist-get p :text)))
                             (lispm-own-ask-test--asks))
                     '(("b" nil "colour?") (nil "reviewer" "review a.txt"))))
      (let ((turn (lispm-own-agent-turn agent)))
        (should (equal (plist-get (cdr (assoc "c2" (lispm-turn-outcomes turn))) :text)
                       "alpha\n"))
        (should-not (assoc "c1" (lispm-turn-outcomes turn)))
        (should (eq (lispm-turn-state turn) 'tools)))
      ;; The requests are on disk already, each in its call's drawer.
      (should (equal (mapcar (lambda (call) (plist-get call :request))
                             (lispm-own-ask-test--calls-of-file agent))
                     '("R1" nil "R2")))
      ;; The second answer comes first; each lands in its own call.
      (should (equal (lispm-own-ask-test--deliver
                      agent "reply" "R2" "[Reply from reviewer to request R2]\nlooks fine")
                     '(:taken t)))
      (should (equal (lispm-own-agent-waiting-requests agent) '("R1")))
      (should (eq (lispm-actor-activity agent) 'waiting-for-reply))
      (should (= (length lispm-own-ask-test--model-requests) 1))
      (lispm-own-ask-test--deliver agent "notice" "R1"
                                   "b ended without replying to request R1.")
      (should (lispm-own-ask-test--until (lambda () (eq (lispm-actor-activity agent) 'idle))))
      (should (equal (lispm-own-ask-test--tool-results (car lispm-own-ask-test--model-requests))
                     '(("c1" . "Error: b ended without replying to request R1.")
                       ("c2" . "alpha\n")
                       ("c3" . "[Reply from reviewer to request R2]\nlooks fine"))))
      (should (eq (lispm-turn-state (cdr (car (lispm-own-agent-turns agent)))) 'done))
      ;; Neither answer became input: the agent had one turn.
      (should (null (lispm-own-agent-pending agent)))
      (should (= (length (lispm-own-agent-turns agent)) 1))
      (should (string-search "looks fine" (lispm-own-ask-test--file-text agent))))))

(ert-deftest lispm-own-ask-test-a-call-after-a-waiting-call-waits ()
  ;; The read waits for the user's approval: the ask after it is not sent.
  (lispm-own-ask-test--with (folder '((read ask) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder)))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "read_file" :path "a.txt")
                        (lispm-own-ask-test--call "c2" "ask_agent" :to "b" :request "x?")
                        '(:type "done"))))
      (lispm-own-agent-send agent "Read, then ask.")
      (should (lispm-own-ask-test--until
               (lambda () (eq (lispm-actor-activity agent) 'waiting-for-approval))))
      (accept-process-output nil 0.05)
      (should (null (lispm-own-ask-test--asks)))
      (let ((call (car (lispm-turn-calls (lispm-own-agent-turn agent)))))
        (lispm-approvals-allow (lispm-turn-call-approval call)))
      (should (lispm-own-ask-test--until
               (lambda () (equal (lispm-own-agent-waiting-requests agent) '("R1")))))
      (should (= (length (lispm-own-ask-test--asks)) 1))
      (should (eq (lispm-actor-activity agent) 'waiting-for-reply)))))

(ert-deftest lispm-own-ask-test-exactly-one-of-to-and-role ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder)))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :role "reviewer"
                                                  :request "x?")
                        (lispm-own-ask-test--call "c2" "ask_agent" :request "y?")
                        '(:type "done"))
                  '((:type "text" :text "I see.") (:type "done"))))
      (lispm-own-agent-send agent "Ask badly.")
      (should (lispm-own-ask-test--until (lambda () (eq (lispm-actor-activity agent) 'idle))))
      (should (null (lispm-own-ask-test--asks)))
      ;; The model gets the mistake as the result, and the turn goes on.
      (let* ((results (lispm-own-ask-test--tool-results (car lispm-own-ask-test--model-requests)))
             (both (cdr (assoc "c1" results)))
             (neither (cdr (assoc "c2" results))))
        (should (string-match-p "\\`Error: give exactly one of to .* and role .*, not both\\'"
                                both))
        (should (string-match-p "not neither\\'" neither)))
      (should (eq (lispm-turn-state (cdr (car (lispm-own-agent-turns agent)))) 'done)))))

;;; Ways out of a wait

(ert-deftest lispm-own-ask-test-interrupt-ends-the-wait-and-a-late-answer-is-input ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder)))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :request "x?")
                        '(:type "done"))
                  '((:type "text" :text "Thanks for the reply.") (:type "done"))))
      (lispm-own-agent-send agent "Ask b.")
      (should (lispm-own-ask-test--until (lambda () (lispm-own-agent-waiting-requests agent))))
      (with-current-buffer (lispm-own-agent-buffer agent)
        (lispm-own-agent-interrupt))
      (let ((turn (lispm-own-agent-turn agent)))
        (should (eq (lispm-turn-state turn) 'stopped))
        (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-interrupted))
        (should (null (lispm-own-agent-waiting-requests agent)))
        (should (string-prefix-p
                 "Interrupted by the user while waiting for the answer to request R1"
                 (plist-get (cdr (assoc "c1" (lispm-turn-outcomes turn))) :error)))
        (lispm-turn-restart turn 'abort))
      (should (eq (lispm-actor-activity agent) 'idle))
      ;; The request stayed open: its answer, come later, is input.
      (lispm-own-ask-test--deliver agent "reply" "R1" "[Reply from b to request R1]\nlate")
      (should (lispm-own-ask-test--until
               (lambda () (= (length lispm-own-ask-test--model-requests) 2))))
      (should (equal (plist-get (car (last (append (plist-get (car lispm-own-ask-test--model-requests)
                                                               :messages)
                                                    nil)))
                                :content)
                     "[Reply from b to request R1]\nlate"))
      (should (lispm-own-ask-test--until (lambda () (eq (lispm-actor-activity agent) 'idle))))
      (should (= (length (lispm-own-agent-turns agent)) 2)))))

(ert-deftest lispm-own-ask-test-closing-the-session-ends-the-wait ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder)))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :request "x?")
                        '(:type "done"))))
      (lispm-own-agent-send agent "Ask b.")
      (should (lispm-own-ask-test--until (lambda () (lispm-own-agent-waiting-requests agent))))
      (let ((buffer (lispm-own-agent-buffer agent)))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer))
      (should (null (lispm-own-agent-waiting-requests agent)))
      (should-not (lispm-agent-live-p agent))
      (should-not (memq agent lispm-messages--registered))
      ;; Nothing of it takes answers any more.
      (should-error (lispm-own-ask-test--deliver agent "reply" "R1" "[Reply]\nx")
                    :type 'jsonrpc-error)
      (should (= (length lispm-own-ask-test--model-requests) 1)))))

;;; A restart

(ert-deftest lispm-own-ask-test-a-reopened-session-waits-again ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow) (edit ask)))
    (let* ((first (lispm-own-ask-test--agent folder))
           (file (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer first))))
      ;; The earlier Emacs: two asks wait and an edit waits for approval
      ;; when it ends.
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :request "word?")
                        (lispm-own-ask-test--call "c2" "ask_agent" :to "c" :request "number?")
                        (lispm-own-ask-test--call "c3" "edit_file" :path "a.txt"
                                                  :old "alpha" :new "beta")
                        '(:type "done"))))
      (lispm-own-agent-send first "Ask b and c, and edit.")
      (should (lispm-own-ask-test--until
               (lambda () (equal (lispm-own-agent-waiting-requests first) '("R1" "R2")))))
      (let ((saved (lispm-own-ask-test--file-text first)))
        ;; It dies: the file stays as saved when the asks were accepted.
        (let ((buffer (lispm-own-agent-buffer first)))
          (with-current-buffer buffer (set-buffer-modified-p nil))
          (kill-buffer buffer))
        (with-temp-file file (insert saved)))
      (setq lispm-own-ask-test--link nil
            lispm-own-ask-test--model-requests nil
            lispm-own-ask-test--script
            (list '((:type "text" :text "The word and the number.") (:type "done"))
                  '((:type "text" :text "Done for claude.") (:type "done")))
            lispm-own-ask-test--requests-answer
            (list :requests
                  (vector (list :request_id "R1" :asker "emacs" :asked "b" :state "answered"
                                :reply "xyzzy" :notice nil)
                          (list :request_id "R2" :asker "emacs" :asked "c" :state "open"
                                :reply nil :notice nil))
                  :open_to_you
                  (vector (list :request_id "R7" :asker "claude"
                                :text "[Request R7 from claude]\nstatus?"))))
      (let ((agent (lispm-own-agent-resume file)))
        (should (equal (lispm-actor-name agent) "emacs"))
        ;; Registered to resume, then asked the ledger about its requests.
        (should (lispm-own-ask-test--until
                 (lambda () (assq 'lispm/requests lispm-own-ask-test--link))))
        (let ((start (cdr (assq 'lispm/agent-start lispm-own-ask-test--link))))
          (should (eq (plist-get start :resume) t))
          (should (equal (plist-get start :name) "emacs")))
        (should (equal (plist-get (cdr (assq 'lispm/requests lispm-own-ask-test--link)) :ids)
                       ["R1" "R2"]))
        (should (lispm-own-ask-test--until
                 (lambda () (equal (lispm-own-agent-waiting-requests agent) '("R2")))))
        (let ((turn (lispm-own-agent-turn agent)))
          (should (= (lispm-turn-number turn) 1))
          (should (eq (lispm-turn-state turn) 'tools))
          (should (eq (lispm-actor-activity agent) 'waiting-for-reply))
          (should (equal (plist-get (cdr (assoc "c1" (lispm-turn-outcomes turn))) :text)
                         "[Reply from b to request R1]\nxyzzy"))
          ;; The edit never ran: its result says so.
          (should (equal (plist-get (cdr (assoc "c3" (lispm-turn-outcomes turn))) :text)
                         lispm-session-not-run-result))
          ;; What claude asked of it waits for the turn's end.
          (should (equal (lispm-own-agent-pending agent)
                         '("[Request R7 from claude]\nstatus?")))
          ;; R1's answer, delivered too, is not taken twice.
          (lispm-own-ask-test--deliver agent "reply" "R1" "[Reply from b to request R1]\nxyzzy")
          (should (equal (lispm-own-agent-pending agent)
                         '("[Request R7 from claude]\nstatus?")))
          (should (null lispm-own-ask-test--model-requests))
          (lispm-own-ask-test--deliver agent "reply" "R2" "[Reply from c to request R2]\n42")
          (should (lispm-own-ask-test--until
                   (lambda () (= (length lispm-own-ask-test--model-requests) 2))))
          (should (eq (lispm-turn-state turn) 'done))
          ;; The model got the turn's conversation and each call's result.
          (let ((params (cadr lispm-own-ask-test--model-requests)))
            (should (equal (plist-get (aref (plist-get params :messages) 0) :content)
                           "Ask b and c, and edit."))
            (should (equal (lispm-own-ask-test--tool-results params)
                           `(("c1" . "[Reply from b to request R1]\nxyzzy")
                             ("c2" . "[Reply from c to request R2]\n42")
                             ("c3" . ,lispm-session-not-run-result)))))
          ;; Then claude's request is a turn of its own.
          (should (equal (plist-get (car (last (append (plist-get (car lispm-own-ask-test--model-requests)
                                                                   :messages)
                                                        nil)))
                                    :content)
                         "[Request R7 from claude]\nstatus?"))
          (should (lispm-own-ask-test--until (lambda () (eq (lispm-actor-activity agent) 'idle))))
          (let ((text (lispm-own-ask-test--file-text agent)))
            (should (string-search "xyzzy" text))
            (should (string-search "Done for claude." text))))))))

(ert-deftest lispm-own-ask-test-a-wait-on-an-agent-not-running-says-so ()
  ;; Reopened after a crash, emacs waits on R1 to claude, which runs in
  ;; no Emacs (neither resumed nor forgotten): no answer can come until
  ;; it is.  The session, the agent list's reason and the mode line say
  ;; so, and stop saying so once claude runs again.
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let* ((first (lispm-own-ask-test--agent folder))
           (file (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer first))))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "claude" :request "x?")
                        '(:type "done"))))
      (lispm-own-agent-send first "Ask claude.")
      (should (lispm-own-ask-test--until
               (lambda () (equal (lispm-own-agent-waiting-requests first) '("R1")))))
      (let ((saved (lispm-own-ask-test--file-text first)))
        (let ((buffer (lispm-own-agent-buffer first)))
          (with-current-buffer buffer (set-buffer-modified-p nil))
          (kill-buffer buffer))
        (with-temp-file file (insert saved)))
      (setq lispm-own-ask-test--requests-answer
            (list :requests (vector (list :request_id "R1" :asker "emacs" :asked "claude"
                                          :state "open" :reply nil :notice nil))
                  :open_to_you []))
      (let ((agent (lispm-own-agent-resume file)))
        (should (lispm-own-ask-test--until
                 (lambda () (assq 'no-answer (lispm-notice-reasons agent)))))
        (should (equal (lispm-actor-awaiting-absent agent) '(("R1" . "claude"))))
        (should (equal (cdr (assq 'no-answer (lispm-notice-reasons agent)))
                       "R1 waits on claude, which is not running"))
        (should (eq (lispm-actor-activity agent) 'waiting-for-reply))
        (should (string-search "lispm-resume-agents"
                               (with-current-buffer (lispm-own-agent-buffer agent)
                                 (buffer-string))))
        (should (string-search "needs you" lispm-notice-mode-line))
        ;; claude runs again: its answer can come, nothing needs the user.
        (lispm-test-add-agent :kind 'claude :name "claude")
        (should-not (lispm-actor-awaiting-absent agent))
        (should-not (lispm-notice-reasons agent))))))

(ert-deftest lispm-own-ask-test-a-taken-name-does-not-resume ()
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let* ((first (lispm-own-ask-test--agent folder))
           (file (buffer-local-value 'lispm-session-file (lispm-own-agent-buffer first))))
      (setq lispm-own-ask-test--script
            (list (list (lispm-own-ask-test--call "c1" "ask_agent" :to "b" :request "x?")
                        '(:type "done"))))
      (lispm-own-agent-send first "Ask b.")
      (should (lispm-own-ask-test--until (lambda () (lispm-own-agent-waiting-requests first))))
      (let ((saved (lispm-own-ask-test--file-text first)))
        (let ((buffer (lispm-own-agent-buffer first)))
          (with-current-buffer buffer (set-buffer-modified-p nil))
          (kill-buffer buffer))
        (with-temp-file file (insert saved)))
      ;; Another agent has the name now.
      (lispm-own-ask-test--agent folder)
      (setq lispm-own-ask-test--link nil)
      (let ((agent (lispm-own-agent-resume file)))
        (should (equal (lispm-actor-name agent) "emacs-2"))
        (should (lispm-own-ask-test--until (lambda () (memq agent lispm-messages--registered))))
        (should (eq (plist-get (cdr (assq 'lispm/agent-start lispm-own-ask-test--link)) :resume)
                    :json-false))
        (should-not (assq 'lispm/requests lispm-own-ask-test--link))
        (should (null (lispm-own-agent-turn agent)))))))

(ert-deftest lispm-own-ask-test-a-request-handed-over-is-not-given-again ()
  ;; After a restart the queue may hand over a request before the ledger's
  ;; answer lists it among those an earlier Emacs took: it is one input.
  (lispm-own-ask-test--with (folder '((read allow) (message allow)))
    (let ((agent (lispm-own-ask-test--agent folder))
          (text "[Request R7 from claude]\nstatus?"))
      (setq lispm-own-ask-test--script
            (list '((:type "text" :text "Working.") (:type "done"))
                  '((:type "text" :text "Other.") (:type "done")))
            lispm-own-ask-test--requests-answer
            (list :requests []
                  :open_to_you (vector (list :request_id "R7" :asker "claude" :text text)
                                       (list :request_id "R8" :asker "claude"
                                             :text "[Request R8 from claude]\nmore?"))))
      (should (eq (plist-get (lispm-own-ask-test--deliver agent "request" "R7" text) :taken) t))
      (lispm-own-agent--resumed agent '(:ok t))
      (should (lispm-own-ask-test--until
               (lambda () (= (length lispm-own-ask-test--model-requests) 2))))
      (should (lispm-own-ask-test--until (lambda () (eq (lispm-actor-activity agent) 'idle))))
      (let ((prompts (mapcar (lambda (params)
                               (plist-get (car (last (append (plist-get params :messages) nil)))
                                          :content))
                             (reverse lispm-own-ask-test--model-requests))))
        (should (equal prompts (list text "[Request R8 from claude]\nmore?")))))))

(provide 'lispm-own-ask-test)
;;; lispm-own-ask-test.el ends here
