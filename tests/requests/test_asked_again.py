"""A final transition or a notice whose answer was lost (design.md §6, §12): the same
`cancel`, `fail` or `reject` asked again by the same caller is answered from what is
stored (``duplicate: true``, exit 0, nothing changed); another transition stays
`state_conflict`; `notices --again` shows the last notices told, marking nothing."""

from __future__ import annotations

import json

import pytest
from conftest import new_id, refused


def _requests_and_events(relay) -> tuple[list, list]:
    """The rows a retry must leave as they were (a retry renews its caller's lease, as
    `ack` again does, so the sessions table may move)."""
    snap = relay.snapshot()
    return snap["requests"], snap["events"]


def _claimed(relay, alice, bob) -> str:
    rid = new_id()
    assert relay.send(alice, "bob", "do it", request_id=rid).code == 0
    assert relay("claim", "--id", rid, "--json", env=bob).code == 0
    return rid


def test_a_cancel_asked_again_is_a_duplicate_and_changes_nothing(world):
    relay, alice, _ = world
    rid = new_id()
    assert relay.send(alice, "bob", "never mind", request_id=rid).code == 0
    first = relay("cancel", rid, "--json", env=alice)  # its answer never reached the agent
    assert first.code == 0 and first.json["duplicate"] is False, first.err
    before = _requests_and_events(relay)
    again = relay("cancel", rid, "--json", env=alice)
    assert again.code == 0, again.err
    assert again.json["duplicate"] is True and again.json["state"] == "cancelled"
    assert {k: v for k, v in again.json.items() if k != "duplicate"} == {
        k: v for k, v in first.json.items() if k != "duplicate"
    }
    assert _requests_and_events(relay) == before
    human = relay("cancel", rid, env=alice)
    assert human.code == 0 and "duplicate" in human.out


@pytest.mark.parametrize(("verb", "state"), [("fail", "failed"), ("reject", "rejected")])
def test_the_same_fail_or_reject_again_is_a_duplicate(world, verb, state):
    relay, alice, bob = world
    rid = _claimed(relay, alice, bob)
    first = relay(verb, rid, "--reason", "the tests fail on main", "--json", env=bob)
    assert first.code == 0 and first.json["duplicate"] is False, first.err
    before = _requests_and_events(relay)
    again = relay(verb, rid, "--reason", "the tests fail on main", "--json", env=bob)
    assert again.code == 0, again.err
    assert again.json["duplicate"] is True and again.json["state"] == state
    assert again.json["detail"] == "the tests fail on main"
    assert _requests_and_events(relay) == before


@pytest.mark.parametrize("verb", ["fail", "reject"])
def test_another_reason_or_another_transition_stays_state_conflict(world, verb):
    relay, alice, bob = world
    rid = _claimed(relay, alice, bob)
    assert relay(verb, rid, "--reason", "first words", env=bob).code == 0
    refused(relay, "state_conflict", verb, rid, "--reason", "other words", env=bob)
    other = "reject" if verb == "fail" else "fail"
    refused(relay, "state_conflict", other, rid, "--reason", "first words", env=bob)
    refused(relay, "state_conflict", "reply", rid, "done", env=bob)


def test_a_retry_by_another_caller_is_not_a_duplicate(world):
    """Only the caller that made the transition gets its answer again."""
    relay, alice, bob = world
    rid = _claimed(relay, alice, bob)
    assert relay("fail", rid, "--reason", "no", env=bob).code == 0
    refused(relay, "not_owner", "fail", rid, "--reason", "no", env=alice)
    carol = relay.join("carol")
    queued = new_id()
    assert relay.send(alice, "bob", "x", request_id=queued).code == 0
    assert relay("cancel", queued, env=alice).code == 0
    refused(relay, "not_owner", "cancel", queued, env=carol)


def test_a_cancel_of_a_request_that_moved_on_stays_state_conflict(world):
    relay, alice, bob = world
    rid = _claimed(relay, alice, bob)
    refused(relay, "state_conflict", "cancel", rid, env=alice)
    assert relay("fail", rid, "--reason", "no", env=bob).code == 0
    refused(relay, "state_conflict", "cancel", rid, env=alice)


# ------------------------------------------------------------------------ notices
def _finished(relay, alice, bob, n: int) -> list[str]:
    ids = []
    for i in range(n):
        rid = new_id()
        assert relay.send(alice, "bob", f"job {i}", request_id=rid).code == 0
        assert relay("claim", "--id", rid, env=bob).code == 0
        assert relay("reply", rid, "done", env=bob).code == 0
        ids.append(rid)
    return ids


