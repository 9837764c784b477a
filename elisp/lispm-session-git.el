;;; lispm-session-git.el --- The sessions' git: commits made in order, never waited for  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; Author: The LispM authors
;; Keywords: tools, processes

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The plumbing under lispm-session.el, as magit-git.el and
;; magit-process.el are magit's: it commits files of a sessions
;; directory, a git repository of LispM's own, and knows nothing of
;; what they hold.  Its entry is `lispm-sessions-enqueue' (a file just
;; written, and the commit's message); tests and benchmarks wait with
;; `lispm-sessions-wait-for-commits', and Emacs's end calls
;; `lispm-sessions-stop'.
;;
;; The commits of a sessions directory are made in order by one
;; long-lived pipeline: a small `sh' that Emacs gives one short record
;; per commit, and the `git fast-import' the shell feeds.  A record
;; names the commit (its ref, its message, its time) and the file, and
;; the shell gives git the commit with the file's bytes.  So Emacs never
;; writes a file's text to a pipe, and never waits for git to read one.
;;
;; A session file is never written in place: each save writes the whole
;; document to a new file and renames it over the old
;; (`lispm-write-file-whole'), so a crash leaves the last document saved
;; or the new one, never one cut.  Nothing is flushed: the threat is
;; Emacs's death, and the kernel keeps what Emacs wrote; a turn's commit
;; is flushed by git.  A commit is queued with a name of its own for the
;; file as it is then, a hard link (or, where there are none, a copy):
;; no later save can change that file, so each commit holds the document
;; as its turn left it, however late git takes it.  The shell gives git
;; a commit only once it has the whole record and its file: a commit
;; Emacs died while giving, or whose file is gone, is not made.  And
;; git's output reaches Emacs through the shell, which keeps reading it
;; once Emacs is gone, so git goes on to the last commit it was given.
;; What an Emacs that died left (pinned files, a save's new file) the
;; next one removes when it is old (`lispm-sessions--sweep').

;;; Code:

(require 'cl-lib)
(require 'subr-x)

;;; Options

(defcustom lispm-sessions-git-program "git"
  "The git program that commits the sessions."
  :type 'string
  :group 'lispm-session)

(defconst lispm-sessions--git-timeout 60
  "Seconds after which a git process of the sessions is given up.")

;;; The queue and its importer

(cl-defstruct (lispm-sessions--queue (:constructor lispm-sessions--make-queue)
                                     (:copier nil))
  "The git commits of one sessions directory, made in order."
  (directory nil :documentation "The directory, a repository of its own.")
  (pending nil :documentation "The commits not yet given to the shell, oldest first.")
  (copying nil :documentation "The commits given to the shell, not yet made.")
  (sent nil :documentation "The serials of the commits given to the shell, not yet made.")
  (serial 0 :documentation "The serial of the last commit given to the shell.")
  (running nil :documentation "Non-nil while a one-off git command runs.")
  (state nil :documentation "nil (not checked yet), `ready' or `broken'.")
  (ref nil :documentation "The branch HEAD names, which LispM commits to; nil: unknown.")
  (branch nil :documentation "`yes' or `no': whether the branch has commits; nil: unknown.")
  (importer nil :documentation "The shell feeding `git fast-import', or nil.")
  (copies nil :documentation "The folder of the shell's copies; nil: not made yet.")
  (output "" :documentation "What the importer said last, for errors.")
  (program nil :documentation "The git program checked.")
  (done 0 :documentation "The commits made.")
  (failed 0 :documentation "The commits that failed.")
  (error nil :documentation "What went wrong last, a string."))

(defconst lispm-sessions--gc-every 100
  "After this many commits, `git gc --auto' gathers the importer's packs.")

(defconst lispm-sessions--in-flight 32
  "At most this many commits are given to the importer and not yet made.
A record is a few hundred bytes: well under a pipe's 64 KiB, so
`process-send-string' never waits on a shell or git that stopped
reading; the rest waits in the queue until git says it made some.")

(defvar lispm-sessions--queues (make-hash-table :test #'equal)
  "The commit queue of each sessions directory.")

(defvar lispm-sessions--warned nil
  "Non-nil once LispM warned that sessions are not committed.")

(defun lispm-sessions--warn (format-string &rest args)
  "Warn once per Emacs session, with FORMAT-STRING and ARGS."
  (unless lispm-sessions--warned
    (setq lispm-sessions--warned t)
    (display-warning 'lispm-session (apply #'format-message format-string args))))

(defun lispm-sessions--environment (directory)
  "Return the environment of git for the repository in DIRECTORY."
  (let ((git-dir (expand-file-name ".git" directory)))
    (append
     (list (concat "GIT_DIR=" git-dir)
           (concat "GIT_WORK_TREE=" (directory-file-name directory))
           (concat "GIT_CEILING_DIRECTORIES="
                   (directory-file-name (file-name-directory (directory-file-name directory))))
           "GIT_CONFIG_NOSYSTEM=1" "GIT_CONFIG_GLOBAL=/dev/null"
           "GIT_TERMINAL_PROMPT=0" "GIT_OPTIONAL_LOCKS=0"
           "GIT_AUTHOR_NAME=LispM" "GIT_AUTHOR_EMAIL=lispm@localhost"
           "GIT_COMMITTER_NAME=LispM" "GIT_COMMITTER_EMAIL=lispm@localhost"
           "LC_ALL=C")
     ;; Unset: what would point git elsewhere or configure it.
     '("GIT_INDEX_FILE" "GIT_OBJECT_DIRECTORY" "GIT_ALTERNATE_OBJECT_DIRECTORIES"
       "GIT_COMMON_DIR" "GIT_NAMESPACE" "GIT_CONFIG" "GIT_CONFIG_PARAMETERS"
       "GIT_CONFIG_COUNT" "GIT_AUTHOR_DATE" "GIT_COMMITTER_DATE"))))

(defconst lispm-sessions--git-options
  '("-c" "user.name=LispM" "-c" "user.email=lispm@localhost"
    "-c" "commit.gpgsign=false" "-c" "core.hooksPath=/dev/null"
    "-c" "init.defaultBranch=main" "-c" "core.autocrlf=false"
    "-c" "core.fsmonitor=false")
  "The options every git command of the sessions gets.")

(defconst lispm-sessions--importer-script
"trap '' PIPE
feed() {
  commit=
  while IFS= read -r line; do
    case $line in
      '|commit '*) commit=${line#|}'
' ;;
      '|'*) commit=$commit${line#|}'
' ;;
      'lispm '*)
        n=${line#lispm }
        file=${n#* }
        n=${n%% *}
        if { size=$(wc -c < \"$file\"); } 2>/dev/null; then
          printf '%sdata %s\\n' \"$commit\" $size
          cat \"$file\"
          printf '\\ncheckpoint\\nprogress lispm %s\\n' \"$n\"
        else
          printf 'progress lispm %s lost\\n' \"$n\"
        fi
        rm -f \"$file\"
        commit= ;;
    esac
  done
}
relay() {
  while IFS= read -r line || [ -n \"$line\" ]; do
    printf '%s\\n' \"$line\" 2>/dev/null
  done
}
feed | \"$@\" 2>&1 | relay
"
  "The POSIX shell between Emacs and `git fast-import'.
Its arguments: the git command it feeds.  It reads lines from Emacs:
one that starts with `|' is a fast-import command (kept, without the
`|'; a `|commit' line starts them again), and `lispm N FILE' ends
commit N: FILE is its file, a name of its own that no save changes
\(`lispm-sessions--pin').  Only then does
git get the commit's commands kept, FILE's bytes as the file's `data',
`checkpoint', and `progress lispm N' (git says that line when N is
made); FILE is then removed.  So a commit Emacs did not give whole
\(Emacs died mid-record) reaches git not at all, never one without its
file.  If FILE cannot be read, git gets nothing of N, and Emacs gets
`progress lispm N lost'.  What git says goes to Emacs through the
shell's relay, which takes it all whether Emacs is there or not: git,
whose output Emacs's end would break, would die at its next line.  So
Emacs's end stops neither the shell nor git: what Emacs gave them whole
is still committed.")

(defun lispm-sessions--git-command (queue args)
  "Return the command line of QUEUE's git, with ARGS."
  (append (list (lispm-sessions--queue-program queue)) lispm-sessions--git-options args))

(defun lispm-sessions--start (queue command &rest properties)
  "Start COMMAND for QUEUE; PROPERTIES go to `make-process'.
