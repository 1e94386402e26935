"""Operating commands: run (the launcher), doctor, prune."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..core import clock
from ..core.errors import RelayError, cannot_start
from ..core.limits import (
    DAY_S,
    DEFAULT_RETENTION_S,
    DEFAULT_SESSION_LEASE_S,
    PRUNE_AGE,
    SESSION_LEASE,
    TOMBSTONE_S,
)
from ..core.output import Output
from ..core.process import command_argv
from ..requests import peers
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
        lease_s = duration(lease, SESSION_LEASE, "--lease", DEFAULT_SESSION_LEASE_S)
        argv = command_argv(ctx.args, "relay run --as NAME [--kind K] -- CMD [ARGS]...")
        if not launcher.supported():
            raise RelayError(
                "internal_error",
                "relay run needs os.posix_spawn and "
                "signal.sigtimedwait (Linux); this platform lacks them",
            )

        def report(item) -> None:  # with --json: at most one error line, no notes
            if isinstance(item, RelayError):
                env.out.error(item)
            else:
                env.out.note(item)

        return launcher.run(lambda: _open(env), as_, kind, lease_s, argv, report)
    except launcher.CannotStart as e:
        err = cannot_start(str(e), e.status, _CANNOT_START)
        env.out.error(err)
        return err.exit_code
    except RelayError as e:
        env.out.error(e)
        return e.exit_code


def _open(env: Env):
    """A new store of this call (``relay run``'s heartbeat thread has its own)."""
    from ..store import open_store

    return open_store(env.home, env.ctx.database_url, env.ctx.clock)


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
    import os

    from ..operate import doctor as doctor_
    from ..store import resolve_home

    out = Output(json_)
    given = bool(home) or bool(os.environ.get("RELAY_HOME"))
    report = doctor_.diagnose(resolve_home(home), fix=fix, home_given=given, context=call_context())
    if json_:
        out.json(report.to_json())
        return report.exit_code
    for line in report.fixed:
        out.para(f"fixed: {line}" if not line.startswith("not changed") else line)
    if fix and not report.fixed:
        out.line("fixed: nothing needed changing")
    _render_report(out, report, verbose)
    return report.exit_code


def _render_report(out: Output, report, verbose: bool = False) -> None:
    """design.md §11. On a terminal: one line per area (every check with -v), then the
    problems, each whole with the command that fixes it on a `→` line, then the counts:
    what a person must act on is what stays on the screen when doctor ends. When the
    problems written in full would not fit the terminal's height, each takes one line (its
    detail cut) and its command. Not on a terminal: a plain table, every detail whole, in
    the same order."""
    from ..operate import doctor as doctor_

    counts = report.counts()
    summary = f"relay doctor: {counts['fail']} fail, {counts['warn']} warn, {counts['ok']} ok"
    oks = [c for c in report.checks if c.status == doctor_.OK]
    if not out.terminal:
        out.table(
            ["status", "check", "detail"],
            [[c.status, c.name, c.to_json()["detail"]] for c in oks + report.problems()],
        )
        out.line(summary)
        if report.facts.get("commands_note"):
            out.line(f"note: {report.facts['commands_note']}")
        return
    _DoctorScreen(out).render(report, oks, summary, verbose)


class _DoctorScreen:
    """doctor on a terminal (design.md §11): the area lines, the problems grouped by their
    command, the counts; cut to the terminal's height when the problems do not fit."""

    STATUS_W = 2 + len("fail")

    def __init__(self, out: Output) -> None:
        from ..core.output import ASCII_GLYPHS, GAP, GLYPHS, terminal_size

        self.out = out
        self.glyphs, self.arrow = (GLYPHS, "\u2192 ") if out.unicode else (ASCII_GLYPHS, "-> ")
        self.width, self.rows = out.width, terminal_size(out.stdout)[1]
        self.bold = "bold" if out.color else ""
        self.indent = " " * (self.STATUS_W + GAP)
        self.inner = max(12, self.width - len(self.indent))

    def head(self, status: str, label: str, w: int):
        from rich.text import Text

        from ..core.output import DOCTOR_STYLES, GAP

        return Text(
            f"{self.glyphs[status]} {label}".ljust(w) + " " * GAP,
            style=DOCTOR_STYLES[status] if self.out.color else "",
        )

    def areas(self, report, oks, verbose: bool) -> list:
        """One line per area; with -v, every ok check under its area, whole."""
        from rich.text import Text

        from ..core.output import GAP, fit, inert_line

        groups = report.groups()
        group_w = 2 + max(len(g) for g, _, _ in groups)
        top: list = []
        for group, status, text in groups:
            top.append(
                self.head(status, group, group_w)
                + Text(fit(inert_line(text), self.width - group_w - GAP, self.out.ellipsis))
            )
            if verbose:
                indent = " " * (group_w + GAP)
                for c in (c for c in oks if c.group == group):
                    # continuation lines are indented 2 more: wrapped 2 narrower, so no
                    # line runs past the terminal's width (design.md §14)
                    first, *rest = _wrap_whole(
                        f"{c.name}: {inert_line(c.detail)}", self.width - len(indent)
                    )
                    rest = _wrap_whole(" ".join(rest), self.width - len(indent) - 2) if rest else []
                    top += [Text(indent + first)] + [Text(indent + "  " + ln) for ln in rest]
        return top

    def command(self, fix: str | None) -> list:
        from rich.text import Text

        from ..core.output import inert_line

        if not fix:
            return []
        return [
            Text(self.indent + ln, style=self.bold)
            for ln in _command_lines(self.arrow + inert_line(fix), self.inner)
        ]

    def whole(self, checks) -> list:
        """Each detail whole, wrapped between words, and the command they share."""
        from rich.text import Text

        from ..core.output import inert_line, wrap

        lines = []
        for c in checks:
            first, *rest = wrap(f"{c.name}: {inert_line(c.detail)}", self.inner, self.out.ellipsis)
            lines.append(
                self.head(c.status, c.status, self.STATUS_W) + Text(first, style=self.bold)
            )
            lines += [Text(self.indent + more) for more in rest]
        return lines + self.command(checks[0].fix)

    def one_line(self, checks) -> list:
        """Each problem on a line of its own (its name and the start of its detail: which
        session lapsed, which lease ran out), and the command they share."""
        from rich.text import Text

        from ..core.output import fit, inert_line

        return [
            self.head(c.status, c.status, self.STATUS_W)
            + Text(
                fit(inert_line(f"{c.name}: {c.detail}"), self.inner, self.out.ellipsis),
                style=self.bold,
            )
            for c in checks
        ] + self.command(checks[0].fix)

    def render(self, report, oks, summary: str, verbose: bool) -> None:
        from rich.text import Text

        from ..core.output import wrap

        top = self.areas(report, oks, verbose)
        # the problems: those that share one command are listed together, above it (a warn
        # under the fail before it that the same command settles; each keeps its own status)
        shared: dict = {}
        for c in report.problems():
            shared.setdefault(c.fix or id(c), []).append(c)
        tail = [Text(summary, style=self.bold)]
        if report.facts.get("commands_note"):
            tail += [
                Text(ln)
                for ln in wrap(
                    f"note: {report.facts['commands_note']}", self.width, self.out.ellipsis
                )
            ]
        entries = [[self.whole(checks), self.one_line(checks)] for checks in shared.values()]
        chosen = [full for full, _ in entries]
        more = [
            Text(ln)
            for ln in _command_lines(f"each problem in full: {report.cmd('doctor -v')}", self.width)
        ]
        budget = self.rows - 1 - _rows(tail, self.width)  # the prompt takes the last row
        if not verbose and _rows([ln for e in chosen for ln in e], self.width) > budget:
            # the line that names `doctor -v` stays on the last screen; the area lines
            # too when there is room, else they scroll away above the problems
            budget -= _rows(more, self.width)
            chosen, budget = self.cut(entries, top, budget)
            top += more
        self.out.print_lines(top + [ln for e in chosen for ln in e] + tail)

    def cut(self, entries, above: list, budget: int) -> tuple[list, int]:
        """All on one line each, then whole again, in order, as long as everything fits:
        with the area lines (``above``) on the screen too when there is room for that."""
        width = self.width
        chosen = [short for _, short in entries]
        if _rows(above + [ln for e in chosen for ln in e], width) <= budget:
            budget -= _rows(above, width)
        for i, (full, short) in enumerate(entries):
            used = _rows([ln for e in chosen for ln in e], width)
            if used - _rows(short, width) + _rows(full, width) <= budget:
                chosen[i] = full
        return chosen, budget


def _wrap_whole(text: str, width: int) -> list[str]:
    """Wrapped between words; a word longer than the line (a path, a URL) stays whole."""
    import textwrap

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _rows(lines: list, width: int) -> int:
    """Terminal rows the lines take (a line wider than the terminal wraps)."""
    from ..core.output import cell_len

    return sum(max(1, -(-cell_len(ln.plain) // width)) for ln in lines)


def _command_lines(text: str, width: int) -> list[str]:
    """A command wrapped between shell words into lines that end with ` \\`, so that the
    lines pasted together run as one command; a word is never cut (a long path may run
    past the width and the terminal wraps it)."""
    words, line, lines = _shell_words(text), "", []
    for w in words:
        if line and len(line) + 1 + len(w) + 2 > width:
            lines.append(line + " \\")
            line = "  " + w
        else:
            line = f"{line} {w}" if line else w
    return lines + [line]


def _shell_words(text: str) -> list[str]:
    """``text`` split at spaces outside quotes (the quoting kept as written)."""
    words, word, quote = [], "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
            continue
        word += ch
    return words + ([word] if word else [])


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

    env = Env(json_, home)
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


def _render_prune(out: Output, result: dict, dry_run: bool, vacuum: bool) -> None:
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
