;;; lispm-tools-test.el --- Tests of the tool registry and the base tools  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each test works in a temporary folder of its own, with an agent (no CLI)
;; whose folder it is.  Nothing but `sh', `sleep', `grep' and `diff'
;; runs.

;;; Code:

(require 'ert)
(require 'lispm-tools)
(require 'lispm-test-fixtures)

(defvar lispm-tools-test--ran nil
  "What the test tool's body last saw, or nil if it did not run.")

(defmacro lispm-tools-test--in-folder (&rest body)
  "Run BODY with `folder' a fresh temporary folder and `agent' working in it.
Buffers visiting files there are killed afterwards."
  (declare (indent 0) (debug t))
  `(let* ((folder (file-name-as-directory
                   (file-truename (make-temp-file "lispm-tools-test" t))))
          (text-quoting-style 'grave))
     (unwind-protect
         (lispm-test-with-agent (agent :folder folder)
           (ignore agent)
           ,@body)
       (lispm-test-remove-folder folder))))

(defun lispm-tools-test--run (tool agent args)
  "Run TOOL for AGENT with ARGS and return its result plist, waiting for it."
  (lispm-tools-call tool agent args 30))

(defun lispm-tools-test--undo-once (buffer)
  "Undo the last change in BUFFER, as one `undo' command does."
  (with-current-buffer buffer
    (deactivate-mark)
    (let ((last-command nil))
      (undo))))

