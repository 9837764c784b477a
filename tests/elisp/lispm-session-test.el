;;; lispm-session-test.el --- Tests of the own agent's session documents  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each test has a sessions directory and a project folder of its own,
;; temporary; git is the real one, run by LispM's queue.  The tests
;; themselves may call git synchronously to look at what it made.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-session)

(defvar lispm-session-test--sessions nil
  "The sessions directory of the running test.")

(defmacro lispm-session-test--with-dirs (&rest body)
  "Run BODY with `sessions' and `project', temporary folders of its own.
The commit queues and the once-only warning are the test's own."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-session-test" t))))
          (sessions (file-name-as-directory (expand-file-name "sessions" root)))
          (project (file-name-as-directory (expand-file-name "project" root)))
          (lispm-sessions-directory sessions)
          (lispm-session-test--sessions sessions)
          (lispm-sessions--queues (make-hash-table :test #'equal))
          (lispm-sessions--warned nil)
          (lispm-sessions-git-program lispm-sessions-git-program))
     (ignore sessions project)
     (make-directory project t)
     (when (get-buffer "*Warnings*") (kill-buffer "*Warnings*"))
     (unwind-protect
         (progn ,@body)
       (lispm-sessions-wait-for-commits 30)
       (lispm-sessions-stop)
       (dolist (buffer (buffer-list))
         (when (with-current-buffer buffer (derived-mode-p 'lispm-session-mode))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory root t))))

(defun lispm-session-test--git (directory &rest args)
  "Run git with ARGS in DIRECTORY; return its output, or fail the test."
  (with-temp-buffer
    (let* ((default-directory directory)
           (process-environment (append '("GIT_CONFIG_NOSYSTEM=1" "GIT_CONFIG_GLOBAL=/dev/null"
                                          "GIT_AUTHOR_NAME=Test" "GIT_AUTHOR_EMAIL=t@t"
                                          "GIT_COMMITTER_NAME=Test" "GIT_COMMITTER_EMAIL=t@t")
                                        process-environment))
           (status (apply #'call-process "git" nil t nil args)))
      (unless (zerop status)
        (ert-fail (list "git failed" args (buffer-string))))
      (buffer-string))))

(defun lispm-session-test--file-text (file)
  "Return FILE's text, decoded as UTF-8 without end-of-line conversion."
  (with-temp-buffer
    (let ((coding-system-for-read 'utf-8-unix))
      (insert-file-contents file))
    (buffer-string)))

(defun lispm-session-test--warnings ()
  "Return how many warnings of LispM's sessions were shown."
  (if (get-buffer "*Warnings*")
      (with-current-buffer "*Warnings*"
        (how-many "Warning (lispm-session)" (point-min) (point-max)))
    0))

(defun lispm-session-test--chunks (text size)
  "Return TEXT cut into pieces of SIZE characters (SIZE 0: one piece)."
  (if (or (zerop size) (string-empty-p text))
      (list text)
    (cl-loop for start from 0 below (length text) by size
             collect (substring text start (min (length text) (+ start size))))))

(defun lispm-session-test--turn (buffer user replies &optional chunk)
  "Play a turn in BUFFER: USER's words, then REPLIES, streamed in CHUNK pieces.
Each reply is (TEXT . CALLS), each call (:id :name :arguments :result).
Return the neutral messages the turn should read back as."
  (let ((expected (list (list :role "user" :content user))))
    (lispm-session-begin-turn buffer user)
    (pcase-dolist (`(,text . ,calls) replies)
      (let ((stream (lispm-session-begin-reply buffer)))
        (dolist (piece (lispm-session-test--chunks text (or chunk 0)))
          (lispm-session-stream-text stream piece))
        (lispm-session-end-reply stream))
      (dolist (call calls)
        (lispm-session-insert-call buffer (list :id (plist-get call :id)
                                                :name (plist-get call :name)
                                                :arguments (plist-get call :arguments))))
      (dolist (call calls)
        (lispm-session-insert-result buffer (plist-get call :id) (plist-get call :result)))
      (push (append (list :role "assistant" :content text)
                    (when calls
                      (list :tool_calls
                            (mapcar (lambda (call)
                                      (list :id (plist-get call :id) :name (plist-get call :name)
                                            :arguments (plist-get call :arguments)))
                                    calls))))
            expected)
      (dolist (call calls)
        (push (list :role "tool" :tool_call_id (plist-get call :id)
                    :name (plist-get call :name) :content (plist-get call :result))
              expected)))
    (nreverse expected)))

(defconst lispm-session-test--nasty
  '("" "\n" "\n\n" "plain" "no final newline" "final newline\n"
    "* a heading" "** two\n*** three\n" "*bold* at the start" " * indented star"
    "#+begin_src emacs-lisp\n(x)\n#+end_src" "#+end_src" "#+end_example\n" "#+TITLE: x"
    "# a comment" "#" ":PROPERTIES:\n:LISPM_TURN: 9\n:END:" ":END:" ": fixed width" ":"
    ",* already escaped" ",,#+x" ", comma" "," "\t:tab colon" "  ,  #+x"
    "trailing spaces   " "trailing tab\t" "   \n  \n" "\r\ncarriage\r\n"
    "unicode: ünïcödé 日本語 🎉 — ‘quotes’" "* Your message" "* Turn 3: fake"
    "* Summary of turns 1-2" "**** TODO Approve me" "\\backslash\\ and \"quotes\""
    "line\n* star\n#+begin_example\n: note\n# comment\n,\nend   ")
  "Texts that would break a careless Org document.")

;;; Escaping

(ert-deftest lispm-session-test-escaping-is-exact-for-every-short-line ()
  "Every string of up to 4 of the characters that matter reads back exactly."
  (let ((alphabet '("" " " "\t" "," "*" "#" "+" ":" "a" "\n"))
        (strings '("")))
    (dotimes (_ 4)
      (setq strings (delete-dups (cl-loop for s in strings
                                          nconc (mapcar (lambda (c) (concat s c)) alphabet)))))
    (should (> (length strings) 5000))
    (dolist (s strings)
      (should (equal (lispm-session--unescape-prose (lispm-session--escape-prose s)) s))
      (should (equal (lispm-session--unescape-block (lispm-session--escape-block s)) s))
      ;; Nothing escaped can be taken for a heading, a keyword, a drawer or a note.
      (dolist (line (split-string (lispm-session--escape-prose s) "\n"))
        (should-not (string-match-p "\\`[ \t]*[*#:]" line)))
      (dolist (line (split-string (lispm-session--escape-block s) "\n"))
        (should-not (string-match-p "\\`\\(?:\\*\\|[ \t]*#\\+\\)" line))))))

;;; Round trip

(ert-deftest lispm-session-test-round-trip-is-exact ()
  "Nasty texts and calls read back exactly, live and from the file."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project "scripted" "emacs"))
           (expected nil)
           (n 0))
      (dolist (chunk '(0 1 2 3 7))
        (dolist (text lispm-session-test--nasty)
          (cl-incf n)
          (let ((id (format "call_%d" n)))
            (setq expected
                  (append expected
                          (lispm-session-test--turn
                           buffer text
                           `((,text (:id ,id :name "read_file"
                                         :arguments ,(format "{\"path\": \"a\\\"b\",\n \"x\": %S}"
                                                             text)
                                         :result ,text)
                                    (:id ,(concat " odd\nid \"" id) :name "edit_file"
                                         :arguments "" :result ""))
                             (,(concat text "\nafter the results")))
                           chunk)))
            (should (equal (lispm-session-messages buffer) expected)))))
      (lispm-session-end-turn buffer)
      (let ((file (buffer-local-value 'lispm-session-file buffer)))
        (should (equal (lispm-session-test--file-text file)
                       (with-current-buffer buffer (buffer-string))))
        (kill-buffer buffer)
        (let ((again (lispm-session-open file)))
          (should (eq (buffer-local-value 'major-mode again) 'lispm-session-mode))
          (should (equal (lispm-session-messages again) expected))
          (should (equal (buffer-local-value 'lispm-session-model again) "scripted"))
          (should (equal (buffer-local-value 'lispm-session-folder again) project))
          ;; The next turn is numbered after the last one in the file.
          (should (= (lispm-session-begin-turn again "next") (1+ n))))))))

(ert-deftest lispm-session-test-a-line-start-split-across-deltas-is-escaped ()
  "A heading-like line that arrives in pieces is escaped once, at its start."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "go")
      (let ((stream (lispm-session-begin-reply buffer)))
        (dolist (piece '("one\n" " " "," "\t" "*" " two\n" "x* three\n" "#" "+end"))
          (lispm-session-stream-text stream piece))
        (lispm-session-end-reply stream))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (search-forward "\n, ,\t* two\nx* three\n,#+end\n" nil t)))
      (should (equal (plist-get (nth 1 (lispm-session-messages buffer)) :content)
                     "one\n ,\t* two\nx* three\n#+end")))))

(ert-deftest lispm-session-test-the-users-edits-are-the-history ()
  "What the user changes in the transcript is what reads back; the draft is not."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project)))
      (lispm-session-test--turn buffer "My name is Ada." '(("Hello, Bob.")))
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "Hello, Bob.")
        (replace-match "Hello, Ada.")
        (goto-char (point-max))
        (insert "\n\nWhat is my name?  \n"))
      (should (equal (lispm-session-messages buffer)
                     '((:role "user" :content "My name is Ada.")
                       (:role "assistant" :content "Hello, Ada."))))
      (should (equal (lispm-session-input buffer) "What is my name?"))
      ;; The draft is saved with the file, but never read as the conversation.
      (lispm-session-end-turn buffer)
      (let ((file (buffer-local-value 'lispm-session-file buffer)))
        (should (string-match-p "What is my name\\?" (lispm-session-test--file-text file)))
        (should (equal (lispm-session-take-input buffer) "What is my name?"))
        (should (equal (lispm-session-input buffer) ""))
        (should (equal (length (lispm-session-messages buffer)) 2))))))

(ert-deftest lispm-session-test-the-input-heading-is-read-only ()
  "The user cannot type into the input heading, only below it."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project)))
      (with-current-buffer buffer
        (goto-char (lispm-session-input-start buffer))
        (insert "draft")
        (goto-char (1- (lispm-session-input-start buffer)))
        (should-error (insert "x") :type 'text-read-only)
        (goto-char (line-beginning-position))
        (should-error (insert "x") :type 'text-read-only))
      (should (equal (lispm-session-input buffer) "draft")))))

;;; Programs shown as Lisp

(defun lispm-session-test--json-string (string)
  "Return STRING as a JSON string, as `json-serialize' writes it."
  (let ((json (json-serialize (vector string))))
    (substring (if (multibyte-string-p json) json (decode-coding-string json 'utf-8 t))
               1 -1)))

(defun lispm-session-test--run-lisp (program &optional layout)
  "Return run_lisp's arguments for PROGRAM as a model writes them.
LAYOUT is `compact' (the default: OpenAI's models, the demo's gateway),
`spaced' (Anthropic's) or `pretty'."
  (format (pcase layout
            ((or 'nil 'compact) "{\"program\":%s}")
            ('spaced "{\"program\": %s}")
            ('pretty "{\n  \"program\" : %s\n}\n"))
          (lispm-session-test--json-string program)))

(defun lispm-session-test--reopened-messages (buffer)
  "Save BUFFER's session, kill it, and return the messages of its file."
  (lispm-session-end-turn buffer)
  (let ((file (buffer-local-value 'lispm-session-file buffer)))
    (should (equal (lispm-session-test--file-text file)
                   (with-current-buffer buffer (buffer-string))))
    (kill-buffer buffer)
    (lispm-session-messages (lispm-session-open file))))

(defconst lispm-session-test--program
  "(let ((files (directory-files \".\" nil \"\\\\.el\\\\'\")))
  ;; Each file's defuns.
  (mapcar (lambda (file)
            (cons file (lispm-grep \"(defun \" file)))
          files))"
  "A run_lisp program as a model writes one: indented, on several lines.")

(ert-deftest lispm-session-test-a-run-lisp-program-shows-as-lisp ()
  "A run_lisp call shows its program in an emacs-lisp block, and reads back exactly."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (compact (lispm-session-test--run-lisp lispm-session-test--program))
           (spaced (lispm-session-test--run-lisp lispm-session-test--program 'spaced))
           (expected (lispm-session-test--turn
                      buffer "which functions"
                      `(("One program." (:id "c1" :name "run_lisp" :arguments ,compact
                                         :result "(...)")
                         (:id "c2" :name "run_lisp" :arguments ,spaced :result "(...)"))
                        ("Done.")))))
      (should (string-prefix-p "{\"program\":\"(let ((files (directory-files \\\".\\\" nil \\\"\\\\\\\\.el\\\\\\\\'\\\")))\\n  ;; Each"
                               compact))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (search-forward
                 (concat "*** Call run_lisp\n:PROPERTIES:\n:LISPM_CALL_ID: c1\n"
                         ":LISPM_TOOL: run_lisp\n:END:\n"
                         "#+begin_src emacs-lisp -i :eval no\n"
                         lispm-session-test--program "\n#+end_src\n**** Result\n")
                 nil t))
        ;; The other layout is said in the drawer; the program is the same.
        (should (search-forward
                 (concat ":LISPM_TOOL: run_lisp\n:LISPM_JSON: {\"program\": %s}\n:END:\n"
                         "#+begin_src emacs-lisp -i :eval no\n"
                         lispm-session-test--program "\n#+end_src\n")
                 nil t))
        (goto-char (point-min))
        (should-not (search-forward "\\n" nil t))
        (should-not (search-forward "begin_src json" nil t)))
      ;; Byte for byte what the model wrote, live and from the file.
      (should (equal (lispm-session-messages buffer) expected))
      (should (equal (lispm-session-test--reopened-messages buffer) expected)))))

(ert-deftest lispm-session-test-hostile-programs-read-back-exactly ()
  "Programs that would break a careless document read back as they were written.
Those with control characters (a NUL, a CR) or too long to fontify stay JSON."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (megabyte (let ((line "(setq x \"#+end_src\") ; * ,\n"))
                       (apply #'concat (make-list (/ (* 1024 1024) (length line)) line))))
           (marked (propertize "(message \"marked\")" 'lispm-session-test t 'face 'bold))
           (programs (append lispm-session-test--nasty
                             (list "#+end_src\n(x)" "(x)\n#+end_src" "  #+END_SRC" "#+begin_src json"
                                   "* (x)\n** (y)" ",* (x)\n,,#+end_src\n," ",(x) ,@y `(z)"
                                   "(x)\n:LISPM_CALL_ID: call_1\n:END:" "(\"unbalanced" ")))"
                                   "not Lisp at all: {\"json\": [1, 2]}" "a\0b" "(a)\r\n(b)\r\n"
                                   "\t(tab)\t" "\e[31m" "\x7f" "(x)\n" "\n\n(x)\n\n" marked
                                   megabyte)))
           (expected nil) (lisp 0) (n 0))
      (dolist (layout '(compact spaced pretty))
        (dolist (program programs)
          (unless (and (eq program megabyte) (not (eq layout 'compact)))
            (let ((arguments (propertize (lispm-session-test--run-lisp program layout)
                                         'lispm-session-test t)))
              (cl-incf n)
              (unless (or (string-match-p "[\0\r\e\x7f]" program) (eq program megabyte))
                (cl-incf lisp))
              (setq expected
                    (append expected
                            (lispm-session-test--turn
                             buffer "go" `(("" (:id ,(propertize (format "call_%d" n)
                                                                 'lispm-session-test t)
                                                   :name "run_lisp"
                                                   :arguments ,arguments :result "ok"))))))))))
      (with-current-buffer buffer
        (should (= lisp (count-matches "^#\\+begin_src emacs-lisp -i :eval no$"
                                       (point-min) (point-max))))
        (should (= (- n lisp) (count-matches "^#\\+begin_src json$" (point-min) (point-max))))
        ;; Nothing of the model's text properties is in the document.
        (should-not (text-property-not-all (point-min) (point-max) 'lispm-session-test nil)))
      (should (equal (lispm-session-messages buffer) expected))
      (should (equal (lispm-session-test--reopened-messages buffer) expected)))))

(ert-deftest lispm-session-test-other-calls-keep-their-json ()
  "Other tools' calls, and run_lisp's arguments of any other shape, stay JSON."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (calls '(("read_file" . "{\"program\":\"(x)\"}")
                   ("eval_elisp" . "{\"form\":\"(x)\"}")
                   ("run_lisp" . "{\"program\":\"(x)\",\"fuel\":5}")
                   ("run_lisp" . "{\"program\":\"(x)\",\"program\":\"(y)\"}")
                   ("run_lisp" . "{\"program\":5}")
                   ("run_lisp" . "{\"program\":null}")
                   ("run_lisp" . "[\"(x)\"]")
                   ("run_lisp" . "{\"program\":\"(x)\"")
                   ("run_lisp" . "{\"progr\\u0061m\":\"(x)\"}")
                   ("run_lisp" . "{\"program\":\"\\u0028x)\"}")
                   ("run_lisp" . "{\"program\":\"a\\/b\"}")
                   ("run_lisp" . "")
                   ("run_lisp" . "not JSON\n* at all")
                   ("Run_Lisp" . "{\"program\":\"(x)\"}")))
          (expected nil) (n 0))
      (pcase-dolist (`(,name . ,arguments) calls)
        (cl-incf n)
        (setq expected
              (append expected
                      (lispm-session-test--turn
                       buffer "go" `(("" (:id ,(format "c%d" n) :name ,name
                                          :arguments ,arguments :result "ok")))))))
      (with-current-buffer buffer
        (should-not (progn (goto-char (point-min)) (search-forward "emacs-lisp" nil t)))
        (should-not (progn (goto-char (point-min)) (search-forward "LISPM_JSON" nil t)))
        (goto-char (point-min))
        (should (search-forward (concat ":LISPM_TOOL: read_file\n:END:\n#+begin_src json\n"
                                        "{\"program\":\"(x)\"}\n#+end_src\n")
                                nil t)))
      (should (equal (lispm-session-messages buffer) expected))
      (should (equal (lispm-session-test--reopened-messages buffer) expected)))))

(ert-deftest lispm-session-test-long-programs-are-folded ()
  "A long program's call is folded, as a long result is; a short one is not."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (long (mapconcat (lambda (n) (format "(step %d)" n)) (number-sequence 1 40) "\n")))
      (lispm-session-begin-turn buffer "go")
      (lispm-session-insert-call buffer (list :id "1" :name "run_lisp"
                                              :arguments (lispm-session-test--run-lisp long)))
      (lispm-session-insert-call buffer (list :id "2" :name "run_lisp"
                                              :arguments (lispm-session-test--run-lisp "(short)")))
      (lispm-session-insert-approval buffer "1" "read a.txt")
      (lispm-session-insert-result buffer "1" "done")
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "*** Call run_lisp")
        (should-not (invisible-p (match-beginning 0)))
        (search-forward "(step 20)")
        (should (invisible-p (match-beginning 0)))
        ;; What comes after it later is shown.
        (search-forward "**** TODO read a.txt")
        (should-not (invisible-p (match-beginning 0)))
        (search-forward "**** Result")
        (should-not (invisible-p (match-beginning 0)))
        (search-forward "(short)")
        (should-not (invisible-p (match-beginning 0))))
      (should (equal (plist-get (car (plist-get (nth 1 (lispm-session-messages buffer))
                                                :tool_calls))
                                :arguments)
                     (lispm-session-test--run-lisp long))))))

(defvar lispm-session-test--evaluated nil
  "Set by a program that must not be evaluated in the session.")

(ert-deftest lispm-session-test-a-program-is-edited-and-never-evaluated-in-place ()
  "The user's edit of a program is the history; Org keeps it exact and runs nothing."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (program "(setq lispm-session-test--evaluated t)\n  \"  kept\n indentation\""))
      (lispm-session-begin-turn buffer "go")
      (lispm-session-insert-call buffer (list :id "1" :name "run_lisp"
                                              :arguments (lispm-session-test--run-lisp
                                                          program 'spaced)))
      (with-current-buffer buffer
        (let ((text (buffer-string)))
          (goto-char (point-min))
          (search-forward "(setq")
          ;; C-c C-c in the transcript does what Org does: here, nothing.
          (let ((org-confirm-babel-evaluate nil))
            (org-babel-execute-src-block))
          (should-not lispm-session-test--evaluated)
          ;; C-c ' and back leaves the program as it was.
          (org-edit-special)
          (should (equal (buffer-string) (concat program "\n")))
          (org-edit-src-exit)
          (should (equal (buffer-string) text))
          (search-forward "kept")
          (replace-match "changed")))
      (should (equal (plist-get (car (plist-get (nth 1 (lispm-session-messages buffer))
                                                :tool_calls))
                                :arguments)
                     (lispm-session-test--run-lisp
                      (string-replace "kept" "changed" program) 'spaced)))
      ;; A layout that is no JSON object of the program alone does not read.
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward ":LISPM_JSON: {\"program\": %s}")
        (replace-match ":LISPM_JSON: {\"program\": %s, \"x\": 1}" t t))
      (should-error (lispm-session-messages buffer) :type 'lispm-session-unreadable))))

(ert-deftest lispm-session-test-a-drawer-line-in-a-program-misleads-nothing ()
  "Lines of a program that look like a call's drawer are not taken for one."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (program "(list \"\n:LISPM_CALL_ID: c1\n:END:\n:LISPM_CALL_ID: c2\n:END:\n\")"))
      (lispm-session-begin-turn buffer "go")
      (lispm-session-insert-call buffer '(:id "c1" :name "read_file" :arguments "{}"))
      (lispm-session-insert-call buffer (list :id "c2" :name "run_lisp"
                                              :arguments (lispm-session-test--run-lisp program)))
      (lispm-session-insert-result buffer "c1" "r1")
      (lispm-session-record-request buffer "c2" "R7")
      (lispm-session-insert-approval buffer "c2" "read a.txt")
      (should (lispm-session-decide-approval buffer "c2" 'done))
      (let* ((calls (plist-get (car (plist-get (cadr (with-current-buffer buffer
                                                         (lispm-session--parse)))
                                               :steps))
                               :calls)))
        (should (equal (mapcar (lambda (call) (plist-get call :result)) calls) '("r1" nil)))
        (should (equal (mapcar (lambda (call) (plist-get call :request)) calls) '(nil "R7")))
        (should (equal (plist-get (nth 1 calls) :arguments)
                       (lispm-session-test--run-lisp program)))))))

;;; Saving

(ert-deftest lispm-session-test-the-file-is-always-the-buffer ()
  "Each save leaves the file equal to the buffer, however the text changed."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (check (lambda ()
                    (lispm-session-save buffer "check")
                    (should-not (buffer-modified-p buffer))
                    (should (equal (lispm-session-test--file-text file)
                                   (with-current-buffer buffer (buffer-string)))))))
      (lispm-session-test--turn buffer "one ünïcode 日本" '(("reply one")))
      (funcall check)
      (lispm-session-test--turn buffer "two" '(("reply two")))
      (funcall check)
      ;; The user edits the first turn: the file is written from there.
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "reply one")
        (replace-match "the first reply, longer now"))
      (funcall check)
      ;; Text taken out: the file gets shorter.
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "the first reply, longer now")
        (replace-match "1"))
      (funcall check)
      (with-current-buffer buffer
        (goto-char (point-max))
        (insert "a draft that goes away again"))
      (funcall check)
      (lispm-session-take-input buffer)
      (funcall check)
      ;; Two changes, the second before the first.
      (with-current-buffer buffer
        (goto-char (point-max))
        (insert "late")
        (goto-char (point-min))
        (search-forward "two")
        (replace-match "2"))
      (funcall check)
      ;; A raw byte in place of two characters: as long in the buffer,
      ;; shorter in the file.
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "late")
        (replace-match (concat "la" (string-to-multibyte "\311"))))
      (funcall check)
      ;; A raw byte: one byte in the file, two in the buffer.
      (lispm-session-test--turn buffer (concat "raw " (string-to-multibyte "\310") " byte")
                                '(("after it")))
      (funcall check)
      (lispm-session-test--turn buffer "and on" '(("more")))
      (funcall check)
      ;; The file written behind LispM's back, to the same size: all is written again.
      (let ((outside (make-string (file-attribute-size (file-attributes file)) ?x)))
        (let ((coding-system-for-write 'no-conversion))
          (write-region outside nil file nil 'silent))
        (set-file-times file (encode-time '(0 0 0 1 1 2020 nil nil t)))
        (funcall check)
        ;; That version is kept beside it, and said so once.
        (should (equal (mapcar (lambda (f) (lispm-session-test--file-text f))
                               (directory-files sessions t "\\.outside\\'"))
                       (list outside))))
      (should (= (lispm-session-test--warnings) 1))
      (lispm-session-end-turn buffer)
      (should (lispm-sessions-wait-for-commits 30))
      (should (equal (lispm-session-test--git
                      sessions "show" (concat "HEAD:" (file-name-nondirectory file)))
                     (lispm-session-test--file-text file))))))

;;; Approvals and notes

(ert-deftest lispm-session-test-approvals-are-todo-items ()
  "An approval is a TODO item under its call: DONE when approved, CANCELLED when denied."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "edit two files")
      (lispm-session-end-reply (lispm-session-begin-reply buffer))
      (lispm-session-insert-call buffer '(:id "a" :name "edit_file" :arguments "{}"))
      (lispm-session-insert-call buffer '(:id "b" :name "edit_file" :arguments "{}"))
      (lispm-session-insert-approval buffer "a" "Edit a.txt")
      (lispm-session-insert-approval buffer "b" "Edit b.txt")
      (with-current-buffer buffer
        (should (equal org-todo-keywords '((sequence "TODO" "|" "DONE" "CANCELLED"))))
        (should (member "CANCELLED" org-done-keywords)))
      (should (lispm-session-decide-approval buffer "b" 'cancelled "not that file\n* really"))
      (should (lispm-session-decide-approval buffer "a" 'done))
      (should-not (lispm-session-decide-approval buffer "a" 'done))
      (lispm-session-insert-result buffer "a" "Wrote a.txt")
      (lispm-session-insert-result buffer "b" "edit denied by the user: not that file" t)
      (lispm-session-insert-note buffer "Stopped at a condition\nand restarted")
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (re-search-forward "^\\*\\*\\* Call edit_file\n\\(?:.*\n\\)*?\\*\\*\\*\\* DONE Edit a.txt$" nil t))
        (should (re-search-forward "^\\*\\*\\*\\* CANCELLED Edit b.txt\nCLOSED: .*\nReason: not that file\n,\\* really\n" nil t))
        (goto-char (point-min))
        (should (search-forward ": Stopped at a condition\n: and restarted\n" nil t))
        (goto-char (point-min))
        (search-forward "DONE Edit a.txt")
        (should (equal (org-get-todo-state) "DONE"))
        (search-forward "CANCELLED Edit b.txt")
        (should (equal (org-get-todo-state) "CANCELLED")))
      (should (equal (cdr (lispm-session-messages buffer))
                     '((:role "assistant" :content ""
                              :tool_calls ((:id "a" :name "edit_file" :arguments "{}")
                                           (:id "b" :name "edit_file" :arguments "{}")))
                       (:role "tool" :tool_call_id "a" :name "edit_file" :content "Wrote a.txt")
                       (:role "tool" :tool_call_id "b" :name "edit_file"
                              :content "edit denied by the user: not that file")))))))

(ert-deftest lispm-session-test-long-results-are-folded ()
  "A long result's entry is folded; a short one is not."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (long (mapconcat #'number-to-string (number-sequence 1 100) "\n")))
      (lispm-session-begin-turn buffer "read")
      (lispm-session-insert-call buffer '(:id "1" :name "read_file" :arguments "{}"))
      (lispm-session-insert-call buffer '(:id "2" :name "read_file" :arguments "{}"))
      (lispm-session-insert-result buffer "1" long)
      (lispm-session-insert-result buffer "2" "short")
      (with-current-buffer buffer
        (goto-char (point-min))
        (search-forward "\n50\n")
        (should (invisible-p (point)))
        (search-forward "short")
        (should-not (invisible-p (point))))
      (should (equal (plist-get (nth 2 (lispm-session-messages buffer)) :content) long)))))

(ert-deftest lispm-session-test-a-call-without-result-gets-one ()
  "A call whose turn ended before it ran reads back with a result saying so."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project)))
      (lispm-session-begin-turn buffer "go")
      (lispm-session-insert-call buffer '(:id "x" :name "shell" :arguments "{}"))
      (let ((tool (nth 2 (lispm-session-messages buffer))))
        (should (equal (plist-get tool :tool_call_id) "x"))
        (should (string-match-p "did not run" (plist-get tool :content))))
      (should-error (lispm-session-insert-result buffer "nope" "x")
                    :type 'lispm-session-error))))

;;; Killed buffers

(ert-deftest lispm-session-test-killing-the-buffer-mid-stream-is-quiet ()
  "Everything after the buffer died does nothing and signals nothing."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (_ (lispm-session-begin-turn buffer "go"))
           (stream (lispm-session-begin-reply buffer)))
      (lispm-session-stream-text stream "half a ")
      (kill-buffer buffer)
      (should-not (buffer-live-p buffer))
      (should-not (lispm-session-stream-text stream "sentence"))
      (lispm-session-end-reply stream)
      (lispm-session-stream-text stream "more")
      (should-not (lispm-session-insert-call buffer '(:id "1" :name "x" :arguments "{}")))
      (should-not (lispm-session-insert-result buffer "1" "r"))
      (should-not (lispm-session-insert-approval buffer "1" "t"))
      (should-not (lispm-session-decide-approval buffer "1" 'done))
      (should-not (lispm-session-insert-note buffer "n"))
      (should-not (lispm-session-begin-turn buffer "again"))
      (should-not (lispm-session-begin-reply buffer))
      (should-not (lispm-session-end-turn buffer))
      (should (lispm-sessions-wait-for-commits 5))
      ;; The turn was saved as it began, and nothing since; no commit.
      (let ((files (directory-files sessions t "\\.org\\'")))
        (should (= (length files) 1))
        (should (string-match-p "^\\* Turn 1: go$" (with-temp-buffer
                                                      (insert-file-contents (car files))
                                                      (buffer-string)))))
      (should-not (file-exists-p (expand-file-name ".git" sessions))))))

;;; Unreadable files

(defun lispm-session-test--saved (project)
  "Return the file of a session in PROJECT with one turn and a call, saved."
  (let ((buffer (lispm-session-create project)))
    (lispm-session-test--turn buffer "hello" '(("reply" (:id "c" :name "read_file"
                                                          :arguments "{}" :result "ok"))))
    (lispm-session-end-turn buffer)
    (lispm-sessions-wait-for-commits 10)
    (prog1 (buffer-local-value 'lispm-session-file buffer)
      (kill-buffer buffer))))

(ert-deftest lispm-session-test-an-unreadable-file-is-named-and-left-alone ()
  "A file edited into something unreadable: an error naming file and line."
  (lispm-session-test--with-dirs
    (let ((file (lispm-session-test--saved project)))
      (pcase-dolist (`(,from ,to ,what)
                     '(("#+end_src\n" "" "#\\+end_src")
                       (":LISPM_TURN: 1\n:LISPM_TIME" ":LISPM_TIME" "no turn")
                       (":LISPM_TOOL: read_file\n:END:\n" ":LISPM_TOOL: read_file\n" "property drawer")
                       (":LISPM_CALL_ID: c\n" ":LISPM_CALL_ID: \"c\n" "broken string")
                       ("#+LISPM_SESSION:" "#+LISPM_SESSIO:" "LISPM_SESSION")
                       ("**** Result" "***** Result" "deeper")))
        (let* ((good (lispm-session-test--file-text file))
               (bad (replace-regexp-in-string (regexp-quote from) to good t t)))
          (should-not (equal good bad))
          (let ((coding-system-for-write 'utf-8-unix))
            (write-region bad nil file nil 'silent))
          (set-file-times file (encode-time '(0 0 0 1 1 2020 nil nil t)))
          (let* ((before (file-attribute-modification-time (file-attributes file)))
                 (buffers (buffer-list))
                 (err (should-error (lispm-session-open file)
                                    :type 'lispm-session-unreadable))
                 (data (cdr err)))
            (should (equal (nth 1 data) file))
            (should (integerp (nth 2 data)))
            (should (string-match-p what (nth 3 data)))
            (should (string-match-p (regexp-quote file) (lispm-error-message err)))
            (should (string-match-p (format "line %d" (nth 2 data)) (lispm-error-message err)))
            (should (equal (lispm-session-test--file-text file) bad))
            (should (equal (file-attribute-modification-time (file-attributes file)) before))
            (should (equal (buffer-list) buffers)))
          (let ((coding-system-for-write 'utf-8-unix))
            (write-region good nil file nil 'silent))))
      ;; The line named is the broken one.
      (let ((text (lispm-session-test--file-text file)))
        (with-temp-file file
          (insert (replace-regexp-in-string "^\\*\\* " "***** " text t t)))
        (let ((err (should-error (lispm-session-open file) :type 'lispm-session-unreadable)))
          (with-temp-buffer
            (insert-file-contents file)
            (goto-char (point-min))
            (re-search-forward "^\\*\\*\\*\\*\\* ")
            (should (= (nth 2 (cdr err)) (line-number-at-pos)))))))))

;;; Git

(ert-deftest lispm-session-test-three-turns-are-three-commits ()
  "Three turns give three commits, in order, by LispM; the project's git is untouched."
  (lispm-session-test--with-dirs
    (lispm-session-test--git project "init" "-q")
    (with-temp-file (expand-file-name "a.txt" project) (insert "a\n"))
    (lispm-session-test--git project "add" "a.txt")
    (lispm-session-test--git project "commit" "-q" "-m" "first")
    (with-temp-file (expand-file-name "a.txt" project) (insert "changed\n"))
    (with-temp-file (expand-file-name "b.txt" project) (insert "staged\n"))
    (lispm-session-test--git project "add" "b.txt")
    (with-temp-file (expand-file-name "c.txt" project) (insert "untracked\n"))
    (let* ((look (lambda ()
                   (list (lispm-session-test--git project "status" "--porcelain=v1")
                         (lispm-session-test--git project "rev-parse" "HEAD")
                         (lispm-session-test--git project "stash" "list")
                         (lispm-session-test--git project "diff" "--cached")
                         (lispm-session-test--git project "for-each-ref"))))
           (before (funcall look))
           (buffer (lispm-session-create project "scripted")))
      (dolist (text '("Fix the bug\nin notes.el" "Now the tests" "Thanks: ünïcode"))
        (lispm-session-test--turn buffer text '(("Done.")))
        (lispm-session-end-turn buffer))
      (should (lispm-sessions-wait-for-commits 30))
      (let ((id (buffer-local-value 'lispm-session-id buffer))
            (file (file-name-nondirectory (buffer-local-value 'lispm-session-file buffer))))
        (should (equal (lispm-session-test--git sessions "log" "--reverse" "--format=%an <%ae>|%cn|%s")
                       (format (concat "LispM <lispm@localhost>|LispM|session %s turn 1: Fix the bug\n"
                                       "LispM <lispm@localhost>|LispM|session %s turn 2: Now the tests\n"
                                       "LispM <lispm@localhost>|LispM|session %s turn 3: Thanks: ünïcode\n")
                               id id id)))
        ;; Each commit holds the file as it was when its turn ended.
        (let ((first (lispm-session-test--git sessions "show" (concat "HEAD~2:" file)))
              (last (lispm-session-test--git sessions "show" (concat "HEAD:" file))))
          (should (string-match-p "Fix the bug" first))
          (should-not (string-match-p "Now the tests" first))
          (should (equal last (lispm-session-test--file-text
                               (buffer-local-value 'lispm-session-file buffer))))))
      (should (equal (funcall look) before))
      (should (= (lispm-session-test--warnings) 0)))))

(ert-deftest lispm-session-test-fifty-quick-turns-are-fifty-ordered-commits ()
  "50 turns ended back to back give 50 commits, in order."
  (lispm-session-test--with-dirs
    (let ((buffer (lispm-session-create project))
          (start (float-time)))
      (dotimes (i 50)
        (lispm-session-test--turn buffer (format "turn number %d" (1+ i)) '(("ok")))
        (lispm-session-end-turn buffer))
      (should (lispm-sessions-wait-for-commits 60))
      (should (< (- (float-time) start) 30))
      (let ((id (buffer-local-value 'lispm-session-id buffer)))
        (should (equal (split-string (lispm-session-test--git sessions "log" "--reverse" "--format=%s")
                                     "\n" t)
                       (cl-loop for i from 1 to 50
                                collect (format "session %s turn %d: turn number %d" id i i)))))
      ;; Each turn before the repository was made had a name of its
      ;; own for the file, beside it; none is left.
      (should (equal (directory-files sessions nil "\\`\\.lispm") nil))
      (let ((pins (expand-file-name ".git/lispm" sessions)))
        (should-not (and (file-directory-p pins) (directory-files pins nil "\\`[^.]")))))))

(ert-deftest lispm-session-test-commits-go-on-an-existing-history ()
  "In a repository of the user's, on HEAD's branch; and again after git restarts."
  (lispm-session-test--with-dirs
    (make-directory sessions t)
    (lispm-session-test--git sessions "init" "-q" "-b" "master")
    (with-temp-file (expand-file-name "README" sessions) (insert "mine\n"))
    (lispm-session-test--git sessions "add" "README")
    (lispm-session-test--git sessions "commit" "-q" "-m" "the user's own")
    (let ((buffer (lispm-session-create project)))
      (dolist (text '("one" "two" "three"))
        (lispm-session-test--turn buffer text '(("ok")))
        (lispm-session-end-turn buffer)
        (should (lispm-sessions-wait-for-commits 30))
        ;; The next commit comes from a git started anew.
        (lispm-sessions-stop))
      (should (equal (mapcar (lambda (line) (replace-regexp-in-string " [0-9-]+-project" "" line))
                             (split-string (lispm-session-test--git sessions "log" "--format=%s")
                                           "\n" t))
                     '("session turn 3: three" "session turn 2: two" "session turn 1: one"
                       "the user's own")))
      (should (equal (lispm-session-test--git sessions "show" "HEAD:README") "mine\n"))
      (should (= (lispm-session-test--warnings) 0)))))

(ert-deftest lispm-session-test-a-directory-inside-another-repository-gets-its-own ()
  "A sessions directory that is no repository becomes one of its own.
Even inside another repository, whose index and refs stay as they were."
  (lispm-session-test--with-dirs
    (lispm-session-test--git project "init" "-q")
    (with-temp-file (expand-file-name "a.txt" project) (insert "a\n"))
    (lispm-session-test--git project "add" "a.txt")
    (let* ((lispm-sessions-directory (expand-file-name "inner/sessions/" project))
           (index (expand-file-name ".git/index" project))
           (index-before (lispm-session-test--file-text index))
           (buffer (lispm-session-create project)))
      (lispm-session-test--turn buffer "hello" '(("hi")))
      (lispm-session-end-turn buffer)
      (should (lispm-sessions-wait-for-commits 30))
      (should (file-directory-p (expand-file-name ".git" lispm-sessions-directory)))
      (should (equal (string-trim (lispm-session-test--git lispm-sessions-directory
                                                           "rev-parse" "--absolute-git-dir"))
                     (expand-file-name ".git" lispm-sessions-directory)))
      (should (= 1 (length (split-string (lispm-session-test--git lispm-sessions-directory
                                                                 "log" "--format=%s")
                                         "\n" t))))
      (should (equal (lispm-session-test--file-text index) index-before))
      (should (equal (lispm-session-test--git project "for-each-ref") ""))
      (should (= (lispm-session-test--warnings) 0)))))

(ert-deftest lispm-session-test-without-git-the-session-is-saved-with-one-warning ()
  "A missing git program: every turn is saved, and one warning is shown."
  (lispm-session-test--with-dirs
    (let ((lispm-sessions-git-program (expand-file-name "no-such-git" project))
          (buffer (lispm-session-create project)))
      (dotimes (i 3)
        (lispm-session-test--turn buffer (format "turn %d" i) '(("ok")))
        (lispm-session-end-turn buffer)
        (should (equal (lispm-session-test--file-text
                        (buffer-local-value 'lispm-session-file buffer))
                       (with-current-buffer buffer (buffer-string))))
        (should-not (buffer-modified-p buffer)))
      (should (lispm-sessions-wait-for-commits 5))
      (should (= (lispm-session-test--warnings) 1))
      (should (with-current-buffer "*Warnings*"
                (save-excursion (goto-char (point-min)) (search-forward "no-such-git" nil t))))
      (should-not (file-exists-p (expand-file-name ".git" sessions))))))

(ert-deftest lispm-session-test-a-directory-that-cannot-be-a-repository ()
  "No repository, and `git init' fails; or a broken one: saved, one warning."
  (dolist (make-git
           (list (lambda (git) (make-symbolic-link "/proc/lispm-nowhere/x" git))
                 (lambda (git) (with-temp-file git (insert "not a git file\n")))))
    (lispm-session-test--with-dirs
      (make-directory sessions t)
      (funcall make-git (expand-file-name ".git" sessions))
      (let ((buffer (lispm-session-create project)))
        (dotimes (i 3)
          (lispm-session-test--turn buffer (format "turn %d" i) '(("ok")))
          (lispm-session-end-turn buffer)
          (should (lispm-sessions-wait-for-commits 30))
          (should (equal (lispm-session-test--file-text
                          (buffer-local-value 'lispm-session-file buffer))
                         (with-current-buffer buffer (buffer-string)))))
        (should (= (lispm-session-test--warnings) 1))))))

(defun lispm-session-test--slow-git (directory seconds)
  "Return a git program in DIRECTORY whose fast-import sleeps SECONDS first."
  (let ((git (expand-file-name "slow-git" directory)))
    (with-temp-file git
      (insert (format "#!/bin/sh\ncase \" $* \" in *\" fast-import \"*) sleep %s ;; esac\nexec %s \"$@\"\n"
                      seconds (shell-quote-argument (executable-find "git")))))
    (set-file-modes git #o755)
    git))

(defun lispm-session-test--commits (sessions file count)
  "Return the texts of FILE in the last COUNT commits in SESSIONS, oldest first."
  (cl-loop for back from (1- count) downto 0
           collect (lispm-session-test--git
                    sessions "show" (format "HEAD~%d:%s" back (file-name-nondirectory file)))))

(ert-deftest lispm-session-test-a-big-turn-does-not-wait-for-git ()
  "Ending a turn of a 1 MB session costs Emacs little, while git is slow.
Git's fast-import waits 2 s before it reads: no write to its pipes,
and no `lispm-session-end-turn', takes long (a pipe git does not read
took that long); each commit still holds the file as its turn left it."
  (lispm-session-test--with-dirs
    (let* ((lispm-sessions-git-program (lispm-session-test--slow-git project 2))
           (longest-send 0.0)
           (timed-send (lambda (send &rest args)
                         (let ((start (float-time)))
                           (prog1 (apply send args)
                             (setq longest-send (max longest-send (- (float-time) start)))))))
           (buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (line (concat (make-string 1000 ?x) "\n"))
           (texts nil)
           (ended nil))
      (advice-add 'process-send-string :around timed-send)
      (unwind-protect
          (progn
            (dotimes (i 2)
              (lispm-session-test--turn
               buffer (concat (format "turn %d\n" i) (apply #'concat (make-list 1050 line)))
               '(("ok")))
              (let ((start (float-time)))
                (lispm-session-end-turn buffer)
                (push (- (float-time) start) ended))
              (push (lispm-session-test--file-text file) texts)
              (when (= i 0)
                ;; The second turn ends once the first is the shell's,
                ;; while its git still sleeps.
                (let ((queue (gethash sessions lispm-sessions--queues))
                      (deadline (+ (float-time) 10)))
                  (while (and (not (process-live-p (lispm-sessions--queue-importer queue)))
                              (< (float-time) deadline))
                    (accept-process-output nil 0.01))
                  (should (lispm-sessions--queue-sent queue))
                  (should (> (file-attribute-size (file-attributes file)) (* 1024 1024))))))
            (should (< (apply #'max ended) 0.25))
            (should (< longest-send 0.25))
            (should (lispm-sessions-wait-for-commits 30))
            (should (equal (lispm-session-test--commits sessions file 2) (nreverse texts))))
        (advice-remove 'process-send-string timed-send)))))

(ert-deftest lispm-session-test-turns-quicker-than-the-shell-keep-their-text ()
  "Turns that end before the shell copied the last one: each commit is its own.
The file is then replaced, not written in place, and nothing the
copies needed is left behind."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (line (concat (make-string 200 ?y) "\n"))
           (inodes nil)
           (texts nil))
      (lispm-session-test--turn buffer "first" '(("ok")))
      (lispm-session-end-turn buffer)
      (should (lispm-sessions-wait-for-commits 30))
      ;; The shell's pipeline (not the shell Emacs started: Emacs
      ;; would see that stopped) is held, as a busy machine may hold
      ;; it: ten turns end meanwhile.
      (let* ((shell (process-id (lispm-sessions--queue-importer
                                 (gethash sessions lispm-sessions--queues))))
             (held (cl-remove-if-not
                    (lambda (pid) (eql (alist-get 'ppid (process-attributes pid)) shell))
                    (list-system-processes))))
        (should held)
        (dolist (pid held) (signal-process pid 'SIGSTOP))
        (unwind-protect
            (dotimes (i 10)
              (lispm-session-test--turn buffer (format "turn %d\n%s" i
                                                       (apply #'concat (make-list 500 line)))
                                        '(("ok")))
              (lispm-session-end-turn buffer)
              (push (file-attribute-inode-number (file-attributes file)) inodes)
              (push (lispm-session-test--file-text file) texts))
          (dolist (pid held) (signal-process pid 'SIGCONT))))
      (should (lispm-sessions-wait-for-commits 30))
      (should (equal (lispm-session-test--commits sessions file 10) (nreverse texts)))
      (should (> (length (delete-dups inodes)) 1))
      (should (equal (directory-files (expand-file-name ".git/lispm" sessions) nil "\\`[^.]")
                     nil))
      (should (equal (directory-files sessions nil "\\`\\.lispm") nil))
      (should (= (lispm-session-test--warnings) 0)))))

;;; Listing

(ert-deftest lispm-sessions-test-list-is-newest-first ()
  "Sessions are listed newest first, with their project and first line."
  (lispm-session-test--with-dirs
    (let ((files nil))
      (dolist (text '("* first session\nmore" "second session" "third session"))
        (let ((buffer (lispm-session-create project "m")))
          (lispm-session-test--turn buffer text '(("ok")))
          (lispm-session-end-turn buffer)
          (push (buffer-local-value 'lispm-session-file buffer) files)))
      (lispm-sessions-wait-for-commits 30)
      (with-temp-file (expand-file-name "notes.org" sessions) (insert "* Not a session\n"))
      ;; The second was written last, then the third, then the first.
      (cl-loop for file in (reverse files)
               for time in '(100 200 300)
               do (set-file-times file (time-add (encode-time '(0 0 0 1 1 2025 nil nil t))
                                                 time)))
      (set-file-times (nth 1 files) (encode-time '(0 0 0 1 1 2026 nil nil t)))
      (let ((list (lispm-sessions-list)))
        (should (equal (mapcar (lambda (s) (plist-get s :file)) list)
                       (list (nth 1 files) (nth 0 files) (nth 2 files))))
        (should (equal (mapcar (lambda (s) (plist-get s :first-line)) list)
                       '("second session" "third session" "* first session")))
        (should (equal (plist-get (car list) :project) project))
        (should (equal (plist-get (car list) :model) "m"))
        (should (numberp (plist-get (car list) :time)))))))

;;; Cutting results

(ert-deftest lispm-session-test-cap-result ()
  "Results are cut to 500 characters a line and 64 KB, with a note."
  (should (equal (lispm-session-cap-result "short\ntext") "short\ntext"))
  (should (equal (lispm-session-cap-result "") ""))
  (let* ((line (make-string 600 ?x))
         (capped (lispm-session-cap-result (concat "a\n" line "\nb"))))
    (should (equal capped (concat "a\n" (make-string 499 ?x) "…\nb\n"
                                  "[LispM cut 101 of 604 characters]"))))
  (let* ((text (mapconcat (lambda (i) (format "line %06d" i)) (number-sequence 1 20000) "\n"))
         (capped (lispm-session-cap-result text)))
    (should (<= (length capped) lispm-session-result-limit))
    (should (string-prefix-p "line 000001\nline 000002\n" capped))
    (should (string-match "\\[LispM cut \\([0-9]+\\) of \\([0-9]+\\) characters\\]\\'" capped))
    (should (= (string-to-number (match-string 2 capped)) (length text)))
    (should (= (string-to-number (match-string 1 capped))
               (- (length text) (- (length capped) (length (match-string 0 capped)) 1)))))
  ;; A 10 MB minified line: cut at once, well under the cap.
  (let* ((text (make-string (* 10 1024 1024) ?y))
         (start (float-time))
         (capped (lispm-session-cap-result text)))
    (should (< (- (float-time) start) 1.0))
    (should (equal capped (format "%s…\n[LispM cut %d of %d characters]"
                                  (make-string 499 ?y) (- (length text) 499) (length text))))))

;;; Compaction

(ert-deftest lispm-session-test-compaction ()
  "Old turns are archived behind a summary; the user's words stay word for word."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (long (make-string 3000 ?z))
           (turn1 (lispm-session-test--turn
                   buffer "Rule: always answer in French.\n* keep this"
                   `((,long (:id "1" :name "read_file" :arguments "{}" :result ,long))
                     ("D'accord."))))
           (turn2 (lispm-session-test--turn buffer "[Request R1 from claude]\nReview notes.el"
                                             `((,long))))
           (turn3 (lispm-session-test--turn buffer "And now?" '(("Maintenant."))))
           (source (lispm-session-compaction-source buffer)))
      (lispm-session-end-turn buffer)
      (should (equal (lispm-session-messages buffer) (append turn1 turn2 turn3)))
      (should (= (plist-get source :upto) 2))
      (should (= (plist-get source :turns) 2))
      (should (= (plist-get source :size) (+ (* 3 3000) 2 (length "D'accord."))))
      (should (string-match-p "always answer in French" (plist-get source :text)))
      (should (string-match-p "Review notes.el" (plist-get source :text)))
      (should-not (string-match-p "Maintenant" (plist-get source :text)))
      (should-not (lispm-session-compaction-source buffer 3))
      ;; A summary that is not smaller is refused, and nothing changes.
      (let ((text (with-current-buffer buffer (buffer-string))))
        (should-error (lispm-session-compact buffer (make-string 20000 ?s) 2)
                      :type 'lispm-compaction-not-smaller)
        (should (equal (with-current-buffer buffer (buffer-string)) text)))
      (lispm-session-compact buffer "The user wants French.\n* A review was asked." 2)
      (let ((messages (lispm-session-messages buffer)))
        (should (equal messages
                       (append (list (car turn1) (car turn2)
                                     '(:role "user" :content "Summary of turns 1-2:\n\nThe user wants French.\n* A review was asked."))
                               turn3))))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (re-search-forward "^\\* Turn 1: .*:ARCHIVE:$" nil t))
        (should (re-search-forward "^\\* Turn 2: .*:ARCHIVE:$" nil t))
        (should (re-search-forward "^\\* Summary of turns 1-2$" nil t))
        ;; The archived text is still there, folded.
        (goto-char (point-min))
        (should (search-forward "D'accord." nil t))
        (should (invisible-p (1- (point))))
        ;; The user edits the summary: that is what reads back.
        (goto-char (point-min))
        (search-forward "The user wants French.")
        (replace-match "The user wants French, always."))
      (should (equal (plist-get (nth 2 (lispm-session-messages buffer)) :content)
                     "Summary of turns 1-2:\n\nThe user wants French, always.\n* A review was asked."))
      ;; The compaction is committed, and reads back from the file.
      (should (lispm-sessions-wait-for-commits 30))
      (should (string-match-p "turns 1-2 compacted"
                              (lispm-session-test--git sessions "log" "-1" "--format=%s")))
      ;; A second compaction replaces the first summary too.
      (lispm-session-test--turn buffer "Last one" '(("Fin.")))
      (let ((source (lispm-session-compaction-source buffer)))
        (should (= (plist-get source :upto) 3))
        (should (string-match-p "French, always" (plist-get source :text)))
        (lispm-session-compact buffer "French." 3))
      (let ((messages (lispm-session-messages buffer)))
        (should (equal (mapcar (lambda (m) (plist-get m :content)) messages)
                       (list (plist-get (car turn1) :content) (plist-get (car turn2) :content)
                             "And now?" "Summary of turns 1-3:\n\nFrench." "Last one" "Fin.")))))))

(ert-deftest lispm-session-test-rewound-turns-leave-the-conversation ()
  "Turns tagged REWOUND stay in the document, and the model no longer sees them."
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (turn1 (lispm-session-test--turn buffer "One" '(("Un."))))
           (turn2 (lispm-session-test--turn buffer "Two" '(("Deux."))))
           (turn3 (lispm-session-test--turn buffer "Three" '(("Trois.")))))
      (lispm-session-end-turn buffer)
      (should (equal (lispm-session-messages buffer) (append turn1 turn2 turn3)))
      (lispm-session-mark-rewound buffer '(2 3) t)
      (should (equal (lispm-session-messages buffer) turn1))
      (should (equal (mapcar (lambda (turn) (plist-get turn :rewound)) (lispm-session-turns buffer))
                     '(nil t t)))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (re-search-forward "^\\* Turn 2: Two +:REWOUND:$" nil t))
        (should (search-forward "Deux." nil t)))
      ;; Twice is once; undone, the turns are back, the headings as they were.
      (lispm-session-mark-rewound buffer '(2) t)
      (lispm-session-mark-rewound buffer '(2 3) nil)
      (should (equal (lispm-session-messages buffer) (append turn1 turn2 turn3)))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (re-search-forward "^\\* Turn 2: Two$" nil t)))
      ;; From the file, as another Emacs reads it.
      (lispm-session-mark-rewound buffer '(3) t)
      (let ((file (buffer-local-value 'lispm-session-file buffer)))
        (kill-buffer buffer)
        (should (equal (lispm-session-messages (lispm-session-open file))
                       (append turn1 turn2)))))))

(ert-deftest lispm-session-test-reverted-mark-and-summary-from-a-turn ()
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (turn1 (lispm-session-test--turn buffer "One" `((,(make-string 500 ?a)))))
           (_turn2 (lispm-session-test--turn buffer "Two" `((,(make-string 500 ?b)))))
           (_turn3 (lispm-session-test--turn buffer "Three" `((,(make-string 500 ?c))))))
      (lispm-session-end-turn buffer)
      (lispm-session-mark-reverted buffer 2 "[2026-12-05 Sat 12:00]")
      (should (equal (plist-get (nth 1 (lispm-session-turns buffer)) :reverted)
                     "[2026-12-05 Sat 12:00]"))
      (lispm-session-mark-reverted buffer 2 nil)
      (should-not (plist-get (nth 1 (lispm-session-turns buffer)) :reverted))
      (should-error (lispm-session-mark-reverted buffer 9 "now") :type 'lispm-session-error)
      ;; Summarized from turn 2: turn 1 stays whole.
      (let ((source (lispm-session-compaction-source buffer nil 2)))
        (should (= (plist-get source :from) 2))
        (should (= (plist-get source :upto) 3))
        (should-not (string-search "aaaa" (plist-get source :text)))
        (should (string-search "cccc" (plist-get source :text))))
      (lispm-session-compact buffer "B and C happened." 3 2)
      (should (equal (lispm-session-messages buffer)
                     (append turn1
                             '((:role "user" :content "Two") (:role "user" :content "Three")
                               (:role "user" :content "Summary of turns 2-3:\n\nB and C happened.")))))
      (with-current-buffer buffer
        (goto-char (point-min))
        (should (re-search-forward "^\\* Summary of turns 2-3$" nil t))))))

(ert-deftest lispm-session-test-fork-keeps-the-history-up-to-a-turn ()
  (lispm-session-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (turn1 (lispm-session-test--turn buffer "One" '(("Un."))))
           (_turn2 (lispm-session-test--turn buffer "Two" '(("Deux.")))))
      (lispm-session-end-turn buffer)
      (let* ((before (with-current-buffer buffer (buffer-string)))
             (file (lispm-session-fork buffer 1))
             (fork (lispm-session-open file)))
        (should (string-match-p "-fork-1\\.org\\'" file))
        (should (equal (lispm-session-messages fork) turn1))
        (with-current-buffer fork
          (should (string-match-p "-fork-1\\'" lispm-session-id))
          (goto-char (point-min))
          (should (re-search-forward "^#\\+LISPM_FORKED_FROM: .* turn 1$" nil t)))
        ;; The first session is untouched; the fork is committed.
        (should (equal (with-current-buffer buffer (buffer-string)) before))
        (should (lispm-sessions-wait-for-commits 30))
        (should (string-match-p "forked from"
                                (lispm-session-test--git sessions "log" "-1" "--format=%s")))
        ;; Twice: another name.
        (should-not (equal (lispm-session-fork buffer 1) file))))))

(provide 'lispm-session-test)
;;; lispm-session-test.el ends here
