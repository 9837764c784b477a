"""The delivery queue: when a message goes in, and what the ledger records.

The queue is driven here by a watcher whose state the test sets, the way a
CLI's records would, and hands messages to a recorder instead of Emacs.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from lispm_sidecar import delivery
from lispm_sidecar.delivery import DeliveryQueue, render
from lispm_sidecar.errors import LispmError, NotNow
from lispm_sidecar.ledger import Ledger, LedgerStore, Message
from lispm_sidecar.watchers import AgentActivity, Watcher


class SetWatcher(Watcher):
    """A watcher whose activity and prompts the test sets; it counts how often
    the queue asked it whether the agent takes a message."""

    kind = "test"
    consulted = 0

    def accepts_delivery(self) -> bool:
        self.consulted += 1
        return super().accepts_delivery()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return self._state()

    def set(self, activity: AgentActivity, prompts: int = 0) -> None:
        self._update(activity, prompts=prompts)


class Recorder:
    """A hand-over that records what it was given, and when the ledger said delivered."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.texts: list[str] = []
        self.states_during: list[str] = []
        self.fail_next = False
        self.not_now = 0
        self.refused = 0
        self.confirms = False
        self.given = asyncio.Event()

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        if self.fail_next:
            self.fail_next = False
            raise LispmError("the terminal is gone")
        if self.not_now:
            self.not_now -= 1
            self.refused += 1
            raise NotNow("codex shows a confirmation dialog")
        queued = await self.ledger.entries(10, name)
        self.states_during.append(queued[0].state)
        self.texts.append(text)
        self.given.set()
        return self.confirms

    async def ready(self, name: str, instance: int) -> None:
        if self.not_now:
            self.not_now -= 1
            self.refused += 1
            raise NotNow("codex shows a confirmation dialog")


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    store = await Ledger.open(tmp_path / "ledger.sqlite3")
    yield store
    await store.close()


async def until(check: Callable[[], bool | Awaitable[bool]], what: str,
                seconds: float = 5) -> None:
    """Return once CHECK holds (it may be a coroutine function); fail after SECONDS."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def looked(watcher: SetWatcher, since: int) -> None:
    """Wait until the queue has asked WATCHER again since it had asked SINCE times:
    it has seen the state set before (and acted on it, if it could)."""
    await until(lambda: watcher.consulted > since, "the queue to look at the watcher")


def waits_for_pickup(watcher: SetWatcher) -> bool:
    """Whether the queue follows WATCHER twice: once as ever, once for a pickup."""
    return len(watcher._subscribers) == 2


async def states(ledger: Ledger) -> list[str]:
    """The states of codex's messages, newest first."""
    return [e.state for e in await ledger.entries(10, "codex")]


async def _failed(ledger: Ledger) -> bool:
    return await states(ledger) == ["failed"]


async def _all_picked_up(ledger: Ledger) -> bool:
    return await states(ledger) == ["picked_up", "picked_up"]


async def make_queue(ledger: Ledger) -> tuple[DeliveryQueue, SetWatcher, Recorder]:
    recorder = Recorder(ledger)
    queue = DeliveryQueue("codex", 1, ledger, recorder, lambda _q: None)
    watcher = SetWatcher()
    queue.start()
    queue.attach(watcher)
    return queue, watcher, recorder


async def test_nothing_goes_in_unless_the_agent_is_idle(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    await ledger.send("claude", "codex", "hello")
    queue.wake()
    for activity in (AgentActivity.UNKNOWN, AgentActivity.BUSY,
                     AgentActivity.WAITING_FOR_APPROVAL):
        since = watcher.consulted
        watcher.set(activity)
        await looked(watcher, since)
        assert recorder.texts == [], activity
    assert queue.queued == 1
    watcher.set(AgentActivity.IDLE)
    await asyncio.wait_for(recorder.given.wait(), 5)
    assert recorder.texts == ["[Message from claude]\nhello"]
    await queue.stop()


async def test_one_message_per_pickup_in_order(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    for text in ("one", "two", "three"):
        await ledger.send("claude", "codex", text)
    watcher.set(AgentActivity.IDLE)
    await asyncio.wait_for(recorder.given.wait(), 5)
    await until(lambda: waits_for_pickup(watcher), "the wait for the pickup")
    # The first is in; the next waits for the CLI to record it and go idle again.
    assert recorder.texts == ["[Message from claude]\none"]
    since = watcher.consulted
    watcher.set(AgentActivity.BUSY, prompts=1)
    await looked(watcher, since)
    assert len(recorder.texts) == 1
    assert await states(ledger) == ["queued", "queued", "picked_up"]
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 2, "the second message")
    watcher.set(AgentActivity.BUSY, prompts=1)
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 3, "the third message")
    assert [t.split("\n")[1] for t in recorder.texts] == ["one", "two", "three"]
    assert (await states(ledger))[1:] == ["picked_up", "picked_up"]
    await queue.stop()


