"""The request/reply ledger: operations, refusals, durability, concurrency, the async facade."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lispm_sidecar.errors import InvalidParams, LispmError
from lispm_sidecar.ledger import (
    LISPM,
    MAX_TEXT_CHARS,
    PICKUP_GRACE_S,
    BadTransition,
    EmptyText,
    InvalidUtf8,
    Ledger,
    LedgerError,
    LedgerStore,
    Message,
    NotAsked,
    RequestClosed,
    SelfRequest,
    TextTooLong,
    UnknownMessage,
    UnknownRequest,
)

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger" / "ledger.db"


@pytest.fixture
def store(path: Path) -> Iterator[LedgerStore]:
    with LedgerStore(path, clock=Clock()) as opened:
        yield opened


def counts(path: Path) -> tuple[int, int]:
    """Return (messages, requests) as another connection sees them."""
    conn = sqlite3.connect(path)
    try:
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        requests = conn.execute("SELECT count(*) FROM requests").fetchone()[0]
    finally:
        conn.close()
    return messages, requests


# --- operations -----------------------------------------------------------------


def test_send_queues_a_message_fifo(store: LedgerStore) -> None:
    first = store.send("claude", "codex", "hello")
    second = store.send("claude-2", "codex", "second")
    store.send("codex", "claude", "other way")
    assert (first.kind, first.sender, first.recipient, first.text) == (
        "message", "claude", "codex", "hello")
    assert first.state == "queued" and first.request_id is None and first.attempts == 0
    assert second.id > first.id
    assert [m.id for m in store.queued_for("codex")] == [first.id, second.id]
    assert store.queued_for("codex")[0] == first
    assert store.recipients_with_queued() == ["claude", "codex"]


def test_ask_opens_numbered_requests(store: LedgerStore) -> None:
    one = store.ask("claude", "codex", "review foo.py")
    two = store.ask("codex", "claude", "and you?")
    assert (one.id, two.id) == ("R1", "R2") and one.number == 1
    assert (one.asker, one.asked, one.state, one.text) == (
        "claude", "codex", "open", "review foo.py")
    [message] = store.queued_for("codex")
    assert (message.id, message.kind, message.request_id, message.sender) == (
        one.message_id, "request", "R1", "claude")
    assert store.open_requests() == [one, two]
    assert store.open_requests(asked="claude") == [two]
    assert store.request("R1") == one


def test_reply_answers_once_and_queues_for_the_asker(store: LedgerStore) -> None:
    request = store.ask("claude", "codex", "review foo.py")
    answer = store.reply("codex", request.id, "looks fine")
    assert (answer.kind, answer.sender, answer.recipient, answer.request_id, answer.state) == (
        "reply", "codex", "claude", "R1", "queued")
    assert store.queued_for("claude") == [answer]
    closed = store.request("R1")
    assert closed.state == "answered" and closed.reply_message_id == answer.id
    assert closed.closed_at is not None and closed.closed_at >= closed.opened_at
    assert store.open_requests() == []
    with pytest.raises(RequestClosed, match="already answered"):
        store.reply("codex", "R1", "again")
    assert store.queued_for("claude") == [answer]


def test_reply_accepts_lower_case_and_spaces(store: LedgerStore) -> None:
    store.ask("claude", "codex", "q")
    assert store.reply("codex", " r1 ", "a").request_id == "R1"


def test_records_as_json(store: LedgerStore) -> None:
    request = store.ask("claude", "codex", "q")
    assert request.message == store.queued_for("codex")[0]
    assert (request.text, request.message_id) == ("q", request.message.id)
    delivered = store.mark_delivered(request.message_id)
    assert delivered.to_json() == {
        "id": 1, "time": delivered.created_at, "kind": "request", "sender": "claude",
        "recipient": "codex", "text": "q", "request_id": "R1", "state": "delivered",
        "reason": None, "attempts": 1, "created_at": delivered.created_at,
        "delivered_at": delivered.delivered_at, "picked_up_at": None, "failed_at": None,
    }
    assert store.request("R1").message == delivered


def test_notify_from_lispm(store: LedgerStore) -> None:
    store.ask("claude", "codex", "q")
    notice = store.notify("claude", "your message could not be delivered", "R1")
    assert (notice.kind, notice.sender, notice.request_id) == ("notice", LISPM, "R1")
    plain = store.notify("claude", "hello from lispm")
    assert plain.request_id is None
    with pytest.raises(UnknownRequest):
        store.notify("claude", "x", "R9")


def test_end_requests_to_tells_each_asker(store: LedgerStore) -> None:
    one = store.ask("claude", "codex", "q1")
    two = store.ask("claude-2", "codex", "q2")
    other = store.ask("codex", "claude", "q3")
    store.reply("codex", store.ask("claude", "codex", "q4").id, "done")
    notices = store.end_requests_to("codex")
    assert [(n.kind, n.sender, n.recipient, n.request_id, n.text) for n in notices] == [
        ("notice", "lispm", "claude", one.id, "codex ended without replying to request R1."),
        ("notice", "lispm", "claude-2", two.id, "codex ended without replying to request R2."),
    ]
    assert store.request("R1").state == "ended" and store.request("R4").state == "answered"
    assert store.open_requests() == [other]
    with pytest.raises(RequestClosed, match=r"R1 has ended .* can no longer be answered"):
        store.reply("codex", "R1", "late")
    assert store.end_requests_to("codex") == []


def test_fail_queued_for(store: LedgerStore) -> None:
    a = store.send("claude", "codex", "a")
    b = store.send("claude", "codex", "b")
    store.mark_delivered(a.id)
    keep = store.send("codex", "claude", "c")
    failed = store.fail_queued_for("codex", "codex closed")
    assert [(m.id, m.state, m.reason) for m in failed] == [(b.id, "failed", "codex closed")]
    assert store.message(a.id).state == "delivered"
    assert store.queued_for("codex") == [] and store.queued_for("claude") == [keep]


def test_delivery_transitions(store: LedgerStore) -> None:
    m = store.send("claude", "codex", "hi")
    delivered = store.mark_delivered(m.id)
    assert delivered.state == "delivered" and delivered.attempts == 1
    assert delivered.delivered_at is not None
    assert store.queued_for("codex") == []
    picked = store.mark_picked_up(m.id)
    assert picked.state == "picked_up" and picked.picked_up_at is not None
    for mark in (store.mark_delivered, store.mark_picked_up, store.requeue):
        with pytest.raises(BadTransition, match="is picked_up"):
            mark(m.id)
    with pytest.raises(BadTransition):
        store.mark_failed(m.id, "late")
    assert store.message(m.id) == picked


def test_failed_and_requeued_keep_fifo_place(store: LedgerStore) -> None:
    first = store.send("claude", "codex", "1")
    second = store.send("claude", "codex", "2")
    store.mark_delivered(first.id)
    with pytest.raises(BadTransition, match="is queued"):
        store.mark_picked_up(second.id)
    with pytest.raises(BadTransition, match="is queued"):
        store.requeue(second.id)
    again = store.requeue(first.id)
    assert (again.state, again.attempts, again.delivered_at) == ("queued", 1, None)
    assert [m.id for m in store.queued_for("codex")] == [first.id, second.id]
    failed = store.mark_failed(first.id, "terminal gone")
    assert (failed.state, failed.reason) == ("failed", "terminal gone")
    assert failed.failed_at is not None
    back = store.requeue(first.id)
    assert (back.state, back.reason, back.failed_at) == ("queued", None, None)
    assert store.mark_delivered(first.id).attempts == 2
    with pytest.raises(InvalidParams):
        store.mark_failed(second.id, "  ")


def test_unconfirmed_after_grace(store: LedgerStore) -> None:
    m = store.mark_delivered(store.send("claude", "codex", "hi").id)
    assert m.delivered_at is not None
    assert not m.unconfirmed(m.delivered_at + PICKUP_GRACE_S - 1)
    assert m.unconfirmed(m.delivered_at + PICKUP_GRACE_S)
    assert not store.mark_picked_up(m.id).unconfirmed(m.delivered_at + 1000)


def test_unknown_message(store: LedgerStore) -> None:
    for mark in (store.mark_delivered, store.mark_picked_up, store.requeue, store.message):
        with pytest.raises(UnknownMessage, match="no message 42"):
            mark(42)
    with pytest.raises(UnknownMessage):
        store.mark_failed(42, "x")
    with pytest.raises(UnknownMessage):
        store.mark_delivered(0)


def test_entries_newest_first(store: LedgerStore) -> None:
    store.send("claude", "codex", "1")
    store.send("codex", "gemini", "2")
    request = store.ask("gemini", "claude", "3")
    store.reply("claude", request.id, "4")
    store.send("gemini", "codex", "5")
    assert [m.text for m in store.entries(10)] == ["5", "4", "3", "2", "1"]
    assert [m.text for m in store.entries(2)] == ["5", "4"]
    assert [m.text for m in store.entries(10, agent="claude")] == ["4", "3", "1"]
    assert [m.text for m in store.entries(2, agent="codex")] == ["5", "2"]
    assert store.entries(5, agent="nobody") == []
    for bad in (0, -1, True):
        with pytest.raises(InvalidParams):
            store.entries(bad)


def test_batch_is_all_or_nothing(store: LedgerStore, path: Path) -> None:
    with store.batch():
        store.send("claude", "codex", "a")
        store.ask("claude", "codex", "b")
    assert counts(path) == (2, 1)
    with pytest.raises(RuntimeError), store.batch():
        store.send("claude", "codex", "c")
        raise RuntimeError("boom")
    assert counts(path) == (2, 1)
    with store.batch():
        with pytest.raises(RequestClosed):
            store.reply("codex", "R1", "x")
            store.reply("codex", "R1", "y")
        store.send("claude", "codex", "d")
    assert counts(path) == (4, 1)
    assert store.request("R1").state == "answered"


# --- refusals -------------------------------------------------------------------


def test_asking_yourself(store: LedgerStore, path: Path) -> None:
    with pytest.raises(SelfRequest, match="claude cannot ask itself"):
        store.ask("claude", "claude", "hi")
    assert counts(path) == (0, 0)


def test_reply_to_unknown_request(store: LedgerStore) -> None:
    store.ask("claude", "codex", "q")
    for bad in ("R2", "R0", "R-1", "1", "foo", "", "R1x"):
        with pytest.raises(UnknownRequest):
            store.reply("codex", bad, "a")
    with pytest.raises(UnknownRequest):
        store.reply("codex", 1, "a")  # type: ignore[arg-type]
    with pytest.raises(UnknownRequest, match="there is no request R2"):
        store.request("R2")
    assert store.request("R1").state == "open"


def test_reply_by_the_wrong_agent(store: LedgerStore, path: Path) -> None:
    store.ask("claude", "codex", "q")
    for wrong in ("claude", "codex-2"):
        with pytest.raises(NotAsked, match="only codex may reply"):
            store.reply(wrong, "R1", "a")
    assert counts(path) == (1, 1) and store.request("R1").state == "open"
    store.reply("codex", "R1", "a")
    with pytest.raises(NotAsked):
        store.reply("claude", "R1", "b")


BAD_TEXTS: list[tuple[Any, type[LispmError]]] = [
    ("", EmptyText),
    ("  \n\t ", EmptyText),
    (b"", EmptyText),
    ("x" * (MAX_TEXT_CHARS + 1), TextTooLong),
    ("é" * (MAX_TEXT_CHARS + 1), TextTooLong),
    (b"x" * (4 * MAX_TEXT_CHARS + 1), TextTooLong),
    ("abc\ud800def", InvalidUtf8),
    ("\udcff", InvalidUtf8),
    (b"abc\xff", InvalidUtf8),
    (b"\xc3\x28", InvalidUtf8),
    (None, InvalidParams),
    (42, InvalidParams),
]


@pytest.mark.parametrize(("text", "error"), BAD_TEXTS)
def test_bad_text_is_refused_everywhere(
    store: LedgerStore, path: Path, text: Any, error: type[LispmError]
) -> None:
    store.ask("claude", "codex", "q")
    before = counts(path)
    calls: list[Callable[[], object]] = [
        lambda: store.send("claude", "codex", text),
        lambda: store.ask("claude", "codex", text),
        lambda: store.reply("codex", "R1", text),
        lambda: store.notify("claude", text),
    ]
    for call in calls:
        with pytest.raises(error):
            call()
    assert counts(path) == before and store.request("R1").state == "open"


def test_good_edge_texts(store: LedgerStore) -> None:
    longest = "é" * MAX_TEXT_CHARS
    assert store.send("claude", "codex", longest).text == longest
    assert store.send("claude", "codex", "héllo ✓ 🐍".encode()).text == "héllo ✓ 🐍"
    assert store.send("claude", "codex", " x ").text == " x "
    assert [m.text for m in store.queued_for("codex")] == [longest, "héllo ✓ 🐍", " x "]


@pytest.mark.parametrize("name", ["", "lispm", "a b", "-x", "x" * 65, None, "claude\n"])
def test_bad_names(store: LedgerStore, path: Path, name: Any) -> None:
    for call in (
        lambda: store.send(name, "codex", "hi"),
        lambda: store.send("claude", name, "hi"),
        lambda: store.ask(name, "codex", "hi"),
        lambda: store.ask("claude", name, "hi"),
        lambda: store.reply(name, "R1", "hi"),
        lambda: store.end_requests_to(name),
    ):
        with pytest.raises(InvalidParams):
            call()
    assert counts(path) == (0, 0)


def test_error_codes_are_distinct_and_in_range() -> None:
    classes = [LedgerError, EmptyText, TextTooLong, InvalidUtf8, UnknownRequest,
               RequestClosed, NotAsked, SelfRequest, UnknownMessage, BadTransition]
    codes = [cls.code for cls in classes]
    assert len(set(codes)) == len(codes)
    assert all(-32019 <= code <= -32010 for code in codes)
    assert all(issubclass(cls, LispmError) for cls in classes)


def test_second_reply_is_refused_by_the_schema_too(store: LedgerStore, path: Path) -> None:
    store.ask("claude", "codex", "q")
    store.reply("codex", "R1", "a")
    conn = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO messages (kind, sender, recipient, text, request_n, created_at)"
                " VALUES ('reply', 'codex', 'claude', 'b', 1, 0)"
            )
    finally:
        conn.close()


# --- the file -------------------------------------------------------------------


def test_file_modes(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "ledger.db"
    with LedgerStore(path) as store:
        store.send("claude", "codex", "hi")
        for folder in (tmp_path / "a", tmp_path / "a" / "b"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
            assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
        mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_open_tightens_mode_and_refuses_symlinks(tmp_path: Path) -> None:
    loose = tmp_path / "loose.db"
    loose.touch(mode=0o644)
    os.chmod(loose, 0o644)
    LedgerStore(loose).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600
    link = tmp_path / "link.db"
    link.symlink_to(loose)
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        LedgerStore(link)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    with pytest.raises(LedgerError):
        LedgerStore(folder)
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    with pytest.raises(LedgerError, match="not a regular file"):
        LedgerStore(fifo)


def test_newer_schema_is_refused(path: Path) -> None:
    LedgerStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(LedgerError, match="schema 99"):
        LedgerStore(path)


def test_a_failed_write_is_a_ledger_error_and_leaves_nothing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lispm_sidecar.ledger._BUSY_TIMEOUT_MS", 50)
    with LedgerStore(path) as store:
        store.ask("claude", "codex", "q")
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(LedgerError, match="could not write"):
            store.reply("codex", "R1", "a")
        with pytest.raises(LedgerError, match="could not write"):
            store.send("claude", "codex", "m")
        blocker.execute("ROLLBACK")
        blocker.close()
        assert store.request("R1").state == "open"
        assert counts(path) == (1, 1)
        assert store.reply("codex", "R1", "a").id == 2


# --- restarts and ids -----------------------------------------------------------


def test_state_survives_reopen(path: Path) -> None:
    with LedgerStore(path) as store:
        queued = store.send("claude", "codex", "queued")
        store.mark_delivered(store.send("claude", "codex", "pasted").id)
        open_request = store.ask("codex", "claude", "open")
        answered = store.ask("claude", "codex", "answered")
        store.reply("codex", answered.id, "yes")
    with LedgerStore(path) as store:
        assert store.recipients_with_queued() == ["claude", "codex"]
        assert [m.text for m in store.queued_for("codex")] == ["queued", "answered"]
        assert store.queued_for("codex")[0] == queued
        assert store.open_requests() == [open_request]
        with pytest.raises(RequestClosed):
            store.reply("codex", answered.id, "again")
        assert store.reply("claude", open_request.id, "late").recipient == "codex"
        assert store.ask("claude", "codex", "next").id == "R3"


def test_ids_never_reused_after_deletes(path: Path) -> None:
    with LedgerStore(path) as store:
        for i in range(3):
            store.ask("claude", "codex", f"q{i}")
        last_message = store.send("claude", "codex", "m").id
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM messages")
    conn.execute("DELETE FROM requests")
    conn.commit()
    conn.close()
    with LedgerStore(path) as store:
        assert store.ask("claude", "codex", "after").id == "R4"
        assert store.send("claude", "codex", "m").id > last_message
        with pytest.raises(UnknownRequest):
            store.reply("codex", "R3", "gone")


def test_rolled_back_ask_leaves_no_trace(path: Path) -> None:
    with LedgerStore(path) as store:
        store.ask("claude", "codex", "q1")
        with pytest.raises(RuntimeError), store.batch():
            assert store.ask("claude", "codex", "q2").id == "R2"
            raise RuntimeError("abort")
        with pytest.raises(UnknownRequest):
            store.request("R2")
        assert [r.id for r in store.open_requests()] == ["R1"]


CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from lispm_sidecar.ledger import LedgerStore
    store = LedgerStore(sys.argv[2])
    mode, count = sys.argv[3], int(sys.argv[4])
    i = 0
    while count < 0 or i < count:
        i += 1
        request = store.ask("claude", "codex", f"question {i}")
        print("asked", request.id, flush=True)
        store.reply("codex", request.id, f"answer {i}")
        print("answered", request.id, flush=True)
        message = store.send("codex", "claude", f"note {i}")
        print("sent", message.id, flush=True)
    os._exit(0)  # no close, no checkpoint
    """
)


