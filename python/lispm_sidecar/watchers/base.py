"""What LispM's delivery queue needs to know about an agent: is it waiting
for its user?  Each watcher answers from its CLI's own records; an unknown
state is never idle, because a paste followed by Return during an approval
prompt approves the pending command in both CLIs.
"""

from __future__ import annotations

import abc
import enum
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


class AgentActivity(enum.StrEnum):
    """What an agent is doing, as its CLI's records tell."""

    UNKNOWN = "unknown"
    IDLE = "idle"
    BUSY = "busy"
    WAITING_FOR_APPROVAL = "waiting-for-approval"


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens an agent's model requests used, as its CLI's records say:
    INPUT in all (CACHED, read from the API's cache, among them) and
    OUTPUT (REASONING among them)."""

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input + other.input, self.cached + other.cached,
                          self.output + other.output, self.reasoning + other.reasoning)

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input - other.input, self.cached - other.cached,
                          self.output - other.output, self.reasoning - other.reasoning)

    def as_params(self) -> dict[str, int]:
        """The usage as `lispm/agent-activity` gives it."""
        return {"input": self.input, "cached": self.cached, "output": self.output,
                "reasoning": self.reasoning}


def count(value: object) -> int:
    """VALUE as a count of tokens: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class Watcher(abc.ABC):
    """Follows one agent's records; see `activity` and `prompts_seen`."""

    kind: str = ""

    def __init__(self) -> None:
        #: The current activity; UNKNOWN until the records say otherwise.
        self.activity = AgentActivity.UNKNOWN
        #: User prompts recorded since the watcher bound to the records (a
        #: pasted message counts once the CLI records it).  Never decreases;
        #: compare it before and after a delivery to confirm pickup.
        self.prompts_seen = 0
        #: What a WAITING_FOR_APPROVAL agent waits for, when the CLI says
        #: (Claude: "permission prompt", "dialog open", …); else None.
        self.waiting_for: str | None = None
        #: The tokens the records say the CLI's requests used, if they say.
        self.usage: TokenUsage | None = None
        self._usage_changed = False
        self._subscribers: list[Callable[[], None]] = []

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call CALLBACK (on the loop) after `activity`, `waiting_for` or
        `prompts_seen` changed."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[], None]) -> None:
        """Stop calling CALLBACK."""
        if callback in self._subscribers:
            self._subscribers.remove(callback)

    def accepts_delivery(self) -> bool:
        """Whether a message may be handed over now: only while idle, unless
        the agent's runtime takes messages safely at any time."""
        return self.activity is AgentActivity.IDLE

    @property
    def cli_session(self) -> str | None:
        """The CLI's own id of the conversation, with which it can resume it
        after a restart; None while there is none to resume."""
        return None

    @abc.abstractmethod
    async def start(self) -> None:
        """Start watching (returns at once; the state follows by events)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop watching and release every watch and file."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What this watcher is bound to (paths, session id) and its state."""

    def _set_usage(self, usage: TokenUsage) -> None:
        """Make USAGE the usage; subscribers hear of it with the next `_update`."""
        if usage != self.usage:
            self.usage = usage
            self._usage_changed = True

    def _update(self, activity: AgentActivity, waiting_for: str | None = None,
                prompts: int = 0) -> None:
        """Set the state, adding PROMPTS to `prompts_seen`; tell subscribers
        if anything changed (the usage too)."""
        changed = (activity != self.activity or waiting_for != self.waiting_for
                   or prompts > 0 or self._usage_changed)
        self._usage_changed = False
        self.activity = activity
        self.waiting_for = waiting_for
        self.prompts_seen += prompts
        if changed:
            for callback in list(self._subscribers):
                try:
                    callback()
                except Exception:
                    log.exception("watcher subscriber %r failed", callback)

    def _state(self) -> dict[str, Any]:
        return {"kind": self.kind, "activity": str(self.activity),
                "waiting_for": self.waiting_for, "prompts_seen": self.prompts_seen}


# ------------------------------------------------------------------ /proc

def proc_start_time(pid: int) -> int | None:
    """Field 22 (starttime, in clock ticks since boot) of /proc/PID/stat, or
    None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split
    # after the last ')'.  Field 3 is then the first one.
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return int(fields[22 - 3])
    except (IndexError, ValueError):
        return None


def process_children(pid: int) -> list[int]:
    """The child processes of PID, from every thread's `children` file (a
    multi-threaded program may spawn from any thread)."""
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return children
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                children.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
            continue
    return children


def process_tree(pid: int, limit: int = 256) -> list[int]:
    """PID and all its descendants (breadth first, at most LIMIT)."""
    if not os.path.exists(f"/proc/{pid}"):
        return []
    found = [pid]
    seen = {pid}
    index = 0
    while index < len(found) and len(found) < limit:
        for child in process_children(found[index]):
            if child not in seen:
                seen.add(child)
                found.append(child)
        index += 1
    return found


def open_files(pid: int) -> list[str]:
    """The paths PID has open (readlinks of /proc/PID/fd/*)."""
    paths: list[str] = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return paths
    for fd in fds:
        try:
            paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return paths
