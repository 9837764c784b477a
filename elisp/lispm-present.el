;;; lispm-present.el --- Messages shown with live places and agents  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Agents pass places as org links: [[file:PATH::LINE]] and
;; [[buffer:NAME]], optionally with a description, [[file:PATH][text]].
;; Wherever LispM shows a message, `lispm-present-text' turns those links
;; and the names of live agents into buttons: a file link visits the file
;; at that line, a buffer link shows the buffer, an agent's name visits
;; its terminal.  The same links work in Org buffers: `buffer:' is
;; registered as an Org link type.

;;; Code:

(require 'button)
(require 'ol)
(require 'lispm-agents)

(define-button-type 'lispm-place
  'action #'lispm-present--follow-place
  'follow-link t
  'help-echo "Visit this place")

(define-button-type 'lispm-agent
  'action #'lispm-present--visit-agent
  'follow-link t
  'help-echo "Visit this agent's terminal")

(defconst lispm-present--link-regexp
  (rx "[[" (group (or "file" "buffer")) ":" (group (+ (not (any "]"))))
      "]" (? "[" (group (+ (not (any "]")))) "]") "]")
  "Matches the org links LispM makes live: file and buffer links.")

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

(defun lispm-present-open-link (type target)
  "Follow a link of TYPE (\"file\" or \"buffer\") to TARGET."
  (pcase type
    ("file"
     (pcase-let ((`(,file ,line) (split-string target "::")))
       (find-file-other-window (expand-file-name file))
       (when (and line (string-match-p "\\`[0-9]+\\'" line))
         (goto-char (point-min))
         (forward-line (1- (string-to-number line))))))
    ("buffer"
     (if (get-buffer target)
         (pop-to-buffer target)
       (user-error "No buffer named %s" target)))))

(defun lispm-present--follow-place (button)
  "Follow the place BUTTON links to."
  (lispm-present-open-link (button-get button 'lispm-link-type)
                           (button-get button 'lispm-link-target)))

(defun lispm-present--visit-agent (button)
  "Visit the buffer of the agent BUTTON names: a terminal agent's terminal."
  (let* ((agent (lispm-agent-get (button-get button 'lispm-agent)))
         (buffer (and agent (lispm-actor-home-buffer agent))))
    (unless (buffer-live-p buffer)
      (user-error "%s is not running" (button-get button 'lispm-agent)))
    (pop-to-buffer buffer)))

(defun lispm-present--button (string beg end type &rest properties)
  "Make BEG..END of STRING, in place, a button of TYPE with PROPERTIES."
  (add-text-properties beg end
                       `(button (t) category ,(button-category-symbol type)
                                ,@properties)
                       string))

(defun lispm-present-text (text)
  "Return TEXT with its file and buffer links and agent names as buttons."
  (let ((text (copy-sequence text))
        (start 0))
    (while (string-match lispm-present--link-regexp text start)
      (let ((end (match-end 0)))
        (lispm-present--button text (match-beginning 0) end 'lispm-place
                               'lispm-link-type (match-string 1 text)
                               'lispm-link-target (match-string 2 text))
        (setq start end)))
    (lispm-present--agent-buttons text)))

(defun lispm-present--agent-buttons (text)
  "Make the names of live agents in TEXT buttons, outside links; return TEXT."
  (when-let* ((names (mapcar #'lispm-actor-name (lispm-agents))))
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
            (lispm-present--button text beg end 'lispm-agent
                                   'lispm-agent (substring-no-properties text beg end)))
          (setq start end)))))
  text)

(org-link-set-parameters
 "buffer"
 :follow (lambda (target _prefix) (lispm-present-open-link "buffer" target)))

(provide 'lispm-present)
;;; lispm-present.el ends here
