"""Pieces the gateway's dialects share: the parsed exchange, SSE, pacing, ids."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from .gateway_script import Conversation, OfferedTool, Reply, ToolResult

Json = dict[str, Any]

_CHUNK = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class Exchange:
    """A parsed model request.

    `kind` is `main`, `title` (a title side request) or `review` (Hermes's
    security reviewer). `side` holds the fixed answer of a side request.
    """

    kind: str
    conv: Conversation
    model: str
    stream: bool
    side: Reply | None = None
    include_usage: bool = False
    #: Whether the request asks for the model's reasoning.
    reasoning: bool = False


#: What the gateway signs its thinking with (Anthropic's signatures are opaque).
_SIGNING_KEY = b"lispm-scripted-gateway"


def thinking_of(ex: Exchange) -> str:
    """The model's reasoning before its answer to EX, when asked for."""
    rounds = len(ex.conv.results)
    return f"The user asked: {ex.conv.prompt[:200]}. Tool results so far: {rounds}."


def sign(thinking: str) -> str:
    """The signature of THINKING, as the gateway gives and checks it."""
    return hmac.new(_SIGNING_KEY, thinking.encode(), hashlib.sha256).hexdigest()


def new_id(prefix: str) -> str:
    """A fresh id such as `msg_0123…`."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def now() -> int:
    """Unix seconds."""
    return int(time.time())


def chunks(text: str) -> list[str]:
    """`text` split into word-sized pieces that join back to it."""
    return _CHUNK.findall(text) if text else []


def tokens(text: str) -> int:
    """A rough token count (4 characters a token), at least 1."""
    return max(1, len(text) // 4)


def pieces(reply: Reply) -> list[str]:
    """The pieces `reply`'s text streams in: word by word, or `reply.piece` long."""
    if reply.piece > 0:
        return [reply.text[i:i + reply.piece] for i in range(0, len(reply.text), reply.piece)]
    return chunks(reply.text)


class StreamCut(Exception):
    """The script cuts this stream here: the connection is dropped."""


class Pacer:
    """Spreads `delay` seconds evenly over `pieces` streamed pieces.

    With `cut`, the tick before piece number `cut` + 1 raises `StreamCut`.
    """

    def __init__(self, delay: float, pieces: int, cut: int | None = None) -> None:
        self._pause = delay / pieces if delay > 0 and pieces > 0 else 0.0
        self._left = cut

    async def tick(self) -> None:
        """Wait before the next piece."""
        if self._left is not None:
            if self._left <= 0:
                raise StreamCut
            self._left -= 1
        if self._pause:
            await asyncio.sleep(self._pause)


def pacer_for(reply: Reply) -> Pacer:
    """A pacer over the text pieces and the tool calls of `reply`."""
    return Pacer(reply.delay, len(pieces(reply)) + len(reply.calls), reply.cut)


async def open_sse(request: web.Request) -> web.StreamResponse:
    """A prepared `text/event-stream` response."""
    resp = web.StreamResponse(
        status=200,
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
    )
    await resp.prepare(request)
    return resp


async def send_sse(resp: web.StreamResponse, data: Any, event: str | None = None) -> None:
    """One SSE frame: optional `event:` line, a `data:` line, a blank line."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    await resp.write(head + b"data: " + payload + b"\n\n")


def text_of(content: Any) -> str:
    """The text of a content value: a string or a list of text-ish parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        if "text" in content and isinstance(content["text"], str):
            return content["text"]
        return text_of(content.get("content", ""))
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content)
    return "" if content is None else str(content)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        text = part.get("text")
        if isinstance(text, str):
            return text
        return f"[{part.get('type', 'part')}]"
    return str(part)


def is_injected(text: str, prefixes: Iterable[str]) -> bool:
    """Whether `text` (stripped) starts with one of `prefixes`."""
    stripped = text.lstrip()
    return any(stripped.startswith(p) for p in prefixes)


class Timeline:
    """Walks a conversation in order, keeping the last real prompt and the
    tool results after it. Consecutive prompt texts of one message join."""

    def __init__(self) -> None:
        self.prompt = ""
        self.results: list[ToolResult] = []
        self.rounds = 0
        self._group = -1
        self._last_was_prompt = False
        self._last_was_result = False

    def add_prompt(self, text: str, group: int) -> None:
        """A real user text in message number `group`."""
        if self._last_was_prompt and group == self._group:
            self.prompt = f"{self.prompt}\n{text}"
        else:
            self.prompt, self.results, self.rounds = text, [], 0
        self._group, self._last_was_prompt, self._last_was_result = group, True, False

    def add_assistant(self) -> None:
        """Something the model said: the tool results after it are a new round."""
        self._last_was_prompt = self._last_was_result = False

    def add_result(self, result: ToolResult) -> None:
        """A tool result the model sees; results in a row are one round."""
        self.results.append(result)
        if not self._last_was_result:
            self.rounds += 1
        self._last_was_prompt, self._last_was_result = False, True

    def conversation(self, tools: Iterable[OfferedTool]) -> Conversation:
        """The conversation so far, offering `tools`."""
        return Conversation(self.prompt, tuple(self.results), tuple(tools), self.rounds)
