"""A claim's own recovery (design.md §6): a claim attempt id the caller chooses is stored
with the claim, so a retry of that attempt is answered from what is stored and nobody else
gets anything of it; `claim --again` says what became of the request a claim took in
every state, never that the claim took nothing when it took something; a plain claim
names the requests its session still holds unacknowledged."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import new_id, refused

from testsupport.commit_faults import answer_lost_after_commit

CLAIM_LEASE_S = 120


def _queue(relay, alice, n, *extra):
    ids = []
    for i in range(n):
        rid = new_id()
        assert relay.send(alice, "bob", f"job {i}", *extra, request_id=rid).code == 0
        ids.append(rid)
    return ids


# ------------------------------------------------------------------ the attempt id
def test_a_retry_of_the_same_attempt_is_answered_from_what_is_stored(world):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    attempt = new_id()
    lost = relay("claim", "--attempt", attempt, "--json", env=bob)  # never read
    assert lost.code == 0, lost.err
    assert lost.json["id"] == first and lost.json["duplicate"] is False
    for retry in (["claim", "--attempt", attempt], ["claim", "--again", "--attempt", attempt]):
        r = relay(*retry, "--json", env=bob)
        assert r.code == 0, r.err
        assert r.json["id"] == first and r.json["duplicate"] is True
        assert r.json["text"] == "job 0" and r.json["state"] == "delivered"
    assert relay("show", second, "--json").json["state"] == "queued"
    # acked, the retry still answers it: this claim took it and this session holds it
    assert relay("ack", first, env=bob).code == 0
    r = relay("claim", "--attempt", attempt, "--json", env=bob)
    assert r.json["id"] == first and r.json["state"] == "acknowledged" and r.json["duplicate"]
    human = relay("claim", "--attempt", attempt, env=bob)
    assert human.code == 0 and "this claim took it already" in human.out


def test_a_claim_attempt_whose_commit_answer_was_cut_is_answered_on_retry(world, monkeypatch):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    attempt = new_id()
    with answer_lost_after_commit(monkeypatch) as cut:
        r = relay("claim", "--attempt", attempt, "--json", env=bob)
    assert cut == [1] and r.code == 75
    retry = relay("claim", "--attempt", attempt, "--json", env=bob)
    assert retry.code == 0 and retry.json["id"] == first and retry.json["duplicate"] is True
    assert relay("show", second, "--json").json["state"] == "queued"


def test_an_attempt_that_took_nothing_says_so_and_changes_nothing(world):
    relay, alice, bob = world
    _queue(relay, alice, 1)
    attempt = new_id()
    err = refused(relay, "nothing_to_claim", "claim", "--again", "--attempt", attempt, env=bob)
    assert "took nothing" in err["message"]
    assert f"relay claim --attempt {attempt}" in err["hint"]
    assert "no queued request" not in err["message"]


def test_an_attempt_id_is_validated_as_a_request_id_is(world):
    relay, alice, bob = world
    _queue(relay, alice, 1)
    for bad in ("nope", "1a2b3c4d", "00000000-0000-0000-0000-000000000000", "12345678-1234"):
        refused(relay, "invalid_id", "claim", "--attempt", bad, env=bob)
    refused(
        relay, "usage_error", "claim", "--again", "--attempt", new_id(), "--wait", "5s", env=bob
    )


def test_another_peer_gets_nothing_of_an_attempt(world):
    relay, alice, bob = world
    _queue(relay, alice, 1)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).code == 0
    carol = relay.join("carol", "--lease", "24h")
    err = refused(relay, "request_id_conflict", "claim", "--attempt", attempt, env=carol)
    assert "job 0" not in json.dumps(err)


def test_the_same_attempt_with_another_id_is_a_conflict(world):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == first
    refused(relay, "request_id_conflict", "claim", "--attempt", attempt, "--id", second, env=bob)


# ------------------------------------------- several claimers share one session
ATTEMPT = r"""
import json, subprocess, sys
env, attempt = json.loads(sys.argv[1]), sys.argv[2]
args = [sys.executable, "-m", "relay_cli", "claim", "--json"]
if attempt != "-":
    args += ["--attempt", attempt]
