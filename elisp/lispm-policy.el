;;; lispm-policy.el --- What agents may do: allow, ask or deny  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Every tool call an agent makes through LispM (and every action of
;; LispM's own agent) has a kind: `read', `introspect', `edit',
;; `shell', `eval', `network', `message', `remember' or `mcp' (the
;; list is `lispm-policy-kind-alist').  The policy says, per role and per
;; kind, whether it runs at once (`allow'), waits for the user (`ask',
;; see `lispm-approvals'), or is refused (`deny'):
;;
;;   (lispm-policy-decide AGENT ROLE KIND TARGET)  => allow, ask or deny
;;
;; A role's rules are tried in order and the first that matches wins.  A
;; rule may be narrowed to paths: it then applies only when every file
;; the call touches lies in the agent's folder and matches one of its
;; glob patterns (for a tool of an MCP server, its SERVER/TOOL name
;; must match; for a fetch, the URL's host).  No matching rule means
;; `ask'.
;;
;; The user may allow a kind for one agent for the rest of its session
;; (`lispm-policy-grant'): `ask' becomes `allow' for that agent and kind;
;; `deny' stays `deny'.  A grant belongs to that very agent (its name and
;; serial), so a later agent of the same name does not inherit it, and
;; it goes when the agent leaves the registry.
;;
;; A helper (an actor whose `lispm-actor-caller' started it) never does
;; more than its caller: its decision is the stricter (deny over ask
;; over allow) of its role's and its caller's, up the chain of callers,
;; without the callers' session grants; a helper whose folder is not
;; within its caller's is denied everything.  Only the helper's own
;; grant may then lift an `ask'.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-agents)

;;; Options

(defgroup lispm-policy nil
  "What LispM's agents may do without asking."
  :group 'lispm
  :prefix "lispm-policy-")

(defconst lispm-policy-kind-alist
  '((read . "reading files, buffers and Emacs's state")
    (introspect . "reading Emacs's documentation, source and manuals")
    (edit . "changing files")
    (shell . "running shell commands")
    (eval . "evaluating Emacs Lisp")
    (network . "reaching the network")
    (message . "messages to other agents")
    (remember . "writing LispM's own memory files")
    (plan . "writing the agent's own plan in its session")
    (mcp . "calling the tools of the user's MCP servers"))
  "Every kind of action, in order, with what it covers.
This is the one list of them: each tool has one of these kinds (the
`:kind' of `lispm-define-tool'), and the policy's rules, session grants
and audit name them.")

(defconst lispm-policy-kinds (mapcar #'car lispm-policy-kind-alist)
  "The kinds of action a policy rule can name, from `lispm-policy-kind-alist'.")

(defconst lispm-policy-decisions '(allow ask deny)
  "The decisions a policy rule can give.")

(define-widget 'lispm-policy-kind 'lazy
  "A kind of action, one of `lispm-policy-kinds'."
  :tag "Kind"
  :type `(choice :tag "Kind"
                 ,@(mapcar (pcase-lambda (`(,kind . ,what))
                             `(const :tag ,(format "%s (%s)" kind what) ,kind))
                           lispm-policy-kind-alist)))

(define-widget 'lispm-policy-decision 'lazy
  "A decision of a policy rule, one of `lispm-policy-decisions'."
  :tag "Decision"
  :type `(choice :tag "Decision"
                 ,@(mapcar (lambda (decision) `(const ,decision)) lispm-policy-decisions)))

(define-widget 'lispm-policy-rule 'lazy
  "A rule of a LispM policy role: (KIND DECISION [PATTERNS])."
  :tag "Rule"
  :type '(choice
          (list :tag "For every path" lispm-policy-kind lispm-policy-decision)
          (list :tag "Only for some paths" lispm-policy-kind lispm-policy-decision
                (repeat :tag "Glob patterns, relative to the agent's folder"
                        string))))

(defcustom lispm-policy-roles
  '((default (read allow) (introspect allow) (message allow) (remember allow) (plan allow)
             (edit ask) (shell ask) (eval ask) (network ask) (mcp ask)))
  "What each role may do: an alist from a role, a symbol, to its rules.