async def test_claim_is_durable_before_the_paste(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    await ledger.send("claude", "codex", "at most once")
    watcher.set(AgentActivity.IDLE)
    await asyncio.wait_for(recorder.given.wait(), 5)
    assert recorder.states_during == ["delivered"]
    await queue.stop()


async def test_unconfirmed_pickup_moves_on_after_the_timeout(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "PICKUP_TIMEOUT", 0.2)
    queue, watcher, recorder = await make_queue(ledger)
    await ledger.send("claude", "codex", "first")
    await ledger.send("claude", "codex", "second")
    watcher.set(AgentActivity.IDLE)
    await until(lambda: len(recorder.texts) == 2, "the second message")
    assert [t.split("\n")[1] for t in recorder.texts] == ["first", "second"]
    assert {e.state for e in await ledger.entries(10, "codex")} == {"delivered"}
    await queue.stop()


async def test_a_failed_hand_over_is_recorded_and_not_retried(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    recorder.fail_next = True
    await ledger.send("claude", "codex", "lost")
    watcher.set(AgentActivity.IDLE)
    await until(lambda: _failed(ledger), "the failure in the ledger")
    [entry] = await ledger.entries(10, "codex")
    assert (entry.state, entry.reason) == ("failed", "the terminal is gone")
    assert recorder.texts == []
    await queue.stop()


def count_writes(store: LedgerStore) -> list[str]:
    """Trace STORE's connection; return the list its writing statements go to."""
    writes: list[str] = []
    store._conn.set_trace_callback(
        lambda sql: writes.append(sql) if sql.split()[0] in ("INSERT", "UPDATE", "DELETE")
        else None)
    return writes


async def test_a_dialog_on_screen_holds_the_message_until_it_closes(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "NOT_NOW_RETRY", 0.05)
    queue, watcher, recorder = await make_queue(ledger)
    recorder.not_now = 5
    sent = await ledger.send("claude", "codex", "after the dialog")
    writes = await ledger.run(count_writes)
    watcher.set(AgentActivity.IDLE)
    await until(lambda: recorder.refused >= 2, "the first look again")
    # Refused: nothing was pasted, so the claim was taken back: queued again,
    # no attempt counted, still waiting, not failed, not lost.
    assert recorder.texts == []
    entry = await ledger.message(sent.id)
    assert (entry.state, entry.attempts) == ("queued", 0)
    assert queue.queued == 1
    # Asked again with no event from the watcher, until the dialog is gone.
    await asyncio.wait_for(recorder.given.wait(), 5)
    assert recorder.texts == ["[Message from claude]\nafter the dialog"]
    assert recorder.refused == 5
    # The claim, taking it back, the claim of the paste: the four times
    # the queue asked in between wrote nothing.
    assert [w.split("SET state = ")[1][:11] for w in writes] == \
        ["'delivered'", "'queued', d", "'delivered'"], writes
    assert (await ledger.message(sent.id)).attempts == 1
    await queue.stop()


async def test_stopping_while_a_dialog_is_open_leaves_the_message_queued(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "NOT_NOW_RETRY", 0.05)
    queue, watcher, recorder = await make_queue(ledger)
    recorder.not_now = 1000
    sent = await ledger.send("claude", "codex", "the dialog stays")
    watcher.set(AgentActivity.IDLE)
    await until(lambda: recorder.refused >= 2, "a retry")
    await queue.stop()
    # The paste never happened: queued, for the next run (or to fail).
    assert ((await ledger.message(sent.id)).state, recorder.texts) == ("queued", [])


async def test_a_confirmed_hand_over_is_picked_up_at_once(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    recorder.confirms = True  # a daemon or Gateway that accepted it
    for text in ("one", "two"):
        await ledger.send("claude", "codex", text)
    watcher.set(AgentActivity.IDLE)
    await until(lambda: _all_picked_up(ledger), "both picked up")
    # No prompt in the agent's records needed: both went in, in order.
    assert [t.split("\n")[1] for t in recorder.texts] == ["one", "two"]
    assert {e.state for e in await ledger.entries(10, "codex")} == {"picked_up"}
    await queue.stop()


async def test_text_is_sanitised_and_headed(ledger: Ledger) -> None:
    queue, watcher, recorder = await make_queue(ledger)
    asked = await ledger.ask("claude", "codex", "rm -rf ~\x1b[201~\r\x03 please")
    watcher.set(AgentActivity.IDLE)
    await asyncio.wait_for(recorder.given.wait(), 5)
    assert recorder.texts == [
        f"[Request {asked.id} from claude]\nrm -rf ~[201~\n please\n\n"
        f"(claude waits for your answer: give it with your reply tool, request {asked.id}.)"]
    await queue.stop()


async def test_render_of_each_kind(ledger: Ledger) -> None:
    asked = await ledger.ask("claude", "codex", "why?")
    reply = await ledger.reply("codex", asked.id, "because")
    notices = await ledger.end_requests_to("hermes")
    assert render(reply) == f"[Reply from codex to request {asked.id}]\nbecause"
    assert notices == []
    other = await ledger.ask("claude", "hermes", "?")
    [notice] = await ledger.end_requests_to("hermes")
    assert render(notice) == \
        f"[Message from lispm]\nhermes ended without replying to request {other.id}."
