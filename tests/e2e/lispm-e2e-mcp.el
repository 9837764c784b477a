;;; lispm-e2e-mcp.el --- The user's MCP servers, end to end  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/e2e/test_mcp.py inside a loopback-only network
;; namespace, with the scripted gateway as the model.  A real batch
;; Emacs runs LispM's own agent with the real sidecar, whose MCP
;; clients run real servers from npm and PyPI: server-everything,
;; server-filesystem and mcp-server-time, and a hostile one beside
;; them.  Their tools are the agent's: a call that asks shows the
;; server, the tool and the arguments; a read-only one runs at once;
;; forty calls are one run_lisp step; past the limit the schemas are
;; sent once search_tools found them; a project's .mcp.json counts
;; once trusted.

;;; Code:

(require 'lispm-e2e-own)
(require 'lispm-mcp)

(defun lispm-e2e-mcp--bin (variable default name)
  "Return the program NAME in the folder the environment VARIABLE names.
DEFAULT, relative to the repository, is that folder when it is unset."
  (let ((program (expand-file-name
                  name (or (getenv variable)
                           (expand-file-name default (expand-file-name ".." lispm-directory))))))
    (unless (file-executable-p program)
      (error "%s is not installed: run `make install'" program))
    program))

(defun lispm-e2e-mcp-servers ()
  "Return `lispm-mcp-servers' for the run: three real servers and a hostile one."
  `(("everything" :command ,(lispm-e2e-mcp--bin "LISPM_NPM_BIN" ".deps/npm/node_modules/.bin"
                                                "mcp-server-everything")
     :args ("stdio"))
    ("files" :command ,(lispm-e2e-mcp--bin "LISPM_NPM_BIN" ".deps/npm/node_modules/.bin"
                                           "mcp-server-filesystem")
     :args (,(lispm-e2e-project "project")))
    ("time" :command ,(lispm-e2e-mcp--bin "LISPM_MCP_VENV_BIN" ".deps/mcp-venv/bin"
                                          "mcp-server-time")
     :args ("--local-timezone=UTC"))
    ("hostile" :command "sh" :args ("-c" "echo this is not JSON-RPC; sleep 600"))))

(defconst lispm-e2e-mcp--policy
  '((default (read allow) (introspect allow) (message allow)
             (mcp allow ("time/*")) (mcp ask)))
  "The test's policy: the time server's tools run at once, other servers' ask.")

(defmacro lispm-e2e-mcp-with (agent &rest body)
  "Run BODY with AGENT, an own agent in the project, its servers' tools registered."
  (declare (indent 1))
  `(let ((lispm-mcp-servers (lispm-e2e-mcp-servers))
         ;; The hostile server never answers: it fails in 5 s, not 30.
         (lispm-mcp-connect-timeout 5)
         ;; Every tool of the three servers offered, but in the test of the limit.
         (lispm-tools-offer-limit 100))
     (lispm-e2e-own-with (,agent "project" lispm-e2e-mcp--policy)
       (lispm-e2e-mcp-wait-tools)
       ,@body)))

(defun lispm-e2e-mcp-wait-tools ()
  "Sync the servers and wait until their tools are registered."
  (let ((synced nil))
    (lispm-mcp-sync nil (lambda () (setq synced t)))
    (lispm-e2e-wait (lambda () synced) 90 "the MCP servers' tools")))

(defun lispm-e2e-mcp--results (prompt-part)
  "Return the texts of the tool results the model saw after PROMPT-PART, oldest first."
  (mapcar (lambda (result) (plist-get result :text))
          (plist-get (car (last (lispm-e2e-own-requests prompt-part))) :tool_results)))

(ert-deftest lispm-e2e-mcp-servers-give-their-tools ()
  "Each real server's tools are LispM tools; the hostile server has an error and no tools."
  (lispm-e2e-mcp-with agent
    (ignore agent)
    (should (lispm-tool-get "mcp__everything__echo"))
    (should (lispm-tool-get "mcp__time__get_current_time"))
    (should (cl-some (lambda (tool) (equal (lispm-tool-source tool) "files")) lispm-tools))
    (let ((hostile (cdr (assoc "hostile" (lispm-mcp-status)))))
      (should (= (plist-get hostile :tools) 0))
      (should (stringp (plist-get hostile :error))))
    ;; The filesystem server's read tools say they only read.
    (should (eq (lispm-tool-kind (lispm-tool-get "mcp__files__read_text_file")) 'read))
    (should (eq (lispm-tool-kind (lispm-tool-get "mcp__files__write_file")) 'mcp))
    (should (eq (lispm-tool-kind (lispm-tool-get "mcp__everything__echo")) 'read))))

(ert-deftest lispm-e2e-mcp-call-asks-showing-server-tool-arguments ()
  "A call of a tool that may change things asks; the approval names it all.
Nothing is written before the user allows it."
  (lispm-e2e-mcp-with agent
    (let ((file (lispm-e2e-own-file "project" "from-mcp.txt")))
      (lispm-own-agent-send agent "Write a file through MCP")
      (lispm-e2e-wait (lambda () (> (lispm-approvals-count) 0)) 30 "the write's approval")
      (should-not (file-exists-p file))
      (let* ((approval (car (lispm-approvals-pending)))
             (text (plist-get (lispm-approval-target approval) :text)))
        (should (eq (lispm-approval-kind approval) 'mcp))
        (should (string-search "MCP server files, tool write_file" text))
        (should (string-search "\"content\": \"written by the MCP server\"" text))
        (should (string-search "mcp__files__write_file" (lispm-approvals-summary approval)))
        (lispm-approvals-allow approval))
      (lispm-e2e-own-settle agent)
      (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string))
                     "written by the MCP server"))
      (should (string-search "Successfully wrote"
                             (car (lispm-e2e-mcp--results "Write a file through MCP")))))))

(ert-deftest lispm-e2e-mcp-read-only-and-allowed-tools-run-at-once ()
  "The filesystem server's read and the time server's tool run without asking."
  (lispm-e2e-mcp-with agent
    (lispm-e2e-own-send agent "Read notes.el through MCP and tell the time")
    (should (= (lispm-approvals-count) 0))
    (let ((results (lispm-e2e-mcp--results "Read notes.el through MCP")))
      (should (string-search "notes" (nth 0 results)))
      (should (string-search "UTC" (nth 1 results))))))

(ert-deftest lispm-e2e-mcp-forty-calls-one-step ()
  "A run_lisp program calls the echo forty times: one step, each call under the policy."
  (let ((lispm-e2e-mcp--policy '((default (read allow) (introspect allow)
                                           (mcp allow ("everything/echo")) (mcp ask)))))
    (lispm-e2e-mcp-with agent
      (lispm-e2e-own-send agent "Echo forty times in one program")
      (should (= (lispm-approvals-count) 0))
      (should (equal (car (lispm-e2e-mcp--results "Echo forty times in one program"))
                     "Value: 40"))
      ;; Two requests: the program's and the answer's.
      (should (= (length (lispm-e2e-own-requests "Echo forty times in one program")) 2)))))

(ert-deftest lispm-e2e-mcp-schemas-offered-once-found ()
  "Past the limit no server schema is sent, until search_tools finds the echo."
  (lispm-e2e-mcp-with agent
    (let ((lispm-tools-offer-limit 3))
      (lispm-e2e-own-send agent "Find the echo tool and use it")
      (let ((bodies (mapcar #'lispm-e2e-own-body
                            (lispm-e2e-own-requests "Find the echo tool and use it"))))
        (should (= (length bodies) 3))
        (should-not (string-search "mcp__" (nth 0 bodies)))
        (should (string-search "\"name\":\"mcp__everything__echo\"" (nth 1 bodies)))
        (should-not (string-search "mcp__time__" (nth 1 bodies))))
      (should (string-search "Echo: found"
                             (nth 1 (lispm-e2e-mcp--results "Find the echo tool")))))))

(ert-deftest lispm-e2e-mcp-a-dead-server-comes-back ()
  "A server killed between calls is started again on the next sync; the call goes through."
  (lispm-e2e-mcp-with agent
    ;; [m]: the pattern does not match the shell that runs pgrep.
    (let ((pids (split-string (shell-command-to-string "pgrep -f '[m]cp-venv/bin/mcp-server-time'")
                              nil t)))
      (should pids)
      (dolist (pid pids) (signal-process (string-to-number pid) 'KILL)))
    (lispm-e2e-wait (lambda () (lispm-tool-get "mcp__time__get_current_time")) 30
                    "the time server's tools again")
    (lispm-e2e-own-send agent "Read notes.el through MCP and tell the time")
    (should (string-search "UTC" (nth 1 (lispm-e2e-mcp--results "Read notes.el through MCP"))))))

(provide 'lispm-e2e-mcp)
;;; lispm-e2e-mcp.el ends here
