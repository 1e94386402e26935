"""`relay notices` (design.md §12): each finished request is reported to its sender once."""

from __future__ import annotations

from conftest import new_id, plain

NOTICE_KEYS = {"id", "to", "state", "reason", "created_at", "finished_at"}


def finish_two(relay, alice, bob) -> tuple[str, str]:
    done, declined = new_id(), new_id()
    relay.send(alice, "bob", "please summarise the log", request_id=done)
    relay.send(alice, "bob", "please delete prod", request_id=declined)
    relay("claim", env=bob)
    relay("reply", done, "SECRET-REPLY-BODY", env=bob)
    relay("claim", env=bob)
    relay("reject", declined, "--reason", "not without the user", env=bob)
    return done, declined


def test_each_finished_request_is_reported_once(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    done, declined = finish_two(relay, alice, bob)
    first = relay("notices", "--json", env=alice)
    assert first.code == 0, first.err
    notices = first.json["notices"]
    assert [n["id"] for n in notices] == [done, declined]
    assert [(n["state"], n["reason"]) for n in notices] == [
        ("completed", None),
        ("rejected", "rejected_by_recipient"),
    ]
    assert all(set(n) == NOTICE_KEYS for n in notices)  # no bodies
    assert relay("notices", "--json", env=alice).json["notices"] == []
    # A later outcome is reported on the next call, and only that one.
    third = new_id()
    relay.send(alice, "bob", request_id=third)
    relay("cancel", third, env=alice)
    assert [n["id"] for n in relay("notices", "--json", env=alice).json["notices"]] == [third]


def test_human_output_has_no_bodies(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    done, declined = finish_two(relay, alice, bob)
    r = relay("notices", env=alice)
    assert r.code == 0
    assert done in r.out and declined in r.out and "rejected_by_recipient" in r.out
    assert "SECRET-REPLY-BODY" not in r.out and "not without the user" not in r.out
    assert "not user approval" in r.out
    assert "no new notices" in relay("notices", env=alice).out


def test_requests_that_expired_are_reported_after_the_ttl(relay):
    alice = relay.join("alice", "--lease", "24h")
    relay("peers", "add", "bob")
    rid = new_id()
    relay.send(alice, "bob", "x", "--ttl", "30s", request_id=rid)
    assert relay("notices", "--json", env=alice).json["notices"] == []
    later = relay("notices", "--json", env={**alice, "RELAY_TIME_OFFSET": "31"}).json
    assert [(n["id"], n["state"], n["reason"]) for n in later["notices"]] == [
        (rid, "expired", "request_expired")
    ]


def test_delivery_unknown_notice_tells_to_ask_the_person(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    rid = new_id()
    relay.send(alice, "bob", request_id=rid)
    relay("claim", env=bob)
    relay("peers", "leave", env=bob)
    r = relay("notices", env=alice)
    assert rid in r.out and "delivery_unknown" in r.out and "ask the person" in r.out
    # nobody knows whether its work finished: the table does not say it did (design.md §14)
    assert r.out.splitlines()[0].split() == ["id", "to", "state", "reason", "since"]
    assert "finished" not in relay("notices", "--help").out.split("\n\n")[1]


def test_a_person_without_a_session_may_read_their_notices(relay):
    bob = relay.join("bob")
    rid = new_id()
    assert relay("send", "--to", "bob", "--id", rid, "--as", "ops", "-", input="x").code == 0
    relay("claim", env=bob)
    relay("reply", rid, "ok", env=bob)
    r = relay("notices", "--as", "ops", "--json")
    assert r.code == 0 and [n["id"] for n in r.json["notices"]] == [rid]
    # a name with no session and no peer row: --again shows the latest batch told to it
    assert relay("notices", "--again", "--as", "ops", "--json").json == r.json


def test_refusals_change_nothing(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    finish_two(relay, alice, bob)
    before = relay.snapshot()
    r = relay("notices", "--json", env={"RELAY_PEER": None, "RELAY_SESSION": None})
    assert (r.code, r.error["code"]) == (5, "no_identity")
    r = relay("notices", "--json", env={"RELAY_PEER": "alice", "RELAY_SESSION": None})
    assert (r.code, r.error["code"]) == (5, "session_required")
    assert relay.snapshot() == before
    relay.join("alice")  # supersedes the session in `alice`
    before = relay.snapshot()
    r = relay("notices", "--json", env=alice)
    assert (r.code, r.error["code"]) == (5, "peer_superseded")
    assert relay.snapshot() == before


def test_notices_marks_rows_so_it_renews_the_lease(relay):
    alice = relay.join("alice", "--lease", "30s")
    assert relay("notices", env={**alice, "RELAY_TIME_OFFSET": "20"}).code == 0
    # Renewed at +20 s for 30 s: still alive at +40 s.
    hb = relay("peers", "heartbeat", "--json", env={**alice, "RELAY_TIME_OFFSET": "40"})
    assert hb.code == 0, hb.err


def test_requeued_then_completed_request_is_noticed_again(relay):
    """A delivery_unknown the sender was told about, requeued by a person and then
    completed, must reach the sender (notices) — otherwise it never learns the outcome."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "60")
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    relay("claim", "--json", env=bob)
    relay.env["RELAY_TIME_OFFSET"] = "120"
    first = relay("notices", "--json", env=alice).json["notices"]
    assert [n["state"] for n in first] == ["delivery_unknown"]
    assert relay("resolve", rid, "--outcome", "requeue", "--json", terminal=True).code == 0
    bob2 = relay.join("bob", "--lease", "1h")
    assert relay("claim", "--json", env=bob2).code == 0
    assert relay("reply", rid, "done", "--json", env=bob2).code == 0
    second = relay("notices", "--json", env=alice).json["notices"]
    assert [(n["id"], n["state"]) for n in second] == [(rid, "completed")]


def test_two_notices_whose_ids_share_8_characters_are_told_apart(relay):
    """On a terminal the table shows each id with as many characters as tell it from the
    others shown (design.md §14): one short id for two requests names neither."""
    alice, bob = relay.join("alice"), relay.join("bob")
    first, second = "1a2b3c4d-0000-4000-8000-00000000000a", "1a2b3c4d-9999-4000-8000-00000000000b"
    for rid in (first, second):
        assert relay.send(alice, "bob", f"job {rid}", request_id=rid).code == 0
        relay("claim", "--id", rid, env=bob)
        relay("reply", rid, "done", env=bob)
    out = relay("notices", env={**alice, "FORCE_COLOR": "1", "COLUMNS": "80"}).out
    shown = [line.split()[0] for line in plain(out).splitlines()[1:3]]
    assert shown == ["1a2b3c4d-0", "1a2b3c4d-9"]
