"""`relay notify set|show|clear|test`: the command relay runs when an agent needs the
person (design.md §19), stored in the home; thin over agents/alerts.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from ..core.command import Command, Said, relay, shell
from ..core.errors import RelayError
from ..core.limits import NOTIFY_TEST_TIMEOUT_S
from .app import Env, HomeOpt, JsonOpt, RelayGroup, app, examples, lazy_module

if TYPE_CHECKING:
    from ..agents import alerts
else:  # executed when first used; the type checker reads it as the module it is
    alerts = lazy_module("relay_cli.agents.alerts")

notify_app = typer.Typer(
    cls=RelayGroup,
    help="A command of yours that relay runs when an agent needs you.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(notify_app, name="notify")


def _shown(words: list[str]) -> Command:
    """The alert command as relay prints it: another program's command, one value
    (design.md §14), never text."""
    return shell(words[0], *words[1:])


def _none_set() -> Said:
    return Said.of("no command is set (", relay("notify", "set", "--help"), " says how)")


@notify_app.command(
    "set",
    context_settings={"allow_interspersed_args": False},
    epilog=examples(
        'relay notify set -- notify-send relay "an agent needs you"',
        "relay notify set -- sh -c 'curl -d \"$RELAY_ALERT_TEXT\" ntfy.sh/my-topic'",
    ),
)
def notify_set(
    cmd: Annotated[
        Optional[List[str]],
        typer.Argument(
            metavar="-- CMD [ARGS]...",
            show_default=False,
            help="The command, after `--`, run as written (no shell); the facts come in "
            "RELAY_ALERT_* variables.",
        ),
    ] = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Store the command relay runs when an agent starts needing you, or goes gone or
    turn_failed while it holds claimed work.

    Run once per episode, in the background; nothing waits for it. The facts are in
    RELAY_ALERT_PEER, RELAY_ALERT_CAUSE, RELAY_ALERT_SINCE, RELAY_ALERT_TEXT and the other
    RELAY_ALERT_* variables (docs/agents.md), never in the command's words.
    """
    env = Env(json_, home, creates=False)
    if not cmd:
        raise RelayError("usage_error", "relay notify set needs the command after `--`")
    with env.unit() as now:
        words = alerts.set_command(env.store, list(cmd), now)
    if env.json:
        env.out.json({"command": words, "source": "home"})
    else:
        env.out.said(Said.of("alerts run: ", _shown(words)))
        if env.ctx.environ.get(alerts.NOTIFY_VAR):
            env.out.note(f"{alerts.NOTIFY_VAR} is set in this shell and wins over it here")
    return 0


@notify_app.command("show", epilog=examples("relay notify show", "relay notify show --json"))
def notify_show(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Show the command alerts run, and where it comes from (RELAY_NOTIFY or the home)."""
    env = Env(json_, home, creates=False)
    with env.unit(write=False):
        words, source = alerts.command(env.store, env.ctx.environ)
    if env.json:
        env.out.json({"command": words, "source": source})
        return 0
    if words is None:
        why = alerts.unusable(env.ctx.environ) if source == alerts.NOTIFY_VAR else None
        env.out.said(Said.of("no alerts: ") + (why or _none_set()))
        return 0
    where = alerts.NOTIFY_VAR if source == alerts.NOTIFY_VAR else "the home"
    env.out.said(Said.of("alerts run: ", _shown(words), f" (from {where})"))
    return 0


@notify_app.command("clear", epilog=examples("relay notify clear"))
def notify_clear(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Forget the stored command: no alerts run (unless RELAY_NOTIFY names one)."""
    env = Env(json_, home, creates=False)
    with env.unit():
        cleared = alerts.clear_command(env.store)
    if env.json:
        env.out.json({"cleared": cleared})
    else:
        env.out.line("alerts: the stored command is forgotten" if cleared else "nothing was set")
    return 0


@notify_app.command("test", epilog=examples("relay notify test"))
def notify_test(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Run the alert command once now, with RELAY_ALERT_CAUSE=test, and say how it ended
    (it is waited for here, at most 10 s, then ended; a real alert is not waited for).
    With no command set, nothing runs and it says so."""
    env = Env(json_, home, creates=False)
    with env.unit(write=False) as now:
        words, source = alerts.command(env.store, env.ctx.environ)
    if words is None:  # nothing to run: said, not an error (no alert would run either)
        if env.json:
            env.out.json({"command": None, "source": source, "exit_code": None})
        else:
            why = alerts.unusable(env.ctx.environ) if source == alerts.NOTIFY_VAR else None
            env.out.said(Said.of("nothing ran: ") + (why or _none_set()))
        return 0
    facts = alerts.test_facts(str(env.store.home), now)
    code, stderr = alerts.run_now(
        words, alerts.child_env(env.ctx.environ, facts), NOTIFY_TEST_TIMEOUT_S
    )
    if env.json:
        env.out.json({"command": words, "source": source, "exit_code": code})
        return 0
    if code is None:
        env.out.said(
            Said.of(
                _shown(words),
                f" still ran after {NOTIFY_TEST_TIMEOUT_S} s: relay ended it and what it "
                "started (a real alert is never waited for, nor ended)",
            )
        )
    else:
        env.out.said(Said.of("ran ", _shown(words), f": exit {code}"))
    if stderr and code != 0:
        env.out.note("its stderr ended with:\n" + "\n".join(f"  {ln}" for ln in stderr.split("\n")))
    return 0
