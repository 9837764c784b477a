"""The link with Emacs, described once: every method, its params and its result.

Each method is a `Method`: its name, who calls it, the TypedDict of its
params, that of its result (None for a notification) and one line saying
what it does.  `METHODS` holds them all; README's "The link's methods"
lists the same methods with the same keys (a test keeps the two equal).

The sidecar checks the params of every request and notification from
Emacs against its method's TypedDict before the handler runs (`rpc.py`,
at its one boundary): a required key that is missing, or a key of the
wrong type, is an `InvalidParams` naming the key.  Keys not described
are left alone.  The check covers the params' own keys, not what nests
inside them.  What the sidecar sends into Emacs is typed, not checked.

No `from __future__ import annotations` here: on Python 3.11 a TypedDict
sees `NotRequired` only in annotations evaluated when it is made.
"""

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from . import PROTOCOL_VERSION, __version__
from .errors import InvalidParams, VersionMismatch

P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")

Json = dict[str, Any]


@dataclass(frozen=True)
class Must:
    """What a value must be beyond its type: else `KEY must be WHAT`."""

    what: str
    test: Callable[[Any], bool]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: A name, a path, an id: a string with something in it.
Name = Annotated[str, Must("a non-empty string", lambda v: isinstance(v, str) and v != "")]
#: An instance, a port, a pid, a count.
Natural = Annotated[int, Must("a non-negative integer", lambda v: _is_int(v) and v >= 0)]
AgentNames = Annotated[list[str], Must(
    "a list of agent names",
    lambda v: isinstance(v, list) and all(isinstance(n, str) and n for n in v))]
RequestIds = Annotated[list[str], Must(
    "a list of request ids",
    lambda v: isinstance(v, list) and all(isinstance(n, str) and n for n in v))]

# What a plain type asks of a value, as the error says it.
_PLAIN: dict[Any, tuple[str, Callable[[Any], bool]]] = {
    str: ("a string", lambda v: isinstance(v, str)),
    bool: ("true or false", lambda v: isinstance(v, bool)),
    int: ("an integer", _is_int),
    float: ("a number", lambda v: _is_int(v) or isinstance(v, float)),
    dict: ("an object", lambda v: isinstance(v, dict)),
    list: ("a list", lambda v: isinstance(v, list)),
}


def _rule(hint: Any) -> Must | None:
    """Return what HINT, a key's type, asks of its value; None if anything goes."""
    if hint is Any or hint is object:
        return None
    if get_origin(hint) in (NotRequired, Required):
        return _rule(get_args(hint)[0])
    if get_origin(hint) is Annotated:
        for extra in hint.__metadata__:
            if isinstance(extra, Must):
                return extra
        return _rule(get_args(hint)[0])
    if get_origin(hint) in (Union, types.UnionType):
        options = [arg for arg in get_args(hint) if arg is not type(None)]
        rules = [_rule(arg) for arg in options]
        if any(rule is None for rule in rules):
            return None
        known = [rule for rule in rules if rule is not None]
        nullable = len(options) < len(get_args(hint))
        return Must(" or ".join(rule.what for rule in known),
                    lambda v: (nullable and v is None) or any(rule.test(v) for rule in known))
    if get_origin(hint) is Literal:
        allowed = get_args(hint)
        return Must("one of " + ", ".join(map(str, allowed)), lambda v: v in allowed)
    base = get_origin(hint) or hint
    if is_typeddict(base):
        base = dict
    what, test = _PLAIN[base]
    return Must(what, test)


@dataclass(frozen=True)
class _Key:
    name: str
    required: bool
    must: Must | None


def _what(key: _Key) -> str:
    return key.must.what if key.must else "given"


def _keys(params: type[Any]) -> tuple[_Key, ...]:
    if not is_typeddict(params):
        return ()
    hints = get_type_hints(params, include_extras=True)
    required: frozenset[str] = params.__required_keys__
    return tuple(_Key(key, key in required, _rule(hint)) for key, hint in hints.items())


