"""One place decides where relay's state lives and whether it is safe to use (design.md §2)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ..core.command import Said, relay
from ..core.errors import RelayError
from ..core.record import record

DB_NAME = "relay.db"


def resolve_home(home: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path:
    """The state directory a call was given (``--home``, else ``$RELAY_HOME``: its
    context's ``home``), else the per-user state directory of the call's ``environ``
    (``default_home``).

    Always absolute (design.md §2): a relative ``--home``/``RELAY_HOME`` is taken from the
    working directory, so what ``peers join --shell`` exports names the same directory
    from anywhere. A path SQLite cannot be given (not UTF-8) is ``unsafe_state_dir``.
    """
    if home:
        path = _expand_user(Path(home), environ)
    else:
        path = default_home(environ)
    if not path.is_absolute():
        try:
            path = Path.cwd() / path
        except OSError as e:
            raise RelayError(
                "usage_error",
                f"the state directory {str(path)!r} is relative, "
                f"and the working directory is gone ({e.strerror})",
            ) from e
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise RelayError(
            "unsafe_state_dir",
            f"the state directory {str(path)!r} is not a "
            "UTF-8 path; relay's database cannot be opened there",
        ) from None
    return path


def _expand_user(path: Path, environ: Mapping[str, str]) -> Path:
    """``~`` at the start of ``path`` as the call's HOME (``~user`` as the passwd entry's)."""
    head = path.parts[0] if path.parts else ""
    if head == "~" and os.path.isabs(environ.get("HOME", "")):
        return Path(environ["HOME"], *path.parts[1:])
    return path.expanduser()


def default_home(environ: Mapping[str, str]) -> Path:
    """The per-user state directory (design.md §2), as platformdirs finds it, read in the
    call's ``environ``: on Linux and other Unix systems ``$XDG_STATE_HOME/relay`` when
    that is an absolute path, else ``$HOME/.local/state/relay`` (the passwd entry's home
    when HOME is not an absolute path). Elsewhere platformdirs' own answer, which reads
    the process's environment."""
    import platformdirs
    from platformdirs.unix import Unix

    if not issubclass(platformdirs.PlatformDirs, Unix):
        return Path(platformdirs.user_state_dir("relay"))
    state = environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        user_home = environ.get("HOME", "")
        if not os.path.isabs(user_home):
            import pwd

            user_home = pwd.getpwuid(os.getuid()).pw_dir
        state = os.path.join(user_home, ".local", "state")
    return Path(state) / "relay"


@record
class PathReport:
    """What relay sees of one path, for refusals and for `doctor`.

    ``error`` is set when the path cannot even be looked at (another user's directory
    on the way): it may exist, and relay cannot use it.
    """

    path: Path
    exists: bool
    is_symlink: bool = False
    is_dir: bool = False
    owner_uid: int | None = None
    mode: int | None = None
    file_type: str | None = None  # "regular file", "directory", "FIFO", ...
    error: str | None = None

    @property
    def is_regular(self) -> bool:
        return self.file_type == "regular file"

    @property
    def foreign(self) -> bool:
        return self.owner_uid is not None and self.owner_uid != os.geteuid()

    @property
    def group_other_access(self) -> bool:
        return self.mode is not None and bool(self.mode & 0o077)


