;;; lispm-mcp-test.el --- The user's MCP servers as LispM's tools  -*- lexical-binding: t; -*-

;;; Commentary:

;; Emacs's half of the MCP clients, against the sidecar's answers as
;; recorded (the sidecar's half runs real servers in
;; tests/python/test_mcp_clients.py, and the whole in
;; tests/e2e/lispm-e2e-mcp.el): the configuration expanded, a
;; project's `.mcp.json' only once trusted, each server tool a LispM
;; tool with the server's schema and a kind from its annotations, the
;; policy by SERVER/TOOL, the approval's text, arguments checked and
;; sent exactly, and the schemas offered only once found past the
;; limit.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-test-fixtures)
(require 'lispm-own-agent)
(require 'lispm-mcp)

(defconst lispm-mcp-test--listed
  '((:name "everything"
     :tools [(:name "echo" :description "Echoes back the input."
              :input_schema_json "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\",\"description\":\"Message to echo\"}},\"required\":[\"message\"],\"additionalProperties\":false}")
             (:name "get-sum" :description "Adds two numbers.\u0007"
              :annotations (:readOnlyHint t)
              :input_schema_json "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},\"b\":{\"type\":\"number\"},\"opts\":{\"type\":\"object\"},\"tags\":{\"type\":\"array\"}},\"required\":[\"a\",\"b\"]}")])
    (:name "broken" :tools [] :error "the server did not answer in 30 s"))
  "What the sidecar answered `lispm/mcp-servers', recorded.")

(defvar lispm-mcp-test--sent nil
  "The requests the played sidecar was asked, newest first: (METHOD . PARAMS).")

