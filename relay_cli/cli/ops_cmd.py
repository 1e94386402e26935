"""Operating commands: run (the launcher), doctor, prune."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import clock, peers
from ..errors import RelayError, cannot_start
from ..output import Output
from .app import Env, HomeOpt, JsonOpt, KindOpt, PeerOpt, SessionLeaseOpt, app, duration, examples

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
        'relay run --as claude-1 --kind claude -- claude',
        'relay run --as codex-1 --kind codex --lease 2m -- codex',
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
        bool, typer.Option("--json", help="relay's own stderr: at most one JSON error line, no notes "
                           "(stdout always belongs to CMD).")
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
    from .. import launcher

    env = Env(json_, home)
    try:
        if not as_:
            raise RelayError("usage_error", "relay run needs --as NAME")
        peers.validate_name(as_, "--as")
        peers.validate_kind(kind)
        lease_s = duration(lease, clock.SESSION_LEASE, "--lease", peers.DEFAULT_SESSION_LEASE_S)
        argv = list(ctx.args)
        if not argv:
            raise RelayError("usage_error",
                             "nothing to run: relay run --as NAME [--kind K] -- CMD [ARGS]...")
        if not launcher.supported():
            raise RelayError("internal_error", "relay run needs os.posix_spawn and "
                             "signal.sigtimedwait (Linux); this platform lacks them")

        def report(item) -> None:  # with --json: at most one error line, no notes
            if isinstance(item, RelayError):
                env.out.error(item)
            else:
                env.out.note(item)

        return launcher.run(lambda: _open(home), as_, kind, lease_s, argv, report)
    except launcher.CannotStart as e:
        err = cannot_start(str(e), e.status, _CANNOT_START)
        env.out.error(err)
        return err.exit_code
    except RelayError as e:
        env.out.error(e)
        return e.exit_code


def _open(home):
    from ..store import open_store

    return open_store(home)


# ------------------------------------------------------------------ doctor
@app.command(epilog=examples(
    'relay doctor',
    'relay doctor --fix',
))
def doctor(
    fix: Annotated[
        bool, typer.Option("--fix", help="Tighten modes that are too open (dir 0700, files "
                           "0600); never follows or replaces a symlink.")
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Health report of the state directory and database.

    It creates nothing; --fix only tightens modes.
    Exit status 7 when any check fails, else 0.
    """
    from .. import doctor as doctor_
    from ..store import resolve_home

    out = Output(json_)
    report = doctor_.diagnose(resolve_home(home), fix=fix)
    if json_:
        out.json(report.to_dict())
        return report.exit_code
    for line in report.fixed:
        out.para(f"fixed: {line}" if not line.startswith("not changed") else line)
    if fix and not report.fixed:
        out.line("fixed: nothing needed tightening")
    _render_report(out, report)
    return report.exit_code


def _render_report(out: Output, report) -> None:
    """Problems first, each with its whole detail and the command that fixes it; one line
    per ok check (design.md §11). Not on a terminal: a plain table, every detail whole."""
    from .. import doctor as doctor_

    checks = report.problems_first()
    counts = report.counts()
    summary = (f"{counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok"
               + (" (problems first)" if counts["fail"] + counts["warn"] else ""))
    if not out.terminal:
        out.table(["status", "check", "detail"],
                  [[c.status, c.name, c.to_dict()["detail"]] for c in checks])
        out.line(summary)
        return
    from rich.text import Text

    from ..output import ASCII_GLYPHS, DOCTOR_STYLES, GAP, GLYPHS, fit, inert_line, wrap

    glyphs, arrow = (GLYPHS, "\u2192 ") if out.unicode else (ASCII_GLYPHS, "-> ")
    heads = [f"{glyphs[c.status]} {c.status}" for c in checks]
    status_w = max(len(h) for h in heads)
    indent = " " * (status_w + GAP)
    inner = max(12, out.width - len(indent))
    name_w = min(max(len(c.name) for c in checks if c.status == doctor_.OK), NAME_WIDTH) \
        if counts["ok"] else 0
    bold = "bold" if out.color else ""
    lines = [Text(f"relay doctor: {summary}", style=bold)]
    for check, head in zip(checks, heads, strict=True):
        line = Text(head.ljust(status_w) + " " * GAP,
                    style=DOCTOR_STYLES[check.status] if out.color else "")
        name, detail = inert_line(check.name), inert_line(check.detail)
        if check.status == doctor_.OK:  # a fact: one line
            line.append(fit(name, name_w, out.ellipsis).ljust(name_w) + " " * GAP)
            lines.append(line + Text(fit(detail, inner - name_w - GAP, out.ellipsis)))
            continue
        # a problem: its whole detail, then the command that fixes it
        first, *rest = wrap(f"{name}: {detail}", inner, out.ellipsis)
        lines.append(line + Text(first, style=bold))
        lines += [Text(indent + more) for more in rest]
        if check.fix:
            steps = wrap(inert_line(check.fix), inner - len(arrow), out.ellipsis)
            lines += [Text(indent + (arrow if i == 0 else " " * len(arrow)) + step, style=bold)
                      for i, step in enumerate(steps)]
    lines.append(Text(summary, style=bold))
    out.print_lines(lines)


