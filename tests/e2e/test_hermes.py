"""End to end: real Hermes asks real Claude Code through LispM's bridge.

The scripted gateway plays both models; the ERT file drives Emacs (and
runs `lispm-hermes-setup` on the seeded config.yaml), this checks the
gateway's log.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, make_project, run_ert_e2e


def script() -> list[dict[str, Any]]:
    """The models' parts, matched against each prompt (first match wins)."""
    return [
        # Hermes, on Claude's reply.
        {"match": "[Reply from claude", "steps": [{"say": "Claude says: {prompt}"}]},
        # Hermes, after /new: Claude's message is the new session's first.
        {"match": "Still with me", "steps": [{"say": "Yes, in a new session."}]},
        # The second Hermes.
        {"match": "Hello, second Hermes", "steps": [{"say": "Hello, Claude, from hermes-2."}]},
        {"match": "Hello from the second terminal", "steps": [{"say": "Hi, I am hermes-2."}]},
        {"match": "Greet the second Hermes", "steps": [
            {"tool": "lispm.send_message",
             "args": {"to": "hermes-2", "text": "Hello, second Hermes."}},
            {"say": "Greeted hermes-2."},
        ]},
        # Claude, told to message Hermes.
        {"match": "Tell Hermes", "steps": [
            {"tool": "lispm.send_message",
             "args": {"to": "hermes", "text": "Still with me after /new?"}},
            {"say": "Told hermes."},
        ]},
        # Claude, asked by Hermes: it answers with its reply tool.
        {"match": "What is six times seven?", "steps": [
            {"tool": "lispm.reply", "args": {"request": "{request_id}", "text": "Forty-two."}},
            {"say": "Replied: {last_tool_result}"},
        ]},
        # Hermes, told by its user to ask Claude.
        {"match": "Ask Claude", "steps": [
            {"tool": "lispm.ask_agent",
             "args": {"to": "claude", "request": "What is six times seven?"}},
            {"say": "Asked claude ({last_tool_result}); the answer comes as my next input."},
        ]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


@pytest.mark.e2e
def test_hermes_asks_claude(tmp_path: Path) -> None:
    venv = Path(os.environ.get("LISPM_HERMES_VENV", ROOT / ".deps" / "hermes-venv"))
    if not os.access(venv / "bin" / "hermes", os.X_OK):
        raise AssertionError(f"Hermes is not installed in {venv}: run `make install`")
    os.environ.setdefault("LISPM_HERMES_VENV", str(venv))
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-hermes.el", script(), [project], clis=("claude",))
    assert_ert_passed(run, expected_tests=1)
    hermes = run.main_requests("chat")
    # Hermes's model was offered LispM's tools through the bridge...
    assert hermes and all("mcp__lispm__ask_agent" in r["tools"] for r in hermes)
    # ...and its ask_agent call succeeded.
    results = [t["text"] for r in hermes for t in r["tool_results"]]
    assert any("asked claude, request R" in t for t in results), results
    # Claude's model was sent the request once, and Hermes the reply once.
    claude = [r["prompt"] for r in run.main_requests("anthropic") if not r["tool_results"]]
    assert len([p for p in claude if p.startswith("[Request R")]) == 1
    prompts = [r["prompt"] for r in hermes if not r["tool_results"]]
    assert len([p for p in prompts if p.startswith("[Reply from claude to request R")]) == 1
