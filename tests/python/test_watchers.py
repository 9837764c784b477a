"""The agent watchers: inotify, the JSONL tailer, Claude Code and Codex.

Unit tests replay real transcript and rollout lines (recorded from Claude
Code 2.1.197 and Codex 0.171.0 on the scripted gateway, and the reference
notes' abbreviated lines) into files the watchers follow.  The end-to-end
tests at the bottom run the real CLIs in tmux, offline, and check what the
watchers say at each moment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from lispm_sidecar.kinds.claude.watcher import (
    ClaudeWatcher,
    claude_usage,
    claude_watcher,
    parse_claude_line,
    project_dir_name,
)
from lispm_sidecar.kinds.codex.watcher import (
    CodexWatcher,
    codex_usage,
    codex_watcher,
    is_user_thread,
    parse_codex_line,
)
from lispm_sidecar.kinds.hermes.watcher import HermesWatcher, hermes_watcher
from lispm_sidecar.testing.sandbox import seed_home
from lispm_sidecar.watchers import AgentActivity, Inotify, Watcher
from lispm_sidecar.watchers import inotify as ino
from lispm_sidecar.watchers import tail as tail_module
from lispm_sidecar.watchers.base import TokenUsage, open_files, proc_start_time, process_tree
from lispm_sidecar.watchers.inotify import DirWatch, InotifyEvent, parse_events
from lispm_sidecar.watchers.tail import JsonlTail

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
IDLE, BUSY, UNKNOWN = AgentActivity.IDLE, AgentActivity.BUSY, AgentActivity.UNKNOWN
WAITING = AgentActivity.WAITING_FOR_APPROVAL


def lines_of(name: str) -> list[bytes]:
    return (FIXTURES / name).read_bytes().splitlines()


def joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


async def until(predicate: Callable[[], bool], what: str, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:g} s waiting for {what}")
        await asyncio.sleep(0.005)


async def handled(inotify: Inotify, events: int) -> None:
    """Wait until INOTIFY has read and dispatched the events that followed the
    first EVENTS (writes made before this are queued in the kernel already,
    and one read takes them all), and the work its callbacks scheduled ran."""
    await until(lambda: inotify.events_read > events, "inotify events")
    await asyncio.sleep(0)  # after what the callbacks left for the loop's next turn


def append(path: Path, data: bytes) -> None:
    """One write() of DATA at the end of PATH, as the CLIs do it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture
async def inotify() -> AsyncIterator[Inotify]:
    instance = Inotify()
    yield instance
    instance.close()


# ====================================================================== inotify

def test_parse_events_reads_several_events_with_names() -> None:
    def raw(wd: int, mask: int, name: bytes, pad: int) -> bytes:
        body = name + b"\0" * pad
        return ino._HEADER.pack(wd, mask, 0, len(body)) + body

    buffer = (raw(1, ino.IN_CREATE, b"a.jsonl", 9) + raw(2, ino.IN_MODIFY, b"", 0)
              + raw(1, ino.IN_CREATE | ino.IN_ISDIR, "dé".encode(), 13))
    events = parse_events(buffer)
    assert [(e.wd, e.mask, e.name) for e in events] == [
        (1, ino.IN_CREATE, "a.jsonl"), (2, ino.IN_MODIFY, ""),
        (1, ino.IN_CREATE | ino.IN_ISDIR, "dé")]
    assert events[2].is_dir and not events[0].is_dir


async def test_inotify_dispatches_per_watch_and_shares_one_kernel_watch(
        inotify: Inotify, tmp_path: Path) -> None:
    seen_a: list[InotifyEvent] = []
    seen_b: list[InotifyEvent] = []
    a = inotify.add_watch(tmp_path, ino.IN_CREATE, seen_a.append)
    b = inotify.add_watch(tmp_path, ino.IN_MODIFY | ino.IN_CREATE, seen_b.append)
    assert a.wd == b.wd and inotify.watch_count == 1
    append(tmp_path / "one", b"x")
    await until(lambda: len(seen_b) >= 2, "create and modify")
    assert [e.name for e in seen_a] == ["one"]          # A asked for IN_CREATE only
    assert {e.mask & (ino.IN_CREATE | ino.IN_MODIFY) for e in seen_b} == {
        ino.IN_CREATE, ino.IN_MODIFY}
    a.cancel()
    append(tmp_path / "two", b"x")
    await until(lambda: any(e.name == "two" for e in seen_b), "B still watching")
    assert [e.name for e in seen_a] == ["one"]
    b.cancel()
    assert inotify.watch_count == 0


async def test_inotify_many_events_in_one_read(inotify: Inotify, tmp_path: Path) -> None:
    names: list[str] = []
    inotify.add_watch(tmp_path, ino.IN_CREATE, lambda e: names.append(e.name))
    loop = asyncio.get_running_loop()
    assert inotify.fd is not None
    loop.remove_reader(inotify.fd)          # let the kernel queue them up
    for i in range(300):
        (tmp_path / f"file-{i:03}-{'x' * (i % 40)}").touch()
    reads_before = inotify.events_read
    inotify._on_readable()                  # one readable callback drains them all
    loop.add_reader(inotify.fd, inotify._on_readable)
    assert inotify.events_read - reads_before == 300
    assert names == [f"file-{i:03}-{'x' * (i % 40)}" for i in range(300)]


async def test_inotify_overflow_tells_every_subscriber(inotify: Inotify) -> None:
    calls: list[str] = []
    unsubscribe = inotify.on_overflow(lambda: calls.append("a"))
    inotify.on_overflow(lambda: calls.append("b"))
    inotify.dispatch([InotifyEvent(-1, ino.IN_Q_OVERFLOW, 0, "")])
    assert calls == ["a", "b"] and inotify.overflows == 1
    unsubscribe()
    inotify.dispatch([InotifyEvent(-1, ino.IN_Q_OVERFLOW, 0, "")])
    assert calls == ["a", "b", "b"]


