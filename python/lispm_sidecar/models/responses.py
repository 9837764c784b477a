"""The OpenAI Responses API, streaming (`POST {base_url}/responses`).

The system prompt is `instructions`; messages become input items: the
user's and the assistant's words `message` items, an assistant's calls
`function_call` items, their results `function_call_output` items.
Nothing is stored on the server (`store: false`), so every request
carries the whole history.  With an effort, `reasoning` asks for it and
for its summary, which streams as reasoning; a summary does not go back
(without the server's encrypted reasoning, this API takes none).
"""

from __future__ import annotations

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


def url(base_url: str) -> str:
    """`…/responses`; BASE_URL is the API's root, `https://api.openai.com/v1`."""
    return base_url + "/responses"


def headers(key: str | None) -> dict[str, str]:
    """The key goes in `Authorization: Bearer`."""
    found = {"content-type": "application/json", "accept": "text/event-stream"}
    if key:
        found["authorization"] = f"Bearer {key}"
    return found


def _items(message: Message) -> list[Json]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": message.content}]
    items: list[Json] = []
    if message.role == "user":
        items.append({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": message.content}]})
    elif message.content:
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": message.content}]})
    for call in message.tool_calls:
        items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                      "arguments": call.arguments})
    return items


def items(neutral: Iterable[Message]) -> list[Json]:
    """The API's input items for NEUTRAL messages."""
    return [item for message in neutral for item in _items(message)]


def body(request: ModelRequest) -> Json:
    """The streaming request's body."""
    found: Json = {"model": request.model, "input": items(request.messages), "stream": True,
                   "store": False}
    if request.system:
        found["instructions"] = request.system
    if request.tools:
        found["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.parameters, "strict": False} for t in request.tools]
    if request.max_tokens:
        found["max_output_tokens"] = request.max_tokens
    if request.cache_key:
        found["prompt_cache_key"] = request.cache_key
    if request.effort is not None:
        found["reasoning"] = {"effort": request.effort.level, "summary": "auto"}
    return found


class Parser:
    """Reads `response.created` … `response.completed`."""

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str, list[str]]] = {}
        self._called = False

    def feed(self, event: str, data: str) -> Iterable[Part]:
        """The parts of one event."""
        if not data:
            return []
        value = orjson.loads(data)
        kind = value.get("type", event)
        if kind == "response.output_text.delta":
            return [Text(str(value.get("delta", "")))]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [Reasoning(str(value.get("delta", "")))]
        if kind == "response.output_item.added":
            item = value.get("item") or {}
            if item.get("type") == "function_call":
                self._calls[str(item.get("id"))] = (
                    str(item.get("call_id", "")), str(item.get("name", "")), [])
        elif kind == "response.function_call_arguments.delta":
            call = self._calls.get(str(value.get("item_id")))
            if call is not None:
                call[2].append(str(value.get("delta", "")))
        elif kind == "response.output_item.done":
            item = value.get("item") or {}
            if item.get("type") == "function_call":
                return [self._finish_call(item)]
        elif kind in ("response.completed", "response.incomplete"):
            return self._end(value.get("response") or {}, kind)
        elif kind in ("response.failed", "error"):
            error = (value.get("response") or {}).get("error") or value.get("error") or value
            return [Failed(f"{error.get('code') or 'error'}: {error.get('message', data)}")]
        return []

    def _finish_call(self, item: Json) -> CallPart:
        self._called = True
        call_id, name, pieces = self._calls.pop(
            str(item.get("id")), (str(item.get("call_id", "")), str(item.get("name", "")), []))
        arguments = item.get("arguments")
        if not isinstance(arguments, str):
            arguments = "".join(pieces)
        return CallPart(call_id or str(item.get("call_id", "")),
                        name or str(item.get("name", "")), arguments)

    def _end(self, response: Json, kind: str) -> list[Part]:
        usage = response.get("usage") or {}
        if kind == "response.incomplete":
            reason = str((response.get("incomplete_details") or {}).get("reason") or "incomplete")
            stop = "max_tokens" if reason == "max_output_tokens" else reason
        else:
            stop = "tool_use" if self._called else "end_turn"
        return [Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
                      usage_detail(usage, "input_tokens_details", "cached_tokens"), 0,
                      usage_detail(usage, "output_tokens_details", "reasoning_tokens")),
                Done(stop)]

    def finish(self) -> Iterable[Part]:
        """Nothing: without `response.completed` the answer is not complete."""
        return []


def parser() -> Parser:
    """A parser for one response."""
    return Parser()
