"""A client of OpenClaw's Gateway WebSocket protocol (v4).

Loadable on its own: no UI, no agent registry, only the wire.

Frames are JSON text: requests `{type:"req", id, method, params}`,
responses `{type:"res", id, ok, payload|error}`, events `{type:"event",
event, payload}`.  The Gateway speaks first, with a `connect.challenge`
event carrying a nonce; the client answers with a `connect` request holding
the shared token and an Ed25519 signature of the nonce by its *device key*
(a loopback device is paired on first use).  The device key is the client's
identity at the Gateway, so it is kept in a file only the user can read.

One request, `agent`, is answered twice under the same id: first
`status:"accepted"` (the Gateway has the message; if a run is going it
holds it until that run ends), then the run's outcome.  `agent` returns
both halves separately for that reason.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ...errors import LispmError
from ...runtime import write_private

log = logging.getLogger(__name__)

PROTOCOL = 4
CLIENT_ID = "cli"
CLIENT_MODE = "cli"
ROLE = "operator"
#: `operator.admin` is needed for `config.patch` and session tool overrides.
SCOPES = ("operator.read", "operator.write", "operator.admin", "operator.approvals")
CONNECT_TIMEOUT = 15.0
REQUEST_TIMEOUT = 30.0
MAX_FRAME = 64 << 20


class GatewayError(LispmError):
    """The OpenClaw Gateway refused a request or could not be reached."""

    code = -32045

    def __init__(self, message: str, gateway_code: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.gateway_code = gateway_code
        self.details = details or {}


class GatewayUnreachable(GatewayError):
    """Nothing listens at the Gateway's address."""


class GatewayNotSent(GatewayError):
    """A request never left: there was no open connection to send it on."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class DeviceIdentity:
    """An Ed25519 key pair: this client's device at the Gateway."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @classmethod
    def load_or_create(cls, path: Path) -> DeviceIdentity:
        """Read the key in PATH, or make one and keep it there (mode 0600)."""
        try:
            pem = path.read_bytes()
        except FileNotFoundError:
            key = Ed25519PrivateKey.generate()
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_private(path, key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()))
            return cls(key)
        loaded = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(loaded, Ed25519PrivateKey):
            raise GatewayError(f"{path} holds no Ed25519 key")
        return cls(loaded)

    @property
    def device_id(self) -> str:
        """The device id: SHA-256 of the raw public key, in hex."""
        return hashlib.sha256(self.public_raw).hexdigest()

    def sign_connect(self, nonce: str, signed_at: int, token: str,
                     platform: str = "linux") -> dict[str, Any]:
        """The `device` field of a connect request answering NONCE."""
        payload = "|".join((
            "v3", self.device_id, CLIENT_ID, CLIENT_MODE, ROLE, ",".join(SCOPES),
            str(signed_at), token, nonce, platform.lower(), ""))
        return {
            "id": self.device_id,
            "publicKey": _b64url(self.public_raw),
            "signature": _b64url(self._key.sign(payload.encode("utf-8"))),
            "signedAt": signed_at,
            "nonce": nonce,
        }


@dataclass
class _Pending:
    """A request waiting for its answer; `agent` waits for two."""

    first: asyncio.Future[dict[str, Any]]
    final: asyncio.Future[dict[str, Any]] | None = None


EventHandler = Callable[[str, dict[str, Any]], None]


