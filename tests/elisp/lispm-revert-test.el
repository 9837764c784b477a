;;; lispm-revert-test.el --- Reverts never bring back what the user removed  -*- lexical-binding: t; -*-

;;; Commentary:

;; Issue 23 §2, on real buffers and files: a file moved or deleted by
;; another program while its buffer is open is a conflict; turns
;; reverted newest first always revert; an edit the user undid counts
;; as reverted, and the rest of its turn reverts.

;;; Code:

(require 'ert)
(require 'lispm-edit)
(require 'lispm-test-fixtures)

(ert-deftest lispm-revert-a-file-moved-away-is-a-conflict ()
  "`mv' of a file whose buffer is open: a conflict naming it; nothing changes."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "a.txt" "one\ntwo\n"))
           (moved (expand-file-name "b.txt" folder))
           (changes (list (lispm-edit-replace file "one\nTWO by the agent\n" :save t))))
      (should (find-buffer-visiting file))
      (rename-file file moved)
      (let ((err (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict)))
        (should (string-match-p "a\\.txt" (error-message-string err))))
      (should-not (file-exists-p file))
      (should (equal (lispm-test-read-file moved) "one\nTWO by the agent\n")))))

(ert-deftest lispm-revert-a-file-deleted-is-a-conflict ()
  "`rm' of a file whose buffer is open: a conflict; the file is not made again."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "a.txt" "one\ntwo\n"))
           (changes (list (lispm-edit-replace file "one\nTWO\n" :save t))))
      (delete-file file)
      (let ((err (should-error (lispm-edit-revert changes) :type 'lispm-revert-conflict)))
        (should (string-match-p "a\\.txt" (error-message-string err))))
      (should-not (file-exists-p file)))))

(ert-deftest lispm-revert-turns-newest-first-always-revert ()
  "Turn 2 rewrites turn 1's text: revert 2, then 1, back to the start."
  (lispm-test-in-folder
    (pcase-dolist (`(,start ,one ,two)
                   '(("aaa\nbbb\nccc\n" "aaa\nBBB\nccc\n" "aaa\nXXX\nccc\n")
                     ("aaa\nbbb\nccc\n" "aaa\nBBB\nccc\n" "aaa\nBBB-more\nccc\n")
                     ("aaa\nbbb\nccc\n" "aaa\nBBB\nccc\n" "aaa\nzzz\n")
                     ("aaa\nbbb\nccc\n" "aaa\nBBB\nCCC\n" "AAA\nBBB\nCCC\n")))
      (let* ((file (lispm-test-write-file folder "t.txt" start))
             (turn-1 (list (lispm-edit-replace file one :save t)))
             (turn-2 (list (lispm-edit-replace file two :save t))))
        (should (= (lispm-edit-revert turn-2) 1))
        (should (equal (lispm-test-read-file file) one))
        (should (= (lispm-edit-revert turn-1) 1))
        (should (equal (lispm-test-read-file file) start))
        (kill-buffer (find-buffer-visiting file))))))

(ert-deftest lispm-revert-three-turns-newest-first ()
  "Three turns over the same lines, reverted newest first."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "t.txt" "x\n1\n2\n3\ny\n"))
           (turns (mapcar (lambda (text) (list (lispm-edit-replace file text :save t)))
                          '("x\nONE\n2\n3\ny\n" "x\nONE\nTWO\n3\ny\n" "x\nthree\ny\n"))))
      (dolist (turn (reverse turns))
        (should (= (lispm-edit-revert turn) 1)))
      (should (equal (lispm-test-read-file file) "x\n1\n2\n3\ny\n")))))

(ert-deftest lispm-revert-an-edit-the-user-undid-counts-as-reverted ()
  "The user undid one of a turn's two edits: the rest of the turn reverts."
  (lispm-test-in-folder
    (let* ((file (lispm-test-write-file folder "t.txt" "one\ntwo\nthree\nfour\n"))
           (first (lispm-edit-replace file "ONE\ntwo\nthree\nfour\n" :save t))
           (second (lispm-edit-replace file "ONE\ntwo\nthree\nFOUR\n" :save t))
           (buffer (find-buffer-visiting file)))
      (with-current-buffer buffer
        (undo-boundary)
        (let ((last-command nil)) (undo))
        (undo-boundary)
        (should (equal (buffer-string) "ONE\ntwo\nthree\nfour\n")))
      (should (= (lispm-edit-revert (list second first)) 1))
      (should (equal (with-current-buffer buffer (buffer-string))
                     "one\ntwo\nthree\nfour\n")))))

(provide 'lispm-revert-test)
;;; lispm-revert-test.el ends here
