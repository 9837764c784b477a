"""One streamable-HTTP MCP server per agent terminal, on 127.0.0.1.

Each server is the MCP SDK's Starlette app behind a guard that checks the
Host, the Origin and the agent's own bearer token, served by an embedded
uvicorn on a socket of its own.  All of them share the sidecar's one
asyncio loop.  A connection that has not sent a request's whole header
within `HEADER_TIMEOUT` seconds of connecting (or of its first byte after
a previous request) is closed: the token is in the header, so until then
the peer is nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import h11
import orjson
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import ServerStartFailed

log = logging.getLogger(__name__)

#: How long a connection may take to send a request's header: any real
#: client sends it at once.
HEADER_TIMEOUT = 5.0

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_LOCAL_ORIGINS = tuple(f"http://{host}" for host in _LOCAL_HOSTS)


def _is_local_host(host: str, port: int) -> bool:
    return host in _LOCAL_HOSTS or any(host == f"{h}:{port}" for h in _LOCAL_HOSTS)


def _is_local_origin(origin: str) -> bool:
    return any(origin == o or origin.startswith(o + ":") for o in _LOCAL_ORIGINS)


async def _refuse(send: Send, status: int, error: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = orjson.dumps({"error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers + extra})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """An ASGI wrapper that lets through only local requests with the right token."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        port: Callable[[], int],
        on_authenticated: Callable[[], None],
    ) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()
        self._port = port
        self._on_authenticated = on_authenticated

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if not _is_local_host(host, self._port()):
            await _refuse(send, 403, "forbidden host", [])
            return
        origin = headers.get(b"origin")
        if origin is not None and not _is_local_origin(origin.decode("latin-1")):
            await _refuse(send, 403, "forbidden origin", [])
            return
        if not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            await _refuse(send, 401, "unauthorized", [(b"www-authenticate", b"Bearer")])
            return
        self._on_authenticated()
        await self._app(scope, receive, send)


class _HeaderDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose header is late.

    uvicorn closes a connection idle after a response (its keep-alive
    timeout), but none before its first request, nor one that stops in the
    middle of a header.
    """

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_header()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            self._expect_header()
        else:
            self._header_came()

    def connection_lost(self, exc: Exception | None) -> None:
        self._header_came()
        super().connection_lost(exc)

    def _expect_header(self) -> None:
        if self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(HEADER_TIMEOUT, self._header_late)

    def _header_came(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closed a connection that sent no request header within %g s",
                     HEADER_TIMEOUT)
            self.transport.close()


class _EmbeddedUvicorn(uvicorn.Server):
    """uvicorn as one of many servers in a shared loop.

    It leaves the process's signal handlers alone, and it sleeps until told
    to stop instead of waking ten times a second, so fifty idle agents cost
    no CPU.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopped = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        await self._stopped.wait()

    def stop(self) -> None:
        self.should_exit = True
        self._stopped.set()


def listen_loopback(port: int, backlog: int = 64) -> socket.socket:
    """Return a non-blocking socket listening on 127.0.0.1:PORT (0: a free port).

    Raise `ServerStartFailed` if the port cannot be had.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # After a sidecar restart the same port comes back at once (TIME_WAIT).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn on a pre-bound socket takes 44 ms a request without this (Nagle
    # meeting delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as err:
        sock.close()
        raise ServerStartFailed(f"cannot listen on 127.0.0.1:{port}: {err.strerror}") from err
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


class HttpServer:
    """An ASGI app listening on 127.0.0.1 at a port of its own."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._server: _EmbeddedUvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self, port: int = 0) -> int:
        """Listen on PORT (0: any free port) and return the port."""
        sock = listen_loopback(port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            lifespan="on",
            log_config=None,
            log_level="warning",
            access_log=False,
            ws="none",
            http=_HeaderDeadline,
            timeout_graceful_shutdown=1,
        )
        self._server = _EmbeddedUvicorn(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                sock.close()
                raise ServerStartFailed(f"the server on port {self.port} stopped while starting")
            await asyncio.sleep(0.002)
        return self.port

    async def stop(self) -> None:
        """Stop listening, end open connections and wait for the server to finish."""
        if self._server is None or self._task is None:
            return
        self._server.stop()
        with contextlib.suppress(Exception):
            await self._task
        self._server = None
        self._task = None
