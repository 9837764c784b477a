"""The sidecar's side of each agent: its MCP server, its files, its queue.

Emacs owns the agent registry (it creates agents and knows their state);
the sidecar keeps what it needs to serve each agent: name, kind, folder,
the HTTP server, the token's folder, the watcher of the CLI's own records
and the queue of messages waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import holon
from .confine import Visibility, buffer_links
from .delivery import DeliveryQueue, Handover
from .editor import EditorMirror
from .errors import AgentExists, InvalidParams, UnknownAgent
from .holon import DaemonHandover, HolonDaemon
from .ide_lock import claude_config_dir, remove_lock, write_lock
from .ledger import Ledger, Message
from .lisp_tools import LispTools
from .messaging import Messenger
from .rpc import EmacsLink
from .runtime import AgentFiles, new_token
from .watchers import Inotify, Watcher, make_watcher
from .watchers.holon import HolonWatcher

if TYPE_CHECKING:
    from .ide import IdeServer
    from .ide_bridge import IdeBridge
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
    session_id: str
    files: AgentFiles
    server: HttpServer
    queue: DeliveryQueue
    seen: Visibility
    watcher: Watcher | None = None
    ide: IdeServer | None = None
    ide_bridge: IdeBridge | None = None
    ide_lock_dir: Path | None = None
    connected: bool = False

    holon_http_addr: str | None = None
    holon_home: str | None = None

    def describe(self) -> dict[str, Any]:
        """Return what Emacs needs to launch this agent's CLI."""
        return {
            "holon_http_addr": self.holon_http_addr,
            "holon_home": self.holon_home,
            "name": self.name,
            "kind": self.kind,
            "folder": self.folder,
            "port": self.server.port,
            "url": self.url,
            "session_id": self.session_id,
            "ide_port": self.ide.port if self.ide else None,
            "token_file": str(self.files.token_file),
            "claude_mcp_config": str(self.files.claude_mcp_config),
        }

    @property
    def url(self) -> str:
        """The MCP endpoint of this agent."""
        return f"http://127.0.0.1:{self.server.port}/mcp"


@dataclass
class Services:
    """What every agent's server and queue stand on."""

    list_agents: ListAgents
    ledger: Ledger
    handover: Handover
    inotify: Inotify
    home: Path
    mirror: EditorMirror
    link: EmacsLink
    lisp_tools: LispTools
    on_connected: Callable[[Agent], None]
    on_activity: Callable[[Agent], None]
    holon: HolonDaemon = field(default_factory=HolonDaemon)


