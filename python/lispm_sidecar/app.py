"""The methods Emacs calls, and the calls the sidecar makes into Emacs.

Methods (Emacs → sidecar), all with object params:
- `lispm/hello {protocol, version, emacs_pid}` → `{protocol, version, pid, runtime_dir}`
- `lispm/agent-start {name, kind, folder, instance?, port?, restore?}` → launch facts
- `lispm/agent-stop {name, instance?}` → `{}`
- `lispm/agents {}` → `{agents: [...]}`, the sidecar's view (for debugging and tests)
- `lispm/ping PARAMS` → PARAMS; `lispm/ping-emacs {count}` → `{count, seconds}`
- `lispm/stats {}` → `{pid, rss_kb, agents}`
- `lispm/shutdown {}` → `{}`, then the sidecar exits

Requests and notifications into Emacs:
- `emacs/list-agents {}` → `{agents: [{name, kind, folder, state}]}`
- `emacs/ping PARAMS` → PARAMS
- notification `lispm/agent-connected {name}`: the agent's CLI reached its server
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from . import PROTOCOL_VERSION, __version__
from .agents import Agents
from .errors import InvalidParams, VersionMismatch
from .rpc import EmacsLink, Params
from .runtime import remove_orphans, runtime_root

log = logging.getLogger(__name__)


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
        self.agents = Agents(
            root=self.root,
            owner_pid=os.getppid(),
            list_agents=self.emacs_agents,
            on_connected=lambda name: link.notify("lispm/agent-connected", {"name": name}),
        )
        for name, handler in (
            ("lispm/hello", self.hello),
            ("lispm/agent-start", self.agent_start),
            ("lispm/agent-stop", self.agent_stop),
            ("lispm/agents", self.list_served),
            ("lispm/ping", self.ping),
            ("lispm/ping-emacs", self.ping_emacs),
            ("lispm/stats", self.stats),
            ("lispm/shutdown", self.shutdown),
        ):
            link.method(name)(handler)

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
        if isinstance(emacs_pid, int) and emacs_pid > 0:
            self.agents.owner_pid = emacs_pid
        removed = remove_orphans(self.root)
        if removed:
            log.info("removed files of agents whose Emacs died: %s", ", ".join(removed))
        return {
            "protocol": PROTOCOL_VERSION,
            "version": __version__,
            "pid": os.getpid(),
            "runtime_dir": str(self.root),
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
        )
        return agent.describe()

    async def agent_stop(self, params: Params) -> Params:
        """Stop an agent's server and delete its files."""
        instance = _int(params, "instance", 0) if "instance" in params else None
        await self.agents.stop(_str(params, "name"), instance)
        return {}

    async def list_served(self, params: Params) -> Params:
        """Return the agents this sidecar serves."""
        return {
            "agents": [
                dict(agent.describe(), connected=agent.connected)
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
