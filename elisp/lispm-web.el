;;; lispm-web.el --- The web for agents: fetch_url, through Emacs's url library  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, hypermedia

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The tool `fetch_url' gives an agent a web page as text.  It is of
;; the kind `network', which asks the user by default; the approval
;; shows the URL.
;;
;; Only http and https URLs are fetched, and none with a user name or
;; password in it: anything else (file:, ftp:, data:, ...) is refused
;; before any request, and before anyone is asked.  The fetch goes
;; through Emacs's own url library, so `url-proxy-services' and the
;; user's TLS settings hold, and it is asynchronous (`url-retrieve'):
;; Emacs never waits on the network.  It is bounded three ways:
;;
;;   redirects  url.el is told to follow none; LispM follows them
;;              itself, up to `lispm-web-redirect-limit', and checks
;;              each hop's URL as it checks the first
;;   size       the transfer is watched as it arrives, and cut once
;;              the body passes `lispm-web-size-limit' bytes: what came
;;              is shown, with a note
;;   time       the whole fetch, redirects included, has
;;              `lispm-web-timeout' seconds; then the connection is
;;              closed and the call fails, saying so
;;
;; HTML is rendered to text with shr, which fetches nothing while it
;; renders (no images, no style sheets); each link's target follows
;; its text, as [text](URL).  Plain text, JSON and XML come as they
;; are; any other body (an image, an archive) is described by its type
;; and size, never given as bytes.  The text is cut at
;; `lispm-web-text-limit' characters.
;;
;; `lispm-web-retrieve' is the machinery under the tool, for Lisp that
;; reaches a web API (a skill's search tool, say) with its own method,
;; headers and body; `lispm-web-response-text' makes its response text.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'url)
(require 'url-http)
(require 'mail-parse)
(require 'shr)
(require 'dom)
(require 'lispm-base)
(require 'lispm-tools)
(require 'lispm-secrets)

;;; Errors

;; Its data is its message, then the URL.
(lispm-define-error 'lispm-web-bad-url "Not a URL LispM fetches" 'lispm-tool-bad-args)

;;; Options

(defgroup lispm-web nil
  "The web, as LispM's agents reach it: fetch_url's bounds."
  :group 'lispm-tools
  :prefix "lispm-web-")

(defcustom lispm-web-timeout 30
  "Seconds one `fetch_url' call may take, its redirects included.
Then the connection is closed and the call fails."
  :type 'number)

(defcustom lispm-web-size-limit (* 1024 1024)
  "The most bytes of a response's body `fetch_url' downloads.
The transfer is stopped once the body passes it; what came is shown,
with a note that the rest was not fetched.  It bounds the time shr
takes to render a page too, in Emacs: about a second a megabyte."
  :type 'natnum)

(defcustom lispm-web-redirect-limit 5
  "The most redirects one `fetch_url' call follows."
  :type 'natnum)

(defcustom lispm-web-text-limit 100000
  "The most characters of text one `fetch_url' call returns."
  :type 'natnum)

(defconst lispm-web--render-width 100
  "The width, in columns, shr fills a page's text to.")

;;; URLs

(defun lispm-web-url-problem (url)
  "Return why LispM does not fetch URL, a string; or nil if it does.
It fetches absolute http and https URLs naming a host, without a
user name or password, spaces or control characters in them."
  (if (not (stringp url))
      "it is not a string"
    (let* ((parsed (url-generic-parse-url url))
           (scheme (and (url-type parsed) (downcase (url-type parsed))))
           (host (url-host parsed)))
      (cond ((string-match-p "[[:space:][:cntrl:]]" url)
             "it has spaces or control characters in it (percent-encode them)")
            ((not (member scheme '("http" "https")))
             (format "only http and https URLs are fetched, not %s"
                     (if scheme (concat scheme ": URLs") "a URL without a scheme")))
            ((or (url-user parsed) (url-password parsed)
                 (and host (string-search "@" host)))
             "it has a user name or password in it")
            ((or (null host) (string-empty-p host))
             "it names no host")))))

(defun lispm-web--check-url (url)
  "Signal `lispm-web-bad-url' unless LispM fetches URL; refuse one with a secret.
A URL that holds a secret Emacs knows of (`lispm-secrets-known') would
send it away: it is refused too."
  (when-let* ((problem (lispm-web-url-problem url)))
    (lispm-signal 'lispm-web-bad-url (list url) "%s is not fetched: %s"
                  (if (stringp url) url (format "%S" url)) problem))
  (when-let* ((secret (lispm-secrets-find url (lispm-secrets-known))))
    (lispm-secrets-refuse "fetch_url" 'network
                          (format "the URL holds a secret (%s)" (cdr secret)))))

;;; Fetching

;; The url.el buffer's own variables, which url-http.el sets there.
(defvar url-http-end-of-headers)
(defvar url-http-content-type)
(defvar url-http-response-status)

(defun lispm-web--discard (buffer)
  "Close BUFFER's connection and kill BUFFER, a url.el buffer, soon.
Soon, not now: url.el may still be working in it when this is called."
  (when (buffer-live-p buffer)
    (when-let* ((process (get-buffer-process buffer)))
      (set-process-sentinel process #'ignore)
      (set-process-filter process #'ignore)
      (delete-process process))
    (run-at-time 0 nil (lambda ()
                         (when (buffer-live-p buffer)
                           (let ((kill-buffer-query-functions nil))
                             (kill-buffer buffer)))))))

(defun lispm-web--body-start ()
  "Return the position of the body in the current url.el buffer, or nil.
The body follows the headers; nil until url.el has read them."
  (when (and (markerp url-http-end-of-headers)
             (marker-position url-http-end-of-headers))
    (save-excursion
      (goto-char url-http-end-of-headers)
      (if (eq (char-after) ?\n) (1+ (point)) (point)))))

(defun lispm-web--response (url truncated)
  "Return the response plist of the current url.el buffer, fetched from URL.
TRUNCATED non-nil means the transfer was stopped at the size limit."
  (let* ((start (or (lispm-web--body-start) (point-max)))
         (end (if truncated
                  (min (point-max) (+ start lispm-web-size-limit))
                (point-max)))
         (type (and (stringp url-http-content-type)
                    (mail-header-parse-content-type url-http-content-type))))
    (list :ok t :url url
          :status url-http-response-status
          :content-type (car type)
          :charset (cdr (assq 'charset (cdr type)))
          :body (buffer-substring-no-properties start end)
          :truncated truncated)))

(defun lispm-web--failure-text (url err)
  "Return the message of the failure ERR, from url.el, of fetching URL."
  (pcase err
    (`(error connection-failed ,why . ,_)
     (format "Cannot connect to %s: %s" (url-host (url-generic-parse-url url))
             (string-trim (format "%s" why))))
    (`(error http ,status . ,_)
     (format "HTTP %s %s from %s" status
             (or (nth 2 (assq status url-http-codes)) "") url))
    (_ (format "Fetching %s failed: %s" url
               (if (consp err) (error-message-string err) err)))))

(cl-defun lispm-web-retrieve (url callback &key method data headers)
  "Fetch URL, http or https, and call CALLBACK with the response, later.
Emacs does not wait: this returns at once, a function that cancels
the fetch (CALLBACK is then called with a failure saying so).
CALLBACK is called once, never before this returns, with
\(:ok t :url URL :status CODE :content-type TYPE :charset CHARSET
:body BYTES :truncated CUT), URL the last one fetched after redirects,
TYPE the body's MIME type (\"text/html\") or nil, CHARSET its charset
or nil, BYTES the body, a unibyte string, and CUT non-nil if the
transfer was stopped at `lispm-web-size-limit' bytes; or with (:ok nil
:error TEXT) if the fetch failed, timed out after `lispm-web-timeout'
seconds, made more than `lispm-web-redirect-limit' redirects, or was
redirected to a URL LispM does not fetch (`lispm-web-url-problem').
A status that is not 2xx is a failure, whose text has the status and
the start of the body's text.  METHOD (\"GET\" by default), DATA (a
unibyte string) and HEADERS (an alist of strings) make the request;
they are not sent again on a redirect, which is a GET."
  (let* ((finished nil) (buffer nil) (timer nil) (hops 0) (current url))
    (cl-labels
        ((finish (result)
           (unless finished
             (setq finished t)
             (when timer (cancel-timer timer))
             (lispm-web--discard buffer)
             (run-at-time 0 nil callback result)))
         (fail (format-string &rest args)
           (finish (list :ok nil :error (apply #'format-message format-string args))))
         (watch (_start _end _length)
           ;; In `after-change-functions', as url.el inserts what came.
           (let* ((start (lispm-web--body-start))
                  (size (- (point-max) (or start (point-min)))))
             (when (and (not finished) (> size lispm-web-size-limit))
               (if start
                   (finish (lispm-web--response current t))
                 (fail "The headers from %s are longer than %d bytes; the \
transfer was stopped" current lispm-web-size-limit)))))
         (arrived (status this)
           (when (and (not finished) (eq this buffer))
             (condition-case err
                 (let ((failure (plist-get status :error)))
                   (pcase failure
                     (`(error http-redirect-limit ,next . ,_)
                      (redirect next))
                     ('nil
                      (if (and (integerp url-http-response-status)
                               (<= 200 url-http-response-status 299))
                          (finish (lispm-web--response current nil))
                        (fail "HTTP %s from %s, which LispM does not follow"
                              url-http-response-status current)))
                     (`(error http . ,_)
                      (let ((text (ignore-errors
                                    (lispm-web-response-text
                                     (lispm-web--response current nil)))))
                        (fail "%s%s" (lispm-web--failure-text current failure)
                              (if (and text (not (string-blank-p text)))
                                  (concat ":\n" (truncate-string-to-width
                                                 (string-trim text) 500 nil nil "…"))
                                ""))))
                     (_ (fail "%s" (lispm-web--failure-text current failure)))))
               (error (fail "Fetching %s failed: %s" current (error-message-string err))))))
         (redirect (next)
           (cl-incf hops)
           (cond ((> hops lispm-web-redirect-limit)
                  (fail "%s made more than %d redirects (the last to %s); not followed"
                        url lispm-web-redirect-limit next))
                 ((lispm-web-url-problem next)
                  (fail "%s redirected to %s, which is refused: %s"
                        current next (lispm-web-url-problem next)))
                 (t (lispm-web--discard buffer)
                    (setq method nil data nil headers nil)
                    (start next))))
         (start (target)
           (setq current target)
           (condition-case err
               (let* ((url-request-method (or method "GET"))
                      (url-request-data data)
                      (url-request-extra-headers headers)
                      (url-request-noninteractive t)
                      (url-mime-encoding-string nil)
                      (url-http-attempt-keepalives nil)
                      (url-max-redirections 0)
                      (url-automatic-caching nil)
                      (this nil))
                 (setq this (url-retrieve target (lambda (status) (arrived status this))
                                          nil t t)
                       buffer this)
                 (with-current-buffer this
                   ;; url.el reads these later, in this buffer, as the
                   ;; answer comes: so no redirect is followed behind
                   ;; LispM's back, no compressed body is inflated, and
                   ;; nothing is written to url.el's cache.
                   (setq-local url-max-redirections 0
                               url-automatic-caching nil
                               url-mime-encoding-string nil
                               url-http-attempt-keepalives nil
                               url-request-noninteractive t)
                   (add-hook 'after-change-functions #'watch nil t)
                   (add-hook 'kill-buffer-hook
                             (lambda ()
                               (when (eq this buffer)
                                 (fail "The connection to %s was closed in Emacs" target)))
                             nil t)))
             (error (fail "Cannot fetch %s: %s" target (error-message-string err))))))
      (if-let* ((problem (lispm-web-url-problem url)))
          (fail "%s is not fetched: %s" url problem)
        (setq timer (run-at-time
                     lispm-web-timeout nil
                     (lambda ()
                       (let ((size (if (buffer-live-p buffer)
                                       (buffer-size buffer)
                                     0)))
                         (fail "No whole answer from %s within %s seconds (%d bytes came); \
the connection was closed" current lispm-web-timeout size)))))
        (start url))
      (lambda () (fail "The fetch of %s was cancelled" current)))))

;;; Text

(defconst lispm-web--text-types
  '("application/json" "application/ld+json" "application/xml" "application/javascript"
    "application/x-ndjson" "application/yaml" "application/toml" "application/x-sh")
  "MIME types outside text/* whose bodies are text.")

(defun lispm-web--html-p (type)
  "Return non-nil if the MIME type TYPE is HTML's."
  (member type '("text/html" "application/xhtml+xml")))

(defun lispm-web--text-type-p (type)
  "Return non-nil if the MIME type TYPE is that of text."
  (or (string-prefix-p "text/" type)
      (member type lispm-web--text-types)
      (string-match-p "+\\(?:json\\|xml\\)\\'" type)))

(defun lispm-web--coding (charset body html)
  "Return the coding system to decode BODY with, given CHARSET from its headers.
If HTML and there is no CHARSET, a <meta> charset in BODY's start
counts; else UTF-8."
  (or (and charset (ignore-errors (coding-system-from-name charset)))
      (and html
           (let ((case-fold-search t))
             (string-match "<meta[^>]*charset=[\"']?\\([-_A-Za-z0-9]+\\)"
                           (substring body 0 (min 2048 (length body)))))
           (ignore-errors (coding-system-from-name (match-string 1 body))))
      'utf-8))

(defun lispm-web--link (href base)
  "Return the URL to show for a link to HREF on a page from BASE, or nil.
A link within the page, or to a script, has none."
  (when (and (stringp href)
             (not (string-prefix-p "#" href))
             (not (string-match-p "\\`javascript:" href)))
    (if (string-match-p "\\`[A-Za-z][-+.A-Za-z0-9]*:" href)
        href
      (url-expand-file-name href base))))

(defun lispm-web-html-text (html base)
  "Return the text of HTML, a string, as shr renders it; BASE is its URL.
Nothing is fetched: no image, no style sheet.  Each link's URL,
relative ones expanded against BASE, follows its text: [text](URL)."
  (with-temp-buffer
    (insert html)
    (let ((dom (libxml-parse-html-region (point-min) (point-max) base))
          (shr-inhibit-images t)
          (shr-blocked-images "")
          (shr-use-fonts nil)
          (shr-use-colors nil)
          (shr-width lispm-web--render-width)
          (shr-external-rendering-functions nil)
          (shr-discard-aria-hidden t))
      (erase-buffer)
      (shr-insert-document dom)
      (let ((pos (point-min)))
        (while (< pos (point-max))
          (let ((end (next-single-property-change pos 'shr-url nil (point-max))))
            (when-let* ((link (lispm-web--link (get-text-property pos 'shr-url) base)))
              (goto-char end)
              (insert "](" link ")")
              (setq end (point))
              (goto-char pos)
              (insert "[")
              (cl-incf end))
            (setq pos end))))
      (string-trim (buffer-substring-no-properties (point-min) (point-max))))))

(defun lispm-web-response-text (response)
  "Return the text of RESPONSE, a plist from `lispm-web-retrieve'.
HTML is rendered (`lispm-web-html-text'); other text is decoded as
its charset says; a body of any other type is a note of its type and
size.  A body without a type counts as text unless it has NUL bytes."
  (let* ((body (plist-get response :body))
         (type (plist-get response :content-type))
         (textual (if type
                      (or (lispm-web--html-p type) (lispm-web--text-type-p type))
                    (not (string-search "\0" (substring body 0 (min 4096 (length body)))))))
         (html (and textual
                    (if type
                        (lispm-web--html-p type)
                      (let ((case-fold-search t))
                        (string-match-p "\\`[[:space:]]*<\\(?:!doctype html\\|html\\)"
                                        body))))))
    (if (not textual)
        (format "[A body of type %s, %d bytes%s: not text, so not shown]"
                type (length body) (if (plist-get response :truncated) " or more" ""))
      (let ((text (decode-coding-string body (lispm-web--coding
                                              (plist-get response :charset) body html))))
        (if (and html (libxml-available-p))
            (lispm-web-html-text text (plist-get response :url))
          text)))))

(defun lispm-web--tool-text (url response)
  "Return what `fetch_url' of URL answers, given the RESPONSE plist."
  (let* ((text (lispm-web-response-text response))
         (final (plist-get response :url))
         (total (length text)))
    (concat
     (if (equal final url) "" (format "URL: %s (redirected from %s)\n" final url))
     (format "Content-Type: %s\n\n" (or (plist-get response :content-type) "unknown"))
     ;; Bytes that did not decode are no text JSON can carry.
     (replace-regexp-in-string
      (rx (any (#x3fff80 . #x3fffff))) "\ufffd"
      (if (> total lispm-web-text-limit) (substring text 0 lispm-web-text-limit) text)
      t t)
     (if (> total lispm-web-text-limit)
         (format "\n[… %d more characters not shown]" (- total lispm-web-text-limit))
       "")
     (if (plist-get response :truncated)
         (format "\n[The body was longer than %d bytes: the transfer was stopped there, \
so this is only its start]" lispm-web-size-limit)
       ""))))

(lispm-define-tool fetch-url ((url string "The http or https URL to fetch."))
  "Fetch the web page at URL and return it as text.
HTML is rendered as text, each link as [text](URL); plain text and
JSON come as they are; an image or other binary body only as a note
of its type and size.  Only http and https; redirects, size and time
are bounded (`lispm-web-redirect-limit', `lispm-web-size-limit',
`lispm-web-timeout'), and Emacs never waits on the network."
  :kind 'network
  ;; :names, the host, is what a rule's patterns match: (network allow ("*.gnu.org")).
  :target (progn (lispm-web--check-url url)
                 (list :url url :names (list (url-host (url-generic-parse-url url)))))
  (lispm-web--check-url url)
  (lispm-tools-defer
   (lambda (done)
     (lispm-web-retrieve
      url (lambda (response)
            (funcall done (if (plist-get response :ok)
                              (condition-case err
                                  (list :ok t :text (lispm-web--tool-text url response))
                                (error (list :ok nil :error (format "Rendering %s failed: %s"
                                                                    url (error-message-string err)))))
                            response)))))))

(provide 'lispm-web)
;;; lispm-web.el ends here
