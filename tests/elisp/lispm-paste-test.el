;;; lispm-paste-test.el --- Tests of pasting a message into a terminal  -*- lexical-binding: t; -*-

;;; Commentary:

;; A real terminal runs a small program that records every read from its
;; pty, raw, with the time; the tests check what LispM wrote, and when.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-test-fixtures)

(defconst lispm-paste-test--recorder
  "import os, sys, time, tty
tty.setraw(0)
out = open(sys.argv[1], 'a')
os.write(1, b'recorder ready ')
while True:
    data = os.read(0, 65536)
    if not data:
        break
    out.write('%.3f %s\\n' % (time.time(), data.hex()))
    out.flush()
"
  "A program that appends each read from its terminal, hex, to a file.
It says `recorder ready' on its terminal once it reads raw.")

(defun lispm-paste-test--wait-screen (buffer text)
  "Wait until the terminal BUFFER shows TEXT; fail after 5 s."
  (let ((deadline (+ (float-time) 5)))
    (while (not (with-current-buffer buffer
                  (save-excursion (goto-char (point-min)) (search-forward text nil t))))
      (when (> (float-time) deadline)
        (error "%S not on the screen after 5 s: %S" text
               (with-current-buffer buffer (buffer-string))))
      (accept-process-output nil 0.05))))

(defun lispm-paste-test--reads (file)
  "Return the reads the recorder wrote to FILE: a list of (TIME . STRING)."
  (when (file-exists-p file)
    (with-temp-buffer
      (insert-file-contents file)
      (mapcar (lambda (line)
                (pcase-let ((`(,time ,hex) (split-string line " ")))
                  (cons (string-to-number time)
                        (decode-coding-string
                         (apply #'unibyte-string
                                (cl-loop for i from 0 below (length hex) by 2
                                         collect (string-to-number (substring hex i (+ i 2)) 16)))
                         'utf-8-unix))))
              (split-string (buffer-string) "\n" t)))))

