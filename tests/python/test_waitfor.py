"""The wait-for graph, and the Messenger's refusal of a request that would
close a cycle of agents waiting on each other (issue 13 §2)."""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client

from lispm_sidecar.emacs_tools import LispTools
from lispm_sidecar.ledger import Ledger
from lispm_sidecar.mcp_tools import build_mcp
from lispm_sidecar.messaging import DeadlockRefused, Messenger
from lispm_sidecar.protocol import ListAgentsResult
from lispm_sidecar.views import Views
from lispm_sidecar.waitfor import WaitForGraph, asks_block

from .sidecar_client import SidecarProcess

# --- the graph ------------------------------------------------------------------


def graph_of(blocking: set[str], *edges: tuple[str, str, str]) -> WaitForGraph:
    graph = WaitForGraph(lambda name: name in blocking)
    for request_id, asker, asked in edges:
        graph.add(request_id, asker, asked)
    return graph


def test_only_lispm_agents_block() -> None:
    assert asks_block("lispm")
    assert not any(asks_block(kind) for kind in ("claude", "codex", "hermes", "openclaw", None))


def test_a_request_back_closes_a_two_cycle() -> None:
    graph = graph_of({"a", "b"}, ("R1", "a", "b"))
    assert graph.cycle_if("b", "a") == ["b", "a", "b"]
    assert graph.cycle_if("a", "b") is None  # a second request the same way waits on no one
    assert graph.waiting("a", "b") == ["R1"]


def test_longer_chains_and_the_shortest_cycle_is_named() -> None:
    graph = graph_of({"a", "b", "c", "d"},
                     ("R1", "a", "b"), ("R2", "b", "c"), ("R3", "c", "d"), ("R4", "b", "d"))
    assert graph.cycle_if("d", "a") == ["d", "a", "b", "d"]
    assert graph.cycle_if("c", "a") == ["c", "a", "b", "c"]
    assert graph.cycle_if("a", "c") is None
    assert graph.cycle_if("d", "c") == ["d", "c", "d"]
    assert graph.cycle_if("c", "d") is None  # c waits on d already; d waits on no one


def test_a_non_blocking_asker_breaks_chains_but_may_not_ask_who_waits_on_it() -> None:
    graph = graph_of({"a", "b"}, ("R1", "a", "t"), ("R2", "t", "b"), ("R3", "b", "a"))
    # t does not block, but a waits on t and takes only replies: t answers R1 first.
    assert graph.cycle_if("t", "a") == ["t", "a", "t"]
    assert graph.cycle_if("t", "b") == ["t", "b", "a", "t"]
    # a waits on t, but t's request to b does not make t wait: b may ask a.
    assert graph.cycle_if("a", "b") == ["a", "b", "a"]  # through R3 only
    graph.remove("R3")
    assert graph.cycle_if("a", "b") is None
    assert graph.cycle_if("b", "a") is None


def test_blocking_is_asked_when_a_cycle_is_looked_for() -> None:
    blocking: set[str] = set()
    graph = graph_of(blocking, ("R1", "a", "b"))
    assert graph.cycle_if("b", "a") is None  # neither is known to block yet
    blocking.update({"a", "b"})  # both registered again, say after a restart
    assert graph.cycle_if("b", "a") == ["b", "a", "b"]


def test_remove_frees_the_edge_and_ignores_unknown_ids() -> None:
    graph = graph_of({"a", "b"}, ("R1", "a", "b"), ("R2", "a", "b"))
    graph.remove("R1")
    assert graph.cycle_if("b", "a") == ["b", "a", "b"]  # R2 still waits
    graph.remove("R2")
    graph.remove("R99")
    assert graph.cycle_if("b", "a") is None
    assert len(graph) == 0 and "R1" not in graph


@dataclass
class FakeRequest:
    id: str
    asker: str
    asked: str


def test_from_requests() -> None:
    graph = WaitForGraph.from_requests(
        [FakeRequest("R1", "a", "b"), FakeRequest("R2", "b", "c")], lambda _name: True)
    assert [(e.request_id, e.asker, e.asked) for e in graph.edges()] == \
        [("R1", "a", "b"), ("R2", "b", "c")]
    assert graph.cycle_if("c", "a") == ["c", "a", "b", "c"]


# --- the Messenger --------------------------------------------------------------


@dataclass
class Room:
    """A Messenger over a real ledger, with agents of the kinds given."""

    path: Path
    kinds: dict[str, str]
    ledger: Ledger | None = None
    messenger: Messenger = field(init=False)

    async def open(self) -> Room:
        self.ledger = await Ledger.open(self.path)
        self.messenger = Messenger(self.ledger, lambda: list(self.kinds), lambda _name: None,
                                   lambda name: self.kinds.get(name))
        return self

    async def restart(self) -> None:
        assert self.ledger is not None
        await self.ledger.close()
        await self.open()

    async def ask(self, sender: str, to: str) -> str:
        return (await self.messenger.ask(sender, to, f"{sender} asks {to}")).request_id

    async def refusal(self, sender: str, to: str) -> DeadlockRefused:
        assert self.ledger is not None
        before = await self.ledger.entries(1000)
        with pytest.raises(DeadlockRefused) as caught:
            await self.messenger.ask(sender, to, "?")
        assert await self.ledger.entries(1000) == before  # nothing written
        return caught.value


