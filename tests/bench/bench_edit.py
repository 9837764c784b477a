"""`agent_revert_40_files_ms`: Emacs reverting a turn that edited 40 files (revert-bench.el)."""

from __future__ import annotations

from .core import BENCH_DIR, Context, Metric, Target, run_emacs_json, spread

TIMEOUT = 120


async def revert_40_files(context: Context) -> list[Metric]:
    """Run revert-bench.el in a batch Emacs; report its median round."""
    runtime = context.runtime_dir("revert")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "revert-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "revert-bench.el", TIMEOUT)
    return [
        Metric("agent_revert_40_files_ms", float(data["agent_revert_40_files_ms"]), "ms",
               Target("<=", 200),
               f"median of 7 rounds ({spread(data['rounds'], digits=1)}); 40 files of "
               "400 lines, the user's edits in 10 of them kept"),
    ]
