"""A name is not an identity, and no agent waits in silence (issue 23 §4, §5).

The Messenger over a real ledger: what an earlier agent of a name sent
brings its successor nothing; an own agent waiting on a terminal agent
is not asked back (the request to answer first is named instead).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lispm_sidecar.errors import LispmError
from lispm_sidecar.ledger import Ledger
from lispm_sidecar.messaging import Messenger

from .sidecar_client import SidecarProcess
from .test_messaging import call, ledger
from .test_own_ask import EMACS, FakeEmacs, open_sidecar


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(tmp_path / "ledger.sqlite3")
    yield opened
    await opened.close()


def messenger(store: Ledger, since: dict[str, float],
              kinds: dict[str, str] | None = None) -> Messenger:
    """A Messenger whose live agents began their conversations at SINCE."""
    kinds = kinds or {}
    return Messenger(store, lambda: list(since), lambda _name: None,
                     lambda name: kinds.get(name) if name in since else None, None,
                     lambda name: since.get(name))


async def test_a_new_agent_of_a_name_gets_no_notice_about_its_predecessors_message(
    store: Ledger,
) -> None:
    """Emacs crashed; a new claude, then a new codex: the old claude's message
    to the old codex fails with nobody told (the ledger keeps why)."""
    sent = await store.send("claude", "codex", "from the claude before the crash")
    since = {"claude": time.time() + 1}  # the new claude began after it was sent
    await messenger(store, since).forget("codex", "codex was not resumed: a new codex started")
    assert await store.queued_for("claude") == []
    failed = await store.message(sent.id)
    assert failed.state == "failed" and failed.reason is not None
    assert "not resumed" in failed.reason


async def test_the_agent_that_sent_it_is_still_told(store: Ledger) -> None:
    """The same claude, live since before it sent: it hears its message failed."""
    await store.send("claude", "codex", "hello")
    since = {"claude": time.time() - 60}
    await messenger(store, since).forget("codex", "codex was not resumed")
    notices = await store.queued_for("claude")
    assert [n.text for n in notices] == [
        "Your message to codex was not delivered: codex was not resumed."]


async def test_a_closing_agent_tells_only_senders_that_are_still_there(store: Ledger) -> None:
    """codex closes: the claude that sent is told; a gone sender's name is not."""
    await store.send("claude", "codex", "one")
    await store.send("hermes", "codex", "two")
    since = {"claude": time.time() - 60, "hermes": time.time() + 60}
    await messenger(store, since).agent_left("codex")
    assert [n.text for n in await store.queued_for("claude")] == [
        "codex closed before your message was delivered."]
    assert await store.queued_for("hermes") == []


async def test_an_ask_back_at_an_own_agent_that_waits_is_refused_naming_the_request(
    store: Ledger,
) -> None:
    """emacs (blocks) asked claude R1; claude asking emacs back is refused at
    once, naming R1: emacs takes nothing but replies while it waits."""
    since = {"emacs": 0.0, "claude": 0.0}
    kinds = {"emacs": "lispm", "claude": "claude"}
    m = messenger(store, since, kinds)
    _, r1, _ = await m.ask("emacs", "claude", "What does notes.el do?")
    with pytest.raises(LispmError) as refused:
        await m.ask("claude", "emacs", "Which notes.el do you mean?")
    text = str(refused.value)
    assert r1 in text and "reply" in text
    assert await store.queued_for("emacs") == []
    # Once claude replies, emacs waits no more: claude may ask.
    await m.reply("claude", r1, "It keeps notes.")
    _, r2, _ = await m.ask("claude", "emacs", "Anything else?")
    assert r2 != r1


async def test_an_ask_of_a_terminal_agent_that_asked_is_not_refused(store: Ledger) -> None:
    """claude asked emacs; emacs asking claude back is fine: claude does not wait."""
    since = {"emacs": 0.0, "claude": 0.0}
    kinds = {"emacs": "lispm", "claude": "claude"}
    m = messenger(store, since, kinds)
    await m.ask("claude", "emacs", "Review this?")
    _, request, _ = await m.ask("emacs", "claude", "Which file?")
    assert request.startswith("R")


