;;; lispm-resume.el --- Agents come back after Emacs restarts  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; LispM remembers its agents in `lispm-agents-file': for each Emacs
;; that ran some (its pid and start time), their name, kind, folder and
;; the CLI's own session id.  The file is rewritten, atomically, when an
;; agent starts, learns its session id, has messages waiting or closes;
;; an agent that closes is forgotten.  When Emacs exits cleanly
;; (`kill-emacs-hook') its agents stay remembered, marked clean.
;;
;; After Emacs restarts, `lispm-resume-agents' starts remembered agents
;; again under the same names, each with its CLI's own resume (Claude
;; Code's `--resume', `codex resume', Hermes's `--resume'; an OpenClaw or
;; Holon agent of the same name has the same session anyway), and the
;; sidecar delivers what waits for them.  `lispm-forget-agents' declines:
;; the sidecar ends what they left (their requests end, their queued
;; messages fail, with the reason in the ledger).  The first `M-x lispm'
;; after an unclean exit, or after an exit that left messages waiting,
;; asks which of the two to do.

;;; Code:

(require 'cl-lib)
(require 'lispm-base)
(require 'lispm-sidecar)
(require 'lispm-agents)

(defcustom lispm-agents-file (locate-user-emacs-file "lispm/agents.eld")
  "The file where LispM remembers its agents, to resume them after a restart."
  :type 'file
  :group 'lispm)

(define-error 'lispm-agents-file-malformed "LispM's agents file is malformed" 'lispm-error)

(defconst lispm-resume--version 1
  "The format of `lispm-agents-file'.")

;;; The file

(defun lispm-resume--valid-agent-p (record)
  "Return non-nil if RECORD is a well-formed remembered agent."
  (and (proper-list-p record)
       (stringp (plist-get record :name))
       (symbolp (plist-get record :kind))
       (stringp (plist-get record :folder))
       (let ((session (plist-get record :session)))
         (or (null session) (stringp session)))))

(defun lispm-resume--valid-life-p (life)
  "Return non-nil if LIFE is a well-formed entry of one Emacs."
  (and (proper-list-p life)
       (natnump (plist-get life :emacs-pid))
       (proper-list-p (plist-get life :agents))
       (cl-every #'lispm-resume--valid-agent-p (plist-get life :agents))))

(defun lispm-resume--read ()
  "Return the lives recorded in `lispm-agents-file', or nil if there is none.
Signal `lispm-agents-file-malformed' with the file and the reason if it
cannot be read as LispM wrote it."
  (when (file-exists-p lispm-agents-file)
    (let ((data (with-temp-buffer
                  (let ((file-name-handler-alist nil))
                    (insert-file-contents lispm-agents-file))
                  (goto-char (point-min))
                  (condition-case err
                      (prog1 (read (current-buffer))
                        (skip-chars-forward " \t\n")
                        (unless (eobp)
                          (signal 'lispm-agents-file-malformed
                                  (list lispm-agents-file "text after the data"))))
                    ((end-of-file invalid-read-syntax)
                     (signal 'lispm-agents-file-malformed
                             (list lispm-agents-file (error-message-string err))))))))
      (unless (and (proper-list-p data)
                   (eql (plist-get data :version) lispm-resume--version)
                   (proper-list-p (plist-get data :lives))
                   (cl-every #'lispm-resume--valid-life-p (plist-get data :lives)))
        (signal 'lispm-agents-file-malformed
                (list lispm-agents-file (format "not a version %d agents file"
                                                lispm-resume--version))))
      (plist-get data :lives))))

(defun lispm-resume--set-aside (reason)
  "Rename the malformed `lispm-agents-file' aside, warn saying REASON, return nil."
  (let ((kept (format "%s.malformed-%s" lispm-agents-file
                      (format-time-string "%Y%m%dT%H%M%S"))))
    (rename-file lispm-agents-file kept t)
    (display-warning
     'lispm (format "%s is malformed (%s): kept it as %s; LispM starts a new one"
                    lispm-agents-file reason kept)
     :warning)
    nil))

(defun lispm-resume--lives ()
  "Return the recorded lives; a malformed file is set aside with a warning."
  (condition-case err
      (lispm-resume--read)
    (lispm-agents-file-malformed (lispm-resume--set-aside (nth 2 err)))))

(defun lispm-resume--write (lives)
  "Write LIVES to `lispm-agents-file', atomically, readable by the user only."
  (let* ((file lispm-agents-file)
         (dir (file-name-directory (expand-file-name file))))
    (unless (file-directory-p dir)
      (with-file-modes #o700 (make-directory dir t)))
    (with-file-modes #o600
      (lispm-write-file-whole
       file (with-temp-buffer
              (let ((print-length nil) (print-level nil))
                (insert ";; LispM's agents, to resume after Emacs restarts.  -*- lisp-data -*-\n")
                (prin1 (list :version lispm-resume--version :lives lives) (current-buffer))
                (insert "\n"))
              (buffer-string))
       ;; Written often, and whole after any crash of Emacs: not flushed.
       'utf-8-unix t))))

;;; Lives: one Emacs's agents

(defun lispm-resume--start-time (pid)
  "Return when process PID started, in seconds since the epoch, or nil."
  (when-let* ((start (alist-get 'start (process-attributes pid))))
    (float-time start)))

(defun lispm-resume--alive-p (life)
  "Return non-nil if the Emacs that recorded LIFE is still running."
  (let ((pid (plist-get life :emacs-pid)))
    (or (eql pid (emacs-pid))
        (when-let* ((started (lispm-resume--start-time pid)))
          (let ((recorded (plist-get life :emacs-start)))
            (or (not (numberp recorded)) (< (abs (- started recorded)) 2)))))))

(defun lispm-resume--record (agent)
  "Return what is remembered of AGENT, a terminal agent.
Actors without a terminal are not remembered here."
  (list :name (lispm-agent-name agent)
        :kind (lispm-agent-kind agent)
        :folder (lispm-agent-folder agent)
        :session (lispm-agent-session agent)
        :waiting (> (or (lispm-agent-queued agent) 0) 0)))

(defvar lispm-resume--saved 'unsaved
  "This Emacs's agents as last written to `lispm-agents-file'.")

(defvar lispm-resume--exited nil
  "Non-nil once Emacs is exiting: the agents it ran stay as they were.")

(defun lispm-resume--own-life (agents &optional clean)
  "Return this Emacs's entry for the remembered AGENTS; CLEAN if it exits so."
  (list :emacs-pid (emacs-pid)
        :emacs-start (lispm-resume--start-time (emacs-pid))
        :clean clean
        :agents agents))

(defun lispm-resume--update (edit &optional clean)
  "Rewrite the file: EDIT the other Emacsen's lives, record this one's agents.
EDIT is called with the lives of Emacsen that are no longer running and
returns them as they are to be kept.  CLEAN marks this Emacs's agents as
left by a clean exit.  An agent of a name that runs here now is no longer
remembered from an earlier Emacs: it was resumed, or replaced."
  (let* ((agents (mapcar #'lispm-resume--record (cl-remove-if-not #'lispm-agent-p (lispm-agents))))
         (names (mapcar (lambda (a) (plist-get a :name)) agents))
         (lives (lispm-resume--lives))
         (others (cl-remove-if (lambda (life) (eql (plist-get life :emacs-pid) (emacs-pid)))
                               lives))
         (running (cl-remove-if-not #'lispm-resume--alive-p others))
         (dead (funcall edit (cl-remove-if #'lispm-resume--alive-p others)))
         (dead (cl-loop for life in dead
                        for kept = (cl-remove-if (lambda (a) (member (plist-get a :name) names))
                                                 (plist-get life :agents))
                        when kept collect (plist-put (copy-sequence life) :agents kept))))
    (lispm-resume--write (append running dead
                                 (and agents (list (lispm-resume--own-life agents clean)))))
    (setq lispm-resume--saved agents)))

(defun lispm-resume--save ()
  "Remember this Emacs's agents, if they changed since they were last written."
  (unless lispm-resume--exited
    (let ((agents (mapcar #'lispm-resume--record (cl-remove-if-not #'lispm-agent-p (lispm-agents)))))
      (unless (equal agents lispm-resume--saved)
        (condition-case err
            (lispm-resume--update #'identity)
          (file-error (message "LispM: cannot remember the agents in %s: %s"
                               lispm-agents-file (error-message-string err))))))))

(defun lispm-resume--exit ()
  "Emacs exits cleanly: its agents stay remembered, marked clean."
  (unless lispm-resume--exited
    (when (lispm-agents)
      (ignore-errors (lispm-resume--update #'identity t)))
    (setq lispm-resume--exited t)))

(add-hook 'lispm-agents-changed-hook #'lispm-resume--save)
;; Early, before anything else that runs at exit could close the agents.
(add-hook 'kill-emacs-hook #'lispm-resume--exit -90)

;;; Remembered agents

(defun lispm-resume-remembered ()
  "Return the agents of Emacsen no longer running, as plists, oldest first.
Each has :name, :kind, :folder, :session (the CLI's session id, or nil),
:waiting (messages were queued for it) and :clean (its Emacs exited
cleanly).  Names that run in this Emacs are left out."
  (let ((seen (mapcar #'lispm-actor-name (lispm-agents))))
    (cl-loop for life in (lispm-resume--lives)
             unless (lispm-resume--alive-p life)
             append (cl-loop for agent in (plist-get life :agents)
                             for name = (plist-get agent :name)
                             unless (member name seen)
                             do (push name seen)
                             and collect (append agent (list :clean (plist-get life :clean)))))))

(defun lispm-resume--drop (names)
  "Stop remembering the agents NAMES of Emacsen that are no longer running."
  (lispm-resume--update
   (lambda (lives)
     (cl-loop for life in lives
              collect (plist-put (copy-sequence life) :agents
                                 (cl-remove-if (lambda (a) (member (plist-get a :name) names))
                                               (plist-get life :agents)))))))

(defun lispm-resume--pick (prompt records)
  "Ask with PROMPT which of RECORDS to take; empty input means all of them."
  (let* ((names (mapcar (lambda (r) (plist-get r :name)) records))
         (chosen (completing-read-multiple prompt names nil t)))
    (if chosen
        (cl-remove-if-not (lambda (r) (member (plist-get r :name) chosen)) records)
      records)))

(defun lispm-resume--select (names prompt)
  "Return the remembered agents NAMES mean, asking with PROMPT if NAMES is nil.
NAMES is a list of names, or t for all of them."
  (let ((records (lispm-resume-remembered)))
    (unless records
      (user-error "No agents of an earlier Emacs are remembered"))
    (cond ((eq names t) records)
          (names (or (cl-remove-if-not (lambda (r) (member (plist-get r :name) names))
                                       records)
                     (user-error "None of %s is remembered" (string-join names ", "))))
          (t (lispm-resume--pick prompt records)))))

(defun lispm-resume--start (record)
  "Start the remembered agent RECORD again, resuming its CLI's session.
Return the agent, or nil after saying why it could not start."
  (let ((kind (plist-get record :kind))
        (name (plist-get record :name))
        (folder (plist-get record :folder)))
    (condition-case err
        (progn
          (unless (assq kind lispm-agent-kinds)
            (user-error "Unknown agent kind %s" kind))
          (unless (file-directory-p folder)
            (user-error "Its folder %s is gone" folder))
          (lispm-agent-start kind folder nil name (or (plist-get record :session) t)))
      (user-error (message "LispM: cannot resume %s: %s" name (error-message-string err))
                  nil))))

;;;###autoload
(defun lispm-resume-agents (&optional names)
  "Start again the agents an earlier Emacs ran, under the same names.
Each CLI resumes its own session (Claude Code's and Hermes's `--resume',
`codex resume'; an OpenClaw or Holon agent of the same name has the same
session), or starts afresh if it had none; then what waits for it is
delivered.  Interactively, pick them (empty input: all).  From Lisp,
NAMES is a list of names, or t for all.  Return the agents started."
  (interactive)
  (let ((started (delq nil (mapcar #'lispm-resume--start
                                   (lispm-resume--select names "Resume agents (empty: all): ")))))
    (when started
      (message "LispM: resuming %s" (mapconcat #'lispm-agent-name started ", ")))
    started))

;;;###autoload
(defun lispm-forget-agents (&optional names)
  "Forget agents an earlier Emacs ran: they will not be resumed.
What waits for them is delivered to no one: their open requests end
\(each asker is told), the messages queued for them fail, and the ledger
records why.  Interactively, pick them (empty input: all).  From Lisp,
NAMES is a list of names, or t for all."
  (interactive)
  (let ((chosen (mapcar (lambda (r) (plist-get r :name))
                        (lispm-resume--select names "Forget agents (empty: all): "))))
    (lispm-sidecar-async-request
     'lispm/agents-forget (list :names (vconcat chosen))
     :on-success (lambda (result)
                   (let ((forgotten (append (plist-get result :forgotten) nil)))
                     (lispm-resume--drop forgotten)
                     (message "LispM: forgot %s" (string-join forgotten ", "))))
     :on-error (lambda (text) (message "LispM: cannot forget %s: %s"
                                       (string-join chosen ", ") text)))
    chosen))

;;; The offer on the first `M-x lispm'

(defvar lispm-resume--offered nil
  "Non-nil once this Emacs has offered to resume the remembered agents.")

(defun lispm-resume--worth-offering (records)
  "Return non-nil if RECORDS were left by an unclean exit or with messages waiting."
  (cl-some (lambda (r) (or (not (plist-get r :clean)) (plist-get r :waiting))) records))

(defun lispm-resume-offer ()
  "Offer, once per Emacs, to resume the agents an unclean exit left.
Also after a clean exit that left messages waiting for them.  The user
resumes all, chooses which to resume (the others stay remembered), or
forgets them all."
  (unless lispm-resume--offered
    (setq lispm-resume--offered t)
    (let ((records (lispm-resume-remembered)))
      (when (lispm-resume--worth-offering records)
        (let ((names (mapcar (lambda (r) (plist-get r :name)) records)))
          (pcase (car (condition-case nil
                          (read-multiple-choice
                           (format "LispM: %s ran when Emacs last exited.  "
                                   (string-join names ", "))
                           '((?r "resume all" "Start them again, each resuming its session")
                             (?c "choose" "Pick which to resume; the others stay remembered")
                             (?f "forget" "Do not resume them; end what waits for them")))
                        (quit nil)))
            (?r (lispm-resume-agents t))
            (?c (lispm-resume-agents))
            (?f (lispm-forget-agents t))
            (_ (message "LispM: M-x lispm-resume-agents brings them back later"))))))))

(provide 'lispm-resume)
;;; lispm-resume.el ends here
