"""Every row of the design.md §5 transition table through the real command, and a refused event
from each state that changes nothing."""

from __future__ import annotations

import pytest

from relay_cli.core.limits import FINAL_STATES, STATES
from relay_cli.requests.states import TRANSITIONS, allowed


def send(relay, alice, *extra, text="do the thing"):
    r = relay.send(alice, "bob", text, *extra)
    assert r.code == 0, r.err
    return r.json["id"]


def claim(relay, bob, rid=None, *extra):
    args = ["claim", "--json", *extra] + (["--id", rid] if rid else [])
    r = relay(*args, env=bob)
    assert r.code == 0, r.err
    return r.json


def show(relay, rid):
    r = relay("show", rid, "--json", "--events")
    assert r.code == 0, r.err
    return r.json


def last_event(relay, rid):
    return show(relay, rid)["events"][-1]


def test_send_creates_queued_with_null_reason(world):
    relay, alice, bob = world
    rid = send(relay, alice)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("queued", None)
    assert obj["events"] == [{**obj["events"][0], "from_state": None, "to_state": "queued"}]
    assert obj["events"][0]["actor"] == "alice"


def test_claim_moves_queued_to_delivered(world):
    relay, alice, bob = world
    rid = send(relay, alice)
    obj = claim(relay, bob)
    assert (obj["id"], obj["state"], obj["reason"], obj["attempts"]) == (rid, "delivered", None, 1)
    assert obj["text"] == "do the thing" and obj["lease_expires_at"]


def test_ttl_passing_expires_a_queued_request(world):
    relay, alice, bob = world
    rid = send(relay, alice, "--ttl", "30s")
    relay.move_clock(31)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("expired", "request_expired")
    assert obj["events"][-1]["actor"] == "relay"


def test_cancel_by_sender_cancels_a_queued_request(world):
    relay, alice, bob = world
    rid = send(relay, alice)
    r = relay("cancel", rid, "--json", env=alice)
    assert r.code == 0, r.err
    assert (r.json["state"], r.json["reason"]) == ("cancelled", "cancelled_by_sender")


def test_ack_by_claiming_session(world):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob)
    r = relay("ack", rid, "--json", env=bob)
    assert r.code == 0 and r.json["state"] == "acknowledged" and r.json["duplicate"] is False


@pytest.mark.parametrize("ack_first", [False, True])
def test_reply_completes_from_delivered_and_acknowledged(world, ack_first):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob)
    if ack_first:
        relay("ack", rid, env=bob)
    r = relay("reply", rid, "done", "--json", env=bob)
    assert r.code == 0, r.err
    assert (r.json["state"], r.json["reason"], r.json["reply"]) == ("completed", None, "done")


@pytest.mark.parametrize(
    "event,state,reason",
    [
        ("fail", "failed", "failed_by_recipient"),
        ("reject", "rejected", "rejected_by_recipient"),
    ],
)
@pytest.mark.parametrize("ack_first", [False, True])
def test_fail_and_reject_by_claiming_session(world, event, state, reason, ack_first):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob)
    if ack_first:
        relay("ack", rid, env=bob)
    r = relay(event, rid, "--reason", "cannot do it", "--json", env=bob)
    assert r.code == 0, r.err
    assert (r.json["state"], r.json["reason"], r.json["detail"]) == (state, reason, "cannot do it")


def test_claim_lease_passing_with_on_lost_unknown_is_delivery_unknown(world):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob, None, "--lease", "10s")
    relay.move_clock(11)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("delivery_unknown", "claim_lease_expired")


def test_claim_lease_passing_with_redeliver_requeues_while_attempts_left(world):
    relay, alice, bob = world
    rid = send(relay, alice, "--on-lost", "redeliver", "--max-attempts", "2")
    claim(relay, bob, None, "--lease", "10s")
    relay.move_clock(11)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"], obj["attempts"]) == ("queued", "redelivered", 1)
    again = claim(relay, bob, None, "--lease", "10s")
    assert again["id"] == rid and again["attempts"] == 2
    relay.move_clock(22)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("failed", "max_attempts_exceeded")


def test_claim_lease_passing_with_no_attempts_left_fails(world):
    relay, alice, bob = world
    rid = send(relay, alice, "--on-lost", "redeliver", "--max-attempts", "1")
    claim(relay, bob, None, "--lease", "10s")
    relay.move_clock(11)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("failed", "max_attempts_exceeded")


@pytest.mark.parametrize("ack_first", [False, True])
def test_claiming_session_lease_lapse_is_recipient_disconnected(relay, ack_first):
    alice = relay.join("alice", "--lease", "24h")
    bob = relay.join("bob", "--lease", "10s")
    rid = send(relay, alice)
    claim(relay, bob, None, "--lease", "1h")
    if ack_first:
        relay("ack", rid, env=bob)
    relay.move_clock(11)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("delivery_unknown", "recipient_disconnected")
    assert obj["events"][-1]["actor"] == "relay"
    # a lapsed lease is swept before any renewal
    r = relay("peers", "heartbeat", "--json", env=bob)
    assert r.code == 5 and r.error["code"] == "lease_expired"


