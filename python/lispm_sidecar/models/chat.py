"""OpenAI-compatible Chat Completions, streaming (`POST {base_url}/chat/completions`).

The one dialect of OpenAI's older API, OpenRouter, and local servers
(llama.cpp's `llama-server`, Ollama's `/v1`, vLLM).  The system prompt is
the first message; an assistant's calls are its `tool_calls`, each result
a `tool` message.  A call streams in pieces by `index` (id and name
first, then its arguments); the calls are complete when the choice
finishes.  Usage is asked for with `stream_options.include_usage` and
comes in a chunk of its own, before `[DONE]`.  Without a key no
`Authorization` is sent (local servers need none).

Local servers (llama.cpp, Ollama, vLLM, LM Studio) and the models they
run differ from OpenAI's, and none of it may kill a turn:

- a call written as text in the content, `<tool_call>{"name": …,
  "arguments": {…}}</tool_call>` (Qwen's and Hermes's template), or the
  whole content one bare JSON object of that shape: each becomes a call;
  the text around it stays text;
- a call without an id gets one of its own, unique in the session;
- arguments sent as a JSON object instead of its text are written as text;
- a finish reason OpenAI does not use (`eos`, `tool`, …) is `tool_use`
  when the answer made calls, else `end_turn`;
- `reasoning_content` (or `reasoning`) and a `<think>` block's text are
  not the answer's text: they stream as reasoning, and do not go back.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

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
    Usage,
    usage_detail,
)

#: The API's finish reasons in neutral words.
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                "length": "max_tokens", "content_filter": "refusal"}


def url(base_url: str) -> str:
    """`…/chat/completions`; BASE_URL is the API's root, such as `http://localhost:11434/v1`."""
    return base_url + "/chat/completions"


def headers(key: str | None) -> dict[str, str]:
    """The key goes in `Authorization: Bearer`."""
    found = {"content-type": "application/json", "accept": "text/event-stream"}
    if key:
        found["authorization"] = f"Bearer {key}"
    return found


def _message(message: Message) -> Json:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "user" or not message.tool_calls:
        return {"role": message.role, "content": message.content}
    return {"role": "assistant", "content": message.content or None,
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}}
                           for c in message.tool_calls]}


def messages(system: str, neutral: Iterable[Message]) -> list[Json]:
    """The API's messages: SYSTEM first, then the NEUTRAL ones."""
    head = [{"role": "system", "content": system}] if system else []
    return head + [_message(m) for m in neutral]


