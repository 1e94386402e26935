"""Operating commands: run (the launcher), doctor, prune."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..core import clock
from ..core.errors import RelayError, cannot_start
from ..core.limits import (
    DAY_S,
    DEFAULT_RETENTION_S,
    PRUNE_AGE,
    SESSION_LEASE,
    TOMBSTONE_S,
    default_session_lease,
)
from ..core.output import Output
from ..requests import peers
from . import scope
from .app import (
    Env,
    HomeOpt,
    JsonOpt,
    KindOpt,
    PeerOpt,
    SessionLeaseOpt,
    app,
    call_context,
    duration,
    examples,
)

if TYPE_CHECKING:
    from ..core.output import JsonObject
    from ..store import Store

# ------------------------------------------------------------------ run
_CANNOT_START = (
    "relay run looks the program up on PATH as a shell does: exit 127 means not found, 126 "
    "found but not executable; no session was left behind"
)


@app.command(
    "run",
    options_metavar="[OPTIONS] -- CMD [ARGS]...",
    context_settings={"allow_extra_args": True, "allow_interspersed_args": False},
    epilog=examples(
        "relay run --as claude-1 --kind claude -- claude",
        "relay run --as codex-1 --kind codex --lease 2m -- codex",
    ),
)
def run_(
    ctx: typer.Context,
    as_: Annotated[
        Optional[str],
        PeerOpt("--as", "The peer name to join as (required).", "NAME"),
    ] = None,
    kind: KindOpt = None,
    lease: SessionLeaseOpt = None,
    json_: Annotated[
        bool,
        typer.Option(
            "--json",
            help="relay's own stderr: at most one JSON error line, no notes "
            "(stdout always belongs to CMD).",
        ),
    ] = False,
    home: HomeOpt = None,
) -> int:
    """Run CMD as a peer: join, keep the lease while it runs, then leave.

    CMD gets RELAY_PEER, RELAY_SESSION and RELAY_HOME of a session joined as NAME.
    Everything after `--` is passed to CMD untouched. SIGINT, SIGTERM and SIGHUP are
    forwarded to CMD. Exit status: CMD's own; 128+N when signal N killed it; 127 when CMD
    is not found, 126 when it is not executable. When CMD ends, work it claimed and did not
    finish becomes delivery_unknown (reason recipient_disconnected).
    """
    from ..agents import launcher

    env = Env(json_, home)
    try:
        if not as_:
            raise RelayError("usage_error", "relay run needs --as NAME")
        peers.validate_name(as_, "--as")
        peers.validate_kind(kind)
        lease_s = duration(lease, SESSION_LEASE, "--lease", default_session_lease(kind))
        from ..core.process import command_argv

        argv = command_argv(ctx.args, "relay run --as NAME [--kind K] -- CMD [ARGS]...")
        if not launcher.supported():
            raise RelayError(
                "internal_error",
                "relay run needs os.posix_spawn and "
                "signal.sigtimedwait (Linux); this platform lacks them",
            )

        def report(item: RelayError | str) -> None:  # with --json: at most one error line, no notes
            if isinstance(item, RelayError):
                env.out.error(item)
            else:
                env.out.note(item)

        return launcher.run(lambda: _open(env), as_, kind, lease_s, argv, report, env.ctx.environ)
    except launcher.CannotStart as e:
        err = cannot_start(str(e), e.status, _CANNOT_START)
        env.out.error(err)
        return err.exit_code
    except RelayError as e:
        env.out.error(e)
        return e.exit_code


def _open(env: Env) -> Store:
    """A new store of this call (``relay run``'s heartbeat thread has its own)."""
    from ..store import open_store

    return open_store(env.home, env.ctx.database_url, env.ctx.clock, environ=env.ctx.environ)


# ------------------------------------------------------------------ doctor
@app.command(
    epilog=examples(
        "relay doctor",
        "relay doctor -v",
        "relay doctor --fix --home ~/.local/state/relay",
    )
)
def doctor(
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Set the modes relay needs (dir 0700, files 0600): "
            "tightens what is too open, gives back your own read and write; "
            "never follows or replaces a symlink.",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="On a terminal, every check in full, not one line per area."
        ),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Health report of the state directory and database.

    On a terminal: one line per area, then each problem with the one command that fixes
    or settles it (runnable as printed: it names the same --home and --database-url), so
    the problems are on the last screen. It creates nothing; --fix only sets modes.
    Exit status 7 when any check fails, else 0.
    """
    from ..operate import doctor as doctor_
    from ..operate.doctor import screen
    from ..store import resolve_home

    ctx = call_context()
    out = Output.of(ctx, json_)
    if home:
        scope.given(ctx, home=home)
        out = Output.of(ctx, json_)
    report = doctor_.diagnose(resolve_home(ctx.home, ctx.environ), ctx, fix=fix)
    if out.scope.note:  # what a person must know for the commands to work
        report.facts["commands_note"] = out.scope.note
        out.notes_told.add(out.scope.note)  # the report says it, in its place
    if json_:
        out.json(report.to_json(out.scope))
        return report.exit_code
    for line in report.fixed:
        out.para(f"fixed: {line}" if not line.startswith("not changed") else line)
    if fix and not report.fixed:
        out.line("fixed: nothing needed changing")
    screen.render(out, report, verbose)
    return report.exit_code


# ------------------------------------------------------------------ prune
_PRUNE_HELP = f"""Remove old final requests, keeping tombstones for late retries.

    A retry that comes after its request was pruned is still a duplicate.
    Final requests finished more than {DEFAULT_RETENTION_S // DAY_S} days ago (--older-than) lose their text, reply
    and detail and stay as tombstones until {TOMBSTONE_S // DAY_S} days after they finished; then they are
    removed. Expired drafts are removed. Finished `relay once` ledger entries are pruned the
    same way (output dropped, tombstone kept). Sessions that ended more than D ago are
    removed once no request or tombstone names them, and old hook records with them.
    Requests that are not final and active sessions are never touched.
    """


@app.command(
    help=_PRUNE_HELP,
    epilog=examples(
        "relay prune --dry-run",
        "relay prune --older-than 7d",
        "relay prune --vacuum",
    ),
)
def prune(
    older_than: Annotated[
        Optional[str],
        typer.Option(
            "--older-than",
            metavar="D",
            help="Remove bodies of final requests finished more than D ago "
            f"(default {clock.duration_text(DEFAULT_RETENTION_S)}).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Count what would be removed and remove nothing "
            "(due time-based transitions are still applied, as by every command).",
        ),
    ] = False,
    vacuum: Annotated[
        bool,
        typer.Option(
            "--vacuum",
            help="Then rebuild relay.db without its free pages "
            "(VACUUM) and report its size before and after. Not with --dry-run, "
            "nor on PostgreSQL.",
        ),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    # its help: _PRUNE_HELP (it states the retention from core.limits)
    from ..operate import retention

    env = Env(json_, home, creates=False)
    if vacuum and dry_run:
        raise RelayError("usage_error", "--vacuum rebuilds the database; it cannot be a dry run")
    older_s = duration(older_than, PRUNE_AGE, "--older-than", DEFAULT_RETENTION_S)
    if vacuum:
        retention.check_vacuum(env.store)
    result = retention.prune(env.store, env.store.clock.now_ms(), older_s, dry_run)
    if vacuum:
        result["vacuum"] = retention.vacuum(env.store)
    if env.json:
        env.out.json(result)
    else:
        _render_prune(env.out, result, dry_run, vacuum)
    return 0


def _render_prune(out: Output, result: JsonObject, dry_run: bool, vacuum: bool) -> None:
    """prune's counts for a person, from the document `--json` prints."""
    verb = "would be" if dry_run else "were"
    rows = [
        ("requests pruned", f"{result['requests_pruned']} (bodies removed; tombstones kept)"),
        (
            "tombstones removed",
            f"{result['tombstones_removed']} (with {result['events_removed']} events)",
        ),
        ("drafts removed", result["drafts_removed"]),
        (
            "claim attempts removed",
            f"{result['claim_attempts_removed']} (their request's tombstone went as long before)",
        ),
        (
            "sessions removed",
            f"{result['sessions_removed']} (ended, named by no request "
            f"left; hook records removed: {result['hook_records_removed']})",
        ),
    ]
    ledger = result.get("ledger")
    if isinstance(ledger, dict):
        rows += [
            (f"ledger {k.replace('_', ' ')}", v)
            for k, v in ledger.items()
            if k not in ("dry_run", "by_state")
        ]
    rows += [
        ("bodies of requests finished before", result["bodies_finished_before"]),
        ("tombstones of requests finished before", result["tombstones_finished_before"]),
    ]
    if vacuum:
        rows.append(
            (
                "database size",
                "{bytes_before} -> {bytes_after} bytes (VACUUM)".format(**result["vacuum"]),
            )
        )
    out.fields(
        rows, title=f"relay prune{' --dry-run' if dry_run else ''}: counts of what {verb} removed"
    )
