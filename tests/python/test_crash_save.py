"""An agent's edit of a big file survives Emacs dying mid-save (issue 23 §1).

A real Emacs makes the agent's edit of a 12 MB file (`lispm-edit-replace`
with `:save t`, what the edit tools do) and dies while it saves it:
stopped by itself (SIGSTOP) before and after each file operation of the
save, then SIGKILLed there; at a file size limit the kernel enforces
mid-write (SIGXFSZ, at the same byte every run); and by SIGKILL at
moments spread over the save.  Each time the file must be the old text
or the new one, byte for byte, with its modes.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import EMACS, ROOT

LINE = b"an old line of a big file, numbered %07d\n"
LINES = 300_000  # 12.3 MB

#: The child: visit the file, say when the save starts and ends, edit.
#: Within the save, each file operation is a step: "lispm-step N NAME
#: before|after"; with LISPM_CRASH_STOP=N it says "lispm-stopped N" at
#: step N and stops itself (SIGSTOP) there, for the test to SIGKILL.
CHILD = r"""
(progn
  (require 'lispm-edit)
  (let* ((file (getenv "LISPM_CRASH_FILE"))
         (stop (and (getenv "LISPM_CRASH_STOP")
                    (string-to-number (getenv "LISPM_CRASH_STOP"))))
         (saving nil)
         (steps 0)
         (step (lambda (name phase)
                 (when saving
                   (setq steps (1+ steps))
                   (message "lispm-step %d %s %s" steps name phase)
                   (when (eql steps stop)
                     (message "lispm-stopped %d" steps)
                     (signal-process (emacs-pid) 'SIGSTOP)))))
         (buffer (lispm-edit-visit file))
         (new (with-current-buffer buffer
                (concat "AN AGENT'S FIRST LINE\n"
                        (buffer-substring-no-properties
                         (save-excursion (goto-char (point-min)) (line-beginning-position 2))
                         (point-max))
                        "and its last\n"))))
    (dolist (name '(write-region rename-file copy-file delete-file make-temp-file
                    set-file-modes set-file-extended-attributes call-process))
      (advice-add name :around
                  (lambda (function &rest args)
                    (funcall step name "before")
                    (prog1 (apply function args)
                      (funcall step name "after")))))
    (with-current-buffer buffer
      (add-hook 'before-save-hook
                (lambda () (message "lispm-saving") (setq saving t)) nil t))
    (lispm-edit-replace buffer new :save t)
    (setq saving nil)
    (message "lispm-saved")))
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def big_file(tmp_path: Path) -> tuple[Path, str, str]:
    """A 12 MB file, and the digests of its old and its new text."""
    old = b"".join(LINE % n for n in range(LINES))
    new = b"AN AGENT'S FIRST LINE\n" + old[old.index(b"\n") + 1 :] + b"and its last\n"
    path = tmp_path / "project" / "big.txt"
    path.parent.mkdir()
    path.write_bytes(old)
    path.chmod(0o640)
    return path, hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest()


def _start(path: Path, *prefix: str, stop: int | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LISPM_CRASH_FILE=str(path), HOME=str(path.parent.parent))
    env.pop("LISPM_CRASH_STOP", None)
    if stop is not None:
        env["LISPM_CRASH_STOP"] = str(stop)
    return subprocess.Popen(
        [*prefix, EMACS, "--batch", "-Q", "-L", str(ROOT / "elisp"), "--eval", CHILD],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def await_line(child: subprocess.Popen[bytes], marker: bytes) -> None:
    """Read CHILD's stderr until the line MARKER; fail if it ends first."""
    assert child.stderr is not None
    for line in child.stderr:
        if line.strip() == marker:
            return
    raise AssertionError(f"the child ended before {marker!r}: status {child.wait()}")


def _check_whole(path: Path, old: str, new: str) -> str:
    digest = _digest(path)
    assert digest in (old, new), (
        f"{path.name} is neither the old nor the new text: {path.stat().st_size} bytes"
    )
    return "old" if digest == old else "new"


def _steps(child: subprocess.Popen[bytes]) -> list[str]:
    """Read the steps of CHILD's save from its stderr, until it saved."""
    assert child.stderr is not None
    steps = []
    for line in child.stderr:
        if line.startswith(b"lispm-step "):
            steps.append(line.split(b" ", 2)[2].strip().decode())
        elif line.strip() == b"lispm-saved":
            return steps
    raise AssertionError(f"the child ended before it saved: status {child.wait()}")


def test_sigkill_before_and_after_each_step_of_the_save(
    big_file: tuple[Path, str, str],
) -> None:
    """Stopped by itself at each file operation of the save, then SIGKILLed."""
    path, old, new = big_file
    original = path.read_bytes()
    child = _start(path)
    steps = _steps(child)
    child.wait(timeout=30)
    assert _check_whole(path, old, new) == "new"
    # The new text is written to a new file, given the modes, renamed.
    assert "write-region after" in steps and "rename-file before" in steps
    assert steps.index("write-region after") < steps.index("rename-file before")
    renamed = steps.index("rename-file after") + 1
    # Each moment between two steps once: before the first, after each.
    for number, name in enumerate(steps, 1):
        if number > 1 and not name.endswith(" after"):
            continue
        path.write_bytes(original)
        path.chmod(0o640)
        child = _start(path, stop=number)
        await_line(child, b"lispm-stopped %d" % number)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # The old text until the rename, the new one from it on.
        assert _check_whole(path, old, new) == ("new" if number >= renamed else "old"), name
        assert oct(path.stat().st_mode & 0o777) == oct(0o640), name


def test_dying_at_a_size_limit_mid_write_leaves_the_old_file(
    big_file: tuple[Path, str, str],
) -> None:
    """The kernel stops the write at 6 MB, the same byte every run, and kills Emacs."""
    path, old, new = big_file
    child = _start(path, "prlimit", f"--fsize={6 * 1024 * 1024}", "--core=0", "--")
    _, errors = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGXFSZ, errors.decode(errors="replace")[-2000:]
    assert _check_whole(path, old, new) == "old"
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)


def test_sigkill_at_any_moment_of_the_save_leaves_old_or_new(
    big_file: tuple[Path, str, str],
) -> None:
    """SIGKILL at moments spread over the save, measured first in a run of its own."""
    path, old, new = big_file
    original = path.read_bytes()
    child = _start(path)
    await_line(child, b"lispm-saving")
    started = time.monotonic()
    await_line(child, b"lispm-saved")
    took = time.monotonic() - started
    child.wait(timeout=30)
    assert _check_whole(path, old, new) == "new"
    for fraction in (0.2, 0.45, 0.7, 0.95):
        path.write_bytes(original)
        child = _start(path)
        await_line(child, b"lispm-saving")
        time.sleep(took * fraction)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        _check_whole(path, old, new)
        assert oct(path.stat().st_mode & 0o777) == oct(0o640)


def test_a_symbolic_link_stays_a_link_to_the_new_text(
    big_file: tuple[Path, str, str],
) -> None:
    """The link's target gets the new text; the link still points at it."""
    path, old, new = big_file
    link = path.parent / "link.txt"
    link.symlink_to(path.name)
    child = _start(link)
    _, errors = child.communicate(timeout=60)
    assert child.returncode == 0, errors.decode(errors="replace")[-2000:]
    assert link.is_symlink() and os.readlink(link) == path.name
    assert _check_whole(path, old, new) == "new"
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
