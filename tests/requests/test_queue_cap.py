"""The queue cap (design.md §4): at most RELAY_QUEUE_CAP (default 1,000) open requests
(queued, delivered, acknowledged) per recipient. The next new one, by send or by submit,
is capacity_exceeded (exit 6, retryable, retry_after_seconds); nothing is queued or
evicted; a retry of an existing id is still answered first (duplicate: true)."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import new_id, refused

from relay_cli.core.limits import QUEUE_CAP, QUEUE_RETRY_AFTER_S


def test_the_default_cap_is_1000_and_a_request_beyond_it_changes_nothing(world):
    """Fill bob's queue to the default cap straight in the database (1,000 sends would
    take minutes), then the 1,001st send is refused and leaves every table as it was."""
    relay, alice, bob = world
    relay.env["RELAY_RATE_LIMIT"] = "0"  # the copies were all created this minute
    rid = relay.send(alice, "bob", "seed").json["id"]
    row = relay.sql("SELECT * FROM requests WHERE id = ?", (rid,))[0]
    _clone(relay, rid, row, QUEUE_CAP - 1)
    assert relay.sql("SELECT count(*) FROM requests")[0][0] == QUEUE_CAP
    err = refused(
        relay, "capacity_exceeded", "send", "--to", "bob", "--id", new_id(), "x", env=alice
    )
    assert err["retryable"] is True and err["retry_after_seconds"] == QUEUE_RETRY_AFTER_S
    assert "'bob' has 1000 open requests" in err["message"]
    # a retry of a request already in the queue is still its duplicate, at the cap
    again = relay.send(alice, "bob", "seed", request_id=rid)
    assert again.code == 0 and again.json["duplicate"] is True
    # another recipient is not capped by bob's queue
    relay.join("carol")
    assert relay.send(alice, "carol", "x").code == 0


def _clone(relay, rid: str, row: tuple, n: int) -> None:
    """``n`` more queued requests to the same recipient, copies of ``rid`` with new ids."""
    if relay.url:
        relay.sql(
            "INSERT INTO requests SELECT md5(random()::text || g::text)::uuid::text, "
            "fingerprint || g::text, from_peer, to_peer, from_session, text, text_bytes, "
            "reply, state, reason, detail, created_at, updated_at, expires_at, "
            "delivered_at, acknowledged_at, finished_at, lease_expires_at, "
            "claim_session, reply_deadline_at, ttl_seconds, reply_within_seconds, "
            "attempts, max_attempts, on_lost, in_reply_to, depth, pruned, notified_at "
            f"FROM requests, generate_series(1, {n}) AS g WHERE id = ?",
            (rid,),
        )
        return
    db = sqlite3.connect(relay.home / "relay.db")
    try:
        cols = [r[1] for r in db.execute("PRAGMA table_info(requests)")]
        rows = []
        for _ in range(n):
            copy = dict(zip(cols, row, strict=True))
            copy["id"] = new_id()
            copy["fingerprint"] = copy["fingerprint"] + copy["id"]
            rows.append([copy[c] for c in cols])
        db.executemany(
            f"INSERT INTO requests ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows
        )
        db.commit()
    finally:
        db.close()


@pytest.fixture
def capped(world):
    relay, alice, bob = world
    relay.env["RELAY_QUEUE_CAP"] = "3"
    return relay, alice, bob


def test_open_means_queued_delivered_or_acknowledged(capped):
    relay, alice, bob = capped
    ids = [new_id() for _ in range(5)]
    for rid in ids[:3]:
        assert relay.send(alice, "bob", rid, request_id=rid).code == 0
    relay("claim", "--id", ids[0], env=bob)
    relay("claim", "--id", ids[1], env=bob)
    relay("ack", ids[1], env=bob)  # one queued, one delivered, one acknowledged: full
    refused(relay, "capacity_exceeded", "send", "--to", "bob", "--id", ids[3], "x", env=alice)
    relay("reply", ids[1], "done", env=bob)  # a final request leaves the queue
    assert relay.send(alice, "bob", "x", request_id=ids[3]).code == 0
    refused(relay, "capacity_exceeded", "send", "--to", "bob", "--id", ids[4], "x", env=alice)
    relay("cancel", ids[2], env=alice)
    assert relay.send(alice, "bob", "x", request_id=ids[4]).code == 0


def test_submit_is_capped_and_prepare_is_not(capped):
    """A draft is not in the queue: prepare is never refused by the cap; its submit is."""
    relay, alice, bob = capped
    for _ in range(3):
        assert relay.send(alice, "bob", "x").code == 0
    did = relay("prepare", "--to", "bob", "later", "--json", env=alice).json["id"]
    err = refused(relay, "capacity_exceeded", "submit", did, env=alice)
    assert err["retry_after_seconds"] == QUEUE_RETRY_AFTER_S
    relay("claim", env=bob)
    rid = relay("list", "--state", "delivered", "--json").json["requests"][0]["id"]
    relay("reject", rid, "--reason", "no", env=bob)
    r = relay("submit", did, "--json", env=alice)
    assert r.code == 0 and r.json["duplicate"] is False
    assert relay("submit", did, "--json", env=alice).json["duplicate"] is True


def test_a_duplicate_at_the_cap_is_answered_before_the_cap(capped):
    relay, alice, bob = capped
    ids = [new_id() for _ in range(3)]
    for rid in ids:
        assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    for rid in ids:
        r = relay.send(alice, "bob", "x", request_id=rid)
        assert r.code == 0 and r.json["duplicate"] is True
    refused(
        relay, "request_id_conflict", "send", "--to", "bob", "--id", ids[0], "other", env=alice
    )  # dedupe decides before the cap, conflicts included


def test_cap_zero_means_none_and_an_invalid_cap_is_a_usage_error(capped):
    relay, alice, bob = capped
    relay.env["RELAY_QUEUE_CAP"] = "0"
    for _ in range(5):
        assert relay.send(alice, "bob", "x").code == 0
    for value in ("٣", "-1", "1e3", "3 4", " 5", "5 ", "5\n", "\t5", "+5", "  "):
        err = refused(
            relay,
            "usage_error",
            "send",
            "--to",
            "bob",
            "x",
            env={**alice, "RELAY_QUEUE_CAP": value},
        )
        assert "RELAY_QUEUE_CAP" in err["message"]


def test_parallel_senders_never_exceed_the_cap(capped):
    """Eight processes send at once to a cap of 3: exactly 3 get in, the rest are
    capacity_exceeded; the count and the insert share one write transaction."""
    relay, alice, bob = capped
    relay.env["RELAY_RATE_LIMIT"] = "0"
    senders = [relay.join(f"s{i}") for i in range(8)]
    procs = [
        relay.popen("send", "--to", "bob", "--id", new_id(), "--json", "x", env=who)
        for who in senders
    ]
    codes = [p.wait(timeout=60) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert sorted(codes) == [0] * 3 + [6] * 5, codes
    assert relay.sql("SELECT count(*) FROM requests WHERE to_peer = 'bob'")[0][0] == 3


def test_the_count_reads_the_partial_index(relay):
    """The count inside send's write transaction reads the index of open requests only
    (requests_open_text, by its leading column), never the table: cheap whatever the
    history holds."""
    relay.join("alice")
    query = (
        "SELECT count(*) FROM (SELECT 1 FROM requests WHERE to_peer = 'bob' AND state IN "
        "('queued', 'delivered', 'acknowledged') LIMIT 1000) AS open_requests"
    )
    if relay.url:
        # a tiny table: with sequential scans discouraged, does the index apply at all?
        # (The index by recipient and time applies too, at the same cost on a tiny table,
        # and the planner's pick between them follows its statistics: it is left out, in a
        # transaction that is never committed.)
        plan = " ".join(
            r[0]
            for r in relay.sql(
                "BEGIN; DROP INDEX requests_to_created; SET LOCAL enable_seqscan = off; "
                "EXPLAIN " + query
            )
        )
    else:
        plan = " ".join(str(r) for r in relay.sql("EXPLAIN QUERY PLAN " + query))
    assert "requests_open_text" in plan, plan


def test_the_refusal_says_how_many_open_requests_there_are_not_the_cap(capped):
    """The cap is the calling process's (RELAY_QUEUE_CAP): a sender with a smaller cap than
    the queue already holds is told the count relay found, and the cap it applied."""
    relay, alice, _ = capped
    for _ in range(3):
        assert relay.send(alice, "bob", "x", request_id=new_id()).code == 0
    relay.env["RELAY_QUEUE_CAP"] = "2"
    err = refused(
        relay, "capacity_exceeded", "send", "--to", "bob", "--id", new_id(), "x", env=alice
    )
    assert "'bob' has 3 open requests" in err["message"] and "cap 2" in err["message"]
