"""Private files the agent CLIs read: tokens and per-run MCP configs.

Tokens never go on a command line (any local user can read
`/proc/*/cmdline`) and never cross the link to Emacs (so no debug view can
show them).  Each agent gets a folder, mode 0700, under the runtime
directory, holding its token and what its kind adds there (Claude's
config and IDE token: `kinds/claude/adapter.py`), each mode 0600.  The
folder's name starts with the pid of the Emacs that owns it, so that two
Emacs sessions never share a folder and a later sidecar can remove the
folders of an Emacs that died.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import sys
from pathlib import Path

from .errors import InvalidParams


def runtime_root() -> Path:
    """Return LispM's private runtime directory, creating it with mode 0700.

    `LISPM_RUNTIME_DIR` wins; then `$XDG_RUNTIME_DIR/lispm`; then
    `/tmp/lispm-<uid>`.  A directory that another user owns, or that others
    can enter, is refused.
    """
    if override := os.environ.get("LISPM_RUNTIME_DIR"):
        root = Path(override)
    elif xdg := os.environ.get("XDG_RUNTIME_DIR"):
        root = Path(xdg) / "lispm"
    else:
        root = Path("/tmp") / f"lispm-{os.getuid()}"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{root} is not a directory of this user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)
    return root


def python_launcher(root: Path, name: str, module: str) -> Path:
    """Write `<root>/bin/NAME`, a script that runs MODULE with this sidecar's
    Python and package, from any environment; return its path.

    Programs that start LispM's helpers (a daemon's shell, a Gateway's MCP
    client) pass them an environment of their own, without our venv or
    `PYTHONPATH` (OpenClaw refuses to pass `PYTHONPATH`): absolute paths
    in a script work everywhere."""
    bin_dir = root / "bin"
    bin_dir.mkdir(mode=0o700, exist_ok=True)
    script = bin_dir / name
    package_parent = Path(__file__).resolve().parent.parent
    text = (f"#!/bin/sh\n# LispM's {name}, written by the sidecar.\n"
            f"PYTHONPATH={_sh_quote(str(package_parent))}${{PYTHONPATH:+:$PYTHONPATH}} "
            f"exec {_sh_quote(sys.executable)} -m {module} \"$@\"\n")
    if not script.exists() or script.read_text() != text:
        temp = script.with_name(f"{name}.{os.getpid()}.tmp")
        temp.write_text(text)
        os.chmod(temp, 0o700)
        os.replace(temp, script)
    return script


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def new_token() -> str:
    """Return a fresh bearer token from the operating system's CSPRNG."""
    return secrets.token_urlsafe(32)


def write_private(path: Path, data: bytes) -> None:
    """Write DATA to PATH so that only this user can ever read it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


#: The file of an agent's folder that holds its MCP server's token.
TOKEN = "token"

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AgentFiles:
    """The private folder of one agent: its token file, and its kind's files."""

    def __init__(self, root: Path, owner_pid: int, name: str, instance: int) -> None:
        if not _SAFE_NAME.fullmatch(name):
            raise InvalidParams(f"agent name {name!r} is not a plain name")
        # Names are reused; the instance keeps a late clean-up of one agent
        # from deleting the files of its successor.
        self.dir = root / "agents" / f"{owner_pid}-{name}-{instance}"
        self.token_file = self.dir / TOKEN

    def create(self, token: str) -> None:
        """Write the folder afresh with TOKEN, the agent's MCP server's."""
        self.dir.parent.mkdir(mode=0o700, exist_ok=True)
        self.dir.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.dir, 0o700)
        write_private(self.token_file, token.encode() + b"\n")

    def write(self, name: str, data: bytes) -> Path:
        """Write DATA to the agent's private file NAME; return its path."""
        path = self.dir / name
        write_private(path, data)
        return path

    def read_token(self, name: str = TOKEN) -> str:
        """Return the token stored in the agent's file NAME (by default its server's)."""
        path = self.dir / name
        try:
            token = path.read_text().strip()
        except FileNotFoundError as err:
            raise InvalidParams(f"{path} is gone: the agent cannot be restored") from err
        if not token:
            raise InvalidParams(f"{path} holds no token")
        return token

    def remove(self) -> None:
        """Delete the folder and everything in it."""
        shutil.rmtree(self.dir, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Return True if a process PID exists (owned by anyone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(root: Path) -> list[str]:
    """Remove agent folders whose owning Emacs is gone; return their names."""
    removed: list[str] = []
    agents = root / "agents"
    if not agents.is_dir():
        return removed
    for folder in agents.iterdir():
        owner_text, _, _ = folder.name.partition("-")
        owner = int(owner_text) if owner_text.isdigit() else 0
        if owner <= 0 or not pid_alive(owner):
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
                removed.append(folder.name)
    return removed
