"""End to end: a Holon agent (the stand-in daemon) and real Claude Code talk.

Holon cannot be installed here: `holon` is LispM's stand-in
(`lispm_sidecar.testing.holon_standin`), which implements only Holon's
documented endpoints and variables.  The scripted gateway plays both
models; the ERT file drives Emacs, this checks the gateway's log.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, make_project, run_ert_e2e


def script() -> list[dict[str, Any]]:
    """The models' parts, matched against each prompt (first match wins)."""
    return [
        # Claude, on holon's reply or message.
        {"match": "[Reply from holon", "steps": [{"say": "Holon says: {prompt}"}]},
        {"match": "[Message from holon]", "steps": [{"say": "Thanks, holon."}]},
        # Holon, asked by Claude: it answers with lispm-tool in its shell tool.
        {"match": "What is six times seven?", "steps": [
            {"shell": 'lispm-tool reply --request {request_id} "Forty-two."'},
            {"say": "Replied: {last_tool_result}"},
        ]},
        # Holon, told by its user to greet Claude.
        {"match": "Greet Claude", "steps": [
            {"shell": 'lispm-tool send_message --to claude "Hello from holon."'},
            {"say": "Greeted: {last_tool_result}"},
        ]},
        # Claude, told by its user to ask holon.
        {"match": "Ask Holon", "steps": [
            {"tool": "lispm.ask_agent",
             "args": {"to": "holon", "request": "What is six times seven?"}},
            {"say": "Asked holon ({last_tool_result}); the answer comes as my next input."},
        ]},
        {"match": "Anything new?", "steps": [{"say": "Nothing new."}]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


@pytest.mark.e2e
def test_holon_and_claude_talk(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-holon.el", script(), [project], holon=True,
                      clis=("claude",))
    assert_ert_passed(run, expected_tests=2)
    holon = run.main_requests("responses")
    # Holon's model was offered its own shell tool only (it has no MCP client)...
    assert holon and all(r["tools"] == ["exec_command"] for r in holon)
    # ...and ran lispm-tool with it, which succeeded.
    results = [t["text"] for r in holon for t in r["tool_results"]]
    assert any(t.startswith("exit code 0\nsent to claude") for t in results), results
    assert any("exit code 0\nreplied to claude, request R" in t for t in results), results
    # Claude got holon's message and reply once each.
    claude = [r["prompt"] for r in run.main_requests("anthropic") if not r["tool_results"]]
    assert claude.count("[Message from holon]\nHello from holon.") == 1
    assert len([p for p in claude if p.startswith("[Reply from holon to request R")]) == 1
