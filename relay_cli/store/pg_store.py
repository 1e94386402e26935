"""The store on PostgreSQL (design.md §13): the shared statements of sql_*.py through
the dialect layer of pg.py, and PostgreSQL's own answers where SQLite's were about the
local file (doctor's facts: ``health``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.clock import Clock
from ..core.errors import RelayError
from .api import Health, Row
from .base import SQLStore
from .dialect import PostgreSQL
from .migrations import LATEST
from .pg import PgConnection, connect, foreign_tables, table_names
from .sql_data import EXPORT_ORDER, export_query

EXPORT_BATCH = 1000  # rows per round trip of `relay export`


class PgStore(SQLStore):
    db: PgConnection
    backend = "postgresql"
    _sql = PostgreSQL
    poll_interval = PgConnection.poll_interval

    def pause(self, seconds: float) -> None:
        self.db.pause(seconds)

    def write_mark(self) -> int:
        return self.db.write_mark()

    def shared_url(self, with_password: bool = False) -> str | None:
        if with_password:
            return self.db.url
        from .url import read

        return read(self.db.url).url

    def live_session_waiters(self, peer: str, now: int) -> list[Row]:
        # doctor opens an older schema without migrating it: no waiters table, no waiters
        if self.db.schema_version < LATEST and self.db.scalar(
            "SELECT to_regclass('wake_waiters') IS NULL"
        ):
            return []
        return super().live_session_waiters(peer, now)

    # ------------------------------------------------------------ a person's data
    def export_requests(self, states: list[str] | None, since: int | None) -> Iterator[Row]:
        """As on SQLite (sql_data.py), streamed through a server-side cursor of the open
        read transaction, so a million requests are never all in memory."""
        where, params, columns = export_query(states, since)
        self.db.execute(
            f"DECLARE relay_export NO SCROLL CURSOR FOR SELECT {columns} "
            f"FROM requests WHERE {where} ORDER BY {EXPORT_ORDER}",
            params,
        )
        while rows := self.db.all(f"FETCH {EXPORT_BATCH} FROM relay_export"):
            yield from rows

    def check_vacuum(self) -> None:
        raise RelayError(
            "usage_error",
            "--vacuum rebuilds the local relay.db; on PostgreSQL the server's autovacuum "
            "makes pruned space reusable, and VACUUM FULL (which locks every table for all "
            "machines) is for the database's owner to schedule; run relay prune without it",
        )

    def database_bytes(self) -> int:
        self.check_vacuum()  # (only `prune --vacuum` asks, and it is refused here)
        return 0

    def vacuum(self) -> None:
        self.check_vacuum()

    # ------------------------------------------------------------ doctor's facts
    def health(self) -> Health:
        """The server's facts for doctor (design.md §11, §13). SQLite's facts about a
        file (journal mode, quick_check, sizes) do not apply: they stay None."""
        db = self.db
        errors: dict[str, RelayError] = {}
        server = rows = None
        try:
            server = self._server_facts()
        except RelayError as e:
            errors["server"] = e
        version = db.schema_version
        has_tables = bool(foreign_tables(db)) if version == 0 else True
        try:
            rows = {t: db.scalar(f'SELECT count(*) FROM "{t}"') for t in table_names(db)}
        except RelayError as e:
            errors["tables"] = e
        return Health(
            backend=self.backend,
            where=db.shown,
            schema_version=version,
            has_tables=has_tables,
            rows_by_table=rows,
            server=server,
            server_now_ms=db.server_now_ms(),
            errors=errors,
        )

    def _server_facts(self) -> dict[str, Any]:
        db = self.db
        (row,) = db.all(
            "SELECT current_setting('server_version'), "
            "current_setting('synchronous_commit'), "
            "(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())"
        )
        db.measure_clock()
        return {
            "url": db.shown,
            "server_version": row[0],
            "synchronous_commit": row[1],
            "ssl_in_use": bool(row[2]),
            "host": db.params.get("host") or "",
            "sslmode": db.params.get("sslmode") or "",
            "rtt_ms": db.rtt_ms,
            "clock_offset_ms": db.offset_ms,
        }


def open_pg(
    url: str,
    home: Path,
    migrate: bool = True,
    clock: Clock | None = None,
    *,
    environ: Mapping[str, str],
) -> PgStore:
    """The store on the database at ``url`` (connected in the call's ``environ``), whose
    clock reads the server's time (relay's clock on PostgreSQL, design.md §13) shifted as
    ``clock`` is."""
    db = connect(url, migrate=migrate, environ=environ)
    clock = Clock() if clock is None else clock
    return PgStore(db, home, clock.with_source(db.server_now_ms))
