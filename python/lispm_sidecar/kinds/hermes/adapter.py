"""Hermes: a terminal agent; its tools come through the stdio bridge that
`lispm-hermes-setup` adds to its config, its state from `state.db`."""

from __future__ import annotations

from ..base import TerminalAdapter


class HermesAdapter(TerminalAdapter):
    """Hermes needs nothing beyond its MCP server and its watcher."""

    kind = "hermes"
