"""The test harness's own promise (tests/conftest.py ``PgCluster``): a PostgreSQL database
that one test used is handed to a later test only when it is indistinguishable from a new
copy of the template -- same catalog rows (the fingerprint a new copy has) and same table
rows. Otherwise it is dropped. Without this, a test's leftovers could make another pass
or fail.
"""

from __future__ import annotations

import pytest

CHANGES = {
    "a new table": "CREATE TABLE extra (x int)",
    "a new index on relay's table": "CREATE INDEX extra_idx ON requests (text)",
    "a dropped index": "DROP INDEX {index}",
    "a new column": "ALTER TABLE requests ADD COLUMN extra int",
    "a changed default": "ALTER TABLE requests ALTER COLUMN text SET DEFAULT 'x'",
    "a grant": "GRANT SELECT ON requests TO PUBLIC",
    "a new function": "CREATE FUNCTION extra() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "a dropped constraint": "ALTER TABLE requests DROP CONSTRAINT {check}",
    "a database setting": "ALTER DATABASE {db} SET work_mem = '8MB'",
    "a new schema": "CREATE SCHEMA extra",
    "a changed row the template holds": "UPDATE relay_schema SET version = version + 100",
}


def _run(cluster, name: str, *statements: str) -> None:
    conn = cluster._connect(name)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def _one(cluster, name: str, sql: str):
    conn = cluster._connect(name)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()[0]
    finally:
        conn.close()


def test_a_database_relay_used_is_reset_to_exactly_a_new_copy(pg_cluster, tmp_path):
    from conftest import Relay

    name, url = pg_cluster.fresh()
    relay = Relay(tmp_path / "home", url)
    alice = relay.join("alice")
    bob = relay.join("bob")
    assert relay.send(alice, "bob", "hello").code == 0
    assert relay("claim", env=bob).code == 0
    assert relay("once", "--key", "k", "--", "true").code == 0
    assert _one(pg_cluster, name, "SELECT count(*) FROM pg_sequences WHERE last_value > 0")
    # and one moved as `relay db copy` moves them: no last value shows, like an unused one
    _run(pg_cluster, name, "SELECT setval('events_seq_seq', 50, false)")

    pg_cluster.release(name)

    assert name in pg_cluster.spare
    conn = pg_cluster._connect(name)
    try:
        assert pg_cluster._facts(conn) == pg_cluster.facts
        assert pg_cluster._rows(conn) == pg_cluster.rows
        with conn.cursor() as cur:  # each sequence's next value is its first
            cur.execute("SELECT schemaname, sequencename, start_value FROM pg_sequences")
            for schema, seq, start in cur.fetchall():
                cur.execute(f'SELECT last_value, is_called FROM "{schema}"."{seq}"')
                assert cur.fetchone() == (start, False), seq
    finally:
        conn.close()


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_database_whose_objects_or_kept_rows_changed_is_dropped(pg_cluster, change):
    name, _ = pg_cluster.fresh()
    index = _one(
        pg_cluster,
        name,
        "SELECT indexname FROM pg_indexes WHERE tablename = 'requests' "
        "AND indexname NOT LIKE '%pkey' LIMIT 1",
    )
    check = _one(
        pg_cluster,
        name,
        "SELECT conname FROM pg_constraint WHERE conrelid = 'requests'::regclass "
        "AND contype = 'c' LIMIT 1",
    )
    _run(pg_cluster, name, CHANGES[change].format(index=index, check=check, db=name))
    conn = pg_cluster._connect(name)
    try:
        changed = (pg_cluster._facts(conn), pg_cluster._rows(conn)) != (
            pg_cluster.facts,
            pg_cluster.rows,
        )
    finally:
        conn.close()
    assert changed  # the change is one a new copy would not have

    pg_cluster.release(name)

    assert name not in pg_cluster.spare
    assert not _one(
        pg_cluster, "postgres", f"SELECT count(*) FROM pg_database WHERE datname = '{name}'"
    )


def test_a_database_still_connected_is_dropped(pg_cluster):
    name, _ = pg_cluster.fresh()
    left_open = pg_cluster._connect(name)
    try:
        pg_cluster.release(name)
        assert name not in pg_cluster.spare
    finally:
        left_open.close()
    pg_cluster.drop(name)