p = subprocess.run(args, capture_output=True, env=env)
print(json.dumps({"code": p.returncode, "out": p.stdout.decode(), "err": p.stderr.decode()}))
"""


def _in_parallel(relay, env, attempts):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ATTEMPT, json.dumps(relay._env(env)), a],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for a in attempts
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_parallel_claimers_of_one_session_each_recover_only_their_own_claim(world):
    """An agent and its subagents share one session; every answer was lost. Each retry
    of an attempt, in parallel, returns the request that attempt took, and a claimer
    whose attempt took nothing gets none of the others'."""
    relay, alice, bob = world
    sent = _queue(relay, alice, 4)
    attempts = [new_id() for _ in range(4)]
    first = _in_parallel(relay, bob, attempts)
    took = {}
    for a, r in zip(attempts, first, strict=True):
        assert r["code"] == 0, r["err"]
        took[a] = json.loads(r["out"])["id"]
    assert sorted(took.values()) == sorted(sent)
    again = _in_parallel(relay, bob, attempts)
    for a, r in zip(attempts, again, strict=True):
        assert r["code"] == 0, r["err"]
        got = json.loads(r["out"])
        assert got["id"] == took[a] and got["duplicate"] is True
    # a fifth claimer whose claim took nothing: --again with its attempt shows nobody's
    stranger = new_id()
    r = relay("claim", "--again", "--attempt", stranger, "--json", env=bob)
    assert r.code == 75 and r.error["code"] == "nothing_to_claim" and r.out == ""
    assert not any(f"job {i}" in r.err for i in range(4))


def test_again_without_an_attempt_shows_no_other_claimers_request(world):
    """Before: `claim --again` returned the oldest request the session held, which another
    claimer of the session had taken. With several unacked claims relay cannot know
    whose is whose: it shows none, lists the ids and says how to recover."""
    relay, alice, bob = world
    sent = _queue(relay, alice, 3)
    results = _in_parallel(relay, bob, ["-", "-", "-"])
    assert all(r["code"] == 0 for r in results), results
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    assert "cannot tell which claim was yours" in err["message"]
    for rid in sent:
        assert rid in err["message"]
    # (a claim takes a request: the command is named only with every word known)
    assert "claim with --attempt" in err["hint"] and "`relay id`" in err["hint"]
    assert not any(f"job {i}" in json.dumps(err) for i in range(3))


# ------------------------------------------------------ --again in every state
def test_again_after_the_claim_lease_ran_out_says_what_became_of_it(world):
    relay, alice, bob = world
    first, *_ = _queue(relay, alice, 3)
    assert relay("claim", "--json", env=bob).json["id"] == first
    relay.move_clock(CLAIM_LEASE_S + 5)
    assert relay("sweep").code == 0
    for args in (["claim", "--again"], ["claim", "--again", "--json"]):
        r = relay(*args, env=bob)
        assert r.code == 4, r.err
        assert first in r.err and "delivery_unknown" in r.err and "claim_lease_expired" in r.err
        assert "took nothing" not in r.err and "no queued request" not in r.err
        assert f"relay resolve {first} --outcome requeue" in r.err.replace("\n", " ")
        # not "final": its hint offers a requeue, which a person may still do
        assert "final" not in r.err and "only a person settles it" in " ".join(r.err.split())


def test_again_with_an_attempt_after_the_lease_ran_out(world):
    relay, alice, bob = world
    first, _ = _queue(relay, alice, 2)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == first
    relay.move_clock(CLAIM_LEASE_S + 5)
    assert relay("sweep").code == 0
    err = refused(relay, "state_conflict", "claim", "--attempt", attempt, env=bob)
    assert first in err["message"] and "delivery_unknown since" in err["message"]
    assert "job 0" not in json.dumps(err)


def test_again_after_an_ack_says_it_was_acked_not_that_it_took_nothing(world):
    relay, alice, bob = world
    first, _ = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first
    assert relay("ack", first, env=bob).code == 0
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    assert first in err["message"] and "acknowledged since" in err["message"]
    assert "took nothing" not in err["message"] and "no queued request" not in err["message"]
    assert f"relay reply {first} -" in err["hint"]


def test_again_after_a_redelivery_says_it_was_queued_again(world):
    relay, alice, bob = world
    first, _ = _queue(relay, alice, 2, "--on-lost", "redeliver")
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == first
    relay.move_clock(CLAIM_LEASE_S + 5)
    assert relay("sweep").code == 0
    for args in (["claim", "--attempt", attempt], ["claim", "--again", "--attempt", attempt]):
        r = relay(*args, "--json", env=bob)
        assert r.code == 4 and r.error["code"] == "state_conflict", r.err
        assert first in r.err and "queued since" in r.err and "redelivered" in r.err
        assert f"relay claim --id {first}" in r.err
    # the same attempt never takes it again: it answers what became of its claim
    assert relay("show", first, "--json").json["state"] == "queued"


