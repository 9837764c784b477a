"""`agent_commit_emacs_blocked_ms`, `session_step_save_emacs_ms`: what sessions cost Emacs.

The timing happens in a batch Emacs (`session-bench.el`), which plays 50
turns of an own agent's session, one every 100 ms, and prints the time of
each `lispm-session-end-turn`, the time Emacs spent in the sessions' git
processes' starts and callbacks (the one-off git commands and the shell
that feeds `git fast-import`), whether git made the 50 commits in order,
and the time of each save at a call's end (a step save, no commit) with
the file's size; this module turns them into metrics.
"""

from __future__ import annotations

from typing import Any

from .bench_agent import compiled_lispm
from .core import (
    BENCH_DIR,
    Context,
    Metric,
    Target,
    median,
    percentile,
    run_emacs_json,
    spread,
)

TURNS = 50
TIMEOUT = 300


async def run_emacs(context: Context, turns: int = TURNS) -> dict[str, Any]:
    """Run `session-bench.el` and return the JSON it printed."""
    env = context.env(context.runtime_dir("session"), LISPM_BENCH_SESSION_TURNS=str(turns))
    # Byte-compiled, as an installed package runs.
    elisp = await compiled_lispm(context)
    return await run_emacs_json(
        [context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
         "-l", str(BENCH_DIR / "session-bench.el")], env,
        "session-bench.el", TIMEOUT)


async def commit(context: Context) -> list[Metric]:
    """Measure `agent_commit_emacs_blocked_ms` and what goes with it."""
    data = await run_emacs(context)
    blocked = [seconds * 1000 for seconds in data["blocked"]]
    git = [seconds * 1000 for seconds in data["git_callbacks"]]
    in_order = bool(data["in_order"]) and bool(data["drained"])
    # The step saves once the file has grown past 250 KB (the last turns).
    late = [seconds * 1000 for seconds, kb in zip(data["steps"], data["step_kb"], strict=True)
            if kb >= 250] or [seconds * 1000 for seconds in data["steps"][-5:]]
    return [
        Metric("agent_commit_emacs_blocked_ms", median(blocked), "ms", Target("<=", 5),
               f"lispm-session-end-turn, median of {data['turns']} turns; "
               f"range {spread(blocked, digits=2)}; file {data['file_kb']:.0f} KB at the end"),
        Metric("agent_commit_emacs_blocked_p90_ms", percentile(blocked, 0.9), "ms"),
        Metric("agent_commit_emacs_git_ms", median(git), "ms",
               note="Emacs's time in the git processes' starts and callbacks per turn, median"),
        Metric("agent_commit_in_order", 1.0 if in_order else 0.0, "bool", Target(">=", 1),
               f"{data['commits']} commits for {data['turns']} turns, "
               f"the last {data['drain_s'] * 1000:.0f} ms after its turn"),
        Metric("session_step_save_emacs_ms", median(late), "ms", Target("<=", 2),
               f"an edit's record made, its call's result and diff added and the session "
               f"saved (its tail file, no commit), median of "
               f"{len(late)} steps with the file at {min(data['step_kb'][-len(late):]):.0f}–"
               f"{max(data['step_kb']):.0f} KB ({spread(late, digits=2)})"),
    ]
