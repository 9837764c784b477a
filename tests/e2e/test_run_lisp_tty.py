"""End to end in a terminal Emacs: the user's C-g stops a run_lisp program of
LispM's own agent, and Emacs answers a key while the program computes.

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
    assert_ert_passed(run, expected_tests=2)
    answered = re.search(r"F5 answered in ([0-9.]+) ms while the program ran.*", run.output)
    stopped = re.search(r"C-g stopped the program and its turn in ([0-9.]+) ms", run.output)
    assert answered and stopped, run.output[-6000:]
    print(f"\n{answered.group(0)}\n{stopped.group(0)}")
