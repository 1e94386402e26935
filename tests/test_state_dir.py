"""design.md §2: where state lives, how it is created, and what relay refuses to touch."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from relay_cli.store.migrations import LATEST

# All about the local state directory and relay.db (design.md §2); on PostgreSQL relay.db is
# not used (design.md §13), and tests/test_postgres.py covers its schema rules.
pytestmark = pytest.mark.sqlite_only


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def tree(p: Path) -> dict:
    """Every file under p with its bytes (for 'nothing was written')."""
    if not p.exists():
        return {}
    return {str(f): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


def test_home_is_created_0700_with_database_0600_wal_and_full_sync(relay):
    assert relay("peers", "add", "alice").code == 0
    assert mode(relay.home) == 0o700
    assert mode(relay.home / "relay.db") == 0o600
    for extra in ("relay.db-wal", "relay.db-shm"):
        if (relay.home / extra).exists():
            assert mode(relay.home / extra) == 0o600
    db = sqlite3.connect(relay.home / "relay.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == LATEST


def test_home_option_beats_env_var(relay, tmp_path):
    other = tmp_path / "other"
    assert relay("peers", "add", "alice", "--home", str(other)).code == 0
    assert (other / "relay.db").exists()
    assert not relay.home.exists()


def test_platform_default_is_used_without_home(tmp_path, relay):
    env = {"RELAY_HOME": None, "XDG_STATE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    r = relay("peers", "add", "alice", env=env)
    assert r.code == 0, r.err
    assert (tmp_path / "xdg" / "relay" / "relay.db").exists()


def refuse(relay, *args, home=None):
    before = tree(relay.home)
    r = relay(*args, "--json", *(["--home", str(home)] if home else []))
    assert (r.code, r.error["code"]) == (7, "unsafe_state_dir"), r.err
    assert tree(relay.home) == before
    return r


def test_symlinked_home_is_refused_and_nothing_written(relay, tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    relay.home.symlink_to(real)
    refuse(relay, "peers", "add", "alice")
    assert list(real.iterdir()) == []


def test_group_or_other_accessible_home_is_refused(relay):
    relay.home.mkdir(mode=0o700)
    for m in (0o750, 0o705, 0o770, 0o777):
        os.chmod(relay.home, m)
        refuse(relay, "peers", "add", "alice")
    assert list(relay.home.iterdir()) == []


def test_foreign_owned_home_is_refused(relay):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    relay.home.mkdir(mode=0o700)
    os.chown(relay.home, 4242, 4242)
    refuse(relay, "peers", "add", "alice")


def test_foreign_owned_database_is_refused(relay):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another user")
    assert relay("peers", "add", "alice").code == 0
    os.chown(relay.home / "relay.db", 4242, 4242)
    refuse(relay, "list")


def test_symlinked_database_is_refused(relay, tmp_path):
    other = tmp_path / "elsewhere"
    assert relay("peers", "add", "alice", "--home", str(other)).code == 0
    relay.home.mkdir(mode=0o700)
    (relay.home / "relay.db").symlink_to(other / "relay.db")
    before = tree(other)
    refuse(relay, "list")
    assert tree(other) == before


def test_a_file_that_is_not_sqlite_is_database_corrupt_and_unchanged(relay):
    relay.home.mkdir(mode=0o700)
    db = relay.home / "relay.db"
    db.write_bytes(b"this is not a database\n" * 100)
    os.chmod(db, 0o600)
    before = db.read_bytes()
    for args in (["list"], ["peers", "join", "alice"], ["send", "--to", "x", "hi"]):
        r = relay(*args, "--json", env={"RELAY_PEER": "alice"})
        assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err
    assert db.read_bytes() == before


def test_someone_elses_sqlite_database_is_not_taken_over(relay):
    relay.home.mkdir(mode=0o700)
    db = relay.home / "relay.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    os.chmod(db, 0o600)
    before = db.read_bytes()
    r = relay("list", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err
    assert db.read_bytes() == before


def test_a_newer_schema_is_refused_byte_for_byte_unchanged(relay):
    assert relay("peers", "add", "alice").code == 0
    db = relay.home / "relay.db"
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db.read_bytes()
    for args in (["list"], ["peers", "join", "bob"]):
        r = relay(*args, "--json")
        assert (r.code, r.error["code"]) == (7, "schema_too_new"), r.err
    assert db.read_bytes() == before


def test_migrations_run_in_one_transaction_from_an_older_version(relay):
    assert relay("peers", "add", "alice").code == 0
    db = relay.home / "relay.db"
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE hook_state")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    assert relay("list").code == 0
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='hook_state'").fetchone()[0]
    assert conn.execute("SELECT name FROM peers").fetchall() == [("alice",)]
