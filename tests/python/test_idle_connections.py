"""Connections that never say who they are are closed: both servers of a Claude agent."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lispm_sidecar.kinds.claude.ide import AUTH_HEADER, SEND_TIMEOUT
from lispm_sidecar.mcp_server import HEADER_TIMEOUT

from .sidecar_client import SidecarProcess

#: Idle connections opened on each server.
IDLE = 60


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": []}
    raise AssertionError(f"unexpected request {method}")


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    process = SidecarProcess(tmp_path / "run", fake_emacs,
                             env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    await process.start()
    await process.hello()
    described: dict[str, Any] = await process.call(
        "lispm/agent-start", {"name": "claude", "kind": "claude", "folder": str(tmp_path)})
    lock = orjson.loads((tmp_path / "claude" / "ide" / f"{described['ide_port']}.lock")
                        .read_bytes())
    yield dict(described, token=Path(described["token_file"]).read_text().strip(),
               ide_token=lock["authToken"])
    await process.close()


async def closed_within(port: int, sent: bytes, seconds: float) -> float:
    """Connect to PORT, send SENT, and return how long until the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    start = time.monotonic()
    try:
        writer.write(sent)
        await writer.drain()
        with contextlib.suppress(ConnectionResetError):
            while await asyncio.wait_for(reader.read(4096), seconds):
                pass
        return time.monotonic() - start
    finally:
        writer.close()


@pytest.mark.parametrize("server", ["port", "ide_port"])
async def test_a_connection_without_its_header_is_closed(
        agent: dict[str, Any], server: str) -> None:
    port = agent[server]
    idle = [closed_within(port, sent, HEADER_TIMEOUT + 5)
            for sent in (b"", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                         b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: web")
            for _ in range(IDLE // 3)]
    # A real client meanwhile, on the same server, before and after the deadline.
    async with contextlib.AsyncExitStack() as stack:
        if server == "port":
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {agent['token']}"}, timeout=20))
            client = await stack.enter_async_context(
                Client(streamable_http_client(agent["url"], http_client=http)))

            async def works() -> bool:
                return not (await client.call_tool("list_agents", {})).is_error
        else:
            session = await stack.enter_async_context(aiohttp.ClientSession())
            ws = await stack.enter_async_context(session.ws_connect(
                f"ws://127.0.0.1:{port}/", headers={AUTH_HEADER: agent["ide_token"]},
                protocols=("mcp",)))

            async def works() -> bool:
                await ws.send_str('{"jsonrpc":"2.0","id":1,"method":"ping"}')
                answer = orjson.loads((await ws.receive(timeout=10)).data)
                return bool(answer == {"jsonrpc": "2.0", "id": 1, "result": {}})

        assert await works()
        waits = await asyncio.gather(*idle)
        assert all(HEADER_TIMEOUT - 1 < wait < HEADER_TIMEOUT + 3 for wait in waits), waits
        assert await works()


async def test_a_client_that_stops_reading_is_cut_off(agent: dict[str, Any]) -> None:
    """An IDE client that reads nothing cannot hold the server's sends forever."""
    port = agent["ide_port"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n"
                  f"{AUTH_HEADER}: {agent['ide_token']}\r\n\r\n").encode())
    assert b" 101 " in await asyncio.wait_for(reader.readline(), 10)
    # Many requests whose answers (the tool list, megabytes of it) it does not read.
    frame = _masked_text_frame(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    writer.write(frame * 3000)
    with contextlib.suppress(ConnectionError):
        await asyncio.wait_for(writer.drain(), SEND_TIMEOUT + 20)
    # The client reads nothing for longer than the server may wait on it...
    await asyncio.sleep(SEND_TIMEOUT + 1)
    # ... so the server has cut it off: what it had sent, then the end.  A
    # server still waiting would answer the rest and the read would hang.
    with contextlib.suppress(ConnectionError):
        while await asyncio.wait_for(reader.read(1 << 20), 20):
            pass
    writer.close()


def _masked_text_frame(payload: bytes) -> bytes:
    """Return PAYLOAD as one client-to-server WebSocket text frame."""
    mask = os.urandom(4)
    body = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    assert len(payload) < 126
    return bytes([0x81, 0x80 | len(payload)]) + mask + body
