;;; agent-bench.el --- Time LispM's own agent: streams, steps, turns  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/bench_agent.py) as
;; `emacs --batch -Q -L DIR -L DIR/apps -l tests/bench/agent-bench.el',
;; DIR a byte-compiled copy of LispM's `elisp' folder, with the scripted
;; gateway's URL in `LISPM_BENCH_GATEWAY', a folder of its own in
;; `LISPM_BENCH_DIR', the case in `LISPM_BENCH_CASE' and its rounds (or
;; turns) in `LISPM_BENCH_ROUNDS'.  With `LISPM_BENCH_PROFILE' set to a
;; file name, the CPU profiler runs throughout and its call tree is
;; written there (and reversed, to FILE.reverse).
;;
;; stream  Rounds of a 20 KB and a 2 MB answer (`{"long": N}' steps),
;;         side by side, each in a new session of a new own agent.  A
;;         round's cost is the Emacs process's CPU time (`current-cpu-time',
;;         clock(3): user + system, in microseconds) from just before
;;         `lispm-own-agent-send' to the done event reaching the turn
;;         (`lispm-turn--answered'), minus nothing.  The answer is checked
;;         whole: the turn's text is the gateway's text, character for
;;         character, and the session buffer holds it.  Prints one JSON
;;         line {"case": "stream", "rounds": [{"size", "cpu_ms",
;;         "wall_ms", "gcs", "gc_ms"}...]}.
;;
;; step    Turns whose model asks for `read_file' again and again, then
;;         says something.  For each reply with a call, the time from
;;         the turn's `answer' entry in its trace to the next `state
;;         request' entry, and to the moment `lispm-model-stream' has
;;         written the next request to the sidecar.  Prints one JSON line
;;         {"case": "step", "turns": [{"trace_ms": [...], "sent_ms":
;;         [...], "cpu_ms": [...], "answers": N}...]}; cpu_ms is Emacs's
;;         CPU time from the answer to the request written.
;;
;; step-large  ROUNDS rounds of the `step' turn in a fresh session, then
;;         in a session whose earlier turn streamed an answer of
;;         LISPM_BENCH_SIZE characters: prints {"case": "step-large",
;;         "fresh": [...], "large": [...]}, each turn's gaps as `step'.
;;
;; session ROUNDS turns in one session, each reading notes.txt twice:
;;         prints {"case": "session", "turns": N, "input": N, "cached": N},
;;         the tokens the session's header sums.
;;
;; turns   Turns of the prompts listed in LISPM_BENCH_DIR/prompts.json (a
;;         JSON array of strings): one untimed turn of each, then
;;         ROUNDS rounds of one turn of each, in the order given, each
;;         in a new session of a new own agent.  A turn's wall time runs
;;         from just before `lispm-own-agent-send' to `lispm-turn--finish'.
;;         Prints one JSON line {"case": "turns", "turns": [{"prompt",
;;         "wall_ms", "answer"}...]} of the timed turns, "answer" the
;;         turn's last text.
;;
;; Nothing of LispM is changed: the times come from advice of its own.

;;; Code:

