"""End to end: real Claude Code and real OpenClaw, through an OpenClaw Gateway.

The scripted gateway plays both models; the ERT files drive Emacs, this
checks the gateway's log: what each model was offered and sent.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, E2eRun, assert_ert_passed, make_project, require_openclaw, run_ert_e2e

#: Seconds OpenClaw's slow turn streams its answer.
SLOW_TURN = 20


def local_script() -> list[dict[str, Any]]:
    """The models' parts when OpenClaw's Gateway is local (first match wins)."""
    return [
        {"match": "[Reply from openclaw", "steps": [{"say": "OpenClaw says: {prompt}"}]},
        {"match": "[Message from claude", "steps": [{"say": "Still here."}]},
        {"match": "Tell OpenClaw", "steps": [
            {"tool": "lispm.send_message",
             "args": {"to": "openclaw", "text": "Still there after the restart?"}},
            {"say": "Told openclaw."},
        ]},
        # OpenClaw, asked by Claude: it answers with its reply tool.
        {"match": "What is the capital of France?", "steps": [
            {"tool": "lispm.reply", "args": {"request": "{request_id}", "text": "Paris."}},
            {"say": "Replied: {last_tool_result}"},
        ]},
        {"match": "Ask OpenClaw", "steps": [
            {"tool": "lispm.ask_agent",
             "args": {"to": "openclaw", "request": "What is the capital of France?"}},
            {"say": "Asked openclaw ({last_tool_result})."},
        ]},
        # OpenClaw's own user: a turn slow enough for a request to arrive
        # during it, even with Claude's turn slowed by a loaded machine.
        {"match": "Take your time", "steps": [
            {"say": "Finished the long job at last, word by word, slowly.",
             "delay": SLOW_TURN}]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


def remote_script() -> list[dict[str, Any]]:
    """The models' parts when OpenClaw's Gateway is remote: no tools there."""
    return [
        {"match": "[Reply from openclaw", "steps": [{"say": "Noted: {prompt}"}]},
        {"match": "[Message from claude", "steps": [{"say": "Nice to meet you, Claude."}]},
        {"match": "What is the capital of Italy?", "steps": [{"say": "Rome, from far away."}]},
        {"match": "Greet OpenClaw", "steps": [
            {"tool": "lispm.send_message",
             "args": {"to": "openclaw", "text": "Hello from Claude."}},
            {"tool": "lispm.ask_agent",
             "args": {"to": "openclaw", "request": "What is the capital of Italy?"}},
            {"say": "Asked openclaw ({last_tool_result})."},
        ]},
        {"match": "", "steps": [{"say": "Hello! I am ready."}]},
    ]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    return make_project(project)


def _openclaw_requests(run: E2eRun, part: str) -> list[dict[str, Any]]:
    return [r for r in run.main_requests("chat") if part in (r["prompt"] or "")]


@pytest.mark.e2e
def test_openclaw_answers_claude_after_its_run(tmp_path: Path) -> None:
    require_openclaw()
    run = run_ert_e2e(tmp_path, "lispm-e2e-openclaw.el", local_script(), [_project(tmp_path)],
                      clis=("claude",))
    assert_ert_passed(run, expected_tests=1)
    asked = _openclaw_requests(run, "What is the capital of France?")
    slow = _openclaw_requests(run, "Take your time")
    assert asked and slow
    # Only this session was given LispM's tools, directly (not via Tool Search).
    assert any(t.endswith("__reply") and t.startswith("lispm_") for t in asked[0]["tools"])
    # The request was not steered into the slow run: that run's requests
    # never saw it, and it reached the model only after the slow answer.
    assert all("[Request R" not in r["prompt"] for r in slow)
    slow_done = max(r["t"] for r in slow) + SLOW_TURN
    assert min(r["t"] for r in asked) >= slow_done - 1.0, (slow, asked)
    # OpenClaw's model replied with the tool, once.
    results = [t["text"] for r in asked for t in r["tool_results"]]
    assert any("replied to claude" in t for t in results), results


@pytest.mark.e2e
def test_remote_openclaw_answers_by_final_reply(tmp_path: Path) -> None:
    require_openclaw()
    run = run_ert_e2e(tmp_path, "lispm-e2e-openclaw-remote.el", remote_script(),
                      [_project(tmp_path)], clis=("claude",), openclaw_remote=True)
    assert_ert_passed(run, expected_tests=1)
    greeted = _openclaw_requests(run, "[Message from claude]")
    asked = _openclaw_requests(run, "What is the capital of Italy?")
    assert greeted and asked
    # The remote session has none of LispM's tools, and was told to just answer.
    assert not [t for r in greeted + asked for t in r["tools"] if "lispm" in t]
    assert "sent back as the answer" in asked[0]["prompt"]


@pytest.mark.e2e
def test_two_at_once_and_the_users_config_as_it_was(tmp_path: Path) -> None:
    require_openclaw()
    run = run_ert_e2e(tmp_path, "lispm-e2e-openclaw-two.el",
                      [{"match": "", "steps": [{"say": "Hello! I am ready."}]}],
                      [_project(tmp_path)], clis=())
    assert_ert_passed(run, expected_tests=1)
    # The Gateway reloaded the restored file without complaint.
    log = (tmp_path / "run" / "openclaw-gateway.log").read_text(errors="replace")
    assert "config hot reload applied" in log
    for complaint in ("config reload failed", "config reload skipped", "auto-restored",
                      "config restart failed"):
        assert complaint not in log, log[-6000:]
