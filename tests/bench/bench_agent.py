"""LispM's own agent: `agent_stream_cost_ratio` and `agent_tool_step_overhead_ms`.

A batch Emacs (`agent-bench.el`) runs the own agent against the scripted
gateway (`timed_gateway.py`, a process of its own) through the real
sidecar.  LispM's Lisp is byte-compiled first, into a copy of its
`elisp` folder under the run's work folder (the tree is not touched), as
a user's installed package is: the costs measured are those of compiled
code.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from lispm_sidecar.testing.gateway_cache import common_length, prompt_bytes

from .core import BENCH_DIR, ROOT, Context, Metric, Target, median, run_emacs_json, spread

#: The answers streamed: 20 KB and 2 MB (KB = 1,000 characters, all ASCII).
SMALL, LARGE = 20_000, 2_000_000
#: Rounds of each size, side by side (after one untimed round of each).
STREAM_ROUNDS = 5
#: `read_file` steps in one turn, and measured turns (after one untimed).
STEPS, STEP_TURNS = 30, 2
#: The earlier conversation of the large session: 5 MB.
HUGE = 5_000_000
#: Turns of the session whose prompts should cache.
CACHE_TURNS = 20
#: Empty requests timed against the gateway alone (after 10 untimed).
GATEWAY_REQUESTS = 50
TIMEOUT = 600
STEP_PROMPT = "Read notes.txt many times"


def script() -> list[dict[str, Any]]:
    """The model's part: the two long answers, and the many `read_file` steps."""
    read = {"tool": "read_file", "args": {"path": "notes.txt"}}
    return [
        {"match": f"Stream {SMALL} ", "steps": [{"long": SMALL}]},
        {"match": f"Stream {LARGE} ", "steps": [{"long": LARGE}]},
        {"match": f"Stream {HUGE} ", "steps": [{"long": HUGE}]},
        {"match": STEP_PROMPT, "steps": [*([read] * STEPS), {"say": "Read it all."}]},
        {"match": "Cache turn", "steps": [read, read, {"say": "Read it twice."}]},
    ]


async def compiled_lispm(context: Context) -> Path:
    """Return a folder with LispM's Lisp byte-compiled, made once per run."""
    home = context.work / "agent-lispm"
    elisp = home / "elisp"
    if (elisp / "lispm.elc").exists():
        return elisp
    shutil.rmtree(home, ignore_errors=True)
    await asyncio.to_thread(shutil.copytree, ROOT / "elisp", elisp,
                            ignore=shutil.ignore_patterns("*.elc"))
    # The sidecar's Python package is found next to `elisp', as in a checkout.
    (home / "python").symlink_to(ROOT / "python")
    files = sorted(str(p) for p in [*elisp.glob("*.el"), *elisp.glob("apps/*.el")])
    proc = await asyncio.create_subprocess_exec(
        context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
        "-f", "batch-byte-compile", *files,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"byte-compiling LispM failed:\n{stderr.decode()[-4000:]}")
    return elisp


