"""Every database failure maps onto the error table (design.md §7, §13): a refused write
is storage_error, a damaged schema database_corrupt, only relay's own misuse
internal_error."""

from __future__ import annotations

import sqlite3


def raw_sql(relay, *statements: str) -> None:
    """Statements run behind relay's back (not relay's own SQL), on the test's database."""
    if relay.url:
        for sql in statements:
            relay.sql(sql)
        return
    db = sqlite3.connect(relay.home / "relay.db")
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()


def test_a_write_the_database_refuses_is_storage_error_and_changes_nothing(relay):
    """A trigger in the database (raw SQL: not relay's) refuses a write, which is rolled
    back. That is storage_error, not internal_error ("a bug in relay")."""
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    if relay.url:
        raw_sql(
            relay,
            "CREATE FUNCTION frozen() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION USING MESSAGE = TG_TABLE_NAME || ' are frozen'; "
            "END $$",
            "CREATE TRIGGER no_requests BEFORE INSERT ON requests FOR EACH ROW "
            "EXECUTE FUNCTION frozen()",
            "CREATE TRIGGER no_ledger BEFORE UPDATE ON ledger FOR EACH ROW "
            "EXECUTE FUNCTION frozen()",
        )
    else:
        raw_sql(
            relay,
            "CREATE TRIGGER no_requests BEFORE INSERT ON requests "
            "BEGIN SELECT RAISE(ABORT, 'requests are frozen'); END",
            "CREATE TRIGGER no_ledger BEFORE UPDATE ON ledger "
            "BEGIN SELECT RAISE(ROLLBACK, 'ledger is frozen'); END",
        )
    before = relay.snapshot()
    r = relay.send(alice, "bob", "x")
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert "refused the write" in r.error["message"] and "requests are frozen" in r.error["message"]
    assert relay.snapshot() == before
    r = relay("once", "--key", "k", "--json", "--", "true")  # the pid commit is an update
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert "nothing ran" in r.error["message"]


def test_a_table_someone_dropped_is_database_corrupt_not_a_bug(relay):
    relay.join("alice")
    raw_sql(relay, "DROP TABLE hook_state")
    r = relay("prune", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err


def test_a_sqlite_error_raised_outside_the_store_is_still_mapped_not_a_bug(relay, monkeypatch):
    """A SQLite error the library lets through is relay's error for it -- busy, not
    internal_error. On SQLite the store's transaction maps it; on PostgreSQL nothing
    below the command line expects one, so its last line of defence (cli/call.py) does."""
    from relay_cli.requests import lifecycle

    relay.join("alice")

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(lifecycle, "list_requests", locked)
    r = relay("list", "--json")
    assert (r.code, r.error["code"]) == (75, "busy"), r.err


def test_every_sqlite_result_code_maps_onto_the_taxonomy():
    from relay_cli.store import relay_error_from_sqlite

    def err(name: str, message: str = "x", cls=sqlite3.OperationalError):
        e = cls(message)
        e.sqlite_errorname = name
        return relay_error_from_sqlite(e).code

    assert err("SQLITE_BUSY") == err("SQLITE_LOCKED_SHAREDCACHE") == "busy"
    for name in ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_FORMAT"):
        assert err(name) == "database_corrupt", name
    for name in (
        "SQLITE_FULL",
        "SQLITE_IOERR_WRITE",
        "SQLITE_READONLY_DBMOVED",
        "SQLITE_CANTOPEN",
        "SQLITE_PERM",
        "SQLITE_CONSTRAINT_TRIGGER",
        "SQLITE_CONSTRAINT_CHECK",
        "SQLITE_ABORT_ROLLBACK",
        "SQLITE_INTERRUPT",
        "SQLITE_TOOBIG",
        "SQLITE_NOMEM",
        "SQLITE_NOLFS",
        "SQLITE_PROTOCOL",
        "SQLITE_AUTH",
    ):
        assert err(name) == "storage_error", name
    assert err("SQLITE_ERROR", "no such table: ledger") == "database_corrupt"
    assert err("SQLITE_ERROR", 'near "SELEC": syntax error') == "internal_error"  # relay's bug
    assert err("SQLITE_MISUSE") == "internal_error"


def test_every_postgresql_error_class_maps_onto_the_taxonomy():
    from relay_cli.store.pg import relay_error

    class Failed(Exception):
        def __init__(self, pgcode: str) -> None:
            super().__init__(f"ERROR {pgcode}")
            self.pgcode = pgcode

    def err(pgcode: str) -> str:
        return relay_error(Failed(pgcode)).code

    assert {err(c) for c in ("40001", "40P01", "55P03", "57014")} == {"busy"}
    assert {err(c) for c in ("08006", "57P01", "57P03", "53300")} == {"database_unavailable"}
    assert {err(c) for c in ("28P01", "42501", "3D000", "23505", "23514", "P0001", "53100")} == {
        "storage_error"
    }
    assert {err(c) for c in ("42P01", "42703")} == {"database_corrupt"}
    assert err("42601") == "internal_error"  # a syntax error: relay's bug
