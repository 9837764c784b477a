"""The Claude Code IDE protocol: one WebSocket MCP server per Claude terminal.

Claude Code finds the server through a lock file (`ide_lock.py`) and
`CLAUDE_CODE_SSE_PORT`, opens `ws://127.0.0.1:<port>/` with the subprotocol
`mcp` and the header `X-Claude-Code-Ide-Authorization: <token>`, and speaks
MCP JSON-RPC 2.0, one message per text frame.  The server:

- refuses the upgrade with 403 for a non-local `Host` or `Origin`, with 401
  for a missing or wrong token (compared in constant time), and with 426 for
  a right token without a WebSocket upgrade; closes a connection that has
  not sent its whole request header within `HEADER_TIMEOUT` seconds;
- answers the small MCP surface itself (orjson, no SDK): `initialize`
  (echoing the client's `protocolVersion`, `capabilities.tools.listChanged`),
  `ping`, `tools/list` (the 11 tools of `TOOLS`), `tools/call`,
  `prompts/list`, `resources/list` and `resources/templates/list` (empty);
  other methods get −32601, unparsable frames −32700, frames that are not
  one JSON-RPC request object −32600;
- takes the notifications `notifications/initialized`, `ide_connected`
  (Claude's pid) and `notifications/cancelled` (cancels that call);
- answers a `tools/call` inline when the handler's mirror of the editor
  can (`IdeHandler.answer_now`), and otherwise runs it in a task of its
  own (`IdeHandler.call`), so an `openDiff` waiting minutes for the user
  never holds up the socket or any other call;
- confines every path argument to the agent's folder before the handler
  sees it (`confined_path`), passes the handler only the arguments the
  tool declares, and turns `LispmError`s into `isError: true` results;
- sends `selection_changed` and `at_mentioned` (`notify`) only for files in
  the folder, to every client that has settled after its handshake
  (`SETTLE_AFTER_LIST`); until then they are held, and the newest selection
  is given to each client as it settles.

The token is never logged, nor any header that could hold it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import orjson
from aiohttp import WSMsgType, web

from ... import __version__
from ...errors import InvalidParams, LispmError
from ...mcp_server import HEADER_TIMEOUT, listen_loopback

log = logging.getLogger(__name__)

Json = dict[str, Any]
Content = list[dict[str, Any]]

AUTH_HEADER: Final = "X-Claude-Code-Ide-Authorization"
#: What `initialize` answers when the client names no protocol version.
DEFAULT_PROTOCOL_VERSION: Final = "2025-11-25"
#: The biggest frame taken: `openDiff` carries whole files.
MAX_FRAME: Final = 64 * 1024 * 1024

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602

_LOCAL_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]")

#: How long after answering `tools/list` a client is ready for notifications.
#: Claude Code 2.1.197 ignores a `selection_changed` sent at once, and uses
#: one sent 20 ms later (tried with the real CLI).
SETTLE_AFTER_LIST: Final = 0.3
#: When a client that never lists the tools is taken to be ready, counted
#: from its `notifications/initialized`.
SETTLE_AFTER_INIT: Final = 2.0
#: Notifications held for one unsettled client at most (the newest
#: `selection_changed` is kept apart, and always).
MAX_HELD: Final = 32

#: Seconds a frame may take to reach a client's socket; a client that
#: stops reading for longer is disconnected, so nothing waits on it forever.
SEND_TIMEOUT: Final = 10.0


class OutsideFolder(InvalidParams):
    """A path names something outside the agent's folder."""


class IdeHandler(Protocol):
    """What answers the IDE tools: Emacs and the sidecar's mirror of it.

    For both methods, ARGS hold only the properties the tool declares, of
    the declared types, with the required ones present; each path argument
    is already absolute, free of `..` and symlinks, and inside the agent's
    folder (`filePath`, `old_file_path`, `new_file_path` as paths, `uri` as
    a `file://` URI).  Raise `LispmError` to refuse: the client gets a tool
    result with `isError: true` and the message.  Any other exception is
    logged and answered as an internal error.
    """

    def answer_now(self, tool: str, args: dict[str, Any]) -> Content | None:
        """Return TOOL's MCP content items at once, or None to go through `call`.

        For what the sidecar's mirror of the editor knows: answered inline,
        with no task and no trip round the event loop.  It must not block.
        """
        ...

    async def call(self, tool: str, args: dict[str, Any]) -> Content:
        """Run TOOL with ARGS (in a task of its own) and return MCP content items.

        Cancellation (the client cancelled the call, went away, or the
        server stops) arrives as `asyncio.CancelledError`: an `openDiff`
        must then close its diff in Emacs.
        """
        ...


