;;; lispm-term.el --- Terminal backends for LispM's agent CLIs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: terminals, processes, tools

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; LispM runs agent CLIs (Claude Code, Codex) in Emacs terminal
;; buffers.  This file hides the terminal emulator behind a small API:
;;
;;   (lispm-term-start NAME COMMAND &key directory environment backend)
;;   (lispm-term-process BUFFER)        (lispm-term-live-p BUFFER)
;;   (lispm-term-backend BUFFER)        (lispm-term-text BUFFER)
;;   (lispm-term-tail BUFFER CHARS)
;;   (lispm-term-send BUFFER STRING)    (lispm-term-paste BUFFER TEXT)
;;   (lispm-term-add-exit-function BUFFER FUNCTION)
;;
;; Three backends are supported, chosen by `lispm-terminal-backend':
;; vterm and eat when installed (neither is a hard dependency), and
;; the built-in `term'.  Each backend is a set of methods on the
;; generic functions `lispm-term-backend-available-p' and
;; `lispm-term--make', specialised with (eql BACKEND).
;;
;; Finding vterm: `lispm-term-start' first tries (require 'vterm).
;; When vterm is not on `load-path' (as in "emacs -Q" with Debian's
;; elpa-vterm package), the newest "vterm-*" directory under the
;; directories of `lispm-term-vterm-search-directories' (Debian's
;; "/usr/share/emacs/site-lisp/elpa" by default) is added to
;; `load-path'; set that option to nil to turn this off.  vterm is only
;; loaded when its compiled module can be found, so LispM never makes
;; vterm offer to compile the module; without it, `auto' falls back to
;; eat or term.  `package-initialize' is never called.
;;
;; Built-in term garbles Claude Code and Codex: it prints OSC strings
;; (window titles) into the buffer, treats CHA ("CSI n G") as 0-based,
;; has no "CSI ? 1049 h" alternate screen and misreads private CSI
;; sequences such as "CSI > 4 ; 2 m" as colour changes.  LispM's own
;; term buffers therefore get a process filter, wrapped around term's,
;; that rewrites the byte stream before term sees it (see
;; `lispm-term--term-translate').  Nothing is advised and no global
;; setting changes, so other term buffers keep term's stock behaviour.
;;
;; vterm and eat render output on a timer; `lispm-term-text' runs a
;; pending redraw first, so it always returns what the program wrote.
;;
;; Text given to `lispm-term-send' and `lispm-term-paste' reaches the
;; program verbatim.  Callers must sanitise it: a paste that contains
;; "ESC [ 2 0 1 ~" ends the bracketed paste early and lets the rest of
;; the text act as typed keys.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)

;;; Customization

(defgroup lispm-terminal nil
  "Terminal emulators for LispM's agent CLIs."
  :group 'lispm
  :prefix "lispm-term-")

(defcustom lispm-terminal-backend 'auto
  "The terminal emulator that runs agent CLIs.
`auto' means vterm when it can be loaded, else eat when it is
installed, else the built-in `term'."
  :type '(choice (const :tag "First available" auto)
                 (const :tag "vterm" vterm)
                 (const :tag "Eat" eat)
                 (const :tag "Built-in term" term))
  :group 'lispm-terminal)

