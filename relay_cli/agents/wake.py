"""Wake waiters: `relay hook claude|codex|opencode --wake` (design.md §12).

A waiter is a background hook process of one agent session. It waits -- without claiming
anything, holding no lock while it sleeps (``due.poll``: PRAGMA data_version, looked at
when relay.db's files change where the system tells, wake_watch.py; on PostgreSQL on a
NOTIFY) -- until a request for its peer is queued that relay has not yet told that
session of, then wakes the session with a short note written by relay: each request's id
prefix inside the command that claims it, its sender and size, never text from a peer
(agents/announce.py).

- Claude Code runs it as an ``asyncRewake`` hook: exit 2 wakes the model, with the note on
  stderr (the channel of a Claude Code blocking exit).
- opencode: relay's plugin runs it while a session is idle (``session.idle``); it exits 2
  with the note on stderr (the ids named, as for Claude Code), and the plugin submits the
  note in-process with ``promptAsync``, so it arrives as a user turn.
- Codex runs it as an ``async`` hook; the waiter wakes the session with
  ``codex queue --thread <session_id> --message <note>``, which arrives as a user turn, so
  the note says it comes from relay and not from the user; with ``--remote`` to the peer's
  own app server when `relay run` started one (``RELAY_CODEX_REMOTE``); run by the native
  Codex of the session where `codex` on PATH is npm's Node script
  (``codex_server.queue_program``). Opt-in (design.md §12).

One waiter per relay session: the waiter records itself (pid, process start, host) in
``wake_waiters``; a second one for the same session exits 0 at once, unless the recorded
process is gone (a crash does not block the next waiter). It ends, exit 0, when its session
ends (left, superseded, lease lapsed), when its timeout passes, when the runtime that
started it is gone, or on SIGTERM/SIGHUP/SIGINT. The ids it names are marked in the same
transaction -- named (Claude Code), or pending until a turn carrying the note is seen
(Codex) -- so no other waiter names them again and a concurrent Stop hook and Claude
waiter never both announce the same request; a waiter that ends with its note removes its
row in that transaction too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

from ..core import clock
from ..core.context import DEBUG_VAR
from ..core.limits import CODEX_QUEUE_TIMEOUT_S, FIND_GRACE_S, HOOK_LEASE_S, SESSION_LEASE
from ..requests import due, peers
from . import announce
from .hook import (
    MAX_REMEMBERED_IDS,
    MAX_SCANNED,
    Event,
    HookEnv,
    lookup_session,
    mark,
    remember_own_prompt,
)
from .runtimes import BY_NAME

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from relay_cli.store import HookStore, Row, Store

    from ..core.process import Me

    # What signal.signal takes and gives back for a signal.
    Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

DEFAULT_TIMEOUT_S = HOOK_LEASE_S  # the lease of a session the hook joins
TIMEOUT_BOUNDS = SESSION_LEASE

WAKE_EXIT = 2  # Claude Code's asyncRewake: exit 2 wakes the model
# Wake kinds whose note arrives as a user turn (`codex queue`; opencode's plugin submits
# it with promptAsync): the note says it is not the user's.
AS_USER_TURN = ("queue", "plugin")

_END: Final = "end"  # the waiter ends: what it waits for can no longer come


class _Stop(Exception):
    """The runtime that started this waiter is gone, or a signal asked it to end."""


def timeout_seconds(value: str | None) -> int:
    if value is None:
        return DEFAULT_TIMEOUT_S
    return clock.parse_duration(value, TIMEOUT_BOUNDS, "--timeout")


def note(peer: str, reqs: list[announce.Named], more: int, runtime: str) -> str:
    """relay's own wake-up note: each request's line (its id prefix in the command that
    claims it, sender, size), no text from any peer; one sentence says it is relay's, not
    the user's (and, where it arrives as a hook's error, not an error)."""
    return announce.wake_note(peer, reqs, more, BY_NAME[runtime].wake in AS_USER_TURN)


def run(store: Store, ev: Event, henv: HookEnv, timeout_s: int, *, runtime: str) -> tuple[int, str]:
    """Wait for new work for the session of ``ev``; return (exit code, stderr note)."""
    from ..core.process import Me  # process identity: pid, start time, host

    rt = BY_NAME[runtime]
    codex = None
    if rt.wake is None:
        return 0, ""
    if rt.wake == "queue":
        codex = _codex_program(henv, rt.program)
        if codex is None:
            return 0, ""  # nothing could deliver a wake-up
    me = Me.current()
    parent = os.getppid()
    end = time.monotonic() + timeout_s

    def tick() -> None:
        if os.getppid() != parent:
            raise _Stop()

    previous = _trap_signals()
    # the session this process recorded itself as the waiter of, set before that commits:
    # a signal between the commit and _register's return still removes the row (finally)
    recorded: list[str] = []
    try:
        registered = _register(store, ev, henv, me, runtime, end, tick, recorded)
        if registered is None:
            return 0, ""
        session_id, peer = registered
        found = _wait(store, lambda: _check(store, session_id, peer, me, runtime), end, tick)
        if not isinstance(found, tuple):  # None (the time ran out) or _END
            return 0, ""
        ids, text = found
        if codex is None:
            recorded.clear()  # (_check removed the row with the marks: nothing to undo)
            return WAKE_EXIT, text
        if not _codex_queue(henv, codex, ev.session_id, text):
            _forget_pending(store, session_id, ids)
        return 0, ""
    except _Stop:
        return 0, ""
    finally:
        if recorded:  # (deletes only this process's row: none if nothing was committed)
            _unregister(store, recorded[0], me)
        _restore_signals(previous)


def _wait(
    store: Store,
    check: Callable[[], tuple[list[str], str] | Literal["end"] | None],
    end: float,
    tick: Callable[[], None],
) -> tuple[list[str], str] | Literal["end"] | None:
    """``due.poll`` until ``end``: on SQLite asleep until relay.db's files change where the
    system tells (wake_watch.py), else looking at ``data_version`` every poll interval."""
    from .wake_watch import open_watch

    watch = open_watch(store)
    try:
        return due.poll(
            store,
            check,
            max(0.0, end - time.monotonic()),
            on_tick=tick,
            sleep=None if watch is None else watch.sleep,
            interval=None if watch is None else watch.interval,
        )
    finally:
        if watch is not None:
            watch.close()


def _register(
    store: Store,
    ev: Event,
    henv: HookEnv,
    me: Me,
    runtime: str,
    end: float,
    tick: Callable[[], None],
    recorded: list[str],
) -> tuple[str, str] | None:
    """Find the session and record this process as its waiter: (session id, peer), or None
    when there is no session (after a grace period), it has ended, or a waiter runs. The
    session's id is put in ``recorded`` before the row is written."""

    def attempt() -> tuple[str, str] | Literal["end"] | None:
        with due.unit(store) as now:
            session, refused = lookup_session(store, ev, henv)
            if refused:
                return _END  # another runtime session's: never act as it
            if session is None:
                return None
            if peers.session_status(store, session, now) != "active":
                return _END
            current = store.get_waiter(session["id"])
            if current is not None and current["until_at"] > now and _alive(current):
                return _END  # one waiter per session
            until = now + int(max(0.0, end - time.monotonic()) * 1000)
            recorded[:] = [session["id"]]
            store.put_waiter(
                session["id"], session["peer"], runtime, me.pid, me.start, me.host, now, until
            )
            return session["id"], session["peer"]

    grace = min(FIND_GRACE_S, max(0.0, end - time.monotonic()))
    found = due.poll(store, attempt, grace, on_tick=tick)
    return found if isinstance(found, tuple) else None  # (None, or _END)


