"""The one entry point (``main``, ``run``): a call's context is made, the Click command
tree chosen for its words (``app``) is invoked, and every failure becomes one of the codes
of ``relay_cli.core.errors``, printed by the output layer with the call's scope flags
(design.md §7, §14): never a traceback. A hook's call (``hook_call``) is answered before
Typer is imported (design.md §18): this module imports Typer only for the others."""

from __future__ import annotations

import io
import os
import sys

from ..core.clock import Clock
from ..core.context import Context
from ..core.errors import ExitStatus, RelayError
from ..core.output import Output, terminal_width
from . import hook_call
from .env import process_context

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from .click_seam import ClickException, Command


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    code = run(argv)
    try:
        sys.stdout.flush()  # what is still buffered: here, not in the interpreter's exit
    except BrokenPipeError:
        _quiet_stdout()
        code = ExitStatus.BROKEN_PIPE
    except (OSError, ValueError):
        pass
    if hook_call.parse(argv) is not None:
        # A hook's answer is written and its database closed (``run`` closed the call's
        # context): the process ends here, without the interpreter's teardown of every
        # module, which costs a hook as much as a fifth of its start (design.md §18).
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os._exit(code)
    sys.exit(code)


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so the interpreter's final flush
    has nowhere to fail (it would print "Exception ignored" and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def run(
    argv: list[str] | None = None, clock: Clock | None = None, context: Context | None = None
) -> int:
    """Run the CLI; return the exit code. Never lets a traceback out (unless RELAY_DEBUG).

    The call's context is built here, once, from the process (``process_context``; with
    ``clock`` replacing the one ``RELAY_TIME_OFFSET`` describes), unless the caller hands
    one (``context``: a test's environment, streams and clock; the process is then not
    looked at)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if context is None:
        refused = _closed_streams(argv)
        if refused is not None:
            return refused
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):  # never fail on a non-UTF-8 terminal
                stream.reconfigure(errors="backslashreplace")
        context = process_context(clock)
    try:
        return _run(argv, context)
    finally:
        context.close()  # closes what the call opened


def _closed_streams(argv: list[str]) -> int | None:
    """Standard streams the caller closed (``>&-``, ``2>&-``) are an environment problem,
    never a crash half-way (design.md §7). A closed stderr only loses notes and errors. A
    closed stdout is refused before anything is done (a send would otherwise commit and
    then fail to print its answer), except for a hook, which must never break its agent.
    A closed stdin matters only to a command that reads it (`read_text`)."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stdout is not None:
        return None
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    if argv[:1] == ["hook"]:
        return None
    err = RelayError(
        "usage_error",
        "standard output is closed, and relay prints its answer "
        "there; nothing was done (redirect it to /dev/null to discard it)",
    )
    Output(_wants_json(argv), stdout=sys.stdout, stderr=sys.stderr).error(err)
    return err.exit_code


def _run(argv: list[str], ctx: Context) -> int:
    out = Output.of(ctx, _wants_json(argv))
    _warn_offset(out, ctx.clock)
    hook = hook_call.parse(argv)
    if hook is not None:  # `relay hook RUNTIME` in the words a runtime's settings use
        return hook_call.answer(ctx, hook)
    return _run_command(argv, ctx, out)


def _run_command(argv: list[str], ctx: Context, out: Output) -> int:
    """Every other call: through the Click command tree of the Typer app."""
    import typer

    from . import (
        click_seam,
        commands,  # noqa: F401  (registers every command on the app)
    )

    try:
        # (looked up at each call: a test replaces it with one that reuses trees)
        from .app import _click_command

        command = _click_command(argv, click_seam.COMPLETE_VAR in ctx.environ)
        rv = _invoke(command, argv, ctx)
        return rv if isinstance(rv, int) else ExitStatus.OK
    except RelayError as e:
        _name_where(e, ctx)
        out.scope = ctx.scope  # the commands it names carry the call's flags (design.md §14)
        out.error(e)
        return e.exit_code
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        return ExitStatus.INTERRUPTED
    except click_seam.NoArgsIsHelpError as e:
        out.stderr.write(e.format_message() + "\n")
        return ExitStatus.USAGE
    except click_seam.ClickException as e:  # usage errors from parsing
        if argv[:1] == ["hook"] and argv[1:2] not in (["install"], ["uninstall"]):
            # A hook must never break the agent (design.md §12): a typo in its settings
            # (`relay hook claude --kind`) exits 0 silently, like any other bad input.
            # `hook install|uninstall` are a person's commands: theirs is a usage error.
            _debug(ctx)
            return ExitStatus.OK
        err = RelayError("usage_error", _usage_message(e))
        out.error(err)
        return err.exit_code
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`relay list | head -1`): exit like a program killed by
        # SIGPIPE (128+13), and keep the interpreter's final flush quiet.
        _quiet_stdout()
        return ExitStatus.BROKEN_PIPE
    except Exception as e:  # noqa: BLE001 - the last line of defence
        _debug(ctx)
        err = _sqlite_error(e) or RelayError("internal_error", f"{type(e).__name__}: {e}")
        out.error(err)
        return err.exit_code


