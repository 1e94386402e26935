"""Taking a request (design.md §6): `relay claim`, and recovering the answer of a claim
that was lost (`claim --again`, `claim --attempt`): what a session holds and what became of
the request a claim took."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import clock
from ..core.command import Said, placeholder, relay
from ..core.errors import RelayError
from ..core.limits import (
    CLAIMED_STATES,
    DAY_S,
    FINAL_STATES,
    TOMBSTONE_S,
)
from .lifecycle import get
from .objects import request_object
from .peers import Caller, renew, require_session
from .states import apply

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import RequestStore, Row, Store

# An attempt id is kept at least this long after its claim: its request finishes no
# sooner than the claim, its tombstone goes 120 days later at the earliest, and the
# attempt 120 days after that (design.md §6).
ATTEMPT_KEPT_DAYS = 2 * TOMBSTONE_S // DAY_S


def unacked_ids(store: RequestStore, caller: Caller, but: str | None = None) -> list[str]:
    """The requests this session claimed and has not acknowledged, oldest claim first
    (``but`` left out): what a plain claim mentions (design.md §6)."""
    if caller.session is None:
        return []
    held = [
        r
        for r in store.in_flight_of_session(caller.session["id"])
        if r["state"] == "delivered" and r["id"] != but
    ]
    return [r["id"] for r in sorted(held, key=lambda r: (r["delivered_at"], r["id"]))]


def held_note(store: RequestStore, caller: Caller, ids: list[str]) -> Said:
    """The sentence a claim adds when this session holds unacknowledged requests (``ids``,
    from ``unacked_ids``), with the command that recovers a lost answer: `claim --again`
    when it would show one of them, else the attempt id or, for a claim made without one,
    `relay show`, since relay cannot know whose each is (design.md §6)."""
    claims = store.claims_of_session(caller.session["id"]) if caller.session else []
    plain = [row["id"] for _, row in _plain_held(store, caller, claims)]
    shown = plain[0] if len(plain) == 1 and not _overlapped(caller.session) else None
    with_attempt = {c["request_id"] for c in claims if c["attempt"]}
    unnamed = [i for i in ids if i != shown and i not in with_attempt]
    tried = [i for i in ids if i != shown and i in with_attempt]
    how: list[Said] = []
    again = relay("claim", "--again")
    if shown in ids:
        how.append(
            Said.of("if that claim's answer was lost, ", again, " shows it")
            if len(ids) == 1
            else Said.of(again, f" shows {shown}, claimed without --attempt")
        )
    if unnamed:
        # a command that changes something names its request (design.md §14)
        one = unnamed[0] if len(unnamed) == 1 else None
        how.append(
            Said.of(
                f"{', '.join(unnamed)} "
                + ("was" if len(unnamed) == 1 else "were")
                + " claimed without --attempt: if yours lost its answer, ",
                relay("show", one or placeholder("ID")),
                " prints it, then ",
                relay("ack", one, changes=True) if one else "ack it",
                " (unless another claimer of this session holds it)",
            )
        )
    if tried:
        how.append(
            Said.of(
                f"{', '.join(tried)} "
                + ("was" if len(tried) == 1 else "were")
                + " claimed with --attempt: a retry with the same ID shows its own"
            )
        )
    said = Said.of(f"this session also holds {', '.join(ids)}, claimed and not acked")
    for part in how:
        said = said + "; " + part
    return said


def _plain_held(
    store: RequestStore, caller: Caller, claims: list[Row] | None = None
) -> list[tuple[Row | None, Row]]:
    """(claim, request) of this session's claims made without an attempt id whose request
    it still holds unacknowledged through that claim, oldest first. A request this session
    took before claims were recorded (a relay.db migrated mid-session) has no claim row
    (None) and counts as one made without an attempt id. It starts from the requests the
    session holds (a few), not from every claim it ever made: ``claims`` (the session's,
    when the caller has them) is read once and never one request per claim."""
    if caller.session is None:
        return []
    if claims is None:
        claims = store.claims_of_session(caller.session["id"])
    of_request: dict[str, list[Row]] = {}
    for c in claims:
        of_request.setdefault(c["request_id"], []).append(c)
    held: list[tuple[Row | None, Row]] = []
    for r in store.in_flight_of_session(caller.session["id"]):
        if r["state"] != "delivered":
            continue
        if r["id"] not in of_request:
            held.append((None, r))
            continue
        took = [c for c in of_request[r["id"]] if _holds(r, c, caller)]
        if took and took[-1]["attempt"] is None:
            held.append((took[-1], r))
    return sorted(held, key=lambda cr: (cr[1]["delivered_at"], cr[1]["id"]))


def _holds(row: Row, claim: Row, caller: Caller) -> bool:
    """The request ``claim`` took is still held by that claim, in the caller's session."""
    return (
        caller.session is not None
        and row["state"] in CLAIMED_STATES
        and row["claim_session"] == claim["session_id"] == caller.session["id"]
        and row["delivered_at"] == claim["claimed_at"]
    )


