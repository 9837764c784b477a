"""What every benchmark shares: metrics and targets, the run's context, statistics."""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "tests" / "bench"


_SIGNS = {"<": "<", "<=": "≤", ">=": "≥"}


@dataclass(frozen=True)
class Target:
    """A bound a metric should stay under (`<`) or at (`<=`), or reach (`>=`)."""

    op: Literal["<", "<=", ">="]
    bound: float

    def met(self, value: float) -> bool:
        """Return True if VALUE meets this target."""
        if self.op == ">=":
            return value >= self.bound
        return value < self.bound if self.op == "<" else value <= self.bound

    def __str__(self) -> str:
        return f"{_SIGNS[self.op]} {self.bound:g}"


@dataclass(frozen=True)
class Metric:
    """One number a benchmark measured, with its unit and, if any, its target."""

    key: str
    value: float
    unit: str
    target: Target | None = None
    note: str = ""


@dataclass(frozen=True)
class Context:
    """What a benchmark needs to know about this run."""

    work: Path
    python: str = sys.executable
    emacs: str = os.environ.get("EMACS", "emacs")

    def runtime_dir(self, name: str) -> Path:
        """Return a fresh private runtime directory for the benchmark NAME."""
        path = self.work / "run" / name
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def env(self, runtime: Path, **extra: str) -> dict[str, str]:
        """Return the environment of a bench process that uses RUNTIME."""
        pythonpath = [str(ROOT / "python")]
        if old := os.environ.get("PYTHONPATH"):
            pythonpath.append(old)
        return dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(pythonpath),
            LISPM_RUNTIME_DIR=str(runtime),
            LISPM_SIDECAR_PYTHON=self.python,
            **extra,
        )

    def emacs_command(self, *args: str) -> list[str]:
        """Return a batch Emacs command line with LispM on the load path."""
        load_path = [ROOT / "elisp", ROOT / "elisp" / "apps"]
        dirs = [arg for d in load_path if d.is_dir() for arg in ("-L", str(d))]
        return [self.emacs, "--batch", "-Q", *dirs, *args]


Benchmark = Callable[[Context], Awaitable[list[Metric]]]

#: The targets of metrics whose benchmark does not set its own (plain
#: functions, through `plain`), and of the delivery and approval benchmarks.
TARGETS: dict[str, Target] = {
    "delivery_latency_median_ms": Target("<=", 50),
    "delivery_latency_p99_ms": Target("<=", 200),
    "delivery_emacs_blocked_ms": Target("<=", 5),
    "ledger_pairs_per_s": Target(">=", 5000),
    "ledger_recovery_100k_s": Target("<=", 1),
    "watcher_200mb_vs_1mb_ratio": Target("<=", 1.2),
    "watcher_idle_cpu_percent_50_agents": Target("<", 1),
    "ide_tool_call_ratio": Target("<=", 1.3),
    "ide_tool_call_p99_ms_emacs_busy": Target("<=", 1),
    "approval_show_1mb_line_ms": Target("<=", 50),
    "approval_hunks_show_ms": Target("<=", 20),
    "run_shell_sandbox_overhead_ms": Target("<=", 30),
}

#: What a plain benchmark function returns: `{key: {"value": ..., "unit": ...}}`,
#: the shape of `results.json`.
ResultDict = Mapping[str, Mapping[str, float | str]]


def plain(
    function: Callable[[], ResultDict], targets: Mapping[str, Target] | None = None
) -> Benchmark:
    """Make a Benchmark of FUNCTION, a blocking function that returns a `ResultDict`.

    It runs in a thread of its own; TARGETS gives the targets of its keys, if any.
    """

    async def run(context: Context) -> list[Metric]:
        result = await asyncio.to_thread(function)
        return [
            Metric(key, float(metric["value"]), str(metric["unit"]), (targets or {}).get(key),
                   str(metric.get("note", "")))
            for key, metric in result.items()
        ]

    return run


def percentile(values: Sequence[float], fraction: float) -> float:
    """Return the nearest-rank percentile FRACTION (0..1] of VALUES."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    """Return the median of VALUES."""
    return statistics.median(values)


def spread(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> str:
    """Return 'min–max' of VALUES times SCALE, for a note."""
    return f"{min(values) * scale:.{digits}f}–{max(values) * scale:.{digits}f}"


def read_token(path: str | Path) -> str:
    """Return the bearer token stored in the file PATH."""
    return Path(path).read_text().strip()


async def run_emacs_json(command: Sequence[str], env: Mapping[str, str], what: str,
                         seconds: float) -> dict[str, Any]:
    """Run the batch Emacs COMMAND in ROOT; return the last JSON line it printed.

    WHAT names it in the error raised when it fails, prints no JSON or
    outlives SECONDS (it is killed then)."""
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), seconds)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    lines = [line for line in stdout.decode().splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        output = f"{stdout.decode()[-4000:]}\n{stderr.decode()[-4000:]}"
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{output}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
