;;; lispm-app-mycin.el --- MYCIN, as rebuilt in PAIP chapter 16  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; MYCIN identified the bacteria behind blood infections (Edward
;; Shortliffe, Stanford, 1974-76).  This is the teaching copy from Peter
;; Norvig's "Paradigms of Artificial Intelligence Programming" (1992),
;; chapter 16: six of MYCIN's rules (of about 400) and the parameters
;; they ask, run by LispM's own EMYCIN shell (lispm-app-mycin-shell.el).
;; A historical demonstration, never for patients.
;;
;; `M-x lispm-mycin' opens a consultation in "*LispM MYCIN*".  Answer
;; each question in the buffer and press RET.  At any question, ?
;; lists the legal answers, WHY shows the rule being tried and what is
;; already known, RULE prints that rule, HELP lists the replies and
;; UNKNOWN skips the question.  With a prefix argument the knowledge
;; base also holds the book's white-blood-cell chain (rules 1-3).

;;; Code:

(require 'lispm-apps)
(require 'lispm-app-mycin-shell)

(lispm-define-app mycin
  :title "MYCIN"
  :shelf classic-ai
  :summary "The 1970s expert system for blood infections, PAIP's teaching copy."
  :command lispm-mycin)

;;; The knowledge base (Shortliffe 1976, via PAIP chapter 16)

(defconst lispm-mycin-contexts
  '((patient (name sex age) ())
    (culture (site days-old) ())
    (organism () (identity)))
  "MYCIN's contexts, in consultation order: (NAME INITIAL-DATA GOALS).")

(defconst lispm-mycin-parameters
  '((name :type any :prompt "Patient's name:" :ask-first t :reader line)
    (sex :type (member male female) :prompt "Sex:" :ask-first t)
    (age :type number :prompt "Age:" :ask-first t)
    (burn :type (member no mild serious) :ask-first t
          :prompt "Is %s a burn patient?  If so, mild or serious?")
    (compromised-host :type (member yes no) :prompt "Is %s a compromised host?")
    (site :type (member blood) :ask-first t
          :prompt "From what site was the specimen for %s taken?")
    (days-old :type number :ask-first t
              :prompt "How many days ago was this culture (%s) obtained?")
    (identity :type (member pseudomonas klebsiella enterobacteriaceae
                            staphylococcus bacteroides streptococcus)
              :prompt "Enter the identity (genus) of %s:" :ask-first t)
    (gram :type (member acid-fast pos neg) :prompt "The gram stain of %s:"
          :ask-first t)
    (morphology :type (member rod coccus) :prompt "Is %s a rod or coccus (etc.):")
    (aerobicity :type (member aerobic anaerobic))
    (growth-conformation :type (member chains pairs clumps)))
  "MYCIN's parameters: (NAME . PROPERTIES), see `lispm-mycin-make-kb'.")

(defconst lispm-mycin-rules
  '((52 :if ((site culture is blood) (gram organism is neg)
             (morphology organism is rod) (burn patient is serious))
        :cf 0.4 :then ((identity organism is pseudomonas)))
    (71 :if ((gram organism is pos) (morphology organism is coccus)
             (growth-conformation organism is clumps))
        :cf 0.7 :then ((identity organism is staphylococcus)))
    (73 :if ((site culture is blood) (gram organism is neg)
             (morphology organism is rod) (aerobicity organism is anaerobic))
        :cf 0.9 :then ((identity organism is bacteroides)))
    (75 :if ((gram organism is neg) (morphology organism is rod)
             (compromised-host patient is yes))
        :cf 0.6 :then ((identity organism is pseudomonas)))
    (107 :if ((gram organism is neg) (morphology organism is rod)
              (aerobicity organism is aerobic))
         :cf 0.8 :then ((identity organism is enterobacteriaceae)))
    (165 :if ((gram organism is pos) (morphology organism is coccus)
              (growth-conformation organism is chains))
         :cf 0.7 :then ((identity organism is streptococcus))))
  "The six MYCIN rules of PAIP, numbered by their pages in Shortliffe 1976.")

(defconst lispm-mycin-wbc-parameters
  '((wbc :type number :prompt "What is %s's white blood cell count?"))
  "The parameter of the white-blood-cell chain.")

(defconst lispm-mycin-wbc-rules
  '((1 :if ((immunosuppressed patient is yes))
       :cf 1.0 :then ((compromised-host patient is yes)))
    (2 :if ((leukopenia patient is yes))
       :cf 1.0 :then ((immunosuppressed patient is yes)))
    (3 :if ((wbc patient < 2.5))
       :cf 0.9 :then ((leukopenia patient is yes))))
  "PAIP's back-chaining example: a low white-blood-cell count.")

(defun lispm-mycin-knowledge-base (&optional wbc)
  "Return MYCIN's knowledge base; with WBC, add the white-blood-cell chain."
  (lispm-mycin-make-kb lispm-mycin-contexts
                       (append lispm-mycin-parameters
                               (and wbc lispm-mycin-wbc-parameters))
                       (append lispm-mycin-rules (and wbc lispm-mycin-wbc-rules))))

