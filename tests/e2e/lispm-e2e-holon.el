;;; lispm-e2e-holon.el --- A Holon agent talks to Claude Code through LispM  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_holon.py inside a loopback-only network
;; namespace, with the scripted gateway playing both models (the script
;; is in that file) and the Holon stand-in daemon running (`holon' on
;; PATH, `HOLON_HOME' and `HOLON_HTTP_ADDR' set).  Real Claude Code.
;;
;; Holon's model runs `lispm-tool send_message --to claude' in its shell
;; tool and Claude reads the message; Claude asks holon, the request
;; reaches holon through the daemon's prompt endpoint, and holon answers
;; with `lispm-tool reply'.  While holon's terminal is open its skill is
;; in its skills folder and its model's skill catalog; afterwards it is
;; gone from both, and from the registry `lispm-tool' reads.

;;; Code:

(require 'lispm-e2e)
(require 'url)

(defun lispm-e2e-holon--skill (name)
  "Return the file of LispM's skill for the Holon agent NAME."
  (lispm-e2e-dir "holon-home" "agents" name "skills" "lispm" "SKILL.md"))

(defun lispm-e2e-holon--registry ()
  "Return the agent ids in the registry `lispm-tool' reads."
  (let ((file (lispm-e2e-dir "run" "holon-agents.json")))
    (when (file-exists-p file)
      (with-temp-buffer
        (insert-file-contents file)
        (mapcar #'car (alist-get 'agents (json-parse-string (buffer-string)
                                                            :object-type 'alist)))))))

(defun lispm-e2e-holon--registry-ids ()
  "Return the agent ids in the registry as strings."
  (mapcar #'symbol-name (lispm-e2e-holon--registry)))

(defun lispm-e2e-holon--prompts (api)
  "Return the distinct prompts the model of API was sent."
  (seq-uniq (mapcar (lambda (r) (plist-get r :prompt)) (lispm-e2e-main-requests api))))

(defun lispm-e2e-holon--wait-prompt (api prompt seconds)
  "Wait up to SECONDS until the model of API is sent PROMPT."
  (lispm-e2e-wait (lambda () (member prompt (lispm-e2e-holon--prompts api)))
                  seconds (format "the %s model to be sent %S" api prompt)))

(defun lispm-e2e-holon--instructions (prompt-part)
  "Return the instructions of the last Responses request whose prompt has PROMPT-PART."
  (let* ((request (car (last (lispm-e2e-main-requests "responses" prompt-part))))
         (file (plist-get request :body_file)))
    (with-temp-buffer
      (insert-file-contents file)
      (plist-get (json-parse-string (buffer-string) :object-type 'plist) :instructions))))

(defun lispm-e2e-holon--prompt-daemon (agent-id text)
  "Send TEXT to the daemon's AGENT-ID directly, as `holon prompt' would."
  (let ((url-request-method "POST")
        (url-request-extra-headers '(("Content-Type" . "application/json")))
        (url-request-data (encode-coding-string (json-serialize (list :text text)) 'utf-8)))
    (with-current-buffer (url-retrieve-synchronously
                          (format "http://%s/api/control/agents/%s/prompt"
                                  (getenv "HOLON_HTTP_ADDR") agent-id)
                          t t 10)
      (prog1 (buffer-string) (kill-buffer)))))

(defun lispm-e2e-holon--ledger-entry (kind request-id)
  "Return the ledger entry of KIND for REQUEST-ID."
  (seq-find (lambda (e) (and (equal (plist-get e :kind) kind)
                             (equal (plist-get e :request_id) request-id)))
            (append (plist-get (lispm-sidecar-request 'lispm/ledger '(:limit 1000)) :entries)
                    nil)))

(ert-deftest lispm-e2e-holon-talks-with-claude ()
  "Holon sends Claude a message with lispm-tool, and answers Claude's request."
  (lispm-e2e-begin)
  (unwind-protect
      (let ((claude (lispm-agent-start 'claude (lispm-e2e-project "project")))
            (holon (lispm-agent-start 'holon (lispm-e2e-project "project"))))
        (should (equal (lispm-agent-name holon) "holon"))
        (lispm-e2e-wait-ready claude)
        (lispm-e2e-wait-ready holon)
        ;; The daemon knows the agent: it counts as running, and idle.
        (lispm-e2e-wait (lambda () (eq (lispm-agent-display-state holon) 'idle))
                        30 "holon to be idle")
        (should (file-exists-p (lispm-e2e-holon--skill "holon")))
        (should (member "holon" (lispm-e2e-holon--registry-ids)))
        (should (equal (lispm-agent-describe holon)
                       (list :name "holon" :kind "holon" :role "default"
                             :folder (directory-file-name (lispm-e2e-project "project"))
                             :state "idle" :activity "idle")))
        ;; Claude's first prompt: it takes messages from now on.
        (lispm-e2e-submit claude "Hello Claude.")
        (lispm-e2e-wait-activity claude 'idle 60)
        ;; Holon, told in its terminal, runs lispm-tool in its shell tool.
        (lispm-e2e-submit holon "Greet Claude, please.")
        (lispm-e2e-holon--wait-prompt "anthropic" "[Message from holon]\nHello from holon." 120)
        (should (string-search "sent to claude"
                               (car (lispm-e2e-tool-results "responses" "Greet Claude"
                                                            "exec_command"))))
        ;; Holon's model had LispM's skill in its catalog.
        (should (string-search (lispm-e2e-holon--skill "holon")
                               (lispm-e2e-holon--instructions "Greet Claude")))
        (lispm-e2e-wait-activity claude 'idle 60)
        ;; Claude asks holon; the request goes in through the daemon.
        (lispm-e2e-submit claude "Ask Holon what six times seven is.")
        (let* ((text (lispm-e2e-wait
                      (lambda () (car (lispm-e2e-tool-results "anthropic" "Ask Holon"
                                                              "ask_agent")))
                      90 "Claude's ask_agent result"))
               (id (progn (should (string-match "\\`asked holon, request \\(R[0-9]+\\)\\'"
                                                text))
                          (match-string 1 text))))
          (lispm-e2e-holon--wait-prompt
           "responses"
           (format "[Request %s from claude]\nWhat is six times seven?\n\n(claude waits for your answer: give it with your reply tool, request %s.)"
                   id id)
           90)
          (lispm-e2e-holon--wait-prompt
           "anthropic" (format "[Reply from holon to request %s]\nForty-two." id) 120)
          (should (string-search (format "replied to claude, request %s" id)
                                 (car (lispm-e2e-tool-results "responses" "six times seven"
                                                              "exec_command"))))
          ;; Holon's terminal showed the request as its daemon received it.
          (should (string-search (format "› [Request %s from claude]" id)
                                 (lispm-term-text (lispm-agent-buffer holon))))
          (should (equal (plist-get (lispm-e2e-holon--ledger-entry "request" id) :state)
                         "picked_up"))
          (should (equal (plist-get (lispm-e2e-holon--ledger-entry "request" id)
                                    :request_state)
                         "answered")))
        ;; Closing holon's terminal takes its skill and registry entry away.
        (lispm-agent-close holon)
        (lispm-e2e-wait (lambda () (not (file-exists-p
                                         (file-name-directory
                                          (lispm-e2e-holon--skill "holon")))))
                        30 "holon's skill to be removed")
        (should-not (member "holon" (lispm-e2e-holon--registry-ids)))
        ;; The daemon's agent lives on, and its catalog no longer has the skill.
        (should (string-search "\"ok\": true"
                               (lispm-e2e-holon--prompt-daemon "holon" "Anything new?")))
        (lispm-e2e-holon--wait-prompt "responses" "Anything new?" 60)
        (should-not (string-search "skills/lispm"
                                   (lispm-e2e-holon--instructions "Anything new?"))))
    (lispm-e2e-cleanup)))

(ert-deftest lispm-e2e-holon-names-and-skills-per-agent ()
  "Two Holon agents are holon and holon-2, each with its own skill while open."
  (lispm-e2e-begin)
  (unwind-protect
      (let* ((one (lispm-agent-start 'holon (lispm-e2e-project "project")))
             (two (lispm-agent-start 'holon (lispm-e2e-project "project"))))
        (should (equal (mapcar #'lispm-agent-name (list one two)) '("holon" "holon-2")))
        (lispm-e2e-wait-ready one)
        (lispm-e2e-wait-ready two)
        (should (file-exists-p (lispm-e2e-holon--skill "holon")))
        (should (file-exists-p (lispm-e2e-holon--skill "holon-2")))
        (should (equal (sort (lispm-e2e-holon--registry-ids) #'string<) '("holon" "holon-2")))
        (lispm-agent-close two)
        (lispm-e2e-wait (lambda () (not (file-exists-p (lispm-e2e-holon--skill "holon-2"))))
                        30 "holon-2's skill to be removed")
        (should (file-exists-p (lispm-e2e-holon--skill "holon")))
        (should (equal (lispm-e2e-holon--registry-ids) '("holon"))))
    (lispm-e2e-cleanup)))

(provide 'lispm-e2e-holon)
;;; lispm-e2e-holon.el ends here
