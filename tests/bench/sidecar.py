"""The sidecar on its own: how fast it starts, and how much memory its agents cost.

Both talk to the sidecar over its stdio the way Emacs does; the memory
benchmark uses the test suite's `SidecarProcess` and its fake Emacs.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from pathlib import Path
from typing import Any

import orjson

from tests.python.sidecar_client import SidecarProcess

from .core import ROOT, Context, Metric, Target, median, read_token, spread
from .mcp_path import mcp_client

COLD_RUNS = 5
AGENTS = 50


def _frame(message: dict[str, Any]) -> bytes:
    body = orjson.dumps(message)
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def cold_start_once(context: Context, runtime: Path) -> float:
    """Spawn the sidecar, greet it, and return the ms until its answer."""
    hello = _frame(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "lispm/hello",
            "params": {"protocol": 1, "version": "0.1.0", "emacs_pid": os.getpid()},
        }
    )
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        context.python,
        "-m",
        "lispm_sidecar",
        cwd=ROOT,
        env=context.env(runtime),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(hello)
    await proc.stdin.drain()
    header = await asyncio.wait_for(proc.stdout.readuntil(b"\r\n\r\n"), 30)
    answer = orjson.loads(await proc.stdout.readexactly(int(header.split(b":")[1])))
    elapsed = (time.perf_counter() - start) * 1000
    if answer.get("result", {}).get("protocol") != 1:
        raise RuntimeError(f"unexpected answer to lispm/hello: {answer}")
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 10)
    return elapsed


async def cold_start(context: Context) -> list[Metric]:
    """Measure `sidecar_cold_start_ms`: spawn to the answer to `lispm/hello`."""
    runtime = context.runtime_dir("cold")
    times = [await cold_start_once(context, runtime) for _ in range(COLD_RUNS)]
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return [
        Metric(
            "sidecar_cold_start_ms",
            median(times),
            "ms",
            note=f"median of {COLD_RUNS} ({spread(times, digits=0)}), {python}",
        )
    ]


async def _fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": [{"name": "claude", "kind": "claude", "folder": "/tmp",
                            "state": "running"}]}
    return params


async def _start_and_call(sidecar: SidecarProcess, name: str) -> None:
    """Start the server of agent NAME and call its `list_agents` once."""
    agent = await sidecar.call(
        "lispm/agent-start", {"name": name, "kind": "claude", "folder": "/tmp"}
    )
    token = read_token(agent["token_file"])
    async with mcp_client(agent["url"], token) as client:
        result = await client.call_tool("list_agents", {})
        if result.is_error:
            raise RuntimeError(f"list_agents failed on {name}: {result.content}")


async def rss(context: Context) -> list[Metric]:
    """Measure the sidecar's RSS with 1 and with AGENTS agent servers, each called once."""
    sidecar = SidecarProcess(context.runtime_dir("rss"), _fake_emacs)
    await sidecar.start()
    try:
        await sidecar.hello()
        await _start_and_call(sidecar, "agent-1")
        one = (await sidecar.call("lispm/stats", {}))["rss_kb"]
        for i in range(2, AGENTS + 1):
            await _start_and_call(sidecar, f"agent-{i}")
        stats = await sidecar.call("lispm/stats", {})
        if stats["agents"] != AGENTS:
            raise RuntimeError(f"the sidecar serves {stats['agents']} agents, not {AGENTS}")
        many = stats["rss_kb"]
    finally:
        await sidecar.close()
    return [
        Metric("sidecar_rss_1_agent_mb", one / 1024, "MiB", note="after one list_agents call"),
        Metric(
            f"sidecar_rss_{AGENTS}_agents_mb",
            many / 1024,
            "MiB",
            Target("<=", 150),
            "each called once",
        ),
    ]
