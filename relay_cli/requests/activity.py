"""What each agent is doing, as its hooks showed it (design.md §19).

Per session relay keeps the last activity its runtime's hooks reported and since when:
``working`` (a turn started), ``needs_person`` with a cause (``permission``, ``question``),
``idle`` (the turn ended), ``turn_failed`` (the runtime reported a failed turn) and ``gone``
(the session ended, its lease lapsed, or a newer session replaced it). A session whose
hooks never reported anything is ``unknown``: relay infers nothing from silence.

``record`` applies one observation (agents/activity.py turns a runtime's event into one);
``end`` records a session's end; ``of_session`` reads a session's activity as it is now
(a lapsed lease is ``gone`` before any command has ended the session); ``snapshot`` is the
one read for every screen (watch, `peers list`, doctor, `show`, the browser view): each
session with its activity and the requests it holds.

An episode is one (session, activity, cause, start). A new episode of ``needs_person``
owes an alert, and so does a ``turn_failed`` or ``gone`` one while the session holds
claimed work; ``activity_alert`` says so ('owed'), and the relay process that starts the
alert marks it 'sent' in a transaction of its own (agents/alerts.py): once per episode.
"""

from __future__ import annotations

from ..core import clock
from ..core import record as records
from ..core.limits import CLAIMED_STATES, GONE_CAUSES, MAX_ACTIVITY_DETAIL, SILENCE_NOTE_MS

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from relay_cli.store import ActivityStore, Row, Store

    from ..core.output import JsonObject


@records.record(frozen=True)
class Observation:
    """What one hook event showed: the activity it starts (None: none, the event only
    counts as a sign of life), its cause and the runtime's own words for it."""

    activity: str | None
    event: str  # the runtime's name of the event
    cause: str | None = None
    detail: str | None = None
    # only ends a wait for a person (a tool ran): when the session is not waiting, nothing
    ends_wait_only: bool = False
    # the runtime tells relay when a wait for a person is over (Runtime.hears_answers)
    end_seen: bool = False


def one_line(text: object, limit: int = MAX_ACTIVITY_DETAIL) -> str | None:
    """A runtime's words as relay keeps them: one line of at most ``limit`` characters,
    whitespace runs made one space, control and invisible format characters written as
    visible escapes (untrusted text, design.md §19: inert wherever it is shown)."""
    if not isinstance(text, str):
        return None
    from ..core.output import inert_line

    words = inert_line(" ".join(text.split()))
    if not words:
        return None
    return words if len(words) <= limit else words[: limit - 1] + "\u2026"


def _get(row: Row, key: str) -> Any:
    """A column that a database of an older schema (doctor opens one unmigrated) lacks
    reads as None."""
    try:
        return row[key]
    except (KeyError, IndexError):
        return None


def record(store: Store, session: Row, obs: Observation, now: int) -> bool:
    """Apply ``obs`` to an active session (inside the caller's write transaction).
    Returns True when it started an episode that owes an alert."""
    if session["state"] != "active":
        return False
    sid = session["id"]
    current = _get(session, "activity")
    fields: dict[str, Any] = {"activity_event_at": now}
    new = obs.activity
    if new is None or (obs.ends_wait_only and current != "needs_person"):
        store.set_activity(sid, fields)
        return False
    same = current == new and (
        new != "needs_person" or (_get(session, "activity_cause") == obs.cause and obs.end_seen)
    )
    if same and new != "turn_failed":
        if obs.detail and not _get(session, "activity_detail"):
            fields["activity_detail"] = obs.detail
        store.set_activity(sid, fields)
        return False
    owed = new == "needs_person" or (new == "turn_failed" and bool(store.in_flight_of_session(sid)))
    fields.update(
        activity=new,
        activity_since=now,
        activity_cause=obs.cause,
        activity_detail=obs.detail,
        activity_event=obs.event,
        activity_end_seen=1 if obs.end_seen else 0,
        activity_alert="owed" if owed else None,
    )
    store.set_activity(sid, fields)
    return owed


def end(store: ActivityStore, session: Row, state: str, held: int, at: int) -> None:
    """A session ended (``state``: left, expired, superseded) while it held ``held``
    claimed requests: ``gone``, and an alert is owed when it held work."""
    store.set_activity(
        session["id"],
        {
            "activity": "gone",
            "activity_since": at,
            "activity_cause": GONE_CAUSES.get(state, state),
            "activity_detail": None,
            "activity_event": None,
            "activity_alert": "owed" if held else None,
        },
    )


@records.record
class Activity:
    """A session's activity as it is now."""

    activity: str
    since: int | None = None
    cause: str | None = None
    detail: str | None = None
    event: str | None = None
    event_at: int | None = None
    end_seen: bool = False

    def silent_for(self, now: int) -> int | None:
        """ms since the last event of a ``working`` session when that is long enough to
        say so ("no event for 12m"); None otherwise."""
        if self.activity != "working" or self.event_at is None:
            return None
        quiet = now - self.event_at
        return quiet if quiet >= SILENCE_NOTE_MS else None


