;;; lispm-e2e.el --- Helpers for LispM's end-to-end ERT tests  -*- lexical-binding: t; -*-

;;; Commentary:

;; The end-to-end tests run in a batch Emacs that `tests/e2e/inside.py'
;; starts inside a loopback-only network namespace, with the scripted
;; model gateway running and a private HOME seeded for the real CLIs.
;; These helpers wait for terminals and the gateway's log, type into the
;; CLIs' composers, and explain a timeout with what every terminal shows.

;;; Code:

(require 'ert)
(require 'lispm)

(defun lispm-e2e-dir (&rest names)
  "Return the file NAMES under the run's work folder."
  (let ((dir (or (getenv "LISPM_E2E_DIR") (error "LISPM_E2E_DIR is not set"))))
    (if names (expand-file-name (string-join names "/") dir) dir)))

(defun lispm-e2e-project (name)
  "Return the truename of the project folder NAME, with a slash."
  (file-name-as-directory (file-truename (lispm-e2e-dir name))))

(defun lispm-e2e--screens ()
  "Return the text of every LispM terminal and session, for failure messages."
  (mapconcat (lambda (agent)
               (let ((buffer (lispm-actor-home-buffer agent)))
                 (format "--- %s (%s, %s) ---\n%s" (lispm-actor-name agent)
                         (lispm-actor-state agent)
                         (if (lispm-agent-p agent)
                             (and (buffer-live-p buffer)
                                  (process-status (lispm-term-process buffer)))
                           (lispm-actor-activity agent))
                         (cond ((not (buffer-live-p buffer)) "(no buffer)")
                               ((lispm-agent-p agent) (lispm-term-text buffer))
                               (t (with-current-buffer buffer
                                    (buffer-substring-no-properties
                                     (max (point-min) (- (point-max) 3000)) (point-max))))))))
             (lispm-agents) "\n"))

(defun lispm-e2e-wait (predicate seconds what)
  "Wait up to SECONDS for PREDICATE to return non-nil, and return that.
On time-out fail the test, saying WHAT was awaited and showing the terminals."
  (let ((deadline (+ (float-time) seconds)) value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or value
        (let ((print-length nil) (print-level nil))
          (message "LispM e2e: the sidecar's agents: %S"
                   (ignore-errors (lispm-sidecar-request 'lispm/agents nil)))
          (ert-fail (list (format "Timed out after %ss waiting for %s" seconds what)
                          (lispm-e2e--screens)))))))

(defun lispm-e2e-sleep (seconds)
  "Let processes run for SECONDS."
  (let ((deadline (+ (float-time) seconds)))
    (while (< (float-time) deadline)
      (accept-process-output nil 0.05))))

(defconst lispm-e2e-composer-marks
  '((claude . "❯") (codex . "Ask Codex") (holon . "Type a prompt")
    (hermes . "Session:") (openclaw . "connected"))
  "Text each CLI shows once its composer is ready for input.")

(defun lispm-e2e-wait-ready (agent)
  "Wait until AGENT's terminal shows its composer, and a second more."
  (let ((mark (alist-get (lispm-agent-kind agent) lispm-e2e-composer-marks)))
    (lispm-e2e-wait (lambda () (and (buffer-live-p (lispm-agent-buffer agent))
                                    (string-search mark (lispm-term-text
                                                         (lispm-agent-buffer agent)))))
                    60 (format "the composer of %s" (lispm-agent-name agent)))
    ;; Both CLIs take input reliably only about a second after drawing it.
    (lispm-e2e-sleep 1)))

(defun lispm-e2e-wait-activity (agent activity seconds)
  "Wait up to SECONDS until AGENT's activity is ACTIVITY."
  (lispm-e2e-wait (lambda () (eq (lispm-agent-activity agent) activity))
                  seconds (format "%s to be %s" (lispm-agent-name agent) activity)))

(defun lispm-e2e-submit (agent text)
  "Type TEXT into AGENT's composer as a bracketed paste, then press Return."
  (let ((buffer (lispm-agent-buffer agent)))
    (lispm-term-paste buffer text)
    ;; An immediate Return is lost about one time in five by Claude Code.
    (lispm-e2e-sleep 0.4)
    (lispm-term-send buffer "\r")))

(defvar lispm-e2e--first-request 0
  "Requests the gateway logged before the current test began.")

(defun lispm-e2e-begin ()
  "Start a test: from now on, see only the requests the gateway logs anew."
  (setq lispm-e2e--first-request 0)
  (setq lispm-e2e--first-request (length (lispm-e2e-requests))))

(defun lispm-e2e-requests ()
  "Return the requests the gateway logged in this test, as plists, oldest first."
  (let ((file (lispm-e2e-dir "gateway.jsonl")))
    (when (file-exists-p file)
      (with-temp-buffer
        (insert-file-contents file)
        ;; The gateway may be writing its newest line: a line is whole
        ;; once its newline is there.
        (goto-char (point-max))
        (delete-region (line-beginning-position) (point-max))
        (nthcdr lispm-e2e--first-request
                (cl-loop for line in (split-string (buffer-string) "\n" t)
                         collect (json-parse-string line :object-type 'plist
                                                    :null-object nil :false-object nil)))))))

(defun lispm-e2e-main-requests (api &optional prompt-part)
  "Return the gateway's main requests of API whose prompt contains PROMPT-PART."
  (cl-loop for request in (lispm-e2e-requests)
           when (and (equal (plist-get request :api) api)
                     (equal (plist-get request :kind) "main")
                     (or (null prompt-part)
                         (string-search prompt-part (or (plist-get request :prompt) ""))))
           collect request))

(defun lispm-e2e-tool-results (api prompt-part tool)
  "Return the texts of TOOL's results the model of API saw after PROMPT-PART."
  (cl-loop for request in (lispm-e2e-main-requests api prompt-part)
           append (cl-loop for result across (or (plist-get request :tool_results) [])
                           when (string-search tool (or (plist-get result :name) ""))
                           collect (plist-get result :text))))

(defun lispm-e2e-asked (api prompt-part recipient)
  "Wait for the `ask_agent' result the model of API saw after PROMPT-PART.
