;;; lispm-app-blocks-world.el --- The blocks world: scene, hand and planner  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The model behind LispM's SHRDLU-style blocks world: a side view of a
;; table with blocks, pyramids and a box, and a one-handed robot.  The
;; scene follows Winograd's (1970); the code is LispM's own.
;;
;; Units: heights are in units of the small red cube; horizontal
;; positions and widths are in half units, so that an object can sit
;; centred on a wider or narrower one.  The depth of an object only
;; decides whether it is a cube.
;;
;; The hand moves with three primitives: (:move X Z) puts the grip at
;; half-unit column X (the centre of what it holds) and height Z (the
;; top of what it holds); (:grasp ID) takes the object under it;
;; (:release ONTO) lets go of it onto the object ONTO.
;;
;; The planner works on goals: pick up, clear the top of, get rid of,
;; put on, stack up.  Each goal is logged as an event whose parent is
;; the goal that needed it (none for the user's command), which is what
;; "why did you ...?" answers from.  Planning runs on a copy of the
;; state, which replaces the state only if the whole plan succeeds.

;;; Code:

(require 'lispm-base)
(require 'cl-lib)

;;; Objects and the scene

(cl-defstruct (lispm-blocks-object (:constructor lispm-blocks-object--create))
  "A thing in the scene."
  (id nil :documentation "A symbol such as B1, BOX or TABLE.")
  (kind nil :documentation "One of `block', `pyramid', `box' and `table'.")
  (color nil :documentation "A symbol: red, green, blue, white or black.")
  (size nil :documentation "(WIDTH DEPTH HEIGHT) in units.")
  (x nil :documentation "The left edge, in half units from the table's left end.")
  (support nil :documentation "The id of what it rests on, or `hand'."))

(defconst lispm-blocks-initial-scene
  '((B1 block red (1 1 1) 1 TABLE)
    (B2 pyramid green (1 1 1) 1 B1)
    (B3 block green (2 2 2) 4 TABLE)
    (B4 pyramid blue (2 2 2) 20 BOX)
    (B5 pyramid red (1 1 3) 5 B3)
    (B6 block red (2 3 3) 9 TABLE)
    (B7 block green (2 2 2) 9 B6)
    (B10 block blue (2 1 4) 14 TABLE)
    (BOX box white (5 4 2) 19 TABLE)
    (TABLE table black (18 10 0) 0 nil))
  "Winograd's scene: (ID KIND COLOR SIZE X SUPPORT) for each object.
The box's walls are half a unit thick; it holds 4 units inside.")

(cl-defstruct (lispm-blocks-world (:constructor lispm-blocks-world--create)
                                  (:copier nil))
  "The scene and the hand."
  (objects nil :documentation "The objects, in a fixed order.")
  (hand-x 2 :documentation "The column of the hand's centre, in half units.")
  (hand-z 8 :documentation "The hand's height, in units."))

(defun lispm-blocks-initial-world ()
  "Return a new world in Winograd's initial state."
  (lispm-blocks-world--create
   :objects (mapcar (pcase-lambda (`(,id ,kind ,color ,size ,x ,support))
                      (lispm-blocks-object--create :id id :kind kind :color color
                                                   :size size :x x :support support))
                    lispm-blocks-initial-scene)))

(defun lispm-blocks-copy-world (world)
  "Return a copy of WORLD that can change without changing WORLD."
  (lispm-blocks-world--create
   :objects (mapcar #'copy-lispm-blocks-object (lispm-blocks-world-objects world))
   :hand-x (lispm-blocks-world-hand-x world)
   :hand-z (lispm-blocks-world-hand-z world)))

;;; Geometry and properties

(defun lispm-blocks-get (world id)
  "Return the object ID of WORLD."
  (cl-find id (lispm-blocks-world-objects world) :key #'lispm-blocks-object-id))

(defun lispm-blocks-width (object)
  "Return the width of OBJECT in units."
  (nth 0 (lispm-blocks-object-size object)))

(defun lispm-blocks-height (object)
  "Return the height of OBJECT in units."
  (nth 2 (lispm-blocks-object-size object)))

(defun lispm-blocks-span (object)
  "Return the width of OBJECT in half units."
  (* 2 (lispm-blocks-width object)))

(defun lispm-blocks-cube-p (object)
  "Return non-nil if OBJECT is a block with equal sides."
  (and (eq (lispm-blocks-object-kind object) 'block)
       (apply #'= (lispm-blocks-object-size object))))

(defun lispm-blocks-large-p (object)
  "Return non-nil if OBJECT is large: two units or more in some direction."
  (>= (apply #'max (lispm-blocks-object-size object)) 2))

(defun lispm-blocks-movable-p (object)
  "Return non-nil if the hand can pick OBJECT up."
  (memq (lispm-blocks-object-kind object) '(block pyramid)))

(defun lispm-blocks-held (world)
  "Return the object in the hand in WORLD, or nil."
  (cl-find 'hand (lispm-blocks-world-objects world)
           :key #'lispm-blocks-object-support))

(defun lispm-blocks-on (world id)
  "Return the objects of WORLD resting directly on the object ID."
  (cl-remove-if-not (lambda (o) (eq (lispm-blocks-object-support o) id))
                    (lispm-blocks-world-objects world)))

(defun lispm-blocks-bottom (world object)
  "Return the height of the underside of OBJECT in WORLD."
  (pcase (lispm-blocks-object-support object)
    ('hand (- (lispm-blocks-world-hand-z world) (lispm-blocks-height object)))
    ((or 'nil 'TABLE 'BOX) 0)
    (id (lispm-blocks-top world (lispm-blocks-get world id)))))

(defun lispm-blocks-top (world object)
  "Return the height of the top of OBJECT in WORLD."
  (+ (lispm-blocks-bottom world object) (lispm-blocks-height object)))

(defun lispm-blocks-left (world object)
  "Return the left edge of OBJECT in WORLD, in half units."
  (if (eq (lispm-blocks-object-support object) 'hand)
      (- (lispm-blocks-world-hand-x world) (/ (lispm-blocks-span object) 2))
    (lispm-blocks-object-x object)))

(defun lispm-blocks-centre (world object)
  "Return the column of the centre of OBJECT in WORLD, in half units."
  (+ (lispm-blocks-left world object) (/ (lispm-blocks-span object) 2)))

(defun lispm-blocks-in-box-p (world object)
  "Return non-nil if OBJECT is in the box of WORLD, directly or on a stack."
  (let ((support (lispm-blocks-object-support object)))
    (or (eq support 'BOX)
        (and (not (memq support '(nil hand TABLE)))
             (lispm-blocks-in-box-p world (lispm-blocks-get world support))))))

(defun lispm-blocks-clearance (world)
  "Return the height at which the hand can travel across WORLD.
It is one unit above the tallest thing on the table, plus the height
of what the hand holds."
  (let ((held (lispm-blocks-held world)))
    (+ 1
       (if held (lispm-blocks-height held) 0)
       (cl-loop for o in (lispm-blocks-world-objects world)
                unless (eq o held)
                maximize (lispm-blocks-top world o)))))

(defun lispm-blocks--overlap-p (a-start a-end b-start b-end)
  "Return non-nil if the intervals [A-START, A-END) and [B-START, B-END) meet."
  (and (< a-start b-end) (< b-start a-end)))

(defun lispm-blocks--room-p (world object left bottom)
  "Return non-nil if OBJECT fits with its left edge at LEFT and BOTTOM.
It must stay on the table and touch no other object of WORLD."
  (let ((right (+ left (lispm-blocks-span object)))
        (top (+ bottom (lispm-blocks-height object)))
        (table (lispm-blocks-get world 'TABLE)))
    (and (<= 0 left) (<= right (lispm-blocks-span table))
         (cl-loop for o in (lispm-blocks-world-objects world)
                  never (and (not (memq (lispm-blocks-object-kind o) '(table box)))
                             (not (eq o object))
                             (lispm-blocks--overlap-p
                              left right (lispm-blocks-left world o)
                              (+ (lispm-blocks-left world o) (lispm-blocks-span o)))
                             (lispm-blocks--overlap-p
                              bottom top (lispm-blocks-bottom world o)
                              (lispm-blocks-top world o)))))))

(defun lispm-blocks--free-left (world object place)
  "Return the left edge where OBJECT can be put on PLACE in WORLD, or nil.
On the table, the leftmost spot half a unit away from the neighbours,
or else touching them; in the box, the leftmost free spot inside; on
a block, centred."
  (let ((span (lispm-blocks-span object)))
    (pcase (lispm-blocks-object-kind place)
      ('table
       (cl-loop for gap in '(1 0)
                thereis (cl-loop
                         for left from 0 to (- (lispm-blocks-span place) span)
                         when (cl-loop for o in (lispm-blocks-on world 'TABLE)
                                       never (lispm-blocks--overlap-p
                                              (- left gap) (+ left span gap)
                                              (lispm-blocks-object-x o)
                                              (+ (lispm-blocks-object-x o)
                                                 (lispm-blocks-span o))))
                         return left)))
      ('box
       (let ((inside (1+ (lispm-blocks-object-x place))))
         (cl-loop for left from inside
                  to (- (+ inside (lispm-blocks-span place) -2) span)
                  when (cl-loop for o in (lispm-blocks-on world 'BOX)
                                never (lispm-blocks--overlap-p
                                       left (+ left span) (lispm-blocks-object-x o)
                                       (+ (lispm-blocks-object-x o)
                                          (lispm-blocks-span o))))
                  return left)))
      ('block
       (let ((left (+ (lispm-blocks-object-x place)
                      (/ (- (lispm-blocks-span place) span) 2))))
         (and (lispm-blocks--room-p world object left (lispm-blocks-top world place))
              left))))))

;;; Primitives

(defun lispm-blocks-apply (world step)
  "Carry out the primitive STEP of the hand in WORLD."
  (pcase step
    (`(:move ,x ,z)
     (setf (lispm-blocks-world-hand-x world) x
           (lispm-blocks-world-hand-z world) z))
    (`(:grasp ,id)
     (setf (lispm-blocks-object-support (lispm-blocks-get world id)) 'hand))
    (`(:release ,onto)
     (let ((held (lispm-blocks-held world)))
       (setf (lispm-blocks-object-x held) (lispm-blocks-left world held)
             (lispm-blocks-object-support held) onto)))))

;;; The state: world, memory of goals, discourse

(cl-defstruct (lispm-blocks-event (:constructor lispm-blocks-event--create)
                                  (:copier nil))
  "A goal the robot pursued."
  (id nil :documentation "A number, increasing with time.")
  (type nil :documentation "One of `pickup', `cleartop', `getridof', `puton', `stackup'.")
  (objects nil :documentation "The ids the goal was about.")
  (parent nil :documentation "The id of the goal it served, or nil for a command."))

(cl-defstruct (lispm-blocks-state (:constructor lispm-blocks-state--create))
  "Everything the blocks world remembers."
  (world (lispm-blocks-initial-world) :documentation "The scene.")
  (events nil :documentation "The goals pursued, newest first.")
  (commands nil :documentation "The user's commands: (VERB ID), newest first.")
  (mentioned nil :documentation "Ids in the last answer and input, newest first.")
  (set nil :documentation "The ids of the last answer about several things.")
  (why nil :documentation "The id of the goal a \"why?\" would ask about.")
  (focus nil :documentation "The id of the object a \"why\" question is about.")
  (moves nil :documentation "The primitives of the last command, in order."))

(defun lispm-blocks-new-state ()
  "Return the state of a fresh blocks world."
  (lispm-blocks-state--create))

(defun lispm-blocks-copy-state (state)
  "Return a copy of STATE whose world can change without changing STATE's."
  (let ((copy (copy-lispm-blocks-state state)))
    (setf (lispm-blocks-state-world copy)
          (lispm-blocks-copy-world (lispm-blocks-state-world state)))
    copy))

(defun lispm-blocks-find-event (state id)
  "Return the event ID of STATE."
  (cl-find id (lispm-blocks-state-events state) :key #'lispm-blocks-event-id))

;;; The planner

(defvar lispm-blocks--state nil
  "The state a plan or an answer is being worked out on.")

(defvar lispm-blocks--goal nil
  "The id of the goal being pursued, or nil at the user's command.")

(defun lispm-blocks--world ()
  "Return the world being planned in."
  (lispm-blocks-state-world lispm-blocks--state))

(defun lispm-blocks--cannot ()
  "Abandon the plan: the robot cannot do what it was asked."
  (throw 'lispm-blocks--reply "I CAN'T."))

(defun lispm-blocks--do (step)
  "Carry out the primitive STEP and record it in the plan."
  (lispm-blocks-apply (lispm-blocks--world) step)
  (setf (lispm-blocks-state-moves lispm-blocks--state)
        (append (lispm-blocks-state-moves lispm-blocks--state) (list step))))

(defmacro lispm-blocks--with-goal (type ids &rest body)
  "Log the goal TYPE about IDS as serving the current goal, then run BODY.
Inside BODY, the new goal is the current one."
  (declare (indent 2))
  `(let ((lispm-blocks--goal (lispm-blocks--log-goal ,type ,ids)))
     ,@body))

(defun lispm-blocks--log-goal (type ids)
  "Log the goal TYPE about IDS, serving the current goal; return its id."
  (let* ((events (lispm-blocks-state-events lispm-blocks--state))
         (id (if events (1+ (lispm-blocks-event-id (car events))) 1)))
    (push (lispm-blocks-event--create :id id :type type :objects ids
                                      :parent lispm-blocks--goal)
          (lispm-blocks-state-events lispm-blocks--state))
    id))

(defun lispm-blocks--object (id)
  "Return the object ID of the world being planned in."
  (lispm-blocks-get (lispm-blocks--world) id))

(defun lispm-blocks--place (id onto)
  "Put the held object ID onto the object ONTO, or give up."
  (let* ((world (lispm-blocks--world))
         (object (lispm-blocks--object id))
         (place (lispm-blocks--object onto))
         (left (or (lispm-blocks--free-left world object place)
                   (lispm-blocks--cannot))))
    (lispm-blocks--do `(:move ,(+ left (/ (lispm-blocks-span object) 2))
                              ,(+ (if (eq (lispm-blocks-object-kind place) 'block)
                                      (lispm-blocks-top world place)
                                    0)
                                  (lispm-blocks-height object))))
    (lispm-blocks--do `(:release ,onto))))

(defun lispm-blocks-pick-up (id)
  "Plan to pick up the object ID.
First put down what is in the hand and clear the top of ID."
  (unless (lispm-blocks-movable-p (lispm-blocks--object id))
    (lispm-blocks--cannot))
  (lispm-blocks--with-goal 'pickup (list id)
    (let ((held (lispm-blocks-held (lispm-blocks--world))))
      (unless (eq (and held (lispm-blocks-object-id held)) id)
        (when held
          (lispm-blocks-get-rid-of (lispm-blocks-object-id held)))
        (lispm-blocks-clear-top id)
        (let ((world (lispm-blocks--world))
              (object (lispm-blocks--object id)))
          (lispm-blocks--do `(:move ,(lispm-blocks-centre world object)
                                    ,(lispm-blocks-top world object)))
          (lispm-blocks--do `(:grasp ,id))
          (lispm-blocks--do `(:move ,(lispm-blocks-centre world object)
                                    ,(lispm-blocks-clearance world))))))))

(defun lispm-blocks-clear-top (id)
  "Plan to get rid of everything on the object ID, if anything is."
  (when-let* ((on (lispm-blocks-on (lispm-blocks--world) id)))
    (lispm-blocks--with-goal 'cleartop (list id)
      (dolist (object on)
        (lispm-blocks-get-rid-of (lispm-blocks-object-id object))))))

(defun lispm-blocks-get-rid-of (id)
  "Plan to put the object ID down on free space on the table."
  (lispm-blocks--with-goal 'getridof (list id)
    (unless (eq (lispm-blocks-held (lispm-blocks--world)) (lispm-blocks--object id))
      (lispm-blocks-pick-up id))
    (lispm-blocks--place id 'TABLE)))

(defun lispm-blocks-put-on (id onto)
  "Plan to put the object ID on (or into) the object ONTO."
  (let ((place (lispm-blocks--object onto)))
    (when (or (eq id onto)
              (not (memq (lispm-blocks-object-kind place) '(block box table))))
      (lispm-blocks--cannot))
    (lispm-blocks--with-goal 'puton (list id onto)
      (when (eq (lispm-blocks-object-kind place) 'block)
        (lispm-blocks-clear-top onto))
      (lispm-blocks-pick-up id)
      (lispm-blocks--place id onto))))

(defun lispm-blocks--stack-order (ids)
  "Return IDS in the order to stack them, bottom first, or nil if impossible.
Wider things go lower; a pyramid can only be on top."
  (let* ((objects (mapcar #'lispm-blocks--object ids))
         (order (sort objects
                      (lambda (a b)
                        (let ((pa (eq (lispm-blocks-object-kind a) 'pyramid))
                              (pb (eq (lispm-blocks-object-kind b) 'pyramid)))
                          (if (eq pa pb)
                              (> (lispm-blocks-width a) (lispm-blocks-width b))
                            pb))))))
    (unless (cl-some (lambda (o) (eq (lispm-blocks-object-kind o) 'pyramid))
                     (butlast order))
      (mapcar #'lispm-blocks-object-id order))))

(defun lispm-blocks-stack-up (ids)
  "Plan to stack up the objects IDS, or give up before moving if impossible."
  (let ((order (or (lispm-blocks--stack-order ids) (lispm-blocks--cannot))))
    (lispm-blocks--with-goal 'stackup order
      (cl-loop for (below above) on order
               while above
               do (lispm-blocks-put-on above below)))))

(provide 'lispm-app-blocks-world)
;;; lispm-app-blocks-world.el ends here
