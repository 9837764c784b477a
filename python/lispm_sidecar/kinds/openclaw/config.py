"""What LispM changes in a local OpenClaw Gateway's config, and how it gives it back.

LispM adds `mcp.servers.lispm_<pid>_<name>` entries (and, if the user left
it unset, `tools.toolSearch: false`) with the Gateway's `config.patch`.
OpenClaw then rewrites the whole file: strict JSON (a JSON5 file loses its
comments), a `meta` block stamped in (`lastTouchedVersion`, migration
flags), mode 0600, and the file as it was before moved to
`openclaw.json.bak` (older ones rotated to `.bak.1` … `.bak.4`).

So before LispM's first change the file's bytes, its mode and those
backups are kept in a record in LispM's state folder (`ConfigRecord`),
with the Gateway's hash of the file each time LispM's own patch leaves
it.  When LispM's last session there closes (or the next sidecar finds
the servers of one that died), `release_plan` and `restorable` decide:
if nothing but LispM changed the file, the original bytes and backups go
back (`restore`); otherwise a patch takes out exactly what LispM added,
and any object it created that is empty then.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from ...runtime import pid_alive
from .wire import GatewayError

#: OpenClaw's backups of its config file, rotated on each of its writes.
BACKUP_SUFFIXES = (".bak", ".bak.1", ".bak.2", ".bak.3", ".bak.4")
#: The objects LispM writes into; one it created is removed once empty.
CONTAINERS = ("mcp", "mcp.servers", "tools")
SERVER_NAME = re.compile(r"^lispm_(\d+)_[a-z0-9_]+$")
#: An older LispM's note, in its state folder, that it set Tool Search off.
LEGACY_MARKER = "openclaw-tool-search-off"
#: How OpenClaw ends an INVALID_REQUEST that asks for a fresh read, as in
#: "config changed since last load; re-run config.get and retry".
_RETRY_SUFFIX = "re-run config.get and retry"
#: OpenClaw's own recovery takes a config of less than half the size of
#: the last good one (of at least this many bytes) for clobbered.
_CLOBBER_BASELINE = 512


def stale(err: GatewayError) -> bool:
    """Whether the Gateway refused a config change because the file changed
    after the client read it: re-read and try again."""
    return err.gateway_code == "INVALID_REQUEST" and str(err).rstrip().endswith(_RETRY_SUFFIX)


def source_of(current: dict[str, Any]) -> dict[str, Any]:
    """The config as the file says it, in a `config.get` answer.

    `config` has OpenClaw's defaults filled in; `sourceConfig` is what a
    `config.patch` is merged into and written back."""
    for key in ("sourceConfig", "config"):
        config = current.get(key)
        if isinstance(config, dict):
            return config
    return {}


def _object(config: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    node: Any = config
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def lispm_servers(config: dict[str, Any]) -> list[str]:
    """The names of LispM's MCP servers in CONFIG."""
    servers = _object(config, "mcp.servers") or {}
    return [name for name in servers if SERVER_NAME.match(name)]


def server_owner(name: str) -> int:
    """The pid of the Emacs whose server is NAME (one of `lispm_servers`)."""
    match = SERVER_NAME.match(name)
    return int(match.group(1)) if match else 0


def dead_servers(config: dict[str, Any]) -> list[str]:
    """LispM's servers in CONFIG whose Emacs is gone."""
    return [name for name in lispm_servers(config) if not pid_alive(server_owner(name))]


def tool_search(config: dict[str, Any]) -> Any:
    """`tools.toolSearch` in CONFIG; None if unset."""
    return (_object(config, "tools") or {}).get("toolSearch")


def record_file(state: Path, config_path: str) -> Path:
    """The record of the config file CONFIG_PATH, in LispM's state folder STATE."""
    digest = hashlib.sha256(config_path.encode()).hexdigest()[:16]
    return state / f"openclaw-config-{digest}.json"


