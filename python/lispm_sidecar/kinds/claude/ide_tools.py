"""The IDE tools of one Claude agent, answered by the mirror and by Emacs.

What the mirror knows (diagnostics, open editors, the selection, dirty
state, the workspace folder) is answered at once, without Emacs; diffs,
files and saving are requests into Emacs.  A diff is shown at once and
decided later: Emacs sends `lispm/diff-resolved` when the user accepts or
rejects it, and `openDiff` waits for that without holding up anything else,
for at most `DECISION_TIMEOUT` (then the diff is closed and the call fails).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from typing import Any

import orjson

from ...confine import Visibility
from ...editor import EditorMirror
from ...errors import LispmError
from ...protocol import (
    CLOSE_DIFF,
    OPEN_DIFF,
    OPEN_FILE,
    SAVE_DOCUMENT,
    CloseDiffParams,
    OpenDiffParams,
    OpenFileParams,
    SaveDocumentParams,
)
from ...rpc import DECISION_TIMEOUT, EmacsLink
from .ide import Content, file_uri

log = logging.getLogger(__name__)

_diff_ids = itertools.count(1)


def _text(value: Any) -> Content:
    return [{"type": "text", "text": value if isinstance(value, str) else
             orjson.dumps(value).decode()}]


_SEVERITY = {"error": 1, "warning": 2, "info": 3, "hint": 4}


class IdeTools:
    """An `IdeHandler` for agent NAME, who sees what SEEN allows."""

    def __init__(self, name: str, seen: Visibility, mirror: EditorMirror,
                 link: EmacsLink, decide_within: float = DECISION_TIMEOUT) -> None:
        self.name = name
        self.seen = seen
        self.mirror = mirror
        self.link = link
        self.decide_within = decide_within
        self._diffs: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._background: set[asyncio.Task[Any]] = set()

    # What the mirror answers.

    def answer_now(self, tool: str, args: dict[str, Any]) -> Content | None:
        if tool == "getDiagnostics":
            return _text(self._diagnostics(args.get("uri")))
        if tool == "getOpenEditors":
            return _text({"tabs": self._tabs()})
        if tool == "getWorkspaceFolders":
            folder = self.seen.folder
            return _text({"success": True, "rootPath": folder, "folders": [
                {"name": os.path.basename(folder), "uri": file_uri(folder), "path": folder}]})
        if tool in ("getCurrentSelection", "getLatestSelection"):
            return _text(self._selection())
        if tool == "checkDocumentDirty":
            buffer = self.mirror.buffer(self.seen, args["filePath"])
            if buffer is None:
                return _text({"success": False,
                              "message": f"Document not open: {args['filePath']}"})
            return _text({"success": True, "filePath": args["filePath"],
                          "isDirty": buffer.dirty, "isUntitled": False})
        if tool == "closeAllDiffTabs":
            count = sum(1 for future in self._diffs.values() if not future.done())
            self._in_background(self.link.request(
                CLOSE_DIFF, CloseDiffParams(all=True, agent=self.name)))
            return _text(f"CLOSED_{count}_DIFF_TABS")
        if tool == "close_tab":
            return _text("TAB_CLOSED")
        return None

    def _diagnostics(self, uri: str | None) -> list[dict[str, Any]]:
        truename = uri[len("file://"):] if uri else None
        answer = []
        for entry in self.mirror.diagnostics(self.seen, truename):
            answer.append({"uri": file_uri(entry["truename"]), "diagnostics": [
                {"message": item.get("message", ""),
                 "severity": _SEVERITY.get(str(item.get("severity")), 3),
                 "range": item.get("range"), "source": item.get("source")}
                for item in entry.get("items") or []]})
        return answer

    def _tabs(self) -> list[dict[str, Any]]:
        selected = (self.mirror.state.selection or {}).get("buffer")
        return [{"uri": file_uri(b.truename or b.file or ""), "isActive": b.name == selected,
                 "label": b.name, "languageId": b.mode.removesuffix("-mode"),
                 "isDirty": b.dirty}
                for b in self.mirror.visible_buffers(self.seen) if b.truename]

    def _selection(self) -> dict[str, Any]:
        selection = self.mirror.selection(self.seen)
        if selection is None or not selection.get("truename"):
            return {"success": False, "message": "No active editor found"}
        path = selection["truename"]
        return {"success": True, "text": selection.get("text", ""), "filePath": path,
                "fileUrl": file_uri(path),
                "selection": {"start": selection.get("start"), "end": selection.get("end"),
                              "isEmpty": bool(selection.get("is_empty"))}}

    # What Emacs answers.

    async def call(self, tool: str, args: dict[str, Any]) -> Content:
        if tool == "openDiff":
            return await self._open_diff(args)
        if tool == "openFile":
            await self.link.request(OPEN_FILE, OpenFileParams(
                file=args["filePath"], start_text=args.get("startText") or None,
                end_text=args.get("endText") or None,
                select_to_eol=bool(args.get("selectToEndOfLine")),
                make_frontmost=args.get("makeFrontmost", True) is not False))
            return _text(f"Opened file: {args['filePath']}")
        if tool == "saveDocument":
            answer = await self.link.request(
                SAVE_DOCUMENT, SaveDocumentParams(file=args["filePath"]))
            return _text({"success": bool(answer.get("saved")), "filePath": args["filePath"],
                          "saved": bool(answer.get("saved")), "message": answer.get("message")})
        raise LispmError(f"{tool} is not available")

    async def _open_diff(self, args: dict[str, Any]) -> Content:
        diff_id = f"{self.name}-{next(_diff_ids)}"
        decided: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._diffs[diff_id] = decided
        try:
            await self.link.request(OPEN_DIFF, OpenDiffParams(
                id=diff_id, agent=self.name, file=args["new_file_path"],
                new_contents=args["new_file_contents"], tab_name=args.get("tab_name")))
            outcome = await asyncio.wait_for(decided, self.decide_within)
        except TimeoutError:
            self._in_background(self.link.request(CLOSE_DIFF, CloseDiffParams(id=diff_id)))
            raise LispmError(f"the user did not decide on the diff within "
                             f"{self.decide_within:g} s; it is closed") from None
        except asyncio.CancelledError:
            self._in_background(self.link.request(CLOSE_DIFF, CloseDiffParams(id=diff_id)))
            raise
        finally:
            self._diffs.pop(diff_id, None)
        if outcome.get("outcome") == "saved":
            return [{"type": "text", "text": "FILE_SAVED"},
                    {"type": "text", "text": str(outcome.get("contents", ""))}]
        if outcome.get("outcome") == "rejected":
            return _text("DIFF_REJECTED")
        return _text("TAB_CLOSED")

    def resolve(self, diff_id: str, outcome: dict[str, Any]) -> bool:
        """Take Emacs's decision on the diff DIFF_ID; False if it is not pending here."""
        future = self._diffs.get(diff_id)
        if future is None or future.done():
            return False
        future.set_result(outcome)
        return True

    def _in_background(self, request: Any) -> None:
        async def run() -> None:
            with contextlib.suppress(LispmError):
                await request

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
