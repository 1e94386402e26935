"""What the web view shows (design.md §17): a watch snapshot as the page's JSON document.

``page_doc`` is the one function that turns what ``watch.gather`` read into what the page
renders; the server sends the browser nothing else about the database (a request's text
is read only when the person asks for it: ``text_doc``). The order is watch's: what needs
a person first (agents that wait for one, design.md §19, then requests and ledger
entries), then the requests in lanes by state, the ledger's open entries, the peers with
their activity and the recent transitions. Each agent's activity comes from the snapshot's
one read of it (``requests/activity.py``'s ``snapshot``, which ``watch.gather`` makes).

Every string a peer or a runtime supplied (names, reasons, keys, commands, directories,
texts, what a runtime said of a tool or a question) is made inert here as on a terminal (``output.inert_line``: control, bidi and
zero-width characters shown as escapes); the page then puts strings into the document as
text only, never as markup. The commands a person should run are plain strings under
``commands`` (and ``more``): each a printed-command value (``core.command``, design.md
§14) rendered on one line with the scope flags ``relay web`` was given on its command line,
one whole command per choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import clock
from ...core.command import NO_SCOPE, Command, Scope, relay
from ...core.limits import OPEN_STATES, SILENCE_NOTE_MS
from ...core.output import inert, inert_line, unique_prefixes
from ...ledger import entries
from ...ledger.entries import command_text, reruns_by_itself
from ...requests import activity
from ...requests.states import NEXT_DEADLINE, settle
from ..watch import next_deadline

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...core.output import JsonObject
    from ...requests.activity import SessionActivity
    from ..watch import Snapshot

# The "recently final" lane: requests that became final within this many seconds.
RECENT_FINAL_S = 3600


def page_doc(snap: Snapshot, where: str, scope: Scope = NO_SCOPE) -> JsonObject:
    """The page's document for ``snap``; ``where`` names the home or database shown (a
    URL without its password); ``scope``: the flags every command shown carries."""

    def texts(commands: tuple[Command, ...]) -> list[str]:
        return [c.text(scope) for c in commands]

    def listing(*args: str) -> str:
        return relay(*args).text(scope)

    now = snap.now
    shown = snap.unknown + snap.open + snap.final
    short = unique_prefixes(
        [r["id"] for r in shown]
        + [e["request_id"] for e in snap.events]
        + [i for a in snap.needs for i in a.holds]
    ).__getitem__
    # each peer's newest session's activity (a peer with no session: unknown)
    acts = {a.peer: a.activity for a in snap.agents}
    counts = snap.counts
    unknown_total = counts.get("delivery_unknown", 0)
    effect_unknown = [e for e in snap.effect_unknown if not reruns_by_itself(e)]
    needs = [
        _section(
            "agents",
            "an agent waits for a person, or its turn failed while it holds claimed work: "
            "answer it in its own window",
            len(snap.needs),
            [_agent_row(a, short) for a in snap.needs],
            listing("peers", "list"),
        ),
        _section(
            "delivery_unknown",
            "relay cannot know whether it was done: check, then settle it",
            unknown_total,
            [
                {
                    **_request_row(r, short),
                    "commands": texts(settle(r["id"]).commands),
                }
                for r in snap.unknown
            ],
            listing("list", "--state", "delivery_unknown"),
        ),
        _section(
            "effect_unknown",
            "relay cannot know whether the command's effect happened: check, then settle it",
            len(effect_unknown),
            [
                {**_entry_row(e), "commands": texts(entries.settle(e["key"]).commands)}
                for e in effect_unknown
            ],
            listing("ledger", "list", "--state", "effect_unknown"),
        ),
        _section(
            "awaiting_approval",
            "a command waits for a person's decision",
            len(snap.awaiting),
            [
                {
                    **_entry_row(e),
                    "commands": texts(entries.decide(e["key"]).commands),
                }
                for e in snap.awaiting
            ],
            listing("ledger", "list", "--state", "awaiting_approval"),
        ),
    ]
    oldest_first = list(reversed(snap.open))
    lanes = [
        _section(
            state,
            None,
            counts.get(state, 0),
            [_request_row(r, short) for r in oldest_first if r["state"] == state],
            listing("list", "--state", state),
        )
        for state in OPEN_STATES  # (queued, delivered, acknowledged: as work moves)
    ]
    lanes.append(
        {
            **_section(
                "recently_final",
                None,
                len(snap.final),
                [_request_row(r, short) for r in snap.final],
                None,
            ),
            "within_s": snap.final_within_s,
        }
    )
    return {
        "at": clock.iso(now),
        "where": inert_line(where),
        "counts": {
            "needs_you": len(snap.needs),
            "delivery_unknown": unknown_total,
            "effect_unknown": len(effect_unknown),
            "awaiting_approval": len(snap.awaiting),
            "open": snap.open_total,
            **{state: counts.get(state, 0) for state in OPEN_STATES},
        },
        "needs_person": needs,
        "lanes": lanes,
        "ledger": _section(
            "ledger",
            None,
            len(snap.ledger_open),
            [_entry_row(e) for e in snap.ledger_open],
            listing("ledger", "list"),
        ),
        "peers": [
            {
                "name": inert_line(p["name"]),
                "kind": inert_line(p["kind"]),
                "active": p["active"],
                "lease_expires_at": p["lease_expires_at"],
                "last_seen_at": p["last_seen_at"],
                "wakeup": p["wakeup"],
                **_activity(acts.get(p["name"], activity.of_session(None, now))),
            }
            for p in sorted(snap.peers, key=lambda p: not p["active"])
        ],
        # a working agent's "no event for 12m" is said from this long on (design.md §19)
        "silence_note_s": SILENCE_NOTE_MS // 1000,
        "events": [
            {
                "at": e["at"],
                "id": e["request_id"],
                "short": short(e["request_id"]),
                "state": e["to_state"],
                "reason": _maybe(e["reason"]),
                "actor": inert_line(e["actor"]),
            }
            for e in snap.events
        ],
    }


def text_doc(request: JsonObject) -> JsonObject:
    """A request's text (and reply) as the page shows it when asked: inert, newlines kept."""
    return {
        "id": request["id"],
        "state": request["state"],
        "text": None if request.get("text") is None else inert(request["text"]),
        "reply": None if request.get("reply") is None else inert(request["reply"]),
        "pruned": request["pruned"],
    }