@dataclass
class Saved:
    """A file's bytes and mode."""

    data: bytes
    mode: int


@dataclass
class ConfigRecord:
    """What LispM needs to give the user's OpenClaw config back as it was.

    Written before LispM's first change to the file, and deleted once the
    last LispM session there has closed."""

    path: str
    #: The file before LispM's first change; None if there was none.
    original: Saved | None
    backups: dict[str, Saved | None]
    #: Which of `CONTAINERS` the user's config had.
    present: list[str]
    had_meta: bool
    #: Nothing but LispM changed the file since ORIGINAL.
    clean: bool
    #: The Gateway's hash of the file as LispM last left it.
    hash: str | None
    #: LispM set `tools.toolSearch` to false.
    tool_search: bool = False
    #: SHA-256 of the file as LispM's last patch left it, read just after.
    file_sha: str | None = None
    origin: str = "snapshot"

    @classmethod
    def snapshot(cls, path: Path, current: dict[str, Any]) -> ConfigRecord:
        """Record the config file PATH as it is, with CURRENT its `config.get`."""
        source = source_of(current)
        hash_ = current.get("hash") if isinstance(current.get("hash"), str) else None
        return cls(
            path=str(path), original=_read(path),
            backups={suffix: _read(Path(str(path) + suffix)) for suffix in BACKUP_SUFFIXES},
            present=[name for name in CONTAINERS if _object(source, name) is not None],
            had_meta=isinstance(source.get("meta"), dict),
            # Servers of an older LispM in it: these bytes are not the user's.
            clean=not lispm_servers(source), hash=hash_)

    @classmethod
    def legacy(cls, path: str) -> ConfigRecord:
        """A record without the original: only that LispM set Tool Search (an
        older LispM's marker says so), and that its servers may be there."""
        return cls(path=path, original=None, backups={}, present=list(CONTAINERS),
                   had_meta=True, clean=False, hash=None, tool_search=True, origin="legacy")

    def dumps(self) -> bytes:
        """The record as JSON."""
        data = asdict(self)
        data["original"] = _encode(self.original)
        data["backups"] = {k: _encode(v) for k, v in self.backups.items()}
        return orjson.dumps(data)

    @classmethod
    def loads(cls, raw: bytes) -> ConfigRecord:
        """Read a record written by `dumps`."""
        data = orjson.loads(raw)
        data["original"] = _decode(data.get("original"))
        data["backups"] = {k: _decode(v) for k, v in (data.get("backups") or {}).items()}
        return cls(**data)

    def note_change(self, before: str | None, after: str | None, data: bytes | None) -> None:
        """LispM changed the file from hash BEFORE to hash AFTER (None: no
        change), leaving DATA in it."""
        if before != self.hash:
            self.clean = False
        elif after is not None:
            self.hash = after
            self.file_sha = None if data is None else hashlib.sha256(data).hexdigest()

    def unchanged(self, current_hash: Any, data: bytes | None) -> bool:
        """Whether the file (DATA now, CURRENT_HASH by the Gateway) is what
        LispM left: nothing else changed it since ORIGINAL.

        Both are checked: the Gateway's `config.get` is cached until its
        watcher sees a change, and the file read after a patch could be
        another writer's already."""
        if not self.clean or self.hash is None or current_hash != self.hash:
            return False
        if data is not None and self.original is not None and data == self.original.data:
            return True
        return data is not None and hashlib.sha256(data).hexdigest() == self.file_sha


def read_bytes(path: Path) -> bytes | None:
    """PATH's bytes; None if there is no such file."""
    saved = _read(path)
    return None if saved is None else saved.data


def _read(path: Path) -> Saved | None:
    try:
        with path.open("rb") as f:
            return Saved(f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode))
    except FileNotFoundError:
        return None


def _encode(saved: Saved | None) -> dict[str, Any] | None:
    if saved is None:
        return None
    return {"data": base64.b64encode(saved.data).decode(), "mode": saved.mode}


