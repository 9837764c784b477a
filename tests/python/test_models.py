"""Model streaming (python/lispm_sidecar/models/): each dialect against the
scripted gateway, over the real sidecar's link, as Emacs would use it."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from lispm_sidecar.models import chat
from lispm_sidecar.models.neutral import CallPart, Done, Failed, Text, Usage
from lispm_sidecar.models.sse import SseDecoder
from lispm_sidecar.testing.gateway import Gateway
from lispm_sidecar.testing.gateway_script import long_text
from tests.python.sidecar_client import ROOT, SidecarProcess

APIS = ("anthropic", "responses", "chat")
KEY = "sk-lispm-test-7f3a9c1e5b2d4a6f8e0c"
TOOLS = [
    {"name": "read_file", "description": "Read a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}},
    {"name": "list_files", "description": "List files.",
     "parameters": {"type": "object", "properties": {}}},
]
WORDS = " ".join(f"word{i}" for i in range(40))


class LoggedSidecar(SidecarProcess):
    """The sidecar with its stderr, at log level DEBUG, kept in a file."""

    def __init__(self, runtime_dir: Path, log: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(runtime_dir, env=env)
        self.log = log

    async def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"),
                   LISPM_RUNTIME_DIR=str(self.runtime_dir), LISPM_SIDECAR_LOG="DEBUG",
                   **self.env)
        with self.log.open("wb") as stderr:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "lispm_sidecar", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env)
        self._reader = asyncio.create_task(self._read())


class Events:
    """The sidecar's `lispm/model-event`s, by stream."""

    def __init__(self, sidecar: SidecarProcess) -> None:
        self.sidecar = sidecar
        self.by_stream: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.changed = asyncio.Condition()
        self.task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            message = await self.sidecar.notifications.get()
            if message.get("method") == "lispm/model-event":
                event = message["params"]
                async with self.changed:
                    self.by_stream[event["stream"]].append(event)
                    self.changed.notify_all()

    async def wait(self, stream: str, done: Callable[[list[dict[str, Any]]], bool],
                   within: float = 30) -> list[dict[str, Any]]:
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: done(self.by_stream[stream])), within)
            return list(self.by_stream[stream])

    async def end(self, stream: str, within: float = 30) -> list[dict[str, Any]]:
        """Every event of STREAM, once its done or error came."""
        return await self.wait(stream, lambda events: any(
            e["type"] in ("done", "error") for e in events), within)


@dataclass
class Link:
    sidecar: LoggedSidecar
    events: Events
    runtime: Path

    async def stream(self, gw: Gateway, api: str, stream: str, messages: list[dict[str, Any]],
                     **extra: Any) -> list[dict[str, Any]]:
        """Start STREAM and return its events once it has ended."""
        assert await self.sidecar.call("lispm/model-stream", params(gw, api, stream, messages,
                                                                     **extra)) == {}
        return await self.events.end(stream)


def params(gw: Gateway, api: str, stream: str, messages: list[dict[str, Any]],
           **extra: Any) -> dict[str, Any]:
    base = gw.url if api == "anthropic" else gw.openai_url
    return {"stream": stream, "api": api, "base_url": base, "model": f"{api}-model",
            "messages": messages, **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "text")


def ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in ("done", "error")]


async def start_link(tmp_path: Path, env: dict[str, str] | None = None) -> Link:
    runtime = tmp_path / "run"
    sidecar = LoggedSidecar(runtime, tmp_path / "sidecar.log", env)
    await sidecar.start()
    await sidecar.hello()
    return Link(sidecar, Events(sidecar), runtime)


async def stop_link(link: Link) -> None:
    link.events.task.cancel()
    await link.sidecar.close()


@pytest.fixture
async def link(tmp_path: Path) -> AsyncIterator[Link]:
    started = await start_link(tmp_path)
    yield started
    await stop_link(started)


# ---------------------------------------------------------------- streaming


