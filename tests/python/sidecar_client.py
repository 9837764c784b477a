"""A stand-in for Emacs in pytest: a sidecar process and a framed JSON-RPC client."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]

EmacsHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Answer:
    """What an `EmacsHandler` returns to answer RESULT with notifications in
    the same write, BEFORE and AFTER the answer: the sidecar reads them all at
    once."""

    result: Any
    before: list[dict[str, Any]] = field(default_factory=list)
    after: list[dict[str, Any]] = field(default_factory=list)


class SidecarProcess:
    """The real sidecar, spoken to over its stdio the way Emacs does."""

    def __init__(self, runtime_dir: Path, emacs: EmacsHandler | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.runtime_dir = runtime_dir
        self.emacs = emacs
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._null_replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._stray: dict[Any, dict[str, Any]] = {}
        self._stray_came = asyncio.Condition()
        self._ids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None
        self._answering: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        env = dict(
            os.environ,
            PYTHONPATH=str(ROOT / "python"),
            LISPM_RUNTIME_DIR=str(self.runtime_dir),
            **self.env,
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
            else:
                async with self._stray_came:
                    self._stray[message["id"]] = message
                    self._stray_came.notify_all()

    async def _answer(self, message: dict[str, Any]) -> None:
        if self.emacs is None:
            reply: dict[str, Any] = {
                "error": {"code": -32601, "message": "no Emacs here"}
            }
        else:
            result = await self.emacs(message["method"], message.get("params") or {})
            if isinstance(result, Answer):
                answer = {"id": message["id"], "result": result.result}
                await self.send_frames(*({"jsonrpc": "2.0", **frame} for frame in (
                    *result.before, answer, *result.after)))
                return
            reply = {"result": result}
        await self.send_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": message["id"], **reply})
        )

    async def send_frames(self, *messages: Any) -> None:
        """Send MESSAGES as frames in one write, so that they arrive together."""
        bodies = [orjson.dumps(message) for message in messages]
        await self.send_raw(b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                                     for body in bodies), header=b"")

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

    async def reply_to(self, msg_id: Any) -> dict[str, Any]:
        """Return the reply to MSG_ID, a request sent with `send_raw`."""
        async with self._stray_came:
            await asyncio.wait_for(self._stray_came.wait_for(lambda: msg_id in self._stray), 20)
            return self._stray[msg_id]

    def answered(self, msg_id: Any) -> bool:
        """Return True if a reply came to MSG_ID, a request sent with `send_raw`."""
        return msg_id in self._stray

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
