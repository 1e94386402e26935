"""Peers, sessions and the caller's identity (design.md §3)."""

from __future__ import annotations

import re

from ..core import clock
from ..core.command import Command, Said, relay
from ..core.digest import sha256_hex
from ..core.errors import RelayError
from ..core.limits import HOOK_RECENT_MS, KINDS, NAME_PATTERN, default_session_lease
from ..core.record import record
from . import activity
from .states import apply

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Mapping

    from ..core.errors import ErrorCode

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import HookStore, PeerStore, Row, Store


def validate_name(name: str, what: str = "peer name") -> str:
    # the whole value (fullmatch), in ASCII: "alice\n" is not a name (compiled at first
    # use, which re caches)
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name, re.ASCII):
        raise RelayError("invalid_name", f"{what} {name!r} is not a valid peer name")
    return name


def validate_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in KINDS:
        raise RelayError("invalid_name", f"kind {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def hash_token(token: str) -> str:
    return sha256_hex(token.encode("utf-8", "surrogateescape"))


def renew_interval_s(lease_seconds: int) -> float:
    """How often a blocked command or the launcher renews: 10 s or a third of the lease."""
    return min(10.0, lease_seconds / 3)


@record
class Caller:
    """Who is calling: a name (``identify`` refuses a call without one), and the session
    their token names (if any)."""

    name: str
    session: Row | None = None
    status: str | None = None  # active | superseded | expired (for a token's session)


def identity(
    as_: str | None, token: str | None, environ: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(name, token) of the caller (design.md §3): ``--as`` and ``--session`` first, then
    ``RELAY_PEER`` and ``RELAY_SESSION`` from ``environ`` (an empty variable is unset).

    A ``RELAY_SESSION`` is not used when ``--as`` names another peer than ``RELAY_PEER``:
    that token belongs to the shell's own peer, not to the name the caller chose.
    """
    env_peer = environ.get("RELAY_PEER") or None
    name = as_ if as_ is not None else env_peer
    if token is None and (as_ is None or env_peer is None or env_peer == as_):
        token = environ.get("RELAY_SESSION") or None
    return name, token


# The error a token of a session in each status gets (design.md §3).
STATUS_ERRORS: dict[str, ErrorCode] = {
    "superseded": "peer_superseded",
    "expired": "lease_expired",
    "left": "invalid_session",
}


def session_status(store: PeerStore, session: Row | None, now: int | None = None) -> str:
    """What a session is, the one session-status rule (design.md §3): ``active``,
    ``left``, ``superseded`` (it was replaced: a newer session of its name joined, or its
    lease lapsed and a newer session exists), or ``expired`` (its lease lapsed and no newer
    session exists). A session that does not exist counts as ``left``.

    With ``now``, an active session whose lease has passed but was not swept yet (a reader
    that applies no due transition, such as doctor) counts as lapsed too.
    """
    if session is None:
        return "left"
    status: str = session["state"]
    if status == "active" and now is not None and session["lease_expires_at"] <= now:
        status = "expired"
    if status == "expired" and store.newer_session_exists(session):
        return "superseded"
    return status


def session_caller(store: PeerStore, session: Row) -> Caller:
    """The caller that a session's token makes, with the session's status."""
    return Caller(session["peer"], session, session_status(store, session))


def identify(store: PeerStore, name: str | None, token: str | None) -> Caller:
    """Resolve ``--as``/``--session`` into a Caller: ``no_identity`` / ``invalid_session``.

    Session *state* (superseded, lapsed) is not judged here; see ``require_live``, which
    design.md §6 orders after dedupe.
    """
    if name is not None:
        validate_name(name, "--as")
    if token:
        session = store.session_by_token_hash(hash_token(token))
        if session is None or session["state"] == "left":
            raise RelayError(
                "invalid_session",
                "this session token names no session"
                if session is None
                else "this session has left",
                detail=None
                if session is None
                else _rejoin(store, Caller(session["peer"], session)),
            )
        if name is not None and name != session["peer"]:
            raise RelayError(
                "invalid_session",
                f"the session token belongs to {session['peer']!r}, not to {name!r}",
            )
        return session_caller(store, session)
    if name is None:
        raise RelayError("no_identity", "relay does not know who you are")
    return Caller(name)


def reload(store: PeerStore, caller: Caller) -> Caller:
    """The same caller with its session re-read (it may have lapsed or been superseded)."""
    if caller.session is None:
        return caller
    session = store.get_session(caller.session["id"])
    status = session_status(store, session)
    if status == "left":
        raise RelayError("invalid_session", "this session has left")
    caller.session, caller.status = session, status
    return caller


def join_line(name: str, kind: str | None = None, lease_seconds: int | None = None) -> Command:
    """The exact shell line that gives this shell a new session of ``name`` (design.md §14):
    ``peers join --shell`` prints the ``export`` lines; without ``eval`` they go nowhere.
    A default kind or lease is left out."""
    args = ["peers", "join", name]
    if kind and kind != "other":
        args += ["--kind", kind]
    if lease_seconds and lease_seconds != default_session_lease(kind):
        args += ["--lease", clock.duration_text(lease_seconds)]
    return relay(*args, "--shell", changes=True, form="eval")


def _rejoin(store: PeerStore, caller: Caller) -> Said:
    """The join line for this caller, with the kind and lease its session had."""
    peer = store.get_peer(caller.name)
    lease = caller.session["lease_seconds"] if caller.session is not None else None
    return Said.of("run: ", join_line(caller.name, peer["kind"] if peer else None, lease))


def require_live(store: PeerStore, caller: Caller) -> None:
    """The session-state stage of design.md §6: peer_superseded, lease_expired, session_required."""
    if caller.session is not None:
        if caller.status == "superseded":
            raise RelayError(
                "peer_superseded",
                f"a newer session of {caller.name!r} has replaced this one",
                detail=_rejoin(store, caller),
            )
        if caller.status == "expired":
            raise RelayError(
                "lease_expired",
                f"the lease of this session of {caller.name!r} lapsed",
                detail=_rejoin(store, caller),
            )
        return
    if store.active_session(caller.name) is not None:
        raise RelayError(
            "session_required",
            f"{caller.name!r} has an active session; present its token",
            detail=f"{caller.name} is live in another shell: use that session's token there, "
            "or act under another name with --as",
        )


def require_session(store: PeerStore, caller: Caller) -> Row:
    """Commands that only a live session may run (claim, heartbeat, leave): the caller's
    session."""
    if caller.session is None:
        raise RelayError(
            "session_required",
            f"this command needs an active session of {caller.name!r} (RELAY_SESSION)",
            detail=None
            if store.active_session(caller.name) is not None
            else _rejoin(store, caller),
        )
    require_live(store, caller)
    return caller.session


def renew(store: PeerStore, caller: Caller, now: int) -> None:
    """A successful call of an active session renews its lease (design.md §3)."""
    if caller.session is not None and caller.status == "active":
        store.renew_session(caller.session["id"], now + caller.session["lease_seconds"] * 1000)
        store.touch_peer(caller.name, now)


def end_session(
    store: Store, session: Row, state: str, event: str, *, actor: str, at: int
) -> list[str]:
    """End a session; its claimed, unfinished work becomes delivery_unknown. Returns the
    ids of that work."""
    moved = []
    for row in store.in_flight_of_session(session["id"]):
        apply(store, row, event, actor=actor, at=max(at, row["updated_at"]))
        moved.append(row["id"])
    store.end_session(session["id"], state, at)
    activity.end(store, session, state, len(moved), at)
    return moved


def join(
    store: Store,
    name: str,
    kind: str | None,
    lease_seconds: int,
    now: int,
    agent_session_id: str | None = None,
) -> JsonObject:
    return join_session(store, name, kind, lease_seconds, now, agent_session_id)[0]


def join_session(
    store: Store,
    name: str,
    kind: str | None,
    lease_seconds: int,
    now: int,
    agent_session_id: str | None = None,
) -> tuple[JsonObject, list[str]]:
    """Start a session of ``name``: (what `peers join` prints, the ids of the claimed,
    unfinished work of the session it superseded, which became delivery_unknown)."""
    peer = _known(store, name, kind, now)
    old = store.active_session(name)
    moved = []
    if old is not None:
        moved = end_session(store, old, "superseded", "peer_superseded", actor=name, at=now)
    import secrets

    token = "rly_" + secrets.token_urlsafe(32)
    import uuid  # (only a new session needs it: it imports platform, 3 ms at start)

    session_id = str(uuid.uuid4())
    store.insert_session(session_id, name, hash_token(token), now, lease_seconds, agent_session_id)
    store.touch_peer(name, now)
    return session_object(
        name,
        kind or (peer["kind"] if peer else "other"),
        session_id,
        token,
        now + lease_seconds * 1000,
    ), moved


def session_object(
    peer: str, kind: str, session_id: str, token: str, lease_expires_at: int
) -> JsonObject:
    """The one public shape of a new session (design.md §3), what `peers join` prints: the
    only place its secret token is ever shown."""
    return {
        "peer": peer,
        "kind": kind,
        "session_id": session_id,
        "token": token,
        "lease_expires_at": clock.iso(lease_expires_at),
    }


def _known(store: PeerStore, name: str, kind: str | None, now: int) -> Row | None:
    """Make ``name`` a known peer (of ``kind``, when given); return its row as it was
    before (None for a new name)."""
    validate_name(name)
    validate_kind(kind)
    peer = store.get_peer(name)
    if peer is None:
        store.insert_peer(name, kind or "other", now)
    elif kind and kind != peer["kind"]:
        store.set_peer_kind(name, kind)
    return peer


def add(store: Store, name: str, kind: str | None, now: int) -> JsonObject:
    _known(store, name, kind, now)
    return peer_object(store, name, now)


def heartbeat(store: Store, caller: Caller, now: int) -> JsonObject:
    require_session(store, caller)
    renew(store, caller, now)
    return peer_object(store, caller.name, now)


def leave(store: Store, caller: Caller, now: int) -> JsonObject:
    return leave_session(store, caller, now)[0]


def leave_session(store: Store, caller: Caller, now: int) -> tuple[JsonObject, list[str]]:
    """End my session: (the peer object, the ids of the claimed, unfinished work that
    became delivery_unknown by it)."""
    session = require_session(store, caller)
    moved = end_session(store, session, "left", "recipient_disconnected", actor=caller.name, at=now)
    store.touch_peer(caller.name, now)
    return peer_object(store, caller.name, now), moved


def waiter_running(store: HookStore, name: str, now: int) -> bool:
    """A wake waiter of a live session of ``name`` runs now (design.md §12)."""
    rows = store.live_session_waiters(name, now)
    if not rows:
        return False
    from ..core.process import process_alive  # only when a waiter row exists: start-up stays lean

    return any(process_alive(r["pid"], r["process_start"], r["host"]) for r in rows)


def wakeup(store: Store, name: str, now: int) -> str:
    """How ``name`` can be woken (design.md §12), the one definition that send/submit,
    `peers list` and doctor show: ``waiter`` when a wake waiter of a live session of that
    peer runs now; ``hook`` when relay's hook ran for it in the last 10 minutes;
    ``polling`` when a session of it is blocked in ``claim --wait``; else
    ``not_configured``. Advisory: none of them is evidence of delivery."""
    if waiter_running(store, name, now):
        return "waiter"
    peer = store.get_peer(name)
    if peer is not None and peer["hook_seen_at"] and peer["hook_seen_at"] >= now - HOOK_RECENT_MS:
        return "hook"
    if store.peer_is_polling(name, now):
        return "polling"
    return "not_configured"


def peer_object(store: Store, name: str, now: int) -> JsonObject:
    """The one public shape of a peer (design.md §6)."""
    peer = store.get_peer(name)
    if peer is None:  # a session's or a new peer's name: its row exists (peers are never removed)
        raise RelayError("unknown_peer", f"{name!r} is not a known peer")
    session = store.active_session(name)
    return {
        "name": peer["name"],
        "kind": peer["kind"],
        "active": session is not None,
        "session_id": session["id"] if session else None,
        "lease_expires_at": clock.iso(session["lease_expires_at"]) if session else None,
        "last_seen_at": clock.iso(peer["last_seen_at"]),
        "wakeup": wakeup(store, name, now),
        # what its newest session's hooks last showed (design.md §19)
        **activity.fields_of(activity.of_session(session or store.newest_session(name), now)),
    }


def list_peers(store: Store, now: int) -> JsonObject:
    return {"peers": [peer_object(store, p["name"], now) for p in store.list_peers()]}
