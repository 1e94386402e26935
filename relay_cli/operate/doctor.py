"""`relay doctor`: a health report of the state directory and database (design.md §11).

Doctor creates nothing and writes nothing to the database: it opens relay.db read-only
(as an immutable file when no -wal/-shm exist, so SQLite creates none), applies no due transitions and renews no lease. It keeps going when
the directory is unsafe, the database is corrupt or its schema is newer than this relay:
each problem becomes a failed check. ``fix=True`` only tightens modes that are too open
(directory 0700, files 0600) on paths that are not symlinks and belong to the caller.
"""

from __future__ import annotations

import os
import platform
import shlex
import sqlite3
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..core import clock
from ..core.context import Context
from ..core.errors import ExitStatus, RelayError
from ..core.limits import CLOCK_WARN_MS, OPEN_STATES, QUEUE_WARN_FRACTION, STATES
from ..core.output import size as _size
from ..requests import peers
from ..requests.states import MEANING

if TYPE_CHECKING:
    from relay_cli.store import Store

# a home without relay.db yet: as fresh as a missing home (design.md §11)
NO_DB_YET = (
    "not created yet; the first relay command that writes to the home creates it, "
    "e.g. `relay peers join NAME` (a read such as `relay list` creates nothing)"
)

OK, WARN, FAIL = "ok", "warn", "fail"
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

# The areas a person reads the report by: on a terminal each is one line unless asked for
# in full (`-v`), and its problems follow (design.md §11). A check belongs to the area of
# its name (before any ``:NAME``).
GROUPS = {
    "relay": ("relay_version", "python", "sqlite", "time_offset", "queue_cap"),
    "home": ("state_dir", "db_file", "wal_file", "shm_file", "writable"),
    "database": (
        "database",
        "schema",
        "quick_check",
        "journal_mode",
        "synchronous",
        "db_size",
        "tables",
        "database_url",
        "reachable",
        "server",
        "synchronous_commit",
        "tls",
        "clock",
    ),
    "work": (
        "requests",
        "delivery_unknown",
        "ledger",
        "approvals",
        "stale_drafts",
        "lapsed_sessions",
        "lapsed",
        "claim_leases",
        "reply_deadlines",
        "queues",
        "queue",
    ),
    "peers": ("peers", "wakeup"),
}
_GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}


def group_of(name: str) -> str:
    return _GROUP_OF.get(name.split(":", 1)[0], "relay")


