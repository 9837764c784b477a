"""After Emacs restarts: what agents of the earlier Emacs left, over the real sidecar.

The earlier Emacs's sidecar is SIGKILLed with requests and messages still
waiting; a new sidecar opens the same ledger.  An agent that is resumed
gets what waits for it; an agent that is not (forgotten, or replaced by a
new agent of its name) leaves nothing for anyone: its requests end and
its queued messages fail, and the ledger says why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lispm_sidecar.kinds.codex.watcher import CodexWatcher
from lispm_sidecar.watchers import AgentActivity, Inotify

from . import test_watchers
from .sidecar_client import SidecarProcess
from .test_messaging import call, fake_emacs, ledger
from .test_watchers import Holder, append, joined, lines_of, rollout_path, settled

inotify = test_watchers.inotify
holders = test_watchers.holders


async def start(sidecar: SidecarProcess, name: str, instance: int, **more: Any) -> None:
    await sidecar.call("lispm/agent-start", {"name": name, "kind": "claude", "folder": "/tmp",
                                             "instance": instance, **more})


@pytest.fixture
async def restarted(tmp_path: Path) -> AsyncIterator[SidecarProcess]:
    """A new sidecar on the ledger an earlier one left, when its Emacs was killed:

    R1 claude → codex, R2 claude-2 → codex, R3 codex → claude-2, all still
    queued, and hermes's message to claude."""
    earlier = SidecarProcess(tmp_path / "run", fake_emacs)
    await earlier.start()
    await earlier.hello()
    for instance, name in enumerate(("claude", "codex", "claude-2", "hermes"), start=1):
        await start(earlier, name, instance)
    assert await call(earlier, "claude", "ask_agent", to="codex", request="review?") == \
        (False, "asked codex, request R1")
    assert await call(earlier, "claude-2", "ask_agent", to="codex", request="and mine?") == \
        (False, "asked codex, request R2")
    assert await call(earlier, "codex", "ask_agent", to="claude-2", request="which file?") == \
        (False, "asked claude-2, request R3")
    assert await call(earlier, "hermes", "send_message", to="claude", text="fyi") == \
        (False, "sent to claude")
    earlier.kill()
    await earlier.close()
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    yield process
    await process.close()


def by_text(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["text"]: entry for entry in entries}


async def test_what_a_resumed_agent_was_sent_waits_for_it(restarted: SidecarProcess) -> None:
    await start(restarted, "codex", 12, resume=True, session_id="thread-1")
    await start(restarted, "claude", 11, resume=True, session_id="session-1")
    entries = by_text(await ledger(restarted))
    assert [(e["state"], e["request_state"]) for e in
            (entries["review?"], entries["and mine?"], entries["which file?"])] == \
        [("queued", "open")] * 3
    assert entries["fyi"]["state"] == "queued"
    # The resumed agent's session id is the one it was given.
    served = {a["name"]: a for a in (await restarted.call("lispm/agents", {}))["agents"]}
    assert served["codex"]["session_id"] == "thread-1"


async def test_forgotten_agents_leave_nothing_for_anyone(restarted: SidecarProcess) -> None:
    await start(restarted, "codex", 12, resume=True)
    answer = await restarted.call("lispm/agents-forget", {"names": ["claude-2", "codex"]})
    assert answer == {"forgotten": ["claude-2"]}  # codex is live: it is not forgotten
    why = "claude-2 was not resumed after Emacs restarted"
    entries = by_text(await ledger(restarted))
    # claude-2 asked R2: it ends, and codex, which never saw it, will not.
    assert (entries["and mine?"]["state"], entries["and mine?"]["reason"],
            entries["and mine?"]["request_state"]) == ("failed", why, "ended")
    # R3 was asked of claude-2: it ends, and codex is told why.
    assert (entries["which file?"]["state"], entries["which file?"]["reason"],
            entries["which file?"]["request_state"]) == ("failed", why, "ended")
    notice = entries[f"claude-2 ended without replying to request R3 ({why})."]
    assert (notice["sender"], notice["recipient"], notice["state"]) == ("lispm", "codex", "queued")
    # What claude asked still waits: claude may yet be resumed.
    assert (entries["review?"]["state"], entries["review?"]["request_state"]) == \
        ("queued", "open")
    assert (await call(restarted, "codex", "reply", request="R2", text="late"))[0]


async def test_a_new_agent_of_a_remembered_name_gets_nothing_of_the_old(
        restarted: SidecarProcess) -> None:
    await start(restarted, "codex", 12, resume=True)
    await start(restarted, "hermes", 14, resume=True)
    await start(restarted, "claude", 21)  # a new claude, not resumed
    why = "claude was not resumed: a new claude started"
    entries = by_text(await ledger(restarted))
    assert (entries["review?"]["state"], entries["review?"]["reason"],
            entries["review?"]["request_state"]) == ("failed", why, "ended")
    assert (entries["fyi"]["state"], entries["fyi"]["reason"]) == ("failed", why)
    told = entries[f"Your message to claude was not delivered: {why}."]
    assert (told["recipient"], told["state"]) == ("hermes", "queued")
    # Nothing waits for the new claude; codex's reply to R1 is refused.
    assert not [e for e in await ledger(restarted)
                if e["recipient"] == "claude" and e["state"] == "queued"]
    late = await call(restarted, "codex", "reply", request="R1", text="here you are")
    assert late[0] and "R1" in late[1] and "has ended" in late[1], late
    # Another agent's requests are untouched.
    assert entries["and mine?"]["state"] == "queued"


async def test_a_delivered_request_of_a_forgotten_asker_gets_a_notice(tmp_path: Path) -> None:
    """The asked agent already had the request: it is told no reply is needed."""
    from lispm_sidecar.ledger import LedgerStore

    with LedgerStore(tmp_path / "ledger.sqlite3") as store:
        asked = store.ask("claude", "codex", "review?")
        store.mark_delivered(asked.message_id)
        store.send("hermes", "claude", "fyi")
        notices, failed = store.end_leftovers("claude", "claude was not resumed")
        assert [(m.recipient, m.text) for m in notices] == [
            ("codex", "Request R1 from claude needs no reply any more (claude was not resumed).")]
        assert [(m.text, m.state, m.reason) for m in failed] == [
            ("fyi", "failed", "claude was not resumed")]
        assert str(store.request("R1").state) == "ended"
        assert store.end_leftovers("claude", "again") == ([], [])


async def test_a_resumed_codex_is_bound_by_its_thread_and_waits(
        inotify: Inotify, tmp_path: Path, holders: Callable[[], Holder]) -> None:
    """The earlier Codex died in a turn: the resumed one, bound by its thread id
    before it writes anything, waits for its user (or for LispM)."""
    home = tmp_path / ".codex"
    thread = "01a22971-7f3c-7a11-9c3e-5d2b6e8f0a41"
    path = rollout_path(home, thread)
    path.parent.mkdir(parents=True)
    turn_open = lines_of("codex-reference.jsonl")[:9]
    append(path, joined(turn_open))
    fresh = CodexWatcher(inotify, home, holders().pid, tmp_path)
    resumed = CodexWatcher(inotify, home, holders().pid, tmp_path, resumed_thread=thread)
    await fresh.start()
    await resumed.start()
    assert (fresh.activity, fresh.cli_session) == (AgentActivity.UNKNOWN, None)
    assert (resumed.activity, resumed.rollout, resumed.cli_session) == \
        (AgentActivity.IDLE, path, thread)
    append(path, joined(turn_open[1:]))  # its next turn
    await settled(resumed, path)
    assert resumed.activity == AgentActivity.BUSY
    await fresh.stop()
    await resumed.stop()
