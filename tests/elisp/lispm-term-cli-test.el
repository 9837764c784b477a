;;; lispm-term-cli-test.el --- Real agent CLIs in LispM terminals  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; Starts the real Claude Code and Codex binaries (from .deps/npm, or
;; $LISPM_NPM_BIN) in vterm and in term, and checks that each shows
;; its composer, renders without stray escape sequences and takes a
;; bracketed paste.  Nothing is submitted and no model is needed.
;;
;; The CLIs must not reach the network, so the tests refuse to run
;; unless loopback is the only network interface.  Run them in a new
;; network namespace (as root):
;;
;;   unshare -n sh -c 'ip link set lo up; exec ${EMACS:-emacs} --batch -Q \
;;     -L elisp -l ert -l tests/elisp/lispm-term-cli-test.el \
;;     -f ert-run-tests-batch-and-exit'

;; pytest-mark: cli

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'lispm-term)

(defconst lispm-term-cli-test--bin
  (or (getenv "LISPM_NPM_BIN")
      (expand-file-name "../../.deps/npm/node_modules/.bin"
                        (file-name-directory
                         (or load-file-name buffer-file-name))))
  "The directory holding the claude and codex executables.")

(defun lispm-term-cli-test--wait (predicate what &optional timeout)
  "Wait for PREDICATE to return non-nil, and return that value.
Fail with WHAT in the message after TIMEOUT seconds (default 30)."
  (let ((deadline (+ (float-time) (or timeout 30)))
        value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or value (ert-fail (list "Timed out waiting for" what)))))

(defun lispm-term-cli-test--settle (seconds)
  "Process output for SECONDS seconds."
  (let ((deadline (+ (float-time) seconds)))
    (while (< (float-time) deadline)
      (accept-process-output nil 0.05))))

(defun lispm-term-cli-test--line-matching (buffer regexp)
  "Wait until a line of terminal BUFFER matches REGEXP; return the text."
  (let (text)
    (lispm-term-cli-test--wait
     (lambda ()
       (setq text (lispm-term-text buffer))
       (cl-some (lambda (line) (string-match-p regexp line))
                (split-string text "\n")))
     (format "a line matching %S; the terminal shows:\n%s" regexp
             (lispm-term-text buffer)))
    text))

(defun lispm-term-cli-test--check-offline ()
  "Fail unless loopback is the only network interface."
  (should (cl-every (lambda (interface) (equal (car interface) "lo"))
                    (network-interface-list t))))

(defun lispm-term-cli-test--check-clean (text)
  "Check that no escape sequence debris is left in TEXT."
  (should-not (string-search "\e" text))
  (should-not (string-search "\a" text))
  (should-not (string-search "]0;" text))
  (should-not (string-search "]2;" text))
  (should-not (string-search "[?" text)))