def _decode(value: Any) -> Saved | None:
    if not isinstance(value, dict):
        return None
    return Saved(base64.b64decode(value["data"]), int(value["mode"]))


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Put DATA in PATH, with MODE, in one rename: a reader sees one or the other."""
    temporary = path.with_name(f".{path.name}.lispm-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_record(path: Path, record: ConfigRecord) -> None:
    """Keep RECORD in PATH (mode 0600)."""
    replace_file(path, record.dumps(), 0o600)


def forget(path: Path) -> None:
    """Delete the record in PATH, and an older LispM's marker beside it."""
    path.unlink(missing_ok=True)
    (path.parent / LEGACY_MARKER).unlink(missing_ok=True)


def read_record(path: Path, config_path: str) -> ConfigRecord | None:
    """The record in PATH of the config file CONFIG_PATH, or None."""
    try:
        return ConfigRecord.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (orjson.JSONDecodeError, TypeError, KeyError, ValueError):
        # A record that cannot be read still says that LispM changed the file.
        return ConfigRecord.legacy(config_path)


def restorable(record: ConfigRecord, current_size: int) -> bool:
    """Whether the original bytes can go back without OpenClaw undoing it.

    OpenClaw restores its config from `openclaw.json.bak` when the file
    looks clobbered next to the last good one (CURRENT_SIZE bytes, LispM's
    last patch): its `meta` gone, or less than half its size.  With no
    `.bak` left (the user had none) there is nothing to restore from."""
    if record.origin == "legacy":
        return False
    if record.original is None or all(v is None for v in record.backups.values()):
        return True
    if not record.had_meta:
        return False
    return current_size < _CLOBBER_BASELINE or len(record.original.data) >= current_size // 2


def restore(record: ConfigRecord) -> None:
    """Put the file and its backups back as RECORD has them.

    The backups go first: a `.bak` next to a file without `meta` is what
    OpenClaw's own recovery would restore from."""
    for suffix, saved in record.backups.items():
        backup = Path(record.path + suffix)
        if saved is None:
            backup.unlink(missing_ok=True)
        else:
            replace_file(backup, saved.data, saved.mode)
    path = Path(record.path)
    if record.original is None:
        path.unlink(missing_ok=True)
    else:
        replace_file(path, record.original.data, record.original.mode)


def removal_patch(source: dict[str, Any], gone: list[str], record: ConfigRecord | None,
                  last: bool) -> tuple[dict[str, Any], list[str]]:
    """The merge patch that takes servers GONE out of SOURCE, and the paths
    of arrays it removes (OpenClaw wants those named).

    When LAST (no LispM server is left), it also unsets `tools.toolSearch`
    if LispM set it and it is still false, and removes each object LispM
    created (per RECORD) that is empty then."""
    patch: dict[str, Any] = {}
    servers = _object(source, "mcp.servers") or {}
    removing = [name for name in gone if name in servers]
    if removing:
        patch["mcp"] = {"servers": dict.fromkeys(removing)}
    if not last or record is None:
        return patch, [f"mcp.servers.{name}.args" for name in removing]
    if record.tool_search and tool_search(source) is False:
        patch["tools"] = {"toolSearch": None}
    left_servers = {k: v for k, v in servers.items() if k not in removing}
    if _object(source, "mcp.servers") is not None and not left_servers \
            and "mcp.servers" not in record.present:
        mcp = _object(source, "mcp") or {}
        if "mcp" not in record.present and set(mcp) <= {"servers"}:
            patch["mcp"] = None
        else:
            patch["mcp"] = {"servers": None}
    tools = _object(source, "tools")
    if tools is not None and "tools" not in record.present:
        left_tools = {k for k in tools if not (k == "toolSearch" and "tools" in patch)}
        if not left_tools:
            patch["tools"] = None
    return patch, [f"mcp.servers.{name}.args" for name in removing]
