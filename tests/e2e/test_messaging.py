"""End to end: real Claude Code asks real Codex through LispM, offline.

The scripted gateway plays both models: Claude asks Codex for a review of
notes.el; Codex reads the file and replies.  The ERT file drives Emacs and
checks the ledger and what each model saw; this checks the gateway's log.
"""

from __future__ import annotations

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
        # Codex, asked something it will not live to answer: it works slowly.
        {"match": "One more look?", "steps": [{"say": "Thinking hard...", "delay": 60}]},
        # Codex, told to be busy for a while.
        {"match": "Work slowly", "steps": [{"say": "Working slowly...", "delay": 8}]},
        # Either, on a plain message.
        {"match": "[Message from", "steps": [{"say": "Thanks for the note."}]},
        # Claude, asked by the user.
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
        {"match": "Tell Codex", "steps": [
            {"tool": "lispm.send_message", "args": {"to": "codex", "text": "FYI: tests pass."}},
            {"say": "Told codex: {last_tool_result}"},
        ]},
        {"match": "Tell Claude", "steps": [
            {"tool": "lispm.send_message",
             "args": {"to": "claude", "text": "FYI: build is green."}},
            {"say": "Told claude: {last_tool_result}"},
        ]},
        # Either CLI, told to run a command: its shell tool, which asks first.
        {"match": "Touch the flag file", "steps": [
            {"shell": "touch approved-flag.txt", "escalate": True,
             "justification": "the user asked for it"},
            {"say": "Done: {last_tool_result}"},
        ]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


@pytest.mark.e2e
def test_claude_asks_codex_for_a_review(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-messaging.el", script(project.resolve()), [project])
    assert_ert_passed(run, expected_tests=5)
    claude = run.main_requests("anthropic")
    codex = run.main_requests("responses")
    # Each reply reached Claude exactly once, as one new turn: also the
    # one whose sidecar was SIGKILLed between the ask and the reply.
    replies = [r["prompt"].split("]")[0] for r in claude
               if not r["tool_results"] and r["prompt"].startswith("[Reply from codex")]
    assert len(replies) == 2 and len(set(replies)) == 2, replies
    # Nothing was ever approved: the flag file exists in no project.
    assert not list(tmp_path.glob("**/approved-flag.txt"))
    # LispM's tools were offered to both models under their CLIs' names.
    for name in ("send_message", "ask_agent", "reply", "list_agents"):
        assert any(f"mcp__lispm__{name}" in r["tools"] for r in claude), name
        assert any(f"mcp__lispm.{name}" in r["tools"] for r in codex), name