# errors that say relay looked for something and did not find it (design.md §7)
NOT_FOUND = ("request_not_found", "prepared_not_found", "ledger_key_not_found", "unknown_peer")


def _name_where(e: RelayError, ctx: Context) -> None:
    """A not-found error names the home (or database) it searched, so a mistyped --home or
    RELAY_HOME shows itself (design.md §7). The password of a URL is never printed."""
    if e.code not in NOT_FOUND:
        return
    try:
        from ..store import database_url, origin, resolve_home, shown

        url = database_url(ctx.database_url)
        where = (
            f"the database {shown(url, origin(url, ctx.environ))}"
            if url
            else f"the relay home {resolve_home(ctx.home, ctx.environ)}"
        )
    except RelayError:
        return
    e.message = f"{e.message} (looked in {where})"


def _sqlite_error(e: Exception) -> RelayError | None:
    """A SQLite error the store let through, as relay's error for it. sqlite3 is not
    imported for this: a call that never loaded it cannot have raised one of its errors
    (`relay --help` and `relay id` start without it)."""
    if "sqlite3" not in sys.modules:
        return None
    import sqlite3  # (loaded already: free)

    if not isinstance(e, sqlite3.Error):
        return None
    from ..store import relay_error_from_sqlite

    return relay_error_from_sqlite(e)


def _invoke(command: Command, argv: list[str], context: Context) -> object:
    """Click's ``main`` minus its own handling: Typer's turns a broken pipe into exit 1
    (the "bug" code), before relay could say 141; every exception reaches ``_run``. The
    call's context rides on Click's as ``obj``, and Click's own output (help, completion)
    goes to the context's streams (``click_seam.streams``); help is as wide as the
    context's terminal."""
    import typer

    from . import click_seam

    instruction = context.environ.get(click_seam.COMPLETE_VAR)
    with click_seam.streams(context.stdout, context.stderr):
        if instruction:  # the shell's completion request: answered, and the call ends
            try:
                return click_seam.complete(command, context, instruction, context.environ)
            except SystemExit as e:  # `run` returns its status, as for every other call
                if isinstance(e.code, int):
                    return e.code
                return ExitStatus.OK if e.code is None else 1  # (as Python exits for a message)
        # (the help formatter's own width rule, from the context's terminal)
        width = max(min(_help_columns(context), 80) - 2, 50)
        try:
            with command.make_context(
                "relay", list(argv), obj=context, terminal_width=width
            ) as ctx:
                return command.invoke(ctx)
        except EOFError as e:  # (as Click: end of input at a prompt)
            raise typer.Abort() from e


def _help_columns(context: Context) -> int:
    """The columns Click's help takes (``shutil.get_terminal_size``'s rule) in the call's
    context: COLUMNS as ``int()`` reads it (" 70" and "+70" too) when above 0, else the
    terminal's width, else 80."""
    try:
        columns = int(context.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    return columns if columns > 0 else terminal_width(context.stdout, {})


def _usage_message(e: ClickException) -> str:
    from . import click_seam

    param = getattr(e, "param", None)
    if isinstance(e, click_seam.MissingParameter) and param is not None:
        if getattr(param, "param_type_name", "") == "argument":
            return f"missing argument {param.metavar or param.name.upper()}"
        return f"missing option {param.opts[0]}"
    return e.format_message()


def _debug(ctx: Context) -> None:
    if ctx.debug:
        import traceback

        traceback.print_exc(file=ctx.stderr)


def _warn_offset(out: Output, clock: Clock) -> None:
    """On a terminal, a shifted clock is never silent in human output (design.md §8);
    piped, or with --json (``Output.note`` writes nothing then), stderr stays exactly as
    documented (design.md §7)."""
    if out.stderr_tty:
        try:
            warning = clock.warning()
        except RelayError:
            return  # a malformed offset: the command itself reports invalid_duration
        if warning:
            import textwrap

            width = terminal_width(out.stdout, out.environ)
            out.note(
                textwrap.fill(
                    warning,
                    width=max(40, min(width, 100)),
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
