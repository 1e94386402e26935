"""The PostgreSQL backend (design.md §13): the same statements on a shared server.

relay's SQL is written once (sql_*.py); the few spellings that differ are written once
per backend in dialect.py, and the migrations as PostgreSQL runs them in
pg_migrations.py. This module changes only the placeholders (``placeholders``), and
``PgConnection`` gives the same transaction discipline as ``BEGIN IMMEDIATE``: one writer at a time,
through a transaction-scoped advisory lock that every write transaction takes first (so
every read-modify-write is exactly as serial as on SQLite, across machines), and read
snapshots that take no lock. ``PRAGMA data_version`` becomes ``LISTEN``/``NOTIFY``:
every write transaction notifies at commit, and a waiting command sleeps on the
connection's socket until a notification arrives (or a slow safety poll, every 2 s).

The driver (psycopg2) is imported by pg_load.py (and used here and in pg_driver.py)
only, and only when a PostgreSQL URL is used.
"""

from __future__ import annotations

import re
import select
import time
from collections.abc import Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..core.errors import RelayError
from ..core.limits import (
    PG_CONNECT_TIMEOUT_S,
    PG_IDLE_TX_TIMEOUT_MS,
    PG_LOCK_TIMEOUT_MS,
    PG_RETRY_AFTER_S,
    PG_STATEMENT_TIMEOUT_MS,
)
from .migrations import LATEST, check_version
from .pg_load import load
from .pg_migrations import PG_MIGRATIONS
from .tables import TABLES
from .url import origin, refusal, shown

if TYPE_CHECKING:
    import psycopg2.extensions

    from . import api
    from .api import Params
    from .pg_driver import RelayConnection, RelayCursor, Row

CHANNEL = "relay_changes"
# pg_advisory_xact_lock keys: every write transaction takes WRITE_LOCK (relay's
# BEGIN IMMEDIATE); migrations take MIGRATE_LOCK. 0x72656c6179 is "relay" in ASCII.
WRITE_LOCK = 0x72656C6179
MIGRATE_LOCK = WRITE_LOCK + 1
CONNECT_TIMEOUT_S = PG_CONNECT_TIMEOUT_S
LOCK_TIMEOUT_MS = PG_LOCK_TIMEOUT_MS  # like SQLite's busy_timeout: then `busy`
STATEMENT_TIMEOUT_MS = PG_STATEMENT_TIMEOUT_MS
# relay's own deadline for the answer to any statement (the server's statement_timeout
# cannot fire on a server that stopped): then the connection is closed and the call is
# database_unavailable. Longer than LOCK_TIMEOUT_MS, so a lock wait is answered `busy`
# by the server first; migrations and `db copy`'s rows get STATEMENT_TIMEOUT_MS + 5 s.
DEADLINE_S = 15.0
LONG_DEADLINE_S = STATEMENT_TIMEOUT_MS / 1000 + 5
IDLE_TX_TIMEOUT_MS = PG_IDLE_TX_TIMEOUT_MS
SAFETY_POLL_S = 2.0  # a waiting command re-checks at least this often without a NOTIFY
RETRIES = 4  # serialization failures and deadlocks at a transaction's first statement
RETRY_AFTER_S = PG_RETRY_AFTER_S  # retry_after_seconds of database_unavailable
CLOCK_REFRESH_S = 60.0
SCHEMA_TABLE = "relay_schema"
# The tables migrations create (tables.py); a database holding one of them without
# SCHEMA_TABLE is not relay's, and relay refuses it rather than guess.
RELAY_TABLES = tuple(TABLES)

BEGIN_WRITE = f"BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK}); "
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "

_UNAVAILABLE = {
    "08000",
    "08001",
    "08003",
    "08004",
    "08006",
    "08P01",
    "57P01",
    "57P02",
    "57P03",
    "53300",
}
_BUSY = {"40001", "40P01", "55P03", "57014", "55006"}
_RETRY = {"40001", "40P01"}
# undefined table, column, index, function: relay's schema was changed by hand
_SCHEMA_MISMATCH = {"42P01", "42703", "42704", "42883"}
# Connection failures carry no SQLSTATE: these words in libpq's message mean the server
# was reached and refused us (a setting to fix), not that it could not be reached.
_REFUSED_WORDS = (
    "authentication failed",
    "no password supplied",
    "password",
    "pg_hba.conf",
    "does not exist",
    "permission denied",
    "certificate",
    "ssl was required",
    "sslmode",
    "invalid",
    "not supported",
    "unsupported",
    "role ",
)