(defun lispm-mcp-test--request (method params &rest keys)
  "Answer METHOD with PARAMS as the sidecar would; KEYS as its callbacks."
  (push (cons method params) lispm-mcp-test--sent)
  (let ((success (plist-get keys :on-success)))
    (pcase method
      ('lispm/mcp-servers (funcall success (list :servers (vconcat lispm-mcp-test--listed))))
      ('lispm/mcp-call
       (funcall success
                (if (equal (plist-get params :tool) "echo")
                    (list :text (concat "Echo: " (gethash "message" (plist-get params :arguments)))
                          :is_error :json-false)
                  (list :text "boom" :is_error t))))
      (_ (funcall (plist-get keys :on-error) "no such method")))))

(defmacro lispm-mcp-test--with-servers (servers &rest body)
  "Run BODY with SERVERS as `lispm-mcp-servers', against the played sidecar.
`folder' is a fresh folder and `agent' an actor working in it."
  (declare (indent 1) (debug t))
  `(lispm-test-in-folder
     (let ((lispm-mcp-servers ,servers)
           (lispm-mcp--folders nil) (lispm-mcp--status nil) (lispm-mcp--told nil)
           (lispm-trust-file (expand-file-name "trust.eld" folder))
           (lispm-mcp-test--sent nil)
           (lispm-tools lispm-tools)
           (lispm-tools--found (make-hash-table :test #'eq :weakness 'key))
           (sent nil))
       (ignore sent)
       (lispm-test-with-played-sidecar (#'lispm-mcp-test--request sent)
         (lispm-test-with-registry
           (let ((agent (lispm-test-add-actor :folder folder)))
             (unwind-protect (progn ,@body)
               (lispm-tools-remove #'lispm-tool-source))))))))

(ert-deftest lispm-mcp-test-configuration-expanded ()
  "${VAR} and defaults come from the environment; an unset one is the server's error."
  (let ((process-environment (append '("LISPM_MCP_TEST_TOKEN=t0ken" "LISPM_MCP_TEST_EMPTY=")
                                     process-environment)))
    (should (equal (plist-get (lispm-mcp--spec "gh" '(:url "https://example.com/${LISPM_MCP_TEST_EMPTY:-mcp}"))
                              :url)
                   "https://example.com/mcp"))
    (should (equal (gethash "Authorization" (plist-get (lispm-mcp--spec "gh" '(:url "http://h/" :headers (("Authorization" . "Bearer ${LISPM_MCP_TEST_TOKEN}")))) :headers))
                   "Bearer t0ken"))
    (let ((spec (lispm-mcp--spec "time" '(:command "uvx" :args ("mcp-server-time" "--tz=${LISPM_MCP_TEST_EMPTY:-UTC}")
                                          :env (("TOKEN" . "${LISPM_MCP_TEST_TOKEN}"))))))
      (should (equal (plist-get spec :args) ["mcp-server-time" "--tz=UTC"]))
      (should (equal (gethash "TOKEN" (plist-get spec :env)) "t0ken")))
    (let ((err (should-error (lispm-mcp--spec "x" '(:command "${LISPM_MCP_TEST_UNSET_VAR}"))
                             :type 'lispm-mcp-error)))
      (should (string-match-p "MCP server x: the environment variable LISPM_MCP_TEST_UNSET_VAR is not set"
                              (cadr err))))
    (should-error (lispm-mcp--spec "x" '(:url "file:///etc/passwd")) :type 'lispm-mcp-error)
    (should-error (lispm-mcp--spec "x" '(:args ("a"))) :type 'lispm-mcp-error)
    (should-error (lispm-mcp--spec "x" '(:command ("not" "a" "string"))) :type 'lispm-mcp-error)))

(ert-deftest lispm-mcp-test-secret-from-auth-source ()
  "(auth-source :host H) is the secret auth-source has, never written in the option."
  (lispm-test-in-folder
    (let* ((netrc (lispm-test-write-file folder "authinfo"
                                         "machine mcp.example.com login me password s3cret-Value\n"))
           (auth-sources (list netrc))
           (auth-source-do-cache nil))
      (should (equal (gethash "Authorization"
                              (plist-get (lispm-mcp--spec "gh" '(:url "https://mcp.example.com/"
                                                                 :headers (("Authorization" . (auth-source :host "mcp.example.com")))))
                                         :headers))
                     "s3cret-Value"))
      (should-error (lispm-mcp--spec "gh" '(:url "https://x/" :headers (("A" . (auth-source :host "nowhere.example")))))
                    :type 'lispm-mcp-error))))

(ert-deftest lispm-mcp-test-tools-registered-with-kinds ()
  "Each listed tool is a LispM tool: its name, schema, kind, source; a failed server says why."
  (lispm-mcp-test--with-servers '(("everything" :command "npx") ("broken" :command "false")
                                  ("unset" :command "${LISPM_MCP_TEST_NEVER_SET}"))
    (lispm-mcp-sync folder)
    (let ((servers (cdr (assoc 'lispm/mcp-servers lispm-mcp-test--sent))))
      ;; The unset one is not sent; the others are, as the sidecar takes them.
      (should (equal (sort (hash-table-keys (plist-get servers :servers)) #'string<)
                     '("broken" "everything"))))
    (let ((echo (lispm-tool-get "mcp__everything__echo"))
          (sum (lispm-tool-get "mcp__everything__get-sum")))
      (should echo)
      (should (eq (lispm-tool-kind echo) 'mcp))
      (should (eq (lispm-tool-kind sum) 'read))
      (should (equal (lispm-tool-source echo) "everything"))
      (should (string-prefix-p "(MCP server everything) Echoes" (lispm-tool-description echo)))
      ;; The server's control characters are not passed on.
      (should-not (string-search "\a" (lispm-tool-description sum)))
      ;; The schema goes back to JSON as it came.
      (should (equal (json-serialize (lispm-tool-schema echo) :null-object nil :false-object :json-false)
                     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\",\"description\":\"Message to echo\"}},\"required\":[\"message\"],\"additionalProperties\":false}"))
      (should (equal (lispm-tool-arg-names sum) '("a" "b" "opts" "tags"))))
    (should (equal (plist-get (cdr (assoc "broken" (lispm-mcp-status))) :error)
                   "the server did not answer in 30 s"))
    ;; The user sees each server, its tools and kinds, or why it has none.
    (lispm-mcp-describe)
    (with-current-buffer "*LispM MCP servers*"
      (should (string-match-p "^everything  (lispm-mcp-servers)\n  mcp__everything__echo +mcp\n  mcp__everything__get-sum +read$"
                              (buffer-string)))
      (should (string-search "broken  (lispm-mcp-servers)\n  no tools: the server did not answer in 30 s"
                             (buffer-string))))
    (should (string-match-p "LISPM_MCP_TEST_NEVER_SET is not set"
                            (plist-get (cdr (assoc "unset" (lispm-mcp-status))) :error)))
    ;; The servers go: so do their tools.
    (setq lispm-mcp-servers nil
          lispm-mcp-test--listed nil)
    (lispm-mcp-sync)
    (should-not (lispm-tool-get "mcp__everything__echo"))
    (should-not (cl-some #'lispm-tool-source lispm-tools))))

(ert-deftest lispm-mcp-test-call-through-the-pipeline ()
  "A call is checked, decided by the policy, shown with its server and tool, and sent exactly."
  (lispm-mcp-test--with-servers '(("everything" :command "npx"))
    (lispm-mcp-sync folder)
    ;; Bad arguments: refused before anyone is asked.
    (let ((err (should-error (lispm-tool-target "mcp__everything__echo" agent '(:msg "x"))
                             :type 'lispm-tool-bad-args)))
      (should (string-match-p "unknown argument .msg.; it takes .message." (cadr err))))
    (should-error (lispm-tool-target "mcp__everything__echo" agent nil) :type 'lispm-tool-bad-args)
    (should-error (lispm-tool-target "mcp__everything__echo" agent '(:message 42))
                  :type 'lispm-tool-bad-args)
    ;; The target names the server and tool, with the arguments.
    (let ((target (lispm-tool-target "mcp__everything__echo" agent '(:message "hi"))))
      (should (equal (plist-get target :names) '("everything/echo")))
      (should (string-match-p "MCP server everything, tool echo, arguments:\n{\n *\"message\": \"hi\"\n}"
                              (plist-get target :text)))
      ;; The default role asks; a rule by name allows or denies.
      (should (eq (lispm-policy-decide agent nil 'mcp target) 'ask))
      (let ((lispm-policy-roles '((default (mcp deny ("everything/e*")) (mcp allow ("everything/*"))))))
        (should (eq (lispm-policy-decide agent nil 'mcp target) 'deny)))
      (let ((lispm-policy-roles '((default (mcp allow ("everything/*"))))))
        (should (eq (lispm-policy-decide agent nil 'mcp target) 'allow)))
      (let ((lispm-policy-roles '((default (mcp allow ("other/*"))))))
        (should (eq (lispm-policy-decide agent nil 'mcp target) 'ask)))
      ;; `**' matches every name.
      (let ((lispm-policy-roles '((default (mcp allow ("**"))))))
        (should (eq (lispm-policy-decide agent nil 'mcp target) 'allow))))
    ;; Arguments as JSON made them: {} stays an object, [] an array, null and false.
    (let ((lispm-policy-roles '((default (read allow) (mcp allow)))))
      (should (equal (lispm-tools-call "mcp__everything__echo" agent '(:message "hi"))
                     '(:ok t :text "Echo: hi")))
      (lispm-tools-call "mcp__everything__get-sum" agent
                        (json-parse-string "{\"a\":1,\"b\":2.5,\"opts\":{},\"tags\":[],\"x\":null,\"y\":false}"
                                           :object-type 'plist))
      (let ((arguments (plist-get (cdr (assoc 'lispm/mcp-call lispm-mcp-test--sent)) :arguments)))
        (should (equal (json-serialize arguments :null-object nil :false-object :json-false)
                       "{\"a\":1,\"b\":2.5,\"opts\":{},\"tags\":[],\"x\":null,\"y\":false}")))
      ;; The tool's own failure is the call's error, naming the server.
      (let ((result (lispm-tools-call "mcp__everything__get-sum" agent '(:a 1 :b 2))))
        (should (equal (plist-get result :ok) nil))
        (should (equal (plist-get result :error) "MCP server everything, tool get-sum: boom"))))))

(ert-deftest lispm-mcp-test-many-tools-offered-once-found ()
  "Past the limit, a server's schemas are sent only once search_tools found them."
  (lispm-mcp-test--with-servers '(("everything" :command "npx"))
    (lispm-mcp-sync folder)
    (let ((names (lambda () (mapcar (lambda (tool) (plist-get tool :name)) (lispm-turn-tools agent)))))
      (should (member "mcp__everything__echo" (funcall names)))
      (should-not (lispm-mcp-prompt-note agent))
      (let ((lispm-tools-offer-limit 1))
        (should-not (cl-some (lambda (name) (string-prefix-p "mcp__" name)) (funcall names)))
        (should (member "read_file" (funcall names)))
        ;; The prompt says what is not offered, and how to find it.
        (should (string-match-p "more tools than you are offered: everything (2)\\.  search_tools"
                                (lispm-mcp-prompt-note agent)))
        (let ((found (plist-get (lispm-tools-call "search_tools" agent '(:query "echo")) :text)))
          (should (string-match-p "mcp__everything__echo (tool of MCP server everything, mcp): (MCP server everything) Echoes" found))
          (should (string-match-p "Offered to you from your next step: mcp__everything__echo\\." found)))
        (should (member "mcp__everything__echo" (funcall names)))
        (should-not (member "mcp__everything__get-sum" (funcall names)))
        (should (string-search "everything (1)" (lispm-mcp-prompt-note agent)))
        ;; Found by one agent, not offered to another.
        (should-not (member "mcp__everything__echo"
                            (mapcar (lambda (tool) (plist-get tool :name))
                                    (lispm-turn-tools (lispm-test-add-actor :folder folder)))))))))

(ert-deftest lispm-mcp-test-project-servers-only-once-trusted ()
  "A project's .mcp.json runs nothing until the user trusts it, and again after it changes."
  (lispm-mcp-test--with-servers nil
    (let ((json (lispm-test-write-file
                 folder ".mcp.json"
                 "{\"mcpServers\": {\"everything\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]}}}"))
          (deep (file-name-as-directory (expand-file-name "src/deep" folder))))
      (make-directory deep t)
      (lispm-mcp-sync deep)
      (should-not lispm-mcp-test--sent)
      (should-not (lispm-tool-get "mcp__everything__echo"))
      (should (equal (lispm-trust-project deep)
                     (list (format "the MCP servers of %s (everything)"
                                   (abbreviate-file-name (file-truename json))))))
      (lispm-mcp-sync)
      (let ((servers (plist-get (cdr (assoc 'lispm/mcp-servers lispm-mcp-test--sent)) :servers)))
        (should (equal (plist-get (gethash "everything" servers) :args) ["-y" "x"])))
      (should (lispm-tool-get "mcp__everything__echo"))
      (should (equal (plist-get (cdr (assoc "everything" (lispm-mcp-status))) :source)
                     (file-truename json)))
      ;; It changes: no longer trusted, its servers stop.
      (lispm-test-write-file folder ".mcp.json"
                             "{\"mcpServers\": {\"everything\": {\"command\": \"sh\", \"args\": [\"-c\", \"evil\"]}}}")
      (setq lispm-mcp-test--sent nil)
      (lispm-mcp-sync)
      (should (equal (hash-table-count (plist-get (cdr (assoc 'lispm/mcp-servers lispm-mcp-test--sent))
                                                  :servers))
                     0))
      ;; Not JSON: a clear message, nothing runs.
      (lispm-test-write-file folder ".mcp.json" "{not json")
      (should-error (lispm-mcp--read-project-file json) :type 'lispm-mcp-error)
      ;; Huge: refused unread, and a sync goes on without it.
      (let ((lispm-mcp-project-file-limit 100))
        (lispm-test-write-file folder ".mcp.json" (make-string 200 ?\s))
        (let ((err (should-error (lispm-mcp--file-hash json) :type 'lispm-mcp-error)))
          (should (string-match-p "is 200 bytes, past the 100 LispM reads" (cadr err))))
        (setq lispm-mcp-test--sent nil)
        (lispm-mcp-sync)
        (should-not (cl-some #'lispm-tool-source lispm-tools))))))

(ert-deftest lispm-mcp-test-tool-names-fit-models ()
  "Names hold only what models accept, at most 64 characters, distinct when cut."
  (should (equal (lispm-mcp-tool-name "my server" "do.it") "mcp__my_server__do_it"))
  (let ((a (lispm-mcp-tool-name "s" (make-string 80 ?a)))
        (b (lispm-mcp-tool-name "s" (concat (make-string 79 ?a) "b"))))
    (should (= (length a) 64))
    (should-not (equal a b))
    (should (string-match-p "\\`[A-Za-z0-9_-]+\\'" a))))

(provide 'lispm-mcp-test)
;;; lispm-mcp-test.el ends here
