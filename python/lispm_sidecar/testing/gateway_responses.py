"""The OpenAI Responses dialect, as Codex speaks it.

Request quirks handled (reference §2.2, §3.3): the developer message and the
injected user messages (`<environment_context>`, `# AGENTS.md`,
`<user_instructions>`, ...) are skipped; tool results arrive as `*_output`
items; MCP tools are offered as `namespace` tools and must be called with
`namespace` + bare name. The TUI's "Generate a concise, single-line task
title" request is answered with a title.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from .gateway_cache import Prompt
from .gateway_script import OfferedTool, Reply, ToolCall, ToolResult, short_title
from .gateway_wire import (
    Exchange,
    Json,
    Timeline,
    chunks,
    is_injected,
    new_id,
    now,
    pacer_for,
    pieces,
    send_sse,
    text_of,
    thinking_of,
    tokens,
)

#: User texts that are context Codex injected, not the user's prompt.
INJECTED = (
    "<environment_context>",
    "# AGENTS.md",
    "<user_instructions>",
    "<turn_aborted>",
    "<user_shell_command>",
    "<INSTRUCTIONS>",
)
TITLE_MARK = "Generate a concise, single-line task title"
_CALL_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call", "mcp_call"}
)
_OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "mcp_tool_call_output",
     "tool_search_output", "local_shell_call_output"}
)


def parse(body: Json) -> Exchange:
    """The exchange of one `POST /v1/responses` body."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    timeline = Timeline()
    names: dict[str, str] = {}
    for group, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, Mapping):
            _walk(item, group, timeline, names)
    conv = timeline.conversation(offered(body.get("tools")))
    model = str(body.get("model") or "fake-model")
    stream = bool(body.get("stream"))
    instructions = str(body.get("instructions") or "")
    if TITLE_MARK in conv.prompt[:400] or TITLE_MARK in instructions[:400]:
        return Exchange("title", conv, model, stream, Reply(_title(conv.prompt)))
    return Exchange("main", conv, model, stream,
                    reasoning=(body.get("reasoning") or {}).get("summary") is not None)


def _title(prompt: str) -> str:
    _, marker, user = prompt.partition("User prompt:")
    return short_title(user if marker else prompt)


def _walk(item: Mapping[str, Any], group: int, timeline: Timeline,
          names: dict[str, str]) -> None:
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") == "user":
        content = item.get("content")
        parts = [content] if isinstance(content, str) else content
        for part in parts if isinstance(parts, list) else []:
            text = part if isinstance(part, str) else text_of(part)
            if text.strip() and not is_injected(text, INJECTED):
                timeline.add_prompt(text.strip(), group)
    elif kind not in _OUTPUT_TYPES:
        timeline.add_assistant()
    if kind in _CALL_TYPES:
        name = str(item.get("name") or kind)
        namespace = item.get("namespace")
        names[str(item.get("call_id"))] = f"{namespace}.{name}" if namespace else name
    elif kind in _OUTPUT_TYPES:
        name = names.get(str(item.get("call_id")), "?")
        timeline.add_result(ToolResult(name, text_of(item.get("output"))))


