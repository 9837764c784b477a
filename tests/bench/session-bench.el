;;; session-bench.el --- What saving and committing a session's turn costs Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/session.py) as
;; `emacs --batch -Q -L elisp -l tests/bench/session-bench.el'.
;;
;; In a sessions directory of its own (not a repository yet: the first
;; commit's `git init' is part of it), it plays LISPM_BENCH_SESSION_TURNS
;; turns (default 50) of an own agent's session: the user's words, a
;; reply streamed in 20 pieces (about 2 KB), an `edit_file' call (one
;; line of a file changed) with a 4 KB result and a closing reply, then
;; `lispm-session-end-turn'.  A
;; turn starts every 100 ms; between them Emacs idles in
;; `accept-process-output', as it would between the user's keys, so the
;; git queue runs meanwhile.  It times, with `float-time':
;;
;; - each `lispm-session-end-turn' (saving the file, queueing the commit
;;   and starting git if the queue was idle): `blocked';
;; - everything Emacs does for git besides: each `make-process' of the
;;   queue (the one-off git commands and the long-lived shell that feeds
;;   `git fast-import') and each call of its processes' filters and
;;   sentinels (advice in this file only): `git_callbacks', the sum per
;;   turn.
;; - each step save at a call's end: the edit's record made
;;   (`lispm-turn-record') and `lispm-session-insert-result', which adds
;;   the result and the change's diff and saves the file, without a
;;   commit; with the file's size then: `steps' and `step_kb'.
;;
;; Then it waits for the queue, reads the log with `git log' and prints
;; one line of JSON: the times, the seconds from the last turn to the
;; last commit, and whether the commits are the turns', in order.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'lispm-session)
(require 'lispm-turn)

(defvar session-bench--git-seconds 0.0
  "Seconds Emacs spent starting the queue's git processes and in their callbacks.")

(defvar session-bench--depth 0
  "How deep inside a timed piece of git work Emacs is.")

(defun session-bench--timed (function &rest args)
  "Call FUNCTION with ARGS, adding its time to the git total unless nested."
  (if (> session-bench--depth 0)
      (apply function args)
    (let ((start (float-time)) (session-bench--depth 1))
      (unwind-protect (apply function args)
        (cl-incf session-bench--git-seconds (- (float-time) start))))))

(defun session-bench--make-process (make-process &rest args)
  "Time MAKE-PROCESS with ARGS, and the sentinel ARGS give, for git only."
  (if (not (equal (plist-get args :name) "lispm-sessions-git"))
      (apply make-process args)
    (setq args (copy-sequence args))
    (dolist (key '(:sentinel :filter))
      (when-let* ((function (plist-get args key)))
        (setq args (plist-put args key (lambda (&rest event)
                                         (apply #'session-bench--timed function event))))))
    (apply #'session-bench--timed make-process args)))

(defun session-bench--git (directory &rest args)
  "Return the output of git with ARGS in DIRECTORY (outside the timed part)."
  (with-temp-buffer
    (let ((default-directory directory))
      (apply #'call-process "git" nil t nil args))
    (buffer-string)))

(defun session-bench-run ()
  "Play the turns and print the measurements as JSON."
  (let* ((work (file-name-as-directory (make-temp-file "lispm-bench-session" t)))
         (lispm-sessions-directory (expand-file-name "sessions/" work))
         (project (expand-file-name "project/" work))
         (turns (string-to-number (or (getenv "LISPM_BENCH_SESSION_TURNS") "50")))
         (reply (mapconcat (lambda (i) (format "Piece %02d of the answer: %s\n" i
                                               (make-string 80 ?a)))
                           (number-sequence 1 20) ""))
         (result (lispm-session-cap-result
                  (mapconcat (lambda (i) (format "(defun f-%03d () %s)" i (make-string 40 ?b)))
                             (number-sequence 1 64) "\n")))
         (blocked nil)
         (git-per-turn nil)
         (steps nil)
         (step-kb nil)
         buffer last-end)
    (make-directory project t)
    (with-temp-file (expand-file-name "f.el" project) (insert result "\n"))
    (advice-add 'make-process :around #'session-bench--make-process)
    (unwind-protect
        (progn
          (setq buffer (lispm-session-create project "scripted" "emacs"))
          (dotimes (i turns)
            (let ((git-before session-bench--git-seconds))
              (lispm-session-begin-turn buffer (format "Turn %d: look at f-%03d" (1+ i) i))
              (let ((stream (lispm-session-begin-reply buffer)))
                (dolist (piece (split-string reply "\n"))
                  (lispm-session-stream-text stream (concat piece "\n")))
                (lispm-session-end-reply stream))
              (let ((id (format "call_%d" i)))
                (lispm-session-insert-call buffer (list :id id :name "edit_file"
                                                        :arguments "{\"path\": \"f.el\"}"))
                (let* ((file (expand-file-name "f.el" project))
                       (text (lispm-edit-file-text file))
                       (line (format "(defun f-%03d ()" (1+ (% i 64))))
                       (change (lispm-edit-replace
                                file (string-replace line (concat line " ;; edited") text)
                                :save t)))
                  (garbage-collect)
                  (let ((start (float-time)))
                    (lispm-session-insert-result buffer id result nil
                                                 (list (lispm-turn-record change)))
                    (push (- (float-time) start) steps))
                  (lispm-edit-forget (list change)))
                (push (/ (file-attribute-size
                          (file-attributes (buffer-local-value 'lispm-session-file buffer)))
                         1024.0)
                      step-kb))
              (let ((stream (lispm-session-begin-reply buffer)))
                (lispm-session-stream-text stream "Done.")
                (lispm-session-end-reply stream))
              (garbage-collect)
              (let ((start (float-time)))
                (lispm-session-end-turn buffer)
                (push (- (float-time) start) blocked))
              (setq last-end (float-time))
              (let ((until (+ last-end 0.1)))
                (while (< (float-time) until)
                  (accept-process-output nil (max 0.001 (- until (float-time))))))
              (push (- session-bench--git-seconds git-before) git-per-turn)))
          (let ((drained (lispm-sessions-wait-for-commits 120))
                (drain (- (float-time) last-end))
                (id (buffer-local-value 'lispm-session-id buffer)))
            (let* ((log (split-string (session-bench--git lispm-sessions-directory
                                                          "log" "--reverse" "--format=%s")
                                      "\n" t))
                   (wanted (cl-loop for i from 1 to turns
                                    collect (format "session %s turn %d: Turn %d: look at f-%03d"
                                                    id i i (1- i)))))
              (princ (json-encode
                      (list :turns turns
                            :blocked (vconcat (nreverse blocked))
                            :git_callbacks (vconcat (nreverse git-per-turn))
                            :drain_s drain
                            :drained (if drained t :json-false)
                            :commits (length log)
                            :in_order (if (equal log wanted) t :json-false)
                            :steps (vconcat (nreverse steps))
                            :step_kb (vconcat (nreverse step-kb))
                            :packs (length (directory-files
                                            (expand-file-name ".git/objects/pack"
                                                              lispm-sessions-directory)
                                            nil "\\.pack\\'"))
                            :file_kb (/ (file-attribute-size
                                         (file-attributes
                                          (buffer-local-value 'lispm-session-file buffer)))
                                        1024.0))))
              (terpri))))
      (lispm-sessions-stop)
      (advice-remove 'make-process #'session-bench--make-process)
      (when (buffer-live-p buffer)
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer))
      (delete-directory work t))))

(session-bench-run)

;;; session-bench.el ends here
