"""A PostgreSQL server that stops answering, crashes, or drops the connection at COMMIT
(design.md §13): every such failure is database_unavailable (75) within relay's deadline,
never internal_error, and a failure at or after COMMIT says the outcome is unknown."""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import Relay, new_id

from relay_cli.store import pg as pgmod
from testsupport import pgserver

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def pg(relay):
    assert relay.backend == "postgres"
    return relay


class _Stopper:
    """Wraps PgConnection so that the backend of relay's connection is stopped (SIGSTOP)
    or terminated at a chosen point; every stopped backend is continued at the end."""

    def __init__(self, monkeypatch) -> None:
        self.stopped: list[int] = []
        self.mp = monkeypatch

    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        self.stopped.append(pid)

    def resume(self) -> None:
        while self.stopped:
            try:
                os.kill(self.stopped.pop(), signal.SIGCONT)
            except ProcessLookupError:
                pass

    def at_commit(self, action, deadline_s: float | None = None) -> None:
        """Call ``action(backend pid)`` just before relay sends a transaction's COMMIT;
        with ``deadline_s``, relay's deadline for that COMMIT's answer is that instead of
        DEADLINE_S (the full deadline is waited out once, by the stopped-server test)."""
        raw = pgmod.PgConnection._raw

        def wrapped(db, sql, params=None, seconds=pgmod.DEADLINE_S):
            if sql.endswith("COMMIT") and db.in_tx:
                action(db.conn.get_backend_pid())
                seconds = deadline_s or seconds
            return raw(db, sql, params, seconds)

        self.mp.setattr(pgmod.PgConnection, "_raw", wrapped)


@pytest.fixture
def stopper(monkeypatch):
    s = _Stopper(monkeypatch)
    try:
        yield s
    finally:
        s.resume()


def test_a_stopped_server_is_database_unavailable_within_the_deadline(pg, stopper, monkeypatch):
    alice = pg.join("alice")
    pg.join("bob")
    before = pg.snapshot()
    connect = pgmod.PgConnection._connect

    def stopped_after_connecting(db):
        conn = connect(db)
        stopper.stop(conn.get_backend_pid())  # TCP (here the socket) stays open
        return conn

    monkeypatch.setattr(pgmod.PgConnection, "_connect", stopped_after_connecting)
    started = time.monotonic()
    r = pg.send(alice, "bob", "x")
    took = time.monotonic() - started
    monkeypatch.undo()
    stopper.resume()
    assert (r.code, r.error["code"], r.error["retryable"]) == (75, "database_unavailable", True)
    assert "no answer within" in r.error["message"] and "nothing was changed" in r.error["hint"]
    assert took < pgmod.DEADLINE_S + 5
    assert pg.snapshot() == before