@dataclass
class Agents:
    """The agents this sidecar serves, by name."""

    root: Path
    owner_pid: int
    services: Services
    by_name: dict[str, Agent] = field(default_factory=dict)
    messenger: Messenger = field(init=False)

    def __post_init__(self) -> None:
        self.messenger = Messenger(self.services.ledger, lambda: self.by_name, self.wake)

    def wake(self, name: str) -> None:
        """Tell agent NAME's queue that a message may be waiting."""
        if (agent := self.by_name.get(name)) is not None:
            agent.queue.wake()

    def get(self, name: str, instance: int | None = None) -> Agent:
        """Return the live agent NAME, which must be INSTANCE if that is given."""
        agent = self.by_name.get(name)
        if agent is None or (instance is not None and agent.instance != instance):
            suffix = f" (instance {instance})" if instance is not None else ""
            raise UnknownAgent(f"no agent named {name}{suffix}")
        return agent

    async def start(
        self,
        name: str,
        kind: str,
        folder: str,
        instance: int = 0,
        port: int = 0,
        restore: bool = False,
        session_id: str | None = None,
        ide_port: int = 0,
    ) -> Agent:
        """Start the MCP server of a new agent, or of one Emacs already had.

        With RESTORE, the agent keeps its token (read back from its folder),
        its PORT and its SESSION_ID, so a CLI that is already running keeps
        working.
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
            files.create(token, new_token())
        # The MCP SDK and uvicorn take most of a second to import: not before
        # the first agent needs them, so the sidecar answers Emacs at once.
        from .mcp_server import Guard, HttpServer
        from .tools import build_mcp
        from .views import Views

        agent: Agent | None = None

        def authenticated() -> None:
            if agent is not None and not agent.connected:
                agent.connected = True
                self.services.on_connected(agent)

        seen = Visibility(folder)
        if restore:
            seen.link(await self._links_delivered_to(name))
        views = Views(self.services.mirror, seen, self.services.link)
        mcp = build_mcp(name, instance, self.services.list_agents, self.messenger, views,
                        self.services.lisp_tools)
        app = mcp.streamable_http_app(json_response=True)
        server = HttpServer(Guard(app, token, lambda: server.port, authenticated))
        try:
            await server.start(port)
        except Exception:
            if not restore:
                files.remove()
            raise
        handover = self.services.handover
        if kind == "holon":
            handover = DaemonHandover(self.services.holon, self._holon_accepted)
        queue = DeliveryQueue(
            name, instance, self.services.ledger, handover,
            lambda _queue: self.services.on_activity(agent) if agent else None,
            on_delivered=lambda message: seen.link(buffer_links(message.text)),
        )
        agent = Agent(
            name=name, kind=kind, folder=folder, instance=instance,
            session_id=session_id or str(uuid.uuid4()), files=files, server=server, queue=queue,
            seen=seen,
        )
        files.write_claude_config(agent.url, token)
        if kind == "claude":
            try:
                await self._start_ide(agent, ide_port if restore else 0)
            except Exception:
                await self._shut(agent)
                if not restore:
                    files.remove()
                raise
        if kind == "holon":
            await self._open_holon(agent)
        self.by_name[name] = agent
        queue.start()
        log.info("agent %s (%s) serves on port %d", name, kind, server.port)
        return agent

    def _holon_accepted(self, name: str) -> None:
        agent = self.by_name.get(name)
        if agent is not None and isinstance(agent.watcher, HolonWatcher):
            agent.watcher.accepted()

    async def _open_holon(self, agent: Agent) -> None:
        """Give Holon agent AGENT its registry entry and LispM's skill."""
        daemon = self.services.holon
        agent.holon_http_addr = daemon.base.removeprefix("http://")
        agent.holon_home = str(daemon.home)
        tool = holon.tool_command(self.root)
        holon.register(self.root, agent.name, agent.url, agent.files.token_file, self.owner_pid)
        holon.write_skill(daemon.agent_home(agent.name), agent.name, tool)
        await daemon.refresh_skills()

    async def _close_holon(self, agent: Agent) -> None:
        """Take Holon agent AGENT's registry entry and skill away."""
        daemon = self.services.holon
        holon.unregister(self.root, agent.name, agent.files.token_file)
        holon.remove_skill(daemon.agent_home(agent.name))
        await daemon.refresh_skills()

    async def _start_ide(self, agent: Agent, port: int) -> None:
        """Serve Claude Code's IDE protocol for AGENT, and write its lock file."""
        from .ide import IdeServer
        from .ide_bridge import IdeBridge

        token = agent.files.read_token(ide=True)
        bridge = IdeBridge(agent.name, agent.seen, self.services.mirror, self.services.link)
        server = IdeServer(agent.name, Path(agent.seen.folder), token, bridge,
                           ide_name=f"LispM ({agent.name})")
        await server.start(port)
        agent.ide, agent.ide_bridge = server, bridge
        agent.ide_lock_dir = claude_config_dir(self.services.home, os.environ)
        write_lock(agent.ide_lock_dir, server.port, self.owner_pid, [agent.seen.folder],
                   token, server.ide_name)

    async def _links_delivered_to(self, name: str) -> set[str]:
        """The buffers linked in messages already handed to agent NAME."""
        delivered: list[Message] = await self.services.ledger.entries(100_000, name)
        return {
            link for message in delivered
            if message.recipient == name and message.state in ("delivered", "picked_up")
            for link in buffer_links(message.text)
        }

    async def attach(self, name: str, instance: int, pid: int, session_id: str | None) -> Agent:
        """Watch the records of agent NAME's CLI, which runs as process PID."""
        agent = self.get(name, instance)
        if agent.watcher is not None:
            await agent.watcher.stop()
        watcher: Watcher | None
        if agent.kind == "holon":
            watcher = HolonWatcher(self.services.holon, agent.name,
                                   on_reached=lambda: self._reached(agent))
        else:
            watcher = make_watcher(
                agent.kind, self.services.inotify, home=self.services.home, pid=pid,
                cwd=Path(agent.folder), session_id=session_id or agent.session_id,
            )
        agent.watcher = watcher
        if watcher is not None:
            await watcher.start()
            agent.queue.attach(watcher)
        return agent

    def _reached(self, agent: Agent) -> None:
        """A daemon's agent is reachable: it counts as connected (its terminal
        never calls the MCP server itself)."""
        if not agent.connected and self.by_name.get(agent.name) is agent:
            agent.connected = True
            self.services.on_connected(agent)

    async def _shut(self, agent: Agent) -> None:
        await agent.queue.stop()
        if agent.watcher is not None:
            await agent.watcher.stop()
        if agent.ide is not None:
            await agent.ide.stop()
        await agent.server.stop()

    def _remove_files(self, agent: Agent) -> None:
        agent.files.remove()
        if agent.ide is not None and agent.ide_lock_dir is not None:
            remove_lock(agent.ide_lock_dir, agent.ide.port)

    async def stop(self, name: str, instance: int | None = None) -> None:
        """Stop agent NAME: its server, watcher and queue; delete its files.

        Names are reused once an agent is gone, so Emacs also names the
        INSTANCE it means: a late request for an earlier agent of the same
        name must not stop its successor.  Whoever waits on the agent is told.
        """
        agent = self.get(name, instance)
        del self.by_name[name]
        await self._shut(agent)
        if agent.kind == "holon":
            await self._close_holon(agent)
        self._remove_files(agent)
        await self.messenger.agent_left(name)

    async def stop_all(self, keep_files: bool) -> None:
        """Stop every agent; with KEEP_FILES the tokens stay for a restart.

        The ledger is left as it is: the agents did not close, Emacs or the
        sidecar is going away, and queued messages wait for the next run.
        """
        agents = list(self.by_name.values())
        self.by_name.clear()
        await asyncio.gather(*(self._shut(agent) for agent in agents))
        if not keep_files:
            for agent in agents:
                if agent.kind == "holon":
                    await self._close_holon(agent)
                self._remove_files(agent)
        await self.services.holon.close()
