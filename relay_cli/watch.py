"""`relay watch`: what a person orchestrating agents needs to see at a glance.

``gather`` reads one consistent snapshot (inside ``lifecycle.unit(write=False)``, so due
time-based transitions are applied first and nothing else is written). ``render_rich``
turns it into a rich renderable for the live full-screen view; ``render_plain`` into plain
text (no colour, no box characters) for a pipe. Every peer-supplied string goes through
``output.inert`` and reaches rich only as ``Text``, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import clock, peers
from .output import STATE_STYLES, age, inert
from .states import OPEN_STATES

OPEN_LIMIT = 40
EVENTS_LIMIT = 15
UNKNOWN_LIMIT = 5
# Event target states a person must notice.
LOUD_STATES = ("delivery_unknown", "failed")


@dataclass
class Snapshot:
    now: int
    home: str
    peers: list[dict] = field(default_factory=list)
    open: dict[str, list[dict]] = field(default_factory=dict)  # state -> requests, oldest first
    open_more: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unknown: list[dict] = field(default_factory=list)  # newest delivery_unknown requests
    events: list[dict] = field(default_factory=list)  # newest first
    awaiting: list[dict] | None = None  # ledger entries awaiting approval; None: no ledger
    effect_unknown: list[dict] = field(default_factory=list)  # crashed `relay once` entries


def gather(store, now: int, events_limit: int = EVENTS_LIMIT) -> Snapshot:
    """One snapshot of peers, open requests, recent transitions and pending approvals."""
    snap = Snapshot(now=now, home=str(store.home))
    for p in store.list_peers():
        obj = peers.peer_object(store, p["name"], now)
        session = store.active_session(p["name"])
        obj["lease_left_s"] = (
            max(0, session["lease_expires_at"] - now) / 1000 if session is not None else None
        )
        snap.peers.append(obj)
    snap.counts = store.count_by_state()
    rows = store.list_requests(list(OPEN_STATES), None, None, OPEN_LIMIT)  # the newest
    snap.open_more = max(0, sum(snap.counts.get(s, 0) for s in OPEN_STATES) - len(rows))
    for state in OPEN_STATES:
        snap.open[state] = [_request(r, now) for r in reversed(rows) if r["state"] == state]
    snap.unknown = [_request(r, now) for r in
                    store.list_requests(["delivery_unknown"], None, None, UNKNOWN_LIMIT)]
    snap.events = [_event(e) for e in store.recent_events(events_limit)]
    snap.awaiting = _awaiting(store)
    snap.effect_unknown = _effect_unknown(store)
    return snap


def _request(row, now: int) -> dict:
    deadline = None
    if row["state"] == "queued":
        deadline = ("expires in", row["expires_at"])
    elif row["state"] == "delivered":
        deadline = ("claim lease", row["lease_expires_at"])
    elif row["state"] == "acknowledged" and row["reply_deadline_at"]:
        deadline = ("reply due in", row["reply_deadline_at"])
    return {
        "id": row["id"],
        "from": row["from_peer"],
        "to": row["to_peer"],
        "state": row["state"],
        "reason": row["reason"],
        "age": age(row["created_at"], now),
        "since": age(row["updated_at"], now),
        "deadline": None if deadline is None or deadline[1] is None else
        f"{deadline[0]} {clock.human_duration(max(0, deadline[1] - now) / 1000)}",
        "attempts": row["attempts"],
    }


def _event(row) -> dict:
    return {
        "at": row["at"],
        "request_id": row["request_id"],
        "from_state": row["from_state"],
        "to_state": row["to_state"],
        "reason": row["reason"],
        "actor": row["actor"],
    }


def _ledger_rows(entries: list[dict]) -> list[dict]:
    out = []
    for e in entries:
        argv = e.get("argv") if isinstance(e, dict) else None
        out.append({
            "key": e.get("key"),
            "argv": " ".join(str(a) for a in argv) if isinstance(argv, list) else argv,
            "cwd": e.get("cwd"),
            "created_at": e.get("created_at"),
        })
    return out


def _awaiting(store) -> list[dict]:
    from . import ledger

    return _ledger_rows(ledger.awaiting(store))


def _effect_unknown(store) -> list[dict]:
    """`relay once` entries whose process is gone before an outcome was recorded."""
    from . import ledger

    entries = ledger.list_entries(store, ["effect_unknown"])
    return _ledger_rows([e for e in entries if not e.get("idempotent")])  # those rerun


# ---------------------------------------------------------------------------- text
def short_id(request_id: str) -> str:
    return request_id[:8]


def _lease(p: dict) -> str:
    if p["lease_left_s"] is None:
        return "-"
    return clock.human_duration(p["lease_left_s"])


def _header(snap: Snapshot) -> str:
    total_open = sum(snap.counts.get(s, 0) for s in OPEN_STATES)
    unknown = snap.counts.get("delivery_unknown", 0)
    return (f"relay watch  {clock.iso(snap.now)}  home {snap.home}  "
            f"{total_open} open, {unknown} delivery_unknown")


def _event_line(e: dict, now: int) -> list[str]:
    return [f"{age(e['at'], now)} ago", short_id(e["request_id"]),
            e["from_state"] or "(new)", e["to_state"], e["reason"] or "-", e["actor"]]


def render_plain(snap: Snapshot) -> str:
    """The snapshot as plain text: no colour, no box characters, peer text made inert."""
    now = snap.now
    out: list[str] = [inert(_header(snap)), ""]

    def table(title: str, cols: list[str], rows: list[list[str]], empty: str) -> None:
        out.append(title)
        if not rows:
            out.append("  " + empty)
            out.append("")
            return
        cells = [[inert(c) for c in r] for r in rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
        for r in cells:
            out.append("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
        out.append("")

    table("PEERS", ["name", "kind", "active", "lease left", "wakeup"],
          [[p["name"], p["kind"], "yes" if p["active"] else "no", _lease(p), p["wakeup"]]
           for p in snap.peers], "no peers yet")
    for state in OPEN_STATES:
        reqs = snap.open.get(state, [])
        table(f"{state.upper()} ({snap.counts.get(state, 0)})", ["id", "from", "to", "age", "deadline"],
              [[short_id(r["id"]), r["from"], r["to"], r["age"], r["deadline"] or "-"]
               for r in reqs], "none")
    if snap.open_more:
        out.append(f"(+{snap.open_more} older open requests: relay list)")
        out.append("")
    if snap.unknown:
        table(f"NEEDS A PERSON: delivery_unknown ({snap.counts.get('delivery_unknown', 0)}; "
              "relay resolve ID)", ["id", "from", "to", "reason", "since"],
              [[short_id(r["id"]), r["from"], r["to"], r["reason"] or "-", r["since"]]
               for r in snap.unknown], "none")
    if snap.effect_unknown:
        table(f"NEEDS A PERSON: effect_unknown ({len(snap.effect_unknown)}; check whether it "
              "happened, then relay ledger resolve KEY)", ["key", "command", "cwd"],
              [[a["key"], a["argv"], a["cwd"]] for a in snap.effect_unknown], "none")
    if snap.awaiting is not None:
        table(f"AWAITING APPROVAL ({len(snap.awaiting)}; relay approve KEY / relay deny KEY)",
              ["key", "command", "cwd"],
              [[a["key"], a["argv"], a["cwd"]] for a in snap.awaiting], "none")
    rows = []
    for e in snap.events:
        line = _event_line(e, now)
        if e["to_state"] in LOUD_STATES:
            line[3] = f"!! {line[3]}"
        rows.append(line)
    table("RECENT TRANSITIONS (newest first)",
          ["when", "id", "from", "to", "reason", "actor"], rows, "none yet")
    return "\n".join(out).rstrip("\n") + "\n"


def render_rich(snap: Snapshot, footer: str = "q or Ctrl-C: leave", lines: bool = True):
    """The snapshot as one rich renderable (tables; every peer string as inert Text).

    ``lines=False`` (NO_COLOR) draws the tables without box characters.
    """
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    now = snap.now

    def t(value, style: str = "") -> Text:
        return Text(inert(value), style=style)

    def state_text(state: str | None) -> Text:
        s = inert(state)
        style = STATE_STYLES.get(s, "")
        if s in LOUD_STATES:
            return Text(f"!! {s}", style="bold white on red" if s == "delivery_unknown"
                        else "bold red")
        return Text(s, style=style)

    def table(title: str, cols: list[str]) -> Table:
        tb = Table(title=Text(title, style="bold"), title_justify="left", box=box.SIMPLE_HEAD if lines else None,
                   header_style="bold", pad_edge=False, expand=False)
        for c in cols:
            tb.add_column(c, overflow="ellipsis", no_wrap=True)
        return tb

    parts = [Text(inert(_header(snap)), style="bold")]
    pt = table("Peers", ["name", "kind", "active", "lease left", "wakeup"])
    for p in snap.peers:
        pt.add_row(t(p["name"]), t(p["kind"]),
                   Text("yes", style="green") if p["active"] else Text("no", style="dim"),
                   t(_lease(p)), t(p["wakeup"], "green" if p["wakeup"] in ("waiter", "hook") else ""))
    if not snap.peers:
        pt.add_row(Text("no peers yet", style="dim"), "", "", "", "")
    parts.append(pt)
    for state in OPEN_STATES:
        reqs = snap.open.get(state, [])
        ot = table(f"{state} ({snap.counts.get(state, 0)})", ["id", "from", "to", "age", "deadline"])
        for r in reqs:
            ot.add_row(t(short_id(r["id"])), t(r["from"]), t(r["to"]), t(r["age"]),
                       t(r["deadline"] or "-"))
        if reqs:
            parts.append(ot)
        else:
            parts.append(Text(f"{state} ({snap.counts.get(state, 0)})", style="dim"))
    if snap.open_more:
        parts.append(Text(f"(+{snap.open_more} older open requests: relay list)", style="dim"))
    if snap.unknown:
        ut = table(f"needs a person: delivery_unknown "
                   f"({snap.counts.get('delivery_unknown', 0)}; relay resolve ID)",
                   ["id", "from", "to", "reason", "since"])
        for r in snap.unknown:
            ut.add_row(t(short_id(r["id"])), t(r["from"]), t(r["to"]),
                       t(r["reason"] or "-", "bold red"), t(r["since"]))
        parts.append(ut)
    if snap.effect_unknown:
        et_ = table(f"needs a person: effect_unknown ({len(snap.effect_unknown)}; check "
                    "whether it happened, then relay ledger resolve KEY)",
                    ["key", "command", "cwd"])
        for a in snap.effect_unknown:
            et_.add_row(t(a["key"], "bold red"), t(a["argv"]), t(a["cwd"]))
        parts.append(et_)
    if snap.awaiting:
        at = table(f"awaiting approval ({len(snap.awaiting)}; relay approve KEY / deny KEY)",
                   ["key", "command", "cwd"])
        for a in snap.awaiting:
            at.add_row(t(a["key"], "bold yellow"), t(a["argv"]), t(a["cwd"]))
        parts.append(at)
    et = table("recent transitions", ["when", "id", "from", "to", "reason", "actor"])
    for e in snap.events:
        when, rid, frm, _to, reason, actor = _event_line(e, now)
        loud = e["to_state"] in LOUD_STATES
        et.add_row(t(when), t(rid), t(frm), state_text(e["to_state"]),
                   t(reason, "bold red" if loud else ""), t(actor))
    if not snap.events:
        et.add_row(Text("none yet", style="dim"), "", "", "", "", "")
    parts.append(et)
    parts.append(Text(footer, style="dim"))
    return Group(*parts)


def json_doc(snap: Snapshot) -> dict:
    """The snapshot as one JSON document (`relay watch --json`)."""
    return {
        "at": clock.iso(snap.now),
        "home": snap.home,
        "peers": [{k: v for k, v in p.items() if k != "lease_left_s"} for p in snap.peers],
        "open": {state: [{k: r[k] for k in ("id", "from", "to", "state", "age", "deadline")}
                         for r in reqs] for state, reqs in snap.open.items()},
        "open_more": snap.open_more,
        "counts": snap.counts,
        "delivery_unknown": [{k: r[k] for k in ("id", "from", "to", "reason")}
                             for r in snap.unknown],
        "events": [{**e, "at": clock.iso(e["at"])} for e in snap.events],
        "awaiting_approval": snap.awaiting,
        "effect_unknown": snap.effect_unknown,
    }
