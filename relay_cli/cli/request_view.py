"""How a request looks to a person (design.md §14): its fields, the note under it, its
events, and the columns of the request tables. The JSON shape is ``objects.request_object``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.output import Col, Output, iso_age, size
from ..requests import states
from ..requests.states import STATE_STYLES

if TYPE_CHECKING:
    from ..core.output import JsonObject

FIELD_STYLES = {"state": STATE_STYLES}  # `show`: the state line coloured as in the tables

ALREADY_SENT = "already sent, nothing new queued: this is the existing request as it is now"


def yes_no(value: object) -> object:
    return "yes" if value is True else "no" if value is False else value


def _final_label(state: str) -> str:
    """The label of finished_at: a delivery_unknown request reached a final state, but
    nobody knows whether its work finished (design.md §1)."""
    return "unknown since" if state == "delivery_unknown" else "finished"


def request_fields(
    out: Output, obj: JsonObject, now: int, extra: tuple[str, ...] = ()
) -> list[tuple[str, object]]:
    pairs = [
        ("id", obj["id"]),
        ("state", obj["state"]),
        ("reason", obj["reason"]),
        ("from", obj["from"]),
        ("to", obj["to"]),
        (
            "created",
            out.until(obj["created_at"], now)
            if out.terminal
            else f"{obj['created_at']} ({iso_age(obj['created_at'], now)} ago)",
        ),
    ]
    # A deadline is shown while it can still move the request: expiry while queued, the
    # reply deadline while acknowledged (the claim lease is null outside delivered).
    live = {
        "expires_at": obj["state"] == "queued",
        "reply_deadline_at": obj["state"] == "acknowledged",
    }
    for key, label in (
        ("expires_at", "expires"),
        ("delivered_at", "delivered"),
        ("acknowledged_at", "acknowledged"),
        ("lease_expires_at", "claim lease until"),
        ("reply_deadline_at", "reply due by"),
        ("finished_at", _final_label(obj["state"])),
    ):
        if obj.get(key) and live.get(key, True):
            pairs.append((label, out.until(obj[key], now)))
    if obj.get("in_reply_to"):
        pairs.append(("in reply to", obj["in_reply_to"]))
    pairs.append(("size", size(obj["text_bytes"])))
    if obj["on_lost"] == "redeliver" or obj["attempts"] > 1:
        pairs.append(
            ("attempts", f"{obj['attempts']} of {obj['max_attempts']} (on_lost={obj['on_lost']})")
        )
    if obj.get("detail"):
        pairs.append(("detail", obj["detail"]))
    holder = obj.get("holder")
    if holder:
        pairs.append(("held by", _holder_words(out, holder, now)))
    if obj.get("pruned"):
        pairs.append(("pruned", "yes: text and reply were removed, the outcome is kept"))
    for key in extra:
        if key in obj:
            value = yes_no(obj[key])
            if key == "wakeup" and isinstance(value, str) and value in WAKEUP_WORDS:
                value = f"{value} ({WAKEUP_WORDS[value]})"
            pairs.append((key.replace("_", " "), value))
    return pairs


def _holder_words(out: Output, h: JsonObject, now: int) -> str:
    """``codex-1: needs_person (permission) since 3m ago (14:05): Bash``: who holds the
    request and what its session is doing (design.md §19); the runtime's words last."""
    what = h["activity"] + (f" ({h['activity_cause']})" if h.get("activity_cause") else "")
    since = f" since {out.when(h['activity_since'], now)}" if h.get("activity_since") else ""
    said = f": {h['activity_detail']}" if h.get("activity_detail") else ""
    return f"{h['peer']}: {what}{since}{said}"


# What each `wakeup` value says to a person reading send's or submit's answer (design.md
# §12): how the recipient learns of the request, never evidence that it did.
WAKEUP_WORDS = {
    "waiter": "a waiter wakes it now",
    "hook": "its hook tells it next turn",
    "polling": "it waits in claim --wait",
    "not_configured": "nothing wakes it",
}

# The note under a duplicate answer whose state has none of its own (design.md §14): the
# retry queued nothing, and what that state means for sending the work again.
DUPLICATE_NOTES = {
    "expired": "nobody claimed it before its TTL, so it was not delivered; this retry "
    "queued nothing: to send the work again, use a new id",
    "cancelled": "the sender withdrew it while it was queued, so it was not delivered; this "
    "retry queued nothing: to send the work again, use a new id",
    "failed": "it failed (its reason and detail say why); this retry queued nothing: to "
    "try again, send with a new id",
    "rejected": "the recipient declined it and, by its word, did nothing; this retry queued "
    "nothing: to ask again, send with a new id",
}


def note(out: Output, obj: JsonObject) -> None:
    note = states.note(obj["state"], obj["reason"], obj["attempts"])
    if note is None and obj.get("duplicate") is True:
        note = DUPLICATE_NOTES.get(obj["state"])
    if note:
        out.para(f"note: {obj['state']}: {note}")


def render_request(out: Output, obj: JsonObject, now: int, extra: tuple[str, ...] = ()) -> None:
    out.fields(request_fields(out, obj, now, extra), styles=FIELD_STYLES)
    if obj.get("wakeup") == "not_configured" and obj["state"] == "queued" and "wakeup" in extra:
        out.para(
            f"wakeup: nothing wakes {obj['to']}: an agent sees this at its next relay claim "
            "or relay inbox, a person in relay inbox or relay watch (no wakeup value is "
            "evidence of delivery)"
        )
    note(out, obj)


def render_full(out: Output, obj: JsonObject, now: int, extra: tuple[str, ...] = ()) -> None:
    out.fields(request_fields(out, obj, now, extra), styles=FIELD_STYLES)
    if obj.get("text") is not None:
        out.message(obj["from"], obj["text"])
    if obj.get("reply") is not None:
        out.message(obj["to"], obj["reply"], label="reply")
    note(out, obj)
    if "events" in obj:
        out.table(
            EVENT_COLUMNS,
            [
                [out.when(e["at"], now), e["to_state"], e["reason"], e["actor"], e["detail"]]
                for e in obj["events"]
            ],
            title="events (each row: the state it moved to; the first is its creation)",
        )


# One line per row at 80 columns (design.md §14): ids, states and times stay whole, the
# rest shrinks; names and reasons keep their start and end (``claude…ntend``), so two
# names that differ only at the end, and the four reasons of delivery_unknown, stay apart.
STATE_COL = Col("state", fixed=True, styles=STATE_STYLES)
EVENT_COLUMNS = [
    Col("at", fixed=True),
    STATE_COL,
    Col("reason", min=14, middle=True),
    Col("actor", min=10, first=True, middle=True),
    Col("detail", min=10, first=True),
]
# At 80 columns (design.md §14): a reason stays whole (a person acts on it), and so does
# since; names give way, whole words first, and when even that does not fit, `from` is
# left out before `to` (who holds the work), then the reason.
LIST_COLUMNS = [
    Col("id", fixed=True),
    STATE_COL,
    Col("from", min=10, middle=True, drop=1),
    Col("to", min=12, middle=True, drop=3),
    Col("reason", fixed=True, drop=2),
    Col("since", fixed=True),
]
# Piped, `list` keeps every column whole, with the creation time as well (tab-separated).
LIST_COLUMNS_PIPED = [*LIST_COLUMNS, Col("created")]
INBOX_COLUMNS = [
    Col("id", fixed=True),
    Col("from", min=10, middle=True),
    Col("created", fixed=True),
    Col("size", fixed=True, justify="right"),
]
