"""Messaging from Emacs, over the real sidecar: an agent of kind `lispm` (one
that lives in Emacs) sends, asks and replies over the link, and receives
through `emacs/deliver` only while Emacs reports it idle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .sidecar_client import SidecarProcess
from .test_messaging import call, ledger

EMACS = {"name": "emacs", "instance": 9}


class FakeEmacs:
    """Answers the sidecar's requests; records each `emacs/deliver`."""

    def __init__(self) -> None:
        self.delivered: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.take = True

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/list-agents":
            return {"agents": []}
        if method == "emacs/deliver":
            await self.delivered.put(params)
            return {"taken": self.take}
        raise AssertionError(f"unexpected request {method}")

    async def next_delivery(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.delivered.get(), 10)

    async def nothing_delivered(self, sidecar: SidecarProcess, seconds: float = 0.5) -> None:
        await sidecar.call("lispm/agents", {})  # what came before is handled
        await asyncio.sleep(seconds)
        assert self.delivered.empty(), self.delivered.get_nowait()


@pytest.fixture
def emacs() -> FakeEmacs:
    return FakeEmacs()


@pytest.fixture
async def sidecar(tmp_path: Path, emacs: FakeEmacs) -> AsyncIterator[SidecarProcess]:
    process = SidecarProcess(tmp_path / "run", emacs)
    await process.start()
    await process.hello()
    for instance, name in enumerate(("claude", "codex"), start=1):
        await process.call("lispm/agent-start",
                           {"name": name, "kind": "claude", "folder": "/tmp", "instance": instance})
    yield process
    await process.close()


async def start_emacs_agent(sidecar: SidecarProcess) -> dict[str, Any]:
    launch: dict[str, Any] = await sidecar.call(
        "lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp"))
    return launch


async def report(sidecar: SidecarProcess, activity: str | None) -> None:
    await sidecar.send_frames({"jsonrpc": "2.0", "method": "lispm/actor-activity",
                               "params": dict(EMACS, activity=activity)})


async def served(sidecar: SidecarProcess, name: str) -> dict[str, Any]:
    agents = {a["name"]: a for a in (await sidecar.call("lispm/agents", {}))["agents"]}
    return agents[name]


async def entry_states(sidecar: SidecarProcess) -> list[tuple[str, str, str, str]]:
    return [(e["kind"], e["sender"], e["recipient"], e["state"]) for e in await ledger(sidecar)]


async def settled_states(sidecar: SidecarProcess,
                         expected: list[tuple[str, str, str, str]]) -> None:
    """Wait (10 s at most) until the ledger's entries are EXPECTED: Emacs's
    answer to `emacs/deliver` may still be on its way to the sidecar."""
    for _ in range(200):
        if (states := await entry_states(sidecar)) == expected:
            return
        await asyncio.sleep(0.05)
    assert states == expected


