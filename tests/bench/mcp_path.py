"""`list_agents` over the full path, beside a bare `echo` tool on the same hosting.

Full path: the MCP SDK client here → the agent's MCP server in the sidecar →
`emacs/list-agents` to a batch Emacs (`host.el`) that answers from its real
agent registry → back.  Baseline: `echo_mcp.py`, an `echo` tool served by
LispM's own hosting (`HttpServer` + `Guard`, JSON responses) in a process of
its own.  Both are called with the same client code, after `initialize`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .core import BENCH_DIR, ROOT, Context, Metric, Target, median, percentile, read_token

CALLS = 1000
BLOCK = 100
WARMUP = 50
START_TIMEOUT = 60.0


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    """Yield an initialized MCP client of URL that sends TOKEN."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call_ms(client: Client, tool: str, arguments: dict[str, Any]) -> float:
    """Call TOOL once and return the milliseconds it took; fail on a tool error."""
    start = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - start) * 1000
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return elapsed


async def _stop(proc: asyncio.subprocess.Process, grace: float = 15) -> None:
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def emacs_host(context: Context) -> AsyncIterator[dict[str, Any]]:
    """Run `host.el` and yield what it wrote: url, token_file, pids."""
    work = context.work / "host"
    work.mkdir(parents=True, exist_ok=True)
    out, stop = work / "host.json", work / "stop"
    env = context.env(
        context.runtime_dir("host"), LISPM_BENCH_HOST_OUT=str(out), LISPM_BENCH_HOST_STOP=str(stop)
    )
    log_fd = os.open(work / "emacs.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = await asyncio.create_subprocess_exec(
            *context.emacs_command("-l", str(BENCH_DIR / "host.el")),
            cwd=ROOT,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log_fd,
        )
    finally:
        os.close(log_fd)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not out.exists():
            if proc.returncode is not None or time.monotonic() > deadline:
                log = (work / "emacs.log").read_text(errors="replace")[-4000:]
                raise RuntimeError(f"host.el did not start its agent:\n{log}")
            await asyncio.sleep(0.05)
        yield json.loads(out.read_text())
    finally:
        stop.touch()
        await _stop(proc)


@contextlib.asynccontextmanager
async def echo_server(context: Context) -> AsyncIterator[dict[str, Any]]:
    """Run `echo_mcp.py` and yield its url and token."""
    proc = await asyncio.create_subprocess_exec(
        context.python,
        str(BENCH_DIR / "echo_mcp.py"),
        cwd=ROOT,
        env=context.env(context.runtime_dir("echo")),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT)
        if not line:
            raise RuntimeError("echo_mcp.py exited before serving")
        yield json.loads(line)
    finally:
        proc.stdin.close()
        await _stop(proc)


async def list_agents(context: Context) -> list[Metric]:
    """Measure `list_agents` and `echo`: CALLS calls each, interleaved in blocks."""
    async with emacs_host(context) as host, echo_server(context) as echo:
        token = read_token(host["token_file"])
        async with (
            mcp_client(host["url"], token) as agent,
            mcp_client(echo["url"], echo["token"]) as bare,
        ):
            first = await agent.call_tool("list_agents", {})
            names = [a["name"] for a in (first.structured_content or {}).get("agents", [])]
            if host["name"] not in names:
                raise RuntimeError(f"list_agents did not come from the host: {first}")
            for _ in range(WARMUP):
                await call_ms(agent, "list_agents", {})
                await call_ms(bare, "echo", {"text": "ping"})
            times: dict[str, list[float]] = {"list_agents": [], "echo": []}
            for _ in range(CALLS // BLOCK):
                for _ in range(BLOCK):
                    times["list_agents"].append(await call_ms(agent, "list_agents", {}))
                for _ in range(BLOCK):
                    times["echo"].append(await call_ms(bare, "echo", {"text": "ping"}))
    full, base = times["list_agents"], times["echo"]
    calls = f"{len(full)} calls"
    return [
        Metric(
            "list_agents_full_path_ratio",
            median(full) / median(base),
            "×",
            Target("<=", 2),
            "median list_agents / median echo",
        ),
        Metric("list_agents_median_ms", median(full), "ms", Target("<", 5), calls),
        Metric("list_agents_p99_ms", percentile(full, 0.99), "ms", note=calls),
        Metric("list_agents_echo_median_ms", median(base), "ms", note=calls),
        Metric("list_agents_echo_p99_ms", percentile(base, 0.99), "ms", note=calls),
    ]
