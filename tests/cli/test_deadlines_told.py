"""Deadlines a person can trust (design.md §3): a `human` peer's session lasts an hour
without --lease (its shell sends no heartbeat while the person reads), and claim tells the
earlier of the claim's and the session's deadlines, saying so when --lease outlives the
session."""

from __future__ import annotations

import re

from conftest import new_id

from relay_cli.core import clock


def _lease_s(joined: dict, at: int) -> float:
    return (clock.parse_iso(joined["lease_expires_at"]) - at) / 1000


def test_a_human_peer_gets_an_hour_of_session_lease_and_others_45_s(relay):
    at = clock.Clock().now_ms()
    human = relay("peers", "join", "pat", "--kind", "human", "--json").json
    assert 3600 <= _lease_s(human, at) <= 3610
    agent = relay("peers", "join", "bob", "--json").json
    assert 45 <= _lease_s(agent, at) <= 55
    # --lease still wins
    short = relay("peers", "join", "pam", "--kind", "human", "--lease", "2m", "--json").json
    assert 120 <= _lease_s(short, at) <= 130


def test_claim_tells_the_session_deadline_when_it_comes_before_the_claims(relay):
    """bob's session lease (45 s) ends before a claim lease of 1 h: the request becomes
    delivery_unknown when the session lapses, so that is the time to ack by."""
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob")
    rid = new_id()
    assert relay.send(alice, "bob", "work", request_id=rid).code == 0
    _, screen = relay.screen("claim", "--id", rid, "--lease", "1h", cols=200, rows=50, env=bob)
    said = " ".join(screen.split())
    # the session's 45 s, not the claim's hour, and the --lease that outlives it
    ack_by = re.search(r"ack by in (\d+)s \(\d\d:\d\d\): (.*?) then: relay reply", said)
    assert ack_by and 40 <= int(ack_by[1]) <= 45, said
    assert ack_by[2].startswith("this session's lease ends then, before the claim's (--lease in 1h")
    assert "becomes delivery_unknown" in ack_by[2] and "`relay peers heartbeat`" in ack_by[2]


def test_claim_tells_the_claim_deadline_when_the_session_outlives_it(relay):
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "work", request_id=rid).code == 0
    _, screen = relay.screen("claim", "--id", rid, cols=200, rows=50, env=bob)
    said = " ".join(screen.split())
    assert "ack by" in said and "the claim lease ends then" in said
    assert "session's lease" not in said
