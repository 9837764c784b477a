"""The Claude Code IDE server (`ide.py`) and its lock files (`ide_lock.py`).

`jsonrpc-websocket` stands in for Claude Code; raw aiohttp WebSockets and
raw TCP send what Claude never would.  The handler is a dict-backed stand-in
for Emacs and the sidecar's mirror, with diffs the test accepts or rejects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from jsonrpc_base import ProtocolError, TransportError
from jsonrpc_websocket import Server as RpcClient

from lispm_sidecar.errors import InvalidParams, LispmError, ServerStartFailed
from lispm_sidecar.kinds.claude import ide_lock
from lispm_sidecar.kinds.claude.ide import (
    AUTH_HEADER,
    TOOLS,
    IdeServer,
    OutsideFolder,
    confined_path,
    file_uri,
)
from lispm_sidecar.watchers.base import proc_start_time

Content = list[dict[str, Any]]


def text(value: str) -> Content:
    return [{"type": "text", "text": value}]


class DiffHandler:
    """Answers IDE tools from dicts, keeping open diffs as Emacs would."""

    def __init__(self) -> None:
        self.answers: dict[str, Content] = {
            "getOpenEditors": text('{"tabs": []}'),
            "getDiagnostics": text("[]"),
            "getWorkspaceFolders": text('{"success": true, "folders": []}'),
            "getCurrentSelection": text('{"success": false}'),
            "getLatestSelection": text('{"success": false}'),
            "openFile": text("Opened file"),
            "checkDocumentDirty": text('{"success": true, "isDirty": false}'),
            "saveDocument": text('{"success": true, "saved": true}'),
        }
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.diffs: dict[str, asyncio.Future[Content]] = {}
        self.cancelled: list[str] = []
        self.failure: BaseException | None = None
        self.bad_answer: Any = None
        #: Answer from the dicts at once (`answer_now`), or in a task (`call`).
        self.sync = True

    def answer_now(self, tool: str, args: dict[str, Any]) -> Content | None:
        if not self.sync or tool not in self.answers:
            return None
        return self._answer(tool, args)

    async def call(self, tool: str, args: dict[str, Any]) -> Content:
        await asyncio.sleep(0)
        return self._answer(tool, args) if tool in self.answers else await self._diffs(tool, args)

    def _answer(self, tool: str, args: dict[str, Any]) -> Content:
        self.calls.append((tool, args))
        if self.failure is not None:
            raise self.failure
        if self.bad_answer is not None:
            bad: Content = self.bad_answer
            return bad
        return self.answers[tool]

    async def _diffs(self, tool: str, args: dict[str, Any]) -> Content:
        self.calls.append((tool, args))
        if self.failure is not None:
            raise self.failure
        if self.bad_answer is not None:
            bad: Content = self.bad_answer
            return bad
        if tool == "openDiff":
            return await self._open_diff(args)
        if tool == "close_tab":
            self._close(args["tab_name"])
            return text("TAB_CLOSED")
        names = list(self.diffs)
        for name in names:
            self._close(name)
        return text(f"CLOSED_{len(names)}_DIFF_TABS")

    async def _open_diff(self, args: dict[str, Any]) -> Content:
        future: asyncio.Future[Content] = asyncio.get_running_loop().create_future()
        self.diffs[args["tab_name"]] = future
        try:
            return await future
        except asyncio.CancelledError:
            self.cancelled.append(args["tab_name"])
            raise
        finally:
            self.diffs.pop(args["tab_name"], None)

    def _close(self, name: str) -> None:
        future = self.diffs.pop(name, None)
        if future is not None and not future.done():
            future.set_result(text("DIFF_REJECTED"))

    async def wait_diff(self, name: str) -> asyncio.Future[Content]:
        for _ in range(500):
            if name in self.diffs:
                return self.diffs[name]
            await asyncio.sleep(0.01)
        raise AssertionError(f"no diff {name} opened")

    async def accept(self, name: str, contents: str) -> None:
        (await self.wait_diff(name)).set_result(text("FILE_SAVED") + text(contents))

    async def reject(self, name: str) -> None:
        (await self.wait_diff(name)).set_result(text("DIFF_REJECTED"))


# ---------------------------------------------------------------------------
# Fixtures and clients


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    (path / "a.txt").write_text("alpha\n")
    (path / "sub").mkdir()
    (path / "sub" / "b.txt").write_text("beta\n")
    return Path(os.path.realpath(path))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the project whose name starts like it: `proj-evil`."""
    path = tmp_path / "proj-evil"
    path.mkdir()
    (path / "secret.txt").write_text("secret\n")
    return Path(os.path.realpath(path))


class Ide:
    """A running server with its handler and token."""

    def __init__(self, server: IdeServer, handler: DiffHandler, token: str) -> None:
        self.server = server
        self.handler = handler
        self.token = token
        self.changes = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.server.port}/"


@pytest.fixture
async def ide(folder: Path) -> AsyncIterator[Ide]:
    handler = DiffHandler()
    token = secrets.token_urlsafe(32)
    holder: list[Ide] = []

    def changed(_server: IdeServer) -> None:
        holder[0].changes += 1

    server = IdeServer("claude", folder, token, handler, on_change=changed,
                       settle_after_list=0.01, settle_after_init=0.3)
    holder.append(Ide(server, handler, token))
    await server.start()
    yield holder[0]
    await server.stop()


@contextlib.asynccontextmanager
async def claude(ide: Ide, pid: int = 4242, token: str | None = None,
                 **handlers: Callable[..., None]) -> AsyncIterator[RpcClient]:
    """A client that connects and shakes hands as Claude Code 2.1.197 does.

    HANDLERS (such as `selection_changed`) are in place before it connects.
    """
    client = RpcClient(ide.url, timeout=10)
    for method, handler in handlers.items():
        setattr(client, method, handler)
    await client.ws_connect(headers={AUTH_HEADER: token or ide.token}, protocols=("mcp",))
    try:
        answer = await client.initialize(
            protocolVersion="2025-11-25", capabilities={"roots": {}, "elicitation": {}},
            clientInfo={"name": "claude-code", "version": "2.1.197"})
        assert answer["protocolVersion"] == "2025-11-25"
        await getattr(client, "notifications/initialized")(_notification=True)
        await client.ide_connected(pid=pid, _notification=True)
        assert len((await getattr(client, "tools/list")())["tools"]) == 11
        await until(lambda: any(c["pid"] == pid and c["settled"] for c in ide.server.clients()),
                    "the handshake to settle")
        yield client
    finally:
        await client.close()


