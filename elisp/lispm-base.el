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

;; The customization group, the version and the root error condition
;; that every other LispM file builds on.  It requires nothing, so any
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

(provide 'lispm-base)
;;; lispm-base.el ends here
