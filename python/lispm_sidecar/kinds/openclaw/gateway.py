"""OpenClaw sessions: agents that live in an OpenClaw Gateway.

OpenClaw keeps its conversations in its Gateway; LispM's terminal only
shows one (`openclaw tui --session KEY`).  For an agent of kind `openclaw`
the sidecar holds one WebSocket per Gateway (`wire.py`) and:

- finds the Gateway from OpenClaw's own config (`~/.openclaw/openclaw.json`,
  or `$OPENCLAW_CONFIG_PATH`, `$OPENCLAW_STATE_DIR`): `gateway.mode:
  "remote"` names a remote Gateway (`gateway.remote.url`, `.token`);
  otherwise the Gateway is local, on `gateway.port` (18789), with
  `gateway.auth.token`.  If no local Gateway answers, LispM starts one
  (`openclaw gateway run`, loopback only) and stops it with the sidecar.
  With no token configured, that Gateway's token is LispM's own, kept in
  a file only the user can read;
- makes the agent's session, `agent:main:lispm-NAME`;
- on a local Gateway, adds the agent's MCP server to the Gateway's config
  as `mcp.servers.lispm_<emacs pid>_<name>` (the stdio bridge, pointed at
  the agent's own server), switched off globally and on for this session
  alone through the session's tool overrides; it is removed again when
  the agent stops.  Both are hot changes: the Gateway does not restart.
  LispM's config changes go one at a time, and when its last session
  there closes the user's file is given back as it was
  (`config.py`);
- hands messages over while the session is idle, with the Gateway's
  `agent` request (`GatewayHandover`), which runs a message as a turn of
  its own, after any run that starts meanwhile: it never steers into a
  running turn (`chat.send` would, by default);
- follows the session's state from the Gateway's events (`watcher.py`).

A remote Gateway cannot reach this machine's MCP servers, so its session
gets no tools.  It still takes part: it gets messages, and its final reply
to a request is recorded as the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...errors import InvalidParams, LispmError, NotNow
from ...ledger import Message
from ...runtime import new_token, pid_alive, python_launcher, write_private
from . import config as oc_config
from .wire import (
    DeviceIdentity,
    GatewayClient,
    GatewayError,
    GatewayNotSent,
    GatewayUnreachable,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 18789
AGENT_ID = "main"
GATEWAY_START_TIMEOUT = 90.0
#: Tries of one change to the Gateway's config that another writer made stale.
CONFIG_CHANGE_ATTEMPTS = 5
CONFIG_CHANGE_TIMEOUT = 60.0
#: How long the Gateway may take to notice a config file LispM wrote itself.
CONFIG_RELOAD_TIMEOUT = 10.0
_ENV_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def session_key(name: str) -> str:
    """The Gateway session of LispM agent NAME."""
    return f"agent:{AGENT_ID}:lispm-{name}"


def server_name(owner_pid: int, name: str) -> str:
    """The Gateway's name for agent NAME's MCP server (tools are `<it>__<tool>`)."""
    return f"lispm_{owner_pid}_" + re.sub(r"[^a-z0-9]+", "_", name.lower())


def state_dir(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """LispM's lasting private state: `$XDG_STATE_HOME/lispm` (mode 0700)."""
    env = os.environ if environ is None else environ
    base = Path(env.get("XDG_STATE_HOME") or Path(env.get("HOME") or Path.home())
                / ".local" / "state")
    path = base / "lispm"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Install:
    """Where OpenClaw is: its executable, and the PATH it runs with (Node ≥ 24)."""

    program: str
    path: str

    @classmethod
    def from_params(cls, params: Any) -> Install:
        """Read `{program, path}` as Emacs sends them."""
        if not isinstance(params, dict) or not isinstance(params.get("program"), str):
            raise InvalidParams("an openclaw agent needs `openclaw: {program, path}`")
        path = params.get("path")
        return cls(params["program"], path if isinstance(path, str) else os.environ.get("PATH", ""))

    def env(self, **extra: str) -> dict[str, str]:
        """The environment OpenClaw's commands run with."""
        return dict(os.environ, PATH=self.path, OPENCLAW_NO_RESPAWN="1", **extra)


