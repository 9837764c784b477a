;;; lispm-session.el --- The own agent's session: an Org document kept in git  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; A session of LispM's own agent is an Org document, and the buffer
;; the user talks to the agent in (`lispm-session-mode', derived from
;; `org-mode').  Its file lives in `lispm-sessions-directory', a git
;; repository of LispM's own (never the project's), and every turn is
;; saved and committed there, asynchronously and in order.
;;
;; The document is the source of truth: the conversation the model
;; gets is read back from it (`lispm-session-messages'), edits the
;; user made in it included.  Its shape:
;;
;;   #+TITLE: LispM session: PROJECT      the header: keywords
;;   #+LISPM_SESSION: ID                   (the session, the folder,
;;   #+LISPM_FOLDER: FOLDER                the model, the agent)
;;   ...
;;   * Turn 1: FIRST LINE                  a turn: its number and time
;;   :PROPERTIES: ... :END:                in a drawer, then the user's
;;   THE USER'S WORDS                      words
;;   ** AGENT                              one model reply: its text,
;;   THE MODEL'S TEXT                      then its tool calls
;;   *** Call read_file                    a call: its id and tool in a
;;   :PROPERTIES: ... :END:                drawer (an ask's request id
;;   #+begin_src json ... #+end_src        too), its arguments in a
;;                                         source block (a program as
;;                                         Lisp: see below)
;;   **** TODO Approve ...                 an approval asked for it
;;   **** Result                           its result, in an example
;;   #+begin_example ... #+end_example     block (long ones folded)
;;   **** Changes                          what it changed in files: a
;;   #+begin_src diff ... #+end_src        hunk a change (see below)
;;   ** Plan                               the agent's plan (the plan
;;   :PROPERTIES: ... :END:                tool): TODO, DOING, DONE or
;;   *** TODO A STEP                       CANCELLED items, which the
;;                                         user may edit
;;   * Summary of turns 1-N                compaction's summary
;;   * Your message                        the input area: the draft
;;   WHAT THE USER TYPES                   is everything below it
;;
;; Text reads back exactly.  In the user's and the model's words a
;; line that could be taken for Org structure (one starting, after
;; blanks and commas, with `*', `#' or `:') gets a comma in front; in
;; blocks Org's own escaping applies (a comma before `*' and `#+').
;; Every text ends with one newline of the document's own, so trailing
;; blanks, missing final newlines and empty texts come back as they
;; were.  Lines of the form `: note' and `# comment' outside blocks are
;; LispM's notes and the user's comments, never the conversation.
;;
;; A call's arguments are the model's JSON text, as it wrote them,
;; except the program of a tool of `lispm-session-lisp-tools'
;; (`run_lisp'): when the arguments are an object of its one member,
;; a string that reads back as the same JSON text (plain text, not
;; too long, written as `json-encode-string' writes it), the block is
;; `#+begin_src emacs-lisp' with the program, verbatim, and reads back
;; as that object, laid out as the text was (`:LISPM_JSON:' says how,
;; if not `{"program":%s}').  The model's next request is so the same,
;; byte for byte, as the one before: prompt caches hold.  Org neither
;; evaluates the block (`:eval no') nor re-indents it when edited
;; (`-i').  Any other arguments stay JSON.
;;
;; What a call changed in files is written with its result, as a
;; unified diff of one hunk per change, the lines it wrote and no more
;; (a deletion gets a line around it), file names relative to the
;; session's folder: `--- /dev/null' for a file it made, `+++
;; /dev/null' for one it deleted, `# LispM kept no copy: WHY' for a
;; change too big (past `lispm-session-result-limit') or not text.  So
;; the file is a record a turn can be reverted from after its Emacs
;; died (`lispm-session-turn-changes'), and the user sees each change.
;;
;; Git runs in processes of each sessions directory, never waited
;; for: each turn's commit holds the file as it was when the turn
;; ended, with the author LispM <lispm@localhost>, no hooks, no
;; signing and no configuration but the repository's own.  Emacs
;; gives a long-lived shell one short record per commit, naming a
;; pinned copy of the file; the shell feeds `git fast-import' the
;; whole record with the file's bytes (lispm-session-git.el).  If git
;; is missing or the directory cannot be made a repository, the
;; session is saved all the same, with one warning per Emacs session.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'org)
(require 'org-src)
(require 'json)
(require 'lispm-base)
(require 'lispm-session-git)

;;; Options and errors

(defgroup lispm-session nil
  "The own agent's sessions: Org documents committed to a git repository."
  :group 'lispm
  :prefix "lispm-session")

(defcustom lispm-sessions-directory (locate-user-emacs-file "lispm/sessions/")
  "The folder of the own agent's session files, a git repository of LispM's.
LispM makes it a repository (`git init') when it is not one.  It must
not be a project's folder: every turn is committed there."
  :type 'directory
  :group 'lispm-session)

(defconst lispm-session-result-line-limit 500
  "The most characters a line of a tool's result keeps.")

(defconst lispm-session-result-limit (* 64 1024)
  "The most characters a tool's result keeps, the note on cutting included.")

(defconst lispm-session-not-run-result
  "[LispM: this call did not run; its turn ended first]"
  "The result of a call that has none in the document.")

(defconst lispm-session-not-answered-reply
  "[LispM: Emacs ended before this turn was answered]"
  "The reply a turn gets that Emacs ended before the model answered it.")

(defconst lispm-session--fold-lines 12
  "A result or program of more lines than this is shown folded.")

(defconst lispm-session--fold-chars 2000
  "A result or program of more characters than this is shown folded.")

(defconst lispm-session-lisp-tools '(("run_lisp" . "program"))
  "The tools whose calls show a program as Lisp, each with its member.
An alist of tool names and the name of the member of the arguments
that holds the program.  A call of one of them shows the program in
an emacs-lisp block, when its arguments are an object of that member
alone (see `lispm-session--lisp-program').  Session files are read
back by it too: a tool taken out would read its calls wrong.")

(defconst lispm-session--lisp-limit (* 32 1024)
  "The most characters of a program shown as Lisp; a longer one stays JSON.
Org fontifies a Lisp block whole whenever part of it is shown: 0.1 s
for 64 KB, 2 s for 1 MB.")

(defconst lispm-session--lisp-header " emacs-lisp -i :eval no"
  "What follows `#+begin_src' at a program's block.
Org never evaluates it (\\[org-ctrl-c-ctrl-c] would, with the user's
rights, not run_lisp's), and keeps its indentation when it is edited.")

(lispm-define-error 'lispm-session-error "LispM session error" 'lispm-error)
;; Data: the message, the file, the line, what is wrong.
(lispm-define-error 'lispm-session-unreadable "Session file does not read back"
                    'lispm-error)
;; Data: the message, the summary's size, the size it would replace.
(lispm-define-error 'lispm-compaction-not-smaller "Summary not smaller than the turns"
                    'lispm-error)

;;; Buffer-local state

(defvar-local lispm-session-id nil
  "The session's id: its file's name without \".org\".")
(defvar-local lispm-session-file nil
  "The session's file.")
(defvar-local lispm-session-folder nil
  "The project folder the session works in.")
(defvar-local lispm-session-model nil
  "The name of the session's model, a string, or nil.")
(defvar-local lispm-session-agent nil
  "The name of the agent whose session this is, or nil.")
(defvar-local lispm-session-role nil
  "The name of the role of the session's agent, a string, or nil (the default).")
(defvar-local lispm-session-callers nil
  "The names of the agent's callers, its caller first, when it was a helper.
A list of strings; nil for an agent of the user's.")
(dolist (variable '(lispm-session-id lispm-session-file lispm-session-folder
                    lispm-session-model lispm-session-agent lispm-session-role
                    lispm-session-callers))
  (put variable 'permanent-local t))

(defvar-local lispm-session--end nil
  "A marker at the start of the input heading: the transcript's end.")
(defvar-local lispm-session--turns 0
  "The number of the last turn in the document.")
(defvar-local lispm-session--first-line nil
  "The first line of the current turn's text, for its commit.")
(defvar-local lispm-session--step nil
  "Non-nil once the current turn has a reply heading.")
(defvar-local lispm-session--dirty nil
  "The first position changed since the file was written, or nil.")
(defvar-local lispm-session--tail-from nil
  "Where the text the session's tail file holds begins, or nil for none.
The text before it is the session file's, as last written whole.")

(defconst lispm-session--input-heading "* Your message"
  "The input area's heading; what follows it is the draft.")

(defconst lispm-session--input-regexp "^\\* Your message\\(?:[ \t].*\\)?$"
  "What finds the input area's heading.")

(defconst lispm-session--plan-item-regexp
  "\\`\\(TODO\\|DOING\\|DONE\\|CANCELLED\\)[ \t]+\\(.*\\)\\'"
  "A plan item's heading text: its state, then its text.")

(defconst lispm-session--heading-regexp "^\\(\\*+\\)\\(?:[ \t]+\\(.*\\)\\)?$"
  "An Org heading: its stars and its text.")

;;; Escaping

(defun lispm-session--escape-prose (text)
  "Return TEXT, words outside blocks, with lines Org would read escaped."
  (replace-regexp-in-string "^[ \t,]*[*#:]" ",\\&" text t))

(defun lispm-session--unescape-prose (text)
  "Undo `lispm-session--escape-prose' on TEXT."
  (replace-regexp-in-string "^,\\([ \t,]*[*#:]\\)" "\\1" text t))

(defalias 'lispm-session--escape-block #'org-escape-code-in-string
  "Return TEXT escaped as Org escapes a block's contents.")

(defalias 'lispm-session--unescape-block #'org-unescape-code-in-string
  "Undo `lispm-session--escape-block' on TEXT.")

(defun lispm-session--encode-value (value)
  "Return VALUE, a string, as the value of a property or keyword line.
A value that would not survive on one line as it is (empty, blank at
either end, multi-line, or starting with a quote) is written as a Lisp
string."
  (if (string-match-p "\\`[^\" \t\n]\\(?:[^\n]*[^ \t\n]\\)?\\'" value)
      value
    (let ((print-escape-newlines t) (print-escape-control-characters t))
      (prin1-to-string value))))

(defun lispm-session--decode-value (raw)
  "Return the string RAW encodes, as `lispm-session--encode-value' writes it.
Signal `invalid-read-syntax' or `end-of-file' if RAW is a broken string."
  (if (string-prefix-p "\"" raw)
      (let ((read (read-from-string raw)))
        (unless (and (stringp (car read)) (= (cdr read) (length raw)))
          (signal 'invalid-read-syntax (list raw)))
        (car read))
    raw))

(defun lispm-session--one-line (text limit)
  "Return the first non-blank line of TEXT, cut to LIMIT characters."
  (let ((line (if (string-match "^[ \t\r]*[^ \t\r\n][^\n]*" text)
                  (match-string 0 text)
                "")))
    (setq line (string-trim (replace-regexp-in-string "[\t\r]" " " line)))
    (if (> (length line) limit) (concat (substring line 0 (1- limit)) "…") line)))

;;; Writing the document's parts

(defun lispm-session--drawer (properties)
  "Return a property drawer of PROPERTIES, an alist of names and strings."
  (concat ":PROPERTIES:\n"
          (mapconcat (lambda (property)
                       (format ":%s: %s\n" (car property)
                               (lispm-session--encode-value
                                (substring-no-properties (cdr property)))))
                     properties "")
          ":END:\n"))

(defun lispm-session--prose (text)
  "Return TEXT as words in the document, with the newline that ends them."
  (concat (lispm-session--escape-prose (substring-no-properties text)) "\n"))

(defun lispm-session--block (kind header text)
  "Return a block of KIND (src, example) with HEADER, holding TEXT."
  (format "#+begin_%s%s\n%s\n#+end_%s\n" kind header
          (lispm-session--escape-block (substring-no-properties text)) kind))

(defun lispm-session--long-p (text)
  "Return non-nil if TEXT, a result or a program, is shown folded."
  (or (> (length text) lispm-session--fold-chars)
      (> (cl-count ?\n text) lispm-session--fold-lines)))

(defun lispm-session--time ()
  "Return the time now, as the document writes it."
  (format-time-string "%FT%T%z"))

(defun lispm-session--rules-line (file folder)
  "Return the header line naming FILE, a project rules file, as a link.
The link's text is FILE's name relative to FOLDER, the agent's; a name
with a control character, which no link keeps, is written as a value."
  (format "#+LISPM_RULES: %s\n"
          (if (string-match-p "[[:cntrl:]]" file)
              (lispm-session--encode-value file)
            (org-link-make-string (concat "file:" file) (file-relative-name file folder)))))

(defun lispm-session--header (id folder model agent project &optional role callers rules)
  "Return the header of session ID in FOLDER (PROJECT) with MODEL and AGENT.
ROLE is the agent's role's name, CALLERS its callers' names, if any;
RULES the project's rules files the agent reads, each a link."
  (concat (format "#+TITLE: LispM session: %s\n" project)
          (format "#+DATE: %s\n" (format-time-string "[%F %a %R]"))
          (format "#+LISPM_SESSION: %s\n" (lispm-session--encode-value id))
          (format "#+LISPM_FOLDER: %s\n" (lispm-session--encode-value folder))
          (if model (format "#+LISPM_MODEL: %s\n" (lispm-session--encode-value model)) "")
          (if agent (format "#+LISPM_AGENT: %s\n" (lispm-session--encode-value agent)) "")
          (if role (format "#+LISPM_ROLE: %s\n" (lispm-session--encode-value role)) "")
          (if callers
              (format "#+LISPM_CALLERS: %s\n"
                      (lispm-session--encode-value (string-join callers " ")))
            "")
          (mapconcat (lambda (file) (lispm-session--rules-line file folder)) rules "")
          "#+TODO: TODO DOING | DONE CANCELLED\n"))

;;; Programs shown as Lisp

(defun lispm-session--layout-start (key)
  "Return the regexp of the JSON object of member KEY alone up to its value."
  (format "\\`[ \t\n\r]*{[ \t\n\r]*\"%s\"[ \t\n\r]*:[ \t\n\r]*" (regexp-quote key)))

(defun lispm-session--layout-regexp (key)
  "Return the regexp of a layout of the JSON object of member KEY alone.
A layout is the object's text with `%s' for the member's value."
  (concat (lispm-session--layout-start key) "%s[ \t\n\r]*}[ \t\n\r]*\\'"))

(defun lispm-session--lisp-program (name arguments)
  "Return (PROGRAM . LAYOUT) if ARGUMENTS of a call of NAME show as Lisp.
They do if NAME is a tool of `lispm-session-lisp-tools' and
ARGUMENTS, JSON text, an object of the tool's member alone, whose
value PROGRAM is a string that reads back as the same text
\(`lispm-session--call-arguments'): at most `lispm-session--lisp-limit'
characters, no control character but tabs and newlines (a NUL or a
CR is best seen as a JSON escape), and written as `json-encode-string'
writes it.  LAYOUT is ARGUMENTS with `%s' in place of that string, or
nil if it is the compact {\"MEMBER\":%s}.  Return nil if they do not."
  (when-let* ((key (cdr (assoc name lispm-session-lisp-tools)))
              ((stringp arguments))
              (object (ignore-errors (json-parse-string arguments :object-type 'alist)))
              ((and (consp object) (null (cdr object)) (consp (car object))
                    (equal (symbol-name (caar object)) key)))
              (program (cdar object))
              ((and (stringp program) (<= (length program) lispm-session--lisp-limit)))
              ((not (string-match-p "[\0-\10\13-\37\177]" program)))
              ((string-match (lispm-session--layout-start key) arguments))
              (start (match-end 0))
              (string (json-encode-string program))
              (end (+ start (length string)))
              ((and (<= end (length arguments))
                    (string= string (substring arguments start end))))
              (layout (concat (substring arguments 0 start) "%s" (substring arguments end)))
              ((string-match-p (lispm-session--layout-regexp key) layout)))
    (cons program (unless (equal layout (format "{\"%s\":%%s}" key)) layout))))

(defun lispm-session--call-arguments (name header text layout position)
  "Return the arguments, JSON text, of a call of NAME, read from its block.
HEADER is what follows `#+begin_src' on the block's first line, TEXT
the block's contents, LAYOUT the call's `:LISPM_JSON:' or nil.  The
emacs-lisp block of a tool of `lispm-session-lisp-tools' holds the
program: the arguments are the object of its member alone, laid out
as LAYOUT says (default: compact).  Any other block holds the JSON
text itself.  POSITION is for errors."
  (let ((key (cdr (assoc name lispm-session-lisp-tools))))
    (if (not (and key (member (car (split-string header)) '("emacs-lisp" "elisp"))))
        text
      (let ((layout (or layout (format "{\"%s\":%%s}" key))))
        (unless (string-match-p (lispm-session--layout-regexp key) layout)
          (lispm-session--fail position "a :LISPM_JSON: that is no JSON object of %s alone"
                               key))
        (let ((at (string-search "%s" layout)))
          (concat (substring layout 0 at) (json-encode-string text)
                  (substring layout (+ at 2))))))))

;;; Reading the document back

(defun lispm-session--fail (position what &rest args)
  "Signal `lispm-session-unreadable' at POSITION: WHAT, formatted with ARGS."
  (let ((file (or lispm-session-file buffer-file-name (buffer-name)))
        (line (line-number-at-pos position t))
        (what (apply #'format-message what args)))
    (lispm-signal 'lispm-session-unreadable (list file line what)
                  "Session file %s does not read back: line %d: %s" file line what)))

(defun lispm-session--transcript-end ()
  "Return where the transcript ends in the current buffer: the input heading."
  (if (and (markerp lispm-session--end) (marker-position lispm-session--end)
           (save-excursion (goto-char lispm-session--end)
                           (looking-at-p lispm-session--input-regexp)))
      (marker-position lispm-session--end)
    (save-excursion
      (goto-char (point-min))
      (let ((case-fold-search nil))
        (if (re-search-forward lispm-session--input-regexp nil t)
            (match-beginning 0)
          (point-max))))))

(defun lispm-session--sections (beg end)
  "Return the headings between BEG and END, in order.
Each is (LEVEL TITLE START BODY BODY-END): its stars' count, its text,
where it starts, and where its body starts and ends."
  (save-excursion
    (goto-char beg)
    (let ((case-fold-search nil) (sections nil))
      (while (re-search-forward lispm-session--heading-regexp end t)
        (push (list (length (match-string 1)) (or (match-string-no-properties 2) "")
                    (match-beginning 0) (min end (1+ (match-end 0))))
              sections))
      (setq sections (nreverse sections))
      (cl-loop for (section next) on sections
               collect (append section (list (if next (nth 2 next) end)))))))

(defun lispm-session--keywords (beg end)
  "Return the header's keywords between BEG and END, an alist (NAME . RAW)."
  (save-excursion
    (goto-char beg)
    (let ((case-fold-search t) (keywords nil))
      (while (re-search-forward "^#\\+\\([A-Za-z_]+\\):[ \t]*\\(.*?\\)[ \t]*$" end t)
        (push (cons (upcase (match-string-no-properties 1)) (match-string-no-properties 2))
              keywords))
      (nreverse keywords))))

(defun lispm-session--drawer-at (beg end)
  "Read the property drawer at BEG, before END.
Return (PROPERTIES . AFTER), PROPERTIES an alist of upcased names and
raw values, AFTER where the drawer ends; or nil if BEG has no drawer."
  (save-excursion
    (goto-char beg)
    (when (and (< beg end) (looking-at "[ \t]*:PROPERTIES:[ \t]*$"))
      (forward-line 1)
      (let ((properties nil))
        (while (and (< (point) end)
                    (not (looking-at "[ \t]*:END:[ \t]*$")))
          (unless (looking-at "[ \t]*:\\([^ \t\n:]+\\):\\(?:[ \t]+\\(.*?\\)\\)?[ \t]*$")
            (lispm-session--fail (point) "a line in a property drawer that is no property"))
          (push (cons (upcase (match-string-no-properties 1))
                      (or (match-string-no-properties 2) ""))
                properties)
          (forward-line 1))
        (when (>= (point) end)
          (lispm-session--fail beg "a property drawer without its :END:"))
        (forward-line 1)
        (cons (nreverse properties) (min end (point)))))))

(defun lispm-session--property (properties name position)
  "Return the value of NAME in PROPERTIES, decoded; POSITION is for errors."
  (when-let* ((raw (cdr (assoc name properties))))
    (condition-case nil
        (lispm-session--decode-value raw)
      ((invalid-read-syntax end-of-file)
       (lispm-session--fail position "the property %s is a broken string" name)))))

(defun lispm-session--read-prose (beg end)
  "Return the words between BEG and END: notes and comments left out."
  (let* ((text (buffer-substring-no-properties beg end))
         (text (replace-regexp-in-string
                "^[ \t]*[:#]\\(?:[ \t][^\n]*\\)?\\(?:\n\\|\\'\\)" "" text t t))
         (text (lispm-session--unescape-prose text)))
    (if (string-suffix-p "\n" text) (substring text 0 -1) text)))

(defun lispm-session--read-block (beg end kind &optional with-header)
  "Return the contents of the first block of KIND between BEG and END.
With WITH-HEADER non-nil, return (HEADER . CONTENTS), HEADER what
follows `#+begin_KIND' on the block's first line."
  (save-excursion
    (goto-char beg)
    (let ((case-fold-search t))
      (unless (re-search-forward (format "^[ \t]*#\\+begin_%s\\([ \t].*\\)?$" kind) end t)
        (lispm-session--fail beg "no #+begin_%s block where one belongs" kind))
      (let ((start (min end (1+ (match-end 0))))
            (header (or (match-string-no-properties 1) "")))
        (unless (re-search-forward (format "^[ \t]*#\\+end_%s[ \t]*$" kind) end t)
          (lispm-session--fail (match-beginning 0) "a #+begin_%s without its #+end_%s"
                               kind kind))
        (let* ((text (lispm-session--unescape-block
                      (buffer-substring-no-properties start (match-beginning 0))))
               (text (if (string-suffix-p "\n" text) (substring text 0 -1) text)))
          (if with-header (cons header text) text))))))

(defun lispm-session--read-changes (text position)
  "Return what TEXT, the diff of a call, records; POSITION is for errors.
As `lispm-session-turn-changes' gives them, file names as written
\(their a/ or b/ taken off)."
  (let ((lines (split-string text "\n")) (changes nil) (file nil) (created nil)
        (deleted nil)
        (name (lambda (raw)
                (let ((name (condition-case nil (lispm-session--decode-value raw)
                              ((invalid-read-syntax end-of-file)
                               (lispm-session--fail position "a broken file name in a diff")))))
                  (unless (equal name "/dev/null")
                    (if (string-match "\\`[ab]/" name) (substring name 2) name))))))
    (while lines
      (let ((line (pop lines)))
        (cond
         ((string-prefix-p "--- " line)
          (let ((old (funcall name (substring line 4)))
                (next (pop lines)))
            (unless (and next (string-prefix-p "+++ " next))
              (lispm-session--fail position "a diff's --- line without its +++ line"))
            (let ((new (funcall name (substring next 4))))
              (setq file (or new old) created (null old) deleted (null new)))))
         ((not file)
          (lispm-session--fail position "a diff line before its file's name: %s" line))
         ((string-prefix-p "# LispM kept no copy: " line)
          (push (list :file file :lost (substring line 22)) changes))
         ((string-match "\\`@@ -\\([0-9]+\\),\\([0-9]+\\) \\+\\([0-9]+\\),\\([0-9]+\\) @@" line)
          (let* ((numbers (mapcar (lambda (n) (string-to-number (match-string n line)))
                                  '(1 2 3 4)))
                 (want-old (nth 1 numbers)) (want-new (nth 3 numbers))
                 (old nil) (new nil) (last nil))
            (while (or (< (length old) want-old) (< (length new) want-new)
                       (and lines (string-prefix-p "\\" (car lines))))
              (let ((body (or (pop lines)
                              (lispm-session--fail position "a hunk cut short"))))
                (pcase (and (> (length body) 0) (aref body 0))
                  (?- (push (concat (substring body 1) "\n") old) (setq last 'old))
                  (?+ (push (concat (substring body 1) "\n") new) (setq last 'new))
                  (?\\ (let ((lines (if (eq last 'old) old new)))
                         (when lines (setcar lines (substring (car lines) 0 -1)))))
                  (_ (lispm-session--fail position "a hunk line that is no - or +: %s"
                                          body)))))
            (push (list :file file
                        :line (cond ((> want-new 0) (nth 2 numbers))
                                    ((> want-old 0) (nth 0 numbers))
                                    (t (1+ (nth 2 numbers))))
                        :old (apply #'concat (nreverse old))
                        :new (apply #'concat (nreverse new))
                        :created created :deleted deleted)
                  changes)))
         ((string-empty-p line))
         (t (lispm-session--fail position "a line of a diff LispM does not write: %s"
                                 line)))))
    (nreverse changes)))

(defun lispm-session--tags (title)
  "Return the tags at the end of the heading text TITLE, a list of strings."
  (when (string-match "[ \t]+:\\(\\(?:[[:alnum:]_@#%]+:\\)+\\)[ \t]*\\'" title)
    (split-string (match-string 1 title) ":" t)))

(defun lispm-session--parse ()
  "Read the current buffer's document back; return (HEADER . ITEMS).
HEADER is an alist of the header's keywords (raw values); ITEMS the
turns and summaries, in order: (:turn N :archived B :user TEXT
:steps STEPS :start POS) with STEPS a list of (:text TEXT :calls
CALLS), each call (:id I :name N :arguments JSON :result TEXT-OR-NIL
:request ID-OR-NIL :changes CHANGES), the request an ask made and the
changes it recorded (see `lispm-session-turn-changes', file names as
written);
and (:summary TEXT :upto N :archived B :start POS).  Signal
`lispm-session-unreadable' where the document does not read."
  (save-excursion
    (save-restriction
      (widen)
      (let* ((end (lispm-session--transcript-end))
             (sections (lispm-session--sections (point-min) end))
             (header (lispm-session--keywords (point-min)
                                              (if sections (nth 2 (car sections)) end)))
             (items nil) (item nil) (step nil) (call nil) (plan nil))
        (unless (assoc "LISPM_SESSION" header)
          (lispm-session--fail (point-min) "no #+LISPM_SESSION: line in the header"))
        (pcase-dolist (`(,level ,title ,start ,body ,body-end) sections)
          (pcase level
            (1
             (let* ((drawer (lispm-session--drawer-at body body-end))
                    (properties (car drawer))
                    (after (or (cdr drawer) body))
                    (archived (member "ARCHIVE" (lispm-session--tags title)))
                    (rewound (member "REWOUND" (lispm-session--tags title)))
                    (turn (lispm-session--property properties "LISPM_TURN" start))
                    (summary (lispm-session--property properties "LISPM_SUMMARY" start)))
               (setq step nil call nil plan nil)
               (cond
                ((and turn (string-match-p "\\`[0-9]+\\'" turn))
                 (setq item (list :turn (string-to-number turn) :archived (and archived t)
                                  :rewound (and rewound t)
                                  :reverted (lispm-session--property
                                             properties "LISPM_REVERTED" start)
                                  :usage (lispm-session--property
                                          properties "LISPM_USAGE" start)
                                  :user (lispm-session--read-prose after body-end)
                                  :steps nil :start start)))
                ((and summary (string-match-p "\\`[0-9]+\\'" summary))
                 (setq item (list :summary (lispm-session--read-prose after body-end)
                                  :upto (string-to-number summary)
                                  :from (let ((from (lispm-session--property
                                                     properties "LISPM_SUMMARY_FROM" start)))
                                          (if (and from (string-match-p "\\`[0-9]+\\'" from))
                                              (string-to-number from)
                                            1))
                                  :archived (and archived t) :start start)))
                (t (lispm-session--fail
                    start "a top heading that is no turn (no :LISPM_TURN: number) %s"
                    "and no summary (no :LISPM_SUMMARY: number)")))
               (push item items)))
            (2
             (unless (plist-member item :turn)
               (lispm-session--fail start "a second-level heading outside a turn"))
             (if (assoc "LISPM_PLAN" (car (lispm-session--drawer-at body body-end)))
                 (setq plan t step nil call nil)
               (let ((thoughts (lispm-session--read-thoughts body body-end)))
                 (setq step (list :text (lispm-session--read-prose (cdr thoughts) body-end)
                                  :reasoning (car thoughts) :calls nil)
                       call nil plan nil))
               (plist-put item :steps (append (plist-get item :steps) (list step)))))
            ((and level (guard (and plan (>= level 4)))))
            ((and 3 (guard plan))
             (plist-put item :plan
                        (append (plist-get item :plan)
                                (list (if (string-match lispm-session--plan-item-regexp title)
                                          (list :state (intern (downcase (match-string 1 title)))
                                                :text (match-string 2 title))
                                        (list :state 'todo :text title))))))
            (3
             (unless step
               (lispm-session--fail start "a third-level heading outside a reply"))
             (let* ((drawer (or (lispm-session--drawer-at body body-end)
                                (lispm-session--fail start "a call without its properties")))
                    (id (lispm-session--property (car drawer) "LISPM_CALL_ID" start))
                    (name (lispm-session--property (car drawer) "LISPM_TOOL" start)))
               (unless (and id name)
                 (lispm-session--fail start "a call without :LISPM_CALL_ID: and :LISPM_TOOL:"))
               (setq call (list :id id :name name
                                :arguments (let ((block (lispm-session--read-block
                                                         (cdr drawer) body-end "src" t)))
                                             (lispm-session--call-arguments
                                              name (car block) (cdr block)
                                              (lispm-session--property
                                               (car drawer) "LISPM_JSON" start)
                                              start))
                                :result nil
                                :request (lispm-session--property
                                          (car drawer) "LISPM_REQUEST" start)))
               (plist-put step :calls (append (plist-get step :calls) (list call)))))
            (4
             (unless call
               (lispm-session--fail start "a fourth-level heading outside a call"))
             (cond ((string-match-p "\\`\\(?:TODO\\|DONE\\|CANCELLED\\)\\(?:[ \t]\\|\\'\\)"
                                    title))
                   ((equal title "Changes")
                    (plist-put call :changes
                               (lispm-session--read-changes
                                (lispm-session--read-block body body-end "src")
                                body)))
                   (t (plist-put call :result
                                 (lispm-session--read-block body body-end "example")))))
            (_ (lispm-session--fail start "a heading deeper than LispM writes"))))
        (cons header (nreverse items))))))

(defun lispm-session--turn-messages (turn)
  "Return the neutral messages of TURN, an item of `lispm-session--parse'."
  (let ((messages (list (list :role "user" :content (plist-get turn :user)))))
    (dolist (step (plist-get turn :steps))
      (let ((calls (plist-get step :calls)))
        (push (append (list :role "assistant" :content (plist-get step :text))
                      (when (plist-get step :reasoning)
                        (list :reasoning (plist-get step :reasoning)))
                      (when calls
                        (list :tool_calls
                              (mapcar (lambda (call)
                                        (list :id (plist-get call :id)
                                              :name (plist-get call :name)
                                              :arguments (plist-get call :arguments)))
                                      calls))))
              messages)
        (dolist (call calls)
          (push (list :role "tool" :tool_call_id (plist-get call :id)
                      :name (plist-get call :name)
                      :content (or (plist-get call :result) lispm-session-not-run-result))
                messages))))
    (nreverse messages)))

(defun lispm-session--summary-message (summary)
  "Return the user-role message of SUMMARY, an item of `lispm-session--parse'."
  (list :role "user"
        :content (format "Summary of turns %d-%d:\n\n%s" (plist-get summary :from)
                         (plist-get summary :upto) (plist-get summary :summary))))

(defun lispm-session-messages (buffer)
  "Return the conversation of the session in BUFFER, read back from its text.
A list of neutral messages, plists: (:role \"user\" :content S),
\(:role \"assistant\" :content S :reasoning THOUGHTS :tool_calls ((:id
I :name N :arguments JSON) ...)) (no :reasoning or :tool_calls if none;
THOUGHTS as `lispm-session-thought' makes them), and (:role \"tool\"
:tool_call_id I :name N :content S).  Archived turns give only the
user's words; the summary that replaced them is a user-role message.
Turns rewound (tagged REWOUND, `lispm-session-rewind') give nothing:
the model no longer sees them, though the document keeps them.
A call without a result gets one saying it did not run.  Signal
`lispm-session-unreadable' if the document does not read back."
  (with-current-buffer buffer
    (let ((messages nil))
      (dolist (item (cdr (lispm-session--parse)))
        (cond ((plist-get item :rewound))
              ((plist-member item :summary)
               (unless (plist-get item :archived)
                 (push (list (lispm-session--summary-message item)) messages)))
              ((plist-get item :archived)
               (push (list (list :role "user" :content (plist-get item :user))) messages))
              (t (push (lispm-session--turn-messages item) messages))))
      (apply #'append (nreverse messages)))))

(defun lispm-session-waiting-step (buffer)
  "Return the last step of the session in BUFFER if it ended while waiting.
That is the last reply of the last turn, when one of its calls has a
request (`:LISPM_REQUEST:') and no result: its Emacs ended while the
call waited for the answer.  Return (:turn N :steps K :messages
MESSAGES :calls CALLS), K the turn's replies, MESSAGES the
conversation up to that reply's (its calls' results left out), CALLS
its calls as `lispm-session--parse' gives them; or nil."
  (with-current-buffer buffer
    (let* ((turn (car (last (cdr (lispm-session--parse)))))
           (step (car (last (plist-get turn :steps))))
           (calls (plist-get step :calls)))
      (when (and (plist-get turn :turn) (not (plist-get turn :archived))
                 (cl-some (lambda (call) (and (plist-get call :request)
                                              (not (plist-get call :result))))
                          calls))
        (list :turn (plist-get turn :turn)
              :steps (length (plist-get turn :steps))
              :messages (butlast (lispm-session-messages buffer) (length calls))
              :calls calls)))))

(defun lispm-session-turn-changes (buffer number)
  "Return what the session in BUFFER recorded of turn NUMBER's file edits.
They come oldest first.
Each is (:file FILE :line L :old OLD :new NEW :created C :deleted D):
in FILE, from line L, the whole lines OLD became NEW (for a file the
call made, NEW is its whole text and OLD empty; for one it deleted,
the reverse); or (:file FILE :lost WHY), a change the session kept no
copy of.  FILE is absolute.  Return nil if the turn recorded none, or
there is no such turn.  Signal `lispm-session-unreadable' if the
document does not read back."
  (with-current-buffer buffer
    (let ((turn (cl-find number (cdr (lispm-session--parse))
                         :key (lambda (item) (plist-get item :turn))))
          (folder (or lispm-session-folder default-directory)))
      (cl-loop for step in (plist-get turn :steps)
               append (cl-loop for call in (plist-get step :calls)
                               append (mapcar (lambda (change)
                                                (plist-put (copy-sequence change) :file
                                                           (expand-file-name
                                                            (plist-get change :file) folder)))
                                              (plist-get call :changes)))))))

;;; The buffer

(define-derived-mode lispm-session-mode org-mode "LispM"
  "Major mode of a LispM own agent's session: an Org document.
The transcript is the conversation, read back as the model's history;
type below the last heading, \"Your message\"."
  (setq-local org-todo-keywords '((sequence "TODO" "|" "DONE" "CANCELLED")))
  (org-set-regexps-and-options)
  ;; The document grows at each step of a turn; Org's element cache,
  ;; kept up at every insertion, cost a step half a millisecond in a
  ;; 300 KB session, and LispM reads the document itself.
  (setq-local org-element-use-cache nil)
  (add-hook 'after-change-functions #'lispm-session--note-change nil t)
  (setq-local before-save-hook nil
              require-final-newline nil
              backup-inhibited t
              buffer-file-coding-system 'utf-8-unix))

(defun lispm-session--note-change (beg _end _length)
  "Note that the text changed from BEG on, for the next save."
  (when (or (null lispm-session--dirty) (< beg lispm-session--dirty))
    (setq lispm-session--dirty beg)))

(defun lispm-session--project-name (folder)
  "Return a short name for FOLDER, fit for a file name."
  (let ((name (replace-regexp-in-string
               "[^[:alnum:]._-]+" "-"
               (file-name-nondirectory (directory-file-name folder)))))
    (if (string-match-p "\\`[-.]*\\'" name) "session" name)))

(defun lispm-session--taken-p (file)
  "Return non-nil if FILE exists or a buffer is to visit it."
  (or (file-exists-p file)
      (get-file-buffer file)
      (cl-some (lambda (buffer) (equal (buffer-local-value 'lispm-session-file buffer) file))
               (buffer-list))))

(defun lispm-session--input-line ()
  "Make the input heading's line at point read-only, as one can type after it."
  (let ((inhibit-read-only t))
    (add-text-properties (line-beginning-position) (line-end-position)
                         '(read-only "The input area's heading" front-sticky (read-only)))
    (add-text-properties (line-end-position) (min (point-max) (1+ (line-end-position)))
                         '(read-only "The input area's heading" rear-nonsticky t))))

(defun lispm-session--setup (file id folder model agent)
  "Make the current buffer session ID's, visiting FILE, in FOLDER with MODEL.
AGENT is the agent's name.  The buffer holds the document already."
  (lispm-session-mode)
  (setq lispm-session-id id
        lispm-session-file file
        lispm-session-folder folder
        lispm-session-model model
        lispm-session-agent agent
        buffer-file-name file
        buffer-file-truename (abbreviate-file-name (file-truename file)))
  (when (and folder (file-directory-p folder))
    (setq default-directory (file-name-as-directory folder)))
  (save-excursion
    (goto-char (point-min))
    (let ((case-fold-search nil) (inhibit-read-only t))
      (if (re-search-forward lispm-session--input-regexp nil t)
          (goto-char (match-beginning 0))
        (goto-char (point-max))
        (unless (bolp) (insert "\n"))
        (save-excursion (insert lispm-session--input-heading "\n")))
      (setq lispm-session--end (copy-marker (point) t))
      (lispm-session--input-line)))
  (goto-char (point-max)))

(defun lispm-session-create (folder &optional model-name agent-name role callers rules)
  "Start a new session in FOLDER; return its buffer, in `lispm-session-mode'.
MODEL-NAME is the model's name, a string; AGENT-NAME the agent's.
ROLE is its role's name, a string, and CALLERS, a helper's, its
callers' names, its caller first; RULES the project's rules files the
agent reads (`lispm-project-rules-find'): the header records them, the
rules as links.  The
file, in `lispm-sessions-directory', is written when the first turn
begins, and at each step of a turn after."
  (let* ((folder (file-name-as-directory (expand-file-name folder)))
         (model-name (and model-name (format "%s" model-name)))
         (agent-name (and agent-name (format "%s" agent-name)))
         (directory (file-name-as-directory (expand-file-name lispm-sessions-directory)))
         (project (lispm-session--project-name folder))
         (base (format "%s-%s" (format-time-string "%Y%m%d-%H%M%S") project))
         (id base)
         (serial 1))
    (while (lispm-session--taken-p (expand-file-name (concat id ".org") directory))
      (setq serial (1+ serial) id (format "%s-%d" base serial)))
    (let ((buffer (generate-new-buffer (format "*%s %s*" (or agent-name "LispM") project)))
          (file (expand-file-name (concat id ".org") directory)))
      (with-current-buffer buffer
        (insert (lispm-session--header id folder model-name agent-name project role callers
                                        rules)
                "\n")
        (lispm-session--setup file id folder model-name agent-name)
        (setq lispm-session-role role
              lispm-session-callers callers)
        (set-buffer-modified-p nil))
      buffer)))

(defun lispm-session--repair ()
  "Cut the current buffer's document back to its last complete part.
A document LispM saved always ends with its input heading; one without
it was cut short (written in place by an older LispM, and Emacs died).
Then drop its last, unfinished line, and each part (the heading and
what it holds) where it does not read back, until it does; a header
cut before its `#+LISPM_SESSION:' line gets that line again, the
session's id being its file's name.  Return a note saying what was
cut (bytes, lines, from where), or nil if the document is whole.
Signal `lispm-session-unreadable' if a whole document does not read
back: then it is not a cut, and no part of it is dropped."
  (save-excursion
    (goto-char (point-min))
    (let ((case-fold-search nil))
      (unless (re-search-forward lispm-session--input-regexp nil t)
        (let* ((original (buffer-substring-no-properties (point-min) (point-max)))
               (lines (count-lines (point-min) (point-max)))
               (shift 0) (done nil) (tries 0))
          (goto-char (point-max))
          (unless (bolp) (delete-region (line-beginning-position) (point-max)))
          (goto-char (point-min))
          (unless (re-search-forward "^#\\+LISPM_SESSION:[ \t]*[^ \t\n]" nil t)
            (goto-char (point-min))
            (insert (format "#+LISPM_SESSION: %s\n"
                            (lispm-session--encode-value
                             (file-name-base (or lispm-session-file (buffer-name))))))
            (setq shift (1- (point))))
          (while (not done)
            (condition-case err
                (progn (lispm-session--parse) (setq done t))
              (lispm-session-unreadable
               (goto-char (point-min))
               (forward-line (1- (nth 3 err)))
               (end-of-line)
               (if (or (> (cl-incf tries) 1000)
                       (not (re-search-backward lispm-session--heading-regexp nil t)))
                   (signal (car err) (cdr err))
                 (delete-region (point) (point-max))))))
          (let* ((lost (substring original (- (buffer-size) shift)))
                 (count (+ (cl-count ?\n lost)
                           (if (or (string-empty-p lost) (string-suffix-p "\n" lost)) 0 1)))
                 (first (car (split-string lost "\n"))))
            (concat
             (if (string-empty-p original)
                 "This session's file was empty: Emacs ended while it was written (in \
place, by an older LispM), and all of it is lost."
               (format "This session's file was cut short when it was last written (Emacs \
ended mid-write): what came after its line %d is lost%s."
                       lines
                       (if (string-empty-p lost) ""
                         (format ", and its last %d bytes, %d line%s from line %d (%s), \
an unfinished part, are left out; what was complete before them is here"
                                 (length (encode-coding-string lost 'utf-8-unix t))
                                 count (if (= count 1) "" "s")
                                 (- (line-number-at-pos (point-max)) (if (> shift 0) 1 0))
                                 (if (string-prefix-p "*" first)
                                     (format "\"%s\" on" (lispm-session--one-line first 60))
                                   "part of a line")))))
             (if (> shift 0)
                 "  Its header was cut: its folder, model or agent may be unknown."
               ""))))))))

(defun lispm-session-end-cut-turn (buffer)
  "Mark the last turn in BUFFER ended, if the Emacs that ran it ended during it.
Call it when the session is resumed, in an Emacs that runs no turn of
it.  That turn has no reply yet, or approvals still awaited, or calls
with neither result nor request (a call waiting on a request goes on
waiting): it gets the reply that it was not answered; each approval
becomes CANCELLED (the call never runs unless asked again); each such
call gets the result that it did not run; a note says the turn was
cut; and the file is saved.  Return non-nil if it was cut."
  (with-current-buffer buffer
    (when (lispm-session--end-cut-turn)
      (lispm-session-save buffer)
      t)))

(defun lispm-session--end-cut-turn ()
  "Mark the last turn of the current buffer ended, if it was cut.
See `lispm-session-end-cut-turn'.  Return non-nil if it was."
  (let* ((items (cdr (lispm-session--parse)))
         (turn (car (last items)))
         (calls (cl-loop for step in (plist-get turn :steps)
                         append (plist-get step :calls)))
         (ran (cl-count-if (lambda (call) (plist-get call :result)) calls))
         (cut (cl-count-if (lambda (call) (not (or (plist-get call :result)
                                                  (plist-get call :request))))
                           calls))
         (unanswered (null (plist-get turn :steps)))
         (ended 0))
    (when (and (plist-get turn :turn) (not (plist-get turn :archived)))
      (when unanswered
        ;; The model reads that it never answered, not two prompts in a row.
        (let ((stream (lispm-session-begin-reply (current-buffer))))
          (lispm-session-stream-text stream lispm-session-not-answered-reply)
          (lispm-session-end-reply stream)))
      (save-excursion
        (goto-char (plist-get turn :start))
        (let ((case-fold-search nil) (inhibit-read-only t)
              (end (lispm-session--transcript-end)))
          (while (re-search-forward "^\\*\\*\\*\\* \\(TODO\\)\\(?:[ \t]\\|$\\)" end t)
            (replace-match "CANCELLED" t t nil 1)
            (forward-line 1)
            (insert (format-time-string "CLOSED: [%F %a %R]\n")
                    (lispm-session--prose
                     "Reason: ended unanswered: Emacs ended while this approval was awaited; \
the call did not run."))
            (setq end (lispm-session--transcript-end))
            (cl-incf ended))))
      (dolist (call calls)
        (unless (or (plist-get call :result) (plist-get call :request))
          (lispm-session-insert-result (current-buffer) (plist-get call :id)
                                       lispm-session-not-run-result t)))
      (when (or unanswered (> ended 0) (> cut 0))
        (lispm-session-insert-note
         (current-buffer)
         (if unanswered
             (format "Turn %d was cut: Emacs ended before it was answered.  Nothing of it \
runs again unless you ask." (plist-get turn :turn))
           (format "Turn %d was cut: Emacs ended during it.  %d call%s ran (their results \
are above); %d did not run%s.  Nothing of it runs again unless you ask."
                   (plist-get turn :turn) ran (if (= ran 1) "" "s") cut
                   (if (> ended 0) (format ", %d awaiting your approval" ended) ""))))
        t))))

(defun lispm-session-open (file)
  "Return a buffer in `lispm-session-mode' with the session of FILE.
A buffer that has it already is returned (a plain buffer visiting it
becomes a session's); otherwise the file is read.  Signal
`lispm-session-unreadable', naming the file and the line, if it does
not read back; the file is left as it is."
  (let* ((file (expand-file-name file))
         (open (or (cl-find-if (lambda (buffer)
                                 (equal (buffer-local-value 'lispm-session-file buffer) file))
                               (buffer-list))
                   (get-file-buffer file))))
    (if (and open (eq (buffer-local-value 'major-mode open) 'lispm-session-mode))
        open
      (let ((buffer (or open (generate-new-buffer (file-name-base file))))
            (done nil)
            (tail nil))
        (unwind-protect
            (with-current-buffer buffer
              (unless open
                (let ((coding-system-for-read 'utf-8-unix))
                  (lispm-insert-file-text file)))
              ;; A plain buffer of the file holds its text if unchanged.
              (when (or (not open) (and (not (buffer-modified-p))
                                        (verify-visited-file-modtime)))
                (let ((inhibit-read-only t))
                  (setq tail (lispm-session--read-tail file))))
              (setq lispm-session-file file)
              (let* ((cut (unless open (lispm-session--repair)))
                     (parsed (lispm-session--parse))
                     (header (car parsed))
                     (value (lambda (name)
                              (when-let* ((raw (cdr (assoc name header))))
                                (condition-case nil (lispm-session--decode-value raw)
                                  ((invalid-read-syntax end-of-file) raw))))))
                (lispm-session--setup file (funcall value "LISPM_SESSION")
                                      (funcall value "LISPM_FOLDER")
                                      (funcall value "LISPM_MODEL")
                                      (funcall value "LISPM_AGENT"))
                (setq lispm-session-role (funcall value "LISPM_ROLE")
                      lispm-session-callers (split-string (or (funcall value "LISPM_CALLERS")
                                                              "")))
                (setq lispm-session--turns
                      (apply #'max 0 (delq nil (mapcar (lambda (item) (plist-get item :turn))
                                                       (cdr parsed)))))
                (setq lispm-session--tail-from tail)
                (unless open
                  (rename-buffer (format "*%s %s*" (or lispm-session-agent "LispM")
                                         (lispm-session--project-name
                                          (or lispm-session-folder "session")))
                                 t)
                  (set-visited-file-modtime)
                  (setq lispm-session--dirty nil)
                  (set-buffer-modified-p nil)
                  (when cut
                    ;; The damaged file stays, beside the repaired one.
                    (let ((kept (format "%s.damaged-%s" file
                                        (format-time-string "%Y%m%d-%H%M%S"))))
                      (copy-file file kept t)
                      (lispm-session-insert-note
                       buffer (format "%s  The file as it was is kept as %s." cut
                                      (file-name-nondirectory kept))))
                    (lispm-session-save buffer)))
                (setq done t)))
          (unless (or done open)
            (kill-buffer buffer)))
        buffer))))

;;; Turns

(defmacro lispm-session--at-end (buffer &rest body)
  "Run BODY in BUFFER at the transcript's end, if BUFFER is live.
Return BODY's value, or nil if BUFFER is dead."
  (declare (indent 1) (debug t))
  `(when (buffer-live-p ,buffer)
     (with-current-buffer ,buffer
       (save-excursion
         (save-restriction
           (widen)
           (goto-char (lispm-session--transcript-end))
           (let ((inhibit-read-only t))
             ,@body))))))

(defun lispm-session-begin-turn (buffer text)
  "Begin a turn in BUFFER with TEXT, the user's words; return its number.
TEXT may also be a message another agent sent: a user-role message
all the same.  Return nil if BUFFER is dead."
  (lispm-session--at-end buffer
    (let* ((number (1+ lispm-session--turns))
           (line (lispm-session--one-line text 60)))
      (insert (format "* Turn %d%s\n" number (if (string-empty-p line) "" (concat ": " line)))
              (lispm-session--drawer `(("LISPM_TURN" . ,(number-to-string number))
                                       ("LISPM_TIME" . ,(lispm-session--time))
                                       ,@(and lispm-session-model
                                              `(("LISPM_MODEL" . ,lispm-session-model)))))
              (lispm-session--prose text))
      (setq lispm-session--turns number
            lispm-session--first-line (lispm-session--one-line text 72)
            lispm-session--step nil)
      (lispm-session-save buffer)
      number)))

(defun lispm-session-insert-note (buffer text)
  "Add TEXT to the current turn in BUFFER as a note: not the conversation."
  (lispm-session--at-end buffer
    (insert (mapconcat (lambda (line) (if (string-empty-p line) ":\n" (concat ": " line "\n")))
                       (split-string text "\n") ""))))

;;; The model's text, streamed

(cl-defstruct (lispm-session-stream (:constructor lispm-session--make-stream)
                                    (:copier nil))
  "Where one reply of the model goes, as it streams."
  (marker nil :documentation "Where the next text goes: before the reply's last newline.")
  (line-start nil :documentation "The start of the current line, while undecided.")
  (undecided t :documentation "Non-nil while the line so far is only blanks and commas.")
  (size 0 :documentation "The characters streamed so far.")
  (thoughts nil :documentation "Where the reply's next block of reasoning goes: before
its text.")
  (open-thought nil :documentation "The block of reasoning streaming, or nil: see
`lispm-session--open-thought'."))

(defun lispm-session--reply-heading ()
  "Return the heading of a reply of the model in the current buffer."
  (format "** %s\n" (or lispm-session-agent "LispM")))

(defun lispm-session-begin-reply (buffer)
  "Begin a reply of the model in BUFFER's current turn; return its stream.
Give the text to `lispm-session-stream-text', then call
`lispm-session-end-reply'.  Return nil if BUFFER is dead."
  (lispm-session--at-end buffer
    (insert (lispm-session--reply-heading))
    (let ((start (point)))
      (insert "\n")
      (setq lispm-session--step t)
      (lispm-session--make-stream :marker (copy-marker start t)
                                  :line-start (copy-marker start)
                                  :thoughts (copy-marker start)))))

(defun lispm-session-stream-text (stream text)
  "Append TEXT, a piece of the model's reply, to STREAM.
It costs what TEXT's length costs: TEXT goes in at a marker in one
insertion (each runs Org's change hooks: one a line made a 2 MB answer
cost 1.4 ms per KB), a line that would read as Org structure escaped
as it comes.  Nothing happens if the buffer is dead or the stream
ended."
  (let ((marker (and stream (lispm-session-stream-marker stream))))
    (when (and marker (buffer-live-p (marker-buffer marker)) (not (string-empty-p text)))
      (with-current-buffer (marker-buffer marker)
        (save-excursion
          ;; PIECES, newest first, are SIZE characters; LINE is where in
          ;; them the newest line begun in TEXT begins; EARLY is non-nil
          ;; if the line begun before TEXT must be escaped.
          (let ((inhibit-read-only t) (pos 0) (len (length text))
                (pieces nil) (size 0) (line nil) (early nil))
            (while (< pos len)
              (if (lispm-session-stream-undecided stream)
                  (let* ((stop (string-match "[^ \t,]" text pos))
                         (end (or stop len)))
                    (when (and stop (memq (aref text stop) '(?* ?# ?:)))
                      (if line
                          (progn (push "," pieces) (cl-incf size))
                        (setq early t)))
                    (push (substring text pos end) pieces)
                    (cl-incf size (- end pos))
                    (when stop
                      (setf (lispm-session-stream-undecided stream) nil))
                    (setq pos end))
                (let* ((newline (string-search "\n" text pos))
                       (end (if newline (1+ newline) len)))
                  (push (substring text pos end) pieces)
                  (cl-incf size (- end pos))
                  (when newline
                    (setq line size)
                    (setf (lispm-session-stream-undecided stream) t))
                  (setq pos end))))
            (when early
              (goto-char (lispm-session-stream-line-start stream))
              (insert ","))
            (goto-char marker)
            (insert (apply #'concat (nreverse pieces)))
            (when line
              (set-marker (lispm-session-stream-line-start stream) (- (point) (- size line))))
            (cl-incf (lispm-session-stream-size stream) len)))))))

(defun lispm-session-thought (text &optional signature redacted)
  "Return a block of the model's reasoning: TEXT, with SIGNATURE or REDACTED.
As a neutral message's :reasoning holds it: (:text TEXT [:signature S]
[:redacted R]), the last two only when given (see `lispm-model-stream')
and made of the characters of base64 and URLs' tokens, which the block's
first line keeps as they are; another is left out (the API that wrote
it is then told the thought without it, and refuses, as it would a
thought changed)."
  (cl-flet ((token (value) (and (stringp value)
                                (string-match-p "\\`[A-Za-z0-9+/=_.:-]+\\'" value)
                                value)))
    (append (list :text text)
            (and (token signature) (list :signature signature))
            (and (token redacted) (list :redacted redacted)))))

(defun lispm-session--thought-header (thought)
  "Return the header of THOUGHT's block: what follows its keyword."
  (cond ((plist-get thought :signature) (concat " :signature " (plist-get thought :signature)))
        ((plist-get thought :redacted) (concat " :redacted " (plist-get thought :redacted)))
        (t "")))

(defconst lispm-session--line-start-chars 1024
  "The characters of a line held before it is known whether it must be escaped.
Past them its start is written, escaped if need be, and the rest of the
line as it comes: a line without end costs what its length costs.")

(defun lispm-session--open-thought (stream)
  "Open a `reasoning' block in STREAM's reply, in the current buffer; return it.
It goes before the reply's text, after its earlier blocks.  The value,
kept in STREAM, is (HEADER BODY HELD RAW): markers at the end of its
first line and where its lines go, the line held, and whether a line's
start is written and its rest goes as it comes."
  (or (lispm-session-stream-open-thought stream)
      (let ((at (lispm-session-stream-thoughts stream)))
        (goto-char at)
        (let ((start (point)))
          (insert "#+begin_reasoning\n#+end_reasoning\n")
          (set-marker at (point))
          (when (= (lispm-session-stream-size stream) 0)
            (set-marker (lispm-session-stream-line-start stream) (point)))
          (setf (lispm-session-stream-open-thought stream)
                (list (copy-marker (+ start (length "#+begin_reasoning")))
                      (copy-marker (+ start (length "#+begin_reasoning\n")) t)
                      "" nil))))))

(defun lispm-session-stream-thinking (stream text)
  "Append TEXT, a piece of the model's reasoning, to STREAM's reply.
The reasoning goes in a `reasoning' block before the reply's text, after
its earlier blocks, opened at the first piece; a line goes in once its
start is known (it is whole, or longer than
`lispm-session--line-start-chars'), escaped as Org escapes a block's.
`lispm-session-insert-thought' ends it.  Nothing happens if the buffer
is dead or the stream ended."
  (let ((at (and stream (lispm-session-stream-thoughts stream))))
    (when (and at (buffer-live-p (marker-buffer at)) (not (string-empty-p text)))
      (with-current-buffer (marker-buffer at)
        (save-excursion
          (let* ((inhibit-read-only t)
                 (state (lispm-session--open-thought stream))
                 (pieces nil))
            (when (nth 3 state)
              (let ((end (string-search "\n" text)))
                (push (substring text 0 (if end (1+ end) (length text))) pieces)
                (setq text (if end (substring text (1+ end)) ""))
                (when end (setf (nth 3 state) nil))))
            (unless (nth 3 state)
              (let* ((held (concat (nth 2 state) text))
                     (last (let ((end (string-search "\n" held)) last)
                             (while end
                               (setq last end end (string-search "\n" held (1+ end))))
                             last)))
                (when last
                  (push (lispm-session--escape-block (substring held 0 (1+ last))) pieces)
                  (setq held (substring held (1+ last))))
                (when (> (length held) lispm-session--line-start-chars)
                  (push (lispm-session--escape-block held) pieces)
                  (setq held "")
                  (setf (nth 3 state) t))
                (setf (nth 2 state) held)))
            (when pieces
              (goto-char (nth 1 state))
              (insert (apply #'concat (nreverse pieces))))))))))

(defun lispm-session-insert-thought (stream thought)
  "End THOUGHT, a block of reasoning (`lispm-session-thought'), in STREAM's reply.
The block streaming (`lispm-session-stream-thinking') gets its last line
and, on its first line, THOUGHT's signature or redacted data, which the
conversation read back gives the model's API again; with none
streaming, THOUGHT's text goes in a block of its own first.  The block
is folded, and the session saved.  Nothing happens if the buffer is
dead or the stream ended."
  (let ((at (and stream (lispm-session-stream-thoughts stream))))
    (when (and at (buffer-live-p (marker-buffer at)))
      (unless (lispm-session-stream-open-thought stream)
        (lispm-session-stream-thinking stream (plist-get thought :text)))
      (with-current-buffer (marker-buffer at)
        (save-excursion
          (let* ((inhibit-read-only t)
                 (state (lispm-session--open-thought stream)))
            (goto-char (nth 1 state))
            (insert (lispm-session--escape-block (nth 2 state)) "\n")
            (goto-char (nth 0 state))
            (insert (lispm-session--thought-header thought))
            (set-marker (nth 0 state) nil)
            (set-marker (nth 1 state) nil)
            (setf (lispm-session-stream-open-thought stream) nil)
            (goto-char at)
            (forward-line -1)
            (re-search-backward "^#\\+begin_reasoning" nil t)
            (ignore-errors (org-fold-hide-block-toggle t t))))
        (lispm-session-save (current-buffer))))))

(defun lispm-session--read-thoughts (beg end)
  "Return the reasoning blocks at BEG, up to END, and where they stop.
\(THOUGHTS . POSITION): THOUGHTS as `lispm-session-thought' makes them."
  (save-excursion
    (goto-char beg)
    (let ((case-fold-search t) (thoughts nil))
      (while (looking-at "#\\+begin_reasoning\\([ \t].*\\)?$")
        (let* ((block (lispm-session--read-block (point) end "reasoning" t))
               (header (car block)))
          (push (lispm-session-thought
                 (cdr block)
                 (and (string-match ":signature[ \t]+\\([^ \t]+\\)" header)
                      (match-string 1 header))
                 (and (string-match ":redacted[ \t]+\\([^ \t]+\\)" header)
                      (match-string 1 header)))
                thoughts)
          (re-search-forward "^[ \t]*#\\+end_reasoning[ \t]*$" end)
          (forward-line 1)))
      (cons (nreverse thoughts) (point)))))

(defun lispm-session-end-reply (stream)
  "End STREAM, a reply of the model; return the characters it had."
  (when stream
    (dolist (marker (append (list (lispm-session-stream-marker stream)
                                  (lispm-session-stream-line-start stream)
                                  (lispm-session-stream-thoughts stream))
                            (take 2 (lispm-session-stream-open-thought stream))))
      (when (markerp marker) (set-marker marker nil)))
    (setf (lispm-session-stream-marker stream) nil
          (lispm-session-stream-line-start stream) nil
          (lispm-session-stream-thoughts stream) nil
          (lispm-session-stream-open-thought stream) nil)
    (lispm-session-stream-size stream)))

;;; Tool calls, their results and approvals

(defun lispm-session-insert-call (buffer call)
  "Add CALL, (:id I :name N :arguments JSON-TEXT), to BUFFER's current reply.
A reply heading comes first if the turn has none yet.  A program of a
tool of `lispm-session-lisp-tools' shows as Lisp, folded if long."
  (lispm-session--at-end buffer
    (unless lispm-session--step
      (insert (lispm-session--reply-heading))
      (setq lispm-session--step t))
    (let* ((name (substring-no-properties (plist-get call :name)))
           (arguments (substring-no-properties (or (plist-get call :arguments) "")))
           (lisp (lispm-session--lisp-program name arguments))
           (start (point)))
      (insert (format "*** Call %s\n" (lispm-session--one-line name 60))
              (lispm-session--drawer `(("LISPM_CALL_ID" . ,(plist-get call :id))
                                       ("LISPM_TOOL" . ,name)
                                       ,@(and (cdr lisp) `(("LISPM_JSON" . ,(cdr lisp))))))
              (if lisp
                  (lispm-session--block "src" lispm-session--lisp-header (car lisp))
                (lispm-session--block "src" " json" arguments)))
      (when (and lisp (lispm-session--long-p (car lisp)))
        (goto-char start)
        (org-fold-hide-entry)))
    (lispm-session-save buffer)))

(defun lispm-session--call-line (id)
  "Return the start of the line `:LISPM_CALL_ID: ID' in the call ID's drawer.
The last such call in the current buffer's transcript; a line alike in
a block (a program, a result) is passed over.  Signal
`lispm-session-error' if there is no such call."
  (save-excursion
    (let ((regexp (format "^:LISPM_CALL_ID:[ \t]+%s[ \t]*$"
                          (regexp-quote (lispm-session--encode-value id))))
          (case-fold-search nil)
          (found nil))
      (goto-char (lispm-session--transcript-end))
      (while (and (not found) (re-search-backward regexp nil t))
        (let ((line (point)))
          (save-excursion
            (when (and (re-search-backward lispm-session--heading-regexp nil t)
                       (= (length (match-string 1)) 3))
              (let ((drawer (ignore-error lispm-session-unreadable
                              (lispm-session--drawer-at (min (point-max) (1+ (match-end 0)))
                                                        (point-max)))))
                (when (and drawer (< line (cdr drawer)))
                  (setq found line)))))))
      (or found
          (lispm-signal 'lispm-session-error (list id) "No call %s in this session" id)))))

(defun lispm-session--call-end (id)
  "Return where the call ID's subtree ends in the current buffer.
Signal `lispm-session-error' if there is no such call."
  (let ((end (lispm-session--transcript-end))
        (case-fold-search nil))
    (goto-char (lispm-session--call-line id))
    (if (re-search-forward "^\\*\\{1,3\\}\\(?:[ \t]\\|$\\)" end t)
        (match-beginning 0)
      end)))

(defmacro lispm-session--at-call (buffer call-id end &rest body)
  "Run BODY in BUFFER at the end of the call CALL-ID's subtree.
END is bound to that position.  The buffer is widened, writable and
searched case-sensitively.  Return BODY's value, or nil if BUFFER is
dead; signal `lispm-session-error' if there is no such call."
  (declare (indent 3) (debug (form form symbolp body)))
  `(when (buffer-live-p ,buffer)
     (with-current-buffer ,buffer
       (save-excursion
         (save-restriction
           (widen)
           (let ((,end (lispm-session--call-end ,call-id))
                 (case-fold-search nil)
                 (inhibit-read-only t))
             (goto-char ,end)
             ,@body))))))

(defun lispm-session--diff-name (file side)
  "Return FILE's name in a diff's header: under SIDE (a or b) if in the folder."
  (let ((folder (and lispm-session-folder
                     (file-name-as-directory (expand-file-name lispm-session-folder)))))
    (lispm-session--encode-value
     (if (and folder (string-prefix-p folder file))
         (concat side "/" (substring file (length folder)))
       file))))

(defun lispm-session--diff-lines (prefix text)
  "Return TEXT's lines, each after PREFIX; and their count.
A last line without its newline is followed by diff's note of it."
  (if (string-empty-p text)
      (cons "" 0)
    (let* ((whole (string-suffix-p "\n" text))
           (lines (split-string (if whole (substring text 0 -1) text) "\n")))
      (cons (concat (mapconcat (lambda (line) (concat prefix line "\n")) lines "")
                    (if whole "" "\\ No newline at end of file\n"))
            (length lines)))))

(defun lispm-session--diff (changes)
  "Return the diff that records the edits of one call.
They are CHANGES, as `lispm-session-turn-changes' gives them."
  (mapconcat
   (lambda (change)
     (let* ((file (plist-get change :file))
            (header (format "--- %s\n+++ %s\n"
                            (if (plist-get change :created) "/dev/null"
                              (lispm-session--diff-name file "a"))
                            (if (plist-get change :deleted) "/dev/null"
                              (lispm-session--diff-name file "b")))))
       (if (plist-get change :lost)
           (format "%s# LispM kept no copy: %s\n" header
                   (lispm-session--one-line (plist-get change :lost) 200))
         (let ((old (lispm-session--diff-lines "-" (plist-get change :old)))
               (new (lispm-session--diff-lines "+" (plist-get change :new)))
               (line (plist-get change :line)))
           (format "%s@@ -%d,%d +%d,%d @@\n%s%s" header
                   (if (> (cdr old) 0) line (1- line)) (cdr old)
                   (if (> (cdr new) 0) line (1- line)) (cdr new)
                   (car old) (car new))))))
   changes ""))

(defun lispm-session-insert-result (buffer call-id text &optional refused changes)
  "Add TEXT as the result of the call CALL-ID in BUFFER.
REFUSED non-nil says the call was refused (TEXT says why).  A long
result is folded.  TEXT is what the model gets too: cut it first with
`lispm-session-cap-result'.  CHANGES, what the call changed in files
as `lispm-session-turn-changes' gives them, are written after it, as a
diff (folded if long): the record a revert can use once this Emacs is
gone."
  (lispm-session--at-call buffer call-id start
    (let ((diff (and changes (lispm-session--diff changes)))
          (between nil))
      ;; All in, then folded: an insertion next to a fold costs.
      (insert (if refused "**** Refused\n" "**** Result\n")
              (lispm-session--block "example" "" text))
      (setq between (point))
      (when diff
        (insert "**** Changes\n"
                (lispm-session--block "src" " diff" (string-remove-suffix "\n" diff))))
      ;; Each part folded as `org-fold-hide-entry' would, its
      ;; bounds known: from its heading's end to its last line's.
      (when (and diff (lispm-session--long-p diff))
        (org-fold-region (save-excursion (goto-char between) (line-end-position))
                         (1- (point)) t 'outline))
      (when (lispm-session--long-p text)
        (org-fold-region (save-excursion (goto-char start) (line-end-position))
                         (1- between) t 'outline))))
  (lispm-session-save buffer))

(defun lispm-session-record-request (buffer call-id request-id)
  "Record in BUFFER that the call CALL-ID made the request REQUEST-ID; save.
The call's drawer gets `:LISPM_REQUEST:', and the file is saved (and
committed) at once, not at the turn's end, so that an Emacs that dies
while the call waits leaves the request on disk."
  (lispm-session--at-call buffer call-id end
    (goto-char (lispm-session--call-line call-id))
    (when (re-search-forward "^[ \t]*:END:[ \t]*$" end t)
      (goto-char (match-beginning 0))
      (insert (format ":LISPM_REQUEST: %s\n"
                      (lispm-session--encode-value request-id))))
    (lispm-session-save buffer (format "session %s turn %d: call %s waits on request %s"
                                       lispm-session-id lispm-session--turns
                                       call-id request-id))))

(defun lispm-session-insert-approval (buffer call-id title)
  "Add a TODO item TITLE to the call CALL-ID in BUFFER: an approval awaited."
  (lispm-session--at-call buffer call-id end
    (insert (format "**** TODO %s\n" (lispm-session--one-line title 200))))
  (lispm-session-save buffer))

(defun lispm-session-decide-approval (buffer call-id state &optional reason)
  "Record the decision on the approval of the call CALL-ID in BUFFER.
STATE is `done' (approved: the TODO item becomes DONE) or `cancelled'
\(denied: it becomes CANCELLED, with REASON below it).  Return non-nil
if there was an approval waiting."
  (lispm-session--at-call buffer call-id end
    (when (and (re-search-backward "^\\*\\*\\*\\* \\(TODO\\)\\(?:[ \t]\\|$\\)" nil t)
               (not (save-excursion
                      (save-match-data
                        (re-search-forward "^\\*\\{1,3\\}\\(?:[ \t]\\|$\\)" end t)))))
      (replace-match (if (eq state 'done) "DONE" "CANCELLED") t t nil 1)
      (forward-line 1)
      (insert (format-time-string "CLOSED: [%F %a %R]\n"))
      (when (and reason (not (eq state 'done)) (not (string-empty-p reason)))
        (insert (lispm-session--prose (concat "Reason: " reason))))
      (lispm-session-save buffer)
      t)))

;;; Tool output, cut at the source

(defun lispm-session-cap-result (text)
  "Return TEXT, a tool's result, cut to what the model and the document get.
A line keeps at most `lispm-session-result-line-limit' characters (a
cut line ends in \"…\"), the whole at most `lispm-session-result-limit';
if anything was cut, a last line says \"[LispM cut N of M characters]\"."
  (let ((total (length text))
        (line-limit lispm-session-result-line-limit))
    (if (and (<= total lispm-session-result-limit)
             (not (string-match-p (format "[^\n]\\{%d\\}" (1+ line-limit)) text)))
        text
      (let ((budget (- lispm-session-result-limit 80))
            (pos 0) (size 0) (kept 0) (pieces nil))
        (while (and (< pos total) (< size budget))
          (let* ((newline (string-search "\n" text pos))
                 (line-end (or newline total))
                 (room (- budget size)))
            (if (> (- line-end pos) line-limit)
                ;; A long line keeps its start and an ellipsis.
                (let ((take (min (1- line-limit) room)))
                  (push (substring text pos (+ pos take)) pieces)
                  (push (if newline "…\n" "…") pieces)
                  (cl-incf kept (+ take (if newline 1 0)))
                  (cl-incf size (+ take 2))
                  (setq pos (if newline (1+ newline) total)))
              (let ((take (min (- (if newline (1+ newline) total) pos) room)))
                (push (substring text pos (+ pos take)) pieces)
                (cl-incf kept take)
                (cl-incf size take)
                (setq pos (+ pos take))))))
        (let ((body (apply #'concat (nreverse pieces))))
          (concat body (if (or (string-empty-p body) (string-suffix-p "\n" body)) "" "\n")
                  (format "[LispM cut %d of %d characters]" (- total kept) total)))))))

;;; The input area

(defun lispm-session-input-start (buffer)
  "Return the start of the draft in BUFFER: after the input heading's line."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (lispm-session--transcript-end))
      (min (point-max) (1+ (line-end-position))))))

(defun lispm-session-input (buffer)
  "Return the draft in BUFFER: what the user typed below the input heading.
Leading empty lines and trailing blanks are left out."
  (with-current-buffer buffer
    (string-trim (buffer-substring-no-properties (lispm-session-input-start buffer)
                                                 (point-max))
                 "\n+" "[ \t\n]+")))

(defun lispm-session-take-input (buffer)
  "Remove the draft from BUFFER, and return it as `lispm-session-input' does."
  (with-current-buffer buffer
    (let ((text (lispm-session-input buffer)))
      (delete-region (lispm-session-input-start buffer) (point-max))
      text)))

;;; Saving and committing

;; A session file is never written in place (`lispm-session--write'),
;; and a turn's commit is queued with lispm-session-git.el, which
;; commits the file as the turn left it, however late git takes it.
;;
;; A step of a turn changes only the end of the document, so a step's
;; save does not write the whole file, which would cost each step of a
;; long session in proportion to its length: the text from the first
;; change since the file was last written whole goes to its tail file
;; (`lispm-session--tail-file'), itself written whole, at once.  The
;; session file is written whole at a turn's end (before its commit),
;; and whenever the tail would be more than half the document; the tail
;; file is then deleted.  Opening a session reads its tail file after it
;; (`lispm-session--read-tail'), if the tail was written against this
;; very file (its size and modification time): a SIGKILL anywhere loses
;; nothing saved.

(defconst lispm-session--tail-magic "LISPM-SESSION-TAIL 1"
  "The first word of a tail file's first line.")

(defun lispm-session--tail-file (file)
  "Return the name of the tail file of the session FILE."
  (expand-file-name (concat "." (file-name-nondirectory file) ".tail")
                    (file-name-directory file)))

(defun lispm-session--file-stamp (file)
  "Return what identifies FILE as written: its size and modification time."
  (let ((attributes (file-attributes file)))
    (format "%d %s" (file-attribute-size attributes)
            (format-time-string "%s.%N" (file-attribute-modification-time attributes)))))

(defun lispm-session--bytes (beg end)
  "Return the text between BEG and END as bytes, as in the session file.
The buffer's own bytes, made unibyte (as `encode-coding-string' to
`utf-8-unix' gives them, a raw byte one byte, at a third of its cost)."
  (let ((buffer (current-buffer)))
    (with-temp-buffer
      (insert-buffer-substring-no-properties buffer beg end)
      (set-buffer-multibyte nil)
      (buffer-string))))

(defun lispm-session--write-tail (file from)
  "Write the text of the current buffer from FROM to the tail file of FILE."
  (lispm-write-file-whole
   (lispm-session--tail-file file)
   (concat (format "%s %d %s\n" lispm-session--tail-magic from
                   (lispm-session--file-stamp file))
           (lispm-session--bytes from (point-max)))
   nil t)
  (setq lispm-session--tail-from from))

(defun lispm-session--read-tail (file)
  "Put the text of FILE's tail file in place in the current buffer.
The buffer holds FILE's text.  Return where the tail begins, or nil if
there is none; a tail written against another version of FILE is not
read, with a warning."
  (let ((tail (lispm-session--tail-file file)))
    (when (file-exists-p tail)
      (let ((text (with-temp-buffer
                    (let ((coding-system-for-read 'utf-8-unix))
                      (lispm-insert-file-text tail))
                    (buffer-string))))
        (if (and (string-match (format "\\`%s \\([0-9]+\\) \\([^\n]*\\)\n"
                                       (regexp-quote lispm-session--tail-magic))
                               text)
                 (equal (match-string 2 text) (lispm-session--file-stamp file))
                 (<= (point-min) (string-to-number (match-string 1 text)) (point-max)))
            (let ((from (string-to-number (match-string 1 text))))
              (delete-region from (point-max))
              (goto-char from)
              (insert (substring text (match-end 0)))
              from)
          (display-warning 'lispm-session
                           (format "%s was not written against %s as it is; it is not read"
                                   tail file))
          nil)))))

(defun lispm-session-saved-text (file)
  "Return the document of the session FILE as saved, its tail included."
  (with-temp-buffer
    (let ((coding-system-for-read 'utf-8-unix))
      (lispm-insert-file-text file))
    (lispm-session--read-tail file)
    (buffer-string)))

(defun lispm-session--write (file &optional whole)
  "Write the current buffer to FILE, its session file, at once.
Unless WHOLE, and if the text changed since FILE was last written is
less than half the document, it goes to the tail file (see
\"Saving and committing\"); otherwise the document goes to a new file
renamed over FILE (`lispm-write-file-whole'), and the tail file is
deleted.  A SIGKILL at any moment leaves the document saved last or
this one, never one cut, and a commit's pinned name (see
`lispm-sessions-enqueue') keeps the file it was given.  Nothing is
flushed to disk, here or at a turn's end: the kernel keeps what Emacs
wrote when Emacs dies, and a flush would cost each step a millisecond
and more, waiting on the disk; a turn's commit is written, and flushed,
by git.  Nothing is written if nothing changed since the last save and
the file is as it left it."
  (let ((inhibit-message t)
        (exists (file-exists-p file)))
    (unless (or (verify-visited-file-modtime) (not exists))
      ;; Written behind LispM's back: keep that version, then write ours.
      (let ((kept (format "%s.%s.outside" file (format-time-string "%Y%m%d-%H%M%S"))))
        (copy-file file kept t)
        (display-warning 'lispm-session
                         (format "%s changed on disk; that version is kept as %s"
                                 file kept)))
      (setq lispm-session--dirty (point-min)
            lispm-session--tail-from nil))
    (when (or lispm-session--dirty (not exists)
              (and whole lispm-session--tail-from))
      (let ((from (and exists lispm-session--dirty
                       (min lispm-session--dirty
                            (or lispm-session--tail-from lispm-session--dirty)))))
        (if (and (not whole) from (< (* 2 (- (point-max) from)) (buffer-size)))
            (lispm-session--write-tail file from)
          (lispm-write-file-whole file (lispm-session--bytes (point-min) (point-max)) nil t)
          (set-visited-file-modtime)
          (let ((tail (lispm-session--tail-file file)))
            (when (file-exists-p tail)
              (delete-file tail)))
          (setq lispm-session--tail-from nil)))
      (set-buffer-modified-p nil)
      (setq lispm-session--dirty nil))))

(defun lispm-session-save (buffer &optional message)
  "Save the session in BUFFER to its file, and queue a commit with MESSAGE.
Without MESSAGE, only save: a step of a turn (a call, its result, an
approval), whose commit comes at the turn's end.
Return non-nil if the file was saved.  No hook runs and nothing is
asked; if the file cannot be written, warn and leave the buffer as it
is, unsaved."
  (when (and (buffer-live-p buffer) (buffer-local-value 'lispm-session-file buffer))
    (with-current-buffer buffer
      (save-restriction
        (widen)
        (let ((file lispm-session-file))
          (condition-case err
              (let ((directory (file-name-directory file)))
                (unless (file-directory-p directory)
                  (with-file-modes #o700 (make-directory directory t)))
                (lispm-session--write file message)
                (when message
                  (lispm-sessions-enqueue file message))
                t)
            (file-error
             (display-warning 'lispm-session
                              (format "Session %s was not saved: %s" lispm-session-id
                                      (error-message-string err)))
             nil)))))))

(defun lispm-session-end-turn (buffer)
  "End the current turn in BUFFER: save its file and queue its commit.
The commit's message is \"session S turn N: FIRST LINE\".  Emacs does
not wait for git."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (lispm-session-save buffer (format "session %s turn %d: %s" lispm-session-id
                                         lispm-session--turns
                                         (or lispm-session--first-line ""))))))

;;; The model

(defun lispm-session-set-model (buffer model)
  "Make MODEL, a name of `lispm-models', the model of BUFFER's session.
The header says so from now on (a session resumed goes on with it);
each turn's drawer keeps the model it began with.  Save and commit."
  (with-current-buffer buffer
    (let ((old lispm-session-model))
      (save-excursion
        (save-restriction
          (widen)
          (let ((inhibit-read-only t)
                (case-fold-search t)
                (line (format "#+LISPM_MODEL: %s" (lispm-session--encode-value model)))
                (header-end (lispm-session--header-end)))
            (goto-char (point-min))
            (if (re-search-forward "^#\\+LISPM_MODEL:.*$" header-end t)
                (replace-match line t t)
              (goto-char (point-min))
              (if (re-search-forward "^#\\+LISPM_FOLDER:.*$" header-end t)
                  (insert "\n" line)
                (insert line "\n"))))))
      (setq lispm-session-model model)
      (lispm-session-save buffer (format "session %s: model %s, after %s"
                                         lispm-session-id model (or old "none"))))))

;;; The plan

(defconst lispm-session-plan-states '(todo doing done cancelled)
  "The states of a plan's item, as its Org TODO keyword says.")

(defvar-local lispm-session--plan-found nil
  "Where `lispm-session-plan' last looked: (PLAN . SCANNED), or nil.
PLAN is a marker at the newest plan's heading, or nil if there was
none; SCANNED a marker at the transcript's end then.  Only the text
after SCANNED can hold a newer plan, unless the plan tool wrote one
\(which forgets this).")

(defun lispm-session--plan-at-p (position)
  "Return non-nil if a plan's heading, with its drawer, begins at POSITION."
  (save-excursion
    (goto-char position)
    (let ((case-fold-search nil))
      (and (bolp) (looking-at "\\*\\* Plan[ \t]*$")
           (progn (forward-line 1) (looking-at-p "[ \t]*:PROPERTIES:"))))))

(defun lispm-session--newest-plan (from end)
  "Return where the newest plan's heading between FROM and END begins, or nil."
  (save-excursion
    (goto-char end)
    (let ((case-fold-search nil) found)
      (while (and (null found) (re-search-backward "^\\*\\* Plan[ \t]*$" from t))
        (when (lispm-session--plan-at-p (point))
          (setq found (point))))
      found)))

(defun lispm-session-plan (buffer)
  "Return the newest plan in BUFFER's session, as the document has it now.
A list of (:state STATE :text TEXT), STATE one of
`lispm-session-plan-states', in the document's order (the user may
have edited, reordered, added or cancelled items); nil if no turn has
a plan.  Only the text written since the last look is searched, so its
cost does not grow with the session (see `lispm-session--plan-found')."
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (let* ((case-fold-search nil)
               (end (lispm-session--transcript-end))
               (found lispm-session--plan-found)
               (scanned (and found (marker-position (cdr found))))
               (known (and found (car found) (marker-position (car found))))
               (again (and scanned (<= scanned end)))
               (start (cond ((and again (lispm-session--newest-plan scanned end)))
                            ((and again (null known)) nil)
                            ((and again (lispm-session--plan-at-p known)) known)
                            ;; Never looked, or the plan known is gone: look everywhere.
                            (t (lispm-session--newest-plan (point-min) end)))))
          (when found
            (set-marker (cdr found) nil)
            (when (car found) (set-marker (car found) nil)))
          (setq lispm-session--plan-found (cons (and start (copy-marker start))
                                                (copy-marker end)))
          (when start
            (goto-char start)
            (forward-line 1)
            (let ((stop (save-excursion
                          (if (re-search-forward "^\\*\\{1,2\\}[ \t]" end t)
                              (match-beginning 0)
                            end)))
                  (items nil))
              (while (re-search-forward "^\\*\\*\\*[ \t]+\\(.*\\)$" stop t)
                (let ((title (string-trim-right (match-string-no-properties 1))))
                  (push (if (string-match lispm-session--plan-item-regexp title)
                            (list :state (intern (downcase (match-string 1 title)))
                                  :text (match-string 2 title))
                          (list :state 'todo :text title))
                        items)))
              (nreverse items))))))))

(defun lispm-session--plan-region (turn-start turn-end)
  "Return (BEG . END) of the plan between TURN-START and TURN-END, or nil."
  (save-excursion
    (goto-char turn-start)
    (let ((case-fold-search nil) found)
      (while (and (not found) (re-search-forward "^\\*\\* Plan[ \t]*$" turn-end t))
        (let ((beg (match-beginning 0)))
          (forward-line 1)
          (when (looking-at "[ \t]*:PROPERTIES:")
            (setq found (cons beg (if (re-search-forward "^\\*\\{1,2\\}[ \t]" turn-end t)
                                      (match-beginning 0)
                                    turn-end))))))
      found)))

(defun lispm-session-set-plan (buffer items)
  "Make ITEMS the plan of the current turn in BUFFER's session, and save.
ITEMS are (:state STATE :text TEXT).  The turn's plan is replaced where
it is; a turn without one gets it first, before its replies.  Return
the plan as the document then reads it back."
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (let* ((inhibit-read-only t)
               (parsed (cdr (lispm-session--parse)))
               (turn (car (last (cl-remove-if-not (lambda (item) (plist-get item :turn))
                                                  parsed))))
               (end (lispm-session--transcript-end))
               (text (concat "** Plan\n"
                             (lispm-session--drawer '(("LISPM_PLAN" . "t")))
                             (mapconcat
                              (lambda (item)
                                (format "*** %s %s\n"
                                        (upcase (symbol-name (plist-get item :state)))
                                        (lispm-session--one-line (plist-get item :text) 200)))
                              items ""))))
          (unless turn
            (lispm-signal 'lispm-session-error nil "The session has no turn yet"))
          (if-let* ((region (lispm-session--plan-region (plist-get turn :start) end)))
              (progn (delete-region (car region) (cdr region))
                     (goto-char (car region)))
            ;; First under the turn, before its replies: the calls and
            ;; replies to come are added at the end.
            (goto-char (plist-get turn :start))
            (forward-line 1)
            (goto-char (if (re-search-forward "^\\*\\*[ \t]" end t) (match-beginning 0) end)))
          (insert text))))
    (with-current-buffer buffer
      (setq lispm-session--plan-found nil))
    (lispm-session-save buffer)
    (lispm-session-plan buffer)))

;;; Marks of rewinds and reverts

(defun lispm-session-turns (buffer)
  "Return each turn of the session in BUFFER, oldest first, as a plist.
Each is (:turn N :archived B :rewound B :reverted TIME): TIME, if the
turn's changes are reverted, when (see `lispm-session-mark-reverted')."
  (with-current-buffer buffer
    (cl-loop for item in (cdr (lispm-session--parse))
             when (plist-get item :turn)
             collect (list :turn (plist-get item :turn) :archived (plist-get item :archived)
                           :rewound (plist-get item :rewound)
                           :reverted (plist-get item :reverted)))))

(defun lispm-session-turn-words (buffer number)
  "Return the user's words of turn NUMBER in BUFFER's session, or nil."
  (with-current-buffer buffer
    (plist-get (cl-find number (cdr (lispm-session--parse))
                        :key (lambda (item) (plist-get item :turn)))
               :user)))

(defun lispm-session--turn-start (number)
  "Return the start of turn NUMBER's heading in the current buffer, or signal.
It is looked for back from the transcript's end, where the turn at hand
is, as LispM writes a turn (its drawer's first property its number):
finding the last turn costs what that turn's length costs.  A document
written otherwise is read whole."
  (or (save-excursion
        (goto-char (lispm-session--transcript-end))
        (let ((case-fold-search nil)
              (number-line (format "[ \t]*:LISPM_TURN:[ \t]+%d[ \t]*$" number))
              (found nil))
          (while (and (not found) (re-search-backward "^\\* " nil t))
            (save-excursion
              (forward-line 1)
              (when (looking-at-p "[ \t]*:PROPERTIES:[ \t]*$")
                (forward-line 1)
                (when (looking-at-p number-line)
                  (setq found t)))))
          (and found (point))))
      (plist-get (cl-find number (cdr (lispm-session--parse))
                          :key (lambda (item) (plist-get item :turn)))
                 :start)
      (lispm-signal 'lispm-session-error (list number) "No turn %d in this session" number)))

(defun lispm-session--remove-tag (position tag)
  "Remove TAG from the heading at POSITION."
  (save-excursion
    (goto-char position)
    (let ((end (line-end-position)))
      (when (re-search-forward (concat ":" (regexp-quote tag) ":") end t)
        (replace-match ":")
        (goto-char (line-beginning-position))
        ;; No tag left: the colons go, and the blanks before them.
        (when (re-search-forward "[ \t]+::?[ \t]*$" (line-end-position) t)
          (replace-match ""))))))

(defun lispm-session-mark-rewound (buffer numbers on)
  "Tag each turn of NUMBERS in BUFFER's session REWOUND if ON, else untag it.
A rewound turn stays in the document, and the model no longer sees it
\(`lispm-session-messages').  Save and commit."
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (let ((inhibit-read-only t))
          (dolist (number numbers)
            (let* ((start (lispm-session--turn-start number))
                   (tags (save-excursion
                           (goto-char start)
                           (lispm-session--tags (buffer-substring-no-properties
                                                 start (line-end-position))))))
              (cond ((and on (not (member "REWOUND" tags)))
                     (lispm-session--add-tag start "REWOUND"))
                    ((and (not on) (member "REWOUND" tags))
                     (lispm-session--remove-tag start "REWOUND"))))))))
    (lispm-session-save buffer (format "session %s: turns %s %s" lispm-session-id
                                       (mapconcat #'number-to-string numbers " ")
                                       (if on "rewound" "restored to the conversation")))))

(defun lispm-session--set-turn-property (number name value)
  "Make turn NUMBER's property NAME VALUE in the current buffer; nil: none."
  (save-excursion
    (save-restriction
      (widen)
      (let ((inhibit-read-only t)
            (case-fold-search nil))
        (goto-char (lispm-session--turn-start number))
        (forward-line 1)
        (let ((drawer-end (save-excursion (re-search-forward "^[ \t]*:END:[ \t]*$"))))
          (when (re-search-forward (format "^[ \t]*:%s:.*\n" (regexp-quote name)) drawer-end t)
            (replace-match "")))
        (when value
          (re-search-forward "^[ \t]*:END:[ \t]*$")
          (goto-char (line-beginning-position))
          (insert (format ":%s: %s\n" name (lispm-session--encode-value value))))))))

(defun lispm-session-mark-reverted (buffer number reverted)
  "Record in BUFFER's session that what turn NUMBER changed is REVERTED.
REVERTED is a time string, or nil: they are in place again.  The mark
is the turn's `:LISPM_REVERTED:' property.  Save and commit."
  (with-current-buffer buffer
    (lispm-session--set-turn-property number "LISPM_REVERTED" reverted)
    (lispm-session-save buffer (format "session %s: turn %d %s" lispm-session-id number
                                       (if reverted "reverted" "reapplied")))))

;;; Tokens and cost

(defun lispm-session--usage-text (usage)
  "Return USAGE as a property writes it: IN OUT CACHED REASONING [COST].
USAGE is (:input N :output N :cached N :reasoning N :cost C)."
  (format "%d %d %d %d%s" (plist-get usage :input) (plist-get usage :output)
          (or (plist-get usage :cached) 0) (or (plist-get usage :reasoning) 0)
          (if (plist-get usage :cost) (format " %.6f" (plist-get usage :cost)) "")))

(defun lispm-session--read-usage (text)
  "Return the usage written as TEXT, a property's value, or nil.
An older session's IN OUT [COST] reads with no cached or reasoning tokens."
  (when (and text (string-match "\\`\\([0-9]+\\) \\([0-9]+\\)\\(?: \\([0-9]+\\) \\([0-9]+\\)\\)?\\(?: \\([0-9]*\\.[0-9]+\\)\\)?\\'"
                                text))
    (list :input (string-to-number (match-string 1 text))
          :output (string-to-number (match-string 2 text))
          :cached (string-to-number (or (match-string 3 text) "0"))
          :reasoning (string-to-number (or (match-string 4 text) "0"))
          :cost (and (match-string 5 text) (string-to-number (match-string 5 text))))))

(defvar-local lispm-session--usage-of nil
  "What each turn recorded it used, by turn number, or nil until read.
A hash table: the turns' drawers read once (`lispm-session-usage'), then
kept by `lispm-session-record-usage', so a turn's end does not read the
whole document again.")

(defun lispm-session-usage (buffer)
  "Return the sum of what each turn of BUFFER's session used, a plist.
\(:input N :output N :cached N :reasoning N :cost C :turns K): the tokens
the turns' drawers record (`lispm-session-record-usage'), and their cost,
nil if no turn had a price."
  (with-current-buffer buffer
    (unless lispm-session--usage-of
      (let ((table (make-hash-table)))
        (dolist (item (cdr (lispm-session--parse)))
          (when-let* ((usage (lispm-session--read-usage (plist-get item :usage))))
            (puthash (plist-get item :turn) usage table)))
        (setq lispm-session--usage-of table)))
    (let ((sum (list :input 0 :output 0 :cached 0 :reasoning 0)) (cost nil) (turns 0))
      (maphash (lambda (_turn usage)
                 (cl-incf turns)
                 (dolist (key '(:input :output :cached :reasoning))
                   (setq sum (plist-put sum key (+ (plist-get sum key) (plist-get usage key)))))
                 (when (plist-get usage :cost)
                   (setq cost (+ (or cost 0) (plist-get usage :cost)))))
               lispm-session--usage-of)
      (append sum (list :cost cost :turns turns)))))

(defun lispm-session-usage-line (usage)
  "Return USAGE, as `lispm-session-usage' gives it, in words."
  (format "%d input (%d cached), %d output tokens%s%s"
          (plist-get usage :input) (or (plist-get usage :cached) 0) (plist-get usage :output)
          (if (> (or (plist-get usage :reasoning) 0) 0)
              (format " (%d reasoning)" (plist-get usage :reasoning))
            "")
          (if (plist-get usage :cost) (format ", $%.4f" (plist-get usage :cost)) "")))

(defun lispm-session-record-usage (buffer number usage)
  "Record that turn NUMBER of BUFFER's session used USAGE.
USAGE is (:input N :output N :cached N :reasoning N :cost C), C nil
without a price: the
turn's `:LISPM_USAGE:' property, and the header's `#+LISPM_USAGE:' the
session's sum.  Saved with the turn's end."
  (with-current-buffer buffer
    (lispm-session-usage buffer)
    (lispm-session--set-turn-property number "LISPM_USAGE" (lispm-session--usage-text usage))
    (puthash number (lispm-session--read-usage (lispm-session--usage-text usage))
             lispm-session--usage-of)
    (let ((line (format "#+LISPM_USAGE: %s"
                        (lispm-session--encode-value
                         (lispm-session-usage-line (lispm-session-usage buffer))))))
      (save-excursion
        (save-restriction
          (widen)
          (let ((inhibit-read-only t)
                (case-fold-search t)
                (header-end (lispm-session--header-end)))
            (goto-char (point-min))
            (if (re-search-forward "^#\\+LISPM_USAGE:.*$" header-end t)
                (replace-match line t t)
              (goto-char (point-min))
              (when (re-search-forward "^#\\+LISPM_FOLDER:.*$" header-end t)
                (insert "\n" line)))))))))

(defun lispm-session--header-end ()
  "Return where the current buffer's header ends: at its first top heading.
The transcript's end if it has none."
  (save-excursion
    (goto-char (point-min))
    (let ((case-fold-search nil)
          (end (lispm-session--transcript-end)))
      (if (re-search-forward "^\\* " end t) (match-beginning 0) end))))

(defun lispm-session-time ()
  "Return the time now as the session's properties write it."
  (lispm-session--time))

;;; Forks

(defun lispm-session-fork (buffer number)
  "Write a new session with the history of BUFFER's session up to turn NUMBER.
The new file, in `lispm-sessions-directory', has a new id, the header
of the first with `#+LISPM_FORKED_FROM:' naming it and the turn, and
its turns and summaries up to turn NUMBER's end, as they are; it is
committed.  Return the new file's name."
  (with-current-buffer buffer
    (save-excursion
      (save-restriction
        (widen)
        (let* ((items (cdr (lispm-session--parse)))
               (start (lispm-session--turn-start number))
               (after (cl-find-if (lambda (item) (> (plist-get item :start) start)) items))
               (end (if after (plist-get after :start) (lispm-session--transcript-end)))
               (first (plist-get (car items) :start))
               (header-end (or first end))
               (directory (file-name-directory lispm-session-file))
               (base (format "%s-fork-%d" lispm-session-id number))
               (id base)
               (serial 1))
          (while (lispm-session--taken-p (expand-file-name (concat id ".org") directory))
            (setq serial (1+ serial) id (format "%s-%d" base serial)))
          (let ((file (expand-file-name (concat id ".org") directory))
                (header (buffer-substring-no-properties (point-min) header-end))
                (body (buffer-substring-no-properties header-end end)))
            (with-temp-buffer
              (insert header)
              (goto-char (point-min))
              (when (re-search-forward "^#\\+LISPM_SESSION:.*$" nil t)
                (replace-match (format "#+LISPM_SESSION: %s\n#+LISPM_FORKED_FROM: %s"
                                       (lispm-session--encode-value id)
                                       (lispm-session--encode-value
                                        (format "%s turn %d" lispm-session-id number)))
                               t t))
              (goto-char (point-max))
              (insert body)
              (unless (bolp) (insert "\n"))
              (insert lispm-session--input-heading "\n")
              (with-file-modes #o600
                (lispm-write-file-whole file (buffer-string) 'utf-8-unix t)))
            (lispm-sessions-enqueue file (format "session %s: forked from %s at turn %d"
                                                 id lispm-session-id number))
            file))))))

;;; Listing the sessions

(defun lispm-sessions--peek (file)
  "Return the entry of `lispm-sessions-list' for FILE, or nil if no session.
Only the file's first 16 KB are read."
  (with-temp-buffer
    (let ((coding-system-for-read 'utf-8-unix))
      (lispm-insert-file-text file 0 16384))
    (let* ((case-fold-search nil)
           (first (save-excursion (goto-char (point-min))
                                  (if (re-search-forward "^\\* " nil t)
                                      (match-beginning 0)
                                    (point-max))))
           (header (lispm-session--keywords (point-min) first))
           (value (lambda (name)
                    (when-let* ((raw (cdr (assoc name header))))
                      (condition-case nil (lispm-session--decode-value raw)
                        ((invalid-read-syntax end-of-file) raw))))))
      (when (assoc "LISPM_SESSION" header)
        (goto-char first)
        (let ((first-line ""))
          (when (re-search-forward "^:LISPM_TURN:" nil t)
            (when (re-search-forward "^[ \t]*:END:[ \t]*\n" nil t)
              (let ((line (buffer-substring-no-properties
                           (point) (if (re-search-forward "^\\*" nil t)
                                       (match-beginning 0)
                                     (point-max)))))
                (setq first-line (lispm-session--one-line
                                  (lispm-session--unescape-prose line) 80)))))
          (list :file file
                :id (funcall value "LISPM_SESSION")
                :project (funcall value "LISPM_FOLDER")
                :model (funcall value "LISPM_MODEL")
                :first-line first-line
                :time (float-time (file-attribute-modification-time
                                   (file-attributes file)))))))))

(defun lispm-sessions-list ()
  "Return the sessions in `lispm-sessions-directory', the last changed first.
Each is a plist (:file F :id ID :project FOLDER :model M :first-line
LINE :time SECONDS), :time when its file was last written."
  (let ((directory lispm-sessions-directory) (sessions nil))
    (when (file-directory-p directory)
      (dolist (file (directory-files directory t "\\`[^.#].*\\.org\\'" t))
        (when-let* ((session (and (file-regular-p file) (lispm-sessions--peek file))))
          (push session sessions))))
    (sort sessions (lambda (a b)
                     (if (= (plist-get a :time) (plist-get b :time))
                         (string> (plist-get a :file) (plist-get b :file))
                       (> (plist-get a :time) (plist-get b :time)))))))

;;; Compaction

(defun lispm-session--replaced-size (items summary)
  "Count the characters of model and tool text that ITEMS and SUMMARY hold.
ITEMS are turns."
  (+ (if summary (length (plist-get summary :summary)) 0)
     (cl-loop for turn in items
              sum (cl-loop for step in (plist-get turn :steps)
                           sum (+ (length (plist-get step :text))
                                  (cl-loop for call in (plist-get step :calls)
                                           sum (+ (length (plist-get call :arguments))
                                                  (length (or (plist-get call :result)
                                                              "")))))))))

(defun lispm-session--render (turn)
  "Return TURN as text for the model to summarise."
  (concat
   (format "## Turn %d\n\nUser:\n%s\n" (plist-get turn :turn) (plist-get turn :user))
   (mapconcat
    (lambda (step)
      (concat (if (string-empty-p (plist-get step :text)) ""
                (format "\nAssistant:\n%s\n" (plist-get step :text)))
              (mapconcat (lambda (call)
                           (format "\nTool call %s %s:\n%s\nResult:\n%s\n"
                                   (plist-get call :name) (plist-get call :id)
                                   (plist-get call :arguments)
                                   (or (plist-get call :result) "(none)")))
                         (plist-get step :calls) "")))
    (plist-get turn :steps) "")))

(defun lispm-session--live-turn-p (item)
  "Return non-nil if ITEM is a turn the model sees whole: not archived or rewound."
  (and (plist-get item :turn) (not (plist-get item :archived))
       (not (plist-get item :rewound))))

(defun lispm-session--compactable (items upto &optional from)
  "Return the live turn items of ITEMS up to UPTO, consed to the live summary.
With FROM, only those from turn FROM on, and no summary: a summary of
the turns from FROM, the older ones kept as they are."
  (cons (cl-remove-if-not (lambda (item) (and (lispm-session--live-turn-p item)
                                              (<= (or from 1) (plist-get item :turn) upto)))
                          items)
        (unless from
          (cl-find-if (lambda (item) (and (plist-member item :summary)
                                          (= (plist-get item :from) 1)
                                          (not (plist-get item :archived))))
                      items))))

(defun lispm-session-compaction-source (buffer &optional keep-last from)
  "Return what compaction of BUFFER's session would summarise, or nil.
That is the turns not yet archived but the last KEEP-LAST (default 1),
with the summary so far: a plist (:upto N :turns COUNT :text TEXT :size
CHARS :from F), N the last of those turns, TEXT them for the model to
read, and CHARS the characters of model and tool text (and summary)
they hold, which a summary must stay under.  With FROM, the turns from
FROM to the last (\"summarize from here\"), KEEP-LAST ignored, and no
summary of older ones."
  (with-current-buffer buffer
    (let* ((items (cdr (lispm-session--parse)))
           (live (cl-remove-if-not #'lispm-session--live-turn-p items))
           (older (if from
                      (cl-remove-if (lambda (item) (< (plist-get item :turn) from)) live)
                    (butlast live (or keep-last 1)))))
      (when older
        (let* ((upto (plist-get (car (last older)) :turn))
               (summary (cdr (lispm-session--compactable items upto from))))
          (list :upto upto :turns (length older) :from (or from 1)
                :text (concat (if summary
                                  (format "## Summary of turns 1-%d\n\n%s\n\n"
                                          (plist-get summary :upto)
                                          (plist-get summary :summary))
                                "")
                              (mapconcat #'lispm-session--render older "\n"))
                :size (lispm-session--replaced-size older summary)))))))

(defun lispm-session--add-tag (position tag)
  "Add TAG to the heading at POSITION."
  (save-excursion
    (goto-char position)
    (end-of-line)
    (let ((title (buffer-substring-no-properties (line-beginning-position) (point))))
      (if (lispm-session--tags title)
          (progn (skip-chars-backward " \t") (insert tag ":"))
        (insert " :" tag ":")))))

(defun lispm-session-compact (buffer summary upto &optional from)
  "Put SUMMARY in place of the turn items up to UPTO in BUFFER's session.
With FROM, of the turns from FROM to UPTO only, the older ones kept.
Save and commit the document.  The turns stay in it, tagged ARCHIVE
and folded; SUMMARY becomes a heading after them, which the user can
read and edit.  From
then on `lispm-session-messages' gives the user's words of those turns,
then the summary, then the later turns.  Signal
`lispm-compaction-not-smaller', changing nothing, if SUMMARY is not
smaller than the text it replaces."
  (with-current-buffer buffer
    (let* ((items (cdr (lispm-session--parse)))
           (found (lispm-session--compactable items upto from))
           (turns (car found))
           (old (cdr found))
           (replaced (lispm-session--replaced-size turns old)))
      (unless turns
        (lispm-signal 'lispm-session-error (list upto) "No turns up to %d to compact" upto))
      (unless (< (length summary) replaced)
        (lispm-signal 'lispm-compaction-not-smaller (list (length summary) replaced)
                      "The summary (%d characters) is not smaller than what it replaces (%d)"
                      (length summary) replaced))
      (save-excursion
        (save-restriction
          (widen)
          (let* ((inhibit-read-only t)
                 (last (car (last turns)))
                 (after (cl-find-if (lambda (item) (> (plist-get item :start)
                                                      (plist-get last :start)))
                                    items))
                 (at (if after (plist-get after :start) (lispm-session--transcript-end)))
                 (headings (sort (mapcar (lambda (item) (plist-get item :start))
                                         (if old (cons old turns) turns))
                                 #'>)))
            (goto-char at)
            (insert (format "* Summary of turns %d-%d\n" (or from 1) upto)
                    (lispm-session--drawer `(("LISPM_SUMMARY" . ,(number-to-string upto))
                                             ,@(and from `(("LISPM_SUMMARY_FROM"
                                                            . ,(number-to-string from))))
                                             ("LISPM_TIME" . ,(lispm-session--time))))
                    (lispm-session--prose summary))
            (dolist (position headings)
              (lispm-session--add-tag position "ARCHIVE")
              (goto-char position)
              (org-fold-subtree t)))))
      (lispm-session-save buffer (format "session %s: turns %d-%d compacted"
                                         lispm-session-id (or from 1) upto)))))

(provide 'lispm-session)
;;; lispm-session.el ends here
