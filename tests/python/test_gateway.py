"""Tests of the scripted model gateway (lispm_sidecar.testing.gateway).

Most tests drive an in-process gateway over HTTP with request bodies shaped
like the real CLIs' (reference: claude-code-and-codex.md §2.1, §2.2, §3.3;
hermes-openclaw-holon.md §1). The last two run the real Claude Code and Codex
CLIs against the gateway run as a program, inside a loopback-only network
namespace (`unshare -n`), so nothing can leave the machine.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from lispm_sidecar.testing.gateway import Gateway, ScriptError, classify, load_script
from lispm_sidecar.testing.gateway_script import (
    Conversation,
    OfferedTool,
    ToolResult,
    decide,
    parse_script,
    resolve_tool,
)

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- request shapes

CLAUDE_TOOLS = [
    {"name": "Bash", "description": "Run a command",
     "input_schema": {"type": "object", "properties": {
         "command": {"type": "string"}, "description": {"type": "string"}}}},
    {"name": "mcp__lispm__list_agents", "description": "List agents",
     "input_schema": {"type": "object", "properties": {}}},
]

CODEX_TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {
        "cmd": {"type": "string"}, "sandbox_permissions": {"type": "string"},
        "justification": {"type": "string"}}}},
    {"type": "namespace", "name": "mcp__lispm", "description": "Tools in mcp__lispm.",
     "tools": [{"type": "function", "name": "list_agents", "strict": False,
                "parameters": {"type": "object", "properties": {}}}]},
    {"type": "web_search", "external_web_access": False},
]

HERMES_TOOLS = [
    {"type": "function", "function": {"name": "terminal", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "mcp_lispm_list_agents", "parameters": {
        "type": "object", "properties": {}}}},
]


def claude_body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    """A Claude Code-like Messages request."""
    body = {"model": "claude-opus-4-8", "max_tokens": 32000, "stream": True,
            "thinking": {"type": "adaptive"}, "tools": CLAUDE_TOOLS, "messages": messages}
    return {**body, **extra}


def reminder(text: str) -> dict[str, str]:
    """A user text block that opens with a system reminder, as Claude sends it."""
    return {"type": "text", "text": f"<system-reminder>\nskills: none\n</system-reminder>{text}"}


def codex_input(prompt: str) -> list[dict[str, Any]]:
    """Codex's injected context items followed by the user's prompt."""
    return [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "<permissions instructions>…"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /w\n…"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
    ]


def codex_body(items: Any, **extra: Any) -> dict[str, Any]:
    """A Codex-like Responses request."""
    body = {"model": "fake-model", "instructions": "You are Codex.", "input": items,
            "tools": CODEX_TOOLS, "stream": True, "store": False,
            "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-1"}
    return {**body, **extra}


def chat_body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    """A Hermes-like Chat Completions request."""
    body = {"model": "fake-model", "stream": True, "stream_options": {"include_usage": True},
            "tools": HERMES_TOOLS, "messages": messages}
    return {**body, **extra}


# ---------------------------------------------------------------- HTTP helpers


async def post(gw: Gateway, path: str, body: Any, **headers: str) -> tuple[int, bytes]:
    """POST `body` (JSON) to the gateway; status and raw reply."""
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with aiohttp.ClientSession() as session, session.post(
            gw.url + path, data=data, headers=headers) as resp:
        return resp.status, await resp.read()


async def get(gw: Gateway, path: str, method: str = "GET") -> tuple[int, bytes]:
    """GET (or HEAD) a gateway path; status and raw reply."""
    async with aiohttp.ClientSession() as session, session.request(
            method, gw.url + path) as resp:
        return resp.status, await resp.read()


def sse(raw: bytes) -> list[tuple[str | None, Any]]:
    """SSE frames as (event, decoded data), checking the framing strictly."""
    text = raw.decode()
    assert text.endswith("\n\n"), "every frame ends with a blank line"
    frames = []
    for frame in text[:-2].split("\n\n"):
        lines = frame.split("\n")
        event = lines[0].removeprefix("event: ") if lines[0].startswith("event: ") else None
        data_lines = lines[1:] if event is not None else lines
        assert len(data_lines) == 1 and data_lines[0].startswith("data: "), frame
        payload = data_lines[0].removeprefix("data: ")
        frames.append((event, payload if payload == "[DONE]" else orjson.loads(payload)))
    return frames


def data_of(frames: list[tuple[str | None, Any]], kind: str) -> list[Any]:
    """The data of frames whose `type` is `kind`."""
    return [d for _, d in frames if isinstance(d, dict) and d.get("type") == kind]


# ================================================================ Anthropic


async def test_anthropic_streams_scripted_text_with_correct_sse() -> None:
    script = [{"match": "say hello", "steps": [{"say": "Hello there, world."}]}]
    async with Gateway(script) as gw:
        status, raw = await post(gw, "/v1/messages?beta=true",
                                 claude_body([{"role": "user", "content": "please say hello"}]))
    assert status == 200
    frames = sse(raw)
    assert [e for e, _ in frames] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    assert all(event == data["type"] for event, data in frames)
    text = "".join(d["delta"]["text"] for d in data_of(frames, "content_block_delta"))
    assert text == "Hello there, world."
    assert data_of(frames, "message_delta")[0]["delta"]["stop_reason"] == "end_turn"
    assert data_of(frames, "message_start")[0]["message"]["usage"]["input_tokens"] > 0


async def test_anthropic_finds_prompt_past_injected_context_and_counts_results() -> None:
    script = [{"match": "roll call", "steps": [
        {"tool": "lispm.list_agents", "text": "Checking."},
        {"shell": "echo {last_tool_result}"},
        {"say": "final {last_tool_result}"}]}]
    first = [{"role": "system", "content": "Agents available: …"},
             {"role": "user", "content": [reminder(""), {"type": "text", "text": "roll call"}]}]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/messages", claude_body(first))
        frames = sse(raw)
        blocks = [d["content_block"] for d in data_of(frames, "content_block_start")]
        assert blocks[0] == {"type": "text", "text": ""}
        assert blocks[1]["type"] == "tool_use"
        assert blocks[1]["name"] == "mcp__lispm__list_agents"
        args = data_of(frames, "content_block_delta")[-1]["delta"]
        assert args == {"type": "input_json_delta", "partial_json": "{}"}
        assert data_of(frames, "message_delta")[0]["delta"]["stop_reason"] == "tool_use"

        second = [*first,
                  {"role": "assistant", "content": [
                      {"type": "text", "text": "Checking."},
                      {"type": "tool_use", "id": "toolu_1", "name": "mcp__lispm__list_agents",
                       "input": {}}]},
                  {"role": "system", "content": "The user selected lines 1 to 2"},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1",
                       "content": [{"type": "text", "text": "alpha"}]}]}]
        _, raw = await post(gw, "/v1/messages", claude_body(second))
        call = data_of(sse(raw), "content_block_start")[-1]["content_block"]
        assert call["name"] == "Bash"
        partial = data_of(sse(raw), "content_block_delta")[-1]["delta"]["partial_json"]
        assert orjson.loads(partial) == {"command": "echo alpha", "description": "Run echo alpha"}

        third = [*second,
                 {"role": "assistant", "content": [
                     {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}}]},
                 {"role": "user", "content": [
                     {"type": "tool_result", "tool_use_id": "toolu_2", "content": "alpha"}]}]
        _, raw = await post(gw, "/v1/messages", claude_body(third, stream=False))
        assert orjson.loads(raw)["content"] == [{"type": "text", "text": "final alpha"}]

        fourth = [*third, {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
                  {"role": "user", "content": [{"type": "text", "text": "roll call again"}]}]
        _, raw = await post(gw, "/v1/messages", claude_body(fourth, stream=False))
        assert orjson.loads(raw)["content"][1]["name"] == "mcp__lispm__list_agents"

    log = gw.main_requests("anthropic")
    assert [e["answer"]["step"] for e in log] == [0, 1, 2, 0]
    assert [e["prompt"] for e in log] == ["roll call"] * 3 + ["roll call again"]
    assert log[1]["tool_results"] == [{"name": "mcp__lispm__list_agents", "text": "alpha"}]
    assert log[2]["tool_results"][1] == {"name": "Bash", "text": "alpha"}
    assert log[0]["tools"] == ["Bash", "mcp__lispm__list_agents"]


async def test_anthropic_prompt_merged_into_tool_result_message_is_a_new_prompt() -> None:
    script = [{"match": "first", "steps": [{"tool": "lispm.list_agents"}, {"say": "one"}]},
              {"match": "second", "steps": [{"say": "two"}]}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "first task"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_9", "name": "mcp__lispm__list_agents",
             "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "interrupted"},
            {"type": "text", "text": "[Request interrupted by user for tool use]"},
            reminder(""), {"type": "text", "text": "second task"}]},
    ]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/messages", claude_body(messages, stream=False))
        assert orjson.loads(raw)["content"][0]["text"] == "two"
        # Without the new prompt, the interrupt marker is not a prompt: step 1 of "first".
        messages[2]["content"] = messages[2]["content"][:2]
        _, raw = await post(gw, "/v1/messages", claude_body(messages, stream=False))
        assert orjson.loads(raw)["content"][0]["text"] == "one"
    answers = [e["answer"] for e in gw.main_requests()]
    assert (answers[0]["rule"], answers[0]["step"]) == (1, 0)
    assert (answers[1]["rule"], answers[1]["step"]) == (0, 1)


async def test_anthropic_title_side_request_gets_schema_json_and_keeps_script() -> None:
    script = [{"match": "", "steps": [{"say": "scripted"}]}]
    title_request = claude_body(
        [{"role": "user", "content": [{"type": "text", "text": (
            "<session>\nFix the login bug in the auth module please\n</session>\n\n"
            "Write the title in the language the user wrote in.")}]}],
        tools=[], system=[{"type": "text", "text": "Generate a concise, sentence-case title"}],
        output_config={"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}},
            "required": ["title"]}}})
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/messages", title_request)
        text = "".join(d["delta"]["text"] for d in data_of(sse(raw), "content_block_delta"))
        assert orjson.loads(text) == {"title": "Fix the login bug in the"}
        _, raw = await post(gw, "/v1/messages", {**title_request, "stream": False})
        assert orjson.loads(orjson.loads(raw)["content"][0]["text"])["title"]
    assert [e["kind"] for e in gw.requests] == ["title", "title"]
    assert gw.requests[0]["answer"]["source"] == "side"


async def test_tool_not_offered_is_said_not_hidden() -> None:
    script = [{"match": "go", "steps": [{"tool": "lispm.send_message", "args": {"to": "x"}}]}]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/messages",
                            claude_body([{"role": "user", "content": "go"}], stream=False))
    body = orjson.loads(raw)
    assert body["content"] == [{"type": "text", "text": "tool lispm.send_message not offered"}]
    assert body["stop_reason"] == "end_turn"


# ================================================================ Responses


async def test_responses_namespaced_mcp_call_and_completed_event() -> None:
    script = [{"match": "agents?", "steps": [
        {"tool": "lispm.list_agents", "args": {"all": True}, "text": "Looking."},
        {"say": "got {last_tool_result}"}]}]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/responses", codex_body(codex_input("which agents?")),
                            Authorization="Bearer sk-secret", originator="codex_exec")
        frames = sse(raw)
        assert all(event == data["type"] for event, data in frames)
        seqs = [d["sequence_number"] for _, d in frames]
        assert seqs == list(range(len(frames)))
        assert frames[0][0] == "response.created" and frames[-1][0] == "response.completed"
        output = frames[-1][1]["response"]["output"]
        assert output[0]["content"][0]["text"] == "Looking."
        call = output[1]
        assert call["type"] == "function_call" and call["namespace"] == "mcp__lispm"
        assert call["name"] == "list_agents" and orjson.loads(call["arguments"]) == {"all": True}
        assert data_of(frames, "response.output_item.done")[1]["item"] == call
        usage = frames[-1][1]["response"]["usage"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]

        items = [*codex_input("which agents?"),
                 {"type": "function_call", "namespace": "mcp__lispm", "name": "list_agents",
                  "arguments": "{}", "call_id": call["call_id"]},
                 {"type": "function_call_output", "call_id": call["call_id"],
                  "output": "Wall time: 0.01 seconds\nOutput:\nalpha"}]
        _, raw = await post(gw, "/v1/responses", codex_body(items, stream=False))
        assert orjson.loads(raw)["output"][0]["content"][0]["text"].endswith("Output:\nalpha")
    first, second = gw.main_requests("responses")
    assert first["prompt"] == "which agents?"
    assert first["tools"] == ["exec_command", "mcp__lispm.list_agents"]
    assert first["headers"]["originator"] == "codex_exec" and first["auth"] == "Bearer"
    assert "sk-secret" not in orjson.dumps(gw.requests).decode()
    assert second["tool_results"][0]["name"] == "mcp__lispm.list_agents"


async def test_responses_flat_function_and_escalated_shell() -> None:
    flat_tools = [CODEX_TOOLS[0], {"type": "function", "name": "mcp__lispm__list_agents",
                                   "parameters": {"type": "object", "properties": {}}}]
    script = [{"match": "flat", "steps": [{"tool": "lispm.list_agents"}]},
              {"match": "touch", "steps": [{"shell": "touch /tmp/x", "escalate": True,
                                            "justification": "needs /tmp"}]}]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/responses",
                            codex_body(codex_input("flat one"), tools=flat_tools, stream=False))
        call = orjson.loads(raw)["output"][0]
        assert call["name"] == "mcp__lispm__list_agents" and "namespace" not in call
        _, raw = await post(gw, "/v1/responses", codex_body(codex_input("touch it")))
        item = sse(raw)[-1][1]["response"]["output"][0]
        assert item["name"] == "exec_command"
        assert orjson.loads(item["arguments"]) == {
            "cmd": "touch /tmp/x", "sandbox_permissions": "require_escalated",
            "justification": "needs /tmp"}


async def test_responses_title_request_and_string_input() -> None:
    title = ("Generate a concise, single-line task title for this conversation.\n\n"
             "User prompt:\nrefactor the parser module for speed")
    async with Gateway([{"match": "", "steps": [{"say": "never"}]}]) as gw:
        _, raw = await post(gw, "/v1/responses", codex_body(title, tools=[], stream=False))
        assert orjson.loads(raw)["output_text"] == "refactor the parser module for speed"
        _, raw = await post(gw, "/v1/responses", codex_body("plain string", stream=False))
        assert orjson.loads(raw)["output_text"] == "never"
    assert [e["kind"] for e in gw.requests] == ["title", "main"]


# ================================================================ Chat Completions


async def test_chat_streams_tool_call_usage_and_done() -> None:
    script = [{"match": "agents", "steps": [{"tool": "lispm.list_agents"},
                                            {"shell": "ls {last_tool_result}"},
                                            {"say": "ok: {last_tool_result}"}]}]
    messages: list[Any] = [{"role": "system", "content": "You are Hermes."},
                           {"role": "user", "content": "show agents"}]
    async with Gateway(script) as gw:
        _, raw = await post(gw, "/v1/chat/completions", chat_body(messages))
        frames = sse(raw)
        assert all(event is None for event, _ in frames)
        assert frames[-1][1] == "[DONE]"
        chunks = [d for _, d in frames[:-1]]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        head = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
        assert head["function"] == {"name": "mcp_lispm_list_agents", "arguments": ""}
        assert chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == "{}"
        assert chunks[3]["choices"][0]["finish_reason"] == "tool_calls"
        assert chunks[4]["choices"] == [] and chunks[4]["usage"]["total_tokens"] > 0

        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": "call_1", "type": "function",
                          "function": {"name": "mcp_lispm_list_agents", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "alpha"},
                     {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nx"}]
        _, raw = await post(gw, "/v1/chat/completions", chat_body(messages, stream=False))
        message = orjson.loads(raw)["choices"][0]["message"]
        assert message["tool_calls"][0]["function"] == {"name": "terminal",
                                                        "arguments": '{"command":"ls alpha"}'}
        assert orjson.loads(raw)["choices"][0]["finish_reason"] == "tool_calls"
    assert gw.main_requests("chat")[1]["tool_results"] == [
        {"name": "mcp_lispm_list_agents", "text": "alpha"}]


async def test_chat_openclaw_decoration_and_hermes_side_requests() -> None:
    openclaw_tools = [{"type": "function", "function": {
        "name": "lispm_s1__list_agents", "parameters": {"type": "object", "properties": {}}}}]
    decorated = "[Sun 2026-11-29 22:33 UTC] hello there\n\nRuntime: agent=main model=fake"
    async with Gateway() as gw:
        _, raw = await post(gw, "/v1/chat/completions", chat_body(
            [{"role": "user", "content": [{"type": "text", "text": decorated}]}],
            tools=openclaw_tools, stream=False))
        assert orjson.loads(raw)["choices"][0]["message"]["content"] == "ECHO: hello there"
        _, raw = await post(gw, "/v1/chat/completions", chat_body(
            [{"role": "user", "content": "TOOL:lispm.list_agents"}], tools=openclaw_tools,
            stream=False))
        call = orjson.loads(raw)["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "lispm_s1__list_agents"
        review = [{"role": "system", "content": "You are a security reviewer. Answer APPROVE…"},
                  {"role": "user", "content": "rm -rf /tmp/x"}]
        _, raw = await post(gw, "/v1/chat/completions",
                            chat_body(review, tools=[], stream=False))
        assert orjson.loads(raw)["choices"][0]["message"]["content"] == "ESCALATE"
        title = [{"role": "system", "content": "Generate a short, descriptive title for …"},
                 {"role": "user", "content": "debug the flaky network test"}]
        _, raw = await post(gw, "/v1/chat/completions", chat_body(title, tools=[]))
        text = "".join(d["choices"][0]["delta"].get("content", "")
                       for _, d in sse(raw)[:-1] if d["choices"])
        assert text == "debug the flaky network test"
    assert [e["kind"] for e in gw.requests] == ["main", "main", "review", "title"]


# ================================================================ directives


async def test_directives_without_script() -> None:
    async with Gateway() as gw:
        _, raw = await post(gw, "/v1/messages", claude_body(
            [{"role": "user", "content": 'x TOOL:mcp__lispm__list_agents:{"a": [1, 2]} y'}],
            stream=False))
        call = orjson.loads(raw)["content"][0]
        assert (call["name"], call["input"]) == ("mcp__lispm__list_agents", {"a": [1, 2]})
        _, raw = await post(gw, "/v1/responses", codex_body(
            codex_input("run\nESCBASH:touch /w/f.txt\nplease"), stream=False))
        args = orjson.loads(orjson.loads(raw)["output"][0]["arguments"])
        assert args["cmd"] == "touch /w/f.txt"
        assert args["sandbox_permissions"] == "require_escalated" and args["justification"]
        _, raw = await post(gw, "/v1/responses", codex_body(
            codex_input("TOOL:mcp__lispm.list_agents"), stream=False))
        assert orjson.loads(raw)["output"][0]["namespace"] == "mcp__lispm"
        _, raw = await post(gw, "/v1/responses", codex_body(
            codex_input("RAWTOOL:mcp__lispm__list_agents"), stream=False))
        raw_call = orjson.loads(raw)["output"][0]
        assert raw_call["name"] == "mcp__lispm__list_agents" and "namespace" not in raw_call
        _, raw = await post(gw, "/v1/chat/completions", chat_body(
            [{"role": "user", "content": "BASH:echo hi"}], stream=False))
        fn = orjson.loads(raw)["choices"][0]["message"]["tool_calls"][0]["function"]
        assert fn == {"name": "terminal", "arguments": '{"command":"echo hi"}'}
        long_result = "r" * 400
        _, raw = await post(gw, "/v1/messages", claude_body([
            {"role": "user", "content": "BASH:yes"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash",
                                               "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                          "content": long_result}]}], stream=False))
        assert orjson.loads(raw)["content"][0]["text"] == "RESULT: " + "r" * 300
        _, raw = await post(gw, "/v1/messages", claude_body(
            [{"role": "user", "content": "just words"}], stream=False))
        assert orjson.loads(raw)["content"][0]["text"] == "ECHO: just words"
    sources = [e["answer"]["source"] for e in gw.requests]
    assert sources == ["directive"] * 6 + ["echo"]


async def test_sleep_directive_and_delay_stream_slowly() -> None:
    script = [{"match": "slow", "steps": [{"say": "one two three four", "delay": 0.6}]}]
    async with Gateway(script) as gw:
        started = time.monotonic()
        _, raw = await post(gw, "/v1/messages",
                            claude_body([{"role": "user", "content": "slow please"}]))
        assert time.monotonic() - started >= 0.55
        assert len(data_of(sse(raw), "content_block_delta")) == 4
        started = time.monotonic()
        _, raw = await post(gw, "/v1/chat/completions",
                            chat_body([{"role": "user", "content": "SLEEP:0.5 and talk"}]))
        assert time.monotonic() - started >= 0.45
        assert sse(raw)[-1][1] == "[DONE]"


async def test_client_leaving_mid_stream_does_not_break_the_gateway() -> None:
    script = [{"match": "slow", "steps": [{"say": "a b c d e f g h", "delay": 2.0}]}]
    async with Gateway(script) as gw:
        async with aiohttp.ClientSession() as session, session.post(
                gw.url + "/v1/messages",
                data=orjson.dumps(claude_body([{"role": "user", "content": "slow"}]))) as resp:
            await resp.content.readline()
        _, raw = await post(gw, "/v1/messages",
                            claude_body([{"role": "user", "content": "hi"}], stream=False))
        assert orjson.loads(raw)["content"][0]["text"] == "ECHO: hi"


# ================================================================ routes and control


async def test_side_routes_and_unknown_paths_are_logged() -> None:
    async with Gateway() as gw:
        assert (await get(gw, "/", "HEAD"))[0] == 200
        status, raw = await post(gw, "/v1/messages/count_tokens",
                                 {"messages": [{"role": "user", "content": "x" * 400}]})
        assert status == 200 and orjson.loads(raw)["input_tokens"] >= 100
        status, raw = await get(gw, "/v1/models")
        assert status == 200 and orjson.loads(raw)["data"][0]["id"] == "fake-model"
        status, raw = await get(gw, "/v1/models/some-model")
        assert orjson.loads(raw)["id"] == "some-model"
        status, raw = await post(gw, "/api/show", {"model": "x"})
        assert status == 404 and b"no route" in raw
        status, _ = await post(gw, "/v1/messages", b"not json")
        assert status == 400
    kinds = [(e["api"], e["kind"], e["status"]) for e in gw.requests]
    assert kinds == [("other", "preflight", 200), ("anthropic", "count_tokens", 200),
                     ("other", "models", 200), ("other", "models", 200),
                     ("other", "unknown", 404), ("anthropic", "main", 400)]
    assert [e["n"] for e in gw.requests] == [1, 2, 3, 4, 5, 6]


async def test_control_routes_replace_append_list_and_reset() -> None:
    async with Gateway([{"match": "a", "steps": [{"say": "first"}]}]) as gw:
        status, raw = await post(gw, "/_gateway/script",
                                 [{"match": "a", "steps": [{"say": "replaced"}]}])
        assert (status, orjson.loads(raw)) == (200, {"rules": 1})
        status, raw = await post(gw, "/_gateway/rules", {"match": "b", "steps": [{"say": "B"}]})
        assert orjson.loads(raw) == {"rules": 2}
        status, raw = await post(gw, "/_gateway/script", [{"match": "a", "steps": []}])
        assert status == 400 and b"steps" in raw
        status, raw = await get(gw, "/_gateway/script")
        assert [r["match"] for r in orjson.loads(raw)] == ["a", "b"]
        for prompt, expected in (("a", "replaced"), ("b", "B")):
            _, raw = await post(gw, "/v1/messages", claude_body(
                [{"role": "user", "content": prompt}], stream=False))
            assert orjson.loads(raw)["content"][0]["text"] == expected
        status, raw = await get(gw, "/_gateway/requests?since=1")
        listed = orjson.loads(raw)
        assert [e["answer"]["text"] for e in listed] == ["B"]
        status, raw = await get(gw, f"/_gateway/requests/{listed[0]['n']}/body")
        assert orjson.loads(raw)["messages"] == [{"role": "user", "content": "b"}]
        assert (await gw.body(1))["messages"][0]["content"] == "a"
        assert (await post(gw, "/_gateway/reset", {}))[0] == 200
        assert orjson.loads((await get(gw, "/_gateway/requests"))[1]) == []
        await post(gw, "/v1/messages", claude_body([{"role": "user", "content": "c"}]))
    assert [e["n"] for e in gw.requests] == [3]


async def test_large_bodies_up_to_64_mib_are_accepted() -> None:
    big = "z" * (8 * 1024 * 1024)
    messages = [{"role": "user", "content": "BASH:cat big"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash",
                                                   "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                              "content": big}]}]
    async with Gateway() as gw:
        status, raw = await post(gw, "/v1/messages", claude_body(messages, stream=False))
    assert status == 200
    assert orjson.loads(raw)["content"][0]["text"] == "RESULT: " + "z" * 300
    assert len(gw.requests[0]["tool_results"][0]["text"]) == 4000


async def test_control_routes_refuse_non_loopback_clients() -> None:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        ("192.0.2.7", 5555) if name == "peername" else default)
    gw = Gateway()
    request = make_mocked_request("GET", "/_gateway/requests", transport=transport)
    assert request.remote == "192.0.2.7"
    with pytest.raises(web.HTTPForbidden):
        await gw._get_requests(request)
    local = make_mocked_request("GET", "/_gateway/requests", transport=mock.Mock(
        get_extra_info=lambda name, default=None: ("127.0.0.1", 1) if name == "peername"
        else default))
    assert (await gw._get_requests(local)).body == b"[]"


async def test_log_file_and_body_files(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "gw.jsonl"
    async with Gateway(log_path=log) as gw:
        body = claude_body([{"role": "user", "content": "logged"}], stream=False)
        await post(gw, "/v1/messages?beta=true", body, Authorization="Bearer tok-very-secret",
                   **{"User-Agent": "claude-cli/2.1.197 (external, cli)", "x-app": "cli"})
        found = await asyncio.wait_for(gw.wait_for(lambda e: e["prompt"] == "logged"), 5)
        assert (await gw.body(found["n"])) == body
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert len(lines) == 1
    entry = lines[0]
    assert entry["path"] == "/v1/messages?beta=true" and entry["api"] == "anthropic"
    assert entry["headers"] == {"user-agent": "claude-cli/2.1.197 (external, cli)",
                                "x-app": "cli"}
    assert entry["auth"] == "Bearer"
    assert "very-secret" not in log.read_text()
    body_file = Path(entry["body_file"])
    assert body_file == tmp_path / "logs" / "gw.jsonl.bodies" / "1.json"
    assert orjson.loads(await asyncio.to_thread(body_file.read_bytes)) == body


async def test_program_writes_port_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps([{"match": "", "steps": [{"say": "from file"}]}]))
    port_file, log = tmp_path / "port", tmp_path / "gw.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lispm_sidecar.testing.gateway", "--port", "0",
        "--port-file", str(port_file), "--log", str(log), "--script", str(script),
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
        stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = await asyncio.wait_for(proc.stderr.readline(), 15)
        assert b"listening on http://127.0.0.1:" in line
        url = f"http://127.0.0.1:{int(port_file.read_text())}"
        async with aiohttp.ClientSession() as session, session.post(
                url + "/v1/chat/completions",
                data=orjson.dumps(chat_body([{"role": "user", "content": "x"}],
                                            stream=False))) as resp:
            reply = await resp.json()
        assert reply["choices"][0]["message"]["content"] == "from file"
    finally:
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, err.decode()
    assert orjson.loads(log.read_bytes().splitlines()[0])["answer"]["text"] == "from file"


async def test_program_rejects_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('[{"match": "x", "steps": [{"say": "a", "tool": "b"}]}]')
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lispm_sidecar.testing.gateway", "--script", str(script),
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 2
    assert b"exactly one of say, tool, shell" in err


# ================================================================ script language


def test_script_validation_messages() -> None:
    with pytest.raises(ScriptError, match="a script is a JSON list"):
        parse_script({"match": "x"})
    with pytest.raises(ScriptError, match="rule 0 step 1: unknown keys"):
        parse_script([{"match": "x", "steps": [{"say": "a"}, {"say": "b", "wait": 1}]}])
    with pytest.raises(ScriptError, match="delay must be a number"):
        parse_script([{"match": "x", "steps": [{"say": "a", "delay": "slow"}]}])
    with pytest.raises(ScriptError, match="match must be a string"):
        parse_script([{"match": 3, "steps": [{"say": "a"}]}])
    rules = parse_script({"rules": [{"steps": [{"shell": "ls", "escalate": True}]}]})
    assert rules[0].match == "" and rules[0].steps[0].escalate


def test_load_script_and_classify(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"match": "m", "steps": [{"tool": "lispm.ping"}]}]')
    assert load_script(path)[0].steps[0].tool == "lispm.ping"
    assert classify("POST", "/v1/messages") == ("anthropic", "main")
    assert classify("POST", "/messages/count_tokens") == ("anthropic", "count_tokens")
    assert classify("POST", "/v1/responses") == ("responses", "main")
    assert classify("POST", "/api/v1/chat/completions") == ("chat", "main")
    assert classify("GET", "/api/v1/models") == ("other", "models")
    assert classify("HEAD", "/") == ("other", "preflight")
    assert classify("POST", "/v1/responses/compact") == ("other", "unknown")


def test_resolve_tool_prefers_exact_then_server_forms() -> None:
    tools = (OfferedTool("mcp__lispm__list_agents"), OfferedTool("list_agents", "mcp__other"),
             OfferedTool("list_agents", "mcp__lispm"), OfferedTool("Read"))
    assert resolve_tool("Read", tools) == tools[3]
    assert resolve_tool("mcp__other.list_agents", tools) == tools[1]
    assert resolve_tool("lispm.list_agents", tools) == tools[2]
    assert resolve_tool("mcp__lispm__list_agents", tools) == tools[0]
    assert resolve_tool("lispm.nothing", tools) is None
    hermes = (OfferedTool("mcp_lispm_list_agents"),)
    assert resolve_tool("lispm.list_agents", hermes) == hermes[0]


def test_done_after_last_step_and_placeholders() -> None:
    rules = parse_script([{"match": "go", "steps": [
        {"tool": "Read", "args": {"path": "{prompt}", "n": 2}}]}])
    conv = Conversation("go now", (), (OfferedTool("Read"),))
    first = decide(conv, rules)
    assert first.reply.call is not None
    assert first.reply.call.args == {"path": "go now", "n": 2}
    done = decide(Conversation("go now", (ToolResult("Read", "text"),), conv.tools), rules)
    assert (done.reply.text, done.source, done.step) == ("done", "done", 1)
    no_shell = parse_script([{"match": "", "steps": [{"shell": "ls"}]}])
    assert decide(Conversation("x"), no_shell).reply.text.startswith("no shell tool offered")


def test_several_calls_are_one_step_and_their_results_one_round() -> None:
    rules = parse_script([{"match": "go", "steps": [
        {"text": "Both.", "calls": [{"tool": "Read", "args": {"path": "a"}},
                                    {"tool": "Read", "args": {"path": "b"}}]},
        {"say": "then {last_tool_result}"}]}])
    tools = (OfferedTool("Read"),)
    first = decide(Conversation("go", (), tools, 0), rules)
    assert first.reply.text == "Both."
    assert [c.args for c in first.reply.calls] == [{"path": "a"}, {"path": "b"}]
    assert first.as_log()["calls"] == [{"tool": "Read", "args": {"path": "a"}},
                                       {"tool": "Read", "args": {"path": "b"}}]
    results = (ToolResult("Read", "A"), ToolResult("Read", "B"))
    second = decide(Conversation("go", results, tools, 1), rules)
    assert (second.step, second.reply.text) == (1, "then B")
    # Without a count of rounds, each result counts as one (the CLIs' one call a reply).
    assert decide(Conversation("go", results, tools), rules).source == "done"


async def test_results_after_one_reply_are_one_round_on_each_wire() -> None:
    script = [{"match": "go", "steps": [
        {"calls": [{"tool": "Bash", "args": {"command": "a"}},
                   {"tool": "Bash", "args": {"command": "b"}}]},
        {"say": "second"}, {"say": "third"}]}]
    claude = claude_body([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "B"}]}], stream=False)
    hermes = chat_body([
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "function": {"name": "terminal", "arguments": "{}"}},
            {"id": "c2", "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "assistant", "tool_calls": [
            {"id": "c3", "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "C"}], stream=False)
    async with Gateway(script) as gw:
        for path, body in (("/v1/messages", claude), ("/v1/chat/completions", hermes)):
            status, _ = await post(gw, path, body)
            assert status == 200
    assert [e["answer"]["step"] for e in gw.main_requests()] == [1, 2]


def test_the_new_steps_are_checked() -> None:
    for step, message in (
            ({"status": 200}, "status must be an HTTP error status"),
            ({"say": "x", "long": 5}, "needs exactly one of"),
            ({"long": -1}, "long must be an integer >= 0"),
            ({"say": "x", "cut": "3"}, "cut must be an integer >= 0"),
            ({"calls": []}, "calls must be a non-empty list"),
            ({"calls": [{"tool": "Read", "arg": {}}]}, "each call is")):
        with pytest.raises(ScriptError, match=message):
            parse_script([{"match": "", "steps": [step]}])


async def test_status_long_and_a_wrong_key() -> None:
    from lispm_sidecar.testing.gateway_script import long_text

    assert len(long_text(100_000)) == 100_000 and long_text(100) == long_text(1000)[:100]
    script = [{"match": "busy", "steps": [{"status": 529}]},
              {"match": "long", "steps": [{"long": 5000}]}]
    async with Gateway(script, api_keys=["k-right"]) as gw:
        busy = await post(gw, "/v1/messages", claude_body(
            [{"role": "user", "content": "busy"}], stream=False), **{"x-api-key": "k-right"})
        long = await post(gw, "/v1/messages", claude_body(
            [{"role": "user", "content": "long"}], stream=False), **{"x-api-key": "k-right"})
        wrong = await post(gw, "/v1/chat/completions", chat_body(
            [{"role": "user", "content": "long"}], stream=False),
            Authorization="Bearer k-wrong")
    assert busy[0] == 529 and orjson.loads(busy[1])["error"]["type"] == "overloaded_error"
    assert orjson.loads(long[1])["content"][0]["text"] == long_text(5000)
    assert wrong[0] == 401 and b"k-wrong" not in wrong[1]
    assert [e["status"] for e in gw.requests] == [529, 200, 401]
    assert gw.requests[1]["answer"]["text_length"] == 5000
    assert len(gw.requests[1]["answer"]["text"]) == 4000


# ================================================================ the real CLIs

MCP_STUB = r'''
"""A stdio MCP server with one tool, for the gateway's real-CLI tests.

