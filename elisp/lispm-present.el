;;; lispm-present.el --- Presentations: text that stands for LispM's objects  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A presentation is readable text first: an Org link.  Places are
;; [[file:PATH::LINE]] and [[buffer:NAME]]; LispM's own objects are
;; [[lispm:TYPE:ID][LABEL]], TYPE one of `lispm-present-types'
;; (`lispm-present-link' writes them).  So a presentation survives
;; saving, copying, git and a restart, and a model can type one: what
;; it stands for is looked up again each time it is followed, and a
;; reference to what is gone says so (a `user-error' naming it).
;;
;; The `lispm' link type works in any Org buffer, the own agent's
;; session included.  Elsewhere `lispm-present-text' makes a message's
;; links, and the names of live agents, buttons that show their label;
;; `lispm-present-string' makes one.  Text can be made presentations
;; when it is displayed (font lock, `lispm-present-properties'), the
;; document itself unchanged: the own agent's session does so with its
;; turns, calls, requests, stops and approvals.
;;
;; Following (RET on a button, mouse-1, or Org's C-c C-o) does the
;; obvious thing for the type: see `lispm-present-follow'.  mouse-3 and
;; M-o (free in Org, which has M-RET, C-c C-o and C-c C-x) offer the
;; rest for that type (`lispm-present-actions'): a menu with the mouse,
;; `completing-read' from the keyboard, so it works in a terminal.
;;
;; This file knows none of LispM's types, as magit-section.el knows no
;; section type: following, the actions, inspecting, the button type
;; and the names found in text are generic functions, and each type's
;; methods live in the file that owns the type.

;;; Code:

(require 'button)
(require 'cl-lib)
(require 'ol)
(require 'subr-x)
(require 'thingatpt)

(declare-function org-fold-show-context "org-fold" (&optional key))
(declare-function org-fold-show-entry "org-fold" (&optional hide-drawers))
(declare-function org-fold-show-children "org-fold" (&optional level))
;;; Writing

(defconst lispm-present-types '(agent symbol call request approval turn)
  "The types of LispM's own links, written [[lispm:TYPE:ID][LABEL]].
An agent's ID is its name; a symbol's its name; a request's its id
\(R1); an approval's its id (A1); a turn's SESSION/TURN and a call's
SESSION/TURN/CALL-ID, SESSION a session's id.")

(defun lispm-present-link (type id &optional label)
  "Return the Org link to the object of TYPE named ID, shown as LABEL.
TYPE is one of `lispm-present-types', or `file' (ID \"PATH::LINE\" or
PATH) or `buffer' (ID its name).  LABEL defaults to ID.  Brackets in
ID and LABEL, which would end the link, are escaped as Org does."
  (let ((target (if (memq type '(file buffer))
                    (format "%s:%s" type id)
                  (unless (memq type lispm-present-types)
                    (error "Not a type of LispM's links: %S" type))
                  (format "lispm:%s:%s" type id))))
    (format "[[%s][%s]]" (org-link-escape target)
            (replace-regexp-in-string "[][]" (lambda (bracket)
                                               (if (equal bracket "[") "{" "}"))
                                      (or label (format "%s" id)) t t))))

(defun lispm-present-parse (path)
  "Return (TYPE . ID) of a `lispm' link's PATH, \"TYPE:ID\".
Signal a `user-error' if PATH names no type of `lispm-present-types'."
  (let* ((colon (string-search ":" path))
         (type (and colon (intern-soft (substring path 0 colon)))))
    (unless (and (memq type lispm-present-types) (< (1+ colon) (length path)))
      (user-error "Not a LispM link: lispm:%s" path))
    (cons type (substring path (1+ colon)))))

;;; Emacs's own objects

(defun lispm-present--symbol (name)
  "Return the function or variable NAME, or signal a `user-error'."
  (let ((symbol (intern-soft name)))
    (unless (and symbol (or (fboundp symbol) (boundp symbol)))
      (user-error "No function or variable %s" name))
    symbol))

;;; Following, and what else can be done: each type's owner says

;; A type's methods live in the file that owns the type: an agent's in
;; lispm-agents.el, a request's in lispm-ledger.el, an approval's in
;; lispm-approvals.el, a turn's and a call's in lispm-own-agent.el.
;; Files, buffers and symbols are Emacs's own, and this file's.

(cl-defgeneric lispm-present-follow (type id &optional arg)
  "Do the obvious thing with the object of TYPE named ID.
ARG is the prefix argument, if the type gives it a meaning.  A file
is visited at its line, a buffer shown, a symbol described; the owner
of each of LispM's types says what following one of its objects does
\(an agent's home buffer shown, or with ARG the agent inspected; a
call shown at its heading in its session, with its diff if it changed
files in this Emacs; a request shown in the ledger, an approval in the
approvals buffer, a turn at its heading).  What no longer exists is a
`user-error' that names it."
  (:method (type id &optional arg)
           (if (member type '("file" "buffer"))
               (lispm-present-follow (intern type) id arg)
             (user-error "Not a type of LispM's links: %s" type))))

(cl-defgeneric lispm-present-type-actions (type id)
  "Return what can be done with the object of TYPE named ID.
A list of (NAME . FUNCTION), FUNCTION of no arguments; the first
follows it (see `lispm-present-follow-action').  `lispm-present-actions'
adds copying its link and its text."
  (:method (type id) (list (lispm-present-follow-action "Follow" type id))))

(cl-defgeneric lispm-present-inspect (type id)
  "Inspect the object of TYPE named ID, if an inspector of TYPE is loaded.
The inspector of agents is lispm-inspect.el."
  (:method (type _id) (user-error "Nothing of type %s can be inspected here" type)))

(cl-defgeneric lispm-present-button-type (type)
  "Return the button type of a presentation of TYPE in LispM's views.
It is `lispm-presentation', or a button type whose supertype it is."
  (:method (_type) 'lispm-presentation))

(cl-defgeneric lispm-present-names (type)
  "Return the names that stand for objects of TYPE in plain text.
`lispm-present-text' makes each a button, outside links; by default,
none."
  (:method (_type) nil))

(defun lispm-present-follow-action (name type id)
  "Return the action NAME that follows the object of TYPE named ID."
  (cons name (lambda () (lispm-present-follow type id))))

(defun lispm-present-show (buffer position)
  "Show BUFFER with point at POSITION, its heading's entry revealed."
  (pop-to-buffer buffer)
  (widen)
  (goto-char position)
  (when (derived-mode-p 'org-mode)
    (org-fold-show-context)
    (org-fold-show-entry)
    (org-fold-show-children)))

(cl-defmethod lispm-present-follow ((_type (eql 'file)) id &optional _arg)
  "Visit the file ID, \"PATH::LINE\" or PATH."
  (lispm-present-open-link "file" id))

(cl-defmethod lispm-present-follow ((_type (eql 'buffer)) id &optional _arg)
  "Show the buffer named ID."
  (lispm-present-open-link "buffer" id))

(cl-defmethod lispm-present-follow ((_type (eql 'symbol)) id &optional _arg)
  "Describe the function or variable named ID."
  (let ((symbol (lispm-present--symbol id)))
    (cond ((and (fboundp symbol) (boundp symbol)) (describe-symbol symbol))
          ((fboundp symbol) (describe-function symbol))
          (t (describe-variable symbol)))))

(cl-defmethod lispm-present-type-actions ((_type (eql 'file)) id)
  "Return the action on the file ID: visit it."
  (list (lispm-present-follow-action "Visit the file" 'file id)))

(cl-defmethod lispm-present-type-actions ((_type (eql 'buffer)) id)
  "Return the action on the buffer ID: show it."
  (list (lispm-present-follow-action "Show the buffer" 'buffer id)))

(cl-defmethod lispm-present-type-actions ((_type (eql 'symbol)) id)
  "Return the actions on the symbol ID: describe it, find its source."
  (list (lispm-present-follow-action "Describe" 'symbol id)
        (cons "Find its source"
              (lambda ()
                (let ((symbol (lispm-present--symbol id)))
                  (if (fboundp symbol) (find-function symbol)
                    (find-variable symbol)))))))

(defun lispm-present-open-link (type target)
  "Follow a link of TYPE (\"file\" or \"buffer\") to TARGET."
  (pcase type
    ("file"
     (pcase-let ((`(,file ,line) (split-string target "::")))
       (unless (file-exists-p (expand-file-name file))
         (user-error "No file %s" file))
       (find-file-other-window (expand-file-name file))
       (when (and line (string-match-p "\\`[0-9]+\\'" line))
         (goto-char (point-min))
         (forward-line (1- (string-to-number line))))))
    ("buffer"
     (if (get-buffer target)
         (pop-to-buffer target)
       (user-error "No buffer named %s" target)))))

;;; The menu

(defun lispm-present-actions (type id &optional label)
  "Return what can be done with the object of TYPE named ID, shown as LABEL.
A list of (NAME . FUNCTION), FUNCTION of no arguments: those of its
type (`lispm-present-type-actions'), the first following it, then
copying the link and copying the text."
  (let ((link (lispm-present-link type id label))
        (text (or label id)))
    (append
     (lispm-present-type-actions type id)
     (list (cons "Copy the link" (lambda () (kill-new link)
                                   (message "Copied %s" link)))
           (cons "Copy the text" (lambda () (kill-new text)
                                   (message "Copied %s" text)))))))

(defun lispm-present-menu-keymap (type id &optional label)
  "Return the menu of what can be done with the object of TYPE named ID.
A keymap of menu items, titled LABEL, one per `lispm-present-actions'."
  (let ((map (make-sparse-keymap (or label id)))
        (n 0))
    (dolist (action (reverse (lispm-present-actions type id label)))
      (define-key map (vector (intern (format "lispm-action-%d" (cl-incf n))))
                  (list 'menu-item (car action)
                        (let ((function (cdr action)))
                          (lambda () (interactive) (funcall function))))))
    map))

(defun lispm-present-menu (type id &optional label event)
  "Offer what can be done with the object of TYPE named ID, shown as LABEL.
With EVENT, a mouse event, as a menu where it happened; otherwise
read the choice with `completing-read'."
  (if (and event (mouse-event-p event))
      (popup-menu (lispm-present-menu-keymap type id label) event)
    (let* ((actions (lispm-present-actions type id label))
           (choice (completing-read (format "%s: " (or label id))
                                    (mapcar #'car actions) nil t)))
      (funcall (cdr (assoc choice actions))))))

;;; The presentation at a place

(defconst lispm-present--link-regexp
  (rx "[[" (group (or "file" "buffer" "lispm")) ":" (group (+ (not (any "]"))))
      "]" (? "[" (group (+ (not (any "]")))) "]") "]")
  "Matches the Org links LispM makes live: file, buffer and `lispm' links.")

(defun lispm-present--from-link (kind target label)
  "Return (TYPE ID LABEL) of a link of KIND (a string) to TARGET."
  (if (equal kind "lispm")
      (let ((parsed (lispm-present-parse target)))
        (list (car parsed) (cdr parsed) label))
    (list (intern kind) target label)))

(defun lispm-present-at (&optional position)
  "Return the presentation at POSITION (default point): (TYPE ID LABEL), or nil.
That is a button `lispm-present-text' made, or an Org link of LispM's,
or LispM's link text in any buffer."
  (let ((position (or position (point))))
    (or (get-text-property position 'lispm-presentation)
        (save-excursion
          (goto-char position)
          (and (thing-at-point-looking-at lispm-present--link-regexp 500)
               (lispm-present--from-link (match-string-no-properties 1)
                                         (org-link-unescape (match-string-no-properties 2))
                                         (match-string-no-properties 3)))))))

(defun lispm-present--here (event)
  "Return the presentation at EVENT's place or point, or signal a `user-error'."
  (let ((position (if (mouse-event-p event)
                      (posn-point (event-end event))
                    (point))))
    (with-current-buffer (if (mouse-event-p event)
                             (window-buffer (posn-window (event-end event)))
                           (current-buffer))
      (or (lispm-present-at position)
          (user-error "No presentation here")))))

(defun lispm-present-follow-at-point (&optional arg event)
  "Follow the presentation at point, or where EVENT happened.
ARG, the prefix argument, is passed to `lispm-present-follow'."
  (interactive (list current-prefix-arg last-nonmenu-event))
  (pcase-let ((`(,type ,id ,_) (lispm-present--here event)))
    (lispm-present-follow type id arg)))

(defun lispm-present-menu-at-point (&optional event)
  "Offer what can be done with the presentation at point, or where EVENT happened."
  (interactive (list last-nonmenu-event))
  (pcase-let ((`(,type ,id ,label) (lispm-present--here event)))
    (lispm-present-menu type id label event)))

(defun lispm-present-inspect-at-point ()
  "Inspect the object the presentation at point stands for: an agent."
  (interactive)
  (pcase-let ((`(,type ,id ,_) (lispm-present--here nil)))
    (lispm-present-inspect type id)))

(defvar-keymap lispm-present-map
  :doc "Keys on a presentation in text the user edits, and on LispM's Org links.
mouse-1 follows it (by `follow-link'), as do mouse-2 and \\`C-c C-o';
mouse-3 and \\`M-o' offer the rest."
  "<follow-link>" 'mouse-face
  "<mouse-2>" #'lispm-present-follow-at-point
  "<mouse-3>" #'lispm-present-menu-at-point
  "C-c C-o" #'lispm-present-follow-at-point
  "M-o" #'lispm-present-menu-at-point)

(defvar-keymap lispm-present-button-map
  :doc "Keys on a presentation in LispM's read-only views.
RET and mouse-1 follow it; mouse-3 and \\`M-o' offer the rest; \\`i'
inspects an agent."
  :parent button-map
  "<mouse-3>" #'lispm-present-menu-at-point
  "M-o" #'lispm-present-menu-at-point
  "i" #'lispm-present-inspect-at-point)

;;; Buttons

(defun lispm-present--button-action (button)
  "Follow the presentation BUTTON stands for."
  (pcase-let ((`(,type ,id ,_) (button-get button 'lispm-presentation)))
    (lispm-present-follow type id current-prefix-arg)))

(defun lispm-present--help (type id label)
  "Return the help text of the presentation of TYPE named ID, shown as LABEL."
  (format "%s %s%s: mouse-1 or RET follows, mouse-3 or M-o offers more"
          type id (if (and label (not (equal label id))) (format " (%s)" label) "")))

(define-button-type 'lispm-presentation
  'action #'lispm-present--button-action
  'follow-link t
  'keymap lispm-present-button-map
  'help-echo (lambda (_window object position)
               (when-let* ((presentation (get-text-property position 'lispm-presentation
                                                            object)))
                 (apply #'lispm-present--help presentation))))

(defun lispm-present--button (string beg end type id &optional label)
  "Make BEG..END of STRING, in place, a presentation of TYPE named ID, LABEL.
Its button type is `lispm-present-button-type''s for TYPE."
  (add-text-properties beg end
                       `(button (t)
                                category ,(button-category-symbol
                                           (lispm-present-button-type type))
                                lispm-presentation (,type ,id ,label))
                       string))

(defun lispm-present-string (type id &optional label)
  "Return LABEL (default ID) as a button presenting the object of TYPE named ID.
For LispM's views: RET follows it, \\<lispm-present-button-map>\\[lispm-present-menu-at-point] offers the rest."
  (let ((string (copy-sequence (or label id))))
    (lispm-present--button string 0 (length string) type id label)
    string))

(defun lispm-present-text (text)
  "Return TEXT with its links, and the names of objects, as buttons.
The names are those `lispm-present-names' gives: a live agent's.
A link shows its label only (its brackets and target are invisible,
but stay in the text, so copying it copies the link)."
  (let ((text (copy-sequence text))
        (start 0))
    (while (string-match lispm-present--link-regexp text start)
      (let* ((beg (match-beginning 0))
             (end (match-end 0))
             (label-beg (or (match-beginning 3) (+ beg 2)))
             (label-end (or (match-end 3) (- end 2)))
             (presentation (ignore-errors
                             (lispm-present--from-link
                              (match-string 1 text) (org-link-unescape (match-string 2 text))
                              (match-string 3 text)))))
        (when presentation
          (apply #'lispm-present--button text beg end presentation)
          (put-text-property beg label-beg 'invisible t text)
          (put-text-property label-end end 'invisible t text))
        (setq start end)))
    (lispm-present--name-buttons text)))

(defun lispm-present--name-buttons (text)
  "Make the names of objects in TEXT buttons, outside links; return TEXT."
  (dolist (type lispm-present-types)
    (when-let* ((names (lispm-present-names type)))
      (let ((regexp (rx-to-string
                     `(seq (or bos (not (any alnum "-_")))
                           (group (or ,@names))
                           (or eos (not (any alnum "-_"))))
                     t))
            (start 0))
        (while (string-match regexp text start)
          (let ((beg (match-beginning 1))
                (end (match-end 1)))
            (unless (get-text-property beg 'button text)
              (lispm-present--button text beg end type (substring-no-properties text beg end)))
            (setq start end))))))
  text)

;;; In text the user edits, at display time

(defun lispm-present-properties (type id)
  "Return the face and text properties of a presentation of TYPE named ID.
For font lock to put on text that stands for an object, as the own
agent's session does."
  (list 'face 'link 'mouse-face 'highlight 'follow-link t 'keymap lispm-present-map
        'lispm-presentation (list type id nil)
        'help-echo (lispm-present--help type id nil)))

;;; Org links

(defun lispm-present--org-follow (path arg)
  "Follow the `lispm' link to PATH; ARG is the prefix argument."
  (let ((parsed (lispm-present-parse path)))
    (lispm-present-follow (car parsed) (cdr parsed) arg)))

(defun lispm-present--org-export (path description _backend &optional _info)
  "Export the `lispm' link to PATH as its DESCRIPTION, or as itself."
  (or description (concat "lispm:" path)))

(defun lispm-present--org-help (_window object position)
  "Return the help of the `lispm' link at POSITION in OBJECT."
  (with-current-buffer (if (bufferp object) object (current-buffer))
    (pcase (ignore-errors (lispm-present-at position))
      (`(,type ,id ,label) (lispm-present--help type id label))
      (_ "A LispM link"))))

(org-link-set-parameters
 "lispm"
 :follow #'lispm-present--org-follow
 :export #'lispm-present--org-export
 :help-echo #'lispm-present--org-help
 :keymap lispm-present-map)

(org-link-set-parameters
 "buffer"
 :follow (lambda (target _prefix) (lispm-present-open-link "buffer" target)))

(provide 'lispm-present)
;;; lispm-present.el ends here
