"""The request lifecycle (design.md §4–§6) as plain functions over a store: what a
caller gives is validated, requests are sent, read and acted on, and one serializer
gives each its public shape.

Every function that reads or writes runs inside a transaction that ``due.unit()``
opened, after the due time-based transitions were applied (``due``), and either
completes or raises a ``RelayError`` (the transaction then rolls back, so a refused
command changes nothing). Commands that block are in ``waiting``.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from ..core import clock
from ..core.context import Limits
from ..core.digest import sha256_hex
from ..core.errors import RelayError
from ..core.limits import (
    CLAIMED_STATES,
    DRAFT_TTL_S,
    FINAL_STATES,
    MAX_ATTEMPTS_RANGE,
    MAX_DEPTH,
    MAX_OPEN_DRAFTS,
    MAX_TEXT_BYTES,
    MIN_PREFIX,
    OPEN_STATES,
    QUEUE_RETRY_AFTER_S,
    RATE_WINDOW_MS,
    STATES,
)
from ..core.person import person, require_terminal
from . import peers
from .peers import Caller, renew, require_live, require_session
from .states import apply, transition

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Record, RequestStore, Row, Store

DRAFT_TTL_MS = DRAFT_TTL_S * 1000
ON_LOST = ("unknown", "redeliver")

AUTHORITY = "external_ai_message"


# --------------------------------------------------------------------------- validation
def new_id() -> str:
    """A fresh request id: a random UUID (``relay id``, and ``send`` without --id)."""
    return str(uuid.uuid4())


# uuid.UUID reads its 32 digits with int(), which takes a sign and non-ASCII digits too
_UUID_TEXT = r"(?:urn:uuid:)?\{?[0-9a-fA-F-]+\}?"  # compiled at first use (re caches it)


def _canonical(value: object) -> str:
    """A full UUID in canonical lowercase form; ValueError for anything else."""
    s = str(value).strip()
    return str(uuid.UUID(s if re.fullmatch(_UUID_TEXT, s, re.ASCII) else "not a UUID"))


def validate_id(value: str, what: str = "id") -> str:
    """A full id, in canonical lowercase form. Where an id goes into a fingerprint or names
    a new request (``send --id``, ``prepare --id``, ``--in-reply-to``) only this is accepted."""
    try:
        canonical = _canonical(value)
    except (ValueError, AttributeError, TypeError):
        short = value.strip().lower() if isinstance(value, str) else ""
        raise RelayError(
            "invalid_id",
            f"{what} {value!r} is not a UUID",
            detail=f"{what} takes a full id, not a prefix: it names new work or goes into the "
            "fingerprint, where a prefix could mean another request tomorrow; "
            f"`relay show {short}` prints the whole id"
            if _is_prefix(short)
            else None,
        ) from None
    if canonical in RESERVED_IDS:
        # a placeholder, not a chosen id: every script whose id variable fell back to it
        # would share one request (design.md §14)
        raise RelayError(
            "invalid_id",
            f"{what} {canonical} is the "
            f"{RESERVED_IDS[canonical]} UUID, a placeholder rather than an id",
        )
    return canonical


RESERVED_IDS = {
    "00000000-0000-0000-0000-000000000000": "nil",
    "ffffffff-ffff-ffff-ffff-ffffffffffff": "max",
}


_CANONICAL = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
_HEX = frozenset("0123456789abcdef")
MAX_CANDIDATES = 10


def _is_prefix(s: str) -> bool:
    """``s`` (lowercase) is a prefix of at least MIN_PREFIX characters of a canonical id."""
    return MIN_PREFIX <= len(s) < len(_CANONICAL) and all(
        c == "-" if t == "-" else c in _HEX for c, t in zip(s, _CANONICAL[: len(s)], strict=True)
    )


def validate_ref(value: str, what: str = "id") -> str:
    """An id that names an existing request (design.md §14): a full id (returned canonical,
    36 characters) or a prefix of at least 8 characters of a canonical id (returned in
    lowercase, shorter than 36). ``resolve_ref`` turns a prefix into the id it names."""
    s = value.strip().lower() if isinstance(value, str) else ""
    if _is_prefix(s):
        return s
    try:
        return _canonical(value)
    except (ValueError, AttributeError, TypeError):
        raise RelayError(
            "invalid_id",
            f"{what} {value!r} is not a UUID, nor a prefix of at least "
            f"{MIN_PREFIX} characters of one",
        ) from None


def resolve_ref(store: RequestStore, ref: str, *, drafts: bool = False, what: str = "id") -> str:
    """The full id that ``ref`` (from ``validate_ref``) names, as git resolves a short hash:
    a full id is itself; a prefix must match exactly one request (tombstones included; with
    ``drafts``, unsubmitted drafts too): none is ``request_not_found``, several are
    ``ambiguous_id`` listing them. The lookup is a range scan of the primary key."""
    if len(ref) == len(_CANONICAL):
        return ref
    found: dict[str, str] = {
        r["id"]: f"{r['state']}, {r['from_peer']} -> {r['to_peer']}"
        for r in store.requests_with_prefix(ref, MAX_CANDIDATES + 1)
    }
    if drafts:
        for r in store.drafts_with_prefix(ref, MAX_CANDIDATES + 1):
            found.setdefault(r["id"], f"unsubmitted draft, {r['from_peer']} -> {r['to_peer']}")
    if not found:
        kind = "request or draft" if drafts else "request"
        raise RelayError("request_not_found", f"no {kind} id starts with {ref}")
    if len(found) == 1:
        return next(iter(found))
    ids = sorted(found)
    listed = "; ".join(f"{i} ({found[i]})" for i in ids[:MAX_CANDIDATES])
    more = len(ids) > MAX_CANDIDATES
    raise RelayError(
        "ambiguous_id",
        f"{what} {ref} matches {'more than ' if more else ''}{min(len(ids), MAX_CANDIDATES)} "
        "requests",
        detail=f"candidates: {listed}{'; and more' if more else ''}",
    )


def validate_text(data: str | bytes, what: str = "text") -> str:
    """UTF-8, 1..32768 bytes, no NUL (design.md §4). Returns the text."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:
            raise RelayError("invalid_text", f"{what} is not valid UTF-8") from None
    else:
        raw = bytes(data)
    if not raw:
        raise RelayError("invalid_text", f"{what} is empty")
    if len(raw) > MAX_TEXT_BYTES:  # (stdin and files are read only this far)
        raise RelayError("text_too_large", f"{what} is over {MAX_TEXT_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RelayError("invalid_text", f"{what} is not valid UTF-8") from None
    if "\x00" in text:
        raise RelayError("invalid_text", f"{what} contains a NUL byte")
    if not text.strip():  # as empty as no text: an empty variable or heredoc (design.md §4)
        raise RelayError(
            "invalid_text",
            f"{what} is only whitespace (spaces, tabs or newlines): there is nothing to "
            "read; was the variable or heredoc that holds it empty?",
        )
    return text


def one_of(value: str, choices: tuple[str, ...], what: str) -> str:
    """``value`` when it is one of ``choices``, else ``usage_error`` naming them."""
    if value not in choices:
        raise RelayError(
            "usage_error", f"{what} must be one of {', '.join(choices)}, not {value!r}"
        )
    return value


def validate_on_lost(value: str) -> str:
    return one_of(value, ON_LOST, "--on-lost")


def validate_max_attempts(value: int) -> int:
    low, high = MAX_ATTEMPTS_RANGE
    if not isinstance(value, int) or not low <= value <= high:
        raise RelayError("usage_error", f"--max-attempts must be {low} to {high}, not {value!r}")
    return value


def validate_state(value: str) -> str:
    return one_of(value, STATES, "--state")


def validate_states(values: list[str] | None) -> list[str]:
    return [validate_state(v) for v in values or []]


def _either(words: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else "".join(words)


def fingerprint(values: list[Any]) -> str:
    import json  # imported here: `relay --help` and `relay id` need no JSON (start-up)

    doc = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    return sha256_hex(doc.encode("utf-8"))


# --------------------------------------------------------------------------- serializer
def request_object(row: Record, *, text: bool = False, reply: bool = False) -> JsonObject:
    """The one public shape of a request (design.md §7). Every command that prints one uses it."""
    obj = {
        "id": row["id"],
        "from": row["from_peer"],
        "to": row["to_peer"],
        "state": row["state"],
        "reason": row["reason"],
        "created_at": clock.iso(row["created_at"]),
        "updated_at": clock.iso(row["updated_at"]),
        "expires_at": clock.iso(row["expires_at"]),
        "delivered_at": clock.iso(row["delivered_at"]),
        "acknowledged_at": clock.iso(row["acknowledged_at"]),
        "finished_at": clock.iso(row["finished_at"]),
        "lease_expires_at": clock.iso(row["lease_expires_at"])
        if row["state"] == "delivered"
        else None,
        "reply_deadline_at": clock.iso(row["reply_deadline_at"]),
        "attempts": row["attempts"],
        "max_attempts": row["max_attempts"],
        "on_lost": row["on_lost"],
        "in_reply_to": row["in_reply_to"],
        "depth": row["depth"],
        "text_bytes": row["text_bytes"],
        "detail": row["detail"],
        "pruned": bool(row["pruned"]),
        "authority": AUTHORITY,
        "user_approval": False,
    }
    if text:
        obj["text"] = row["text"]
    if reply:
        obj["reply"] = row["reply"]
    return obj


def event_object(row: Record) -> JsonObject:
    return {
        "at": clock.iso(row["at"]),
        "from_state": row["from_state"],
        "to_state": row["to_state"],
        "reason": row["reason"],
        "actor": row["actor"],
        "detail": row["detail"],
    }


# --------------------------------------------------------------------------- sending
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
            f"{to!r} has {held} open requests ({_either(OPEN_STATES)}; cap {cap}): its "
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
                f"{request_id} is the id of an unsubmitted draft; `relay submit {request_id}`",
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
    row = _create(store, now, caller, draft_id, params, draft["depth"])
    store.mark_draft_submitted(draft_id, now)
    renew(store, caller, now)
    return queued_object(store, row, False, now)


# ------------------------------------------------------------------- reading requests
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


# ------------------------------------------------------------------ acting on requests
def held_unacked(store: RequestStore, caller: Caller) -> Row | None:
    """The oldest request this session claimed and has not acknowledged (design.md §6)."""
    if caller.session is None:
        return None
    held = [
        r for r in store.in_flight_of_session(caller.session["id"]) if r["state"] == "delivered"
    ]
    return min(held, key=lambda r: (r["delivered_at"], r["id"])) if held else None


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


def held_note(store: RequestStore, caller: Caller, ids: list[str]) -> str:
    """The sentence a claim adds when this session holds unacknowledged requests (``ids``,
    from ``unacked_ids``), with the command that recovers a lost answer: `claim --again`
    when it would show one of them, else the attempt id or, for a claim made without one,
    `relay show`, since relay cannot know whose each is (design.md §6)."""
    claims = store.claims_of_session(caller.session["id"]) if caller.session else []
    plain = [row["id"] for _, row in _plain_held(store, caller, claims)]
    shown = plain[0] if len(plain) == 1 else None
    with_attempt = {c["request_id"] for c in claims if c["attempt"]}
    unnamed = [i for i in ids if i != shown and i not in with_attempt]
    tried = [i for i in ids if i != shown and i in with_attempt]
    how = []
    if shown in ids:
        how.append(
            "if that claim's answer was lost, `relay claim --again` shows it"
            if len(ids) == 1
            else f"`relay claim --again` shows {shown}, claimed without --attempt"
        )
    if unnamed:
        one = unnamed[0] if len(unnamed) == 1 else "ID"
        how.append(
            f"{', '.join(unnamed)} "
            + ("was" if len(unnamed) == 1 else "were")
            + f" claimed without --attempt: if yours lost its answer, `relay show {one}` "
            f"prints it, then `relay ack {one}` (unless another claimer of this session "
            "holds it)"
        )
    if tried:
        how.append(
            f"{', '.join(tried)} "
            + ("was" if len(tried) == 1 else "were")
            + " claimed with --attempt: a retry with the same ID shows its own"
        )
    return f"this session also holds {', '.join(ids)}, claimed and not acked; " + "; ".join(how)


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


def _recovered(store: Store, now: int, caller: Caller, row: Row) -> JsonObject:
    renew(store, caller, now)
    return {
        **request_object(row, text=True),
        "duplicate": True,
        "held_unacked": unacked_ids(store, caller, but=row["id"]),
    }


def _what_became(row: Row, claim: Row, caller: Caller, which: str, then: str = "") -> RelayError:
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
    if state == "queued":
        what = f"it was queued again: `relay claim --id {rid}` takes it"
    elif state == "delivery_unknown":
        what = (
            "relay cannot know whether it was worked on; if you never saw its text, you "
            f"did not start it: tell the person, who can settle it with `relay resolve {rid} "
            "--outcome requeue`"
        )
    elif state in FINAL_STATES:
        what = f"nothing is left to do for it: `relay show {rid} --events` shows its history"
    elif mine and state == "acknowledged":
        what = (
            "it was acked in this session, so whoever acked it read its text; that claimer "
            f"finishes it (`relay reply {rid} -`, or relay fail or relay reject)"
        )
    else:
        what = "another claim holds it now: leave it to that claimer"
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
    if row is None:  # removed with its claims by prune; kept for a store edited by hand
        raise RelayError("request_not_found", f"no request {claim['request_id']}")
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
    if len(held) == 1:
        return _recovered(store, now, caller, held[0][1])
    if len(held) > 1:
        ids = ", ".join(row["id"] for _, row in held)
        raise RelayError(
            "state_conflict",
            f"this session holds {len(held)} requests claimed without --attempt and not "
            f"acked ({ids}): relay cannot tell which claim was yours, so it shows none",
            detail="ask the claimers that share this session which they hold: yours is "
            "the one none of them has (`relay show ID` prints it, then `relay ack ID`); "
            "claim with `relay claim --attempt ID` (an id from `relay id`, the same on a "
            "retry) so that a retry finds its own claim",
        )
    last = store.get_request(plain[-1]["request_id"]) if plain else None
    if last is not None:
        later = any(c["attempt"] for c in claims if c["claimed_at"] >= plain[-1]["claimed_at"])
        raise _what_became(
            last,
            plain[-1],
            caller,
            "the latest claim this session made without --attempt",
            "; this session also made claims with --attempt: a retry with its own id "
            "(`relay claim --again --attempt ID`) shows what one took"
            if later
            else "; no later claim of this session is stored: `relay claim` takes one",
        )
    if claims:
        raise RelayError(
            "nothing_to_claim",
            f"every claim this session of {caller.name!r} made ({len(claims)}) had an "
            "attempt id: only a retry with that id shows what it took",
            detail="`relay claim --again --attempt ID` with the id the lost claim used",
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
            f"earlier sessions of {caller.name} claimed {took}: "
            "`relay show ID --events` says what became of one"
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
            f"claim attempt {attempt} took nothing: no claim with it is stored (a claim "
            "and its attempt id are stored together or not at all)",
            detail=f"`relay claim --attempt {attempt}` takes the oldest queued request now",
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
                detail=f"this session claimed it already: `relay show {row['id']}` shows its "
                "text; finish it with ack, then reply, fail or reject",
            )
    elif again:  # a retry whose answer was lost: the request held, never a new one
        return _again(store, now, caller, session)
    else:
        row = store.oldest_queued_for(caller.name)
        if row is None:
            return None
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
        "held_unacked": unacked_ids(store, caller, but=new["id"]),
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
                detail=f"take it first: `relay claim --id {row['id']}`"
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


RESOLVE_OUTCOMES = ("completed", "failed", "requeue")


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
    fields = {"notified_at": None}  # the sender learns the settled outcome (notices)
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


class _AnyRow(dict[str, Any]):
    """A stand-in database row: every column reads as empty, so the real serializer can
    tell us which fields it prints without a database."""

    def __missing__(self, key: str) -> Any:
        return {"state": "queued", "pruned": 0}.get(key)


def request_fields() -> JsonObject:
    """The request object's keys, from ``request_object`` itself (for `relay schema` and
    `relay export`)."""
    always = list(request_object(_AnyRow()))
    full = list(request_object(_AnyRow(), text=True, reply=True))
    sample = request_object(_AnyRow())
    return {
        "always": always,
        "where_listed": [k for k in full if k not in always],
        "constant": {k: sample[k] for k in ("authority", "user_approval")},
        "timestamps": "RFC 3339 UTC with milliseconds and Z, e.g. 2026-11-29T18:52:01.123Z",
    }
