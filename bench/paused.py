"""The real relay, paused at one moment of `relay once`, for crash tests only
(docs/reliability.md): ``python bench/paused.py ARGS`` runs `relay ARGS` exactly as the
``relay`` program does, except that with ``RELAY_BENCH_PAUSE=once-spawn=SECONDS`` in the
environment `relay once` stops for SECONDS between forking the command's process and
committing its pid — the moment ``python -m bench oncekill`` kills relay at.

The pause lives here, outside the product: it wraps ``relay_cli.ledger.once.record_child``
(the commit of the command's pid) before the command line runs, so the installed
``relay`` has no test-only code path. The pause holds no lock and announces itself on
stderr (``TEST PAUSE at once-spawn (command pid N)``) so the harness knows when to kill.

With ``RELAY_BENCH_BUSY_TIMEOUT_S=SECONDS`` this process's SQLite busy timeout is SECONDS
instead of relay's 5 s (design.md §9), so a test that holds the write lock past all of
relay's retries waits for them in a second or two; the 5 s itself is waited out by the
store's and the concurrency tests.
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "RELAY_BENCH_PAUSE"
BUSY_ENV = "RELAY_BENCH_BUSY_TIMEOUT_S"
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
    busy = os.environ.get(BUSY_ENV, "")
    if busy:
        from relay_cli.store import db

        db.BUSY_TIMEOUT_S = float(busy)
    from relay_cli.entry import main as relay_main

    relay_main()


if __name__ == "__main__":
    sys.exit(main())
