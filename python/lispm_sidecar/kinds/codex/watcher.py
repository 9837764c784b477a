"""Codex's activity, from its rollout file.

Codex 0.171.0 appends each thread's events to
`<home>/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`
(local-time folders, created lazily at the thread's first prompt), and the
process that runs the thread (with `--no-daemon`, the TUI's native binary,
a child of the Node shim) keeps that file open.  A terminal is bound to the
rollout that one of its processes holds open, so two Codex terminals in
one folder never mix up their files.  The open files are looked at only
when a rollout appears (or is written) that the watcher has not classified
yet: no polling.  A new rollout held by the same terminal whose
`session_meta` is a user thread (after `/new`) takes over the binding.

Idle ⇔ the last lifecycle `event_msg` (task_started / task_complete /
turn_aborted) is task_complete or turn_aborted.  The rollout cannot tell
an approval prompt from a running tool: both are BUSY.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...watchers.base import (
    AgentActivity,
    TokenUsage,
    Watcher,
    count,
    open_files,
    process_tree,
)
from ...watchers.inotify import (
    IN_CREATE,
    IN_DELETE,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    Inotify,
    TreeWatch,
)
from ...watchers.tail import JsonlTail

LIFECYCLE = frozenset({"task_started", "task_complete", "turn_aborted"})
IDLE_EVENTS = frozenset({"task_complete", "turn_aborted"})
ROLLOUT_NAME = re.compile(r"^rollout-.*\.jsonl$")
_LIFECYCLE_MARKERS = (b'"task_started"', b'"task_complete"', b'"turn_aborted"')
_FIRST_LINE_MAX = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CodexEntry:
    """A rollout entry that matters: a lifecycle event or a user prompt."""

    lifecycle: str | None   # task_started / task_complete / turn_aborted
    prompt: bool


def parse_codex_line(line: bytes) -> CodexEntry | None:
    """Classify one rollout line; None for everything else.

    A prompt is an `event_msg` `item_completed` whose item is a
    `UserMessage` (what 0.171.0 writes once per typed, pasted or steering
    message; never for injected context or the `<turn_aborted>` note)."""
    if b'"event_msg"' not in line:
        return None
    lifecycle = any(m in line for m in _LIFECYCLE_MARKERS)
    if not lifecycle and b'"UserMessage"' not in line:
        return None
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or entry.get("type") != "event_msg":
        return None
    payload = entry.get("payload")
    if not isinstance(payload, dict):
        return None
    ptype = payload.get("type")
    if ptype in LIFECYCLE:
        return CodexEntry(lifecycle=str(ptype), prompt=False)
    if ptype == "item_completed":
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "UserMessage":
            return CodexEntry(lifecycle=None, prompt=True)
    return None


def codex_usage(line: bytes) -> TokenUsage | None:
    """The thread's usage so far, if LINE is a `token_count` event that says it.

    Its `info.total_token_usage` counts the whole thread: `input_tokens`
    (`cached_input_tokens` among them), `output_tokens`
    (`reasoning_output_tokens` among them)."""
    if b'"token_count"' not in line:
        return None
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    payload = entry.get("payload") if isinstance(entry, dict) else None
    if not isinstance(payload, dict) or payload.get("type") != "token_count":
        return None
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None
    return TokenUsage(count(total.get("input_tokens")), count(total.get("cached_input_tokens")),
                      count(total.get("output_tokens")),
                      count(total.get("reasoning_output_tokens")))


def _is_lifecycle(line: bytes) -> bool:
    entry = parse_codex_line(line)
    return entry is not None and entry.lifecycle is not None


def is_user_thread(session_meta: bytes) -> bool | None:
    """From a rollout's first line: True for a user's own thread (not a
    sub-agent's); None if the line is not a session_meta."""
    try:
        entry = orjson.loads(session_meta)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or entry.get("type") != "session_meta":
        return None
    payload = entry.get("payload")
    if not isinstance(payload, dict):
        return None
    thread_source = payload.get("thread_source")
    return (thread_source in (None, "user")
            and not isinstance(payload.get("source"), dict))


def _first_line(path: Path) -> bytes | None:
    """The first complete line of PATH, or None (not written yet)."""
    try:
        with open(path, "rb") as f:
            data = f.read(64 * 1024)
            while b"\n" not in data and len(data) < _FIRST_LINE_MAX:
                more = f.read(256 * 1024)
                if not more:
                    break
                data += more
    except (FileNotFoundError, NotADirectoryError):
        return None
    end = data.find(b"\n")
    return data[:end] if end >= 0 else None


def codex_home_for(home: Path, environ: dict[str, str] | None = None) -> Path:
    """`$CODEX_HOME` if set, else HOME/.codex."""
    env = os.environ if environ is None else environ
    value = env.get("CODEX_HOME")
    return Path(value) if value else home / ".codex"


# How a rollout path was classified.
_FOREIGN = "foreign"       # held by no process of this terminal
_PENDING = "pending"       # ours, its session_meta not written yet
_MAIN = "main"             # ours, a user thread
_SUB = "sub"               # ours, a sub-agent's thread


class CodexWatcher(Watcher):
    """The activity of the Codex CLI whose terminal process is ROOT_PID."""

    kind = "codex"

    def __init__(self, inotify: Inotify, codex_home: Path, root_pid: int, cwd: Path,
                 resumed_thread: str | None = None) -> None:
        super().__init__()
        #: The thread `codex resume` was given: its rollout is bound by id at
        #: start, and a turn it left open ended with the earlier process.
        self.resumed_thread = resumed_thread
        self.inotify = inotify
        self.codex_home = Path(codex_home)
        self.root_pid = root_pid
        self.cwd = Path(os.path.realpath(os.path.expanduser(cwd)))
        self.sessions = Path(os.path.realpath(self.codex_home / "sessions"))
        self._classes: dict[Path, str] = {}
        self._tail: JsonlTail | None = None
        self._last: str | None = None
        self._tree: TreeWatch | None = None
        self._held_cache: set[str] | None = None
        self._unsubscribe_overflow: Any = None
        self._more_pending = False
        self._started = False
        #: How many times the open files of the terminal's processes were read.
        self.fd_scans = 0

    @property
    def rollout(self) -> Path | None:
        """The rollout bound to, or None before the first prompt."""
        return self._tail.path if self._tail is not None else None

    @property
    def cli_session(self) -> str | None:
        """The thread id of the rollout followed (`codex resume` takes it)."""
        return self._thread_id()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._unsubscribe_overflow = self.inotify.on_overflow(self._resync)
        # A rollout this terminal already holds (a sidecar restart) is read
        # from its end; the tree scan below then finds nothing new.
        self._bind_existing()
        if self._tail is None and self.resumed_thread is not None:
            self._bind_resumed(self.resumed_thread)
        self._tree = TreeWatch(self.inotify, self.sessions, 3, self._file_event)
        self._tree.start()
        self._recompute()

    async def stop(self) -> None:
        self._started = False
        if self._unsubscribe_overflow is not None:
            self._unsubscribe_overflow()
            self._unsubscribe_overflow = None
        if self._tree is not None:
            self._tree.cancel()
            self._tree = None
        if self._tail is not None:
            self._tail.close()

    def describe(self) -> dict[str, Any]:
        return {
            **self._state(),
            "root_pid": self.root_pid,
            "codex_home": str(self.codex_home),
            "cwd": str(self.cwd),
            "rollout": str(self.rollout) if self.rollout else None,
            "thread_id": self._thread_id(),
            "last_lifecycle": self._last,
            "rollout_offset": self._tail.offset if self._tail is not None else None,
            "fd_scans": self.fd_scans,
        }

    def _thread_id(self) -> str | None:
        if self.rollout is None:
            return None
        match = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$",
                          self.rollout.name)
        return match.group(1) if match else None

    def _resync(self) -> None:
        if self._tree is not None:
            self._tree.rescan()
        if self._tail is not None:
            self._read_rollout()

    # -------------------------------------------------------------- binding

    def _held(self) -> set[str]:
        """Rollout paths the terminal's processes hold open.  Computed once
        per loop iteration, however many files one batch of events names."""
        if self._held_cache is not None:
            return self._held_cache
        self.fd_scans += 1
        held: set[str] = set()
        prefix = str(self.sessions) + os.sep
        for pid in process_tree(self.root_pid):
            for target in open_files(pid):
                if target.startswith(prefix) and target.endswith(".jsonl"):
                    held.add(target)
        self._held_cache = held
        asyncio.get_running_loop().call_soon(self._forget_held)
        return held

    def _forget_held(self) -> None:
        self._held_cache = None

    def _is_held(self, path: Path) -> bool:
        return os.path.realpath(path) in self._held()

    def _bind_existing(self) -> None:
        """Bind to the newest user-thread rollout the terminal holds, if any."""
        candidates = []
        for target in self._held():
            path = Path(target)
            if not ROLLOUT_NAME.match(path.name):
                continue
            line = _first_line(path)
            user = is_user_thread(line) if line is not None else None
            if user is None:
                continue
            self._classes[path] = _MAIN if user else _SUB
            if user:
                try:
                    candidates.append((path.stat().st_mtime_ns, path))
                except FileNotFoundError:
                    continue
        if candidates:
            self._bind(max(candidates)[1], fresh=False)

    def _bind_resumed(self, thread: str) -> None:
        """Bind to the rollout of THREAD, which this terminal resumes."""
        found = sorted(self.sessions.glob(f"*/*/*/rollout-*-{thread}.jsonl"))
        if found:
            self._classes[found[-1]] = _MAIN
            self._bind(found[-1], fresh=False)

    def _bind(self, path: Path, *, fresh: bool) -> None:
        """Follow PATH: FRESH reads it whole (a new rollout); otherwise only
        its last lifecycle event is looked up, from the end."""
        if self._tail is not None:
            self._tail.close()
        self._tail = JsonlTail(path)
        self._last = None
        if not fresh:
            line = self._tail.scan_back(_is_lifecycle)
            entry = parse_codex_line(line) if line is not None else None
            self._last = entry.lifecycle if entry is not None else None
            if self._last not in IDLE_EVENTS and self._thread_id() == self.resumed_thread:
                # The earlier Codex died in that turn: the resumed one waits.
                self._last = "turn_aborted"
        self._read_rollout()

    def _unbind(self) -> None:
        if self._tail is not None:
            self._tail.close()
        self._tail = None
        self._last = None
        self._recompute()

    def _file_event(self, path: Path, mask: int) -> None:
        if not ROLLOUT_NAME.match(path.name):
            return
        if self._tail is not None and path == self._tail.path:
            if mask & (IN_DELETE | IN_MOVED_FROM) and not path.exists():
                self._classes.pop(path, None)
                self._unbind()
                self._bind_existing()
            else:
                self._read_rollout()
            return
        if mask & (IN_DELETE | IN_MOVED_FROM):
            self._classes.pop(path, None)
            return
        if not mask & (IN_CREATE | IN_MODIFY | IN_MOVED_TO):
            return  # a close: nothing was written
        cls = self._classes.get(path)
        if cls is None:
            if self._is_held(path):
                cls = self._classes[path] = _PENDING
            elif mask & IN_MODIFY:
                # Written, so its writer's fd was installed: not ours.  (On
                # IN_CREATE alone the creator's open() may not have returned.)
                cls = self._classes[path] = _FOREIGN
            else:
                return
        if cls == _PENDING:
            line = _first_line(path)
            if line is None:
                return  # its session_meta is not complete yet
            cls = _MAIN if is_user_thread(line) else _SUB
            self._classes[path] = cls
            if cls == _MAIN:
                self._bind(path, fresh=True)  # a new thread: the first prompt, or /new
        elif cls == _MAIN and mask & IN_MODIFY:
            self._bind(path, fresh=False)  # an older thread of ours is written again

    # -------------------------------------------------------------- reading

    def _read_rollout(self) -> None:
        tail = self._tail
        if tail is None:
            return
        result = tail.read()
        if result.missing:
            self._recompute()
            return
        if result.reset:
            self._last = None
        prompts = 0
        for line in result.lines:
            if (usage := codex_usage(line)) is not None:
                self._set_usage(usage)
            entry = parse_codex_line(line)
            if entry is None:
                continue
            if entry.lifecycle is not None:
                self._last = entry.lifecycle
            prompts += entry.prompt
        if result.more and not self._more_pending:
            self._more_pending = True
            asyncio.get_running_loop().call_soon(self._read_more)
        self._recompute(prompts)

    def _read_more(self) -> None:
        self._more_pending = False
        if self._started:
            self._read_rollout()

    def _recompute(self, prompts: int = 0) -> None:
        if self._tail is None:
            activity = AgentActivity.UNKNOWN  # no rollout before the first prompt
        elif self._last in IDLE_EVENTS:
            activity = AgentActivity.IDLE
        else:
            activity = AgentActivity.BUSY  # a turn runs (or an approval prompt shows)
        self._update(activity, None, prompts)


def codex_watcher(inotify: Inotify, *, home: Path, pid: int, cwd: Path,
                  session_id: str | None, resumed: bool = False) -> CodexWatcher:
    """The watcher of the Codex whose terminal process is PID, in CWD.

    HOME is the user's home; `$CODEX_HOME` in the sidecar's environment
    takes precedence.  RESUMED: Codex was told to resume the thread
    SESSION_ID."""
    return CodexWatcher(inotify, codex_home_for(home, dict(os.environ)), pid, cwd,
                        resumed_thread=session_id if resumed else None)
