;;; lispm-layout-test.el --- Tests that LispM's map of files cannot drift  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Elisp side of tests/python/test_layout.py.  LispM's files form a
;; graph of `require's with no cycle, function-level requires counted
;; (a top-level cycle would fail at load time; one hidden in a function
;; would not).  A `declare-function' into another LispM file is a hidden
;; edge: it may point "upward" (requiring its file would make a cycle)
;; only where `lispm-layout-test--upward' says why.  And every file is
;; named in README's Architecture section and in lispm.el's Commentary,
;; the apps by their folder: each app is found by the App Store, not
;; required by the core.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'lispm-base)

;; Both lists are of the tree exactly: an entry that is no longer
;; true fails as a new one would.

(defconst lispm-layout-test--cycles-known nil
  "The require cycles allowed in the tree: (EDGES REASON), each edge (FROM TO).
None: a cycle that must stay would need its reason here.")

(defconst lispm-layout-test--upward
  '((("lispm-list" "lispm")
     "the list's command starts an agent through lispm.el's chooser, which
requires the list"
     lispm-start-agent)
    (("lispm-own-agent" "lispm-rewind")
     "the session buffer's key rewinds, whose file builds on the own agent's turns
and sessions"
     lispm-rewind)
    (("lispm-tools" "lispm-skills")
     "the base tools search the skills, whose file defines tools with tools.el's
macro"
     lispm-skills-search))
  "The upward `declare-function's allowed: ((FROM TO) REASON FUNCTION...).
FROM declares each FUNCTION of TO, although TO requires FROM, directly
or not.  Each such pair is a concern in the wrong file, or a layer
that calls back up; REASON says which.")

(defun lispm-layout-test--files (directory)
  "Return the Lisp files of LispM in DIRECTORY and its apps/ folder."
  (cl-remove-if (lambda (file) (string-match-p "-\\(autoloads\\|pkg\\)\\.el\\'" file))
                (append (directory-files directory t "\\`lispm.*\\.el\\'")
                        (let ((apps (expand-file-name "apps" directory)))
                          (and (file-directory-p apps)
                               (directory-files apps t "\\`lispm.*\\.el\\'"))))))

(defun lispm-layout-test--forms (file)
  "Return the forms of FILE, read as data."
  (with-temp-buffer
    (insert-file-contents file)
    (let ((forms nil))
      (condition-case nil
          (while t (push (read (current-buffer)) forms))
        (end-of-file nil))
      (nreverse forms))))

(defun lispm-layout-test--walk (form function)
  "Call FUNCTION on FORM and on every list within it."
  (when (consp form)
    (funcall function form)
    (while (consp form)
      (lispm-layout-test--walk (car form) function)
      (setq form (cdr form)))))

