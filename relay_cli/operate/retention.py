"""Retention (design.md §4): `relay prune` turns old final requests into tombstones and later
removes the tombstones.

- A final request whose ``finished_at`` is older than the retention (default 30 days)
  loses its bodies: ``text``, ``reply`` and ``detail`` (also the ``detail`` of its events)
  become NULL and ``pruned`` becomes 1. The row stays as a tombstone (id, fingerprint,
  from, to, final state, reason, times), so a very late retry of the same send or submit
  still answers ``duplicate: true`` with the old final state, and ``show`` answers
  ``"pruned": true``.
- 120 days after a request finished (or after the retention, if that is longer) its row
  and its events are removed entirely; after that its id is free again. Its claims go
  with it, except one made with an attempt id (design.md §6): that one stays, marked with
  when its request was removed, and goes after as long again, so a very late retry of
  the attempt is told that its request was pruned, never that it took nothing.
- Drafts: unsubmitted drafts that expired are removed; so are submitted drafts whose
  request is gone or is a tombstone (the request row answers a repeated submit).
- Requests that are not final are never touched.
- Sessions that ended (left, lease lapsed, superseded) more than the retention ago are
  removed once no request (row or tombstone) and no draft names them, as sender or
  claimant: so a ghost's very late retry still answers ``duplicate: true`` for as long
  as the request's tombstone lives, and a session holding work is never removed. An
  active session is never removed. A removed session's token answers
  ``invalid_session``. The hook's bookkeeping of a session that is not active (its
  ``hook_state`` row, its ``wake_waiters`` row) is removed once untouched for the
  retention.
- The side-effect ledger (design.md §10) follows the rule of requests: a final entry
  (succeeded, failed, denied, forgotten) older than the retention, counted from when it
  reached that state, loses only its captured stdout/stderr and stays as a tombstone that
  still replays or still denies; 120 days after that (or the retention, if longer) its
  row goes and the key is new again. Running, awaiting and approved entries are never
  touched.

Work happens in batches of ``BATCH`` rows, each its own short ``BEGIN IMMEDIATE``
transaction with a pause after it, so other relay commands never wait long for the write
lock.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..core import clock
from ..core.errors import RelayError
from ..core.limits import DEFAULT_RETENTION_S, FINAL_STATES, STATES, TOMBSTONE_S
from ..ledger.states import FINAL_STATES as LEDGER_FINAL
from ..requests import due

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from relay_cli.store import ConnectionStore, DataStore, LedgerStore, Store

    from ..core.output import JsonObject

T = TypeVar("T")

BATCH = 500
# the final request states in the order of design.md §5, handed to the store's statements
FINAL = tuple(s for s in STATES if s in FINAL_STATES)

COUNT_KEYS = (
    "requests_pruned",
    "tombstones_removed",
    "events_removed",
    "drafts_removed",
    "sessions_removed",
    "hook_records_removed",
    "claim_attempts_removed",
)


def require_intact(store: ConnectionStore) -> None:
    """`prune` rewrites rows all over the database: on SQLite it first runs quick_check
    (the store's ``health``) and refuses a damaged relay.db with database_corrupt, changing
    nothing. Every other command skips that check, which reads every page: 0.6 ms for a
    400 KiB relay.db, 225 ms for 82 MiB (design.md §2); a page no command reads stays
    unnoticed until doctor or prune runs it."""
    health = store.health()
    if "quick_check" in health.errors:
        raise health.errors["quick_check"]
    if health.integrity is not None and health.integrity != ("ok",):
        raise RelayError(
            "database_corrupt",
            f"relay.db fails quick_check ({health.integrity[0]}); prune changed nothing",
        )


def cutoffs(now: int, older_than_s: int) -> tuple[int, int]:
    """(body cutoff, tombstone cutoff) in ms: rows finished before them are affected."""
    body = now - older_than_s * 1000
    tomb = now - max(TOMBSTONE_S, older_than_s) * 1000
    return body, tomb


def prune(
    store: Store,
    now: int,
    older_than_s: int = DEFAULT_RETENTION_S,
    dry_run: bool = False,
    batch: int = BATCH,
) -> JsonObject:
    """Apply (or with ``dry_run`` only count) the retention at ``now``. Returns the counts.

    Due time-based transitions are applied first, as by every command, so that the
    counts of a dry run equal what the real run then does.
    """
    body_cutoff, tomb_cutoff = cutoffs(now, older_than_s)
    require_intact(store)
    due.drain_due(store, now)
    if dry_run:
        with store.transaction(write=False):
            counts = store.prune_counts(FINAL, now, body_cutoff, tomb_cutoff)
    else:
        done: Counter[str] = Counter()
        # tombstones first, so that the body pass does not touch doomed rows
        for reqs, events in _batches(
            store,
            lambda: store.remove_old_tombstones(FINAL, tomb_cutoff, batch, now),
            batch,
            count=lambda r: r[0],
        ):
            done["tombstones_removed"] += reqs
            done["events_removed"] += events
        for n in _batches(store, lambda: store.prune_bodies(FINAL, body_cutoff, batch), batch):
            done["requests_pruned"] += n
        for n in _batches(
            store, lambda: store.remove_drafts(FINAL, now, body_cutoff, batch), batch
        ):
            done["drafts_removed"] += n
        with store.transaction(write=False):
            unused = store.unused_sessions(FINAL, now, body_cutoff, tomb_cutoff)
        for i in range(0, len(unused), batch):
            with store.transaction():
                done["sessions_removed"] += store.remove_sessions(unused[i : i + batch])
        for n in _batches(store, lambda: store.remove_hook_records(body_cutoff, batch), batch):
            done["hook_records_removed"] += n
        for n in _batches(store, lambda: store.remove_old_attempts(tomb_cutoff, batch), batch):
            done["claim_attempts_removed"] += n
        counts = {k: done[k] for k in COUNT_KEYS}
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "older_than_seconds": older_than_s,
        "bodies_finished_before": clock.iso(body_cutoff),
        "tombstones_finished_before": clock.iso(tomb_cutoff),
        **counts,
    }
    result["ledger"] = prune_ledger(store, now, body_cutoff, dry_run, tomb_cutoff, batch)
    return result


@overload
def _batches(store: ConnectionStore, step: Callable[[], int], batch: int) -> Iterator[int]: ...
@overload
def _batches(
    store: ConnectionStore, step: Callable[[], T], batch: int, count: Callable[[T], int]
) -> Iterator[T]: ...
def _batches(
    store: ConnectionStore,
    step: Callable[[], Any],
    batch: int,
    count: Callable[[Any], int] = lambda r: r,
) -> Iterator[Any]:
    """Run ``step`` in its own write transaction until a batch comes back short.

    Between batches prune sleeps as long as the batch held the write lock (5-100 ms), so
    a command waiting in SQLite's busy handler (which retries every 25-100 ms) gets its
    turn instead of waiting out its busy timeout behind back-to-back batches.
    """
    while True:
        started = time.monotonic()
        with store.transaction():
            result = step()
        yield result
        if count(result) < batch:
            return
        time.sleep(min(0.1, max(0.005, time.monotonic() - started)))


def prune_ledger(
    store: LedgerStore,
    now: int,
    body_cutoff: int,
    dry_run: bool = False,
    tomb_cutoff: int | None = None,
    batch: int = BATCH,
) -> JsonObject:
    """The side-effect ledger's retention (design.md §10), the rule of requests' tombstones.

    Final entries (succeeded, failed, denied, forgotten) that reached their state
    (``updated_at``) before ``tomb_cutoff`` are removed, and their key is new again; those
    that did so before ``body_cutoff`` lose only their captured stdout/stderr and stay as
    tombstones (key, fingerprint, state, exit code, signal, times, decision, resolution),
    so a late retry still replays the outcome or is still denied. ``tomb_cutoff``
    defaults to 120 days before ``now`` or ``body_cutoff``, whichever is earlier
    (:func:`cutoffs`). Running, awaiting and approved entries are never touched.

    In batches of ``batch`` rows with a pause after each, as for requests. Returns
    ``{"entries_pruned": n, "entries_removed": m, "by_state": {state: removed},
    "dry_run": bool}``.
    """
    if tomb_cutoff is None:
        tomb_cutoff = now - TOMBSTONE_S * 1000
    tomb_cutoff = min(tomb_cutoff, body_cutoff)
    if dry_run:
        with store.transaction(write=False):
            trimmed, removed = store.ledger_prune_counts(LEDGER_FINAL, body_cutoff, tomb_cutoff)
    else:
        by_state: Counter[str] = Counter()  # removed, by state
        # removals first, so that the output pass does not touch doomed rows
        for done in _batches(
            store,
            lambda: store.remove_ledger_tombstones(LEDGER_FINAL, tomb_cutoff, batch),
            batch,
            count=lambda r: sum(r.values()),
        ):
            by_state.update(done)
        removed = by_state
        trimmed = sum(
            _batches(
                store,
                lambda: store.prune_ledger_output(
                    LEDGER_FINAL, now, body_cutoff, tomb_cutoff, batch
                ),
                batch,
            )
        )
    return {
        "entries_pruned": trimmed,
        "entries_removed": sum(removed.values()),
        "by_state": dict(sorted(removed.items())),
        "dry_run": dry_run,
    }


def check_vacuum(store: DataStore) -> None:
    """Refuse `prune --vacuum` before anything is pruned where it cannot rebuild the
    database: on PostgreSQL (design.md §13)."""
    store.check_vacuum()


def vacuum(store: DataStore) -> dict[str, int]:
    """`prune --vacuum`: rebuild relay.db without the pages pruning freed, and fold the WAL
    into it, so the file shrinks now. Returns relay.db plus its WAL in bytes, before and
    after. Waits for the write lock like any writer (``busy`` after the busy timeout)."""
    before = store.database_bytes()
    store.vacuum()
    return {"bytes_before": before, "bytes_after": store.database_bytes()}
