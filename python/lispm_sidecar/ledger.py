"""The durable ledger of every message, request and reply between agents.

The messaging tools (`send_message`, `ask_agent`, `reply`) and the delivery
queues stand on this module; it knows nothing of which agents are live (the
caller checks that) and formats no headers (it gives the caller the kind,
sender, request id and text to format).

Storage
-------
One SQLite file, given by the caller.  Missing parent folders are created
with mode 0700, the file with mode 0600 (SQLite gives its `-wal` and `-shm`
files the same mode).  `journal_mode=WAL` and `synchronous=FULL`: every
commit reaches the disk before the call returns, so what a call reported
survives a crash of the sidecar, of Emacs or (as far as the disk honours
fsync) of the machine.  A write SQLite cannot do (disk full, the file
locked by another process for over 10 s) is rolled back and raised as
`LedgerError`.  Every public `LedgerStore` call that writes is atomic:
called alone, it is exactly one transaction (`BEGIN IMMEDIATE`, so the
check and the change of `reply` cannot interleave with another writer,
even one in another process); inside `LedgerStore.batch()` or
`LedgerStore.run_group()` it is a savepoint of the enclosing transaction,
and a call that fails rolls back its own savepoint only.

Group commit: the asyncio facade `Ledger` runs the calls that are waiting
when its worker turns to them as one group, one transaction with one
commit (one fsync), and answers each caller only after that commit.  So
nobody is told of a change before it is durable, one call's refusal does
not undo its group-mates' changes, and a failed commit fails the whole
group (nothing of it was written).  A call that arrives alone is its own
transaction, as before.

Schema (`PRAGMA user_version` = 1)::

    requests(n INTEGER PRIMARY KEY AUTOINCREMENT,   -- request id "R<n>"
             asker, asked, state open|answered|ended, opened_at, closed_at)
    messages(id INTEGER PRIMARY KEY AUTOINCREMENT,
             kind message|request|reply|notice, sender, recipient, text,
             request_n -> requests.n (set for request and reply, and for
                         a notice about a request; NULL for message),
             state queued|delivered|picked_up|failed, reason, attempts,
             created_at, delivered_at, picked_up_at, failed_at)

Unique partial indexes allow one `request` and one `reply` message per
request, so even a bug above cannot answer a request twice.  Times are
seconds since the epoch.

Ids
---
Request ids (`R1`, `R2`, ...) and message ids come from `AUTOINCREMENT`,
whose counter lives in the database (`sqlite_sequence`): they grow over the
ledger's whole life and are never reused, not after a restart and not after
rows are deleted.  A number whose transaction rolled back may come again,
but it was never reported to anyone: an id is handed out only after its
commit.

Messages
--------
A message is every text that is to be pasted into an agent's terminal:
`message` (send), `request` (ask), `reply`, or `notice` (from `lispm`).

    queued --mark_delivered--> delivered --mark_picked_up--> picked_up
    queued | delivered --mark_failed(reason)--> failed
    delivered | failed --requeue--> queued      (keeps its place: FIFO by id)
    delivered --unclaim--> queued               (nothing was pasted: the attempt is taken back)

Delivery is **at most once**.  The delivery layer calls `mark_delivered`
just before it pastes (the commit is its claim to paste), and never pastes
a message that is not `queued`.  A crash between that commit and the paste
loses the paste, but visibly: the entry stays `delivered` without a pickup.
A paste whose pickup is not seen within `PICKUP_GRACE_S` (30 s) is
*delivered-unconfirmed* (`Message.unconfirmed`), not pasted again: a
duplicate would make an agent do the work twice.  `requeue` is for the
caller that knows the paste did not happen (the terminal refused it);
`attempts` counts the pastes, so any duplicate shows in the ledger.  The
ledger never requeues by itself, and a restart does not either.

Requests
--------
`ask` stores the request (`open`) and its message (queued for the asked
agent) in one transaction.  `reply` checks that the request exists, that
the replier is the agent that was asked and that the request is still
open, then queues the reply for the asker and marks the request `answered`,
all in one transaction: of two concurrent replies exactly one wins, the
other gets `RequestClosed`.  When an agent closes or dies,
`end_requests_to(agent)` marks its open requests `ended` and queues for
each asker a `notice` from `lispm` with the text
`"{agent} ended without replying to request {id}."`; the caller should
also `fail_queued_for(agent, reason)`, since agent names are reused and a
later agent of the same name must not receive them.  Likewise a reply or
notice queued for an asker that has closed is the caller's to fail.  A
request whose message cannot be handed over (`fail_delivery`) ends in the
same transaction, and its asker gets a notice saying why: no answer can
come.

After a restart
---------------
Open a `LedgerStore` (or `Ledger`) on the same file; `recipients_with_queued()`
and `queued_for(name)` give what is still to be delivered (the caller fails
those addressed to names that are no longer live), `open_requests()` what is
still awaited.  Requests stay open across restarts; answered and ended ones
stay closed.  An agent of an earlier run that will not come back (Emacs
restarted and did not resume it) is ended with `end_leftovers(agent,
reason)`, one transaction: the requests asked of it end (each asker gets
the notice above, with the reason), the requests it asked end (a request
message still queued fails; the asked agent that already has it gets a
notice that no reply is needed), and whatever is queued for it fails with
the reason.

Validation
----------
Agent names are plain names (`claude`, `codex-2`); `lispm` is reserved for
notices.  Text must hold something besides whitespace once cleaned
(`sanitize`: a text of control characters is empty), at most
`MAX_TEXT_CHARS` (100,000) characters, and valid UTF-8 (`bytes` that do not
decode, or a `str` with lone surrogates, are refused).  Every refusal is a
`LedgerError` (or `InvalidParams`) raised before anything is written.

Threads
-------
`LedgerStore` is synchronous and owns one connection, usable only on the
thread that opened it.  `Ledger` is the asyncio facade: it opens the store
on a dedicated worker thread (`ThreadPoolExecutor(max_workers=1)`) and runs
every call there, in groups of up to `MAX_GROUP`, so SQLite never blocks
the event loop.  A call whose awaiting task is cancelled before the worker
turns to it is not run; one cancelled later may still have committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from .errors import InvalidParams, LispmError
from .sanitize import sanitize

MAX_TEXT_CHARS = 100_000
"""The longest text a message may have, in characters (code points)."""

PICKUP_GRACE_S = 30.0
"""A pasted message whose pickup is not seen within this is delivered-unconfirmed."""

LISPM = "lispm"
"""The sender of notices; no agent may take this name."""

SCHEMA_VERSION = 1
_MAX_REASON_CHARS = 1_000
_BUSY_TIMEOUT_MS = 10_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_REQUEST_ID = re.compile(r"\s*[Rr]([1-9][0-9]{0,17})\s*")

MessageKind = Literal["message", "request", "reply", "notice"]
MessageState = Literal["queued", "delivered", "picked_up", "failed"]
RequestState = Literal["open", "answered", "ended"]
T = TypeVar("T")


# --- errors -------------------------------------------------------------------


class LedgerError(LispmError):
    """The ledger refused an operation, or its file cannot be used."""

    code = -32010


class EmptyText(LedgerError):
    """The text is empty, or only whitespace once cleaned."""

    code = -32011


class TextTooLong(LedgerError):
    """The text is longer than `MAX_TEXT_CHARS` characters."""

    code = -32012


class InvalidUtf8(LedgerError):
    """The text is not valid UTF-8."""

    code = -32013


class UnknownRequest(LedgerError):
    """No request has that id."""

    code = -32014


class RequestClosed(LedgerError):
    """The request was already answered, or ended with its asked agent."""

    code = -32015


class NotAsked(LedgerError):
    """The replier is not the agent the request was asked of."""

    code = -32016


class SelfRequest(LedgerError):
    """An agent asked itself."""

    code = -32017


class UnknownMessage(LedgerError):
    """No message has that id."""

    code = -32018


class BadTransition(LedgerError):
    """The message is not in a state that allows this change."""

    code = -32019


# --- records --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """One text to be pasted into an agent's terminal, and how far it got."""

    id: int
    kind: MessageKind
    sender: str
    recipient: str
    text: str
    request_id: str | None
    state: MessageState
    reason: str | None
    attempts: int
    created_at: float
    delivered_at: float | None
    picked_up_at: float | None
    failed_at: float | None

    def unconfirmed(self, now: float, grace: float = PICKUP_GRACE_S) -> bool:
        """Return whether this was pasted at least GRACE seconds ago and never picked up."""
        return (
            self.state == "delivered"
            and self.delivered_at is not None
            and now - self.delivered_at >= grace
        )

    def to_json(self) -> dict[str, Any]:
        """Return this message as a JSON object; `time` is when it was sent."""
        return {
            "id": self.id, "time": self.created_at, "kind": self.kind,
            "sender": self.sender, "recipient": self.recipient, "text": self.text,
            "request_id": self.request_id, "state": self.state, "reason": self.reason,
            "attempts": self.attempts, "created_at": self.created_at,
            "delivered_at": self.delivered_at, "picked_up_at": self.picked_up_at,
            "failed_at": self.failed_at,
        }


