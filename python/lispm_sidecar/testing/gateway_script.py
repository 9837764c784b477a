"""The gateway's script language and its API-neutral decision.

Each dialect module (Anthropic, Responses, Chat Completions) turns a request
into a `Conversation`; `decide` turns that plus the current rules into a
`Decision` holding one `Reply`; the dialect renders the reply on its wire.

See `lispm_sidecar.testing.gateway` for the script format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: What a step answers once every step of its rule was used.
DONE_TEXT = "done"
#: How much of a tool result `RESULT:` repeats.
RESULT_CHARS = 300
#: How much of a reply's text the request log keeps.
LOGGED_TEXT = 4000
#: Shell tools by preference: Claude, Codex, older Codex, Hermes, OpenClaw.
SHELL_TOOLS = ("Bash", "exec_command", "shell_command", "shell", "terminal", "exec", "bash")

_STEP_KEYS = frozenset(
    {"say", "tool", "args", "shell", "escalate", "justification", "description",
     "text", "delay", "raw", "calls", "long", "piece", "status", "body", "cut"}
)
_ACTION_KEYS = ("say", "tool", "shell", "calls", "long", "status")
#: The pieces a `long` reply streams in, unless its step says `piece`.
LONG_PIECE = 1024
_LONG_LINE = "{:08d} the quick brown fox jumps over the lazy dog\n"
_MCP_FLAT = re.compile(r"^mcp__(?P<server>.+?)__(?P<tool>.+)$")
_DIRECTIVE = re.compile(r"\b(RAWTOOL|TOOL|ESCBASH|BASH):")
_SLEEP = re.compile(r"\bSLEEP:(\d+(?:\.\d+)?)")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


class ScriptError(ValueError):
    """A script, rule or step that does not follow the format."""


@dataclass(frozen=True)
class OfferedTool:
    """One tool a request offers the model.

    `namespace` is set for Responses namespace tools (Codex MCP servers).
    `params` are the property names of its input schema; `array_params`
    the ones typed as arrays. `custom` marks a Responses freeform tool.
    """

    name: str
    namespace: str | None = None
    params: frozenset[str] = frozenset()
    array_params: frozenset[str] = frozenset()
    custom: bool = False

    @property
    def qualified(self) -> str:
        """`namespace.name`, or the bare name."""
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ToolResult:
    """A tool result the model sees, with the name of the call it answers."""

    name: str
    text: str


@dataclass(frozen=True)
class Conversation:
    """What a decision needs to know about one model request."""

    prompt: str
    results: tuple[ToolResult, ...] = ()
    tools: tuple[OfferedTool, ...] = ()
    #: The rounds of tool results after the prompt (one per model reply
    #: with calls); None counts each result as a round.
    rounds: int | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call in a reply, with the name as the wire wants it."""

    name: str
    args: dict[str, Any]
    namespace: str | None = None
    custom: bool = False
    #: Arguments sent as this text instead of `args` (which may make them
    #: not JSON at all): a call's `args_raw`.
    raw: str | None = None

    def wire_args(self) -> str:
        """The arguments as the wire carries them: JSON text."""
        if self.raw is not None:
            return self.raw
        return json.dumps(self.args, separators=(",", ":"), ensure_ascii=False)

    @property
    def qualified(self) -> str:
        """`namespace.name`, or the bare name."""
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Reply:
    """One model response: text, then its tool calls (usually none or one).

    `delay` seconds are spread over the streamed pieces of the response.
    `status` (with `body`) answers that HTTP status instead; `cut` drops
    the connection after that many streamed pieces; `piece` streams the
    text in pieces of that many characters (0: word by word).
    """

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    delay: float = 0.0
    status: int | None = None
    body: Any = None
    cut: int | None = None
    piece: int = 0

    @property
    def call(self) -> ToolCall | None:
        """The first tool call, if any."""
        return self.calls[0] if self.calls else None


@dataclass(frozen=True)
class Decision:
    """A reply and where it came from, for the request log."""

    reply: Reply
    source: str
    rule: int | None = None
    match: str | None = None
    step: int | None = None

    def as_log(self) -> dict[str, Any]:
        """The log's `answer` field."""
        entry: dict[str, Any] = {"source": self.source}
        if self.rule is not None:
            entry.update(rule=self.rule, match=self.match, step=self.step)
        text = self.reply.text
        entry["text"] = text if len(text) <= LOGGED_TEXT else text[:LOGGED_TEXT]
        if len(text) > LOGGED_TEXT:
            entry["text_length"] = len(text)
        if self.reply.call is not None:
            entry["tool"] = self.reply.call.qualified
            entry["args"] = self.reply.call.args
        if len(self.reply.calls) > 1:
            entry["calls"] = [{"tool": c.qualified, "args": c.args} for c in self.reply.calls]
        for key in ("delay", "status", "cut"):
            if getattr(self.reply, key):
                entry[key] = getattr(self.reply, key)
        return entry


