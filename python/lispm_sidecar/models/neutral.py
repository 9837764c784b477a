"""The neutral side of model streaming: one request, one stream of events.

Emacs speaks this form whatever the model's API: a request of neutral
messages and tools, and back the events of `lispm/model-event`.  Each
dialect module turns a `ModelRequest` into its own HTTP body and its own
SSE events back into the `Part`s below; the runner (`stream.py`) turns
parts into events for Emacs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from ..errors import InvalidParams

Json = dict[str, Any]
Api = Literal["anthropic", "responses", "chat"]
#: How long a stream waits to connect, and then for each next byte, by default.
DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class Effort:
    """How hard to reason: LEVEL `low`, `medium` or `high` (OpenAI's
    words), or BUDGET tokens (Anthropic's thinking budget); each dialect
    takes the one it has, made from the other when not given."""

    level: str
    budget: int

    #: The thinking budget of each level.
    BUDGETS: ClassVar[Mapping[str, int]] = {"low": 2048, "medium": 8192, "high": 24576}

    @classmethod
    def of(cls, value: Any) -> Effort | None:
        """The effort VALUE ({effort?, budget?}) asks for, checked; None for none."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidParams("reasoning must be an object {effort?, budget?}")
        level, budget = value.get("effort"), value.get("budget")
        if level is not None and level not in cls.BUDGETS:
            raise InvalidParams("reasoning.effort must be one of low, medium, high")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)
                                   or budget < 1024):
            raise InvalidParams("reasoning.budget must be a whole number of tokens, 1024 or more")
        if level is None and budget is None:
            return None
        if budget is None:
            budget = cls.BUDGETS[str(level)]
        if level is None:
            level = "low" if budget <= 4096 else "medium" if budget <= 16384 else "high"
        return cls(str(level), int(budget))


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: PARAMETERS is its arguments' JSON schema."""

    name: str
    description: str
    parameters: Json


