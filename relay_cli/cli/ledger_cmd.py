"""`relay once`, `relay ledger list/show/resolve`, `relay approve`, `relay deny` (design.md §10).

Thin commands over ``relay_cli.ledger.entries`` and ``relay_cli.ledger.once``.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Annotated, Any, Callable, List, Optional, TextIO

import typer

from ..core import clock
from ..core.command import Choices, Said, relay
from ..core.errors import RelayError
from ..core.limits import DEFAULT_WAIT_S, TAIL_BYTES, WAIT
from ..core.output import LEDGER_STYLES, Col, Output, inert, iso_age
from ..requests import validate
from . import complete
from .app import Env, HomeOpt, JsonOpt, RelayGroup, app, duration, examples, lazy_module
from .click_seam import Choice

# executed when first used (socket, selectors, signal: only for these commands); the
# type checker reads them as the modules they are
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..core.output import JsonObject

if TYPE_CHECKING:
    from ..ledger import entries as ledger
    from ..ledger import once as runner
    from ..ledger import outcome
else:
    ledger = lazy_module("relay_cli.ledger.entries")
    runner = lazy_module("relay_cli.ledger.once")
    outcome = lazy_module("relay_cli.ledger.outcome")

ledger_app = typer.Typer(
    cls=RelayGroup,
    help="Inspect and settle the side-effect ledger of `relay once`.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(ledger_app, name="ledger")


def _key_arg(candidates: Callable[..., Any]) -> Any:
    """The KEY argument, for its ``Annotated`` type; completion offers ``candidates``."""
    return typer.Argument(
        metavar="KEY", autocompletion=candidates, help="The key given to `relay once`."
    )


KeyArg = Annotated[str, _key_arg(complete.ledger_keys)]
AwaitingKeyArg = Annotated[str, _key_arg(complete.awaiting_keys)]
NoteOpt = Annotated[
    Optional[str], typer.Option("--note", metavar="TEXT", help="Why (stored with the decision).")
]

TAIL_KIB = f"{TAIL_BYTES // 1024} KiB"  # of stdout and of stderr, kept per entry

ONCE_HELP = f"""Run CMD at most once per KEY; a retry replays the outcome.

A retry is a call with the same KEY.
The entry is committed as running before CMD starts (CMD's own pid too, before it begins
executing) and its outcome (exit code, the last {TAIL_KIB} of stdout and stderr) the moment
CMD ends. If that outcome cannot be recorded (disk full, a lock held too long), relay
says the command ran and exits 11 (effect_unknown). relay exits with CMD's status (128+N
when a signal N killed it; 127 command not found and 126 not executable, after which no
entry is kept because nothing ran). CMD's output streams through live; SIGINT, SIGTERM
and SIGHUP are forwarded to it.

The same KEY again: a finished entry prints its stored output and exit code without
running anything (stderr says it was replayed); a running one gives in_progress (75);
one whose relay process died before recording gives effect_unknown (11) unless it was
made with --idempotent; a key used for another command or directory gives key_conflict.

--approve: a person must first run `relay approve KEY` (or `relay deny KEY`) in their own
terminal; this call waits up to --timeout (exit 75, not a failure: call again to keep
waiting). approve and deny refuse when standard input is not a terminal: that stops an
agent's non-interactive shell from deciding by accident or habit, not a program that
fakes a terminal (relay is no boundary between programs of one user). A denied key exits 10 on every call. A key that already ran replays without
asking. A key made with --approve keeps needing approval after a person forgot its entry
(`relay ledger resolve KEY --outcome forget`), with or without --approve.

