;;; lispm-test-fixtures.el --- Agents for the tests, registered the way LispM registers them  -*- lexical-binding: t; -*-

;;; Commentary:

;; A test that needs an agent gets one through the front door: it is
;; registered by `lispm-agents-register', as `lispm-agent-start' does,
;; and it leaves by `lispm-agents-unregister', as when its terminal
;; closes; both run `lispm-agents-changed-hook'.  Nothing is launched.
;;
;; `lispm-test-with-registry' gives a test a registry of its own;
;; `lispm-test-add-agent' adds an agent to it, `lispm-test-add-actor'
;; an actor without a terminal; `lispm-test-with-agent'
;; does both for a test that needs one agent.  An agent leaves mid-test
;; by `lispm-agents-unregister'.

;;; Code:

(require 'cl-lib)
(require 'lispm-agents)

(defvar lispm-agents-file)

(defconst lispm-test--slots
  '(:state :activity :pid :buffer :port :launch :queued :session)
  "The slots of an agent that its life sets after it is registered.")

(defvar lispm-test--registry nil
  "Non-nil while a registry of a test's own is the registry.")

(defun lispm-test--call-with-registry (body)
  "Call BODY with an agent registry of its own, empty at first.
The agents still in it afterwards leave, as when their terminals close.
While BODY runs, the agents file of `lispm-resume' (when loaded) is one
of this registry's own, so that running `lispm-agents-changed-hook'
never writes the user's."
  (let* ((directory (make-temp-file "lispm-test-registry-" t))
         (lispm-agents--by-name (make-hash-table :test #'equal))
         (lispm-agents--serial 0)
         (lispm-test--registry t))
    (unwind-protect
        (cl-progv (and (boundp 'lispm-agents-file) '(lispm-agents-file))
            (list (expand-file-name "lispm/agents.eld" directory))
          (unwind-protect (funcall body)
            (mapc #'lispm-agents-unregister (lispm-agents))))
      (delete-directory directory t))))

(defmacro lispm-test-with-registry (&rest body)
  "Run BODY with an agent registry of its own, empty at first.
Agents registered in BODY that are still there at its end leave, as
when their terminals close."
  (declare (indent 0) (debug t))
  `(lispm-test--call-with-registry (lambda () ,@body)))

(defun lispm-test-add-agent (&rest keys)
  "Register an agent as `lispm-agent-start' does, without a CLI; return it.
KEYS: :kind (default `codex'), :folder (default the variable
`temporary-file-directory'), :name and :resume are passed to
`lispm-agents-register'.  Then the slots that an agent's life sets
\(:state, :activity, :pid, :buffer, :port, :launch, :queued, :session)
are set to the values KEYS give, and if any was given, the change is
announced, as the sidecar's reports would announce it.
Only in `lispm-test-with-registry': outside, an agent would stay."
  (unless lispm-test--registry
    (error "`lispm-test-add-agent' outside `lispm-test-with-registry'"))
  (cl-loop for key in keys by #'cddr
           unless (memq key (append '(:kind :folder :name :resume) lispm-test--slots))
           do (error "Not a key of `lispm-test-add-agent': %S" key))
  (let ((agent (lispm-agents-register (or (plist-get keys :kind) 'codex)
                                      (or (plist-get keys :folder) temporary-file-directory)
                                      (plist-get keys :name)
                                      (plist-get keys :resume)))
        (changed nil))
    (cl-loop for (key value) on keys by #'cddr
             when (memq key lispm-test--slots)
             do (setf (cl-struct-slot-value 'lispm-agent (intern (substring (symbol-name key) 1))
                                            agent)
                      value
                      changed t))
    (when changed
      (run-hooks 'lispm-agents-changed-hook))
    agent))

(cl-defstruct (lispm-test-actor (:include lispm-actor)
                                (:constructor lispm-test-actor--make)
                                (:copier nil))
  "An actor without a terminal, as LispM's own agent is one.")

(defun lispm-test-add-actor (&rest keys)
  "Register an actor without a terminal, by `lispm-agents-add-actor'; return it.
KEYS are slots of `lispm-actor': :name (the base of its name, default
\"emacs\"), :kind (default `lispm'), :folder (default the variable
`temporary-file-directory'), :role, :state (default `running') and
:activity.  Only in `lispm-test-with-registry'."
  (unless lispm-test--registry
    (error "`lispm-test-add-actor' outside `lispm-test-with-registry'"))
  (lispm-agents-add-actor
   (lispm-test-actor--make :name (or (plist-get keys :name) "emacs")
                           :kind (or (plist-get keys :kind) 'lispm)
                           :folder (or (plist-get keys :folder) temporary-file-directory)
                           :role (plist-get keys :role)
                           :state (or (plist-get keys :state) 'running)
                           :activity (plist-get keys :activity))))

(defmacro lispm-test-with-agent (spec &rest body)
  "Run BODY with an agent in a registry of its own.
SPEC is (VAR &rest KEYS): VAR is bound to the agent that
`lispm-test-add-agent' registers with KEYS.  Without a :folder in KEYS,
the agent works in a fresh temporary folder (a truename, with a
slash), deleted afterwards.  The agent leaves at the end, unless it
left already."
  (declare (indent 1) (debug ((symbolp &rest form) body)))
  (let ((var (car spec))
        (keys (cdr spec))
        (folder (make-symbol "folder")))
    (if (plist-member keys :folder)
        `(lispm-test-with-registry
           (let ((,var (lispm-test-add-agent ,@keys)))
             ,@body))
      `(let ((,folder (file-name-as-directory
                       (file-truename (make-temp-file "lispm-test-agent-" t)))))
         (unwind-protect
             (lispm-test-with-registry
               (let ((,var (lispm-test-add-agent :folder ,folder ,@keys)))
                 ,@body))
           (delete-directory ,folder t))))))

;;; Files

(defun lispm-test-write-file (folder name text)
  "Write TEXT to the file NAME in FOLDER, creating directories; return its name."
  (let ((file (expand-file-name name folder)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))
    file))

(defun lispm-test-read-file (file)
  "Return the text of FILE on disk."
  (with-temp-buffer
    (insert-file-contents file)
    (buffer-string)))

(defun lispm-test-remove-folder (folder)
  "Kill the buffers visiting files in FOLDER, unsaved changes dropped; delete it."
  (dolist (buffer (buffer-list))
    (when (and (buffer-file-name buffer)
               (string-prefix-p folder (buffer-file-name buffer)))
      (with-current-buffer buffer (set-buffer-modified-p nil))
      (kill-buffer buffer)))
  (delete-directory folder t))

;;; A scripted model

(defvar lispm-test-model-script nil
  "The model's answers still to give, in order: each a list of events.")

(defvar lispm-test-model-requests nil
  "The model requests `lispm-test-scripted-stream' was given, newest first.")

(defun lispm-test-scripted-stream (_model request handler)
  "Answer REQUEST with the next of `lispm-test-model-script', through HANDLER.
The events come later, from a timer, as a stream's do; with the script
used up, the answer is a short text.  Return the stream's id.  Put in
place of `lispm-model-stream' with `cl-letf'."
  (push request lispm-test-model-requests)
  (let ((events (or (pop lispm-test-model-script)
                    '((:type "text" :text "Nothing more.") (:type "done")))))
    (run-at-time 0 nil (lambda () (dolist (event events) (funcall handler event)))))
  (format "S%d" (length lispm-test-model-requests)))

(defmacro lispm-test-in-folder (&rest body)
  "Run BODY with `folder' a fresh temporary folder (a truename, with slash).
No backup files are made; buffers visiting files there are killed
afterwards, and the folder removed (`lispm-test-remove-folder')."
  (declare (indent 0) (debug t))
  `(let ((folder (file-name-as-directory
                  (file-truename (make-temp-file "lispm-test-folder" t))))
         (make-backup-files nil))
     (unwind-protect
         (progn ,@body)
       (lispm-test-remove-folder folder))))

(defmacro lispm-test-with-played-sidecar (spec &rest body)
  "Run BODY with the sidecar and the model played, not run.
SPEC is (REQUEST SENT): REQUEST is a function that answers as
`lispm-sidecar-async-request' does, SENT a variable on which each
notification is pushed as (METHOD . PARAMS).  The sidecar counts as
live; the model answers from `lispm-test-model-script'."
  (declare (indent 1) (debug ((form symbolp) body)))
  `(cl-letf (((symbol-function 'lispm-sidecar-async-request) ,(car spec))
             ((symbol-function 'lispm-sidecar-notify)
              (lambda (method params) (push (cons method params) ,(cadr spec))))
             ((symbol-function 'lispm-sidecar-live-p) (lambda () t))
             ((symbol-function 'lispm-model-stream) #'lispm-test-scripted-stream)
             ((symbol-function 'lispm-model-cancel) #'ignore))
     ,@body))

(provide 'lispm-test-fixtures)
;;; lispm-test-fixtures.el ends here
