"""A turn, and its commits, after Emacs is SIGKILLed mid-turn (issue 23 §1).

A real Emacs plays a session's turns through the session's own
functions, the files edited through their buffers as the agent's tools
do, and its git importer is the real one.  It stops itself (SIGSTOP) at
the moment named, and the test SIGKILLs it there; a second Emacs then
opens the session, and git is asked what it holds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import EMACS, ROOT
from tests.python.test_crash_save import await_line

#: The child: turn 1 whole; turn 2 edits two files, then waits for approval.
CHILD = r"""
(progn
  (require 'lispm-session)
  (require 'lispm-edit)
  (let* ((project (getenv "LISPM_CRASH_PROJECT"))
         (moment (getenv "LISPM_CRASH_MOMENT"))
         (lispm-sessions-directory (getenv "LISPM_CRASH_SESSIONS"))
         (stop (lambda (what)
                 (message "lispm-at %s" what)
                 (signal-process (emacs-pid) 'SIGSTOP)))
         (buffer (lispm-session-create project))
         (edit (lambda (id name text)
                 (lispm-session-insert-call buffer (list :id id :name "edit_file"
                                                         :arguments "{}"))
                 (lispm-edit-replace (expand-file-name name project) text :save t)
                 (lispm-session-insert-result buffer id (format "edited %s" name)))))
    (lispm-session-begin-turn buffer "Turn one: write a.txt")
    (funcall edit "e0" "a.txt" "TURN ONE\n")
    (lispm-session-end-turn buffer)
    (when (equal moment "commit-2")
      ;; The importer gets turn 1, then is stopped before turn 2 reaches it.
      (message "lispm-importer-ready")
      (sleep-for 0.5))
    (lispm-session-begin-turn buffer "Turn two: change a.txt and b.txt, then check")
    (funcall edit "e1" "a.txt" "TURN TWO\n")
    (funcall edit "e2" "b.txt" "TURN TWO b\n")
    (when (equal moment "commit-2")
      (lispm-session-end-turn buffer)
      ;; Turn 3 saves the file again at once, before git took turn 2.
      (lispm-session-begin-turn buffer "Turn three")
      (funcall edit "e3" "a.txt" "TURN THREE\n")
      (funcall stop "commit-2-handed"))
    (lispm-session-insert-call buffer '(:id "s1" :name "run_shell" :arguments "{}"))
    (lispm-session-insert-approval buffer "s1" "Approve run_shell: make check")
    (funcall stop "approval-pending")))
"""

#: The second Emacs: reopen the session as a resume does, print what it shows.
READER = r"""
(progn
  (require 'lispm-session)
  (let* ((file (car (directory-files (getenv "LISPM_CRASH_SESSIONS") t "\\`[^.#].*\\.org\\'")))
         (buffer (lispm-session-open file)))
    ;; What `lispm-own-agent-resume' does first.
    (lispm-session-end-cut-turn buffer)
    (princ (with-current-buffer buffer (buffer-substring-no-properties (point-min) (point-max))))))
"""


def _env(tmp_path: Path, moment: str) -> dict[str, str]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    return dict(os.environ, HOME=str(tmp_path), LISPM_CRASH_PROJECT=str(project),
                LISPM_CRASH_SESSIONS=str(tmp_path / "sessions"), LISPM_CRASH_MOMENT=moment,
                GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")


def _emacs(program: str) -> list[str]:
    return [EMACS, "--batch", "-Q", "-L", str(ROOT / "elisp"), "--eval", program]


def _descendants(pid: int) -> list[int]:
    """Return the processes under PID, children first."""
    found: list[int] = []
    queue = [pid]
    while queue:
        parent = queue.pop(0)
        for task in Path(f"/proc/{parent}/task").glob("*"):
            children = (task / "children").read_text().split()
            found.extend(int(child) for child in children)
            queue.extend(int(child) for child in children)
    return found


def _wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "T":
        assert time.monotonic() < deadline, "the child did not stop"
        time.sleep(0.01)


def _git(sessions: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(sessions), *args], check=True,
                          capture_output=True, text=True,
                          env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1",
                                   GIT_CONFIG_GLOBAL="/dev/null")).stdout


def test_a_turn_killed_with_an_approval_pending_reopens_with_its_record(
    tmp_path: Path,
) -> None:
    """The words, the two edits' calls and results, the approval ended, a note."""
    env = _env(tmp_path, "approval")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-at approval-pending")
    _wait_stopped(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    project = tmp_path / "project"
    assert (project / "a.txt").read_text() == "TURN TWO\n"
    assert (project / "b.txt").read_text() == "TURN TWO b\n"
    reader = subprocess.run(_emacs(READER), env=env, capture_output=True, timeout=60)
    text = reader.stdout.decode()
    assert reader.returncode == 0, reader.stderr.decode()[-2000:]
    assert "* Turn 2: Turn two: change a.txt and b.txt, then check" in text
    assert "edited a.txt" in text and "edited b.txt" in text
    assert "**** TODO" not in text
    assert "**** CANCELLED Approve run_shell: make check" in text
    assert ": Turn 2 was cut: Emacs ended during it.  2 calls ran" in text


def test_each_commit_holds_its_turns_file_though_emacs_died(tmp_path: Path) -> None:
    """Git stopped with turn 2 handed to the shell, the file saved again, Emacs killed."""
    env = _env(tmp_path, "commit-2")
    child = subprocess.Popen(_emacs(CHILD), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    await_line(child, b"lispm-importer-ready")
    # Let turn 1's commit through, then stop the importer (sh and git).
    sessions = tmp_path / "sessions"
    deadline = time.monotonic() + 20
    while not _git_has_commits(sessions):
        assert time.monotonic() < deadline, "turn 1 was not committed"
        time.sleep(0.02)
    # git alone is stopped: the shell still takes what Emacs gives it.
    importer = _descendants(child.pid)
    git = [pid for pid in importer
           if Path(f"/proc/{pid}/comm").read_text().strip() == "git"]
    assert git, "no git fast-import runs"
    for pid in git:
        os.kill(pid, signal.SIGSTOP)
    await_line(child, b"lispm-at commit-2-handed")
    _wait_stopped(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    for pid in git:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in importer):
        assert time.monotonic() < deadline, "the importer did not end"
        time.sleep(0.05)
    log = _git(sessions, "log", "--format=%H %s").splitlines()
    messages = [line.split(" ", 1)[1] for line in log]
    assert any("turn 2:" in message for message in messages), messages
    for line in log:
        commit, message = line.split(" ", 1)
        number = int(message.split(" turn ")[1].split(":")[0])
        name = _git(sessions, "ls-tree", "--name-only", commit).strip()
        text = _git(sessions, "show", f"{commit}:{name}")
        turns = [int(word) for word in
                 (part.split(":")[0] for part in text.split("\n* Turn ")[1:])]
        assert max(turns) == number, (message, turns)
        if number == 2:
            assert "edited b.txt" in text and "Turn three" not in text
    _git(sessions, "fsck", "--full", "--strict")


def _git_has_commits(sessions: Path) -> bool:
    if not (sessions / ".git").exists():
        return False
    result = subprocess.run(["git", "-C", str(sessions), "rev-parse", "-q", "--verify", "HEAD"],
                            capture_output=True,
                            env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1",
                                     GIT_CONFIG_GLOBAL="/dev/null"))
    return result.returncode == 0
