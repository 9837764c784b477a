"""Holon agents over the real sidecar: the registry, the skill, and `lispm-tool`."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from .sidecar_client import ROOT, SidecarProcess


async def fake_emacs(method: str, params: dict[str, Any]) -> Any:
    if method == "emacs/list-agents":
        return {"agents": [{"name": "holon", "kind": "holon", "folder": "/tmp",
                            "state": "running"}]}
    raise AssertionError(f"unexpected request {method}")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def lispm_tool(run: Path, *args: str, agent: str | None = "holon",
                     command: list[str] | None = None) -> tuple[int, str, str]:
    """Run lispm-tool as a Holon agent's command would; (exit, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "HOLON_AGENT_ID"}
    env.update(LISPM_RUNTIME_DIR=str(run), PYTHONPATH=str(ROOT / "python"))
    if agent is not None:
        env["HOLON_AGENT_ID"] = agent
    proc = await asyncio.create_subprocess_exec(
        *(command or [sys.executable, "-m", "lispm_sidecar.kinds.holon.cli"]), *args, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SidecarProcess]:
    monkeypatch.setenv("HOLON_HOME", str(tmp_path / "holon-home"))
    # No daemon listens: the sidecar's catalog refreshes fail, and say so in its log.
    monkeypatch.setenv("HOLON_HTTP_ADDR", f"127.0.0.1:{_closed_port()}")
    process = SidecarProcess(tmp_path / "run", fake_emacs)
    await process.start()
    await process.hello()
    await process.call("lispm/agent-start",
                       {"name": "claude", "kind": "claude", "folder": "/tmp", "instance": 1})
    await process.call("lispm/agent-start",
                       {"name": "holon", "kind": "holon", "folder": "/tmp", "instance": 2})
    yield process
    await process.close()


async def test_no_agent_id_unknown_id_and_usage(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code, out, err = await lispm_tool(run, "list_agents", agent=None)
    assert (code, out) == (3, "")
    assert "HOLON_AGENT_ID is not set" in err
    code, out, err = await lispm_tool(run, "list_agents", agent="nobody")
    assert (code, out) == (3, "")
    assert "no Holon agent 'nobody' is open in LispM" in err
    code, _, err = await lispm_tool(run, "send_message", "hi")
    assert code == 2 and "--to" in err
    code, _, err = await lispm_tool(run, "call_tool", "read_file", "--args", "[1]")
    assert code == 2 and "JSON object" in err
    code, out, _ = await lispm_tool(run, "--help")
    assert code == 0
    for part in ("send_message", "ask_agent --to claude", "exit codes", "--json"):
        assert part in out


async def test_holon_agent_registry_skill_and_tool(sidecar: SidecarProcess,
                                                   tmp_path: Path) -> None:
    run = tmp_path / "run"
    registry = run / "holon-agents.json"
    assert stat.S_IMODE(registry.stat().st_mode) == 0o600
    entry = orjson.loads(registry.read_bytes())["agents"]["holon"]
    served = {a["name"]: a for a in (await sidecar.call("lispm/agents", {}))["agents"]}
    assert entry["url"] == served["holon"]["url"]
    assert served["holon"]["holon_home"] == str(tmp_path / "holon-home")
    skill = tmp_path / "holon-home" / "agents" / "holon" / "skills" / "lispm" / "SKILL.md"
    text = skill.read_text()
    assert text.startswith("---\nname: lispm\n") and "lispm-tool send_message" in text
    wrapper = run / "bin" / "lispm-tool"
    assert str(wrapper) in text
    # The tools, through the sidecar's own launcher, as plain text and as JSON.
    code, out, err = await lispm_tool(run, "send_message", "--to", "claude", "Hello.",
                                      command=[str(wrapper)])
    assert (code, out, err) == (0, "sent to claude\n", "")
    code, out, _ = await lispm_tool(run, "--json", "list_agents")
    assert code == 0
    answer = orjson.loads(out)
    assert answer["ok"] and answer["result"]["you"] == "holon"
    code, out, err = await lispm_tool(run, "ask_agent", "--to", "claude", "Why?", "--json")
    assert code == 0 and orjson.loads(out)["text"] == "asked claude, request R1"
    # A refused tool call: exit 1 with the tool's message.
    code, out, err = await lispm_tool(run, "send_message", "--to", "nobody", "Hi.")
    assert code == 1 and "no agent named 'nobody'" in err
    code, out, err = await lispm_tool(run, "reply", "--request", "R9", "No.")
    assert code == 1 and out == ""
    # A revoked token: exit 4.
    token_file = Path(entry["token_file"])
    good = token_file.read_text()
    token_file.write_text("not-the-token\n")
    code, out, err = await lispm_tool(run, "list_agents")
    assert code == 4 and "refused the token" in err
    token_file.write_text(good)
    # Closing the agent takes its entry and its skill away.
    await sidecar.call("lispm/agent-stop", {"name": "holon", "instance": 2})
    assert "holon" not in orjson.loads(registry.read_bytes())["agents"]
    assert not skill.parent.exists()
    code, _, err = await lispm_tool(run, "list_agents")
    assert code == 3 and "no Holon agent 'holon'" in err


def test_lispm_tool_asks_an_agent_or_a_helper_of_a_role() -> None:
    from lispm_sidecar.kinds.holon.cli import build_parser, tool_call

    def parsed(*argv: str) -> tuple[str, dict[str, Any]]:
        return tool_call(build_parser().parse_args(list(argv)))

    assert parsed("ask_agent", "--to", "claude", "Why?") == \
        ("ask_agent", {"to": "claude", "request": "Why?"})
    assert parsed("ask_agent", "--role", "reviewer", "Look.") == \
        ("ask_agent", {"role": "reviewer", "request": "Look."})
    for wrong in (["--to", "claude", "--role", "reviewer"], []):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["ask_agent", *wrong, "?"])