@pytest.mark.parametrize("ack_first", [False, True])
def test_claiming_session_leaving_is_recipient_disconnected(world, ack_first):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob)
    if ack_first:
        relay("ack", rid, env=bob)
    assert relay("peers", "leave", env=bob).code == 0
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("delivery_unknown", "recipient_disconnected")


@pytest.mark.parametrize("ack_first", [False, True])
def test_superseding_the_claiming_session_is_peer_superseded(world, ack_first):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob)
    if ack_first:
        relay("ack", rid, env=bob)
    relay.join("bob")
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("delivery_unknown", "peer_superseded")


def test_reply_within_passing_after_ack_is_delivery_unknown(world):
    relay, alice, bob = world
    rid = send(relay, alice, "--reply-within", "30s")
    claim(relay, bob)
    ack = relay("ack", rid, "--json", env=bob).json
    assert ack["reply_deadline_at"]
    relay.move_clock(31)
    obj = show(relay, rid)
    assert (obj["state"], obj["reason"]) == ("delivery_unknown", "reply_deadline_elapsed")


@pytest.mark.parametrize(
    "outcome,state",
    [
        ("completed", "completed"),
        ("failed", "failed"),
        ("requeue", "queued"),
    ],
)
def test_resolve_settles_delivery_unknown(world, outcome, state):
    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob, None, "--lease", "10s")
    relay.move_clock(11)
    r = relay(
        "resolve", rid, "--outcome", outcome, "--note", "checked the repo", "--json", terminal=True
    )
    assert r.code == 0, r.err
    assert (r.json["state"], r.json["reason"], r.json["detail"]) == (
        state,
        "resolved_by_human",
        "checked the repo",
    )
    assert last_event(relay, rid)["actor"].startswith("person:")
    if outcome == "requeue":
        assert claim(relay, bob)["id"] == rid


def test_resolve_records_the_real_uids_user_whatever_logname_says(world):
    import os
    import pwd

    relay, alice, bob = world
    rid = send(relay, alice)
    claim(relay, bob, None, "--lease", "10s")
    relay.move_clock(11)
    r = relay(
        "resolve",
        rid,
        "--outcome",
        "failed",
        "--json",
        env={"LOGNAME": "ana", "USER": "ana"},
        terminal=True,
    )
    assert r.code == 0, r.err
    assert last_event(relay, rid)["actor"] == f"person:{pwd.getpwuid(os.getuid()).pw_name}"


def test_every_table_row_is_exercised_by_a_test_above():
    # the table is the contract: if a row is added, a test must be added with it
    assert len(TRANSITIONS) == 22
    assert {t.to_state for t in TRANSITIONS} | {"queued"} == set(STATES)


# ------------------------------------------------------------------ refused events
def _in_state(relay, alice, bob, state):
    """Drive a fresh request into ``state``; return its id."""
    rid = send(relay, alice, "--ttl", "30s", "--reply-within", "30s")
    if state == "queued":
        return rid
    if state == "expired":
        relay.move_clock(31)
        show(relay, rid)
        return rid
    if state == "cancelled":
        relay("cancel", rid, env=alice)
        return rid
    claim(relay, bob, rid, "--lease", "10s")
    if state == "delivered":
        return rid
    if state == "delivery_unknown":
        relay.move_clock(11)
        show(relay, rid)
        return rid
    if state == "acknowledged":
        relay("ack", rid, env=bob)
        return rid
    event = {
        "completed": ("reply", "ok"),
        "failed": ("fail", "--reason", "x"),
        "rejected": ("reject", "--reason", "x"),
    }[state]
    assert relay(event[0], rid, *event[1:], env=bob).code == 0
    return rid


REFUSALS = {
    # state: (command args builder, who)
    "queued": (lambda rid: ["resolve", rid, "--outcome", "completed"], None),
    "delivered": (lambda rid: ["cancel", rid], "alice"),
    "acknowledged": (lambda rid: ["cancel", rid], "alice"),
    "completed": (lambda rid: ["fail", rid, "--reason", "late"], "bob"),
    "failed": (lambda rid: ["reply", rid, "late"], "bob"),
    "rejected": (lambda rid: ["ack", rid], "bob"),
    "expired": (lambda rid: ["claim", "--id", rid], "bob"),
    # (a cancel again is answered as a duplicate, design.md §6)
    "cancelled": (lambda rid: ["claim", "--id", rid], "bob"),
    "delivery_unknown": (lambda rid: ["cancel", rid], "alice"),
}


@pytest.mark.parametrize("state", STATES)
def test_an_event_outside_the_table_is_state_conflict_and_changes_nothing(world, state):
    relay, alice, bob = world
    rid = _in_state(relay, alice, bob, state)
    assert show(relay, rid)["state"] == state
    build, who = REFUSALS[state]
    before = relay.snapshot()
    r = relay(
        *build(rid),
        "--json",
        env={"alice": alice, "bob": bob, None: None}[who],
        terminal=who is None,
    )  # resolve: a person at a terminal
    assert (r.code, r.error["code"]) == (4, "state_conflict"), r.err
    assert relay.snapshot() == before
    assert not allowed(state, build(rid)[0]) or state in FINAL_STATES or state == "queued"
