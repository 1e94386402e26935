"""The store's one description of its tables (relay_cli/store/tables.py) is what the
migrations make, on both backends, and what the store writes (design.md §2, §13)."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import new_id

from relay_cli import states
from relay_cli.errors import RelayError
from relay_cli.store.sql_requests import OPEN_STATES
from relay_cli.store.tables import REQUESTS, TABLES


def _columns(store, table: str) -> tuple[str, ...]:
    if store.backend == "sqlite":
        return tuple(r[1] for r in store.db.all(f"PRAGMA table_info('{table}')"))
    return tuple(r[0] for r in store.db.all(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = ? AND column_name <> 'rowid' "
        "ORDER BY ordinal_position", (table,)))


def _tables(store) -> set[str]:
    if store.backend == "sqlite":
        return {r[0] for r in store.db.all(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    return {r[0] for r in store.db.all(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = "
        "current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'relay_schema'")}


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
    return {"id": new_id(), "fingerprint": "f", "from_peer": "a", "to_peer": "b",
            "text": "x", "text_bytes": 1, "state": state, "created_at": 1, "updated_at": 1,
            "expires_at": 2, "ttl_seconds": 1, "max_attempts": 1, "on_lost": "unknown"}


def test_requests_state_holds_only_the_states_of_the_state_machine(relay):
    store = relay.open_store()
    try:
        with store.transaction():
            for state in states.STATES:
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
    assert OPEN_STATES == "(" + ", ".join(f"'{s}'" for s in states.OPEN_STATES) + ")"
    assert REQUESTS.updatable == set(REQUESTS.columns) - {"id", "fingerprint", "from_peer",
                                                          "to_peer"}


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
            assert [tuple(r) for r in db.all(
                "SELECT rowid, id, state FROM requests ORDER BY rowid")] == rows
            assert "CHECK (state IN" in db.scalar(
                "SELECT sql FROM sqlite_master WHERE name = 'requests'")
            with pytest.raises(RelayError), db.transaction():
                db.execute("UPDATE requests SET state = 'lost'")
        finally:
            db.close()