@pytest.mark.parametrize("api", APIS)
async def test_text_streams_in_coalesced_deltas_then_usage_and_done(link: Link, api: str) -> None:
    script = [{"match": "slow", "steps": [{"say": WORDS, "delay": 0.4}]},
              {"match": "fast", "steps": [{"say": WORDS}]}]
    async with Gateway(script) as gw:
        slow = await link.stream(gw, api, "s1", [user("slow please")], system="Be brief.")
        fast = await link.stream(gw, api, "s2", [user("fast please")])
        [first, second] = gw.main_requests(api)
        body = await gw.body(first["n"])
    for events in (slow, fast):
        assert text_of(events) == WORDS
        assert [e["type"] for e in events][-2:] == ["usage", "done"]
        assert events[-1] == {"stream": events[0]["stream"], "type": "done",
                              "stop_reason": "end_turn"}
        usage = events[-2]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] == len(WORDS) // 4
    # 40 words over 0.4 s, a piece every 10 ms: about two a text event; all at once, one.
    assert 5 <= sum(e["type"] == "text" for e in slow) <= 30
    assert sum(e["type"] == "text" for e in fast) <= 2
    assert first["model"] == f"{api}-model" and first["stream"] is True
    assert first["prompt"] == "slow please" and second["prompt"] == "fast please"
    if api == "anthropic":
        # The prompt in the API's order, the system prompt and the last block
        # marked for its cache.
        assert list(body) == ["model", "max_tokens", "stream", "system", "messages"]
        assert body["system"] == [{"type": "text", "text": "Be brief.",
                                   "cache_control": {"type": "ephemeral"}}]
        assert body["max_tokens"] > 0
        assert body["messages"] == [{"role": "user", "content": [
            {"type": "text", "text": "slow please", "cache_control": {"type": "ephemeral"}}]}]
    elif api == "responses":
        assert body["instructions"] == "Be brief." and body["store"] is False
        assert body["input"] == [{"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "slow please"}]}]
    else:
        assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                    user("slow please")]
        assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("api", APIS)
async def test_a_tool_round_text_and_two_calls_then_the_results_in_the_dialects_form(
        link: Link, api: str) -> None:
    script = [{"match": "look", "steps": [
        {"text": "Looking.", "calls": [{"tool": "read_file", "args": {"path": "a.txt"}},
                                       {"tool": "list_files", "args": {}}]},
        {"say": "seen: {last_tool_result}"}]}]
    async with Gateway(script) as gw:
        events = await link.stream(gw, api, "t1", [user("look around")], tools=TOOLS)
        assert [e["type"] for e in events] == ["text", "tool_call", "tool_call", "usage", "done"]
        assert events[0]["text"] == "Looking." and events[-1]["stop_reason"] == "tool_use"
        read, listing = events[1], events[2]
        assert (read["name"], orjson.loads(read["arguments"])) == ("read_file", {"path": "a.txt"})
        assert (listing["name"], orjson.loads(listing["arguments"])) == ("list_files", {})
        assert read["id"] and listing["id"] and read["id"] != listing["id"]
        history = [
            user("look around"),
            {"role": "assistant", "content": "Looking.",
             "tool_calls": [{k: c[k] for k in ("id", "name", "arguments")}
                            for c in (read, listing)]},
            {"role": "tool", "tool_call_id": read["id"], "name": "read_file",
             "content": "alpha"},
            {"role": "tool", "tool_call_id": listing["id"], "name": "list_files",
             "content": "a.txt b.txt"},
        ]
        answer = await link.stream(gw, api, "t2", history, tools=TOOLS)
        second = gw.main_requests(api)[1]
        body = await gw.body(second["n"])
    assert text_of(answer) == "seen: a.txt b.txt" and answer[-1]["stop_reason"] == "end_turn"
    assert second["answer"]["step"] == 1
    assert second["tools"] == ["read_file", "list_files"]
    assert [r["text"] for r in second["tool_results"]] == ["alpha", "a.txt b.txt"]
    assert [r["name"] for r in second["tool_results"]] == ["read_file", "list_files"]
    ids = [read["id"], listing["id"]]
    if api == "anthropic":
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        said, results = body["messages"][1]["content"], body["messages"][2]["content"]
        assert said[0] == {"type": "text", "text": "Looking."}
        assert [(b["type"], b["id"], b["input"]) for b in said[1:]] == [
            ("tool_use", ids[0], {"path": "a.txt"}), ("tool_use", ids[1], {})]
        assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
            ("tool_result", ids[0], "alpha"), ("tool_result", ids[1], "a.txt b.txt")]
        assert body["tools"][0]["input_schema"] == TOOLS[0]["parameters"]
    elif api == "responses":
        items = body["input"]
        assert [i["type"] for i in items] == ["message", "message", "function_call",
                                              "function_call", "function_call_output",
                                              "function_call_output"]
        assert [i["call_id"] for i in items[2:]] == ids + ids
        assert items[4]["output"] == "alpha"
        assert body["tools"][0] == {"type": "function", "name": "read_file",
                                    "description": "Read a file.",
                                    "parameters": TOOLS[0]["parameters"], "strict": False}
    else:
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
        assert [c["id"] for c in messages[1]["tool_calls"]] == ids
        assert messages[1]["tool_calls"][0]["function"] == {
            "name": "read_file", "arguments": read["arguments"]}
        assert [m["tool_call_id"] for m in messages[2:]] == ids
        assert body["tools"][1]["function"]["name"] == "list_files"