# ---------------------------------------------------------------------------
# Paths


def _file_uri_path(text: str) -> str:
    parts = urllib.parse.urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise InvalidParams(f"not a local file URI: {text!r}")
    try:
        path = urllib.parse.unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        raise InvalidParams(f"not a UTF-8 file URI: {text!r}") from None
    if not path.startswith("/"):
        raise InvalidParams(f"not an absolute file URI: {text!r}")
    return path


def _has_scheme(text: str) -> bool:
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme[:1].isalpha() and all(
        c.isalnum() or c in "+.-" for c in scheme)


def confined_path(folder_truename: Path, path: str) -> Path:
    """Return PATH resolved against FOLDER_TRUENAME, refusing anything outside it.

    PATH may be absolute, relative to the folder, `~`-prefixed, or a
    `file://` URI (percent-encoded; host empty or `localhost`).  `..` and
    symlinks are resolved (`os.path.realpath`, so a path need not exist);
    the result must be the folder itself or below it, else `OutsideFolder`.
    Other URI schemes, NUL bytes and empty paths raise `InvalidParams`.
    """
    if not isinstance(path, str) or not path:
        raise InvalidParams("a path must be a non-empty string")
    text = path
    if text[:5].lower() == "file:":
        text = _file_uri_path(text)
    elif _has_scheme(text):
        raise InvalidParams(f"not a file path or file:// URI: {path!r}")
    if "\x00" in text:
        raise InvalidParams("a path must not contain NUL")
    if text.startswith("~"):
        text = os.path.expanduser(text)
    root = os.path.realpath(folder_truename)
    resolved = os.path.realpath(os.path.join(root, text))
    if resolved != root and not resolved.startswith(root.rstrip("/") + "/"):
        raise OutsideFolder(f"{path} is outside this agent's folder {root}")
    return Path(resolved)


#: What Node's `url.pathToFileURL` (so Claude Code) leaves unencoded in a path,
#: besides letters, digits and `_.-` (it encodes `~`, which `quote` never does).
_URI_SAFE: Final = "/!$&'()*+,;=:@"


def file_uri(path: Path | str) -> str:
    """Return the `file://` URI of the absolute PATH, encoded as Claude Code does."""
    return "file://" + urllib.parse.quote(str(path), safe=_URI_SAFE).replace("~", "%7E")


# ---------------------------------------------------------------------------
# The tools


