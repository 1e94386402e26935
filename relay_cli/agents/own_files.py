"""The files `relay hook install|uninstall` reads and writes, reached without following a
link: one rule for every installer and uninstaller, user-level and ``--project``
(design.md §12).

A file is a :class:`Place`: an *anchor* directory, the directories below it, the file's
name. The anchor is the project directory (``--project``: the current directory) or the
user's directory (HOME, or the directory a runtime's variable names), taken as given: the
person named it, links and all. Below the anchor:

- every directory on the way is opened relative to the one before it, never following a
  link (``O_NOFOLLOW``), and must be a real directory of the caller's: a link is refused,
  and so is a directory of another user (a project another user controls);
- relay creates a missing directory (mode 0700) and writes a file only inside a directory
  of the caller's, the anchor included;
- the file itself is opened the same way (a link there is refused even to read it) and
  must be a regular file; to change it, it must be the caller's with its owner's write bit;
- the backup (``FILE.relay-backup-<UTC time>``, same mode) and the new content (a
  temporary file, mode 0600 for a new file, else the old mode) are created beside it with
  ``O_EXCL | O_NOFOLLOW``, and the temporary file is renamed over the name only while the
  name still holds the file that was read (same device, inode and change time; nothing where
  there was nothing). Otherwise both are removed again and the change is refused.

Everything after the anchor goes through directory descriptors, so a directory renamed or
replaced by a link between the checks and the write cannot send the write elsewhere.
A refusal is ``storage_error`` naming the path and why; it changes nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from pathlib import Path

from ..core.errors import RelayError
from ..core.record import record

NEW_FILE_MODE = 0o600
NEW_DIR_MODE = 0o700
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@record(frozen=True)
class Place:
    """A file ``anchor/dirs.../name``; nothing below ``anchor`` is followed if a link."""

    anchor: Path
    dirs: tuple[str, ...]
    name: str

    @property
    def path(self) -> Path:
        return self.anchor.joinpath(*self.dirs, self.name)

    def dir_path(self, depth: int) -> Path:
        """The directory ``depth`` steps below the anchor (0: the anchor)."""
        return self.anchor.joinpath(*self.dirs[:depth])


def place_under(base: Path, parts: tuple[str, ...]) -> Place:
    """``base/parts...`` with ``base``'s longest existing part as the anchor: what does not
    exist yet of a directory the person named is created by the rule, as the rest is."""
    anchor = base
    missing: list[str] = []
    while not anchor.is_dir() and anchor.parent != anchor:
        missing.insert(0, anchor.name)
        anchor = anchor.parent
    *dirs, name = (*missing, *parts)
    return Place(anchor, tuple(dirs), name)


@record(frozen=True)
class Current:
    """What the name held when it was read: its bytes (None: nothing there), and the
    file's identity, mode and owner."""

    data: bytes | None
    ident: tuple[int, ...] | None = None  # :func:`_ident`
    mode: int = NEW_FILE_MODE
    uid: int | None = None


def refusal(path: Path, why: str, hint: str | None = None) -> RelayError:
    return RelayError(
        "storage_error",
        f"{path}: {why}; nothing was changed",
        hint=hint
        or f"relay could not use {path}; fix what the message names (or edit the file by "
        "hand, see docs/agents.md), then run the command again",
    )


def _link_refusal(path: Path) -> RelayError:
    return refusal(
        path,
        "is a symbolic link, and relay does not read or write its hook files through a link",
        hint=f"replace {path} with what it links to (or edit the file by hand, see "
        "docs/agents.md), then run the command again",
    )


def _me() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def _check_owner(st: os.stat_result, path: Path, what: str) -> None:
    if _me() >= 0 and st.st_uid != _me():
        raise refusal(
            path,
            f"is {what} of another user (uid {st.st_uid}); relay writes its hook files only "
            "into directories and files of yours",
        )