Plain Python, so it answers within milliseconds: `codex exec` sends its
first request without waiting long for MCP servers, and one that takes
the MCP SDK's 1.7 s to import (on a slow machine) is not offered."""
import json
import sys

TOOL = {"name": "list_agents", "description": "List the agents LispM knows.",
        "inputSchema": {"type": "object", "properties": {}}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {"listChanged": False}},
                  "serverInfo": {"name": "lispm", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        agents = {"agents": ["alpha-agent", "beta-agent"]}
        result = {"content": [{"type": "text", "text": json.dumps(agents)}],
                  "structuredContent": agents, "isError": False}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''

ROLL_CALL = [{"match": "roll call", "steps": [
    {"tool": "lispm.list_agents", "text": "Looking."},
    {"shell": "echo shell-marker-$((6*7))"},
    {"say": "final: {last_tool_result}"}]}]

# Runs inside `unshare -n`: loopback up, the gateway as a program, the CLI, SIGTERM.
DRIVER = r"""
set -u
ip link set lo up || { echo "ip link set lo up failed" >&2; exit 90; }
"$PY" -m lispm_sidecar.testing.gateway --port 0 --port-file "$D/port" \
    --log "$D/gw.jsonl" --script "$D/script.json" 2>"$D/gw.err" &
GW=$!
for _ in $(seq 300); do [ -s "$D/port" ] && break; sleep 0.05; done
PORT=$(cat "$D/port") || exit 91
cd "$D/work"
eval "$CLI" >"$D/cli.out" 2>"$D/cli.err" </dev/null
echo $? >"$D/cli.rc"
kill -TERM "$GW"
wait "$GW"
echo $? >"$D/gw.rc"
"""


def cli_binary(name: str) -> Path:
    """The installed CLI, or a failure that says how to install it."""
    folder = Path(os.environ.get("LISPM_NPM_BIN", REPO / ".deps" / "npm" / "node_modules" / ".bin"))
    path = folder / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{name} CLI not found at {path}: run `make install` "
                    "(or point LISPM_NPM_BIN at the folder holding claude and codex)")
    return path