NAME_WIDTH = 18  # the name column of ok checks on a terminal


# ------------------------------------------------------------------ prune
@app.command(epilog=examples(
    'relay prune --dry-run',
    'relay prune --older-than 7d',
    'relay prune --vacuum',
))
def prune(
    older_than: Annotated[
        Optional[str],
        typer.Option("--older-than", metavar="D",
                     help="Remove bodies of final requests finished more than D ago "
                     "(default 30d)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be removed and remove nothing "
                           "(due time-based transitions are still applied, as by every command).")
    ] = False,
    vacuum: Annotated[
        bool, typer.Option("--vacuum", help="Then rebuild relay.db without its free pages "
                           "(VACUUM) and report its size before and after. Not with --dry-run, "
                           "nor on PostgreSQL.")
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Remove old final requests, keeping tombstones for late retries.

    A retry that comes after its request was pruned is still a duplicate.
    Final requests finished more than 30 days ago (--older-than) lose their text, reply
    and detail and stay as tombstones until 120 days after they finished; then they are
    removed. Expired drafts are removed. Finished `relay once` ledger entries are pruned the
    same way (output dropped, tombstone kept). Sessions that ended more than D ago are
    removed once no request or tombstone names them, and old hook records with them.
    Requests that are not final and active sessions are never touched.
    """
    from .. import retention

    env = Env(json_, home)
    if vacuum and dry_run:
        raise RelayError("usage_error", "--vacuum rebuilds the database; it cannot be a dry run")
    older_s = duration(older_than, clock.PRUNE_AGE, "--older-than",
                       retention.DEFAULT_RETENTION_S)
    if vacuum:
        retention.check_vacuum(env.store)
    result = retention.prune(env.store, clock.now_ms(), older_s, dry_run)
    if vacuum:
        result["vacuum"] = retention.vacuum(env.store)
    if env.json:
        env.out.json(result)
        return 0
    verb = "would be" if dry_run else "were"
    rows = [
        ("requests pruned", f"{result['requests_pruned']} (bodies removed; tombstones kept)"),
        ("tombstones removed", f"{result['tombstones_removed']} (with "
                               f"{result['events_removed']} events)"),
        ("drafts removed", result["drafts_removed"]),
        ("sessions removed", f"{result['sessions_removed']} (ended, named by no request "
                             f"left; hook records removed: {result['hook_records_removed']})"),
    ]
    ledger = result.get("ledger")
    if isinstance(ledger, dict):
        rows += [(f"ledger {k.replace('_', ' ')}", v) for k, v in ledger.items()
                 if k not in ("dry_run", "by_state")]
    rows += [("bodies of requests finished before", result["bodies_finished_before"]),
             ("tombstones of requests finished before", result["tombstones_finished_before"])]
    if vacuum:
        rows.append(("database size", "{bytes_before} -> {bytes_after} bytes (VACUUM)"
                     .format(**result["vacuum"])))
    env.out.fields(rows, title=f"relay prune{' --dry-run' if dry_run else ''}: counts of what "
                               f"{verb} removed")
    return 0