def body(request: ModelRequest) -> Json:
    """The streaming request's body."""
    found: Json = {"model": request.model, "messages": messages(request.system, request.messages),
                   "stream": True, "stream_options": {"include_usage": True}}
    if request.tools:
        found["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools]
    if request.max_tokens:
        found["max_tokens"] = request.max_tokens
    if request.effort is not None:
        found["reasoning_effort"] = request.effort.level
    return found


#: The most content held back while it may be a call written as text;
#: past it, it is text.
HOLD_LIMIT = 1024 * 1024

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


def _call_of(value: object) -> tuple[str, str] | None:
    """(NAME, ARGUMENTS-TEXT) of VALUE, a call written as JSON, or None."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        return value["name"], arguments
    if isinstance(arguments, dict):
        return value["name"], orjson.dumps(arguments).decode()
    return None


def _new_id() -> str:
    return f"call_{secrets.token_hex(8)}"


class Parser:
    """Reads `chat.completion.chunk`s up to `[DONE]`."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self._stop: str | None = None
        self._usage: Usage | None = None
        self._held = ""
        self._said = False
        self._thinking = False
        self._text_calls: list[CallPart] = []

    def feed(self, event: str, data: str) -> Iterable[Part]:
        """The parts of one chunk."""
        if data.strip() == "[DONE]":
            return self._end()
        if not data:
            return []
        value = orjson.loads(data)
        if value.get("error"):
            error = value["error"]
            message = error.get("message", data) if isinstance(error, dict) else error
            return [Failed(f"error: {message}")]
        usage = value.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(int(usage.get("prompt_tokens") or 0),
                                int(usage.get("completion_tokens") or 0),
                                usage_detail(usage, "prompt_tokens_details", "cached_tokens"),
                                0, usage_detail(usage, "completion_tokens_details",
                                                    "reasoning_tokens"))
        parts: list[Part] = []
        for choice in value.get("choices") or []:
            delta = choice.get("delta") or {}
            for field in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(field), str) and delta[field]:
                    parts.append(Reasoning(delta[field]))
            if delta.get("content"):
                parts.extend(self._content(str(delta["content"])))
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    self._add(call)
            if choice.get("finish_reason"):
                self._stop = str(choice["finish_reason"])
                parts.extend(self._flush())
                parts.extend(self._finish_calls())
        return parts

    def _content(self, text: str) -> list[Part]:
        """The text parts of TEXT, a piece of content; calls written in it held."""
        self._held += text
        parts: list[Part] = []
        if len(self._held) > HOLD_LIMIT and not self._thinking:
            held, self._held, self._said = self._held, "", True
            return [Text(held)]
        while self._held:
            if self._thinking:
                end = self._held.find(_THINK_CLOSE)
                if end < 0:
                    # Give what cannot begin the closing tag.
                    keep = max((k for k in range(1, len(_THINK_CLOSE))
                                if self._held.endswith(_THINK_CLOSE[:k])), default=0)
                    if len(self._held) > keep:
                        parts.append(Reasoning(self._held[:len(self._held) - keep]))
                        self._held = self._held[len(self._held) - keep:]
                    return parts
                if end > 0:
                    parts.append(Reasoning(self._held[:end]))
                self._held = self._held[end + len(_THINK_CLOSE):]
                self._thinking = False
                continue
            if not self._said and self._held.lstrip().startswith("{"):
                return parts        # Perhaps a bare call: wait for the whole.
            starts = [at for at in (self._held.find(_OPEN), self._held.find(_THINK_OPEN))
                      if at >= 0]
            at = min(starts) if starts else -1
            if at < 0:
                # Keep back what could begin a tag.
                keep = max((k for k in range(1, len(_OPEN))
                            if self._held.endswith(_OPEN[:k]) or
                            self._held.endswith(_THINK_OPEN[:k])), default=0)
                out, self._held = self._held[:len(self._held) - keep], self._held[
                    len(self._held) - keep:]
                if out:
                    parts.append(Text(out))
                    self._said = self._said or bool(out.strip())
                return parts
            if at > 0:
                parts.append(Text(self._held[:at]))
                self._said = self._said or bool(self._held[:at].strip())
                self._held = self._held[at:]
            if self._held.startswith(_THINK_OPEN):
                self._held = self._held[len(_THINK_OPEN):]
                self._thinking = True
                continue
            end = self._held.find(_CLOSE)
            if end < 0:
                return parts
            inner = self._held[len(_OPEN):end]
            self._held = self._held[end + len(_CLOSE):]
            try:
                call = _call_of(orjson.loads(inner))
            except orjson.JSONDecodeError:
                call = None
            if call is None:
                parts.append(Text(_OPEN + inner + _CLOSE))
                self._said = True
            else:
                self._text_calls.append(CallPart(_new_id(), *call))
        return parts

    def _flush(self) -> list[Part]:
        """What is still held, at the answer's end: a bare call, or text."""
        held, self._held = self._held, ""
        if self._thinking or not held:
            return []
        if not self._said and held.lstrip().startswith("{"):
            try:
                call = _call_of(orjson.loads(held))
            except orjson.JSONDecodeError:
                call = None
            if call is not None:
                self._text_calls.append(CallPart(_new_id(), *call))
                return []
        return [Text(held)]

    def _add(self, call: Json) -> None:
        ids, names, pieces = self._calls.setdefault(int(call.get("index") or 0), ([], [], []))
        function = call.get("function") or {}
        if call.get("id"):
            ids.append(str(call["id"]))
        if function.get("name"):
            names.append(str(function["name"]))
        arguments = function.get("arguments")
        if isinstance(arguments, dict | list):
            pieces.append(orjson.dumps(arguments).decode())
        elif arguments:
            pieces.append(str(arguments))

    def _finish_calls(self) -> list[Part]:
        calls: list[Part] = [
            CallPart(ids[0] if ids else _new_id(), names[0] if names else "",
                     "".join(pieces))
            for _index, (ids, names, pieces) in sorted(self._calls.items())]
        calls.extend(self._text_calls)
        self._made_calls = bool(calls)
        self._calls.clear()
        self._text_calls = []
        return calls

    _made_calls = False

    def _end(self) -> list[Part]:
        if self._stop is None:
            return [Failed("the stream ended ([DONE]) before the answer finished")]
        parts: list[Part] = [self._usage] if self._usage else []
        stop = STOP_REASONS.get(self._stop)
        if stop is None or (self._made_calls and stop == "end_turn"):
            stop = "tool_use" if self._made_calls else "end_turn"
        return [*parts, Done(stop)]

    def finish(self) -> Iterable[Part]:
        """Done if the answer had finished and only `[DONE]` is missing."""
        return self._end() if self._stop is not None else []


def parser() -> Parser:
    """A parser for one response."""
    return Parser()
