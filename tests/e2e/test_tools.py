"""End to end: real Codex and Claude Code call LispM's tools under the user's policy."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, make_project, run_ert_e2e

OLD = """    (cons (string-trim (substring line 0 colon))
          (string-trim (substring line (1+ colon))))))"""
NEW = """    (when colon
      (cons (string-trim (substring line 0 colon))
            (string-trim (substring line (1+ colon)))))))"""
NOTES = (ROOT / "tests" / "fixtures" / "demo-project" / "notes.el").read_text()
#: Two changes far apart: two hunks, of which the user takes the second only.
TWO_HUNKS = NOTES.replace("A tiny note-file parser", "A small note-file parser").replace(
    OLD, NEW)
WRITE_TWO = {"tool": "lispm.call_tool",
             "args": {"name": "write_file", "args": {"path": "notes.el", "content": TWO_HUNKS}}}
EDIT = {"tool": "lispm.call_tool",
        "args": {"name": "edit_file", "args": {"path": "notes.el", "old": OLD, "new": NEW}}}


def script() -> list[dict[str, Any]]:
    greet = {"tool": "lispm.call_tool", "args": {"name": "greet", "args": {"name": "Ada"}}}
    return [
        {"match": "Search the tools", "steps": [
            {"tool": "lispm.search_tools", "args": {"query": "edit file"}},
            EDIT, {"say": "Edited: {last_tool_result}"}]},
        {"match": "Edit the parser once more", "steps": [EDIT, {"say": "{last_tool_result}"}]},
        {"match": "Run the flag command", "steps": [
            {"tool": "lispm.call_tool",
             "args": {"name": "run_shell", "args": {"command": "touch ran-flag.txt"}}},
            {"say": "{last_tool_result}"}]},
        {"match": "Make both changes", "steps": [WRITE_TWO, {"say": "{last_tool_result}"}]},
        {"match": "Try to escape", "steps": [
            {"tool": "lispm.call_tool", "args": {"name": "run_shell", "args": {
                "command": "touch inside-ran.txt; touch /usr/local/escaped.txt; "
                           "env | grep -c E2E_SECRET_TOKEN; "
                           "tr '\\0' '\\n' < /proc/1/environ | grep -c E2E_SECRET_TOKEN; exit 3"}}},
            {"say": "{last_tool_result}"}]},
        {"match": "Learn the greet skill", "steps": [
            {"tool": "lispm.skill", "args": {"name": "greet"}}, greet,
            {"say": "{last_tool_result}"}]},
        {"match": "", "steps": [{"say": "Hello."}]},
    ]


@pytest.mark.e2e
def test_agents_call_lispm_tools_under_policy(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    skills = tmp_path / "skill-project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "skill-project", skills)
    make_project(skills)
    run = run_ert_e2e(tmp_path, "lispm-e2e-tools.el", script(), [project, skills])
    assert_ert_passed(run, expected_tests=5)
    assert not Path("/usr/local/escaped.txt").exists()
    assert not (project / "ran-flag.txt").exists()
    assert "(when colon" not in (project / "notes.el").read_text()
