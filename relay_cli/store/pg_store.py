"""The store on PostgreSQL (design.md §13): the shared statements of sql_*.py through
the dialect layer of pg.py, and PostgreSQL's own answers where SQLite's were about the
local file (PRAGMAs, sqlite_master, quick_check)."""

from __future__ import annotations

from pathlib import Path

from . import Store, pg


class PgStore(Store):
    backend = "postgresql"
    poll_interval = pg.PgConnection.poll_interval

    def pause(self, seconds: float) -> None:
        self.db.pause(seconds)

    def shared_url(self, with_password: bool = False) -> str | None:
        return self.db.url if with_password else self.db.shown

    def live_session_waiters(self, peer: str, now: int):
        # doctor opens an older schema without migrating it: no waiters table, no waiters
        if self.db.schema_version < pg.LATEST and \
                self.db.scalar("SELECT to_regclass('wake_waiters') IS NULL"):
            return []
        return super().live_session_waiters(peer, now)

    # ------------------------------------------------------------ doctor's questions
    def pragma(self, name: str):
        if name == "user_version":
            return pg.schema_version(self.db) or 0
        raise ValueError(f"no PRAGMA {name} on PostgreSQL")

    def journal_mode(self) -> str:
        return "postgresql"

    def quick_check(self) -> list[str]:
        return ["ok"]

    def table_names(self) -> list[str]:
        return pg.table_names(self.db)

    def table_counts(self) -> dict[str, int]:
        return {t: self.db.scalar(f'SELECT count(*) FROM "{t}"') for t in self.table_names()}

    def foreign_tables(self) -> list[str]:
        return pg.foreign_tables(self.db)

    def server_facts(self) -> dict:
        """What doctor reports about the server (design.md §13)."""
        db = self.db
        row = db.one("SELECT current_setting('server_version'), "
                     "current_setting('synchronous_commit'), "
                     "(SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())")
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


def open_pg(url: str, home: Path, migrate: bool = True) -> PgStore:
    return PgStore(pg.connect(url, migrate=migrate), home)
