"""The person at the terminal (design.md §14): a person's act (`resolve`, `approve`,
`deny`, `ledger resolve` of an entry under a person's approval) needs standard input to be
a terminal, and is recorded under the process's real user, never a name from the
environment. The requests and the ledger both ask it here; whether standard input is a
terminal is a fact of the call's context (``Context.stdin_terminal``), handed in."""

from __future__ import annotations

import os

from .errors import RelayError


def require_terminal(command: str, terminal: bool) -> None:
    """A person's act (design.md §14): `resolve`, `approve`, `deny`, and `ledger resolve` of
    an entry under a person's approval are recorded as person:<user>, so they refuse unless
    standard input is a terminal (``terminal``: the call's ``stdin_terminal``): an agent's
    non-interactive shell must not decide in a person's name."""
    if not terminal:
        raise RelayError(
            "approval_needs_terminal",
            f"`relay {command}` refuses: standard input is not a terminal; nothing changed",
        )


def person() -> str:
    """The actor of a person's act: ``person:<user name of the process's real uid>``.

    Never taken from ``LOGNAME``/``USER`` (design.md §5): anyone can set those, so
    ``LOGNAME=ana relay resolve …`` must not make the log say a person named ana decided.
    A uid with no passwd entry (a container) is recorded as its number.
    """
    import pwd

    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return f"person:{user}"