async def call(client: RpcClient, tool: str, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = await getattr(client, "tools/call")(name=tool, arguments=arguments)
    return result


def texts(result: dict[str, Any]) -> list[str]:
    return [item["text"] for item in result["content"]]


@contextlib.asynccontextmanager
async def raw_ws(ide: Ide) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(ide.url, headers={AUTH_HEADER: ide.token}, protocols=("mcp",)) as ws,
    ):
        yield ws


async def answer_to(ws: aiohttp.ClientWebSocketResponse, frame: str | bytes) -> Any:
    if isinstance(frame, bytes):
        await ws.send_bytes(frame)
    else:
        await ws.send_str(frame)
    msg = await ws.receive(timeout=5)
    assert msg.type is aiohttp.WSMsgType.TEXT, msg
    return orjson.loads(msg.data)


async def until(predicate: Callable[[], bool], what: str, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def status_of(ide: Ide, headers: dict[str, str], websocket: bool = True) -> int:
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} if websocket else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{ide.server.port}/", headers={**upgrade, **headers}) as r,
    ):
        return r.status


# ---------------------------------------------------------------------------
# confined_path


def test_confined_path_accepts_paths_inside(folder: Path) -> None:
    assert confined_path(folder, "a.txt") == folder / "a.txt"
    assert confined_path(folder, str(folder / "sub" / "b.txt")) == folder / "sub" / "b.txt"
    assert confined_path(folder, str(folder)) == folder
    assert confined_path(folder, ".") == folder
    assert confined_path(folder, "sub/../a.txt") == folder / "a.txt"
    assert confined_path(folder, "new/dir/file.py") == folder / "new" / "dir" / "file.py"


@pytest.mark.parametrize("path", [
    "../x", "sub/../../x", "/etc/passwd", "/", "..", "sub/../..",
    "nonexistent/../../x", "a.txt/../../x",
])
def test_confined_path_refuses_traversal(folder: Path, path: str) -> None:
    with pytest.raises(OutsideFolder):
        confined_path(folder, path)


def test_confined_path_refuses_prefix_tricks(folder: Path, outside: Path) -> None:
    assert str(outside).startswith(str(folder))
    for path in (str(outside / "secret.txt"), str(outside), "../proj-evil/secret.txt",
                 file_uri(outside / "secret.txt")):
        with pytest.raises(OutsideFolder):
            confined_path(folder, path)


def test_confined_path_follows_symlinks(folder: Path, outside: Path) -> None:
    (folder / "escape").symlink_to(outside)
    (folder / "escape-file").symlink_to(outside / "secret.txt")
    (folder / "evil-sibling").symlink_to(outside)
    (folder / "inner").symlink_to(folder / "sub")
    (folder / "sub" / "up").symlink_to("..")
    (folder / "sub" / "upup").symlink_to("../..")
    for path in ("escape/secret.txt", "escape", "escape-file", str(folder / "escape-file"),
                 "evil-sibling/new.txt", "sub/upup/proj-evil/secret.txt", "sub/upup"):
        with pytest.raises(OutsideFolder):
            confined_path(folder, path)
    assert confined_path(folder, "inner/b.txt") == folder / "sub" / "b.txt"
    assert confined_path(folder, "sub/up/a.txt") == folder / "a.txt"


