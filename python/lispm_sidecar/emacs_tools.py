"""LispM's own tools and skills, which live in Emacs, for the other agents.

`search_tools`, `skill` and `call_tool` are forwarded to Emacs, where the
tool registry, the user's policy and the approvals are.  A call that needs
the user's approval answers `{"pending": true}` at once (jsonrpc.el must
answer synchronously) and its result comes later as the notification
`lispm/tool-result`; the agent's MCP call stays open meanwhile, and nothing
else waits.  The wait is registered before the request goes out, since the
result can come in the same read as the answer, or even before it.  Emacs
may bound the wait (`{"pending": true, "within": SECONDS}`, for a running
tool); otherwise the call waits as long as an approval may
(`DECISION_TIMEOUT`), and then fails.  A call whose agent closes, or whose
client cancels it, ends at once.  Whenever the sidecar stops waiting for a
pending call (its deadline passed, or it was cancelled), it tells Emacs
(`lispm/tool-abandoned`), so that an approval still shown for it is
withdrawn rather than decided for nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from .errors import LispmError
from .protocol import (
    CALL_TOOL,
    SEARCH_TOOLS,
    SKILL,
    TOOL_ABANDONED,
    CallToolParams,
    SearchToolsParams,
    SkillParams,
    ToolAbandonedParams,
)
from .rpc import DECISION_TIMEOUT, EmacsLink


class ToolFailed(LispmError):
    """The tool ran and failed, or the user denied it."""

    code = -32040


def _seconds(value: Any, longest: float) -> float:
    """Return VALUE if it is a positive number of seconds up to LONGEST, else LONGEST."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < longest:
        return float(value)
    return longest


class LispTools:
    """The calls into Emacs's tools of one sidecar, and those still waiting."""

    def __init__(self, link: EmacsLink) -> None:
        self._link = link
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def search(self, agent: str, instance: int, query: str) -> list[dict[str, Any]]:
        """Return the tools and skills matching QUERY."""
        answer = await self._link.request(
            SEARCH_TOOLS, SearchToolsParams(name=agent, instance=instance, query=query))
        results = answer.get("results") if isinstance(answer, dict) else None
        return list(results) if isinstance(results, list) else []

    async def skill(self, agent: str, instance: int, name: str) -> dict[str, Any]:
        """Load the skill NAME for AGENT; return its instructions and whether its code loaded."""
        answer = await self._link.request(
            SKILL, SkillParams(name=agent, instance=instance, skill=name))
        if not isinstance(answer, dict):
            raise LispmError(f"no skill {name!r}")
        return dict[str, Any](answer)

    async def call(self, agent: str, instance: int, tool: str, args: dict[str, Any]) -> str:
        """Run TOOL with ARGS as AGENT and return its text; raise `ToolFailed` if it fails."""
        call_id = str(uuid.uuid4())
        later: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = later
        try:
            now = await self._link.request(CALL_TOOL, CallToolParams(
                name=agent, instance=instance, call_id=call_id, tool=tool, args=args))
            answer: Mapping[str, Any] = now
            if isinstance(answer, dict) and answer.get("pending"):
                within = _seconds(answer.get("within"), DECISION_TIMEOUT)
                try:
                    answer = await asyncio.wait_for(later, within)
                except TimeoutError:
                    self._abandon(call_id, "deadline")
                    raise ToolFailed(
                        f"{tool}: no result from Emacs within {within:g} s; "
                        "the call is abandoned") from None
                except asyncio.CancelledError:
                    self._abandon(call_id, "cancelled")
                    raise
        finally:
            self._pending.pop(call_id, None)
        if not isinstance(answer, dict):
            raise ToolFailed(f"{tool}: Emacs gave no result")
        if not answer.get("ok"):
            raise ToolFailed(str(answer.get("error") or f"{tool} failed"))
        return str(answer.get("text", ""))

    def _abandon(self, call_id: str, reason: Literal["deadline", "cancelled"]) -> None:
        """Tell Emacs the pending call CALL_ID is given up, for REASON."""
        self._link.notify(TOOL_ABANDONED, ToolAbandonedParams(call_id=call_id, reason=reason))

    def resolve(self, call_id: str, result: dict[str, Any]) -> bool:
        """Finish the pending call CALL_ID with RESULT; False if none waits."""
        waiting = self._pending.get(call_id)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(result)
        return True
