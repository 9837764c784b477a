"""Hermes: a terminal agent; its tools come through the stdio bridge that
`lispm-hermes-setup` adds to its config (`setup.py`), its state from
`state.db` (`watcher.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..base import KindAdapter
from .watcher import hermes_watcher

if TYPE_CHECKING:
    from ...agent import Agent
    from ...watchers import Watcher


class HermesAdapter(KindAdapter):
    """Hermes needs nothing beyond its MCP server and its watcher."""

    kind = "hermes"

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        return hermes_watcher(self.services.inotify, home=self.services.home, pid=pid,
                              cwd=Path(agent.folder), session_id=session_id or agent.session_id,
                              resumed=agent.resumed)