@pytest.mark.parametrize("api", APIS)
async def test_an_empty_reply_is_done_with_no_text(link: Link, api: str) -> None:
    async with Gateway([{"match": "", "steps": [{"say": ""}]}]) as gw:
        events = await link.stream(gw, api, "e1", [user("say nothing")])
    assert [e["type"] for e in events] == ["usage", "done"]
    assert events[-1]["stop_reason"] == "end_turn"


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("api", APIS)
async def test_an_http_error_is_one_error_event_with_its_status_and_body(
        link: Link, api: str) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    script = [{"match": "busy", "steps": [{"status": 529, "body": overloaded}]},
              {"match": "huge", "steps": [{"status": 500, "body": "x" * 10_000}]}]
    async with Gateway(script) as gw:
        busy = await link.stream(gw, api, "h1", [user("busy now")])
        huge = await link.stream(gw, api, "h2", [user("huge error")])
    [event] = busy
    assert event["type"] == "error" and event["status"] == 529 and event["kind"] == "http"
    assert orjson.loads(event["body"]) == overloaded
    assert "529" in event["message"] and "Overloaded" in event["message"]
    [event] = huge
    assert event["status"] == 500 and event["body"] == "x" * 4096


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_cut_short_ends_in_an_error_saying_so(link: Link, api: str) -> None:
    async with Gateway([{"match": "", "steps": [{"say": WORDS, "cut": 5}]}]) as gw:
        events = await link.stream(gw, api, "c1", [user("go")])
    assert WORDS.startswith(text_of(events)) and text_of(events)
    assert len(text_of(events)) < len(WORDS)
    [end] = ends(events)
    assert end is events[-1] and end["type"] == "error" and end["kind"] == "cut"
    assert "cut short" in end["message"]


async def test_no_data_within_the_timeout_is_an_error(link: Link) -> None:
    async with Gateway([{"match": "", "steps": [{"say": "late", "delay": 5}]}]) as gw:
        started = time.monotonic()
        events = await link.stream(gw, "anthropic", "o1", [user("go")], timeout=0.5)
    [end] = events
    assert end["type"] == "error" and "read timeout" in end["message"]
    assert end["kind"] == "timeout"
    assert time.monotonic() - started < 4


async def test_a_server_that_is_not_there_is_an_error(link: Link, tmp_path: Path) -> None:
    async with Gateway() as gw:
        pass  # its port is closed now
    events = await link.stream(gw, "chat", "n1", [user("anyone?")])
    [end] = events
    assert end["type"] == "error" and "cannot connect" in end["message"]
    assert end["kind"] == "cut"


