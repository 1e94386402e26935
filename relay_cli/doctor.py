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
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from . import __version__, clock, peers
from .errors import RelayError
from .output import size as _size
from .states import MEANING, SETTLE, STATES

# a home without relay.db yet: as fresh as a missing home (design.md §11)
NO_DB_YET = ("not created yet; the first relay command that uses the home creates it, "
             "e.g. `relay peers join NAME`")

OK, WARN, FAIL = "ok", "warn", "fail"
SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
COMPANIONS = ("-wal", "-shm")


@dataclass
class Check:
    """One line of the report. ``fix`` is the command (or step) that repairs a problem;
    JSON carries it at the end of ``detail``."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict:
        detail = f"{self.detail}; {self.fix}" if self.fix else self.detail
        return {"name": self.name, "status": self.status, "detail": detail}


class Report:
    def __init__(self, home: Path) -> None:
        self.home = home
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

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    @property
    def exit_code(self) -> int:
        """`relay doctor` exits 0 unless a check fails, then 7 (design.md §11)."""
        return 0 if self.ok else 7

    def problems_first(self) -> list[Check]:
        """The checks as a person reads them (design.md §11): fail, then warn, then ok,
        each group in the order the checks ran."""
        order = {FAIL: 0, WARN: 1, OK: 2}
        return sorted(self.checks, key=lambda c: order.get(c.status, 0))

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in (OK, WARN, FAIL)}

    def to_dict(self) -> dict:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks],
                "fixed": self.fixed, **self.facts}


def diagnose(home: Path, fix: bool = False) -> Report:
    from .store import LATEST_SCHEMA, database_url

    url = database_url()
    report = Report(home)
    report.facts["schema_supported"] = LATEST_SCHEMA
    report.facts["backend"] = "postgresql" if url else "sqlite"
    report.add("relay_version", OK, f"relay {__version__}")
    report.add("python", OK, f"Python {platform.python_version()}")
    if url is None:
        report.add("sqlite", OK, f"SQLite {sqlite3.sqlite_version}")
    now = _now(report)
    if url is not None:
        _check_postgres(home, url, report)
        return report
    if fix:
        _fix_modes(home, report)
    if not _check_paths(home, report):
        return report
    _check_database(home, report, now)
    return report


# ------------------------------------------------------------------------ clock
def _now(report: Report) -> int:
    raw = os.environ.get("RELAY_TIME_OFFSET", "").strip()
    if not raw:
        report.add("time_offset", OK, "RELAY_TIME_OFFSET is not set: relay uses the system clock")
        return clock.now_ms()
    try:
        offset = clock.offset_seconds()
    except RelayError as e:
        report.add("time_offset", FAIL, f"{e.message}; every relay command will refuse to run")
        return int(time.time() * 1000)
    report.add("time_offset", WARN,
               f"RELAY_TIME_OFFSET={raw}: relay's clock is shifted by {offset:g} s "
               f"({clock.human_duration(abs(offset))} {'ahead' if offset >= 0 else 'behind'})",
               fix="unset RELAY_TIME_OFFSET (it is for tests and rehearsals)")
    return clock.now_ms()


# ------------------------------------------------------------------------ files
def _describe(rep) -> str:
    owner = "you" if not rep.foreign else "NOT you"
    return f"owner uid {rep.owner_uid} ({owner}), mode {rep.mode:04o}"


def _check_paths(home: Path, report: Report) -> bool:
    """Directory and file checks. True when the database may be opened."""
    from .store import DB_NAME, inspect_path, unsafe_reasons

    d = inspect_path(home)
    if d.error:
        report.add("state_dir", FAIL, f"{home} cannot be read ({d.error}): it belongs to "
                   "another user, or lies inside a directory of another user")
        report.add("database", WARN, "not opened: the state directory is unsafe (see above); "
                   "every relay command refuses it with unsafe_state_dir")
        return False
    if not d.exists:  # a fresh home is not a problem (design.md §11)
        report.add("state_dir", OK, f"{home}: not created yet; the first relay command that "
                   "uses it creates it (mode 0700), e.g. `relay peers join NAME`")
        report.add("database", OK, "not created yet (created with the state directory)")
        return False
    problems = []
    if d.is_symlink:
        problems.append("is a symbolic link (relay never follows it)")
    elif not d.is_dir:
        problems.append("is not a directory")
    if d.foreign:
        problems.append(f"is owned by uid {d.owner_uid}, not by you (uid {os.geteuid()})")
    if d.is_dir and not d.is_symlink and d.group_other_access:
        problems.append(f"has mode {d.mode:04o}: group or others may access it "
                        "(`relay doctor --fix` sets 0700)")
    if problems:
        report.add("state_dir", FAIL, f"{home} " + "; ".join(problems),
                   fix="relay doctor --fix" if d.is_dir and not d.is_symlink and not d.foreign
                   and d.group_other_access else None)
    else:
        report.add("state_dir", OK, f"{home}: directory, not a symlink, {_describe(d)}")

    if d.is_symlink or not d.is_dir:
        report.add("database", WARN, "not opened: the state directory is unsafe (see above); "
                   "every relay command refuses it with unsafe_state_dir")
        return False
    db_path = home / DB_NAME
    for suffix in ("", *COMPANIONS):
        path = Path(f"{db_path}{suffix}")
        name = {"": "db_file", "-wal": "wal_file", "-shm": "shm_file"}[suffix]
        _check_file(path, name, report, required=not suffix)

    if unsafe_reasons(home):
        report.add("database", WARN, "not opened: the state directory is unsafe (see above); "
                   "every relay command refuses it with unsafe_state_dir")
        return False
    for suffix in COMPANIONS:
        if inspect_path(Path(f"{db_path}{suffix}")).is_symlink:
            report.add("database", WARN, f"not opened: {DB_NAME}{suffix} is a symbolic link")
            return False
    if not inspect_path(db_path).exists:  # as fresh as a missing home (design.md §11)
        report.add("database", OK, f"{db_path}: {NO_DB_YET}")
        return False
    return True


def _check_file(path: Path, name: str, report: Report, required: bool) -> None:
    from .store import inspect_path

    f = inspect_path(path)
    if not f.exists:
        if not required:
            report.add(name, OK, f"{path.name}: absent (normal while no connection is open)")
        return
    if f.is_symlink:
        report.add(name, FAIL, f"{path} is a symbolic link; relay never follows it: move it "
                   "aside and ask the person where it points")
    elif f.foreign:
        report.add(name, FAIL, f"{path} is owned by uid {f.owner_uid}, not by you "
                   f"(uid {os.geteuid()})")
    elif f.error:
        report.add(name, FAIL, f"{path} cannot be read ({f.error})")
    elif not f.is_regular:
        report.add(name, FAIL, f"{path} is a {f.file_type}, not a regular file; every relay "
                   "command refuses it (unsafe_state_dir): move it aside")
    elif f.group_other_access and required:
        report.add(name, FAIL, f"{path}: mode {f.mode:04o}, expected 0600; every relay "
                   "command refuses it (unsafe_state_dir)", fix="relay doctor --fix")
    elif f.group_other_access:
        report.add(name, WARN, f"{path}: mode {f.mode:04o}, expected 0600",
                   fix="relay doctor --fix")
    else:
        report.add(name, OK, f"{path.name}: regular file, not a symlink, {_describe(f)}")


def _fix_modes(home: Path, report: Report) -> None:
    """Tighten modes that are too open; never follow or replace a symlink."""
    from .store import DB_NAME

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
        if not old & 0o077:
            return
        if st.st_uid != os.geteuid():
            report.fixed.append(f"not changed: {path} is owned by uid {st.st_uid}, not by you")
            return
        if directory != stat.S_ISDIR(st.st_mode) or (not directory and not stat.S_ISREG(
                st.st_mode)):
            report.fixed.append(f"not changed: {path} is not a regular "
                                f"{'directory' if directory else 'file'}")
            return
        os.fchmod(fd, mode)
        report.fixed.append(f"{path}: mode {old:04o} -> {mode:04o}")
    except OSError as e:
        report.fixed.append(f"not changed: {path}: {e.strerror}")
    finally:
        os.close(fd)


# ------------------------------------------------------------------------ database
def _check_database(home: Path, report: Report, now: int) -> None:
    from .store import LATEST_SCHEMA, open_store_readonly, relay_error_from_sqlite

    try:
        store = open_store_readonly(home)
    except RelayError as e:
        report.add("database", FAIL, f"{e.code}: {e.message}")
        return
    except sqlite3.Error as e:
        err = relay_error_from_sqlite(e)
        report.add("database", FAIL, f"{err.code}: {err.message}")
        return
    if store is None:
        report.add("database", OK, NO_DB_YET)
        return
    try:
        try:
            version = store.pragma("user_version")
        except sqlite3.Error as e:
            err = relay_error_from_sqlite(e)
            report.add("database", FAIL, f"{err.code}: {err.message}")
            return
        report.add("database", OK, f"{store.db.path}: a SQLite database, opened read-only")
        report.facts["schema_version"] = version
        try:
            tables = store.table_names()
        except sqlite3.Error as e:
            err = relay_error_from_sqlite(e)
            report.add("schema", FAIL, f"{err.code}: cannot read the schema ({err.message})")
            usable = False
        else:
            usable = _check_schema(report, version, bool(tables), LATEST_SCHEMA)
        _guarded(report, "quick_check", lambda: _check_integrity(store, report))
        _guarded(report, "journal_mode", lambda: _check_pragmas(store, report))
        _check_size(store.db.path, report)
        _guarded(report, "tables", lambda: _check_tables(store, report))
        if usable:
            _guarded(report, "requests", lambda: _check_contents(store, report, now))
    finally:
        store.close()


def _guarded(report: Report, name: str, fn) -> None:
    from .store import relay_error_from_sqlite

    try:
        fn()
    except sqlite3.Error as e:
        err = relay_error_from_sqlite(e)
        report.add(name, FAIL, f"{err.code}: {err.message}")
    except RelayError as err:  # a statement inside a transaction (already typed)
        report.add(name, FAIL, f"{err.code}: {err.message}")


# ------------------------------------------------------------------------ PostgreSQL
LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")
TLS_MODES = ("require", "verify-ca", "verify-full")
CLOCK_WARN_MS = 1000


def _check_postgres(home: Path, url: str, report: Report) -> None:
    """design.md §13: the server instead of the state directory and relay.db."""
    from .store import LATEST_SCHEMA, open_store_readonly, redact

    shown = redact(url)
    report.facts["database_url"] = shown
    report.add("database_url", OK, f"{shown} (PostgreSQL; relay.db is not used)")
    started = time.monotonic()
    try:
        store = open_store_readonly(home)
    except RelayError as e:
        report.add("reachable", FAIL, f"{e.code}: {e.message}")
        return
    try:
        connect_ms = (time.monotonic() - started) * 1000
        _guarded(report, "server", lambda: _check_server(store, report, connect_ms))
        version = store.db.schema_version
        report.facts["schema_version"] = version
        foreign = bool(store.foreign_tables()) if version == 0 else True
        usable = _check_schema(report, version, foreign, LATEST_SCHEMA, "a PostgreSQL database")
        try:
            now = clock.now_ms()  # the server's clock from here on
        except RelayError:  # a bad RELAY_TIME_OFFSET: reported above; the server's clock
            now = int(store.db.server_now_ms())
        _guarded(report, "tables", lambda: _check_tables(store, report))
        if usable:
            _guarded(report, "requests", lambda: _check_contents(store, report, now))
    finally:
        store.close()


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_server(store, report: Report, connect_ms: float) -> None:
    f = store.server_facts()
    report.facts.update(server_version=f["server_version"], rtt_ms=round(f["rtt_ms"], 3),
                        clock_offset_ms=round(f["clock_offset_ms"], 3),
                        synchronous_commit=f["synchronous_commit"], tls=f["ssl_in_use"])
    report.add("reachable", OK, f"connected in {connect_ms:.0f} ms; a round-trip takes "
               f"{f['rtt_ms']:.1f} ms")
    report.add("server", OK, f"PostgreSQL {f['server_version']}")
    if f["synchronous_commit"] == "off":
        report.add("synchronous_commit", WARN, "off: the server acknowledges a commit before "
                   "it is on disk, so an accepted request could be lost if the server crashes; "
                   "set synchronous_commit = on for relay's database or role")
    else:
        report.add("synchronous_commit", OK, f"{f['synchronous_commit']}: a request is on the "
                   "server's disk before relay reports success")
    host, mode = f["host"], f["sslmode"] or "prefer"
    local = host.startswith("/") or host in LOCAL_HOSTS or _loopback(host)
    where = "a unix socket" if (host == "" or host.startswith("/")) else host
    if f["ssl_in_use"]:
        report.add("tls", OK, f"TLS in use (sslmode={mode})"
                   + ("" if mode == "verify-full" or local else
                      "; sslmode=verify-full also checks the server's certificate and name"))
    elif local:
        report.add("tls", OK, f"no TLS: the server is local ({where})")
    elif mode in TLS_MODES:
        report.add("tls", OK, f"sslmode={mode}")
    else:
        report.add("tls", WARN, f"no TLS to {host} (sslmode={mode} does not require it): "
                   "requests cross the network readable; add sslmode=verify-full to the URL")
    offset = f["clock_offset_ms"]
    text = (f"this machine's clock is {abs(offset) / 1000:.3f} s "
            f"{'behind' if offset >= 0 else 'ahead of'} the server's; relay uses the server's")
    if abs(offset) > CLOCK_WARN_MS:
        report.add("clock", WARN, text + " (fix this machine's time sync: other tools here "
                   "do not correct for it)")
    else:
        report.add("clock", OK, text)


def _check_schema(report: Report, version: int, has_tables: bool, latest: int,
                  what: str = "a SQLite database") -> bool:
    if version > latest:
        report.add("schema", FAIL, f"schema_too_new: schema version {version}, this relay "
                   f"understands up to {latest}; upgrade relay, do not downgrade the database")
        return False
    if version == 0:
        if has_tables:
            report.add("schema", FAIL, f"database_corrupt: {what}, but not relay's "
                       "(schema 0 with tables named like relay's)")
        else:
            report.add("schema", WARN, f"empty database (schema 0); the next relay command that "
                       f"writes creates schema {latest}")
        return False
    if version < latest:
        report.add("schema", WARN, f"schema version {version}, newest supported {latest}: the "
                   "next relay command that writes migrates it")
        return True
    report.add("schema", OK, f"schema version {version} (newest supported {latest})")
    return True


def _check_integrity(store, report: Report) -> None:
    result = store.quick_check()
    if result == ["ok"]:
        report.add("quick_check", OK, "ok")
    else:
        shown = "; ".join(result[:3]) + (f" (+{len(result) - 3} more)" if len(result) > 3 else "")
        report.add("quick_check", FAIL, f"database_corrupt: {shown}")


def _check_pragmas(store, report: Report) -> None:
    mode = store.journal_mode()
    report.facts["journal_mode"] = mode
    if mode == "wal":
        report.add("journal_mode", OK, "wal")
    else:
        report.add("journal_mode", WARN, f"{mode}; relay switches it to wal on its next "
                   "writing command")
    sync = store.pragma("synchronous")
    report.facts["synchronous"] = "FULL"
    report.add("synchronous", OK, "FULL: relay sets it on every connection it opens "
               f"(SQLite's default for a new connection here: {SYNCHRONOUS.get(sync, sync)})")


def _check_size(path: Path, report: Report) -> None:
    sizes = {}
    for suffix in ("", "-wal"):
        try:
            sizes[suffix] = os.stat(f"{path}{suffix}").st_size
        except OSError:
            sizes[suffix] = 0
    total = sizes[""] + sizes["-wal"]
    report.facts["db_bytes"] = total
    report.add("db_size", OK, f"{_size(total)} (relay.db {_size(sizes[''])}, "
               f"WAL {_size(sizes['-wal'])})")


def _check_contents(store, report: Report, now: int) -> None:
    from .ledger import SETTLE as LEDGER_SETTLE

    with store.transaction(write=False):
        by_state = store.count_by_state()
        tombstones = store.count_tombstones()
        due = store.count_due(now)
        stale = store.count_stale_drafts(now)
        sessions = store.active_sessions()
        wakeups = {s["peer"]: peers.wakeup(store, s["peer"], now) for s in sessions
                   if s["lease_expires_at"] > now}
        ledger_unknown, ledger_awaiting = _ledger_needs(store)
        lapsed_work = store.lapsed_sessions_holding_work(now)
    counts = {s: by_state.get(s, 0) for s in STATES}
    report.facts.update(requests_by_state=counts, tombstones=tombstones,
                        delivery_unknown=counts["delivery_unknown"], stale_drafts=stale,
                        due_transitions=due)
    total = sum(counts.values())
    parts = ", ".join(f"{s} {n}" for s, n in counts.items() if n) or "none"
    detail = f"{total} requests ({parts}); {tombstones} pruned tombstones"
    if due:
        detail += (f"; {due} time-based transitions are due (the next relay command applies "
                   "them; doctor shows the stored states)")
    report.add("requests", OK, detail)

    unknown = counts["delivery_unknown"]
    if unknown:
        report.add("delivery_unknown", WARN,
                   f"{_n(unknown, 'request is', 'requests are')} delivery_unknown "
                   f"({MEANING['delivery_unknown'][0]}); a person checks and settles each "
                   "(never rerun them blindly)",
                   fix=f"relay list --state delivery_unknown, then {SETTLE}")
    else:
        report.add("delivery_unknown", OK, "none need a person")
    report.facts.update(ledger_effect_unknown=ledger_unknown,
                        ledger_awaiting_approval=ledger_awaiting)
    if ledger_unknown:
        report.add("ledger", WARN,
                   f"{_n(ledger_unknown, '`relay once` entry is', '`relay once` entries are')} "
                   "effect_unknown: relay never saw the command end; check whether its effect "
                   "happened",
                   fix=f"relay ledger list --state effect_unknown, then {LEDGER_SETTLE}")
    else:
        report.add("ledger", OK, "no `relay once` entry is effect_unknown")
    if ledger_awaiting:
        waits = _n(ledger_awaiting, "`relay once --approve` entry waits",
                   "`relay once --approve` entries wait")
        report.add("approvals", WARN, f"{waits} for a person's decision; nothing ran yet",
                   fix="relay ledger list --state awaiting_approval, then relay approve KEY or "
                       "relay deny KEY (in your own terminal)")
    else:
        report.add("approvals", OK, "no `relay once --approve` entry awaits a decision")
    report.add("stale_drafts", OK if not stale else WARN,
               f"{_n(stale, 'expired unsubmitted draft', 'expired unsubmitted drafts')}",
               fix="relay prune" if stale else None)
    _check_lapsed(report, lapsed_work, now)
    _check_peers(report, sessions, wakeups, now)


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _check_lapsed(report: Report, rows, now: int) -> None:
    """A session whose lease lapsed while it holds claimed work (design.md §11): the next
    relay command turns that work into delivery_unknown; a person should know now."""
    held: dict[str, tuple[int, list[str]]] = {}
    for r in rows:
        held.setdefault(r["peer"], (r["lease_expires_at"], []))[1].append(r["id"])
    report.facts["lapsed_sessions"] = [
        {"peer": peer, "lease_expires_at": clock.iso(at), "claimed": ids}
        for peer, (at, ids) in held.items()]
    if not held:
        report.add("lapsed_sessions", OK, "no session lost its lease while holding claimed work")
        return
    for peer, (at, ids) in held.items():
        shown = ", ".join(i[:8] for i in ids[:3]) + (f" +{len(ids) - 3}" if len(ids) > 3 else "")
        report.add(f"lapsed:{peer}", WARN,
                   f"the session's lease lapsed {clock.human_duration((now - at) / 1000)} ago "
                   f"while it holds {_n(len(ids), 'claimed request', 'claimed requests')} "
                   f"({shown}); the next relay command makes "
                   f"{'it' if len(ids) == 1 else 'them'} delivery_unknown",
                   fix=f"check whether the agent did the work, then {SETTLE}; run agents "
                       "under relay run so their lease stays renewed")


def _check_tables(store, report: Report) -> None:
    counts = store.table_counts()
    report.facts["rows_by_table"] = counts
    report.add("tables", OK, ", ".join(f"{name} {n}" for name, n in counts.items()) or "none")


def _ledger_needs(store) -> tuple[int, int]:
    """(effect_unknown entries that do not rerun by themselves, entries awaiting approval)."""
    from . import ledger

    unknown = [e for e in ledger.list_entries(store, ["effect_unknown"])
               if not e.get("idempotent")]
    return len(unknown), len(ledger.awaiting(store))


def _check_peers(report: Report, sessions, wakeups: dict[str, str], now: int) -> None:
    live = [s for s in sessions if s["lease_expires_at"] > now]
    lapsed = len(sessions) - len(live)
    active = [{
        "name": s["peer"], "kind": s["kind"],
        "lease_expires_at": clock.iso(s["lease_expires_at"]),
        "lease_left_seconds": round((s["lease_expires_at"] - now) / 1000, 3),
        "wakeup": wakeups[s["peer"]],
    } for s in live]
    report.facts["active_peers"] = active
    note = (f"; {lapsed} session(s) whose lease lapsed (the next relay command ends them and "
            "their claimed work becomes delivery_unknown)" if lapsed else "")
    if not active:
        report.add("peers", OK, "no active sessions" + note)
        return
    listed = ", ".join(
        f"{p['name']} ({p['kind']}, lease {clock.human_duration(p['lease_left_seconds'])} left)"
        for p in active)
    report.add("peers", OK, f"{len(active)} active session(s): {listed}{note}")
    for s in live:
        value = wakeups[s["peer"]]
        status, detail = _wakeup_advice(s, value, now)
        report.add(f"wakeup:{s['peer']}", status, f"{value}: {detail}")


def _wakeup_advice(s, value: str, now: int) -> tuple[str, str]:
    """(status, detail) for an active peer whose ``wakeup`` (peers.wakeup) is ``value``: a
    warn where a person can install relay's hook, an ok fact where there is nothing to do."""
    from .runtimes import display

    kind = s["kind"]
    runtime = display(kind)
    if runtime is None:
        how = ("a session is blocked in `relay claim --wait` now" if value == "polling"
               else "it sees requests when it runs `relay inbox` or `relay claim --wait`")
        if value in ("waiter", "hook"):
            how = "relay's hook ran for it"
        return OK, f"nothing to install for {'an' if kind[0] in 'aeiou' else 'a'} {kind} peer; {how}"
    if value == "waiter":
        return OK, (f"a wake waiter runs for its {runtime} session: a new request wakes it "
                    "(not evidence that the model reads it)")
    seen = s["hook_seen_at"]
    if value == "hook":
        ago = clock.human_duration((now - seen) / 1000)
        return OK, (f"relay's {runtime} hook ran {ago} ago: the session is told of waiting "
                    "requests at its next prompt or stop")
    when = (f"last ran {clock.human_duration((now - seen) / 1000)} ago" if seen
            else "never ran for this peer")
    polling = "; a session is blocked in `relay claim --wait` now" if value == "polling" else ""
    return WARN, (f"relay's {runtime} hook {when}{polling}; `relay hook install {kind}` "
                  f"installs it (then restart {runtime})")
