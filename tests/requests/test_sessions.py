"""Sessions (design.md §3): joining, leases and their renewal, superseding, the
session-status rule as every command applies it, and what a send says of waking its
recipient's session (design.md §12)."""

from __future__ import annotations

import time

from conftest import new_id


def _lease(relay, name: str, env: dict | None = None) -> str:
    r = relay("peers", "list", "--json", env=env)
    return next(p["lease_expires_at"] for p in r.json["peers"] if p["name"] == name)


def test_duplicate_send_by_active_session_renews_its_lease(relay):
    """design.md §3: every call of the session that succeeds (exit 0) renews the lease."""
    alice = relay.join("alice", "--lease", "60")
    relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    before = _lease(relay, "alice")
    later = {**alice, "RELAY_TIME_OFFSET": "30"}
    r = relay.send(later, "bob", "x", request_id=rid)
    assert r.code == 0 and r.json["duplicate"] is True
    assert _lease(relay, "alice", env={"RELAY_TIME_OFFSET": "30"}) > before


def test_duplicate_ack_by_claiming_session_renews_its_lease(relay):
    """design.md §3: `ack` is idempotent and exits 0, so it renews like any successful call."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "60")
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    relay("claim", "--json", env=bob)
    assert relay("ack", rid, "--json", env=bob).code == 0
    before = _lease(relay, "bob")
    r = relay("ack", rid, "--json", env={**bob, "RELAY_TIME_OFFSET": "30"})
    assert r.code == 0 and r.json["duplicate"] is True
    assert _lease(relay, "bob", env={"RELAY_TIME_OFFSET": "30"}) > before


def test_ghost_submit_of_another_peers_request_is_superseded_before_not_owner(relay):
    """design.md §6 order: session state (peer_superseded) is checked before ownership."""
    alice = relay.join("alice", "--lease", "1h")
    bob_old = relay.join("bob", "--lease", "1h")
    relay.join("bob", "--lease", "1h")  # supersedes bob_old
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    r = relay("submit", rid, "--json", env=bob_old)
    assert r.error["code"] == "peer_superseded", r.err


def test_superseded_session_can_read_and_retry_but_not_create(world):
    relay, alice, bob = world
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    relay.join("alice")  # a new session of alice supersedes the old one
    retry = relay.send(alice, "bob", "x", request_id=rid)
    assert retry.code == 0 and retry.json["duplicate"] is True
    assert relay("show", rid, "--json", env=alice).code == 0
    assert relay("list", "--json", env=alice).code == 0
    before = relay.snapshot()
    for r in (
        relay.send(alice, "bob", "new work"),
        relay("cancel", rid, "--json", env=alice),
        relay("peers", "heartbeat", "--json", env=alice),
    ):
        assert (r.code, r.error["code"]) == (5, "peer_superseded")
    assert relay.snapshot() == before


def test_a_lapsed_token_with_a_newer_session_is_peer_superseded(relay):
    old = relay.join("alice", "--lease", "10s")
    relay.join("bob", "--lease", "24h")
    relay.env["RELAY_TIME_OFFSET"] = "20"
    relay.join("alice")
    r = relay.send(old, "bob", "x")
    assert r.error["code"] == "peer_superseded"


def test_heartbeat_renews_and_read_only_commands_do_not(world):
    relay, alice, bob = world
    short = relay.join("carol", "--lease", "30s")
    lease0 = relay("peers", "list", "--json").json["peers"][2]["lease_expires_at"]
    relay.env["RELAY_TIME_OFFSET"] = "10"
    relay("list", env=short)
    relay("inbox", env=short)
    assert relay("peers", "list", "--json").json["peers"][2]["lease_expires_at"] == lease0
    hb = relay("peers", "heartbeat", "--json", env=short)
    assert hb.code == 0 and hb.json["lease_expires_at"] > lease0


def test_successful_writes_renew_the_callers_lease(world):
    relay, alice, bob = world
    carol = relay.join("carol", "--lease", "30s")
    relay.env["RELAY_TIME_OFFSET"] = "20"
    assert relay.send(carol, "bob", "x").code == 0
    relay.env["RELAY_TIME_OFFSET"] = "40"
    assert relay("peers", "heartbeat", env=carol).code == 0


def test_token_is_printed_once_and_stored_only_as_sha256(world):
    relay, alice, bob = world
    snap = relay.snapshot()
    flat = repr(snap)
    assert alice["RELAY_SESSION"] not in flat
    import hashlib

    assert hashlib.sha256(alice["RELAY_SESSION"].encode()).hexdigest() in flat


def test_join_shell_prints_export_lines(relay):
    r = relay("peers", "join", "alice", "--shell")
    lines = r.out.splitlines()
    assert lines[0] == "export RELAY_PEER=alice"
    assert lines[1].startswith("export RELAY_SESSION=rly_")


def test_wakeup_reports_polling_while_a_session_waits_in_claim(world):
    relay, alice, bob = world
    waiter = relay.popen("claim", "--wait", "20s", "--json", env=bob)
    deadline = time.monotonic() + 10
    seen = None
    while time.monotonic() < deadline:
        peers = relay("peers", "list", "--json").json["peers"]
        seen = {p["name"]: p["wakeup"] for p in peers}["bob"]
        if seen == "polling":
            break
        time.sleep(0.2)
    r = relay.send(alice, "bob", "x")
    waiter.communicate(timeout=20)
    assert seen == "polling"
    assert r.json["wakeup"] in ("polling", "not_configured")


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