async def test_a_malformed_stream_is_an_error_of_that_kind(link: Link) -> None:
    from aiohttp import web

    async def malformed(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: message_start\ndata: {not json\n\n")
        return response

    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", malformed)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        server = SimpleNamespace(url=f"http://127.0.0.1:{port}",
                                 openai_url=f"http://127.0.0.1:{port}/v1")
        events = await link.stream(server, "anthropic", "m1", [user("go")])  # type: ignore[arg-type]
    finally:
        await runner.cleanup()
    [end] = events
    assert end["type"] == "error" and end["kind"] == "malformed"
    assert "malformed" in end["message"]


async def test_an_unknown_api_or_a_malformed_message_is_refused_at_once(link: Link) -> None:
    async with Gateway() as gw:
        reply = await link.sidecar.call(
            "lispm/model-stream", params(gw, "gemini", "u1", [user("hi")]), raw=True)
        assert reply["error"]["code"] == -32602
        assert reply["error"]["message"] == (
            "api must be one of anthropic, responses, chat, not 'gemini'")
        reply = await link.sidecar.call(
            "lispm/model-stream", params(gw, "chat", "u2", [{"role": "robot"}]), raw=True)
        assert reply["error"]["message"] == (
            "messages[0].role must be one of user, assistant, tool")
        reply = await link.sidecar.call(
            "lispm/model-stream", params(gw, "chat", "u3", "hi"), raw=True)
        assert reply["error"]["message"] == "messages must be a list"
        assert gw.requests == []


# ---------------------------------------------------------------- reasoning


@pytest.mark.parametrize("api", APIS)
async def test_reasoning_asked_for_streams_apart_from_the_text(link: Link, api: str) -> None:
    script = [{"match": "think", "steps": [{"say": "The answer."}]}]
    async with Gateway(script) as gw:
        events = await link.stream(gw, api, "r1", [user("think first")],
                                   reasoning={"effort": "medium"})
        body = await gw.body(gw.main_requests(api)[0]["n"])
    thought = "".join(e.get("text", "") for e in events if e["type"] == "reasoning")
    assert thought == "The user asked: think first. Tool results so far: 0."
    assert text_of(events) == "The answer."
    kinds = [e["type"] for e in events]
    assert kinds.index("reasoning") < kinds.index("text")
    if api == "anthropic":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
        assert body["max_tokens"] == 8192 + 8192
        ends_ = [e for e in events if e["type"] == "reasoning" and "signature" in e]
        assert len(ends_) == 1 and len(ends_[0]["signature"]) == 64
    elif api == "responses":
        assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    else:
        assert body["reasoning_effort"] == "medium"


async def test_anthropic_thinking_goes_back_signed_first_in_its_message(link: Link) -> None:
    script = [{"match": "look", "steps": [{"tool": "read_file", "args": {"path": "a"}},
                                          {"say": "seen"}]}]
    async with Gateway(script) as gw:
        events = await link.stream(gw, "anthropic", "a1", [user("look")], tools=TOOLS,
                                   reasoning={"budget": 4000})
        thought = "".join(e.get("text", "") for e in events if e["type"] == "reasoning")
        signature = next(e["signature"] for e in events if e.get("signature"))
        call = next(e for e in events if e["type"] == "tool_call")

        def history(reasoning: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [user("look"),
                    {"role": "assistant", "content": "", "reasoning": reasoning,
                     "tool_calls": [{k: call[k] for k in ("id", "name", "arguments")}]},
                    {"role": "tool", "tool_call_id": call["id"], "content": "alpha"}]

        answer = await link.stream(gw, "anthropic", "a2",
                                   history([{"text": thought, "signature": signature}]),
                                   tools=TOOLS, reasoning={"budget": 4000})
        assert text_of(answer) == "seen"
        body = await gw.body(gw.main_requests("anthropic")[1]["n"])
        assert body["messages"][1]["content"][0] == {
            "type": "thinking", "thinking": thought, "signature": signature}
        # The API refuses a thought changed, or one left out of a turn with tools.
        changed = await link.stream(gw, "anthropic", "a3",
                                    history([{"text": thought + "!", "signature": signature}]),
                                    tools=TOOLS, reasoning={"budget": 4000})
        assert ends(changed)[0]["status"] == 400
        assert "Invalid `signature`" in ends(changed)[0]["message"]
        # Unsigned (another dialect's summary): left out, which the API refuses here.
        unsigned = await link.stream(gw, "anthropic", "a4", history([{"text": thought}]),
                                     tools=TOOLS, reasoning={"budget": 4000})
        assert "must start with a thinking block" in ends(unsigned)[0]["message"]


async def test_an_effort_not_understood_is_refused_at_once(link: Link) -> None:
    async with Gateway() as gw:
        for reasoning, message in (({"effort": "extreme"}, "reasoning.effort must be one of"),
                                   ({"budget": 10}, "reasoning.budget must be"),
                                   ("high", "reasoning must be an object")):
            reply = await link.sidecar.call("lispm/model-stream", params(
                gw, "anthropic", "e1", [user("hi")], reasoning=reasoning), raw=True)
            assert message in reply["error"]["message"]
        assert gw.requests == []


def test_a_think_block_split_anywhere_is_reasoning_never_text() -> None:
    text = "Before <think>a long thought</think>after"
    for cut in range(1, len(text)):
        parser = chat.Parser()
        parts: list[Any] = []
        for piece in (text[:cut], text[cut:]):
            chunk = {"choices": [{"delta": {"content": piece}}]}
            parts.extend(parser.feed("", orjson.dumps(chunk).decode()))
        parts.extend(parser.feed("", orjson.dumps(
            {"choices": [{"delta": {}, "finish_reason": "stop"}]}).decode()))
        said = "".join(p.text for p in parts if isinstance(p, Text))
        thought = "".join(p.text for p in parts if type(p).__name__ == "Reasoning")
        assert (said, thought) == ("Before after", "a long thought"), cut


# ---------------------------------------------------------------- conversations


@pytest.mark.parametrize("api", APIS)
async def test_a_conversation_sends_only_what_changed_and_the_model_gets_the_whole(
        link: Link, api: str) -> None:
    script = [{"match": "", "steps": [{"say": "fine"}, {"say": "again"}, {"say": "once more"}]}]
    big = "x" * 200_000
    first = [user(big), {"role": "assistant", "content": "ok"}, user("second")]
    history = [*first, {"role": "assistant", "content": "fine"}, user("third")]
    async with Gateway(script) as gw:
        events = await link.stream(gw, api, "c1", first, tools=TOOLS, system="Be brief.",
                                   conversation="agent#1", revision=1)
        assert ends(events)[0]["type"] == "done"
        # Only the two new messages cross the link; system and tools are kept.
        events = await link.stream(gw, api, "c2", history[3:], conversation="agent#1",
                                   revision=2, since=1, keep=3)
        assert ends(events)[0]["type"] == "done"
        # The same history sent whole: the model's request is the same, byte for byte.
        events = await link.stream(gw, api, "c3", history, tools=TOOLS, system="Be brief.",
                                   conversation="agent#1", revision=3)
        assert ends(events)[0]["type"] == "done"
        requests = gw.main_requests(api)
        delta, whole = await gw.body(requests[1]["n"]), await gw.body(requests[2]["n"])
    assert delta == whole
    assert big in orjson.dumps(delta).decode() and "third" in orjson.dumps(delta).decode()
    held = await link.sidecar.call("lispm/model-stream", params(
        gw, api, "c4", [user("an edit")], conversation="agent#1", revision=4, since=2, keep=1))
    assert held == {"stale": True}


async def test_a_revision_not_held_starts_nothing_and_says_stale(link: Link) -> None:
    async with Gateway([{"match": "", "steps": [{"say": "fine"}]}]) as gw:
        for stale in ({"conversation": "never-sent", "revision": 2, "since": 1, "keep": 0},
                      {"conversation": "a#1", "revision": 9, "since": 8, "keep": 0}):
            assert await link.sidecar.call("lispm/model-stream", params(
                gw, "chat", "s1", [user("hi")], **stale)) == {"stale": True}
        assert gw.requests == []
        events = await link.stream(gw, "chat", "s2", [user("hi")], conversation="a#1",
                                   revision=10)
        assert ends(events)[0]["type"] == "done"
        reply = await link.sidecar.call("lispm/model-stream", params(
            gw, "chat", "s3", [user("more")], conversation="a#1", revision=11, since=10,
            keep=5), raw=True)
        assert reply["error"]["message"] == "keep is 5, but revision 10 of a#1 has 1 messages"
        # Refused: the conversation is forgotten, so what builds on it is stale.
        assert await link.sidecar.call("lispm/model-stream", params(
            gw, "chat", "s4", [user("more")], conversation="a#1", revision=12, since=10,
            keep=1)) == {"stale": True}
        reply = await link.sidecar.call("lispm/model-stream", params(
            gw, "chat", "s5", [user("more")], since=10), raw=True)
        assert reply["error"]["message"] == "since needs a conversation"


@pytest.mark.parametrize("api", APIS)
async def test_a_prompts_prefix_read_from_the_cache_shows_in_the_usage(link: Link,
                                                                       api: str) -> None:
    rules = "Keep to the rules. " * 800
    first = [user("first question")]
    second = [*first, {"role": "assistant", "content": "fine"}, user("second question")]
    async with Gateway([{"match": "", "steps": [{"say": "fine"}]}]) as gw:
        usages = []
        for n, messages in enumerate((first, second)):
            events = await link.stream(gw, api, f"p{n}", messages, system=rules, tools=TOOLS,
                                       conversation="cached#1", revision=n + 1)
            usages.append(next(e for e in events if e["type"] == "usage"))
        logged = [r["prompt_tokens"] for r in gw.main_requests(api)]
    assert usages[0]["cached_tokens"] == 0
    for usage, counted in zip(usages, logged, strict=True):
        assert usage["input_tokens"] == counted["tokens"]
        assert usage["cached_tokens"] == counted["cache_read"]
        assert usage["cache_write_tokens"] == counted["cache_write"]
    assert usages[1]["cached_tokens"] > 0.8 * usages[1]["input_tokens"]
    if api == "anthropic":
        # Written up to the first request's last block, read back whole by the second.
        assert usages[0]["cache_write_tokens"] == usages[0]["input_tokens"]
        assert usages[1]["cached_tokens"] == usages[0]["cache_write_tokens"]
    else:
        assert usages[1]["cached_tokens"] % 128 == 0


def test_the_gateways_cache_reads_only_what_an_earlier_request_wrote() -> None:
    from lispm_sidecar.testing.gateway_cache import PromptCache

    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": "rules " * 1000, "cache_control": mark}]

    def body(texts: list[str], marked: bool = True, sys: Any = system) -> dict[str, Any]:
        blocks = [{"type": "text", "text": t} for t in texts]
        if marked:
            blocks[-1] = {**blocks[-1], "cache_control": mark}
        return {"system": sys, "messages": [{"role": "user", "content": blocks}]}

    cache = PromptCache()
    assert cache.count("anthropic", body(["a"])).cache_read == 0
    # The system prompt and the first block, written: read back, the rest written.
    again = cache.count("anthropic", body(["a", "b"]))
    assert again.cache_read > 1500 and again.cache_write > 0
    # More than 20 blocks after what was written: not found.
    far = cache.count("anthropic", body(["a", *[f"x{i}" for i in range(25)]]))
    assert far.cache_read == cache.count("anthropic", body(["zzz"])).cache_read
    # Another system prompt: nothing read.
    other = [{"type": "text", "text": "other " * 1000, "cache_control": mark}]
    assert cache.count("anthropic", body(["a", "b"], sys=other)).cache_read == 0
    # Too short to be written: never read.
    short = PromptCache()
    short.count("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": mark}]}]})
    assert short.count("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": mark}]}]}).cache_read == 0
    # OpenAI: 1024 tokens at least, in steps of 128.
    openai = PromptCache()
    small = {"input": [{"type": "message", "role": "user", "content": "hi"}]}
    openai.count("responses", small)
    assert openai.count("responses", small).cache_read == 0
    large = {"instructions": "rules " * 1000, "input": [{"role": "user", "content": "hi"}]}
    openai.count("responses", large)
    read = openai.count("responses", {**large, "input": [*large["input"], {"role": "user",
                                                                          "content": "more"}]})
    assert read.cache_read > 1024 and read.cache_read % 128 == 0