# What libpq says when the connection itself broke (psycopg2 gives these no SQLSTATE,
# and sometimes raises plain DatabaseError): the server is gone, not relay's bug.
_BROKEN_WORDS = (
    "server closed the connection",
    "terminating connection",
    "connection already closed",
    "no connection to the server",
    "could not receive data",
    "could not send data",
    "connection has been closed",
    "lost synchronization",
    "eof detected",
    "connection timed out",
    "connection reset",
    "broken pipe",
)

# psycopg2, once loaded (``driver``): a module handed around as a value, which mypy
# types as Any (what relay uses of it is typed in pg_driver.py)
_driver_mod: Any = None


class _Stalled(Exception):
    """No answer before the statement's deadline (see DEADLINE_S)."""


def _wait(conn: psycopg2.extensions.connection) -> None:
    """psycopg2's wait callback (set in ``driver``): libpq runs non-blocking and this is
    where relay waits for the socket, so every statement, and connecting, has a
    deadline that holds even when the server process is stopped and TCP stays alive.
    A Ctrl-C (KeyboardInterrupt) waits for the statement's answer, as it did while libpq
    blocked; ``PgConnection._run`` raises it afterwards. What the wait needs is the
    connection's own (``RelayConnection``): nothing of it is kept in the module."""
    from .pg_driver import RelayConnection  # (loaded with the driver)

    ext = _driver_mod.extensions
    ours = conn if isinstance(conn, RelayConnection) else None
    deadline = None  # a connection that is not relay's (a test's own) has none
    if ours is not None:  # relay's: its statement's deadline, or connecting's
        deadline = (
            ours.relay_connecting_until if ours.relay_deadline is None else ours.relay_deadline
        )
    fd = conn.fileno()
    while True:
        state = conn.poll()
        if state == ext.POLL_OK:
            return
        left = None  # no deadline: waits as it would without relay
        if deadline:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Stalled()
        try:
            if state == ext.POLL_READ:
                select.select((fd,), (), (), left)
            elif state == ext.POLL_WRITE:
                select.select((), (fd,), (), left)
            else:  # pragma: no cover - psycopg2 documents no other state
                raise _driver_mod.OperationalError(f"unexpected poll state {state}")
        except KeyboardInterrupt:
            if ours is None:  # not relay's connection: as it would be without relay
                raise
            ours.relay_interrupted = True


def driver() -> Any:
    """psycopg2, imported on first use (``pg_load.load``: storage_error with the install
    line without it), with relay's wait callback set (``_wait``)."""
    global _driver_mod
    if _driver_mod is not None:
        return _driver_mod
    psycopg2 = load()
    psycopg2.extensions.set_wait_callback(_wait)
    _driver_mod = psycopg2
    return psycopg2


# ---------------------------------------------------------------------- placeholders
_MARK = re.compile(r"'(?:[^']|'')*'|\?|(?<!:):[A-Za-z_]\w*|%")


