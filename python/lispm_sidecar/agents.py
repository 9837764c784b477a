"""The sidecar's side of each agent: its MCP server and its private files.

Emacs owns the agent registry (it creates agents and knows their state);
the sidecar keeps what it needs to serve each agent: name, kind, folder,
the HTTP server and the token's folder.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import AgentExists, InvalidParams, UnknownAgent
from .runtime import AgentFiles, new_token

if TYPE_CHECKING:
    from .mcp_server import HttpServer
    from .tools import ListAgents

log = logging.getLogger(__name__)


@dataclass
class Agent:
    """One live agent as the sidecar serves it."""

    name: str
    kind: str
    folder: str
    instance: int
    files: AgentFiles
    server: HttpServer
    connected: bool = False

    def describe(self) -> dict[str, Any]:
        """Return what Emacs needs to launch this agent's CLI."""
        return {
            "name": self.name,
            "kind": self.kind,
            "folder": self.folder,
            "port": self.server.port,
            "url": self.url,
            "token_file": str(self.files.token_file),
            "claude_mcp_config": str(self.files.claude_mcp_config),
        }

    @property
    def url(self) -> str:
        """The MCP endpoint of this agent."""
        return f"http://127.0.0.1:{self.server.port}/mcp"


@dataclass
class Agents:
    """The agents this sidecar serves, by name."""

    root: Path
    owner_pid: int
    list_agents: ListAgents
    on_connected: Callable[[str], None]
    by_name: dict[str, Agent] = field(default_factory=dict)

    async def start(
        self,
        name: str,
        kind: str,
        folder: str,
        instance: int = 0,
        port: int = 0,
        restore: bool = False,
    ) -> Agent:
        """Start the MCP server of a new agent, or of one Emacs already had.

        With RESTORE, the agent keeps its token (read back from its folder)
        and its PORT, so a CLI that is already running keeps working.
        """
        if name in self.by_name:
            raise AgentExists(f"an agent named {name} is already registered")
        if not Path(folder).is_absolute():
            raise InvalidParams(f"folder must be an absolute path: {folder!r}")
        files = AgentFiles(self.root, self.owner_pid, name, instance)
        if restore:
            if port <= 0:
                raise InvalidParams("restoring an agent needs its port")
            token = files.read_token()
        else:
            token = new_token()
            files.create(token)
        # The MCP SDK and uvicorn take most of a second to import: not before
        # the first agent needs them, so the sidecar answers Emacs at once.
        from .mcp_server import Guard, HttpServer
        from .tools import build_mcp

        agent: Agent | None = None

        def authenticated() -> None:
            if agent is not None and not agent.connected:
                agent.connected = True
                self.on_connected(name)

        mcp = build_mcp(name, self.list_agents)
        app = mcp.streamable_http_app(json_response=True)
        server = HttpServer(Guard(app, token, lambda: server.port, authenticated))
        try:
            await server.start(port)
        except Exception:
            if not restore:
                files.remove()
            raise
        agent = Agent(
            name=name, kind=kind, folder=folder, instance=instance, files=files, server=server
        )
        files.write_claude_config(agent.url, token)
        self.by_name[name] = agent
        log.info("agent %s (%s) serves on port %d", name, kind, server.port)
        return agent

    async def stop(self, name: str, instance: int | None = None) -> None:
        """Stop the server of agent NAME and delete its private files.

        Names are reused once an agent is gone, so Emacs also names the
        INSTANCE it means: a late request for an earlier agent of the same
        name must not stop its successor.
        """
        agent = self.by_name.get(name)
        if agent is None or (instance is not None and agent.instance != instance):
            raise UnknownAgent(
                f"no agent named {name}" + (f" (instance {instance})" if instance else "")
            )
        del self.by_name[name]
        await agent.server.stop()
        agent.files.remove()

    async def stop_all(self, keep_files: bool) -> None:
        """Stop every server; with KEEP_FILES the tokens stay for a restart."""
        agents = list(self.by_name.values())
        self.by_name.clear()
        await asyncio.gather(*(agent.server.stop() for agent in agents))
        if not keep_files:
            for agent in agents:
                agent.files.remove()
