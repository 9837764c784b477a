;;; lispm-messages-test.el --- Tests of messaging for actors in Emacs  -*- lexical-binding: t; -*-

;;; Commentary:

;; The first tests run the real sidecar (the Python in
;; `LISPM_SIDECAR_PYTHON'): two actors without a terminal, registered
;; with it, send, ask and reply through the tools and the pipeline, and
;; receive what is due through `emacs/deliver' while they are idle.  The
;; last ones call the `emacs/deliver' handler as the connection does.

;;; Code:

(require 'ert)
(require 'lispm-messages)
(require 'lispm-calls)
(require 'lispm-test-fixtures)

(cl-defstruct (lispm-messages-test-actor (:include lispm-actor)
                                         (:constructor lispm-messages-test-actor--make)
                                         (:copier nil))
  "An actor that keeps what it is given."
  (inbox nil :documentation "The messages taken, newest first: (TEXT . MESSAGE).")
  (take t :documentation "Whether it takes a message."))

(cl-defmethod lispm-actor-deliver ((actor lispm-messages-test-actor) text message)
  "Keep TEXT and MESSAGE in ACTOR's inbox, if it takes messages."
  (when (lispm-messages-test-actor-take actor)
    (push (cons text message) (lispm-messages-test-actor-inbox actor))
    t))

(defun lispm-messages-test--until (predicate &optional seconds)
  "Let the link run until PREDICATE returns non-nil, or SECONDS (10) pass.
Return PREDICATE's last value."
  (let ((deadline (+ (float-time) (or seconds 10)))
        value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    value))

(defun lispm-messages-test--actor (name)
  "Register an idle actor without a terminal, based on NAME; return it."
  (lispm-agents-add-actor
   (lispm-messages-test-actor--make :name name :kind 'lispm :folder temporary-file-directory
                                    :state 'running :activity 'idle)))

(defun lispm-messages-test--register (actor)
  "Register ACTOR with the sidecar and wait for it."
  (let (outcome)
    (lispm-messages-register actor (lambda (o) (setq outcome o)))
    (should (lispm-messages-test--until (lambda () outcome)))
    (should (plist-get outcome :ok))))

(defun lispm-messages-test--call (actor tool &rest args)
  "Call TOOL with ARGS as ACTOR through the pipeline; wait for the outcome."
  (let (outcome)
    (lispm-calls-invoke actor tool args (lambda (o) (setq outcome o)))
    (should (lispm-messages-test--until (lambda () outcome)))
    outcome))

(defun lispm-messages-test--wait-outcome (fn &rest args)
  "Call FN with ARGS and a callback; wait for and return the outcome."
  (let (outcome)
    (apply fn (append args (list (lambda (o) (setq outcome o)))))
    (should (lispm-messages-test--until (lambda () outcome)))
    outcome))

(defmacro lispm-messages-test--with-sidecar (&rest body)
  "Run BODY with a registry and a real sidecar of their own."
  (declare (indent 0) (debug t))
  `(let ((lispm-sidecar--connection nil)
         (lispm-sidecar--deaths nil)
         (lispm-messages--registered nil))
     (unwind-protect
         (lispm-test-with-registry ,@body)
       (lispm-sidecar-stop))))

