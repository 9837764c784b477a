"""Codex: a terminal agent, bound to the rollout file its process holds open."""

from __future__ import annotations

from ..base import TerminalAdapter


class CodexAdapter(TerminalAdapter):
    """Codex needs nothing beyond its MCP server and its watcher."""

    kind = "codex"