def _overlapped(session: Row | None) -> bool:
    """The session has had two claims in flight at once (design.md §6)."""
    return session is not None and session["claims_overlap_at"] is not None


def _recovered(
    store: Store, now: int, caller: Caller, row: Row, claimer_known: bool = True
) -> JsonObject:
    """A claim's request shown again. ``claimer_known`` False: relay knows that this
    session made the claim, not which of its claimers did (design.md §6)."""
    renew(store, caller, now)
    return {
        **request_object(row, text=True),
        "duplicate": True,
        "claimer_known": claimer_known,
        "held_unacked": unacked_ids(store, caller, but=row["id"]),
    }


def _none_shown(held: list[Row], session: Row) -> RelayError:
    """`claim --again` without an attempt id where relay cannot take a held request for
    the asker's: several are held, or the session has had two claims in flight at once
    (design.md §6). Ids only, and how a claimer alone and a claimer among others find
    theirs."""
    ids = [row["id"] for row in held]
    one = ids[0] if len(ids) == 1 else None
    why = (
        f"this session has had more than one claim in flight at once (first at "
        f"{clock.iso(session['claims_overlap_at'])}), so it may be shared by several "
        "claimers; it holds, "
        if _overlapped(session)
        else f"this session holds {len(ids)} requests, "
    )
    show = Said.of(relay("show", one), " prints it, then ", relay("ack", one)) if one else None
    return RelayError(
        "state_conflict",
        f"{why}claimed without --attempt and not acked: {', '.join(ids)}; relay cannot "
        "tell which claim was yours, so it shows none",
        detail=Said.of(
            "if you are this session's only claimer, yours is the one whose text you "
            "have not seen (",
            *(
                show.parts
                if show
                else (relay("show", placeholder("ID")), " prints one; then ack that one")
            ),
            "); if others share this session, ask them which they hold: yours is the one "
            "none of them has; from now on claim with --attempt and an id of your own from ",
            relay("id", scoped=False),
            " (the same id on a retry), so that a retry finds its own claim",
        ),
    )


def _what_became(
    row: Row, claim: Row, caller: Caller, which: str, then: Said | str = ""
) -> RelayError:
    """``claim --again`` when the request a claim took moved on (design.md §6): its id,
    state, since when and what to do (and ``then``), never its text, never "the claim
    took nothing"."""
    rid, state = row["id"], row["state"]
    since = clock.iso(row["updated_at"])
    reason = f", {row['reason']}" if row["reason"] else ""
    mine = caller.session is not None and row["claim_session"] == caller.session["id"]
    holder = (
        "nobody holds it now"
        if state == "queued"
        # final, but not settled: a person may still requeue it (design.md §5)
        else "nobody holds it, and only a person settles it now"
        if state == "delivery_unknown"
        else "it is final"
        if state in FINAL_STATES
        else "this session holds it, acked"
        if mine and state == "acknowledged"
        else "another claim of this session holds it"
        if mine
        else "another session holds it"
    )
    message = (
        f"{which} (at {clock.iso(claim['claimed_at'])}) took {rid}, which is {state} "
        f"since {since}{reason}; {holder}"
    )
    what: Said
    if state == "queued":
        what = Said.of(
            "it was queued again: ", relay("claim", "--id", rid, changes=True), " takes it"
        )
    elif state == "delivery_unknown":
        what = Said.of(
            "relay cannot know whether it was worked on; if you never saw its text, you "
            "did not start it: tell the person, who can settle it with ",
            relay("resolve", rid, "--outcome", "requeue", changes=True),
        )
    elif state in FINAL_STATES:
        what = Said.of(
            "nothing is left to do for it: ", relay("show", rid, "--events"), " shows its history"
        )
    elif mine and state == "acknowledged":
        what = Said.of(
            "it was acked in this session, so whoever acked it read its text; that claimer "
            "finishes it (",
            relay("reply", rid, tail=("-",), changes=True),
            ", or relay fail or relay reject)",
        )
    else:
        what = Said.of("another claim holds it now: leave it to that claimer")
    return RelayError("state_conflict", message, detail=what + then)


