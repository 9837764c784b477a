;;; lispm-kinds-test.el --- Tests of the agent kinds, each defined by one form  -*- lexical-binding: t; -*-

;;; Commentary:

;; `lispm-define-agent-kind' gives every kind its group, options,
;; registration, methods and command; these tests check what each of
;; the five kinds gets, that the command is autoloaded, that a missing
;; CLI signals `lispm-cli-missing', and that `find-function' finds the
;; form that defines a kind.

;;; Code:

(require 'ert)
(require 'find-func)
(require 'loaddefs-gen)
(require 'lispm)

(defconst lispm-kinds-test--kinds
  '((claude "Claude Code" "claude" "@anthropic-ai/claude-code")
    (codex "Codex" "codex" "@openai/codex")
    (hermes "Hermes" "hermes" nil)
    (openclaw "OpenClaw" "openclaw" "openclaw")
    (holon "Holon" "holon" nil))
  "Each kind with its title, default program and npm package.")

(defun lispm-kinds-test--symbol (kind &optional suffix)
  "Return the symbol named for KIND: lispm-KIND, or lispm-KIND-SUFFIX given SUFFIX."
  (intern (if suffix (format "lispm-%s-%s" kind suffix) (format "lispm-%s" kind))))

(ert-deftest lispm-kinds-test-every-kind-has-its-group-options-methods-and-command ()
  (should (equal (sort (mapcar #'car lispm-agent-kinds) #'string<)
                 (sort (mapcar #'car lispm-kinds-test--kinds) #'string<)))
  (pcase-dolist (`(,kind ,title ,program ,npm) lispm-kinds-test--kinds)
    (let ((group (lispm-kinds-test--symbol kind))
          (program-option (lispm-kinds-test--symbol kind "program"))
          (arguments-option (lispm-kinds-test--symbol kind "arguments")))
      (should (equal (alist-get kind lispm-agent-kinds) title))
      ;; The group, under LispM's, holds both options.
      (should (assq group (get 'lispm 'custom-group)))
      (should (equal (get group 'custom-prefix) (format "lispm-%s-" kind)))
      (dolist (option (list program-option arguments-option))
        (should (custom-variable-p option))
        (should (assq option (get group 'custom-group)))
        (should (string-match-p "\\`[A-Z]" (documentation-property
                                            option 'variable-documentation))))
      (should (equal (eval (car (get program-option 'standard-value)) t) program))
      (should (eq (get program-option 'custom-type) 'string))
      (should (null (eval (car (get arguments-option 'standard-value)) t)))
      (should (equal (get arguments-option 'custom-type) '(repeat string)))
      ;; The methods read the option and name the npm package.
      (should (equal (lispm-agent-npm-package kind) npm))
      (let ((value (format "/opt/%s-test" kind)))
        (cl-progv (list program-option) (list value)
          (should (equal (lispm-agent-program kind) value))))
      ;; The command starts an agent of the kind, in the folder given.
      (should (commandp group))
      (should (string-match-p "\\`S\\|\\`Show" (documentation group)))
      (let (started)
        (cl-letf (((symbol-function 'lispm-agent-start-and-show)
                   (lambda (&rest args) (setq started args))))
          (funcall group "/tmp/")
          (should (equal started (list kind "/tmp/")))
          (let ((current-prefix-arg nil))
            (call-interactively group))
          (should (equal started (list kind nil))))))))

(ert-deftest lispm-kinds-test-the-macro-refuses-what-it-cannot-use ()
  (should-error (macroexpand '(lispm-define-agent-kind foo :program "foo")))
  (should-error (macroexpand '(lispm-define-agent-kind foo :title "Foo" :program "foo"
                                                       :colour "red")))
  (should-error (macroexpand '(lispm-define-agent-kind foo :title "Foo" :program "foo"
                                                       :doc (concat "Start" " Foo"))))
  (should (macroexpand '(lispm-define-agent-kind foo :title "Foo" :program "foo" :npm nil))))

(ert-deftest lispm-kinds-test-the-commands-are-autoloaded ()
  ;; The installed package's autoloads come from the cookies: each kind's
  ;; command must be there, interactive, without loading LispM first.
  (let* ((dir (make-temp-file "lispm-kinds-test" t))
         (output (expand-file-name "test-autoloads.el" dir))
         (inhibit-message t))
    (unwind-protect
        (progn
          (dolist (kind lispm-kinds-test--kinds)
            (copy-file (locate-library (format "lispm-%s.el" (car kind)) t)
                       (expand-file-name (format "lispm-%s.el" (car kind)) dir)))
          (loaddefs-generate dir output)
          (let ((forms (with-temp-buffer
                         (insert-file-contents output)
                         (let (forms)
                           (condition-case nil
                               (while t (push (read (current-buffer)) forms))
                             (end-of-file))
                           forms))))
            (dolist (kind lispm-kinds-test--kinds)
              (let ((command (lispm-kinds-test--symbol (car kind))))
                (should (cl-find-if
                         (lambda (form)
                           (pcase form
                             (`(autoload ',(pred (eq command)) ,file ,_doc t . ,_)
                              (equal file (symbol-name command)))))
                         forms))))))
      (delete-directory dir t))))

(ert-deftest lispm-kinds-test-find-function-finds-the-defining-form ()
  (dolist (symbol '(lispm-claude lispm-holon))
    (pcase-let ((`(,buffer . ,position) (find-function-noselect symbol)))
      (with-current-buffer buffer
        (goto-char position)
        (should (looking-at-p (format "(lispm-define-agent-kind %s\\_>"
                                      (substring (symbol-name symbol) 6)))))))
  (pcase-let ((`(,buffer . ,position) (find-variable-noselect 'lispm-codex-arguments)))
    (with-current-buffer buffer
      (goto-char position)
      (should (looking-at-p "(lispm-define-agent-kind codex\\_>")))))

(ert-deftest lispm-kinds-test-a-missing-cli-is-its-own-condition ()
  (let ((exec-path '("/nonexistent"))
        (lispm-hermes-program "hermes-not-installed"))
    (let ((err (should-error (lispm-agent-executable 'hermes) :type 'lispm-cli-missing)))
      ;; A mistake of the user's, and a file that is missing, as
      ;; `call-process' says of a program it cannot find.
      (dolist (condition '(lispm-error user-error file-missing))
        (should (memq condition (get (car err) 'error-conditions))))
      (should (equal (error-message-string err)
                     (cadr err)))
      (should (string-match-p
               "\\`Cannot find .hermes-not-installed. for Hermes: install it .* or set .lispm-hermes-program.\\'"
               (cadr err)))))
  (let ((lispm-hermes-program "sh"))
    (should (equal (lispm-agent-executable 'hermes) (executable-find "sh")))))

(provide 'lispm-kinds-test)
;;; lispm-kinds-test.el ends here
