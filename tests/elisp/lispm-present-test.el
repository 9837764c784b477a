;;; lispm-present-test.el --- Tests of presentations  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each type of presentation is written as an Org link, saved, read back
;; after "a restart" (the file written, every buffer involved killed,
;; the file opened again) and followed; a reference to what is gone is
;; a `user-error' that changes nothing; each type's menu; links and
;; agent names in a message become buttons; in a session, requests,
;; stops and approvals are presentations at display time.

;;; Code:

(require 'ert)
(require 'org)
(require 'lispm-present)
(require 'lispm-ledger)
(require 'lispm-approvals)
(require 'lispm-session)
(require 'lispm-own-agent)
(require 'lispm-test-fixtures)

;;; The world: a file, an agent with a buffer, a saved session

(defvar lispm-present-test--dir nil "The test's temporary folder.")
(defvar lispm-present-test--session nil "The id of the test's saved session.")

(defun lispm-present-test--session-file (dir)
  "Write a session with turn 1 and its call c1 in DIR; return its id."
  (let* ((buffer (lispm-session-create dir "m" "own"))
         (id (buffer-local-value 'lispm-session-id buffer))
         (file (buffer-local-value 'lispm-session-file buffer)))
    (lispm-session-begin-turn buffer "[Request R1 from codex]\nfix it")
    (lispm-session-end-reply (lispm-session-begin-reply buffer))
    (lispm-session-insert-call buffer '(:id "c1" :name "edit_file" :arguments "{}"))
    (lispm-session-insert-approval buffer "c1" "edit_file notes.el")
    (lispm-session-insert-result buffer "c1" "edited")
    (lispm-session-insert-note buffer "Stopped at lispm-model-error: boom")
    (with-current-buffer buffer
      (make-directory (file-name-directory file) t)
      (write-region (point-min) (point-max) file nil 'silent)
      (set-buffer-modified-p nil))
    (kill-buffer buffer)
    id))

(defmacro lispm-present-test--with-world (&rest body)
  "Run BODY with a folder, the agent `codex' with a buffer, and a saved session.
`lispm-present-test--dir' is the folder (which holds x.txt, three
lines) and `lispm-present-test--session' the session's id."
  (declare (indent 0) (debug t))
  `(let* ((lispm-present-test--dir (file-name-as-directory
                                    (file-truename (make-temp-file "lispm-present" t))))
          (lispm-sessions-directory (expand-file-name "sessions/" lispm-present-test--dir))
          (codex-buffer (get-buffer-create "*codex terminal*")))
     (unwind-protect
         (lispm-test-with-registry
           (lispm-test-add-agent :name "codex" :folder lispm-present-test--dir
                                 :buffer codex-buffer)
           (with-temp-file (expand-file-name "x.txt" lispm-present-test--dir)
             (insert "one\ntwo\nthree\n"))
           (let ((lispm-present-test--session
                  (lispm-present-test--session-file lispm-present-test--dir)))
             ,@body))
       (dolist (buffer (buffer-list))
         (when (or (eq buffer codex-buffer)
                   (string-prefix-p lispm-present-test--dir
                                    (or (buffer-file-name buffer) "")))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory lispm-present-test--dir t))))

(defun lispm-present-test--after-restart (link)
  "Save LINK in an Org file, kill its buffer, reopen it and follow the link.
Return the buffer current after following."
  (let ((notes (expand-file-name "notes.org" lispm-present-test--dir)))
    (with-temp-file notes (insert "* Notes\nSee " link " now.\n"))
    (when (get-file-buffer notes) (kill-buffer (get-file-buffer notes)))
    (with-current-buffer (find-file-noselect notes)
      (should (derived-mode-p 'org-mode))
      (goto-char (point-min))
      (search-forward "See [[")
      (org-open-at-point)
      (current-buffer))))

(defun lispm-present-test--buffers ()
  "Return the live buffers but the logs Emacs itself may make meanwhile."
  (seq-remove (lambda (buffer)
                (string-match-p "\\`\\*\\(Async-\\)?[Nn]ative-compile-[Ll]og\\*\\'"
                                (buffer-name buffer)))
              (buffer-list)))

