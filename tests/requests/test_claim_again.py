"""`relay claim` after a lost answer (design.md §6): `claim --again` answers the request the
session claimed and has not acknowledged, with ``duplicate: true``, never a new one, so a
claim whose answer was lost leaves nothing delivered unseen; a plain claim always takes a
new request, so claimers sharing a session never get the same one."""

from __future__ import annotations

from conftest import new_id, refused

from testsupport.commit_faults import answer_lost_after_commit


def _two_queued(relay, alice):
    first, second = new_id(), new_id()
    assert relay.send(alice, "bob", "first", request_id=first).code == 0
    assert relay.send(alice, "bob", "second", request_id=second).code == 0
    return first, second


def test_a_claim_retried_after_a_lost_answer_gets_the_same_request(world):
    relay, alice, bob = world
    first, second = _two_queued(relay, alice)
    lost = relay("claim", "--json", env=bob)  # its answer never reached the agent
    assert lost.code == 0 and lost.json["id"] == first
    again = relay("claim", "--again", "--json", env=bob)
    assert again.code == 0, again.err
    assert again.json["id"] == first and again.json["duplicate"] is True
    assert again.json["text"] == "first" and again.json["state"] == "delivered"
    assert relay("show", second, "--json").json["state"] == "queued"
    # the human form says so too (piped, an agent's: the id by its 12-character prefix)
    human = relay("claim", "--again", env=bob)
    assert human.code == 0 and "claimed it already" in human.out
    assert f"relay ack {first[:12]}" in human.out
    # acked, --again says so (never that the claim took nothing); a claim takes the next
    assert relay("ack", first, env=bob).code == 0
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    assert first in err["message"] and "took nothing" not in err["message"]
    nxt = relay("claim", "--json", env=bob)
    assert nxt.json["id"] == second and nxt.json["duplicate"] is False


def test_a_plain_claim_always_takes_a_new_request(world):
    """Claimers that share one session (an agent and its subagents) never get the same
    request: only --again answers the one held."""
    relay, alice, bob = world
    first, second = _two_queued(relay, alice)
    assert relay("claim", "--json", env=bob).json["id"] == first
    r = relay("claim", "--json", env=bob)
    assert r.json["id"] == second and r.json["duplicate"] is False
    refused(relay, "nothing_to_claim", "claim", env=bob)


def test_again_goes_with_neither_id_nor_wait(world):
    relay, alice, bob = world
    first, _ = _two_queued(relay, alice)
    refused(relay, "usage_error", "claim", "--again", "--id", first, env=bob)
    refused(relay, "usage_error", "claim", "--again", "--wait", "5s", env=bob)


def test_a_claim_whose_commit_answer_was_cut_is_answered_from_what_is_stored(world, monkeypatch):
    relay, alice, bob = world
    first, second = _two_queued(relay, alice)
    with answer_lost_after_commit(monkeypatch) as cut:
        r = relay("claim", "--json", env=bob)
    assert cut == [1] and r.code == 75 and r.error["code"] == "database_unavailable"
    retry = relay("claim", "--again", "--json", env=bob)
    assert retry.code == 0 and retry.json["id"] == first and retry.json["duplicate"] is True
    assert relay("show", second, "--json").json["state"] == "queued"
    assert [e["to_state"] for e in relay("show", first, "--events", "--json").json["events"]] == [
        "queued",
        "delivered",
    ]  # one delivery, not two


def test_another_session_of_the_same_name_takes_the_next_request(world):
    relay, alice, bob = world
    first, second = _two_queued(relay, alice)
    assert relay("claim", "--json", env=bob).json["id"] == first
    other = relay.join("bob", "--lease", "24h")  # supersedes: first is delivery_unknown
    r = relay("claim", "--json", env=other)
    assert r.json["id"] == second and r.json["duplicate"] is False


def test_claim_id_of_a_request_the_session_holds_stays_a_state_conflict(world):
    relay, alice, bob = world
    first, _ = _two_queued(relay, alice)
    assert relay("claim", "--json", env=bob).json["id"] == first
    err = refused(relay, "state_conflict", "claim", "--id", first, env=bob)
    assert f"relay show {first}" in err["hint"]


def test_an_acknowledged_request_is_not_returned_again(world):
    relay, alice, bob = world
    first, second = _two_queued(relay, alice)
    relay("claim", env=bob)
    relay("ack", first, env=bob)
    assert relay("claim", "--json", env=bob).json["id"] == second
    relay("ack", second, env=bob)
    refused(relay, "nothing_to_claim", "claim", env=bob)


def test_the_retry_note_fits_an_80_column_terminal(world):
    """The note above a returned request is wrapped between words at 80x24, like every
    sentence relay prints for a person (design.md §7), not cut mid-word by the terminal."""
    from conftest import assert_fits

    relay, alice, bob = world
    first, _ = _two_queued(relay, alice)
    assert relay("claim", "--json", env=bob).json["id"] == first
    _, screen = relay.screen("claim", "--again", env=bob, cols=80, rows=24)
    lines = assert_fits(screen, 80)
    note = " ".join(
        ln.strip() for ln in lines[: lines.index(next(ln for ln in lines if ln.startswith("id ")))]
    )
    assert "claimed it already" in note and "claim --again takes nothing new" in note