def test_again_after_a_persons_requeue_says_so(world):
    relay, alice, bob = world
    first, _ = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first
    relay.move_clock(CLAIM_LEASE_S + 5)
    assert relay("sweep").code == 0
    assert relay("resolve", first, "--outcome", "requeue", "--json", terminal=True).code == 0
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    assert first in err["message"] and "queued since" in err["message"]
    assert "resolved_by_human" in err["message"]


def test_again_in_a_new_session_after_rejoining_names_the_earlier_claim(world):
    relay, alice, bob = world
    first, *_ = _queue(relay, alice, 3)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == first
    assert relay("claim", "--json", env=bob).code == 0
    bob2 = relay.join("bob", "--lease", "24h")  # supersedes: both are delivery_unknown
    err = refused(relay, "nothing_to_claim", "claim", "--again", env=bob2)
    assert "made no claim since it joined" in err["message"]
    assert first in err["hint"] and "delivery_unknown" in err["hint"]
    assert "took nothing" not in err["message"]
    err = refused(relay, "state_conflict", "claim", "--attempt", attempt, env=bob2)
    assert first in err["message"] and "peer_superseded" in err["message"]


# ----------------------------------------------------- plain claim and held work
def test_a_plain_claim_names_the_requests_the_session_holds_unacked(world):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first  # answer lost
    r = relay("claim", "--json", env=bob)
    assert r.json["id"] == second and r.json["held_unacked"] == [first]
    # two held without an attempt id: relay cannot say whose is whose, only how to look
    err = refused(relay, "nothing_to_claim", "claim", env=bob)
    assert first in err["hint"] and second in err["hint"]
    assert "relay show ID" in err["hint"] and "--attempt" in err["hint"]
    # one held, in a session that had two claims in flight: claim --again shows none,
    # so the hint names the look that does, not claim --again
    relay("ack", second, env=bob)
    err = refused(relay, "nothing_to_claim", "claim", env=bob)
    assert first in err["hint"] and second not in err["hint"]
    assert f"`relay show {first}` prints it" in err["hint"]
    assert "claim --again" not in err["hint"]
    refused(relay, "state_conflict", "claim", "--again", env=bob)
    relay("ack", first, env=bob)
    err = refused(relay, "nothing_to_claim", "claim", env=bob)
    assert first not in err["hint"]


def test_a_claim_made_with_an_attempt_is_recovered_only_by_its_attempt(world):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    assert relay("claim", "--attempt", new_id(), "--json", env=bob).json["id"] == first
    r = relay("claim", "--json", env=bob)
    assert r.json["held_unacked"] == [first]
    # two claims were in flight at once: --again without the attempt names the plain
    # claim's request only, never the attempt's, and shows neither's text
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    assert second in err["message"] and first not in err["message"]
    assert "job" not in err["message"] + err["hint"]
    note = relay("claim", env=bob)  # nothing left to take: the note names both
    assert note.code == 75
    assert f"{first} was claimed with --attempt: a retry with the same ID" in " ".join(
        note.err.split()
    )


def test_the_held_note_is_on_a_human_claim(world):
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    relay("claim", env=bob)
    r = relay("claim", env=bob)
    assert r.code == 0 and "note: this session also holds" in r.out and first in r.out


def test_a_claim_is_kept_as_long_as_its_request_and_pruned_with_its_tombstone(world):
    relay, alice, bob = world
    (rid,) = _queue(relay, alice, 1)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == rid
    assert relay("reply", rid, "done", env=bob).code == 0
    assert len(relay.snapshot()["claims"]) == 1
    relay.move_clock(31 * 86400)  # bodies go, the tombstone and its claim stay
    assert relay("prune", "--json").code == 0
    assert len(relay.snapshot()["claims"]) == 1
    r = relay("claim", "--again", "--attempt", attempt, "--json", env=relay.join("bob"))
    assert r.code == 4 and rid in r.err and "completed" in r.err
    relay.move_clock(121 * 86400)
    assert relay("prune", "--json").code == 0
    assert [c[0] for c in relay.snapshot()["claims"]] == [attempt]  # the attempt outlives it


