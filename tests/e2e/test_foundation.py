"""End to end: real Claude Code and Codex in LispM terminals, offline.

The ERT file does the driving and the Emacs-side checks; this checks what
the models saw, from the scripted gateway's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import assert_ert_passed, make_project, run_ert_e2e

SCRIPT = [{"match": "list agents",
           "steps": [{"tool": "lispm.list_agents"}, {"say": "LISTED {last_tool_result}"}]}]


@pytest.mark.e2e
def test_claude_and_codex_list_each_other(tmp_path: Path) -> None:
    projects = [make_project(tmp_path / "proj-a"), make_project(tmp_path / "proj-b")]
    run = run_ert_e2e(tmp_path, "lispm-e2e-foundation.el", SCRIPT, projects)
    assert_ert_passed(run, expected_tests=3)

    claude = run.main_requests("anthropic")
    codex = run.main_requests("responses")
    # Each model was offered LispM's tool under its CLI's own naming.
    assert any("mcp__lispm__list_agents" in r["tools"] for r in claude)
    assert any("mcp__lispm.list_agents" in r["tools"] for r in codex)
    # Every prompt the test typed reached its model exactly as typed.
    for prompt in ("list agents please (vterm)", "list agents again after the restart",
                   "list agents please (term)"):
        assert any(r["prompt"] == prompt for r in claude), prompt
        assert any(r["prompt"] == prompt for r in codex), prompt
    # No model was ever asked without the gateway's key, and none by a stranger.
    assert {r["auth"] for r in run.requests() if r["kind"] == "main"} == {"Bearer"}