@pytest.fixture
async def room(tmp_path: Path) -> AsyncIterator[Room]:
    room = await Room(tmp_path / "ledger.sqlite3",
                      {"emacs": "lispm", "emacs-2": "lispm", "emacs-3": "lispm",
                       "claude": "claude", "codex": "codex"}).open()
    yield room
    assert room.ledger is not None
    await room.ledger.close()


async def test_asking_back_an_agent_that_waits_is_refused_naming_the_cycle(room: Room) -> None:
    request = await room.ask("emacs", "emacs-2")
    refused = await room.refusal("emacs-2", "emacs")
    assert str(refused) == (f"refused: emacs-2 would wait on emacs, which waits on emacs-2 "
                            f"(emacs-2 → emacs → emacs-2); answer emacs's request {request} "
                            "instead")
    assert refused.code == -32021 and refused.cycle == ["emacs-2", "emacs", "emacs-2"]
    assert await room.ask("emacs-2", "claude")  # other requests go on


async def test_a_three_cycle_through_a_third_agent_is_refused(room: Room) -> None:
    await room.ask("emacs", "emacs-2")
    last = await room.ask("emacs-2", "emacs-3")
    refused = await room.refusal("emacs-3", "emacs")
    assert str(refused) == ("refused: emacs-3 would wait on emacs, which waits on emacs-2, "
                            "which waits on emacs-3 (emacs-3 → emacs → emacs-2 → emacs-3); "
                            f"answer emacs-2's request {last} instead")


async def test_a_terminal_agent_may_not_ask_back_who_waits_on_it(room: Room) -> None:
    request = await room.ask("emacs", "claude")
    # emacs takes nothing but replies while it waits: claude answers first.
    refused = await room.refusal("claude", "emacs")
    assert refused.cycle == ["claude", "emacs", "claude"]
    assert refused.request_id == request
    assert "reply to emacs's request " + request + " first" in str(refused)
    await room.ask("codex", "claude")  # neither waits on the other
    await room.ask("claude", "codex")
    await room.messenger.reply("claude", request, "done")
    await room.ask("claude", "emacs")  # emacs waits no more


async def test_an_answered_request_frees_its_edge(room: Room) -> None:
    request = await room.ask("emacs", "emacs-2")
    await room.refusal("emacs-2", "emacs")
    await room.messenger.reply("emacs-2", request, "done")
    await room.ask("emacs-2", "emacs")


async def test_an_agent_that_closes_or_is_forgotten_frees_its_edges(room: Room) -> None:
    await room.ask("emacs", "emacs-2")
    await room.messenger.agent_left("emacs-2")  # emacs's request to it ends
    await room.ask("emacs-2", "emacs")  # a new emacs-2, say
    await room.refusal("emacs", "emacs-2")
    await room.messenger.forget("emacs-2", "not resumed")  # its request to emacs ends
    await room.ask("emacs", "emacs-2")


async def test_the_open_request_still_counts_after_a_restart(room: Room) -> None:
    request = await room.ask("emacs", "emacs-2")
    await room.ask("emacs-2", "emacs-3")
    await room.restart()  # a new Messenger over the same ledger file
    refused = await room.refusal("emacs-3", "emacs")
    assert refused.cycle == ["emacs-3", "emacs", "emacs-2", "emacs-3"]
    assert (await room.refusal("emacs-2", "emacs")).request_id == request
    await room.messenger.reply("emacs-2", request, "done")
    await room.restart()
    await room.ask("emacs-2", "emacs")


async def test_two_asks_at_once_cannot_both_close_a_cycle(room: Room) -> None:
    outcomes = await asyncio.gather(room.ask("emacs", "emacs-2"), room.ask("emacs-2", "emacs"),
                                    return_exceptions=True)
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["DeadlockRefused", "str"]
    assert room.ledger is not None and len(await room.ledger.open_requests()) == 1


async def test_asking_itself_is_still_the_ledgers_refusal(room: Room) -> None:
    with pytest.raises(Exception, match="cannot ask itself") as caught:
        await room.ask("emacs", "emacs")
    assert not isinstance(caught.value, DeadlockRefused)


# --- property: every cycle-closing request refused, every other accepted --------


def closes_cycle(open_requests: dict[str, tuple[str, str]], blocking: set[str],
                 asker: str, asked: str) -> bool:
    """Brute force: after the new edge, which counts whoever asks (an agent
    that waits takes only replies), can ASKER reach itself over edges of blockers?"""
    edges = {(a, b) for a, b in open_requests.values() if a in blocking} | {(asker, asked)}
    reached = {asker}
    while True:
        more = {b for a, b in edges if a in reached} - reached
        if not more:
            return asker in {b for a, b in edges if a in reached}
        reached |= more


@pytest.fixture
def fast_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory if the system has one: the ledger fsyncs each call."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="lispm-waitfor-") as folder:
        yield Path(folder)


