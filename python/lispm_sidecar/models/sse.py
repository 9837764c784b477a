"""Server-sent events, read incrementally from the bytes of an HTTP body.

The decoder keeps only the unfinished line and the unfinished event, so
a body of any size costs memory in proportion to its longest event, and
time in proportion to its length (a line is scanned once, however many
reads it arrives in).
"""

from __future__ import annotations

from collections.abc import Iterator

#: The longest line the decoder holds; a longer one is a broken stream.
MAX_LINE = 16 << 20


class SseError(ValueError):
    """The body is not an event stream LispM can read."""


class SseDecoder:
    """Feed it bytes; it yields `(event, data)` for each complete event."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str, str]]:
        """The events completed by CHUNK, in order."""
        self._buffer += chunk
        start = 0
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            line = bytes(buffer[start:end]).rstrip(b"\r")
            start = end + 1
            self._scanned = start
            event = self._line(line)
            if event is not None:
                yield event
        del buffer[:start]
        self._scanned = len(buffer)
        if self._scanned > MAX_LINE:
            raise SseError(f"an event-stream line longer than {MAX_LINE} bytes")

    def _line(self, line: bytes) -> tuple[str, str] | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = (self._event, "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        text = value.removeprefix(b" ").decode("utf-8", "replace")
        if name == b"data":
            self._data.append(text)
        elif name == b"event":
            self._event = text
        return None

    def close(self) -> Iterator[tuple[str, str]]:
        """The event the body's end completes, if its last blank line is missing."""
        if self._buffer:
            line = bytes(self._buffer).rstrip(b"\r")
            self._buffer.clear()
            self._line(line)
        if self._data:
            yield self._event, "\n".join(self._data)
            self._event, self._data = "", []
