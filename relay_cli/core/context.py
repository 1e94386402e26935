"""What one call of relay works with, built once per call (by the command line) and
handed down to the library instead of being read from process-wide state: the state
directory, the database URL, the clock, the standard streams, colour and debugging.

It is read from the environment once (``Context.from_environ``); a command line's
options (``--home``, ``--database-url``) then set their part. Tests build one with a
fake clock (``Context(clock=Clock(...))``) instead of writing ``os.environ``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from . import clock as _clock
from .clock import Clock
from .limits import DEFAULT_RATE_LIMIT, QUEUE_CAP

if TYPE_CHECKING:
    from collections.abc import Mapping


# The environment variables relay reads (design.md §2, §3, §4, §7, §8), with what each
# means (`relay schema`, the man page): their one list. Tests clear them around a call.
ENVIRONMENT: dict[str, str] = {
    "RELAY_HOME": "State directory (default: the per-user state dir, on Linux "
    "~/.local/state/relay). --home overrides it.",
    "RELAY_DATABASE_URL": "A PostgreSQL URL (postgresql://...) shared by agents on several "
    "machines, instead of relay.db; --database-url overrides it. libpq's "
    "PG* variables and ~/.pgpass apply.",
    "RELAY_PEER": "The caller's peer name (--as overrides it).",
    "RELAY_SESSION": "The caller's session token from `relay peers join` (--session overrides it).",
    "RELAY_TIME_OFFSET": "Seconds (may be negative or fractional) added to relay's clock: a "
    "test knob. relay's commands apply due expiries and lease ends by "
    "that clock to the shared database, so never set it on a home in "
    "use; rehearse on a copy. On a terminal every command warns on "
    "stderr (not with --json), and `relay doctor` warns when it is set.",
    "RELAY_RATE_LIMIT": "New requests allowed per sender per minute for this process "
    f"(default {DEFAULT_RATE_LIMIT}; 0: no limit). A guard against "
    "runaway loops.",
    "RELAY_QUEUE_CAP": "Open requests (queued, delivered, acknowledged) allowed per "
    "recipient, checked by this process's send and submit "
    f"(default {QUEUE_CAP}; 0: no cap). A new request beyond it is capacity_exceeded.",
    "RELAY_DEBUG": "Set to 1 to print a Python traceback on an internal error.",
    "NO_COLOR": "When set, human output is plain text without colour or box characters.",
}

HOME_VAR = "RELAY_HOME"
DATABASE_URL_VAR = "RELAY_DATABASE_URL"
DEBUG_VAR = "RELAY_DEBUG"


class Closable(Protocol):
    """What a call closes when it ends (an ``Env``, a store)."""

    def close(self) -> None: ...


@dataclass
class Context:
    # the state directory as given (``--home`` or $RELAY_HOME); None: the per-user default
    home: str | None = None
    # the database URL as given (``--database-url`` or $RELAY_DATABASE_URL), unchecked;
    # None or blank: the local relay.db (design.md §13)
    database_url: str | None = None
    clock: Clock = field(default_factory=Clock)
    stdin: TextIO | None = None
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    # colour: None decides by the terminal and NO_COLOR/FORCE_COLOR/TERM (``Output``)
    color: bool | None = None
    debug: bool = False
    # what this call opened and must close when it ends (``Env``s and their stores)
    closing: list[Closable] = field(default_factory=list)

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, clock: Clock | None = None, **given: Any
    ) -> Context:
        """The context of a call in ``environ`` (default: this process's), on the current
        standard streams; ``clock`` replaces the one ``RELAY_TIME_OFFSET`` describes."""
        env = os.environ if environ is None else environ
        return cls(
            home=env.get(HOME_VAR) or None,
            database_url=env.get(DATABASE_URL_VAR),
            clock=clock if clock is not None else Clock.from_environ(env),
            stdin=sys.stdin,
            stdout=sys.stdout,
            stderr=sys.stderr,
            debug=env.get(DEBUG_VAR) == "1",
            **given,
        )

    def database_url_given(self) -> bool:
        """Whether this call names a database URL at all (valid or not), unchecked."""
        return bool((self.database_url or "").strip())

    def use_clock(self, clock: Clock) -> None:
        """From now on this call's time comes from ``clock`` (a store's, whose server keeps
        relay's time: design.md §13)."""
        self.clock = clock
        _clock.use(clock)

    def enter(self) -> Clock | None:
        """Make this the call running in this thread (for readers not handed a clock yet);
        returns the token ``leave`` takes."""
        return _clock.use(self.clock)

    def leave(self, token: Clock | None) -> None:
        while self.closing:
            self.closing.pop().close()
        _clock.use(token)
