"""The baseline of the `list_agents` benchmark: one `echo` tool on LispM's hosting.

An `MCPServer` with a single tool that returns its argument, served the way
`lispm_sidecar.agents` serves an agent: `streamable_http_app(json_response=True)`
behind the same `Guard`, on the same embedded uvicorn (`HttpServer`), on
127.0.0.1.  It prints one line of JSON, `{"url": ..., "token": ...}`, and
serves until its stdin closes.

Run as `python echo_mcp.py` with LispM's `python` folder on `PYTHONPATH`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sys
from typing import Any

from mcp.server import MCPServer

from lispm_sidecar.mcp_server import Guard, HttpServer


def build_echo() -> MCPServer:
    """Return an MCP server whose only tool, `echo`, returns its argument."""
    server: MCPServer = MCPServer(name="echo", instructions="A bare echo.")

    async def echo(text: str) -> dict[str, Any]:
        return {"text": text}

    server.add_tool(echo, name="echo", description="Return TEXT unchanged.")
    return server


async def serve() -> None:
    """Serve the echo tool until end of input."""
    token = secrets.token_urlsafe(32)
    app = build_echo().streamable_http_app(json_response=True)
    port = 0

    def current_port() -> int:
        return port

    server = HttpServer(Guard(app, token, current_port, lambda: None))
    port = await server.start(0)
    sys.stdout.write(json.dumps({"url": f"http://127.0.0.1:{port}/mcp", "token": token}) + "\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    await server.stop()


if __name__ == "__main__":
    # As the sidecar's own `main`: warnings only, so `MCPServer` adds no INFO handler.
    logging.basicConfig(stream=sys.stderr, level="WARNING")
    asyncio.run(serve())
