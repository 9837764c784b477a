"""Agents talk: `send_message`, `ask_agent` and `reply`, over the ledger.

Every text goes into the ledger first (one durable commit) and then into
the recipient's delivery queue, so a message survives a restart of the
sidecar between being sent and being delivered.  Tools return at once;
answers arrive later as the asker's next message.  An agent cannot message
or ask itself.  The same three calls serve an agent's MCP tools and, over
the link (`lispm/send-message`, `lispm/ask-agent`, `lispm/reply`), an
agent that lives in Emacs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .errors import LispmError
from .ledger import LISPM, Ledger, Message, SelfRequest


class UnknownRecipient(LispmError):
    """The message names no live agent."""

    code = -32020


class SelfMessage(SelfRequest):
    """An agent sent a message to itself."""


class Messenger:
    """The messaging tools of every agent, and what happens when one leaves."""

    def __init__(
        self, ledger: Ledger, live_agents: Callable[[], Iterable[str]],
        wake: Callable[[str], None],
    ) -> None:
        self._ledger = ledger
        self._live_agents = live_agents
        self._wake = wake

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

    async def ask_agent(self, sender: str, to: str, request: str) -> str:
        """Queue REQUEST for TO under a new request id; answer at once with the id."""
        text, _ = await self.ask(sender, to, request)
        return text

    async def ask(self, sender: str, to: str, request: str) -> tuple[str, str]:
        """As `ask_agent`, and return the request id beside the answer."""
        self._check_recipient(sender, to)
        asked = await self._ledger.ask(sender, to, request)
        self._queued([asked.message])
        return f"asked {to}, request {asked.id}", asked.id

    async def reply(self, sender: str, request_id: str, text: str) -> str:
        """Answer REQUEST_ID, which must have been asked of SENDER and still be open."""
        message = await self._ledger.reply(sender, request_id.strip(), text)
        self._queued([message])
        return f"replied to {message.recipient}, request {message.request_id}"

    async def agent_left(self, name: str) -> None:
        """End what waits on NAME, which closed, and tell the senders.

        Its open requests end, and each asker is told; messages still queued
        for it fail (a later agent of the same name is another conversation),
        and each sender of a plain message is told.
        """
        notices = await self._ledger.end_requests_to(name)
        failed = await self._ledger.fail_queued_for(name, f"{name} closed before delivery")
        for message in failed:
            if message.kind == "message" and message.sender != LISPM:
                notices.append(await self._ledger.notify(
                    message.sender, f"{name} closed before your message was delivered."))
        self._queued(notices)

    async def forget(self, name: str, reason: str) -> None:
        """End what an agent NAME of an earlier run left, for REASON: it will
        not come back, and a later agent of that name is another conversation.

        See `Ledger.end_leftovers`; each sender of a plain message that
        fails is told, as when an agent closes."""
        notices, failed = await self._ledger.end_leftovers(name, reason)
        for message in failed:
            if message.kind == "message" and message.sender != LISPM:
                notices.append(await self._ledger.notify(
                    message.sender, f"Your message to {name} was not delivered: {reason}."))
        self._queued(notices)
