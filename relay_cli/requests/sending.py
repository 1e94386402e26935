"""Creating requests (design.md §4, §6): `send`, `prepare` and `submit`, their checks in the
contract's order (dedupe before liveness and limits) and the answers they give."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import clock
from ..core.command import Said, relay
from ..core.context import Limits
from ..core.digest import sha256_hex
from ..core.errors import RelayError
from ..core.limits import (
    DRAFT_TTL_S,
    MAX_DEPTH,
    MAX_OPEN_DRAFTS,
    OPEN_STATES,
    QUEUE_RETRY_AFTER_S,
    RATE_WINDOW_MS,
)
from . import peers
from .lifecycle import get
from .objects import request_object
from .peers import Caller, renew, require_live
from .states import transition
from .validate import either, fingerprint, new_id, resolve_ref

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Record, RequestStore, Row, Store


DRAFT_TTL_MS = DRAFT_TTL_S * 1000


def _common_checks(store: Store, caller: Caller, to: str, in_reply_to: str | None) -> int:
    """Recipient known, not self, depth within limit; returns the depth."""
    if store.get_peer(to) is None:
        names = store.peer_names()
        raise RelayError(
            "unknown_peer",
            f"{to!r} is not a known peer",
            detail="known peers: " + (", ".join(names) if names else "none yet"),
        )
    depth = 0
    if in_reply_to:
        parent = store.get_request(in_reply_to)
        if parent is None:
            raise RelayError("request_not_found", f"--in-reply-to {in_reply_to}: no such request")
        depth = parent["depth"] + 1
        if depth > MAX_DEPTH:
            raise RelayError(
                "depth_exceeded",
                f"this follow-up would have depth {depth}; the limit is {MAX_DEPTH}",
            )
    return depth


def _check_rate(store: RequestStore, sender: str, now: int, limits: Limits) -> None:
    """The rate limit of this process (``limits``: its context's, design.md §4)."""
    limit = limits.rate_limit()
    if limit == 0:
        return
    count, oldest = store.recent_sends(sender, now - RATE_WINDOW_MS)
    if count >= limit:
        retry = ((oldest or now) + RATE_WINDOW_MS - now) / 1000
        raise RelayError(
            "rate_limited",
            f"{sender!r} created {count} requests in the last minute; the limit is {limit}",
            retry_after=max(0.001, retry),
        )


def _check_queue(store: RequestStore, to: str, limits: Limits) -> None:
    """The queue cap (design.md §4): counted in the write transaction that would insert."""
    cap = limits.queue_cap()
    if cap and store.count_open_to(to, cap) >= cap:
        # the cap is this process's (RELAY_QUEUE_CAP): say what the queue holds, counted
        held = store.count_open_to(to, 2**31 - 1)
        raise RelayError(
            "capacity_exceeded",
            f"{to!r} has {held} open requests ({either(OPEN_STATES)}; cap {cap}): its "
            "queue is full",
            retry_after=QUEUE_RETRY_AFTER_S,
        )


def queued_object(store: Store, row: Row, duplicate: bool, now: int) -> JsonObject:
    """What `send` answers, and what `submit` shows a person (design.md §7): the request
    object, ``duplicate`` (an existing request answered a retry), and how its recipient
    can be reached now (``recipient_active``, ``wakeup``: advisory, never evidence of
    delivery)."""
    return {
        **request_object(row),
        "duplicate": duplicate,
        "recipient_active": store.active_session(row["to_peer"]) is not None,
        "wakeup": peers.wakeup(store, row["to_peer"], now),
    }


# The keys of `submit --json`, a receipt of the queued request (design.md §7).
RECEIPT_KEYS = (
    "id",
    "state",
    "created_at",
    "expires_at",
    "duplicate",
    "recipient_active",
    "wakeup",
)


def receipt(obj: JsonObject) -> JsonObject:
    """`submit --json`: the receipt, the keys ``RECEIPT_KEYS`` of ``queued_object``."""
    return {k: obj[k] for k in RECEIPT_KEYS}


def draft_object(draft_id: str, expires_at: int) -> JsonObject:
    """What `prepare` answers: the draft's id, and until when `submit` takes it."""
    return {"id": draft_id, "prepared_expires_at": clock.iso(expires_at)}


def already_sent_object(row: Row) -> JsonObject:
    """What `prepare` answers for an id that already names a request with the same content
    (a retry after the draft was submitted, or of an id `send` used): no draft to submit
    (``prepared_expires_at`` null), ``duplicate`` true and the request's state now."""
    return {
        "id": row["id"],
        "prepared_expires_at": None,
        "duplicate": True,
        "state": row["state"],
    }


def id_object(request_id: str) -> JsonObject:
    """What `relay id --json` answers."""
    return {"id": request_id}


def _new_work(
    caller: Caller,
    to: str,
    text: str,
    ttl_s: int,
    reply_within_s: int | None,
    on_lost: str,
    max_attempts: int,
    in_reply_to: str | None,
) -> tuple[str, dict[str, Any]]:
    """What `send` and `prepare` check first (``self_message``), then the work's
    fingerprint (design.md §4) and the columns it is stored with."""
    if caller.name == to:
        raise RelayError("self_message", f"{to!r} is you")
    fp = fingerprint(
        [caller.name, to, text, ttl_s, reply_within_s, on_lost, max_attempts, in_reply_to]
    )
    return fp, {
        "fingerprint": fp,
        "from_peer": caller.name,
        "to_peer": to,
        "from_session": caller.session["id"] if caller.session else None,
        "text": text,
        "text_bytes": len(text.encode("utf-8")),
        "text_hash": sha256_hex(text.encode("utf-8")),
        "ttl_seconds": ttl_s,
        "reply_within_seconds": reply_within_s,
        "on_lost": on_lost,
        "max_attempts": max_attempts,
        "in_reply_to": in_reply_to,
    }


# The parts of a request's fingerprint (design.md §4), as send's options name them.
_PARTS = (
    ("from_peer", "sender"),
    ("to_peer", "recipient (--to)"),
    ("text", "text"),
    ("ttl_seconds", "--ttl"),
    ("reply_within_seconds", "--reply-within"),
    ("on_lost", "--on-lost"),
    ("max_attempts", "--max-attempts"),
    ("in_reply_to", "--in-reply-to"),
)


def conflict_detail(row: Record, params: dict[str, Any]) -> str:
    """Which part of a retry differs from the stored request (request_id_conflict's
    detail, design.md §14). A pruned request keeps every part but its text, so a text
    that differs is inferred there, and said so."""
    pruned = "pruned" in row.keys() and bool(row["pruned"])  # (a draft has no such column)
    differ = []
    for column, label in _PARTS:
        if column == "text" and pruned:
            continue
        if row[column] != params[column]:
            if column == "text" and row["text"].rstrip() == params["text"].rstrip():
                label = (
                    "text (it differs only in trailing whitespace, e.g. the newline a "
                    "heredoc or echo adds)"
                )
            differ.append(label)
    what = ", ".join(differ) + (" differs" if len(differ) == 1 else " differ")
    if pruned:
        if differ:
            return f"{what}; its text was pruned, so relay cannot compare that"
        return (
            "it was pruned and only its fingerprint is kept: as every other part is "
            "the same, the text differs"
        )
    return what


def _existing(
    store: RequestStore, request_id: str, fp: str, params: dict[str, Any] | None = None
) -> Row | None:
    """Dedupe: the existing request for a same-content retry, or request_id_conflict."""
    row = store.get_request(request_id)
    if row is None:
        draft = store.get_draft(request_id)
        if draft is not None and draft["submitted_at"] is None:
            raise RelayError(
                "request_id_conflict",
                f"{request_id} is the id of an unsubmitted draft",
                detail=Said.of(relay("submit", request_id, changes=True), " queues it"),
            )
        return None
    if row["fingerprint"] != fp:
        raise RelayError(
            "request_id_conflict",
            f"{request_id} was used for different content"
            + (f": {conflict_detail(row, params)}" if params else ""),
        )
    return row


def send(
    store: Store,
    now: int,
    caller: Caller,
    *,
    request_id: str | None,
    limits: Limits,
    **work: Any,
) -> JsonObject:
    """Create a request, or return the existing one for a same-content retry, within this
    process's ``limits`` (its context's). ``work``: to, text, ttl_s, reply_within_s,
    on_lost, max_attempts, in_reply_to."""
    fp, params = _new_work(caller, **work)
    to, in_reply_to = work["to"], work["in_reply_to"]
    request_id = request_id or new_id()
    row = _existing(store, request_id, fp, params)
    if row is not None:
        renew(store, caller, now)  # a success renews an active session (a ghost stays as it is)
        return queued_object(store, row, True, now)
    require_live(store, caller)
    depth = _common_checks(store, caller, to, in_reply_to)
    _check_rate(store, caller.name, now, limits)
    _check_queue(store, to, limits)
    row = _create(store, now, caller, request_id, params, depth)
    renew(store, caller, now)
    return queued_object(store, row, False, now)


SAME_TEXT_SHOWN = 3  # open requests with the same text a send names at most


def same_text_open(store: RequestStore, row: JsonObject) -> list[Row]:
    """Open requests, other than the new one ``row`` (a request object), from its sender
    to its recipient with its text (design.md §14): a retry whose id has a typo queued the
    same work twice. The new request stands; this only lets the send say so."""
    stored = store.get_request(row["id"])
    if stored is None or stored["text_hash"] is None:
        return []
    return store.open_same_text(
        stored["to_peer"],
        stored["from_peer"],
        stored["text_hash"],
        stored["text"],
        stored["id"],
        SAME_TEXT_SHOWN,
    )


def _create(
    store: RequestStore,
    now: int,
    caller: Caller,
    request_id: str,
    params: dict[str, Any],
    depth: int,
) -> Row:
    t = transition(None, "send")
    row = {
        **params,
        "id": request_id,
        "state": t.to_state,
        "reason": t.reason,
        "created_at": now,
        "updated_at": now,
        "expires_at": now + params["ttl_seconds"] * 1000,
        "attempts": 0,
        "depth": depth,
        "pruned": 0,
    }
    store.insert_request(row)
    store.add_event(request_id, now, None, t.to_state, t.reason, caller.name, None)
    return get(store, request_id)


def prepare(
    store: Store, now: int, caller: Caller, *, draft_id: str | None, **work: Any
) -> JsonObject:
    """Store a draft of the ``work`` (as for ``send``) and issue its id; nothing is queued."""
    fp, params = _new_work(caller, **work)
    to, in_reply_to = work["to"], work["in_reply_to"]
    draft_id = draft_id or new_id()
    # Dedupe as `send` does (design.md §6): an id that already names a request (sent by
    # `send`, or a draft already submitted) is answered from that request when the content
    # is the same, and refused naming what differs when it is not.
    row = store.get_request(draft_id)
    if row is not None:
        if row["fingerprint"] != fp:
            raise RelayError(
                "request_id_conflict",
                f"{draft_id} was already sent with different content: "
                f"{conflict_detail(row, params)}",
            )
        renew(store, caller, now)
        return already_sent_object(row)
    draft = store.get_draft(draft_id)
    if draft is not None:
        if draft["fingerprint"] != fp:
            raise RelayError(
                "request_id_conflict",
                f"{draft_id} is a prepared draft with different content: "
                f"{conflict_detail(draft, params)}",
            )
        if draft["expires_at"] <= now:
            raise RelayError("prepared_expired", f"draft {draft_id} expired unsubmitted")
        renew(store, caller, now)
        return draft_object(draft_id, draft["expires_at"])
    require_live(store, caller)
    depth = _common_checks(store, caller, to, in_reply_to)
    if store.count_open_drafts(caller.name, now) >= MAX_OPEN_DRAFTS:
        oldest = store.oldest_open_draft_expiry(caller.name, now) or now
        raise RelayError(
            "capacity_exceeded",
            f"{caller.name!r} has {MAX_OPEN_DRAFTS} unsubmitted drafts",
            retry_after=max(0.001, (oldest - now) / 1000),
        )
    params.pop("text_hash")  # a request's column (design.md §14); submit computes it
    store.insert_draft(
        {
            **params,
            "id": draft_id,
            "depth": depth,
            "created_at": now,
            "expires_at": now + DRAFT_TTL_MS,
        }
    )
    renew(store, caller, now)
    return draft_object(draft_id, now + DRAFT_TTL_MS)


def submit(store: Store, now: int, caller: Caller, draft_id: str, limits: Limits) -> JsonObject:
    """Queue a prepared draft, within this process's ``limits``; a repeat answers the
    request as it is now (``duplicate``).
    Returns ``queued_object``, as `send`; `submit --json` prints its ``receipt``."""
    draft_id = resolve_ref(store, draft_id, drafts=True)
    row = store.get_request(draft_id)
    if row is not None:
        if row["from_peer"] != caller.name:
            require_live(store, caller)
            raise RelayError("not_owner", f"{draft_id} was sent by {row['from_peer']!r}")
        renew(store, caller, now)
        return queued_object(store, row, True, now)
    draft = store.get_draft(draft_id)
    if draft is None:
        # relay makes the check the hint suggests: no request has this id either
        raise RelayError(
            "prepared_not_found",
            f"no draft has the id {draft_id}, and relay looked: no request has it either, "
            "so nothing was queued under it here",
        )
    require_live(store, caller)
    if draft["from_peer"] != caller.name:
        raise RelayError("not_owner", f"{draft_id} was prepared by {draft['from_peer']!r}")
    if draft["expires_at"] <= now:
        raise RelayError(
            "prepared_expired",
            f"draft {draft_id} expired unsubmitted, and relay looked: no request has its id, "
            "so nothing was queued under it",
        )
    _check_rate(store, caller.name, now, limits)
    _check_queue(store, draft["to_peer"], limits)
    params = {
        k: draft[k]
        for k in (
            "fingerprint",
            "from_peer",
            "to_peer",
            "text",
            "text_bytes",
            "ttl_seconds",
            "reply_within_seconds",
            "on_lost",
            "max_attempts",
            "in_reply_to",
        )
    }
    params["from_session"] = caller.session["id"] if caller.session else draft["from_session"]
    params["text_hash"] = sha256_hex(draft["text"].encode("utf-8"))
    row = _create(store, now, caller, draft_id, params, draft["depth"])
    store.mark_draft_submitted(draft_id, now)
    renew(store, caller, now)
    return queued_object(store, row, False, now)
