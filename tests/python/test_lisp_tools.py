"""call_tool over the real sidecar: results that come later, and calls that must not hang."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .sidecar_client import Answer, SidecarProcess


class FakeEmacs:
    """Emacs's side of `emacs/call-tool`, one behaviour per tool name."""

    def __init__(self) -> None:
        self.calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/list-agents":
            return {"agents": [{"name": "claude", "kind": "claude", "folder": "/tmp",
                                "state": "busy"}]}
        if method != "emacs/call-tool":
            raise AssertionError(f"unexpected request {method}")
        await self.calls.put(params)
        result = {"method": "lispm/tool-result", "params": {
            "call_id": params["call_id"], "ok": True, "text": f"ran {params['args']}"}}
        tool = params["tool"]
        if tool == "quick":
            # A deferred tool that finishes at once: its result follows the
            # answer so closely that the sidecar reads both in one read.
            return Answer({"pending": True}, after=[result])
        if tool == "quicker":
            # Its result even overtakes the answer.
            return Answer({"pending": True}, before=[result])
        if tool == "lost":
            return {"pending": True, "within": 0.5}
        if tool == "approval":
            return {"pending": True}
        raise AssertionError(f"unexpected tool {tool}")


@pytest.fixture
async def emacs() -> FakeEmacs:
    return FakeEmacs()


@pytest.fixture
async def sidecar(tmp_path: Path, emacs: FakeEmacs) -> AsyncIterator[SidecarProcess]:
    process = SidecarProcess(tmp_path / "run", emacs)
    await process.start()
    await process.hello()
    await process.call("lispm/agent-start",
                       {"name": "claude", "kind": "claude", "folder": "/tmp", "instance": 1})
    yield process
    await process.close()


async def agent_client(sidecar: SidecarProcess, stack: Any) -> Client:
    served = (await sidecar.call("lispm/agents", {}))["agents"][0]
    token = Path(served["token_file"]).read_text().strip()
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30))
    client: Client = await stack.enter_async_context(
        Client(streamable_http_client(served["url"], http_client=http)))
    return client


def text_of(result: Any) -> tuple[bool, str]:
    return bool(result.is_error), "".join(getattr(part, "text", "") for part in result.content)


async def test_a_result_in_the_same_read_as_its_pending_answer_is_not_lost(
        sidecar: SidecarProcess) -> None:
    async with contextlib.AsyncExitStack() as stack:
        client = await agent_client(sidecar, stack)
        results = await asyncio.wait_for(asyncio.gather(
            *(client.call_tool("call_tool", {"name": "quick", "args": {"n": n}})
              for n in range(20))), 15)
        assert sorted(text_of(r) for r in results) == sorted(
            (False, f"ran {{'n': {n}}}") for n in range(20))


async def test_a_result_that_overtakes_the_answer_is_not_lost(sidecar: SidecarProcess) -> None:
    async with contextlib.AsyncExitStack() as stack:
        client = await agent_client(sidecar, stack)
        result = await asyncio.wait_for(
            client.call_tool("call_tool", {"name": "quicker", "args": {"n": 1}}), 15)
        assert text_of(result) == (False, "ran {'n': 1}")


async def abandoned_notice(sidecar: SidecarProcess) -> dict[str, Any]:
    """Return the params of the next `lispm/tool-abandoned` the sidecar sends."""
    while True:
        message = await asyncio.wait_for(sidecar.notifications.get(), 15)
        if message["method"] == "lispm/tool-abandoned":
            return dict(message["params"])


async def test_a_result_that_never_comes_ends_the_call_and_not_the_session(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    async with contextlib.AsyncExitStack() as stack:
        client = await agent_client(sidecar, stack)
        lost = asyncio.create_task(client.call_tool("call_tool", {"name": "lost"}))
        # While that call waits, the same session still answers.
        listed = await asyncio.wait_for(client.call_tool("list_agents", {}), 15)
        assert not listed.is_error and not lost.done()
        is_error, text = text_of(await asyncio.wait_for(lost, 15))
        assert is_error and "lost" in text and "0.5 s" in text, text
        # Emacs is told, so that an approval still shown for it is withdrawn.
        call = await asyncio.wait_for(emacs.calls.get(), 15)
        abandoned = await abandoned_notice(sidecar)
        assert abandoned == {"call_id": call["call_id"], "reason": "deadline"}
        # And afterwards too.
        again = await asyncio.wait_for(
            client.call_tool("call_tool", {"name": "quick", "args": {}}), 15)
        assert text_of(again) == (False, "ran {}")


async def test_a_waiting_call_ends_when_its_agent_closes(
        sidecar: SidecarProcess, emacs: FakeEmacs) -> None:
    async with contextlib.AsyncExitStack() as stack:
        client = await agent_client(sidecar, stack)
        waiting = asyncio.create_task(client.call_tool("call_tool", {"name": "approval"}))
        await asyncio.wait_for(emacs.calls.get(), 15)
        await sidecar.call("lispm/agent-stop", {"name": "claude", "instance": 1})
        done, _ = await asyncio.wait({waiting}, timeout=15)
        assert waiting in done, "the call still waits after its agent closed"
        if not waiting.exception():
            assert waiting.result().is_error
        abandoned = await abandoned_notice(sidecar)
        assert abandoned["reason"] == "cancelled"
