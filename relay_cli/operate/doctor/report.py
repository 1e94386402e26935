"""What `relay doctor` reports (design.md §11): each check (``Check``), the home or
database the run checked (``Checked``), the report
with its facts, its areas and the one summary line of each (``Report``)."""

from __future__ import annotations

import platform
import shlex
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ... import __version__
from ...core import clock
from ...core.command import NO_SCOPE, Command, Scope, relay
from ...core.context import Limits
from ...core.errors import ExitStatus
from ...core.limits import OPEN_STATES
from ...core.output import size
from ...core.record import field, record

if TYPE_CHECKING:
    from ...core.output import JsonObject

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
    "peers": ("peers", "wakeup", "activity"),
}
_GROUP_OF = {name: group for group, names in GROUPS.items() for name in names}


def group_of(name: str) -> str:
    return _GROUP_OF.get(name.split(":", 1)[0], "relay")


@record
class Check:
    """One line of the report. ``fix`` is the one command that repairs or settles a problem,
    runnable as printed in the caller's shell; JSON carries it as ``fix`` and, as before,
    at the end of ``detail``."""

    name: str
    status: str
    detail: str
    fix: Command | None = None

    @property
    def group(self) -> str:
        return group_of(self.name)

    def to_json(self, scope: Scope = NO_SCOPE) -> JsonObject:
        """The one public shape of a check (design.md §11), in JSON and in the table; its
        command rendered with the call's scope flags."""
        fix = self.fix.text(scope) if self.fix else None
        return {
            "name": self.name,
            "status": self.status,
            "detail": f"{self.detail}; {fix}" if fix else self.detail,
            "group": self.group,
            "fix": fix,
        }


@record
class Checked:
    """What this run checks: the home, the database URL (None: the home's relay.db), and
    the clock, environment and limits of the call that checks. Which scope flags the
    commands doctor prints carry is not doctor's to know: they are rendered with the
    call's scope by the command line (design.md §14)."""

    home: Path
    url: str | None = None
    # the clock of the call that checks (design.md §8)
    clock: clock.Clock = field(default_factory=clock.Clock)
    # the environment of the call that checks (libpq's variables, XDG_RUNTIME_DIR, HOME)
    environ: Mapping[str, str] = field(default_factory=dict)
    # the limits of the call that checks (design.md §4)
    limits: Limits = field(default_factory=Limits)


class Report:
    def __init__(self, home: Path, checked: Checked | None = None) -> None:
        self.home = home
        self.checked = checked or Checked(home)
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

    def add(self, name: str, status: str, detail: str, fix: Command | None = None) -> None:
        self.checks.append(Check(name, status, detail, fix))

    def cmd(self, *words: str, home: Path | None = None, changes: bool = False) -> Command:
        """``relay WORDS`` on the home and database the call checks (its scope flags), or
        on ``home``, named by its own --home (another directory than the one checked)."""
        if len(words) == 1:  # ("list --state delivery_unknown"): shell words
            words = tuple(shlex.split(words[0]))
        changes = changes or words[:2] == ("doctor", "--fix")
        if home is not None:
            return relay(*words, "--home", str(home), changes=changes, scoped=False)
        return relay(*words, changes=changes)

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

    def to_json(self, scope: Scope = NO_SCOPE) -> JsonObject:
        return {
            "ok": self.ok,
            "checks": [c.to_json(scope) for c in self.checks],
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
