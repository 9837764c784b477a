;;; lispm-app-blocks.el --- A SHRDLU-style blocks world  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A blocks world after Terry Winograd's SHRDLU (MIT, 1968-70): a table
;; with blocks, pyramids and a box, a robot hand, and a conversation in
;; a small English.  Written for LispM from the published descriptions
;; of SHRDLU's behaviour; no code of SHRDLU or of its ports is used.
;;
;; `M-x lispm-blocks' shows the scene above and the dialogue below.
;; Type a sentence and press RET: the robot answers, and each move of
;; its plan is animated (hand up, across, down).  Any key skips to the
;; end of the animation.
;;
;; The pieces: lispm-app-blocks-world.el (the scene, the hand and the
;; planner), lispm-app-blocks-parser.el (the English), and
;; lispm-app-blocks-answer.el (reference, answers and memory).  This
;; file draws the scene and runs the two buffers.  `lispm-blocks-say'
;; drives the robot from Lisp.

;;; Code:

(require 'lispm-apps)
(require 'lispm-app-blocks-answer)

(lispm-define-app blocks
  :title "Blocks"
  :shelf classic-ai
  :summary "A SHRDLU-style robot arm (after Winograd, 1970) that you talk to."
  :command lispm-blocks)

(defgroup lispm-blocks nil
  "The blocks world, an app of LispM's Classic AI shelf."
  :group 'lispm-apps
  :prefix "lispm-blocks-")

(defcustom lispm-blocks-animate t
  "Non-nil means animate each move of the robot's hand.
Without animation the scene jumps to the result of each command."
  :type 'boolean
  :group 'lispm-blocks)

(defcustom lispm-blocks-frame-delay 0.04
  "Seconds between two pictures of an animated move."
  :type 'number
  :group 'lispm-blocks)

;;; Drawing the scene

(defface lispm-blocks-red
  '((((class color) (min-colors 8)) :background "red3" :foreground "white")
    (t :inverse-video t))
  "Face for red things in the blocks world."
  :group 'lispm-blocks)

(defface lispm-blocks-green
  '((((class color) (min-colors 8)) :background "green4" :foreground "white")
    (t :inverse-video t))
  "Face for green things in the blocks world."
  :group 'lispm-blocks)

(defface lispm-blocks-blue
  '((((class color) (min-colors 8)) :background "blue3" :foreground "white")
    (t :inverse-video t))
  "Face for blue things in the blocks world."
  :group 'lispm-blocks)

(defface lispm-blocks-furniture '((t :inherit bold))
  "Face for the table, the box and the hand."
  :group 'lispm-blocks)

(defconst lispm-blocks--paints
  '((red "R" lispm-blocks-red) (green "G" lispm-blocks-green)
    (blue "B" lispm-blocks-blue))
  "How to paint each colour: (COLOR LETTER FACE).
The letter tells the colours apart without colours.")

(defun lispm-blocks--canvas (rows columns)
  "Return a blank canvas of ROWS lines of COLUMNS spaces."
  (apply #'vector (cl-loop repeat rows collect (make-string columns ?\s))))

(defun lispm-blocks--paint (canvas z column text face)
  "Write TEXT in FACE on CANVAS at height Z, from COLUMN on.
Height 0 is the bottom line; what falls outside is clipped."
  (let ((row (- (length canvas) 1 z)))
    (when (< -1 row (length canvas))
      (let ((line (aref canvas row)))
        (dotimes (i (length text))
          (let ((col (+ column i)))
            (when (< -1 col (length line))
              (aset line col (aref text i))
              (put-text-property col (1+ col) 'face face line))))))))

(defun lispm-blocks--paint-object (canvas world object)
  "Paint OBJECT of WORLD on CANVAS: a block, a pyramid or the box."
  (let* ((left (* 2 (lispm-blocks-left world object)))
         (columns (* 2 (lispm-blocks-span object)))
         (bottom (lispm-blocks-bottom world object))
         (height (lispm-blocks-height object))
         (paint (cdr (assq (lispm-blocks-object-color object) lispm-blocks--paints)))
         (fill (lambda (n) (apply #'concat (make-list n (car paint))))))
    (pcase (lispm-blocks-object-kind object)
      ('block
       (dotimes (i height)
         (lispm-blocks--paint canvas (+ bottom i) left
                              (concat "[" (funcall fill (- columns 2)) "]")
                              (cadr paint))))
      ('pyramid
       (dotimes (i height)
         (let* ((inset (/ (* i columns) (* 2 height)))
                (inner (- columns (* 2 inset))))
           (lispm-blocks--paint canvas (+ bottom i) (+ left inset)
                                (if (<= inner 2) "/\\"
                                  (concat "/" (funcall fill (- inner 2)) "\\"))
                                (cadr paint)))))
      ('box
       (dotimes (i height)
         (dolist (col (list left (+ left columns -1)))
           (lispm-blocks--paint canvas (+ bottom i) col "|"
                                'lispm-blocks-furniture)))))))

(defun lispm-blocks--paint-hand (canvas world)
  "Paint the hand of WORLD on CANVAS: a claw on a cable from the top."
  (let ((column (1- (* 2 (lispm-blocks-world-hand-x world))))
        (z (lispm-blocks-world-hand-z world)))
    (cl-loop for above from (1+ z) below (length canvas)
             do (lispm-blocks--paint canvas above column "|" 'lispm-blocks-furniture))
    (lispm-blocks--paint canvas z (1- column) "/|\\" 'lispm-blocks-furniture)))

(defun lispm-blocks--rows (world)
  "Return the number of lines needed to draw WORLD, at least 12."
  (max 12
       (+ 2 (lispm-blocks-world-hand-z world))
       (1+ (cl-loop for o in (lispm-blocks-world-objects world)
                    maximize (lispm-blocks-top world o)))))

(defun lispm-blocks-render (world)
  "Return a picture of WORLD, seen from the side, as a string."
  (let* ((columns (* 2 (lispm-blocks-span (lispm-blocks-get world 'TABLE))))
         (canvas (lispm-blocks--canvas (lispm-blocks--rows world) columns)))
    (dolist (object (lispm-blocks-world-objects world))
      (lispm-blocks--paint-object canvas world object))
    (lispm-blocks--paint-hand canvas world)
    (concat (mapconcat #'identity canvas "\n") "\n"
            (propertize (make-string columns ?=) 'face 'lispm-blocks-furniture)
            "\n")))

;;; Animating the hand

(defun lispm-blocks--path (world x z)
  "Return the positions (X Z) the hand of WORLD passes through to reach X, Z.
It goes up to a clear height, across, and down, one step at a time."
  (let* ((from-x (lispm-blocks-world-hand-x world))
         (from-z (lispm-blocks-world-hand-z world))
         (top (max from-z z (lispm-blocks-clearance world))))
    (append (mapcar (lambda (h) (list from-x h)) (number-sequence (1+ from-z) top))
            (mapcar (lambda (c) (list c top))
                    (cdr (number-sequence from-x x (if (< from-x x) 1 -1))))
            (mapcar (lambda (h) (list x h)) (number-sequence (1- top) z -1)))))

(defun lispm-blocks-frames (world plan)
  "Return a picture of WORLD for each step of the hand in carrying out PLAN.
PLAN is a list of the hand's primitives; WORLD does not change."
  (let ((world (lispm-blocks-copy-world world))
        frames)
    (dolist (step plan)
      (dolist (step (pcase step
                      (`(:move ,x ,z) (mapcar (lambda (p) (cons :move p))
                                              (lispm-blocks--path world x z)))
                      (_ (list step))))
        (lispm-blocks-apply world step)
        (push (lispm-blocks-render world) frames)))
    (nreverse frames)))

(defvar lispm-blocks--frames nil
  "The pictures of the running animation still to be shown.")

(defvar lispm-blocks--timer nil
  "The timer of the running animation.")

(defvar lispm-blocks--after-animation nil
  "The function to call when the running animation ends.")

(defun lispm-blocks--animate (frames done)
  "Show FRAMES one after the other, then call DONE."
  (setq lispm-blocks--frames frames
        lispm-blocks--after-animation done)
  (lispm-blocks--next-frame))

(defun lispm-blocks--next-frame ()
  "Show the next picture of the animation, or end it."
  (if lispm-blocks--frames
      (progn
        (lispm-blocks--show (pop lispm-blocks--frames))
        (setq lispm-blocks--timer
              (run-at-time lispm-blocks-frame-delay nil #'lispm-blocks--next-frame)))
    (lispm-blocks--finish-animation)))

(defun lispm-blocks--finish-animation ()
  "End the running animation, if any, at its last picture.
The dialogue's buffers run this before every command, so any key
skips the animation."
  (when lispm-blocks--timer
    (cancel-timer lispm-blocks--timer))
  (setq lispm-blocks--timer nil
        lispm-blocks--frames nil)
  (when-let* ((done lispm-blocks--after-animation))
    (setq lispm-blocks--after-animation nil)
    (funcall done)))

;;; The scene buffer

(defconst lispm-blocks-scene-buffer-name "*LispM Blocks*"
  "The name of the buffer that shows the scene.")

(defconst lispm-blocks-buffer-name "*LispM Blocks Dialogue*"
  "The name of the buffer of the dialogue with the robot.")

(defvar lispm-blocks--current nil
  "The state of the blocks world on the screen.")

(defun lispm-blocks--show (picture)
  "Show PICTURE in the scene buffer, if there is one."
  (when-let* ((buffer (get-buffer lispm-blocks-scene-buffer-name)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (propertize "A blocks world after Winograd's SHRDLU (1970)"
                            'face 'lispm-apps-heading)
                "\n" picture
                (propertize "R red  G green  B blue   [ ] block  /\\ pyramid  \
| | box  /|\\ hand"
                            'face 'shadow))
        (goto-char (point-min))))))

(defun lispm-blocks--draw ()
  "Show the current world in the scene buffer."
  (lispm-blocks--show (lispm-blocks-render
                       (lispm-blocks-state-world lispm-blocks--current))))

(defvar-keymap lispm-blocks-scene-mode-map
  :doc "Keys of the blocks world's scene."
  :parent special-mode-map
  "C-c C-n" #'lispm-blocks-new-world
  "q" #'lispm-apps-quit)

(define-derived-mode lispm-blocks-scene-mode special-mode "LispM Blocks"
  "Major mode of the blocks world's scene, drawn from the side.

\\{lispm-blocks-scene-mode-map}"
  :interactive nil
  (setq truncate-lines t)
  (setq-local revert-buffer-function (lambda (&rest _) (lispm-blocks--draw)))
  (buffer-disable-undo)
  (add-hook 'pre-command-hook #'lispm-blocks--finish-animation nil t))

;;; The dialogue

(defun lispm-blocks--prompt ()
  "Insert the prompt for the next sentence and open the input after it."
  (let ((inhibit-read-only t))
    (insert (propertize "> " 'face 'bold)))
  (lispm-apps-open-input))

(defun lispm-blocks--start-dialogue ()
  "Start an empty dialogue in the current buffer."
  (let ((inhibit-read-only t))
    (lispm-blocks-mode)
    (erase-buffer)
    (insert (propertize "Talk to the robot in plain English, one sentence per RET, e.g.\n\
  pick up a big red block.   what does the box contain?   why did you do that?\n\
C-c C-n new world  C-c C-q close  (the App Store page says what it knows)\n\n"
                        'face 'shadow)))
  (lispm-blocks--prompt))

(defun lispm-blocks--conclude (lines)
  "Show the reply LINES in the dialogue and the world as it now is."
  (when-let* ((buffer (get-buffer lispm-blocks-buffer-name)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (goto-char (point-max))
        (insert (mapconcat #'identity lines "\n") "\n\n"))
      (lispm-blocks--prompt)))
  (lispm-blocks--draw))

(defun lispm-blocks--animate-p ()
  "Return non-nil if the work of the hand should be animated now."
  (and lispm-blocks-animate
       (not noninteractive)
       (get-buffer-window lispm-blocks-scene-buffer-name t)))

(defun lispm-blocks-send ()
  "Answer the sentence typed after the prompt; return the reply lines.
Animate the robot's moves first, if the scene is shown; then show the reply."
  (interactive nil lispm-blocks-mode)
  (lispm-blocks--finish-animation)
  (let ((input (lispm-apps-take-input)))
    (if (string-empty-p input)
        (progn (message "Type a sentence, then RET") nil)
      (let* ((before (lispm-blocks-copy-world
                      (lispm-blocks-state-world lispm-blocks--current)))
             (lines (lispm-blocks-respond lispm-blocks--current input))
             (moves (lispm-blocks-state-moves lispm-blocks--current))
             (inhibit-read-only t))
        (insert "\n")
        (if (and moves (lispm-blocks--animate-p))
            (lispm-blocks--animate (lispm-blocks-frames before moves)
                                   (lambda () (lispm-blocks--conclude lines)))
          (lispm-blocks--conclude lines))
        lines))))

(defvar-keymap lispm-blocks-mode-map
  :doc "Keys of the dialogue with the robot."
  "RET" #'lispm-blocks-send
  "C-c C-n" #'lispm-blocks-new-world
  "C-c C-q" #'lispm-apps-quit
  "q" #'lispm-apps-quit-or-insert)

(define-derived-mode lispm-blocks-mode text-mode "LispM Blocks Dialogue"
  "Major mode of the dialogue with the blocks world's robot.
Type a sentence after the prompt and press RET.  The dialogue above
is read-only; `q' there closes the blocks world.

\\{lispm-blocks-mode-map}"
  :interactive nil
  (visual-line-mode 1)
  (add-hook 'pre-command-hook #'lispm-blocks--finish-animation nil t))

(defun lispm-blocks--ensure-buffers ()
  "Make the scene and dialogue buffers and the world, if they are missing."
  (unless lispm-blocks--current
    (setq lispm-blocks--current (lispm-blocks-new-state)))
  (with-current-buffer (get-buffer-create lispm-blocks-scene-buffer-name)
    (unless (derived-mode-p 'lispm-blocks-scene-mode)
      (lispm-blocks-scene-mode)))
  (with-current-buffer (get-buffer-create lispm-blocks-buffer-name)
    (unless (derived-mode-p 'lispm-blocks-mode)
      (lispm-blocks--start-dialogue)))
  (lispm-blocks--draw))

;;;###autoload
(defun lispm-blocks ()
  "Open the blocks world: the scene above, the dialogue with the robot below."
  (interactive)
  (lispm-blocks--ensure-buffers)
  (lispm-apps-display (get-buffer lispm-blocks-buffer-name)
                      (get-buffer lispm-blocks-scene-buffer-name)))

(defun lispm-blocks-new-world ()
  "Put everything back where it was at the start, and forget the dialogue."
  (interactive)
  (lispm-blocks--finish-animation)
  (setq lispm-blocks--current (lispm-blocks-new-state))
  (with-current-buffer (get-buffer-create lispm-blocks-buffer-name)
    (lispm-blocks--start-dialogue))
  (lispm-blocks--ensure-buffers))

(defun lispm-blocks-say (sentence)
  "Say SENTENCE to the robot in the dialogue buffer and return its reply.
The reply's lines are joined by newlines.  Nothing is animated."
  (lispm-blocks--ensure-buffers)
  (with-current-buffer lispm-blocks-buffer-name
    (goto-char (point-max))
    (insert sentence)
    (let ((lispm-blocks-animate nil))
      (string-join (lispm-blocks-send) "\n"))))

(provide 'lispm-app-blocks)
;;; lispm-app-blocks.el ends here
