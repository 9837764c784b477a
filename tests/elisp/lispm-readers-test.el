;;; lispm-readers-test.el --- Files no buffer visits are read literally  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every reader of a file that no buffer visits goes through
;; `lispm-insert-file-text': no file name handler runs, so a small
;; ".gz" is not decompressed (a bomb would be gigabytes) and a ".gpg"
;; asks for no passphrase.  The tools' readers are tested in
;; lispm-tools-test.el; this file tests the IDE's diffs.

;;; Code:

(require 'ert)
(require 'lispm-ide)

(defun lispm-readers-test--gzip (file text)
  "Write TEXT gzipped to FILE."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert text)
    (call-process-region (point-min) (point-max) "gzip" t t nil "-c")
    (let ((coding-system-for-write 'no-conversion)
          (file-name-handler-alist nil))
      (write-region nil nil file nil 'silent))))

(ert-deftest lispm-readers-test-insert-file-text-is-literal ()
  (let ((dir (make-temp-file "lispm-readers" t))
        (auto-compression-mode nil))
    (auto-compression-mode 1)
    (unwind-protect
        (let ((gz (expand-file-name "words.txt.gz" dir))
              (gpg (expand-file-name "words.gpg" dir))
              (utf8 (expand-file-name "words.txt" dir)))
          (lispm-readers-test--gzip gz "secret words\n")
          (let ((file-name-handler-alist nil))
            (with-temp-file gpg (insert "plain words\n")))
          (let ((coding-system-for-write 'utf-8-unix))
            (with-temp-file utf8 (insert "café ☕\n")))
          (with-temp-buffer
            (lispm-insert-file-text gz)
            (should (string-prefix-p "\37" (buffer-string)))
            (should-not (string-search "secret" (buffer-string))))
          (with-temp-buffer
            (lispm-insert-file-text gpg)
            (should (equal (buffer-string) "plain words\n")))
          (with-temp-buffer
            (lispm-insert-file-text utf8)
            (should (equal (buffer-string) "café ☕\n"))
            (should (eq (coding-system-base last-coding-system-used) 'utf-8)))
          (with-temp-buffer
            (lispm-insert-file-text utf8 0 5)
            (should (equal (buffer-string) "café"))))
      (delete-directory dir t))))

(ert-deftest lispm-readers-test-ide-diff-reads-the-file-literally ()
  "A diff proposed for a compressed file shows its bytes, not their expansion."
  (let* ((dir (file-name-as-directory (file-truename (make-temp-file "lispm-readers" t))))
         (file (expand-file-name "words.txt.gz" dir))
         (lispm-ide--diffs nil)
         (lispm-ide--layouts nil)
         (auto-compression-mode nil))
    (auto-compression-mode 1)
    (lispm-readers-test--gzip file "secret words\n")
    (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
      (unwind-protect
          (progn
            (should (equal (lispm-sidecar-dispatch-request
                            'emacs/open-diff (list :id "d1" :agent "claude" :file file
                                                   :new_contents "new words\n"))
                           '(:shown t)))
            (let ((diff (car lispm-ide--diffs)))
              (with-current-buffer (lispm-ide-diff-diff-buffer diff)
                (should (string-match-p "^\\+new words$" (buffer-string)))
                (should-not (string-search "secret" (buffer-string))))))
        (lispm-ide-close-diffs #'always)
        (delete-other-windows)
        (delete-directory dir t)))))

(provide 'lispm-readers-test)
;;; lispm-readers-test.el ends here
