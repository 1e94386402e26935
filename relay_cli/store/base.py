"""The store on SQLite: the named operations of sql_*.py over relay.db's connection
(db.py). PostgreSQL's store (pg_store.py) shares ``SQLStore`` with PostgreSQL's
connection, and gives its own answers to the few questions about the database itself."""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import AbstractContextManager
from pathlib import Path

from ..core.clock import Clock
from ..core.errors import RelayError
from .db import Connection, relay_error_from_sqlite
from .dialect import Dialect, SQLite
from .sql_activity import ActivitySQL
from .sql_data import DataSQL
from .sql_hook import HookSQL
from .sql_ledger import LedgerSQL
from .sql_ops import OpsSQL
from .sql_peers import PeersSQL
from .sql_requests import RequestsSQL
from .tables import TABLES

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Callable

if TYPE_CHECKING:
    from .api import Health, Statements


class SQLStore(RequestsSQL, PeersSQL, LedgerSQL, HookSQL, OpsSQL, ActivitySQL):
    """The operations both backends share, over a connection with relay's transaction
    discipline (db.Connection, or pg.PgConnection)."""

    backend = "sqlite"
    _sql: type[Dialect] = SQLite
    # A waiting command's longest sleep between looks at data_version().
    poll_interval = 0.05

    def __init__(self, db: Statements, home: Path, clock: Clock | None = None) -> None:
        self.db = db
        self.home = home
        # relay's clock for whatever is done with this store (design.md §8)
        self.clock = Clock() if clock is None else clock

    def pause(self, seconds: float) -> None:
        """Sleep while waiting for a change (PostgreSQL wakes early on a notification)."""
        time.sleep(seconds)

    def shared_url(self, with_password: bool = False) -> str | None:
        """The database URL that other relay processes need to reach this same database
        (``peers join --shell``, the hook's env file, `relay run`'s child), or None when
        it is the local relay.db (RELAY_HOME says where). The URL as relay prints it
        (design.md §13: rebuilt from libpq's reading, without its password; None when
        relay prints none for it) unless ``with_password``: the URL as given, for a
        child's environment only, never anything printed or written."""
        return None

    def transaction(self, write: bool = True) -> AbstractContextManager[Any]:
        return self.db.transaction(write)

    @property
    def read_only(self) -> bool:
        """The state directory cannot be written: reads work, writes are storage_error."""
        return self.db.read_only

    def data_version(self) -> int:
        return self.db.data_version()

    def write_mark(self) -> int:
        """A number that moves whenever another connection's write transaction committed
        (SQLite's ``data_version``; PostgreSQL's is the server's, pg_store.py), and never
        merely because time passed: a reader that finds it unmoved and no deadline passed
        knows the database holds what it read (the web view, design.md §17)."""
        return self.db.data_version()

    def close(self) -> None:
        self.db.close()


class SQLiteStore(DataSQL, SQLStore):  # (PgStore has its own DataSQL: pg_store.py)
    """The store on relay.db."""

    db: Connection

    # ------------------------------------------------------------ doctor's facts
    def health(self) -> Health:
        """relay.db's facts for doctor (design.md §11), read without a transaction from
        a read-only connection. The schema version must be readable (else the error is
        raised: the file is not a database doctor can look into); every other fact that
        cannot be read is left out, its error kept under the name of doctor's check."""
        db = self.db
        try:
            version = db.scalar("PRAGMA user_version")
        except sqlite3.Error as e:
            raise relay_error_from_sqlite(e) from e
        errors: dict[str, RelayError] = {}

        def read(check: str, fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except sqlite3.Error as e:
                errors.setdefault(check, relay_error_from_sqlite(e))
            except RelayError as e:
                errors.setdefault(check, e)
            return None

        tables = read(
            "schema",
            lambda: db.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"),
        )
        integrity = read("quick_check", lambda: tuple(r[0] for r in db.all("PRAGMA quick_check")))
        journal = read("journal_mode", self._journal_mode)
        synchronous = (
            None
            if journal is None
            else read("journal_mode", lambda: db.scalar("PRAGMA synchronous"))
        )
        from .api import Health  # (doctor's; api.py is not imported to run a command)

        return Health(
            backend=self.backend,
            where=str(db.path),
            schema_version=version,
            has_tables=bool(tables),
            integrity=integrity,
            journal_mode=journal,
            synchronous=synchronous,
            file_bytes=self._file_bytes(),
            rows_by_table=read("tables", self._table_counts),
            errors=errors,
        )

    def _journal_mode(self) -> str:
        """The database's journal mode as stored in the file."""
        if self.db.immutable:
            # An immutable connection reports "delete" and holds no POSIX locks, so the
            # header can be read by hand safely: bytes 18-19 are 2 for WAL.
            with open(self.db.path, "rb") as f:
                head = f.read(20)
            return "wal" if head[18:20] == b"\x02\x02" else "delete"
        return str(self.db.scalar("PRAGMA journal_mode")).lower()

    def _file_bytes(self) -> dict[str, int]:
        sizes = {}
        for name, suffix in (("relay.db", ""), ("WAL", "-wal")):
            try:
                sizes[name] = os.stat(f"{self.db.path}{suffix}").st_size
            except OSError:
                sizes[name] = 0
        return sizes

    def _table_counts(self) -> dict[str, int]:
        """Rows per table, through sqlite-utils' table introspection: relay's tables in
        the schema's order (not the file's: a migration that rebuilds a table moves it to
        the end of sqlite_master), then any other table."""
        import sqlite_utils

        db = sqlite_utils.Database(self.db.conn, recursive_triggers=False)
        order = {name: i for i, name in enumerate(TABLES)}
        tables = sorted(db.tables, key=lambda t: order.get(t.name, len(order)))
        return {table.name: table.count for table in tables}
