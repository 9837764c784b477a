"""Benchmarks of the request/reply ledger (`lispm_sidecar.ledger`).

- `ledger_pairs_per_s`: 10,000 ask/reply pairs through the asyncio facade
  the sidecar uses, made by 50 agents at once, each asking its neighbour
  (agent k asks agent k+1, the last the first): 50 conversations, each one
  pair after another: an ask, awaited, then its reply, awaited.  A call
  returns only after its commit (WAL, `synchronous=FULL`), so a pair counts
  only once both of its changes are durable; calls that wait together
  share one commit (group commit).
  The note gives the commits the run made, counted by SQLite's trace hook.
  `ledger_pairs_sequential_per_s`: 2,000 pairs by one conversation alone,
  where every call is its own commit.
- `ledger_recovery_100k_s`: a ledger of 100,000 entries (answered requests,
  open requests, delivered and queued messages) is built and closed; then
  the time to open it and load what a restarted sidecar needs: the queued
  messages of every recipient and the open requests.  The median of three
  openings.  `ledger_recovery_100k_crash_s` is the same after the builder
  died without closing (the WAL is not checkpointed, so SQLite rebuilds
  its index on opening).

The files live in a temporary folder on the default temporary file system
(set `TMPDIR` to measure another disk).  Run one as
`python tests/bench/bench_ledger.py`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from lispm_sidecar.ledger import Ledger, LedgerStore  # noqa: E402

PAIRS = 10_000
SEQUENTIAL_PAIRS = 2_000
AGENTS_AT_ONCE = 50
ENTRIES = 100_000
AGENTS = ["claude", "codex", "claude-2", "codex-2", "claude-3", "codex-3", "gemini", "aider"]
TEXT = "Please look at the failing test in tests/python and tell me what you find. " * 3

Result = dict[str, dict[str, float | str]]


async def _pairs(path: Path, pairs: int, agents: int) -> tuple[float, int]:
    """Make PAIRS pairs, AGENTS agents each asking its neighbour; return (seconds, commits).

    With one agent, one conversation alone (it asks another, which replies)."""
    async with await Ledger.open(path) as ledger:
        commits = 0

        def count(statement: str) -> None:
            nonlocal commits
            commits += statement == "COMMIT"

        await ledger.run(lambda store: store._conn.set_trace_callback(count))

        async def converse(k: int) -> None:
            asker, asked = f"agent-{k}", f"agent-{(k + 1) % max(agents, 2)}"
            for _ in range(k, pairs, agents):
                request = await ledger.ask(asker, asked, TEXT)
                await ledger.reply(asked, request.id, TEXT)

        start = time.perf_counter()
        await asyncio.gather(*(converse(k) for k in range(agents)))
        seconds = time.perf_counter() - start
        answered = await ledger.run(lambda store: store._conn.execute(
            "SELECT count(*) FROM requests WHERE state = 'answered'").fetchone()[0])
        assert answered == pairs, (answered, pairs)
        return seconds, commits


def ledger_pairs_per_s(pairs: int = PAIRS, sequential_pairs: int = SEQUENTIAL_PAIRS) -> Result:
    """Durable ask/reply pairs per second: many conversations at once, and one alone."""
    with tempfile.TemporaryDirectory(prefix="lispm-bench-ledger-") as folder:
        seconds, commits = asyncio.run(_pairs(Path(folder) / "ledger.db", pairs, AGENTS_AT_ONCE))
        alone, _ = asyncio.run(_pairs(Path(folder) / "alone.db", sequential_pairs, 1))
    return {
        "ledger_pairs_per_s": {
            "value": pairs / seconds, "unit": "pairs/s",
            "note": f"{AGENTS_AT_ONCE} agents at once; {commits:,} commits for "
                    f"{2 * pairs:,} calls"},
        "ledger_pairs_sequential_per_s": {
            "value": sequential_pairs / alone, "unit": "pairs/s",
            "note": "one conversation; every call its own commit"},
    }


def build(path: Path, entries: int = ENTRIES) -> None:
    """Fill a ledger at PATH with ENTRIES messages of every kind and state.

    Per 20 entries: 7 answered requests (14 messages, all picked up), 2 open
    requests (one picked up, one queued), 2 messages picked up, 2 queued.
    """
    with LedgerStore(path) as store, store.batch():
        for block in range(entries // 20):
            _build_block(store, block)


def _build_block(store: LedgerStore, block: int) -> None:
    def pair(k: int) -> tuple[str, str]:
        first = AGENTS[(block + k) % len(AGENTS)]
        return first, AGENTS[(block + k + 1 + k % 3) % len(AGENTS)]

    for k in range(7):
        asker, asked = pair(k)
        request = store.ask(asker, asked, TEXT)
        _pick_up(store, request.message_id)
        _pick_up(store, store.reply(asked, request.id, TEXT).id)
    for k in range(2):
        asker, asked = pair(k + 7)
        request = store.ask(asker, asked, TEXT)
        if k == 0:
            _pick_up(store, request.message_id)
    for k in range(4):
        sender, recipient = pair(k + 9)
        message = store.send(sender, recipient, TEXT)
        if k < 2:
            _pick_up(store, message.id)


def _pick_up(store: LedgerStore, message_id: int) -> None:
    store.mark_delivered(message_id)
    store.mark_picked_up(message_id)


def recover(path: Path) -> tuple[float, int, int]:
    """Open PATH as a restarted sidecar would; return (seconds, queued, open requests)."""
    start = time.perf_counter()
    with LedgerStore(path) as store:
        queued = {name: store.queued_for(name) for name in store.recipients_with_queued()}
        waiting = store.open_requests()
        seconds = time.perf_counter() - start
    return seconds, sum(len(q) for q in queued.values()), len(waiting)


_CRASHING_BUILDER = """
import os, sys
sys.path.insert(0, sys.argv[1])
from tests.bench.bench_ledger import LedgerStore, _build_block, ENTRIES
store = LedgerStore(sys.argv[2])
with store.batch():
    for block in range(ENTRIES // 20):
        _build_block(store, block)
os._exit(0)
"""


def _crashed_build(path: Path) -> None:
    subprocess.run(
        [sys.executable, "-c", _CRASHING_BUILDER, str(ROOT), str(path)],
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'python'}"},
    )


def ledger_recovery_100k_s() -> Result:
    """Seconds to reopen a 100,000-entry ledger and load its queues and open requests."""
    with tempfile.TemporaryDirectory(prefix="lispm-bench-ledger-") as folder:
        clean = Path(folder) / "clean.db"
        build(clean)
        runs = [recover(clean) for _ in range(3)]
        expected = (ENTRIES // 20 * 3, ENTRIES // 20 * 2)
        assert all(run[1:] == expected for run in runs), (runs, expected)
        crashed = Path(folder) / "crashed.db"
        _crashed_build(crashed)
        wal = crashed.with_name(crashed.name + "-wal")
        assert wal.exists() and wal.stat().st_size > 0
        crash_seconds, *loaded = recover(crashed)
        assert tuple(loaded) == expected, (loaded, expected)
    return {
        "ledger_recovery_100k_s": {
            "value": statistics.median(run[0] for run in runs), "unit": "s"},
        "ledger_recovery_100k_crash_s": {"value": crash_seconds, "unit": "s"},
    }


if __name__ == "__main__":
    for bench in (ledger_pairs_per_s, ledger_recovery_100k_s):
        for key, result in bench().items():
            print(f"{key}: {result['value']:.4g} {result['unit']}")
