"""Smaller truths on the receiving side and for a person (design.md §4, §12, §14)."""

from __future__ import annotations

import pytest
from conftest import at, new_id, refused


@pytest.mark.parametrize("text", [" ", "\n", "\n\n  \t\n", "\u3000\n"])
def test_text_that_is_only_whitespace_is_refused_as_empty(world, text):
    relay, alice, bob = world
    err = refused(relay, "invalid_text", "send", "--to", "bob", "-", input=text, env=alice)
    assert "only whitespace" in err["message"]
    err = refused(relay, "invalid_text", "prepare", "--to", "bob", "-", input=text, env=alice)
    assert "only whitespace" in err["message"]


def test_a_reply_that_is_only_whitespace_is_refused(seeded):
    relay, alice, bob, rid = seeded
    assert relay("claim", env=bob).code == 0
    refused(relay, "invalid_text", "reply", rid, "-", input="\n\n", env=bob)


@pytest.mark.parametrize("ending", ["expired", "cancelled"])
def test_a_duplicate_answer_for_a_request_that_ended_queued_has_a_note(world, ending):
    relay, alice, bob = world
    rid = new_id()
    args = ("send", "--to", "bob", "--id", rid, "--ttl", "30s", "work")
    assert relay(*args, env=alice).code == 0
    later = alice
    if ending == "cancelled":
        assert relay("cancel", rid, env=alice).code == 0
    else:
        later = at(60, alice)
    r = relay(*args, env=later)
    assert r.code == 0, r.err
    assert "duplicate         yes" in r.out
    note = next(ln for ln in r.out.splitlines() if ln.startswith("note: "))
    assert note.startswith(f"note: {ending}: ") and "new id" in note, r.out


def test_peers_join_shell_says_on_stderr_that_it_joined(relay):
    r = relay("peers", "join", "alice", "--shell")
    assert r.code == 0
    assert all(ln.startswith("export ") for ln in r.out.splitlines())
    assert "relay: joined as alice" in r.err


def test_wakeup_in_send_s_answer_is_explained(world):
    relay, alice, bob = world
    r = relay("send", "--to", "bob", "--id", new_id(), "x", env=alice)
    line = next(ln for ln in r.out.splitlines() if ln.startswith("wakeup "))
    assert "(" in line, r.out  # the value with what it means
    assert "nothing wakes bob" in r.out and "evidence of delivery" in r.out


@pytest.mark.sqlite_only
def test_prune_refuses_a_relay_db_with_damaged_pages_and_changes_nothing(world):
    """A damaged page that no command reads goes unnoticed by the others (quick_check reads
    every page: too slow for every call, design.md §2); prune, which rewrites rows all
    over, runs quick_check first and changes nothing."""
    import sqlite3

    relay, alice, bob = world
    for i in range(40):
        assert relay.send(alice, "bob", f"task {i} " + "x" * 2000).code == 0
    db = relay.home / "relay.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        for page in range(pages // 2, pages // 2 + 5):
            f.seek((page - 1) * 4096)
            f.write(b"\xde\xad\xbe\xef" * 1024)
    before = db.read_bytes()
    r = relay("prune", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err
    assert db.read_bytes() == before
