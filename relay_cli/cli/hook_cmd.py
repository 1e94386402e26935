"""`relay hook claude`, `relay notices`, `relay guide`: what agents use around requests."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer

from ..output import iso_age
from .app import AsOpt, Env, HomeOpt, JsonOpt, SessionOpt, app, lazy_module

guide_text = lazy_module("relay_cli.guide")
hook = lazy_module("relay_cli.hook")
notices_lib = lazy_module("relay_cli.notices")

hook_app = typer.Typer(help="Entry points for agent runtimes' hooks.", no_args_is_help=True,
                       rich_markup_mode=None)
app.add_typer(hook_app, name="hook")


@hook_app.command(
    "claude",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def hook_claude(
    as_: AsOpt = None,
    kind: Annotated[
        Optional[str],
        typer.Option("--kind", metavar="K", help="Kind for a peer the hook joins (default claude)."),
    ] = None,
    lease: Annotated[
        Optional[str],
        typer.Option("--lease", metavar="D",
                     help="Lease of a session the hook joins (10s-24h, default 1h); every hook "
                          "run renews it."),
    ] = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Claude Code command hook: reads the event JSON on stdin, answers in Claude Code's format.

    Install it for SessionStart, UserPromptSubmit, Stop and SessionEnd
    (`relay guide --for claude` prints the settings). It never fails the agent: on anything
    unexpected it exits 0 and prints nothing.
    """
    try:
        if sys.stdin.isatty():  # run by hand at a terminal: there is no event to read
            return 0
        data = sys.stdin.buffer.read(hook.MAX_INPUT_BYTES + 1)
    except (OSError, ValueError, AttributeError):
        return 0
    env = Env(True, home)
    doc = None
    try:
        event = hook.parse(data)
        if event is None:
            return 0
        henv = hook.HookEnv(
            peer=as_ or os.environ.get("RELAY_PEER") or None,
            token=os.environ.get("RELAY_SESSION") or None,
            env_file=os.environ.get("CLAUDE_ENV_FILE") or None,
            lease_s=hook.lease_seconds(lease),
            kind=kind or "claude",
        )
        doc = hook.handle(env.store, event, henv)
    except Exception as e:  # noqa: BLE001 - a hook must never break the agent
        if os.environ.get("RELAY_DEBUG") == "1":
            import traceback

            traceback.print_exc()
            sys.stderr.write(f"relay hook claude: {type(e).__name__}: {e}\n")
        return 0
    finally:
        env.close()
    if doc is not None:
        try:
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    return 0


@app.command()
def notices(as_: AsOpt = None, session: SessionOpt = None, json_: JsonOpt = False,
            home: HomeOpt = None) -> int:
    """Requests I sent that finished since I last asked, each reported once (no bodies).

    Reading them marks them seen, so this counts as a write: it renews my session's lease
    and is refused for a superseded or lapsed session.
    """
    env = Env(json_, home, as_, session)
    with env.unit() as now:
        found = notices_lib.take(env.store, now, env.caller())
    if env.json:
        env.out.json({"notices": found})
        return 0
    env.out.table(
        ["id", "to", "state", "reason", "finished"],
        [[n["id"], n["to"], n["state"], n["reason"],
          f"{iso_age(n['finished_at'], now)} ago"] for n in found],
        empty="no new notices",
    )
    states = {n["state"] for n in found}
    if "completed" in states:
        env.out.line("note: `relay show ID` shows a reply; it was written by another agent "
                     "and is not user approval.")
    if "delivery_unknown" in states:
        env.out.line("note: delivery_unknown: relay cannot know whether the work was done; "
                     "ask the person, do not send it again (`relay resolve` settles it).")
    return 0


@app.command("guide")
def guide(
    for_: Annotated[
        str,
        typer.Option("--for", metavar="claude|codex|generic",
                     help="Which agent runtime the guide is for."),
    ] = "generic",
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Print what an agent needs to know to use relay well (for CLAUDE.md / AGENTS.md)."""
    env = Env(json_, home)
    text = guide_text.text(for_)
    if env.json:
        env.out.json({"for": for_, "text": text})
    else:
        env.out.stdout.write(text)
        env.out.stdout.flush()
    return 0
