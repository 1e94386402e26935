"""The rest of §3, §4 and §6: drafts, wait, limits, idempotent verbs, identity rules."""

from __future__ import annotations

import time

import pytest
from conftest import at, new_id, refused


# ------------------------------------------------------------------ prepare / submit
def test_prepare_then_submit_queues_once_and_repeats_return_the_receipt(world):
    relay, alice, bob = world
    p = relay("prepare", "--to", "bob", "-", "--json", input="draft body", env=alice)
    assert p.code == 0, p.err
    did = p.json["id"]
    assert set(p.json) == {"id", "prepared_expires_at"}
    assert relay("show", did, "--json").error["code"] == "request_not_found"
    s1 = relay("submit", did, "--json", env=alice)
    assert s1.code == 0, s1.err
    assert set(s1.json) == {
        "id",
        "state",
        "created_at",
        "expires_at",
        "duplicate",
        "recipient_active",
        "wakeup",
    }
    assert (s1.json["state"], s1.json["duplicate"]) == ("queued", False)
    s2 = relay("submit", did, "--json", env=alice)
    assert (s2.json["duplicate"], s2.json["created_at"]) == (True, s1.json["created_at"])
    assert relay("show", did, "--json").json["text"] == "draft body"
    assert len(relay("list", "--json").json["requests"]) == 1


def test_submit_of_unknown_and_expired_drafts_says_what_relay_checked(world):
    """relay looks for a request with the id itself, so its message and its hint agree:
    nothing was queued under it (never "delivery may be unknown" after that look)."""
    relay, alice, bob = world
    r = relay("submit", new_id(), "--json", env=alice)
    assert (r.code, r.error["code"]) == (3, "prepared_not_found")
    assert "no request has it either" in r.error["message"]
    assert "nothing was queued" in r.error["hint"] and "may be" not in r.error["hint"]
    did = relay("prepare", "--to", "bob", "x", "--json", env=alice).json["id"]
    relay.env["RELAY_TIME_OFFSET"] = "3601"
    alice = relay.join("alice")
    before = relay.snapshot()
    r = relay("submit", did, "--json", env=alice)
    assert (r.code, r.error["code"]) == (4, "prepared_expired")
    assert "no request has its id" in r.error["message"]
    assert "may be" not in r.error["hint"] + r.error["message"]
    assert relay.snapshot() == before


def test_submit_by_another_peer_is_not_owner(world):
    relay, alice, bob = world
    did = relay("prepare", "--to", "bob", "x", "--json", env=alice).json["id"]
    carol = relay.join("carol")
    r = relay("submit", did, "--json", env=carol)
    assert r.error["code"] == "not_owner"


def test_at_most_100_open_drafts_per_sender_and_nothing_is_evicted(world):
    relay, alice, bob = world
    for i in range(100):
        assert relay("prepare", "--to", "bob", f"d{i}", "--json", env=alice).code == 0
    before = relay.snapshot()
    r = relay("prepare", "--to", "bob", "one more", "--json", env=alice)
    assert (r.code, r.error["code"]) == (6, "capacity_exceeded")
    # retryable once the oldest draft expires, an hour after it was prepared
    assert r.error["retryable"] is True and 3500 < r.error["retry_after_seconds"] <= 3600
    assert relay.snapshot() == before


def test_drafts_do_not_count_toward_the_rate_limit_but_submits_do(world):
    relay, alice, bob = world
    relay.env["RELAY_RATE_LIMIT"] = "2"
    ids = [
        relay("prepare", "--to", "bob", f"d{i}", "--json", env=alice).json["id"] for i in range(3)
    ]
    assert relay("submit", ids[0], env=alice).code == 0
    assert relay("submit", ids[1], env=alice).code == 0
    r = relay("submit", ids[2], "--json", env=alice)
    assert r.error["code"] == "rate_limited"


# ------------------------------------------------------------------ limits
def test_rate_limit_is_per_sender_retryable_and_duplicates_still_answer(world):
    relay, alice, bob = world
    relay.env["RELAY_RATE_LIMIT"] = "3"
    ids = [new_id() for _ in range(4)]
    for rid in ids[:3]:
        assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    before = relay.snapshot()
    r = relay.send(alice, "bob", "x", request_id=ids[3])
    assert (r.code, r.error["code"], r.error["retryable"]) == (6, "rate_limited", True)
    assert 0 < r.error["retry_after_seconds"] <= 60
    assert relay.snapshot() == before
    assert relay.send(alice, "bob", "x", request_id=ids[0]).json["duplicate"] is True
    assert relay.send(bob, "alice", "x").code == 0  # another sender is not limited
    relay.env["RELAY_TIME_OFFSET"] = "61"
    alice = relay.join("alice")
    assert relay.send(alice, "bob", "x", request_id=ids[3]).code == 0


