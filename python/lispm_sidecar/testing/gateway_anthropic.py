"""The Anthropic Messages dialect, as Claude Code speaks it.

Request quirks handled (reference §2.1): `role:"system"` entries inside
`messages`, `<system-reminder>` and interrupt-marker text blocks, a new prompt
merged into the user message that still holds tool_result blocks, and the
title side request carrying `output_config.format` = json_schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from .gateway_cache import Prompt
from .gateway_script import OfferedTool, Reply, ToolResult, schema_value, short_title
from .gateway_wire import (
    Exchange,
    Json,
    Timeline,
    chunks,
    is_injected,
    new_id,
    pacer_for,
    pieces,
    send_sse,
    sign,
    text_of,
    thinking_of,
    tokens,
)

#: User text blocks that are context the CLI injected, not the user's prompt.
INJECTED = (
    "[Request interrupted",
    "Caveat: The messages below were generated",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
)
_REMINDER = re.compile(r"<system-reminder>.*?(</system-reminder>|\Z)", re.S)
_SESSION = re.compile(r"<session>\s*(.*?)\s*</session>", re.S)
_CALL_TYPES = ("tool_use", "server_tool_use", "mcp_tool_use")


def parse(body: Json) -> Exchange:
    """The exchange of one `POST /v1/messages` body."""
    timeline = Timeline()
    names: dict[str, str] = {}
    for group, message in enumerate(body.get("messages") or []):
        if isinstance(message, Mapping):
            _walk(message, group, timeline, names)
    conv = timeline.conversation(offered(body.get("tools")))
    model = str(body.get("model") or "claude-fake")
    stream = bool(body.get("stream"))
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        session = _SESSION.search(conv.prompt)
        title = short_title(session[1] if session else conv.prompt)
        value = schema_value(fmt.get("schema"), title)
        return Exchange("title", conv, model, stream, Reply(orjson.dumps(value).decode()))
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    refused = _thinking_refused(body.get("messages") or [], thinking)
    if refused:
        return Exchange("main", conv, model, stream, Reply(status=400, body={
            "type": "error", "error": {"type": "invalid_request_error", "message": refused}}),
            reasoning=thinking)
    return Exchange("main", conv, model, stream, reasoning=thinking)


def _thinking_refused(messages: list[Any], thinking: bool) -> str:
    """Why the API would refuse MESSAGES' thinking, or "": a thinking block
    whose signature is not the one given with it, or (THINKING enabled) a
    last assistant message with tool calls that does not begin with one."""
    assistants = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant"]
    for index, message in enumerate(assistants):
        blocks = message.get("content")
        blocks = blocks if isinstance(blocks, list) else []
        for block in blocks:
            if (isinstance(block, Mapping) and block.get("type") == "thinking"
                    and block.get("signature") != sign(str(block.get("thinking", "")))):
                return f"messages.{index}.content: Invalid `signature` in `thinking` block"
        last = index == len(assistants) - 1
        calls = any(isinstance(b, Mapping) and b.get("type") in _CALL_TYPES for b in blocks)
        first = blocks[0].get("type") if blocks and isinstance(blocks[0], Mapping) else None
        if thinking and last and calls and first not in ("thinking", "redacted_thinking"):
            return (f"messages.{index}.content.0.type: Expected `thinking` or "
                    f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, "
                    "a final `assistant` message must start with a thinking block")
    return ""


def _walk(message: Mapping[str, Any], group: int, timeline: Timeline,
          names: dict[str, str]) -> None:
    role, content = message.get("role"), message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return
    if role == "assistant":
        timeline.add_assistant()
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if role == "assistant" and kind in _CALL_TYPES:
            names[str(block.get("id"))] = str(block.get("name"))
        elif role == "user" and kind == "text":
            real = real_text(str(block.get("text", "")))
            if real:
                timeline.add_prompt(real, group)
        elif role == "user" and kind == "tool_result":
            name = names.get(str(block.get("tool_use_id")), "?")
            timeline.add_result(ToolResult(name, text_of(block.get("content"))))


def real_text(text: str) -> str:
    """The user's own words in a text block, or "" for injected context."""
    text = _REMINDER.sub("", text).strip()
    return "" if is_injected(text, INJECTED) else text


