"""Opening the database safely: header check, pragmas, schema version, migrations."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import RelayError
from ..core.limits import BUSY_TIMEOUT_S
from .home import COMPANIONS, DB_NAME, check_home, ensure_home
from .migrations import LATEST, MIGRATIONS, REPAIRS, check_version
from .views import sync as sync_views

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from .api import Params, Row

# Never open() relay.db with plain file calls while a connection may be open in this
# process: closing any descriptor of the file drops the process's POSIX locks on it, which
# is how SQLite databases get corrupted. SQLite itself reports a foreign file (NOTADB).

# Every SQLite result code, by what it means for the caller (design.md §7). The extended
# codes (SQLITE_IOERR_WRITE, SQLITE_CONSTRAINT_TRIGGER, ...) start with their primary one.
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT", "SQLITE_SCHEMA")
# The database could not, or would not, take the write; SQLite rolled the statement (or
# the transaction) back, so nothing was half-written. SQLITE_CONSTRAINT here is a write
# the database itself refused: a trigger or CHECK someone added to relay.db (relay's own
# writes are checked before they are made).
_STORAGE = (
    "SQLITE_FULL",
    "SQLITE_IOERR",
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
    "SQLITE_CONSTRAINT",
    "SQLITE_ABORT",
    "SQLITE_INTERRUPT",
    "SQLITE_TOOBIG",
    "SQLITE_NOMEM",
    "SQLITE_NOLFS",
    "SQLITE_PROTOCOL",
    "SQLITE_AUTH",
    "SQLITE_RANGE",
    "SQLITE_MISMATCH",
)
# relay's own statements are fixed SQL: a plain SQL error means the tables are not the
# ones this schema version has (someone changed them), except the few that are bugs.
_SCHEMA_MISMATCH = ("no such table", "no such column", "no such index", "has no column")


def relay_error_from_sqlite(e: sqlite3.Error) -> RelayError:
    """Map any sqlite3 exception onto the taxonomy: busy, database_corrupt, storage_error;
    ``internal_error`` only for what can be a bug in relay (a malformed statement, misuse
    of the driver)."""
    name = getattr(e, "sqlite_errorname", "") or ""
    msg = str(e)
    low = msg.lower()
    if name.startswith(_BUSY) or (not name and "locked" in low):
        return RelayError("busy", f"the database is locked by another process ({msg})")
    if (
        name.startswith(_CORRUPT)
        or "malformed" in low
        or "not a database" in low
        or (name in ("SQLITE_ERROR", "") and any(s in low for s in _SCHEMA_MISMATCH))
    ):
        return RelayError("database_corrupt", f"relay.db is not a readable relay database ({msg})")
    if name.startswith("SQLITE_CONSTRAINT") or isinstance(e, sqlite3.IntegrityError):
        return RelayError(
            "storage_error",
            f"the database refused the write and rolled it back ({msg}); nothing was changed",
        )
    if name.startswith(_STORAGE) or (
        not name
        and any(s in low for s in ("disk", "readonly", "read-only", "unable to open", "i/o"))
    ):
        return RelayError("storage_error", f"the database could not be written ({msg})")
    return RelayError("internal_error", f"unexpected SQLite error: {msg}")


class Connection:
    """A sqlite3 connection with relay's transaction discipline."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self.in_tx = False
        self.immutable = False
        self.read_only = False  # the state directory cannot be written: reads only

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def later(self, sql: str, params: Params = ()) -> None:
        """A write whose answer nobody reads (PostgreSQL sends it with the transaction's
        next statement; here it runs at once)."""
        self.conn.execute(sql, params)

    def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        self.conn.executemany(sql, seq)

    def one(self, sql: str, params: Params = ()) -> Row | None:  # a sqlite3.Row
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Params = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[Connection]:
        """``BEGIN IMMEDIATE`` (write) or a deferred read snapshot; all or nothing."""
        if self.in_tx:
            raise RuntimeError("nested transaction")
        if write and self.read_only:
            raise RelayError(
                "storage_error",
                f"the state directory {self.path.parent} is read-only: relay "
                "can read it, but this needs a write (a change, or a time-based transition "
                "that is due and must be applied before anything is shown)",
            )
        try:
            self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as e:
            raise relay_error_from_sqlite(e) from e
        self.in_tx = True
        try:
            yield self
        except sqlite3.Error as e:  # a statement failed: typed for every caller (§7)
            self._rollback()
            raise relay_error_from_sqlite(e) from e
        except BaseException:
            self._rollback()
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise relay_error_from_sqlite(e) from e
        finally:
            self.in_tx = False

    def _rollback(self) -> None:
        self.in_tx = False
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def data_version(self) -> int:
        version: int = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return version

    def close(self) -> None:
        self.conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    return conn


