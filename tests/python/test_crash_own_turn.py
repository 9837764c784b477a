"""An own agent's real turn, Emacs SIGKILLed with an approval pending (issue 23 §1).

A real batch Emacs runs LispM's own agent with the real sidecar, the
scripted model gateway as its model, in a loopback-only network
namespace.  The model edits two files (allowed at once), then asks for
a shell command (the policy asks the user).  When the approval is in
the session (a test-only advice after `lispm-session-insert-approval'),
the child prints a marker and stops itself (SIGSTOP); the test SIGKILLs
it there.  A fresh Emacs resumes the session with `lispm-own-agent-resume'
and reverts the cut turn with `lispm-own-agent-revert-turn'.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from tests.conftest import ROOT, emacs_batch_command, offline
from tests.python.test_crash_save import await_line

PROMPT = "Change two files, then check"

SCRIPT = [
    {"match": PROMPT, "steps": [
        {"tool": "edit_file", "args": {"path": "a.txt", "old": "one\n", "new": "one AGENT\n"}},
        {"tool": "edit_file", "args": {"path": "b.txt", "old": "two\n", "new": "two AGENT\n"}},
        {"tool": "run_shell", "args": {"command": "touch RAN"}},
        {"say": "Checked."},
    ]},
    {"match": "", "steps": [{"say": "Noted."}]},
]

#: Edit and read allowed at once, the shell asked for.
POLICY = ("'((default (read allow) (introspect allow) (message allow)"
          " (edit allow) (shell ask) (eval ask)))")

CHILD = r"""
(progn
  (require 'lispm-own-agent)
  (let* ((dir (getenv "LISPM_CRASH_DIR"))
         (port (expand-file-name "gateway.port" dir)))
    (while (not (and (file-exists-p port)
                     (> (file-attribute-size (file-attributes port)) 0)))
      (sleep-for 0.05))
    (setq lispm-models
          `(("scripted" :api anthropic
             :base-url ,(concat "http://127.0.0.1:"
                                (string-trim (with-temp-buffer
                                               (insert-file-contents port)
                                               (buffer-string))))
             :model "scripted-main" :key (:env "LISPM_E2E_KEY")))
          lispm-sessions-directory (expand-file-name "sessions/" dir)
          lispm-policy-roles POLICY)
    (setenv "LISPM_E2E_KEY" "not-a-real-key")
    ;; The moment: the approval is written in the session.
    (advice-add 'lispm-session-insert-approval :after
                (lambda (&rest _)
                  (message "lispm-at approval-pending")
                  (signal-process (emacs-pid) 'SIGSTOP)))
    (let ((agent (lispm-agent (expand-file-name "project/" dir))))
      (lispm-own-agent-send agent "PROMPT")
      (let ((deadline (+ (float-time) 60)))
        (while (< (float-time) deadline)
          (accept-process-output nil 0.05)))
      (message "lispm-at no-approval")
      (kill-emacs 1))))
""".replace("POLICY", POLICY).replace("PROMPT", PROMPT)

READER = r"""
(progn
  (require 'lispm-own-agent)
  (let* ((dir (getenv "LISPM_CRASH_DIR"))
         (file (car (directory-files (expand-file-name "sessions/" dir) t
                                     "\\`[^.#].*\\.org\\'"))))
    (setq lispm-models '(("scripted" :api anthropic :base-url "http://127.0.0.1:9"
                          :model "scripted-main"))
          lispm-sessions-directory (expand-file-name "sessions/" dir)
          lispm-policy-roles POLICY)
    (let* ((agent (lispm-own-agent-resume file))
           (buffer (lispm-own-agent-buffer agent))
           (text (lambda () (with-current-buffer buffer
                              (buffer-substring-no-properties (point-min) (point-max))))))
      (princ (format "=====PENDING %d\n" (lispm-approvals-count)))
      (princ (format "=====DOCUMENT\n%s" (funcall text)))
      (princ (format "=====REVERTED %S\n"
                     (condition-case err (lispm-own-agent-revert-turn agent 1)
                       (error err))))
      (princ (format "=====AFTER\n%s" (funcall text)))
      (kill-emacs 0))))
""".replace("POLICY", POLICY)


def _section(output: str, name: str) -> str:
    return output.split(f"====={name}", 1)[1].split("\n=====", 1)[0]


def test_a_real_turn_killed_with_an_approval_pending_reopens_and_reverts(
    tmp_path: Path,
) -> None:
    """The words, both edits' calls and changes, the approval ended; the revert works."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("zero\none\n")
    (project / "b.txt").write_text("two\nthree\n")
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps(SCRIPT))
    env = dict(os.environ, LISPM_CRASH_DIR=str(tmp_path),
               PYTHONPATH=f"{ROOT / 'python'}:{ROOT}")
    gateway = (f"{sys.executable} -m lispm_sidecar.testing.gateway --port 0"
               f" --port-file {tmp_path / 'gateway.port'} --log {tmp_path / 'gateway.jsonl'}"
               f" --script {script} >{tmp_path / 'gateway.out'} 2>&1 &"
               f" echo $! >{tmp_path / 'gateway.pid'};")
    emacs = shlex.join(emacs_batch_command("--eval", CHILD))
    child = subprocess.Popen(offline(["sh", "-c", gateway + " exec " + emacs]), cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await_line(child, b"lispm-at approval-pending")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        pid = tmp_path / "gateway.pid"
        if pid.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGTERM)
    assert (project / "a.txt").read_text() == "zero\none AGENT\n"
    assert (project / "b.txt").read_text() == "two AGENT\nthree\n"

    reader = subprocess.run(offline(emacs_batch_command("--eval", READER)), cwd=ROOT, env=env,
                            capture_output=True, timeout=60)
    output = reader.stdout.decode()
    assert reader.returncode == 0, reader.stderr.decode()[-3000:]
    document = _section(output, "DOCUMENT")
    # The user's words, the two calls with their results and changes.
    assert f"* Turn 1: {PROMPT}" in document
    assert document.count("*** Call edit_file") == 2
    assert "-one\n+one AGENT\n" in document and "-two\n+two AGENT\n" in document
    # The approval ended, not pending, and nothing waits on it.
    assert "**** TODO" not in document
    assert "**** CANCELLED run_shell touch RAN" in document
    assert "ended unanswered" in document
    assert ": Turn 1 was cut: Emacs ended during it.  2 calls ran" in document
    assert _section(output, "PENDING").strip() == "0"
    assert not (project / "RAN").exists()
    # The turn reverts from the session's record.
    assert _section(output, "REVERTED").strip() == "2", output[-3000:]
    assert (project / "a.txt").read_text() == "zero\none\n"
    assert (project / "b.txt").read_text() == "two\nthree\n"
    assert "Turn 1 reverted: 2 files restored" in _section(output, "AFTER")