@dataclass
class Check:
    """One line of the report. ``fix`` is the one command that repairs or settles a problem,
    runnable as printed in the caller's shell; JSON carries it as ``fix`` and, as before,
    at the end of ``detail``."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    @property
    def group(self) -> str:
        return group_of(self.name)

    def to_json(self) -> dict:
        """The one public shape of a check (design.md §11), in JSON and in the table."""
        detail = f"{self.detail}; {self.fix}" if self.fix else self.detail
        return {
            "name": self.name,
            "status": self.status,
            "detail": detail,
            "group": self.group,
            "fix": self.fix,
        }


@dataclass
class Scope:
    """Which home or database this run checked, as the caller chose them, so that every
    command doctor prints names the same one when pasted into the same shell: ``--home``
    when one was given (by --home or RELAY_HOME); on PostgreSQL ``--database-url`` instead
    (the home holds no requests then), never with a password in it (design.md §11)."""

    home: Path
    home_given: bool = False
    url: str | None = None
    url_note: str | None = field(default=None, init=False)
    # the clock of the call that checks (design.md §8)
    clock: clock.Clock = field(default_factory=clock.Clock)

    def words(self, home: Path | None = None) -> str:
        if self.url:  # the home holds no requests then: the URL names the database
            return f"--database-url {self.url_word()}"
        if home is not None:
            return f"--home {shlex.quote(str(home))}"
        return f"--home {shlex.quote(str(self.home))}" if self.home_given else ""

    def url_word(self) -> str:
        """The URL as one shell word: itself, or without its password when libpq finds
        that elsewhere, or else read from $RELAY_DATABASE_URL."""
        from ..store.url import password_of, redact

        # a mistyped URL may hold a password libpq reads otherwise ("u:12/34@h")
        if password_of(self.url) is None and redact(self.url) == self.url:
            return shlex.quote(self.url)
        if _password_elsewhere(self.url):  # libpq finds it in PGPASSWORD or ~/.pgpass
            return shlex.quote(redact(self.url))
        self.url_note = (
            "the database URL carries a password, which relay never prints: the "
            "commands read it from $RELAY_DATABASE_URL (export it first), or put "
            "the password in ~/.pgpass"
        )
        return '"${RELAY_DATABASE_URL:?export the database URL first}"'


def _password_elsewhere(url: str) -> bool:
    """Would libpq find the URL's password without it: PGPASSWORD, or a line of the
    password file (PGPASSFILE or ~/.pgpass) matching host, port, database and user?"""
    from urllib.parse import unquote, urlsplit

    if os.environ.get("PGPASSWORD"):
        return True
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "localhost", str(parts.port or 5432)
        user = unquote(parts.username or "") or os.environ.get("PGUSER", "")
    except ValueError:
        return False
    db = unquote(parts.path.lstrip("/")) or user
    path = os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read(65536).splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    for line in lines:
        fields = line.split(":")
        if line.startswith("#") or len(fields) < 5:
            continue
        if all(
            f in ("*", want) for f, want in zip(fields[:4], (host, port, db, user), strict=True)
        ):
            return True
    return False


class Report:
    def __init__(self, home: Path, scope: Scope | None = None) -> None:
        self.home = home
        self.scope = scope or Scope(home)
        self.checks: list[Check] = []
        self.fixed: list[str] = []
        self.facts: dict = {
            "home": str(home),
            "relay_version": __version__,
            "schema_version": None,
            "schema_supported": None,
            "sqlite_version": sqlite3.sqlite_version,
            "python_version": platform.python_version(),
            "journal_mode": None,
            "synchronous": None,
            "db_bytes": None,
            "requests_by_state": None,
            "tombstones": None,
            "delivery_unknown": None,
            "stale_drafts": None,
            "due_transitions": None,
            "active_peers": None,
        }

    def add(self, name: str, status: str, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name, status, detail, fix))

    def cmd(self, words: str, home: Path | None = None) -> str:
        """``relay WORDS`` on the home (or ``home``) and database this run checked."""
        scope = self.scope.words(home)
        return f"relay {words}{' ' + scope if scope else ''}"

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    @property
    def exit_code(self) -> ExitStatus:
        """`relay doctor` exits 0 unless a check fails, then 7 (design.md §11)."""
        return ExitStatus.OK if self.ok else ExitStatus.UNSAFE

    def problems(self) -> list[Check]:
        """fail, then warn checks, each in the order they ran."""
        return [c for c in self.checks if c.status == FAIL] + [
            c for c in self.checks if c.status == WARN
        ]

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in (OK, WARN, FAIL)}

    def groups(self) -> list[tuple[str, str, str]]:
        """One line per area (design.md §11): (group, worst status, summary), the summary
        leading with what a person most needs of it."""
        lines = []
        for group in GROUPS:
            checks = [c for c in self.checks if c.group == group]
            if not checks:
                continue
            warn = sum(c.status == WARN for c in checks)
            fail = sum(c.status == FAIL for c in checks)
            status = FAIL if fail else WARN if warn else OK
            text = _SUMMARIES[group](self)
            if fail or warn:
                below = ", ".join(f"{n} {s}" for n, s in ((fail, FAIL), (warn, WARN)) if n)
                text = f"{below} below; {text}"
            lines.append((group, status, text))
        return lines

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
            "fixed": self.fixed,
            **self.facts,
        }


def _summary_relay(r: Report) -> str:
    f = r.facts
    parts = [f"relay {__version__}", f"Python {f['python_version']}"]
    if f.get("backend") == "sqlite":
        parts.append(f"SQLite {f['sqlite_version']}")
    return ", ".join(parts)


def _summary_home(r: Report) -> str:
    if r.facts.get("backend") == "postgresql":
        return f"{r.home} (not used for requests on PostgreSQL)"
    if any(c.name == "state_dir" and "not created yet" in c.detail for c in r.checks):
        return f"not created yet: {r.home}"
    if all(c.status == OK for c in r.checks if c.group == "home"):
        return f"safe and writable: {r.home}"
    return str(r.home)


def _summary_database(r: Report) -> str:
    f = r.facts
    parts = []
    if f.get("database_url"):
        parts.append(f"PostgreSQL {(f.get('server_version') or '').split(' ')[0]}".strip())
    if f["schema_version"] is not None:
        parts.append(f"schema {f['schema_version']} (newest {f['schema_supported']})")
    if f.get("quick_check"):
        parts.append(f"quick_check {f['quick_check']}")
    if f["journal_mode"]:
        parts.append(f["journal_mode"])
    if f["db_bytes"] is not None:
        parts.append(_size(f["db_bytes"]))
    if f.get("database_url"):
        parts.append(f["database_url"])
    if not parts and any(
        c.name == "database" and c.detail.startswith("not created yet") for c in r.checks
    ):
        return "not created yet"
    return ", ".join(parts) or "not opened"


def _summary_work(r: Report) -> str:
    by_state = r.facts["requests_by_state"]
    if by_state is None:
        return "not read"
    open_ = sum(by_state.get(s, 0) for s in OPEN_STATES)
    parts = [f"{sum(by_state.values())} requests", f"{open_} open"]
    if by_state.get("delivery_unknown"):
        parts.append(f"{by_state['delivery_unknown']} delivery_unknown")
    return ", ".join(parts)


def _summary_peers(r: Report) -> str:
    active = r.facts["active_peers"] or []
    if not active:
        return "no active sessions"
    from collections import Counter

    ways = Counter(p["wakeup"] for p in active)
    return f"{len(active)} active; wakeup: " + ", ".join(f"{v} {n}" for v, n in ways.items())


_SUMMARIES = {
    "relay": _summary_relay,
    "home": _summary_home,
    "database": _summary_database,
    "work": _summary_work,
    "peers": _summary_peers,
}


def diagnose(
    home: Path, fix: bool = False, home_given: bool = False, context: Context | None = None
) -> Report:
    """The report on ``home`` or the database of the call's ``context`` (its URL, clock)."""
    from ..store import LATEST_SCHEMA, database_url

    context = Context.from_environ() if context is None else context
    url = database_url(context.database_url)
    report = Report(home, Scope(home, home_given, url, clock=context.clock))
    report.facts["schema_supported"] = LATEST_SCHEMA
    report.facts["backend"] = "postgresql" if url else "sqlite"
    report.add("relay_version", OK, f"relay {__version__}")
    report.add("python", OK, f"Python {platform.python_version()}")
    if url is None:
        report.add("sqlite", OK, f"SQLite {sqlite3.sqlite_version}")
    now = _now(report)
    _check_queue_cap(report)
    _check_codex_dirs(report)
    if url is not None:
        _check_postgres(home, url, report)
    else:
        if fix:
            _fix_modes(home, report)
        if _check_paths(home, report):
            _check_database(home, report, now)
    if report.scope.url_note:
        report.facts["commands_note"] = report.scope.url_note
    return report


