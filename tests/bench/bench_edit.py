"""Editing files: `agent_revert_40_files_ms` and `atomic_save_12mb_*`."""

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


async def atomic_save_12mb(context: Context) -> list[Metric]:
    """Run atomic-save-bench.el: an agent's edit saved whole, beside a plain save."""
    runtime = context.runtime_dir("atomic-save")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "atomic-save-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "atomic-save-bench.el", TIMEOUT)
    atomic, plain = float(data["atomic_ms"]), float(data["plain_ms"])
    return [
        Metric("atomic_save_12mb_ms", atomic, "ms", None,
               f"median of 9 ({spread(data['atomic'], digits=1)}): an agent's edit of one "
               "line of a 12 MB file, saved whole (new file, fsync, rename)"),
        Metric("atomic_save_12mb_ratio", atomic / plain, "x", Target("<=", 1.5),
               f"against a plain save-buffer of the same file in the same rounds, "
               f"median {plain:.1f} ms ({spread(data['plain'], digits=1)})"),
    ]
