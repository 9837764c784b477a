"""The interface of a kind's adapter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..delivery import Handover, render
from ..errors import InvalidParams
from ..ledger import Message
from ..watchers import Watcher

if TYPE_CHECKING:
    from ..agent import AdapterContext, Agent, Services


class KindAdapter:
    """What one kind of agent adds; one adapter object per kind and sidecar.

    The hooks run in this order: `open` (before the agent's queue exists:
    it may decide the handover, and set `agent.watcher` if its state needs
    no process), `handover` and `renderer`, `watcher` (when the terminal's
    process is known), `shut` (the agent's servers stop:
    also when the sidecar goes away with the agent still running) and
    `close` (the agent is gone for good)."""

    kind: ClassVar[str] = ""
    #: Whether its agents get an MCP server and a token of their own; an
    #: agent that lives in Emacs calls the sidecar over the link instead.
    serves_mcp: ClassVar[bool] = True
    #: Whether its agents take an answer to their requests whatever they are
    #: doing: their ask waits for it (see `delivery.py`).
    answers_anytime: ClassVar[bool] = False

    def __init__(self, context: AdapterContext) -> None:
        self.context = context
        self.services: Services = context.services
        #: The sidecar's runtime folder, and the pid of the Emacs it serves.
        self.root: Path = context.root
        self.owner_pid: int = context.owner_pid

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        """Prepare AGENT; OPTIONS are the kind's own start parameters."""

    def handover(self, agent: Agent) -> Handover:
        """How messages reach AGENT: by default, pasted into its composer."""
        return self.services.handover

    def renderer(self, agent: Agent) -> Callable[[Message], str]:
        """How AGENT reads a message."""
        return render

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        """What follows AGENT's state, its CLI running as PID."""
        return None

    async def shut(self, agent: Agent) -> None:
        """Stop what this adapter serves for AGENT."""

    async def close(self, agent: Agent) -> None:
        """Undo `open` for AGENT, which is gone."""

    async def stop(self) -> None:
        """The sidecar is going away: release what the adapter holds."""

    # What the user does in Emacs that concerns an agent of this kind.

    def resolve_diff(self, diff_id: str, outcome: dict[str, Any]) -> bool:
        """Hand the user's decision on the diff DIFF_ID to the agent of this
        kind that showed it; False if none of them waits for it."""
        return False

    def report_activity(self, agent: Agent, activity: str | None) -> None:
        """Emacs says what AGENT, which lives in Emacs, is doing (ACTIVITY).

        Only such a kind takes it: the others' activity is their records'."""
        raise InvalidParams(f"{agent.name} is a {agent.kind} agent, whose activity "
                            f"its own records tell")

    async def mention(self, agent: Agent, file: str, line_start: int, line_end: int) -> int:
        """Mention lines LINE_START to LINE_END of FILE to AGENT, as its IDE
        would; return how many of its connections got it."""
        raise InvalidParams(f"{agent.name} is a {agent.kind} agent, which has no IDE "
                            f"connection to mention a file to")

