"""A stand-in for Emacs in pytest: a sidecar process and a framed JSON-RPC client."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]

EmacsHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


class SidecarProcess:
    """The real sidecar, spoken to over its stdio the way Emacs does."""

    def __init__(self, runtime_dir: Path, emacs: EmacsHandler | None = None) -> None:
        self.runtime_dir = runtime_dir
        self.emacs = emacs
        self.proc: asyncio.subprocess.Process | None = None
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._null_replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None
        self._answering: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT / "python"),
            LISPM_RUNTIME_DIR=str(self.runtime_dir),
        )
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "lispm_sidecar",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            try:
                header = await self.proc.stdout.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            length = int(header.split(b":")[1])
            message = orjson.loads(await self.proc.stdout.readexactly(length))
            if "method" in message and "id" in message:
                task = asyncio.create_task(self._answer(message))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
            elif "method" in message:
                await self.notifications.put(message)
            elif message.get("id") is None:
                await self._null_replies.put(message)
            elif (future := self._pending.pop(message["id"], None)) is not None:
                future.set_result(message)

    async def _answer(self, message: dict[str, Any]) -> None:
        if self.emacs is None:
            reply: dict[str, Any] = {
                "error": {"code": -32601, "message": "no Emacs here"}
            }
        else:
            reply = {
                "result": await self.emacs(
                    message["method"], message.get("params") or {}
                )
            }
        await self.send_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": message["id"], **reply})
        )

    async def send_raw(self, body: bytes, header: bytes | None = None) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        head = (
            header if header is not None else b"Content-Length: %d\r\n\r\n" % len(body)
        )
        self.proc.stdin.write(head + body)
        await self.proc.stdin.drain()

    async def call(self, method: str, params: Any = None, *, raw: bool = False) -> Any:
        """Send a request; return its result, or the whole reply when RAW."""
        msg_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = (
            asyncio.get_running_loop().create_future()
        )
        self._pending[msg_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send_raw(orjson.dumps(message))
        reply = await asyncio.wait_for(future, 20)
        if raw:
            return reply
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]

    async def null_reply(self) -> dict[str, Any]:
        """Return the next error the sidecar sent without an id (a bad frame)."""
        return await asyncio.wait_for(self._null_replies.get(), 10)

    async def hello(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "lispm/hello",
            {"protocol": 1, "version": "0.1.0", "emacs_pid": os.getpid(),
             "ledger_file": str(self.runtime_dir / "ledger.sqlite3")},
        )
        return result

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()

    async def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()
