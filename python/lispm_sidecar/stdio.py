"""Content-Length framed JSON over the sidecar's stdin and stdout.

pygls' own `start_io` owns the event loop (`asyncio.run`) and reads stdin
through a thread pool, so the sidecar reads and writes its pipes itself on
the one shared loop.  A malformed frame never stops the reader: it is
reported to a callback and reading goes on at the next frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
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


def _content_length(header_block: bytes) -> int | None:
    for line in header_block.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return None
            return length if 0 <= length <= MAX_FRAME_BYTES else None
    return None


async def read_frames(
    reader: asyncio.StreamReader,
    on_message: Callable[[Any], None],
    on_error: Callable[[FrameError], None],
) -> None:
    """Read frames from READER until end of file.

    Each decoded JSON value goes to ON_MESSAGE; each frame that is not valid
    (no usable Content-Length, a body that is not JSON) goes to ON_ERROR.
    """
    while True:
        try:
            header_block = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError:
            # A header block this long is garbage: drop it and resynchronise.
            await reader.read(HEADER_LIMIT)
            on_error(FrameError(-32700, "frame header too long"))
            continue
        length = _content_length(header_block[:-4])
        if length is None:
            on_error(FrameError(-32700, "frame without a valid Content-Length header"))
            continue
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError:
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            on_error(FrameError(-32700, f"invalid JSON: {err}"))
            continue
        on_message(message)


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

    reader = asyncio.StreamReader(limit=HEADER_LIMIT)
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
