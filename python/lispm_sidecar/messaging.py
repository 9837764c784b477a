"""Agents talk: `send_message`, `ask_agent` and `reply`, over the ledger.

Every text goes into the ledger first (one durable commit) and then into
the recipient's delivery queue, so a message survives a restart of the
sidecar between being sent and being delivered.  Tools return at once;
answers arrive later as the asker's next message.  An agent cannot message
or ask itself.  The same three calls serve an agent's MCP tools and, over
the link (`lispm/send-message`, `lispm/ask-agent`, `lispm/reply`), an
agent that lives in Emacs.  An ask may name a role instead of an agent:
Emacs starts a helper of that role for the asker, and the helper is asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

from .errors import InvalidParams, LispmError
from .ledger import LISPM, Ledger, LedgerError, LedgerStore, Message, Request, SelfRequest
from .protocol import RequestOutcome
from .waitfor import WaitForGraph, asks_block


class UnknownRecipient(LispmError):
    """The message names no live agent."""

    code = -32020


class SelfMessage(SelfRequest):
    """An agent sent a message to itself."""


class DeadlockRefused(LispmError):
    """The request would close a cycle of agents that wait on each other."""

    code = -32021

    def __init__(self, cycle: list[str], request_id: str | None,
                 asker_waits: bool = True) -> None:
        """CYCLE is asker, asked, ..., asker; REQUEST_ID its last hop, if known.
        ASKER_WAITS false: the asker does not block, but the asked agent waits
        on it and takes nothing but replies meanwhile."""
        self.cycle = cycle
        self.request_id = request_id
        asker, asked, *_ = cycle
        waits = "".join(f", which waits on {name}" for name in cycle[2:])
        chain = " → ".join(cycle)
        request = f"request {request_id}" if request_id else "request"
        if asker_waits:
            text = (f"refused: {asker} would wait on {asked}{waits} ({chain});"
                    f" answer {cycle[-2]}'s {request} instead")
        else:
            text = (f"refused: {asked} waits on you ({chain}) and takes nothing but"
                    f" replies until then; reply to {cycle[-2]}'s {request} first,"
                    f" then ask")
        super().__init__(text)


class HelperNotReady(LispmError):
    """A helper Emacs started for a role did not register in time."""

    code = -32022


#: Start a helper of ROLE for agent CALLER; return its name once it is registered.
StartHelper = Callable[[str, str], Awaitable[str]]


class Asked(NamedTuple):
    """What an ask answers: TEXT for the asker, the new REQUEST_ID, and TO,
    the agent asked (with a role, the helper started for it)."""

    text: str
    request_id: str
    to: str


class Messenger:
    """The messaging tools of every agent, and what happens when one leaves."""

    def __init__(
        self, ledger: Ledger, live_agents: Callable[[], Iterable[str]],
        wake: Callable[[str], None],
        kind_of: Callable[[str], str | None] = lambda _name: None,
        start_helper: StartHelper | None = None,
        since: Callable[[str], float | None] = lambda _name: 0.0,
    ) -> None:
        """KIND_OF(name) is the kind of the live agent NAME, None if unknown;
        it says (`asks_block`) whose requests can close a cycle.
        START_HELPER serves an ask of a role; without it, one is refused.
        SINCE(name) is when the live agent NAME's conversation began (None:
        no such agent): a name is not an identity."""
        self._ledger = ledger
        self._live_agents = live_agents
        self._wake = wake
        self._kind_of = kind_of
        self._start_helper = start_helper
        self._since = since
        self._graph: asyncio.Future[WaitForGraph] | None = None
        self._provisional = 0

    def blocks(self, name: str) -> bool:
        """Return whether agent NAME waits on its requests until answered."""
        return asks_block(self._kind_of(name))

    async def wait_for(self) -> WaitForGraph:
        """Return the wait-for graph, built from the ledger's open requests at first use.

        Every call that writes a request's state awaits it before writing,
        so the graph read once and kept up to date after matches the ledger.
        """
        if self._graph is None:
            self._graph = asyncio.ensure_future(self._load())
        return await asyncio.shield(self._graph)

    async def _load(self) -> WaitForGraph:
        try:
            return WaitForGraph.from_requests(await self._ledger.open_requests(), self.blocks)
        except BaseException:
            self._graph = None  # the next call tries again
            raise

    def _check_recipient(self, sender: str, to: str) -> None:
        live = sorted(self._live_agents())
        if to not in live:
            others = ", ".join(name for name in live if name != sender) or "none"
            raise UnknownRecipient(f"no agent named {to!r}; the other live agents: {others}")

    def _queued(self, messages: Iterable[Message]) -> None:
        for recipient in {message.recipient for message in messages}:
            self._wake(recipient)

    async def send_message(self, sender: str, to: str, text: str) -> str:
        """Queue TEXT for TO; answer at once."""
        if to == sender:
            raise SelfMessage(f"{sender} cannot send a message to itself; "
                              "send it to another agent")
        self._check_recipient(sender, to)
        message = await self._ledger.send(sender, to, text)
        self._queued([message])
        return f"sent to {to}"

    async def ask_agent(self, sender: str, to: str | None, request: str,
                        role: str | None = None) -> str:
        """Queue REQUEST for TO under a new request id; answer at once with the id.

        With ROLE instead of TO, a new helper of that role is asked."""
        return (await self.ask(sender, to, request, role)).text

    async def ask(self, sender: str, to: str | None, request: str,
                  role: str | None = None) -> Asked:
        """As `ask_agent`, and say the request id and the agent asked.

        Exactly one of TO and ROLE.  With ROLE, Emacs first starts a helper
        of it for SENDER (`StartHelper`), which is then asked as any agent.
        Refused with `DeadlockRefused` if SENDER blocks and TO waits on it."""
        if (to is None) == (role is None):
            raise InvalidParams("give exactly one of to (an agent's name) and role "
                                "(a role's name, to ask a new helper of that role)")
        if role is not None:
            if self._start_helper is None:
                raise LispmError(f"no helper of role {role} can be started here")
            to = await self._start_helper(sender, role)
        assert to is not None
        self._check_recipient(sender, to)
        graph = await self.wait_for()
        # Asking itself is the ledger's `SelfRequest`, not a cycle.
        if sender != to and (cycle := graph.cycle_if(sender, to)) is not None:
            known = [rid for rid in graph.waiting(cycle[-2], sender) if rid.startswith("R")]
            raise DeadlockRefused(cycle, known[0] if known else None, self.blocks(sender))
        # The edge holds from the check on, so a concurrent ask sees it.
        self._provisional += 1
        held = f"pending-{self._provisional}"
        graph.add(held, sender, to)
        try:
            asked = await self._ledger.ask(sender, to, request)
        finally:
            graph.remove(held)
        graph.add(asked.id, sender, to)
        self._queued([asked.message])
        return Asked(f"asked {to}, request {asked.id}", asked.id, to)

    async def reply(self, sender: str, request_id: str, text: str) -> str:
        """Answer REQUEST_ID, which must have been asked of SENDER and still be open."""
        graph = await self.wait_for()
        message = await self._ledger.reply(sender, request_id.strip(), text)
        if message.request_id is not None:
            graph.remove(message.request_id)
        self._queued([message])
        return f"replied to {message.recipient}, request {message.request_id}"

    async def outcomes(self, asker: str, ids: Iterable[str]) -> list[RequestOutcome]:
        """Return how the requests IDS that ASKER asked stand, in one read.

        An id that names no request, or one another agent asked, is `unknown`."""
        wanted = list(ids)
        return await self._ledger.run(
            lambda store: [self._outcome(store, asker, rid) for rid in wanted])

    @staticmethod
    def _outcome(store: LedgerStore, asker: str, request_id: str) -> RequestOutcome:
        try:
            request = store.request(request_id)
        except LedgerError:
            request = None
        if request is None or request.asker != asker:
            return {"request_id": request_id, "asker": None, "asked": None,
                    "state": "unknown", "reply": None, "notice": None}
        reply = notice = None
        if request.state == "answered" and request.reply_message_id is not None:
            reply = store.message(request.reply_message_id).text
        if request.state == "ended":
            # None if the asker itself was forgotten (`end_leftovers`): it was not told.
            found = store.notice_about(request.id, asker)
            notice = (found.text if found is not None else
                      f"Request {request.id} to {request.asked} ended without a reply.")
        return {"request_id": request.id, "asker": request.asker, "asked": request.asked,
                "state": request.state, "reply": reply, "notice": notice}

    async def handed_over_to(self, name: str) -> list[Request]:
        """Return the open requests asked of NAME whose message is no longer
        queued: an earlier agent of NAME (its Emacs died since) was given them."""
        return [request for request in await self._ledger.open_requests(name)
                if request.message.state != "queued"]

    async def withdraw(self, message_id: int) -> str:
        """Take back the queued plain message MESSAGE_ID, for the user; tell its sender.

        A request or a reply is not taken back: someone waits on it."""
        message = await self._ledger.message(message_id)
        if message.kind not in ("message", "notice"):
            raise InvalidParams(f"message {message_id} is a {message.kind}, which someone "
                                "waits on: only a plain message can be withdrawn")
        withdrawn = await self._ledger.withdraw(message_id, "withdrawn by the user")
        self._queued([withdrawn])
        if self.sent_by_live(withdrawn.sender, withdrawn.created_at):
            self._queued([await self._ledger.notify(
                withdrawn.sender,
                f"The user withdrew your message to {withdrawn.recipient} before delivery.")])
        return f"withdrew message {message_id} to {withdrawn.recipient}"

    async def agent_left(self, name: str) -> None:
        """End what waits on NAME, which closed, and what it waited on; tell
        whoever is still there.

        Its open requests end, each asker told; the requests it asked end
        too (a reply that comes later has no one to go to), each asked agent
        told it need not reply; messages still queued for it fail (a later
        agent of the same name is another conversation), and each live
        sender of a plain message is told.
        """
        graph = await self.wait_for()
        notices = await self._ledger.end_requests_to(name)
        asked, withdrawn = await self._ledger.end_requests_by(name, f"{name} closed")
        failed = await self._ledger.fail_queued_for(name, f"{name} closed before delivery")
        notices.extend(asked)
        self._ended(graph, name, [*notices, *withdrawn, *failed])
        for message in failed:
            if message.kind == "message" and self.sent_by_live(message.sender,
                                                               message.created_at):
                notices.append(await self._ledger.notify(
                    message.sender, f"{name} closed before your message was delivered."))
        self._queued(await self._to_the_living(notices))

    async def forget(self, name: str, reason: str) -> None:
        """End what an agent NAME of an earlier run left, for REASON: it will
        not come back, and a later agent of that name is another conversation.

        See `Ledger.end_leftovers`; each sender of a plain message that
        fails is told, as when an agent closes."""
        graph = await self.wait_for()
        notices, failed = await self._ledger.end_leftovers(name, reason)
        self._ended(graph, name, [*notices, *failed])
        for message in failed:
            if message.kind == "message" and self.sent_by_live(message.sender,
                                                               message.created_at):
                notices.append(await self._ledger.notify(
                    message.sender, f"Your message to {name} was not delivered: {reason}."))
        self._queued(notices)

    async def undelivered(self, message_id: int, reason: str) -> None:
        """Message MESSAGE_ID could not be handed over, for REASON: it fails.

        A request's asker is told at once (`Ledger.fail_delivery`): its
        request ends, as no answer can come, and an asker that waits on it
        stops waiting, with the reason.  A plain message's sender, if it is
        the live agent that sent it, is told too."""
        graph = await self.wait_for()
        failed, notice = await self._ledger.fail_delivery(message_id, reason)
        notices = [notice] if notice is not None else []
        if failed.request_id is not None and notice is not None:
            graph.remove(failed.request_id)
        elif failed.kind == "message" and self.sent_by_live(failed.sender, failed.created_at):
            notices.append(await self._ledger.notify(
                failed.sender,
                f"Your message to {failed.recipient} was not delivered: {failed.reason}."))
        self._queued(await self._to_the_living(notices))

    async def _to_the_living(self, notices: list[Message]) -> list[Message]:
        """Return NOTICES, those to agents that are gone failed instead.

        A notice queued for a name no agent has now would reach the next
        agent to take that name, which knows nothing of it.  (After a restart
        `forget` keeps them: an agent of the earlier Emacs may yet be resumed.)"""
        kept: list[Message] = []
        for notice in notices:
            if notice.recipient == LISPM or self._since(notice.recipient) is not None:
                kept.append(notice)
            else:
                kept.append(await self._ledger.mark_failed(
                    notice.id, f"{notice.recipient} is gone"))
        return kept

    def sent_by_live(self, sender: str, at: float) -> bool:
        """Return whether the live agent SENDER is the one that sent at time AT.

        A notice about what an earlier agent of that name sent goes to
        nobody (the ledger keeps why the message failed): the new agent
        inherits nothing of its predecessor's."""
        if sender == LISPM:
            return False
        since = self._since(sender)
        return since is not None and since <= at

    @staticmethod
    def _ended(graph: WaitForGraph, name: str, messages: Iterable[Message]) -> None:
        """Drop from GRAPH the requests asked by or of NAME that just ended.

        Each ended request has a notice or a failed request message among
        MESSAGES; a request of others they mention stays."""
        ids = {message.request_id for message in messages if message.request_id}
        for edge in graph.edges():
            if edge.request_id in ids and name in (edge.asker, edge.asked):
                graph.remove(edge.request_id)
