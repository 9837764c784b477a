"""The package tar installs into a clean Emacs, and LispM works from there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import EMACS, ROOT, offline
from tests.python.test_readme_commands import commands_check, readme_commands

#: A later session: package.el activates LispM, nothing of it is loaded yet.
NEXT_SESSION = r"""
(progn
  (setq package-user-dir (expand-file-name "elpa" (getenv "LISPM_TEST_HOME"))
        package-archives nil)
  (package-initialize)
  (when (featurep 'lispm) (error "lispm was loaded before it was used"))
  README-COMMANDS-CHECK)
"""

INSTALL_AND_USE = r"""
(progn
  (setq package-user-dir (expand-file-name "elpa" (getenv "LISPM_TEST_HOME"))
        package-archives nil)
  (package-initialize)
  (package-install-file (getenv "LISPM_TEST_TAR"))
  (let ((dir (package-desc-dir (cadr (assq 'lispm package-alist)))))
    (princ (format "installed-in %s\n" dir))
    ;; Byte-compiled at install time, as package.el does for every user.
    (unless (file-exists-p (expand-file-name "lispm-sidecar.elc" dir))
      (error "lispm-sidecar.el was not compiled")))
  ;; The autoloaded command, as a user would type M-x lispm.
  (call-interactively #'lispm)
  (with-current-buffer "*LispM*"
    (unless (derived-mode-p 'lispm-list-mode) (error "not the agent list"))
    (princ (format "list-columns %S\n" (mapcar (function car) tabulated-list-format))))
  ;; The sidecar runs from the Python sources the tar carries.
  (princ (format "sidecar-source %s\n" (lispm-sidecar-source-directory)))
  (princ (format "ping %S\n" (lispm-sidecar-request 'lispm/ping '(:from "package"))))
  ;; An app's command works before the store was ever opened.
  (call-interactively #'lispm-doctor)
  (princ (format "doctor-buffer %s\n" (buffer-name (window-buffer))))
  (call-interactively #'lispm-apps)
  (princ (format "apps-buffer %s\n" (buffer-name (window-buffer))))
  ;; Every app opens from the installed package.
  (dolist (command '(lispm-doctor lispm-mycin lispm-blocks))
    (call-interactively command)
    (princ (format "app %s %s\n" command (buffer-name (window-buffer)))))
  ;; A run_lisp program runs in an Emacs started from the installed files.
  (require 'lispm-run-lisp)
  (cl-defstruct (package-test-actor (:include lispm-actor)))
  (let ((result nil) (deadline (+ (float-time) 60)))
    (lispm-run-lisp-start (make-package-test-actor :name "pkg" :folder default-directory)
                          "(+ 1 2)" (lambda (outcome) (setq result outcome)))
    (while (and (not result) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (princ (format "run-lisp %S\n" (or (plist-get result :text) result))))
  ;; LispM's own roles come with the package.
  (princ (format "roles %S\n" (mapcar #'lispm-role-name (lispm-roles-list))))
  (lispm-sidecar-stop))
"""


def test_package_installs_and_runs_in_a_clean_emacs(tmp_path: Path) -> None:
    built = subprocess.run(["sh", "scripts/package.sh", str(tmp_path / "dist")], cwd=ROOT,
                           capture_output=True, text=True, check=True)
    tar = built.stdout.strip().splitlines()[-1]
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), LISPM_TEST_HOME=str(home),
               LISPM_TEST_TAR=str(ROOT / tar) if not os.path.isabs(tar) else tar)
    done = subprocess.run(offline([EMACS, "--batch", "-Q", "--eval", INSTALL_AND_USE]),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    installed = next(line.split(" ", 1)[1] for line in output.splitlines()
                     if line.startswith("installed-in "))
    assert installed.startswith(str(home / "elpa" / "lispm-0.1.0"))
    assert ('list-columns ("Name" "Kind" "Role" "Folder" "State" "Queued" "MCP port" "Used"'
            ' "Needs you")' in output)
    assert f"sidecar-source {installed}/python/" in output
    assert 'ping (:from "package")' in output
    assert "doctor-buffer *LispM Doctor*" in output
    assert "apps-buffer *LispM Apps*" in output
    for command in ("lispm-doctor", "lispm-mycin", "lispm-blocks"):
        assert f"app {command} *LispM" in output, command
    assert 'run-lisp "Value: 3"' in output
    assert "roles (default reviewer tester)" in output
    warnings = [line for line in output.splitlines() if "Warning" in line]
    assert warnings == [], warnings
    # Every command the README names, from the package's autoloads alone.
    commands = readme_commands()
    later = subprocess.run(
        offline([EMACS, "--batch", "-Q", "--eval",
                 NEXT_SESSION.replace("README-COMMANDS-CHECK", commands_check(commands))]),
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    output = later.stdout + later.stderr
    assert later.returncode == 0, output
    missing = [line.split()[1] for line in output.splitlines() if line.startswith("missing ")]
    assert missing == [], output
    assert sum(line.startswith("command ") for line in output.splitlines()) == len(commands)
