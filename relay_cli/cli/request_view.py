"""How a request looks to a person (design.md §14): its fields, the note under it, its
events, and the columns of the request tables. The JSON shape is ``lifecycle.request_object``."""

from __future__ import annotations

from ..core.output import STATE_STYLES, Col, Output, iso_age, size
from ..requests import states

ALREADY_SENT = "already sent, nothing new queued: this is the existing request as it is now"


def yes_no(value):
    return "yes" if value is True else "no" if value is False else value


def _final_label(state: str) -> str:
    """The label of finished_at: a delivery_unknown request reached a final state, but
    nobody knows whether its work finished (design.md §1)."""
    return "unknown since" if state == "delivery_unknown" else "finished"


def request_fields(
    out: Output, obj: dict, now: int, extra: tuple[str, ...] = ()
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
    if obj.get("pruned"):
        pairs.append(("pruned", "yes: text and reply were removed, the outcome is kept"))
    for key in extra:
        if key in obj:
            pairs.append((key.replace("_", " "), yes_no(obj[key])))
    return pairs


def note(out: Output, obj: dict) -> None:
    note = states.note(obj["state"], obj["reason"], obj["attempts"])
    if note:
        out.para(f"note: {obj['state']}: {note}")


def render_request(out: Output, obj: dict, now: int, extra: tuple[str, ...] = ()) -> None:
    out.fields(request_fields(out, obj, now, extra))
    note(out, obj)


def render_full(out: Output, obj: dict, now: int, extra: tuple[str, ...] = ()) -> None:
    out.fields(request_fields(out, obj, now, extra))
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
LIST_COLUMNS = [
    Col("id", fixed=True),
    STATE_COL,
    Col("from", min=10, middle=True),
    Col("to", min=10, middle=True),
    Col("reason", min=14, middle=True),
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