@dataclass(frozen=True, slots=True)
class Request:
    """A request from ASKER to ASKED, and whether it was answered."""

    id: str
    asker: str
    asked: str
    state: RequestState
    message: Message
    reply_message_id: int | None
    opened_at: float
    closed_at: float | None

    @property
    def number(self) -> int:
        """Return N of the id `R<n>`."""
        return int(self.id[1:])

    @property
    def text(self) -> str:
        """Return the text of the request."""
        return self.message.text

    @property
    def message_id(self) -> int:
        """Return the id of the request's message."""
        return self.message.id


# --- schema ---------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE requests (
  n         INTEGER PRIMARY KEY AUTOINCREMENT,
  asker     TEXT NOT NULL,
  asked     TEXT NOT NULL,
  state     TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'answered', 'ended')),
  opened_at REAL NOT NULL,
  closed_at REAL,
  CHECK (asker <> asked),
  CHECK ((state = 'open') = (closed_at IS NULL))
);
CREATE INDEX requests_open ON requests (n) WHERE state = 'open';
CREATE TABLE messages (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  kind         TEXT NOT NULL CHECK (kind IN ('message', 'request', 'reply', 'notice')),
  sender       TEXT NOT NULL,
  recipient    TEXT NOT NULL,
  text         TEXT NOT NULL,
  request_n    INTEGER REFERENCES requests (n),
  state        TEXT NOT NULL DEFAULT 'queued'
               CHECK (state IN ('queued', 'delivered', 'picked_up', 'failed')),
  reason       TEXT,
  attempts     INTEGER NOT NULL DEFAULT 0,
  created_at   REAL NOT NULL,
  delivered_at REAL,
  picked_up_at REAL,
  failed_at    REAL,
  CHECK (kind = 'notice' OR (kind = 'message') = (request_n IS NULL))
);
CREATE UNIQUE INDEX messages_request ON messages (request_n) WHERE kind = 'request';
CREATE UNIQUE INDEX messages_reply ON messages (request_n) WHERE kind = 'reply';
CREATE INDEX messages_queued ON messages (recipient, id) WHERE state = 'queued';
CREATE INDEX messages_sender ON messages (sender, id);
CREATE INDEX messages_recipient ON messages (recipient, id);
"""

# The audit of policy decisions: who asked to do what, what the user (or the
# policy) decided, and when.  Created on open, also in older ledgers.
_DECISIONS = """
CREATE TABLE IF NOT EXISTS decisions (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  agent      TEXT NOT NULL,
  role       TEXT NOT NULL,
  kind       TEXT NOT NULL,
  what       TEXT NOT NULL,
  decision   TEXT NOT NULL,
  reason     TEXT,
  decided_at REAL NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision on something an agent asked to do."""

    id: int
    agent: str
    role: str
    kind: str
    what: str
    decision: str
    reason: str | None
    decided_at: float

    def to_json(self) -> dict[str, Any]:
        """Return this decision as a JSON object."""
        return {"id": self.id, "agent": self.agent, "role": self.role, "kind": self.kind,
                "what": self.what, "decision": self.decision, "reason": self.reason,
                "time": self.decided_at}


_MESSAGE_COLUMNS = (
    "id, kind, sender, recipient, text, request_n, state, reason, attempts,"
    " created_at, delivered_at, picked_up_at, failed_at"
)

_REQUEST_SELECT = """
SELECT r.n, r.asker, r.asked, r.state, a.id, r.opened_at, r.closed_at,
  q.id, q.kind, q.sender, q.recipient, q.text, q.request_n, q.state, q.reason, q.attempts,
  q.created_at, q.delivered_at, q.picked_up_at, q.failed_at
FROM requests r
JOIN messages q ON q.request_n = r.n AND q.kind = 'request'
LEFT JOIN messages a ON a.request_n = r.n AND a.kind = 'reply'
"""


def _message(row: Any) -> Message:
    request_n = row[5]
    return Message(
        id=row[0],
        kind=cast(MessageKind, row[1]),
        sender=row[2],
        recipient=row[3],
        text=row[4],
        request_id=None if request_n is None else f"R{request_n}",
        state=cast(MessageState, row[6]),
        reason=row[7],
        attempts=row[8],
        created_at=row[9],
        delivered_at=row[10],
        picked_up_at=row[11],
        failed_at=row[12],
    )


def _request(row: Any) -> Request:
    return Request(
        id=f"R{row[0]}",
        asker=row[1],
        asked=row[2],
        state=cast(RequestState, row[3]),
        message=_message(row[7:]),
        reply_message_id=row[4],
        opened_at=row[5],
        closed_at=row[6],
    )


# --- validation -----------------------------------------------------------------


def check_name(name: object, role: str = "agent") -> str:
    """Return NAME if it is a plain agent name other than `lispm`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidParams(f"{role} must be an agent name like 'claude' or 'codex-2'")
    if name == LISPM:
        raise InvalidParams(f"{role} cannot be {LISPM!r}: that name is reserved for notices")
    return name


def check_text(text: object) -> str:
    """Return TEXT as a `str` if it may be a message, else raise a `LedgerError`."""
    if isinstance(text, bytes | bytearray):
        if len(text) > 4 * MAX_TEXT_CHARS:
            raise TextTooLong(f"text is {len(text):,} bytes; the limit is {MAX_TEXT_CHARS:,} "
                              "characters")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as err:
            raise InvalidUtf8(f"text is not valid UTF-8 (bad byte at offset {err.start})") from err
    if not isinstance(text, str):
        raise InvalidParams("text must be a string")
    if len(text) > MAX_TEXT_CHARS:
        raise TextTooLong(f"text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidUtf8(
            f"text is not valid UTF-8 (lone surrogate at character {err.start})"
        ) from err
    if not sanitize(text).strip():
        raise EmptyText("text is empty" if not text.strip() else
                        "text is empty once cleaned: it holds only control or invisible characters")
    return text


def parse_request_id(request_id: object) -> int:
    """Return N of a request id `R<n>` (also `r<n>`), else raise `UnknownRequest`."""
    if isinstance(request_id, str) and (match := _REQUEST_ID.fullmatch(request_id)):
        return int(match.group(1))
    raise UnknownRequest(f"{request_id!r} is not a request id; request ids look like R1, R2, ...")


def _check_id(message_id: object) -> int:
    if not isinstance(message_id, int) or isinstance(message_id, bool) or message_id < 1:
        raise UnknownMessage(f"{message_id!r} is not a message id")
    return message_id


def _check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise InvalidParams("limit must be a positive integer")
    return limit


# --- the file -------------------------------------------------------------------


def _make_parents(folder: Path) -> None:
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        with contextlib.suppress(FileExistsError):
            new.mkdir(mode=0o700)
            os.chmod(new, 0o700)


_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _prepare_file(path: Path) -> None:
    """Create PATH (mode 0600) if needed; refuse a symlink or a non-file."""
    _make_parents(path.parent)
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o600)
    except OSError as err:
        raise LedgerError(f"cannot open the ledger {path}: {err.strerror}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LedgerError(f"the ledger {path} is not a regular file")
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_MS / 1000)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise LedgerError(f"the ledger {path} cannot use WAL mode (got {mode})")
        for pragma in ("synchronous=FULL", "foreign_keys=ON", f"busy_timeout={_BUSY_TIMEOUT_MS}"):
            conn.execute(f"PRAGMA {pragma}")
    except (sqlite3.Error, LedgerError) as err:
        conn.close()
        if isinstance(err, LedgerError):
            raise
        raise LedgerError(f"cannot open the ledger {path}: {err}") from err
    return conn


