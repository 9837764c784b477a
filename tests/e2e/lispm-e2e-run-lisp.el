;;; lispm-e2e-run-lisp.el --- run_lisp, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_run_lisp.py inside a loopback-only network
;; namespace, with the scripted gateway as the model (the programs are
;; in its script).  A real batch Emacs runs LispM's own agent with the
;; real sidecar, and the agent runs `run_lisp' programs (issue 12
;; §4.2-§4.5): forty files read in one round trip; edits inside a
;; program approved and denied, one undo step and reverted with the
;; turn; programs refused before anything of them runs; and programs
;; that never end, stopped by their fuel, by C-g and by C-c C-k, while
;; Emacs goes on.

;;; Code:

(require 'lispm-e2e-own)

(defun lispm-e2e-run-lisp--answer (turn)
  "Return the text of TURN's last message: the model's answer."
  (plist-get (car (last (lispm-turn-messages turn))) :content))

(defun lispm-e2e-run-lisp--results (prompt-part)
  "Return the run_lisp results the model saw after PROMPT-PART, oldest first."
  (plist-get (car (last (lispm-e2e-own-requests prompt-part))) :tool_results))

(defun lispm-e2e-run-lisp--text (file)
  "Return the text of FILE: its buffer's, if Emacs visits it."
  (if-let* ((buffer (find-buffer-visiting file)))
      (with-current-buffer buffer (buffer-string))
    (with-temp-buffer (insert-file-contents file) (buffer-string))))

(defun lispm-e2e-run-lisp--call-entry (agent)
  "Return the text of the last run_lisp call's entry in AGENT's session."
  (with-current-buffer (lispm-own-agent-buffer agent)
    (save-excursion
      (save-restriction
        (widen)
        (goto-char (point-max))
        (should (re-search-backward "^\\*\\*\\* Call run_lisp$" nil t))
        (buffer-substring (point) (save-excursion
                                    (forward-line 1)
                                    (if (re-search-forward "^\\*\\{1,3\\} " nil t)
                                        (match-beginning 0)
                                      (point-max))))))))

(defun lispm-e2e-run-lisp--wait-running (agent)
  "Wait for a program of AGENT to be running; return its `lispm-run'."
  (car (lispm-e2e-wait (lambda () (lispm-run-lisp-running agent)) 30
                       "a run_lisp program to run")))

;;; §4.2: forty files, one round trip