Return the process, or nil (with QUEUE's error set) if it cannot start."
  (let* ((directory (lispm-sessions--queue-directory queue))
         (default-directory directory)
         (process-environment (append (lispm-sessions--environment directory)
                                      process-environment)))
    (condition-case err
        (apply #'make-process
               :name "lispm-sessions-git"
               :command command
               :connection-type 'pipe :noquery t
               properties)
      (error (setf (lispm-sessions--queue-error queue) (error-message-string err))
             nil))))

(defun lispm-sessions--git (queue args callback)
  "Run the one-off git command ARGS for QUEUE.
Call CALLBACK with non-nil if it succeeded, and its output; give up
after `lispm-sessions--git-timeout' seconds."
  (let* ((output nil) (timer nil) (called nil)
         (process
          (lispm-sessions--start
           queue (lispm-sessions--git-command queue args) :coding 'utf-8-unix
           :filter (lambda (_process text) (push text output))
           :sentinel (lambda (process _event)
                       (unless (or called (process-live-p process))
                         (setq called t)
                         (when timer (cancel-timer timer))
                         (funcall callback
                                  (and (eq (process-status process) 'exit)
                                       (zerop (process-exit-status process)))
                                  (apply #'concat (nreverse output))))))))
    (if (not process)
        (funcall callback nil (or (lispm-sessions--queue-error queue) ""))
      (setq timer (run-at-time lispm-sessions--git-timeout nil
                               (lambda ()
                                 (when (process-live-p process)
                                   (push "\n[LispM: git took too long]" output)
                                   (delete-process process)))))
      ;; A quick git may be gone already: then its sentinel tells.
      (condition-case nil (process-send-eof process) (error nil)))))

(defun lispm-sessions--queue (directory)
  "Return the commit queue of DIRECTORY, made if need be."
  (let ((directory (file-name-as-directory (expand-file-name directory))))
    (or (gethash directory lispm-sessions--queues)
        (puthash directory (lispm-sessions--make-queue :directory directory)
                 lispm-sessions--queues))))

(defun lispm-sessions--forget (job)
  "Delete what was made for JOB, a commit: its pinned file."
  (ignore-errors (delete-file (plist-get job :source))))

(defun lispm-sessions--drop-pending (queue)
  "Give up the commits of QUEUE not given to the shell yet."
  (dolist (job (lispm-sessions--queue-pending queue))
    (lispm-sessions--forget job))
  (setf (lispm-sessions--queue-pending queue) nil))

(defun lispm-sessions--break (queue why)
  "Give up committing in QUEUE, because of WHY; the files stay saved."
  (setf (lispm-sessions--queue-state queue) 'broken
        (lispm-sessions--queue-error queue) why)
  (lispm-sessions--drop-pending queue)
  (lispm-sessions--warn "Sessions are saved in %s but not committed: %s"
                        (lispm-sessions--queue-directory queue) why))

(defun lispm-sessions--importer-output (queue text)
  "Take TEXT, what QUEUE's importer said: the commits made."
  (let ((output (concat (lispm-sessions--queue-output queue) text))
        (start 0))
    (while (string-match "^progress lispm \\([0-9]+\\)\\( lost\\)?\n" output start)
      (setq start (match-end 0))
      (let ((serial (string-to-number (match-string 1 output)))
            (lost (match-beginning 2)))
        (while (and (lispm-sessions--queue-copying queue)
                    (<= (plist-get (car (lispm-sessions--queue-copying queue)) :serial)
                        serial))
          (lispm-sessions--forget (pop (lispm-sessions--queue-copying queue))))
        (while (and (lispm-sessions--queue-sent queue)
                    (<= (car (lispm-sessions--queue-sent queue)) serial))
          (pop (lispm-sessions--queue-sent queue))
          (cond
           (lost
            ;; Its file was gone (removed by hand, or as too old):
            ;; no commit rather than one without it.
            (cl-incf (lispm-sessions--queue-failed queue))
            (lispm-sessions--warn "A session commit in %s was not made: its file was gone"
                                  (lispm-sessions--queue-directory queue)))
           ((zerop (% (cl-incf (lispm-sessions--queue-done queue))
                      lispm-sessions--gc-every))
            ;; Each checkpoint leaves a pack: gather them now and then.
            (lispm-sessions--git queue '("gc" "--auto" "--quiet") #'ignore))))
        (unless lost
          (setf (lispm-sessions--queue-branch queue) 'yes))))
    ;; Keep what may be an error, and the start of a line to come.
    (setf (lispm-sessions--queue-output queue)
          (let ((rest (substring output start)))
            (if (> (length rest) 4000) (substring rest -4000) rest)))
    ;; Room again for what waited (`lispm-sessions--in-flight').
    (when (and (> start 0) (lispm-sessions--queue-pending queue))
      (lispm-sessions--next queue))))

