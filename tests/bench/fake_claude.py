"""A fake Claude Code for the delivery benchmark: it keeps Claude's records, and times pastes.

LispM starts it as it starts `claude` (through a wrapper the benchmark
writes, which adds the `--bench-*` options), with `--session-id ID
--mcp-config FILE --allowedTools ...`.  Like Claude Code 2.1.197 it keeps
`<claude home>/sessions/<pid>.json` (rewritten in place: `pid`,
`sessionId`, `cwd`, `procStart` = field 22 of /proc/self/stat, `status`)
and appends its transcript `<claude home>/projects/<escaped cwd>/<session
id>.jsonl`, where `<claude home>` is `$CLAUDE_CONFIG_DIR` or `~/.claude`.
Its pty is put in raw mode, as the real CLI's is.

Each round:

1. the prompt: the status goes `busy`, then a user prompt entry is
   appended (from the second round on, the text of the last paste: that
   is the pickup LispM's delivery queue waits for);
2. it tells the driver `busy K` on the control socket; the driver queues
   a message for this agent (`send_message`) and answers `queued K`;
3. it stays busy a random while (uniform over 0–1 s from the prompt in
   measured rounds, so that its idle moments fall at random phases of a
   1 s poller), then writes status `idle` and, `IDLE_LAG` later, **the idle
   write**: one append of an assistant `end_turn` entry and a
   `turn_duration` entry.  The status alone does not make LispM's
   watcher say idle (the transcript lags the status, as in Claude
   Code); this append does.  `t0 = time.time()` is taken right before it;
4. it reads its pty until `ESC[200~` (`t1`), then through `ESC[201~` (the
   paste's text) and the Return that follows (`t2`);
5. it reports the round to the driver and waits for `next K` (the driver
   answers once its 1 s poller has seen this idle moment, so that every
   idle moment lasts until the poller sees it).

At the end it writes the pickup of the last message, writes every
round's measurements as JSON to the `--bench-results` file and exits
(the driver sees its control socket close).  Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import select
import socket
import sys
import termios
import time
import tty
import uuid
from pathlib import Path
from typing import Any

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
#: Seconds between the status going idle and the transcript's turn end
#: (Claude Code writes its transcript in batches, about 100 ms after).
IDLE_LAG = 0.02
#: Seconds a round may wait for a paste, or for the driver.
ROUND_TIMEOUT = 20.0
VERSION = "2.1.197"


def proc_start() -> str:
    """Field 22 (starttime) of /proc/self/stat, as Claude Code records it."""
    with open("/proc/self/stat", "rb") as f:
        data = f.read()
    return data[data.rfind(b")") + 2:].split()[22 - 3].decode()


def project_dir_name(cwd: str) -> str:
    """The folder name Claude Code gives the transcripts of CWD: every UTF-16
    code unit other than [A-Za-z0-9] becomes "-"; past 200 characters, the
    name is cut and gets "-" and the base-36 Java string hash of CWD."""
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
    n, digits = abs(h), ""
    while True:
        n, r = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
        if n == 0:
            return f"{name[:200]}-{digits}"


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def round_uuid(number: int) -> str:
    """The uuid of round NUMBER's turn end, from which the driver's poller reads NUMBER."""
    return f"00000000-0000-4000-8000-{number:012d}"


class Records:
    """Claude Code's pid file and transcript for this process."""

    def __init__(self, claude_home: Path, session_id: str, cwd: str) -> None:
        self.pid = os.getpid()
        self.session_id = session_id
        self.cwd = cwd
        self.pid_file = claude_home / "sessions" / f"{self.pid}.json"
        self.transcript = claude_home / "projects" / project_dir_name(cwd) / f"{session_id}.jsonl"
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        self._started = int(time.time() * 1000)
        self._proc_start = proc_start()
        self._parent: str | None = None

    def status(self, status: str) -> None:
        """Rewrite the pid file in place with STATUS, as Claude Code does."""
        now = int(time.time() * 1000)
        info = {
            "pid": self.pid, "sessionId": self.session_id, "cwd": self.cwd,
            "startedAt": self._started, "procStart": self._proc_start, "version": VERSION,
            "peerProtocol": 1, "kind": "interactive", "entrypoint": "cli",
            "name": "bench", "nameSource": "derived", "status": status,
            "updatedAt": now, "statusUpdatedAt": now,
        }
        with open(self.pid_file, "wb") as f:
            f.write(json.dumps(info, separators=(",", ":")).encode())

    def _common(self) -> dict[str, Any]:
        return {"userType": "external", "entrypoint": "cli", "cwd": self.cwd,
                "sessionId": self.session_id, "version": VERSION, "gitBranch": "main"}

    def _append(self, entries: list[dict[str, Any]]) -> None:
        data = b"".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                        for e in entries)
        fd = os.open(self.transcript, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def prompt(self, text: str) -> None:
        """Append a user prompt entry (typed or pasted)."""
        entry_id = str(uuid.uuid4())
        self._append([{
            "parentUuid": self._parent, "isSidechain": False, "promptId": str(uuid.uuid4()),
            "type": "user", "message": {"role": "user", "content": text}, "uuid": entry_id,
            "timestamp": _now_iso(), "permissionMode": "default", "origin": {"kind": "human"},
            "promptSource": "typed", **self._common()}])
        self._parent = entry_id

    def turn_end(self, number: int, duration_ms: int) -> None:
        """Append the end of a turn: an assistant `end_turn` and a `turn_duration`, one write."""
        answer_id = str(uuid.uuid4())
        answer = {
            "parentUuid": self._parent, "isSidechain": False,
            "message": {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message",
                        "role": "assistant", "model": "fake",
                        "content": [{"type": "text", "text": f"Done with round {number}."}],
                        "stop_reason": "end_turn", "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 5}},
            "type": "assistant", "uuid": answer_id, "timestamp": _now_iso(), **self._common()}
        summary = {
            "parentUuid": answer_id, "isSidechain": False, "type": "system",
            "subtype": "turn_duration", "durationMs": duration_ms, "messageCount": 2,
            "timestamp": _now_iso(), "uuid": round_uuid(number), "isMeta": False,
            **self._common()}
        self._append([answer, summary])
        self._parent = summary["uuid"]


class Pty:
    """Reads what Emacs writes to this terminal."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def read_until(self, marker: bytes, deadline: float) -> tuple[bytes, float]:
        """Read until MARKER; return what came before it and the time it was read.

        What follows MARKER stays in the buffer."""
        while (index := self.buffer.find(marker)) < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} on the pty; got {self.buffer[-200:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise EOFError("the pty closed")
                self.buffer += chunk
        found = time.time()
        before, self.buffer = self.buffer[:index], self.buffer[index + len(marker):]
        return before, found


class Control:
    """The line-based control socket to the benchmark driver."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.settimeout(ROUND_TIMEOUT)
        self.reader = self.sock.makefile("rb")
        self.writer = self.sock.makefile("wb")

    def send(self, kind: str, **data: Any) -> None:
        self.writer.write(json.dumps({"kind": kind, **data}).encode() + b"\n")
        self.writer.flush()

    def expect(self, kind: str, number: int) -> None:
        line = self.reader.readline()
        message = json.loads(line) if line else {}
        if message.get("kind") != kind or message.get("round") != number:
            raise RuntimeError(f"expected {kind} {number} from the driver, got {line!r}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every round; return the measurements."""
    config = os.environ.get("CLAUDE_CONFIG_DIR")
    claude_home = Path(config) if config else Path.home() / ".claude"
    records = Records(claude_home, args.session_id, os.getcwd())
    pty = Pty(sys.stdin.fileno())
    rng = random.Random(args.bench_seed)
    records.status("idle")
    control = Control(args.bench_control)
    control.send("ready", pid=records.pid, session_id=records.session_id,
                 pid_file=str(records.pid_file), transcript=str(records.transcript))
    rounds: list[dict[str, Any]] = []
    prompt = "Start the delivery benchmark."
    total = args.bench_warmup + args.bench_rounds
    for number in range(total):
        warmup = number < args.bench_warmup
        records.status("busy")
        records.prompt(prompt)
        busy_start = time.monotonic()
        busy = 0.02 if warmup else rng.random()
        control.send("busy", round=number)
        control.expect("queued", number)
        time.sleep(max(0.0, busy_start + busy - time.monotonic()))
        records.status("idle")
        time.sleep(IDLE_LAG)
        t0 = time.time()
        records.turn_end(number, int((time.monotonic() - busy_start) * 1000))
        deadline = time.monotonic() + ROUND_TIMEOUT
        stray, t1 = pty.read_until(PASTE_START, deadline)
        text, _ = pty.read_until(PASTE_END, deadline)
        between, t2 = pty.read_until(b"\r", deadline)
        measured = {
            "round": number, "warmup": warmup, "t0": t0, "t1": t1, "t2": t2,
            "length": len(text), "sha256": hashlib.sha256(text).hexdigest(),
            "stray": len(stray) + len(between),
        }
        rounds.append(measured)
        control.send("pasted", **measured)
        control.expect("next", number)
        prompt = text.decode("utf-8", errors="replace")
    records.status("busy")
    records.prompt(prompt)
    time.sleep(0.05)
    records.status("idle")
    time.sleep(IDLE_LAG)
    records.turn_end(total, 50)
    return {"pid": records.pid, "session_id": records.session_id,
            "pid_file": str(records.pid_file), "transcript": str(records.transcript),
            "rounds": rounds}


def main() -> None:
    """Parse Claude's options and the benchmark's, then run in raw mode."""
    parser = argparse.ArgumentParser(prog="claude")
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--mcp-config")
    parser.add_argument("--allowedTools")
    parser.add_argument("--bench-control", required=True)
    parser.add_argument("--bench-results", required=True)
    parser.add_argument("--bench-rounds", type=int, default=50)
    parser.add_argument("--bench-warmup", type=int, default=2)
    parser.add_argument("--bench-seed", type=int, default=1)
    args, _ = parser.parse_known_args()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    if saved is not None:
        tty.setraw(fd)
    try:
        result = run(args)
    except BaseException as err:
        Path(args.bench_results).write_text(json.dumps({"error": repr(err)}))
        raise
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    temp = Path(args.bench_results + ".tmp")
    temp.write_text(json.dumps(result))
    temp.replace(args.bench_results)


if __name__ == "__main__":
    main()