def _alive(row: Row) -> bool:
    from ..core.process import process_alive

    return process_alive(row["pid"], row["process_start"], row["host"])


def _check(
    store: Store, session_id: str, peer: str, me: Me, runtime: str
) -> tuple[list[str], str] | Literal["end"] | None:
    """None (keep waiting), _END, or (ids, note) once new requests were marked: named
    where the note reaches the model as the waiter ends (Claude Code's exit 2 of a
    background hook), else pending (`codex queue`): they count as named once a turn that
    carries the note is seen, so a note the runtime drops (`codex exec` aborts the queued
    turn) never hides them from the Stop block."""
    queued_note = BY_NAME[runtime].wake == "queue"
    with due.unit(store, write=False) as now:
        if not _still_mine(store, session_id, me, now):
            return _END
        if not _fresh_rows(store, session_id, peer):
            return None
    with due.unit(store) as now:  # mark them, so no Stop hook or waiter names them again
        if not _still_mine(store, session_id, me, now):
            return _END
        fresh = _fresh_rows(store, session_id, peer)
        if not fresh:
            return None
        state = store.get_hook_state(session_id)
        blocks = state["stop_blocks"] if state is not None else 0
        marks = store.hook_marks(session_id)
        shown = announce.named(store, fresh[: announce.MAX_LINES])
        ids = [r.id for r in shown]
        # The rest ("and N more: `relay inbox`") count as named: no waiter wakes for them
        # again, and the next prompt's listing names them.
        mark(marks, "named", [r["id"] for r in fresh[announce.MAX_LINES :]])
        if queued_note:
            mark(marks, "pending", ids)
        else:
            mark(marks, "named", ids)
            mark(marks, "told", ids)
            # the waiter ends with this note: its row goes in the same commit (one write
            # transaction, one fsync, less between the commit it saw and its exit)
            store.delete_waiter(session_id, me.pid, me.start, me.host)
        store.put_hook_marks(session_id, blocks, marks, now, MAX_REMEMBERED_IDS)
        text = note(peer, shown, len(fresh) - len(shown), runtime)
        remember_own_prompt(store, session_id, text, now)
        return ids, text


