;;; lispm-ide-test.el --- Tests of diffs, open-file, save-document, send-region  -*- lexical-binding: t; -*-

;;; Commentary:

;; What Emacs tells the sidecar is captured where it leaves Emacs
;; (`lispm-sidecar-notify', `lispm-sidecar-async-request').  The diffs
;; run for real: the diff program, side windows, the file's buffer,
;; the file on disk, undo.

;;; Code:

(require 'ert)
(require 'lispm-ide)
(require 'lispm-test-fixtures)

(defvar lispm-ide-test--sent nil
  "The notifications captured, newest first: (METHOD . PARAMS).")

(defmacro lispm-ide-test--with-fixture (spec &rest body)
  "Run BODY with DIR bound to a temporary directory holding FILES.
SPEC is (DIR FILES), FILES an alist (NAME . CONTENTS).  The frame
starts with one window on a scratch buffer; notifications are captured
in `lispm-ide-test--sent'; diffs, buffers and files are cleaned up."
  (declare (indent 1) (debug t))
  (pcase-let ((`(,dir ,files) spec))
    `(let* ((,dir (file-name-as-directory (file-truename (make-temp-file "lispm-ide" t))))
            (old-buffers (buffer-list))
            (lispm-ide-test--sent nil)
            (lispm-ide--diffs nil)
            (lispm-ide--layouts nil)
            (make-backup-files nil)
            ;; A long message grows the echo area, and so shrinks the windows.
            (resize-mini-windows nil)
            (transient-mark-mode t))
       (dolist (file ,files)
         (with-temp-file (expand-file-name (car file) ,dir) (insert (cdr file))))
       ;; In batch, the first `set-window-configuration' moves the root
       ;; window one line down (the menu bar's line): get that over with.
       (set-window-configuration (current-window-configuration))
       (delete-other-windows)
       (switch-to-buffer (get-buffer-create "lispm ide scratch"))
       (cl-letf (((symbol-function 'lispm-sidecar-notify)
                  (lambda (method params) (push (cons method params) lispm-ide-test--sent))))
         (unwind-protect (progn ,@body)
           (lispm-ide-close-diffs #'always)
           (delete-other-windows)
           (dolist (buffer (buffer-list))
             (unless (memq buffer old-buffers)
               (with-current-buffer buffer (set-buffer-modified-p nil))
               (kill-buffer buffer)))
           (delete-directory ,dir t))))))

(defun lispm-ide-test--file-contents (file)
  "Return the contents of FILE on disk."
  (with-temp-buffer
    (insert-file-contents file)
    (buffer-string)))

(defun lispm-ide-test--open (id agent file contents &optional tab-name)
  "Ask for a diff as the sidecar does; return the pending diff ID."
  (should (equal (lispm-sidecar-dispatch-request
                  'emacs/open-diff (list :id id :agent agent :file file
                                         :new_contents contents :tab_name tab-name))
                 '(:shown t)))
  (cl-find id lispm-ide--diffs :key #'lispm-ide-diff-id :test #'equal))

(defun lispm-ide-test--split-layout ()
  "Make a two-window layout with buffers of their own; return its configuration."
  (delete-other-windows)
  (switch-to-buffer (get-buffer-create "lispm ide left"))
  (let ((right (split-window-right)))
    (set-window-buffer right (get-buffer-create "lispm ide right")))
  (current-window-configuration))

(ert-deftest lispm-ide-test-accept-writes-as-one-undo-step ()
  (lispm-ide-test--with-fixture (dir '(("f.txt" . "alpha\nbeta\ngamma\n")))
    (let* ((file (expand-file-name "f.txt" dir))
           (buffer (find-file-noselect file))
           (config (lispm-ide-test--split-layout))
           (right (next-window))
           (marker (with-current-buffer buffer
                     (goto-char (point-min))
                     (search-forward "gamma")
                     (goto-char (match-beginning 0))
                     (copy-marker (+ (point-min) 2))))
           (_shown (progn (set-window-buffer right buffer)
                          (set-window-point right (with-current-buffer buffer (point)))
                          (setq config (current-window-configuration))))
           (diff (lispm-ide-test--open "d1" "claude" file "alpha\nBETA\ngamma\n" "tab 1"))
           (diff-buffer (lispm-ide-diff-diff-buffer diff)))
      ;; Shown in a side window, the user's windows as they were beside it.
      (let ((window (get-buffer-window diff-buffer)))
        (should window)
        (should (eq (window-parameter window 'window-side) 'right)))
      (should (get-buffer-window "lispm ide left"))
      (should (eq (window-buffer right) buffer))
      (should (string-prefix-p "*lispm diff: f.txt (claude)" (buffer-name diff-buffer)))
      (with-current-buffer diff-buffer
        (should (eq major-mode 'lispm-ide-diff-mode))
        (should-not diff-refine)
        (should (string-match-p "^-beta$" (buffer-string)))
        (should (string-match-p "^\\+BETA$" (buffer-string)))
        (should (string-match-p "claude proposes a change to f.txt" header-line-format))
        (should (string-match-p "C-c C-c accept" header-line-format))
        (should (string-match-p "C-c C-k reject" header-line-format)))
      ;; Nothing is written before the decision.
      (should (equal (lispm-ide-test--file-contents file) "alpha\nbeta\ngamma\n"))
      (should-not lispm-ide-test--sent)
      (with-current-buffer diff-buffer
        (call-interactively #'lispm-ide-accept))
      (should (equal (lispm-ide-test--file-contents file) "alpha\nBETA\ngamma\n"))
      (should (equal lispm-ide-test--sent
                     '((lispm/diff-resolved :id "d1" :outcome "saved"
                                            :contents "alpha\nBETA\ngamma\n"))))
      (should-not (buffer-live-p diff-buffer))
      (should-not (buffer-live-p (lispm-ide-diff-proposal-buffer diff)))
      (should-not lispm-ide--diffs)
      (should (compare-window-configurations config (current-window-configuration)))
      (with-current-buffer buffer
        (should-not (buffer-modified-p))
        ;; Point and markers stayed with their text, in the window too.
        (should (looking-at "gamma"))
        (should (= marker (+ (point-min) 2)))
        (should (eq (window-buffer right) buffer))
        (should (equal (buffer-substring (window-point right) (+ (window-point right) 5))
                       "gamma"))
        ;; One undo puts the old text back, exactly.
        (let ((last-command nil))
          (undo))
        (should (equal (buffer-string) "alpha\nbeta\ngamma\n"))))))

(ert-deftest lispm-ide-test-accept-after-editing-the-proposal ()
  (lispm-ide-test--with-fixture (dir '(("g.py" . "x = 1\n")))
    (let* ((file (expand-file-name "g.py" dir))
           (config (lispm-ide-test--split-layout))
           (diff (lispm-ide-test--open 7 "claude" file "x = 2\n")))
      (with-current-buffer (lispm-ide-diff-diff-buffer diff)
        (call-interactively #'lispm-ide-edit-proposal))
      ;; The proposal is selected, in the file's mode, to edit.
      (should (eq (window-buffer (selected-window)) (lispm-ide-diff-proposal-buffer diff)))
      (set-buffer (window-buffer (selected-window)))
      (should (eq major-mode 'python-mode))
      (should lispm-ide-proposal-mode)
      (goto-char (point-max))
      (insert "y = 3  # mine\n")
      (call-interactively #'lispm-ide-accept)
      (should (equal (lispm-ide-test--file-contents file) "x = 2\ny = 3  # mine\n"))
      (should (equal lispm-ide-test--sent
                     '((lispm/diff-resolved :id 7 :outcome "saved"
                                            :contents "x = 2\ny = 3  # mine\n"))))
      ;; The file was not visited before: it is now, as it was written.
      (with-current-buffer (find-buffer-visiting file)
        (should (equal (buffer-string) "x = 2\ny = 3  # mine\n")))
      ;; The selection went back where it was.  (The current buffer, killed,
      ;; is the selected window's again after a command, as here.)
      (set-buffer (window-buffer (selected-window)))
      (should (compare-window-configurations config (current-window-configuration)))
      (should (eq (window-buffer (selected-window)) (get-buffer "lispm ide left"))))))

(ert-deftest lispm-ide-test-accept-writes-exactly-the-proposal ()
  ;; No final newline added by the mode, CR LF files stay CR LF.
  (lispm-ide-test--with-fixture (dir '(("h.el" . "(a)\n")))
    (let* ((file (expand-file-name "h.el" dir))
           (diff (lispm-ide-test--open "n1" "claude" file "(b)")))
      (lispm-ide-accept diff)
      (should (equal (lispm-ide-test--file-contents file) "(b)"))
      (should (equal (plist-get (cdar lispm-ide-test--sent) :contents) "(b)"))))
  (lispm-ide-test--with-fixture (dir nil)
    (let ((file (expand-file-name "dos.txt" dir)))
      (let ((coding-system-for-write 'no-conversion))
        (write-region "one\r\ntwo\r\n" nil file))
      (let ((diff (lispm-ide-test--open "n2" "claude" file "one\r\nTWO\r\n")))
        (with-current-buffer (lispm-ide-diff-proposal-buffer diff)
          (should (equal (buffer-string) "one\nTWO\n")))
        (lispm-ide-accept diff)
        (should (equal (plist-get (cdar lispm-ide-test--sent) :contents) "one\r\nTWO\r\n"))
        (with-temp-buffer
          (set-buffer-multibyte nil)
          (insert-file-contents-literally file)
          (should (equal (buffer-string) "one\r\nTWO\r\n")))))))

(ert-deftest lispm-ide-test-a-hunk-rejected-is-not-written ()
  (let ((old (mapconcat (lambda (i) (format "line %d\n" i)) (number-sequence 1 20) "")))
    (lispm-ide-test--with-fixture (dir `(("h.txt" . ,old)))
      (let* ((file (expand-file-name "h.txt" dir))
             (new (string-replace "line 18\n" "LINE 18\n" (string-replace "line 2\n" "LINE 2\n" old)))
             (diff (lispm-ide-test--open "k1" "claude" file new)))
        (with-current-buffer (lispm-ide-diff-diff-buffer diff)
          (goto-char (point-min))
          (should-error (lispm-ide-reject-hunk) :type 'user-error)
          (re-search-forward "^\\+LINE 2$")
          (call-interactively (keymap-lookup lispm-ide-diff-mode-map "k"))
          ;; The diff shows what is left: the second hunk only.
          (should-not (save-excursion (goto-char (point-min)) (re-search-forward "^\\+LINE 2$" nil t)))
          (should (save-excursion (goto-char (point-min)) (re-search-forward "^\\+LINE 18$" nil t))))
        (lispm-ide-accept diff)
        (should (equal (lispm-ide-test--file-contents file)
                       (string-replace "line 18\n" "LINE 18\n" old)))
        ;; Claude Code learns exactly what was written.
        (should (equal (plist-get (cdar lispm-ide-test--sent) :contents)
                       (string-replace "line 18\n" "LINE 18\n" old)))))))

(ert-deftest lispm-ide-test-reject-changes-nothing ()
  (lispm-ide-test--with-fixture (dir '(("r.txt" . "keep me\n")))
    (let* ((file (expand-file-name "r.txt" dir))
           (buffer (find-file-noselect file))
           (config (progn (lispm-ide-test--split-layout)
                          (set-window-buffer (next-window) buffer)
                          (set-window-point (next-window) 6)
                          (current-window-configuration)))
           (tick (buffer-modified-tick buffer))
           (diff (lispm-ide-test--open "r1" "claude" file "replace me\n")))
      ;; The user looks around while the diff waits: that stays.
      (set-window-point (get-buffer-window buffer) 2)
      ;; The [Reject] button, as a click or RET would press it.
      (with-current-buffer (lispm-ide-diff-diff-buffer diff)
        (goto-char (point-min))
        (search-forward "[Reject]")
        (push-button (match-beginning 0)))
      (should (equal lispm-ide-test--sent '((lispm/diff-resolved :id "r1" :outcome "rejected"))))
      (should (equal (lispm-ide-test--file-contents file) "keep me\n"))
      (should (= (buffer-modified-tick buffer) tick))
      (should-not (buffer-modified-p buffer))
      (should (= (window-point (get-buffer-window buffer)) 2))
      (should (compare-window-configurations config (current-window-configuration)))
      (should-not (buffer-live-p (lispm-ide-diff-diff-buffer diff)))
      ;; A decided diff cannot be decided again.
      (should-error (lispm-ide-accept diff) :type 'user-error)
      (should (equal (lispm-ide-test--file-contents file) "keep me\n")))))

(ert-deftest lispm-ide-test-killing-a-diff-buffer-closes-it ()
  (lispm-ide-test--with-fixture (dir '(("k.txt" . "old\n")))
    (let* ((file (expand-file-name "k.txt" dir))
           (config (lispm-ide-test--split-layout))
           (one (lispm-ide-test--open "k1" "claude" file "new\n")))
      (kill-buffer (lispm-ide-diff-diff-buffer one))
      (should (equal lispm-ide-test--sent '((lispm/diff-resolved :id "k1" :outcome "closed"))))
      (should-not (buffer-live-p (lispm-ide-diff-proposal-buffer one)))
      (should (compare-window-configurations config (current-window-configuration)))
      ;; Killing the proposal closes it too.
      (let ((two (lispm-ide-test--open "k2" "claude" file "newer\n")))
        (kill-buffer (lispm-ide-diff-proposal-buffer two))
        (should (equal (car lispm-ide-test--sent)
                       '(lispm/diff-resolved :id "k2" :outcome "closed")))
        (should-not (buffer-live-p (lispm-ide-diff-diff-buffer two))))
      (should (= (length lispm-ide-test--sent) 2))
      (should-not lispm-ide--diffs)
      (should (compare-window-configurations config (current-window-configuration)))
      (should (equal (lispm-ide-test--file-contents file) "old\n")))))

(ert-deftest lispm-ide-test-two-pending-diffs-at-once ()
  (lispm-ide-test--with-fixture (dir '(("a.txt" . "a\n") ("b.txt" . "b\n")))
    (let* ((config (lispm-ide-test--split-layout))
           (one (lispm-ide-test--open "t1" "claude" (expand-file-name "a.txt" dir) "A\n"))
           (two (lispm-ide-test--open "t2" "claude-2" (expand-file-name "b.txt" dir) "B\n")))
      ;; One side window: the newest diff.
      (should (get-buffer-window (lispm-ide-diff-diff-buffer two)))
      (should-not (get-buffer-window (lispm-ide-diff-diff-buffer one)))
      (should (string-match-p "(claude-2)" (buffer-name (lispm-ide-diff-diff-buffer two))))
      ;; The shown one is decided: the other takes its window.
      (lispm-ide-accept two)
      (should (get-buffer-window (lispm-ide-diff-diff-buffer one)))
      (should (equal (lispm-ide-pending-diffs) (list one)))
      (lispm-ide-reject one)
      (should (equal (reverse lispm-ide-test--sent)
                     '((lispm/diff-resolved :id "t2" :outcome "saved" :contents "B\n")
                       (lispm/diff-resolved :id "t1" :outcome "rejected"))))
      (should (equal (lispm-ide-test--file-contents (expand-file-name "a.txt" dir)) "a\n"))
      (should (equal (lispm-ide-test--file-contents (expand-file-name "b.txt" dir)) "B\n"))
      (should (compare-window-configurations config (current-window-configuration)))))
  ;; The user hid the first (q): when the second is decided, the first,
  ;; still waiting, shows again.
  (lispm-ide-test--with-fixture (dir '(("a.txt" . "a\n") ("b.txt" . "b\n")))
    (let* ((config (lispm-ide-test--split-layout))
           (one (lispm-ide-test--open "h1" "claude" (expand-file-name "a.txt" dir) "A\n")))
      (quit-window nil (get-buffer-window (lispm-ide-diff-diff-buffer one)))
      (should-not (get-buffer-window (lispm-ide-diff-diff-buffer one)))
      (should (eq (lispm-ide-diff-state one) 'pending))
      (let ((two (lispm-ide-test--open "h2" "claude" (expand-file-name "b.txt" dir) "B\n")))
        (lispm-ide-reject two))
      (should (get-buffer-window (lispm-ide-diff-diff-buffer one)))
      (lispm-ide-reject one)
      (should (compare-window-configurations config (current-window-configuration)))))
  ;; The other order: the hidden one first.
  (lispm-ide-test--with-fixture (dir '(("a.txt" . "a\n") ("b.txt" . "b\n")))
    (let* ((config (lispm-ide-test--split-layout))
           (one (lispm-ide-test--open "u1" "claude" (expand-file-name "a.txt" dir) "A\n"))
           (two (lispm-ide-test--open "u2" "codex" (expand-file-name "b.txt" dir) "B\n")))
      (lispm-ide-reject one)
      (should (get-buffer-window (lispm-ide-diff-diff-buffer two)))
      (lispm-ide-accept two)
      (should (equal (lispm-ide-test--file-contents (expand-file-name "b.txt" dir)) "B\n"))
      (should (compare-window-configurations config (current-window-configuration))))))

(ert-deftest lispm-ide-test-a-new-file ()
  (lispm-ide-test--with-fixture (dir nil)
    (let* ((file (expand-file-name "sub/dir/new.txt" dir))
           (diff (lispm-ide-test--open "new" "claude" file "brand new ✓\n")))
      (with-current-buffer (lispm-ide-diff-diff-buffer diff)
        (should (string-match-p "(a new file)" (buffer-string)))
        (should (string-match-p "^\\+brand new ✓$" (buffer-string)))
        (should-not (string-match-p "^-" (replace-regexp-in-string "^--- .*" "" (buffer-string)))))
      (should-not (file-exists-p file))
      (should-not (find-buffer-visiting file))
      (lispm-ide-accept diff)
      (should (equal (lispm-ide-test--file-contents file) "brand new ✓\n"))
      (should (equal lispm-ide-test--sent
                     '((lispm/diff-resolved :id "new" :outcome "saved"
                                            :contents "brand new ✓\n")))))))

(ert-deftest lispm-ide-test-the-old-side-is-the-buffer-text ()
  (lispm-ide-test--with-fixture (dir '(("u.txt" . "on disk\n")))
    (let* ((file (expand-file-name "u.txt" dir))
           (buffer (find-file-noselect file)))
      (with-current-buffer buffer
        (erase-buffer)
        (insert "in emacs\n"))
      (let ((diff (lispm-ide-test--open "u" "claude" file "proposed\n")))
        (with-current-buffer (lispm-ide-diff-diff-buffer diff)
          (should (string-match-p "^-in emacs$" (buffer-string)))
          (should-not (string-match-p "on disk" (buffer-string))))
        ;; The diff follows the proposal when refreshed.
        (with-current-buffer (lispm-ide-diff-proposal-buffer diff)
          (erase-buffer)
          (insert "edited\n"))
        (with-current-buffer (lispm-ide-diff-diff-buffer diff)
          (lispm-ide-refresh-diff)
          (should (string-match-p "^\\+edited$" (buffer-string))))
        (lispm-ide-accept diff)
        (should (equal (lispm-ide-test--file-contents file) "edited\n"))
        (with-current-buffer buffer
          (let ((last-command nil)) (undo))
          (should (equal (buffer-string) "in emacs\n")))))))

(ert-deftest lispm-ide-test-a-save-hook-that-edits-is-in-the-same-undo-step ()
  ;; A formatter on `before-save-hook': what it makes is what was written
  ;; and reported, and one undo takes back all of it.
  (lispm-ide-test--with-fixture (dir '(("s.txt" . "one\ntwo\n")))
    (let* ((file (expand-file-name "s.txt" dir))
           (buffer (find-file-noselect file))
           (diff (lispm-ide-test--open "s" "claude" file "one  \nTWO  \n")))
      (with-current-buffer buffer
        (add-hook 'before-save-hook
                  (lambda () (undo-boundary) (delete-trailing-whitespace) (undo-boundary))
                  nil t))
      (lispm-ide-accept diff)
      (should (equal (lispm-ide-test--file-contents file) "one\nTWO\n"))
      (should (equal (plist-get (cdar lispm-ide-test--sent) :contents) "one\nTWO\n"))
      (with-current-buffer buffer
        (let ((last-command nil)) (undo))
        (should (equal (buffer-string) "one\ntwo\n"))))))

(ert-deftest lispm-ide-test-a-side-window-the-diff-took-comes-back ()
  ;; The user's own side window, in the slot diffs use: the diff takes it,
  ;; the decision gives it back, with its buffer.
  (lispm-ide-test--with-fixture (dir '(("v.txt" . "v\n")))
    (let* ((config (lispm-ide-test--split-layout))
           (help (get-buffer-create "lispm ide help"))
           (side (display-buffer help '((display-buffer-in-side-window)
                                        (side . right) (slot . 1)))))
      (setq config (current-window-configuration))
      (let ((diff (lispm-ide-test--open "v" "claude" (expand-file-name "v.txt" dir) "V\n")))
        (should (eq (window-buffer side) (lispm-ide-diff-diff-buffer diff)))
        (lispm-ide-reject diff))
      (should (window-live-p side))
      (should (eq (window-buffer side) help))
      (should (compare-window-configurations config (current-window-configuration)))))
  ;; The same when the user also rearranged the other windows meanwhile.
  (lispm-ide-test--with-fixture (dir '(("v.txt" . "v\n")))
    (lispm-ide-test--split-layout)
    (let* ((help (get-buffer-create "lispm ide help"))
           (side (display-buffer help '((display-buffer-in-side-window)
                                        (side . right) (slot . 1))))
           (diff (lispm-ide-test--open "v" "claude" (expand-file-name "v.txt" dir) "V\n")))
      (set-window-buffer (selected-window) (get-buffer-create "lispm ide elsewhere"))
      (lispm-ide-reject diff)
      (should (window-live-p side))
      (should (eq (window-buffer side) help))
      (should (eq (window-buffer (selected-window)) (get-buffer "lispm ide elsewhere"))))))

(ert-deftest lispm-ide-test-the-user-rearranged-windows ()
  ;; A window the user opened meanwhile stays; only LispM's windows go.
  (lispm-ide-test--with-fixture (dir '(("w.txt" . "w\n")))
    (lispm-ide-test--split-layout)
    (let ((diff (lispm-ide-test--open "w" "claude" (expand-file-name "w.txt" dir) "W\n")))
      (set-window-buffer (selected-window) (get-buffer-create "lispm ide elsewhere"))
      (lispm-ide-reject diff)
      (should (eq (window-buffer (selected-window)) (get-buffer "lispm ide elsewhere")))
      (should (= (length (window-list)) 2))
      (should-not (cl-some (lambda (w) (window-parameter w 'window-side)) (window-list))))))

(ert-deftest lispm-ide-test-close-diff-requests ()
  (lispm-ide-test--with-fixture (dir '(("c.txt" . "c\n")))
    (let ((file (expand-file-name "c.txt" dir))
          (config (lispm-ide-test--split-layout)))
      (lispm-ide-test--open "c1" "claude" file "1\n" "tab one")
      (lispm-ide-test--open "c2" "claude" file "2\n" "tab two")
      (lispm-ide-test--open "c3" "claude-2" file "3\n" "tab three")
      (lispm-ide-test--open "c4" "claude-2" file "4\n" "tab four")
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:id "nope")) '(:closed 0)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:id "c1")) '(:closed 1)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:id "c1")) '(:closed 0)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:tab_name "tab two"))
                     '(:closed 1)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff
                                                   '(:all t :agent "someone else"))
                     '(:closed 0)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:all t :agent "claude-2"))
                     '(:closed 2)))
      (should (equal (mapcar (lambda (n) (plist-get (cdr n) :id)) (reverse lispm-ide-test--sent))
                     '("c1" "c2" "c3" "c4")))
      (should (cl-every (lambda (n) (equal (plist-get (cdr n) :outcome) "closed"))
                        lispm-ide-test--sent))
      (should-not lispm-ide--diffs)
      (should (compare-window-configurations config (current-window-configuration)))
      (should (equal (lispm-ide-test--file-contents file) "c\n"))
      (let ((err (should-error (lispm-sidecar-dispatch-request 'emacs/close-diff nil)
                               :type 'jsonrpc-error)))
        (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32602)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/close-diff '(:all :json-false :id "x"))
                     '(:closed 0))))))

(ert-deftest lispm-ide-test-open-diff-bad-params ()
  (lispm-ide-test--with-fixture (dir '(("p.txt" . "p\n")))
    (let ((file (expand-file-name "p.txt" dir)))
      (dolist (params (list (list :agent "claude" :file file :new_contents "x")
                            (list :id "b" :file file :new_contents "x")
                            (list :id "b" :agent "claude" :new_contents "x")
                            (list :id "b" :agent "claude" :file "p.txt" :new_contents "x")
                            (list :id "b" :agent "claude" :file file)
                            (list :id "b" :agent "claude" :file file :new_contents 3)
                            (list :id "b" :agent "claude" :file dir :new_contents "x")
                            (list :id :json-false :agent "claude" :file file :new_contents "x")))
        (let ((err (should-error (lispm-sidecar-dispatch-request 'emacs/open-diff params)
                                 :type 'jsonrpc-error)))
          (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32602))))
      (should-not lispm-ide--diffs)
      ;; The same id twice.
      (lispm-ide-test--open "same" "claude" file "1\n")
      (let ((err (should-error (lispm-sidecar-dispatch-request
                                'emacs/open-diff (list :id "same" :agent "claude" :file file
                                                       :new_contents "2\n"))
                               :type 'jsonrpc-error)))
        (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32602)))
      (should (= (length lispm-ide--diffs) 1))
      (should (= (length (seq-filter (lambda (b) (string-prefix-p "*lispm diff" (buffer-name b)))
                                     (buffer-list)))
                 1)))))

(ert-deftest lispm-ide-test-open-file-selects-the-range ()
  (lispm-ide-test--with-fixture (dir '(("o.txt" . "first line\nsecond line here\nthird line\n")))
    (let ((file (expand-file-name "o.txt" dir)))
      (should (equal (lispm-sidecar-dispatch-request
                      'emacs/open-file (list :file file :start_text "second" :end_text "third"))
                     '(:opened t :selected t)))
      (let ((buffer (find-buffer-visiting file)))
        (should (eq (window-buffer (selected-window)) buffer))
        (with-current-buffer buffer
          (should (region-active-p))
          (should (equal (buffer-substring (region-beginning) (region-end))
                         "second line here\nthird"))))
      ;; To the end of the line; no end text.
      (lispm-sidecar-dispatch-request
       'emacs/open-file (list :file file :start_text "line here" :select_to_eol t))
      (with-current-buffer (find-buffer-visiting file)
        (should (equal (buffer-substring (region-beginning) (region-end)) "line here")))
      (lispm-sidecar-dispatch-request
       'emacs/open-file (list :file file :start_text "first" :select_to_eol t))
      (with-current-buffer (find-buffer-visiting file)
        (should (equal (buffer-substring (region-beginning) (region-end)) "first line")))
      ;; Text that is not there: opened, nothing selected.
      (should (equal (lispm-sidecar-dispatch-request
                      'emacs/open-file (list :file file :start_text "absent"))
                     '(:opened t :selected :json-false)))))
  (lispm-ide-test--with-fixture (dir '(("bg.txt" . "one\ntwo\n")))
    (let ((file (expand-file-name "bg.txt" dir)))
      ;; In the background: visited and selected, not shown.
      (lispm-sidecar-dispatch-request
       'emacs/open-file (list :file file :start_text "two" :make_frontmost :json-false))
      (let ((buffer (find-buffer-visiting file)))
        (should buffer)
        (should-not (get-buffer-window buffer))
        (should (eq (window-buffer (selected-window)) (get-buffer "lispm ide scratch")))
        (with-current-buffer buffer
          (should (equal (buffer-substring (region-beginning) (region-end)) "two"))))
      (let ((err (should-error (lispm-sidecar-dispatch-request
                                'emacs/open-file (list :file (expand-file-name "none" dir)))
                               :type 'jsonrpc-error)))
        ;; `lispm-no-such-file': -32001 is the sidecar's unknown agent.
        (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32051)))
      (dolist (params (list nil (list :file "relative.txt") (list :file dir)
                            (list :file file :start_text 5)))
        (let ((err (should-error (lispm-sidecar-dispatch-request 'emacs/open-file params)
                                 :type 'jsonrpc-error)))
          (should (eql (alist-get 'jsonrpc-error-code (cdr err)) -32602)))))))

(ert-deftest lispm-ide-test-save-document ()
  (lispm-ide-test--with-fixture (dir '(("s.txt" . "saved\n") ("t.txt" . "not open\n")))
    (let* ((file (expand-file-name "s.txt" dir))
           (buffer (find-file-noselect file)))
      (should (equal (lispm-sidecar-dispatch-request 'emacs/save-document (list :file file))
                     (list :saved t :message (format "No unsaved changes in %s" file))))
      (with-current-buffer buffer (goto-char (point-max)) (insert "more\n"))
      (let ((answer (lispm-sidecar-dispatch-request 'emacs/save-document (list :file file))))
        (should (eq (plist-get answer :saved) t)))
      (should-not (buffer-modified-p buffer))
      (should (equal (lispm-ide-test--file-contents file) "saved\nmore\n"))
      (let* ((other (expand-file-name "t.txt" dir))
             (answer (lispm-sidecar-dispatch-request 'emacs/save-document (list :file other))))
        (should (eq (plist-get answer :saved) :json-false))
        (should (string-match-p "not open" (plist-get answer :message)))
        (should-not (find-buffer-visiting other)))
      ;; Changed on disk since: not saved, no question asked.
      (with-current-buffer buffer (insert "mine\n"))
      (with-temp-file file (insert "theirs\n"))
      (set-file-times file (time-add nil 5))  ; a later time than the buffer's visit, for sure
      (let ((answer (lispm-sidecar-dispatch-request 'emacs/save-document (list :file file))))
        (should (eq (plist-get answer :saved) :json-false))
        (should (string-match-p "changed on disk" (plist-get answer :message))))
      (should (equal (lispm-ide-test--file-contents file) "theirs\n"))
      (should-error (lispm-sidecar-dispatch-request 'emacs/save-document '(:file "x"))
                    :type 'jsonrpc-error))))

(ert-deftest lispm-ide-test-send-region-mentions-lines-to-claude ()
  (lispm-ide-test--with-fixture (dir '(("m.el" . "one\ntwo\nthree\nfour\n")))
    (let* ((terminal (get-buffer-create "lispm ide fake terminal"))
           (terminal-2 (get-buffer-create "lispm ide fake terminal 2"))
           (requests nil)
           (file (expand-file-name "m.el" dir))
           (buffer (find-file-noselect file)))
      (lispm-test-with-registry
        (cl-letf (((symbol-function 'lispm-sidecar-async-request)
                   (lambda (method params &rest _) (push (cons method params) requests))))
          (lispm-test-add-agent :name "codex" :kind 'codex :folder dir :buffer terminal)
          (switch-to-buffer buffer)
          ;; No Claude: the user's mistake.
          (should-error (call-interactively #'lispm-send-region) :type 'user-error)
          (lispm-test-add-agent :name "claude" :kind 'claude :folder dir :buffer terminal)
          ;; Lines 2 to 3 (0-based 1-2); the region ends at the start of line 4.
          (goto-char (point-min)) (forward-line 1)
          (push-mark (point) t t)
          (forward-line 2)
          (call-interactively #'lispm-send-region)
          (should (equal (car requests)
                         (cons 'lispm/at-mention
                               (list :name "claude" :instance 2 :file file
                                     :line_start 1 :line_end 2))))
          (should (eq (window-buffer (selected-window)) terminal))
          ;; No region: the current line.  Two Claudes: asked which.
          (lispm-test-add-agent :name "claude-2" :kind 'claude :folder dir :buffer terminal-2)
          (switch-to-buffer buffer)
          (deactivate-mark)
          (goto-char (point-min))
          (cl-letf (((symbol-function 'completing-read)
                     (lambda (_prompt collection &rest _)
                       (should (equal (sort (copy-sequence collection) #'string<)
                                      '("claude" "claude-2")))
                       "claude-2")))
            (call-interactively #'lispm-send-region))
          (should (equal (car requests)
                         (cons 'lispm/at-mention
                               (list :name "claude-2" :instance 3 :file file
                                     :line_start 0 :line_end 0))))
          (should (eq (window-buffer (selected-window)) terminal-2))
          ;; Not a file's buffer.
          (switch-to-buffer (get-buffer-create "lispm ide no file"))
          (should-error (call-interactively #'lispm-send-region) :type 'user-error)
          (should (= (length requests) 2)))))))

(provide 'lispm-ide-test)
;;; lispm-ide-test.el ends here
