"""A stand-in for the Holon daemon (holon-run/holon), for tests only.

Holon cannot be installed here, so LispM is tested against this program,
which implements only what Holon documents and nothing LispM-specific:

- `holon serve`: the daemon, HTTP on `HOLON_HTTP_ADDR` (default
  127.0.0.1:7878), its agents under `$HOLON_HOME/agents/<id>/` (default
  `~/.holon`), each with `AGENTS.md` and `skills/`.  An agent exists once
  its folder does (`holon agent create ID` makes one).
- `GET /handshake`: protocol `holon-control` 1; auth mode `local`, or
  `bearer` when `HOLON_CONTROL_TOKEN` is set (then checked on
  `/api/control/*`).
- `GET /api/agents/list`.
- `POST /api/control/agents/{id}/prompt {"text"}` → `{ok, agent_id,
  message_id}`, interject semantics: an idle agent starts a turn; a running
  turn takes the prompt at its next safe point (after the current tool
  call's result, before the next model request); a prompt that comes as a
  turn ends starts the next turn.
- `GET /api/agents/{id}/state` → `{agent_id, status, current_run_id,
  pending_count, last_event_seq}`; `GET /api/agents/{id}/events[?after_seq]`
  and the SSE stream `GET /api/agents/{id}/events/stream` (SSE `id` = the
  event's `seq`, `event` = its kind: `operator_prompt`, `turn_started`,
  `turn_entry`, `turn_finished`); `GET /api/agents/{id}/transcript`.
- `POST /api/skills/catalog/refresh`: rescans every agent's
  `<agent_home>/skills/*/SKILL.md`.  The catalog (name, description, path)
  goes into the model's instructions.
- The model: the OpenAI Responses API at `HOLON_OPENAI_BASE_URL` (else
  `OPENAI_BASE_URL`), key `OPENAI_API_KEY`, model `HOLON_MODEL` (default
  `openai/gpt-5.4`).  One tool, `exec_command {cmd}`, runs a shell command in
  the agent's home with `HOLON_RUNTIME=1`, `HOLON_AGENT_ID` and
  `HOLON_AGENT_HOME` added to the environment.
- `holon tui --agent ID`: a plain terminal view of one agent: it prints the
  agent's turns as the events stream tells them, and sends each line typed
  to the prompt endpoint.

Run as `python -m lispm_sidecar.testing.holon_standin serve`; tests put a
`holon` script that does this on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

Json = dict[str, Any]

EXEC_TOOL: Json = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command in your home folder; returns its exit code and output.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                   "required": ["cmd"], "additionalProperties": False},
}
MAX_STEPS = 20


def holon_home() -> Path:
    """`$HOLON_HOME`, else `~/.holon`."""
    return Path(os.environ.get("HOLON_HOME") or Path.home() / ".holon")


def http_addr() -> str:
    """`$HOLON_HTTP_ADDR`, else 127.0.0.1:7878."""
    return os.environ.get("HOLON_HTTP_ADDR") or "127.0.0.1:7878"


def create_agent(home: Path, agent_id: str) -> Path:
    """Make the home of agent AGENT_ID (as `holon agent create`); return it."""
    agent_home = home / "agents" / agent_id
    (agent_home / "skills").mkdir(parents=True, exist_ok=True)
    agents_md = agent_home / "AGENTS.md"
    if not agents_md.exists():
        agents_md.write_text(f"# {agent_id}\n\nA Holon agent.\n")
    return agent_home


def _skill_entry(skill_md: Path) -> Json:
    text = skill_md.read_text(errors="replace")
    name, description, body = skill_md.parent.name, "", text
    if text.startswith("---\n") and "\n---" in text[4:]:
        front, _, body = text[4:].partition("\n---")
        for line in front.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "name" and value.strip():
                name = value.strip()
            elif key.strip() == "description":
                description = value.strip()
    if not description:
        paragraphs = [p.strip() for p in body.strip().split("\n\n") if p.strip()]
        description = paragraphs[0].replace("\n", " ") if paragraphs else ""
    return {"name": name, "description": description, "path": str(skill_md)}


def scan_skills(agent_home: Path) -> list[Json]:
    """The catalog of AGENT_HOME's skills folder."""
    root = agent_home / "skills"
    if not root.is_dir():
        return []
    return [_skill_entry(md) for md in sorted(root.glob("*/SKILL.md")) if md.is_file()]


