"""The sidecar's mirror of Emacs: open buffers, the selection, diagnostics.

Emacs pushes a full snapshot (`lispm/editor-state`) at most every 50 ms
after a change, so the cheap views — open files, unsaved changes,
diagnostics, the selection — are answered here, without waiting for an
Emacs that may be collecting garbage or running a long command.  Buffer
text is not mirrored: reading it asks Emacs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .confine import Visibility

Json = dict[str, Any]


@dataclass(frozen=True)
class Buffer:
    """One live Emacs buffer."""

    name: str
    file: str | None
    truename: str | None
    dirty: bool
    mode: str

    def to_json(self) -> Json:
        return {"buffer": self.name, "file": self.file, "dirty": self.dirty, "mode": self.mode}


@dataclass
class EditorState:
    """The newest snapshot Emacs pushed."""

    buffers: list[Buffer] = field(default_factory=list)
    selection: Json | None = None
    diagnostics: list[Json] = field(default_factory=list)


def _buffer(entry: Any) -> Buffer | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        return None
    file, truename = entry.get("file"), entry.get("truename")
    return Buffer(
        name=entry["name"],
        file=file if isinstance(file, str) else None,
        truename=truename if isinstance(truename, str) else None,
        dirty=entry.get("dirty") is True,
        mode=str(entry.get("mode") or ""),
    )


class EditorMirror:
    """What Emacs last said about its buffers, answered per agent."""

    def __init__(self) -> None:
        self.state = EditorState()
        self._listeners: list[Callable[[EditorState, EditorState], None]] = []

    def listen(self, callback: Callable[[EditorState, EditorState], None]) -> None:
        """Call CALLBACK with (old, new) after every push."""
        self._listeners.append(callback)

    def update(self, params: Json) -> None:
        """Take a snapshot pushed by Emacs."""
        buffers = [b for b in map(_buffer, params.get("buffers") or []) if b is not None]
        selection = params.get("selection")
        diagnostics = [d for d in params.get("diagnostics") or [] if isinstance(d, dict)]
        old, self.state = self.state, EditorState(
            buffers=buffers,
            selection=selection if isinstance(selection, dict) else None,
            diagnostics=diagnostics,
        )
        for callback in list(self._listeners):
            callback(old, self.state)

    def visible_buffers(self, seen: Visibility) -> list[Buffer]:
        """The buffers the agent of SEEN may see."""
        return [b for b in self.state.buffers if seen.buffer_visible(b.name, b.truename, b.file)]

    def buffer(self, seen: Visibility, name_or_file: str) -> Buffer | None:
        """The visible buffer named NAME_OR_FILE, or visiting that file."""
        for buffer in self.visible_buffers(seen):
            if name_or_file in (buffer.name, buffer.file, buffer.truename):
                return buffer
        if name_or_file.startswith("/") or name_or_file.startswith("file://"):
            truename = str(seen.resolve(name_or_file))
            for buffer in self.visible_buffers(seen):
                if buffer.truename == truename:
                    return buffer
        return None

    def selection(self, seen: Visibility) -> Json | None:
        """The selection, if it is in a buffer the agent may see."""
        selection = self.state.selection
        if selection is None:
            return None
        visible = seen.buffer_visible(
            str(selection.get("buffer")), selection.get("truename"), selection.get("file"))
        return selection if visible else None

    def diagnostics(self, seen: Visibility, truename: str | None = None) -> list[Json]:
        """Diagnostics of the files the agent may see (of TRUENAME only, if given)."""
        return [
            d for d in self.state.diagnostics
            if seen.file_visible(d.get("truename"))
            and (truename is None or d.get("truename") == truename)
        ]
