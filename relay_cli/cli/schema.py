"""The machine-readable description of relay's interface (`relay schema`).

Everything here is read from the definitions the code itself uses: the live Typer/Click
command tree, the error taxonomy (``errors.ERRORS``), the transition tables of requests
(``requests.states.TRANSITIONS``) and of ledger entries (``ledger.states.TRANSITIONS``)
and the one request serializer (``objects.request_object``).
The man page and docs/reference.md are generated from this document too
(``scripts/generate.py``), so nothing is written twice.

Only what has no other home in the code lives here: nothing now (the meaning of each exit
status is ``errors.ExitStatus``'s, of each environment variable ``context.ENVIRONMENT``'s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import __version__
from ..core.context import ENVIRONMENT
from ..core.errors import ERRORS, ExitStatus
from ..core.limits import FINAL_STATES, OPEN_STATES, STATES
from ..ledger import states as ledger_states
from ..requests.objects import request_fields
from ..requests.states import MEANING, TRANSITIONS

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TypeGuard

    from typer.core import TyperGroup

    from ..core.output import JsonObject
    from .click_seam import ClickContext as Context
    from .click_seam import Command, Parameter

SCHEMA_VERSION = 1

# What each exit status means (design.md §7), as ``ExitStatus`` defines it. Which error
# codes use it comes from ERRORS.
EXIT_STATUS: dict[int, str] = {int(s): s.meaning for s in ExitStatus if s.meaning}
# and each status an error code is also reported with (``ErrorSpec.also_exits``), with
# its ``when`` as the meaning.

# The environment variables relay reads: their one list (``core.context``).


def exit_statuses() -> dict[int, str]:
    """Every exit status relay gives and what it means: ``EXIT_STATUS``, and the other
    statuses of the error table (``also_exits``), meaning when they are given."""
    statuses = dict(EXIT_STATUS)
    for spec in ERRORS.values():
        for status, when in spec.also_exits:
            statuses.setdefault(status, when)
    return statuses


# ------------------------------------------------------------------ the command tree
def root_command() -> Command:
    """The live Click command tree of the Typer app: every command registered, which
    importing ``relay_cli.cli.commands`` does (as every call but a hook's does first; this
    module is one of the commands', so it cannot import them itself)."""
    from .app import app, build_command

    command = build_command(app)
    if "send" not in getattr(command, "commands", {}):
        raise RuntimeError("import relay_cli.cli.commands first: no command is registered")
    return command


def walk(command: Command | None = None) -> Iterator[tuple[Context, Command]]:
    """Yield ``(ctx, command)`` for the root, every group and every command, in order.

    Hidden commands are skipped. The context carries the full command path.
    """
    import typer

    root = command if command is not None else root_command()

    def visit(ctx: Context) -> Iterator[tuple[Context, Command]]:
        yield ctx, ctx.command
        if _is_group(ctx.command):
            for name in ctx.command.list_commands(ctx):
                sub = ctx.command.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                yield from visit(typer.Context(sub, info_name=name, parent=ctx))

    yield from visit(typer.Context(root, info_name="relay"))


def _jsonable(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


_TYPES = {
    "str": "string",
    "text": "string",
    "int": "integer",
    "integer": "integer",
    "int range": "integer",
    "integer range": "integer",
    "float": "number",
    "float range": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "choice": "choice",
    "path": "path",
    "file": "path",
    "uuid": "string",
}


def param_info(param: Parameter) -> JsonObject:
    type_name = getattr(param.type, "name", "text")
    info: JsonObject = {
        "name": (
            max(param.opts, key=len)
            if param.param_type_name == "option"
            else (param.metavar or (param.name or "").upper())  # (an argument has a name)
        ),
        "kind": param.param_type_name,
        "flags": list(param.opts) + list(param.secondary_opts)
        if param.param_type_name == "option"
        else [],
        "type": _TYPES.get(type_name, type_name),
        "metavar": param.metavar,
        "required": bool(param.required),
        "default": _jsonable(
            None if param.default is None or callable(param.default) else param.default
        ),
        "multiple": bool(param.multiple),
        "is_flag": bool(getattr(param, "is_flag", False)),
        "help": (getattr(param, "help", None) or "").strip() or None,
    }
    choices = getattr(param.type, "choices", None)
    if choices:
        info["choices"] = list(choices)
    for bound in ("min", "max"):
        value = getattr(param.type, bound, None)
        if value is not None:
            info[bound] = value
    if param.envvar:
        info["envvar"] = param.envvar
    return info


def _is_group(cmd: Command) -> TypeGuard[TyperGroup]:
    return hasattr(cmd, "list_commands")


def command_info(ctx: Context) -> JsonObject:
    cmd = ctx.command
    path = ctx.command_path
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    info: JsonObject = {
        "name": path.split(" ", 1)[1] if " " in path else "",
        "path": path,
        "usage": f"{path} {' '.join(cmd.collect_usage_pieces(ctx))}".strip(),
        "group": _is_group(cmd),
        "short_help": cmd.get_short_help_str(limit=120) or None,
        "help": (cmd.help or "").strip() or None,
        "epilog": (cmd.epilog or "").strip() or None,
        "options": [param_info(p) for p in params if p.param_type_name == "option"],
        "arguments": [param_info(p) for p in params if p.param_type_name == "argument"],
    }
    if _is_group(cmd):
        info["subcommands"] = [
            n
            for n in cmd.list_commands(ctx)
            if (sub := cmd.get_command(ctx, n)) is not None and not sub.hidden
        ]
    return info


def build(command: Command | None = None) -> JsonObject:
    """The whole interface as one JSON-able document."""
    commands = [command_info(ctx) for ctx, _ in walk(command)]
    return {
        "schema_version": SCHEMA_VERSION,
        "program": "relay",
        "version": __version__,
        "commands": commands,
        "request_object": request_fields(),
        "errors": [
            {
                "code": code,
                "exit_code": spec.exit_code,
                "retryable": spec.retryable,
                "hint": spec.hint,
                "also_exits": [
                    {"exit_code": status, "when": when} for status, when in spec.also_exits
                ],
            }
            for code, spec in ERRORS.items()
        ],
        "error_document": {
            "stream": "stderr",
            "shape": {
                "error": [
                    "code",
                    "message",
                    "hint",
                    "retryable",
                    "retry_after_seconds",
                    "exit_code",
                ]
            },
        },
        "exit_status": [
            {
                "code": code,
                "meaning": meaning,
                "errors": [
                    c
                    for c, s in ERRORS.items()
                    if code == s.exit_code or code in dict(s.also_exits)
                ],
            }
            for code, meaning in sorted(exit_statuses().items())
        ],
        "states": {
            "all": list(STATES),
            "open": list(OPEN_STATES),
            "final": [s for s in STATES if s in FINAL_STATES],
            "meaning": {
                s: {"claims": MEANING[s][0], "does_not_claim": MEANING[s][1]} for s in STATES
            },
        },
        "transitions": [
            {
                "from": t.from_state,
                "event": t.event,
                "to": t.to_state,
                "reason": t.reason,
                "description": t.description,
            }
            for t in TRANSITIONS
        ],
        "environment": [{"name": k, "meaning": v} for k, v in ENVIRONMENT.items()],
        "ledger": ledger_table(),
    }


def ledger_table() -> JsonObject:
    """The side-effect ledger's states, views and transitions (``ledger_states``)."""
    lt = ledger_states
    return {
        "states": {
            "all": list(lt.STATES),
            "stored": list(lt.STORED_STATES),
            "final": [s for s in lt.STORED_STATES if s in lt.FINAL_STATES],
            "views": {name: {"stored": v.stored, "when": v.when} for name, v in lt.VIEWS.items()},
            "meaning": {
                s: {"claims": m.claims, "does_not_claim": m.does_not_claim, "on_call": m.on_call}
                for s, m in lt.MEANING.items()
            },
        },
        "transitions": [
            {"from": t.from_state, "event": t.event, "to": t.to_state, "who": t.who, "when": t.when}
            for t in lt.TRANSITIONS
        ],
    }
