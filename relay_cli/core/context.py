"""What one call of relay works with, built once per call (by the command line) and
handed down to the library instead of being read from process-wide state (design.md §8):
the environment it was given, the caller's identity from it, the state directory, the
database URL, the clock, the standard streams and what they are (a terminal or not, how
wide), colour, debugging and the limits of this process.

It is read from an environment and three streams once (``Context.from_environ``: the
command line hands it the process's, ``cli/env.py``'s ``process_context``, the one place
relay reads them); a command line's options (``--home``, ``--database-url``) then set
their part. Nothing below the command line reads the process's environment or standard
streams: it is handed what it needs from here. A test builds one (an environment of its
own, its own streams, a fake clock) instead of changing the process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .clock import Clock
from .command import NO_SCOPE, Scope
from .errors import RelayError
from .limits import DEFAULT_RATE_LIMIT, OPEN_STATES, QUEUE_CAP
from .record import field, record

# The environment variables relay reads (design.md §2, §3, §4, §7, §8), with what each
# means (`relay schema`, the man page): their one list. A test leaves them out of its calls' environment.
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
    "RELAY_QUEUE_CAP": f"Open requests ({', '.join(OPEN_STATES)}) allowed per "
    "recipient, checked by this process's send and submit "
    f"(default {QUEUE_CAP}; 0: no cap). A new request beyond it is capacity_exceeded.",
    "RELAY_DEBUG": "Set to 1 to print a Python traceback on an internal error.",
    "NO_COLOR": "When set, human output is plain text without colour or box characters.",
}

HOME_VAR = "RELAY_HOME"
DATABASE_URL_VAR = "RELAY_DATABASE_URL"
DEBUG_VAR = "RELAY_DEBUG"
RATE_LIMIT_VAR = "RELAY_RATE_LIMIT"
QUEUE_CAP_VAR = "RELAY_QUEUE_CAP"


@record(frozen=True)
class Limits:
    """The limits of this process (design.md §4), as its environment wrote them: read when
    a command checks them, so a malformed value is that command's usage_error, never a
    crash at start (and `relay doctor` reports it)."""

    rate_limit_raw: str | None = None  # $RELAY_RATE_LIMIT
    queue_cap_raw: str | None = None  # $RELAY_QUEUE_CAP

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Limits:
        return cls(environ.get(RATE_LIMIT_VAR), environ.get(QUEUE_CAP_VAR))

    def rate_limit(self) -> int:
        """New requests allowed per sender per minute; 0: no limit."""
        return _limit(RATE_LIMIT_VAR, self.rate_limit_raw, DEFAULT_RATE_LIMIT)

    def queue_cap(self) -> int:
        """Open requests allowed per recipient (design.md §4); 0: no cap."""
        return _limit(QUEUE_CAP_VAR, self.queue_cap_raw, QUEUE_CAP)

    def queue_cap_given(self) -> bool:
        """Whether the environment sets the queue cap (else it is the default)."""
        return bool((self.queue_cap_raw or "").strip())


def _limit(name: str, raw: str | None, default: int) -> int:
    if not raw:  # unset or empty: the default
        return default
    # the whole value, ASCII digits only: no sign, space or newline (design.md §4)
    if not re.fullmatch(r"[0-9]{1,9}", raw, re.ASCII):
        raise RelayError("usage_error", f"{name} must be a whole number >= 0, not {raw!r}")
    return int(raw)


def is_terminal(stream: Any) -> bool:
    """Is ``stream`` a terminal (for standard input: a person typing, not a pipe, a file or
    an agent's shell)? A closed or missing stream is not."""
    try:
        return stream is not None and bool(stream.isatty()) and os.isatty(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False


def is_tty(stream: Any) -> bool:
    """Does ``stream`` say it is a terminal (an output stream: a person sees what relay
    writes there)? A closed or missing stream does not. The one test of relay's output
    streams (``Context.stdout_tty``, ``Output``)."""
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Protocol, TextIO

    class Closable(Protocol):
        """What a call closes when it ends (an ``Env``, a store)."""

        def close(self) -> None: ...


@record
class Context:
    # the environment this call was given (a copy): the caller's identity is read from
    # it (``peers.identity``: RELAY_PEER, RELAY_SESSION), and the settings not carried
    # below (colour, terminal size, PATH, HOME, a runtime's variables, libpq's)
    environ: Mapping[str, str] = field(default_factory=dict)
    # the state directory as given (``--home`` or $RELAY_HOME); None: the per-user default
    home: str | None = None
    # the database URL as given (``--database-url`` or $RELAY_DATABASE_URL), unchecked;
    # None or blank: the local relay.db (design.md §13)
    database_url: str | None = None
    clock: Clock = field(default_factory=Clock)
    stdin: TextIO | None = None
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    # standard input is a terminal: a person typing (design.md §14)
    stdin_terminal: bool = False
    # standard output and standard error are terminals: a person reads them (``Output``)
    stdout_tty: bool = False
    stderr_tty: bool = False
    # colour: None decides by the terminal and NO_COLOR/FORCE_COLOR/TERM (``Output``)
    color: bool | None = None
    debug: bool = False
    # the limits of this process: $RELAY_RATE_LIMIT, $RELAY_QUEUE_CAP (design.md §4)
    limits: Limits = field(default_factory=Limits)
    # what this call opened and must close when it ends (``Env``s and their stores)
    closing: list[Closable] = field(default_factory=list)
    # the stderr streams that carry this call's one JSON error line already (design.md
    # §7; ``Output``), by ``id``
    error_lines: set[int] = field(default_factory=set)
    # the scope notes this call told the person already (``Output.command_lines``), once
    notes_told: set[str] = field(default_factory=set)
    # what the command line's options gave (``--home``, ``--database-url``), not the
    # environment: the scope flags of every command the call prints (design.md §14)
    home_flag: str | None = None
    database_url_flag: str | None = None
    # those flags as the printed commands carry them (the command line sets it)
    scope: Scope = NO_SCOPE

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        clock: Clock | None = None,
        **given: Any,
    ) -> Context:
        """The context of a call in ``environ`` on the streams given; ``clock`` replaces
        the one ``RELAY_TIME_OFFSET`` describes; ``given`` sets any other field. Reads
        nothing else."""
        env = dict(environ)
        facts: dict[str, Any] = dict(
            environ=env,
            home=env.get(HOME_VAR) or None,
            database_url=env.get(DATABASE_URL_VAR),
            clock=clock if clock is not None else Clock.from_environ(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            stdin_terminal=is_terminal(stdin),
            stdout_tty=is_tty(stdout),
            stderr_tty=is_tty(stderr),
            debug=env.get(DEBUG_VAR) == "1",
            limits=Limits.from_environ(env),
        )
        return cls(**{**facts, **given})

    def database_url_given(self) -> bool:
        """Whether this call names a database URL at all (valid or not), unchecked."""
        return bool((self.database_url or "").strip())

    def use_clock(self, clock: Clock) -> None:
        """From now on this call's time comes from ``clock`` (a store's, whose server keeps
        relay's time: design.md §13)."""
        self.clock = clock

    def close(self) -> None:
        """The call ends: close what it opened, last opened first."""
        while self.closing:
            self.closing.pop().close()