def _check_queue_cap(report: Report) -> None:
    from ..requests.lifecycle import queue_cap

    try:
        cap = queue_cap()
    except RelayError as e:
        report.facts["queue_cap"] = None
        report.add(
            "queue_cap",
            FAIL,
            f"{e.message}; every send and submit refuses to run (usage_error)",
            fix="unset RELAY_QUEUE_CAP",
        )
        return
    report.facts["queue_cap"] = cap
    if not cap:
        report.add(
            "queue_cap", OK, "none (RELAY_QUEUE_CAP=0): a recipient's queue may grow without bound"
        )
    else:
        source = (
            "RELAY_QUEUE_CAP" if os.environ.get("RELAY_QUEUE_CAP", "").strip() else "the default"
        )
        report.add("queue_cap", OK, f"{cap} open requests per recipient ({source})")


def _check_codex_dirs(report: Report) -> None:
    """Private Codex app-server directories that a killed `relay run` left (design.md
    §12): named only when there are some; the next `relay run` of Codex removes them."""
    import shlex

    from ..agents.codex_server import stale_dirs

    try:
        stale = stale_dirs()
    except OSError:
        return
    if not stale:
        return
    report.add(
        "codex_dirs",
        WARN,
        f"{len(stale)} private Codex app-server director"
        f"{'y' if len(stale) == 1 else 'ies'} left by a `relay run` that was killed "
        f"({', '.join(stale)}); the next `relay run` of Codex removes "
        f"{'it' if len(stale) == 1 else 'them'}, and stops a server still running there",
        fix="rm -r -- " + " ".join(shlex.quote(p) for p in stale),
    )


# ------------------------------------------------------------------------ clock
def _now(report: Report) -> int:
    now_clock = report.scope.clock
    raw = now_clock.offset.strip()
    if not raw:
        report.add("time_offset", OK, "RELAY_TIME_OFFSET is not set: relay uses the system clock")
        return now_clock.now_ms()
    try:
        offset = now_clock.offset_seconds()
    except RelayError as e:
        report.add(
            "time_offset",
            FAIL,
            f"{e.message}; every relay command will refuse to run",
            fix="unset RELAY_TIME_OFFSET",
        )
        return int(time.time() * 1000)
    report.add(
        "time_offset",
        WARN,
        f"RELAY_TIME_OFFSET={raw}: relay's clock is shifted by {offset:g} s "
        f"({clock.human_duration(abs(offset))} {'ahead' if offset >= 0 else 'behind'}); "
        "it is for tests and rehearsals",
        fix="unset RELAY_TIME_OFFSET",
    )
    return now_clock.now_ms()


# ------------------------------------------------------------------------ files
def _describe(rep) -> str:
    owner = "you" if not rep.foreign else "NOT you"
    return f"mode {rep.mode:04o}, owner uid {rep.owner_uid} ({owner})"


def _unsafe_dir(report: Report, why: str, fix: str | None) -> None:
    report.add(
        "database",
        WARN,
        f"not opened: {why}; every relay command refuses this home with unsafe_state_dir",
        fix=fix,
    )


def _symlink_fix(report: Report, home: Path) -> str | None:
    """What to do about a home that is a symlink: relay never follows it, and --fix cannot
    change that. Check the directory it points to instead (if it is one), else point relay
    elsewhere: the link is not relay's to move (a dotfile manager's link, design.md §11)."""
    target = Path(os.path.realpath(home))
    if target.is_dir() and target != home:
        return report.cmd("doctor", home=target)
    return _elsewhere(report, home)


def _elsewhere(report: Report, home: Path) -> str | None:
    """The command that points relay at another home: doctor on the per-user default, or
    None when the default is this very path (then only the explanation says how)."""
    default = _default_home()
    return None if default == home else report.cmd("doctor", home=default)


POINT_ELSEWHERE = (
    "relay leaves it alone; point relay at a directory of its own: unset RELAY_HOME "
    "(the per-user default) or pass --home DIR"
)