async def test_an_agent_in_emacs_has_no_server_files_or_process(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    launch = await start_emacs_agent(sidecar)
    assert (launch["name"], launch["kind"]) == ("emacs", "lispm")
    assert (launch["port"], launch["url"], launch["token_file"]) == (None, None, None)
    folders = [p.name for p in (tmp_path / "run" / "agents").iterdir()]
    assert len(folders) == 2 and not any("emacs" in name for name in folders), folders
    agent = await served(sidecar, "emacs")
    assert agent["watching"]["kind"] == "lispm"
    assert agent["watching"]["activity"] == "unknown"
    attached = await sidecar.call("lispm/agent-attached", dict(EMACS, pid=1), raw=True)
    assert "no process to watch" in attached["error"]["message"]
    # What Emacs reports is its activity; a terminal agent's is its records'.
    await report(sidecar, "running-tool")
    agent = await served(sidecar, "emacs")
    assert (agent["watching"]["activity"], agent["watching"]["reported"]) == \
        ("busy", "running-tool")


async def test_an_agent_in_emacs_sends_and_asks_and_the_ledger_records_it(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    await start_emacs_agent(sidecar)
    assert await sidecar.call("lispm/send-message", dict(EMACS, to="codex", text="hi")) == \
        {"text": "sent to codex"}
    assert await sidecar.call("lispm/ask-agent", dict(EMACS, to="claude", text="review?")) == \
        {"text": "asked claude, request R1", "request_id": "R1", "to": "claude"}
    entries = await ledger(sidecar)
    assert [(e["kind"], e["sender"], e["recipient"], e["request_id"], e["text"], e["state"])
            for e in entries] == [
        ("request", "emacs", "claude", "R1", "review?", "queued"),
        ("message", "emacs", "codex", None, "hi", "queued"),
    ]
    # The terminal agent answers with its tool; the reply reaches Emacs's
    # agent at once, though it never said it is idle: its ask waits for it.
    assert await call(sidecar, "claude", "reply", request="R1", text="fine") == \
        (False, "replied to emacs, request R1")
    delivered = await emacs.next_delivery()
    assert (delivered["kind"], delivered["text"]) == \
        ("reply", "[Reply from claude to request R1]\nfine")
    await settled_states(sidecar, [("reply", "claude", "emacs", "picked_up"),
                                   ("request", "emacs", "claude", "queued"),
                                   ("message", "emacs", "codex", "queued")])


async def test_a_message_reaches_emacs_only_while_it_reports_idle(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    await start_emacs_agent(sidecar)
    assert await call(sidecar, "claude", "send_message", to="emacs", text="hello") == \
        (False, "sent to emacs")
    await emacs.nothing_delivered(sidecar)  # nothing reported yet: not idle
    await report(sidecar, "busy")
    await emacs.nothing_delivered(sidecar)
    await report(sidecar, "waiting-for-approval")
    await emacs.nothing_delivered(sidecar)
    await report(sidecar, "idle")
    delivered = await emacs.next_delivery()
    message_id = delivered.pop("message_id")
    assert isinstance(message_id, int)
    assert delivered == {"name": "emacs", "instance": 9, "kind": "message", "sender": "claude",
                         "request_id": None, "text": "[Message from claude]\nhello"}
    await settled_states(sidecar, [("message", "claude", "emacs", "picked_up")])
    assert (await served(sidecar, "emacs"))["queued"] == 0


async def test_a_message_emacs_does_not_take_waits_for_the_next_idle(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    await start_emacs_agent(sidecar)
    await report(sidecar, "idle")
    emacs.take = False
    await call(sidecar, "codex", "send_message", to="emacs", text="one")
    await emacs.next_delivery()
    # Refused: not idle, whatever it said (a dialog's retry comes after 1 s).
    await emacs.nothing_delivered(sidecar, 1.6)
    await settled_states(sidecar, [("message", "codex", "emacs", "queued")])
    emacs.take = True
    await report(sidecar, "idle")
    assert (await emacs.next_delivery())["text"] == "[Message from codex]\none"
    await settled_states(sidecar, [("message", "codex", "emacs", "picked_up")])


async def test_a_request_to_emacs_is_delivered_and_its_reply_closes_it(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    await start_emacs_agent(sidecar)
    await report(sidecar, "idle")
    assert await call(sidecar, "claude", "ask_agent", to="emacs", request="which file?") == \
        (False, "asked emacs, request R1")
    delivered = await emacs.next_delivery()
    assert (delivered["kind"], delivered["request_id"], delivered["sender"]) == \
        ("request", "R1", "claude")
    assert delivered["text"].startswith("[Request R1 from claude]\nwhich file?\n\n")
    answer = await sidecar.call("lispm/reply", dict(EMACS, request_id="R1", text="notes.el"))
    assert answer == {"text": "replied to claude, request R1"}
    entries = await ledger(sidecar)
    assert [(e["kind"], e["sender"], e["recipient"], e["request_state"]) for e in entries] == [
        ("reply", "emacs", "claude", "answered"),
        ("request", "claude", "emacs", "answered"),
    ]
    again = await sidecar.call("lispm/reply", dict(EMACS, request_id="R1", text="again"),
                               raw=True)
    assert "R1" in again["error"]["message"]


async def test_bad_messages_from_emacs_are_refused_and_nothing_is_recorded(
        sidecar: SidecarProcess) -> None:
    await start_emacs_agent(sidecar)

    async def error(method: str, **params: Any) -> dict[str, Any]:
        reply = await sidecar.call(method, params, raw=True)
        assert "error" in reply, reply
        found: dict[str, Any] = reply["error"]
        return found

    unknown = await error("lispm/send-message", **EMACS, to="gemini", text="hi")
    assert unknown["code"] == -32020
    assert unknown["message"] == "no agent named 'gemini'; the other live agents: claude, codex"
    to_self = await error("lispm/send-message", **EMACS, to="emacs", text="me")
    assert "cannot send a message to itself" in to_self["message"]
    ask_self = await error("lispm/ask-agent", **EMACS, to="emacs", text="me?")
    assert "cannot ask itself" in ask_self["message"]
    empty = await error("lispm/ask-agent", **EMACS, to="codex", text="\x1b\u200b")
    assert "empty once cleaned" in empty["message"]
    no_request = await error("lispm/reply", **EMACS, request_id="R7", text="?")
    assert "R7" in no_request["message"]
    stranger = await error("lispm/send-message", name="ghost", instance=1, to="codex", text="hi")
    assert stranger["code"] == -32001 and "ghost" in stranger["message"]
    earlier = await error("lispm/send-message", name="emacs", instance=3, to="codex", text="hi")
    assert earlier["code"] == -32001
    missing = await error("lispm/send-message", name="emacs", to="codex", text="hi")
    assert (missing["code"], missing["message"]) == \
        (-32602, "instance must be a non-negative integer")
    assert await ledger(sidecar) == []


async def test_stopping_the_agent_in_emacs_ends_what_waits_for_it(
        sidecar: SidecarProcess) -> None:
    await start_emacs_agent(sidecar)
    await call(sidecar, "claude", "ask_agent", to="emacs", request="still there?")
    await sidecar.call("lispm/agent-stop", EMACS)
    entries = await ledger(sidecar)
    assert (entries[0]["kind"], entries[0]["recipient"]) == ("notice", "claude")
    assert "emacs ended without replying to request R1" in entries[0]["text"]
    assert "emacs" not in {a["name"] for a in (await sidecar.call("lispm/agents", {}))["agents"]}
    gone = await call(sidecar, "codex", "send_message", to="emacs", text="hi")
    assert gone[0] and "no agent named 'emacs'" in gone[1]
