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

DEMO_SCRIPT = [
    {
        "match": "list agents",
        "steps": [
            {"tool": "lispm.list_agents"},
            {"say": "LispM runs these agents (from my own MCP server): {last_tool_result}"},
        ],
    },
    {
        "match": "",
        "steps": [
            {
                "say": "I am LispM's scripted stand-in model, not a real one. "
                "Ask me to \"list agents\" and I will call LispM's list_agents tool."
            }
        ],
    },
]


def start_gateway(work: Path) -> str:
    """Start the gateway in the background and return its URL."""
    script = work / "demo-script.json"
    script.write_bytes(orjson.dumps(DEMO_SCRIPT))
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
    url = start_gateway(work)
    env = seed_home(work / "home", url, [project])
    npm_bin = os.environ.get("LISPM_NPM_BIN", str(ROOT / ".deps/npm/node_modules/.bin"))
    env.update(
        PATH=f"{npm_bin}:{env.get('PATH', '/usr/bin:/bin')}",
        LISPM_DEMO_PROJECT=str(project),
        LISPM_RUNTIME_DIR=str(work / "run"),
        TERM=os.environ.get("TERM", "xterm-256color"),
    )
    emacs = os.environ.get("EMACS", "emacs")
    os.execvpe(emacs, [emacs, "-nw", "-Q", "-L", str(ROOT / "elisp"),
                       "-L", str(ROOT / "elisp" / "apps"), "-l", str(ROOT / "scripts/demo.el")],
               env)


if __name__ == "__main__":
    main()