(defun lispm-sessions--importer-ended (queue process)
  "Note that PROCESS, QUEUE's importer, ended; fail what it did not commit."
  (when (eq process (lispm-sessions--queue-importer queue))
    (setf (lispm-sessions--queue-importer queue) nil
          (lispm-sessions--queue-branch queue) nil)
    (mapc #'lispm-sessions--forget (lispm-sessions--queue-copying queue))
    (setf (lispm-sessions--queue-copying queue) nil)
    (when-let* ((lost (lispm-sessions--queue-sent queue)))
      (setf (lispm-sessions--queue-sent queue) nil
            (lispm-sessions--queue-error queue)
            (format "git fast-import: %s"
                    (string-trim (lispm-sessions--queue-output queue))))
      (cl-incf (lispm-sessions--queue-failed queue) (length lost))
      (lispm-sessions--warn "Session commits in %s failed: %s"
                            (lispm-sessions--queue-directory queue)
                            (lispm-sessions--queue-error queue)))
    (setf (lispm-sessions--queue-output queue) "")
    (lispm-sessions--next queue)))

(defun lispm-sessions--sweep (directory copies)
  "Remove what Emacsen that died left in DIRECTORY and COPIES, its pins' folder.
A pinned file (`lispm-sessions--pin') a day old is no longer waited
for by any importer, and a new file of a save that never took its
name (`lispm-write-file-whole''s .lispm-save-) is an hour old only if
its Emacs died.  Should an importer still want a pin removed, its
commit is not made (`lispm-sessions--importer-script')."
  (let ((day (time-subtract nil (* 24 3600)))
        (hour (time-subtract nil 3600)))
    (pcase-dolist (`(,name . ,attributes)
                   (append (directory-files-and-attributes copies t "\\`[^.]" t)
                           (directory-files-and-attributes
                            directory t "\\`\\.lispm-\\(?:save\\|copy\\)-" t)))
      (when (and (eq (file-attribute-type attributes) nil)
                 (time-less-p (file-attribute-modification-time attributes)
                              (if (string-prefix-p ".lispm-save-" (file-name-nondirectory name))
                                  hour
                                day)))
        (ignore-errors (delete-file name))))))

