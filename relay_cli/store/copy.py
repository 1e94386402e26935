"""`relay db copy --to URL` (design.md §13): the local relay.db into an empty PostgreSQL
database, every table and row, in one transaction.

The source is opened like any relay.db (so it is at this relay's schema version); the
target is connected and migrated to the same version, then filled under relay's write
lock. A target that already holds relay data is refused before anything is written. Row
order is kept (``rowid``), and the target's sequences continue after the copied rows.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RelayError
from . import pg
from .db import open_db

BATCH = 1000


def _tables(src) -> list[str]:
    """The source's tables, each after the tables its foreign keys point to."""
    names = [r[0] for r in src.all(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]
    deps = {n: {r["table"] for r in src.all(f"PRAGMA foreign_key_list('{n}')")} - {n}
            for n in names}
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [n for n in names if n not in ordered and deps[n] <= set(ordered)]
        if not ready:  # a cycle: keep the rest in name order
            ready = [n for n in names if n not in ordered]
        ordered += ready
    return ordered


def _columns(dst, table: str) -> dict[str, bool]:
    """The target table's columns: name -> whether a value can be written to it."""
    rows = dst.all("SELECT column_name, is_generated FROM information_schema.columns "
                   "WHERE table_schema = current_schema() AND table_name = ? "
                   "ORDER BY ordinal_position", (table,))
    return {r[0]: r[1] != "ALWAYS" for r in rows}


def copy(home: Path, url: str) -> dict:
    """Copy relay.db in ``home`` into the PostgreSQL database at ``url``; returns
    {"from", "to", "schema_version", "copied": {table: rows}}."""
    db_path = home / "relay.db"
    if not db_path.exists():
        raise RelayError("usage_error", f"there is no relay.db in {home} to copy "
                         "(--home or RELAY_HOME names the state directory)")
    src = open_db(home)
    try:
        dst = pg.connect(url)
        try:
            return _copy(src, dst, db_path)
        finally:
            dst.close()
    finally:
        src.close()


def _copy(src, dst, db_path: Path) -> dict:
    copied: dict[str, int] = {}
    with src.transaction(write=False), dst.transaction():
        tables = _tables(src)
        holding = [t for t in pg.table_names(dst)
                   if dst.scalar(f'SELECT EXISTS (SELECT 1 FROM "{t}")')]
        if holding:
            raise RelayError(
                "state_conflict",
                f"the target database {dst.shown} already holds relay data "
                f"({', '.join(holding)}); nothing was copied",
                detail="relay db copy fills only an empty database: give it a new one",
            )
        for table in tables:
            target = _columns(dst, table)
            if not target:
                raise RelayError("internal_error", f"the target has no table {table!r}")
            cols = [r[1] for r in src.all(f"PRAGMA table_info('{table}')") if target.get(r[1])]
            with_rowid = target.get("rowid", False) and "rowid" not in cols
            select = ", ".join(['rowid'] * with_rowid + [f'"{c}"' for c in cols])
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
    return {"from": str(db_path), "to": dst.shown, "schema_version": pg.LATEST,
            "copied": copied}