def test_conversations_past_their_limits_drop_the_least_recently_used() -> None:
    from lispm_sidecar.models.conversations import Conversations

    kept = Conversations(limit_chars=1000, limit_count=3)

    def send(name: str, revision: int, text: str) -> None:
        kept.request({"api": "chat", "base_url": "http://x", "model": "m",
                      "messages": [user(text)], "conversation": name, "revision": revision})

    for n, name in enumerate(("a", "b", "c")):
        send(name, n, "x" * 100)
    send("a", 5, "x" * 100)
    send("d", 6, "x" * 100)
    assert [kept.get(name) is not None for name in "abcd"] == [True, False, True, True]
    send("e", 7, "x" * 900)
    assert [kept.get(name) is not None for name in "acde"] == [False, False, True, True]
    send("f", 8, "x" * 5000)
    assert len(kept) == 1 and kept.get("f") is not None


# ---------------------------------------------------------------- cancel


@pytest.mark.parametrize("api", APIS)
async def test_cancel_closes_the_response_and_the_stream_says_nothing_more(
        link: Link, api: str) -> None:
    script = [{"match": "slow", "steps": [{"say": WORDS, "delay": 8}]},
              {"match": "quick", "steps": [{"say": "hi"}]}]
    async with Gateway(script) as gw:
        await link.sidecar.call("lispm/model-stream", params(gw, api, "k1", [user("slow")]))
        await link.events.wait("k1", lambda events: bool(events))
        assert await link.sidecar.call("lispm/model-cancel", {"stream": "k1"}) == {
            "cancelled": True}
        async with asyncio.timeout(5):
            entry = await gw.wait_for(lambda e: e["cancelled"])
        assert entry["prompt"] == "slow"
        heard = len(link.events.by_stream["k1"])
        await link.stream(gw, api, "k2", [user("quick")])
        assert await link.sidecar.call("lispm/model-cancel", {"stream": "k2"}) == {
            "cancelled": False}
        assert not gw.main_requests(api)[1]["cancelled"]
    assert len(link.events.by_stream["k1"]) == heard
    assert ends(link.events.by_stream["k1"]) == []
    assert await link.sidecar.call("lispm/model-cancel", {"stream": "k1"}) == {
        "cancelled": False}
    assert await link.sidecar.call("lispm/model-cancel", {"stream": "nobody"}) == {
        "cancelled": False}