def _check_paths(home: Path, report: Report) -> bool:
    """Directory and file checks. True when the database may be opened."""
    from ..store import DB_NAME, inspect_path, unsafe_reasons
    from ..store.home import COMPANIONS

    d = inspect_path(home)
    if d.error:
        report.add(
            "state_dir",
            FAIL,
            f"{home} cannot be read ({d.error}): it belongs to "
            "another user, or lies inside a directory of another user; use a home of "
            "your own",
            fix=report.cmd("doctor", home=_default_home()),
        )
        _unsafe_dir(report, "the state directory cannot be read", None)
        return False
    if not d.exists:  # a fresh home is not a problem (design.md §11)
        report.add(
            "state_dir",
            OK,
            f"{home}: not created yet; the first relay command that "
            f"writes to it creates it (mode 0700), e.g. `{report.cmd('peers join NAME')}` "
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
        fix = _symlink_fix(report, home)
    elif not d.is_dir:  # a user's file (a shell rc file): never relay's to move (§11)
        problems.append(
            f"is a {d.file_type}, not a directory: relay never made it, so it is not "
            "a relay home and not relay's to move or change; " + POINT_ELSEWHERE
        )
        fix = _elsewhere(report, home)
    if d.foreign:
        problems.append(
            f"is owned by uid {d.owner_uid}, not by you (uid {os.geteuid()}): use "
            "a home of your own"
        )
    if d.is_dir and not d.is_symlink and d.group_other_access:
        problems.append(f"has mode {d.mode:04o}: group or others may access it")
        if not d.foreign:
            fix = report.cmd("doctor --fix")
    if problems:
        report.add("state_dir", FAIL, f"{home} " + "; ".join(problems), fix=fix)
    else:
        report.add("state_dir", OK, f"{home}: directory, not a symlink, {_describe(d)}")

    if d.is_symlink or not d.is_dir:
        _unsafe_dir(report, "the state directory is not a real directory", fix)
        return False
    db_path = home / DB_NAME
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
                fix=_aside(home, [f"{DB_NAME}{suffix}"]),
            )
            return False
    _check_writable(home, db_path, report)
    if not inspect_path(db_path).exists:  # as fresh as a missing home (design.md §11)
        report.add("database", OK, f"{db_path}: {NO_DB_YET}")
        return False
    return True


def _check_file(path: Path, name: str, report: Report, required: bool) -> None:
    from ..store import inspect_path

    f = inspect_path(path)
    if not f.exists:
        if not required:
            report.add(name, OK, f"{path.name} absent (normal while no connection is open)")
        return
    aside = _aside(path.parent, [path.name])
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


def _relays_file(home: Path, name: str) -> bool:
    """Is ``home/name`` a file as relay makes it (design.md §11): a regular file owned by
    you, open to nobody else, in a real directory owned by you and open to nobody else?
    Only such a file gets a command that moves it."""
    from ..store import inspect_path

    d, f = inspect_path(home), inspect_path(home / name)
    return (
        d.is_dir
        and not d.is_symlink
        and not d.foreign
        and not d.group_other_access
        and f.is_regular
        and not f.foreign
        and not f.group_other_access
    )


def _aside(home: Path, names: list[str]) -> str:
    """The command that moves ``names`` in ``home`` aside (renamed, never deleted)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moves = [
        f"mv -- {shlex.quote(str(home / n))} {shlex.quote(str(home / n) + '.aside-' + stamp)}"
        for n in names
    ]
    return " && ".join(moves)


def _default_home() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("relay"))


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
            fix=f"mount -o remount,rw {shlex.quote(str(mount))}",
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


def _fix_modes(home: Path, report: Report) -> None:
    """Set the modes relay wants (directory 0700, files 0600): tighten what is too open and
    give back the owner's read and write; never follow or replace a symlink."""
    from ..store import DB_NAME
    from ..store.home import COMPANIONS

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


# ------------------------------------------------------------------------ database
def _check_database(home: Path, report: Report, now: int) -> None:
    from ..store import LATEST_SCHEMA, open_store_readonly

    try:
        store = open_store_readonly(home, None, report.scope.clock)
    except RelayError as e:
        _failed(report, "database", e)
        return
    if store is None:
        report.add("database", OK, NO_DB_YET)
        return
    try:
        try:
            health = store.health()
        except RelayError as e:
            _failed(report, "database", e)
            return
        errors = health.errors
        report.add("database", OK, f"{health.where}: a SQLite database, opened read-only")
        report.facts["schema_version"] = health.schema_version
        usable = _judge_schema(report, health, LATEST_SCHEMA, "a SQLite database")
        if "quick_check" in errors:
            _failed(report, "quick_check", errors["quick_check"])
        else:
            _check_integrity(health.integrity, report)
        _check_pragmas(health, report)
        _check_size(health.file_bytes, report)
        _check_tables(health, report)
        if usable:
            _guarded(report, "requests", lambda: _check_contents(store, report, now))
    finally:
        store.close()


def _judge_schema(report: Report, health, latest: int, what: str) -> bool:
    """The schema check from ``health``; True when relay's tables may be read."""
    if "schema" in health.errors:
        err = health.errors["schema"]
        _failed(report, "schema", err, f"cannot read the schema ({err.message})")
        return False
    return _check_schema(report, health.schema_version, health.has_tables, latest, what)


UPGRADE = "python -m pip install --upgrade relay-cli"
CORRUPT = (
    "stop every relay process, move the database aside (the next relay command starts "
    "an empty one) and restore a backup if you have one"
)


