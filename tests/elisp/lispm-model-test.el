;;; lispm-model-test.el --- Tests of the own agent's models and their keys  -*- lexical-binding: t; -*-

;;; Commentary:

;; `lispm-models': names, keys from the environment and auth-source
;; written to private files, the request's JSON shape, and streams that
;; end when nothing comes or the sidecar goes.  The streams against a
;; real model API are tested end to end (tests/e2e/test_own_agent.py)
;; and in the sidecar (tests/python/test_models.py).

;;; Code:

(require 'ert)
(require 'lispm-model)

(ert-deftest lispm-model-test-unknown-model-names-the-known ()
  (let ((lispm-models '(("a" :api chat :base-url "http://x" :model "m")
                        ("b" :api chat :base-url "http://x" :model "m"))))
    (should (equal (lispm-model-default) "a"))
    (let ((err (should-error (lispm-model-get "c") :type 'lispm-model-unknown)))
      (should (string-search "the models are: a, b" (lispm-error-message err)))))
  (let ((lispm-models nil))
    (should-error (lispm-model-default) :type 'lispm-model-unknown)))

(ert-deftest lispm-model-test-keys-from-the-environment ()
  (let ((process-environment (cons "LISPM_TEST_KEY=sk-test-123" process-environment)))
    (should (equal (lispm-model--key "m" '(:key (:env "LISPM_TEST_KEY"))) "sk-test-123")))
  (let ((process-environment (cons "LISPM_TEST_KEY" process-environment)))
    (should-error (lispm-model--key "m" '(:key (:env "LISPM_TEST_KEY")))
                  :type 'lispm-model-no-key))
  (should-not (lispm-model--key "m" '(:key nil)))
  (should-error (lispm-model--key "m" '(:key 42)) :type 'lispm-model-error))

(ert-deftest lispm-model-test-keys-from-auth-source ()
  (let* ((netrc (make-temp-file "lispm-netrc"))
         (auth-sources (list netrc))
         (auth-source-do-cache nil))
    (unwind-protect
        (progn
          (with-temp-file netrc
            (insert "machine api.example.com login apikey password sk-from-netrc\n"))
          (auth-source-forget-all-cached)
          (should (equal (lispm-model--key "m" '(:key "api.example.com")) "sk-from-netrc"))
          (let ((err (should-error (lispm-model--key "m" '(:key "nowhere.example.com"))
                                   :type 'lispm-model-no-key)))
            (should (string-search "nowhere.example.com" (lispm-error-message err)))))
      (delete-file netrc))))

(ert-deftest lispm-model-test-key-file-is-private ()
  (let ((file (lispm-model--key-file "sk-private")))
    (unwind-protect
        (progn
          (should (= (file-modes file) #o600))
          (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string))
                         "sk-private")))
      (delete-file file))))

(ert-deftest lispm-model-test-the-key-never-travels-in-the-link ()
  ;; The link's debug view shows every message: the key goes in a file.
  (let* ((process-environment (cons "LISPM_TEST_KEY=sk-secret-456" process-environment))
         (lispm-models '(("m" :api anthropic :base-url "http://127.0.0.1:9" :model "x"
                          :key (:env "LISPM_TEST_KEY"))))
         (sent nil))
    (cl-letf (((symbol-function 'lispm-sidecar-async-request)
               (lambda (method params &rest _) (push (cons method params) sent))))
      (let ((id (lispm-model-stream "m" '(:messages ((:role "user" :content "hi"))) #'ignore)))
        (unwind-protect
            (let ((params (cdr (assq 'lispm/model-stream sent))))
              (should-not (string-search "sk-secret-456" (prin1-to-string params)))
              (should (equal (with-temp-buffer
                               (insert-file-contents (plist-get params :key_file))
                               (buffer-string))
                             "sk-secret-456"))
              (delete-file (plist-get params :key_file)))
          (lispm-model-cancel id))))))

(ert-deftest lispm-model-test-json-shape ()
  ;; Lists of messages and of tool calls become arrays; plists stay objects.
  (should (equal (lispm-model--json
                  '(:role "assistant" :content "x"
                          :tool_calls ((:id "1" :name "read_file" :arguments "{}"))))
                 '(:role "assistant" :content "x"
                         :tool_calls [(:id "1" :name "read_file" :arguments "{}")])))
  (should (equal (json-serialize (lispm-model--json '(:a ((:b 1) (:b 2)))))
                 "{\"a\":[{\"b\":1},{\"b\":2}]}")))

(defun lispm-model-test--stream (handler)
  "Register a stream that no sidecar runs, with HANDLER; return its id."
  (let* ((id (format "T%d" (cl-incf lispm-model--counter)))
         (stream (lispm-model--stream-make :id id :handler handler)))
    (puthash id stream lispm-model--streams)
    (lispm-model--arm stream)
    id))

(ert-deftest lispm-model-test-a-silent-stream-times-out ()
  (let* ((lispm-model-idle-timeout 0.05)
         (events nil)
         (id (lispm-model-test--stream (lambda (event) (push event events)))))
    (let ((deadline (+ (float-time) 5)))
      (while (and (null events) (< (float-time) deadline))
        (accept-process-output nil 0.02)))
    (should (equal (plist-get (car events) :type) "error"))
    (should (equal (plist-get (car events) :kind) "timeout"))
    (should-not (lispm-model-streaming-p id))))

(ert-deftest lispm-model-test-events-arm-and-end-a-stream ()
  (let* ((events nil)
         (id (lispm-model-test--stream (lambda (event) (push event events)))))
    (lispm-sidecar-handle-notification 'lispm/model-event
                                       (list :stream id :type "text" :text "hi"))
    (should (lispm-model-streaming-p id))
    (lispm-sidecar-handle-notification 'lispm/model-event
                                       (list :stream id :type "done" :stop_reason "end_turn"))
    (should-not (lispm-model-streaming-p id))
    ;; A late event of an ended stream is dropped.
    (lispm-sidecar-handle-notification 'lispm/model-event
                                       (list :stream id :type "text" :text "late"))
    (should (equal (mapcar (lambda (e) (plist-get e :type)) (reverse events))
                   '("text" "done")))))

(ert-deftest lispm-model-test-the-sidecar-exiting-ends-every-stream ()
  (let* ((events nil)
         (a (lispm-model-test--stream (lambda (event) (push event events))))
         (b (lispm-model-test--stream (lambda (event) (push event events)))))
    (run-hooks 'lispm-sidecar-exited-hook)
    (should-not (or (lispm-model-streaming-p a) (lispm-model-streaming-p b)))
    (should (equal (mapcar (lambda (e) (plist-get e :message)) events)
                   '("the sidecar exited" "the sidecar exited")))))

(ert-deftest lispm-model-test-reasoning-settings ()
  (let* ((process-environment (cons "LISPM_TEST_KEY=sk-1" process-environment))
         (lispm-models '(("e" :api responses :base-url "http://x" :model "m"
                          :reasoning (:effort high))
                         ("b" :api anthropic :base-url "http://x" :model "m"
                          :reasoning (:budget 8000))
                         ("bad" :api anthropic :base-url "http://x" :model "m"
                          :key (:env "LISPM_TEST_KEY") :reasoning (:effort extreme))))
         (sent nil)
         (temporary-file-directory (make-temp-file "lispm-model-test" t)))
    (unwind-protect
        (cl-letf (((symbol-function 'lispm-sidecar-async-request)
                   (lambda (_method params &rest _) (push params sent))))
          (dolist (model '("e" "b"))
            (lispm-model-cancel (lispm-model-stream model '(:messages nil) #'ignore)))
          (should (equal (mapcar (lambda (p) (plist-get p :reasoning)) sent)
                         '((:budget 8000) (:effort "high"))))
          ;; Refused before anything is sent, and no key file is left.
          (setq sent nil)
          (should-error (lispm-model-stream "bad" '(:messages nil) #'ignore)
                        :type 'lispm-model-error)
          (should-not sent)
          (should-not (directory-files temporary-file-directory nil "lispm-key")))
      (delete-directory temporary-file-directory t))))

(ert-deftest lispm-model-test-a-conversation-sends-what-changed ()
  ;; The sidecar keeps the history: each request sends the messages from
  ;; the first that differs, the system prompt and tools when changed;
  ;; told `stale', the whole goes again, with the same key file.
  (let* ((lispm-model--conversations (make-hash-table :test #'equal))
         (process-environment (cons "LISPM_TEST_KEY=sk-1" process-environment))
         (lispm-models '(("m" :api chat :base-url "http://127.0.0.1:9" :model "x"
                          :key (:env "LISPM_TEST_KEY"))))
         (tools (list (list :name "t" :description "d" :parameters '(:type "object"))))
         (one '(:role "user" :content "one"))
         (two '(:role "assistant" :content "two"))
         (sent nil))
    (cl-letf (((symbol-function 'lispm-sidecar-async-request)
               (lambda (_method params &rest keys) (push (cons params keys) sent))))
      (cl-flet ((ask (messages &optional (system "S"))
                  (setq sent nil)
                  (lispm-model-cancel
                   (lispm-model-stream "m" (list :system system :tools tools
                                                 :messages messages :conversation "c#1")
                                       #'ignore))
                  (let ((params (car (car sent))))
                    (delete-file (plist-get params :key_file))
                    params)))
        (let ((first (ask (list one two))))
          (should-not (plist-member first :since))
          (should (equal (plist-get first :system) "S"))
          (should (= (length (plist-get first :messages)) 2))
          (let ((second (ask (list one two '(:role "user" :content "three")))))
            (should (equal (plist-get second :since) (plist-get first :revision)))
            (should (= (plist-get second :keep) 2))
            (should (equal (plist-get second :messages) [(:role "user" :content "three")]))
            (should-not (or (plist-member second :system) (plist-member second :tools)))
            ;; The user edited the first message in the session, and the prompt changed.
            (let ((third (ask (list (list :role "user" :content "ONE") two) "S2")))
              (should (= (plist-get third :keep) 0))
              (should (= (length (plist-get third :messages)) 2))
              (should (equal (plist-get third :system) "S2")))))
        ;; Stale: the whole again at once, with the key file not yet read.
        (setq sent nil)
        (let ((id (lispm-model-stream "m" (list :system "S2" :tools tools :messages (list one)
                                                :conversation "c#1")
                                      #'ignore)))
          (pcase-let ((`(,delta . ,keys) (car sent)))
            (should (plist-member delta :since))
            (funcall (plist-get keys :on-success) '(:stale t))
            (let ((whole (car (car sent))))
              (should (= (length sent) 2))
              (should-not (plist-member whole :since))
              (should (equal (plist-get whole :messages) (vector one)))
              (should (equal (plist-get whole :tools) (vconcat tools)))
              (should (equal (plist-get whole :key_file) (plist-get delta :key_file)))
              (delete-file (plist-get whole :key_file))))
          (lispm-model-cancel id))
        ;; A refused request: the next is whole.
        (funcall (plist-get (cdr (car sent)) :on-error) "refused")
        (should-not (plist-member (ask (list one)) :since))))))

(provide 'lispm-model-test)
;;; lispm-model-test.el ends here