async def test_dirwatch_waits_for_a_missing_path_and_survives_its_removal(
        inotify: Inotify, tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    ready: list[int] = []
    events: list[str] = []
    watch = DirWatch(inotify, target, ino.IN_CREATE, lambda name, mask: events.append(name),
                     on_ready=lambda: ready.append(1))
    watch.start()
    assert not watch.ready and ready == []
    target.mkdir(parents=True)              # three levels at once
    await until(lambda: watch.ready, "the directory to be watched")
    assert ready == [1]
    (target / "f").touch()
    await until(lambda: events == ["f"], "an event inside")
    (target / "f").unlink()
    target.rmdir()
    await until(lambda: not watch.ready, "the removal")
    target.mkdir()
    await until(lambda: len(ready) == 2, "re-arming")
    watch.cancel()
    assert inotify.watch_count == 0


# ========================================================================= tail

def test_tail_split_line_batch_and_multibyte(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    tail = JsonlTail(path)
    assert tail.read().missing
    line = '{"type":"user","message":{"content":"dash — and ü"}}'.encode()
    cut = line.index("—".encode()) + 1          # inside the 3-byte dash
    append(path, line[:cut])
    first = tail.read()
    assert first.reset and first.lines == [] and tail.partial == line[:cut]
    append(path, line[cut:] + b"\n")
    assert tail.read().lines == [line]
    batch = [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    append(path, joined(batch) + b'{"n":4')
    assert tail.read().lines == batch
    append(path, b"}\n\n")
    assert tail.read().lines == [b'{"n":4}']
    assert tail.read().lines == []
    assert tail.offset == path.stat().st_size == tail.bytes_read


def test_tail_truncation_and_replacement_start_over(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append(path, b'{"a":1}\n{"a":2}\n')
    tail = JsonlTail(path)
    assert tail.read().lines == [b'{"a":1}', b'{"a":2}']
    with open(path, "r+b") as f:
        f.truncate(0)
    append(path, b'{"b":1}\n')
    result = tail.read()
    assert result.reset and result.lines == [b'{"b":1}']
    replacement = tmp_path / "new.jsonl"
    append(replacement, b'{"c":1}\n{"c":2}\n{"c":3}\n')
    os.replace(replacement, path)           # another inode, larger: still noticed
    result = tail.read()
    assert result.reset and result.lines == [b'{"c":1}', b'{"c":2}', b'{"c":3}']
    path.unlink()
    assert tail.read().missing


def test_tail_read_is_bounded_and_says_more(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append(path, joined([b'{"i":%d}' % i for i in range(1000)]))
    tail = JsonlTail(path, max_read=1000)
    got: list[bytes] = []
    rounds = 0
    while True:
        result = tail.read()
        got += result.lines
        rounds += 1
        if not result.more:
            break
    assert got == [b'{"i":%d}' % i for i in range(1000)] and rounds > 5


@pytest.mark.parametrize("block", [7, 64, 65536])
def test_tail_scan_back_finds_the_last_match_across_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(tail_module, "SCAN_BLOCK", block)
    path = tmp_path / "t.jsonl"
    body = [b'{"k":"hit","n":0}'] + [b'{"k":"miss","n":%d,"pad":"%s"}' % (i, b"x" * (i % 50))
                                     for i in range(1, 400)]
    body[250] = b'{"k":"hit","n":250}'
    append(path, joined(body) + b'{"k":"hit","unfinished')
    tail = JsonlTail(path)
    assert tail.scan_back(lambda line: b'"hit"' in line) == b'{"k":"hit","n":250}'
    assert tail.partial == b'{"k":"hit","unfinished'
    assert tail.read().lines == []
    append(path, b'"}\n{"k":"new"}\n')
    assert tail.read().lines == [b'{"k":"hit","unfinished"}', b'{"k":"new"}']
    # Only the first line matches: found at the very start of the file.
    tail2 = JsonlTail(path)
    assert tail2.scan_back(lambda line: b'"n":0' in line) == b'{"k":"hit","n":0}'
    assert JsonlTail(path).scan_back(lambda line: False) is None


def test_tail_attaching_to_a_large_file_reads_only_its_end(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = joined(lines_of("codex-rollout.jsonl")[2:13])
    with open(path, "wb") as f:
        for _ in range(8 * 1024 * 1024 // len(filler)):
            f.write(filler)
        f.write(joined(lines_of("codex-rollout.jsonl")[13:14]))
    tail = JsonlTail(path)
    found = tail.scan_back(lambda line: parse_codex_line(line) is not None)
    assert found is not None and b"task_complete" in found
    assert tail.bytes_read <= 2 * tail_module.SCAN_BLOCK
    before = tail.bytes_read
    new = lines_of("codex-rollout.jsonl")[15]
    append(path, new + b"\n")
    assert tail.read().lines == [new]
    assert tail.bytes_read - before == len(new) + 1     # only the appended bytes


# ============================================================ line classifiers

def test_claude_project_dir_name() -> None:
    # The reference's example, and the >200 characters rule, checked
    # against the real CLI: `claude -p` run in this folder wrote its
    # transcript under exactly the name below (UTF-16 code units: "ü" is
    # one "-", the emoji two; the hash is over the cwd, not the escaped name).
    assert project_dir_name("/srv/x/proj.x_y z") == "-srv-x-proj-x-y-z"
    long = "/tmp/wexp/" + "/".join(f"dir-with-ünïcode-😀-segment-{i:02}" for i in range(8))
    assert len(long) == 249
    assert project_dir_name(long) == (
        "-tmp-wexp-dir-with--n-code----segment-00-dir-with--n-code----segment-01-dir-with"
        "--n-code----segment-02-dir-with--n-code----segment-03-dir-with--n-code----segment"
        "-04-dir-with--n-code----segment-05-dir--5yri0h")
    exactly = "/" + "a" * 199
    assert project_dir_name(exactly) == "-" + "a" * 199          # 200: not cut
    assert project_dir_name(exactly + "b").startswith("-" + "a" * 199 + "-")


def test_claude_line_classes_from_real_and_reference_lines() -> None:
    kinds = [(e.kind, e.turn_end, e.prompt) if e else None
             for e in map(parse_claude_line, lines_of("claude-reference.jsonl"))]
    assert kinds == [
        None, None, None,                                   # mode, permission-mode, snapshot
        ("user:prompt", False, True), None, None,           # prompt, attachments
        ("assistant:tool_use", False, False),
        ("user", False, False),                             # tool_result only
        ("assistant:end_turn", True, False),
        ("system:turn_duration", True, False),
        None, None,                                         # queue-operation enqueue, dequeue
        ("user:prompt", False, True),                       # the queued prompt
        ("assistant:tool_use", False, False),               # text before a tool_use
        ("assistant:tool_use", False, False),
        ("user", False, False),                             # "User rejected tool use"
        ("user:interrupted", True, False),
        ("user:prompt", False, True),
        ("assistant:stop_sequence", True, False),           # partial reply after Esc
        ("user:interrupted", True, False),
        None, None]                                         # last-prompt, ai-title
    real = lines_of("claude-after-clear.jsonl")
    assert parse_claude_line(real[2]) is None                # local-command caveat (isMeta)
    command = parse_claude_line(real[3])                     # "<command-name>/clear"
    assert command is not None and not command.prompt and not command.turn_end
    clear_done = parse_claude_line(real[4])
    assert clear_done is not None and clear_done.kind == "system:local_command"
    assert parse_claude_line(real[26]) is None               # /context output (isMeta)
    prompts = sum(1 for line in lines_of("claude-interactive.jsonl") + real
                  if (e := parse_claude_line(line)) is not None and e.prompt)
    assert prompts == 3 + 3       # hello, slow, bashit; slow again, slow third, QUEUED line


def test_codex_line_classes_from_real_lines() -> None:
    lifecycle = [e.lifecycle for line in lines_of("codex-rollout.jsonl")
                 if (e := parse_codex_line(line)) is not None and e.lifecycle]
    assert lifecycle == ["task_started", "task_complete", "task_started", "task_complete",
                         "task_started", "turn_aborted", "task_started", "turn_aborted"]
    prompts = [i for i, line in enumerate(lines_of("codex-rollout.jsonl"))
               if (e := parse_codex_line(line)) is not None and e.prompt]
    assert prompts == [8, 18, 21, 31, 39]    # typed prompts and the steer; no context
    # Text that merely mentions an event is not one.
    assert [parse_codex_line(line) for line in lines_of("codex-reference.jsonl")[13:16]] \
        == [None, None, None]
    assert is_user_thread(lines_of("codex-rollout.jsonl")[0]) is True
    assert is_user_thread(lines_of("codex-rollout.jsonl")[1]) is None


# ===================================================================== Claude

SID = "0389e1c2-5b7a-4c1e-9d55-7f0a4f6e2b10"


class FakeClaude:
    """A Claude home whose files a test writes the way Claude Code does."""

    def __init__(self, root: Path, pid: int, cwd: Path) -> None:
        self.home = root / ".claude"
        self.pid = pid
        self.cwd = cwd
        self.projects = self.home / "projects" / project_dir_name(os.path.realpath(cwd))
        self.template = orjson.loads((FIXTURES / "claude-pid-idle.json").read_bytes())

    def transcript(self, session_id: str = SID) -> Path:
        return self.projects / f"{session_id}.jsonl"

    def status(self, status: str, session_id: str = SID, waiting_for: str | None = None,
               proc_start: int | None = None, pid: int | None = None) -> None:
        """Rewrite sessions/<pid>.json in place (no rename), as Claude does."""
        pid = self.pid if pid is None else pid
        started = proc_start if proc_start is not None else proc_start_time(pid)
        info = dict(self.template, pid=pid, sessionId=session_id, cwd=str(self.cwd),
                    procStart=str(started), status=status, updatedAt=int(time.time() * 1000))
        if waiting_for is not None:
            info["waitingFor"] = waiting_for
        path = self.home / "sessions" / f"{pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = orjson.dumps(info)
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)

    def write(self, data: bytes, session_id: str = SID) -> None:
        self.projects.mkdir(parents=True, exist_ok=True)
        append(self.transcript(session_id), data)

    def lines(self, lines: list[bytes], session_id: str = SID) -> None:
        self.write(joined(lines), session_id)


@pytest.fixture
def fake_claude(tmp_path: Path) -> FakeClaude:
    (tmp_path / "proj").mkdir()
    return FakeClaude(tmp_path, os.getpid(), tmp_path / "proj")


async def started_claude(inotify: Inotify, fake: FakeClaude,
                         session_id: str | None = SID, pid: int | None = None) -> ClaudeWatcher:
    watcher = ClaudeWatcher(inotify, fake.home, fake.pid if pid is None else pid,
                            session_id, fake.cwd)
    await watcher.start()
    return watcher


async def settled(watcher: Watcher, path: Path) -> None:
    """Wait until WATCHER has read PATH to its end."""
    key = "transcript_offset" if isinstance(watcher, ClaudeWatcher) else "rollout_offset"
    await until(lambda: path.exists() and watcher.describe()[key] == path.stat().st_size,
                f"{watcher.kind} to read {path.name}")


async def expect(watcher: Watcher, activity: AgentActivity, prompts: int | None = None,
                 what: str = "") -> None:
    await until(lambda: watcher.activity == activity
                and (prompts is None or watcher.prompts_seen == prompts),
                f"{watcher.kind} {activity} prompts={prompts} {what} "
                f"(now {watcher.activity}, {watcher.prompts_seen}: {watcher.describe()})")


def test_fake_pid_files_look_like_the_real_ones(fake_claude: FakeClaude) -> None:
    fake_claude.status("waiting", waiting_for="permission prompt")
    written = orjson.loads((fake_claude.home / "sessions" / f"{os.getpid()}.json").read_bytes())
    real = orjson.loads((FIXTURES / "claude-pid-waiting.json").read_bytes())
    assert list(written) == list(real)
    assert (real["status"], real["waitingFor"]) == ("waiting", "permission prompt")


async def test_claude_interactive_timeline_as_recorded(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    """The batches and status changes in the order the real CLI wrote them."""
    real = lines_of("claude-interactive.jsonl")
    fake_claude.status("idle")
    watcher = await started_claude(inotify, fake_claude)
    changes: list[tuple[str, int]] = []
    watcher.subscribe(lambda: changes.append((str(watcher.activity), watcher.prompts_seen)))
    await expect(watcher, UNKNOWN, 0, "(just opened: no transcript)")
    assert watcher.describe()["status"] == "idle"
    # "hello": busy, then mode/permission-mode, ai-title, idle, and the batch.
    fake_claude.status("busy")
    await expect(watcher, BUSY)
    fake_claude.lines(real[0:2])
    fake_claude.lines(real[2:3])
    await settled(watcher, fake_claude.transcript())
    fake_claude.status("idle")
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    assert watcher.activity == BUSY                       # the transcript lags the status
    fake_claude.lines(real[3:9])                          # six lines in one write
    await expect(watcher, IDLE, 1)
    # "slow please": the model streams (the prompt is the last entry).
    fake_claude.status("busy")
    await expect(watcher, BUSY)
    fake_claude.lines(real[9:11])
    await expect(watcher, BUSY, 2)
    fake_claude.status("idle")
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    assert watcher.activity == BUSY
    fake_claude.lines(real[11:13])
    await expect(watcher, IDLE, 2)
    # "bashit": the approval prompt, then Esc.
    fake_claude.status("busy")
    fake_claude.status("waiting", waiting_for="permission prompt")
    await expect(watcher, WAITING)
    assert watcher.waiting_for == "permission prompt"
    fake_claude.lines(real[13:16])                        # prompt + tool_use
    await expect(watcher, WAITING, 3)
    fake_claude.status("idle")
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    assert watcher.activity == BUSY and watcher.waiting_for is None
    fake_claude.lines(real[16:18])                        # rejected + interrupt marker
    await expect(watcher, IDLE, 3)
    assert changes == [("busy", 0), ("idle", 1), ("busy", 1), ("busy", 2), ("idle", 2),
                       ("waiting-for-approval", 2), ("waiting-for-approval", 3),
                       ("busy", 3), ("idle", 3)]
    await watcher.stop()


async def test_claude_quick_turn_counts_its_prompt_before_idle(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    """The real CLI went busy → idle in 36 ms and wrote the turn 50 ms later:
    the old turn end must not make the new turn look idle."""
    real = lines_of("claude-interactive.jsonl")
    fake_claude.status("idle")
    fake_claude.lines(real[:9])
    watcher = await started_claude(inotify, fake_claude)
    await expect(watcher, IDLE, 0)
    changes: list[tuple[str, int]] = []
    watcher.subscribe(lambda: changes.append((str(watcher.activity), watcher.prompts_seen)))
    fake_claude.status("busy")
    await expect(watcher, BUSY)
    fake_claude.status("idle")
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    await asyncio.sleep(0.1)
    assert watcher.activity == BUSY and watcher.describe()["turn_open"] is True
    fake_claude.lines(real[9:13])
    await expect(watcher, IDLE, 1)
    assert changes == [("busy", 0), ("idle", 1)]
    await watcher.stop()


def _assistant(message_id: str, output: int, stop: str | None = None) -> bytes:
    return orjson.dumps({"type": "assistant", "message": {
        "id": message_id, "role": "assistant", "stop_reason": stop,
        "content": [{"type": "text", "text": "x"}],
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100,
                  "cache_read_input_tokens": 1000, "output_tokens": output}}})


def test_usage_from_the_records_lines() -> None:
    assert claude_usage(_assistant("msg_1", 7)) == ("msg_1", TokenUsage(1110, 1000, 7))
    token_count = orjson.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": 500, "cached_input_tokens": 300,
                              "output_tokens": 40, "reasoning_output_tokens": 12,
                              "total_tokens": 540}}}})
    assert codex_usage(token_count) == TokenUsage(500, 300, 40, 12)
    # Lines that only mention it, or say it badly, count nothing.
    for line in (b'{"type":"user","message":{"content":"usage"}}', b'{"type":"assistant", bad',
                 orjson.dumps({"type": "event_msg", "payload": {"type": "token_count",
                                                                "info": None}}),
                 orjson.dumps({"type": "assistant", "message": {
                     "id": "m", "usage": {"input_tokens": -5, "output_tokens": True}}})):
        assert claude_usage(line) in (None, ("m", TokenUsage()))
        assert codex_usage(line) is None


async def test_claude_usage_counts_each_message_once(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    fake_claude.status("busy")
    fake_claude.lines([b'{"type":"user","message":{"role":"user","content":"hi"}}'])
    watcher = await started_claude(inotify, fake_claude)
    heard: list[TokenUsage | None] = []
    watcher.subscribe(lambda: heard.append(watcher.usage))
    # A message written block by block: its last line's usage counts, once.
    fake_claude.lines([_assistant("msg_1", 1), _assistant("msg_1", 30, "tool_use")])
    await until(lambda: watcher.usage == TokenUsage(1110, 1000, 30), "msg_1's usage")
    fake_claude.lines([_assistant("msg_2", 5, "end_turn")])
    await until(lambda: watcher.usage == TokenUsage(2220, 2000, 35), "both messages")
    assert heard[-1] == TokenUsage(2220, 2000, 35)
    await watcher.stop()


async def test_claude_busy_spell_without_a_record_ends_after_the_grace(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    fake_claude.status("idle")
    fake_claude.lines(lines_of("claude-interactive.jsonl")[:9])
    watcher = await started_claude(inotify, fake_claude)
    await expect(watcher, IDLE)
    fake_claude.status("busy")
    await expect(watcher, BUSY)
    fake_claude.status("idle")
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    idle_at = time.monotonic()
    await expect(watcher, IDLE)
    assert time.monotonic() - idle_at > 0.8
    await watcher.stop()


async def test_claude_steady_idle_status_wins_over_a_reappended_transcript(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    # Seen with the real CLI when its MCP server restarted: after the turn
    # ended, Claude re-appended older entries (a prompt, a tool_use, its
    # tool_result), so the file's last line is no turn end.  The status
    # file says idle throughout; once steady for the grace, that wins.
    lines = lines_of("claude-interactive.jsonl")[:9]
    fake_claude.status("idle")
    fake_claude.lines(lines + REF_TOOL_TAIL)
    watcher = await started_claude(inotify, fake_claude)
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    assert watcher.activity == BUSY
    started = time.monotonic()
    await expect(watcher, IDLE)
    assert time.monotonic() - started > 0.5
    # Not while the status says otherwise.
    fake_claude.status("waiting", waiting_for="permission prompt")
    await expect(watcher, WAITING)
    await watcher.stop()


REF = lines_of("claude-reference.jsonl")
REF_TOOL_TAIL = REF[4:7]
# (pid-file status, waitingFor, transcript lines, expected): the rows of the
# reference's timeline table, the batch lag, and what the real runs showed.
CLAUDE_ROWS: list[tuple[str, str, str | None, list[bytes], AgentActivity]] = [
    ("idle after a turn", "idle", None, REF[:10], IDLE),
    ("idle after a -p turn", "idle", None, lines_of("claude-print.jsonl"), IDLE),
    ("model streaming", "busy", None, REF[:4], BUSY),
    ("tool running", "busy", None, REF[:7], BUSY),
    ("approval prompt", "waiting", "permission prompt", REF[:7], WAITING),
    ("after Esc interrupt", "idle", None, REF[:20], IDLE),
    ("after a rejected tool use", "idle", None, REF[:17], IDLE),
    ("message pasted while busy", "busy", None, REF[:11], BUSY),
    ("idle, transcript lagging", "idle", None, REF[:4], BUSY),
    ("idle, tool_use not yet answered", "idle", None, REF[:15], BUSY),
    ("background shell", "shell", None, REF[:10], BUSY),
    ("dialog open", "waiting", "dialog open", lines_of("claude-after-clear.jsonl")[:25], WAITING),
    ("after /clear", "idle", None, lines_of("claude-after-clear.jsonl")[:5], IDLE),
    ("after /context", "idle", None, lines_of("claude-after-clear.jsonl"), IDLE),
    ("unknown status", "sleeping", None, REF[:10], UNKNOWN),
]


@pytest.mark.parametrize("attach", ["before", "after"])
@pytest.mark.parametrize(("status", "waiting_for", "lines", "expected"),
                         [row[1:] for row in CLAUDE_ROWS], ids=[row[0] for row in CLAUDE_ROWS])
async def test_claude_reference_rows(
        inotify: Inotify, fake_claude: FakeClaude, attach: str, status: str,
        waiting_for: str | None, lines: list[bytes], expected: AgentActivity) -> None:
    fake_claude.status(status, waiting_for=waiting_for)
    if attach == "before":          # a sidecar restart: read from the end
        fake_claude.lines(lines)
    watcher = await started_claude(inotify, fake_claude)
    if attach == "after":
        fake_claude.lines(lines)
    await settled(watcher, fake_claude.transcript())
    assert watcher.activity == expected, watcher.describe()
    assert watcher.waiting_for == waiting_for
    prompts = sum(1 for line in lines if (e := parse_claude_line(line)) and e.prompt)
    assert watcher.prompts_seen == (prompts if attach == "after" else 0)
    await watcher.stop()


async def test_claude_queued_message_counts_when_recorded(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    real = lines_of("claude-after-clear.jsonl")
    fake_claude.status("busy")
    fake_claude.lines(real[:14])                  # … "slow third" is streaming
    watcher = await started_claude(inotify, fake_claude)
    await expect(watcher, BUSY, 0)
    fake_claude.lines(real[14:15])                # enqueue: metadata, not a prompt yet
    await settled(watcher, fake_claude.transcript())
    assert (watcher.activity, watcher.prompts_seen) == (BUSY, 0)
    for status in ("idle", "busy", "idle"):       # the 25 ms flicker the real CLI showed
        fake_claude.status(status)
    await until(lambda: watcher.describe()["status"] == "idle", "status idle")
    assert watcher.activity == BUSY
    fake_claude.lines(real[15:22])                # dequeue, both turns' ends, one batch
    await expect(watcher, IDLE, 1)


async def test_claude_follows_clear_to_the_new_transcript(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    first = lines_of("claude-interactive.jsonl")
    after = lines_of("claude-after-clear.jsonl")
    new_sid = "3afc2039-c905-4d91-b019-e0d5638b53f8"
    fake_claude.status("idle")
    watcher = await started_claude(inotify, fake_claude)
    fake_claude.lines(first[:13])
    await expect(watcher, IDLE, 2)
    fake_claude.status("idle", session_id=new_sid)        # /clear
    await expect(watcher, UNKNOWN, 2, "(the new session has no transcript yet)")
    assert watcher.describe()["session_id"] == new_sid
    fake_claude.lines(after[:1], new_sid)                 # mode
    await expect(watcher, BUSY)
    fake_claude.lines(after[1:5], new_sid)                # caveat, /clear, local_command
    await expect(watcher, IDLE, 2)
    fake_claude.lines(first[13:], SID)                    # the old file is not followed
    fake_claude.status("busy", session_id=new_sid)
    fake_claude.lines(after[6:8], new_sid)
    await expect(watcher, BUSY, 3)
    assert watcher.transcript == fake_claude.transcript(new_sid)
    await watcher.stop()


async def test_claude_split_writes_and_multibyte_characters(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    real = lines_of("claude-interactive.jsonl")
    prompt = real[4]
    assert "—".encode() in prompt
    fake_claude.status("busy")
    watcher = await started_claude(inotify, fake_claude)
    cut = prompt.index("—".encode()) + 2               # between the dash's 2nd and 3rd byte
    fake_claude.write(joined(real[:4]) + prompt[:cut])
    await settled(watcher, fake_claude.transcript())
    assert watcher.prompts_seen == 0
    fake_claude.write(prompt[cut:] + b"\n")
    await expect(watcher, BUSY, 1)
    fake_claude.status("idle")
    end = joined(real[5:9])
    cut = len(joined(real[5:7])) + 40                    # inside the assistant's end_turn
    fake_claude.write(end[:cut])
    await settled(watcher, fake_claude.transcript())
    assert watcher.activity == BUSY                      # the reply is not complete yet
    fake_claude.write(end[cut:])
    await expect(watcher, IDLE, 1)
    await watcher.stop()


async def test_claude_transcript_truncated_or_replaced(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    real = lines_of("claude-interactive.jsonl")
    fake_claude.status("idle")
    watcher = await started_claude(inotify, fake_claude)
    fake_claude.lines(real[:9])
    await expect(watcher, IDLE, 1)
    with open(fake_claude.transcript(), "r+b") as f:
        f.truncate(0)
    fake_claude.lines(real[9:11])                    # starts over: a prompt, no turn end
    await expect(watcher, BUSY, 2)
    replacement = fake_claude.projects / "tmp"
    append(replacement, joined(real[9:13]))
    os.replace(replacement, fake_claude.transcript())
    await expect(watcher, IDLE, 3)
    fake_claude.transcript().unlink()
    await expect(watcher, UNKNOWN, 3)
    await watcher.stop()


async def test_claude_pid_file_with_stale_proc_start(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    real_start = proc_start_time(os.getpid())
    assert real_start is not None
    fake_claude.lines(lines_of("claude-interactive.jsonl")[:9])
    fake_claude.status("idle", proc_start=real_start + 4242)   # a dead process's file
    watcher = await started_claude(inotify, fake_claude)
    await settled(watcher, fake_claude.transcript())
    assert watcher.activity == UNKNOWN and watcher.describe()["pid_file_stale"] is True
    fake_claude.status("idle")                                 # our process rewrites it
    await expect(watcher, IDLE)
    assert watcher.describe()["pid_file_stale"] is False
    await watcher.stop()


async def test_claude_pid_file_of_a_dead_process(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    fake_claude.lines(lines_of("claude-interactive.jsonl")[:9])
    fake_claude.status("idle", pid=dead.pid, proc_start=12345)
    watcher = await started_claude(inotify, fake_claude, pid=dead.pid)
    await settled(watcher, fake_claude.transcript())
    assert watcher.activity == UNKNOWN and watcher.describe()["pid_file_stale"] is True
    await watcher.stop()


async def test_claude_pid_file_caught_mid_rewrite(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    fake_claude.lines(lines_of("claude-interactive.jsonl")[:9])
    fake_claude.status("waiting", waiting_for="permission prompt")
    watcher = await started_claude(inotify, fake_claude)
    await expect(watcher, WAITING)
    pid_file = fake_claude.home / "sessions" / f"{os.getpid()}.json"
    info = orjson.loads(pid_file.read_bytes())
    del info["waitingFor"]
    shorter = orjson.dumps(dict(info, status="idle"))
    assert len(shorter) < pid_file.stat().st_size
    events = inotify.events_read
    with open(pid_file, "r+b") as f:              # new text over the old, not yet truncated
        f.write(shorter)
    await handled(inotify, events)
    assert watcher.activity == WAITING            # "Extra data": ignored, not misread
    with open(pid_file, "r+b") as f:
        f.truncate(len(shorter))
    await expect(watcher, IDLE)
    pid_file.unlink()                             # a clean exit removes it
    await expect(watcher, UNKNOWN)
    await watcher.stop()


async def test_claude_adopts_a_descendant_and_waits_for_its_home(
        inotify: Inotify, tmp_path: Path) -> None:
    """PID may be a launcher whose child is claude; the home may not exist yet."""
    (tmp_path / "proj").mkdir()
    launcher = await asyncio.create_subprocess_exec("sh", "-c", "sleep 30; true")
    try:
        await until(lambda: len(process_tree(launcher.pid)) == 2, "the child")
        child = process_tree(launcher.pid)[1]
        fake = FakeClaude(tmp_path / "later", child, tmp_path / "proj")
        watcher = ClaudeWatcher(inotify, fake.home, launcher.pid, None, fake.cwd)
        await watcher.start()
        assert watcher.activity == UNKNOWN
        fake.status("idle")                        # creates .claude/sessions/<child>.json
        await until(lambda: watcher.claude_pid == child, "adoption")
        assert watcher.describe()["session_id"] == SID   # learnt from the pid file
        fake.lines(lines_of("claude-interactive.jsonl")[:9])
        await expect(watcher, IDLE, 1)
        await watcher.stop()
    finally:
        for pid in reversed(process_tree(launcher.pid)):
            os.kill(pid, signal.SIGKILL)
        await launcher.wait()


async def test_claude_rereads_after_an_inotify_overflow(
        inotify: Inotify, fake_claude: FakeClaude) -> None:
    real = lines_of("claude-interactive.jsonl")
    fake_claude.status("busy")
    watcher = await started_claude(inotify, fake_claude)
    fake_claude.lines(real[:5])
    await expect(watcher, BUSY, 1)
    loop = asyncio.get_running_loop()
    assert inotify.fd is not None
    loop.remove_reader(inotify.fd)
    fake_claude.status("idle")
    fake_claude.lines(real[5:9])
    while True:                                    # the kernel dropped these events
        try:
            os.read(inotify.fd, 65536)
        except BlockingIOError:
            break
    loop.add_reader(inotify.fd, inotify._on_readable)
    await asyncio.sleep(0.05)
    assert watcher.activity == BUSY
    inotify.dispatch([InotifyEvent(-1, ino.IN_Q_OVERFLOW, 0, "")])
    assert (watcher.activity, watcher.prompts_seen) == (IDLE, 1)
    await watcher.stop()


# ====================================================================== Codex

HOLDER = r"""
import sys
held = []
for line in sys.stdin:
    path = line.strip()
    held.append(open(path, "ab"))
    print("opened", flush=True)
"""


class Holder:
    """A process tree like a Codex terminal's: `sh` (the terminal's
    process) → python, which opens rollouts on request and keeps them open."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$0"; true', HOLDER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pid = self.proc.pid

    async def open(self, path: Path) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        self.proc.stdin.write(f"{path}\n".encode())
        self.proc.stdin.flush()
        reply = await asyncio.to_thread(self.proc.stdout.readline)
        assert reply == b"opened\n"


@pytest.fixture
def holders() -> Iterator[Callable[[], Holder]]:
    made: list[Holder] = []

    def make() -> Holder:
        holder = Holder()
        made.append(holder)
        return holder

    yield make
    for holder in made:
        tree = process_tree(holder.pid)
        assert holder.proc.stdin is not None
        holder.proc.stdin.close()              # the holder exits at end of input
        try:
            holder.proc.wait(5)
        except subprocess.TimeoutExpired:
            for pid in reversed(tree):
                os.kill(pid, signal.SIGKILL)
            holder.proc.wait()


def rollout_path(codex_home: Path, thread: str, day: str = "2026/11/30") -> Path:
    stamp = day.replace("/", "-") + "T00-32-47"
    return codex_home / "sessions" / day / f"rollout-{stamp}-{thread}.jsonl"


def meta_for(thread: str, **payload: Any) -> bytes:
    meta = orjson.loads(lines_of("codex-rollout.jsonl")[0])
    meta["payload"].update(id=thread, session_id=thread, **payload)
    return orjson.dumps(meta)


async def test_codex_two_terminals_in_one_folder(
        inotify: Inotify, tmp_path: Path, holders: Callable[[], Holder]) -> None:
    home = tmp_path / ".codex"
    proj = tmp_path / "proj"
    proj.mkdir()
    a, b = holders(), holders()
    await until(lambda: len(process_tree(a.pid)) == 2 and len(process_tree(b.pid)) == 2,
                "the holders' children")
    wa = CodexWatcher(inotify, home, a.pid, proj)
    wb = CodexWatcher(inotify, home, b.pid, proj)
    await wa.start()
    await wb.start()
    assert (wa.activity, wb.activity) == (UNKNOWN, UNKNOWN)
    assert (wa.fd_scans, wb.fd_scans) == (1, 1)          # once at start, no polling
    real = lines_of("codex-rollout.jsonl")
    ra = rollout_path(home, "01a229de-5994-71a1-a3ee-c11f3ed5e130")
    rb = rollout_path(home, "01a229df-1fa1-79e2-90ab-73831f094824")
    await a.open(ra)                  # folders created lazily, then the file
    append(ra, joined(real[:2]))
    await expect(wa, BUSY, 0)
    assert wa.rollout == ra and wb.rollout is None and wb.activity == UNKNOWN
    await b.open(rb)
    append(rb, meta_for("01a229df-1fa1-79e2-90ab-73831f094824") + b"\n" + joined(real[1:9]))
    await expect(wb, BUSY, 1)
    assert wb.rollout == rb and wa.rollout == ra
    scans = (wa.fd_scans, wb.fd_scans)
    for line in real[2:14]:           # many writes: no more fd scans
        append(ra, line + b"\n")
    await expect(wa, IDLE, 1)
    assert wb.activity == BUSY and wb.prompts_seen == 1
    for line in real[9:14]:
        append(rb, line + b"\n")
    await expect(wb, IDLE, 1)
    assert (wa.fd_scans, wb.fd_scans) == scans
    assert wa.describe()["thread_id"] == "01a229de-5994-71a1-a3ee-c11f3ed5e130"
    assert wb.describe()["thread_id"] == "01a229df-1fa1-79e2-90ab-73831f094824"
    await wa.stop()
    await wb.stop()


async def test_codex_timeline_as_recorded(
        inotify: Inotify, tmp_path: Path, holders: Callable[[], Holder]) -> None:
    home = tmp_path / ".codex"
    holder = holders()
    watcher = CodexWatcher(inotify, home, holder.pid, tmp_path)
    await watcher.start()
    changes: list[tuple[str, int]] = []
    watcher.subscribe(lambda: changes.append((str(watcher.activity), watcher.prompts_seen)))
    real = lines_of("codex-rollout.jsonl")
    path = rollout_path(home, "01a229de-5994-71a1-a3ee-c11f3ed5e130")
    scans = watcher.fd_scans
    await holder.open(path)
    await until(lambda: watcher.fd_scans > scans, "a look at the new file")
    assert watcher.activity == UNKNOWN               # bound only once session_meta is in
    steps: list[tuple[slice, AgentActivity, int]] = [
        (slice(0, 2), BUSY, 0),        # session_meta + task_started (one write)
        (slice(2, 9), BUSY, 1),        # context, the prompt: the model streams
        (slice(9, 14), IDLE, 1),       # reply, task_complete
        (slice(14, 19), BUSY, 2),      # "slow codex"
        (slice(19, 22), BUSY, 3),      # a steering message joins the same turn
        (slice(22, 27), IDLE, 3),      # one task_complete for both
        (slice(27, 33), BUSY, 4),      # "slow again codex"
        (slice(33, 35), IDLE, 4),      # Esc: <turn_aborted> note + turn_aborted
        (slice(35, 42), BUSY, 5),      # escalated touch: function_call + token usage
        (slice(42, 46), IDLE, 5),      # Esc at the approval prompt
    ]
    for part, activity, prompts in steps:
        append(path, joined(real[part]))          # one write per step: one read
        await settled(watcher, path)
        assert (watcher.activity, watcher.prompts_seen) == (activity, prompts), part
    assert changes == [("busy", 0), ("busy", 1), ("idle", 1), ("busy", 2), ("busy", 3),
                       ("idle", 3), ("busy", 4), ("idle", 4), ("busy", 5), ("idle", 5)]
    await watcher.stop()


CODEX_ROWS: list[tuple[str, list[bytes], AgentActivity]] = [
    ("idle", lines_of("codex-reference.jsonl")[:17], IDLE),
    ("idle after turn_aborted", lines_of("codex-reference.jsonl"), IDLE),
    ("model streaming", lines_of("codex-reference.jsonl")[:9], BUSY),
    ("tool running or approval prompt", lines_of("codex-reference.jsonl")[:11], BUSY),
    ("tool running (real)", lines_of("codex-rollout-after-new.jsonl")[:21], BUSY),
    ("approval prompt (real)", lines_of("codex-rollout.jsonl")[:42], BUSY),
    ("after a tool (real)", lines_of("codex-rollout-after-new.jsonl"), IDLE),
]


@pytest.mark.parametrize("attach", ["before", "after"])
@pytest.mark.parametrize(("lines", "expected"), [row[1:] for row in CODEX_ROWS],
                         ids=[row[0] for row in CODEX_ROWS])
async def test_codex_reference_rows(
        inotify: Inotify, tmp_path: Path, holders: Callable[[], Holder], attach: str,
        lines: list[bytes], expected: AgentActivity) -> None:
    home = tmp_path / ".codex"
    holder = holders()
    path = rollout_path(home, "01a22971-7f3c-7a11-9c3e-5d2b6e8f0a41")
    if attach == "before":                     # a sidecar restart: bound at start
        await holder.open(path)
        append(path, joined(lines))
    watcher = CodexWatcher(inotify, home, holder.pid, tmp_path)
    await watcher.start()
    if attach == "after":
        await holder.open(path)
        append(path, joined(lines))
    await settled(watcher, path)
    assert watcher.activity == expected and watcher.rollout == path
    prompts = sum(1 for line in lines if (e := parse_codex_line(line)) and e.prompt)
    assert watcher.prompts_seen == (prompts if attach == "after" else 0)
    await watcher.stop()


async def test_codex_follows_new_thread_but_not_sub_agents(
        inotify: Inotify, tmp_path: Path, holders: Callable[[], Holder]) -> None:
    home = tmp_path / ".codex"
    holder = holders()
    watcher = CodexWatcher(inotify, home, holder.pid, tmp_path)
    await watcher.start()
    first = rollout_path(home, "01a229de-5994-71a1-a3ee-c11f3ed5e130")
    await holder.open(first)
    append(first, joined(lines_of("codex-rollout.jsonl")[:14]))
    await expect(watcher, IDLE, 1)
    # A sub-agent's thread, held by the same process: not followed.
    sub = rollout_path(home, "01a229df-0000-7000-8000-00000000000a")
    await holder.open(sub)
    events = inotify.events_read
    append(sub, meta_for("01a229df-0000-7000-8000-00000000000a", thread_source="subagent")
           + b"\n" + joined(lines_of("codex-rollout.jsonl")[1:9]))
    await handled(inotify, events)
    assert watcher.rollout == first and watcher.activity == IDLE
    # /new: a new rollout at the next prompt; the old one stays open too.
    new = rollout_path(home, "01a229df-1fa1-79e2-90ab-73831f094824", day="2026/12/01")
    await holder.open(new)
    after_new = lines_of("codex-rollout-after-new.jsonl")
    append(new, joined(after_new[:9]))
    await expect(watcher, BUSY, 2)
    assert watcher.rollout == new
    append(new, joined(after_new[9:]))
    await expect(watcher, IDLE, 3)
    # A file another process writes is never ours, and costs one fd scan.
    other = rollout_path(home, "01a229df-2222-7000-8000-00000000000b", day="2026/12/01")
    scans = watcher.fd_scans
    append(other, joined(lines_of("codex-rollout.jsonl")[:9]))
    await until(lambda: watcher.fd_scans > scans, "the scan for the new file")
    scans = watcher.fd_scans
    events = inotify.events_read
    for _ in range(20):
        append(other, lines_of("codex-rollout.jsonl")[12] + b"\n")
    await handled(inotify, events)
    assert watcher.fd_scans == scans and watcher.rollout == new
    # The bound rollout goes away: unbound, then bound again to what is held.
    new.unlink()
    await until(lambda: watcher.rollout == first, "re-binding to the old thread")
    assert watcher.activity == IDLE
    await watcher.stop()


async def test_make_watcher_homes(inotify: Inotify, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    claude = claude_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path,
                            session_id=SID)
    codex = codex_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path, session_id=None)
    assert isinstance(claude, ClaudeWatcher) and claude.claude_home == tmp_path / ".claude"
    assert claude.describe()["session_id"] == SID
    assert isinstance(codex, CodexWatcher) and codex.codex_home == tmp_path / ".codex"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cc"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "cx"))
    claude = claude_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path, session_id=None)
    codex = codex_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path, session_id=None)
    assert isinstance(claude, ClaudeWatcher) and claude.claude_home == tmp_path / "cc"
    assert isinstance(codex, CodexWatcher) and codex.codex_home == tmp_path / "cx"
    hermes = hermes_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path,
                            session_id=None)
    assert isinstance(hermes, HermesWatcher) and hermes.hermes_home == tmp_path / ".hermes"
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hh"))
    hermes = hermes_watcher(inotify, home=tmp_path, pid=1, cwd=tmp_path,
                            session_id=None)
    assert isinstance(hermes, HermesWatcher) and hermes.hermes_home == tmp_path / "hh"
    assert [a.value for a in AgentActivity] == ["unknown", "idle", "busy",
                                                "waiting-for-approval"]


# ============================================================ the real CLIs

REAL_SCRIPT = [
    {"match": "stream slowly", "steps": [{"say": "a slow reply, streamed over three seconds",
                                          "delay": 3}]},
    {"match": "run the touch", "steps": [{"shell": "touch claude-made-this"},
                                         {"say": "ran it"}]},
    {"match": "escalate the touch", "steps": [{"shell": "touch codex-made-this",
                                               "escalate": True}, {"say": "ran it"}]},
    {"match": "", "steps": [{"say": "quick reply"}]},
]


class Tmux:
    """A private tmux server in a loopback-only network namespace, running
    the scripted gateway and the CLIs."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.socket = work / "tmux.sock"
        self.env: dict[str, str] = {}

    async def run(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "tmux", "-S", str(self.socket), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise AssertionError(f"tmux {args[0]}: {err.decode()}")
        return out.decode()

    async def start(self, projects: list[Path]) -> None:
        from tests.e2e.harness import require_namespaces
        require_namespaces()
        script = self.work / "script.json"
        script.write_bytes(orjson.dumps(REAL_SCRIPT))
        port_file = self.work / "gateway.port"
        root = Path(__file__).resolve().parents[2]
        gateway = (f"PYTHONPATH={root / 'python'} exec {sys.executable} -m "
                   f"lispm_sidecar.testing.gateway --port 0 --port-file {port_file} "
                   f"--log {self.work / 'gateway.jsonl'} --script {script} "
                   f"2>{self.work / 'gateway.err'}")
        done = await asyncio.create_subprocess_exec(
            "unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
            "tmux", "-S", str(self.socket), "-f", "/dev/null", "new-session", "-d",
            "-x", "160", "-y", "45", "-s", "main", gateway)
        assert await done.wait() == 0
        await self.run("set", "-g", "remain-on-exit", "on")
        await until(lambda: port_file.exists() and port_file.read_text().strip() != "",
                    "the gateway", limit=20)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        self.env = seed_home(self.work / "home", url, projects)
        self.env["TERM"] = "xterm-256color"

    async def window(self, name: str, cwd: Path, argv: list[str]) -> int:
        args = ["new-window", "-d", "-n", name, "-c", str(cwd), "-P", "-F", "#{pane_pid}"]
        for key, value in self.env.items():
            args += ["-e", f"{key}={value}"]
        return int((await self.run(*args, "--", *argv)).strip())

    async def paste(self, name: str, text: str) -> None:
        await self.run("send-keys", "-t", name, "-l", text)
        await asyncio.sleep(0.4)
        await self.run("send-keys", "-t", name, "Enter")

    async def key(self, name: str, key: str) -> None:
        await self.run("send-keys", "-t", name, key)

    async def screen(self, name: str) -> str:
        return await self.run("capture-pane", "-p", "-t", name)

    async def wait_screen(self, name: str, text: str, limit: float = 20) -> None:
        deadline = time.monotonic() + limit
        while text not in await self.screen(name):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not on {name}'s screen:\n"
                                     f"{await self.screen(name)}")
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self.socket.exists():
            proc = await asyncio.create_subprocess_exec(
                "tmux", "-S", str(self.socket), "kill-server",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            await proc.wait()


class Recorder:
    """Every state a watcher reported, with the time."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.t0 = time.monotonic()
        self.states: list[tuple[float, str, str | None, int]] = []
        watcher.subscribe(self._record)
        self._record()

    def _record(self) -> None:
        w = self.watcher
        self.states.append((round(time.monotonic() - self.t0, 3), str(w.activity),
                            w.waiting_for, w.prompts_seen))

    def mark(self) -> int:
        return len(self.states)

    def since(self, mark: int) -> list[str]:
        return [s[1] for s in self.states[mark:]]


@pytest.fixture
async def real_tmux(tmp_path: Path) -> AsyncIterator[Tmux]:
    tmux = Tmux(tmp_path)
    try:
        yield tmux
    finally:
        await tmux.stop()


def _cli(name: str) -> Path:
    from tests.e2e.harness import require_cli
    return require_cli(name)     # fails, saying `make install`, when missing


@pytest.mark.e2e
@pytest.mark.cli
async def test_real_claude_code(inotify: Inotify, tmp_path: Path, real_tmux: Tmux,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    claude = _cli("claude")
    proj = tmp_path / "proj"
    proj.mkdir()
    await real_tmux.start([proj])
    session = str(uuid.uuid4())
    pid = await real_tmux.window("claude", proj, [str(claude), "--session-id", session])
    watcher = claude_watcher(inotify, home=tmp_path / "home", pid=pid, cwd=proj,
                             session_id=session)
    assert isinstance(watcher, ClaudeWatcher)
    rec = Recorder(watcher)
    await watcher.start()
    try:
        await real_tmux.wait_screen("claude", "❯")
        await until(lambda: watcher.status == "idle", "the pid file", limit=10)
        await asyncio.sleep(1.0)
        # Just opened: a pid file, but no transcript: not known to be idle.
        assert watcher.activity == UNKNOWN and watcher.prompts_seen == 0, rec.states
        assert watcher.transcript == (tmp_path / "home/.claude/projects"
                                      / project_dir_name(str(proj.resolve()))
                                      / f"{session}.jsonl")
        mark = rec.mark()
        await real_tmux.paste("claude", "stream slowly please")
        await expect(watcher, BUSY, 1, "(streaming)")
        busy_at = time.monotonic()
        await expect(watcher, IDLE, 1, "(after the slow turn)")
        assert time.monotonic() - busy_at > 2.0, rec.states
        assert set(rec.since(mark)) == {"busy", "idle"}, rec.states
        # A Bash approval prompt, declined with Escape.
        mark = rec.mark()
        await real_tmux.paste("claude", "run the touch now")
        await expect(watcher, WAITING, 2, "(approval prompt)")
        assert watcher.waiting_for == "permission prompt"
        await real_tmux.wait_screen("claude", "Do you want to proceed?")
        await asyncio.sleep(0.3)
        assert watcher.activity == WAITING
        await real_tmux.key("claude", "Escape")
        await expect(watcher, IDLE, 2, "(after Escape)")
        assert "idle" not in rec.since(mark)[:-1], rec.states
        assert not (proj / "claude-made-this").exists()
        assert watcher.describe()["last_entry"] == "user:interrupted"
        # /clear: a new session id and transcript, followed.
        await real_tmux.paste("claude", "/clear")
        await until(lambda: watcher.describe()["session_id"] != session, "the new session")
        await expect(watcher, IDLE, 2, "(after /clear)")
        await real_tmux.paste("claude", "one more")
        await expect(watcher, IDLE, 3, "(a prompt in the new session)")
        assert watcher.transcript is not None and watcher.transcript.name != f"{session}.jsonl"
        print("claude states:", rec.states)
    except BaseException:
        print("claude states:", rec.states, "\n", await real_tmux.screen("claude"))
        raise
    finally:
        await watcher.stop()


@pytest.mark.e2e
@pytest.mark.cli
async def test_real_codex_two_in_one_folder(
        inotify: Inotify, tmp_path: Path, real_tmux: Tmux,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    codex = _cli("codex")
    proj = tmp_path / "proj"
    proj.mkdir()
    git = await asyncio.create_subprocess_exec("git", "init", "-q", str(proj))
    assert await git.wait() == 0
    await real_tmux.start([proj])
    # As LispM starts it: a /bin/sh launcher exec'ing the Node shim.
    launch = ["/bin/sh", "-c", 'exec "$@"', "sh", str(codex), "--no-daemon"]
    pid_a = await real_tmux.window("codex-a", proj, launch)
    pid_b = await real_tmux.window("codex-b", proj, launch)
    home = tmp_path / "home"
    wa = codex_watcher(inotify, home=home, pid=pid_a, cwd=proj, session_id=None)
    wb = codex_watcher(inotify, home=home, pid=pid_b, cwd=proj, session_id=None)
    assert isinstance(wa, CodexWatcher) and isinstance(wb, CodexWatcher)
    rec_a, rec_b = Recorder(wa), Recorder(wb)
    await wa.start()
    await wb.start()
    try:
        await real_tmux.wait_screen("codex-a", "Ask Codex")
        await real_tmux.wait_screen("codex-b", "Ask Codex")
        await asyncio.sleep(1.0)
        # Just opened: no rollout yet.
        assert (wa.activity, wb.activity) == (UNKNOWN, UNKNOWN)
        mark = rec_a.mark()
        await real_tmux.paste("codex-a", "stream slowly please")
        await expect(wa, BUSY, 1, "(streaming)")
        busy_at = time.monotonic()
        await real_tmux.paste("codex-b", "hello from b")
        await expect(wb, IDLE, 1, "(b's quick turn)")
        assert wa.activity == BUSY
        await expect(wa, IDLE, 1, "(after the slow turn)")
        assert time.monotonic() - busy_at > 2.0, rec_a.states
        assert set(rec_a.since(mark)) == {"busy", "idle"}
        assert wa.rollout is not None and wb.rollout is not None and wa.rollout != wb.rollout
        for watcher, launcher in ((wa, pid_a), (wb, pid_b)):
            holders = [p for p in process_tree(launcher)
                       if str(watcher.rollout) in open_files(p)]
            assert holders and launcher not in holders    # the native child holds it
        # An escalated command: the approval overlay shows, the rollout says busy.
        mark = rec_a.mark()
        await real_tmux.paste("codex-a", "escalate the touch please")
        await real_tmux.wait_screen("codex-a", "Would you like to run the following command?")
        await asyncio.sleep(0.5)
        assert (wa.activity, wa.prompts_seen) == (BUSY, 2), rec_a.states
        await real_tmux.key("codex-a", "Escape")
        await expect(wa, IDLE, 2, "(after Escape)")
        assert rec_a.since(mark)[-1] == "idle" and "idle" not in rec_a.since(mark)[:-1]
        assert not (proj / "codex-made-this").exists()
        assert wb.prompts_seen == 1 and wb.activity == IDLE
        print("codex-a states:", rec_a.states, "\ncodex-b states:", rec_b.states)
    except BaseException:
        print("codex-a states:", rec_a.states, "\ncodex-b states:", rec_b.states)
        print(await real_tmux.screen("codex-a"))
        raise
    finally:
        await wa.stop()
        await wb.stop()
