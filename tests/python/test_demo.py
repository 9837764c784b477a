"""`make demo`'s script, run headless: Emacs is a stand-in that reports
what it found (its folder, the ledger, the gateway, the own agent's model
and sessions) and exits.  Each demo starts clean, in the demo project, and
its gateway ends with it.  The own agent's part of scripts/demo.el runs
for real, in a batch Emacs with the real sidecar, against the demo's
gateway and script (no CLI needed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from lispm_sidecar.testing import demo
from lispm_sidecar.testing.gateway_script import Conversation, decide, parse_script
from tests.conftest import ROOT, emacs_batch_command

STAND_IN = r"""#!/bin/bash
# Stands in for `emacs -nw`: says what the demo set up, then exits.
{
  echo "cwd $PWD"
  echo "project $LISPM_DEMO_PROJECT"
  [ -e "$LISPM_DEMO_LEDGER" ] && echo "ledger present" || echo "ledger absent"
  [ -e "$LISPM_DEMO_PROJECT/left-over.txt" ] && echo "left-over present"
  [ -e "$HOME/.emacs.d/lispm/agents.eld" ] && echo "agents-file present"
  [ -e "$LISPM_RUNTIME_DIR/agents/1-claude-1" ] && echo "runtime present"
  echo "gateway-pid $(cat "$LISPM_DEMO_DIR/gateway.pid")"
  port=$(cat "$LISPM_DEMO_DIR/gateway.port")
  if exec 3<>"/dev/tcp/127.0.0.1/$port"; then echo "gateway up"; fi
  echo "gateway-port $port"
  echo "own-gateway $LISPM_DEMO_GATEWAY"
  echo "sessions $LISPM_DEMO_SESSIONS"
  [ -e "$LISPM_DEMO_SESSIONS" ] && echo "sessions-left present"
} > "$LISPM_DEMO_DIR/stand-in.out"
if [ "$STAND_IN_KILLS_DEMO" = 1 ] && grep -q lispm_sidecar.testing.demo "/proc/$PPID/cmdline"
then kill -KILL "$PPID"; fi
"""


def leave_an_earlier_demo(work: Path) -> None:
    """What an earlier demo leaves in WORK: a ledger, edits, remembered agents."""
    (work / "project").mkdir(parents=True)
    (work / "project" / "left-over.txt").write_text("edited by an agent\n")
    (work / "ledger.sqlite3").write_bytes(b"SQLite format 3\0")
    (work / "home" / ".emacs.d" / "lispm").mkdir(parents=True)
    (work / "home" / ".emacs.d" / "lispm" / "agents.eld").write_text("(:version 1)\n")
    (work / "run" / "agents" / "1-claude-1").mkdir(parents=True)
    (work / "sessions" / ".git").mkdir(parents=True)
    (work / "sessions" / "20260101-000000-project.org").write_text("* Turn 1: old\n")


def run_demo(tmp_path: Path, kills_demo: bool = False) -> tuple[Path, dict[str, str]]:
    """Run scripts/demo.sh with the stand-in Emacs; return its work dir and report."""
    work = tmp_path / "demo"
    leave_an_earlier_demo(work)
    stand_in = tmp_path / "emacs"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    env = dict(os.environ, EMACS=str(stand_in), LISPM_DEMO_DIR=str(work),
               STAND_IN_KILLS_DEMO="1" if kills_demo else "0")
    done = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == (-9 if kills_demo else 0), done.stdout + done.stderr
    report = {}
    for line in (work / "stand-in.out").read_text().splitlines():
        key, _, value = line.partition(" ")
        report[key] = value
    return work, report


def gone(pid: int, seconds: float) -> bool:
    """Wait up to SECONDS for process PID to end; return whether it did."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_the_demo_starts_clean_in_its_project_and_stops_its_gateway(tmp_path: Path) -> None:
    work, report = run_demo(tmp_path)
    project = work / "project"
    assert report["cwd"] == str(project)
    assert report["project"] == str(project)
    assert report["ledger"] == "absent"
    assert {"left-over", "agents-file", "runtime", "sessions-left"}.isdisjoint(report), report
    assert report["gateway"] == "up"
    # The own agent's model is the demo's gateway; its sessions start clean.
    assert report["own-gateway"] == f"http://127.0.0.1:{report['gateway-port']}"
    assert report["sessions"] == str(work / "sessions")
    assert (project / "notes.el").exists()
    assert gone(int(report["gateway-pid"]), 0)
    assert not (work / "gateway.pid").exists()