@asynccontextmanager
async def timed_gateway(context: Context, work: Path, rules: list[dict[str, Any]],
                        latency_ms: int = 0, name: str = "agent-gateway") -> AsyncIterator[str]:
    """Run the timed gateway with RULES, answering LATENCY_MS late; yield its URL.

    NAME names its runtime folder."""
    script_file, port_file = work / "script.json", work / "gateway.port"
    script_file.write_text(json.dumps(rules))
    proc = await asyncio.create_subprocess_exec(
        context.python, str(BENCH_DIR / "timed_gateway.py"), str(port_file), str(script_file),
        str(latency_ms), cwd=ROOT, env=context.env(context.runtime_dir(name)),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError("the timed gateway did not start")
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    finally:
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def run_agent_bench(context: Context, elisp: Path, work: Path, case: str, rounds: int,
                          url: str, **extra: str) -> dict[str, Any]:
    """Run agent-bench.el's CASE against the gateway at URL; return its JSON line.

    EXTRA are more of its environment's variables."""
    env = context.env(context.runtime_dir(f"agent-{case}"), LISPM_BENCH_GATEWAY=url,
                      LISPM_BENCH_DIR=str(work), LISPM_BENCH_CASE=case,
                      LISPM_BENCH_ROUNDS=str(rounds), TMPDIR=str(work), **extra)
    if profile := os.environ.get("LISPM_BENCH_PROFILE"):
        env["LISPM_BENCH_PROFILE"] = f"{profile}.{case}"
    return await run_emacs_json(
        [context.emacs, "--batch", "-Q", "-L", str(elisp), "-L", str(elisp / "apps"),
         "-l", str(BENCH_DIR / "agent-bench.el")],
        env, f"agent-bench.el {case}", TIMEOUT)


async def stream_cost(context: Context) -> list[Metric]:
    """`agent_stream_cost_ratio`: Emacs's CPU per KB, 2 MB answers over 20 KB ones."""
    work = context.work / "agent-stream"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    async with timed_gateway(context, work, script()) as url:
        data = await run_agent_bench(context, elisp, work, "stream", STREAM_ROUNDS, url)
    rounds = data["rounds"]

    def per_kb(size: int) -> list[float]:
        return [r["cpu_ms"] / (size / 1000) for r in rounds if r["size"] == size]

    small, large = per_kb(SMALL), per_kb(LARGE)
    gcs = [r["gcs"] for r in rounds if r["size"] == LARGE]
    gc_ms = [r["gc_ms"] for r in rounds if r["size"] == LARGE]
    wall = [r["wall_ms"] for r in rounds if r["size"] == LARGE]
    return [
        Metric("agent_stream_cost_ratio", median(large) / median(small), "×", Target("<=", 1.2),
               f"median of {len(large)} rounds each, side by side; Emacs's CPU time "
               "(current-cpu-time) from the send to the done event"),
        Metric("agent_stream_cpu_ms_per_kb_20kb", median(small), "ms/KB",
               note=f"rounds {spread(small)}; the answer checked whole"),
        Metric("agent_stream_cpu_ms_per_kb_2mb", median(large), "ms/KB",
               note=f"rounds {spread(large)}; {median(gcs):.0f} GCs, {median(gc_ms):.0f} ms "
               f"of GC; wall {median(wall) / 1000:.2f} s; the answer checked whole"),
    ]


async def _gateway_roundtrip_ms(url: str) -> list[float]:
    """Time GATEWAY_REQUESTS empty streamed requests to the gateway alone, in ms."""
    body = {"model": "bench", "max_tokens": 16, "stream": True,
            "messages": [{"role": "user", "content": "ping"}]}
    times = []
    async with aiohttp.ClientSession() as session:
        for n in range(10 + GATEWAY_REQUESTS):
            start = time.perf_counter()
            async with session.post(f"{url}/v1/messages", json=body) as response:
                await response.read()
                response.raise_for_status()
            if n >= 10:
                times.append((time.perf_counter() - start) * 1000)
    return times


async def _gateway_gaps_ms(url: str) -> list[float]:
    """From the gateway's log: each reply with a call's end to the next request, in ms."""
    async with aiohttp.ClientSession() as session, \
            session.get(f"{url}/_gateway/requests") as response:
        entries = await response.json()
    turns: dict[int, list[dict[str, Any]]] = {}
    turn = -1
    for entry in entries:
        if entry["kind"] != "main" or entry["prompt"] != STEP_PROMPT:
            continue
        if not entry["tool_results"]:
            turn += 1
        turns.setdefault(turn, []).append(entry)
    # Turn 0 is the untimed one, as in Emacs.
    return [(after["t"] - before["end_t"]) * 1000
            for number, requests in turns.items() if number > 0
            for before, after in itertools.pairwise(requests)]


async def tool_step(context: Context) -> list[Metric]:
    """`agent_tool_step_overhead_ms`: a reply with one `read_file` call to the next request."""
    work = context.work / "agent-step"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    async with timed_gateway(context, work, script()) as url:
        data = await run_agent_bench(context, elisp, work, "step", STEP_TURNS, url)
        gaps = await _gateway_gaps_ms(url)
        roundtrip = await _gateway_roundtrip_ms(url)
    sent = [ms for turn in data["turns"] for ms in turn["sent_ms"]]
    trace = [ms for turn in data["turns"] for ms in turn["trace_ms"]]
    cpu = [ms for turn in data["turns"] for ms in turn["cpu_ms"]]
    if len(sent) != STEPS * STEP_TURNS or len(gaps) != STEPS * STEP_TURNS:
        print(f"bench: agent step: {len(sent)} steps in Emacs, {len(gaps)} at the gateway",
              file=sys.stderr)
    return [
        Metric("agent_tool_step_overhead_ms", median(sent), "ms", Target("<=", 5),
               f"median of {len(sent)} steps ({spread(sent, digits=2)}): Emacs, from the "
               "done event to the next request written to the sidecar"),
        Metric("agent_tool_step_emacs_cpu_ms", median(cpu), "ms",
               note=f"Emacs's CPU time over the same steps ({spread(cpu, digits=2)})"),
        Metric("agent_tool_step_trace_ms", median(trace), "ms",
               note=f"the turn's trace: answer to the next `state request' "
               f"({spread(trace, digits=2)})"),
        Metric("agent_tool_step_gateway_gap_ms", median(gaps), "ms",
               note=f"the gateway: reply written to the next request read, sidecar "
               f"both ways included ({spread(gaps, digits=2)})"),
        Metric("agent_gateway_roundtrip_ms", median(roundtrip), "ms",
               note=f"one empty streamed request to the gateway alone, median of "
               f"{len(roundtrip)} ({spread(roundtrip, digits=2)})"),
    ]


async def tool_step_large(context: Context) -> list[Metric]:
    """`agent_tool_step_5mb_session_ratio`: a step's cost with 5 MB before it, over fresh."""
    work = context.work / "agent-step-large"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    async with timed_gateway(context, work, script()) as url:
        data = await run_agent_bench(context, elisp, work, "step-large", STEP_TURNS, url,
                                     LISPM_BENCH_SIZE=str(HUGE))

    def of(which: str, what: str) -> list[float]:
        return [ms for turn in data[which] for ms in turn[what]]

    fresh, large = of("fresh", "cpu_ms"), of("large", "cpu_ms")
    fresh_sent, large_sent = of("fresh", "sent_ms"), of("large", "sent_ms")
    chars = data["large"][0]["session_chars"]
    return [
        Metric("agent_tool_step_5mb_session_ratio", median(large) / median(fresh), "×",
               Target("<=", 1.5),
               f"Emacs's CPU per tool step with 5 MB of earlier conversation (a session of "
               f"{chars / 1e6:.1f} M characters), median {median(large):.2f} ms "
               f"({spread(large, digits=2)}), over the same step in a fresh session, "
               f"{median(fresh):.2f} ms ({spread(fresh, digits=2)}), side by side in one run"),
        Metric("agent_tool_step_5mb_session_sent_ms", median(large_sent), "ms",
               note=f"wall time from the answer to the next request written, with 5 MB "
               f"before it; fresh {median(fresh_sent):.2f} ms"),
    ]


async def prompt_cache(context: Context) -> list[Metric]:
    """`agent_prompt_prefix_stable_ratio` and `agent_cached_input_share` over a session."""
    work = context.work / "agent-session"
    work.mkdir(parents=True, exist_ok=True)
    elisp = await compiled_lispm(context)
    async with timed_gateway(context, work, script()) as url:
        data = await run_agent_bench(context, elisp, work, "session", CACHE_TURNS, url)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/_gateway/requests") as response:
                entries = [e for e in await response.json()
                           if e["kind"] == "main" and "Cache turn" in (e["prompt"] or "")]
            prompts = []
            for entry in entries:
                async with session.get(f"{url}/_gateway/requests/{entry['n']}/body") as response:
                    prompts.append(prompt_bytes(entry["api"], await response.json()))
    shares = [common_length(before, after) / len(before)
              for before, after in itertools.pairwise(prompts)]
    read = sum(e["prompt_tokens"]["cache_read"] for e in entries)
    total = sum(e["prompt_tokens"]["tokens"] for e in entries)
    return [
        Metric("agent_prompt_prefix_stable_ratio", sum(shares) / len(shares), "×",
               Target(">=", 0.95),
               f"{len(entries)} requests of a {data['turns']}-turn session with tool calls "
               f"(Anthropic's dialect): the mean share of each request's prompt (tools, "
               f"system, messages; cache marks aside) that the next begins with, byte for "
               f"byte; the least {min(shares):.3f}"),
        Metric("agent_cached_input_share", read / total, "×", Target(">=", 0.8),
               f"of {total} input tokens, {read} read from the cache as the gateway counts "
               f"it from what it got; the session's header says {data['cached']} of "
               f"{data['input']}"),
    ]
