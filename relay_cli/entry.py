"""The `relay` program's entry point: one fast path, then the command line.

A runtime runs relay's hooks for every session, whoever uses relay (design.md §12). For
someone who is not using relay (no ``--as``, ``RELAY_PEER`` or ``RELAY_SESSION``) a hook
has nothing to do, so `relay hook RUNTIME` then reads its event and exits 0 before the
command line is even imported (0.03-0.05 s of CPU instead of 0.2 s per hook, measured
with /usr/bin/time; a Claude Code run fires six). So does a wake waiter where its runtime
would wait for it in the foreground (Claude Code's print mode and SDK: the waiter does
nothing there, design.md §12), which a headless Claude Code run starts twice.
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
# the variables that say a runtime runs its background hooks in the background, and the
# values that mean it does (runtimes.Runtime.background_when; a test checks)
BACKGROUND_WHEN = {
    "claude": {"CLAUDE_CODE_SESSION_ATTENDED": ("1",), "CLAUDE_CODE_ENTRYPOINT": ("cli",)},
}
MAX_DRAIN = 16 * 1024 * 1024 + 1


def idle_hook(argv: list[str], environ) -> bool:
    """`relay hook RUNTIME ...` with nothing to do (and not asking for help): run with no
    identity at all, or a wake waiter its runtime would wait for in the foreground."""
    if len(argv) < 2 or argv[0] != "hook" or argv[1] not in HOOK_RUNTIMES:
        return False
    rest = argv[2:]
    if any(a in ("-h", "--help") for a in rest):
        return False
    if "--wake" in rest and not environ.get("RELAY_DEBUG"):  # (debugging: the whole path)
        for var, values in BACKGROUND_WHEN.get(argv[1], {}).items():
            value = environ.get(var)
            if value is not None and value not in values:
                return True
    if environ.get("RELAY_PEER") or environ.get("RELAY_SESSION"):
        return False
    return not any(a == "--as" or a.startswith("--as=") for a in rest)


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
