"""The Anthropic Messages API, streaming (`POST {base_url}/v1/messages`).

The system prompt goes apart from the messages; an assistant's calls are
`tool_use` blocks, their results `tool_result` blocks of the next user
message, and consecutive user-side messages (results, then the user's
words) are one message, as the API wants turns to alternate.  An empty
assistant message is left out (the API refuses empty content).  With an
effort, thinking is enabled with its budget; the answer's thinking
blocks stream as reasoning, and go back with their signatures, first in
their message, as the API requires of a turn that used tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from .neutral import (
    CallPart,
    Done,
    Failed,
    Json,
    Message,
    ModelRequest,
    Part,
    Reasoning,
    Text,
    ThoughtEnd,
    Usage,
)

VERSION = "2023-06-01"
#: What `max_tokens`, which this API requires, is when Emacs gives none.
DEFAULT_MAX_TOKENS = 8192
#: The API's stop reasons are the neutral ones.
STOP_REASONS = frozenset({"end_turn", "tool_use", "max_tokens", "stop_sequence",
                          "pause_turn", "refusal"})


def url(base_url: str) -> str:
    """`…/v1/messages`; BASE_URL may end with `/v1` or not."""
    return base_url + ("/messages" if base_url.endswith("/v1") else "/v1/messages")


def headers(key: str | None) -> dict[str, str]:
    """The key goes in `x-api-key`."""
    found = {"content-type": "application/json", "anthropic-version": VERSION,
             "accept": "text/event-stream"}
    if key:
        found["x-api-key"] = key
    return found


def tool_input(arguments: str) -> Json:
    """A call's input object from its raw ARGUMENTS (kept whole if not an object)."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"invalid_arguments": arguments}


def _blocks(message: Message) -> list[Json]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id,
                 "content": message.content}]
    blocks: list[Json] = []
    for thought in message.reasoning:
        # Only what this API wrote goes back to it: a thought without its
        # signature (another dialect's) is left out.
        if thought.redacted:
            blocks.append({"type": "redacted_thinking", "data": thought.redacted})
        elif thought.signature:
            blocks.append({"type": "thinking", "thinking": thought.text,
                           "signature": thought.signature})
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name,
                       "input": tool_input(call.arguments)})
    return blocks


def messages(neutral: Iterable[Message]) -> list[Json]:
    """The API's messages for NEUTRAL ones."""
    out: list[Json] = []
    for message in neutral:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


#: A cache breakpoint, as the API marks one.
EPHEMERAL = {"type": "ephemeral"}


def _mark_for_cache(out: list[Json]) -> None:
    """Put cache breakpoints on the last block of OUT's last message and of
    the user message before it: each request reads what the one before it
    wrote, and writes what the next will read.  (The system prompt, after
    the tools, is the third; the API allows four.)"""
    users = [m for m in out if m["role"] == "user"]
    for message in {id(m): m for m in [*users[-2:-1], *out[-1:]]}.values():
        message["content"][-1] = {**message["content"][-1], "cache_control": EPHEMERAL}


def body(request: ModelRequest) -> Json:
    """The streaming request's body: the prompt in the API's order (tools,
    system, messages), with cache breakpoints where they pay."""
    max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
    found: Json = {"model": request.model, "max_tokens": max_tokens, "stream": True}
    if request.effort is not None:
        # The answer's room comes on top of the thinking's, which it must exceed.
        found["max_tokens"] = max_tokens + request.effort.budget
        found["thinking"] = {"type": "enabled", "budget_tokens": request.effort.budget}
    if request.tools:
        found["tools"] = [{"name": t.name, "description": t.description,
                           "input_schema": t.parameters} for t in request.tools]
    if request.system:
        found["system"] = [{"type": "text", "text": request.system,
                            "cache_control": EPHEMERAL}]
    found["messages"] = messages(request.messages)
    _mark_for_cache(found["messages"])
    return found


