"""End to end in a terminal Emacs: the user's C-g stops a run_lisp program of
LispM's own agent, and Emacs answers a key while the program computes, hostile
programs included.

`inside.py --tty` runs `emacs -nw` on a pseudo-terminal and types the keys
lispm-e2e-tty.el asks for; the scripted gateway is the model.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, commit_project, make_project, run_ert_e2e

#: A program that never ends by itself (its fuel is a billion steps).
LOOP = "(let ((n 0)) (while t (setq n (1+ n))))"
#: A program that would sleep forever, swallowing every C-g: refused.
SLEEPING = "(while t (condition-case nil (sleep-for 1) (t nil)))"
#: Programs that block their own Emacs or fill its memory, each ending.
HOSTILE = [
    "(push 1 (eval-when-compile (sleep-for 2) nil))",
    "(let ((s \"xxxxxxxxxxxxxxxx\")) (dotimes (_ 22) (setq s (concat s s))) (length s))",
    "(format \"%1$30000000d\" 1)",
    "(string-distance (make-string 3000 ?a) (make-string 3000 ?b))",
]


def run_lisp(program: str) -> dict[str, Any]:
    """A step calling the own agent's run_lisp with PROGRAM."""
    return {"tool": "run_lisp", "args": {"program": program}}


def script() -> list[dict[str, Any]]:
    """The model's part: one rule per test of lispm-e2e-tty.el."""
    return [
        {"match": "Count forever in Lisp", "steps": [
            run_lisp(LOOP), {"say": "It ended: {last_tool_result}"}]},
        {"match": "Sleep in a handler", "steps": [
            run_lisp(SLEEPING), {"say": "Understood: {last_tool_result}"}]},
        {"match": "Hostile programs", "steps": [
            *[run_lisp(program) for program in HOSTILE], {"say": "Done."}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]


@pytest.mark.e2e
def test_run_lisp_in_a_terminal(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project)
    commit_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-tty.el", script(), [project], timeout=300,
                      clis=(), tty=True)
    assert_ert_passed(run, expected_tests=3)
    answered = re.search(r"F5 answered in ([0-9.]+) ms while the program ran.*", run.output)
    stopped = re.search(r"C-g stopped the program and its turn in ([0-9.]+) ms", run.output)
    hostile = re.search(r"[0-9]+ keys answered while hostile programs ran.*", run.output)
    assert answered and stopped and hostile, run.output[-6000:]
    print(f"\n{answered.group(0)}\n{stopped.group(0)}\n{hostile.group(0)}")
