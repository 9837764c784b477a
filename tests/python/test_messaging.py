"""Messaging over the real sidecar: the tools, their errors, and the ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .sidecar_client import SidecarProcess


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": []}
    raise AssertionError(f"unexpected request {method}")


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarProcess]:
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    for instance, name in enumerate(("claude", "codex", "hermes"), start=1):
        await process.call("lispm/agent-start",
                           {"name": name, "kind": "claude", "folder": "/tmp", "instance": instance})
    yield process
    await process.close()


async def call(sidecar: SidecarProcess, agent: str, tool: str, **args: Any) -> tuple[bool, str]:
    """Call TOOL as AGENT; return (is_error, text)."""
    served = {a["name"]: a for a in (await sidecar.call("lispm/agents", {}))["agents"]}
    token = Path(served[agent]["token_file"]).read_text().strip()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(served[agent]["url"], http_client=http)) as client:
        result = await client.call_tool(tool, args)
    text = "".join(getattr(part, "text", "") for part in result.content)
    return bool(result.is_error), text


async def ledger(sidecar: SidecarProcess) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = (await sidecar.call("lispm/ledger", {"limit": 100}))["entries"]
    return entries


async def test_send_and_ask_return_at_once_and_are_recorded(sidecar: SidecarProcess) -> None:
    assert await call(sidecar, "claude", "send_message", to="codex", text="hi") == \
        (False, "sent to codex")
    assert await call(sidecar, "claude", "ask_agent", to="codex", request="review?") == \
        (False, "asked codex, request R1")
    assert await call(sidecar, "hermes", "ask_agent", to="codex", request="and me?") == \
        (False, "asked codex, request R2")
    entries = await ledger(sidecar)
    assert [(e["kind"], e["sender"], e["recipient"], e["request_id"], e["state"])
            for e in entries] == [
        ("request", "hermes", "codex", "R2", "queued"),
        ("request", "claude", "codex", "R1", "queued"),
        ("message", "claude", "codex", None, "queued"),
    ]


async def test_reply_only_by_the_asked_agent_and_only_once(sidecar: SidecarProcess) -> None:
    await call(sidecar, "claude", "ask_agent", to="codex", request="review?")
    wrong = await call(sidecar, "hermes", "reply", request="R1", text="me!")
    assert wrong[0] and "codex" in wrong[1]
    assert await call(sidecar, "codex", "reply", request="R1", text="looks good") == \
        (False, "replied to claude, request R1")
    again = await call(sidecar, "codex", "reply", request="R1", text="again")
    assert again[0] and "R1" in again[1]
    unknown = await call(sidecar, "codex", "reply", request="R99", text="?")
    assert unknown[0] and "R99" in unknown[1]
    replies = [e for e in await ledger(sidecar) if e["kind"] == "reply"]
    assert [(e["sender"], e["recipient"], e["text"]) for e in replies] == \
        [("codex", "claude", "looks good")]


async def test_bad_input_is_refused_and_nothing_is_recorded(sidecar: SidecarProcess) -> None:
    unknown = await call(sidecar, "claude", "send_message", to="gemini", text="hi")
    assert unknown[0] and "gemini" in unknown[1] and "codex, hermes" in unknown[1]
    self_ask = await call(sidecar, "claude", "ask_agent", to="claude", request="me?")
    assert self_ask[0] and "cannot ask itself" in self_ask[1]
    self_send = await call(sidecar, "claude", "send_message", to="claude", text="me!")
    assert self_send[0] and "cannot send a message to itself" in self_send[1]
    empty = await call(sidecar, "claude", "send_message", to="codex", text="   ")
    assert empty[0] and "empty" in empty[1].lower()
    for invisible in ("\x1b\x03\r\n\x07", "\u202e\u200b \ufeff", "\U000e0041\U000e0042"):
        for tool, args in (("send_message", {"to": "codex", "text": invisible}),
                           ("ask_agent", {"to": "codex", "request": invisible})):
            refused = await call(sidecar, "claude", tool, **args)
            assert refused[0] and "empty once cleaned" in refused[1], (tool, invisible)
    await call(sidecar, "codex", "ask_agent", to="claude", request="review?")
    blank_reply = await call(sidecar, "claude", "reply", request="R1", text="\x1b\r\x03\u2066")
    assert blank_reply[0] and "empty once cleaned" in blank_reply[1]
    huge = await call(sidecar, "claude", "send_message", to="codex", text="x" * 100_001)
    assert huge[0] and "100000" in huge[1].replace(",", "")
    assert [(e["kind"], e["sender"]) for e in await ledger(sidecar)] == [("request", "codex")]


async def test_invalid_utf8_is_refused(sidecar: SidecarProcess) -> None:
    # A lone surrogate is what invalid UTF-8 becomes in JSON text.
    served = {a["name"]: a for a in (await sidecar.call("lispm/agents", {}))["agents"]}
    token = Path(served["claude"]["token_file"]).read_text().strip()
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json",
               "accept": "application/json, text/event-stream"}
    body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":' \
           b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
    async with httpx2.AsyncClient(headers=headers) as http:
        init = await http.post(served["claude"]["url"], content=body)
        session = init.headers.get("mcp-session-id")
        extra = {"mcp-session-id": session} if session else {}
        await http.post(served["claude"]["url"], headers=extra,
                        content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        call = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "send_message", "arguments": {"to": "codex", "text": "PLACEHOLDER"}}})
        answers = [
            await http.post(served["claude"]["url"], headers=extra,
                            content=call.replace(b"PLACEHOLDER", bad))
            for bad in (b"bad \\udc80 surrogate", b"bad \xff\xfe bytes")
        ]
    # The MCP layer refuses the frame as a whole, with a JSON-RPC parse error.
    for answer in answers:
        assert answer.status_code == 400, answer.content
        assert orjson.loads(answer.content)["error"]["code"] == -32700
    assert await ledger(sidecar) == []


async def test_closing_an_agent_ends_its_requests_and_tells_the_askers(
        sidecar: SidecarProcess) -> None:
    await call(sidecar, "claude", "ask_agent", to="codex", request="review?")
    await call(sidecar, "hermes", "send_message", to="codex", text="fyi")
    await sidecar.call("lispm/agent-stop", {"name": "codex", "instance": 2})
    entries = await ledger(sidecar)
    notices = {(e["recipient"], e["text"]) for e in entries if e["kind"] == "notice"}
    assert notices == {("claude", "codex ended without replying to request R1."),
                       ("hermes", "codex closed before your message was delivered.")}
    assert all(e["sender"] == "lispm" for e in entries if e["kind"] == "notice")
    late = await call(sidecar, "claude", "reply", request="R1", text="x")
    assert late[0]