def test_confined_path_resolves_a_symlinked_folder(folder: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-proj"
    link.symlink_to(folder)
    assert confined_path(link, "a.txt") == folder / "a.txt"
    assert confined_path(folder, str(link / "a.txt")) == folder / "a.txt"
    with pytest.raises(OutsideFolder):
        confined_path(link, str(link / ".." / "proj-evil"))


def test_confined_path_reads_file_uris(folder: Path, outside: Path) -> None:
    (folder / "with space.txt").write_text("x")
    assert confined_path(folder, f"file://{folder}/a.txt") == folder / "a.txt"
    assert confined_path(folder, f"FILE://localhost{folder}/a.txt") == folder / "a.txt"
    assert confined_path(folder, file_uri(folder / "with space.txt")) == folder / "with space.txt"
    assert confined_path(folder, f"file:{folder}/a.txt") == folder / "a.txt"
    for uri in (f"file://{folder}/%2e%2e/proj-evil/secret.txt",
                f"file://{folder}/../proj-evil/secret.txt",
                "file:///etc/passwd", f"file://{outside}/secret.txt"):
        with pytest.raises(OutsideFolder):
            confined_path(folder, uri)
    for uri in (f"file://evil.example{folder}/a.txt", "file:a.txt", f"file://{folder}/a%00.txt",
                f"file://{folder}/%ff.txt"):
        with pytest.raises(InvalidParams) as caught:
            confined_path(folder, uri)
        assert not isinstance(caught.value, OutsideFolder)


def test_confined_path_refuses_other_schemes_nul_and_empty(folder: Path) -> None:
    for path in ("http://example.com/a.txt", "vscode://file/a.txt", "", "a\x00b"):
        with pytest.raises(InvalidParams):
            confined_path(folder, path)
    # A colon in a plain file name is fine.
    assert confined_path(folder, "notes:v2.txt") == folder / "notes:v2.txt"


def test_confined_path_expands_home(
    folder: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(folder.parent))
    assert confined_path(folder, "~/proj/a.txt") == folder / "a.txt"
    with pytest.raises(OutsideFolder):
        confined_path(folder, "~/proj-evil/secret.txt")
    with pytest.raises(OutsideFolder):
        confined_path(folder, "~")


def test_file_uri_encodes_as_node_does() -> None:
    # As `url.pathToFileURL` in Node 20 encodes them.
    assert file_uri("/p/a b#c?d%e.txt") == "file:///p/a%20b%23c%3Fd%25e.txt"
    assert file_uri("/p/x:y@z+(1),[2]~_.-!$&';=^|.py") == (
        "file:///p/x:y@z+(1),%5B2%5D%7E_.-!$&';=%5E%7C.py")
    assert file_uri("/p/é\t\"<>`{}\\") == "file:///p/%C3%A9%09%22%3C%3E%60%7B%7D%5C"


def test_confined_path_with_the_root_as_folder() -> None:
    assert confined_path(Path("/"), "/etc/passwd") == Path("/etc/passwd")


# ---------------------------------------------------------------------------
# Lock files


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_claude_config_dir(tmp_path: Path) -> None:
    assert ide_lock.claude_config_dir(tmp_path, {}) == tmp_path / ".claude"
    assert ide_lock.claude_config_dir(tmp_path, {"CLAUDE_CONFIG_DIR": ""}) == tmp_path / ".claude"
    assert ide_lock.claude_config_dir(
        tmp_path, {"CLAUDE_CONFIG_DIR": "/x/conf"}) == Path("/x/conf")


def test_write_lock_creates_private_dir_and_file(tmp_path: Path) -> None:
    config = tmp_path / "home" / ".claude"
    old = os.umask(0)
    try:
        path = ide_lock.write_lock(config, 18082, os.getpid(), ["/p"], "tok-1", "LispM (claude)")
    finally:
        os.umask(old)
    assert path == config / "ide" / "18082.lock"
    assert stat.S_IMODE(os.stat(config / "ide").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lock = orjson.loads(path.read_bytes())
    assert lock == {
        "pid": os.getpid(), "workspaceFolders": ["/p"], "ideName": "LispM (claude)",
        "transport": "ws", "runningInWindows": False, "authToken": "tok-1",
        "lispm": True, "lispmPidStart": proc_start_time(os.getpid()),
    }
    assert isinstance(lock["lispmPidStart"], int)
    assert os.listdir(config / "ide") == ["18082.lock"]


def test_write_lock_narrows_a_wider_dir_and_the_file_is_private(tmp_path: Path) -> None:
    (tmp_path / "ide").mkdir(mode=0o755)
    os.chmod(tmp_path / "ide", 0o755)
    old = os.umask(0)
    try:
        path = ide_lock.write_lock(tmp_path, 5000, 1, ["/p"], "tok", "LispM")
        again = ide_lock.write_lock(tmp_path, 5000, 1, ["/q"], "tok2", "LispM")
    finally:
        os.umask(old)
    assert path == again
    assert stat.S_IMODE(os.stat(tmp_path / "ide").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert orjson.loads(path.read_bytes())["authToken"] == "tok2"


def test_write_lock_replaces_a_symlink_without_following_it(tmp_path: Path) -> None:
    (tmp_path / "ide").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "ide" / "6000.lock").symlink_to(victim)
    path = ide_lock.write_lock(tmp_path, 6000, 1, ["/p"], "tok", "LispM")
    assert victim.read_text() == "keep me"
    assert not path.is_symlink()
    assert orjson.loads(path.read_bytes())["authToken"] == "tok"


def test_write_lock_refuses_foreign_names_and_bad_ports(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ide_lock.write_lock(tmp_path, 7000, 1, [], "tok", "VS Code")
    with pytest.raises(ValueError):
        ide_lock.write_lock(tmp_path, 0, 1, [], "tok", "LispM")
    assert not (tmp_path / "ide" / "7000.lock").exists()


def write_foreign(config: Path, port: int, lock: dict[str, Any] | bytes) -> Path:
    (config / "ide").mkdir(parents=True, exist_ok=True)
    path = config / "ide" / f"{port}.lock"
    path.write_bytes(lock if isinstance(lock, bytes) else orjson.dumps(lock))
    return path


def test_remove_lock_removes_only_lispm_locks(tmp_path: Path) -> None:
    ours = ide_lock.write_lock(tmp_path, 8000, os.getpid(), ["/p"], "tok", "LispM")
    assert ide_lock.remove_lock(tmp_path, 8000) is True
    assert not ours.exists()
    assert ide_lock.remove_lock(tmp_path, 8000) is False
    theirs = write_foreign(tmp_path, 8000, {"pid": 1, "ideName": "VS Code", "transport": "ws"})
    assert ide_lock.remove_lock(tmp_path, 8000) is False
    assert theirs.exists()


def test_clean_stale_locks_removes_only_dead_lispm_locks(tmp_path: Path) -> None:
    dead = dead_pid()
    stale = ide_lock.write_lock(tmp_path, 9001, dead, ["/p"], "t", "LispM (claude)")
    live = ide_lock.write_lock(tmp_path, 9002, os.getpid(), ["/p"], "t", "LispM (claude-2)")
    reused = ide_lock.write_lock(tmp_path, 9003, os.getpid(), ["/p"], "t", "LispM")
    lock = orjson.loads(reused.read_bytes())
    reused.write_bytes(orjson.dumps(dict(lock, lispmPidStart=lock["lispmPidStart"] - 1)))
    foreign = [
        write_foreign(tmp_path, 9010, {"pid": dead, "ideName": "VS Code", "transport": "ws"}),
        write_foreign(tmp_path, 9011, {"pid": dead, "ideName": "LispM", "transport": "ws"}),
        write_foreign(tmp_path, 9012, {"pid": dead, "ideName": "Neovim", "lispm": True}),
        write_foreign(tmp_path, 9013, b"/some/folder\n/other\n"),
        write_foreign(tmp_path, 9014, b"[1, 2]"),
    ]
    target = tmp_path / "target.lock"
    target.write_bytes(orjson.dumps({"pid": dead, "ideName": "LispM", "lispm": True}))
    (tmp_path / "ide" / "9015.lock").symlink_to(target)
    removed = ide_lock.clean_stale_locks(tmp_path)
    assert sorted(removed) == sorted([stale, reused])
    assert live.exists() and target.exists() and (tmp_path / "ide" / "9015.lock").is_symlink()
    assert all(path.exists() for path in foreign)


def test_clean_stale_locks_of_closed_agents_of_a_live_emacs(tmp_path: Path) -> None:
    emacs = os.getpid()
    live = ide_lock.write_lock(tmp_path, 9101, emacs, ["/p"], "t", "LispM (claude)")
    closed = ide_lock.write_lock(tmp_path, 9102, emacs, ["/p"], "t", "LispM (claude-2)")
    other_emacs = ide_lock.write_lock(tmp_path, 9103, os.getppid(), ["/p"], "t", "LispM")
    theirs = write_foreign(tmp_path, 9104, {"pid": emacs, "ideName": "VS Code"})
    assert ide_lock.clean_stale_locks(tmp_path, owner_pid=emacs, live_ports={9101}) == [closed]
    assert live.exists() and other_emacs.exists() and theirs.exists()


def test_scanned_config_dirs(tmp_path: Path) -> None:
    assert ide_lock.scanned_config_dirs(tmp_path, {}) == [tmp_path / ".claude"]
    assert ide_lock.scanned_config_dirs(tmp_path, {"CLAUDE_CONFIG_DIR": "/c"}) == [
        Path("/c"), tmp_path / ".claude"]


def test_clean_stale_locks_without_a_dir(tmp_path: Path) -> None:
    assert ide_lock.clean_stale_locks(tmp_path / "none") == []


# ---------------------------------------------------------------------------
# Handshake and protocol


async def test_handshake_as_claude_does_it(ide: Ide) -> None:
    assert not ide.server.connected
    async with claude(ide, pid=31337) as client:
        await until(lambda: ide.server.claude_pids == [31337], "ide_connected")
        assert ide.server.connected
        listed = await getattr(client, "tools/list")()
        tools = {tool["name"]: tool for tool in listed["tools"]}
        assert sorted(tools) == sorted([
            "openFile", "openDiff", "getCurrentSelection", "getLatestSelection",
            "getOpenEditors", "getWorkspaceFolders", "getDiagnostics", "checkDocumentDirty",
            "saveDocument", "close_tab", "closeAllDiffTabs"])
        for tool in tools.values():
            assert tool["inputSchema"]["type"] == "object"
            assert tool["description"]
        assert tools["openDiff"]["inputSchema"]["required"] == [
            "old_file_path", "new_file_path", "new_file_contents", "tab_name"]
        assert await client.ping() == {}
        assert await getattr(client, "prompts/list")() == {"prompts": []}
        assert await getattr(client, "resources/list")() == {"resources": []}
        assert await getattr(client, "resources/templates/list")() == {"resourceTemplates": []}
        with pytest.raises(ProtocolError) as caught:
            await getattr(client, "sampling/createMessage")()
        assert caught.value.args[0] == -32601
    await until(lambda: not ide.server.connected, "the disconnect")
    assert ide.server.claude_pids == []
    assert ide.changes >= 3  # connect, ide_connected, disconnect


async def test_initialize_answer(ide: Ide) -> None:
    async with raw_ws(ide) as ws:
        answer = await answer_to(ws, orjson.dumps({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}}}).decode())
        assert answer == {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "LispM", "version": answer["result"]["serverInfo"]["version"]},
        }}
        assert ws.protocol == "mcp"


