"""SQL for handing relay's data to people: `relay export` and `relay prune --vacuum`."""

from __future__ import annotations

import os

from .tables import REQUEST_LISTED

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .api import Record
    from .db import Connection

EXPORT_ORDER = "created_at, rowid"


def export_query(states: list[str] | None, since: int | None) -> tuple[str, list[object], str]:
    """`relay export`'s (where clause, its parameters, the columns) on the requests table."""
    where: list[str] = ["pruned = 0"]
    params: list[object] = []
    if states:
        where.append(f"state IN ({', '.join('?' * len(states))})")
        params += states
    if since is not None:
        where.append("created_at >= ?")
        params.append(since)
    columns = ", ".join(REQUEST_LISTED)
    return " AND ".join(where), params, columns


class DataSQL:
    db: Connection  # SQLite's (PgStore has its own of each: pg_store.py)

    def export_requests(self, states: list[str] | None, since: int | None) -> Iterable[Record]:
        """Requests that are not tombstones (as `list` shows them), oldest first, as an
        iterator of rows; call it inside a read transaction and consume it there.

        sqlite-utils builds and streams the query (``rows_where``), so an export of a
        million requests never holds them all in memory.
        """
        import sqlite_utils

        db = sqlite_utils.Database(self.db.conn, recursive_triggers=False, execute_plugins=False)
        where, params, columns = export_query(states, since)
        return db["requests"].rows_where(where, params, select=columns, order_by=EXPORT_ORDER)

    def database_bytes(self) -> int:
        """relay.db plus its write-ahead log, in bytes, as they are on disk now."""
        total = 0
        for path in (self.db.path, self.db.path.with_name(self.db.path.name + "-wal")):
            try:
                total += os.stat(path).st_size
            except FileNotFoundError:
                pass
        return total

    def check_vacuum(self) -> None:
        """`prune --vacuum` can rebuild this database (on PostgreSQL it is refused)."""

    def vacuum(self) -> None:
        """Rebuild relay.db without its free pages, then move everything from the WAL
        into it and truncate the WAL, so the file on disk shrinks now (not at some later
        checkpoint). Outside any transaction; waits for the write lock like a writer."""
        self.db.execute("VACUUM")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