@dataclass
class AgentSession:
    """One agent: its conversation, its current run and its events."""

    agent_id: str
    home: Path
    daemon: Daemon
    input: list[Json] = field(default_factory=list)
    pending: list[Json] = field(default_factory=list)
    current_run_id: str | None = None
    events: list[Json] = field(default_factory=list)
    skills: list[Json] = field(default_factory=list)
    waiters: set[asyncio.Queue[Json]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None

    def emit(self, kind: str, **data: Any) -> None:
        event = {"seq": len(self.events) + 1, "kind": kind, "agent_id": self.agent_id, **data}
        self.events.append(event)
        for queue in list(self.waiters):
            queue.put_nowait(event)

    def state(self) -> Json:
        status = "idle"
        if self.current_run_id is not None:
            status = "waiting_for_safe_point" if self.pending else "running"
        return {"agent_id": self.agent_id, "agent_home": str(self.home), "status": status,
                "current_run_id": self.current_run_id, "pending_count": len(self.pending),
                "last_event_seq": len(self.events)}

    def prompt(self, text: str) -> str:
        message_id = f"msg_{uuid.uuid4().hex[:12]}"
        self.pending.append({"message_id": message_id, "text": text})
        self.emit("operator_prompt", message_id=message_id, text=text,
                  interject=self.current_run_id is not None)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run())
        return message_id

    def _drain(self) -> None:
        for message in self.pending:
            self.input.append({"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": message["text"]}]})
            self.emit("turn_entry", entry="user", message_id=message["message_id"],
                      text=message["text"])
        self.pending.clear()

    async def _run(self) -> None:
        while self.pending:
            run_id = f"run_{uuid.uuid4().hex[:12]}"
            self.current_run_id = run_id
            self.emit("turn_started", run_id=run_id)
            error = None
            try:
                self._drain()
                await self._turn()
            except Exception as err:  # a failed turn is reported, the agent lives on
                error = f"{type(err).__name__}: {err}"
                self.emit("turn_entry", entry="error", text=error)
            self.current_run_id = None
            self.emit("turn_finished", run_id=run_id, error=error)

    def _instructions(self) -> str:
        parts = [f"You are the Holon agent {self.agent_id}."]
        agents_md = self.home / "AGENTS.md"
        if agents_md.is_file():
            parts.append(agents_md.read_text(errors="replace"))
        if self.skills:
            parts.append("Skills (open a skill's SKILL.md when it is relevant):\n" + "\n".join(
                f"- {s['name']}: {s['description']} ({s['path']})" for s in self.skills))
        return "\n\n".join(parts)

    async def _turn(self) -> None:
        for _ in range(MAX_STEPS):
            output = await self.daemon.model(self._instructions(), self.input)
            calls = []
            for item in output:
                if item.get("type") == "message":
                    text = "".join(part.get("text", "") for part in item.get("content") or [])
                    self.input.append({"type": "message", "role": "assistant",
                                       "content": [{"type": "output_text", "text": text}]})
                    self.emit("turn_entry", entry="assistant", text=text)
                elif item.get("type") == "function_call":
                    self.input.append({k: item[k] for k in ("type", "call_id", "name",
                                                            "arguments") if k in item})
                    calls.append(item)
            if not calls:
                return
            for call in calls:
                result = await self._tool(call)
                self.input.append({"type": "function_call_output", "call_id": call["call_id"],
                                   "output": result})
            # The safe point: prompts that came meanwhile join this turn.
            self._drain()
        self.emit("turn_entry", entry="error", text=f"stopped after {MAX_STEPS} model calls")

    async def _tool(self, call: Json) -> str:
        try:
            args = json.loads(call.get("arguments") or "{}")
        except ValueError:
            args = {}
        cmd = args.get("cmd") if isinstance(args, dict) else None
        if call.get("name") != "exec_command" or not isinstance(cmd, str):
            text = f"unknown tool {call.get('name')} or bad arguments"
            self.emit("turn_entry", entry="tool_result", text=text)
            return text
        self.emit("turn_entry", entry="tool_call", name="exec_command", cmd=cmd)
        env = dict(os.environ, HOLON_RUNTIME="1", HOLON_AGENT_ID=self.agent_id,
                   HOLON_AGENT_HOME=str(self.home))
        proc = await asyncio.create_subprocess_shell(
            cmd, cwd=self.home, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        text = f"exit code {proc.returncode}\n{out.decode(errors='replace')}"
        self.emit("turn_entry", entry="tool_result", text=text)
        return text


class Daemon:
    """The agents of one `holon serve`, and its model client."""

    def __init__(self, home: Path, token: str | None) -> None:
        self.home = home
        self.token = token
        self.agents: dict[str, AgentSession] = {}
        self.http: aiohttp.ClientSession | None = None
        base = os.environ.get("HOLON_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        self.base_url = (base or "https://api.openai.com/v1").rstrip("/")
        self.model_name = (os.environ.get("HOLON_MODEL") or "openai/gpt-5.4").split("/")[-1]

    def agent(self, agent_id: str) -> AgentSession:
        """The session of AGENT_ID, whose folder must exist; else 404."""
        session = self.agents.get(agent_id)
        agent_home = self.home / "agents" / agent_id
        if session is None:
            if "/" in agent_id or agent_id.startswith(".") or not agent_home.is_dir():
                raise web.HTTPNotFound(text=json.dumps({"error": f"no agent {agent_id}"}),
                                       content_type="application/json")
            session = AgentSession(agent_id, agent_home, self, skills=scan_skills(agent_home))
            self.agents[agent_id] = session
        return session

    async def model(self, instructions: str, items: list[Json]) -> list[Json]:
        """One non-streaming Responses call; the output items."""
        assert self.http is not None
        body = {"model": self.model_name, "instructions": instructions, "input": items,
                "tools": [EXEC_TOOL], "stream": False}
        headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}"}
        async with self.http.post(f"{self.base_url}/responses", json=body,
                                  headers=headers) as resp:
            answer = await resp.json(content_type=None)
            if resp.status != 200:
                raise RuntimeError(f"model answered {resp.status}: {answer}")
        return list(answer.get("output") or [])


def _check_token(daemon: Daemon, request: web.Request) -> None:
    if daemon.token and request.headers.get("Authorization") != f"Bearer {daemon.token}":
        raise web.HTTPUnauthorized(text='{"error": "bearer token required"}',
                                   content_type="application/json")


def make_app(daemon: Daemon, listen: str) -> web.Application:
    """The daemon's HTTP routes."""
    routes = web.RouteTableDef()

    @routes.get("/handshake")
    async def handshake(request: web.Request) -> web.Response:
        mode = "bearer" if daemon.token else "local"
        return web.json_response({
            "protocol": {"name": "holon-control", "version": 1},
            "auth": {"mode": mode, "required": bool(daemon.token)},
            "runtime": {"default_agent": "main", "listen": listen}})

    @routes.get("/api/agents/list")
    async def agents_list(request: web.Request) -> web.Response:
        root = daemon.home / "agents"
        ids = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        return web.json_response({"agents": [
            {"id": i, "agent_home": str(root / i), "status": daemon.agent(i).state()["status"]}
            for i in ids]})

    @routes.post("/api/control/agents/{id}/prompt")
    async def prompt(request: web.Request) -> web.Response:
        _check_token(daemon, request)
        session = daemon.agent(request.match_info["id"])
        try:
            body = await request.json()
        except ValueError:
            body = None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            return web.json_response({"ok": False, "error": "text is required"}, status=400)
        message_id = session.prompt(text)
        return web.json_response({"ok": True, "agent_id": session.agent_id,
                                  "message_id": message_id})

    @routes.get("/api/agents/{id}/state")
    async def state(request: web.Request) -> web.Response:
        return web.json_response(daemon.agent(request.match_info["id"]).state())

    @routes.get("/api/agents/{id}/transcript")
    async def transcript(request: web.Request) -> web.Response:
        session = daemon.agent(request.match_info["id"])
        return web.json_response({"entries": [e for e in session.events
                                              if e["kind"] == "turn_entry"]})

    @routes.get("/api/agents/{id}/events")
    async def events(request: web.Request) -> web.Response:
        session = daemon.agent(request.match_info["id"])
        after = int(request.query.get("after_seq", "0") or 0)
        return web.json_response({"events": session.events[after:]})

    @routes.get("/api/agents/{id}/events/stream")
    async def events_stream(request: web.Request) -> web.StreamResponse:
        session = daemon.agent(request.match_info["id"])
        after = int(request.query.get("after_seq", "0") or 0)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        queue: asyncio.Queue[Json] = asyncio.Queue()
        session.waiters.add(queue)
        try:
            for event in session.events[after:]:
                queue.put_nowait(event)
            await resp.write(b": connected\n\n")
            while True:
                event = await queue.get()
                await resp.write(f"id: {event['seq']}\nevent: {event['kind']}\n"
                                 f"data: {json.dumps(event)}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            session.waiters.discard(queue)
        return resp

    @routes.post("/api/skills/catalog/refresh")
    async def refresh(request: web.Request) -> web.Response:
        catalog: dict[str, list[Json]] = {}
        for agent_id, session in daemon.agents.items():
            session.skills = scan_skills(session.home)
            catalog[agent_id] = session.skills
        return web.json_response({"ok": True, "agents": catalog})

    app = web.Application()
    app.add_routes(routes)
    return app


async def serve(args: argparse.Namespace) -> None:
    """Run the daemon until SIGTERM or SIGINT."""
    import signal

    home = holon_home()
    create_agent(home, "main")
    daemon = Daemon(home, os.environ.get("HOLON_CONTROL_TOKEN") or None)
    listen = http_addr()
    host, _, port = listen.rpartition(":")
    daemon.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
    runner = web.AppRunner(make_app(daemon, listen))
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    print(f"holon (stand-in) serving on http://{listen}, home {home}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for session in daemon.agents.values():
        if session.task is not None:
            session.task.cancel()
    await runner.cleanup()
    await daemon.http.close()


def _show(event: Json) -> str | None:
    kind, entry = event.get("kind"), event.get("entry")
    if kind == "turn_started":
        return "── turn started"
    if kind == "turn_finished":
        return "── turn finished" + (f" ({event['error']})" if event.get("error") else "")
    if kind == "operator_prompt":
        return "(prompt queued for the running turn)" if event.get("interject") else None
    if entry == "user":
        return f"› {event.get('text')}"
    if entry == "assistant":
        return f"● {event.get('text')}"
    if entry == "tool_call":
        return f"$ {event.get('cmd')}"
    if entry in ("tool_result", "error"):
        lines = str(event.get("text", "")).splitlines()
        return "\n".join(f"  {line}" for line in lines[:8])
    return None


async def tui(args: argparse.Namespace) -> None:
    """Show agent ARGS.agent's turns; send each typed line as a prompt."""
    base = f"http://{http_addr()}"
    agent = args.agent
    headers = {}
    if token := os.environ.get("HOLON_CONTROL_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    print(f"Holon (stand-in) — agent {agent} at {base}", flush=True)
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:

        async def typed() -> None:
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    return
                # A terminal's bracketed paste arrives with its markers.
                text = line.replace("\x1b[200~", "").replace("\x1b[201~", "").strip()
                if text:
                    async with http.post(f"{base}/api/control/agents/{agent}/prompt",
                                         json={"text": text}, headers=headers) as resp:
                        if resp.status != 200:
                            print(f"! prompt refused: {resp.status} {await resp.text()}",
                                  flush=True)

        reader = asyncio.create_task(typed())
        seq = 0
        try:
            for attempt in itertools.count():
                try:
                    async with http.get(f"{base}/api/agents/{agent}/events/stream",
                                        params={"after_seq": str(seq)}) as resp:
                        if resp.status != 200:
                            print(f"! {resp.status} {await resp.text()}", flush=True)
                        else:
                            print(f"Ready. Type a prompt and Return. (attempt {attempt + 1})",
                                  flush=True)
                            async for raw in resp.content:
                                line = raw.decode(errors="replace").rstrip("\n")
                                if line.startswith("data: "):
                                    event = json.loads(line[6:])
                                    seq = event.get("seq", seq)
                                    if (shown := _show(event)) is not None:
                                        print(shown, flush=True)
                except aiohttp.ClientError as err:
                    print(f"! cannot reach the daemon: {err}", flush=True)
                await asyncio.sleep(1)
        finally:
            reader.cancel()


def main(argv: list[str] | None = None) -> int:
    """The `holon` command line of the stand-in."""
    parser = argparse.ArgumentParser(prog="holon", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the daemon in the foreground")
    tui_parser = sub.add_parser("tui", help="a terminal view of one agent")
    tui_parser.add_argument("--agent", default="main")
    agent_parser = sub.add_parser("agent", help="manage agents")
    agent_sub = agent_parser.add_subparsers(dest="agent_command", required=True)
    create_parser = agent_sub.add_parser("create", help="create an agent's home")
    create_parser.add_argument("id")
    args = parser.parse_args(argv)
    if args.command == "agent":
        print(create_agent(holon_home(), args.id))
        return 0
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args) if args.command == "serve" else tui(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
