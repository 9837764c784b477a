;;; lispm-errors-test.el --- Tests of LispM's error conditions and their one boundary  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every condition that can reach the sidecar has one JSON-RPC code,
;; unique across Emacs and the sidecar but where both mean the same;
;; each handler's error reaches the sidecar with its condition's code,
;; through the one boundary, `lispm-sidecar-dispatch-request'; and a tool's failure can be told
;; apart by its condition, which carries the data a caller acts on.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

;;; The table of codes

(defun lispm-errors-test--coded-conditions ()
  "Return every condition with a JSON-RPC code of its own, as (CODE . NAME)."
  (let (found)
    (mapatoms (lambda (symbol)
                (when-let* ((code (get symbol 'lispm-jsonrpc-code)))
                  (push (cons code symbol) found))))
    (sort found (lambda (a b) (> (car a) (car b))))))

(ert-deftest lispm-errors-test-codes-are-unique ()
  "No two conditions have the same code; every code is a LispM error's, in range."
  (let ((coded (lispm-errors-test--coded-conditions)))
    ;; All of LispM is loaded: the table is not empty.
    (should (>= (length coded) 25))
    (dolist (entry coded)
      (should (memq 'lispm-error (get (cdr entry) 'error-conditions)))
      (should (integerp (car entry)))
      ;; JSON-RPC's range for implementations, or its invalid params
      ;; and method not found.
      (should (or (<= -32099 (car entry) -32000) (memql (car entry) '(-32601 -32602)))))
    (let ((codes (mapcar #'car coded)))
      (should (equal (seq-uniq codes) codes)))))

(defconst lispm-errors-test--shared
  '((lispm-error . "LispmError")
    (lispm-unknown-agent . "UnknownAgent")
    (lispm-sidecar-version-mismatch . "VersionMismatch")
    (lispm-paste-not-now . "NotNow")
    (lispm-tool-outside-folder . "OutsideFolder")
    (lispm-tool-error . "ToolFailed")
    (lispm-invalid-params . "InvalidParams"))
  "The conditions that share their code with a sidecar error, in one meaning.")

(defun lispm-errors-test--sidecar-codes ()
  "Return the sidecar's error classes and their codes, as (CODE . CLASS).
They are read from the `code = N' attribute of each class in its sources."
  (let ((root (expand-file-name "../python/lispm_sidecar" lispm-directory))
        found)
    (dolist (file (directory-files-recursively root "\\.py\\'"))
      (with-temp-buffer
        (insert-file-contents file)
        (let (class)
          (while (re-search-forward
                  "^\\(?:class \\([A-Za-z_]+\\)(\\|[ \t]+code = \\(-[0-9]+\\)$\\)" nil t)
            (if (match-string 1)
                (setq class (match-string 1))
              (push (cons (string-to-number (match-string 2)) class) found))))))
    found))

(ert-deftest lispm-errors-test-codes-agree-with-the-sidecar ()
  "A code Emacs and the sidecar both use means the same on both sides."
  (let ((sidecar (lispm-errors-test--sidecar-codes)))
    (should (equal (car (rassoc "NotNow" sidecar)) -32007))
    (pcase-dolist (`(,condition . ,class) lispm-errors-test--shared)
      (should (equal (list condition (car (rassoc class sidecar)))
                     (list condition (get condition 'lispm-jsonrpc-code)))))
    (pcase-dolist (`(,code . ,condition) (lispm-errors-test--coded-conditions))
      (when-let* ((class (cdr (assq code sidecar))))
        (should (equal (list code condition class)
                       (list code condition
                             (cdr (assq condition lispm-errors-test--shared)))))))))

