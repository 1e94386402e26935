"""Time-based transitions (design.md §5): what is due, applying it in deadline order,
the command's transaction that applies it first (``unit``), `relay sweep`, and ``poll``,
which waits for the next change of the database or the next deadline.

No output ever shows a state whose deadline has passed: every command runs in ``unit()``,
which applies every due transition before it reads or writes. There is no daemon.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

from ..core.errors import RelayError
from ..core.limits import SWEEP_BATCH
from . import peers
from .states import apply

TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import RequestStore, Row, Store


def next_due(store: Store) -> int | None:
    times = [t for t in (store.next_request_deadline(), store.next_session_deadline()) if t]
    return min(times) if times else None


def apply_due(store: Store, now: int, limit: int | None = None) -> Counter[str]:
    """Apply every due time-based transition in deadline order (design.md §5).

    At equal times a request's own deadline comes before its claiming session's. With
    ``limit``, stop after about that many (callers loop, one transaction per batch).
    """
    done: Counter[str] = Counter()
    batch = SWEEP_BATCH if limit is None else max(1, min(limit, SWEEP_BATCH))
    while True:
        reqs = store.due_requests(now, batch)
        sess = store.due_sessions(now, batch)
        items = [(t, 0, "r", row) for t, row in reqs]
        items += [(s["lease_expires_at"], 1, "s", s) for s in sess]
        if not items:
            return done
        # A source cut off at ``batch`` rows may hide earlier items than the other
        # source's later ones: only trust the merged order up to the earliest cut-off.
        cutoffs = []
        if len(sess) == batch:
            cutoffs.append(sess[-1]["lease_expires_at"])
        for state, count in Counter(row["state"] for _, row in reqs).items():
            if count == batch:
                cutoffs.append(max(t for t, row in reqs if row["state"] == state))
        cutoff = min(cutoffs) if cutoffs else None
        items.sort(key=lambda i: (i[0], i[1]))
        for deadline, _prio, kind, row in items:
            if cutoff is not None and deadline > cutoff:
                break
            if kind == "s":
                current = store.get_session(row["id"])
                if (
                    current is None
                    or current["state"] != "active"
                    or current["lease_expires_at"] != deadline
                ):
                    continue
                for r in store.in_flight_of_session(row["id"]):
                    done[f"{r['state']}->delivery_unknown"] += 1
                peers.end_session(
                    store, current, "expired", "recipient_disconnected", actor="relay", at=deadline
                )
                done["session:active->expired"] += 1
            else:
                current = store.get_request(row["id"])
                moved = (
                    _apply_own_deadline(store, current, deadline) if current is not None else None
                )
                if moved:
                    done[moved] += 1
            if limit is not None and sum(done.values()) >= limit:
                return done


def _apply_own_deadline(store: RequestStore, row: Row, deadline: int) -> str | None:
    state = row["state"]
    if state == "queued" and row["expires_at"] == deadline:
        event = "ttl_passed"
    elif state == "delivered" and row["lease_expires_at"] == deadline:
        if row["on_lost"] == "unknown":
            event = "claim_lease_lost"
        elif row["attempts"] < row["max_attempts"]:
            event = "claim_lease_redeliver"
        else:
            event = "claim_lease_exhausted"
    elif state == "acknowledged" and row["reply_deadline_at"] == deadline:
        event = "reply_deadline_passed"
    else:
        return None
    fields = None
    if event == "claim_lease_redeliver":
        fields = {"claim_session": None, "lease_expires_at": None, "delivered_at": None}
    new = apply(
        store, row, event, actor="relay", at=max(deadline, row["updated_at"]), fields=fields
    )
    return f"{state}->{new['state']}"


def drain_due(store: Store, now: int) -> Counter[str]:
    """Apply due transitions in batches, each its own short write transaction."""
    total: Counter[str] = Counter()
    while True:
        due = next_due(store)
        if due is None or due > now:
            return total
        with store.transaction():
            total += apply_due(store, now, limit=SWEEP_BATCH)


@contextmanager
def unit(store: Store, write: bool = True) -> Iterator[int]:
    """One command's transaction, after every due time-based transition was applied.

    Yields ``now`` (ms). ``write=False`` reads a consistent snapshot without the write lock.
    """
    now = store.clock.now_ms()
    drain_due(store, now)
    with store.transaction(write=write):
        if write:
            apply_due(store, now)
        yield now


def sweep(store: Store) -> JsonObject:
    """`relay sweep`: apply every transition due now, in batches of short write
    transactions, and count them by ``from->to`` (the sessions that ended with them are not
    counted: only requests have states). With nothing due, nothing is written, so a
    read-only state directory answers too."""
    done = drain_due(store, store.clock.now_ms())
    return {"transitions": {k: v for k, v in sorted(done.items()) if not k.startswith("session:")}}


if TYPE_CHECKING:
    from typing import Callable, Iterator, TypeVar

    T = TypeVar("T")


def poll(
    store: Store,
    check: Callable[[], T | None],
    timeout_s: float,
    on_tick: Callable[[], None] | None = None,
    sleep: Callable[[float], object] | None = None,
    on_block: Callable[[], None] | None = None,
    interval: float | None = None,
) -> T | None:
    """Call ``check()`` now and again whenever the database changes or a deadline passes.

    Holds no lock while sleeping; notices another process's commit within
    ``store.poll_interval`` (on PostgreSQL a notification ends the sleep at once), or
    ``interval`` where ``sleep`` itself ends when the database changes (the wake waiter's
    file watch, agents/wake_watch.py).
    Returns the first non-None result of ``check``, or None when ``timeout_s`` passed.
    ``on_block`` is called once, when the first check found nothing and the wait begins.
    """
    end = time.monotonic() + timeout_s
    last_version = None
    due = None
    while True:
        version = store.data_version()
        if version != last_version or (due is not None and due <= store.clock.now_ms()):
            # the version read before the check: a commit that lands while check() runs
            # changes it again, so the next look re-checks instead of missing it
            last_version = version
            try:
                result = check()
                due = next_due(store)
            except RelayError as e:
                # A database server that went away (a restart, design.md §13) ends no
                # wait by itself: look again until it is back or the time is up.
                if e.code != "database_unavailable" or time.monotonic() >= end:
                    raise
                last_version, result = None, None
            if result is not None:
                return result
        remaining = end - time.monotonic()
        if remaining <= 0:
            return None
        if on_block is not None:
            on_block()
            on_block = None
        if on_tick is not None:
            try:
                on_tick()
            except RelayError as e:
                if e.code != "database_unavailable":
                    raise
        (sleep or store.pause)(min(interval or store.poll_interval, remaining))
