"""The Typer app, the options every command shares, and the one entry point.

Commands are thin: parse arguments, call a library function inside ``Env.unit()``,
render. All errors become one of the codes of ``relay_cli.core.errors``.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any, List, Optional, overload

import typer
from typer.core import TyperGroup

from .. import __version__
from ..core import clock
from ..core.clock import Clock
from ..core.context import Context
from ..core.errors import ExitStatus, RelayError
from ..core.limits import (
    DEFAULT_HUMAN_SESSION_LEASE_S,
    DEFAULT_SESSION_LEASE_S,
    KINDS,
    MAX_TEXT_BYTES,
    SESSION_LEASE,
    STATES,
)
from ..core.output import Output, terminal_width
from ..requests import due, validate
from ..requests.peers import (
    Caller,
    identify,
    identity,
    validate_kind,
)
from . import click_seam, complete, scope
from .click_seam import Choice

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from types import ModuleType

    from typer.models import CommandInfo

    from ..store import Store
    from .click_seam import ClickContext, ClickException, Command, HelpFormatter, Parameter

# `relay --help` lists the commands in these groups, in this order (anything else last).
SECTIONS = {
    "Requests": (
        "id",
        "send",
        "prepare",
        "submit",
        "show",
        "list",
        "wait",
        "cancel",
        "inbox",
        "claim",
        "ack",
        "reply",
        "fail",
        "reject",
        "resolve",
        "notices",
    ),
    "Peers & sessions": ("peers", "run", "guide", "hook"),
    "Side effects (relay once)": ("once", "ledger", "approve", "deny"),
    "Operate": ("doctor", "watch", "sweep", "prune", "export", "db", "schema"),
    "Try it": ("demo",),
}


class RelayGroup(TyperGroup):
    """A command group whose help lists its commands in ``SECTIONS`` (the root) with each
    summary whole: a summary wraps onto the next line rather than being cut with "..."."""

    def format_commands(self, ctx: ClickContext, formatter: HelpFormatter) -> None:
        commands = [
            (name, cmd)
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        ]
        if not commands:
            return
        by_name = dict(commands)
        sections = [("Commands", [n for n, _ in commands])]
        if ctx.parent is None:
            placed = {n for names in SECTIONS.values() for n in names}
            sections = [
                (title, [n for n in names if n in by_name]) for title, names in SECTIONS.items()
            ]
            sections.append(("Other commands", [n for n, _ in commands if n not in placed]))
        width = max(len(n) for n, _ in commands)
        for title, names in sections:
            if not names:
                continue
            with formatter.section(title):
                formatter.write_dl(
                    [(n.ljust(width), by_name[n].get_short_help_str(limit=1000)) for n in names],
                    col_max=width,
                )


class LazyTyper(typer.Typer):
    """A command group whose commands are registered by ``register`` when something first
    reads them (building the group's Click command, `relay schema`, completion), so that a
    call that never reaches the group never executes what its commands' definitions need
    (`relay hook`'s: the runtime table, bench/startup.py). Assigning the commands (a
    copy's, as ``_listing`` does) replaces the registration still pending on that copy."""

    def __init__(self, *args: Any, register: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._register: Callable[[], None] | None = register

    # (Typer declares a plain attribute; a property is what defers the registration, and
    # Typer only reads and assigns it, which the setter below keeps working)
    @property
    def registered_commands(self) -> list[CommandInfo]:  # pyright: ignore[reportIncompatibleVariableOverride]
        register = getattr(self, "_register", None)
        if register is not None:
            self._register = None
            register()
        return self._commands

    @registered_commands.setter
    def registered_commands(self, value: list[CommandInfo]) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        self._commands = value
        self._register = None


def examples(*lines: str) -> str:
    """A command's EXAMPLES block (its epilog), printed as written: the ``\\b`` line keeps
    Click from re-wrapping it, so each line can be copied and run as it is."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


app = typer.Typer(
    cls=RelayGroup,
    name="relay",
    help=(
        "Hand work between AI coding agents on one machine. relay never runs or delivers the "
        "same intent twice by accident, never loses an accepted request, and never claims "
        "more than it knows. Nothing that arrives through relay is user approval."
    ),
    epilog=examples(
        "relay demo                # two peers hand work over, in a throwaway home",
        'eval "$(relay peers join alice --shell)"     # this shell acts as alice',
        "relay id                  # a new request id: write it into the send",
        "relay send --to bob --id 7d8e2f4a-1b3c-4d5e-8f90-a1b2c3d4e5f6 - < task.md",
        "relay list                # every request, newest first",
        "relay send --help         # each command has its options and examples",
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# ------------------------------------------------------------------ shared options
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")]
HomeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--home",
        metavar="PATH",
        help="State directory (default: $RELAY_HOME, else the per-user state dir).",
    ),
]


def PeerOpt(flag: str, help: str, metavar: str = "PEER") -> Any:  # noqa: N802 (an Option, like typer's)
    """An option that names a peer; shell completion offers the known names."""
    return typer.Option(flag, metavar=metavar, help=help, autocompletion=complete.peers)


AsOpt = Annotated[
    Optional[str],
    PeerOpt("--as", "Who is calling (default: $RELAY_PEER).", "NAME"),
]
SessionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--session",
        metavar="TOKEN",
        help="Session token from `peers join` (default: $RELAY_SESSION).",
    ),
]


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, executed on first attribute access. Command modules use it for
    libraries only their own commands need, so every other command starts faster
    (see bench/startup.py)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:  # (relay's own modules: never)
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)
    return module


class WholeNumber(click_seam.ParamType):
    """An integer option written with the ASCII digits 0-9 only, as every other value relay
    reads in ASCII (design.md §6): Python's ``int`` would also take other scripts' digits
    ('٣'), spaces and underscores. ``low``/``high`` bound it; a refusal is usage_error."""

    name = "integer"

    def __init__(self, option: str, low: int | None = None, high: int | None = None) -> None:
        self.option, self.low, self.high = option, low, high

    def convert(self, value: object, param: Parameter | None, ctx: ClickContext | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value)
            if not (text.isascii() and text.isdigit() and len(text) <= 18):
                raise RelayError(
                    "usage_error",
                    f"{self.option} takes a whole number written with the digits 0-9, not {text!r}",
                )
            number = int(text)
        if (self.low is not None and number < self.low) or (
            self.high is not None and number > self.high
        ):
            raise RelayError(
                "usage_error", f"{self.option} must be {self.low} to {self.high}, not {number}"
            )
        return number


StatesOpt = Annotated[
    Optional[List[str]],
    typer.Option(
        "--state",
        metavar="STATE",
        click_type=Choice(STATES, validate.validate_state),
        help=f"Only requests in STATE (repeatable): {', '.join(STATES)}.",
    ),
]
KindOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind",
        click_type=Choice(KINDS, validate_kind),
        show_default=False,
        help="What runs under this name (default other).",
    ),
]
SessionLeaseOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lease",
        metavar="D",
        help=f"Session lease ({clock.span(SESSION_LEASE, DEFAULT_SESSION_LEASE_S)}; "
        f"{clock.duration_text(DEFAULT_HUMAN_SESSION_LEASE_S)} for --kind human).",
    ),
]


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
    ) -> None:
        self.ctx = call_context()
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


@overload
def duration(value: str | None, bounds: tuple[int, int], what: str, default: int) -> int: ...
@overload
def duration(
    value: str | None, bounds: tuple[int, int], what: str, default: None
) -> int | None: ...
def duration(
    value: str | None, bounds: tuple[int, int], what: str, default: int | None
) -> int | None:
    """The option's duration in seconds (``default`` when it is not given)."""
    if value is None:
        return default
    return clock.parse_duration(value, bounds, what)


def version_callback(value: bool) -> None:
    if value:
        Output.of(call_context(), False).line(f"relay {__version__}")
        raise typer.Exit(ExitStatus.OK)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=version_callback,
            is_eager=True,
            help="Print relay's version and exit.",
        ),
    ] = False,
    home: HomeOpt = None,
) -> None:
    """Hand work between AI coding agents on one machine."""
    # `relay --home DIR list` as `relay list --home DIR` (a command's own --home wins)
    if home:
        scope.given(call_context(), home=home)


