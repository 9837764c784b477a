"""`run_shell_sandbox_overhead_ms`: what bubblewrap adds to a shell command.

`true` run by the run_shell tool in a batch Emacs (sandbox-bench.el), in the
sandbox and plainly, in alternate rounds of the same run; the metric is the
difference of the medians.
"""

from __future__ import annotations

from .core import BENCH_DIR, TARGETS, Context, Metric, run_emacs_json, spread

TIMEOUT = 120


async def overhead(context: Context) -> list[Metric]:
    """Run sandbox-bench.el in a batch Emacs; report the medians' difference."""
    runtime = context.runtime_dir("sandbox")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "sandbox-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "sandbox-bench.el", TIMEOUT)
    if not data["bwrap"]:
        raise RuntimeError("bubblewrap is not installed: nothing to measure")
    rounds = len(data["rounds_sandboxed"])
    sandboxed = float(data["sandboxed_ms"])
    plain = float(data["plain_ms"])
    return [
        Metric("run_shell_sandbox_overhead_ms", sandboxed - plain, "ms",
               TARGETS["run_shell_sandbox_overhead_ms"],
               f"run_shell `true`, call to result: {sandboxed:.1f} ms median in bubblewrap "
               f"({spread(data['rounds_sandboxed'], digits=1)}) against {plain:.1f} ms plainly "
               f"({spread(data['rounds_plain'], digits=1)}), {rounds} alternate rounds"),
        Metric("run_shell_plain_ms", plain, "ms", None,
               "baseline: the same call unconfined, same rounds"),
    ]
