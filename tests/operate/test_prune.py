"""`relay prune`: retention with tombstones (design.md §4), tested by moving relay's clock,
and never on a relay.db with damaged pages (design.md §2)."""

from __future__ import annotations

import pytest
from conftest import DAY, at, new_id


def completed(relay, alice, bob, text="please do it", reply="done") -> str:
    rid = new_id()
    assert relay.send(alice, "bob", text, request_id=rid).code == 0
    assert relay("claim", "--id", rid, "--json", env=bob).code == 0
    assert relay("reply", rid, reply, "--json", env=bob).code == 0
    return rid


def rows(relay, table: str, where: str = "1 = 1", params=()) -> list:
    return relay.sql(f"SELECT * FROM {table} WHERE {where} ORDER BY rowid", params)


def test_old_final_requests_become_tombstones_and_live_work_is_untouched(relay, pair):
    alice, bob = pair
    done = completed(relay, alice, bob)
    failed = new_id()
    relay.send(alice, "bob", "try this", request_id=failed)
    relay("claim", "--id", failed, env=bob)
    assert relay("fail", failed, "--reason", "private reason", env=bob).code == 0
    # 40 days later: new sessions and live work
    alice2 = relay("peers", "join", "alice", "--json", env=at(40 * DAY)).json["token"]
    bob2 = relay("peers", "join", "bob", "--lease", "1h", "--json", env=at(40 * DAY)).json["token"]
    a2 = at(40 * DAY, {"RELAY_PEER": "alice", "RELAY_SESSION": alice2})
    b2 = at(40 * DAY, {"RELAY_PEER": "bob", "RELAY_SESSION": bob2})
    queued, claimed = new_id(), new_id()
    assert relay("send", "--to", "bob", "--id", queued, "later", env=a2).code == 0
    assert relay("send", "--to", "bob", "--id", claimed, "now", env=a2).code == 0
    assert relay("claim", "--id", claimed, env=b2).code == 0
    live_before = rows(relay, "requests", "id IN (?, ?)", (queued, claimed))

    r = relay("prune", "--json", env=at(40 * DAY))
    assert r.code == 0, r.err
    assert r.json["requests_pruned"] == 2
    assert r.json["tombstones_removed"] == 0
    assert r.json["dry_run"] is False

    shown = relay("show", done, "--json", "--events", env=at(40 * DAY)).json
    assert shown["pruned"] is True and shown["state"] == "completed"
    assert shown["text"] is None and shown["reply"] is None and shown["detail"] is None
    assert shown["from"] == "alice" and shown["to"] == "bob" and shown["finished_at"]
    f = relay("show", failed, "--json", "--events", env=at(40 * DAY)).json
    assert f["state"] == "failed" and f["reason"] == "failed_by_recipient"
    assert f["detail"] is None
    assert all(e["detail"] is None for e in f["events"])  # the reason text is gone too
    listed = {x["id"] for x in relay("list", "--all", "--json", env=at(40 * DAY)).json["requests"]}
    assert listed == {queued, claimed}  # list does not show tombstones
    assert rows(relay, "requests", "id IN (?, ?)", (queued, claimed)) == live_before


def test_a_very_late_retry_of_a_pruned_send_is_still_a_duplicate(relay, pair):
    alice, bob = pair
    rid = completed(relay, alice, bob, text="build the thing")
    assert relay("prune", env=at(40 * DAY)).code == 0
    # the ghost of alice's old session retries its send, 40 days later
    retry = relay(
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "--json",
        "-",
        input="build the thing",
        env=at(40 * DAY, alice),
    )
    assert retry.code == 0, retry.err
    assert retry.json["duplicate"] is True
    assert retry.json["state"] == "completed" and retry.json["pruned"] is True
    other = relay(
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "--json",
        "-",
        input="something else",
        env=at(40 * DAY, alice),
    )
    assert other.code == 4 and other.error["code"] == "request_id_conflict"
    assert len(rows(relay, "requests")) == 1


