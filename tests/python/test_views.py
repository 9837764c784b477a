"""Read-only views: confinement by truename, links as permissions, the mirror."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lispm_sidecar.confine import OutsideFolder, Visibility, buffer_links, is_under
from lispm_sidecar.editor import EditorMirror

from .sidecar_client import SidecarProcess


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Two agents' folders, a sibling with a prefix name, and a symlink that leads out."""
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "proj" / "src" / "a.el").write_text("(a)")
    (tmp_path / "proj-evil").mkdir()
    (tmp_path / "proj-evil" / "secret.txt").write_text("secret")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.el").write_text("(b)")
    os.symlink(tmp_path / "other", tmp_path / "proj" / "escape")
    return tmp_path


def test_paths_are_compared_by_truename(tree: Path) -> None:
    seen = Visibility(str(tree / "proj"))
    assert seen.resolve("src/a.el") == tree / "proj" / "src" / "a.el"
    assert seen.resolve(f"file://{tree}/proj/src/a.el") == tree / "proj" / "src" / "a.el"
    for outside in ("../other/b.el", f"{tree}/proj/../other/b.el", "escape/b.el",
                    f"{tree}/proj-evil/secret.txt", "/etc/passwd", "~/.ssh/id_rsa",
                    f"file://{tree}/other/b.el", "src/../../proj-evil/secret.txt"):
        with pytest.raises(OutsideFolder):
            seen.resolve(outside)
    assert is_under("/a/proj", "/a/proj") and not is_under("/a/proj", "/a/proj-evil/x")


def test_buffer_links_are_the_permission(tree: Path) -> None:
    seen = Visibility(str(tree / "proj"))
    assert not seen.buffer_visible("*scratch*", None, None)
    seen.link(buffer_links("look at [[buffer:*scratch*]] and [[buffer:notes][my notes]]"))
    assert seen.buffer_visible("*scratch*", None, None)
    assert seen.buffer_visible("notes", None, None)
    # A link never opens a file outside the folder.
    seen.link({"b.el"})
    assert not seen.buffer_visible("b.el", str(tree / "other" / "b.el"), str(tree / "other/b.el"))


def snapshot(tree: Path) -> dict[str, Any]:
    a = str(tree / "proj" / "src" / "a.el")
    b = str(tree / "other" / "b.el")
    escape = str(tree / "proj" / "escape" / "b.el")
    return {
        "buffers": [
            {"name": "a.el", "file": a, "truename": a, "dirty": True, "mode": "emacs-lisp-mode"},
            {"name": "b.el", "file": b, "truename": b, "dirty": False, "mode": "emacs-lisp-mode"},
            {"name": "b.el<2>", "file": escape, "truename": b, "dirty": False, "mode": "x"},
            {"name": "*scratch*", "file": None, "truename": None, "dirty": True, "mode": "x"},
        ],
        "selection": {"buffer": "b.el", "file": b, "truename": b, "text": "(b)",
                      "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3},
                      "is_empty": False},
        "diagnostics": [
            {"file": a, "truename": a, "items": [{"message": "oops", "severity": "error"}]},
            {"file": b, "truename": b, "items": [{"message": "theirs", "severity": "error"}]},
        ],
    }


def test_the_mirror_answers_only_what_the_agent_may_see(tree: Path) -> None:
    mirror = EditorMirror()
    mirror.update(snapshot(tree))
    mine = Visibility(str(tree / "proj"))
    theirs = Visibility(str(tree / "other"))
    assert [b.name for b in mirror.visible_buffers(mine)] == ["a.el"]
    assert [b.name for b in mirror.visible_buffers(theirs)] == ["b.el", "b.el<2>"]
    assert mirror.selection(mine) is None
    assert mirror.selection(theirs) is not None
    assert [d["items"][0]["message"] for d in mirror.diagnostics(mine)] == ["oops"]
    assert mirror.buffer(mine, "b.el") is None
    assert mirror.buffer(mine, "*scratch*") is None
    mine.link({"*scratch*"})
    assert mirror.buffer(mine, "*scratch*") is not None


class FakeEmacs:
    """Answers the sidecar's requests from the snapshot's buffers."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.asked: list[str] = []

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if method == "emacs/list-agents":
            return {"agents": []}
        if method == "emacs/buffer-text":
            self.asked.append(params["buffer"])
            entry = next(b for b in snapshot(self.tree)["buffers"] if b["name"] == params["buffer"])
            return {**entry, "buffer": entry["name"], "text": f"text of {entry['name']}"}
        raise AssertionError(method)


@pytest.fixture
async def sidecar(tree: Path) -> AsyncIterator[tuple[SidecarProcess, FakeEmacs]]:
    emacs = FakeEmacs(tree)
    process = SidecarProcess(tree / "run", emacs)
    await process.start()
    await process.hello()
    await process.call("lispm/agent-start", {"name": "codex", "kind": "codex",
                                             "folder": str(tree / "proj"), "instance": 1})
    await process.send_raw(orjson.dumps(
        {"jsonrpc": "2.0", "method": "lispm/editor-state", "params": snapshot(tree)}))
    yield process, emacs
    await process.close()


async def as_codex(process: SidecarProcess, tool: str, **args: Any) -> tuple[bool, Any]:
    [agent] = (await process.call("lispm/agents", {}))["agents"]
    token = Path(agent["token_file"]).read_text().strip()
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(agent["url"], http_client=http)) as client:
        if tool.startswith("lispm://"):
            result = await client.read_resource(tool)
            return False, [getattr(c, "text", None) for c in result.contents]
        called = await client.call_tool(tool, args)
        text = "".join(getattr(part, "text", "") for part in called.content)
        return bool(called.is_error), called.structured_content or text


async def test_views_over_mcp_are_confined(sidecar: tuple[SidecarProcess, FakeEmacs]) -> None:
    process, emacs = sidecar
    error, files = await as_codex(process, "list_open_files")
    assert not error and [f["buffer"] for f in files["open"]] == ["a.el"]
    assert files["open"][0]["dirty"] is True
    assert (await as_codex(process, "get_selection"))[1] == {"selection": None}
    error, text = await as_codex(process, "read_buffer", buffer="a.el")
    assert not error and text["text"] == "text of a.el"
    for forbidden in ("b.el", "b.el<2>", "*scratch*", "../other/b.el", "/etc/passwd"):
        error, message = await as_codex(process, "read_buffer", buffer=forbidden)
        assert error, forbidden
    assert emacs.asked == ["a.el"]
    error, diagnostics = await as_codex(process, "get_diagnostics")
    assert [d["items"][0]["message"] for d in diagnostics["diagnostics"]] == ["oops"]
    error, message = await as_codex(process, "get_diagnostics", file="escape/b.el")
    assert error and "outside" in message
    _, contents = await as_codex(process, "lispm://open-files")
    assert '"a.el"' in contents[0] and "b.el" not in contents[0]