# ------------------------------------------------------------------------ directories
class _Dirs:
    """The open directories from the anchor down (closed on exit)."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.fds: list[int] = []

    def __enter__(self) -> _Dirs:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    @property
    def complete(self) -> bool:
        return len(self.fds) == len(self.place.dirs) + 1

    @property
    def last(self) -> int:
        return self.fds[-1]

    def last_path(self) -> Path:
        return self.place.dir_path(len(self.fds) - 1)

    def open(self, create: bool) -> _Dirs:
        """Open the anchor (following it, as given) and the directories below it that
        exist (never following a link; each the caller's), creating the missing ones when
        ``create``. Raises a refusal."""
        place = self.place
        try:
            self.fds.append(os.open(place.anchor, _DIR_FLAGS))
        except OSError as e:
            raise refusal(place.anchor, f"cannot be opened as a directory ({e.strerror})") from e
        for depth, name in enumerate(place.dirs, start=1):
            fd = self._step(name, place.dir_path(depth), create)
            if fd is None:
                return self
            self.fds.append(fd)
        return self

    def _step(self, name: str, path: Path, create: bool) -> int | None:
        parent = self.last
        try:
            fd = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            self.check_writable_dir()
            try:
                os.mkdir(name, NEW_DIR_MODE, dir_fd=parent)
            except FileExistsError:
                pass
            except OSError as e:
                raise refusal(path, f"cannot be created ({e.strerror})") from e
            return self._step(name, path, create=False)
        except OSError as e:
            raise self._not_a_dir(name, path, e) from e
        try:
            st = os.fstat(fd)
            _check_owner(st, path, "a directory")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _not_a_dir(self, name: str, path: Path, e: OSError) -> RelayError:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            try:
                st = os.stat(name, dir_fd=self.last, follow_symlinks=False)
            except OSError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                return _link_refusal(path)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                return refusal(path, "is not a directory")
        return refusal(path, f"cannot be opened ({e.strerror})")

    def check_writable_dir(self) -> None:
        """relay writes into the last open directory: it must be the caller's."""
        try:
            st = os.fstat(self.last)
        except OSError as e:
            raise refusal(self.last_path(), f"cannot be read ({e.strerror})") from e
        _check_owner(st, self.last_path(), "a directory")


# ------------------------------------------------------------------------ the file
def read(place: Place, limit: int) -> Current:
    """What the file holds now (``Current(None)`` when it or a directory on the way does
    not exist). Only a regular file is read, at most ``limit`` bytes (a FIFO would hang,
    a device never end); a link anywhere below the anchor, or another user's directory
    on the way, is refused."""
    path = place.path
    with _Dirs(place).open(create=False) as dirs:
        if not dirs.complete:
            return Current(None)
        flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
        flags |= getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(place.name, flags, dir_fd=dirs.last)
        except FileNotFoundError:
            return Current(None)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _link_refusal(path) from e
            raise refusal(path, f"cannot be read ({e.strerror})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refusal(path, "is not a regular file")
        too_large = f"is larger than {limit // (1024 * 1024)} MiB"
        if st.st_size > limit:
            raise refusal(path, too_large)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise refusal(path, too_large)
            chunks.append(chunk)
        return Current(b"".join(chunks), _ident(st), stat.S_IMODE(st.st_mode), st.st_uid)
    except OSError as e:
        raise refusal(path, f"cannot be read ({e.strerror})") from e
    finally:
        os.close(fd)


def check(place: Place, current: Current) -> None:
    """Refuse a change relay could not make by the rule (also for ``--dry-run``): a link or
    another user's directory on the way, a missing directory to be created in a directory
    of another user, a file of another user or without its owner's write bit."""
    with _Dirs(place).open(create=False) as dirs:
        dirs.check_writable_dir()  # the file's directory, or where relay would create one
    _check_file(place.path, current)


def _check_file(path: Path, current: Current) -> None:
    if current.data is None:
        return
    if current.uid is not None and _me() >= 0 and current.uid != _me():
        raise refusal(path, "is owned by another user")
    if not current.mode & 0o200:
        raise refusal(path, "is read-only (its mode has no write bit for its owner)")


def write(place: Place, data: bytes, current: Current, backup: bool) -> Path | None:
    """Replace what ``current`` read with ``data`` (creating the directories on the way),
    after a backup of the old content when ``backup``. Returns the backup's path."""
    path = place.path
    _check_file(path, current)
    with _Dirs(place).open(create=True) as dirs:
        dirs.check_writable_dir()
        dfd = dirs.last
        made: list[str] = []
        try:
            _same(dfd, place, current)
            saved = None
            if backup and current.data is not None:
                saved = _backup(dfd, place.name, current.data, current.mode)
                made.append(saved)
            tmp = _new_file(dfd, f".{place.name}.relay-", data, current.mode)
            made.append(tmp)
            _same(dfd, place, current)
            os.replace(tmp, place.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            made.remove(tmp)
            with contextlib.suppress(OSError):
                os.fsync(dfd)
        except BaseException as e:
            for name in made:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dfd)
            if isinstance(e, OSError):
                raise refusal(path, f"cannot be written ({e.strerror or e})") from e
            raise
        return place.dir_path(len(place.dirs)) / saved if saved else None


def remove(place: Place, current: Current) -> None:
    """Delete the file ``current`` read (nothing when it is gone already)."""
    if current.data is None:
        return
    _check_file(place.path, current)
    with _Dirs(place).open(create=False) as dirs:
        if not dirs.complete:
            return
        dirs.check_writable_dir()
        try:
            _same(dirs.last, place, current)
            os.unlink(place.name, dir_fd=dirs.last)
        except FileNotFoundError:
            return
        except OSError as e:
            raise refusal(place.path, f"cannot be removed ({e.strerror})") from e


def _same(dfd: int, place: Place, current: Current) -> None:
    """The name still holds what was read (or still nothing)."""
    try:
        now: tuple[int, ...] | None = _ident(os.stat(place.name, dir_fd=dfd, follow_symlinks=False))
    except FileNotFoundError:
        now = None
    if now != current.ident:
        raise refusal(
            place.path,
            "was changed by someone else while relay was changing it; run the command again",
        )


def _ident(st: os.stat_result) -> tuple[int, ...]:
    """A file as found under its name: its device and inode, and what changes with any
    change of it (a new file under a reused inode number, an edit in place)."""
    return (st.st_dev, st.st_ino, st.st_mode, st.st_ctime_ns, st.st_size)


def _new_file(dfd: int, prefix: str, data: bytes, mode: int) -> str:
    for _ in range(100):
        name = prefix + secrets.token_hex(4)
        try:
            fd = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                NEW_FILE_MODE,
                dir_fd=dfd,
            )
        except FileExistsError:
            continue
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dfd)
            raise
        os.close(fd)
        return name
    raise FileExistsError(errno.EEXIST, "no free name for a temporary file")


def _backup(dfd: int, name: str, data: bytes, mode: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(100):
        backup = f"{name}.relay-backup-{stamp}" + (f"-{n}" if n else "")
        try:
            fd = os.open(
                backup,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                mode & 0o777,
                dir_fd=dfd,
            )
        except FileExistsError:
            continue
        try:
            _write_all(fd, data)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(backup, dir_fd=dfd)
            raise
        os.close(fd)
        return backup
    raise FileExistsError(errno.EEXIST, f"too many backups of {name} this second")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)