def test_the_gateway_ends_even_if_the_demo_is_killed(tmp_path: Path) -> None:
    _, report = run_demo(tmp_path, kills_demo=True)
    assert report["gateway"] == "up"
    assert gone(int(report["gateway-pid"]), 10)


def rule_for(prompt: str, api: str) -> str:
    """Return the `match` of the demo script's rule that answers PROMPT in API."""
    rules = parse_script(demo.demo_script(Path("/demo/project")))
    decision = decide(Conversation(prompt), rules, api)
    assert decision.source == "script", decision
    assert decision.match is not None
    return decision.match


def test_the_demo_script_answers_each_agent_with_its_own_rules() -> None:
    # The own agent speaks Chat Completions; Claude Anthropic's; Codex Responses.
    assert rule_for(demo.OWN_PROMPT, "chat") == demo.OWN_PROMPT
    assert rule_for("list agents", "chat") == "list agents"
    assert rule_for("hello", "chat") == ""
    rules = demo.demo_script(Path("/demo/project"))
    own = [rule for rule in rules if rule.get("api") == "chat"]
    assert [rule["match"] for rule in own] == [demo.OWN_PROMPT, "list agents",
                                               "get a reviewer", demo.REVIEWER_REQUEST,
                                               "which functions", ""]
    assert own[1]["steps"][0]["tool"] == "eval_elisp"  # type: ignore[index]
    # The CLIs' rules still answer them, the own agent's never do.
    for api in ("anthropic", "responses"):
        assert rule_for("list agents", api) == "list agents"
        assert rule_for("hello", api) == ""
        assert rule_for(demo.OWN_PROMPT, api) == ""
    assert rule_for("Get Codex's review of notes-parse-header in notes.el, please.",
                    "anthropic") == "Get Codex's review"
    assert rule_for("[Request R1 from claude] Please review notes-parse-header in x",
                    "responses") == "Please review notes-parse-header"
    assert rule_for("[Reply from codex to request R1] It crashes.",
                    "anthropic") == "[Reply from codex to request"
    list_rule = next(rule for rule in rules if rule["match"] == "list agents"
                     and "api" not in rule)
    assert list_rule["steps"][0]["tool"] == "lispm.list_agents"  # type: ignore[index]


#: Plays the own agent's part as scripts/demo.el does, answers its
#: approvals, then free play; prints a JSON report.
OWN_AGENT_DRIVER = r"""
(defun demo-test-wait (predicate what)
  "Wait up to 60 s for PREDICATE; signal naming WHAT if it never holds."
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate) (error "Timed out waiting for %s" what))))

(defun demo-test-turn-over (agent)
  "Wait until AGENT's turn is over; return its state's name."
  (demo-test-wait (lambda () (not (and (lispm-own-agent-turn agent)
                                       (lispm-turn-live-p (lispm-own-agent-turn agent)))))
                  "the turn's end")
  (symbol-name (lispm-turn-state (cdr (car (lispm-own-agent-turns agent))))))

(defun demo-test-approve (report key)
  "Wait for an approval, note its kind under KEY in REPORT, allow it."
  (demo-test-wait (lambda () (> (lispm-approvals-count) 0)) "an approval")
  (let ((approval (car (lispm-approvals-pending))))
    (push (cons key (symbol-name (lispm-approval-kind approval))) (car report))
    (lispm-approvals-allow approval)))

(let* ((agent (lispm-demo-start-own-agent (getenv "LISPM_DEMO_PROJECT")))
       (report (list nil))
       (buffer (lispm-own-agent-buffer agent)))
  (push (cons 'model (lispm-own-agent-model agent)) (car report))
  (push (cons 'sessions lispm-sessions-directory) (car report))
  (lispm-demo-play-own-agent agent)
  (demo-test-wait (lambda () (> (lispm-approvals-count) 0)) "the edit's approval")
  ;; Let the demo's poll see the approval and say what to press.
  (demo-test-wait (lambda () (with-current-buffer "*Messages*"
                               (string-search "LispM demo:" (buffer-string))))
                  "the demo's message")
  (push (cons 'todo (with-current-buffer buffer
                      (and (string-match "^\*\*\*\* TODO .*" (buffer-string))
                           (match-string 0 (buffer-string)))))
        (car report))
  (push (cons 'diff (with-current-buffer lispm-approvals-buffer-name (buffer-string)))
        (car report))
  (demo-test-approve report 'edit-approval)
  (push (cons 'fix-state (demo-test-turn-over agent)) (car report))
  (lispm-own-agent-send agent "list agents")
  (demo-test-approve report 'list-approval)
  (push (cons 'list-state (demo-test-turn-over agent)) (car report))
  (lispm-own-agent-send agent "get a reviewer")
  (push (cons 'reviewer-state (demo-test-turn-over agent)) (car report))
  (demo-test-wait (lambda () (null (lispm-agent-get "reviewer"))) "the reviewer to retire")
  (push (cons 'reviewer-gone (null (lispm-agent-get "reviewer"))) (car report))
  (lispm-own-agent-send agent "which functions")
  (push (cons 'functions-state (demo-test-turn-over agent)) (car report))
  (lispm-own-agent-send agent "What can I try?")
  (push (cons 'free-state (demo-test-turn-over agent)) (car report))
  (push (cons 'messages (with-current-buffer "*Messages*" (buffer-string))) (car report))
  (push (cons 'buffer (with-current-buffer buffer (buffer-string))) (car report))
  (lispm-sessions-wait-for-commits 20)
  (princ (json-encode (car report))))
"""


