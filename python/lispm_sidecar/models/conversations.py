"""The conversations the sidecar keeps, so Emacs sends only what changed.

A long session's history is megabytes, and every model request needs all
of it.  Emacs sends it whole once; the sidecar keeps it under Emacs's
name for the conversation, with the revision Emacs gave it.  A later
request names the revision it builds on (`since`), how many of its
messages stay (`keep`: Emacs compares from the first, so an edit of the
session document anywhere still counts), and only the messages after
those; its system prompt and tools only when they changed.

When the sidecar does not hold that revision (it restarted, dropped the
conversation to stay within its limits, or an earlier request was
refused), nothing is started: the answer says `stale`, and Emacs sends
the whole again.  So a wrong guess costs one round trip, never a wrong
history.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidParams
from . import neutral
from .neutral import Message, ModelRequest, ToolSpec

#: The most characters of history kept, all conversations together;
#: the least recently used go first.
LIMIT_CHARS = 256 * 1024 * 1024
#: The most conversations kept.
LIMIT_COUNT = 64


@dataclass(frozen=True)
class Conversation:
    """One conversation as the sidecar holds it, at REVISION."""

    revision: int
    system: str
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]
    chars: int


def _chars(messages: tuple[Message, ...]) -> int:
    return sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
               + sum(len(t.text) + len(t.signature) + len(t.redacted) for t in m.reasoning)
               for m in messages)


class Conversations:
    """The conversations kept, least recently used first."""

    def __init__(self, limit_chars: int = LIMIT_CHARS, limit_count: int = LIMIT_COUNT) -> None:
        self.limit_chars = limit_chars
        self.limit_count = limit_count
        self._kept: OrderedDict[str, Conversation] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, name: str) -> Conversation | None:
        """The conversation NAME as kept, or None."""
        return self._kept.get(name)

    def request(self, params: Mapping[str, Any]) -> ModelRequest | None:
        """The whole request PARAMS stand for, kept under its conversation.

        None when PARAMS build on a revision not held (`stale`)."""
        name = params.get("conversation")
        since = params.get("since")
        if since is None:
            request = neutral.request(params)
        else:
            if not name:
                raise InvalidParams("since needs a conversation")
            held = self._kept.get(name)
            if held is None or held.revision != since:
                return None
            keep = params.get("keep") or 0
            if keep > len(held.messages):
                raise InvalidParams(f"keep is {keep}, but revision {since} of {name} has "
                                    f"{len(held.messages)} messages")
            whole = dict(params)
            whole["messages"] = []
            base = neutral.request(whole)
            added = tuple(neutral.message(m, f"messages[{i}]")
                          for i, m in enumerate(params["messages"]))
            request = replace(
                base, messages=held.messages[:keep] + added,
                system=held.system if params.get("system") is None else base.system,
                tools=held.tools if params.get("tools") is None else base.tools)
        if name:
            revision = params.get("revision")
            if revision is None:
                raise InvalidParams("a conversation needs a revision")
            self._keep(name, Conversation(revision, request.system, request.tools,
                                          request.messages, _chars(request.messages)))
        return request

    def forget(self, name: str) -> None:
        """Drop the conversation NAME, if kept."""
        self._kept.pop(name, None)

    def _keep(self, name: str, conversation: Conversation) -> None:
        self._kept.pop(name, None)
        self._kept[name] = conversation
        total = sum(c.chars for c in self._kept.values())
        while len(self._kept) > 1 and (total > self.limit_chars
                                       or len(self._kept) > self.limit_count):
            _, dropped = self._kept.popitem(last=False)
            total -= dropped.chars
