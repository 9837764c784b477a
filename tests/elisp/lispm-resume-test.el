;;; lispm-resume-test.el --- Tests of remembering and resuming agents  -*- lexical-binding: t; -*-

;;; Commentary:

;; The agents file (written, read back, an unclean exit told apart, a
;; malformed file set aside), the offer's three choices, and the command
;; lines that resume each CLI's session.  Nothing is started: the
;; sidecar and the agents' start are stand-ins.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defconst lispm-resume-test--dead-pid (expt 2 30)
  "A pid above any pid_max: no process has it.")

(defmacro lispm-resume-test--with-file (&rest body)
  "Run BODY with an empty registry and an agents file of its own.
The registry is outermost: its own agents file is not the test's."
  (declare (indent 0) (debug t))
  `(lispm-test-with-registry
     (let* ((dir (make-temp-file "lispm-resume-" t))
            (lispm-agents-file (expand-file-name "lispm/agents.eld" dir))
            (lispm-agents-changed-hook (list #'lispm-resume--save))
            (lispm-resume--saved 'unsaved)
            (lispm-resume--exited nil)
            (lispm-resume--offered nil))
       (unwind-protect (progn ,@body)
         (delete-directory dir t)))))

(defun lispm-resume-test--add (name kind &optional session queued)
  "Register a live agent NAME of KIND, with SESSION and QUEUED."
  (lispm-test-add-agent :name name :kind kind :folder temporary-file-directory
                        :session session :queued (or queued 0)))

(defun lispm-resume-test--write-lives (&rest lives)
  "Write LIVES to the agents file, as an earlier Emacs would have."
  (lispm-resume--write lives))

(defun lispm-resume-test--dead-life (clean &rest agents)
  "Return the entry of a dead Emacs that ran AGENTS, (NAME KIND SESSION) lists.
CLEAN says whether it exited cleanly."
  (list :emacs-pid lispm-resume-test--dead-pid :emacs-start 1.0 :clean clean
        :agents (mapcar (pcase-lambda (`(,name ,kind ,session))
                          (list :name name :kind kind :folder temporary-file-directory
                                :session session :waiting nil))
                        agents)))

