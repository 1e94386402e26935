"""One public object per entity (design.md §7): every command that shows a request, a
peer, a session, a ledger entry or a doctor check prints exactly the keys of that
entity's object as the library builds it, in its order, plus the keys the command
documents beside it (``duplicate``, ``recipient_active``, ``wakeup``, ``replayed``, …)."""

from __future__ import annotations

import json

from conftest import new_id

from relay_cli.core import clock
from relay_cli.ledger import entries
from relay_cli.operate.doctor import Check
from relay_cli.requests import notices, objects, peers, sending

REQUEST = objects.request_fields()["always"]
SENT = [*REQUEST, "duplicate", "recipient_active", "wakeup"]


def _library(relay, build):
    """What the library builds, on this test's database (either backend)."""
    store = relay.open_store()
    try:
        with store.transaction(write=False):
            return build(store, clock.Clock().now_ms())
    finally:
        store.close()


def _keys(doc) -> list[str]:
    return list(doc)


def test_every_command_that_shows_a_request_prints_the_request_object(relay):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    sent = relay.send(alice, "bob", "do it", request_id=rid)
    assert _keys(sent.json) == SENT
    assert _keys(relay.send(alice, "bob", "do it", request_id=rid).json) == SENT  # a retry
    assert [_keys(r) for r in relay("list", "--json").json["requests"]] == [REQUEST]
    assert [_keys(r) for r in relay("inbox", "--json", env=bob).json["requests"]] == [REQUEST]
    assert _keys(relay("claim", "--json", env=bob).json) == [
        *REQUEST,
        "text",
        "duplicate",
        "claimer_known",
        "held_unacked",
    ]
    assert _keys(relay("ack", rid, "--json", env=bob).json) == [*REQUEST, "duplicate"]
    replied = relay("reply", rid, "done", "--json", env=bob)
    assert _keys(replied.json) == [*REQUEST, "reply", "duplicate"]
    assert _keys(relay("show", rid, "--json").json) == [*REQUEST, "text", "reply"]
    shown = relay("show", rid, "--events", "--json").json
    assert _keys(shown) == [*REQUEST, "text", "reply", "events"]
    assert _keys(relay("wait", rid, "--json", env=alice).json) == [*REQUEST, "reply"]
    exported = relay("export").out.splitlines()
    assert [_keys(json.loads(line)) for line in exported] == [REQUEST]
    found = relay("notices", "--json", env=alice).json["notices"]
    assert [_keys(n) for n in found] == [list(notices.NOTICE_KEYS)]
    # the library's own object for the stored row, key for key
    built = _library(relay, lambda store, now: objects.request_object(store.get_request(rid)))
    assert _keys(built) == REQUEST

    for verb in ("cancel", "fail", "reject"):
        other = new_id()
        assert relay.send(alice, "bob", f"{verb} me", request_id=other).code == 0
        if verb == "cancel":
            r = relay("cancel", other, "--json", env=alice)
        else:
            assert relay("claim", "--id", other, "--json", env=bob).code == 0
            r = relay(verb, other, "--reason", "no", "--json", env=bob)
        assert _keys(r.json) == [*REQUEST, "duplicate"], verb
    assert relay.send(alice, "bob", "open").code == 0
    watched = relay("watch", "--json").json
    assert [_keys(r) for r in watched["open"]["queued"]] == [REQUEST]


def test_submit_prints_the_receipt_of_the_request_send_prints(relay):
    """`submit --json` is the receipt (design.md §7): the keys ``RECEIPT_KEYS`` of the
    object `send --json` prints, with the same values."""
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    draft = relay("prepare", "--to", "bob", "-", "--json", input="work", env=alice).json
    assert _keys(draft) == ["id", "prepared_expires_at"]
    receipt = relay("submit", draft["id"], "--json", env=alice).json
    assert _keys(receipt) == list(sending.RECEIPT_KEYS)
    again = relay("submit", draft["id"], "--json", env=alice).json
    sent = relay("send", "--to", "bob", "--id", draft["id"], "--json", "-", input="work", env=alice)
    assert sent.code == 0 and sent.json["duplicate"] is True
    assert again == {k: sent.json[k] for k in sending.RECEIPT_KEYS}