def test_an_attempt_whose_request_was_pruned_says_so_never_that_it_took_nothing(world):
    """Before: prune removed a claim with its request's tombstone, and a very late retry of
    the attempt was told it took nothing (and a plain retry took a new request). The
    attempt id outlives the tombstone by as long again, and says the request was pruned;
    once it is gone too, `--again` says that it took nothing unless it was that old."""
    relay, alice, bob = world
    (rid,) = _queue(relay, alice, 1)
    (plain_rid,) = _queue(relay, alice, 1)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == rid
    assert relay("reply", rid, "done", env=bob).code == 0
    assert relay("claim", "--json", env=bob).json["id"] == plain_rid  # without an attempt
    assert relay("reply", plain_rid, "done", env=bob).code == 0
    relay.move_clock(122 * 86400)
    bob = relay.join("bob", "--lease", "24h")
    pruned = relay("prune", "--json").json
    assert pruned["tombstones_removed"] == 2 and pruned["claim_attempts_removed"] == 0
    kept = relay.sql("SELECT attempt, request_id, request_removed_at FROM claims")
    assert [(a, r) for a, r, _ in kept] == [(attempt, rid)]  # the plain claim went
    assert kept[0][2] is not None
    before = relay.sql("SELECT count(*) FROM requests")
    for args in (["claim", "--attempt", attempt], ["claim", "--again", "--attempt", attempt]):
        err = refused(relay, "state_conflict", *args, env=bob)
        assert rid in err["message"] and "prune removed it" in err["message"]
        assert "took nothing" not in err["message"]
        assert "relay id" in err["hint"]
    assert relay.sql("SELECT count(*) FROM requests") == before  # nothing taken
    # as long again: the attempt goes too, and --again says what relay can say
    relay.move_clock(122 * 86400 + 121 * 86400)
    dry = relay("prune", "--dry-run", "--json").json
    assert dry["claim_attempts_removed"] == 1
    assert relay("prune", "--json").json["claim_attempts_removed"] == 1
    assert relay.sql("SELECT attempt FROM claims WHERE attempt IS NOT NULL") == []
    bob = relay.join("bob", "--lease", "24h")
    err = refused(relay, "nothing_to_claim", "claim", "--again", "--attempt", attempt, env=bob)
    assert "took nothing, unless it was made more than 240 days ago" in err["message"]


def test_parallel_retries_of_one_attempt_take_one_request(world):
    """A retry that races the first try (a caller that timed out and tried again) takes
    nothing new: every process gets the one request, one of them as the claim."""
    relay, alice, bob = world
    sent = _queue(relay, alice, 4)
    attempt = new_id()
    results = _in_parallel(relay, bob, [attempt] * 4)
    got = [json.loads(r["out"]) for r in results if r["code"] == 0]
    assert len(got) == 4, results
    assert {g["id"] for g in got} == {sent[0]}
    assert sorted(g["duplicate"] for g in got) == [False, True, True, True]
    states = [relay("show", rid, "--json").json["state"] for rid in sent]
    assert states == ["delivered", "queued", "queued", "queued"]


def test_a_request_taken_before_claims_were_recorded_is_shown_again(world):
    """A relay.db migrated while a session held a claim: that claim has no row in
    claims, and counts as one made without an attempt id."""
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first
    relay.sql("DELETE FROM claims")  # as migration 10 finds it
    again = relay("claim", "--again", "--json", env=bob)
    assert again.code == 0 and again.json["id"] == first and again.json["duplicate"] is True
    assert relay("claim", "--json", env=bob).json["held_unacked"] == [first]


def test_a_recovered_acknowledged_claim_asks_for_the_reply_not_an_ack(world):
    """A retry of an attempt whose request this session acked: the human answer must not
    ask for an ack again nor give an ack deadline that no longer exists."""
    relay, alice, bob = world
    (first,) = _queue(relay, alice, 1)
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == first
    assert relay("ack", first, env=bob).code == 0
    human = relay("claim", "--attempt", attempt, env=bob)
    assert human.code == 0, human.err
    assert "relay ack" not in human.out and "ack by" not in human.out
    # piped (an agent reads it), the commands name the request by a 12-character prefix
    assert f"next: relay reply {first[:12]} -" in human.out


def test_again_without_an_attempt_says_it_cannot_tell_whose_claim_it_shows(world):
    """A second claimer of the session whose own claim took nothing (its answer lost) and
    who asks `claim --again` is shown the one request the session holds, which is the
    other claimer's: relay cannot know, so the answer must say so, and the retry of a
    claim made with --attempt must not carry that doubt."""
    relay, alice, bob = world
    (first,) = _queue(relay, alice, 1)
    assert relay("claim", "--json", env=bob).json["id"] == first  # claimer one
    assert relay("claim", "--json", env=bob).code == 75  # claimer two: took nothing
    human = relay("claim", "--again", env=bob)
    assert human.code == 0 and f"relay ack {first[:12]}" in human.out  # (piped: a prefix)
    words = " ".join(human.out.split())
    assert "relay cannot tell which claimer of this session took it" in words
    assert "claim --again takes nothing new" in words
    attempt = new_id()
    _queue(relay, alice, 1)
    relay("claim", "--attempt", attempt, env=bob)
    retry = relay("claim", "--attempt", attempt, env=bob)
    assert retry.code == 0 and "cannot tell" not in retry.out