# --- the store ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one work of `LedgerStore.run_group` returned, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


def _outcome(work: Callable[[LedgerStore], Any], store: LedgerStore) -> Outcome:
    try:
        return Outcome(value=work(store))
    except BaseException as err:  # handed to the caller, on its own loop
        return Outcome(error=err)


class _TransactionLost(Exception):
    """A work of a group ended the group's transaction."""


class _WroteThenFailed(Exception):
    """A work of a group failed after writing: the group must run with savepoints."""


class LedgerStore:
    """The ledger on one SQLite file, synchronous, for one thread."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self._clock = clock
        self._depth = 0
        #: Inside `run_group`'s first try: a work's own writes take no savepoint.
        self._bare = False
        _prepare_file(self.path)
        self._conn = _connect(self.path)
        try:
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    # -- life

    def _schema_version(self) -> int:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise LedgerError(
                f"the ledger {self.path} has schema {version}; this LispM knows {SCHEMA_VERSION}"
            )
        return cast(int, version)

    def _migrate(self) -> None:
        if self._schema_version() == SCHEMA_VERSION:
            with self._write() as conn:
                conn.execute(_DECISIONS)
            return
        with self._write() as conn:
            if self._schema_version() == SCHEMA_VERSION:
                return  # another connection created it meanwhile
            # (executescript would commit on its own: one statement at a time)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(_DECISIONS)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, or a savepoint inside `batch()`; rolled back on any error."""
        conn = self._conn
        if self._bare and self._depth == 1:
            self._depth = 2
            try:
                yield conn
            finally:
                self._depth = 1
            return
        if self._depth:
            name = f"s{self._depth}"
            self._depth += 1
            try:
                conn.execute(f"SAVEPOINT {name}")
                yield conn
                conn.execute(f"RELEASE {name}")
            except BaseException as err:
                # (A storage error can end the whole transaction: then there
                # is no savepoint left to roll back to.)
                if conn.in_transaction:
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                if isinstance(err, sqlite3.Error):
                    raise LedgerError(f"the ledger could not write {self.path}: {err}") from err
                raise
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException as err:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(err, sqlite3.Error):
                raise LedgerError(f"the ledger could not write {self.path}: {err}") from err
            raise
        finally:
            self._depth = 0

    @contextlib.contextmanager
    def batch(self) -> Iterator[LedgerStore]:
        """Run the calls inside as one transaction: all are committed, or none."""
        with self._write():
            yield self

    def run_group(self, works: Sequence[Callable[[LedgerStore], Any]]) -> list[Outcome]:
        """Run each of WORKS on this store, all in one transaction: one commit.

        A work that fails (a refusal) leaves the others' changes standing.
        Most refusals come before any write, so the group first runs with
        no savepoints (each costs two statements); if a work fails after it
        wrote, that attempt is rolled back whole and the group runs again
        with each work's writes in a savepoint of its own, which rolls back
        only that work.  Return each work's `Outcome` once the commit is
        done; if the commit (or `BEGIN`) fails, every outcome is that
        `LedgerError`.  If a work ends the transaction itself (SQLite aborts
        a transaction on some storage errors), the others are run again,
        each in a transaction of its own.
        """
        if len(works) == 1:
            return [_outcome(works[0], self)]
        try:
            return self._run_bare(works)
        except _WroteThenFailed:
            pass
        outcomes: list[Outcome] = []
        try:
            with self._write() as conn:
                for work in works:
                    outcomes.append(_outcome(work, self))
                    if not conn.in_transaction:
                        raise _TransactionLost
        except _TransactionLost:
            lost = len(outcomes) - 1
            return ([_outcome(work, self) for work in works[:lost]] + [outcomes[lost]]
                    + [_outcome(work, self) for work in works[lost + 1:]])
        except LedgerError as err:
            return [Outcome(error=LedgerError(str(err))) for _ in works]
        return outcomes

    def _run_bare(self, works: Sequence[Callable[[LedgerStore], Any]]) -> list[Outcome]:
        """Run WORKS in one transaction without savepoints; see `run_group`.

        Raise `_WroteThenFailed`, with the transaction rolled back, if a
        work failed after writing (or ended the transaction).
        """
        outcomes: list[Outcome] = []
        try:
            with self._write() as conn:
                self._bare = True
                try:
                    for work in works:
                        before = conn.total_changes
                        outcome = _outcome(work, self)
                        if not conn.in_transaction or (
                                outcome.error is not None and conn.total_changes != before):
                            raise _WroteThenFailed
                        outcomes.append(outcome)
                finally:
                    self._bare = False
        except LedgerError as err:
            return [Outcome(error=LedgerError(str(err))) for _ in works]
        return outcomes

    # -- writes

    def _insert(
        self, conn: sqlite3.Connection, kind: MessageKind, sender: str, recipient: str,
        text: str, request_n: int | None, now: float,
    ) -> Message:
        cursor = conn.execute(
            "INSERT INTO messages (kind, sender, recipient, text, request_n, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (kind, sender, recipient, text, request_n, now),
        )
        return Message(
            id=cast(int, cursor.lastrowid), kind=kind, sender=sender, recipient=recipient,
            text=text, request_id=None if request_n is None else f"R{request_n}",
            state="queued", reason=None, attempts=0, created_at=now,
            delivered_at=None, picked_up_at=None, failed_at=None,
        )

    def send(self, sender: str, recipient: str, text: str | bytes) -> Message:
        """Queue a plain message from SENDER to RECIPIENT."""
        sender = check_name(sender, "sender")
        recipient = check_name(recipient, "recipient")
        body = check_text(text)
        with self._write() as conn:
            return self._insert(conn, "message", sender, recipient, body, None, self._clock())

    def notify(self, recipient: str, text: str | bytes, request_id: str | None = None) -> Message:
        """Queue a notice from `lispm` to RECIPIENT, about REQUEST_ID if given."""
        recipient = check_name(recipient, "recipient")
        body = check_text(text)
        with self._write() as conn:
            n = None
            if request_id is not None:
                n = parse_request_id(request_id)
                self._request_row(conn, n)
            return self._insert(conn, "notice", LISPM, recipient, body, n, self._clock())

    def ask(self, sender: str, recipient: str, text: str | bytes) -> Request:
        """Open a request from SENDER to RECIPIENT and queue its message."""
        sender = check_name(sender, "sender")
        recipient = check_name(recipient, "recipient")
        if sender == recipient:
            raise SelfRequest(f"{sender} cannot ask itself; ask another agent")
        body = check_text(text)
        now = self._clock()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO requests (asker, asked, opened_at) VALUES (?, ?, ?)",
                (sender, recipient, now),
            )
            n = cast(int, cursor.lastrowid)
            message = self._insert(conn, "request", sender, recipient, body, n, now)
        return Request(
            id=f"R{n}", asker=sender, asked=recipient, state="open", message=message,
            reply_message_id=None, opened_at=now, closed_at=None,
        )

    def _request_row(self, conn: sqlite3.Connection, n: int) -> tuple[str, str, str]:
        row = conn.execute("SELECT asker, asked, state FROM requests WHERE n = ?", (n,)).fetchone()
        if row is None:
            raise UnknownRequest(f"there is no request R{n}")
        return cast(tuple[str, str, str], row)

    def reply(self, replier: str, request_id: str, text: str | bytes) -> Message:
        """Answer REQUEST_ID as REPLIER: queue the reply for the asker, close the request."""
        replier = check_name(replier, "replier")
        n = parse_request_id(request_id)
        body = check_text(text)
        with self._write() as conn:
            asker, asked, state = self._request_row(conn, n)
            if replier != asked:
                raise NotAsked(
                    f"request R{n} was asked of {asked}, not of {replier}; only {asked} may reply"
                )
            if state == "answered":
                raise RequestClosed(f"request R{n} was already answered; a request is answered "
                                    "only once")
            if state == "ended":
                raise RequestClosed(f"request R{n} has ended (its asker or {asked} left "
                                    "without a reply), so it can no longer be answered")
            now = self._clock()
            message = self._insert(conn, "reply", replier, asker, body, n, now)
            conn.execute(
                "UPDATE requests SET state = 'answered', closed_at = ?"
                " WHERE n = ? AND state = 'open'",
                (now, n),
            )
        return message

    def end_requests_to(self, agent: str) -> list[Message]:
        """End AGENT's open requests; return the notices queued for their askers."""
        agent = check_name(agent)
        notices: list[Message] = []
        with self._write() as conn:
            now = self._clock()
            rows = conn.execute(
                "UPDATE requests SET state = 'ended', closed_at = ?"
                " WHERE asked = ? AND state = 'open' RETURNING n, asker",
                (now, agent),
            ).fetchall()
            for n, asker in sorted(rows):
                text = f"{agent} ended without replying to request R{n}."
                notices.append(self._insert(conn, "notice", LISPM, asker, text, n, now))
        return notices

    def fail_queued_for(self, recipient: str, reason: str) -> list[Message]:
        """Mark every message still queued for RECIPIENT failed with REASON."""
        recipient = check_name(recipient, "recipient")
        why = _reason(reason)
        with self._write() as conn:
            rows = conn.execute(
                f"UPDATE messages SET state = 'failed', reason = ?, failed_at = ?"
                f" WHERE recipient = ? AND state = 'queued' RETURNING {_MESSAGE_COLUMNS}",
                (why, self._clock(), recipient),
            ).fetchall()
        return sorted((_message(row) for row in rows), key=lambda m: m.id)

    def end_leftovers(self, agent: str, reason: str) -> tuple[list[Message], list[Message]]:
        """End what waits on AGENT, an agent that will not come back, for REASON.

        In one transaction: the open requests asked of AGENT end, and each
        asker gets a notice; the open requests AGENT asked end too (no reply
        may reach a later agent of that name): a request message still
        queued fails, one already delivered gets its agent a notice that no
        reply is needed; every message still queued for AGENT fails.
        Return (the notices queued, the messages failed)."""
        agent = check_name(agent)
        why = _reason(reason)
        notices: list[Message] = []
        with self._write() as conn:
            now = self._clock()
            asked_of = conn.execute(
                "UPDATE requests SET state = 'ended', closed_at = ?"
                " WHERE asked = ? AND state = 'open' RETURNING n, asker",
                (now, agent),
            ).fetchall()
            for n, asker in sorted(asked_of):
                text = f"{agent} ended without replying to request R{n} ({why})."
                notices.append(self._insert(conn, "notice", LISPM, asker, text, n, now))
            more, failed = self._end_asked_by(conn, agent, why, now, everything=True)
        return [*notices, *more], failed

    def end_requests_by(self, agent: str, reason: str) -> tuple[list[Message], list[Message]]:
        """End the open requests AGENT asked, for REASON: it left, and a reply
        that came later would have no one to go to.  A request message still
        queued fails; one already delivered gets its agent a notice that no
        reply is needed.  Return (the notices queued, the messages failed)."""
        agent = check_name(agent)
        why = _reason(reason)
        with self._write() as conn:
            return self._end_asked_by(conn, agent, why, self._clock(), everything=False)

    def _end_asked_by(self, conn: sqlite3.Connection, agent: str, why: str, now: float,
                      everything: bool) -> tuple[list[Message], list[Message]]:
        """End AGENT's open requests in CONN's transaction; with EVERYTHING,
        every message still queued for AGENT fails too."""
        asked_by = conn.execute(
            "UPDATE requests SET state = 'ended', closed_at = ?"
            " WHERE asker = ? AND state = 'open' RETURNING n, asked",
            (now, agent),
        ).fetchall()
        ended = [n for n, _asked in asked_by]
        marks = ", ".join("?" * len(ended))
        failed = [_message(row) for row in conn.execute(
            f"UPDATE messages SET state = 'failed', reason = ?, failed_at = ?"
            f" WHERE state = 'queued' AND ((? AND recipient = ?)"
            f" OR (kind = 'request' AND request_n IN ({marks})))"
            f" RETURNING {_MESSAGE_COLUMNS}",
            (why, now, everything, agent, *ended),
        ).fetchall()]
        unseen = {message.request_id for message in failed if message.kind == "request"}
        notices: list[Message] = []
        for n, asked in sorted(asked_by):
            if f"R{n}" not in unseen:
                text = f"Request R{n} from {agent} needs no reply any more ({why})."
                notices.append(self._insert(conn, "notice", LISPM, asked, text, n, now))
        return notices, sorted(failed, key=lambda m: m.id)

    def _transition(
        self, message_id: int, target: str, allowed: tuple[MessageState, ...],
        assignments: str, params: tuple[Any, ...],
    ) -> Message:
        message_id = _check_id(message_id)
        marks = ", ".join("?" * len(allowed))
        with self._write() as conn:
            rows = conn.execute(
                f"UPDATE messages SET {assignments} WHERE id = ? AND state IN ({marks})"
                f" RETURNING {_MESSAGE_COLUMNS}",
                (*params, message_id, *allowed),
            ).fetchall()
            if rows:
                return _message(rows[0])
            row = conn.execute("SELECT state FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise UnknownMessage(f"there is no message {message_id}")
        raise BadTransition(f"message {message_id} is {row[0]}; it cannot be {target}")

    def mark_delivered(self, message_id: int) -> Message:
        """Record that message MESSAGE_ID is being pasted (call just before the paste)."""
        return self._transition(
            message_id, "delivered", ("queued",),
            "state = 'delivered', delivered_at = ?, attempts = attempts + 1", (self._clock(),),
        )

    def mark_picked_up(self, message_id: int) -> Message:
        """Record that the recipient was seen taking message MESSAGE_ID."""
        return self._transition(
            message_id, "picked up", ("delivered",),
            "state = 'picked_up', picked_up_at = ?", (self._clock(),),
        )

    def mark_failed(self, message_id: int, reason: str) -> Message:
        """Record that message MESSAGE_ID cannot be delivered, and why."""
        return self._transition(
            message_id, "failed", ("queued", "delivered"),
            "state = 'failed', failed_at = ?, reason = ?", (self._clock(), _reason(reason)),
        )

    def fail_delivery(self, message_id: int, reason: str) -> tuple[Message, Message | None]:
        """Mark message MESSAGE_ID failed with REASON: it could not be handed over.

        A request's message that fails ends its request, if still open (no
        answer can come), and queues for its asker a notice that says why,
        in the same transaction.  Return (the failed message, that notice
        or None)."""
        with self._write() as conn:
            failed = self.mark_failed(message_id, reason)
            if failed.kind != "request" or failed.request_id is None:
                return failed, None
            n = parse_request_id(failed.request_id)
            now = self._clock()
            ended = conn.execute(
                "UPDATE requests SET state = 'ended', closed_at = ? WHERE n = ? AND state = 'open'",
                (now, n),
            ).rowcount
            if not ended:
                return failed, None
            text = (f"Request R{n} to {failed.recipient} will get no reply: it could not be"
                    f" delivered ({failed.reason}).")
            return failed, self._insert(conn, "notice", LISPM, failed.sender, text, n, now)

    def withdraw(self, message_id: int, reason: str) -> Message:
        """Take back queued message MESSAGE_ID before it is delivered: it fails
        with REASON.  A message already handed over cannot be taken back."""
        return self._transition(
            message_id, "withdrawn", ("queued",),
            "state = 'failed', failed_at = ?, reason = ?", (self._clock(), _reason(reason)),
        )

    def requeue(self, message_id: int) -> Message:
        """Put a delivered (but not picked up) or failed message back in its queue.

        Only for a caller that knows the paste did not happen: the ledger
        delivers at most once and never requeues by itself.
        """
        return self._transition(
            message_id, "requeued", ("delivered", "failed"),
            "state = 'queued', reason = NULL, delivered_at = NULL, failed_at = NULL", (),
        )

    def unclaim(self, message_id: int) -> Message:
        """Take back the claim on delivered message MESSAGE_ID: nothing was pasted.

        For a paste the terminal refused before writing anything (a dialog
        was open): the message is queued again and the attempt does not
        count, as `attempts` counts the pastes.
        """
        return self._transition(
            message_id, "unclaimed", ("delivered",),
            "state = 'queued', delivered_at = NULL, attempts = max(attempts - 1, 0)", (),
        )

    # -- reads

    def message(self, message_id: int) -> Message:
        """Return message MESSAGE_ID."""
        message_id = _check_id(message_id)
        row = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise UnknownMessage(f"there is no message {message_id}")
        return _message(row)

    def request(self, request_id: str) -> Request:
        """Return request REQUEST_ID."""
        n = parse_request_id(request_id)
        row = self._conn.execute(_REQUEST_SELECT + " WHERE r.n = ?", (n,)).fetchone()
        if row is None:
            raise UnknownRequest(f"there is no request R{n}")
        return _request(row)

    def notice_about(self, request_id: str, recipient: str) -> Message | None:
        """Return the newest notice about REQUEST_ID sent to RECIPIENT, or None."""
        n = parse_request_id(request_id)
        row = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE kind = 'notice'"
            " AND request_n = ? AND recipient = ? ORDER BY id DESC LIMIT 1",
            (n, recipient),
        ).fetchone()
        return None if row is None else _message(row)

    def queued_for(self, recipient: str) -> list[Message]:
        """Return the messages queued for RECIPIENT, oldest first."""
        rows = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE recipient = ? AND state = 'queued'"
            " ORDER BY id",
            (recipient,),
        ).fetchall()
        return [_message(row) for row in rows]

    def recipients_with_queued(self) -> list[str]:
        """Return every name that has queued messages, sorted."""
        rows = self._conn.execute(
            "SELECT DISTINCT recipient FROM messages WHERE state = 'queued' ORDER BY recipient"
        ).fetchall()
        return [row[0] for row in rows]

    def open_requests(self, asked: str | None = None) -> list[Request]:
        """Return the open requests (only those asked of ASKED if given), oldest first."""
        where = " WHERE r.state = 'open'" + ("" if asked is None else " AND r.asked = ?")
        params = () if asked is None else (asked,)
        rows = self._conn.execute(_REQUEST_SELECT + where + " ORDER BY r.n", params).fetchall()
        return [_request(row) for row in rows]

    def entries(self, limit: int = 100, agent: str | None = None) -> list[Message]:
        """Return the newest LIMIT messages, newest first; only AGENT's if given."""
        limit = _check_limit(limit)
        if agent is None:
            sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages ORDER BY id DESC LIMIT ?"
            rows = self._conn.execute(sql, (limit,)).fetchall()
        else:
            sql = (
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id IN ("
                " SELECT id FROM (SELECT id FROM messages WHERE sender = ?"
                "                 ORDER BY id DESC LIMIT ?)"
                " UNION SELECT id FROM (SELECT id FROM messages WHERE recipient = ?"
                "                       ORDER BY id DESC LIMIT ?))"
                " ORDER BY id DESC LIMIT ?"
            )
            rows = self._conn.execute(sql, (agent, limit, agent, limit, limit)).fetchall()
        return [_message(row) for row in rows]

    def record_decision(self, agent: str, role: str, kind: str, what: str, decision: str,
                        reason: str | None = None) -> Decision:
        """Record, durably, a decision on something AGENT asked to do."""
        for name, value in (("agent", agent), ("role", role), ("kind", kind),
                            ("what", what), ("decision", decision)):
            if not isinstance(value, str) or not value:
                raise InvalidParams(f"{name} must be a non-empty string")
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO decisions (agent, role, kind, what, decision, reason, decided_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (agent, role, kind, what[:2000], decision, reason, self._clock()))
            row = conn.execute("SELECT * FROM decisions WHERE id = ?",
                               (cursor.lastrowid,)).fetchone()
        return _decision(row)

    def decisions(self, limit: int = 100, agent: str | None = None) -> list[Decision]:
        """Return the newest LIMIT decisions, newest first; only AGENT's if given."""
        limit = _check_limit(limit)
        if agent is None:
            rows = self._conn.execute(
                "SELECT * FROM decisions ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        else:
            rows = self._conn.execute(
                "SELECT * FROM decisions WHERE agent = ? ORDER BY id DESC LIMIT ?",
                (agent, limit)).fetchall()
        return [_decision(row) for row in rows]


def _decision(row: Any) -> Decision:
    return Decision(*row)


def _reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidParams("reason must be a non-empty string")
    return reason.encode("utf-8", "replace").decode("utf-8")[:_MAX_REASON_CHARS]


# --- the asyncio facade ---------------------------------------------------------


#: The most calls `Ledger` runs in one transaction.
MAX_GROUP = 256


def _answer(answers: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    """On the callers' loop: give each caller its outcome (unless it stopped waiting)."""
    for future, outcome in answers:
        if future.done():
            continue
        if outcome.error is None:
            future.set_result(outcome.value)
        else:
            future.set_exception(outcome.error)


class Ledger:
    """The ledger for the sidecar's asyncio loop: every call runs on one worker thread.

    Calls that are waiting when the worker turns to them run as one group
    (`LedgerStore.run_group`): one transaction, one commit, and each call's
    answer only after that commit.
    """

    def __init__(self, executor: ThreadPoolExecutor, store: LedgerStore) -> None:
        """Use `await Ledger.open(path)` instead."""
        self._executor = executor
        self._store = store
        self._closed = False
        self._waiting: deque[tuple[Callable[[LedgerStore], Any], asyncio.Future[Any]]] = deque()
        self._lock = threading.Lock()
        self._draining = False

    @property
    def path(self) -> Path:
        """Return the ledger's file."""
        return self._store.path

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time
    ) -> Ledger:
        """Open (or create) the ledger at PATH on a worker thread of its own."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lispm-ledger")
        loop = asyncio.get_running_loop()
        try:
            store = await loop.run_in_executor(executor, partial(LedgerStore, path, clock=clock))
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, store)

    async def run(self, work: Callable[[LedgerStore], T]) -> T:
        """Return WORK(store), run on the ledger's thread (e.g. several calls in a batch)."""
        if self._closed:
            raise LedgerError("the ledger is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting.append((work, future))
            if not self._draining:
                self._draining = True
                self._executor.submit(self._drain)
        return await future

    def _drain(self) -> None:
        """On the worker: run the waiting calls, a group at a time, until none wait."""
        while True:
            with self._lock:
                if not self._waiting:
                    self._draining = False
                    return
                taken = [self._waiting.popleft()
                         for _ in range(min(MAX_GROUP, len(self._waiting)))]
            # A call whose caller was cancelled before this is not run.
            group = [(work, future) for work, future in taken if not future.cancelled()]
            try:
                outcomes = self._store.run_group([work for work, _ in group])
            except BaseException as err:  # a bug here must not leave callers waiting
                outcomes = [Outcome(error=err)] * len(group)
            answers = [(future, outcome) for (_, future), outcome
                       in zip(group, outcomes, strict=True)]
            # One wake-up of each caller's loop for the whole group.
            for loop in {future.get_loop() for future, _ in answers}:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                    loop.call_soon_threadsafe(
                        _answer, [answer for answer in answers if answer[0].get_loop() is loop])

    async def close(self) -> None:
        """Close the store and stop its thread (idempotent).

        Calls made before are run first; calls made after are refused."""
        if self._closed:
            return
        self._closed = True
        try:
            # The worker runs jobs in order: the groups already waiting go first.
            await asyncio.get_running_loop().run_in_executor(self._executor, self._store.close)
        finally:
            self._executor.shutdown(wait=False)

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, sender: str, recipient: str, text: str | bytes) -> Message:
        """See `LedgerStore.send`."""
        return await self.run(lambda s: s.send(sender, recipient, text))

    async def notify(
        self, recipient: str, text: str | bytes, request_id: str | None = None
    ) -> Message:
        """See `LedgerStore.notify`."""
        return await self.run(lambda s: s.notify(recipient, text, request_id))

    async def ask(self, sender: str, recipient: str, text: str | bytes) -> Request:
        """See `LedgerStore.ask`."""
        return await self.run(lambda s: s.ask(sender, recipient, text))

    async def reply(self, replier: str, request_id: str, text: str | bytes) -> Message:
        """See `LedgerStore.reply`."""
        return await self.run(lambda s: s.reply(replier, request_id, text))

    async def end_requests_to(self, agent: str) -> list[Message]:
        """See `LedgerStore.end_requests_to`."""
        return await self.run(lambda s: s.end_requests_to(agent))

    async def fail_queued_for(self, recipient: str, reason: str) -> list[Message]:
        """See `LedgerStore.fail_queued_for`."""
        return await self.run(lambda s: s.fail_queued_for(recipient, reason))

    async def end_leftovers(self, agent: str, reason: str,
                            ) -> tuple[list[Message], list[Message]]:
        """See `LedgerStore.end_leftovers`."""
        return await self.run(lambda s: s.end_leftovers(agent, reason))

    async def end_requests_by(self, agent: str, reason: str,
                              ) -> tuple[list[Message], list[Message]]:
        """See `LedgerStore.end_requests_by`."""
        return await self.run(lambda s: s.end_requests_by(agent, reason))

    async def mark_delivered(self, message_id: int) -> Message:
        """See `LedgerStore.mark_delivered`."""
        return await self.run(lambda s: s.mark_delivered(message_id))

    async def mark_picked_up(self, message_id: int) -> Message:
        """See `LedgerStore.mark_picked_up`."""
        return await self.run(lambda s: s.mark_picked_up(message_id))

    async def mark_failed(self, message_id: int, reason: str) -> Message:
        """See `LedgerStore.mark_failed`."""
        return await self.run(lambda s: s.mark_failed(message_id, reason))

    async def fail_delivery(self, message_id: int, reason: str,
                            ) -> tuple[Message, Message | None]:
        """See `LedgerStore.fail_delivery`."""
        return await self.run(lambda s: s.fail_delivery(message_id, reason))

    async def withdraw(self, message_id: int, reason: str) -> Message:
        """See `LedgerStore.withdraw`."""
        return await self.run(lambda s: s.withdraw(message_id, reason))

    async def requeue(self, message_id: int) -> Message:
        """See `LedgerStore.requeue`."""
        return await self.run(lambda s: s.requeue(message_id))

    async def unclaim(self, message_id: int) -> Message:
        """See `LedgerStore.unclaim`."""
        return await self.run(lambda s: s.unclaim(message_id))

    async def message(self, message_id: int) -> Message:
        """See `LedgerStore.message`."""
        return await self.run(lambda s: s.message(message_id))

    async def request(self, request_id: str) -> Request:
        """See `LedgerStore.request`."""
        return await self.run(lambda s: s.request(request_id))

    async def queued_for(self, recipient: str) -> list[Message]:
        """See `LedgerStore.queued_for`."""
        return await self.run(lambda s: s.queued_for(recipient))

    async def recipients_with_queued(self) -> list[str]:
        """See `LedgerStore.recipients_with_queued`."""
        return await self.run(LedgerStore.recipients_with_queued)

    async def open_requests(self, asked: str | None = None) -> list[Request]:
        """See `LedgerStore.open_requests`."""
        return await self.run(lambda s: s.open_requests(asked))

    async def entries(self, limit: int = 100, agent: str | None = None) -> list[Message]:
        """See `LedgerStore.entries`."""
        return await self.run(lambda s: s.entries(limit, agent))

    async def record_decision(self, agent: str, role: str, kind: str, what: str,
                              decision: str, reason: str | None = None) -> Decision:
        """See `LedgerStore.record_decision`."""
        return await self.run(
            lambda s: s.record_decision(agent, role, kind, what, decision, reason))

    async def decisions(self, limit: int = 100, agent: str | None = None) -> list[Decision]:
        """See `LedgerStore.decisions`."""
        return await self.run(lambda s: s.decisions(limit, agent))
