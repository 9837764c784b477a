;;; lispm-web-test.el --- Tests of fetch_url against a local HTTP server  -*- lexical-binding: t; -*-

;;; Commentary:

;; Every fetch is a real HTTP exchange over a socket with
;; tests/fixtures/web-server.py, a Python server on 127.0.0.1 that
;; prints each request it gets and each transfer cut short.  No proxy
;; is used and nothing leaves the machine.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-web)
(require 'lispm-calls)
(require 'lispm-approvals)
(require 'lispm-test-fixtures)

(defconst lispm-web-test--server
  (expand-file-name "../fixtures/web-server.py"
                    (file-name-directory (or load-file-name buffer-file-name)))
  "The local HTTP server's script.")

(defvar lispm-web-test--port nil
  "The port the server of the running test listens on.")

(defvar lispm-web-test--process nil
  "The server process of the running test.")

(defmacro lispm-web-test--with-server (&rest body)
  "Run BODY with a local HTTP server started, and no proxy.
`lispm-web-test--port' is its port; it is stopped afterwards."
  (declare (indent 0) (debug t))
  `(progn
     (url-do-setup)
     (let* ((url-proxy-services nil)
            (buffer (generate-new-buffer " *lispm-web-test server*"))
            (lispm-web-test--process
             (make-process :name "lispm-web-test-server" :buffer buffer
                           :command (list "python3" "-u" lispm-web-test--server)
                           :connection-type 'pipe :noquery t))
            (lispm-web-test--port nil)
            (deadline (+ (float-time) 10)))
       (unwind-protect
           (progn
             (while (and (not lispm-web-test--port) (< (float-time) deadline))
               (accept-process-output lispm-web-test--process 0.1)
               (with-current-buffer buffer
                 (goto-char (point-min))
                 (when (re-search-forward "^PORT \\([0-9]+\\)$" nil t)
                   (setq lispm-web-test--port (string-to-number (match-string 1))))))
             (should lispm-web-test--port)
             ,@body)
         (delete-process lispm-web-test--process)
         (kill-buffer buffer)))))

(defun lispm-web-test--url (path)
  "Return the URL of PATH on the test's server."
  (format "http://127.0.0.1:%d%s" lispm-web-test--port path))

(defun lispm-web-test--seen ()
  "Return the lines the server printed, after its port."
  (accept-process-output lispm-web-test--process 0.1)
  (cdr (split-string (with-current-buffer (process-buffer lispm-web-test--process)
                       (buffer-string))
                     "\n" t)))

(defun lispm-web-test--fetch (path &optional timeout)
  "Call fetch_url on PATH of the test's server and return its result plist.
Wait at most TIMEOUT seconds (10 by default)."
  (lispm-test-with-agent (agent)
    (lispm-tools-call "fetch_url" agent (list :url (lispm-web-test--url path))
                      (or timeout 10))))

(defun lispm-web-test--body (text)
  "Return the body in TEXT, fetch_url's answer: after its headers, before its notes."
  (let ((start (+ 2 (string-search "\n\n" text))))
    (substring text start (string-search "\n[" text start))))

;;; Pages

(ert-deftest lispm-web-test-a-page-is-text-with-its-links ()
  (lispm-web-test--with-server
    (let* ((result (lispm-web-test--fetch "/page"))
           (text (plist-get result :text)))
      (should (plist-get result :ok))
      (should (string-search "Content-Type: text/html" text))
      (should (string-search "Hello from the page" text))
      (should (string-match-p "first item\n\\* second item" text))
      ;; Links readable, relative ones made absolute; no markup left.
      (should (string-search (format "[a relative link](%s)" (lispm-web-test--url "/next"))
                             text))
      (should (string-search "[an absolute one](https://www.gnu.org/software/emacs/)" text))
      (should (string-search "to the top" text))
      (should-not (string-search "#top" text))
      (should-not (string-search "<p>" text))
      ;; The image's alt text shows; neither it nor the style sheet
      ;; was fetched.
      (should (string-search "a picture" text))
      (should (equal (lispm-web-test--seen) '("GET /page"))))))

(ert-deftest lispm-web-test-text-json-and-charsets ()
  (lispm-web-test--with-server
    (let ((json (lispm-web-test--fetch "/data.json"))
          (plain (lispm-web-test--fetch "/plain"))
          (latin (lispm-web-test--fetch "/latin1")))
      (should (string-search "Content-Type: application/json\n\n{\"name\": \"lispm\", \"n\": [1, 2, 3]}"
                             (plist-get json :text)))
      (should (string-search "Plain text, café." (plist-get plain :text)))
      (should (string-search "Café crème" (plist-get latin :text))))))

(ert-deftest lispm-web-test-an-image-is-a-note-not-bytes ()
  (lispm-web-test--with-server
    (let* ((result (lispm-web-test--fetch "/img.png"))
           (text (plist-get result :text)))
      (should (plist-get result :ok))
      (should (string-search "[A body of type image/png, 216 bytes: not text, so not shown]"
                             text))
      (should-not (string-search "PNG" text)))))

(ert-deftest lispm-web-test-http-errors-say-their-status ()
  (lispm-web-test--with-server
    (let ((missing (lispm-web-test--fetch "/missing"))
          (broken (lispm-web-test--fetch "/broken")))
      (should-not (plist-get missing :ok))
      (should (string-match-p "\\`HTTP 404 Not found from http://127.0.0.1:[0-9]+/missing:\nNo such page here\\.\\'"
                              (plist-get missing :error)))
      (should-not (plist-get broken :ok))
      (should (string-search "HTTP 500" (plist-get broken :error)))
      (should (string-search "Something broke on the server." (plist-get broken :error))))))

;;; Redirects

(ert-deftest lispm-web-test-redirects-are-followed-within-the-bound ()
  (lispm-web-test--with-server
    (let* ((lispm-web-redirect-limit 3)
           (result (lispm-web-test--fetch "/redirect/3")))
      (should (plist-get result :ok))
      (should (string-search (format "URL: %s (redirected from %s)"
                                     (lispm-web-test--url "/page")
                                     (lispm-web-test--url "/redirect/3"))
                             (plist-get result :text)))
      (should (string-search "Hello from the page" (plist-get result :text)))
      (should (equal (lispm-web-test--seen)
                     '("GET /redirect/3" "GET /redirect/2" "GET /redirect/1" "GET /page"))))))

(ert-deftest lispm-web-test-too-many-redirects-fail ()
  (lispm-web-test--with-server
    (let* ((lispm-web-redirect-limit 3)
           (result (lispm-web-test--fetch "/redirect/4")))
      (should-not (plist-get result :ok))
      (should (string-search "made more than 3 redirects" (plist-get result :error)))
      ;; The fourth redirect was not followed.
      (should (equal (lispm-web-test--seen)
                     '("GET /redirect/4" "GET /redirect/3" "GET /redirect/2" "GET /redirect/1"))))))

(ert-deftest lispm-web-test-a-redirect-to-a-file-is-refused ()
  (lispm-web-test--with-server
    (let ((result (lispm-web-test--fetch "/to-file")))
      (should-not (plist-get result :ok))
      (should (string-search "redirected to file:///etc/passwd, which is refused: only http and https"
                             (plist-get result :error)))
      (should-not (string-search "root:" (plist-get result :error))))))

;;; Bounds

(ert-deftest lispm-web-test-a-huge-page-is-cut-at-the-limit ()
  (lispm-web-test--with-server
    (let* ((lispm-web-size-limit 100000)
           (lispm-web-text-limit 1000000)
           (result (lispm-web-test--fetch "/huge"))
           (text (plist-get result :text))
           (cut nil)
           (deadline (+ (float-time) 10)))
      (should (plist-get result :ok))
      (should (string-search "[The body was longer than 100000 bytes: the transfer was stopped there"
                             text))
      ;; The body shown is the limit's worth, not more.
      (should (= (length (lispm-web-test--body text)) 100000))
      ;; The server could not send its 100 MB: the connection was closed.
      (while (and (not cut) (< (float-time) deadline))
        (setq cut (cl-find-if (lambda (line) (string-prefix-p "CUT /huge after" line))
                              (lispm-web-test--seen))))
      (should cut)
      (should (< (string-to-number (car (last (split-string cut " ") 2)))
                 (* 20 1024 1024))))))

(ert-deftest lispm-web-test-the-text-is-bounded ()
  (lispm-web-test--with-server
    (let* ((lispm-web-text-limit 1000)
           (text (plist-get (lispm-web-test--fetch "/huge") :text)))
      (should (= (length (lispm-web-test--body text)) 1000))
      (should (string-match-p "\\[… [0-9]+ more characters not shown\\]" text)))))

(ert-deftest lispm-web-test-a-slow-server-times-out-and-emacs-goes-on ()
  (lispm-web-test--with-server
    (dolist (path '("/silent" "/trickle"))
      (lispm-test-with-agent (agent)
        (let* ((lispm-web-timeout 1)
               (result nil)
               (ticks 0)
               (timer (run-at-time 0.1 0.1 (lambda () (cl-incf ticks))))
               (began (float-time)))
          (unwind-protect
              (progn
                (lispm-tools-run "fetch_url" agent (list :url (lispm-web-test--url path))
                                 (lambda (r) (setq result r)))
                ;; The call returned at once, without its result.
                (should-not result)
                (should (< (- (float-time) began) 0.5))
                (while (and (not result) (< (float-time) (+ began 10)))
                  (accept-process-output nil 0.05))
                (should result)
                (should-not (plist-get result :ok))
                (should (string-match-p "No whole answer from .* within 1 seconds .* the connection was closed"
                                        (plist-get result :error)))
                ;; Timers ran meanwhile: Emacs did not wait on the network.
                (should (> ticks 3))
                (should (< (- (float-time) began) 5)))
            (cancel-timer timer)))))
    ;; The trickling transfer was cut by LispM, not ended by the server.
    (let ((deadline (+ (float-time) 5)))
      (while (and (not (member "CUT /trickle" (lispm-web-test--seen)))
                  (< (float-time) deadline))))
    (should (member "CUT /trickle" (lispm-web-test--seen)))))

(ert-deftest lispm-web-test-the-callback-runs-once-also-when-cancelled ()
  (lispm-web-test--with-server
    (let* ((results nil)
           (cancel (lispm-web-retrieve (lispm-web-test--url "/silent")
                                       (lambda (r) (push r results)))))
      (should-not results)
      (funcall cancel)
      (funcall cancel)
      (let ((deadline (+ (float-time) 2)))
        (while (< (float-time) deadline) (accept-process-output nil 0.05)))
      (should (= (length results) 1))
      (should (string-search "was cancelled" (plist-get (car results) :error))))))

;;; Bad URLs

(ert-deftest lispm-web-test-bad-urls-are-refused-before-any-request ()
  (lispm-web-test--with-server
    (lispm-test-with-agent (agent)
      (dolist (case `(("file:///etc/passwd" "not file: URLs")
                      ("ftp://127.0.0.1/x" "not ftp: URLs")
                      ("data:text/plain,hi" "not data: URLs")
                      ("about:blank" "not about: URLs")
                      ("javascript:alert(1)" "not javascript: URLs")
                      ("127.0.0.1/page" "not a URL without a scheme")
                      (,(format "http://user:pass@127.0.0.1:%d/page" lispm-web-test--port)
                       "a user name or password")
                      (,(format "http://@127.0.0.1:%d/page" lispm-web-test--port)
                       "a user name or password")
                      ("http:///page" "names no host")
                      (,(format "http://127.0.0.1:%d/a b" lispm-web-test--port) "spaces")
                      (,(format "http://127.0.0.1:%d/a\r\nX: y" lispm-web-test--port)
                       "control characters")))
        (pcase-let ((`(,url ,why) case))
          ;; Refused when the target is asked for, before the policy...
          (let ((err (should-error (lispm-tool-target "fetch_url" agent (list :url url))
                                   :type 'lispm-web-bad-url)))
            (should (string-search why (cadr err))))
          ;; ... and by the tool itself.
          (let ((result (lispm-tools-call "fetch_url" agent (list :url url) 5)))
            (should-not (plist-get result :ok))
            (should (string-search why (plist-get result :error))))))
      (should (lispm-tool-target "fetch_url" agent (list :url "HTTPS://example.org/")))
      (should (null (lispm-web-test--seen))))))

(ert-deftest lispm-web-test-a-url-with-a-known-secret-is-refused ()
  (lispm-test-with-agent (agent)
    (let ((process-environment (cons "LISPM_WEB_TEST_API_KEY=sk-zzWebTestSecret123456"
                                     process-environment)))
      (let ((err (should-error (lispm-tool-target
                                "fetch_url" agent
                                (list :url "http://127.0.0.1:9/?k=sk-zzWebTestSecret123456"))
                               :type 'lispm-policy-denied)))
        (should (string-search "holds a secret" (cadr err)))))))

;;; Policy

(ert-deftest lispm-web-test-fetch-url-is-network-and-asks-showing-the-url ()
  (should (eq (lispm-tool-kind (lispm-tool-get "fetch_url")) 'network))
  (should (assq 'network lispm-policy-kind-alist))
  (lispm-web-test--with-server
    (lispm-test-with-agent (agent)
      (let* ((url (lispm-web-test--url "/page"))
             (target (lispm-tool-target "fetch_url" agent (list :url url))))
        (should (equal (plist-get target :url) url))
        (should (eq (lispm-policy-decide agent nil 'network target) 'ask))
        (should (eq (lispm-policy-decide agent 'default 'network target) 'ask))
        ;; A rule's patterns match the host.
        (should (equal (plist-get target :names) '("127.0.0.1")))
        (let ((lispm-policy-roles '((default (network allow ("127.0.0.*")) (network ask)))))
          (should (eq (lispm-policy-decide agent nil 'network target) 'allow)))
        (let ((lispm-policy-roles '((default (network allow ("*.gnu.org")) (network ask)))))
          (should (eq (lispm-policy-decide agent nil 'network target) 'ask)))
        ;; Through the one pipeline: it asks; the approval shows the URL;
        ;; nothing is fetched until the user allows it.
        (let ((asked nil) (outcome nil) (lispm-approvals-display-action '(display-buffer-no-window)))
          (unwind-protect
              (progn
                (lispm-calls-invoke agent "fetch_url" (list :url url)
                                    (lambda (o) (setq outcome o))
                                    :on-ask (lambda (approval) (setq asked approval)))
                (should asked)
                (should (eq (lispm-approval-kind asked) 'network))
                (with-current-buffer lispm-approvals-buffer-name
                  (should (string-search (concat "URL: " url) (buffer-string))))
                (should-not (member "GET /page" (lispm-web-test--seen)))
                (lispm-approvals-allow asked)
                (let ((deadline (+ (float-time) 10)))
                  (while (and (not outcome) (< (float-time) deadline))
                    (accept-process-output nil 0.05)))
                (should (plist-get outcome :ok))
                (should (string-search "Hello from the page" (plist-get outcome :text))))
            (when (get-buffer lispm-approvals-buffer-name)
              (kill-buffer lispm-approvals-buffer-name))))))))

;;; A web search skill, as the README shows one

(defvar web-search-endpoint)

(ert-deftest lispm-web-test-the-readme-s-search-skill-works ()
  "tests/fixtures/web-skills/web-search.org, the README's example, against a fake API."
  (require 'lispm-skills)
  (require 'auth-source)
  (lispm-web-test--with-server
    (lispm-test-with-agent (agent)
      (let* ((lispm-skills-directories
              (list (expand-file-name "../fixtures/web-skills/"
                                      (file-name-directory lispm-web-test--server))))
             (netrc (make-temp-file "lispm-web-test-authinfo"))
             (auth-sources (list netrc))
             (auth-source-cache-expiry nil))
        (unwind-protect
            (progn
              (auth-source-forget-all-cached)
              (should (plist-get (lispm-skill-load "web-search" agent) :loaded))
              (should (eq (lispm-tool-kind (lispm-tool-get "web_search")) 'network))
              (let ((web-search-endpoint (lispm-web-test--url "/res/v1/web/search")))
                ;; Without a key, it says where to put one.
                (let ((result (lispm-tools-call "web_search" agent '(:query "emacs lisp") 10)))
                  (should-not (plist-get result :ok))
                  (should (string-search "No key for" (plist-get result :error))))
                (with-temp-file netrc
                  (insert "machine 127.0.0.1 password test-key\n"))
                (auth-source-forget-all-cached)
                ;; The approval would show the query's URL, and not the key.
                (should (equal (plist-get (lispm-tool-target "web_search" agent
                                                             '(:query "emacs lisp"))
                                          :url)
                               (concat web-search-endpoint "?count=8&q=emacs%20lisp")))
                (let ((result (lispm-tools-call "web_search" agent '(:query "emacs lisp") 10)))
                  (should (plist-get result :ok))
                  (should (string-search "About emacs lisp\nhttps://example.org/about\nAll about emacs lisp."
                                         (plist-get result :text)))
                  (should (string-search "Another result\nhttps://example.org/other"
                                         (plist-get result :text))))
                ;; A wrong key is the API's error, with its status.
                (with-temp-file netrc
                  (insert "machine 127.0.0.1 password wrong-key\n"))
                (auth-source-forget-all-cached)
                (let ((result (lispm-tools-call "web_search" agent '(:query "x") 10)))
                  (should-not (plist-get result :ok))
                  (should (string-search "HTTP 401" (plist-get result :error))))))
          (auth-source-forget-all-cached)
          (delete-file netrc)
          (setq lispm-tools (cl-remove "web_search" lispm-tools :key #'lispm-tool-name
                                       :test #'equal)))))))

(provide 'lispm-web-test)
;;; lispm-web-test.el ends here