@dataclass(frozen=True)
class Method(Generic[P, R]):
    """One method of the link.

    TO is who answers it: `sidecar` for what Emacs calls, `emacs` for what
    the sidecar calls.  RESULT is None for a notification.  GATE, if given,
    looks at the params before they are checked (`lispm/hello`'s protocol
    version, which decides whether the rest can be understood at all).
    """

    name: str
    to: Literal["sidecar", "emacs"]
    params: type[P]
    result: type[R] | None
    doc: str
    gate: Callable[[Mapping[str, Any]], None] | None = None
    keys: tuple[_Key, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", _keys(self.params))

    @property
    def notification(self) -> bool:
        """Whether the method is a notification: no answer comes back."""
        return self.result is None

    def check(self, params: Json) -> P:
        """Return PARAMS as this method's params, or raise `InvalidParams` naming a key."""
        if self.gate is not None:
            self.gate(params)
        for key in self.keys:
            if key.name not in params:
                if key.required:
                    raise InvalidParams(f"{key.name} must be {_what(key)}")
                continue
            if key.must is not None and not key.must.test(params[key.name]):
                raise InvalidParams(f"{key.name} must be {_what(key)}")
        return cast(P, params)


def _notification(name: str, to: Literal["sidecar", "emacs"], params: type[P],
                  doc: str) -> Method[P, None]:
    return Method(name, to, params, None, doc)


def _same_protocol(params: Mapping[str, Any]) -> None:
    protocol = params.get("protocol")
    if protocol != PROTOCOL_VERSION:
        raise VersionMismatch(
            f"Emacs speaks LispM protocol {protocol}, this sidecar {PROTOCOL_VERSION} "
            f"(sidecar version {__version__}): reinstall the sidecar to match the package"
        )


class Empty(TypedDict):
    """No params, or no result."""


# Emacs → sidecar


class HelloParams(TypedDict):
    protocol: int
    version: str
    emacs_pid: NotRequired[int]
    ledger_file: NotRequired[str | None]


class HelloResult(TypedDict):
    protocol: int
    version: str
    pid: int
    runtime_dir: str
    ledger_file: str


class OpenClawInstall(TypedDict):
    """Where OpenClaw and its Node are (an OpenClaw agent needs it)."""

    program: str
    path: NotRequired[str | None]


class AgentStartParams(TypedDict):
    name: Name
    kind: Name
    folder: Name
    instance: NotRequired[Natural]
    port: NotRequired[Natural]
    restore: NotRequired[bool]
    resume: NotRequired[bool]
    session_id: NotRequired[str | None]
    ide_port: NotRequired[int | None]
    openclaw: NotRequired[OpenClawInstall | None]


class AgentLaunch(TypedDict):
    """What Emacs needs to launch an agent's CLI; each kind adds its own keys.

    `port`, `url` and `token_file` are null for a kind whose agents have
    no MCP server (`lispm`, an actor in Emacs)."""

    name: str
    kind: str
    folder: str
    port: int | None
    url: str | None
    session_id: str | None
    token_file: str | None
    #: Claude's: its IDE server's port, and the `--mcp-config` file.
    ide_port: NotRequired[int]
    claude_mcp_config: NotRequired[str]


class AgentsForgetParams(TypedDict):
    names: AgentNames


class AgentsForgetResult(TypedDict):
    forgotten: list[str]


class AgentAttachedParams(TypedDict):
    name: Name
    instance: NotRequired[Natural]
    pid: NotRequired[Natural]
    session_id: NotRequired[str | None]
    restore: NotRequired[bool]


class AgentAttachedResult(TypedDict):
    watching: Json | None


class AgentStopParams(TypedDict):
    name: Name
    instance: NotRequired[Natural]


class AgentsResult(TypedDict):
    agents: list[Json]


class LedgerParams(TypedDict):
    limit: NotRequired[Natural]
    agent: NotRequired[str | None]


class LedgerResult(TypedDict):
    entries: list[Json]


class EditorStateParams(TypedDict):
    buffers: NotRequired[list[Json] | None]
    selection: NotRequired[Json | None]
    diagnostics: NotRequired[list[Json] | None]


class DiffResolvedParams(TypedDict):
    id: Name
    outcome: Literal["saved", "rejected", "closed"]
    contents: NotRequired[str]


class AtMentionParams(TypedDict):
    name: Name
    instance: NotRequired[Natural]
    file: Name
    line_start: NotRequired[Natural]
    line_end: NotRequired[Natural]


class AtMentionResult(TypedDict):
    sent: int


class ToolResult(TypedDict):
    """A tool's result: `text` if `ok`, else `error`."""

    ok: NotRequired[bool | None]
    text: NotRequired[str]
    error: NotRequired[str]


class ToolResultParams(ToolResult):
    call_id: Name


class SendMessageParams(TypedDict):
    """Agent NAME (INSTANCE) sends TEXT to agent TO."""

    name: Name
    instance: Natural
    to: Name
    text: str


class AskAgentParams(TypedDict):
    """Agent NAME (INSTANCE) asks agent TO, or a new helper of ROLE (exactly
    one of the two): TEXT is the request."""

    name: Name
    instance: Natural
    to: NotRequired[Name]
    role: NotRequired[Name]
    text: str


class ReplyParams(TypedDict):
    """Agent NAME (INSTANCE) answers REQUEST_ID with TEXT."""

    name: Name
    instance: Natural
    request_id: Name
    text: str


class WithdrawParams(TypedDict):
    """The user takes back queued message MESSAGE_ID."""

    message_id: Natural


class MessageSentResult(TypedDict):
    """What the messaging tools answer: `sent to codex`, `replied to ...`."""

    text: str


class AskAgentResult(TypedDict):
    """TO is the agent asked: with a role, the helper started for it."""

    text: str
    request_id: str
    to: str


class RequestsParams(TypedDict):
    """Agent NAME (INSTANCE) asks how its requests IDS stand."""

    name: Name
    instance: Natural
    ids: RequestIds


class RequestOutcome(TypedDict):
    """How a request of the asker stands: `state` is open, answered, ended or
    unknown (no such request, or not the asker's: then `asker` and `asked`
    are null); `reply` is the answer's text, `notice` the ledger's notice."""

    request_id: str
    asker: str | None
    asked: str | None
    state: Literal["open", "answered", "ended", "unknown"]
    reply: str | None
    notice: str | None


class OpenToYou(TypedDict):
    """An open request asked of the agent that was handed to an earlier
    Emacs: TEXT as delivery renders it."""

    request_id: str
    asker: str
    text: str


class RequestsResult(TypedDict):
    requests: list[RequestOutcome]
    open_to_you: list[OpenToYou]


class ActorActivityParams(TypedDict):
    """What an actor without a terminal is doing, as Emacs knows it: `idle`
    lets its queue hand a message over; anything else (or null) waits."""

    name: Name
    instance: Natural
    activity: str | None


class AuditParams(TypedDict):
    agent: Name
    role: Name
    kind: Name
    what: Name
    decision: Name
    reason: NotRequired[str | None]


class DecisionsParams(TypedDict):
    limit: NotRequired[Natural]
    agent: NotRequired[str | None]


class DecisionsResult(TypedDict):
    decisions: list[Json]


class PingEmacsParams(TypedDict):
    count: NotRequired[Natural]


class PingEmacsResult(TypedDict):
    count: int
    seconds: float


class StatsResult(TypedDict):
    pid: int
    rss_kb: int
    agents: int


class ModelStreamParams(TypedDict):
    """A model request (models/neutral.py): messages are {role, content,
    tool_calls?, tool_call_id?, name?}, tools {name, description, parameters}.

    With a `conversation`, the sidecar keeps the request's history under
    that name at `revision`; a later request with `since` (the revision
    it builds on) sends only the messages after the first `keep` of it,
    and `system` and `tools` only when they changed
    (models/conversations.py)."""

    stream: Name
    api: Name
    base_url: Name
    model: Name
    key_file: NotRequired[str | None]
    key_env: NotRequired[str | None]
    system: NotRequired[str | None]
    messages: list[Json]
    tools: NotRequired[list[Json] | None]
    max_tokens: NotRequired[Natural | None]
    timeout: NotRequired[float | None]
    reasoning: NotRequired[Json | None]
    conversation: NotRequired[Name | None]
    revision: NotRequired[Natural | None]
    since: NotRequired[Natural | None]
    keep: NotRequired[Natural | None]


class ModelStreamResult(TypedDict):
    """`stale`: the sidecar lacks the revision the request built on, and
    started nothing: send the whole conversation."""

    stale: NotRequired[bool]


class ModelCancelParams(TypedDict):
    stream: Name


class ModelCancelResult(TypedDict):
    cancelled: bool


class McpServerSpec(TypedDict, total=False):
    """One of the user's MCP servers: a command over stdio, or a URL."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    url: str
    headers: dict[str, str]


class McpServersParams(TypedDict):
    """The whole set of the user's MCP servers, by name, and the seconds
    each may take to start and list its tools."""

    servers: dict[str, McpServerSpec]
    timeout: NotRequired[float | None]


class McpTool(TypedDict):
    """A server's tool; its input schema as JSON text, so it reaches Emacs
    exactly ({} and null apart); annotations as on the wire (readOnlyHint...)."""

    name: str
    description: str
    input_schema_json: str
    annotations: NotRequired[Json]


class McpServerEntry(TypedDict):
    name: str
    tools: list[McpTool]
    error: NotRequired[str]


class McpServersResult(TypedDict):
    servers: list[McpServerEntry]


class McpCallParams(TypedDict):
    server: Name
    tool: Name
    arguments: NotRequired[Json | None]
    timeout: NotRequired[float | None]


class McpCallResult(TypedDict):
    text: str
    is_error: bool


# Sidecar → Emacs


ModelErrorKind = Literal["http", "timeout", "malformed", "cut"]
"""What ended a model stream in an error: the server answered an HTTP error
(or not an event stream); no connection or no data in time; a stream that
does not parse; or one that ended without the answer (cut short, refused,
or an error the server reported in it)."""


class ModelEventParams(TypedDict):
    """One event of a model stream; `type` says which other keys it has:
    text {text}; reasoning {text}, or at a block's end {signature?,
    redacted?}; tool_call {id, name, arguments}; usage {input_tokens,
    output_tokens, cached_tokens, cache_write_tokens, reasoning_tokens};
    done {stop_reason}; error {kind, message, status?, body?}."""

    stream: str
    type: Literal["text", "reasoning", "tool_call", "usage", "done", "error"]
    kind: NotRequired[ModelErrorKind]
    text: NotRequired[str]
    id: NotRequired[str]
    name: NotRequired[str]
    arguments: NotRequired[str]
    input_tokens: NotRequired[int]
    output_tokens: NotRequired[int]
    cached_tokens: NotRequired[int]
    cache_write_tokens: NotRequired[int]
    reasoning_tokens: NotRequired[int]
    stop_reason: NotRequired[str]
    signature: NotRequired[str]
    redacted: NotRequired[str]
    message: NotRequired[str]
    status: NotRequired[int]
    body: NotRequired[str]


class ToolAbandonedParams(TypedDict):
    """A call of `emacs/call-tool` the sidecar no longer waits for, and why."""

    call_id: str
    reason: Literal["deadline", "cancelled"]


class McpChangedParams(TypedDict):
    """A server's tools changed (it said so), or it died."""

    server: str
    reason: Literal["tools", "exited"]


