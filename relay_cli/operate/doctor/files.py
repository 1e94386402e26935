"""The home's checks (design.md §11): the state directory, relay.db and its companions
(owner, mode, type, never a symlink followed), whether this process can write there,
and ``--fix``, which only sets modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.command import Command, shell
from ...store.home import default_home
from .judge import POINT_ELSEWHERE, aside_command, elsewhere, symlink_fix
from .report import FAIL, OK, WARN, Report

if TYPE_CHECKING:
    from ...store.home import PathReport

# a home without relay.db yet: as fresh as a missing home (design.md §11)
NO_DB_YET = (
    "not created yet; the first relay command that starts from nothing creates it, "
    "e.g. `relay peers join NAME` (a read such as `relay list` creates nothing)"
)


def _describe(rep: PathReport) -> str:
    owner = "you" if not rep.foreign else "NOT you"
    return f"mode {rep.mode:04o}, owner uid {rep.owner_uid} ({owner})"


def _unsafe_dir(report: Report, why: str, fix: Command | None) -> None:
    report.add(
        "database",
        WARN,
        f"not opened: {why}; every relay command refuses this home with unsafe_state_dir",
        fix=fix,
    )


def check_paths(home: Path, report: Report) -> bool:
    """Directory and file checks. True when the database may be opened."""
    from ...store import DB_NAME, inspect_path, unsafe_reasons
    from ...store.home import COMPANIONS

    db_path = home / DB_NAME
    d = inspect_path(home)
    if d.error:
        report.add(
            "state_dir",
            FAIL,
            f"{home} cannot be read ({d.error}): it belongs to "
            "another user, or lies inside a directory of another user; use a home of "
            "your own",
            fix=report.cmd("doctor", home=default_home(report.checked.environ)),
        )
        _unsafe_dir(report, "the state directory cannot be read", None)
        return False
    if not d.exists:  # a fresh home is not a problem (design.md §11)
        report.add(
            "state_dir",
            OK,
            f"{home}: not created yet; the first relay command that "
            f"starts from nothing creates it (mode 0700), e.g. "
            f"`{report.cmd('peers join NAME')}` "
            "(a read such as `relay list` creates nothing)",
        )
        report.add("database", OK, "not created yet (created with the state directory)")
        return False
    problems, fix = [], None
    if d.is_symlink:
        problems.append(
            "is a symbolic link, which relay never follows (doctor --fix cannot "
            "change that): use the directory it points to if it is yours; relay made "
            "no link, and never moves one: " + POINT_ELSEWHERE
        )
        fix = symlink_fix(report, home)
    elif not d.is_dir:  # a user's file (a shell rc file): never relay's to move (§11)
        problems.append(
            f"is a {d.file_type}, not a directory: relay never made it, so it is not "
            "a relay home and not relay's to move or change; " + POINT_ELSEWHERE
        )
        fix = elsewhere(report, home)
    if d.foreign:
        problems.append(
            f"is owned by uid {d.owner_uid}, not by you (uid {os.geteuid()}): use "
            "a home of your own"
        )
    if d.is_dir and not d.is_symlink and d.group_other_access:
        if d.foreign:
            problems.append(f"has mode {d.mode:04o}: group or others may access it")
        elif made_by_relay(home):
            problems.append(f"has mode {d.mode:04o}: group or others may access it")
            fix = report.cmd("doctor --fix")
        else:  # a project directory, ~, /etc: never relay's to change (design.md §11)
            problems.append(
                f"has mode {d.mode:04o} (group or others may access it) and holds no "
                f"{DB_NAME}: relay did not make it, and doctor --fix never changes it; "
                + POINT_ELSEWHERE.removeprefix("relay leaves it alone; ")
            )
            fix = elsewhere(report, home)
    if problems:
        report.add("state_dir", FAIL, f"{home} " + "; ".join(problems), fix=fix)
    else:
        report.add("state_dir", OK, f"{home}: directory, not a symlink, {_describe(d)}")

    if d.is_symlink or not d.is_dir:
        _unsafe_dir(report, "the state directory is not a real directory", fix)
        return False
    for suffix in ("", *COMPANIONS):
        path = Path(f"{db_path}{suffix}")
        name = {"": "db_file", "-wal": "wal_file", "-shm": "shm_file"}[suffix]
        _check_file(path, name, report, required=not suffix)

    if unsafe_reasons(home):
        fixes = [c.fix for c in report.checks if c.status == FAIL and c.fix]
        _unsafe_dir(
            report, "the state directory or a file in it is unsafe", fixes[0] if fixes else None
        )
        return False
    for suffix in COMPANIONS:
        if inspect_path(Path(f"{db_path}{suffix}")).is_symlink:
            report.add(
                "database",
                WARN,
                f"not opened: {DB_NAME}{suffix} is a symbolic link",
                fix=aside_command(home, [f"{DB_NAME}{suffix}"]),
            )
            return False
    _check_writable(home, db_path, report)
    if not inspect_path(db_path).exists:  # as fresh as a missing home (design.md §11)
        report.add("database", OK, f"{db_path}: {NO_DB_YET}")
        return False
    return True


def _check_file(path: Path, name: str, report: Report, required: bool) -> None:
    from ...store import inspect_path

    f = inspect_path(path)
    if not f.exists:
        if not required:
            report.add(name, OK, f"{path.name} absent (normal while no connection is open)")
        return
    aside = aside_command(path.parent, [path.name])
    if f.is_symlink:
        report.add(
            name,
            FAIL,
            f"{path} is a symbolic link; relay never follows it: move it "
            "aside and ask the person where it points",
            fix=aside,
        )
    elif f.foreign:
        report.add(
            name,
            FAIL,
            f"{path} is owned by uid {f.owner_uid}, not by you "
            f"(uid {os.geteuid()}); every relay command refuses it",
            fix=aside,
        )
    elif f.error:
        report.add(name, FAIL, f"{path} cannot be read ({f.error})", fix=aside)
    elif not f.is_regular:
        report.add(
            name,
            FAIL,
            f"{path} is a {f.file_type}, not a regular file; every relay "
            "command refuses it (unsafe_state_dir): move it aside",
            fix=aside,
        )
    elif f.group_other_access and required:
        report.add(
            name,
            FAIL,
            f"{path}: mode {f.mode:04o}, expected 0600; every relay "
            "command refuses it (unsafe_state_dir)",
            fix=report.cmd("doctor --fix"),
        )
    elif f.group_other_access:
        report.add(
            name, WARN, f"{path}: mode {f.mode:04o}, expected 0600", fix=report.cmd("doctor --fix")
        )
    else:
        report.add(name, OK, f"{path.name}: regular file, not a symlink, {_describe(f)}")


def _check_writable(home: Path, db_path: Path, report: Report) -> None:
    """Can this process write where every relay command writes (design.md §11)? A
    read-only directory or relay.db (a mode without the owner's write bit, a file system
    mounted read-only) makes every command fail, and doctor, which only reads, would not
    notice otherwise. ``os.access`` answers for this process (root writes despite modes)."""
    readonly_fs = False
    try:
        readonly_fs = bool(os.statvfs(home).f_flag & os.ST_RDONLY)
    except OSError:
        pass
    if readonly_fs:
        mount = _mount_point(home)
        report.add(
            "writable",
            FAIL,
            f"{home} is on a file system mounted read-only: every "
            "relay command fails when it writes (storage_error), and it writes to apply "
            "due deadlines; remount it read-write (as root) or use another home",
            fix=shell("mount", "-o", "remount,rw", str(mount), changes=True),
        )
        return
    bad = [
        p
        for p, need in ((home, os.W_OK | os.X_OK), (db_path, os.R_OK | os.W_OK))
        if os.path.lexists(p) and not os.access(p, need)
    ]
    if bad:
        report.add(
            "writable",
            FAIL,
            f"{', '.join(str(p) for p in bad)}: not writable by you; "
            "every relay command fails when it writes (storage_error), and it writes to "
            "apply due deadlines",
            fix=report.cmd("doctor --fix"),
        )
    else:
        report.add("writable", OK, "the state directory and relay.db are writable by you")


def _mount_point(path: Path) -> Path:
    path = Path(os.path.realpath(path))
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def made_by_relay(home: Path) -> bool:
    """Is ``home`` a home relay made: a directory holding its relay.db, a regular file?
    Only such a home gets its modes set by ``--fix`` (design.md §11)."""
    from ...store import DB_NAME, inspect_path

    return inspect_path(home / DB_NAME).is_regular


def fix_modes(home: Path, report: Report) -> None:
    """Set the modes relay wants (directory 0700, files 0600) on a home relay made:
    tighten what is too open and give back the owner's read and write; never follow or
    replace a symlink, never change a directory that holds no relay.db (a project
    directory, ~, /etc: design.md §11)."""
    from ...store import DB_NAME
    from ...store.home import COMPANIONS

    if os.path.isdir(home) and not os.path.islink(home) and not made_by_relay(home):
        report.fixed.append(
            f"not changed: {home} holds no {DB_NAME}: relay did not make it, and changes "
            "nothing of it"
        )
        return
    _tighten(home, 0o700, directory=True, report=report)
    if os.path.isdir(home) and not os.path.islink(home):
        for suffix in ("", *COMPANIONS):
            _tighten(home / f"{DB_NAME}{suffix}", 0o600, directory=False, report=report)


def _tighten(path: Path, mode: int, *, directory: bool, report: Report) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_DIRECTORY if directory else os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return
    except OSError as e:
        if os.path.islink(path):
            report.fixed.append(f"not changed: {path} is a symbolic link (never followed)")
        else:
            report.fixed.append(f"not changed: {path}: {e.strerror}")
        return
    try:
        st = os.fstat(fd)
        old = stat.S_IMODE(st.st_mode)
        if not old & 0o077 and old & 0o700 == mode & 0o700:
            return
        if st.st_uid != os.geteuid():
            report.fixed.append(f"not changed: {path} is owned by uid {st.st_uid}, not by you")
            return
        if directory != stat.S_ISDIR(st.st_mode) or (
            not directory and not stat.S_ISREG(st.st_mode)
        ):
            report.fixed.append(
                f"not changed: {path} is not a regular {'directory' if directory else 'file'}"
            )
            return
        os.fchmod(fd, mode)
        report.fixed.append(f"{path}: mode {old:04o} -> {mode:04o}")
    except OSError as e:
        report.fixed.append(f"not changed: {path}: {e.strerror}")
    finally:
        os.close(fd)