async def test_closing_an_agent_ends_the_requests_it_asked(store: Ledger) -> None:
    """emacs asked claude, then closed: R1 ends in the ledger, with why; claude's
    late reply is refused, not queued for an emacs that is no more."""
    since = {"emacs": 0.0, "claude": 0.0}
    m = messenger(store, since, {"emacs": "lispm", "claude": "claude"})
    _, r1, _ = await m.ask("emacs", "claude", "What does notes.el do?")
    del since["emacs"]
    await m.agent_left("emacs")
    request = await store.request(r1)
    assert request.state == "ended"
    # Not delivered yet: the request message fails, saying why.
    [message] = [e for e in await store.entries(20)
                 if e.kind == "request" and e.request_id == r1]
    assert message.state == "failed" and message.reason == "emacs closed"
    with pytest.raises(LispmError):
        await m.reply("claude", r1, "late")
    assert await store.queued_for("emacs") == []


async def test_a_notice_to_an_agent_that_is_gone_goes_to_nobody(store: Ledger) -> None:
    """claude closes with a request open from an emacs no longer here: the
    notice fails, kept in the ledger, rather than wait for the next emacs."""
    asked = await store.ask("emacs", "claude", "from an emacs that is gone")
    await messenger(store, {"claude": 0.0}).agent_left("claude")
    assert await store.queued_for("emacs") == []
    [notice] = [e for e in await store.entries(20)
                if e.kind == "notice" and e.request_id == asked.id]
    assert notice.state == "failed" and notice.reason == "emacs is gone"


async def test_a_message_not_handed_over_is_told_only_to_the_agent_that_sent_it(
    store: Ledger,
) -> None:
    """codex's terminal refused two pastes: the old claude's message fails
    with nobody told; the live claude hears of its own, with the reason."""
    old = await store.send("claude", "codex", "from the claude before")
    since = {"claude": time.time() + 60, "codex": 0.0}
    m = messenger(store, since)
    await m.undelivered(old.id, "the terminal is gone")
    assert await store.queued_for("claude") == []
    assert (await store.message(old.id)).reason == "the terminal is gone"
    since["claude"] = 0.0
    mine = await store.send("claude", "codex", "from this claude")
    await m.undelivered(mine.id, "the terminal is gone")
    assert [n.text for n in await store.queued_for("claude")] == [
        "Your message to codex was not delivered: the terminal is gone."]


async def test_a_request_not_handed_over_ends_and_its_asker_is_told(store: Ledger) -> None:
    """No answer can come to a request whose message failed: it ends, its
    edge leaves the wait-for graph, and its asker gets the notice (with the
    request's id: an own agent's wait ends with it)."""
    since = {"emacs": 0.0, "claude": 0.0}
    m = messenger(store, since, {"emacs": "lispm", "claude": "claude"})
    asked = await m.ask("emacs", "claude", "Review it?")
    [message] = await store.queued_for("claude")
    await m.undelivered(message.id, "the terminal is gone")
    [notice] = await store.queued_for("emacs")
    assert (notice.kind, notice.request_id, notice.text) == (
        "notice", asked.request_id, f"Request {asked.request_id} to claude will get no "
        "reply: it could not be delivered (the terminal is gone).")
    assert (await store.request(asked.request_id)).state == "ended"
    assert asked.request_id not in await m.wait_for()


# --- over the real sidecar ------------------------------------------------------


class RefusingEmacs(FakeEmacs):
    """Emacs whose actors named in GONE take no message: Emacs no longer has
    them (`emacs/deliver` fails, as `lispm-sidecar-handle-request` does)."""

    def __init__(self, gone: set[str]) -> None:
        super().__init__()
        self.gone = gone

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/deliver" and params["name"] in self.gone:
            return {"__error__": f"no actor {params['name']} (instance {params['instance']})"
                                 " takes messages in this Emacs"}
        return await super().__call__(method, params)


async def activity(sidecar: SidecarProcess, name: str, instance: int, state: str) -> None:
    await sidecar.send_frames({"jsonrpc": "2.0", "method": "lispm/actor-activity",
                               "params": {"name": name, "instance": instance,
                                          "activity": state}})


