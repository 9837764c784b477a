"""One adapter per kind of agent: what that CLI needs beyond the common agent.

Every agent has an MCP server, a token folder and a delivery queue
(`agents.py`); an adapter adds its kind's part: Claude's IDE server,
Holon's registry entry and skill, OpenClaw's Gateway session.  It also
chooses how messages reach the agent (`Handover`: the terminal's composer,
a daemon or a Gateway) and what watches its state.  The kinds are the
keys of `ADAPTERS`: `Agents.start` refuses any other.

Adapters are imported when their kind's first agent starts: the OpenClaw
one brings aiohttp and cryptography, which the sidecar's first answer to
Emacs should not wait for.
"""

from __future__ import annotations

import importlib

from .base import KindAdapter, TerminalAdapter

#: Kind → the module (under this package) and class of its adapter.
ADAPTERS: dict[str, tuple[str, str]] = {
    "claude": ("claude", "ClaudeAdapter"),
    "codex": ("codex", "CodexAdapter"),
    "hermes": ("hermes", "HermesAdapter"),
    "holon": ("holon", "HolonAdapter"),
    "openclaw": ("openclaw", "OpenClawAdapter"),
}

__all__ = ["ADAPTERS", "KindAdapter", "TerminalAdapter", "adapter_class"]


def adapter_class(kind: str) -> type[KindAdapter]:
    """The adapter of agents of KIND; a plain terminal adapter if KIND has none."""
    if kind not in ADAPTERS:
        return TerminalAdapter
    module, name = ADAPTERS[kind]
    adapter: type[KindAdapter] = getattr(importlib.import_module(f".{module}", __name__), name)
    return adapter
