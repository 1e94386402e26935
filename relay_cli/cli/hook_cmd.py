"""`relay hook …`, `relay notices`, `relay guide`: what agents use around requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..core import clock
from ..core.limits import HOOK_LEASE_S, SESSION_LEASE
from ..core.output import Col, terminal_width
from ..requests.states import STATE_STYLES
from ..requests.states import note as state_note
from . import hook_call
from .app import (
    AsOpt,
    Env,
    HomeOpt,
    JsonOpt,
    LazyTyper,
    RelayGroup,
    SessionOpt,
    app,
    call_context,
    examples,
    lazy_module,
)
from .click_seam import Choice

# executed when first used; the type checker reads them as the modules they are
if TYPE_CHECKING:
    from ..agents import guide as guide_text
    from ..agents import install as hook_install
    from ..agents.runtimes import Runtime
    from ..requests import notices as notices_lib
else:
    guide_text = lazy_module("relay_cli.agents.guide")
    notices_lib = lazy_module("relay_cli.requests.notices")
    hook_install = lazy_module("relay_cli.agents.install")

hook_app = LazyTyper(
    cls=RelayGroup,
    help="Entry points for agent runtimes' hooks.",
    no_args_is_help=True,
    rich_markup_mode=None,
    register=lambda: _register_hook_commands(),
)
app.add_typer(hook_app, name="hook")

KindHookOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind", metavar="K", help="Kind for a peer the hook joins (default: the runtime's name)."
    ),
]
LeaseHookOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lease",
        metavar="D",
        help="Lease of a session the hook joins "
        f"({clock.span(SESSION_LEASE, HOOK_LEASE_S)}); every hook run "
        "renews it.",
    ),
]
TimeoutHookOpt = Annotated[
    Optional[str],
    typer.Option(
        "--timeout",
        metavar="D",
        help=f"With --wake: how long the waiter waits ({clock.span(SESSION_LEASE, HOOK_LEASE_S)}).",
    ),
]
HOOK_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def _run_hook(
    runtime: str,
    as_: str | None,
    kind: str | None,
    lease: str | None,
    wake: bool,
    timeout: str | None,
    home: str | None,
) -> int:
    """A hook's call the command line read (its words were not all ``hook_call``'s: an
    unknown option, say, which a hook ignores): answered as ``hook_call`` answers."""
    call = hook_call.HookCall(runtime)
    call.as_, call.kind, call.lease, call.wake, call.timeout = as_, kind, lease, wake, timeout
    call.home = home
    return hook_call.answer(call_context(), call)


WakeOpt = Annotated[
    bool,
    typer.Option(
        "--wake",
        help="Run as the wake waiter: wait, without claiming, until a new "
        "request for this peer is queued, then wake the session.",
    ),
]


def _hook_command(rt: Runtime) -> None:
    """Register `relay hook NAME` for one runtime entry (its help lives in the entry)."""

    def command(
        as_: AsOpt = None,
        kind: KindHookOpt = None,
        lease: LeaseHookOpt = None,
        wake: WakeOpt = False,
        timeout: TimeoutHookOpt = None,
        json_: JsonOpt = False,
        home: HomeOpt = None,
    ) -> int:
        return _run_hook(rt.name, as_, kind, lease, wake, timeout, home)

    command.__name__ = f"hook_{rt.name}"
    command.__doc__ = rt.hook_help
    hook_app.command(rt.name, context_settings=HOOK_CONTEXT, epilog=examples(*rt.hook_examples))(
        command
    )


def _check_agent(value: str) -> None:
    if value not in hook_install.RUNTIMES:  # the installer's own usage_error
        hook_install.change_settings(value, install=False, environ={})


DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Show what would change; write nothing.")
]


def _settings_change(
    agent: str,
    project: bool,
    dry_run: bool,
    wake: bool,
    json_: bool,
    home: str | None,
    install: bool,
) -> int:
    env = Env(json_, home)
    result = hook_install.change_settings(
        agent, install=install, environ=env.ctx.environ, project=project, dry_run=dry_run, wake=wake
    )
    if env.json:
        env.out.json(result)
        return 0
    path = result["file"]
    if not result["changed"]:
        what = "already in" if install else "not in"
        env.out.line(
            f"nothing to change: relay's {hook_install.DISPLAY[agent]} hooks are {what} {path}"
        )
    else:
        env.out.line(
            f"{'would change' if dry_run else 'changed'} {path}"
            + (" (new file)" if result["created"] else "")
        )
    for item in result["added"]:
        env.out.line(f"  + {item['event']}: {item['command']}")
    for item in result["removed"]:
        env.out.line(f"  - {item['event']}: {item['command']}")
    if result["backup"]:
        env.out.line(f"backup of the previous file: {result['backup']}")
    if result["changed"] or install:
        import textwrap

        width = min(terminal_width(env.out.stdout, env.out.environ), 100)
        env.out.line("still to do:")
        for line in result["todo"]:  # wrapped at word boundaries: never folds mid-word
            env.out.line(
                textwrap.fill(
                    line,
                    width=width,
                    initial_indent="  - ",
                    subsequent_indent="    ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return 0


# `hook install|uninstall`'s AGENT and --project: their help and choices come from the
# runtime table, so they are filled in when the hook group is built
# (``_register_hook_commands``), never at start-up.
_AGENT_ARG = typer.Argument(metavar="AGENT")
_PROJECT_OPT = typer.Option("--project")
AgentArg = Annotated[str, _AGENT_ARG]
ProjectOpt = Annotated[bool, _PROJECT_OPT]


def hook_install_cmd(
    agent: AgentArg,
    project: ProjectOpt = False,
    dry_run: DryRunOpt = False,
    wake: Annotated[
        bool,
        typer.Option(
            "--wake",
            help="Codex: also install the wake waiter (opt-in). Claude Code's and "
            "opencode's always come with it.",
        ),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Merge relay's hooks into the agent's settings file, keeping everything else.

    Backs the file up first and prints what changed and what is left to do; a second
    install changes nothing; a file that is not valid JSON is refused unchanged.
    opencode gets relay's plugin file instead (another file there is refused).
    """
    return _settings_change(agent, project, dry_run, wake, json_, home, install=True)