def test_a_commit_that_stalls_is_an_unknown_outcome_and_the_retry_is_answered_from_the_store(
    pg, stopper
):
    alice = pg.join("alice")
    pg.join("bob")
    rid = new_id()
    stopper.at_commit(stopper.stop, deadline_s=2.0)
    r = pg.send(alice, "bob", "x", request_id=rid)
    stopper.mp.undo()
    assert (r.code, r.error["code"]) == (75, "database_unavailable")
    assert "no answer within 2 s" in r.error["message"]
    assert "outcome is unknown" in r.error["message"]
    assert "nothing was changed" not in r.error["hint"]
    assert "same id or key is answered from what is stored" in r.error["hint"]
    stopper.resume()  # the backend reads the COMMIT it was sent and commits it
    deadline = time.monotonic() + 10
    while (
        not pg.sql("SELECT id FROM requests WHERE id = ?", (rid,)) and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    again = pg.send(alice, "bob", "x", request_id=rid)
    assert again.code == 0 and again.json["duplicate"] is True
    assert len(pg.sql("SELECT id FROM requests WHERE id = ?", (rid,))) == 1


def test_a_connection_dropped_at_commit_says_the_outcome_is_unknown(pg, stopper):
    alice = pg.join("alice")
    pg.join("bob")
    rid = new_id()

    def terminate(pid):
        pg.sql("SELECT pg_terminate_backend(?)", (pid,))
        time.sleep(0.2)  # the backend is gone before COMMIT reaches it

    stopper.at_commit(terminate)
    r = pg.send(alice, "bob", "x", request_id=rid)
    stopper.mp.undo()
    assert (r.code, r.error["code"], r.error["exit_code"]) == (75, "database_unavailable", 75)
    assert "outcome is unknown" in r.error["message"]
    assert "nothing was changed" not in r.error["message"] + r.error["hint"]
    again = pg.send(alice, "bob", "x", request_id=rid)  # answered from what is stored
    assert again.code == 0
    assert len(pg.sql("SELECT id FROM requests WHERE id = ?", (rid,))) == 1


def test_the_library_is_told_the_outcome_is_unknown(pg, stopper):
    pg.join("bob")
    store = pg.open_store()
    try:
        stopper.at_commit(lambda pid: pg.sql("SELECT pg_terminate_backend(?)", (pid,)))
        with pytest.raises(pgmod.RelayError) as caught:
            with store.db.transaction():
                store.db.execute("UPDATE peers SET kind = kind WHERE name = 'bob'")
        assert caught.value.code == "database_unavailable" and caught.value.outcome_unknown
        stopper.mp.undo()
        # a failure before COMMIT is not unknown: nothing was changed
        with pytest.raises(pgmod.RelayError) as caught:
            with store.db.transaction():
                store.db.execute("UPDATE peers SET kind = kind WHERE name = 'bob'")
                pg.sql("SELECT pg_terminate_backend(?)", (store.db.conn.get_backend_pid(),))
                time.sleep(0.2)
                store.db.execute("UPDATE peers SET kind = kind WHERE name = 'bob'")
        assert caught.value.code == "database_unavailable"
        assert not caught.value.outcome_unknown
        assert "nothing was changed" in caught.value.hint
    finally:
        store.close()


# ------------------------------------------------------------------ a server crash
@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own (a crash restarts every backend of a server)."""
    if pgserver.bindir() is None or not pgserver.driver_available():
        pytest.skip("PostgreSQL is not installed")
    server = pgserver.start()
    server.execute("CREATE DATABASE relay")
    try:
        yield server
    finally:
        server.remove()


def _crash_backend(server, pid: int) -> None:
    """SIGKILL one backend: the server treats it as a crash, ends every connection and
    restarts (crash recovery)."""
    os.kill(pid, signal.SIGKILL)
    server._admin = None
    time.sleep(0.5)
    server.wait_ready(30)


def test_an_idle_connection_after_a_server_crash_connects_again(own_server, tmp_path):
    relay = Relay(tmp_path / "h", own_server.url("relay"))  # over the unix socket
    relay.join("bob")
    store = relay.open_store()
    try:
        with store.db.transaction():
            store.db.execute("UPDATE peers SET kind = kind WHERE name = 'bob'")
        _crash_backend(own_server, store.db.conn.get_backend_pid())
        # the next transaction's first statement finds the connection closed: it runs
        # again on a new connection (nothing of it can have committed)
        with store.db.transaction():
            assert store.db.scalar("SELECT count(*) FROM peers WHERE name = 'bob'") == 1
        with store.db.transaction(write=False):
            assert store.db.scalar("SELECT 1") == 1
    finally:
        store.close()


def test_a_closed_connection_is_database_unavailable_never_internal_error(own_server, tmp_path):
    relay = Relay(tmp_path / "h", own_server.url("relay"))
    relay.join("bob")
    store = relay.open_store()
    try:
        store.db.scalar("SELECT 1")
        _crash_backend(own_server, store.db.conn.get_backend_pid())
        own_server.stop()
        with pytest.raises(pgmod.RelayError) as caught:
            with store.db.transaction():
                store.db.execute("UPDATE peers SET kind = kind WHERE name = 'bob'")
        assert caught.value.code == "database_unavailable"
    finally:
        store.close()
        own_server.start()
        own_server.wait_ready(30)


def test_server_closed_the_connection_is_database_unavailable_whatever_the_driver_class():
    """psycopg2 raises plain DatabaseError, with no SQLSTATE, for a connection the server
    closed (seen on an idle unix-socket connection after a crash)."""
    import psycopg2

    pgmod.driver()
    for cls in (psycopg2.DatabaseError, psycopg2.OperationalError, psycopg2.InterfaceError):
        for text in (
            "server closed the connection unexpectedly\n\tThis probably means the "
            "server terminated abnormally",
            "connection already closed",
            "terminating connection due to administrator command",
        ):
            assert pgmod.relay_error(cls(text)).code == "database_unavailable"


def test_connecting_gives_up_by_the_calls_own_pgconnect_timeout(own_server, tmp_path):
    """A server that accepts nothing (its postmaster stopped): connecting gives up by the
    PGCONNECT_TIMEOUT of the call's environment (its context: design.md §8, §13), not the
    process's, and the deadline is the connection's own."""
    relay = Relay(tmp_path / "h", own_server.url("relay"))
    relay.join("bob")  # the database is made
    pid = int((own_server.data / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        r = relay("list", "--json", env={"PGCONNECT_TIMEOUT": "2"})
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert (r.code, r.error["code"]) == (75, "database_unavailable"), r.err
    assert "no connection within 2 s" in r.error["message"]
    assert took < pgmod.CONNECT_TIMEOUT_S  # 5 s unless the call says otherwise


@pytest.mark.parametrize("failure", ["broken", "stalled"])
def test_a_ctrl_c_during_a_statement_that_then_fails_is_not_lost(pg, failure):
    """A Ctrl-C while a statement waited (the wait callback notes it on the connection)
    and the statement then failed -- the connection broke or its deadline passed: the
    person asked to stop, so the call stops (KeyboardInterrupt) instead of answering
    the failure or retrying on a new connection that knows nothing of the Ctrl-C."""
    store = pg.open_store()
    try:
        db = store.db

        class Interrupted:
            def execute(self, sql, params):
                db.conn.relay_interrupted = True  # as _wait does on a KeyboardInterrupt
                if failure == "stalled":
                    raise pgmod._Stalled()
                raise pgmod.driver().OperationalError("server closed the connection")

        with pytest.raises(KeyboardInterrupt):
            db._run(Interrupted(), "SELECT 1", None)
    finally:
        store.close()
