;;; lispm-model-unsent-test.el --- A model stream the sidecar could not be asked for leaves nothing  -*- lexical-binding: t; -*-

;;; Commentary:

;; When the sidecar cannot be started, `lispm-model-stream' signals
;; (the turn stops at `lispm-model-unavailable').  No stream may stay
;; registered then: its idle timer would fail it 120 s later, and its
;; handler would stop a turn that had stopped already ("A turn cannot
;; go from stopped to stopped", in a timer) or had gone on since.  Nor
;; may the key file written for it stay on disk.

;;; Code:

(require 'ert)
(require 'lispm-model)

(ert-deftest lispm-model-unsent-test-a-stream-not-sent-leaves-no-stream-timer-or-key ()
  (let* ((folder (file-name-as-directory (make-temp-file "lispm-model-unsent-test" t)))
         ;; LispM's Python sources are not found there: the sidecar cannot start.
         (lispm-directory (expand-file-name "nowhere/elisp/" folder))
         (temporary-file-directory folder)
         (process-environment (cons "LISPM_MODEL_UNSENT_TEST_KEY=sk-test-secret"
                                    process-environment))
         (lispm-models '(("m" :api anthropic :base-url "http://127.0.0.1:9" :model "m"
                          :key (:env "LISPM_MODEL_UNSENT_TEST_KEY"))))
         (events nil))
    (unwind-protect
        (progn
          (should-not (lispm-sidecar-live-p))
          (should-error (lispm-model-stream "m" '(:messages nil)
                                            (lambda (event) (push event events))))
          (should (zerop (hash-table-count lispm-model--streams)))
          (should-not (cl-find #'lispm-model--time-out timer-list :key #'timer--function))
          ;; The key file written for the request is gone.
          (should (null (directory-files folder nil "\\`lispm-key-")))
          (should-not events))
      (delete-directory folder t))))

;;; lispm-model-unsent-test.el ends here
