"""Holon agents: a daemon's agents, reached over its documented HTTP API.

Holon (holon-run/holon) keeps its agents in a daemon; LispM's terminal
only shows one (`holon tui --agent NAME`).  So for an agent of kind
`holon` the sidecar:

- hands messages to the daemon, `POST /api/control/agents/{id}/prompt
  {"text"}` (`DaemonHandover`); the daemon takes a prompt into the running
  turn at its next safe point, or starts a turn;
- follows the agent's state through the daemon's event stream
  (`watcher.py`);
- writes the agent's entry into the registry `lispm-tool` reads
  (`<runtime dir>/holon-agents.json`, mode 0600: agent id → its server's
  URL and token file), and a skill teaching `lispm-tool` into
  `<agent_home>/skills/lispm/SKILL.md`; both go when the agent stops,
  and the daemon's skill catalog is refreshed each time.

The daemon is found from the sidecar's environment: `HOLON_HTTP_ADDR`
(default 127.0.0.1:7878), `HOLON_HOME` (default `~/.holon`) and, for a
daemon in bearer mode, `HOLON_CONTROL_TOKEN`.  The agent id at the daemon
is the LispM agent's name.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import LispmError
from ...ledger import Message
from ...runtime import python_launcher, write_private

log = logging.getLogger(__name__)

REGISTRY_NAME = "holon-agents.json"
SKILL_NAME = "lispm"


class DaemonError(LispmError):
    """The Holon daemon refused or could not be reached."""

    code = -32035


class HolonDaemon:
    """The Holon daemon the sidecar's environment names."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("HOLON_HTTP_ADDR") or "127.0.0.1:7878"
        self.base = addr.rstrip("/") if "://" in addr else f"http://{addr}"
        self.home = Path(env.get("HOLON_HOME") or Path.home() / ".holon")
        token = env.get("HOLON_CONTROL_TOKEN")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: Any = None

    def agent_home(self, agent_id: str) -> Path:
        """Where agent AGENT_ID lives: `$HOLON_HOME/agents/<id>`."""
        return self.home / "agents" / agent_id

    def http(self) -> Any:
        """The shared aiohttp session (aiohttp is imported on first use)."""
        import aiohttp

        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=5, sock_connect=5))
        return self._http

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        import aiohttp

        try:
            async with self.http().request(method, self.base + path, json=body,
                                           headers=self.headers,
                                           timeout=aiohttp.ClientTimeout(total=30)) as resp:
                answer = await resp.json(content_type=None)
                if resp.status != 200:
                    raise DaemonError(f"Holon answered {method} {path} with {resp.status}: "
                                      f"{answer}")
                return answer
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            raise DaemonError(f"cannot reach Holon at {self.base}: {err}") from err

    async def prompt(self, agent_id: str, text: str) -> str:
        """Give AGENT_ID the prompt TEXT; return the daemon's message id."""
        answer = await self._call("POST", f"/api/control/agents/{agent_id}/prompt",
                                  {"text": text})
        if not isinstance(answer, dict) or not answer.get("ok"):
            raise DaemonError(f"Holon did not take the prompt for {agent_id}: {answer}")
        return str(answer.get("message_id", ""))

    async def state(self, agent_id: str) -> dict[str, Any]:
        """The session state of AGENT_ID (current run, pending count)."""
        answer = await self._call("GET", f"/api/agents/{agent_id}/state")
        return answer if isinstance(answer, dict) else {}

    async def refresh_skills(self) -> None:
        """Ask the daemon to rescan its skill roots (logged, never raised)."""
        try:
            await self._call("POST", "/api/skills/catalog/refresh", {})
        except DaemonError as err:
            log.warning("could not refresh Holon's skill catalog: %s", err)


class DaemonHandover:
    """Hand a message to a daemon's agent: once the daemon takes it, it is the agent's."""

    def __init__(self, daemon: HolonDaemon) -> None:
        self._daemon = daemon

    async def hand_over(self, name: str, instance: int, message: Message, text: str) -> bool:
        await self._daemon.prompt(name, text)
        return True


