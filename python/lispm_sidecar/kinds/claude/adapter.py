"""Claude Code: a terminal agent that also reaches Emacs through its IDE protocol.

Claude reads its MCP server from the `--mcp-config` file written here
(`claude-mcp.json` in the agent's private folder, holding the token), and
finds the agent's IDE server through a lock file (`ide_lock.py`).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ...runtime import new_token
from ..base import KindAdapter
from .ide_lock import claude_config_dir, remove_lock, write_lock
from .watcher import claude_watcher

if TYPE_CHECKING:
    from ...agent import AdapterContext, Agent
    from ...editor import EditorState
    from ...watchers import Watcher
    from .ide import IdeServer
    from .ide_tools import IdeTools

#: The agent's private files of this kind: the IDE server's token, and
#: the MCP config Claude is started with.
IDE_TOKEN = "ide-token"
MCP_CONFIG = "claude-mcp.json"


def mcp_config(url: str, token: str) -> bytes:
    """The `--mcp-config` file that points Claude Code at its server URL."""
    config = {
        "mcpServers": {
            "lispm": {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }
    return orjson.dumps(config, option=orjson.OPT_INDENT_2)


@dataclass
class _Ide:
    """One Claude agent's IDE server, the tools it answers, and where its lock is."""

    server: IdeServer
    tools: IdeTools
    lock_dir: Path
    #: False once the agent's servers are stopping: the user's editor no
    #: longer concerns it.
    live: bool = True


class ClaudeAdapter(KindAdapter):
    """Serves Claude's IDE WebSocket and writes the lock file that finds it."""

    kind = "claude"

    def __init__(self, context: AdapterContext) -> None:
        super().__init__(context)
        #: The IDE of each agent, by name and instance.
        self._ides: dict[tuple[str, int], _Ide] = {}
        self._notifying: set[asyncio.Task[int]] = set()
        self.services.mirror.listen(self._selection_moved)

    async def open(self, agent: Agent, options: dict[str, Any], restore: bool) -> None:
        from .ide import IdeServer
        from .ide_tools import IdeTools

        config = agent.files.write(MCP_CONFIG, mcp_config(agent.url, agent.files.read_token()))
        if restore:
            token = agent.files.read_token(IDE_TOKEN)
        else:
            token = new_token()
            agent.files.write(IDE_TOKEN, token.encode() + b"\n")
        port = options.get("ide_port") if restore else 0
        tools = IdeTools(agent.name, agent.seen, self.services.mirror, self.services.link)
        server = IdeServer(agent.name, Path(agent.seen.folder), token, tools,
                           ide_name=f"LispM ({agent.name})")
        await server.start(port if isinstance(port, int) else 0)
        lock_dir = claude_config_dir(self.services.home, os.environ)
        self._ides[agent.name, agent.instance] = _Ide(server, tools, lock_dir)
        write_lock(lock_dir, server.port, self.owner_pid, [agent.seen.folder], token,
                   server.ide_name)
        agent.launch.update(claude_mcp_config=str(config), ide_port=server.port)

    def watcher(self, agent: Agent, pid: int, session_id: str | None) -> Watcher | None:
        return claude_watcher(self.services.inotify, home=self.services.home, pid=pid,
                              cwd=Path(agent.folder), session_id=session_id or agent.session_id,
                              resumed=agent.resumed)

    async def shut(self, agent: Agent) -> None:
        if (ide := self._ides.get((agent.name, agent.instance))) is not None:
            ide.live = False
            await ide.server.stop()

    async def close(self, agent: Agent) -> None:
        if (ide := self._ides.pop((agent.name, agent.instance), None)) is not None:
            remove_lock(ide.lock_dir, ide.server.port)

    def resolve_diff(self, diff_id: str, outcome: dict[str, Any]) -> bool:
        return any(ide.live and ide.tools.resolve(diff_id, outcome)
                   for ide in self._ides.values())

    async def mention(self, agent: Agent, file: str, line_start: int, line_end: int) -> int:
        ide = self._ides.get((agent.name, agent.instance))
        if ide is None or not ide.live:
            return await super().mention(agent, file, line_start, line_end)
        return await ide.server.notify("at_mentioned", {
            "filePath": file, "lineStart": line_start, "lineEnd": line_end})

    def _selection_moved(self, old: EditorState, new: EditorState) -> None:
        """Tell each Claude's IDE connection where the user's selection went."""
        selection = new.selection
        if selection == old.selection or not selection or not selection.get("truename"):
            return
        servers = [ide.server for ide in self._ides.values() if ide.live]
        if not servers:
            return
        from .ide import file_uri

        path = selection["truename"]
        params = {"text": selection.get("text", ""), "filePath": path, "fileUrl": file_uri(path),
                  "selection": {"start": selection.get("start"), "end": selection.get("end"),
                                "isEmpty": bool(selection.get("is_empty"))}}
        for server in servers:
            task = asyncio.create_task(server.notify("selection_changed", params))
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)
