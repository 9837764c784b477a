;;; lispm-app-doctor-test.el --- Tests of LispM's Doctor front-end  -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The LispM authors

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;;; Commentary:

;; The acceptance table of the reference (exact replies of doctor.el
;; to the listed inputs, each in a fresh session), "Earlier you said"
;; recall, one reply per RET, empty lines, New Session, the minibuffer
;; question, learned words, and that plain `M-x doctor' is untouched.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-app-doctor)

(defmacro lispm-doctor-test--session (&rest body)
  "Run BODY with a fresh Doctor session shown in the selected window."
  (declare (indent 0))
  `(save-window-excursion
     (when (get-buffer lispm-doctor-buffer-name)
       (kill-buffer lispm-doctor-buffer-name))
     (random "lispm")
     (lispm-doctor)
     (unwind-protect
         (progn ,@body)
       (kill-buffer lispm-doctor-buffer-name))))

(defun lispm-doctor-test--conversation ()
  "Return the conversation in the Doctor's buffer: all after the header line."
  (with-current-buffer lispm-doctor-buffer-name
    (save-excursion
      (goto-char (point-min))
      (forward-line 2)
      (buffer-substring-no-properties (point) (point-max)))))

(defconst lispm-doctor-test--greeting
  "I am the psychotherapist.  Please, describe your problems.  Each time \
you are finished talking, press RET.\n\n"
  "The greeting of a fresh session, as the front-end shows it.")

;;; The acceptance table

(defconst lispm-doctor-test--table
  '((("Hello") "How do you do?  What brings you to see me?")
    (("hi" "hello")
     "I believe we've introduced ourselves already.
I would appreciate it if you would tell me about your plans.")
    (("I am feeling depressed") "Are you depressed often?")
    (("My father never listens to me") "Tell me something about your family.")
    (("I hate my job") "Why do you hate your job?")
    (("you are stupid") "Why do you say I am stupid?")
    (("I don't know") "Why do you say you do not know?")
    (("I cried because my dog ran away")
     "Is it because your dog ran away that you came to me?")
    (("I want a new car") "Why do you say you might want to have this new car?")
    (("I like computers") "You have your mind on computers, it seems.")
    (("Why are you here") "What do you think?")
    (("how are you") "I'm ok.  Tell me about yourself.")
    (("yes") "I see...  Well, why do you say this is so?")
    (("no") "Why not?")
    (("foo") "Bar!  I would appreciate it if you would continue.")
    (("whatmeans computer") "The word computer means mach to me")
    (("Emacs is great") "Emacs?  Hah!  I would appreciate it if you would continue.")
    (("I want a new car" "I spend all day at the office"
      "The weather has been grey all week")
     "Earlier you said you would like to have this new car?"))
  "Inputs, each list in a fresh session, and the reply to the last one.")

