"""Read-only views of Emacs, on every agent's MCP server.

Each view is offered twice, as an MCP resource and as a read-only tool, so
that clients which do not read resources still get them:

| tool | resource | what |
|---|---|---|
| `get_selection` | `lispm://selection` | the selection: buffer, file, range, text |
| `list_open_files` | `lispm://open-files` | open files, and which have unsaved changes |
| `read_buffer(buffer)` | `lispm://buffer/{buffer}` | a buffer's text, unsaved changes too |
| `get_diagnostics(file?)` | `lispm://diagnostics` | flymake (and flycheck) diagnostics |

All of them see only what `confine.Visibility` lets the calling agent see.
The cheap ones are answered from the editor mirror; buffer text asks Emacs.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from .confine import Visibility
from .editor import EditorMirror
from .errors import LispmError, tool_errors
from .protocol import BUFFER_TEXT, BufferTextParams
from .rpc import EmacsLink

SELECTION = """\
Return the user's current selection in Emacs: buffer, file, 0-based range \
and text (empty text means just the cursor position). Only buffers of files \
in your folder (or buffers linked to you) are visible; otherwise null."""

OPEN_FILES = """\
List the files open in the user's Emacs under your folder, with their buffer \
names and whether they have unsaved changes (dirty: true)."""

READ_BUFFER = """\
Return the text of an open Emacs buffer, unsaved changes included: what the \
user sees, which may differ from the file on disk. Give the buffer name or \
the file's path. Only files in your folder, and buffers linked to you as \
[[buffer:NAME]], are readable."""

DIAGNOSTICS = """\
Return the diagnostics (errors, warnings) Emacs's checkers report for open \
files in your folder; give a file to get only its diagnostics. Lines and \
characters are 0-based."""


class Views:
    """The views of one agent: what it may see, and how to read it."""

    def __init__(self, mirror: EditorMirror, seen: Visibility, link: EmacsLink) -> None:
        self.mirror = mirror
        self.seen = seen
        self.link = link

    def selection(self) -> dict[str, Any]:
        return {"selection": self.mirror.selection(self.seen)}

    def open_files(self) -> dict[str, Any]:
        return {"open": [b.to_json() for b in self.mirror.visible_buffers(self.seen)]}

    def diagnostics(self, file: str | None = None) -> dict[str, Any]:
        truename = str(self.seen.resolve(file)) if file else None
        return {"diagnostics": self.mirror.diagnostics(self.seen, truename)}

    async def buffer_text(self, buffer: str) -> dict[str, Any]:
        found = self.mirror.buffer(self.seen, buffer)
        if found is None:
            raise LispmError(f"no open buffer {buffer!r} that this agent may read")
        answer = await self.link.request(BUFFER_TEXT, BufferTextParams(buffer=found.name))
        if not isinstance(answer, dict) or not self.seen.buffer_visible(
                found.name, answer.get("truename"), answer.get("file")):
            raise LispmError(f"buffer {buffer!r} is not readable by this agent")
        return {k: answer.get(k) for k in ("buffer", "file", "dirty", "text")}


def _json(value: dict[str, Any]) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def add_views(server: MCPServer, views: Views) -> None:
    """Register the views on SERVER as tools and resources."""
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    async def get_selection() -> dict[str, Any]:
        return views.selection()

    async def list_open_files() -> dict[str, Any]:
        return views.open_files()

    @tool_errors
    async def read_buffer(
        buffer: Annotated[str, Field(description="A buffer name, or a file's path.")],
    ) -> dict[str, Any]:
        return await views.buffer_text(buffer)

    @tool_errors
    async def get_diagnostics(
        file: Annotated[str | None, Field(description="Only this file's diagnostics.")] = None,
    ) -> dict[str, Any]:
        return views.diagnostics(file)

    for fn, name, title, description in (
        (get_selection, "get_selection", "The selection", SELECTION),
        (list_open_files, "list_open_files", "Open files", OPEN_FILES),
        (read_buffer, "read_buffer", "Read a buffer", READ_BUFFER),
        (get_diagnostics, "get_diagnostics", "Diagnostics", DIAGNOSTICS),
    ):
        server.add_tool(fn, name=name, title=title, description=description,
                        annotations=read_only)

    @server.resource("lispm://selection", name="selection", description=SELECTION,
                     mime_type="application/json")
    async def selection_resource() -> str:
        return _json(views.selection())

    @server.resource("lispm://open-files", name="open-files", description=OPEN_FILES,
                     mime_type="application/json")
    async def open_files_resource() -> str:
        return _json(views.open_files())

    @server.resource("lispm://diagnostics", name="diagnostics", description=DIAGNOSTICS,
                     mime_type="application/json")
    async def diagnostics_resource() -> str:
        return _json(views.diagnostics())

    @server.resource("lispm://buffer/{buffer}", name="buffer", description=READ_BUFFER,
                     mime_type="text/plain")
    async def buffer_resource(buffer: str) -> str:
        text = (await views.buffer_text(buffer)).get("text")
        return text if isinstance(text, str) else ""
