;;; lispm-project-rules-test.el --- The project's rules in the own agent's prompt  -*- lexical-binding: t; -*-

;;; Commentary:

;; A project with AGENTS.md at its root and CLAUDE.md in a subfolder,
;; an agent in a folder below: the files found (root first, a link to
;; one read once, a secret file never), the system prompt that holds
;; them (read again when one changes, secrets withheld, cut at the
;; limit), and the session's header that links them.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-test-fixtures)
(require 'lispm-own-agent)

(defun lispm-project-rules-test--write (file text)
  "Write TEXT to FILE, making its folder."
  (make-directory (file-name-directory file) t)
  (with-temp-file file (insert text)))

(defmacro lispm-project-rules-test--with-project (&rest body)
  "Run BODY in a project: `folder' its root, `deep' the agent's folder."
  (declare (indent 0) (debug t))
  `(lispm-test-in-folder
     (let ((deep (file-name-as-directory (expand-file-name "sub/deep" folder)))
           (lispm-project-rules--cache (make-hash-table :test #'equal)))
       (make-directory (expand-file-name ".git" folder))
       (make-directory deep t)
       (lispm-project-rules-test--write (expand-file-name "AGENTS.md" folder)
                                        "Run make check before you say done.\n")
       (lispm-project-rules-test--write (expand-file-name "sub/CLAUDE.md" folder)
                                        "In sub/, tabs are forbidden.\n")
       ,@body)))

(defun lispm-project-rules-test--agent (folder)
  "Return an own agent in FOLDER, without a session."
  (lispm-own-agent--make :name "emacs" :kind 'lispm :folder folder :state 'running))

(ert-deftest lispm-project-rules-test-found-from-the-root-down ()
  "The root's files first, then each folder's down to the agent's."
  (lispm-project-rules-test--with-project
    (lispm-project-rules-test--write (expand-file-name "sub/deep/AGENTS.md" folder) "Deep.\n")
    ;; Above the root: not the project's.
    (should (equal (lispm-project-rules-find deep)
                   (list (expand-file-name "AGENTS.md" folder)
                         (expand-file-name "sub/CLAUDE.md" folder)
                         (expand-file-name "sub/deep/AGENTS.md" folder))))
    (should (equal (lispm-project-rules-root deep) folder))
    ;; CLAUDE.md a link to AGENTS.md: the same file, read once.
    (make-symbolic-link "AGENTS.md" (expand-file-name "CLAUDE.md" folder))
    (should (equal (length (lispm-project-rules-find deep)) 3))
    ;; A folder outside any repository is its own root.
    (let ((lone (make-temp-file "lispm-rules-lone" t)))
      (unwind-protect
          (progn
            (lispm-project-rules-test--write (expand-file-name "AGENTS.md" lone) "Lone.\n")
            (should (equal (lispm-project-rules-find lone)
                           (list (expand-file-name "AGENTS.md" lone)))))
        (delete-directory lone t)))))

(ert-deftest lispm-project-rules-test-in-the-prompt-and-read-again ()
  "The system prompt holds the rules, and a changed file's new text."
  (lispm-project-rules-test--with-project
    (let* ((agent (lispm-project-rules-test--agent deep))
           (prompt (lispm-own-agent-system-prompt agent)))
      (should (string-match-p "## AGENTS.md\n\nRun make check before you say done." prompt))
      (should (string-match-p "## sub/CLAUDE.md\n\nIn sub/, tabs are forbidden." prompt))
      (should (< (string-search "## AGENTS.md" prompt) (string-search "## sub/CLAUDE.md" prompt)))
      ;; Edited during the session: the next request has the new text.
      (lispm-project-rules-test--write (expand-file-name "sub/CLAUDE.md" folder)
                                       "In sub/, spaces are forbidden instead, and more.\n")
      (let ((prompt (lispm-own-agent-system-prompt agent)))
        (should (string-match-p "spaces are forbidden instead" prompt))
        (should-not (string-match-p "tabs are forbidden" prompt)))
      ;; Removed: gone from the prompt; none left: no rules part at all.
      (delete-file (expand-file-name "sub/CLAUDE.md" folder))
      (delete-file (expand-file-name "AGENTS.md" folder))
      (should-not (string-match-p "project's rules" (lispm-own-agent-system-prompt agent))))))

(ert-deftest lispm-project-rules-test-bounded-and-no-secret ()
  "Rules past the limit are cut with a line saying so; secrets are withheld."
  (lispm-project-rules-test--with-project
    (let ((lispm-project-rules-limit 200))
      (lispm-project-rules-test--write (expand-file-name "AGENTS.md" folder)
                                       (make-string 100000 ?r))
      (let ((text (lispm-project-rules-text deep)))
        (should (< (length text) 300))
        (should (string-match-p "the rules were cut here, at 200 characters" text))))
    (cl-letf (((symbol-function 'lispm-secrets-known)
               (lambda () '(("sk-test-0123456789abcdef" . "OPENAI_API_KEY")))))
      (lispm-project-rules-test--write (expand-file-name "AGENTS.md" folder)
                                       "Use the key sk-test-0123456789abcdef for the staging API.\n")
      (let ((text (lispm-project-rules-text deep)))
        (should-not (string-search "sk-test-0123456789abcdef" text))
        (should (string-search "secret withheld" text))))
    ;; A secret file is never read, under a rules name or behind one
    ;; (a link to it); nor is what is no plain file (a FIFO, a device).
    (let ((key (expand-file-name "id_rsa" folder)))
      (lispm-project-rules-test--write key "-----BEGIN OPENSSH PRIVATE KEY-----\n")
      (make-symbolic-link key (expand-file-name "sub/deep/AGENTS.md" folder))
      (make-symbolic-link "/dev/zero" (expand-file-name "sub/deep/CLAUDE.md" folder))
      (cl-letf (((symbol-function 'lispm-secrets-file-p)
                 (lambda (file &rest _) (and (equal (file-truename file) key) "a key file"))))
        (should (equal (lispm-project-rules-find deep)
                       (list (expand-file-name "AGENTS.md" folder)
                             (expand-file-name "sub/CLAUDE.md" folder))))))))

(ert-deftest lispm-project-rules-test-the-header-links-them ()
  "A new session's header links each rules file, named from the agent's folder."
  (lispm-project-rules-test--with-project
    (let* ((lispm-sessions-directory (expand-file-name "sessions/" folder))
           (odd (expand-file-name "sub/deep/we]ird" folder))
           (buffer (lispm-session-create deep "scripted" "emacs" nil nil
                                         (append (lispm-project-rules-find deep)
                                                 (list (concat odd "\nAGENTS.md"))))))
      (unwind-protect
          (with-current-buffer buffer
            (let ((text (buffer-string)))
              (should (string-search
                       (format "#+LISPM_RULES: [[file:%sAGENTS.md][../../AGENTS.md]]\n" folder)
                       text))
              (should (string-search
                       (format "#+LISPM_RULES: [[file:%ssub/CLAUDE.md][../CLAUDE.md]]\n" folder)
                       text))
              ;; A name no link keeps is a value on one line.
              (should (string-search "#+LISPM_RULES: \"" text))
              (should (= (how-many "^#\\+LISPM_RULES: " (point-min) (point-max)) 3))
              (should-not (string-match-p "^AGENTS\\.md" text))))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

;;; lispm-project-rules-test.el ends here
