"""One run of `relay hook RUNTIME [--wake]` (design.md §12): who the hook acts for, then
the event handler (``hook``) or the wake waiter (``wake``)."""

from __future__ import annotations

from collections.abc import Mapping

from ..requests import peers
from . import hook

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

    from relay_cli.store import Store

    from ..core.output import JsonObject


def respond(
    open_store: Callable[[], Store],
    ev: hook.Event,
    runtime: str,
    *,
    as_: str | None,
    kind: str | None,
    lease: str | None,
    wake: bool,
    timeout: str | None,
    environ: Mapping[str, str],
    stderr: TextIO | None = None,
) -> tuple[JsonObject | None, int, str]:
    """One run of `relay hook RUNTIME [--wake]` for the event ``ev``: (the document to
    print on stdout or None, the exit status, a note for stderr).

    The peer comes from ``--as`` or ``RELAY_PEER`` and the token from ``RELAY_SESSION``, by
    the caller-identity rule (``peers.identity``); the env file from the runtime's own
    variables (``environ``: the call's; ``stderr``: where a debugging note goes with
    RELAY_DEBUG=1). ``open_store()`` is called only when the run needs the database. With
    ``wake`` this is the wake waiter (design.md §12); where the runtime has no background
    hooks (Gemini CLI), or would wait for it in the foreground, it does nothing. With no
    identity at all (no ``--as``, RELAY_PEER or RELAY_SESSION) nothing is done.
    """
    dialect = hook.DIALECTS[runtime]
    name, token = peers.identity(as_ or None, None, environ)
    henv = hook.HookEnv(
        peer=name,
        token=token,
        env_file=hook.env_file_from(dialect, environ),
        lease_s=hook.lease_seconds(lease),
        kind=kind or runtime,
        dialect=dialect,
        environ=environ,
        stderr=stderr,
    )
    if henv.peer is not None:
        peers.validate_name(henv.peer, "RELAY_PEER")
    if not henv.has_identity:
        # Someone not using relay (design.md §12): nothing to do, and the database is not
        # even opened, so relay's hooks cost such a run next to nothing.
        return None, 0, ""
    if not wake:
        return hook.handle(open_store(), ev, henv), 0, ""
    if ev.name not in dialect.wake_events:
        # a waiter starts only where relay installs one (an observed event is no place
        # for it: design.md §19)
        return None, 0, ""
    if dialect.wake is None or dialect.waits_in_foreground(environ):
        # No background hooks, or the runtime would wait for this one in the foreground
        # (Claude Code's print mode and SDK): a waiter must not hold the run up, and its
        # note would not reach the model.
        return None, 0, ""
    if dialect.start_in_turn and ev.name == "SessionStart":
        # Codex's SessionStart fires with the first prompt: a turn runs, and its Stop
        # names what arrives meanwhile (a note queued now would name it a second time,
        # or be dropped by `codex exec`); the Stop's own waiter watches the idle session.
        return None, 0, ""
    from . import wake as waiter  # (only a waiter needs it: subprocess, signals)

    code, note = waiter.run(
        open_store(), ev, henv, waiter.timeout_seconds(timeout), runtime=runtime
    )
    _ending()
    return None, code, note


def _ending() -> None:
    """The waiter's process ends next, and the runtime acts on its exit (Claude Code's
    asyncRewake, opencode's plugin): everything it holds lives until then, so Python's last
    collection at exit need not walk it. Frozen, that collection skips it: the exit took
    5.7 ms instead of 30.6 ms of the wake (median of 15, load average 3.4, 2026-12-07;
    bench/wake.py times the exit)."""
    import gc

    gc.freeze()