(ert-deftest lispm-doctor-test-acceptance-table ()
  (pcase-dolist (`(,lines ,expected) lispm-doctor-test--table)
    (lispm-doctor-test--session
      (let ((replies (mapcar #'lispm-doctor-say lines)))
        (should (equal (list lines (car (last replies))) (list lines expected)))))))

(ert-deftest lispm-doctor-test-symptoms ()
  ;; Emacs 28's doctor.el ends this reply with a stray " ." (sic).
  (lispm-doctor-test--session
    (should (member (lispm-doctor-say "I have a headache")
                    '("Maybe you should consult a medical doctor; I am a psychotherapist."
                      "Maybe you should consult a medical doctor; I am a psychotherapist. .")))))

(ert-deftest lispm-doctor-test-transcript ()
  (lispm-doctor-test--session
    (dolist (line '("Hello" "I am feeling depressed" "My father never listens to me"
                    "I spend all day at the office" "The weather has been grey all week"
                    "Goodbye"))
      (lispm-doctor-say line))
    (should (equal (lispm-doctor-test--conversation)
                   (concat lispm-doctor-test--greeting "\
Hello
How do you do?  What brings you to see me?

I am feeling depressed
Are you depressed often?

My father never listens to me
Tell me something about your family.

I spend all day at the office
Why do you say you spend all day at the office?

The weather has been grey all week
Earlier you said you felt depressed?

Goodbye
My secretary will send you a bill.

")))))

;;; Keys and traps

(ert-deftest lispm-doctor-test-one-reply-per-return ()
  (lispm-doctor-test--session
    (execute-kbd-macro (kbd "H e l l o RET"))
    (should (equal (lispm-doctor-test--conversation)
                   (concat lispm-doctor-test--greeting
                           "Hello\nHow do you do?  What brings you to see me?\n\n")))
    (execute-kbd-macro (kbd "n o RET"))
    (should (string-suffix-p "\n\nno\nWhy not?\n\n" (lispm-doctor-test--conversation)))))

(ert-deftest lispm-doctor-test-empty-line-does-nothing ()
  (lispm-doctor-test--session
    (lispm-doctor-say "I am feeling depressed")
    (let ((before (buffer-string)))
      (execute-kbd-macro (kbd "RET"))
      (should (equal (buffer-string) before))
      (should-not (lispm-doctor-say "")))))

(ert-deftest lispm-doctor-test-input-is-read-from-the-end ()
  (lispm-doctor-test--session
    (lispm-doctor-say "I am feeling depressed")
    (goto-char (point-max))
    (insert "  I hate my job  ")
    (goto-char (point-min))
    (lispm-doctor-send)
    (should (string-suffix-p "\n\nI hate my job\nWhy do you hate your job?\n\n"
                             (lispm-doctor-test--conversation)))
    (should (= (point) (point-max)))))

(ert-deftest lispm-doctor-test-history-is-read-only ()
  (lispm-doctor-test--session
    (lispm-doctor-say "Hello")
    (goto-char (point-min))
    (search-forward "Hello")
    (should-error (insert "x") :type 'text-read-only)))

(ert-deftest lispm-doctor-test-greeting-says-one-return ()
  (lispm-doctor-test--session
    (should (string-prefix-p lispm-doctor-test--greeting (lispm-doctor-test--conversation)))
    (should-not (string-match-p "twice" (buffer-string)))))

(ert-deftest lispm-doctor-test-new-session-button ()
  (lispm-doctor-test--session
    (lispm-doctor-say "I am feeling depressed")
    (lispm-doctor-say "My father never listens to me")
    (goto-char (point-min))
    (push-button (point))
    (should (equal (lispm-doctor-test--conversation) lispm-doctor-test--greeting))
    (should (string-prefix-p "New Session" (buffer-string)))
    (should (equal (lispm-doctor-say "I spend all day at the office")
                   "Why do you say you spend all day at the office?"))
    (should-not (string-prefix-p "Earlier you said"
                                 (lispm-doctor-say "The weather has been grey all week")))))

(ert-deftest lispm-doctor-test-new-session-key ()
  (lispm-doctor-test--session
    (lispm-doctor-say "Hello")
    (execute-kbd-macro (kbd "C-c C-n"))
    (should (equal (lispm-doctor-test--conversation) lispm-doctor-test--greeting))
    (should (equal (lispm-doctor-say "hello") "How do you do?  What brings you to see me?"))))

(ert-deftest lispm-doctor-test-learned-words-survive-new-session ()
  (unwind-protect
      (lispm-doctor-test--session
        (lispm-doctor-say "my laptop is like a computer")
        (lispm-doctor-new-session)
        (should (equal (lispm-doctor-say "whatmeans laptop")
                       "The word laptop means mach to me")))
    (put 'laptop 'doctor-meaning nil)))

(ert-deftest lispm-doctor-test-minibuffer-question ()
  (lispm-doctor-test--session
    (let (prompts)
      (cl-letf (((symbol-function 'read-string)
                 (lambda (prompt &rest _) (push prompt prompts) "money")))
        (should (lispm-doctor-say "I want to be rich")))
      (should (equal prompts '("rich what ?  ")))
      (should (string-match-p "^rich what \\?  money$" (buffer-string)))
      (should (equal (lispm-doctor-say "My father never listens to me")
                     "Tell me something about your family.")))))

(ert-deftest lispm-doctor-test-quitting-the-minibuffer-question ()
  (lispm-doctor-test--session
    (let ((before (buffer-string)))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) (signal 'quit nil))))
        (should-not (lispm-doctor-say "I want to be rich")))
      (should (equal (buffer-string) (concat before "I want to be rich")))
      (delete-region lispm-apps-input-start (point-max))
      (should (equal (lispm-doctor-say "Hello")
                     "How do you do?  What brings you to see me?")))))

(ert-deftest lispm-doctor-test-q-closes-from-history-only ()
  (lispm-doctor-test--session
    (let ((windows (length (window-list))))
      (execute-kbd-macro (kbd "q"))
      (should (string-suffix-p "q" (buffer-string)))
      (goto-char (point-min))
      (execute-kbd-macro (kbd "q"))
      (should (< (length (window-list)) windows)))))

(ert-deftest lispm-doctor-test-plain-doctor-untouched ()
  (lispm-doctor-test--session
    (lispm-doctor-say "Hello")
    (should (eq (keymap-lookup doctor-mode-map "RET") #'doctor-ret-or-read))
    (should-not (get-buffer "*doctor*")))
  ;; The stock Doctor still needs two RETs: the first only breaks the line.
  (save-window-excursion
    (with-temp-buffer
      (switch-to-buffer (current-buffer))
      (doctor-mode)
      (execute-kbd-macro (kbd "H e l l o RET"))
      (should (string-suffix-p "\nHello\n" (buffer-string)))
      (execute-kbd-macro (kbd "RET"))
      (should (string-suffix-p "\nHello\n\nHow do you do?  What brings you to see me?\n\n"
                               (buffer-string))))))

(provide 'lispm-app-doctor-test)
;;; lispm-app-doctor-test.el ends here