class EmacsAgent(TypedDict):
    name: str
    kind: str
    folder: str
    state: str
    role: NotRequired[str]
    activity: NotRequired[str | None]


class RoleInfo(TypedDict):
    name: str
    description: str


class ListAgentsResult(TypedDict):
    agents: list[EmacsAgent]
    roles: NotRequired[list[RoleInfo]]


class StartHelperParams(TypedDict):
    """Start an own agent of ROLE as a helper of agent CALLER (CALLER_INSTANCE)."""

    role: str
    caller: str
    caller_instance: int


class StartHelperResult(TypedDict):
    """The helper, whose registration (`lispm/agent-start`) is under way."""

    name: str
    instance: int


class PasteParams(TypedDict):
    name: str
    instance: int
    text: str


class PasteResult(TypedDict):
    pasted: bool


class PasteReadyParams(TypedDict):
    name: str
    instance: int


class PasteReadyResult(TypedDict):
    ready: bool


class BufferTextParams(TypedDict):
    buffer: str


class BufferTextResult(TypedDict):
    buffer: str
    file: str | None
    truename: str | None
    dirty: bool
    text: str


class OpenDiffParams(TypedDict):
    id: str
    agent: str
    file: str
    new_contents: str
    tab_name: NotRequired[str | None]


class OpenDiffResult(TypedDict):
    shown: bool