(defun lispm-sessions--copies (queue)
  "Return the folder of QUEUE's pinned files, made if need be.
It is lispm/ in the repository's .git, beside the session files, so
that a hard link can be made; else a temporary folder of LispM's."
  (or (lispm-sessions--queue-copies queue)
      (setf (lispm-sessions--queue-copies queue)
            (let ((folder (expand-file-name ".git/lispm/"
                                            (lispm-sessions--queue-directory queue))))
              (condition-case nil
                  (progn
                    (with-file-modes #o700 (make-directory folder t))
                    (lispm-sessions--sweep (lispm-sessions--queue-directory queue) folder)
                    folder)
                (file-error (file-name-as-directory (make-temp-file "lispm-sessions-" t))))))))

(defun lispm-sessions--importer (queue)
  "Return QUEUE's running importer, started if need be, or nil.
It is a shell running `lispm-sessions--importer-script', which feeds
`git fast-import'."
  (let ((importer (lispm-sessions--queue-importer queue))
        (shell (executable-find "sh")))
    (cond
     ((process-live-p importer) importer)
     ((not shell)
      (setf (lispm-sessions--queue-error queue) "sh was not found")
      nil)
     (t
      (setq importer
            (lispm-sessions--start
             queue (append (list shell "-c" lispm-sessions--importer-script "lispm-sessions")
                           (lispm-sessions--git-command
                            queue '("-c" "core.compression=1" "fast-import" "--quiet"
                                    "--date-format=raw")))
             :coding 'binary
             :filter (lambda (_process text) (lispm-sessions--importer-output queue text))
             :sentinel (lambda (process _event)
                         (unless (process-live-p process)
                           (lispm-sessions--importer-ended queue process)))))
      (setf (lispm-sessions--queue-importer queue) importer
            (lispm-sessions--queue-output queue) "")
      ;; The folder of its pinned files, swept of what others left.
      (lispm-sessions--copies queue)
      importer))))

