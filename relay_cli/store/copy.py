"""`relay db copy --to URL` (design.md §13): the local relay.db into an empty PostgreSQL
database, every table and row, in one transaction.

The source is never changed: it is opened read-only, and one at an older schema version
is copied (SQLite's backup) into a private temporary directory and that copy is migrated
and read instead. The target is looked at before anything is written there: a database
holding tables that are not relay's, or relay's tables with rows in them, is refused
before relay's schema is created in it. Then it is migrated to this relay's version and
filled under relay's write lock, in one transaction. Row order is kept (``rowid``), and
the target's sequences continue after the copied rows.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import RelayError
from . import pg
from .db import Connection, open_db, open_existing_readonly, relay_error_from_sqlite
from .migrations import LATEST, check_version
from .tables import TABLES

BATCH = 1000


def _tables(src: Connection) -> list[str]:
    """The source's tables, each after the tables its foreign keys point to."""
    names = [
        r[0]
        for r in src.all(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]
    deps = {
        n: {r["table"] for r in src.all(f"PRAGMA foreign_key_list('{n}')")} - {n} for n in names
    }
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [n for n in names if n not in ordered and deps[n] <= set(ordered)]
        if not ready:  # a cycle: keep the rest in name order
            ready = [n for n in names if n not in ordered]
        ordered += ready
    return ordered


def _columns(dst: pg.PgConnection, table: str) -> dict[str, bool]:
    """The target table's columns: name -> whether a value can be written to it."""
    rows = dst.all(
        "SELECT column_name, is_generated FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ? "
        "ORDER BY ordinal_position",
        (table,),
    )
    return {r[0]: r[1] != "ALWAYS" for r in rows}


def relay_tables() -> frozenset[str]:
    """The tables relay's migrations create (tables.py describes them)."""
    return frozenset(TABLES)


def copy(home: Path, url: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """Copy relay.db in ``home`` into the PostgreSQL database at ``url``; returns
    {"from", "to", "schema_version", "copied": {table: rows}}."""
    db_path = home / "relay.db"
    if not db_path.exists():
        raise RelayError(
            "usage_error",
            f"there is no relay.db in {home} to copy "
            "(--home or RELAY_HOME names the state directory)",
        )
    scratch = None
    try:
        src, scratch = _open_source(home)
        try:
            dst = pg.connect(url, migrate=False, environ=environ, where="--to")
            try:
                _refuse_unless_empty(dst)
                check_version(dst.schema_version, pg.WHERE, lambda: None)
                if dst.schema_version < LATEST:
                    pg.apply_migrations(dst)
                    dst.schema_version = LATEST
                return _copy(src, dst, db_path)
            finally:
                dst.close()
        finally:
            src.close()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _open_source(home: Path) -> tuple[Connection, Path | None]:
    """relay.db opened read-only (it is never changed), or, at an older schema version, a
    migrated copy of it in a private temporary directory: (connection, that directory)."""
    src = open_existing_readonly(home)
    if src is None:  # removed since ``copy`` looked
        raise RelayError("usage_error", f"there is no relay.db in {home} to copy")
    try:
        version = src.scalar("PRAGMA user_version")
        check_version(
            version,
            "relay.db",
            lambda: (
                None
                if not src.scalar("SELECT count(*) FROM sqlite_master")
                else f"{home / 'relay.db'} is a SQLite database, but not relay's"
            ),
        )
    except sqlite3.Error as e:
        src.close()
        raise relay_error_from_sqlite(e) from e
    except BaseException:
        src.close()
        raise
    if version == LATEST:
        return src, None
    scratch = Path(tempfile.mkdtemp(prefix="relay-copy-"))  # 0700, this user's
    try:
        target = sqlite3.connect(scratch / "relay.db")
        try:
            src.conn.backup(target)
        finally:
            target.close()
        (scratch / "relay.db").chmod(0o600)
        return open_db(scratch), scratch
    except BaseException as e:
        shutil.rmtree(scratch, ignore_errors=True)
        if isinstance(e, sqlite3.Error):
            raise relay_error_from_sqlite(e) from e
        raise
    finally:
        src.close()


def _refuse_unless_empty(dst: pg.PgConnection) -> None:
    """A target holding tables that are not relay's, or relay's tables with rows, is
    refused before anything is created or written there."""
    ours = relay_tables()
    names = pg.table_names(dst)
    foreign = [t for t in names if t not in ours]
    if foreign:
        raise RelayError(
            "state_conflict",
            f"the target database {dst.shown} holds tables that are not relay's "
            f"({', '.join(foreign)}); nothing was copied or created there",
            detail="relay db copy fills only an empty database: give it a new one",
        )
    _refuse_relay_data(dst, [t for t in names if t in ours])


def _refuse_relay_data(dst: pg.PgConnection, tables: list[str]) -> None:
    holding = [t for t in tables if dst.scalar(f'SELECT EXISTS (SELECT 1 FROM "{t}")')]
    if holding:
        raise RelayError(
            "state_conflict",
            f"the target database {dst.shown} already holds relay data "
            f"({', '.join(holding)}); nothing was copied",
            detail="relay db copy fills only an empty database: give it a new one",
        )


def _copy(src: Connection, dst: pg.PgConnection, db_path: Path) -> dict[str, Any]:
    copied: dict[str, int] = {}
    with src.transaction(write=False), dst.transaction():
        tables = _tables(src)
        # again, under the write lock: another relay may have written since
        _refuse_unless_empty(dst)
        for table in tables:
            target = _columns(dst, table)
            if not target:
                raise RelayError("internal_error", f"the target has no table {table!r}")
            cols = [r[1] for r in src.all(f"PRAGMA table_info('{table}')") if target.get(r[1])]
            with_rowid = target.get("rowid", False) and "rowid" not in cols
            select = ", ".join(["rowid"] * with_rowid + [f'"{c}"' for c in cols])
            names = ["rowid"] * with_rowid + cols
            n = 0
            cur = src.execute(f'SELECT {select} FROM "{table}" ORDER BY rowid')
            while True:
                rows = cur.fetchmany(BATCH)
                if not rows:
                    break
                dst.insert_many(table, names, [tuple(r) for r in rows])
                n += len(rows)
            copied[table] = n
            dst.reset_sequences(table)
        for table, n in copied.items():  # verify inside the transaction, before COMMIT
            got = dst.scalar(f'SELECT count(*) FROM "{table}"')
            if got != n:
                raise RelayError("internal_error", f"{table}: copied {n} rows, found {got}")
    return {"from": str(db_path), "to": dst.shown, "schema_version": LATEST, "copied": copied}