async def test_a_cancel_sent_as_a_notification_shows_in_the_gateways_log_file(
        link: Link, tmp_path: Path) -> None:
    log = tmp_path / "gateway.jsonl"
    async with Gateway([{"match": "", "steps": [{"say": WORDS, "delay": 8}]}],
                       log_path=log) as gw:
        await link.sidecar.call("lispm/model-stream", params(gw, "chat", "f1", [user("go")]))
        await link.events.wait("f1", lambda events: bool(events))
        await link.sidecar.send_raw(orjson.dumps(
            {"jsonrpc": "2.0", "method": "lispm/model-cancel", "params": {"stream": "f1"}}))
        async with asyncio.timeout(5):
            await gw.wait_for(lambda e: e["cancelled"])
    [entry] = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert entry["cancelled"] is True and entry["prompt"] == "go"
    assert ends(link.events.by_stream["f1"]) == []


# ---------------------------------------------------------------- size


@pytest.mark.parametrize("api", APIS)
async def test_a_10_mb_reply_arrives_whole_and_the_link_keeps_answering(
        link: Link, api: str) -> None:
    size = 10 * 1024 * 1024
    step = {"long": size, "piece": 4096, "delay": 1.5}
    async with Gateway([{"match": "", "steps": [step]}]) as gw:
        await link.sidecar.call("lispm/model-stream", params(gw, api, "b1", [user("long")]))
        pings: list[float] = []
        while not ends(link.events.by_stream["b1"]):
            sent = time.monotonic()
            assert await link.sidecar.call("lispm/ping", {"n": len(pings)}) == {"n": len(pings)}
            if not ends(link.events.by_stream["b1"]):
                pings.append(time.monotonic() - sent)
            await asyncio.sleep(0.05)
        events = await link.events.end("b1", within=120)
    assert events[-1]["type"] == "done"
    text = text_of(events)
    assert len(text) == size and text == long_text(size)
    texts = [e for e in events if e["type"] == "text"]
    # 2,560 pieces of 4 KB from the gateway; events of at most 8 KB and one piece.
    assert len(texts) < 2_560 and max(len(e["text"]) for e in texts) <= 8192 + 4096
    # Answered while the stream went on, each in well under a second.
    assert len(pings) >= 3 and max(pings) < 1.0, pings