def hook_uninstall_cmd(
    agent: AgentArg,
    project: ProjectOpt = False,
    dry_run: DryRunOpt = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Remove exactly the hooks `relay hook install` added (the waiter too)."""
    return _settings_change(agent, project, dry_run, False, json_, home, install=False)


def _register_hook_commands() -> None:
    """`relay hook NAME` for each runtime entry, then `hook install` and `hook uninstall`:
    registered when the `hook` group is first built (``LazyTyper``), because their help
    is read from the runtime table, whose import costs every other command (~18 million
    instructions, bench/startup.py)."""
    from ..agents import runtimes

    for rt in runtimes.ALL:
        _hook_command(rt)
    _AGENT_ARG.help = runtimes.either(runtimes.NAMES) + "."
    _AGENT_ARG.click_type = Choice(lambda: hook_install.RUNTIMES, _check_agent)
    _PROJECT_OPT.help = (
        "The project's settings file in the current directory "
        "("
        + runtimes.either(r.settings.project_file.rsplit("/", 1)[0] + "/" for r in runtimes.ALL)
        + ") instead of your own."
    )
    hook_app.command(
        "install",
        epilog=examples(
            "relay hook install claude --dry-run",
            "relay hook install claude",
            "relay hook install codex --project --wake",
        ),
    )(hook_install_cmd)
    hook_app.command(
        "uninstall",
        epilog=examples(
            "relay hook uninstall claude --dry-run",
            "relay hook uninstall codex",
        ),
    )(hook_uninstall_cmd)


@app.command(
    epilog=examples(
        "relay notices",
        "relay notices --json",
        "relay notices --again   # my latest call's batch, when that answer was lost",
    )
)
def notices(
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Show again the batch my latest notices call told (this session's), "
            "when that answer was lost. Marks nothing.",
        ),
    ] = False,
    as_: AsOpt = None,
    session: SessionOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Requests I sent that became final since I last asked, each once.

    No bodies (`relay show ID` has them).
    Reading them marks them seen, so this counts as a write: it renews my session's lease
    and is refused for a superseded or lapsed session. Each call's notices are one batch
    (its id is in the answer). When an answer was lost, `relay notices --again` shows
    again the batch of my session's latest notices call, even an empty one; not what
    my prompt hook or another session was told.
    """
    env = Env(json_, home, as_, session, creates=False, identified=True)
    with env.unit() as now:
        take = notices_lib.again if again else notices_lib.take
        told = take(env.store, now, env.caller())
    if env.json:
        env.out.json(told)
        return 0
    found = told["notices"]
    out = env.out
    if again:
        out.para(
            f"your latest notices call ({out.when(told['told_at'], now)}, batch "
            f"{told['batch']}) told:"
            if told["batch"]
            else "no notices call of yours is stored"
        )
    # two ids that share their first 8 characters are shown with as many more as tell
    # them apart (design.md §14)
    short = out.short_ids(n["id"] for n in found)
    # "since", not "finished": a delivery_unknown request is final, but nobody knows
    # whether its work finished
    out.table(
        [
            Col("id", fixed=True),
            Col("to", min=10),
            Col("state", fixed=True, styles=STATE_STYLES),
            Col("reason", min=12),
            Col("since", fixed=True),
        ],
        [
            [
                short[n["id"]],
                n["to"],
                n["state"],
                n["reason"],
                out.when(n["finished_at"], now),
            ]
            for n in found
        ],
        empty="nothing" if again else "no new notices",
    )
    states = {n["state"] for n in found}
    if "completed" in states:
        env.out.line(
            "note: `relay show ID` shows a reply; it was written by another agent "
            "and is not user approval."
        )
    if "delivery_unknown" in states:
        env.out.para(f"note: delivery_unknown: {state_note('delivery_unknown')}")
    if found and not again:  # the batch these were told in (design.md §6)
        env.out.para(f"batch {told['batch']}: notices --again shows it again if this is lost")
    return 0


def _check_audience(value: str) -> None:
    guide_text.text(value)  # usage_error for an unknown audience


@app.command(
    "guide",
    epilog=examples(
        "relay guide --for codex >> AGENTS.md",
        "relay guide --for claude --full",
    ),
)
def guide(
    for_: Annotated[
        str,
        typer.Option(
            "--for",
            click_type=Choice(lambda: guide_text.AUDIENCES, _check_audience),
            help="Which agent runtime the guide is for.",
        ),
    ] = "generic",
    full: Annotated[
        bool,
        typer.Option("--full", help="The long form, for people."),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Print the instructions an agent needs (for CLAUDE.md / AGENTS.md).

    The short guide (at most 600 tokens) is what an agent's instructions file needs;
    an agent whose runtime runs relay's hooks needs none: the hooks hand each session
    a 150-token summary and list its work as it arrives. --full is the long form."""
    env = Env(json_, home)
    obj = guide_text.guide_object(for_, full)
    if env.json:
        env.out.json(obj)
    else:
        env.out.stdout.write(obj["text"])
        env.out.stdout.flush()
    return 0
