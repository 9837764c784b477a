"""`agent_revert_40_files_ms`: Emacs reverting a turn that edited 40 files (revert-bench.el)."""

from __future__ import annotations

import asyncio
import json

from .core import BENCH_DIR, ROOT, Context, Metric, Target, spread

TIMEOUT = 120


async def revert_40_files(context: Context) -> list[Metric]:
    """Run revert-bench.el in a batch Emacs; report its median round."""
    runtime = context.runtime_dir("revert")
    proc = await asyncio.create_subprocess_exec(
        *context.emacs_command("-l", str(BENCH_DIR / "revert-bench.el")),
        cwd=ROOT,
        env=context.env(runtime, TMPDIR=str(runtime)),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    lines = [line for line in stdout.decode().splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        output = stderr.decode()[-4000:]
        raise RuntimeError(f"revert-bench.el failed ({proc.returncode}):\n{output}")
    data = json.loads(lines[-1])
    return [
        Metric("agent_revert_40_files_ms", float(data["agent_revert_40_files_ms"]), "ms",
               Target("<=", 200),
               f"median of 7 rounds ({spread(data['rounds'], digits=1)}); 40 files of "
               "400 lines, the user's edits in 10 of them kept"),
    ]
