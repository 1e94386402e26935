"""The person at the terminal (design.md §14): a person's act (`resolve`, `approve`,
`deny`, `ledger resolve` of an entry under a person's approval) needs standard input to be
a terminal, and is recorded under the process's real user, never a name from the
environment. The requests and the ledger both ask it here."""

from __future__ import annotations

import os
import sys

from .errors import RelayError


def stdin_is_terminal() -> bool:
    """Is standard input a terminal (a person typing), not a pipe, file or agent's shell?"""
    try:
        stdin = sys.stdin
        return stdin is not None and stdin.isatty() and os.isatty(stdin.fileno())
    except (OSError, ValueError, AttributeError):
        return False


def require_terminal(command: str, terminal: bool | None = None) -> None:
    """A person's act (design.md §14): `resolve`, `approve`, `deny`, and `ledger resolve` of
    an entry under a person's approval are recorded as person:<user>, so they refuse unless
    standard input is a terminal (``terminal``; by default, look at it now): an agent's
    non-interactive shell must not decide in a person's name."""
    if not (stdin_is_terminal() if terminal is None else terminal):
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