class CloseDiffParams(TypedDict):
    id: NotRequired[str]
    tab_name: NotRequired[str]
    all: NotRequired[bool]
    agent: NotRequired[str]


class CloseDiffResult(TypedDict):
    closed: int


class OpenFileParams(TypedDict):
    file: str
    start_text: NotRequired[str | None]
    end_text: NotRequired[str | None]
    select_to_eol: NotRequired[bool]
    make_frontmost: NotRequired[bool]


class OpenFileResult(TypedDict):
    opened: bool
    selected: bool


class SaveDocumentParams(TypedDict):
    file: str


class SaveDocumentResult(TypedDict):
    saved: bool
    message: str


class SearchToolsParams(TypedDict):
    name: str
    instance: int
    query: str


class SearchToolsResult(TypedDict):
    results: list[Json]


class SkillParams(TypedDict):
    name: str
    instance: int
    skill: str


class SkillResult(TypedDict):
    instructions: str
    loaded: bool
    reason: NotRequired[str]


class CallToolParams(TypedDict):
    name: str
    instance: int
    call_id: str
    tool: str
    args: Json


class CallToolResult(ToolResult):
    """A result now, or `pending`: `lispm/tool-result` follows within `within` s."""

    pending: NotRequired[bool]
    within: NotRequired[float]