# ---------------------------------------------------------------- keys


async def test_the_key_goes_to_the_server_and_nowhere_else(link: Link, tmp_path: Path) -> None:
    echo = f"Incorrect API key provided: {KEY}."
    script = [{"match": "echo", "steps": [{"status": 401, "body": echo}]},
              {"match": "", "steps": [{"say": "welcome"}]}]
    async with Gateway(script, api_keys=[KEY]) as gw:
        for n, api in enumerate(APIS):
            key_file = link.runtime / f"key-{n}"
            key_file.write_text(KEY + "\n")
            key_file.chmod(0o600)
            events = await link.stream(gw, api, f"key{n}", [user("hello")],
                                       key_file=str(key_file))
            assert text_of(events) == "welcome", events
            assert not key_file.exists()
        key_file = link.runtime / "key-echo"
        key_file.write_text(KEY)
        key_file.chmod(0o600)
        echoed = await link.stream(gw, "anthropic", "key-echo", [user("echo it")],
                                   key_file=str(key_file))
        assert echoed[-1]["status"] == 401 and "[key]" in echoed[-1]["body"]
        wrong = await link.stream(gw, "chat", "key-none", [user("hello")])
        assert wrong[-1]["status"] == 401
        assert [e["auth"] for e in gw.main_requests()] == [
            "x-api-key", "Bearer", "Bearer", "x-api-key", None]
    await link.sidecar.call("lispm/shutdown", {})
    await link.sidecar.close()
    log = link.sidecar.log.read_text()
    assert "model stream key0" in log  # the log is there, at level DEBUG
    shown = orjson.dumps(dict(link.events.by_stream)).decode() + log
    assert KEY not in shown


async def test_a_key_from_the_sidecars_environment(tmp_path: Path) -> None:
    started = await start_link(tmp_path, env={"LISPM_TEST_MODEL_KEY": KEY})
    try:
        async with Gateway([{"match": "", "steps": [{"say": "yes"}]}], api_keys=[KEY]) as gw:
            events = await started.stream(gw, "responses", "env1", [user("hi")],
                                          key_env="LISPM_TEST_MODEL_KEY")
            assert text_of(events) == "yes"
            reply = await started.sidecar.call(
                "lispm/model-stream",
                params(gw, "responses", "env2", [user("hi")], key_env="LISPM_NO_SUCH_VAR"),
                raw=True)
        assert reply["error"] == {
            "code": -32028,
            "message": "the environment variable LISPM_NO_SUCH_VAR is not set in the sidecar"}
    finally:
        await stop_link(started)


async def test_a_key_file_others_may_read_is_refused_and_removed(link: Link) -> None:
    key_file = link.runtime / "key-open"
    key_file.write_text(KEY)
    key_file.chmod(0o644)
    async with Gateway() as gw:
        reply = await link.sidecar.call(
            "lispm/model-stream", params(gw, "anthropic", "open1", [user("hi")],
                                         key_file=str(key_file)), raw=True)
        assert gw.requests == []
    assert reply["error"]["code"] == -32028
    assert "may be read by others (mode 644)" in reply["error"]["message"]
    assert KEY not in reply["error"]["message"]
    assert not key_file.exists()


# ---------------------------------------------------------------- pieces


def test_sse_events_are_read_across_any_split_of_the_bytes() -> None:
    wire = (b": comment\r\nevent: one\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
            b"data: two\n\ndata: [DONE]\n\n")
    expected = [("one", '{"a":\n1}'), ("", "two"), ("", "[DONE]")]
    for size in (1, 2, 3, 7, len(wire)):
        decoder = SseDecoder()
        found = [event for i in range(0, len(wire), size)
                 for event in decoder.feed(wire[i:i + size])]
        assert found + list(decoder.close()) == expected, size
    decoder = SseDecoder()
    assert list(decoder.feed(b"data: last")) == []
    assert list(decoder.close()) == [("", "last")]


