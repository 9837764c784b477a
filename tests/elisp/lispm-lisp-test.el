;;; lispm-lisp-test.el --- Tests of run_lisp's reader, checker and fuel  -*- lexical-binding: t; -*-

;;; Commentary:

;; Reading without read-time evaluation, the check's refusals (each
;; with its reason, and nothing run), what it lets through, fuel for
;; loops and recursion, conditions caught, and the tools bound from
;; BINDINGS.

;;; Code:

(require 'ert)
(require 'lispm-lisp)

(defvar lispm-lisp-test--ran nil
  "Set by the tools of these tests when they are called.")

(defun lispm-lisp-test--bindings ()
  "Return bindings for the tools `read-file' and `note'."
  (list (cons 'read-file (lambda (file) (push file lispm-lisp-test--ran)
                           (concat "text of " file)))
        (cons 'note (lambda (&rest args) (push args lispm-lisp-test--ran) t))))

(defun lispm-lisp-test--run (source &rest keys)
  "Read, check and run SOURCE with the test tools; KEYS go to `lispm-lisp-run'."
  (apply #'lispm-lisp-run (lispm-lisp-check (lispm-lisp-read source) '(read-file note))
         :bindings (lispm-lisp-test--bindings) keys))

(defmacro lispm-lisp-test--out-of-fuel (&rest body)
  "Return the `lispm-lisp-fuel-exhausted' BODY signals; fail if none.
Not `should-error': it catches only `error's, which this is not."
  (declare (indent 0))
  `(let ((err (condition-case err (progn ,@body nil)
                (lispm-lisp-fuel-exhausted err))))
     (should err)
     err))

(defun lispm-lisp-test--refusal (source)
  "Return the data of the `lispm-lisp-refused' checking SOURCE signals."
  (let ((err (should-error (lispm-lisp-check (lispm-lisp-read source) '(read-file note))
                           :type 'lispm-lisp-refused)))
    (cdr err)))

;;; Reading

(ert-deftest lispm-lisp-test-read ()
  (should (equal (lispm-lisp-read "(a 1) ; comment\n\"s\" ") '((a 1) "s")))
  (should (equal (lispm-lisp-read "  ") nil))
  (let ((err (should-error (lispm-lisp-read "(a) #.(delete-file \"x\")")
                           :type 'lispm-lisp-unreadable)))
    (should (string-match-p "read-time evaluation" (cadr err)))
    (should (= (nth 2 err) 7)))
  (let ((err (should-error (lispm-lisp-read "(a) (b") :type 'lispm-lisp-unreadable)))
    (should (= (nth 2 err) 5)))
  ;; No circular structure.
  (should-error (lispm-lisp-read "#1=(a . #1#)") :type 'lispm-lisp-unreadable))

;;; Refusals

(ert-deftest lispm-lisp-test-refused-with-reasons ()
  (dolist (case '(("(symbol-value 'user-mail-address)" "symbol-value" "global variable")
                  ("(setq lispm-policy-roles nil)" "lispm-policy-roles" "did not bind")
                  ("(shell-command \"id\")" "shell-command" "allow-list")
                  ("(funcall 'delete-file \"x\")" "delete-file" "allow-list")
                  ("(defmacro m () 1)" "defmacro" "defines a macro")
                  ("(eval '(delete-file \"x\"))" "eval" "not seen")
                  ("(default-value 'x)" "default-value" "global")
                  ("(buffer-local-value 'x (current-buffer))" "buffer-local-value" "buffer")
                  ("(recent-keys)" "recent-keys" "typed")
                  ("(process-list)" "process-list" "processes")
                  ("user-mail-address" "user-mail-address" "did not bind")
                  ("(let ((standard-output #'ignore)) (princ 1))" "standard-output" "global")
                  ("(with-temp-buffer 1)" "with-temp-buffer" "macro LispM does not trust")
                  ("(pcase 1 ((no-such-pattern a) 2))" "expanding ‘pcase’ failed" "no-such-pattern")
                  ("(condition-case nil (+ 1) (lispm-lisp-limit-exceeded nil))"
                   "lispm-lisp-limit-exceeded" "C-g")
                  ("(save-excursion 1)" "save-excursion" "special form")
                  ("(funcall #'funcall 'delete-file \"x\")" "funcall" "only be called directly")
                  ("(mapcar #'delete-file '(\"x\"))" "delete-file" "allow-list")
                  ("(let ((l (list 1))) (push 0 (car l)))" "setcar" "allow-list")
                  ("(plist-put (list 1 2) 1 3)" "plist-put" "allow-list")
                  ("(funcall #[(x) \"\" [] 1])" "literal" "function")
                  ("(condition-case nil (+ 1) (quit nil))" "quit" "C-g")
                  ("(condition-case nil (+ 1) ((error t) nil))" "handler for" "C-g")
                  ("(condition-case nil (+ 1) (lispm-error nil))" "lispm-error" "C-g")
                  ("(cl-labels ((if (x) x)) 1)" "if" "may not be named")))
    (let* ((data (lispm-lisp-test--refusal (car case)))
           (text (car data)))
      (ert-info ((car case))
        (should (string-match-p (regexp-quote (nth 1 case)) (substitute-quotes text)))
        (should (string-match-p (regexp-quote (nth 2 case)) (substitute-quotes text)))
        ;; The data names the form and the reason.
        (should (consp (cdr data)))
        (should (stringp (nth 2 data)))))))

(ert-deftest lispm-lisp-test-plain-computation-runs ()
  "`named-let', `letrec' and `pcase' are plain computation: they run, on fuel."
  (should (equal (plist-get (lispm-lisp-test--run
                             "(named-let fib ((n 15)) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))")
                            :value)
                 610))
  (should (equal (plist-get (lispm-lisp-test--run
                             "(letrec ((ev (lambda (n) (if (= n 0) t (funcall od (1- n)))))
                                       (od (lambda (n) (if (= n 0) nil (funcall ev (1- n))))))
                                (funcall ev 10))")
                            :value)
                 t))
  (should (equal (plist-get (lispm-lisp-test--run
                             "(mapcar (lambda (x)
                                        (pcase x
                                          (`(,a . ,_) a)
                                          ((pred stringp) 'string)
                                          ((or 'p 'q) 'pq)
                                          (_ 'other)))
                                      (list (list 1 2) \"s\" 'q 5))")
                            :value)
                 '(1 string pq other)))
  (should (equal (plist-get (lispm-lisp-test--run
                             "(let ((sum 0))
                                (pcase-dolist (`(,a . ,b) '((1 . 2) (3 . 4))) (setq sum (+ sum a b)))
                                (pcase-let ((`(,x ,y) (list 5 6))) (+ sum x y)))")
                            :value)
                 21))
  ;; A named-let that never ends burns fuel like any loop.
  (let ((err (lispm-lisp-test--out-of-fuel
               (lispm-lisp-test--run "(named-let loop ((i 0)) (loop (1+ i)))" :fuel 300))))
    (should (eq (car err) 'lispm-lisp-fuel-exhausted))))

(ert-deftest lispm-lisp-test-deep-nesting-refused ()
  "A program nested too deep is refused with a reason that names its form."
  (let* ((deep (concat (apply #'concat (make-list 5000 "(list ")) "1" (make-string 5000 ?\))))
         (data (lispm-lisp-test--refusal deep)))
    (should (string-match-p "nests deeper than 100" (car data)))
    (should (string-match-p "run_lisp refused (list (list" (car data)))))

(ert-deftest lispm-lisp-test-memory-full-stops-the-program ()
  "Once Emacs ran out of memory, the next step is the limit, which no handler catches."
  (let ((err (lispm-lisp-test--out-of-fuel
               (let ((memory-full nil))
                 (lispm-lisp-run
                  (lispm-lisp-check
                   (lispm-lisp-read "(dotimes (i 10) (condition-case nil (note i) (error nil)))")
                   '(note))
                  :bindings (list (cons 'note (lambda (i)
                                                (when (= i 3) (setq memory-full t))
                                                (error "Memory exhausted")))))))))
    (should (eq (car err) 'lispm-lisp-limit-exceeded))
    (should (equal (cddr err) '(memory)))))

(ert-deftest lispm-lisp-test-sleep-loop-refused ()
  "The loop `unsafep' passes is refused: `sleep-for', then a `t' handler."
  (should (string-match-p "sleep-for"
                          (car (lispm-lisp-test--refusal
                                "(while t (condition-case nil (sleep-for 1) (t nil)))"))))
  (should (string-match-p "handler for .t."
                          (car (lispm-lisp-test--refusal
                                "(while t (condition-case nil (+ 1 1) (t nil)))")))))

(ert-deftest lispm-lisp-test-nothing-runs-when-refused ()
  (setq lispm-lisp-test--ran nil)
  (lispm-lisp-test--refusal "(progn (read-file \"a\") (shell-command \"id\"))")
  (should-not lispm-lisp-test--ran))

(ert-deftest lispm-lisp-test-function-values-checked-at-run-time ()
  (let ((err (should-error (lispm-lisp-test--run
                            "(let ((f (car '(delete-file)))) (funcall f \"x\"))")
                           :type 'lispm-lisp-refused)))
    (should (string-match-p "delete-file" (cadr err))))
  (should-error (lispm-lisp-test--run
                 "(let ((f (car '(mapcar)))) (funcall f 'delete-file '(\"x\")))")
                :type 'lispm-lisp-refused))

;;; What runs

(ert-deftest lispm-lisp-test-runs-programs ()
  (setq lispm-lisp-test--ran nil)
  (should (equal (lispm-lisp-test--run
                  "(let ((total 0) (names nil))
                     (dolist (file '(\"a.el\" \"bb.el\"))
                       (let* ((text (read-file file)))
                         (when (string-match \"of \\\\(.*\\\\)\" text)
                           (push (match-string 1 text) names))
                         (setq total (+ total (length text)))))
                     (message \"%d chars\" total)
                     (list total (sort names #'string<)
                           (mapconcat (lambda (s) (upcase s)) names \",\")))")
                 '(:value (25 ("a.el" "bb.el") "BB.EL,A.EL") :printed "25 chars\n")))
  (should (equal lispm-lisp-test--ran '("bb.el" "a.el")))
  ;; Keyword arguments reach the tool as they are; a tool is a function value too.
  (setq lispm-lisp-test--ran nil)
  (lispm-lisp-test--run "(note :path \"x\" :n 2) (let ((f #'note)) (funcall f 1))")
  (should (equal lispm-lisp-test--ran '((1) (:path "x" :n 2))))
  (should (equal (plist-get (lispm-lisp-test--run
                             "(cl-labels ((fib (n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))))
                                (fib 20))")
                            :value)
                 6765))
  (should (equal (plist-get (lispm-lisp-test--run
                             "(condition-case err (error \"no %s\" 'way) (error (cadr err)))")
                            :value)
                 "no way"))
  (should (equal (lispm-lisp-test--run "(dotimes (i 3) (princ i)) (if-let* ((a 1)) (1+ a))")
                 '(:value 2 :printed "012"))))

(ert-deftest lispm-lisp-test-grep-is-the-tool ()
  "A tool named as an Emacs command is the tool inside the program only."
  (let ((checked (lispm-lisp-check '((grep "x")) '(grep))))
    (should (equal (plist-get (lispm-lisp-run checked :bindings (list (cons 'grep #'upcase)))
                              :value)
                   "X"))
    (should (equal (lispm-lisp-checked-tools checked) '(grep))))
  (should-error (lispm-lisp-run (lispm-lisp-check '((grep "x")) '(grep)) :bindings nil)
                :type 'lispm-lisp-error))

(ert-deftest lispm-lisp-test-allowed-functions-exist ()
  (dolist (name lispm-lisp-allowed-functions)
    (ert-info ((symbol-name name))
      (should (fboundp name))))
  (dolist (entry lispm-lisp--function-args)
    (should (memq (car entry) lispm-lisp-allowed-functions))))

;;; Fuel, and conditions caught

(ert-deftest lispm-lisp-test-fuel ()
  (let ((err (lispm-lisp-test--out-of-fuel (lispm-lisp-test--run "(while t)" :fuel 500))))
    (should (= (nth 2 err) 500)))
  ;; Not an `error': a handler for `error' does not swallow it.
  (lispm-lisp-test--out-of-fuel
    (lispm-lisp-test--run "(condition-case nil (while t) (error 'caught))" :fuel 100))
  (should-not (memq 'error (get 'lispm-lisp-fuel-exhausted 'error-conditions)))
  (lispm-lisp-test--out-of-fuel (lispm-lisp-test--run "(dolist (x (make-list 1000 0)) x)" :fuel 100))
  (lispm-lisp-test--out-of-fuel (lispm-lisp-test--run "(cl-labels ((f (n) (f (1+ n)))) (f 0))"))
  (lispm-lisp-test--out-of-fuel (lispm-lisp-test--run "(cl-labels ((f (n) (+ 1 (f n)))) (f 0))" :fuel 1000000))
  (lispm-lisp-test--out-of-fuel
    (lispm-lisp-test--run "(let ((n 0)) (mapc (lambda (_) (setq n (1+ n))) (make-list 50 0)))"
                          :fuel 10))
  ;; A cleanup that loops is stopped too.
  (lispm-lisp-test--out-of-fuel (lispm-lisp-test--run "(unwind-protect (while t) (while t))" :fuel 100))
  ;; ON-EMPTY gives more fuel, once.
  (let ((asked nil))
    (should (equal (plist-get (lispm-lisp-test--run
                               "(let ((i 0)) (while (< i 30) (setq i (1+ i))) i)"
                               :fuel 10 :on-empty (lambda (used) (push used asked) 100))
                              :value)
                   30))
    (should (equal asked '(10)))))

(ert-deftest lispm-lisp-test-catch ()
  "With CATCH, a condition that ends the program is its result, with its output."
  (let ((result (lispm-lisp-run
                 (lispm-lisp-check (lispm-lisp-read "(princ \"a\") (car 1)") nil)
                 :catch t)))
    (should (equal result '(:error (wrong-type-argument listp 1) :printed "a"))))
  (should (eq (car (plist-get (lispm-lisp-run (lispm-lisp-check '((while t)) nil)
                                              :fuel 5 :catch t)
                              :error))
              'lispm-lisp-fuel-exhausted)))

(ert-deftest lispm-lisp-test-no-interaction ()
  (should-error (lispm-lisp-run (lispm-lisp-check '((ask "x")) '(ask))
                                :bindings (list (cons 'ask #'read-string)))
                :type 'inhibited-interaction))

(ert-deftest lispm-lisp-test-sizes-capped ()
  (dolist (source '("(make-string 100000000 ?x)" "(make-list 100000000 0)"
                    "(number-sequence 1 100000000)" "(format \"%100000000d\" 1)"
                    "(funcall #'make-list 100000000 0)"))
    (ert-info (source)
      (should (string-match-p "limit" (cadr (should-error (lispm-lisp-test--run source)
                                                           :type 'error)))))))

(ert-deftest lispm-lisp-test-wrappers-keep-the-match-data ()
  "The functions LispM wraps leave the program's match data alone."
  (should (equal (plist-get (lispm-lisp-test--run
                             "(string-match \"b\" \"abc\") (format \"%5d\" 1) (message \"%s\" 2)
                              (list (match-beginning 0) (nreverse (list 1 2)) (delete 1 (list 1 2)))")
                            :value)
                 '(1 (2 1) (2)))))

(provide 'lispm-lisp-test)

;;; lispm-lisp-test.el ends here
