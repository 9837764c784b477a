"""One agent as the sidecar serves it, what every agent stands on, and the
part of the sidecar a kind's adapter may use.

A leaf: the registry (`agents.py`) and the kinds (`kinds/`) both import
it, and it imports neither, so a kind never holds the registry itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import LispmError

if TYPE_CHECKING:
    from .confine import Visibility
    from .delivery import DeliveryQueue, Handover
    from .editor import EditorMirror
    from .emacs_tools import LispTools
    from .ledger import Ledger
    from .mcp_server import HttpServer
    from .mcp_tools import ListAgents
    from .messaging import Messenger
    from .rpc import EmacsLink
    from .runtime import AgentFiles
    from .watchers import Inotify, Watcher


@dataclass
class Agent:
    """One live agent as the sidecar serves it."""

    name: str
    kind: str
    folder: str
    instance: int
    session_id: str
    #: Its private folder; created only for an agent with a server.
    files: AgentFiles
    #: Its MCP server; None for a kind whose agents need none
    #: (`KindAdapter.serves_mcp`: an agent that lives in Emacs).
    server: HttpServer | None
    seen: Visibility
    on_reached: Callable[[Agent], None]
    queue: DeliveryQueue = field(init=False)
    watcher: Watcher | None = None
    connected: bool = False
    #: Started to resume its CLI's earlier session (`session_id` names it).
    resumed: bool = False
    #: What the kind's adapter tells Emacs for the launch (`describe`).
    launch: dict[str, Any] = field(default_factory=dict)
    #: When its conversation began, on the ledger's clock: what was sent
    #: under its name before is its predecessor's.  0 for an agent that
    #: goes on an earlier conversation (restored or resumed).
    since: float = 0.0

    def describe(self) -> dict[str, Any]:
        """Return what Emacs needs to launch this agent's CLI.

        An agent without a server has no port, URL or token file (None)."""
        served = self.server is not None
        return dict(
            self.launch,
            name=self.name,
            kind=self.kind,
            folder=self.folder,
            port=self.server.port if self.server is not None else None,
            url=self.url if served else None,
            session_id=self.session_id,
            token_file=str(self.files.token_file) if served else None,
        )

    @property
    def url(self) -> str:
        """The MCP endpoint of this agent, which must have a server."""
        if self.server is None:
            raise LispmError(f"{self.name} is a {self.kind} agent, which has no MCP server")
        return f"http://127.0.0.1:{self.server.port}/mcp"

    def reached(self) -> None:
        """The agent's program is reachable where it lives (a daemon or a
        Gateway): it counts as connected, as its terminal never calls the
        MCP server itself."""
        self.on_reached(self)


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


@dataclass(frozen=True)
class AdapterContext:
    """What a kind's adapter may use of the sidecar (and not the registry)."""

    #: The sidecar's runtime folder.
    root: Path
    #: The pid of the Emacs the sidecar serves.
    owner_pid: int
    services: Services
    #: For an adapter that answers requests on an agent's behalf.
    messenger: Messenger
