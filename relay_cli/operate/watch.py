"""`relay watch`: what a person orchestrating agents needs to see at a glance (design.md §14).

``gather`` reads one consistent snapshot (inside ``due.unit(write=False)``, so due
time-based transitions are applied first and nothing else is written). ``render`` turns
it into lines: first what needs a person (agents waiting for one, design.md §19;
``delivery_unknown`` requests, ``effect_unknown`` and awaiting-approval ``relay once``
entries), then open requests, peers and recent
transitions. Given a height, every section keeps its title and as many rows as fit, in
that order of importance, and says "+N more" for the rest instead of running off the
screen. Lines are plain strings without a width (a pipe), else rich ``Text`` no wider
than the width. Every peer-supplied string goes through ``output.inert_line``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..core import clock
from ..core.command import NO_SCOPE, Command, Said, Scope, placeholder, relay
from ..core.limits import OPEN_STATES
from ..core.output import (
    Col,
    Output,
    ago,
    cell_len,
    deadline,
    duration,
    fit,
    inert_line,
    render_table,
    unique_prefixes,
)
from ..core.record import field, record
from ..requests import activity, objects, peers
from ..requests.states import NEXT_DEADLINE, STATE_STYLES, settle

if TYPE_CHECKING:
    from rich.text import Text

    from relay_cli.store import Row, Store

    from ..core.output import JsonObject

OPEN_LIMIT = 40
# the order open requests are chosen and shown in: held work first, then queued
HELD_FIRST = tuple(reversed(OPEN_STATES))  # acknowledged, delivered, queued
EVENTS_LIMIT = 15
UNKNOWN_LIMIT = 40
GLIMPSE = 3  # rows every section gets before any section gets more
FINAL_LIMIT = 40  # the newest requests that became final, for the web view's lane
# Event target states a person must notice.
LOUD_STATES = ("delivery_unknown", "failed")
LOUD = {
    f"!! {s}": "bold white on red" if s == "delivery_unknown" else "bold red" for s in LOUD_STATES
}


@record
class Snapshot:
    now: int
    home: str
    peers: list[JsonObject] = field(default_factory=list)
    open: list[JsonObject] = field(default_factory=list)  # request objects, as shown
    open_more: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unknown: list[JsonObject] = field(default_factory=list)  # newest delivery_unknown requests
    events: list[JsonObject] = field(default_factory=list)  # newest first
    awaiting: list[JsonObject] = field(default_factory=list)  # ledger entries awaiting approval
    effect_unknown: list[JsonObject] = field(default_factory=list)  # crashed `relay once` entries
    # each agent's activity (requests/activity.py's snapshot, the one read: every active
    # session and the newest of each peer without one), and of them the agents that wait
    # for a person (or failed holding work), longest first (design.md §19)
    agents: list[activity.SessionActivity] = field(default_factory=list)
    needs: list[activity.SessionActivity] = field(default_factory=list)
    # the web view's lanes (design.md §17), gathered only when asked for: requests that
    # became final lately (newest first) and every ledger entry that is not final
    final: list[JsonObject] = field(default_factory=list)
    final_within_s: int | None = None
    ledger_open: list[JsonObject] = field(default_factory=list)

    @property
    def open_total(self) -> int:
        return sum(self.counts.get(s, 0) for s in OPEN_STATES)


def gather(
    store: Store,
    now: int,
    events_limit: int = EVENTS_LIMIT,
    *,
    final_within_s: int | None = None,
) -> Snapshot:
    """One snapshot of peers, open requests, recent transitions and pending approvals.
    With ``final_within_s`` (the web view's lanes) also the requests that became final
    within that many seconds and the ledger's open entries."""
    from ..ledger.entries import awaiting, list_entries, reruns_by_itself

    snap = Snapshot(now=now, home=str(store.home))
    for p in store.list_peers():
        obj = peers.peer_object(store, p["name"], now)
        session = store.active_session(p["name"])
        obj["lease_left_s"] = (
            max(0, session["lease_expires_at"] - now) / 1000 if session is not None else None
        )
        snap.peers.append(obj)
    snap.counts = store.count_by_state()
    # chosen from every open request (design.md §14): the held ones first (acknowledged,
    # delivered: someone works on them), then queued; the oldest of each first
    rows: list[Row] = []
    for state in HELD_FIRST:
        if len(rows) < OPEN_LIMIT and snap.counts.get(state):
            rows += store.oldest_in_state(state, OPEN_LIMIT - len(rows))
    snap.open = [objects.request_object(r) for r in rows]
    snap.open_more = max(0, snap.open_total - len(rows))
    snap.unknown = [
        objects.request_object(r)
        for r in store.list_requests(["delivery_unknown"], None, None, UNKNOWN_LIMIT)
    ]
    snap.events = [
        {**objects.event_object(e), "request_id": e["request_id"]}
        for e in store.recent_events(events_limit)
    ]
    snap.awaiting = awaiting(store, now)
    snap.effect_unknown = [
        e for e in list_entries(store, now, ["effect_unknown"]) if not reruns_by_itself(e)
    ]  # those rerun by themselves
    snap.agents = activity.snapshot(store, now)
    snap.needs = activity.needs_you(snap.agents)
    if final_within_s is not None:
        snap.final_within_s = final_within_s
        snap.final = [
            objects.request_object(r)
            for r in store.recently_finished(now - final_within_s * 1000, FINAL_LIMIT)
        ]
        from ..ledger.states import FINAL_STATES as LEDGER_FINAL
        from ..ledger.states import STATES as LEDGER_STATES

        # every state an entry is shown in that is not final (effect_unknown included)
        snap.ledger_open = list_entries(
            store, now, [s for s in LEDGER_STATES if s not in LEDGER_FINAL]
        )
    return snap


def json_doc(snap: Snapshot) -> JsonObject:
    """The snapshot as one JSON document (`relay watch --json`): requests as the request
    object, ledger entries as the entry object, events as in `show --events` plus their
    request's id; watch's own keys around them."""
    return {
        "at": clock.iso(snap.now),
        "home": snap.home,
        "counts": snap.counts,
        "needs_you": [s.to_json() for s in snap.needs],
        "peers": [{k: v for k, v in p.items() if k != "lease_left_s"} for p in snap.peers],
        "delivery_unknown": snap.unknown,
        "effect_unknown": snap.effect_unknown,
        "awaiting_approval": snap.awaiting,
        "open": {state: [r for r in snap.open if r["state"] == state] for state in OPEN_STATES},
        "open_more": snap.open_more,
        "events": snap.events,
    }


# ---------------------------------------------------------------------------- sections
@record
class Section:
    title: str
    total: int  # how many exist (rows may hold fewer)
    more: Command  # the command that shows them all
    cols: list[Col]
    rows: Sequence[Sequence[object]]
    empty: str | None = None  # shown when there are none; None: leave the section out
    # The commands a person runs on these rows, whole, each on its own lines (a title
    # would cut them at 80 columns): for the first row, one per choice (design.md §14).
    action: Said | None = None
    # the "+N more" and action lines as rendered for the screen (``render`` sets them)
    more_lines: list[str] = field(default_factory=list)
    action_lines: list[str] = field(default_factory=list)

    def wanted(self) -> int:
        """Lines to show it whole: title, column header, rows, the "+N more" lines and the
        action lines."""
        if not self.rows:
            return 1
        return (
            2
            + len(self.rows)
            + (len(self.more_lines) if self.total > len(self.rows) else 0)
            + len(self.action_lines)
        )


def _ms(iso: str | None) -> int | None:
    return None if iso is None else clock.parse_iso(iso)


def next_deadline(r: JsonObject) -> str | None:
    """The time (RFC 3339) of the deadline that moves an open request next (expiry while
    queued, the claim lease while delivered, the reply deadline while acknowledged), or
    None."""
    key, _ = NEXT_DEADLINE.get(r["state"], (None, None))
    return r[key] if key else None


def _next(r: JsonObject, now: int) -> str:
    """The deadline that moves an open request next, with the local clock time: its
    state says which (``NEXT_DEADLINE``), so the cell is the time alone and stays whole."""
    at = next_deadline(r)
    return deadline(_ms(at), now) if at else "-"


def _lease(p: JsonObject) -> str:
    return "-" if p["lease_left_s"] is None else duration(p["lease_left_s"])


def sections(snap: Snapshot) -> list[Section]:
    """Every section, in the order a person needs them."""
    from ..ledger import entries

    now = snap.now
    # ids as short as they can be while no two shown share a prefix (design.md §14)
    _short = unique_prefixes(
        [r["id"] for r in snap.unknown + snap.open]
        + [e["request_id"] for e in snap.events]
        + [i for s in snap.needs for i in s.holds]
    ).__getitem__
    unknown_total = snap.counts.get("delivery_unknown", 0)
    out = [
        Section(
            f"needs you ({len(snap.needs)}): agents waiting for a person, longest first",
            len(snap.needs),
            relay("peers", "list"),
            [
                Col("agent", min=10, middle=True),
                Col("activity", min=12),
                Col("since", fixed=True),
                Col("holds", min=8),
                Col("what it said", min=6, first=True),
            ],
            [
                [
                    s.peer,
                    activity.words(s.activity, now),
                    activity.since_words(s.activity, now),
                    _holds(s.holds, _short),
                    s.activity.detail or "-",
                ]
                for s in snap.needs
            ],
        ),
        Section(
            f"delivery_unknown ({unknown_total}): check whether it was done, then settle it",
            unknown_total,
            relay("list", "--state", "delivery_unknown"),
            [
                Col("id", fixed=True),
                Col("from", min=8, middle=True),
                Col("to", min=8, middle=True),
                Col("reason", min=14, middle=True),
                Col("since", fixed=True),
            ],
            [
                [_short(r["id"]), r["from"], r["to"], r["reason"], ago(_ms(r["updated_at"]), now)]
                for r in snap.unknown
            ],
            action=Said.of(
                f"then, for {_short(snap.unknown[0]['id'])}, in your terminal, one of:",
                settle(_short(snap.unknown[0]["id"])),
            )
            if snap.unknown
            else None,
        ),
        Section(
            f"effect_unknown ({len(snap.effect_unknown)}): check whether it happened, "
            "then settle it",
            len(snap.effect_unknown),
            relay("ledger", "list", "--state", "effect_unknown"),
            _ledger_cols(),
            _ledger_rows(snap.effect_unknown, now),
            action=Said.of(
                "then, for the first, in your terminal, one of:",
                entries.settle(snap.effect_unknown[0]["key"]),
            )
            if snap.effect_unknown
            else None,
        ),
        Section(
            f"awaiting approval ({len(snap.awaiting)}): a person approves or denies each",
            len(snap.awaiting),
            relay("ledger", "list", "--state", "awaiting_approval"),
            _ledger_cols(),
            _ledger_rows(snap.awaiting, now),
            action=Said.of(
                "then, for the first, in your terminal, one of:",
                entries.decide(snap.awaiting[0]["key"]),
            )
            if snap.awaiting
            else None,
        ),
        Section(
            f"open requests ({snap.open_total}: "
            + ", ".join(f"{snap.counts.get(s, 0)} {s}" for s in OPEN_STATES)
            + ")",
            snap.open_total,
            relay("list", *(w for s in OPEN_STATES for w in ("--state", s))),
            [
                Col("id", fixed=True),
                Col("state", fixed=True, styles=STATE_STYLES),
                Col("from", min=8, middle=True),
                Col("to", min=8, middle=True),
                Col("since", fixed=True),
                Col("deadline", fixed=True),
            ],
            [
                [
                    _short(r["id"]),
                    r["state"],
                    r["from"],
                    r["to"],
                    ago(_ms(r["updated_at"]), now),
                    _next(r, now),
                ]
                for r in snap.open
            ],
            empty="none",
        ),
        Section(
            f"peers ({len(snap.peers)}, {sum(p['active'] for p in snap.peers)} active)",
            len(snap.peers),
            relay("peers", "list"),
            [
                Col("name", min=12, middle=True),
                Col("kind", fixed=True),
                Col("active", fixed=True, styles={"yes": "green", "no": "dim"}),
                Col("lease left", fixed=True),
                Col("wakeup", min=7, styles={"waiter": "green", "hook": "green"}),
            ],
            [
                [p["name"], p["kind"], "yes" if p["active"] else "no", _lease(p), p["wakeup"]]
                for p in sorted(snap.peers, key=lambda p: not p["active"])
            ],
            empty="no peers yet",
        ),
        Section(
            "recent transitions (newest first)",
            len(snap.events),
            relay("show", placeholder("ID"), "--events"),
            [
                Col("when", fixed=True),
                Col("id", fixed=True),
                Col("state", fixed=True, styles={**STATE_STYLES, **LOUD}),
                Col("reason", min=14, middle=True),
                Col("actor", min=8, middle=True),
            ],
            [
                [
                    ago(_ms(e["at"]), now),
                    _short(e["request_id"]),
                    f"!! {e['to_state']}" if e["to_state"] in LOUD_STATES else e["to_state"],
                    e["reason"],
                    e["actor"],
                ]
                for e in snap.events
            ],
            empty="none yet",
        ),
    ]
    return [s for s in out if s.rows or s.empty is not None]


def _holds(ids: list[str], short: Callable[[str], str]) -> str:
    """The requests an agent holds, by short id: ``7d8e2f4a +2``; ``-`` for none."""
    if not ids:
        return "-"
    return short(ids[0]) + (f" +{len(ids) - 1}" if len(ids) > 1 else "")


def _ledger_cols() -> list[Col]:
    return [
        Col("key", min=12),
        Col("command", min=10, first=True),
        Col("cwd", min=8, first=True, keep_end=True),
        Col("since", fixed=True),
    ]


def _ledger_rows(entries: list[JsonObject], now: int) -> list[list[object]]:
    from ..ledger.entries import command_text

    return [
        [
            e["key"],
            command_text(e["argv"]) if isinstance(e.get("argv"), list) else e.get("argv"),
            e["cwd"],
            ago(_ms(e.get("updated_at")), now),
        ]
        for e in entries
    ]


def header(snap: Snapshot) -> str:
    """What needs a person, counted, then how much is open."""
    unknown = snap.counts.get("delivery_unknown", 0)
    person = [
        f"{n} {what}"
        for n, what in (
            (len(snap.needs), "need you" if len(snap.needs) != 1 else "needs you"),
            (unknown, "delivery_unknown"),
            (len(snap.effect_unknown), "effect_unknown"),
            (len(snap.awaiting), "awaiting approval"),
        )
        if n
    ]
    needs = ", ".join(person) if person else "nothing needs a person"
    return f"relay watch: {needs}, {snap.open_total} open"


def clock_time(ms: int) -> str:
    """The local clock time of a snapshot (``14:05:03``)."""
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000).strftime("%H:%M:%S")