@dataclass(frozen=True)
class Step:
    """One scripted model response; exactly one of say, tool, shell is set."""

    say: str | None = None
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    shell: str | None = None
    escalate: bool = False
    justification: str | None = None
    description: str | None = None
    text: str = ""
    delay: float = 0.0
    raw: bool = False
    calls: tuple[tuple[str, dict[str, Any], str | None], ...] = ()
    long: int | None = None
    piece: int = 0
    status: int | None = None
    body: Any = None
    cut: int | None = None


@dataclass(frozen=True)
class Rule:
    """Steps to answer when `match` is a substring of the user's prompt."""

    match: str
    steps: tuple[Step, ...]
    #: Only for requests of this dialect (anthropic, responses, chat), if set.
    api: str | None = None


# --------------------------------------------------------------------------
# Parsing scripts


def parse_script(data: Any) -> list[Rule]:
    """Rules from a decoded JSON script: a list of rule objects."""
    if isinstance(data, Mapping) and "rules" in data:
        data = data["rules"]
    if not isinstance(data, list):
        raise ScriptError("a script is a JSON list of rules")
    return [parse_rule(item, i) for i, item in enumerate(data)]


def parse_rule(data: Any, index: int = 0) -> Rule:
    """One rule: `{"match": str, "steps": [step, ...]}`, and `"api"` to
    answer only requests of that dialect."""
    where = f"rule {index}"
    if not isinstance(data, Mapping):
        raise ScriptError(f"{where}: a rule is an object")
    unknown = set(data) - {"match", "steps", "api"}
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    match = data.get("match", "")
    steps = data.get("steps")
    if not isinstance(match, str):
        raise ScriptError(f"{where}: match must be a string")
    if not isinstance(steps, list) or not steps:
        raise ScriptError(f"{where}: steps must be a non-empty list")
    api = data.get("api")
    if api not in (None, "anthropic", "responses", "chat"):
        raise ScriptError(f"{where}: api must be anthropic, responses or chat")
    return Rule(match, tuple(parse_step(s, f"{where} step {j}") for j, s in enumerate(steps)),
                api)


def parse_step(data: Any, where: str = "step") -> Step:
    """One step; see the module docstring of `gateway` for the keys."""
    if not isinstance(data, Mapping):
        raise ScriptError(f"{where}: a step is an object")
    unknown = set(data) - _STEP_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    actions = [k for k in _ACTION_KEYS if k in data]
    if len(actions) != 1:
        raise ScriptError(f"{where}: needs exactly one of {', '.join(_ACTION_KEYS)}")
    args = data.get("args", {})
    if not isinstance(args, Mapping):
        raise ScriptError(f"{where}: args must be an object")
    delay = data.get("delay", 0)
    if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
        raise ScriptError(f"{where}: delay must be a number >= 0")
    status = data.get("status")
    if status is not None and not (_natural(status) and 400 <= status <= 599):
        raise ScriptError(f"{where}: status must be an HTTP error status, 400 to 599")
    for key in ("long", "piece", "cut"):
        if key in data and not _natural(data[key]):
            raise ScriptError(f"{where}: {key} must be an integer >= 0")
    return Step(
        calls=_calls(data.get("calls"), where) if "calls" in data else (),
        long=data.get("long"),
        piece=int(data.get("piece", 0)),
        status=status,
        body=data.get("body"),
        cut=data.get("cut"),
        say=_opt_str(data, "say", where),
        tool=_opt_str(data, "tool", where),
        args=dict(args),
        shell=_opt_str(data, "shell", where),
        escalate=bool(data.get("escalate", False)),
        justification=_opt_str(data, "justification", where),
        description=_opt_str(data, "description", where),
        text=_opt_str(data, "text", where) or "",
        delay=float(delay),
        raw=bool(data.get("raw", False)),
    )


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _calls(value: Any, where: str) -> tuple[tuple[str, dict[str, Any], str | None], ...]:
    if not isinstance(value, list) or not value:
        raise ScriptError(f"{where}: calls must be a non-empty list of {{tool, args}}")
    calls = []
    for call in value:
        if (not isinstance(call, Mapping) or not isinstance(call.get("tool"), str)
                or not isinstance(call.get("args", {}), Mapping)
                or not isinstance(call.get("args_raw", ""), str)
                or set(call) - {"tool", "args", "args_raw"}):
            raise ScriptError(f"{where}: each call is {{\"tool\": name, \"args\": {{...}}}}"
                              " or {\"tool\": name, \"args_raw\": text}")
        calls.append((call["tool"], dict(call.get("args", {})), call.get("args_raw")))
    return tuple(calls)


