"""The store's interface on SQLite: the named operations of sql_*.py over relay.db's
connection (db.py). PostgreSQL's store (pg_store.py) is this class with PostgreSQL's
connection and its own answers to the few questions about the file itself."""

from __future__ import annotations

import time
from pathlib import Path

from ..core.clock import Clock
from .db import Connection
from .sql_data import DataSQL
from .sql_hook import HookSQL
from .sql_ledger import LedgerSQL
from .sql_ops import OpsSQL
from .sql_peers import PeersSQL
from .sql_requests import RequestsSQL


class Store(RequestsSQL, PeersSQL, LedgerSQL, HookSQL, OpsSQL, DataSQL):
    backend = "sqlite"
    # A waiting command's longest sleep between looks at data_version().
    poll_interval = 0.05

    def __init__(self, db: Connection, home: Path, clock: Clock | None = None) -> None:
        self.db = db
        self.home = home
        # relay's clock for whatever is done with this store (design.md §8)
        self.clock = Clock.from_environ() if clock is None else clock

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
