"""The request state machine of design.md §5, as data.

``TRANSITIONS`` is the only place that says which event moves a request from which state
to which state with which reason. The lifecycle code consults it, the docs and
``relay schema`` print it, and the property tests walk it.
"""

from __future__ import annotations

from ..core.command import Choices, Said, relay
from ..core.errors import RelayError
from ..core.limits import FINAL_STATES
from ..core.record import record

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from relay_cli.store import Record, RequestStore

# The states themselves (STATES, OPEN_STATES, FINAL_STATES) are in core/limits.py, where
# the store's statements and the screens reach them too.

# What each state claims, and what it does not (design.md §5), for help texts and docs.
MEANING = {
    "queued": ("accepted durably; no one has taken it", "that the recipient is alive"),
    "delivered": ("a session of the recipient took it with `claim`", "that the model read it"),
    "acknowledged": ("the recipient confirmed reading it (`ack`)", "that any work is done"),
    "completed": (
        "the recipient replied",
        "that the delegated feature is built, verified or deployed",
    ),
    "failed": ("the recipient (or a person) declared failure, or attempts ran out", None),
    "rejected": ("the recipient declined to do it: by its word, nothing was executed", None),
    "expired": ("nobody claimed it before its TTL: it was not delivered", None),
    "cancelled": ("the sender withdrew it while still queued: it was not delivered", None),
    "delivery_unknown": (
        "relay cannot know whether it was executed",
        "that it failed, or that it is safe to run again",
    ),
}

# How a screen colours each state (a table's state column, `show`'s state line).
STATE_STYLES = {
    "queued": "blue",
    "delivered": "cyan",
    "acknowledged": "cyan",
    "completed": "green",
    "failed": "bold red",
    "rejected": "magenta",
    "expired": "dim",
    "cancelled": "dim",
    "delivery_unknown": "bold white on red",
}

# The deadline that moves an open request next, by its state (design.md §8): the field of
# the request object that holds it, and what it is in a person's words (watch, the web view).
NEXT_DEADLINE = {
    "queued": ("expires_at", "expires"),
    "delivered": ("lease_expires_at", "claim lease ends"),
    "acknowledged": ("reply_deadline_at", "reply due"),
}


# Where a request's reason changes what its state claims, the note under it says so.
REASON_NOTES: dict[tuple[str, str | None], str] = {
    ("completed", "resolved_by_human"): "a person settled it as completed (relay saw no reply "
    "from the recipient)",
    ("queued", "redelivered"): "queued again after a claim lease lapsed before ack; the "
    "earlier claim may have started work",
    ("queued", "resolved_by_human"): "a person queued it again; an earlier claim may have "
    "started work",
}

# What to do about a state, where its meaning alone leaves a reader who acts on it in doubt.
ADVICE = {
    "delivery_unknown": "ask the person; do not send it again on your own (the person settles it "
    "with relay resolve)",
}
# How a person settles a delivery_unknown request, in their own terminal.
RESOLVE_OUTCOMES = ("completed", "failed", "requeue")


def settle(request_id: str) -> Choices:
    """The commands that settle ``request_id``, one full command per outcome (design.md
    §14): the person runs the one that is true."""
    return Choices(
        tuple(relay("resolve", request_id, "--outcome", o, changes=True) for o in RESOLVE_OUTCOMES)
    )


# Ended while queued, which claims "it was not delivered": true of this last stay in the
# queue only, when an earlier claim had taken it (redelivered, or requeued by a person).
AFTER_A_CLAIM = {
    "cancelled": "the sender withdrew it while it was queued again, but an earlier claim "
    "delivered it; that claim may have started work",
    "expired": "nobody claimed it again before its TTL, but an earlier claim delivered it; "
    "that claim may have started work",
}


def note(state: str, reason: str | None = None, attempts: int = 0) -> str | None:
    """The note under a request a person or an agent reads: what its state claims and what
    it does not (``MEANING``), or what its reason changes about that, and what to do. None
    for a state that claims nothing it could be mistaken for (failed, rejected, expired,
    cancelled), unless ``attempts`` says a claim took it before it ended queued."""
    if attempts and state in AFTER_A_CLAIM:
        return AFTER_A_CLAIM[state]
    special = REASON_NOTES.get((state, reason))
    if special is not None:
        return special
    claims, not_claimed = MEANING[state]
    if not_claimed is None:
        return None
    text = f"{claims} (it does not mean {not_claimed})"
    return f"{text}: {ADVICE[state]}" if state in ADVICE else text


# Why a request became delivery_unknown, in words (design.md §14: a state_conflict on one
# says why, and who settles it).
UNKNOWN_BECAUSE = {
    "claim_lease_expired": "the claim lease passed before the recipient acknowledged it",
    "recipient_disconnected": "the claiming session's lease lapsed, or it left, before it finished",
    "peer_superseded": "the claiming session was replaced by a new join of the same name",
    "reply_deadline_elapsed": "no reply came within reply_within after the ack",
}


# (a record, not a typing.NamedTuple: that compiles each field's annotation, a string
# here, with compile(), ~12 million instructions at every start; design.md §18)
@record(frozen=True)
class Transition:
    from_state: str | None
    event: str
    to_state: str
    reason: str | None
    description: str


