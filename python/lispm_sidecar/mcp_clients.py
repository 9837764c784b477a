"""The user's MCP servers: the sidecar is their client, for LispM's own agent.

Emacs declares the servers (`lispm/mcp-servers`); each is a `McpServer`,
started on first use, its tools listed and kept until it dies or says they
changed, and stopped when it leaves the set or the sidecar stops.  A call
(`lispm/mcp-call`) goes to a live server, or to one started again when the
last one died; a call already sent when a server dies fails, and is never
sent twice (a tool may not be idempotent).

Each server lives in a task of its own, which enters its transport and
session and leaves them (anyio wants both in one task).  Between the
transport and the session a pump forwards what the server sends: its end
is how a server's death is known, for stdio and HTTP alike.  A stdio
server's stderr goes to a pipe whose last `STDERR_TAIL` characters are
kept for error messages, never more.  Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

import anyio
import orjson

from .errors import McpServerFailed
from .protocol import (
    Json,
    McpCallParams,
    McpCallResult,
    McpServerEntry,
    McpServersParams,
    McpServerSpec,
    McpServersResult,
    McpTool,
)

log = logging.getLogger(__name__)

#: Characters of a stdio server's stderr kept, for error messages.
STDERR_TAIL = 2000
#: Characters of a call's text passed on; the rest is cut, with a note.
TEXT_LIMIT = 100_000
#: Seconds a server may take to start and list its tools, by default.
CONNECT_TIMEOUT = 30.0
#: Seconds a call may take, by default.
CALL_TIMEOUT = 60.0
#: Seconds a server has to stop before it is left to the transport's kill.
STOP_TIMEOUT = 5.0
#: Seconds before a server that failed to start is tried again by a declaration.
RETRY_AFTER = 60.0

Reason = Literal["tools", "exited"]
Notify = Callable[[str, Reason], None]


#: Run before a stdio server on Linux: the kernel kills it when the sidecar
#: dies, even by SIGKILL, so that no server outlives it (PR_SET_PDEATHSIG
#: survives exec).  A program that cannot run is said in one line.
_ORPHAN_GUARD = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() == 1: sys.exit(1)\n"
    "try: os.execvp(sys.argv[1], sys.argv[1:])\n"
    "except OSError as err: sys.exit(f'cannot run {sys.argv[1]}: {err.strerror}')\n"
)

#: Servers being stopped in the background, so that a failed start answers at once.
_STOPPING: set[asyncio.Task[None]] = set()


async def _finish(task: asyncio.Task[None], stop: asyncio.Event, name: str) -> None:
    """Stop a server's TASK: ask by STOP, then cancel; each wait bounded."""
    stop.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
    except TimeoutError:
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, STOP_TIMEOUT)
    except BaseException:
        log.debug("MCP server %s ended with an error", name, exc_info=True)


class _StderrTail(asyncio.Protocol):
    """Keeps the last `STDERR_TAIL` characters a server wrote to stderr."""

    def __init__(self) -> None:
        self.chunks: deque[str] = deque()
        self.size = 0

    def data_received(self, data: bytes) -> None:
        text = data.decode(errors="replace")
        self.chunks.append(text)
        self.size += len(text)
        while self.size - len(self.chunks[0]) >= STDERR_TAIL:
            self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        return "".join(self.chunks)[-STDERR_TAIL:].strip()


def _summary(content: Any) -> str:
    """Return one content item of a tool's result as text."""
    kind = getattr(content, "type", None)
    if kind == "text":
        return str(content.text)
    if kind in ("image", "audio"):
        size = len(content.data) * 3 // 4
        return f"[{kind} {content.mime_type}, {size} bytes]"
    if kind == "resource":
        resource = content.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource {resource.uri}, {getattr(resource, 'mime_type', None) or 'binary'}]"
    if kind == "resource_link":
        return f"[link to resource {content.uri}]"
    return f"[{kind or 'unknown'} content]"


def result_text(result: Any) -> str:
    """Return the text of RESULT, a `CallToolResult`, bounded by `TEXT_LIMIT`."""
    parts = [_summary(item) for item in result.content]
    has_text = any(getattr(item, "type", None) == "text" for item in result.content)
    if result.structured_content is not None and not has_text:
        parts.append(orjson.dumps(result.structured_content).decode())
    text = "\n".join(parts)
    if len(text) > TEXT_LIMIT:
        cut = len(text) - TEXT_LIMIT
        text = f"{text[:TEXT_LIMIT]}\n[{cut} characters cut: the result had {len(text)}]"
    return text


def _tool_entry(tool: Any) -> McpTool:
    """Return TOOL, as the SDK lists it, as Emacs takes it."""
    entry: McpTool = {
        "name": tool.name,
        "description": tool.description or "",
        "input_schema_json": orjson.dumps(tool.input_schema or {"type": "object"}).decode(),
    }
    if tool.annotations is not None:
        entry["annotations"] = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return entry


