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
;; `lispm-present-string' makes one.  In a session buffer, the request
;; headers of delivered messages ([Request R1 from NAME]), the "Stopped
;; at" notes and the approvals asked are presentations too, made when
;; they are displayed (font lock): the document itself is not changed.
;;
;; Following (RET on a button, mouse-1, or Org's C-c C-o) does the
;; obvious thing for the type: see `lispm-present-follow'.  mouse-3 and
;; M-o (free in Org, which has M-RET, C-c C-o and C-c C-x) offer the
;; rest for that type (`lispm-present-actions'): a menu with the mouse,
;; `completing-read' from the keyboard, so it works in a terminal.

;;; Code:

(require 'button)
(require 'cl-lib)
(require 'ol)
(require 'subr-x)
(require 'text-property-search)
(require 'thingatpt)
(require 'lispm-agents)

;; Loaded when a presentation needs them: the own agent's files load Org
;; and the models, the ledger and the approvals what they show.
(defvar lispm-session-id)
(defvar lispm-approvals-buffer-name)
(declare-function org-entry-get "org" (epom property &optional inherit literal-nil))
(declare-function org-back-to-heading "org" (&optional invisible-ok))
(declare-function org-at-property-p "org" ())
(declare-function org-end-of-subtree "org" (&optional invisible-ok to-heading element))
(declare-function org-fold-show-context "org-fold" (&optional key))
(declare-function org-fold-show-entry "org-fold" (&optional hide-drawers))
(declare-function org-fold-show-children "org-fold" (&optional level))
(declare-function lispm-sessions-list "lispm-session" ())
(declare-function lispm-session-open "lispm-session" (file))
(declare-function lispm-own-agent-p "lispm-own-agent" (object))
(declare-function lispm-own-agent-buffer "lispm-own-agent" (agent))
(declare-function lispm-own-agent-turns "lispm-own-agent" (agent))
(declare-function lispm-agent-of-session "lispm-own-agent" (&optional buffer))
(declare-function lispm-agent-revert-turn "lispm-own-agent" (agent number))
(declare-function lispm-agent-send "lispm-own-agent" (agent text))
(declare-function lispm-turn-outcomes "lispm-turn" (turn))
(declare-function lispm-turn-calls "lispm-turn" (turn))
(declare-function lispm-turn-call-id "lispm-turn" (call))
(declare-function lispm-turn-call-approval "lispm-turn" (call))
(declare-function lispm-change-file "lispm-edit" (change))
(declare-function lispm-change-buffer "lispm-edit" (change))
(declare-function lispm-change-before "lispm-edit" (change))
(declare-function lispm-change-after "lispm-edit" (change))
(declare-function lispm-change-kept "lispm-edit" (change))
(declare-function lispm-edit-diff "lispm-edit" (old new label))
(declare-function lispm-approvals-get "lispm-approvals" (id))
(declare-function lispm-approvals-show "lispm-approvals" (&optional agent))
(declare-function lispm-approvals-allow "lispm-approvals" (&optional approval))
(declare-function lispm-approvals-deny "lispm-approvals" (&optional approval reason))
(declare-function lispm-approvals-read-reason "lispm-approvals" ())
(declare-function lispm-approval-id "lispm-approvals" (approval))
(declare-function lispm-ledger-show-request "lispm-ledger" (request))
(declare-function lispm-inspect "lispm-inspect")

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

;;; The objects, looked up again each time

(defun lispm-present--agent (name)
  "Return the live agent NAME, or signal a `user-error' that it is gone."
  (or (lispm-agent-get name)
      (user-error "No agent %s: it is gone" name)))

(defun lispm-present--symbol (name)
  "Return the function or variable NAME, or signal a `user-error'."
  (let ((symbol (intern-soft name)))
    (unless (and symbol (or (fboundp symbol) (boundp symbol)))
      (user-error "No function or variable %s" name))
    symbol))

(defun lispm-present--split (id count)
  "Split ID at its first COUNT-1 slashes into COUNT parts; a turn's a number.
Signal a `user-error' if ID has fewer parts or its turn is no number."
  (let* ((parts (split-string id "/"))
         (parts (if (> (length parts) count)
                    (append (seq-take parts (1- count))
                            (list (string-join (seq-drop parts (1- count)) "/")))
                  parts)))
    (unless (and (= (length parts) count)
                 (string-match-p "\\`[0-9]+\\'" (nth 1 parts)))
      (user-error "Not a %s reference: %s" (if (= count 2) "turn" "call") id))
    (setf (nth 1 parts) (string-to-number (nth 1 parts)))
    parts))

(defun lispm-present--session-agent (session)
  "Return the live own agent whose session is SESSION, or nil."
  (and (featurep 'lispm-own-agent)
       (seq-find (lambda (agent)
                   (and (lispm-own-agent-p agent)
                        (buffer-live-p (lispm-own-agent-buffer agent))
                        (equal (buffer-local-value 'lispm-session-id
                                                   (lispm-own-agent-buffer agent))
                               session)))
                 (lispm-agents))))

(defun lispm-present--in-session (session function)
  "Call FUNCTION in a buffer of the session SESSION, at its start.
Return its value.  The buffer is the live one, or else the session's
file, opened read-only, and closed again if FUNCTION signals.  Signal
a `user-error' if there is no such session."
  (let* ((live (seq-find (lambda (buffer)
                           (equal (buffer-local-value 'lispm-session-id buffer) session))
                         (and (boundp 'lispm-session-id) (buffer-list))))
         (file (unless live
                 (require 'lispm-session)
                 (plist-get (or (seq-find (lambda (entry)
                                            (equal (plist-get entry :id) session))
                                          (lispm-sessions-list))
                                (user-error "No session %s: its file is gone" session))
                            :file)))
         (opened (and file (not (get-file-buffer file))))
         (buffer (or live (lispm-session-open file)))
         (done nil))
    (unwind-protect
        (with-current-buffer buffer
          (when opened (setq buffer-read-only t))
          (prog1 (save-restriction
                   (widen)
                   (save-excursion
                     (goto-char (point-min))
                     (let ((case-fold-search nil))
                       (funcall function))))
            (setq done t)))
      (when (and opened (not done))
        (kill-buffer buffer)))))

(defun lispm-present--property-line (name value)
  "Return a regexp of the property line NAME: VALUE of a drawer."
  (format "^[ \t]*:%s:[ \t]+%s[ \t]*$" name
          (regexp-opt (list value (prin1-to-string value)))))

(defun lispm-present--search-property (name value bound)
  "Move past the next property line NAME: VALUE of a drawer, before BOUND.
A line alike elsewhere (in a program or a result) is passed over.
Return nil, point unmoved, if there is none."
  (let ((regexp (lispm-present--property-line name value))
        (start (point))
        (found nil))
    (while (and (not found) (re-search-forward regexp bound t))
      (setq found (save-excursion (goto-char (match-beginning 0)) (org-at-property-p))))
    (unless found (goto-char start))
    found))

(defun lispm-present--find-turn (session number)
  "Move to turn NUMBER's heading in SESSION's buffer, which is current.
Return where its subtree ends; signal a `user-error' if there is no
such turn."
  (unless (lispm-present--search-property "LISPM_TURN" (number-to-string number) nil)
    (user-error "Session %s has no turn %d" session number))
  (org-back-to-heading t)
  (save-excursion (org-end-of-subtree t t)))

(defun lispm-present--turn-position (session number)
  "Return (BUFFER . POSITION) of turn NUMBER's heading in SESSION.
Signal a `user-error' if the session has no such turn."
  (lispm-present--in-session
   session (lambda ()
             (lispm-present--find-turn session number)
             (cons (current-buffer) (point)))))

(defun lispm-present--call-position (session number call)
  "Return (BUFFER . POSITION) of CALL's heading in turn NUMBER of SESSION.
Signal a `user-error' if the turn has no such call."
  (lispm-present--in-session
   session (lambda ()
             (let ((end (lispm-present--find-turn session number)))
               (unless (lispm-present--search-property "LISPM_CALL_ID" call end)
                 (user-error "Turn %d of session %s has no call %s" number session call))
               (org-back-to-heading t)
               (cons (current-buffer) (point))))))

(defun lispm-present--live-turn (session number)
  "Return turn NUMBER of SESSION if it ran in this Emacs, else nil."
  (when-let* ((agent (lispm-present--session-agent session)))
    (cdr (assq number (lispm-own-agent-turns agent)))))

(defun lispm-present--call-changes (session number call)
  "Return what CALL of turn NUMBER of SESSION changed, if this Emacs knows."
  (when-let* ((turn (lispm-present--live-turn session number)))
    (plist-get (cdr (assoc call (lispm-turn-outcomes turn))) :changes)))

(defun lispm-present--approval (id)
  "Return the pending approval ID, or signal a `user-error' that it is decided."
  (or (and (featurep 'lispm-approvals) (lispm-approvals-get id))
      (user-error "Approval %s is decided, or was never asked in this Emacs" id)))

(defun lispm-present--call-approval (session number call)
  "Return the pending approval CALL of turn NUMBER of SESSION waits for, or nil."
  (when-let* ((turn (lispm-present--live-turn session number))
              (found (seq-find (lambda (c) (equal (lispm-turn-call-id c) call))
                               (lispm-turn-calls turn)))
              (approval (lispm-turn-call-approval found)))
    (and (featurep 'lispm-approvals) (lispm-approvals-get (lispm-approval-id approval))
         approval)))

;;; Following

(defun lispm-present--show (buffer position)
  "Show BUFFER with point at POSITION, its heading's entry revealed."
  (pop-to-buffer buffer)
  (widen)
  (goto-char position)
  (when (derived-mode-p 'org-mode)
    (org-fold-show-context)
    (org-fold-show-entry)
    (org-fold-show-children)))

(defun lispm-present--change-diff (change)
  "Return the unified diff of CHANGE, a `lispm-change', for the user."
  (let* ((file (lispm-change-file change))
         (label (if file (file-name-nondirectory file)
                  (buffer-name (lispm-change-buffer change))))
         (text (lambda (value)
                 (cond ((null value) "")
                       ((multibyte-string-p value) value)
                       (t (decode-coding-string value 'utf-8))))))
    (if (not (lispm-change-kept change))
        (format "%s: changed; its old text was too big to keep\n" label)
      (lispm-edit-diff (funcall text (lispm-change-before change))
                       (funcall text (lispm-change-after change))
                       label))))

(defun lispm-present--show-diff (call edits)
  "Show in a buffer of its own the diff of EDITS, made by the call CALL."
  (let ((buffer (get-buffer-create (format "*LispM call %s*" call))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (mapconcat #'lispm-present--change-diff (reverse edits) ""))
        (goto-char (point-min))
        (diff-mode)
        (lispm-agent-text-setup)
        (setq buffer-read-only t)))
    (display-buffer buffer)
    buffer))

(defun lispm-present--show-approval (approval)
  "Show the approvals buffer at APPROVAL's section."
  (lispm-approvals-show)
  (with-current-buffer lispm-approvals-buffer-name
    (goto-char (point-min))
    (when-let* ((match (text-property-search-forward 'lispm-approval approval #'eq)))
      (goto-char (prop-match-beginning match))
      (when-let* ((window (get-buffer-window (current-buffer))))
        (set-window-point window (point))
        (set-window-start window (point))))))

(defun lispm-present-follow (type id &optional arg)
  "Do the obvious thing with the object of TYPE named ID.
A file is visited at its line, a buffer shown, an agent's home buffer
shown (with ARG non-nil, the agent is inspected, if `lispm-inspect'
exists), a symbol described, a call shown at its heading in its session
\(with its diff, if it changed files in this Emacs), a request shown in
the ledger, an approval in the approvals buffer, a turn at its heading.
What no longer exists is a `user-error' that names it."
  (pcase type
    ((or 'file "file") (lispm-present-open-link "file" id))
    ((or 'buffer "buffer") (lispm-present-open-link "buffer" id))
    ('agent
     (let ((agent (lispm-present--agent id)))
       (if (and arg (fboundp 'lispm-inspect))
           (lispm-inspect agent)
         (let ((buffer (lispm-actor-home-buffer agent)))
           (unless (buffer-live-p buffer)
             (user-error "%s has no buffer open" id))
           (pop-to-buffer buffer)))))
    ('symbol
     (let ((symbol (lispm-present--symbol id)))
       (cond ((and (fboundp symbol) (boundp symbol)) (describe-symbol symbol))
             ((fboundp symbol) (describe-function symbol))
             (t (describe-variable symbol)))))
    ('turn
     (pcase-let* ((`(,session ,number) (lispm-present--split id 2))
                  (`(,buffer . ,position) (lispm-present--turn-position session number)))
       (lispm-present--show buffer position)))
    ('call
     (pcase-let* ((`(,session ,number ,call) (lispm-present--split id 3))
                  (`(,buffer . ,position) (lispm-present--call-position session number call))
                  (changes (lispm-present--call-changes session number call)))
       (lispm-present--show buffer position)
       (when changes
         (lispm-present--show-diff call changes))))
    ('request
     (require 'lispm-ledger)
     (lispm-ledger-show-request id))
    ('approval (lispm-present--show-approval (lispm-present--approval id)))
    (_ (user-error "Not a type of LispM's links: %s" type))))

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

;;; What else can be done with one

(defun lispm-present--read-message (name)
  "Read a message for the agent NAME."
  (let ((text (read-string (format "Message to %s: " name))))
    (when (string-empty-p (string-trim text))
      (user-error "Nothing to send"))
    text))

(defun lispm-present-actions (type id &optional label)
  "Return what can be done with the object of TYPE named ID, shown as LABEL.
A list of (NAME . FUNCTION), FUNCTION of no arguments; the first is
following it (`lispm-present-follow').  Then, by type: for an agent,
inspecting it (when `lispm-inspect' exists), messaging it (an own
agent) and closing it; for a symbol, finding its source; for a turn,
reverting it; for an approval, allowing or denying it.  Last, copying
the link and copying the text."
  (let ((link (lispm-present-link type id label))
        (text (or label id)))
    (append
     (list (cons (pcase type
                   ('file "Visit the file") ('buffer "Show the buffer")
                   ('agent "Show the agent's buffer") ('symbol "Describe")
                   ('call "Show the call") ('request "Show the request in the ledger")
                   ('approval "Show the approval") ('turn "Show the turn"))
                 (lambda () (lispm-present-follow type id))))
     (pcase type
       ('agent
        (append
         (and (fboundp 'lispm-inspect)
              (list (cons "Inspect" (lambda () (lispm-inspect (lispm-present--agent id))))))
         (and (featurep 'lispm-own-agent)
              (let ((agent (lispm-agent-get id)))
                (and agent (lispm-own-agent-p agent)))
              (list (cons "Message it"
                          (lambda ()
                            (let ((agent (lispm-present--agent id)))
                              (lispm-agent-send agent (lispm-present--read-message id)))))))
         (list (cons "Close it"
                     (lambda ()
                       (let ((agent (lispm-present--agent id)))
                         (when (yes-or-no-p (format "Close %s? " id))
                           (lispm-agent-close agent))))))))
       ('symbol
        (list (cons "Find its source"
                    (lambda ()
                      (let ((symbol (lispm-present--symbol id)))
                        (if (fboundp symbol) (find-function symbol)
                          (find-variable symbol)))))))
       ('turn
        (list (cons "Revert this turn"
                    (lambda ()
                      (pcase-let ((`(,session ,number) (lispm-present--split id 2)))
                        (lispm-agent-revert-turn
                         (or (lispm-present--session-agent session)
                             (user-error "No agent has session %s open" session))
                         number))))))
       ('approval
        (list (cons "Allow" (lambda () (lispm-approvals-allow (lispm-present--approval id))))
              (cons "Deny" (lambda ()
                             (let ((approval (lispm-present--approval id)))
                               (lispm-approvals-deny approval
                                                     (lispm-approvals-read-reason))))))))
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
  "Inspect the agent the presentation at point stands for."
  (interactive)
  (pcase-let ((`(,type ,id ,_) (lispm-present--here nil)))
    (unless (fboundp 'lispm-inspect)
      (user-error "No inspector here (lispm-inspect is not loaded)"))
    (unless (eq type 'agent)
      (user-error "Only agents can be inspected"))
    (lispm-inspect (lispm-present--agent id))))

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

(define-button-type 'lispm-agent :supertype 'lispm-presentation)

(defun lispm-present--button (string beg end type id &optional label)
  "Make BEG..END of STRING, in place, a presentation of TYPE named ID, LABEL.
An agent's is a button of type `lispm-agent', the others of type
`lispm-presentation'."
  (add-text-properties beg end
                       `(button (t)
                                category ,(button-category-symbol
                                           (if (eq type 'agent) 'lispm-agent
                                             'lispm-presentation))
                                lispm-presentation (,type ,id ,label))
                       string))

(defun lispm-present-string (type id &optional label)
  "Return LABEL (default ID) as a button presenting the object of TYPE named ID.
For LispM's views: RET follows it, \\<lispm-present-button-map>\\[lispm-present-menu-at-point] offers the rest."
  (let ((string (copy-sequence (or label id))))
    (lispm-present--button string 0 (length string) type id label)
    string))

(defun lispm-present-text (text)
  "Return TEXT with its links and the names of live agents as buttons.
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
            (lispm-present--button text beg end 'agent (substring-no-properties text beg end)))
          (setq start end)))))
  text)

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

;;; In a session's buffer, at display time

(defun lispm-present--session-ref (&optional call)
  "Return the reference of the turn at point in a session, or of its CALL.
That is SESSION/TURN, or SESSION/TURN/CALL-ID if CALL is non-nil and
point is in a call; nil if point is in no turn."
  (when-let* ((session (and (boundp 'lispm-session-id) lispm-session-id))
              (turn (org-entry-get nil "LISPM_TURN" t)))
    (if call
        (when-let* ((id (org-entry-get nil "LISPM_CALL_ID" t)))
          (format "%s/%s/%s" session turn id))
      (format "%s/%s" session turn))))

(defun lispm-present--props (type id)
  "Return the face and text properties of a presentation of TYPE named ID."
  (list 'face 'link 'mouse-face 'highlight 'follow-link t 'keymap lispm-present-map
        'lispm-presentation (list type id nil)
        'help-echo (lispm-present--help type id nil)))

(defun lispm-present--fontify-request ()
  "Return the properties of the request id just matched."
  (lispm-present--props 'request (match-string-no-properties 1)))

(defun lispm-present--fontify-sender ()
  "Return the properties of the sender just matched, if it is a live agent."
  (let ((name (match-string-no-properties 2)))
    (and (lispm-agent-get name) (lispm-present--props 'agent name))))

(defun lispm-present--fontify-stop ()
  "Return the properties of the \"Stopped at\" note just matched: its turn."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-present--session-ref))))
    (lispm-present--props 'turn ref)))

(defun lispm-present--fontify-approval ()
  "Return the properties of the approval heading just matched, if it waits."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-present--session-ref t)))
              (parts (ignore-errors (lispm-present--split ref 3)))
              (approval (apply #'lispm-present--call-approval parts)))
    (lispm-present--props 'approval (lispm-approval-id approval))))

(defun lispm-present--fontify-heading (type)
  "Return the properties of the turn or call heading just matched, of TYPE."
  (when-let* ((ref (save-excursion (goto-char (match-beginning 0))
                                   (lispm-present--session-ref (eq type 'call)))))
    (lispm-present--props type ref)))

(defconst lispm-present--session-keywords
  '(("^\\* \\(Turn [0-9]+\\)" (1 (lispm-present--fontify-heading 'turn) prepend))
    ("^\\*\\*\\* \\(Call [^\n]+\\)$" (1 (lispm-present--fontify-heading 'call) prepend))
    ("\\[Request \\(R[0-9]+\\) from \\([^]\n]+\\)\\]"
     (1 (lispm-present--fontify-request) prepend)
     (2 (lispm-present--fontify-sender) prepend))
    ("^: \\(Stopped at [^:\n]+\\)" (1 (lispm-present--fontify-stop) prepend))
    ("^\\*\\{4\\} TODO \\(.+\\)$" (1 (lispm-present--fontify-approval) prepend)))
  "What in a session stands for an object.
The headings of its turns and calls, its requests, senders, stops and
approvals.")

(defun lispm-present-session-setup ()
  "Set up the presentations of the session in the current buffer."
  (font-lock-add-keywords nil lispm-present--session-keywords 'append)
  (setq-local font-lock-extra-managed-props
              (seq-union font-lock-extra-managed-props
                         '(keymap mouse-face follow-link lispm-presentation help-echo))))

(add-hook 'lispm-session-mode-hook #'lispm-present-session-setup)

(provide 'lispm-present)
;;; lispm-present.el ends here
