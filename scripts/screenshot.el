;;; screenshot.el --- Draw an Emacs buffer as an SVG, as a dark terminal shows it  -*- lexical-binding: t; -*-

;;; Commentary:

;; `lispm-screenshot' writes what a window of COLUMNS x LINES would
;; show of a buffer, from a given line, as an SVG: one <text> per run of
;; characters with the same face, and a mode line.  It works in batch
;; Emacs, where faces have no colours: a face's colour comes from
;; `lispm-screenshot-palette', by the face's name.  Invisible text (Org's
;; link brackets, folded entries) is left out, as Emacs leaves it out.
;; scripts/screenshots.el uses it for the README's pictures.

;;; Code:

(require 'svg)
(require 'dom)
(require 'cl-lib)

(defconst lispm-screenshot-palette
  '((org-level-1 "#82aaff" bold) (org-level-2 "#c3a6ff" bold)
    (org-level-3 "#ffcb6b" bold) (org-level-4 "#89ddff")
    (link "#4ec9d6" underline) (button "#4ec9d6" underline)
    (org-link "#4ec9d6" underline)
    (org-todo "#f07178" bold) (org-done "#a5d66f" bold)
    (shadow "#808080") (org-drawer "#808080") (org-special-keyword "#808080")
    (org-property-value "#808080") (org-date "#808080") (org-meta-line "#808080")
    (org-block-begin-line "#808080") (org-block-end-line "#808080")
    (org-table "#89ddff") (org-code "#ffcb6b") (org-verbatim "#ffcb6b")
    (org-block "#c8c8c8") (font-lock-string-face "#c3e88d")
    (bold nil bold))
  "Each face drawn: (FACE COLOUR ATTRIBUTES...), ATTRIBUTES `bold', `underline'.
A run with several faces takes the colour of the first that has one.")

(defconst lispm-screenshot-foreground "#d4d4d4"
  "The colour of text with no face of the palette.")

(defconst lispm-screenshot-background "#1e1e1e"
  "The colour of the window's background.")

(defconst lispm-screenshot-font-size 14
  "The font's size in pixels.")

(defconst lispm-screenshot-char-width 8.43
  "The width of a character of DejaVu Sans Mono at `lispm-screenshot-font-size'.")

(defconst lispm-screenshot-line-height 18
  "The height of a line in pixels.")

(defun lispm-screenshot--faces (pos)
  "Return the faces of the character at POS, a list of symbols."
  (let ((faces (append (ensure-list (get-char-property pos 'face))
                       (ensure-list (get-char-property pos 'font-lock-face)))))
    (cl-remove-if-not #'symbolp faces)))

(defun lispm-screenshot--style (faces)
  "Return how text with FACES is drawn: (COLOUR BOLD UNDERLINE)."
  (let ((colour nil) (bold nil) (underline nil))
    (dolist (face faces)
      (when-let* ((entry (assq face lispm-screenshot-palette)))
        (unless colour (setq colour (nth 1 entry)))
        (when (memq 'bold (nthcdr 2 entry)) (setq bold t))
        (when (memq 'underline (nthcdr 2 entry)) (setq underline t))))
    (list (or colour lispm-screenshot-foreground) bold underline)))

(defun lispm-screenshot--lines (start columns lines)
  "Return LINES screen lines of the current buffer from START, cut at COLUMNS.
Each line is a list of runs (TEXT STYLE), STYLE as from
`lispm-screenshot--style'."
  (let ((pos start) (end (point-max))
        (result nil) (line nil) (column 0))
    (cl-flet ((add (text style)
                (let ((room (- columns column)))
                  (when (> room 0)
                    (let ((text (truncate-string-to-width text room)))
                      (if (and line (equal (cadr (car line)) style))
                          (setcar (car line) (concat (caar line) text))
                        (push (list text style) line))
                      (cl-incf column (string-width text)))))))
      (while (and (< pos end) (< (length result) lines))
        (let ((invisible (invisible-p pos))
              (next (min (next-single-char-property-change pos 'invisible nil end)
                         (next-single-char-property-change pos 'face nil end)
                         (next-single-char-property-change pos 'font-lock-face nil end))))
          (if invisible
              ;; A stretch of invisible text with an ellipsis shows "...".
              (progn (unless (or (eq invisible t) (and (> pos start) (invisible-p (1- pos))))
                       (add "..." (lispm-screenshot--style nil)))
                     (setq pos next))
            (let* ((stop (save-excursion (goto-char pos)
                                         (if (search-forward "\n" next t) (1- (point)) next)))
                   (style (lispm-screenshot--style (lispm-screenshot--faces pos))))
              (when (> stop pos)
                (add (let ((text (buffer-substring-no-properties pos stop)))
                       (with-temp-buffer
                         (insert (make-string column ?\s) text)
                         (untabify (point-min) (point-max))
                         (buffer-substring (1+ column) (point-max))))
                     style))
              (setq pos stop)
              (when (and (< pos end) (eq (char-after pos) ?\n) (not (invisible-p pos)))
                (push (nreverse line) result)
                (setq line nil column 0 pos (1+ pos)))))))
      (when (and line (< (length result) lines))
        (push (nreverse line) result)))
    (nreverse result)))

(defun lispm-screenshot--text (svg line x y)
  "Draw LINE, a list of (TEXT STYLE), in SVG from X, Y, its baseline."
  (pcase-dolist (`(,text (,colour ,bold ,underline)) line)
    (unless (string-blank-p text)
      (apply #'svg-text svg text :x (format "%.1f" x) :y y :fill colour
             (append (and bold '(:font-weight "bold"))
                     (and underline '(:text-decoration "underline")))))
    (setq x (+ x (* (string-width text) lispm-screenshot-char-width)))))

(defun lispm-screenshot--mode-line ()
  "Return the text of the current buffer's mode line."
  (format " -:%s-  %s   (%s)"
          (cond (buffer-read-only "%%") ((buffer-modified-p) "**") (t "--"))
          (buffer-name)
          (if (stringp mode-name) mode-name (format-mode-line mode-name))))

(defun lispm-screenshot (buffer file &optional columns lines start)
  "Write to FILE, an SVG, what a window of COLUMNS x LINES would show of BUFFER.
COLUMNS defaults to 100 and LINES to 34, the mode line included.  The
window starts at START (default: BUFFER's start); long lines are cut."
  (let* ((columns (or columns 100))
         (lines (or lines 34))
         (width (ceiling (+ 12 (* columns lispm-screenshot-char-width))))
         (height (+ 8 (* lines lispm-screenshot-line-height)))
         (svg (svg-create width height
                          :font-family "DejaVu Sans Mono, monospace"
                          :font-size lispm-screenshot-font-size
                          :xml:space "preserve"))
         (baseline (lambda (n) (+ 4 (* (1+ n) lispm-screenshot-line-height) -4))))
    (svg-rectangle svg 0 0 width height :fill lispm-screenshot-background)
    (with-current-buffer buffer
      (font-lock-ensure)
      (cl-loop for runs in (lispm-screenshot--lines (or start (point-min)) columns (1- lines))
               for n from 0
               do (lispm-screenshot--text svg runs 6 (funcall baseline n)))
      (svg-rectangle svg 0 (+ 4 (* (1- lines) lispm-screenshot-line-height))
                     width lispm-screenshot-line-height :fill "#3c3c3c")
      (lispm-screenshot--text
       svg `((,(lispm-screenshot--mode-line) ("#e0e0e0" nil nil)))
       6 (funcall baseline (1- lines))))
    (let ((coding-system-for-write 'utf-8-unix))
      (with-temp-file file
        (insert "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        (svg-print svg)
        (insert "\n")))
    file))

(provide 'screenshot)
;;; screenshot.el ends here
