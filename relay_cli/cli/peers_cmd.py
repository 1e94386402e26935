"""`relay peers …`: join, add, heartbeat, leave, list."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated

import typer

from ..core import clock
from ..core.command import Said, relay
from ..core.limits import SESSION_LEASE, default_session_lease
from ..core.output import Col, iso_age, iso_left, local_clock, terminal_width
from ..requests import activity, peers
from ..requests.states import MEANING, settle
from . import complete
from .app import (
    AsOpt,
    Env,
    HomeOpt,
    JsonOpt,
    KindOpt,
    RelayGroup,
    SessionLeaseOpt,
    SessionOpt,
    app,
    duration,
    examples,
)

if TYPE_CHECKING:
    from ..core.output import JsonObject, Output

peers_app = typer.Typer(
    cls=RelayGroup,
    help="Peers (named participants) and their sessions.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(peers_app, name="peers")

NameArg = Annotated[
    str,
    typer.Argument(metavar="NAME", autocompletion=complete.peers, help="Peer name, e.g. claude-1."),
]


def _emit_peer(env: Env, obj: JsonObject) -> int:
    """The peer object: the JSON document, or its fields for a person."""
    if env.json:
        env.out.json(obj)
        return 0
    now = env.clock.now_ms()
    out = env.out
    env.out.fields(
        [
            ("name", obj["name"]),
            ("kind", obj["kind"]),
            ("active", "yes" if obj["active"] else "no"),
            ("session", obj["session_id"]),
            ("lease until", out.until(obj["lease_expires_at"], now)),
            ("last seen", _seen(out, obj["last_seen_at"], now)),
            ("wakeup", obj["wakeup"]),
        ]
    )
    return 0


def _seen(out: Output, iso: str | None, now: int) -> str | None:
    """A past time: ``3m ago (14:05)`` on a terminal (design.md §14), exact when piped."""
    if iso is None:
        return None
    if not out.terminal:
        return f"{iso} ({iso_age(iso, now)} ago)"
    return f"{out.when(iso, now)} ({local_clock(clock.parse_iso(iso), now)})"


@peers_app.command(
    epilog=examples(
        'eval "$(relay peers join claude-1 --kind claude --shell)"',
        'eval "$(relay peers join reviewer --lease 1h --shell)"',
    )
)
def join(
    name: NameArg,
    kind: KindOpt = None,
    lease: SessionLeaseOpt = None,
    shell: Annotated[bool, typer.Option("--shell", help="Print `export` lines to eval.")] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Replace a live session of NAME without asking (only a terminal is asked).",
        ),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Start a session for NAME and print its secret token (shown once).

    Joining a name that has an active session supersedes it: the old session's in-flight
    work becomes delivery_unknown. At a terminal relay first says so and asks (--yes does
    not ask; an agent's or a script's shell, or --json, is never asked). --shell prints
    `export` lines: run it inside eval, as below, so that this shell acts as the new
    session.
    """
    env = Env(json_, home)
    peers.validate_name(name)
    peers.validate_kind(kind)
    lease_s = duration(lease, SESSION_LEASE, "--lease", default_session_lease(kind))
    if not (yes or env.json) and _person_at_terminal(env) and not _replace_ok(env, name):
        return 0
    with env.unit() as now:
        result, moved = peers.join_session(env.store, name, kind, lease_s, now)
    if moved:  # stderr: the stdout of --shell goes to eval
        env.out.note(
            "\n".join(
                _unknown_lines(
                    env.out,
                    moved,
                    f"that the replaced session of {name} had claimed and not finished",
                    terminal_width(env.out.stderr, env.ctx.environ) if env.out.stderr_tty else 80,
                )
            )
        )
    if env.json:
        env.out.json(result)
    elif shell:
        env.out.line(f"export RELAY_PEER={shlex.quote(result['peer'])}")
        env.out.line(f"export RELAY_SESSION={shlex.quote(result['token'])}")
        home_path = env.store.home
        env.out.line(f"export RELAY_HOME={shlex.quote(str(home_path))}")
        url = env.store.shared_url()
        if url is not None:  # design.md §13: as relay prints it, without a password
            env.out.line(f"export RELAY_DATABASE_URL={shlex.quote(url)}")
        elif env.store.backend == "postgresql":  # (stderr: eval leaves it alone)
            env.out.note(
                "relay: RELAY_DATABASE_URL is not exported: relay prints no URL for this "
                "database (relay doctor says why); this shell keeps its own"
            )
        # stderr, which eval leaves alone: success is not silent (design.md §14)
        now = env.clock.now_ms()
        env.out.note(
            f"relay: joined as {result['peer']} (session lease ends "
            f"{env.out.until(result['lease_expires_at'], now)}); the export lines make this "
            f"shell act as {result['peer']}"
        )
    else:
        now = env.clock.now_ms()
        env.out.fields(
            [
                ("lease until", env.out.until(v, now))
                if k == "lease_expires_at"
                else (k.replace("_", " "), v)
                for k, v in result.items()
            ]
        )
        env.out.para(
            "The token is shown once, and this shell does not carry it: a command acts as "
            f"this session with RELAY_PEER={result['peer']} and RELAY_SESSION=TOKEN set (or "
            f"--as {result['peer']} --session TOKEN). To join and set both in one step, run "
            "instead (it replaces this session):"
        )
        env.out.command(peers.join_line(result["peer"], result["kind"], lease_s))
        env.out.said(
            Said.of(
                relay("peers", "heartbeat"),
                " keeps the lease alive (or run the agent under relay run).",
            )
        )
    return 0