class Parser:
    """Reads `message_start` … `message_stop`."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, str, list[str], Any]] = {}
        #: The thinking blocks open, by index: their signature so far.
        self._thinking: dict[int, str] = {}
        self._input_tokens = 0
        self._cached = 0
        self._cache_write = 0
        self._output_tokens = 0
        self._stop = "end_turn"

    def _prompt(self, usage: Json) -> None:
        """Take the prompt's tokens of USAGE: the API counts apart those it
        read from its cache and wrote to it; the neutral count has all."""
        self._cached = int(usage.get("cache_read_input_tokens") or 0)
        self._cache_write = int(usage.get("cache_creation_input_tokens") or 0)
        self._input_tokens = (int(usage.get("input_tokens") or 0) + self._cached
                              + self._cache_write)

    def feed(self, event: str, data: str) -> Iterable[Part]:
        """The parts of one event."""
        if not data:
            return []
        value = orjson.loads(data)
        kind = value.get("type", event)
        if kind == "content_block_delta":
            return self._delta(value)
        if kind == "content_block_start":
            block = value.get("content_block") or {}
            index = value.get("index", 0)
            if block.get("type") == "tool_use":
                self._calls[index] = (
                    str(block.get("id", "")), str(block.get("name", "")), [], block.get("input"))
            elif block.get("type") == "text" and block.get("text"):
                return [Text(block["text"])]
            elif block.get("type") == "thinking":
                self._thinking[index] = str(block.get("signature") or "")
                if block.get("thinking"):
                    return [Reasoning(str(block["thinking"]))]
            elif block.get("type") == "redacted_thinking":
                return [ThoughtEnd(redacted=str(block.get("data") or ""))]
            return []
        if kind == "content_block_stop":
            index = value.get("index", 0)
            if index in self._thinking:
                return [ThoughtEnd(signature=self._thinking.pop(index))]
            call = self._calls.pop(index, None)
            return [self._finish_call(*call)] if call else []
        if kind == "message_start":
            usage = (value.get("message") or {}).get("usage") or {}
            self._prompt(usage)
            self._output_tokens = int(usage.get("output_tokens") or 0)
        elif kind == "message_delta":
            stop = (value.get("delta") or {}).get("stop_reason")
            if stop:
                self._stop = str(stop)
            usage = value.get("usage") or {}
            if "output_tokens" in usage:
                self._output_tokens = int(usage["output_tokens"] or 0)
            if usage.get("input_tokens"):
                self._prompt(usage)
        elif kind == "message_stop":
            return [Usage(self._input_tokens, self._output_tokens, self._cached,
                          self._cache_write), Done(self._stop)]
        elif kind == "error":
            error = value.get("error") or {}
            return [Failed(f"{error.get('type', 'error')}: {error.get('message', data)}")]
        return []

    def _delta(self, value: Json) -> list[Part]:
        delta = value.get("delta") or {}
        if delta.get("type") == "text_delta":
            return [Text(str(delta.get("text", "")))]
        if delta.get("type") == "thinking_delta":
            return [Reasoning(str(delta.get("thinking", "")))]
        if delta.get("type") == "signature_delta":
            index = value.get("index", 0)
            if index in self._thinking:
                self._thinking[index] += str(delta.get("signature", ""))
            return []
        if delta.get("type") == "input_json_delta":
            call = self._calls.get(value.get("index", 0))
            if call is not None:
                call[2].append(str(delta.get("partial_json", "")))
        return []

    @staticmethod
    def _finish_call(call_id: str, name: str, pieces: list[str], start_input: Any) -> CallPart:
        arguments = "".join(pieces)
        if not arguments:
            arguments = orjson.dumps(start_input or {}).decode()
        return CallPart(call_id, name, arguments)

    def finish(self) -> Iterable[Part]:
        """Nothing: without `message_stop` the answer is not complete."""
        return []


def parser() -> Parser:
    """A parser for one response."""
    return Parser()
