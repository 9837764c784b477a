;;; lispm-term-test.el --- Tests for lispm-term.el  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Run from the top directory with:
;;   `emacs --batch -Q -L elisp -l ert -l tests/elisp/lispm-term-test.el
;;    -f ert-run-tests-batch-and-exit'
;;
;; Every test starts real programs (sh, python3) in hidden terminals
;; and waits on their output with `accept-process-output' and a
;; deadline.  The vterm tests need vterm; in "emacs -Q" it is found
;; through `lispm-term-vterm-search-directories' (Debian's elpa-vterm).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'lispm-term)
(require 'term)

(defconst lispm-term-test--python
  (or (executable-find "python3") (error "The tests need python3"))
  "The Python used for child programs.")

(defconst lispm-term-test--timeout 15
  "Seconds to wait for a child program.")

;;; Helpers

(defun lispm-term-test--wait (predicate &optional what timeout)
  "Wait for PREDICATE to return non-nil, and return that value.
Fail the test with WHAT in the message after TIMEOUT seconds."
  (let ((deadline (+ (float-time) (or timeout lispm-term-test--timeout)))
        value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or value
        (ert-fail (list "Timed out waiting" (or what predicate))))))

(defun lispm-term-test--wait-text (buffer regexp)
  "Wait until the text of terminal BUFFER matches REGEXP; return the text."
  (let (text)
    (lispm-term-test--wait
     (lambda ()
       (setq text (lispm-term-text buffer))
       (string-match-p regexp text))
     (format "%S in the terminal; it shows:\n%s" regexp
             (and (buffer-live-p buffer) (lispm-term-text buffer))))
    text))

(defun lispm-term-test--wait-file (file)
  "Wait until FILE exists and return its bytes as a unibyte string."
  ;; The writers rename the file into place once it is complete.
  (lispm-term-test--wait (lambda () (file-exists-p file)) file)
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defun lispm-term-test--read-json (file)
  "Wait for FILE and return its JSON content, with UTF-8 decoded."
  (json-parse-string (decode-coding-string
                      (lispm-term-test--wait-file file) 'utf-8)
                     :object-type 'alist :array-type 'list))

(defmacro lispm-term-test--with-dir (var &rest body)
  "Bind VAR to a new temporary directory (a truename) around BODY."
  (declare (indent 1) (debug (symbolp body)))
  `(let ((,var (file-name-as-directory
                (file-truename (make-temp-file "lispm-term-test" t)))))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

(defmacro lispm-term-test--with-terminal (spec &rest body)
  "Start a terminal per SPEC, run BODY, then kill the terminal.
SPEC is (VAR NAME COMMAND . KEYS), KEYS as for `lispm-term-start'."
  (declare (indent 1) (debug ((symbolp form form &rest form) body)))
  (let ((var (car spec)))
    `(let ((,var (lispm-term-start ,@(cdr spec))))
       (unwind-protect (progn ,@body)
         (when (buffer-live-p ,var)
           (kill-buffer ,var))))))

(defun lispm-term-test--python-command (code &rest args)
  "Return a command running Python CODE with ARGS."
  (append (list lispm-term-test--python "-c" code) args))