def long_text(size: int) -> str:
    """The text of a `long` step: `size` characters of numbered ASCII lines."""
    line_length = len(_LONG_LINE.format(0))
    lines = size // line_length + 1
    return "".join(_LONG_LINE.format(i) for i in range(lines))[:size]


def _opt_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ScriptError(f"{where}: {key} must be a string")
    return value


# --------------------------------------------------------------------------
# Deciding


def decide(conv: Conversation, rules: Sequence[Rule], api: str | None = None) -> Decision:
    """The reply to a main request of API: the first matching rule, else directives."""
    for index, rule in enumerate(rules):
        if rule.match in conv.prompt and rule.api in (None, api):
            return _scripted(conv, index, rule)
    return directive(conv)


def _scripted(conv: Conversation, index: int, rule: Rule) -> Decision:
    n = len(conv.results) if conv.rounds is None else conv.rounds
    if n >= len(rule.steps):
        return Decision(Reply(DONE_TEXT), "done", index, rule.match, n)
    reply = realize(rule.steps[n], conv)
    return Decision(reply, "script", index, rule.match, n)


def realize(step: Step, conv: Conversation) -> Reply:
    """The reply for one step in this conversation (names mapped, placeholders filled)."""
    reply = _realize(step, conv)
    if step.cut is not None or step.piece:
        reply = replace(reply, cut=step.cut, piece=step.piece or reply.piece)
    return reply


def _realize(step: Step, conv: Conversation) -> Reply:
    text = substitute(step.text, conv)
    if step.status is not None:
        return Reply(status=step.status, body=substitute(step.body, conv))
    if step.long is not None:
        return Reply(long_text(step.long), delay=step.delay, piece=LONG_PIECE)
    if step.say is not None:
        return Reply(substitute(step.say, conv), delay=step.delay)
    if step.shell is not None:
        cmd = substitute(step.shell, conv)
        call = shell_call(conv.tools, cmd, step)
        if call is None:
            return Reply(f"no shell tool offered (looked for {', '.join(SHELL_TOOLS)})")
        return Reply(text, (call,), step.delay)
    wanted = ((step.tool, step.args, None),) if step.tool is not None else step.calls
    calls = []
    for name, raw_args, raw_text in wanted:
        args = substitute(raw_args, conv)
        if step.raw:
            calls.append(ToolCall(name, args, raw=raw_text))
            continue
        offered = resolve_tool(name, conv.tools)
        if offered is None:
            return Reply(f"tool {name} not offered")
        calls.append(ToolCall(offered.name, args, offered.namespace, offered.custom,
                              raw=raw_text))
    return Reply(text, tuple(calls), step.delay)


_REQUEST_HEADER = re.compile(r"\[Request (R\d+) from ")


def substitute(value: Any, conv: Conversation) -> Any:
    """Fill `{last_tool_result}`, `{prompt}` and `{request_id}` in every string of `value`.

    `{request_id}` is the id in a LispM `[Request R<n> from …]` header in the
    prompt, so a script can reply to a request whose number it cannot know.
    """
    if isinstance(value, str):
        last = conv.results[-1].text if conv.results else ""
        header = _REQUEST_HEADER.search(conv.prompt)
        return (value.replace("{last_tool_result}", last).replace("{prompt}", conv.prompt)
                .replace("{request_id}", header.group(1) if header else ""))
    if isinstance(value, list):
        return [substitute(v, conv) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, conv) for k, v in value.items()}
    return value


