"""Agents' starts and ends over the real sidecar: unknown kinds are refused,
and nothing private (token files, agent folders, Claude's IDE locks) is
left after a close, a stop or the sidecar's shutdown.  A shutdown leaves
the ledger as it is: the agents may be resumed."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .sidecar_client import SidecarProcess


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": []}
    raise AssertionError(f"unexpected request {method}")


def sidecar_for(tmp_path: Path) -> SidecarProcess:
    """A sidecar whose HOME, Claude config dir and runtime dir are TMP_PATH's."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return SidecarProcess(tmp_path / "run", fake_emacs,
                          env={"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")})


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarProcess]:
    process = sidecar_for(tmp_path)
    await process.start()
    await process.hello()
    yield process
    await process.close()


def private_files(tmp_path: Path) -> list[str]:
    """Every agent folder and IDE lock file of the sidecar of TMP_PATH."""
    agents = tmp_path / "run" / "agents"
    locks = tmp_path / "home" / ".claude" / "ide"
    return sorted([*(str(p) for p in agents.glob("*")), *(str(p) for p in locks.glob("*.lock"))])


async def start(sidecar: SidecarProcess, name: str, kind: str, instance: int) -> dict[str, Any]:
    result: dict[str, Any] = await sidecar.call(
        "lispm/agent-start",
        {"name": name, "kind": kind, "folder": "/tmp", "instance": instance})
    return result


async def exited(sidecar: SidecarProcess) -> int:
    assert sidecar.proc is not None
    return await asyncio.wait_for(sidecar.proc.wait(), 20)


async def test_an_unknown_kind_is_refused_and_nothing_starts(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    answer = await sidecar.call(
        "lispm/agent-start", {"name": "gpt", "kind": "chatgpt", "folder": "/tmp"}, raw=True)
    error = answer["error"]
    assert error["code"] == -32602
    assert error["message"] == ("unknown agent kind 'chatgpt'; the kinds are "
                                "claude, codex, hermes, holon, lispm, openclaw")
    assert (await sidecar.call("lispm/agents", {}))["agents"] == []
    assert private_files(tmp_path) == []
    # The name is free: a known kind starts under it.
    assert (await start(sidecar, "gpt", "codex", 1))["kind"] == "codex"


async def test_closing_every_agent_then_stopping_at_once_leaves_nothing(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    await start(sidecar, "claude", "claude", 1)
    await start(sidecar, "codex", "codex", 2)
    assert len(private_files(tmp_path)) == 3  # two folders, Claude's lock
    # As Emacs does it: each terminal closes, then the sidecar is stopped,
    # all in one write, so the shutdown comes while the stops are under way.
    await sidecar.send_frames(
        {"jsonrpc": "2.0", "id": "s1", "method": "lispm/agent-stop",
         "params": {"name": "claude", "instance": 1}},
        {"jsonrpc": "2.0", "id": "s2", "method": "lispm/agent-stop",
         "params": {"name": "codex", "instance": 2}},
        {"jsonrpc": "2.0", "id": "bye", "method": "lispm/shutdown", "params": {}})
    assert await exited(sidecar) == 0
    assert private_files(tmp_path) == []


async def test_a_start_under_way_when_the_sidecar_stops_leaves_nothing(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    # An agent starting (a Claude: its MCP server, IDE server and lock file)
    # when the shutdown comes, in the same write.
    await sidecar.send_frames(
        {"jsonrpc": "2.0", "id": "s1", "method": "lispm/agent-start",
         "params": {"name": "claude", "kind": "claude", "folder": "/tmp", "instance": 1}},
        {"jsonrpc": "2.0", "id": "s2", "method": "lispm/agent-start",
         "params": {"name": "codex", "kind": "codex", "folder": "/tmp", "instance": 2}},
        {"jsonrpc": "2.0", "id": "bye", "method": "lispm/shutdown", "params": {}})
    assert await exited(sidecar) == 0
    assert private_files(tmp_path) == []


async def ask(agent: dict[str, Any], to: str, request: str) -> str:
    """Ask the agent TO for REQUEST as AGENT, through AGENT's MCP server."""
    token = Path(agent["token_file"]).read_text().strip()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(agent["url"], http_client=http)) as client:
        result = await client.call_tool("ask_agent", {"to": to, "request": request})
    return "".join(getattr(part, "text", "") for part in result.content)


async def test_shutdown_with_agents_open_leaves_no_file_but_keeps_the_ledger(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    claude = await start(sidecar, "claude", "claude", 1)
    await start(sidecar, "codex", "codex", 2)
    assert await ask(claude, "codex", "review?") == "asked codex, request R1"
    await sidecar.send_frames(
        {"jsonrpc": "2.0", "id": "bye", "method": "lispm/shutdown", "params": {}})
    assert await exited(sidecar) == 0
    assert private_files(tmp_path) == []
    # A later sidecar on the same ledger: the request still waits for codex.
    later = sidecar_for(tmp_path)
    await later.start()
    try:
        await later.hello()
        entries = (await later.call("lispm/ledger", {"limit": 10}))["entries"]
        assert [(e["kind"], e["request_id"], e["state"], e["request_state"])
                for e in entries] == [("request", "R1", "queued", "open")]
    finally:
        await later.close()


async def test_a_wider_ide_lock_dir_is_narrowed(sidecar: SidecarProcess, tmp_path: Path) -> None:
    locks = tmp_path / "home" / ".claude" / "ide"
    locks.mkdir(parents=True)
    os.chmod(locks, 0o755)
    await start(sidecar, "claude", "claude", 1)
    assert stat.S_IMODE(os.stat(locks).st_mode) == 0o700
    assert len(list(locks.glob("*.lock"))) == 1