# ------------------------------------------------------------------ registry

@contextlib.contextmanager
def _locked(root: Path) -> Iterator[Path]:
    lock = root / (REGISTRY_NAME + ".lock")
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield root / REGISTRY_NAME
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {"agents": {}}
    if not isinstance(data, dict) or not isinstance(data.get("agents"), dict):
        return {"agents": {}}
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    temp = path.with_name(path.name + f".{os.getpid()}.tmp")
    write_private(temp, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    os.replace(temp, path)


def register(root: Path, agent_id: str, url: str, token_file: Path, owner_pid: int) -> None:
    """Record that Holon agent AGENT_ID's LispM server is at URL."""
    with _locked(root) as path:
        data = _read(path)
        data["agents"][agent_id] = {"url": url, "token_file": str(token_file),
                                    "owner_pid": owner_pid}
        _write(path, data)


def unregister(root: Path, agent_id: str, token_file: Path) -> None:
    """Remove AGENT_ID's entry, if it is still the one for TOKEN_FILE."""
    with _locked(root) as path:
        data = _read(path)
        entry = data["agents"].get(agent_id)
        if isinstance(entry, dict) and entry.get("token_file") == str(token_file):
            del data["agents"][agent_id]
            _write(path, data)


def registered(root: Path) -> dict[str, Any]:
    """The registry's agents (for tests and debugging)."""
    agents: dict[str, Any] = _read(root / REGISTRY_NAME)["agents"]
    return agents


# ------------------------------------------------------------------ the tool and the skill

def tool_command(root: Path) -> Path:
    """Write `<root>/bin/lispm-tool`, which runs this sidecar's `lispm-tool`; return it.

    The console script `lispm-tool` is installed with the sidecar, but the
    daemon's commands may not have the venv on their PATH; this launcher,
    with absolute paths, works from any shell.
    """
    return python_launcher(root, "lispm-tool", "lispm_sidecar.kinds.holon.cli")



SKILL_TEXT = """\
---
name: lispm
description: Talk to the other AI agents in the user's Emacs (Claude Code, Codex, ...) \
and use LispM's tools, with the lispm-tool command.
---

You run inside LispM, next to other AI agents in the user's Emacs. You are \
the agent `{name}`. Reach them with the shell command `lispm-tool` (its full \
path: `{tool}`); `lispm-tool --help` explains everything.

- `lispm-tool list_agents`: the live agents, their folders and states, and the roles.
- `lispm-tool send_message --to claude "text"`: tell another agent something.
- `lispm-tool ask_agent --to claude "request"`: ask; it returns a request id \
such as R1 at once, and the answer comes later as your next prompt, headed \
`[Reply from claude to request R1]`. Do not wait or poll.
- `lispm-tool ask_agent --role reviewer "request"`: the same, asking a new \
helper of that role (see list_agents), started in your folder; it answers, then retires.
- A prompt headed `[Request R1 from claude]` is a request to you: answer it \
with `lispm-tool reply --request R1 "your complete answer"`.
- Prompts headed `[Message from NAME]` are messages from other agents.
- `lispm-tool search_tools "words"`, `lispm-tool skill NAME`, \
`lispm-tool call_tool NAME --args '{{"path": "notes.el"}}'`: LispM's own tools, \
which run in Emacs under the user's policy (some wait for the user's approval).

Refer to places as org links: [[file:/abs/path::LINE]]. Add `--json` for JSON \
output. Exit codes: 0 done, 1 the tool refused (read its message), 2 bad usage, \
3 not inside a LispM agent, 4 token refused.
"""


def write_skill(agent_home: Path, name: str, tool: Path) -> Path:
    """Write LispM's skill into AGENT_HOME's skills folder; return its folder."""
    folder = agent_home / "skills" / SKILL_NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_TEXT.format(name=name, tool=tool))
    return folder


def remove_skill(agent_home: Path) -> None:
    """Remove LispM's skill from AGENT_HOME."""
    shutil.rmtree(agent_home / "skills" / SKILL_NAME, ignore_errors=True)