(defun lispm-layout-test--edges (file)
  "Return (REQUIRES . DECLARES) of FILE, at any depth.
REQUIRES are the features FILE requires, as strings; DECLARES are
\(FUNCTION TARGET) for its `declare-function's, TARGET a file's base name."
  (let ((requires nil) (declares nil))
    (dolist (form (lispm-layout-test--forms file))
      (lispm-layout-test--walk
       form
       (lambda (form)
         (pcase form
           (`(require (quote ,(and feature (pred symbolp))) . ,_)
            (cl-pushnew (symbol-name feature) requires :test #'equal))
           (`(declare-function ,(and name (pred symbolp)) ,(and target (pred stringp)) . ,_)
            (push (list name (file-name-base target)) declares))))))
    (cons requires declares)))

(defun lispm-layout-test--graph (files)
  "Return the graph of FILES: an alist of (NAME REQUIRES DECLARES).
NAME is a file's base name; only edges to FILES' names are kept."
  (let* ((names (mapcar #'file-name-base files)))
    (mapcar (lambda (file)
              (let ((edges (lispm-layout-test--edges file)))
                (list (file-name-base file)
                      (cl-remove-if-not (lambda (name) (member name names)) (car edges))
                      (cl-remove-if-not (lambda (declare) (member (nth 1 declare) names))
                                        (cdr edges)))))
            files)))

(defun lispm-layout-test--reaches-p (graph from to)
  "Return non-nil if FROM requires TO in GRAPH, directly or not."
  (let ((seen nil) (queue (list from)) (found nil))
    (while (and queue (not found))
      (let ((name (pop queue)))
        (dolist (next (nth 1 (assoc name graph)))
          (cond ((equal next to) (setq found t))
                ((not (member next seen)) (push next seen) (push next queue))))))
    found))

(defun lispm-layout-test--cycles (graph)
  "Return the require edges of GRAPH that close a cycle: (FROM TO) each."
  (cl-loop for (from requires) in graph
           nconc (cl-loop for to in requires
                          when (lispm-layout-test--reaches-p graph to from)
                          collect (list from to))))

(defun lispm-layout-test--sorted (items)
  "Return ITEMS sorted by their printed forms."
  (sort (copy-sequence items) (lambda (a b) (string< (format "%S" a) (format "%S" b)))))

(defun lispm-layout-test--upward-declares (graph)
  "Return the upward `declare-function's of GRAPH: ((FROM TO) FUNCTION...).
Upward: TO requires FROM, so that FROM could not require TO."
  (let ((pairs nil))
    (pcase-dolist (`(,from ,_ ,declares) graph)
      (pcase-dolist (`(,function ,to) declares)
        (when (and (not (equal from to)) (lispm-layout-test--reaches-p graph to from))
          (let ((pair (assoc (list from to) pairs)))
            (if pair
                (push function (cdr pair))
              (push (list (list from to) function) pairs))))))
    (lispm-layout-test--sorted
     (mapcar (lambda (pair) (cons (car pair) (sort (delete-dups (cdr pair)) #'string<)))
             pairs))))

(defun lispm-layout-test--unnamed (files text)
  "Return the FILES (base names) TEXT does not name; apps/ covers the apps."
  (cl-loop for file in files
           for name = (file-name-nondirectory file)
           unless (if (equal (file-name-nondirectory
                              (directory-file-name (file-name-directory file)))
                             "apps")
                      (string-search "apps/" text)
                    (string-match-p (concat "\\_<" (regexp-quote name) "\\_>") text))
           collect (file-name-base file)))

(defun lispm-layout-test--readme-architecture (readme)
  "Return the Architecture section of README, a file's text."
  (and (string-match "^## Architecture$" readme)
       (let ((start (match-end 0)))
         (substring readme start (and (string-match "^## " readme start)
                                      (match-beginning 0))))))

(defun lispm-layout-test--commentary (file)
  "Return the Commentary of FILE, a Lisp library."
  (with-temp-buffer
    (insert-file-contents file)
    (buffer-substring (progn (re-search-forward "^;;; Commentary:") (point))
                      (progn (re-search-forward "^;;; Code:") (point)))))

;;; The tree

(ert-deftest lispm-layout-test-no-require-cycle ()
  (let ((graph (lispm-layout-test--graph (lispm-layout-test--files lispm-directory))))
    (should (> (length graph) 40))
    (should (equal (lispm-layout-test--sorted (lispm-layout-test--cycles graph))
                   (lispm-layout-test--sorted
                    (cl-loop for entry in lispm-layout-test--cycles-known
                             append (butlast entry)))))
    (dolist (entry lispm-layout-test--cycles-known)
      (should (stringp (car (last entry)))))))

(ert-deftest lispm-layout-test-upward-declarations-are-listed ()
  (let ((graph (lispm-layout-test--graph (lispm-layout-test--files lispm-directory))))
    ;; Exactly the pairs listed: a new one needs a reason, a gone one
    ;; leaves the list.
    (should (equal (lispm-layout-test--upward-declares graph)
                   (mapcar (lambda (entry) (cons (car entry) (cddr entry)))
                           lispm-layout-test--upward)))
    (dolist (entry lispm-layout-test--upward)
      (should (stringp (nth 1 entry))))))

(ert-deftest lispm-layout-test-every-file-is-on-the-maps ()
  (let* ((files (lispm-layout-test--files lispm-directory))
         (root (file-name-directory (directory-file-name lispm-directory)))
         (readme (with-temp-buffer
                   (insert-file-contents (expand-file-name "README.md" root))
                   (buffer-string)))
         (architecture (lispm-layout-test--readme-architecture readme)))
    (should architecture)
    (should (equal (lispm-layout-test--unnamed files architecture) nil))
    (should (equal (lispm-layout-test--unnamed
                    files (lispm-layout-test--commentary
                           (expand-file-name "lispm.el" lispm-directory)))
                   nil))))

(ert-deftest lispm-layout-test-the-sessions-plumbing-knows-no-org ()
  (let ((edges (lispm-layout-test--edges
                (expand-file-name "lispm-session-git.el" lispm-directory))))
    (should (equal (sort (car edges) #'string<) '("cl-lib" "subr-x")))
    (should (equal (cdr edges) nil))))

;;; The checks themselves

(defmacro lispm-layout-test--with-tree (files &rest body)
  "Run BODY with `dir' a new folder holding FILES, ((NAME . TEXT)...)."
  (declare (indent 1) (debug t))
  `(let ((dir (make-temp-file "lispm-layout-test" t)))
     (unwind-protect
         (progn
           (make-directory (expand-file-name "apps" dir))
           (pcase-dolist (`(,name . ,text) ,files)
             (with-temp-file (expand-file-name name dir) (insert text)))
           ,@body)
       (delete-directory dir t))))

(ert-deftest lispm-layout-test-the-checks-see-a-hidden-cycle-and-an-upward-declaration ()
  (lispm-layout-test--with-tree
      '(("lispm-a.el" . "(require 'lispm-b)\n(require 'subr-x)\n")
        ("lispm-b.el" . "(require 'lispm-c)\n")
        ("lispm-c.el" . "(defun lispm-c-f () (require 'lispm-a) (lispm-a-g))\n")
        ("lispm-d.el" . ";; (require 'lispm-e) in a comment is no edge\n")
        ("lispm-e.el" . "(require 'lispm-d)\n(declare-function lispm-d-h \"lispm-d\")\n")
        ("lispm-f.el" . "(require 'lispm-e)\n(declare-function lispm-e-k \"lispm-e.el\")\n")
        ("lispm-g.el" . "(declare-function lispm-f-x \"lispm-f\" ())\n")
        ("apps/lispm-app-x.el" . "(require 'lispm-g)\n"))
    (let ((graph (lispm-layout-test--graph (lispm-layout-test--files dir))))
      (should (equal (length graph) 8))
      (should (equal (lispm-layout-test--sorted (lispm-layout-test--cycles graph))
                     '(("lispm-a" "lispm-b") ("lispm-b" "lispm-c") ("lispm-c" "lispm-a"))))
      ;; d does not require e; f requires e itself: neither is upward.
      (should (equal (lispm-layout-test--upward-declares graph) nil))
      ;; Now d declares functions of e and f, which both reach d.
      (with-temp-file (expand-file-name "lispm-d.el" dir)
        (insert "(declare-function lispm-f-y \"lispm-f\")\n"
                "(defun lispm-d-i () (declare-function lispm-e-z \"lispm-e\") (lispm-e-z))\n"))
      (should (equal (lispm-layout-test--upward-declares
                      (lispm-layout-test--graph (lispm-layout-test--files dir)))
                     '((("lispm-d" "lispm-e") lispm-e-z)
                       (("lispm-d" "lispm-f") lispm-f-y)))))))

(ert-deftest lispm-layout-test-the-check-sees-a-file-off-the-map ()
  (lispm-layout-test--with-tree
      '(("lispm-a.el" . "") ("lispm-ab.el" . "") ("apps/lispm-app-x.el" . ""))
    (let ((files (lispm-layout-test--files dir)))
      (should (equal (lispm-layout-test--unnamed files "lispm-ab.el, apps/") '("lispm-a")))
      (should (equal (lispm-layout-test--unnamed files "lispm-a.el lispm-ab.el")
                     '("lispm-app-x")))
      (should (equal (lispm-layout-test--unnamed files "lispm-a.el, lispm-ab.el, apps/") nil))
      (should (equal (lispm-layout-test--readme-architecture
                      "# X\n## Architecture\nlispm-a.el\n## Tests\nlispm-ab.el\n")
                     "\nlispm-a.el\n")))))

(provide 'lispm-layout-test)
;;; lispm-layout-test.el ends here
