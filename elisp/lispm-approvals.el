;;; lispm-approvals.el --- The user approves or denies what agents ask to do  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; When the policy (`lispm-policy-decide') says `ask', the action waits
;; for the user:
;;
;;   (lispm-approvals-request AGENT ROLE KIND TARGET CALLBACK &optional TITLE)
;;
;; returns an id at once and never blocks; the agent's tool call stays
;; open meanwhile.  The approval shows in `*LispM approvals*', one
;; section each, newest last: who asks (agent and role), the kind, and
;; what: an edit's diff, a shell command with its folder, an eval form
;; pretty-printed, an Org file (a skill an agent writes) as Org shows
;; it.  Whatever the agent sent, showing it costs little: a line longer
;; than `lispm-approvals-line-limit' characters is cut, and so is the
;; text after `lispm-approvals-max-lines' lines, each cut with a note;
;; `v' (`lispm-approvals-view-whole') shows the whole in a buffer of its
;; own.  While anything waits, the mode line says so (lispm-notice.el
;; follows `lispm-approvals-changed-hook').  Later CALLBACK is called
;; exactly once with one of:
;;
;;   (:decision allow)                    allowed once
;;   (:decision allow :for-session t)     allowed, and this kind stays
;;                                        allowed for this agent
;;   (:decision deny :reason "...")       denied; the reason goes back
;;                                        to the agent as the tool's error
;;   (:decision withdrawn :reason "...")  the agent left before anyone
;;                                        decided (or the caller withdrew)
;;
;; Every decision is sent to the sidecar's ledger as `lispm/audit'.
;; `lispm-approvals-authorize' puts policy and approvals together: what
;; the policy allows or denies is answered at once, the rest is asked.
;; It is the decision step of the one call pipeline, `lispm-calls-invoke'.

;;; Code:

(require 'cl-lib)
(require 'button)
(require 'diff-mode)
(require 'pp)
(require 'tabulated-list)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)
(require 'lispm-policy)
(require 'lispm-present)
(require 'lispm-review)

;;; Options

(defgroup lispm-approvals nil
  "Approving what LispM's agents ask to do."
  :group 'lispm
  :prefix "lispm-approvals-")

(defcustom lispm-approvals-display-action
  '((display-buffer-reuse-window display-buffer-in-side-window)
    (side . bottom)
    (slot . 0)
    (window-height . 0.35))
  "How the approvals buffer is shown when an approval arrives.
A `display-buffer' action; the buffer is shown, never selected."
  :type '(cons (repeat function) (alist :key-type symbol :value-type sexp)))

(defcustom lispm-approvals-hide-when-done t
  "Non-nil means hide the approvals buffer's windows once nothing waits."
  :type 'boolean)

(defcustom lispm-approvals-max-lines 300
  "The most lines of an approval's diff or text that its section shows.
Past them, a note says how many more there are, and
\\<lispm-approvals-mode-map>\\[lispm-approvals-view-whole] shows them all in a buffer of their own."
  :type 'natnum)

(defconst lispm-approvals-line-limit 500
  "The most characters of one line that an approval's section shows.
A longer line keeps its start and a note of how many characters
follow, so that no line an agent sends, however long, costs much to
show; \\<lispm-approvals-mode-map>\\[lispm-approvals-view-whole] shows it whole.")

(defcustom lispm-approvals-audit-automatic '(edit shell eval network)
  "Kinds whose actions the policy allows at once are still audited.
Every tool call goes through `lispm-approvals-authorize', which records
in the ledger every action of these kinds that runs without asking;
denials and the user's answers are always recorded."
  :type '(repeat lispm-policy-kind))

(defconst lispm-approvals-buffer-name "*LispM approvals*"
  "The name of the buffer of pending approvals.")

(lispm-define-error 'lispm-approvals-error "LispM approval error" 'lispm-error -32055)

(defvar org-inhibit-startup)

(defvar lispm-approvals-changed-hook nil
  "Hook run whenever an approval arrives or goes.")

(defvar lispm-approvals-asked-functions nil
  "Functions called with each new approval, once it shows in the buffer.")

(defvar lispm-approvals-decided-functions nil
  "Functions called with an approval, its DECISION and REASON, once answered.
DECISION is `allow', `allow-session', `deny' or `withdrawn'; they are
called after the approval's own callback.")

;;; Approvals

(cl-defstruct (lispm-approval (:constructor lispm-approval--make) (:copier nil))
  "An action an agent asked to do, waiting for the user's decision."
  (id nil :documentation "A string unique in this session: A1, A2, ...")
  (agent nil :documentation "The asking agent.")
  (role nil :documentation "The agent's role, a symbol.")
  (kind nil :documentation "The kind of action, such as `edit'.")
  (target nil :documentation "What the action is, a plist: :files, :diff,
:command, :directory, :form, :url, :org, ...")
  (title nil :documentation "The caller's one-line name of it, or nil.")
  (callback nil :documentation "Called once with the decision's plist.")
  (time nil :documentation "When it was asked, a float time.")
  (registered nil :documentation "Non-nil if the agent was in the registry then.")
  (review nil :documentation "For an edit of one file, its `lispm-review':
the user decides it hunk by hunk.")
  (widened nil :documentation "For a shell command, what the user allowed
beyond its sandbox: nil, `network' or `off'."))

(defvar lispm-approvals--pending nil
  "The pending approvals, oldest first.")

(defvar lispm-approvals--made (make-hash-table :test 'eq :weakness 'key)
  "What the section of each approval shows of its parts, made once.
An alist of (PART SHOWN . CUT) for each approval: the sections are
drawn again whenever an approval comes or goes.")

(defvar lispm-approvals--counter 0
  "The number of the last approval asked for.")

(defconst lispm-approvals-withdrawn-shown 5
  "How many of the approvals withdrawn lately the approvals buffer names.")

(defvar lispm-approvals--withdrawn nil
  "The approvals withdrawn lately, newest first: (APPROVAL . REASON).
At most `lispm-approvals-withdrawn-shown' of them.")

(defun lispm-approvals-pending ()
  "Return the pending approvals, oldest first."
  (copy-sequence lispm-approvals--pending))

(defun lispm-approvals-get (id)
  "Return the pending approval whose id is ID, or nil."
  (cl-find id lispm-approvals--pending :key #'lispm-approval-id :test #'equal))

(defun lispm-approvals--of-agent-p (approval agent)
  "Return non-nil if APPROVAL was asked by AGENT (same name and serial)."
  (let ((asker (lispm-approval-agent approval)))
    (or (eq asker agent)
        (and (equal (lispm-actor-name asker) (lispm-actor-name agent))
             (eql (lispm-actor-serial asker) (lispm-actor-serial agent))))))

(defun lispm-approvals-for-agent (agent)
  "Return the pending approvals of AGENT, oldest first."
  (cl-remove-if-not (lambda (approval) (lispm-approvals--of-agent-p approval agent))
                    lispm-approvals--pending))

(defun lispm-approvals-count (&optional agent)
  "Return how many approvals wait; only AGENT's if AGENT is non-nil."
  (length (if agent (lispm-approvals-for-agent agent) lispm-approvals--pending)))

;;; Describing an action

(defun lispm-approvals--one-line (string max)
  "Return STRING on one line, cut to MAX characters, without its properties."
  ;; Only the start that can show is worked on: STRING may be megabytes.
  (let* ((length (length string))
         (start (or (string-match-p "[^ \t\n\r]" string) length))
         (end (min length (+ start (* 2 max))))
         (line (string-trim (replace-regexp-in-string
                             "[ \t\n\r]+" " " (substring-no-properties string start end)))))
    (truncate-string-to-width
     (if (and (< end length) (string-match-p "[^ \t\n\r]" string end))
         (concat line "...")
       line)
     max nil nil "...")))

(defun lispm-approvals--relative (agent file)
  "Return FILE as AGENT would name it: relative to its folder if inside it."
  (let ((folder (lispm-actor-folder agent))
        (file (expand-file-name file (lispm-actor-folder agent))))
    (if (and folder (file-in-directory-p file folder))
        (file-relative-name file folder)
      (abbreviate-file-name file))))

(defun lispm-approvals-asker (approval)
  "Return who asks APPROVAL, for the user: \"NAME (role ROLE)\".
A helper is \"NAME (role ROLE, helper of CALLER)\", and a helper's
helper names the whole chain: \"helper of CALLER of ITS-CALLER\"."
  (let ((agent (lispm-approval-agent approval))
        (chain nil))
    (let ((caller (lispm-actor-caller agent)))
      (while (and caller (not (memq caller chain)))
        (push caller chain)
        (setq caller (lispm-actor-caller caller))))
    (format "%s (role %s%s)" (lispm-actor-name agent)
            (or (lispm-approval-role approval) lispm-policy-default-role)
            (if chain
                (concat ", helper of "
                        (mapconcat #'lispm-actor-name (nreverse chain) " of "))
              ""))))

(defun lispm-approvals-summary (approval)
  "Return a one-line description of APPROVAL's action, for the ledger."
  (let* ((target (lispm-approval-target approval))
         (agent (lispm-approval-agent approval))
         (files (mapconcat (lambda (f) (lispm-approvals--relative agent f))
                           (plist-get target :files) " ")))
    (lispm-approvals--one-line
     (or (lispm-approval-title approval)
         (pcase (lispm-approval-kind approval)
           ('shell (format "shell: %s" (or (plist-get target :command) "")))
           ('eval (format "eval: %s" (or (plist-get target :form) "")))
           ('mcp (format "mcp: %s" (string-join (plist-get target :names) " ")))
           (kind (string-trim (format "%s %s" kind files)))))
     200)))

(defun lispm-approvals--fontify (text mode)
  "Return TEXT fontified as MODE, a major mode function, would show it.
Of MODE's work only the faces are kept, so that the text shows as it
is: nothing of it hidden (as Org hides a link's brackets) or made
active.  TEXT's own properties stay: it is text made to be shown,
such as `lispm-approvals--cut' returns, never an agent's."
  (with-temp-buffer
    (insert text)
    (when (eq mode #'org-mode)
      (require 'org)
      ;; Org reads, or fetches, the file a #+SETUPFILE: names as it sets
      ;; up a buffer: this copy, same length, names none.
      (goto-char (point-min))
      (let ((case-fold-search t))
        (while (re-search-forward "^[ \t]*#\\+setupfile\\(:\\)" nil t)
          (replace-match " " t t nil 1))))
    ;; No folding, images or LaTeX run at Org's startup either.
    (let ((org-inhibit-startup t))
      (delay-mode-hooks (funcall mode)))
    ;; Fontify the diff alone, unrefined: never look for the files it
    ;; names.
    (lispm-agent-text-setup)
    (setq-local diff-font-lock-prettify nil)
    (ignore-errors (font-lock-ensure))
    (let ((shown (copy-sequence text))
          (pos (point-min)))
      (while (< pos (point-max))
        (let ((next (next-single-property-change pos 'face nil (point-max))))
          (when-let* ((face (get-text-property pos 'face)))
            (put-text-property (1- pos) (1- next) 'face face shown))
          (setq pos next)))
      shown)))

(defun lispm-approvals--creates-p (diff)
  "Return non-nil if DIFF, a unified diff, is that of a new file's text."
  (string-match-p "^@@ -0,0 " diff))

(defun lispm-approvals--pretty-form (form)
  "Return the Lisp text FORM pretty-printed, or FORM if it does not read.
FORM longer than `lispm-pretty-print-limit' is returned as it is."
  (if (> (length form) lispm-pretty-print-limit)
      form
    (condition-case nil
        (let ((pos 0) (out nil))
          (while (string-match-p "[^ \t\n\r]" (substring form pos))
            (pcase-let ((`(,sexp . ,end) (read-from-string form pos)))
              (push (pp-to-string sexp) out)
              (setq pos end)))
          (if out (mapconcat #'identity (nreverse out) "") form))
      (error form))))

;;; Cutting what is shown to size

(defconst lispm-approvals--parts
  '((:diff . "diff") (:org . "file") (:command . "command") (:form . "form") (:text . "text"))
  "The keys of a target whose text an approval shows, and what each is called.")

(defun lispm-approvals--count-lines (text pos)
  "Return how many lines TEXT has from POS on."
  (with-temp-buffer
    (insert (substring-no-properties text pos))
    (count-lines (point-min) (point-max))))

(defun lispm-approvals--note (count unit)
  "Return the note that COUNT more UNITs were cut, such as \"[… 2 more lines]\"."
  (propertize (format "[… %d more %s%s]" count unit (if (= count 1) "" "s"))
              'lispm-approvals-note t))

(defun lispm-approvals--cut (text)
  "Return (SHOWN . CUT): TEXT cut to fit an approval's section, and if cut.
SHOWN has none of TEXT's properties.  A line longer than
`lispm-approvals-line-limit' keeps its start and a note of how many
characters follow; after `lispm-approvals-max-lines' lines, a last
line says how many more there are.  The notes have the property
`lispm-approvals-note'.  CUT is non-nil if anything was left out.
This takes time in proportion to what is shown, not to TEXT's length."
  (let ((total (length text))
        (limit lispm-approvals-line-limit)
        (pos 0) (lines 0) (pieces nil) (cut nil))
    (while (and (< pos total) (< lines lispm-approvals-max-lines))
      (let* ((newline (string-search "\n" text pos))
             (end (or newline total))
             (next (if newline (1+ newline) total)))
        (if (<= (- end pos) limit)
            (push (substring-no-properties text pos next) pieces)
          (push (substring-no-properties text pos (+ pos limit)) pieces)
          (push (lispm-approvals--note (- end pos limit) "character") pieces)
          (when newline (push "\n" pieces))
          (setq cut t))
        (setq pos next
              lines (1+ lines))))
    (when (< pos total)
      (push (lispm-approvals--note (lispm-approvals--count-lines text pos) "line") pieces)
      (setq cut t))
    (cons (apply #'concat (nreverse pieces)) cut)))

(defun lispm-approvals--cut-line (text)
  "Return TEXT, a line, cut as `lispm-approvals--cut' cuts it."
  (car (lispm-approvals--cut text)))

;;; Hunks

(defface lispm-approvals-hunk-accepted '((t :inherit success))
  "Face of the mark of a hunk the user accepted.")

(defface lispm-approvals-hunk-rejected '((t :inherit shadow :strike-through t))
  "Face of a hunk the user rejected.")

(defun lispm-approvals--hunk-prefix (state)
  "Return the line prefix of a hunk in STATE, telling it."
  (pcase state
    ('accepted (concat "  " (propertize "✓" 'face 'lispm-approvals-hunk-accepted) " "))
    ('rejected (concat "  " (propertize "✗" 'face 'error) " "))
    (_ "    ")))

(defun lispm-approvals--mark-hunks (review from to)
  "Mark each hunk of REVIEW shown between FROM and TO with its number and state."
  (save-excursion
    (goto-char from)
    (let ((hunks (lispm-review-hunks review))
          (start (and (re-search-forward "^@@ " to t) (match-beginning 0))))
      (while (and start hunks)
        (goto-char (1+ start))
        (let* ((hunk (pop hunks))
               (end (if (re-search-forward "^@@ " to t) (match-beginning 0) to))
               (prefix (lispm-approvals--hunk-prefix (lispm-review-hunk-state hunk))))
          (add-text-properties start end
                               (list 'lispm-approvals-hunk (lispm-review-hunk-number hunk)
                                     'line-prefix prefix 'wrap-prefix prefix))
          (when (eq (lispm-review-hunk-state hunk) 'rejected)
            (add-face-text-property start end 'lispm-approvals-hunk-rejected))
          (setq start (and (< end to) end)))))))

(defun lispm-approvals--hunk-at-point ()
  "Return (APPROVAL . NUMBER), the hunk at point, or signal a `user-error'."
  (let ((approval (lispm-approvals--pending-or-error nil))
        (number (get-text-property (point) 'lispm-approvals-hunk)))
    (unless (and number (lispm-approval-review approval))
      (user-error "No hunk here; %s"
                  (substitute-command-keys
                   "\\<lispm-approvals-mode-map>\\[lispm-approvals-allow] allows the whole")))
    (cons approval number)))

(defun lispm-approvals--hunks-changed (approval)
  "Show APPROVAL's hunks anew, as the user decided or edited them."
  (setf (alist-get :diff (gethash approval lispm-approvals--made) nil t) nil)
  (lispm-approvals--render))

(defun lispm-approvals--decide-hunk (state)
  "Make the hunk at point STATE, and answer its approval once all are decided.
The approval is then allowed with the hunks accepted, or, if none is,
denied."
  (pcase-let* ((`(,approval . ,number) (lispm-approvals--hunk-at-point))
               (review (lispm-approval-review approval)))
    (lispm-review-set review number state)
    (lispm-approvals--hunks-changed approval)
    (if (and state (lispm-review-decided-p review))
        (lispm-approvals-allow approval)
      (when state
        (when-let* ((next (next-single-property-change
                           (point) 'lispm-approvals-hunk nil
                           (next-single-property-change (point) 'lispm-approval nil (point-max))))
                    ((get-text-property next 'lispm-approvals-hunk)))
          (goto-char next))))))

(defun lispm-approvals-accept-hunk ()
  "Accept the hunk at point, and go to the next.
Once every hunk of the edit is accepted or rejected, the edit is
allowed with the accepted hunks (denied if none)."
  (interactive)
  (lispm-approvals--decide-hunk 'accepted))

(defun lispm-approvals-reject-hunk ()
  "Reject the hunk at point: it will not be written.  Then go to the next.
Once every hunk of the edit is accepted or rejected, the edit is
allowed with the accepted hunks (denied if none)."
  (interactive)
  (lispm-approvals--decide-hunk 'rejected))

(defun lispm-approvals-undecide-hunk ()
  "Take back the decision on the hunk at point."
  (interactive)
  (lispm-approvals--decide-hunk nil))

(defvar-local lispm-approvals--editing nil
  "In a buffer editing a hunk: (APPROVAL . NUMBER).")

(defvar-keymap lispm-approvals-hunk-edit-mode-map
  :doc "Keymap of a buffer editing a hunk of an approval."
  "C-c C-c" #'lispm-approvals-hunk-edit-finish
  "C-c C-k" #'lispm-approvals-hunk-edit-abort)

(define-minor-mode lispm-approvals-hunk-edit-mode
  "Minor mode of the text a hunk of an edit writes, which the user edits.
\\<lispm-approvals-hunk-edit-mode-map>\\[lispm-approvals-hunk-edit-finish] makes it the hunk's, accepted;
\\[lispm-approvals-hunk-edit-abort] leaves the hunk as it was."
  :lighter " Hunk")

(defun lispm-approvals-edit-hunk ()
  "Edit what the hunk at point writes, before accepting it.
The lines it writes (its context included) show in a buffer of their
own, in the file's mode;
\\<lispm-approvals-hunk-edit-mode-map>\\[lispm-approvals-hunk-edit-finish] there makes them the hunk's, and accepts it."
  (interactive)
  (pcase-let* ((`(,approval . ,number) (lispm-approvals--hunk-at-point))
               (review (lispm-approval-review approval))
               (buffer (get-buffer-create (format "*LispM %s hunk %d*"
                                                  (lispm-approval-id approval) number))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (lispm-review-new-text review number)))
      (let ((buffer-file-name (lispm-review-file review)))
        (ignore-errors (delay-mode-hooks (set-auto-mode t))))
      (setq lispm-approvals--editing (cons approval number))
      (lispm-approvals-hunk-edit-mode 1)
      (setq header-line-format
            (substitute-command-keys
             (format "Hunk %d of %s's edit.  \\<lispm-approvals-hunk-edit-mode-map>\
\\[lispm-approvals-hunk-edit-finish] use it and accept  \\[lispm-approvals-hunk-edit-abort] leave it"
                     number (lispm-actor-name (lispm-approval-agent approval)))))
      (set-buffer-modified-p nil)
      (goto-char (point-min)))
    (pop-to-buffer buffer)))

(defun lispm-approvals-hunk-edit-finish ()
  "Make the text of this buffer what its hunk writes, and accept the hunk."
  (interactive)
  (pcase-let ((`(,approval . ,number) (or lispm-approvals--editing
                                           (user-error "Not editing a hunk"))))
    (unless (memq approval lispm-approvals--pending)
      (user-error "This approval is answered already"))
    (lispm-review-edit-hunk (lispm-approval-review approval) number
                            (save-restriction (widen) (buffer-substring-no-properties
                                                       (point-min) (point-max))))
    (lispm-approvals--hunks-changed approval)
    (quit-window t)
    (message "LispM: hunk %d of %s is yours now, and accepted" number
             (lispm-approval-id approval))))

(defun lispm-approvals-hunk-edit-abort ()
  "Leave the hunk this buffer edits as it was."
  (interactive)
  (quit-window t))

(defun lispm-approvals-ediff ()
  "Merge the edit at point by hand in Ediff, the file's text against the proposal.
Buffer B holds the proposal (with the hunks decided so far: rejected
ones left out); whatever B holds when Ediff quits becomes the
proposal, every hunk of it accepted, and the approval waits for
\\<lispm-approvals-mode-map>\\[lispm-approvals-allow]."
  (interactive)
  (let* ((approval (lispm-approvals--pending-or-error nil))
         (review (or (lispm-approval-review approval)
                     (user-error "Only an edit of one file can be merged by hand")))
         (file (lispm-review-file review))
         (old (or (lispm-edit-file-text file) ""))
         (proposal (condition-case err (lispm-review-apply review old)
                     (lispm-error (user-error "The file changed since: %s"
                                              (lispm-error-message err)))))
         (name (file-name-nondirectory file))
         (a (get-buffer-create (format "*LispM %s %s (now)*" (lispm-approval-id approval) name)))
         (b (get-buffer-create (format "*LispM %s %s (proposed)*" (lispm-approval-id approval)
                                       name))))
    (require 'ediff)
    (pcase-dolist (`(,buffer . ,text) (list (cons a old) (cons b proposal)))
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (erase-buffer)
          (insert text))
        (let ((buffer-file-name file))
          (ignore-errors (delay-mode-hooks (set-auto-mode t))))))
    (with-current-buffer a (setq buffer-read-only t))
    (ediff-buffers
     a b
     (list (lambda ()
             (add-hook 'ediff-quit-hook
                       (lambda () (lispm-approvals--merged approval old b a))
                       nil t))))))

(defun lispm-approvals--merged (approval old merged shown)
  "Make MERGED's text APPROVAL's proposal, against OLD; kill MERGED and SHOWN."
  (when (and (memq approval lispm-approvals--pending) (buffer-live-p merged))
    (let* ((review (lispm-approval-review approval))
           (text (with-current-buffer merged
                   (save-restriction (widen)
                                     (buffer-substring-no-properties (point-min) (point-max))))))
      (condition-case err
          (progn (lispm-review-replace review (lispm-edit-diff old text "merged"))
                 (lispm-approvals--hunks-changed approval)
                 (message "LispM: %s's proposal is your merge now; %s allows it"
                          (lispm-approval-id approval)
                          (substitute-command-keys
                           "\\<lispm-approvals-mode-map>\\[lispm-approvals-allow]")))
        (lispm-error (message "LispM: the merge is not used: %s" (lispm-error-message err))))))
  (run-at-time 0 nil (lambda ()
                       (dolist (buffer (list merged shown))
                         (when (buffer-live-p buffer) (kill-buffer buffer))))))

;;; The buffer

(defvar-keymap lispm-approvals-mode-map
  :doc "Keymap of the LispM approvals buffer."
  :parent special-mode-map
  "a" #'lispm-approvals-allow
  "S" #'lispm-approvals-allow-session
  "A" #'lispm-approvals-allow-always
  "d" #'lispm-approvals-deny
  "s" #'lispm-approvals-accept-hunk
  "k" #'lispm-approvals-reject-hunk
  "u" #'lispm-approvals-undecide-hunk
  "e" #'lispm-approvals-edit-hunk
  "E" #'lispm-approvals-ediff
  "N" #'lispm-approvals-allow-network
  "U" #'lispm-approvals-allow-unconfined
  "n" #'lispm-approvals-next
  "p" #'lispm-approvals-previous
  "RET" #'lispm-approvals-visit
  "v" #'lispm-approvals-view-whole
  "g" #'lispm-approvals-refresh
  "TAB" #'forward-button
  "<backtab>" #'backward-button)

(define-derived-mode lispm-approvals-mode special-mode "LispM-Approvals"
  "Major mode of the actions agents ask to do, waiting for the user.
Each section is one approval, oldest first.  On a section:
\\<lispm-approvals-mode-map>
\\[lispm-approvals-allow] allows it once.
\\[lispm-approvals-allow-session] allows it, and this kind for this agent until it closes.
\\[lispm-approvals-allow-always] allows it, and its like from now on, by a rule in your policy.
\\[lispm-approvals-deny] denies it, with a reason the agent reads.
A shell command runs in the sandbox (`lispm-sandbox-shell-mode'), as
its section says: \\[lispm-approvals-allow-network] allows it once with the network,
\\[lispm-approvals-allow-unconfined] once outside the sandbox.
\\[lispm-approvals-visit] visits the file under point, else the agent's terminal.
\\[lispm-approvals-view-whole] shows the whole diff or text, where the section shows it cut.
\\[lispm-approvals-next] and \\[lispm-approvals-previous] move between approvals.

An edit of one file is decided hunk by hunk, as magit stages: on a
hunk, \\[lispm-approvals-accept-hunk] accepts it, \\[lispm-approvals-reject-hunk] rejects it, \\[lispm-approvals-undecide-hunk] takes the decision back,
\\[lispm-approvals-edit-hunk] edits what it writes (and accepts it);
\\[lispm-approvals-ediff] merges the whole by hand in Ediff.  Once every
hunk is decided, the edit is allowed with the hunks accepted (denied
if none is); \\[lispm-approvals-allow] before that writes every hunk not rejected.
The agent is told which hunks were written and which were not.

\\{lispm-approvals-mode-map}"
  (setq buffer-read-only t
        truncate-lines nil)
  (setq-local revert-buffer-function (lambda (&rest _) (lispm-approvals--render)))
  (setq header-line-format
        (substitute-command-keys
         "\\<lispm-approvals-mode-map>\\[lispm-approvals-allow] once  \
\\[lispm-approvals-allow-session] session  \\[lispm-approvals-allow-always] always  \
\\[lispm-approvals-deny] deny  hunk: \\[lispm-approvals-accept-hunk] accept  \
\\[lispm-approvals-reject-hunk] reject  \\[lispm-approvals-edit-hunk] edit  \
\\[lispm-approvals-ediff] ediff  \\[lispm-approvals-next]/\\[lispm-approvals-previous] move  \
\\[lispm-approvals-view-whole] whole")))

(defface lispm-approvals-heading '((t :inherit bold))
  "Face of the first line of an approval.")

(defface lispm-approvals-agent '((t :inherit font-lock-function-name-face))
  "Face of the asking agent's name.")

(defface lispm-approvals-kind '((t :inherit warning))
  "Face of the kind of action asked for.")

(defface lispm-approvals-note '((t :inherit shadow))
  "Face of the notes that say what of an approval's text is not shown.")

(defun lispm-approvals--button (label action help)
  "Insert a button LABEL to call ACTION with no argument; HELP describes it."
  (insert-button label 'action (lambda (_button) (funcall action))
                 'follow-link t 'help-echo help)
  (insert " "))

(defun lispm-approvals--insert-block (text)
  "Insert TEXT, indented, ending in a newline."
  (let ((start (point)))
    (insert text)
    (unless (bolp) (insert "\n"))
    (add-text-properties start (point) '(line-prefix "    " wrap-prefix "    "))))

(defun lispm-approvals--make-part (text show prepare)
  "Return (SHOWN . CUT): TEXT made fit for a section, and whether it was cut.
PREPARE, if non-nil, is a function that makes of TEXT what is cut to
size (see `lispm-approvals--cut'); SHOW, if non-nil, a function that
makes of that what is shown, as `lispm-approvals--fontify' does."
  (pcase-let ((`(,shown . ,cut) (lispm-approvals--cut (if prepare (funcall prepare text) text))))
    (let ((shown (if show (funcall show shown) shown))
          (pos 0))
      (while (setq pos (text-property-not-all pos (length shown) 'lispm-approvals-note nil shown))
        (let ((end (next-single-property-change pos 'lispm-approvals-note shown (length shown))))
          (add-face-text-property pos end 'lispm-approvals-note nil shown)
          (setq pos end)))
      (cons shown cut))))

(defun lispm-approvals--insert-part (approval part text &optional show prepare)
  "Insert TEXT, the PART of APPROVAL's target, in the section of APPROVAL.
PART is a key of `lispm-approvals--parts'.  TEXT, or what it returns
if it is a function, is made into what is shown by
`lispm-approvals--make-part', with SHOW and PREPARE, once for each
approval and part.  After a cut text, a button shows it whole.
Return where TEXT as shown ends."
  (pcase-let* ((start (point))
               (block-end nil)
               (`(,shown . ,cut)
                (or (alist-get part (gethash approval lispm-approvals--made))
                    (setf (alist-get part (gethash approval lispm-approvals--made))
                          (lispm-approvals--make-part (if (functionp text) (funcall text) text)
                                                      show prepare)))))
    (lispm-approvals--insert-block shown)
    (setq block-end (point))
    (when cut
      (let ((name (alist-get part lispm-approvals--parts)))
        (insert "  Cut to fit: ")
        (lispm-approvals--button (format "[Show the whole %s]" name)
                                 (lambda () (lispm-approvals-view-whole approval part))
                                 (format "Show all of the %s in a buffer of its own" name))
        (insert (substitute-command-keys
                 "(or \\<lispm-approvals-mode-map>\\[lispm-approvals-view-whole])\n"))))
    (add-text-properties start (point) (list 'lispm-approvals-part part
                                             'lispm-approvals-cut cut))
    block-end))

(defun lispm-approvals--insert-section (approval)
  "Insert the section of APPROVAL at point."
  (let* ((start (point))
         (agent (lispm-approval-agent approval))
         (target (lispm-approval-target approval))
         (kind (lispm-approval-kind approval)))
    (insert (propertize (format "%s  " (lispm-approval-id approval)) 'face 'shadow)
            (let* ((name (lispm-actor-name agent))
                   (asker (concat (lispm-present-string 'agent name)
                                  (substring (lispm-approvals-asker approval)
                                             (length name)))))
              (add-face-text-property 0 (length name) 'lispm-approvals-agent nil asker)
              asker)
            " asks for "
            (propertize (symbol-name kind) 'face 'lispm-approvals-kind))
    (when-let* ((title (lispm-approval-title approval)))
      (insert ": " (lispm-approvals--one-line title 120)))
    (add-face-text-property start (point) 'lispm-approvals-heading t)
    (insert (format-time-string "  %H:%M:%S" (lispm-approval-time approval)) "\n")
    (insert "  ")
    (lispm-approvals--button "[Allow once]"
                             (lambda () (lispm-approvals-allow approval))
                             "Let the agent do this, this once")
    (lispm-approvals--button "[Allow for session]"
                             (lambda () (lispm-approvals-allow-session approval))
                             (format "Let %s do any %s its role asks about until it closes"
                                     (lispm-actor-name agent) kind))
    (lispm-approvals--button "[Always...]"
                             (lambda () (funcall-interactively #'lispm-approvals-allow-always approval))
                             "Allow this, and its like from now on, by a rule in your policy")
    (lispm-approvals--button "[Deny...]"
                             (lambda () (call-interactively
                                         (lambda (reason)
                                           (interactive (list (lispm-approvals-read-reason)))
                                           (lispm-approvals-deny approval reason))))
                             "Refuse, with a reason the agent reads")
    (insert "\n")
    (dolist (file (plist-get target :files))
      (let ((absolute (expand-file-name file (lispm-actor-folder agent))))
        (insert "  File: "
                (propertize (lispm-approvals--cut-line
                             (lispm-approvals--relative agent absolute))
                            'lispm-approvals-file absolute
                            'face 'link
                            'help-echo "RET: visit this file")
                "\n")))
    (when-let* ((url (plist-get target :url)))
      (insert "  URL: " (propertize (lispm-approvals--cut-line url)
                                    'face 'font-lock-string-face)
              "\n"))
    (when-let* ((diff (plist-get target :diff)))
      ;; A new Org file shows as itself, below: its diff would repeat it.
      (unless (and (plist-get target :org) (lispm-approvals--creates-p diff))
        (let* ((review (lispm-approval-review approval))
               (from (point))
               (to (lispm-approvals--insert-part
                    approval :diff (if review (lambda () (lispm-review-diff review)) diff)
                    (lambda (shown) (lispm-approvals--fontify shown #'diff-mode)))))
          (when review
            (lispm-approvals--mark-hunks review from to)))
        (when (plist-get target :org)
          (insert "  The whole file, as it would be:\n"))))
    (when-let* ((org (plist-get target :org)))
      (lispm-approvals--insert-part approval :org org
                                    (lambda (shown) (lispm-approvals--fontify shown #'org-mode))))
    (when-let* ((command (plist-get target :command)))
      (let ((directory (or (plist-get target :directory) (lispm-actor-folder agent))))
        (insert "  In: " (propertize (lispm-approvals--cut-line
                                      (abbreviate-file-name directory))
                                     'lispm-approvals-file directory
                                     'face 'link
                                     'help-echo "RET: visit this folder")
                "\n")
        (when-let* ((sandbox (plist-get target :sandbox)))
          (insert "  Runs: "
                  (propertize sandbox 'face (if (string-prefix-p "UNCONFINED" sandbox)
                                                'font-lock-warning-face
                                              'shadow))
                  (substitute-command-keys
                   (propertize "  (\\<lispm-approvals-mode-map>\\[lispm-approvals-allow-network] \
with the network, \\[lispm-approvals-allow-unconfined] unconfined)" 'face 'shadow))
                  "\n"))
        (lispm-approvals--insert-part
         approval :command command
         (lambda (shown) (concat (propertize "$ " 'face 'shadow)
                                 (propertize shown 'face 'font-lock-string-face))))))
    (when-let* ((form (plist-get target :form)))
      (lispm-approvals--insert-part
       approval :form form (lambda (shown) (lispm-approvals--fontify shown #'emacs-lisp-mode))
       #'lispm-approvals--pretty-form))
    (when-let* ((touches (plist-get target :touches)))
      (insert "  It touches, as far as LispM can tell:\n")
      (dolist (line touches)
        (insert "    " (propertize (lispm-approvals--cut-line line) 'face 'font-lock-warning-face)
                "\n")))
    (when-let* ((text (plist-get target :text)))
      (lispm-approvals--insert-part approval :text text))
    (insert "\n")
    (put-text-property start (point) 'lispm-approval approval)))

(defun lispm-approvals--position-of (approval)
  "Return where APPROVAL's section begins in the current buffer, or nil."
  (let ((pos (point-min)) found)
    (while (and (not found) pos (< pos (point-max)))
      (if (eq (get-text-property pos 'lispm-approval) approval)
          (setq found pos)
        (setq pos (next-single-property-change pos 'lispm-approval))))
    found))

(defun lispm-approvals--render ()
  "Fill the approvals buffer, if it exists, keeping each window on its approval."
  (when-let* ((buffer (get-buffer lispm-approvals-buffer-name)))
    (with-current-buffer buffer
      (let* ((shown (lispm-approvals--shown))
             (places (mapcar (lambda (window)
                               (cons window (lispm-approvals--place (window-point window))))
                             (get-buffer-window-list buffer nil t)))
             (here (lispm-approvals--place (point)))
             (inhibit-read-only t))
        (erase-buffer)
        (if (null lispm-approvals--pending)
            (insert (propertize "Nothing waits for your approval.\n" 'face 'shadow))
          (insert (propertize (format "%d waiting for your approval:\n\n"
                                      (length lispm-approvals--pending))
                              'face 'shadow))
          (mapc #'lispm-approvals--insert-section lispm-approvals--pending))
        (lispm-approvals--insert-withdrawn)
        (cl-flet ((place (approval offset)
                    (let ((start (and approval (lispm-approvals--position-of approval))))
                      (cond
                       (start (min (+ start offset) (point-max)))
                       ;; Answered: go to the approval that followed it,
                       ;; else the one before.
                       ((and approval (memq approval shown))
                        (let* ((after (cdr (memq approval shown)))
                               (before (reverse (cl-subseq shown 0 (cl-position approval shown))))
                               (next (cl-find-if (lambda (a) (memq a lispm-approvals--pending))
                                                 (append after before))))
                          (or (and next (lispm-approvals--position-of next))
                              (point-min))))
                       (t (or (lispm-approvals--first-section-start) (point-min)))))))
          (goto-char (place (car here) (cdr here)))
          (pcase-dolist (`(,window ,approval . ,offset) places)
            (set-window-point window (place approval offset))))))))

(defun lispm-approvals--insert-withdrawn ()
  "Insert a line for each approval withdrawn lately, which nothing answers now.
Its agent left before anyone decided: the line says so, and why; it is
no approval's section, so no key here allows it."
  (when lispm-approvals--withdrawn
    (insert "\n")
    (pcase-dolist (`(,approval . ,reason) lispm-approvals--withdrawn)
      (insert (propertize
               (format "%s  withdrawn: %s's %s: %s (%s); nothing of it runs\n"
                       (lispm-approval-id approval) (lispm-approvals-asker approval)
                       (lispm-approval-kind approval)
                       (lispm-approvals-summary approval) reason)
               'face 'lispm-approvals-note)))))

(defun lispm-approvals--shown ()
  "Return the approvals shown in the current buffer, in order."
  (let ((pos (point-min)) (shown nil))
    (while (and pos (< pos (point-max)))
      (when-let* ((approval (get-text-property pos 'lispm-approval)))
        (push approval shown))
      (setq pos (next-single-property-change pos 'lispm-approval)))
    (nreverse shown)))

(defun lispm-approvals--place (pos)
  "Return (APPROVAL . OFFSET): the section at POS and how far into it POS is."
  (let ((approval (get-text-property pos 'lispm-approval)))
    (cons approval
          (if approval (- pos (or (lispm-approvals--position-of approval) pos)) 0))))

(defun lispm-approvals--first-section-start ()
  "Return where the first approval's section begins, or nil."
  (let ((pos (if (get-text-property (point-min) 'lispm-approval)
                 (point-min)
               (next-single-property-change (point-min) 'lispm-approval))))
    (and pos (< pos (point-max)) pos)))

(defun lispm-approvals--buffer ()
  "Return the approvals buffer, created and filled."
  (let ((buffer (get-buffer lispm-approvals-buffer-name)))
    (unless buffer
      (setq buffer (get-buffer-create lispm-approvals-buffer-name))
      (with-current-buffer buffer (lispm-approvals-mode)))
    (lispm-approvals--render)
    buffer))

(defun lispm-approvals--hide ()
  "Hide the approvals buffer's windows, now that nothing waits."
  (when-let* ((buffer (get-buffer lispm-approvals-buffer-name)))
    (dolist (window (get-buffer-window-list buffer nil t))
      (when (window-live-p window)
        (ignore-errors (quit-restore-window window 'bury))))))

;;; The ledger

(defun lispm-approvals--audit (agent role kind what decision &optional reason)
  "Record in the ledger that AGENT, in ROLE, asked KIND WHAT; DECISION, REASON.
DECISION is a symbol: `allow', `allow-session', `deny' or `withdrawn'."
  (condition-case err
      (lispm-sidecar-notify
       'lispm/audit
       (list :agent (lispm-actor-name agent)
             :role (symbol-name (or role lispm-policy-default-role))
             :kind (symbol-name kind)
             :what what
             :decision (symbol-name decision)
             :reason reason
             :time (float-time)))
    (error (message "LispM: could not record the decision in the ledger: %s"
                    (error-message-string err)))))

;;; Asking and answering

(defun lispm-approvals--changed ()
  "Show the change of the pending approvals in the buffer, and announce it."
  (lispm-approvals--render)
  (when (and lispm-approvals-hide-when-done (null lispm-approvals--pending))
    (lispm-approvals--hide))
  (run-hooks 'lispm-approvals-changed-hook))

(defun lispm-approvals-request (agent role kind target callback &optional title)
  "Ask the user whether AGENT, in ROLE, may do KIND on TARGET; return an id.
KIND is one of `lispm-policy-kinds'.  TARGET is a plist: :files (file
names), :diff (a unified diff of an edit), :command and :directory
\(a shell command and where it runs), :form (Lisp text to evaluate),
:url (the URL a call would fetch),
:org (the whole text an Org file would have: shown as Org shows it,
instead of the diff when the file is new), :text (anything else to
show).  TITLE is a one-line name of the action, such
as \"edit_file notes.el\".

This returns at once, never waiting for the user.  Later CALLBACK is
called exactly once with a plist: (:decision allow), (:decision allow
:for-session t), (:decision deny :reason REASON), or (:decision
withdrawn :reason REASON) when AGENT leaves before anyone decided."
  (unless (lispm-actor-p agent)
    (lispm-signal 'lispm-approvals-error (list agent) "Not an actor: %S" agent))
  (unless (and kind (symbolp kind))
    (lispm-signal 'lispm-approvals-error (list kind) "Not a kind of action: %S" kind))
  (unless (functionp callback)
    (lispm-signal 'lispm-approvals-error (list callback) "Not a function: %S" callback))
  (unless (listp target)
    (lispm-signal 'lispm-approvals-error (list target) "Not a plist: %S" target))
  (let ((approval (lispm-approval--make
                   :id (format "A%d" (cl-incf lispm-approvals--counter))
                   :agent agent :role (or role lispm-policy-default-role)
                   :kind kind :target target :title title :callback callback
                   :time (float-time)
                   :registered (lispm-agent-live-p agent)
                   :review (lispm-approvals--review kind target))))
    (setq lispm-approvals--pending (append lispm-approvals--pending (list approval)))
    (if (eq (lispm-actor-state agent) 'exited)
        ;; Gone already: withdraw it, but later, as promised.
        (run-at-time 0 nil #'lispm-approvals--withdraw-gone)
      (let ((buffer (lispm-approvals--buffer)))
        (lispm-approvals--changed)
        (ignore-errors (display-buffer buffer lispm-approvals-display-action))
        (message "LispM: %s asks for %s: %s (see %s)"
                 (lispm-approvals-asker approval) kind (lispm-approvals-summary approval)
                 lispm-approvals-buffer-name)
        (lispm-approvals--tell 'lispm-approvals-asked-functions approval)))
    (lispm-approval-id approval)))

(defconst lispm-approvals-review-limit (* 8 1024 1024)
  "The longest diff, in characters, whose edit is decided hunk by hunk.
A longer one is decided whole: splitting it costs Emacs a millisecond
a megabyte, as the approval arrives.")

(defun lispm-approvals--review (kind target)
  "Return the review of an edit of KIND on TARGET, hunk by hunk, or nil.
Only an edit of one file whose diff reads, and is no longer than
`lispm-approvals-review-limit', has one; a new Org file shows whole,
and is decided whole."
  (when-let* (((eq kind 'edit))
              ((not (plist-get target :org)))
              (diff (plist-get target :diff))
              ((<= (length diff) lispm-approvals-review-limit))
              (files (plist-get target :files))
              ((null (cdr files))))
    (lispm-review-make (car files) diff)))

(defun lispm-approvals--resolve (approval decision &optional reason)
  "Answer APPROVAL with DECISION, a symbol, and REASON; call its callback once.
DECISION is `allow', `allow-session', `deny' or `withdrawn'.  Return
nil if APPROVAL no longer waits."
  (when (memq approval lispm-approvals--pending)
    (setq lispm-approvals--pending (delq approval lispm-approvals--pending))
    (when (eq decision 'withdrawn)
      (push (cons approval reason) lispm-approvals--withdrawn)
      (setq lispm-approvals--withdrawn
            (take lispm-approvals-withdrawn-shown lispm-approvals--withdrawn))
      (message "LispM: approval %s of %s withdrawn: %s" (lispm-approval-id approval)
               (lispm-actor-name (lispm-approval-agent approval)) reason))
    (let ((agent (lispm-approval-agent approval))
          (kind (lispm-approval-kind approval)))
      (when (eq decision 'allow-session)
        (lispm-policy-grant agent kind))
      (lispm-approvals--audit agent (lispm-approval-role approval) kind
                              (lispm-approvals-summary approval) decision reason)
      (lispm-approvals--changed)
      (let ((result (pcase decision
                      ('allow (lispm-approvals--allowed approval (list :decision 'allow)))
                      ('allow-session (lispm-approvals--allowed
                                       approval (list :decision 'allow :for-session t)))
                      ('deny (list :decision 'deny :reason reason))
                      ('withdrawn (list :decision 'withdrawn :reason reason)))))
        (condition-case err
            (funcall (lispm-approval-callback approval) result)
          (error (message "LispM: answering %s's approval %s failed: %s"
                          (lispm-actor-name agent) (lispm-approval-id approval)
                          (error-message-string err)))))
      (lispm-approvals--tell 'lispm-approvals-decided-functions approval decision reason)
      (when (eq decision 'allow-session)
        (lispm-approvals--settle-granted agent kind))
      t)))

(defun lispm-approvals--allowed (approval answer)
  "Return ANSWER, allowing APPROVAL, with `:review' if its hunks changed.
And with `:sandbox' if the user widened a shell command's sandbox."
  (let ((review (lispm-approval-review approval))
        (widened (lispm-approval-widened approval)))
    (append answer
            (and review (lispm-review-changed-p review) (list :review review))
            (and widened (list :sandbox widened)))))

(defun lispm-approvals--tell (hook approval &rest args)
  "Run HOOK's functions with APPROVAL and ARGS; report their errors."
  (condition-case err
      (apply #'run-hook-with-args hook approval args)
    (error (message "LispM: %s of approval %s failed: %s" hook
                    (lispm-approval-id approval) (error-message-string err)))))

(defun lispm-approvals--settle-granted (agent kind)
  "Allow AGENT's other waiting approvals of KIND, now that it has a grant."
  (dolist (other (lispm-approvals-for-agent agent))
    (when (and (eq (lispm-approval-kind other) kind)
               (eq (lispm-policy-decide agent (lispm-approval-role other) kind
                                        (lispm-approval-target other))
                   'allow))
      (lispm-approvals--resolve other 'allow-session))))

(defun lispm-approvals-read-reason ()
  "Read the reason of a denial from the user; an empty one is \"denied by the user\"."
  (let ((reason (string-trim (read-string "Deny, with the reason (empty: denied by the user): "))))
    (if (string-empty-p reason) "denied by the user" reason)))

(defun lispm-approvals--at-point ()
  "Return the approval of the section at point, or signal a `user-error'."
  (or (get-text-property (point) 'lispm-approval)
      (and (> (point) (point-min)) (get-text-property (1- (point)) 'lispm-approval))
      (user-error (if lispm-approvals--pending "No approval here"
                    "Nothing waits for your approval"))))

(defun lispm-approvals--pending-or-error (approval)
  "Return APPROVAL (an approval, an id, or nil: the one at point) if it waits."
  (let ((approval (cond ((null approval) (lispm-approvals--at-point))
                        ((stringp approval)
                         (or (lispm-approvals-get approval)
                             (user-error "No approval %s waits" approval)))
                        (t approval))))
    (unless (memq approval lispm-approvals--pending)
      (user-error "This approval is answered already"))
    approval))

(defun lispm-approvals--partly (approval)
  "Return how APPROVAL, an edit, is allowed only in part, or nil.
That is the summary of its hunks, if the user rejected or edited some."
  (when-let* ((review (lispm-approval-review approval))
              ((lispm-review-changed-p review)))
    (lispm-review-summary review)))

(defun lispm-approvals--all-rejected-p (approval)
  "Return non-nil if the user rejected every hunk of APPROVAL, an edit."
  (when-let* ((review (lispm-approval-review approval)))
    (not (or (lispm-review-applied review) (lispm-review-replaced review)))))

(defun lispm-approvals--allow-as (approval decision &optional reason)
  "Answer APPROVAL with DECISION, `allow' or `allow-session'; return how.
That is nil, or how the edit is allowed in part.  An edit whose every
hunk the user rejected is denied instead, and the return is `denied'.
REASON, if non-nil, goes to the ledger, with how."
  (if (lispm-approvals--all-rejected-p approval)
      (progn (lispm-approvals--resolve approval 'deny "the user rejected every hunk of the edit")
             'denied)
    (let ((partly (lispm-approvals--partly approval)))
      (lispm-approvals--resolve approval decision
                                (and (or reason partly)
                                     (string-join (delq nil (list reason partly)) "; ")))
      partly)))

(defun lispm-approvals-allow (&optional approval)
  "Allow APPROVAL, the one at point, this once.
APPROVAL may be an approval or its id.  Of an edit reviewed hunk by
hunk, what is written is the hunks not rejected, as the user edited
them; if every hunk was rejected, the edit is denied instead."
  (interactive)
  (let* ((approval (lispm-approvals--pending-or-error approval))
         (how (lispm-approvals--allow-as approval 'allow))
         (agent (lispm-actor-name (lispm-approval-agent approval))))
    (if (eq how 'denied)
        (message "LispM: denied %s's %s: you rejected every hunk" agent
                 (lispm-approval-kind approval))
      (message "LispM: allowed %s's %s%s" agent (lispm-approval-kind approval)
               (if how (format " (%s)" how) "")))))

(defun lispm-approvals-allow-session (&optional approval)
  "Allow APPROVAL, the one at point, and its kind for its agent's session.
Until the agent closes, what its role would ask of this kind runs at
once; what its role denies stays denied.  APPROVAL may be an approval
or its id."
  (interactive)
  (let ((approval (lispm-approvals--pending-or-error approval)))
    (lispm-approvals--allow-as approval 'allow-session)
    (message "LispM: allowed %s for %s until it closes" (lispm-approval-kind approval)
             (lispm-actor-name (lispm-approval-agent approval)))))

(defun lispm-approvals--widen (approval widened)
  "Allow APPROVAL, a shell command, this once, and WIDENED beyond its sandbox.
WIDENED is `network' or `off' (no sandbox); the ledger says so."
  (let ((approval (lispm-approvals--pending-or-error approval)))
    (unless (eq (lispm-approval-kind approval) 'shell)
      (user-error "Only a shell command runs in the sandbox"))
    (setf (lispm-approval-widened approval) widened)
    (lispm-approvals--resolve approval 'allow
                              (if (eq widened 'off) "allowed to run outside the sandbox"
                                "allowed the network"))
    (message "LispM: allowed %s's command, %s" (lispm-actor-name (lispm-approval-agent approval))
             (if (eq widened 'off) "outside the sandbox" "with the network"))))

(defun lispm-approvals-allow-network (&optional approval)
  "Allow APPROVAL, the shell command at point, this once, with the network.
It runs in its sandbox otherwise (see `lispm-sandbox-shell-mode')."
  (interactive)
  (lispm-approvals--widen approval 'network))

(defun lispm-approvals-allow-unconfined (&optional approval)
  "Allow APPROVAL, the shell command at point, this once, outside the sandbox.
It runs as your own shell would run it: everything you may touch, it may."
  (interactive)
  (let ((approval (lispm-approvals--pending-or-error approval)))
    (when (and (called-interactively-p 'any)
               (not (yes-or-no-p "Run this command outside the sandbox, as your own shell? ")))
      (user-error "Not allowed"))
    (lispm-approvals--widen approval 'off)))

(defun lispm-approvals-always-rule (approval)
  "Return the policy rule allowing APPROVAL's action from now on.
It is as narrow as the action lets it be: an edit or a read of these
files, these tools of an MCP server, this host; a shell command or an
evaluation, of which LispM cannot tell one from another, its whole kind."
  (let* ((kind (lispm-approval-kind approval))
         (target (lispm-approval-target approval))
         (agent (lispm-approval-agent approval))
         (patterns (pcase kind
                     ((or 'edit 'read 'remember)
                      (mapcar (lambda (file) (lispm-approvals--relative agent file))
                              (plist-get target :files)))
                     ((or 'mcp 'network) (plist-get target :names)))))
    (if patterns (list kind 'allow patterns) (list kind 'allow))))

(defun lispm-approvals-allow-always (&optional approval)
  "Allow APPROVAL, the one at point, and its like from now on, by a rule.
The rule `lispm-approvals-always-rule' gives goes first among the
rules of the asking agent's role in `lispm-policy-roles', which is
saved (see `lispm-policy-add-rule'); where, the message says.
Interactively, the rule is shown and confirmed first.  APPROVAL may
be an approval or its id."
  (interactive)
  (let* ((approval (lispm-approvals--pending-or-error approval))
         (rule (lispm-approvals-always-rule approval))
         (role (or (lispm-approval-role approval) lispm-policy-default-role)))
    (when (and (called-interactively-p 'any)
               (not (yes-or-no-p (format "Add %S to role %s's policy, for good? " rule role))))
      (user-error "Nothing added"))
    (let* ((file (lispm-policy-add-rule role rule
                                        (lispm-actor-folder (lispm-approval-agent approval))))
           (where (if file (format "saved in %s" (abbreviate-file-name file))
                    "for this Emacs only: Emacs cannot save options here")))
      (lispm-approvals--allow-as approval 'allow (format "allowed always by the rule %S" rule))
      (message "LispM: %S added to role %s in `lispm-policy-roles', %s" rule role where)
      where)))

(defun lispm-approvals-deny (&optional approval reason)
  "Deny APPROVAL, the one at point, with REASON for the agent to read.
Interactively, ask for the reason; an empty one is \"denied by the user\".
APPROVAL may be an approval or its id."
  (interactive (progn (lispm-approvals--pending-or-error nil)
                      (list nil (lispm-approvals-read-reason))))
  (let ((approval (lispm-approvals--pending-or-error approval))
        (reason (if (or (null reason) (string-empty-p (string-trim reason)))
                    "denied by the user"
                  reason)))
    (lispm-approvals--resolve approval 'deny reason)
    (message "LispM: denied %s's %s" (lispm-actor-name (lispm-approval-agent approval))
             (lispm-approval-kind approval))))

(defun lispm-approvals-decide (approval &optional deny)
  "Allow APPROVAL this once; with DENY non-nil, deny it with a reason read.
APPROVAL is an approval or its id; one answered already is a
`user-error', before any reason is read.  Every way of deciding an
approval from a session's buffer comes here: its TODO item set to
DONE or CANCELLED, the session's key on its call or on a helper's
approval in its caller's session (a prefix argument denies), and a
presentation's Allow and Deny."
  (let ((approval (lispm-approvals--pending-or-error approval)))
    (if deny
        (lispm-approvals-deny approval (lispm-approvals-read-reason))
      (lispm-approvals-allow approval))))

(defun lispm-approvals-withdraw (approval &optional reason)
  "Withdraw APPROVAL (or its id) undecided, telling its caller REASON.
Return non-nil if it was waiting."
  (let ((approval (if (stringp approval) (lispm-approvals-get approval) approval)))
    (and approval
         (lispm-approvals--resolve approval 'withdrawn (or reason "withdrawn")))))

(defun lispm-approvals--gone-p (approval)
  "Return non-nil if APPROVAL's agent has left."
  (let ((agent (lispm-approval-agent approval)))
    (or (eq (lispm-actor-state agent) 'exited)
        (and (lispm-approval-registered approval)
             (not (lispm-agent-live-p agent))))))

(defun lispm-approvals--withdraw-gone ()
  "Withdraw the approvals of agents that have left."
  (dolist (approval (copy-sequence lispm-approvals--pending))
    (when (lispm-approvals--gone-p approval)
      (lispm-approvals--resolve
       approval 'withdrawn
       (format "%s closed" (lispm-actor-name (lispm-approval-agent approval)))))))

(add-hook 'lispm-agents-changed-hook #'lispm-approvals--withdraw-gone)

;;; Policy and approvals together

(defun lispm-approvals-authorize (agent role kind target callback &optional title)
  "Decide whether AGENT, in ROLE, may do KIND on TARGET, asking if need be.
This is the decision step of the one call pipeline,
`lispm-calls-invoke', and the one place its audit rule lives.

What the policy (`lispm-policy-decide') allows or denies is answered at
once: CALLBACK is called before this returns, with (:decision allow) or
with (:decision deny :by policy :reason REASON), and this returns nil.
What it asks about goes to `lispm-approvals-request', and this returns
the approval's id; CALLBACK is called later with the user's decision
\(see `lispm-approvals-request').  TITLE names the action.

The ledger hears: every denial by the policy; every allowed action of
a kind in `lispm-approvals-audit-automatic' (a session grant included);
and every answer to a question, whatever its kind.  So each action is
recorded at most once."
  (let ((decision (lispm-policy-decide agent role kind target)))
    (pcase decision
      ('ask (lispm-approvals-request agent role kind target callback title))
      ('deny
       (pcase-let ((`(,denier . ,denier-role)
                    (or (lispm-policy-denier agent role kind target)
                        (cons agent (or role lispm-policy-default-role)))))
         (lispm-approvals-refuse agent denier-role kind target callback title
                                 (lispm-approvals--denial agent role kind denier denier-role)
                                 (unless (eq denier agent) denier))))
      (_
       (when (memq kind lispm-approvals-audit-automatic)
         (lispm-approvals--audit agent role kind
                                 (lispm-approvals--what agent role kind target title)
                                 'allow
                                 (if (lispm-policy-granted-p agent kind)
                                     "allowed for the session"
                                   "allowed by the policy")))
       (funcall callback (list :decision 'allow))
       nil))))

(defun lispm-approvals--denial (agent role kind denier denier-role)
  "Return why the policy denies AGENT, in ROLE, KIND, naming who denies.
DENIER is the actor whose policy denies, in DENIER-ROLE: AGENT itself,
or, for a helper, a caller up its chain, then named as well as the
helper."
  (if (eq denier agent)
      (format "%s is denied to %s (role %s) by LispM's policy"
              kind (lispm-actor-name agent) (or role lispm-policy-default-role))
    (format "%s is denied to %s (role %s), a helper of %s, by %s's policy (role %s)"
            kind (lispm-actor-name agent) (or role lispm-policy-default-role)
            (lispm-actor-name (lispm-actor-caller agent))
            (lispm-actor-name denier) (or denier-role lispm-policy-default-role))))

(defun lispm-approvals--what (agent role kind target title)
  "Return the ledger's line for AGENT, in ROLE, doing KIND on TARGET, named TITLE."
  (lispm-approvals-summary
   (lispm-approval--make :agent agent :role (or role lispm-policy-default-role)
                         :kind kind :target target :title title)))

(defun lispm-approvals-refuse (agent role kind target callback title reason
                                     &optional denier)
  "Refuse AGENT KIND on TARGET by the policy of ROLE, without asking anyone.
ROLE is the role that refuses: AGENT's own, or, when DENIER, a caller
up AGENT's chain, refuses, DENIER's.  The refusal goes to the ledger,
as every refusal does, under AGENT's name and ROLE, with TITLE, the
action's name, and REASON, why (naming DENIER, if any); then CALLBACK
is called, before this returns, with (:decision deny :by policy
:reason REASON :role ROLE), and `:denier' DENIER if non-nil.  Return
nil.  `lispm-approvals-authorize' refuses so what the policy denies;
the call pipeline, a tool outside the actor's role, a path outside its
folder, and what a tool or a program was refused."
  (lispm-approvals--audit agent role kind (lispm-approvals--what agent role kind target title)
                          'deny reason)
  (funcall callback (append (list :decision 'deny :by 'policy :reason reason :role role)
                            (and denier (list :denier denier))))
  nil)

;;; Commands

(defun lispm-approvals--goto (approval)
  "Move point to APPROVAL's section; return non-nil if it is shown."
  (when-let* ((pos (and approval (lispm-approvals--position-of approval))))
    (goto-char pos)))

(defun lispm-approvals-next (&optional n)
  "Move to the next approval; with N, the Nth next (back if negative)."
  (interactive "p")
  (let* ((n (or n 1))
         (here (get-text-property (point) 'lispm-approval))
         (index (cl-position here lispm-approvals--pending))
         (target (cond
                  (index (nth (+ index n) lispm-approvals--pending))
                  ((> n 0)
                   ;; Not on a section: the first one after point.
                   (let ((pos (next-single-property-change (point) 'lispm-approval)))
                     (and pos (get-text-property pos 'lispm-approval)))))))
    (if (and target (>= (+ (or index 0) n) 0))
        (lispm-approvals--goto target)
      (user-error (if (> n 0) "No next approval" "No previous approval")))))

(defun lispm-approvals-previous (&optional n)
  "Move to the previous approval; with N, the Nth previous."
  (interactive "p")
  (lispm-approvals-next (- (or n 1))))

(defun lispm-approvals-refresh ()
  "Redisplay the approvals buffer, each approval's texts made anew."
  (interactive)
  (clrhash lispm-approvals--made)
  (lispm-approvals--render))

(defun lispm-approvals-visit ()
  "Visit the file or folder under point, or else the asking agent's buffer.
A terminal agent's buffer is its terminal (see `lispm-actor-home-buffer')."
  (interactive)
  (if-let* ((file (get-text-property (point) 'lispm-approvals-file)))
      (if (file-exists-p file)
          (find-file-other-window file)
        (user-error "%s does not exist yet" (abbreviate-file-name file)))
    (let ((buffer (lispm-actor-home-buffer (lispm-approval-agent (lispm-approvals--at-point)))))
      (if (buffer-live-p buffer)
          (pop-to-buffer buffer)
        (user-error "That agent has no buffer open")))))

(defun lispm-approvals--part-here (approval)
  "Return the part of APPROVAL to show whole, in its section in this buffer.
It is the part at point; else the section's first part that was cut;
else its first part."
  (or (get-text-property (point) 'lispm-approvals-part)
      (when-let* ((start (lispm-approvals--position-of approval)))
        (let* ((end (next-single-property-change start 'lispm-approval nil (point-max)))
               (at (or (text-property-not-all start end 'lispm-approvals-cut nil)
                       (text-property-not-all start end 'lispm-approvals-part nil))))
          (and at (get-text-property at 'lispm-approvals-part))))))

(defun lispm-approvals-view-whole (&optional approval part)
  "Show the whole of a diff or text of APPROVAL, the one at point, uncut.
PART is the key of APPROVAL's target whose text is shown, such as
`:diff' (see `lispm-approvals--parts'); by default the one at point,
else the first that its section shows cut, else its first.  The text
shows in a buffer of its own (a diff in `diff-mode'), which stays
cheap to show whatever its lines (see `lispm-agent-text-setup')."
  (interactive)
  (let* ((approval (or approval (lispm-approvals--at-point)))
         (target (lispm-approval-target approval))
         (id (lispm-approval-id approval))
         (part (or part
                   (and (derived-mode-p 'lispm-approvals-mode)
                        (lispm-approvals--part-here approval))
                   (car (cl-find-if (lambda (entry) (plist-get target (car entry)))
                                    lispm-approvals--parts))
                   (user-error "Approval %s has no diff or text to show" id)))
         (name (alist-get part lispm-approvals--parts))
         (text (or (plist-get target part)
                   (user-error "Approval %s has no %s" id name)))
         (buffer (get-buffer-create (format "*LispM %s %s*" id name))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (substring-no-properties text))
        (goto-char (point-min)))
      (setq buffer-read-only t)
      (if (eq part :diff) (diff-mode) (special-mode))
      (lispm-agent-text-setup)
      (setq header-line-format
            (string-replace "%" "%%" (format "%s  %s asks for %s: the whole %s"
                                             id (lispm-approvals-asker approval)
                                             (lispm-approval-kind approval) name))))
    (pop-to-buffer buffer)
    buffer))

;;;###autoload
(defun lispm-approvals-show (&optional agent)
  "Show the approvals that wait, at the first of AGENT's.
In the agent list, AGENT is the agent on the current line."
  (interactive
   (list (and (derived-mode-p 'tabulated-list-mode)
              (when-let* ((id (tabulated-list-get-id)))
                (and (stringp id) (lispm-agent-get id))))))
  (let* ((buffer (lispm-approvals--buffer))
         (first (car (if agent (lispm-approvals-for-agent agent) lispm-approvals--pending))))
    (pop-to-buffer buffer)
    (cond (first (lispm-approvals--goto first)
                 (set-window-start nil (point)))
          ((and agent lispm-approvals--pending)
           (message "LispM: nothing of %s's waits" (lispm-actor-name agent)))
          ((null lispm-approvals--pending)
           (message "LispM: nothing waits for your approval")))))

;;; Presentations of approvals

(defun lispm-approvals--presented (id)
  "Return the pending approval ID, or signal a `user-error' that it is decided."
  (or (lispm-approvals-get id)
      (user-error "Approval %s is decided, or was never asked in this Emacs" id)))

(cl-defmethod lispm-present-follow ((_type (eql 'approval)) id &optional _arg)
  "Show the approvals buffer at the section of the approval ID."
  (let ((approval (lispm-approvals--presented id)))
    (lispm-approvals-show)
    (with-current-buffer lispm-approvals-buffer-name
      (goto-char (point-min))
      (when (lispm-approvals--goto approval)
        (when-let* ((window (get-buffer-window (current-buffer))))
          (set-window-point window (point))
          (set-window-start window (point)))))))

(cl-defmethod lispm-present-type-actions ((_type (eql 'approval)) id)
  "Return the actions on the approval ID: show, allow or deny it."
  (list (lispm-present-follow-action "Show the approval" 'approval id)
        (cons "Allow" (lambda () (lispm-approvals-decide (lispm-approvals--presented id))))
        (cons "Deny" (lambda () (lispm-approvals-decide (lispm-approvals--presented id) t)))))

(provide 'lispm-approvals)
;;; lispm-approvals.el ends here
