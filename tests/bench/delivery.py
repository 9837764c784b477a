"""Message delivery: from the write that makes an agent idle to the paste in its pty.

A batch Emacs (`delivery-host.el`) runs LispM with the real sidecar and
starts a Claude Code agent whose CLI is `fake_claude.py`, in a real LispM
terminal, and a second agent without a CLI.  The fake CLI keeps Claude
Code's pid file and transcript under a temporary HOME (the sidecar's
too), so the sidecar's own `ClaudeWatcher` follows it.  Each round, while
the fake is busy, this driver queues one 4 KB message for it with the
real MCP tool `send_message`, called on the second agent's server; the
message goes into the ledger and the fake's `DeliveryQueue`.  When the
fake's idle write lands, the queue asks Emacs (`emacs/paste`) to paste it
into the terminal.  The fake times both ends: `t0` right before its idle
write, `t1` when `ESC[200~` is read from its pty.

Beside it, in this process, a 1 s poller reads the same pid file and
transcript once a second and notes when it first sees each idle moment;
the fake stays idle until the poller has seen it.  The poller only
*detects*: its delivery would still have to paste.

Emacs times its own part of each delivery (see `delivery-host.el`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shlex
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core import BENCH_DIR, ROOT, TARGETS, Context, Metric, median, percentile, read_token
from .mcp_path import mcp_client

ROUNDS = 50
WARMUP = 2
MESSAGE_BYTES = 4096
POLL_INTERVAL = 1.0
#: How long the fake stays idle at most, waiting for the poller to see it.
POLL_WAIT = 2.5
START_TIMEOUT = 60.0
RUN_TIMEOUT = 240.0
SEED = 20261130


def message_text(number: int, size: int = MESSAGE_BYTES) -> str:
    """A plain-text message of SIZE bytes, in lines, tagged with NUMBER."""
    head = f"Delivery benchmark, message {number:03d}.\n"
    line = "Please look at the failing test in tests/python and tell me what you find.\n"
    body = (line * (size // len(line) + 1))[: size - len(head)]
    return head + body


def expected_paste(sender: str, text: str) -> bytes:
    """What the fake should read between `ESC[200~` and `ESC[201~`: the rendered message."""
    return f"[Message from {sender}]\n{text}".encode()


@dataclass
class Poller:
    """A 1 s poller of the fake's pid file and transcript: when does it see idle?"""

    pid_file: Path
    transcript: Path
    seen: dict[int, float] = field(default_factory=dict)
    checks: int = 0
    _events: dict[int, asyncio.Event] = field(default_factory=dict)

    def event(self, number: int) -> asyncio.Event:
        """The event set when round NUMBER's idle moment has been seen."""
        return self._events.setdefault(number, asyncio.Event())

    def _last_line(self) -> bytes:
        with open(self.transcript, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            lines = f.read().splitlines()
        return lines[-1] if lines else b""

    def check(self) -> None:
        """Look once: idle is status `idle` and a turn end as the last entry."""
        self.checks += 1
        try:
            status = json.loads(self.pid_file.read_bytes()).get("status")
            last = json.loads(self._last_line())
            idle = status == "idle" and last.get("type") == "system" \
                and last.get("subtype") == "turn_duration"
            number = int(str(last.get("uuid"))[-12:]) if idle else -1
        except (OSError, ValueError, AttributeError):
            return
        if idle and number not in self.seen:
            self.seen[number] = time.time()
            self.event(number).set()

    async def run(self) -> None:
        """Check every `POLL_INTERVAL` seconds, on a fixed grid, until cancelled."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        ticks = 0
        while True:
            self.check()
            ticks += 1
            await asyncio.sleep(max(0.0, start + ticks * POLL_INTERVAL - loop.time()))


@dataclass
class Run:
    """What one run of the benchmark measured."""

    rounds: list[dict[str, Any]]
    poller: dict[int, float]
    emacs: dict[str, Any]
    backend: str
    mismatches: int


def _wrapper(folder: Path, context: Context, control: Path, results: Path, rounds: int) -> Path:
    """Write the executable LispM starts as `claude`: the fake, with its bench options."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claude"
    command = [context.python, str(BENCH_DIR / "fake_claude.py"),
               "--bench-control", str(control), "--bench-results", str(results),
               "--bench-rounds", str(rounds), "--bench-warmup", str(WARMUP),
               "--bench-seed", str(SEED)]
    path.write_text(f"#!/bin/sh\nexec {shlex.join(command)} \"$@\"\n")
    path.chmod(0o700)
    return path


async def _read(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    line = await asyncio.wait_for(reader.readline(), START_TIMEOUT)
    return json.loads(line) if line else None


def _send(writer: asyncio.StreamWriter, kind: str, number: int) -> None:
    writer.write(json.dumps({"kind": kind, "round": number}).encode() + b"\n")


async def _drive(host: dict[str, Any], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> tuple[Poller, int]:
    """Answer the fake round by round; return the poller and the paste mismatches."""
    ready = await _read(reader)
    if ready is None or ready.get("kind") != "ready":
        raise RuntimeError(f"the fake Claude did not start: {ready}")
    poller = Poller(Path(ready["pid_file"]), Path(ready["transcript"]))
    mismatches = 0
    expected: dict[int, bytes] = {}
    token = read_token(host["token_file"])
    async with mcp_client(host["url"], token) as sender:
        polling = asyncio.create_task(poller.run(), name="poller-1s")
        try:
            while (message := await _read(reader)) is not None:
                number = int(message["round"])
                if message["kind"] == "busy":
                    text = message_text(number)
                    expected[number] = expected_paste(host["sender"], text)
                    result = await sender.call_tool(
                        "send_message", {"to": host["claude"], "text": text})
                    if result.is_error:
                        raise RuntimeError(f"send_message failed: {result.content}")
                    _send(writer, "queued", number)
                elif message["kind"] == "pasted":
                    want = expected.get(number, b"")
                    if message["length"] != len(want) or message["stray"] or \
                            message["sha256"] != hashlib.sha256(want).hexdigest():
                        mismatches += 1
                    if not message["warmup"]:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(poller.event(number).wait(), POLL_WAIT)
                    _send(writer, "next", number)
                await writer.drain()
        finally:
            polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await polling
    return poller, mismatches


def _kill_if_fake(pid: int) -> None:
    """Kill PID if it still is the fake CLI (it should have exited)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"fake_claude.py" in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def run_once(context: Context, rounds: int = ROUNDS) -> Run:
    """Run the fake Claude for ROUNDS measured rounds under a batch Emacs."""
    work = context.work / "delivery"
    home, project, bin_dir = work / "home", work / "project", work / "bin"
    for folder in (home, project):
        folder.mkdir(parents=True, exist_ok=True)
    control, results = work / "control.sock", work / "fake-results.json"
    out, stop, samples = work / "host.json", work / "stop", work / "emacs-samples.json"
    wrapper = _wrapper(bin_dir, context, control, results, rounds)
    env = context.env(
        context.runtime_dir("delivery"),
        HOME=str(home),
        LISPM_BENCH_HOST_OUT=str(out),
        LISPM_BENCH_HOST_STOP=str(stop),
        LISPM_BENCH_DELIVERY_SAMPLES=str(samples),
        LISPM_BENCH_FAKE_CLAUDE=str(wrapper),
        LISPM_BENCH_PROJECT=str(project),
    )
    env.pop("CLAUDE_CONFIG_DIR", None)
    connected: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await connected.put((reader, writer))

    server = await asyncio.start_unix_server(accept, path=str(control))
    log_path = work / "emacs.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        proc = await asyncio.create_subprocess_exec(
            *context.emacs_command("-l", str(BENCH_DIR / "delivery-host.el")),
            cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=log_fd)
    finally:
        os.close(log_fd)

    def failure(what: str) -> RuntimeError:
        log = log_path.read_text(errors="replace")[-4000:]
        fake = results.read_text(errors="replace") if results.exists() else ""
        return RuntimeError(f"delivery benchmark: {what}\nfake: {fake}\nemacs log:\n{log}")

    host: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not out.exists():
            if proc.returncode is not None or time.monotonic() > deadline:
                raise failure("delivery-host.el did not start its agents")
            await asyncio.sleep(0.05)
        host = json.loads(out.read_text())
        try:
            reader, writer = await asyncio.wait_for(connected.get(), START_TIMEOUT)
        except TimeoutError:
            raise failure("the fake Claude did not connect") from None
        try:
            poller, mismatches = await asyncio.wait_for(_drive(host, reader, writer),
                                                        RUN_TIMEOUT)
        except (TimeoutError, RuntimeError, KeyError) as err:
            raise failure(f"the rounds failed: {err!r}") from err
        finally:
            writer.close()
    finally:
        stop.touch()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        server.close()
        await server.wait_closed()
        if host.get("claude_pid"):
            _kill_if_fake(int(host["claude_pid"]))
    fake = json.loads(results.read_text()) if results.exists() else {}
    if "rounds" not in fake:
        raise failure(f"the fake Claude wrote no results: {fake}")
    emacs = json.loads(samples.read_text()) if samples.exists() else {}
    return Run(fake["rounds"], poller.seen, emacs, str(host.get("backend")), mismatches)


async def delivery(context: Context) -> list[Metric]:
    """Delivery latency, against a 1 s poller, and Emacs's time per delivery."""
    run = await run_once(context)
    measured = [r for r in run.rounds if not r["warmup"]]
    if run.mismatches:
        raise RuntimeError(f"{run.mismatches} pastes differ from the messages sent, "
                           "or came with other bytes")
    latency = [(r["t1"] - r["t0"]) * 1000 for r in measured]
    polled = [(run.poller[r["round"]] - r["t0"]) * 1000
              for r in measured if r["round"] in run.poller]
    if len(polled) < len(measured):
        raise RuntimeError(f"the 1 s poller saw {len(polled)} of {len(measured)} idle moments")

    gcs = f"{run.emacs.get('gcs', 0)} GCs in Emacs ({float(run.emacs.get('gc_ms', 0)):.0f} ms)"

    def emacs_ms(key: str) -> list[float]:
        # One value per delivery, the warm-up rounds first.
        values = [float(v) for v in run.emacs.get(key) or []]
        if len(values) != len(run.rounds):
            raise RuntimeError(f"Emacs timed {len(values)} {key}s for {len(run.rounds)} rounds")
        return values[WARMUP:]

    paste, request, link, ret = (emacs_ms(k) for k in ("paste", "request", "link", "return"))
    total = [a + b for a, b in zip(link, ret, strict=True)]
    n = len(measured)
    size = measured[0]["length"]
    ours, theirs = median(latency), median(polled)

    def metric(key: str, value: float, unit: str, note: str) -> Metric:
        return Metric(key, value, unit, TARGETS.get(key), note)

    return [
        metric("delivery_latency_median_ms", ours, "ms",
               f"{n} rounds, {size} B pastes, {run.backend}; idle write → ESC[200~ in the pty"),
        metric("delivery_latency_p99_ms", percentile(latency, 0.99), "ms",
               f"max {max(latency):.1f} ms"),
        metric("delivery_vs_1s_poller_ratio", ours / theirs, "×",
               "our median / a 1 s poller's median detection; smaller is better"),
        metric("delivery_poller_1s_median_ms", theirs, "ms",
               f"idle write → seen by a 1 s poller; p99 {percentile(polled, 0.99):.0f} ms"),
        metric("delivery_emacs_blocked_ms", median(paste), "ms",
               "median lispm-paste-submit per 4 KB delivery"),
        metric("delivery_emacs_blocked_p99_ms", percentile(paste, 0.99), "ms",
               f"lispm-paste-submit; {run.emacs.get('paste_gcs', 0)} GCs inside it"),
        metric("delivery_emacs_request_ms", median(request), "ms",
               "median emacs/paste dispatch: handler, paste, answer"),
        metric("delivery_emacs_total_ms", median(total), "ms",
               f"median all Emacs work per delivery (link + Return); max "
               f"{max(total):.2f} ms; {gcs}"),
    ]
