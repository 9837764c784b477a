"""OpenClaw: sessions of a Gateway, messaged with its `agent` request.

See `gateway.py` for the Gateway and what LispM changes
there.  On a local Gateway the session gets the agent's MCP server (the
stdio bridge) for itself alone; on a remote one it gets no tools, and its
final reply to a request is recorded as the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ...delivery import Handover, render
from ...ledger import Message
from ...watchers import Watcher
from ..base import KindAdapter
from .gateway import GatewayHandover, Install, OpenClaw, bridge_entry
from .watcher import OpenClawWatcher

if TYPE_CHECKING:
    from ...agent import AdapterContext, Agent


class OpenClawAdapter(KindAdapter):
    """One Gateway connection for every OpenClaw agent of this sidecar."""

    kind = "openclaw"

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.gateway = OpenClaw(self.root, self.owner_pid)

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        install = Install.from_params(options.get("openclaw"))
        key = await self.gateway.open_session(
            install, agent.name, bridge_entry(self.root, agent.url, agent.files.token_file))
        target = self.gateway.target
        assert target is not None
        agent.launch.update(openclaw_session=key, openclaw_remote=target.remote,
                            openclaw_gateway=target.url,
                            openclaw_port=None if target.remote else target.port,
                            openclaw_token_file=str(target.token_file)
                            if target.token_file else None)

    def _remote(self, agent: Agent) -> bool:
        return bool(agent.launch.get("openclaw_remote"))

    def handover(self, agent: Agent) -> Handover:
        on_final = partial(self._answered, agent) if self._remote(agent) else None
        return GatewayHandover(self.gateway, agent.launch["openclaw_session"], on_final)

    def renderer(self, agent: Agent) -> Callable[[Message], str]:
        return partial(render, by_final_reply=True) if self._remote(agent) else render

    async def _answered(self, agent: Agent, message: Message, text: str | None,
                        error: str | None) -> None:
        """A remote session's run on MESSAGE ended: a request gets its answer."""
        if message.kind != "request" or message.request_id is None:
            return
        answer = text or f"(no answer: {agent.name}'s run ended with {error or 'no text'})"
        await self.context.messenger.reply(agent.name, message.request_id, answer)

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        return OpenClawWatcher(self.gateway, agent.launch["openclaw_session"],
                               on_reached=agent.reached)

    async def close(self, agent: Agent) -> None:
        await self.gateway.close_session(agent.name)

    async def stop(self) -> None:
        await self.gateway.close()