def of_session(session: Row | None, now: int) -> Activity:
    """The activity of one session now: ``gone`` once it ended or its lease lapsed (even
    before a command has ended it), else what its hooks last reported, else ``unknown``."""
    if session is None:
        return Activity("unknown")
    state = session["state"]
    event_at = _get(session, "activity_event_at")
    if state != "active":
        stored = _get(session, "activity") == "gone"
        return Activity(
            "gone",
            since=_get(session, "activity_since") if stored else session["ended_at"],
            cause=(_get(session, "activity_cause") if stored else None)
            or GONE_CAUSES.get(state, state),
            event_at=event_at,
        )
    if session["lease_expires_at"] <= now:
        return Activity(
            "gone", since=session["lease_expires_at"], cause="lease_lapsed", event_at=event_at
        )
    current = _get(session, "activity")
    if current is None:
        return Activity("unknown", event_at=event_at)
    return Activity(
        current,
        since=_get(session, "activity_since"),
        cause=_get(session, "activity_cause"),
        detail=_get(session, "activity_detail"),
        event=_get(session, "activity_event"),
        event_at=event_at,
        end_seen=bool(_get(session, "activity_end_seen")),
    )


def fields_of(act: Activity) -> JsonObject:
    """The activity keys of a peer object (design.md §19)."""
    return {
        "activity": act.activity,
        "activity_since": clock.iso(act.since),
        "activity_cause": act.cause,
        "activity_detail": act.detail,
        "last_event_at": clock.iso(act.event_at),
    }


@records.record
class SessionActivity:
    """One session in the snapshot: whose, its activity, and the claimed, unfinished
    requests it holds (ids, oldest first)."""

    peer: str
    kind: str
    session_id: str
    active: bool
    activity: Activity
    holds: list[str] = records.field(default_factory=list)

    @property
    def needs_you(self) -> bool:
        """It waits for a person, or its turn failed while it holds claimed work."""
        a = self.activity.activity
        return a == "needs_person" or (a == "turn_failed" and bool(self.holds))

    def to_json(self) -> JsonObject:
        return {
            "peer": self.peer,
            "kind": self.kind,
            "session_id": self.session_id,
            "active": self.active,
            **fields_of(self.activity),
            "holds": self.holds,
        }


def snapshot(store: Store, now: int) -> list[SessionActivity]:
    """Every active session, and the newest session of each peer with none, with its
    activity now and the claimed work it holds: the one read every screen shows
    (design.md §19). Ordered by peer name."""
    held: dict[str, list[str]] = {}
    for r in store.claimed_work():
        held.setdefault(r["claim_session"], []).append(r["id"])
    out = []
    for s in store.sessions_for_activity():
        act = of_session(s, now)
        active = s["state"] == "active" and s["lease_expires_at"] > now
        out.append(
            SessionActivity(s["peer"], s["kind"], s["id"], active, act, held.get(s["id"], []))
        )
    return out


def needs_you(snap: list[SessionActivity]) -> list[SessionActivity]:
    """The sessions that wait for a person (or failed holding work), longest first."""
    rows = [s for s in snap if s.needs_you]
    return sorted(rows, key=lambda s: (s.activity.since or 0, s.peer))


def holder(store: Store, request_id: str, now: int) -> JsonObject | None:
    """The session that holds a claimed, unfinished request, with its activity now
    (`show`, design.md §19): {"peer", "session_id", activity keys}; None when nobody
    holds it."""
    row = store.get_request(request_id)
    if row is None or row["state"] not in CLAIMED_STATES or row["claim_session"] is None:
        return None
    session = store.get_session(row["claim_session"])
    if session is None:
        return None
    return {
        "peer": session["peer"],
        "session_id": session["id"],
        **fields_of(of_session(session, now)),
    }


def words(act: Activity, now: int) -> str:
    """The activity in a few words for a table cell, e.g. ``needs_person: permission``,
    ``working, no event for 12m``, ``gone (lease_lapsed)``."""
    a = act.activity
    if a == "needs_person" and act.cause:
        text = f"{a}: {act.cause}"
    elif a == "gone" and act.cause:
        text = f"{a} ({act.cause})"
    else:
        text = a
    quiet = act.silent_for(now)
    if quiet is not None:
        text += f", no event for {clock.human_duration(quiet / 1000)}"
    return text


def since_words(act: Activity, now: int) -> str:
    """Since when, for a person: ``3m`` (how long) -- or, for a wait for a person whose
    end relay would not hear, when it was asked: ``asked 14:05``."""
    if act.since is None:
        return "-"
    from ..core.output import age, local_clock

    if act.activity == "needs_person" and not act.end_seen:
        return f"asked {local_clock(act.since, now)}"
    return age(act.since, now)
