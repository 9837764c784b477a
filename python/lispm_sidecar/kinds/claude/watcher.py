"""Claude Code's activity, from its session status file and its transcript.

Claude Code 2.1.197 keeps, per running CLI, `<home>/sessions/<pid>.json`
(`status` ∈ busy|idle|waiting|shell, `waitingFor`, `sessionId`,
`procStart`), rewritten in place at each change, and appends its
transcript `<home>/projects/<escaped cwd>/<sessionId>.jsonl` in batches
about 100 ms after the status changes.  The agent is waiting for its user
(IDLE) only when the status is `idle` *and* the transcript's last
non-metadata entry ends a turn; `waiting` is an approval prompt or a dialog.

Once the status has gone `busy`, IDLE also waits until a turn end written
after that has been read (so a quick turn's prompt is counted before its
IDLE is reported).  A status that has stayed `idle` for
`TURN_RECORD_GRACE` seconds is IDLE whatever the transcript's last line:
a busy spell that wrote no turn end, or Claude re-appending older entries
of the conversation after its turn ended (seen when its MCP server
restarted).

`/clear` (and `/resume`) switch the pid file to another `sessionId`; the
watcher follows it to that session's transcript.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ...watchers.base import (
    AgentActivity,
    TokenUsage,
    Watcher,
    count,
    proc_start_time,
    process_tree,
)
from ...watchers.inotify import (
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    DirWatch,
    Inotify,
)
from ...watchers.tail import JsonlTail
from .ide_lock import claude_config_dir

#: Assistant stop reasons that end a turn (`tool_use` does not).
TURN_END_STOP_REASONS = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})
#: System entries that end a turn: the interactive turn summary, and a local
#: slash command's output (`/clear`, `/context`, a dismissed `/status`…),
#: after which the CLI is back at its composer.  Other system entries
#: (api_error, compact_boundary, informational…) are treated as metadata.
TURN_END_SUBTYPES = frozenset({"turn_duration", "local_command"})
INTERRUPT_PREFIX = "[Request interrupted by user"
#: User entries with these prefixes are commands or their output, not prompts.
NOT_PROMPT_PREFIXES = ("<command-name>", "<command-message>", "<local-command-",
                       "<bash-input>", "<bash-stdout>", "<bash-stderr>",
                       "<system-reminder>", INTERRUPT_PREFIX)
#: A line can only be a user, assistant or system entry if it holds one of
#: these (JSON.stringify writes no spaces); others are skipped unparsed.
_CANDIDATES = (b'"type":"user"', b'"type":"assistant"', b'"type":"system"')
_EVENTS = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM
_PID_FILE_MAX = 1024 * 1024
#: The messages whose usage is remembered, to count each once (the newest).
USAGE_MESSAGES = 1024
#: After the status went busy, IDLE waits for a turn end written *after*
#: that, or for the status to have stayed idle this long (a busy spell that
#: wrote nothing to the transcript).
TURN_RECORD_GRACE = 1.0


@dataclass(frozen=True, slots=True)
class ClaudeEntry:
    """A transcript entry that is not metadata."""

    kind: str          # "user", "assistant:<stop_reason>", "system:<subtype>"
    turn_end: bool     # the CLI is back at its composer after this entry
    prompt: bool       # a user prompt (typed, pasted or queued)


def parse_claude_line(line: bytes) -> ClaudeEntry | None:
    """Classify one transcript line; None for metadata (or a bad line)."""
    if not any(marker in line for marker in _CANDIDATES):
        return None
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entry, dict) or entry.get("isSidechain") is True:
        return None
    kind = entry.get("type")
    if kind == "system":
        subtype = entry.get("subtype")
        if subtype in TURN_END_SUBTYPES:
            return ClaudeEntry(f"system:{subtype}", turn_end=True, prompt=False)
        return None
    message = entry.get("message")
    if not isinstance(message, dict):
        return None
    if kind == "assistant":
        stop = message.get("stop_reason")
        return ClaudeEntry(f"assistant:{stop}", turn_end=stop in TURN_END_STOP_REASONS,
                           prompt=False)
    if kind != "user" or entry.get("isMeta") or entry.get("isCompactSummary") \
            or entry.get("isVisibleInTranscriptOnly"):
        return None
    texts, other = _user_content(message.get("content"))
    if any(t.startswith(INTERRUPT_PREFIX) for t in texts):
        return ClaudeEntry("user:interrupted", turn_end=True, prompt=False)
    prompt = other or any(t.strip() and not t.lstrip().startswith(NOT_PROMPT_PREFIXES)
                          for t in texts)
    return ClaudeEntry("user:prompt" if prompt else "user", turn_end=False, prompt=prompt)


def claude_usage(line: bytes) -> tuple[str, TokenUsage] | None:
    """The id and usage of the model message an assistant LINE is part of, or None.

    Claude Code writes a line for each block of a message, each with the
    message's usage as it then stood: the last line of a message says."""
    if b'"usage"' not in line or b'"type":"assistant"' not in line:
        return None
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    message = entry.get("message") if isinstance(entry, dict) else None
    if not isinstance(message, dict) or entry.get("type") != "assistant":
        return None
    usage = message.get("usage")
    if not isinstance(usage, dict) or not isinstance(message.get("id"), str):
        return None
    read = count(usage.get("cache_read_input_tokens"))
    return message["id"], TokenUsage(
        count(usage.get("input_tokens")) + read + count(usage.get("cache_creation_input_tokens")),
        read, count(usage.get("output_tokens")))


