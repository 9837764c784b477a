;;; mcp-bench.el --- Measure the user's MCP servers as LispM's tools  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/bench_mcp.py) as
;; `emacs --batch -Q -L DIR -L DIR/apps -l tests/bench/mcp-bench.el',
;; DIR a byte-compiled copy of LispM's `elisp' folder, with the case in
;; `LISPM_BENCH_CASE', the server's command line in
;; `LISPM_BENCH_SERVER' (a JSON array) and a folder of its own in
;; `LISPM_BENCH_DIR'.  The real sidecar runs the real server.
;;
;; bytes  The server has many tools.  The bytes of the tool schemas a
;;        model request carries, as `lispm-turn-tools' gives them to
;;        the model code (JSON, as sent): LispM's own tools, and the
;;        server's, with every server tool offered and with the limit
;;        (`lispm-tools-offer-limit'), after one search_tools that
;;        found the tools of one topic.  Prints {"case": "bytes",
;;        "tools": N, "own_bytes", "all_mcp_bytes", "offered_mcp_bytes",
;;        "found": N}.
;;
;; call   The server is server-everything.  ROUNDS calls of its echo
;;        through `lispm-calls-invoke' (validation, the policy, which
;;        allows, the sidecar's client, the server), one after the
;;        other, each timed from the call to its callback.  Prints
;;        {"case": "call", "ms": [...]}.

;;; Code:

(require 'cl-lib)
(require 'lispm-own-agent)
(require 'lispm-mcp)

(defun mcp-bench--env (name)
  "Return the environment variable NAME, or signal an error if it is unset."
  (or (getenv name) (error "%s is not set" name)))

(defun mcp-bench--wait (predicate seconds what)
  "Wait until PREDICATE is non-nil, at most SECONDS; signal naming WHAT.
It looks every half millisecond: a callback run from a timer does not
end `accept-process-output''s wait, which would add its whole quantum
to each call timed."
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.0005))
    (or (funcall predicate) (error "No %s in %d s" what seconds))))

(defun mcp-bench--setup ()
  "Configure the server, sync, and return an own agent in the bench's folder."
  (let* ((command (append (json-parse-string (mcp-bench--env "LISPM_BENCH_SERVER")
                                             :array-type 'list)
                          nil))
         (folder (file-name-as-directory (mcp-bench--env "LISPM_BENCH_DIR")))
         (agent (lispm-own-agent--make :name "bench" :kind 'lispm :folder folder
                                       :state 'running)))
    (setq lispm-mcp-servers `(("bench" :command ,(car command) :args ,(cdr command))))
    (let ((synced nil))
      (lispm-mcp-sync nil (lambda () (setq synced t)))
      (mcp-bench--wait (lambda () synced) 60 "sync"))
    (let ((status (cdr (assoc "bench" (lispm-mcp-status)))))
      (when (plist-get status :error)
        (error "The server failed: %s" (plist-get status :error))))
    agent))

(defun mcp-bench--bytes (tools)
  "Return the bytes of TOOLS, as `lispm-turn-tools' gives them, in JSON."
  (if (null tools)
      0
    (string-bytes (json-serialize (lispm-model--json tools)
                                  :null-object nil :false-object :json-false))))

(defun mcp-bench-bytes ()
  "The bytes of tool schemas per request; see the Commentary."
  (let* ((agent (mcp-bench--setup))
         (count (cl-count-if #'lispm-tool-source lispm-tools))
         (split (lambda ()
                  (let ((tools (lispm-turn-tools agent)))
                    (cons (cl-remove-if-not (lambda (tool)
                                              (string-prefix-p "mcp__" (plist-get tool :name)))
                                            tools)
                          (cl-remove-if (lambda (tool)
                                          (string-prefix-p "mcp__" (plist-get tool :name)))
                                        tools)))))
         (all (let ((lispm-tools-offer-limit most-positive-fixnum)) (funcall split))))
    (lispm-tools-call "search_tools" agent '(:query "invoices"))
    (let ((offered (funcall split)))
      (list :case "bytes" :tools count
            :own_bytes (mcp-bench--bytes (cdr all))
            :all_mcp_bytes (mcp-bench--bytes (car all))
            :offered_mcp_bytes (mcp-bench--bytes (car offered))
            :found (length (car offered))))))

(defun mcp-bench-call (rounds)
  "Time ROUNDS calls of the echo through the pipeline; see the Commentary."
  (let ((agent (mcp-bench--setup))
        (lispm-policy-roles '((default (read allow) (mcp allow))))
        (times nil))
    (lispm-agents-add-actor agent)
    (dotimes (i (1+ rounds))
      (let ((start (float-time)) (outcome nil))
        (lispm-calls-invoke agent "mcp__bench__echo" (list :message (format "round %d" i))
                            (lambda (result) (setq outcome result)))
        (mcp-bench--wait (lambda () outcome) 30 "the echo's answer")
        (unless (and (plist-get outcome :ok)
                     (string-search (format "round %d" i) (plist-get outcome :text)))
          (error "The echo answered %S" outcome))
        ;; The first call is not timed: it warms the path.
        (when (> i 0)
          (push (* 1000 (- (float-time) start)) times))))
    (list :case "call" :ms (vconcat (nreverse times)))))

(let ((result (pcase (mcp-bench--env "LISPM_BENCH_CASE")
                ("bytes" (mcp-bench-bytes))
                ("call" (mcp-bench-call (string-to-number (or (getenv "LISPM_BENCH_ROUNDS")
                                                              "200"))))
                (case (error "Unknown case %s" case)))))
  (princ (concat (json-serialize result) "\n"))
  (lispm-sidecar-stop))

;;; mcp-bench.el ends here
