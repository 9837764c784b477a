"""The wait-for graph over open requests, which refuses deadlocks.

Each open request is an edge asker -> asked.  An edge counts only if its
asker blocks: its ask keeps it waiting until the answer comes (an agent
that lives in Emacs, kind `lispm`; `asks_block`).  A terminal agent's ask
returns at once and the answer comes as a later message, so it never waits
on anyone: its edges do not count, and no cycle can pass through it.

A new request closes a cycle when the asked agent already waits, edge by
counted edge, on the asker; `Messenger.ask` refuses it before anything is
written.  The asker need not block: an agent that waits takes nothing but
replies, so a terminal agent's question to it would wait, unseen, until
that terminal agent answered; it is told to answer first.  Whether an asker blocks is asked when a
cycle is looked for, not when its edge is added, so the graph rebuilt from
the ledger after a restart (`from_requests`) is right as soon as the
agents are known again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

#: The kinds of agent whose `ask_agent` blocks them until the answer comes.
BLOCKING_KINDS = frozenset({"lispm"})


def asks_block(kind: str | None) -> bool:
    """Return whether an agent of KIND (None: unknown) waits on its requests.

    The one place that says which agents block."""
    return kind in BLOCKING_KINDS


class OpenRequest(Protocol):
    """What the graph reads of a request (`ledger.Request` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def asker(self) -> str: ...

    @property
    def asked(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Edge:
    """The open request REQUEST_ID: ASKER waits on ASKED, if ASKER blocks."""

    request_id: str
    asker: str
    asked: str


class WaitForGraph:
    """The open requests as edges asker -> asked, keyed by request id."""

    def __init__(self, blocks: Callable[[str], bool]) -> None:
        """BLOCKS(name) says whether the agent NAME waits on its requests."""
        self._blocks = blocks
        self._edges: dict[str, Edge] = {}
        #: The same edges by asker: the asked agent of each request id.
        self._out: dict[str, dict[str, str]] = {}

    @classmethod
    def from_requests(cls, requests: Iterable[OpenRequest],
                      blocks: Callable[[str], bool]) -> WaitForGraph:
        """Return the graph of REQUESTS, the ledger's open ones."""
        graph = cls(blocks)
        for request in requests:
            graph.add(request.id, request.asker, request.asked)
        return graph

    def add(self, request_id: str, asker: str, asked: str) -> None:
        """Record the open request REQUEST_ID from ASKER to ASKED."""
        self.remove(request_id)
        self._edges[request_id] = Edge(request_id, asker, asked)
        self._out.setdefault(asker, {})[request_id] = asked

    def remove(self, request_id: str) -> None:
        """Forget REQUEST_ID, answered or ended (nothing if it is not here)."""
        edge = self._edges.pop(request_id, None)
        if edge is not None:
            out = self._out[edge.asker]
            del out[request_id]
            if not out:
                del self._out[edge.asker]

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._edges

    def __len__(self) -> int:
        return len(self._edges)

    def edges(self) -> list[Edge]:
        """Return every open request's edge, oldest added first."""
        return list(self._edges.values())

    def waiting(self, asker: str, asked: str) -> list[str]:
        """Return the ids of the counted edges from ASKER to ASKED."""
        if not self._blocks(asker):
            return []
        return [request_id for request_id, to in self._out.get(asker, {}).items() if to == asked]

    def cycle_if(self, asker: str, asked: str) -> list[str] | None:
        """Return the cycle a request from ASKER to ASKED would close, or None.

        The cycle is ASKER, ASKED, ..., ASKER: a shortest chain of counted
        edges from ASKED back to ASKER, after the new edge.  An asker that
        does not block closes one too when ASKED waits on it: ASKED takes
        nothing but replies until then, so the request would wait in
        silence until ASKER answers."""
        if asker == asked:
            return [asker, asker]
        came_from: dict[str, str] = {asked: asked}
        todo = deque([asked])
        while todo:
            name = todo.popleft()
            if not self._blocks(name):
                continue  # it does not wait on what it asked
            for other in self._out.get(name, {}).values():
                if other in came_from:
                    continue
                came_from[other] = name
                if other == asker:
                    chain = [asker]
                    while chain[-1] != asked:
                        chain.append(came_from[chain[-1]])
                    return [asker, *reversed(chain)]
                todo.append(other)
        return None