def _schema(properties: Mapping[str, tuple[str, str]], required: tuple[str, ...] = ()) -> Json:
    return {
        "type": "object",
        "properties": {
            name: {"type": kind, "description": text}
            for name, (kind, text) in properties.items()
        },
        "required": list(required),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Tool:
    """One IDE tool: its MCP description and which arguments are paths."""

    name: str
    description: str
    input_schema: Json
    #: Arguments that name files: "path" for plain paths, "uri" for file URIs.
    paths: Mapping[str, Literal["path", "uri"]] = field(default_factory=dict)

    def describe(self) -> Json:
        """The tool as `tools/list` lists it."""
        return {"name": self.name, "description": self.description,
                "inputSchema": self.input_schema}


_FILE = ("string", "Absolute path of the file (in the agent's folder).")
_NO_ARGS = _schema({})

TOOLS: Final[dict[str, Tool]] = {tool.name: tool for tool in (
    Tool("openFile",
         "Open a file in Emacs and optionally select a range of text.",
         _schema({
             "filePath": _FILE,
             "preview": ("boolean", "Open in preview mode (ignored by Emacs)."),
             "startText": ("string", "Text where the selection starts."),
             "endText": ("string", "Text where the selection ends."),
             "selectToEndOfLine": ("boolean", "Extend the selection to the end of its line."),
             "makeFrontmost": ("boolean", "Show the file's buffer (default true)."),
         }, ("filePath",)),
         {"filePath": "path"}),
    Tool("openDiff",
         "Show a proposed change of a file as a diff in Emacs and wait for the user "
         "to accept (FILE_SAVED + the final contents) or reject it (DIFF_REJECTED).",
         _schema({
             "old_file_path": ("string", "The file as it is."),
             "new_file_path": ("string", "The file to write."),
             "new_file_contents": ("string", "The whole proposed contents."),
             "tab_name": ("string", "The name of the diff, for close_tab."),
         }, ("old_file_path", "new_file_path", "new_file_contents", "tab_name")),
         {"old_file_path": "path", "new_file_path": "path"}),
    Tool("getCurrentSelection",
         "Get the text selected in the selected Emacs window.", _NO_ARGS),
    Tool("getLatestSelection",
         "Get the most recent text selection in a file of the agent's folder.", _NO_ARGS),
    Tool("getOpenEditors",
         "List the files of the agent's folder that are open in Emacs.", _NO_ARGS),
    Tool("getWorkspaceFolders",
         "List the agent's workspace folders.", _NO_ARGS),
    Tool("getDiagnostics",
         "Get the language diagnostics (errors, warnings) Emacs has for a file, or for "
         "every open file in the agent's folder when no uri is given.",
         _schema({"uri": ("string", "file:// URI of the file; all open files if omitted.")}),
         {"uri": "uri"}),
    Tool("checkDocumentDirty",
         "Tell whether a file open in Emacs has unsaved changes.",
         _schema({"filePath": _FILE}, ("filePath",)), {"filePath": "path"}),
    Tool("saveDocument",
         "Save a file open in Emacs.",
         _schema({"filePath": _FILE}, ("filePath",)), {"filePath": "path"}),
    Tool("close_tab",
         "Close a diff opened by openDiff, by its tab name.",
         _schema({"tab_name": ("string", "The tab_name given to openDiff.")}, ("tab_name",))),
    Tool("closeAllDiffTabs",
         "Close every diff opened by openDiff.", _NO_ARGS),
)}

_TOOL_LIST: Final[Json] = {"tools": [tool.describe() for tool in TOOLS.values()]}

_JSON_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float),
    "object": (dict,), "array": (list,),
}


def tool_arguments(tool: Tool, args: Mapping[str, Any], folder_truename: Path) -> dict[str, Any]:
    """Return the arguments of TOOL the handler gets, or raise `InvalidParams`.

    Only declared properties pass; each must have its declared type; the
    required ones must be present; path arguments are confined to the folder
    and replaced by their resolved form (a path, or a `file://` URI).
    """
    properties: Mapping[str, Json] = tool.input_schema["properties"]
    for name in tool.input_schema["required"]:
        if name not in args:
            raise InvalidParams(f"{tool.name}: missing argument {name}")
    clean: dict[str, Any] = {}
    for name, spec in properties.items():
        if name not in args:
            continue
        value = args[name]
        kind = spec["type"]
        if not isinstance(value, _JSON_TYPES[kind]) or (
                kind in ("integer", "number") and isinstance(value, bool)):
            raise InvalidParams(f"{tool.name}: {name} must be a {kind}")
        path_kind = tool.paths.get(name)
        if path_kind is not None:
            resolved = confined_path(folder_truename, args[name])
            value = str(resolved) if path_kind == "path" else file_uri(resolved)
        clean[name] = value
    return clean


# ---------------------------------------------------------------------------
# JSON-RPC frames


