"""The link's boundaries: how the sidecar's errors reach an agent's MCP tools."""

from __future__ import annotations

import inspect
from typing import Annotated

import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from lispm_sidecar.errors import LispmError, UnknownAgent, tool_errors


async def test_tool_errors_makes_a_lispm_error_the_tool_error_the_model_reads() -> None:
    @tool_errors
    async def send(to: str) -> str:
        raise UnknownAgent(f"no agent named {to!r}")

    with pytest.raises(ToolError) as caught:
        await send("nobody")
    assert str(caught.value) == "no agent named 'nobody'"
    assert isinstance(caught.value.__cause__, UnknownAgent)


async def test_tool_errors_lets_results_and_other_failures_through() -> None:
    @tool_errors
    async def echo(text: str) -> str:
        if text == "bug":
            raise KeyError(text)
        return text

    assert await echo("hi") == "hi"
    with pytest.raises(KeyError):
        await echo("bug")
    assert not issubclass(KeyError, LispmError)


async def test_tool_errors_keeps_the_signature_the_tool_schema_comes_from() -> None:
    async def ask(request: Annotated[str, Field(description="What you ask.")],
                  to: str = "codex") -> str:
        return to + request

    wrapped = tool_errors(ask)
    assert wrapped.__name__ == "ask"
    assert inspect.iscoroutinefunction(wrapped)
    plain, checked = MCPServer(name="plain"), MCPServer(name="checked")
    plain.add_tool(ask)
    checked.add_tool(wrapped)
    [plain_tool], [checked_tool] = await plain.list_tools(), await checked.list_tools()
    assert checked_tool.input_schema == plain_tool.input_schema
    assert checked_tool.input_schema["properties"]["request"]["description"] == "What you ask."
    assert checked_tool.output_schema == plain_tool.output_schema
