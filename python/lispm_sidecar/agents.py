"""The sidecar's side of each agent: its MCP server, its files, its queue.

Emacs owns the agent registry (it creates agents and knows their state);
the sidecar keeps what it needs to serve each agent: name, kind, folder,
the HTTP server, the token's folder, the watcher of the CLI's own records
and the queue of messages waiting for it.  An agent that lives in Emacs
(kind `lispm`) has only a name, a folder, a queue and the activity Emacs
reports: no server, no token, no CLI to watch.  What differs by kind (Claude's
IDE server, a daemon's or Gateway's way of taking messages) is the kind's
adapter's business (`kinds/`): this module knows no kind by name.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import protocol
from .agent import AdapterContext, Agent, Services
from .confine import Visibility, buffer_links
from .delivery import DeliveryQueue
from .errors import AgentExists, InvalidParams, LispmError, UnknownAgent
from .kinds import KINDS, adapter_class
from .ledger import Message
from .messaging import HelperNotReady, Messenger
from .runtime import AgentFiles, new_token

if TYPE_CHECKING:
    from .kinds.base import KindAdapter
    from .mcp_server import HttpServer

log = logging.getLogger(__name__)

#: Seconds the sidecar, going away, waits for agents it is still closing
#: (their adapters may talk to a daemon) before it cancels what is left.
CLOSE_DEADLINE = 5.0
#: Seconds a helper Emacs started for a role has to register.
HELPER_DEADLINE = 10.0


@dataclass
class Agents:
    """The agents this sidecar serves, by name."""

    root: Path
    owner_pid: int
    services: Services
    by_name: dict[str, Agent] = field(default_factory=dict)
    #: Names whose server is being started (or restored after a restart):
    #: messages for them are taken, and wait in the ledger.
    starting: set[str] = field(default_factory=set)
    messenger: Messenger = field(init=False)
    adapters: dict[str, KindAdapter] = field(default_factory=dict)
    #: Agents being stopped (`stop`): `stop_all` waits for them, so that no
    #: token file or lock is left when the sidecar exits at once after.
    closing: set[asyncio.Task[None]] = field(default_factory=set)
    #: Agents being started: `stop_all` waits for them too, then stops them.
    opening: set[asyncio.Task[Agent]] = field(default_factory=set)
    #: Who waits for an agent of a name to be registered (`registered`).
    arrivals: dict[str, set[asyncio.Future[Agent]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.messenger = Messenger(self.services.ledger,
                                   lambda: [*self.by_name, *self.starting], self.wake,
                                   lambda name: a.kind if (a := self.by_name.get(name)) else None,
                                   self.start_helper,
                                   lambda name: a.since if (a := self.by_name.get(name)) else None)

    async def start_helper(self, caller: str, role: str) -> str:
        """Have Emacs start a helper of ROLE for agent CALLER; return its name
        once it is registered.  Emacs's refusal (an unknown role) is raised."""
        answer = await self.services.link.request(protocol.START_HELPER, protocol.StartHelperParams(
            role=role, caller=caller, caller_instance=self.get(caller).instance))
        name = answer.get("name") if isinstance(answer, dict) else None
        instance = answer.get("instance") if isinstance(answer, dict) else None
        if not isinstance(name, str) or not isinstance(instance, int):
            raise LispmError(f"Emacs started a helper of role {role} but did not say "
                             f"which: {answer!r}")
        await self.registered(name, instance, HELPER_DEADLINE)
        return name

    async def registered(self, name: str, instance: int, within: float) -> Agent:
        """Return agent NAME (INSTANCE) once it is registered; `HelperNotReady`
        if it is not within WITHIN seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while (agent := self.by_name.get(name)) is None or agent.instance != instance:
            arrival: asyncio.Future[Agent] = loop.create_future()
            waiting = self.arrivals.setdefault(name, set())
            waiting.add(arrival)
            try:
                await asyncio.wait_for(arrival, max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise HelperNotReady(f"{name} (instance {instance}), started by Emacs, did "
                                     f"not register within {within:g} s") from None
            finally:
                waiting.discard(arrival)
                if not waiting and self.arrivals.get(name) is waiting:
                    del self.arrivals[name]
        return agent

    def adapter(self, kind: str) -> KindAdapter:
        """The adapter of KIND, made on first use."""
        if kind not in self.adapters:
            context = AdapterContext(self.root, self.owner_pid, self.services, self.messenger)
            self.adapters[kind] = adapter_class(kind)(context)
        return self.adapters[kind]

    def resolve_diff(self, diff_id: str, outcome: dict[str, Any]) -> bool:
        """Hand the user's decision on the diff DIFF_ID to the agent that showed
        it; False if no agent waits for it any more."""
        return any(adapter.resolve_diff(diff_id, outcome) for adapter in self.adapters.values())

    async def mention(self, name: str, instance: int, file: str, line_start: int,
                      line_end: int) -> int:
        """Mention FILE's lines to agent NAME (see `KindAdapter.mention`)."""
        agent = self.get(name, instance)
        return await self.adapter(agent.kind).mention(agent, file, line_start, line_end)

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
        options: dict[str, Any] | None = None,
        resume: bool = False,
    ) -> Agent:
        """Start the MCP server of a new agent, or of one Emacs already had.

        With RESTORE, the agent keeps its token (read back from its folder),
        its PORT and its SESSION_ID, so a CLI that is already running keeps
        working.  OPTIONS are the kind's own parameters (Claude's
        `ide_port`, OpenClaw's `openclaw`), for its adapter.

        With RESUME, the agent is one of an earlier Emacs whose CLI resumes
        its session (SESSION_ID, if its kind has one): what waits for it in
        the ledger is delivered.  Otherwise (neither RESUME nor RESTORE) it
        is a new agent, and what an earlier agent of its name left is ended
        first (`Messenger.forget`): it must not receive it.
        """
        if kind not in KINDS:
            raise InvalidParams(f"unknown agent kind {kind!r}; the kinds are "
                                f"{', '.join(sorted(KINDS))}")
        if name in self.by_name or name in self.starting:
            raise AgentExists(f"an agent named {name} is already registered")
        if not Path(folder).is_absolute():
            raise InvalidParams(f"folder must be an absolute path: {folder!r}")
        self.starting.add(name)
        task = asyncio.create_task(self._open(name, kind, folder, instance, port, restore,
                                              resume, session_id, options or {}))
        self.opening.add(task)
        task.add_done_callback(self.opening.discard)
        # A shutdown that comes meanwhile cancels this request, not the start.
        return await asyncio.shield(task)

    async def _open(self, name: str, kind: str, folder: str, instance: int, port: int,
                    restore: bool, resume: bool, session_id: str | None,
                    options: dict[str, Any]) -> Agent:
        try:
            if not restore and not resume:
                await self.messenger.forget(name, f"{name} was not resumed: a new {name} started")
            return await self._start(name, kind, folder, instance, port, restore or resume,
                                     restore, session_id, options)
        finally:
            self.starting.discard(name)

    async def _start(self, name: str, kind: str, folder: str, instance: int, port: int,
                     earlier: bool, restore: bool, session_id: str | None,
                     options: dict[str, Any]) -> Agent:
        adapter = self.adapter(kind)
        files = AgentFiles(self.root, self.owner_pid, name, instance)
        agent: Agent | None = None

        def authenticated() -> None:
            if agent is not None and not agent.connected:
                agent.connected = True
                self.services.on_connected(agent)

        seen = Visibility(folder)
        if earlier:  # its conversation holds what it was told before
            seen.link(await self._links_delivered_to(name))
        server = (await self._serve(name, instance, files, port, restore, seen, authenticated)
                  if adapter.serves_mcp else None)
        agent = Agent(
            name=name, kind=kind, folder=folder, instance=instance,
            session_id=session_id or str(uuid.uuid4()), files=files, server=server,
            seen=seen, on_reached=self._reached, resumed=earlier and not restore,
            since=0.0 if earlier else time.time(),
        )
        try:
            await adapter.open(agent, options, restore)
        except BaseException:
            await adapter.shut(agent)
            if server is not None:
                await server.stop()
            if not restore:
                await adapter.close(agent)
                files.remove()
            raise
        agent.queue = DeliveryQueue(
            name, instance, self.services.ledger, adapter.handover(agent),
            lambda _queue: self.services.on_activity(agent) if agent else None,
            on_delivered=lambda message: seen.link(buffer_links(message.text)),
            renderer=adapter.renderer(agent), answers_anytime=adapter.answers_anytime,
            on_failed=self.messenger.undelivered,
        )
        self.by_name[name] = agent
        for arrival in self.arrivals.get(name, set()):
            if not arrival.done():
                arrival.set_result(agent)
        agent.queue.start()
        if agent.watcher is not None:  # one the adapter made at `open`: no process to wait for
            await agent.watcher.start()
            agent.queue.attach(agent.watcher)
        if server is not None:
            log.info("agent %s (%s) serves on port %d", name, kind, server.port)
        else:
            log.info("agent %s (%s) registered, without a server", name, kind)
        return agent

    async def _serve(self, name: str, instance: int, files: AgentFiles, port: int,
                     restore: bool, seen: Visibility,
                     authenticated: Callable[[], None]) -> HttpServer:
        """Start the MCP server of agent NAME, with its token in FILES (new
        unless RESTORE, then on the same PORT); AUTHENTICATED is called on
        each authenticated request."""
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
        from .mcp_tools import build_mcp
        from .views import Views

        views = Views(self.services.mirror, seen, self.services.link)
        mcp = build_mcp(name, instance, self.services.list_agents, self.messenger, views,
                        self.services.lisp_tools)
        app = mcp.streamable_http_app(json_response=True)
        server = HttpServer(Guard(app, token, lambda: server.port, authenticated))
        try:
            await server.start(port)
        except BaseException:  # cancelled too: `stop_all` gave up waiting
            if not restore:
                files.remove()
            raise
        return server

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
        watcher = self.adapter(agent.kind).watcher(agent, pid, session_id)
        agent.watcher = watcher
        if watcher is not None:
            await watcher.start()
            agent.queue.attach(watcher)
        return agent

    def report_activity(self, name: str, instance: int, activity: str | None) -> None:
        """Take what Emacs says agent NAME (INSTANCE), which lives in Emacs, is
        doing (see `KindAdapter.report_activity`)."""
        agent = self.get(name, instance)
        self.adapter(agent.kind).report_activity(agent, activity)

    def _reached(self, agent: Agent) -> None:
        if not agent.connected and self.by_name.get(agent.name) is agent:
            agent.connected = True
            self.services.on_connected(agent)

    async def _shut(self, agent: Agent) -> None:
        await agent.queue.stop()
        if agent.watcher is not None:
            await agent.watcher.stop()
        await self.adapter(agent.kind).shut(agent)
        if agent.server is not None:
            await agent.server.stop()

    async def _close(self, agent: Agent) -> None:
        """AGENT is gone for good: undo its adapter's work, delete its files."""
        try:
            await self.adapter(agent.kind).close(agent)
        finally:
            agent.files.remove()

    async def forget(self, names: list[str]) -> list[str]:
        """End what the agents NAMES of an earlier Emacs left: they will not
        be resumed.  A name that is live now is skipped; return the others."""
        forgotten = [name for name in names if name not in self.by_name
                     and name not in self.starting]
        for name in forgotten:
            await self.messenger.forget(name, f"{name} was not resumed after Emacs restarted")
        return forgotten

    async def stop(self, name: str, instance: int | None = None) -> None:
        """Stop agent NAME: its server, watcher and queue; delete its files.

        Names are reused once an agent is gone, so Emacs also names the
        INSTANCE it means: a late request for an earlier agent of the same
        name must not stop its successor.  Whoever waits on the agent is told.
        """
        agent = self.get(name, instance)
        del self.by_name[name]
        task = asyncio.create_task(self._stop(agent))
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)
        # A shutdown that comes meanwhile cancels this request, not the stop.
        await asyncio.shield(task)

    async def _stop(self, agent: Agent) -> None:
        try:
            await self._shut(agent)
        finally:
            await self._close(agent)
        await self.messenger.agent_left(agent.name)

    @staticmethod
    async def _finish(tasks: set[asyncio.Task[Any]], what: str) -> None:
        """Wait for TASKS (agents' starts or stops), cancelling what takes too long."""
        if not tasks:
            return
        _, late = await asyncio.wait(set(tasks), timeout=CLOSE_DEADLINE)
        for task in late:
            log.warning("an agent's %s took over %g s; cancelled", what, CLOSE_DEADLINE)
            task.cancel()
        if late:  # each one's files go in a `finally` or an `except`
            await asyncio.wait(late, timeout=CLOSE_DEADLINE)

    async def stop_all(self, keep_files: bool) -> None:
        """Stop every agent; with KEEP_FILES the tokens stay for a restart.

        The ledger is left as it is: the agents did not close, Emacs or the
        sidecar is going away, and queued messages wait for the next run.
        """
        await self._finish(self.opening, "start")
        agents = list(self.by_name.values())
        self.by_name.clear()
        await asyncio.gather(*(self._shut(agent) for agent in agents))
        if not keep_files:
            for agent in agents:
                await self._close(agent)
        await self._finish(self.closing, "stop")
        for adapter in self.adapters.values():
            await adapter.stop()