class DeliverParams(TypedDict):
    """A due message for an actor without a terminal: TEXT as it reads it,
    and the ledger's facts of the message."""

    name: str
    instance: int
    text: str
    message_id: int
    kind: str
    sender: str
    request_id: str | None


class DeliverResult(TypedDict):
    """Whether the actor took the message (it was idle)."""

    taken: bool


class AgentConnectedParams(TypedDict):
    name: str
    instance: int


class AgentActivityParams(TypedDict):
    """`usage`: the tokens the CLI's records say it used, {input, cached,
    output, reasoning}, or None while they say nothing."""

    name: str
    instance: int
    activity: str
    queued: int
    session: str | None
    usage: NotRequired[dict[str, int] | None]


HELLO = Method("lispm/hello", "sidecar", HelloParams, HelloResult,
               "check the protocol, open the ledger, clean up after dead Emacsen; first",
               gate=_same_protocol)
AGENT_START = Method("lispm/agent-start", "sidecar", AgentStartParams, AgentLaunch,
                     "start an agent's MCP server (new, restored or resumed)")
AGENTS_FORGET = Method("lispm/agents-forget", "sidecar", AgentsForgetParams, AgentsForgetResult,
                       "end what agents of an earlier Emacs left")
AGENT_ATTACHED = Method("lispm/agent-attached", "sidecar", AgentAttachedParams,
                        AgentAttachedResult, "watch the records of an agent's CLI, process pid")