def _failed(report: Report, name: str, err: RelayError, message: str | None = None) -> None:
    """A check that failed with ``err``, with the command for its code (design.md §11)."""
    from ..store import DB_NAME
    from ..store.home import COMPANIONS

    detail, fix = f"{err.code}: {message or err.message}", None
    if err.code == "database_corrupt" and report.scope.url is None:
        names = [
            f"{DB_NAME}{s}"
            for s in ("", *COMPANIONS)
            if os.path.lexists(report.home / f"{DB_NAME}{s}")
        ]
        if _relays_file(report.home, DB_NAME):
            detail, fix = f"{detail}; {CORRUPT}", _aside(report.home, names or [DB_NAME])
        else:
            detail = (
                f"{detail}; {report.home / DB_NAME} does not look like a file relay made "
                "(a regular file of yours, mode 0600, in a directory of yours), so relay "
                "suggests no move; " + POINT_ELSEWHERE
            )
            fix = _elsewhere(report, report.home)
    elif err.code == "database_corrupt":  # PostgreSQL: another program's tables there
        detail = (
            f"{detail}; give relay a database of its own (an empty one), or look at "
            "what is in this one"
        )
        fix = f"psql {report.scope.url_word()} -c '\\dt'"
    elif err.code == "schema_too_new":
        detail, fix = f"{detail}; upgrade relay, never downgrade the database", UPGRADE
    elif err.code in ("busy", "database_unavailable"):
        detail, fix = f"{detail}; run doctor again in a moment", report.cmd("doctor")
    elif err.code == "unsafe_state_dir":
        fix = report.cmd("doctor --fix")
    report.add(name, FAIL, detail, fix=fix)


def _guarded(report: Report, name: str, fn) -> None:
    try:
        fn()
    except RelayError as err:  # the store types every failure of a statement (§7)
        _failed(report, name, err)


# ------------------------------------------------------------------------ PostgreSQL
LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")
TLS_MODES = ("require", "verify-ca", "verify-full")


def _check_postgres(home: Path, url: str, report: Report) -> None:
    """design.md §13: the server instead of the state directory and relay.db."""
    from ..store import LATEST_SCHEMA, open_store_readonly, redact

    shown = redact(url)
    report.facts["database_url"] = shown
    report.add("database_url", OK, f"{shown} (PostgreSQL; relay.db is not used)")
    started = time.monotonic()
    try:
        store = open_store_readonly(home, url, report.scope.clock)
    except RelayError as e:
        _failed(report, "reachable", e)
        return
    try:
        connect_ms = (time.monotonic() - started) * 1000
        health = store.health()
        if "server" in health.errors:
            _failed(report, "server", health.errors["server"])
        else:
            _check_server(health.server, report, connect_ms)
        report.facts["schema_version"] = health.schema_version
        usable = _judge_schema(report, health, LATEST_SCHEMA, "a PostgreSQL database")
        try:
            now = store.clock.now_ms()  # the server's clock from here on
        except RelayError:  # a bad RELAY_TIME_OFFSET: reported above; the server's clock
            now = int(health.server_now_ms)
        _check_tables(health, report)
        if usable:
            _guarded(report, "requests", lambda: _check_contents(store, report, now))
    finally:
        store.close()


def _with_sslmode(report: Report) -> str:
    """`relay doctor` again with sslmode=verify-full added to the URL."""
    url = report.scope.url or ""
    word = report.scope.url_word()
    sep = "&" if "?" in url else "?"
    if word.startswith('"$'):
        word = f'"${{RELAY_DATABASE_URL:?export the database URL first}}{sep}sslmode=verify-full"'
    else:
        word = shlex.quote(f"{shlex.split(word)[0]}{sep}sslmode=verify-full")
    return f"relay doctor --database-url {word}"


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_server(f: dict, report: Report, connect_ms: float) -> None:
    report.facts.update(
        server_version=f["server_version"],
        rtt_ms=round(f["rtt_ms"], 3),
        clock_offset_ms=round(f["clock_offset_ms"], 3),
        synchronous_commit=f["synchronous_commit"],
        tls=f["ssl_in_use"],
    )
    report.add(
        "reachable",
        OK,
        f"connected in {connect_ms:.0f} ms; a round-trip takes {f['rtt_ms']:.1f} ms",
    )
    report.add("server", OK, f"PostgreSQL {f['server_version']}")
    if f["synchronous_commit"] == "off":
        report.add(
            "synchronous_commit",
            WARN,
            "off: the server acknowledges a commit before "
            "it is on disk, so an accepted request could be lost if the server crashes; "
            "set synchronous_commit = on for relay's database (as its owner)",
            fix=f"psql {report.scope.url_word()} -c "
            "'ALTER ROLE CURRENT_USER SET synchronous_commit = on'",
        )
    else:
        report.add(
            "synchronous_commit",
            OK,
            f"{f['synchronous_commit']}: a request is on the "
            "server's disk before relay reports success",
        )
    host, mode = f["host"], f["sslmode"] or "prefer"
    local = host.startswith("/") or host in LOCAL_HOSTS or _loopback(host)
    where = "a unix socket" if (host == "" or host.startswith("/")) else host
    if f["ssl_in_use"]:
        report.add(
            "tls",
            OK,
            f"TLS in use (sslmode={mode})"
            + (
                ""
                if mode == "verify-full" or local
                else "; sslmode=verify-full also checks the server's certificate and name"
            ),
        )
    elif local:
        report.add("tls", OK, f"no TLS: the server is local ({where})")
    elif mode in TLS_MODES:
        report.add("tls", OK, f"sslmode={mode}")
    else:
        report.add(
            "tls",
            WARN,
            f"no TLS to {host} (sslmode={mode} does not require it): "
            "requests cross the network readable; add sslmode=verify-full to the URL "
            "(the server needs a certificate)",
            fix=_with_sslmode(report),
        )
    offset = f["clock_offset_ms"]
    text = (
        f"this machine's clock is {abs(offset) / 1000:.3f} s "
        f"{'behind' if offset >= 0 else 'ahead of'} the server's; relay uses the server's"
    )
    if abs(offset) > CLOCK_WARN_MS:
        report.add(
            "clock",
            WARN,
            text + "; other tools here do not correct for it: turn on this machine's time sync",
            fix="timedatectl set-ntp true",
        )
    else:
        report.add("clock", OK, text)


