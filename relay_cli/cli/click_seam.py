"""The one place relay reaches into the Click that Typer runs on.

Since 0.26 Typer carries its own copy of Click (``typer._click``), which its authors keep
private: they may change or remove any of it in a release. relay's command line needs a
few things of it that Typer's public names do not give: a parameter type of its own
(``ParamType``: a choice whose refusal is relay's error, a whole number in ASCII digits),
the exceptions parsing raises (to turn them into usage_error), the context of the call
being run, and the shell's completion request answered without Click's ``main`` (which
turns a broken pipe into exit 1). Everything of the kind is named here, and nowhere else
in relay (tests/cli/test_click_seam.py checks both: no other module names a private part of
Typer or Click, and each name below still has the shape relay uses, so a Typer release
that changes one fails that test, not a person's command).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO

import typer.completion
from typer._click import core as _core
from typer._click import exceptions as _exceptions
from typer._click import formatting as _formatting
from typer._click import globals as _globals
from typer._click import types as _types
from typer._click.shell_completion import CompletionItem

# Click's classes, as relay's annotations name them: a command and its parameters, the
# help formatter, and a command's parsing context, as a completion callback is given it
# (Typer reads a callback's annotations when it builds the command: this name is there
# at run time, as all these are: Typer has loaded their modules)
Command = _core.Command
Parameter = _core.Parameter
ClickContext = _core.Context
HelpFormatter = _formatting.HelpFormatter
# the base class of a parameter type (``click_type=`` of a Typer option)
ParamType = _types.ParamType
# what parsing raises: each is a usage error of relay's (cli/call.py's ``run``)
ClickException = _exceptions.ClickException
NoArgsIsHelpError = _exceptions.NoArgsIsHelpError
MissingParameter = _exceptions.MissingParameter

# the environment variable that carries the shell's completion request (Typer's name for
# a program called relay)
COMPLETE_VAR = "_RELAY_COMPLETE"


def current_obj() -> Any:
    """The ``obj`` of the Click context running now (relay's ``Context`` of the call), or
    None outside a call."""
    return getattr(_globals.get_current_context(silent=True), "obj", None)


def complete(
    command: Command, obj: object, instruction: str, environ: Mapping[str, str] | None = None
) -> int:
    """Answer the shell's completion request ``instruction`` (the value of
    ``COMPLETE_VAR``, e.g. ``complete_bash``) for ``command``, whose contexts carry
    ``obj``; the exit status. As Typer's own entry point, without exiting.

    The request's words are in the call's ``environ`` (``COMP_WORDS``, ``COMP_CWORD``,
    ``_TYPER_COMPLETE_*``), but Typer's completion classes read them from the process
    environment, with no parameter to hand them over: when the call's environment is
    not the process's (a test's context), those variables alone are put there for the
    answer and taken back after it. This is the one place relay writes the process
    environment (None, or the same variables as the process's -- a real shell's call:
    nothing is put)."""
    with _completion_request(environ):
        return typer.completion.shell_complete(
            command, {"obj": obj}, "relay", COMPLETE_VAR, instruction
        )


# the variables of a completion request that Typer's completion classes read
_COMPLETION_VARS = ("COMP_", "_TYPER_COMPLETE_")


@contextlib.contextmanager
def _completion_request(environ: Mapping[str, str] | None) -> Iterator[None]:
    if environ is None:
        yield
        return
    names = {k for k in (*os.environ, *environ) if k.startswith(_COMPLETION_VARS)}
    if all(os.environ.get(k) == environ.get(k) for k in names):  # the process's own
        yield
        return
    saved = {k: os.environ.get(k) for k in names}
    try:
        for k in names:
            if k in environ:
                os.environ[k] = environ[k]
            else:
                os.environ.pop(k, None)
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def streams(stdout: TextIO | None, stderr: TextIO | None) -> Iterator[None]:
    """Click's own output -- a command's ``--help``, the shell's completion answer --
    goes to ``sys.stdout``/``sys.stderr`` (``click.echo`` of the help option and of
    Typer's completion takes no stream from its caller). For a call whose context has
    other streams (a test's), they stand in for the process's while Click runs: the one
    place relay swaps the standard streams. relay's own output never needs it: it
    writes to the context's streams."""
    with contextlib.ExitStack() as stack:
        if stdout is not None and stdout is not sys.stdout:
            stack.enter_context(contextlib.redirect_stdout(stdout))
        if stderr is not None and stderr is not sys.stderr:
            stack.enter_context(contextlib.redirect_stderr(stderr))
        yield


class Choice(ParamType):
    """A real choice (help and shell completion show the values) whose refusal is
    relay's own error: ``check`` is the library's validator (invalid_name for a kind,
    usage_error for the rest), so a bad value gives the same code as it always did.
    ``choices`` may be a callable, for values that live in a module loaded on demand."""

    name = "choice"

    def __init__(
        self, choices: Iterable[str] | Callable[[], Iterable[str]], check: Callable[[str], Any]
    ) -> None:
        self._choices = choices
        self.check = check

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._choices() if callable(self._choices) else self._choices)

    def convert(self, value: Any, param: Parameter | None, ctx: ClickContext | None) -> Any:
        self.check(value)
        return value

    def get_metavar(self, param: Parameter, ctx: ClickContext) -> str:
        # an option shown without a METAVAR of its own: its values, as Typer 0.28 shows them
        return "<" + "|".join(self.choices) + ">"

    def shell_complete(
        self, ctx: ClickContext, param: Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [CompletionItem(c) for c in self.choices if c.startswith(incomplete)]
