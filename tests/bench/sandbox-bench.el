;;; sandbox-bench.el --- Time run_shell in bubblewrap against run plainly  -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage: emacs --batch -Q -L elisp -l tests/bench/sandbox-bench.el
;;
;; `true' run by the run_shell tool, from its call to its result, in
;; the sandbox (`lispm-sandbox-shell-mode' `folder') and plainly (`off'),
;; in alternate rounds: 21 of each after a warm-up.  Prints one JSON
;; line: {"sandboxed_ms": MEDIAN, "plain_ms": MEDIAN, "rounds_sandboxed":
;; [MS...], "rounds_plain": [MS...], "bwrap": BOOL}.

;;; Code:

(require 'lispm-tools)
(require 'lispm-sandbox)

(defconst sandbox-bench-rounds 21 "How many timed rounds of each.")

(defun sandbox-bench-once (agent mode)
  "Return the milliseconds AGENT's run_shell of `true' takes in MODE."
  (let* ((lispm-sandbox-shell-mode mode)
         (result nil)
         (start (float-time)))
    (lispm-tools-run "run_shell" agent '(:command "true") (lambda (r) (setq result r)))
    (while (and (not result) (< (- (float-time) start) 30))
      (accept-process-output nil 0.0005))
    (unless (eql (plist-get result :exit) 0)
      (error "run_shell true failed: %S" result))
    (* 1000 (- (float-time) start))))

(defun sandbox-bench-median (rounds)
  "Return the median of ROUNDS, an odd number of them."
  (nth (/ (length rounds) 2) (sort (copy-sequence rounds) #'<)))

(let* ((folder (file-name-as-directory (make-temp-file "lispm-sandbox-bench" t)))
       (agent (lispm-agents-register 'codex folder "codex"))
       (sandboxed nil)
       (plain nil))
  (unwind-protect
      (progn
        (sandbox-bench-once agent 'folder)
        (sandbox-bench-once agent 'off)
        (dotimes (_ sandbox-bench-rounds)
          (push (sandbox-bench-once agent 'folder) sandboxed)
          (push (sandbox-bench-once agent 'off) plain)))
    (delete-directory folder t))
  (cl-flet ((all (rounds) (mapconcat (lambda (ms) (format "%.3f" ms)) (reverse rounds) ", ")))
    (princ (format (concat "{\"sandboxed_ms\": %.3f, \"plain_ms\": %.3f, "
                           "\"rounds_sandboxed\": [%s], \"rounds_plain\": [%s], \"bwrap\": %s}\n")
                   (sandbox-bench-median sandboxed) (sandbox-bench-median plain)
                   (all sandboxed) (all plain) (if (lispm-sandbox-bwrap) "true" "false")))))

;;; sandbox-bench.el ends here
