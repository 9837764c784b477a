"""The scripted model gateway: a local stand-in for the model APIs.

The real agent CLIs (Claude Code, Codex, Hermes, OpenClaw) are pointed at this
server in tests and in `make demo`. It speaks three dialects, streaming (SSE)
and not:

- Anthropic Messages: `POST …/messages` (Claude Code sends
  `/v1/messages?beta=true`), `POST …/messages/count_tokens`.
- OpenAI Responses: `POST …/responses` (Codex), with namespaced MCP calls.
- Chat Completions: `POST …/chat/completions` (Hermes, OpenClaw).

Other routes: `HEAD /` and `GET /` (Claude's preflight) answer 200; any GET
path ending `/models` or containing `/models/` answers a model list (both
OpenAI and Anthropic shaped); anything else is logged and answered 404.

Script
------
A script is a JSON list of rules::

    [{"match": "list the agents",
      "steps": [{"tool": "lispm.list_agents", "args": {}},
                {"say": "The agents: {last_tool_result}"}]},
     {"match": "make a file",
      "steps": [{"text": "Creating it.", "shell": "touch x.txt", "escalate": true},
                {"say": "Created.", "delay": 2}]},
     {"match": "", "steps": [{"say": "fallback for every other prompt"}]}]

For each main request the gateway finds the last real user prompt P (skipping
injected context: Claude's `role:"system"` messages, `<system-reminder>`
blocks and interrupt markers; Codex's developer message,
`<environment_context>`, `# AGENTS.md`, `<user_instructions>`; OpenClaw's
internal-context message), takes the first rule whose `match` is a substring
of P (and whose `api`, if the rule has one, is the request's dialect:
`anthropic`, `responses` or `chat`), counts the rounds of tool results after
P (n: the results after one model reply are one round) and answers
`steps[n]`; once n ≥ len(steps) it answers the text `done`. No state is kept between requests, so
a rule's steps are: tool/shell calls, each answered after the previous
result, then usually one `say`. A new prompt starts again at step 0.

A step is one model response, with exactly one of:

- `{"say": "text"}`: a text reply.
- `{"tool": "lispm.list_agents", "args": {...}}`: a tool call. `server.tool`
  maps per request to what is offered: Anthropic `mcp__lispm__list_agents`;
  Responses the namespace tool `mcp__lispm` + `list_agents` (or a flat
  function of either name); Chat Completions any offered name that ends with
  `list_agents` and mentions `lispm` (Hermes: `mcp__lispm__list_agents`). An
  exact offered name (`Read`, `mcp__lispm__list_agents`,
  `mcp__lispm.list_agents`) works too. `"raw": true` sends the name as given.
  A tool that is not offered is answered with the text
  `tool <name> not offered`, so the failure shows.
- `{"shell": "cmd"}`: the client's own shell tool: Claude `Bash {command,
  description}`, Codex `exec_command {cmd}`, Hermes `terminal`, OpenClaw
  `exec`. `"escalate": true` adds Codex's `sandbox_permissions:
  "require_escalated"` and a `justification` (an approval prompt);
  `"description"` and `"justification"` may be given.

- `{"calls": [{"tool": "read_file", "args": {...}}, ...]}`: several tool
  calls in one reply (each name as in a `tool` step), after `"text"` if given.
  A call with `"args_raw": "text"` instead of `args` sends that text as its
  arguments, JSON or not (a model's malformed call).
  Its results, however many, count as one step: a step is one model reply,
  and the results after one reply are one round.
- `{"long": N}`: a text reply of N characters (numbered ASCII lines,
  `gateway_script.long_text(N)`), streamed in pieces of 1024 characters
  (`"piece"` sets another size).
- `{"status": 529, "body": ...}`: that HTTP status instead of a reply, with
  `body` as given (a string goes as text/plain, anything else as JSON;
  without it, an Anthropic-shaped error object).

Optional keys: `"text"` (said before a tool or shell call), `"delay"`
(seconds spread over the streamed pieces: slow streaming), `"piece"` (stream
the text in pieces of that many characters, not word by word) and `"cut"`
(K: after K streamed pieces the gateway drops the connection, so the stream
ends without its final event). In every string,
`{last_tool_result}` is the text of the newest tool result, `{prompt}` P, and
`{request_id}` the id in a LispM `[Request R<n> from …]` header in P.

Directives
----------
When no rule matches (always, with no script: the `make demo` default), P is
read for directives: `TOOL:<name>[:<json args>]` (names as in a `tool` step),
`RAWTOOL:<name>`, `BASH:<cmd>`, `ESCBASH:<cmd>` (to the end of the line),
`SLEEP:<seconds>` (stream slowly), `PRETEXT` (text before the call). After a
tool result the reply is `RESULT: <first 300 chars>`; otherwise
`ECHO: <P>`.

Side requests
-------------
Answered without touching the script: Claude's title request
(`output_config.format` json_schema → JSON of that schema; the title is the
first words of its `<session>` text), Codex's "Generate a concise,
single-line task title" request (the first words after `User prompt:`),
Hermes's title request and its security reviewer (→ `ESCALATE`),
`count_tokens`, `/v1/models`, `HEAD /`. Verified with the real TUIs: Claude
sends its title request before the first main request, Codex after it; both
are logged with kind `title`, so filter on kind `main` (`main_requests`).

Log and control
---------------
Every request is recorded: in memory (`Gateway.requests`, `GET
/_gateway/requests[?since=N]`) and, with a log path, as one JSON line each.
Fields: `n`, `time` (local, ISO 8601), `t` (Unix seconds), `method`, `path`
(with the query), `api` (anthropic, responses, chat,
other), `kind` (main, title, review, preflight, count_tokens, models,
unknown), `headers` (user-agent, originator, x-app, anthropic-version),
`auth` (the scheme only: `Bearer` or `x-api-key`), `model`, `stream`,
`prompt`, `tool_results` ([{name, text}]), `tools` (offered names, Responses
namespace tools as `namespace.name`), `answer` ({source: script, done,
directive, echo or side; rule, match, step; text (its first 4000
characters, and `text_length` if longer); tool; args; `calls` when there are
several; delay, status, cut when set}), `prompt_tokens` ({tokens,
cache_read, cache_write}: the prompt as the API's cache would count it,
gateway_cache.py; its usage reports the same), `status`, `body_file`, and
`cancelled`: true once the gateway saw the client close a stream before its
end (the log file is then rewritten with it). The raw body goes to
`<log>.bodies/<n>.json` (in memory when there is no log; `await
Gateway.body(n)`, `GET /_gateway/requests/<n>/body`). The log file is
truncated when the gateway starts.

With `api_keys` (`--api-key`, repeatable), a model request whose
`x-api-key` or `Authorization: Bearer` is not one of them is answered 401.

`POST /_gateway/script` (a JSON list) replaces the rules, `POST
/_gateway/rules` (a list or one rule) appends, `GET /_gateway/script` shows
them, `POST /_gateway/reset` clears the log (numbers keep counting). These
answer only clients on the loopback interface; the gateway binds 127.0.0.1.

Use
---
In-process (pytest, asyncio)::

    async with Gateway([{"match": "hi", "steps": [{"say": "hello"}]}]) as gw:
        env = {"ANTHROPIC_BASE_URL": gw.url, "OPENAI_BASE_URL": gw.openai_url}
        ...
        assert gw.main_requests("anthropic")[-1]["answer"]["text"] == "hello"

As a program (runs until SIGTERM or SIGINT)::

    python -m lispm_sidecar.testing.gateway --port 0 --port-file F \\
        --log F.jsonl [--script S.json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from . import gateway_anthropic, gateway_chat, gateway_responses
from .gateway_cache import TOKEN_BYTES, Prompt, PromptCache
from .gateway_script import (
    Decision,
    Reply,
    Rule,
    ScriptError,
    decide,
    parse_rule,
    parse_script,
)
from .gateway_wire import Exchange, Json, StreamCut, open_sse, tokens

__all__ = ["Gateway", "ScriptError", "load_script", "main"]

MAX_BODY = 64 * 1024 * 1024
LOGGED_HEADERS = ("user-agent", "originator", "x-app", "anthropic-version")
RESULT_LOG_CHARS = 4000
DEFAULT_MODELS = ("fake-model",)


@dataclass(frozen=True)
class Dialect:
    """How one API is parsed and answered."""

    parse: Callable[[Json], Exchange]
    complete: Callable[[Reply, Exchange, Prompt], Json]
    stream: Callable[[web.StreamResponse, Reply, Exchange, Prompt], Awaitable[None]]


DIALECTS = {
    "anthropic": Dialect(gateway_anthropic.parse, gateway_anthropic.complete,
                         gateway_anthropic.stream),
    "responses": Dialect(gateway_responses.parse, gateway_responses.complete,
                         gateway_responses.stream),
    "chat": Dialect(gateway_chat.parse, gateway_chat.complete, gateway_chat.stream),
}


def classify(method: str, path: str) -> tuple[str, str]:
    """`(api, kind)` of a request from its method and path (no query)."""
    if path in ("", "/") and method in ("HEAD", "GET"):
        return "other", "preflight"
    if method == "POST":
        for suffix, api, kind in (("/messages/count_tokens", "anthropic", "count_tokens"),
                                  ("/messages", "anthropic", "main"),
                                  ("/responses", "responses", "main"),
                                  ("/chat/completions", "chat", "main")):
            if path.endswith(suffix):
                return api, kind
    if method == "GET" and (path.endswith("/models") or "/models/" in path):
        return "other", "models"
    return "other", "unknown"


def load_script(path: str | os.PathLike[str]) -> list[Rule]:
    """Rules from a JSON script file (blocking: call it off the loop)."""
    return parse_script(orjson.loads(Path(path).read_bytes()))


def _auth_scheme(request: web.Request) -> str | None:
    value = request.headers.get("Authorization")
    if value:
        return value.split(" ", 1)[0]
    return "x-api-key" if "x-api-key" in request.headers else None


def _to_rules(script: Any) -> list[Rule]:
    if script is None:
        return []
    if isinstance(script, Sequence) and all(isinstance(r, Rule) for r in script):
        return list(script)
    return parse_script(script)


def _binary(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _api_key(request: web.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme == "Bearer" and value:
        return value
    return request.headers.get("x-api-key")


def _error_response(status: int, body: Any) -> web.Response:
    """A scripted HTTP error: BODY as given (a string), as JSON, or a default."""
    if isinstance(body, str):
        return web.Response(text=body, status=status, content_type="text/plain")
    if body is None:
        kind = "overloaded_error" if status == 529 else "scripted_error"
        body = {"type": "error", "error": {"type": kind,
                                           "message": f"scripted HTTP status {status}"}}
    return _binary(body, status)


def _replace_file(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class Gateway:
    """The scripted model gateway; see the module docstring."""

    def __init__(self, script: Any = None, *, host: str = "127.0.0.1", port: int = 0,
                 log_path: str | os.PathLike[str] | None = None,
                 models: Sequence[str] = DEFAULT_MODELS,
                 api_keys: Sequence[str] = ()) -> None:
        self.host = host
        self._api_keys = frozenset(api_keys)
        self._want_port = port
        self._log = Path(log_path) if log_path is not None else None
        self._models = list(models)
        self._rules = _to_rules(script)
        self._entries: list[Json] = []
        self._bodies: dict[int, bytes] = {}
        self._prompts = PromptCache()
        self._seq = 0
        self._lock = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ---------------------------------------------------------------- life

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`: the Anthropic base URL."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`: the OpenAI-style base URL."""
        return f"{self.url}/v1"

    async def start(self) -> None:
        """Listen; afterwards `port` and `url` are set."""
        if self._log is not None:
            await asyncio.to_thread(self._prepare_log, self._log)
        app = web.Application(client_max_size=MAX_BODY)
        self._add_control_routes(app)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self._want_port).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Close the listener and any open streams."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -------------------------------------------------------------- script

    @property
    def rules(self) -> list[Rule]:
        """The current rules."""
        return list(self._rules)

    def set_script(self, script: Any) -> None:
        """Replace the rules (a JSON-like list of rules, or `Rule`s)."""
        self._rules = _to_rules(script)

    def add_rules(self, rules: Any) -> None:
        """Append rules (a list, or one rule object)."""
        if isinstance(rules, Rule):
            self._rules.append(rules)
        elif isinstance(rules, dict):
            self._rules.append(parse_rule(rules, len(self._rules)))
        else:
            self._rules.extend(_to_rules(rules))

    # ----------------------------------------------------------------- log

    @property
    def requests(self) -> list[Json]:
        """Every recorded request, oldest first."""
        return list(self._entries)

    def main_requests(self, api: str | None = None) -> list[Json]:
        """The recorded main (non-side) model requests, of one `api` if given."""
        return [e for e in self._entries
                if e["kind"] == "main" and (api is None or e["api"] == api)]

    async def body(self, n: int) -> Any:
        """The decoded body of request number `n`."""
        return orjson.loads(await self._raw_body(n))

    async def wait_for(self, predicate: Callable[[Json], bool]) -> Json:
        """The first recorded entry satisfying `predicate`, waiting for it.

        Bound the wait with `asyncio.timeout(...)` around the call.
        """
        async with self._changed:
            while True:
                found = next((e for e in self._entries if predicate(e)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    async def reset(self) -> None:
        """Forget the recorded requests (numbers keep counting)."""
        async with self._lock:
            self._entries.clear()
            self._prompts.clear()
            self._bodies.clear()
            if self._log is not None:
                await asyncio.to_thread(self._log.write_bytes, b"")

    async def _raw_body(self, n: int) -> bytes:
        if n in self._bodies:
            return self._bodies[n]
        if self._log is None:
            raise KeyError(n)
        return await asyncio.to_thread(self._body_path(n).read_bytes)

    def _body_path(self, n: int) -> Path:
        assert self._log is not None
        return self._log.with_name(self._log.name + ".bodies") / f"{n}.json"

    @staticmethod
    def _prepare_log(log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(b"")
        log.with_name(log.name + ".bodies").mkdir(exist_ok=True)

    async def _record(self, entry: Json, body: bytes) -> None:
        async with self._lock:
            self._seq += 1
            entry["n"] = self._seq
            if self._log is None:
                self._bodies[self._seq] = body
            else:
                path = self._body_path(self._seq)
                entry["body_file"] = str(path)
                line = orjson.dumps(entry) + b"\n"
                await asyncio.to_thread(self._write, self._log, line, path, body)
            self._entries.append(entry)
        async with self._changed:
            self._changed.notify_all()

    @staticmethod
    def _write(log: Path, line: bytes, body_path: Path, body: bytes) -> None:
        body_path.write_bytes(body)
        with log.open("ab") as out:
            out.write(line)

    # ------------------------------------------------------------ requests

    def _entry(self, request: web.Request, api: str, kind: str) -> Json:
        headers = {h: request.headers[h] for h in LOGGED_HEADERS if h in request.headers}
        return {"n": 0, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "t": time.time(),
                "method": request.method, "path": request.path_qs, "api": api, "kind": kind,
                "headers": headers, "auth": _auth_scheme(request), "model": None,
                "stream": False, "prompt": None, "tool_results": [], "tools": [],
                "answer": None, "status": 0, "body_file": None, "cancelled": False}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        api, kind = classify(request.method, request.path)
        entry = self._entry(request, api, kind)
        if api in DIALECTS and kind == "main":
            return await self._model(request, body, entry, DIALECTS[api])
        response = self._simple(request, kind, body)
        entry["status"] = response.status
        await self._record(entry, body)
        return response

    def _simple(self, request: web.Request, kind: str, body: bytes) -> web.Response:
        if kind == "preflight":
            return web.Response(status=200)
        if kind == "count_tokens":
            return _binary({"input_tokens": tokens(body.decode("utf-8", "replace"))})
        if kind == "models":
            return _binary(self._model_list(request.path))
        message = f"no route for {request.method} {request.path}"
        return _binary({"type": "error", "error": {"type": "not_found_error",
                                                   "message": message}}, 404)

    def _model_list(self, path: str) -> Json:
        _, marker, wanted = path.partition("/models/")
        if marker and wanted:
            return self._model_card(wanted)
        cards = [self._model_card(m) for m in self._models]
        return {"object": "list", "data": cards, "has_more": False,
                "first_id": self._models[0] if self._models else None,
                "last_id": self._models[-1] if self._models else None}

    @staticmethod
    def _model_card(model: str) -> Json:
        return {"id": model, "object": "model", "type": "model", "display_name": model,
                "created": 0, "created_at": "2026-01-01T00:00:00Z", "owned_by": "lispm",
                "context_length": 131072}

    async def _model(self, request: web.Request, body: bytes, entry: Json,
                     dialect: Dialect) -> web.StreamResponse:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            entry.update(status=400, error="body is not a JSON object")
            await self._record(entry, body)
            return _binary({"error": {"type": "invalid_request_error",
                                      "message": "body is not a JSON object"}}, 400)
        if self._api_keys and _api_key(request) not in self._api_keys:
            entry.update(status=401, error="wrong API key")
            await self._record(entry, body)
            return _binary({"type": "error", "error": {"type": "authentication_error",
                                                       "message": "invalid x-api-key"}}, 401)
        ex = dialect.parse(data)
        decision = Decision(ex.side, "side") if ex.side else decide(ex.conv, self._rules,
                                                                      entry.get("api"))
        entry.update(kind=ex.kind, model=ex.model, stream=ex.stream, prompt=ex.conv.prompt,
                     tool_results=[{"name": r.name, "text": r.text[:RESULT_LOG_CHARS]}
                                   for r in ex.conv.results],
                     tools=[t.qualified for t in ex.conv.tools], answer=decision.as_log(),
                     status=decision.reply.status or 200)
        prompt = (self._prompts.count(str(entry.get("api")), data) if ex.kind == "main"
                  else Prompt(len(body) // TOKEN_BYTES))
        entry["prompt_tokens"] = prompt.as_log()
        await self._record(entry, body)
        return await self._answer(request, dialect, ex, decision, entry, prompt)

    async def _answer(self, request: web.Request, dialect: Dialect, ex: Exchange,
                      decision: Decision, entry: Json, prompt: Prompt) -> web.StreamResponse:
        reply = decision.reply
        if reply.status is not None:
            return _error_response(reply.status, reply.body)
        if not ex.stream:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            return _binary(dialect.complete(reply, ex, prompt))
        resp = await open_sse(request)
        try:
            await dialect.stream(resp, reply, ex, prompt)
            await resp.write_eof()
        except StreamCut:
            if request.transport is not None:
                request.transport.abort()
        except ConnectionResetError:
            # The client went away mid-stream (an interrupt, a cancel).
            await self._mark_cancelled(entry)
        except asyncio.CancelledError:
            await asyncio.shield(self._mark_cancelled(entry))
            raise
        return resp

    async def _mark_cancelled(self, entry: Json) -> None:
        """Record that the client closed ENTRY's stream before its end."""
        async with self._lock:
            entry["cancelled"] = True
            if self._log is not None:
                lines = b"".join(orjson.dumps(e) + b"\n" for e in self._entries)
                await asyncio.to_thread(_replace_file, self._log, lines)
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------- control

    def _add_control_routes(self, app: web.Application) -> None:
        app.router.add_get("/_gateway/requests", self._get_requests)
        app.router.add_get("/_gateway/requests/{n:\\d+}/body", self._get_body)
        app.router.add_get("/_gateway/script", self._get_script)
        app.router.add_post("/_gateway/script", self._post_script)
        app.router.add_post("/_gateway/rules", self._post_rules)
        app.router.add_post("/_gateway/reset", self._post_reset)

    @staticmethod
    def _local(request: web.Request) -> None:
        if request.remote not in ("127.0.0.1", "::1"):
            raise web.HTTPForbidden(text="control routes answer loopback clients only")

    async def _get_requests(self, request: web.Request) -> web.Response:
        self._local(request)
        since = int(request.query.get("since", "0"))
        return _binary([e for e in self._entries if e["n"] > since])

    async def _get_body(self, request: web.Request) -> web.Response:
        self._local(request)
        try:
            raw = await self._raw_body(int(request.match_info["n"]))
        except (KeyError, FileNotFoundError):
            raise web.HTTPNotFound(text="no such request") from None
        return web.Response(body=raw, content_type="application/json")

    async def _get_script(self, request: web.Request) -> web.Response:
        self._local(request)
        return _binary([{"match": r.match, "steps": r.steps} for r in self._rules])

    async def _post_script(self, request: web.Request) -> web.Response:
        return await self._change_script(request, self.set_script)

    async def _post_rules(self, request: web.Request) -> web.Response:
        return await self._change_script(request, self.add_rules)

    async def _change_script(self, request: web.Request,
                             change: Callable[[Any], None]) -> web.Response:
        self._local(request)
        try:
            change(orjson.loads(await request.read()))
        except (orjson.JSONDecodeError, ScriptError) as err:
            return _binary({"error": str(err)}, 400)
        return _binary({"rules": len(self._rules)})

    async def _post_reset(self, request: web.Request) -> web.Response:
        self._local(request)
        await self.reset()
        return _binary({"ok": True})


# ------------------------------------------------------------------ program


def _write_port_file(path: Path, port: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    """Run a gateway until SIGTERM or SIGINT."""
    rules = await asyncio.to_thread(load_script, args.script) if args.script else None
    gateway = Gateway(rules, host=args.host, port=args.port, log_path=args.log,
                      api_keys=args.api_key or ())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await gateway.start()
    try:
        if args.port_file:
            await asyncio.to_thread(_write_port_file, Path(args.port_file), gateway.port)
        sys.stderr.write(f"lispm gateway listening on {gateway.url}\n")
        await stop.wait()
    finally:
        await gateway.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(prog="python -m lispm_sidecar.testing.gateway",
                                     description="LispM's scripted model gateway")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the port here once listening")
    parser.add_argument("--log", help="JSONL request log; bodies go to <log>.bodies/")
    parser.add_argument("--script", help="JSON list of rules")
    parser.add_argument("--api-key", action="append",
                        help="accept only this key (x-api-key or Bearer); may repeat")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except (ScriptError, OSError, orjson.JSONDecodeError) as err:
        sys.stderr.write(f"gateway: {err}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