(defun lispm-messages-test--inbox (actor)
  "Return the texts ACTOR took, oldest first."
  (reverse (mapcar #'car (lispm-messages-test-actor-inbox actor))))

(ert-deftest lispm-messages-test-ask-and-reply-between-actors-in-emacs ()
  (lispm-messages-test--with-sidecar
    (let ((asker (lispm-messages-test--actor "emacs"))
          (asked (lispm-messages-test--actor "reviewer")))
      (lispm-messages-test--register asker)
      (lispm-messages-test--register asked)
      ;; The sidecar knows both, without a server.
      (let ((served (plist-get (lispm-sidecar-request 'lispm/agents nil) :agents)))
        (should (equal (sort (mapcar (lambda (a) (plist-get a :kind)) served) #'string<)
                       '("lispm" "lispm")))
        (should (cl-every (lambda (a) (null (plist-get a :port))) served)))
      (let* ((outcome (lispm-messages-test--call asker "ask_agent"
                                                 :to "reviewer" :request "which file?"))
             (id (and (string-match "\\`asked reviewer, request \\(R[0-9]+\\)\\'"
                                    (plist-get outcome :text))
                      (match-string 1 (plist-get outcome :text)))))
        (should (plist-get outcome :ok))
        (should id)
        ;; The asked actor is idle: the request is handed to it.
        (should (lispm-messages-test--until
                 (lambda () (lispm-messages-test-actor-inbox asked))))
        (pcase-let ((`(,text . ,message) (car (lispm-messages-test-actor-inbox asked))))
          (should (string-prefix-p (format "[Request %s from emacs]\nwhich file?\n\n" id)
                                   text))
          (should (equal (plist-get message :kind) "request"))
          (should (equal (plist-get message :sender) "emacs"))
          (should (equal (plist-get message :request_id) id)))
        ;; Its reply, through the tool, reaches the asker.
        (should (equal (lispm-messages-test--call asked "reply" :request id :text "notes.el")
                       (list :ok t :text (format "replied to emacs, request %s" id)
                             :changes nil)))
        (should (lispm-messages-test--until
                 (lambda () (lispm-messages-test-actor-inbox asker))))
        (should (equal (lispm-messages-test--inbox asker)
                       (list (format "[Reply from reviewer to request %s]\nnotes.el" id))))
        ;; Asked directly, the outcome names the request apart.
        (let* ((direct (lispm-messages-test--wait-outcome
                        #'lispm-messages-ask asker "reviewer" "and this?"))
               (other (plist-get direct :request_id)))
          (should (string-match-p "\\`R[0-9]+\\'" other))
          (should-not (equal other id))
          (should (equal direct (list :ok t :text (format "asked reviewer, request %s" other)
                                      :request_id other :to "reviewer"))))
        ;; Answered once: a second reply is refused with the sidecar's reason.
        (let ((again (lispm-messages-test--wait-outcome
                      #'lispm-messages-reply asked id "again")))
          (should-not (plist-get again :ok))
          (should (string-search id (plist-get again :error)))
          (should (eq (car (plist-get again :condition)) 'lispm-message-failed)))))))

(ert-deftest lispm-messages-test-a-busy-actor-gets-its-message-once-idle ()
  (lispm-messages-test--with-sidecar
    (let ((sender (lispm-messages-test--actor "emacs"))
          (receiver (lispm-messages-test--actor "emacs")))
      (should (equal (lispm-actor-name receiver) "emacs-2"))
      (lispm-messages-test--register sender)
      (lispm-messages-test--register receiver)
      (setf (lispm-actor-activity receiver) 'running-tool)
      (lispm-messages-report-activity receiver)
      (should (equal (lispm-messages-test--wait-outcome
                      #'lispm-messages-send sender "emacs-2" "hello")
                     '(:ok t :text "sent to emacs-2")))
      (should-not (lispm-messages-test--until
                   (lambda () (lispm-messages-test-actor-inbox receiver)) 1))
      (setf (lispm-actor-activity receiver) 'idle)
      (lispm-messages-report-activity receiver)
      (should (lispm-messages-test--until
               (lambda () (lispm-messages-test-actor-inbox receiver))))
      (should (equal (lispm-messages-test--inbox receiver) '("[Message from emacs]\nhello"))))))

(ert-deftest lispm-messages-test-refusals-are-failed-outcomes ()
  (lispm-messages-test--with-sidecar
    (let ((actor (lispm-messages-test--actor "emacs"))
          (other (lispm-messages-test--actor "reviewer")))
      (lispm-messages-test--register actor)
      (lispm-messages-test--register other)
      (let ((unknown (lispm-messages-test--call actor "send_message" :to "nobody" :text "hi")))
        (should-not (plist-get unknown :ok))
        (should (equal (plist-get unknown :error)
                       "no agent named 'nobody'; the other live agents: reviewer"))
        (should (equal (plist-get unknown :condition)
                       (list 'lispm-message-failed (plist-get unknown :error)
                             'lispm/send-message))))
      (let ((to-self (lispm-messages-test--wait-outcome
                      #'lispm-messages-send actor "emacs" "me")))
        (should (string-search "cannot send a message to itself" (plist-get to-self :error))))
      ;; An actor that leaves the registry leaves the sidecar too.
      (lispm-agents-unregister other)
      (should (lispm-messages-test--until
               (lambda ()
                 (let ((outcome (lispm-messages-test--wait-outcome
                                 #'lispm-messages-send actor "reviewer" "still there?")))
                   (and (not (plist-get outcome :ok))
                        (string-search "no agent named 'reviewer'"
                                       (plist-get outcome :error))))))))))

(ert-deftest lispm-messages-test-a-restarted-sidecar-gets-the-actors-back ()
  (lispm-messages-test--with-sidecar
    (let ((sender (lispm-messages-test--actor "emacs"))
          (receiver (lispm-messages-test--actor "reviewer")))
      (lispm-messages-test--register sender)
      (lispm-messages-test--register receiver)
      (let ((old-pid (lispm-sidecar-pid)))
        (signal-process old-pid 'SIGKILL)
        (should (lispm-messages-test--until
                 (lambda () (and (lispm-sidecar-live-p)
                                 (not (eql (lispm-sidecar-pid) old-pid))
                                 (= (length (plist-get (lispm-sidecar-request 'lispm/agents nil)
                                                       :agents))
                                    2)))
                 15)))
      ;; Both are back, and the receiver's idleness with them.
      (should (equal (lispm-messages-test--wait-outcome
                      #'lispm-messages-send sender "reviewer" "after the restart")
                     '(:ok t :text "sent to reviewer")))
      (should (lispm-messages-test--until
               (lambda () (lispm-messages-test-actor-inbox receiver))))
      (should (equal (lispm-messages-test--inbox receiver)
                     '("[Message from emacs]\nafter the restart"))))))

(ert-deftest lispm-messages-test-deliver-goes-to-the-registered-actor-it-names ()
  (lispm-test-with-registry
    (let* ((lispm-messages--registered nil)
           (actor (lispm-messages-test--actor "emacs"))
           (plain (lispm-test-add-actor :name "plain"))
           (params (list :name "emacs" :instance (lispm-actor-serial actor)
                         :text "[Message from codex]\nhi" :message_id 7 :kind "message"
                         :sender "codex" :request_id nil)))
      ;; Not registered with the sidecar: no one here takes its messages.
      (should (eq (car (should-error (lispm-sidecar-dispatch-request 'emacs/deliver params)
                                     :type 'jsonrpc-error))
                  'jsonrpc-error))
      (push actor lispm-messages--registered)
      (push plain lispm-messages--registered)
      (should (equal (lispm-sidecar-dispatch-request 'emacs/deliver params) '(:taken t)))
      (should (equal (car (lispm-messages-test-actor-inbox actor))
                     (cons "[Message from codex]\nhi" params)))
      (setf (lispm-messages-test-actor-take actor) nil)
      (should (equal (lispm-sidecar-dispatch-request 'emacs/deliver params)
                     '(:taken :json-false)))
      ;; An earlier actor of the same name is not this one.
      (should-error (lispm-sidecar-dispatch-request
                     'emacs/deliver (plist-put (copy-sequence params) :instance 999))
                    :type 'jsonrpc-error)
      ;; The default method takes nothing.
      (should (equal (lispm-sidecar-dispatch-request
                      'emacs/deliver (list :name "plain" :instance (lispm-actor-serial plain)
                                           :text "x"))
                     '(:taken :json-false))))))

(ert-deftest lispm-messages-test-tools-are-message-tools ()
  (pcase-dolist (`(,tool . ,args) '(("send_message" :to "codex" :text "t")
                                     ("ask_agent" :to "codex" :request "r")
                                     ("reply" :request "R1" :text "t")))
    (should (eq (plist-get (lispm-tool-target
                            tool (lispm-test-actor--make :name "emacs" :folder "/tmp/") args)
                           :kind)
                'message)))
  ;; Exactly one of to and role, which the tool checks.
  (should (equal (plist-get (lispm-tool-schema "ask_agent") :required) ["request"]))
  (should (equal (sort (hash-table-keys (plist-get (lispm-tool-schema "ask_agent") :properties))
                       #'string<)
                 '("request" "role" "to")))
  (should (equal (plist-get (lispm-tool-schema "reply") :required) ["request" "text"])))

(provide 'lispm-messages-test)
;;; lispm-messages-test.el ends here
