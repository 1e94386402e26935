"""What `relay doctor` reports (design.md §11): each check (``Check``), the home or
database the run checked and how its printed commands name it (``Scope``), the report
with its facts, its areas and the one summary line of each (``Report``)."""

from __future__ import annotations

import os
import platform
import re
import shlex
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ... import __version__
from ...core import clock
from ...core.context import Limits
from ...core.errors import ExitStatus
from ...core.limits import OPEN_STATES
from ...core.output import size

if TYPE_CHECKING:
    from ...core.output import JsonObject
    from ...store.url import Reading

OK, WARN, FAIL = "ok", "warn", "fail"


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

    def to_json(self) -> JsonObject:
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
    # the environment of the call that checks (libpq's PGPASSWORD, PGUSER, PGPASSFILE)
    environ: Mapping[str, str] = field(default_factory=dict)
    # the limits of the call that checks (design.md §4)
    limits: Limits = field(default_factory=Limits)

    def words(self, home: Path | None = None) -> str:
        if self.url:  # the home holds no requests then: the URL names the database
            return f"--database-url {self.url_word()}"
        if home is not None:
            return f"--home {shlex.quote(str(home))}"
        return f"--home {shlex.quote(str(self.home))}" if self.home_given else ""

    def url_word(self) -> str:
        """The URL as one shell word: the URL relay prints (design.md §13), when it
        connects as the one given (it held no secret, or only a password that libpq
        finds in PGPASSWORD or ~/.pgpass), or else read from $RELAY_DATABASE_URL."""
        from ...store.url import read

        url = self.url
        assert url is not None, "only a check of a PostgreSQL database names its URL"
        reading = read(url)
        if reading.url is not None and (
            not reading.secrets
            or (reading.secrets == ("password",) and _password_elsewhere(reading, self.environ))
        ):
            return shlex.quote(reading.url)
        self.url_note = (
            "the database URL carries a password, which relay never prints: the "
            "commands read it from $RELAY_DATABASE_URL (export it first), or put "
            "the password in ~/.pgpass"
            if reading.url is not None
            else f"relay does not print the database URL ({reading.why}): the commands "
            "read it from $RELAY_DATABASE_URL (export it first)"
        )
        return '"${RELAY_DATABASE_URL:?export the database URL first}"'


def _password_elsewhere(reading: Reading, environ: Mapping[str, str]) -> bool:
    """Would libpq, run in ``environ``, find the password of the URL ``reading`` read
    without it: PGPASSWORD, or a line of the password file (the URL's passfile,
    PGPASSFILE or ~/.pgpass) matching its first host, port, database and user, as libpq
    reads them (a socket directory matches "localhost")."""
    import pwd

    if environ.get("PGPASSWORD"):
        return True

    def given(option: str, variable: str) -> str:
        return (reading.option(option) or environ.get(variable) or "").split(",")[0]

    host = given("host", "PGHOST")
    host = "localhost" if not host or host.startswith(("/", "@")) else host
    port = given("port", "PGPORT") or "5432"
    user = given("user", "PGUSER") or pwd.getpwuid(os.getuid()).pw_name
    db = given("dbname", "PGDATABASE") or user
    home = environ.get("HOME") or os.path.expanduser("~")
    path = reading.option("passfile") or environ.get("PGPASSFILE") or os.path.join(home, ".pgpass")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read(65536).splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    for line in lines:
        # fields end at a ':' that no backslash escapes (libpq's "\:" in a field)
        fields = [re.sub(r"\\(.)", r"\1", f) for f in re.split(r"(?<!\\):", line)]
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
        self.facts: JsonObject = {
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

    def to_json(self) -> JsonObject:
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
        parts.append(size(f["db_bytes"]))
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