def _person_at_terminal(env: Env) -> bool:
    """Standard input and stderr are a terminal: a person sees the question and types the
    answer there. (A script or a test harness that keeps the terminal as stdin but
    captures stderr is not asked.)"""
    try:
        return env.ctx.stdin_terminal and env.out.stderr_tty
    except (AttributeError, ValueError):
        return False


def _replace_ok(env: Env, name: str) -> bool:
    """A person at a terminal is told what joining a live name does, and asked
    (design.md §14). True: go on (no live session, or the person said yes)."""
    with env.unit(write=False) as now:
        old = env.store.active_session(name)
        held = [] if old is None else [r["id"] for r in env.store.in_flight_of_session(old["id"])]
    if old is None:
        return True
    out = env.out
    left = (
        out.until(clock.iso(old["lease_expires_at"]), now)
        if out.terminal
        else f"in {clock.human_duration((old['lease_expires_at'] - now) / 1000)}"
    )
    work = (
        f"it holds {len(held)} claimed request{'s' if len(held) != 1 else ''} "
        f"({', '.join(r[:8] for r in held)}), which would become delivery_unknown"
        if held
        else "it holds no claimed work"
    )
    import textwrap

    for ln in textwrap.wrap(
        f"relay: {name} has a live session (its lease ends {left}); {work}. Joining "
        f"replaces it: that session can then only read and retry its sends.",
        79,
        break_long_words=False,
        break_on_hyphens=False,
    ):
        out.stderr.write(ln + "\n")
    out.stderr.write(f"Replace the live session of {name}? [y/N] ")
    out.stderr.flush()
    try:
        answer = env.ctx.stdin.readline() if env.ctx.stdin is not None else ""
    except (OSError, ValueError):
        answer = ""
    if not answer.endswith("\n"):
        out.stderr.write("\n")
    if answer.strip().lower() in ("y", "yes"):
        return True
    out.stderr.write(
        f"relay: not joined; the live session of {name} is unchanged\n"
        "(--yes replaces it without asking)\n"
    )
    out.stderr.flush()
    return False