--json: stdout carries exactly one JSON document {{key, state, argv, cwd, exit_code,
signal, replayed, stdout, stderr, stdout_bytes, stderr_bytes, stdout_truncated,
stderr_truncated, created_at, started_at, finished_at, ...}}; CMD's stdout is then captured
into the document (only its last {TAIL_KIB}), not streamed. CMD's stderr still streams; relay
adds to it only its one error line, when the call fails.
"""


def _entry_fields(obj: JsonObject, now: int) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = [
        ("key", obj["key"]),
        ("state", obj["state"]),
    ]
    if obj.get("effect_unknown"):
        pairs.append(("needs a person", _unknown_text(obj)))
    pairs += [
        ("command", ledger.command_text(obj["argv"])),
        ("cwd", obj["cwd"]),
    ]
    if obj.get("exit_code") is not None:
        code = obj["exit_code"]
        pairs.append(
            ("exit code", f"{code} (signal {obj['signal']})" if obj.get("signal") else code)
        )
    if obj.get("idempotent"):
        pairs.append(("idempotent", "yes (a crashed run is run again)"))
    if obj.get("approval_required"):
        pairs.append(("approval", "required"))
    for key, label in (
        ("created_at", "created"),
        ("started_at", "started"),
        ("finished_at", "finished"),
    ):
        if obj.get(key):
            pairs.append((label, f"{obj[key]} ({iso_age(obj[key], now)} ago)"))
    if obj.get("runs"):
        pairs.append(("runs", obj["runs"]))
    if obj.get("pid") is not None:
        pairs.append(
            (
                "process",
                f"relay pid {obj['pid']}"
                + (f", command pid {obj['child_pid']}" if obj.get("child_pid") else "")
                # a pid means nothing outside its PID namespace (design.md §10)
                + f" on {obj['host'] if ledger.shown_here(obj) else ledger.place(obj)}",
            )
        )
    if obj.get("decision"):
        pairs.append(
            ("decision", f"{obj['decision']} by {obj['decided_by']} at {obj['decided_at']}")
        )
        if obj.get("decision_note"):
            pairs.append(("decision note", obj["decision_note"]))
    if obj.get("resolution"):
        pairs.append(
            ("resolved", f"{obj['resolution']} by {obj['resolved_by']} at {obj['resolved_at']}")
        )
        if obj.get("resolution_note"):
            pairs.append(("resolution note", obj["resolution_note"]))
    if obj.get("output_pruned"):
        kept = (
            " (the outcome is kept and still replays)"
            if obj["state"] in ("succeeded", "failed")
            else ""
        )
        pairs.append(("output", f"removed by `relay prune` at {obj['output_pruned_at']}{kept}"))
    return pairs


def _unknown_text(obj: JsonObject) -> str:
    if obj.get("child_pid") is None:
        return (
            "no command pid was committed, so the command never began executing (it "
            "waits at a gate until then); the next call with this key runs it"
        )
    # the commands that settle it follow the fields, one per outcome (design.md §14)
    settle = "settles it at a terminal with one of the commands below"
    if not ledger.shown_here(obj):
        return (
            f"{ledger.place(obj)} stopped renewing it; relay cannot see whether the "
            f"command still runs there. A person who checked that host {settle}"
        )
    if obj.get("idempotent"):
        return (
            "relay and the command are gone and the outcome was never recorded; the "
            "next call with this key runs it again (--idempotent)"
        )
    return (
        "relay and the command are gone and the outcome was never recorded; a person "
        f"checks whether the effect happened, then {settle}"
    )


def _settles(obj: JsonObject) -> bool:
    """Does the entry's "needs a person" field name commands that settle it?"""
    return bool(
        obj.get("effect_unknown")
        and obj.get("child_pid") is not None
        and not (ledger.shown_here(obj) and obj.get("idempotent"))
    )


# Of output that is mostly not text (binary), a person sees at most this many characters
# of its escaped form, the last ones; `ledger show KEY --json` has all that was kept.
SHOWN_BINARY_CHARS = 2048


def _mostly_binary(text: str) -> bool:
    """More than a tenth of ``text`` is control characters (but newline, tab and carriage
    return) or bytes that were not UTF-8 (U+FFFD): escaped, each would take 4 columns."""
    odd = sum(1 for c in text if (c < " " and c not in "\n\t\r") or c in "\x7f\ufffd")
    return odd * 10 > len(text)


