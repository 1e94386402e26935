"""What doctor says of the agent runtimes (design.md §11, §12): the hook a peer's runtime
can install and whether it ran, and the private Codex app-server directories a killed
`relay run` left."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import clock
from ...core.command import Command, relay, shell
from .report import OK, WARN, Report

if TYPE_CHECKING:
    from ...store import Row


def check_codex_dirs(report: Report) -> None:
    """Private Codex app-server directories that a killed `relay run` left (design.md
    §12): named only when there are some; the next `relay run` of Codex removes them."""

    from ...agents.codex_server import stale_dirs

    try:
        stale = stale_dirs(report.checked.environ)
    except OSError:
        return
    if not stale:
        return
    report.add(
        "codex_dirs",
        WARN,
        f"{len(stale)} private Codex app-server director"
        f"{'y' if len(stale) == 1 else 'ies'} left by a `relay run` that was killed "
        f"({', '.join(stale)}); the next `relay run` of Codex removes "
        f"{'it' if len(stale) == 1 else 'them'}, and stops a server still running there",
        fix=shell("rm", "-r", "--", *stale, changes=True),
    )


def wakeup_advice(s: Row, value: str, now: int) -> tuple[str, str, Command | None]:
    """(status, detail, fix) for an active peer whose ``wakeup`` (peers.wakeup) is
    ``value``: a warn where a person can install relay's hook, naming the command; an ok
    fact where there is nothing to do."""
    from ...agents.runtimes import display, get

    kind = s["kind"]
    runtime = display(kind)
    if runtime is None:
        how = (
            "a session is blocked in `relay claim --wait` now"
            if value == "polling"
            else "it sees requests when it runs `relay inbox` or `relay claim --wait`"
        )
        if value in ("waiter", "hook"):
            how = "relay's hook ran for it"
        article = "an" if kind[0] in "aeiou" else "a"
        return OK, f"nothing to install for {article} {kind} peer; {how}", None
    if value == "waiter":
        return (
            OK,
            (
                f"a wake waiter runs for its {runtime} session: a new request wakes it "
                "(not evidence that the model reads it)"
            ),
            None,
        )
    seen = s["hook_seen_at"]
    if value == "hook":
        ago = clock.human_duration((now - seen) / 1000)
        rt = get(kind)
        idle = (
            f"; relay cannot wake an idle {runtime} session ({rt.wake_note})"
            if rt is not None and rt.wake is None and rt.wake_note
            else ""
        )
        return (
            OK,
            (
                f"relay's {runtime} hook ran {ago} ago: the session is told of waiting "
                f"requests at its next prompt or stop{idle}"
            ),
            None,
        )
    when = f"last ran {clock.human_duration((now - seen) / 1000)} ago" if seen else "never ran"
    polling = "; a session is blocked in `relay claim --wait` now" if value == "polling" else ""
    return (
        WARN,
        (f"relay's {runtime} hook {when}{polling}; install it, then restart {runtime}"),
        relay("hook", "install", kind, changes=True, scoped=False),
    )