def test_chat_assembles_calls_by_index_and_passes_malformed_arguments_raw() -> None:
    parser = chat.Parser()
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "On it."}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "c2", "function": {"name": "grep", "arguments": "{\"pat"}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "{\"path\": "}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "\"a\"}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
    ]
    parts = [part for chunk in chunks for part in parser.feed("", orjson.dumps(chunk).decode())]
    assert parts == [Text("On it."), CallPart("c1", "read_file", '{"path": "a"}'),
                     CallPart("c2", "grep", '{"pat')]
    assert list(parser.feed("", "[DONE]")) == [Usage(7, 3), Done("tool_use")]
    cut = chat.Parser()
    list(cut.feed("", orjson.dumps(chunks[0]).decode()))
    assert list(cut.finish()) == []
    assert list(cut.feed("", "[DONE]")) == [
        Failed("the stream ended ([DONE]) before the answer finished")]


def _chat_parts(chunks: list[dict[str, Any]]) -> list[Any]:
    """Every part a Chat Completions parser gives for CHUNKS, then `[DONE]`."""
    parser = chat.Parser()
    parts = [part for chunk in chunks for part in parser.feed("", orjson.dumps(chunk).decode())]
    return parts + list(parser.feed("", "[DONE]"))


def _delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_local_servers_calls_written_as_text_become_calls() -> None:
    # Qwen's and Hermes's template, split across chunks anywhere, text around it.
    text = ('Let me look. <tool_call>{"name": "read_file", "arguments": {"path": "a.el"}}'
            '</tool_call> and <tool_call>{"name": "grep", "arguments": {"pattern": "x"}}'
            '</tool_call>')
    parts = _chat_parts([_delta({"content": text[i:i + 7]}) for i in range(0, len(text), 7)]
                        + [_delta({}, "stop")])
    texts = "".join(p.text for p in parts if isinstance(p, Text))
    calls = [p for p in parts if isinstance(p, CallPart)]
    assert texts == "Let me look.  and "
    assert [(c.name, orjson.loads(c.arguments)) for c in calls] == [
        ("read_file", {"path": "a.el"}), ("grep", {"pattern": "x"})]
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith("call_") for c in calls)
    assert parts[-1] == Done("tool_use")
    # The whole content one bare JSON call.
    parts = _chat_parts([_delta({"content": '{"name": "list_files", '}),
                         _delta({"content": '"parameters": {"path": "."}}'}), _delta({}, "eos")])
    assert [(p.name, p.arguments) for p in parts if isinstance(p, CallPart)] == [
        ("list_files", '{"path":"."}')]
    assert parts[-1] == Done("tool_use")
    # JSON that is no call stays text, whole; a broken tag too.
    parts = _chat_parts([_delta({"content": '{"answer": 42}'}), _delta({}, "stop")])
    assert parts == [Text('{"answer": 42}'), Done("end_turn")]
    parts = _chat_parts([_delta({"content": "<tool_call>not json</tool_call>"}),
                         _delta({}, "stop")])
    assert parts == [Text("<tool_call>not json</tool_call>"), Done("end_turn")]


def test_local_servers_ids_objects_reasoning_and_finish_reasons() -> None:
    parts = _chat_parts([
        _delta({"reasoning_content": "I should read it."}),
        _delta({"content": "<think>hidden</think>Reading."}),
        _delta({"tool_calls": [{"index": 0, "function": {"name": "read_file",
                                                          "arguments": {"path": "b"}}}]}),
        _delta({}, "tool")])
    calls = [p for p in parts if isinstance(p, CallPart)]
    assert "".join(p.text for p in parts if isinstance(p, Text)) == "Reading."
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path":"b"}')]
    assert calls[0].id.startswith("call_") and calls[0].id != "call_0"
    assert parts[-1] == Done("tool_use")
    # An unknown finish without calls ends the turn; no usage is no usage.
    assert _chat_parts([_delta({"content": "Hi"}), _delta({}, "eos")]) == [
        Text("Hi"), Done("end_turn")]


def test_content_held_as_a_possible_call_is_text_past_the_limit() -> None:
    parser = chat.Parser()
    big = "{" + "x" * chat.HOLD_LIMIT
    parts = list(parser.feed("", orjson.dumps(_delta({"content": big})).decode()))
    assert parts == [Text(big)]
    parts = list(parser.feed("", orjson.dumps(_delta({"content": "more"}, "stop")).decode()))
    assert parts == [Text("more")]