def offered(tools: Any) -> list[OfferedTool]:
    """The tools of an Anthropic request."""
    result = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            props = (tool.get("input_schema") or {}).get("properties") or {}
            arrays = {k for k, v in props.items() if isinstance(v, Mapping)
                      and v.get("type") == "array"}
            result.append(OfferedTool(tool["name"], None, frozenset(props), frozenset(arrays)))
    return result


def _message(ex: Exchange, content: list[Json], stop: str | None, usage: Json) -> Json:
    return {"id": new_id("msg"), "type": "message", "role": "assistant", "model": ex.model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def _usage(prompt: Prompt, output_tokens: int) -> Json:
    return {"input_tokens": prompt.uncached, "output_tokens": output_tokens,
            "cache_creation_input_tokens": prompt.cache_write,
            "cache_read_input_tokens": prompt.cache_read}


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.call is not None else "end_turn"


def complete(reply: Reply, ex: Exchange, prompt: Prompt) -> Json:
    """The non-streaming response body."""
    content: list[Json] = []
    if ex.reasoning:
        thinking = thinking_of(ex)
        content.append({"type": "thinking", "thinking": thinking, "signature": sign(thinking)})
    if reply.text or reply.call is None:
        content.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        content.append({"type": "tool_use", "id": new_id("toolu"), "name": call.name,
                        "input": call.args})
    usage = _usage(prompt, tokens(reply.text))
    return _message(ex, content, _stop_reason(reply), usage)


async def stream(resp: web.StreamResponse, reply: Reply, ex: Exchange,
                 prompt: Prompt) -> None:
    """Stream `reply` as Claude Code's SSE events."""
    pacer = pacer_for(reply)
    start = _message(ex, [], None, _usage(prompt, 1))
    await _event(resp, {"type": "message_start", "message": start})
    index = 0
    if ex.reasoning:
        thinking = thinking_of(ex)
        await _event(resp, _block_start(index, {"type": "thinking", "thinking": "",
                                                "signature": ""}))
        # The reasoning is not paced: a step's delay and cut are its answer's.
        for piece in chunks(thinking):
            await _event(resp, _delta(index, {"type": "thinking_delta", "thinking": piece}))
        await _event(resp, _delta(index, {"type": "signature_delta",
                                          "signature": sign(thinking)}))
        await _event(resp, {"type": "content_block_stop", "index": index})
        index += 1
    if reply.text or reply.call is None:
        await _event(resp, _block_start(index, {"type": "text", "text": ""}))
        for piece in pieces(reply):
            await pacer.tick()
            await _event(resp, _delta(index, {"type": "text_delta", "text": piece}))
        await _event(resp, {"type": "content_block_stop", "index": index})
        index += 1
    for call in reply.calls:
        await pacer.tick()
        block = {"type": "tool_use", "id": new_id("toolu"), "name": call.name, "input": {}}
        await _event(resp, _block_start(index, block))
        partial = call.wire_args()
        await _event(resp, _delta(index, {"type": "input_json_delta", "partial_json": partial}))
        await _event(resp, {"type": "content_block_stop", "index": index})
        index += 1
    await _event(resp, {"type": "message_delta",
                        "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
                        "usage": {"output_tokens": tokens(reply.text)}})
    await _event(resp, {"type": "message_stop"})


def _block_start(index: int, block: Json) -> Json:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: Json) -> Json:
    return {"type": "content_block_delta", "index": index, "delta": delta}


async def _event(resp: web.StreamResponse, data: Json) -> None:
    await send_sse(resp, data, str(data["type"]))
