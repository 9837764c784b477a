"""The methods Emacs calls on the sidecar, and the sidecar's calls into Emacs.

Each method, its params and its result are described once, in
`protocol.py`; the link checks the params from Emacs against that
description before a handler here runs, so each handler gets them typed.
README's "The link's methods" says what each method does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from . import PROTOCOL_VERSION, __version__, protocol
from .agent import Agent, Services
from .agents import Agents
from .delivery import ComposerHandover
from .editor import EditorMirror
from .emacs_tools import LispTools
from .errors import LispmError
from .kinds.claude.ide_lock import clean_stale_locks, scanned_config_dirs
from .ledger import Ledger
from .protocol import (
    ActorActivityParams,
    AgentActivityParams,
    AgentAttachedParams,
    AgentAttachedResult,
    AgentConnectedParams,
    AgentLaunch,
    AgentsForgetParams,
    AgentsForgetResult,
    AgentsResult,
    AgentStartParams,
    AgentStopParams,
    AskAgentParams,
    AskAgentResult,
    AtMentionParams,
    AtMentionResult,
    AuditParams,
    DecisionsParams,
    DecisionsResult,
    DiffResolvedParams,
    EditorStateParams,
    Empty,
    HelloParams,
    HelloResult,
    Json,
    LedgerParams,
    LedgerResult,
    ListAgentsResult,
    McpCallParams,
    McpCallResult,
    McpChangedParams,
    McpServersParams,
    McpServersResult,
    MessageSentResult,
    ModelCancelParams,
    ModelCancelResult,
    ModelStreamParams,
    ModelStreamResult,
    PingEmacsParams,
    PingEmacsResult,
    ReplyParams,
    RequestsParams,
    RequestsResult,
    SendMessageParams,
    StatsResult,
    ToolResultParams,
    WithdrawParams,
)
from .rpc import EmacsLink
from .runtime import remove_orphans, runtime_root
from .watchers import Inotify

if TYPE_CHECKING:
    from .mcp_clients import McpClients
    from .models.stream import ModelStreams

log = logging.getLogger(__name__)


class NotReady(LispmError):
    """A request came before `lispm/hello`."""

    code = -32006


def default_ledger_file() -> str:
    """Return where the ledger lives when Emacs names no file."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "lispm", "ledger.sqlite3")


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sidecar:
    """Everything one sidecar process serves, wired to its link with Emacs."""

    def __init__(self, link: EmacsLink) -> None:
        self.link = link
        self.stopping = asyncio.Event()
        self.root = runtime_root()
        self._agents: Agents | None = None
        self._ledger: Ledger | None = None
        self._inotify: Inotify | None = None
        self.mirror = EditorMirror()
        self.lisp_tools = LispTools(link)
        self._models: ModelStreams | None = None
        self._mcp: McpClients | None = None
        link.serve(protocol.HELLO, self.hello)
        link.serve(protocol.AGENT_START, self.agent_start)
        link.serve(protocol.AGENT_ATTACHED, self.agent_attached)
        link.serve(protocol.AGENT_STOP, self.agent_stop)
        link.serve(protocol.AGENTS_FORGET, self.agents_forget)
        link.serve(protocol.AGENTS, self.list_served)
        link.serve(protocol.LEDGER, self.ledger_entries)
        link.serve(protocol.EDITOR_STATE, self.editor_state)
        link.serve(protocol.DIFF_RESOLVED, self.diff_resolved)
        link.serve(protocol.AT_MENTION, self.at_mention)
        link.serve(protocol.TOOL_RESULT, self.tool_result)
        link.serve(protocol.AUDIT, self.audit)
        link.serve(protocol.DECISIONS, self.decisions)
        link.serve(protocol.SEND_MESSAGE, self.send_message)
        link.serve(protocol.ASK_AGENT, self.ask_agent)
        link.serve(protocol.REPLY, self.reply)
        link.serve(protocol.REQUESTS, self.requests)
        link.serve(protocol.WITHDRAW, self.withdraw)
        link.serve(protocol.ACTOR_ACTIVITY, self.actor_activity)
        link.serve(protocol.PING, self.ping)
        link.serve(protocol.PING_EMACS, self.ping_emacs)
        link.serve(protocol.STATS, self.stats)
        link.serve(protocol.SHUTDOWN, self.shutdown)
        link.serve(protocol.MODEL_STREAM, self.model_stream)
        link.serve(protocol.MODEL_CANCEL, self.model_cancel)
        link.serve(protocol.MCP_SERVERS, self.mcp_servers)
        link.serve(protocol.MCP_CALL, self.mcp_call)

    @property
    def models(self) -> ModelStreams:
        """The model streams, made (and the dialects imported) at the first one."""
        if self._models is None:
            from .models.stream import ModelStreams

            self._models = ModelStreams(self.link)
        return self._models

    async def model_stream(self, params: ModelStreamParams) -> ModelStreamResult:
        """Start a model stream; see `ModelStreams.start`."""
        return await self.models.start(params)

    async def model_cancel(self, params: ModelCancelParams) -> ModelCancelResult:
        """Cancel a model stream; see `ModelStreams.cancel`."""
        return await self.models.cancel(params)

    @property
    def mcp(self) -> McpClients:
        """The clients of the user's MCP servers, made at the first use."""
        if self._mcp is None:
            from .mcp_clients import McpClients

            self._mcp = McpClients(self._notify_mcp_changed)
        return self._mcp

    def _notify_mcp_changed(self, server: str, reason: Literal["tools", "exited"]) -> None:
        self.link.notify(protocol.MCP_CHANGED, McpChangedParams(server=server, reason=reason))

    async def mcp_servers(self, params: McpServersParams) -> McpServersResult:
        """Take the user's MCP servers; see `McpClients.declare`."""
        return await self.mcp.declare(params)

    async def mcp_call(self, params: McpCallParams) -> McpCallResult:
        """Call a tool of one of the user's MCP servers; see `McpClients.call`."""
        return await self.mcp.call(params)

    async def close_mcp(self) -> None:
        """Stop the user's MCP servers, if any was started."""
        if self._mcp is not None:
            await self._mcp.close()

    @property
    def agents(self) -> Agents:
        """The agents; they exist once Emacs has said hello."""
        if self._agents is None:
            raise NotReady("Emacs must send lispm/hello first")
        return self._agents

    def _notify_connected(self, agent: Agent) -> None:
        self.link.notify(protocol.AGENT_CONNECTED,
                         AgentConnectedParams(name=agent.name, instance=agent.instance))

    def _notify_activity(self, agent: Agent) -> None:
        self.link.notify(protocol.AGENT_ACTIVITY, AgentActivityParams(
            name=agent.name, instance=agent.instance,
            activity=str(agent.queue.activity), queued=agent.queue.queued,
            session=agent.watcher.cli_session if agent.watcher else None,
            usage=(agent.watcher.usage.as_params()
                   if agent.watcher and agent.watcher.usage else None),
        ))

    async def _open(self, emacs_pid: int, ledger_file: Path) -> None:
        """Open the ledger and the watchers, and resume what the ledger holds."""
        self._ledger = await Ledger.open(ledger_file)
        self._inotify = Inotify()
        self._agents = Agents(
            root=self.root,
            owner_pid=emacs_pid,
            services=Services(
                list_agents=self.emacs_agents,
                ledger=self._ledger,
                handover=ComposerHandover(self.link),
                inotify=self._inotify,
                home=Path.home(),
                mirror=self.mirror,
                link=self.link,
                lisp_tools=self.lisp_tools,
                on_connected=self._notify_connected,
                on_activity=self._notify_activity,
            ),
        )

    async def emacs_agents(self) -> ListAgentsResult:
        """Ask Emacs for the live agents and the roles (none if it sends none)."""
        answer = await self.link.request(protocol.LIST_AGENTS, Empty())
        agents = answer.get("agents") if isinstance(answer, dict) else None
        roles = answer.get("roles") if isinstance(answer, dict) else None
        return {"agents": list(agents) if isinstance(agents, list) else [],
                "roles": list(roles) if isinstance(roles, list) else []}

    async def hello(self, params: HelloParams) -> HelloResult:
        """Open the ledger and the watchers, then clean up after dead Emacsen.

        The link has checked the protocol version first.
        """
        emacs_pid = params.get("emacs_pid", 0)
        if emacs_pid <= 0:
            emacs_pid = os.getppid()
        ledger_file = params.get("ledger_file") or default_ledger_file()
        if self._agents is None:
            await self._open(emacs_pid, Path(ledger_file))
        for config_dir in scanned_config_dirs(Path.home(), os.environ):
            for lock in clean_stale_locks(config_dir):
                log.info("removed the stale IDE lock %s", lock)
        removed = remove_orphans(self.root)
        if removed:
            log.info("removed files of agents whose Emacs died: %s", ", ".join(removed))
        return {
            "protocol": PROTOCOL_VERSION,
            "version": __version__,
            "pid": os.getpid(),
            "runtime_dir": str(self.root),
            "ledger_file": str(self._ledger.path if self._ledger else ledger_file),
        }

    async def agent_start(self, params: AgentStartParams) -> AgentLaunch:
        """Start an agent's server; see `Agents.start`."""
        agent = await self.agents.start(
            name=params["name"],
            kind=params["kind"],
            folder=params["folder"],
            instance=params.get("instance", 0),
            port=params.get("port", 0),
            restore=params.get("restore") is True,
            session_id=params.get("session_id"),
            options=dict(params),
            resume=params.get("resume") is True,
        )
        return cast(AgentLaunch, agent.describe())

    async def agents_forget(self, params: AgentsForgetParams) -> AgentsForgetResult:
        """End what agents of an earlier Emacs left; see `Agents.forget`."""
        return {"forgotten": await self.agents.forget(params["names"])}

    async def agent_attached(self, params: AgentAttachedParams) -> AgentAttachedResult:
        """Watch an agent's CLI, now that its terminal runs as process `pid`."""
        agent = await self.agents.attach(
            params["name"], params.get("instance", 0), params.get("pid", 0),
            params.get("session_id"),
        )
        self._notify_activity(agent)
        return {"watching": agent.watcher.describe() if agent.watcher else None}

    async def diff_resolved(self, params: DiffResolvedParams) -> None:
        """Hand Emacs's decision on a diff to the `openDiff` that waits for it."""
        diff_id = params["id"]
        if not self.agents.resolve_diff(diff_id, dict(params)):
            log.info("a decision on diff %s, which no one waits for any more", diff_id)

    async def at_mention(self, params: AtMentionParams) -> AtMentionResult:
        """Mention a file's lines to a Claude agent, as its IDE would."""
        sent = await self.agents.mention(
            params["name"], params.get("instance", 0), params["file"],
            params.get("line_start", 0), params.get("line_end", 0))
        return {"sent": sent}

    async def tool_result(self, params: ToolResultParams) -> None:
        """Finish a tool call that waited for the user (a notification)."""
        if not self.lisp_tools.resolve(params["call_id"], dict(params)):
            log.info("a result for tool call %s, which no one waits for", params["call_id"])

    # Messaging for an agent that lives in Emacs: the MCP tools' three calls,
    # with the same checks and errors, the sender a live agent of this sidecar.

    async def send_message(self, params: SendMessageParams) -> MessageSentResult:
        """Send a message from the agent PARAMS name, as `send_message` does."""
        sender = self.agents.get(params["name"], params["instance"])
        return {"text": await self.agents.messenger.send_message(
            sender.name, params["to"], params["text"])}

    async def ask_agent(self, params: AskAgentParams) -> AskAgentResult:
        """Ask another agent, or a new helper of a role, on behalf of the agent
        PARAMS name, as `ask_agent` does."""
        sender = self.agents.get(params["name"], params["instance"])
        asked = await self.agents.messenger.ask(
            sender.name, params.get("to"), params["text"], params.get("role"))
        return {"text": asked.text, "request_id": asked.request_id, "to": asked.to}

    async def reply(self, params: ReplyParams) -> MessageSentResult:
        """Answer a request asked of the agent PARAMS name, as `reply` does."""
        sender = self.agents.get(params["name"], params["instance"])
        return {"text": await self.agents.messenger.reply(
            sender.name, params["request_id"], params["text"])}

    async def withdraw(self, params: WithdrawParams) -> MessageSentResult:
        """Take back a queued plain message, for the user (the inspector's `w`)."""
        return {"text": await self.agents.messenger.withdraw(params["message_id"])}

    async def requests(self, params: RequestsParams) -> RequestsResult:
        """Say how the requests of the agent PARAMS name stand, and which open
        requests to it an earlier Emacs was given (rendered as delivered)."""
        agent = self.agents.get(params["name"], params["instance"])
        messenger = self.agents.messenger
        return {
            "requests": await messenger.outcomes(agent.name, params["ids"]),
            "open_to_you": [
                {"request_id": request.id, "asker": request.asker,
                 "text": agent.queue.text_of(request.message)}
                for request in await messenger.handed_over_to(agent.name)],
        }

    async def actor_activity(self, params: ActorActivityParams) -> None:
        """Take what an agent that lives in Emacs is doing (a notification)."""
        try:
            self.agents.report_activity(params["name"], params["instance"],
                                        params["activity"])
        except LispmError as err:  # it may have stopped meanwhile
            log.info("activity of %s not taken: %s", params["name"], err)

    async def audit(self, params: AuditParams) -> None:
        """Record a policy decision in the ledger (a notification)."""
        assert self._ledger is not None
        await self._ledger.record_decision(
            params["agent"], params["role"], params["kind"], params["what"],
            params["decision"], params.get("reason"))

    async def decisions(self, params: DecisionsParams) -> DecisionsResult:
        """Return the newest policy decisions, newest first."""
        assert self._ledger is not None
        found = await self._ledger.decisions(params.get("limit", 100), params.get("agent"))
        return {"decisions": [decision.to_json() for decision in found]}

    async def editor_state(self, params: EditorStateParams) -> None:
        """Take Emacs's newest snapshot of its buffers (a notification)."""
        self.mirror.update(dict(params))

    async def ledger_entries(self, params: LedgerParams) -> LedgerResult:
        """Return the ledger's newest entries, for the ledger view.

        Messages, requests and replies, and the user's policy decisions (kind
        `decision`), newest first.
        """
        assert self._ledger is not None
        agent = params.get("agent")
        limit = params.get("limit", 500)
        entries = await self._ledger.entries(limit, agent)
        request_ids = {entry.request_id for entry in entries if entry.request_id}
        states = await self._ledger.run(
            lambda store: {rid: str(store.request(rid).state) for rid in request_ids})
        rows = [
            dict(entry.to_json(),
                 request_state=states.get(entry.request_id) if entry.request_id else None)
            for entry in entries]
        for decision in await self._ledger.decisions(limit, agent):
            reason = f" ({decision.reason})" if decision.reason else ""
            rows.append({"id": f"D{decision.id}", "time": decision.decided_at,
                         "kind": "decision", "sender": decision.agent, "recipient": None,
                         "request_id": None, "state": decision.decision,
                         "text": f"{decision.decision}: {decision.what}{reason}",
                         "role": decision.role, "tool_kind": decision.kind})
        rows.sort(key=lambda row: row["time"], reverse=True)
        return {"entries": rows[:limit]}

    async def agent_stop(self, params: AgentStopParams) -> Empty:
        """Stop an agent's server and delete its files."""
        await self.agents.stop(params["name"], params.get("instance"))
        return {}

    async def list_served(self, params: Empty) -> AgentsResult:
        """Return the agents this sidecar serves."""
        return {
            "agents": [
                dict(agent.describe(), connected=agent.connected, queued=agent.queue.queued,
                     watching=agent.watcher.describe() if agent.watcher else None)
                for agent in self.agents.by_name.values()
            ]
        }

    async def ping(self, params: Json) -> Json:
        """Return PARAMS unchanged."""
        return params

    async def ping_emacs(self, params: PingEmacsParams) -> PingEmacsResult:
        """Make COUNT sequential `emacs/ping` requests; for the benchmarks."""
        count = params.get("count", 1)
        start = time.perf_counter()
        for i in range(count):
            await self.link.request(protocol.EMACS_PING, {"i": i})
        return {"count": count, "seconds": time.perf_counter() - start}

    async def stats(self, params: Empty) -> StatsResult:
        """Return the sidecar's pid, resident memory and number of agents."""
        return {"pid": os.getpid(), "rss_kb": _rss_kb(), "agents": len(self.agents.by_name)}

    async def shutdown(self, params: Empty) -> Empty:
        """Stop every agent's server, delete their files, and exit after answering."""
        if self._models is not None:
            await self._models.close()
        await self.close_mcp()
        await self.agents.stop_all(keep_files=False)
        asyncio.get_running_loop().call_soon(self.stopping.set)
        return {}