@pytest.mark.parametrize("sync", [True, False])
async def test_tool_calls_reach_the_handler(ide: Ide, folder: Path, sync: bool) -> None:
    ide.handler.sync = sync
    async with claude(ide) as client:
        assert texts(await call(client, "getOpenEditors")) == ['{"tabs": []}']
        assert texts(await call(client, "getDiagnostics")) == ["[]"]
        result = await call(client, "getDiagnostics", uri=file_uri(folder / "a.txt"))
        assert result == {"content": text("[]")}
        await call(client, "openFile", filePath="sub/b.txt", preview=False, startText="",
                   endText="", selectToEndOfLine=False, makeFrontmost=False)
    assert ide.handler.calls == [
        ("getOpenEditors", {}),
        ("getDiagnostics", {}),
        ("getDiagnostics", {"uri": file_uri(folder / "a.txt")}),
        ("openFile", {"filePath": str(folder / "sub" / "b.txt"), "preview": False,
                      "startText": "", "endText": "", "selectToEndOfLine": False,
                      "makeFrontmost": False}),
    ]


@pytest.mark.parametrize("sync", [True, False])
async def test_refusals_become_tool_errors(ide: Ide, folder: Path, sync: bool) -> None:
    ide.handler.sync = sync
    async with claude(ide) as client:
        ide.handler.failure = LispmError("Document not open: x")
        assert await call(client, "saveDocument", filePath="a.txt") == {
            "content": text("Document not open: x"), "isError": True}
        ide.handler.failure = RuntimeError("boom with details")
        result = await call(client, "getOpenEditors")
        assert result == {"content": text("getOpenEditors failed: internal error"),
                          "isError": True}
        ide.handler.failure = None
        ide.handler.bad_answer = "not a list"
        assert (await call(client, "getOpenEditors"))["isError"] is True
        ide.handler.bad_answer = [{"type": "text", "text": object()}]
        assert (await call(client, "getOpenEditors"))["isError"] is True
        ide.handler.bad_answer = None
        ide.handler.failure = LispmError("Diff refused")
        refused = await call(client, "openDiff", **diff_args(folder, "refused"))
        assert refused == {"content": text("Diff refused"), "isError": True}
        ide.handler.failure = None
        # The connection is still fine.
        assert texts(await call(client, "getDiagnostics")) == ["[]"]


async def test_bad_arguments(ide: Ide) -> None:
    async with claude(ide) as client:
        with pytest.raises(ProtocolError) as caught:
            await call(client, "executeCode", code="1")
        assert caught.value.args[0] == -32602
        with pytest.raises(ProtocolError) as caught:
            await getattr(client, "tools/call")(name="getDiagnostics", arguments=[1])
        assert caught.value.args[0] == -32602
        with pytest.raises(ProtocolError) as caught:
            await getattr(client, "tools/call")(arguments={})
        assert caught.value.args[0] == -32602
        missing = await call(client, "openDiff", old_file_path="a.txt")
        assert missing["isError"] is True
        assert "missing argument new_file_path" in texts(missing)[0]
        wrong = await call(client, "openFile", filePath="a.txt", preview="yes")
        assert wrong["isError"] is True and "preview must be a boolean" in texts(wrong)[0]
        assert (await call(client, "checkDocumentDirty", filePath=7))["isError"] is True
    assert ide.handler.calls == []


# Each tool with its path arguments, and the rest of a valid call.
PATH_CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("openFile", "filePath", {}),
    ("openDiff", "old_file_path",
     {"new_file_path": "a.txt", "new_file_contents": "x", "tab_name": "t"}),
    ("openDiff", "new_file_path",
     {"old_file_path": "a.txt", "new_file_contents": "x", "tab_name": "t"}),
    ("getDiagnostics", "uri", {}),
    ("checkDocumentDirty", "filePath", {}),
    ("saveDocument", "filePath", {}),
]


def test_every_path_argument_is_covered() -> None:
    declared = {(tool.name, arg) for tool in TOOLS.values() for arg in tool.paths}
    assert declared == {(tool, arg) for tool, arg, _ in PATH_CALLS}


async def test_every_path_tool_is_confined(ide: Ide, folder: Path, outside: Path) -> None:
    (folder / "escape").symlink_to(outside)
    (folder / "escape-file").symlink_to(outside / "secret.txt")
    bad = ["../proj-evil/secret.txt", str(outside / "secret.txt"), "/etc/passwd",
           "sub/../../proj-evil/secret.txt", "escape/secret.txt", "escape-file",
           file_uri(outside / "secret.txt"), f"file://{folder}/%2e%2e/proj-evil/secret.txt",
           "file://evil.example/etc/passwd", "~root/.ssh/id_rsa", "http://example.com/"]
    async with claude(ide) as client:
        for tool, arg, rest in PATH_CALLS:
            for path in bad:
                result = await call(client, tool, **{arg: path, **rest})
                assert result["isError"] is True, (tool, arg, path)
        assert ide.handler.calls == []
        # Inside paths reach the handler resolved.
        for tool, arg, rest in PATH_CALLS:
            if tool == "openDiff":
                continue
            await call(client, tool, **{arg: "sub/../a.txt", **rest})
    expected_a = str(folder / "a.txt")
    seen = [args[arg] for (_, args), (_, arg, _) in
            zip(ide.handler.calls, [c for c in PATH_CALLS if c[0] != "openDiff"], strict=True)]
    assert seen == [expected_a, file_uri(expected_a), expected_a, expected_a]