def open_db(home: Path) -> Connection:
    """Open (creating if needed) the database in ``home``, refusing anything unsafe.

    A state directory that cannot be written (a read-only file system or directory) is
    still read when no ``-wal`` file exists, through an immutable read-only open as doctor
    does: every committed page is then in relay.db itself, and SQLite needs no ``-shm``.
    Reads work; anything that must write is ``storage_error`` (Connection.read_only).
    """
    path = ensure_home(home)
    try:
        return _open_rw(path)
    except sqlite3.Error as e:
        if _read_only_dir(path.parent) and not _has_wal(path):
            return _open_read_only(path)
        raise relay_error_from_sqlite(e) from e


def _read_only_dir(home: Path) -> bool:
    try:
        if os.statvfs(home).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        return False
    return not os.access(home, os.W_OK)


def _has_wal(path: Path) -> bool:
    try:
        return os.stat(path.with_name(path.name + "-wal")).st_size > 0
    except FileNotFoundError:
        return False


def _open_read_only(path: Path) -> Connection:
    db = _open_uri(path, "mode=ro&immutable=1")
    try:
        version = db.scalar("PRAGMA user_version")
        check_version(version, DB_NAME, lambda: _not_relays(db.conn, path))
        if version < LATEST:
            raise RelayError(
                "storage_error",
                f"relay.db has schema version {version} and must be migrated "
                f"to {LATEST}, but the state directory {path.parent} is read-only",
            )
    except sqlite3.Error as e:
        db.close()
        raise relay_error_from_sqlite(e) from e
    except BaseException:
        db.close()
        raise
    db.read_only = True
    return db


def _open_uri(path: Path, flags: str) -> Connection:
    from urllib.parse import quote

    # Quoted: a '#' or '?' in the path would otherwise end it and drop mode=ro (SQLite
    # would then open, or even create, another file read-write).
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(path))}?{flags}",
            uri=True,
            timeout=BUSY_TIMEOUT_S,
            isolation_level=None,
        )
    except sqlite3.Error as e:
        raise relay_error_from_sqlite(e) from e
    conn.row_factory = sqlite3.Row
    db = Connection(conn, path)
    db.immutable = "immutable" in flags
    return db


def _open_rw(path: Path) -> Connection:
    conn = _connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        check_version(version, DB_NAME, lambda: _not_relays(conn, path))
        _use_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        db = Connection(conn, path)
        if version < LATEST:
            migrate(db)
        sync_views(db)
        return db
    except BaseException:
        conn.close()
        raise


def _use_wal(conn: sqlite3.Connection) -> None:
    """Make relay.db a WAL database (a lasting property of the file: after the first call
    there is nothing to do). The switch needs the file to itself, and SQLite runs no busy
    handler for it: two first calls at once on a new home would otherwise see `database
    is locked` at once, one time in about twenty (tests/requests/test_concurrency.py). So it is
    tried again, with short pauses, within the busy timeout, until this process or
    another has made the file WAL; then, as any other wait for the lock, it is `busy`."""
    import time

    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.002
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            # answers the mode the file is in after it: not WAL when the switch was refused
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal":
                return
        except sqlite3.OperationalError as e:
            if relay_error_from_sqlite(e).code != "busy" or time.monotonic() >= deadline:
                raise
        else:
            if time.monotonic() >= deadline:
                raise sqlite3.OperationalError("database is locked (switching to WAL)")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _not_relays(conn: sqlite3.Connection, path: Path) -> str | None:
    """Version 0 with tables: someone else's database (or another relay migrated it just
    now: a migration commits its tables and user_version together, so read it again)."""
    if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        return None
    if conn.execute("PRAGMA user_version").fetchone()[0] != 0:
        return None
    return f"{path} is a SQLite database, but not relay's"


def migrate(db: Connection) -> None:
    with db.transaction():
        version = db.scalar("PRAGMA user_version")
        check_version(version, DB_NAME, lambda: _not_relays(db.conn, db.path))
        for number in range(version, LATEST):
            if number + 1 in REPAIRS:
                REPAIRS[number + 1](db)
            for statement in _split(MIGRATIONS[number]):
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {LATEST}")


def _split(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit the transaction)."""
    out, buf = [], []
    for line in script.splitlines():
        buf.append(line)
        candidate = "\n".join(buf).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            out.append(candidate)
            buf = []
    rest = "\n".join(buf).strip()
    if rest:
        out.append(rest)
    return out


def open_existing_readonly(home: Path) -> Connection | None:
    """For `doctor`: open without creating or migrating anything; None when absent."""
    check_home(home)
    path = home / DB_NAME
    if not path.exists():
        return None
    # Without a -wal/-shm pair every committed page is in relay.db itself (the last
    # connection checkpointed and removed them): read it as immutable, which creates no
    # -wal/-shm files (doctor creates nothing). Writers append to a new WAL and do not
    # touch relay.db until a checkpoint, so this read stays consistent.
    side = [path.with_name(path.name + s) for s in COMPANIONS]
    flags = "mode=ro" + ("" if any(p.exists() for p in side) else "&immutable=1")
    return _open_uri(path, flags)
