"""The wake waiter's sleep on SQLite: woken by relay.db's files changing (design.md §12).

A waiter polling ``PRAGMA data_version`` every 50 ms notices a commit 25 ms after it on
average, and looks 1,200 times a minute while nothing happens. On Linux the waiter asks
the kernel instead (inotify, through libc): it sleeps until a file of the database
(``relay.db``, ``relay.db-wal``) is written or closed after writing, and looks at
``data_version`` then. relay.db is always in WAL mode, whose shared memory only works on
one machine, so every writer runs under the same kernel and is seen.

A writer appends its commit to ``-wal`` and makes it visible in the shared memory just
after (after its fsync): the look that the first write brings can come too early. So after
an event the waiter looks again on a short, growing step (``FIRST_STEP_S`` up to
``MAX_STEP_S``, for ``BURST_S``) -- a `relay send` closing the database after its commit
is one more event besides. Without an event it looks every ``INTERVAL_S`` all the same
(a deadline, the runtime gone, a change not seen).

Where inotify cannot be had (another system, no libc symbol, the per-user limit of
instances reached), :func:`open_watch` gives None and the waiter polls as before.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from relay_cli.store import Store

INTERVAL_S = 1.0  # the longest sleep without an event
BURST_S = 0.25  # after an event, look again on short steps for this long
FIRST_STEP_S = 0.001
MAX_STEP_S = 0.025
STEP_GROWTH = 1.5

# <sys/inotify.h>
IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


def changed_names(data: bytes) -> tuple[list[str], bool]:
    """(the file names in a read of inotify events, whether the kernel dropped events)."""
    names, overflow, at = [], False, 0
    while at + _HEADER.size <= len(data):
        _wd, mask, _cookie, size = _HEADER.unpack_from(data, at)
        at += _HEADER.size
        names.append(data[at : at + size].split(b"\0", 1)[0].decode("utf-8", "replace"))
        at += size
        if mask & IN_Q_OVERFLOW:
            overflow = True
    return names, overflow


class FileWatch:
    """A sleep that ends when a file named ``names`` in ``fd``'s watched directory changes.

    ``wait(fd, seconds) -> bool`` waits for ``fd`` to be readable; ``monotonic`` is the
    clock; both injectable."""

    interval = INTERVAL_S

    def __init__(
        self,
        fd: int,
        names: tuple[str, ...],
        wait: Callable[[int, float], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        unwatch: Callable[[], object] | None = None,
    ) -> None:
        self.fd = fd
        self.names = names
        self._unwatch = unwatch
        self._wait = wait or _readable
        self._monotonic = monotonic
        self._burst_until = 0.0
        self._step = FIRST_STEP_S

    def sleep(self, seconds: float) -> bool:
        """Sleep at most ``seconds`` (shorter while a burst lasts); True when a file of the
        database changed (the caller looks at once)."""
        now = self._monotonic()
        if now < self._burst_until:
            seconds = min(seconds, self._step, self._burst_until - now)
            self._step = min(self._step * STEP_GROWTH, MAX_STEP_S)
        if seconds > 0 and not self._wait(self.fd, seconds):
            return False
        if not self._drain():
            return False
        self._burst_until = self._monotonic() + BURST_S
        self._step = FIRST_STEP_S
        return True

    def _drain(self) -> bool:
        """Read every pending event: did one concern the database?"""
        hit = False
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return hit
            except OSError:
                return True  # look all the same
            if not data:
                return hit
            names, overflow = changed_names(data)
            hit = hit or overflow or any(n in self.names for n in names)

    def close(self) -> None:
        """Stop watching at once; the descriptor is closed later (``_closing``).

        Closing an inotify descriptor waits for the kernel to free its watch, which it does
        after an RCU grace period: 13-18 ms on the 2-core machine, 2026-12-07, when the
        close comes right after the watch is removed, 0.0 ms when 5 ms or more later. A
        waiter that found its work ends within milliseconds, and its exit closes it; a
        process that waits again closes the earlier one when it starts the next watch."""
        if self.fd < 0:
            return
        if self._unwatch is not None:
            self._unwatch()
            _closing.append(self.fd)
        else:
            _close(self.fd)
        self.fd = -1


_closing: list[int] = []  # watches removed, descriptors still open (FileWatch.close)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _close_earlier() -> None:
    while _closing:
        _close(_closing.pop())


def _readable(fd: int, seconds: float) -> bool:
    ready, _, _ = select.select([fd], [], [], seconds)
    return bool(ready)


def watch_database(path: Path) -> FileWatch | None:
    """A FileWatch on the SQLite database at ``path`` (its file and ``-wal``), or None."""
    if not hasattr(os, "O_CLOEXEC"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (ImportError, OSError, AttributeError):
        return None
    _close_earlier()
    fd = init(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None  # (EMFILE: fs.inotify.max_user_instances reached)
    wd = add(fd, os.fsencode(str(path.parent)), MASK)
    if wd < 0:
        _close(fd)
        return None
    return FileWatch(
        fd, (path.name, path.name + "-wal"), unwatch=lambda: libc.inotify_rm_watch(fd, wd)
    )


def open_watch(store: Store) -> FileWatch | None:
    """A FileWatch on ``store``'s database where it is SQLite's relay.db, else None
    (PostgreSQL's waiter wakes on a NOTIFY already)."""
    if store.backend != "sqlite" or store.read_only:
        return None
    path = getattr(getattr(store, "db", None), "path", None)  # (SQLiteStore's Connection)
    return None if path is None else watch_database(path)