def _answer_attempt(
    store: Store, now: int, caller: Caller, claim: Row, request_id: str | None
) -> JsonObject:
    """A claim retried with an attempt id already stored (design.md §6): the request it
    took, ``duplicate: true``, while this session holds it; else what became of it."""
    attempt = claim["attempt"]
    if claim["peer"] != caller.name:
        raise RelayError(
            "request_id_conflict",
            f"claim attempt {attempt} was made by {claim['peer']!r}, not {caller.name!r}",
            detail="every claim needs its own attempt id: `relay id` makes one",
        )
    if request_id is not None and claim["request_id"] != request_id:
        raise RelayError(
            "request_id_conflict",
            f"claim attempt {attempt} took {claim['request_id']}, not {request_id}",
        )
    row = store.get_request(claim["request_id"])
    if row is None:
        # prune removed the request's tombstone and kept this attempt (design.md §6)
        removed = claim["request_removed_at"]
        raise RelayError(
            "state_conflict",
            f"claim attempt {attempt} (at {clock.iso(claim['claimed_at'])}) took "
            f"{claim['request_id']}, which finished long ago: prune removed it and its "
            + (f"tombstone at {clock.iso(removed)}" if removed else "tombstone")
            + "; nothing is left to do for it",
            detail=Said.of(
                "new work needs a claim with a new attempt id: ",
                relay("id", scoped=False),
                " makes one",
            ),
        )
    if _holds(row, claim, caller) and caller.status == "active":
        return _recovered(store, now, caller, row)
    raise _what_became(row, claim, caller, f"claim attempt {attempt}")


def _again(store: Store, now: int, caller: Caller, session: Row) -> JsonObject:
    """`claim --again` without an attempt id (design.md §6). Claims made with an attempt
    id are answered only to a retry with that id. Of this session's other claims: the one
    it holds unacked is shown; with several relay cannot know whose is whose and shows
    none; with none, it says what became of the request the latest one took."""
    sid = session["id"]
    claims = store.claims_of_session(sid)
    plain = [c for c in claims if c["attempt"] is None]
    held = _plain_held(store, caller, claims)
    if len(held) > 1 or (held and _overlapped(session)):
        raise _none_shown([row for _, row in held], session)
    if len(held) == 1:
        return _recovered(store, now, caller, held[0][1], claimer_known=False)
    last = store.get_request(plain[-1]["request_id"]) if plain else None
    if last is not None:
        later = any(c["attempt"] for c in claims if c["claimed_at"] >= plain[-1]["claimed_at"])
        raise _what_became(
            last,
            plain[-1],
            caller,
            "the latest claim this session made without --attempt",
            Said.of(
                "; this session also made claims with --attempt: a retry with its own id (",
                relay("claim", "--again", "--attempt", placeholder("ID")),
                ") shows what one took",
            )
            if later
            else Said.of(
                "; no later claim of this session is stored: ",
                relay("claim", changes=True),
                " takes one",
            ),
        )
    if claims:
        raise RelayError(
            "nothing_to_claim",
            f"every claim this session of {caller.name!r} made ({len(claims)}) had an "
            "attempt id: only a retry with that id shows what it took",
            detail=Said.of(
                relay("claim", "--again", "--attempt", placeholder("ID")),
                " with the id the lost claim used",
            ),
        )
    earlier = [c for c in store.recent_claims_of_peer(caller.name, 4) if c["session_id"] != sid]
    known = [(c, store.get_request(c["request_id"])) for c in earlier]
    took = "; ".join(
        f"{r['id']} ({r['state']} since {clock.iso(r['updated_at'])})" for _, r in known if r
    )
    raise RelayError(
        "nothing_to_claim",
        f"this session of {caller.name!r} has made no claim since it joined "
        f"({clock.iso(session['created_at'])}), so it holds nothing to show again",
        detail=(
            Said.of(
                f"earlier sessions of {caller.name} claimed {took}: ",
                relay("show", placeholder("ID"), "--events"),
                " says what became of one",
            )
            if took
            else None
        ),
    )