(defmacro lispm-paste-test--with-agent (spec &rest body)
  "Run BODY with (AGENT FILE) bound to a recorded terminal's agent and its file.
SPEC is (AGENT FILE BACKEND)."
  (declare (indent 1) (debug t))
  (pcase-let ((`(,agent ,file ,backend) spec))
    `(let* ((,file (make-temp-file "lispm-paste-reads"))
            (buffer (lispm-term-start "*lispm paste test*"
                                      (list "python3" "-c" lispm-paste-test--recorder ,file)
                                      :directory temporary-file-directory :backend ,backend)))
       (unwind-protect
           (lispm-test-with-agent (,agent :folder "/tmp/" :buffer buffer)
             (lispm-paste-test--wait-screen buffer "recorder ready")
             ,@body)
         (kill-buffer buffer)
         (delete-file ,file)))))

(defun lispm-paste-test--wait-reads (file count)
  "Wait until FILE holds COUNT reads or more; return them."
  (let ((deadline (+ (float-time) 5)) reads)
    (while (and (< (length (setq reads (lispm-paste-test--reads file))) count)
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    reads))

(defun lispm-paste-test--bracketed-then-return (backend)
  "Check that a paste is bracketed, and Return follows alone and later, in BACKEND."
  (lispm-paste-test--with-agent (agent file backend)
    (lispm-paste-submit agent "héllo\n\tworld ✓")
    (let* ((reads (lispm-paste-test--wait-reads file 2))
           (text (mapconcat #'cdr reads "")))
      (should (equal text "\e[200~héllo\n\tworld ✓\e[201~\r"))
      ;; Return is its own write, at least a quarter second after the paste.
      (should (equal (cdr (car (last reads))) "\r"))
      (should (>= (- (car (car (last reads))) (car (car reads))) 0.25)))))

(ert-deftest lispm-paste-test-bracketed-then-return-term ()
  (lispm-paste-test--bracketed-then-return 'term))

(ert-deftest lispm-paste-test-bracketed-then-return-vterm ()
  (lispm-paste-test--bracketed-then-return 'vterm))

(ert-deftest lispm-paste-test-refuses-control-characters ()
  (lispm-paste-test--with-agent (agent file 'term)
    (dolist (text (list "a\rb" "a\eb" "a\e[201~b" (string ?a #x03) (string ?a #x9b ?b)
                        (string ?a #x7f)))
      (should-error (lispm-paste-submit agent text) :type 'lispm-paste-refused))
    ;; Then a clean paste: if anything refused had been written (or a Return
    ;; for it were to follow), the recorder would have read it first.
    (lispm-paste-submit agent "ok")
    (should (equal (mapconcat #'cdr (lispm-paste-test--wait-reads file 2) "")
                   "\e[200~ok\e[201~\r"))))

(defconst lispm-paste-test--cases
  (with-temp-buffer
    (insert-file-contents
     (expand-file-name "../sanitize-cases.json"
                       (file-name-directory (or load-file-name buffer-file-name))))
    (json-parse-buffer :object-type 'plist))
  "The sanitiser's cases, shared with tests/python/test_sanitize.py.")

(ert-deftest lispm-paste-test-refuses-what-the-sidecar-would-clean ()
  "Emacs's last check takes exactly the texts the sidecar's cleaner leaves."
  (should (> (length lispm-paste-test--cases) 20))
  (seq-doseq (case lispm-paste-test--cases)
    (let ((text (plist-get case :text))
          (clean (plist-get case :clean)))
      (should (equal (list (plist-get case :what) (lispm-paste--clean-p text))
                     (list (plist-get case :what) (equal text clean))))
      (should (lispm-paste--clean-p clean)))))

(ert-deftest lispm-paste-test-request-from-the-sidecar ()
  (lispm-paste-test--with-agent (agent file 'term)
    (should (equal (lispm-sidecar-dispatch-request
                    'emacs/paste '(:name "codex" :instance 1 :text "from the sidecar"))
                   '(:pasted t)))
    (should (string-search "from the sidecar"
                           (mapconcat #'cdr (lispm-paste-test--wait-reads file 1) "")))
    ;; Another instance of the same name, an unknown agent, unclean text: errors.
    (let ((err (should-error (lispm-sidecar-dispatch-request
                              'emacs/paste '(:name "codex" :instance 2 :text "x"))
                             :type 'jsonrpc-error)))
      (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32001)))
    (should-error (lispm-sidecar-dispatch-request 'emacs/paste '(:name "nobody" :text "x"))
                  :type 'jsonrpc-error)
    (should-error (lispm-sidecar-dispatch-request
                   'emacs/paste '(:name "codex" :instance 1 :text "\e[201~"))
                  :type 'jsonrpc-error)
    (ignore agent)))

(ert-deftest lispm-paste-test-not-now-while-a-dialog-is-open ()
  "A CLI showing a dialog that Return would answer gets nothing, until it closes."
  (let* ((file (make-temp-file "lispm-paste-reads"))
         ;; Hermes's `/new' confirmation, cleared after a second, then the recorder.
         (program (concat "import sys, time\n"
                          "print(' [1] Approve Once  proceed this time only')\n"
                          "print(' Type 1/2/3 or use arrows then Enter.', flush=True)\n"
                          "time.sleep(1.5)\n"
                          "print('\\x1b[2J\\x1b[H> ', end='', flush=True)\n"
                          lispm-paste-test--recorder))
         (buffer (lispm-term-start "*lispm paste test*" (list "python3" "-c" program file)
                                   :directory temporary-file-directory :backend 'term)))
    (unwind-protect
        (lispm-test-with-agent (_hermes :kind 'hermes :folder "/tmp/" :buffer buffer)
          (lispm-paste-test--wait-screen buffer "Type 1/2/3")
          (let ((err (should-error (lispm-sidecar-dispatch-request
                                    'emacs/paste '(:name "hermes" :instance 1 :text "hi"))
                                   :type 'jsonrpc-error)))
            (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32007))
            (should (string-search "confirmation dialog"
                                   (alist-get 'jsonrpc-error-message (cdr err)))))
          ;; Asking whether a paste could go in gets the same answer, and
          ;; pastes nothing.
          (let ((err (should-error (lispm-sidecar-dispatch-request
                                    'emacs/paste-ready '(:name "hermes" :instance 1))
                                   :type 'jsonrpc-error)))
            (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32007)))
          ;; The program clears its dialog after 1.5 s, then records.
          (lispm-paste-test--wait-screen buffer "recorder ready")
          (should-not (lispm-paste-test--reads file))
          (should (equal (lispm-sidecar-dispatch-request
                          'emacs/paste-ready '(:name "hermes" :instance 1))
                         '(:ready t)))
          (should-not (lispm-paste-test--reads file))
          ;; The dialog is gone: the paste goes in.
          (should (equal (lispm-sidecar-dispatch-request
                          'emacs/paste '(:name "hermes" :instance 1 :text "hi"))
                         '(:pasted t)))
          (should (string-search "hi" (mapconcat #'cdr (lispm-paste-test--wait-reads file 1)
                                                 ""))))
      (kill-buffer buffer)
      (delete-file file))))

(provide 'lispm-paste-test)
;;; lispm-paste-test.el ends here