A rule is (KIND DECISION [PATTERNS]):

  KIND      one of `lispm-policy-kinds': `read', `introspect',
            `edit', `shell', `eval', `network', `message',
            `remember', `mcp'
  DECISION  `allow' (runs at once), `ask' (waits for the user's
            approval) or `deny' (refused with an error)
  PATTERNS  optional glob patterns, relative to the agent's folder,
            such as \"docs/**\" or \"*.md\": the rule then applies only
            if every file of the action lies in the agent's folder and
            matches one of them.  `*' and `?' stay within a directory,
            `**' crosses directories, and a pattern without a slash
            matches the file's name in any directory.  For a tool of
            an MCP server, the patterns match SERVER/TOOL instead:
            \"github/*\" is every tool of the server github, and
            \"get_*\" (no slash) a tool of that name on any server;
            for `network', the URL's host: \"*.gnu.org\".

The first rule of the role that matches wins; with none, the answer is
`ask'.  A role named here wins over a role's Org file of that name
\(see `lispm-roles-directories'); a role in neither uses
`lispm-policy-default-role''s rules."
  :type '(alist :key-type (symbol :tag "Role")
                :value-type (repeat :tag "Rules, first match wins" lispm-policy-rule)))

(defcustom lispm-policy-default-role 'default
  "The role of an agent no one gave a role to, a key of `lispm-policy-roles'."
  :type 'symbol)

(define-error 'lispm-policy-error "LispM policy error" 'lispm-error)

;; KIND BY REASON: the kind of action refused; who refused it, `policy'
;; (a rule of the actor's role), `user' (who was asked) or `withdrawn'
;; (the question went before anyone answered, e.g. its actor left);
;; REASON, the user's words or why it was withdrawn, a string or nil.
(lispm-define-error 'lispm-policy-denied "Denied" '(lispm-error lispm-for-the-model) -32056)

