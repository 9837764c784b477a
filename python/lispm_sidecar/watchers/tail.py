"""Follow an append-only JSONL file by byte offset.

`JsonlTail.read()` returns only the complete lines appended since the last
call (as bytes, without the newline), keeping an incomplete last line for
later: the reader never decodes text, so a multi-byte character split
between two writes is never mis-split (0x0A occurs in UTF-8 only as a
newline).  A file that shrank (truncated) or was replaced (another inode at
the path) starts over from its first byte, and `read()` says so.

`scan_back()` finds the last line matching a predicate by reading backwards
from the end in blocks, so attaching to a 200 MB transcript costs what its
last entries cost, and leaves the offset at the end: the next `read()`
returns only what is appended afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: Read at most this much per `read()`; `TailRead.more` says when more is left.
MAX_READ = 8 * 1024 * 1024
#: Block size of the backward scan.
SCAN_BLOCK = 64 * 1024
#: How far back `scan_back()` looks by default before giving up.
SCAN_LIMIT = 32 * 1024 * 1024


@dataclass
class TailRead:
    """What one `JsonlTail.read()` found."""

    lines: list[bytes] = field(default_factory=list)
    #: The file was (re)opened from its first byte: new, truncated or replaced.
    reset: bool = False
    #: The file is not there (any more).
    missing: bool = False
    #: More bytes are waiting (the read stopped at `max_read`): call again.
    more: bool = False


class JsonlTail:
    """The reading end of one append-only JSONL file."""

    def __init__(self, path: Path, *, max_read: int = MAX_READ) -> None:
        self.path = path
        self.max_read = max_read
        #: Bytes consumed so far, the kept partial line included.
        self.offset = 0
        self._partial = b""
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        #: Bytes read from the file in total (for tests and benchmarks).
        self.bytes_read = 0

    # ---------------------------------------------------------------- state

    @property
    def is_open(self) -> bool:
        """The file has been opened (and may since have gone)."""
        return self._fd is not None

    @property
    def partial(self) -> bytes:
        """The incomplete last line kept for the next read."""
        return self._partial

    def close(self) -> None:
        """Close the file; a later read opens it again from the start."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self._identity = None
        self.offset = 0
        self._partial = b""

    def _open(self) -> bool:
        """(Re)open the file at its first byte; False when it is not there."""
        self.close()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return False
        st = os.fstat(fd)
        self._fd = fd
        self._identity = (st.st_dev, st.st_ino)
        return True

    def _check(self) -> TailRead | None:
        """Open, or notice a replaced or truncated file.  Returns a TailRead
        to hand back (reset or missing) with no lines yet, or None."""
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return TailRead(missing=True)
        if self._fd is None or (st.st_dev, st.st_ino) != self._identity:
            if not self._open():
                return TailRead(missing=True)
            return TailRead(reset=True)
        if st.st_size < self.offset:
            self.offset = 0
            self._partial = b""
            return TailRead(reset=True)
        return None

    # ---------------------------------------------------------------- reads

    def read(self) -> TailRead:
        """Return the complete lines appended since the last call."""
        result = self._check() or TailRead()
        if result.missing:
            return result
        assert self._fd is not None
        chunks = []
        budget = self.max_read
        while budget > 0:
            data = os.pread(self._fd, min(budget, 1024 * 1024), self.offset)
            if not data:
                break
            chunks.append(data)
            self.offset += len(data)
            budget -= len(data)
        if budget <= 0:
            result.more = os.fstat(self._fd).st_size > self.offset
        if not chunks:
            return result
        data = b"".join(chunks)
        self.bytes_read += len(data)
        end = data.rfind(b"\n")
        if end < 0:
            self._partial += data
            return result
        block = self._partial + data[:end] if self._partial else data[:end]
        self._partial = data[end + 1:]
        result.lines = [line for line in block.split(b"\n") if line]
        return result

    def skip_to_end(self) -> TailRead:
        """Consume everything now in the file without returning it."""
        result = self._check() or TailRead()
        if result.missing:
            return result
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        self.offset = size
        self._partial = self._tail_partial(size)
        return result

    def _tail_partial(self, size: int) -> bytes:
        """The bytes after the last newline before SIZE (an unfinished line)."""
        assert self._fd is not None
        pos = size
        tail: list[bytes] = []
        while pos > 0:
            n = min(SCAN_BLOCK, pos)
            pos -= n
            block = os.pread(self._fd, n, pos)
            self.bytes_read += len(block)
            cut = block.rfind(b"\n")
            if cut >= 0:
                tail.append(block[cut + 1:])
                break
            tail.append(block)
        return b"".join(reversed(tail))

    def scan_back(self, predicate: Callable[[bytes], bool], *,
                  limit: int = SCAN_LIMIT) -> bytes | None:
        """Return the last complete line for which PREDICATE is true, reading
        backwards from the end (at most LIMIT bytes); None if there is none.

        Afterwards the offset is at the end of the file (an unfinished last
        line is kept), so `read()` continues with what is appended next."""
        result = self._check() or TailRead()
        if result.missing:
            return None
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        self.offset = size
        self._partial = b""
        pos = size
        carry = b""          # the left end of a line that began before POS
        in_partial = True    # still inside the unfinished last line
        partial: list[bytes] = []
        scanned = 0
        while pos > 0 and scanned < limit:
            n = min(SCAN_BLOCK, pos)
            pos -= n
            block = os.pread(self._fd, n, pos)
            scanned += n
            self.bytes_read += len(block)
            if in_partial:
                cut = block.rfind(b"\n")
                if cut < 0:
                    partial.append(block)
                    continue
                partial.append(block[cut + 1:])
                in_partial = False
                block = block[:cut + 1]
            parts = (block + carry).split(b"\n")
            carry = parts[0]
            for line in reversed(parts[1:]):
                if line and predicate(line):
                    self._partial = b"".join(reversed(partial))
                    return line
        self._partial = b"".join(reversed(partial))
        if pos == 0 and not in_partial and carry and predicate(carry):
            return carry
        return None
