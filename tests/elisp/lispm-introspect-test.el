;;; lispm-introspect-test.el --- Tests of the tools that read Emacs itself  -*- lexical-binding: t; -*-

;;; Commentary:

;; Each introspection tool through the one pipeline, `lispm-calls-invoke',
;; as LispM's own agent calls it: what it answers, that it is capped,
;; that it leaves no buffer behind, and that a secret's value is refused
;; before anyone is asked.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defvar Info-directory-list)

(defvar lispm-introspect-test--api-token "hunter2"
  "A secret the tests must never see printed.")

(defvar lispm-introspect-test--plain '(1 2 3 4 5 6 7 8 9 10)
  "A value the tests may read.")

(defmacro lispm-introspect-test--with-actor (actor &rest body)
  "Run BODY with ACTOR bound to a live actor without a terminal.
Sidecar notifications are collected in `notified', newest first."
  (declare (indent 1) (debug t))
  `(let ((notified nil)
         (lispm-policy-roles (eval (car (get 'lispm-policy-roles 'standard-value)) t)))
     (cl-letf (((symbol-function 'lispm-sidecar-notify)
                (lambda (method params) (push (cons method params) notified))))
       (lispm-test-with-agent (terminal)
         (let ((,actor (lispm-test-add-actor :folder (lispm-actor-folder terminal))))
           ,@body)))))

(defun lispm-introspect-test--call (actor tool args)
  "Call TOOL with ARGS as ACTOR through the pipeline; return its one outcome."
  (let ((outcomes nil))
    (lispm-calls-invoke actor tool args (lambda (outcome) (push outcome outcomes)))
    (should (= (length outcomes) 1))
    (car outcomes)))

(defun lispm-introspect-test--text (actor tool args)
  "Return the text of calling TOOL with ARGS as ACTOR, which must succeed."
  (let ((outcome (lispm-introspect-test--call actor tool args)))
    (should (eq (plist-get outcome :ok) t))
    (plist-get outcome :text)))

(ert-deftest lispm-introspect-test-the-tools-are-registered-by-kind ()
  (should (equal (mapcar (lambda (name) (lispm-tool-kind (lispm-tool-get name)))
                         '("apropos" "describe_function" "describe_variable"
                           "function_source" "info_node" "variable_value"))
                 '(introspect introspect introspect introspect introspect read)))
  (should (eq (lispm-policy-decide (lispm-test-actor--make :name "x" :folder "/tmp/")
                                   nil 'introspect nil)
              'allow)))

(ert-deftest lispm-introspect-test-apropos ()
  (lispm-introspect-test--with-actor own
    (let ((text (lispm-introspect-test--text own "apropos" '(:pattern "\\`lispm-introspect-test--"))))
      (should (string-search "lispm-introspect-test--plain (variable): A value the tests may read."
                             text))
      (should (string-search "lispm-introspect-test--call (function): Call TOOL" text)))
    ;; Capped, saying how many more there are.
    (let* ((lispm-introspect-apropos-limit 3)
           (text (lispm-introspect-test--text own "apropos" '(:pattern "\\`buffer-"))))
      (should (= (length (split-string text "\n")) 4))
      (should (string-match-p "\\[[0-9]+ more match; narrow the pattern\\]\\'" text)))
    ;; Not a regexp: taken literally.
    (should (string-search "No function or variable matches"
                           (lispm-introspect-test--text own "apropos" '(:pattern "[no-such-thing"))))
    ;; Allowed at once, and not audited (introspection is no kind audited).
    (should-not (assq 'lispm/audit notified))
    (should-not (lispm-approvals-pending))))

(ert-deftest lispm-introspect-test-describe-function-and-variable ()
  (lispm-introspect-test--with-actor own
    (let ((text (lispm-introspect-test--text own "describe_function"
                                             '(:name "lispm-introspect-test--call"))))
      (should (string-prefix-p "(lispm-introspect-test--call ACTOR TOOL ARGS)\nA function" text))
      (should (string-search "Call TOOL with ARGS as ACTOR through the pipeline" text)))
    (should (string-search "defined in C"
                           (lispm-introspect-test--text own "describe_function" '(:name "car"))))
    (should (string-search "A macro"
                           (lispm-introspect-test--text own "describe_function" '(:name "when"))))
    (let ((text (lispm-introspect-test--text own "describe_variable" '(:name "fill-column"))))
      (should (string-search "A user option, buffer-local when set." text))
      (should (string-search "Column beyond which automatic line-wrapping should happen" text)))
    ;; The documentation only: never the value, not even of a secret.
    (let ((text (lispm-introspect-test--text own "describe_variable"
                                             '(:name "lispm-introspect-test--api-token"))))
      (should (string-search "A secret the tests must never see printed." text))
      (should-not (string-search "hunter2" text)))
    (let ((outcome (lispm-introspect-test--call own "describe_function"
                                                '(:name "lispm-no-such-function"))))
      (should (eq (car (plist-get outcome :condition)) 'lispm-tool-error))
      (should (string-search "No function named lispm-no-such-function" (plist-get outcome :error))))))

(ert-deftest lispm-introspect-test-function-source-leaves-no-buffer ()
  (lispm-introspect-test--with-actor own
    (let* ((file (locate-library "lispm-calls.el" t))
           (visited (find-buffer-visiting file)))
      (when visited (kill-buffer visited))
      (let ((buffers (buffer-list))
            (text (lispm-introspect-test--text own "function_source"
                                               '(:name "lispm-calls-invoke"))))
        (should (string-prefix-p (format ";; %s\n(cl-defun lispm-calls-invoke (actor tool-name"
                                         (abbreviate-file-name file))
                                 text))
        (should (string-suffix-p "nil))" text))
        (should-not (find-buffer-visiting file))
        (should (equal (buffer-list) buffers))))
    (should (string-search "C source"
                           (lispm-introspect-test--text own "function_source" '(:name "car"))))
    ;; Capped at the source.
    (let* ((lispm-introspect-text-limit 100)
           (text (lispm-introspect-test--text own "function_source"
                                              '(:name "lispm-calls-invoke"))))
      (should (string-match-p "\n\\[[0-9]+ characters cut: 100 shown\\]\\'" text)))))

(defconst lispm-introspect-test--info
  "This is lispmtest.info, a manual for the tests.

\037
File: lispmtest.info,  Node: Top,  Next: Change Groups,  Up: (dir)

The test manual
***************

* Menu:

* Change Groups::    Undoing many changes as one.

\037
File: lispmtest.info,  Node: Change Groups,  Prev: Top,  Up: Top

1 Change Groups
***************

A change group makes many changes one unit of undo.

\037
Tag Table:
\177
End Tag Table
"
  "A tiny Info manual, so that the test needs none installed.")

(ert-deftest lispm-introspect-test-info-node ()
  (require 'info)
  (lispm-introspect-test--with-actor own
    (let* ((directory (make-temp-file "lispm-introspect-info-" t))
           (file (expand-file-name "lispmtest.info" directory))
           (Info-directory-list (list directory))
           (buffers (buffer-list)))
      (unwind-protect
          (progn
            (with-temp-file file (insert lispm-introspect-test--info))
            (let ((text (lispm-introspect-test--text
                         own "info_node" '(:node "(lispmtest) Change Groups"))))
              (should (string-search "A change group makes many changes one unit of undo." text))
              (should-not (string-search "The test manual" text)))
            (should (string-search "The test manual"
                                   (lispm-introspect-test--text
                                    own "info_node" '(:node "(lispmtest)"))))
            (let ((outcome (lispm-introspect-test--call
                            own "info_node" '(:node "(lispmtest) No Such Node"))))
              (should-not (plist-get outcome :ok))
              (should (string-search "No Info node" (plist-get outcome :error))))
            (should (eq (car (plist-get (lispm-introspect-test--call own "info_node"
                                                                     '(:node "Change Groups"))
                                        :condition))
                        'lispm-tool-bad-args))
            ;; A manual by name only: a file's name is refused, before
            ;; anything is read (its node "*" would be the whole file).
            (dolist (node (list (format "(%s) Change Groups" file) (format "(%s) *" file)
                                "(~/.authinfo) *" "(../lispmtest) Top" "(./lispmtest) *"))
              (let ((err (plist-get (lispm-introspect-test--call own "info_node"
                                                                 (list :node node))
                                    :condition)))
                (should (eq (car err) 'lispm-policy-denied))
                (should (equal (cddr err) (list 'introspect 'policy (nth 4 err))))
                (should (string-search "reads only the manuals installed" (nth 4 err)))))
            (should (equal (buffer-list) buffers)))
        (delete-directory directory t)))))

(ert-deftest lispm-introspect-test-variable-value ()
  (lispm-introspect-test--with-actor own
    (should (equal (lispm-introspect-test--text own "variable_value"
                                                '(:name "lispm-introspect-test--plain"))
                   "(1 2 3 4 5 6 7 8 9 10)"))
    (let ((lispm-introspect-test--plain (number-sequence 1 100)))
      (should (string-suffix-p "49 50 ...)"
                               (lispm-introspect-test--text
                                own "variable_value" '(:name "lispm-introspect-test--plain")))))
    ;; A read the policy decides: the role's rule for `read' holds.
    (let* ((lispm-policy-roles '((default (read deny) (introspect allow))))
           (outcome (lispm-introspect-test--call own "variable_value" '(:name "fill-column"))))
      (should (equal (cddr (plist-get outcome :condition)) '(read policy nil))))))

(ert-deftest lispm-introspect-test-secret-values-are-refused ()
  (lispm-introspect-test--with-actor own
    ;; Even where the role would ask about every read: refused before
    ;; anyone is asked.
    (let ((lispm-policy-roles '((default (read ask) (introspect allow)))))
      (dolist (name '("lispm-introspect-test--api-token" "auth-sources" "PASSWORD-cache"
                      "my-Secret" "url-basic-auth-storage" "netrc-credentials"
                      "gnus-passwd" "some-api-key"))
        (let* ((outcome (lispm-introspect-test--call own "variable_value" (list :name name)))
               (err (plist-get outcome :condition)))
          (should-not (plist-get outcome :ok))
          (should (eq (car err) 'lispm-policy-denied))
          (should (equal (nth 2 err) 'read))
          (should (equal (nth 3 err) 'policy))
          (should (string-search (format "the name %s looks like a secret's" name) (nth 4 err)))
          (should (string-prefix-p "variable_value refused: " (plist-get outcome :error)))
          (should-not (string-search "hunter2" (plist-get outcome :error)))))
      (should-not (lispm-approvals-pending))
      ;; Refused, and audited as every refusal is: one entry a name.
      (let ((audits (cl-remove 'lispm/audit notified :key #'car :test-not #'eq)))
        (should (= (length audits) 8))
        (dolist (audit audits)
          (should (equal (plist-get (cdr audit) :decision) "deny"))
          (should (string-prefix-p "variable_value refused: "
                                   (plist-get (cdr audit) :reason)))
          (should-not (string-search "hunter2" (plist-get (cdr audit) :reason))))))))

(provide 'lispm-introspect-test)
;;; lispm-introspect-test.el ends here
