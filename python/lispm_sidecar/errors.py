"""The sidecar's error conditions and their JSON-RPC codes.

Everything below the RPC boundary raises one of these; `rpc.py` turns them
into JSON-RPC errors in one place, and the MCP tools turn them into tool
errors the model can read, through `tool_errors`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class LispmError(Exception):
    """A failure the caller should see, with a JSON-RPC error code."""

    code = -32000


class InvalidParams(LispmError):
    """The request's parameters are missing or of the wrong type."""

    code = -32602


class UnknownAgent(LispmError):
    """No live agent has that name."""

    code = -32001


class AgentExists(LispmError):
    """An agent with that name is already registered."""

    code = -32002


class ServerStartFailed(LispmError):
    """An agent's MCP server could not listen on its port."""

    code = -32003


class EmacsUnavailable(LispmError):
    """Emacs did not answer a request in time, or answered with an error."""

    code = -32004


class NotNow(LispmError):
    """The agent cannot take a message this moment: its CLI shows a dialog
    that a paste and Return would answer.  Try again later."""

    code = -32007


class McpServerFailed(LispmError):
    """One of the user's MCP servers could not be reached, answered an
    error, or did not answer in time."""

    code = -32008


class VersionMismatch(LispmError):
    """Emacs and the sidecar speak different protocol versions."""

    code = -32005


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Return the MCP tool FN, with a `LispmError` it raises made a `ToolError`.

    The model then reads the error's message as the tool's failed result.
    The wrapper keeps FN's signature, from which the MCP server derives
    the tool's argument schema.
    """
    @functools.wraps(fn)
    async def tool(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except LispmError as err:
            # Imported here: the MCP SDK loads with the first agent, not with the sidecar.
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(str(err)) from err
    return tool
