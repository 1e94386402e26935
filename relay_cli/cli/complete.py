"""Dynamic shell completion (design.md §14): what a command accepts, from the database.

Request ids by what the command takes (`resolve`: delivery_unknown; `ack`, `reply`,
`fail`, `reject`: what my session claimed; `cancel`: what I queued; `claim --id`: what is
queued for me; `submit`: my unsubmitted drafts; `show`, `wait`: any recent request), peer
names and ledger keys. The look is read-only: it never applies due time-based transitions
(so a deadline that just passed may still be offered; the command itself then tells the
truth), never creates a home or a database, and never fails: any problem means no
candidates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ..core import clock
from ..core.limits import CLAIMED_STATES
from .click_seam import ClickContext

if TYPE_CHECKING:
    from collections.abc import Callable

    from relay_cli.core.context import Context
    from relay_cli.store import LedgerStore, PeerStore, Store

# The completion callbacks below (``peers``, ``drafts``, ...) are read by Typer when it
# builds a command, annotations included: theirs are names that exist at run time.
T = TypeVar("T")

LIMIT = 50


# What each command's request id may be: the filter of RequestsSQL.completion_requests.
class Accepts(TypedDict, total=False):
    states: tuple[str, ...]  # the request's state is one of these
    mine: str  # and this column of it names the caller (its name or session)


REQUESTS: dict[str, Accepts] = {
    "any": {},
    "unknown": {"states": ("delivery_unknown",)},
    "claimed": {"states": CLAIMED_STATES, "mine": "claim_session"},
    "sent_queued": {"states": ("queued",), "mine": "from_peer"},
    "queued_for_me": {"states": ("queued",), "mine": "to_peer"},
}


def _param(ctx: ClickContext | None, name: str) -> Any:
    while ctx is not None:
        value = ctx.params.get(name)
        if value:
            return value
        ctx = ctx.parent
    return None


def _call(ctx: ClickContext) -> Context:
    """The call's context (``app.run`` hands it to every completion), with
    --database-url; outside a call, an empty one (no environment: nothing is offered
    that needs one)."""
    from ..core.context import Context

    call = getattr(ctx, "obj", None)
    return call if isinstance(call, Context) else Context()


def _open(ctx: ClickContext) -> Store | None:
    from ..store import open_store_readonly

    call = _call(ctx)
    try:
        home = _param(ctx, "home") or call.home
        return open_store_readonly(home, call.database_url, call.clock, environ=call.environ)
    except Exception:  # noqa: BLE001 - completion never fails: no candidates
        return None


def _me(store: PeerStore, ctx: ClickContext) -> tuple[str | None, str | None]:
    """(my name, my session id), by the same rule as the command (``peers.identity``)."""
    from ..requests.peers import hash_token, identity

    name, token = identity(
        _param(ctx, "as_") or None, _param(ctx, "session") or None, _call(ctx).environ
    )
    session = store.session_by_token_hash(hash_token(token)) if token else None
    if session is not None:
        return session["peer"], session["id"]
    return name, None


def _safe(
    fn: Callable[[Store, ClickContext, str], list[T]],
) -> Callable[[ClickContext, str], list[T]]:
    def run(ctx: ClickContext, incomplete: str) -> list[T]:
        store = _open(ctx)
        if store is None:
            return []
        try:
            return fn(store, ctx, incomplete or "")
        except Exception:  # noqa: BLE001 - completion never fails: no candidates
            return []
        finally:
            store.close()

    return run


def requests(which: str) -> Callable[[ClickContext, str], list[tuple[str, str]]]:
    """A completion callback for a request id that the command accepts (``REQUESTS``)."""
    rule = REQUESTS[which]

    def candidates(store: Store, ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
        prefix = incomplete.lower()
        filters: dict[str, Any] = {"states": rule.get("states")}
        if "mine" in rule:
            name, session_id = _me(store, ctx)
            mine = session_id if rule["mine"] == "claim_session" else name
            if mine is None:
                return []
            filters[rule["mine"]] = mine
        rows = store.completion_requests(prefix, limit=LIMIT, **filters)
        now = store.clock.now_ms()
        return [
            (
                r["id"],
                f"{r['state']}, {r['from_peer']} -> {r['to_peer']}, "
                f"{clock.human_duration(max(0, now - r['created_at']) / 1000)} ago",
            )
            for r in rows
        ]

    def callback(ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
        return _safe(candidates)(ctx, incomplete)

    return callback


def _drafts(store: Store, ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
    name, _ = _me(store, ctx)
    if name is None:
        return []
    return [
        (r["id"], f"draft to {r['to_peer']}")
        for r in store.completion_drafts(incomplete.lower(), name, LIMIT)
    ]


def drafts(ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
    """`submit`: my unsubmitted drafts."""
    return _safe(_drafts)(ctx, incomplete)


def _peers(store: PeerStore, ctx: ClickContext, incomplete: str) -> list[str]:
    return [n for n in store.peer_names() if n.startswith(incomplete)]


def peers(ctx: ClickContext, incomplete: str) -> list[str]:
    """Known peer names."""
    return _safe(_peers)(ctx, incomplete)


def _keys(
    states: list[str] | None,
) -> Callable[[LedgerStore, ClickContext, str], list[tuple[str, str]]]:
    def candidates(store: LedgerStore, ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
        return [
            (r["key"], r["state"])
            for r in store.list_ledger(states)
            if r["key"].startswith(incomplete)
        ][:LIMIT]

    return candidates


def awaiting_keys(ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
    """`approve`, `deny`: ledger keys awaiting a person's decision."""
    return _safe(_keys(["awaiting_approval"]))(ctx, incomplete)


def ledger_keys(ctx: ClickContext, incomplete: str) -> list[tuple[str, str]]:
    """`ledger show`, `ledger resolve`: every ledger key."""
    return _safe(_keys(None))(ctx, incomplete)