(require 'cl-lib)
(require 'profiler)
(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))
(require 'lispm-own-agent)

(defun agent-bench--env (name)
  "Return the environment variable NAME, or signal an error if it is unset."
  (or (getenv name) (error "%s is not set" name)))

(defconst agent-bench-dir (file-name-as-directory (agent-bench--env "LISPM_BENCH_DIR"))
  "The benchmark's own folder.")

(defconst agent-bench-folder (expand-file-name "project/" agent-bench-dir)
  "The folder the own agent works in.")

(defvar agent-bench--answered nil
  "When the current turn's done event arrived: (CPU-SECONDS WALL GCS GC-SECONDS).")

(defvar agent-bench--answers nil
  "When each model answer of the current turn ended, newest first: (WALL . CPU).")

(defvar agent-bench--sent nil
  "When each model request of the current turn left, newest first: (WALL . CPU).")

(defvar agent-bench--started nil
  "When the current turn's text was given to its agent (`float-time').")

(defvar agent-bench--finished nil
  "When the newest turn finished (`float-time').")

(defun agent-bench--cpu ()
  "Return the CPU time Emacs has used, in seconds."
  (let ((now (current-cpu-time)))
    (/ (float (car now)) (cdr now))))

(defun agent-bench--note-answered (&rest _)
  "Note when a model answer ended (advice before `lispm-turn--answered')."
  (setq agent-bench--answered
        (list (agent-bench--cpu) (float-time) gcs-done gc-elapsed))
  (push (cons (nth 1 agent-bench--answered) (nth 0 agent-bench--answered))
        agent-bench--answers))

(defun agent-bench--note-sent (id)
  "Note when the request of the stream ID left; return ID."
  (push (cons (float-time) (agent-bench--cpu)) agent-bench--sent)
  id)

(advice-add 'lispm-turn--answered :before #'agent-bench--note-answered)
(advice-add 'lispm-model-stream :filter-return #'agent-bench--note-sent)
(advice-add 'lispm-turn--finish :before
            (lambda (&rest _) (setq agent-bench--finished (float-time)))
            '((name . agent-bench--note-finished)))

(setq lispm-models
      `(("scripted" :api anthropic :base-url ,(agent-bench--env "LISPM_BENCH_GATEWAY")
         :model "bench")))
(setq lispm-sessions-directory (expand-file-name "sessions/" agent-bench-dir))
(setq lispm-policy-roles '((default (read allow))))
(setq lispm-turn-step-limit 1000)
(setq make-backup-files nil)

(defun agent-bench--wait (predicate timeout what)
  "Wait until PREDICATE returns non-nil, at most TIMEOUT seconds, for WHAT."
  (let ((deadline (+ (float-time) timeout)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (error "Timed out waiting for %s" what))))

(defun agent-bench--turn (agent)
  "Return AGENT's newest turn."
  (cdar (lispm-own-agent-turns agent)))

(defun agent-bench--run-turn (text timeout)
  "Give TEXT to a new own agent; wait for its turn's end; return the agent."
  (let ((agent (lispm-agent agent-bench-folder "scripted")))
    (setq agent-bench--answered nil agent-bench--answers nil agent-bench--sent nil
          agent-bench--finished nil agent-bench--started (float-time))
    (lispm-own-agent-send agent text)
    (agent-bench--wait (lambda () (not (lispm-own-agent-busy-p agent))) timeout text)
    (unless (eq (lispm-turn-state (agent-bench--turn agent)) 'done)
      (error "The turn for %S ended %s: %S" text
             (lispm-turn-state (agent-bench--turn agent))
             (lispm-turn-condition (agent-bench--turn agent))))
    agent))

(defun agent-bench--end (agent)
  "Kill AGENT's session buffer, once its commits are made."
  (lispm-sessions-wait-for-commits 60)
  (let ((buffer (lispm-own-agent-buffer agent)))
    (with-current-buffer buffer (set-buffer-modified-p nil))
    (kill-buffer buffer)))

;;; Streaming

(defun agent-bench--long-text (size)
  "Return the gateway's `long' text of SIZE characters."
  (let* ((line "%08d the quick brown fox jumps over the lazy dog\n")
         (lines (1+ (/ size (length (format line 0))))))
    (substring (mapconcat (lambda (i) (format line i)) (number-sequence 0 (1- lines)) "")
               0 size)))

(defun agent-bench--stream-round (size)
  "Stream an answer of SIZE characters in a new session; return its figures."
  (garbage-collect)
  (let* ((agent (lispm-agent agent-bench-folder "scripted"))
         (cpu (agent-bench--cpu))
         (wall (float-time))
         (gcs gcs-done)
         (gc gc-elapsed))
    (setq agent-bench--answered nil)
    (lispm-own-agent-send agent (format "Stream %d characters" size))
    (agent-bench--wait (lambda () agent-bench--answered) 300 "the answer")
    (let ((answered agent-bench--answered))
      (agent-bench--wait (lambda () (not (lispm-own-agent-busy-p agent))) 60 "the turn's end")
      (let* ((turn (agent-bench--turn agent))
             (answer (plist-get (car (last (lispm-turn-messages turn))) :content)))
        (unless (eq (lispm-turn-state turn) 'done)
          (error "The %d turn ended %s: %S" size (lispm-turn-state turn)
                 (lispm-turn-condition turn)))
        (unless (string= answer (agent-bench--long-text size))
          (error "The answer of %d characters arrived as %d, not whole" size (length answer)))
        (with-current-buffer (lispm-own-agent-buffer agent)
          (goto-char (point-min))
          (unless (search-forward (substring answer (- size 200)) nil t)
            (error "The session buffer lacks the end of the %d answer" size))))
      (agent-bench--end agent)
      (list :size size
            :cpu_ms (* 1000 (- (nth 0 answered) cpu))
            :wall_ms (* 1000 (- (nth 1 answered) wall))
            :gcs (- (nth 2 answered) gcs)
            :gc_ms (* 1000 (- (nth 3 answered) gc))))))

(defun agent-bench-stream (rounds)
  "Run ROUNDS rounds of a 20 KB and a 2 MB answer; print their figures."
  (agent-bench--stream-round 20000)     ; Warm up.
  (agent-bench--stream-round 2000000)
  (let ((results nil))
    (dotimes (_ rounds)
      (push (agent-bench--stream-round 20000) results)
      (push (agent-bench--stream-round 2000000) results))
    (princ (concat (json-serialize (list :case "stream" :rounds (vconcat (nreverse results))))
                   "\n"))))

;;; A tool step

(defun agent-bench--step-gaps (turn answers sent)
  "Return the gaps of TURN from each answer with calls to the next request.
ANSWERS and SENT are (WALL . CPU) of its answers and requests, oldest
first.  The result's :sent_ms are wall milliseconds from an answer to
the next request written, :cpu_ms Emacs's CPU in between, :trace_ms
those from the trace's `answer' entry to its next `state request'."
  (let ((entries (reverse (lispm-turn-trace turn)))
        (trace-ms nil) (sent-ms nil) (cpu-ms nil))
    (while entries
      (let ((entry (pop entries)))
        (when (eq (nth 1 entry) 'answer)
          (when-let* ((next (cl-find-if (lambda (e) (and (eq (nth 1 e) 'state)
                                                         (eq (nth 2 e) 'request)))
                                        entries)))
            (push (* 1000 (- (car next) (car entry))) trace-ms)))))
    ;; Answer K is followed by request K + 1.
    (cl-loop for answer in answers
             for next in (cdr sent)
             do (push (* 1000 (- (car next) (car answer))) sent-ms)
             (push (* 1000 (- (cdr next) (cdr answer))) cpu-ms))
    (list :answers (length answers)
          :trace_ms (vconcat (nreverse trace-ms))
          :sent_ms (vconcat (nreverse sent-ms))
          :cpu_ms (vconcat (nreverse cpu-ms)))))

(defun agent-bench-step (turns)
  "Run TURNS turns of many `read_file' steps after a warm-up; print the gaps."
  (agent-bench--end (agent-bench--run-turn "Read notes.txt many times" 120))
  (let ((results nil))
    (dotimes (_ turns)
      (let ((agent (agent-bench--run-turn "Read notes.txt many times" 120)))
        (push (agent-bench--step-gaps (agent-bench--turn agent)
                                      (reverse agent-bench--answers)
                                      (reverse agent-bench--sent))
              results)
        (agent-bench--end agent)))
    (princ (concat (json-serialize (list :case "step" :turns (vconcat (nreverse results))))
                   "\n"))))

;;; A tool step in a large session

(defun agent-bench--steps-of (agent)
  "Return the step gaps of AGENT's newest turn, as `agent-bench--step-gaps'."
  (agent-bench--step-gaps (agent-bench--turn agent) (reverse agent-bench--answers)
                          (reverse agent-bench--sent)))

(defun agent-bench-step-large (turns size)
  "Run TURNS rounds of a step turn in a fresh session and in one of SIZE.
The large session's earlier conversation is an answer of SIZE
characters, streamed in a turn before.  Print both rounds' gaps."
  (agent-bench--end (agent-bench--run-turn "Read notes.txt many times" 120))
  (let ((fresh nil) (large nil))
    (dotimes (_ turns)
      (let ((agent (agent-bench--run-turn "Read notes.txt many times" 120)))
        (push (agent-bench--steps-of agent) fresh)
        (agent-bench--end agent))
      (let ((agent (agent-bench--run-turn (format "Stream %d characters" size) 300)))
        (setq agent-bench--answered nil agent-bench--answers nil agent-bench--sent nil)
        (lispm-own-agent-send agent "Read notes.txt many times")
        (agent-bench--wait (lambda () (not (lispm-own-agent-busy-p agent))) 300
                           "the step turn in the large session")
        (let ((size-now (buffer-size (lispm-own-agent-buffer agent))))
          (when (< size-now size)
            (error "The large session has %d characters, not %d" size-now size)))
        (push (append (agent-bench--steps-of agent)
                      (list :session_chars (buffer-size (lispm-own-agent-buffer agent))))
              large)
        (agent-bench--end agent)))
    (princ (concat (json-serialize (list :case "step-large"
                                         :fresh (vconcat (nreverse fresh))
                                         :large (vconcat (nreverse large))))
                   "\n"))))

;;; One session of many turns

(defun agent-bench-session (turns)
  "Run TURNS turns in one own agent's session, each reading a file twice."
  (let ((agent (lispm-agent agent-bench-folder "scripted")))
    (dotimes (n turns)
      (lispm-own-agent-send agent (format "Cache turn %d: read notes.txt twice" n))
      (agent-bench--wait (lambda () (not (lispm-own-agent-busy-p agent))) 120
                         (format "turn %d" n))
      (unless (eq (lispm-turn-state (agent-bench--turn agent)) 'done)
        (error "Turn %d ended %s: %S" n (lispm-turn-state (agent-bench--turn agent))
               (lispm-turn-condition (agent-bench--turn agent)))))
    (let ((usage (lispm-session-usage (lispm-own-agent-buffer agent))))
      (agent-bench--end agent)
      (princ (concat (json-serialize (list :case "session" :turns turns
                                           :input (plist-get usage :input)
                                           :cached (plist-get usage :cached)))
                     "\n")))))

;;; Turns side by side

(defun agent-bench--timed-turn (prompt)
  "Run a turn of PROMPT in a new own agent; return its figures."
  (let* ((agent (agent-bench--run-turn prompt 300))
         (turn (agent-bench--turn agent))
         (figures (list :prompt prompt
                        :wall_ms (* 1000 (- agent-bench--finished agent-bench--started))
                        :answer (plist-get (car (last (lispm-turn-messages turn))) :content))))
    (agent-bench--end agent)
    figures))

(defun agent-bench-turns (rounds)
  "Run a turn of each prompt untimed, then ROUNDS rounds; print their figures."
  (let ((prompts (append (json-parse-string
                          (with-temp-buffer
                            (insert-file-contents
                             (expand-file-name "prompts.json" agent-bench-dir))
                            (buffer-string)))
                         nil))
        (results nil))
    (mapc #'agent-bench--timed-turn prompts)
    (dotimes (_ rounds)
      (dolist (prompt prompts)
        (push (agent-bench--timed-turn prompt) results)))
    (princ (concat (json-serialize (list :case "turns" :turns (vconcat (nreverse results))))
                   "\n"))))

;;; Running

(defun agent-bench--write-profile (file)
  "Stop the CPU profiler; write its call tree to FILE, reversed to FILE.reverse."
  (profiler-stop)
  (dolist (reversed '(nil t))
    (with-current-buffer (profiler-report-setup-buffer (profiler-cpu-profile))
      (setq profiler-report-reversed reversed)
      (profiler-report-rerender-calltree)
      (goto-char (point-min))
      (while (not (eobp))
        (profiler-report-expand-entry t)
        (forward-line))
      (write-region nil nil (if reversed (concat file ".reverse") file) nil 'silent))))

(make-directory agent-bench-folder t)
(with-temp-file (expand-file-name "notes.txt" agent-bench-folder)
  (insert ";; A few lines the agent reads.\n(setq fill-column 70)\n"))
(when (getenv "LISPM_BENCH_PROFILE")
  (profiler-start 'cpu))
(unwind-protect
    (pcase (agent-bench--env "LISPM_BENCH_CASE")
      ("stream" (agent-bench-stream (string-to-number
                                     (or (getenv "LISPM_BENCH_ROUNDS") "5"))))
      ("step" (agent-bench-step (string-to-number (or (getenv "LISPM_BENCH_ROUNDS") "2"))))
      ("step-large" (agent-bench-step-large
                     (string-to-number (or (getenv "LISPM_BENCH_ROUNDS") "2"))
                     (string-to-number (agent-bench--env "LISPM_BENCH_SIZE"))))
      ("session" (agent-bench-session
                  (string-to-number (or (getenv "LISPM_BENCH_ROUNDS") "20"))))
      ("turns" (agent-bench-turns (string-to-number
                                   (or (getenv "LISPM_BENCH_ROUNDS") "5"))))
      (other (error "Unknown LISPM_BENCH_CASE %s" other)))
  (lispm-sessions-wait-for-commits 60)
  (lispm-sidecar-stop)
  (when-let* ((file (getenv "LISPM_BENCH_PROFILE")))
    (agent-bench--write-profile file)))

;;; agent-bench.el ends here