def test_again_after_a_finished_plain_claim_does_not_deny_a_later_attempt_claim(world):
    """`claim --again` without an attempt id speaks of the session's latest claim made
    without one: a later claim made with --attempt exists, and must not be denied."""
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first
    assert relay("ack", first, env=bob).code == 0
    assert relay("reply", first, "done", env=bob).code == 0
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == second
    err = refused(relay, "state_conflict", "claim", "--again", env=bob)
    words = " ".join(f"{err['message']} {err['hint']}".split())
    assert first in words and second not in words
    assert "the latest claim this session made without --attempt" in words
    assert "no later claim of this session is stored" not in words
    assert "relay claim --again --attempt ID" in words


def test_a_claim_whose_held_work_note_cannot_be_read_still_shows_what_it_took(world, monkeypatch):
    """The note is read after the claim committed (design.md §6): when that read fails
    (busy, say), the claimed request's text is shown all the same, the held ids named."""
    from relay_cli.core.errors import RelayError
    from relay_cli.requests import claiming

    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == first  # answer lost

    def busy(*a, **k):
        raise RelayError("busy", "the database is busy")

    monkeypatch.setattr(claiming, "held_note", busy)
    r = relay("claim", env=bob)
    assert r.code == 0, r
    assert f"relay ack {second[:12]}" in r.out and f"also holds unacked: {first}" in r.out
    assert relay("show", second, "--json").json["state"] == "delivered"


def test_the_json_of_a_claim_says_whether_relay_knows_it_is_the_askers(world):
    """An agent reads JSON: a plain `claim --again` answer says there, not only in human
    words, that relay cannot tell whose claim it shows; a claim, and a retry of an
    attempt, are the caller's own."""
    relay, alice, bob = world
    first, second = _queue(relay, alice, 2)
    fresh = relay("claim", "--json", env=bob).json
    assert fresh["id"] == first and fresh["claimer_known"] is True
    again = relay("claim", "--again", "--json", env=bob).json
    assert again["id"] == first and again["duplicate"] is True
    assert again["claimer_known"] is False
    assert relay("reply", first, "done", env=bob).code == 0
    attempt = new_id()
    assert relay("claim", "--attempt", attempt, "--json", env=bob).json["id"] == second
    retry = relay("claim", "--attempt", attempt, "--json", env=bob).json
    assert retry["duplicate"] is True and retry["claimer_known"] is True


def test_again_in_a_session_that_had_two_claims_in_flight_shows_no_text(world):
    """Before: claimer A holds one request; claimer B of the same session took another,
    finished it, and its next claim took nothing with its answer lost. `claim --again`
    showed B the request A holds (duplicate: true, next: relay ack). Once two claims of a
    session were in flight at once, relay cannot take a plain claim for the asker's: it
    shows none, names the ids and says how a claimer alone and one among others find
    theirs."""
    relay, alice, bob = world
    mine, theirs = _queue(relay, alice, 2)
    assert relay("claim", "--json", env=bob).json["id"] == mine  # claimer A
    assert relay("claim", "--json", env=bob).json["id"] == theirs  # claimer B
    assert relay("ack", theirs, env=bob).code == 0
    assert relay("reply", theirs, "done", env=bob).code == 0
    assert relay("claim", "--json", env=bob).code == 75  # B again: took nothing, lost
    for args in (["claim", "--again"], ["claim", "--again", "--json"]):
        r = relay(*args, env=bob)
        assert r.code == 4 and r.out == "", r.out
        words = " ".join(r.err.split())
        assert mine in words and "job 0" not in words
        assert "more than one claim in flight at once" in words
        assert "if you are this session's only claimer, yours is the one whose text" in words
        assert f"`relay show {mine}` prints it, then `relay ack {mine}`" in words
    refused(relay, "state_conflict", "claim", "--again", env=bob)
    # a session whose claims came one at a time is not held to it
    bob2 = relay.join("bob", "--lease", "24h")
    (later,) = _queue(relay, alice, 1)
    assert relay("claim", "--json", env=bob2).json["id"] == later
    assert relay("claim", "--again", "--json", env=bob2).json["id"] == later
