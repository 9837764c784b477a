;;; lispm-session-commit-test.el --- A session file written whole; commits exact  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each save of a session file writes a new file and renames it over
;; the old (the file on disk is, at every moment, a whole document, the
;; last saved or the new), keeping its modes.  The importer's shell
;; gives git a commit only whole, with its file: a record Emacs did
;; not finish, or whose pinned file is gone, makes no commit.  The
;; SIGKILLs of a real Emacs are tests/python/test_crash_commits.py.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-session)

(defmacro lispm-session-commit-test--with-dirs (&rest body)
  "Run BODY with `sessions' and `project', temporary folders of its own."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-session-commit" t))))
          (sessions (file-name-as-directory (expand-file-name "sessions" root)))
          (project (file-name-as-directory (expand-file-name "project" root)))
          (lispm-sessions-directory sessions)
          (lispm-sessions--queues (make-hash-table :test #'equal))
          (lispm-sessions--warned nil))
     (ignore sessions project)
     (make-directory project t)
     (unwind-protect
         (progn ,@body)
       (lispm-sessions-wait-for-commits 30)
       (lispm-sessions-stop)
       (dolist (buffer (buffer-list))
         (when (with-current-buffer buffer (derived-mode-p 'lispm-session-mode))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory root t))))

(defun lispm-session-commit-test--bytes (file)
  "Return FILE's bytes."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defun lispm-session-commit-test--git (directory &rest args)
  "Run git with ARGS in DIRECTORY; return its output and exit status, a cons."
  (with-temp-buffer
    (let* ((default-directory directory)
           (process-environment (append '("GIT_CONFIG_NOSYSTEM=1" "GIT_CONFIG_GLOBAL=/dev/null"
                                          "GIT_AUTHOR_NAME=T" "GIT_AUTHOR_EMAIL=t@t"
                                          "GIT_COMMITTER_NAME=T" "GIT_COMMITTER_EMAIL=t@t")
                                        process-environment))
           (status (apply #'call-process "git" nil t nil args)))
      (cons (buffer-string) status))))

(defun lispm-session-commit-test--until (predicate)
  "Wait for PREDICATE to give non-nil, taking processes' output; fail after 10 s."
  (let ((deadline (+ (float-time) 10)))
    (while (not (funcall predicate))
      (when (> (float-time) deadline) (ert-fail "waited 10 s"))
      (accept-process-output nil 0.01))))

;;; A session file written whole

(ert-deftest lispm-session-commit-test-the-file-is-never-written-in-place ()
  "Each save writes another file and renames it over the session file.
At each rename the session file is still the whole document saved
last, and the new file the whole new one; its modes stay."
  (lispm-session-commit-test--with-dirs
    (let* ((lispm-sessions-git-program "/nonexistent/git")
           (buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (saved nil) (written nil) (renames 0)
           (watch-write (lambda (_start _end name &rest _)
                          (push (expand-file-name name) written)))
           (watch-rename
            (lambda (from to &rest _)
              (when (equal (expand-file-name to) file)
                (cl-incf renames)
                (should (equal (lispm-session-commit-test--bytes file) saved))
                (should (equal (lispm-session-commit-test--bytes from)
                               (with-current-buffer buffer
                                 (encode-coding-string (buffer-string) 'utf-8-unix t))))
                (should (= (file-modes from) #o640))))))
      (lispm-session-begin-turn buffer "Write é and 日本")
      (lispm-session-end-turn buffer)
      (set-file-modes file #o640)
      (setq saved (lispm-session-commit-test--bytes file))
      (advice-add 'write-region :before watch-write)
      (advice-add 'rename-file :before watch-rename)
      (unwind-protect
          (dolist (step (list (lambda () (lispm-session-insert-call
                                          buffer '(:id "c1" :name "read_file" :arguments "{}")))
                              (lambda () (lispm-session-insert-result
                                          buffer "c1" (concat "ü\n" (make-string 5000 ?r))))
                              ;; Text taken out: the file gets shorter.
                              (lambda () (with-current-buffer buffer
                                           (let ((inhibit-read-only t))
                                             (goto-char (point-min))
                                             (search-forward "Write é")
                                             (replace-match "W"))))
                              (lambda () (lispm-session-begin-turn
                                          buffer (concat "raw " (string-to-multibyte "\311"))))
                              (lambda () (lispm-session-insert-call
                                          buffer '(:id "c2" :name "read_file"
                                                   :arguments "{}")))))
            (let ((before renames))
              (funcall step)
              (lispm-session-save buffer "step")
              ;; Saved by the step itself, or by the save after it.
              (should (> renames before)))
            (setq saved (lispm-session-commit-test--bytes file))
            (should (equal saved (with-current-buffer buffer
                                   (encode-coding-string (buffer-string) 'utf-8-unix t)))))
        (advice-remove 'write-region watch-write)
        (advice-remove 'rename-file watch-rename))
      (should-not (member file written))
      (should (= (file-modes file) #o640))
      ;; Nothing of the saves is left beside it.
      (should (equal (directory-files sessions nil "\\`\\.lispm") nil)))))

;;; The importer's shell

(defun lispm-session-commit-test--import (repository input)
  "Feed INPUT, records as Emacs writes them, to the importer of REPOSITORY.
Return what it said."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert input)
    (let* ((default-directory repository)
           (process-environment (append '("GIT_CONFIG_NOSYSTEM=1" "GIT_CONFIG_GLOBAL=/dev/null")
                                        process-environment))
           (coding-system-for-read 'binary) (coding-system-for-write 'binary))
      (call-process-region (point-min) (point-max) "sh" t t nil
                           "-c" lispm-sessions--importer-script "lispm-sessions"
                           "git" "fast-import" "--quiet" "--date-format=raw")
      (buffer-string))))

(defun lispm-session-commit-test--record (n message pin &optional from)
  "Return the record of commit N with MESSAGE and the file PIN, after FROM."
  (concat "|commit refs/heads/main\n"
          (format "|committer LispM <lispm@localhost> %d +0000\n" (+ 1000 n))
          (format "|data %d\n|%s\n" (length message) message)
          (if from "|from refs/heads/main^0\n" "")
          "|M 100644 inline s.org\n"
          (format "lispm %d %s\n" n pin)))

(ert-deftest lispm-session-commit-test-only-whole-commits-reach-git ()
  "A record cut before its file, or whose file is gone, makes no commit.
Each commit made holds its own file; the repository is sound."
  (lispm-session-commit-test--with-dirs
    (let ((pins (make-temp-file "lispm-pins" t)))
      (unwind-protect
          (let ((pin (lambda (text)
                       (let ((file (make-temp-file (expand-file-name "p-" pins))))
                         (with-temp-file file (insert text))
                         file))))
            (make-directory sessions t)
            (lispm-session-commit-test--git sessions "init" "-q" "-b" "main")
            (let ((said (lispm-session-commit-test--import
                         sessions
                         (concat (lispm-session-commit-test--record 1 "turn 1" (funcall pin "one\n"))
                                 (lispm-session-commit-test--record
                                  2 "turn 2" (expand-file-name "gone" pins))
                                 (lispm-session-commit-test--record 3 "turn 3" (funcall pin "three\n"))
                                 ;; Emacs died here, the record given up to its message.
                                 "|commit refs/heads/main\n"
                                 "|committer LispM <lispm@localhost> 1004 +0000\n"
                                 "|data 6\n|turn 4\n"))))
              (should (equal said "progress lispm 1\nprogress lispm 2 lost\nprogress lispm 3\n")))
            (should (equal (car (lispm-session-commit-test--git sessions "log" "--format=%s"))
                           "turn 3\nturn 1\n"))
            (should (equal (car (lispm-session-commit-test--git sessions "show" "main:s.org"))
                           "three\n"))
            (should (equal (car (lispm-session-commit-test--git sessions "show" "main^:s.org"))
                           "one\n"))
            (should (zerop (cdr (lispm-session-commit-test--git
                                 sessions "fsck" "--full" "--strict"))))
            ;; The pins it took are removed.
            (should (equal (directory-files pins nil "\\`[^.]") nil))
            ;; A later importer goes on from the last commit made; a
            ;; record cut short before another is dropped too.
            (lispm-session-commit-test--import
             sessions (concat "|commit refs/heads/main\n|data 6\n|turn 5\n"
                              (lispm-session-commit-test--record
                               1 "turn 6" (funcall pin "six\n") t)))
            (should (equal (car (lispm-session-commit-test--git sessions "log" "--format=%s"))
                           "turn 6\nturn 3\nturn 1\n"))
            (should (equal (car (lispm-session-commit-test--git sessions "show" "main:s.org"))
                           "six\n")))
        (delete-directory pins t)))))

(ert-deftest lispm-session-commit-test-a-lost-commit-is-counted-and-said ()
  "A commit whose pinned file was removed before git took it: failed, warned.
The next commit is made on top of the last one made."
  (lispm-session-commit-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (queue nil)
           (texts nil))
      (lispm-session-begin-turn buffer "one")
      (lispm-session-end-turn buffer)
      (should (lispm-sessions-wait-for-commits 30))
      (setq queue (gethash sessions lispm-sessions--queues))
      (push (lispm-session-commit-test--bytes file) texts)
      (let ((importer (lispm-sessions--queue-importer queue)))
        (signal-process importer 'SIGSTOP)
        ;; Emacs sees it stopped: the commit waits, its pin is made.
        (lispm-session-commit-test--until (lambda () (eq (process-status importer) 'stop)))
        (lispm-session-begin-turn buffer "two")
        (lispm-session-end-turn buffer)
        (dolist (pin (directory-files (expand-file-name ".git/lispm" sessions) t "\\`[^.]"))
          (delete-file pin))
        (signal-process importer 'SIGCONT)
        (lispm-session-commit-test--until (lambda () (eq (process-status importer) 'run))))
      (lispm-session-begin-turn buffer "three")
      (lispm-session-end-turn buffer)
      (push (lispm-session-commit-test--bytes file) texts)
      (should (lispm-sessions-wait-for-commits 30))
      (should (= (lispm-sessions--queue-failed queue) 1))
      (should lispm-sessions--warned)
      (let ((name (file-name-nondirectory file)))
        (should (equal (car (lispm-session-commit-test--git sessions "log" "--format=%s"))
                       (format "session %s turn 3: three\nsession %s turn 1: one\n"
                               (buffer-local-value 'lispm-session-id buffer)
                               (buffer-local-value 'lispm-session-id buffer))))
        (should (equal (car (lispm-session-commit-test--git
                             sessions "show" (concat "HEAD:" name)))
                       (decode-coding-string (car texts) 'utf-8-unix)))
        (should (equal (car (lispm-session-commit-test--git
                             sessions "show" (concat "HEAD^:" name)))
                       (decode-coding-string (cadr texts) 'utf-8-unix)))))))

(defun lispm-session-commit-test--children (pid)
  "Return the processes whose parent is PID, as (PID . COMMAND)."
  (cl-loop for child in (list-system-processes)
           for attributes = (process-attributes child)
           when (eql (alist-get 'ppid attributes) pid)
           collect (cons child (alist-get 'comm attributes))))

(ert-deftest lispm-session-commit-test-a-stopped-git-never-blocks-emacs ()
  "With git stopped, Emacs gives the importer a few records, not a pipe's worth.
Three hundred turns end while git reads nothing: had Emacs written
them all, the shell's pipe would fill and `process-send-string' would
wait on it for ever.  Once git goes on, every commit is made, in order."
  (lispm-session-commit-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (queue nil) (git nil))
      (lispm-session-begin-turn buffer "turn 0")
      (lispm-session-end-turn buffer)
      (should (lispm-sessions-wait-for-commits 30))
      (setq queue (gethash sessions lispm-sessions--queues)
            git (car (rassoc "git" (lispm-session-commit-test--children
                                    (process-id (lispm-sessions--queue-importer queue))))))
      (should git)
      (signal-process git 'SIGSTOP)
      (unwind-protect
          (dotimes (n 300)
            (lispm-session-begin-turn buffer (format "turn %d %s" (1+ n) (make-string 400 ?w)))
            (lispm-session-end-turn buffer)
            (should (<= (length (lispm-sessions--queue-sent queue))
                        lispm-sessions--in-flight)))
        (signal-process git 'SIGCONT))
      (should (> (length (lispm-sessions--queue-pending queue)) 0))
      (should (lispm-sessions-wait-for-commits 60))
      (should (= (lispm-sessions--queue-failed queue) 0))
      (let ((subjects (split-string (car (lispm-session-commit-test--git
                                          sessions "log" "--format=%s"))
                                    "\n" t)))
        (should (= (length subjects) 301))
        (should (string-match-p " turn 301: turn 300 " (car subjects)))
        (should (string-match-p " turn 1: turn 0\\'" (car (last subjects))))))))

;;; lispm-session-commit-test.el ends here
