"""Codex: a terminal agent, bound to the rollout file its process holds open."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..base import KindAdapter
from .watcher import codex_watcher

if TYPE_CHECKING:
    from ...agent import Agent
    from ...watchers import Watcher


class CodexAdapter(KindAdapter):
    """Codex needs nothing beyond its MCP server and its watcher."""

    kind = "codex"

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        return codex_watcher(self.services.inotify, home=self.services.home, pid=pid,
                             cwd=Path(agent.folder), session_id=session_id or agent.session_id,
                             resumed=agent.resumed)