def _frame_error(rid: Any, code: int, message: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def _frame_result(rid: Any, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def _tool_error(text: str) -> Json:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _valid_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _is_local_host(host: str, port: int) -> bool:
    return host in _LOCAL_HOSTS or any(host == f"{h}:{port}" for h in _LOCAL_HOSTS)


def _is_local_origin(origin: str, port: int) -> bool:
    for scheme in ("http://", "https://"):
        if origin.startswith(scheme) and _is_local_host(origin[len(scheme):], port):
            return True
    return False


@dataclass(eq=False)
class _Client:
    """One open, authenticated WebSocket."""

    ws: web.WebSocketResponse[Literal[False]]
    transport: asyncio.Transport | None = None
    initialized: bool = False
    listed: bool = False
    #: Ready for notifications (see SETTLE_AFTER_LIST); until then they are held.
    settled: bool = False
    #: The held notifications are being sent.
    settling: bool = False
    pid: int | None = None
    calls: dict[str | int, asyncio.Task[None]] = field(default_factory=dict)
    held: list[bytes] = field(default_factory=list)
    held_selection: bytes | None = None
    settle_timer: asyncio.TimerHandle | None = None

    def hold(self, method: str, frame: bytes) -> None:
        """Keep FRAME until this client settles: the newest selection, and some others."""
        if method == "selection_changed":
            self.held_selection = frame
        elif len(self.held) < MAX_HELD:
            self.held.append(frame)

    def settle_in(self, seconds: float, settle: Callable[[_Client], None]) -> None:
        """Call SETTLE with this client SECONDS from now, instead of any earlier plan."""
        if self.settled or self.settling:
            return
        if self.settle_timer is not None:
            self.settle_timer.cancel()
        self.settle_timer = asyncio.get_running_loop().call_later(seconds, settle, self)

    async def send(self, frame: bytes) -> bool:
        """Send FRAME as one text frame; False if the socket is gone.

        A client that has not taken the frame within SEND_TIMEOUT is cut off.
        """
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                await self.ws.send_frame(frame, WSMsgType.TEXT)
        except TimeoutError:
            log.warning("an IDE client stopped reading for %g s; disconnecting it", SEND_TIMEOUT)
            if self.transport is not None:
                self.transport.abort()
            return False
        except (ConnectionError, RuntimeError):
            return False
        return True

    def cancel_calls(self) -> None:
        """Cancel every call still running for this client, and its settling."""
        for task in self.calls.values():
            task.cancel()
        if self.settle_timer is not None:
            self.settle_timer.cancel()


# ---------------------------------------------------------------------------
# The server


class IdeServer:
    """The IDE WebSocket MCP server of one Claude terminal, on 127.0.0.1."""

    def __init__(
        self,
        agent_name: str,
        folder: Path,
        token: str,
        handler: IdeHandler,
        *,
        ide_name: str = "LispM",
        on_change: Callable[[IdeServer], None] | None = None,
        settle_after_list: float = SETTLE_AFTER_LIST,
        settle_after_init: float = SETTLE_AFTER_INIT,
    ) -> None:
        if not token:
            raise ValueError("an IDE server needs a token")
        self.agent_name = agent_name
        self.folder = Path(os.path.realpath(folder))
        self.ide_name = ide_name
        self._expected = token.encode()
        self._handler = handler
        self._on_change = on_change
        self._settle_after_list = settle_after_list
        self._settle_after_init = settle_after_init
        self._clients: set[_Client] = set()
        self._flushes: set[asyncio.Task[None]] = set()
        self._latest_selection: bytes | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- life cycle ---------------------------------------------------------

    async def start(self, port: int = 0) -> int:
        """Listen on 127.0.0.1:PORT (0: a free port) and return the port."""
        if self._runner is not None:
            raise RuntimeError("the IDE server is already running")
        sock = listen_loopback(port, backlog=16)
        self.port = sock.getsockname()[1]
        app = web.Application(client_max_size=1024)
        app.router.add_get("/", self._upgrade)
        # aiohttp's keep-alive deadline runs from the connection's start, and
        # an upgraded connection is past it.
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0,
                               keepalive_timeout=HEADER_TIMEOUT)
        try:
            await runner.setup()
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("IDE server of agent %s listens on port %d", self.agent_name, self.port)
        return self.port

    async def stop(self) -> None:
        """Close every client (pending calls are cancelled) and stop listening."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        clients = list(self._clients)
        for client in clients:
            client.cancel_calls()
        for task in list(self._flushes):
            task.cancel()
        await asyncio.gather(
            *(client.ws.close(code=1001, message=b"IDE closing") for client in clients),
            return_exceptions=True)
        await runner.cleanup()
        log.info("IDE server of agent %s on port %d stopped", self.agent_name, self.port)

    @property
    def connected(self) -> bool:
        """True while at least one authenticated client is connected."""
        return bool(self._clients)

    @property
    def claude_pids(self) -> list[int]:
        """The pids the connected clients gave in `ide_connected`."""
        return [c.pid for c in self._clients if c.pid is not None]

    def clients(self) -> list[dict[str, Any]]:
        """Each connected client: its pid, and how far its handshake got."""
        return [{"pid": c.pid, "initialized": c.initialized, "listed": c.listed,
                 "settled": c.settled, "calls": len(c.calls)} for c in self._clients]

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change(self)
            except Exception:
                log.exception("IDE on_change callback of agent %s failed", self.agent_name)

    # -- notifications ------------------------------------------------------

    def _notification_allowed(self, method: str, params: Mapping[str, Any]) -> bool:
        if method not in ("selection_changed", "at_mentioned"):
            return True
        for key in ("filePath", "fileUrl"):
            value = params.get(key)
            if value is None and key == "fileUrl":
                continue
            if not isinstance(value, str):
                return False
            try:
                confined_path(self.folder, value)
            except LispmError:
                return False
        return True

    async def notify(self, method: str, params: dict[str, Any]) -> int:
        """Send the notification METHOD to every client; return how many got it.

        `selection_changed` and `at_mentioned` go out only if their
        `filePath` (and `fileUrl`, if given) is in the agent's folder.  A
        client still in its handshake gets it once it settles (counted as
        getting it); the newest selection is also given to every client
        that settles later, so a Claude that connects sees it.
        """
        if not self._notification_allowed(method, params):
            log.debug("IDE %s of agent %s dropped: not in its folder", method, self.agent_name)
            return 0
        frame = orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})
        if method == "selection_changed":
            self._latest_selection = frame
        ready: list[_Client] = []
        held = 0
        for client in self._clients:
            if client.settled:
                ready.append(client)
            else:
                client.hold(method, frame)
                held += 1
        sent = await asyncio.gather(*(client.send(frame) for client in ready))
        return sum(sent) + held

    def _settle(self, client: _Client) -> None:
        client.settling, client.settle_timer = True, None
        if client.held_selection is None:
            client.held_selection = self._latest_selection
        task = asyncio.get_running_loop().create_task(self._flush(client))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    @staticmethod
    async def _flush(client: _Client) -> None:
        """Send what CLIENT holds, in order, then let notifications through."""
        while client.held or client.held_selection is not None:
            frames = client.held
            if client.held_selection is not None:
                frames.append(client.held_selection)
            client.held, client.held_selection = [], None
            for frame in frames:
                if not await client.send(frame):
                    return
        client.settled = True

    # -- the upgrade --------------------------------------------------------

    def _refusal(self, request: web.Request) -> web.Response | None:
        if not _is_local_host(request.headers.get("Host", ""), self.port):
            return web.Response(status=403, text="forbidden host")
        origin = request.headers.get("Origin")
        if origin is not None and not _is_local_origin(origin, self.port):
            return web.Response(status=403, text="forbidden origin")
        given = request.headers.get(AUTH_HEADER, "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, self._expected):
            return web.Response(status=401, text="unauthorized")
        return None

    async def _upgrade(self, request: web.Request) -> web.StreamResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            log.warning("IDE server of agent %s refused a connection: %s",
                        self.agent_name, refusal.text)
            return refusal
        ws: web.WebSocketResponse[Literal[False]] = web.WebSocketResponse(
            protocols=("mcp",), compress=False, max_msg_size=MAX_FRAME, decode_text=False,
            timeout=2.0)
        if not ws.can_prepare(request):
            return web.Response(status=426, text="websocket upgrade required",
                                headers={"Upgrade": "websocket"})
        await ws.prepare(request)
        client = _Client(ws, request.transport)
        self._clients.add(client)
        log.info("IDE client connected to agent %s", self.agent_name)
        self._changed()
        try:
            await self._read(client)
        finally:
            self._clients.discard(client)
            client.cancel_calls()
            log.info("IDE client of agent %s disconnected", self.agent_name)
            self._changed()
        return ws

    async def _read(self, client: _Client) -> None:
        while True:
            msg = await client.ws.receive()
            if msg.type is WSMsgType.TEXT or msg.type is WSMsgType.BINARY:
                await self._on_frame(client, msg.data)
            elif msg.type is WSMsgType.ERROR:
                log.info("IDE client of agent %s sent a bad frame: %s",
                         self.agent_name, type(msg.data).__name__)
                return
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                return

    # -- JSON-RPC -----------------------------------------------------------

    async def _on_frame(self, client: _Client, data: bytes) -> None:
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            await client.send(_frame_error(None, PARSE_ERROR, "Parse error"))
            return
        if not isinstance(message, dict):
            text = "batches are not supported" if isinstance(message, list) else (
                "a message must be a JSON object")
            await client.send(_frame_error(None, INVALID_REQUEST, text))
            return
        method = message.get("method")
        if "id" not in message:
            if isinstance(method, str):
                self._on_notification(client, method, message.get("params"))
            return
        rid = message["id"]
        if not _valid_id(rid):
            await client.send(_frame_error(None, INVALID_REQUEST, "bad id"))
            return
        if method is None and ("result" in message or "error" in message):
            return  # an answer: this server sends no requests
        if not isinstance(method, str) or message.get("jsonrpc") != "2.0":
            await client.send(_frame_error(rid, INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
            return
        params = message.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            await client.send(_frame_error(rid, INVALID_PARAMS, "params must be an object"))
            return
        await self._on_request(client, rid, method, params)

    def _on_notification(self, client: _Client, method: str, params: Any) -> None:
        params = params if isinstance(params, dict) else {}
        if method == "notifications/initialized":
            client.initialized = True
            if not client.listed:
                client.settle_in(self._settle_after_init, self._settle)
        elif method == "ide_connected":
            pid = params.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
                client.pid = pid
                log.info("Claude (pid %d) connected to the IDE server of agent %s",
                         pid, self.agent_name)
                self._changed()
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            task = client.calls.get(rid) if _valid_id(rid) else None
            if task is not None:
                task.cancel()

    async def _on_request(self, client: _Client, rid: str | int, method: str, params: Json) -> None:
        if method == "tools/call":
            await self._start_call(client, rid, params)
            return
        result: Any
        if method == "initialize":
            version = params.get("protocolVersion")
            result = {
                "protocolVersion": version if isinstance(version, str) and version
                else DEFAULT_PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": self.ide_name, "version": __version__},
            }
        elif method == "tools/list":
            client.listed = True
            client.settle_in(self._settle_after_list, self._settle)
            result = _TOOL_LIST
        elif method == "ping":
            result = {}
        elif method == "prompts/list":
            result = {"prompts": []}
        elif method == "resources/list":
            result = {"resources": []}
        elif method == "resources/templates/list":
            result = {"resourceTemplates": []}
        else:
            await client.send(_frame_error(rid, METHOD_NOT_FOUND, "Method not found"))
            return
        await client.send(_frame_result(rid, result))

    async def _start_call(self, client: _Client, rid: str | int, params: Json) -> None:
        name = params.get("name")
        tool = TOOLS.get(name) if isinstance(name, str) else None
        if tool is None:
            await client.send(_frame_error(rid, INVALID_PARAMS, f"Unknown tool: {name}"))
            return
        args = params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(args, dict):
            await client.send(_frame_error(rid, INVALID_PARAMS, "arguments must be an object"))
            return
        if rid in client.calls:
            await client.send(_frame_error(rid, INVALID_REQUEST, "this id is already in use"))
            return
        try:
            clean = tool_arguments(tool, args, self.folder)
            now = self._handler.answer_now(tool.name, clean)
        except Exception as err:
            await client.send(_frame_result(rid, self._failure(tool, err)))
            return
        if now is not None:
            await client.send(self._result_frame(rid, tool, now))
            return
        task = asyncio.create_task(self._call(client, rid, tool, clean))
        client.calls[rid] = task
        task.add_done_callback(lambda _task: client.calls.pop(rid, None))

    async def _call(self, client: _Client, rid: str | int, tool: Tool, args: Json) -> None:
        try:
            content = await self._handler.call(tool.name, args)
        except asyncio.CancelledError:
            return  # cancelled calls get no answer
        except Exception as err:
            await client.send(_frame_result(rid, self._failure(tool, err)))
            return
        await client.send(self._result_frame(rid, tool, content))

    def _failure(self, tool: Tool, err: Exception) -> Json:
        if isinstance(err, LispmError):
            return _tool_error(str(err))
        log.error("IDE tool %s of agent %s failed", tool.name, self.agent_name,
                  exc_info=err)
        return _tool_error(f"{tool.name} failed: internal error")

    def _result_frame(self, rid: str | int, tool: Tool, content: Any) -> bytes:
        if isinstance(content, list) and all(isinstance(item, dict) for item in content):
            try:
                return _frame_result(rid, {"content": content})
            except TypeError:
                pass
        log.error("IDE tool %s of agent %s answered no list of JSON content items",
                  tool.name, self.agent_name)
        return _frame_result(rid, _tool_error(f"{tool.name} failed: internal error"))


__all__ = [
    "AUTH_HEADER",
    "TOOLS",
    "IdeHandler",
    "IdeServer",
    "OutsideFolder",
    "Tool",
    "confined_path",
    "file_uri",
    "tool_arguments",
]

