;;; lispm-inspect.el --- The inspector: one agent, whole  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `M-x lispm-inspect' (`i' in the agent list) shows one agent, any
;; actor, whole, in `*LispM inspect: NAME*', an Org buffer, read-only,
;; a heading per part:
;;
;;   the agent   kind, role, folder, state; a helper's chain of callers
;;   Policy      its role's rules, its session grants, and per kind the
;;               decision as it applies to it (for a helper: its role's,
;;               its caller's and the stricter of them)
;;   Waiting     its approvals, and an own agent's calls under way
;;   Inbox       from the sidecar's ledger: the messages to it with
;;               their state, the requests it waits on and those that
;;               wait on it
;;   Calls       the audit of its tool calls; an own agent's calls
;;   Session     an own agent's session, model, turns and token use
;;
;; What a type of actor has more (the own agent's calls, queue and
;; session) is a method of `lispm-inspect-insert' in the file that owns
;; the type, lispm-own-agent.el for the own agent: this file knows no
;; type of actor but the registry's.
;;
;; Every object is a LispM link (`lispm-present-link').  The buffer
;; follows the agent live: a change of the registry or of the
;; approvals redraws it, `lispm-inspect-redraw-delay' seconds later and
;; only while a window shows it, with point kept on its item.  The
;; ledger is asked asynchronously, never from a redraw's own time: a
;; "loading" line stands until its answer comes, and it is asked again
;; when the agent's activity, queue, approvals or requests change,
;; since the sidecar tells of no other change of the ledger.
;;
;; On an item: `a' allows an approval, `d' denies it, `r' reverts a
;; turn, `i' inspects the agent a link names, RET follows the link;
;; `g' redraws and asks the ledger again, `q' quits.  A message queued
;; in the sidecar cannot be withdrawn: the sidecar has no method for it.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'org)
(require 'org-element)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-policy)
(require 'lispm-roles)
(require 'lispm-approvals)
(require 'lispm-present)

;;; Options

(defgroup lispm-inspect nil
  "The inspector of LispM's agents."
  :group 'lispm
  :prefix "lispm-inspect-")

(defcustom lispm-inspect-redraw-delay 0.2
  "Seconds the inspector waits after a change before it redraws.
Changes meanwhile make one redraw."
  :type 'number)

(defcustom lispm-inspect-ledger-limit 30
  "How many of the ledger's newest entries of the agent the inspector asks for."
  :type 'natnum)

(defcustom lispm-inspect-calls-limit 20
  "How many recent tool calls the inspector shows."
  :type 'natnum)

;;; The buffer's state

(defvar-local lispm-inspect--agent nil
  "The actor this inspector shows.")

(defvar-local lispm-inspect--ledger nil
  "What the ledger said of the agent: nil (never asked), or a plist.
:entries, the entries of its last answer (a list of plists), :error,
why the last question failed, :loading, non-nil while one is asked.")

(defvar-local lispm-inspect--ledger-key nil
  "What the agent was like when the ledger was last asked.
See `lispm-inspect--key'.")

(defvar-local lispm-inspect--ledger-serial 0
  "The number of the ledger's question last asked; older answers are dropped.")

(defvar-local lispm-inspect--timer nil
  "The timer of the redraw to come, or nil.")

(defvar-local lispm-inspect--stale nil
  "Non-nil if something changed while no window showed the buffer.")

(defun lispm-inspect-buffer-name (agent)
  "Return the name of the inspector buffer of AGENT, an actor or a name."
  (format "*LispM inspect: %s*" (if (stringp agent) agent (lispm-actor-name agent))))

;;; What an actor's type adds: its owner's methods

;; The inspector shows what every actor has.  What a type of actor
;; adds is a method in the file that owns the type (the own agent's in
;; lispm-own-agent.el), as magit-section.el knows no section type.

(cl-defgeneric lispm-inspect-insert (actor part)
  "Insert, in PART of the inspector of ACTOR, what its type has more.
PART is `waiting' (at the end of Waiting), `inbox' (after the messages
to it), `calls' (first in Recent tool calls) or `sections' (parts of
its own, after the others).  A line that stands for an object is an
item (`lispm-inspect-insert-item'): (turn NUMBER) and (call ID
NUMBER) are what \\<lispm-inspect-mode-map>\\[lispm-inspect-revert-turn] reverts; a `lispm-inspect-approval'
property, an approval's id, is what \\[lispm-inspect-allow] and \\[lispm-inspect-deny] decide.
By default, nothing."
  (:method (_actor _part) nil))

(cl-defgeneric lispm-inspect-kind-title (actor)
  "Return the title of ACTOR's kind, or nil."
  (:method (actor) (alist-get (lispm-actor-kind actor) lispm-agent-kinds)))

(cl-defgeneric lispm-inspect-waiting-requests (actor)
  "Return the ids of the requests ACTOR waits on that Emacs knows of.
The ledger tells of the others; by default, none."
  (:method (_actor) nil))

(cl-defgeneric lispm-inspect-revert (actor number)
  "Take back what turn NUMBER of ACTOR changed, once the user agrees."
  (:method (_actor _number) (user-error "Only turns of LispM's own agents can be reverted")))

;;; Items

;; Each line that stands for an object carries `lispm-inspect-item',
;; (TYPE ID): what the keys act on, and what point stays on across
;; redraws.  Each part's text carries `lispm-inspect-section'.

(defun lispm-inspect-insert-item (item &rest strings)
  "Insert STRINGS as a line of their own, standing for ITEM, (TYPE ID)."
  (let ((start (point)))
    (apply #'insert strings)
    (insert "\n")
    (put-text-property start (point) 'lispm-inspect-item item)))

(defun lispm-inspect--item-at (&optional pos)
  "Return the item at POS (default point), (TYPE ID), or nil."
  (get-text-property (or pos (point)) 'lispm-inspect-item))

(defun lispm-inspect-heading (level section title)
  "Insert a heading of LEVEL with TITLE, the start of SECTION, a symbol."
  (insert (make-string level ?*) " " title "\n")
  (put-text-property (line-beginning-position 0) (point) 'lispm-inspect-heading section))

(defun lispm-inspect-line (&rest strings)
  "Insert STRINGS as a line."
  (apply #'insert strings)
  (insert "\n"))

(defun lispm-inspect-note (text)
  "Insert TEXT as a line of explanation."
  (lispm-inspect-line (propertize text 'face 'shadow)))

(defun lispm-inspect--agent-link (name)
  "Return a link to the agent NAME."
  (lispm-present-link 'agent name))

(defun lispm-inspect-time (seconds)
  "Return SECONDS since the epoch as a time of day."
  (if (numberp seconds) (format-time-string "%T" seconds) "--:--:--"))

;;; The agent

(defun lispm-inspect--callers (agent)
  "Return AGENT's callers, nearest first."
  (let ((chain nil)
        (caller (lispm-actor-caller agent)))
    (while (and caller (not (memq caller chain)))
      (push caller chain)
      (setq caller (lispm-actor-caller caller)))
    (nreverse chain)))

(defun lispm-inspect--insert-agent (agent)
  "Insert the part on who AGENT is."
  (let ((name (lispm-actor-name agent))
        (folder (lispm-actor-folder agent))
        (callers (lispm-inspect--callers agent)))
    (lispm-inspect-heading 1 'agent (concat (lispm-inspect--agent-link name)
                                             (if (lispm-agent-live-p agent) ""
                                               " (has left)")))
    (lispm-inspect-insert-item
     (list 'agent name) "- Kind: " (symbol-name (lispm-actor-kind agent))
     (if-let* ((title (lispm-inspect-kind-title agent)))
         (format " (%s)" title)
       ""))
    (lispm-inspect-line "- Role: " (symbol-name (lispm-actor-effective-role agent)))
    (when folder
      (lispm-inspect-insert-item
       (list 'file folder) "- Folder: "
       (lispm-present-link 'file folder (abbreviate-file-name folder))))
    (lispm-inspect-line
     "- State: " (symbol-name (lispm-actor-state agent))
     (if-let* ((activity (lispm-actor-activity agent)))
         (format ", %s" activity)
       ""))
    (when-let* ((buffer (lispm-actor-home-buffer agent))
                ((buffer-live-p buffer)))
      (lispm-inspect-insert-item
       (list 'buffer (buffer-name buffer)) "- Buffer: "
       (lispm-present-link 'buffer (buffer-name buffer))))
    (when (lispm-agent-p agent)
      (when-let* ((port (lispm-agent-port agent)))
        (lispm-inspect-line (format "- MCP port: %d" port)))
      (when-let* ((session (lispm-agent-session agent)))
        (lispm-inspect-line "- CLI session: " session))
      (when (eq (lispm-actor-activity agent) 'waiting-for-approval)
        (lispm-inspect-note "  Its CLI asks for an approval in its terminal.")))
    (when callers
      (lispm-inspect-insert-item
       (list 'agent (lispm-actor-name (car callers)))
       "- Caller: " (lispm-inspect--agent-link (lispm-actor-name (car callers)))
       (if (cdr callers)
           (concat ", under "
                   (mapconcat (lambda (caller) (lispm-inspect--agent-link (lispm-actor-name caller)))
                              (cdr callers) " under "))
         "")))))

;;; Policy

(defun lispm-inspect--rule-text (rule)
  "Return RULE, (KIND DECISION [PATTERNS]), as text."
  (format "%s: %s%s" (car rule) (cadr rule)
          (if (nth 2 rule) (format " (only %s)" (string-join (nth 2 rule) ", ")) "")))

(defun lispm-inspect--role-source (role folder)
  "Return where ROLE's rules, for an agent in FOLDER, come from, as a link."
  (cond ((assq role lispm-policy-roles)
         (lispm-present-link 'symbol "lispm-policy-roles"))
        ((when-let* ((found (ignore-errors (lispm-roles-get role folder)))
                     (file (lispm-role-file found)))
           (lispm-present-link 'file file (abbreviate-file-name file))))
        (t (concat "the default role's, "
                   (lispm-present-link 'symbol "lispm-policy-default-role")))))

(defconst lispm-inspect--target nil
  "The target the per-kind decisions are made for: an action naming no file.
Rules narrowed to paths apply to no such action.")

(defun lispm-inspect--insert-policy (agent)
  "Insert the part on AGENT's policy, as it stands for AGENT."
  (let* ((role (lispm-actor-effective-role agent))
         (folder (lispm-actor-folder agent))
         (caller (lispm-actor-caller agent))
         (grants (lispm-policy-grants agent)))
    (lispm-inspect-heading 1 'policy "Policy")
    (lispm-inspect-heading 2 'rules (format "Rules of role %s" role))
    (lispm-inspect-line "From " (lispm-inspect--role-source role folder)
                         "; the first that matches wins, none means ask.")
    (dolist (rule (lispm-policy-rules role folder))
      (lispm-inspect-insert-item (list 'rule rule) "- " (lispm-inspect--rule-text rule)))
    (lispm-inspect-heading 2 'grants "Session grants")
    (if grants
        (dolist (kind grants)
          (lispm-inspect-insert-item (list 'grant kind)
                                      (format "- %s: allowed until it leaves" kind)
                                      (propertize (substitute-command-keys
                                                   "  (\\<lispm-inspect-mode-map>\\[lispm-inspect-revoke] revokes it)")
                                                  'face 'shadow)))
      (lispm-inspect-note "None: nothing allowed for its session."))
    (lispm-inspect-heading 2 'decisions "Decisions per kind")
    (lispm-inspect-note
     (if caller
         "For an action naming no file; a helper's is the stricter of its role's and its caller's."
       "For an action naming no file, its session grants counted."))
    (let ((columns (if caller '("Kind" "Role's" "Caller's" "Effective")
                     '("Kind" "Role's" "Grant" "Effective"))))
      (cl-flet ((row (cells)
                  (concat "| " (mapconcat (lambda (cell) (format "%-10s" cell)) cells " | ")
                          " |")))
        (lispm-inspect-line (row columns))
        (lispm-inspect-line "|" (mapconcat (lambda (_) (make-string 12 ?-)) columns "+") "|")
        (dolist (kind lispm-policy-kinds)
          (let ((decisions
                 (condition-case err
                     (list (lispm-policy-rule-decision agent role kind lispm-inspect--target)
                           (if caller
                               (lispm-policy-chain-decision
                                caller (lispm-actor-role caller) kind lispm-inspect--target)
                             (if (memq kind grants) "granted" ""))
                           (lispm-policy-decide agent role kind lispm-inspect--target))
                   (lispm-error (list "?" "?" (error-message-string err))))))
            (lispm-inspect-insert-item
             (list 'kind kind)
             (row (cons kind (mapcar (lambda (d) (format "%s" d)) decisions))))))))))

;;; Waiting

(defun lispm-inspect--insert-waiting (agent)
  "Insert the part on what of AGENT waits: approvals, its turn's tool use."
  (let ((approvals (lispm-approvals-for-agent agent)))
    (lispm-inspect-heading 1 'waiting (format "Waiting (%d approval%s)" (length approvals)
                                               (if (= (length approvals) 1) "" "s")))
    (if (null approvals)
        (lispm-inspect-note "No approval waits.")
      (dolist (approval approvals)
        (lispm-inspect-insert-item
         (list 'approval (lispm-approval-id approval))
         "- " (lispm-present-link 'approval (lispm-approval-id approval)) " "
         (symbol-name (lispm-approval-kind approval)) ": "
         (lispm-approvals-summary approval)
         "  " (lispm-inspect-time (lispm-approval-time approval)))))
    (lispm-inspect-insert agent 'waiting)))

;;; The ledger

(defun lispm-inspect--key (agent)
  "Return a summary of AGENT whose change may mean new entries in the ledger.
Its state, activity, queue, approvals and awaited requests: the
sidecar tells of no change of the ledger itself."
  (list (lispm-actor-state agent) (lispm-actor-activity agent)
        (and (lispm-agent-p agent) (lispm-agent-queued agent))
        (mapcar #'lispm-approval-id (lispm-approvals-for-agent agent))
        (lispm-inspect-waiting-requests agent)))

(defun lispm-inspect--ask-ledger (buffer)
  "Ask the sidecar's ledger of BUFFER's agent; redraw BUFFER with the answer.
Asynchronous: this returns at once."
  (with-current-buffer buffer
    (let ((serial (cl-incf lispm-inspect--ledger-serial))
          (agent lispm-inspect--agent))
      (setq lispm-inspect--ledger-key (lispm-inspect--key agent)
            lispm-inspect--ledger (plist-put (copy-sequence lispm-inspect--ledger) :loading t))
      (cl-flet ((answer (entries error)
                  ;; ENTRIES is a list, or :none; a failure keeps the
                  ;; entries of the last answer.
                  (when (buffer-live-p buffer)
                    (with-current-buffer buffer
                      (when (= serial lispm-inspect--ledger-serial)
                        (let ((old lispm-inspect--ledger))
                          (setq lispm-inspect--ledger
                                (append (list :error error)
                                        (cond ((listp entries) (list :entries entries))
                                              ((plist-member old :entries)
                                               (list :entries (plist-get old :entries)))))))
                        (lispm-inspect--schedule buffer t))))))
        (condition-case err
            (lispm-sidecar-async-request
             'lispm/ledger (list :limit lispm-inspect-ledger-limit
                                 :agent (lispm-actor-name agent))
             :on-success (lambda (result)
                           (answer (append (plist-get result :entries) nil) nil))
             :on-error (lambda (text) (answer :none text)))
          (error (answer :none (error-message-string err))))))))

(defun lispm-inspect--entries (predicate)
  "Return the ledger's entries for which PREDICATE is non-nil, newest first."
  (cl-remove-if-not predicate (plist-get lispm-inspect--ledger :entries)))

(defun lispm-inspect--entry-line (entry)
  "Insert the line of the ledger ENTRY, a message, request or reply."
  (let ((request (plist-get entry :request_id)))
    (lispm-inspect-insert-item
     (list 'message (plist-get entry :id) request)
     "- " (lispm-inspect-time (plist-get entry :time)) " "
     (or (plist-get entry :kind) "message") " from "
     (if-let* ((sender (plist-get entry :sender))) (lispm-inspect--agent-link sender) "?")
     " to "
     (if-let* ((recipient (plist-get entry :recipient))) (lispm-inspect--agent-link recipient) "?")
     (if request (concat " " (lispm-present-link 'request request)) "")
     ", " (or (plist-get entry :state) "?")
     (if-let* ((reason (plist-get entry :reason))) (format " (%s)" reason) "")
     ": " (truncate-string-to-width
           (replace-regexp-in-string "[ \t\n\r]+" " " (or (plist-get entry :text) ""))
           80 nil nil "..."))))

(defun lispm-inspect--request-line (request others)
  "Insert the line of REQUEST, an id, and its entry among OTHERS, if there."
  (let ((entry (cl-find request others :key (lambda (e) (plist-get e :request_id))
                        :test #'equal)))
    (lispm-inspect-insert-item
     (list 'request request)
     "- " (lispm-present-link 'request request)
     (if entry
         (format " %s %s%s: %s"
                 (if (equal (plist-get entry :sender) (lispm-actor-name lispm-inspect--agent))
                     "to" "from")
                 (lispm-inspect--agent-link
                  (if (equal (plist-get entry :sender) (lispm-actor-name lispm-inspect--agent))
                      (plist-get entry :recipient)
                    (plist-get entry :sender)))
                 (if-let* ((state (plist-get entry :request_state))) (format ", %s" state) "")
                 (truncate-string-to-width
                  (replace-regexp-in-string "[ \t\n\r]+" " " (or (plist-get entry :text) ""))
                  60 nil nil "..."))
       ""))))

(defun lispm-inspect--ledger-status ()
  "Insert the line saying how the ledger's part stands, if it is not plain."
  (cond ((not (lispm-sidecar-live-p))
         (lispm-inspect-note "The sidecar is not running: the ledger cannot be asked."))
        ((and (plist-get lispm-inspect--ledger :loading)
              (not (plist-member lispm-inspect--ledger :entries)))
         (lispm-inspect-note "Loading: asking the ledger..."))
        ((plist-get lispm-inspect--ledger :loading)
         (lispm-inspect-note "Asking the ledger again..."))
        ((plist-get lispm-inspect--ledger :error)
         (lispm-inspect-note (format "The ledger did not answer: %s"
                                      (plist-get lispm-inspect--ledger :error))))))

(defun lispm-inspect--insert-inbox (agent)
  "Insert the part on AGENT's messages and requests, from the ledger."
  (let* ((name (lispm-actor-name agent))
         (to-it (lispm-inspect--entries
                 (lambda (e) (and (equal (plist-get e :recipient) name)
                                  (member (plist-get e :kind) '("message" "request" "reply"))))))
         (requests (lispm-inspect--entries
                    (lambda (e) (and (equal (plist-get e :kind) "request")
                                     (equal (plist-get e :request_state) "open")))))
         (waits-on (delete-dups
                    (append (lispm-inspect-waiting-requests agent)
                            (mapcar (lambda (e) (plist-get e :request_id))
                                    (cl-remove-if-not
                                     (lambda (e) (equal (plist-get e :sender) name)) requests)))))
         (waited (delete-dups (mapcar (lambda (e) (plist-get e :request_id))
                                      (cl-remove-if-not
                                       (lambda (e) (equal (plist-get e :recipient) name))
                                       requests))))
         (queued (cl-count "queued" to-it :key (lambda (e) (plist-get e :state)) :test #'equal)))
    (lispm-inspect-heading 1 'inbox (format "Inbox (%d queued)"
                                             (if (lispm-agent-p agent)
                                                 (max queued (lispm-agent-queued agent))
                                               queued)))
    (lispm-inspect--ledger-status)
    (if to-it
        (mapc #'lispm-inspect--entry-line to-it)
      (when (plist-member lispm-inspect--ledger :entries)
        (lispm-inspect-note "No message to it in the ledger's newest entries.")))
    (lispm-inspect-insert agent 'inbox)
    (lispm-inspect-heading 2 'waits-on "Requests it waits on")
    (if waits-on
        (dolist (request waits-on) (lispm-inspect--request-line request requests))
      (lispm-inspect-note "None."))
    (lispm-inspect-heading 2 'waited "Requests that wait on it")
    (if waited
        (dolist (request waited) (lispm-inspect--request-line request requests))
      (lispm-inspect-note "None."))))

;;; Calls

(defun lispm-inspect--insert-calls (agent)
  "Insert the part on AGENT's recent tool use."
  (let ((decisions (lispm-inspect--entries
                    (lambda (e) (equal (plist-get e :kind) "decision")))))
    (lispm-inspect-heading 1 'calls "Recent tool calls")
    (lispm-inspect-insert agent 'calls)
    (lispm-inspect-heading 2 'audit "The audit: what was decided of them")
    (lispm-inspect--ledger-status)
    (if decisions
        (dolist (entry (seq-take decisions lispm-inspect-calls-limit))
          (lispm-inspect-insert-item
           (list 'decision (plist-get entry :id))
           "- " (lispm-inspect-time (plist-get entry :time)) " "
           (or (plist-get entry :tool_kind) "?") ", " (or (plist-get entry :text) "")))
      (when (plist-member lispm-inspect--ledger :entries)
        (lispm-inspect-note "None in the ledger's newest entries.")))))

;;; Drawing

(defun lispm-inspect--place (pos)
  "Return where POS is: (ITEM SECTION LINE COLUMN)."
  (save-excursion
    (goto-char pos)
    (list (lispm-inspect--item-at pos)
          (lispm-inspect--section-at pos)
          (line-number-at-pos pos)
          (- pos (line-beginning-position)))))

(defun lispm-inspect--section-at (pos)
  "Return the section of the heading at or before POS, or nil."
  (save-excursion
    (goto-char pos)
    (let ((section nil))
      (while (and (not (setq section (get-text-property (line-beginning-position)
                                                        'lispm-inspect-heading)))
                  (zerop (forward-line -1))))
      section)))

(defun lispm-inspect--find (property value)
  "Return where the first text whose PROPERTY is VALUE is, or nil."
  (let ((pos (point-min)) found)
    (while (and (not found) pos (< pos (point-max)))
      (if (equal (get-text-property pos property) value)
          (setq found pos)
        (setq pos (next-single-property-change pos property))))
    found))

(defun lispm-inspect--restore (place)
  "Return the position of PLACE, from `lispm-inspect--place', in the new text."
  (pcase-let ((`(,item ,section ,line ,column) place))
    (save-excursion
      (if-let* ((start (and item (lispm-inspect--find 'lispm-inspect-item item))))
          (progn (goto-char start)
                 (min (+ start column) (line-end-position)))
        ;; An item gone: its part's heading; elsewhere, the same line.
        (if-let* ((start (and item section
                              (lispm-inspect--find 'lispm-inspect-heading section))))
            start
          (goto-char (point-min))
          (forward-line (1- line))
          (min (+ (point) column) (line-end-position)))))))

(defun lispm-inspect--folded ()
  "Return the sections whose headings are folded."
  (let ((pos (point-min)) folded)
    (while (< pos (point-max))
      (when-let* ((section (get-text-property pos 'lispm-inspect-heading)))
        (save-excursion
          (goto-char pos)
          (when (org-fold-folded-p (line-end-position))
            (push section folded))))
      (setq pos (or (next-single-property-change pos 'lispm-inspect-heading) (point-max))))
    folded))

(defun lispm-inspect--fill (agent)
  "Erase the buffer and insert every part of AGENT."
  (erase-buffer)
  (lispm-inspect--insert-agent agent)
  (lispm-inspect--insert-policy agent)
  (lispm-inspect--insert-waiting agent)
  (lispm-inspect--insert-inbox agent)
  (lispm-inspect--insert-calls agent)
  (lispm-inspect-insert agent 'sections))

(defun lispm-inspect-redraw (&optional buffer)
  "Draw the inspector BUFFER (default: the current one) afresh.
Point, in the buffer and in each window on it, stays on its item;
folded parts stay folded.  The ledger is asked again, asynchronously,
if the agent changed in a way that may have changed its entries."
  (let ((buffer (or buffer (current-buffer))))
    (with-current-buffer buffer
      (when lispm-inspect--timer
        (cancel-timer lispm-inspect--timer)
        (setq lispm-inspect--timer nil))
      (setq lispm-inspect--stale nil)
      (let* ((agent lispm-inspect--agent)
             (windows (get-buffer-window-list buffer nil t))
             (places (mapcar (lambda (w) (cons w (lispm-inspect--place (window-point w))))
                             windows))
             (here (lispm-inspect--place (point)))
             (folded (lispm-inspect--folded))
             (inhibit-read-only t))
        (when (and (lispm-sidecar-live-p)
                   (not (plist-get lispm-inspect--ledger :loading))
                   (or (null lispm-inspect--ledger)
                       (not (equal lispm-inspect--ledger-key (lispm-inspect--key agent)))))
          (lispm-inspect--ask-ledger buffer))
        (lispm-inspect--fill agent)
        (dolist (section folded)
          (when-let* ((pos (lispm-inspect--find 'lispm-inspect-heading section)))
            (save-excursion (goto-char pos) (org-fold-subtree t))))
        (goto-char (lispm-inspect--restore here))
        (pcase-dolist (`(,window . ,place) places)
          (set-window-point window (lispm-inspect--restore place)))
        (set-buffer-modified-p nil)))))

(defun lispm-inspect--schedule (buffer &optional now)
  "Redraw BUFFER soon, or at once if NOW, while it is in a window.
Otherwise mark it stale: it is redrawn when shown again."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (cond ((not (get-buffer-window buffer t))
             (setq lispm-inspect--stale t))
            (now (lispm-inspect-redraw buffer))
            ((not lispm-inspect--timer)
             (setq lispm-inspect--timer
                   (run-with-timer lispm-inspect-redraw-delay nil
                                   (lambda ()
                                     (when (buffer-live-p buffer)
                                       (with-current-buffer buffer
                                         (setq lispm-inspect--timer nil))
                                       (lispm-inspect--schedule buffer t))))))))))

(defun lispm-inspect--buffers ()
  "Return the inspector buffers."
  (cl-remove-if-not (lambda (buffer)
                      (eq (buffer-local-value 'major-mode buffer) 'lispm-inspect-mode))
                    (buffer-list)))

(defun lispm-inspect-changed (&rest _)
  "Redraw every inspector soon: something of the agents changed."
  (mapc #'lispm-inspect--schedule (lispm-inspect--buffers)))

(defun lispm-inspect--shown (window)
  "Redraw the inspector now in WINDOW if it went stale while out of sight."
  (let ((buffer (window-buffer window)))
    (when (and (eq (buffer-local-value 'major-mode buffer) 'lispm-inspect-mode)
               (buffer-local-value 'lispm-inspect--stale buffer))
      (lispm-inspect--schedule buffer))))

(add-hook 'lispm-agents-changed-hook #'lispm-inspect-changed)
(add-hook 'lispm-approvals-changed-hook #'lispm-inspect-changed)

;;; Inspecting an agent from its presentation

(cl-defmethod lispm-present-inspect ((_type (eql 'agent)) id)
  "Inspect the agent named ID."
  (lispm-inspect (lispm-agents-presented id)))

(cl-defmethod lispm-present-follow :around ((_type (eql 'agent)) id &optional arg)
  "With ARG, inspect the agent named ID instead of showing its buffer."
  (if arg
      (lispm-inspect (lispm-agents-presented id))
    (cl-call-next-method)))

(cl-defmethod lispm-present-type-actions :around ((_type (eql 'agent)) id)
  "Offer inspecting the agent named ID, next to showing it."
  (let ((actions (cl-call-next-method)))
    (append (list (car actions)
                  (cons "Inspect" (lambda () (lispm-inspect (lispm-agents-presented id)))))
            (cdr actions))))

;;; Commands

(defun lispm-inspect--item-or-error (&rest types)
  "Return the item at point if it is of one of TYPES, else signal a `user-error'."
  (let ((item (lispm-inspect--item-at)))
    (unless (memq (car item) types)
      (user-error "Nothing here to act on that way"))
    item))

(defun lispm-inspect--approval-here ()
  "Return the id of the approval at point: an approval's, or a waiting call's."
  (let ((item (lispm-inspect--item-or-error 'approval 'call)))
    (if (eq (car item) 'approval)
        (cadr item)
      (or (get-text-property (point) 'lispm-inspect-approval)
          (user-error "This call waits for no approval")))))

(defun lispm-inspect-allow ()
  "Allow, once, the approval at point."
  (interactive nil lispm-inspect-mode)
  (lispm-approvals-allow (lispm-inspect--approval-here)))

(defun lispm-inspect-deny (reason)
  "Deny the approval at point, with REASON for the agent to read."
  (interactive (progn (lispm-inspect--approval-here)
                      (list (lispm-approvals-read-reason)))
               lispm-inspect-mode)
  (lispm-approvals-deny (lispm-inspect--approval-here) reason))

(defun lispm-inspect-revoke ()
  "Take back the session grant at point: that kind asks again."
  (interactive nil lispm-inspect-mode)
  (let ((kind (cadr (lispm-inspect--item-or-error 'grant)))
        (agent lispm-inspect--agent))
    (lispm-policy-revoke agent kind)
    (lispm-inspect-redraw)
    (message "LispM: %s's grant of %s revoked; it asks again" (lispm-actor-name agent) kind)))

(defun lispm-inspect-revert-turn ()
  "Take back what the turn at point changed (the turn of a call, on a call)."
  (interactive nil lispm-inspect-mode)
  (let ((item (lispm-inspect--item-or-error 'turn 'call)))
    (lispm-inspect-revert lispm-inspect--agent
                          (if (eq (car item) 'turn) (cadr item) (nth 2 item)))))

(defun lispm-inspect-withdraw ()
  "Take back the message at point, still queued: its sender is told.
Only a plain message can be withdrawn; a request or a reply is waited on."
  (interactive nil lispm-inspect-mode)
  (let ((id (cadr (lispm-inspect--item-or-error 'message)))
        (buffer (current-buffer)))
    (unless (natnump id)
      (user-error "This line is no message of the ledger"))
    (lispm-sidecar-async-request
     'lispm/withdraw (list :message_id id)
     :on-success (lambda (result)
                   (message "LispM: %s" (plist-get result :text))
                   (when (buffer-live-p buffer)
                     (with-current-buffer buffer (lispm-inspect-refresh))))
     :on-error (lambda (text) (message "LispM: not withdrawn: %s" text)))))

(defun lispm-inspect-refresh ()
  "Draw the inspector afresh and ask the ledger again."
  (interactive nil lispm-inspect-mode)
  (setq lispm-inspect--ledger-key nil)
  (when (lispm-sidecar-live-p)
    (setq lispm-inspect--ledger (plist-put (copy-sequence lispm-inspect--ledger) :loading nil)))
  (lispm-inspect-redraw))

(defun lispm-inspect--agent-name-at-point ()
  "Return the name of the agent whose link is at point, or that of its line."
  (or (when-let* ((context (org-element-context))
                  ((eq (org-element-type context) 'link))
                  (path (org-element-property :raw-link context))
                  ((string-match "\\`lispm:agent:\\(.+\\)\\'" path)))
        (match-string 1 path))
      (when-let* ((item (lispm-inspect--item-at))
                  ((eq (car item) 'agent)))
        (cadr item))))

(defun lispm-inspect--read-agent ()
  "Return the agent to inspect: the one at point, or one read from the user."
  (or (and (derived-mode-p 'tabulated-list-mode)
           (when-let* ((id (tabulated-list-get-id)))
             (and (stringp id) (lispm-agent-get id))))
      (and (derived-mode-p 'lispm-inspect-mode)
           (when-let* ((name (lispm-inspect--agent-name-at-point)))
             (lispm-agent-get name)))
      (let* ((names (mapcar #'lispm-actor-name (lispm-agents)))
             (here (cl-find (current-buffer) (lispm-agents) :key #'lispm-actor-home-buffer)))
        (unless names
          (user-error "No agent is running"))
        (completing-read (format-prompt "Inspect agent" (and here (lispm-actor-name here)))
                         names nil t nil nil (and here (lispm-actor-name here))))))

(defvar-keymap lispm-inspect-mode-map
  :doc "Keymap of the LispM inspector."
  "a" #'lispm-inspect-allow
  "d" #'lispm-inspect-deny
  "r" #'lispm-inspect-revert-turn
  "k" #'lispm-inspect-revoke
  "w" #'lispm-inspect-withdraw
  "i" #'lispm-inspect
  "g" #'lispm-inspect-refresh
  "q" #'quit-window
  "RET" #'org-open-at-point)

(define-derived-mode lispm-inspect-mode org-mode "LispM-Inspect"
  "Major mode of LispM's inspector: one agent, whole, a heading per part.
It follows the agent live.  On an item:
\\<lispm-inspect-mode-map>
\\[lispm-inspect-allow] allows the approval, \\[lispm-inspect-deny] denies it.
\\[lispm-inspect-revert-turn] reverts the turn (an own agent's).
\\[lispm-inspect-withdraw] withdraws a plain message still queued for it.
\\[lispm-inspect-revoke] revokes the session grant at point.
\\[lispm-inspect] inspects the agent of the link at point.
\\[org-open-at-point] follows the link at point.
\\[lispm-inspect-refresh] redraws and asks the ledger again; \\[quit-window] quits.

\\{lispm-inspect-mode-map}"
  (setq buffer-read-only t
        truncate-lines t)
  (setq-local org-element-use-cache nil)
  (setq-local revert-buffer-function (lambda (&rest _) (lispm-inspect-refresh)))
  (add-hook 'window-buffer-change-functions #'lispm-inspect--shown nil t)
  (setq header-line-format
        (substitute-command-keys
         "\\<lispm-inspect-mode-map>\\[lispm-inspect-allow] allow  \\[lispm-inspect-deny] deny  \
\\[lispm-inspect-revert-turn] revert turn  \\[lispm-inspect] inspect  \
\\[org-open-at-point] follow  \\[lispm-inspect-refresh] refresh  \\[quit-window] quit")))

;;;###autoload
(defun lispm-inspect (agent)
  "Show AGENT, an actor or its name, whole, in its inspector buffer; return it.
Interactively, the agent on the line of the agent list, or of the
link at point in an inspector, else one read from the user."
  (interactive (list (lispm-inspect--read-agent)))
  (let* ((actor (if (lispm-actor-p agent)
                    agent
                  (or (lispm-agent-get agent) (user-error "No agent named %s" agent))))
         (buffer (get-buffer-create (lispm-inspect-buffer-name actor))))
    (with-current-buffer buffer
      (unless (derived-mode-p 'lispm-inspect-mode)
        (let ((org-inhibit-startup t))
          (lispm-inspect-mode)))
      (let ((new (not (eq lispm-inspect--agent actor))))
        (when new
          (setq lispm-inspect--agent actor
                lispm-inspect--ledger nil
                lispm-inspect--ledger-key nil))
        (lispm-inspect-redraw buffer)
        (when new (goto-char (point-min)))))
    (pop-to-buffer buffer)
    buffer))

(provide 'lispm-inspect)
;;; lispm-inspect.el ends here
