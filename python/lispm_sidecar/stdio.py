"""Content-Length framed JSON over the sidecar's stdin and stdout.

pygls' own `start_io` owns the event loop (`asyncio.run`) and reads stdin
through a thread pool, so the sidecar reads and writes its pipes itself on
the one shared loop.  A malformed frame never stops the reader: it is
reported to a callback and reading goes on at the next frame.

Only Emacs writes this pipe, so a bad frame should never come; if one
does, the reader finds the next frame's header instead of gluing the
leftover bytes to it.  A header is the last `Content-Length: N` line before
a blank line, and whatever precedes it that is not a header line is
dropped.  A body is N bytes of JSON: one that does not parse is dropped
(its tail, if N was short, is then dropped before the next header); and as
a JSON text never holds a raw `Content-Length: M` CRLF CRLF, a body that
does was given too long a length, and the frame starting there is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

F_SETPIPE_SZ = 1031  # Linux; not exported by the fcntl module before 3.10 on all builds.
PIPE_SIZE = 1 << 20
MAX_FRAME_BYTES = 256 << 20
HEADER_LIMIT = 8192


class ByteWriter(Protocol):
    """Anything that takes whole frames of bytes."""

    def write(self, data: bytes) -> None: ...


@dataclass(frozen=True)
class FrameError:
    """A frame that could not be read as JSON-RPC: what went wrong, and the id if known."""

    code: int
    message: str


def grow_pipe(fd: int) -> None:
    """Grow the pipe behind FD to 1 MiB, so large messages do not stall Emacs."""
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)


def frame(message: Any) -> bytes:
    """Encode MESSAGE as one Content-Length frame; the length counts bytes."""
    body = orjson.dumps(message)
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


_HEADER_END = b"\r\n\r\n"
_PLAIN_HEADER = b"Content-Length: "
#: Where the header of `_PLAIN_HEADER` and a length of up to 20 digits ends.
_PLAIN_HEADER_MAX = len(_PLAIN_HEADER) + 24
_LENGTH_LINE = re.compile(rb"content-length[ \t]*:([^\r\n]*)", re.IGNORECASE)
_HEADER_LINES = re.compile(rb"(?:[!-9;-~]+[ \t]*:[^\r\n]*\r\n)*")
#: What one read takes from stdin at most (a pipe read gives up to 256 KiB).
READ_SIZE = 1 << 18


def _content_length(value: bytes | bytearray) -> int | None:
    text = value.strip()
    if not text.isdigit():
        return None
    length = int(text)
    return length if length <= MAX_FRAME_BYTES else None


class FrameReader:
    """The frames of one byte stream, found again after a bad one."""

    def __init__(self, on_message: Callable[[Any], None],
                 on_error: Callable[[FrameError], None]) -> None:
        self._on_message = on_message
        self._on_error = on_error
        self._buffer = bytearray()
        #: The awaited body of the frame whose header was read: where it starts, its length.
        self._body: tuple[int, int] | None = None
        #: How far the awaited body has been searched for the end of a header.
        self._searched = 0
        #: Bytes are being skipped (reported once for each stretch).
        self._skipping = False

    def feed(self, data: bytes) -> None:
        """Take DATA and hand on every frame it completes."""
        self._buffer += data
        while self._take_body() if self._body is not None else self._take_header():
            pass

    def _error(self, message: str) -> None:
        self._on_error(FrameError(-32700, message))

    def _skip(self, count: int) -> None:
        """Drop the first COUNT bytes, which are not a frame."""
        if count <= 0:
            return
        del self._buffer[:count]
        if not self._skipping:
            self._skipping = True
            self._error("skipped bytes that were not a frame")

    def _length_line(self, start: int, header_end: int) -> re.Match[bytes] | None:
        """The last Content-Length line of the header ending at HEADER_END."""
        lines = list(_LENGTH_LINE.finditer(
            self._buffer, max(start, header_end + 2 - HEADER_LIMIT), header_end + 2))
        return lines[-1] if lines else None

    def _take_header(self) -> bool:
        # What jsonrpc.el sends, a header of one `Content-Length: N` line,
        # takes the short way; anything else the careful one below.
        if self._buffer.startswith(_PLAIN_HEADER):
            end = self._buffer.find(_HEADER_END, len(_PLAIN_HEADER), _PLAIN_HEADER_MAX)
            if end > 0 and (length := _content_length(self._buffer[len(_PLAIN_HEADER):end])):
                self._skipping = False
                self._body = (end + 4, length)
                self._searched = end + 4
                return True
        end = self._buffer.find(_HEADER_END)
        if end < 0:
            # A header holds at most HEADER_LIMIT bytes: what comes before them is none.
            self._skip(len(self._buffer) - HEADER_LIMIT)
            return False
        line = self._length_line(0, end)
        if line is None:
            del self._buffer[:end + 4]
            self._skipping = False
            self._error("frame without a valid Content-Length header")
            return True
        length = _content_length(line.group(1))
        # Other header lines before it are dropped quietly; bytes that are
        # not header lines (a bad frame's leftovers) are reported.
        headers = _HEADER_LINES.match(self._buffer, 0, line.start())
        if headers is not None and headers.end() == line.start():
            del self._buffer[:line.start()]
        else:
            self._skip(line.start())
        self._skipping = False
        end = self._buffer.find(_HEADER_END)
        if length is None:
            del self._buffer[:end + 4]
            self._error("frame without a valid Content-Length header")
            return True
        self._body = (end + 4, length)
        self._searched = end + 4
        return True

    def _next_header(self, start: int, stop: int) -> int | None:
        """Where a frame's header starts in the awaited body, if one does.

        A JSON text holds no raw CR LF CR LF after a `Content-Length: N` line
        (a string cannot hold CR, and a number cannot follow a colon).
        """
        position = max(start, self._searched - 3)
        while (end := self._buffer.find(_HEADER_END, position, stop)) >= 0:
            line = self._length_line(start, end)
            if line is not None and _content_length(line.group(1)) is not None:
                return line.start()
            position = end + 1
        self._searched = stop
        return None

    def _take_body(self) -> bool:
        assert self._body is not None
        start, length = self._body
        stop = min(len(self._buffer), start + length)
        header = self._next_header(start, stop)
        if header is not None:
            self._body = None
            del self._buffer[:header]
            self._error("frame shorter than its Content-Length")
            return True
        if len(self._buffer) < start + length:
            return False
        self._body = None
        body = bytes(self._buffer[start:start + length])
        del self._buffer[:start + length]
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            self._error(f"invalid JSON: {err}")
            return True
        self._on_message(message)
        return True


async def read_frames(
    reader: asyncio.StreamReader,
    on_message: Callable[[Any], None],
    on_error: Callable[[FrameError], None],
) -> None:
    """Read frames from READER until end of file.

    Each decoded JSON value goes to ON_MESSAGE; each frame that is not valid
    (no usable Content-Length, a body that is not JSON, a length that does
    not match the body) and each stretch of bytes that is no frame goes to
    ON_ERROR, and reading goes on at the next frame (see the module
    docstring).
    """
    frames = FrameReader(on_message, on_error)
    while data := await reader.read(READ_SIZE):
        frames.feed(data)


class _BlockingWriter:
    """Write frames with plain `os.write`: for stdout redirected to a file."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


async def open_stdio() -> tuple[asyncio.StreamReader, ByteWriter]:
    """Take over fds 0 and 1 for framed JSON; `print` then goes to stderr.

    Returns a stream reader for stdin and a writer for the original stdout.
    """
    loop = asyncio.get_running_loop()
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for fd in (0, wire_fd):
        grow_pipe(fd)

    reader = asyncio.StreamReader(limit=READ_SIZE)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0)
    )
    writer: ByteWriter
    if stat.S_ISREG(os.fstat(wire_fd).st_mode):
        writer = _BlockingWriter(wire_fd)
    else:
        transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(wire_fd, "wb", buffering=0)
        )
        writer = transport
    return reader, writer