;;; The consultation buffer

(defconst lispm-mycin-buffer-name "*LispM MYCIN*"
  "The name of the consultation buffer.")

(defvar-local lispm-mycin--kb nil
  "The knowledge base of this buffer's consultation.")

(defvar-local lispm-mycin--replies nil
  "The replies given so far in this buffer's consultation, in order.")

(defvar-local lispm-mycin--shown 0
  "How much of the consultation's transcript the buffer shows, in characters.")

(defconst lispm-mycin--font-lock-keywords
  '(("^------ .* ------$" . 'bold)
    ("^Findings for .*\n.*" . 'bold)
    ("^\\[Why is .*\\]$" . 'italic)
    ("^Illegal reply\\..*\\|^Please answer y or n\\." . 'error))
  "Highlighting for consultations.")

(defun lispm-mycin--insert-header (wbc)
  "Insert the consultation's title, warning and key hints.
WBC non-nil says that the white-blood-cell rules are loaded.  The
faces are `font-lock-face' properties, which font-lock keeps."
  (insert (propertize "MYCIN" 'font-lock-face 'lispm-apps-heading)
          " (Shortliffe, 1974-76), as rebuilt in Norvig's PAIP, chapter 16"
          (if wbc ",\nwith PAIP's white-blood-cell rules.\n" ".\n")
          (propertize "A teaching copy with 6 of MYCIN's ~400 rules: \
a historical demonstration,\nnever medical advice.\n"
                      'font-lock-face 'warning)
          (propertize "Replies: a value, ?, WHY, RULE, HELP, UNKNOWN.  \
C-c C-n new, C-c C-q close.\n\n"
                      'font-lock-face 'shadow)))

(defun lispm-mycin--continue ()
  "Run the consultation on the replies so far and show what is new.
The last reply is still in the buffer as input; the transcript
echoes it, so the input is replaced by the transcript's new part."
  (pcase-let ((`(,transcript . ,done) (lispm-mycin-run lispm-mycin--kb
                                                      lispm-mycin--replies))
              (inhibit-read-only t))
    (delete-region lispm-apps-input-start (point-max))
    (goto-char (point-max))
    (insert (substring transcript lispm-mycin--shown))
    (setq lispm-mycin--shown (length transcript))
    (when done
      (insert "\nEnd of the consultation.  C-c C-n starts a new one; q closes.\n"))
    (lispm-apps-open-input)
    (setq buffer-read-only done)))

(defvar-keymap lispm-mycin-mode-map
  :doc "Keys of a MYCIN consultation."
  "RET" #'lispm-mycin-send
  "C-c C-n" #'lispm-mycin-new-consultation
  "C-c C-q" #'lispm-apps-quit
  "q" #'lispm-apps-quit-or-insert)

(define-derived-mode lispm-mycin-mode text-mode "LispM MYCIN"
  "Major mode for a MYCIN consultation.
Type the answer to the last question and press RET.  The
consultation above is read-only; `q' there closes the window.

\\{lispm-mycin-mode-map}"
  :interactive nil
  (setq-local font-lock-defaults '(lispm-mycin--font-lock-keywords t))
  (visual-line-mode 1))

(defun lispm-mycin--start (wbc)
  "Start a new consultation in the current buffer.
With WBC, use the knowledge base with the white-blood-cell chain."
  (let ((inhibit-read-only t))
    (lispm-mycin-mode)
    (erase-buffer)
    (lispm-mycin--insert-header wbc)
    (setq lispm-mycin--kb (lispm-mycin-knowledge-base wbc))
    (lispm-apps-open-input)
    (lispm-mycin--continue)))

;;;###autoload
(defun lispm-mycin (&optional wbc)
  "Start a MYCIN consultation in a window of its own.
With a prefix argument WBC, the knowledge base also holds PAIP's
white-blood-cell chain.  If a consultation is open, show it."
  (interactive "P")
  (let ((buffer (get-buffer-create lispm-mycin-buffer-name)))
    (with-current-buffer buffer
      (unless (and (derived-mode-p 'lispm-mycin-mode) (not wbc))
        (lispm-mycin--start wbc)))
    (lispm-apps-display buffer)))

(defun lispm-mycin-new-consultation (&optional wbc)
  "Start a new consultation in this buffer.
With a prefix argument WBC, add the white-blood-cell chain."
  (interactive "P" lispm-mycin-mode)
  (lispm-mycin--start wbc))

(defun lispm-mycin-send ()
  "Answer the question waiting at the end of the consultation."
  (interactive nil lispm-mycin-mode)
  (let ((reply (lispm-apps-take-input))
        (replies lispm-mycin--replies))
    (if (string-empty-p reply)
        (message "Type an answer (? lists the legal ones), then RET")
      (setq lispm-mycin--replies (append replies (list reply)))
      (condition-case err
          (lispm-mycin--continue)
        (lispm-mycin-error
         (setq lispm-mycin--replies replies)
         (user-error "%s; type another answer" (error-message-string err)))))))

(provide 'lispm-app-mycin)
;;; lispm-app-mycin.el ends here
