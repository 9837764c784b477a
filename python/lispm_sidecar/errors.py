"""The sidecar's error conditions and their JSON-RPC codes.

Everything below the RPC boundary raises one of these; `rpc.py` turns them
into JSON-RPC errors in one place, and the MCP tools turn them into tool
errors the model can read.
"""

from __future__ import annotations


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


class VersionMismatch(LispmError):
    """Emacs and the sidecar speak different protocol versions."""

    code = -32005