def _render_entry(out: Output, obj: JsonObject, now: int, output: bool = False) -> None:
    out.fields(_entry_fields(obj, now), styles={"state": LEDGER_STYLES})
    if _settles(obj):
        out.said(Said.of(ledger.settle(obj["key"])))
    if not output or obj.get("output_pruned"):
        return
    for name in ("stdout", "stderr"):
        total = obj.get(f"{name}_bytes")
        text = obj.get(name)
        if total is None:
            continue
        kept = (
            f"last {min(total, TAIL_BYTES)} of {total} bytes"
            if obj.get(f"{name}_truncated")
            else f"{total} bytes"
        )
        out.line(f"--- {name} ({kept}) ---")
        if text:
            shown = inert(text.rstrip("\n"))
            if _mostly_binary(text) and len(shown) > SHOWN_BINARY_CHARS:
                cut = len(shown) - SHOWN_BINARY_CHARS
                out.said(
                    Said.of(
                        f"(binary output: the first {cut} of the {len(shown)} characters of "
                        "its escaped form are cut; ",
                        relay("ledger", "show", obj["key"], "--json"),
                        " has what was kept)",
                    )
                )
                shown = shown[cut:]
            out.line(shown)
        out.line(f"--- end of {name} ---")


def _emit(env: Env, obj: JsonObject, output: bool = False) -> int:
    if env.json:
        env.out.json(obj)
    else:
        _render_entry(env.out, obj, env.clock.now_ms(), output)
    return 0


def _write_bytes(stream: TextIO | None, data: bytes | None) -> None:
    if not data:
        return
    runner.Sink(stream).write(data)


@app.command(
    help=ONCE_HELP,
    context_settings={"allow_interspersed_args": False},
    epilog=examples(
        'relay once --key "$TOOL_USE_ID" -- gh pr create --fill',
        "relay once --key deploy-42 --approve --timeout 5m -- ./deploy.sh",
    ),
)
def once(
    key: Annotated[
        str,
        typer.Option(
            "--key",
            metavar="KEY",
            show_default=False,
            help="1-200 printable ASCII characters: the tool call's id or any stable intent key.",
        ),
    ],
    cmd: Annotated[
        Optional[List[str]],
        typer.Argument(
            metavar="-- CMD [ARGS]...",
            show_default=False,
            help="The command, after `--`, passed on untouched.",
        ),
    ] = None,
    idempotent: Annotated[
        bool,
        typer.Option(
            "--idempotent",
            help="CMD is safe to repeat: rerun it when an earlier run crashed "
            "before its outcome was recorded.",
        ),
    ] = False,
    approve: Annotated[
        bool,
        typer.Option("--approve", help="Run only after a person approves (`relay approve KEY`)."),
    ] = False,
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout",
            metavar="D",
            help=f"How long to wait for a person's decision ({clock.span(WAIT, DEFAULT_WAIT_S)}).",
        ),
    ] = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    env = Env(json_, home)
    ledger.validate_key(key)
    from ..core.process import command_argv

    argv = command_argv(cmd, runner.USAGE)
    timeout_s = duration(timeout, WAIT, "--timeout", ledger.DEFAULT_APPROVAL_WAIT_S)
    try:
        cwd = ledger.validate_cwd(os.getcwd())
    except OSError as e:
        raise RelayError("usage_error", "the current directory no longer exists") from e
    result = runner.once(
        env.store,
        key,
        argv,
        cwd,
        idempotent=idempotent,
        approve=approve,
        timeout_s=timeout_s,
        on_waiting=lambda entry: env.out.note(outcome.waiting_note(entry)),
        out_sink=runner.Sink(None if env.json else env.out.stdout),
        err_sink=runner.Sink(env.out.stderr),
        on_decided=lambda entry: env.out.note(outcome.decided_note(entry)),
    )
    if env.json:
        env.out.json(result.to_json())
    else:  # a replay writes its stored output through (nothing else has raw bytes)
        _write_bytes(env.out.stdout, result.raw[0])
        _write_bytes(env.out.stderr, result.raw[1])
    for line in result.notes():
        env.out.note(line)
    if result.error is not None:
        raise result.error
    return result.exit_code