(ert-deftest lispm-resume-test-the-file-is-written-and-read-back ()
  (lispm-resume-test--with-file
    (lispm-resume-test--add "claude" 'claude "session-1")
    (lispm-resume-test--add "codex" 'codex nil 2)
    (should (equal (file-modes lispm-agents-file) #o600))
    (should (equal (file-modes (file-name-directory lispm-agents-file)) #o700))
    (let ((lives (lispm-resume--read)))
      (should (equal (length lives) 1))
      (should (eql (plist-get (car lives) :emacs-pid) (emacs-pid)))
      (should-not (plist-get (car lives) :clean))
      (should (equal (mapcar (lambda (a) (list (plist-get a :name) (plist-get a :kind)
                                               (plist-get a :session) (plist-get a :waiting)))
                             (plist-get (car lives) :agents))
                     '(("claude" claude "session-1" nil) ("codex" codex nil t)))))
    ;; The session id learnt later is written; a closed agent is forgotten.
    (setf (lispm-agent-session (lispm-agent-get "codex")) "thread-1")
    (lispm-agents-unregister (lispm-agent-get "claude"))
    (should (equal (mapcar (lambda (a) (list (plist-get a :name) (plist-get a :session)))
                           (plist-get (car (lispm-resume--read)) :agents))
                   '(("codex" "thread-1"))))
    ;; Written by rename: nothing but the file is left in its folder.
    (should (equal (directory-files (file-name-directory lispm-agents-file) nil "\\`[^.]\\|\\`\\.[^.]")
                   '("agents.eld")))
    ;; This Emacs runs: its agents are not offered for resuming.
    (should-not (lispm-resume-remembered))))

(ert-deftest lispm-resume-test-an-actor-without-a-terminal-is-counted-by-name ()
  ;; M-x lispm with an own agent in the registry asked every actor for
  ;; a terminal agent's name, and failed.
  (lispm-resume-test--with-file
    (lispm-test-add-actor :name "emacs")
    (should-not (lispm-resume-remembered))))

(ert-deftest lispm-resume-test-an-unclean-exit-is-told-apart ()
  (lispm-resume-test--with-file
    (let ((sleeper (make-process :name "lispm-resume-test" :command '("sleep" "30")
                                 :noquery t)))
      (unwind-protect
          (progn
            (lispm-resume-test--write-lives
             (lispm-resume-test--dead-life nil '("claude" claude "s1") '("codex" codex "t1"))
             ;; A running Emacs's agents are its own.
             (list :emacs-pid (process-id sleeper) :emacs-start nil :clean nil
                   :agents (list (list :name "hermes" :kind 'hermes
                                       :folder temporary-file-directory :session nil))))
            (let ((remembered (lispm-resume-remembered)))
              (should (equal (mapcar (lambda (r) (plist-get r :name)) remembered)
                             '("claude" "codex")))
              (should-not (cl-some (lambda (r) (plist-get r :clean)) remembered))
              (should (lispm-resume--worth-offering remembered)))
            ;; A clean exit is not worth a prompt, unless messages were waiting.
            (lispm-resume-test--write-lives (lispm-resume-test--dead-life t '("claude" claude "s1")))
            (should (lispm-resume-remembered))
            (should-not (lispm-resume--worth-offering (lispm-resume-remembered)))
            (let ((life (lispm-resume-test--dead-life t '("claude" claude "s1"))))
              (plist-put (car (plist-get life :agents)) :waiting t)
              (lispm-resume-test--write-lives life))
            (should (lispm-resume--worth-offering (lispm-resume-remembered)))
            ;; A new agent of a remembered name replaces it.
            (lispm-resume-test--add "claude" 'claude)
            (should-not (lispm-resume-remembered))
            (should-not (cl-some (lambda (life) (not (lispm-resume--alive-p life)))
                                 (lispm-resume--read))))
        (delete-process sleeper)))))

(ert-deftest lispm-resume-test-exiting-cleanly-keeps-the-agents ()
  (lispm-resume-test--with-file
    (lispm-resume-test--add "claude" 'claude "s1")
    (lispm-resume--exit)
    ;; What happens to the terminals as Emacs goes does not change the file.
    (lispm-agents-unregister (lispm-agent-get "claude"))
    (let ((life (car (lispm-resume--read))))
      (should (plist-get life :clean))
      (should (equal (mapcar (lambda (a) (plist-get a :name)) (plist-get life :agents))
                     '("claude"))))))

(ert-deftest lispm-resume-test-a-malformed-file-is-kept-with-a-warning ()
  (dolist (text '("(:version 1 :lives ((:emacs-pid 12 :agents (" "(:version 9 :lives nil)"
                  "(:version 1 :lives ((:emacs-pid 12 :agents ((:name 7)))))"))
    (lispm-resume-test--with-file
      (make-directory (file-name-directory lispm-agents-file) t)
      (with-temp-file lispm-agents-file (insert text))
      (let ((warnings (get-buffer "*Warnings*")))
        (when warnings (kill-buffer warnings)))
      (should-error (lispm-resume--read) :type 'lispm-agents-file-malformed)
      (should-not (lispm-resume-remembered))
      ;; Set aside, not lost, and said so.
      (let ((kept (directory-files (file-name-directory lispm-agents-file) t "\\.malformed-")))
        (should (equal (length kept) 1))
        (should (equal (with-temp-buffer (insert-file-contents (car kept)) (buffer-string))
                       text))
        (with-current-buffer "*Warnings*"
          (should (string-search (file-name-nondirectory (car kept)) (buffer-string)))))
      ;; LispM goes on with a new file.
      (lispm-resume-test--add "claude" 'claude)
      (should (equal (length (lispm-resume--read)) 1)))))

(defmacro lispm-resume-test--with-stand-ins (&rest body)
  "Run BODY with the agents' start and the sidecar replaced by recorders.
`started' collects (KIND NAME RESUME) per start, `asked' each request's
method and params; the sidecar forgets every name it is asked to."
  (declare (indent 0) (debug t))
  `(let ((started nil) (asked nil))
     (cl-letf (((symbol-function 'lispm-agent-start)
                (lambda (kind folder _display name resume)
                  (ignore folder)
                  (push (list kind name resume) started)
                  (lispm-resume-test--add name kind)
                  (lispm-agent-get name)))
               ((symbol-function 'lispm-sidecar-async-request)
                (cl-function (lambda (method params &key on-success &allow-other-keys)
                               (push (list method params) asked)
                               (funcall on-success (list :forgotten (plist-get params :names)))))))
       ,@body)))

(defun lispm-resume-test--offer (key)
  "Answer the offer with KEY; return what it did: (STARTED ASKED)."
  (lispm-resume-test--write-lives
   (lispm-resume-test--dead-life nil '("claude" claude "s1") '("codex" codex "t1")))
  (setq lispm-resume--offered nil)
  (lispm-resume-test--with-stand-ins
    (cl-letf (((symbol-function 'read-multiple-choice)
               (lambda (_prompt choices &rest _) (assq key choices)))
              ((symbol-function 'completing-read-multiple)
               (lambda (&rest _) '("codex"))))
      (lispm-resume-offer)
      (list (reverse started) (reverse asked)))))

(ert-deftest lispm-resume-test-the-offer-resumes-all ()
  (lispm-resume-test--with-file
    (pcase-let ((`(,started ,asked) (lispm-resume-test--offer ?r)))
      (should (equal started '((claude "claude" "s1") (codex "codex" "t1"))))
      (should-not asked)
      (should-not (lispm-resume-remembered)))
    ;; Once per Emacs.
    (should lispm-resume--offered)))

(ert-deftest lispm-resume-test-the-offer-lets-one-choose ()
  (lispm-resume-test--with-file
    (pcase-let ((`(,started ,asked) (lispm-resume-test--offer ?c)))
      (should (equal started '((codex "codex" "t1"))))
      (should-not asked)
      ;; The one not chosen stays remembered.
      (should (equal (mapcar (lambda (r) (plist-get r :name)) (lispm-resume-remembered))
                     '("claude"))))))

(ert-deftest lispm-resume-test-the-offer-forgets ()
  (lispm-resume-test--with-file
    (pcase-let ((`(,started ,asked) (lispm-resume-test--offer ?f)))
      (should-not started)
      (should (equal asked '((lispm/agents-forget (:names ["claude" "codex"])))))
      (should-not (lispm-resume-remembered))
      (should-not (lispm-resume--read)))))

(ert-deftest lispm-resume-test-no-offer-without-an-unclean-exit ()
  (lispm-resume-test--with-file
    (lispm-resume-test--write-lives (lispm-resume-test--dead-life t '("claude" claude "s1")))
    (cl-letf (((symbol-function 'read-multiple-choice)
               (lambda (&rest _) (error "Asked after a clean exit"))))
      (lispm-resume-offer))
    (should (lispm-resume-remembered))))

(ert-deftest lispm-resume-test-resuming-names-taken-and-folders-gone ()
  (lispm-resume-test--with-file
    (lispm-resume-test--write-lives
     (lispm-resume-test--dead-life nil '("claude" claude "s1") '("codex" codex "t1")))
    (let ((life (car (lispm-resume--read))))
      (plist-put (cadr (plist-get life :agents)) :folder "/nonexistent/folder/")
      (lispm-resume--write (list life)))
    (should-error (lispm-resume-agents '("nobody")) :type 'user-error)
    (lispm-resume-test--with-stand-ins
      (should (equal (mapcar #'lispm-agent-name (lispm-resume-agents t)) '("claude")))
      (should (equal started '((claude "claude" "s1")))))))

(defun lispm-resume-test--command (kind resume)
  "Return the command of an agent of KIND that resumes RESUME."
  (let ((lispm-claude-program "sh") (lispm-codex-program "sh") (lispm-hermes-program "sh"))
    (lispm-test-with-agent (agent :kind kind :folder "/tmp/" :resume resume
                                  :launch (list :session_id "new-uuid" :claude_mcp_config "/m.json"
                                                :token_file "/t" :url "http://127.0.0.1:1/mcp"))
      (lispm-agent-command kind agent))))

(ert-deftest lispm-resume-test-each-cli-resumes-its-session ()
  (let ((claude (lispm-resume-test--command 'claude "s1")))
    (should (equal (seq-take (member "--resume" claude) 2) '("--resume" "s1")))
    (should-not (member "--session-id" claude)))
  (should (equal (seq-take (member "--session-id" (lispm-resume-test--command 'claude t)) 2)
                 '("--session-id" "new-uuid")))
  (let ((codex (lispm-resume-test--command 'codex "t1")))
    (should (equal (seq-take (member "resume" codex) 2) '("resume" "--no-daemon")))
    (should (equal (car (last codex)) "t1")))
  (should-not (member "resume" (lispm-resume-test--command 'codex t)))
  (should (equal (cdr (lispm-resume-test--command 'hermes "20260101_000000_abcdef"))
                 '("--resume" "20260101_000000_abcdef"))))

(provide 'lispm-resume-test)
;;; lispm-resume-test.el ends here
