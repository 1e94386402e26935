"""The store's declared interface: what the rest of relay may ask of a store, on either
backend (design.md §13), and ``Health``, the facts a store reports about its own database
for `relay doctor` to judge (design.md §11).

Nothing here touches a database; the SQLite store (base.py) and the PostgreSQL store
(pg_store.py) implement it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RelayError


@dataclass(frozen=True)
class Health:
    """What a store can say about its database, as facts (doctor judges them).

    A fact that does not apply to the backend is None (SQLite has no server, PostgreSQL
    no journal mode or quick_check of a file); a fact that could not be read is absent
    and its error is in ``errors`` under the name of doctor's check that reports it.
    """

    backend: str  # "sqlite" or "postgresql"
    where: str  # relay.db's path, or the database URL without its password
    schema_version: int
    # tables are there: on SQLite any table; on PostgreSQL tables named like relay's
    # (at schema 0 either means the database is not relay's)
    has_tables: bool = False
    integrity: tuple[str, ...] | None = None  # SQLite's quick_check lines ("ok" alone)
    journal_mode: str | None = None  # SQLite's, as stored in the file
    synchronous: int | None = None  # SQLite's default for a new connection here
    file_bytes: dict[str, int] | None = None  # {"relay.db": n, "WAL": n} on disk now
    rows_by_table: dict[str, int] | None = None
    # PostgreSQL: server_version, synchronous_commit, ssl_in_use, host, sslmode, rtt_ms,
    # clock_offset_ms, url (shown without its password)
    server: dict | None = None
    server_now_ms: float | None = None  # PostgreSQL: the server's clock, no offset
    errors: dict[str, RelayError] = field(default_factory=dict)
