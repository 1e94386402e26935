"""The peers with a live session and how each is woken (design.md §11)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import clock
from ...core.limits import NEEDS_PERSON_WARN_MS
from ...core.output import inert_line
from .report import OK, WARN, Report
from .runtimes import wakeup_advice

if TYPE_CHECKING:
    from ...core.output import JsonObject
    from ...requests.activity import SessionActivity
    from ...store import Row


def check_peers(
    report: Report, sessions: list[Row], shown: dict[str, JsonObject], now: int
) -> None:
    """``active_peers``: the peer object of each peer with a live session, with the
    seconds its lease has left (design.md §11)."""
    live = [s for s in sessions if s["lease_expires_at"] > now]
    lapsed = len(sessions) - len(live)
    active = [
        {
            **shown[s["peer"]],
            "lease_left_seconds": round((s["lease_expires_at"] - now) / 1000, 3),
        }
        for s in live
    ]
    wakeups = {name: obj["wakeup"] for name, obj in shown.items()}
    report.facts["active_peers"] = active
    note = (
        f"; {lapsed} session(s) whose lease lapsed (the next relay command ends them and "
        "their claimed work becomes delivery_unknown)"
        if lapsed
        else ""
    )
    if not active:
        report.add("peers", OK, "no active sessions" + note)
        return
    listed = ", ".join(
        f"{p['name']} ({p['kind']}, lease {clock.human_duration(p['lease_left_seconds'])} left)"
        for p in active
    )
    report.add("peers", OK, f"{len(active)} active session(s): {listed}{note}")
    for s in live:
        value = wakeups[s["peer"]]
        status, detail, fix = wakeup_advice(s, value, now)
        report.add(f"wakeup:{s['peer']}", status, f"{value}: {detail}", fix=fix)


def check_activity(report: Report, acts: list[SessionActivity], now: int) -> None:
    """``activity``: what each live agent's hooks last showed (design.md §19); a warn for
    one that has needed a person for more than 5 minutes, and for one whose turn failed
    while it holds claimed work (one gone while it holds claimed work: ``lapsed:``)."""
    report.facts["activity"] = [a.to_json() for a in acts]
    warned = 0
    for a in acts:
        act = a.activity
        held = (
            f"; it holds {', '.join(i[:8] for i in a.holds[:3])}"
            + (f" +{len(a.holds) - 3}" if len(a.holds) > 3 else "")
            if a.holds
            else ""
        )
        said = f" ({inert_line(act.detail)})" if act.detail else ""
        since = clock.human_duration((now - act.since) / 1000) if act.since else "?"
        if act.activity == "needs_person" and act.since and now - act.since > NEEDS_PERSON_WARN_MS:
            warned += 1
            asked = (
                f"has waited for a person ({act.cause}) for {since}"
                if act.end_seen
                else f"asked a person ({act.cause}) {since} ago and relay has heard nothing since"
            )
            report.add(
                f"activity:{a.peer}",
                WARN,
                f"{asked}{said}{held}: answer it in its own window",
            )
        elif act.activity == "turn_failed" and a.holds:
            warned += 1
            report.add(
                f"activity:{a.peer}",
                WARN,
                f"its turn failed {since} ago{said}{held}: look at its window; the work "
                "stays claimed until it replies or its lease ends",
            )
    live = [a for a in acts if a.active]
    if not warned:
        counts: dict[str, int] = {}
        for a in live:
            counts[a.activity.activity] = counts.get(a.activity.activity, 0) + 1
        listed = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no live agent"
        report.add("activity", OK, f"nobody waits for a person: {listed}")