async def run_cli_in_netns(tmp_path: Path, cli: str, extra_env: dict[str, str]) -> list[Any]:
    """Run `cli` (a shell command using $PORT) against a gateway process in a
    loopback-only network namespace; the gateway's log entries."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to run the CLIs without network")
    (tmp_path / "work").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    (tmp_path / "script.json").write_bytes(orjson.dumps(ROLL_CALL))
    # TMPDIR outside HOME: see `seed_home'.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home"),
           "TMPDIR": str(tmp_path / "tmp"),
           "LANG": "C.UTF-8", "TERM": "dumb", "PYTHONPATH": str(REPO / "python"),
           "PY": sys.executable, "D": str(tmp_path), "CLI": cli, **extra_env}
    proc = await asyncio.create_subprocess_exec(
        "unshare", "-n", "bash", "-c", DRIVER, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)

    def show(name: str) -> str:
        path = tmp_path / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(none)"

    context = (f"driver rc={proc.returncode} out={out.decode()[-2000:]} "
               f"err={err.decode()[-2000:]}\ncli.out: {show('cli.out')}\n"
               f"cli.err: {show('cli.err')}\ngw.err: {show('gw.err')}")
    assert proc.returncode == 0, context
    assert show("cli.rc").strip() == "0", context
    assert show("gw.rc").strip() == "0", "gateway did not exit cleanly on SIGTERM\n" + context
    assert "final: " in show("cli.out"), context
    assert "shell-marker-42" in show("cli.out"), context
    return [orjson.loads(line) for line in (tmp_path / "gw.jsonl").read_bytes().splitlines()]


def check_roll_call(log: list[Any], tool: str, shell: str) -> list[Any]:
    """Common assertions: three main requests answering steps 0, 1, 2."""
    assert [e["kind"] for e in log if e["kind"] not in ("main", "preflight")] == [], log
    main = [e for e in log if e["kind"] == "main"]
    assert [e["answer"]["step"] for e in main] == [0, 1, 2]
    assert main[0]["answer"]["tool"] == tool and main[0]["answer"]["text"] == "Looking."
    assert tool in main[0]["tools"]
    assert [r["name"] for r in main[2]["tool_results"]] == [tool, shell]
    assert "alpha-agent" in main[1]["tool_results"][0]["text"]
    assert "shell-marker-42" in main[2]["tool_results"][1]["text"]
    assert all(Path(e["body_file"]).exists() for e in log)
    return main


@pytest.mark.cli
async def test_real_claude_code_against_the_gateway(tmp_path: Path) -> None:
    claude = cli_binary("claude")
    stub = tmp_path / "mcp_stub.py"
    stub.write_text(MCP_STUB)
    mcp = tmp_path / "mcp.json"
    mcp.write_bytes(orjson.dumps({"mcpServers": {"lispm": {
        "type": "stdio", "command": sys.executable, "args": [str(stub)]}}}))
    cli = ('ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT" timeout 120 '
           f'{shlex.quote(str(claude))} -p "roll call from claude" '
           f"--mcp-config {shlex.quote(str(mcp))} --strict-mcp-config "
           "--allowedTools 'mcp__lispm__*' Bash")
    log = await run_cli_in_netns(tmp_path, cli, {
        "ANTHROPIC_AUTH_TOKEN": "test-token", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"})
    main = check_roll_call(log, "mcp__lispm__list_agents", "Bash")
    assert main[0]["path"] == "/v1/messages?beta=true" and main[0]["stream"] is True
    assert main[0]["headers"]["user-agent"].startswith("claude-cli/")
    assert main[0]["auth"] == "Bearer"
    assert main[1]["answer"]["args"] == {"command": "echo shell-marker-$((6*7))",
                                         "description": "Run echo shell-marker-$((6*7))"}
    assert main[2]["answer"]["text"] == "final: shell-marker-42"
    assert (tmp_path / "cli.out").read_text().strip() == "final: shell-marker-42"


@pytest.mark.cli
async def test_real_codex_against_the_gateway(tmp_path: Path) -> None:
    codex = cli_binary("codex")
    stub = tmp_path / "mcp_stub.py"
    stub.write_text(MCP_STUB)
    overrides = [
        "model_provider=fake", "model_providers.fake.name=fake",
        'model_providers.fake.base_url="http://127.0.0.1:$PORT/v1"',
        "model_providers.fake.wire_api=responses",
        "model_providers.fake.env_key=FAKE_OPENAI_KEY", "analytics.enabled=false",
        f"mcp_servers.lispm.command={orjson.dumps(sys.executable).decode()}",
        f"mcp_servers.lispm.args=[{orjson.dumps(str(stub)).decode()}]",
        'mcp_servers.lispm.default_tools_approval_mode="approve"',
    ]
    # $PORT must expand in the driver's shell, so that override is double-quoted.
    quoted = " ".join("-c " + (f'"{o.replace(chr(34), chr(92) + chr(34))}"' if "$PORT" in o
                               else shlex.quote(o)) for o in overrides)
    cli = (f"timeout 120 {shlex.quote(str(codex))} exec -m fake-model {quoted} "
           '--disable plugins --skip-git-repo-check "roll call from codex"')
    log = await run_cli_in_netns(tmp_path, cli, {"FAKE_OPENAI_KEY": "test-key"})
    main = check_roll_call(log, "mcp__lispm.list_agents", "exec_command")
    assert main[0]["path"] == "/v1/responses" and main[0]["stream"] is True
    assert main[0]["headers"]["originator"] == "codex_exec" and main[0]["auth"] == "Bearer"
    assert main[1]["answer"]["args"] == {"cmd": "echo shell-marker-$((6*7))"}
    # Codex accepted the namespaced call: it sends it back as it recorded it.
    body = orjson.loads(await asyncio.to_thread(Path(main[1]["body_file"]).read_bytes))
    calls = [i for i in body["input"] if i.get("type") == "function_call"]
    assert calls[0]["namespace"] == "mcp__lispm" and calls[0]["name"] == "list_agents"