def claim(
    store: Store,
    now: int,
    caller: Caller,
    lease_s: int,
    request_id: str | None,
    again: bool = False,
    attempt: str | None = None,
) -> JsonObject | None:
    """`relay claim`: take the oldest queued request for the caller (or the one named).

    ``attempt`` (`claim --attempt ID`) is an id the caller chose for this claim: stored
    with it, so a retry of the same attempt is answered from what is stored
    (``duplicate: true``) and takes nothing new; nobody else gets anything of it.
    ``again`` (`claim --again`, after a claim whose answer was lost) takes nothing: with
    an attempt id it answers that claim, or says it took nothing; without one see
    ``_again``. A plain claim always takes a new request, so parallel claimers sharing
    one session never get the same one (design.md §6).
    """
    if attempt is not None and caller.session is not None:  # dedupe before session state
        stored = store.claim_by_attempt(attempt)
        if stored is not None:
            return _answer_attempt(store, now, caller, stored, request_id)
    session = require_session(store, caller)
    if again and attempt is not None:
        raise RelayError(
            "nothing_to_claim",
            f"claim attempt {attempt} took nothing, unless it was made more than "
            f"{ATTEMPT_KEPT_DAYS} days ago: no claim with it is stored (a claim and its "
            "attempt id are stored together or not at all, and prune removes an attempt id "
            f"no sooner than {ATTEMPT_KEPT_DAYS} days after its claim)",
            detail=Said.of(
                relay("claim", "--attempt", attempt, changes=True),
                " takes the oldest queued request now",
            ),
        )
    row: Row | None
    if request_id:
        row = get(store, request_id)
        if row["to_peer"] != caller.name:
            raise RelayError("not_owner", f"{row['id']} is addressed to {row['to_peer']!r}")
        if row["claim_session"] == session["id"] and row["state"] in CLAIMED_STATES:
            # a retry whose answer was lost
            raise RelayError(
                "state_conflict",
                f"cannot claim a request that is {row['state']} (allowed from: queued)",
                detail=Said.of(
                    "this session claimed it already: ",
                    relay("show", row["id"]),
                    " shows its text; finish it with ack, then reply, fail or reject",
                ),
            )
    elif again:  # a retry whose answer was lost: the request held, never a new one
        return _again(store, now, caller, session)
    else:
        row = store.oldest_queued_for(caller.name)
        if row is None:
            return None
    if not _overlapped(session) and store.in_flight_of_session(session["id"]):
        # a second claim in flight: from now on relay cannot take a claim made without an
        # attempt id for the asker's own (design.md §6)
        store.mark_claims_overlap(session["id"], now)
    new = apply(
        store,
        row,
        "claim",
        actor=caller.name,
        at=now,
        fields={
            "delivered_at": now,
            "claim_session": session["id"],
            "lease_expires_at": now + lease_s * 1000,
            "attempts": row["attempts"] + 1,
        },
    )
    store.insert_claim(
        {
            "attempt": attempt,
            "request_id": new["id"],
            "peer": caller.name,
            "session_id": session["id"],
            "claimed_at": now,
        }
    )
    renew(store, caller, now)
    return {
        **request_object(new, text=True),
        "duplicate": False,
        "claimer_known": True,
        "held_unacked": unacked_ids(store, caller, but=new["id"]),
    }