def child(path: Path, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(PYTHON_DIR), str(path), "run", str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )


def complete_lines(output: str) -> list[str]:
    """The lines of OUTPUT that were written whole (the kill may cut the last one)."""
    return output.split("\n")[:-1]


def check_after_crash(path: Path, lines: list[str]) -> None:
    """Everything reported committed is there, once; the ledger goes on with fresh ids.

    (The rule goes one way: the kill may fall between a commit and its line,
    so a request not reported answered may be answered.)"""
    asked = {line.split()[1] for line in lines if line.startswith("asked")}
    answered = {line.split()[1] for line in lines if line.startswith("answered")}
    sent = {int(line.split()[1]) for line in lines if line.startswith("sent")}
    with LedgerStore(path) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for request_id in asked:
            request = store.request(request_id)
            assert request.state in (
                ("answered",) if request_id in answered else ("open", "answered"))
        for message_id in sent:
            assert store.message(message_id).text.startswith("note")
        rows = store._conn.execute(
            "SELECT request_n, kind, count(*) FROM messages WHERE request_n IS NOT NULL"
            " GROUP BY request_n, kind"
        ).fetchall()
        assert all(row[2] == 1 for row in rows)
        numbers = [r[0] for r in store._conn.execute("SELECT n FROM requests ORDER BY n")]
        assert numbers == list(range(1, len(numbers) + 1))
        texts = [r[0] for r in store._conn.execute("SELECT text FROM messages")]
        assert len(texts) == len(set(texts))
        assert store.ask("claude", "codex", "after").number == len(numbers) + 1


