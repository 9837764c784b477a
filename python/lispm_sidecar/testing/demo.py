"""`make demo`: LispM with real Claude Code and Codex on the scripted gateway.

Runs inside a loopback-only network namespace (see scripts/demo.sh): it
starts the gateway with the demo script, seeds a private HOME so the CLIs
start straight at their composers, and replaces itself with `emacs -nw`
showing LispM's agent list and both terminals.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

from .sandbox import seed_home

ROOT = Path(__file__).resolve().parents[3]

ANSWER = (
    "notes-parse-header calls (substring line 0 colon) with colon nil when the line has no "
    "colon, so it signals wrong-type-argument. Check the colon first, and return nil (or "
    "signal a clear error) for a line without one."
)


def demo_script(project: Path) -> list[dict[str, object]]:
    """The scripted models of the demo: the main scenario, then free play."""
    return [
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


def start_gateway(work: Path, project: Path) -> str:
    """Start the gateway in the background and return its URL."""
    script = work / "demo-script.json"
    script.write_bytes(orjson.dumps(demo_script(project)))
    port_file = work / "gateway.port"
    port_file.unlink(missing_ok=True)
    log = open(work / "gateway.stderr", "wb")  # noqa: SIM115 - handed to the child
    subprocess.Popen(
        [sys.executable, "-m", "lispm_sidecar.testing.gateway", "--port", "0",
         "--port-file", str(port_file), "--log", str(work / "gateway.jsonl"),
         "--script", str(script)],
        stdout=log, stderr=log, start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        if time.monotonic() > deadline:
            raise SystemExit((work / "gateway.stderr").read_text())
        time.sleep(0.05)
    return f"http://127.0.0.1:{port_file.read_text().strip()}"


def main() -> None:
    """Prepare the demo's folder and run Emacs in this terminal."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work: Path = args.work.resolve()
    project = work / "project"
    if not project.exists():
        shutil.copytree(ROOT / "tests" / "fixtures" / "demo-project", project)
        subprocess.run(["git", "init", "-q", str(project)], check=True)
    url = start_gateway(work, project)
    env = seed_home(work / "home", url, [project])
    npm_bin = os.environ.get("LISPM_NPM_BIN", str(ROOT / ".deps/npm/node_modules/.bin"))
    env.update(
        PATH=f"{npm_bin}:{env.get('PATH', '/usr/bin:/bin')}",
        LISPM_DEMO_PROJECT=str(project),
        LISPM_RUNTIME_DIR=str(work / "run"),
        LISPM_DEMO_LEDGER=str(work / "ledger.sqlite3"),
        TERM=os.environ.get("TERM", "xterm-256color"),
    )
    emacs = os.environ.get("EMACS", "emacs")
    os.execvpe(emacs, [emacs, "-nw", "-Q", "-L", str(ROOT / "elisp"),
                       "-L", str(ROOT / "elisp" / "apps"), "-l", str(ROOT / "scripts/demo.el")],
               env)


if __name__ == "__main__":
    main()