def offered(tools: Any) -> list[OfferedTool]:
    """The tools of a Responses request; namespace tools are flattened."""
    result: list[OfferedTool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") == "namespace":
            for sub in tool.get("tools") or []:
                if isinstance(sub, Mapping) and isinstance(sub.get("name"), str):
                    result.append(_tool(sub, tool["name"]))
        else:
            result.append(_tool(tool, None))
    return result


def _tool(tool: Mapping[str, Any], namespace: str | None) -> OfferedTool:
    props = (tool.get("parameters") or {}).get("properties") or {}
    arrays = {k for k, v in props.items() if isinstance(v, Mapping) and v.get("type") == "array"}
    return OfferedTool(str(tool["name"]), namespace, frozenset(props), frozenset(arrays),
                       custom=tool.get("type") == "custom")


def _message_item(item_id: str, text: str, done: bool) -> Json:
    content = [{"type": "output_text", "text": text, "annotations": []}] if done else []
    return {"id": item_id, "type": "message", "status": "completed" if done else "in_progress",
            "role": "assistant", "content": content}


def _call_item(item_id: str, call_id: str, call: ToolCall, done: bool) -> Json:
    status = "completed" if done else "in_progress"
    item: Json = {"id": item_id, "call_id": call_id, "name": call.name, "status": status}
    if call.custom:
        item.update(type="custom_tool_call", input=_custom_input(call) if done else "")
    else:
        item.update(type="function_call", arguments=_arguments(call) if done else "")
    if call.namespace:
        item["namespace"] = call.namespace
    return item


def _arguments(call: ToolCall) -> str:
    return call.wire_args()


def _custom_input(call: ToolCall) -> str:
    value = call.args.get("input")
    return value if isinstance(value, str) else _arguments(call)


def _usage(prompt: Prompt, output_tokens: int) -> Json:
    return {"input_tokens": prompt.tokens,
            "input_tokens_details": {"cached_tokens": prompt.cache_read},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt.tokens + output_tokens}


def _response(resp_id: str, ex: Exchange, status: str, output: list[Json],
              usage: Json | None) -> Json:
    body: Json = {"id": resp_id, "object": "response", "created_at": now(), "model": ex.model,
                  "status": status, "error": None, "incomplete_details": None,
                  "output": output}
    if usage is not None:
        body["usage"] = usage
    return body


def _final_items(reply: Reply) -> list[Json]:
    items: list[Json] = []
    if reply.text or reply.call is None:
        items.append(_message_item(new_id("msg"), reply.text, done=True))
    for call in reply.calls:
        items.append(_call_item(new_id("fc"), new_id("call"), call, done=True))
    return items


def complete(reply: Reply, ex: Exchange, prompt: Prompt) -> Json:
    """The non-streaming response body."""
    usage = _usage(prompt, tokens(reply.text))
    body = _response(new_id("resp"), ex, "completed", _final_items(reply), usage)
    body["output_text"] = reply.text
    return body


class _Emitter:
    """Writes Responses events with increasing `sequence_number`s."""

    def __init__(self, resp: web.StreamResponse) -> None:
        self.resp = resp
        self.seq = 0

    async def __call__(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        await send_sse(self.resp, data, kind)


async def stream(resp: web.StreamResponse, reply: Reply, ex: Exchange,
                 prompt: Prompt) -> None:
    """Stream `reply` as Responses SSE events ending in `response.completed`."""
    emit, pacer, resp_id = _Emitter(resp), pacer_for(reply), new_id("resp")
    output: list[Json] = []
    await emit("response.created", response=_response(resp_id, ex, "in_progress", [], None))
    await emit("response.in_progress", response=_response(resp_id, ex, "in_progress", [], None))
    if ex.reasoning:
        output.append(await _stream_summary(emit, thinking_of(ex), len(output)))
    if reply.text or reply.call is None:
        item_id = new_id("msg")
        where = {"item_id": item_id, "output_index": len(output), "content_index": 0}
        await emit("response.output_item.added", output_index=len(output),
                   item=_message_item(item_id, "", done=False))
        part = {"type": "output_text", "text": "", "annotations": []}
        await emit("response.content_part.added", **where, part=part)
        for piece in pieces(reply):
            await pacer.tick()
            await emit("response.output_text.delta", **where, delta=piece)
        await emit("response.output_text.done", **where, text=reply.text)
        await emit("response.content_part.done", **where, part={**part, "text": reply.text})
        output.append(_message_item(item_id, reply.text, done=True))
        await emit("response.output_item.done", output_index=len(output) - 1, item=output[-1])
    for call in reply.calls:
        await pacer.tick()
        output.append(await _stream_call(emit, call, len(output)))
    usage = _usage(prompt, tokens(reply.text))
    await emit("response.completed", response=_response(resp_id, ex, "completed", output, usage))


async def _stream_summary(emit: _Emitter, summary: str, index: int) -> Json:
    """Stream a reasoning item whose summary is SUMMARY; return the item.

    It is not paced: a step's delay and cut are its answer's."""
    item_id = new_id("rs")
    where = {"item_id": item_id, "output_index": index, "summary_index": 0}
    await emit("response.output_item.added", output_index=index,
               item={"type": "reasoning", "id": item_id, "summary": []})
    part = {"type": "summary_text", "text": ""}
    await emit("response.reasoning_summary_part.added", **where, part=part)
    for piece in chunks(summary):
        await emit("response.reasoning_summary_text.delta", **where, delta=piece)
    await emit("response.reasoning_summary_text.done", **where, text=summary)
    await emit("response.reasoning_summary_part.done", **where, part={**part, "text": summary})
    item = {"type": "reasoning", "id": item_id,
            "summary": [{"type": "summary_text", "text": summary}]}
    await emit("response.output_item.done", output_index=index, item=item)
    return item


async def _stream_call(emit: _Emitter, call: ToolCall, index: int) -> Json:
    item_id, call_id = new_id("ctc" if call.custom else "fc"), new_id("call")
    await emit("response.output_item.added", output_index=index,
               item=_call_item(item_id, call_id, call, done=False))
    where = {"item_id": item_id, "output_index": index}
    if call.custom:
        value = _custom_input(call)
        await emit("response.custom_tool_call_input.delta", **where, delta=value)
        await emit("response.custom_tool_call_input.done", **where, input=value)
    else:
        value = _arguments(call)
        await emit("response.function_call_arguments.delta", **where, delta=value)
        await emit("response.function_call_arguments.done", **where, arguments=value)
    item = _call_item(item_id, call_id, call, done=True)
    await emit("response.output_item.done", output_index=index, item=item)
    return item
