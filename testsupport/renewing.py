"""`relay ARGS` whose `relay once` renews its entry every ``RELAY_TEST_RENEW_S`` seconds
instead of every 10 (design.md §13), for tests that must see several renewals without
waiting for minutes. The interval is a constant of the product; this sets it from
outside, as bench/paused.py adds its pause, so relay itself has no test-only path."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    from relay_cli.entry import main
    from relay_cli.ledger import once

    once.RENEW_S = float(os.environ["RELAY_TEST_RENEW_S"])
    sys.exit(main())
