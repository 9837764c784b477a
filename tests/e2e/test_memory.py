"""End to end: the own agent remembers across Emacs processes (issue 25, section 3).

Tell the agent your name in one Emacs; quit; in a new Emacs process and a
new session, ask it; it answers.  Two Emacs processes, one after the other,
share the sessions repository (where the memory is committed) and the
project; the scripted gateway is the model, a new one for each."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from .harness import assert_ert_passed, commit_project, make_project, run_ert_e2e

FACT = "The user's name is Ada Lovelace."


def script() -> list[dict[str, Any]]:
    """The model's part: it remembers the name when told, and says it when asked."""
    return [
        {"match": "My name is Ada Lovelace", "steps": [
            {"tool": "remember", "args": {"fact": FACT, "scope": "user"}},
            {"say": "I will remember that, Ada. {last_tool_result}"}]},
        {"match": "What is my name?", "steps": [{"say": "Your name is Ada Lovelace."}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]


def git(repository: Path, *args: str) -> str:
    """Return the output of git ARGS in REPOSITORY."""
    return subprocess.run(["git", "-C", str(repository), *args], capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.e2e
def test_memory_across_two_emacs(tmp_path: Path) -> None:
    project = commit_project(make_project(tmp_path / "project", {"notes.txt": "notes\n"}))
    sessions = tmp_path / "sessions"
    runs = {}
    for half in ("tell", "ask"):
        work = tmp_path / half
        work.mkdir()
        runs[half] = run_ert_e2e(work, "lispm-e2e-memory.el", script(), [project],
                                 timeout=180, clis=())
        assert_ert_passed(runs[half], expected_tests=1)
        if half == "tell":
            # The first Emacs is gone, its commits made: the memory is in git.
            assert FACT in git(sessions, "show", "HEAD:memory/user.org")
    # The second Emacs's model request had the name in its system prompt.
    requests = [orjson.loads(line) for line in
                (tmp_path / "ask" / "gateway.jsonl").read_text().splitlines() if line]
    asked = [r for r in requests
             if r["kind"] == "main" and "What is my name?" in (r["prompt"] or "")]
    assert asked, requests
    body = orjson.loads(Path(asked[0]["body_file"]).read_bytes())
    system = body["system"]
    if isinstance(system, list):
        system = "".join(block.get("text", "") for block in system)
    assert FACT in system
    assert "Your name is Ada Lovelace." in asked[0]["answer"]["text"]
    # Two sessions and the memory, all committed; the project's git untouched.
    files = git(sessions, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert "memory/user.org" in files
    assert len([f for f in files if f.endswith(".org") and "/" not in f]) == 2
    assert git(project, "log", "--format=%s").split() == ["start"]