(ert-deftest lispm-e2e-run-lisp-forty-files-one-round-trip ()
  "One program reads 40 files: 2 requests; a read_file per file: 41; the same count."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let* ((files (directory-files (lispm-e2e-own-file "project" "notes") t "\\.org\\'"))
           (right (cl-count-if (lambda (file)
                                 (string-search "TODO" (lispm-e2e-run-lisp--text file)))
                               files))
           (program (lispm-e2e-own-send agent "Count the TODO notes in one program"))
           ;; Forty reads are forty-one requests, over the step limit.
           (by-file (let ((lispm-turn-step-limit 50))
                      (lispm-e2e-own-send agent "Count the TODO notes file by file"))))
      (should (= 40 (length files)))
      (should (< 0 right 40))
      (should (eq (lispm-turn-state program) 'done))
      (should (eq (lispm-turn-state by-file) 'done))
      (let ((one (lispm-e2e-own-requests "in one program"))
            (forty (lispm-e2e-own-requests "file by file")))
        (should (= 2 (length one)))
        (should (= 41 (length forty)))
        (should (equal (mapcar (lambda (r) (plist-get r :name))
                               (plist-get (cadr one) :tool_results))
                       '("run_lisp")))
        (let ((reads (plist-get (car (last forty)) :tool_results)))
          (should (= 40 (length reads)))
          (should (cl-every (lambda (r) (equal (plist-get r :name) "read_file")) reads))
          ;; What the model saw file by file holds RIGHT files with a TODO.
          (should (= right (cl-count-if (lambda (r) (string-search "TODO" (plist-get r :text)))
                                        reads)))))
      (should (equal (lispm-e2e-run-lisp--answer program)
                     (format "Notes with a TODO: Value: %d" right)))
      (should (equal (lispm-e2e-run-lisp--answer by-file)
                     (format "Notes with a TODO: %d" right))))))

;;; §4.3: a program's edits, approved and denied

(defun lispm-e2e-run-lisp--edit-two (agent)
  "Have AGENT's program edit two files: allow the first, deny the second.
Return the turn, once it is over."
  (lispm-own-agent-send agent "Edit both files in one program")
  (lispm-e2e-own-approve)
  (lispm-e2e-own-approve t "notes.el stays as it is")
  (lispm-e2e-own-settle agent))

(ert-deftest lispm-e2e-run-lisp-edits-approved-and-denied ()
  "A program catches the denial of its second edit and reports the reason.
The first edit is one undo step; the session shows both approvals
under the run_lisp call; the turn's revert takes the first edit back."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-asking)
    (let* ((todo (lispm-e2e-own-file "project" "todo.txt"))
           (notes (lispm-e2e-own-file "project" "notes.el"))
           (todo-before (lispm-e2e-run-lisp--text todo))
           (notes-before (lispm-e2e-run-lisp--text notes))
           (turn (lispm-e2e-run-lisp--edit-two agent)))
      (should (eq (lispm-turn-state turn) 'done))
      (should (equal (mapcar (lambda (r) (plist-get r :text))
                             (lispm-e2e-run-lisp--results "Edit both files in one program"))
                     '("Value: \"todo.txt edited; notes.el denied: notes.el stays as it is\"")))
      (should (string-search "one PROGRAM-EDIT\n" (lispm-e2e-run-lisp--text todo)))
      (should (equal (lispm-e2e-run-lisp--text notes) notes-before))
      (let ((entry (lispm-e2e-run-lisp--call-entry agent)))
        (should (= 1 (cl-count-if (lambda (line) (string-prefix-p "**** DONE " line))
                                  (split-string entry "\n"))))
        (should (= 1 (cl-count-if (lambda (line) (string-prefix-p "**** CANCELLED " line))
                                  (split-string entry "\n"))))
        (should-not (string-match-p "^\\*+ TODO " entry))
        (should (string-search "Reason: notes.el stays as it is" entry)))
      (with-current-buffer (find-file-noselect todo)
        (let ((last-command nil)) (undo))
        (should (equal (buffer-string) todo-before)))
      ;; Again, and the turn's revert takes the edit back.
      (let ((again (lispm-e2e-run-lisp--edit-two agent)))
        (should (eq (lispm-turn-state again) 'done))
        (should (string-search "one PROGRAM-EDIT\n" (lispm-e2e-run-lisp--text todo)))
        (should (= 1 (lispm-turn-revert again)))
        (should (equal (lispm-e2e-run-lisp--text todo) todo-before))
        (should (equal (lispm-e2e-run-lisp--text notes) notes-before))))))

;;; §4.4: refused before running

(ert-deftest lispm-e2e-run-lisp-refused-before-running ()
  "Seven programs, each refused with its reason; nothing ran; the turn goes on."
  (let ((global lispm-policy-roles))
    (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
      ;; The script's delete-file programs name this file.
      (let ((x (lispm-e2e-own-file "project" "x")))
        (with-temp-file x (insert "still here\n"))
        (let ((turn (lispm-e2e-own-send agent "Try the forbidden programs")))
          (should (eq (lispm-turn-state turn) 'done))
          (should (file-exists-p x))
          (should (equal lispm-policy-roles lispm-e2e-own-trusting))
          (let ((results (mapcar (lambda (r) (plist-get r :text))
                                 (lispm-e2e-run-lisp--results "Try the forbidden programs"))))
            (should (= 7 (length results)))
            (cl-mapc
             (lambda (text expected)
               (should (string-prefix-p "Error: " text))
               (dolist (part expected)
                 (should (string-search part text))))
             results
             '(("run_lisp refused" "symbol-value" "reads a global variable by name")
               ("run_lisp refused" "lispm-policy-roles" "which the program did not bind")
               ("run_lisp refused" "shell-command" "is neither a tool nor a pure function")
               ("run_lisp refused" "it calls" "delete-file" "neither a tool nor on")
               ("The program does not read" "read-time evaluation")
               ("run_lisp refused" "defmacro" "defines a macro")
               ("run_lisp refused" "eval" "evaluates code the check has not seen")))))))
    (should (equal lispm-policy-roles global))))

;;; §4.5: programs that never end

(ert-deftest lispm-e2e-run-lisp-loop-runs-out-of-fuel ()
  "(while t) stops the turn at the fuel condition; MORE-FUEL, then SKIP-TOOL."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Loop forever in Lisp")))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-lisp-fuel-exhausted))
      (should (string-search (format "after %d steps" lispm-lisp-default-fuel)
                             (cadr (lispm-turn-condition turn))))
      (should (equal (lispm-turn-available-restarts turn) '(more-fuel skip-tool abort)))
      (with-current-buffer (get-buffer (lispm-condition-buffer-name turn))
        (dolist (restart '("5: [MORE-FUEL]" "2: [SKIP-TOOL]" "4: [ABORT]"))
          (should (string-search restart (buffer-string)))))
      (should (lispm-run-lisp-running agent))
      (lispm-turn-restart turn 5)
      (lispm-e2e-own-settle agent)
      ;; The program went on, and ran out again.
      (should (eq (car (lispm-turn-condition turn)) 'lispm-lisp-fuel-exhausted))
      (should (string-search (format "after %d steps" (* 2 lispm-lisp-default-fuel))
                             (cadr (lispm-turn-condition turn))))
      (lispm-turn-restart turn 'skip-tool)
      (lispm-e2e-own-settle agent)
      (should (eq (lispm-turn-state turn) 'done))
      (should-not (lispm-run-lisp-running agent))
      (should (equal (mapcar (lambda (r) (plist-get r :text))
                             (lispm-e2e-run-lisp--results "Loop forever in Lisp"))
                     (list (format "Error: The program ran out of fuel after %d steps"
                                   (* 2 lispm-lisp-default-fuel))))))))

(ert-deftest lispm-e2e-run-lisp-recursion-runs-out-of-fuel ()
  "Unbounded recursion stops the turn at the fuel condition; ABORT ends the turn."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Recurse forever in Lisp")))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-lisp-fuel-exhausted))
      (should (string-search "calls nested deeper than 200" (cadr (lispm-turn-condition turn))))
      ;; The program is over: no MORE-FUEL.
      (should (equal (lispm-turn-available-restarts turn) '(skip-tool abort)))
      (lispm-turn-restart turn 'abort)
      (should (eq (lispm-turn-state turn) 'aborted))
      (should-not (lispm-run-lisp-running agent))
      (should-not (lispm-own-agent-busy-p agent)))))

(ert-deftest lispm-e2e-run-lisp-sleep-loop-refused ()
  "A loop that would sleep, or catch everything, is refused before it runs."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((turn (lispm-e2e-own-send agent "Sleep in a loop")))
      (should (eq (lispm-turn-state turn) 'done))
      (let ((results (mapcar (lambda (r) (plist-get r :text))
                             (lispm-e2e-run-lisp--results "Sleep in a loop"))))
        (should (= 2 (length results)))
        (should (string-prefix-p "Error: run_lisp refused (sleep-for 1): " (car results)))
        (should (string-search "sleep-for" (car results)))
        (should (string-prefix-p "Error: run_lisp refused (condition-case nil" (cadr results)))
        (should (string-search "could catch C-g" (cadr results)))))))

(ert-deftest lispm-e2e-run-lisp-c-g-stops-a-program ()
  "The quit key stops a program that computes; Emacs's timers ran meanwhile."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let* ((ticks 0)
           ;; A timer that fell behind catches up at most once: each
           ;; tick is a time Emacs ran it.
           (timer-max-repeats 1)
           (timer (run-at-time 0 0.01 (lambda () (cl-incf ticks))))
           run turn)
      (unwind-protect
          (progn
            ;; Read when the program starts: it could loop for minutes.
            (let ((lispm-lisp-default-fuel 1000000000))
              (lispm-own-agent-send agent "Count to a billion")
              (setq run (lispm-e2e-run-lisp--wait-running agent)))
            (setq ticks 0)
            (lispm-e2e-wait (lambda () (>= ticks 10)) 30 "ten ticks of a 10 ms timer")
            (should (memq run (lispm-run-lisp-running agent)))
            (should-not (lispm-run-waiting run))
            ;; Batch Emacs has no keyboard: the macro runs C-g's command
            ;; loop path, `keyboard-quit' and `pre-command-hook'.
            (condition-case nil
                (execute-kbd-macro (kbd "C-g"))
              (quit nil)))
        (cancel-timer timer))
      (setq turn (lispm-e2e-own-settle agent))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
      (should (string-search "The program was stopped (C-g)" (cadr (lispm-turn-condition turn))))
      (should-not (lispm-run-lisp-running agent))
      (lispm-turn-restart turn 'abort)
      (should (eq (lispm-turn-state turn) 'aborted)))))

(ert-deftest lispm-e2e-run-lisp-interrupt-stops-a-program ()
  "`lispm-own-agent-interrupt' in the session stops a program that computes."
  (lispm-e2e-own-with (agent "project" lispm-e2e-own-trusting)
    (let ((lispm-lisp-default-fuel 1000000000))
      (lispm-own-agent-send agent "Count to a billion")
      (lispm-e2e-run-lisp--wait-running agent))
    (with-current-buffer (lispm-own-agent-buffer agent)
      (call-interactively (keymap-lookup lispm-own-agent-mode-map "C-c C-k")))
    (let ((turn (lispm-e2e-own-settle agent)))
      (should-not (lispm-run-lisp-running agent))
      (should (eq (lispm-turn-state turn) 'stopped))
      (should (eq (car (lispm-turn-condition turn)) 'lispm-turn-tool-failed))
      (should (string-search "The program was stopped (interrupted)"
                             (cadr (lispm-turn-condition turn))))
      (lispm-turn-restart turn 'abort)
      (should (eq (lispm-turn-state turn) 'aborted)))))

(provide 'lispm-e2e-run-lisp)
;;; lispm-e2e-run-lisp.el ends here