def test_tombstones_are_removed_120_days_after_the_request_finished(relay, pair):
    alice, bob = pair
    early = completed(relay, alice, bob)
    assert relay("prune", "--json", env=at(40 * DAY)).json["requests_pruned"] == 1
    assert relay("prune", "--json", env=at(119 * DAY)).json["tombstones_removed"] == 0
    assert relay("show", early, "--json", env=at(119 * DAY)).json["pruned"] is True
    r = relay("prune", "--json", env=at(121 * DAY))
    assert r.json["tombstones_removed"] == 1
    assert r.json["events_removed"] == 3  # queued, delivered, completed
    gone = relay("show", early, "--json", env=at(121 * DAY))
    assert gone.code == 3 and gone.error["code"] == "request_not_found"
    assert rows(relay, "events", "request_id = ?", (early,)) == []


def test_a_request_never_pruned_is_removed_whole_after_120_days(relay, pair):
    alice, bob = pair
    rid = completed(relay, alice, bob)
    r = relay("prune", "--json", env=at(130 * DAY))
    assert (r.json["requests_pruned"], r.json["tombstones_removed"]) == (0, 1)
    assert rows(relay, "requests", "id = ?", (rid,)) == []


def test_dry_run_reports_the_same_counts_and_changes_nothing(relay, pair):
    alice, bob = pair
    old = completed(relay, alice, bob)
    completed(relay, alice, bob)
    relay("prune", env=at(40 * DAY))  # two tombstones
    a95 = at(
        95 * DAY,
        {
            "RELAY_PEER": "alice",
            "RELAY_SESSION": relay("peers", "join", "alice", "--json", env=at(95 * DAY)).json[
                "token"
            ],
        },
    )
    b95 = at(
        95 * DAY,
        {
            "RELAY_PEER": "bob",
            "RELAY_SESSION": relay("peers", "join", "bob", "--json", env=at(95 * DAY)).json[
                "token"
            ],
        },
    )
    completed(relay, a95, b95, text="newer")  # 35 days old at +130 d
    relay("prepare", "--to", "bob", "a draft", env=a95)
    assert relay("sweep", env=at(130 * DAY)).code == 0  # nothing left due at +130 d
    before = relay.snapshot()
    dry = relay("prune", "--dry-run", "--json", env=at(130 * DAY))
    assert dry.code == 0, dry.err
    assert relay.snapshot() == before
    counts = {
        k: dry.json[k]
        for k in ("requests_pruned", "tombstones_removed", "events_removed", "drafts_removed")
    }
    assert counts == {
        "requests_pruned": 1,
        "tombstones_removed": 2,
        "events_removed": 6,
        "drafts_removed": 1,
    }
    assert dry.json["dry_run"] is True
    real = relay("prune", "--json", env=at(130 * DAY))
    assert {k: real.json[k] for k in counts} == counts
    assert rows(relay, "requests", "id = ?", (old,)) == []
    human = relay("prune", "--dry-run", env=at(130 * DAY))
    assert "would be removed" in human.out and "requests pruned" in human.out


def test_drafts_expired_unsubmitted_and_submitted_with_a_pruned_request(relay, pair):
    alice, bob = pair
    stale = relay("prepare", "--to", "bob", "never sent", "--json", env=alice).json["id"]
    sent = relay("prepare", "--to", "bob", "sent", "--json", env=alice).json["id"]
    assert relay("submit", sent, "--json", env=alice).code == 0
    assert relay("cancel", sent, env=alice).code == 0  # final: cancelled
    alice2 = relay("peers", "join", "alice", "--json", env=at(40 * DAY)).json["token"]
    a2 = at(40 * DAY, {"RELAY_PEER": "alice", "RELAY_SESSION": alice2})
    fresh = relay("prepare", "--to", "bob", "fresh", "--json", env=a2).json["id"]
    r = relay("prune", "--json", env=at(40 * DAY))
    assert r.json["drafts_removed"] == 2 and r.json["requests_pruned"] == 1
    assert [d[0] for d in rows(relay, "drafts")] == [fresh]
    again = relay("submit", sent, "--json", env=at(40 * DAY, alice))
    assert again.code == 0, again.err
    assert again.json["duplicate"] is True and again.json["state"] == "cancelled"
    lost = relay("submit", stale, "--json", env=a2)
    assert lost.code == 3 and lost.error["code"] == "prepared_not_found"


