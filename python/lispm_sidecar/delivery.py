"""When a message goes into an agent: one FIFO queue per agent.

A queue hands its oldest message over only while the agent's watcher says
the agent is *idle* (waiting for its user) — an unknown state is not idle,
because a paste followed by Return during an approval prompt approves the
pending command.  After a hand-over it waits until the agent's records
show the message was picked up (a new prompt), or 30 s, before the next.

How a message is handed over is the `Handover`'s business: into the CLI's
composer through Emacs (`ComposerHandover`), or, for agents that live in a
daemon, to the daemon directly (Holon's `DaemonHandover`, OpenClaw's
`GatewayHandover`).  Everything here is driven by events —
the watcher's callbacks and new messages — with one exception: when Emacs
answers that the CLI shows a dialog a paste would answer (`NotNow`), the
queue looks again every second, as a dialog's closing shows only on the
screen.  Nothing was pasted, so the claim is taken back (`unclaim`: the
message is `queued` again, its attempt not counted), and until the dialog
is gone the queue only asks the hand-over whether a paste could go in now
(`ready`, `emacs/paste-ready`), which writes nothing to the ledger; then
the message is claimed and pasted as any other.  So a dialog costs two
ledger writes however long it stays open, and a message held behind one
is `queued`, in the ledger as on screen, also if the sidecar dies.

An agent whose ask waits for its answer (LispM's own: its kind's adapter
says `answers_anytime`) takes an answer to one of its requests — a reply,
or the notice that the asked agent ended without one — whatever it is
doing: such answers go first, and the rest waits for *idle* as ever.

A message the hand-over refuses with an error fails (`on_failed`, the
Messenger's `undelivered`): a request ends, as no answer can come, and
its asker is told at once, with the reason, so an asker that waits stops
waiting; the live agent that sent a plain message is told too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from .errors import LispmError, NotNow
from .ledger import Ledger, Message
from .protocol import PASTE, PASTE_READY, PasteParams, PasteReadyParams
from .rpc import EmacsLink
from .sanitize import sanitize
from .watchers import AgentActivity, Watcher

log = logging.getLogger(__name__)

PICKUP_TIMEOUT = 30.0
#: Seconds before trying again when the agent's CLI showed a dialog.
NOT_NOW_RETRY = 1.0


def render(message: Message, by_final_reply: bool = False) -> str:
    """Return MESSAGE as the receiving agent reads it, header first.

    A request says how to answer it: with the reply tool, or, BY_FINAL_REPLY
    (an agent without LispM's tools), by simply answering."""
    if message.kind == "request":
        how = ("your reply to this message is sent back as the answer"
               if by_final_reply else
               f"give it with your reply tool, request {message.request_id}")
        return (
            f"[Request {message.request_id} from {message.sender}]\n{message.text}\n\n"
            f"({message.sender} waits for your answer: {how}.)"
        )
    if message.kind == "reply":
        return f"[Reply from {message.sender} to request {message.request_id}]\n{message.text}"
    return f"[Message from {message.sender}]\n{message.text}"


class Handover(Protocol):
    """A way of giving an agent a message."""

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        """Give agent NAME (INSTANCE) MESSAGE, rendered as TEXT, or raise `LispmError`.

        Return True if the receiver has confirmed it took the message (a
        daemon or Gateway that accepted it): it is picked up at once.
        False leaves the confirmation to the agent's own records."""
        ...


@runtime_checkable
class WaitingHandover(Handover, Protocol):
    """A hand-over that may answer `NotNow`, and can say when it could go in."""

    async def ready(self, name: str, instance: int) -> None:
        """Return if a hand-over to NAME (INSTANCE) could go in now; else raise `NotNow`.

        Nothing is handed over."""
        ...


class ComposerHandover:
    """Paste into the CLI's composer: Emacs owns the terminal, so Emacs writes."""

    def __init__(self, link: EmacsLink) -> None:
        self._link = link

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        await self._link.request(PASTE, PasteParams(name=name, instance=instance, text=text))
        return False

    async def ready(self, name: str, instance: int) -> None:
        await self._link.request(PASTE_READY, PasteReadyParams(name=name, instance=instance))


class DeliveryQueue:
    """The queue of one agent, run by one task that sleeps between events."""

    def __init__(
        self,
        name: str,
        instance: int,
        ledger: Ledger,
        handover: Handover,
        on_change: Callable[[DeliveryQueue], None],
        on_delivered: Callable[[Message], None] | None = None,
        renderer: Callable[[Message], str] = render,
        answers_anytime: bool = False,
        on_failed: Callable[[int, str], Awaitable[None]] | None = None,
    ) -> None:
        """ANSWERS_ANYTIME: the agent takes an answer to its requests even
        when it is not idle (its ask waits for it).  ON_FAILED(id, reason)
        fails a message that could not be handed over and tells whoever
        waits on it (`Messenger.undelivered`); without it, the message only
        fails."""
        self.name = name
        self.instance = instance
        self.queued = 0
        self._ledger = ledger
        self._handover = handover
        self._on_change = on_change
        self._on_delivered = on_delivered
        self._render = renderer
        self._watcher: Watcher | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: A paste was refused (NotNow): until the hand-over is ready, only ask.
        self._held = False
        self._answers_anytime = answers_anytime
        self._on_failed = on_failed
        #: An answer was not taken: it waits, as the rest, until the next report.
        self._answer_refused = False

    @property
    def activity(self) -> AgentActivity:
        """What the agent's records say it is doing."""
        return self._watcher.activity if self._watcher else AgentActivity.UNKNOWN

    def start(self) -> None:
        """Start delivering; messages already queued in the ledger count too."""
        self._task = asyncio.create_task(self._run(), name=f"delivery:{self.name}")
        self.wake()

    async def stop(self) -> None:
        """Stop delivering (what is queued stays queued in the ledger)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def attach(self, watcher: Watcher) -> None:
        """Follow WATCHER, which reads the agent's own records."""
        self._watcher = watcher
        watcher.subscribe(self._watched)
        self.wake()

    def wake(self) -> None:
        """Look again: a message was queued, or something changed."""
        self._wake.set()

    def text_of(self, message: Message) -> str:
        """Return MESSAGE as this agent reads it when it is handed over."""
        return sanitize(self._render(message))

    def _watched(self) -> None:
        self._answer_refused = False
        self._on_change(self)
        self.wake()

    async def _count(self) -> list[Message]:
        queued = await self._ledger.queued_for(self.name)
        if len(queued) != self.queued:
            self.queued = len(queued)
            self._on_change(self)
        return queued

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._deliver_while_idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivery to %s failed", self.name)

    async def _deliver_while_idle(self) -> None:
        while True:
            queued = await self._count()
            if not queued or self._watcher is None:
                return
            if (answer := await self._answer(queued)) is not None:
                if not await self._deliver(answer):
                    self._answer_refused = True
                    return
                continue
            if not self._watcher.accepts_delivery():
                return
            if self._held and not await self._ready():
                return
            if not await self._deliver(queued[0]):
                return

    async def _answer(self, queued: list[Message]) -> Message | None:
        """The oldest of QUEUED that answers a request of this agent, if it
        takes answers anytime (and did not just refuse one)."""
        if not self._answers_anytime or self._answer_refused:
            return None
        for message in queued:
            if message.kind == "reply":
                return message
            if (message.kind == "notice" and message.request_id is not None
                    and (await self._ledger.request(message.request_id)).asker == self.name):
                return message
        return None

    async def _ready(self) -> bool:
        """Whether the hand-over that refused a paste could take one now."""
        if not isinstance(self._handover, WaitingHandover):
            self._held = False
            return True
        try:
            await self._handover.ready(self.name, self.instance)
        except NotNow as err:
            log.debug("%s still cannot take a message: %s", self.name, err)
            self._look_again_later()
            return False
        self._held = False
        return True

    def _look_again_later(self) -> None:
        # A dialog's closing is seen only on the screen, which sends no event.
        asyncio.get_running_loop().call_later(NOT_NOW_RETRY, self.wake)

    async def _deliver(self, message: Message) -> bool:
        """Hand MESSAGE over; False if the agent could not take it just now."""
        assert self._watcher is not None
        prompts_before = self._watcher.prompts_seen
        # At most once: the durable claim comes before the paste, so a
        # crash in between loses a paste (visibly: delivered, never
        # picked up) rather than pasting it twice after a restart.
        await self._ledger.mark_delivered(message.id)
        await self._count()
        # From here the paste may happen: if this is cancelled, the claim stands.
        try:
            confirmed = await self._handover.hand_over(self.name, self.instance, message,
                                                       self.text_of(message))
        except NotNow as err:
            # Nothing was pasted: take the claim back, and only ask until
            # the hand-over could take it.
            log.info("%s cannot take message %d yet: %s", self.name, message.id, err)
            await self._ledger.unclaim(message.id)
            await self._count()
            self._held = True
            self._look_again_later()
            return False
        except LispmError as err:
            log.warning("cannot hand %s message %d: %s", self.name, message.id, err)
            if self._on_failed is not None:
                await self._on_failed(message.id, str(err))
            else:
                await self._ledger.mark_failed(message.id, str(err))
            return True
        if self._on_delivered is not None:
            self._on_delivered(message)
        if confirmed or await self._picked_up(prompts_before):
            await self._ledger.mark_picked_up(message.id)
        else:
            log.warning("%s did not record message %d within %gs", self.name, message.id,
                        PICKUP_TIMEOUT)
        return True

    async def _picked_up(self, prompts_before: int) -> bool:
        """Wait until the agent records a new prompt; False after `PICKUP_TIMEOUT`."""
        watcher = self._watcher
        assert watcher is not None
        seen = asyncio.Event()

        def check() -> None:
            if watcher.prompts_seen > prompts_before:
                seen.set()

        watcher.subscribe(check)
        check()
        try:
            await asyncio.wait_for(seen.wait(), PICKUP_TIMEOUT)
        except TimeoutError:
            return False
        finally:
            watcher.unsubscribe(check)
        return True