@lru_cache(maxsize=512)
def placeholders(sql: str) -> str:
    """One of relay's statements with psycopg2's placeholders: ``?`` as ``%s``,
    ``:name`` as ``%(name)s``, a literal ``%`` doubled. Nothing else is rewritten: the
    spellings that differ are the dialect's (dialect.py), the DDL is pg_migrations.py."""

    def mark(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok.startswith("'"):
            return tok.replace("%", "%%")
        if tok == "?":
            return "%s"
        if tok == "%":
            return "%%"
        return f"%({tok[1:]})s"

    return _MARK.sub(mark, sql)


def _params(params: Params | None) -> Params:
    """Python bools as 0/1: relay's flag columns are integers, as on SQLite."""
    if isinstance(params, dict):
        return {k: int(v) if isinstance(v, bool) else v for k, v in params.items()}
    return tuple(int(v) if isinstance(v, bool) else v for v in (params or ()))


def _is_write(sql: str) -> bool:
    return sql.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE")


# ---------------------------------------------------------------------- errors
def relay_error(e: Exception) -> RelayError:
    """A driver error as one of relay's codes, with the driver's message. It never holds a
    piece of a password (design.md §13): relay connects only with a URL that libpq reads
    as what it means (``url.refusal``), so every value of it libpq or the server can
    quote (a host, port, user, database, option or file name) is one relay prints
    itself, and neither ever quotes a password."""
    pgcode = getattr(e, "pgcode", None) or ""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    text = "; ".join(lines) or type(e).__name__
    drv = _driver_mod
    if pgcode in _RETRY:
        return RelayError("busy", f"the database kept reporting conflicts ({text})")
    if pgcode in _BUSY:
        return RelayError("busy", f"the database stayed locked by another relay process ({text})")
    if pgcode in _UNAVAILABLE or pgcode.startswith("08"):
        return _unavailable(text)
    if (
        pgcode.startswith("28")
        or pgcode in ("42501", "3D000", "25006")
        or pgcode.startswith(("53", "58"))
    ):
        return RelayError("storage_error", f"the PostgreSQL server refused: {text}")
    if pgcode.startswith(("23", "P0")):
        # a constraint or a trigger that is not relay's (relay's own conflicts are
        # answered by ON CONFLICT): the transaction was rolled back
        return RelayError(
            "storage_error",
            f"the database refused the write and rolled it back ({text}); nothing was changed",
        )
    if pgcode in _SCHEMA_MISMATCH:
        return RelayError(
            "database_corrupt", f"the PostgreSQL database is not a readable relay database ({text})"
        )
    low = text.lower()
    if not pgcode and any(w in low for w in _BROKEN_WORDS):
        return _unavailable(text)
    if not pgcode and drv is not None and isinstance(e, (drv.OperationalError, drv.InterfaceError)):
        if (
            any(w in low for w in _REFUSED_WORDS)
            and "connection refused" not in low
            and "no such file" not in low
        ):
            return RelayError("storage_error", f"the PostgreSQL server refused: {text}")
        return _unavailable(text)
    return RelayError("internal_error", f"unexpected PostgreSQL error: {text}")


def _unavailable(text: str) -> RelayError:
    return RelayError(
        "database_unavailable",
        f"the PostgreSQL server could not be reached ({text})",
        detail="nothing was changed",
        retry_after=RETRY_AFTER_S,
    )


def _stalled(seconds: float = DEADLINE_S) -> RelayError:
    return _unavailable(f"no answer within {seconds:g} s; relay closed the connection")


def outcome_unknown(e: RelayError) -> RelayError:
    """The connection broke at or after COMMIT was sent: the transaction may or may not
    have committed. Same code and exit as any database_unavailable, with
    ``outcome_unknown`` set for callers that must look before they redo (design.md §13)."""
    why = e.message.split(" (", 1)[1].rstrip(")") if " (" in e.message else e.message
    err = RelayError(
        "database_unavailable",
        f"the connection to the PostgreSQL server broke after COMMIT was sent, so relay "
        f"cannot know whether the change was made: the outcome is unknown ({why})",
        detail="the outcome is unknown; a retry with the same id or key is answered from "
        "what is stored, so it does not make the change twice; without an id or key, "
        "look (relay list, relay ledger show) before you retry",
        retry_after=RETRY_AFTER_S,
    )
    err.outcome_unknown = True
    return err


# ---------------------------------------------------------------------- connection
# libpq's environment variables and the connection parameter each gives (libpq's
# "Environment Variables"), handed to libpq from the call's environment on every call:
# in a real shell's call they are the process's, which libpq would read the same way
# (after the URL and a service file, as here); in a test's context they are the
# context's. PGCONNECT_TIMEOUT and PGOPTIONS are read with relay's own settings, and
# PGAPPNAME gives way to relay's application_name as it always did.
LIBPQ_VARIABLES = {
    "PGHOST": "host",
    "PGHOSTADDR": "hostaddr",
    "PGPORT": "port",
    "PGDATABASE": "dbname",
    "PGUSER": "user",
    "PGPASSWORD": "password",
    "PGPASSFILE": "passfile",
    "PGSSLMODE": "sslmode",
    "PGSSLCERT": "sslcert",
    "PGSSLKEY": "sslkey",
    "PGSSLROOTCERT": "sslrootcert",
    "PGSSLCRL": "sslcrl",
    "PGREQUIREPEER": "requirepeer",
    "PGKRBSRVNAME": "krbsrvname",
    "PGCLIENTENCODING": "client_encoding",
    "PGTARGETSESSIONATTRS": "target_session_attrs",
}


class PgConnection:
    """A PostgreSQL connection with relay's transaction discipline (see the module doc)."""

    immutable = False
    read_only = False  # (a read-only state directory is SQLite's concern)
    path = None
    poll_interval = 0.25  # a waiter's longest sleep: the socket wakes it on a NOTIFY

    def __init__(self, url: str, environ: Mapping[str, str], where: str | None = None) -> None:
        """A connection to ``url`` in the call's ``environ``: libpq's variables in it
        (``LIBPQ_VARIABLES``) give what the URL does not, as libpq would read them from a
        process run in that environment; PGCONNECT_TIMEOUT and PGOPTIONS are combined
        with relay's own settings. ``where``: where the URL came from, as relay names it
        when it prints no URL (default: ``url.origin``'s $RELAY_DATABASE_URL or
        --database-url). A URL that libpq cannot read, or reads as what it cannot mean,
        is ``usage_error`` before anything connects (``url.refusal``)."""
        drv = driver()
        self.url = url
        where = where or origin(url, environ)
        refused = refusal(url, where)
        if refused is not None:
            raise refused
        self.shown = shown(url, where)
        params = drv.extensions.parse_dsn(url)  # (``refusal`` read it: libpq can)
        self.params = params
        params = dict(params)
        if "service" not in params and not environ.get("PGSERVICE"):
            # (a service file's settings come before the variables: libpq applies those)
            for var, keyword in LIBPQ_VARIABLES.items():
                if keyword not in params and environ.get(var) is not None:
                    params[keyword] = environ[var]
        timeout = params.get("connect_timeout") or environ.get("PGCONNECT_TIMEOUT")
        try:
            timeout = min(int(timeout), CONNECT_TIMEOUT_S) if timeout else CONNECT_TIMEOUT_S
        except ValueError:
            timeout = CONNECT_TIMEOUT_S
        params["connect_timeout"] = str(max(timeout, 2))
        opts = params.get("options") or environ.get("PGOPTIONS") or ""
        params["options"] = (
            opts + f" -c lock_timeout={LOCK_TIMEOUT_MS}"
            f" -c statement_timeout={STATEMENT_TIMEOUT_MS}"
            f" -c idle_in_transaction_session_timeout={IDLE_TX_TIMEOUT_MS}"
        ).strip()
        params.setdefault("application_name", "relay")
        # A server that vanishes from the network is noticed within seconds, not at TCP's
        # retransmission limit (libpq ignores these for unix sockets).
        params.setdefault("keepalives", "1")
        params.setdefault("keepalives_idle", "5")
        params.setdefault("keepalives_interval", "2")
        params.setdefault("keepalives_count", "2")
        if drv.extensions.libpq_version() >= 120000:
            params.setdefault("tcp_user_timeout", str(CONNECT_TIMEOUT_S * 1000))
        self._connect_params = params
        self.conn = self._connect()
        from .pg_driver import RelayCursor  # (loaded by driver() above)

        self._rows = RelayCursor
        self.in_tx = False
        self._pending: str | None = None
        self._later: list[str] = []  # deferred writes of the open transaction (later)
        self._dirty = False
        self._listening = False
        self._version = 0
        self._safety_at = 0.0
        self.offset_ms = 0.0
        self.clock_at = 0.0
        self.rtt_ms = 0.0
        self.server_version = 0
        self.schema_version = 0

    def _connect(self) -> RelayConnection:
        import functools

        from .pg_driver import RelayConnection  # (loaded by driver(), in __init__)

        until = time.monotonic() + int(self._connect_params["connect_timeout"])
        factory = functools.partial(RelayConnection, connecting_until=until)
        try:
            conn: RelayConnection = _driver_mod.connect(
                **self._connect_params, connection_factory=factory
            )
        except _Stalled:
            raise _unavailable(
                f"no connection within {self._connect_params['connect_timeout']} s"
            ) from None
        except _driver_mod.Error as e:
            raise relay_error(e) from None
        conn.autocommit = True
        return conn

    def _reconnect_if_broken(self) -> None:
        """A long-running call (wait, once, run, watch) outlives a server restart: between
        transactions a broken connection is replaced (or database_unavailable)."""
        if not self.conn.closed:
            return
        self.conn = self._connect()
        if self._listening:
            self._listening = False
            self._version += 1  # whatever was notified meanwhile: look again

    # -------------------------------------------------------------- statements
    def error(self, e: Exception) -> RelayError:
        return relay_error(e)

    def _run(
        self,
        cur: psycopg2.extensions.cursor,
        sql: str | bytes,
        params: Params | None,
        seconds: float = DEADLINE_S,
    ) -> None:
        """Run one statement with its deadline; a stalled server is database_unavailable,
        the connection closed (its transaction, if any, is the server's to roll back)."""
        conn = self.conn
        conn.relay_deadline = time.monotonic() + seconds
        try:
            cur.execute(sql, params)
            if conn.relay_interrupted:
                conn.relay_interrupted = False
                raise KeyboardInterrupt
        except _Stalled:
            self._drop()
            if conn.relay_interrupted:  # a Ctrl-C while it waited: the person asked to stop
                raise KeyboardInterrupt from None
            raise _stalled(seconds) from None
        except _driver_mod.Error:
            if conn.relay_interrupted:  # (the flag is this connection's: not lost with it)
                self._drop()
                raise KeyboardInterrupt from None
            if conn.closed:
                self._drop()
            raise
        except BaseException:
            # interrupted while waiting (a signal): the statement may still be running
            self._drop()
            raise
        finally:
            conn.relay_deadline = None

    def _drop(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    def broken(self) -> bool:
        return bool(self.conn.closed)

    def _raw(
        self, sql: str, params: Params | None = None, seconds: float = DEADLINE_S
    ) -> RelayCursor:
        try:
            cur = self.conn.cursor(cursor_factory=self._rows)
            self._run(cur, sql, params, seconds)
        except _driver_mod.Error as e:
            raise self.error(e) from None
        return cur

    def later(self, sql: str, params: Params = ()) -> None:
        """A write whose answer nobody reads (an event row, a peer's last_seen_at, a lease
        renewal): inside an open write transaction it travels with the transaction's next
        statement (or its COMMIT), one round trip fewer. Its error, if any, is then that
        statement's, in the same transaction, which is rolled back."""
        if not (self.in_tx and self._pending is None):
            self.execute(sql, params)
            return
        cur = self.conn.cursor()
        self._later.append(cur.mogrify(placeholders(sql), _params(params)).decode())
        self._dirty = True

    def execute(self, sql: str, params: Params = ()) -> RelayCursor:
        q = placeholders(sql)
        p = _params(params)
        write = _is_write(q)
        if not self.in_tx:
            self._reconnect_if_broken()
        # A statement that may run again on a new connection when the old one turns out
        # to be broken (the server restarted while it was idle): the first of a
        # transaction (nothing of it can have committed) or a read on its own.
        fresh = bool(self._pending) or not (self.in_tx or write)
        later = self._take_later().replace("%", "%%")
        for attempt in range(RETRIES):
            prefix = self._pending or ""
            try:
                cur = self.conn.cursor(cursor_factory=self._rows)
                self._run(cur, prefix + later + q, p)
            except _driver_mod.Error as e:
                code = getattr(e, "pgcode", None)
                if prefix and code in _RETRY and attempt < RETRIES - 1:
                    # Nothing of this transaction ran yet: start it again.
                    self._quiet("ROLLBACK")
                    import random  # (only here: most calls never need it)

                    time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                    continue
                err = self.error(e)
                if fresh and self.broken() and err.code == "database_unavailable":
                    fresh = False
                    self._reconnect_if_broken()  # (or database_unavailable)
                    continue
                self._pending = None
                if write and not self.in_tx and err.code == "database_unavailable":
                    raise outcome_unknown(err) from None  # it commits by itself
                raise err from None
            except RelayError as err:
                self._pending = None
                if write and not self.in_tx:
                    raise outcome_unknown(err) from None
                raise
            self._pending = None
            if write:
                if self.in_tx:
                    self._dirty = True
                else:
                    self._quiet(f"NOTIFY {CHANNEL}")
            return cur
        raise AssertionError("unreachable")

    def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        for params in seq:
            self.execute(sql, params)

    def _take_later(self) -> str:
        """The deferred writes (``later``), to be sent before the next statement."""
        if not self._later:
            return ""
        text = "; ".join(self._later) + "; "
        self._later.clear()
        return text

    def insert_many(self, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        """Many rows at once (``relay db copy``), inside the open transaction."""
        if self._pending is not None or self._later:
            self.execute("SELECT 1")
        names = ", ".join(f'"{c}"' for c in columns)
        try:
            cur = self.conn.cursor()
            sql = (
                cur.mogrify(
                    f'INSERT INTO "{table}" ({names}) VALUES ' + ", ".join(["%s"] * len(rows)),
                    [_params(r) for r in rows],
                )
                if rows
                else None
            )
            if sql:
                self._run(cur, sql, None, LONG_DEADLINE_S)
        except _driver_mod.Error as e:
            raise self.error(e) from None
        self._dirty = True

    def reset_sequences(self, table: str) -> None:
        """Let the table's serial columns continue after the rows written explicitly."""
        for row in self.all(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = ? AND column_default LIKE 'nextval(%'",
            (table,),
        ):
            col = row[0]
            self.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), "
                f'coalesce(max("{col}"), 0) + 1, false) FROM "{table}"',
                (table, col),
            )

    def one(self, sql: str, params: Params = ()) -> Row | None:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Params = ()) -> list[api.Row]:
        return self.execute(sql, params).rows()

    def scalar(self, sql: str, params: Params = ()) -> Any:
        row = self.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _quiet(self, sql: str) -> None:
        try:
            with self.conn.cursor() as cur:
                self._run(cur, sql, None)
        except (_driver_mod.Error, RelayError):
            pass

    # -------------------------------------------------------------- transactions
    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[PgConnection]:
        """One writer at a time (the advisory lock, like ``BEGIN IMMEDIATE``) or a
        repeatable-read snapshot; all or nothing. BEGIN travels with the first statement."""
        if self.in_tx:
            raise RuntimeError("nested transaction")
        self._reconnect_if_broken()
        if time.monotonic() - self.clock_at > CLOCK_REFRESH_S:
            try:
                self.measure_clock()
            except RelayError as e:
                if not (self.broken() and e.code == "database_unavailable"):
                    raise
                self._reconnect_if_broken()  # it broke while idle: once more, anew
                self.measure_clock()
        self._pending = BEGIN_WRITE if write else BEGIN_READ
        self._dirty = False
        self.in_tx = True
        try:
            yield self
        except BaseException:
            self._rollback()
            raise
        try:
            if self._pending is None:  # a statement ran, so the transaction is open
                self._raw(
                    self._take_later() + (f"NOTIFY {CHANNEL}; COMMIT" if self._dirty else "COMMIT")
                )
        except RelayError as e:
            self._rollback()
            if e.code == "database_unavailable":  # COMMIT was sent: it may have landed
                raise outcome_unknown(e) from None
            raise
        finally:
            self._pending = None
            self.in_tx = False

    def _rollback(self) -> None:
        self._later.clear()
        opened = self._pending is None
        self._pending = None
        self.in_tx = False
        if opened and not self.conn.closed:
            self._quiet("ROLLBACK")

    # -------------------------------------------------------------- clock
    def measure_clock(self) -> None:
        """How far the server's clock is from ours (relay's clock is the server's)."""
        t0 = time.time()
        (row,) = self._raw("SELECT extract(epoch FROM clock_timestamp()) * 1000").rows()
        t1 = time.time()
        self._set_clock(float(row[0]), t0, t1)

    def _set_clock(self, server_ms: float, t0: float, t1: float) -> None:
        self.rtt_ms = (t1 - t0) * 1000
        self.offset_ms = server_ms - (t0 + t1) / 2 * 1000
        self.clock_at = time.monotonic()

    def server_now_ms(self) -> float:
        return time.time() * 1000 + self.offset_ms

    # -------------------------------------------------------------- waking
    def data_version(self) -> int:
        """Changes whenever another connection committed a write (a NOTIFY arrived), and
        at least every SAFETY_POLL_S, so a waiter re-checks even if a NOTIFY was lost."""
        now = time.monotonic()
        if not self._listening:
            self._reconnect_if_broken()
            self._raw(f"LISTEN {CHANNEL}")
            self._listening = True
            self._safety_at = now + SAFETY_POLL_S
        else:
            try:
                self.conn.poll()
            except _driver_mod.Error:
                # the server went away: the next check reconnects (or reports it)
                self._version += 1
                return self._version
        if self.conn.notifies:
            self._version += len(self.conn.notifies)
            del self.conn.notifies[:]
        if now >= self._safety_at:
            self._version += 1
            self._safety_at = now + SAFETY_POLL_S
        return self._version

    def write_mark(self) -> int:
        """The server's next transaction id: it moves whenever a transaction that wrote
        anything on the server ended (a read-only one takes no id), and not when time
        passes, unlike ``data_version``'s safety poll. One statement outside any
        transaction; a write of another database on the server moves it too."""
        self._reconnect_if_broken()
        sql = (
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text"
            if self.server_version >= 130000
            else "SELECT txid_snapshot_xmax(txid_current_snapshot())::text"
        )
        (row,) = self._raw(sql).rows()
        return int(row[0])

    def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``, waking as soon as a notification arrives."""
        if seconds <= 0:
            return
        if not self._listening or self.conn.closed:
            time.sleep(seconds)
            return
        if self.conn.notifies:
            return
        try:
            select.select([self.conn], [], [], seconds)
        except (OSError, ValueError):
            time.sleep(seconds)

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass


# ---------------------------------------------------------------------- opening
def connect(
    url: str, migrate: bool = True, *, environ: Mapping[str, str], where: str | None = None
) -> PgConnection:
    """Connect (in the call's ``environ``), learn the server's clock and the schema
    version; migrate when behind (``migrate=False``, for doctor: create nothing, report
    what is there). ``where``: as ``PgConnection``'s."""
    db = PgConnection(url, environ, where)
    try:
        db.server_version = db.conn.server_version
        t0 = time.time()
        cur = db.conn.cursor()
        try:
            db._run(
                cur,
                f"SELECT extract(epoch FROM clock_timestamp()) * 1000, "
                f"(SELECT version FROM {SCHEMA_TABLE})",
                None,
            )
            ((server_ms, version),) = cur.fetchall()  # (one row)
        except _driver_mod.Error as e:
            if getattr(e, "pgcode", None) != "42P01":  # no relay_schema table yet
                raise db.error(e) from None
            version = None
            t0 = time.time()
            (row,) = db._raw("SELECT extract(epoch FROM clock_timestamp()) * 1000").rows()
            server_ms = row[0]
        db._set_clock(float(server_ms), t0, time.time())
        version = version or 0
        if migrate:  # (doctor reports it instead)
            check_version(version, WHERE, lambda: None)
        db.schema_version = version
        if version < LATEST and migrate:
            apply_migrations(db)
            db.schema_version = LATEST
        return db
    except BaseException:
        db.close()
        raise


WHERE = "the PostgreSQL database"


def schema_version(db: PgConnection) -> int | None:
    """The schema version recorded in the database, or None when relay never wrote it."""
    if db.scalar(f"SELECT to_regclass('{SCHEMA_TABLE}') IS NOT NULL") is not True:
        return None
    version: int | None = db.scalar(f"SELECT version FROM {SCHEMA_TABLE}")
    return version


def table_names(db: PgConnection) -> list[str]:
    """relay's tables in this database (every table of its schema but SCHEMA_TABLE)."""
    return [
        r[0]
        for r in db.all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' AND table_name <> ? "
            "ORDER BY table_name",
            (SCHEMA_TABLE,),
        )
    ]


