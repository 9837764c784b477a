;;; lispm-sandbox-test.el --- Shell commands confined by bubblewrap  -*- lexical-binding: t; -*-

;;; Commentary:

;; run_shell, with the real bubblewrap, against what an agent's command
;; may try: writing outside its folder, reading ~/.ssh (its folder is
;; $HOME itself, the worst case), its project's .git, a loopback
;; server, Emacs's environment through /proc, a child left running.
;; Each is stopped, with a result the model can read; the user widens
;; one command from its approval (the network, or no sandbox).

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-sandbox)
(require 'lispm-test-fixtures)

(defmacro lispm-sandbox-test--with-home (&rest body)
  "Run BODY with `home' a fake $HOME holding keys, and `agent' working in it.
HOME is the environment's, so ~ is that folder; ~/.ssh/id_test,
~/.netrc and the environment's secret MY_SERVICE_TOKEN are there to be
stolen."
  (declare (indent 0) (debug t))
  `(let* ((home (file-name-as-directory
                 (file-truename (make-temp-file "lispm-sandbox-home" t))))
          (process-environment (append (list (concat "HOME=" (directory-file-name home))
                                             "MY_SERVICE_TOKEN=tok-0123456789abcdef"
                                             "GH_PAT=ghp_0123456789abcdefghij0123456789abcdef")
                                       process-environment))
          (lispm-secrets--environment-cache nil))
     (make-directory (expand-file-name ".ssh" home))
     (with-temp-file (expand-file-name ".ssh/id_test" home) (insert "PRIVATE KEY\n"))
     (with-temp-file (expand-file-name ".netrc" home) (insert "machine x password hunter2\n"))
     (unwind-protect
         (lispm-test-with-agent (agent :folder home)
           (ignore agent)
           ,@body)
       (lispm-test-remove-folder home))))

(defun lispm-sandbox-test--run (agent command)
  "Run COMMAND with run_shell as AGENT; return the result's text or error."
  (let ((result (lispm-tools-call "run_shell" agent (list :command command) 30)))
    (or (plist-get result :text) (plist-get result :error))))

(ert-deftest lispm-sandbox-test-bubblewrap-is-here ()
  ;; The tests below mean something only with bwrap: make test installs it.
  (should (lispm-sandbox-bwrap)))

(ert-deftest lispm-sandbox-test-the-folder-and-nothing-else-is-writable ()
  (lispm-sandbox-test--with-home
    (let* ((project (expand-file-name "project/" home))
           (outside (expand-file-name "outside.txt" home)))
      (make-directory (expand-file-name ".git" project) t)
      (lispm-test-with-agent (worker :folder project)
        (let ((text (lispm-sandbox-test--run
                     worker (format "echo in > inside.txt; echo out > %s; echo hook > .git/hook; \
echo x > ~/.bashrc; echo tmp > /tmp/t && cat /tmp/t"
                                    (shell-quote-argument outside)))))
          (should (file-exists-p (expand-file-name "inside.txt" project)))
          (should-not (file-exists-p outside))
          (should-not (file-exists-p (expand-file-name ".git/hook" project)))
          (should-not (file-exists-p (expand-file-name ".bashrc" home)))
          (should (string-match-p "^tmp$" text))
          (should (string-search "Read-only file system" text)))
        ;; A command that failed: the model reads why it may have.
        (should (string-match-p "It ran in LispM's sandbox: only .*project/ is writable"
                                (lispm-sandbox-test--run worker "touch /usr/x")))
        ;; Read-only: not even the folder.
        (let ((lispm-sandbox-shell-mode 'read-only))
          (lispm-sandbox-test--run worker "echo again > again.txt")
          (should-not (file-exists-p (expand-file-name "again.txt" project))))
        ;; Off: as the user's shell.
        (let ((lispm-sandbox-shell-mode 'off))
          (lispm-sandbox-test--run worker (format "echo out > %s" (shell-quote-argument outside)))
          (should (file-exists-p outside)))))))

(ert-deftest lispm-sandbox-test-no-keys-even-in-home ()
  (lispm-sandbox-test--with-home
    ;; The agent's folder is $HOME itself: its keys are still not there.
    (let ((text (lispm-sandbox-test--run
                 agent "cat ~/.ssh/id_test; cat .netrc; ls -a ~/.ssh; env; echo done")))
      (should (string-match-p "done" text))
      (should-not (string-search "PRIVATE KEY" text))
      (should-not (string-search "hunter2" text))
      (should-not (string-search "tok-0123456789abcdef" text))
      (should-not (string-search "MY_SERVICE_TOKEN" text))
      (should-not (string-search "GH_PAT" text))
      ;; The environment's other variables are there.
      (should (string-match-p "^PATH=" text))
      (should (string-search (concat "HOME=" (directory-file-name home)) text)))))

(ert-deftest lispm-sandbox-test-no-other-process ()
  (lispm-sandbox-test--with-home
    (let ((text (lispm-sandbox-test--run
                 agent (format "cat /proc/%d/environ; tr '\\0' '\\n' < /proc/1/environ; ls /proc"
                               (emacs-pid)))))
      (should-not (string-search "tok-0123456789abcdef" text))
      (should-not (string-match-p (format "^%d$" (emacs-pid)) text))
      (should (string-search "No such file" text)))))

(ert-deftest lispm-sandbox-test-the-network-only-when-allowed ()
  (lispm-sandbox-test--with-home
    (let* ((connections 0)
           (server (make-network-process
                    :name "lispm-sandbox-test" :server t :host "127.0.0.1" :service t
                    :family 'ipv4 :noquery t
                    :log (lambda (&rest _) (cl-incf connections))))
           (port (process-contact server :service))
           (probe (format "exec 3<>/dev/tcp/127.0.0.1/%d && echo connected" port)))
      (unwind-protect
          (progn
            (should-not (string-search "connected\n" (lispm-sandbox-test--run
                                                       agent (concat "bash -c '" probe "'"))))
            (accept-process-output nil 0.2)
            (should (= connections 0))
            ;; The user allowed this one command the network.
            (let ((lispm-sandbox-widened 'network))
              (should (string-search "connected" (lispm-sandbox-test--run
                                                  agent (concat "bash -c '" probe "'")))))
            (accept-process-output nil 0.2)
            (should (= connections 1))
            ;; A role whose policy allows the network outright.
            (let ((lispm-policy-roles '((default (read allow) (network allow) (shell ask)))))
              (should (string-search "connected" (lispm-sandbox-test--run
                                                  agent (concat "bash -c '" probe "'"))))))
        (delete-process server)))))

(ert-deftest lispm-sandbox-test-a-child-left-running-dies-with-the-command ()
  (lispm-sandbox-test--with-home
    (let* ((lispm-tools-shell-timeout 1)
           (marker (format "%d.25" (random 100000)))
           (result (lispm-tools-call "run_shell" agent
                                     (list :command (format "sleep %s & wait" marker)) 30)))
      (should-not (plist-get result :ok))
      (let ((deadline (+ (float-time) 3)) left)
        (while (and (setq left (cl-some (lambda (pid)
                                          (string-search
                                           (concat "sleep " marker)
                                           (or (alist-get 'args (process-attributes pid)) "")))
                                        (list-system-processes)))
                    (< (float-time) deadline))
          (sleep-for 0.05))
        (should-not left)))))

(ert-deftest lispm-sandbox-test-a-folder-that-is-the-root-is-not-written ()
  (let ((command (lispm-sandbox-command 'folder "/" '("true"))))
    (should (member "--ro-bind" command))
    (should-not (cl-loop for (a b c) on command thereis (and (equal a "--bind") (equal b "/")
                                                            (equal c "/"))))))

(ert-deftest lispm-sandbox-test-without-bubblewrap-it-says-so ()
  (let ((exec-path nil)
        (lispm-sandbox--unconfined-told nil)
        (warnings nil))
    (cl-letf (((symbol-function 'display-warning)
               (lambda (_type message &rest _) (push message warnings))))
      (should (equal (lispm-sandbox-describe 'folder nil)
                     "UNCONFINED: bubblewrap is not installed"))
      (should (equal (lispm-sandbox-command 'folder "/tmp" '("true")) '("true")))
      (should-not (lispm-sandbox-note 'folder "/tmp" nil))
      (lispm-sandbox-command 'folder "/tmp" '("true"))
      (should (= (length warnings) 1))
      (should (string-search "shell commands run unconfined" (car warnings))))))

(ert-deftest lispm-sandbox-test-the-approval-says-how-and-widens ()
  (lispm-sandbox-test--with-home
    (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
      (let ((lispm-approvals--pending nil)
            (box (list nil))
            (connections 0))
        (lispm-calls-invoke agent "run_shell" '(:command "echo hi > widened.txt")
                            (lambda (outcome) (push outcome (car box))))
        (let ((approval (car (lispm-approvals-pending))))
          (should approval)
          (with-current-buffer (lispm-approvals--buffer)
            (should (string-search "Runs: in the sandbox: the folder writable (.git read-only), \
no network" (buffer-string)))
            (goto-char (lispm-approvals--position-of approval))
            (call-interactively (keymap-lookup lispm-approvals-mode-map "N")))
          (let ((deadline (+ (float-time) 10)))
            (while (and (null (car box)) (< (float-time) deadline))
              (accept-process-output nil 0.05)))
          (should (plist-get (caar box) :ok))
          (should (file-exists-p (expand-file-name "widened.txt" home))))
        ;; Outside the sandbox, explicitly: it writes where it likes.
        (let ((outside (make-temp-file "lispm-sandbox-outside")))
          (unwind-protect
              (progn
                (lispm-calls-invoke agent "run_shell"
                                    (list :command (format "echo free > %s"
                                                           (shell-quote-argument outside)))
                                    (lambda (outcome) (push outcome (car box))))
                (lispm-approvals-allow-unconfined (car (lispm-approvals-pending)))
                (let ((deadline (+ (float-time) 10)))
                  (while (and (< (length (car box)) 2) (< (float-time) deadline))
                    (accept-process-output nil 0.05)))
                (should (equal (with-temp-buffer (insert-file-contents outside) (buffer-string))
                               "free\n")))
            (delete-file outside)))
        (ignore connections)
        ;; Only a shell command is widened.
        (lispm-calls-invoke agent "eval_elisp" '(:form "1") #'ignore)
        (should-error (lispm-approvals-allow-network (car (lispm-approvals-pending)))
                      :type 'user-error)))))

(provide 'lispm-sandbox-test)
;;; lispm-sandbox-test.el ends here