(ert-deftest lispm-errors-test-a-condition-without-a-code-has-its-parents ()
  (should (eql (lispm-error-jsonrpc-code 'lispm-tool-no-such-file) -32051))
  (should (eql (lispm-error-jsonrpc-code 'lispm-skill-unknown) -32076))
  (should (eql (lispm-error-jsonrpc-code 'lispm-term-error) -32000)))

;;; The boundary

(defmacro lispm-errors-test--rpc-error (method params)
  "Return (CODE MESSAGE) of the JSON-RPC error that METHOD with PARAMS answers."
  `(let ((err (should-error (lispm-sidecar-dispatch-request ,method ,params)
                            :type 'jsonrpc-error)))
     (list (alist-get 'jsonrpc-error-code (cdr err))
           (alist-get 'jsonrpc-error-message (cdr err)))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'lispm-errors-test/fail)) params)
  "Fail as PARAMS say: `:how' is `lisp', `user' or `rpc'."
  (pcase (plist-get params :how)
    ('lisp (car 1))
    ('user (user-error "Not that way"))
    ('rpc (jsonrpc-error :code -32099 :message "as it is"))))

(ert-deftest lispm-errors-test-handlers-answer-with-their-conditions-codes ()
  (lispm-test-with-agent (agent :name "codex")
    (should (equal (lispm-errors-test--rpc-error 'emacs/no-such-method nil)
                   '(-32601 "Emacs has no method emacs/no-such-method")))
    (should (equal (lispm-errors-test--rpc-error 'emacs/buffer-text '(:buffer "no such, surely"))
                   '(-32050 "no buffer named no such, surely")))
    (should (equal (lispm-errors-test--rpc-error 'emacs/buffer-text '(:buffer 3))
                   '(-32602 "emacs/buffer-text: `buffer' must be a buffer name")))
    (let ((file (expand-file-name "none" (lispm-agent-folder agent))))
      (should (equal (lispm-errors-test--rpc-error 'emacs/open-file (list :file file))
                     (list -32051 (format "emacs/open-file: no file %s" file)))))
    (should (equal (lispm-errors-test--rpc-error 'emacs/open-file '(:file "relative"))
                   '(-32602 "emacs/open-file: `file' must be an absolute file name: relative")))
    ;; The unknown agent is the sidecar's own code, for each handler that names one.
    (should (equal (lispm-errors-test--rpc-error 'emacs/paste '(:name "nobody" :text "x"))
                   '(-32001 "no live agent nobody (instance nil)")))
    (dolist (method '(emacs/search-tools emacs/skill emacs/call-tool))
      (should (equal (lispm-errors-test--rpc-error method '(:name "nobody"))
                     '(-32001 "no live agent nobody"))))
    ;; The agent has no terminal: LispM refuses to paste.
    (should (equal (lispm-errors-test--rpc-error 'emacs/paste '(:name "codex" :text "x"))
                   '(-32052 "refused: (\"codex\" \"no live terminal\")")))
    (pcase-let ((`(,code ,message) (lispm-errors-test--rpc-error
                                    'emacs/skill '(:name "codex" :skill "no-such-skill"))))
      (should (eql code -32076))
      (should (string-prefix-p "Unknown skill no-such-skill; the skills are:" message)))))

(ert-deftest lispm-errors-test-other-errors-at-the-boundary ()
  "Lisp's own errors are internal errors; a `user-error' is LispM's generic one."
  (should (equal (lispm-errors-test--rpc-error 'lispm-errors-test/fail '(:how lisp))
                 '(-32603 "lispm-errors-test/fail: Wrong type argument: listp, 1")))
  (should (equal (lispm-errors-test--rpc-error 'lispm-errors-test/fail '(:how user))
                 '(-32000 "Not that way")))
  (should (equal (lispm-errors-test--rpc-error 'lispm-errors-test/fail '(:how rpc))
                 '(-32099 "as it is"))))

;;; Tools' failures

(defmacro lispm-errors-test--in-folder (&rest body)
  "Run BODY with `agent' working in `folder', a fresh temporary folder.
Buffers visiting its files are killed afterwards."
  (declare (indent 0) (debug t))
  `(let ((text-quoting-style 'grave))
     (lispm-test-with-agent (agent)
       (let ((folder (lispm-agent-folder agent)))
         (unwind-protect (progn ,@body)
           (dolist (buffer (buffer-list))
             (when (and (buffer-file-name buffer)
                        (string-prefix-p folder (buffer-file-name buffer)))
               (with-current-buffer buffer (set-buffer-modified-p nil))
               (kill-buffer buffer))))))))

(defun lispm-errors-test--write (folder name text)
  "Write TEXT to the file NAME in FOLDER; return the file's name."
  (let ((file (expand-file-name name folder)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file (insert text))
    file))

(defun lispm-errors-test--run (tool agent args)
  "Run TOOL for AGENT with ARGS; return its result plist."
  (lispm-tools-call tool agent args 10))

(defmacro lispm-errors-test--fails (form tool args condition message &rest fields)
  "Check that FORM signals CONDITION with MESSAGE and FIELDS, and TOOL too.
FORM calls TOOL's target or function; TOOL run with ARGS by the
variable `agent' must fail with the same MESSAGE, and name CONDITION."
  `(progn
     (let ((err (should-error ,form :type ',condition)))
       (should (equal err (list ',condition ,message ,@fields)))
       (should (equal (lispm-error-message err) ,message)))
     (should (equal (lispm-errors-test--run ,tool agent ,args)
                    (list :ok nil :error ,message :condition ,(symbol-name condition))))))

(defmacro lispm-errors-test--edit-fails (args condition message &rest fields)
  "Check that `edit_file' with ARGS fails with CONDITION, MESSAGE and FIELDS.
Its target, the diff it proposes, fails already."
  `(lispm-errors-test--fails (lispm-tool-target "edit_file" agent ,args) "edit_file" ,args
                             ,condition ,message ,@fields))

(ert-deftest lispm-errors-test-edit-failures-have-their-conditions ()
  (lispm-errors-test--in-folder
    (let ((file (lispm-errors-test--write folder "code.el" "(a)\n(a)\n(b)\n")))
      (lispm-errors-test--edit-fails
       '(:path "code.el" :old "(c)" :new "x")
       lispm-edit-old-text-not-found
       "`old' is not in code.el; it must match the file's text exactly, whitespace included"
       file "(c)")
      (lispm-errors-test--edit-fails
       '(:path "code.el" :old "(a)" :new "x")
       lispm-edit-old-text-ambiguous
       "`old' occurs 2 times in code.el; include more of the surrounding text so that it occurs once"
       file "(a)" 2)
      (lispm-errors-test--edit-fails
       '(:path "gone.el" :old "a" :new "b")
       lispm-tool-no-such-file "No such file: gone.el (write_file creates files)"
       (expand-file-name "gone.el" folder))
      (lispm-errors-test--edit-fails
       '(:path "code.el" :old "(b)" :new "x" :diff "@@ -1 +1 @@\n-(b)\n+x\n")
       lispm-tool-bad-args
       "The edit_file tool takes either `old' and `new', or `diff', not both")
      (lispm-errors-test--edit-fails
       '(:path "code.el" :diff "@@ -1,2 +1,2 @@\n (a)\n-(z)\n+x\n")
       lispm-diff-does-not-apply
       "code.el: Hunk 1 of the diff does not apply: its lines (starting \"(a)\") are not in the file"
       1 "(a)\n")
      (lispm-errors-test--edit-fails
       '(:path "code.el" :diff "hello")
       lispm-diff-malformed "code.el: The diff has no hunks (lines starting with @@)")
      (lispm-errors-test--edit-fails
       '(:path "code.el" :diff "@@ -1 +1 @@\n?what\n")
       lispm-diff-malformed "code.el: Cannot read the diff at line: ?what" "?what\n")
      ;; A tool's failure is a tool's: the generic handler catches them all.
      (should-error (lispm-tool-target "edit_file" agent '(:path "code.el" :old "(c)" :new "x"))
                    :type 'lispm-tool-error)
      (should (equal (lispm-errors-test--run "read_file" agent '(:path "code.el"))
                     '(:ok t :text "(a)\n(a)\n(b)\n"))))))

(ert-deftest lispm-errors-test-buffer-and-file-failures-have-their-conditions ()
  (lispm-errors-test--in-folder
    (let* ((file (lispm-errors-test--write folder "notes.txt" "one\n"))
           (buffer (find-file-noselect file)))
      ;; Read-only in Emacs.
      (with-current-buffer buffer (setq buffer-read-only t))
      (lispm-errors-test--fails
       (lispm-tool-write-file agent file "two\n")
       "write_file" '(:path "notes.txt" :content "two\n")
       lispm-buffer-read-only "notes.txt is read-only in Emacs" buffer)
      ;; Unsaved changes in Emacs, and a change on disk since.
      (with-current-buffer buffer
        (setq buffer-read-only nil)
        (insert "mine\n"))
      (with-temp-file file (insert "theirs\n"))
      (set-file-times file (time-add nil 5))
      (let ((err (should-error (lispm-tool-write-file agent file "two\n")
                               :type 'lispm-buffer-conflict)))
        (should (equal err (list 'lispm-buffer-conflict "notes.txt has unsaved changes in \
Emacs and changed on disk; the user must settle that first" buffer))))
      (should (equal (plist-get (lispm-errors-test--run "write_file" agent
                                                        '(:path "notes.txt" :content "two\n"))
                                :condition)
                     "lispm-buffer-conflict"))
      (with-current-buffer buffer (should (equal (buffer-string) "mine\none\n"))))
    (make-directory (expand-file-name "sub" folder))
    (lispm-errors-test--fails
     (lispm-tool-write-file agent (expand-file-name "sub" folder) "x")
     "write_file" '(:path "sub" :content "x")
     lispm-tool-is-a-directory "sub is a directory" (expand-file-name "sub" folder))
    (lispm-errors-test--fails
     (lispm-tool-read-file agent (expand-file-name "sub" folder))
     "read_file" '(:path "sub")
     lispm-tool-is-a-directory "sub is a directory; list_files lists it"
     (expand-file-name "sub" folder))
    (lispm-errors-test--fails
     (lispm-tool-list-files agent (expand-file-name "notes.txt" folder))
     "list_files" '(:path "notes.txt")
     lispm-tool-not-a-directory "Not a directory: notes.txt" (expand-file-name "notes.txt" folder))
    (lispm-errors-test--fails
     (lispm-tool-read-file agent (expand-file-name "gone.txt" folder))
     "read_file" '(:path "gone.txt")
     lispm-tool-no-such-file "No such file: gone.txt" (expand-file-name "gone.txt" folder))))

(provide 'lispm-errors-test)
;;; lispm-errors-test.el ends here
