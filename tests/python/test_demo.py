"""`make demo`'s script, run headless: Emacs is a stand-in that reports
what it found (its folder, the ledger, the gateway) and exits.  Each demo
starts clean, in the demo project, and its gateway ends with it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

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
    assert {"left-over", "agents-file", "runtime"}.isdisjoint(report), report
    assert report["gateway"] == "up"
    assert (project / "notes.el").exists()
    assert gone(int(report["gateway-pid"]), 0)
    assert not (work / "gateway.pid").exists()


def test_the_gateway_ends_even_if_the_demo_is_killed(tmp_path: Path) -> None:
    _, report = run_demo(tmp_path, kills_demo=True)
    assert report["gateway"] == "up"
    assert gone(int(report["gateway-pid"]), 10)
