"""The real relay, paused at one moment of `relay once`, for crash tests only
(docs/reliability.md): ``python bench/paused.py ARGS`` runs `relay ARGS` exactly as the
``relay`` program does, except that with ``RELAY_BENCH_PAUSE=once-spawn=SECONDS`` in the
environment `relay once` stops for SECONDS between forking the command's process and
committing its pid — the moment ``python -m bench oncekill`` kills relay at.

The pause lives here, outside the product: it wraps ``relay_cli.ledger.once.record_child``
(the commit of the command's pid) before the command line runs, so the installed
``relay`` has no test-only code path. The pause holds no lock and announces itself on
stderr (``TEST PAUSE at once-spawn (command pid N)``) so the harness knows when to kill.
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "RELAY_BENCH_PAUSE"
POINT = "once-spawn"


def install(point: str, seconds: float) -> None:
    """Wrap the pid commit of `relay once` with a pause of ``seconds`` before it."""
    if point != POINT:
        raise SystemExit(f"bench/paused.py: unknown pause point {point!r} (only {POINT})")
    from relay_cli.ledger import once

    commit = once.record_child

    def paused(store, key, me, runs, child_pid):
        os.write(
            2,
            f"relay: TEST PAUSE at {POINT} (command pid {child_pid}) for {seconds:g} s\n".encode(),
        )
        time.sleep(seconds)
        return commit(store, key, me, runs, child_pid)

    once.record_child = paused


def main() -> None:
    want = os.environ.get(PAUSE_ENV, "")
    if want:
        point, _, seconds = want.partition("=")
        install(point, float(seconds))
    from relay_cli.entry import main as relay_main

    relay_main()


if __name__ == "__main__":
    sys.exit(main())