def _check_schema(
    report: Report, version: int, has_tables: bool, latest: int, what: str = "a SQLite database"
) -> bool:
    if version > latest:
        report.add(
            "schema",
            FAIL,
            f"schema_too_new: schema version {version}, this relay "
            f"understands up to {latest}; upgrade relay, do not downgrade the database",
            fix=UPGRADE,
        )
        return False
    if version == 0:
        if has_tables:
            _failed(
                report,
                "schema",
                RelayError(
                    "database_corrupt",
                    f"{what}, but not relay's (schema 0 with tables named like relay's)",
                ),
            )
        else:
            report.add(
                "schema",
                OK,
                f"empty database (schema 0); the next relay command that "
                f"writes creates schema {latest}",
            )
        return False
    if version < latest:
        report.add(
            "schema",
            OK,
            f"schema version {version}, newest supported {latest}: the "
            "next relay command that writes migrates it",
        )
        return True
    report.add("schema", OK, f"schema version {version} (newest supported {latest})")
    return True


def _check_integrity(result, report: Report) -> None:
    if result == ("ok",):
        report.facts["quick_check"] = "ok"
        report.add("quick_check", OK, "ok")
    else:
        shown = "; ".join(result[:3]) + (f" (+{len(result) - 3} more)" if len(result) > 3 else "")
        report.facts["quick_check"] = "failed"
        _failed(report, "quick_check", RelayError("database_corrupt", shown))


def _check_pragmas(health, report: Report) -> None:
    mode = health.journal_mode
    if mode is not None:
        report.facts["journal_mode"] = mode
        if mode == "wal":
            report.add("journal_mode", OK, "wal")
        else:
            report.add(
                "journal_mode", OK, f"{mode}; relay switches it to wal on its next writing command"
            )
    sync = health.synchronous
    if sync is not None:
        report.facts["synchronous"] = "FULL"
        report.add(
            "synchronous",
            OK,
            "FULL: relay sets it on every connection it opens "
            f"(SQLite's default for a new connection here: {SYNCHRONOUS.get(sync, sync)})",
        )
    if "journal_mode" in health.errors:
        _failed(report, "journal_mode", health.errors["journal_mode"])


def _check_size(sizes: dict[str, int], report: Report) -> None:
    total = sizes["relay.db"] + sizes["WAL"]
    report.facts["db_bytes"] = total
    report.add(
        "db_size",
        OK,
        f"{_size(total)} (relay.db {_size(sizes['relay.db'])}, WAL {_size(sizes['WAL'])})",
    )


