;;; lispm-review.el --- An edit reviewed hunk by hunk  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, files

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The plumbing of reviewing a proposed edit of one file hunk by hunk;
;; no buffer of its own (lispm-approvals.el shows a review, lispm-ide.el
;; takes hunks out of Claude Code's proposals with it).
;;
;;   (lispm-review-make FILE DIFF)  a review of DIFF, or nil if it is no
;;                                  unified diff of one file
;;
;; Each hunk is undecided, `accepted' or `rejected', and may carry the
;; user's own text in place of the lines it adds
;; (`lispm-review-edit-hunk'); the user may also replace the whole
;; proposal (`lispm-review-replace', after an ediff).  Allowing the edit
;; applies every hunk not rejected.
;;
;; While an approved edit runs, `lispm-review-accepted' holds its review
;; (the call pipeline binds it): the editing tools then write, instead of
;; the text they computed, the file's text with exactly the hunks the
;; user let through (`lispm-review-apply'), and add to their result
;; `lispm-review-note', which tells the model what was applied and what
;; was not, so that it does not believe in a change it never made.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-edit)

(defvar lispm-review-accepted nil
  "The review of the edit that runs now, or nil.
Bound by the call pipeline while an approved edit's tool runs.")

(lispm-define-error 'lispm-review-error "LispM review error" 'lispm-error -32074)

(cl-defstruct (lispm-review-hunk (:constructor lispm-review--hunk-make) (:copier nil))
  "One hunk of a proposed edit."
  (number nil :documentation "Its place in the diff, from 1.")
  (start nil :documentation "Its first line in the file's text, from 1.")
  (old nil :documentation "The lines it replaces, context included.")
  (new nil :documentation "The lines it writes, context included: the
proposal's, or the user's once edited.")
  (text nil :documentation "The hunk as the diff shows it, from its @@ line.")
  (state nil :documentation "nil (undecided), `accepted' or `rejected'.")
  (edited nil :documentation "Non-nil if the user changed what it writes."))

(cl-defstruct (lispm-review (:constructor lispm-review--make) (:copier nil))
  "A proposed edit of one file, reviewed hunk by hunk."
  (file nil :documentation "The file's name.")
  (header nil :documentation "The diff's lines before its first hunk.")
  (hunks nil :documentation "Its `lispm-review-hunk's, in order.")
  (replaced nil :documentation "Non-nil if the user replaced the proposal."))

(defun lispm-review--split (diff)
  "Return (HEADER . TEXTS): DIFF's lines before its first hunk, and each hunk's."
  ;; `string-search', not a regexp: a diff may hold a line of megabytes.
  (let ((starts (and (string-prefix-p "@@ " diff) (list 0)))
        (pos 0))
    (while (setq pos (string-search "\n@@ " diff pos))
      (setq pos (1+ pos))
      (push pos starts))
    (setq starts (nreverse starts))
    (cons (substring diff 0 (or (car starts) (length diff)))
          (cl-loop for (start next) on starts
                   collect (substring diff start (or next (length diff)))))))

(defun lispm-review-make (file diff)
  "Return the review of DIFF, a unified diff of FILE, every hunk undecided.
Return nil if DIFF is no unified diff of one file."
  (when-let* ((hunks (and (stringp diff)
                          (ignore-errors (lispm-edit-diff-hunks diff)))))
    (pcase-let ((`(,header . ,texts) (lispm-review--split diff)))
      (when (= (length texts) (length hunks))
        (lispm-review--make
         :file file :header header
         :hunks (cl-loop for (start old new) in hunks
                         for text in texts
                         for number from 1
                         collect (lispm-review--hunk-make
                                  :number number :start start :old old :new new
                                  :text text)))))))

