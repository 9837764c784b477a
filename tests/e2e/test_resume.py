"""End to end: agents come back after Emacs is SIGKILLed, with real CLIs, offline.

An earlier Emacs (a child of the test's Emacs) runs Claude Code, Codex and
a second Claude; Codex is busy, and each Claude asks it something.  That
Emacs is SIGKILLed with its sidecar.  The next Emacs resumes Claude and
Codex (`claude --resume`, `codex resume`): Codex gets Claude's request,
replies, and Claude's next input is the reply, in the conversation it had.
The second Claude is not resumed: a new claude-2 starts, and the request
the old one asked is delivered to no one.  The ERT file checks the command
lines and the ledger; this checks what each model saw.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import (
    REVIEW_RULES,
    ROOT,
    assert_ert_passed,
    make_project,
    run_ert_e2e,
)


def script(project: Path) -> list[dict[str, Any]]:
    """The models' parts, matched against each prompt (first match wins)."""
    notes = f"[[file:{project}/notes.el::9]]"
    return [
        *REVIEW_RULES,
        # Codex, asked by the second Claude (which will not be resumed): it replies
        # at once, if it is ever given the request.
        {"match": "One more look?", "steps": [
            {"tool": "lispm.reply", "args": {"request": "{request_id}", "text": "Looks fine."}},
            {"say": "Replied."},
        ]},
        # Codex, busy for longer than the earlier Emacs lives.
        {"match": "Work very slowly", "steps": [{"say": "Working very slowly...",
                                                 "delay": 900}]},
        {"match": "Get Codex's review", "steps": [
            {"tool": "lispm.ask_agent", "args": {
                "to": "codex",
                "request": f"Please review notes-parse-header in {notes}: it crashes on a "
                           "header line with no colon."}},
            {"say": "I asked codex ({last_tool_result}); its answer will come as my next input."},
        ]},
        {"match": "Ask Codex once more", "steps": [
            {"tool": "lispm.ask_agent", "args": {"to": "codex", "request": "One more look?"}},
            {"say": "Asked again: {last_tool_result}"},
        ]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


def body(request: dict[str, Any]) -> str:
    """The raw body the CLI sent with REQUEST."""
    return Path(request["body_file"]).read_text()


@pytest.mark.e2e
def test_agents_come_back_after_emacs_is_killed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-resume.el", script(project.resolve()), [project],
                      timeout=900)
    assert_ert_passed(run, expected_tests=1)
    text = (tmp_path / "restart.eld").read_text()
    match = re.search(r":restarted ([0-9.e+]+)", text)
    assert match, text
    restarted = float(match.group(1))
    after = [r for r in run.requests() if r["kind"] == "main" and r["t"] > restarted]
    claude = [r for r in after if r["api"] == "anthropic"]
    codex = [r for r in after if r["api"] == "responses"]
    # The resumed Claude's reply turn carries the conversation it had before.
    replies = [r for r in claude if (r["prompt"] or "").startswith("[Reply from codex")]
    assert len({r["prompt"] for r in replies}) == 1, [r["prompt"] for r in claude]
    assert "Get Codex's review of notes-parse-header in notes.el, please." in body(replies[0])
    # The resumed Codex saw Claude's request after the restart, in its old thread.
    asked = [r for r in codex if (r["prompt"] or "").startswith("[Request R")]
    assert asked and "Hello Codex: other agents may ask you for reviews." in body(asked[0])
    # The old claude-2's request reached no one: Codex never saw it, and no
    # reply to it reached anyone.
    assert not [r for r in codex if "One more look?" in (r["prompt"] or "")]
    assert not [r for r in run.main_requests("anthropic")
                if "Looks fine." in (r["prompt"] or "")]
