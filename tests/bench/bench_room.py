"""`own_ask_overhead_ms` and `helper_start_ms`: an own agent asks another, and a role.

`room-bench.el` runs two own agents, emacs and emacs-2, in one Emacs with
the real sidecar, against the scripted gateway (`timed_gateway.py`,
answering at once).  Each round emacs asks emacs-2 a question, which its
model answers at once with `reply`, and then asks the role `reviewer`,
whose helper replies and retires.  The overhead is the ask's time, from
the call entering the pipeline to its outcome, minus the model round
trips of emacs-2 inside it; the helper's start runs from the call to the
helper's first model request.  See room-bench.el for the exact points.
"""

from __future__ import annotations

from typing import Any

from .bench_agent import TIMEOUT, compiled_lispm, timed_gateway
from .core import BENCH_DIR, Context, Metric, Target, median, percentile, run_emacs_json, spread

ROUNDS = 20


def script() -> list[dict[str, Any]]:
    """The models' parts: emacs asks, emacs-2 and the reviewer reply at once."""
    reply = {"tool": "reply", "args": {"request": "{request_id}", "text": "Answered."}}
    return [
        {"match": "Question: ", "steps": [reply, {"say": "Replied."}]},
        {"match": "Review: ", "steps": [reply, {"say": "Replied."}]},
        {"match": "Ask emacs-2 question", "steps": [
            {"tool": "ask_agent", "args": {"to": "emacs-2", "request": "Question: how?"}},
            {"say": "Done: {last_tool_result}"}]},
        {"match": "Get reviewer", "steps": [
            {"tool": "ask_agent", "args": {"role": "reviewer", "request": "Review: this."}},
            {"say": "Done: {last_tool_result}"}]},
    ]


async def room(context: Context) -> list[Metric]:
    """Both metrics of one run of room-bench.el."""
    work = context.work / "room"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    async with timed_gateway(context, work, script(), name="room-gateway") as url:
        env = context.env(context.runtime_dir("room"), LISPM_BENCH_GATEWAY=url,
                          LISPM_BENCH_DIR=str(work), LISPM_BENCH_ROUNDS=str(ROUNDS),
                          TMPDIR=str(work))
        data = await run_emacs_json(
            [context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
             "-l", str(BENCH_DIR / "room-bench.el")],
            env, "room-bench.el", TIMEOUT)
    overhead = [r["overhead_ms"] for r in data["ask"]]
    trips = [r["round_trips_ms"] for r in data["ask"]]
    starts = [r["start_ms"] for r in data["helper"]]
    return [
        Metric("own_ask_overhead_ms", median(overhead), "ms", Target("<=", 20),
               f"median of {ROUNDS}: emacs's ask_agent to emacs-2, from the call to its "
               f"outcome, minus emacs-2's model round trips inside it (median "
               f"{median(trips):.1f} ms); p90 {percentile(overhead, 0.9):.1f} ms "
               f"({spread(overhead, digits=1)})"),
        Metric("helper_start_ms", median(starts), "ms", Target("<=", 300),
               f"median of {ROUNDS}: from ask_agent with the role reviewer to the helper's "
               f"first model request; p90 {percentile(starts, 0.9):.1f} ms "
               f"({spread(starts, digits=1)})"),
    ]