@dataclass(frozen=True)
class Target:
    """The Gateway to use, as OpenClaw's config names it."""

    url: str
    token: str
    remote: bool
    port: int | None = None
    #: LispM's own token file, when the config sets no token.
    token_file: Path | None = None


# ------------------------------------------------------------------ config

def config_file(environ: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """OpenClaw's config file, by its own rules."""
    env = os.environ if environ is None else environ
    if explicit := env.get("OPENCLAW_CONFIG_PATH"):
        return Path(explicit)
    if state := env.get("OPENCLAW_STATE_DIR"):
        return Path(state) / "openclaw.json"
    home = Path(env.get("OPENCLAW_HOME") or env.get("HOME") or Path.home())
    return home / ".openclaw" / "openclaw.json"


async def read_config(install: Install, path: Path) -> dict[str, Any]:
    """Read OpenClaw's JSON5 config PATH; {} if there is none.

    The Gateway rewrites the file as strict JSON, so that is tried first;
    JSON5 is read by OpenClaw's own `json5` package, through its Node.
    """
    try:
        data = await asyncio.to_thread(path.read_bytes)
    except FileNotFoundError:
        return {}
    try:
        config = orjson.loads(data)
    except orjson.JSONDecodeError:
        config = await _json5(install, data, path)
    if not isinstance(config, dict):
        raise LispmError(f"{path} does not hold an object")
    return config


async def _json5(install: Install, data: bytes, path: Path) -> Any:
    package = await asyncio.to_thread(lambda: Path(os.path.realpath(install.program)).parent)
    script = ("const p=require(require.resolve('json5',{paths:[process.argv[1]]}));"
              "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>"
              "process.stdout.write(JSON.stringify(p.parse(s))));")
    process = await asyncio.create_subprocess_exec(
        "node", "-e", script, str(package), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=install.env())
    out, err = await process.communicate(data)
    if process.returncode != 0:
        raise LispmError(f"cannot read {path}: {err.decode(errors='replace').strip()[-300:]}")
    return orjson.loads(out)


def _secret(value: Any, what: str) -> str | None:
    """A token from the config: a string, or `${VAR}` from the environment."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise LispmError(f"{what} is a secret reference, which LispM cannot read; "
                         "set it as a string or as ${VARIABLE}")
    if match := _ENV_REFERENCE.match(value):
        return os.environ.get(match.group(1))
    return value


def target_from_config(config: dict[str, Any], own_token: Callable[[], tuple[str, Path]],
                       ) -> Target:
    """The Gateway CONFIG names; OWN_TOKEN gives LispM's token if it names none."""
    gateway = config.get("gateway") if isinstance(config.get("gateway"), dict) else {}
    assert isinstance(gateway, dict)
    if gateway.get("mode") == "remote":
        remote = gateway.get("remote") if isinstance(gateway.get("remote"), dict) else {}
        assert isinstance(remote, dict)
        url = remote.get("url")
        if not isinstance(url, str) or not url:
            raise LispmError("gateway.mode is \"remote\" but gateway.remote.url is not set")
        token = _secret(remote.get("token"), "gateway.remote.token")
        if not token:
            raise LispmError("gateway.remote.token is not set: LispM needs it to connect")
        return Target(url, token, remote=True)
    port = gateway.get("port") if isinstance(gateway.get("port"), int) else DEFAULT_PORT
    auth = gateway.get("auth") if isinstance(gateway.get("auth"), dict) else {}
    assert isinstance(auth, dict) and isinstance(port, int)
    if auth.get("mode") not in (None, "token"):
        raise LispmError(f"the Gateway's auth mode is {auth.get('mode')!r}; LispM speaks "
                         "token auth only (gateway.auth.mode: \"token\")")
    token = _secret(auth.get("token"), "gateway.auth.token") or os.environ.get(
        "OPENCLAW_GATEWAY_TOKEN")
    if token:
        return Target(f"ws://127.0.0.1:{port}", token, remote=False, port=port)
    token, path = own_token()
    return Target(f"ws://127.0.0.1:{port}", token, remote=False, port=port, token_file=path)


# ---------------------------------------------------------------- the service

SessionListener = Callable[[str, dict[str, Any]], None]


class OpenClaw:
    """The sidecar's link to the OpenClaw Gateway, shared by every session."""

    def __init__(self, root: Path, owner_pid: int,
                 environ: dict[str, str] | os._Environ[str] | None = None) -> None:
        self._root = root
        self._owner_pid = owner_pid
        self._environ = os.environ if environ is None else environ
        self._install: Install | None = None
        self._target: Target | None = None
        self._client: GatewayClient | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        #: LispM's own changes to the Gateway's config, one at a time.
        self._config_lock: asyncio.Lock = asyncio.Lock()
        #: Set by the Gateway's `config.changed` event, which says its hash.
        self._config_changed = asyncio.Event()
        self._config_hash: str | None = None
        #: The Gateway this sidecar started, or adopted from a sidecar that died.
        self._managed: asyncio.subprocess.Process | None = None
        self._managed_pid: int | None = None
        self._listeners: dict[str, list[SessionListener]] = {}
        self._reconnect: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def target(self) -> Target | None:
        """The Gateway in use, once connected."""
        return self._target

    # ----------------------------------------------------------- connection

    def _own_token(self) -> tuple[str, Path]:
        path = state_dir(self._environ) / "openclaw-gateway-token"
        try:
            token = path.read_text().strip()
        except FileNotFoundError:
            token = ""
        if not token:
            token = new_token()
            write_private(path, token.encode() + b"\n")  # `read` wants a whole line
        return token, path

    async def client(self, install: Install | None = None) -> GatewayClient:
        """The connected Gateway client; connect (and start a Gateway) if need be."""
        async with self._connecting:
            if install is not None:
                self._install = install
            if self._client is not None:
                if self._client.connected:
                    return self._client
                await self._client.close()
                self._client = None
            if self._install is None:
                raise GatewayError("no OpenClaw agent has started yet")
            return await self._connect(self._install)

    async def _connect(self, install: Install) -> GatewayClient:
        config = await read_config(install, config_file(self._environ))
        target = await asyncio.to_thread(target_from_config, config, self._own_token)
        identity = await asyncio.to_thread(
            DeviceIdentity.load_or_create, state_dir(self._environ) / "openclaw-device.pem")
        client = GatewayClient(target.url, target.token, identity,
                               user_agent="lispm-sidecar")
        try:
            await client.connect()
            if not target.remote and self._managed_pid is None:
                await asyncio.to_thread(self._adopt, target)
        except GatewayUnreachable:
            if target.remote:
                raise
            if self._managed is None or self._managed.returncode is not None:
                await self._start_gateway(install, target, config)
            client = await self._connect_started(target, identity)
        client.on_event(self._event)
        client.on_closed(self._lost)
        self._client, self._target = client, target
        await client.request("sessions.subscribe", {})
        if not target.remote:
            await self._sweep_servers(client)
        log.info("openclaw: connected to %s (%s)", target.url,
                 "remote" if target.remote else "local")
        return client

    async def _start_gateway(self, install: Install, target: Target,
                             config: dict[str, Any]) -> None:
        """Start a local Gateway, loopback only, for as long as the sidecar runs."""
        gateway = config.get("gateway") if isinstance(config.get("gateway"), dict) else {}
        command = [install.program, "gateway", "run", "--port", str(target.port),
                   "--bind", "loopback", "--auth", "token"]
        if not isinstance(gateway, dict) or gateway.get("mode") != "local":
            command.append("--allow-unconfigured")
        log_path = self._root / "openclaw-gateway.log"
        log_file = await asyncio.to_thread(open, log_path, "ab")
        try:
            self._managed = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                env=install.env(OPENCLAW_GATEWAY_TOKEN=target.token),
                start_new_session=True)
        finally:
            log_file.close()
        self._managed_pid = self._managed.pid
        _record_gateway(self._pid_file(), self._managed.pid, target.port)
        log.info("openclaw: started a Gateway on port %s (pid %d, log %s)", target.port,
                 self._managed.pid, log_path)

    def _pid_file(self) -> Path:
        return state_dir(self._environ) / "openclaw-gateway.pid"

    def _adopt(self, target: Target) -> None:
        """Take over the Gateway a sidecar that died had started, to stop it in turn."""
        pid = _orphaned_gateway(self._pid_file(), target.port)
        if pid is not None:
            self._managed_pid = pid
            _record_gateway(self._pid_file(), pid, target.port)
            log.info("openclaw: adopted the Gateway (pid %d) of a sidecar that died", pid)

    async def _connect_started(self, target: Target, identity: DeviceIdentity) -> GatewayClient:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATEWAY_START_TIMEOUT
        while True:
            client = GatewayClient(target.url, target.token, identity, user_agent="lispm-sidecar")
            try:
                await client.connect()
                return client
            except GatewayError as err:
                starting = isinstance(err, GatewayUnreachable) or err.gateway_code == "UNAVAILABLE"
                if not starting:
                    raise
                managed = self._managed
                if managed is not None and managed.returncode is not None:
                    raise GatewayError(
                        f"the OpenClaw Gateway exited with status {managed.returncode}; see "
                        f"{self._root / 'openclaw-gateway.log'}") from err
                if loop.time() > deadline:
                    raise GatewayError(f"the OpenClaw Gateway did not start in "
                                       f"{GATEWAY_START_TIMEOUT:g} s: {err}") from err
                await asyncio.sleep(0.25)

    def _lost(self) -> None:
        if self._closing:
            return
        log.warning("openclaw: the connection to the Gateway was lost")
        for key, listeners in self._listeners.items():
            for listener in list(listeners):
                listener("lost", {"sessionKey": key})
        if self._listeners and (self._reconnect is None or self._reconnect.done()):
            self._reconnect = asyncio.create_task(self._reconnect_loop(), name="openclaw-reconnect")

    async def _reconnect_loop(self) -> None:
        delay = 1.0
        while self._listeners and not self._closing:
            await asyncio.sleep(delay)
            try:
                await self.client()
            except LispmError as err:
                log.info("openclaw: reconnecting: %s", err)
                delay = min(delay * 2, 30.0)
                continue
            for key, listeners in self._listeners.items():
                for listener in list(listeners):
                    listener("reconnected", {"sessionKey": key})
            return

    def _event(self, event: str, payload: dict[str, Any]) -> None:
        if event == "config.changed":
            hash_ = payload.get("hash")
            self._config_hash = hash_ if isinstance(hash_, str) else None
            self._config_changed.set()
            return
        key = payload.get("sessionKey")
        if not isinstance(key, str):
            return
        for listener in list(self._listeners.get(key, ())):
            listener(event, payload)

    def listen(self, key: str, listener: SessionListener) -> None:
        """Call LISTENER(event, payload) for the events of session KEY."""
        self._listeners.setdefault(key, []).append(listener)

    def unlisten(self, key: str, listener: SessionListener) -> None:
        """Stop calling LISTENER."""
        listeners = self._listeners.get(key, [])
        if listener in listeners:
            listeners.remove(listener)
        if not listeners:
            self._listeners.pop(key, None)

    async def close(self) -> None:
        """Close the connection, and stop the Gateway if LispM started it."""
        self._closing = True
        if self._reconnect is not None:
            self._reconnect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnect
        if self._client is not None:
            await self._client.close()
            self._client = None
        managed, self._managed = self._managed, None
        pid, self._managed_pid = self._managed_pid, None
        if pid is not None:
            await _stop_process_group(pid, managed)
            with contextlib.suppress(FileNotFoundError):
                self._pid_file().unlink()
        self._closing = False

    # -------------------------------------------------------------- sessions

    async def open_session(self, install: Install, name: str, bridge: dict[str, Any] | None,
                           ) -> str:
        """Make agent NAME's session; with BRIDGE (an MCP server entry), give
        it that server, for this session only.  Return the session key."""
        client = await self.client(install)
        key = session_key(name)
        overrides: dict[str, Any] = {}
        if bridge is not None and self._target is not None and not self._target.remote:
            server = server_name(self._owner_pid, name)
            async with self._config_lock:
                await self._add_server(client, server, dict(bridge, enabled=False))
            overrides = {"mcpServers": {server: True}}
        params: dict[str, Any] = {"key": key, "label": f"LispM {name}"}
        await client.request("sessions.create", params)
        # The overlay is replaced whole: a session LispM made before loses
        # the servers of earlier runs.
        await client.request("sessions.patch", {"key": key, "toolOverrides": overrides})
        return key

    async def close_session(self, name: str) -> None:
        """Take agent NAME's MCP server out of the Gateway's config; after
        LispM's last session there, give the user's config back as it was."""
        client = self._client
        if client is None or not client.connected or self._target is None or self._target.remote:
            return
        server = server_name(self._owner_pid, name)
        try:
            with contextlib.suppress(GatewayError):
                await client.request("sessions.patch", {"key": session_key(name),
                                                        "toolOverrides": {}})
            async with self._config_lock:
                await self._release(client, [server])
        except (GatewayError, OSError) as err:
            log.warning("openclaw: cannot remove %s: %s", server, err)

    # ------------------------------------------------------ the Gateway's config
    #
    # LispM's own changes to the config go one at a time (`_config_lock`),
    # and each is planned on a fresh `config.get`: OpenClaw refuses a patch
    # whose base is not the file as it is now.

    def _record_path(self, current: dict[str, Any]) -> tuple[str, Path]:
        """The config file the Gateway reads (CURRENT is its `config.get`), and
        LispM's record of it."""
        path = current.get("path")
        config_path = path if isinstance(path, str) and path else str(
            config_file(self._environ))
        return config_path, oc_config.record_file(state_dir(self._environ), config_path)

    def _load_record(self, current: dict[str, Any]) -> tuple[Path, oc_config.ConfigRecord | None]:
        config_path, path = self._record_path(current)
        record = oc_config.read_record(path, config_path)
        if record is None and (path.parent / oc_config.LEGACY_MARKER).exists():
            record = oc_config.ConfigRecord.legacy(config_path)
        return path, record

    async def _add_server(self, client: GatewayClient, server: str,
                          entry: dict[str, Any]) -> None:
        """Add SERVER to the config; the first change records the file as it was.

        OpenClaw would otherwise hide MCP tools behind its Tool Search, and
        it has no per-session or per-server switch for that, only
        `tools.toolSearch`: if the user left it unset, LispM sets it to false
        while its sessions have servers there; a value the user chose is left
        alone."""
        snapshot = False

        def plan(current: dict[str, Any]) -> _ConfigChange:
            nonlocal snapshot
            path, record = self._load_record(current)
            # A snapshot is taken anew on each try: a `config.get` refused as
            # stale may have been the Gateway's cached answer.
            if record is None or snapshot:
                record = oc_config.ConfigRecord.snapshot(
                    Path(self._record_path(current)[0]), current)
                snapshot = True
            patch: dict[str, Any] = {"mcp": {"servers": {server: entry}}}
            setting = oc_config.tool_search(oc_config.source_of(current))
            if setting is None:
                patch["tools"] = {"toolSearch": False}
                record.tool_search = True
            elif setting is not False:
                log.warning("openclaw: tools.toolSearch is on: LispM's tools are reached "
                            "through OpenClaw's tool_call, not directly")
            # Kept before the change goes in, so that a crash is mended too.
            oc_config.write_record(path, record)
            return _ConfigChange(patch, [f"mcp.servers.{server}.args"], record, path)

        await self._change_config(client, plan)

    async def _release(self, client: GatewayClient, servers: list[str]) -> None:
        """Take SERVERS, and those of every Emacs that is gone, out of the config.

        If no LispM server is left then, the config goes back to what it was
        before LispM's first change: the very bytes (and OpenClaw's backups)
        if nothing but LispM changed the file meanwhile, else the file less
        exactly what LispM added."""
        current = await client.request("config.get", {})
        path, record = await asyncio.to_thread(self._load_record, current)
        source = oc_config.source_of(current)
        gone = set(servers) | set(oc_config.dead_servers(source))
        left = [s for s in oc_config.lispm_servers(source) if s not in gone]
        if not left and record is not None:
            data = await asyncio.to_thread(oc_config.read_bytes, Path(record.path))
            if record.unchanged(current.get("hash"), data) \
                    and oc_config.restorable(record, len(data or b"")):
                self._config_changed.clear()
                self._config_hash = None
                await asyncio.to_thread(oc_config.restore, record)
                await asyncio.to_thread(oc_config.forget, path)
                log.info("openclaw: gave %s back as it was", record.path)
                await self._reloaded(record.hash)
                return

        def plan(current: dict[str, Any]) -> _ConfigChange | None:
            path, record = self._load_record(current)
            source = oc_config.source_of(current)
            gone = set(servers) | set(oc_config.dead_servers(source))
            last = not [s for s in oc_config.lispm_servers(source) if s not in gone]
            patch, replace = oc_config.removal_patch(source, sorted(gone), record, last)
            return _ConfigChange(patch, replace, record, path, forget=last) if patch or (
                last and record is not None) else None

        await self._change_config(client, plan, current)

    async def _reloaded(self, old_hash: str | None) -> None:
        """Wait until the Gateway has taken the file LispM wrote itself (its
        `config.changed` event, with another hash than OLD_HASH): until then
        its `config.get` gives the file as it was."""
        try:
            async with asyncio.timeout(CONFIG_RELOAD_TIMEOUT):
                while self._config_hash in (None, old_hash):
                    await self._config_changed.wait()
                    self._config_changed.clear()
        except TimeoutError:
            log.warning("openclaw: the Gateway did not reload its config in %g s",
                        CONFIG_RELOAD_TIMEOUT)

    async def _change_config(self, client: GatewayClient,
                             plan: Callable[[dict[str, Any]], _ConfigChange | None],
                             current: dict[str, Any] | None = None) -> None:
        """Apply the merge patch PLAN makes of a `config.get` answer (a hot
        reload).  The caller holds `_config_lock`.

        When the Gateway says the file changed after it was read, it is read
        again and the patch planned anew.  CURRENT is an answer at hand for
        the first try."""
        async with asyncio.timeout(CONFIG_CHANGE_TIMEOUT):
            for attempt in range(CONFIG_CHANGE_ATTEMPTS):
                if current is None or attempt > 0:
                    current = await client.request("config.get", {})
                change = await asyncio.to_thread(plan, current)
                if change is None:
                    return
                before = current.get("hash") if isinstance(current.get("hash"), str) else None
                if change.patch:
                    try:
                        result = await client.request("config.patch", {
                            "raw": orjson.dumps(change.patch).decode(), "baseHash": before,
                            **({"replacePaths": change.replace} if change.replace else {})})
                    except GatewayError as err:
                        if not oc_config.stale(err) or attempt == CONFIG_CHANGE_ATTEMPTS - 1:
                            raise
                        log.info("openclaw: the config changed meanwhile; reading it again")
                        continue
                else:
                    result = {}
                await asyncio.to_thread(change.done, before, result)
                return

    async def _sweep_servers(self, client: GatewayClient) -> None:
        """Remove LispM servers left by an Emacs that is gone; if none is left,
        give the config back as `_release` does (a sidecar that died could not)."""
        try:
            async with self._config_lock:
                await self._release(client, [])
        except (GatewayError, OSError) as err:
            log.warning("openclaw: cannot tidy the Gateway's config: %s", err)

    async def describe_session(self, key: str) -> dict[str, Any]:
        """The Gateway's row of session KEY."""
        client = await self.client()
        described = await client.request("sessions.describe", {"key": key})
        session = described.get("session")
        return session if isinstance(session, dict) else {}

    async def send(self, key: str, text: str) -> tuple[dict[str, Any],
                                                       asyncio.Future[dict[str, Any]]]:
        """Give session KEY the message TEXT with the `agent` request."""
        client = await self.client()
        return await client.agent({"sessionKey": key, "message": text,
                                   "idempotencyKey": f"lispm-{uuid.uuid4()}"})


