;;; lispm-views-test.el --- Tests of the editor-state push and buffer-text  -*- lexical-binding: t; -*-

;;; Commentary:

;; The push is captured where it leaves Emacs (`lispm-sidecar-notify'),
;; except in the last test, where it goes to the real sidecar (the
;; Python in `LISPM_SIDECAR_PYTHON').

;;; Code:

(require 'ert)
(require 'flymake)
(require 'lispm-views)

(defvar lispm-views-test--sent nil
  "The notifications captured, newest first: (METHOD . PARAMS).")

(defmacro lispm-views-test--with-files (spec &rest body)
  "Run BODY with DIR bound to a temporary directory holding FILES.
SPEC is (DIR FILES), FILES an alist (NAME . CONTENTS).  Pushes are
captured in `lispm-views-test--sent'; buffers created by BODY are killed."
  (declare (indent 1) (debug t))
  (pcase-let ((`(,dir ,files) spec))
    `(let* ((,dir (file-name-as-directory (file-truename (make-temp-file "lispm-views" t))))
            (old-buffers (buffer-list))
            (lispm-views-test--sent nil)
            (lispm-views--last-sent nil)
            (lispm-views--timer nil)
            (transient-mark-mode t))
       (dolist (file ,files)
         (with-temp-file (expand-file-name (car file) ,dir) (insert (cdr file))))
       (cl-letf (((symbol-function 'lispm-sidecar-live-p) (lambda () t))
                 ((symbol-function 'lispm-sidecar-notify)
                  (lambda (method params) (push (cons method params) lispm-views-test--sent))))
         (unwind-protect (progn ,@body)
           (lispm-views-mode -1)
           (dolist (buffer (buffer-list))
             (unless (memq buffer old-buffers)
               (with-current-buffer buffer (set-buffer-modified-p nil))
               (kill-buffer buffer)))
           (delete-directory ,dir t))))))

(defun lispm-views-test--wait (seconds)
  "Let timers run for SECONDS."
  (let ((deadline (+ (float-time) seconds)))
    (while (< (float-time) deadline)
      (accept-process-output nil 0.01))))

(defun lispm-views-test--visit (file)
  "Show FILE in the selected window, as the only window, and return its buffer."
  (delete-other-windows)
  (switch-to-buffer (find-file-noselect file)))

(defun lispm-views-test--buffer-entry (snapshot name)
  "Return the entry of buffer NAME in SNAPSHOT's buffers."
  (seq-find (lambda (entry) (equal (plist-get entry :name) name))
            (plist-get snapshot :buffers)))

(ert-deftest lispm-views-test-snapshot-selection-is-0-based ()
  (lispm-views-test--with-files (dir '(("a.txt" . "one\ntwo\nthree\n")))
    (let ((buffer (lispm-views-test--visit (expand-file-name "a.txt" dir))))
      ;; From the "w" of "two" to after "th" of "three".
      (goto-char (point-min)) (forward-line 1) (forward-char 1)
      (push-mark (point) t t)
      (forward-line 1) (forward-char 2)
      (let* ((snapshot (lispm-views-snapshot))
             (selection (plist-get snapshot :selection)))
        (should (equal (plist-get selection :buffer) "a.txt"))
        (should (equal (plist-get selection :file) (expand-file-name "a.txt" dir)))
        (should (equal (plist-get selection :truename) (expand-file-name "a.txt" dir)))
        (should (equal (plist-get selection :text) "wo\nth"))
        (should (equal (plist-get selection :start) '(:line 1 :character 1)))
        (should (equal (plist-get selection :end) '(:line 2 :character 2)))
        (should (eq (plist-get selection :is_empty) :json-false))
        ;; The snapshot is valid JSON as it is.
        (should (stringp (json-serialize snapshot :false-object :json-false :null-object nil))))
      ;; Without an active region: point only, empty text.
      (deactivate-mark)
      (let ((selection (plist-get (lispm-views-snapshot) :selection)))
        (should (equal (plist-get selection :text) ""))
        (should (equal (plist-get selection :start) '(:line 2 :character 2)))
        (should (equal (plist-get selection :end) '(:line 2 :character 2)))
        (should (eq (plist-get selection :is_empty) t)))
      ;; Narrowing changes nothing: lines count from the buffer's start.
      (narrow-to-region (line-beginning-position) (point-max))
      (should (equal (plist-get (plist-get (lispm-views-snapshot) :selection) :start)
                     '(:line 2 :character 2)))
      (widen)
      (ignore buffer))))

(ert-deftest lispm-views-test-snapshot-buffers ()
  (lispm-views-test--with-files (dir '(("b.el" . "(message \"b\")\n")))
    (let ((buffer (find-file-noselect (expand-file-name "b.el" dir)))
          (scratch (get-buffer-create "lispm views scratch"))
          (internal (get-buffer-create " lispm views internal")))
      (let ((entry (lispm-views-test--buffer-entry (lispm-views-snapshot) "b.el")))
        (should (equal entry (list :name "b.el" :file (expand-file-name "b.el" dir)
                                   :truename (expand-file-name "b.el" dir)
                                   :dirty :json-false :mode "emacs-lisp-mode"))))
      (with-current-buffer buffer (insert ";; unsaved\n"))
      (with-current-buffer scratch (insert "modified, but no file"))
      (let ((snapshot (lispm-views-snapshot)))
        (should (eq (plist-get (lispm-views-test--buffer-entry snapshot "b.el") :dirty) t))
        (should (equal (lispm-views-test--buffer-entry snapshot "lispm views scratch")
                       (list :name "lispm views scratch" :file nil :truename nil
                             :dirty :json-false :mode "fundamental-mode")))
        (should-not (lispm-views-test--buffer-entry snapshot " lispm views internal"))
        (should-not (seq-find (lambda (entry) (string-prefix-p " " (plist-get entry :name)))
                              (plist-get snapshot :buffers))))
      (ignore internal))))

(ert-deftest lispm-views-test-truename-is-cached-per-file-name ()
  (lispm-views-test--with-files (dir '(("real.txt" . "x") ("other.txt" . "y")))
    (make-symbolic-link (expand-file-name "real.txt" dir) (expand-file-name "link.txt" dir))
    (let* ((find-file-visit-truename nil)
           (buffer (find-file-noselect (expand-file-name "link.txt" dir))))
      (should (equal (lispm-views-truename buffer) (expand-file-name "real.txt" dir)))
      ;; Cached: not asked of the file system again.
      (cl-letf (((symbol-function 'file-truename) (lambda (&rest _) (error "Not cached"))))
        (should (equal (lispm-views-truename buffer) (expand-file-name "real.txt" dir))))
      ;; A new file name is a new truename.
      (with-current-buffer buffer
        (set-visited-file-name (expand-file-name "other.txt" dir) t))
      (should (equal (lispm-views-truename buffer) (expand-file-name "other.txt" dir))))))

(ert-deftest lispm-views-test-strings-are-always-valid-json ()
  (lispm-views-test--with-files (dir '(("c.txt" . "")))
    (let ((buffer (lispm-views-test--visit (expand-file-name "c.txt" dir)))
          (odd (get-buffer-create (string ?o ?d ?d #x3fff80 ?! #xd800))))
      (with-current-buffer buffer
        (insert "caf" (string #x3fffe9) " ok ✓ " (string #x110000) "\n")
        (push-mark (point-min) t t)
        (goto-char (point-max)))
      (let* ((snapshot (lispm-views-snapshot))
             (json (json-serialize snapshot :false-object :json-false :null-object nil)))
        (should (stringp json))
        (should (equal (plist-get (plist-get snapshot :selection) :text)
                       "caf\ufffd ok ✓ \ufffd\n"))
        (should (lispm-views-test--buffer-entry snapshot "odd\ufffd!\ufffd")))
      ;; A unibyte string is decoded as UTF-8, its bad bytes replaced.
      (should (equal (lispm-views-json-string "caf\303\251 \377") "café \ufffd"))
      (ignore odd))))

(ert-deftest lispm-views-test-selection-text-is-capped ()
  (lispm-views-test--with-files (dir '(("big.txt" . "")))
    (let ((buffer (lispm-views-test--visit (expand-file-name "big.txt" dir))))
      (insert (make-string 150000 ?x))
      (push-mark (point-min) t t)
      (let ((selection (plist-get (lispm-views-snapshot) :selection)))
        (should (= (length (plist-get selection :text)) lispm-views-selection-max))
        ;; The range is the whole region all the same.
        (should (equal (plist-get selection :end) '(:line 0 :character 150000))))
      (ignore buffer))))

(defvar lispm-views-test--message "known problem"
  "The message of the warning `lispm-views-test--backend' reports.")

(defun lispm-views-test--backend (report-fn &rest _)
  "A Flymake backend that reports one warning on line 2, columns 0-3.
REPORT-FN is Flymake's callback."
  (save-excursion
    (goto-char (point-min))
    (forward-line 1)
    (funcall report-fn
             (list (flymake-make-diagnostic (current-buffer) (point) (+ (point) 3)
                                            :warning lispm-views-test--message)
                   (flymake-make-diagnostic (current-buffer) (point-min) (1+ (point-min))
                                            :error "first char")))))

(ert-deftest lispm-views-test-flymake-diagnostics-are-pushed ()
  (lispm-views-test--with-files (dir '(("d.txt" . "first\nsecond\nthird\n")))
    (let ((buffer (find-file-noselect (expand-file-name "d.txt" dir)))
          (file (expand-file-name "d.txt" dir)))
      (lispm-views-mode 1)
      (lispm-views-test--wait 0.15)
      (setq lispm-views-test--sent nil)
      (with-current-buffer buffer
        (setq-local flymake-diagnostic-functions (list #'lispm-views-test--backend))
        (flymake-mode 1)
        (flymake-start))
      (with-current-buffer buffer
        (should (= (length (flymake-diagnostics)) 2)))
      (lispm-views-test--wait 0.15)
      (should lispm-views-test--sent)
      (pcase-let* ((`(,method . ,params) (car lispm-views-test--sent))
                   (entry (seq-find (lambda (e) (equal (plist-get e :file) file))
                                    (plist-get params :diagnostics)))
                   (items (append (plist-get entry :items) nil)))
        (should (eq method 'lispm/editor-state))
        (should (equal (plist-get entry :truename) file))
        (should (member (list :message "known problem" :severity "warning"
                              :range '(:start (:line 1 :character 0) :end (:line 1 :character 3))
                              :source "lispm-views-test--backend")
                        items))
        (should (member (list :message "first char" :severity "error"
                              :range '(:start (:line 0 :character 0) :end (:line 0 :character 1))
                              :source "lispm-views-test--backend")
                        items)))
      ;; A new report from the backend is a new push.
      (setq lispm-views-test--sent nil)
      (let ((lispm-views-test--message "changed problem"))
        (with-current-buffer buffer (flymake-start))
        (lispm-views-test--wait 0.15))
      (should (= (length lispm-views-test--sent) 1))
      (should (string-search "changed problem"
                             (json-serialize (cdar lispm-views-test--sent)
                                             :false-object :json-false :null-object nil)))
      ;; Positions follow edits: two lines inserted above.
      (with-current-buffer buffer
        (goto-char (point-min))
        (insert "new\nnew\n"))
      (let* ((entry (aref (plist-get (lispm-views-snapshot) :diagnostics) 0))
             (warning (seq-find (lambda (i) (equal (plist-get i :message) "changed problem"))
                                (plist-get entry :items))))
        (should (equal (plist-get (plist-get warning :range) :start) '(:line 3 :character 0))))
      ;; A file buffer without a checker has no entry.
      (with-current-buffer buffer (flymake-mode -1))
      (should (equal (plist-get (lispm-views-snapshot) :diagnostics) [])))))

(ert-deftest lispm-views-test-flycheck-errors-are-mapped ()
  ;; Flycheck is not built in: a stand-in with its accessors' names.
  (lispm-views-test--with-files (dir '(("e.txt" . "alpha\nbeta\n")))
    (let ((buffer (find-file-noselect (expand-file-name "e.txt" dir))))
      (cl-letf (((symbol-function 'flycheck-error-line) (lambda (e) (nth 0 e)))
                ((symbol-function 'flycheck-error-column) (lambda (e) (nth 1 e)))
                ((symbol-function 'flycheck-error-end-line) (lambda (e) (nth 2 e)))
                ((symbol-function 'flycheck-error-end-column) (lambda (e) (nth 3 e)))
                ((symbol-function 'flycheck-error-message) (lambda (e) (nth 4 e)))
                ((symbol-function 'flycheck-error-level) (lambda (e) (nth 5 e)))
                ((symbol-function 'flycheck-error-checker) (lambda (e) (nth 6 e)))
                ((symbol-function 'flycheck-error-filename) (lambda (e) (nth 7 e))))
        (with-current-buffer buffer
          (setq-local flycheck-mode t)
          (setq-local flycheck-current-errors
                      (list (list 2 2 2 4 "bad beta" 'error 'fake-checker nil)
                            (list 1 nil nil nil "whole alpha" 'info 'fake-checker nil)
                            (list 1 1 nil nil "elsewhere" 'warning 'fake-checker "/other/file"))))
        (let ((items (append (plist-get (aref (plist-get (lispm-views-snapshot) :diagnostics) 0)
                                        :items)
                             nil)))
          (should (equal items
                         (list (list :message "bad beta" :severity "error"
                                     :range '(:start (:line 1 :character 1)
                                              :end (:line 1 :character 3))
                                     :source "fake-checker")
                               (list :message "whole alpha" :severity "info"
                                     :range '(:start (:line 0 :character 0)
                                              :end (:line 0 :character 0))
                                     :source "fake-checker")))))))))

(ert-deftest lispm-views-test-a-burst-of-commands-is-one-push ()
  (lispm-views-test--with-files (dir '(("f.txt" . "0123456789\n")))
    (let ((buffer (lispm-views-test--visit (expand-file-name "f.txt" dir))))
      (lispm-views-mode 1)
      (lispm-views-test--wait 0.15)
      (setq lispm-views-test--sent nil)
      (let* ((builds 0)
             (build (symbol-function 'lispm-views-snapshot)))
        (cl-letf (((symbol-function 'lispm-views-snapshot)
                   (lambda () (cl-incf builds) (funcall build))))
          (dotimes (i 10)
            (goto-char (+ (point-min) i))
            (run-hooks 'post-command-hook))
          ;; Commands only raise a flag: nothing is built or sent at once.
          (should (= builds 0))
          (should-not lispm-views-test--sent)
          (lispm-views-test--wait 0.2)
          (should (= builds 1))))
      (should (= (length lispm-views-test--sent) 1))
      (should (equal (plist-get (plist-get (cdar lispm-views-test--sent) :selection) :start)
                     '(:line 0 :character 9)))
      ;; A command that changes nothing pushes nothing.
      (run-hooks 'post-command-hook)
      (lispm-views-test--wait 0.15)
      (should (= (length lispm-views-test--sent) 1))
      ;; The next change is the next push.
      (goto-char (point-min))
      (run-hooks 'post-command-hook)
      (lispm-views-test--wait 0.15)
      (should (= (length lispm-views-test--sent) 2))
      (ignore buffer))))

(ert-deftest lispm-views-test-each-trigger-pushes ()
  (lispm-views-test--with-files (dir '(("g.txt" . "text\n")))
    (let ((buffer (find-file-noselect (expand-file-name "g.txt" dir))))
      (lispm-views-mode 1)
      (cl-flet ((pushes-after (thunk)
                  (lispm-views-test--wait 0.12)
                  (setq lispm-views-test--sent nil)
                  (funcall thunk)
                  (lispm-views-test--wait 0.12)
                  (length lispm-views-test--sent)))
        ;; A new buffer.
        (should (= 1 (pushes-after (lambda () (get-buffer-create "lispm views new")))))
        ;; The first unsaved change, outside any command.
        (should (= 1 (pushes-after (lambda () (with-current-buffer buffer (insert "x"))))))
        (should (eq t (plist-get (lispm-views-test--buffer-entry (cdar lispm-views-test--sent)
                                                                 "g.txt")
                                 :dirty)))
        ;; More typing in a modified buffer: no push (nothing the mirror has changed).
        (should (= 0 (pushes-after (lambda () (with-current-buffer buffer (insert "y"))))))
        ;; Saving.
        (should (= 1 (pushes-after (lambda () (with-current-buffer buffer (save-buffer))))))
        ;; A killed buffer.
        (should (= 1 (pushes-after (lambda () (kill-buffer "lispm views new")))))
        ;; A fresh sidecar gets the state at once, even if unchanged.
        (setq lispm-views-test--sent nil)
        (run-hooks 'lispm-sidecar-connected-hook)
        (should (= 1 (length lispm-views-test--sent))))
      ;; Off: nothing more.  `lispm-views-ensure' turns it on once.
      (lispm-views-mode -1)
      (lispm-views-ensure)
      (should lispm-views-mode)
      (lispm-views-ensure)
      (should lispm-views-mode)
      (lispm-views-mode -1)
      (setq lispm-views-test--sent nil)
      (get-buffer-create "lispm views after")
      (lispm-views-test--wait 0.12)
      (should-not lispm-views-test--sent))))

(ert-deftest lispm-views-test-nothing-is-sent-without-a-sidecar ()
  (lispm-views-test--with-files (dir nil)
    (cl-letf (((symbol-function 'lispm-sidecar-live-p) (lambda () nil))
              ((symbol-function 'lispm-views-snapshot) (lambda () (error "Built for nothing"))))
      (should-not (lispm-views-push))
      (should-not lispm-views-test--sent))
    (ignore dir)))

(ert-deftest lispm-views-test-buffer-text-reads-without-changing-anything ()
  (lispm-views-test--with-files (dir '(("h.txt" . "line one\nline two\n")))
    (let ((buffer (find-file-noselect (expand-file-name "h.txt" dir))))
      (with-current-buffer buffer
        (goto-char (point-max))
        (insert "unsaved line\n")
        (goto-char 6)
        (narrow-to-region 6 10))
      (let ((buffers (buffer-list))
            (tick (buffer-chars-modified-tick buffer))
            (undo (buffer-local-value 'buffer-undo-list buffer))
            (answer (lispm-sidecar-dispatch-request 'emacs/buffer-text '(:buffer "h.txt"))))
        (should (equal answer (list :buffer "h.txt"
                                    :file (expand-file-name "h.txt" dir)
                                    :truename (expand-file-name "h.txt" dir)
                                    :dirty t
                                    :text "line one\nline two\nunsaved line\n")))
        (with-current-buffer buffer
          (should (= (point) 6))
          (should (equal (cons (point-min) (point-max)) '(6 . 10))))
        (should (equal (buffer-list) buffers))
        (should (= (buffer-chars-modified-tick buffer) tick))
        (should (eq (buffer-local-value 'buffer-undo-list buffer) undo)))
      ;; The push reads the same way.
      (let ((buffers (buffer-list)))
        (with-current-buffer buffer
          (let ((point (point)))
            (lispm-views-snapshot)
            (should (= (point) point))))
        (should (equal (buffer-list) buffers))))))

(ert-deftest lispm-views-test-buffer-text-errors ()
  (let ((err (should-error (lispm-sidecar-dispatch-request
                            'emacs/buffer-text '(:buffer "no such buffer, surely"))
                           :type 'jsonrpc-error)))
    ;; `lispm-no-buffer': -32001 is the sidecar's unknown agent.
    (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32050)))
  (let ((internal (get-buffer-create " lispm views hidden")))
    (unwind-protect
        (let ((err (should-error (lispm-sidecar-dispatch-request
                                  'emacs/buffer-text '(:buffer " lispm views hidden"))
                                 :type 'jsonrpc-error)))
          (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32050)))
      (kill-buffer internal)))
  (dolist (params '(nil (:buffer 3) (:buffer "") (:name "x")))
    (let ((err (should-error (lispm-sidecar-dispatch-request 'emacs/buffer-text params)
                             :type 'jsonrpc-error)))
      (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32602)))))

(ert-deftest lispm-views-test-push-reaches-the-real-sidecar ()
  (let ((lispm-sidecar--connection nil)
        (lispm-sidecar--deaths nil)
        (lispm-sidecar-connected-hook nil)
        (lispm-sidecar--log-size 1000000)
        (transient-mark-mode t)
        (lispm-ledger-file (make-temp-file "lispm-views-ledger" nil ".sqlite3"))
        (odd (get-buffer-create (string ?r ?a ?w #x3fff80 ?b ?y ?t ?e)))
        (file (make-temp-file "lispm-views-real" nil ".txt" "héllo\nwörld ✓\n"))
        (sent nil))
    (unwind-protect
        (progn
          (lispm-views-mode 1)
          (let ((buffer (find-file-noselect file)))
            (delete-other-windows)
            (switch-to-buffer buffer)
            (goto-char (point-min))
            (push-mark (point-max) t t))
          (advice-add 'jsonrpc-connection-send :before
                      (lambda (_connection &rest args)
                        (when (eq (plist-get args :method) 'lispm/editor-state)
                          (push (plist-get args :params) sent)))
                      '((name . lispm-views-test-record)))
          ;; A fresh sidecar gets the whole state from the connected hook.
          (lispm-sidecar-connection)
          (should (= (length sent) 1))
          (should (equal (plist-get (plist-get (car sent) :selection) :text) "héllo\nwörld ✓\n"))
          ;; A later change goes too.
          (with-current-buffer (get-file-buffer file) (insert "more "))
          (should (lispm-views-push))
          (should (= (length sent) 2))
          ;; The sidecar read both frames: it answers, and logged no error.
          (should (equal (lispm-sidecar-request 'lispm/ping '(:after "push")) '(:after "push")))
          (should (lispm-sidecar-live-p))
          (let ((events (with-current-buffer (jsonrpc-events-buffer (lispm-sidecar-connection))
                          (buffer-string)))
                (stderr (with-current-buffer (jsonrpc-stderr-buffer (lispm-sidecar-connection))
                          (buffer-string))))
            (should (string-search "lispm/editor-state" events))
            (should-not (string-match-p "Traceback\\|Failed to handle\\|bad frame\\|parse error"
                                        stderr))))
      (advice-remove 'jsonrpc-connection-send 'lispm-views-test-record)
      (lispm-views-mode -1)
      (lispm-sidecar-stop)
      (when (get-file-buffer file)
        (with-current-buffer (get-file-buffer file) (set-buffer-modified-p nil))
        (kill-buffer (get-file-buffer file)))
      (kill-buffer odd)
      (delete-file file)
      (dolist (f (list lispm-ledger-file (concat lispm-ledger-file "-wal")
                       (concat lispm-ledger-file "-shm")))
        (when (file-exists-p f) (delete-file f))))))

(provide 'lispm-views-test)
;;; lispm-views-test.el ends here
