"""What one call works with: its ``Context`` (read from the process here and nowhere
else), the ``Env`` a command opens (its output, home, store and identity), and the text a
command reads (an argument, ``-`` for standard input, or ``--file``)."""

from __future__ import annotations

import os
import sys

from ..core.clock import Clock
from ..core.context import Context
from ..core.errors import RelayError
from ..core.limits import (
    MAX_TEXT_BYTES,
)
from ..core.output import Output
from ..requests import due, validate
from ..requests.peers import (
    Caller,
    identify,
    identity,
)
from . import scope

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..store import Store


def process_context(clock: Clock | None = None) -> Context:
    """The context of a call of this process: its environment and standard streams, read
    here and nowhere else in relay (design.md §8; entry.py's hook fast path reads its few
    variables before relay is imported). ``clock`` replaces the one
    ``RELAY_TIME_OFFSET`` describes (a test's fake clock)."""
    return Context.from_environ(
        os.environ, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr, clock=clock
    )


def call_context() -> Context:
    """The context of the call being run (``run`` hands it to Click as the root context's
    ``obj``, which every command's context inherits); outside a call, the process's."""
    if "relay_cli.cli.click_seam" not in sys.modules:  # no Click call is running (the
        return process_context()  # hook's path, which never imports Typer: hook_call)
    from . import click_seam

    found = click_seam.current_obj()
    return found if isinstance(found, Context) else process_context()


class Env:
    """What one command invocation works with: the call's context, output, home, store,
    identity options."""

    def __init__(
        self,
        json_mode: bool,
        home: str | None,
        as_: str | None = None,
        session: str | None = None,
        *,
        creates: bool = True,
        identified: bool = False,
        ctx: Context | None = None,
    ) -> None:
        # the call's context: the one a command is run in (Click's), or the one given
        self.ctx = call_context() if ctx is None else ctx
        if home:
            scope.given(self.ctx, home=home)
        self.out = Output.of(self.ctx, json_mode)
        self.home = self.ctx.home
        self.as_ = as_
        self.session = session
        # False for a command that only reads or acts on what must already exist: it
        # never makes a home (design.md §2)
        self.creates = creates
        # the command needs a caller: no name at all is no_identity before the home is
        # looked at (design.md §5 orders identity first)
        self.identified = identified
        self._store: Store | None = None
        self.ctx.closing.append(self)

    @property
    def clock(self) -> Clock:
        """The call's clock: the store's once it is open (the server's, on PostgreSQL)."""
        return self.ctx.clock

    @property
    def json(self) -> bool:
        return self.out.json_mode

    @property
    def store(self) -> Store:
        if self._store is None:
            from ..store import open_store

            if self.identified and self.identity() == (None, None):
                raise RelayError("no_identity", "relay does not know who you are")

            self._store = open_store(
                self.home,
                self.ctx.database_url,
                self.ctx.clock,
                create=self.creates,
                environ=self.ctx.environ,
            )
            self.ctx.use_clock(self._store.clock)
        return self._store

    def identity(self) -> tuple[str | None, str | None]:
        """(name, token) by ``peers.identity``: the options, then the call's environment."""
        return identity(self.as_, self.session, self.ctx.environ)

    def caller(self) -> Caller:
        name, token = self.identity()
        return identify(self.store, name, token)

    def unit(self, write: bool = True) -> AbstractContextManager[int]:
        return due.unit(self.store, write=write)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def read_text(
    text: str | None, file: str | None, what: str = "text", out: Output | None = None
) -> str:
    """TEXT argument, ``-`` for stdin, or ``--file PATH`` -> validated text (design.md §4).
    Read from a terminal, human output first says how the text ends (design.md §14)."""
    if text is not None and file is not None:
        raise RelayError("usage_error", f"give the {what} as an argument, `-` or --file, not two")
    limit = MAX_TEXT_BYTES + 1
    if file == "-":
        text, file = "-", None
    if file is not None:
        try:
            with open(file, "rb") as f:
                data = f.read(limit)
        except OSError as e:
            # the path is the problem, not the text: a usage error that names it
            import errno

            reasons: dict[int | None, str] = {
                errno.ENOENT: "there is no such file (a relative path starts in the "
                "current directory)",
                errno.EISDIR: "it is a directory; --file takes a file",
                errno.EACCES: "you may not read it (check its mode)",
            }
            why = reasons.get(e.errno, "fix the path, or pass the text on stdin with `-`")
            raise RelayError(
                "usage_error",
                f"cannot read --file {file}: {e.strerror}",
                detail=f"--file {file}: {why}",
            ) from e
        return validate.validate_text(data, what)
    if text == "-":
        stdin = call_context().stdin
        if stdin is None:
            raise RelayError(
                "usage_error",
                f"the {what} was to be read from standard input "
                "(`-`), but standard input is closed; nothing was done",
            )
        if out is not None and call_context().stdin_terminal:
            out.note(
                f"relay: reading the {what} from the terminal; end it with Ctrl-D on a "
                "line of its own"
            )
        data = stdin.buffer.read(limit)
        return validate.validate_text(data, what)
    if text is None:
        raise RelayError(
            "invalid_text", f"no {what} given: pass it as an argument, `-` for stdin, or --file"
        )
    return validate.validate_text(text, what)