(defun lispm-sessions--record (queue job)
  "Return the lines that give JOB, a commit, to QUEUE's shell: unibyte, short.
They are the commit's fast-import commands, each after a `|', but the
file's text: for it the line `lispm SERIAL SOURCE'.  The message is
made one line."
  (let ((time (format "%d +0000" (plist-get job :time)))
        (ref (encode-coding-string (lispm-sessions--queue-ref queue) 'utf-8-unix t))
        (message (encode-coding-string
                  (replace-regexp-in-string "[\n\0]+" " " (plist-get job :message) t t)
                  'utf-8-unix t)))
    (concat "|commit " ref "\n"
            (format "|author LispM <lispm@localhost> %s\n" time)
            (format "|committer LispM <lispm@localhost> %s\n" time)
            (format "|data %d\n" (length message))
            "|" message "\n"
            ;; The branch as git has it, each commit being checkpointed:
            ;; the last commit made, whatever this importer was given
            ;; and did not make.
            (if (eq (lispm-sessions--queue-branch queue) 'yes)
                (concat "|from " ref "^0\n")
              "")
            "|M 100644 inline " (encode-coding-string (plist-get job :path) 'utf-8-unix t) "\n"
            (format "lispm %d " (plist-get job :serial))
            (encode-coding-string (plist-get job :source)
                                  (or file-name-coding-system
                                      default-file-name-coding-system)
                                  t)
            "\n")))

(defun lispm-sessions--send (queue)
  "Give QUEUE's pending commits to its importer."
  (let ((importer (lispm-sessions--importer queue)))
    (cond
     ((not importer)
      (lispm-sessions--break queue (format "git fast-import does not start: %s"
                                           (lispm-sessions--queue-error queue))))
     ;; Stopped (SIGSTOP) by someone: Emacs cannot write to it, so the
     ;; commits wait for the next turn's.
     ((eq (process-status importer) 'stop))
     (t
      (while (and (lispm-sessions--queue-pending queue)
                  (< (length (lispm-sessions--queue-sent queue))
                     lispm-sessions--in-flight))
        (let ((job (pop (lispm-sessions--queue-pending queue))))
          (plist-put job :serial (cl-incf (lispm-sessions--queue-serial queue)))
          (setf (lispm-sessions--queue-sent queue)
                (nconc (lispm-sessions--queue-sent queue) (list (plist-get job :serial)))
                (lispm-sessions--queue-copying queue)
                (nconc (lispm-sessions--queue-copying queue) (list job)))
          (condition-case nil
              (process-send-string importer (lispm-sessions--record queue job))
            ;; Gone meanwhile: its sentinel fails what it did not commit.
            (error nil))))))))

(defun lispm-sessions--next (queue)
  "Move QUEUE on: check its repository, or give git what waits."
  (unless (lispm-sessions--queue-running queue)
    (let ((directory (lispm-sessions--queue-directory queue))
          (then (lambda (ok output why)
                  (setf (lispm-sessions--queue-running queue) nil)
                  (funcall why ok output)
                  (lispm-sessions--next queue))))
      (cond
       ((eq (lispm-sessions--queue-state queue) 'broken)
        (lispm-sessions--drop-pending queue))
       ((null (lispm-sessions--queue-pending queue)))
       ((and (null (lispm-sessions--queue-state queue))
             (not (file-exists-p (expand-file-name ".git" directory))))
        (setf (lispm-sessions--queue-running queue) t)
        (lispm-sessions--git
         queue '("init" "-q")
         (lambda (ok output)
           (funcall then ok output
                    (lambda (ok output)
                      (if ok
                          (setf (lispm-sessions--queue-state queue) 'ready
                                (lispm-sessions--queue-ref queue) "refs/heads/main"
                                (lispm-sessions--queue-branch queue) 'no)
                        (lispm-sessions--break
                         queue (format "it is not a git repository, and `git init' failed: %s"
                                       (string-trim output)))))))))
       ((null (lispm-sessions--queue-ref queue))
        (setf (lispm-sessions--queue-running queue) t)
        (lispm-sessions--git
         queue '("symbolic-ref" "-q" "HEAD")
         (lambda (ok output)
           (funcall then ok output
                    (lambda (ok output)
                      (setf (lispm-sessions--queue-ref queue)
                            (if (and ok (string-match "\\`refs/heads/[^\n]+" output))
                                (match-string 0 output)
                              "refs/heads/main")))))))
       ((null (lispm-sessions--queue-branch queue))
        (setf (lispm-sessions--queue-running queue) t)
        (lispm-sessions--git
         queue (list "rev-parse" "-q" "--verify"
                     (concat (lispm-sessions--queue-ref queue) "^{commit}"))
         (lambda (ok output)
           (funcall then ok output
                    (lambda (ok output)
                      (cond (ok (setf (lispm-sessions--queue-branch queue) 'yes
                                      (lispm-sessions--queue-state queue) 'ready))
                            ;; No such branch yet: rev-parse says nothing.
                            ((string-blank-p output)
                             (setf (lispm-sessions--queue-branch queue) 'no
                                   (lispm-sessions--queue-state queue) 'ready))
                            (t (lispm-sessions--break
                                queue (format "git does not read the repository: %s"
                                              (string-trim output))))))))))
       (t (lispm-sessions--send queue))))))

(defun lispm-sessions-enqueue (file message &optional directory)
  "Queue a commit of FILE, as it is on disk now, with MESSAGE.
FILE was just written; the commit takes a name of its own for it
\(`lispm-sessions--pin').  DIRECTORY is the repository, FILE's folder
unless given (a file in a subfolder of it)."
  (let* ((directory (if directory (file-name-as-directory (expand-file-name directory))
                      (file-name-directory file)))
         (queue (lispm-sessions--queue directory))
         (program lispm-sessions-git-program))
    (unless (equal program (lispm-sessions--queue-program queue))
      (setf (lispm-sessions--queue-program queue) program
            (lispm-sessions--queue-state queue) nil
            (lispm-sessions--queue-ref queue) nil
            (lispm-sessions--queue-branch queue) nil)
      (when (process-live-p (lispm-sessions--queue-importer queue))
        (process-send-eof (lispm-sessions--queue-importer queue)))
      (unless (executable-find program)
        (lispm-sessions--break
         queue (format-message "git (`lispm-sessions-git-program', %S) was not found"
                               program))))
    (cond
     ((eq (lispm-sessions--queue-state queue) 'broken))
     ((string-search "\n" file)
      (lispm-sessions--warn "Session %s is saved but not committed: a newline in its name"
                            file))
     (t
      (if-let* ((pin (lispm-sessions--pin queue file)))
          (progn
            (setf (lispm-sessions--queue-pending queue)
                  (nconc (lispm-sessions--queue-pending queue)
                         (list (list :file file :source pin
                                     :path (file-relative-name
                                            file (lispm-sessions--queue-directory queue))
                                     :message message
                                     :time (truncate (float-time))
                                     :serial nil))))
            (lispm-sessions--next queue))
        (lispm-sessions--warn "Session %s is saved but not committed: it could not be kept for git"
                              file))))))

(defun lispm-sessions--pin (queue file)
  "Return a new name of FILE, for a commit of QUEUE to take it as it is now.
Saves rename a new file over FILE, so what this name holds stays: a
hard link in the shell's folder (before there is one, beside FILE),
to FILE's target if FILE is a symbolic link; where no hard link can be
made, a copy.  Return nil if neither can be made."
  (let* ((copies (and (eq (lispm-sessions--queue-state queue) 'ready)
                      (lispm-sessions--copies queue)))
         (pin (ignore-errors
                (make-temp-file (expand-file-name (if copies "lispm-session-" ".lispm-copy-")
                                                  (or copies (file-name-directory file)))))))
    (when pin
      (condition-case nil
          (progn
            (condition-case nil
                (add-name-to-file (file-chase-links file) pin t)
              (file-error (copy-file file pin t)))
            pin)
        (file-error (ignore-errors (delete-file pin))
                    nil)))))

(defun lispm-sessions--busy-p ()
  "Return non-nil if a commit of the sessions is waiting or being made."
  (cl-loop for queue being the hash-values of lispm-sessions--queues
           thereis (or (lispm-sessions--queue-running queue)
                       (lispm-sessions--queue-pending queue)
                       (lispm-sessions--queue-sent queue))))

(defun lispm-sessions-wait-for-commits (&optional timeout)
  "Wait until every queued session commit is made, at most TIMEOUT seconds.
TIMEOUT defaults to 30.  Return non-nil if none is left.  For tests and
benchmarks only: LispM itself never waits for git."
  (let ((deadline (+ (float-time) (or timeout 30))))
    (while (and (lispm-sessions--busy-p) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (not (lispm-sessions--busy-p))))

(defun lispm-sessions-stop (&optional timeout)
  "End the git processes of the sessions, after the commits they were given.
Wait at most TIMEOUT seconds (default 5) for them to end."
  (let ((importers (cl-loop for queue being the hash-values of lispm-sessions--queues
                            for importer = (lispm-sessions--queue-importer queue)
                            when (process-live-p importer) collect importer))
        (deadline (+ (float-time) (or timeout 5))))
    (dolist (importer importers)
      (condition-case nil (process-send-eof importer) (error nil)))
    (while (and (cl-some #'process-live-p importers) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (dolist (importer importers)
      (when (process-live-p importer) (delete-process importer)))))

(provide 'lispm-session-git)
;;; lispm-session-git.el ends here
