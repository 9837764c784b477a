;;; lispm-app-blocks-answer.el --- The blocks world understands and answers  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `lispm-blocks-respond' takes a sentence, parses it, finds what its
;; noun phrases refer to, plans or answers, and returns the robot's
;; reply in capitals, as Winograd's SHRDLU wrote it.
;;
;; Reference: "the pyramid" must be unique in the scene, or among the
;; things last mentioned; "a block" picks one, preferring one with a
;; clear top; "it" is the thing mentioned last; "them" is the last set
;; the robot listed or counted; "the one you are holding" and "the one
;; which I told you to pick up" are what they say.
;;
;; Descriptions in replies are the shortest that pick out one thing:
;; noun, then colour, then size, then what it supports.
;;
;; A sentence is answered on a copy of the state.  The copy replaces
;; the state only if the answer succeeds, so a plan that fails or a
;; phrase that refers to nothing leaves the world as it was.

;;; Code:

(require 'lispm-apps)                   ; puts the apps folder on `load-path'
(require 'lispm-app-blocks-world)
(require 'lispm-app-blocks-parser)

;;; Replies

(defvar lispm-blocks--said nil
  "Lines said before the final reply to the sentence being answered, newest first.")

(defvar lispm-blocks--heard nil
  "The ids the sentence being answered referred to, newest first.")

(defvar lispm-blocks--told nil
  "The ids the reply being built names, newest first.")

(defun lispm-blocks--reply (text)
  "Stop answering: TEXT is the reply and the state stays as it was."
  (throw 'lispm-blocks--reply text))

(defun lispm-blocks--mention (ids)
  "Note that the reply names the objects IDS; return IDS."
  (setq lispm-blocks--told (append (reverse ids) lispm-blocks--told))
  ids)

(defun lispm-blocks--join (strings)
  "Join STRINGS as a list in English: A, B, AND C."
  (pcase strings
    (`(,one) one)
    (`(,one ,two) (concat one " AND " two))
    (_ (concat (string-join (butlast strings) ", ") ", AND " (car (last strings))))))

(defun lispm-blocks--number-word (n)
  "Return the number N in words, in capitals."
  (upcase (or (car (rassq n lispm-blocks--numbers)) (number-to-string n))))

;;; Matching noun phrases

(defun lispm-blocks--obj (id)
  "Return the object ID of the world being talked about."
  (lispm-blocks-get (lispm-blocks--world) id))

(defun lispm-blocks--noun-p (object noun)
  "Return non-nil if OBJECT can be called NOUN."
  (pcase noun
    ('cube (lispm-blocks-cube-p object))
    ((or 'thing 'one) (memq (lispm-blocks-object-kind object) '(block pyramid box)))
    (_ (eq (lispm-blocks-object-kind object) noun))))

(defun lispm-blocks--adjective-p (object adjective)
  "Return non-nil if OBJECT is ADJECTIVE (a colour, large or small)."
  (pcase adjective
    ('large (lispm-blocks-large-p object))
    ('small (not (lispm-blocks-large-p object)))
    (_ (eq (lispm-blocks-object-color object) adjective))))

(defun lispm-blocks--compare-p (comparative a b)
  "Return non-nil if the object A is COMPARATIVE (taller...) than B."
  (let ((volume (lambda (o) (apply #'* (lispm-blocks-object-size o)))))
    (pcase comparative
      ('taller (> (lispm-blocks-height a) (lispm-blocks-height b)))
      ('shorter (< (lispm-blocks-height a) (lispm-blocks-height b)))
      ('narrower (< (lispm-blocks-width a) (lispm-blocks-width b)))
      ('wider (> (lispm-blocks-width a) (lispm-blocks-width b)))
      ('bigger (> (funcall volume a) (funcall volume b)))
      ('smaller (< (funcall volume a) (funcall volume b))))))

(defun lispm-blocks--located-p (object prep place)
  "Return non-nil if OBJECT is PREP (`in' or `on') the object PLACE."
  (if (and (eq prep 'in) (eq (lispm-blocks-object-id place) 'BOX))
      (lispm-blocks-in-box-p (lispm-blocks--world) object)
    (eq (lispm-blocks-object-support object) (lispm-blocks-object-id place))))

(defun lispm-blocks--described-p (np)
  "Return non-nil if NP is a described noun phrase, not a pronoun or the like."
  (plist-member np :noun))

(defun lispm-blocks--denotes-p (np object)
  "Return non-nil if the noun phrase NP can stand for OBJECT."
  (if (lispm-blocks--described-p np)
      (lispm-blocks--matches-p object np)
    (memq (lispm-blocks-object-id object) (lispm-blocks-refer-all np))))

(defun lispm-blocks--matches-p (object np)
  "Return non-nil if OBJECT fits the description NP, ignoring its determiner."
  (and (lispm-blocks--noun-p object (plist-get np :noun))
       (cl-every (lambda (adj) (lispm-blocks--adjective-p object adj))
                 (plist-get np :adjs))
       (pcase (plist-get np :rel)
         ('nil t)
         (`(:compare ,comparative ,other)
          (lispm-blocks--compare-p comparative object
                                   (lispm-blocks--obj (lispm-blocks-refer other))))
         (`(:supports ,other)
          (cl-some (lambda (o) (lispm-blocks--denotes-p other o))
                   (lispm-blocks-on (lispm-blocks--world)
                                    (lispm-blocks-object-id object))))
         (`(:located ,prep ,other)
          (lispm-blocks--located-p object prep
                                   (lispm-blocks--obj (lispm-blocks-refer other)))))))

(defun lispm-blocks--candidates (np &optional domain)
  "Return the ids of the objects fitting the description NP.
With DOMAIN, a list of ids, look only among those."
  (cl-loop for object in (lispm-blocks-world-objects (lispm-blocks--world))
           when (and (or (null domain) (memq (lispm-blocks-object-id object) domain))
                     (lispm-blocks--matches-p object np))
           collect (lispm-blocks-object-id object)))

(defun lispm-blocks--clear-first (ids)
  "Return IDS with the objects that have nothing on them first."
  (let ((world (lispm-blocks--world)))
    (cl-sort (copy-sequence ids) (lambda (a b) (and (null (lispm-blocks-on world a))
                                                    (lispm-blocks-on world b))))))

;;; Reference

(defun lispm-blocks--hear (ids)
  "Note that the sentence referred to IDS; return IDS."
  (setq lispm-blocks--heard (append (reverse ids) lispm-blocks--heard))
  ids)

(defun lispm-blocks--noun-text (np &optional plural)
  "Return the noun of NP in capitals, in the plural if PLURAL."
  (let ((noun (upcase (symbol-name (plist-get np :noun)))))
    (cond ((not plural) noun)
          ((equal noun "BOX") "BOXES")
          (t (concat noun "S")))))

(defun lispm-blocks-refer (np &optional domain)
  "Return the id of the one object the noun phrase NP refers to.
With DOMAIN, a list of ids, a description looks only among those.
Reply instead if NP refers to nothing, or not to exactly one thing."
  (car
   (lispm-blocks--hear
    (list
     (pcase np
       ('(:pronoun you) (lispm-blocks--reply "I DON'T UNDERSTAND."))
       ('(:pronoun it)
        (or (car (lispm-blocks-state-mentioned lispm-blocks--state))
            (lispm-blocks--reply "I DON'T KNOW WHAT \"IT\" MEANS HERE.")))
       ('(:held)
        (let ((held (lispm-blocks-held (lispm-blocks--world))))
          (if held (lispm-blocks-object-id held)
            (lispm-blocks--reply "I AM NOT HOLDING ANYTHING."))))
       (`(:commanded ,verb)
        (or (cadr (assq verb (lispm-blocks-state-commands lispm-blocks--state)))
            (lispm-blocks--reply "YOU HAVEN'T TOLD ME TO PICK UP ANYTHING.")))
       ((guard (or (not (lispm-blocks--described-p np))
                   (plist-get np :plural)))
        (lispm-blocks--reply "I CAN ONLY DO THAT WITH ONE THING AT A TIME."))
       (_ (lispm-blocks--refer-described np domain)))))))

(defun lispm-blocks--refer-described (np domain)
  "Return the id of the one object the described noun phrase NP refers to.
Look among DOMAIN, a list of ids, if it is non-nil."
  (let ((candidates (lispm-blocks--candidates np domain)))
    (cond
     ((null candidates)
      (lispm-blocks--reply
       (if domain "I DON'T REMEMBER DOING THAT."
         (format "I DON'T SEE ANY %s." (lispm-blocks--noun-text np t)))))
     ((eq (plist-get np :det) 'a)
      (car (lispm-blocks--clear-first candidates)))
     ((null (cdr candidates)) (car candidates))
     (t
      (let ((recent (cl-intersection candidates
                                     (lispm-blocks-state-mentioned lispm-blocks--state))))
        (if (and recent (null (cdr recent)))
            (car recent)
          (lispm-blocks--reply (format "I DON'T UNDERSTAND WHICH %s YOU MEAN."
                                       (lispm-blocks--noun-text np)))))))))

(defun lispm-blocks-refer-all (np)
  "Return the ids of the objects the noun phrase NP refers to, one or more.
\"two pyramids\" picks two; \"blocks\" means all blocks; \"them\" is
the last set the robot listed or counted."
  (lispm-blocks--hear
   (pcase np
     ('(:pronoun them)
      (or (lispm-blocks-state-set lispm-blocks--state)
          (lispm-blocks--reply "I DON'T KNOW WHAT \"THEM\" MEANS HERE.")))
     (`(:some ,inner) (lispm-blocks-refer-all inner))
     ((guard (and (lispm-blocks--described-p np)
                  (or (plist-get np :plural) (plist-get np :count))))
      (let ((candidates (lispm-blocks--clear-first (lispm-blocks--candidates np)))
            (count (plist-get np :count)))
        (cond ((null count) candidates)
              ((>= (length candidates) count) (take count candidates))
              (t (lispm-blocks--reply
                  (format "I DON'T SEE %s %s." (lispm-blocks--number-word count)
                          (lispm-blocks--noun-text np t)))))))
     (_ (list (lispm-blocks-refer np))))))

;;; Descriptions

(defun lispm-blocks-np-text (np)
  "Return the noun phrase NP in capitals, in the words of the robot."
  (pcase np
    ('(:held) "THE ONE I AM HOLDING")
    ('(:commanded pick-up) "THE ONE YOU TOLD ME TO PICK UP")
    (`(:pronoun ,pronoun) (upcase (symbol-name (if (eq pronoun 'you) 'me pronoun))))
    (`(:some ,inner) (concat "AT LEAST ONE OF " (lispm-blocks-np-text inner)))
    (_
     (let ((det (pcase (plist-get np :det) ('the "THE") ('a "A")))
           (count (and (plist-get np :count)
                       (lispm-blocks--number-word (plist-get np :count))))
           (adjs (mapcar (lambda (a) (upcase (symbol-name a))) (plist-get np :adjs)))
           (noun (lispm-blocks--noun-text np (plist-get np :plural)))
           (rel (pcase (plist-get np :rel)
                  (`(:compare ,c ,other)
                   (format "WHICH IS %s THAN %s" (upcase (symbol-name c))
                           (lispm-blocks-np-text other)))
                  (`(:supports ,other)
                   (concat "WHICH SUPPORTS " (lispm-blocks-np-text other)))
                  (`(:located ,prep ,other)
                   (format "WHICH IS %s %s" (upcase (symbol-name prep))
                           (lispm-blocks-np-text other))))))
       (string-join (delq nil `(,det ,count ,@adjs ,noun ,rel)) " ")))))

(defun lispm-blocks--plain-nps (object)
  "Return descriptions of OBJECT without a relative clause, ever more precise."
  (let ((noun (if (lispm-blocks-cube-p object) 'cube (lispm-blocks-object-kind object)))
        (color (lispm-blocks-object-color object))
        (size (if (lispm-blocks-large-p object) 'large 'small)))
    `((:noun ,noun) (:noun ,noun :adjs (,color)) (:noun ,noun :adjs (,size ,color)))))

(defun lispm-blocks--definite (id nps)
  "Return the first of NPS that picks out the object ID alone, made definite.
Return nil if none does."
  (when-let* ((np (cl-find-if (lambda (np) (equal (lispm-blocks--candidates np) (list id)))
                              nps)))
    (append '(:det the) np)))

(defun lispm-blocks--indefinite (object)
  "Return the fullest plain description of OBJECT, as one of several."
  (append '(:det a) (car (last (lispm-blocks--plain-nps object)))))

(defun lispm-blocks-description (id)
  "Return a noun phrase that describes the object ID.
It is the shortest that picks out ID alone: noun, then colour, then
size, then what it supports; or, if none does, an indefinite one."
  (let* ((object (lispm-blocks--obj id))
         (nps (lispm-blocks--plain-nps object))
         (on (car (lispm-blocks-on (lispm-blocks--world) id))))
    (or (lispm-blocks--definite id nps)
        (and on (lispm-blocks--definite
                 id (list (append (car (last nps))
                                  (list :rel (list :supports
                                                   (or (lispm-blocks--definite
                                                        (lispm-blocks-object-id on)
                                                        (lispm-blocks--plain-nps on))
                                                       (lispm-blocks--indefinite on))))))))
        (lispm-blocks--indefinite object))))

(defun lispm-blocks-describe (id)
  "Return the description of the object ID in words, in capitals."
  (lispm-blocks-np-text (lispm-blocks-description id)))

;;; Memory of goals

(defun lispm-blocks--goal-text (event)
  "Return the goal EVENT as a verb phrase; the focus object is \"IT\"."
  (let* ((focus (lispm-blocks-state-focus lispm-blocks--state))
         (name (lambda (id)
                 (lispm-blocks--mention (list id))
                 (if (eq id focus) "IT" (lispm-blocks-describe id))))
         (objects (lispm-blocks-event-objects event))
         (first (car objects)))
    (pcase (lispm-blocks-event-type event)
      ('pickup (if (eq first focus) "PICK IT UP" (concat "PICK UP " (funcall name first))))
      ('cleartop (if (eq first focus) "CLEAN IT OFF"
                   (concat "CLEAN OFF " (funcall name first))))
      ('getridof (concat "GET RID OF " (funcall name first)))
      ('puton (format "PUT %s %s %s" (funcall name first)
                      (if (eq (cadr objects) 'BOX) "INTO" "ON")
                      (funcall name (cadr objects))))
      ('stackup (concat "STACK UP " (lispm-blocks--join (mapcar name objects)))))))

(defun lispm-blocks--explain (event)
  "Return why the robot pursued EVENT; a later \"why?\" asks about the reason."
  (let ((parent (and (lispm-blocks-event-parent event)
                     (lispm-blocks-find-event lispm-blocks--state
                                              (lispm-blocks-event-parent event)))))
    (setf (lispm-blocks-state-why lispm-blocks--state)
          (lispm-blocks-event-id (or parent event)))
    (if parent
        (format "TO %s." (lispm-blocks--goal-text parent))
      "BECAUSE YOU ASKED ME TO.")))

(defun lispm-blocks--why-did (type np &optional _prep place)
  "Answer \"why did you ...?\" about the latest goal of TYPE on NP.
For `puton', PLACE is the noun phrase of where it was put."
  (let* ((place-id (and place (lispm-blocks-refer place)))
         (events (cl-remove-if-not
                  (lambda (e) (and (eq (lispm-blocks-event-type e) type)
                                   (or (null place-id)
                                       (eq (cadr (lispm-blocks-event-objects e)) place-id))))
                  (lispm-blocks-state-events lispm-blocks--state)))
         (domain (mapcar (lambda (e) (car (lispm-blocks-event-objects e))) events))
         (id (lispm-blocks-refer np domain))
         (event (or (cl-find id events :key (lambda (e) (car (lispm-blocks-event-objects e))))
                    (lispm-blocks--reply "I DON'T REMEMBER DOING THAT."))))
    (setf (lispm-blocks-state-focus lispm-blocks--state) id)
    (lispm-blocks--explain event)))

(defun lispm-blocks--why ()
  "Answer \"why?\": the reason for the goal last explained, or the last command."
  (let* ((state lispm-blocks--state)
         (event (if (lispm-blocks-state-why state)
                    (lispm-blocks-find-event state (lispm-blocks-state-why state))
                  (cl-find nil (lispm-blocks-state-events state)
                           :key #'lispm-blocks-event-parent))))
    (if event
        (lispm-blocks--explain event)
      "I HAVEN'T DONE ANYTHING YET.")))

;;; Commands

(defun lispm-blocks--obey (verb id plan)
  "Carry out the user's command VERB about the object ID by calling PLAN.
Return the reply."
  (let ((lispm-blocks--goal nil))
    (funcall plan))
  (push (list verb id) (lispm-blocks-state-commands lispm-blocks--state))
  (setf (lispm-blocks-state-why lispm-blocks--state) nil
        (lispm-blocks-state-focus lispm-blocks--state) nil)
  "OK.")

(defun lispm-blocks--put (id prep place)
  "Obey \"put\" the object ID PREP (`in' or `on') the object PLACE."
  (when (and (eq prep 'in) (not (eq place 'BOX)))
    (lispm-blocks--reply "I CAN'T."))
  (lispm-blocks--obey 'put id (lambda () (lispm-blocks-put-on id place))))

(defun lispm-blocks--find-and-put (np it prep place)
  "Obey \"find NP and put IT PREP PLACE\".
When NP mentions another thing, say which one \"it\" is taken to be."
  (let ((id (lispm-blocks-refer np)))
    (when (and (equal it '(:pronoun it)) (plist-get np :rel))
      (push (format "BY \"IT\", I ASSUME YOU MEAN %s."
                    (lispm-blocks-np-text (plist-put (copy-sequence np) :det 'the)))
            lispm-blocks--said))
    (lispm-blocks--put (if (equal it '(:pronoun it)) id (lispm-blocks-refer it))
                       prep (lispm-blocks-refer place))))

(defun lispm-blocks--stack-up (nps)
  "Obey \"stack up\" the things NPS refer to."
  (let ((ids (delete-dups (mapcan (lambda (np) (copy-sequence (lispm-blocks-refer-all np)))
                                  nps))))
    (unless (cdr ids)
      (lispm-blocks--reply "I CAN'T."))
    (lispm-blocks--obey 'stack-up (car ids) (lambda () (lispm-blocks-stack-up ids)))))

;;; Questions

(defun lispm-blocks--list-reply (ids)
  "Reply with the objects IDS listed, remembering them as \"them\"."
  (setf (lispm-blocks-state-set lispm-blocks--state) ids)
  (if ids
      (concat (lispm-blocks--join (mapcar #'lispm-blocks-describe
                                          (lispm-blocks--mention ids)))
              ".")
    "NOTHING."))

(defun lispm-blocks--contents (prep np)
  "Answer what is PREP (`in' or `on') the object NP refers to."
  (let* ((place (lispm-blocks-refer np))
         (world (lispm-blocks--world))
         (inside (and (or (eq prep 'on) (eq place 'BOX))
                      (lispm-blocks-on world place))))
    (lispm-blocks--list-reply
     (mapcar #'lispm-blocks-object-id
             (cl-sort (copy-sequence inside) #'< :key #'lispm-blocks-object-x)))))

(defun lispm-blocks--supporter (np)
  "Answer what supports the object NP refers to."
  (let ((support (lispm-blocks-object-support (lispm-blocks--obj (lispm-blocks-refer np)))))
    (if (eq support 'hand)
        "NOTHING: I AM HOLDING IT."
      (concat (lispm-blocks-describe (car (lispm-blocks--mention (list support)))) "."))))

(defun lispm-blocks--supported-p (np)
  "Answer whether the object NP refers to is supported, and by what."
  (let ((support (lispm-blocks-object-support (lispm-blocks--obj (lispm-blocks-refer np)))))
    (pcase support
      ('hand "NO, I AM HOLDING IT.")
      ('nil "NO.")
      (_ (format "YES, BY %s."
                 (lispm-blocks-describe (car (lispm-blocks--mention (list support)))))))))

(defun lispm-blocks--count (np &optional where)
  "Answer how many things NP refers to; WHERE is (NEGATED PREP PLACE-NP) or nil."
  (let* ((ids (lispm-blocks-refer-all np))
         (ids (pcase where
                (`(,negated ,prep ,place-np)
                 (let ((place (lispm-blocks--obj (lispm-blocks-refer place-np))))
                   (cl-remove-if-not (lambda (id)
                                       (xor negated (lispm-blocks--located-p
                                                     (lispm-blocks--obj id) prep place)))
                                     ids)))
                (_ ids))))
    (setf (lispm-blocks-state-set lispm-blocks--state) ids)
    (if ids
        (format "%s OF THEM." (lispm-blocks--number-word (length ids)))
      "NONE OF THEM.")))

(defun lispm-blocks--compare (np comparative other)
  "Answer whether NP is COMPARATIVE than OTHER.
For \"at least one of ...\" and indefinite phrases, name those that are."
  (let ((reference (lispm-blocks--obj (lispm-blocks-refer other))))
    (if (or (eq (car np) :some) (plist-get np :plural) (eq (plist-get np :det) 'a))
        (let ((ids (cl-remove-if-not
                    (lambda (id) (lispm-blocks--compare-p comparative (lispm-blocks--obj id)
                                                          reference))
                    (lispm-blocks-refer-all (if (eq (car np) :some) (cadr np) np)))))
          (pcase ids
            ('nil "NO.")
            (`(,id) (format "YES, %s." (lispm-blocks-describe
                                        (car (lispm-blocks--mention (list id))))))
            (_ (setf (lispm-blocks-state-set lispm-blocks--state) ids)
               (format "YES, %s OF THEM: %s." (lispm-blocks--number-word (length ids))
                       (lispm-blocks--join (mapcar #'lispm-blocks-describe
                                                   (lispm-blocks--mention ids)))))))
      (if (lispm-blocks--compare-p comparative (lispm-blocks--obj (lispm-blocks-refer np))
                                   reference)
          "YES."
        "NO."))))

(defun lispm-blocks--kinds (np)
  "Return the objects NP can stand for, for a question about what can be."
  (if (lispm-blocks--described-p np)
      (mapcar #'lispm-blocks--obj (lispm-blocks--candidates np))
    (mapcar #'lispm-blocks--obj (lispm-blocks-refer-all np))))

(defun lispm-blocks--can-support (np-below np-above)
  "Answer whether a thing like NP-BELOW can support one like NP-ABOVE.
The robot knows only by example: if the scene shows one, YES."
  (if (cl-some (lambda (above)
                 (cl-some (lambda (below)
                            (eq (lispm-blocks-object-support above)
                                (lispm-blocks-object-id below)))
                          (lispm-blocks--kinds np-below)))
               (lispm-blocks--kinds np-above))
      "YES."
    "I DON'T KNOW."))

(defun lispm-blocks--can-pick-up (agent np)
  "Answer whether AGENT can pick up things like NP.  Only the robot can."
  (cond ((not (equal agent '(:pronoun you)))
         (lispm-blocks-refer agent)
         "NO.")
        ((memq (plist-get np :noun) '(block cube pyramid thing one)) "YES.")
        (t "NO.")))

;;; Answering a sentence

(defun lispm-blocks--answer (meaning)
  "Return the reply to the sentence whose MEANING is given by the parser."
  (pcase meaning
    (`(pick-up ,np)
     (let ((id (lispm-blocks-refer np)))
       (lispm-blocks--obey 'pick-up id (lambda () (lispm-blocks-pick-up id)))))
    (`(put-down ,np) (lispm-blocks--put (lispm-blocks-refer np) 'on 'TABLE))
    (`(put ,np ,prep ,place)
     (lispm-blocks--put (lispm-blocks-refer np) prep (lispm-blocks-refer place)))
    (`(find-and-put ,np ,it ,prep ,place) (lispm-blocks--find-and-put np it prep place))
    (`(stack-up ,nps) (lispm-blocks--stack-up nps))
    (`(contents ,prep ,np) (lispm-blocks--contents prep np))
    (`(supporter ,np) (lispm-blocks--supporter np))
    (`(count ,np) (lispm-blocks--count np))
    (`(count-in ,np ,prep ,place) (lispm-blocks--count np (list nil prep place)))
    (`(count-not-in ,np ,prep ,place) (lispm-blocks--count np (list t prep place)))
    (`(compare ,np ,comparative ,other) (lispm-blocks--compare np comparative other))
    (`(supported-p ,np) (lispm-blocks--supported-p np))
    (`(located-p ,np ,prep ,place)
     (if (lispm-blocks--located-p (lispm-blocks--obj (lispm-blocks-refer np)) prep
                                  (lispm-blocks--obj (lispm-blocks-refer place)))
         "YES."
       "NO."))
    (`(can-pick-up ,agent ,np) (lispm-blocks--can-pick-up agent np))
    (`(can-support ,below ,above) (lispm-blocks--can-support below above))
    (`(can-be-supported ,above ,below) (lispm-blocks--can-support below above))
    (`(why-did ,type . ,args) (apply #'lispm-blocks--why-did type args))
    (`(why) (lispm-blocks--why))))

(defun lispm-blocks--commit (state work)
  "Make STATE what WORK, a copy of it, has become."
  (pcase-dolist (`(,slot . ,_) (cdr (cl-struct-slot-info 'lispm-blocks-state)))
    (setf (cl-struct-slot-value 'lispm-blocks-state slot state)
          (cl-struct-slot-value 'lispm-blocks-state slot work))))

(defun lispm-blocks-respond (state sentence)
  "Answer SENTENCE in the blocks world STATE and return the reply lines.
STATE changes only if the answer succeeds; its `moves' are then the
primitives the hand carried out, nil for a question or a failure."
  (let ((words (lispm-blocks-tokenize sentence)))
    (when words
      (let* ((lispm-blocks--state (lispm-blocks-copy-state state))
             (lispm-blocks--said nil)
             (lispm-blocks--heard nil)
             (lispm-blocks--told nil)
             (unknown (lispm-blocks-unknown-word words))
             (meaning (and (not unknown) (lispm-blocks-parse words)))
             (done nil)
             (reply (cond
                     (unknown (format "SORRY, I DON'T KNOW THE WORD \"%s\"."
                                      (upcase unknown)))
                     ((null meaning) "I DON'T UNDERSTAND.")
                     (t (setf (lispm-blocks-state-moves lispm-blocks--state) nil)
                        (catch 'lispm-blocks--reply
                          (prog1 (lispm-blocks--answer meaning)
                            (setq done t)))))))
        (if (not done)
            (setf (lispm-blocks-state-moves state) nil)
          (when (or lispm-blocks--told lispm-blocks--heard)
            (setf (lispm-blocks-state-mentioned lispm-blocks--state)
                  (delete-dups (append lispm-blocks--told lispm-blocks--heard))))
          (lispm-blocks--commit state lispm-blocks--state))
        (reverse (cons reply lispm-blocks--said))))))

(provide 'lispm-app-blocks-answer)
;;; lispm-app-blocks-answer.el ends here
