;;; lispm-paste.el --- Emacs's part of delivering a message: the paste  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The sidecar decides when a message goes into an agent's composer (the
;; agent is idle, as its own records say) and cleans it; Emacs only
;; writes it to the pty, because only Emacs owns the terminal.  The
;; message goes as one bracketed paste, and Return follows as a separate
;; write a moment later: Claude Code loses an immediate Return about one
;; time in five, and Codex swallows a Return that arrives with the text.
;;
;; Emacs refuses text that the sidecar's sanitiser (sanitize.py) would
;; still change: a control character, a bidirectional override or
;; isolate, a tag character, or a zero-width character outside a word.
;; The sidecar is the one that cleans, this is the last check; both are
;; tested against the same cases, tests/sanitize-cases.json.
;; It answers "not now" while the CLI shows a dialog that the paste's
;; Return would answer (`lispm-agent-dialog'); the sidecar tries again.

;;; Code:

(require 'lispm-agents)
(require 'lispm-term)

(defcustom lispm-paste-return-delay 0.4
  "Seconds between the paste and the Return that submits it.
A CLI still taking in the paste when the Return comes may keep the
message in its composer, unsent: on a slow machine, wait longer."
  :type 'number
  :group 'lispm-terminal)

(lispm-define-error 'lispm-paste-refused "LispM refuses to paste" 'lispm-error -32052)
;; The sidecar tries again later on this code: it is its `NotNow'.
(lispm-define-error 'lispm-paste-not-now "The agent shows a dialog; paste later"
                    'lispm-error -32007)

(defconst lispm-paste--unclean
  (let ((zero-width '(any (#x200b . #x200f) (#x2060 . #x2064) #x061c #xfeff))
        (space '(any " \t\n" #xa0 #x1680 (#x2000 . #x200a) #x2028 #x2029 #x202f #x205f
                     #x3000)))
    (rx-to-string
     `(or (any (#x00 . #x08) (#x0b . #x1f) (#x7f . #x9f) (#x202a . #x202e)
               (#x2066 . #x2069) (#xe0000 . #xe007f))
          (seq (or bos ,space) ,zero-width)
          (seq ,zero-width (or eos ,space)))
     t))
  "What the sidecar's sanitiser drops: a match means the text is not clean.
Controls but newline and tab, bidirectional embeddings, overrides and
isolates, tag characters, and a zero-width character next to white space
or an end of the text.")

(defun lispm-paste--clean-p (text)
  "Return non-nil if the sidecar's sanitiser would leave TEXT as it is."
  (not (string-match-p lispm-paste--unclean text)))

(defun lispm-paste--refuse (name reason)
  "Signal `lispm-paste-refused' to paste into the agent NAME, for REASON."
  (lispm-signal 'lispm-paste-refused (list name reason) "refused: %S" (list name reason)))

(defun lispm-paste-check (agent)
  "Signal unless a paste into AGENT's composer could go in now.
Signal `lispm-paste-refused' if AGENT has no live terminal, and
`lispm-paste-not-now' if the CLI shows a dialog that a paste's Return
would answer; the fields of either are AGENT's name and why."
  (let ((buffer (lispm-agent-buffer agent))
        (name (lispm-agent-name agent)))
    (unless (lispm-term-live-p buffer)
      (lispm-paste--refuse name "no live terminal"))
    (when-let* ((dialog (lispm-agent-dialog (lispm-agent-kind agent) buffer)))
      (lispm-signal 'lispm-paste-not-now (list name dialog) "%s shows %s" name dialog))))

(defun lispm-paste-submit (agent text)
  "Paste TEXT into AGENT's composer and press Return a moment later.
Signal as `lispm-paste-check' does, and `lispm-paste-refused' if TEXT
holds what the sidecar would have cleaned (see `lispm-paste--unclean')."
  (let ((buffer (lispm-agent-buffer agent)))
    (unless (lispm-paste--clean-p text)
      (lispm-paste--refuse (lispm-agent-name agent) "control or invisible characters"))
    (lispm-paste-check agent)
    (lispm-term-paste buffer text)
    (run-at-time lispm-paste-return-delay nil
                 (lambda ()
                   (when (lispm-term-live-p buffer)
                     (lispm-term-send buffer "\r"))))))

(defun lispm-paste--agent (params)
  "Return the live terminal agent PARAMS name, or signal `lispm-unknown-agent'."
  (or (let ((agent (lispm-agent-from-params params))) (and (lispm-agent-p agent) agent))
      (lispm-signal 'lispm-unknown-agent
                    (list (plist-get params :name) (plist-get params :instance))
                    "no live agent %s (instance %s)"
                    (plist-get params :name) (plist-get params :instance))))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/paste)) params)
  "Paste the message in PARAMS into the composer of the agent they name."
  (lispm-paste-submit (lispm-paste--agent params) (plist-get params :text))
  (list :pasted t))

(cl-defmethod lispm-sidecar-handle-request ((_method (eql 'emacs/paste-ready)) params)
  "Answer whether a paste into the agent PARAMS name could go in now.
The sidecar asks this, with no claim in the ledger, while it waits for a
dialog to close; the answer is an error as for `emacs/paste' if not."
  (lispm-paste-check (lispm-paste--agent params))
  (list :ready t))

(provide 'lispm-paste)
;;; lispm-paste.el ends here
