"""One package per kind of agent: what that CLI needs beyond the common agent.

Every agent has an MCP server, a token folder and a delivery queue
(`agents.py`); a kind's adapter (`kinds/<kind>/adapter.py`) adds its
kind's part: Claude's IDE server, Holon's registry entry and skill,
OpenClaw's Gateway session.  It also chooses how messages reach the agent
(`Handover`: the terminal's composer, a daemon, a Gateway, or Emacs
itself for `lispm`, LispM's own agent, which has no terminal and no MCP
server) and makes the watcher of its state (`kinds/<kind>/watcher.py`, on the shared
machinery of `watchers/`).  The kinds are the keys of `KINDS`:
`Agents.start` refuses any other.

Adapters are imported when their kind's first agent starts: the OpenClaw
one brings aiohttp and cryptography, which the sidecar's first answer to
Emacs should not wait for.  So this package imports no kind, and a kind's
package imports nothing until one of its modules is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import KindAdapter

#: Kind → the class of its adapter, in `lispm_sidecar.kinds.<kind>.adapter`.
KINDS: dict[str, str] = {
    "claude": "ClaudeAdapter",
    "codex": "CodexAdapter",
    "hermes": "HermesAdapter",
    "holon": "HolonAdapter",
    "lispm": "LispmAdapter",
    "openclaw": "OpenClawAdapter",
}

__all__ = ["KINDS", "adapter_class"]


def adapter_class(kind: str) -> type[KindAdapter]:
    """The adapter of agents of KIND, which must be one of `KINDS`."""
    module = importlib.import_module(f".{kind}.adapter", __name__)
    adapter: type[KindAdapter] = getattr(module, KINDS[kind])
    return adapter
