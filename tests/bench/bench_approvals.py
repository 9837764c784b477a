"""`approval_show_1mb_line_ms`: Emacs showing an approval of an edit of a 1 MB line.

The timing happens in a batch Emacs (approval-bench.el); the same edit of a
1 KB line, timed in the same rounds, is the baseline.  And
`approval_hunks_show_ms`: an edit of 40 hunks shown split into hunks, each
to accept or reject, against an edit of one hunk in the same rounds.
"""

from __future__ import annotations

from .core import BENCH_DIR, TARGETS, Context, Metric, run_emacs_json, spread

TIMEOUT = 120


async def show_1mb_line(context: Context) -> list[Metric]:
    """Run approval-bench.el in a batch Emacs; report its median rounds."""
    runtime = context.runtime_dir("approval")
    data = await run_emacs_json(
        context.emacs_command("-l", str(BENCH_DIR / "approval-bench.el")),
        context.env(runtime, TMPDIR=str(runtime)), "approval-bench.el", TIMEOUT)
    rounds = len(data["rounds_1mb"])
    return [
        Metric("approval_show_1mb_line_ms", float(data["approval_show_1mb_line_ms"]), "ms",
               TARGETS["approval_show_1mb_line_ms"],
               f"median of {rounds} rounds ({spread(data['rounds_1mb'], digits=1)}); "
               "lispm-approvals-request of an edit in a 1 MiB line, shown in *LispM approvals*"),
        Metric("approval_show_1kb_line_ms", float(data["approval_show_1kb_line_ms"]), "ms",
               None,
               f"baseline: the same edit in a 1 KiB line, same rounds "
               f"({spread(data['rounds_1kb'], digits=1)})"),
        Metric("approval_hunks_show_ms", float(data["approval_hunks_show_ms"]), "ms",
               TARGETS["approval_hunks_show_ms"],
               f"median of {rounds} rounds ({spread(data['rounds_hunks'], digits=1)}); "
               "lispm-approvals-request of a 40-hunk edit, each hunk marked to decide"),
        Metric("approval_one_hunk_show_ms", float(data["approval_one_hunk_show_ms"]), "ms",
               None,
               f"baseline: an edit of one hunk, same rounds "
               f"({spread(data['rounds_one_hunk'], digits=1)})"),
    ]