_FILE_TYPES = (
    (stat.S_ISREG, "regular file"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISLNK, "symbolic link"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def inspect_path(path: Path) -> PathReport:
    """lstat, never following a symlink and never opening (a FIFO would block)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a home that is a file has no relay.db
        return PathReport(path, exists=False)
    except OSError as e:  # EACCES: another user's directory on the way
        return PathReport(path, exists=True, error=e.strerror or str(e))
    kind = next((name for test, name in _FILE_TYPES if test(st.st_mode)), "unknown file")
    return PathReport(
        path,
        exists=True,
        is_symlink=stat.S_ISLNK(st.st_mode),
        is_dir=stat.S_ISDIR(st.st_mode),
        owner_uid=st.st_uid,
        mode=stat.S_IMODE(st.st_mode),
        file_type=kind,
    )


COMPANIONS = ("-wal", "-shm")


def unsafe_reasons(home: Path) -> list[str]:
    """Every reason design.md §2 gives to refuse this home; empty when it is safe (or absent)."""
    reasons = []
    d = inspect_path(home)
    if d.error:
        return [
            f"{home} cannot be read ({d.error}): it belongs to another user, or lies "
            "inside a directory of another user"
        ]
    if d.exists:
        if d.is_symlink:
            reasons.append(f"{home} is a symbolic link")
        elif not d.is_dir:
            reasons.append(f"{home} is not a directory")
        if d.foreign:
            reasons.append(f"{home} is owned by uid {d.owner_uid}, not by you")
        if not d.is_symlink and d.group_other_access:
            reasons.append(f"{home} has mode {d.mode:04o}; group or others may access it")
    if d.exists and (d.is_symlink or not d.is_dir):
        return reasons
    db = inspect_path(home / DB_NAME)
    if db.error:
        reasons.append(
            f"{db.path} cannot be read ({db.error}): the directory belongs to another user"
        )
    elif db.exists:
        if db.is_symlink:
            reasons.append(f"{db.path} is a symbolic link")
        elif not db.is_regular:
            reasons.append(f"{db.path} is a {db.file_type}, not a regular file")
        if db.foreign:
            reasons.append(f"{db.path} is owned by uid {db.owner_uid}, not by you")
        elif db.is_regular and db.group_other_access:
            reasons.append(f"{db.path} has mode {db.mode:04o}; group or others may access it")
    for suffix in COMPANIONS:
        side = inspect_path(home / f"{DB_NAME}{suffix}")
        if side.error or not side.exists:
            continue
        if side.is_symlink:
            # SQLite would follow it and write relay's pages wherever it points
            reasons.append(f"{side.path} is a symbolic link")
        elif not side.is_regular:
            # SQLite would open it and block (a FIFO) or fail
            reasons.append(f"{side.path} is a {side.file_type}, not a regular file")
    return reasons


def check_home(home: Path) -> None:
    reasons = unsafe_reasons(home)
    if reasons:
        raise RelayError(
            "unsafe_state_dir",
            "refusing the state directory: " + "; ".join(reasons),
            detail=_unsafe_advice(home),
        )


def _unsafe_advice(home: Path) -> Said:
    """What to run about an unsafe home (design.md §11), after the code's fixed hint (which
    names doctor, that explains): doctor's --fix only for a home relay made (a real
    directory of yours holding relay.db, a regular file), never for a directory relay did
    not make."""
    d, db = inspect_path(home), inspect_path(home / DB_NAME)
    fixable = d.is_dir and not d.is_symlink and not d.foreign and db.is_regular and not db.foreign
    if fixable:
        return Said.of(relay("doctor", "--fix", changes=True), " sets this home's modes")
    return Said.of(
        f"relay did not make {home} (it holds no {DB_NAME} of yours) and changes nothing of "
        "it: unset RELAY_HOME or pass --home DIR for a home of relay's own"
    )


NO_HOME_HINT = (
    "a mistyped --home or RELAY_HOME names another directory: check it (`relay doctor` "
    "shows the home this shell uses); a home is made by a command that starts from "
    "nothing, e.g. `relay peers join NAME`"
)


def require_existing(home: Path) -> None:
    """A command that only reads (or acts on something that must already exist) never
    makes a home (design.md §2): a missing home, or one without relay.db, is
    ``storage_error`` naming the path, and nothing is created."""
    check_home(home)
    if not inspect_path(home).exists:
        raise RelayError(
            "storage_error",
            f"no relay home exists at {home}: nothing this command needs is there, and "
            "nothing was created",
            hint=NO_HOME_HINT,
        )
    if not inspect_path(home / DB_NAME).exists:
        raise RelayError(
            "storage_error",
            f"{home} holds no relay database ({DB_NAME}) yet: nothing this command needs "
            "is there, and nothing was created",
            hint=NO_HOME_HINT,
        )


def ensure_home(home: Path) -> Path:
    """Check the home, create it (0700) and relay.db (0600) when missing; return the db path."""
    check_home(home)
    _refuse_foreign_parent(home)
    old = os.umask(0o077)
    try:
        try:
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise RelayError(
                "storage_error", f"cannot create the state directory {home}: {e.strerror}"
            ) from e
        check_home(home)
        db = home / DB_NAME
        try:
            fd = os.open(db, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
            os.close(fd)
        except FileExistsError:
            pass
        except OSError as e:
            raise RelayError("storage_error", f"cannot create {db}: {e.strerror}") from e
    finally:
        os.umask(old)
    check_home(home)
    return db


def _refuse_foreign_parent(home: Path) -> None:
    """relay never creates a directory inside a directory of another user (design.md §2):
    `sudo relay list` with the user's HOME kept would otherwise leave root-owned 0700
    directories in the user's ~/.local. A shared sticky directory open to everyone (such
    as /tmp, mode 1777) is the exception: creating one's own directory there is normal."""
    if inspect_path(home).exists:
        return
    parent = home.parent
    while True:  # the deepest existing directory: mkdir creates the first new one in it
        try:
            st = os.stat(parent)  # followed: the directory that would hold the new one
            break
        except (FileNotFoundError, NotADirectoryError):
            if parent == parent.parent:
                return
            parent = parent.parent
        except OSError as e:
            raise RelayError(
                "unsafe_state_dir",
                f"cannot create the state directory {home}: {parent} cannot be read ({e.strerror})",
            ) from e
    if st.st_uid == os.geteuid():
        return
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_mode & 0o002:
        return
    raise RelayError(
        "unsafe_state_dir",
        f"refusing to create the state directory {home}: {parent} belongs to uid "
        f"{st.st_uid}, not to you (uid {os.geteuid()}); with sudo, keep relay's own "
        "HOME (sudo -H) or pass --home",
    )
