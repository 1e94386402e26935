"""The store: every SQL statement relay runs lives in this package.

The rest of relay sees a narrow interface of named operations over plain dicts/rows, so a
second backend (PostgreSQL for agents on several machines) can implement the same
methods and pass the same tests.
"""

from __future__ import annotations

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

__all__ = [
    "DB_NAME",
    "LATEST_SCHEMA",
    "Store",
    "check_home",
    "ensure_home",
    "inspect_path",
    "open_store",
    "relay_error_from_sqlite",
    "resolve_home",
    "unsafe_reasons",
]


class Store(RequestsSQL, PeersSQL, LedgerSQL, HookSQL, OpsSQL, DataSQL):
    def __init__(self, db: Connection, home: Path) -> None:
        self.db = db
        self.home = home

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
    path = resolve_home(home)
    return Store(open_db(path), path)


def open_store_readonly(home: str | Path | None = None) -> Store | None:
    path = resolve_home(home)
    db = open_existing_readonly(path)
    return None if db is None else Store(db, path)