@peers_app.command(
    epilog=examples(
        "relay peers add reviewer --kind codex",
    )
)
def add(name: NameArg, kind: KindOpt = None, json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Register NAME as a known peer without starting a session."""
    env = Env(json_, home)
    peers.validate_name(name)
    peers.validate_kind(kind)
    with env.unit() as now:
        obj = peers.add(env.store, name, kind, now)
    return _emit_peer(env, obj)


@peers_app.command(
    epilog=examples(
        "relay peers heartbeat",
    )
)
def heartbeat(
    as_: AsOpt = None, session: SessionOpt = None, json_: JsonOpt = False, home: HomeOpt = None
) -> int:
    """Renew my session's lease. After the lease lapsed: lease_expired, join again."""
    env = Env(json_, home, as_, session, creates=False, identified=True)
    with env.unit() as now:
        obj = peers.heartbeat(env.store, env.caller(), now)
    return _emit_peer(env, obj)


@peers_app.command(
    epilog=examples(
        "relay peers leave",
    )
)
def leave(
    as_: AsOpt = None, session: SessionOpt = None, json_: JsonOpt = False, home: HomeOpt = None
) -> int:
    """End my session. Work I claimed and did not finish becomes delivery_unknown."""
    env = Env(json_, home, as_, session, creates=False, identified=True)
    with env.unit() as now:
        obj, moved = peers.leave_session(env.store, env.caller(), now)
    _emit_peer(env, obj)
    if moved and not env.json:
        for line in _unknown_lines(
            env.out, moved, "you claimed and did not finish", env.out.width or 80
        ):
            env.out.line(line)
    return 0


def _unknown_lines(out: Output, moved: list[str], whose: str, width: int | None) -> list[str]:
    """The requests a session's end turned into delivery_unknown, and who settles them:
    for each, the commands that settle it, one per outcome (design.md §14), for a
    terminal ``width`` wide (None: not a terminal)."""
    several = len(moved) > 1
    return out.said_lines(
        Said.of(
            f"{len(moved)} request{'s' if several else ''} {whose} "
            f"{'are' if several else 'is'} now delivery_unknown: "
            f"{MEANING['delivery_unknown'][0]}. A person settles "
            f"{'each' if several else 'it'} in their own terminal with one of:"
        ),
        width,
    ) + [
        ln
        for rid in moved
        for ln in out.said_lines(Said.of(f"  {rid}:" if several else "", settle(rid)), width)
    ]


@peers_app.command(
    "list",
    epilog=examples(
        "relay peers list",
        "relay peers list --json",
    ),
)
def list_(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Table of peers with kind, session, lease left and wake-up method."""
    env = Env(json_, home, creates=False)
    with env.unit(write=False) as now:
        result = peers.list_peers(env.store, now)
        acts = {s.peer: s.activity for s in activity.snapshot(env.store, now)}
    if env.json:
        env.out.json(result)
        return 0
    out = env.out
    if out.terminal:  # what the agent does first; `active` is what lease left says
        rows = [
            [
                p["name"],
                p["kind"],
                *_activity_cells(p, acts.get(p["name"]), now),
                iso_left(p["lease_expires_at"], now),
                out.when(p["last_seen_at"], now),
                p["wakeup"],
            ]
            for p in result["peers"]
        ]
    else:  # a script's columns stay where they were; the activity comes last
        rows = [
            [
                p["name"],
                p["kind"],
                "yes" if p["active"] else "no",
                p["lease_expires_at"],
                out.when(p["last_seen_at"], now),
                p["wakeup"],
                p["activity"],
                p["activity_since"] or "-",
            ]
            for p in result["peers"]
        ]
    out.table(
        _peer_columns(out.terminal),
        rows,
        empty="no peers yet (`relay peers join --help` says how one joins)",
        tsv=True,
    )
    return 0


def _activity_cells(p: JsonObject, act: activity.Activity | None, now: int) -> list[object]:
    """The activity of the peer's newest session and since when (design.md §19)."""
    if act is None:
        return [p["activity"], "-"]
    return [activity.words(act, now), activity.since_words(act, now)]


ACTIVITY_STYLES = {
    "working": "green",
    "idle": "dim",
    "gone": "dim",
    "unknown": "dim",
    "turn_failed": "bold red",
    "needs_person: permission": "bold yellow",
    "needs_person: question": "bold yellow",
}
WAKEUP_STYLES = {"not_configured": "yellow", "hook": "green", "waiter": "green", "polling": "green"}


def _peer_columns(terminal: bool) -> list[Col]:
    if terminal:
        return [
            Col("name", min=12, middle=True),
            Col("kind", fixed=True),
            Col("activity", min=8, styles=ACTIVITY_STYLES),
            Col("since", fixed=True),
            Col("lease left", fixed=True),
            Col("last seen", fixed=True),
            Col("wakeup", min=7, styles=WAKEUP_STYLES),
        ]
    return [
        Col("name", min=12, middle=True),
        Col("kind", fixed=True),
        Col("active", fixed=True, styles={"yes": "green", "no": "dim"}),
        Col("lease until", fixed=True),
        Col("last seen", fixed=True),
        Col("wakeup", min=7, styles=WAKEUP_STYLES),
        Col("activity", fixed=True),
        Col("activity since", fixed=True),
    ]
