"""An agent's edit of a big file survives Emacs dying mid-save (issue 23 §1).

A real Emacs makes the agent's edit of a 12 MB file (`lispm-edit-replace`
with `:save t`, what the edit tools do) and dies while it saves it: at
a file size limit the kernel enforces mid-write (SIGXFSZ, at the same
byte every run), and by SIGKILL at moments spread over the save.  Each
time the file must be the old text or the new one, byte for byte.
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
CHILD = r"""
(progn
  (require 'lispm-edit)
  (let* ((file (getenv "LISPM_CRASH_FILE"))
         (buffer (lispm-edit-visit file))
         (new (with-current-buffer buffer
                (concat "AN AGENT'S FIRST LINE\n"
                        (buffer-substring-no-properties
                         (save-excursion (goto-char (point-min)) (line-beginning-position 2))
                         (point-max))
                        "and its last\n"))))
    (with-current-buffer buffer
      (add-hook 'before-save-hook (lambda () (message "lispm-saving")) nil t))
    (lispm-edit-replace buffer new :save t)
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


def _start(path: Path, *prefix: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LISPM_CRASH_FILE=str(path), HOME=str(path.parent.parent))
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
    seen = []
    for fraction in (0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0):
        path.write_bytes(original)
        child = _start(path)
        await_line(child, b"lispm-saving")
        time.sleep(took * fraction)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        seen.append(_check_whole(path, old, new))
    # The last kills land after the rename at the latest: new text.
    assert "old" in seen
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
