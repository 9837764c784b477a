"""Benchmarks of the agent watchers (`lispm_sidecar.watchers`).

- `watcher_200mb_vs_1mb_ratio`: a Claude watcher follows a 1 MB and another
  a 200 MB transcript (real lines, repeated).  One prompt line at a time
  is appended to either, alternately, and the time from the write to the
  watcher's callback is measured; the ratio of the medians (200 MB / 1 MB)
  should be ≤ 1.2, since only appended bytes are read.  Also reported:
  both medians and the time to attach a watcher to the 200 MB file (it
  reads backwards from the end, not the whole file).
- `watcher_idle_cpu_percent_50_agents`: 25 Claude and 25 Codex watchers on
  idle agents (each pid file or rollout belongs to a live process, a
  `sleep`, as the watchers check) for about 10 s: the process's CPU time
  (`time.process_time`) over wall time, in percent of one core.  The
  target is < 1 %; being event-driven, it is about 0.

Both are plain functions returning `{key: {"value": float, "unit": str}}`.
Run them as `python tests/bench/bench_watchers.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import orjson  # noqa: E402

from lispm_sidecar.kinds.claude.watcher import ClaudeWatcher, project_dir_name  # noqa: E402
from lispm_sidecar.kinds.codex.watcher import CodexWatcher  # noqa: E402
from lispm_sidecar.watchers import AgentActivity, Inotify  # noqa: E402
from lispm_sidecar.watchers.base import proc_start_time  # noqa: E402

FIXTURES = ROOT / "tests" / "python" / "fixtures" / "transcripts"
MB = 1024 * 1024

Result = dict[str, dict[str, float | str]]


def _lines(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines()


def _write_pid_file(claude_home: Path, pid: int, session_id: str, cwd: Path) -> None:
    info = orjson.loads((FIXTURES / "claude-pid-idle.json").read_bytes())
    info.update(pid=pid, sessionId=session_id, cwd=str(cwd), status="idle",
                procStart=str(proc_start_time(pid)))
    sessions = claude_home / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / f"{pid}.json").write_bytes(orjson.dumps(info))


def _transcript(claude_home: Path, cwd: Path, session_id: str, size: int) -> Path:
    """A transcript of about SIZE bytes of real turns, ending at a turn end."""
    turn = b"".join(line + b"\n" for line in _lines("claude-interactive.jsonl")[3:13])
    folder = claude_home / "projects" / project_dir_name(os.path.realpath(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session_id}.jsonl"
    block = turn * max(1, MB // len(turn))
    with open(path, "wb") as f:
        written = 0
        while written + len(block) <= size:
            f.write(block)
            written += len(block)
        while written < size:
            f.write(turn)
            written += len(turn)
    return path


def _append_latency(work: Path, rounds: int) -> Result:
    cwd = work / "proj"
    cwd.mkdir()
    home = work / ".claude"
    sessions = {"1mb": "00000000-0000-4000-8000-000000000001",
                "200mb": "00000000-0000-4000-8000-000000000200"}
    paths = {"1mb": _transcript(home, cwd, sessions["1mb"], 1 * MB),
             "200mb": _transcript(home, cwd, sessions["200mb"], 200 * MB)}
    # Each watcher's "claude" is a live process with a pid file of its own.
    sleepers = {size: subprocess.Popen(["sleep", "600"]) for size in sessions}
    try:
        for size, session in sessions.items():
            _write_pid_file(home, sleepers[size].pid, session, cwd)
        pids = {size: sleeper.pid for size, sleeper in sleepers.items()}
        return asyncio.run(_measure_appends(home, cwd, sessions, paths, pids, rounds))
    finally:
        for sleeper in sleepers.values():
            sleeper.kill()
            sleeper.wait()


async def _measure_appends(home: Path, cwd: Path, sessions: dict[str, str],
                           paths: dict[str, Path], pids: dict[str, int],
                           rounds: int) -> Result:
    prompt = _lines("claude-interactive.jsonl")[4] + b"\n"
    with Inotify() as inotify:
        watchers: dict[str, ClaudeWatcher] = {}
        attach: dict[str, float] = {}
        for size, session in sessions.items():
            watcher = ClaudeWatcher(inotify, home, pids[size], session, cwd)
            start = time.perf_counter()
            await watcher.start()
            attach[size] = time.perf_counter() - start
            assert watcher.activity == AgentActivity.IDLE, watcher.describe()
            watchers[size] = watcher
        fired: asyncio.Future[float] | None = None

        def on_change() -> None:
            if fired is not None and not fired.done():
                fired.set_result(time.perf_counter())

        for watcher in watchers.values():
            watcher.subscribe(on_change)
        loop = asyncio.get_running_loop()
        samples: dict[str, list[float]] = {"1mb": [], "200mb": []}
        fds = {size: os.open(path, os.O_WRONLY | os.O_APPEND) for size, path in paths.items()}
        try:
            for i in range(rounds * 2):
                size = "1mb" if i % 2 == 0 else "200mb"
                fired = loop.create_future()
                start = time.perf_counter()
                os.write(fds[size], prompt)
                end = await asyncio.wait_for(fired, 5)
                samples[size].append(end - start)
                await asyncio.sleep(0.002)
        finally:
            for fd in fds.values():
                os.close(fd)
            for watcher in watchers.values():
                await watcher.stop()
    small = statistics.median(samples["1mb"])
    large = statistics.median(samples["200mb"])
    return {
        "watcher_200mb_vs_1mb_ratio": {"value": large / small, "unit": "x"},
        "watcher_append_latency_1mb": {"value": small * 1e6, "unit": "us"},
        "watcher_append_latency_200mb": {"value": large * 1e6, "unit": "us"},
        "watcher_attach_200mb": {"value": attach["200mb"] * 1e3, "unit": "ms"},
    }


def watcher_200mb_vs_1mb_ratio(rounds: int = 400) -> Result:
    """Median append-to-callback time on a 200 MB transcript over a 1 MB one."""
    with tempfile.TemporaryDirectory(prefix="lispm-bench-watchers-") as folder:
        return _append_latency(Path(folder), rounds)


def _idle_agents(work: Path, agents: int, seconds: float) -> Result:
    """Files of AGENTS idle agents, each owned by a live `sleep`, then the run."""
    claude_home = work / ".claude"
    codex_home = work / ".codex"
    day = codex_home / "sessions" / "2026" / "11" / "30"
    idle_claude = b"".join(line + b"\n" for line in _lines("claude-interactive.jsonl")[:13])
    idle_codex = b"".join(line + b"\n" for line in _lines("codex-rollout.jsonl")[:14])
    sleepers: list[subprocess.Popen[bytes]] = []
    specs: list[tuple[str, int, str, Path]] = []
    try:
        for n in range(agents):
            cwd = work / f"proj-{n}"
            cwd.mkdir()
            if n % 2 == 0:
                sleeper = subprocess.Popen(["sleep", str(seconds + 60)])
                session = f"00000000-0000-4000-8000-{n:012}"
                _write_pid_file(claude_home, sleeper.pid, session, cwd)
                folder = claude_home / "projects" / project_dir_name(str(cwd.resolve()))
                folder.mkdir(parents=True)
                (folder / f"{session}.jsonl").write_bytes(idle_claude)
                specs.append(("claude", sleeper.pid, session, cwd))
            else:
                day.mkdir(parents=True, exist_ok=True)
                thread = f"01a229de-0000-7000-8000-{n:012}"
                rollout = day / f"rollout-2026-11-30T00-00-00-{thread}.jsonl"
                rollout.write_bytes(idle_codex)
                with open(rollout, "ab") as held:       # the "codex" holds it open
                    sleeper = subprocess.Popen(["sleep", str(seconds + 60)], stdout=held)
                specs.append(("codex", sleeper.pid, thread, cwd))
            sleepers.append(sleeper)
        return asyncio.run(_idle_cpu(claude_home, codex_home, specs, seconds))
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


async def _idle_cpu(claude_home: Path, codex_home: Path,
                    specs: list[tuple[str, int, str, Path]], seconds: float) -> Result:
    with Inotify() as inotify:
        watchers: list[ClaudeWatcher | CodexWatcher] = [
            ClaudeWatcher(inotify, claude_home, pid, session, cwd) if kind == "claude"
            else CodexWatcher(inotify, codex_home, pid, cwd)
            for kind, pid, session, cwd in specs]
        for watcher in watchers:
            await watcher.start()
        not_idle = [w.describe() for w in watchers if w.activity != AgentActivity.IDLE]
        assert not not_idle, not_idle
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        kernel_watches = inotify.watch_count
        for watcher in watchers:
            await watcher.stop()
    return {
        "watcher_idle_cpu_percent_50_agents": {"value": 100 * cpu / wall, "unit": "%"},
        "watcher_inotify_watches_50_agents": {"value": float(kernel_watches), "unit": "watches"},
    }


def watcher_idle_cpu_percent_50_agents(seconds: float = 10.0, agents: int = 50) -> Result:
    """CPU use of AGENTS idle watchers (half Claude, half Codex), % of one core."""
    with tempfile.TemporaryDirectory(prefix="lispm-bench-watchers-") as folder:
        return _idle_agents(Path(folder), agents, seconds)


if __name__ == "__main__":
    results = {**watcher_200mb_vs_1mb_ratio(), **watcher_idle_cpu_percent_50_agents()}
    print(json.dumps(results, indent=2))
