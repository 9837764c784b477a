"""OpenAI-compatible Chat Completions, streaming (`POST {base_url}/chat/completions`).

The one dialect of OpenAI's older API, OpenRouter, and local servers
(llama.cpp's `llama-server`, Ollama's `/v1`, vLLM).  The system prompt is
the first message; an assistant's calls are its `tool_calls`, each result
a `tool` message.  A call streams in pieces by `index` (id and name
first, then its arguments); the calls are complete when the choice
finishes.  Usage is asked for with `stream_options.include_usage` and
comes in a chunk of its own, before `[DONE]`.  Without a key no
`Authorization` is sent (local servers need none).
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from .neutral import CallPart, Done, Failed, Json, Message, ModelRequest, Part, Text, Usage

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
    return found


class Parser:
    """Reads `chat.completion.chunk`s up to `[DONE]`."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self._stop: str | None = None
        self._usage: Usage | None = None

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
                                int(usage.get("completion_tokens") or 0))
        parts: list[Part] = []
        for choice in value.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                parts.append(Text(str(delta["content"])))
            for call in delta.get("tool_calls") or []:
                self._add(call)
            if choice.get("finish_reason"):
                self._stop = str(choice["finish_reason"])
                parts.extend(self._finish_calls())
        return parts

    def _add(self, call: Json) -> None:
        ids, names, pieces = self._calls.setdefault(int(call.get("index") or 0), ([], [], []))
        function = call.get("function") or {}
        if call.get("id"):
            ids.append(str(call["id"]))
        if function.get("name"):
            names.append(str(function["name"]))
        if function.get("arguments"):
            pieces.append(str(function["arguments"]))

    def _finish_calls(self) -> list[Part]:
        calls: list[Part] = [
            CallPart(ids[0] if ids else f"call_{index}", names[0] if names else "",
                     "".join(pieces))
            for index, (ids, names, pieces) in sorted(self._calls.items())]
        self._calls.clear()
        return calls

    def _end(self) -> list[Part]:
        if self._stop is None:
            return [Failed("the stream ended ([DONE]) before the answer finished")]
        parts: list[Part] = [self._usage] if self._usage else []
        return [*parts, Done(STOP_REASONS.get(self._stop, self._stop))]

    def finish(self) -> Iterable[Part]:
        """Done if the answer had finished and only `[DONE]` is missing."""
        return self._end() if self._stop is not None else []


def parser() -> Parser:
    """A parser for one response."""
    return Parser()
