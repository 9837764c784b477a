;;; lispm-options-test.el --- Tests that LispM's options sit in the groups of their concerns  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every option and face of LispM belongs to a group of its own concern
;; under the root group `lispm'; the root holds only what concerns LispM
;; as a whole.  Tunables a user may need are options, the others constants.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-apps)
(require 'lispm-app-blocks)
(require 'lispm-run-lisp)
(require 'lispm-helpers)
(require 'lispm-session)

(defconst lispm-options-test--in-root
  '(lispm-agents-file lispm-views-mode lispm-trust-file)
  "The options that concern LispM as a whole, in its root group.")

(defun lispm-options-test--groups ()
  "Return the customization groups under `lispm', itself included."
  (let ((groups (list 'lispm)) (queue (list 'lispm)))
    (while queue
      (pcase-dolist (`(,member ,widget) (get (pop queue) 'custom-group))
        (when (and (eq widget 'custom-group) (not (memq member groups)))
          (push member groups)
          (push member queue))))
    groups))

(ert-deftest lispm-options-test-every-option-is-in-the-group-of-its-concern ()
  (let ((groups (lispm-options-test--groups))
        (options nil))
    (mapatoms (lambda (symbol)
                ;; A mode's hook is the mode's, not an option of its own.
                (when (and (string-prefix-p "lispm-" (symbol-name symbol))
                           (not (string-suffix-p "-mode-hook" (symbol-name symbol)))
                           (or (custom-variable-p symbol) (get symbol (quote face-defface-spec))))
                  (push symbol options))))
    (should (> (length options) 40))
    (dolist (option options)
      (let ((homes (cl-loop for group in groups
                            when (assq option (get group 'custom-group)) collect group)))
        (should (equal (list option (length homes)) (list option 1)))
        (should (equal (list option (eq (car homes) 'lispm))
                       (list option (and (memq option lispm-options-test--in-root) t))))))
    ;; Some homes by name: the tools' limits, the ledger the sidecar keeps.
    (dolist (pair '((lispm-tools-shell-timeout . lispm-tools)
                    (lispm-tools-read-limit . lispm-tools)
                    (lispm-ledger-file . lispm-sidecar)
                    (lispm-sidecar-debug-log-size . lispm-sidecar)
                    (lispm-paste-return-delay . lispm-terminal)
                    (lispm-trust-file . lispm)
                    (lispm-blocks-animate . lispm-blocks)
                    (lispm-lisp-default-fuel . lispm-lisp)
                    (lispm-run-lisp-output-limit . lispm-run-lisp)
                    (lispm-sessions-git-program . lispm-session)))
      (should (assq (car pair) (get (cdr pair) 'custom-group))))))

(ert-deftest lispm-options-test-tunables-are-options-or-constants ()
  (dolist (option '(lispm-paste-return-delay lispm-sidecar-debug-log-size))
    (should (custom-variable-p option))
    (should (widget-apply (widget-convert (get option 'custom-type)) :match
                          (symbol-value option))))
  (dolist (constant '(lispm-views-push-delay lispm-edit-replace-max-seconds
                      lispm-helpers-unasked-seconds))
    (should (special-variable-p constant))
    (should-not (custom-variable-p constant))
    (should (get constant 'risky-local-variable))))

(provide 'lispm-options-test)
;;; lispm-options-test.el ends here