class McpServer:
    """One of the user's MCP servers, and the session with it while it lives."""

    def __init__(self, name: str, spec: McpServerSpec, notify: Notify) -> None:
        self.name = name
        self.spec = spec
        self._notify = notify
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._stop = asyncio.Event()
        self._dead = asyncio.Event()
        self._stderr: _StderrTail | None = None
        self._garbage: str | None = None
        self._starting = asyncio.Lock()
        self.failed: tuple[float, McpServerFailed] | None = None
        self.tools: list[McpTool] | None = None

    # ------------------------------------------------------------- life

    @property
    def live(self) -> bool:
        """Whether the session is up and the server has not died."""
        return (self._ready is not None and self._ready.done()
                and not self._ready.cancelled() and self._ready.exception() is None
                and not self._dead.is_set())

    def _failure(self, what: str) -> McpServerFailed:
        """Return the error of WHAT went wrong, with what the server said."""
        said = []
        if self._garbage:
            said.append(f"it wrote what is not JSON-RPC: {self._garbage[:200]}")
        if self._stderr and (tail := self._stderr.text()):
            said.append(f"its stderr ends: {tail[-500:]}")
        return McpServerFailed(f"MCP server {self.name}: {what}"
                               + ("; " + "; ".join(said) if said else ""))

    async def start(self, seconds: float) -> None:
        """Start the server and its session, within SECONDS."""
        await self.stop()
        self._stop, self._dead = asyncio.Event(), asyncio.Event()
        self._garbage, self.tools = None, None
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(self._ready, self._stop, self._dead),
                                         name=f"mcp-{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), seconds)
        except TimeoutError:
            raise self._give_up(self._failure(f"it did not answer in {seconds:g} s")) from None
        except McpServerFailed as err:
            raise self._give_up(err) from None
        except Exception as err:
            raise self._give_up(self._failure(f"it could not start: {err}")) from err
        self.failed = None

    def _give_up(self, failure: McpServerFailed) -> McpServerFailed:
        """Stop this start in the background, remember FAILURE and return it."""
        task, self._task = self._task, None
        if task is not None:
            cleanup = asyncio.create_task(_finish(task, self._stop, self.name))
            _STOPPING.add(cleanup)
            cleanup.add_done_callback(_STOPPING.discard)
        self.failed = (asyncio.get_running_loop().time(), failure)
        return failure

    def failed_lately(self) -> McpServerFailed | None:
        """Return why the server failed to start, if it did less than RETRY_AFTER ago."""
        if self.failed and asyncio.get_running_loop().time() - self.failed[0] < RETRY_AFTER:
            return self.failed[1]
        return None

    async def stop(self) -> None:
        """Stop the server, if it runs; its transport ends the process."""
        task, self._task = self._task, None
        if task is not None:
            await _finish(task, self._stop, self.name)

    async def _open_stdio(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        """Start the server's process; return its transport's streams."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        spec = self.spec
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        try:
            tail = self._stderr = _StderrTail()
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: tail, os.fdopen(read_fd, "rb"))
            stack.callback(transport.close)
            command, args = spec.get("command") or "", list(spec.get("args") or [])
            if sys.platform == "linux":
                command, args = sys.executable, ["-c", _ORPHAN_GUARD, command, *args]
            params = StdioServerParameters(command=command, args=args,
                                           env=dict(spec.get("env") or {}) or None,
                                           cwd=spec.get("cwd"))
            streams: tuple[Any, Any] = await stack.enter_async_context(
                stdio_client(params, errlog=errlog))
        finally:
            # The process has its copy; ours would keep the pipe open after it exits.
            errlog.close()
        return streams

    async def _open_http(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        """Connect to the server's URL; return its transport's streams."""
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(
            create_mcp_http_client(headers=dict(self.spec.get("headers") or {})))
        streams = await stack.enter_async_context(
            streamable_http_client(self.spec.get("url") or "", http_client=client))
        return streams[0], streams[1]

    async def _on_message(self, message: Any) -> None:
        """Take what the server sends unasked: a changed tool list, or garbage."""
        if isinstance(message, Exception):
            # Pydantic's first line names its union; the line that says why comes after.
            lines = [line.strip() for line in str(message).splitlines()
                     if line.strip() and not line.strip().startswith("For further")]
            self._garbage = lines[-1] if lines else type(message).__name__
            return
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.tools = None
            self._notify(self.name, "tools")

    async def _run(self, ready: asyncio.Future[Any], stop_event: asyncio.Event,
                   dead_event: asyncio.Event) -> None:
        """The server's task: open, serve until STOP_EVENT or dead, close.

        DEAD_EVENT is set once what the server sends has ended."""
        from mcp.client.session import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.spec.get("url"):
                    read, write = await self._open_http(stack)
                else:
                    read, write = await self._open_stdio(stack)
                send, receive = anyio.create_memory_object_stream[Any](0)

                async def pump() -> None:
                    try:
                        async with send:
                            async for item in read:
                                await send.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        pass
                    finally:
                        dead_event.set()

                group = await stack.enter_async_context(anyio.create_task_group())
                group.start_soon(pump)
                session = await stack.enter_async_context(
                    ClientSession(receive, write, message_handler=self._on_message))
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                stop = asyncio.ensure_future(stop_event.wait())
                dead = asyncio.ensure_future(dead_event.wait())
                try:
                    await asyncio.wait({stop, dead}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    dead.cancel()
                if not stop_event.is_set():
                    self.tools = None
                    self._notify(self.name, "exited")
                group.cancel_scope.cancel()
        except BaseException as err:
            if not ready.done():
                if isinstance(err, Exception):
                    ready.set_exception(err)
                else:
                    ready.cancel()
            if not isinstance(err, Exception):
                raise
        finally:
            dead_event.set()
            if not ready.done():
                ready.set_exception(self._failure("its connection closed while starting"))

    async def session(self, seconds: float) -> Any:
        """Return the live session, starting the server (again) if needed."""
        async with self._starting:
            if not self.live:
                await self.start(seconds)
        assert self._ready is not None
        return self._ready.result()

    # ------------------------------------------------------------- use

    async def list_tools(self, seconds: float) -> list[McpTool]:
        """Return the server's tools, all pages, listed once until they change."""
        if self.tools is not None and self.live:
            return self.tools
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        session = await self.session(seconds)
        from mcp_types import PaginatedRequestParams

        tools: list[McpTool] = []
        cursor: str | None = None
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError
                page = await asyncio.wait_for(session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None), left)
                tools += [_tool_entry(tool) for tool in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
        except TimeoutError:
            await self.stop()
            raise self._failure(f"it did not list its tools in {seconds:g} s") from None
        except McpServerFailed:
            raise
        except Exception as err:
            await self.stop()
            raise self._failure(f"listing its tools failed: {err}") from err
        self.tools = tools
        return tools

    async def call(self, tool: str, arguments: Json, seconds: float) -> McpCallResult:
        """Call TOOL with ARGUMENTS, within SECONDS."""
        session = await self.session(min(seconds, CONNECT_TIMEOUT))
        try:
            result = await asyncio.wait_for(
                session.call_tool(tool, arguments, read_timeout_seconds=seconds + 1), seconds)
        except TimeoutError:
            raise self._failure(f"tool {tool} did not answer in {seconds:g} s") from None
        except Exception as err:
            if self._dead.is_set():
                raise self._failure(
                    f"it died during the call of {tool}, which was not sent again") from err
            raise self._failure(f"tool {tool} failed: {err}") from err
        return {"text": result_text(result), "is_error": bool(result.is_error)}


class McpClients:
    """The user's MCP servers, by name, as Emacs last declared them."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._declaring = asyncio.Lock()
        self.servers: dict[str, McpServer] = {}

    async def declare(self, params: McpServersParams) -> McpServersResult:
        """Take the whole set of servers; start the new, stop the gone; list tools.

        One declaration at a time: a later one sees what the earlier did."""
        async with self._declaring:
            return await self._declare(params)

    async def _declare(self, params: McpServersParams) -> McpServersResult:
        timeout = float(params.get("timeout") or CONNECT_TIMEOUT)
        wanted = params["servers"]
        for name in [n for n, s in self.servers.items()
                     if n not in wanted or s.spec != wanted[n]]:
            await self.servers.pop(name).stop()
        for name, spec in wanted.items():
            if name not in self.servers:
                self.servers[name] = McpServer(name, spec, self._notify)

        async def entry(server: McpServer) -> McpServerEntry:
            if (failure := server.failed_lately()) is not None:
                return {"name": server.name, "tools": [], "error": str(failure)}
            try:
                return {"name": server.name, "tools": await server.list_tools(timeout)}
            except McpServerFailed as err:
                return {"name": server.name, "tools": [], "error": str(err)}

        return {"servers": list(await asyncio.gather(
            *(entry(server) for server in self.servers.values())))}

    async def call(self, params: McpCallParams) -> McpCallResult:
        """Call a tool of a declared server."""
        server = self.servers.get(params["server"])
        if server is None:
            raise McpServerFailed(
                f"no MCP server {params['server']}: the servers are "
                f"{', '.join(self.servers) or 'none'}")
        arguments = params.get("arguments") or {}
        return await server.call(params["tool"], arguments,
                                 float(params.get("timeout") or CALL_TIMEOUT))

    async def close(self) -> None:
        """Stop every server."""
        servers, self.servers = list(self.servers.values()), {}
        await asyncio.gather(*(server.stop() for server in servers), *_STOPPING)