def test_older_than_overrides_the_retention(relay, pair):
    alice, bob = pair
    completed(relay, alice, bob)
    assert relay("prune", "--json", env=at(2 * DAY)).json["requests_pruned"] == 0
    r = relay("prune", "--older-than", "1d", "--json", env=at(2 * DAY))
    assert r.json["requests_pruned"] == 1 and r.json["older_than_seconds"] == DAY
    bad = relay("prune", "--older-than", "soon", "--json")
    assert bad.code == 2 and bad.error["code"] == "invalid_duration"


def test_prune_works_in_small_batches_with_the_same_result(relay, pair):
    from relay_cli.core import clock
    from relay_cli.operate import retention

    alice, _ = pair
    ids = []
    for _ in range(7):
        rid = new_id()
        relay.send(alice, "bob", "x", request_id=rid)
        relay("cancel", rid, env=alice)
        ids.append(rid)
    store = relay.open_store()
    try:
        now = clock.Clock().now_ms() + 40 * DAY * 1000
        dry = retention.prune(store, now, dry_run=True, batch=3)
        real = retention.prune(store, now, batch=3)
        assert dry["requests_pruned"] == real["requests_pruned"] == 7
        later = retention.prune(store, now + 100 * DAY * 1000, batch=3)
        assert later["tombstones_removed"] == 7 and later["events_removed"] == 14
    finally:
        store.close()
    assert rows(relay, "requests") == []


def test_a_pruned_delivery_unknown_cannot_be_requeued(relay, pair):
    alice, bob = pair
    rid = new_id()
    relay.send(alice, "bob", "risky", request_id=rid)
    relay("claim", "--id", rid, env=bob)
    relay("peers", "leave", env=bob)
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"
    relay("prune", env=at(40 * DAY))
    before = relay.snapshot()
    r = relay("resolve", rid, "--outcome", "requeue", "--json", env=at(40 * DAY), terminal=True)
    assert r.code == 4 and r.error["code"] == "state_conflict"
    assert relay.snapshot() == before


def test_prune_as_a_real_process_reports_ledger_counts(relay, pair):
    r = relay.proc("prune", "--json")
    assert r.code == 0, r.err
    assert r.json["ledger"] == {
        "entries_pruned": 0,
        "entries_removed": 0,
        "by_state": {},
        "dry_run": False,
    }


def _hook(relay, event: str, sid: str, env: dict) -> None:
    import json
    from pathlib import Path

    doc = json.loads(
        (Path(__file__).parents[1] / "fixtures" / "claude" / f"{event}.json").read_text()
    )
    doc["session_id"] = sid
    r = relay("hook", "claude", input=json.dumps(doc), env=env)
    assert r.code == 0 and r.err == "", r


