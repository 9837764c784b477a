"""A name is not an identity, and no agent waits in silence (issue 23 §4, §5).

The Messenger over a real ledger: what an earlier agent of a name sent
brings its successor nothing; an own agent waiting on a terminal agent
is not asked back (the request to answer first is named instead).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lispm_sidecar.errors import LispmError
from lispm_sidecar.ledger import Ledger
from lispm_sidecar.messaging import Messenger


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
