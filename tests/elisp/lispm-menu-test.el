;;; lispm-menu-test.el --- Tests of LispM's menu  -*- lexical-binding: t; -*-

;;; Commentary:

;; The menu is opened for real, in a buffer set up for each case, and
;; read back from transient's suffix objects: which keys it shows, which
;; of them are greyed out (inapt), and what each says.  Every entry is a
;; defined command; starting needs a folder (and a kind its CLI, the own
;; agent a model); mentioning code needs a file and a running Claude;
;; the approvals entry counts what waits; the inspector shows only once
;; `lispm-inspect' exists.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-menu)
(require 'lispm-test-fixtures)

(defun lispm-menu-test--entries ()
  "Open `lispm-menu' here; return its LispM entries, then close it.
Each entry is (KEY COMMAND INAPT DESCRIPTION), in the menu's order."
  (unwind-protect
      (progn
        (call-interactively #'lispm-menu)
        (cl-loop for suffix in transient--suffixes
                 for command = (oref suffix command)
                 when (string-prefix-p "lispm" (symbol-name command))
                 collect (list (oref suffix key) command (oref suffix inapt)
                               (substring-no-properties
                                (transient-format-description suffix)))))
    (transient--pre-exit)))

(defun lispm-menu-test--entry (key entries)
  "Return the entry of KEY in ENTRIES, or nil."
  (assoc key entries))

