"""The Typer app: its commands' help layout (``SECTIONS``, ``RelayGroup``), the root's own
options (``--version``, ``--home`` and ``--database-url`` before a command's name) and the
Click command tree a call builds (``build_command``, ``_click_command``).

Commands are thin: parse arguments, call a library function inside ``Env.unit()``,
render. The options they share are ``options``'s, the call's context and ``Env`` are
``env``'s, and the entry point that runs a call is ``call``'s; the names are also
importable from here (``from .app import Env, JsonOpt``), as the commands have done.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from .. import __version__
from ..core.context import Context
from ..core.errors import ExitStatus
from ..core.output import Output
from . import scope

# the shared pieces, where the commands name them (``from .app import Env, JsonOpt``)
from .env import Env, call_context, process_context, read_text
from .options import (
    AsOpt,
    HomeOpt,
    JsonOpt,
    KindOpt,
    PeerOpt,
    SessionLeaseOpt,
    SessionOpt,
    StatesOpt,
    WholeNumber,
    duration,
)

__all__ = [
    "SECTIONS",
    "AsOpt",
    "Env",
    "HomeOpt",
    "JsonOpt",
    "KindOpt",
    "LazyTyper",
    "PeerOpt",
    "RelayGroup",
    "SessionLeaseOpt",
    "SessionOpt",
    "StatesOpt",
    "WholeNumber",
    "app",
    "build_command",
    "call_context",
    "duration",
    "examples",
    "lazy_module",
    "process_context",
    "read_text",
]

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from typer.models import CommandInfo

    from .click_seam import ClickContext, Command, HelpFormatter, Parameter


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
    "Operate": ("doctor", "watch", "web", "notify", "sweep", "prune", "export", "db", "schema"),
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
