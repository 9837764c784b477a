;;; lispm-model.el --- The models LispM's own agent talks to, streamed by the sidecar  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The sidecar makes the model calls (python/lispm_sidecar/models/):
;; Anthropic Messages, OpenAI Responses and Chat Completions, each
;; turned into one stream of events for Emacs.  This file names the
;; models (`lispm-models'), finds their keys, and runs streams:
;;
;;   (lispm-model-stream MODEL REQUEST HANDLER)  => the stream's id
;;   (lispm-model-cancel ID)
;;
;; REQUEST is a plist: :system, a string; :messages, neutral messages
;; (plists with :role "user", "assistant" or "tool"); :tools, plists
;; (:name :description :parameters); :conversation, a name under which
;; the sidecar keeps the history, so that the next request of the same
;; conversation sends only what changed (see "What the sidecar holds").
;; HANDLER is called with each event, a plist whose :type is one of:
;;
;;   "text"       :text, a piece of the answer
;;   "reasoning"  :text, a piece of the model's reasoning; at a block's
;;                end :signature or :redacted, without :text
;;   "tool_call"  :id :name :arguments (the raw JSON text)
;;   "usage"      :input_tokens :output_tokens :cached_tokens
;;                :cache_write_tokens :reasoning_tokens
;;   "done"       :stop_reason            the end of the stream
;;   "error"      :kind :message [:status :body] the end of the stream
;;
;; Exactly one "done" or "error" ends a stream.  A stream that hears
;; nothing for `lispm-model-idle-timeout' seconds, or whose sidecar
;; dies, ends in an "error" made here.  After `lispm-model-cancel' the
;; handler hears nothing more.  An error's :kind says what failed, and
;; `lispm-model-error-condition' which condition that is.
;;
;; A key goes from auth-source or the environment into a file only the
;; user can read, in the sidecar's private runtime folder; the sidecar
;; reads and deletes it.  So no key travels in the link's messages,
;; which the debug view shows.

;;; Code:

(require 'cl-lib)
(require 'auth-source)
(require 'lispm-base)
(require 'lispm-sidecar)

;;; Options

(defgroup lispm-model nil
  "The models LispM's own agent talks to."
  :group 'lispm
  :prefix "lispm-model-")

(defcustom lispm-models
  '(("claude" :api anthropic :base-url "https://api.anthropic.com"
     :model "claude-sonnet-4-5" :key "api.anthropic.com" :window 200000)
    ("gpt" :api responses :base-url "https://api.openai.com/v1"
     :model "gpt-5" :key "api.openai.com" :window 400000)
    ("local" :api chat :base-url "http://127.0.0.1:8080/v1" :model "local"))
  "The models LispM's own agent can use; the first is the default.
Each entry is (NAME . PROPERTIES):

  :api       `anthropic' (Messages), `responses' (OpenAI Responses) or
             `chat' (Chat Completions: OpenRouter, llama.cpp, Ollama,
             vLLM and other OpenAI-compatible servers)
  :base-url  where the API is, such as \"https://api.anthropic.com\"
  :model     the model's id at that API
  :key       where its key comes from: a host name to look up with
             auth-source (its secret is the key), (:env \"VARIABLE\")
             for an environment variable, or nil for no key
  :window    the model's context window in tokens, if known: history
             is compacted as it nears it (never on a guess)
  :max-tokens  the longest answer asked for (default 8192)
  :reasoning how hard it reasons: (:effort low), medium or high, or
             (:budget TOKENS), Anthropic's thinking budget (each made
             from the other for the API that has the other); nil for
             the API's default
  :price     what it costs, in dollars per million tokens, as you find
             it (LispM ships no prices): (:input D :output D :cached D
             :cache-write D), the last two for the prompt's tokens read
             from the API's cache and written to it (each :input if not
             given)"
  :type '(alist :key-type (string :tag "Name")
                :value-type
                (plist :options
                       ((:api (choice (const anthropic) (const responses) (const chat)))
                        (:base-url string)
                        (:model string)
                        (:key (choice (const :tag "None" nil)
                                      (string :tag "auth-source host")
                                      (list :tag "Environment variable"
                                            (const :env) string)))
                        (:window integer)
                        (:max-tokens integer)
                        (:reasoning (choice (list :tag "Effort" (const :effort)
                                                  (choice (const low) (const medium)
                                                          (const high)))
                                            (list :tag "Budget" (const :budget) natnum)))
                        (:price (plist :options ((:input number) (:output number)
                                                 (:cached number)
                                                 (:cache-write number))))))))

(defcustom lispm-model-idle-timeout 120
  "Seconds a stream may go without an event before it fails."
  :type 'number)

(lispm-define-error 'lispm-model-error "LispM model error" 'lispm-error -32078)
(lispm-define-error 'lispm-model-unknown "No such model" 'lispm-model-error)
(lispm-define-error 'lispm-model-no-key "No key for the model" 'lispm-model-error)
;; What a turn stops at when its model fails.
(lispm-define-error 'lispm-model-unavailable "The model cannot be asked" 'lispm-model-error)
(lispm-define-error 'lispm-model-http-error "The model's API answered with an error"
                    'lispm-model-error)
(lispm-define-error 'lispm-model-stream-cut "The model's answer was cut short"
                    'lispm-model-error)
(lispm-define-error 'lispm-model-timeout "The model did not answer in time"
                    'lispm-model-error)
(lispm-define-error 'lispm-model-malformed-reply "The model's reply is malformed"
                    'lispm-model-error)

(defconst lispm-model-error-kinds
  '(("http" . lispm-model-http-error)
    ("timeout" . lispm-model-timeout)
    ("malformed" . lispm-model-malformed-reply)
    ("cut" . lispm-model-stream-cut)
    ("link" . lispm-model-unavailable))
  "The :kind of a stream's \"error\" event, and the condition it is.
The sidecar sends the first four; Emacs makes \"timeout\" (no event
for `lispm-model-idle-timeout') and \"link\" (the sidecar is gone).")

(defun lispm-model-error-condition (event)
  "Return the condition of EVENT, a stream's \"error\" event, by its :kind."
  (alist-get (plist-get event :kind) lispm-model-error-kinds 'lispm-model-stream-cut
             nil #'equal))

;;; Models

(defun lispm-model-names ()
  "Return the names of `lispm-models', the default first."
  (mapcar #'car lispm-models))

(defun lispm-model-get (name)
  "Return the properties of the model NAME, or signal `lispm-model-unknown'."
  (or (cdr (assoc name lispm-models))
      (lispm-signal 'lispm-model-unknown (list name)
                    "No model %s in `lispm-models'; the models are: %s"
                    name (mapconcat #'identity (lispm-model-names) ", "))))

(defun lispm-model-default ()
  "Return the name of the default model, or signal if there is none."
  (or (caar lispm-models)
      (lispm-signal 'lispm-model-unknown nil "`lispm-models' is empty")))

(defun lispm-model-window (name)
  "Return the context window of model NAME in tokens, or nil if unknown."
  (plist-get (lispm-model-get name) :window))

(defun lispm-model--key (name properties)
  "Return the key of the model NAME with PROPERTIES, or nil if it has none."
  (pcase (plist-get properties :key)
    ('nil nil)
    (`(:env ,variable)
     (or (getenv variable)
         (lispm-signal 'lispm-model-no-key (list name variable)
                       "Model %s: the environment variable %s is not set" name variable)))
    ((and (pred stringp) host)
     (let* ((found (car (auth-source-search :host host :max 1)))
            (secret (plist-get found :secret)))
       (cond ((functionp secret) (funcall secret))
             ((stringp secret) secret)
             (t (lispm-signal 'lispm-model-no-key (list name host)
                              "Model %s: auth-source has no secret for host %s"
                              name host)))))
    (other (lispm-signal 'lispm-model-error (list name other)
                         "Model %s: :key must be a host, (:env VAR) or nil, not %S"
                         name other))))

(defun lispm-model--key-file (key)
  "Write KEY into a new file only the user can read; return its name.
The file is in the sidecar's private runtime folder when it is known."
  (let* ((runtime (plist-get (lispm-sidecar-info) :runtime_dir))
         (temporary-file-directory
          (if (and runtime (file-directory-p runtime))
              (file-name-as-directory runtime)
            temporary-file-directory)))
    (with-file-modes #o600
      (let ((file (make-temp-file "lispm-key-")))
        (let ((coding-system-for-write 'utf-8-unix)
              (write-region-inhibit-fsync t))
          (write-region key nil file nil 'silent))
        file))))

;;; Converting to JSON

(defun lispm-model--json (value)
  "Return VALUE ready for the link: lists of plists become vectors.
A plist (a list whose first element is a keyword) stays a plist, its
values converted; any other list becomes a vector."
  (cond ((and (consp value) (keywordp (car value)))
         (cl-loop for (key val) on value by #'cddr
                  append (list key (lispm-model--json val))))
        ((consp value) (vconcat (mapcar #'lispm-model--json value)))
        ((vectorp value) (vconcat (mapcar #'lispm-model--json value)))
        (t value)))

;;; What the sidecar holds

;; A session's history can be megabytes, and formatting it all for the
;; link at each request would cost Emacs in proportion.  The sidecar
;; keeps each conversation (python/lispm_sidecar/models/conversations.py);
;; Emacs remembers what it last sent of each, and sends the messages from
;; the first that differs (an edit of the session anywhere counts), and
;; the system prompt and the tools only when they changed.

(defvar lispm-model--conversations (make-hash-table :test #'equal)
  "What the sidecar holds of each conversation, as Emacs sent it, by name.
Each value is (REVISION SYSTEM TOOLS MESSAGES).")

(defvar lispm-model--revision 0
  "The newest revision of a conversation sent.")

(defun lispm-model--same-length (held messages)
  "Return how many of MESSAGES, from the first, are those of HELD."
  (let ((count 0))
    ;; `equal' answers at once for the same object: within a turn the
    ;; messages sent before are, so this costs a step nothing like the
    ;; history's size.
    (while (and held messages (equal (car held) (car messages)))
      (setq held (cdr held) messages (cdr messages) count (1+ count)))
    count))

(defun lispm-model--history-params (request whole)
  "Return the params of REQUEST's system prompt, tools and messages.
With a :conversation the sidecar holds, and unless WHOLE, only what
changed since it was last sent; the sidecar will hold this revision."
  (let* ((conversation (plist-get request :conversation))
         (system (or (plist-get request :system) ""))
         (tools (plist-get request :tools))
         (messages (plist-get request :messages))
         (held (and conversation (not whole)
                    (gethash conversation lispm-model--conversations)))
         (keep (if held (lispm-model--same-length (nth 3 held) messages) 0)))
    (append
     (when conversation
       (let ((revision (cl-incf lispm-model--revision)))
         (puthash conversation (list revision system tools messages)
                  lispm-model--conversations)
         (list :conversation conversation :revision revision)))
     (and held (list :since (car held) :keep keep))
     (unless (and held (equal system (nth 1 held)))
       (list :system system))
     (unless (and held (equal tools (nth 2 held)))
       (list :tools (vconcat (mapcar #'lispm-model--json tools))))
     (list :messages (vconcat (mapcar #'lispm-model--json (nthcdr keep messages)))))))

(defun lispm-model--forget-conversations ()
  "Forget what the sidecar held: it is gone."
  (clrhash lispm-model--conversations))

(add-hook 'lispm-sidecar-exited-hook #'lispm-model--forget-conversations)

;;; Streams

(cl-defstruct (lispm-model--stream (:constructor lispm-model--stream-make) (:copier nil))
  "A model stream under way."
  (id nil :documentation "The stream's id, a string.")
  (handler nil :documentation "Called with each event.")
  (timer nil :documentation "Fails the stream when nothing comes in time."))

(defvar lispm-model--streams (make-hash-table :test #'equal)
  "The streams under way, by id.")

(defvar lispm-model--counter 0
  "The number of the last stream started.")

(defun lispm-model--arm (stream)
  "Restart STREAM's idle timer."
  (when (lispm-model--stream-timer stream)
    (cancel-timer (lispm-model--stream-timer stream)))
  (setf (lispm-model--stream-timer stream)
        (run-at-time lispm-model-idle-timeout nil #'lispm-model--time-out
                     (lispm-model--stream-id stream))))

(defun lispm-model--finish (id event)
  "End the stream ID with EVENT, if it is still under way."
  (when-let* ((stream (gethash id lispm-model--streams)))
    (remhash id lispm-model--streams)
    (when (lispm-model--stream-timer stream)
      (cancel-timer (lispm-model--stream-timer stream)))
    (funcall (lispm-model--stream-handler stream) event)))

(defun lispm-model--time-out (id)
  "Fail the stream ID, which heard nothing for too long, and cancel it."
  (when (gethash id lispm-model--streams)
    (lispm-sidecar-notify 'lispm/model-cancel (list :stream id))
    (lispm-model--finish
     id (list :type "error" :kind "timeout"
              :message (format "no answer from the model for %s s"
                               lispm-model-idle-timeout)))))

(defun lispm-model--reasoning (model reasoning)
  "Return REASONING, MODEL's `:reasoning' in `lispm-models', for the link."
  (let ((effort (plist-get reasoning :effort))
        (budget (plist-get reasoning :budget)))
    (unless (and (or effort budget)
                 (or (null effort) (memq effort '(low medium high)))
                 (or (null budget) (natnump budget)))
      (lispm-signal 'lispm-model-error (list model reasoning)
                    "Model %s: :reasoning must be (:effort low|medium|high) or (:budget \
TOKENS), not %S" model reasoning))
    (append (and effort (list :effort (symbol-name effort)))
            (and budget (list :budget budget)))))

(defun lispm-model-stream (model request handler)
  "Stream the answer of MODEL, a name in `lispm-models', to REQUEST.
REQUEST is a plist (:system :messages :tools :conversation); HANDLER
is called with each event (see the Commentary).  Return the stream's
id.  Signal `lispm-model-unknown' or `lispm-model-no-key' before
anything is sent, and the sidecar's error if it cannot be started (no
stream is then under way); every later failure reaches HANDLER as an
\"error\" event."
  (let* ((properties (lispm-model-get model))
         (key (lispm-model--key model properties))
         (reasoning (when-let* ((reasoning (plist-get properties :reasoning)))
                      (lispm-model--reasoning model reasoning)))
         (id (format "S%d" (cl-incf lispm-model--counter)))
         (stream (lispm-model--stream-make :id id :handler handler))
         (key-file (and key (lispm-model--key-file key)))
         (base (append
                (list :stream id
                      :api (symbol-name (plist-get properties :api))
                      :base_url (plist-get properties :base-url)
                      :model (plist-get properties :model)
                      :max_tokens (or (plist-get properties :max-tokens) 8192))
                (and reasoning (list :reasoning reasoning))
                (and key-file (list :key_file key-file)))))
    (puthash id stream lispm-model--streams)
    (lispm-model--arm stream)
    (condition-case err
        (lispm-model--send id base request key-file nil)
      ;; The sidecar could not even be asked (it cannot start): no stream
      ;; is under way, so none may time out later, and no key stays.
      (error
       (remhash id lispm-model--streams)
       (cancel-timer (lispm-model--stream-timer stream))
       (when (and key-file (file-exists-p key-file))
         (delete-file key-file))
       (signal (car err) (cdr err))))
    id))

(defun lispm-model--send (id base request key-file whole)
  "Ask the sidecar to start stream ID: BASE params and REQUEST's history.
Only what changed since the last request of REQUEST's conversation
goes, unless WHOLE; when the sidecar answers that it lacks what that
built on, the whole goes at once.  KEY-FILE is deleted if the request
fails before the sidecar read it."
  (let ((conversation (plist-get request :conversation)))
    (lispm-sidecar-async-request
     'lispm/model-stream (append base (lispm-model--history-params request whole))
     :on-success
     (lambda (result)
       (when (plist-get result :stale)
         (if (gethash id lispm-model--streams)
             (lispm-model--send id base request key-file t)
           (when (and key-file (file-exists-p key-file))
             (delete-file key-file)))))
     :on-error
     (lambda (text)
       (when conversation
         (remhash conversation lispm-model--conversations))
       ;; Refused before the sidecar read the key: delete it here.
       (when (and key-file (file-exists-p key-file))
         (delete-file key-file))
       (lispm-model--finish id (list :type "error" :kind "link" :message text))))))

(defun lispm-model-cancel (id)
  "Cancel the stream ID: its handler hears nothing more."
  (when-let* ((stream (gethash id lispm-model--streams)))
    (remhash id lispm-model--streams)
    (when (lispm-model--stream-timer stream)
      (cancel-timer (lispm-model--stream-timer stream)))
    (lispm-sidecar-notify 'lispm/model-cancel (list :stream id))))

(defun lispm-model-streaming-p (id)
  "Return non-nil if the stream ID is still under way."
  (and id (gethash id lispm-model--streams) t))

(cl-defmethod lispm-sidecar-handle-notification ((_method (eql 'lispm/model-event)) params)
  "Pass a model stream's event PARAMS to its handler."
  (let* ((id (plist-get params :stream))
         (stream (gethash id lispm-model--streams)))
    (when stream
      (if (member (plist-get params :type) '("done" "error"))
          (lispm-model--finish id params)
        (lispm-model--arm stream)
        (funcall (lispm-model--stream-handler stream) params)))))

(defun lispm-model--sidecar-gone ()
  "Fail every stream: the sidecar that ran them is gone."
  (maphash (lambda (id _stream)
             (lispm-model--finish id (list :type "error" :kind "link"
                                           :message "the sidecar exited")))
           (copy-hash-table lispm-model--streams)))

(add-hook 'lispm-sidecar-exited-hook #'lispm-model--sidecar-gone)

(provide 'lispm-model)
;;; lispm-model.el ends here
