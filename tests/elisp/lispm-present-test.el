;;; lispm-present-test.el --- Tests of messages shown with live places  -*- lexical-binding: t; -*-

;;; Commentary:

;; Org links and agent names in a message become buttons that work.

;;; Code:

(require 'ert)
(require 'lispm-present)
(require 'lispm-test-fixtures)

(defun lispm-present-test--buttons (text)
  "Return (START TYPE TARGET) for each button in TEXT."
  (let (found (i 0))
    (while (< i (length text))
      (let ((next (or (next-single-property-change i 'category text) (length text))))
        (when-let* ((category (get-text-property i 'category text)))
          (push (list i (get category 'type)
                      (or (get-text-property i 'lispm-agent text)
                          (get-text-property i 'lispm-link-target text)))
                found))
        (setq i next)))
    (nreverse found)))

(ert-deftest lispm-present-test-links-and-agents-become-buttons ()
  (lispm-test-with-agent (_codex :folder "/tmp/")
    (let ((text "see [[file:/tmp/x.el::3]], ask codex (not codex-2 or xcodex) about [[buffer:*scratch*][it]]"))
      (should (equal (lispm-present-test--buttons (lispm-present-text text))
                     `((,(string-search "[[file" text) lispm-place "/tmp/x.el::3")
                       (,(string-search "codex" text) lispm-agent "codex")
                       (,(string-search "[[buffer" text) lispm-place "*scratch*")))))))

(ert-deftest lispm-present-test-following-a-file-link-visits-the-line ()
  (let ((file (make-temp-file "lispm-present" nil ".txt" "one\ntwo\nthree\n")))
    (unwind-protect
        (progn
          (lispm-present-open-link "file" (concat file "::3"))
          (should (equal (buffer-file-name) file))
          (should (looking-at "three")))
      (kill-buffer (get-file-buffer file))
      (delete-file file))))

(ert-deftest lispm-present-test-a-missing-buffer-is-a-user-error ()
  (should-error (lispm-present-open-link "buffer" "*no such buffer*") :type 'user-error))

(provide 'lispm-present-test)
;;; lispm-present-test.el ends here
