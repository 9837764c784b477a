"""Claude Code: a terminal agent that also reaches Emacs through its IDE protocol."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...ide_lock import claude_config_dir, remove_lock, write_lock
from ..base import TerminalAdapter

if TYPE_CHECKING:
    from ...agent import Agent


class ClaudeAdapter(TerminalAdapter):
    """Serves Claude's IDE WebSocket and writes the lock file that finds it."""

    kind = "claude"

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        from ...ide import IdeServer
        from ...ide_bridge import IdeBridge

        port = options.get("ide_port") if restore else 0
        token = agent.files.read_token(ide=True)
        bridge = IdeBridge(agent.name, agent.seen, self.services.mirror, self.services.link)
        server = IdeServer(agent.name, Path(agent.seen.folder), token, bridge,
                           ide_name=f"LispM ({agent.name})")
        await server.start(port if isinstance(port, int) else 0)
        agent.ide, agent.ide_bridge = server, bridge
        agent.ide_lock_dir = claude_config_dir(self.services.home, os.environ)
        write_lock(agent.ide_lock_dir, server.port, self.owner_pid,
                   [agent.seen.folder], token, server.ide_name)

    async def shut(self, agent: Agent) -> None:
        if agent.ide is not None:
            await agent.ide.stop()

    async def close(self, agent: Agent) -> None:
        if agent.ide is not None and agent.ide_lock_dir is not None:
            remove_lock(agent.ide_lock_dir, agent.ide.port)
