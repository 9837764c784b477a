;;; lispm-app-mycin-test.el --- Tests of LispM's MYCIN and its EMYCIN shell  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Certainty-factor arithmetic, reply parsing, each of the six rules,
;; and whole consultations: the book's (PAIP chapter 16), one with the
;; special replies, and the white-blood-cell chain; then the same
;; consultation typed into the consultation buffer.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-app-mycin)

(defun lispm-mycin-test--count (regexp string)
  "Return how many times REGEXP matches in STRING."
  (with-temp-buffer
    (insert string)
    (how-many regexp (point-min) (point-max))))

(defun lispm-mycin-test--near (a b)
  "Return non-nil if the numbers A and B agree to 1e-9."
  (< (abs (- a b)) 1e-9))

;;; Certainty factors

(ert-deftest lispm-mycin-test-cf-or ()
  (should (lispm-mycin-test--near (lispm-mycin-cf-or 0.6 0.4) 0.76))
  (should (lispm-mycin-test--near (lispm-mycin-cf-or 0.36 0.76) 0.8464))
  (should (lispm-mycin-test--near (lispm-mycin-cf-or 0.5 -0.3) (/ 0.2 0.7)))
  (should (lispm-mycin-test--near (lispm-mycin-cf-or -0.6 -0.4) -0.76))
  (dolist (x '(-1 -0.5 0 0.3 1))
    (should (lispm-mycin-test--near (lispm-mycin-cf-or x 0) x)))
  (should (lispm-mycin-test--near (lispm-mycin-cf-or 1 -0.5) 1))
  (should (lispm-mycin-test--near (lispm-mycin-cf-or 0.7 -0.7) 0))
  (should-error (lispm-mycin-cf-or 1 -1) :type 'lispm-mycin-error)
  (should-error (lispm-mycin-cf-or 1 -1) :type 'lispm-error))

(ert-deftest lispm-mycin-test-cf-and-and-rule-strength ()
  (should (= (lispm-mycin-cf-and 0.6 0.4) 0.4))
  (should (lispm-mycin-test--near (* (lispm-mycin-cf-and 0.6 0.4) 0.9) 0.36)))

(ert-deftest lispm-mycin-test-thresholds ()
  (should-not (lispm-mycin-true-p 0.2))
  (should (lispm-mycin-true-p 0.21))
  (should-not (lispm-mycin-false-p -0.8))
  (should (lispm-mycin-false-p -0.81))
  (should (lispm-mycin-cf-p -1))
  (should-not (lispm-mycin-cf-p 1.5))
  (should-not (lispm-mycin-cf-p 'neg)))

(ert-deftest lispm-mycin-test-exercise-16-1 ()
  "Combining evidence of 0.01 reaches 0.95 after 299 steps, not 298."
  (let ((cf 0) (n 0))
    (while (< cf 0.95)
      (setq cf (lispm-mycin-cf-or cf 0.01)
            n (1+ n)))
    (should (= n 299))
    (should (lispm-mycin-test--near (/ (round (* cf 10000)) 10000.0) 0.9505))))

;;; Replies

(ert-deftest lispm-mycin-test-parse-reply ()
  (let* ((kb (lispm-mycin-knowledge-base))
         (gram (lispm-mycin-kb-parm kb 'gram))
         (name (lispm-mycin-kb-parm kb 'name))
         (age (lispm-mycin-kb-parm kb 'age)))
    (should (equal (lispm-mycin-parse-reply gram "neg") '((neg . 1.0))))
    (should (equal (lispm-mycin-parse-reply gram " NEG ") '((neg . 1.0))))
    (should (equal (lispm-mycin-parse-reply gram "(neg .8 pos .2)")
                   '((neg . 0.8) (pos . 0.2))))
    (should (eq (lispm-mycin-parse-reply gram "(neg 1.5)") :illegal))
    (should (eq (lispm-mycin-parse-reply gram "(neg .8 pos)") :illegal))
    (should (eq (lispm-mycin-parse-reply gram "rod") :illegal))
    (should (eq (lispm-mycin-parse-reply gram "neg pos") :illegal))
    (should (eq (lispm-mycin-parse-reply gram "(neg") :illegal))
    (should (eq (lispm-mycin-parse-reply age "old") :illegal))
    (should (equal (lispm-mycin-parse-reply age "27") '((27 . 1.0))))
    (should (equal (lispm-mycin-parse-reply name "Sylvia Fischer")
                   '(("Sylvia Fischer" . 1.0))))
    (pcase-dolist (`(,reply ,meaning) '(("?" :type) ("why" :why) ("WHY" :why)
                                       ("rule" :rule) ("help" :help)
                                       ("unknown" :unknown) ("unk" :unknown)))
      (should (eq (lispm-mycin-parse-reply gram reply) meaning)))))

;;; The knowledge base and its rules

(ert-deftest lispm-mycin-test-rules-are-tried-newest-first ()
  (should (equal (mapcar #'lispm-mycin-rule-number
                         (lispm-mycin-kb-rules (lispm-mycin-knowledge-base) 'identity))
                 '(165 107 75 73 71 52))))

(ert-deftest lispm-mycin-test-bad-rules-are-refused ()
  (should-error (lispm-mycin-make-kb nil nil '((1 :if ((gram organism is neg)) :cf 1.5
                                                  :then ((identity organism is x)))))
                :type 'lispm-mycin-error)
  (should-error (lispm-mycin-make-kb nil nil '((1 :if ((gram organism is neg)) :cf 0.5
                                                  :then ((identity organism < x)))))
                :type 'lispm-mycin-error))

(defun lispm-mycin-test--fire (number facts)
  "Try rule NUMBER of MYCIN when FACTS are known; return the identities found.
FACTS is a list of (PARM CONTEXT VALUE CF).  Nothing may be asked."
  (let* ((kb (lispm-mycin-knowledge-base))
         (rule (cl-find number (lispm-mycin-kb-rules kb 'identity)
                        :key #'lispm-mycin-rule-number))
         (lispm-mycin--run (lispm-mycin--run-create :kb kb)))
    (dolist (context '(patient culture organism))
      (lispm-mycin--new-instance context))
    (pcase-dolist (`(,parm ,context ,value ,cf) facts)
      (let ((inst (lispm-mycin--instance context)))
        (lispm-mycin--add-value parm inst value cf)
        (puthash (cons parm inst) t (lispm-mycin--run-known lispm-mycin--run))))
    (should (eq 'answered (catch 'lispm-mycin--need-reply
                            (lispm-mycin--use-rule rule)
                            'answered)))
    (lispm-mycin--values 'identity "ORGANISM-1")))

(defconst lispm-mycin-test--rule-cases
  '((52 ((site culture blood) (gram organism neg) (morphology organism rod)
         (burn patient serious))
        pseudomonas 0.4 (burn patient mild))
    (71 ((gram organism pos) (morphology organism coccus)
         (growth-conformation organism clumps))
        staphylococcus 0.7 (growth-conformation organism chains))
    (73 ((site culture blood) (gram organism neg) (morphology organism rod)
         (aerobicity organism anaerobic))
        bacteroides 0.9 (aerobicity organism aerobic))
    (75 ((gram organism neg) (morphology organism rod) (compromised-host patient yes))
        pseudomonas 0.6 (compromised-host patient no))
    (107 ((gram organism neg) (morphology organism rod) (aerobicity organism aerobic))
         enterobacteriaceae 0.8 (morphology organism coccus))
    (165 ((gram organism pos) (morphology organism coccus)
          (growth-conformation organism chains))
         streptococcus 0.7 (gram organism neg)))
  "Cases for each rule: (NUMBER PREMISES IDENTITY CF SPOILER).
SPOILER is a premise with a value that makes the rule fail.")

(ert-deftest lispm-mycin-test-each-rule ()
  (pcase-dolist (`(,number ,premises ,identity ,cf ,spoiler) lispm-mycin-test--rule-cases)
    (let ((facts (mapcar (lambda (p) (append p '(1.0))) premises)))
      ;; All premises certain: the rule's own CF.
      (should (equal (list number (lispm-mycin-test--fire number facts))
                     (list number (list (cons identity cf)))))
      ;; The weakest premise caps the conclusion.
      (let ((weak (cons (append (car premises) '(0.5)) (cdr facts))))
        (should (lispm-mycin-test--near
                 (cdr (assq identity (lispm-mycin-test--fire number weak)))
                 (* 0.5 cf))))
      ;; A premise at exactly 0.2 is not true: nothing is concluded.
      (should-not (lispm-mycin-test--fire
                   number (cons (append (car premises) '(0.2)) (cdr facts))))
      ;; A premise with another value: nothing is concluded.
      (let ((spoiled (mapcar (lambda (f)
                               (if (eq (car f) (car spoiler)) (append spoiler '(1.0)) f))
                             facts)))
        (should-not (lispm-mycin-test--fire number spoiled))))))

(ert-deftest lispm-mycin-test-rule-printing ()
  (let ((rule (car (lispm-mycin-kb-rules (lispm-mycin-knowledge-base) 'identity))))
    (should (equal (lispm-mycin-rule-lines rule)
                   '("Rule 165:"
                     "  If"
                     "    1) THE GRAM OF THE ORGANISM IS POS"
                     "    2) THE MORPHOLOGY OF THE ORGANISM IS COCCUS"
                     "    3) THE GROWTH-CONFORMATION OF THE ORGANISM IS CHAINS"
                     "  Then there is suggestive evidence (0.7) that"
                     "    1) THE IDENTITY OF THE ORGANISM IS STREPTOCOCCUS"))))
  (should (equal (lispm-mycin-condition-text '(compromised-host patient is yes))
                 "THE PATIENT IS COMPROMISED-HOST"))
  (should (equal (lispm-mycin-condition-text '(burn patient is no))
                 "THE PATIENT IS NOT BURN"))
  (should (equal (lispm-mycin-condition-text '(wbc patient < 2.5))
                 "THE WBC OF THE PATIENT < 2.5"))
  (should (equal (lispm-mycin-findings-line 'identity '((pseudomonas . 0.76)
                                                        (enterobacteriaceae . 0.8)))
                 " IDENTITY: ENTEROBACTERIACEAE (0.800)   PSEUDOMONAS (0.760)"))
  (should (equal (lispm-mycin-findings-line 'identity nil) " IDENTITY: unknown")))

;;; Consultations

(defconst lispm-mycin-test--book-replies
  '("Sylvia Fischer" "female" "27" "blood" "3" "unknown" "?" "neg" "rod" "why"
    "aerobic" "yes" "why" "serious" "y" "unknown" "(neg .8 pos .2)" "rod"
    "anaerobic" "n" "n" "n")
  "The replies of the book's sample consultation.")

(defconst lispm-mycin-test--book-transcript "\
------ PATIENT-1 ------
Patient's name: Sylvia Fischer
Sex: female
Age: 27
------ CULTURE-1 ------
From what site was the specimen for CULTURE-1 taken? blood
How many days ago was this culture (CULTURE-1) obtained? 3
------ ORGANISM-1 ------
Enter the identity (genus) of ORGANISM-1: unknown
The gram stain of ORGANISM-1: ?
A GRAM must be of type (MEMBER ACID-FAST POS NEG)
The gram stain of ORGANISM-1: neg
Is ORGANISM-1 a rod or coccus (etc.): rod
What is the AEROBICITY of ORGANISM-1? why
[Why is the value of AEROBICITY being asked for?]
It is known that:
    1) THE GRAM OF THE ORGANISM IS NEG
    2) THE MORPHOLOGY OF THE ORGANISM IS ROD
Therefore,
Rule 107:
  If
    1) THE AEROBICITY OF THE ORGANISM IS AEROBIC
  Then there is suggestive evidence (0.8) that
    1) THE IDENTITY OF THE ORGANISM IS ENTEROBACTERIACEAE
What is the AEROBICITY of ORGANISM-1? aerobic
Is Sylvia Fischer a compromised host? yes
Is Sylvia Fischer a burn patient?  If so, mild or serious? why
[Why is the value of BURN being asked for?]
It is known that:
    1) THE SITE OF THE CULTURE IS BLOOD
    2) THE GRAM OF THE ORGANISM IS NEG
    3) THE MORPHOLOGY OF THE ORGANISM IS ROD
Therefore,
Rule 52:
  If
    1) THE BURN OF THE PATIENT IS SERIOUS
  Then there is weakly suggestive evidence (0.4) that
    1) THE IDENTITY OF THE ORGANISM IS PSEUDOMONAS
Is Sylvia Fischer a burn patient?  If so, mild or serious? serious
Findings for ORGANISM-1:
 IDENTITY: ENTEROBACTERIACEAE (0.800)   PSEUDOMONAS (0.760)
Is there another ORGANISM? (y or n) y
------ ORGANISM-2 ------
Enter the identity (genus) of ORGANISM-2: unknown
The gram stain of ORGANISM-2: (neg .8 pos .2)
Is ORGANISM-2 a rod or coccus (etc.): rod
What is the AEROBICITY of ORGANISM-2? anaerobic
Findings for ORGANISM-2:
 IDENTITY: BACTEROIDES (0.720)   PSEUDOMONAS (0.646)
Is there another ORGANISM? (y or n) n
Is there another CULTURE? (y or n) n
Is there another PATIENT? (y or n) n
"
  "The book's sample consultation (PAIP chapter 16), numbered as in the book.")

(ert-deftest lispm-mycin-test-book-consultation ()
  (let ((result (lispm-mycin-run (lispm-mycin-knowledge-base)
                                 lispm-mycin-test--book-replies)))
    (should (equal (car result) lispm-mycin-test--book-transcript))
    (should (cdr result))))

(ert-deftest lispm-mycin-test-a-run-stops-at-the-next-question ()
  (let ((result (lispm-mycin-run (lispm-mycin-knowledge-base)
                                 '("Sylvia Fischer" "female"))))
    (should-not (cdr result))
    (should (equal (car result) "------ PATIENT-1 ------
Patient's name: Sylvia Fischer
Sex: female
Age: "))))

(ert-deftest lispm-mycin-test-special-replies ()
  (let ((transcript
         (car (lispm-mycin-run (lispm-mycin-knowledge-base)
                               '("Pat Doe" "why" "help" "male" "50" "blood" "1" "why"
                                 "unknown" "rule" "maybe" "pos" "coccus"
                                 "(chains .6 clumps .4)" "n" "n" "n")))))
    (should (equal transcript "\
------ PATIENT-1 ------
Patient's name: Pat Doe
Sex: why
[Why is the value of SEX being asked for?]
SEX is one of the INITIAL parameters.
Sex: help
Type one of the following:
 ?        to see the legal answers
 why      to see why the question is asked
 rule     to see the rule being tried
 help     to see this list
 unknown  (or unk) if you do not know
 xxx      a value, taken as certain
 (xxx .5 yyy .4)  several values, each with a certainty factor
Sex: male
Age: 50
------ CULTURE-1 ------
From what site was the specimen for CULTURE-1 taken? blood
How many days ago was this culture (CULTURE-1) obtained? 1
------ ORGANISM-1 ------
Enter the identity (genus) of ORGANISM-1: why
[Why is the value of IDENTITY being asked for?]
IDENTITY is one of the GOAL parameters.
Enter the identity (genus) of ORGANISM-1: unknown
The gram stain of ORGANISM-1: rule
Rule 165:
  If
    1) THE GRAM OF THE ORGANISM IS POS
    2) THE MORPHOLOGY OF THE ORGANISM IS COCCUS
    3) THE GROWTH-CONFORMATION OF THE ORGANISM IS CHAINS
  Then there is suggestive evidence (0.7) that
    1) THE IDENTITY OF THE ORGANISM IS STREPTOCOCCUS
The gram stain of ORGANISM-1: maybe
Illegal reply.  Type ? to see legal ones.
The gram stain of ORGANISM-1: pos
Is ORGANISM-1 a rod or coccus (etc.): coccus
What is the GROWTH-CONFORMATION of ORGANISM-1? (chains .6 clumps .4)
Findings for ORGANISM-1:
 IDENTITY: STREPTOCOCCUS (0.420)   STAPHYLOCOCCUS (0.280)
Is there another ORGANISM? (y or n) n
Is there another CULTURE? (y or n) n
Is there another PATIENT? (y or n) n
"))
    ;; Every rule that needs burn or compromised-host fails earlier on gram.
    (should-not (string-match-p "burn\\|compromised" transcript))))

(ert-deftest lispm-mycin-test-each-question-once-per-instance ()
  (let ((transcript (car (lispm-mycin-run (lispm-mycin-knowledge-base)
                                          lispm-mycin-test--book-replies))))
    (dolist (question '("Is ORGANISM-1 a rod or coccus" "Is Sylvia Fischer a compromised host"
                        "What is the AEROBICITY of ORGANISM-2"))
      (should (= 1 (lispm-mycin-test--count (regexp-quote question) transcript))))
    ;; Asked again only after a special reply: ? for gram, why for aerobicity.
    (should (= 2 (lispm-mycin-test--count "^The gram stain of ORGANISM-1" transcript)))
    (should (= 2 (lispm-mycin-test--count "^What is the AEROBICITY of ORGANISM-1"
                                          transcript)))))

(ert-deftest lispm-mycin-test-white-blood-cell-chain ()
  (let ((transcript
         (car (lispm-mycin-run (lispm-mycin-knowledge-base t)
                               '("Sylvia Fischer" "female" "27" "blood" "3" "unknown" "neg"
                                 "rod" "aerobic" "2.0" "serious" "n" "n" "n")))))
    (should (string-match-p "^What is the AEROBICITY of ORGANISM-1\\? aerobic
What is Sylvia Fischer's white blood cell count\\? 2.0
Is Sylvia Fischer a burn patient\\?  If so, mild or serious\\? serious
Findings for ORGANISM-1:
 IDENTITY: ENTEROBACTERIACEAE (0.800)   PSEUDOMONAS (0.724)$" transcript))
    ;; The rules decide compromised-host: it is never asked.
    (should-not (string-match-p "compromised host" transcript))))

(ert-deftest lispm-mycin-test-another-question-wants-y-or-n ()
  (let ((transcript (car (lispm-mycin-run
                          (lispm-mycin-knowledge-base)
                          '("P" "male" "1" "blood" "1" "streptococcus" "maybe" "no")))))
    (should (string-match-p "IDENTITY: STREPTOCOCCUS (1.000)
Is there another ORGANISM\\? (y or n) maybe
Please answer y or n.
Is there another ORGANISM\\? (y or n) no
Is there another CULTURE\\? (y or n) $" transcript))))

;;; The consultation buffer

(ert-deftest lispm-mycin-test-consultation-buffer ()
  (save-window-excursion
    (when (get-buffer lispm-mycin-buffer-name)
      (kill-buffer lispm-mycin-buffer-name))
    (lispm-mycin)
    (unwind-protect
        (let ((start (save-excursion (goto-char (point-min))
                                     (search-forward "------ PATIENT-1")
                                     (match-beginning 0))))
          (should (equal (buffer-name) lispm-mycin-buffer-name))
          (should (string-match-p "never medical advice" (buffer-string)))
          (execute-kbd-macro (kbd "RET"))
          (should (string-suffix-p "Patient's name: " (buffer-string)))
          (dolist (reply lispm-mycin-test--book-replies)
            (goto-char (point-max))
            (insert "  " reply)
            (execute-kbd-macro (kbd "RET")))
          (should (equal (buffer-substring-no-properties start (point-max))
                         (concat lispm-mycin-test--book-transcript
                                 "\nEnd of the consultation.  C-c C-n starts a new one; \
q closes.\n")))
          (should buffer-read-only)
          (execute-kbd-macro (kbd "C-c C-n"))
          (should-not buffer-read-only)
          (should (string-suffix-p "------ PATIENT-1 ------\nPatient's name: "
                                   (buffer-string))))
      (kill-buffer lispm-mycin-buffer-name))))

(ert-deftest lispm-mycin-test-contradictory-reply-is-refused ()
  (save-window-excursion
    (when (get-buffer lispm-mycin-buffer-name)
      (kill-buffer lispm-mycin-buffer-name))
    (lispm-mycin)
    (unwind-protect
        (progn
          (dolist (reply '("P" "male" "1" "blood" "1" "unknown"))
            (insert reply)
            (lispm-mycin-send))
          (let ((before (buffer-string)))
            (insert "(neg 1 neg -1)")
            (should-error (lispm-mycin-send) :type 'user-error)
            (should (equal (buffer-string) (concat before "(neg 1 neg -1)")))
            (delete-region lispm-apps-input-start (point-max))
            (insert "neg")
            (lispm-mycin-send)
            (should (string-suffix-p "The gram stain of ORGANISM-1: neg
Is ORGANISM-1 a rod or coccus (etc.): " (buffer-string)))))
      (kill-buffer lispm-mycin-buffer-name))))

(ert-deftest lispm-mycin-test-page-is-honest ()
  (let ((page (with-temp-buffer
                (insert-file-contents (lispm-app-page (lispm-apps-get 'mycin)))
                (buffer-string))))
    (dolist (fact '("teaching copy" "never for patients" "six of MYCIN's rules"
                    "about 400" "65%" "42.5%" "62.5%" "JAMA"))
      (should (string-match-p (regexp-quote fact) page)))))

(provide 'lispm-app-mycin-test)
;;; lispm-app-mycin-test.el ends here