(defmacro lispm-tools-test--with-test-tool (&rest body)
  "Run BODY with a test tool `lispm_test_echo' registered, and only it."
  (declare (indent 0) (debug t))
  `(let ((lispm-tools nil)
         (lispm-tools-test--ran nil))
     (eval '(lispm-define-tool lispm-test-echo
              (agent (path file "A file in the folder.")
                     (count integer "How many times.")
                     &optional
                     (loud boolean "Whether to shout.")
                     (tags (array string) "Labels to add.")
                     (note string "Free text."))
              "Echo the arguments PATH and COUNT back, for the tests.

Nothing else: the second paragraph is not part of the description."
              :kind 'read
              (setq lispm-tools-test--ran (list agent path count loud tags note))
              (format "%s x%d" (file-name-nondirectory path) count))
           t)
     ,@body))

;;; Definitions and schemas

(ert-deftest lispm-tools-test-definition-derives-schema ()
  (lispm-tools-test--with-test-tool
    (let ((tool (lispm-tool-get "lispm_test_echo")))
      (should (lispm-tool-p tool))
      (should (equal (mapcar #'lispm-tool-name lispm-tools) '("lispm_test_echo")))
      (should (eq (lispm-tool-kind tool) 'read))
      (should (equal (lispm-tool-description tool)
                     "Echo the arguments path and count back, for the tests."))
      (should (fboundp 'lispm-tool-lispm-test-echo))
      (should (equal (help-function-arglist 'lispm-tool-lispm-test-echo t)
                     '(agent path count &optional loud tags note)))
      (should (string-match-p "COUNT (integer): How many times\\."
                              (documentation 'lispm-tool-lispm-test-echo)))
      (let* ((schema (lispm-tool-schema tool))
             (properties (plist-get schema :properties)))
        (should (equal (plist-get schema :type) "object"))
        (should (equal (plist-get schema :required) ["path" "count"]))
        (should (eq (plist-get schema :additionalProperties) :json-false))
        (should (equal (gethash "path" properties)
                       '(:type "string" :description "A file in the folder.")))
        (should (equal (gethash "count" properties)
                       '(:type "integer" :description "How many times.")))
        (should (equal (gethash "loud" properties)
                       '(:type "boolean" :description "Whether to shout.")))
        (should (equal (gethash "tags" properties)
                       '(:type "array" :items (:type "string")
                               :description "Labels to add.")))
        (should (equal (hash-table-count properties) 5))
        ;; It encodes as the sidecar's jsonrpc encodes.
        (should (string-match-p "\"required\":\\[\"path\",\"count\"\\]"
                                (json-serialize schema :false-object :json-false)))))))

(ert-deftest lispm-tools-test-base-tools-are-registered ()
  (dolist (name '("read_file" "list_files" "grep" "edit_file" "write_file"
                  "run_shell" "eval_elisp" "search_tools"))
    (should (lispm-tool-get name)))
  (should (eq (lispm-tool-kind (lispm-tool-get "edit_file")) 'edit))
  (should (eq (lispm-tool-kind (lispm-tool-get "write_file")) 'edit))
  (should (eq (lispm-tool-kind (lispm-tool-get "run_shell")) 'shell))
  (should (eq (lispm-tool-kind (lispm-tool-get "eval_elisp")) 'eval))
  (should (eq (lispm-tool-kind (lispm-tool-get "read_file")) 'read))
  (should (equal (plist-get (lispm-tool-schema "edit_file") :required) ["path"]))
  (should (equal (plist-get (lispm-tool-schema "write_file") :required)
                 ["path" "content"]))
  (should (equal (hash-table-count (plist-get (lispm-tool-schema "edit_file")
                                              :properties))
                 4))
  (should (null (lispm-tool-get "no_such_tool"))))

(ert-deftest lispm-tools-test-bad-definitions-are-refused ()
  ;; A bad argument spec, a missing kind, a bad kind: at expansion.
  (should-error (macroexpand '(lispm-define-tool t1 ((x strong "X.")) "Doc." :kind 'read nil)))
  (should-error (macroexpand '(lispm-define-tool t2 ((x string)) "Doc." :kind 'read nil)))
  (should-error (macroexpand '(lispm-define-tool t3 ((x string "X.")) "Doc." nil)))
  (should-error (macroexpand '(lispm-define-tool t4 ((x string "X.")) "Doc." :kind 'write nil)))
  ;; A tool may not clobber a function that is not a tool's.
  (let ((lispm-tools lispm-tools)
        (before (symbol-function 'lispm-tool-schema)))
    (should-error (eval '(lispm-define-tool schema () "Doc." :kind 'read "x") t))
    (should (eq (symbol-function 'lispm-tool-schema) before))
    (should-not (lispm-tool-get "schema"))))

;;; Validation

(ert-deftest lispm-tools-test-validation-errors-name-the-argument ()
  (lispm-tools-test--in-folder
    (lispm-tools-test--with-test-tool
      (lispm-test-write-file folder "a.txt" "A")
      (should (lispm-tools-validate "lispm_test_echo" '(:path "a.txt" :count 2)))
      (pcase-dolist (`(,args ,condition ,regexp)
                     '(((:count 2) lispm-tool-bad-args "missing required argument `path'")
                       ((:path "a.txt") lispm-tool-bad-args "missing required argument `count'")
                       ((:path "a.txt" :count "2") lispm-tool-bad-args
                        "argument `count' must be an integer, not \"2\"")
                       ((:path 7 :count 2) lispm-tool-bad-args "argument `path' must be a string")
                       ((:path "a.txt" :count 2 :loud "yes") lispm-tool-bad-args
                        "argument `loud' must be a boolean")
                       ((:path "a.txt" :count 2 :tags ["a" 1]) lispm-tool-bad-args
                        "argument `tags' must be an array of strings")
                       ((:path "a.txt" :count 2 :colour "red") lispm-tool-bad-args
                        "unknown argument `colour'; it takes `path', `count'")
                       ((:path "../a.txt" :count 2) lispm-tool-outside-folder "outside the folder")))
        (let ((err (should-error (lispm-tool-target "lispm_test_echo" agent args)
                                 :type condition)))
          (should (string-match-p (regexp-quote "lispm_test_echo") (concat "lispm_test_echo" (cadr err))))
          (should (string-match-p (regexp-quote regexp) (cadr err))))
        (let ((result (lispm-tools-test--run "lispm_test_echo" agent args)))
          (should (eq (plist-get result :ok) nil))
          (should (equal (plist-get result :condition) (symbol-name condition)))
          (should (string-match-p (regexp-quote regexp) (plist-get result :error))))
        (should-not lispm-tools-test--ran))
      ;; Not a JSON object at all.
      (should-error (lispm-tools-validate "lispm_test_echo" '(:path)) :type 'lispm-tool-bad-args)
      ;; Good arguments run, coerced: JSON false is nil, arrays are lists.
      (let ((result (lispm-tools-test--run
                     "lispm_test_echo" agent
                     '(:path "a.txt" :count 2 :loud :json-false :tags ["x" "y"]))))
        (should (equal result '(:ok t :text "a.txt x2")))
        (should (equal lispm-tools-test--ran
                       (list agent (expand-file-name "a.txt" folder) 2 nil '("x" "y") nil)))))))

(ert-deftest lispm-tools-test-unknown-tool ()
  (lispm-tools-test--in-folder
    (let ((err (should-error (lispm-tools-validate "rm_rf" nil) :type 'lispm-tool-unknown)))
      (should (string-match-p "Unknown tool rm_rf; the tools are: .*read_file" (cadr err))))
    (should-error (lispm-tool-target "rm_rf" agent nil) :type 'lispm-tool-unknown)
    (let ((result (lispm-tools-test--run "rm_rf" agent '(:path "x"))))
      (should (eq (plist-get result :ok) nil))
      (should (equal (plist-get result :condition) "lispm-tool-unknown"))
      (should (string-match-p "Unknown tool rm_rf" (plist-get result :error)))
      ;; Results go to the sidecar as they are.
      (should (json-serialize result :false-object :json-false :null-object nil)))))

;;; Confinement

(ert-deftest lispm-tools-test-confinement ()
  (lispm-tools-test--in-folder
    (let ((outside (file-name-as-directory
                    (file-truename (make-temp-file "lispm-tools-outside" t)))))
      (unwind-protect
          (progn
            (lispm-test-write-file outside "secret" "SECRET")
            (lispm-test-write-file folder "a.txt" "A")
            (make-symbolic-link outside (expand-file-name "escape" folder))
            (make-symbolic-link (expand-file-name "secret" outside)
                                (expand-file-name "link-to-secret" folder))
            (make-symbolic-link (expand-file-name "a.txt" folder)
                                (expand-file-name "inner-link" folder))
            ;; Inside: relative, normalised, absolute, the folder itself.
            (should (equal (lispm-tools-resolve agent "a.txt") (concat folder "a.txt")))
            (should (equal (lispm-tools-resolve agent "sub/../a.txt") (concat folder "a.txt")))
            (should (equal (lispm-tools-resolve agent (concat folder "a.txt"))
                           (concat folder "a.txt")))
            (should (equal (lispm-tools-resolve agent "new/file.txt")
                           (concat folder "new/file.txt")))
            (should (equal (lispm-tools-resolve agent "inner-link") (concat folder "a.txt")))
            (should (equal (lispm-tools-resolve agent ".") folder))
            (should (equal (lispm-tools-resolve agent "") folder))
            ;; Outside: traversal, absolute, home, symbolic links out.
            (dolist (path (list "../x" "sub/../../x" "/etc/passwd" "~/x" "~root/x"
                                (concat outside "secret") "escape/secret"
                                "escape/new-file" "link-to-secret"
                                (concat folder "../x") "/ssh:host:/etc/passwd"))
              (let ((err (should-error (lispm-tools-resolve agent path)
                                       :type 'lispm-tool-outside-folder)))
                (should (string-match-p "outside the folder .*refused" (cadr err)))))
            ;; The tools refuse before doing anything, targets included.
            (should-error (lispm-tool-target "edit_file" agent
                                             '(:path "escape/secret" :old "SECRET" :new "x"))
                          :type 'lispm-tool-outside-folder)
            (dolist (call '(("read_file" (:path "escape/secret"))
                            ("read_file" (:path "link-to-secret"))
                            ("edit_file" (:path "escape/secret" :old "SECRET" :new "x"))
                            ("write_file" (:path "escape/new-file" :content "x"))
                            ("write_file" (:path "../lispm-tools-test-outside" :content "x"))
                            ("list_files" (:path ".."))
                            ("grep" (:pattern "SECRET" :path "escape"))))
              (let ((result (lispm-tools-test--run (car call) agent (cadr call))))
                (should (equal (plist-get result :condition) "lispm-tool-outside-folder"))))
            (should (equal (lispm-test-read-file (concat outside "secret")) "SECRET"))
            (should-not (file-exists-p (concat outside "new-file")))
            (should-not (file-exists-p (expand-file-name "../lispm-tools-test-outside" folder)))
            (should-not (find-buffer-visiting (concat outside "secret"))))
        (delete-directory outside t)))))

;;; Reading

(ert-deftest lispm-tools-test-read-file-sees-unsaved-changes ()
  (lispm-tools-test--in-folder
    (let ((file (lispm-test-write-file folder "notes.txt" "on disk\n")))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "notes.txt"))
                     '(:ok t :text "on disk\n")))
      (with-current-buffer (find-file-noselect file)
        (goto-char (point-max))
        (insert "unsaved\n")
        (narrow-to-region 1 3))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "notes.txt"))
                     '(:ok t :text "on disk\nunsaved\n")))
      (should (equal (lispm-test-read-file file) "on disk\n"))
      (let ((missing (lispm-tools-test--run "read_file" agent '(:path "nope.txt"))))
        (should (equal missing '(:ok nil :error "No such file: nope.txt"
                                     :condition "lispm-tool-no-such-file"))))
      (should (string-match-p "is a directory"
                              (plist-get (lispm-tools-test--run "read_file" agent '(:path "."))
                                         :error)))
      (should (equal (lispm-tool-target "read_file" agent '(:path "notes.txt"))
                     (list :kind 'read :tool "read_file" :files (list file)))))))

(ert-deftest lispm-tools-test-list-files ()
  (lispm-tools-test--in-folder
    (lispm-test-write-file folder "a.el" "")
    (lispm-test-write-file folder "sub/b.el" "")
    (lispm-test-write-file folder "sub/c.txt" "")
    (lispm-test-write-file folder ".git/config" "")
    (should (equal (lispm-tools-test--run "list_files" agent nil)
                   '(:ok t :text "a.el\nsub/b.el\nsub/c.txt")))
    (should (equal (lispm-tools-test--run "list_files" agent '(:pattern "*.el"))
                   '(:ok t :text "a.el\nsub/b.el")))
    (should (equal (lispm-tools-test--run "list_files" agent '(:path "sub"))
                   '(:ok t :text "sub/b.el\nsub/c.txt")))
    (let ((lispm-tools-list-limit 2))
      (should (string-match-p "\\`a.el\nsub/b.el\n\\[more files: only the first 2"
                              (plist-get (lispm-tools-test--run "list_files" agent nil)
                                         :text))))))

(ert-deftest lispm-tools-test-grep ()
  (lispm-tools-test--in-folder
    (lispm-test-write-file folder "a.txt" "one\nneedle here\n")
    (lispm-test-write-file folder "sub/b.txt" "needle\nno\n")
    (lispm-test-write-file folder ".git/c" "needle\n")
    (let ((result (lispm-tools-test--run "grep" agent '(:pattern "needl+e"))))
      (should (eq (plist-get result :ok) t))
      (should (equal (sort (split-string (plist-get result :text) "\n" t) #'string<)
                     '("a.txt:2:needle here" "sub/b.txt:1:needle"))))
    (should (equal (lispm-tools-test--run "grep" agent '(:pattern "needle" :path "sub"))
                   '(:ok t :text "sub/b.txt:1:needle\n")))
    (should (equal (lispm-tools-test--run "grep" agent '(:pattern "haystack"))
                   '(:ok t :text "No matches.")))
    (should (eq (plist-get (lispm-tools-test--run "grep" agent '(:pattern "(")) :ok) nil))))

;;; Reading literally, and in pieces

(defun lispm-tools-test--gzip (folder name text)
  "Write TEXT gzipped to the file NAME in FOLDER; return its name."
  (let ((file (expand-file-name name folder)))
    (with-temp-buffer
      (set-buffer-multibyte nil)
      (insert text)
      (call-process-region (point-min) (point-max) "gzip" t t nil "-c")
      (let ((coding-system-for-write 'no-conversion)
            (file-name-handler-alist nil))
        (write-region nil nil file nil 'silent)))
    file))

(ert-deftest lispm-tools-test-read-file-is-literal ()
  "No file name handler or format runs: nothing is decompressed or decrypted.
The text's coding system is still decoded."
  (lispm-tools-test--in-folder
    (let ((auto-compression-mode nil))
      (auto-compression-mode 1)
      (lispm-tools-test--gzip folder "bomb.txt.gz" (make-string 300000 ?a))
      (let ((result (lispm-tools-test--run "read_file" agent '(:path "bomb.txt.gz"))))
        (should (equal (plist-get result :condition) "lispm-tool-error"))
        (should (string-match-p "\\`bomb.txt.gz is not text ([0-9]+ bytes of binary \
data); read_file reads text only\\'" (plist-get result :error))))
      ;; Not an encrypted file at all: epa-file would run gpg on it.
      (let ((file-name-handler-alist nil))
        (lispm-test-write-file folder "notes.gpg" "plain words\n"))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "notes.gpg"))
                     '(:ok t :text "plain words\n")))
      ;; `format-alist' would decode this as text/enriched, markup gone.
      (let ((enriched "Content-Type: text/enriched\nText-Width: 70\n\n<bold>hi</bold>\n"))
        (lispm-test-write-file folder "mail.txt" enriched)
        (should (equal (lispm-tools-test--run "read_file" agent '(:path "mail.txt"))
                       (list :ok t :text enriched))))
      (let ((coding-system-for-write 'utf-8-unix))
        (lispm-test-write-file folder "café.txt" "café ☕\n"))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "café.txt"))
                     '(:ok t :text "café ☕\n")))
      ;; grep searches the compressed bytes, as they are.
      (lispm-tools-test--gzip folder "hay.gz" "needle\n")
      (should (equal (lispm-tools-test--run "grep" agent '(:pattern "needle"))
                     '(:ok t :text "No matches."))))))

(ert-deftest lispm-tools-test-grep-ignores-ripgrep-config ()
  "A user's ripgrep config cannot turn on decompression (`--search-zip')."
  (lispm-tools-test--in-folder
    (let* ((bin (make-temp-file "lispm-tools-bin" t))
           (rg (expand-file-name "rg" bin))
           (exec-path (cons bin exec-path)))
      (unwind-protect
          (progn
            (with-temp-file rg
              (insert "#!/bin/sh\nfor a in \"$@\"; do echo \"arg:$a\"; done\n"))
            (set-file-modes rg #o755)
            (let ((text (plist-get (lispm-tools-test--run "grep" agent '(:pattern "x"))
                                   :text)))
              (should (string-match-p "^arg:--no-config$" text))
              (should-not (string-match-p "zip\\|--pre" text))))
        (delete-directory bin t)))))

(ert-deftest lispm-tools-test-read-file-in-pieces ()
  "A read returns at most `lispm-tools-read-limit' characters, and says what is left."
  (lispm-tools-test--in-folder
    (let ((lispm-tools-read-limit 10)
          (text "0123456789abcdefghijKLMNO"))
      (lispm-test-write-file folder "long.txt" text)
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "long.txt"))
                     '(:ok t :text "0123456789\n[15 characters left out: characters 0 \
to 10 of 25 shown; call read_file with offset 10 to read on]")))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "long.txt" :offset 10))
                     '(:ok t :text "abcdefghij\n[15 characters left out: characters 10 \
to 20 of 25 shown; call read_file with offset 20 to read on]")))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "long.txt" :offset 20))
                     '(:ok t :text "KLMNO")))
      (should (equal (lispm-tools-test--run "read_file" agent
                                            '(:path "long.txt" :offset 2 :limit 3))
                     '(:ok t :text "234\n[22 characters left out: characters 2 \
to 5 of 25 shown; call read_file with offset 5 to read on]")))
      ;; A limit above the cap is the cap.
      (should (string-prefix-p "0123456789\n[15 characters left out"
                               (plist-get (lispm-tools-test--run
                                           "read_file" agent '(:path "long.txt" :limit 99))
                                          :text)))
      (should (string-match-p "past the end of long.txt (25 characters)"
                              (plist-get (lispm-tools-test--run
                                          "read_file" agent '(:path "long.txt" :offset 26))
                                         :error)))
      (should (string-match-p "must be 0 or more"
                              (plist-get (lispm-tools-test--run
                                          "read_file" agent '(:path "long.txt" :offset -1))
                                         :error)))
      ;; A file far bigger than the piece is not read whole.
      (lispm-test-write-file folder "huge.txt" (make-string 100000 ?x))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "huge.txt" :offset 5))
                     (list :ok t :text (concat (make-string 10 ?x) "\n[characters 5 to 15 \
shown; the file is longer (it was not read further); call read_file with offset 15 \
to read on]"))))
      ;; A visited file is read from its buffer, in pieces too.
      (with-current-buffer (find-file-noselect (expand-file-name "long.txt" folder))
        (goto-char (point-min))
        (insert "++"))
      (should (equal (lispm-tools-test--run "read_file" agent '(:path "long.txt" :offset 20))
                     '(:ok t :text "ijKLMNO"))))))

(ert-deftest lispm-tools-test-edits-of-missing-and-compressed-files ()
  "A missing file is named as missing; a compressed one no buffer visits is refused."
  (lispm-tools-test--in-folder
    (let ((auto-compression-mode nil))
      (auto-compression-mode 1)
      (let ((err (should-error (lispm-tool-target "edit_file" agent
                                                  '(:path "gone.txt" :old "a" :new "b"))
                               :type 'lispm-tool-no-such-file)))
        (should (equal (cadr err) "No such file: gone.txt (write_file creates files)")))
      (lispm-tools-test--gzip folder "data.gz" "alpha\n")
      (dolist (call '(("edit_file" (:path "data.gz" :old "alpha" :new "beta"))
                      ("write_file" (:path "data.gz" :content "beta\n"))
                      ("write_file" (:path "new.gz" :content "beta\n"))))
        (should-error (lispm-tool-target (car call) agent (cadr call))
                      :type 'lispm-tool-error)
        (let ((result (lispm-tools-test--run (car call) agent (cadr call))))
          (should (string-match-p "compressed or encrypted" (plist-get result :error)))))
      (should-not (file-exists-p (expand-file-name "new.gz" folder)))
      (should (equal (with-temp-buffer
                       (call-process "gzip" (expand-file-name "data.gz" folder) t nil "-dc")
                       (buffer-string))
                     "alpha\n")))))

(ert-deftest lispm-tools-test-edit-file-missing-through-the-sidecar-request ()
  "The sidecar's `emacs/call-tool' gets the tool's error, not an internal one."
  (require 'lispm-calls)
  (lispm-tools-test--in-folder
    (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
      (let ((answer (lispm-sidecar-dispatch-request
                     'emacs/call-tool
                     (list :name "codex" :instance 1 :call_id "C1" :tool "edit_file"
                           :args '(:path "gone.txt" :old "a" :new "b")))))
        (should (equal answer '(:ok nil :error "No such file: gone.txt \
(write_file creates files)")))))))

;;; Editing

(ert-deftest lispm-tools-test-edit-file-search-replace-one-undo-step ()
  (lispm-tools-test--in-folder
    (let* ((original "(defun f ()\n  1)\n\n(defun g ()\n  2)\n")
           (file (lispm-test-write-file folder "code.el" original))
           (buffer (find-file-noselect file)))
      ;; The user typed something, unsaved, in the same command.
      (with-current-buffer buffer
        (insert ";; user\n")
        (goto-char (point-max)))
      (let ((target (lispm-tool-target "edit_file" agent
                                       '(:path "code.el" :old "  2)" :new "  (+ 1\n     2))"))))
        (should (eq (plist-get target :kind) 'edit))
        (should (equal (plist-get target :files) (list file)))
        (should (string-match-p "^--- a/code.el\n\\+\\+\\+ b/code.el\n" (plist-get target :diff)))
        (should (string-match-p "^-  2)\n\\+  (\\+ 1\n\\+     2))\n" (plist-get target :diff))))
      ;; Computing the target changed nothing.
      (should (equal (lispm-test-read-file file) original))
      (let ((result (lispm-tools-test--run
                     "edit_file" agent '(:path "code.el" :old "  2)" :new "  (+ 1\n     2))"))))
        (should (eq (plist-get result :ok) t))
        (should (string-match-p "Wrote code.el" (plist-get result :text))))
      (let ((edited ";; user\n(defun f ()\n  1)\n\n(defun g ()\n  (+ 1\n     2))\n"))
        (should (equal (lispm-test-read-file file) edited))
        (with-current-buffer buffer
          (should (equal (buffer-string) edited))
          (should-not (buffer-modified-p))))
      ;; One undo takes back the agent's edit, not the user's typing.
      (lispm-tools-test--undo-once buffer)
      (setq original (concat ";; user\n" original))
      (with-current-buffer buffer
        (should (equal (buffer-string) original)))
      ;; Not found, ambiguous, both ways at once, nothing at all: errors.
      (with-current-buffer buffer (save-buffer))
      (pcase-dolist (`(,args ,regexp)
                     '(((:path "code.el" :old "  3)" :new "x") "`old' is not in code.el")
                       ((:path "code.el" :old "(defun" :new "x")
                        "`old' occurs 2 times in code.el; include more")
                       ((:path "code.el" :old "1" :new "2" :diff "@@ -1 +1 @@")
                        "either `old' and `new', or `diff', not both")
                       ((:path "code.el" :old "1") "needs `old' and `new'")
                       ((:path "code.el") "needs `old' and `new'")
                       ((:path "code.el" :old "" :new "x") "`old' is empty")
                       ((:path "missing.el" :old "a" :new "b") "No such file: missing.el")))
        (let ((result (lispm-tools-test--run "edit_file" agent args)))
          (should (eq (plist-get result :ok) nil))
          (should (string-match-p (regexp-quote regexp) (plist-get result :error))))
        (should-error (lispm-tool-target "edit_file" agent args)))
      (should (equal (lispm-test-read-file file) original))
      (should-not (file-exists-p (expand-file-name "missing.el" folder)))
      (with-current-buffer buffer
        (should (equal (buffer-string) original))))))

(ert-deftest lispm-tools-test-edit-file-with-a-diff ()
  (lispm-tools-test--in-folder
    (let* ((original (mapconcat (lambda (n) (format "line %d\n" n)) (number-sequence 1 30) ""))
           (wanted (replace-regexp-in-string
                    "line 25\n" "line 25\nadded\n"
                    (replace-regexp-in-string "line 3\n" "LINE THREE\n" original)))
           (file (lispm-test-write-file folder "f.txt" original))
           (diff (lispm-edit-diff original wanted "f.txt")))
      (should (string-match-p "^@@ .* @@\n.*\n.*\n-line 3\n\\+LINE THREE\n" diff))
      (should (equal (plist-get (lispm-tool-target "edit_file" agent
                                                   (list :path "f.txt" :diff diff))
                                :diff)
                     diff))
      (should (equal (lispm-tools-json-result
                      (lispm-tools-test--run "edit_file" agent (list :path "f.txt" :diff diff)))
                     (list :ok t :text (format "Wrote f.txt (%d characters)" (length wanted)))))
      (should (equal (lispm-test-read-file file) wanted))
      (lispm-tools-test--undo-once (find-buffer-visiting file))
      (with-current-buffer (find-buffer-visiting file)
        (should (equal (buffer-string) original)))
      ;; A hunk that moved still applies; one whose lines are not there does not.
      (should (equal (lispm-edit-apply-diff "x\na\nb\nc\n" "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
                     "x\na\nB\nc\n"))
      (should (equal (lispm-edit-apply-diff "a\nb" "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n")
                     "a\nc\n"))
      (let ((result (lispm-tools-test--run
                     "edit_file" agent
                     '(:path "f.txt" :diff "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 99\n+x\n"))))
        (should (eq (plist-get result :ok) nil))
        (should (string-match-p "f.txt: Hunk 1 of the diff does not apply" (plist-get result :error))))
      (should (string-match-p "no hunks"
                              (plist-get (lispm-tools-test--run "edit_file" agent
                                                                '(:path "f.txt" :diff "hello"))
                                         :error))))))

(ert-deftest lispm-tools-test-write-file ()
  (lispm-tools-test--in-folder
    (let ((result (lispm-tools-test--run "write_file" agent
                                         '(:path "deep/er/new.txt" :content "fresh\n"))))
      (should (equal (lispm-tools-json-result result)
                     '(:ok t :text "Created deep/er/new.txt (6 characters)")))
      (should (lispm-change-created (car (plist-get result :changes)))))
    (should (equal (lispm-test-read-file (expand-file-name "deep/er/new.txt" folder)) "fresh\n"))
    (let* ((file (lispm-test-write-file folder "old.txt" "old\n"))
           (buffer (find-file-noselect file)))
      (should (equal (plist-get (lispm-tool-target "write_file" agent
                                                   '(:path "old.txt" :content "new\n"))
                                :diff)
                     "--- a/old.txt\n+++ b/old.txt\n@@ -1 +1 @@\n-old\n+new\n"))
      (should (eq (plist-get (lispm-tools-test--run "write_file" agent
                                                    '(:path "old.txt" :content "new\n"))
                             :ok)
                  t))
      (should (equal (lispm-test-read-file file) "new\n"))
      (lispm-tools-test--undo-once buffer)
      (with-current-buffer buffer (should (equal (buffer-string) "old\n"))))
    (should (string-match-p "is a directory"
                            (plist-get (lispm-tools-test--run "write_file" agent
                                                              '(:path "deep" :content "x"))
                                       :error)))))

;;; The shell

(ert-deftest lispm-tools-test-run-shell-captures-output ()
  (lispm-tools-test--in-folder
    (should (equal (lispm-tool-target "run_shell" agent '(:command "ls"))
                   (list :kind 'shell :tool "run_shell" :files nil
                         :command "ls" :directory folder
                         :sandbox "in the sandbox: the folder writable (.git read-only), \
no network")))
    (let ((result (lispm-tools-test--run "run_shell" agent
                                         '(:command "pwd; echo out; echo err >&2"))))
      (should (equal result (list :ok t :text (format "%s\nout\nerr\n" (directory-file-name folder))
                                  :exit 0))))
    (let ((result (lispm-tools-test--run "run_shell" agent '(:command "echo bad; exit 3"))))
      (should (equal (plist-get result :exit) 3))
      (should (string-prefix-p "bad\n[exit status 3]\n[It ran in LispM's sandbox: only "
                               (plist-get result :text))))
    (let* ((lispm-sandbox-shell-mode 'off)
           (result (lispm-tools-test--run "run_shell" agent '(:command "echo bad; exit 3"))))
      (should (equal result '(:ok t :exit 3 :text "bad\n[exit status 3]"))))
    ;; Reading input gets end of file at once.
    (should (equal (plist-get (lispm-tools-test--run "run_shell" agent '(:command "cat")) :text)
                   "(no output)"))
    (let ((lispm-tools-shell-output-limit 100))
      (let ((text (plist-get (lispm-tools-test--run
                              "run_shell" agent '(:command "for i in $(seq 1 500); do echo $i; done"))
                             :text)))
        (should (equal text (concat (substring (mapconcat #'number-to-string
                                                          (number-sequence 1 500) "\n")
                                               0 100)
                                    "\n[output truncated]")))))))

(ert-deftest lispm-tools-test-run-shell-timeout-kills ()
  ;; Unconfined, the command's process group is killed.  (In the
  ;; sandbox, its own PID namespace: lispm-sandbox-test.el.)
  (lispm-tools-test--in-folder
    (let* ((lispm-tools-shell-timeout 1)
           (lispm-sandbox-shell-mode 'off)
           (start (float-time))
           (result (lispm-tools-test--run
                    "run_shell" agent '(:command "echo started; sleep 30 & echo $! > pid; wait")))
           (pid (string-to-number (lispm-test-read-file (expand-file-name "pid" folder)))))
      (should (< (- (float-time) start) 5))
      (should (eq (plist-get result :ok) nil))
      (should (string-match-p "longer than 1 seconds and was killed.*\nstarted"
                              (plist-get result :error)))
      ;; The command's children die with it.
      (should (> pid 0))
      (let ((deadline (+ (float-time) 3)))
        (while (and (process-attributes pid) (< (float-time) deadline))
          (sleep-for 0.05)))
      (should-not (process-attributes pid)))))

(ert-deftest lispm-tools-test-run-shell-never-blocks ()
  (lispm-tools-test--in-folder
    (let* ((ticks 0)
           (result nil)
           (timer (run-at-time 0.1 0.1 (lambda () (cl-incf ticks))))
           (start (float-time)))
      (unwind-protect
          (progn
            (lispm-tools-run "run_shell" agent '(:command "sleep 2; echo done")
                             (lambda (r) (setq result r)))
            ;; It returned at once, without the result.
            (should (< (- (float-time) start) 0.5))
            (should-not result)
            (while (and (not result) (< (float-time) (+ start 10)))
              (accept-process-output nil 0.05))
            (should (equal result '(:ok t :text "done\n" :exit 0)))
            ;; The timer kept firing meanwhile: about 20 times in 2 s.
            (should (>= ticks 12)))
        (cancel-timer timer)))))

;;; Lisp

(ert-deftest lispm-tools-test-eval-elisp ()
  (lispm-tools-test--in-folder
    (should (equal (lispm-tools-test--run "eval_elisp" agent '(:form "(+ 1 2)"))
                   '(:ok t :text "3")))
    (should (equal (lispm-tools-test--run "eval_elisp" agent
                                          '(:form "(let ((x 1)) (lambda () x))  ; closure"))
                   (list :ok t :text (prin1-to-string (let ((x 1)) (lambda () x))))))
    (should (equal (lispm-tools-test--run "eval_elisp" agent '(:form "(car 1)"))
                   '(:ok nil :error "Wrong type argument: listp, 1" :condition "wrong-type-argument")))
    ;; It cannot ask the user anything.
    (should (equal (plist-get (lispm-tools-test--run "eval_elisp" agent
                                                     '(:form "(read-string \"? \")"))
                              :condition)
                   "inhibited-interaction"))
    (let ((lispm-tools-test--ran nil))
      (dolist (form '("(setq lispm-tools-test--ran t) (+ 1" "(setq lispm-tools-test--ran t) 2"
                      "(setq lispm-tools-test--ran t" ""))
        (let ((result (lispm-tools-test--run "eval_elisp" agent (list :form form))))
          (should (equal (plist-get result :condition) "lispm-tool-bad-args")))
        (should-error (lispm-tool-target "eval_elisp" agent (list :form form))
                      :type 'lispm-tool-bad-args))
      (should-not lispm-tools-test--ran))
    (should (equal (lispm-tool-target "eval_elisp" agent
                                      '(:form "(progn (message \"a\") (message \"b\"))"))
                   (list :kind 'eval :tool "eval_elisp" :files nil
                         :form "(progn (message \"a\") (message \"b\"))"
                         :touches nil)))))

(ert-deftest lispm-tools-test-eval-elisp-touches ()
  "The approval of eval_elisp says what the form is known to touch."
  (should (equal (lispm-tools-eval-touches
                  '(progn (defun lispm-tools-test--f () 1)
                          (with-temp-file "x" (insert "a"))
                          (mapc #'delete-file '("y"))
                          (shell-command "id")
                          (funcall (intern "z"))))
                 '("defines: defun lispm-tools-test--f"
                   "files: delete-file, with-temp-file"
                   "processes: shell-command"
                   "buffers: insert"
                   "code chosen when it runs (LispM cannot tell what): funcall")))
  ;; A macro it does not know is named, not expanded: expanding it
  ;; would run its code before the approval.
  (let ((expanded nil))
    (defalias 'lispm-tools-test--macro (cons 'macro (lambda () (setq expanded t) nil)))
    (unwind-protect
        (should (equal (lispm-tools-eval-touches '(lispm-tools-test--macro))
                       '("macros it does not expand (LispM cannot tell what they do): \
lispm-tools-test--macro")))
      (fmakunbound 'lispm-tools-test--macro))
    (should-not expanded))
  (should-not (lispm-tools-eval-touches '(+ 1 2))))

;;; Searching

(ert-deftest lispm-tools-test-search ()
  (let ((hits (lispm-tools-search "edit a file")))
    (should (equal (plist-get (car hits) :name) "edit_file"))
    (should (equal (plist-get (car hits) :type) "tool"))
    (should (equal (plist-get (car hits) :kind) "edit"))
    ;; Results are ready for the sidecar's JSON.
    (should (json-serialize (vconcat hits) :false-object :json-false :null-object nil))
    (should (equal (plist-get (car hits) :description)
                   "Change a file: replace the text old, which must occur once, by new."))
    (should (member "write_file" (mapcar (lambda (h) (plist-get h :name)) hits))))
  (should (equal (plist-get (car (lispm-tools-search "shell command")) :name) "run_shell"))
  (should (equal (plist-get (car (lispm-tools-search "GREP")) :name) "grep"))
  (should (null (cl-remove-if-not (lambda (h) (equal (plist-get h :type) "tool"))
                                  (lispm-tools-search "zyxxyz"))))
  (lispm-tools-test--in-folder
    (let ((text (plist-get (lispm-tools-test--run "search_tools" agent '(:query "lisp evaluate"))
                           :text)))
      (should (string-prefix-p "eval_elisp (tool, eval): Evaluate one Emacs Lisp form" text)))))

(provide 'lispm-tools-test)
;;; lispm-tools-test.el ends here