Return the id of the request it made of RECIPIENT."
  (let ((text (lispm-e2e-wait
               (lambda () (car (lispm-e2e-tool-results api prompt-part "ask_agent")))
               120 (format "the ask_agent result after %S" prompt-part))))
    (should (string-match (format "asked %s, request \\(R[0-9]+\\)" recipient) text))
    (match-string 1 text)))

(defun lispm-e2e-wait-prompt (api prompt seconds)
  "Wait up to SECONDS until the model of API is sent exactly PROMPT."
  (lispm-e2e-wait (lambda () (cl-some (lambda (r) (equal (plist-get r :prompt) prompt))
                                      (lispm-e2e-main-requests api)))
                  seconds (format "the model of %s to be sent %S" api prompt)))

(defun lispm-e2e-served-p (&rest names)
  "Return non-nil if the sidecar serves an agent of each of NAMES."
  (let ((served (mapcar (lambda (agent) (plist-get agent :name))
                        (plist-get (ignore-errors (lispm-sidecar-request 'lispm/agents nil))
                                   :agents))))
    (cl-every (lambda (name) (member name served)) names)))

(defun lispm-e2e-ledger-entry (kind request-id)
  "Return the newest ledger entry of KIND (a string) about REQUEST-ID, or nil."
  (cl-find-if (lambda (e) (and (equal (plist-get e :kind) kind)
                               (equal (plist-get e :request_id) request-id)))
              (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 100)) :entries)))

(defun lispm-e2e-parse-agents (text)
  "Parse TEXT, a `list_agents' result, and return (YOU . AGENTS-PLISTS).
Codex puts a header such as \"Wall time: ...\nOutput:\n\" before the
tool's text; the JSON starts at the first brace."
  (let* ((json (json-parse-string (substring text (string-search "{" text))
                                  :object-type 'plist :array-type 'list))
         ;; Claude Code hands the model the structured content, which may
         ;; arrive wrapped as {"result": ...} text.
         (json (if (plist-member json :result)
                   (json-parse-string (plist-get json :result) :object-type 'plist
                                      :array-type 'list)
                 json)))
    (cons (plist-get json :you) (plist-get json :agents))))

(defun lispm-e2e-cleanup ()
  "Close every agent and stop the sidecar."
  (dolist (agent (lispm-agents))
    (ignore-errors (lispm-agent-close agent)))
  (lispm-e2e-sleep 0.5)
  (lispm-sidecar-stop))

(provide 'lispm-e2e)
;;; lispm-e2e.el ends here