(defun lispm-policy-denial (kind by reason &optional role)
  "Return the `lispm-policy-denied' condition of refusing KIND, BY whom, REASON.
Its message reads as the refused agent does: \"edit denied by the
user: not that file\", \"eval denied by the policy of role default\"
\(ROLE names the role), \"shell withdrawn: codex closed\"."
  (let ((reason (and (stringp reason)
                     (not (member (string-trim reason) '("" "denied by the user")))
                     reason)))
    (list 'lispm-policy-denied
          (concat (pcase by
                    ('policy (format "%s denied by the policy of role %s" kind
                                     (or role lispm-policy-default-role)))
                    ('user (format "%s denied by the user" kind))
                    (_ (format "%s withdrawn" kind)))
                  (if reason (concat ": " reason) ""))
          kind by reason)))

;;; Paths

(defun lispm-policy--glob-regexp (pattern)
  "Return a regexp matching a relative file name against glob PATTERN.
`**' matches any run of characters, slashes included (and `**/' also
nothing at all); `*' any run without a slash; `?' one character that is
not a slash.  A PATTERN without a slash matches a name in any directory."
  (let ((i 0)
        (n (length pattern))
        (parts nil))
    (while (< i n)
      (let ((c (aref pattern i)))
        (cond
         ((and (eq c ?*) (< (1+ i) n) (eq (aref pattern (1+ i)) ?*))
          (if (and (< (+ i 2) n) (eq (aref pattern (+ i 2)) ?/))
              (progn (push "\\(?:.*/\\)?" parts) (cl-incf i 3))
            (push ".*" parts)
            (cl-incf i 2)))
         ((eq c ?*) (push "[^/]*" parts) (cl-incf i))
         ((eq c ??) (push "[^/]" parts) (cl-incf i))
         (t (push (regexp-quote (string c)) parts) (cl-incf i)))))
    (concat (if (string-search "/" pattern) "\\`" "\\`\\(?:.*/\\)?")
            (apply #'concat (nreverse parts))
            "\\'")))

(defun lispm-policy--relative (agent file)
  "Return FILE relative to AGENT's folder, or nil if it lies outside it.
Symbolic links are followed, so a link out of the folder is outside."
  (let* ((folder (file-name-as-directory
                  (file-truename (lispm-actor-folder agent))))
         (true (file-truename (expand-file-name file folder))))
    (when (string-prefix-p folder true)
      (substring true (length folder)))))

(defun lispm-policy--paths-match-p (agent patterns files)
  "Return non-nil if FILES are some, all in AGENT's folder, all in PATTERNS."
  (and files
       (cl-every
        (lambda (file)
          (when-let* ((relative (lispm-policy--relative agent file)))
            (cl-some (lambda (pattern)
                       (let ((case-fold-search nil))
                         (string-match-p (lispm-policy--glob-regexp pattern) relative)))
                     patterns)))
        files)))

;;; Rules

;; lispm-roles.el reads roles from Org files and adds its reader here.
;; It needs this file (the kinds, the decisions, `lispm-policy-decide'
;; for the stricter-of rule), so this file cannot require it back: the
;; hook keeps the policy whole without it, and takes file roles when
;; it is loaded.
(defvar lispm-policy-role-functions nil
  "Functions that find a role `lispm-policy-roles' does not name.
Each is called with the role, a symbol, and the folder of the agent
acting (or nil), and returns the role's entry (ROLE . RULES), as in
`lispm-policy-roles', or nil if it does not know ROLE.  The first
entry found wins.")

(defun lispm-policy--role-entry (role folder)
  "Return the entry (ROLE . RULES) of ROLE for an agent in FOLDER, or nil.
`lispm-policy-roles' wins over `lispm-policy-role-functions'."
  (or (assq role lispm-policy-roles)
      (run-hook-with-args-until-success 'lispm-policy-role-functions role folder)))

(defun lispm-policy-rules (role &optional folder)
  "Return the rules of ROLE, or of `lispm-policy-default-role' if it has none.
A role is looked up in `lispm-policy-roles', then by
`lispm-policy-role-functions' (the roles' Org files, for an agent
working in FOLDER)."
  (cdr (or (lispm-policy--role-entry role folder)
           (lispm-policy--role-entry lispm-policy-default-role folder))))

(defun lispm-policy--names-match-p (patterns names)
  "Return non-nil if NAMES are some, each matching one of the glob PATTERNS."
  (and names
       (cl-every (lambda (name)
                   (cl-some (lambda (pattern)
                              (let ((case-fold-search nil))
                                (string-match-p (lispm-policy--glob-regexp pattern) name)))
                            patterns))
                 names)))

(defun lispm-policy--rule-decision (agent rule kind target)
  "Return RULE's decision for AGENT's action of KIND on TARGET, if it matches.
A rule narrowed by patterns matches TARGET's `:names' (a tool of an
MCP server, as SERVER/TOOL; a URL's host) when it has some, else its
`:files'."
  (pcase-let ((`(,rule-kind ,decision ,patterns) rule)
              (names (plist-get target :names)))
    (when (and (eq rule-kind kind)
               (or (null patterns)
                   (if names
                       (lispm-policy--names-match-p patterns names)
                     (lispm-policy--paths-match-p agent patterns
                                                  (plist-get target :files)))))
      (if (memq decision lispm-policy-decisions) decision 'ask))))

(defun lispm-policy--check-args (agent kind)
  "Signal a `lispm-policy-error' unless AGENT is an actor and KIND a symbol."
  (unless (lispm-actor-p agent)
    (signal 'lispm-policy-error (list "Not an actor" agent)))
  (unless (and kind (symbolp kind))
    (signal 'lispm-policy-error (list "Not a kind of action" kind))))

(defun lispm-policy-rule-decision (agent role kind target)
  "Return what ROLE's rules say of AGENT's action of KIND on TARGET.
Like `lispm-policy-decide', but without the session grants."
  (lispm-policy--check-args agent kind)
  (or (cl-some (lambda (rule) (lispm-policy--rule-decision agent rule kind target))
               (lispm-policy-rules (or role lispm-policy-default-role)
                                   (lispm-actor-folder agent)))
      'ask))

(defun lispm-policy-stricter (a b)
  "Return the stricter of the decisions A and B: `deny', then `ask', then `allow'."
  (dolist (decision (list a b))
    (unless (memq decision lispm-policy-decisions)
      (signal 'lispm-policy-error (list "Not a decision" decision))))
  (if (> (length (memq a lispm-policy-decisions)) (length (memq b lispm-policy-decisions)))
      b
    a))

(defun lispm-policy-helper-folder-ok-p (caller folder)
  "Return non-nil if a helper of CALLER, an actor, may work in FOLDER.
FOLDER must be the caller's folder or within it, symbolic links
followed."
  (and (stringp folder)
       (file-in-directory-p (file-truename folder)
                            (file-truename (lispm-actor-folder caller)))))

(defun lispm-policy-chain-decision (agent role kind target &optional caller)
  "Return the decision on AGENT's KIND on TARGET in ROLE, under its callers.
CALLER is the actor that started AGENT as a helper, by default AGENT's
`lispm-actor-caller'.  Without one, this is ROLE's rule decision
\(`lispm-policy-rule-decision').  With one, it is the stricter
\(`lispm-policy-stricter') of ROLE's rule decision and CALLER's own
decision by this function, in CALLER's role and under its callers in
turn, so a helper never does more than anyone up its chain; and
`deny' if AGENT's folder is not within CALLER's.  No session grant
counts here: a grant is the user's word for that one agent
\(`lispm-policy-grant'), and a helper is another agent, so what its
caller may do unasked, it still asks for."
  (lispm-policy--check-args agent kind)
  (let ((seen nil))
    (cl-labels ((decide (agent role caller)
                  (when (memq caller seen)
                    (signal 'lispm-policy-error
                            (list "A cycle of callers" (lispm-actor-name caller))))
                  (when caller (push caller seen))
                  (let ((mine (lispm-policy-rule-decision agent role kind target)))
                    (cond ((null caller) mine)
                          ((not (lispm-policy-helper-folder-ok-p caller (lispm-actor-folder agent)))
                           'deny)
                          (t (lispm-policy-stricter
                              mine (decide caller (lispm-actor-role caller)
                                           (lispm-actor-caller caller))))))))
      (decide agent role (or caller (lispm-actor-caller agent))))))

(defun lispm-policy-granted-decision (agent kind decision)
  "Return DECISION on AGENT's action of KIND, lifted by AGENT's session grant.
An `ask' becomes `allow' if the user allowed KIND for AGENT for its
session (`lispm-policy-grant'); `allow' and `deny' stay."
  (if (and (eq decision 'ask) (lispm-policy-granted-p agent kind))
      'allow
    decision))

(defun lispm-policy-denier (agent role kind target)
  "Return who denies AGENT, in ROLE, KIND on TARGET: (ACTOR . ROLE), or nil.
ACTOR is AGENT itself when its own role's rule denies, else the first
caller up its chain whose decision (in its role) denies, or whose
folder AGENT's is not within; nil if no one up the chain denies."
  (let ((actor agent) (actor-role (or role lispm-policy-default-role)) (found nil))
    (while (and actor (not found))
      (let ((caller (lispm-actor-caller actor)))
        (cond ((eq (lispm-policy-rule-decision actor actor-role kind target) 'deny)
               (setq found (cons actor actor-role)))
              ((and caller (not (lispm-policy-helper-folder-ok-p
                                 caller (lispm-actor-folder actor))))
               (setq found (cons caller (lispm-actor-role caller))))
              (t (setq actor caller
                       actor-role (and caller (lispm-actor-role caller)))))))
    found))

(defun lispm-policy-decide (agent role kind target)
  "Return `allow', `ask' or `deny' for AGENT, in ROLE, doing KIND on TARGET.
KIND is one of `lispm-policy-kinds'.  TARGET is a plist describing the
action, such as (:files (\"/abs/a.el\") :command \"ls\" :form \"(+ 1 2)\");
its :files, absolute or relative to AGENT's folder, are what rules
narrowed by path patterns look at.  ROLE nil means
`lispm-policy-default-role'.  The rules are in `lispm-policy-roles'
\(and the roles' files).  For a helper, an actor with a caller, the
decision is never more permissive than its caller's, up the chain of
callers (`lispm-policy-chain-decision').  Then an `ask' becomes
`allow' if the user allowed KIND for AGENT itself for its session
\(`lispm-policy-grant'); a `deny' stays."
  (lispm-policy-granted-decision
   agent kind (lispm-policy-chain-decision agent role kind target)))

;;; Rules the user adds from an approval

(declare-function custom-file "cus-edit" (&optional no-error))

(defun lispm-policy-add-rule (role rule &optional folder)
  "Put RULE first among ROLE's rules in `lispm-policy-roles', and save it.
A role from an Org file (for an agent in FOLDER) is copied into
`lispm-policy-roles' first, its rules kept, since a role named there
wins over its file.  The option is saved with `customize-save-variable';
where Emacs cannot save (an `emacs -Q'), it is set for this Emacs
only.  Return where it was written: a file name, or nil for this
Emacs only."
  (unless (and (consp rule) (memq (car rule) lispm-policy-kinds)
               (memq (cadr rule) lispm-policy-decisions))
    (signal 'lispm-policy-error (list "Not a rule" rule)))
  (let* ((rules (cons rule (remove rule (lispm-policy-rules role folder))))
         (roles (cons (cons role rules)
                      (cl-remove role lispm-policy-roles :key #'car))))
    (require 'cus-edit)
    (if-let* ((file (custom-file t)))
        (let ((inhibit-message t))
          (customize-save-variable 'lispm-policy-roles roles)
          file)
      (customize-set-variable 'lispm-policy-roles roles)
      nil)))

;;; Session grants

(cl-defstruct (lispm-policy--grant (:constructor lispm-policy--grant-make) (:copier nil))
  "A kind of action the user allowed one agent for the rest of its session."
  (agent nil :documentation "The agent.")
  (name nil :documentation "The agent's name when granted.")
  (serial nil :documentation "The agent's serial when granted.")
  (kind nil :documentation "The kind of action allowed.")
  (registered nil :documentation "Non-nil if the agent was in the registry then."))

(defvar lispm-policy--grants nil
  "The session grants in force.")

(defun lispm-policy--grant-of-p (grant agent)
  "Return non-nil if GRANT was given to AGENT: same name and same serial."
  (and (equal (lispm-policy--grant-name grant) (lispm-actor-name agent))
       (eql (lispm-policy--grant-serial grant) (lispm-actor-serial agent))))

(defun lispm-policy--grant-live-p (grant)
  "Return non-nil if GRANT's agent has not left.
An agent that was never in the registry (LispM's own, say) keeps its
grants until `lispm-policy-revoke'."
  (let ((agent (lispm-policy--grant-agent grant)))
    (or (not (lispm-policy--grant-registered grant))
        (and (lispm-agent-live-p agent)
             (lispm-policy--grant-of-p grant agent)))))

(defun lispm-policy-grant (agent kind)
  "Allow AGENT actions of KIND that would ask, for the rest of its session.
Actions its role denies stay denied."
  (lispm-policy--check-args agent kind)
  (unless (lispm-policy-granted-p agent kind)
    (push (lispm-policy--grant-make :agent agent
                                    :name (lispm-actor-name agent)
                                    :serial (lispm-actor-serial agent)
                                    :kind kind
                                    :registered (lispm-agent-live-p agent))
          lispm-policy--grants))
  nil)

(defun lispm-policy-granted-p (agent kind)
  "Return non-nil if the user allowed AGENT actions of KIND for its session."
  (cl-some (lambda (grant)
             (and (eq (lispm-policy--grant-kind grant) kind)
                  (lispm-policy--grant-of-p grant agent)
                  (lispm-policy--grant-live-p grant)))
           lispm-policy--grants))

(defun lispm-policy-grants (agent)
  "Return the kinds the user allowed AGENT for its session."
  (cl-loop for grant in lispm-policy--grants
           when (and (lispm-policy--grant-of-p grant agent)
                     (lispm-policy--grant-live-p grant))
           collect (lispm-policy--grant-kind grant)))

(defun lispm-policy-revoke (agent &optional kind)
  "Take back AGENT's session grant of KIND, or all its grants if KIND is nil."
  (setq lispm-policy--grants
        (cl-remove-if (lambda (grant)
                        (and (lispm-policy--grant-of-p grant agent)
                             (or (null kind) (eq kind (lispm-policy--grant-kind grant)))))
                      lispm-policy--grants)))

(defun lispm-policy--forget-gone ()
  "Drop the grants of agents that have left the registry."
  (setq lispm-policy--grants
        (cl-remove-if-not #'lispm-policy--grant-live-p lispm-policy--grants)))

(add-hook 'lispm-agents-changed-hook #'lispm-policy--forget-gone)

(provide 'lispm-policy)
;;; lispm-policy.el ends here
