"""Hermes: the one-time setup of its config.yaml, the bridge in and outside
LispM (also as real Hermes sees it), and the watcher of its state.db."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from lispm_sidecar.kinds.hermes.watcher import HermesWatcher
from lispm_sidecar.watchers import AgentActivity, Inotify

from .sidecar_client import ROOT, SidecarProcess

HERMES_VENV = Path(os.environ.get("LISPM_HERMES_VENV", ROOT / ".deps" / "hermes-venv"))


def hermes() -> Path:
    """The pinned Hermes, or fail saying how to get it."""
    path = HERMES_VENV / "bin" / "hermes"
    if not os.access(path, os.X_OK):
        raise AssertionError(f"Hermes is not installed at {path}: run `make install`")
    return path


def setup(config: Path, *extra: str) -> tuple[int, str]:
    """Run the setup as `M-x lispm-hermes-setup` does; (exit code, output)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "lispm_sidecar.hermes_setup", "--hermes", str(hermes()),
         "--config", str(config), "--command", "/opt/lispm/python",
         "--pythonpath", "/opt/lispm/src", *extra],
        capture_output=True, text=True, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    return done.returncode, done.stdout + done.stderr


def load_yaml(path: Path) -> Any:
    """Parse PATH with Hermes's own YAML library."""
    import subprocess

    done = subprocess.run(
        [str(HERMES_VENV / "bin" / "python"), "-c",
         "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
         str(path)], capture_output=True, text=True, check=True)
    return orjson.loads(done.stdout)


WANTED = {
    "command": "/opt/lispm/python",
    "args": ["-m", "lispm_sidecar.bridge"],
    "env": {"LISPM_MCP_URL": "${LISPM_MCP_URL}",
            "LISPM_MCP_TOKEN_FILE": "${LISPM_MCP_TOKEN_FILE}",
            "PYTHONPATH": "/opt/lispm/src"},
    "timeout": 3600,
    "connect_timeout": 60,
}