def test_ended_sessions_and_their_hook_records_are_pruned_never_one_that_holds_work(
    relay, tmp_path
):
    """Every join, `relay run` and Claude session start adds a session row; prune removes
    those that ended more than the retention ago once no request or tombstone names them,
    and the hook's bookkeeping with them. Active sessions and sessions holding work stay."""
    env_file = tmp_path / "claude.env"
    env_file.touch()
    for i in range(3):  # a Claude session that starts, stops with work waiting, ends
        claude = {"RELAY_PEER": "claude-1", "CLAUDE_ENV_FILE": str(env_file)}
        _hook(relay, "session_start", f"sid-{i}", claude)
        _hook(relay, "stop", f"sid-{i}", claude)
        _hook(relay, "session_end", f"sid-{i}", claude)
    for _ in range(4):
        relay.join("idle")  # each join supersedes the previous one
    alice = relay.join("alice", "--lease", "24h")
    bob = relay.join("bob", "--lease", "24h")
    rid = completed(relay, alice, bob)  # names alice's and bob's sessions
    assert len(rows(relay, "sessions")) == 3 + 4 + 2, rows(relay, "sessions")
    assert len(rows(relay, "hook_state")) >= 3
    relay.sql(  # the row of a waiter that crashed
        "INSERT INTO wake_waiters (session_id, peer, runtime, pid, host, started_at, "
        "until_at) SELECT id, peer, 'claude', 1, 'h', created_at, created_at + 1000 "
        "FROM sessions WHERE agent_session_id = 'sid-0'"
    )

    # 200 days later every lease has lapsed: only sessions some row still names may stay
    dry = relay("prune", "--dry-run", "--json", env=at(200 * DAY)).json
    r = relay("prune", "--json", env=at(200 * DAY))
    assert r.code == 0, r.err
    assert r.json["sessions_removed"] == dry["sessions_removed"]
    assert r.json["hook_records_removed"] == dry["hook_records_removed"]
    assert r.json["tombstones_removed"] == 1  # rid finished 200 days ago: gone, and with
    assert r.json["sessions_removed"] == 3 + 4 + 2  # it the last row naming alice and bob
    assert rows(relay, "sessions") == [] and rows(relay, "hook_state") == []
    assert rows(relay, "wake_waiters") == []
    assert relay("show", rid, "--json", env=at(200 * DAY)).code == 3
    again = relay("prune", "--json", env=at(200 * DAY)).json
    assert again["sessions_removed"] == again["hook_records_removed"] == 0


def test_prune_keeps_active_sessions_and_sessions_named_by_a_live_or_tombstoned_request(
    relay, pair
):
    alice, bob = pair
    carol = relay.join("carol", "--lease", "24h")
    rid = new_id()
    assert relay.send(carol, "bob", "hold this", request_id=rid).code == 0
    bob_lease = relay.join("bob", "--lease", "24h")  # supersedes bob's first session
    assert relay("claim", "--id", rid, "--json", env=bob_lease).code == 0  # holds work
    relay("peers", "leave", env=alice)
    before = {r[0]: r[3] for r in rows(relay, "sessions")}
    r = relay("prune", "--older-than", "0", "--json")
    assert r.code == 0, r.err
    after = {r[0]: r[3] for r in rows(relay, "sessions")}
    # alice's session (left, named by nothing) and bob's first one (superseded) are gone;
    # carol's (active, sender of rid) and bob's second (active, holding rid) stay
    assert r.json["sessions_removed"] == 2
    assert set(after.values()) == {"active"} and len(after) == 2
    assert set(after) < set(before)
    # carol's session ends (superseded) while rid's row still names it: kept, so its
    # ghost's retry still answers duplicate until the row is gone
    relay.join("carol")
    assert relay("prune", "--older-than", "0", "--json").json["sessions_removed"] == 0
    ghost = relay("send", "--to", "bob", "--id", rid, "--json", "-", input="hold this", env=carol)
    assert ghost.code == 0 and ghost.json["duplicate"] is True


def test_prune_does_not_let_a_finished_key_run_again(relay, tmp_path):
    """design.md §1 + §4: retention must not turn a finished side effect into one
    that runs a second time; requests keep a tombstone for 120 days for exactly this."""
    marker = tmp_path / "ran"
    cmd = ["sh", "-c", f"echo x >> {marker}"]
    assert relay("once", "--key", "pr-create-1", "--", *cmd).code == 0
    later = {"RELAY_TIME_OFFSET": str(31 * DAY)}
    assert relay("prune", env=later).code == 0
    r = relay("once", "--key", "pr-create-1", "--", *cmd, env=later)
    assert r.code == 0
    assert marker.read_text().count("x") == 1, "the command ran twice after `relay prune`"


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