async def test_property_random_graphs(fast_folder: Path) -> None:
    rng = random.Random(13)
    room = await Room(fast_folder / "ledger.sqlite3", {}).open()
    refused = accepted = 0
    try:
        for graph in range(500):
            names = [f"g{graph}-a{i}" for i in range(rng.randint(2, 6))]
            blocking = {name for name in names if rng.random() < 0.6}
            room.kinds = {name: "lispm" if name in blocking else "claude" for name in names}
            open_requests: dict[str, tuple[str, str]] = {}
            for _ in range(rng.randint(1, 25)):
                step = rng.random()
                if step < 0.25 and open_requests:
                    request_id = rng.choice(sorted(open_requests))
                    await room.messenger.reply(open_requests.pop(request_id)[1], request_id, "ok")
                    continue
                if step < 0.28:
                    await room.restart()
                    continue
                if step < 0.31:  # an agent closes: what it asked, or was asked, ends
                    name = rng.choice(names)
                    await room.messenger.agent_left(name)
                    open_requests = {rid: hop for rid, hop in open_requests.items()
                                     if name not in hop}
                    continue
                if step < 0.33:  # an agent of an earlier run is not resumed
                    name = rng.choice(names)
                    await room.messenger.forget(name, "not resumed")
                    open_requests = {rid: hop for rid, hop in open_requests.items()
                                     if name not in hop}
                    continue
                asker, asked = rng.sample(names, 2)
                expected = closes_cycle(open_requests, blocking, asker, asked)
                try:
                    request_id = await room.ask(asker, asked)
                except DeadlockRefused as err:
                    assert expected, (open_requests, blocking, asker, asked, err.cycle)
                    cycle = err.cycle
                    assert cycle[0] == cycle[-1] == asker and cycle[1] == asked
                    hops = set(open_requests.values())
                    assert all(a in blocking and (a, b) in hops
                               for a, b in itertools.pairwise(cycle[1:]))
                    refused += 1
                else:
                    assert not expected, (open_requests, blocking, asker, asked)
                    open_requests[request_id] = (asker, asked)
                    accepted += 1
            assert room.ledger is not None
            assert open_requests.keys() == {r.id for r in await room.ledger.open_requests()}
            for name in names:  # the next graph starts from an empty ledger
                await room.messenger.forget(name, "done")
            assert not await room.ledger.open_requests()
            assert not (await room.messenger.wait_for()).edges()
    finally:
        assert room.ledger is not None
        await room.ledger.close()
    # Both sides were tried (374 refused and 4049 accepted with seed 13).
    assert refused > 300 and accepted > 3000, (refused, accepted)


# --- the refusal through both error boundaries -----------------------------------


async def test_the_refusal_is_the_mcp_tools_error(room: Room) -> None:
    await room.ask("emacs", "emacs-2")
    lisp_tools = cast(LispTools, None)
    views = cast(Views, None)

    async def no_agents() -> ListAgentsResult:
        return {"agents": []}

    server = build_mcp("emacs-2", 1, no_agents, room.messenger, views, lisp_tools)
    async with Client(server) as client:
        result = await client.call_tool("ask_agent", {"to": "emacs", "request": "and you?"})
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert result.is_error
    assert text == ("Error executing tool ask_agent: refused: emacs-2 would wait on emacs, "
                    "which waits on emacs-2 (emacs-2 → emacs → emacs-2); answer emacs's "
                    "request R1 instead")


async def test_the_refusal_is_the_link_methods_error(tmp_path: Path) -> None:
    async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/list-agents":
            return {"agents": []}
        if method == "emacs/deliver":
            return {"taken": False}
        raise AssertionError(f"unexpected request {method}")

    sidecar = SidecarProcess(tmp_path / "run", fake_emacs)
    await sidecar.start()
    try:
        await sidecar.hello()
        for instance, name in enumerate(("emacs", "emacs-2"), start=1):
            await sidecar.call("lispm/agent-start", {"name": name, "kind": "lispm",
                                                     "folder": "/tmp", "instance": instance})
        await sidecar.call("lispm/agent-start", {"name": "claude", "kind": "claude",
                                                 "folder": "/tmp", "instance": 3})
        asked = await sidecar.call("lispm/ask-agent", {"name": "emacs", "instance": 1,
                                              "to": "emacs-2", "text": "review?"})
        assert asked["request_id"] == "R1"
        reply = await sidecar.call("lispm/ask-agent", {"name": "emacs-2", "instance": 2,
                                              "to": "emacs", "text": "and you?"}, raw=True)
        assert reply["error"] == {
            "code": -32021,
            "message": "refused: emacs-2 would wait on emacs, which waits on emacs-2 "
                       "(emacs-2 → emacs → emacs-2); answer emacs's request R1 instead"}
        entries = (await sidecar.call("lispm/ledger", {"limit": 10}))["entries"]
        assert [(e["kind"], e["sender"]) for e in entries] == [("request", "emacs")]
        # An ask of a terminal agent, which waits on no one, is accepted.
        assert (await sidecar.call("lispm/ask-agent", {"name": "emacs-2", "instance": 2,
                                              "to": "claude", "text": "hi?"}))["request_id"]
    finally:
        await sidecar.close()