(defcustom lispm-term-vterm-search-directories
  '("/usr/share/emacs/site-lisp/elpa")
  "Directories searched for a \"vterm-*\" package directory.
When vterm is not on `load-path', the newest such directory found
here is added to `load-path' before vterm is loaded.  The default
finds Debian's elpa-vterm package.  nil disables the search."
  :type '(repeat directory)
  :group 'lispm-terminal)

(defcustom lispm-term-term-fixes t
  "Whether LispM's term buffers rewrite output that term cannot render.
See `lispm-term--term-translate'.  Only buffers started by
`lispm-term-start' are affected, and only when they are started."
  :type 'boolean
  :group 'lispm-terminal)

;;; Optional backends
;; vterm and eat are optional, and term.el is only loaded on use, so
;; their symbols are declared here for the byte compiler.

(defvar vterm-shell)
(defvar vterm-environment)
(defvar vterm-kill-buffer-on-exit)
(defvar vterm-exit-functions)
(defvar vterm--redraw-timer)
(declare-function vterm-mode "ext:vterm" ())
(declare-function vterm--delayed-redraw "ext:vterm" (buffer))

(defvar eat-kill-buffer-on-exit)
(declare-function eat-mode "ext:eat" ())
(declare-function eat-exec "ext:eat" (buffer name command startfile switches))
(defvar eat--pending-output-chunks)
(defvar eat--terminal)
(declare-function eat--process-output-queue "ext:eat" (buffer))

(defvar term-width)
(declare-function term-mode "term" ())
(declare-function term-exec "term" (buffer name command startfile switches))
(declare-function term-char-mode "term" ())

;;; Errors and buffer state

(define-error 'lispm-term-error "LispM terminal error" 'lispm-error)

(defvar-local lispm-term--backend nil
  "The backend symbol of a LispM terminal buffer, nil elsewhere.")
(put 'lispm-term--backend 'permanent-local t)

(defvar-local lispm-term--process nil
  "The process started in a LispM terminal buffer.
Kept after the process has exited, when `get-buffer-process' no
longer finds it.")
(put 'lispm-term--process 'permanent-local t)

;;; Backend protocol

(cl-defgeneric lispm-term-backend-available-p (backend)
  "Return non-nil if terminal BACKEND can be used, loading it if needed."
  (ignore backend)
  nil)

(cl-defgeneric lispm-term--make (backend buffer command environment)
  "Start COMMAND in the fresh BUFFER with BACKEND and return the process.
COMMAND is a list, the program and its arguments.  ENVIRONMENT is a
list of \"VAR=value\" or \"VAR\" (unset) entries that take precedence
over `process-environment'.  `default-directory' is bound to the
working directory.  Methods must not display BUFFER."
  (ignore buffer command environment)
  (signal 'lispm-term-error (list "Unknown terminal backend" backend)))

(cl-defgeneric lispm-term--flush (backend)
  "Bring the current terminal buffer of BACKEND up to date with its output.
Called before the buffer's text is read."
  (ignore backend))

;;; vterm backend

(defun lispm-term--vterm-package-directory ()
  "Return the newest vterm package directory below the search directories.
Look in `lispm-term-vterm-search-directories' for directories named
\"vterm-VERSION\" that hold vterm.el; return nil if there is none."
  (let (found)
    (dolist (parent lispm-term-vterm-search-directories)
      (when (file-directory-p parent)
        (dolist (dir (directory-files parent t "\\`vterm-[0-9]"))
          (when (file-exists-p (expand-file-name "vterm.el" dir))
            (push dir found)))))
    (car (sort found
               (lambda (a b)
                 (version< (lispm-term--directory-version b)
                           (lispm-term--directory-version a)))))))

(defun lispm-term--directory-version (dir)
  "Return the version part of package directory DIR, or \"0\"."
  (let ((name (file-name-nondirectory (directory-file-name dir))))
    (if (and (string-match "-\\([0-9][0-9.]*\\)\\'" name)
             (ignore-errors (version-to-list (match-string 1 name))))
        (match-string 1 name)
      "0")))

