;;; lispm-lisp-child.el --- The Emacs a run_lisp program runs in  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, lisp

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A run_lisp program runs in a batch Emacs of its own, sandboxed and
;; bounded by lispm-run-lisp.el, started as
;;
;;   EMACS --batch -Q -L LISPM-DIR -l LISPM-DIR/lispm-lisp-child \
;;         -f lispm-lisp-child-main
;;
;; Everything that touches the program's text happens here: reading
;; it, expanding its macros, checking it (lispm-lisp.el) and running
;; it.  The Emacs that started this one never reads a byte of it.
;;
;; The two talk in lines.  What comes in is LispM's own, printed Lisp
;; (the job, then each answer); what goes out is JSON, which the
;; calling Emacs parses as plain data (strings without properties, no
;; shared or circular structure) and never as Lisp:
;;
;;   in:   (:source TEXT :tools ((SYMBOL NAME (ARG...))...) :fuel N
;;          :call-fuel N :max-depth N :max-size N :output-limit N
;;          :conditions ((SYMBOL (CONDITION...) MESSAGE)...))
;;   out:  {"call": NAME, "args": {ARG: VALUE...}}
;;                          in:  (:ok t :text TEXT)
;;                               (:ok nil :condition (SYMBOL . DATA)
;;                                :conditions (SYMBOL... error) :message TEXT)
;;   out:  {"fuel": USED}   in:  (:fuel N), or (:fuel nil) to end
;;   out:  {"done": true, "value": TEXT, "printed": TEXT}
;;         {"done": true, "error": SYMBOL, "message": TEXT, "printed": TEXT}
;;
;; A tool's arguments are mapped here, as the program wrote them
;; (positional in the order of the tool's schema, then keywords), to
;; the JSON object a model would send; the calling Emacs runs that
;; call through its one pipeline.  Each call burns `:call-fuel' of the
;; program's fuel first, so a program out of fuel makes no more calls,
;; not even from an `unwind-protect'.  The value and the output are
;; cut here to `:output-limit' characters, so that nothing larger
;; crosses.  Then it exits.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-lisp)

;;; The lines

(defun lispm-lisp-child-print (object)
  "Return OBJECT printed as one line of plain ASCII, to be read back."
  (let ((print-escape-newlines t)
        (print-escape-control-characters t)
        (print-escape-multibyte t)
        (print-escape-nonascii t)
        (print-length nil)
        (print-level nil)
        (print-circle t))
    (prin1-to-string object)))

(defun lispm-lisp-child--send (object)
  "Write OBJECT, JSON, to the calling Emacs, a line of UTF-8."
  (let ((text (json-serialize object)))
    (send-string-to-terminal
     (concat (if (multibyte-string-p text) (encode-coding-string text 'utf-8-unix) text)
             "\n"))))

(defun lispm-lisp-child--receive ()
  "Read the next object the calling Emacs sends, a line."
  (car (read-from-string (let ((inhibit-interaction nil)) (read-from-minibuffer "")))))

(defun lispm-lisp-child--ask (object)
  "Send OBJECT to the calling Emacs and return its answer."
  (lispm-lisp-child--send object)
  (lispm-lisp-child--receive))

;;; Tool calls

(defvar lispm-lisp-child--call-fuel 100
  "The fuel one tool call burns.")

(defun lispm-lisp-child--json-value (tool value depth)
  "Return VALUE, an argument of TOOL, as `json-serialize' takes it.
DEPTH is how much deeper it may nest."
  (cond ((or (stringp value) (numberp value) (eq value t)) value)
        ((and (< 0 depth) (or (vectorp value) (proper-list-p value)))
         (vconcat (mapcar (lambda (item) (lispm-lisp-child--json-value tool item (1- depth)))
                          value)))
        (t (lispm-signal 'lispm-tool-bad-args (list value)
                         "%s: `%s' is no JSON value (a string, number, t, or a list of them)"
                         tool (lispm-lisp-show value)))))

(defun lispm-lisp-child-arguments (tool names args)
  "Return ARGS, a program's arguments to TOOL, as a call's JSON object.
NAMES are TOOL's arguments in the order of its schema.  Positional
arguments come first, in that order; then keywords, each a name of
TOOL's.  A nil value is an argument not given, so a boolean argument
is t or nil.  The object is a hash table, for `json-serialize'."
  (let ((object (make-hash-table :test #'equal))
        (specs names))
    (while (and args (not (keywordp (car args))))
      (unless specs
        (lispm-signal 'lispm-tool-bad-args (list args)
                      "%s takes at most %d arguments" tool (length names)))
      (let ((name (pop specs)) (value (pop args)))
        (when value
          (puthash name (lispm-lisp-child--json-value tool value 8) object))))
    (while args
      (let ((key (pop args)))
        (unless (and (keywordp key) args)
          (lispm-signal 'lispm-tool-bad-args (list key)
                        "%s: `%s' must be a keyword followed by its value"
                        tool (lispm-lisp-show key)))
        (let ((value (pop args)))
          (when value
            (puthash (substring (symbol-name key) 1)
                     (lispm-lisp-child--json-value tool value 8) object)))))
    object))