def _section(
    name: str, says: str | None, total: int, rows: list[JsonObject], more: str | None
) -> JsonObject:
    return {
        "name": name,
        "says": says,
        "total": total,
        "rows": rows,
        # the command that lists them all, when not all are shown
        "more": more if total > len(rows) else None,
    }


def _maybe(value: object) -> str | None:
    return None if value is None else inert_line(value)


def _activity(act: activity.Activity) -> JsonObject:
    """What an agent's hooks last showed (design.md §19): the activity, since when, its
    cause, what the runtime said (inert, one line), whether relay will hear the wait end
    (``asked``: it will not, so the page says when it asked, not how long it waits) and
    when the session's last event came."""
    return {
        "activity": act.activity,
        "activity_since": clock.iso(act.since),
        "activity_cause": act.cause,
        "activity_detail": _maybe(act.detail),
        "activity_asked": act.activity == "needs_person" and not act.end_seen,
        "last_event_at": clock.iso(act.event_at),
    }


def _agent_row(a: SessionActivity, short: Callable[[str], str]) -> JsonObject:
    """An agent that needs a person, with the claimed requests it holds (oldest first)."""
    return {
        "peer": inert_line(a.peer),
        "kind": inert_line(a.kind),
        **_activity(a.activity),
        "holds": [{"id": i, "short": short(i)} for i in a.holds],
        "commands": [],  # a person answers it in its own window, not with relay
    }


def _request_row(r: JsonObject, short: Callable[[str], str]) -> JsonObject:
    return {
        "id": r["id"],
        "short": short(r["id"]),
        "state": r["state"],
        "from": inert_line(r["from"]),
        "to": inert_line(r["to"]),
        "reason": _maybe(r["reason"]),
        "since": r["updated_at"],  # when it reached its state
        "created_at": r["created_at"],
        "deadline": next_deadline(r),  # the deadline that moves it next, if any
        "deadline_is": NEXT_DEADLINE[r["state"]][1] if r["state"] in NEXT_DEADLINE else None,
        "text_bytes": r["text_bytes"],
        "pruned": r["pruned"],
    }


def _entry_row(e: JsonObject) -> JsonObject:
    argv = e.get("argv")
    return {
        "key": inert_line(e["key"]),
        "state": e["state"],
        "command": inert_line(command_text(argv) if isinstance(argv, list) else argv),
        "cwd": _maybe(e["cwd"]),
        "host": _maybe(e.get("host")),
        "since": e.get("updated_at"),
    }
