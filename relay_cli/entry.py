"""The `relay` program's entry point: one fast path, then the command line.

A runtime runs relay's hooks for every session, whoever uses relay (design.md §12). For
someone who is not using relay (no ``--as``, ``RELAY_PEER`` or ``RELAY_SESSION``) a hook
has nothing to do, so `relay hook RUNTIME` then reads its event and exits 0 before the
command line is even imported (0.03-0.05 s of CPU instead of 0.2 s per hook, measured
with /usr/bin/time; a Claude Code run fires six).
"""

from __future__ import annotations

import os
import sys

HOOK_RUNTIMES = (
    "claude",
    "codex",
    "gemini",
    "opencode",
    "copilot",
)  # runtimes.NAMES (a test checks)
MAX_DRAIN = 16 * 1024 * 1024 + 1


def idle_hook(argv: list[str], environ) -> bool:
    """`relay hook RUNTIME ...` run with no identity at all (and not asking for help)."""
    if len(argv) < 2 or argv[0] != "hook" or argv[1] not in HOOK_RUNTIMES:
        return False
    if environ.get("RELAY_PEER") or environ.get("RELAY_SESSION"):
        return False
    rest = argv[2:]
    return not any(a in ("--as", "-h", "--help") or a.startswith("--as=") for a in rest)


def _drain_stdin() -> None:
    """Read the event the runtime writes (unread, its write could fail with EPIPE)."""
    try:
        if not os.isatty(0):
            left = MAX_DRAIN
            while left > 0:
                chunk = os.read(0, min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
    except OSError:
        pass


def main() -> None:
    # The one read of the process below cli/ (design.md §8): this fast path looks at the
    # arguments and three variables (RELAY_PEER, RELAY_SESSION; standard input, to drain
    # it) before anything of relay is imported. Every other call builds its context in
    # cli/app.py (``process_context``) and reads nothing of the process after that.
    if idle_hook(sys.argv[1:], os.environ):
        _drain_stdin()
        sys.exit(0)  # ExitStatus.OK (nothing of relay is imported on this path)
    from .cli import main as cli_main

    cli_main()
