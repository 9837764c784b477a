;;; lispm-base.el --- Shared definitions for LispM  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The customization group, the version, the root error condition and
;; the one way to read a file no buffer visits, which every other LispM
;; file builds on.  It requires nothing, so any
;; LispM library (the protocol code included) can load it alone.

;;; Code:

(defgroup lispm nil
  "A Lisp Machine for AI agents: agent terminals, a sidecar and apps."
  :group 'tools
  :prefix "lispm-")

(defconst lispm-version "0.1.0"
  "The version of the LispM package.")

(defconst lispm-directory
  (file-name-directory (or load-file-name buffer-file-name default-directory))
  "The directory LispM's Lisp files were loaded from.")

(define-error 'lispm-error "LispM error")

(defun lispm-insert-file-text (file &optional beg end)
  "Insert the text of FILE at point, decoded but otherwise literally.
Unlike `insert-file-contents', no file name handler runs, so nothing
is decompressed (a small \".gz\" can hold gigabytes), decrypted (a
\".gpg\" would ask for a passphrase) or fetched by TRAMP, and no
format is decoded; the coding system is detected from the text and
decoded as usual (not from names such as \".gz\", which
`auto-coding-alist' makes binary because a handler would convert
them).  BEG and END are byte offsets, as for `insert-file-contents'.
Return what `insert-file-contents' returns."
  (let ((file-name-handler-alist nil)
        (auto-coding-alist nil)
        (format-alist nil)
        (after-insert-file-functions nil))
    (insert-file-contents file nil beg end)))

(provide 'lispm-base)
;;; lispm-base.el ends here