(defun lispm-lisp-child--call (tool names args)
  "Call TOOL, whose arguments are NAMES, with ARGS through the calling Emacs.
Return the tool's text; signal its condition if it failed."
  (lispm-lisp-burn lispm-lisp-child--call-fuel)
  (let ((answer (lispm-lisp-child--ask
                 (list :call tool :args (lispm-lisp-child-arguments tool names args)))))
    (if (plist-get answer :ok)
        (plist-get answer :text)
      (let ((condition (plist-get answer :condition)))
        (unless (get (car condition) 'error-conditions)
          (put (car condition) 'error-conditions (plist-get answer :conditions))
          (put (car condition) 'error-message (plist-get answer :message)))
        (signal (car condition) (cdr condition))))))

;;; The program

(defun lispm-lisp-child--cut (text what limit)
  "Return TEXT, WHAT of the program, cut at LIMIT characters with a note."
  (if (<= (length text) limit)
      text
    (format "%s\n[LispM cut the %s: %d of %d characters shown]"
            (substring text 0 limit) what limit (length text))))

(defun lispm-lisp-child--value (value)
  "Return VALUE printed on one line, for the agent."
  (let ((print-length nil) (print-level nil) (print-circle t)
        (print-escape-newlines t) (print-escape-control-characters t))
    (prin1-to-string value)))

(defun lispm-lisp-child--define-conditions (conditions)
  "Define CONDITIONS, ((SYMBOL (CONDITION...) MESSAGE)...), as the caller has them."
  (pcase-dolist (`(,symbol ,parents ,message) conditions)
    (put symbol 'error-conditions parents)
    (put symbol 'error-message message)
    (put symbol 'lispm-error-text-first t)))

(defun lispm-lisp-child--run (job)
  "Read, check and run the program of JOB; return how it ended, a plist."
  (let ((lispm-lisp-max-depth (plist-get job :max-depth))
        (lispm-lisp-max-size (plist-get job :max-size))
        (lispm-lisp-child--call-fuel (plist-get job :call-fuel))
        (tools (plist-get job :tools)))
    (condition-case err
        (lispm-lisp-run
         (lispm-lisp-check (lispm-lisp-read (plist-get job :source)) (mapcar #'car tools))
         :fuel (plist-get job :fuel)
         :catch t
         :bindings (mapcar (pcase-lambda (`(,symbol ,name ,names))
                             (cons symbol (lambda (&rest args)
                                            (lispm-lisp-child--call name names args))))
                           tools)
         :on-empty (lambda (used)
                     (plist-get (lispm-lisp-child--ask (list :fuel used)) :fuel)))
      ((error lispm-lisp-fuel-exhausted) (list :error err :printed "")))))

(defconst lispm-lisp-child--out-of-memory
  (concat "{\"done\":true,\"error\":\"lispm-lisp-limit-exceeded\","
          "\"message\":\"The program ran out of memory (its Emacs's memory limit)\","
          "\"printed\":\"\"}\n")
  "The last line, made before anything runs, for when nothing more can be made.")

(defun lispm-lisp-child--outcome (job result)
  "Return the last line's object for RESULT, how JOB's program ended."
  (let* ((limit (plist-get job :output-limit))
         (err (if (or memory-full
                      (equal (cdr (plist-get result :error)) (cdr memory-signal-data)))
                  (list 'lispm-lisp-limit-exceeded
                        "The program ran out of memory (its Emacs's memory limit)" 'memory)
                (plist-get result :error)))
         (printed (lispm-lisp-child--cut (or (plist-get result :printed) "") "output" limit)))
    (if err
        (list :done t :error (symbol-name (car err))
              :message (lispm-lisp-child--cut (lispm-error-message err) "message" limit)
              :printed printed)
      (list :done t
            :value (lispm-lisp-child--cut (lispm-lisp-child--value (plist-get result :value))
                                          "value" limit)
            :printed printed))))

(defun lispm-lisp-child-main ()
  "Run the program the calling Emacs sends, then exit.
If even saying how it ended fails, Emacs being out of memory, the last
line says so."
  (let ((job (lispm-lisp-child--receive)))
    (lispm-lisp-child--define-conditions (plist-get job :conditions))
    (condition-case nil
        (lispm-lisp-child--send (lispm-lisp-child--outcome job (lispm-lisp-child--run job)))
      (error (garbage-collect)
             (send-string-to-terminal lispm-lisp-child--out-of-memory)))
    (kill-emacs 0)))

(provide 'lispm-lisp-child)
;;; lispm-lisp-child.el ends here
