"""The store: every SQL statement relay runs lives in this package.

The rest of relay sees a narrow interface of named operations over plain dicts/rows,
declared as ``Store`` (api.py) and its parts (``RequestStore``, ``PeerStore``, ...), so a second backend (PostgreSQL for agents on several
machines) implements the same methods and passes the same tests.

May import: ``core`` only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..core.clock import Clock
from ..core.errors import RelayError
from .base import SQLiteStore
from .db import open_db, open_existing_readonly, relay_error_from_sqlite
from .home import (
    DB_NAME,
    check_home,
    ensure_home,
    inspect_path,
    require_existing,
    resolve_home,
    unsafe_reasons,
)
from .migrations import LATEST as LATEST_SCHEMA
from .url import database_url, origin, refusal, shown

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from .api import (
        ActivityStore,
        ConnectionStore,
        DataStore,
        Health,
        HookStore,
        LedgerStore,
        OpsStore,
        PeerStore,
        Record,
        RequestStore,
        Row,
        Store,
    )

# the parts of ``Store`` (api.py), for a function that uses one of them
PARTS = (
    "ConnectionStore",
    "RequestStore",
    "PeerStore",
    "LedgerStore",
    "HookStore",
    "ActivityStore",
    "OpsStore",
    "DataStore",
)

__all__ = [
    "DB_NAME",
    "LATEST_SCHEMA",
    "Health",
    "Record",
    "Row",
    "Store",
    "ConnectionStore",
    "RequestStore",
    "PeerStore",
    "LedgerStore",
    "HookStore",
    "ActivityStore",
    "OpsStore",
    "DataStore",
    "SQLiteStore",
    "check_home",
    "database_file",
    "database_url",
    "origin",
    "shown",
    "ensure_home",
    "inspect_path",
    "open_store",
    "relay_error_from_sqlite",
    "resolve_home",
    "unsafe_reasons",
]


if not TYPE_CHECKING:  # (a type checker sees the import above, and no other name)

    def __getattr__(name: str):
        """``Health``, ``Row``, ``Store`` and its parts (api.py), imported when first asked for:
        running a command needs none of them (the interface is for type checkers,
        ``Health`` for doctor), and api.py's import cost every command that opens the
        store (~8 million instructions, bench/startup.py)."""
        if name in ("Health", "Row", "Store", *PARTS):
            from . import api

            return getattr(api, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def database_file(
    home: str | Path | None = None,
    url: str | None = None,
    *,
    environ: Mapping[str, str],
) -> Path:
    """The absolute path of relay.db in the (checked) state directory, for `relay db
    path`; created or not. With a database URL (``url``, as the call was given it) there
    is no file: usage_error naming the database instead (design.md §13)."""
    url = database_url(url)
    if url is not None:
        where = origin(url, environ)
        raise refusal(url, where) or RelayError(
            "usage_error",
            f"relay uses the PostgreSQL database {shown(url, where)}, not a "
            "relay.db file; read it "
            "with psql or another PostgreSQL client (relay export works on both)",
        )
    directory = resolve_home(home, environ)
    check_home(directory)
    return Path(os.path.abspath(directory / DB_NAME))


def open_store(
    home: str | Path | None = None,
    url: str | None = None,
    clock: Clock | None = None,
    create: bool = True,
    *,
    environ: Mapping[str, str],
) -> Store:
    """The store of a call: PostgreSQL when it was given a database URL (design.md §13),
    else relay.db in the state directory (created and migrated when needed; with
    ``create`` False a missing home or relay.db is ``storage_error`` and nothing is made,
    design.md §2). The store carries the call's ``clock`` (its context's; default: this
    machine's, unshifted), read from the server on PostgreSQL, connected in the call's
    ``environ`` (libpq's PGCONNECT_TIMEOUT, PGOPTIONS)."""
    path = resolve_home(home, environ)
    url = database_url(url)
    if url is None and not create:
        require_existing(path)
    clock = Clock() if clock is None else clock
    if url is not None:
        from .pg_store import open_pg

        return open_pg(url, path, clock=clock, environ=environ)
    return SQLiteStore(open_db(path), path, clock)


def open_store_readonly(
    home: str | Path | None = None,
    url: str | None = None,
    clock: Clock | None = None,
    *,
    environ: Mapping[str, str],
) -> Store | None:
    """For `doctor`: opens without creating or migrating anything; None when absent.
    ``environ``: the call's, for libpq's settings (as ``open_store``)."""
    path = resolve_home(home, environ)
    url = database_url(url)
    clock = Clock() if clock is None else clock
    if url is not None:
        from .pg_store import open_pg

        return open_pg(url, path, migrate=False, clock=clock, environ=environ)
    db = open_existing_readonly(path)
    return None if db is None else SQLiteStore(db, path, clock)


def open_pg_readonly(
    home: str | Path | None, url: str, clock: Clock, environ: Mapping[str, str]
) -> Store:
    """For `doctor` on PostgreSQL: the store at ``url`` (a checked URL), opened without
    creating or migrating anything, in the call's ``environ`` (as ``open_store``)."""
    from .pg_store import open_pg

    return open_pg(url, resolve_home(home, environ), migrate=False, clock=clock, environ=environ)