@dataclass
class _ConfigChange:
    """A change to the Gateway's config: a merge PATCH (with the array paths
    it REPLACEs), and LispM's RECORD of the file, kept in RECORD_PATH, to
    update once it is in (or to FORGET: LispM's last change there)."""

    patch: dict[str, Any]
    replace: list[str]
    record: oc_config.ConfigRecord | None
    record_path: Path
    forget: bool = False

    def done(self, before: str | None, result: dict[str, Any]) -> None:
        if self.forget:
            oc_config.forget(self.record_path)
            return
        if self.record is None:
            return
        after = result.get("hash")
        self.record.note_change(before, after if isinstance(after, str) else None,
                                oc_config.read_bytes(Path(self.record.path)))
        oc_config.write_record(self.record_path, self.record)



def _record_gateway(pid_file: Path, pid: int, port: int | None) -> None:
    """Note that this sidecar owns the Gateway PID, listening on PORT."""
    write_private(pid_file, f"{pid} {port} {os.getpid()}\n".encode())


def _orphaned_gateway(pid_file: Path, port: int | None) -> int | None:
    """The Gateway on PORT that a sidecar now dead started, or None."""
    try:
        gateway, gateway_port, owner = (int(n) for n in pid_file.read_text().split())
        cmdline = Path(f"/proc/{gateway}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if gateway_port != port or pid_alive(owner) or b"openclaw" not in cmdline:
        return None
    return gateway


async def _stop_process_group(pid: int, process: asyncio.subprocess.Process | None) -> None:
    """SIGTERM, then SIGKILL after 3 s: a Gateway drains work for minutes otherwise.

    PROCESS is PID's handle when this sidecar started it; an adopted one is
    not its child, so it is watched by its pid."""
    async def gone() -> None:
        if process is not None:
            await process.wait()
            return
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        exited = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(pidfd, exited.set)
        try:
            await exited.wait()
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)

    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(gone(), 3)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        await asyncio.wait_for(gone(), 3)



