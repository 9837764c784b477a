"""Hermes's activity, from its conversation database `<hermes home>/state.db`.

Hermes 0.19.0 keeps every conversation in SQLite (WAL): a `sessions` row per
session, written only with the session's first message (an idle, freshly
started Hermes has none), and `messages` rows written as the turn goes: the
user's row at the start, an assistant row with `finish_reason='tool_calls'`
before a tool runs, the tool's row after it, and a closing assistant row.

Idle ⇔ the bound session's newest active message is an assistant row whose
`finish_reason` is not `tool_calls`.  A turn in progress, a running tool
and an open approval dialog are all BUSY.  Before the terminal's session
row exists the state is UNKNOWN, so nothing is delivered before the user's
first message (as for Claude Code and Codex).

Binding: the session of this terminal is the first one created after the
terminal's process started whose `cwd` is the agent's folder and that no
other Hermes watcher holds.  Its id carries the time Hermes started it
(`%Y%m%d_%H%M%S_<hex>`, local time); when two Hermes terminals work in the
same folder, a session goes to the terminal launched last before that time.
`/new` ends the bound session with `end_reason='new_session'` and starts
another, written (by real Hermes 0.19.0) without a `cwd` at the moment the
old one ended: the watcher moves to it at once, and counts it idle until
its first message (Hermes waits at its prompt).
Context compression starts a child session (`parent_session_id`): the
watcher follows the child.

The database is opened read-only and read only when inotify reports a write
to `state.db` or its `-wal` file (several events in one loop turn cost one
read), and twice more shortly after the last write of a burst, because a
WAL commit becomes visible only when SQLite updates its memory-mapped
`-shm` index, which inotify cannot see.  No polling.

Every read runs on one thread that all Hermes watchers share (so two
watchers never bind a session at the same time), never on the event loop:
a database another process keeps locked makes SQLite wait up to its 1 s
busy timeout, which must not stall the sidecar.  A read asked for while
one runs is made once more after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from ...watchers.base import AgentActivity, Watcher, proc_start_time
from ...watchers.inotify import (
    IN_CREATE,
    IN_DELETE,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    DirWatch,
    Inotify,
)

log = logging.getLogger(__name__)

DB_NAME = "state.db"
_DB_FILES = frozenset({DB_NAME, f"{DB_NAME}-wal"})
_EVENTS = IN_CREATE | IN_MODIFY | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM
#: Seconds after the last write event at which the database is read again.
SETTLE = (0.05, 0.3)
#: Slack for clocks and rounding when comparing launch and session times.
_SLACK = 2.0
#: The thread every watcher's database work runs on.
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lispm-hermes")


def hermes_home_for(home: Path, environ: dict[str, str] | None = None) -> Path:
    """`$HERMES_HOME` if set, else HOME/.hermes."""
    env = os.environ if environ is None else environ
    value = env.get("HERMES_HOME")
    return Path(value) if value else home / ".hermes"


def process_started_at(pid: int) -> float | None:
    """When process PID started, in Unix seconds (None if it is gone)."""
    ticks = proc_start_time(pid)
    if ticks is None:
        return None
    try:
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def session_time(session_id: str) -> float | None:
    """The local start time in a Hermes session id, in Unix seconds."""
    try:
        return time.mktime(time.strptime(session_id[:15], "%Y%m%d_%H%M%S"))
    except (ValueError, OverflowError):
        return None


def is_idle(role: str | None, finish_reason: str | None) -> bool:
    """Whether a session whose newest active message is (ROLE, FINISH_REASON) waits
    for its user."""
    return role == "assistant" and (finish_reason or "") != "tool_calls"


class HermesWatcher(Watcher):
    """The activity of the Hermes whose terminal process is ROOT_PID, in CWD."""

    kind = "hermes"

    #: The live watchers of this sidecar, so that two terminals never share a session.
    live: ClassVar[list[HermesWatcher]] = []

    def __init__(self, inotify: Inotify, hermes_home: Path, root_pid: int, cwd: Path,
                 launched_at: float | None = None, resumed_session: str | None = None) -> None:
        super().__init__()
        self.inotify = inotify
        self.hermes_home = Path(hermes_home)
        self.db_path = self.hermes_home / DB_NAME
        self.root_pid = root_pid
        self.cwd = os.path.realpath(os.path.expanduser(cwd))
        started = launched_at if launched_at is not None else process_started_at(root_pid)
        self.launched_at = started if started is not None else time.time()
        self.session_id: str | None = None
        #: The session `hermes --resume` was given: it was started before
        #: this terminal, so it is bound by its id, not by its time.
        self.resumed_session = resumed_session
        self._session_started = 0.0
        self._last_user_row = 0
        self._last: tuple[str | None, str | None] | None = None
        self._db: sqlite3.Connection | None = None
        self._dir: DirWatch | None = None
        self._pending = False
        self._settle: list[asyncio.TimerHandle] = []
        self._started = False
        self._unsubscribe_overflow: Any = None
        #: How many times the database was read.
        self.reads = 0
        self._reading: asyncio.Task[None] | None = None
        self._read_again = False

    @property
    def cli_session(self) -> str | None:
        """The session followed (`hermes --resume` takes it)."""
        return self.session_id

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        HermesWatcher.live.append(self)
        self._unsubscribe_overflow = self.inotify.on_overflow(self._schedule)
        self._dir = DirWatch(self.inotify, self.hermes_home, _EVENTS, self._dir_event,
                             on_ready=self._schedule)
        self._dir.start()
        self._refresh()
        if self._reading is not None:
            # The first state, read off the loop (this waits; the loop does not).
            await asyncio.wait({self._reading})

    async def stop(self) -> None:
        self._started = False
        if self in HermesWatcher.live:
            HermesWatcher.live.remove(self)
        if self._unsubscribe_overflow is not None:
            self._unsubscribe_overflow()
            self._unsubscribe_overflow = None
        if self._dir is not None:
            self._dir.cancel()
            self._dir = None
        for handle in self._settle:
            handle.cancel()
        self._settle = []
        if self._reading is not None:
            self._reading.cancel()  # its thread finishes the read; the result is dropped
        self._close()

    def describe(self) -> dict[str, Any]:
        return {
            **self._state(),
            "root_pid": self.root_pid,
            "hermes_home": str(self.hermes_home),
            "cwd": self.cwd,
            "session_id": self.session_id,
            "launched_at": self.launched_at,
            "last_message": list(self._last) if self._last else None,
            "reads": self.reads,
        }

    # ---------------------------------------------------------------- events

    def _dir_event(self, name: str, mask: int) -> None:
        if name in _DB_FILES:
            if name == DB_NAME and mask & (IN_DELETE | IN_MOVED_FROM):
                self._close()
            self._schedule()

    def _schedule(self) -> None:
        if not self._started:
            return
        loop = asyncio.get_running_loop()
        if not self._pending:
            self._pending = True
            loop.call_soon(self._scheduled)
        # SQLite commits in WAL mode by appending to the -wal file (which
        # inotify reports) and *then* publishing the commit in the mapped
        # -shm index (which it cannot): a read right after the event may
        # still see the previous commit.  So the last event of a burst is
        # followed by settling reads.
        for handle in self._settle:
            handle.cancel()
        self._settle = [loop.call_later(delay, self._scheduled) for delay in SETTLE]

    def _scheduled(self) -> None:
        self._pending = False
        if self._started:
            self._refresh()

    # -------------------------------------------------------------- database

    def _close(self) -> None:
        """Close the database, on the reading thread (after a read under way)."""
        _READER.submit(self._close_now)

    def _close_now(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _connection(self) -> sqlite3.Connection | None:
        if self._db is None:
            if not self.db_path.exists():
                return None
            try:
                self._db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True,
                                           timeout=1.0, isolation_level=None,
                                           check_same_thread=False)
            except sqlite3.Error as err:
                log.info("cannot open %s yet: %s", self.db_path, err)
                return None
        return self._db

    def _refresh(self) -> None:
        """Read the database on the reading thread, then recompute the state."""
        if self._reading is not None:
            self._read_again = True
        else:
            self._reading = asyncio.get_running_loop().create_task(
                self._read_off_loop(), name=f"hermes-read:{self.root_pid}")

    async def _read_off_loop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._read_again = False
                prompts = await loop.run_in_executor(_READER, self._read_now)
                if not self._started:
                    return
                if prompts is not None:
                    self._recompute(prompts)
                if not self._read_again:
                    return
        finally:
            self._reading = None

    def _read_now(self) -> int | None:
        """On the reading thread: the new prompts, or None if the read failed."""
        db = self._connection()
        if db is None:
            return 0
        self.reads += 1
        try:
            return self._read(db)
        except sqlite3.Error as err:
            # Not written completely yet (a fresh file), or locked for a moment.
            log.info("cannot read %s: %s", self.db_path, err)
            self._close_now()
            return None

    def _read(self, db: sqlite3.Connection) -> int:
        self._follow(db)
        if self.session_id is None:
            return 0
        prompts = 0
        rows = db.execute("SELECT id FROM messages WHERE session_id = ? AND role = 'user' "
                          "AND id > ? ORDER BY id", (self.session_id, self._last_user_row))
        for (row_id,) in rows.fetchall():
            self._last_user_row = row_id
            prompts += 1
        newest = db.execute("SELECT role, finish_reason FROM messages WHERE session_id = ? "
                            "AND active = 1 ORDER BY id DESC LIMIT 1",
                            (self.session_id,)).fetchone()
        self._last = (newest[0], newest[1]) if newest else None
        return prompts

    def _held_by_others(self) -> set[str]:
        return {w.session_id for w in list(HermesWatcher.live)
                if w is not self and w.session_id is not None}

    def _belongs_to_later(self, started: float) -> bool:
        """Whether a session started at STARTED belongs to a Hermes terminal of
        this folder launched after this one (and before the session)."""
        return any(w is not self and w.cwd == self.cwd and w.session_id is None
                   and self.launched_at < w.launched_at <= started + _SLACK
                   for w in list(HermesWatcher.live))

    def _follow(self, db: sqlite3.Connection) -> None:
        """Bind to this terminal's session, or move to its successor."""
        if self.session_id is not None:
            child = db.execute("SELECT id, started_at FROM sessions WHERE parent_session_id = ? "
                               "ORDER BY started_at DESC LIMIT 1", (self.session_id,)).fetchone()
            if child is not None:
                self._bind(child[0], child[1])  # context compression went on in a child
                return
            row = db.execute("SELECT end_reason, ended_at FROM sessions WHERE id = ?",
                             (self.session_id,)).fetchone()
            if row is not None and row[0] != "new_session":
                return  # still the current session (or Hermes exited): keep it
            after = self._session_started
            ended = row[1] if row is not None else None
        else:
            if self.resumed_session is not None:
                row = db.execute("SELECT started_at FROM sessions WHERE id = ?",
                                 (self.resumed_session,)).fetchone()
                if row is not None:
                    self._bind(self.resumed_session, row[0])
                    return
            after = self.launched_at - _SLACK
            ended = None
        held = self._held_by_others()
        rows = db.execute("SELECT id, started_at, cwd FROM sessions WHERE started_at >= ? "
                          "AND ended_at IS NULL AND parent_session_id IS NULL "
                          "ORDER BY started_at", (after,)).fetchall()
        for session_id, started_at, cwd in rows:
            if session_id == self.session_id or session_id in held:
                continue
            # Hermes 0.19.0 writes the session `/new` starts without a cwd, at
            # the moment it ends the old one: that moment is the link.
            successor = not cwd and ended is not None and abs(started_at - ended) <= _SLACK
            if not successor and (not cwd or os.path.realpath(cwd) != self.cwd):
                continue
            started = session_time(session_id) or started_at
            if started < self.launched_at - _SLACK or self._belongs_to_later(started):
                continue
            self._bind(session_id, started_at)
            return

    def _bind(self, session_id: str, started_at: float) -> None:
        log.info("hermes terminal %d follows session %s", self.root_pid, session_id)
        self.session_id = session_id
        self._session_started = started_at
        self._last_user_row = 0
        self._last = None

    def _recompute(self, prompts: int = 0) -> None:
        if self.session_id is None:
            activity = AgentActivity.UNKNOWN
        elif self._last is None:
            # A session row without messages is the one `/new` just started:
            # Hermes waits at its prompt.
            activity = AgentActivity.IDLE
        elif is_idle(*self._last):
            activity = AgentActivity.IDLE
        else:
            activity = AgentActivity.BUSY
        self._update(activity, None, prompts)


def hermes_watcher(inotify: Inotify, *, home: Path, pid: int, cwd: Path,
                   session_id: str | None, resumed: bool = False) -> HermesWatcher:
    """The watcher of the Hermes whose terminal process is PID, in CWD.

    HOME is the user's home; `$HERMES_HOME` in the sidecar's environment
    takes precedence.  RESUMED: Hermes was told to resume the session
    SESSION_ID."""
    return HermesWatcher(inotify, hermes_home_for(home, dict(os.environ)), pid, cwd,
                         resumed_session=session_id if resumed else None)
