;;; lispm-app-blocks-test.el --- Tests of LispM's SHRDLU-style blocks world  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Exchanges 1-12 of Winograd's dialogue (summarised in the reference),
;; with the replies, the world after each and the moves the planner
;; reports; the memory of goals behind "why"; the parser's robustness;
;; the drawing and its animation; and the two buffers.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-app-blocks)

(defun lispm-blocks-test--support (state id)
  "Return what the object ID rests on in STATE."
  (lispm-blocks-object-support (lispm-blocks-get (lispm-blocks-state-world state) id)))

(defun lispm-blocks-test--held (state)
  "Return the id of the object in the hand in STATE, or nil."
  (let ((held (lispm-blocks-held (lispm-blocks-state-world state))))
    (and held (lispm-blocks-object-id held))))

(defun lispm-blocks-test--supports (state)
  "Return an alist from each object of STATE to what it rests on."
  (mapcar (lambda (o) (cons (lispm-blocks-object-id o) (lispm-blocks-object-support o)))
          (lispm-blocks-world-objects (lispm-blocks-state-world state))))

(defun lispm-blocks-test--say (state sentence)
  "Say SENTENCE in STATE and return the reply lines joined by newlines."
  (string-join (lispm-blocks-respond state sentence) "\n"))

(defun lispm-blocks-test--after (sentences)
  "Return a fresh state after SENTENCES have been said, each answered."
  (let ((state (lispm-blocks-new-state)))
    (dolist (sentence sentences state)
      (lispm-blocks-respond state sentence))))

(defconst lispm-blocks-test--dialogue
  '("pick up a big red block."
    "grasp the pyramid."
    "find a block which is taller than the one you are holding and put it into the box."
    "what does the box contain?"
    "what is the pyramid supported by?"
    "how many blocks are not in the box?"
    "is at least one of them narrower than the one which i told you to pick up?"
    "is it supported?"
    "can the table pick up blocks?"
    "can a pyramid be supported by a block?"
    "can a pyramid support a pyramid?"
    "stack up two pyramids.")
  "Exchanges 1-12 of Winograd's dialogue (1971), the person's side.")

;;; Exchanges 1-12