async def test_tools_without_paths_get_only_their_arguments(ide: Ide) -> None:
    sneaky = {"filePath": "/etc/passwd", "uri": "file:///etc/passwd", "path": "../x"}
    async with claude(ide) as client:
        for name in ("getCurrentSelection", "getLatestSelection", "getOpenEditors",
                     "getWorkspaceFolders", "closeAllDiffTabs"):
            assert "isError" not in await call(client, name, **sneaky)
        await call(client, "close_tab", tab_name="t", **sneaky)
    assert [args for _, args in ide.handler.calls] == [{}] * 5 + [{"tab_name": "t"}]


# ---------------------------------------------------------------------------
# Diffs


def diff_args(folder: Path, name: str, contents: str = "new\n") -> dict[str, Any]:
    path = str(folder / "a.txt")
    return {"old_file_path": path, "new_file_path": path, "new_file_contents": contents,
            "tab_name": name}


async def test_accept_and_reject(ide: Ide, folder: Path) -> None:
    async with claude(ide) as client:
        first = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "d1")))
        await ide.handler.accept("d1", "new, edited by the user\n")
        assert texts(await first) == ["FILE_SAVED", "new, edited by the user\n"]
        assert texts(await call(client, "close_tab", tab_name="d1")) == ["TAB_CLOSED"]
        second = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "d2")))
        await ide.handler.reject("d2")
        assert texts(await second) == ["DIFF_REJECTED"]


@pytest.mark.parametrize("sync", [True, False])
async def test_a_pending_diff_blocks_nothing(ide: Ide, folder: Path, sync: bool) -> None:
    ide.handler.sync = sync
    async with claude(ide) as client, claude(ide, pid=2) as other:
        pending = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "slow")))
        await ide.handler.wait_diff("slow")
        start = time.perf_counter()
        answers = await asyncio.gather(
            *(call(client, "getOpenEditors") for _ in range(20)),
            *(call(other, "getDiagnostics") for _ in range(20)),
            client.ping())
        assert time.perf_counter() - start < 2
        assert len(answers) == 41 and not pending.done()
        # A second diff at the same time, answered first.
        other_diff = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "fast")))
        await ide.handler.reject("fast")
        assert texts(await other_diff) == ["DIFF_REJECTED"]
        assert not pending.done()
        closed = await call(client, "closeAllDiffTabs")
        assert texts(closed) == ["CLOSED_1_DIFF_TABS"]
        assert texts(await pending) == ["DIFF_REJECTED"]


async def test_cancelled_diff_is_cancelled_in_the_handler(ide: Ide, folder: Path) -> None:
    async with raw_ws(ide) as ws:
        await ws.send_str(orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                        "params": {"name": "openDiff",
                                                   "arguments": diff_args(folder, "c")}}).decode())
        await ide.handler.wait_diff("c")
        await ws.send_str(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": 7}}).decode())
        await until(lambda: ide.handler.cancelled == ["c"], "the cancellation")
        # No answer for the cancelled call; the next request is answered.
        answer = await answer_to(ws, '{"jsonrpc":"2.0","id":8,"method":"ping"}')
        assert answer == {"jsonrpc": "2.0", "id": 8, "result": {}}


async def test_disconnect_and_stop_cancel_pending_diffs(ide: Ide, folder: Path) -> None:
    async with claude(ide) as client:
        lost = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "gone")))
        await ide.handler.wait_diff("gone")
    await until(lambda: ide.handler.cancelled == ["gone"], "the cancellation on disconnect")
    with pytest.raises(TransportError):
        await lost
    client = RpcClient(ide.url, timeout=10)
    await client.ws_connect(headers={AUTH_HEADER: ide.token})
    try:
        waiting = asyncio.create_task(call(client, "openDiff", **diff_args(folder, "stop")))
        await ide.handler.wait_diff("stop")
        await asyncio.wait_for(ide.server.stop(), 5)
        assert ide.handler.cancelled == ["gone", "stop"]
        with pytest.raises(TransportError):
            await waiting
    finally:
        await client.close()


async def test_duplicate_request_ids_are_refused(ide: Ide, folder: Path) -> None:
    frame = orjson.dumps({"jsonrpc": "2.0", "id": "x", "method": "tools/call",
                          "params": {"name": "openDiff", "arguments": diff_args(folder, "dup")}})
    async with raw_ws(ide) as ws:
        await ws.send_bytes(frame)
        await ide.handler.wait_diff("dup")
        answer = await answer_to(ws, frame.decode())
        assert answer["id"] == "x" and answer["error"]["code"] == -32600
        await ide.handler.accept("dup", "x")
        msg = await ws.receive(timeout=5)
        assert orjson.loads(msg.data)["result"]["content"][0]["text"] == "FILE_SAVED"


# ---------------------------------------------------------------------------
# Notifications


async def test_notifications_reach_clients_past_the_handshake(ide: Ide, folder: Path) -> None:
    received: list[dict[str, Any]] = []
    mentions: list[dict[str, Any]] = []
    selection = {"text": "alpha", "filePath": str(folder / "a.txt"),
                 "fileUrl": file_uri(folder / "a.txt"),
                 "selection": {"start": {"line": 0, "character": 0},
                               "end": {"line": 0, "character": 5}, "isEmpty": False}}
    async with raw_ws(ide) as early:
        async with claude(ide) as client:
            client.selection_changed = lambda **params: received.append(params)
            client.at_mentioned = lambda **params: mentions.append(params)
            # The raw client never shakes hands: they are held for it, forever.
            assert await ide.server.notify("selection_changed", selection) == 2
            mention = {"filePath": str(folder / "a.txt"), "lineStart": 0, "lineEnd": 1}
            assert await ide.server.notify("at_mentioned", mention) == 2
            await until(lambda: len(received) == 1 and len(mentions) == 1, "notifications")
            assert received == [selection] and mentions == [mention]
        with pytest.raises(asyncio.TimeoutError):
            await early.receive(timeout=0.2)