def _fresh_rows(store: HookStore, session_id: str, peer: str) -> list[Row]:
    """Queued requests of the peer the session was not told of (a listing, a Stop block, a
    note), is not about to be told of (a queued note), and no Stop block named."""
    marks = store.hook_marks(session_id)
    known = set(marks["named"]) | set(marks["pending"]) | set(marks["told"])
    return [r for r in store.hook_queued(peer, MAX_SCANNED) if r["id"] not in known]


def _fresh(store: HookStore, session_id: str, peer: str) -> list[str]:
    return [r["id"] for r in _fresh_rows(store, session_id, peer)]


def _still_mine(store: Store, session_id: str, me: Me, now: int) -> bool:
    if peers.session_status(store, store.get_session(session_id), now) != "active":
        return False
    row = store.get_waiter(session_id)
    return row is not None and row["pid"] == me.pid and row["process_start"] == me.start


def _forget_pending(store: Store, session_id: str, ids: list[str]) -> None:
    """`codex queue` failed: the session was not told, so the Stop hook may name them."""
    with due.unit(store) as now:
        state = store.get_hook_state(session_id)
        blocks = state["stop_blocks"] if state is not None else 0
        marks = store.hook_marks(session_id)
        marks["pending"] = [i for i in marks["pending"] if i not in set(ids)]
        store.put_hook_marks(session_id, blocks, marks, now, MAX_REMEMBERED_IDS)


def _unregister(store: HookStore, session_id: str, me: Me) -> None:
    try:
        with store.transaction():
            store.delete_waiter(session_id, me.pid, me.start, me.host)
    except Exception:  # noqa: BLE001 - a stale row is harmless: its process is gone
        pass


def _codex_program(henv: HookEnv, program: str) -> str | None:
    """What runs `codex queue`: `codex` on PATH, or, where that is the npm package's Node
    script, the native Codex that runs this session (``codex_server.queue_program``)."""
    found = shutil.which(program, path=henv.environ.get("PATH"))
    if found is None:
        return None
    from .codex_server import queue_program  # (not at import: every hook run imports wake)

    return queue_program(found)


def _codex_queue(henv: HookEnv, codex: str, thread: str, text: str) -> bool:
    argv = [codex, "queue", "--thread", thread, "--message", text]
    from .codex_server import REMOTE_ENV  # (not at import: every hook run imports wake)

    remote = henv.environ.get(REMOTE_ENV, "")
    if remote.startswith("unix://"):  # the peer's own app server (`relay run`): at once
        argv += ["--remote", remote]
    from ..core.process import run_bounded

    try:  # at the timeout, everything it started is killed too
        p = run_bounded(argv, timeout=CODEX_QUEUE_TIMEOUT_S, env=henv.environ, capture=False)
    except (OSError, subprocess.SubprocessError) as e:
        _debug(henv, f"codex queue could not run: {e}")
        return False
    if p.returncode != 0:
        _debug(
            henv, f"codex queue exited {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}"
        )
        return False
    return True


def _debug(henv: HookEnv, message: str) -> None:
    if henv.environ.get(DEBUG_VAR) == "1" and henv.stderr is not None:
        henv.stderr.write(f"relay hook codex --wake: {message}\n")


def _raise_stop(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Stop()


def _trap_signals() -> dict[signal.Signals, Handler]:
    previous: dict[signal.Signals, Handler] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, _raise_stop)
        except (ValueError, OSError):  # not the main thread
            pass
    return previous


def _restore_signals(previous: dict[signal.Signals, Handler]) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
