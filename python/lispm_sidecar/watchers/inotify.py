"""A small asyncio inotify wrapper over libc (ctypes; Linux only).

One `Inotify` per sidecar is shared by every watcher: one file descriptor,
read with `loop.add_reader`, so any number of watched files costs no
polling.  Several subscriptions may watch the same inode (the kernel hands
back one watch descriptor per inode and ORs the masks with `IN_MASK_ADD`);
each event is dispatched to the subscriptions of its watch descriptor whose
mask it matches.  On `IN_Q_OVERFLOW` (the kernel's queue was full and events
were lost) every overflow callback runs, so that watchers re-read their
files.

`DirWatch` watches a directory that may not exist yet (its nearest
existing ancestor is watched until it appears) or may be removed and made
again; `TreeWatch` watches a tree of them (Codex's YYYY/MM/DD folders).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# <sys/inotify.h>
IN_ACCESS = 0x00000001
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_CLOSE_NOWRITE = 0x00000010
IN_OPEN = 0x00000020
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_MASK_ADD = 0x20000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

IN_CLOSE = IN_CLOSE_WRITE | IN_CLOSE_NOWRITE
IN_MOVE = IN_MOVED_FROM | IN_MOVED_TO
#: Events delivered whatever the mask: a subscription always gets them.
ALWAYS = IN_IGNORED | IN_UNMOUNT | IN_Q_OVERFLOW

_HEADER = struct.Struct("iIII")
_READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class InotifyEvent:
    """One `struct inotify_event`."""

    wd: int
    mask: int
    cookie: int
    name: str

    @property
    def is_dir(self) -> bool:
        """The event concerns a directory."""
        return bool(self.mask & IN_ISDIR)


def parse_events(data: bytes) -> list[InotifyEvent]:
    """Parse a buffer of `struct inotify_event`s (as one read() returns them)."""
    events = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        raw = data[offset:offset + length]
        offset += length
        name = os.fsdecode(raw.split(b"\0", 1)[0]) if length else ""
        events.append(InotifyEvent(wd, mask, cookie, name))
    return events


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = libc.inotify_rm_watch
        self.rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.rm_watch.restype = ctypes.c_int


_libc: _Libc | None = None


def _get_libc() -> _Libc:
    global _libc
    if _libc is None:
        _libc = _Libc()
    return _libc


def _oserror(what: str, path: str | None = None) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}", path)


@dataclass(eq=False)
class Watch:
    """One subscription: CALLBACK gets the events of MASK on PATH's inode."""

    owner: Inotify
    wd: int
    path: str
    mask: int
    callback: Callable[[InotifyEvent], None]
    active: bool = field(default=True)

    def cancel(self) -> None:
        """Stop this subscription (the kernel watch goes when its last one does)."""
        self.owner.remove(self)