# ---------------------------------------------------------------------------- layout
def allot(wanted: list[int], budget: int) -> list[int]:
    """Lines for each section, most important first: every section its title, then up to
    a glimpse (column header and ``GLIMPSE`` rows) each, then the rest in order. A section
    that cannot have even its title is left out (0)."""
    lines = [0] * len(wanted)
    left = budget
    for i in range(len(wanted)):
        if left > 0:
            lines[i], left = 1, left - 1
    for cap in (2 + GLIMPSE + 1, None):
        for i, want in enumerate(wanted):
            if lines[i] == 0:
                continue
            target = want if cap is None else min(want, cap)
            extra = max(0, min(target - lines[i], left))
            lines[i] += extra
            left -= extra
    return lines


def render(
    snap: Snapshot,
    width: int | None = None,
    height: int | None = None,
    *,
    color: bool = False,
    ellipsis: str = "\u2026",
    footer: str | None = None,
    scope: Scope = NO_SCOPE,
) -> list[str | Text]:
    """The snapshot as lines. ``width`` None: plain strings, every section whole (a pipe).
    Otherwise rich ``Text`` lines no wider than ``width`` (a command goes on with `` \\``
    rather than be cut); with ``height``, at most that many lines, sections cut to fit
    with "+N more: COMMAND". Every command carries ``scope``, the call's scope flags."""
    secs = sections(snap)
    shown = Output(scope=scope)  # (renders the commands; writes nothing)
    for sec in secs:
        # (the count shown is at most the total: its line is never wider than this)
        sec.more_lines = shown.command_lines(sec.more, f"+{sec.total} more: ", "  ", width)
        sec.action_lines = shown.said_lines(sec.action, width, "  ") if sec.action else []
        if sec.action_lines:
            sec.action_lines[0] = f"  {sec.action_lines[0]}"
    if height is not None and height < 2:
        footer = None  # one line: the header says what matters most
    reserved = 1 + (1 if footer else 0)
    if height is None:
        budgets = [s.wanted() for s in secs]
    else:
        budgets = allot([s.wanted() for s in secs], max(0, height - reserved))
    lines: list[str | Text] = [
        _plain_or_text(header(snap), width, ellipsis, "bold" if color else "")
    ]
    for sec, budget in zip(secs, budgets, strict=True):
        if budget:
            lines += _section_lines(sec, budget, width, color, ellipsis)
            if height is None:
                lines.append(_plain_or_text("", width, ellipsis, ""))
    if footer:
        lines.append(_plain_or_text(footer, width, ellipsis, "dim" if color else ""))
    return lines


