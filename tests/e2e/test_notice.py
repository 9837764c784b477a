"""End to end: real Claude Code's approval prompt shows as "needs you", offline.

The ERT file drives Emacs: it measures the time from the prompt appearing
on Claude's screen to the agent list's mark (under a second), declines,
and sees the mark go; this checks that nothing was approved.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, make_project, run_ert_e2e

SCRIPT: list[dict[str, Any]] = [
    # Claude's shell tool, which asks the user first.
    {"match": "Touch the flag file", "steps": [
        {"shell": "touch approved-flag.txt", "escalate": True,
         "justification": "the user asked for it"},
        {"say": "Done: {last_tool_result}"},
    ]},
    {"match": "", "steps": [{"say": "Hello! I am ready."}]},
]


@pytest.mark.e2e
def test_claude_approval_prompt_needs_you(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-notice.el", SCRIPT, [project], clis=("claude",))
    assert_ert_passed(run, expected_tests=1)
    assert "the list marked Claude" in run.output
    # Declined: the command never ran.
    assert not (project / "approved-flag.txt").exists()
    # The prompt reached the model as typed.
    assert any(r["prompt"].startswith("Touch the flag file")
               for r in run.main_requests("anthropic"))
