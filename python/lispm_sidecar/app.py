"""The methods Emacs calls, and the calls the sidecar makes into Emacs.

Methods (Emacs → sidecar), all with object params:
- `lispm/hello {protocol, version, emacs_pid, ledger_file?}`
  → `{protocol, version, pid, runtime_dir, ledger_file}`; must come first
- `lispm/agent-start {name, kind, folder, instance, port?, restore?, resume?, session_id?}`
  → launch facts: `{port, url, session_id, token_file, claude_mcp_config, …}`.
  `restore`: the sidecar restarted, Emacs gives back a live agent (same port,
  token and queue).  `resume`: an agent of an earlier Emacs whose CLI resumes
  its session `session_id`; what waits for it is delivered.  Neither: a new
  agent, and what an earlier agent of its name left is ended first.
- `lispm/agents-forget {names}` → `{forgotten}`: the agents of an earlier
  Emacs that will not be resumed; their requests end, their queues fail
  (a name live now is skipped)
- `lispm/agent-attached {name, instance, pid, session_id?, restore?}`: the CLI
  runs as process `pid`; the sidecar starts watching its records
- `lispm/agent-stop {name, instance?}` → `{}`; whoever waits on it is told
- `lispm/agents {}` → `{agents: [...]}`, the sidecar's view (for debugging and tests)
- `lispm/ledger {limit?, agent?}` → `{entries: [...]}`, newest first
- notification `lispm/editor-state {buffers, selection, diagnostics}`: Emacs's
  newest snapshot, for the mirror that answers the cheap views
- notification `lispm/diff-resolved {id, outcome, contents?}`: the user decided
- `lispm/at-mention {name, instance, file, line_start, line_end}` → `{sent}`
- notification `lispm/tool-result {call_id, ok, text | error}`: a tool call
  that waited for the user's approval has finished
- notification `lispm/audit {agent, role, kind, what, decision, reason?}`
- `lispm/decisions {limit?, agent?}` → `{decisions: [...]}`, newest first
- `lispm/ping PARAMS` → PARAMS; `lispm/ping-emacs {count}` → `{count, seconds}`
- `lispm/stats {}` → `{pid, rss_kb, agents}`
- `lispm/shutdown {}` → `{}`, then the sidecar exits

Requests and notifications into Emacs:
- `emacs/list-agents {}` → `{agents: [{name, kind, folder, state}]}`
- `emacs/paste {name, instance, text}` → `{pasted}`: paste a due message
- `emacs/buffer-text {buffer}` → `{buffer, file, truename, dirty, text}`
- `emacs/open-diff {id, agent, file, new_contents, tab_name}` → `{shown}`;
  `emacs/close-diff {id? | tab_name? | all?, agent?}`; `emacs/open-file {…}`;
  `emacs/save-document {file}`: Claude's IDE tools
- `emacs/search-tools {name, instance, query}` → `{results}`;
  `emacs/skill {name, instance, skill}` → `{instructions, loaded, reason?}`;
  `emacs/call-tool {name, instance, call_id, tool, args}` → `{ok, text | error}`
  or `{pending: true, within?}` (then `lispm/tool-result` later, within
  `within` seconds if given, else an hour)
- `emacs/ping PARAMS` → PARAMS
- notification `lispm/agent-connected {name, instance}`: the CLI reached its server
- notification `lispm/agent-activity {name, instance, activity, queued, session}`:
  `session` is the CLI's own session id as its records show it (Claude's
  session, Codex's thread, Hermes's session, OpenClaw's session key), for
  resuming it after Emacs restarts; null while unknown
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

from . import PROTOCOL_VERSION, __version__
from .agent import Agent, Services
from .agents import Agents
from .delivery import ComposerHandover
from .editor import EditorMirror, EditorState
from .errors import InvalidParams, LispmError, VersionMismatch
from .ide_lock import clean_stale_locks, scanned_config_dirs
from .ledger import Ledger
from .lisp_tools import LispTools
from .rpc import EmacsLink, Params
from .runtime import remove_orphans, runtime_root
from .watchers import Inotify

log = logging.getLogger(__name__)


class NotReady(LispmError):
    """A request came before `lispm/hello`."""

    code = -32006


def _str(params: Params, key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"{key} must be a non-empty string")
    return value


def _int(params: Params, key: str, default: int) -> int:
    value = params.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidParams(f"{key} must be a non-negative integer")
    return value


def _optional_str(params: Params, key: str) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParams(f"{key} must be a string")
    return value


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
        self.mirror.listen(self._selection_moved)
        self._notifying: set[asyncio.Task[int]] = set()
        for name, handler in (
            ("lispm/hello", self.hello),
            ("lispm/agent-start", self.agent_start),
            ("lispm/agent-attached", self.agent_attached),
            ("lispm/agent-stop", self.agent_stop),
            ("lispm/agents-forget", self.agents_forget),
            ("lispm/agents", self.list_served),
            ("lispm/ledger", self.ledger_entries),
            ("lispm/editor-state", self.editor_state),
            ("lispm/diff-resolved", self.diff_resolved),
            ("lispm/at-mention", self.at_mention),
            ("lispm/tool-result", self.tool_result),
            ("lispm/audit", self.audit),
            ("lispm/decisions", self.decisions),
            ("lispm/ping", self.ping),
            ("lispm/ping-emacs", self.ping_emacs),
            ("lispm/stats", self.stats),
            ("lispm/shutdown", self.shutdown),
        ):
            link.method(name)(handler)

    @property
    def agents(self) -> Agents:
        """The agents; they exist once Emacs has said hello."""
        if self._agents is None:
            raise NotReady("Emacs must send lispm/hello first")
        return self._agents

    def _notify_connected(self, agent: Agent) -> None:
        self.link.notify("lispm/agent-connected", {"name": agent.name, "instance": agent.instance})

    def _notify_activity(self, agent: Agent) -> None:
        self.link.notify("lispm/agent-activity", {
            "name": agent.name, "instance": agent.instance,
            "activity": str(agent.queue.activity), "queued": agent.queue.queued,
            "session": agent.watcher.cli_session if agent.watcher else None,
        })

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

    async def emacs_agents(self) -> list[dict[str, Any]]:
        """Ask Emacs for the live agents."""
        answer = await self.link.request("emacs/list-agents", {})
        agents = answer.get("agents") if isinstance(answer, dict) else None
        return list(agents) if isinstance(agents, list) else []

    async def hello(self, params: Params) -> Params:
        """Check that Emacs speaks our protocol, then clean up after dead Emacsen."""
        protocol = params.get("protocol")
        if protocol != PROTOCOL_VERSION:
            raise VersionMismatch(
                f"Emacs speaks LispM protocol {protocol}, this sidecar {PROTOCOL_VERSION} "
                f"(sidecar version {__version__}): reinstall the sidecar to match the package"
            )
        emacs_pid = params.get("emacs_pid")
        if not isinstance(emacs_pid, int) or emacs_pid <= 0:
            emacs_pid = os.getppid()
        ledger_file = params.get("ledger_file") or default_ledger_file()
        if not isinstance(ledger_file, str):
            raise InvalidParams("ledger_file must be a string")
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

    async def agent_start(self, params: Params) -> Params:
        """Start an agent's server; see `Agents.start`."""
        agent = await self.agents.start(
            name=_str(params, "name"),
            kind=_str(params, "kind"),
            folder=_str(params, "folder"),
            instance=_int(params, "instance", 0),
            port=_int(params, "port", 0),
            restore=params.get("restore") is True,
            session_id=_optional_str(params, "session_id"),
            options=params,
            resume=params.get("resume") is True,
        )
        return agent.describe()

    async def agents_forget(self, params: Params) -> Params:
        """End what agents of an earlier Emacs left; see `Agents.forget`."""
        names = params.get("names")
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise InvalidParams("names must be a list of agent names")
        return {"forgotten": await self.agents.forget(names)}

    async def agent_attached(self, params: Params) -> Params:
        """Watch an agent's CLI, now that its terminal runs as process `pid`."""
        agent = await self.agents.attach(
            _str(params, "name"), _int(params, "instance", 0), _int(params, "pid", 0),
            _optional_str(params, "session_id"),
        )
        self._notify_activity(agent)
        return {"watching": agent.watcher.describe() if agent.watcher else None}

    def _selection_moved(self, old: EditorState, new: EditorState) -> None:
        """Tell each Claude's IDE connection where the user's selection went."""
        selection = new.selection
        if selection == old.selection or not selection or not selection.get("truename"):
            return
        agents = [a for a in self._agents.by_name.values() if a.ide] if self._agents else []
        if not agents:
            return
        from .ide import file_uri  # loaded with the first IDE server: aiohttp is heavy

        path = selection["truename"]
        params = {"text": selection.get("text", ""), "filePath": path, "fileUrl": file_uri(path),
                  "selection": {"start": selection.get("start"), "end": selection.get("end"),
                                "isEmpty": bool(selection.get("is_empty"))}}
        for agent in agents:
            assert agent.ide is not None
            task = asyncio.create_task(agent.ide.notify("selection_changed", params))
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)

    async def diff_resolved(self, params: Params) -> None:
        """Hand Emacs's decision on a diff to the `openDiff` that waits for it."""
        diff_id = _str(params, "id")
        for agent in self.agents.by_name.values():
            if agent.ide_bridge is not None and agent.ide_bridge.resolve(diff_id, params):
                return
        log.info("a decision on diff %s, which no one waits for any more", diff_id)

    async def at_mention(self, params: Params) -> Params:
        """Mention a file's lines to a Claude agent, as its IDE would."""
        agent = self.agents.get(_str(params, "name"), _int(params, "instance", 0))
        if agent.ide is None:
            raise InvalidParams(f"{agent.name} is not a Claude agent with an IDE connection")
        sent = await agent.ide.notify("at_mentioned", {
            "filePath": _str(params, "file"), "lineStart": _int(params, "line_start", 0),
            "lineEnd": _int(params, "line_end", 0)})
        return {"sent": sent}

    async def tool_result(self, params: Params) -> None:
        """Finish a tool call that waited for the user (a notification)."""
        if not self.lisp_tools.resolve(_str(params, "call_id"), params):
            log.info("a result for tool call %s, which no one waits for", params.get("call_id"))

    async def audit(self, params: Params) -> None:
        """Record a policy decision in the ledger (a notification)."""
        assert self._ledger is not None
        await self._ledger.record_decision(
            _str(params, "agent"), _str(params, "role"), _str(params, "kind"),
            _str(params, "what"), _str(params, "decision"), _optional_str(params, "reason"))

    async def decisions(self, params: Params) -> Params:
        """Return the newest policy decisions, newest first."""
        assert self._ledger is not None
        found = await self._ledger.decisions(_int(params, "limit", 100),
                                             _optional_str(params, "agent"))
        return {"decisions": [decision.to_json() for decision in found]}

    async def editor_state(self, params: Params) -> None:
        """Take Emacs's newest snapshot of its buffers (a notification)."""
        self.mirror.update(params)

    async def ledger_entries(self, params: Params) -> Params:
        """Return the ledger's newest entries, for the ledger view.

        Messages, requests and replies, and the user's policy decisions (kind
        `decision`), newest first.
        """
        assert self._ledger is not None
        agent = _optional_str(params, "agent")
        limit = _int(params, "limit", 500)
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

    async def agent_stop(self, params: Params) -> Params:
        """Stop an agent's server and delete its files."""
        instance = _int(params, "instance", 0) if "instance" in params else None
        await self.agents.stop(_str(params, "name"), instance)
        return {}

    async def list_served(self, params: Params) -> Params:
        """Return the agents this sidecar serves."""
        return {
            "agents": [
                dict(agent.describe(), connected=agent.connected, queued=agent.queue.queued,
                     watching=agent.watcher.describe() if agent.watcher else None)
                for agent in self.agents.by_name.values()
            ]
        }

    async def ping(self, params: Params) -> Params:
        """Return PARAMS unchanged."""
        return params

    async def ping_emacs(self, params: Params) -> Params:
        """Make COUNT sequential `emacs/ping` requests; for the benchmarks."""
        count = _int(params, "count", 1)
        start = time.perf_counter()
        for i in range(count):
            await self.link.request("emacs/ping", {"i": i})
        return {"count": count, "seconds": time.perf_counter() - start}

    async def stats(self, params: Params) -> Params:
        """Return the sidecar's pid, resident memory and number of agents."""
        return {"pid": os.getpid(), "rss_kb": _rss_kb(), "agents": len(self.agents.by_name)}

    async def shutdown(self, params: Params) -> Params:
        """Stop every agent's server, delete their files, and exit after answering."""
        await self.agents.stop_all(keep_files=False)
        asyncio.get_running_loop().call_soon(self.stopping.set)
        return {}
