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

from .clock import Clock, _current

HOME_VAR = "RELAY_HOME"
DATABASE_URL_VAR = "RELAY_DATABASE_URL"
DEBUG_VAR = "RELAY_DEBUG"


@dataclass
class Context:
    # the state directory as given (``--home`` or $RELAY_HOME); None: the per-user default
    home: str | None = None
    # the database URL as given (``--database-url`` or $RELAY_DATABASE_URL), unchecked;
    # None or blank: the local relay.db (design.md §13)
    database_url: str | None = None
    clock: Clock = field(default_factory=Clock)
    stdin: object = None
    stdout: object = None
    stderr: object = None
    # colour: None decides by the terminal and NO_COLOR/FORCE_COLOR/TERM (``Output``)
    color: bool | None = None
    debug: bool = False
    # what this call opened and must close when it ends (``Env``s and their stores)
    closing: list = field(default_factory=list)

    @classmethod
    def from_environ(cls, environ=None, clock: Clock | None = None, **given) -> Context:
        """The context of a call in ``environ`` (default: this process's), on the current
        standard streams; ``clock`` replaces the one ``RELAY_TIME_OFFSET`` describes."""
        env = os.environ if environ is None else environ
        return cls(home=env.get(HOME_VAR) or None, database_url=env.get(DATABASE_URL_VAR),
                   clock=clock if clock is not None else Clock.from_environ(env),
                   stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr,
                   debug=env.get(DEBUG_VAR) == "1", **given)

    def database_url_given(self) -> bool:
        """Whether this call names a database URL at all (valid or not), unchecked."""
        return bool((self.database_url or "").strip())

    def use_clock(self, clock: Clock) -> None:
        """From now on this call's time comes from ``clock`` (a store's, whose server keeps
        relay's time: design.md §13)."""
        self.clock = clock
        _current.set(clock)

    def enter(self):
        """Make this the call running in this thread (for readers not handed a clock yet);
        returns the token ``leave`` takes."""
        return _current.set(self.clock)

    def leave(self, token) -> None:
        while self.closing:
            self.closing.pop().close()
        _current.reset(token)
