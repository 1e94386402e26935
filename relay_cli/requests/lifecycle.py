"""The lifecycle of a request that exists (design.md §5, §6) as plain functions over a
store: reading requests, and acting on them -- ack, reply, fail, reject, cancel, and a
person's resolve. Creating requests is ``sending``, taking them ``claiming``, checking
what a caller gives ``validate``, and their public shape ``objects``.

Every function that reads or writes runs inside a transaction that ``due.unit()``
opened, after the due time-based transitions were applied (``due``), and either
completes or raises a ``RelayError`` (the transaction then rolls back, so a refused
command changes nothing). Commands that block are in ``waiting``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.command import Said, relay
from ..core.errors import RelayError
from ..core.person import person, require_terminal
from .objects import event_object, request_object
from .peers import Caller, renew, require_live
from .states import RESOLVE_OUTCOMES, apply
from .validate import one_of, resolve_ref

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import PeerStore, Record, RequestStore, Row, Store


def get(store: RequestStore, request_id: str) -> Row:
    """The request that ``request_id`` (a full id, or a prefix from ``validate_ref``) names."""
    request_id = resolve_ref(store, request_id)
    row = store.get_request(request_id)
    if row is None:
        hint = None
        if store.get_draft(request_id) is not None:
            hint = "this id is a prepared draft that was never submitted: `relay submit ID`"
        raise RelayError("request_not_found", f"no request {request_id}", detail=hint)
    return row


def show(store: RequestStore, request_id: str, events: bool = False) -> JsonObject:
    row = get(store, request_id)
    obj = request_object(row, text=True, reply=True)
    if events:
        obj["events"] = [event_object(e) for e in store.events_of(row["id"])]
    return obj


def list_requests(
    store: RequestStore, states: list[str], to: str | None, from_: str | None, limit: int | None
) -> JsonObject:
    rows = store.list_requests(states, to, from_, None if limit is None else limit + 1)
    has_more = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit is not None else rows
    return {"requests": [request_object(r) for r in rows], "has_more": has_more}


def unknown_names(store: PeerStore, *names: str | None) -> tuple[list[str], list[str]]:
    """Of the peer ``names`` a `list --to`/`--from` narrowed by, those that no peer has,
    and the known names: an empty table for a mistyped name says so (design.md §14)."""
    unknown = [n for n in names if n is not None and store.get_peer(n) is None]
    return unknown, (store.peer_names() if unknown else [])


def inbox(store: RequestStore, caller: Caller, limit: int | None = None) -> JsonObject:
    """The oldest ``limit`` requests queued for ``caller`` (no bodies), ``has_more``, and
    ``more``: how many more are queued (design.md §6)."""
    rows = store.queued_for(caller.name, None if limit is None else limit + 1)
    has_more = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit is not None else rows
    more = store.count_queued_for(caller.name) - len(rows) if has_more else 0
    return {
        "requests": [request_object(r) for r in rows],
        "has_more": has_more,
        "more": max(more, 1) if has_more else 0,
    }


def _owned_by_claimer(store: Store, caller: Caller, request_id: str) -> Row:
    row = get(store, request_id)
    require_live(store, caller)
    if caller.session is None or row["claim_session"] != caller.session["id"]:
        if row["claim_session"] is None:  # nobody holds it: say so, not "another session"
            queued = row["state"] == "queued"
            raise RelayError(
                "not_owner",
                f"{row['id']} is {row['state']} and no session has claimed it"
                + ("; only the session that claims it may do this" if queued else ""),
                detail=Said.of("take it first: ", relay("claim", "--id", row["id"], changes=True))
                if queued and row["to_peer"] == caller.name
                else None,
            )
        who = "the sender" if row["from_peer"] == caller.name else repr(caller.name)
        raise RelayError(
            "not_owner",
            f"only the session that claimed {row['id']} may do this, not {who}",
        )
    return row


def ack(store: Store, now: int, caller: Caller, request_id: str) -> JsonObject:
    row = _owned_by_claimer(store, caller, request_id)
    if row["state"] == "acknowledged":
        renew(store, caller, now)
        return {**request_object(row), "duplicate": True}
    fields = {"acknowledged_at": now}
    if row["reply_within_seconds"]:
        fields["reply_deadline_at"] = now + row["reply_within_seconds"] * 1000
    new = apply(store, row, "ack", actor=caller.name, at=now, fields=fields)
    renew(store, caller, now)
    return {**request_object(new), "duplicate": False}


def reply(store: Store, now: int, caller: Caller, request_id: str, text: str) -> JsonObject:
    row = _owned_by_claimer(store, caller, request_id)
    if row["state"] == "completed" and row["reply"] is not None:
        if row["reply"] == text:
            renew(store, caller, now)
            return {**request_object(row, reply=True), "duplicate": True}
        raise RelayError("reply_conflict", f"{row['id']} was completed with another reply")
    new = apply(store, row, "reply", actor=caller.name, at=now, fields={"reply": text})
    renew(store, caller, now)
    return {**request_object(new, reply=True), "duplicate": False}


# A final transition asked again by the same caller, after its answer was lost, is
# answered from what is stored (design.md §6): the state and reason it led to, and for
# fail and reject the same reason text. Anything else stays state_conflict.
_DONE_BY = {
    "fail": ("failed", "failed_by_recipient"),
    "reject": ("rejected", "rejected_by_recipient"),
    "cancel": ("cancelled", "cancelled_by_sender"),
}


def _already(row: Record, event: str, detail: str | None = None) -> bool:
    return (row["state"], row["reason"]) == _DONE_BY[event] and (
        detail is None or row["detail"] == detail
    )


def _finish(
    store: Store, now: int, caller: Caller, row: Row, event: str, detail: str | None = None
) -> JsonObject:
    if _already(row, event, detail):
        renew(store, caller, now)
        return {**request_object(row), "duplicate": True}
    set_detail = detail is not None
    new = apply(store, row, event, actor=caller.name, at=now, detail=detail, set_detail=set_detail)
    renew(store, caller, now)
    return {**request_object(new), "duplicate": False}


def fail(store: Store, now: int, caller: Caller, request_id: str, reason: str) -> JsonObject:
    """`relay fail`; the same fail with the same reason again is ``duplicate: true``."""
    row = _owned_by_claimer(store, caller, request_id)
    return _finish(store, now, caller, row, "fail", reason)


def reject(store: Store, now: int, caller: Caller, request_id: str, reason: str) -> JsonObject:
    """`relay reject`; the same reject with the same reason again is ``duplicate: true``."""
    row = _owned_by_claimer(store, caller, request_id)
    return _finish(store, now, caller, row, "reject", reason)


def cancel(store: Store, now: int, caller: Caller, request_id: str) -> JsonObject:
    """`relay cancel` by the sender; a cancel again is ``duplicate: true``."""
    row = get(store, request_id)
    require_live(store, caller)
    if row["from_peer"] != caller.name:
        raise RelayError("not_owner", f"only the sender {row['from_peer']!r} may cancel")
    return _finish(store, now, caller, row, "cancel")


def validate_outcome(value: str) -> str:
    """A `resolve --outcome`: completed, failed or requeue, else ``usage_error``."""
    return one_of(value, RESOLVE_OUTCOMES, "--outcome")


def resolve(
    store: RequestStore,
    now: int,
    request_id: str,
    outcome: str,
    note: str | None,
    *,
    terminal: bool,
) -> JsonObject:
    """A person settles a delivery_unknown request (design.md §14). It is recorded as
    ``person:<user>``, so it is refused (``approval_needs_terminal``) unless standard input
    is a ``terminal``: an agent's shell must not settle work in a person's name. The
    outcome is checked before that rule, the request after it."""
    validate_outcome(outcome)
    require_terminal("resolve", terminal)
    row = get(store, request_id)
    # the sender learns the settled outcome (notices), in a batch of its own
    fields = {"notified_at": None, "notice_batch": None}
    if outcome == "requeue" and row["pruned"] and row["state"] == "delivery_unknown":
        raise RelayError(
            "state_conflict",
            f"{row['id']} was pruned: its text is gone, so "
            "there is nothing to queue again; send the work anew with a new id",
        )
    if outcome == "requeue":
        fields |= {
            "claim_session": None,
            "lease_expires_at": None,
            "delivered_at": None,
            "acknowledged_at": None,
            "reply_deadline_at": None,
            "expires_at": now + row["ttl_seconds"] * 1000,
        }
    new = apply(
        store,
        row,
        f"resolve_{outcome}",
        actor=person(),
        at=now,
        detail=note,
        set_detail=True,
        fields=fields,
    )
    return request_object(new)
