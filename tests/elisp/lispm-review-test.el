;;; lispm-review-test.el --- Tests of edits reviewed hunk by hunk  -*- lexical-binding: t; -*-

;;; Commentary:

;; A review splits an edit into hunks; what is written is exactly the
;; hunks the user let through, as the user edited them, on the file's
;; text as it is when the edit runs; the model is told which were
;; written and which were not.  Through the approvals buffer's keys,
;; the call pipeline and the real edit tools.

;;; Code:

(require 'ert)
(require 'lispm)
(require 'lispm-review)
(require 'lispm-test-fixtures)

(defun lispm-review-test--lines (n &optional changed)
  "Return N numbered lines; those whose number is in CHANGED are in capitals."
  (mapconcat (lambda (i) (format (if (memq i changed) "LINE %d\n" "line %d\n") i))
             (number-sequence 1 n) ""))

(defconst lispm-review-test--old (lispm-review-test--lines 30)
  "A file's text.")

(defconst lispm-review-test--new (lispm-review-test--lines 30 '(2 15 28))
  "The file's text after an edit of three hunks, far apart.")

(defun lispm-review-test--review ()
  "Return the review of the edit from the old text to the new."
  (lispm-review-make "/tmp/f.txt" (lispm-edit-diff lispm-review-test--old
                                                   lispm-review-test--new "f.txt")))

(ert-deftest lispm-review-test-splits-and-applies-what-is-let-through ()
  (let ((review (lispm-review-test--review)))
    (should (= (length (lispm-review-hunks review)) 3))
    (should-not (lispm-review-changed-p review))
    ;; Undecided hunks are written: the whole proposal.
    (should (equal (lispm-review-apply review lispm-review-test--old) lispm-review-test--new))
    (lispm-review-set review 2 'rejected)
    (should (lispm-review-changed-p review))
    (should (equal (lispm-review-apply review lispm-review-test--old)
                   (lispm-review-test--lines 30 '(2 28))))
    (should (equal (lispm-review-summary review)
                   "hunks 1 and 3 of 3 applied, 2 rejected"))
    (should-not (lispm-review-decided-p review))
    (lispm-review-set review 1 'accepted)
    (lispm-review-set review 3 'rejected)
    (should (lispm-review-decided-p review))
    (should (equal (lispm-review-apply review lispm-review-test--old)
                   (lispm-review-test--lines 30 '(2))))
    (should-error (lispm-review-set review 4 'accepted) :type 'lispm-review-error)
    (should-error (lispm-review-set review 1 'maybe) :type 'lispm-review-error)))

(ert-deftest lispm-review-test-applies-to-the-text-as-it-is-now ()
  ;; The user typed elsewhere in the file while the approval waited:
  ;; the hunks still apply, and the user's text stays.
  (let* ((review (lispm-review-test--review))
         (now (concat "the user's first line\n" lispm-review-test--old "the user's last\n")))
    (lispm-review-set review 1 'rejected)
    (should (equal (lispm-review-apply review now)
                   (concat "the user's first line\n" (lispm-review-test--lines 30 '(15 28))
                           "the user's last\n")))
    ;; A hunk whose lines are gone does not apply: nothing is written.
    (should-error (lispm-review-apply review (lispm-review-test--lines 10))
                  :type 'lispm-diff-does-not-apply)))

(ert-deftest lispm-review-test-edited-hunk-and-the-note ()
  (let ((review (lispm-review-test--review)))
    (let ((text (lispm-review-new-text review 2)))
      (should (string-match-p "LINE 15" text))
      (lispm-review-edit-hunk review 2 (string-replace "LINE 15" "Line fifteen" text)))
    (should (eq (lispm-review-hunk-state (lispm-review-nth-hunk review 2)) 'accepted))
    (should (string-match-p "^-line 15\n\\+Line fifteen$" (lispm-review-diff review)))
    (should (string-match-p "(edited by you)" (lispm-review-diff review)))
    (lispm-review-set review 3 'rejected)
    (let* ((written (lispm-review-apply review lispm-review-test--old))
           (note (lispm-review-note review lispm-review-test--new written "f.txt")))
      (should (string-match-p "Line fifteen" written))
      (should (string-match-p "hunks 1 and 2 of 3 applied, 3 rejected, 2 edited by the user"
                              note))
      (should (string-match-p "Hunk 3 (at line [0-9]+) was NOT applied" note))
      ;; The diff from the proposal to what was written, for the model.
      (should (string-match-p "^-LINE 15\n\\+Line fifteen$" note))
      (should (string-match-p "^-LINE 28\n\\+line 28$" note)))))

(ert-deftest lispm-review-test-no-review-of-what-is-no-diff ()
  (should-not (lispm-review-make "f" "not a diff"))
  (should-not (lispm-review-make "f" nil))
  (should-not (lispm-review-make "f" "")))

(ert-deftest lispm-review-test-no-newline-at-the-end ()
  (let* ((old "a\nb\nc")
         (new "a\nb\nC")
         (review (lispm-review-make "f" (lispm-edit-diff old new "f"))))
    (lispm-review-edit-hunk review 1 "a\nb\nsee")
    (should (equal (lispm-review-apply review old) "a\nb\nsee"))
    (should (string-match-p "No newline at end of file" (lispm-review-diff review)))))

;;; Through the approvals buffer and the pipeline

(defmacro lispm-review-test--with-edit (bindings &rest body)
  "Ask, as a live agent, to write the new text over the old; run BODY.
BINDINGS names (AGENT FILE BOX APPROVAL): the agent, the file, the
box of outcomes (newest first, in its car) and the approval."
  (declare (indent 1) (debug t))
  (pcase-let ((`(,agent ,file ,box ,approval) bindings))
    `(let ((notified nil))
       (cl-letf (((symbol-function 'lispm-sidecar-notify)
                  (lambda (method params) (push (cons method params) notified))))
         (lispm-test-with-agent (,agent)
           (let* ((,file (expand-file-name "f.txt" (lispm-agent-folder ,agent)))
                  (,box (list nil))
                  (,approval nil))
             (with-temp-file ,file (insert lispm-review-test--old))
             (lispm-calls-invoke ,agent "write_file"
                                 (list :path "f.txt" :content lispm-review-test--new)
                                 (lambda (outcome) (push outcome (car ,box)))
                                 :on-ask (lambda (asked) (setq ,approval asked)))
             (unwind-protect
                 (progn (should ,approval) ,@body)
               (when-let* ((buffer (find-buffer-visiting ,file)))
                 (with-current-buffer buffer (set-buffer-modified-p nil))
                 (kill-buffer buffer))
               (when (get-buffer lispm-approvals-buffer-name)
                 (kill-buffer lispm-approvals-buffer-name)))))))))

(defun lispm-review-test--goto-hunk (number)
  "Move point in the approvals buffer to hunk NUMBER of the first approval."
  (set-buffer lispm-approvals-buffer-name)
  (goto-char (point-min))
  (let ((pos (point-min)))
    (while (and pos (not (eql (get-text-property pos 'lispm-approvals-hunk) number)))
      (setq pos (next-single-property-change pos 'lispm-approvals-hunk)))
    (should pos)
    (goto-char pos)))

(defun lispm-review-test--file-text (file)
  "Return FILE's text on disk."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(ert-deftest lispm-review-test-keys-write-exactly-the-accepted-hunks ()
  (lispm-review-test--with-edit (agent file box approval)
    (should (lispm-approval-review approval))
    (with-current-buffer (lispm-approvals--buffer)
      ;; Each hunk is marked, undecided.
      (lispm-review-test--goto-hunk 3)
      (should (equal (get-text-property (point) 'line-prefix) "    "))
      (lispm-review-test--goto-hunk 1)
      (call-interactively (keymap-lookup lispm-approvals-mode-map "s"))
      (lispm-review-test--goto-hunk 1)
      (should (string-match-p "✓" (get-text-property (point) 'line-prefix)))
      (lispm-review-test--goto-hunk 2)
      (call-interactively (keymap-lookup lispm-approvals-mode-map "k"))
      (should-not (car box))
      (lispm-review-test--goto-hunk 2)
      (should (string-match-p "✗" (get-text-property (point) 'line-prefix)))
      (call-interactively (keymap-lookup lispm-approvals-mode-map "u"))
      (lispm-review-test--goto-hunk 2)
      (call-interactively (keymap-lookup lispm-approvals-mode-map "k"))
      (lispm-review-test--goto-hunk 3)
      ;; The last hunk decided answers the approval.
      (call-interactively (keymap-lookup lispm-approvals-mode-map "s")))
    (should (= (length (car box)) 1))
    (let ((outcome (caar box)))
      (should (plist-get outcome :ok))
      (should (string-match-p "hunks 1 and 3 of 3 applied, 2 rejected" (plist-get outcome :text)))
      (should (string-match-p "Hunk 2 (at line [0-9]+) was NOT applied" (plist-get outcome :text))))
    (should (equal (lispm-review-test--file-text file) (lispm-review-test--lines 30 '(2 28))))
    (should (cl-find-if (lambda (n) (and (eq (car n) 'lispm/audit)
                                         (equal (plist-get (cdr n) :reason)
                                                "hunks 1 and 3 of 3 applied, 2 rejected")))
                        notified))))

(ert-deftest lispm-review-test-every-hunk-rejected-is-a-denial ()
  (lispm-review-test--with-edit (agent file box approval)
    (with-current-buffer (lispm-approvals--buffer)
      (dolist (n '(1 2 3))
        (lispm-review-test--goto-hunk n)
        (call-interactively (keymap-lookup lispm-approvals-mode-map "k"))))
    (should (= (length (car box)) 1))
    (should-not (plist-get (caar box) :ok))
    (should (string-match-p "rejected every hunk" (plist-get (caar box) :error)))
    (should (equal (lispm-review-test--file-text file) lispm-review-test--old))))

(ert-deftest lispm-review-test-edited-hunk-is-written-and-told ()
  (lispm-review-test--with-edit (agent file box approval)
    (with-current-buffer (lispm-approvals--buffer)
      (lispm-review-test--goto-hunk 2)
      (call-interactively (keymap-lookup lispm-approvals-mode-map "e")))
    (with-current-buffer (format "*LispM %s hunk 2*" (lispm-approval-id approval))
      (should lispm-approvals-hunk-edit-mode)
      (goto-char (point-min))
      (should (search-forward "LINE 15" nil t))
      (replace-match "Line fifteen" t t)
      (lispm-approvals-hunk-edit-finish))
    (should-not (car box))
    ;; Meanwhile the user typed at the top of the file.
    (with-temp-file file (insert "mine\n" lispm-review-test--old))
    (lispm-approvals-allow approval)
    (let ((outcome (caar box)))
      (should (plist-get outcome :ok))
      (should (string-match-p "2 edited by the user" (plist-get outcome :text)))
      (should (string-match-p "^\\+Line fifteen$" (plist-get outcome :text))))
    (should (equal (lispm-review-test--file-text file)
                   (concat "mine\n" (string-replace "LINE 15" "Line fifteen"
                                                    lispm-review-test--new))))))

(ert-deftest lispm-review-test-allowed-whole-writes-the-proposal-unchanged ()
  (lispm-review-test--with-edit (agent file box approval)
    (lispm-approvals-allow approval)
    (should (plist-get (caar box) :ok))
    (should-not (string-match-p "hunk" (plist-get (caar box) :text)))
    (should (equal (lispm-review-test--file-text file) lispm-review-test--new))))

(ert-deftest lispm-review-test-a-hunk-that-no-longer-fits-writes-nothing ()
  (lispm-review-test--with-edit (agent file box approval)
    (with-current-buffer (lispm-approvals--buffer)
      (lispm-review-test--goto-hunk 1)
      (call-interactively (keymap-lookup lispm-approvals-mode-map "k")))
    (with-temp-file file (insert "all new\n"))
    (lispm-approvals-allow approval)
    (should-not (plist-get (caar box) :ok))
    (should (string-match-p "does not apply" (plist-get (caar box) :error)))
    (should (equal (lispm-review-test--file-text file) "all new\n"))))

(ert-deftest lispm-review-test-merged-by-hand ()
  (lispm-review-test--with-edit (agent file box approval)
    (let ((merged (generate-new-buffer " merged"))
          (shown (generate-new-buffer " shown")))
      (with-current-buffer merged (insert (lispm-review-test--lines 30 '(7))))
      (lispm-approvals--merged approval lispm-review-test--old merged shown)
      (should (lispm-review-replaced (lispm-approval-review approval)))
      (lispm-approvals-allow approval)
      (should (string-match-p "replaced the proposal" (plist-get (caar box) :text)))
      (should (equal (lispm-review-test--file-text file) (lispm-review-test--lines 30 '(7)))))))

(ert-deftest lispm-review-test-a-huge-diff-is-decided-whole ()
  (let ((lispm-approvals-review-limit 100))
    (lispm-review-test--with-edit (agent file box approval)
      (should-not (lispm-approval-review approval))
      (with-current-buffer (lispm-approvals--buffer)
        (should-not (text-property-any (point-min) (point-max) 'lispm-approvals-hunk 1)))
      (lispm-approvals-allow approval)
      (should (equal (lispm-review-test--file-text file) lispm-review-test--new)))))

(ert-deftest lispm-review-test-no-hunk-here ()
  (lispm-review-test--with-edit (agent file box approval)
    (with-current-buffer (lispm-approvals--buffer)
      (goto-char (lispm-approvals--position-of approval))
      (should-error (lispm-approvals-accept-hunk) :type 'user-error))
    (should (memq approval (lispm-approvals-pending)))))

(provide 'lispm-review-test)
;;; lispm-review-test.el ends here