(defun lispm-term--require-vterm ()
  "Load vterm if it and its compiled module can be found; return non-nil if so.
See the Commentary for how vterm is found."
  (or (featurep 'vterm)
      (progn
        (unless (locate-library "vterm")
          (let ((dir (lispm-term--vterm-package-directory)))
            (when dir
              (add-to-list 'load-path dir))))
        (and (locate-library "vterm")
             ;; vterm.el asks to compile its module when it is missing,
             ;; which would block in batch Emacs: only load vterm when
             ;; the module can be found.  Debian's package puts the
             ;; module's directory on `load-path' in vterm-load-path.el.
             (or (locate-library "vterm-module")
                 (and (locate-library "vterm-load-path")
                      (load "vterm-load-path" t t)
                      (locate-library "vterm-module")))
             (condition-case err
                 (require 'vterm)
               (error
                (message "LispM: could not load vterm: %s"
                         (error-message-string err))
                nil))))))

(cl-defmethod lispm-term-backend-available-p ((_backend (eql 'vterm)))
  "Return non-nil if vterm can be loaded."
  (lispm-term--require-vterm))

(cl-defmethod lispm-term--make ((_backend (eql 'vterm)) buffer command
                                environment)
  "Start COMMAND in BUFFER with vterm and ENVIRONMENT; return the process.
vterm runs its `vterm-shell' as a command line through \"/bin/sh -c\",
so every word of COMMAND is quoted with `shell-quote-argument'."
  (with-current-buffer buffer
    (let ((vterm-shell (mapconcat #'shell-quote-argument command " "))
          (vterm-environment environment)
          ;; Also in `process-environment', in case a .dir-locals.el file
          ;; sets `vterm-environment' (vterm-mode reads it).
          (process-environment (append environment process-environment))
          ;; vterm installs its sentinel only when this is non-nil;
          ;; without it, Emacs's default sentinel writes "Process vterm
          ;; finished" at the top of the screen.
          (vterm-exit-functions (or vterm-exit-functions (list #'ignore))))
      (vterm-mode))
    ;; vterm's sentinel reads this in the buffer `lispm-term--sentinel'
    ;; makes current: the caller decides what happens on exit.
    (setq-local vterm-kill-buffer-on-exit nil)
    (get-buffer-process buffer)))

(cl-defmethod lispm-term--flush ((_backend (eql 'vterm)))
  "Redraw the current vterm buffer now if a redraw is pending.
vterm redraws on a timer, `vterm-timer-delay' seconds after output."
  (when (and (bound-and-true-p vterm--redraw-timer)
             (fboundp 'vterm--delayed-redraw))
    (cancel-timer vterm--redraw-timer)
    (vterm--delayed-redraw (current-buffer))))

;;; term backend

(defconst lispm-term--max-pending 1024
  "Longest incomplete escape sequence held back between filter calls.
A longer one is malformed and is dropped.")

(defun lispm-term--term-private-mode (mode set)
  "Return what term should see for DEC private MODE being SET or reset.
The alternate screens map onto term's own \"CSI 47 h/l\" alternate
sub-buffer, and 1049 also saves and restores the cursor as xterm
does.  Every other private mode is dropped."
  (pcase mode
    (1049 (if set "\e7\e[47h" "\e[47l\e8"))
    ((or 47 1047) (if set "\e[47h" "\e[47l"))
    (1048 (if set "\e7" "\e8"))
    (_ "")))

(defun lispm-term--term-csi (params intermediates final width)
  "Return what term should see for a control sequence.
The sequence is \"ESC [\" PARAMS INTERMEDIATES FINAL, with FINAL a
character; WIDTH is the terminal width in columns."
  (let ((prefix (and (> (length params) 0) (aref params 0))))
    (cond
     ;; Private sequences: term reads "?1049" as 0 and "> 4 ; 2 m" as
     ;; SGR 0;2.  Keep the alternate screens, drop the rest.
     ((and (eq prefix ??) (equal intermediates "") (memq final '(?h ?l)))
      (mapconcat (lambda (p)
                   (lispm-term--term-private-mode (string-to-number p)
                                                  (eq final ?h)))
                 (split-string (substring params 1) ";")
                 ""))
     ((memq prefix '(?< ?= ?> ??)) "")
     ;; CHA and HPA are 1-based; term's CHA is 0-based and term has no
     ;; HPA.  Rewrite both as term's CHA to the right 0-based column.
     ((and (memq final '(?G ?`)) (equal intermediates ""))
      (format "\e[%dG"
              (1- (max 1 (min width (string-to-number params))))))
     (t (concat "\e[" params intermediates (string final))))))

(defun lispm-term--term-translate (state input width)
  "Rewrite INPUT, output for a term buffer, into what term renders right.
STATE is the state left by the previous call, nil at first; WIDTH
is the terminal width in columns.  Return (OUTPUT . NEW-STATE).

The rewrite drops OSC, DCS, APC, PM and SOS strings (ended by BEL or
ESC \\, or cut short by another ESC) and escape sequences term would
print as text; it makes CHA 1-based and maps the alternate screens
onto term's (see `lispm-term--term-csi').  A sequence split across
calls is completed from the next INPUT: NEW-STATE holds either the
incomplete sequence as a string, or `string' or `string-esc' while
inside a string sequence (the latter right after an ESC)."
  (let ((str input) (i 0) (mode nil) (pending nil) (out nil) (len 0))
    (pcase state
      ((pred stringp) (setq str (concat state input)))
      ('string (setq mode 'string))
      ('string-esc
       (if (and (> (length input) 0) (eq (aref input 0) ?\\))
           (setq i 1)                   ; ESC \ ends the string
         ;; ESC cut the string short and starts a new sequence.
         (setq str (concat "\e" input)))))
    (setq len (length str))
    (while (< i len)
      (if (eq mode 'string)
          (let ((j (string-match "[\a\e]" str i)))
            (cond ((null j) (setq i len))
                  ((eq (aref str j) ?\a) (setq mode nil i (1+ j)))
                  ((= (1+ j) len) (setq mode 'string-esc i len))
                  ((eq (aref str (1+ j)) ?\\) (setq mode nil i (+ j 2)))
                  (t (setq mode nil i j))))
        (let ((j (string-search "\e" str i)))
          (if (null j)
              (progn (push (substring str i) out)
                     (setq i len))
            (when (> j i)
              (push (substring str i j) out))
            (setq i j)
            (if (= (1+ i) len)
                (setq pending (substring str i) i len)
              (let ((c (aref str (1+ i))))
                (cond
                 ;; OSC, DCS, SOS, PM, APC: strings to drop.
                 ((memq c '(?\] ?P ?X ?^ ?_))
                  (setq mode 'string i (+ i 2)))
                 ;; CSI: ESC [ parameters intermediates final.
                 ((eq c ?\[)
                  (let* ((k (+ i 2)) (params-end nil))
                    (while (and (< k len) (<= #x30 (aref str k) #x3f))
                      (setq k (1+ k)))
                    (setq params-end k)
                    (while (and (< k len) (<= #x20 (aref str k) #x2f))
                      (setq k (1+ k)))
                    (cond
                     ((>= k len)
                      (unless (> (- len i) lispm-term--max-pending)
                        (setq pending (substring str i)))
                      (setq i len))
                     ((<= #x40 (aref str k) #x7e)
                      (push (lispm-term--term-csi
                             (substring str (+ i 2) params-end)
                             (substring str params-end k)
                             (aref str k) width)
                            out)
                      (setq i (1+ k)))
                     ;; Malformed: drop what was read, keep the byte.
                     (t (setq i k)))))
                 ;; Sequences term handles itself (ESC A starts its
                 ;; own "ESC AnSiT" messages).
                 ((memq c '(?D ?M ?7 ?8 ?c ?A))
                  (push (substring str i (+ i 2)) out)
                  (setq i (+ i 2)))
                 ;; NEL: next line.
                 ((eq c ?E) (push "\r\n" out) (setq i (+ i 2)))
                 ;; ESC intermediates final, e.g. ESC ( B: drop.
                 ((<= #x20 c #x2f)
                  (let ((k (+ i 2)))
                    (while (and (< k len) (<= #x20 (aref str k) #x2f))
                      (setq k (1+ k)))
                    (cond ((>= k len)
                           (unless (> (- len i) lispm-term--max-pending)
                             (setq pending (substring str i)))
                           (setq i len))
                          ((<= #x30 (aref str k) #x7e) (setq i (1+ k)))
                          (t (setq i k)))))
                 ;; Any other ESC X, e.g. ESC = or a stray ESC \: drop.
                 ((<= #x30 c #x7e) (setq i (+ i 2)))
                 ;; ESC before a control or non-ASCII byte: drop the ESC.
                 (t (setq i (1+ i))))))))))
    (cons (apply #'concat (nreverse out)) (or pending mode))))

(defun lispm-term--term-filter (filter proc string)
  "Pass STRING from PROC through `lispm-term--term-translate' to FILTER.
FILTER is term's own process filter.  Used as :around advice on the
process filter of LispM's term processes only."
  (let* ((buffer (process-buffer proc))
         (width (or (and (buffer-live-p buffer)
                         (buffer-local-value 'term-width buffer))
                    80))
         (result (lispm-term--term-translate
                  (process-get proc 'lispm-term--term-state) string width)))
    (process-put proc 'lispm-term--term-state (cdr result))
    (unless (equal (car result) "")
      (funcall filter proc (car result)))))

(cl-defmethod lispm-term-backend-available-p ((_backend (eql 'term)))
  "Return t: term is part of Emacs."
  (require 'term)
  t)

(cl-defmethod lispm-term--make ((_backend (eql 'term)) buffer command
                                environment)
  "Start COMMAND in BUFFER with term and ENVIRONMENT; return the process.
term starts the program directly with its arguments; `term-term-name'
is left alone (\"eterm-color\" by default)."
  (require 'term)
  (let ((process-environment (append environment process-environment)))
    (with-current-buffer buffer
      (term-mode)
      (term-exec buffer (buffer-name buffer) (car command) nil (cdr command))
      (term-char-mode)
      (let ((proc (get-buffer-process buffer)))
        (when lispm-term-term-fixes
          (add-function :around (process-filter proc)
                        #'lispm-term--term-filter))
        proc))))

;;; eat backend
;; eat is not packaged for Debian 12, so this path is untested here.

(cl-defmethod lispm-term-backend-available-p ((_backend (eql 'eat)))
  "Return non-nil if eat can be loaded."
  (or (featurep 'eat)
      (condition-case nil
          (require 'eat nil t)
        (error nil))))

(cl-defmethod lispm-term--make ((_backend (eql 'eat)) buffer command
                                environment)
  "Start COMMAND in BUFFER with eat and ENVIRONMENT; return the process.
This does what `eat-make' does, in a buffer LispM named itself."
  (let ((process-environment (append environment process-environment)))
    (with-current-buffer buffer
      (eat-mode)
      (eat-exec buffer (buffer-name buffer) (car command) nil (cdr command))
      (setq-local eat-kill-buffer-on-exit nil)
      (get-buffer-process buffer))))

(cl-defmethod lispm-term--flush ((_backend (eql 'eat)))
  "Process the output eat has queued for the current buffer, if any.
eat renders output on a timer, after `eat-minimum-latency' seconds."
  (when (and (bound-and-true-p eat--pending-output-chunks)
             (bound-and-true-p eat--terminal)
             (fboundp 'eat--process-output-queue))
    (eat--process-output-queue (current-buffer))))

;;; Starting a terminal

(defun lispm-term--resolve-backend (backend)
  "Return the usable backend symbol for BACKEND, or signal an error.
BACKEND nil means `lispm-terminal-backend'."
  (let ((wanted (or backend lispm-terminal-backend)))
    (if (eq wanted 'auto)
        (cl-find-if #'lispm-term-backend-available-p '(vterm eat term))
      (unless (memq wanted '(vterm eat term))
        (signal 'lispm-term-error (list "Unknown terminal backend" wanted)))
      (unless (lispm-term-backend-available-p wanted)
        (signal 'lispm-term-error
                (list "Terminal backend is not available" wanted)))
      wanted)))

(defun lispm-term--check-program (program directory)
  "Signal an error unless PROGRAM can be run from DIRECTORY.
A PROGRAM without a slash is looked up in the PATH of the current
`process-environment', which is the child's."
  (unless (if (string-search "/" program)
              (let ((file (expand-file-name program directory)))
                (and (file-executable-p file)
                     (not (file-directory-p file))))
            (let ((exec-path (parse-colon-path (or (getenv "PATH") ""))))
              (executable-find program)))
    (signal 'lispm-term-error (list "Program not found" program))))

(defun lispm-term--sentinel (sentinel proc event)
  "Run the backend's SENTINEL for PROC and EVENT, then the exit functions.
SENTINEL runs with PROC's buffer current, so that buffer-local
settings such as `vterm-kill-buffer-on-exit' apply.  The functions
added by `lispm-term-add-exit-function' run once, when PROC has
exited or was killed, even if SENTINEL signals an error."
  (let ((buffer (process-get proc 'lispm-term-buffer)))
    (unwind-protect
        (if (buffer-live-p buffer)
            (with-current-buffer buffer
              (funcall sentinel proc event))
          (funcall sentinel proc event))
      (when (and (memq (process-status proc) '(exit signal))
                 (not (process-get proc 'lispm-term--exit-event)))
        (process-put proc 'lispm-term--exit-event event)
        (dolist (fn (process-get proc 'lispm-term--exit-functions))
          (with-demoted-errors "LispM terminal exit function: %S"
            (funcall fn buffer event)))))))

(defun lispm-term--kill-buffer-hook ()
  "Delete the terminal process of the buffer being killed."
  (let ((proc lispm-term--process))
    (when (process-live-p proc)
      (delete-process proc))))

;;;###autoload
(cl-defun lispm-term-start (name command &key directory environment backend)
  "Start COMMAND in a new terminal buffer named NAME and return the buffer.
COMMAND is a list of strings: the program and its arguments, passed
as they are (quoted for the shell where a backend needs a command
line).  NAME is the buffer's name, such as \"*lispm: claude*\"; if a
buffer of that name exists, the new one gets a unique name made
from NAME.

DIRECTORY is the working directory (default: `default-directory').
ENVIRONMENT is a list of \"VAR=value\" strings put in front of the
child's environment; an entry \"VAR\" without \"=\" unsets VAR.  TMUX
and TMUX_PANE are always unset in the child, and LINES and COLUMNS
too unless ENVIRONMENT sets them.  BACKEND is `vterm', `eat', `term'
or `auto', and defaults to `lispm-terminal-backend'.

The buffer is not displayed.  Killing it deletes the process without
asking.  Signal `lispm-term-error' if the backend is not available,
DIRECTORY is not a local directory or the program is not found."
  (unless (and (consp command) (cl-every #'stringp command))
    (signal 'wrong-type-argument (list 'lispm-term-command-p command)))
  (unless (cl-every #'stringp environment)
    (signal 'wrong-type-argument (list 'lispm-term-environment-p environment)))
  (let* ((dir (file-name-as-directory
               (expand-file-name (or directory default-directory))))
         (backend (lispm-term--resolve-backend backend))
         (env (append '("TMUX" "TMUX_PANE") environment '("LINES" "COLUMNS")))
         (buffer nil)
         (done nil))
    (when (file-remote-p dir)
      (signal 'lispm-term-error (list "Remote directories are not supported"
                                      dir)))
    (unless (file-directory-p dir)
      (signal 'lispm-term-error (list "No such directory" dir)))
    (let ((process-environment (append env process-environment)))
      (lispm-term--check-program (car command) dir))
    (setq buffer (generate-new-buffer name))
    (unwind-protect
        (let ((proc (with-current-buffer buffer
                      (setq default-directory dir)
                      (let ((default-directory dir))
                        (lispm-term--make backend buffer command env)))))
          (unless (processp proc)
            (signal 'lispm-term-error
                    (list "Terminal backend started no process" backend)))
          (set-process-query-on-exit-flag proc nil)
          (process-put proc 'lispm-term-buffer buffer)
          (add-function :around (process-sentinel proc)
                        #'lispm-term--sentinel)
          (with-current-buffer buffer
            (setq lispm-term--backend backend)
            (setq lispm-term--process proc)
            (add-hook 'kill-buffer-hook #'lispm-term--kill-buffer-hook nil t))
          (setq done t)
          buffer)
      (unless done
        (let ((proc (get-buffer-process buffer)))
          (when proc
            (set-process-query-on-exit-flag proc nil)
            (delete-process proc)))
        (kill-buffer buffer)))))

;;; Using a terminal

(defun lispm-term--buffer (buffer)
  "Return the live LispM terminal buffer BUFFER (a buffer or a name).
Signal `lispm-term-error' if it is not one."
  (let ((buf (get-buffer buffer)))
    (unless (and (buffer-live-p buf)
                 (buffer-local-value 'lispm-term--backend buf))
      (signal 'lispm-term-error (list "Not a LispM terminal buffer" buffer)))
    buf))

(defun lispm-term-process (buffer)
  "Return the process of the LispM terminal BUFFER, or nil.
The process may have exited; see `lispm-term-live-p'.  Return nil
if BUFFER is not a live LispM terminal buffer."
  (let ((buf (and buffer (get-buffer buffer))))
    (and (buffer-live-p buf)
         (buffer-local-value 'lispm-term--process buf))))

(defun lispm-term-live-p (buffer)
  "Return non-nil if the process of the LispM terminal BUFFER is running."
  (process-live-p (lispm-term-process buffer)))

(defun lispm-term-backend (buffer)
  "Return the backend symbol of the LispM terminal BUFFER, or nil."
  (let ((buf (and buffer (get-buffer buffer))))
    (and (buffer-live-p buf)
         (buffer-local-value 'lispm-term--backend buf))))

(defun lispm-term-text (buffer)
  "Return the text of the terminal BUFFER as a string without properties.
This is the whole buffer: scrollback and screen."
  (with-current-buffer (lispm-term--buffer buffer)
    (lispm-term--flush lispm-term--backend)
    (save-restriction
      (widen)
      (buffer-substring-no-properties (point-min) (point-max)))))

(defun lispm-term-tail (buffer chars)
  "Return the last CHARS characters of the terminal BUFFER, without properties.
Cheaper than `lispm-term-text' when only the screen's bottom matters."
  (with-current-buffer (lispm-term--buffer buffer)
    (lispm-term--flush lispm-term--backend)
    (save-restriction
      (widen)
      (buffer-substring-no-properties (max (point-min) (- (point-max) chars))
                                      (point-max)))))

(defun lispm-term--live-process (buffer)
  "Return the running process of the LispM terminal BUFFER, or signal."
  (let ((proc (lispm-term-process (lispm-term--buffer buffer))))
    (unless (process-live-p proc)
      (signal 'lispm-term-error (list "Terminal process is not running"
                                      buffer)))
    proc))

(defun lispm-term-send (buffer string)
  "Send STRING to the pty of the terminal BUFFER as it is.
A multibyte STRING is sent encoded as UTF-8.  This writes with
`process-send-string' (not `vterm-send-string', which feeds vterm a
character at a time and blocks Emacs on long strings).  The caller
must sanitise STRING: it reaches the program as typed keys."
  (process-send-string (lispm-term--live-process buffer)
                       (lispm-term--encode string)))

(defun lispm-term-paste (buffer text)
  "Paste TEXT into the terminal BUFFER as one bracketed paste.
Send \"ESC [ 2 0 0 ~\" TEXT \"ESC [ 2 0 1 ~\" in one write, always:
term does not track whether the program asked for bracketed paste,
and the agent CLIs always do.  TEXT is not sanitised here: the
caller must remove what would end the paste early (\"ESC [ 2 0 1 ~\")
or act as keys.  To submit, send \"\\r\" in a separate write 0.3 s
or so later; an immediate one is sometimes lost."
  (process-send-string (lispm-term--live-process buffer)
                       (concat "\e[200~" (lispm-term--encode text) "\e[201~")))

(defun lispm-term--encode (string)
  "Return STRING as UTF-8 bytes, or as it is if it is unibyte."
  (if (multibyte-string-p string)
      (encode-coding-string string 'utf-8-unix)
    string))

(defun lispm-term-add-exit-function (buffer function)
  "Call FUNCTION when the process of the terminal BUFFER exits.
FUNCTION is called with two arguments: the terminal buffer (dead if
it was killed) and the event string the process sentinel received,
such as \"finished\\n\", \"exited abnormally with code 3\\n\" or
\"killed\\n\".  It runs after the backend's own sentinel.  If the
process has already exited, call FUNCTION at once.  Use this rather
than `set-process-sentinel', which would replace the backend's
sentinel and LispM's."
  (let* ((proc (or (lispm-term-process buffer)
                   (signal 'lispm-term-error
                           (list "Not a LispM terminal buffer" buffer))))
         (event (process-get proc 'lispm-term--exit-event)))
    (if event
        (funcall function (process-get proc 'lispm-term-buffer) event)
      (process-put proc 'lispm-term--exit-functions
                   (append (process-get proc 'lispm-term--exit-functions)
                           (list function))))))

(provide 'lispm-term)
;;; lispm-term.el ends here
