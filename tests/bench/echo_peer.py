"""The baseline peer of the round-trip benchmark: a minimal JSON-RPC echo on stdio.

Plain stdlib and blocking I/O, Content-Length framing on stdin and stdout,
so that the benchmark compares LispM's sidecar with about the least a
Python peer can do:

- any request is answered with its params;
- `bench/ping-emacs {count}` sends COUNT sequential `emacs/ping` requests
  to Emacs, each waiting for its answer, then answers `{count, seconds}`;
- notifications and answers to nothing are ignored; end of input ends it.

Run as `python echo_peer.py`; it imports nothing from LispM.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import Any, BinaryIO

Message = dict[str, Any]


def read_message(stream: BinaryIO) -> Message | None:
    """Return the next framed message from STREAM, or None at end of input."""
    length = -1
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length >= 0:
                break
            continue
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = stream.read(length)
    if len(body) < length:
        return None
    message: Message = json.loads(body)
    return message


def write_message(stream: BinaryIO, message: Message) -> None:
    """Write MESSAGE to STREAM as one frame and flush it."""
    body = json.dumps(message, separators=(",", ":")).encode()
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


class Peer:
    """The echo peer on a pair of binary streams."""

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self.inp = inp
        self.out = out
        self.next_id = 0

    def answer(self, message: Message) -> None:
        """Answer the request MESSAGE (which may itself call Emacs)."""
        params = message.get("params")
        if message["method"] == "bench/ping-emacs":
            count = int((params or {}).get("count", 1))
            start = time.perf_counter()
            for i in range(count):
                self.request("emacs/ping", {"i": i})
            result: Any = {"count": count, "seconds": time.perf_counter() - start}
        else:
            result = params if params is not None else {}
        write_message(self.out, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def request(self, method: str, params: Message) -> Any:
        """Send Emacs METHOD and wait for its answer, answering Emacs meanwhile."""
        self.next_id += 1
        my_id = self.next_id
        write_message(self.out, {"jsonrpc": "2.0", "id": my_id, "method": method,
                                 "params": params})
        while True:
            message = read_message(self.inp)
            if message is None:
                raise EOFError("Emacs closed the pipe")
            if "method" in message:
                if "id" in message:
                    self.answer(message)
            elif message.get("id") == my_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message.get("result")

    def serve(self) -> None:
        """Answer requests until end of input."""
        while (message := read_message(self.inp)) is not None:
            if "method" in message and "id" in message:
                self.answer(message)


def main() -> None:
    """Serve on stdin and stdout."""
    with contextlib.suppress(EOFError, BrokenPipeError):
        Peer(sys.stdin.buffer, sys.stdout.buffer).serve()


if __name__ == "__main__":
    main()
