"""Shared pytest set-up: paths, environment, and ERT files as pytest items.

Every `tests/elisp/**/*-test.el` file becomes one pytest item that runs
the file's ERT tests in a fresh `emacs --batch`, so that `make test` ends
with one pytest summary line covering the Lisp and the Python tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT))

os.environ.setdefault("LISPM_SIDECAR_PYTHON", sys.executable)
os.environ.setdefault(
    "LISPM_NPM_BIN", str(ROOT / ".deps" / "npm" / "node_modules" / ".bin")
)
os.environ["LISPM_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="lispm-test-run-")
EMACS = os.environ.get("EMACS", "emacs")
ERT_TIMEOUT = 600

_SUMMARY = re.compile(
    r"^Ran (\d+) tests?, (\d+) results? as expected, (\d+) unexpected", re.MULTILINE
)


def offline(command: list[str]) -> list[str]:
    """Return COMMAND run in a new network namespace where only loopback is up."""
    return ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]


def emacs_batch_command(*args: str) -> list[str]:
    """Return an `emacs --batch' command line with LispM on the load path.

    The ledger goes to a file of the test run's own, never the user's.
    """
    ledger = os.path.join(os.environ["LISPM_RUNTIME_DIR"], "ledger.sqlite3")
    return [
        EMACS, "--batch", "-Q",
        "-L", str(ROOT / "elisp"), "-L", str(ROOT / "elisp" / "apps"),
        "-L", str(ROOT / "tests" / "elisp"),
        "--eval", f"(setq lispm-ledger-file {orjson.dumps(ledger).decode()})",
        *args,
    ]


class ErtFile(pytest.File):
    """A file of ERT tests."""

    def collect(self) -> Any:
        item = ErtItem.from_parent(self, name=self.path.name)
        # A file says `;; pytest-mark: cli` when it runs a real agent CLI.
        with open(self.path, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith(";;; Code:"):
                    break
                if line.startswith(";; pytest-mark: "):
                    item.add_marker(line.split(":", 1)[1].strip())
        yield item


class ErtItem(pytest.Item):
    """All the ERT tests of one file, run in one batch Emacs, offline.

    Some of them start the real agent CLIs, which must reach nothing but
    loopback; so every ERT file runs in a loopback-only network namespace.
    """

    def runtest(self) -> None:
        command = offline(
            emacs_batch_command(
                "-l", "ert", "-l", str(self.path), "-f", "ert-run-tests-batch-and-exit"
            )
        )
        proc = subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=ERT_TIMEOUT,
            check=False,
        )
        output = proc.stdout + proc.stderr
        match = _SUMMARY.search(output)
        if proc.returncode != 0 or match is None or int(match.group(1)) == 0:
            raise ErtFailure(output)
        self.user_properties.append(("ert", match.group(0)))

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ErtFailure):
            return (
                f"ERT failures in {self.path.name}:\n{excinfo.value.args[0][-12000:]}"
            )
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"ert: {self.path.name}"


class ErtFailure(Exception):
    """ERT reported unexpected results (or ran nothing)."""


def pytest_collect_file(
    parent: pytest.Collector, file_path: Path
) -> pytest.Collector | None:
    if (
        file_path.suffix == ".el"
        and file_path.name.endswith("-test.el")
        and "elisp" in file_path.parts
    ):
        return ErtFile.from_parent(parent, path=file_path)
    return None
