;;; room-bench.el --- Time an own agent's asks: of another own agent, of a role  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/bench_room.py) as
;; `emacs --batch -Q -L DIR -L DIR/apps -l tests/bench/room-bench.el',
;; DIR a byte-compiled copy of LispM's `elisp' folder, with the scripted
;; gateway's URL in `LISPM_BENCH_GATEWAY' (answering at once), a folder
;; of its own in `LISPM_BENCH_DIR' and the rounds in `LISPM_BENCH_ROUNDS'.
;;
;; Two own agents, emacs and emacs-2, in one folder, through the real
;; sidecar.  Each round:
;;
;; ask     emacs asks emacs-2 "Question N" with `ask_agent'; emacs-2's
;;         model answers with `reply' at once.  The ask's time runs from
;;         the call entering the pipeline (`lispm-calls-invoke') to its
;;         outcome reaching emacs's turn (`lispm-turn--called'); the model
;;         round trips inside it are emacs-2's, each from the request
;;         leaving (`lispm-turn--request') to its answer
;;         (`lispm-turn--answered').  overhead = ask − those round trips.
;;
;; helper  emacs asks the role `reviewer' "Review N": the helper's start
;;         runs from the call entering the pipeline to the helper's first
;;         model request (`lispm-turn--request' of an actor with a
;;         caller).
;;
;; Prints one JSON line {"ask": [{"ask_ms", "round_trips_ms",
;; "overhead_ms"}...], "helper": [{"start_ms"}...]}.  Nothing of LispM
;; is changed: the times come from advice of its own.

;;; Code:

(require 'cl-lib)
(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))
(require 'lispm-own-agent)
;; Helpers of roles: the sidecar asks Emacs for one.
(require 'lispm-helpers)

(defun room-bench--env (name)
  "Return the environment variable NAME, or signal an error if it is unset."
  (or (getenv name) (error "%s is not set" name)))

(defconst room-bench-dir (file-name-as-directory (room-bench--env "LISPM_BENCH_DIR"))
  "The benchmark's own folder.")

(defconst room-bench-folder (expand-file-name "project/" room-bench-dir)
  "The folder the own agents work in.")

(defvar room-bench--asked nil
  "When the timed ask entered the pipeline (`float-time'), or nil.")

(defvar room-bench--answered nil
  "When the timed ask's outcome reached its turn, or nil.")

(defvar room-bench--trips nil
  "The model round trips of other agents since the ask: (START . END), newest first.")

(defvar room-bench--helper-request nil
  "When a helper made its first model request, or nil.")

(defvar room-bench--asker nil
  "The agent whose asks are timed.")

(defun room-bench--note-invoke (actor tool-name &rest _)
  "Note when ACTOR's call of TOOL-NAME enters the pipeline."
  (when (and (eq actor room-bench--asker) (equal tool-name "ask_agent"))
    (setq room-bench--asked (float-time) room-bench--trips nil
          room-bench--helper-request nil)))

(defun room-bench--note-called (turn call _outcome)
  "Note when the outcome of TURN's CALL, the timed ask, arrived."
  (when (and (eq (lispm-turn-actor turn) room-bench--asker)
             (equal (lispm-turn-call-name call) "ask_agent"))
    (setq room-bench--answered (float-time))))

(defun room-bench--note-request (turn)
  "Note when TURN, of another agent than the asker, sends a model request."
  (let ((actor (lispm-turn-actor turn)))
    (unless (eq actor room-bench--asker)
      (push (cons (float-time) nil) room-bench--trips)
      (when (and (lispm-actor-caller actor) (null room-bench--helper-request))
        (setq room-bench--helper-request (float-time))))))

(defun room-bench--note-answered (turn _event)
  "Note when TURN's model answer, of another agent than the asker, ended."
  (unless (eq (lispm-turn-actor turn) room-bench--asker)
    (when-let* ((open (cl-find-if-not #'cdr room-bench--trips)))
      (setcdr open (float-time)))))

(advice-add 'lispm-calls-invoke :before #'room-bench--note-invoke)
(advice-add 'lispm-turn--called :before #'room-bench--note-called)
(advice-add 'lispm-turn--request :before #'room-bench--note-request)
(advice-add 'lispm-turn--answered :before #'room-bench--note-answered)

(setq lispm-models
      `(("scripted" :api anthropic :base-url ,(room-bench--env "LISPM_BENCH_GATEWAY")
         :model "bench")))
(setq lispm-sessions-directory (expand-file-name "sessions/" room-bench-dir))
(setq lispm-policy-roles '((default (read allow) (message allow) (introspect allow))))
(setq make-backup-files nil)

(defun room-bench--wait (predicate timeout what)
  "Wait until PREDICATE returns non-nil, at most TIMEOUT seconds, for WHAT."
  (let ((deadline (+ (float-time) timeout)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.01))
    (unless (funcall predicate)
      (error "Timed out waiting for %s" what))))

(defun room-bench--turn-done (agent text)
  "Give AGENT TEXT and wait for its turn to end well."
  (setq room-bench--answered nil)
  (lispm-own-agent-send agent text)
  (room-bench--wait (lambda () (and room-bench--answered (not (lispm-own-agent-busy-p agent))))
                    60 text)
  (let ((turn (cdar (lispm-own-agent-turns agent))))
    (unless (eq (lispm-turn-state turn) 'done)
      (error "The turn for %S ended %s: %S" text (lispm-turn-state turn)
             (lispm-turn-condition turn)))
    turn))

(defun room-bench--ask-round (n)
  "Time ask N of emacs to emacs-2; return its figures."
  (room-bench--turn-done room-bench--asker (format "Ask emacs-2 question %d" n))
  (let* ((ask (- room-bench--answered room-bench--asked))
         (inside (cl-loop for (start . end) in room-bench--trips
                          when (and end (>= start room-bench--asked)
                                    (<= end room-bench--answered))
                          sum (- end start))))
    (list :ask_ms (* 1000 ask) :round_trips_ms (* 1000 inside)
          :overhead_ms (* 1000 (- ask inside)))))

(defun room-bench--helper-round (n)
  "Time the start of helper N; return its figures."
  (room-bench--turn-done room-bench--asker (format "Get reviewer %d" n))
  (unless room-bench--helper-request
    (error "No helper made a model request for round %d: %S" n
           (with-current-buffer (lispm-own-agent-buffer room-bench--asker)
             (buffer-substring-no-properties (max (point-min) (- (point-max) 1500))
                                             (point-max)))))
  ;; The helper retires once its turn is over.
  (room-bench--wait (lambda () (not (lispm-agent-get "reviewer"))) 30 "the helper to retire")
  (list :start_ms (* 1000 (- room-bench--helper-request room-bench--asked))))

(make-directory room-bench-folder t)
(unwind-protect
    (let* ((rounds (string-to-number (or (getenv "LISPM_BENCH_ROUNDS") "20")))
           (asker (lispm-agent room-bench-folder "scripted"))
           (asked (lispm-agent room-bench-folder "scripted"))
           (asks nil) (helpers nil))
      (setq room-bench--asker asker)
      (unless (equal (lispm-actor-name asked) "emacs-2")
        (error "The second agent is %s, not emacs-2" (lispm-actor-name asked)))
      (room-bench--ask-round 0)         ; Warm up.
      (room-bench--helper-round 0)
      (dotimes (n rounds)
        (push (room-bench--ask-round (1+ n)) asks)
        (push (room-bench--helper-round (1+ n)) helpers))
      (princ (concat (json-serialize (list :ask (vconcat (nreverse asks))
                                           :helper (vconcat (nreverse helpers))))
                     "\n")))
  (lispm-sessions-wait-for-commits 60)
  (lispm-sidecar-stop))

;;; room-bench.el ends here