class GatewayClient:
    """One authenticated WebSocket connection to a Gateway."""

    def __init__(self, url: str, token: str, identity: DeviceIdentity,
                 user_agent: str = "lispm") -> None:
        self.url = url
        self._token = token
        self._identity = identity
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, _Pending] = {}
        self._handlers: list[EventHandler] = []
        self._closed_callbacks: list[Callable[[], None]] = []
        self.hello: dict[str, Any] = {}

    @property
    def connected(self) -> bool:
        """Whether the connection is open and authenticated."""
        return self._ws is not None and not self._ws.closed and bool(self.hello)

    def on_event(self, handler: EventHandler) -> None:
        """Call HANDLER(event, payload) for every event frame."""
        self._handlers.append(handler)

    def on_closed(self, callback: Callable[[], None]) -> None:
        """Call CALLBACK once the connection is lost or closed."""
        self._closed_callbacks.append(callback)

    # ------------------------------------------------------------- connecting

    async def connect(self) -> dict[str, Any]:
        """Open the connection and authenticate; return the `hello-ok` payload.

        A Gateway still starting answers `UNAVAILABLE` with `retryAfterMs`:
        that is retried until `CONNECT_TIMEOUT`.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_TIMEOUT
        while True:
            try:
                return await asyncio.wait_for(self._connect_once(),
                                              max(0.1, deadline - loop.time()))
            except GatewayError as err:
                await self.close()
                retry = err.details.get("retryAfterMs")
                if err.gateway_code != "UNAVAILABLE" or loop.time() >= deadline:
                    raise
                await asyncio.sleep(min(float(retry or 500) / 1000, 2.0))
            except TimeoutError as err:
                await self.close()
                raise GatewayError(f"no answer from the Gateway at {self.url}") from err
            except (aiohttp.ClientConnectorError, ConnectionRefusedError) as err:
                await self.close()
                raise GatewayUnreachable(
                    f"cannot reach the Gateway at {self.url}: {err}") from err
            except (aiohttp.ClientError, OSError) as err:
                await self.close()
                raise GatewayError(f"the Gateway at {self.url} failed: {err}") from err

    async def _connect_once(self) -> dict[str, Any]:
        self._session = aiohttp.ClientSession()
        ws = await self._session.ws_connect(self.url, max_msg_size=MAX_FRAME, autoping=True)
        self._ws = ws
        challenge = await self._next_frame(ws)
        while challenge.get("event") != "connect.challenge":
            challenge = await self._next_frame(ws)
        payload = challenge.get("payload") or {}
        nonce, signed_at = str(payload.get("nonce", "")), int(payload.get("ts", 0))
        request_id = "connect-" + uuid.uuid4().hex
        await ws.send_bytes(orjson.dumps({
            "type": "req", "id": request_id, "method": "connect",
            "params": {
                "minProtocol": PROTOCOL, "maxProtocol": PROTOCOL,
                "client": {"id": CLIENT_ID, "version": "0.1.0", "platform": "linux",
                           "mode": CLIENT_MODE},
                "role": ROLE, "scopes": list(SCOPES), "caps": ["tool-events"],
                "commands": [], "permissions": {}, "auth": {"token": self._token},
                "locale": "en-US", "userAgent": self._user_agent,
                "device": self._identity.sign_connect(nonce, signed_at, self._token),
            }}), compress=None)
        while True:
            frame = await self._next_frame(ws)
            if frame.get("type") == "res" and frame.get("id") == request_id:
                break
        hello = self._payload(frame)
        self.hello = hello
        self._reader = asyncio.create_task(self._read(ws), name=f"openclaw:{self.url}")
        return hello

    @staticmethod
    async def _next_frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
        message = await ws.receive()
        if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            raise GatewayError(f"the Gateway closed the connection ({message.type.name})")
        frame = orjson.loads(message.data)
        if not isinstance(frame, dict):
            raise GatewayError("the Gateway sent a frame that is not an object")
        return frame

    @staticmethod
    def _payload(frame: dict[str, Any]) -> dict[str, Any]:
        if frame.get("ok"):
            payload = frame.get("payload")
            return payload if isinstance(payload, dict) else {"value": payload}
        error = frame.get("error") or {}
        raise GatewayError(str(error.get("message") or "the Gateway refused"),
                           error.get("code"), error.get("details"))

    async def close(self) -> None:
        """Close the connection; waiting requests fail."""
        reader, self._reader = self._reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        if self._ws is not None:
            await self._ws.close()
            self._ws = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._fail_pending(GatewayError(f"the connection to {self.url} closed"))

    # ---------------------------------------------------------------- reading

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for message in ws:
                if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    break
                try:
                    frame = orjson.loads(message.data)
                except orjson.JSONDecodeError:
                    log.warning("openclaw: a frame that is not JSON: %.200r", message.data)
                    continue
                if isinstance(frame, dict):
                    self._dispatch(frame)
        finally:
            self.hello = {}
            self._fail_pending(GatewayError(f"the connection to {self.url} was lost"))
            for callback in list(self._closed_callbacks):
                callback()

    def _dispatch(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "event":
            payload = frame.get("payload")
            for handler in list(self._handlers):
                try:
                    handler(str(frame.get("event")), payload if isinstance(payload, dict) else {})
                except Exception:
                    log.exception("openclaw event handler failed")
            return
        if kind != "res":
            return
        pending = self._pending.get(str(frame.get("id")))
        if pending is None:
            return
        target = pending.first
        if pending.first.done():
            target = pending.final if pending.final is not None else pending.first
        if pending.final is None or target is pending.final:
            del self._pending[str(frame.get("id"))]
        if target.done():
            return
        try:
            target.set_result(self._payload(frame))
        except GatewayError as err:
            target.set_exception(err)
            if target is pending.first and pending.final is not None:
                pending.final.cancel()
                self._pending.pop(str(frame.get("id")), None)

    def _fail_pending(self, error: GatewayError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            for future in (entry.first, entry.final):
                if future is not None and not future.done():
                    future.set_exception(error)
                    # Nobody may be waiting on a final half any more.
                    future.exception()

    # -------------------------------------------------------------- requests

    async def _send(self, method: str, params: dict[str, Any], pending: _Pending) -> str:
        ws = self._ws
        if ws is None or ws.closed or not self.hello:
            raise GatewayNotSent(f"not connected to the Gateway at {self.url}")
        request_id = uuid.uuid4().hex
        self._pending[request_id] = pending
        try:
            await ws.send_bytes(orjson.dumps(
                {"type": "req", "id": request_id, "method": method, "params": params}),
                compress=None)
        except (aiohttp.ClientError, ConnectionError) as err:
            self._pending.pop(request_id, None)
            raise GatewayNotSent(f"cannot send to the Gateway: {err}") from err
        return request_id

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      ) -> dict[str, Any]:
        """Send METHOD with PARAMS and return the response's payload."""
        loop = asyncio.get_running_loop()
        pending = _Pending(loop.create_future())
        request_id = await self._send(method, params or {}, pending)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.first), REQUEST_TIMEOUT)
        except TimeoutError as err:
            self._pending.pop(request_id, None)
            raise GatewayError(
                f"the Gateway did not answer {method} in {REQUEST_TIMEOUT:g} s") from err

    async def agent(self, params: dict[str, Any],
                    ) -> tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]:
        """Send an `agent` request; return its acceptance and the run's outcome.

        The outcome is a future: it resolves when the run ends, however
        long the Gateway held the message first.
        """
        loop = asyncio.get_running_loop()
        pending = _Pending(loop.create_future(), loop.create_future())
        assert pending.final is not None
        request_id = await self._send("agent", params, pending)
        try:
            accepted = await asyncio.wait_for(asyncio.shield(pending.first), REQUEST_TIMEOUT)
        except TimeoutError as err:
            self._pending.pop(request_id, None)
            pending.final.cancel()
            raise GatewayError(
                f"the Gateway did not accept the message in {REQUEST_TIMEOUT:g} s") from err
        except GatewayError:
            pending.final.cancel()
            raise
        return accepted, pending.final
