"""End to end: Emacs as the real Claude Code and Codex see it, offline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, make_project, run_ert_e2e

OLD = """  (let ((colon (string-search ":" line)))
    (cons (string-trim (substring line 0 colon))
          (string-trim (substring line (1+ colon))))))"""
NEW = """  (let ((colon (string-search ":" line)))
    (when colon
      (cons (string-trim (substring line 0 colon))
            (string-trim (substring line (1+ colon)))))))"""


def script(project: Path, outside: Path) -> list[dict[str, Any]]:
    notes = str(project / "notes.el")
    edit = {"tool": "Edit", "args": {"file_path": notes, "old_string": OLD, "new_string": NEW}}
    return [
        {"match": "What did I select?", "steps": [{"say": "You selected some lines."}]},
        {"match": "Fix the header parser", "steps": [
            {"tool": "Read", "args": {"file_path": notes}}, edit, {"say": "Fixed."}]},
        {"match": "Fix it once more", "steps": [
            {"tool": "Read", "args": {"file_path": notes}}, edit, {"say": "Tried again."}]},
        {"match": "Look at what I have open", "steps": [
            {"tool": "lispm.get_selection"},
            {"tool": "lispm.list_open_files"},
            {"tool": "lispm.read_buffer", "args": {"buffer": str(outside / "secret.txt")}},
            {"say": "Done looking."}]},
        {"match": "", "steps": [{"say": "Hello."}]},
    ]


@pytest.mark.e2e
def test_emacs_as_the_agents_see_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    run = run_ert_e2e(tmp_path, "lispm-e2e-ide.el", script(project.resolve(), outside.resolve()),
                      [project])
    assert_ert_passed(run, expected_tests=2)
    # The rejected edit never reached the disk; the accepted one was undone by the test.
    assert "(when colon" not in (project / "notes.el").read_text()
