"""Databases made by earlier revisions of relay keep working (design.md §2, §10).

Every schema relay ever shipped is kept as a fixture made by the old code itself
(tests/fixtures/schemas/vN-REV.sql: `git show REV:…` run on its own to create a relay.db,
then dumped). A migration test must start from those, not from today's migrations: one
shipped migration was edited after it shipped, so a relay.db made by the first revisions
had a ledger without columns today's code needs. Migrations are append-only: the text of
every shipped one is pinned by its hash below.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import new_id

pytestmark = pytest.mark.sqlite_only

FIXTURES = Path(__file__).parents[1] / "fixtures" / "schemas"
SHIPPED = sorted(FIXTURES.glob("v*.sql"))

# sha256 of each migration's text as shipped: never edit one, append a new one instead
SHIPPED_MIGRATIONS = {
    1: "1fd80c3e",
    2: "1edcdcc5",
    3: "1a51f605",
    4: "7eb2041e",
    5: "9228bb9e",
    6: "6e894d6b",
    7: "02d1599a",
    8: "0627d275",
    9: "5f2fefc5",
    10: "55216c28",
}


def test_every_shipped_migration_is_unchanged():
    from relay_cli.store.migrations import MIGRATIONS

    for number, digest in SHIPPED_MIGRATIONS.items():
        text = MIGRATIONS[number - 1]
        assert hashlib.sha256(text.encode()).hexdigest()[:8] == digest, (
            f"migration {number} was edited after it shipped; append a new one instead"
        )


def test_there_is_a_fixture_of_every_shipped_schema_version():
    versions = {int(p.name[1 : p.name.index("-")]) for p in SHIPPED}
    assert versions == {3, 4, 5}


def test_every_ledger_column_is_there_after_migrating_an_old_database(tmp_path):
    from relay_cli.store.db import open_db

    fresh_home = tmp_path / "fresh"
    fresh_home.mkdir(mode=0o700)
    fresh = open_db(fresh_home)
    want = {r[1] for r in fresh.all("PRAGMA table_info(ledger)")}
    fresh.close()
    for fixture in SHIPPED:
        home = tmp_path / fixture.stem
        _load(home, fixture)
        db = open_db(home)
        have = {r[1] for r in db.all("PRAGMA table_info(ledger)")}
        db.close()
        assert want <= have, (fixture.name, want - have)


def _load(home: Path, fixture: Path) -> None:
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / "relay.db"
    db = sqlite3.connect(path)
    try:
        db.executescript(fixture.read_text())
    finally:
        db.close()
    os.chmod(path, 0o600)


@pytest.mark.parametrize("fixture", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_database_of_an_earlier_revision_runs_every_command_family(relay, fixture):
    _load(relay.home, fixture)
    # relay's clock back to a minute after the fixture was made, so its queued request
    # (ttl 1h) is still queued whenever the test runs
    made = (
        sqlite3.connect(relay.home / "relay.db")
        .execute("SELECT max(created_at) FROM requests")
        .fetchone()[0]
    )
    relay.move_clock(made / 1000 + 60 - time.time())

    def ok(*args, input=None, env=None, code=0):
        r = relay(*args, input=input, env=env)
        assert r.code == code, (args, r.err)
        assert "Traceback" not in r.err and "internal_error" not in r.err
        return r

    # what the old code stored is still there
    assert ok("show", "11111111-1111-4111-8111-111111111111", "--json").json["state"] == "completed"
    old_ledger = {e["key"] for e in ok("ledger", "list", "--json").json["entries"]}

    alice = relay.join("alice", "--lease", "24h")
    bob = relay.join("bob", "--lease", "24h")
    ok("peers", "list")
    rid = new_id()
    ok("send", "--to", "bob", "--id", rid, "-", input="after the upgrade", env=alice)
    ok("inbox", env=bob)
    # the old request first (FIFO), then the new one
    assert ok("claim", "--json", env=bob).json["id"] == "22222222-2222-4222-8222-222222222222"
    ok("ack", "22222222-2222-4222-8222-222222222222", env=bob)
    ok("reply", "22222222-2222-4222-8222-222222222222", "-", input="done", env=bob)
    assert ok("claim", "--json", env=bob).json["id"] == rid
    ok("reply", rid, "-", input="done too", env=bob)
    ok("wait", rid, "--timeout", "1", env=alice)
    ok("notices", env=alice)
    ok("list", "--all")
    ok("export", "--format", "jsonl")

    # the ledger: run, record, replay, settle (the failure was here: after the record)
    r = ok("once", "--key", "after-upgrade", "--json", "--", "echo", "hi")
    assert r.json["state"] == "succeeded" and r.json["stdout"] == "hi\n"
    r = ok("once", "--key", "after-upgrade", "--json", "--", "echo", "hi")
    assert r.json["replayed"] is True
    ok("once", "--key", "fails", "--", "sh", "-c", "exit 3", code=3)
    ok("ledger", "list")
    ok("ledger", "show", "after-upgrade")
    ok("ledger", "resolve", "fails", "--outcome", "forget")
    ok("once", "--key", "fails", "--", "true")
    for key in old_ledger:  # entries the old code recorded keep their outcome
        shown = ok("ledger", "show", key, "--json").json
        assert shown["state"] in ("succeeded", "failed") and shown["exit_code"] is not None
    ok("sweep")
    ok("prune", "--dry-run")
    ok("prune", "--older-than", "1d")
    r = relay("doctor", "--json")
    assert "internal_error" not in r.err and "database_corrupt" not in r.out, r.out
    ok("peers", "leave", env=bob)
