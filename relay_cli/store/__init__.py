"""The store: every SQL statement relay runs lives in this package.

The rest of relay sees a narrow interface of named operations over plain dicts/rows, so a
second backend (PostgreSQL for agents on several machines) can implement the same
methods and pass the same tests.
"""

from __future__ import annotations

import time
from pathlib import Path

from .db import Connection, open_db, open_existing_readonly, relay_error_from_sqlite
from .home import DB_NAME, check_home, ensure_home, inspect_path, resolve_home, unsafe_reasons
from .migrations import LATEST as LATEST_SCHEMA
from .sql_data import DataSQL
from .sql_hook import HookSQL
from .sql_ledger import LedgerSQL
from .sql_ops import OpsSQL
from .sql_peers import PeersSQL
from .sql_requests import RequestsSQL
from .url import database_url, redact, set_database_url

__all__ = [
    "DB_NAME",
    "LATEST_SCHEMA",
    "Store",
    "check_home",
    "database_url",
    "redact",
    "set_database_url",
    "ensure_home",
    "inspect_path",
    "open_store",
    "relay_error_from_sqlite",
    "resolve_home",
    "unsafe_reasons",
]


class Store(RequestsSQL, PeersSQL, LedgerSQL, HookSQL, OpsSQL, DataSQL):
    backend = "sqlite"
    # A waiting command's longest sleep between looks at data_version().
    poll_interval = 0.05

    def __init__(self, db: Connection, home: Path) -> None:
        self.db = db
        self.home = home

    def pause(self, seconds: float) -> None:
        """Sleep while waiting for a change (PostgreSQL wakes early on a notification)."""
        time.sleep(seconds)

    def shared_url(self, with_password: bool = False) -> str | None:
        """The database URL that other relay processes need to reach this same database
        (``peers join --shell``, the hook's env file, `relay run`'s child), or None when
        it is the local relay.db (RELAY_HOME says where). Without its password unless
        ``with_password`` (a child's environment, never anything printed or written)."""
        return None

    def transaction(self, write: bool = True):
        return self.db.transaction(write)

    @property
    def read_only(self) -> bool:
        """The state directory cannot be written: reads work, writes are storage_error."""
        return self.db.read_only

    def data_version(self) -> int:
        return self.db.data_version()

    def close(self) -> None:
        self.db.close()


def open_store(home: str | Path | None = None) -> Store:
    """The store of this call: PostgreSQL when a database URL is set (design.md §13),
    else relay.db in the state directory (created and migrated when needed)."""
    path = resolve_home(home)
    url = database_url()
    if url is not None:
        from .pg_store import open_pg

        return open_pg(url, path)
    return Store(open_db(path), path)


def open_store_readonly(home: str | Path | None = None) -> Store | None:
    """For `doctor`: opens without creating or migrating anything; None when absent."""
    path = resolve_home(home)
    url = database_url()
    if url is not None:
        from .pg_store import open_pg

        return open_pg(url, path, migrate=False)
    db = open_existing_readonly(path)
    return None if db is None else Store(db, path)
