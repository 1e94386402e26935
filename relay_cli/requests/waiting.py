"""Commands that block (design.md §3, §6): `wait` and `claim --wait`, and the lease
renewal of the session whose command is blocked (``LeaseKeeper``).

They look at what is there before they sleep, hold no lock while they sleep
(``due.poll``) and resolve a short id once: a prefix cannot change its meaning mid-wait.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from ..core.errors import ExitStatus, RelayError
from ..core.limits import FINAL_STATES
from . import claiming, lifecycle, objects, peers, validate
from .due import poll, unit
from .peers import Caller

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import Row, Store


class LeaseKeeper:
    """Renews a session's lease while one of its commands is blocked (design.md §3)."""

    def __init__(self, store: Store, caller: Caller, polling_until: float | None = None) -> None:
        self.store = store
        self.caller = caller
        self.polling_until = polling_until  # monotonic end of a claim --wait, for `wakeup`
        # (a caller without a session has nothing to renew: the keeper is never active)
        self.interval = (
            peers.renew_interval_s(caller.session["lease_seconds"])
            if caller.session is not None
            else 0.0
        )
        self.next_at = 0.0

    def _live(self) -> Row | None:
        """The caller's session while it is active, else None (renewal stopped)."""
        session = self.caller.session
        return session if session is not None and self.caller.status == "active" else None

    @property
    def active(self) -> bool:
        return self._live() is not None

    def tick(self, force: bool = False) -> None:
        session = self._live()
        if session is None or (not force and time.monotonic() < self.next_at):
            return
        self.next_at = time.monotonic() + self.interval
        with unit(self.store) as now:
            status = peers.session_status(self.store, self.store.get_session(session["id"]))
            if status != "active":
                self.caller.status = status  # renewal stops
                return
            peers.renew(self.store, self.caller, now)
            if self.polling_until is not None:
                left = max(0.0, self.polling_until - time.monotonic())
                until = now + int(min(left, 3 * self.interval) * 1000)
                self.store.set_waiting(session["id"], until)

    def stop(self) -> None:
        session = self._live()
        if session is not None and self.polling_until is not None:
            try:
                with self.store.transaction():
                    self.store.set_waiting(session["id"], None)
            except RelayError:
                pass


def wait_exit_code(state: str) -> ExitStatus | None:
    if state == "completed":
        return ExitStatus.OK
    if state == "delivery_unknown":
        return ExitStatus.UNKNOWN
    if state in FINAL_STATES:
        return ExitStatus.FINAL_FAILURE
    return None


def wait(
    store: Store,
    name: str | None,
    token: str | None,
    ref: str,
    timeout_s: int,
    on_block: Callable[[str, str], None] | None = None,
) -> tuple[int, JsonObject]:
    """`relay wait`: block until the request that ``ref`` names (a full id or a prefix,
    resolved once) is final. Returns (exit status, the request object as it is then): 0
    completed; 10 failed, rejected, expired or cancelled; 11 delivery_unknown; 75 still
    open when ``timeout_s`` passed (not yet, not a failure).

    Waiting needs no identity; a session ``token`` has its lease renewed while it waits.
    ``on_block(id, state)`` is called once if the request is not final and the wait begins.
    """
    with unit(store, write=False):
        caller = peers.identify(store, name, token) if token else None
        first = lifecycle.get(store, ref)
        request_id = first["id"]
    keeper = LeaseKeeper(store, caller) if caller is not None else None
    # the state last read: the first look may fail (a server gone, design.md §13) and
    # the wait then begins with the state the id was resolved in
    state: list[str] = [first["state"]]

    def check() -> Row | None:
        with unit(store, write=False):
            row = lifecycle.get(store, request_id)
        state[:] = [row["state"]]
        return row if row["state"] in FINAL_STATES else None

    poll(
        store,
        check,
        timeout_s,
        on_tick=keeper.tick if keeper else None,
        on_block=(lambda: on_block(request_id, state[0])) if on_block else None,
    )
    with unit(store, write=False):
        row = lifecycle.get(store, request_id)
        obj = objects.request_object(row, reply=True)
    code = wait_exit_code(row["state"])
    return (ExitStatus.NOT_YET if code is None else code), obj


def claim_waiting(
    store: Store,
    caller: Caller,
    lease_s: int,
    ref: str | None,
    wait_s: int,
    on_block: Callable[[str | None], None] | None = None,
    again: bool = False,
    attempt_id: str | None = None,
) -> JsonObject:
    """`claim [--id ID] [--wait D]`: take the oldest queued request (or the one ``ref``
    names, resolved once), waiting up to ``wait_s`` for one; ``nothing_to_claim`` when
    none came. ``on_block(id or None)`` is called once if nothing could be taken at once
    and the wait begins."""
    request_id = None
    if ref is not None:
        with unit(store, write=False):
            request_id = validate.resolve_ref(store, ref, what="--id")

    def attempt() -> JsonObject | None:
        with unit(store) as now:
            return claiming.claim(
                store, now, peers.reload(store, caller), lease_s, request_id, again, attempt_id
            )

    result = attempt()
    if result is None and wait_s > 0:
        if on_block is not None:
            on_block(request_id)
        keeper = LeaseKeeper(store, caller, polling_until=time.monotonic() + wait_s)
        keeper.tick(force=True)
        try:
            result = poll(store, attempt, wait_s, on_tick=keeper.tick)
        finally:
            keeper.stop()
    if result is None:  # (--again answers or raises: it never gets here)
        with unit(store, write=False):
            caller = peers.reload(store, caller)
            held = claiming.unacked_ids(store, caller)
            note = claiming.held_note(store, caller, held) if held else None
        # the note names commands: it is the detail, rendered with the call's scope
        raise RelayError("nothing_to_claim", f"no queued request for {caller.name!r}", detail=note)
    return result
