"""The sidecar as the client of the user's MCP servers, through its real link.

Hermetic: real MCP servers written with the sidecar's own `mcp` package
(tests/fixtures/mcp_many_tools.py, and mcp_hostile.py's fragile one) beside
hostile ones (garbage, a hang, a flood of stderr).  Marked `cli`: the real
servers from npm and PyPI (server-everything over stdio and Streamable HTTP,
server-filesystem, mcp-server-time), as `make install` brings them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from .sidecar_client import ROOT, SidecarProcess

FIXTURES = ROOT / "tests" / "fixtures"
NPM_BIN = Path(os.environ.get("LISPM_NPM_BIN", ROOT / ".deps/npm/node_modules/.bin"))
MCP_VENV_BIN = Path(os.environ.get("LISPM_MCP_VENV_BIN", ROOT / ".deps/mcp-venv/bin"))


def hostile(mode: str, *args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / "mcp_hostile.py"), mode, *args]}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pid: int, seconds: float = 10) -> bool:
    for _ in range(int(seconds * 20)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarProcess]:
    process = SidecarProcess(tmp_path / "run")
    await process.start()
    await process.hello()
    yield process
    await process.close()


async def declare(sidecar: SidecarProcess, servers: dict[str, Any],
                  seconds: float = 20) -> dict[str, dict[str, Any]]:
    result = await sidecar.call("lispm/mcp-servers", {"servers": servers, "timeout": seconds})
    return {entry["name"]: entry for entry in result["servers"]}


async def call(sidecar: SidecarProcess, server: str, tool: str, seconds: float = 10,
               **arguments: Any) -> Any:
    return await sidecar.call("lispm/mcp-call", {"server": server, "tool": tool,
                                                 "arguments": arguments, "timeout": seconds},
                              raw=True)


async def notification(sidecar: SidecarProcess, method: str) -> dict[str, Any]:
    while True:
        message = await asyncio.wait_for(sidecar.notifications.get(), 20)
        if message["method"] == method:
            return message["params"]  # type: ignore[no-any-return]


async def test_a_server_of_many_tools_is_listed_whole_and_once(sidecar: SidecarProcess) -> None:
    many = {"command": sys.executable, "args": [str(FIXTURES / "mcp_many_tools.py"), "100"]}
    listed = await declare(sidecar, {"many": many})
    tools = listed["many"]["tools"]
    assert len(tools) == 100 and "error" not in listed["many"]
    schema = orjson.loads(tools[0]["input_schema_json"])
    assert schema["required"] == ["query"]
    assert schema["properties"]["archived"] == {"default": False, "title": "Archived",
                                                "type": "boolean"}
    assert tools[0]["description"].startswith("Search the invoices of region 0")
    reply = await call(sidecar, "many", "record_07", query="late", limit=3)
    assert reply["result"] == {"text": "record_07: late (limit 3, archived False)",
                               "is_error": False}
    # The same set again: answered from what was listed, the same process.
    again = await declare(sidecar, {"many": many})
    assert again == listed


async def test_hostile_servers_get_clear_errors_and_harm_nothing(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    listed = await declare(sidecar, {
        "fragile": hostile("fragile", str(marks)),
        "garbage": hostile("garbage"),
        "hang": hostile("hang"),
        "flood": hostile("flood"),
        "missing": {"command": str(tmp_path / "no-such-program")},
    }, seconds=3)
    assert {t["name"] for t in listed["fragile"]["tools"]} == {"echo", "pid", "slow", "die"}
    assert "did not answer in 3 s" in listed["hang"]["error"]
    assert "not JSON-RPC" in listed["garbage"]["error"]
    # 20 MB of stderr: its last words are told, and the message stays short.
    assert "THE-LAST-WORDS" in listed["flood"]["error"]
    assert len(listed["flood"]["error"]) < 1000
    assert f"cannot run {tmp_path / 'no-such-program'}: No such file or directory" \
        in listed["missing"]["error"]
    assert all(not entry["tools"] for name, entry in listed.items() if name != "fragile")
    reply = await call(sidecar, "fragile", "echo", message="still here")
    assert reply["result"]["text"] == "Echo: still here"


async def test_a_slow_tool_meets_its_deadline_and_the_server_goes_on(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    await declare(sidecar, {"fragile": hostile("fragile", str(tmp_path / "marks"))})
    reply = await call(sidecar, "fragile", "slow", seconds=1)
    assert reply["error"]["code"] == -32008
    assert "tool slow did not answer in 1 s" in reply["error"]["message"]
    reply = await call(sidecar, "fragile", "echo", message="after")
    assert reply["result"]["text"] == "Echo: after"


async def test_a_server_dying_mid_call_is_not_called_twice_and_comes_back(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    await declare(sidecar, {"fragile": hostile("fragile", str(marks))})
    first = int((await call(sidecar, "fragile", "pid"))["result"]["text"])
    reply = await call(sidecar, "fragile", "die")
    assert "died during the call of die, which was not sent again" in reply["error"]["message"]
    assert await notification(sidecar, "lispm/mcp-changed") == {"server": "fragile",
                                                                "reason": "exited"}
    assert marks.read_text() == "died\n"
    # The next call starts it again.
    second = int((await call(sidecar, "fragile", "pid"))["result"]["text"])
    assert second != first and not alive(first)
    assert marks.read_text() == "died\n"


async def test_servers_stop_when_dropped_and_with_the_sidecar(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    spec = hostile("fragile", str(tmp_path / "marks"))
    await declare(sidecar, {"a": spec, "b": spec})
    a = int((await call(sidecar, "a", "pid"))["result"]["text"])
    b = int((await call(sidecar, "b", "pid"))["result"]["text"])
    await declare(sidecar, {"b": spec})
    assert await gone(a)
    reply = await call(sidecar, "a", "pid")
    assert reply["error"]["code"] == -32008
    assert "no MCP server a: the servers are b" in reply["error"]["message"]
    assert alive(b)
    await sidecar.call("lispm/shutdown", {})
    assert await gone(b)


async def test_no_server_outlives_a_killed_sidecar(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    await declare(sidecar, {"a": hostile("fragile", str(tmp_path / "marks"))})
    pid = int((await call(sidecar, "a", "pid"))["result"]["text"])
    sidecar.kill()
    assert await gone(pid)


async def test_bad_params_are_refused_at_the_boundary(sidecar: SidecarProcess) -> None:
    reply = await sidecar.call("lispm/mcp-call", {"server": "", "tool": "x"}, raw=True)
    assert reply["error"]["code"] == -32602
    reply = await sidecar.call("lispm/mcp-servers", {"servers": []}, raw=True)
    assert reply["error"]["code"] == -32602


# ------------------------------------------------------------------ the real servers


def real(program: Path) -> str:
    if not os.access(program, os.X_OK):
        raise AssertionError(f"{program} is not installed: run `make install`")
    return str(program)


@pytest.mark.cli
async def test_server_everything_over_stdio(sidecar: SidecarProcess) -> None:
    listed = await declare(sidecar, {"everything": {
        "command": real(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]}}, seconds=60)
    names = {tool["name"] for tool in listed["everything"]["tools"]}
    assert {"echo", "get-tiny-image"} <= names, names
    reply = await call(sidecar, "everything", "echo", message="hi")
    assert reply["result"] == {"text": "Echo: hi", "is_error": False}
    image = (await call(sidecar, "everything", "get-tiny-image"))["result"]["text"]
    assert "[image image/png, " in image


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.cli
async def test_server_everything_over_streamable_http(sidecar: SidecarProcess) -> None:
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        real(NPM_BIN / "mcp-server-everything"), "streamableHttp",
        env=dict(os.environ, PORT=str(port)),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        listed = await declare(sidecar, {"web": {"url": f"http://127.0.0.1:{port}/mcp",
                                                 "headers": {"X-Test": "1"}}})
        assert "echo" in {tool["name"] for tool in listed["web"]["tools"]}, listed
        reply = await call(sidecar, "web", "echo", message="over http")
        assert reply["result"]["text"] == "Echo: over http"
    finally:
        server.kill()
        await server.wait()


@pytest.mark.cli
async def test_server_filesystem_and_the_time_server(
        sidecar: SidecarProcess, tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("a note\n")
    listed = await declare(sidecar, {
        "files": {"command": real(NPM_BIN / "mcp-server-filesystem"), "args": [str(tmp_path)]},
        "time": {"command": real(MCP_VENV_BIN / "mcp-server-time"),
                 "args": ["--local-timezone=UTC"]},
    }, seconds=60)
    files = {tool["name"]: tool for tool in listed["files"]["tools"]}
    assert files["read_text_file"]["annotations"]["readOnlyHint"] is True
    reply = await call(sidecar, "files", "read_text_file", path=str(tmp_path / "note.txt"))
    assert reply["result"]["text"].strip() == "a note"
    outside = await call(sidecar, "files", "read_text_file", path="/etc/hostname")
    assert outside["result"]["is_error"] is True
    reply = await call(sidecar, "time", "get_current_time", timezone="UTC")
    assert '"timezone": "UTC"' in reply["result"]["text"]
