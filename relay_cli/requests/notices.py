"""`relay notices` (design.md §12): each finished request is reported to its sender once.

Reading the notices marks them seen (``requests.notified_at``), so this is a write
command: it runs in a write transaction, refuses a superseded or lapsed session like any
other change, and renews the caller's lease when it succeeds.

A batch is tied to the call that told it (design.md §6): every call that tells notices
(`notices`, the prompt hook) has a batch id of its own, stored with each request it told
(``requests.notice_batch``); the caller's session (a caller without one: its peer) keeps
the batch of its latest `notices` call, even one that told nothing, and `notices --again`
shows that batch again, for a call whose answer was lost.
"""

from __future__ import annotations

from ..core import clock
from .objects import request_object
from .peers import Caller, renew, require_live

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Record, Row, Store

NOTICE_KEYS = ("id", "to", "state", "reason", "created_at", "finished_at")


def notice_object(row: Record) -> JsonObject:
    """One notice: which request, how it ended, as the request object says it (its keys
    ``NOTICE_KEYS``). No bodies (text, reply, detail)."""
    obj = request_object(row)
    return {k: obj[k] for k in NOTICE_KEYS}


def new_batch() -> str:
    """The id of one call's batch of notices: 12 hex digits, unique enough to tell the
    batches of one peer apart."""
    import uuid  # (imported where used: it imports platform, ~3 ms at start)

    return uuid.uuid4().hex[:12]


def take(store: Store, now: int, caller: Caller) -> JsonObject:
    """The unseen finished requests ``caller`` sent, oldest first, as one batch; marks
    them seen and keeps the batch as the caller's latest (``notices_object``).

    Must run inside a write transaction (``due.unit``), after due transitions.
    """
    require_live(store, caller)
    rows = store.unnotified_finished(caller.name)
    batch = new_batch()
    store.mark_notified([r["id"] for r in rows], now, batch)
    store.set_notices_batch(
        caller.session["id"] if caller.session else None, caller.name, batch, now
    )
    renew(store, caller, now)
    return notices_object([notice_object(r) for r in rows], batch, now)


def again(store: Store, now: int, caller: Caller) -> JsonObject:
    """`relay notices --again`: the batch of the caller's latest `notices` call (its
    session's; a caller without a session, its peer's), again, oldest first; marks
    nothing. Not the prompt hook's, nor another session's: those reached their reader.

    For a call whose answer was lost: nothing is told twice by the plain command.
    """
    require_live(store, caller)
    holder: Row | None = caller.session if caller.session else store.get_peer(caller.name)
    batch, at = (holder["notices_batch"], holder["notices_at"]) if holder else (None, None)
    if holder is None:
        # a name with neither a session nor a peer row (one only used with `send --as`):
        # the batch of the latest call that told it something
        batch, at = store.latest_notice_batch(caller.name)
    rows = store.notice_batch(batch) if batch else []
    renew(store, caller, now)
    return notices_object([notice_object(r) for r in rows], batch, at)


def notices_object(found: list[JsonObject], batch: str | None, at: int | None) -> JsonObject:
    """What `relay notices --json` answers: ``{"notices": [notice, ...], "batch", "told_at"}``
    (the batch id of the call that told them and when; null for `--again` before any)."""
    return {
        "notices": found,
        "batch": batch,
        "told_at": clock.iso(at) if at is not None else None,
    }