TRANSITIONS: tuple[Transition, ...] = (
    Transition(None, "send", "queued", None, "send / submit"),
    Transition("queued", "claim", "delivered", None, "claim by a recipient session"),
    Transition("queued", "ttl_passed", "expired", "request_expired", "TTL passes"),
    Transition("queued", "cancel", "cancelled", "cancelled_by_sender", "cancel by the sender"),
    Transition("delivered", "ack", "acknowledged", None, "ack by the claiming session"),
    Transition("delivered", "reply", "completed", None, "reply by the claiming session"),
    Transition("acknowledged", "reply", "completed", None, "reply by the claiming session"),
    Transition(
        "delivered", "fail", "failed", "failed_by_recipient", "fail by the claiming session"
    ),
    Transition(
        "acknowledged", "fail", "failed", "failed_by_recipient", "fail by the claiming session"
    ),
    Transition(
        "delivered", "reject", "rejected", "rejected_by_recipient", "reject by the claiming session"
    ),
    Transition(
        "acknowledged",
        "reject",
        "rejected",
        "rejected_by_recipient",
        "reject by the claiming session",
    ),
    Transition(
        "delivered",
        "claim_lease_lost",
        "delivery_unknown",
        "claim_lease_expired",
        "claim lease passes, on_lost=unknown",
    ),
    Transition(
        "delivered",
        "claim_lease_redeliver",
        "queued",
        "redelivered",
        "claim lease passes, on_lost=redeliver, attempts left",
    ),
    Transition(
        "delivered",
        "claim_lease_exhausted",
        "failed",
        "max_attempts_exceeded",
        "claim lease passes, on_lost=redeliver, no attempts left",
    ),
    Transition(
        "delivered",
        "recipient_disconnected",
        "delivery_unknown",
        "recipient_disconnected",
        "the claiming session's lease lapses or it leaves",
    ),
    Transition(
        "acknowledged",
        "recipient_disconnected",
        "delivery_unknown",
        "recipient_disconnected",
        "the claiming session's lease lapses or it leaves",
    ),
    Transition(
        "delivered",
        "peer_superseded",
        "delivery_unknown",
        "peer_superseded",
        "the claiming session is superseded",
    ),
    Transition(
        "acknowledged",
        "peer_superseded",
        "delivery_unknown",
        "peer_superseded",
        "the claiming session is superseded",
    ),
    Transition(
        "acknowledged",
        "reply_deadline_passed",
        "delivery_unknown",
        "reply_deadline_elapsed",
        "reply_within passes",
    ),
    Transition(
        "delivery_unknown",
        "resolve_completed",
        "completed",
        "resolved_by_human",
        "resolve --outcome completed",
    ),
    Transition(
        "delivery_unknown",
        "resolve_failed",
        "failed",
        "resolved_by_human",
        "resolve --outcome failed",
    ),
    Transition(
        "delivery_unknown",
        "resolve_requeue",
        "queued",
        "resolved_by_human",
        "resolve --outcome requeue",
    ),
)

_BY_KEY = {(t.from_state, t.event): t for t in TRANSITIONS}


def transition(from_state: str | None, event: str) -> Transition:
    """The allowed transition for ``event`` in ``from_state``, else ``state_conflict``."""
    t = _BY_KEY.get((from_state, event))
    if t is None:
        allowed = sorted({s for (s, e) in _BY_KEY if e == event and s})
        raise RelayError(
            "state_conflict",
            f"cannot {event.replace('_', ' ')} a request that is {from_state}"
            + (f" (allowed from: {', '.join(allowed)})" if allowed else ""),
        )
    return t


def allowed(from_state: str | None, event: str) -> bool:
    return (from_state, event) in _BY_KEY


def unknown_detail(row: Record) -> Said:
    """Why this delivery_unknown request is one, and who settles it: the commands, one
    per outcome, for the person's own terminal."""
    why = UNKNOWN_BECAUSE.get(row["reason"], row["reason"] or "unknown reason")
    return Said.of(
        f"{row['id']} became delivery_unknown ({row['reason']}: {why}), so "
        f"{MEANING['delivery_unknown'][0]}; a person settles it in their own terminal "
        "with one of: ",
        settle(row["id"]),
    )


def apply(
    store: RequestStore,
    row: Record,
    event: str,
    *,
    actor: str,
    at: int,
    detail: str | None = None,
    fields: dict[str, Any] | None = None,
    set_detail: bool = False,
) -> dict[str, Any]:
    """Move one request by ``event`` (consulting ``TRANSITIONS``) and log the event.

    Must run inside a write transaction. Raises ``state_conflict`` when the table does not
    allow the event from the request's current state.
    """
    try:
        t = transition(row["state"], event)
    except RelayError as e:
        if row["state"] == "delivery_unknown" and e.detail is None:
            e.detail = unknown_detail(row)
        raise
    changes = {"state": t.to_state, "reason": t.reason, "updated_at": at}
    changes["finished_at"] = at if t.to_state in FINAL_STATES else None
    if set_detail:
        changes["detail"] = detail
    if fields:
        changes.update(fields)
    if not store.update_request(row["id"], row["state"], changes):
        raise RuntimeError(f"request {row['id']} changed under a write lock")
    store.add_event(row["id"], at, row["state"], t.to_state, t.reason, actor, detail)
    return {**dict(row), **changes}
