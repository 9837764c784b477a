"""The user's MCP servers as the own agent's tools: the schemas a request carries, a call's cost.

`mcp_100_tools_request_bytes_ratio`: a real MCP server with 100 tools
(`tests/fixtures/mcp_many_tools.py`, over stdio, run by the real sidecar)
is configured in a batch Emacs (`mcp-bench.el`, case `bytes`, LispM
byte-compiled as in `bench_agent.py`).  The bytes of the server's tool
schemas in one model request, as LispM sends them (past
`lispm-tools-offer-limit`, those `search_tools` found), over the bytes of
all 100, after one search that found the tools of one topic.

`mcp_call_overhead_ratio` and `mcp_call_added_ms`: server-everything's
`echo`, called by the own agent's pipeline in Emacs (`lispm-calls-invoke`:
validation, policy, the sidecar's client, the server; case `call`), against
the MCP SDK's client calling the same server directly from Python, in the
same run: direct rounds, then LispM's, then direct rounds again.  The ratio
is the medians' (LispM over direct); the added time their difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from tests.python.sidecar_client import SidecarProcess

from .bench_agent import TIMEOUT, compiled_lispm
from .core import BENCH_DIR, ROOT, Context, Metric, Target, median, run_emacs_json, spread

#: Calls timed in each arm (after one untimed call).
CALLS = 200
MANY_TOOLS = 100


def everything_command() -> list[str]:
    """Return the command line of server-everything over stdio."""
    npm_bin = Path(os.environ.get("LISPM_NPM_BIN", ROOT / ".deps/npm/node_modules/.bin"))
    program = npm_bin / "mcp-server-everything"
    if not os.access(program, os.X_OK):
        raise RuntimeError(f"{program} is not installed: run `make install`")
    return [str(program), "stdio"]


async def run_mcp_bench(context: Context, elisp: Path, case: str, server: list[str],
                        rounds: int = 0) -> dict[str, object]:
    """Run mcp-bench.el's CASE with SERVER; return its JSON line."""
    work = context.work / f"mcp-{case}"
    work.mkdir(parents=True, exist_ok=True)
    env = context.env(context.runtime_dir(f"mcp-{case}"), LISPM_BENCH_CASE=case,
                      LISPM_BENCH_SERVER=json.dumps(server), LISPM_BENCH_DIR=str(work),
                      LISPM_BENCH_ROUNDS=str(rounds), TMPDIR=str(work))
    return await run_emacs_json(
        [context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
         "-l", str(BENCH_DIR / "mcp-bench.el")],
        env, f"mcp-bench.el {case}", TIMEOUT)


async def request_bytes(context: Context) -> list[Metric]:
    """`mcp_100_tools_request_bytes_ratio`."""
    elisp = await compiled_lispm(context)
    server = [sys.executable, str(ROOT / "tests" / "fixtures" / "mcp_many_tools.py"),
              str(MANY_TOOLS)]
    data = await run_mcp_bench(context, elisp, "bytes", server)
    if data["tools"] != MANY_TOOLS:
        raise RuntimeError(f"the server gave {data['tools']} tools, not {MANY_TOOLS}")
    offered, every, own = (float(str(data[key])) for key in
                           ("offered_mcp_bytes", "all_mcp_bytes", "own_bytes"))
    return [Metric(
        "mcp_100_tools_request_bytes_ratio", offered / every, "×", Target("<=", 0.2),
        f"{offered:.0f} bytes of server tool schemas in a request after one search_tools "
        f"found {data['found']} tools, against {every:.0f} for all {MANY_TOOLS}; LispM's "
        f"own tools add {own:.0f} bytes to either")]


async def direct_calls(server: list[str], calls: int) -> list[float]:
    """Time CALLS calls of echo by the MCP SDK's client, after one untimed; in ms."""
    params = StdioServerParameters(command=server[0], args=server[1:])
    times: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await asyncio.wait_for(session.initialize(), 60)
        for i in range(calls + 1):
            start = time.perf_counter()
            result = await asyncio.wait_for(
                session.call_tool("echo", {"message": f"round {i}"}), 30)
            elapsed = (time.perf_counter() - start) * 1000
            text = "".join(c.text for c in result.content if isinstance(c, TextContent))
            if f"round {i}" not in text:
                raise RuntimeError(f"the echo answered {text!r}")
            if i > 0:
                times.append(elapsed)
    return times


async def sidecar_calls(context: Context, server: list[str], calls: int) -> list[float]:
    """Time CALLS calls of echo through the sidecar's `lispm/mcp-call`, from Python; in ms.

    The sidecar's part of LispM's path, without Emacs."""
    sidecar = SidecarProcess(context.runtime_dir("mcp-sidecar"))
    await sidecar.start()
    times: list[float] = []
    try:
        await sidecar.hello()
        await sidecar.call("lispm/mcp-servers", {"servers": {"bench": {
            "command": server[0], "args": server[1:]}}, "timeout": 60})
        for i in range(calls + 1):
            start = time.perf_counter()
            result = await sidecar.call("lispm/mcp-call", {
                "server": "bench", "tool": "echo", "arguments": {"message": f"round {i}"}})
            elapsed = (time.perf_counter() - start) * 1000
            if f"round {i}" not in result["text"]:
                raise RuntimeError(f"the echo answered {result!r}")
            if i > 0:
                times.append(elapsed)
    finally:
        await sidecar.close()
    return times


async def call_overhead(context: Context) -> list[Metric]:
    """`mcp_call_overhead_ratio` and `mcp_call_added_ms`."""
    elisp = await compiled_lispm(context)
    server = everything_command()
    direct = await direct_calls(server, CALLS // 2)
    data = await run_mcp_bench(context, elisp, "call", server, CALLS)
    direct += await direct_calls(server, CALLS // 2)
    through_sidecar = await sidecar_calls(context, server, CALLS)
    lispm = [float(ms) for ms in data["ms"]]  # type: ignore[attr-defined]
    ratio = median(lispm) / median(direct)
    setting = (f"server-everything's echo over stdio, {len(lispm)} calls through LispM, "
               f"{len(direct)} direct (half before, half after)")
    return [
        Metric("mcp_call_overhead_ratio", ratio, "×", Target("<=", 2),
               f"median through LispM ({median(lispm):.2f} ms, {spread(lispm, digits=2)}) "
               f"over the SDK's direct call ({median(direct):.2f} ms, "
               f"{spread(direct, digits=2)}); {setting}"),
        Metric("mcp_call_added_ms", median(lispm) - median(direct), "ms", Target("<=", 3),
               f"the medians' difference; {setting}"),
        Metric("mcp_call_sidecar_ms", median(through_sidecar), "ms",
               note=f"the sidecar's part alone: lispm/mcp-call from Python over its stdio, "
               f"{len(through_sidecar)} calls ({spread(through_sidecar, digits=2)}); the rest "
               f"of the LispM median is Emacs's: the pipeline and jsonrpc.el"),
    ]