(defmacro lispm-menu-test--in (folder &rest body)
  "Run BODY in a temporary buffer whose `default-directory' is FOLDER.
No project is found, no approval waits, and the registry is empty."
  (declare (indent 1) (debug t))
  `(lispm-test-with-registry
     (let ((project-find-functions nil)
           (lispm-approvals--pending nil)
           (lispm-approvals--counter 0))
       (with-temp-buffer
         (setq default-directory ,folder)
         ,@body))))

(defun lispm-menu-test--folder ()
  "Return a fresh temporary folder, a truename with a slash."
  (file-name-as-directory (file-truename (make-temp-file "lispm-menu-" t))))

;;; The menu and its commands

(ert-deftest lispm-menu-test-prefix-and-commands ()
  (should (commandp 'lispm-menu))
  (should (cl-typep (get 'lispm-menu 'transient--prefix) 'transient-prefix))
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (let ((entries (lispm-menu-test--entries)))
            (should (equal (mapcar #'car (cl-remove-if (lambda (e) (string-match-p "\\`[0-9]\\'" (car e)))
                                                       entries))
                           (append '("s" "a" "h" "l" "p" "L")
                                   (and (fboundp 'lispm-inspect) '("i"))
                                   '("A" "r" "M" "R" "m" "S" "d"))))
            (dolist (entry entries)
              (should (fboundp (nth 1 entry))))
            (should (eq (nth 1 (lispm-menu-test--entry "a" entries)) 'lispm-agent))
            (should (eq (nth 1 (lispm-menu-test--entry "h" entries)) 'lispm-helper-start))
            (should (eq (nth 1 (lispm-menu-test--entry "p" entries)) 'lispm-approvals-show))
            ;; What needs nothing is never greyed out.
            (dolist (key '("l" "p" "L" "A" "r" "R" "S" "d"))
              (should-not (nth 2 (lispm-menu-test--entry key entries))))))
      (delete-directory folder t))))

(ert-deftest lispm-menu-test-one-entry-per-kind ()
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (let ((kinds (cl-remove-if-not (lambda (e) (string-match-p "\\`[0-9]\\'" (car e)))
                                         (lispm-menu-test--entries))))
            (should (= (length kinds) (min 9 (length lispm-agent-kinds))))
            (cl-loop for (kind . title) in lispm-agent-kinds
                     for entry in kinds
                     do (should (eq (nth 1 entry) (intern (format "lispm-%s" kind))))
                     (should (string-prefix-p title (nth 3 entry))))))
      (delete-directory folder t))))

(ert-deftest lispm-menu-test-inspector-only-when-defined ()
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (cl-letf (((symbol-function 'lispm-inspect) nil))
            (should-not (lispm-menu-test--entry "i" (lispm-menu-test--entries))))
          (cl-letf (((symbol-function 'lispm-inspect) (lambda () (interactive))))
            (let ((entry (lispm-menu-test--entry "i" (lispm-menu-test--entries))))
              (should (eq (nth 1 entry) 'lispm-inspect))
              (should-not (nth 2 entry)))))
      (delete-directory folder t))))

;;; Starting needs a folder

(ert-deftest lispm-menu-test-start-in-a-project ()
  (let ((root (lispm-menu-test--folder))
        (elsewhere (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in elsewhere
          (setq-local project-find-functions (list (lambda (_dir) (cons 'transient root))))
          (should (equal (lispm-menu--folder) root))
          (should (equal (lispm-menu--start-heading)
                         (format "Start, in %s" (abbreviate-file-name root))))
          (let ((entries (lispm-menu-test--entries)))
            (dolist (key '("s" "a" "h"))
              (should-not (nth 2 (lispm-menu-test--entry key entries)))
              (should-not (string-match-p "needs" (nth 3 (lispm-menu-test--entry key entries)))))))
      (delete-directory root t)
      (delete-directory elsewhere t))))

(ert-deftest lispm-menu-test-start-in-a-folder-without-project ()
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (should-not (project-current))
          (should (equal (lispm-menu--folder) folder))
          (let ((entries (lispm-menu-test--entries)))
            (dolist (key '("s" "a" "h"))
              (should-not (nth 2 (lispm-menu-test--entry key entries))))))
      (delete-directory folder t))))

(ert-deftest lispm-menu-test-start-needs-a-folder ()
  (let ((gone (lispm-menu-test--folder)))
    (delete-directory gone t)
    (lispm-menu-test--in gone
      (should-not (lispm-menu--folder))
      (should (equal (lispm-menu--start-heading) "Start (needs a folder)"))
      (let ((entries (lispm-menu-test--entries)))
        (dolist (entry entries)
          (when (member (car entry) '("s" "a" "h" "1" "2" "3" "4" "5" "6" "7" "8" "9"))
            (should (nth 2 entry))
            (should (string-suffix-p "(needs a folder)" (nth 3 entry)))))
        ;; What needs no folder stays usable.
        (should-not (nth 2 (lispm-menu-test--entry "l" entries)))))))

(ert-deftest lispm-menu-test-own-agent-needs-a-model ()
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (let ((lispm-models '(("mine" :api chat :base-url "http://127.0.0.1:1/v1" :model "m"))))
            (let ((entry (lispm-menu-test--entry "a" (lispm-menu-test--entries))))
              (should-not (nth 2 entry))
              (should (equal (nth 3 entry) "LispM's own agent (mine)"))))
          (let ((lispm-models nil))
            (let ((entry (lispm-menu-test--entry "a" (lispm-menu-test--entries))))
              (should (nth 2 entry))
              (should (equal (nth 3 entry)
                             "LispM's own agent (needs a model in `lispm-models')")))))
      (delete-directory folder t))))

(ert-deftest lispm-menu-test-kind-needs-its-cli ()
  (let* ((folder (lispm-menu-test--folder))
         (program (lispm-test-write-file folder "bin/claude" "#!/bin/sh\n"))
         (key (number-to-string (1+ (cl-position 'claude lispm-agent-kinds :key #'car)))))
    (set-file-modes program #o755)
    (unwind-protect
        (lispm-menu-test--in folder
          (let ((lispm-claude-program program))
            (let ((entry (lispm-menu-test--entry key (lispm-menu-test--entries))))
              (should (eq (nth 1 entry) 'lispm-claude))
              (should-not (nth 2 entry))
              (should (equal (nth 3 entry) "Claude Code"))))
          (let ((lispm-claude-program (expand-file-name "bin/no-such-claude" folder)))
            (let ((entry (lispm-menu-test--entry key (lispm-menu-test--entries))))
              (should (nth 2 entry))
              (should (equal (nth 3 entry) "Claude Code (needs Claude Code installed)")))))
      (delete-directory folder t))))

;;; Mentioning code needs a file and a Claude

(ert-deftest lispm-menu-test-mention-needs-a-file-and-a-claude ()
  (let* ((folder (lispm-menu-test--folder))
         (file (lispm-test-write-file folder "notes.el" "(one)\n(two)\n(three)\n"))
         (terminal (generate-new-buffer " *lispm-menu-test terminal*")))
    (unwind-protect
        (lispm-menu-test--in folder
          ;; No file.
          (let ((entry (lispm-menu-test--entry "m" (lispm-menu-test--entries))))
            (should (nth 2 entry))
            (should (equal (nth 3 entry)
                           "Mention this line to Claude (needs a buffer visiting a file)")))
          (with-current-buffer (find-file-noselect file)
            ;; A file, no Claude; then a Codex, still no Claude.
            (let ((entry (lispm-menu-test--entry "m" (lispm-menu-test--entries))))
              (should (nth 2 entry))
              (should (string-suffix-p "(needs a running Claude Code)" (nth 3 entry))))
            (lispm-test-add-agent :kind 'codex :folder folder :buffer terminal)
            (should (nth 2 (lispm-menu-test--entry "m" (lispm-menu-test--entries))))
            ;; A Claude with its terminal: the line, then the region.
            (let ((claude (lispm-test-add-agent :kind 'claude :folder folder :buffer terminal))
                  (transient-mark-mode t))
              (deactivate-mark)
              (let ((entry (lispm-menu-test--entry "m" (lispm-menu-test--entries))))
                (should-not (nth 2 entry))
                (should (equal (nth 3 entry) "Mention this line to Claude")))
              (goto-char (point-min))
              (push-mark (line-end-position 2) t t)
              (should (use-region-p))
              (let ((entry (lispm-menu-test--entry "m" (lispm-menu-test--entries))))
                (should-not (nth 2 entry))
                (should (equal (nth 3 entry) "Mention the region to Claude")))
              ;; Its terminal gone, the Claude cannot be mentioned to.
              (setf (lispm-agent-buffer claude) nil)
              (deactivate-mark)
              (should (nth 2 (lispm-menu-test--entry "m" (lispm-menu-test--entries)))))))
      (kill-buffer terminal)
      (lispm-test-remove-folder folder))))

;;; The approvals entry counts

(ert-deftest lispm-menu-test-approvals-count ()
  (let ((folder (lispm-menu-test--folder)))
    (unwind-protect
        (lispm-menu-test--in folder
          (cl-letf (((symbol-function 'lispm-sidecar-notify) #'ignore))
            (save-window-excursion
              (let ((codex (lispm-test-add-agent :kind 'codex :folder folder)))
                (should (equal (nth 3 (lispm-menu-test--entry "p" (lispm-menu-test--entries)))
                               "Approvals (none waits)"))
                (lispm-approvals-request codex 'default 'shell
                                         (list :command "ls" :directory folder) #'ignore)
                (should (equal (nth 3 (lispm-menu-test--entry "p" (lispm-menu-test--entries)))
                               "Approvals (1 waiting)"))
                (let ((id (lispm-approvals-request codex 'default 'eval '(:form "(+ 1 2)")
                                                   #'ignore)))
                  (should (equal (nth 3 (lispm-menu-test--entry "p" (lispm-menu-test--entries)))
                                 "Approvals (2 waiting)"))
                  (lispm-approvals-deny (lispm-approvals-get id) "no")
                  (should (equal (nth 3 (lispm-menu-test--entry "p" (lispm-menu-test--entries)))
                                 "Approvals (1 waiting)")))))))
      (when (get-buffer lispm-approvals-buffer-name)
        (kill-buffer lispm-approvals-buffer-name))
      (delete-directory folder t))))

;;; lispm-menu-test.el ends here