def bridge_entry(root: Path, url: str, token_file: Path) -> dict[str, Any]:
    """The MCP server entry that runs LispM's stdio bridge to one agent's server."""
    return {
        "command": str(python_launcher(root, "lispm-bridge", "lispm_sidecar.stdio_bridge")),
        "args": [],
        "env": {"LISPM_MCP_URL": url, "LISPM_MCP_TOKEN_FILE": str(token_file)},
    }


# ---------------------------------------------------------------- handover

def final_text(outcome: dict[str, Any]) -> str:
    """The visible text of a finished `agent` run."""
    result = outcome.get("result") if isinstance(outcome.get("result"), dict) else {}
    payloads = (result or {}).get("payloads") or []
    texts = [p.get("text") for p in payloads if isinstance(p, dict)
             and isinstance(p.get("text"), str)]
    return "\n\n".join(t for t in texts if t).strip()


class GatewayHandover:
    """Hand a message to an OpenClaw session through the Gateway.

    Once the Gateway accepts it, it is the session's.  With ON_FINAL, the
    run's outcome is passed on when it ends (a remote session's answer to
    a request)."""

    def __init__(self, openclaw: OpenClaw, key: str,
                 on_final: Callable[[Message, str | None, str | None], Awaitable[None]]
                 | None = None) -> None:
        self._openclaw = openclaw
        self._key = key
        self._on_final = on_final
        self._tasks: set[asyncio.Task[None]] = set()

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        try:
            _accepted, final = await self._openclaw.send(self._key, text)
        except (GatewayUnreachable, GatewayNotSent) as err:
            # Nothing reached the Gateway: the message waits for the next try.
            raise NotNow(str(err)) from err
        if self._on_final is None:
            final.add_done_callback(_ignore_outcome)
        else:
            task = asyncio.create_task(self._finish(message, final),
                                       name=f"openclaw-final:{name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    async def _finish(self, message: Message, final: asyncio.Future[dict[str, Any]]) -> None:
        assert self._on_final is not None
        try:
            outcome = await final
        except (GatewayError, asyncio.CancelledError) as err:
            await self._on_final(message, None, str(err) or "the run was cancelled")
            return
        if outcome.get("status") != "ok":
            await self._on_final(message, None, str(outcome.get("summary") or outcome.get(
                "status")))
            return
        await self._on_final(message, final_text(outcome), None)


def _ignore_outcome(future: asyncio.Future[dict[str, Any]]) -> None:
    if not future.cancelled():
        future.exception()
