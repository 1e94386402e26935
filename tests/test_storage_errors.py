"""Every SQLite failure maps onto the error table (design.md §7): a refused write is
storage_error, a damaged schema database_corrupt, only relay's own misuse internal_error."""

from __future__ import annotations

import sqlite3


def test_a_write_the_database_refuses_is_storage_error_and_changes_nothing(relay):
    """A trigger in relay.db (raw SQL: not relay's) refuses a write; SQLite rolls it back.
    That is storage_error, not internal_error ("a bug in relay")."""
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("CREATE TRIGGER no_requests BEFORE INSERT ON requests "
               "BEGIN SELECT RAISE(ABORT, 'requests are frozen'); END")
    db.execute("CREATE TRIGGER no_ledger BEFORE UPDATE ON ledger "
               "BEGIN SELECT RAISE(ROLLBACK, 'ledger is frozen'); END")
    db.commit()
    db.close()
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
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("DROP TABLE hook_state")
    db.commit()
    db.close()
    r = relay("prune", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err


def test_every_sqlite_result_code_maps_onto_the_taxonomy():
    from relay_cli.store import relay_error_from_sqlite

    def err(name: str, message: str = "x", cls=sqlite3.OperationalError):
        e = cls(message)
        e.sqlite_errorname = name
        return relay_error_from_sqlite(e).code

    assert err("SQLITE_BUSY") == err("SQLITE_LOCKED_SHAREDCACHE") == "busy"
    for name in ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_FORMAT"):
        assert err(name) == "database_corrupt", name
    for name in ("SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_READONLY_DBMOVED",
                 "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_CONSTRAINT_TRIGGER",
                 "SQLITE_CONSTRAINT_CHECK", "SQLITE_ABORT_ROLLBACK", "SQLITE_INTERRUPT",
                 "SQLITE_TOOBIG", "SQLITE_NOMEM", "SQLITE_NOLFS", "SQLITE_PROTOCOL",
                 "SQLITE_AUTH"):
        assert err(name) == "storage_error", name
    assert err("SQLITE_ERROR", "no such table: ledger") == "database_corrupt"
    assert err("SQLITE_ERROR", 'near "SELEC": syntax error') == "internal_error"  # relay's bug
    assert err("SQLITE_MISUSE") == "internal_error"
