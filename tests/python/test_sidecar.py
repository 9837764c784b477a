"""The sidecar over its real stdio: handshake, bad input, agents and their MCP servers."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .sidecar_client import SidecarProcess

AGENTS = [
    {"name": "claude", "kind": "claude", "folder": "/tmp/a", "state": "running"},
    {"name": "codex", "kind": "codex", "folder": "/tmp/b", "state": "starting"},
]


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": AGENTS}
    if method == "emacs/ping":
        return params
    raise AssertionError(f"unexpected request {method}")


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarProcess]:
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    yield process
    await process.close()


async def start_agent(
    sidecar: SidecarProcess, name: str, **extra: Any
) -> dict[str, Any]:
    result: dict[str, Any] = await sidecar.call(
        "lispm/agent-start", {"name": name, "kind": "claude", "folder": "/tmp", **extra}
    )
    return result


def token_of(agent: dict[str, Any]) -> str:
    return Path(agent["token_file"]).read_text().strip()


async def call_list_agents(agent: dict[str, Any], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token or token_of(agent)}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(agent["url"], http_client=http)) as client,
    ):
        return await client.call_tool("list_agents", {})


# Handshake


async def test_hello_reports_version_and_a_private_runtime_dir(tmp_path: Path) -> None:
    process = SidecarProcess(tmp_path / "run")
    await process.start()
    try:
        hello = await process.hello()
        assert hello["protocol"] == 1 and hello["version"] == "0.1.0"
        assert stat.S_IMODE(os.stat(hello["runtime_dir"]).st_mode) == 0o700
    finally:
        await process.close()


async def test_protocol_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    process = SidecarProcess(tmp_path / "run")
    await process.start()
    try:
        reply = await process.call(
            "lispm/hello", {"protocol": 99, "version": "9"}, raw=True
        )
        assert reply["error"]["code"] == -32005
        assert "protocol 99" in reply["error"]["message"]
        assert (await process.call("lispm/ping", {"still": "up"})) == {"still": "up"}
    finally:
        await process.close()


# Bad input on stdio: errors come back and the sidecar stays up


async def test_invalid_json_gets_a_parse_error(sidecar: SidecarProcess) -> None:
    await sidecar.send_raw(b"{not json")
    error = await sidecar.null_reply()
    assert error["error"]["code"] == -32700
    assert await sidecar.call("lispm/ping", {"a": 1}) == {"a": 1}


async def test_frame_without_content_length_gets_an_error(
    sidecar: SidecarProcess,
) -> None:
    await sidecar.send_raw(b"", header=b"Content-Type: x\r\nX-Junk: y\r\n\r\n")
    error = await sidecar.null_reply()
    assert error["error"]["code"] == -32700
    await sidecar.send_raw(b"", header=b"Content-Length: banana\r\n\r\n")
    assert (await sidecar.null_reply())["error"]["code"] == -32700
    assert await sidecar.call("lispm/ping", {"b": 2}) == {"b": 2}


_LOST = orjson.dumps({"jsonrpc": "2.0", "id": "lost", "method": "lispm/ping", "params": {}})

BAD_FRAMES = {
    "no Content-Length, with a body": b"Content-Type: x\r\n\r\n" + _LOST,
    "a Content-Length that is no number": b"Content-Length: banana\r\n\r\n" + _LOST,
    "a negative Content-Length": b"Content-Length: -3\r\n\r\n" + _LOST,
    "a Content-Length over the limit": b"Content-Length: 99999999999\r\n\r\n" + _LOST,
    "a length shorter than the body": b"Content-Length: 9\r\n\r\n" + _LOST,
    "a length longer than the body": b"Content-Length: %d\r\n\r\n" % (len(_LOST) + 900) + _LOST,
    "bytes before the header": b"}]junk" + b"Content-Length: 2\r\n\r\n{}",
    "a header that never ends": b"X" * 20000,
}


@pytest.mark.parametrize("bad", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
@pytest.mark.parametrize("together", [False, True], ids=["apart", "together"])
async def test_the_link_resynchronises_after_a_bad_frame(
    sidecar: SidecarProcess, bad: bytes, together: bool
) -> None:
    good = orjson.dumps({"jsonrpc": "2.0", "id": "good", "method": "lispm/ping",
                         "params": {"after": "bad"}})
    if together:
        await sidecar.send_raw(bad + b"Content-Length: %d\r\n\r\n" % len(good) + good, b"")
        reply = await sidecar.reply_to("good")
        assert reply["result"] == {"after": "bad"}
    else:
        await sidecar.send_raw(bad, b"")
    for n in range(3):
        assert await sidecar.call("lispm/ping", {"n": n}) == {"n": n}
    # The bad frame was reported, and what it held was not taken as a request.
    assert (await sidecar.null_reply())["error"]["code"] == -32700
    assert not sidecar.answered("lost")


async def test_non_request_json_gets_invalid_request(sidecar: SidecarProcess) -> None:
    for body in (
        b"[1, 2]",
        b'"text"',
        b'{"jsonrpc": "1.0", "id": 7, "method": "lispm/ping"}',
    ):
        await sidecar.send_raw(body)
    replies = [await sidecar.null_reply(), await sidecar.null_reply()]
    assert all(r["error"]["code"] == -32600 for r in replies)
    assert await sidecar.call("lispm/ping", {"c": 3}) == {"c": 3}


async def test_unknown_method_and_bad_params(sidecar: SidecarProcess) -> None:
    unknown = await sidecar.call("lispm/no-such-method", {}, raw=True)
    assert unknown["error"]["code"] == -32601
    bad = await sidecar.call("lispm/agent-start", {"name": 42}, raw=True)
    assert bad["error"]["code"] == -32602 and "name" in bad["error"]["message"]
    not_object = await sidecar.call("lispm/ping", [1, 2], raw=True)
    assert not_object["error"]["code"] == -32602
    evil = await sidecar.call(
        "lispm/agent-start",
        {"name": "../../etc", "kind": "claude", "folder": "/tmp"},
        raw=True,
    )
    assert evil["error"]["code"] == -32602
    assert await sidecar.call("lispm/ping", {"d": 4}) == {"d": 4}


async def test_params_are_checked_against_the_link_description(sidecar: SidecarProcess) -> None:
    start = {"name": "claude", "kind": "claude", "folder": "/tmp"}
    for method, params, message in (
        ("lispm/agent-start", dict(start, restore="yes"), "restore must be true or false"),
        ("lispm/agent-start", dict(start, instance="1"), "instance must be a non-negative integer"),
        ("lispm/agent-attached", {"instance": 1, "pid": 42}, "name must be a non-empty string"),
        ("lispm/ledger", {"agent": 5}, "agent must be a string"),
        ("lispm/agents-forget", {}, "names must be a list of agent names"),
    ):
        reply = await sidecar.call(method, params, raw=True)
        assert reply["error"] == {"code": -32602, "message": message}, (method, params)
    # A method Emacs answers is not one the sidecar serves.
    paste = await sidecar.call("emacs/paste", {"name": "claude", "instance": 1, "text": "hi"},
                               raw=True)
    assert paste["error"]["code"] == -32601
    # A notification with bad params is dropped; the next one is taken.
    decision = {"agent": "claude", "role": "default", "kind": "shell", "what": "ls",
                "decision": "allow"}
    await sidecar.send_frames(
        {"jsonrpc": "2.0", "method": "lispm/audit", "params": dict(decision, what="")},
        {"jsonrpc": "2.0", "method": "lispm/audit", "params": dict(decision, reason=None)})
    # Handled in the order sent, on the ledger's one thread: the request
    # after them sees what they recorded.
    found = (await sidecar.call("lispm/decisions", {}))["decisions"]
    assert [(d["what"], d["decision"]) for d in found] == [("ls", "allow")]


async def test_sidecar_calls_emacs_while_answering_emacs(
    sidecar: SidecarProcess,
) -> None:
    result = await sidecar.call("lispm/ping-emacs", {"count": 50})
    assert result["count"] == 50


# Agents and their servers


async def test_agent_files_are_private_and_hold_the_token(
    sidecar: SidecarProcess,
) -> None:
    agent = await start_agent(sidecar, "claude")
    token = token_of(agent)
    assert len(token) >= 40
    for path in (agent["token_file"], agent["claude_mcp_config"]):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(agent["token_file"]).parent).st_mode) == 0o700
    config = orjson.loads(Path(agent["claude_mcp_config"]).read_bytes())
    server = config["mcpServers"]["lispm"]
    assert server == {
        "type": "http",
        "url": agent["url"],
        "headers": {"Authorization": f"Bearer {token}"},
    }
    assert token not in orjson.dumps(agent).decode()


async def test_list_agents_comes_from_emacs(sidecar: SidecarProcess) -> None:
    agent = await start_agent(sidecar, "claude")
    result = await call_list_agents(agent)
    assert not result.is_error
    assert result.structured_content == {"you": "claude", "agents": AGENTS, "roles": []}
    note = await asyncio.wait_for(sidecar.notifications.get(), 5)
    assert note == {
        "jsonrpc": "2.0",
        "method": "lispm/agent-connected",
        "params": {"name": "claude", "instance": 0},
    }


async def test_duplicate_and_unknown_agents(sidecar: SidecarProcess) -> None:
    await start_agent(sidecar, "claude")
    duplicate = await sidecar.call(
        "lispm/agent-start",
        {"name": "claude", "kind": "claude", "folder": "/tmp"},
        raw=True,
    )
    assert duplicate["error"]["code"] == -32002
    unknown = await sidecar.call("lispm/agent-stop", {"name": "nobody"}, raw=True)
    assert unknown["error"]["code"] == -32001


async def post(
    url: str, headers: dict[str, str], body: bytes = b"{}"
) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(
            url,
            content=body,
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                **headers,
            },
        )


async def test_requests_without_the_right_token_get_401(
    sidecar: SidecarProcess,
) -> None:
    one = await start_agent(sidecar, "claude")
    two = await start_agent(sidecar, "codex")
    initialize = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {token_of(two)}"},
        {"Authorization": token_of(one)},
    ):
        response = await post(one["url"], headers, initialize)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"] == "Bearer"
    good = await post(
        one["url"], {"Authorization": f"Bearer {token_of(one)}"}, initialize
    )
    assert good.status_code == 200


async def test_foreign_host_and_origin_are_refused(sidecar: SidecarProcess) -> None:
    agent = await start_agent(sidecar, "claude")
    auth = {"Authorization": f"Bearer {token_of(agent)}"}
    assert (
        await post(agent["url"], {**auth, "Host": "evil.example:80"})
    ).status_code == 403
    assert (
        await post(agent["url"], {**auth, "Origin": "https://evil.example"})
    ).status_code == 403


async def test_malformed_body_gets_400_and_the_server_stays_up(
    sidecar: SidecarProcess,
) -> None:
    agent = await start_agent(sidecar, "claude")
    auth = {"Authorization": f"Bearer {token_of(agent)}"}
    for body in (b"{nope", b"[]", b'{"jsonrpc": "2.0"}', b"\xff\xfe"):
        response = await post(agent["url"], auth, body)
        assert 400 <= response.status_code < 500, (body, response.status_code)
    assert not (await call_list_agents(agent)).is_error


async def test_stopped_agent_loses_its_server_and_files(
    sidecar: SidecarProcess,
) -> None:
    agent = await start_agent(sidecar, "claude")
    await sidecar.call("lispm/agent-stop", {"name": "claude"})
    assert not Path(agent["token_file"]).parent.exists()
    with pytest.raises(httpx2.ConnectError):
        await post(agent["url"], {})


async def test_killed_sidecar_comes_back_on_the_same_port_and_token(
    tmp_path: Path,
) -> None:
    first = SidecarProcess(tmp_path / "run", fake_emacs)
    await first.start()
    await first.hello()
    agent = await start_agent(first, "claude")
    token = token_of(agent)
    first.kill()
    await first.close()
    second = SidecarProcess(tmp_path / "run", fake_emacs)
    await second.start()
    try:
        await second.hello()
        restored = await start_agent(second, "claude", port=agent["port"], restore=True)
        assert restored["port"] == agent["port"] and token_of(restored) == token
        result = await call_list_agents(restored, token)
        assert result.structured_content["you"] == "claude"
    finally:
        await second.close()


async def test_end_of_input_stops_servers_and_deletes_files(tmp_path: Path) -> None:
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    agent = await start_agent(process, "claude")
    await process.close()
    assert process.proc is not None and process.proc.returncode == 0
    assert not Path(agent["token_file"]).exists()


async def test_hello_removes_files_of_a_dead_emacs(tmp_path: Path) -> None:
    orphan = tmp_path / "run" / "agents" / "999999999-claude-1"
    orphan.mkdir(parents=True)
    (orphan / "token").write_text("old")
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    try:
        await process.hello()
        assert not orphan.exists()
    finally:
        await process.close()


async def test_fifty_agents_each_with_a_server(sidecar: SidecarProcess) -> None:
    agents = [await start_agent(sidecar, f"claude-{i}") for i in range(2, 52)]
    assert len({a["port"] for a in agents}) == 50
    served = await sidecar.call("lispm/agents", {})
    assert len(served["agents"]) == 50
    result = await call_list_agents(agents[-1])
    assert result.structured_content["you"] == "claude-51"
