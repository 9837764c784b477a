"""One adapter per kind of agent: what that CLI needs beyond the common agent.

Every agent has an MCP server, a token folder and a delivery queue
(`agents.py`); an adapter adds its kind's part: Claude's IDE server,
Holon's registry entry and skill, OpenClaw's Gateway session.  It also
chooses how messages reach the agent (`Handover`: the terminal's composer,
a daemon or a Gateway) and what watches its state.  A kind with no
adapter of its own is a plain terminal agent.
"""

from __future__ import annotations

from .base import KindAdapter, TerminalAdapter
from .claude import ClaudeAdapter
from .codex import CodexAdapter
from .hermes import HermesAdapter
from .holon import HolonAdapter
from .openclaw import OpenClawAdapter

ADAPTERS: dict[str, type[KindAdapter]] = {
    adapter.kind: adapter
    for adapter in (ClaudeAdapter, CodexAdapter, HermesAdapter, HolonAdapter, OpenClawAdapter)
}

__all__ = ["ADAPTERS", "KindAdapter", "TerminalAdapter", "adapter_class"]


def adapter_class(kind: str) -> type[KindAdapter]:
    """The adapter of agents of KIND; a plain terminal adapter if KIND has none."""
    return ADAPTERS.get(kind, TerminalAdapter)
