"""`relay notices` (design.md §12): each finished request is reported to its sender once.

Reading the notices marks them seen (``requests.notified_at``), so this is a write
command: it runs in a write transaction, refuses a superseded or lapsed session like any
other change, and renews the caller's lease when it succeeds. The last ones told are
told again by `notices --again`, for a call whose answer was lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .objects import request_object
from .peers import Caller, renew, require_live

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Record, Store

NOTICE_KEYS = ("id", "to", "state", "reason", "created_at", "finished_at")


def notice_object(row: Record) -> JsonObject:
    """One notice: which request, how it ended, as the request object says it (its keys
    ``NOTICE_KEYS``). No bodies (text, reply, detail)."""
    obj = request_object(row)
    return {k: obj[k] for k in NOTICE_KEYS}


def take(store: Store, now: int, caller: Caller) -> list[JsonObject]:
    """The unseen finished requests ``caller`` sent, oldest first; marks them seen.

    Must run inside a write transaction (``due.unit``), after due transitions.
    """
    require_live(store, caller)
    rows = store.unnotified_finished(caller.name)
    store.mark_notified([r["id"] for r in rows], now)
    renew(store, caller, now)
    return [notice_object(r) for r in rows]


def again(store: Store, now: int, caller: Caller) -> list[JsonObject]:
    """`relay notices --again`: the notices ``caller`` was last told of (by `notices` or
    the prompt hook, design.md §12), again, oldest first; marks nothing.

    For a call whose answer was lost: nothing is told twice by the plain command.
    """
    require_live(store, caller)
    rows = store.last_notified(caller.name)
    renew(store, caller, now)
    return [notice_object(r) for r in rows]


def notices_object(found: list[JsonObject]) -> JsonObject:
    """What `relay notices --json` answers: ``{"notices": [notice, ...]}``."""
    return {"notices": found}
