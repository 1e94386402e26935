"""The one public shape of a request and of its events (design.md §7): every command that
prints one uses these serializers."""

from __future__ import annotations

from ..core import clock

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Record


AUTHORITY = "external_ai_message"


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


class _AnyRow(dict):  # type: ignore[type-arg]  # (dict[str, Any]: no typing at run time)
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
