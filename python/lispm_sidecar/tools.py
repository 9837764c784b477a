"""The tools every agent's MCP server offers.

Only real tools are registered: `list_agents` now; the messaging tools and
LispM's own tools arrive with the issues that build them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from . import __version__
from .errors import LispmError

ListAgents = Callable[[], Awaitable[list[dict[str, Any]]]]

INSTRUCTIONS = """\
You are one of several AI agents running side by side in the user's Emacs, \
managed by LispM. The tools of this server connect you to the other agents \
and to Emacs."""

LIST_AGENTS = """\
List the agents running in this Emacs: every live agent terminal, with its \
name (use it to address the agent), kind (claude, codex, ...), folder (the \
project it works in) and state (starting, running, exited). The result also \
says which of them is you."""


def build_mcp(agent_name: str, list_agents: ListAgents) -> MCPServer:
    """Return the MCP server of the agent AGENT_NAME.

    LIST_AGENTS fetches the live agents from Emacs, the source of truth.
    """
    server: MCPServer = MCPServer(name="lispm", instructions=INSTRUCTIONS, version=__version__)

    async def list_agents_tool() -> dict[str, Any]:
        try:
            agents = await list_agents()
        except LispmError as err:
            raise ToolError(str(err)) from err
        return {"you": agent_name, "agents": agents}

    server.add_tool(
        list_agents_tool,
        name="list_agents",
        title="List agents",
        description=LIST_AGENTS,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    return server
