"""Claude's openDiff through the real EmacsLink: a diff no one decides does not wait forever."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from lispm_sidecar.confine import Visibility
from lispm_sidecar.editor import EditorMirror
from lispm_sidecar.errors import LispmError
from lispm_sidecar.kinds.claude.ide_tools import IdeTools
from lispm_sidecar.rpc import DECISION_TIMEOUT, EmacsLink


class Emacs:
    """Answers every request of LINK at once, and keeps the requests."""

    def __init__(self, link: EmacsLink) -> None:
        self.link = link
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.closed = asyncio.Event()

    def write(self, data: bytes) -> None:
        message = orjson.loads(data.partition(b"\r\n\r\n")[2])
        self.requests.append((message["method"], message["params"]))
        if message["method"] == "emacs/close-diff":
            self.closed.set()
        asyncio.get_running_loop().call_soon(self.link.receive, {
            "jsonrpc": "2.0", "id": message["id"], "result": {"shown": True}})


async def test_an_undecided_diff_ends_and_is_closed(tmp_path: Path) -> None:
    assert DECISION_TIMEOUT == 3600
    link = EmacsLink()
    emacs = Emacs(link)
    link.attach(emacs)
    bridge = IdeTools("claude", Visibility(str(tmp_path)), EditorMirror(), link,
                      decide_within=0.3)
    with pytest.raises(LispmError, match=r"did not decide on the diff within 0\.3 s"):
        await asyncio.wait_for(bridge.call("openDiff", {
            "old_file_path": str(tmp_path / "a"), "new_file_path": str(tmp_path / "a"),
            "new_file_contents": "new\n", "tab_name": "t"}), 10)
    await asyncio.wait_for(emacs.closed.wait(), 10)
    assert [method for method, _ in emacs.requests] == ["emacs/open-diff", "emacs/close-diff"]
    assert emacs.requests[0][1]["id"] == emacs.requests[1][1]["id"]
