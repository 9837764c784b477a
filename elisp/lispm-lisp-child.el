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

;; A run_lisp program runs in a batch Emacs of its own, started by
;; lispm-run-lisp.el as
;;
;;   Emacs --batch -Q -L DIR -l lispm-lisp-child -f lispm-lisp-child-main
;;
;; and it talks with the Emacs that started it in lines, one Lisp
;; object each, printed with every newline, control character and
;; non-ASCII character escaped: its standard input brings the job and
;; the answers, its standard output takes the requests.
;;
;;   in:   (:source TEXT :tools (SYMBOL...) :fuel N :max-depth N :max-size N)
;;   out:  (:call TOOL ARGS)   in:  (:ok t :text TEXT)
;;                                  (:ok nil :condition (SYMBOL . DATA)
;;                                   :conditions (SYMBOL... error) :message TEXT)
;;   out:  (:fuel USED)        in:  (:fuel N), or (:fuel nil) to end
;;   out:  (:done :value TEXT :printed TEXT)
;;         (:done :error SYMBOL :message TEXT :printed TEXT)
;;
;; Then it exits.  It reads and checks the program again itself
;; (`lispm-lisp-check' is quick), so that only text crosses.  A tool's
;; failure is signalled in the program with the condition the calling
;; Emacs named, its parents told along, so that the program's handlers
;; see it as that Emacs does.

;;; Code:

(require 'lispm-base)
(require 'lispm-lisp)

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
  "Write OBJECT to the calling Emacs, a line."
  (send-string-to-terminal (concat (lispm-lisp-child-print object) "\n")))

(defun lispm-lisp-child--receive ()
  "Read the next object the calling Emacs sends, a line."
  (car (read-from-string (let ((inhibit-interaction nil)) (read-from-minibuffer "")))))

(defun lispm-lisp-child--ask (object)
  "Send OBJECT to the calling Emacs and return its answer."
  (lispm-lisp-child--send object)
  (lispm-lisp-child--receive))

(defun lispm-lisp-child--call (tool args)
  "Call TOOL with ARGS, as the program wrote them, through the calling Emacs.
Return the tool's text; signal its condition if it failed."
  (let ((answer (lispm-lisp-child--ask (list :call tool args))))
    (if (plist-get answer :ok)
        (plist-get answer :text)
      (let ((condition (plist-get answer :condition)))
        (unless (get (car condition) 'error-conditions)
          (put (car condition) 'error-conditions (plist-get answer :conditions))
          (put (car condition) 'error-message (plist-get answer :message)))
        (signal (car condition) (cdr condition))))))

(defun lispm-lisp-child-main ()
  "Run the program the calling Emacs sends, then exit."
  (let* ((job (lispm-lisp-child--receive))
         (tools (plist-get job :tools))
         (lispm-lisp-max-depth (plist-get job :max-depth))
         (lispm-lisp-max-size (plist-get job :max-size))
         (result
          (condition-case err
              (lispm-lisp-run
               (lispm-lisp-check (lispm-lisp-read (plist-get job :source)) tools)
               :fuel (plist-get job :fuel)
               :catch t
               :bindings (mapcar (lambda (tool)
                                   (cons tool (lambda (&rest args)
                                                (lispm-lisp-child--call tool args))))
                                 tools)
               :on-empty (lambda (used)
                           (plist-get (lispm-lisp-child--ask (list :fuel used)) :fuel)))
            (error (list :error err :printed "")))))
    (lispm-lisp-child--send
     (let ((err (plist-get result :error)))
       (append (if err
                   (list :done :error (car err) :message (lispm-error-message err))
                 (list :done :value (let ((print-length nil) (print-level nil)
                                          (print-circle t))
                                      (prin1-to-string (plist-get result :value)))))
               (list :printed (or (plist-get result :printed) "")))))
    (kill-emacs 0)))

(provide 'lispm-lisp-child)
;;; lispm-lisp-child.el ends here