(ert-deftest lispm-blocks-test-exchange-1 ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "pick up a big red block.") "OK."))
    (should (eq (lispm-blocks-test--held state) 'B6))
    (should (eq (lispm-blocks-test--support state 'B7) 'TABLE))
    (should-not (lispm-blocks-on (lispm-blocks-state-world state) 'B6))
    ;; It cleared the green cube off first, then grasped and lifted B6.
    (should (equal (lispm-blocks-state-moves state)
                   '((:move 11 5) (:grasp B7) (:move 11 8) (:move 32 2) (:release TABLE)
                     (:move 11 3) (:grasp B6) (:move 11 9))))
    (should (equal (lispm-blocks-state-commands state) '((pick-up B6))))))

(ert-deftest lispm-blocks-test-exchange-1-goal-tree ()
  (let* ((state (lispm-blocks-test--after '("pick up a big red block.")))
         (tree (mapcar (lambda (e)
                         (list (lispm-blocks-event-id e) (lispm-blocks-event-type e)
                               (lispm-blocks-event-objects e) (lispm-blocks-event-parent e)))
                       (reverse (lispm-blocks-state-events state)))))
    (should (equal tree '((1 pickup (B6) nil)
                          (2 cleartop (B6) 1)
                          (3 getridof (B7) 2)
                          (4 pickup (B7) 3))))))

(ert-deftest lispm-blocks-test-exchange-2 ()
  (let* ((state (lispm-blocks-test--after (take 1 lispm-blocks-test--dialogue)))
         (before (lispm-blocks-test--supports state)))
    (should (equal (lispm-blocks-test--say state "grasp the pyramid.")
                   "I DON'T UNDERSTAND WHICH PYRAMID YOU MEAN."))
    (should (equal (lispm-blocks-test--supports state) before))
    (should (eq (lispm-blocks-test--held state) 'B6))
    (should-not (lispm-blocks-state-moves state))))

(ert-deftest lispm-blocks-test-exchange-3 ()
  (let ((state (lispm-blocks-test--after (take 2 lispm-blocks-test--dialogue))))
    (should (equal (lispm-blocks-test--say state (nth 2 lispm-blocks-test--dialogue))
                   "BY \"IT\", I ASSUME YOU MEAN THE BLOCK WHICH IS TALLER THAN THE \
ONE I AM HOLDING.\nOK."))
    (should (eq (lispm-blocks-test--support state 'B6) 'TABLE))
    (should (eq (lispm-blocks-test--support state 'B10) 'BOX))
    (should-not (lispm-blocks-test--held state))
    (should (equal (lispm-blocks-state-moves state)
                   '((:move 11 3) (:release TABLE) (:move 16 4) (:grasp B10) (:move 16 10)
                     (:move 26 4) (:release BOX))))))

(ert-deftest lispm-blocks-test-exchanges-4-to-12 ()
  (let ((state (lispm-blocks-test--after (take 3 lispm-blocks-test--dialogue))))
    (pcase-dolist (`(,sentence ,reply ,check)
                   `((,(nth 3 lispm-blocks-test--dialogue)
                      "THE BLUE PYRAMID AND THE BLUE BLOCK."
                      ,(lambda (s) (should (equal (take 2 (lispm-blocks-state-mentioned s))
                                                  '(B10 B4)))))
                     (,(nth 4 lispm-blocks-test--dialogue) "THE BOX." nil)
                     (,(nth 5 lispm-blocks-test--dialogue) "FOUR OF THEM."
                      ,(lambda (s) (should (equal (sort (copy-sequence
                                                         (lispm-blocks-state-set s))
                                                        #'string<)
                                                  '(B1 B3 B6 B7)))))
                     (,(nth 6 lispm-blocks-test--dialogue) "YES, THE RED CUBE."
                      ,(lambda (s) (should (eq (car (lispm-blocks-state-mentioned s)) 'B1))))
                     (,(nth 7 lispm-blocks-test--dialogue) "YES, BY THE TABLE." nil)
                     (,(nth 8 lispm-blocks-test--dialogue) "NO." nil)
                     (,(nth 9 lispm-blocks-test--dialogue) "YES." nil)
                     (,(nth 10 lispm-blocks-test--dialogue) "I DON'T KNOW." nil)))
      (let ((before (lispm-blocks-test--supports state)))
        (should (equal (list sentence (lispm-blocks-test--say state sentence))
                       (list sentence reply)))
        ;; Questions move nothing.
        (should (equal (lispm-blocks-test--supports state) before))
        (should-not (lispm-blocks-state-moves state))
        (when check (funcall check state))))))

(ert-deftest lispm-blocks-test-exchange-12 ()
  (let* ((state (lispm-blocks-test--after (take 11 lispm-blocks-test--dialogue)))
         (before (lispm-blocks-test--supports state))
         (events (lispm-blocks-state-events state)))
    (should (equal (lispm-blocks-test--say state "stack up two pyramids.") "I CAN'T."))
    (should (equal (lispm-blocks-test--supports state) before))
    (should-not (lispm-blocks-state-moves state))
    (should (eq (lispm-blocks-state-events state) events))))

;;; Memory of goals

(ert-deftest lispm-blocks-test-why-chain ()
  (let ((state (lispm-blocks-test--after '("pick up a big red block."))))
    (dolist (exchange '(("why did you pick up the green cube?" "TO GET RID OF IT.")
                        ("why?" "TO CLEAN OFF THE LARGE RED BLOCK.")
                        ("why?" "TO PICK UP THE LARGE RED BLOCK.")
                        ("why?" "BECAUSE YOU ASKED ME TO.")
                        ("why did you pick it up?" "BECAUSE YOU ASKED ME TO.")))
      (should (equal (list (car exchange) (lispm-blocks-test--say state (car exchange)))
                     exchange)))))

(ert-deftest lispm-blocks-test-why-right-after-the-command ()
  (let ((state (lispm-blocks-test--after '("pick up a big red block."))))
    (should (equal (lispm-blocks-test--say state "why did you pick it up?")
                   "BECAUSE YOU ASKED ME TO."))
    (should (equal (lispm-blocks-test--say state "why did you get rid of the green cube?")
                   "TO CLEAN OFF THE LARGE RED BLOCK."))
    (should (equal (lispm-blocks-test--say state "why did you do that?")
                   "TO PICK UP THE LARGE RED BLOCK."))
    (should (equal (lispm-blocks-test--say state "why did you clear off the red cube?")
                   "I DON'T REMEMBER DOING THAT."))))

(ert-deftest lispm-blocks-test-why-before-anything ()
  (should (equal (lispm-blocks-test--say (lispm-blocks-new-state) "why?")
                 "I HAVEN'T DONE ANYTHING YET.")))

;;; Understanding

(ert-deftest lispm-blocks-test-case-and-punctuation-do-not-matter ()
  (should (equal (lispm-blocks-test--say (lispm-blocks-new-state) "PICK UP A BIG RED BLOCK")
                 "OK."))
  (should (equal (lispm-blocks-test--say (lispm-blocks-new-state) "Pick up a big, red block!")
                 "OK.")))

(ert-deftest lispm-blocks-test-grasp-a-unique-pyramid ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "grasp the red pyramid.") "OK."))
    (should (eq (lispm-blocks-test--held state) 'B5))))

(ert-deftest lispm-blocks-test-put-clears-the-place-first ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "put the blue pyramid on the red cube.")
                   "OK."))
    (should (eq (lispm-blocks-test--support state 'B4) 'B1))
    (should (eq (lispm-blocks-test--support state 'B2) 'TABLE))
    (should-not (lispm-blocks-test--held state))))

(ert-deftest lispm-blocks-test-pick-up-clears-before-grasping ()
  (let ((state (lispm-blocks-new-state)))
    (lispm-blocks-respond state "pick up the red cube.")
    (let ((grasps (cl-loop for step in (lispm-blocks-state-moves state)
                           when (eq (car step) :grasp) collect (cadr step))))
      (should (equal grasps '(B2 B1))))
    (should (eq (lispm-blocks-test--support state 'B2) 'TABLE))))

(ert-deftest lispm-blocks-test-nothing-on-a-pyramid ()
  (let* ((state (lispm-blocks-new-state))
         (before (lispm-blocks-test--supports state)))
    (should (equal (lispm-blocks-test--say state "put the red cube on the blue pyramid.")
                   "I CAN'T."))
    (should (equal (lispm-blocks-test--supports state) before))))

(ert-deftest lispm-blocks-test-stack-up-two-blocks ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "stack up the red cube and the blue block.")
                   "OK."))
    (should (eq (lispm-blocks-test--support state 'B1) 'B10))
    (should (equal (lispm-blocks-test--say state "what is the red cube supported by?")
                   "THE BLUE BLOCK."))))

(ert-deftest lispm-blocks-test-descriptions ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "what is on the table?")
                   "THE RED CUBE, THE LARGE GREEN CUBE WHICH SUPPORTS THE RED PYRAMID, \
THE LARGE RED BLOCK, THE BLUE BLOCK, AND THE BOX."))
    (should (equal (lispm-blocks-test--say state "how many of them are taller than it?")
                   "I DON'T UNDERSTAND."))
    (should (equal (lispm-blocks-test--say state "is the red cube in the box?") "NO."))
    (should (equal (lispm-blocks-test--say state "is the blue pyramid in the box?") "YES."))))

(ert-deftest lispm-blocks-test-unknown-words-and-nonsense ()
  (let ((state (lispm-blocks-new-state)))
    (should (equal (lispm-blocks-test--say state "grasp the steeple.")
                   "SORRY, I DON'T KNOW THE WORD \"STEEPLE\"."))
    (should (equal (lispm-blocks-test--say state "box the red pick.") "I DON'T UNDERSTAND."))
    (should (equal (lispm-blocks-test--say state "is it supported?")
                   "I DON'T KNOW WHAT \"IT\" MEANS HERE."))
    (should (equal (lispm-blocks-test--say state "grasp the one you are holding.")
                   "I AM NOT HOLDING ANYTHING."))
    (should-not (lispm-blocks-respond state "  ... "))))

;;; Drawing and animation

(ert-deftest lispm-blocks-test-render ()
  (let* ((picture (lispm-blocks-render (lispm-blocks-initial-world)))
         (lines (split-string picture "\n" t)))
    (should (= (length lines) 13))
    (should (equal (car (last lines)) (make-string 72 ?=)))
    ;; The red cube and the green pyramid on it, at the left.
    (should (equal (substring (nth 11 lines) 2 6) "[RR]"))
    (should (equal (substring (nth 10 lines) 2 6) "/GG\\"))
    ;; The blue block, four lines tall.
    (should (equal (cl-loop for line in lines count (string-match-p "\\[BBBBBB\\]" line))
                   4))
    ;; The box's walls and the hand's claw.
    (should (equal (substring (nth 11 lines) 38 39) "|"))
    (should (equal (substring (nth 11 lines) 57 58) "|"))
    (should (string-match-p "/|\\\\" (nth 3 lines)))))

(ert-deftest lispm-blocks-test-hand-moves-up-across-down ()
  (let ((world (lispm-blocks-initial-world)))
    ;; The hand has grasped the green cube on the big red block.
    (lispm-blocks-apply world '(:move 11 5))
    (lispm-blocks-apply world '(:grasp B7))
    (should (= (lispm-blocks-clearance world) 8))
    (let ((path (lispm-blocks--path world 32 2)))
      (should (equal (take 3 path) '((11 6) (11 7) (11 8))))
      (should (equal (nth 3 path) '(12 8)))
      (should (equal (nth 23 path) '(32 8)))
      (should (equal (nthcdr 24 path) '((32 7) (32 6) (32 5) (32 4) (32 3) (32 2)))))
    ;; Already high enough: straight across.
    (lispm-blocks-apply world '(:move 11 8))
    (should (equal (lispm-blocks--path world 13 8) '((12 8) (13 8))))))

(ert-deftest lispm-blocks-test-frames-end-in-the-planned-world ()
  (let* ((state (lispm-blocks-new-state))
         (before (lispm-blocks-copy-world (lispm-blocks-state-world state))))
    (lispm-blocks-respond state "pick up a big red block.")
    (let ((frames (lispm-blocks-frames before (lispm-blocks-state-moves state))))
      (should (equal (car (last frames))
                     (lispm-blocks-render (lispm-blocks-state-world state))))
      ;; The green cube is carried across, high above the box.
      (should (cl-some (lambda (frame)
                         (cl-some (lambda (line)
                                    (and (>= (length line) 48)
                                         (equal (substring line 40 48) "[GGGGGG]")))
                                  (take 5 (split-string frame "\n"))))
                       frames)))))

(ert-deftest lispm-blocks-test-animation-runs-and-skips ()
  (let* ((shown nil)
         (done nil)
         (lispm-blocks-frame-delay 3600))
    (cl-letf (((symbol-function 'lispm-blocks--show) (lambda (p) (push p shown))))
      (lispm-blocks--animate '("one" "two" "three") (lambda () (setq done t)))
      (should (equal shown '("one")))
      (should lispm-blocks--timer)
      (should-not done)
      (lispm-blocks--next-frame)
      (should (equal shown '("two" "one")))
      ;; A key skips the rest.
      (lispm-blocks--finish-animation)
      (should done)
      (should-not lispm-blocks--timer)
      (should-not lispm-blocks--frames))))

;;; The buffers

(ert-deftest lispm-blocks-test-dialogue-and-scene ()
  (save-window-excursion
    (setq lispm-blocks--current nil)
    (dolist (name (list lispm-blocks-buffer-name lispm-blocks-scene-buffer-name))
      (when (get-buffer name) (kill-buffer name)))
    (lispm-blocks)
    (unwind-protect
        (progn
          (should (equal (buffer-name) lispm-blocks-buffer-name))
          (should (eq (window-buffer (window-in-direction 'above))
                      (get-buffer lispm-blocks-scene-buffer-name)))
          (execute-kbd-macro (kbd "p i c k SPC u p SPC a SPC b i g SPC r e d SPC b l o c k RET"))
          (should (string-suffix-p "> pick up a big red block\nOK.\n\n> " (buffer-string)))
          (should (equal (lispm-blocks-say "what does the box contain?")
                         "THE BLUE PYRAMID."))
          (with-current-buffer lispm-blocks-scene-buffer-name
            (should (string-match-p (regexp-quote (lispm-blocks-render
                                                   (lispm-blocks-state-world
                                                    lispm-blocks--current)))
                                    (buffer-substring-no-properties (point-min) (point-max)))))
          (execute-kbd-macro (kbd "C-c C-n"))
          (should (string-suffix-p "\n\n> " (buffer-string)))
          (should-not (string-match-p "OK\\." (buffer-string)))
          (should-not (lispm-blocks-held (lispm-blocks-state-world lispm-blocks--current)))
          (let ((windows (length (window-list))))
            (goto-char (point-min))
            (execute-kbd-macro (kbd "q"))
            (should (< (length (window-list)) windows))))
      (kill-buffer lispm-blocks-buffer-name)
      (kill-buffer lispm-blocks-scene-buffer-name))))

(provide 'lispm-app-blocks-test)
;;; lispm-app-blocks-test.el ends here
