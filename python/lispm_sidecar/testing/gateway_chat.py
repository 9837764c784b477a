"""The OpenAI Chat Completions dialect, as Hermes and OpenClaw speak it.

Request quirks handled (hermes-openclaw-holon reference §1): OpenClaw's
synthetic trailing `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` user message (also
sent after every tool result), its `[Sun 2026-11-29 22:33 UTC] ` prefix and
`Runtime: agent=…` suffix; Hermes's tool-less side requests for a title
("Generate a short, descriptive title") and for its smart-approval reviewer
("You are a security reviewer"), which gets `ESCALATE` so the user decides.

And the quirks of local servers and the models they run (llama.cpp,
Ollama, vLLM, LM Studio), each a mode a model's name turns on when it
holds the mode's name (`QUIRKS`): a test asks for `local text-calls` to
get calls written as `<tool_call>` text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from .gateway_cache import Prompt
from .gateway_script import OfferedTool, Reply, ToolResult, short_title
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

INJECTED = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>",)
TITLE_MARK = "Generate a short, descriptive title"
REVIEW_MARK = "You are a security reviewer"
#: What the smart-approval reviewer answers: the user is asked.
REVIEW_ANSWER = "ESCALATE"
_STAMP = re.compile(r"^\[[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)? [A-Z+\-0-9]+\] ")
_RUNTIME = "\n\nRuntime: agent="


def parse(body: Json) -> Exchange:
    """The exchange of one `POST /v1/chat/completions` body."""
    timeline = Timeline()
    names: dict[str, str] = {}
    system: list[str] = []
    for group, message in enumerate(body.get("messages") or []):
        if isinstance(message, Mapping):
            _walk(message, group, timeline, names, system)
    tools = offered(body.get("tools"))
    conv = timeline.conversation(tools)
    model = str(body.get("model") or "fake-model")
    stream = bool(body.get("stream"))
    usage = bool((body.get("stream_options") or {}).get("include_usage"))
    context = "\n".join(system) + "\n" + conv.prompt[:400]
    if not tools and REVIEW_MARK in context:
        return Exchange("review", conv, model, stream, Reply(REVIEW_ANSWER), usage)
    if not tools and TITLE_MARK in context:
        return Exchange("title", conv, model, stream, Reply(short_title(conv.prompt)), usage)
    return Exchange("main", conv, model, stream, None, usage,
                    reasoning=body.get("reasoning_effort") is not None)


def _walk(message: Mapping[str, Any], group: int, timeline: Timeline,
          names: dict[str, str], system: list[str]) -> None:
    role, content = message.get("role"), message.get("content")
    if role in ("system", "developer"):
        system.append(text_of(content))
    elif role == "user":
        parts = [content] if isinstance(content, str) else content
        for part in parts if isinstance(parts, list) else []:
            text = real_text(part if isinstance(part, str) else _text_part(part))
            if text:
                timeline.add_prompt(text, group)
    elif role == "assistant":
        timeline.add_assistant()
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping):
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name"))
    elif role == "tool":
        name = names.get(str(message.get("tool_call_id")), "?")
        timeline.add_result(ToolResult(name, text_of(content)))
    elif role == "function":
        timeline.add_result(ToolResult(str(message.get("name")), text_of(content)))


def _text_part(part: Any) -> str:
    if isinstance(part, Mapping) and part.get("type") in ("text", "input_text"):
        return str(part.get("text", ""))
    return ""


def real_text(text: str) -> str:
    """The user's own words, or "" for injected context."""
    text = text.split(_RUNTIME, 1)[0].strip()
    if is_injected(text, INJECTED):
        return ""
    return _STAMP.sub("", text)


def offered(tools: Any) -> list[OfferedTool]:
    """The function tools of a Chat Completions request."""
    result = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            props = (function.get("parameters") or {}).get("properties") or {}
            arrays = {k for k, v in props.items() if isinstance(v, Mapping)
                      and v.get("type") == "array"}
            result.append(OfferedTool(function["name"], None, frozenset(props),
                                      frozenset(arrays)))
    return result


#: The quirks of local servers, by the word in a model's name that asks for one.
QUIRKS = {
    "text-calls": "calls written as <tool_call>{...}</tool_call> in the content",
    "bare-json": "one call written as the whole content, a bare JSON object",
    "no-ids": "calls streamed without an id",
    "object-args": "arguments sent as a JSON object, not its text",
    "no-usage": "no usage, even when asked for",
    "reasoning": "reasoning_content and a <think> block before the answer",
    "odd-finish": "finish reason `eos` instead of OpenAI's",
}


def quirks(model: str) -> frozenset[str]:
    """The quirks the model's name asks for."""
    return frozenset(name for name in QUIRKS if name in model)


def _usage(prompt: Prompt, output_tokens: int) -> Json:
    return {"prompt_tokens": prompt.tokens, "completion_tokens": output_tokens,
            "total_tokens": prompt.tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": prompt.cache_read}}


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.call is not None else "stop"


def complete(reply: Reply, ex: Exchange, prompt: Prompt) -> Json:
    """The non-streaming response body."""
    message: Json = {"role": "assistant", "content": reply.text}
    if reply.calls:
        message["content"] = reply.text or None
        message["tool_calls"] = [{
            "id": new_id("call"), "type": "function",
            "function": {"name": call.name, "arguments": call.wire_args()}}
            for call in reply.calls]
    choice = {"index": 0, "message": message, "finish_reason": _finish(reply)}
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": now(),
            "model": ex.model, "choices": [choice],
            "usage": _usage(prompt, tokens(reply.text))}


async def stream(resp: web.StreamResponse, reply: Reply, ex: Exchange,
                 prompt: Prompt) -> None:
    """Stream `reply` as chat.completion.chunk frames ending in `[DONE]`."""
    pacer = pacer_for(reply)
    base = {"id": new_id("chatcmpl"), "object": "chat.completion.chunk", "created": now(),
            "model": ex.model}

    async def send(delta: Json, finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        await send_sse(resp, {**base, "choices": [choice]})

    quirky = quirks(ex.model)
    await send({"role": "assistant", "content": ""})
    if "reasoning" in quirky:
        await send({"reasoning_content": "Let me think about it."})
        await send({"content": "<think>thinking aloud</think>"})
    elif ex.reasoning:
        for piece in chunks(thinking_of(ex)):
            await send({"reasoning_content": piece})
    for piece in pieces(reply):
        await pacer.tick()
        await send({"content": piece})
    if "text-calls" in quirky or ("bare-json" in quirky and len(reply.calls) == 1):
        for call in reply.calls:
            written = json.dumps({"name": call.name, "arguments": call.args})
            await send({"content": written if "bare-json" in quirky
                        else f"<tool_call>{written}</tool_call>"})
    else:
        for index, call in enumerate(reply.calls):
            await pacer.tick()
            head: Json = {"index": index, "type": "function",
                          "function": {"name": call.name, "arguments": ""}}
            if "no-ids" not in quirky:
                head["id"] = new_id("call")
            await send({"tool_calls": [head]})
            args: Any = call.args if "object-args" in quirky else call.wire_args()
            await send({"tool_calls": [{"index": index, "function": {"arguments": args}}]})
    await send({}, "eos" if "odd-finish" in quirky
               else "stop" if quirky & {"text-calls", "bare-json"} else _finish(reply))
    if ex.include_usage and "no-usage" not in quirky:
        await send_sse(resp, {**base, "choices": [],
                              "usage": _usage(prompt, tokens(reply.text))})
    await send_sse(resp, b"[DONE]")
