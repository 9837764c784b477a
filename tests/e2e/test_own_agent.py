"""End to end: LispM's own agent in a real Emacs, the scripted gateway as its model."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, assert_ert_passed, commit_project, make_project, run_ert_e2e

TODO = "one\ntwo\nthree\n"
FIBONACCI = ("(defun lispm-e2e-fibonacci (n) (if (< n 2) n"
             " (+ (lispm-e2e-fibonacci (- n 1)) (lispm-e2e-fibonacci (- n 2)))))")
SHOUT = ('(lispm-define-tool shout (agent (text string "The text to shout."))'
         ' "Return TEXT in capitals." :kind (quote read) (ignore agent) (upcase text))')

GREETER = """#+title: Greeter
#+description: Greet people by name.

* How to greet
Call the =e2e_greet= tool with the person's name.

#+begin_src emacs-lisp
(lispm-define-tool e2e-greet (agent (who string "Whom to greet."))
  "Greet WHO by name." :kind 'read (ignore agent) (format "Hello, %s, from a skill!" who))
#+end_src
"""


NOTES = (ROOT / "tests" / "fixtures" / "demo-project" / "notes.el").read_text()
#: notes.el changed in two places far apart: two hunks.
TWO_HUNKS = NOTES.replace("A tiny note-file parser", "A small note-file parser").replace(
    '(provide \'notes)', ';; HUNK-TWO\n(provide \'notes)')


# The port of tests/fixtures/web-server.py in lispm-e2e-own-fetches-a-page:
# the run has a network namespace of its own, so no other server has it.
WEB_PORT = 18734


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    """A step calling the own agent's edit_file."""
    return {"tool": "edit_file", "args": {"path": path, "old": old, "new": new}}


def script() -> list[dict[str, Any]]:
    """The model's part: one rule per scenario of lispm-e2e-own-agent.el."""
    story = "Once upon a time. " * 1200
    return [
        {"match": "Conversation to summarise", "steps": [
            {"say": "Summary: the user set a signing rule and heard a long story."}]},
        {"match": "Read notes.el please", "steps": [
            {"tool": "read_file", "args": {"path": "notes.el"}},
            {"say": "Read: {last_tool_result}"}]},
        {"match": "Make two edits to todo.txt", "steps": [
            edit("todo.txt", "one\n", "one FIRST\n"),
            edit("todo.txt", "two\n", "two SECOND\n"),
            {"say": "Both edits are made."}]},
        {"match": "Change two files and make one", "steps": [
            edit("todo.txt", "three\n", "three AGENT-LINE\n"),
            edit("notes.el", ";;; Code:\n", ";;; Code:\n;; AGENT-NOTE\n"),
            {"tool": "write_file", "args": {"path": "new-file.txt", "content": "made\n"}},
            {"say": "Changed two files and made one."}]},
        {"match": "Rewrite notes.el in two places", "steps": [
            {"tool": "write_file", "args": {"path": "notes.el", "content": TWO_HUNKS}},
            {"say": "Rewritten: {last_tool_result}"}]},
        {"match": "Edit todo.txt while I wait", "steps": [
            edit("todo.txt", "one\n", "one NEVER\n"),
            {"say": "Done: {last_tool_result}"}]},
        {"match": "Plan the parser fix", "steps": [
            {"tool": "plan", "args": {"steps": ["[x] Read the parser", "[>] Write the test",
                                                "Fix the colon case"]}},
            {"say": "Planned: {last_tool_result}"}]},
        {"match": "Edit todo.txt if allowed", "steps": [
            edit("todo.txt", "two\n", "two DENIED\n"),
            {"say": "Understood: {last_tool_result}"}]},
        {"match": "Are you overloaded", "api": "anthropic", "steps": [
            {"status": 529, "body": {"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"}}}]},
        {"match": "Are you overloaded", "api": "chat", "steps": [
            {"say": "The backup answers."}]},
        {"match": "Edit then get cut", "steps": [
            edit("todo.txt", "one\n", "one KEPT-EDIT\n"),
            {"say": "This answer will not arrive whole, " * 20, "cut": 2}]},
        {"match": "My name is Ada.", "steps": [{"say": "Hello, Ada."}]},
        {"match": "Remember the number 42.", "steps": [{"say": "I will remember 42."}]},
        {"match": "Thank you.", "steps": [{"say": "You are welcome."}]},
        {"match": "What is my name?", "steps": [{"say": "Your name is Ada."}]},
        {"match": "Rule: always sign", "steps": [{"say": "Understood. -- Ada"}]},
        {"match": "Tell me a long story", "steps": [{"say": story}]},
        {"match": "Tell me another story", "steps": [{"say": "A short one. -- Ada"}]},
        {"match": "After the summary", "steps": [{"say": "Still here. -- Ada"}]},
        {"match": "Stream slowly now", "steps": [
            {"say": "slowly streaming " + "word " * 200, "delay": 20}]},
        {"match": "Call things badly", "steps": [
            {"raw": True, "calls": [{"tool": "no_such_tool", "args": {}},
                                    {"tool": "read_file", "args_raw": "{\"path\": notes.el"}]},
            {"say": "I see."}]},
        # Before the empty reply's rule: after an aborted empty turn, the
        # next request's user text follows that turn's (Anthropic merges them).
        {"match": "Give a huge answer", "steps": [{"long": 10_000_000}]},
        {"match": "Say nothing at all", "steps": [{"say": ""}]},
        {"match": "Read forever", "steps": [
            {"tool": "read_file", "args": {"path": "notes.el"}} for _ in range(10)]},
        {"match": "Keep calling the missing tool", "steps": [
            {"tool": "nope", "raw": True, "args": {}} for _ in range(5)]},
        {"match": "Edit with a typo", "steps": [
            edit("todo.txt", "tow\n", "two FIXED\n"), {"say": "Edited."}]},
        {"match": "What is the 30th Fibonacci number?", "steps": [
            {"tool": "eval_elisp", "args": {"form": FIBONACCI}},
            {"tool": "eval_elisp", "args": {"form": "(lispm-e2e-fibonacci 30)"}},
            {"say": "The 30th Fibonacci number is {last_tool_result}."}]},
        {"match": "Make yourself a shout tool", "steps": [
            {"tool": "eval_elisp", "args": {"form": SHOUT}},
            {"tool": "shout", "args": {"text": "hello from lisp"}},
            {"say": "It shouts: {last_tool_result}"}]},
        {"match": "Write yourself a skill that greets", "steps": [
            {"tool": "write_skill", "args": {"name": "greeter", "text": GREETER}},
            {"tool": "skill", "args": {"name": "greeter"}},
            {"say": "Written: {last_tool_result}"}]},
        {"match": "Greet Ada with your greeter skill", "steps": [
            {"tool": "skill", "args": {"name": "greeter"}},
            {"tool": "e2e_greet", "args": {"who": "Ada"}},
            {"say": "{last_tool_result}"}]},
        {"match": "Fetch the local page", "steps": [
            {"tool": "fetch_url", "args": {"url": f"http://127.0.0.1:{WEB_PORT}/page"}},
            {"say": "Fetched: {last_tool_result}"}]},
        {"match": "", "steps": [{"say": "Noted."}]},
    ]


@pytest.mark.e2e
def test_own_agent_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    make_project(project, {"todo.txt": TODO})
    commit_project(project)
    run = run_ert_e2e(tmp_path, "lispm-e2e-own-agent.el", script(), [project], clis=())
    assert_ert_passed(run, expected_tests=27)
    # The project's own git saw no commit and no ref from LispM.
    log = subprocess.run(["git", "-C", str(project), "log", "--format=%s"],
                         capture_output=True, text=True, check=True).stdout
    assert log.split() == ["start"]
    assert (tmp_path / "sessions" / ".git").is_dir()