@pytest.mark.cli
def test_setup_adds_only_its_entry_and_is_idempotent(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    # As Hermes re-serialises it: block lists, unquoted ${...}; plus a comment.
    original = ("# my settings\nmodel:\n  provider: custom  # local\n  default: fake-model\n"
                "mcp_servers:\n  other:\n    command: /bin/true\n    args:\n    - a\n"
                "    env:\n      X: ${X}\n")
    config.write_text(original)
    config.chmod(0o640)
    code, output = setup(config)
    assert code == 0, output
    assert "added mcp_servers.lispm" in output
    text = config.read_text()
    assert text.startswith(original)  # nothing before it changed, comments included
    data = load_yaml(config)
    assert data["mcp_servers"]["lispm"] == WANTED
    assert data["mcp_servers"]["other"] == {"command": "/bin/true", "args": ["a"],
                                            "env": {"X": "${X}"}}
    assert data["model"] == {"provider": "custom", "default": "fake-model"}
    assert config.stat().st_mode & 0o777 == 0o640
    # Again: nothing to do, nothing written.
    mtime = config.stat().st_mtime_ns
    code, output = setup(config)
    assert (code, config.stat().st_mtime_ns) == (0, mtime), output
    assert "already has LispM's bridge" in output
    # An old entry is replaced; no mcp_servers at all gets one.
    config.write_text("model: {default: m}\nmcp_servers:\n  lispm: {command: /old}\n")
    code, output = setup(config)
    assert code == 0 and "replaced" in output, output
    assert load_yaml(config)["mcp_servers"] == {"lispm": WANTED}
    config.write_text("model: {default: m}\n")
    assert setup(config)[0] == 0
    assert load_yaml(config) == {"model": {"default": "m"}, "mcp_servers": {"lispm": WANTED}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


@pytest.mark.cli
@pytest.mark.parametrize(("text", "reason"), [
    (None, "does not exist"),
    ("model: [fake\n", "is not valid YAML"),
    ("model:\n  a: 1\n b: 2\n", "is not valid YAML"),
    ("- just\n- a list\n", "does not hold a mapping"),
    ("", "is empty"),
    ("mcp_servers: [a, b]\n", "mcp_servers in"),
])
def test_setup_refuses_a_missing_or_malformed_config(tmp_path: Path, text: str | None,
                                                     reason: str) -> None:
    config = tmp_path / "config.yaml"
    if text is not None:
        config.write_text(text)
    code, output = setup(config)
    assert code == 1, output
    assert reason in output and "nothing was written" in output
    if text is None:
        assert not config.exists()
    else:
        assert config.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ([] if text is None else ["config.yaml"])


def test_setup_without_hermes(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "lispm_sidecar.hermes_setup", "--hermes",
         str(tmp_path / "no-hermes"), "--config", str(tmp_path / "config.yaml")],
        capture_output=True, text=True, check=False,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert done.returncode == 2
    assert "no usable Hermes" in done.stderr


# ------------------------------------------------------------------ bridge

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcp", "version": "0.1.0"}}}


async def bridge(messages: list[dict[str, Any]], env: dict[str, str]) -> tuple[
        int, list[dict[str, Any]], str]:
    """Run the bridge with ENV, send MESSAGES, close stdin; (exit, answers, stderr)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("LISPM_MCP")}
    full.update(env, PYTHONPATH=str(ROOT / "python"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lispm_sidecar.bridge", env=full,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    data = b"".join(orjson.dumps(m) + b"\n" for m in messages)
    out, err = await asyncio.wait_for(proc.communicate(data), 30)
    assert proc.returncode is not None
    return proc.returncode, [orjson.loads(line) for line in out.splitlines()], err.decode()


@pytest.mark.parametrize("env", [
    {"LISPM_MCP_URL": "${LISPM_MCP_URL}", "LISPM_MCP_TOKEN_FILE": "${LISPM_MCP_TOKEN_FILE}"},
    {},
    {"LISPM_MCP_URL": "http://127.0.0.1:9/mcp", "LISPM_MCP_TOKEN_FILE": "/nonexistent/token"},
])
async def test_bridge_outside_lispm_offers_no_tools_quietly(env: dict[str, str]) -> None:
    code, answers, err = await bridge([
        INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "list_agents", "arguments": {}}},
    ], env)
    assert (code, err) == (0, "")
    init, tools, ping, call = answers
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert "outside LispM" in init["result"]["instructions"]
    assert tools == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
    assert ping["result"] == {}
    assert call["result"]["isError"] is True


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": [{"name": "hermes", "kind": "hermes", "folder": "/tmp",
                            "state": "running"},
                           {"name": "claude", "kind": "claude", "folder": "/tmp",
                            "state": "idle"}]}
    raise AssertionError(f"unexpected request {method}")


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[tuple[SidecarProcess, dict[str, Any]]]:
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    launch = await process.call("lispm/agent-start", {"name": "hermes", "kind": "hermes",
                                                      "folder": "/tmp", "instance": 1})
    yield process, launch
    await process.close()


async def test_bridge_forwards_to_the_terminals_server(
        sidecar: tuple[SidecarProcess, dict[str, Any]]) -> None:
    _, launch = sidecar
    env = {"LISPM_MCP_URL": launch["url"], "LISPM_MCP_TOKEN_FILE": launch["token_file"]}
    code, answers, err = await bridge([
        INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "list_agents", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "send_message", "arguments": {"to": "nobody", "text": "x"}}},
    ], env)
    assert (code, err) == (0, "")
    by_id = {a["id"]: a for a in answers}
    assert "LispM" in by_id[1]["result"]["instructions"]
    names = {t["name"] for t in by_id[2]["result"]["tools"]}
    assert {"list_agents", "send_message", "ask_agent", "reply", "search_tools", "skill",
            "call_tool"} <= names
    text = by_id[3]["result"]["content"][0]["text"]
    assert orjson.loads(text)["you"] == "hermes"
    assert by_id[4]["result"]["isError"] is True


async def test_bridge_with_a_wrong_token_says_so(
        sidecar: tuple[SidecarProcess, dict[str, Any]], tmp_path: Path) -> None:
    _, launch = sidecar
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    code, answers, err = await bridge(
        [INIT], {"LISPM_MCP_URL": launch["url"], "LISPM_MCP_TOKEN_FILE": str(wrong)})
    assert code == 0
    assert answers[0]["error"]["message"] == "LispM's server answered HTTP 401"
    assert "401" in err


def _seed_hermes_home(home: Path) -> dict[str, str]:
    (home / ".hermes").mkdir(parents=True)
    (home / ".hermes" / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: fake-model\n"
        "  base_url: http://127.0.0.1:9/v1\n  api_key: sk-fake\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LISPM_MCP", "HERMES"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "python"))
    return env


async def hermes_mcp_test(env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(hermes()), "mcp", "test", "lispm", env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return out.decode()


@pytest.mark.cli
async def test_real_hermes_sees_the_tools_only_inside_lispm(
        sidecar: tuple[SidecarProcess, dict[str, Any]], tmp_path: Path) -> None:
    _, launch = sidecar
    env = _seed_hermes_home(tmp_path / "home")
    code, output = setup(tmp_path / "home" / ".hermes" / "config.yaml", "--command",
                         sys.executable, "--pythonpath", str(ROOT / "python"))
    assert code == 0, output
    inside = await hermes_mcp_test(dict(env, LISPM_MCP_URL=launch["url"],
                                        LISPM_MCP_TOKEN_FILE=launch["token_file"]))
    assert "Connected" in inside and "list_agents" in inside, inside
    outside = await hermes_mcp_test(env)
    assert "Connected" in outside and "list_agents" not in outside, outside


# ----------------------------------------------------------------- watcher

SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, parent_session_id TEXT,
  started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, cwd TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  role TEXT NOT NULL, content TEXT, timestamp REAL NOT NULL, finish_reason TEXT,
  active INTEGER NOT NULL DEFAULT 1);
"""


class FakeHermes:
    """Writes state.db rows the way Hermes 0.19.0 does (WAL, one row at a time)."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(home / "state.db", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def session(self, cwd: Path | None, parent: str | None = None, offset: float = 0) -> str:
        now = time.time() + offset
        sid = time.strftime("%Y%m%d_%H%M%S", time.localtime(now)) + f"_{os.urandom(3).hex()}"
        self.db.execute("INSERT INTO sessions (id, source, parent_session_id, started_at, cwd) "
                        "VALUES (?, 'cli', ?, ?, ?)",
                        (sid, parent, now, str(cwd) if cwd else None))
        return sid

    def message(self, sid: str, role: str, finish: str | None = None) -> None:
        self.db.execute("INSERT INTO messages (session_id, role, timestamp, finish_reason) "
                        "VALUES (?, ?, ?, ?)", (sid, role, time.time(), finish))

    def end(self, sid: str, reason: str) -> None:
        self.db.execute("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
                        (time.time(), reason, sid))


async def until(predicate: Any, what: str, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def read_since(watcher: HermesWatcher, reads: int) -> None:
    """Wait until WATCHER has read its database since it had read it READS times."""
    await until(lambda: watcher.reads > reads and getattr(watcher, "_reading", None) is None,
                "a read of state.db")


async def test_a_locked_database_does_not_stall_the_loop(tmp_path: Path) -> None:
    home, folder = tmp_path / "hermes", tmp_path / "project"
    home.mkdir()
    folder.mkdir()
    locker = sqlite3.connect(home / "state.db", isolation_level=None)  # not WAL: readers wait
    locker.executescript(SCHEMA)
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def probe() -> None:
        while True:
            before = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - before - 0.01)

    with Inotify() as inotify:
        watcher = HermesWatcher(inotify, home, os.getpid(), folder, launched_at=time.time() - 1)
        await watcher.start()
        try:
            locker.execute("BEGIN EXCLUSIVE")
            reads = watcher.reads
            lagging = asyncio.create_task(probe())
            await until(lambda: bool(lags), "the probe")
            started = loop.time()
            watcher._refresh()  # as a write to state.db makes it
            await until(lambda: watcher.reads > reads
                        and getattr(watcher, "_reading", None) is None, "the read", 10)
            took = loop.time() - started
            lagging.cancel()
            locker.execute("ROLLBACK")
        finally:
            await watcher.stop()
            locker.close()
    assert took >= 0.9  # SQLite waited out its busy timeout: the read was held up
    assert max(lags) < 0.1, max(lags)


async def test_watcher_binds_follows_new_and_reads_idle(tmp_path: Path) -> None:
    home, folder, other = tmp_path / "hermes", tmp_path / "project", tmp_path / "elsewhere"
    folder.mkdir()
    other.mkdir()
    with Inotify() as inotify:
        watcher = HermesWatcher(inotify, home, os.getpid(), folder, launched_at=time.time() - 1)
        await watcher.start()
        try:
            assert watcher.activity is AgentActivity.UNKNOWN  # no database yet
            fake = FakeHermes(home)
            # Another folder's Hermes does not bind.
            reads = watcher.reads
            foreign = fake.session(other)
            fake.message(foreign, "user")
            fake.message(foreign, "assistant", "stop")
            await read_since(watcher, reads)
            assert (watcher.session_id, watcher.activity) == (None, AgentActivity.UNKNOWN)
            # The first message of this terminal's session: bound, busy.
            sid = fake.session(folder)
            fake.message(sid, "user")
            await until(lambda: watcher.session_id == sid, "binding")
            await until(lambda: watcher.activity is AgentActivity.BUSY, "busy")
            assert watcher.prompts_seen == 1
            reads = watcher.reads
            fake.message(sid, "assistant", "tool_calls")
            fake.message(sid, "tool")
            await read_since(watcher, reads)
            assert watcher.activity is AgentActivity.BUSY
            fake.message(sid, "assistant", "stop")
            await until(lambda: watcher.activity is AgentActivity.IDLE, "idle")
            # An interrupted answer (NULL finish_reason) is idle too.
            fake.message(sid, "user")
            fake.message(sid, "assistant", None)
            await until(lambda: watcher.prompts_seen == 2 and
                        watcher.activity is AgentActivity.IDLE, "interrupted")
            # /new: the old session ends, and the next one (which real Hermes
            # writes without a cwd, as it ends the old one) binds.
            fake.end(sid, "new_session")
            newer = fake.session(None, offset=0.01)
            await until(lambda: watcher.session_id == newer, "following /new")
            assert watcher.activity is AgentActivity.IDLE  # at its prompt, no message yet
            fake.message(newer, "user")
            await until(lambda: watcher.activity is AgentActivity.BUSY, "busy after /new")
            assert watcher.prompts_seen == 3
            # Compression: a child session takes over.
            child = fake.session(folder, parent=newer, offset=0.02)
            fake.message(child, "assistant", "stop")
            await until(lambda: watcher.session_id == child, "following compression")
            await until(lambda: watcher.activity is AgentActivity.IDLE, "idle child")
        finally:
            await watcher.stop()


async def test_two_terminals_in_one_folder_keep_their_sessions(tmp_path: Path) -> None:
    home, folder = tmp_path / "hermes", tmp_path / "project"
    folder.mkdir()
    fake = FakeHermes(home)
    with Inotify() as inotify:
        first = HermesWatcher(inotify, home, os.getpid(), folder, launched_at=time.time() - 1)
        await first.start()
        one = fake.session(folder)
        fake.message(one, "user")
        await until(lambda: first.session_id == one, "the first binding")
        second = HermesWatcher(inotify, home, os.getpid(), folder, launched_at=time.time())
        await second.start()
        try:
            two = fake.session(folder, offset=1)
            fake.message(two, "user")
            await until(lambda: second.session_id == two, "the second binding")
            fake.message(one, "assistant", "stop")
            await until(lambda: first.activity is AgentActivity.IDLE, "first idle")
            assert (first.session_id, second.activity) == (one, AgentActivity.BUSY)
        finally:
            await first.stop()
            await second.stop()
