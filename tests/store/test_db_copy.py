"""`relay db copy` changes nothing it promises not to (design.md §13): the source relay.db
is never changed, not even migrated, and a refused target gets nothing of relay's."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from conftest import Relay
from test_schema_history import SHIPPED, _load

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def empty_db(pg_cluster, tmp_path):
    """A PostgreSQL database relay never touched (no schema)."""
    name, url = pg_cluster.fresh(template="template0")
    try:
        yield Relay(tmp_path / "target-home", url)
    finally:
        pg_cluster.drop(name)


def _digest(home) -> str:
    return hashlib.sha256((home / "relay.db").read_bytes()).hexdigest()


@pytest.mark.parametrize("fixture", [SHIPPED[0], SHIPPED[-1]], ids=lambda p: p.stem)
def test_copy_of_an_older_schema_leaves_the_source_as_it_was(relay, empty_db, tmp_path, fixture):
    src = Relay(tmp_path / "home")
    _load(src.home, fixture)
    before, version = _digest(src.home), int(fixture.name[1])
    listing = sorted(p.name for p in src.home.iterdir())
    r = src("db", "copy", "--to", empty_db.url, "--json")
    assert r.code == 0, r.err
    assert _digest(src.home) == before  # not migrated in place
    assert sorted(p.name for p in src.home.iterdir()) == listing
    db = sqlite3.connect(src.home / "relay.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == version
    db.close()
    assert r.json["copied"]["requests"] == 2
    shown = empty_db("show", "11111111-1111-4111-8111-111111111111", "--json")
    assert shown.code == 0 and shown.json["state"] == "completed"
    assert empty_db("once", "--key", "on-pg", "--", "true").code == 0


@pytest.mark.parametrize("rows", [0, 2])
def test_copy_into_a_database_with_someone_elses_table_creates_nothing(
    relay, empty_db, tmp_path, rows
):
    empty_db.sql("CREATE TABLE notes (id integer, body text)")
    for i in range(rows):
        empty_db.sql("INSERT INTO notes VALUES (?, 'mine')", (i,))
    src = Relay(tmp_path / "home")
    src.join("alice")
    before = empty_db.snapshot()
    r = src("db", "copy", "--to", empty_db.url, "--json")
    assert (r.code, r.error["code"]) == (4, "state_conflict")
    assert "relay data" not in r.error["message"]
    assert "not relay's" in r.error["message"] and "notes" in r.error["message"]
    assert empty_db.snapshot() == before  # no relay_schema, no relay table
    assert set(before) == {"notes"}


def test_a_relay_db_gone_between_the_check_and_the_open_is_a_usage_error(tmp_path):
    # `relay db copy` looks for relay.db, then opens it: one removed in between is the
    # same usage_error as one never there, not an internal error
    from relay_cli.core.errors import RelayError
    from relay_cli.store import copy

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with pytest.raises(RelayError) as e:
        copy._open_source(home)
    assert e.value.code == "usage_error" and "there is no relay.db" in e.value.message