async def test_notifications_outside_the_folder_are_dropped(
    ide: Ide, folder: Path, outside: Path
) -> None:
    received: list[dict[str, Any]] = []
    (folder / "escape").symlink_to(outside)
    async with claude(ide) as client:
        client.selection_changed = lambda **params: received.append(params)
        for params in (
            {"filePath": str(outside / "secret.txt"), "text": "secret"},
            {"filePath": str(folder / "escape" / "secret.txt"), "text": "secret"},
            {"filePath": str(folder / "a.txt"), "fileUrl": file_uri(outside / "secret.txt")},
            {"text": "from *scratch*"},
        ):
            assert await ide.server.notify("selection_changed", params) == 0
        assert await ide.server.notify("selection_changed", {"filePath": "a.txt"}) == 1
        await until(lambda: len(received) == 1, "the one allowed selection")
        assert received == [{"filePath": "a.txt"}]
        # Only allowed selections are kept for clients that come later.
        await ide.server.notify("selection_changed", {"filePath": str(outside / "secret.txt")})
        later: list[dict[str, Any]] = []
        async with claude(ide, pid=2,
                          selection_changed=lambda **params: later.append(params)):
            await until(lambda: len(later) == 1, "the replayed selection")
        assert later == [{"filePath": "a.txt"}]


def frame(method: str, rid: int | None = None, **params: Any) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        message["id"] = rid
    return orjson.dumps(message).decode()


async def test_notifications_wait_for_the_handshake_to_settle(ide: Ide, folder: Path) -> None:
    """Claude ignores a selection sent at once after tools/list: they are held."""
    ide.server._settle_after_list = 0.3
    async with raw_ws(ide) as ws:
        await answer_to(ws, frame("initialize", 0, protocolVersion="2025-11-25"))
        await ws.send_str(frame("notifications/initialized"))
        first = {"filePath": "a.txt", "text": "old"}
        mention = {"filePath": "sub/b.txt", "lineStart": 0, "lineEnd": 0}
        newest = {"filePath": "a.txt", "text": "new"}
        assert await ide.server.notify("selection_changed", first) == 1
        assert await ide.server.notify("at_mentioned", mention) == 1
        listed = await answer_to(ws, frame("tools/list", 1))
        assert len(listed["result"]["tools"]) == 11
        listed_at = time.monotonic()
        assert await ide.server.notify("selection_changed", newest) == 1
        with pytest.raises(asyncio.TimeoutError):
            await ws.receive(timeout=0.15)
        got = [orjson.loads((await ws.receive(timeout=5)).data) for _ in range(2)]
        assert time.monotonic() - listed_at >= 0.29
        assert [(m["method"], m["params"]) for m in got] == [
            ("at_mentioned", mention), ("selection_changed", newest)]
        assert ide.server.clients()[0]["settled"]
        # Settled: at once.
        assert await ide.server.notify("selection_changed", first) == 1
        assert orjson.loads((await ws.receive(timeout=1)).data)["params"] == first


async def test_a_client_that_never_lists_tools_settles_later(ide: Ide) -> None:
    async with raw_ws(ide) as ws:
        await ws.send_str(frame("notifications/initialized"))
        start = time.monotonic()
        assert await ide.server.notify("selection_changed", {"filePath": "a.txt"}) == 1
        got = orjson.loads((await ws.receive(timeout=5)).data)
        assert got["params"] == {"filePath": "a.txt"}
        assert time.monotonic() - start >= 0.25  # settle_after_init is 0.3 s here


# ---------------------------------------------------------------------------
# Access


async def test_the_upgrade_needs_the_token(ide: Ide, folder: Path) -> None:
    assert await status_of(ide, {}) == 401
    assert await status_of(ide, {AUTH_HEADER: ide.token + "x"}) == 401
    assert await status_of(ide, {AUTH_HEADER: ide.token[:-1]}) == 401
    assert await status_of(ide, {"Authorization": f"Bearer {ide.token}"}) == 401
    assert await status_of(ide, {AUTH_HEADER.lower(): ide.token}) == 101
    assert await status_of(ide, {AUTH_HEADER: ide.token}, websocket=False) == 426
    other = IdeServer("codex", folder, secrets.token_urlsafe(32), DiffHandler())
    await other.start()
    try:
        other_token = other._expected.decode()
        assert await status_of(ide, {AUTH_HEADER: other_token}) == 401
    finally:
        await other.stop()
    client = RpcClient(ide.url)
    with pytest.raises(TransportError):
        await client.ws_connect(headers={AUTH_HEADER: "wrong"})
    await client.close()
    assert not ide.server.connected and ide.handler.calls == []


async def test_non_local_host_or_origin_is_forbidden(ide: Ide) -> None:
    port = ide.server.port
    good = {AUTH_HEADER: ide.token}
    assert await status_of(ide, {**good, "Host": "evil.example"}) == 403
    assert await status_of(ide, {**good, "Host": f"evil.example:{port}"}) == 403
    assert await status_of(ide, {**good, "Host": f"127.0.0.1:{port + 1}"}) == 403
    assert await status_of(ide, {**good, "Origin": "https://evil.example"}) == 403
    assert await status_of(ide, {**good, "Origin": "http://127.0.0.1.evil.example"}) == 403
    assert await status_of(ide, {**good, "Origin": "null"}) == 403
    assert await status_of(ide, {**good, "Host": f"localhost:{port}"}) == 101
    assert await status_of(ide, {**good, "Origin": f"http://127.0.0.1:{port}"}) == 101