def test_commits_survive_exit_without_close(path: Path) -> None:
    proc = child(path, 50)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    lines = out.splitlines()
    assert len(lines) == 150
    check_after_crash(path, lines)
    with LedgerStore(path) as store:
        assert len(store.open_requests()) == 1  # "after"
        assert len(store.queued_for("claude")) == 100


def test_commits_survive_sigkill_mid_run(path: Path) -> None:
    proc = child(path, -1)
    assert proc.stdout is not None
    lines: list[str] = []
    while len(lines) < 301:
        lines.append(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    lines += complete_lines(proc.stdout.read())
    proc.stdout.close()
    check_after_crash(path, lines)


# --- concurrency ----------------------------------------------------------------


def race(path: Path, *calls: Callable[[LedgerStore], object]) -> list[object]:
    """Run CALLS at once, each on its own thread and connection; return results or errors."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        with LedgerStore(path) as store:
            barrier.wait()
            try:
                results[i] = calls[i](store)
            except LispmError as err:
                results[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def replying(request_id: str, text: str) -> Callable[[LedgerStore], object]:
    return lambda store: store.reply("codex", request_id, text)


def test_two_concurrent_replies_exactly_one_wins(path: Path) -> None:
    with LedgerStore(path) as store:
        ids = [store.ask("claude", "codex", f"q{i}").id for i in range(20)]
    for request_id in ids:
        results = race(
            path,
            replying(request_id, "first"),
            replying(request_id, "second"),
        )
        errors = [r for r in results if isinstance(r, LispmError)]
        assert len(errors) == 1 and isinstance(errors[0], RequestClosed), results
    with LedgerStore(path) as store:
        replies = [m for m in store.queued_for("claude") if m.kind == "reply"]
        assert sorted(m.request_id or "" for m in replies) == sorted(ids)
        assert all(store.request(r).state == "answered" for r in ids)


def test_reply_racing_the_end_of_the_asked_agent(path: Path) -> None:
    with LedgerStore(path) as store:
        ids = [store.ask("claude", "codex", f"q{i}").id for i in range(10)]
    for request_id in ids:
        race(
            path,
            replying(request_id, "answer"),
            lambda store: store.end_requests_to("codex"),
        )
    with LedgerStore(path) as store:
        for request_id in ids:
            request = store.request(request_id)
            told = [m for m in store.queued_for("claude") if m.request_id == request_id]
            assert len(told) == 1
            kind = {"answered": "reply", "ended": "notice"}[request.state]
            assert told[0].kind == kind


# --- the asyncio facade ---------------------------------------------------------


async def test_async_facade_round_trip(path: Path) -> None:
    async with await Ledger.open(path, clock=Clock()) as ledger:
        assert ledger.path == path
        request = await ledger.ask("claude", "codex", "q")
        [message] = await ledger.queued_for("codex")
        assert (await ledger.mark_delivered(message.id)).state == "delivered"
        assert (await ledger.mark_picked_up(message.id)).state == "picked_up"
        answer = await ledger.reply("codex", request.id, "a")
        assert (await ledger.request(request.id)).reply_message_id == answer.id
        sent = await ledger.send("claude", "codex", "m")
        assert (await ledger.mark_failed(sent.id, "gone")).state == "failed"
        assert (await ledger.requeue(sent.id)).state == "queued"
        assert await ledger.recipients_with_queued() == ["claude", "codex"]
        assert (await ledger.message(sent.id)).text == "m"
        await ledger.ask("claude", "codex", "q2")
        assert [r.id for r in await ledger.open_requests()] == ["R2"]
        [notice] = await ledger.end_requests_to("codex")
        assert notice.text == "codex ended without replying to request R2."
        failed = await ledger.fail_queued_for("codex", "closed")
        assert [(m.id, m.kind) for m in failed] == [(sent.id, "message"), (sent.id + 1, "request")]
        assert (await ledger.notify("claude", "hi")).sender == "lispm"
        assert len(await ledger.entries(3, agent="claude")) == 3
        with pytest.raises(RequestClosed):
            await ledger.reply("codex", request.id, "again")
        with pytest.raises(sqlite3.ProgrammingError):
            ledger._store.queued_for("codex")  # the connection lives on the worker thread
    with pytest.raises(LedgerError, match="closed"):
        await ledger.send("claude", "codex", "late")
    await ledger.close()


async def test_async_open_failure_is_reported(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(LedgerError, match="Is a directory"):
        await Ledger.open(tmp_path / "dir.db")


async def test_async_concurrent_replies_one_wins(path: Path) -> None:
    async with await Ledger.open(path) as ledger:
        request = await ledger.ask("claude", "codex", "q")
        results = await asyncio.gather(
            *(ledger.reply("codex", request.id, f"a{i}") for i in range(5)),
            return_exceptions=True,
        )
        assert sum(not isinstance(r, BaseException) for r in results) == 1
        assert all(isinstance(r, RequestClosed) for r in results if isinstance(r, BaseException))
        assert len(await ledger.queued_for("claude")) == 1


async def test_async_facade_does_not_block_the_loop(path: Path) -> None:
    async with await Ledger.open(path) as ledger:
        ticks: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        await until(lambda: len(ticks) >= 2, "the ticker")
        start = time.perf_counter()
        sends = [await ledger.send("claude", "codex", f"m{i}") for i in range(1000)]
        duration = time.perf_counter() - start
        done.set()
        await task
        assert len({m.id for m in sends}) == 1000
        during = [t for t in ticks if start <= t <= start + duration]
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        # Blocking SQLite on the loop would stall the ticker for the whole batch.
        assert max(gaps) < duration / 4, (max(gaps), duration)
        assert len(during) >= 20
    with LedgerStore(path) as store:
        assert len(store.queued_for("codex")) == 1000


# --- group commit ---------------------------------------------------------------


class Worker:
    """Holds the ledger's worker thread until released, so that calls made meanwhile wait."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.started = threading.Event()
        self.release = threading.Event()
        self.task: asyncio.Task[object] | None = None

    async def __aenter__(self) -> Worker:
        def hold(store: LedgerStore) -> None:
            self.started.set()
            assert self.release.wait(30)

        self.task = asyncio.create_task(self.ledger.run(hold))
        assert await asyncio.to_thread(self.started.wait, 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)


async def until(predicate: Callable[[], bool], what: str, seconds: float = 10) -> None:
    """Yield to the loop until PREDICATE holds; fail after SECONDS."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0)


async def queued_behind(ledger: Ledger, calls: int) -> None:
    """Wait until CALLS calls wait for the (held) worker."""
    await until(lambda: len(ledger._waiting) >= calls, f"{calls} waiting calls")


def count_commits(store: LedgerStore) -> list[str]:
    """Trace STORE's connection; return the list its COMMITs are appended to."""
    commits: list[str] = []
    store._conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    return commits


async def test_calls_that_wait_together_share_one_commit(path: Path) -> None:
    async with await Ledger.open(path) as ledger:
        commits = await ledger.run(count_commits)
        async with Worker(ledger):
            sends = [asyncio.create_task(ledger.send("claude", "codex", f"m{i}"))
                     for i in range(50)]
            await queued_behind(ledger, 50)
        sent = await asyncio.wait_for(asyncio.gather(*sends), 30)
        assert commits == ["COMMIT"]
        assert [m.text for m in sent] == [f"m{i}" for i in range(50)]
        # One call alone is its own transaction, as before.
        await ledger.send("claude", "codex", "alone")
        assert commits == ["COMMIT", "COMMIT"]
    assert counts(path) == (51, 0)


async def test_a_refusal_in_a_group_undoes_only_itself(path: Path) -> None:
    def send_then_fail(store: LedgerStore) -> None:
        with store.batch():
            store.send("claude", "codex", "never")
            raise RuntimeError("abort")

    async with await Ledger.open(path) as ledger:
        asked = await ledger.ask("claude", "codex", "q")
        commits = await ledger.run(count_commits)
        async with Worker(ledger):
            calls = [
                ledger.send("claude", "codex", "first"),
                ledger.reply("claude", asked.id, "not asked of me"),
                ledger.run(send_then_fail),
                ledger.reply("codex", asked.id, "the answer"),
                ledger.reply("codex", asked.id, "a second answer"),
                ledger.send("codex", "claude", "last"),
            ]
            results = asyncio.gather(*calls, return_exceptions=True)
            await queued_behind(ledger, 6)
        first, not_asked, failed, answer, second, last = await asyncio.wait_for(results, 30)
        assert commits == ["COMMIT"]
        assert isinstance(not_asked, NotAsked) and isinstance(second, RequestClosed)
        assert isinstance(failed, RuntimeError)
        assert isinstance(first, Message) and isinstance(answer, Message)
        assert isinstance(last, Message)
    with LedgerStore(path) as store:
        assert store.request(asked.id).state == "answered"
        assert [m.text for m in store.entries()] == ["last", "the answer", "first", "q"]


async def test_nobody_is_told_before_the_commit(path: Path) -> None:
    """Each caller resumes only when another connection can see its change."""
    seen: list[bool] = []

    async def send(i: int) -> None:
        message = await ledger.send("claude", "codex", f"m{i}")
        conn = sqlite3.connect(path)
        try:
            seen.append(conn.execute("SELECT count(*) FROM messages WHERE id = ?",
                                     (message.id,)).fetchone() == (1,))
        finally:
            conn.close()

    async with await Ledger.open(path) as ledger:
        async with Worker(ledger):
            group = asyncio.gather(*(send(i) for i in range(20)))
            await queued_behind(ledger, 20)
        await asyncio.wait_for(group, 30)
        await asyncio.wait_for(asyncio.gather(*(send(i) for i in range(20, 100))), 30)
    assert seen == [True] * 100


async def test_a_failed_begin_fails_the_whole_group(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lispm_sidecar.ledger._BUSY_TIMEOUT_MS", 50)
    async with await Ledger.open(path) as ledger:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            async with Worker(ledger):
                sends = asyncio.gather(*(ledger.send("claude", "codex", f"m{i}") for i in range(3)),
                                       return_exceptions=True)
                await queued_behind(ledger, 3)
                blocker.execute("BEGIN IMMEDIATE")
            results = await asyncio.wait_for(sends, 30)
            assert all(isinstance(r, LedgerError) and "could not write" in str(r)
                       for r in results), results
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        assert counts(path) == (0, 0)
        assert (await ledger.send("claude", "codex", "after")).text == "after"


async def test_a_call_that_ends_the_transaction_leaves_the_others_theirs(path: Path) -> None:
    def rollback(store: LedgerStore) -> None:
        store._conn.execute("ROLLBACK")

    async with await Ledger.open(path) as ledger:
        async with Worker(ledger):
            calls = asyncio.gather(ledger.send("claude", "codex", "before"), ledger.run(rollback),
                                   ledger.send("claude", "codex", "after"),
                                   return_exceptions=True)
            await queued_behind(ledger, 3)
        before, rolled_back, after = await asyncio.wait_for(calls, 30)
        assert isinstance(before, Message) and isinstance(after, Message)
        assert rolled_back is None
    with LedgerStore(path) as store:
        assert [m.text for m in store.queued_for("codex")] == ["before", "after"]


async def test_a_call_cancelled_before_the_worker_turns_to_it_is_not_run(path: Path) -> None:
    async with await Ledger.open(path) as ledger:
        async with Worker(ledger):
            cancelled = asyncio.create_task(ledger.send("claude", "codex", "cancelled"))
            kept = asyncio.create_task(ledger.send("claude", "codex", "kept"))
            await queued_behind(ledger, 2)
            cancelled.cancel()
        assert (await asyncio.wait_for(kept, 30)).text == "kept"
        assert cancelled.cancelled()
        assert [m.text for m in await ledger.queued_for("codex")] == ["kept"]


async def test_close_runs_what_waits_and_refuses_what_comes_after(path: Path) -> None:
    ledger = await Ledger.open(path)
    async with Worker(ledger):
        waiting = asyncio.gather(*(ledger.send("claude", "codex", f"m{i}") for i in range(5)))
        await queued_behind(ledger, 5)
        closing = asyncio.create_task(ledger.close())
        await until(lambda: ledger._closed, "the ledger closing")
        with pytest.raises(LedgerError, match="closed"):
            await ledger.send("claude", "codex", "late")
    assert len(await asyncio.wait_for(waiting, 30)) == 5
    await asyncio.wait_for(closing, 30)
    assert counts(path) == (5, 0)


ASYNC_CHILD = textwrap.dedent(
    """
    import asyncio, os, sys
    sys.path.insert(0, sys.argv[1])
    from lispm_sidecar.ledger import Ledger

    async def converse(ledger, k):
        asker, asked = f"agent-{k}", f"agent-{k + 1}"
        i = 0
        while True:
            i += 1
            request = await ledger.ask(asker, asked, f"question {k}.{i}")
            print("asked", request.id, flush=True)
            await ledger.reply(asked, request.id, f"answer {k}.{i}")
            print("answered", request.id, flush=True)
            message = await ledger.send(asked, asker, f"note {k}.{i}")
            print("sent", message.id, flush=True)

    async def main():
        ledger = await Ledger.open(sys.argv[2])
        await asyncio.gather(*(converse(ledger, k) for k in range(20)))

    asyncio.run(main())
    """
)


def test_group_commits_survive_sigkill_mid_run(path: Path) -> None:
    """What the facade reported, 20 conversations at once, is there after a SIGKILL."""
    proc = subprocess.Popen([sys.executable, "-c", ASYNC_CHILD, str(PYTHON_DIR), str(path)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    while len(lines) < 1500:
        line = proc.stdout.readline()
        assert line, "the child ended early"
        lines.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    lines += complete_lines(proc.stdout.read())
    proc.stdout.close()
    asked = {line.split()[1] for line in lines if line.startswith("asked")}
    answered = {line.split()[1] for line in lines if line.startswith("answered")}
    sent = {int(line.split()[1]) for line in lines if line.startswith("sent")}
    assert len(asked) >= 500
    with LedgerStore(path) as store:
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # What was reported is there (a group's answers are printed one by one,
        # so the kill may fall after a commit and before some of its lines).
        for request_id in asked:
            assert store.request(request_id).state in (
                ("answered",) if request_id in answered else ("open", "answered"))
        for message_id in sent:
            assert store.message(message_id).text.startswith("note")
        numbers = [r[0] for r in store._conn.execute("SELECT n FROM requests ORDER BY n")]
        assert numbers == list(range(1, len(numbers) + 1))
        assert store.ask("claude", "codex", "after").number == len(numbers) + 1