(defmacro lispm-term-cli-test--with-dirs (spec &rest body)
  "Bind (HOME PROJECT) from SPEC to new temporary directories around BODY."
  (declare (indent 1) (debug ((symbolp symbolp) body)))
  `(let ((,(car spec) (file-truename (make-temp-file "lispm-cli-home" t)))
         (,(cadr spec) (file-truename (make-temp-file "lispm-cli-proj" t))))
     (unwind-protect (progn ,@body)
       (delete-directory ,(car spec) t)
       (delete-directory ,(cadr spec) t))))

(defun lispm-term-cli-test--claude (backend)
  "Start Claude Code with BACKEND and check how it renders."
  (lispm-term-cli-test--check-offline)
  (lispm-term-cli-test--with-dirs (home project)
    (with-temp-file (expand-file-name ".claude.json" home)
      (insert (json-encode
               `((hasCompletedOnboarding . t)
                 (projects . ((,(intern project)
                               . ((hasTrustDialogAccepted . t)))))))))
    (let ((buf (lispm-term-start
                "*lispm-cli-test: claude*"
                (list (expand-file-name "claude" lispm-term-cli-test--bin))
                :directory project
                :environment
                (list (concat "HOME=" home)
                      "ANTHROPIC_BASE_URL=http://127.0.0.1:9"
                      "ANTHROPIC_AUTH_TOKEN=x"
                      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
                      "DISABLE_AUTOUPDATER=1" "DISABLE_TELEMETRY=1"
                      "DISABLE_ERROR_REPORTING=1")
                :backend backend)))
      (unwind-protect
          (progn
            ;; The composer: "❯" and a no-break space.
            (lispm-term-cli-test--line-matching buf "^❯\u00a0")
            ;; Let title updates and the status line arrive.
            (lispm-term-cli-test--settle 1.5)
            (let* ((text (lispm-term-text buf))
                   (lines (split-string text "\n"))
                   (top (cl-find-if (lambda (l) (string-prefix-p "╭" l))
                                    lines))
                   (sides (cl-remove-if-not
                           (lambda (l) (string-prefix-p "│" l)) lines)))
              (lispm-term-cli-test--check-clean text)
              (should (string-search "Welcome back!" text))
              ;; The welcome box is drawn with CHA: its sides line up.
              (should top)
              (should (string-suffix-p "╮" (string-trim-right top)))
              (should (>= (length sides) 5))
              (dolist (line sides)
                (should (string-suffix-p "│" (string-trim-right line)))
                (should (= (string-width (string-trim-right line))
                           (string-width (string-trim-right top))))))
            (lispm-term-paste buf "hello from lispm")
            (lispm-term-cli-test--check-clean
             (lispm-term-cli-test--line-matching
              buf "^❯\u00a0hello from lispm")))
        (kill-buffer buf)))))

(defun lispm-term-cli-test--codex (backend)
  "Start Codex with BACKEND and check how it renders."
  (lispm-term-cli-test--check-offline)
  (lispm-term-cli-test--with-dirs (home project)
    (let ((codex-home (expand-file-name "codex" home)))
      (make-directory codex-home)
      (with-temp-file (expand-file-name "config.toml" codex-home)
        (insert "model = \"fake-model\"
model_provider = \"fake\"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
daemon_auto_start = false
[model_providers.fake]
name = \"fake\"
base_url = \"http://127.0.0.1:9/v1\"
wire_api = \"responses\"
env_key = \"FAKE_OPENAI_KEY\"
"
                (format "[projects.%S]\ntrust_level = \"trusted\"\n" project)))
      (let ((buf (lispm-term-start
                  "*lispm-cli-test: codex*"
                  (list (expand-file-name "codex" lispm-term-cli-test--bin)
                        "--no-daemon")
                  :directory project
                  :environment (list (concat "HOME=" home)
                                     (concat "CODEX_HOME=" codex-home)
                                     "FAKE_OPENAI_KEY=x")
                  :backend backend)))
        (unwind-protect
            (progn
              (lispm-term-cli-test--line-matching
               buf "^› Ask Codex to do anything")
              (lispm-term-cli-test--settle 1.5)
              (let ((text (lispm-term-text buf)))
                (lispm-term-cli-test--check-clean text)
                (should (string-search "OpenAI Codex" text))
                ;; Drawn once: no piled-up redraws.
                (should (= (cl-count-if
                            (lambda (l) (string-search "OpenAI Codex" l))
                            (split-string text "\n"))
                           1)))
              (lispm-term-paste buf "hello from lispm")
              (lispm-term-cli-test--check-clean
               (lispm-term-cli-test--line-matching
                buf "^› hello from lispm")))
          (kill-buffer buf))))))

(ert-deftest lispm-term-cli-test-claude-vterm ()
  "Claude Code renders cleanly in vterm and takes a paste."
  (lispm-term-cli-test--claude 'vterm))

(ert-deftest lispm-term-cli-test-claude-term ()
  "Claude Code renders cleanly in LispM's term and takes a paste."
  (lispm-term-cli-test--claude 'term))

(ert-deftest lispm-term-cli-test-codex-vterm ()
  "Codex renders cleanly in vterm and takes a paste."
  (lispm-term-cli-test--codex 'vterm))

(ert-deftest lispm-term-cli-test-codex-term ()
  "Codex renders cleanly in LispM's term and takes a paste."
  (lispm-term-cli-test--codex 'term))

(provide 'lispm-term-cli-test)
;;; lispm-term-cli-test.el ends here