@dataclass(frozen=True)
class CallPart:
    """A tool call the model made; ARGUMENTS is its raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Thought:
    """A block of a model's reasoning, as its answer gave it.

    SIGNATURE (Anthropic's) lets it go back to the API that wrote it, as
    that API requires of the turn's thinking; REDACTED is a block the API
    gave encrypted only.  A thought with neither goes back to no API."""

    text: str
    signature: str = ""
    redacted: str = ""


@dataclass(frozen=True)
class Message:
    """A neutral message: `user`, `assistant` (maybe with calls and
    reasoning) or `tool`."""

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: tuple[CallPart, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning: tuple[Thought, ...] = ()


@dataclass(frozen=True)
class ModelRequest:
    """What one `lispm/model-stream` asks for, checked."""

    api: Api
    base_url: str
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int | None
    timeout: float
    #: What the request's prompt is cached under (the conversation's name), or "".
    cache_key: str = ""
    #: How hard the model is asked to reason, if at all.
    effort: Effort | None = None


# What a dialect's parser finds in the stream.


@dataclass(frozen=True)
class Text:
    """A piece of the model's text."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """A piece of the model's reasoning (Anthropic's thinking, a Responses
    summary, a Chat Completions server's `reasoning_content`)."""

    text: str


@dataclass(frozen=True)
class ThoughtEnd:
    """A block of reasoning ended; SIGNATURE or REDACTED as `Thought` has them."""

    signature: str = ""
    redacted: str = ""


@dataclass(frozen=True)
class Usage:
    """Tokens the request took and the answer gave.

    INPUT_TOKENS are all the prompt's, those read from the API's cache
    (CACHED_TOKENS) and written to it (CACHE_WRITE_TOKENS) among them;
    REASONING_TOKENS are among OUTPUT_TOKENS."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class Done:
    """The answer is complete; STOP_REASON is neutral (see `stream.py`)."""

    stop_reason: str


@dataclass(frozen=True)
class Failed:
    """The model's server reported an error inside the stream."""

    message: str


Part = Text | Reasoning | ThoughtEnd | CallPart | Usage | Done | Failed


def usage_detail(usage: Json, part: str, key: str) -> int:
    """The count KEY of USAGE's PART (OpenAI's `*_tokens_details`), or 0."""
    details = usage.get(part)
    return int(details.get(key) or 0) if isinstance(details, dict) else 0


class Parser(Protocol):
    """Reads one dialect's SSE events into parts, in order."""

    def feed(self, event: str, data: str) -> Iterable[Part]:
        """The parts of one SSE event (its `event:` name, "" if none, and its data)."""
        ...

    def finish(self) -> Iterable[Part]:
        """The parts left when the body ended without the dialect's last event."""
        ...


class Dialect(Protocol):
    """One model API: where to send, how to authorise, what to send, how to read."""

    def url(self, base_url: str) -> str:
        """The endpoint under BASE_URL."""
        ...

    def headers(self, key: str | None) -> dict[str, str]:
        """The request's headers, with KEY where the API wants it."""
        ...

    def body(self, request: ModelRequest) -> Json:
        """The JSON body of a streaming request."""
        ...

    def parser(self) -> Parser:
        """A fresh parser for one response."""
        ...


def _string(value: Any, where: str, empty: bool = True) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise InvalidParams(f"{where} must be a {'' if empty else 'non-empty '}string")
    return value


def _call(value: Any, where: str) -> CallPart:
    if not isinstance(value, Mapping):
        raise InvalidParams(f"{where} must be an object {{id, name, arguments}}")
    return CallPart(_string(value.get("id"), f"{where}.id", empty=False),
                    _string(value.get("name"), f"{where}.name", empty=False),
                    _string(value.get("arguments", "{}"), f"{where}.arguments"))


def _thought(value: Any, where: str) -> Thought:
    if not isinstance(value, Mapping):
        raise InvalidParams(f"{where} must be an object {{text, signature?, redacted?}}")
    return Thought(_string(value.get("text", ""), f"{where}.text"),
                   _string(value.get("signature") or "", f"{where}.signature"),
                   _string(value.get("redacted") or "", f"{where}.redacted"))


def message(value: Any, where: str) -> Message:
    """The neutral message VALUE, checked; errors name WHERE."""
    if not isinstance(value, Mapping):
        raise InvalidParams(f"{where} must be an object")
    role = value.get("role")
    content = _string(value.get("content", ""), f"{where}.content")
    if role == "user":
        return Message("user", content)
    if role == "assistant":
        calls = value.get("tool_calls") or []
        if not isinstance(calls, list):
            raise InvalidParams(f"{where}.tool_calls must be a list")
        thoughts = value.get("reasoning") or []
        if not isinstance(thoughts, list):
            raise InvalidParams(f"{where}.reasoning must be a list")
        return Message("assistant", content,
                       tuple(_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)),
                       reasoning=tuple(_thought(t, f"{where}.reasoning[{i}]")
                                       for i, t in enumerate(thoughts)))
    if role == "tool":
        return Message("tool", content,
                       tool_call_id=_string(value.get("tool_call_id"), f"{where}.tool_call_id",
                                            empty=False),
                       name=_string(value.get("name", ""), f"{where}.name"))
    raise InvalidParams(f"{where}.role must be one of user, assistant, tool")


def tool(value: Any, where: str) -> ToolSpec:
    """The neutral tool VALUE, checked; errors name WHERE."""
    if not isinstance(value, Mapping):
        raise InvalidParams(f"{where} must be an object {{name, description, parameters}}")
    parameters = value.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise InvalidParams(f"{where}.parameters must be a JSON schema object")
    return ToolSpec(_string(value.get("name"), f"{where}.name", empty=False),
                    _string(value.get("description", ""), f"{where}.description"),
                    parameters)


def request(params: Mapping[str, Any]) -> ModelRequest:
    """The request PARAMS describe (already checked key by key by the link)."""
    messages = params["messages"]
    tools = params.get("tools") or []
    timeout = float(params.get("timeout") or DEFAULT_TIMEOUT)
    if timeout <= 0:
        raise InvalidParams("timeout must be a positive number of seconds")
    return ModelRequest(
        api=params["api"],
        base_url=str(params["base_url"]).rstrip("/"),
        model=params["model"],
        system=params.get("system") or "",
        messages=tuple(message(m, f"messages[{i}]") for i, m in enumerate(messages)),
        tools=tuple(tool(t, f"tools[{i}]") for i, t in enumerate(tools)),
        max_tokens=params.get("max_tokens"),
        timeout=timeout,
        cache_key=params.get("conversation") or "",
        effort=Effort.of(params.get("reasoning")),
    )
