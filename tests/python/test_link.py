"""The link's description and its boundaries: the params Emacs sends are
checked against `protocol.py`, which README and the Emacs side must match;
the sidecar's errors reach an agent's MCP tools as tool errors."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, is_typeddict

import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from lispm_sidecar import protocol
from lispm_sidecar.app import Sidecar
from lispm_sidecar.errors import (
    InvalidParams,
    LispmError,
    UnknownAgent,
    VersionMismatch,
    tool_errors,
)
from lispm_sidecar.rpc import EmacsLink


async def test_tool_errors_makes_a_lispm_error_the_tool_error_the_model_reads() -> None:
    @tool_errors
    async def send(to: str) -> str:
        raise UnknownAgent(f"no agent named {to!r}")

    with pytest.raises(ToolError) as caught:
        await send("nobody")
    assert str(caught.value) == "no agent named 'nobody'"
    assert isinstance(caught.value.__cause__, UnknownAgent)


async def test_tool_errors_lets_results_and_other_failures_through() -> None:
    @tool_errors
    async def echo(text: str) -> str:
        if text == "bug":
            raise KeyError(text)
        return text

    assert await echo("hi") == "hi"
    with pytest.raises(KeyError):
        await echo("bug")
    assert not issubclass(KeyError, LispmError)


async def test_tool_errors_keeps_the_signature_the_tool_schema_comes_from() -> None:
    async def ask(request: Annotated[str, Field(description="What you ask.")],
                  to: str = "codex") -> str:
        return to + request

    wrapped = tool_errors(ask)
    assert wrapped.__name__ == "ask"
    assert inspect.iscoroutinefunction(wrapped)
    plain, checked = MCPServer(name="plain"), MCPServer(name="checked")
    plain.add_tool(ask)
    checked.add_tool(wrapped)
    [plain_tool], [checked_tool] = await plain.list_tools(), await checked.list_tools()
    assert checked_tool.input_schema == plain_tool.input_schema
    assert checked_tool.input_schema["properties"]["request"]["description"] == "What you ask."
    assert checked_tool.output_schema == plain_tool.output_schema


# The description of the link, and the check at its boundary


def test_check_names_the_key_that_is_missing_or_of_the_wrong_type() -> None:
    start = protocol.AGENT_START
    good = {"name": "claude", "kind": "claude", "folder": "/tmp"}
    assert start.check(good) is good
    for params, message in (
        ({"kind": "claude", "folder": "/tmp"}, "name must be a non-empty string"),
        (dict(good, name=""), "name must be a non-empty string"),
        (dict(good, instance=-1), "instance must be a non-negative integer"),
        (dict(good, instance=True), "instance must be a non-negative integer"),
        (dict(good, restore="yes"), "restore must be true or false"),
        (dict(good, session_id=7), "session_id must be a string"),
        (dict(good, openclaw=["codex"]), "openclaw must be an object"),
    ):
        with pytest.raises(InvalidParams) as caught:
            start.check(params)
        assert str(caught.value) == message
        assert caught.value.code == -32602


def test_check_takes_null_where_allowed_and_leaves_undescribed_keys() -> None:
    assert protocol.AGENT_START.check(
        {"name": "c", "kind": "claude", "folder": "/tmp", "session_id": None,
         "ide_port": None, "some_future_option": [1]})
    assert protocol.AUDIT.check({"agent": "a", "role": "r", "kind": "edit", "what": "w",
                                 "decision": "allow", "reason": None, "time": 1.5})
    with pytest.raises(InvalidParams, match=r"^instance must be a non-negative integer$"):
        protocol.AGENT_STOP.check({"name": "c", "instance": None})
    assert protocol.DIFF_RESOLVED.check({"id": "d1", "outcome": "saved", "contents": ""})
    with pytest.raises(InvalidParams, match=r"^outcome must be one of saved, rejected, closed$"):
        protocol.DIFF_RESOLVED.check({"id": "d1", "outcome": "maybe"})
    with pytest.raises(InvalidParams, match=r"^names must be a list of agent names$"):
        protocol.AGENTS_FORGET.check({"names": ["claude", ""]})


def test_hello_checks_the_protocol_before_anything_else() -> None:
    with pytest.raises(VersionMismatch, match="protocol 2, this sidecar 1"):
        protocol.HELLO.check({"protocol": 2, "emacs_pid": "no longer a number"})
    with pytest.raises(InvalidParams, match=r"^emacs_pid must be an integer$"):
        protocol.HELLO.check({"protocol": 1, "version": "0.1.0", "emacs_pid": "x"})


async def test_the_sidecar_serves_exactly_the_methods_described_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LISPM_RUNTIME_DIR", str(tmp_path / "run"))
    link = EmacsLink()
    Sidecar(link)
    assert set(link.protocol.methods) == {
        m.name for m in protocol.METHODS.values() if m.to == "sidecar"}
    with pytest.raises(ValueError, match="answered by Emacs"):
        link.serve(protocol.PASTE, lambda params: asyncio.sleep(0, {"pasted": True}))


ROOT = Path(__file__).resolve().parents[2]


def _elisp() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "elisp").rglob("*.el")))


def test_emacs_answers_exactly_the_methods_described_for_it() -> None:
    handled = set(re.findall(r"\(eql '((?:emacs|lispm)/[a-z-]+)\)", _elisp()))
    assert handled == {m.name for m in protocol.METHODS.values() if m.to == "emacs"}


def test_what_emacs_sends_and_the_sidecar_asks_is_described() -> None:
    elisp = _elisp()
    handled = set(re.findall(r"\(eql '((?:emacs|lispm)/[a-z-]+)\)", elisp))
    sent = set(re.findall(r"[^`]'((?:emacs|lispm)/[a-z-]+)", elisp)) - handled
    for_sidecar = {m.name for m in protocol.METHODS.values() if m.to == "sidecar"}
    assert sent and sent <= for_sidecar, sent - for_sidecar
    # The sidecar asks Emacs by description only (`EmacsLink.request` takes
    # a `Method`): no method of Emacs is named anywhere else.
    python = ROOT / "python" / "lispm_sidecar"
    by_name = {(path.name, name) for path in python.rglob("*.py") if path.name != "protocol.py"
               for name in re.findall(r"[\"'](emacs/[a-z-]+)[\"']", path.read_text())}
    assert not by_name, by_name


Documented = tuple[str, str, bool, frozenset[tuple[str, bool]] | None]

_SPAN = re.compile(r"(notification )?`((?:lispm|emacs)/[a-z-]+) (\{[^}`]*\}|PARAMS)`")


def documented_methods(readme: str) -> set[Documented]:
    """The methods README's "The link's methods" lists: (name, who answers,
    notification?, keys with whether each is optional; None for PARAMS)."""
    section = readme.split("\n### The link's methods\n", 1)[1].split("\n## ", 1)[0]
    to_sidecar, to_emacs = section.split("\nThe sidecar calls Emacs:\n", 1)
    found: set[Documented] = set()
    for to, text in (("sidecar", to_sidecar), ("emacs", to_emacs)):
        for notification, name, params in _SPAN.findall(text):
            keys = None if params == "PARAMS" else frozenset(
                (key.strip().rstrip("?"), key.strip().endswith("?"))
                for key in re.split(r"[,|]", params.strip("{}")) if key.strip())
            found.add((name, to, bool(notification), keys))
    return found


def described_methods() -> set[Documented]:
    return {(m.name, m.to, m.notification,
             frozenset((k.name, not k.required) for k in m.keys)
             if is_typeddict(m.params) else None)
            for m in protocol.METHODS.values()}


def test_readme_lists_the_methods_of_the_link_as_described() -> None:
    documented = documented_methods((ROOT / "README.md").read_text())
    described = described_methods()
    assert len(documented) == len(protocol.METHODS)
    assert documented - described == set(), "documented but not so described"
    assert described - documented == set(), "described but not so documented"


def test_the_readme_check_sees_a_method_missing_or_a_key_changed() -> None:
    readme = (ROOT / "README.md").read_text()
    assert documented_methods(readme) == described_methods()
    without = readme.replace("- `lispm/stats {}` → `{pid, rss_kb, agents}`\n", "")
    assert ("lispm/stats", "sidecar", False, frozenset()) in \
        described_methods() - documented_methods(without)
    renamed = readme.replace("`lispm/agent-stop {name, instance?}`",
                             "`lispm/agent-stop {name, instance}`")
    assert documented_methods(renamed) != described_methods()


def test_the_link_loads_without_the_mcp_sdk() -> None:
    """The SDK and uvicorn load with the first agent: the first answer to Emacs is quick."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, lispm_sidecar.__main__, lispm_sidecar.app; "
         "print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    loaded = set(done.stdout.split())
    assert not {"mcp", "uvicorn"} & loaded
