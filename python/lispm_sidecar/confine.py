"""What an agent may see: the one place that decides.

An agent sees files under its own folder, compared by truename (so a
symlink that leads out, or `..`, is refused), and buffers visiting such
files.  A buffer with no file is visible only to an agent that received a
`[[buffer:NAME]]` link to it in a message: the link is the permission, so
one agent can show another a scratch buffer.  A buffer visiting a file
elsewhere is invisible, link or not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from .errors import LispmError

BUFFER_LINK = re.compile(r"\[\[buffer:([^\]]+)\](?:\[[^\]]*\])?\]")


class OutsideFolder(LispmError):
    """A path or buffer the agent may not see."""

    code = -32030


def buffer_links(text: str) -> set[str]:
    """Return the buffer names that TEXT links to as `[[buffer:NAME]]`."""
    return {match.group(1) for match in BUFFER_LINK.finditer(text)}


def is_under(folder: str, truename: str) -> bool:
    """Return True if TRUENAME is FOLDER or inside it (both truenames)."""
    folder = folder.rstrip("/") or "/"
    return truename == folder or truename.startswith(folder + "/") or folder == "/"


@dataclass
class Visibility:
    """What one agent may see: its folder's truename and the buffers linked to it."""

    folder: str
    linked: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.folder = os.path.realpath(self.folder)

    def file_visible(self, truename: str | None) -> bool:
        """Return True if the file with TRUENAME is under the folder."""
        return truename is not None and is_under(self.folder, truename)

    def buffer_visible(self, name: str, truename: str | None, file: str | None) -> bool:
        """Return True if the buffer NAME (visiting FILE, of TRUENAME) is visible."""
        if file is not None or truename is not None:
            return self.file_visible(truename)
        return name in self.linked

    def link(self, names: Iterable[str]) -> None:
        """Let the agent see the buffers NAMES, linked in a message it received."""
        self.linked.update(names)

    def resolve(self, path: str) -> Path:
        """Return the truename of PATH (absolute, relative to the folder, or a
        file:// URI), or raise `OutsideFolder` if it is not under the folder."""
        if path.startswith("file://"):
            path = unquote(urlparse(path).path)
        expanded = os.path.expanduser(path)
        absolute = os.path.join(self.folder, expanded)
        truename = os.path.realpath(absolute)
        if not is_under(self.folder, truename):
            raise OutsideFolder(f"{path} is outside this agent's folder {self.folder}")
        return Path(truename)
