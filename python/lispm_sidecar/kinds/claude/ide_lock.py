"""The lock files through which Claude Code finds an agent's IDE server.

Claude Code looks for IDEs in `<config dir>/ide/<port>.lock` (the config
dir is `$CLAUDE_CONFIG_DIR`, else `~/.claude`; with `CLAUDE_CONFIG_DIR` set
it scans `~/.claude/ide` as well).  A lock holds::

    {"pid": <the IDE's pid>, "workspaceFolders": [...], "ideName": "LispM ...",
     "transport": "ws", "runningInWindows": false, "authToken": "<token>",
     "lispm": true, "lispmPidStart": <start time of pid, /proc ticks>}

`lispm` and `lispmPidStart` are LispM's own keys (Claude ignores unknown
keys): they mark a lock as LispM's, so that LispM only ever removes its own
locks, and they let a lock whose pid was reused by another process be told
from a live one.

The directory is created with mode 0700, and one of this user's that
exists with a wider mode is narrowed to 0700 (it is the user's own folder
of lock files, and the locks hold tokens); every lock LispM writes is
mode 0600 as well.  Locks are written
atomically (a temporary file, then a rename) and never through a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import orjson

from ...runtime import pid_alive
from ...watchers.base import proc_start_time

log = logging.getLogger(__name__)

#: The key that marks a lock file as LispM's.
LISPM_KEY = "lispm"
#: Every LispM lock's `ideName` starts with this.
IDE_NAME_PREFIX = "LispM"
#: Locks bigger than this are not LispM's and are not read.
_MAX_LOCK_BYTES = 64 * 1024


def claude_config_dir(home: Path, environ: Mapping[str, str]) -> Path:
    """Return Claude Code's config dir: `$CLAUDE_CONFIG_DIR`, else `HOME/.claude`."""
    configured = environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(os.path.expanduser(configured))
    return home / ".claude"


def scanned_config_dirs(home: Path, environ: Mapping[str, str]) -> list[Path]:
    """Return every config dir whose `ide/` Claude Code scans: its own, and `HOME/.claude`."""
    own = claude_config_dir(home, environ)
    default = home / ".claude"
    return [own] if own == default else [own, default]


def lock_dir(config_dir: Path) -> Path:
    """Return the directory Claude Code scans for IDE locks."""
    return config_dir / "ide"


def lock_path(config_dir: Path, port: int) -> Path:
    """Return the lock file of the IDE server on PORT."""
    return lock_dir(config_dir) / f"{port}.lock"


def lock_contents(
    port: int, pid: int, folders: list[str], token: str, ide_name: str
) -> dict[str, Any]:
    """Return the JSON object of a LispM lock (PORT is only checked, not stored)."""
    if not 0 < port < 65536:
        raise ValueError(f"bad port {port}")
    if not ide_name.startswith(IDE_NAME_PREFIX):
        raise ValueError(f"a LispM ideName starts with {IDE_NAME_PREFIX!r}: {ide_name!r}")
    return {
        "pid": pid,
        "workspaceFolders": list(folders),
        "ideName": ide_name,
        "transport": "ws",
        "runningInWindows": False,
        "authToken": token,
        LISPM_KEY: True,
        "lispmPidStart": proc_start_time(pid),
    }


def _ensure_dir(directory: Path) -> None:
    if directory.is_dir():
        info = directory.lstat()
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and stat.S_IMODE(info.st_mode) & 0o077):
            os.chmod(directory, 0o700)
            log.info("narrowed %s to mode 0700", directory)
        return
    directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
        os.chmod(directory, 0o700)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")


def _write_new(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_lock(
    config_dir: Path, port: int, pid: int, folders: list[str], token: str, ide_name: str
) -> Path:
    """Write the lock of the IDE server on PORT and return its path.

    PID is the IDE's process (LispM passes its Emacs: an ancestor of every
    agent terminal, alive as long as the agents are); FOLDERS the agent's
    folder(s); TOKEN the server's `authToken`; IDE_NAME what `/ide` shows.
    """
    data = orjson.dumps(lock_contents(port, pid, folders, token, ide_name))
    directory = lock_dir(config_dir)
    _ensure_dir(directory)
    final = lock_path(config_dir, port)
    # Not `*.lock`, so Claude never reads a half-written file.
    temp = directory / f".{port}.lock.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    _write_new(temp, data)
    try:
        # rename() replaces a symlink at FINAL itself, never its target.
        os.replace(temp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    log.debug("wrote IDE lock %s", final)
    return final


def read_lock(path: Path) -> dict[str, Any] | None:
    """Return the JSON object in the lock file PATH, or None.

    None for anything that is not a small regular file of this user holding
    a JSON object: symlinks are not followed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        if info.st_size > _MAX_LOCK_BYTES:
            return None
        data = os.read(fd, _MAX_LOCK_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def is_lispm_lock(lock: Mapping[str, Any]) -> bool:
    """Return True if LOCK (a parsed lock file) was written by LispM."""
    name = lock.get("ideName")
    return lock.get(LISPM_KEY) is True and isinstance(name, str) and name.startswith(
        IDE_NAME_PREFIX)


def _owner_dead(lock: Mapping[str, Any]) -> bool:
    pid = lock.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return True
    if not pid_alive(pid):
        return True
    started = lock.get("lispmPidStart")
    if isinstance(started, int) and not isinstance(started, bool):
        now = proc_start_time(pid)
        # The pid now names another process: the one that wrote the lock is gone.
        return now is not None and now != started
    return False


def _unlink(path: Path) -> bool:
    try:
        os.unlink(path)
    except OSError as err:
        if err.errno != errno.ENOENT:
            log.warning("cannot remove IDE lock %s: %s", path, err.strerror)
        return False
    return True


def remove_lock(config_dir: Path, port: int) -> bool:
    """Remove the lock of PORT if it is LispM's; return True if one was removed.

    Another IDE may have taken the port (and written its lock) since LispM
    let it go: a lock that is not LispM's is left alone.
    """
    path = lock_path(config_dir, port)
    lock = read_lock(path)
    if lock is None or not is_lispm_lock(lock):
        return False
    return _unlink(path)


def _port_of(name: str) -> int | None:
    stem = name[: -len(".lock")]
    return int(stem) if stem.isdigit() else None


def clean_stale_locks(
    config_dir: Path, owner_pid: int | None = None, live_ports: Collection[int] = ()
) -> list[Path]:
    """Remove LispM's locks whose IDE process is dead; return their paths.

    Only LispM's own locks are candidates (`"lispm": true` and an `ideName`
    starting with "LispM"); other programs' locks are never touched, even
    when their pid is dead.  With OWNER_PID (this LispM's Emacs), its own
    locks are removed too unless their port is in LIVE_PORTS: what is left
    of agents that closed while the sidecar was down.
    """
    directory = lock_dir(config_dir)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    removed: list[Path] = []
    for name in names:
        if not name.endswith(".lock"):
            continue
        path = directory / name
        lock = read_lock(path)
        if lock is None or not is_lispm_lock(lock):
            continue
        orphan = owner_pid is not None and lock.get("pid") == owner_pid and (
            _port_of(name) not in live_ports)
        if not orphan and not _owner_dead(lock):
            continue
        if _unlink(path):
            removed.append(path)
    if removed:
        log.info("removed %d stale LispM IDE lock(s) in %s", len(removed), directory)
    return removed