def _user_content(content: Any) -> tuple[list[str], bool]:
    """The text parts of a user message, and whether it holds other user
    input (an image or document); tool results count as neither."""
    if isinstance(content, str):
        return [content], False
    texts: list[str] = []
    other = False
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif btype in ("image", "document"):
                other = True
    return texts, other


def _is_entry(line: bytes) -> bool:
    return parse_claude_line(line) is not None


def project_dir_name(cwd: str) -> str:
    """The folder name Claude Code gives the transcripts of CWD: every UTF-16
    code unit other than [A-Za-z0-9] becomes "-"; a result longer than 200
    characters is cut to 200 and gets "-" plus the base-36 absolute value of
    the Java string hash of CWD."""
    encoded = cwd.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(encoded[i:i + 2], "little") for i in range(0, len(encoded), 2)]
    name = "".join(chr(u) if chr(u).isascii() and chr(u).isalnum() else "-" for u in units)
    if len(name) <= 200:
        return name
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return f"{name[:200]}-{_base36(abs(h))}"


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


class ClaudeWatcher(Watcher):
    """The activity of the Claude Code CLI running as PID in CWD.

    SESSION_ID is the `--session-id` LispM launched it with (None: learn it
    from the pid file).  PID is the native `claude` process or an ancestor
    of it (the watcher then adopts the descendant that writes a pid file)."""

    kind = "claude"

    def __init__(self, inotify: Inotify, claude_home: Path, pid: int,
                 session_id: str | None, cwd: Path) -> None:
        super().__init__()
        self.inotify = inotify
        self.claude_home = Path(claude_home)
        self.pid = pid
        self.cwd = Path(os.path.realpath(os.path.expanduser(cwd)))
        self.claude_pid = pid
        self.session_id = session_id
        self.status: str | None = None
        self.transcript_dir = self.claude_home / "projects" / project_dir_name(str(self.cwd))
        self._pid_raw: bytes | None = None
        self._pid_info: dict[str, Any] | None = None
        self._pid_stale = False
        self._bound: str | None = None
        self._tail: JsonlTail | None = None
        self._fresh = True
        self._has_transcript = False
        self._last: ClaudeEntry | None = None
        #: The usage each model message last said, by its id (see `claude_usage`).
        self._usage_of: dict[str, TokenUsage] = {}
        self._sessions: DirWatch | None = None
        self._transcript_watch: DirWatch | None = None
        self._unsubscribe_overflow: Any = None
        self._more_pending = False
        self._started = False
        # The status went busy and no turn end has been read since.
        self._turn_open = False
        self._grace: asyncio.TimerHandle | None = None
        #: The status has stayed `idle` for `TURN_RECORD_GRACE` seconds.
        self._settled = False

    # ------------------------------------------------------------ lifecycle

    @property
    def pid_file(self) -> Path:
        """The session status file being followed."""
        return self.claude_home / "sessions" / f"{self.claude_pid}.json"

    @property
    def transcript(self) -> Path | None:
        """The transcript being followed (it may not exist yet)."""
        return self._tail.path if self._tail is not None else None

    @property
    def cli_session(self) -> str | None:
        """The session followed, once its transcript exists (`--resume` needs one)."""
        return (self._bound or self.session_id) if self._has_transcript else None

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._unsubscribe_overflow = self.inotify.on_overflow(self._resync)
        if self.session_id is not None:
            self._bind(self.session_id)
        self._sessions = DirWatch(self.inotify, self.claude_home / "sessions", _EVENTS,
                                  self._sessions_event, on_ready=self._sessions_ready)
        self._sessions.start()
        self._recompute()

    async def stop(self) -> None:
        self._started = False
        self._cancel_grace()
        if self._unsubscribe_overflow is not None:
            self._unsubscribe_overflow()
            self._unsubscribe_overflow = None
        for watch in (self._sessions, self._transcript_watch):
            if watch is not None:
                watch.cancel()
        self._sessions = self._transcript_watch = None
        if self._tail is not None:
            self._tail.close()

    def describe(self) -> dict[str, Any]:
        return {
            **self._state(),
            "pid": self.pid,
            "claude_pid": self.claude_pid,
            "claude_home": str(self.claude_home),
            "cwd": str(self.cwd),
            "session_id": self._bound or self.session_id,
            "pid_file": str(self.pid_file),
            "pid_file_stale": self._pid_stale,
            "status": self.status,
            "transcript": str(self.transcript) if self.transcript else None,
            "transcript_exists": self._has_transcript,
            "last_entry": self._last.kind if self._last else None,
            "turn_open": self._turn_open,
            "transcript_offset": self._tail.offset if self._tail is not None else None,
        }

    def _resync(self) -> None:
        """Re-read everything (after an inotify queue overflow)."""
        self._pid_raw = None
        for watch in (self._sessions, self._transcript_watch):
            if watch is not None:
                watch.rescan()

    # ------------------------------------------------------------- pid file

    def _sessions_ready(self) -> None:
        if not self.pid_file.exists():
            self._adopt_descendant()
        self._reload_pid_file()

    def _sessions_event(self, name: str, mask: int) -> None:
        ours = name == self.pid_file.name
        if not ours and self._pid_info is None and name.endswith(".json") \
                and mask & (IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE):
            # Not known yet: is it the pid file of a descendant of PID?
            ours = not self.pid_file.exists() and self._adopt_descendant()
        if ours:
            self._reload_pid_file()

    def _adopt_descendant(self) -> bool:
        """Follow the pid file of a descendant of PID, when PID has none."""
        sessions = self.claude_home / "sessions"
        for candidate in process_tree(self.pid)[1:]:
            if (sessions / f"{candidate}.json").exists():
                self.claude_pid = candidate
                return True
        return False

    def _reload_pid_file(self) -> None:
        try:
            with open(self.pid_file, "rb") as f:
                raw: bytes | None = f.read(_PID_FILE_MAX)
        except (FileNotFoundError, NotADirectoryError):
            raw = None
        if raw is not None and raw == self._pid_raw:
            return
        self._pid_raw = raw
        if raw is None:
            self._pid_info = None
            self.status = None
            self._pid_stale = False
            self._recompute()
            return
        try:
            info = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return  # caught mid-rewrite: the next event brings the rest
        if not isinstance(info, dict):
            return
        started = proc_start_time(self.claude_pid)
        recorded = info.get("procStart")
        fresh = started is not None and (recorded is None or str(recorded) == str(started))
        self._pid_stale = not fresh
        self._pid_info = info if fresh else None
        status = info.get("status") if fresh else None
        self.status = status if isinstance(status, str) else None
        if self.status == "idle":
            if self._grace is None and not self._settled:
                self._grace = asyncio.get_running_loop().call_later(
                    TURN_RECORD_GRACE, self._grace_over)
        else:
            self._settled = False
            self._cancel_grace()
            if self.status == "busy":
                self._turn_open = True
        session = info.get("sessionId") if fresh else None
        if isinstance(session, str) and session and session != self._bound:
            self._bind(session)
        self._recompute()

    # ----------------------------------------------------------- transcript

    def _bind(self, session_id: str) -> None:
        """Follow the transcript of SESSION_ID (it may not exist yet)."""
        if session_id == self._bound:
            return
        old_watch, old_tail = self._transcript_watch, self._tail
        self._bound = session_id
        self._tail = JsonlTail(self.transcript_dir / f"{session_id}.jsonl")
        # A transcript that is already there (a sidecar restart, /resume) is
        # read from its end; one that appears later is read whole.
        self._fresh = not self._tail.path.exists()
        self._has_transcript = False
        self._last = None
        self._transcript_watch = DirWatch(self.inotify, self.transcript_dir, _EVENTS,
                                          self._transcript_event,
                                          on_ready=self._read_transcript)
        self._transcript_watch.start()
        if old_watch is not None:
            old_watch.cancel()
        if old_tail is not None:
            old_tail.close()

    def _transcript_event(self, name: str, mask: int) -> None:
        if self._tail is not None and name == self._tail.path.name:
            self._read_transcript()

    def _read_transcript(self) -> None:
        tail = self._tail
        if tail is None:
            return
        if not self._fresh and not tail.is_open:
            line = tail.scan_back(_is_entry)
            self._fresh = True
            if tail.is_open:
                self._has_transcript = True
                self._last = parse_claude_line(line) if line is not None else None
        result = tail.read()
        if result.missing:
            if self._has_transcript:
                tail.close()
                self._has_transcript = False
                self._last = None
            self._recompute()
            return
        if result.reset:
            self._last = None
        self._has_transcript = True
        prompts = 0
        for line in result.lines:
            entry = parse_claude_line(line)
            if entry is not None:
                self._last = entry
                if entry.turn_end:
                    self._turn_open = False
                prompts += entry.prompt
            if (usage := claude_usage(line)) is not None:
                self._count_usage(*usage)
        if result.more and not self._more_pending:
            self._more_pending = True
            asyncio.get_running_loop().call_soon(self._read_more)
        self._recompute(prompts)

    def _read_more(self) -> None:
        self._more_pending = False
        if self._started:
            self._read_transcript()

    def _count_usage(self, message: str, usage: TokenUsage) -> None:
        """Count USAGE as the usage of MESSAGE, replacing what it said before."""
        before = self._usage_of.pop(message, TokenUsage())
        self._usage_of[message] = usage
        while len(self._usage_of) > USAGE_MESSAGES:
            self._usage_of.pop(next(iter(self._usage_of)))
        self._set_usage((self.usage or TokenUsage()) - before + usage)

    def _cancel_grace(self) -> None:
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def _grace_over(self) -> None:
        self._grace = None
        if self._started and self.status == "idle":
            self._settled = True
            self._turn_open = False
            self._recompute()

    # ----------------------------------------------------------------- rule

    def _recompute(self, prompts: int = 0) -> None:
        info = self._pid_info
        waiting_for = None
        if info is None:
            activity = AgentActivity.UNKNOWN
        elif self.status == "waiting":
            activity = AgentActivity.WAITING_FOR_APPROVAL
            value = info.get("waitingFor")
            waiting_for = value if isinstance(value, str) else None
        elif self.status in ("busy", "shell"):
            activity = AgentActivity.BUSY
        elif self.status == "idle":
            if not self._has_transcript:
                activity = AgentActivity.UNKNOWN  # just opened: no transcript yet
            elif self._settled or (
                    self._last is not None and self._last.turn_end and not self._turn_open):
                activity = AgentActivity.IDLE
            else:
                activity = AgentActivity.BUSY  # the transcript lags the status
        else:
            activity = AgentActivity.UNKNOWN
        self._update(activity, waiting_for, prompts)


def claude_watcher(inotify: Inotify, *, home: Path, pid: int, cwd: Path,
                   session_id: str | None, resumed: bool = False) -> ClaudeWatcher:
    """The watcher of the Claude Code running as PID (or under it) in CWD.

    HOME is the user's home; `$CLAUDE_CONFIG_DIR` in the sidecar's
    environment takes precedence.  SESSION_ID is the `--session-id` Claude
    was started with, or, RESUMED, the session it was told to resume:
    followed either way."""
    return ClaudeWatcher(inotify, claude_config_dir(home, os.environ), pid, session_id, cwd)