async def test_no_token_in_any_log(ide: Ide, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = secrets.token_urlsafe(32)
    assert await status_of(ide, {AUTH_HEADER: wrong}) == 401
    async with claude(ide) as client:
        await call(client, "getOpenEditors")
        await call(client, "saveDocument", filePath="../x")
        await ide.server.notify("selection_changed", {"filePath": "a.txt"})
    async with raw_ws(ide) as ws:
        await answer_to(ws, b"\xff not json")
    await ide.server.stop()
    logged = caplog.text + "".join(
        repr(record.args) + repr(record.__dict__) for record in caplog.records)
    assert "IDE server of agent claude refused a connection" in caplog.text
    assert "IDE client connected to agent claude" in caplog.text
    assert ide.token not in logged
    assert wrong not in logged


# ---------------------------------------------------------------------------
# Bad input


async def test_malformed_json_rpc_gets_errors_and_the_socket_stays(ide: Ide) -> None:
    cases: list[tuple[str | bytes, Any, int]] = [
        ("not json", None, -32700),
        (b"\xff\xfe binary garbage", None, -32700),
        ('{"jsonrpc":"2.0","id":1,"method":"ping"', None, -32700),
        ("[]", None, -32600),
        ('[{"jsonrpc":"2.0","id":1,"method":"ping"}]', None, -32600),
        ("42", None, -32600),
        ('"ping"', None, -32600),
        ("null", None, -32600),
        ('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', None, -32600),
        ('{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600),
        ('{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
        ('{"jsonrpc":"2.0","id":2}', 2, -32600),
        ('{"jsonrpc":"2.0","id":3,"method":7}', 3, -32600),
        ('{"jsonrpc":"1.0","id":4,"method":"ping"}', 4, -32600),
        ('{"jsonrpc":"2.0","id":5,"method":"ping","params":[1]}', 5, -32602),
        ('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}', 6, -32602),
        ('{"jsonrpc":"2.0","id":99999999999999999999999,"method":"ping"}', None, -32600),
    ]
    async with raw_ws(ide) as ws:
        for frame, rid, code in cases:
            answer = await answer_to(ws, frame)
            assert answer["id"] == rid and answer["error"]["code"] == code, (frame, answer)
        # Notifications and answers are never answered, even odd ones.
        for frame in ('{"jsonrpc":"2.0","method":"unknown/notification"}',
                      '{"jsonrpc":"2.0","method":"ide_connected","params":{"pid":"x"}}',
                      '{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}',
                      '{"jsonrpc":"2.0","id":"r1","result":{}}'):
            await ws.send_str(frame)
        assert await answer_to(ws, b'{"jsonrpc":"2.0","id":"b","method":"ping"}') == {
            "jsonrpc": "2.0", "id": "b", "result": {}}
    assert ide.server.claude_pids == []


def masked(opcode_byte: int, payload: bytes, length_byte: int | None = None) -> bytes:
    key = b"\x01\x02\x03\x04"
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([opcode_byte, 0x80 | (len(payload) if length_byte is None else length_byte)]) + (
        key + body)


async def raw_frame(ide: Ide, frame: bytes) -> bytes:
    """Upgrade over raw TCP, send FRAME, return what the server sends back first."""
    reader, writer = await asyncio.open_connection("127.0.0.1", ide.server.port)
    try:
        writer.write(
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{ide.server.port}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\n{AUTH_HEADER}: {ide.token}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 "), head
        writer.write(frame)
        return await asyncio.wait_for(reader.read(100), 5)
    finally:
        writer.close()


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.mark.parametrize(("name", "frame", "close_code"), [
    ("reserved bits", masked(0xF1, PING), 1002),
    ("unknown opcode", masked(0x83, PING), 1002),
    ("fragmented ping", masked(0x09, b""), 1002),
    ("continuation first", masked(0x80, PING), 1002),
    ("64-bit length", bytes([0x81, 0xFF]) + (2**62).to_bytes(8, "big") + b"\x01\x02\x03\x04",
     1009),
])
async def test_malformed_frames_close_only_that_socket(
    ide: Ide, name: str, frame: bytes, close_code: int
) -> None:
    async with claude(ide) as bystander:
        answer = await raw_frame(ide, frame)
        assert answer[:2] == b"\x88\x02", (name, answer)
        assert int.from_bytes(answer[2:4], "big") == close_code
        assert await bystander.ping() == {}
    pong = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert await raw_frame(ide, masked(0x81, PING)) == b"\x81" + bytes([len(pong)]) + pong


async def test_garbage_http_leaves_the_server_up(ide: Ide) -> None:
    for garbage in (b"\x00\x01\x02\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: \x01\x02\r\n\r\n"):
        reader, writer = await asyncio.open_connection("127.0.0.1", ide.server.port)
        writer.write(garbage)
        await asyncio.wait_for(reader.read(1000), 5)
        writer.close()
    async with claude(ide) as client:
        assert await client.ping() == {}


# ---------------------------------------------------------------------------
# Life cycle


async def test_restart_on_the_same_port_with_the_same_token(folder: Path) -> None:
    token = secrets.token_urlsafe(32)
    first = IdeServer("claude", folder, token, DiffHandler())
    port = await first.start()
    ide = Ide(first, DiffHandler(), token)
    async with claude(ide) as client:
        await call(client, "getOpenEditors")
        await first.stop()
    second = IdeServer("claude", folder, token, DiffHandler())
    assert await second.start(port) == port
    try:
        ide = Ide(second, DiffHandler(), token)
        async with claude(ide) as client:
            assert texts(await call(client, "getOpenEditors")) == ['{"tabs": []}']
        with pytest.raises(ServerStartFailed):
            await IdeServer("claude", folder, token, DiffHandler()).start(port)
    finally:
        await second.stop()


async def test_stop_twice_and_an_empty_token(folder: Path) -> None:
    server = IdeServer("claude", folder, "tok", DiffHandler())
    await server.start()
    await server.stop()
    await server.stop()
    with pytest.raises(ValueError):
        IdeServer("claude", folder, "", DiffHandler())


# ---------------------------------------------------------------------------
# The real Claude Code
#
# `python -m tests.python.test_ide smoke WORK` runs inside a loopback-only
# network namespace: the scripted gateway and an IdeServer in one loop, the
# real Claude Code in a private tmux, a lock file in a private HOME and
# CLAUDE_CODE_SSE_PORT in Claude's environment.  It prints what it saw as
# one JSON line; `test_real_claude_code_uses_the_ide` checks it.

SMOKE_SCRIPT: list[dict[str, Any]] = [
    {"match": "edit hello", "steps": [
        {"tool": "Read", "args": {"file_path": "{project}/hello.txt"}},
        {"tool": "Edit", "args": {"file_path": "{project}/hello.txt",
                                  "old_string": "first", "new_string": "FIRST"}},
        {"say": "edited it"}]},
    {"match": "reject this", "steps": [
        {"tool": "Edit", "args": {"file_path": "{project}/hello.txt",
                                  "old_string": "second", "new_string": "SECOND"}},
        {"say": "went on after the rejection"}]},
    {"match": "", "steps": [{"say": "a scripted hello"}]},
]


class SmokeHandler:
    """The handler Claude talks to in the smoke test: a mirror plus diffs it accepts."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def answer_now(self, tool: str, args: dict[str, Any]) -> Content | None:
        self.calls.append([tool, args])
        if tool == "getDiagnostics":
            return text("[]")
        if tool == "close_tab":
            return text("TAB_CLOSED")
        if tool == "closeAllDiffTabs":
            return text("CLOSED_0_DIFF_TABS")
        if tool == "openDiff":
            return None
        return text('{"success": false, "message": "not in the smoke test"}')

    async def call(self, tool: str, args: dict[str, Any]) -> Content:
        await asyncio.sleep(0.5)  # the user reads the diff, then decides
        if "SECOND" in args["new_file_contents"]:
            return text("DIFF_REJECTED")
        # Accepted after the user edited the proposal in the diff.
        return text("FILE_SAVED") + text(args["new_file_contents"] + "added by the user\n")


class SmokeTmux:
    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.socket = str(work / "tmux.sock")
        self.env = env

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "tmux", "-S", self.socket, "-f", "/dev/null", *args, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"tmux {args[0]}: {err.decode()}")
        return out.decode()

    async def paste(self, line: str) -> None:
        await self.run("send-keys", "-t", "main", "-l", line)
        await asyncio.sleep(0.4)
        await self.run("send-keys", "-t", "main", "Enter")

    async def wait_screen(self, needle: str, seconds: float = 30) -> str:
        deadline = time.monotonic() + seconds
        while True:
            screen = await self.run("capture-pane", "-p", "-t", "main")
            if needle in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not on the screen:\n{screen}")
            await asyncio.sleep(0.1)


def _smoke_script(project: Path) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = orjson.loads(
        orjson.dumps(SMOKE_SCRIPT).replace(b"{project}", str(project).encode()))
    return script


async def _within(seconds: float, what: str, predicate: Callable[[], bool]) -> None:
    await until(predicate, what, seconds)


async def smoke(work: Path) -> dict[str, Any]:
    """Drive the real Claude Code against an IdeServer; return what was seen."""
    from lispm_sidecar.testing.gateway import Gateway
    from lispm_sidecar.testing.sandbox import seed_home
    from tests.e2e.harness import require_cli

    project = work / "proj"
    project.mkdir()
    project = Path(os.path.realpath(project))
    (project / "hello.txt").write_text("first\nsecond\n")
    home = work / "home"
    seen: dict[str, Any] = {}
    async with Gateway(_smoke_script(project), log_path=work / "gateway.jsonl") as gateway:
        env = seed_home(home, gateway.url, [project])
        handler = SmokeHandler()
        token = secrets.token_urlsafe(32)
        server = IdeServer("claude", project, token, handler, ide_name="LispM (claude)")
        port = await server.start()
        lock = ide_lock.write_lock(ide_lock.claude_config_dir(home, env), port, os.getpid(),
                                   [str(project)], token, "LispM (claude)")
        env.update(TERM="xterm-256color", CLAUDE_CODE_SSE_PORT=str(port))
        tmux = SmokeTmux(work, env)
        try:
            pane = await tmux.run(
                "new-session", "-d", "-x", "160", "-y", "45", "-s", "main", "-c", str(project),
                "-P", "-F", "#{pane_pid}", "--", str(require_cli("claude")))
            seen["pane_pid"] = int(pane.strip())
            await _within(30, "ide_connected", lambda: bool(server.claude_pids))
            await _within(10, "tools/list", lambda: any(c["listed"] for c in server.clients()))
            seen["claude_pids"] = server.claude_pids
            # At once: the server holds it until Claude is ready for it.
            seen["selection_sent"] = await server.notify("selection_changed", {
                "text": "second", "filePath": str(project / "hello.txt"),
                "fileUrl": file_uri(project / "hello.txt"),
                "selection": {"start": {"line": 1, "character": 0},
                              "end": {"line": 1, "character": 6}, "isEmpty": False}})
            await tmux.wait_screen("❯")
            await asyncio.sleep(0.5)
            await tmux.paste("say hi")
            first = await asyncio.wait_for(gateway.wait_for(lambda e: e["kind"] == "main"), 30)
            seen["tools_offered"] = first["tools"]
            seen["selection_in_request"] = b"The user selected the lines 2 to 2" in orjson.dumps(
                await gateway.body(first["n"]))
            await tmux.wait_screen("a scripted hello")
            await tmux.paste("edit hello please")
            await asyncio.wait_for(gateway.wait_for(
                lambda e: e["kind"] == "main" and e["answer"].get("text") == "edited it"), 60)
            await tmux.wait_screen("edited it")
            seen["file_after"] = (project / "hello.txt").read_text()
            await tmux.paste("reject this edit")
            await _within(30, "the second diff", lambda: sum(
                call[0] == "openDiff" for call in handler.calls) == 2)
            await tmux.wait_screen("User rejected update to hello.txt")
            await asyncio.sleep(1.5)  # time enough for a model request, if one came
            seen["file_after_reject"] = (project / "hello.txt").read_text()
            seen["answers"] = [e["answer"].get("text") for e in gateway.main_requests()]
            seen["at_mentioned_sent"] = await server.notify("at_mentioned", {
                "filePath": str(project / "hello.txt"), "lineStart": 0, "lineEnd": 1})
            await tmux.wait_screen("@hello.txt#L1-2")
            seen["at_mentioned_on_screen"] = True
        except AssertionError as err:
            seen["error"] = str(err)
        finally:
            seen["ide_calls"] = handler.calls
            with contextlib.suppress(AssertionError):
                await tmux.run("kill-server")
            await server.stop()
            seen["lock_removed"] = ide_lock.remove_lock(ide_lock.claude_config_dir(home, env),
                                                        port)
            seen["lock_path"] = str(lock)
    return seen


@pytest.mark.cli
def test_real_claude_code_uses_the_ide(tmp_path: Path) -> None:
    from tests.conftest import ROOT, offline
    from tests.e2e.harness import require_cli, require_namespaces

    require_namespaces()
    require_cli("claude")
    done = subprocess.run(
        offline([sys.executable, "-m", "tests.python.test_ide", "smoke", str(tmp_path)]),
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
        env=dict(os.environ, PYTHONPATH=f"{ROOT / 'python'}:{ROOT}"))
    assert done.returncode == 0, done.stdout + done.stderr
    seen = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen["error"]
    assert seen["claude_pids"] == [seen["pane_pid"]]
    assert "mcp__ide__getDiagnostics" in seen["tools_offered"], seen["tools_offered"]
    assert seen["selection_sent"] == 1 and seen["selection_in_request"], seen
    called = [tool for tool, _ in seen["ide_calls"]]
    assert "closeAllDiffTabs" in called and "getDiagnostics" in called, called
    diffs = [args for tool, args in seen["ide_calls"] if tool == "openDiff"]
    project = os.path.realpath(tmp_path / "proj")
    assert [(d["old_file_path"], d["new_file_path"], d["new_file_contents"]) for d in diffs] == [
        (f"{project}/hello.txt", f"{project}/hello.txt", "FIRST\nsecond\n"),
        (f"{project}/hello.txt", f"{project}/hello.txt", "FIRST\nSECOND\nadded by the user\n")]
    assert "close_tab" in called
    # Claude writes what FILE_SAVED carries: the contents as the user left them.
    assert seen["file_after"] == "FIRST\nsecond\nadded by the user\n"
    # Rejected: the file stays, and the turn ends without asking the model again.
    assert seen["file_after_reject"] == "FIRST\nsecond\nadded by the user\n"
    assert "edited it" in seen["answers"]
    assert "went on after the rejection" not in seen["answers"]
    assert seen["at_mentioned_sent"] == 1 and seen["at_mentioned_on_screen"]
    assert seen["lock_removed"] is True


if __name__ == "__main__" and sys.argv[1:2] == ["smoke"]:
    print(orjson.dumps(asyncio.run(smoke(Path(sys.argv[2])))).decode())
