;;; lispm-lisp.el --- Check and run the agent's Lisp programs on fuel  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, lisp

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The language of `run_lisp': a program the model writes in Emacs
;; Lisp, read, checked and run in three steps.  All three happen in
;; the program's own sandboxed Emacs (lispm-lisp-child.el), never in
;; the user's: expanding a macro can run code (`eval-when-compile',
;; gv's places, rx's `eval'), so no check made by expanding could keep
;; the user's Emacs safe.  The check is the first line, the one that
;; gives the model a precise reason; the sandbox and its limits
;; (lispm-run-lisp.el) are what keep the user safe.
;;
;; Reading (`lispm-lisp-read').  Emacs's reader has no read-time
;; evaluation: it has no `#.' syntax at all, and signals
;; `invalid-read-syntax' on it, so reading never runs code.  The
;; source is read with `read-circle' nil (no `#1=' structure) and no
;; symbol shorthands; a source that does not read is a
;; `lispm-lisp-unreadable' whose data has the position.
;;
;; Checking (`lispm-lisp-check').  One walk over the forms expands the
;; trusted macros (`lispm-lisp-trusted-macros') as it meets them and
;; refuses any other macro, then allows only: the tools, the pure
;; functions of `lispm-lisp-allowed-functions', the special forms the
;; walk knows (quote, function, progn, prog1, if, cond, and, or,
;; while, let, let*, setq, condition-case, unwind-protect), lambdas,
;; and local functions the program defines with `cl-flet' or
;; `cl-labels' (handled by the walk itself, never by their macros,
;; which would expand the body with every macro there is).  It also
;; refuses: reading a variable the program did not bind, `setq' of
;; one it did not bind, binding a special (global) variable other than
;; `case-fold-search', a handler for `t', `quit', `debug' or a
;; condition the fuel condition belongs to, a function argument that
;; names a function off the list, and literals that are records or
;; function objects.  A refusal is a `lispm-lisp-refused' whose data
;; is (TEXT FORM REASON); nothing of the program has run.
;;
;; The result is instrumented: every `while' (so every `dolist' and
;; `dotimes') burns one unit of fuel per iteration, every lambda and
;; local function one per call, and calls nest at most
;; `lispm-lisp-max-depth' deep.  A value passed where a function is
;; expected, unless it is a literal the check saw, is checked when the
;; program runs: only the program's own closures and allowed
;; functions pass.  Functions that make big objects from a number
;; (`make-string', `make-list', `make-vector', `number-sequence', the
;; widths of `format') are capped at `lispm-lisp-max-size'.
;;
;; Running (`lispm-lisp-run') evaluates it with lexical binding,
;; under `inhibit-interaction', in a fresh temporary buffer, with the
;; tools bound to the functions given for them.  Fuel running out
;; signals `lispm-lisp-fuel-exhausted', which is deliberately not an
;; `error' (its conditions are only itself and `lispm-error'), so a
;; program's `(condition-case nil ... (error nil))' cannot swallow
;; it, and handlers that could are refused.  Stopping a program is
;; its caller's business: run_lisp runs it in an Emacs of its own, and
;; kills that Emacs (lispm-run-lisp.el).

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'lispm-base)

;;; Options

(defgroup lispm-lisp nil
  "The language of `run_lisp' programs: their fuel and limits."
  :group 'lispm
  :prefix "lispm-lisp-")

(defcustom lispm-lisp-default-fuel 100000
  "The fuel a `run_lisp' program starts with.
One unit is one loop iteration or one call of a function the program
defined."
  :type 'natnum
  :group 'lispm-lisp)

(defcustom lispm-lisp-max-depth 200
  "How deep calls of a `run_lisp' program's own functions may nest."
  :type 'natnum
  :group 'lispm-lisp)

(defcustom lispm-lisp-max-size 1000000
  "The largest string, list or vector a `run_lisp' program makes at once.
It caps `make-string', `make-list', `make-vector', `number-sequence'
and the field widths of `format'."
  :type 'natnum
  :group 'lispm-lisp)

;;; Errors

(lispm-define-error 'lispm-lisp-error "Error in a run_lisp program" 'lispm-error -32085)
(lispm-define-error 'lispm-lisp-unreadable "A run_lisp program that does not read"
                    'lispm-lisp-error -32086)
(lispm-define-error 'lispm-lisp-refused "A run_lisp program LispM will not run"
                    'lispm-lisp-error -32087)
(lispm-define-error 'lispm-lisp-fuel-exhausted "A run_lisp program ran out of fuel"
                    'lispm-error -32088)
;; Not an `error': a program's handler for `error' must not catch it.
(put 'lispm-lisp-fuel-exhausted 'error-conditions
     (remq 'error (get 'lispm-lisp-fuel-exhausted 'error-conditions)))
;; Its data: (TEXT LIMIT), LIMIT one of memory, time, cpu, calls,
;; approvals, output.  A kind of running out of fuel: the same
;; restarts, and no handler of the program's catches it.
(lispm-define-error 'lispm-lisp-limit-exceeded "A run_lisp program reached a limit"
                    'lispm-lisp-fuel-exhausted -32091)

;;; The allow-list

(defconst lispm-lisp-trusted-macros
  '(when unless dolist dotimes push pop lambda prog2 cl-incf cl-decf
    if-let* when-let* and-let* thread-first thread-last
    named-let letrec pcase pcase-exhaustive pcase-let pcase-let* pcase-dolist)
  "The macros a `run_lisp' program may use.
Each is expanded with `macroexpand-1', in the program's own Emacs, and
its expansion checked like the program's own code; `push', `pop',
`cl-incf' and `cl-decf' on anything but a variable expand to list
surgery, which is refused.")

(defconst lispm-lisp-max-nesting 100
  "How deep a `run_lisp' program's forms may nest, as written.")

(defconst lispm-lisp-allowed-functions
  '(;; Numbers.
    + - * / % mod 1+ 1- abs min max floor ceiling round truncate float
    ffloor fceiling fround ftruncate expt sqrt exp log sin cos tan asin acos atan
    logand logior logxor lognot ash isnan number-to-string string-to-number
    = /= < > <= >= zerop natnump integerp fixnump bignump numberp floatp cl-evenp
    cl-oddp cl-plusp cl-minusp
    ;; Objects.
    eq eql equal null not identity ignore always stringp symbolp consp listp
    atom vectorp sequencep keywordp booleanp characterp hash-table-p arrayp
    proper-list-p type-of symbol-name
    ;; Lists.
    car cdr car-safe cdr-safe caar cadr cdar cddr cons list append reverse
    length length= length< length> nth nthcdr last butlast take member memq
    memql assoc assq rassoc rassq alist-get assoc-default assoc-string
    plist-get plist-member remove remq copy-sequence copy-tree flatten-tree
    mapcar mapc mapcan mapconcat elt aref vconcat vector
    ;; Sequences.
    seq-elt seq-length seq-take seq-drop seq-subseq seq-reverse seq-concatenate
    seq-position seq-contains-p seq-filter seq-remove seq-map seq-mapn
    seq-reduce seq-find seq-some seq-every-p seq-count seq-sort seq-sort-by
    seq-min seq-max seq-first seq-rest seq-empty-p seq-uniq seq-group-by
    seq-partition seq-difference seq-intersection seq-union seq-mapcat
    ;; Strings and characters.
    concat substring string-to-list split-string string-join string-trim
    string-trim-left string-trim-right string-prefix-p string-suffix-p
    string-search string-replace replace-regexp-in-string upcase downcase
    capitalize upcase-initials char-to-string string-to-char
    string string= string-equal string< string-lessp string> string-greaterp
    string-empty-p string-blank-p string-version-lessp compare-strings
    string-distance char-equal string-lines string-width prin1-to-string
    ;; Regular expressions on strings.
    string-match string-match-p match-string match-beginning match-end
    regexp-quote regexp-opt
    ;; Hash tables of the program's own.
    gethash puthash remhash hash-table-count hash-table-keys
    hash-table-values maphash
    ;; JSON.
    json-serialize json-parse-string
    ;; Signalling, and the message of a condition a handler caught.
    signal error-message-string
    ;; Calling a function the check allows.
    funcall apply
    ;; Made safe by a wrapper (see `lispm-lisp--wrappers').
    sort nreverse delete delq
    make-string make-list make-vector number-sequence make-hash-table format
    format-message error user-error message princ prin1 print terpri)
  "The functions a `run_lisp' program may call, besides its tools.
They compute from their arguments only: none reads a global by name
\(`symbol-value', `default-value', `buffer-local-value' are left out,
though Emacs calls them side-effect-free), none touches a file, a
buffer other than the program's own, a process or the user, and none
changes shared data in place (`setcar', `nconc', `plist-put' and the
like are left out; `sort' sorts a copy, and `nreverse', `delete' and
`delq' are `reverse', `remove' and `remq', which copy: a string a
program holds may be a symbol's name).  Where one takes a function,
see `lispm-lisp--function-args'.")

(defconst lispm-lisp--function-args
  '((funcall 0) (apply 0) (mapcar 0) (mapc 0) (mapcan 0) (mapconcat 0)
    (maphash 0) (sort 1) (assoc 2) (alist-get 4) (assoc-default 2)
    (plist-get 2) (plist-member 2) (replace-regexp-in-string 1)
    (seq-position 2) (seq-contains-p 2) (seq-filter 0) (seq-remove 0)
    (seq-map 0) (seq-mapn 0) (seq-reduce 0) (seq-find 0) (seq-some 0)
    (seq-every-p 0) (seq-count 0) (seq-sort 0) (seq-sort-by 0 1) (seq-uniq 1)
    (seq-group-by 0) (seq-difference 2) (seq-intersection 2) (seq-union 2)
    (seq-mapcat 0))
  "Which arguments of the allowed functions are called as functions.
Each entry is (FUNCTION POSITION...), positions counted from 0.")

(defconst lispm-lisp--wrappers
  '((sort . lispm-lisp--sort) (nreverse . reverse) (delete . remove) (delq . remq)
    (make-string . lispm-lisp--make-string)
    (make-list . lispm-lisp--make-list) (make-vector . lispm-lisp--make-vector)
    (number-sequence . lispm-lisp--number-sequence)
    (make-hash-table . lispm-lisp--make-hash-table) (format . lispm-lisp--format)
    (format-message . lispm-lisp--format-message) (error . lispm-lisp--error)
    (user-error . lispm-lisp--user-error)
    (error-message-string . lispm-error-message)
    (message . lispm-lisp--message) (princ . lispm-lisp--princ)
    (prin1 . lispm-lisp--prin1) (print . lispm-lisp--print)
    (terpri . lispm-lisp--terpri))
  "Allowed functions a program calls through a safer function of LispM's.")

(defconst lispm-lisp--bindable-specials '(case-fold-search)
  "Special variables a program may bind (dynamically) all the same.")

(defconst lispm-lisp--constants
  '(most-positive-fixnum most-negative-fixnum float-pi float-e)
  "Global variables a program may read: constants.")

(defconst lispm-lisp--reasons
  '((symbol-value . "reads a global variable by name")
    (default-value . "reads a global variable by name")
    (buffer-local-value . "reads another buffer's variable")
    (symbol-function . "reads a global function by name")
    (set . "sets a global variable") (fset . "redefines a global function")
    (defalias . "defines a global function") (defun . "defines a global function")
    (defmacro . "defines a macro") (cl-defun . "defines a global function")
    (cl-defmacro . "defines a macro") (defvar . "defines a global variable")
    (defconst . "defines a global variable") (setq-default . "sets a global variable")
    (set-default . "sets a global variable") (eval . "evaluates code the check has not seen")
    (intern . "makes symbols from strings") (intern-soft . "looks symbols up by name")
    (read . "reads code the check has not seen")
    (recent-keys . "reads what the user typed") (process-list . "reads Emacs's processes"))
  "Why a function or form is refused, where there is more to say.")

(defvar lispm-lisp--allowed-table
  (let ((table (make-hash-table :test 'eq)))
    (dolist (name lispm-lisp-allowed-functions table)
      (puthash name t table)))
  "The allowed functions, as a set.")

(defun lispm-lisp--value-function-p (symbol)
  "Return non-nil if SYMBOL is an allowed function a program may pass around.
Those that call a function they are given (`funcall', `mapcar' ...)
may only be called directly, where the check sees that function."
  (and (gethash symbol lispm-lisp--allowed-table)
       (not (assq symbol lispm-lisp--function-args))))

;;; Reading

(defun lispm-lisp-read (source)
  "Return the list of forms of SOURCE, a string of Emacs Lisp.
Nothing is evaluated while reading (Emacs has no `#.'); a source that
does not read signals `lispm-lisp-unreadable' with the position
where reading stopped (1 the first character)."
  (with-temp-buffer
    (insert source)
    (goto-char (point-min))
    (let ((read-circle nil)
          (forms nil)
          (start nil))
      (setq-local read-symbol-shorthands nil)
      (condition-case err
          (while (progn (forward-comment (buffer-size)) (not (eobp)))
            (setq start (point))
            (push (read (current-buffer)) forms))
        ((invalid-read-syntax end-of-file)
         (let* ((what (cadr err))
                (position (if (eq (car err) 'end-of-file) start (point))))
           (lispm-signal
            'lispm-lisp-unreadable (list position)
            "The program does not read at position %d: %s" position
            (cond ((eq (car err) 'end-of-file) "it ends inside a form")
                  ((equal what "#.") "read-time evaluation (`#.') is refused")
                  (t (format "invalid syntax `%s'" what)))))))
      (nreverse forms))))

;;; Checking

(cl-defstruct (lispm-lisp-checked (:constructor lispm-lisp--make-checked)
                                  (:copier nil))
  "A program `lispm-lisp-check' allowed, ready for `lispm-lisp-run'.
FORM is a lambda form taking the tools' functions in the order of
TOOLS, the tools the program calls."
  form tools)

(defvar lispm-lisp--tools nil
  "While checking: the alist (TOOL . VARIABLE) of the program's tools.")

(defvar lispm-lisp--tools-used nil
  "While checking: the tools the program calls, newest first.")

(defun lispm-lisp-show (form)
  "Return FORM printed, cut to 100 characters."
  (let ((text (let ((print-length 8) (print-level 4)) (prin1-to-string form))))
    (if (> (length text) 100) (concat (substring text 0 97) "...") text)))

(defun lispm-lisp--refuse (form format-string &rest args)
  "Refuse the program because of FORM: FORMAT-STRING and ARGS say why."
  (let ((reason (apply #'format-message format-string args)))
    (lispm-signal 'lispm-lisp-refused (list form reason)
                  "run_lisp refused %s: %s" (lispm-lisp-show form) reason)))

(defun lispm-lisp-check (forms tools)
  "Check FORMS, a program, and return it checked and instrumented.
TOOLS is the list of symbols the program may call as tools.  Return a
`lispm-lisp-checked'; signal `lispm-lisp-refused' (data: TEXT, the
offending form and the reason) if the program may not run."
  (mapc #'lispm-lisp--check-nesting forms)
  (let* ((lispm-lisp--tools
          (mapcar (lambda (tool) (cons tool (make-symbol (symbol-name tool)))) tools))
         (lispm-lisp--tools-used nil)
         (lexical-binding t)
         (body (mapcar (lambda (form)
                         (condition-case nil
                             (lispm-lisp--walk form nil nil)
                           (excessive-lisp-nesting
                            (lispm-lisp--refuse form "its macros expand too deep"))))
                       forms))
         (used (reverse lispm-lisp--tools-used)))
    (lispm-lisp--make-checked
     :form `(lambda ,(mapcar (lambda (tool) (cdr (assq tool lispm-lisp--tools))) used)
              ,@body)
     :tools used)))

(defun lispm-lisp--check-nesting (form)
  "Refuse FORM if it nests deeper than `lispm-lisp-max-nesting'."
  (let ((stack (list (cons form 0))))
    (while stack
      (pcase-let ((`(,object . ,depth) (pop stack)))
        (when (> depth lispm-lisp-max-nesting)
          (lispm-lisp--refuse form "it nests deeper than %d" lispm-lisp-max-nesting))
        (cond ((consp object)
               (push (cons (cdr object) depth) stack)
               (push (cons (car object) (1+ depth)) stack))
              ((vectorp object)
               (dotimes (i (length object))
                 (push (cons (aref object i) (1+ depth)) stack))))))))

(defun lispm-lisp--expand (form)
  "Return FORM, a call of a trusted macro, expanded once; refuse it if that fails."
  (condition-case err
      (macroexpand-1 form nil)
    (error (lispm-lisp--refuse form "expanding `%s' failed: %s" (car form)
                               (error-message-string err)))))

(defun lispm-lisp--tool-variable (tool)
  "Return the variable for TOOL's function, noting that it is used."
  (cl-pushnew tool lispm-lisp--tools-used)
  (cdr (assq tool lispm-lisp--tools)))

(defun lispm-lisp--check-literal (form literal)
  "Refuse FORM if a record or a function object is in LITERAL."
  (let ((stack (list literal)))
    (while stack
      (let ((object (pop stack)))
        (cond ((consp object) (push (car object) stack) (push (cdr object) stack))
              ((or (symbolp object) (stringp object) (numberp object)))
              ((or (recordp object) (functionp object))
               (lispm-lisp--refuse form "its literal holds a %s, which a program may not make"
                                   (type-of object)))
              ((vectorp object) (setq stack (append object stack)))
              ((hash-table-p object)
               (maphash (lambda (key value) (push key stack) (push value stack)) object)))))))

(defun lispm-lisp--bindable (form symbol)
  "Refuse FORM unless SYMBOL may be bound by the program; return SYMBOL."
  (cond ((not (symbolp symbol)) (lispm-lisp--refuse form "`%S' is not a variable" symbol))
        ((or (null symbol) (eq symbol t) (keywordp symbol))
         (lispm-lisp--refuse form "`%s' is a constant" symbol))
        ((memq symbol lispm-lisp--bindable-specials) symbol)
        ((or (special-variable-p symbol) (boundp symbol))
         (lispm-lisp--refuse form "it binds the global variable `%s'" symbol))
        (t symbol)))

(defun lispm-lisp--walk-body (body vars fns)
  "Walk each form of BODY with VARS and FNS; return the new forms."
  (mapcar (lambda (form) (lispm-lisp--walk form vars fns)) body))

(defun lispm-lisp--walk (form vars fns)
  "Check FORM, where VARS are bound and FNS are local functions.
FNS is an alist (NAME . VARIABLE).  Return the instrumented form."
  (cond
   ((symbolp form)
    (cond ((or (null form) (eq form t) (keywordp form) (memq form vars)
               (memq form lispm-lisp--constants))
           form)
          (t (lispm-lisp--refuse form "it reads the variable `%s', which the program did not bind"
                                 form))))
   ((not (consp form)) (lispm-lisp--check-literal form form) form)
   ((not (proper-list-p form)) (lispm-lisp--refuse form "it is not a proper list"))
   (t
    (let ((head (car form)))
      (cond
       ((eq (car-safe head) 'lambda)
        (lispm-lisp--walk `(funcall ,head ,@(cdr form)) vars fns))
       ((not (symbolp head)) (lispm-lisp--refuse form "`%S' is not a function" head))
       ((assq head fns)
        `(funcall ,(cdr (assq head fns)) ,@(lispm-lisp--walk-body (cdr form) vars fns)))
       ((assq head lispm-lisp--tools)
        `(funcall ,(lispm-lisp--tool-variable head)
                  ,@(lispm-lisp--walk-body (cdr form) vars fns)))
       ((get head 'lispm-lisp-walker) (funcall (get head 'lispm-lisp-walker) form vars fns))
       ((memq head lispm-lisp-trusted-macros)
        (lispm-lisp--walk (lispm-lisp--expand form) vars fns))
       ((gethash head lispm-lisp--allowed-table) (lispm-lisp--walk-call form vars fns))
       (t (lispm-lisp--refuse
           form "%s"
           (cond ((assq head lispm-lisp--reasons)
                  (format-message "`%s' %s" head (cdr (assq head lispm-lisp--reasons))))
                 ((special-form-p head)
                  (format-message "`%s' is a special form run_lisp does not allow" head))
                 ((macrop head) (format-message "`%s' is a macro LispM does not trust" head))
                 ((fboundp head)
                  (format-message "`%s' is neither a tool nor a pure function on run_lisp's allow-list"
                                  head))
                 (t (format-message "`%s' is not a function" head))))))))))

(defun lispm-lisp--function-literal (form fn vars fns)
  "Check FN, named where FORM expects a function, as `function' would.
VARS and FNS are as for `lispm-lisp--walk'.  Return the form for it."
  (cond ((eq (car-safe fn) 'lambda) (lispm-lisp--walk-lambda fn vars fns))
        ((not (and fn (symbolp fn)))
         (lispm-lisp--refuse form "`%S' is not a function" fn))
        ((assq fn fns) (cdr (assq fn fns)))
        ((assq fn lispm-lisp--tools) (lispm-lisp--tool-variable fn))
        ((lispm-lisp--value-function-p fn)
         `(function ,(or (alist-get fn lispm-lisp--wrappers) fn)))
        ((gethash fn lispm-lisp--allowed-table)
         (lispm-lisp--refuse form "`%s' calls the function it is given, so it may only be called directly"
                             fn))
        (t (lispm-lisp--refuse form "it calls `%s', which is neither a tool nor on run_lisp's allow-list"
                               fn))))

(defun lispm-lisp--walk-call (form vars fns)
  "Check FORM, a call of an allowed function, with VARS and FNS."
  (let* ((head (car form))
         (positions (cdr (assq head lispm-lisp--function-args)))
         (index -1))
    (cons (or (alist-get head lispm-lisp--wrappers) head)
          (mapcar (lambda (arg)
                    (setq index (1+ index))
                    (cond ((not (memq index positions)) (lispm-lisp--walk arg vars fns))
                          ((memq (car-safe arg) '(quote function))
                           (lispm-lisp--function-literal form (cadr arg) vars fns))
                          (t (let ((walked (lispm-lisp--walk arg vars fns)))
                               (if (eq (car-safe walked) 'lispm-lisp--closure)
                                   walked
                                 `(lispm-lisp--function ,walked))))))
                  (cdr form)))))

(defun lispm-lisp--walk-lambda (lambda vars fns)
  "Check LAMBDA, a lambda form, with VARS and FNS; return its closure form."
  (unless (and (proper-list-p lambda) (listp (cadr lambda)))
    (lispm-lisp--refuse lambda "it is not a lambda form"))
  (let ((args (cl-remove-if (lambda (arg) (memq arg '(&optional &rest))) (cadr lambda))))
    (dolist (arg args) (lispm-lisp--bindable lambda arg))
    `(lispm-lisp--closure
      (function (lambda ,(cadr lambda)
                  (let ((lispm-lisp--depth (lispm-lisp--enter)))
                    ,@(lispm-lisp--walk-body (cddr lambda) (append args vars) fns)))))))

(defmacro lispm-lisp--define-walker (name args &rest body)
  "Define how the check walks the form NAME.
ARGS are (FORM VARS FNS); BODY returns the walked form."
  (declare (indent 2))
  `(put ',name 'lispm-lisp-walker (lambda ,args ,@body)))

(defun lispm-lisp--arity (form min &optional max)
  "Refuse FORM unless it has between MIN and MAX arguments."
  (let ((n (length (cdr form))))
    (when (or (< n min) (and max (> n max)))
      (lispm-lisp--refuse form "`%s' takes %s arguments, not %d" (car form)
                          (if max (if (= min max) min (format "%d to %d" min max))
                            (format "at least %d" min))
                          n))))

(lispm-lisp--define-walker quote (form _vars _fns)
  (lispm-lisp--arity form 1 1)
  (lispm-lisp--check-literal form (cadr form))
  form)

(lispm-lisp--define-walker function (form vars fns)
  (lispm-lisp--arity form 1 1)
  (lispm-lisp--function-literal form (cadr form) vars fns))

(dolist (name '(progn prog1 and or unwind-protect))
  (put name 'lispm-lisp-walker
       (lambda (form vars fns)
         (cons (car form) (lispm-lisp--walk-body (cdr form) vars fns)))))

(lispm-lisp--define-walker if (form vars fns)
  (lispm-lisp--arity form 2)
  (cons 'if (lispm-lisp--walk-body (cdr form) vars fns)))

(lispm-lisp--define-walker cond (form vars fns)
  (cons 'cond
        (mapcar (lambda (clause)
                  (unless (and (consp clause) (proper-list-p clause))
                    (lispm-lisp--refuse form "its clause `%S' is not a list" clause))
                  (lispm-lisp--walk-body clause vars fns))
                (cdr form))))

(lispm-lisp--define-walker while (form vars fns)
  (lispm-lisp--arity form 1)
  `(while (progn (lispm-lisp--tick) ,(lispm-lisp--walk (cadr form) vars fns))
     ,@(lispm-lisp--walk-body (cddr form) vars fns)))

(defun lispm-lisp--walk-let (form vars fns sequential)
  "Check FORM, a `let' (or `let*' if SEQUENTIAL), with VARS and FNS."
  (lispm-lisp--arity form 1)
  (unless (proper-list-p (cadr form))
    (lispm-lisp--refuse form "its bindings are not a list"))
  (let ((inner vars))
    (let ((bindings
           (mapcar (lambda (binding)
                     (let ((symbol (lispm-lisp--bindable form (if (consp binding) (car binding)
                                                                 binding))))
                       (when (and (consp binding) (not (proper-list-p binding))
                                  (> (length binding) 2))
                         (lispm-lisp--refuse form "its binding `%S' is malformed" binding))
                       (prog1 (list symbol (and (consp binding)
                                                (lispm-lisp--walk (cadr binding)
                                                                  (if sequential inner vars)
                                                                  fns)))
                         (push symbol inner))))
                   (cadr form))))
      `(,(car form) ,bindings ,@(lispm-lisp--walk-body (cddr form) inner fns)))))

(lispm-lisp--define-walker let (form vars fns) (lispm-lisp--walk-let form vars fns nil))
(lispm-lisp--define-walker let* (form vars fns) (lispm-lisp--walk-let form vars fns t))

(lispm-lisp--define-walker setq (form vars fns)
  (unless (cl-evenp (length (cdr form)))
    (lispm-lisp--refuse form "`setq' takes pairs of arguments"))
  (let ((args (cdr form)) (new nil))
    (while args
      (let ((symbol (pop args)) (value (pop args)))
        (unless (and (symbolp symbol) (memq symbol vars))
          (lispm-lisp--refuse form "it sets `%S', which the program did not bind" symbol))
        (push symbol new)
        (push (lispm-lisp--walk value vars fns) new)))
    (cons 'setq (nreverse new))))

(defun lispm-lisp--catchable (condition)
  "Return non-nil if a handler for CONDITION could catch LispM's stops."
  (or (memq condition '(t debug))
      (memq condition (get 'quit 'error-conditions))
      (memq condition (get 'lispm-lisp-fuel-exhausted 'error-conditions))
      (memq 'lispm-lisp-fuel-exhausted (get condition 'error-conditions))))

(lispm-lisp--define-walker condition-case (form vars fns)
  (lispm-lisp--arity form 2)
  (let* ((var (cadr form))
         (inner (if var (cons (lispm-lisp--bindable form var) vars) vars)))
    `(condition-case ,var ,(lispm-lisp--walk (nth 2 form) vars fns)
       ,@(mapcar
          (lambda (handler)
            (unless (and (consp handler) (proper-list-p handler))
              (lispm-lisp--refuse form "its handler `%S' is not a list" handler))
            (dolist (condition (if (listp (car handler)) (car handler) (list (car handler))))
              (unless (symbolp condition)
                (lispm-lisp--refuse form "`%S' is not a condition" condition))
              (when (lispm-lisp--catchable condition)
                (lispm-lisp--refuse
                 form "a handler for `%s' could catch C-g or LispM's stop" condition)))
            (cons (car handler) (lispm-lisp--walk-body (cdr handler) inner fns)))
          (nthcdr 3 form)))))

(defun lispm-lisp--walk-local-functions (form vars fns recursive)
  "Check FORM, a `cl-flet' (or `cl-labels' if RECURSIVE), with VARS and FNS."
  (lispm-lisp--arity form 1)
  (unless (proper-list-p (cadr form))
    (lispm-lisp--refuse form "its definitions are not a list"))
  (let* ((definitions (cadr form))
         (names (mapcar
                 (lambda (definition)
                   (let ((name (car-safe definition)))
                     (unless (and name (symbolp name) (proper-list-p definition)
                                  (listp (cadr definition)))
                       (lispm-lisp--refuse form "`%S' is not (NAME ARGS BODY...)" definition))
                     (when (or (special-form-p name) (macrop name) (get name 'lispm-lisp-walker))
                       (lispm-lisp--refuse form "a local function may not be named `%s'" name))
                     (cons name (make-symbol (symbol-name name)))))
                 definitions))
         (inner (append names fns))
         (closures (mapcar (lambda (definition)
                             (lispm-lisp--walk-lambda (cons 'lambda (cdr definition))
                                                      vars (if recursive inner fns)))
                           definitions))
         (body (lispm-lisp--walk-body (cddr form) vars inner)))
    (if recursive
        `(let ,(mapcar #'cdr names)
           ,@(cl-mapcar (lambda (name closure) `(setq ,(cdr name) ,closure)) names closures)
           ,@body)
      `(let ,(cl-mapcar (lambda (name closure) (list (cdr name) closure)) names closures)
         ,@body))))

(lispm-lisp--define-walker cl-flet (form vars fns)
  (lispm-lisp--walk-local-functions form vars fns nil))
(lispm-lisp--define-walker cl-labels (form vars fns)
  (lispm-lisp--walk-local-functions form vars fns t))

;;; Running

(defvar lispm-lisp--fuel 0 "While a program runs: the fuel left.")
(defvar lispm-lisp--used 0 "While a program runs: the fuel burnt.")
(defvar lispm-lisp--depth 0 "While a program runs: how deep its calls nest.")
(defvar lispm-lisp--on-empty nil "While a program runs: what to call when fuel runs out.")
(defvar lispm-lisp--exhausted nil "While a program runs: non-nil once fuel ran out.")
(defvar lispm-lisp--closures nil "While a program runs: its closures, as a weak set.")

(defun lispm-lisp--out-of-fuel (why)
  "Signal `lispm-lisp-fuel-exhausted', WHY being the reason."
  (setq lispm-lisp--exhausted t lispm-lisp--fuel 0)
  (lispm-signal 'lispm-lisp-fuel-exhausted (list lispm-lisp--used)
                "The program ran out of fuel after %d steps%s" lispm-lisp--used why))

(defun lispm-lisp--tick ()
  "Burn one unit of fuel; refuel, or signal, when due.
Once Emacs ran out of memory, signal `lispm-lisp-limit-exceeded': the
program may have caught the `error' that said so."
  (when memory-full
    (setq lispm-lisp--exhausted t lispm-lisp--fuel 0)
    (lispm-signal 'lispm-lisp-limit-exceeded '(memory)
                  "The program ran out of memory (its Emacs's memory limit)"))
  (when (<= lispm-lisp--fuel 0)
    (let ((more (and lispm-lisp--on-empty (not lispm-lisp--exhausted)
                     (funcall lispm-lisp--on-empty lispm-lisp--used))))
      (if (natnump more)
          (setq lispm-lisp--fuel more)
        (lispm-lisp--out-of-fuel ""))))
  (setq lispm-lisp--fuel (1- lispm-lisp--fuel)
        lispm-lisp--used (1+ lispm-lisp--used))
  nil)

(defun lispm-lisp-burn (units)
  "Burn UNITS of the running program's fuel: one for each step."
  (dotimes (_ units)
    (lispm-lisp--tick)))

(defun lispm-lisp--enter ()
  "Burn fuel for a call of the program's own; return its new depth."
  (lispm-lisp--tick)
  (when (>= lispm-lisp--depth lispm-lisp-max-depth)
    (lispm-lisp--out-of-fuel (format " (calls nested deeper than %d)" lispm-lisp-max-depth)))
  (1+ lispm-lisp--depth))

(defun lispm-lisp--closure (function)
  "Note FUNCTION as one the program made; return it."
  (puthash function t lispm-lisp--closures)
  function)

(defun lispm-lisp--function (value)
  "Return VALUE, to be called as a function, if it may be called.
A program's closure, an allowed function, nil or a string (where
functions take a string too) pass; anything else is refused."
  (cond ((or (null value) (stringp value) (gethash value lispm-lisp--closures)) value)
        ((and (symbolp value) (lispm-lisp--value-function-p value))
         (or (alist-get value lispm-lisp--wrappers) value))
        (t (lispm-signal 'lispm-lisp-refused (list value "not a function it may call")
                         "run_lisp refused to call %s: it is not a function the program may call"
                         (lispm-lisp-show value)))))

(defun lispm-lisp--size (n)
  "Return N, a size, or signal an error if it is over `lispm-lisp-max-size'."
  (when (and (integerp n) (> n lispm-lisp-max-size))
    (error "A program may not make an object of %d elements (the limit is %d)"
           n lispm-lisp-max-size))
  n)

(defun lispm-lisp--sort (sequence predicate)
  "Return a sorted copy of SEQUENCE, ordered by PREDICATE."
  (sort (copy-sequence sequence) predicate))

(defun lispm-lisp--make-string (length init &optional multibyte)
  "Call `make-string' with LENGTH, INIT and MULTIBYTE, LENGTH capped."
  (make-string (lispm-lisp--size length) init multibyte))

(defun lispm-lisp--make-list (length init)
  "Call `make-list' with LENGTH and INIT, LENGTH capped."
  (make-list (lispm-lisp--size length) init))

(defun lispm-lisp--make-vector (length init)
  "Call `make-vector' with LENGTH and INIT, LENGTH capped."
  (make-vector (lispm-lisp--size length) init))

(defun lispm-lisp--number-sequence (from &optional to step)
  "Call `number-sequence' with FROM, TO and STEP, its length capped."
  (when (and (numberp from) (numberp to))
    (lispm-lisp--size (floor (abs (- to from)) (abs (or step 1)))))
  (number-sequence from to step))

(defun lispm-lisp--format (string &rest objects)
  "Call `format-message' with STRING and OBJECTS, its field widths capped."
  ;; The program's match data are its own: a `string-match' of its, then
  ;; a `format', then its `match-end'.
  (when (stringp string)
    (save-match-data
      (let ((start 0))
        (while (string-match "%[-+ #0]*\\([0-9]*\\)\\(?:\\.\\([0-9]+\\)\\)?" string start)
          (dolist (group '(1 2))
            (let ((digits (match-string group string)))
              (when (and digits (not (string-empty-p digits)))
                (lispm-lisp--size (string-to-number digits)))))
          (setq start (max (1+ start) (match-end 0)))))))
  (apply #'format string objects))

(defun lispm-lisp--format-message (string &rest objects)
  "Call `format-message' with STRING and OBJECTS, its field widths capped."
  (apply #'lispm-lisp--format string objects)
  (apply #'format-message string objects))

(defun lispm-lisp--error (string &rest objects)
  "Signal an `error' whose message is STRING formatted with OBJECTS."
  (signal 'error (list (apply #'lispm-lisp--format-message string objects))))

(defun lispm-lisp--user-error (string &rest objects)
  "Signal a `user-error' whose message is STRING formatted with OBJECTS."
  (signal 'user-error (list (apply #'lispm-lisp--format-message string objects))))

(defun lispm-lisp--make-hash-table (&rest keywords)
  "Call `make-hash-table' with KEYWORDS, its :size capped."
  (lispm-lisp--size (plist-get keywords :size))
  (apply #'make-hash-table keywords))

(defun lispm-lisp--message (string &rest objects)
  "Print STRING formatted with OBJECTS, and a newline, to the program's output."
  (let ((text (apply #'lispm-lisp--format string objects)))
    (princ text)
    (terpri)
    text))

(defun lispm-lisp--princ (object)
  "Print OBJECT to the program's output as `princ' does."
  (princ object))

(defun lispm-lisp--prin1 (object)
  "Print OBJECT to the program's output as `prin1' does."
  (prin1 object))

(defun lispm-lisp--print (object)
  "Print OBJECT to the program's output as `print' does."
  (print object))

(defun lispm-lisp--terpri ()
  "Print a newline to the program's output."
  (terpri))

(defun lispm-lisp--apply (checked functions)
  "Run CHECKED with the tools' FUNCTIONS; return (:value VALUE)."
  (list :value (apply (eval (lispm-lisp-checked-form checked) t) functions)))

(cl-defun lispm-lisp-run (checked &key (fuel lispm-lisp-default-fuel) bindings on-empty catch)
  "Run CHECKED, a program `lispm-lisp-check' returned, on FUEL.
BINDINGS is an alist (TOOL . FUNCTION) giving each tool the program
calls its function.  ON-EMPTY, if non-nil, is called with the fuel
used when the fuel runs out, once; a natural number it returns is more
fuel, anything else lets `lispm-lisp-fuel-exhausted' be signalled.
If CATCH is non-nil, a condition that ends the program, a `quit' or
`lispm-lisp-fuel-exhausted' included, is returned as (:error ERR
:printed TEXT) instead of signalled.
Return (:value VALUE :printed TEXT), TEXT what the program printed."
  (let* ((functions
          (mapcar (lambda (tool)
                    (or (alist-get tool bindings)
                        (lispm-signal 'lispm-lisp-error (list tool)
                                      "No function for the tool `%s'" tool)))
                  (lispm-lisp-checked-tools checked)))
         (output (generate-new-buffer " *lispm-lisp-output*" t)))
    (unwind-protect
        (let ((lispm-lisp--fuel fuel)
              (lispm-lisp--used 0)
              (lispm-lisp--depth 0)
              (lispm-lisp--on-empty on-empty)
              (lispm-lisp--exhausted nil)
              (lispm-lisp--closures (let ((table (make-hash-table :test 'eq :weakness 'key)))
                                      (dolist (function functions table)
                                        (puthash function t table))))
              (inhibit-interaction t)
              (max-lisp-eval-depth (max max-lisp-eval-depth 8000))
              (standard-output output)
              (case-fold-search t))
          (append (save-match-data
                    (with-temp-buffer
                      (if (not catch)
                          (lispm-lisp--apply checked functions)
                        (condition-case err
                            (lispm-lisp--apply checked functions)
                          ((error quit lispm-lisp-fuel-exhausted)
                           (list :error err))))))
                  (list :printed (with-current-buffer output (buffer-string)))))
      (kill-buffer output))))

(provide 'lispm-lisp)

;;; lispm-lisp.el ends here