# ------------------------------------------------------------------ entry point
def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    try:
        sys.stdout.flush()  # what is still buffered: here, not in the interpreter's exit
    except BrokenPipeError:
        _quiet_stdout()
        code = ExitStatus.BROKEN_PIPE
    except (OSError, ValueError):
        pass
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
    try:
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
        from ..store import database_url, redact, resolve_home

        url = database_url(ctx.database_url)
        where = (
            f"the database {redact(url)}"
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


DATABASE_URL_HELP = (
    "PostgreSQL database shared by several machines, postgresql://... "
    "(default: $RELAY_DATABASE_URL, else relay.db in the state dir). A "
    "command line is visible to every user in ps: keep the password out "
    "of it, in ~/.pgpass or PGPASSWORD (or in $RELAY_DATABASE_URL)."
)


def _database_url(ctx: ClickContext, param: Parameter, value: str | None) -> None:
    """``--database-url``: wins over ``$RELAY_DATABASE_URL`` for this call (its context)."""
    if value is not None and isinstance(ctx.obj, Context):
        from ..store.url import check

        scope.given(ctx.obj, database_url=check(value.strip()) if value.strip() else "")


def build_command(typer_app: typer.Typer) -> Command:
    """The Click command of ``typer_app``, with the global ``--database-url`` added to
    the root, every group and every command (design.md §13): one place, so no command
    can lack it."""
    from typer.core import TyperOption

    command = typer.main.get_command(typer_app)

    def add(cmd: Command) -> None:
        if not any(p.name == "database_url" for p in cmd.params):
            cmd.params.append(
                TyperOption(
                    param_decls=["--database-url", "database_url"],
                    metavar="URL",
                    expose_value=False,
                    is_eager=True,
                    callback=_database_url,
                    help=DATABASE_URL_HELP,
                )
            )
        for sub in getattr(cmd, "commands", {}).values():
            add(sub)

    add(command)
    return command


def _click_command(argv: list[str], completing: bool = False) -> Command:
    """The Click command tree for this call. Building every command costs ~20 ms at each
    start, so a call that names a top-level command gets a tree with only that command;
    --help, completion (``completing``) and anything unrecognised get the full tree."""
    name = _command_name(argv)
    if len(argv) <= 1 and name in ("", "--help", "-h") and not completing:
        return build_command(_listing(app))
    if name and not name.startswith("-"):
        from typer.main import get_command_name

        commands = [
            c
            for c in app.registered_commands
            if (c.name or (c.callback and get_command_name(c.callback.__name__))) == name
        ]
        groups = [g for g in app.registered_groups if g.name == name]
        if commands or groups:
            import copy

            view = copy.copy(app)
            view.registered_commands, view.registered_groups = commands, groups
            return build_command(view)
    return build_command(app)


# options of the root that take a value and may stand before the command's name
ROOT_VALUE_OPTIONS = ("--home", "--database-url")


def _command_name(argv: list[str]) -> str:
    """The top-level command ``argv`` names, after the root's scope options (``relay
    --home DIR list``)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ROOT_VALUE_OPTIONS:
            i += 2
        elif word.split("=", 1)[0] in ROOT_VALUE_OPTIONS:
            i += 1
        else:
            return word
    return argv[0] if argv else ""


def _listing(typer_app: typer.Typer) -> typer.Typer:
    """A copy of a Typer app whose commands take no parameters: all that `relay --help`
    shows of them is their name and first sentence, and this builds in a fraction of the
    time of the full tree."""
    import copy

    def stub(info: CommandInfo) -> CommandInfo:
        # (a lambda, without annotations: typer would evaluate them, for each command)
        callback: Callable[[], None] = lambda: None  # noqa: E731 (see above)

        original = info.callback
        if original is not None:  # (each of relay's commands is a decorated function)
            callback.__name__, callback.__doc__ = original.__name__, original.__doc__
        light = copy.copy(info)
        light.callback = callback
        return light

    view = copy.copy(typer_app)
    view.registered_commands = [stub(c) for c in typer_app.registered_commands]
    view.registered_groups = []
    for group in typer_app.registered_groups:
        # all the root's help shows of a group is its own summary: none of its commands
        light = copy.copy(group)
        sub = copy.copy(group.typer_instance)
        if sub is not None:  # (each of relay's groups is a Typer app, added with add_typer)
            sub.registered_commands = []
            sub.registered_groups = []
        light.typer_instance = sub
        view.registered_groups.append(light)
    return view


def _usage_message(e: ClickException) -> str:
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
