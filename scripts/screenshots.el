;;; screenshots.el --- Draw the README's inspector and session pictures  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by hand, from the checkout's root, as the README says:
;;
;;   `emacs --batch -Q -L elisp -L elisp/apps -l scripts/screenshots.el'
;;
;; It writes docs/screenshots/inspector.svg and session.svg.  No model
;; is asked: the scene is set up through LispM's own functions, with
;; the real sidecar (started from the checkout's .venv) and a model
;; that is never called.  In a temporary project, the own agent
;; `emacs' gets a helper `tester' with a shell command waiting for
;; approval, which the inspector shows; `emacs''s session gets a turn
;; written as a delivered request, with a call, its result, a stop and
;; an approval awaited.

;;; Code:

(require 'lispm)
(require 'lispm-own-agent)
(require 'lispm-helpers)
(require 'lispm-inspect)
(require 'lispm-approvals)
(load (expand-file-name "screenshot.el" (file-name-directory load-file-name)) nil t)
(declare-function lispm-screenshot "screenshot" (buffer file &optional columns lines start))

(defconst lispm-screenshots-directory
  (expand-file-name "../docs/screenshots/" (file-name-directory load-file-name))
  "Where the pictures go.")

(defun lispm-screenshots--until (predicate seconds)
  "Wait for PREDICATE to give non-nil, at most SECONDS; return its value."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    value))

(defun lispm-screenshots--inspector (folder)
  "Make an own agent in FOLDER, its helper `tester', and inspect that.
Return (AGENT . INSPECTOR-BUFFER)."
  (let* ((emacs (lispm-agent folder))
         (tester (lispm-helper-make 'tester folder emacs))
         (buffer (progn
                   (lispm-approvals-request
                    tester 'tester 'shell (list :command "make test-fast" :directory folder)
                    #'ignore "run_shell make test-fast")
                   (lispm-inspect tester))))
    (unless (lispm-screenshots--until
             (lambda ()
               (lispm-inspect-redraw buffer)
               (with-current-buffer buffer
                 (and (plist-member lispm-inspect--ledger :entries)
                      (not (plist-get lispm-inspect--ledger :loading)))))
             10)
      (message "The ledger did not answer within 10 s"))
    ;; Paths as on a user's machine, only as drawn: the files opened
    ;; meanwhile keep their true names.
    (let ((directory-abbrev-alist
           `((,(concat "\\`" (regexp-quote (file-name-directory (directory-file-name folder))))
              . "~/")
             (,(concat "\\`" (regexp-quote (expand-file-name "../" lispm-directory)))
              . "~/src/lispm/"))))
      (lispm-inspect-redraw buffer))
    (cons emacs buffer)))

(defun lispm-screenshots--session (emacs folder)
  "Write a turn of EMACS, an own agent in FOLDER, to its session.
Return the session's buffer."
  (let ((buffer (lispm-own-agent-buffer emacs))
        (notes (expand-file-name "notes.el" folder)))
    ;; A live agent's name is a presentation: register one, never started.
    (lispm-agents-register 'claude folder "claude")
    (lispm-session-begin-turn
     buffer
     (format "[Request R1 from claude] notes-parse-header drops the last \
header line: see [[file:%s::9][notes.el:9]]." notes))
    (lispm-session-insert-call
     buffer '(:id "call_1" :name "read_file" :arguments "{\"path\": \"notes.el\"}"))
    (lispm-session-insert-result
     buffer "call_1" "(defun notes-parse-header (lines)\n  (seq-take lines (1- (length lines))))")
    (lispm-session-insert-call
     buffer '(:id "call_2" :name "run_shell" :arguments "{\"command\": \"make test\"}"))
    (lispm-session-insert-result buffer "call_2" "Exit 2.\nmake: *** [Makefile:9: test] Error 2")
    (lispm-session-insert-note buffer "Stopped at tool-error: run_shell: make test failed")
    (lispm-session-insert-call
     buffer '(:id "call_3" :name "edit_file"
                  :arguments "{\"path\": \"notes.el\", \"old\": \"(1- (length lines))\"}"))
    (lispm-session-insert-approval buffer "call_3" "edit_file notes.el")
    (with-current-buffer buffer (org-fold-hide-drawer-all))
    buffer))

(let* ((root (file-name-as-directory (file-truename (make-temp-file "lispm-shots-" t))))
       (folder (expand-file-name "project/" root))
       (lispm-sessions-directory (expand-file-name "sessions/" root))
       (lispm-ledger-file (expand-file-name "ledger.sqlite3" root))
       (lispm-models '(("claude" :api anthropic :base-url "http://127.0.0.1:9"
                        :model "claude-sonnet-4-5" :window 200000))))
  (make-directory folder t)
  (with-temp-file (expand-file-name "notes.el" folder)
    (insert ";;; notes.el --- Notes  -*- lexical-binding: t; -*-\n"))
  (unwind-protect
      (pcase-let ((`(,emacs . ,inspector) (lispm-screenshots--inspector folder)))
        (lispm-screenshot inspector (expand-file-name "inspector.svg" lispm-screenshots-directory))
        (let ((session (lispm-screenshots--session emacs folder)))
          (lispm-screenshot session (expand-file-name "session.svg" lispm-screenshots-directory)
                            100 34 (with-current-buffer session
                                     (goto-char (point-min))
                                     (re-search-forward "^\\* Turn 1")
                                     (line-beginning-position)))))
    (lispm-sessions-wait-for-commits 10)
    (delete-directory root t)))

;;; screenshots.el ends here
