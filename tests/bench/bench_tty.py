"""`run_lisp_key_answer_ms`: a terminal Emacs runs a key's command while a run_lisp
program computes.

`tty-bench.el` runs in `emacs -nw` on a pseudo-terminal, driven by
`tests/e2e/inside.py`'s `run_tty`, which types the keys it asks for (the
machinery of the terminal end-to-end test, without the network namespace:
no model is asked).  LispM is byte-compiled, as for the own agent's
benchmarks.
"""

from __future__ import annotations

import asyncio
import json

from tests.e2e.inside import TTY_STARTED, run_tty, screen_text

from .bench_agent import compiled_lispm
from .core import BENCH_DIR, ROOT, Context, Metric, Target, median, spread

#: Keys typed while the program computes.
PRESSES = 20
TIMEOUT = 120


async def key_answer(context: Context) -> list[Metric]:
    """Type F5 PRESSES times while a program loops; time each to its command."""
    work = context.work / "tty"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    command = [context.emacs, "-nw", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
               "-L", str(ROOT / "tests" / "e2e"), "-l", str(BENCH_DIR / "tty-bench.el"),
               "-f", "tty-bench-run"]
    env = context.env(context.runtime_dir("tty"), LISPM_E2E_DIR=str(work),
                      LISPM_BENCH_PRESSES=str(PRESSES), TMPDIR=str(work))
    run = await asyncio.to_thread(run_tty, command, ROOT, env, work, TIMEOUT,
                                  work / TTY_STARTED)
    results = work / "tty-bench.json"
    data = json.loads(results.read_text()) if results.exists() else {}
    if run.status != 0 or "key_answer_ms" not in data:
        why = run.killed or f"exit status {run.status}"
        raise RuntimeError(f"tty-bench.el failed ({why}): {data.get('error', '')}\n"
                           f"{screen_text(work / 'tty-screen.log')}")
    times: list[float] = data["key_answer_ms"]
    note = (f"{len(times)} F5 presses ({spread(times, digits=1)} ms), each from the write to "
            f"the terminal to its command; Emacs's CPU {data['cpu_share'] * 100:.0f}% of the "
            "wall time meanwhile (the program computes in an Emacs of its own)")
    return [
        Metric("run_lisp_key_answer_ms", median(times), "ms", Target("<=", 100),
               f"median; {note}"),
        Metric("run_lisp_key_answer_max_ms", max(times), "ms", Target("<=", 100),
               "the slowest of the same presses"),
    ]
