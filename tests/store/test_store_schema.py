"""The store's one description of its tables (relay_cli/store/tables.py) is what the
migrations make, on both backends, and what the store writes (design.md §2, §13)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from conftest import new_id

from relay_cli.core import limits
from relay_cli.core.errors import RelayError
from relay_cli.store.sql_requests import OPEN_STATES
from relay_cli.store.tables import REQUESTS, TABLES


def _columns(store, table: str) -> tuple[str, ...]:
    if store.backend == "sqlite":
        return tuple(r[1] for r in store.db.all(f"PRAGMA table_info('{table}')"))
    return tuple(
        r[0]
        for r in store.db.all(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = ? AND column_name <> 'rowid' "
            "ORDER BY ordinal_position",
            (table,),
        )
    )


def _tables(store) -> set[str]:
    if store.backend == "sqlite":
        return {
            r[0]
            for r in store.db.all(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
    return {
        r[0]
        for r in store.db.all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'relay_schema'"
        )
    }


def test_the_description_of_every_table_is_what_the_migrations_make(relay):
    store = relay.open_store()
    try:
        with store.transaction(write=False):
            assert _tables(store) == set(TABLES)
            for name, table in TABLES.items():
                assert _columns(store, name) == table.columns, name
    finally:
        store.close()


def _row(state: str) -> dict:
    return {
        "id": new_id(),
        "fingerprint": "f",
        "from_peer": "a",
        "to_peer": "b",
        "text": "x",
        "text_bytes": 1,
        "state": state,
        "created_at": 1,
        "updated_at": 1,
        "expires_at": 2,
        "ttl_seconds": 1,
        "max_attempts": 1,
        "on_lost": "unknown",
    }


def test_requests_state_holds_only_the_states_of_the_state_machine(relay):
    store = relay.open_store()
    try:
        with store.transaction():
            for state in limits.STATES:
                store.insert_request(_row(state))
        before = relay.snapshot()
        with pytest.raises(RelayError) as e, store.transaction():
            store.insert_request(_row("lost"))
        assert e.value.code == "storage_error"
        assert relay.snapshot() == before
    finally:
        store.close()


def test_a_field_that_is_no_column_is_refused_not_dropped(relay):
    store = relay.open_store()
    try:
        with pytest.raises(ValueError, match="colour"), store.transaction():
            store.insert_request({**_row("queued"), "colour": "red"})
        with pytest.raises(ValueError, match="colour"), store.transaction():
            store.insert_draft({"id": new_id(), "colour": "red"})
        with pytest.raises(ValueError, match="fingerprint"), store.transaction():
            store.update_request(new_id(), "queued", {"fingerprint": "g"})
        with pytest.raises(ValueError, match="key"), store.transaction():
            store.update_ledger("k", {"key": "other"})
    finally:
        store.close()


@pytest.mark.one_backend
def test_the_store_open_states_are_the_state_machines():
    assert OPEN_STATES == "(" + ", ".join(f"'{s}'" for s in limits.OPEN_STATES) + ")"
    assert REQUESTS.updatable == set(REQUESTS.columns) - {
        "id",
        "fingerprint",
        "from_peer",
        "to_peer",
    }


@pytest.mark.sqlite_only
def test_an_old_database_gains_the_state_check_and_keeps_its_row_order(tmp_path):
    from test_schema_history import SHIPPED, _load

    from relay_cli.store.db import open_db

    for fixture in SHIPPED:
        home = tmp_path / fixture.stem
        _load(home, fixture)
        old = sqlite3.connect(home / "relay.db")
        rows = old.execute("SELECT rowid, id, state FROM requests ORDER BY rowid").fetchall()
        old.close()
        db = open_db(home)
        try:
            assert [
                tuple(r) for r in db.all("SELECT rowid, id, state FROM requests ORDER BY rowid")
            ] == rows
            assert "CHECK (state IN" in db.scalar(
                "SELECT sql FROM sqlite_master WHERE name = 'requests'"
            )
            with pytest.raises(RelayError), db.transaction():
                db.execute("UPDATE requests SET state = 'lost'")
        finally:
            db.close()


# sha256 of each PostgreSQL migration's text (pg_migrations.py): append-only like SQLite's
PG_SHIPPED = {
    1: "bc7e29a7",
    2: "2342f5e4",
    3: "7b99b7e9",
    4: "35b21f33",
    5: "c739bede",
    6: "e10a5191",
    7: "dbffd7e0",
    8: "0b6c70f8",
    9: "e7b194c7",
    10: "59802341",
}


@pytest.mark.one_backend
def test_postgresql_runs_every_migration_written_out_and_none_is_edited():
    import hashlib

    from relay_cli.store.migrations import MIGRATIONS
    from relay_cli.store.pg_migrations import PG_MIGRATIONS

    assert len(PG_MIGRATIONS) == len(MIGRATIONS)
    for number, digest in PG_SHIPPED.items():
        text = PG_MIGRATIONS[number - 1]
        assert hashlib.sha256(text.encode()).hexdigest()[:8] == digest, (
            f"PostgreSQL migration {number} was edited; append a new one instead"
        )


# ---------------------------------------------------------------------- the snapshot
# The schema a fresh database has, as each backend reports it (on SQLite through
# sqlite-utils' introspection, on PostgreSQL through information_schema and the
# catalogue), kept in tests/fixtures/schema-snapshot.json. A migration that changes
# the schema changes the snapshot in the same commit: RELAY_WRITE_SNAPSHOT=1 rewrites
# the backend's part of it, and the diff shows what the migration did.
SNAPSHOT = Path(__file__).parents[1] / "fixtures" / "schema-snapshot.json"


def _one_line(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.split())


def _column(name, type_, notnull, default, pk=False, collation=None) -> str:
    """One column as one line: ``name type [NOT NULL] [DEFAULT d] [PRIMARY KEY] [COLLATE c]``."""
    return " ".join(
        [name, type_]
        + ["NOT NULL"] * bool(notnull)
        + [f"DEFAULT {default}"] * (default is not None)
        + ["PRIMARY KEY"] * bool(pk)
        + [f"COLLATE {collation}"] * bool(collation)
    )


def _sqlite_schema(store) -> dict:
    import sqlite_utils

    db = sqlite_utils.Database(store.db.conn, recursive_triggers=False)
    index_sql = {
        r[0]: _one_line(r[1])
        for r in store.db.all("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
    }
    tables = {}
    for table in db.tables:
        tables[table.name] = {
            "columns": [
                _column(c.name, c.type, c.notnull, c.default_value, c.is_pk) for c in table.columns
            ],
            "checks": sorted(_one_line(c.check) for c in table.checks),
            "foreign_keys": sorted(
                [fk.column, fk.other_table, fk.other_column] for fk in table.foreign_keys
            ),
            "indexes": {
                i.name: index_sql.get(i.name) or "(automatic)"
                for i in sorted(table.xindexes, key=lambda i: i.name)
            },
        }
    return {"tables": tables, "views": sorted(db.view_names())}


def _postgres_schema(store) -> dict:
    db = store.db
    tables = {}
    for (name,) in db.all(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = "
        "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
    ):
        constraints = db.all(
            "SELECT contype, conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE "
            "conrelid = to_regclass(?) AND contype IN ('c', 'f') ORDER BY conname",
            (name,),
        )
        tables[name] = {
            "columns": [
                _column(r[0], r[1], r[2] == "NO", r[3], collation=r[4])
                for r in db.all(
                    "SELECT column_name, data_type, is_nullable, column_default, collation_name "
                    "FROM information_schema.columns WHERE table_schema = current_schema() AND "
                    "table_name = ? ORDER BY ordinal_position",
                    (name,),
                )
            ],
            "checks": [r[2] for r in constraints if r[0] == "c"],
            "foreign_keys": [r[2] for r in constraints if r[0] == "f"],
            "indexes": {
                r[0]: r[1]
                for r in db.all(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = "
                    "current_schema() AND tablename = ? ORDER BY indexname",
                    (name,),
                )
            },
        }
    return {
        "tables": tables,
        "views": [
            r[0]
            for r in db.all(
                "SELECT table_name FROM information_schema.views WHERE table_schema = "
                "current_schema() ORDER BY table_name"
            )
        ],
    }


def test_a_fresh_database_has_exactly_the_schema_of_the_snapshot(relay):
    import json
    import os

    store = relay.open_store()
    try:
        with store.transaction(write=False):
            found = (_sqlite_schema if store.backend == "sqlite" else _postgres_schema)(store)
    finally:
        store.close()
    found = json.loads(json.dumps(found))  # as the file holds it (lists, not tuples)
    snapshot = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    if os.environ.get("RELAY_WRITE_SNAPSHOT") == "1":
        snapshot[store.backend] = found
        SNAPSHOT.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    assert found == snapshot.get(store.backend), (
        "the schema differs from tests/fixtures/schema-snapshot.json; if a new migration "
        "changed it on purpose, rerun with RELAY_WRITE_SNAPSHOT=1 and commit the diff"
    )


@pytest.mark.postgres_only
def test_a_postgresql_database_of_schema_7_gains_the_state_check(pg_cluster, tmp_path):
    import psycopg2

    from relay_cli.store.migrations import LATEST
    from relay_cli.store.pg import connect
    from relay_cli.store.pg_migrations import PG_MIGRATIONS

    name, url = pg_cluster.fresh(template="template0")
    try:
        conn = psycopg2.connect(url)
        with conn, conn.cursor() as cur:  # the schema a relay of migration 7 made
            cur.execute(
                "CREATE TABLE relay_schema (version INTEGER NOT NULL); "
                "INSERT INTO relay_schema VALUES (7);" + "".join(PG_MIGRATIONS[:7])
            )
            row = _row("completed")
            cur.execute(
                f"INSERT INTO requests ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
                list(row.values()),
            )
        conn.close()
        db = connect(url, environ={})
        try:
            assert db.scalar("SELECT version FROM relay_schema") == LATEST
            assert db.scalar("SELECT count(*) FROM requests") == 1
            with pytest.raises(RelayError) as e, db.transaction():
                db.execute("UPDATE requests SET state = 'lost'")
            assert e.value.code == "storage_error"
        finally:
            db.close()
    finally:
        pg_cluster.drop(name)


@pytest.mark.postgres_only
def test_a_running_ledger_entry_of_a_postgresql_database_of_schema_8_is_judged_safely(
    pg_cluster, tmp_path, monkeypatch
):
    """Migration 9 adds ledger.pid_namespace; an entry an earlier relay recorded has none,
    and relay cannot tell where its pids were counted: it is another host's (design.md
    §10), alive while renewed, never rerun by --idempotent once the renewal stopped."""
    import json as _json

    import psycopg2
    from conftest import Relay

    from relay_cli.core import clock
    from relay_cli.core.process import process_start, this_host
    from relay_cli.ledger.entries import fingerprint
    from relay_cli.store.pg_migrations import PG_MIGRATIONS

    name, url = pg_cluster.fresh(template="template0")
    try:
        conn = psycopg2.connect(url)
        with conn, conn.cursor() as cur:  # the schema a relay of migration 8 made
            cur.execute(
                "CREATE TABLE relay_schema (version INTEGER NOT NULL); "
                "INSERT INTO relay_schema VALUES (8);" + "".join(PG_MIGRATIONS[:8])
            )
            now = clock.Clock().now_ms()
            argv = ["sh", "-c", "echo again >> ran"]
            fp = fingerprint(argv, str(tmp_path))
            # a live process of this host name: an old relay would have looked it up
            cur.execute(
                "INSERT INTO ledger (key, fingerprint, argv, cwd, state, idempotent, runs, pid, "
                "process_start, child_pid, child_start, host, created_at, updated_at, "
                "started_at) VALUES ('old', %s, %s, %s, 'running', 1, 1, %s, %s, %s, %s, %s, "
                "%s, %s, %s)",
                (
                    fp,
                    _json.dumps(argv, separators=(",", ":")),
                    str(tmp_path),
                    os.getpid(),
                    process_start(os.getpid()),
                    os.getpid(),
                    process_start(os.getpid()),
                    this_host(),
                    now,
                    now,
                    now,
                ),
            )
        conn.close()
        relay = Relay(tmp_path / "home", url)
        shown = relay("ledger", "show", "old", "--json")
        assert shown.code == 0, shown.err
        assert shown.json["state"] == "running" and shown.json["pid_namespace"] is None
        relay.move_clock(31)  # nobody renews it
        assert relay("ledger", "show", "old", "--json").json["state"] == "effect_unknown"
        monkeypatch.chdir(tmp_path)
        r = relay("once", "--key", "old", "--idempotent", "--json", "--", *argv)
        assert r.error["code"] == "effect_unknown", r.err
        assert not (tmp_path / "ran").exists()
    finally:
        pg_cluster.drop(name)
