"""`make demo`: LispM with real Claude Code and Codex on the scripted gateway.

Runs inside a loopback-only network namespace (see scripts/demo.sh): it
clears what an earlier demo left (project, HOME, ledger, runtime files,
the own agent's sessions), starts the gateway with the demo script, seeds
a private HOME so the CLIs start straight at their composers, and runs
`emacs -nw` in the demo project, showing LispM's agent list, both
terminals and LispM's own agent, whose model is the same gateway
(LISPM_DEMO_GATEWAY) and whose sessions go to LISPM_DEMO_SESSIONS.  When
Emacs exits (or this process is told to end), the gateway is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import orjson

from .sandbox import seed_home

ROOT = Path(__file__).resolve().parents[3]

ANSWER = (
    "notes-parse-header calls (substring line 0 colon) with colon nil when the line has no "
    "colon, so it signals wrong-type-argument. Check the colon first, and return nil (or "
    "signal a clear error) for a line without one."
)


#: What the demo asks LispM's own agent (scripts/demo.el's `lispm-demo-own-prompt').
OWN_PROMPT = "Fix notes-parse-header as Codex suggested."

#: The own agent's fix: `edit_file`'s old and new text in notes.el.
OWN_FIX_OLD = (
    '  "Parse LINE, a header such as \\"Title: Groceries\\", into (KEY . VALUE)."\n'
    '  (let ((colon (string-search ":" line)))\n'
    "    (cons (string-trim (substring line 0 colon))\n"
    "          (string-trim (substring line (1+ colon))))))\n"
)
OWN_FIX_NEW = (
    '  "Parse LINE, a header such as \\"Title: Groceries\\", into (KEY . VALUE).\n'
    'Return nil if LINE has no colon."\n'
    '  (let ((colon (string-search ":" line)))\n'
    "    (and colon\n"
    "         (cons (string-trim (substring line 0 colon))\n"
    "               (string-trim (substring line (1+ colon)))))))\n"
)

#: The own agent's way to list the agents: its eval_elisp, which the policy asks about.
LIST_AGENTS_FORM = (
    "(mapconcat (lambda (agent) (format \"%s (%s, role %s)\" (lispm-actor-name agent) "
    "(lispm-actor-kind agent) (lispm-actor-role agent))) (lispm-agents) \"; \")"
)

#: The own agent's way to find the functions: one run_lisp program, every file one call.
FUNCTIONS_PROGRAM = """(let ((names nil))
  (dolist (file (split-string (list-files nil "*.el") "\\n" t) (nreverse names))
    (let ((text (read-file file)) (start 0))
      (while (string-match "^(defun \\\\([^ ]+\\\\)" text start)
        (push (format "%s (%s)" (match-string 1 text) file) names)
        (setq start (match-end 0))))))"""


#: What the own agent asks of a reviewer, and what the reviewer answers.
REVIEWER_REQUEST = "As LispM's reviewer, look over notes-parse-header in notes.el."
REVIEW = ("notes-parse-header reads the header's name and value; check that it returns "
          "nil for a line without a colon, and add a test for that line.")


def own_agent_script() -> list[dict[str, object]]:
    """The own agent's rules: it speaks Chat Completions, which no CLI of the
    demo does (Claude speaks Anthropic's dialect, Codex Responses), so these
    rules answer it alone, whatever the prompt."""
    return [
        {"match": OWN_PROMPT, "api": "chat", "steps": [
            {"text": "First, what string-search returns when there is no match.",
             "tool": "describe_function", "args": {"name": "string-search"}},
            {"text": "Now the file.", "tool": "read_file", "args": {"path": "notes.el"}},
            {"text": "string-search gives nil for a line without a colon, and (1+ nil) "
                     "signals. I check the colon first, as Codex suggested.",
             "tool": "edit_file",
             "args": {"path": "notes.el", "old": OWN_FIX_OLD, "new": OWN_FIX_NEW}},
            {"say": "The edit: {last_tool_result}\n\nIf it went in, notes-parse-header "
                    "now returns nil for a line without a colon: undo it in notes.el's "
                    "buffer, or revert the whole turn with C-c C-r on its heading here."},
        ]},
        {"match": "list agents", "api": "chat", "steps": [
            {"text": "I ask Emacs itself, by evaluating Lisp (which you approve first).",
             "tool": "eval_elisp", "args": {"form": LIST_AGENTS_FORM}},
            {"say": "What Emacs answered: {last_tool_result}"},
        ]},
        {"match": "get a reviewer", "api": "chat", "steps": [
            {"text": "I ask the role reviewer: LispM starts a helper of it, which can "
                     "read but never edit, and my call waits for its reply.",
             "tool": "ask_agent",
             "args": {"role": "reviewer", "request": REVIEWER_REQUEST}},
            {"say": "The reviewer says: {last_tool_result}"},
        ]},
        {"match": REVIEWER_REQUEST, "api": "chat", "steps": [
            {"tool": "read_file", "args": {"path": "notes.el"}},
            {"tool": "reply", "args": {"request": "{request_id}", "text": REVIEW}},
            {"say": "I replied; my work is done."},
        ]},
        {"match": "which functions", "api": "chat", "steps": [
            {"text": "One Lisp program reads every .el file and collects its defuns: one "
                     "step, however many files; each read passes your policy.",
             "tool": "run_lisp", "args": {"program": FUNCTIONS_PROGRAM}},
            {"say": "The functions: {last_tool_result}"},
        ]},
        {"match": "", "api": "chat", "steps": [{
            "say": "I am LispM's own agent, on the demo's scripted stand-in model. Type "
                   f"at the end of this buffer and send with C-c C-c: \"{OWN_PROMPT}\" "
                   "plays my part again (undo the fix first); \"list agents\" asks Emacs "
                   "for its agents, by evaluating Lisp you approve in *LispM approvals* "
                   "(C-x o there, then a to allow or d to deny); \"which functions\" finds the "
                   "project's functions with one run_lisp program; \"get a reviewer\" "
                   "asks a LispM reviewer, a helper that reads notes.el, replies and "
                   "retires."}]},
    ]


def demo_script(project: Path) -> list[dict[str, object]]:
    """The scripted models of the demo: the main scenario, then free play."""
    return [
        *own_agent_script(),
        {"match": "[Reply from codex to request",
         "steps": [{"say": "Codex reviewed it. In short: {prompt}"}]},
        {"match": "[Message from lispm]", "steps": [{"say": "Noted: {prompt}"}]},
        {"match": "Please review notes-parse-header", "steps": [
            {"shell": "cat notes.el"},
            {"tool": "lispm.reply", "args": {"request": "{request_id}", "text": ANSWER}},
            {"say": "I sent my review to claude."},
        ]},
        {"match": "Get Codex's review", "steps": [
            {"tool": "lispm.ask_agent", "args": {
                "to": "codex",
                "request": f"Please review notes-parse-header in "
                           f"[[file:{project}/notes.el::9]]: it crashes on a header line "
                           "with no colon."}},
            {"say": "I asked codex ({last_tool_result}); its review will arrive as my next "
                    "input."},
        ]},
        {"match": "list agents", "steps": [
            {"tool": "lispm.list_agents"},
            {"say": "LispM runs these agents (from my own MCP server): {last_tool_result}"},
        ]},
        {"match": "", "steps": [{
            "say": "I am LispM's scripted stand-in model, not a real one. Ask me to "
                   "\"list agents\", or (in Claude) to \"Get Codex's review of notes.el\"."}]},
    ]


#: `prctl` option: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the gateway's process: end it if the demo dies (even by SIGKILL)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_gateway(work: Path, project: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the gateway in the background; return its process and its URL."""
    script = work / "demo-script.json"
    script.write_bytes(orjson.dumps(demo_script(project)))
    port_file = work / "gateway.port"
    port_file.unlink(missing_ok=True)
    with open(work / "gateway.stderr", "wb") as log:
        gateway = subprocess.Popen(
            [sys.executable, "-m", "lispm_sidecar.testing.gateway", "--port", "0",
             "--port-file", str(port_file), "--log", str(work / "gateway.jsonl"),
             "--script", str(script)],
            stdout=log, stderr=log, start_new_session=True, preexec_fn=_die_with_parent,
        )
    (work / "gateway.pid").write_text(f"{gateway.pid}\n")
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if time.monotonic() > deadline or gateway.poll() is not None:
            stop_gateway(gateway)
            raise SystemExit((work / "gateway.stderr").read_text())
        time.sleep(0.05)
    return gateway, f"http://127.0.0.1:{port_file.read_text().strip()}"


def stop_gateway(gateway: subprocess.Popen[bytes]) -> None:
    """Stop the gateway: politely, then for good after 5 s."""
    if gateway.poll() is None:
        gateway.terminate()
        try:
            gateway.wait(5)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()


def clear(work: Path) -> None:
    """Remove what an earlier demo in WORK left, so that this one starts clean."""
    for folder in ("project", "home", "run", "sessions", "gateway.jsonl.bodies"):
        shutil.rmtree(work / folder, ignore_errors=True)
    for name in ("ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm",
                 "gateway.jsonl", "gateway.pid"):
        (work / name).unlink(missing_ok=True)


def _end(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """Prepare the demo's folder and run Emacs in this terminal."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work: Path = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    clear(work)
    project = work / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    gateway, url = start_gateway(work, project)
    try:
        for signum in (signal.SIGHUP, signal.SIGTERM):
            signal.signal(signum, _end)
        sys.exit(run_emacs(work, project, url))
    finally:
        stop_gateway(gateway)
        with contextlib.suppress(FileNotFoundError):
            (work / "gateway.pid").unlink()


def run_emacs(work: Path, project: Path, url: str) -> int:
    """Run Emacs in this terminal, in PROJECT, until it exits; return its status."""
    env = seed_home(work / "home", url, [project])
    npm_bin = os.environ.get("LISPM_NPM_BIN", str(ROOT / ".deps/npm/node_modules/.bin"))
    env.update(
        PATH=f"{npm_bin}:{env.get('PATH', '/usr/bin:/bin')}",
        LISPM_DEMO_PROJECT=str(project),
        LISPM_RUNTIME_DIR=str(work / "run"),
        LISPM_DEMO_LEDGER=str(work / "ledger.sqlite3"),
        LISPM_DEMO_GATEWAY=url,
        LISPM_DEMO_SESSIONS=str(work / "sessions"),
        TERM=os.environ.get("TERM", "xterm-256color"),
    )
    emacs = os.environ.get("EMACS", "emacs")
    # In the project, so that agents started from the list (`s`) work there.
    process = subprocess.Popen([emacs, "-nw", "-Q", "-L", str(ROOT / "elisp"),
                                "-L", str(ROOT / "elisp" / "apps"),
                                "-l", str(ROOT / "scripts/demo.el")],
                               env=env, cwd=project)
    try:
        return process.wait()
    except SystemExit:
        # Told to end: so is Emacs, which then stops its agents and sidecar.
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


if __name__ == "__main__":
    main()
