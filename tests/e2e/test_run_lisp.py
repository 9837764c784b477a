"""End to end: run_lisp programs of LispM's own agent, the scripted gateway as its model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, commit_project, make_project, run_ert_e2e

TODO = "one\ntwo\nthree\n"
NOTES = 40

COUNT_PROGRAM = """(let ((count 0))
  (dolist (file (split-string (list-files "notes" "*.org") "\\n" t) count)
    (when (string-search "TODO" (read-file file))
      (cl-incf count))))"""

EDIT_PROGRAM = """(edit-file "todo.txt" :old "one\\n" :new "one PROGRAM-EDIT\\n")
(condition-case err
    (progn (edit-file "notes.el" :old ";;; Code:\\n" :new ";;; Code:\\n;; PROGRAM-NOTE\\n")
           "both files edited")
  (lispm-policy-denied (format "todo.txt edited; notes.el denied: %s" (nth 4 err))))"""


def note(number: int) -> str:
    """The text of notes/note-NN.org: every third note has a TODO."""
    state = "TODO" if number % 3 == 0 else "DONE"
    return f"#+title: Note {number}\n\n* {state} Item {number}\nSome text.\n"


def notes_with_todo() -> int:
    """How many of the notes have a TODO."""
    return sum("TODO" in note(n) for n in range(1, NOTES + 1))


def run_lisp(program: str) -> dict[str, Any]:
    """A step calling run_lisp with PROGRAM."""
    return {"tool": "run_lisp", "args": {"program": program}}


def refused_programs(x: Path) -> list[str]:
    """The programs of issue 12 §4.4; those that would delete a file name X."""
    return ["(symbol-value 'user-mail-address)",
            "(setq lispm-policy-roles nil)",
            '(shell-command "id")',
            f"(funcall 'delete-file \"{x}\")",
            f'#.(delete-file "{x}")',
            "(defmacro m () 1)",
            "(eval '(+ 1 2))"]


def script(project: Path) -> list[dict[str, Any]]:
    """The model's part: one rule per scenario of lispm-e2e-run-lisp.el."""
    return [
        {"match": "Count the TODO notes in one program", "steps": [
            run_lisp(COUNT_PROGRAM),
            {"say": "Notes with a TODO: {last_tool_result}"}]},
        {"match": "Count the TODO notes file by file", "steps": [
            *({"tool": "read_file", "args": {"path": f"notes/note-{n:02d}.org"}}
              for n in range(1, NOTES + 1)),
            {"say": f"Notes with a TODO: {notes_with_todo()}"}]},
        {"match": "Edit both files in one program", "steps": [
            run_lisp(EDIT_PROGRAM), {"say": "The program says: {last_tool_result}"}]},
        {"match": "Try the forbidden programs", "steps": [
            {"calls": [{"tool": "run_lisp", "args": {"program": p}}
                       for p in refused_programs(project / "x")]},
            {"say": "All refused."}]},
        {"match": "Loop forever in Lisp", "steps": [
            run_lisp("(while t)"), {"say": "It ended: {last_tool_result}"}]},
        {"match": "Recurse forever in Lisp", "steps": [
            run_lisp("(cl-labels ((f (n) (f (1+ n)))) (f 0))"),
            {"say": "It ended: {last_tool_result}"}]},
        {"match": "Sleep in a loop", "steps": [
            {"calls": [
                {"tool": "run_lisp",
                 "args": {"program": "(while t (condition-case nil (sleep-for 1) (t nil)))"}},
                {"tool": "run_lisp",
                 "args": {"program": "(while t (condition-case nil (car nil) (t nil)))"}}]},
            {"say": "Both refused."}]},
        {"match": "Count to a billion", "steps": [
            run_lisp("(let ((n 0)) (while t (setq n (1+ n))))"),
            {"say": "It ended: {last_tool_result}"}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]


@pytest.mark.e2e
def test_run_lisp_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    # The demo project has one file: the 40 that one program reads are made here.
    make_project(project, {"todo.txt": TODO})
    (project / "notes").mkdir()
    for number in range(1, NOTES + 1):
        (project / "notes" / f"note-{number:02d}.org").write_text(note(number))
    commit_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-run-lisp.el", script(project), [project], clis=())
    assert_ert_passed(run, expected_tests=8)
