;;; lispm-apps-test.el --- Tests of the LispM App Store  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The registration form, the discovery of the apps under elisp/apps,
;; the store buffer and its actions, the app pages, and the helpers
;; the apps share: windows that `q' restores and transcripts with the
;; input at the end.

;;; Code:

(require 'ert)
(require 'lispm-apps)
(require 'lispm-roles)

(lispm-apps-load)

(defmacro lispm-apps-test--with-registry (&rest body)
  "Run BODY with the app registry as it is, restoring it afterwards."
  (declare (indent 0))
  `(let ((lispm-apps--apps lispm-apps--apps)
         (lispm-apps--shelves lispm-apps--shelves))
     ,@body))

(defmacro lispm-apps-test--with-one-window (&rest body)
  "Run BODY in a frame with one window, restoring the windows afterwards."
  (declare (indent 0))
  `(save-window-excursion
     (delete-other-windows)
     ,@body))

(defvar lispm-apps-test--opened nil
  "Set by `lispm-apps-test--open' when the test app is opened.")

(defun lispm-apps-test--open ()
  "Open the test app: note that it was opened."
  (interactive)
  (setq lispm-apps-test--opened t))

;;; Registration

(ert-deftest lispm-apps-test-define-app-registers ()
  (lispm-apps-test--with-registry
    (lispm-define-app test-app
      :title "Test"
      :shelf classic-ai
      :summary "An app for the tests."
      :command lispm-apps-test--open)
    (let ((app (lispm-apps-get 'test-app)))
      (should (lispm-app-p app))
      (should (equal (lispm-app-title app) "Test"))
      (should (eq (lispm-app-shelf app) 'classic-ai))
      (should (eq (lispm-app-command app) #'lispm-apps-test--open))
      (should (equal (lispm-app-page app)
                     (expand-file-name "lispm-app-test-app.org" lispm-apps-directory)))
      (should (memq app (lispm-apps-on-shelf 'classic-ai))))))

(ert-deftest lispm-apps-test-define-app-again-replaces-in-place ()
  (lispm-apps-test--with-registry
    (setq lispm-apps--apps nil)
    (lispm-define-app one :title "One" :shelf s :summary "1" :command ignore)
    (lispm-define-app two :title "Two" :shelf s :summary "2" :command ignore)
    (lispm-define-app one :title "One again" :shelf s :summary "1" :command ignore)
    (should (equal (mapcar #'lispm-app-title (lispm-apps-on-shelf 's))
                   '("One again" "Two")))))

(ert-deftest lispm-apps-test-define-app-checks-its-form ()
  (should-error (macroexpand '(lispm-define-app x :title "X" :shelf s :summary "s"))
                :type 'error)
  (should-error (macroexpand '(lispm-define-app x :title "X" :shelf s :summary "s"
                                                :command ignore :colour red))
                :type 'error))

(ert-deftest lispm-apps-test-define-shelf-keeps-order ()
  (lispm-apps-test--with-registry
    (setq lispm-apps--shelves nil)
    (lispm-define-shelf classic-ai "Classic AI" "Old programs.")
    (lispm-define-shelf roles "Roles" "Later.")
    (lispm-define-shelf classic-ai "Classic AI, renamed" "Again.")
    (should (equal lispm-apps--shelves
                   '((classic-ai "Classic AI, renamed" "Again.")
                     (roles "Roles" "Later."))))))

(ert-deftest lispm-apps-test-a-shelf-makes-its-apps-as-it-is-drawn ()
  (lispm-apps-test--with-registry
    (let* ((made 0)
           (entries (lambda ()
                      (cl-incf made)
                      (list (lispm-app--create :id (intern (format "made-%d" made))
                                               :title (format "Made %d" made) :shelf 'made
                                               :summary "Made afresh."
                                               :command #'lispm-apps-test--open)))))
      (setq lispm-apps--shelves nil)
      (lispm-define-shelf made "Made" "Apps that come and go." entries)
      (lispm-define-app fixed :title "Fixed" :shelf made :summary "Registered."
                        :command lispm-apps-test--open)
      ;; The registered apps first, then the shelf's, made each time.
      (should (equal (mapcar #'lispm-app-id (lispm-apps-on-shelf 'made)) '(fixed made-1)))
      (should (equal (mapcar #'lispm-app-id (lispm-apps-on-shelf 'made)) '(fixed made-2)))
      (lispm-apps-test--with-one-window
        (lispm-apps)
        (should (string-search "Made 3" (buffer-string)))
        (lispm-apps-quit)))))

;;; Discovery and pages

(ert-deftest lispm-apps-test-apps-folder-is-on-load-path ()
  (should (member lispm-apps-directory load-path))
  (should (file-directory-p lispm-apps-directory)))

(ert-deftest lispm-apps-test-load-finds-the-classic-apps ()
  (lispm-apps-test--with-registry
    (should (equal (mapcar #'lispm-app-id (lispm-apps-on-shelf 'classic-ai))
                   '(blocks doctor mycin)))
    (dolist (app (lispm-apps-on-shelf 'classic-ai))
      (should (commandp (lispm-app-command app))))))

(ert-deftest lispm-apps-test-every-page-says-what-it-must ()
  (lispm-apps-test--with-registry
    (dolist (app (lispm-apps-on-shelf 'classic-ai))
      (let ((text (with-temp-buffer
                    (insert-file-contents (lispm-app-page app))
                    (buffer-string))))
        (should (string-match-p (concat "^#\\+title: " (regexp-quote (lispm-app-title app)))
                                text))
        (should (string-match-p "^#\\+description: ." text))
        (dolist (heading '("What it does" "Where it comes from" "Who wrote it"
                           "Licence" "What it can't do" "Skill: driving"))
          (should (string-match-p (concat "^\\* " (regexp-quote heading)) text)))))))

;;; The store

(ert-deftest lispm-apps-test-store-lists-shelves-and-apps ()
  (lispm-apps-test--with-one-window
    (let ((lispm-roles-directories nil))
      (lispm-apps)
      (should (equal (buffer-name) lispm-apps-buffer-name))
      (should (derived-mode-p 'lispm-apps-mode))
      (let ((text (buffer-string)))
        (should (string-match-p "^Classic AI$" text))
        (dolist (app (lispm-apps-on-shelf 'classic-ai))
          (should (string-match-p (regexp-quote (lispm-app-title app)) text))
          (should (string-match-p (regexp-quote (lispm-app-summary app)) text))))
      (should (eq (lispm-app-id (lispm-apps--app-at-point)) 'blocks))
      (lispm-apps-next 1)
      (should (eq (lispm-app-id (lispm-apps--app-at-point)) 'doctor))
      (lispm-apps-next 1)
      (should (eq (lispm-app-id (lispm-apps--app-at-point)) 'mycin))
      ;; Then the AI Harness shelf, and the Roles shelf: LispM's own roles, in order.
      (dolist (id '(harness-claude harness-codex harness-hermes harness-openclaw harness-holon
                    role-default role-reviewer role-tester))
        (lispm-apps-next 1)
        (should (eq (lispm-app-id (lispm-apps--app-at-point)) id)))
      (should-error (lispm-apps-next 1) :type 'user-error)
      (lispm-apps-previous 10)
      (should (eq (lispm-app-id (lispm-apps--app-at-point)) 'blocks))
      (should (= 2 (length (window-list))))
      (lispm-apps-quit)
      (should (= 1 (length (window-list)))))))

(ert-deftest lispm-apps-test-store-buttons-open-and-show-the-page ()
  (lispm-apps-test--with-registry
    (lispm-define-app test-app
      :title "Test"
      :shelf classic-ai
      :summary "An app for the tests."
      :command lispm-apps-test--open
      :page "lispm-app-doctor.org")
    (lispm-apps-test--with-one-window
      (setq lispm-apps-test--opened nil)
      (lispm-apps)
      (goto-char (point-min))
      (search-forward "An app for the tests.")
      (search-forward "Open")
      (push-button (1- (point)))
      (should lispm-apps-test--opened)
      (search-forward "Read the page")
      (push-button (1- (point)))
      (should (equal (buffer-name) "*LispM Page: Test*"))
      (should (derived-mode-p 'org-mode))
      (should buffer-read-only)
      (should lispm-apps-page-mode)
      (should (string-match-p "^#\\+title: Doctor" (buffer-string)))
      (lispm-apps-quit)
      (should (equal (buffer-name) lispm-apps-buffer-name)))))

(ert-deftest lispm-apps-test-page-of-app-without-one-is-a-user-error ()
  (should-error (lispm-apps-page (lispm-app--create :title "Nothing"
                                                   :page "/nonexistent/page.org"))
                :type 'user-error))

;;; Windows

(ert-deftest lispm-apps-test-display-and-quit-restore-windows ()
  (lispm-apps-test--with-one-window
    (let ((before (window-buffer))
          (app (get-buffer-create " *lispm-apps-test*")))
      (lispm-apps-display app)
      (should (eq (window-buffer) app))
      (should (= 2 (length (window-list))))
      (with-current-buffer app (lispm-apps-quit))
      (should (= 1 (length (window-list))))
      (should (eq (window-buffer) before))
      (kill-buffer app))))

(ert-deftest lispm-apps-test-display-with-a-pane-above ()
  (lispm-apps-test--with-one-window
    (split-window)
    (let ((before (length (window-list)))
          (app (get-buffer-create " *lispm-apps-test*"))
          (above (get-buffer-create " *lispm-apps-test-above*")))
      (with-current-buffer above (insert "one\ntwo\n"))
      (lispm-apps-display app above)
      (should (eq (window-buffer) app))
      (should (= 2 (length (window-list))))
      (should (eq (window-buffer (window-in-direction 'above)) above))
      (with-current-buffer above (lispm-apps-quit))
      (should (= before (length (window-list))))
      (kill-buffer app)
      (kill-buffer above))))

;;; Transcripts

(ert-deftest lispm-apps-test-transcript-input-and-q ()
  (lispm-apps-test--with-one-window
    (with-temp-buffer
      (switch-to-buffer (current-buffer))
      (insert "History.\n")
      (lispm-apps-open-input)
      (should (= lispm-apps-input-start (point-max)))
      (should-error (progn (goto-char (point-min)) (insert "x")) :type 'text-read-only)
      (goto-char (point-max))
      (insert "  typed  ")
      (should (equal (lispm-apps-take-input) "typed"))
      (should (equal (buffer-substring-no-properties lispm-apps-input-start (point-max))
                     "typed"))
      (should (eq (get-text-property lispm-apps-input-start 'face) 'lispm-apps-input))
      (let ((last-command-event ?q))
        (lispm-apps-quit-or-insert 1))
      (should (string-suffix-p "typedq" (buffer-string))))))

(ert-deftest lispm-apps-test-q-on-history-closes ()
  (lispm-apps-test--with-one-window
    (let ((app (get-buffer-create " *lispm-apps-test*")))
      (with-current-buffer app
        (erase-buffer)
        (insert "History.\n")
        (lispm-apps-open-input))
      (lispm-apps-display app)
      (goto-char (point-min))
      (let ((last-command-event ?q))
        (lispm-apps-quit-or-insert 1))
      (should (= 1 (length (window-list))))
      (should-not (eq (window-buffer) app))
      (kill-buffer app))))

(provide 'lispm-apps-test)
;;; lispm-apps-test.el ends here
