;;; lispm-e2e-openclaw-two.el --- Two OpenClaw terminals at once, and the user's config  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_openclaw.py inside a loopback-only network
;; namespace, with real OpenClaw (Gateway and TUI).  The user's
;; `openclaw.json' is JSON5 with comments.  Two OpenClaw terminals are
;; opened at the same moment: both patch the Gateway's config, and both
;; must start and stay.  After both close, the config file is again
;; byte for byte the user's, with none of the backups OpenClaw wrote for
;; LispM's patches and no LispM marker left; the Gateway, which reloaded
;; the restored file, still serves a third terminal, and after that one
;; closes the file is the user's again.

;;; Code:

(require 'lispm-e2e)

(defun lispm-e2e-openclaw-two--config-file ()
  "Return OpenClaw's config file in the test's home."
  (lispm-e2e-dir "home" ".openclaw" "openclaw.json"))

(defun lispm-e2e-openclaw-two--bytes (file)
  "Return FILE's contents as a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defun lispm-e2e-openclaw-two--seed-json5 ()
  "Rewrite the seeded config as JSON5 with comments; return its bytes."
  (let* ((file (lispm-e2e-openclaw-two--config-file))
         (json (string-trim-right (lispm-e2e-openclaw-two--bytes file))))
    (should (string-suffix-p "\n}" json))
    (with-temp-file file
      (set-buffer-multibyte nil)
      (insert "// The user's own OpenClaw config: JSON5, with comments.\n"
              (substring json 0 -2)
              ",  // a trailing comma, as JSON5 allows\n}\n"
              "/* and a closing comment */\n"))
    (lispm-e2e-openclaw-two--bytes file)))

(defun lispm-e2e-openclaw-two--backups ()
  "Return the names of OpenClaw's backups of its config file."
  (directory-files (file-name-directory (lispm-e2e-openclaw-two--config-file))
                   nil "\\`openclaw\\.json\\.bak"))

(defun lispm-e2e-openclaw-two--markers ()
  "Return the names of LispM's OpenClaw markers in its state folder."
  (let ((dir (expand-file-name ".local/state/lispm" (getenv "HOME"))))
    (and (file-directory-p dir)
         (directory-files dir nil "\\`openclaw-\\(?:tool-search\\|config\\)"))))

(defun lispm-e2e-openclaw-two--servers ()
  "Return the number of LispM servers in OpenClaw's config; nil if unreadable.
The file is JSON5 (with comments) when LispM has not patched it."
  (ignore-errors
    (let ((config (json-parse-string
                   (lispm-e2e-openclaw-two--bytes (lispm-e2e-openclaw-two--config-file))
                   :object-type 'alist)))
      (length (alist-get 'servers (alist-get 'mcp config))))))

(defun lispm-e2e-openclaw-two--open-and-wait (count)
  "Open COUNT OpenClaw terminals at the same moment; return them once running."
  (let ((agents (cl-loop repeat count
                         collect (lispm-agent-start 'openclaw (lispm-e2e-project "project")))))
    (dolist (agent agents)
      ;; An agent that could not start leaves the list: no use waiting then.
      (lispm-e2e-wait (lambda () (or (eq (lispm-agent-state agent) 'running)
                                     (not (eq (lispm-agent-get (lispm-agent-name agent))
                                              agent))))
                      120 (format "%s's session on the Gateway" (lispm-agent-name agent)))
      (should (eq (lispm-agent-state agent) 'running)))
    agents))

(defun lispm-e2e-openclaw-two--wait-restored (original)
  "Wait until OpenClaw's config file is ORIGINAL again; check what is left."
  (lispm-e2e-wait (lambda () (equal (lispm-e2e-openclaw-two--bytes
                                     (lispm-e2e-openclaw-two--config-file))
                                    original))
                  60 "the user's openclaw.json, byte for byte")
  (lispm-e2e-wait (lambda () (null (lispm-e2e-openclaw-two--markers)))
                  10 "LispM's markers to go")
  (should (null (lispm-e2e-openclaw-two--backups)))
  (should (= (file-modes (lispm-e2e-openclaw-two--config-file)) #o644)))

(ert-deftest lispm-e2e-openclaw-two-at-once-and-the-config-as-it-was ()
  "Two OpenClaw terminals opened at once both start; closing them restores the config."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((original (lispm-e2e-openclaw-two--seed-json5)))
        (set-file-modes (lispm-e2e-openclaw-two--config-file) #o644)
        (should (null (lispm-e2e-openclaw-two--backups)))
        (let ((agents (lispm-e2e-openclaw-two--open-and-wait 2)))
          (should (equal (mapcar #'lispm-agent-name agents) '("openclaw" "openclaw-2")))
          ;; Both stay in the list, each with its server in the Gateway's config.
          (should (equal (sort (mapcar #'lispm-agent-name (lispm-agents)) #'string<)
                         '("openclaw" "openclaw-2")))
          (should (eql (lispm-e2e-openclaw-two--servers) 2))
          (should (lispm-e2e-served-p "openclaw" "openclaw-2"))
          ;; Both close at the same moment too.
          (mapc #'lispm-agent-close agents))
        (lispm-e2e-openclaw-two--wait-restored original)
        ;; The Gateway took the restored file: a new terminal still works.
        (let ((third (car (lispm-e2e-openclaw-two--open-and-wait 1))))
          (should (eql (lispm-e2e-openclaw-two--servers) 1))
          (lispm-agent-close third))
        (lispm-e2e-openclaw-two--wait-restored original))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-openclaw-two)
;;; lispm-e2e-openclaw-two.el ends here