(defmacro lispm-present-test--changes-nothing (&rest body)
  "Assert that BODY signals a `user-error' and leaves the buffers as they were."
  (declare (indent 0) (debug t))
  `(let ((buffers (lispm-present-test--buffers))
         (current (current-buffer))
         (shown (window-buffer (selected-window))))
     (should-error (progn ,@body) :type 'user-error)
     (should (equal (lispm-present-test--buffers) buffers))
     (should (eq (current-buffer) current))
     (should (eq (window-buffer (selected-window)) shown))))

(defun lispm-present-test--ledger (entries)
  "Return a stand-in for `lispm-sidecar-request' whose ledger has ENTRIES."
  (lambda (method _params &optional _timeout)
    (should (eq method 'lispm/ledger))
    (list :entries (vconcat entries))))

(defconst lispm-present-test--entries
  '((:id 1 :time 0 :kind "request" :sender "codex" :recipient "own" :request_id "R1"
         :state "picked_up" :request_state "answered" :text "fix it")
    (:id 2 :time 1 :kind "message" :sender "own" :recipient "codex" :state "picked_up"
         :text "hello"))
  "A ledger of one request and one message.")

;;; Writing

(ert-deftest lispm-present-test-links-are-written-escaped ()
  (should (equal (lispm-present-link 'call "S/1/c1" "Edit [foo]")
                 "[[lispm:call:S/1/c1][Edit {foo}]]"))
  (should (equal (lispm-present-link 'file "/tmp/x.el::3") "[[file:/tmp/x.el::3][/tmp/x.el::3]]"))
  (should (equal (lispm-present-parse "turn:S/2") '(turn . "S/2")))
  (should-error (lispm-present-parse "nonsense:1") :type 'user-error)
  (should-error (lispm-present-link 'nonsense "1")))

;;; Each type, read back after a restart and followed

(ert-deftest lispm-present-test-file-and-buffer-after-restart ()
  (lispm-present-test--with-world
    (let ((file (expand-file-name "x.txt" lispm-present-test--dir)))
      (with-current-buffer (lispm-present-test--after-restart
                            (lispm-present-link 'file (concat file "::3")))
        (should (equal (buffer-file-name) file))
        (should (looking-at "three")))
      (should (eq (lispm-present-test--after-restart
                   (lispm-present-link 'buffer "*codex terminal*"))
                  (get-buffer "*codex terminal*"))))))

(ert-deftest lispm-present-test-agent-after-restart ()
  (lispm-present-test--with-world
    (should (eq (lispm-present-test--after-restart (lispm-present-link 'agent "codex"))
                (get-buffer "*codex terminal*")))))

(ert-deftest lispm-present-test-symbol-after-restart ()
  (lispm-present-test--with-world
    (lispm-present-test--after-restart (lispm-present-link 'symbol "lispm-present-link"))
    (with-current-buffer (help-buffer)
      (should (string-match-p "lispm-present-link is .*function" (buffer-string))))
    (lispm-present-test--after-restart (lispm-present-link 'symbol "lispm-present-types"))
    (with-current-buffer (help-buffer)
      (should (string-match-p "lispm-present-types.* variable" (buffer-string))))))

(ert-deftest lispm-present-test-turn-and-call-after-restart ()
  (lispm-present-test--with-world
    (let ((session lispm-present-test--session))
      (with-current-buffer (lispm-present-test--after-restart
                            (lispm-present-link 'turn (concat session "/1") "turn 1"))
        (should (equal lispm-session-id session))
        (should buffer-read-only)
        (should (looking-at "\\* Turn 1: \\[Request R1"))
        (kill-buffer))
      (with-current-buffer (lispm-present-test--after-restart
                            (lispm-present-link 'call (concat session "/1/c1") "Edit"))
        (should (equal lispm-session-id session))
        (should (looking-at "\\*\\*\\* Call edit_file"))
        (should (equal (org-entry-get nil "LISPM_CALL_ID") "c1"))))))

(ert-deftest lispm-present-test-a-live-call-shows-its-diff ()
  (lispm-present-test--with-world
    (let* ((session lispm-present-test--session)
           (file (expand-file-name "x.txt" lispm-present-test--dir))
           (buffer (lispm-session-open (expand-file-name (concat session ".org")
                                                         lispm-sessions-directory)))
           (change (lispm-change--make :file file :before "one\ntwo\nthree\n"
                                       :after "one\n2\nthree\n"))
           (turn (lispm-turn--make :number 1 :outcomes `(("c1" :ok t :changes (,change)))))
           (agent (lispm-own-agent--make :name "own" :kind 'lispm
                                         :folder lispm-present-test--dir :state 'running
                                         :buffer buffer :turns (list (cons 1 turn)))))
      (lispm-agents-add-actor agent)
      (with-current-buffer (lispm-present-test--after-restart
                            (lispm-present-link 'call (concat session "/1/c1")))
        (should (eq (current-buffer) buffer))
        (should (looking-at "\\*\\*\\* Call edit_file")))
      (with-current-buffer "*LispM call c1*"
        (should (derived-mode-p 'diff-mode))
        (should (string-match-p "^-two\n\\+2$" (buffer-string)))
        ;; An agent's lines may be megabytes long.
        (should-not diff-refine))
      (kill-buffer "*LispM call c1*")
      (kill-buffer buffer))))

(ert-deftest lispm-present-test-request-after-restart ()
  (lispm-present-test--with-world
    (cl-letf (((symbol-function 'lispm-sidecar-request)
               (lispm-present-test--ledger lispm-present-test--entries)))
      (with-current-buffer (lispm-present-test--after-restart (lispm-present-link 'request "R1"))
        (should (equal (buffer-name) lispm-ledger-buffer-name))
        (should (equal (mapcar #'car tabulated-list-entries) '(1)))
        (goto-char (point-min))
        (should (search-forward "R1" nil t))
        (should (equal (get-text-property (1- (point)) 'lispm-presentation)
                       '(request "R1" nil)))
        (kill-buffer)))))

(ert-deftest lispm-present-test-approval-after-restart ()
  (lispm-present-test--with-world
    (let* ((answers nil)
           (id (lispm-approvals-request (lispm-agent-get "codex") nil 'edit '(:files ("x.txt"))
                                        (lambda (answer) (push answer answers)) "edit x.txt")))
      (unwind-protect
          (with-current-buffer (lispm-present-test--after-restart
                                (lispm-present-link 'approval id))
            (should (equal (buffer-name) lispm-approvals-buffer-name))
            (should (equal (lispm-approval-id (get-text-property (point) 'lispm-approval))
                           id))
            (should (null answers)))
        (lispm-approvals-withdraw id "test over")))))

;;; What is gone

(ert-deftest lispm-present-test-dead-references-change-nothing ()
  (lispm-present-test--with-world
    (let ((session lispm-present-test--session))
      (lispm-present-test--changes-nothing (lispm-present-follow 'agent "ghost"))
      (lispm-present-test--changes-nothing (lispm-present-follow 'symbol "lispm-no-such-thing"))
      (lispm-present-test--changes-nothing
        (lispm-present-follow 'file (expand-file-name "gone.txt" lispm-present-test--dir)))
      (lispm-present-test--changes-nothing (lispm-present-follow 'buffer "*no such buffer*"))
      (lispm-present-test--changes-nothing (lispm-present-follow 'turn (concat session "/9")))
      (lispm-present-test--changes-nothing (lispm-present-follow 'call (concat session "/1/nope")))
      (lispm-present-test--changes-nothing (lispm-present-follow 'call (concat session "/9/c1")))
      (lispm-present-test--changes-nothing (lispm-present-follow 'turn "no-such-session/1"))
      (lispm-present-test--changes-nothing (lispm-present-follow 'turn "malformed"))
      (cl-letf (((symbol-function 'lispm-sidecar-request)
                 (lispm-present-test--ledger lispm-present-test--entries)))
        (lispm-present-test--changes-nothing (lispm-present-follow 'request "R9")))
      (let ((id (lispm-approvals-request (lispm-agent-get "codex") nil 'edit '(:files ("x.txt"))
                                         #'ignore "edit x.txt")))
        (lispm-approvals-allow id)
        (lispm-present-test--changes-nothing (lispm-present-follow 'approval id)))
      ;; The session's file deleted: its turns and calls are gone too.
      (delete-file (expand-file-name (concat session ".org") lispm-sessions-directory))
      (lispm-present-test--changes-nothing (lispm-present-follow 'turn (concat session "/1")))
      (lispm-present-test--changes-nothing (lispm-present-follow 'call (concat session "/1/c1")))
      ;; An agent that left.
      (lispm-agents-unregister (lispm-agent-get "codex"))
      (lispm-present-test--changes-nothing (lispm-present-follow 'agent "codex")))))

(ert-deftest lispm-present-test-a-dead-link-in-org-is-a-user-error ()
  (lispm-present-test--with-world
    (should-error (lispm-present-test--after-restart (lispm-present-link 'agent "ghost"))
                  :type 'user-error)))

;;; Menus

(defun lispm-present-test--labels (type id)
  "Return the names of the actions on the object of TYPE named ID."
  (mapcar #'car (lispm-present-actions type id)))

(ert-deftest lispm-present-test-menu-items-per-type ()
  (lispm-present-test--with-world
    (let ((inspect (and (fboundp 'lispm-inspect) '("Inspect")))
          (copy '("Copy the link" "Copy the text")))
      (should (equal (lispm-present-test--labels 'agent "codex")
                     `("Show the agent's buffer" ,@inspect "Close it" ,@copy)))
      (should (equal (lispm-present-test--labels 'symbol "car")
                     `("Describe" "Find its source" ,@copy)))
      (should (equal (lispm-present-test--labels 'turn "S/1")
                     `("Show the turn" "Revert this turn" ,@copy)))
      (should (equal (lispm-present-test--labels 'approval "A1")
                     `("Show the approval" "Allow" "Deny" ,@copy)))
      (should (equal (lispm-present-test--labels 'call "S/1/c1") `("Show the call" ,@copy)))
      (should (equal (lispm-present-test--labels 'request "R1")
                     `("Show the request in the ledger" ,@copy)))
      (should (equal (lispm-present-test--labels 'file "/tmp/x") `("Visit the file" ,@copy)))
      (lispm-agents-add-actor (lispm-own-agent--make :name "own" :kind 'lispm
                                                     :folder lispm-present-test--dir
                                                     :state 'running))
      (should (member "Message it" (lispm-present-test--labels 'agent "own")))
      ;; The mouse's menu has the same items, in order.
      (let (items)
        (map-keymap (lambda (_key item) (push (nth 1 item) items))
                    (lispm-present-menu-keymap 'turn "S/1" "turn 1"))
        (should (equal (nreverse items) (lispm-present-test--labels 'turn "S/1"))))
      ;; From the keyboard: chosen by name.
      (cl-letf (((symbol-function 'completing-read)
                 (lambda (_prompt collection &rest _)
                   (should (member "Copy the link" collection))
                   "Copy the link")))
        (lispm-present-menu 'call "S/1/c1" "Edit")
        (should (equal (car kill-ring) "[[lispm:call:S/1/c1][Edit]]")))
      ;; Reverting a turn no agent has open is a user-error.
      (lispm-present-test--changes-nothing
        (funcall (cdr (assoc "Revert this turn"
                             (lispm-present-actions 'turn
                                                    (concat lispm-present-test--session "/1")))))))))

(ert-deftest lispm-present-test-approval-menu-allows ()
  (lispm-present-test--with-world
    (let* ((answers nil)
           (id (lispm-approvals-request (lispm-agent-get "codex") nil 'edit '(:files ("x.txt"))
                                        (lambda (answer) (push answer answers)) "edit x.txt")))
      (funcall (cdr (assoc "Allow" (lispm-present-actions 'approval id))))
      (should (equal answers '((:decision allow))))
      (lispm-present-test--changes-nothing
        (funcall (cdr (assoc "Allow" (lispm-present-actions 'approval id))))))))

;;; Each type's owner says what its objects do

(defvar lispm-present-test--followed nil
  "The ids the test's own type of presentation was followed to.")

(cl-defmethod lispm-present-follow ((_type (eql 'lispm-present-test-thing)) id &optional _arg)
  "Note that the thing ID was followed."
  (push id lispm-present-test--followed))

(cl-defmethod lispm-present-type-actions ((_type (eql 'lispm-present-test-thing)) id)
  "Return the actions on the thing ID: look at it, poke it."
  (list (lispm-present-follow-action "Look at it" 'lispm-present-test-thing id)
        (cons "Poke it" #'ignore)))

(defun lispm-present-test--method-file (generic type)
  "Return the base name of the file that defines GENERIC's method for TYPE."
  (cl-loop for (file . entries) in load-history
           when (and (stringp file)
                     (cl-find-if (lambda (entry)
                                   (and (eq (car-safe entry) 'cl-defmethod)
                                        (eq (nth 1 entry) generic)
                                        (null (nth 2 entry))
                                        (equal (nth 3 entry) `(eql ',type))))
                                 entries))
           return (file-name-base file)))

(ert-deftest lispm-present-test-a-type-is-its-methods ()
  "A new type of presentation needs only its methods: dispatch finds them."
  (let ((lispm-present-types (cons 'lispm-present-test-thing lispm-present-types))
        (lispm-present-test--followed nil))
    (should (equal (mapcar #'car (lispm-present-actions 'lispm-present-test-thing "t1"))
                   '("Look at it" "Poke it" "Copy the link" "Copy the text")))
    (with-temp-buffer
      (insert (lispm-present-string 'lispm-present-test-thing "t1" "a thing"))
      (goto-char (point-min))
      (push-button)
      (should (equal lispm-present-test--followed '("t1")))
      (lispm-present-follow-at-point)
      (should (equal lispm-present-test--followed '("t1" "t1"))))
    (should-error (lispm-present-follow 'lispm-present-test-nothing "x") :type 'user-error)))

(ert-deftest lispm-present-test-each-type-lives-with-its-owner ()
  "Following LispM's objects, and their menus, are methods of their owners' files."
  (pcase-dolist (`(,type . ,owner) '((agent . "lispm-agents") (request . "lispm-ledger")
                                     (approval . "lispm-approvals") (turn . "lispm-own-agent")
                                     (call . "lispm-own-agent") (symbol . "lispm-present")))
    (should (equal (lispm-present-test--method-file 'lispm-present-follow type) owner))
    (should (equal (lispm-present-test--method-file 'lispm-present-type-actions type) owner))))

;;; Buttons in LispM's views

(defun lispm-present-test--buttons (text)
  "Return (START PRESENTATION VISIBLE) for each button in TEXT."
  (let (found (i 0))
    (while (< i (length text))
      (let ((next (or (next-single-property-change i 'lispm-presentation text) (length text))))
        (when-let* ((presentation (get-text-property i 'lispm-presentation text)))
          (push (list i presentation
                      (apply #'string (cl-loop for j from i below next
                                               unless (get-text-property j 'invisible text)
                                               collect (aref text j))))
                found))
        (setq i next)))
    (nreverse found)))

(ert-deftest lispm-present-test-links-and-agents-become-buttons ()
  (lispm-test-with-agent (_codex :folder "/tmp/")
    (let* ((text "see [[file:/tmp/x.el::3]], ask codex (not codex-2 or xcodex) about \
[[buffer:*scratch*][it]] and [[lispm:call:S/1/c1][the edit]]")
           (shown (lispm-present-text text)))
      (should (equal (lispm-present-test--buttons shown)
                     `((,(string-search "[[file" text) (file "/tmp/x.el::3" nil)
                        "file:/tmp/x.el::3")
                       (,(string-search "codex" text) (agent "codex" nil) "codex")
                       (,(string-search "[[buffer" text) (buffer "*scratch*" "it") "it")
                       (,(string-search "[[lispm" text) (call "S/1/c1" "the edit")
                        "the edit"))))
      ;; The text is still the links: copying it copies them.
      (should (equal (substring-no-properties shown) text))
      (should (eq (get (get-text-property (string-search "codex" text) 'category shown) 'type)
                  'lispm-agent)))))

(ert-deftest lispm-present-test-a-button-follows-and-offers-its-menu ()
  (lispm-present-test--with-world
    (with-temp-buffer
      (insert (lispm-present-text "ask codex"))
      (goto-char (point-min))
      (search-forward "cod")
      (should (eq (lookup-key (get-char-property (point) 'keymap) (kbd "M-o"))
                  #'lispm-present-menu-at-point))
      (push-button)
      (should (eq (window-buffer (selected-window)) (get-buffer "*codex terminal*"))))))

(ert-deftest lispm-present-test-a-missing-buffer-is-a-user-error ()
  (should-error (lispm-present-open-link "buffer" "*no such buffer*") :type 'user-error))

(ert-deftest lispm-present-test-org-exports-the-label ()
  (require 'ox-ascii)
  (should (string-match-p "the edit"
                          (org-export-string-as "See [[lispm:call:S/1/c1][the edit]]."
                                                'ascii t))))

;;; In a session, at display time

(ert-deftest lispm-present-test-session-text-becomes-presentations ()
  (lispm-present-test--with-world
    (let* ((session lispm-present-test--session)
           (buffer (lispm-session-open (expand-file-name (concat session ".org")
                                                         lispm-sessions-directory)))
           (approval-id (lispm-approvals-request (lispm-agent-get "codex") nil 'edit
                                                 '(:files ("x.txt")) #'ignore "edit x.txt"))
           (turn (lispm-turn--make
                  :number 1
                  :calls (list (lispm-turn-call-make
                                :id "c1" :approval (lispm-approvals-get approval-id)))))
           (agent (lispm-own-agent--make :name "own" :kind 'lispm
                                         :folder lispm-present-test--dir :state 'running
                                         :buffer buffer :turns (list (cons 1 turn)))))
      (lispm-agents-add-actor agent)
      (unwind-protect
          (with-current-buffer buffer
            (font-lock-ensure)
            (cl-flet ((at (string)
                        (goto-char (point-min))
                        (search-forward string)
                        (get-text-property (match-beginning 0) 'lispm-presentation)))
              (should (equal (at "R1 from") '(request "R1" nil)))
              (should (equal (at "codex]") (list 'agent "codex" nil)))
              (should (equal (at "Stopped at") (list 'turn (concat session "/1") nil)))
              ;; The headings of the turn and of its call stand for them.
              (should (equal (at "Turn 1") (list 'turn (concat session "/1") nil)))
              (should (equal (at "Call edit_file") (list 'call (concat session "/1/c1") nil)))
              (should (equal (at "edit_file notes.el") (list 'approval approval-id nil)))
              (should (eq (lookup-key (get-text-property (match-beginning 0) 'keymap)
                                      (kbd "C-c C-o"))
                          #'lispm-present-follow-at-point))
              ;; Following the stop from the keyboard shows its turn.
              (goto-char (point-min))
              (search-forward "Stopped at")
              (lispm-present-follow-at-point)
              (should (looking-at "\\* Turn 1")))
            ;; The document is unchanged: the presentations are only shown.
            (should-not (buffer-modified-p)))
        (lispm-approvals-withdraw approval-id "test over")
        (kill-buffer buffer)))))

;;; A program shown as Lisp

(ert-deftest lispm-present-test-a-program-in-a-session-is-lisp-and-misleads-no-link ()
  "A run_lisp program is fontified as Lisp; its drawer-like lines mislead no link."
  (lispm-present-test--with-world
    (let* ((buffer (lispm-session-create lispm-present-test--dir "m" "own"))
           (session (buffer-local-value 'lispm-session-id buffer))
           (program (concat "(let ((x 1))\n  (list x \"\n:PROPERTIES:\n:LISPM_TURN: 2\n"
                            ":LISPM_CALL_ID: c2\n:END:\n\"))")))
      (unwind-protect
          (progn
            (lispm-session-begin-turn buffer "one")
            (lispm-session-insert-call buffer (list :id "c1" :name "run_lisp"
                                                    :arguments (json-encode
                                                                (list :program program))))
            (lispm-session-insert-result buffer "c1" "ok")
            (lispm-session-begin-turn buffer "two")
            (lispm-session-insert-call buffer '(:id "c2" :name "read_file" :arguments "{}"))
            (with-current-buffer buffer
              (set-buffer-modified-p nil)
              (font-lock-ensure)
              (goto-char (point-min))
              (search-forward "Call run_lisp")
              (should (equal (get-text-property (match-beginning 0) 'lispm-presentation)
                             (list 'call (concat session "/1/c1") nil)))
              (search-forward "(let")
              (should (memq 'font-lock-keyword-face
                            (ensure-list (get-text-property (1+ (match-beginning 0)) 'face))))
              ;; Only shown: the document is unchanged.
              (should-not (buffer-modified-p)))
            (pcase-let ((`(,where . ,position)
                         (lispm-own-agent--turn-position session 2)))
              (with-current-buffer where
                (goto-char position)
                (should (looking-at "\\* Turn 2: two"))))
            (pcase-let ((`(,where . ,position)
                         (lispm-own-agent--call-position session 2 "c2")))
              (with-current-buffer where
                (goto-char position)
                (should (looking-at "\\*\\*\\* Call read_file")))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

(provide 'lispm-present-test)
;;; lispm-present-test.el ends here
