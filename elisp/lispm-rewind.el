;;; lispm-rewind.el --- Rewind an own agent's session, and undo the rewind  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Rewinding an own agent's session to a turn, with Claude Code's
;; choices and one it lacks (\\[lispm-rewind] in the session, on the
;; turn's heading, asks which):
;;
;;   code           take back what the turn and every later one changed
;;                  in files (shell and eval changes included: LispM
;;                  records them), keeping the user's own edits since;
;;                  refused, changing nothing, on a conflict
;;   conversation   the model no longer sees the turn and the later
;;                  ones: the document keeps them, tagged REWOUND, and
;;                  the turn's words come back to the input area
;;   both           the two together
;;   summarize      the turns from this one on become a summary (the
;;                  older ones stay as they are)
;;   fork           a new session, and agent, with the history up to
;;                  this turn: another way, the first one kept
;;   undo           what a rewind to this turn did comes back: the
;;                  turns' changes are applied again, with the same
;;                  care for the user's later edits, and the turns
;;                  are in the conversation again
;;
;; A revert is recorded in the document (the turn's `:LISPM_REVERTED:'),
;; so it survives Emacs, is never done twice, and can be undone
;; (`lispm-rewind-undo') from what the session recorded of the turn's
;; changes.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-session)
(require 'lispm-turn)
(require 'lispm-own-agent)

;;; Which turns

(defun lispm-rewind--agent-and-turn ()
  "Return this session's own agent and the turn point is in, for `interactive'."
  (let ((agent (lispm-own-agent-current)))
    (list agent (or (lispm-own-agent-turn-at-point)
                    (car (car (lispm-own-agent-turns agent)))
                    (user-error "No turn here")))))

(defun lispm-rewind--from (agent number)
  "Return each turn of AGENT's session from NUMBER on, as `lispm-session-turns'.
Signal a `user-error' if AGENT is busy, or there is no turn NUMBER."
  (when (lispm-own-agent-busy-p agent)
    (user-error "%s is busy; rewind once the turn is over" (lispm-actor-name agent)))
  (let ((turns (cl-remove-if (lambda (turn) (or (< (plist-get turn :turn) number)
                                                (plist-get turn :archived)))
                             (lispm-session-turns (lispm-own-agent-buffer agent)))))
    (unless (eql (plist-get (car turns) :turn) number)
      (user-error "No turn %d to rewind to in this session" number))
    turns))

(defun lispm-rewind--records (agent items)
  "Return what AGENT's session recorded of the file edits of ITEMS, oldest first.
ITEMS are turns, as `lispm-session-turns' gives them."
  (let ((buffer (lispm-own-agent-buffer agent)))
    (cl-loop for turn in items
             append (lispm-session-turn-changes buffer (plist-get turn :turn)))))

(defun lispm-rewind--note (agent format-string &rest args)
  "Say FORMAT-STRING with ARGS in AGENT's session and the echo area."
  (let ((text (apply #'format format-string args)))
    (lispm-session-insert-note (lispm-own-agent-buffer agent) text)
    (message "LispM: %s" text)
    text))

;;; Code

(defun lispm-rewind-code (agent number)
  "Take back what turn NUMBER of AGENT, and every later turn, changed in files.
The user's own edits since, elsewhere in those files, stay; if the
user changed text a turn wrote, signal `lispm-revert-conflict' and
change nothing.  Each turn is recorded as reverted, so it can be
undone (`lispm-rewind-undo').  Return how many files were restored."
  (interactive (lispm-rewind--agent-and-turn))
  (let* ((turns (cl-remove-if (lambda (turn) (plist-get turn :reverted))
                              (lispm-rewind--from agent number)))
         (records (lispm-rewind--records agent turns)))
    (if (null records)
        (progn (lispm-rewind--note agent "Nothing to take back from turn %d on" number) 0)
      (let ((files (lispm-turn-revert-recorded records))
            (buffer (lispm-own-agent-buffer agent)))
        (dolist (turn turns)
          (let ((live (cdr (assq (plist-get turn :turn) (lispm-own-agent-turns agent)))))
            (when live
              ;; Taken back from the record: the live changes are spent.
              (setf (lispm-turn-changes live) nil
                    (lispm-turn-recorded live) nil)))
          (when (lispm-session-turn-changes buffer (plist-get turn :turn))
            (lispm-session-mark-reverted buffer (plist-get turn :turn) (lispm-session-time))))
        (lispm-rewind--note agent "Rewound the code to before turn %d: %d file%s restored"
                            number files (if (= files 1) "" "s"))
        files))))

(defun lispm-rewind--inverse (change)
  "Return the recorded CHANGE turned around: what taking it back would undo."
  (if (plist-get change :lost)
      change
    (list :file (plist-get change :file) :line (plist-get change :line)
          :old (plist-get change :new) :new (plist-get change :old)
          :created (plist-get change :deleted) :deleted (plist-get change :created))))

(defun lispm-rewind--reapply (agent items)
  "Apply again what ITEMS of AGENT did to files; return how many it touched.
Signal `lispm-revert-conflict', changing nothing, if the user changed
text they would replace."
  (let ((records (lispm-rewind--records agent items)))
    (prog1 (if records
               ;; Taking back the inverses, newest first, is applying the
               ;; changes, oldest first.
               (lispm-turn-revert-recorded (nreverse (mapcar #'lispm-rewind--inverse records)))
             0)
      (dolist (turn items)
        (lispm-session-mark-reverted (lispm-own-agent-buffer agent) (plist-get turn :turn) nil)))))

;;; Conversation

(defun lispm-rewind-conversation (agent number)
  "Take turn NUMBER of AGENT, and every later turn, out of the conversation.
The model no longer sees them; the document keeps them, tagged
REWOUND.  The turn's words come back to the input area, if it is
empty.  Undo with `lispm-rewind-undo'.  Return the turns' numbers."
  (interactive (lispm-rewind--agent-and-turn))
  (let* ((buffer (lispm-own-agent-buffer agent))
         (numbers (mapcar (lambda (turn) (plist-get turn :turn))
                          (cl-remove-if (lambda (turn) (plist-get turn :rewound))
                                        (lispm-rewind--from agent number)))))
    (when numbers
      (lispm-session-mark-rewound buffer numbers t)
      (when (string-blank-p (lispm-session-input buffer))
        (let ((words (lispm-session-turn-words buffer number)))
          (when words
            (with-current-buffer buffer
              (save-excursion
                (goto-char (point-max))
                (insert (string-trim-right words)))))))
      (lispm-rewind--note agent "Rewound the conversation to before turn %d: the model no \
longer sees turn%s %s" number (if (cdr numbers) "s" "")
                          (mapconcat #'number-to-string numbers ", ")))
    numbers))

(defun lispm-rewind-both (agent number)
  "Rewind the code and the conversation of AGENT to before turn NUMBER.
The code first: on a conflict, nothing changes."
  (interactive (lispm-rewind--agent-and-turn))
  (lispm-rewind-code agent number)
  (lispm-rewind-conversation agent number))

;;; Summarize from here

(defun lispm-rewind-summarize (agent number)
  "Summarise turn NUMBER of AGENT and every later turn; keep the older ones.
The model writes the summary (a turn offered no tools); the turns stay
in the document, archived, the summary a heading after them."
  (interactive (lispm-rewind--agent-and-turn))
  (lispm-rewind--from agent number)
  (lispm-own-agent-summarize
   agent (lambda (error-text)
           (message "LispM: %s" (or error-text
                                    (format "turns from %d on are summarised" number))))
   number))

;;; Fork

(defun lispm-rewind-fork (agent number)
  "Start a new session, and own agent, with AGENT's history up to turn NUMBER.
The first session is untouched; the new one's header names it.
Return the new agent."
  (interactive (lispm-rewind--agent-and-turn))
  (lispm-rewind--from agent number)
  (let* ((buffer (lispm-own-agent-buffer agent))
         (file (lispm-session-fork buffer number))
         (fork (lispm-own-agent-resume file)))
    (lispm-rewind--note agent "Forked at turn %d: %s" number (lispm-actor-name fork))
    (when (called-interactively-p 'any)
      (pop-to-buffer (lispm-own-agent-buffer fork)))
    fork))

;;; Undo

(defun lispm-rewind-undo (agent number)
  "Undo what rewinding AGENT to turn NUMBER did.
The changes of the turns from NUMBER on that were reverted are applied
again, keeping the user's edits since (on a conflict, signal
`lispm-revert-conflict' and change nothing); the turns rewound out of
the conversation are in it again.  Return the turns undone."
  (interactive (lispm-rewind--agent-and-turn))
  (let* ((turns (lispm-rewind--from agent number))
         (reverted (cl-remove-if-not (lambda (turn) (plist-get turn :reverted)) turns))
         (rewound (cl-remove-if-not (lambda (turn) (plist-get turn :rewound)) turns)))
    (unless (or reverted rewound)
      (user-error "Nothing from turn %d on is rewound or reverted" number))
    (let ((files (and reverted (lispm-rewind--reapply agent reverted))))
      (when rewound
        (lispm-session-mark-rewound (lispm-own-agent-buffer agent)
                                    (mapcar (lambda (turn) (plist-get turn :turn)) rewound)
                                    nil))
      (lispm-rewind--note agent "Undid the rewind to turn %d:%s%s" number
                          (if reverted (format " %d file%s changed again" files
                                               (if (eql files 1) "" "s"))
                            "")
                          (if rewound (format "%s turn%s back in the conversation"
                                              (if reverted ";" "") (if (cdr rewound) "s" ""))
                            ""))
      (append reverted rewound))))

;;; The command

(defconst lispm-rewind-choices
  '((?c "code" lispm-rewind-code "take back the files' changes from this turn on")
    (?v "conversation" lispm-rewind-conversation
        "the model no longer sees this turn and the later ones")
    (?b "both" lispm-rewind-both "code and conversation")
    (?s "summarize from here" lispm-rewind-summarize
        "summarise this turn and the later ones")
    (?f "fork" lispm-rewind-fork "a new session with the history up to this turn")
    (?u "undo" lispm-rewind-undo "undo a rewind to this turn"))
  "The choices of `lispm-rewind': (KEY NAME COMMAND HELP).")

;;;###autoload
(defun lispm-rewind (agent number)
  "Rewind AGENT's session to turn NUMBER, the one point is in: ask how.
See `lispm-rewind-choices': code, conversation, both, summarize from
here, fork, or undo."
  (interactive (lispm-rewind--agent-and-turn))
  (let ((choice (read-multiple-choice
                 (format "Rewind to turn %d" number)
                 (mapcar (pcase-lambda (`(,key ,name ,_ ,help)) (list key name help))
                         lispm-rewind-choices))))
    (funcall (nth 2 (assq (car choice) lispm-rewind-choices)) agent number)))

(provide 'lispm-rewind)
;;; lispm-rewind.el ends here