AGENT_STOP = Method("lispm/agent-stop", "sidecar", AgentStopParams, Empty,
                    "stop an agent's server and delete its files")
AGENTS = Method("lispm/agents", "sidecar", Empty, AgentsResult,
                "the agents the sidecar serves")
LEDGER = Method("lispm/ledger", "sidecar", LedgerParams, LedgerResult,
                "the ledger's newest entries and decisions")
EDITOR_STATE = _notification("lispm/editor-state", "sidecar", EditorStateParams,
                             "Emacs's newest snapshot of buffers, selection and diagnostics")
DIFF_RESOLVED = _notification("lispm/diff-resolved", "sidecar", DiffResolvedParams,
                              "the user decided on a diff")
AT_MENTION = Method("lispm/at-mention", "sidecar", AtMentionParams, AtMentionResult,
                    "mention a file's lines to a Claude agent")
TOOL_RESULT = _notification("lispm/tool-result", "sidecar", ToolResultParams,
                            "a tool call that waited for the user has finished")
AUDIT = _notification("lispm/audit", "sidecar", AuditParams,
                      "record a policy decision in the ledger")
SEND_MESSAGE = Method("lispm/send-message", "sidecar", SendMessageParams, MessageSentResult,
                      "an agent in Emacs sends a message, as the send_message tool")
ASK_AGENT = Method("lispm/ask-agent", "sidecar", AskAgentParams, AskAgentResult,
                   "an agent in Emacs asks another, or a new helper of a role, as ask_agent")
REQUESTS = Method("lispm/requests", "sidecar", RequestsParams, RequestsResult,
                  "how an agent's requests stand, and the open ones an earlier Emacs got")
WITHDRAW = Method("lispm/withdraw", "sidecar", WithdrawParams, MessageSentResult,
                  "the user takes back a plain message still queued; its sender is told")
REPLY = Method("lispm/reply", "sidecar", ReplyParams, MessageSentResult,
               "an agent in Emacs answers a request, as the reply tool")
ACTOR_ACTIVITY = _notification("lispm/actor-activity", "sidecar", ActorActivityParams,
                               "what an agent without a terminal is doing, as Emacs knows")
DECISIONS = Method("lispm/decisions", "sidecar", DecisionsParams, DecisionsResult,
                   "the newest policy decisions")
PING = Method("lispm/ping", "sidecar", Json, Json, "answer the params unchanged")
PING_EMACS = Method("lispm/ping-emacs", "sidecar", PingEmacsParams, PingEmacsResult,
                    "make count emacs/ping requests in a row; for the benchmarks")
STATS = Method("lispm/stats", "sidecar", Empty, StatsResult,
               "the sidecar's pid, resident memory and number of agents")
SHUTDOWN = Method("lispm/shutdown", "sidecar", Empty, Empty,
                  "stop every agent and exit after answering")
MODEL_STREAM = Method("lispm/model-stream", "sidecar", ModelStreamParams, ModelStreamResult,
                      "start a model request; its answer comes as lispm/model-event")
MODEL_CANCEL = Method("lispm/model-cancel", "sidecar", ModelCancelParams, ModelCancelResult,
                      "cancel a model stream: it sends nothing more")
MCP_SERVERS = Method("lispm/mcp-servers", "sidecar", McpServersParams, McpServersResult,
                     "the user's MCP servers, the whole set: start, stop, list their tools")
MCP_CALL = Method("lispm/mcp-call", "sidecar", McpCallParams, McpCallResult,
                  "call a tool of one of the user's MCP servers, with a deadline")

LIST_AGENTS = Method("emacs/list-agents", "emacs", Empty, ListAgentsResult,
                     "the live agents, from Emacs's registry, and the roles")
