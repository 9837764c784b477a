"""Editing files: `agent_revert_40_files_ms` and `atomic_save_12mb_*`."""

from __future__ import annotations

from .bench_agent import compiled_lispm
from .core import BENCH_DIR, Context, Metric, Target, median, run_emacs_json, spread

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
    """Run atomic-save-bench.el, LispM byte-compiled: an agent's edit saved whole.

    Beside it, in the same rounds: the same edit saved by a plain `save-buffer`
    (the ratio's baseline), saved whole but not flushed, and the saves alone."""
    runtime = context.runtime_dir("atomic-save")
    elisp = await compiled_lispm(context)
    data = await run_emacs_json(
        [context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
         "-l", str(BENCH_DIR / "atomic-save-bench.el")],
        context.env(runtime, TMPDIR=str(runtime)), "atomic-save-bench.el", TIMEOUT)
    agent, noflush, plain = (median(data[k]) for k in ("agent", "agent-noflush", "agent-plain"))
    save, save_plain = median(data["save"]), median(data["save-plain"])
    return [
        Metric("atomic_save_12mb_ms", agent, "ms", None,
               f"median of 9 ({spread(data['agent'], digits=1)}): an agent's edit of one "
               "line of a 12 MB file, saved whole (new file, fsync, rename)"),
        Metric("atomic_save_12mb_ratio", agent / plain, "x", Target("<=", 1.5),
               f"against the same edit saved by a plain save-buffer (in place, no fsync) "
               f"in the same rounds, median {plain:.1f} ms "
               f"({spread(data['agent-plain'], digits=1)})"),
        Metric("atomic_save_12mb_noflush_ms", noflush, "ms", None,
               f"the agent's edit saved whole without the fsync, same rounds "
               f"({spread(data['agent-noflush'], digits=1)}); ratio {noflush / plain:.2f}"),
        Metric("atomic_save_12mb_save_only_ratio", save / save_plain, "x", None,
               f"the save alone after an edit by hand: saved whole {save:.1f} ms, "
               f"plain save-buffer {save_plain:.1f} ms, same rounds"),
    ]
