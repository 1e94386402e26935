"""One place decides where relay's state lives and whether it is safe to use (design.md §2)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import RelayError

DB_NAME = "relay.db"


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """``--home`` first, then ``$RELAY_HOME``, then the platform's per-user state dir."""
    if home:
        return Path(home).expanduser()
    env = os.environ.get("RELAY_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_state_dir("relay"))


@dataclass
class PathReport:
    """What relay sees of one path, for refusals and for `doctor`."""

    path: Path
    exists: bool
    is_symlink: bool = False
    is_dir: bool = False
    owner_uid: int | None = None
    mode: int | None = None

    @property
    def foreign(self) -> bool:
        return self.owner_uid is not None and self.owner_uid != os.geteuid()

    @property
    def group_other_access(self) -> bool:
        return self.mode is not None and bool(self.mode & 0o077)


def inspect_path(path: Path) -> PathReport:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a home that is a file has no relay.db
        return PathReport(path, exists=False)
    return PathReport(
        path,
        exists=True,
        is_symlink=stat.S_ISLNK(st.st_mode),
        is_dir=stat.S_ISDIR(st.st_mode),
        owner_uid=st.st_uid,
        mode=stat.S_IMODE(st.st_mode),
    )


def unsafe_reasons(home: Path) -> list[str]:
    """Every reason design.md §2 gives to refuse this home; empty when it is safe (or absent)."""
    reasons = []
    d = inspect_path(home)
    if d.exists:
        if d.is_symlink:
            reasons.append(f"{home} is a symbolic link")
        elif not d.is_dir:
            reasons.append(f"{home} is not a directory")
        if d.foreign:
            reasons.append(f"{home} is owned by uid {d.owner_uid}, not by you")
        if not d.is_symlink and d.group_other_access:
            reasons.append(f"{home} has mode {d.mode:04o}; group or others may access it")
    db = inspect_path(home / DB_NAME)
    if db.exists:
        if db.is_symlink:
            reasons.append(f"{db.path} is a symbolic link")
        elif db.foreign:
            reasons.append(f"{db.path} is owned by uid {db.owner_uid}, not by you")
    return reasons


def check_home(home: Path) -> None:
    reasons = unsafe_reasons(home)
    if reasons:
        raise RelayError("unsafe_state_dir", "refusing the state directory: " + "; ".join(reasons))


def ensure_home(home: Path) -> Path:
    """Check the home, create it (0700) and relay.db (0600) when missing; return the db path."""
    check_home(home)
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