(defmacro lispm-term-test--deftest (name backends doc &rest body)
  "Define one ERT test per backend in BACKENDS, named after NAME.
The test for BACKEND is called NAME-BACKEND.  DOC is the docstring;
BODY runs with `backend' bound."
  (declare (indent 2) (doc-string 3))
  `(progn
     ,@(mapcar
        (lambda (backend)
          `(ert-deftest ,(intern (format "%s-%s" name backend)) ()
             ,(format "%s\nBackend: %s." doc backend)
             (let ((backend ',backend))
               (ignore backend)
               ,@body)))
        backends)))

;;; Child programs

(defconst lispm-term-test--dump-script
  "import json, os, sys
with open(sys.argv[1] + '.tmp', 'w', encoding='utf-8') as f:
    json.dump({'argv': sys.argv[2:], 'cwd': os.getcwd(),
               'env': dict(os.environ)}, f, ensure_ascii=False)
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
print('dumped', flush=True)
import time; time.sleep(60)"
  "Python code that writes its argv, cwd and environment to argv[1].")

(defconst lispm-term-test--raw-reader-script
  "import os, sys, tty
tty.setraw(0)
def read_until(marker, path):
    data = b''
    while not data.endswith(marker):
        data += os.read(0, 65536)
    with open(path + '.tmp', 'wb') as f:
        f.write(data)
    os.rename(path + '.tmp', path)
print('READY', flush=True)
read_until(b'\\x1b[201~', sys.argv[1])
print('\\r\\nPASTED', flush=True)
read_until(b'@@', sys.argv[2])
print('\\r\\nSENT', flush=True)
import time; time.sleep(60)"
  "Python code that reads raw bytes from the pty and writes them to files.
It writes a paste (up to its closing bracket) to argv[1] and then
what it reads up to \"@@\" to argv[2].")

;;; Backends

(ert-deftest lispm-term-test-backends-available ()
  "Both tested backends are available here; vterm is found without setup."
  (should (lispm-term-backend-available-p 'term))
  (should (lispm-term-backend-available-p 'vterm))
  (should (featurep 'vterm))
  (should-not (lispm-term-backend-available-p 'no-such-backend)))

(ert-deftest lispm-term-test-vterm-discovery ()
  "Debian's vterm directory is found, and the search can be turned off."
  (let ((lispm-term-vterm-search-directories
         '("/usr/share/emacs/site-lisp/elpa")))
    (should (string-match-p "/vterm-[0-9.]+\\'"
                            (lispm-term--vterm-package-directory)))
    (should (file-exists-p (expand-file-name
                            "vterm.el" (lispm-term--vterm-package-directory)))))
  (lispm-term-test--with-dir dir
    (dolist (version '("0.0.2" "0.0.10" "0.0.9"))
      (make-directory (expand-file-name (concat "vterm-" version) dir))
      (write-region "" nil (expand-file-name (concat "vterm-" version
                                                     "/vterm.el")
                                             dir)))
    (make-directory (expand-file-name "vterm-0.1.0" dir)) ; no vterm.el
    (let ((lispm-term-vterm-search-directories (list dir)))
      (should (equal (lispm-term--vterm-package-directory)
                     (expand-file-name "vterm-0.0.10" dir)))))
  (let ((lispm-term-vterm-search-directories nil))
    (should-not (lispm-term--vterm-package-directory))))

(ert-deftest lispm-term-test-resolve-backend ()
  "`auto' picks vterm when it loads; explicit choices are checked."
  (let ((lispm-terminal-backend 'auto))
    (should (eq (lispm-term--resolve-backend nil) 'vterm)))
  (let ((lispm-terminal-backend 'term))
    (should (eq (lispm-term--resolve-backend nil) 'term))
    (should (eq (lispm-term--resolve-backend 'vterm) 'vterm)))
  (should-error (lispm-term--resolve-backend 'bogus) :type 'lispm-term-error))

(ert-deftest lispm-term-test-default-backend-start ()
  "`lispm-term-start' without BACKEND uses `lispm-terminal-backend'."
  (let ((lispm-terminal-backend 'term))
    (lispm-term-test--with-terminal
        (buf "*lispm-test: default*" '("sh" "-c" "echo default-ok; sleep 60"))
      (should (eq (lispm-term-backend buf) 'term))
      (lispm-term-test--wait-text buf "default-ok"))))

(ert-deftest lispm-term-test-start-errors ()
  "Bad programs, directories and backends signal and leave no buffer."
  (let ((before (buffer-list)))
    (should-error (lispm-term-start "*lispm-test: err*"
                                    '("lispm-no-such-program-xyz")
                                    :backend 'term)
                  :type 'lispm-term-error)
    (should-error (lispm-term-start "*lispm-test: err*" '("sh")
                                    :directory "/nonexistent/lispm/dir"
                                    :backend 'term)
                  :type 'lispm-term-error)
    (should-error (lispm-term-start "*lispm-test: err*" '("sh")
                                    :backend 'bogus)
                  :type 'lispm-term-error)
    (should-error (lispm-term-start "*lispm-test: err*" "sh -c true"
                                    :backend 'term)
                  :type 'wrong-type-argument)
    (should-error (lispm-term-start "*lispm-test: err*" '("sh")
                                    :environment '(PATH)
                                    :backend 'term)
                  :type 'wrong-type-argument)
    ;; The program is looked up in the child's PATH.
    (should-error (lispm-term-start "*lispm-test: err*" '("sh")
                                    :environment '("PATH=/nonexistent")
                                    :backend 'term)
                  :type 'lispm-term-error)
    (should (equal (buffer-list) before))))

;;; Both backends

(lispm-term-test--deftest lispm-term-test-start-and-text (term vterm)
  "A program starts in a hidden, named buffer and its output shows."
  (lispm-term-test--with-terminal
      (buf "*lispm-test: start*"
           (lispm-term-test--python-command
            "import sys; print('hello from', sys.argv[1]); import time; time.sleep(60)"
            "lispm")
           :backend backend)
    (should (bufferp buf))
    (should (equal (buffer-name buf) "*lispm-test: start*"))
    (should (eq (lispm-term-backend buf) backend))
    (should (eq (buffer-local-value 'major-mode buf)
                (if (eq backend 'vterm) 'vterm-mode 'term-mode)))
    (should-not (get-buffer-window-list buf nil t))
    (let ((proc (lispm-term-process buf)))
      (should (processp proc))
      (should (eq proc (get-buffer-process buf)))
      (should (lispm-term-live-p buf))
      (should-not (process-query-on-exit-flag proc)))
    (let ((text (lispm-term-test--wait-text buf "hello from lispm")))
      (should-not (text-properties-at 0 text))
      (should-not (string-search "\e" text)))
    ;; A second terminal with the same name gets a unique name.
    (lispm-term-test--with-terminal
        (buf2 "*lispm-test: start*" '("sh" "-c" "echo second; sleep 60")
              :backend backend)
      (should-not (eq buf2 buf))
      (should (string-prefix-p "*lispm-test: start*" (buffer-name buf2)))
      (lispm-term-test--wait-text buf2 "second")))
  ;; Not a terminal buffer:
  (with-temp-buffer
    (should-not (lispm-term-process (current-buffer)))
    (should-not (lispm-term-backend (current-buffer)))
    (should-error (lispm-term-text (current-buffer)) :type 'lispm-term-error)
    (should-error (lispm-term-send (current-buffer) "x")
                  :type 'lispm-term-error)))

(lispm-term-test--deftest lispm-term-test-environment (term vterm)
  "ENVIRONMENT sets and unsets variables; TMUX is always unset."
  (lispm-term-test--with-dir dir
    (let* ((out (expand-file-name "dump.json" dir))
           (process-environment
            (append '("LISPM_TEST_UNSET=present" "LISPM_TEST_KEEP=kept"
                      "LISPM_TEST_SET=old" "TMUX=/tmp/tmux-0/default,1,0"
                      "TMUX_PANE=%1" "LINES=99" "COLUMNS=99")
                    process-environment)))
      (lispm-term-test--with-terminal
          (buf "*lispm-test: env*"
               (lispm-term-test--python-command lispm-term-test--dump-script
                                                out)
               :directory dir
               :environment '("LISPM_TEST_SET=a b=c 'q' \"d\" ❯"
                              "LISPM_TEST_UNSET" "LISPM_TEST_NEW=new")
               :backend backend)
        (let* ((dump (lispm-term-test--read-json out))
               (env (alist-get 'env dump)))
          (should (equal (alist-get 'LISPM_TEST_SET env)
                         "a b=c 'q' \"d\" ❯"))
          (should (equal (alist-get 'LISPM_TEST_NEW env) "new"))
          (should (equal (alist-get 'LISPM_TEST_KEEP env) "kept"))
          (should-not (assq 'LISPM_TEST_UNSET env))
          (should-not (assq 'TMUX env))
          (should-not (assq 'TMUX_PANE env))
          (should-not (assq 'LINES env))
          (should-not (assq 'COLUMNS env))
          (should (equal (alist-get 'TERM env)
                         (if (eq backend 'vterm) "xterm-256color"
                           "eterm-color")))
          (should (string-prefix-p (if (eq backend 'vterm) "vterm" "30")
                                   (alist-get 'INSIDE_EMACS env "")))
          (should (equal (file-name-as-directory (alist-get 'cwd dump)) dir))
          (should (equal (buffer-local-value 'default-directory buf) dir))
          (lispm-term-test--wait-text buf "dumped"))))))

(lispm-term-test--deftest lispm-term-test-argv-intact (term vterm)
  "Arguments with spaces, quotes and shell syntax arrive unchanged."
  (lispm-term-test--with-dir dir
    (let* ((out (expand-file-name "argv.json" dir))
           (args (list "with space" "single ' quote" "double \" quote"
                       "$HOME" "`id`" "$(id)" "back\\slash" "" "  "
                       "semi;colon && echo pwned" "star *" "new\nline"
                       "tab\there" "ünïcødé ❯" "-dash" "%s %d" "~" "a=b"
                       "#hash" "!bang" "{a,b}" "<in >out|pipe")))
      (lispm-term-test--with-terminal
          (buf "*lispm-test: argv*"
               (apply #'lispm-term-test--python-command
                      lispm-term-test--dump-script out args)
               :directory dir :backend backend)
        (should (equal (alist-get 'argv (lispm-term-test--read-json out))
                       args))
        (lispm-term-test--wait-text buf "dumped")))))

(lispm-term-test--deftest lispm-term-test-paste-and-send-bytes (term vterm)
  "`lispm-term-paste' and `lispm-term-send' write exactly their bytes."
  (lispm-term-test--with-dir dir
    (let* ((pasted (expand-file-name "pasted" dir))
           (sent (expand-file-name "sent" dir))
           (text (concat "line one\nline two\r\n\ttabbed ❯ é \"q\" 'q' $HOME "
                         "\C-c \C-d \C-z \e[A end\n"
                         (make-string 20000 ?x) "\nlast"))
           (keys "typed\r\n\177\C-u ünï @@"))
      (lispm-term-test--with-terminal
          (buf "*lispm-test: paste*"
               (lispm-term-test--python-command
                lispm-term-test--raw-reader-script pasted sent)
               :backend backend)
        (lispm-term-test--wait-text buf "READY")
        (lispm-term-paste buf text)
        (should (equal (lispm-term-test--wait-file pasted)
                       (encode-coding-string
                        (concat "\e[200~" text "\e[201~") 'utf-8)))
        (lispm-term-test--wait-text buf "PASTED")
        (lispm-term-send buf keys)
        (should (equal (lispm-term-test--wait-file sent)
                       (encode-coding-string keys 'utf-8)))
        (lispm-term-test--wait-text buf "SENT")))))

(lispm-term-test--deftest lispm-term-test-exit-function (term vterm)
  "Exit functions run once, in order, after the backend's sentinel."
  (let* ((calls nil)
         (vterm-calls nil)
         (vterm-hook (lambda (buffer event)
                       (push (list buffer event) vterm-calls))))
    (add-hook 'vterm-exit-functions vterm-hook)
    (unwind-protect
        (lispm-term-test--with-terminal
            (buf "*lispm-test: exit*"
                 '("sh" "-c" "echo waiting; read line; echo got $line; exit 3")
                 :backend backend)
          (lispm-term-add-exit-function
           buf (lambda (b e) (push (list 'first b e) calls)))
          (lispm-term-add-exit-function
           buf (lambda (b e) (push (list 'second b e) calls)))
          (lispm-term-test--wait-text buf "waiting")
          (should (null calls))
          (lispm-term-send buf "go\r")
          (lispm-term-test--wait (lambda () (= (length calls) 2)) "exit")
          (should (equal (reverse calls)
                         `((first ,buf "exited abnormally with code 3\n")
                           (second ,buf "exited abnormally with code 3\n"))))
          (let ((proc (lispm-term-process buf)))
            (should (processp proc))
            (should-not (lispm-term-live-p buf))
            (should (eq (process-status proc) 'exit))
            (should (= (process-exit-status proc) 3)))
          ;; The caller decides what happens to the buffer.
          (should (buffer-live-p buf))
          (should (string-search "got go" (lispm-term-text buf)))
          ;; The backend's own sentinel ran too.
          (if (eq backend 'vterm)
              (should (equal vterm-calls
                             `((,buf "exited abnormally with code 3\n"))))
            (should (string-match-p
                     "Process .* exited abnormally with code 3"
                     (lispm-term-text buf))))
          ;; Added after the exit: called at once.
          (let (late)
            (lispm-term-add-exit-function
             buf (lambda (b e) (setq late (list b e))))
            (should (equal late (list buf "exited abnormally with code 3\n"))))
          (accept-process-output nil 0.2)
          (should (= (length calls) 2))
          (should-error (lispm-term-send buf "x") :type 'lispm-term-error)
          (should-error (lispm-term-paste buf "x") :type 'lispm-term-error))
      (remove-hook 'vterm-exit-functions vterm-hook))))

(lispm-term-test--deftest lispm-term-test-kill-buffer (term vterm)
  "Killing the buffer ends the process without asking."
  (let* ((buf (lispm-term-start "*lispm-test: kill*"
                                '("sh" "-c" "echo started; exec sleep 600")
                                :backend backend))
         (proc (lispm-term-process buf))
         (pid (process-id proc))
         (events nil))
    (unwind-protect
        (progn
          (lispm-term-add-exit-function
           buf (lambda (_b e) (push e events)))
          (lispm-term-test--wait-text buf "started")
          (should (file-exists-p (format "/proc/%d" pid)))
          ;; `yes-or-no-p' would fail in batch Emacs: no question asked.
          (cl-letf (((symbol-function 'yes-or-no-p)
                     (lambda (&rest _) (error "Asked a question")))
                    ((symbol-function 'y-or-n-p)
                     (lambda (&rest _) (error "Asked a question"))))
            (kill-buffer buf))
          (should-not (buffer-live-p buf))
          (lispm-term-test--wait (lambda () (not (process-live-p proc)))
                                 "process end")
          (lispm-term-test--wait
           (lambda () (not (file-exists-p (format "/proc/%d" pid))))
           "pid gone")
          (lispm-term-test--wait (lambda () events) "exit event")
          (should (equal events '("killed\n"))))
      (when (buffer-live-p buf)
        (kill-buffer buf))
      (when (process-live-p proc)
        (delete-process proc)))))

;;; term fixes

(defconst lispm-term-test--escapes-script
  "import os, sys, time
def w(b):
    os.write(1, b)
    time.sleep(0.3)
w(b'A\\x1b]0;TITLE-ONE')
w(b'-MORE\\x07B')
w(b'\\x1b]2;TITLE-TWO\\x1b')
w(b'\\\\C')
w(b'\\x1b]')
w(b'8;;http://example.invalid/\\x1b\\\\D')
w(b'\\x1b')
w(']0;\\u2733 UTF title\\x07E\\x1bP+q544e\\x1b\\\\F\\r\\n'.encode())
w(b'123456789\\x1b[3GX\\r\\n')
w(b'abcdef\\x1b[1GY\\r\\n')
w(b'ghijkl\\x1b[GZ\\r\\n')
w(b'mnopqr\\x1b[0GW\\r\\n')
w(b'stuvwx\\x1b[5`V\\r\\n')
w(b'\\x1b[200GQ\\r\\n')
w('\\u276f \\u00e9\\x1b[2GU\\r\\n'.encode())
w(b'split\\x1b[')
w(b'4GT\\r\\n')
w(b'end-of-escapes\\r\\n')
time.sleep(60)"
  "Python code that writes OSC strings and CHA sequences, split up.")

(defun lispm-term-test--line (text prefix)
  "Return the first line of TEXT with the prefix PREFIX, or nil."
  (cl-find-if (lambda (line) (string-prefix-p prefix line))
              (split-string text "\n")))

(ert-deftest lispm-term-test-term-escapes-fixed ()
  "LispM's term buffers drop OSC strings and use 1-based CHA."
  (let ((chunks nil))
    (lispm-term-test--with-terminal
        (buf "*lispm-test: escapes*"
             (lispm-term-test--python-command
              lispm-term-test--escapes-script)
             :backend 'term)
      ;; Record the raw chunks the filter gets, to show the splits.
      (add-function :before (process-filter (lispm-term-process buf))
                    (lambda (_proc string) (push string chunks)))
      (let* ((text (lispm-term-test--wait-text buf "end-of-escapes"))
             (width (buffer-local-value 'term-width buf)))
        ;; The sequences really were split across filter calls.
        (dolist (tail '("TITLE-ONE" "TITLE-TWO\e" "\e]" "\e" "split\e["))
          (should (cl-find-if (lambda (c) (string-suffix-p tail c)) chunks)))
        (should-not (string-search "\e" text))
        (should-not (string-search "TITLE" text))
        (should-not (string-search "UTF title" text))
        (should-not (string-search "http" text))
        (should-not (string-search "544e" text))
        (should-not (string-search "]0;" text))
        (should (lispm-term-test--line text "ABCDEF"))
        (should (equal (string-trim-right (lispm-term-test--line text "ABC"))
                       "ABCDEF"))
        (should (equal (lispm-term-test--line text "12") "12X456789"))
        (should (equal (lispm-term-test--line text "Yb") "Ybcdef"))
        (should (equal (lispm-term-test--line text "Zh") "Zhijkl"))
        (should (equal (lispm-term-test--line text "Wn") "Wnopqr"))
        (should (equal (lispm-term-test--line text "stuv") "stuvVx"))
        (should (equal (lispm-term-test--line text "❯") "❯Ué"))
        (should (equal (lispm-term-test--line text "spl") "splTt"))
        ;; CHA past the right margin goes to the last column.
        (should (equal (cl-find-if (lambda (l) (string-suffix-p "Q" l))
                                   (split-string text "\n"))
                       (concat (make-string (1- width) ?\s) "Q")))))))

(defconst lispm-term-test--modes-script
  "import os, sys, time
def w(b):
    os.write(1, b)
    time.sleep(0.2)
w(b'before-alt\\r\\n')
w(b'\\x1b[?1049h\\x1b[1;1HALTSCREEN\\r\\n')
sys.stdin.readline()
w(b'\\x1b[?1049l\\x1b[?2004h\\x1b[?25l\\x1b[>4;2m\\x1b[>7u\\x1b[?u')
w(b'\\x1b=\\x1b(B\\x1b[?1007$p\\x1b[0 q\\x1b[?2026hafter-alt\\r\\n')
w(b'\\x1b[31mRED\\x1b[>4;0mSTILL\\x1b[0m\\r\\n')
w(b'end-of-modes\\r\\n')
time.sleep(60)"
  "Python code that uses the alternate screen and private modes.")

(ert-deftest lispm-term-test-term-private-modes ()
  "The alternate screen works and private modes print nothing."
  (lispm-term-test--with-terminal
      (buf "*lispm-test: modes*"
           (lispm-term-test--python-command lispm-term-test--modes-script)
           :backend 'term)
    (let ((text (lispm-term-test--wait-text buf "ALTSCREEN")))
      ;; On the alternate screen, at its top left.
      (should (string-match-p "^ALTSCREEN$" text))
      (should (buffer-local-value 'term-saved-home-marker buf)))
    (lispm-term-send buf "\r")
    (let ((text (lispm-term-test--wait-text buf "end-of-modes")))
      (should-not (buffer-local-value 'term-saved-home-marker buf))
      (should-not (string-search "ALTSCREEN" text))
      (should-not (string-search "\e" text))
      (should (lispm-term-test--line text "before-alt"))
      (should (equal (lispm-term-test--line text "after") "after-alt"))
      (should (equal (lispm-term-test--line text "RED") "REDSTILL"))
      ;; "CSI > 4 ; 0 m" is not read as SGR 0: STILL stays red.
      (with-current-buffer buf
        (goto-char (point-min))
        (search-forward "REDSTILL")
        (let ((red (get-text-property (- (point) 8) 'font-lock-face))
              (still (get-text-property (- (point) 1) 'font-lock-face)))
          (should red)
          (should (equal red still)))))))

(ert-deftest lispm-term-test-term-fixes-scoped ()
  "Term buffers that LispM did not start keep term's stock behaviour."
  (lispm-term-test--with-terminal
      (lispm-buf "*lispm-test: scoped*"
                 (lispm-term-test--python-command
                  lispm-term-test--escapes-script)
                 :backend 'term)
    (let ((plain (make-term "lispm-test-plain" lispm-term-test--python nil
                            "-c" lispm-term-test--escapes-script)))
      (unwind-protect
          (let ((proc (get-buffer-process plain)))
            (set-process-query-on-exit-flag proc nil)
            (should (eq (process-filter proc) #'term-emulate-terminal))
            (should-not (buffer-local-value 'lispm-term--backend plain))
            (let ((fixed (lispm-term-test--wait-text lispm-buf
                                                     "end-of-escapes"))
                  (stock (lispm-term-test--wait
                          (lambda ()
                            (with-current-buffer plain
                              (let ((s (buffer-substring-no-properties
                                        (point-min) (point-max))))
                                (and (string-search "end-of-escapes" s)
                                     s))))
                          "plain term output")))
              (should (equal (lispm-term-test--line fixed "12") "12X456789"))
              ;; Stock term: OSC text and ESC land in the buffer, and
              ;; CHA is 0-based.
              (should (string-search "TITLE-ONE" stock))
              (should (string-search "\e" stock))
              (should (equal (lispm-term-test--line stock "12") "123X56789"))))
        (let ((proc (get-buffer-process plain)))
          (when proc (delete-process proc)))
        (kill-buffer plain)))))

(ert-deftest lispm-term-test-translate-splits ()
  "Translating a stream split anywhere gives the same output as whole."
  (let* ((stream (concat "a\e]0;title\abc\e]2;t\e\\d\e]8;;u\e\\e"
                         "\eP+q54\e\\f\e_apc\e\\g\e]0;cut\e[31mh"
                         "\e[5Gi\e[?1049hj\e[?1049lk\e[>4;2ml\e=m\e(Bn"
                         "\e[?2004;1049ho\e7\e8\eMp\eEq\e[2 qr\e[3`s"
                         "\e]0;\342\234\263 x\at\e[1;2Hu"))
         (whole (lispm-term--term-translate nil stream 80)))
    (should (equal whole
                   (cons (concat "abcdefg\e[31mh\e[4Gi\e7\e[47hj\e[47l\e8k"
                                 "lmn\e7\e[47ho\e7\e8\eMp\r\nq\e[2 qr"
                                 "\e[2Gst\e[1;2Hu")
                         nil)))
    (dotimes (i (1+ (length stream)))
      (let* ((r1 (lispm-term--term-translate nil (substring stream 0 i) 80))
             (r2 (lispm-term--term-translate (cdr r1) (substring stream i) 80)))
        (should (equal (cons (concat (car r1) (car r2)) (cdr r2)) whole))))
    ;; One byte at a time.
    (let ((state nil) (out ""))
      (dotimes (i (length stream))
        (let ((r (lispm-term--term-translate state (substring stream i (1+ i))
                                             80)))
          (setq out (concat out (car r)) state (cdr r))))
      (should (equal (cons out state) whole)))
    ;; An unterminated string swallows output until its end, without
    ;; keeping it, and incomplete sequences are held back.
    (should (equal (lispm-term--term-translate nil "x\e]0;long" 80)
                   '("x" . string)))
    (should (equal (lispm-term--term-translate 'string "more\a y" 80)
                   '(" y" . nil)))
    (should (equal (lispm-term--term-translate nil "x\e[12" 80)
                   '("x" . "\e[12")))
    (should (equal (lispm-term--term-translate "\e[12" ";3H" 80)
                   '("\e[12;3H" . nil)))
    ;; CHA is clamped to the width.
    (should (equal (car (lispm-term--term-translate nil "\e[99G" 79))
                   "\e[78G"))))

(provide 'lispm-term-test)
;;; lispm-term-test.el ends here
