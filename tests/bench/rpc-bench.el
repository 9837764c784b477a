;;; rpc-bench.el --- Emacs-sidecar round trips against a bare jsonrpc.el echo  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Run by `make bench' (tests/bench/__main__.py) as
;; `emacs --batch -Q -L elisp -l tests/bench/rpc-bench.el'.
;;
;; It times sequential JSON-RPC round trips in both directions, twice:
;;
;;   ours      LispM's sidecar through `lispm-sidecar-request': Emacs asks
;;             `lispm/ping'; for the other way Emacs asks
;;             `lispm/ping-emacs', during which the sidecar asks Emacs
;;             `emacs/ping' COUNT times and reports the seconds it took.
;;   baseline  tests/bench/echo_peer.py, a blocking stdlib echo, behind a
;;             bare `jsonrpc-process-connection' with its log off, asked
;;             `bench/ping' and `bench/ping-emacs' the same way.
;;
;; The environment gives the Python (`LISPM_SIDECAR_PYTHON'), the echo
;; peer (`LISPM_BENCH_ECHO_PEER'), the requests per measurement
;; (`LISPM_BENCH_RPC_COUNT', default 2000) and the number of rounds
;; (`LISPM_BENCH_RPC_ROUNDS', default 7).  Each round measures the four
;; cases one after the other, so drift hits them alike.  The result is one
;; line of JSON on stdout: the seconds of every measurement.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
;; Whatever LispM keeps under the user's Emacs directory (such as its
;; ledger) goes to the benchmark's own folder instead.
(when-let* ((dir (getenv "LISPM_BENCH_EMACS_DIR")))
  (setq user-emacs-directory (file-name-as-directory dir)))

(require 'lispm)

(defvar lispm-bench-rpc-count
  (string-to-number (or (getenv "LISPM_BENCH_RPC_COUNT") "2000"))
  "Sequential requests per measurement.")

(defvar lispm-bench-rpc-rounds
  (string-to-number (or (getenv "LISPM_BENCH_RPC_ROUNDS") "7"))
  "How many times each of the four cases is measured.")

(defconst lispm-bench-rpc-warmup 200
  "Round trips each way, per peer, before anything is timed.")

(defun lispm-bench-rpc--echo-connection ()
  "Start the echo peer and return a bare `jsonrpc-process-connection' to it."
  (let ((peer (or (getenv "LISPM_BENCH_ECHO_PEER")
                  (error "LISPM_BENCH_ECHO_PEER is not set")))
        (python (or (getenv "LISPM_SIDECAR_PYTHON") "python3")))
    (make-instance
     'jsonrpc-process-connection
     :name "bench-echo"
     :process (make-process
               :name "bench-echo"
               :command (list python peer)
               :connection-type 'pipe
               :coding 'utf-8-emacs-unix
               :noquery t
               :stderr (get-buffer-create "*bench-echo stderr*"))
     :request-dispatcher (lambda (_connection _method params) params)
     :events-buffer-config '(:size 0))))

(defun lispm-bench-rpc--seconds (function)
  "Call FUNCTION and return the seconds it took."
  (let ((start (float-time)))
    (funcall function)
    (- (float-time) start)))

(defun lispm-bench-rpc--ours-to-sidecar (count)
  "Ask the sidecar `lispm/ping' COUNT times in a row; return the seconds."
  (lispm-bench-rpc--seconds
   (lambda ()
     (dotimes (i count)
       (lispm-sidecar-request 'lispm/ping (list :i i))))))

(defun lispm-bench-rpc--ours-to-emacs (count)
  "Have the sidecar ask Emacs `emacs/ping' COUNT times; return its seconds."
  (plist-get (lispm-sidecar-request 'lispm/ping-emacs (list :count count) 300)
             :seconds))

(defun lispm-bench-rpc--echo-to-peer (connection count)
  "Ask the echo peer of CONNECTION `bench/ping' COUNT times; return the seconds."
  (lispm-bench-rpc--seconds
   (lambda ()
     (dotimes (i count)
       (jsonrpc-request connection 'bench/ping (list :i i))))))

(defun lispm-bench-rpc--echo-to-emacs (connection count)
  "Have the echo peer of CONNECTION ask Emacs COUNT times; return its seconds."
  (plist-get (jsonrpc-request connection 'bench/ping-emacs (list :count count)
                              :timeout 300)
             :seconds))

(defun lispm-bench-rpc-run ()
  "Measure every case and print the seconds as one line of JSON."
  (let ((echo (lispm-bench-rpc--echo-connection))
        (count lispm-bench-rpc-count)
        ours-to-sidecar ours-to-emacs echo-to-peer echo-to-emacs)
    (unwind-protect
        (progn
          (lispm-sidecar-connection)
          (lispm-bench-rpc--ours-to-sidecar lispm-bench-rpc-warmup)
          (lispm-bench-rpc--ours-to-emacs lispm-bench-rpc-warmup)
          (lispm-bench-rpc--echo-to-peer echo lispm-bench-rpc-warmup)
          (lispm-bench-rpc--echo-to-emacs echo lispm-bench-rpc-warmup)
          (dotimes (_ lispm-bench-rpc-rounds)
            (push (lispm-bench-rpc--echo-to-peer echo count) echo-to-peer)
            (push (lispm-bench-rpc--ours-to-sidecar count) ours-to-sidecar)
            (push (lispm-bench-rpc--echo-to-emacs echo count) echo-to-emacs)
            (push (lispm-bench-rpc--ours-to-emacs count) ours-to-emacs))
          (princ (json-serialize
                  (list :count count
                        :rounds lispm-bench-rpc-rounds
                        :emacs emacs-version
                        :ours_to_sidecar (vconcat (nreverse ours-to-sidecar))
                        :ours_to_emacs (vconcat (nreverse ours-to-emacs))
                        :echo_to_peer (vconcat (nreverse echo-to-peer))
                        :echo_to_emacs (vconcat (nreverse echo-to-emacs)))))
          (terpri))
      (lispm-sidecar-stop)
      (jsonrpc-shutdown echo t))))

(lispm-bench-rpc-run)

;;; rpc-bench.el ends here
