"""`make bench`: run LispM's benchmarks, print a table, write `tests/bench/results.json`.

    python -m tests.bench              every benchmark
    python -m tests.bench rpc rss      only those (names from BENCHMARKS)

Each benchmark is an async function of a `Context` returning `Metric`s; to
add numbers, write one and add it to BENCHMARKS.  Targets are reported, not
asserted: the exit status is 0 even when one is missed.  `results.json` maps
each metric key to `{"value": number, "unit": "..."}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import (
    bench_agent,
    bench_approvals,
    bench_edit,
    bench_ide,
    bench_ledger,
    bench_lisp,
    bench_mcp,
    bench_room,
    bench_run_lisp,
    bench_sandbox,
    bench_tty,
    bench_watchers,
    delivery,
    mcp_path,
    rpc,
    session,
    sidecar,
)
from .core import BENCH_DIR, TARGETS, Benchmark, Context, Metric, plain

#: Every benchmark, in the order they run (the quick, quiet ones first).
BENCHMARKS: dict[str, Benchmark] = {
    "cold_start": sidecar.cold_start,
    "rpc": rpc.roundtrip,
    "list_agents": mcp_path.list_agents,
    "rss": sidecar.rss,
    "ledger_pairs": plain(bench_ledger.ledger_pairs_per_s, TARGETS),
    "ledger_recovery": plain(bench_ledger.ledger_recovery_100k_s, TARGETS),
    "watcher_ratio": plain(bench_watchers.watcher_200mb_vs_1mb_ratio, TARGETS),
    "watcher_idle_cpu": plain(bench_watchers.watcher_idle_cpu_percent_50_agents, TARGETS),
    "delivery": delivery.delivery,
    "ide": plain(lambda: asyncio.run(bench_ide.ide_tool_call()), TARGETS),
    "agent_revert": bench_edit.revert_40_files,
    "atomic_save": bench_edit.atomic_save_12mb,
    "approval_show": bench_approvals.show_1mb_line,
    "agent_commit": session.commit,
    "agent_stream": bench_agent.stream_cost,
    "agent_tool_step": bench_agent.tool_step,
    "agent_tool_step_large": bench_agent.tool_step_large,
    "agent_prompt_cache": bench_agent.prompt_cache,
    "run_lisp_check": bench_lisp.check_200_lines,
    "run_lisp_child_start": bench_lisp.child_start,
    "run_lisp_40_files": bench_run_lisp.forty_files,
    "run_lisp_key_answer": bench_tty.key_answer,
    "room": bench_room.room,
    "mcp_request_bytes": bench_mcp.request_bytes,
    "mcp_call": bench_mcp.call_overhead,
    "run_shell_sandbox": bench_sandbox.overhead,
}

RESULTS = BENCH_DIR / "results.json"


def _format(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def table(metrics: list[Metric]) -> str:
    """Return METRICS as a plain-text table."""
    rows = [("metric", "value", "unit", "target", "met", "note")]
    for m in metrics:
        met = "" if m.target is None else ("yes" if m.target.met(m.value) else "NO")
        rows.append((m.key, _format(m.value), m.unit, str(m.target or ""), met, m.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            cell.rjust(width) if i == 1 else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def machine() -> str:
    """Describe the machine and the tools the numbers come from."""
    emacs = os.environ.get("EMACS", "emacs")
    version = subprocess.run(
        [emacs, "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
        f"{platform.python_implementation()} {platform.python_version()}; "
        f"{version[0] if version else emacs}"
    )


async def run(names: list[str], work: Path) -> list[Metric]:
    """Run the benchmarks NAMES, one after the other, and return all their metrics."""
    context = Context(work=work)
    metrics: list[Metric] = []
    for name in names:
        start = time.monotonic()
        print(f"bench: {name}...", file=sys.stderr, flush=True)
        metrics.extend(await BENCHMARKS[name](context))
        print(f"bench: {name} took {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    return metrics


def main() -> None:
    """Run the benchmarks named on the command line, or all of them."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})")
    names: list[str] = parser.parse_args().names or list(BENCHMARKS)
    if unknown := [name for name in names if name not in BENCHMARKS]:
        parser.error(f"unknown benchmarks: {', '.join(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="lispm-bench-"))
    # Nothing a bench process keeps (such as a ledger) lands in the user's home:
    # the sidecar's state goes to XDG_STATE_HOME, Emacs's to LISPM_BENCH_EMACS_DIR.
    os.environ["XDG_STATE_HOME"] = str(work / "state")
    os.environ["LISPM_BENCH_EMACS_DIR"] = str(work / "emacs.d")
    start = time.monotonic()
    try:
        metrics = asyncio.run(run(names, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.write_text(
        json.dumps({m.key: {"value": round(m.value, 4), "unit": m.unit} for m in metrics},
                   indent=2, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    print(f"LispM benchmarks on {machine()}")
    print(table(metrics))
    print(f"({time.monotonic() - start:.0f} s; wrote {RESULTS})")


if __name__ == "__main__":
    main()
