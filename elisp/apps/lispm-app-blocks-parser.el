;;; lispm-app-blocks-parser.el --- A small English parser for the blocks world  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The blocks world understands a restricted English: a list of
;; sentence patterns made of words and slots, and a grammar of noun
;; phrases that fills the slots.  Case and punctuation are ignored.
;;
;; A noun phrase parses to a plist:
;;
;;   (:det DET :count N :adjs ADJS :noun NOUN :plural P :rel REL)
;;       "a big red block", "the pyramid", "two pyramids", "blocks",
;;       "a block which is taller than NP"; DET is `a', `the' or nil,
;;       NOUN one of block cube pyramid box table thing one, REL one of
;;       (:compare C NP), (:supports NP) and (:located PREP NP).
;;   (:pronoun it), (:pronoun them), (:pronoun you)
;;       "it", "that one", "them", "you".
;;   (:held)                "the one you are holding".
;;   (:commanded pick-up)   "the one which I told you to pick up".
;;   (:some NP)             "at least one of NP", "any of NP".
;;
;; `lispm-blocks-parse' returns the meaning of a sentence, a list whose
;; head names what to do, followed by the filled slots; for example
;; "put it into the box." gives (put (:pronoun it) in (:det the ...)).

;;; Code:

(require 'cl-lib)
(require 'subr-x)

;;; Words

(defconst lispm-blocks--nouns
  '(("block" block) ("blocks" block t) ("cube" cube) ("cubes" cube t)
    ("pyramid" pyramid) ("pyramids" pyramid t) ("box" box) ("boxes" box t)
    ("table" table) ("tables" table t) ("thing" thing) ("things" thing t)
    ("object" thing) ("objects" thing t) ("one" one) ("ones" one t))
  "Nouns: (WORD NOUN PLURAL).")

(defconst lispm-blocks--adjectives
  '(("red" . red) ("green" . green) ("blue" . blue) ("white" . white)
    ("black" . black) ("big" . large) ("large" . large) ("small" . small)
    ("little" . small))
  "Adjectives and their meanings: colours and sizes.")

(defconst lispm-blocks--comparatives
  '(("taller" . taller) ("shorter" . shorter) ("narrower" . narrower)
    ("wider" . wider) ("bigger" . bigger) ("larger" . bigger)
    ("smaller" . smaller))
  "Comparative adjectives and their meanings.")

(defconst lispm-blocks--prepositions
  '(("in" . in) ("into" . in) ("inside" . in) ("on" . on) ("onto" . on))
  "Prepositions of place and their meanings.")

(defconst lispm-blocks--numbers
  '(("one" . 1) ("two" . 2) ("three" . 3) ("four" . 4) ("five" . 5)
    ("six" . 6) ("seven" . 7) ("eight" . 8) ("nine" . 9) ("ten" . 10))
  "Number words.")

(defconst lispm-blocks--noun-phrase-words
  '("a" "an" "the" "any" "both" "of" "at" "least" "which" "that" "is" "are"
    "than" "supports" "support" "it" "them" "they" "you" "this" "holding"
    "i" "told" "to" "pick" "up" "grasp")
  "Words of the noun-phrase grammar besides nouns, adjectives and numbers.")

(defconst lispm-blocks--sentences
  '(((pick-up) "pick" "up" np)
    ((pick-up) "pick" np "up")
    ((pick-up) "grasp" np)
    ((put-down) "put" "down" np)
    ((put-down) "put" np "down")
    ((put) "put" np prep np)
    ((find-and-put) "find" np "and" "put" np prep np)
    ((stack-up) "stack" "up" nps)
    ((contents in) "what" "does" np "contain")
    ((contents) "what" "is" prep np)
    ((supporter) "what" "is" np "supported" "by")
    ((supporter) "what" "supports" np)
    ((count) "how" "many" np "are" "there")
    ((count-in) "how" "many" np "are" prep np)
    ((count-not-in) "how" "many" np "are" "not" prep np)
    ((compare) "is" np comparative "than" np)
    ((supported-p) "is" np "supported")
    ((located-p) "is" np prep np)
    ((can-pick-up) "can" np "pick" "up" np)
    ((can-support) "can" np "support" np)
    ((can-be-supported) "can" np "be" "supported" "by" np)
    ((why-did pickup) "why" "did" "you" "pick" "up" np)
    ((why-did pickup) "why" "did" "you" "pick" np "up")
    ((why-did pickup) "why" "did" "you" "grasp" np)
    ((why-did cleartop) "why" "did" "you" "clear" "off" np)
    ((why-did cleartop) "why" "did" "you" "clean" "off" np)
    ((why-did getridof) "why" "did" "you" "get" "rid" "of" np)
    ((why-did puton) "why" "did" "you" "put" np prep np)
    ((why) "why" "did" "you" "do" "that")
    ((why) "why"))
  "The sentences understood: (HEAD . PATTERN).
A pattern is a list of words and slots: `np' (a noun phrase), `nps'
\(noun phrases joined by \"and\"), `prep' (in or on) and `comparative'.
A sentence that matches means HEAD followed by the slots' values.")

(defconst lispm-blocks-vocabulary
  (delete-dups
   (append (mapcar #'car lispm-blocks--nouns)
           (mapcar #'car lispm-blocks--adjectives)
           (mapcar #'car lispm-blocks--comparatives)
           (mapcar #'car lispm-blocks--prepositions)
           (mapcar #'car lispm-blocks--numbers)
           lispm-blocks--noun-phrase-words
           (cl-loop for (_ . pattern) in lispm-blocks--sentences
                    append (cl-remove-if-not #'stringp pattern))))
  "Every word the parser knows.")

(defun lispm-blocks-tokenize (sentence)
  "Return the words of SENTENCE, in lower case, without punctuation."
  (split-string (downcase sentence) "[][ \t\n.,;:!?\"()]+" t))

(defun lispm-blocks-unknown-word (words)
  "Return the first of WORDS that is not in the vocabulary, or nil."
  (cl-find-if-not (lambda (w) (or (member w lispm-blocks-vocabulary)
                                  (string-match-p "\\`[0-9]+\\'" w)))
                  words))

;;; Noun phrases
;;
;; Each parser takes a list of words and returns (VALUE . REST), the
;; value parsed from the words' beginning and the words left, or nil.

(defun lispm-blocks--parse-word (alist words)
  "Parse the first of WORDS as a key of ALIST, giving its value."
  (when-let* ((cell (assoc (car words) alist)))
    (cons (cdr cell) (cdr words))))

(defun lispm-blocks--skip (words &rest optional)
  "Return WORDS without its first word if that is one of OPTIONAL."
  (if (member (car words) optional) (cdr words) words))

(defun lispm-blocks--after (words &rest expected)
  "Return (REST) if WORDS begins with the words EXPECTED, REST following them.
Return nil if WORDS does not begin so."
  (and (equal (take (length expected) words) expected)
       (list (nthcdr (length expected) words))))

(defun lispm-blocks--parse-the-one (words)
  "Parse \"the one (which) you are holding\" at the beginning of WORDS.
Also parse \"the one (which) I told you to pick up\"."
  (when-let* ((the-one (lispm-blocks--after words "the" "one")))
    (let ((rest (lispm-blocks--skip (car the-one) "which" "that")))
      (if-let* ((held (lispm-blocks--after rest "you" "are" "holding")))
          (cons '(:held) (car held))
        (when-let* ((told (or (lispm-blocks--after rest "i" "told" "you" "to"
                                                   "pick" "up")
                              (lispm-blocks--after rest "i" "told" "you" "to"
                                                   "grasp"))))
          (cons '(:commanded pick-up) (car told)))))))

(defun lispm-blocks--parse-pronoun (words)
  "Parse a pronoun at the beginning of WORDS: it, that one, them, you..."
  (pcase words
    (`(,(or "that" "this") "one" . ,rest) (cons '(:pronoun it) rest))
    (`("it" . ,rest) (cons '(:pronoun it) rest))
    (`(,(or "them" "they") . ,rest) (cons '(:pronoun them) rest))
    (`("you" . ,rest) (cons '(:pronoun you) rest))))

(defun lispm-blocks--parse-some (words)
  "Parse \"at least one of NP\" or \"any of NP\" at the beginning of WORDS."
  (when-let* ((of (or (lispm-blocks--after words "at" "least" "one" "of")
                      (lispm-blocks--after words "any" "of")
                      (lispm-blocks--after words "one" "of")))
              (np (lispm-blocks--parse-np (car of))))
    (cons (list :some (car np)) (cdr np))))

(defun lispm-blocks--parse-comparison (words)
  "Parse \"COMPARATIVE than NP\" at the beginning of WORDS."
  (pcase (lispm-blocks--parse-word lispm-blocks--comparatives words)
    (`(,comparative "than" . ,rest)
     (when-let* ((np (lispm-blocks--parse-np rest)))
       (cons (list :compare comparative (car np)) (cdr np))))))

(defun lispm-blocks--parse-location (words)
  "Parse \"PREPOSITION NP\" at the beginning of WORDS."
  (pcase (lispm-blocks--parse-word lispm-blocks--prepositions words)
    (`(,prep . ,rest)
     (when-let* ((np (lispm-blocks--parse-np rest)))
       (cons (list :located prep (car np)) (cdr np))))))

(defun lispm-blocks--parse-relative (words)
  "Parse a relative clause at the beginning of WORDS.
That is \"which is taller than NP\", \"that is in NP\", \"which supports NP\"."
  (pcase words
    (`(,(or "which" "that") ,(or "is" "are") . ,rest)
     (or (lispm-blocks--parse-comparison rest)
         (lispm-blocks--parse-location rest)))
    (`(,(or "which" "that") ,(or "supports" "support") . ,rest)
     (when-let* ((np (lispm-blocks--parse-np rest)))
       (cons (list :supports (car np)) (cdr np))))))

(defun lispm-blocks--parse-described (words)
  "Parse a described noun phrase at the beginning of WORDS.
It is made of [DET] [NUMBER] ADJECTIVE* NOUN [RELATIVE]."
  (let* ((det (pcase (car words)
                ((or "a" "an" "any") 'a)
                ((or "the" "both") 'the)))
         (count (and (equal (car words) "both") 2))
         (words (if det (cdr words) words))
         (words (if (equal (car words) "of") (lispm-blocks--skip (cdr words) "the")
                  words))
         adjs)
    (when-let* ((number (and (cadr words) (not (equal (cadr words) "of"))
                             (lispm-blocks--parse-word lispm-blocks--numbers words))))
      (setq count (car number) words (cdr number)))
    (while-let ((adj (lispm-blocks--parse-word lispm-blocks--adjectives words)))
      (push (car adj) adjs)
      (setq words (cdr adj)))
    (when-let* ((noun (assoc (car words) lispm-blocks--nouns)))
      (let* ((rel (lispm-blocks--parse-relative (cdr words)))
             (np (list :det det :count count :adjs (nreverse adjs)
                       :noun (nth 1 noun) :plural (nth 2 noun)
                       :rel (car rel))))
        (cons np (if rel (cdr rel) (cdr words)))))))

(defun lispm-blocks--parse-np (words)
  "Parse a noun phrase at the beginning of WORDS."
  (or (lispm-blocks--parse-the-one words)
      (lispm-blocks--parse-pronoun words)
      (lispm-blocks--parse-some words)
      (lispm-blocks--parse-described words)))

(defun lispm-blocks--parse-nps (words)
  "Parse noun phrases joined by \"and\" at the beginning of WORDS."
  (when-let* ((first (lispm-blocks--parse-np words)))
    (let ((nps (list (car first)))
          (rest (cdr first))
          next)
      (while (and (equal (car rest) "and")
                  (setq next (lispm-blocks--parse-np (cdr rest))))
        (push (car next) nps)
        (setq rest (cdr next)))
      (cons (nreverse nps) rest))))

;;; Sentences

(defun lispm-blocks--parse-slot (slot words)
  "Parse the SLOT of a sentence pattern at the beginning of WORDS."
  (pcase slot
    ('np (lispm-blocks--parse-np words))
    ('nps (lispm-blocks--parse-nps words))
    ('prep (lispm-blocks--parse-word lispm-blocks--prepositions words))
    ('comparative (lispm-blocks--parse-word lispm-blocks--comparatives words))))

(defun lispm-blocks--match (entry words)
  "Return the meaning of WORDS if they match ENTRY, (HEAD . PATTERN), else nil."
  (let ((values nil))
    (catch 'fail
      (dolist (element (cdr entry))
        (if (stringp element)
            (if (equal element (car words))
                (pop words)
              (throw 'fail nil))
          (pcase-let ((`(,value . ,rest) (or (lispm-blocks--parse-slot element words)
                                             (throw 'fail nil))))
            (push value values)
            (setq words rest))))
      (and (null words)
           (append (car entry) (nreverse values))))))

(defun lispm-blocks-parse (words)
  "Return the meaning of the sentence WORDS, or nil if it is not understood."
  (cl-some (lambda (entry) (lispm-blocks--match entry words))
           lispm-blocks--sentences))

(provide 'lispm-app-blocks-parser)
;;; lispm-app-blocks-parser.el ends here