def test_notices_whose_answer_was_lost_are_shown_again(world):
    relay, alice, bob = world
    done = _finished(relay, alice, bob, 2)
    lost = relay("notices", "--json", env=alice)  # its answer never reached the agent
    assert [n["id"] for n in lost.json["notices"]] == done and lost.json["batch"]
    before = _requests_and_events(relay)
    again = relay("notices", "--again", "--json", env=alice)
    assert again.code == 0, again.err
    assert again.json == lost.json  # the same batch, its id and time
    assert _requests_and_events(relay) == before  # marks nothing
    assert relay("notices", "--again", "--json", env=alice).json == lost.json
    human = relay("notices", "--again", env=alice)
    assert human.code == 0 and all(rid[:8] in human.out for rid in done)
    assert lost.json["batch"] in human.out
    later_human = _finished(relay, alice, bob, 1)
    told = relay("notices", env=alice).out
    assert later_human[0] in told and "notices --again shows it again" in told
    # a later call is the latest: --again shows its batch
    later = _finished(relay, alice, bob, 1)
    assert [n["id"] for n in relay("notices", "--json", env=alice).json["notices"]] == later
    again = relay("notices", "--again", "--json", env=alice).json["notices"]
    assert [n["id"] for n in again] == later


def test_notices_again_is_the_lost_calls_batch_even_after_the_hook_or_an_empty_call(world):
    """Before: --again showed whatever was marked seen last by this peer: after a lost
    call, the prompt hook's batch (it reads notices too), and after a lost call that
    found nothing, an older batch as the last one told. A batch is tied to its call."""
    relay, alice, bob = world
    first = _finished(relay, alice, bob, 1)
    assert [n["id"] for n in relay("notices", "--json", env=alice).json["notices"]] == first
    # a lost call that told nothing: --again says it told nothing, not the older batch
    empty = relay("notices", "--json", env=alice).json
    assert empty["notices"] == [] and empty["batch"]
    again = relay("notices", "--again", "--json", env=alice).json
    assert again == empty
    human = relay("notices", "--again", env=alice).out
    assert empty["batch"] in human and first[0][:8] not in human
    # a lost call, then the prompt hook tells what finished since: --again is the call's
    lost_ids = _finished(relay, alice, bob, 1)
    lost = relay("notices", "--json", env=alice).json
    assert [n["id"] for n in lost["notices"]] == lost_ids
    hook_ids = _finished(relay, alice, bob, 1)
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "hi"}
    r = relay("hook", "claude", input=json.dumps(event), env=alice)
    assert r.code == 0 and hook_ids[0][:12] in r.out  # the hook told it (by its prefix)
    assert relay("notices", "--again", "--json", env=alice).json == lost
    # another session of the same peer keeps its own latest batch
    other = relay.join("alice", "--lease", "24h")
    assert relay("notices", "--again", "--json", env=other).json == {
        "notices": [],
        "batch": None,
        "told_at": None,
    }


def test_notices_again_before_any_notice_is_empty(world):
    relay, alice, _ = world
    assert relay("notices", "--again", "--json", env=alice).json == {
        "notices": [],
        "batch": None,
        "told_at": None,
    }
    assert "no notices call of yours is stored" in relay("notices", "--again", env=alice).out


# -------------------------------------------------------------------------- inbox
def test_the_inbox_is_paged_and_says_how_many_more_are_queued(world):
    """design.md §6: 50 rows by default, the oldest first; has_more and more say the rest
    (a queue can be past the cap: a cap lowered later, or 0)."""
    relay, alice, bob = world
    ids = [new_id() for _ in range(53)]
    for rid in ids:
        r = relay("send", "--to", "bob", "--id", rid, "--json", "x", env=alice)
        assert r.code == 0, r.err
    page = relay("inbox", "--json", env=bob).json
    assert [r["id"] for r in page["requests"]] == ids[:50]
    assert (page["has_more"], page["more"]) == (True, 3)
    small = relay("inbox", "--limit", "5", "--json", env=bob).json
    assert [r["id"] for r in small["requests"]] == ids[:5]
    assert (small["has_more"], small["more"]) == (True, 48)
    whole = relay("inbox", "--all", "--json", env=bob).json
    assert len(whole["requests"]) == 53 and (whole["has_more"], whole["more"]) == (False, 0)
    exact = relay("inbox", "--limit", "53", "--json", env=bob).json
    assert (exact["has_more"], exact["more"]) == (False, 0)
    human = relay("inbox", "--limit", "5", env=bob)
    assert human.code == 0 and "48 more queued" in human.out
    assert "48 more" not in relay("inbox", "--all", env=bob).out