@ledger_app.command(
    "list",
    epilog=examples(
        "relay ledger list",
        "relay ledger list --state effect_unknown",
    ),
)
def ledger_list(
    state: Annotated[
        Optional[List[str]],
        typer.Option(
            "--state",
            metavar="STATE",
            click_type=Choice(lambda: ledger.STATES, lambda v: ledger.validate_states([v])),
            help="Only entries in STATE (repeatable): awaiting_approval, approved, "
            "denied, running, effect_unknown (outcome never recorded: relay "
            "and the command are gone, or another host stopped renewing it), "
            "succeeded, failed, forgotten.",
        ),
    ] = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """Table of ledger entries, most recently changed first.

    No captured output (`relay ledger show KEY` has it).
    """
    env = Env(json_, home, creates=False)
    states = ledger.validate_states(state)
    with env.unit(write=False) as now:
        entries = ledger.list_entries(env.store, now, states)
    if env.json:
        env.out.json(ledger.entries_object(entries))
        return 0
    out = env.out
    rows = [
        [
            e["key"],
            e["state"],
            "-" if e["exit_code"] is None else e["exit_code"],
            ledger.command_text(e["argv"]),
            out.when(e["updated_at"], now),
        ]
        for e in entries
    ]
    out.table(LEDGER_COLUMNS, rows, empty="(no entries)", tsv=True)
    waiting = [e for e in entries if e["state"] == "awaiting_approval"]
    if waiting:
        env.out.para(
            f"{len(waiting)} awaiting a person's approval, decided in the person's own "
            "terminal; each shows the command and asks:"
        )
        _each(env.out, waiting, lambda key: Said.of(ledger.decide(key)))
    unknown = [e for e in entries if e["effect_unknown"] and not ledger.reruns_by_itself(e)]
    if unknown:
        env.out.para(
            f"{len(unknown)} effect_unknown, needing a person: the outcome was never "
            "recorded and the next call does not run it again; each entry's page says why "
            "and names the commands that settle it:"
        )
        _each(env.out, unknown, lambda key: Said.of(Choices((relay("ledger", "show", key),))))
    return 0


# a list names the commands of this many entries, and how to see the rest
LISTED_COMMANDS = 5


def _each(out: Output, entries: list[JsonObject], commands: Callable[[str], Said]) -> None:
    """The commands for each of the first entries, one per line (design.md §14)."""
    for e in entries[:LISTED_COMMANDS]:
        out.said(commands(e["key"]))
    if len(entries) > LISTED_COMMANDS:
        out.para(f"({len(entries) - LISTED_COMMANDS} more: the key of each is in the table)")


LEDGER_COLUMNS = [
    Col("key", min=12),
    Col("state", fixed=True, styles=LEDGER_STYLES),
    Col("exit", fixed=True, justify="right"),
    Col("command", min=12, first=True),
    Col("changed", fixed=True),
]


@ledger_app.command(
    "show",
    help=(
        "One entry in full, with its captured stdout and stderr.\n\n"
        f"Of each stream, the last {TAIL_KIB} are kept."
    ),
    epilog=examples(
        "relay ledger show deploy-42",
    ),
)
def ledger_show(key: KeyArg, json_: JsonOpt = False, home: HomeOpt = None) -> int:
    env = Env(json_, home, creates=False)
    ledger.validate_key(key)
    with env.unit(write=False):
        obj = ledger.show(env.store, key)
    return _emit(env, obj, output=True)


@ledger_app.command(
    "resolve",
    epilog=examples(
        "relay ledger resolve deploy-42 --outcome succeeded --note 'released'",
        "relay ledger resolve deploy-42 --outcome forget",
    ),
)
def ledger_resolve(
    key: KeyArg,
    outcome: Annotated[
        str,
        typer.Option(
            "--outcome",
            click_type=Choice(lambda: ledger.OUTCOMES, lambda v: ledger.validate_outcome(v)),
            help="What the person found: the effect happened, it did not, or forget "
            "the entry so the key runs again.",
        ),
    ],
    note: NoteOpt = None,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """A person settles an entry, for example after effect_unknown.

    It is recorded as person:<user>. Check first whether the command's effect happened. `forget` keeps the entry as
    `forgotten` until the key is used again, which then runs the command again (an entry
    made with --approve then waits for a person's approval again). Entries made with
    --approve, or denied, and running entries of another host that stopped renewing them
    (relay cannot see whether the command still runs there), can only be settled from a
    terminal (approval_needs_terminal): that stops accidents and habits, not a program
    that fakes a terminal.
    """
    env = Env(json_, home, creates=False)
    ledger.validate_key(key)
    text = validate.validate_text(note, "--note") if note is not None else None
    try:
        with env.unit() as now:
            obj = ledger.resolve(
                env.store, now, key, outcome, text, terminal=env.ctx.stdin_terminal
            )
    except ledger.EntryError as e:
        raise RelayError(e.code, e.message, detail=e.detail) from None
    return _emit(env, obj)


@app.command(
    epilog=examples(
        "relay ledger list --state awaiting_approval",
        "relay approve deploy-42",
    )
)
def approve(
    key: AwaitingKeyArg,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", "-y", help="Approve without the question (still only from a terminal)."
        ),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """A person at a terminal approves a `relay once --approve` entry.

    Shows the exact command, its directory and the key, and asks before approving (--yes
    skips the question; with --json it asks on the terminal, not on stderr). The waiting
    (or the next) `relay once` call with this key then runs it, once. Refused unless
    standard input is a terminal (approval_needs_terminal). That stops an agent's
    non-interactive shell from approving by accident or habit; it does not stop a program
    that fakes a terminal (relay is no boundary between programs of one user).
    """
    env = Env(json_, home, creates=False)
    ledger.validate_key(key)
    terminal = env.ctx.stdin_terminal
    seen = None
    if not yes:
        with env.unit(write=False):
            shown = ledger.to_decide(env.store, key, "approve", terminal=terminal)
        if shown["state"] == "awaiting_approval":
            if not _confirm(env.out, env.ctx.stdin, shown):
                return _emit(env, shown)
            seen = shown
    with env.unit() as now:
        obj = ledger.approve(env.store, now, key, seen, terminal=terminal)
    return _emit(env, obj)


def _confirm(out: Output, stdin: TextIO | None, entry: JsonObject) -> bool:
    """Show what would run and ask the person at the terminal (``stdin``, the call's);
    True for yes."""
    with _person(out, stdin, entry["key"]) as say:
        say.write(
            f"relay once is waiting to run this command, once:\n"
            f"  command: {inert(ledger.command_text(entry['argv']))}\n"
            f"  cwd:     {inert(entry['cwd'])}\n"
            f"  key:     {inert(entry['key'])}\n"
            "Approve it? [y/N] "
        )
        say.flush()
        try:
            answer = stdin.readline() if stdin is not None else ""
        except (OSError, ValueError):
            answer = ""
        if not answer.endswith("\n"):
            say.write("\n")
        if answer.strip().lower() in ("y", "yes"):
            return True
        out.said(
            Said.of(
                "relay: not approved; nothing changed (the entry still awaits a decision; ",
                relay("deny", entry["key"], changes=True),
                " refuses it)",
            ),
            stream=say,
        )
        say.flush()
        return False


@contextlib.contextmanager
def _person(out: Output, stdin: TextIO | None, key: str) -> Iterator[TextIO]:
    """Where approve talks with the person: stderr; with --json, whose stderr carries
    nothing but an error line (design.md §7), the terminal that standard input is -- the
    one the terminal rule requires and where the person types the answer."""
    if not out.json_mode:
        yield out.stderr
        return
    try:
        if stdin is None:
            raise ValueError("standard input is closed")
        fd = os.open(os.ttyname(stdin.fileno()), os.O_WRONLY | os.O_NOCTTY)
    except (OSError, ValueError, AttributeError) as e:
        raise RelayError(
            "approval_needs_terminal",
            f"`relay approve --json` asks its question on the terminal of standard input and "
            f"cannot write to it ({e}); nothing changed",
            detail=Said.of(
                "read the entry with ",
                relay("ledger", "show", key),
                ", then approve it without the question: ",
                relay("approve", key, "--yes", "--json", changes=True),
            ),
        ) from None
    with open(fd, "w", encoding="utf-8", errors="backslashreplace") as tty:
        yield tty


@app.command(
    epilog=examples(
        "relay deny deploy-42 --note 'not on a Friday'",
    )
)
def deny(
    key: AwaitingKeyArg, note: NoteOpt = None, json_: JsonOpt = False, home: HomeOpt = None
) -> int:
    """A person at a terminal denies a `relay once --approve` entry.

    It never runs: every later `relay once` with the key exits 10 (denied). Refused unless standard
    input is a terminal (approval_needs_terminal): that stops accidents and habits, not a
    program that fakes a terminal.
    """
    env = Env(json_, home, creates=False)
    ledger.validate_key(key)
    text = validate.validate_text(note, "--note") if note is not None else None
    with env.unit() as now:
        obj = ledger.deny(env.store, now, key, text, terminal=env.ctx.stdin_terminal)
    return _emit(env, obj)