async def test_a_terminal_agents_ask_back_is_refused_by_its_tool(tmp_path: Path) -> None:
    """emacs (own, blocks) asks claude R1; claude's ask_agent to emacs is the
    tool's error, naming R1, at once; nothing is queued for emacs."""
    sidecar = await open_sidecar(tmp_path / "run", FakeEmacs())
    try:
        await sidecar.call("lispm/agent-start", {"name": "claude", "kind": "claude",
                                                 "folder": "/tmp", "instance": 1})
        await sidecar.call("lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp"))
        asked = await sidecar.call("lispm/ask-agent", dict(EMACS, to="claude",
                                                           text="What does notes.el do?"))
        r1 = asked["request_id"]
        is_error, text = await call(sidecar, "claude", "ask_agent", to="emacs",
                                    request="Which notes.el?")
        assert is_error
        assert f"reply to emacs's request {r1} first" in text
        assert [(e["kind"], e["sender"]) for e in await ledger(sidecar)] == [
            ("request", "emacs")]
        # Answered, emacs waits no more: claude may ask it.
        await call(sidecar, "claude", "reply", request=r1, text="It keeps notes.")
        assert await call(sidecar, "claude", "ask_agent", to="emacs",
                          request="Anything else?") == (False, "asked emacs, request R2")
    finally:
        await sidecar.close()


async def test_a_request_that_cannot_be_delivered_ends_and_the_asker_is_told(
        tmp_path: Path) -> None:
    """emacs asks emacs-2, which Emacs no longer has: the request's message
    fails, so no answer can come: R1 ends, and emacs, which waits on it, gets
    at once the notice that says why (its call's wait ends with it)."""
    emacs = RefusingEmacs({"emacs-2"})
    sidecar = await open_sidecar(tmp_path / "run", emacs)
    try:
        await sidecar.call("lispm/agent-start", dict(EMACS, kind="lispm", folder="/tmp"))
        await sidecar.call("lispm/agent-start", {"name": "emacs-2", "instance": 2,
                                                 "kind": "lispm", "folder": "/tmp"})
        await activity(sidecar, "emacs", 9, "waiting-for-reply")
        await sidecar.call("lispm/ask-agent", dict(EMACS, to="emacs-2", text="Review it?"))
        await activity(sidecar, "emacs-2", 2, "idle")
        notice = await emacs.next_delivery()
        assert (notice["name"], notice["kind"], notice["request_id"]) == \
            ("emacs", "notice", "R1")
        assert notice["text"] == (
            "[Message from lispm]\nRequest R1 to emacs-2 will get no reply: it could not "
            "be delivered (Emacs failed emacs/deliver: no actor emacs-2 (instance 2) "
            "takes messages in this Emacs).")
        [request] = (await sidecar.call("lispm/requests", dict(EMACS, ids=["R1"])))["requests"]
        assert request["state"] == "ended"
        assert "could not be delivered" in request["notice"]
        # The edge is gone: emacs-2 may ask emacs, which waits on nobody now.
        answer = await sidecar.call("lispm/ask-agent", {"name": "emacs-2", "instance": 2,
                                                        "to": "emacs", "text": "hi?"})
        assert answer["request_id"] == "R2"
    finally:
        await sidecar.close()


async def test_a_new_agent_of_a_name_inherits_nothing_after_a_crash(tmp_path: Path) -> None:
    """Emacs (and its sidecar) die; a new claude starts, then a new codex.
    What the old claude sent, asked and was sent reaches neither, and no
    notice about it goes to the new claude; the ledger keeps why."""
    earlier = await open_sidecar(tmp_path / "run", FakeEmacs())
    for instance, name in enumerate(("claude", "codex"), start=1):
        await earlier.call("lispm/agent-start", {"name": name, "kind": "claude",
                                                 "folder": "/tmp", "instance": instance})
    await call(earlier, "claude", "send_message", to="codex", text="from the old claude")
    await call(earlier, "claude", "ask_agent", to="codex", request="old claude asks")  # R1
    await call(earlier, "codex", "ask_agent", to="claude", request="old codex asks")  # R2
    await call(earlier, "codex", "send_message", to="claude", text="to the old claude")
    earlier.kill()
    await earlier.close()

    sidecar = await open_sidecar(tmp_path / "run", FakeEmacs())
    try:
        for instance, name in enumerate(("claude", "codex"), start=1):
            await sidecar.call("lispm/agent-start", {"name": name, "kind": "claude",
                                                     "folder": "/tmp", "instance": instance})
        entries = await ledger(sidecar)
        assert [e for e in entries if e["state"] == "queued"] == []
        assert [e for e in entries if e["recipient"] in ("claude", "codex")
                and e["state"] != "failed"] == []
        assert all("not resumed: a new" in e["reason"] for e in entries)
        answer = await sidecar.call("lispm/requests", {"name": "claude", "instance": 1,
                                                       "ids": ["R1"]})
        assert answer["requests"][0]["state"] == "ended"
    finally:
        await sidecar.close()
