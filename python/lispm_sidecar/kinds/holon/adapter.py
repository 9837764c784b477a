"""Holon: agents of a daemon, prompted through its control endpoint.

Holon has no MCP client: the agent reaches LispM's tools with the shell
command `lispm-tool`, which finds this agent's server in a registry file
(see `daemon.py`), taught by a skill written into the
agent's home while its terminal is open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...delivery import Handover
from ...watchers import Watcher
from ..base import KindAdapter
from . import daemon as holon
from .daemon import DaemonHandover, HolonDaemon
from .watcher import HolonWatcher

if TYPE_CHECKING:
    from ...agent import AdapterContext, Agent


class HolonAdapter(KindAdapter):
    """Registry entry, skill, daemon handover and daemon watcher."""

    kind = "holon"

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        self.daemon = HolonDaemon()

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        agent.launch.update(holon_http_addr=self.daemon.base.removeprefix("http://"),
                            holon_home=str(self.daemon.home))
        tool = holon.tool_command(self.root)
        holon.register(self.root, agent.name, agent.url, agent.files.token_file, self.owner_pid)
        holon.write_skill(self.daemon.agent_home(agent.name), agent.name, tool)
        await self.daemon.refresh_skills()

    def handover(self, agent: Agent) -> Handover:
        return DaemonHandover(self.daemon)

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        return HolonWatcher(self.daemon, agent.name, on_reached=agent.reached)

    async def close(self, agent: Agent) -> None:
        holon.unregister(self.root, agent.name, agent.files.token_file)
        holon.remove_skill(self.daemon.agent_home(agent.name))
        await self.daemon.refresh_skills()

    async def stop(self) -> None:
        await self.daemon.close()