def resolve_tool(spec: str, tools: Sequence[OfferedTool]) -> OfferedTool | None:
    """The offered tool a script name means.

    Exact flat or `namespace.name` names win. `server.tool` (or
    `mcp__server__tool`) then maps to the namespace tool `mcp__server` +
    `tool`, the flat `mcp__server__tool` or `mcp_server_tool`, else to any
    offered name that ends with `tool` and mentions `server`.
    """
    for tool in tools:
        if tool.qualified == spec:
            return tool
    split = _split_server(spec)
    if split is None:
        return next((t for t in tools if t.name == spec), None)
    server, bare = split
    preferred = [(f"mcp__{server}", bare), (None, f"mcp__{server}__{bare}"),
                 (None, f"mcp_{server}_{bare}")]
    for namespace, name in preferred:
        for tool in tools:
            if tool.namespace == namespace and tool.name == name:
                return tool
    for tool in tools:
        if tool.qualified.endswith(bare) and server in tool.qualified:
            return tool
    return None


def _split_server(spec: str) -> tuple[str, str] | None:
    flat = _MCP_FLAT.match(spec)
    if flat:
        return flat["server"], flat["tool"]
    if "." in spec:
        server, bare = spec.split(".", 1)
        return server.removeprefix("mcp__"), bare
    return None


def shell_call(tools: Sequence[OfferedTool], cmd: str, step: Step) -> ToolCall | None:
    """A call of the client's own shell tool running `cmd`, if it offers one."""
    flat = {t.name: t for t in tools if t.namespace is None}
    for name in SHELL_TOOLS:
        if name in flat:
            return ToolCall(name, shell_args(flat[name], cmd, step))
    return None


def shell_args(tool: OfferedTool, cmd: str, step: Step) -> dict[str, Any]:
    """Arguments for one shell tool, from its name and input schema."""
    description = step.description or f"Run {cmd[:60]}"
    if tool.name == "Bash":
        return {"command": cmd, "description": description}
    args: dict[str, Any]
    if "cmd" in tool.params or tool.name == "exec_command":
        args = {"cmd": cmd}
    elif "command" in tool.array_params or tool.name == "shell":
        args = {"command": ["bash", "-lc", cmd]}
    else:
        args = {"command": cmd}
    if step.escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = step.justification or f"The script asks to run {cmd[:60]}"
    return args


# --------------------------------------------------------------------------
# Directives (no rule matched)


def directive(conv: Conversation) -> Decision:
    """The reply from directives in the prompt (`TOOL:`, `BASH:`, ...) or an echo."""
    delay = _sleep(conv.prompt)
    if conv.results:
        last = conv.results[-1].text[:RESULT_CHARS]
        return Decision(Reply(f"RESULT: {last}", delay=delay), "directive")
    found = _DIRECTIVE.search(conv.prompt)
    if found is None:
        return Decision(Reply(f"ECHO: {conv.prompt}", delay=delay), "echo")
    word, rest = found[1], conv.prompt[found.end():]
    pretext = "Working on it." if "PRETEXT" in conv.prompt else ""
    delay = delay or (1.5 if pretext else 0.0)
    if word.endswith("BASH"):
        cmd = rest.split("\n", 1)[0].strip()
        step = Step(shell=cmd, escalate=word == "ESCBASH", text=pretext, delay=delay)
    else:
        name, args = _tool_directive(rest)
        step = Step(tool=name, args=args, raw=word == "RAWTOOL", text=pretext, delay=delay)
    return Decision(realize(step, conv), "directive")


def _sleep(prompt: str) -> float:
    found = _SLEEP.search(prompt)
    return float(found[1]) if found else 0.0


def _tool_directive(rest: str) -> tuple[str, dict[str, Any]]:
    name_match = _TOOL_NAME.match(rest)
    name = name_match[0] if name_match else ""
    tail = rest[len(name):]
    if not tail.startswith(":"):
        return name, {}
    try:
        args, _ = json.JSONDecoder().raw_decode(tail[1:].lstrip())
    except ValueError:
        return name, {}
    return name, args if isinstance(args, dict) else {"value": args}


# --------------------------------------------------------------------------
# Side requests


def short_title(prompt: str) -> str:
    """A deterministic one-line title for a prompt."""
    words = prompt.split()
    return " ".join(words[:6])[:60] or "Untitled"


def schema_value(schema: Any, title: str) -> Any:
    """A value shaped like a JSON schema, strings filled with `title`."""
    if not isinstance(schema, Mapping):
        return title
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if not isinstance(props, Mapping):
            return {}
        return {key: schema_value(sub, title) for key, sub in props.items()}
    if kind == "array":
        return [schema_value(schema.get("items"), title)]
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    return title