def test_every_command_that_shows_a_peer_prints_the_peer_object(relay):
    alice = relay.join("alice", "--lease", "1h")
    peer = _keys(_library(relay, lambda store, now: peers.peer_object(store, "alice", now)))
    assert peer == [
        "name",
        "kind",
        "active",
        "session_id",
        "lease_expires_at",
        "last_seen_at",
        "wakeup",
        # what its newest session's hooks last showed (design.md §19)
        "activity",
        "activity_since",
        "activity_cause",
        "activity_detail",
        "last_event_at",
    ]
    assert _keys(relay("peers", "add", "bob", "--json").json) == peer
    assert _keys(relay("peers", "heartbeat", "--json", env=alice).json) == peer
    assert [_keys(p) for p in relay("peers", "list", "--json").json["peers"]] == [peer, peer]
    assert [_keys(p) for p in relay("watch", "--json").json["peers"]] == [peer, peer]
    # doctor: the peer object of each peer with a live session, and its lease left
    active = relay("doctor", "--json").json["active_peers"]
    assert [_keys(p) for p in active] == [[*peer, "lease_left_seconds"]]
    assert _keys(relay("peers", "leave", "--json", env=alice).json) == peer


def test_peers_join_prints_the_session_object(relay):
    joined = relay("peers", "join", "alice", "--json").json
    assert _keys(joined) == ["peer", "kind", "session_id", "token", "lease_expires_at"]
    assert _keys(peers.session_object("a", "other", "s", "t", 0)) == _keys(joined)


def test_every_command_that_shows_a_ledger_entry_prints_the_entry_object(relay):
    ran = relay("once", "--key", "k", "--json", "--", "true").json
    entry = _keys(
        _library(relay, lambda store, now: entries.entry_object(store.get_ledger("k"), now))
    )
    full = [*entry, "stdout", "stdout_truncated", "stderr", "stderr_truncated"]
    assert _keys(ran) == [*full, "replayed"]
    assert _keys(relay("once", "--key", "k", "--json", "--", "true").json) == [*full, "replayed"]
    assert _keys(relay("ledger", "show", "k", "--json").json) == full
    assert [_keys(e) for e in relay("ledger", "list", "--json").json["entries"]] == [entry]
    resolved = relay("ledger", "resolve", "k", "--outcome", "forget", "--json")
    assert _keys(resolved.json) == full
    waiting = relay("once", "--key", "w", "--approve", "--timeout", "0", "--json", "--", "true")
    assert waiting.code == 75 and _keys(waiting.json) == [*full, "replayed"]
    assert [_keys(e) for e in relay("watch", "--json").json["awaiting_approval"]] == [entry]
    denied = relay.at_terminal("deny", "w", "--json")
    assert denied.returncode == 0, denied.stderr
    assert _keys(json.loads(denied.stdout)) == entry
    refused = relay("once", "--key", "w", "--json", "--", "true")
    assert refused.error["code"] == "denied" and _keys(refused.json) == [*entry, "replayed"]


def test_approve_prints_the_entry_object(relay):
    assert relay("once", "--key", "a", "--approve", "--timeout", "0", "--", "true").code == 75
    approved = relay.at_terminal("approve", "a", "--yes", "--json")
    assert approved.returncode == 0, approved.stderr
    entry = _keys(
        _library(relay, lambda store, now: entries.entry_object(store.get_ledger("a"), now))
    )
    assert _keys(json.loads(approved.stdout)) == entry


def test_every_doctor_check_prints_the_check_object(relay):
    relay.join("alice")
    check = _keys(Check("x", "ok", "fine").to_json())
    assert check == ["name", "status", "detail", "group", "fix"]
    report = relay("doctor", "--json").json
    assert report["checks"] and all(_keys(c) == check for c in report["checks"])