class Inotify:
    """One inotify instance, its fd read on the running asyncio loop."""

    def __init__(self) -> None:
        self._libc = _get_libc()
        fd = self._libc.init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise _oserror("inotify_init1")
        self.fd: int | None = fd
        self._loop: asyncio.AbstractEventLoop | None = None
        self._by_wd: dict[int, list[Watch]] = {}
        self._overflow: list[Callable[[], None]] = []
        self.events_read = 0
        self.overflows = 0

    # ----------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Close the fd; every subscription ends."""
        if self.fd is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.fd)
        os.close(self.fd)
        self.fd = None
        for watches in self._by_wd.values():
            for watch in watches:
                watch.active = False
        self._by_wd.clear()
        self._overflow.clear()

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Inotify:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _ensure_reader(self) -> None:
        if self._loop is None:
            if self.fd is None:
                raise RuntimeError("Inotify is closed")
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self.fd, self._on_readable)

    # ------------------------------------------------------------- watches

    def add_watch(self, path: str | os.PathLike[str], mask: int,
                  callback: Callable[[InotifyEvent], None]) -> Watch:
        """Subscribe CALLBACK to MASK events on PATH.  Raises OSError (e.g.
        ENOENT, ENOTDIR with IN_ONLYDIR) when the kernel refuses the watch."""
        if self.fd is None:
            raise RuntimeError("Inotify is closed")
        self._ensure_reader()
        spath = os.fspath(path)
        wd = self._libc.add_watch(self.fd, os.fsencode(spath), mask | IN_MASK_ADD)
        if wd < 0:
            raise _oserror("inotify_add_watch", spath)
        watch = Watch(self, wd, spath, mask, callback)
        self._by_wd.setdefault(wd, []).append(watch)
        return watch

    def remove(self, watch: Watch) -> None:
        """End WATCH (idempotent)."""
        if not watch.active:
            return
        watch.active = False
        watches = self._by_wd.get(watch.wd)
        if watches is None:
            return
        if watch in watches:
            watches.remove(watch)
        if not watches:
            del self._by_wd[watch.wd]
            # EINVAL: the kernel already dropped it (the file was deleted).
            if (self.fd is not None and self._libc.rm_watch(self.fd, watch.wd) < 0
                    and ctypes.get_errno() != errno.EINVAL):
                log.debug("inotify_rm_watch(%s): %s", watch.path,
                              os.strerror(ctypes.get_errno()))

    def on_overflow(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call CALLBACK after an IN_Q_OVERFLOW; returns a function that unsubscribes."""
        self._overflow.append(callback)

        def unsubscribe() -> None:
            if callback in self._overflow:
                self._overflow.remove(callback)

        return unsubscribe

    @property
    def watch_count(self) -> int:
        """The number of kernel watches held."""
        return len(self._by_wd)

    # -------------------------------------------------------------- events

    def _on_readable(self) -> None:
        chunks = []
        while self.fd is not None:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            if not data:
                break
            chunks.append(data)
        for chunk in chunks:
            self.dispatch(parse_events(chunk))

    def dispatch(self, events: list[InotifyEvent]) -> None:
        """Hand EVENTS to their subscriptions (public so tests can inject events)."""
        for event in events:
            self.events_read += 1
            if event.mask & IN_Q_OVERFLOW:
                self.overflows += 1
                log.warning("inotify queue overflow: every watcher re-reads")
                for callback in list(self._overflow):
                    self._call(callback)
                continue
            watches = self._by_wd.get(event.wd)
            if not watches:
                continue
            for watch in list(watches):
                if watch.active and event.mask & (watch.mask | ALWAYS):
                    self._call(watch.callback, event)
            if event.mask & IN_IGNORED:
                for watch in self._by_wd.pop(event.wd, []):
                    watch.active = False

    @staticmethod
    def _call(callback: Callable[..., None], *args: object) -> None:
        try:
            callback(*args)
        except Exception:
            log.exception("inotify callback %r failed", callback)


_GONE = IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT


class DirWatch:
    """Watch the directory PATH, which may not exist yet or may go away.

    While PATH is missing, its nearest existing ancestor is watched for the
    next component to appear (no polling).  Each time PATH is (again) being
    watched, ON_READY runs, so the owner can look at files created before the
    watch was in place; ON_EVENT gets `(name, mask)` for events inside PATH.
    """

    def __init__(self, inotify: Inotify, path: Path, mask: int,
                 on_event: Callable[[str, int], None],
                 on_ready: Callable[[], None] | None = None,
                 on_gone: Callable[[], None] | None = None) -> None:
        self.inotify = inotify
        self.path = path
        self.mask = mask
        self._on_event = on_event
        self._on_ready = on_ready
        self._on_gone = on_gone
        self._watch: Watch | None = None
        self._ancestor: Watch | None = None
        self._cancelled = False

    @property
    def ready(self) -> bool:
        """PATH exists and is being watched."""
        return self._watch is not None

    def start(self) -> None:
        """Arm the watch (calls ON_READY at once if PATH exists)."""
        self._cancelled = False
        self._arm()

    def cancel(self) -> None:
        """Stop watching."""
        self._cancelled = True
        for watch in (self._watch, self._ancestor):
            if watch is not None:
                watch.cancel()
        self._watch = self._ancestor = None

    def _arm(self) -> None:
        while not self._cancelled:
            if self._ancestor is not None:
                self._ancestor.cancel()
                self._ancestor = None
            try:
                self._watch = self.inotify.add_watch(
                    self.path, self.mask | IN_ONLYDIR | _GONE, self._dir_event)
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as err:      # EACCES, ENOSPC (out of watches)…
                log.warning("cannot watch %s: %s", self.path, err)
                return
            else:
                if self._on_ready is not None:
                    self._on_ready()
                return
            if self._watch_ancestor():
                return

    def _watch_ancestor(self) -> bool:
        """Watch the nearest existing ancestor; False if the path must be retried."""
        child = self.path
        parent = child.parent
        while True:
            try:
                self._ancestor = self.inotify.add_watch(
                    parent, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | _GONE,
                    functools.partial(self._ancestor_event, name=child.name))
            except (FileNotFoundError, NotADirectoryError):
                if parent == parent.parent:
                    raise
                child, parent = parent, parent.parent
                continue
            except OSError as err:
                log.warning("cannot watch %s: %s", parent, err)
                return True
            # The next component may have appeared before the watch was in place.
            return not os.path.isdir(child)

    def _ancestor_event(self, event: InotifyEvent, name: str) -> None:
        if event.mask & _GONE or event.name == name:
            self._arm()

    def _dir_event(self, event: InotifyEvent) -> None:
        if event.mask & _GONE:
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None
            if self._on_gone is not None:
                self._on_gone()
            self._arm()
            return
        self._on_event(event.name, event.mask)

    def rescan(self) -> None:
        """Re-arm if needed and run ON_READY (after a queue overflow)."""
        if self._watch is None:
            self._arm()
        elif self._on_ready is not None:
            self._on_ready()


class TreeWatch:
    """Watch a directory tree (DEPTH levels below ROOT), adding watches for
    directories as they appear.  ON_FILE gets `(path, mask)` for events on
    files; a directory that appears is scanned, and the files found in it
    are reported with IN_CREATE (they may have been created before the
    watch was in place)."""

    FILE_MASK = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM

    def __init__(self, inotify: Inotify, root: Path, depth: int,
                 on_file: Callable[[Path, int], None]) -> None:
        self.inotify = inotify
        self.root = root
        self.depth = depth
        self._on_file = on_file
        self._dirs: dict[Path, Watch] = {}
        self._root = DirWatch(inotify, root, self.FILE_MASK,
                              lambda name, mask: self._event(root, 0, name, mask),
                              on_ready=lambda: self._scan(root, 0, report=True),
                              on_gone=self._root_gone)

    @property
    def directories(self) -> list[Path]:
        """The directories below ROOT being watched."""
        return list(self._dirs)

    def start(self) -> None:
        """Watch ROOT (once it exists) and everything below it."""
        self._root.start()

    def cancel(self) -> None:
        """Stop watching."""
        self._root.cancel()
        for watch in self._dirs.values():
            watch.cancel()
        self._dirs.clear()

    def rescan(self) -> None:
        """Look at every directory again and report every file (after an overflow)."""
        self._root.rescan()

    def _root_gone(self) -> None:
        for watch in self._dirs.values():
            watch.cancel()
        self._dirs.clear()

    def _event(self, directory: Path, level: int, name: str, mask: int) -> None:
        path = directory / name
        if mask & IN_ISDIR:
            if mask & (IN_CREATE | IN_MOVED_TO) and level < self.depth:
                self._add_dir(path, level + 1)
            elif mask & (IN_DELETE | IN_MOVED_FROM):
                watch = self._dirs.pop(path, None)
                if watch is not None:
                    watch.cancel()
            return
        self._on_file(path, mask)

    def _add_dir(self, path: Path, level: int) -> None:
        if path in self._dirs:
            self._scan(path, level, report=True)
            return
        try:
            watch = self.inotify.add_watch(
                path, self.FILE_MASK | IN_ONLYDIR | _GONE,
                lambda event: self._sub_event(path, level, event))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as err:
            log.warning("cannot watch %s: %s", path, err)
            return
        self._dirs[path] = watch
        self._scan(path, level, report=True)

    def _sub_event(self, path: Path, level: int, event: InotifyEvent) -> None:
        if event.mask & _GONE:
            watch = self._dirs.pop(path, None)
            if watch is not None:
                watch.cancel()
            return
        self._event(path, level, event.name, event.mask)

    def _scan(self, directory: Path, level: int, *, report: bool) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if level < self.depth:
                    self._add_dir(Path(entry.path), level + 1)
            elif report:
                self._on_file(Path(entry.path), IN_CREATE)
