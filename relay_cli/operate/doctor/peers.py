"""The peers with a live session and how each is woken (design.md §11)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import clock
from .report import OK, Report
from .runtimes import wakeup_advice

if TYPE_CHECKING:
    from ...core.output import JsonObject
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