def test_the_own_agent_plays_its_part_against_the_demo_gateway(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    project = work / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (work / "home").mkdir()
    driver = tmp_path / "driver.el"
    driver.write_text(OWN_AGENT_DRIVER)
    gateway, url = demo.start_gateway(work, project)
    try:
        env = dict(os.environ, HOME=str(work / "home"), LISPM_DEMO_GATEWAY=url,
                   LISPM_DEMO_SESSIONS=str(work / "sessions"),
                   LISPM_DEMO_PROJECT=str(project),
                   LISPM_DEMO_LEDGER=str(work / "ledger.sqlite3"),
                   PYTHONPATH=str(ROOT / "python"))
        done = subprocess.run(
            emacs_batch_command("-l", str(ROOT / "scripts" / "demo.el"), "-l", str(driver)),
            cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False)
    finally:
        demo.stop_gateway(gateway)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["model"] == "demo"
    assert report["sessions"] == str(work / "sessions") + "/"
    # The edit waited for the user: a TODO in the agent's buffer, the diff
    # in the approvals buffer, and the demo said what to press.
    assert report["edit-approval"] == "edit"
    assert report["todo"] == "**** TODO edit_file notes.el"
    assert "+    (and colon" in report["diff"]
    assert "emacs asks to edit notes.el" in report["messages"]
    assert "Press a to allow, d to deny" in report["messages"]
    assert report["fix-state"] == "done"
    # Ask first, read, then act: the calls, in order, as the gateway saw them.
    log = [json.loads(line) for line in (work / "gateway.jsonl").read_text().splitlines()]
    calls = [entry["answer"].get("tool") for entry in log
             if entry["kind"] == "main" and demo.OWN_PROMPT in entry["prompt"]]
    assert calls == ["describe_function", "read_file", "edit_file", None]
    assert {entry["api"] for entry in log if entry["kind"] == "main"} == {"chat"}
    assert demo.OWN_FIX_NEW in (project / "notes.el").read_text()
    # Free play: the agents, through eval_elisp (approved), then the hints.
    assert report["list-approval"] == "eval"
    assert report["list-state"] == "done"
    assert 'What Emacs answered: "emacs (lispm, role default)"' in report["buffer"]
    # A reviewer helper read notes.el and replied into the waiting call, then retired.
    assert report["reviewer-state"] == "done"
    assert f"The reviewer says: [Reply from reviewer to request R1]\n{demo.REVIEW}" \
        in report["buffer"]
    assert report["reviewer-gone"] is True
    # One run_lisp program read the project's .el files, no approval asked.
    assert report["functions-state"] == "done"
    assert ('The functions: Value: ("notes-parse-header (notes.el)"' in report["buffer"])
    # The session shows the program as Lisp, and gives the model back its
    # arguments byte for byte: in the turn, and read from the document after.
    assert (f"#+begin_src emacs-lisp -i :eval no\n{demo.FUNCTIONS_PROGRAM}\n#+end_src\n"
            in report["buffer"])
    sent = [call["function"]["arguments"]
            for entry in log if entry["kind"] == "main"
            for message in json.loads(Path(entry["body_file"]).read_text())["messages"]
            for call in message.get("tool_calls") or []
            if call["function"]["name"] == "run_lisp"]
    assert len(sent) >= 2
    assert set(sent) == {json.dumps({"program": demo.FUNCTIONS_PROGRAM},
                                    separators=(",", ":"), ensure_ascii=False)}
    assert report["free-state"] == "done"
    assert "I am LispM's own agent" in report["buffer"]
    # The session went to the demo's own sessions folder, in its git.
    assert list((work / "sessions").glob("*.org"))
    assert (work / "sessions" / ".git").is_dir()