def _section_lines(
    sec: Section, budget: int, width: int | None, color: bool, ellipsis: str
) -> list[str | Text]:
    title_style = "bold" if color else ""
    title = sec.title
    if not sec.rows:
        return [_plain_or_text(f"{title}: {sec.empty}", width, ellipsis, "dim" if color else "")]
    action_lines = sec.action_lines
    more = len(sec.more_lines)
    fits = len(sec.rows) if budget >= sec.wanted() else budget - 2 - more - len(action_lines)
    if fits < 1:  # rows come first: the commands for the first row only where they fit
        action_lines = []
        fits = budget - 2 - more
    if fits < 1:  # no room for a row: the title says how many, and the command when it fits
        line = f"{title}: {sec.more_lines[0].strip()}" if more == 1 else ""
        if not line or (width is not None and cell_len(line) > width):
            line = f"{title}: +{sec.total} more"
        return [_plain_or_text(line, width, ellipsis, title_style)]
    shown = sec.rows[:fits]
    hidden = sec.total - len(shown)
    out: list[str | Text] = [_plain_or_text(title, width, ellipsis, title_style)]
    out += render_table(sec.cols, shown, width, color=color, ellipsis=ellipsis, indent=2)
    if hidden > 0:
        lines = [ln.replace(f"+{sec.total} more", f"+{hidden} more", 1) for ln in sec.more_lines]
        out += [_command_line(ln, width, "dim" if color else "") for ln in lines]
    out += [_command_line(ln, width, "") for ln in action_lines]
    return out


def _command_line(text: str, width: int | None, style: str) -> str | Text:
    """A line of a rendered command, already no wider than the screen unless one word is
    (a long path on a tiny terminal): only then is it cut, to keep the screen whole."""
    if width is None:
        return text
    from rich.text import Text

    return Text(fit(text, width), style=style)


def _plain_or_text(text: str, width: int | None, ellipsis: str, style: str) -> str | Text:
    text = inert_line(text)
    if width is None:
        return text
    from rich.text import Text

    return Text(fit(text, width, ellipsis), style=style)


def render_plain(snap: Snapshot, scope: Scope = NO_SCOPE) -> str:
    """The whole snapshot as plain text (no colour, no box characters): a pipe, a file."""
    lines = render(snap, scope=scope)  # width None: plain strings
    return "\n".join(str(line) for line in lines).rstrip("\n") + "\n"
