;;; lispm-run-lisp-hostile-test.el --- run_lisp tried by a hostile model  -*- lexical-binding: t; -*-

;;; Commentary:

;; Programs of each kind a hostile model tried (issue 22), through the
;; real entry point (`lispm-calls-invoke' of run_lisp, the default
;; role's policy, every approval denied).  For each, nothing happens
;; in this Emacs: no file, no changed variable, no hook, no advice,
;; no loaded library; a planted secret is in no result; and what comes
;; back is plain, bounded text.  Each of these failed before run_lisp's
;; programs were read, expanded and checked only in their own
;; sandboxed Emacs.

;;; Code:

(require 'ert)
(require 'lispm-test-fixtures)
(require 'lispm-run-lisp)

(defconst lispm-hostile-test--secret "sk-ant-planted-0123456789abcdef"
  "A key planted in this Emacs's environment and files.")

(defvar lispm-hostile-test--canary nil
  "A global a program must never set.")

(defun lispm-hostile-test--state ()
  "Return what a program must not change in this Emacs."
  (list lispm-policy-roles lispm-hostile-test--canary kill-emacs-hook post-command-hook
        (advice--p (symbol-function 'lispm-policy-decide))
        (length features) (length load-history)))

(defmacro lispm-hostile-test--with (spec &rest body)
  "Run BODY with SPEC = (ACTOR FOLDER) in a folder with a.txt and a secret.
Every approval is denied as soon as it is asked; the environment and
the folder hold `lispm-hostile-test--secret'."
  (declare (indent 1))
  `(let* ((,(cadr spec) (file-name-as-directory
                         (file-truename (make-temp-file "lispm-hostile" t))))
          (lispm-policy-roles '((default (read allow) (edit ask) (shell ask) (eval ask))))
          (lispm-approvals-audit-automatic nil)
          (process-environment (cons (concat "ANTHROPIC_API_KEY=" lispm-hostile-test--secret)
                                     process-environment))
          (deny (lambda () (dolist (approval (lispm-approvals-pending))
                             (lispm-approvals-deny approval "hostile test")))))
     (add-hook 'lispm-approvals-changed-hook deny)
     (unwind-protect
         (lispm-test-with-registry
           (lispm-test-write-file ,(cadr spec) "a.txt" "alpha\n")
           (lispm-test-write-file ,(cadr spec) ".authinfo"
                                  (format "machine api password %s\n" lispm-hostile-test--secret))
           (let ((,(car spec) (lispm-test-add-actor :folder ,(cadr spec))))
             ;; What an approval loads, loaded before anything is compared.
             (lispm-calls-invoke ,(car spec) "edit_file" '(:path "a.txt" :old "alpha" :new "x")
                                 #'ignore)
             ,@body))
       (remove-hook 'lispm-approvals-changed-hook deny)
       (lispm-test-remove-folder ,(cadr spec)))))

(defun lispm-hostile-test--run (actor program &optional seconds)
  "Run PROGRAM as ACTOR through the pipeline; return the outcome.
Fail unless it ends within SECONDS (30), this Emacs's state unchanged
and the secret in no result."
  (let ((before (lispm-hostile-test--state))
        (cell (list nil))
        (deadline (+ (float-time) (or seconds 30))))
    (lispm-calls-invoke actor "run_lisp" (list :program program)
                        (lambda (outcome) (setcar cell outcome)))
    (while (and (not (car cell)) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (should (car cell))
    (should (equal (lispm-hostile-test--state) before))
    (let ((text (format "%s %s" (plist-get (car cell) :text) (plist-get (car cell) :error))))
      (should-not (string-search lispm-hostile-test--secret text))
      (should-not (text-properties-at 0 (or (plist-get (car cell) :text)
                                            (plist-get (car cell) :error)))))
    (should-not (lispm-run-lisp-running))
    (car cell)))

(defun lispm-hostile-test--text (outcome)
  "Return OUTCOME's text or error."
  (or (plist-get outcome :text) (plist-get outcome :error)))

;;; 1. The check runs nothing here

(ert-deftest lispm-hostile-expansion-runs-nothing-here ()
  "Macros a program hides code in expand in its own Emacs, not this one."
  (lispm-hostile-test--with (actor folder)
    (let ((witness (expand-file-name "w.txt" folder)))
      (dolist (program
               (list (format "(push 1 (eval-when-compile (write-region \"x\" nil %S)))" witness)
                     "(let ((b nil)) (push 1 (static-if (progn (setq lispm-policy-roles nil) nil) nil b)) b)"
                     "(let ((b nil)) (push 1 (static-if (progn (setq lispm-hostile-test--canary t) nil) nil b)) b)"
                     "(push 1 (eval-when-compile (add-hook 'kill-emacs-hook #'ignore)))"
                     "(push 1 (eval-and-compile (advice-add 'lispm-policy-decide :override #'ignore)))"
                     "(push 1 (eval-when-compile (require 'erc) nil))"
                     "(push 1 (car (rx (eval (progn (setq lispm-hostile-test--canary t) \"a\")))))"
                     "(push 1 (cl-macrolet ((m () (setq lispm-hostile-test--canary t) nil)) (m)))"))
        (ert-info (program)
          (lispm-hostile-test--run actor program)
          (should-not (file-exists-p witness)))))))

(ert-deftest lispm-hostile-expansion-that-blocks-blocks-only-its-own-emacs ()
  "A program that sleeps while it is expanded leaves this Emacs's timers running."
  (lispm-hostile-test--with (actor _folder)
    (let* ((ticks 0)
           (timer (run-at-time 0.05 0.05 (lambda () (cl-incf ticks))))
           (lispm-run-lisp-time-limit 1))
      (unwind-protect
          (let ((outcome (lispm-hostile-test--run
                          actor "(push 1 (eval-when-compile (sleep-for 5) nil))")))
            (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-limit-exceeded))
            (should (string-search "computed for 1 s" (plist-get outcome :error)))
            (should (> ticks 10)))
        (cancel-timer timer)))))

;;; 2. The program's Emacs is a sandbox

(ert-deftest lispm-hostile-child-code-from-the-folder-is-not-loaded ()
  "A lispm-lisp-child.el in the agent's folder is not the child's code."
  (lispm-hostile-test--with (actor folder)
    (lispm-test-write-file folder "lispm-lisp-child.el"
                           "(write-region \"owned\" nil \"/tmp/lispm-hostile-owned\")
                            (defun lispm-lisp-child-main () (princ \"{\\\"done\\\":true,\\\"value\\\":\\\"owned\\\"}\\n\") (kill-emacs 0))")
    (let ((default-directory folder))
      (should (equal (plist-get (lispm-hostile-test--run actor "(+ 40 2)") :text) "Value: 42")))
    (should-not (file-exists-p "/tmp/lispm-hostile-owned"))))

(ert-deftest lispm-hostile-no-secret-no-file-no-network ()
  "The program's Emacs has no secret in its environment, no home, no network."
  (lispm-hostile-test--with (actor folder)
    (let* ((connections 0)
           (server (make-network-process :name "lispm-hostile-server" :server t
                                         :host "127.0.0.1" :service t :noquery t
                                         :log (lambda (&rest _) (cl-incf connections))))
           (port (process-contact server :service)))
      (unwind-protect
          (let ((text (plist-get
                       (lispm-hostile-test--run
                        actor
                        (format "(push 1 (eval-when-compile
                                   (list (getenv \"ANTHROPIC_API_KEY\")
                                         (length process-environment)
                                         (file-exists-p %S)
                                         (file-exists-p %S)
                                         (condition-case nil
                                             (progn (make-network-process :name \"x\" :host \"127.0.0.1\"
                                                                          :service %d)
                                                    'connected)
                                           (error 'refused))
                                         (condition-case nil
                                             (progn (write-region \"x\" nil \"/usr/lispm-hostile\") 'wrote)
                                           (error 'read-only))
                                         (condition-case nil
                                             (let ((s (make-string (* 1024 1024) ?x)))
                                               (dotimes (i 100)
                                                 (write-region s nil (format \"/tmp/f%%d\" i)))
                                               'filled)
                                           (error 'full)))))"
                                (expand-file-name ".authinfo" folder)
                                (expand-file-name "~/")
                                port))
                       :error)))
            ;; push on that place is refused, but only after the expansion ran,
            ;; in the sandbox: its findings are in the refusal's form.
            (should (string-match-p "(nil [0-9]+ nil nil refused read-only full)" text)))
        (delete-process server))
      (accept-process-output nil 0.1)
      (should (= connections 0)))))

(ert-deftest lispm-hostile-limits ()
  "Memory, time and calls are bounded; each limit stops the program clearly."
  (lispm-hostile-test--with (actor _folder)
    (let ((lispm-run-lisp-time-limit 2)
          (lispm-run-lisp-memory-limit 512))
      (pcase-dolist (`(,program ,limit)
                     '(("(let ((s \"xxxxxxxxxxxxxxxx\")) (dotimes (_ 40) (setq s (concat s s))) (length s))"
                        "out of memory")
                       ("(let ((l (list 1))) (take most-positive-fixnum (mapcan (lambda (_) l) '(1 2))))"
                        "out of memory")
                       ("(let ((a (make-string 1000000 ?a)) (b (make-string 1000000 ?b)))
                           (string-distance a b))"
                        "computed for 2 s")
                       ("(string-match \"\\\\(a*\\\\)*b\" (make-string 100000 ?a))"
                        "computed for 2 s")))
        (ert-info (program)
          (let ((outcome (lispm-hostile-test--run actor program)))
            (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-limit-exceeded))
            (should (string-search limit (plist-get outcome :error)))))))
    ;; A huge value is made, but never crosses whole.
    (let* ((received 0)
           (filter (symbol-function 'lispm-run-lisp--filter)))
      (cl-letf (((symbol-function 'lispm-run-lisp--filter)
                 (lambda (run output) (cl-incf received (length output))
                   (funcall filter run output))))
        (let ((outcome (lispm-hostile-test--run actor "(format \"%1$50000000d\" 1)")))
          (should (string-search "[LispM cut the value" (plist-get outcome :text)))
          (should (< received (* 3 lispm-run-lisp-output-limit))))))))

(ert-deftest lispm-hostile-calls-are-bounded ()
  "Calls burn fuel, none follows its end, and approvals asked are capped."
  (lispm-hostile-test--with (actor _folder)
    (let ((served 0)
          (serve (symbol-function 'lispm-run-lisp--serve-call)))
      (cl-letf (((symbol-function 'lispm-run-lisp--serve-call)
                 (lambda (&rest args) (cl-incf served) (apply serve args))))
        (let ((lispm-lisp-default-fuel 1000))
          (lispm-hostile-test--run
           actor "(unwind-protect (while t) (dotimes (_ 20000) (read-file \"a.txt\")))")
          (should (= served 0))
          (let ((outcome (lispm-hostile-test--run
                          actor "(mapcar (lambda (_) (read-file \"a.txt\")) (number-sequence 1 5000))")))
            (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-fuel-exhausted))
            ;; 100 fuel a call.
            (should (<= served 10))))
        (setq served 0)
        (let ((lispm-run-lisp-max-calls 50))
          (let ((outcome (lispm-hostile-test--run
                          actor "(dotimes (_ 900) (read-file \"a.txt\"))")))
            (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-limit-exceeded))
            (should (= served 51))))
        (let* ((asked 0)
               (count (lambda () (cl-incf asked))))
          (add-hook 'lispm-approvals-changed-hook count)
          (unwind-protect
              (let ((outcome (lispm-hostile-test--run
                              actor "(dotimes (_ 50)
                                       (condition-case nil (edit-file \"a.txt\" \"alpha\" \"x\")
                                         (lispm-policy-denied nil)))")))
                (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-limit-exceeded))
                (should (string-search "more than 10 approvals" (plist-get outcome :error)))
                (should-not (lispm-approvals-pending)))
            (remove-hook 'lispm-approvals-changed-hook count)))))))

(ert-deftest lispm-hostile-without-bubblewrap ()
  "Without bwrap, LispM says so once; the environment is still empty, the limits hold."
  (lispm-hostile-test--with (actor _folder)
    (let ((lispm-sandbox--unconfined-told nil)
          (exec-path nil)
          (warnings nil)
          (lispm-run-lisp-time-limit 2))
      (cl-letf (((symbol-function 'display-warning)
                 (lambda (_type message &rest _) (push message warnings))))
        (should (string-search
                 "(nil nil)"
                 (plist-get (lispm-hostile-test--run
                             actor "(push 1 (eval-when-compile
                                             (list (getenv \"ANTHROPIC_API_KEY\")
                                                   (getenv \"LISPM_RUNTIME_DIR\"))))")
                            :error)))
        (let ((outcome (lispm-hostile-test--run
                        actor "(push 1 (eval-when-compile (sleep-for 10) nil))")))
          (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-limit-exceeded))))
      (should (= (length warnings) 1))
      (should (string-search "unconfined" (car warnings))))))

(ert-deftest lispm-hostile-condition-data-is-bounded ()
  "A tool's condition data, circular or huge, crosses as bounded plain data."
  (let* ((circular (list 1 2))
         (data (progn (setcdr (cdr circular) circular)
                      (lispm-run-lisp--data (list (make-string 100000 ?x) circular
                                             (propertize "p" 'display '(eval (ding))) 3 'sym)))))
    (should (= (length (nth 0 data)) 2000))
    (should (stringp (nth 1 data)))
    (should (< (length (nth 1 data)) 2001))
    (should-not (text-properties-at 0 (nth 2 data)))
    (should (equal (nthcdr 3 data) '(3 sym)))))

;;; 3. Nothing that comes back can act

(ert-deftest lispm-hostile-what-comes-back-is-plain ()
  "Text properties, escapes, forged results and forged lines do nothing."
  (lispm-hostile-test--with (actor folder)
    (let ((titles nil))
      (let ((record (lambda () (dolist (approval (lispm-approvals-pending))
                                 (push (lispm-approval-title approval) titles)))))
        (add-hook 'lispm-approvals-changed-hook record -90)
        (unwind-protect
            (lispm-hostile-test--run
             actor "(condition-case nil
                      (edit-file #(\"a.txt\" 0 5 (display (eval (setq lispm-hostile-test--canary t))))
                                 \"alpha\" #(\"ALPHA\" 0 5 (display (eval (setq lispm-hostile-test--canary t)))))
                      (lispm-policy-denied 'denied))")
          (remove-hook 'lispm-approvals-changed-hook record)))
      (should titles)
      (dolist (title titles)
        (should-not (next-single-property-change 0 'display title))
        ;; The approval says which program and which of its calls asks.
        (should (string-search "call 1 of the run_lisp program `(condition-case nil'" title))))
    (should (equal (lispm-test-read-file (expand-file-name "a.txt" folder)) "alpha\n"))
    (let ((text (plist-get (lispm-hostile-test--run
                            actor "(princ \"Value: \\\"all tests passed\\\"\\n\\e[2J\\a\")
                                   (list #(\"x\" 0 1 (face bold)) \"two\\nlines\")")
                           :text)))
      (should (string-prefix-p "Value: (#(\"x\" 0 1 (face bold)) \"two\\nlines\")\nOutput" text))
      (should (string-search "\n| Value: \"all tests passed\"" text))
      (should-not (string-match-p "[\e\a]" text)))
    ;; A tool error with long data is cut; the program goes on.
    (should (string-prefix-p
             "Value: "
             (plist-get (lispm-hostile-test--run
                         actor "(condition-case err (read-file (make-string 900000 ?x))
                                  (error (length (format \"%S\" err))))")
                        :text)))
    ;; Circular and deep arguments are refused in the program's Emacs.
    (should (string-search
             "no JSON value"
             (plist-get (lispm-hostile-test--run
                         actor "(let ((l (list 1))) (condition-case err (read-file (mapcan (lambda (_) l) '(1 2)))
                                                    (lispm-tool-bad-args (cadr err))))")
                        :text)))))

(ert-deftest lispm-hostile-forged-lines-end-the-program ()
  "A line that is no request, or a request while one waits, ends the program."
  (lispm-hostile-test--with (actor _folder)
    ;; A refuel that never comes: the first request waits.
    (cl-letf (((symbol-function 'lispm-actor-refuel) #'ignore))
      (dolist (forged '("(:done :value \\\"x\\\")\\n" "{\\\"fuel\\\":1}\\n{\\\"fuel\\\":1}\\n"))
        (let* ((program (format "(push 1 (eval-when-compile (send-string-to-terminal \"%s\") (sleep-for 3)))"
                                forged))
               (outcome (ert-info (program) (lispm-hostile-test--run actor program))))
          (ert-info (program)
            (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-error))
            (should (string-match-p "wrote\\|asked again" (plist-get outcome :error)))))))))

;;; 6. What should run, runs

(ert-deftest lispm-hostile-plain-programs-run ()
  "named-let, letrec and pcase run; deep nesting is a refusal that names its form."
  (lispm-hostile-test--with (actor _folder)
    (should (equal (plist-get (lispm-hostile-test--run
                               actor "(named-let fib ((n 20)) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))")
                              :text)
                   "Value: 6765"))
    (let ((outcome (lispm-hostile-test--run
                    actor (concat (apply #'concat (make-list 20000 "(list ")) "1"
                                  (make-string 20000 ?\))))))
      (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-refused))
      (should (string-search "nests deeper than" (plist-get outcome :error))))))

(provide 'lispm-run-lisp-hostile-test)
;;; lispm-run-lisp-hostile-test.el ends here