(defun lispm-review-nth-hunk (review number)
  "Return hunk NUMBER of REVIEW, or signal `lispm-review-error'."
  (or (nth (1- number) (lispm-review-hunks review))
      (lispm-signal 'lispm-review-error (list number) "No hunk %s" number)))

(defun lispm-review-set (review number state)
  "Make hunk NUMBER of REVIEW STATE: nil, `accepted' or `rejected'."
  (unless (memq state '(nil accepted rejected))
    (lispm-signal 'lispm-review-error (list state) "Not a hunk's state: %S" state))
  (setf (lispm-review-hunk-state (lispm-review-nth-hunk review number)) state))

(defun lispm-review-decided-p (review)
  "Return non-nil if every hunk of REVIEW is accepted or rejected."
  (cl-every #'lispm-review-hunk-state (lispm-review-hunks review)))

(defun lispm-review-applied (review)
  "Return the hunks of REVIEW written if it is allowed: those not rejected."
  (cl-remove 'rejected (lispm-review-hunks review) :key #'lispm-review-hunk-state))

(defun lispm-review-changed-p (review)
  "Return non-nil if allowing REVIEW writes other than the proposal.
That is, if a hunk was rejected or edited, or the proposal replaced."
  (or (lispm-review-replaced review)
      (cl-some (lambda (hunk) (or (lispm-review-hunk-edited hunk)
                                  (eq (lispm-review-hunk-state hunk) 'rejected)))
               (lispm-review-hunks review))))

;;; Showing hunks

(defun lispm-review--lines-text (lines prefix)
  "Return LINES, each with PREFIX before it and a newline after it."
  (mapconcat (lambda (line)
               (concat prefix (if (string-suffix-p "\n" line) line
                                (concat line "\n\\ No newline at end of file\n"))))
             lines ""))

(defun lispm-review--hunk-text (hunk)
  "Return the text of HUNK, edited, in a diff: its common lines as context."
  (let* ((old (lispm-review-hunk-old hunk))
         (new (lispm-review-hunk-new hunk))
         (head (cl-loop for a in old for b in new while (equal a b) count t))
         (tail (cl-loop for a in (reverse (nthcdr head old))
                        for b in (reverse (nthcdr head new))
                        while (equal a b) count t)))
    (concat (format "@@ -%d,%d +%d,%d @@ (edited by you)\n"
                    (lispm-review-hunk-start hunk) (length old)
                    (lispm-review-hunk-start hunk) (length new))
            (lispm-review--lines-text (take head old) " ")
            (lispm-review--lines-text (butlast (nthcdr head old) tail) "-")
            (lispm-review--lines-text (butlast (nthcdr head new) tail) "+")
            (lispm-review--lines-text (last old tail) " "))))

(defun lispm-review-diff (review)
  "Return REVIEW's diff to be shown: the proposal's, with the user's edits."
  (concat (lispm-review-header review)
          (mapconcat #'lispm-review-hunk-text (lispm-review-hunks review) "")))

(defun lispm-review-edit-hunk (review number text)
  "Make hunk NUMBER of REVIEW write TEXT, the user's, and accept it.
TEXT takes the place of every line the hunk writes, its context too."
  (let ((hunk (lispm-review-nth-hunk review number)))
    (setf (lispm-review-hunk-new hunk) (lispm-edit-lines text)
          (lispm-review-hunk-edited hunk) t
          (lispm-review-hunk-state hunk) 'accepted)
    (setf (lispm-review-hunk-text hunk) (lispm-review--hunk-text hunk))
    hunk))

(defun lispm-review-new-text (review number)
  "Return the text hunk NUMBER of REVIEW writes, context included."
  (apply #'concat (lispm-review-hunk-new (lispm-review-nth-hunk review number))))

(defun lispm-review-replace (review diff)
  "Make DIFF, the user's own diff of REVIEW's file, REVIEW's proposal.
Its hunks are accepted and count as the user's edits.  Signal
`lispm-review-error' if DIFF is no unified diff of one file."
  (let ((new (if (string-empty-p diff) (lispm-review--make :hunks nil)
               (or (lispm-review-make (lispm-review-file review) diff)
                   (lispm-signal 'lispm-review-error nil
                                 "The merged text gives no diff LispM can read")))))
    (dolist (hunk (lispm-review-hunks new))
      (setf (lispm-review-hunk-state hunk) 'accepted
            (lispm-review-hunk-edited hunk) t))
    (setf (lispm-review-header review) (or (lispm-review-header new) "")
          (lispm-review-hunks review) (lispm-review-hunks new)
          (lispm-review-replaced review) t)
    review))

;;; Applying

(defun lispm-review-apply (review text)
  "Return TEXT, the file's text now, with the hunks let through in REVIEW.
Signal `lispm-diff-does-not-apply' if one no longer fits the text."
  (lispm-edit-apply-hunks
   text (mapcar (lambda (hunk) (list (lispm-review-hunk-start hunk)
                                     (lispm-review-hunk-old hunk)
                                     (lispm-review-hunk-new hunk)))
                (lispm-review-applied review))))

(defun lispm-review-for-p (review file)
  "Return non-nil if REVIEW is the review of an edit of FILE."
  (let ((mine (lispm-review-file review)))
    (and mine file
         (or (string= (expand-file-name mine) (expand-file-name file))
             (file-equal-p mine file)))))

(defun lispm-review--numbers (hunks)
  "Return the numbers of HUNKS in words: \"1\", \"1 and 3\", \"1, 2 and 4\"."
  (let ((numbers (mapcar (lambda (h) (number-to-string (lispm-review-hunk-number h))) hunks)))
    (if (cdr numbers)
        (concat (string-join (butlast numbers) ", ") " and " (car (last numbers)))
      (car numbers))))

(defun lispm-review-summary (review)
  "Return what the user let through of REVIEW, in a line."
  (let* ((hunks (lispm-review-hunks review))
         (applied (lispm-review-applied review))
         (rejected (cl-set-difference hunks applied))
         (edited (cl-remove-if-not #'lispm-review-hunk-edited applied)))
    (if (lispm-review-replaced review)
        "the user replaced the proposal with a text of their own"
      (concat (format "hunk%s %s of %d applied" (if (cdr applied) "s" "")
                      (if applied (lispm-review--numbers applied) "none") (length hunks))
              (and rejected (format ", %s rejected" (lispm-review--numbers rejected)))
              (and edited (format ", %s edited by the user" (lispm-review--numbers edited)))))))

(defun lispm-review-note (review proposed written label)
  "Return what the model must know of REVIEW, once the edit is written.
PROPOSED is the text the model's edit would have given, WRITTEN what
was written, LABEL the file's name as the model knows it."
  (let ((rejected (cl-remove-if-not (lambda (h) (eq (lispm-review-hunk-state h) 'rejected))
                                    (lispm-review-hunks review))))
    (concat
     "\n\n[The user reviewed this edit hunk by hunk: "
     (lispm-review-summary review) "."
     (mapconcat (lambda (hunk)
                  (format "  Hunk %d (at line %d) was NOT applied."
                          (lispm-review-hunk-number hunk) (lispm-review-hunk-start hunk)))
                rejected "")
     (if (string= proposed written)
         "  The file is as you proposed.]"
       (concat "  The file is not as you proposed: this diff goes from your proposal to \
what was written.\n"
               (lispm-edit-diff proposed written (cons (concat "proposed/" label)
                                                       (concat "written/" label)))
               "]")))))

(provide 'lispm-review)
;;; lispm-review.el ends here