def _check_contents(store: Store, report: Report, now: int) -> None:
    with store.transaction(write=False):
        by_state = store.count_by_state()
        tombstones = store.count_tombstones()
        due = store.count_due(now)
        stale = store.count_stale_drafts(now)
        sessions = store.active_sessions()
        # the one peer object (``peers.peer_object``) of each peer with a live session
        shown = {
            s["peer"]: peers.peer_object(store, s["peer"], now)
            for s in sessions
            if s["lease_expires_at"] > now
        }
        ledger_unknown, ledger_awaiting = _ledger_needs(store)
        lapsed_work = store.lapsed_sessions_holding_work(now)
        passed = store.passed_deadlines(now)
        cap = report.facts.get("queue_cap")
        full = store.open_counts_at_least(int(cap * QUEUE_WARN_FRACTION) + 1) if cap else []
    counts = {s: by_state.get(s, 0) for s in STATES}
    report.facts.update(
        requests_by_state=counts,
        tombstones=tombstones,
        delivery_unknown=counts["delivery_unknown"],
        stale_drafts=stale,
        due_transitions=due,
    )
    total = sum(counts.values())
    parts = ", ".join(f"{s} {n}" for s, n in counts.items() if n) or "none"
    detail = f"{total} requests ({parts}); {tombstones} pruned tombstones"
    if due:
        detail += (
            f"; {due} time-based transitions are due (the next relay command applies "
            "them; doctor shows the stored states)"
        )
    report.add("requests", OK, detail)

    unknown = counts["delivery_unknown"]
    if unknown:
        report.add(
            "delivery_unknown",
            WARN,
            f"{_n(unknown, 'request is', 'requests are')} delivery_unknown "
            f"({MEANING['delivery_unknown'][0]}): a person checks each and settles it "
            f"with relay resolve ID --outcome completed, failed or requeue",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        report.add("delivery_unknown", OK, "none need a person")
    report.facts.update(
        ledger_effect_unknown=ledger_unknown, ledger_awaiting_approval=ledger_awaiting
    )
    if ledger_unknown:
        report.add(
            "ledger",
            WARN,
            f"{_n(ledger_unknown, '`relay once` entry is', '`relay once` entries are')} "
            "effect_unknown: check whether the effect happened, then settle it with "
            "relay ledger resolve KEY --outcome succeeded|failed|forget",
            fix=report.cmd("ledger list --state effect_unknown"),
        )
    else:
        report.add("ledger", OK, "no `relay once` entry is effect_unknown")
    if ledger_awaiting:
        waits = _n(
            ledger_awaiting,
            "`relay once --approve` entry waits",
            "`relay once --approve` entries wait",
        )
        report.add(
            "approvals",
            WARN,
            f"{waits} for a person: relay approve KEY or relay deny KEY, in your own terminal",
            fix=report.cmd("ledger list --state awaiting_approval"),
        )
    else:
        report.add("approvals", OK, "no `relay once --approve` entry awaits a decision")
    if stale:
        report.add(
            "stale_drafts",
            WARN,
            f"{_n(stale, 'draft', 'drafts')} expired unsubmitted: its submit is now "
            "refused (prepared_expired); prune removes expired drafts",
            fix=report.cmd("prune"),
        )
    else:
        report.add("stale_drafts", OK, "no expired unsubmitted draft")
    held = _check_lapsed(report, lapsed_work, now)
    _check_deadlines(report, [r for r in passed if r["id"] not in held])
    _check_queues(report, full, cap)
    _check_peers(report, sessions, shown, now)


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _ids(ids: list[str]) -> str:
    return ", ".join(i[:8] for i in ids[:3]) + (f" +{len(ids) - 3}" if len(ids) > 3 else "")


def _check_lapsed(report: Report, rows, now: int) -> set[str]:
    """A session whose lease lapsed while it holds claimed work (design.md §11): the next
    relay command turns that work into delivery_unknown; a person should know now.
    Returns the ids so held."""
    held: dict[str, tuple[int, list[str]]] = {}
    for r in rows:
        held.setdefault(r["peer"], (r["lease_expires_at"], []))[1].append(r["id"])
    report.facts["lapsed_sessions"] = [
        {"peer": peer, "lease_expires_at": clock.iso(at), "claimed": ids}
        for peer, (at, ids) in held.items()
    ]
    if not held:
        report.add("lapsed_sessions", OK, "no session lost its lease while holding claimed work")
        return set()
    for peer, (at, ids) in held.items():
        report.add(
            f"lapsed:{peer}",
            WARN,
            # the ids first: on a cut line (design.md §11) they are what stays in view
            f"holds {_ids(ids)} ({_n(len(ids), 'claimed request', 'claimed requests')}), "
            f"and its lease lapsed {clock.human_duration((now - at) / 1000)} ago: the "
            f"next relay command makes {'it' if len(ids) == 1 else 'them'} "
            "delivery_unknown, for a person to settle; `relay list` does it and shows "
            f"{'it' if len(ids) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    return {i for _, ids in held.values() for i in ids}


def _check_deadlines(report: Report, rows) -> None:
    """Claim leases and reply deadlines that ran out and that no command has applied yet
    (design.md §11): those the next command makes delivery_unknown are a warn now; a
    redelivery or a final failure needs nobody, so it is said in an ok line."""
    lost = [r["id"] for r in rows if r["state"] == "delivered" and r["on_lost"] == "unknown"]
    late = [r["id"] for r in rows if r["state"] == "acknowledged"]
    again = [r for r in rows if r["state"] == "delivered" and r["on_lost"] != "unknown"]
    redeliver = sum(r["attempts"] < r["max_attempts"] for r in again)
    report.facts["claim_leases_run_out"] = [r["id"] for r in rows if r["state"] == "delivered"]
    report.facts["reply_deadlines_passed"] = late
    if lost:
        report.add(
            "claim_leases",
            WARN,
            f"{_ids(lost)}: the claim lease of {_n(len(lost), 'request', 'requests')} "
            "ran out before ack: the next relay command makes "
            f"{'it' if len(lost) == 1 else 'them'} delivery_unknown, for a person to "
            f"settle; `relay list` does it and shows {'it' if len(lost) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        note = ""
        if again:
            note = (
                f"; {redeliver} ran out and will be queued again, "
                f"{len(again) - redeliver} will fail (max_attempts_exceeded): "
                "nothing for a person"
            )
        report.add("claim_leases", OK, "no claim lease ran out with on_lost=unknown" + note)
    if late:
        report.add(
            "reply_deadlines",
            WARN,
            f"the reply deadline of {_n(len(late), 'request', 'requests')} "
            f"({_ids(late)}) passed: the next relay command makes "
            f"{'it' if len(late) == 1 else 'them'} delivery_unknown, for a person to "
            f"settle; `relay list` does it and shows {'it' if len(late) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        report.add("reply_deadlines", OK, "no acknowledged request is past its reply deadline")


def _check_queues(report: Report, rows, cap: int | None) -> None:
    """Recipients above 80 % of the queue cap (design.md §4): new requests to them are soon
    refused with capacity_exceeded until they claim and finish work."""
    report.facts["queues_near_cap"] = [{"peer": r["to_peer"], "open": r["n"]} for r in rows]
    if cap is None:
        report.add("queues", OK, "not checked: RELAY_QUEUE_CAP is not a number (see above)")
        return
    if not cap:
        report.add("queues", OK, "no queue cap (RELAY_QUEUE_CAP=0)")
        return
    if not rows:
        report.add(
            "queues",
            OK,
            f"every recipient holds at most "
            f"{int(cap * QUEUE_WARN_FRACTION)} open requests (80 % of the cap {cap})",
        )
        return
    for r in rows:
        peer, n = r["to_peer"], r["n"]
        state = (
            "full: new requests to it are refused"
            if n >= cap
            else "new requests to it are refused at the cap"
        )
        report.add(
            f"queue:{peer}",
            WARN,
            f"{n} open requests of a cap of {cap} ({min(100, n * 100 // cap)} %); "
            f"{state} (capacity_exceeded) until it claims and finishes work",
            fix=report.cmd(f"list --to {shlex.quote(peer)} --state queued"),
        )


def _check_tables(health, report: Report) -> None:
    if "tables" in health.errors:
        _failed(report, "tables", health.errors["tables"])
        return
    counts = health.rows_by_table
    report.facts["rows_by_table"] = counts
    report.add("tables", OK, ", ".join(f"{name} {n}" for name, n in counts.items()) or "none")


def _ledger_needs(store: Store) -> tuple[int, int]:
    """(effect_unknown entries that do not rerun by themselves, entries awaiting approval)."""
    from ..ledger.entries import awaiting, list_entries, reruns_by_itself

    unknown = [e for e in list_entries(store, ["effect_unknown"]) if not reruns_by_itself(e)]
    return len(unknown), len(awaiting(store))


def _check_peers(report: Report, sessions, shown: dict[str, dict], now: int) -> None:
    """``active_peers``: the peer object of each peer with a live session, with the
    seconds its lease has left (design.md §11)."""
    live = [s for s in sessions if s["lease_expires_at"] > now]
    lapsed = len(sessions) - len(live)
    active = [
        {
            **shown[s["peer"]],
            "lease_left_seconds": round((s["lease_expires_at"] - now) / 1000, 3),
        }
        for s in live
    ]
    wakeups = {name: obj["wakeup"] for name, obj in shown.items()}
    report.facts["active_peers"] = active
    note = (
        f"; {lapsed} session(s) whose lease lapsed (the next relay command ends them and "
        "their claimed work becomes delivery_unknown)"
        if lapsed
        else ""
    )
    if not active:
        report.add("peers", OK, "no active sessions" + note)
        return
    listed = ", ".join(
        f"{p['name']} ({p['kind']}, lease {clock.human_duration(p['lease_left_seconds'])} left)"
        for p in active
    )
    report.add("peers", OK, f"{len(active)} active session(s): {listed}{note}")
    for s in live:
        value = wakeups[s["peer"]]
        status, detail, fix = _wakeup_advice(s, value, now)
        report.add(f"wakeup:{s['peer']}", status, f"{value}: {detail}", fix=fix)


def _wakeup_advice(s, value: str, now: int) -> tuple[str, str, str | None]:
    """(status, detail, fix) for an active peer whose ``wakeup`` (peers.wakeup) is
    ``value``: a warn where a person can install relay's hook, naming the command; an ok
    fact where there is nothing to do."""
    from ..agents.runtimes import display, get

    kind = s["kind"]
    runtime = display(kind)
    if runtime is None:
        how = (
            "a session is blocked in `relay claim --wait` now"
            if value == "polling"
            else "it sees requests when it runs `relay inbox` or `relay claim --wait`"
        )
        if value in ("waiter", "hook"):
            how = "relay's hook ran for it"
        article = "an" if kind[0] in "aeiou" else "a"
        return OK, f"nothing to install for {article} {kind} peer; {how}", None
    if value == "waiter":
        return (
            OK,
            (
                f"a wake waiter runs for its {runtime} session: a new request wakes it "
                "(not evidence that the model reads it)"
            ),
            None,
        )
    seen = s["hook_seen_at"]
    if value == "hook":
        ago = clock.human_duration((now - seen) / 1000)
        rt = get(kind)
        idle = (
            f"; relay cannot wake an idle {runtime} session ({rt.wake_note})"
            if rt is not None and rt.wake is None and rt.wake_note
            else ""
        )
        return (
            OK,
            (
                f"relay's {runtime} hook ran {ago} ago: the session is told of waiting "
                f"requests at its next prompt or stop{idle}"
            ),
            None,
        )
    when = f"last ran {clock.human_duration((now - seen) / 1000)} ago" if seen else "never ran"
    polling = "; a session is blocked in `relay claim --wait` now" if value == "polling" else ""
    return (
        WARN,
        (f"relay's {runtime} hook {when}{polling}; install it, then restart {runtime}"),
        f"relay hook install {kind}",
    )