START_HELPER = Method("emacs/start-helper", "emacs", StartHelperParams, StartHelperResult,
                      "make an own agent of a role, a helper of the caller; it registers")
PASTE = Method("emacs/paste", "emacs", PasteParams, PasteResult,
               "paste a due message into an agent's terminal")
PASTE_READY = Method("emacs/paste-ready", "emacs", PasteReadyParams, PasteReadyResult,
                     "whether a paste could go in now (no dialog open), pasting nothing")
BUFFER_TEXT = Method("emacs/buffer-text", "emacs", BufferTextParams, BufferTextResult,
                     "a buffer's text, for read_buffer")
OPEN_DIFF = Method("emacs/open-diff", "emacs", OpenDiffParams, OpenDiffResult,
                   "show Claude's proposed change for the user to decide on")
CLOSE_DIFF = Method("emacs/close-diff", "emacs", CloseDiffParams, CloseDiffResult,
                    "close pending diffs, undecided")
OPEN_FILE = Method("emacs/open-file", "emacs", OpenFileParams, OpenFileResult,
                   "open a file for Claude, maybe selecting text")
SAVE_DOCUMENT = Method("emacs/save-document", "emacs", SaveDocumentParams, SaveDocumentResult,
                       "save a file's buffer for Claude")
SEARCH_TOOLS = Method("emacs/search-tools", "emacs", SearchToolsParams, SearchToolsResult,
                      "LispM's tools and skills matching a query")
SKILL = Method("emacs/skill", "emacs", SkillParams, SkillResult,
               "a skill's instructions; load its code")
CALL_TOOL = Method("emacs/call-tool", "emacs", CallToolParams, CallToolResult,
                   "run a LispM tool under the user's policy")
DELIVER = Method("emacs/deliver", "emacs", DeliverParams, DeliverResult,
                 "hand a due message to an agent without a terminal, if it is idle")
EMACS_PING = Method("emacs/ping", "emacs", Json, Json, "answer the params unchanged")
AGENT_CONNECTED = _notification("lispm/agent-connected", "emacs", AgentConnectedParams,
                                "an agent's CLI reached its MCP server")
AGENT_ACTIVITY = _notification("lispm/agent-activity", "emacs", AgentActivityParams,
                               "an agent's activity, queue length and CLI session changed")
MODEL_EVENT = _notification("lispm/model-event", "emacs", ModelEventParams,
                            "an event of a model stream: text, tool_call, usage, done, error")
MCP_CHANGED = _notification("lispm/mcp-changed", "emacs", McpChangedParams,
                            "a server's tools changed, or it died: sync again")
TOOL_ABANDONED = _notification("lispm/tool-abandoned", "emacs", ToolAbandonedParams,
                               "the sidecar gave up a pending call_tool: withdraw its approval")

#: Every method of the link, by name.
METHODS: dict[str, Method[Any, Any]] = {method.name: method for method in (
    HELLO, AGENT_START, AGENTS_FORGET, AGENT_ATTACHED, AGENT_STOP, AGENTS, LEDGER,
    EDITOR_STATE, DIFF_RESOLVED, AT_MENTION, TOOL_RESULT, AUDIT, DECISIONS, PING,
    SEND_MESSAGE, ASK_AGENT, REPLY, REQUESTS, WITHDRAW, ACTOR_ACTIVITY,
    PING_EMACS, STATS, SHUTDOWN, MODEL_STREAM, MODEL_CANCEL, MODEL_EVENT,
    MCP_SERVERS, MCP_CALL, MCP_CHANGED, TOOL_ABANDONED,
    LIST_AGENTS, START_HELPER, PASTE, PASTE_READY, BUFFER_TEXT, OPEN_DIFF, CLOSE_DIFF, OPEN_FILE,
    SAVE_DOCUMENT, SEARCH_TOOLS, SKILL, CALL_TOOL, DELIVER, EMACS_PING, AGENT_CONNECTED,
    AGENT_ACTIVITY,
)}
