#!/usr/bin/env python3
"""Screen lines of `relay doctor` at 80x24 in a busy and a broken home (SQLite), in a real
pseudo-terminal (design.md §11).

    python scripts/doctor_lines.py CODE_ROOT TESTS_ROOT [-v]

runs CODE_ROOT's relay on homes built with TESTS_ROOT's helpers
(tests/operate/test_doctor_screen.py: the screen tests' busy home plus a claim lease that
ran out and an expired draft); the broken home is the same with its directory 0755 and
relay.db 0644. Prints the line count and how many problem lines are not on the last
screen (23 rows: the prompt takes the 24th)."""

import os
import sys
import tempfile
from pathlib import Path

code, tests = Path(sys.argv[1]), Path(sys.argv[2])
sys.path[:0] = [str(tests / "tests" / part) for part in (".", "operate", "cli")] + [str(code)]
os.environ["PYTHONPATH"] = str(code)
os.chdir(code)
from conftest import Relay, plain  # noqa: E402
from test_doctor_screen import claim_lease_runs_out  # noqa: E402
from test_screens_fit import busy_home  # noqa: E402


def show(relay, label):
    code_, raw = relay.pty("doctor", cols=80, rows=24)
    text = plain(raw).rstrip("\n").split("\n")
    last = text[-23:]
    probs = [ln for ln in text if ln.startswith(("! warn", "\u2717 fail"))]
    hidden = [ln for ln in probs if ln not in last]
    print(
        f"== {label}: exit {code_}, {len(text)} lines; problem lines {len(probs)}, "
        f"not on the last screen (23 rows + prompt): {len(hidden)}"
    )
    if "-v" in sys.argv:
        print("\n".join(text))


tmp = Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp"))
busy = Relay(tmp / "busy")
claim_lease_runs_out(busy)
busy_home(busy)
show(busy, "busy")
broken = Relay(tmp / "broken")
claim_lease_runs_out(broken)
busy_home(broken)
os.chmod(broken.home, 0o755)
os.chmod(broken.home / "relay.db", 0o644)
show(broken, "broken (dir 0755, relay.db 0644)")