def foreign_tables(db: PgConnection) -> list[str]:
    return [
        r[0]
        for r in db.all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_name = ANY(?) ORDER BY table_name",
            (list(RELAY_TABLES),),
        )
    ]


def _not_relays(db: PgConnection) -> str | None:
    """A database without relay's schema table that holds tables named like relay's."""
    found = foreign_tables(db)
    if not found:
        return None
    return (
        f"the PostgreSQL database {db.shown} holds tables named like relay's "
        f"({', '.join(found)}) but no relay schema; give relay a database of its own"
    )


def apply_migrations(db: PgConnection) -> None:
    """Apply the missing migrations in one transaction under an advisory lock, so the
    first calls from several machines at once migrate exactly once."""
    db._raw("BEGIN")
    try:
        db._raw(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
        version = schema_version(db)
        check_version(version or 0, WHERE, lambda: None if version is not None else _not_relays(db))
        if version is None:
            db._raw(f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER NOT NULL)")
            db._raw(f"INSERT INTO {SCHEMA_TABLE} VALUES (0)")
            version = 0
        for number in range(version, LATEST):
            db._raw(PG_MIGRATIONS[number], seconds=LONG_DEADLINE_S)
        db._raw(f"UPDATE {SCHEMA_TABLE} SET version = {LATEST}")
        db._raw("COMMIT")
    except BaseException:
        db._quiet("ROLLBACK")
        raise
