"""End to end: the user's MCP servers, the own agent's tools; the scripted gateway its model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, commit_project, make_project, run_ert_e2e

FORTY_ECHOES = """(let ((echoes 0))
  (dotimes (i 40 echoes)
    (when (string-search (format "n%d" i) (mcp--everything--echo (format "n%d" i)))
      (cl-incf echoes))))"""


def script(project: Path) -> list[dict[str, Any]]:
    """The model's part: one rule per scenario of lispm-e2e-mcp.el."""
    return [
        {"match": "Write a file through MCP", "steps": [
            {"tool": "mcp__files__write_file", "args": {
                "path": str(project / "from-mcp.txt"), "content": "written by the MCP server"}},
            {"say": "It said: {last_tool_result}"}]},
        {"match": "Read notes.el through MCP and tell the time", "steps": [
            {"tool": "mcp__files__read_text_file", "args": {"path": str(project / "notes.el")}},
            {"tool": "mcp__time__get_current_time", "args": {"timezone": "UTC"}},
            {"say": "Read, and the time is known."}]},
        {"match": "Echo forty times in one program", "steps": [
            {"tool": "run_lisp", "args": {"program": FORTY_ECHOES}},
            {"say": "Echoed {last_tool_result} times."}]},
        {"match": "Find the echo tool and use it", "steps": [
            {"tool": "search_tools", "args": {"query": "echo"}},
            {"tool": "mcp__everything__echo", "args": {"message": "found"}},
            {"say": "Done: {last_tool_result}"}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]


@pytest.mark.e2e
def test_mcp_servers_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project, {"todo.txt": "one\n"})
    commit_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-mcp.el", script(project), [project], clis=())
    assert_ert_passed(run, expected_tests=6)