def test_rate_limit_zero_means_none(world):
    relay, alice, bob = world
    relay.env["RELAY_RATE_LIMIT"] = "0"
    for _ in range(65):
        assert relay.send(alice, "bob", "x").code == 0


def test_in_reply_to_depth_above_8_is_depth_exceeded(world):
    relay, alice, bob = world
    parent = None
    for depth in range(9):
        extra = ["--in-reply-to", parent] if parent else []
        r = relay.send(alice, "bob", f"depth {depth}", *extra)
        assert r.code == 0 and r.json["depth"] == depth, r.err
        parent = r.json["id"]
    before = relay.snapshot()
    r = relay.send(alice, "bob", "too deep", "--in-reply-to", parent)
    assert (r.code, r.error["code"]) == (6, "depth_exceeded")
    assert relay.snapshot() == before


def test_dedupe_comes_before_liveness_and_limits(world):
    relay, alice, bob = world
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    relay("peers", "leave", env=bob)
    relay.env["RELAY_RATE_LIMIT"] = "1"
    again = relay.send(alice, "bob", "x", request_id=rid)
    assert again.code == 0 and again.json["duplicate"] is True
    assert again.json["recipient_active"] is False


# ------------------------------------------------------------------ idempotent verbs
def test_ack_and_reply_are_idempotent_and_a_different_reply_conflicts(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    relay("claim", env=bob)
    assert relay("ack", rid, "--json", env=bob).json["duplicate"] is False
    assert relay("ack", rid, "--json", env=bob).json["duplicate"] is True
    assert relay("reply", rid, "answer", "--json", env=bob).json["duplicate"] is False
    assert relay("reply", rid, "answer", "--json", env=bob).json["duplicate"] is True
    before = relay.snapshot()
    r = relay("reply", rid, "another answer", "--json", env=bob)
    assert (r.code, r.error["code"]) == (4, "reply_conflict")
    assert relay.snapshot() == before


# ------------------------------------------------------------------ wait
@pytest.mark.parametrize(
    "finish,code",
    [
        (("reply", "ok"), 0),
        (("fail", "--reason", "x"), 10),
        (("reject", "--reason", "x"), 10),
    ],
)
def test_wait_exit_codes(world, finish, code):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    relay("claim", env=bob)
    relay(*finish[:1], rid, *finish[1:], env=bob)
    r = relay("wait", rid, "--json", env=alice)
    assert r.code == code and r.json["id"] == rid


def test_wait_on_expired_cancelled_and_unknown(world):
    relay, alice, bob = world
    a = relay.send(alice, "bob", "x").json["id"]
    relay("cancel", a, env=alice)
    assert relay("wait", a, "--json").code == 10
    b = relay.send(alice, "bob", "x", "--ttl", "30s").json["id"]
    c = relay.send(alice, "bob", "y").json["id"]
    relay("claim", "--id", c, "--lease", "10s", env=bob)
    relay.env["RELAY_TIME_OFFSET"] = "31"
    assert relay("wait", b, "--json").json["state"] == "expired"
    assert relay("wait", b).code == 10
    r = relay("wait", c, "--json")
    assert (r.code, r.json["state"]) == (11, "delivery_unknown")


def test_wait_timeout_is_75_with_the_request_and_a_not_a_failure_hint(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    start = time.monotonic()
    r = relay("wait", rid, "--timeout", "1", "--json", env=alice)
    assert time.monotonic() - start < 5
    assert r.code == 75
    assert r.json["state"] == "queued"
    assert r.error["code"] == "timeout" and "not a failure" in r.error["hint"]


def test_wait_zero_checks_once(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    assert relay("wait", rid, "--timeout", "0").code == 75


def test_claim_with_nothing_queued_is_75_nothing_to_claim(world):
    relay, alice, bob = world
    before = relay.snapshot()
    r = relay("claim", "--json", env=bob)
    assert (r.code, r.error["code"], r.error["retryable"]) == (75, "nothing_to_claim", True)
    assert relay.snapshot() == before


def test_claim_is_fifo(world):
    relay, alice, bob = world
    ids = [relay.send(alice, "bob", f"{i}").json["id"] for i in range(3)]
    got = []
    for _ in range(3):  # each acked before the next claim (design.md §6)
        got.append(relay("claim", "--json", env=bob).json["id"])
        assert relay("ack", got[-1], env=bob).code == 0
    assert got == ids


# ------------------------------------------------------------------ sessions


# ------------------------------------------------------------------ list / inbox / sweep
def test_list_filters_limit_and_has_more(world):
    relay, alice, bob = world
    ids = [relay.send(alice, "bob", f"{i}").json["id"] for i in range(5)]
    relay.send(bob, "alice", "back")
    r = relay("list", "--limit", "2", "--json").json
    assert len(r["requests"]) == 2 and r["has_more"] is True
    assert relay("list", "--all", "--json").json["has_more"] is False
    assert len(relay("list", "--to", "bob", "--json").json["requests"]) == 5
    assert len(relay("list", "--from", "bob", "--json").json["requests"]) == 1
    relay("claim", env=bob)
    states = relay("list", "--state", "delivered", "--state", "queued", "--json").json
    assert len(states["requests"]) == 6
    assert [r["id"] for r in relay("list", "--to", "bob", "--json").json["requests"]] == ids[::-1]


def test_inbox_lists_queued_requests_for_me_without_bodies(world):
    relay, alice, bob = world
    relay.send(alice, "bob", "secret body")
    r = relay("inbox", "--json", env=bob)
    assert len(r.json["requests"]) == 1 and "text" not in r.json["requests"][0]
    assert "secret body" not in relay("inbox", env=bob).out


def test_sweep_reports_transitions_by_kind(world):
    relay, alice, bob = world
    relay.send(alice, "bob", "x", "--ttl", "30s")
    relay.send(alice, "bob", "y", "--ttl", "30s")
    relay.env["RELAY_TIME_OFFSET"] = "31"
    # sweep reports what it applied; later commands see nothing due
    r = relay("sweep", "--json")
    assert r.json == {"transitions": {"queued->expired": 2}}
    assert relay("sweep", "--json").json == {"transitions": {}}


def test_prepare_with_an_id_send_used_for_the_same_content_is_a_duplicate(world):
    """`prepare` dedupes as `send` does: the same id and content that `send` queued is that
    request (duplicate, its state), not "used for different content"; nothing changes."""
    relay, alice, bob = world
    rid = new_id()
    assert relay("send", "--to", "bob", "--id", rid, "same", env=alice).code == 0
    before = relay.snapshot()
    r = relay("prepare", "--to", "bob", "--id", rid, "same", "--json", env=alice)
    assert r.code == 0, r.err
    assert r.json == {
        "id": rid,
        "prepared_expires_at": None,
        "duplicate": True,
        "state": "queued",
    }
    assert relay.snapshot()["requests"] == before["requests"]
    assert relay.snapshot()["drafts"] == before["drafts"]
    assert relay("submit", rid, "--json", env=alice).json["duplicate"] is True
    _, screen = relay.screen(
        "prepare", "--to", "bob", "--id", rid, "same", cols=80, rows=24, env=alice
    )
    assert "already sent" in screen and "draft expires" not in screen


def test_prepare_again_after_submit_answers_the_request_not_a_fresh_draft(world):
    relay, alice, bob = world
    did = relay("prepare", "--to", "bob", "work", "--json", env=alice).json["id"]
    assert relay("submit", did, env=alice).code == 0
    r = relay("prepare", "--to", "bob", "--id", did, "work", "--json", env=alice)
    assert r.code == 0, r.err
    assert (r.json["duplicate"], r.json["state"], r.json["prepared_expires_at"]) == (
        True,
        "queued",
        None,
    )


def test_prepare_with_other_content_says_what_differs_as_send_does(world):
    relay, alice, bob = world
    rid = new_id()
    assert relay("send", "--to", "bob", "--id", rid, "same", env=alice).code == 0
    err = refused(
        relay,
        "request_id_conflict",
        "prepare",
        "--to",
        "bob",
        "--id",
        rid,
        "other",
        "--ttl",
        "2h",
        env=alice,
    )
    assert "text, --ttl differ" in err["message"]
    did = relay("prepare", "--to", "bob", "draft", "--json", env=alice).json["id"]
    err = refused(
        relay, "request_id_conflict", "prepare", "--to", "bob", "--id", did, "draft\n", env=alice
    )
    assert "trailing whitespace" in err["message"]


def test_prepare_again_after_the_draft_expired_is_prepared_expired(world):
    """Re-running `prepare --id` (same content) after the draft expired must not answer
    success with a prepared_expires_at in the past (that id could never be submitted): it
    is prepared_expired, as is its submit, and both change nothing."""
    relay, alice, bob = world
    pid = new_id()
    args = ("prepare", "--to", "bob", "--id", pid, "draft")
    assert relay(*args, "--json", env=alice).code == 0
    later = at(3700, alice)
    refused(relay, "prepared_expired", *args, env=later)
    refused(relay, "prepared_expired", "submit", pid, env=later)
