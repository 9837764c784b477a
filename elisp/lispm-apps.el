;;; lispm-apps.el --- The LispM App Store  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: games, tools

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; `M-x lispm-apps' opens the App Store: shelves of apps, each with a
;; title, a one-line summary and two actions, open and read the page.
;;
;; An app is a file `lispm-app-ID.el' in the `apps' folder next to this
;; file, with its page `lispm-app-ID.org' beside it.  The file
;; registers the app with one declarative form:
;;
;;   (lispm-define-app doctor
;;     :title "Doctor"
;;     :shelf classic-ai
;;     :summary "An ELIZA-style psychotherapist (1966)."
;;     :command lispm-doctor)
;;
;; The store loads every `lispm-app-*.el' in that folder when it opens,
;; so adding an app means adding its two files.  A shelf may also make
;; its apps as the store is drawn: the Roles shelf has one for each
;; role (`lispm-roles-list'), whose page is the role's Org file and
;; which opens a helper of that role in the current project.  The page is an Org
;; file that says what the app does, where it comes from, who wrote
;; it, under which licence, and what it cannot do; it doubles as a
;; skill that teaches an agent to drive the app.
;;
;; The file also holds what the apps share: a window of their own that
;; `q' closes, restoring the windows as they were, and a transcript
;; whose history is read-only with the user's input at its end.

;;; Code:

(require 'lispm-base)
(require 'cl-lib)
(require 'subr-x)

(defconst lispm-apps-directory (expand-file-name "apps" lispm-directory)
  "The folder holding the app files and their pages.")

(add-to-list 'load-path lispm-apps-directory)

(defgroup lispm-apps nil
  "The LispM App Store and its apps."
  :group 'lispm
  :prefix "lispm-apps-")

(defface lispm-apps-heading '((t :inherit bold :height 1.2))
  "Face for the title of the App Store and of its shelves."
  :group 'lispm-apps)

(defface lispm-apps-title '((t :inherit bold))
  "Face for an app's title in the App Store."
  :group 'lispm-apps)

(defface lispm-apps-input '((t :inherit font-lock-keyword-face))
  "Face for what the user typed in an app's transcript."
  :group 'lispm-apps)

;;; Shelves and apps

(cl-defstruct (lispm-app (:constructor lispm-app--create)
                         (:copier nil))
  "An app in the App Store."
  (id nil :documentation "A symbol naming the app.")
  (title nil :documentation "The app's name as shown in the store.")
  (shelf nil :documentation "The id of the shelf the app stands on.")
  (summary nil :documentation "One line saying what the app does.")
  (command nil :documentation "The command that opens the app.")
  (page nil :documentation "The absolute file name of the app's page."))

(defvar lispm-apps--shelves nil
  "The shelves, in display order: a list of (ID TITLE DESCRIPTION).")

(defvar lispm-apps--apps nil
  "The registered apps in registration order: an alist (ID . `lispm-app').")

(defun lispm-apps--put-last (alist key value)
  "Return ALIST with KEY bound to VALUE, in place if KEY is present.
A new KEY goes at the end, so that display order is definition order."
  (if (assq key alist)
      (mapcar (lambda (cell) (if (eq (car cell) key) (cons key value) cell))
              alist)
    (append alist (list (cons key value)))))

(defmacro lispm-define-shelf (id title description &optional entries)
  "Define the App Store shelf ID, shown as TITLE with DESCRIPTION below it.
Shelves appear in the order of their definitions.  ENTRIES, if
non-nil, is a function of no arguments that returns more apps for the
shelf, `lispm-app's made afresh each time the store is drawn: for a
shelf whose apps come and go, such as the roles."
  (declare (indent 1))
  `(setq lispm-apps--shelves
         (lispm-apps--put-last lispm-apps--shelves ',id
                               (append (list ,title ,description)
                                       (and ,entries (list ,entries))))))

(defun lispm-apps--check-definition (id props)
  "Signal an error unless PROPS is a valid definition of app ID."
  (let ((allowed '(:title :shelf :summary :command :page)))
    (cl-loop for (key _value) on props by #'cddr
             unless (memq key allowed)
             do (error "App %s: unknown keyword %S" id key))
    (dolist (key '(:title :shelf :summary :command))
      (unless (plist-get props key)
        (error "App %s: missing %S" id key)))))

(defmacro lispm-define-app (id &rest props)
  "Register the app ID in the App Store.
PROPS is a property list.  Required: `:title' (a string), `:shelf'
\(a shelf id, unquoted), `:summary' (one line) and `:command' (the
command that opens the app, unquoted).  Optional: `:page', the
app's Org page; it defaults to \"lispm-app-ID.org\" in
`lispm-apps-directory'.  Defining ID again replaces it in place."
  (declare (indent 1))
  (lispm-apps--check-definition id props)
  `(lispm-apps--register
    (lispm-app--create
     :id ',id
     :title ,(plist-get props :title)
     :shelf ',(plist-get props :shelf)
     :summary ,(plist-get props :summary)
     :command #',(plist-get props :command)
     :page (expand-file-name ,(or (plist-get props :page)
                                  (format "lispm-app-%s.org" id))
                             lispm-apps-directory))))

(defun lispm-apps--register (app)
  "Add APP to the store, replacing an app with the same id."
  (setq lispm-apps--apps
        (lispm-apps--put-last lispm-apps--apps (lispm-app-id app) app))
  app)

(defun lispm-apps-get (id)
  "Return the registered app whose id is ID, or nil."
  (alist-get id lispm-apps--apps))

(defun lispm-apps-on-shelf (shelf)
  "Return the apps standing on SHELF: the registered ones, in registration order.
Then those of the shelf's ENTRIES function (`lispm-define-shelf')."
  (append (cl-remove-if-not (lambda (app) (eq (lispm-app-shelf app) shelf))
                            (mapcar #'cdr lispm-apps--apps))
          (when-let* ((entries (nth 3 (assq shelf lispm-apps--shelves))))
            (funcall entries))))

(lispm-define-shelf classic-ai
  "Classic AI"
  "Programs from the first decades of AI research, running again in Emacs.")

(lispm-define-shelf ai-harness
  "AI Harness"
  "The agents LispM runs: whether each is installed here, how to install and start it.")

;;; The Roles shelf

(declare-function lispm-helper-start "lispm-helpers" (role &optional folder display))
(declare-function lispm-roles-list "lispm-roles" (&optional folder))
(declare-function lispm-role-name "lispm-roles" (role))
(declare-function lispm-role-description "lispm-roles" (role))
(declare-function lispm-role-file "lispm-roles" (role))
(declare-function lispm-agents-default-folder "lispm-agents" ())

(defun lispm-apps--role-apps ()
  "Return an app for each role an agent in the current project can have.
Its page is the role's Org file (what it does, its prompt, its tools
and its policy); opening it starts an own agent of that role in the
current project (`lispm-helper-start')."
  (require 'lispm-helpers)
  (mapcar (lambda (role)
            (let ((name (lispm-role-name role)))
              (lispm-app--create
               :id (intern (format "role-%s" name))
               :title (symbol-name name)
               :shelf 'roles
               :summary (lispm-role-description role)
               :command (lambda ()
                          (interactive)
                          (lispm-helper-start name nil t))
               :page (lispm-role-file role))))
          (lispm-roles-list (lispm-agents-default-folder))))

(lispm-define-shelf roles
  "Roles"
  "LispM's own agents with a role: open one to start it in the current project."
  #'lispm-apps--role-apps)

(defun lispm-apps-load ()
  "Load every app file in `lispm-apps-directory'.
An app that fails to load is reported as a warning and left out."
  (dolist (file (directory-files lispm-apps-directory nil
                                 "\\`lispm-app-[^.]+\\.el\\'"))
    (let ((feature (intern (file-name-sans-extension file))))
      (condition-case err
          (require feature)
        (error
         (display-warning 'lispm (format "App %s did not load: %s" feature
                                         (error-message-string err))))))))

;;; Windows of their own

(defvar-local lispm-apps--windows nil
  "The window configuration to restore when this app is closed.")
(put 'lispm-apps--windows 'permanent-local t)

(defun lispm-apps-display (buffer &optional above)
  "Show BUFFER in a window of its own and select that window.
With ABOVE, a buffer, the app takes the whole frame: ABOVE is shown
in a window above BUFFER's, fitted to its text.  `lispm-apps-quit' in
either buffer then restores the windows as they were before.  If
BUFFER is already shown, just select its window."
  (if-let* ((window (get-buffer-window buffer)))
      (select-window window)
    (let ((windows (current-window-configuration)))
      (pop-to-buffer buffer '((display-buffer-reuse-window
                               display-buffer-pop-up-window)
                              (inhibit-same-window . t)))
      (when above
        (delete-other-windows)
        (let ((top (split-window nil nil 'above)))
          (set-window-buffer top above)
          (fit-window-to-buffer top)))
      (dolist (b (delq nil (list buffer above)))
        (with-current-buffer b (setq lispm-apps--windows windows))))))

(defun lispm-apps-quit ()
  "Close the current app's window and restore the windows as they were."
  (interactive)
  (let ((windows lispm-apps--windows))
    (setq lispm-apps--windows nil)
    (if (window-configuration-p windows)
        (set-window-configuration windows)
      (quit-window))))

(defun lispm-apps-quit-or-insert (n)
  "Close the app where nothing can be typed, else insert the key N times.
In a read-only buffer, or with point on read-only history, this is
`lispm-apps-quit'; in the input it types the character as usual."
  (interactive "p")
  (if (or buffer-read-only (get-text-property (point) 'read-only))
      (lispm-apps-quit)
    (self-insert-command n)))

;;; Transcripts with input at the end

(defvar-local lispm-apps-input-start nil
  "The marker where the user's input begins, at the end of the transcript.")

(defun lispm-apps-open-input ()
  "Make the whole transcript read-only and start a new input at its end."
  (let ((inhibit-read-only t))
    (add-text-properties (point-min) (point-max)
                         '(read-only t front-sticky t rear-nonsticky t)))
  (setq lispm-apps-input-start (copy-marker (point-max)))
  (goto-char (point-max)))

(defun lispm-apps-take-input ()
  "Return the user's input, trimmed, leaving point at the end of the buffer.
Non-empty input is replaced in the buffer by its trimmed text, shown
in the face `lispm-apps-input'."
  (goto-char (point-max))
  (let ((input (string-trim (buffer-substring-no-properties
                             lispm-apps-input-start (point-max)))))
    (unless (string-empty-p input)
      (delete-region lispm-apps-input-start (point-max))
      (insert (propertize input 'face 'lispm-apps-input
                          'font-lock-face 'lispm-apps-input)))
    input))

;;; The store

(defconst lispm-apps-buffer-name "*LispM Apps*"
  "The name of the App Store's buffer.")

(defun lispm-apps--app-at-point ()
  "Return the app on the current line of the store, or signal a user error."
  (or (get-text-property (line-beginning-position) 'lispm-app)
      (user-error "No app on this line")))

(defun lispm-apps--insert-app (app)
  "Insert the store's line for APP."
  (let ((start (point)))
    (insert "  " (propertize (string-pad (concat (lispm-app-title app) " ") 10)
                             'face 'lispm-apps-title)
            (lispm-app-summary app) "\n      ")
    (insert-button "Open" 'action (lambda (_) (lispm-apps-open app))
                   'follow-link t 'help-echo "Open this app")
    (insert "  ")
    (insert-button "Read the page" 'action (lambda (_) (lispm-apps-page app))
                   'follow-link t 'help-echo "Read what this app is")
    (insert "\n")
    (put-text-property start (point) 'lispm-app app)))

(defun lispm-apps--insert-shelf (shelf)
  "Insert SHELF, a (ID TITLE DESCRIPTION) list, with its apps."
  (pcase-let ((`(,id ,title ,description) shelf))
    (insert (propertize title 'face 'lispm-apps-heading) "\n"
            (propertize description 'face 'shadow) "\n\n")
    (mapc #'lispm-apps--insert-app (lispm-apps-on-shelf id))
    (insert "\n")))

(defun lispm-apps--render (&rest _)
  "Load the apps and draw the store in the current buffer."
  (lispm-apps-load)
  (let ((inhibit-read-only t)
        (line (line-number-at-pos)))
    (erase-buffer)
    (insert (propertize "LispM App Store" 'face 'lispm-apps-heading) "\n\n")
    (mapc #'lispm-apps--insert-shelf lispm-apps--shelves)
    (insert (propertize "RET open  i read the page  n/p next/previous  \
g refresh  q close" 'face 'shadow))
    (goto-char (point-min))
    (forward-line (1- line))))

(defun lispm-apps--app-starts ()
  "Return the positions where the store's app entries begin, in order."
  (let ((pos (point-min)) starts)
    (while (setq pos (text-property-not-all pos (point-max) 'lispm-app nil))
      (push pos starts)
      (setq pos (next-single-property-change pos 'lispm-app nil (point-max))))
    (nreverse starts)))

(defun lispm-apps-next (n)
  "Move to the next app in the store; with N, move N apps (back if negative)."
  (interactive "p" lispm-apps-mode)
  (let* ((here (point))
         (starts (lispm-apps--app-starts))
         (target (cond ((> n 0) (nth (1- n) (cl-remove-if-not
                                             (lambda (p) (> p here)) starts)))
                       ((< n 0) (nth (- -1 n) (nreverse (cl-remove-if-not
                                                         (lambda (p) (< p here))
                                                         starts))))
                       (t here))))
    (if target
        (goto-char target)
      (user-error "No more apps"))))

(defun lispm-apps-previous (n)
  "Move to the previous app in the store; with N, move N apps back."
  (interactive "p" lispm-apps-mode)
  (lispm-apps-next (- n)))

(defun lispm-apps-open (app)
  "Open APP, by default the app on the current line of the store."
  (interactive (list (lispm-apps--app-at-point)) lispm-apps-mode)
  (call-interactively (lispm-app-command app)))

(defvar-keymap lispm-apps-page-mode-map
  :doc "Keys of an app's page."
  "q" #'lispm-apps-quit)

(define-minor-mode lispm-apps-page-mode
  "Minor mode for reading an app's page: \\<lispm-apps-page-mode-map>\
\\[lispm-apps-quit] closes it."
  :lighter " Page")

(defun lispm-apps-page (app)
  "Show the page of APP, by default the app on the current line of the store."
  (interactive (list (lispm-apps--app-at-point)) lispm-apps-mode)
  (let ((file (lispm-app-page app)))
    (unless (file-readable-p file)
      (user-error "The page of %s is missing: %s" (lispm-app-title app) file))
    (let ((buffer (get-buffer-create (format "*LispM Page: %s*"
                                             (lispm-app-title app)))))
      (with-current-buffer buffer
        (let ((inhibit-read-only t))
          (erase-buffer)
          (insert-file-contents file)
          (org-mode)
          (setq buffer-read-only t)
          (lispm-apps-page-mode)))
      (lispm-apps-display buffer))))

(defvar-keymap lispm-apps-mode-map
  :doc "Keys of the App Store."
  :parent special-mode-map
  "RET" #'lispm-apps-open
  "o" #'lispm-apps-open
  "i" #'lispm-apps-page
  "n" #'lispm-apps-next
  "p" #'lispm-apps-previous
  "TAB" #'forward-button
  "<backtab>" #'backward-button
  "q" #'lispm-apps-quit)

(define-derived-mode lispm-apps-mode special-mode "LispM Apps"
  "Major mode of the LispM App Store.

\\{lispm-apps-mode-map}"
  (setq-local revert-buffer-function #'lispm-apps--render)
  (setq truncate-lines t))

;;;###autoload
(defun lispm-apps ()
  "Open the LispM App Store: shelves of apps to open or read about."
  (interactive)
  (let ((buffer (get-buffer-create lispm-apps-buffer-name))
        (directory default-directory))
    (with-current-buffer buffer
      (lispm-apps-mode)
      ;; The current project's, for the roles and the helpers they start.
      (setq default-directory directory)
      (lispm-apps--render)
      (goto-char (or (car (lispm-apps--app-starts)) (point-min))))
    (lispm-apps-display buffer)))

(provide 'lispm-apps)
;;; lispm-apps.el ends here
