;;; lispm-session-crash-test.el --- Sessions after Emacs died: saved as they went, cut files opened  -*- lexical-binding: t; -*-

;;; Commentary:

;; A session is saved at each step of a turn, whole (a new file renamed
;; over the old); a file cut short (by an older LispM writing in place)
;; opens up to its last complete part, with a note; a turn cut by
;; Emacs's end is marked so when the session is resumed
;; (`lispm-session-end-cut-turn'), its awaited approvals ended.  The
;; SIGKILL of a real Emacs mid-turn is tests/python/test_crash_turn.py.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-session)

(defmacro lispm-session-crash-test--with-dirs (&rest body)
  "Run BODY with `sessions' and `project', temporary folders of its own."
  (declare (indent 0) (debug t))
  `(let* ((root (file-name-as-directory
                 (file-truename (make-temp-file "lispm-session-crash" t))))
          (sessions (file-name-as-directory (expand-file-name "sessions" root)))
          (project (file-name-as-directory (expand-file-name "project" root)))
          (lispm-sessions-directory sessions)
          (lispm-sessions-git-program "/nonexistent/git"))
     (ignore sessions)
     (make-directory project t)
     (unwind-protect
         (progn ,@body)
       (dolist (buffer (buffer-list))
         (when (with-current-buffer buffer (derived-mode-p 'lispm-session-mode))
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer)))
       (delete-directory root t))))

(defun lispm-session-crash-test--bytes (file)
  "Return FILE's bytes."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defun lispm-session-crash-test--write (file bytes)
  "Make BYTES FILE's content."
  (let ((coding-system-for-write 'no-conversion))
    (write-region bytes nil file nil 'silent)))

(defun lispm-session-crash-test--session (project)
  "Return the file of a two-turn session in PROJECT, every kind of part in it.
Its buffer is killed."
  (let ((buffer (lispm-session-create project)))
    (dolist (turn '(1 2))
      (lispm-session-begin-turn buffer (format "Turn %d's words: é\n* not a heading" turn))
      (let ((stream (lispm-session-begin-reply buffer)))
        (lispm-session-stream-text stream "Reading it.\n#+begin_example\nquoted")
        (lispm-session-end-reply stream))
      (lispm-session-insert-call buffer (list :id (format "c%d" turn) :name "read_file"
                                              :arguments "{\"path\":\"a\"}"))
      (lispm-session-insert-result buffer (format "c%d" turn)
                                   "line one\n#+end_example\n* line three ü")
      (lispm-session-insert-call buffer (list :id (format "p%d" turn) :name "run_lisp"
                                              :arguments "{\"program\":\"(list 1 \\\"é\\\")\"}"))
      (lispm-session-insert-approval buffer (format "p%d" turn) "Approve run_lisp")
      (lispm-session-decide-approval buffer (format "p%d" turn) 'done)
      (lispm-session-insert-result buffer (format "p%d" turn) "(1 \"é\")")
      (lispm-session-end-turn buffer))
    (prog1 (buffer-local-value 'lispm-session-file buffer)
      (with-current-buffer buffer (set-buffer-modified-p nil))
      (kill-buffer buffer))))

(ert-deftest lispm-session-crash-every-step-is-saved-whole ()
  "Each step of a turn is on disk as soon as it is made, and reads back."
  (lispm-session-crash-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer))
           (tail (lispm-session--tail-file file))
           (read (lambda () (lispm-session-saved-text file))))
      ;; Words long enough that each step's text is less than half the document.
      (lispm-session-begin-turn buffer (concat "Change two files\n" (make-string 4000 ?w)))
      (should (string-match-p "^\\* Turn 1: Change two files$" (funcall read)))
      (lispm-session-insert-call buffer '(:id "e1" :name "edit_file" :arguments "{}"))
      (should (string-match-p ":LISPM_CALL_ID: e1" (funcall read)))
      (lispm-session-insert-result buffer "e1" "edited a.txt")
      (should (string-match-p "edited a\\.txt" (funcall read)))
      (lispm-session-insert-call buffer '(:id "s1" :name "run_shell" :arguments "{}"))
      (lispm-session-insert-approval buffer "s1" "Approve run_shell: make check")
      (should (string-match-p "^\\*\\*\\*\\* TODO Approve run_shell" (funcall read)))
      ;; A step's text went to the tail file, the session file unchanged.
      (should (file-exists-p tail))
      (should-not (string-search "e1" (lispm-session-crash-test--bytes file)))
      (let ((inode (file-attribute-inode-number (file-attributes tail))))
        (lispm-session-decide-approval buffer "s1" 'cancelled "no")
        ;; Replaced, not written in place.
        (should-not (equal inode (file-attribute-inode-number (file-attributes tail)))))
      (should (string-match-p "^\\*\\*\\*\\* CANCELLED Approve" (funcall read)))
      (should-not (buffer-modified-p buffer))
      ;; The turn's end writes the file whole, and the tail goes.
      (let ((inode (file-attribute-inode-number (file-attributes file)))
            (saved (funcall read)))
        (lispm-session-end-turn buffer)
        (should-not (equal inode (file-attribute-inode-number (file-attributes file))))
        (should-not (file-exists-p tail))
        (should (equal (funcall read) saved))
        (should (equal (lispm-session-crash-test--bytes file)
                       (encode-coding-string saved 'utf-8-unix)))))))

(ert-deftest lispm-session-crash-a-tail-reads-back-only-against-its-file ()
  "A session opened reads its tail; a tail written against another version is not read."
  (lispm-session-crash-test--with-dirs
    (let* ((file (lispm-session-crash-test--session project))
           (buffer (lispm-session-open file))
           (tail (lispm-session--tail-file file)))
      (lispm-session-begin-turn buffer "A third turn: ü")
      (lispm-session-insert-call buffer '(:id "t3" :name "read_file" :arguments "{}"))
      (lispm-session-insert-result buffer "t3" "third é")
      (should (file-exists-p tail))
      (let ((saved (with-current-buffer buffer (buffer-string))))
        ;; Emacs dies here.
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)
        (let ((again (lispm-session-open file)))
          (should (equal (with-current-buffer again (buffer-string)) saved))
          ;; A step after reopening still goes to the tail, from the same start.
          (lispm-session-insert-call again '(:id "t4" :name "read_file" :arguments "{}"))
          (should (string-search ":LISPM_CALL_ID: t4" (lispm-session-saved-text file)))
          (should (string-search "third é" (lispm-session-saved-text file)))
          (with-current-buffer again (set-buffer-modified-p nil))
          (kill-buffer again))
        ;; A plain buffer of the file, taken over, reads the tail too.
        (let ((plain (find-file-noselect file)))
          (should-not (string-search "third é" (with-current-buffer plain (buffer-string))))
          (should (eq (lispm-session-open file) plain))
          (should (string-search "third é" (with-current-buffer plain (buffer-string))))
          (should (string-search ":LISPM_CALL_ID: t4" (with-current-buffer plain
                                                         (buffer-string))))
          (with-current-buffer plain (set-buffer-modified-p nil))
          (kill-buffer plain))
        ;; The file written again whole behind the tail's back: the tail is stale.
        (let ((bytes (lispm-session-crash-test--bytes file)))
          (sleep-for 0.01)
          (lispm-session-crash-test--write file bytes))
        (let* ((warnings nil)
               (again (cl-letf (((symbol-function 'display-warning)
                                 (lambda (_type text &rest _) (push text warnings))))
                        (lispm-session-open file))))
          (should (string-search "is not read" (car warnings)))
          (should-not (string-search "third é" (with-current-buffer again (buffer-string))))
          (with-current-buffer again (set-buffer-modified-p nil))
          (kill-buffer again))
        ;; A tail that starts before the text, or past it: not read either.
        (dolist (from '(0 99999999))
          (with-temp-file tail
            (insert (format "LISPM-SESSION-TAIL 1 %d %s\nHOSTILE\n" from
                            (lispm-session--file-stamp file))))
          (let* ((warnings nil)
                 (again (cl-letf (((symbol-function 'display-warning)
                                   (lambda (_type text &rest _) (push text warnings))))
                          (lispm-session-open file))))
            (should (string-search "is not read" (car warnings)))
            (should-not (string-search "HOSTILE" (with-current-buffer again (buffer-string))))
            (with-current-buffer again (set-buffer-modified-p nil))
            (kill-buffer again)))))))

(ert-deftest lispm-session-crash-a-cut-turn-reopens-marked-ended ()
  "Emacs died with an approval awaited: reopened, the turn says so, nothing waits."
  (lispm-session-crash-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer)))
      (lispm-session-begin-turn buffer "Change two files, then check")
      (lispm-session-insert-call buffer '(:id "e1" :name "edit_file" :arguments "{}"))
      (lispm-session-insert-result buffer "e1" "edited a.txt")
      (lispm-session-insert-call buffer '(:id "e2" :name "edit_file" :arguments "{}"))
      (lispm-session-insert-result buffer "e2" "edited b.txt")
      (lispm-session-insert-call buffer '(:id "s1" :name "run_shell" :arguments "{}"))
      (lispm-session-insert-approval buffer "s1" "Approve run_shell: make check")
      ;; Emacs dies here: what is on disk is what the next Emacs reads.
      (with-current-buffer buffer (set-buffer-modified-p nil))
      (kill-buffer buffer)
      (let* ((buffer (lispm-session-open file))
             (cut (lispm-session-end-cut-turn buffer))
             (text (with-current-buffer buffer (buffer-string))))
        (should cut)
        (should (string-match-p "^\\* Turn 1: Change two files" text))
        (should (string-match-p "edited a\\.txt" text))
        (should (string-match-p "edited b\\.txt" text))
        (should-not (string-match-p "^\\*\\*\\*\\* TODO" text))
        (should (string-match-p "^\\*\\*\\*\\* CANCELLED Approve run_shell" text))
        (should (string-match-p "ended unanswered" text))
        (should (string-match-p "^: Turn 1 was cut: Emacs ended during it\\.  2 calls ran" text))
        ;; The model is told the call did not run; nothing waits on it.
        (should-not (lispm-session-waiting-step buffer))
        (let ((last (car (last (lispm-session-messages buffer)))))
          (should (equal (plist-get last :tool_call_id) "s1"))
          (should (string-match-p "did not run" (plist-get last :content))))
        ;; Saved so: a second opening finds nothing more to mark.
        (kill-buffer buffer)
        (with-current-buffer (lispm-session-open file)
          (should-not (lispm-session-end-cut-turn (current-buffer)))
          (should (= 1 (how-many "Turn 1 was cut" (point-min) (point-max))))
          (should (= 1 (how-many "^\\*\\*\\*\\* CANCELLED" (point-min) (point-max)))))))))

(ert-deftest lispm-session-crash-a-turn-cut-before-its-answer ()
  "Emacs died before the model answered: the history does not hold two prompts in a row."
  (lispm-session-crash-test--with-dirs
    (let* ((buffer (lispm-session-create project))
           (file (buffer-local-value 'lispm-session-file buffer)))
      (lispm-session-begin-turn buffer "Hello.")
      (let ((stream (lispm-session-begin-reply buffer)))
        (lispm-session-stream-text stream "Hi.")
        (lispm-session-end-reply stream))
      (lispm-session-end-turn buffer)
      (lispm-session-begin-turn buffer "Work very slowly, please.")
      (with-current-buffer buffer (set-buffer-modified-p nil))
      (kill-buffer buffer)
      (let ((buffer (lispm-session-open file)))
        (should (lispm-session-end-cut-turn buffer))
        (should (equal (mapcar (lambda (m) (plist-get m :role))
                               (lispm-session-messages buffer))
                       '("user" "assistant" "user" "assistant")))
        (should (equal (plist-get (car (last (lispm-session-messages buffer))) :content)
                       lispm-session-not-answered-reply))
        (should (string-search "Turn 2 was cut: Emacs ended before it was answered"
                               (with-current-buffer buffer (buffer-string))))
        (should-not (lispm-session-end-cut-turn buffer))))))

(ert-deftest lispm-session-crash-a-file-cut-anywhere-opens ()
  "A session file cut at any line, any byte of some, or mid-character, opens.
Its header too.  It opens with a note saying what was cut; the damaged
bytes are kept beside it; the repaired document reads back as it is
saved, its history what the whole file's began with."
  (lispm-session-crash-test--with-dirs
    (let* ((file (lispm-session-crash-test--session project))
           (whole (lispm-session-crash-test--bytes file))
           (input (string-search "\n* Your message" whole))
           (full (with-current-buffer (lispm-session-open file)
                   (prog1 (lispm-session-messages (current-buffer)) (kill-buffer))))
           (offsets (delete-dups
                     (append
                      ;; Every line end, and two bytes into every line.
                      (cl-loop for i from 0 below (length whole)
                               when (eq (aref whole i) ?\n) collect (1+ i) and collect (+ i 3))
                      ;; Inside each é and ü (two bytes in UTF-8).
                      (cl-loop for i from 0 below (length whole)
                               when (>= (aref whole i) #xc0) collect (1+ i))
                      ;; Every byte of the header, of a drawer and of a program.
                      (number-sequence 0 (string-search "\n* " whole))
                      (let ((at (string-search ":PROPERTIES:" whole 300)))
                        (number-sequence at (+ at 80)))
                      (let ((at (string-search "#+begin_src emacs-lisp" whole)))
                        (number-sequence at (+ at 60))))))
           (opened 0))
      (should (string-match-p "#\\+begin_example" whole))
      (dolist (offset (sort offsets #'<))
        (when (<= offset input)
          (dolist (old (directory-files sessions t "\\.damaged-"))
            (delete-file old))
          (lispm-session-crash-test--write file (substring whole 0 offset))
          (let* ((buffer (lispm-session-open file))
                 (text (with-current-buffer buffer (buffer-string)))
                 (messages (lispm-session-messages buffer)))
            (cl-incf opened)
            (should (string-match-p (if (= offset 0) "^: This session's file was empty"
                                      "^: This session's file was cut short when it was \
last written (Emacs ended mid-write): what came after its line [0-9]+ is lost")
                                    text))
            (should (string-match-p "The file as it was is kept as [^ ]+\\.damaged-" text))
            ;; Its history is what the whole file's began with.
            (should (<= (length messages) (length full)))
            (should (equal (butlast messages 2)
                           (cl-subseq full 0 (max 0 (- (length messages) 2)))))
            (should (equal (lispm-session-crash-test--bytes
                            (car (directory-files sessions t "\\.damaged-")))
                           (substring whole 0 offset)))
            ;; The repaired document is saved, and reads back as it is.
            (kill-buffer buffer)
            (with-current-buffer (lispm-session-open file)
              (should (equal (buffer-string) text))
              (should (equal (lispm-session-messages (current-buffer)) messages))
              (kill-buffer)))))
      (should (> opened 400)))))

(ert-deftest lispm-session-crash-the-note-says-what-was-cut ()
  "Cut inside a result block: the note gives the bytes and lines left out, and where."
  (lispm-session-crash-test--with-dirs
    (let* ((file (lispm-session-crash-test--session project))
           (whole (lispm-session-crash-test--bytes file))
           (cut (+ (string-search "line one" whole (string-search "* Turn 2" whole)) 4)))
      (lispm-session-crash-test--write file (substring whole 0 cut))
      (with-current-buffer (lispm-session-open file)
        (let ((result (string-search "\n**** Result" whole (string-search "* Turn 2" whole))))
          (should (string-search
                   (format ", and its last %d bytes, 3 lines from line %d (\"**** Result\" on), \
an unfinished part, are left out" (- cut result 1)
                           (+ 2 (cl-count ?\n (substring whole 0 result))))
                   (buffer-string))))
        ;; Turn 2's call is there, its result not: the model reads it did not run.
        (should (string-search "did not run"
                               (plist-get (car (last (lispm-session-messages (current-buffer))))
                                          :content)))))))

(ert-deftest lispm-session-crash-a-whole-file-edited-badly-still-refuses ()
  "A document with its end whole that does not read back is no cut: an error."
  (lispm-session-crash-test--with-dirs
    (let* ((file (lispm-session-crash-test--session project))
           (whole (lispm-session-crash-test--bytes file)))
      (lispm-session-crash-test--write
       file (replace-regexp-in-string "#\\+end_src\n" "" whole t t))
      (should-error (lispm-session-open file) :type 'lispm-session-unreadable)
      (should-not (directory-files sessions nil "\\.damaged-")))))

(provide 'lispm-session-crash-test)
;;; lispm-session-crash-test.el ends here
