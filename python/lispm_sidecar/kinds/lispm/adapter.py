"""LispM's own agent: it lives in Emacs, which tells its state and takes its messages.

Such an agent has no CLI, no terminal and no MCP server: it calls the
messaging over the link (`lispm/send-message`, `lispm/ask-agent`,
`lispm/reply`), Emacs reports what it is doing (`lispm/actor-activity`),
and its queue hands a due message to Emacs (`emacs/deliver`) while Emacs
says it is idle; an answer to one of its requests at any time, as its ask
waits for it.  Emacs answers whether the agent took it: taken, it is
picked up at once; not taken, it waits in the queue for the next report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import InvalidParams, NotNow
from ...ledger import Message
from ...protocol import DELIVER, DeliverParams
from ...rpc import EmacsLink
from ..base import KindAdapter
from .watcher import ReportedActivity

if TYPE_CHECKING:
    from ...agent import Agent
    from ...delivery import Handover
    from ...watchers import Watcher


class EmacsHandover:
    """Give a message to an agent that lives in Emacs (`emacs/deliver`)."""

    def __init__(self, link: EmacsLink, watcher: ReportedActivity) -> None:
        self._link = link
        self._watcher = watcher

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        reports = self._watcher.reports
        answer = await self._link.request(DELIVER, DeliverParams(
            name=name, instance=instance, text=text, message_id=message.id,
            kind=message.kind, sender=message.sender, request_id=message.request_id))
        if isinstance(answer, dict) and answer.get("taken") is True:
            return True
        # Nothing was taken: the queue takes its claim back, and the message
        # waits until Emacs reports the agent idle again.
        self._watcher.refused(reports)
        raise NotNow(f"{name} did not take message {message.id}: it is not idle")


class LispmAdapter(KindAdapter):
    """No server, no files, no process: Emacs reports and receives."""

    kind = "lispm"
    serves_mcp: ClassVar[bool] = False
    answers_anytime: ClassVar[bool] = True

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        agent.watcher = ReportedActivity()

    def _reported(self, agent: Agent) -> ReportedActivity:
        watcher = agent.watcher
        assert isinstance(watcher, ReportedActivity), "opened without its watcher"
        return watcher

    def handover(self, agent: Agent) -> Handover:
        return EmacsHandover(self.services.link, self._reported(agent))

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        raise InvalidParams(f"{agent.name} lives in Emacs: it has no process to watch, "
                            f"Emacs reports its activity (lispm/actor-activity)")

    def report_activity(self, agent: Agent, activity: str | None) -> None:
        self._reported(agent).report(activity)
