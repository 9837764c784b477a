;;; lispm-app-mycin-shell.el --- An EMYCIN shell: certainty factors and backward chaining  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The expert-system shell behind LispM's MYCIN, written afresh from
;; the description of EMYCIN in Peter Norvig's "Paradigms of Artificial
;; Intelligence Programming" (1992), chapter 16.
;;
;; A knowledge base has contexts (types such as patient, culture and
;; organism, with their initial-data and goal parameters), typed
;; parameters, and rules whose premises and conclusions are
;; (PARM CONTEXT OP VALUE) lists and whose strength is a certainty
;; factor (CF) in [-1, 1].  A consultation creates instances of the
;; contexts, asks for the initial data, and finds the goals by
;; backward chaining: every rule that concludes about a parameter is
;; tried, premises are found out in turn (by rules or by asking), each
;; question is asked at most once per instance, and evidence is
;; combined with the CF rules.  A CF counts as true only above 0.2.
;;
;; A consultation is a pure function of the user's replies:
;; `lispm-mycin-run' takes the replies typed so far and returns the
;; transcript, ending at the next question if the replies run out.
;; The consultation buffer re-runs it after each reply; tests replay
;; whole consultations the same way.

;;; Code:

(require 'lispm-base)
(require 'cl-lib)
(require 'subr-x)

(define-error 'lispm-mycin-error "MYCIN error" 'lispm-error)

;;; Certainty factors

(defun lispm-mycin-cf-p (x)
  "Return non-nil if X is a valid certainty factor, a number in [-1, 1]."
  (and (numberp x) (<= -1 x 1)))

(defun lispm-mycin-cf-or (a b)
  "Combine the certainty factors A and B of two pieces of evidence.
Signal `lispm-mycin-error' when A and B are certainly true and
certainly false at once."
  (cond ((and (> a 0) (> b 0)) (- (+ a b) (* a b)))
        ((and (< a 0) (< b 0)) (+ a b (* a b)))
        ((= (min (abs a) (abs b)) 1)
         (signal 'lispm-mycin-error (list "Contradictory certainty factors" a b)))
        (t (/ (+ a b) (- 1.0 (min (abs a) (abs b)))))))

(defun lispm-mycin-cf-and (a b)
  "Return the certainty factor of the conjunction of A and B."
  (min a b))

(defun lispm-mycin-true-p (cf)
  "Return non-nil if CF counts as true: strictly above 0.2."
  (> cf 0.2))

(defun lispm-mycin-false-p (cf)
  "Return non-nil if CF counts as false: strictly below -0.8."
  (< cf -0.8))

;;; Knowledge bases

(cl-defstruct (lispm-mycin-parm (:constructor lispm-mycin-parm--create)
                                (:copier nil))
  "A parameter: something a consultation finds out about an instance."
  (name nil :documentation "The parameter's symbol.")
  (type 'any :documentation "`any', `number' or (member VALUE...).")
  (prompt nil :documentation "A format string for the question, or nil.
Its one argument is the instance's name.")
  (ask-first nil :documentation "Non-nil to ask before trying rules.")
  (reader 'datum :documentation "`datum' to read a Lisp value, `line' for text."))

(cl-defstruct (lispm-mycin-rule (:constructor lispm-mycin-rule--create)
                                (:copier nil))
  "A rule: if all PREMISES hold, the CONCLUSIONS follow with strength CF."
  (number nil :documentation "The rule's number, as in Shortliffe 1976.")
  (premises nil :documentation "A list of (PARM CONTEXT OP VALUE).")
  (cf nil :documentation "The rule's certainty factor.")
  (conclusions nil :documentation "A list of (PARM CONTEXT is VALUE)."))

(cl-defstruct (lispm-mycin-kb (:constructor lispm-mycin-kb--create)
                              (:copier nil))
  "A knowledge base: contexts, parameters and rules."
  (contexts nil :documentation "A list of (NAME INITIAL-PARMS GOAL-PARMS).")
  (parm-table nil :documentation "A hash table from names to parameters.")
  (rule-table nil :documentation "A hash table from parameter names to rules."))

(defconst lispm-mycin--operators '(is = < > <= >=)
  "The operators a premise may use; `is' is equality.")

(defun lispm-mycin--check-condition (condition conclusion)
  "Signal `lispm-mycin-error' unless CONDITION is well formed.
With CONCLUSION non-nil it must use the operator `is'."
  (pcase condition
    (`(,(pred symbolp) ,(pred symbolp) ,op ,_)
     (unless (if conclusion (eq op 'is) (memq op lispm-mycin--operators))
       (signal 'lispm-mycin-error (list "Bad operator" condition))))
    (_ (signal 'lispm-mycin-error (list "Bad condition" condition)))))

(defun lispm-mycin--make-rule (spec)
  "Return the rule described by SPEC.
SPEC is (NUMBER :if PREMISES :cf CF :then CONCLUSIONS)."
  (let ((number (car spec))
        (premises (plist-get (cdr spec) :if))
        (cf (plist-get (cdr spec) :cf))
        (conclusions (plist-get (cdr spec) :then)))
    (unless (lispm-mycin-cf-p cf)
      (signal 'lispm-mycin-error (list "Bad certainty factor" number cf)))
    (dolist (p premises) (lispm-mycin--check-condition p nil))
    (dolist (c conclusions) (lispm-mycin--check-condition c t))
    (lispm-mycin-rule--create :number number :premises premises :cf cf
                              :conclusions conclusions)))

(defun lispm-mycin-make-kb (contexts parms rules)
  "Return a knowledge base.
CONTEXTS lists (NAME INITIAL-PARMS GOAL-PARMS) in the order a
consultation visits them.  PARMS lists (NAME . PROPERTIES), where the
properties `:type', `:prompt', `:ask-first' and `:reader' are those
of `lispm-mycin-parm'.  RULES lists (NUMBER :if PREMISES :cf CF
:then CONCLUSIONS); the rules for a parameter are tried newest first,
as in EMYCIN."
  (let ((parm-table (make-hash-table :test #'eq))
        (rule-table (make-hash-table :test #'eq)))
    (pcase-dolist (`(,name . ,props) parms)
      (puthash name (apply #'lispm-mycin-parm--create :name name props)
               parm-table))
    (dolist (rule (mapcar #'lispm-mycin--make-rule rules))
      (dolist (parm (delete-dups (mapcar #'car (lispm-mycin-rule-conclusions rule))))
        (push rule (gethash parm rule-table))))
    (lispm-mycin-kb--create :contexts contexts :parm-table parm-table
                            :rule-table rule-table)))

(defun lispm-mycin-kb-parm (kb name)
  "Return the parameter NAME of KB.
A parameter that only rules mention gets a default: any type, the
default question, rules first."
  (or (gethash name (lispm-mycin-kb-parm-table kb))
      (lispm-mycin-parm--create :name name)))

(defun lispm-mycin-kb-rules (kb parm)
  "Return the rules of KB that conclude about PARM, newest first."
  (gethash parm (lispm-mycin-kb-rule-table kb)))

;;; Printing rules and findings

(defun lispm-mycin--name (x)
  "Return X, a symbol, number or string, as it is printed: symbols upcased."
  (if (symbolp x) (upcase (symbol-name x)) (format "%s" x)))

(defun lispm-mycin-condition-text (condition)
  "Return CONDITION, a (PARM CONTEXT OP VALUE) list, in pseudo-English."
  (pcase-let ((`(,parm ,context ,op ,value) condition))
    (pcase value
      ('yes (format "THE %s IS %s" (lispm-mycin--name context)
                    (lispm-mycin--name parm)))
      ('no (format "THE %s IS NOT %s" (lispm-mycin--name context)
                   (lispm-mycin--name parm)))
      (_ (format "THE %s OF THE %s %s %s" (lispm-mycin--name parm)
                 (lispm-mycin--name context) (lispm-mycin--name op)
                 (lispm-mycin--name value))))))

(defun lispm-mycin--evidence (cf)
  "Return the words for evidence of strength CF."
  (cond ((= cf 1) "certain evidence")
        ((> cf 0.8) "strongly suggestive evidence")
        ((> cf 0.5) "suggestive evidence")
        ((> cf 0) "weakly suggestive evidence")
        ((= cf 0) "NO evidence either way")
        (t (concat (lispm-mycin--evidence (- cf)) " AGAINST the conclusion"))))

(defun lispm-mycin--conditions-lines (conditions)
  "Return CONDITIONS as numbered lines: 1), 2), 3) ..."
  (cl-loop for condition in conditions
           for i from 1
           collect (format "    %d) %s" i (lispm-mycin-condition-text condition))))

(defun lispm-mycin-rule-lines (rule &optional premises)
  "Return the lines that print RULE.
With PREMISES, print those instead of the rule's own premises."
  (append (list (format "Rule %s:" (lispm-mycin-rule-number rule))
                "  If")
          (lispm-mycin--conditions-lines (or premises (lispm-mycin-rule-premises rule)))
          (list (format "  Then there is %s (%s) that"
                        (lispm-mycin--evidence (lispm-mycin-rule-cf rule))
                        (lispm-mycin-rule-cf rule)))
          (lispm-mycin--conditions-lines (lispm-mycin-rule-conclusions rule))))

(defun lispm-mycin-findings-line (parm values)
  "Return the findings line for PARM with VALUES, an alist (VALUE . CF).
Values are listed by decreasing certainty factor."
  (format " %s: %s" (lispm-mycin--name parm)
          (if values
              (mapconcat (lambda (v) (format "%s (%.3f)" (lispm-mycin--name (car v))
                                             (cdr v)))
                         (sort (copy-sequence values)
                               (lambda (a b) (> (cdr a) (cdr b))))
                         "   ")
            "unknown")))

;;; A consultation's state

(cl-defstruct (lispm-mycin--run (:constructor lispm-mycin--run-create)
                                (:copier nil))
  "The state of one consultation."
  (kb nil :documentation "The knowledge base.")
  (replies nil :documentation "The user's replies not yet read.")
  (output nil :documentation "The transcript so far, as strings, newest first.")
  (values (make-hash-table :test #'equal)
          :documentation "(PARM . INSTANCE) -> alist (VALUE . CF).")
  (known (make-hash-table :test #'equal)
         :documentation "(PARM . INSTANCE) -> non-nil once found out.")
  (asked (make-hash-table :test #'equal)
         :documentation "(PARM . INSTANCE) -> t once asked.")
  (current (make-hash-table :test #'eq)
           :documentation "Context name -> its current instance.")
  (counts (make-hash-table :test #'eq)
          :documentation "Context name -> instances made so far."))

(defvar lispm-mycin--run nil
  "The consultation being run, a `lispm-mycin--run'.")

(defvar lispm-mycin--rule nil
  "What the consultation is doing: a rule, `initial' or `goal'.
The reply WHY explains it.")

(defun lispm-mycin--emit (format-string &rest args)
  "Add a line, FORMAT-STRING applied to ARGS, to the transcript."
  (push (concat (apply #'format format-string args) "\n")
        (lispm-mycin--run-output lispm-mycin--run)))

(defun lispm-mycin--emit-lines (lines)
  "Add LINES to the transcript."
  (dolist (line lines) (lispm-mycin--emit "%s" line)))

(defun lispm-mycin--values (parm inst)
  "Return the values found for PARM of INST, an alist (VALUE . CF)."
  (gethash (cons parm inst) (lispm-mycin--run-values lispm-mycin--run)))

(defun lispm-mycin--add-value (parm inst value cf)
  "Record VALUE with certainty CF for PARM of INST, combining evidence."
  (let* ((key (cons parm inst))
         (table (lispm-mycin--run-values lispm-mycin--run))
         (old (assoc value (gethash key table))))
    (if old
        (setcdr old (lispm-mycin-cf-or (cdr old) cf))
      (push (cons value cf) (gethash key table)))))

(defun lispm-mycin--instance (context)
  "Return the current instance of CONTEXT."
  (gethash context (lispm-mycin--run-current lispm-mycin--run)))

(defun lispm-mycin--new-instance (context)
  "Make a new instance of CONTEXT its current one, announce it and return it."
  (let* ((counts (lispm-mycin--run-counts lispm-mycin--run))
         (n (puthash context (1+ (gethash context counts 0)) counts))
         (inst (format "%s-%d" (lispm-mycin--name context) n)))
    (puthash context inst (lispm-mycin--run-current lispm-mycin--run))
    (lispm-mycin--emit "------ %s ------" inst)
    inst))

(defun lispm-mycin--display-name (inst)
  "Return the name to use for INST in questions: its `name' if known."
  (or (car (car (lispm-mycin--values 'name inst))) inst))

;;; Questions and replies

(defun lispm-mycin--read (prompt)
  "Return the user's next reply to PROMPT, echoing both in the transcript.
When no reply is left, end the run with PROMPT as the pending question."
  (let ((run lispm-mycin--run))
    (if-let* ((reply (pop (lispm-mycin--run-replies run))))
        (progn (lispm-mycin--emit "%s %s" prompt reply)
               reply)
      (push (concat prompt " ") (lispm-mycin--run-output run))
      (throw 'lispm-mycin--need-reply prompt))))

(defun lispm-mycin--legal-p (parm value)
  "Return non-nil if VALUE is of the type of PARM."
  (pcase (lispm-mycin-parm-type parm)
    ('any t)
    ('number (numberp value))
    (`(member . ,legal) (member value legal))))

(defun lispm-mycin--read-datum (string)
  "Return the Lisp datum that is all of STRING, or nil."
  (condition-case nil
      (pcase-let ((`(,datum . ,end) (read-from-string string)))
        (and (= end (length string)) datum))
    ((invalid-read-syntax end-of-file) nil)))

(defun lispm-mycin--parse-values (parm datum)
  "Return DATUM as an alist (VALUE . CF) of legal values of PARM, or nil.
DATUM is one value, or a list (VALUE CF VALUE CF ...)."
  (if (atom datum)
      (and (lispm-mycin--legal-p parm datum) (list (cons datum 1.0)))
    (and (proper-list-p datum)
         (cl-evenp (length datum))
         (cl-loop for (value cf) on datum by #'cddr
                  always (and (lispm-mycin--legal-p parm value)
                              (lispm-mycin-cf-p cf))
                  collect (cons value (float cf))))))

(defun lispm-mycin-parse-reply (parm reply)
  "Return what the string REPLY to a question about PARM means.
That is one of the keywords `:type' (for ?), `:why', `:rule',
`:help', `:unknown' and `:illegal', or an alist (VALUE . CF) of the
values given."
  (let* ((text (string-trim reply))
         (word (downcase text)))
    (pcase word
      ("?" :type)
      ("why" :why)
      ("rule" :rule)
      ("help" :help)
      ((or "unknown" "unk") :unknown)
      ("" :illegal)
      (_ (or (if (eq (lispm-mycin-parm-reader parm) 'line)
                 (list (cons text 1.0))
               (lispm-mycin--parse-values parm (lispm-mycin--read-datum word)))
             :illegal)))))

(defconst lispm-mycin--help-lines
  '("Type one of the following:"
    " ?        to see the legal answers"
    " why      to see why the question is asked"
    " rule     to see the rule being tried"
    " help     to see this list"
    " unknown  (or unk) if you do not know"
    " xxx      a value, taken as certain"
    " (xxx .5 yyy .4)  several values, each with a certainty factor")
  "The reply to HELP.")

(defun lispm-mycin--known-true-p (premise)
  "Return non-nil if PREMISE is already true, without asking anything."
  (lispm-mycin-true-p (lispm-mycin--eval-condition premise nil)))

(defun lispm-mycin--explain-why (parm)
  "Add to the transcript why PARM is being asked for."
  (let ((name (lispm-mycin--name (lispm-mycin-parm-name parm)))
        (rule lispm-mycin--rule))
    (lispm-mycin--emit "[Why is the value of %s being asked for?]" name)
    (if (symbolp rule)
        (lispm-mycin--emit "%s is one of the %s parameters." name
                           (lispm-mycin--name rule))
      (let* ((premises (lispm-mycin-rule-premises rule))
             (known (cl-remove-if-not #'lispm-mycin--known-true-p premises)))
        (when known
          (lispm-mycin--emit "It is known that:")
          (lispm-mycin--emit-lines (lispm-mycin--conditions-lines known))
          (lispm-mycin--emit "Therefore,"))
        (lispm-mycin--emit-lines
         (lispm-mycin-rule-lines rule (cl-remove-if #'lispm-mycin--known-true-p
                                                    premises)))))))

(defun lispm-mycin--show-rule (parm)
  "Add the rule being tried to the transcript; PARM is being asked for."
  (let ((rule lispm-mycin--rule))
    (if (symbolp rule)
        (lispm-mycin--emit "No rule is being tried: %s is one of the %s parameters."
                           (lispm-mycin--name (lispm-mycin-parm-name parm))
                           (lispm-mycin--name rule))
      (lispm-mycin--emit-lines (lispm-mycin-rule-lines rule)))))

(defun lispm-mycin--question (parm inst)
  "Return the question that asks for PARM of INST."
  (let ((name (lispm-mycin--display-name inst)))
    (if-let* ((prompt (lispm-mycin-parm-prompt parm)))
        (format prompt name)
      (format "What is the %s of %s?"
              (lispm-mycin--name (lispm-mycin-parm-name parm)) name))))

(defun lispm-mycin--ask (parm inst)
  "Ask the user for PARM of INST, unless it was asked before.
Return non-nil if the user gave values, which are then recorded."
  (let ((key (cons (lispm-mycin-parm-name parm) inst)))
    (unless (gethash key (lispm-mycin--run-asked lispm-mycin--run))
      (puthash key t (lispm-mycin--run-asked lispm-mycin--run))
      (let ((question (lispm-mycin--question parm inst))
            answer)
        (while (not answer)
          (pcase (lispm-mycin-parse-reply parm (lispm-mycin--read question))
            (:type (lispm-mycin--emit "A %s must be of type %s"
                                      (lispm-mycin--name (lispm-mycin-parm-name parm))
                                      (upcase (format "%S" (lispm-mycin-parm-type parm)))))
            (:why (lispm-mycin--explain-why parm))
            (:rule (lispm-mycin--show-rule parm))
            (:help (lispm-mycin--emit-lines lispm-mycin--help-lines))
            (:illegal (lispm-mycin--emit "Illegal reply.  Type ? to see legal ones."))
            (reply (setq answer reply))))
        (unless (eq answer :unknown)
          (pcase-dolist (`(,value . ,cf) answer)
            (lispm-mycin--add-value (car key) inst value cf))
          t)))))

(defun lispm-mycin--yes-p (question)
  "Ask QUESTION, to be answered y or n; return non-nil for yes."
  (let (answer)
    (while (not answer)
      (setq answer (pcase (downcase (string-trim (lispm-mycin--read question)))
                     ((or "y" "yes") 'yes)
                     ((or "n" "no") 'no)
                     (_ (lispm-mycin--emit "Please answer y or n.") nil))))
    (eq answer 'yes)))

;;; Backward chaining

(defun lispm-mycin--test (op value wanted)
  "Return non-nil if VALUE stands in relation OP to WANTED."
  (if (eq op 'is)
      (equal value wanted)
    (and (numberp value) (numberp wanted) (funcall op value wanted))))

(defun lispm-mycin--eval-condition (condition find-out)
  "Return the certainty factor of CONDITION for the current instances.
With FIND-OUT, first find out its parameter, by rules or by asking;
otherwise use only what is already known.  The CFs of all values that
satisfy the condition are added up."
  (pcase-let* ((`(,parm ,context ,op ,wanted) condition)
               (inst (lispm-mycin--instance context)))
    (when find-out
      (lispm-mycin--find-out parm inst))
    (cl-loop for (value . cf) in (lispm-mycin--values parm inst)
             when (lispm-mycin--test op value wanted)
             sum cf)))

(defun lispm-mycin--use-rule (rule)
  "Try RULE; if its premises hold, record its conclusions.
Return the premises' certainty factor if they hold, else nil.  A rule
with a premise already known to be false is dropped without asking."
  (let ((lispm-mycin--rule rule)
        (premises (lispm-mycin-rule-premises rule))
        (cf 1.0))
    (unless (cl-some (lambda (p) (lispm-mycin-false-p (lispm-mycin--eval-condition p nil)))
                     premises)
      (while (and premises (lispm-mycin-true-p cf))
        (setq cf (lispm-mycin-cf-and cf (lispm-mycin--eval-condition (pop premises) t))))
      (when (lispm-mycin-true-p cf)
        (pcase-dolist (`(,parm ,context ,_ ,value) (lispm-mycin-rule-conclusions rule))
          (lispm-mycin--add-value parm (lispm-mycin--instance context) value
                                  (* cf (lispm-mycin-rule-cf rule))))
        cf))))

(defun lispm-mycin--use-rules (parm)
  "Try every rule that concludes about PARM; return non-nil if one held."
  (let ((results (mapcar #'lispm-mycin--use-rule
                         (lispm-mycin-kb-rules (lispm-mycin--run-kb lispm-mycin--run)
                                               parm))))
    (cl-some #'identity results)))

(defun lispm-mycin--find-out (parm inst)
  "Find out PARM of INST, by asking or by rules, in the parameter's order.
Return non-nil if something was learnt.  Once something is known
about PARM of INST it is not looked for again."
  (let ((key (cons parm inst))
        (known (lispm-mycin--run-known lispm-mycin--run))
        (record (lispm-mycin-kb-parm (lispm-mycin--run-kb lispm-mycin--run) parm)))
    (or (gethash key known)
        (puthash key (if (lispm-mycin-parm-ask-first record)
                         (or (lispm-mycin--ask record inst) (lispm-mycin--use-rules parm))
                       (or (lispm-mycin--use-rules parm) (lispm-mycin--ask record inst)))
                 known))))

;;; Consultations

(defun lispm-mycin--report (goals inst)
  "Add the findings for GOALS of INST to the transcript."
  (lispm-mycin--emit "Findings for %s:" inst)
  (dolist (goal goals)
    (lispm-mycin--emit "%s" (lispm-mycin-findings-line goal (lispm-mycin--values goal inst)))))

(defun lispm-mycin--consult (contexts)
  "Consult on the first of CONTEXTS, then on the rest, for each instance."
  (pcase-let* ((`(,name ,initial ,goals) (car contexts))
               (inst (lispm-mycin--new-instance name)))
    (let ((lispm-mycin--rule 'initial))
      (dolist (parm initial) (lispm-mycin--find-out parm inst)))
    (let ((lispm-mycin--rule 'goal))
      (dolist (parm goals) (lispm-mycin--find-out parm inst)))
    (when goals
      (lispm-mycin--report goals inst))
    (when (cdr contexts)
      (lispm-mycin--consult (cdr contexts)))
    (when (lispm-mycin--yes-p (format "Is there another %s? (y or n)"
                                      (lispm-mycin--name name)))
      (lispm-mycin--consult contexts))))

(defun lispm-mycin-run (kb replies)
  "Run a consultation on KB with REPLIES, the user's replies in order.
Return (TRANSCRIPT . DONE).  If the replies run out before the end,
DONE is nil and TRANSCRIPT ends with the question waiting for a reply."
  (let* ((lispm-mycin--run (lispm-mycin--run-create :kb kb :replies replies))
         (lispm-mycin--rule nil)
         (done (catch 'lispm-mycin--need-reply
                 (lispm-mycin--consult (lispm-mycin-kb-contexts kb))
                 t)))
    (cons (apply #'concat (reverse (lispm-mycin--run-output lispm-mycin--run)))
          (eq done t))))

(provide 'lispm-app-mycin-shell)
;;; lispm-app-mycin-shell.el ends here
