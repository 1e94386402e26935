"""What the database holds (design.md §11), read in one read-only transaction: requests
by state, what needs a person (delivery_unknown, `relay once` entries, drafts, lapsed
sessions holding work, run-out leases and deadlines), queues near the cap; then the
peers (``peers``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import clock
from ...core.limits import QUEUE_WARN_FRACTION, STATES
from ...requests import activity, peers
from ...requests.states import MEANING
from .peers import check_activity, check_peers
from .report import OK, WARN, Report

if TYPE_CHECKING:
    from relay_cli.store import Row, Store


def check_contents(store: Store, report: Report, now: int) -> None:
    with store.transaction(write=False):
        by_state = store.count_by_state()
        tombstones = store.count_tombstones()
        due = store.count_due(now)
        stale = store.count_stale_drafts(now)
        sessions = store.active_sessions()
        # the one peer object (``peers.peer_object``) of each peer with a live session
        shown = {
            s["peer"]: peers.peer_object(store, s["peer"], now)
            for s in sessions
            if s["lease_expires_at"] > now
        }
        ledger_unknown, ledger_awaiting = _ledger_needs(store, now)
        lapsed_work = store.lapsed_sessions_holding_work(now)
        passed = store.passed_deadlines(now)
        cap = report.facts.get("queue_cap")
        full = store.open_counts_at_least(int(cap * QUEUE_WARN_FRACTION) + 1) if cap else []
        acts = activity.snapshot(store, now)
    counts = {s: by_state.get(s, 0) for s in STATES}
    report.facts.update(
        requests_by_state=counts,
        tombstones=tombstones,
        delivery_unknown=counts["delivery_unknown"],
        stale_drafts=stale,
        due_transitions=due,
    )
    total = sum(counts.values())
    parts = ", ".join(f"{s} {n}" for s, n in counts.items() if n) or "none"
    detail = f"{total} requests ({parts}); {tombstones} pruned tombstones"
    if due:
        detail += (
            f"; {due} time-based transitions are due (the next relay command applies "
            "them; doctor shows the stored states)"
        )
    report.add("requests", OK, detail)

    unknown = counts["delivery_unknown"]
    if unknown:
        report.add(
            "delivery_unknown",
            WARN,
            f"{_n(unknown, 'request is', 'requests are')} delivery_unknown "
            f"({MEANING['delivery_unknown'][0]}): a person checks each and settles it "
            "with relay resolve (relay show of each names its commands)",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        report.add("delivery_unknown", OK, "none need a person")
    report.facts.update(
        ledger_effect_unknown=ledger_unknown, ledger_awaiting_approval=ledger_awaiting
    )
    if ledger_unknown:
        report.add(
            "ledger",
            WARN,
            f"{_n(ledger_unknown, '`relay once` entry is', '`relay once` entries are')} "
            "effect_unknown: check whether the effect happened, then settle it with "
            "relay ledger resolve (relay ledger show of each names its commands)",
            fix=report.cmd("ledger list --state effect_unknown"),
        )
    else:
        report.add("ledger", OK, "no `relay once` entry is effect_unknown")
    if ledger_awaiting:
        waits = _n(
            ledger_awaiting,
            "`relay once --approve` entry waits",
            "`relay once --approve` entries wait",
        )
        report.add(
            "approvals",
            WARN,
            f"{waits} for a person: relay approve or relay deny, in your own terminal "
            "(the list names each)",
            fix=report.cmd("ledger list --state awaiting_approval"),
        )
    else:
        report.add("approvals", OK, "no `relay once --approve` entry awaits a decision")
    if stale:
        report.add(
            "stale_drafts",
            WARN,
            f"{_n(stale, 'draft', 'drafts')} expired unsubmitted: its submit is now "
            "refused (prepared_expired); prune removes expired drafts",
            fix=report.cmd("prune"),
        )
    else:
        report.add("stale_drafts", OK, "no expired unsubmitted draft")
    held = _check_lapsed(report, lapsed_work, now)
    _check_deadlines(report, [r for r in passed if r["id"] not in held])
    _check_queues(report, full, cap)
    check_peers(report, sessions, shown, now)
    check_activity(report, acts, now)


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _ids(ids: list[str]) -> str:
    return ", ".join(i[:8] for i in ids[:3]) + (f" +{len(ids) - 3}" if len(ids) > 3 else "")


def _check_lapsed(report: Report, rows: list[Row], now: int) -> set[str]:
    """A session whose lease lapsed while it holds claimed work (design.md §11): the next
    relay command turns that work into delivery_unknown; a person should know now.
    Returns the ids so held."""
    held: dict[str, tuple[int, list[str]]] = {}
    for r in rows:
        held.setdefault(r["peer"], (r["lease_expires_at"], []))[1].append(r["id"])
    report.facts["lapsed_sessions"] = [
        {"peer": peer, "lease_expires_at": clock.iso(at), "claimed": ids}
        for peer, (at, ids) in held.items()
    ]
    if not held:
        report.add("lapsed_sessions", OK, "no session lost its lease while holding claimed work")
        return set()
    for peer, (at, ids) in held.items():
        report.add(
            f"lapsed:{peer}",
            WARN,
            # the ids first: on a cut line (design.md §11) they are what stays in view
            f"holds {_ids(ids)} ({_n(len(ids), 'claimed request', 'claimed requests')}), "
            f"and is gone: its lease lapsed {clock.human_duration((now - at) / 1000)} ago: the "
            f"next relay command makes {'it' if len(ids) == 1 else 'them'} "
            "delivery_unknown, for a person to settle; `relay list` does it and shows "
            f"{'it' if len(ids) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    return {i for _, ids in held.values() for i in ids}


def _check_deadlines(report: Report, rows: list[Row]) -> None:
    """Claim leases and reply deadlines that ran out and that no command has applied yet
    (design.md §11): those the next command makes delivery_unknown are a warn now; a
    redelivery or a final failure needs nobody, so it is said in an ok line."""
    lost = [r["id"] for r in rows if r["state"] == "delivered" and r["on_lost"] == "unknown"]
    late = [r["id"] for r in rows if r["state"] == "acknowledged"]
    again = [r for r in rows if r["state"] == "delivered" and r["on_lost"] != "unknown"]
    redeliver = sum(r["attempts"] < r["max_attempts"] for r in again)
    report.facts["claim_leases_run_out"] = [r["id"] for r in rows if r["state"] == "delivered"]
    report.facts["reply_deadlines_passed"] = late
    if lost:
        report.add(
            "claim_leases",
            WARN,
            f"{_ids(lost)}: the claim lease of {_n(len(lost), 'request', 'requests')} "
            "ran out before ack: the next relay command makes "
            f"{'it' if len(lost) == 1 else 'them'} delivery_unknown, for a person to "
            f"settle; `relay list` does it and shows {'it' if len(lost) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        note = ""
        if again:
            note = (
                f"; {redeliver} ran out and will be queued again, "
                f"{len(again) - redeliver} will fail (max_attempts_exceeded): "
                "nothing for a person"
            )
        report.add("claim_leases", OK, "no claim lease ran out with on_lost=unknown" + note)
    if late:
        report.add(
            "reply_deadlines",
            WARN,
            f"the reply deadline of {_n(len(late), 'request', 'requests')} "
            f"({_ids(late)}) passed: the next relay command makes "
            f"{'it' if len(late) == 1 else 'them'} delivery_unknown, for a person to "
            f"settle; `relay list` does it and shows {'it' if len(late) == 1 else 'them'}",
            fix=report.cmd("list --state delivery_unknown"),
        )
    else:
        report.add("reply_deadlines", OK, "no acknowledged request is past its reply deadline")


def _check_queues(report: Report, rows: list[Row], cap: int | None) -> None:
    """Recipients above 80 % of the queue cap (design.md §4): new requests to them are soon
    refused with capacity_exceeded until they claim and finish work."""
    report.facts["queues_near_cap"] = [{"peer": r["to_peer"], "open": r["n"]} for r in rows]
    if cap is None:
        report.add("queues", OK, "not checked: RELAY_QUEUE_CAP is not a number (see above)")
        return
    if not cap:
        report.add("queues", OK, "no queue cap (RELAY_QUEUE_CAP=0)")
        return
    if not rows:
        report.add(
            "queues",
            OK,
            f"every recipient holds at most "
            f"{int(cap * QUEUE_WARN_FRACTION)} open requests (80 % of the cap {cap})",
        )
        return
    for r in rows:
        peer, n = r["to_peer"], r["n"]
        state = (
            "full: new requests to it are refused"
            if n >= cap
            else "new requests to it are refused at the cap"
        )
        report.add(
            f"queue:{peer}",
            WARN,
            f"{n} open requests of a cap of {cap} ({min(100, n * 100 // cap)} %); "
            f"{state} (capacity_exceeded) until it claims and finishes work",
            fix=report.cmd("list", "--to", peer, "--state", "queued"),
        )


def _ledger_needs(store: Store, now: int) -> tuple[int, int]:
    """(effect_unknown entries that do not rerun by themselves, entries awaiting approval)."""
    from ...ledger.entries import awaiting, list_entries, reruns_by_itself

    unknown = [e for e in list_entries(store, now, ["effect_unknown"]) if not reruns_by_itself(e)]
    return len(unknown), len(awaiting(store, now))
