"""Each session commit holds its turn's file, or is not made (issue 23 §1).

A real Emacs saves a session's turns (each with its step saves: the
turn's words, its call, its result) in a real sessions directory, with
the real git importer (the shell and `git fast-import`), and is
SIGKILLed at the moment named: right after it handed turn 2's commit to
the importer, with the importer's git, its shell's feeding loop, or the
shell Emacs started stopped (SIGSTOP) while Emacs saves turn 3's steps,
with the shell stopped between sizing turn 2's file and reading it, and
mid-way through turn 2's record.  The stopped processes are continued
once Emacs is dead.  Then every commit labelled "turn N" must hold
exactly the file Emacs wrote at turn N's end (the child keeps a copy),
the repository must pass `git fsck --full --strict`, and the next Emacs,
its turn committed on top, must leave none of the pinned files and
temporary files behind.

The moments are deterministic: the child Emacs says where it is on
stderr (`lispm-at WHAT`) and stops itself (SIGSTOP) where the test asks
it to, by advice in its own script on `process-send-string` (the
commit handed to the importer) and plain calls between the steps; it
keeps a copy of the file as each turn's end wrote it, when the commit
is queued (advice on `lispm-sessions-enqueue`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import EMACS, ROOT
from tests.python.test_crash_save import await_line

#: The child: turns 1-3, each with step saves, stopping where told.
CHILD = r"""
(progn
  (require 'cl-lib)
  (require 'lispm-session)
  (let* ((project (getenv "LISPM_CRASH_PROJECT"))
         (expect (getenv "LISPM_CRASH_EXPECT"))
         (stops (split-string (or (getenv "LISPM_CRASH_STOPS") "")))
         (cut (getenv "LISPM_CRASH_CUT"))
         (lispm-sessions-directory (getenv "LISPM_CRASH_SESSIONS"))
         (at (lambda (what)
               (message "lispm-at %s" what)
               (when (member what stops) (signal-process (emacs-pid) 'SIGSTOP))))
         (buffer (lispm-session-create project))
         (file (buffer-local-value 'lispm-session-file buffer))
         (step (lambda ()
                 ;; A save without a commit, as each step of a turn makes.
                 (condition-case nil (lispm-session-save buffer)
                   (wrong-number-of-arguments   ; a LispM that saved only at turns' ends
                    (make-directory (file-name-directory file) t)
                    (with-current-buffer buffer
                      (save-restriction (widen) (lispm-session--write file)))))))
         (steps (lambda (n)
                  (lispm-session-begin-turn buffer (format "Turn %d's words" n))
                  (funcall step)
                  (lispm-session-insert-call
                   buffer (list :id (format "c%d" n) :name "read_file" :arguments "{}"))
                  (funcall step)
                  (lispm-session-insert-result
                   buffer (format "c%d" n) (format "result %d\n%s" n (make-string 3000 ?r)))
                  (funcall step)))
         (end (lambda (_n) (lispm-session-end-turn buffer))))
    ;; The file as the turn's end wrote it, kept when its commit is queued.
    (advice-add
     'lispm-sessions-enqueue :before
     (lambda (file message)
       (when (string-match " turn \\([0-9]+\\):" message)
         (copy-file file (expand-file-name (format "turn-%s.org" (match-string 1 message))
                                           expect)
                    t))))
    (advice-add
     'process-send-string :around
     (lambda (send process string)
       (if (not (string-match "^|session [^ \n]+ turn \\([0-9]+\\):.*\n" string))
           (funcall send process string)
         (let ((turn (match-string 1 string)))
           (if (and cut (equal turn "2"))
               ;; Emacs dies with the record given up to its message.
               (progn (funcall send process (substring string 0 (match-end 0)))
                      (funcall at "cut-2"))
             (funcall send process string)
             (funcall at (concat "handed-" turn)))))))
    (funcall steps 1)
    (funcall end 1)
    (unless (getenv "LISPM_CRASH_QUICK")
      (lispm-sessions-wait-for-commits 30))
    (funcall at "ready")
    (when (getenv "LISPM_CRASH_SEE_STOP")
      ;; Emacs has seen its shell stopped before the turn ends.
      (let ((deadline (+ (float-time) 10)))
        (while (and (not (cl-find-if (lambda (process)
                                       (and (member "fast-import" (process-command process))
                                            (eq (process-status process) 'stop)))
                                     (process-list)))
                    (< (float-time) deadline))
          (accept-process-output nil 0.02))))
    (funcall steps 2)
    (funcall end 2)
    (funcall at "ended-2")
    (funcall steps 3)
    (funcall at "steps-3")
    (while t (accept-process-output nil 0.05))))
"""

#: The next Emacs: open the session, one more turn, wait for its commit.
NEXT = r"""
(progn
  (require 'lispm-session)
  (let* ((lispm-sessions-directory (getenv "LISPM_CRASH_SESSIONS"))
         (file (car (directory-files lispm-sessions-directory t "\\`[^.#].*\\.org\\'")))
         (buffer (lispm-session-open file)))
    (lispm-session-begin-turn buffer "The next Emacs's turn")
    (lispm-session-end-turn buffer)
    (copy-file file (expand-file-name "next.org" (getenv "LISPM_CRASH_EXPECT")) t)
    (unless (lispm-sessions-wait-for-commits 30) (error "Not committed"))
    (lispm-sessions-stop)))
"""

#: A `cat` that stops itself before reading turn 2's file, once.
CAT = """#!/bin/sh
if [ -n "$1" ] && grep -q "Turn 2's words" "$1" 2>/dev/null \\
   && mkdir "$LISPM_CRASH_FLAG" 2>/dev/null; then
  echo $$ > "$LISPM_CRASH_FLAG/pid"
  kill -STOP $$
fi
exec {cat} "$@"
"""

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    for name in ("project", "expect"):
        (tmp_path / name).mkdir(exist_ok=True)
    return dict(os.environ, HOME=str(tmp_path), LISPM_CRASH_PROJECT=str(tmp_path / "project"),
                LISPM_CRASH_SESSIONS=str(tmp_path / "sessions"),
                LISPM_CRASH_EXPECT=str(tmp_path / "expect"), **GIT_ENV, **extra)


def _emacs(program: str) -> list[str]:
    return [EMACS, "--batch", "-Q", "-L", str(ROOT / "elisp"), "--eval", program]


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").glob("*")
            for child in (task / "children").read_text().split()]


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def _importer(emacs: int) -> tuple[int, list[int], list[int]]:
    """Return the shell Emacs started, its loop that feeds git, and git.
    (Its other subshell, if any, ends when git does.)"""
    shell = [pid for pid in _children(emacs) if _comm(pid) == "sh"]
    assert len(shell) == 1, f"no one importer shell under Emacs: {shell}"
    # The shell may be starting its pipeline yet.
    _wait(lambda: any(_comm(pid) == "git" for pid in _children(shell[0])),
          "no git fast-import runs")
    below = _children(shell[0])
    # The loop that feeds git reads what Emacs writes to the shell.
    feed = [pid for pid in below if _comm(pid) == "sh"
            and os.readlink(f"/proc/{pid}/fd/0") == os.readlink(f"/proc/{shell[0]}/fd/0")]
    git = [pid for pid in below if _comm(pid) == "git"]
    return shell[0], feed, git


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] == "T"


def _wait(predicate: object, what: str, seconds: float = 10) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _git(sessions: Path, *args: str, text: bool = True) -> str | bytes:
    result = subprocess.run(["git", "-C", str(sessions), *args], check=True,
                            capture_output=True, text=text, env=dict(os.environ, **GIT_ENV))
    output: str | bytes = result.stdout
    return output


def _log(sessions: Path) -> list[tuple[str, int]]:
    """Return the commits, newest first, with the turn each names."""
    lines = str(_git(sessions, "log", "--format=%H %s")).splitlines()
    return [(line.split(" ", 1)[0], int(line.split(" turn ")[1].split(":")[0]))
            for line in lines]


def _check_commits(tmp_path: Path, made: set[int], maybe: set[int]) -> str:
    """Each commit holds its turn's file; MADE are made, no more than MADE | MAYBE.
    Return the newest commit."""
    sessions, expect = tmp_path / "sessions", tmp_path / "expect"
    log = _log(sessions)
    turns = [turn for _commit, turn in log]
    assert len(turns) == len(set(turns)), turns
    assert made <= set(turns) <= made | maybe, turns
    for commit, turn in log:
        name = str(_git(sessions, "ls-tree", "--name-only", commit)).strip()
        held = _git(sessions, "show", f"{commit}:{name}", text=False)
        assert held == (expect / f"turn-{turn}.org").read_bytes(), (
            f"the commit of turn {turn} holds another file"
        )
    _git(sessions, "fsck", "--full", "--strict")
    return log[0][0]


def _check_next_emacs(tmp_path: Path, head: str) -> None:
    """No stray file but what the next Emacs removes; it does, and commits on top."""
    sessions = tmp_path / "sessions"
    pins = sessions / ".git" / "lispm"
    # A session's tail file (its steps since the file was written whole) is
    # part of the session, not a stray.
    strays = [path for path in sessions.iterdir() if path.name != ".git"
              and not path.name.endswith(".org")
              and not (path.name.startswith(".") and path.name.endswith(".org.tail")
                       and (sessions / path.name[1:-len(".tail")]).exists())]
    assert all(path.name.startswith((".lispm-save-", ".lispm-copy-")) for path in strays), strays
    # What an Emacs that died left is old by the time the next one comes.
    old = time.time() - 2 * 24 * 3600
    for path in [*strays, *(pins.iterdir() if pins.exists() else [])]:
        os.utime(path, (old, old))
    env = _env(tmp_path)
    result = subprocess.run(_emacs(NEXT), env=env, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    log = _log(sessions)
    assert str(_git(sessions, "rev-parse", f"{log[0][0]}^")).strip() == head
    name = str(_git(sessions, "ls-tree", "--name-only", "HEAD")).strip()
    assert _git(sessions, "show", f"HEAD:{name}", text=False) == (
        tmp_path / "expect" / "next.org").read_bytes()
    assert [path.name for path in sessions.iterdir() if path.name.startswith(".lispm-")] == []
    assert [path.name for path in pins.iterdir()] == []
    _git(sessions, "fsck", "--full", "--strict")


def _kill(child: subprocess.Popen[bytes], importer: list[int],
          stopped: list[int]) -> None:
    """SIGKILL the stopped CHILD; continue STOPPED; wait for the IMPORTER to end."""
    _wait(lambda: _stopped(child.pid), "the child did not stop")
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    for pid in stopped:
        os.kill(pid, signal.SIGCONT)
    _wait(lambda: not any(Path(f"/proc/{pid}").exists() for pid in importer),
          "the importer did not end", 30)


@pytest.mark.parametrize("quick", [False, True], ids=["turn-1-committed", "turns-quick"])
def test_killed_right_after_handing_turn_2(tmp_path: Path, quick: bool) -> None:
    """A plain SIGKILL once turn 2's commit is the importer's: both commits exact.
    Quick: turn 3's steps rewrote the file before the commits were handed."""
    env = _env(tmp_path, LISPM_CRASH_STOPS="handed-2",
               **({"LISPM_CRASH_QUICK": "1"} if quick else {}))
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at handed-2")
    _wait(lambda: _stopped(child.pid), "the child did not stop")
    shell, feed, git = _importer(child.pid)
    _kill(child, [shell, *feed, *git], [])
    _check_next_emacs(tmp_path, _check_commits(tmp_path, {1, 2}, set()))


@pytest.mark.parametrize("which", ["git", "feed"])
def test_importer_stopped_while_turn_3_saves(tmp_path: Path, which: str) -> None:
    """Git, or the shell's loop that feeds it, stopped from turn 2's end until
    Emacs, having saved turn 3's steps over the file, is dead."""
    env = _env(tmp_path, LISPM_CRASH_STOPS="ready steps-3")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at ready")
    _wait(lambda: _stopped(child.pid), "the child did not stop")
    shell, feed, git = _importer(child.pid)
    held = git if which == "git" else feed
    assert held
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    child.send_signal(signal.SIGCONT)
    await_line(child, b"lispm-at steps-3")
    _kill(child, [shell, *feed, *git], held)
    _check_next_emacs(tmp_path, _check_commits(tmp_path, {1, 2}, set()))


def test_shell_stopped_between_sizing_and_reading_turn_2(tmp_path: Path) -> None:
    """The shell has told git turn 2's size and stops before reading its file;
    turn 3's steps replace the file; Emacs dies; the shell goes on."""
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    cat = wrappers / "cat"
    cat.write_text(CAT.format(cat=shutil.which("cat")))
    cat.chmod(0o755)
    flag = tmp_path / "cat-stopped"
    env = _env(tmp_path, LISPM_CRASH_STOPS="handed-2 steps-3", LISPM_CRASH_FLAG=str(flag),
               PATH=f"{wrappers}:{os.environ['PATH']}")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at handed-2")
    _wait(lambda: (flag / "pid").exists() and (flag / "pid").read_text().strip() != "",
          "the shell did not read turn 2's file")
    reader = int((flag / "pid").read_text())
    _wait(lambda: _stopped(reader), "the shell's cat did not stop")
    shell, feed, git = _importer(child.pid)
    child.send_signal(signal.SIGCONT)
    await_line(child, b"lispm-at steps-3")
    _kill(child, [shell, *feed, *git], [reader])
    _check_next_emacs(tmp_path, _check_commits(tmp_path, {1, 2}, set()))


def test_shell_stopped_before_turn_2(tmp_path: Path) -> None:
    """The shell Emacs started is stopped, and Emacs sees it: turn 2's commit
    waits, then Emacs dies; it is not made, or made exact."""
    env = _env(tmp_path, LISPM_CRASH_STOPS="ready steps-3", LISPM_CRASH_SEE_STOP="1")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at ready")
    _wait(lambda: _stopped(child.pid), "the child did not stop")
    shell, feed, git = _importer(child.pid)
    os.kill(shell, signal.SIGSTOP)
    child.send_signal(signal.SIGCONT)
    await_line(child, b"lispm-at steps-3")
    _kill(child, [shell, *feed, *git], [shell])
    _check_next_emacs(tmp_path, _check_commits(tmp_path, {1}, {2}))


def test_killed_mid_way_through_turn_2s_record(tmp_path: Path) -> None:
    """Emacs dies having given the importer turn 2's record up to its message
    (a record past a pipe's atomic size is written in parts): no commit."""
    env = _env(tmp_path, LISPM_CRASH_STOPS="cut-2", LISPM_CRASH_CUT="1")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at cut-2")
    _wait(lambda: _stopped(child.pid), "the child did not stop")
    shell, feed, git = _importer(child.pid)
    _kill(child, [shell, *feed, *git], [])
    _check_next_emacs(tmp_path, _check_commits(tmp_path, {1}, set()))
