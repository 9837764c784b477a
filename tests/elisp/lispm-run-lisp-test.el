;;; lispm-run-lisp-test.el --- Tests of the run_lisp tool  -*- lexical-binding: t; -*-

;;; Commentary:

;; run_lisp through the one call pipeline, as an actor without a
;; terminal: tools as functions (positional and keyword arguments),
;; the value and the output, refusals before anything runs, a denial
;; the program catches, edits that are the call's changes and revert,
;; fuel and refuelling, Emacs's timers running while a program
;; computes, and the ways to stop one (Lisp, C-g; not while it waits).

;;; Code:

(require 'ert)
(require 'lispm-test-fixtures)
(require 'lispm-run-lisp)
(require 'lispm-edit)

(cl-defstruct (lispm-run-lisp-test-actor (:include lispm-actor)
                                         (:constructor lispm-run-lisp-test-actor--make)
                                         (:copier nil))
  "An actor whose programs get more fuel, as often as REFUELS says."
  (refuels 0) (asked nil))

(cl-defmethod lispm-actor-refuel ((actor lispm-run-lisp-test-actor) used callback)
  "Give ACTOR's program 1000 more steps while it has REFUELS, noting USED."
  (push used (lispm-run-lisp-test-actor-asked actor))
  (if (> (lispm-run-lisp-test-actor-refuels actor) 0)
      (progn (cl-decf (lispm-run-lisp-test-actor-refuels actor))
             (funcall callback 1000))
    (funcall callback nil)))

(defmacro lispm-run-lisp-test--with (spec &rest body)
  "Run BODY with SPEC = (ACTOR &optional POLICY) in a folder of files.
ACTOR is bound to an actor whose folder holds a.txt, b.txt and the 40
files notes/n01.txt .. n40.txt (the odd ones say TODO).  POLICY is
`lispm-policy-roles' (default: reads allowed, the rest asked)."
  (declare (indent 1))
  `(let* ((folder (file-name-as-directory (file-truename (make-temp-file "lispm-run-lisp" t))))
          (lispm-policy-roles (or ,(cadr spec)
                                  '((default (read allow) (edit ask) (shell ask) (eval ask)))))
          (lispm-approvals-audit-automatic nil))
     (unwind-protect
         (lispm-test-with-registry
           (lispm-test-write-file folder "a.txt" "alpha\n")
           (lispm-test-write-file folder "b.txt" "beta\n")
           (dotimes (i 40)
             (lispm-test-write-file folder (format "notes/n%02d.txt" (1+ i))
                                    (if (cl-oddp (1+ i)) "TODO: more\n" "done\n")))
           (let ((,(car spec) (lispm-test-add-actor :folder folder)))
             ,@body))
       (dolist (approval (lispm-approvals-pending))
         (lispm-approvals-withdraw approval "test over"))
       (lispm-test-remove-folder folder))))

(defun lispm-run-lisp-test--start (actor program)
  "Call run_lisp with PROGRAM as ACTOR; return a cell whose car becomes the outcome."
  (let ((cell (list nil)))
    (lispm-calls-invoke actor "run_lisp" (list :program program)
                        (lambda (outcome) (setcar cell outcome)))
    cell))

(defun lispm-run-lisp-test--wait (predicate &optional seconds)
  "Let Emacs run until PREDICATE is true, at most SECONDS (10); return its value."
  (let ((deadline (+ (float-time) (or seconds 10))) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.01))
    (or value (ert-fail (format "Not in %s s: %S" (or seconds 10) predicate)))))

(defun lispm-run-lisp-test--run (actor program)
  "Run PROGRAM as ACTOR and return the outcome of the run_lisp call."
  (let ((cell (lispm-run-lisp-test--start actor program)))
    (lispm-run-lisp-test--wait (lambda () (car cell)))))

;;; Values, output, tools as functions

(ert-deftest lispm-run-lisp-value-and-output ()
  "The result is the value printed, then what the program printed."
  (lispm-run-lisp-test--with (actor)
    (let ((outcome (lispm-run-lisp-test--run
                    actor "(princ \"one \") (message \"two %d\" 2) (list 1 \"a\" 'b)")))
      (should (plist-get outcome :ok))
      (should (equal (plist-get outcome :text) "Value: (1 \"a\" b)\nOutput (what the program \
printed, each line after \"| \"):\n| one two 2")))
    (should (equal (plist-get (lispm-run-lisp-test--run actor "(+ 1 2)") :text) "Value: 3"))
    (should-not (lispm-run-lisp-running))))

(ert-deftest lispm-run-lisp-forty-files-in-one-call ()
  "One program lists and reads 40 files, each read through the pipeline."
  (lispm-run-lisp-test--with (actor)
    (let* ((outcome (lispm-run-lisp-test--run
                     actor "(let ((n 0))
                              (dolist (file (split-string (list-files \"notes\" \"*.txt\") \"\\n\" t) n)
                                (when (string-search \"TODO\" (read-file :path file))
                                  (cl-incf n))))")))
      (should (equal (plist-get outcome :text) "Value: 20")))))

(ert-deftest lispm-run-lisp-arguments ()
  "Positional arguments follow the schema, keywords name its arguments."
  (lispm-run-lisp-test--with (actor)
    (should (equal (plist-get (lispm-run-lisp-test--run actor "(read-file \"a.txt\" 1 3)") :text)
                   "Value: \"lph\\n[3 characters left out: characters 1 to 4 of 6 shown; call read_file with offset 4 to read on]\""))
    (should (equal (plist-get (lispm-run-lisp-test--run
                               actor "(read-file \"a.txt\" :limit 2)")
                              :text)
                   (plist-get (lispm-run-lisp-test--run
                               actor "(read-file :path \"a.txt\" :offset nil :limit 2)")
                              :text)))
    ;; The program's mistakes are errors it can catch.
    (should (string-match-p
             "Value: \"read_file takes at most 3 arguments\""
             (plist-get (lispm-run-lisp-test--run
                         actor "(condition-case err (read-file \"a.txt\" 0 1 2)
                                  (lispm-tool-bad-args (cadr err)))")
                        :text)))
    (should (string-match-p
             "Value: \"read_file: unknown argument .nope.; it takes"
             (plist-get (lispm-run-lisp-test--run
                         actor "(condition-case err (read-file \"a.txt\" :nope 1)
                                  (error (error-message-string err)))")
                        :text)))))

(ert-deftest lispm-run-lisp-tools-are-local-names ()
  "A tool named like an Emacs command is the tool in the program only."
  (lispm-run-lisp-test--with (actor)
    (let ((grep-function (symbol-function 'grep)))
      (should (plist-get (lispm-run-lisp-test--run actor "(length (list-files))") :ok))
      (should (eq (symbol-function 'grep) grep-function)))
    (let ((outcome (lispm-run-lisp-test--run actor "(run-lisp \"1\")")))
      (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-refused)))))

(ert-deftest lispm-run-lisp-cuts-a-long-value ()
  "A value longer than `lispm-run-lisp-output-limit' is cut, with a note."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-run-lisp-output-limit 100)
           (text (plist-get (lispm-run-lisp-test--run actor "(make-string 500 ?x)") :text)))
      (should (string-prefix-p (concat "Value: \"" (make-string 99 ?x) "\n") text))
      (should (string-suffix-p "[LispM cut the value: 100 of 502 characters shown]" text)))))

;;; Refusals and failures

(ert-deftest lispm-run-lisp-refused-before-running ()
  "A refused program fails with its reason; nothing of it runs, nor is it read here."
  (lispm-run-lisp-test--with (actor)
    (let ((served 0) (read-here 0))
      (cl-letf* ((serve (symbol-function 'lispm-run-lisp--serve-call))
                 ((symbol-function 'lispm-run-lisp--serve-call)
                  (lambda (&rest args) (cl-incf served) (apply serve args)))
                 (check (symbol-function 'lispm-lisp-read))
                 ((symbol-function 'lispm-lisp-read)
                  (lambda (&rest args) (cl-incf read-here) (apply check args))))
        (let ((outcome (lispm-run-lisp-test--run
                        actor "(read-file \"a.txt\") (symbol-value 'user-mail-address)")))
          (should (= served 0))
          (should (= read-here 0))
          (should-not (lispm-run-lisp-running))
          (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-refused))
          (should (string-match-p "reads a global variable by name"
                                  (plist-get outcome :error))))))))

(ert-deftest lispm-run-lisp-program-error ()
  "An error the program does not handle is its result, with its output."
  (lispm-run-lisp-test--with (actor)
    (let ((outcome (lispm-run-lisp-test--run actor "(princ \"before\") (car 1)")))
      (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-program-error))
      (should (equal (plist-get outcome :error)
                     "The program signalled wrong-type-argument: Wrong type argument: listp, 1
Output (what the program printed, each line after \"| \"):
| before")))))

;;; The policy: approvals, denials, changes

(ert-deftest lispm-run-lisp-denial-is-caught-and-approval-edits ()
  "The program waits for each approval; a denial is a condition it handles."
  (lispm-run-lisp-test--with (actor)
    (let* ((asked 0)
           (cell (list nil))
           (a (expand-file-name "a.txt" (lispm-actor-folder actor)))
           (b (expand-file-name "b.txt" (lispm-actor-folder actor)))
           (decided nil))
      (let ((lispm-calls-caller nil))
        (lispm-calls-invoke
         actor "run_lisp"
         (list :program "(list (edit-file \"a.txt\" \"alpha\" \"ALPHA\")
                               (condition-case err (edit-file \"b.txt\" \"beta\" \"BETA\")
                                 (lispm-policy-denied (list 'denied (nth 3 err) (nth 4 err)))))")
         (lambda (outcome) (setcar cell outcome))
         :on-ask (lambda (_approval) (cl-incf asked))
         :on-decided (lambda (_approval answer) (push (plist-get answer :decision) decided))))
      (lispm-run-lisp-test--wait (lambda () (= asked 1)))
      ;; The program waits; Emacs does not.
      (should (= (length (lispm-run-lisp-running actor)) 1))
      (lispm-approvals-allow (car (lispm-approvals-pending)))
      (lispm-run-lisp-test--wait (lambda () (= asked 2)))
      (lispm-approvals-deny (car (lispm-approvals-pending)) "not b, please")
      (let ((outcome (lispm-run-lisp-test--wait (lambda () (car cell)))))
        (should (plist-get outcome :ok))
        (should (string-match-p "(denied user \"not b, please\")" (plist-get outcome :text)))
        (should (equal decided '(deny allow)))
        (should (equal (lispm-test-read-file a) "ALPHA\n"))
        (should (equal (lispm-test-read-file b) "beta\n"))
        ;; The edit is the call's change, which reverts.
        (should (= (length (plist-get outcome :changes)) 1))
        (lispm-edit-revert (plist-get outcome :changes))
        (should (equal (lispm-test-read-file a) "alpha\n"))))))

(ert-deftest lispm-run-lisp-abort-withdraws-the-approval ()
  "Stopping a program that waits for approval withdraws it; nothing is edited."
  (lispm-run-lisp-test--with (actor)
    (let ((cell (lispm-run-lisp-test--start actor "(edit-file \"a.txt\" \"alpha\" \"ALPHA\")")))
      (lispm-run-lisp-test--wait (lambda () (lispm-approvals-pending)))
      (should (= (lispm-run-lisp-abort-actor actor "test") 1))
      (should-not (lispm-approvals-pending))
      (let ((outcome (lispm-run-lisp-test--wait (lambda () (car cell)))))
        (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-interrupted))
        (should (string-prefix-p "The program was stopped (test) after 1 tool calls"
                                 (plist-get outcome :error))))
      (should (equal (lispm-test-read-file (expand-file-name "a.txt" (lispm-actor-folder actor)))
                     "alpha\n")))))

;;; Fuel

(ert-deftest lispm-run-lisp-fuel-ends-it-by-default ()
  "An actor without a say in it lets a program out of fuel end."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-lisp-default-fuel 500)
           (outcome (lispm-run-lisp-test--run actor "(while t)")))
      (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-fuel-exhausted))
      (should (equal (plist-get outcome :error) "The program ran out of fuel after 500 steps")))))

(ert-deftest lispm-run-lisp-refusals-and-limits-are-audited ()
  "A program LispM refuses, and one ended at a limit, are in the ledger's audit."
  (lispm-run-lisp-test--with (actor)
    (let ((lispm-lisp-default-fuel 500)
          (sent nil))
      (cl-letf (((symbol-function 'lispm-sidecar-notify)
                 (lambda (method params) (when (eq method 'lispm/audit) (push params sent)))))
        (lispm-run-lisp-test--run actor "(symbol-value 'user-mail-address)")
        (lispm-run-lisp-test--run actor "(while t)"))
      (should (equal (mapcar (lambda (entry) (plist-get entry :decision)) sent)
                     '("deny" "deny")))
      (dolist (entry sent)
        (should (equal (plist-get entry :agent) (lispm-actor-name actor)))
        (should (equal (plist-get entry :role) "default")))
      (should (equal (plist-get (car sent) :reason)
                     "The program ran out of fuel after 500 steps"))
      (should (string-match-p "reads a global variable by name"
                              (plist-get (cadr sent) :reason))))))

(ert-deftest lispm-run-lisp-refuelled-goes-on ()
  "An actor that gives more fuel lets the program go on where it was."
  (lispm-test-with-registry
    (let* ((lispm-policy-roles '((default (read allow))))
           (lispm-lisp-default-fuel 1000)
           (actor (lispm-agents-add-actor
                   (lispm-run-lisp-test-actor--make :name "fuelled" :kind 'lispm
                                                    :folder temporary-file-directory
                                                    :state 'running :refuels 2)))
           (outcome (lispm-run-lisp-test--run actor "(let ((i 0)) (while (< i 2500) (cl-incf i)) i)")))
      (should (equal (plist-get outcome :text) "Value: 2500"))
      (should (equal (lispm-run-lisp-test-actor-asked actor) '(2000 1000)))
      (setf (lispm-run-lisp-test-actor-asked actor) nil)
      (let ((outcome (lispm-run-lisp-test--run actor "(while t)")))
        (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-fuel-exhausted))
        (should (equal (lispm-run-lisp-test-actor-asked actor) '(1000)))))))

;;; Emacs goes on; stopping

(ert-deftest lispm-run-lisp-emacs-runs-while-it-computes ()
  "Timers run while a program computes; `lispm-run-lisp-abort' stops it."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-lisp-default-fuel most-positive-fixnum)
           (ticks 0)
           (timer (run-at-time 0 0.01 (lambda () (cl-incf ticks))))
           (cell (unwind-protect
                     (let ((cell (lispm-run-lisp-test--start
                                  actor "(let ((i 0)) (while t (setq i (1+ i))))")))
                       (lispm-run-lisp-test--wait (lambda () (>= ticks 20)))
                       cell)
                   (cancel-timer timer))))
      (should (lispm-run-lisp-running actor))
      (should-not (car cell))
      (lispm-run-lisp-abort (car (lispm-run-lisp-running actor)) "enough")
      (should (eq (car (plist-get (lispm-run-lisp-test--wait (lambda () (car cell))) :condition))
                  'lispm-lisp-interrupted)))))

(ert-deftest lispm-run-lisp-c-g-stops-a-computing-program ()
  "C-g stops a program that computes, not one that waits for approval."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-lisp-default-fuel most-positive-fixnum)
           (waiting (lispm-run-lisp-test--start actor "(edit-file \"a.txt\" \"alpha\" \"A\")"))
           (computing (progn (lispm-run-lisp-test--wait (lambda () (lispm-approvals-pending)))
                             (lispm-run-lisp-test--start actor "(while t)"))))
      (lispm-run-lisp-test--wait (lambda () (= (length (lispm-run-lisp-running actor)) 2)))
      (accept-process-output nil 0.1)
      ;; C-g runs `keyboard-quit', which quits here too.
      (should (eq (condition-case nil (execute-kbd-macro (kbd "C-g")) (quit 'quit)) 'quit))
      (let ((outcome (lispm-run-lisp-test--wait (lambda () (car computing)))))
        (should (string-prefix-p "The program was stopped (C-g)" (plist-get outcome :error))))
      (should-not (car waiting))
      (should (lispm-approvals-pending))
      (lispm-approvals-deny (car (lispm-approvals-pending)) "no")
      (should (eq (car (plist-get (lispm-run-lisp-test--wait (lambda () (car waiting)))
                                  :condition))
                  'lispm-lisp-program-error))
      (should-not (memq #'lispm-run-lisp--keyboard-quit pre-command-hook))
      (should-not (advice-function-member-p #'lispm-run-lisp--quit command-error-function)))))

(ert-deftest lispm-run-lisp-a-quit-at-command-level-stops-it ()
  "A quit that reaches the command loop, not as a command, stops a computing program."
  (lispm-run-lisp-test--with (actor)
    ;; Batch Emacs's own function would end the test run.
    (let* ((command-error-function #'ignore)
           (lispm-lisp-default-fuel most-positive-fixnum)
           (cell (lispm-run-lisp-test--start actor "(while t)")))
      (should (advice-function-member-p #'lispm-run-lisp--quit command-error-function))
      (funcall command-error-function '(quit) "" nil)
      (should (string-prefix-p "The program was stopped (C-g)"
                               (plist-get (lispm-run-lisp-test--wait (lambda () (car cell)))
                                          :error))))))

;;; The program's Emacs misbehaving

(ert-deftest lispm-run-lisp-a-garbled-line-ends-it-clearly ()
  "A line the program's Emacs writes that is not a request ends the run, saying so."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-lisp-default-fuel most-positive-fixnum)
           (cell (lispm-run-lisp-test--start actor "(while t)"))
           (run (car (lispm-run-lisp-running actor))))
      (lispm-run-lisp--filter run "partial")
      (should-not (car cell))
      (lispm-run-lisp--filter run " line)\n")
      (let ((outcome (lispm-run-lisp-test--wait (lambda () (car cell)))))
        (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-error))
        (should (equal (plist-get outcome :error)
                       "The program's Emacs wrote \"partial line)\""))
        (should-not (process-live-p (lispm-run-process run)))
        (should-not (lispm-run-lisp-running))))))

(ert-deftest lispm-run-lisp-its-emacs-dying-ends-it-clearly ()
  "The program's Emacs ending before the program did is the call's error."
  (lispm-run-lisp-test--with (actor)
    (let* ((lispm-lisp-default-fuel most-positive-fixnum)
           (cell (lispm-run-lisp-test--start actor "(while t)"))
           (run (car (lispm-run-lisp-running actor))))
      (signal-process (lispm-run-process run) 'KILL)
      (let ((outcome (lispm-run-lisp-test--wait (lambda () (car cell)))))
        (should (eq (car (plist-get outcome :condition)) 'lispm-lisp-error))
        (should (string-prefix-p "The program's Emacs ended (signal 9)"
                                 (plist-get outcome :error)))))))

(ert-deftest lispm-run-lisp-text-crosses-whole ()
  "Newlines, control and non-ASCII characters cross both ways intact."
  (lispm-run-lisp-test--with (actor)
    (lispm-test-write-file (lispm-actor-folder actor) "odd.txt" "é\n\t\r\x07 ✓\n")
    (should (equal (plist-get (lispm-run-lisp-test--run
                               actor "(let ((text (read-file \"odd.txt\")))
                                        (list (length text) (string-to-list text)))")
                              :text)
                   (format "Value: %S" (list 8 (string-to-list "é\n\t\r\x07 ✓\n")))))))

(provide 'lispm-run-lisp-test)
;;; lispm-run-lisp-test.el ends here
