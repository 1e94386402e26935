"""Wake waiter latency (design.md §12) and the CPU a waiting waiter uses.

    python -m bench wake [--trials 50] [--cpu-seconds 60] [--code DIR]

The waiter is a real ``relay hook claude --wake`` process fed a Claude Code Stop event, as
Claude Code runs an asyncRewake hook. Once its row is in ``wake_waiters`` (it is then
waiting), a ``send`` runs in this process through relay's own entry point so the moment its
COMMIT returns is recorded; the latency is from that moment to the waiter's exit (exit 2,
relay's note on stderr), both on this process's monotonic clock. Nothing is asserted in the
test suite about these numbers; this script reports them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .common import RELAY, base_env, cleanup, join, median, new_id, pct, print_machine, relay
from .latency import _commit_clock, inproc

CODE: str | None = None  # --code DIR: the waiter runs the relay_cli found in DIR

STOP = {
    "session_id": "bench-claude-session",
    "transcript_path": "/dev/null",
    "cwd": "/",
    "hook_event_name": "Stop",
    "stop_hook_active": False,
}


class WakeWaiter:
    """A real waiter process whose exit time is recorded by a thread."""

    def __init__(self, home: Path, env: dict, *extra: str) -> None:
        self.home = home
        self.p = subprocess.Popen(
            [*RELAY, "hook", "claude", "--wake", *extra],
            env=base_env(home, {**env, **({"PYTHONPATH": CODE} if CODE else {})}),
            cwd=CODE,  # (`python -m` looks in the working directory first)
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.p.stdin.write(json.dumps(STOP).encode())
        self.p.stdin.close()
        self.exited = None
        self.rusage = None
        self.t = threading.Thread(target=self._wait, daemon=True)
        self.t.start()

    def _wait(self) -> None:
        _, status, self.rusage = os.wait4(self.p.pid, 0)
        self.exited = time.perf_counter()
        self.p.returncode = os.waitstatus_to_exitcode(status)

    def ready(self, limit: float = 30) -> None:
        """Block until the waiter has recorded itself (it then only waits)."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            db = sqlite3.connect(self.home / "relay.db")
            try:
                if db.execute("SELECT 1 FROM wake_waiters WHERE pid = ?", (self.p.pid,)).fetchone():
                    return
            except sqlite3.OperationalError:
                pass
            finally:
                db.close()
            time.sleep(0.005)
        raise RuntimeError("the waiter never registered")

    def finish(self, timeout: float = 120) -> tuple[int, str, float]:
        self.t.join(timeout)
        err = self.p.stderr.read().decode("utf-8", "replace")
        return self.p.returncode, err, self.exited


def send_to_waiter(trials: int, log=print) -> dict:
    home = Path(tempfile.mkdtemp(prefix="relay-wake-")) / "home"
    sender = {**join(home, "sender", "1h"), "RELAY_RATE_LIMIT": "0"}
    agent = join(home, "agent", "24h")
    lat, problems = [], []
    with _commit_clock():
        for _ in range(trials):
            w = WakeWaiter(home, agent)
            w.ready()
            rid = new_id()
            code, _, committed = inproc(
                home,
                sender,
                "send",
                "--to",
                "agent",
                "--id",
                rid,
                "--json",
                "-",
                input="the request's text",
            )
            wcode, err, exited = w.finish()
            # the note names the request by a prefix of its id (announce.SHOWN_ID at least)
            if code != 0 or wcode != 2 or rid[:12] not in err or "request's text" in err:
                problems.append(f"send {code}, waiter {wcode}: {err[:200]!r}")
                continue
            lat.append(exited - committed)
            # take it, so the next trial's waiter waits for the next request
            assert relay(home, "claim", "--id", rid, "--json", env=agent).code == 0
    res = {
        "what": "send -> relay hook claude --wake exits 2",
        "trials": len(lat),
        "median_ms": round(median(lat) * 1000, 1),
        "p99_ms": round(pct(lat, 99) * 1000, 1),
        "max_ms": round(max(lat, default=0) * 1000, 1),
        "problems": problems,
    }
    log("wake latency: " + json.dumps(res))
    cleanup(home, problems)
    return res


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def waiting_cpu(seconds: int, log=print) -> dict:
    """CPU (user+sys) a waiter spends waiting: read from /proc/PID/stat once it has
    recorded itself (and settled for a second) and again ``seconds`` later, then it is
    ended with SIGTERM (exit 0). Its whole life's CPU (wait4's rusage) is shown beside,
    next to one that exits at once (a second waiter of the same session: start-up)."""
    home = Path(tempfile.mkdtemp(prefix="relay-wake-cpu-")) / "home"
    agent = join(home, "agent", "24h")
    res = {"seconds": seconds, "problems": []}
    w = WakeWaiter(home, agent, "--timeout", str(seconds + 120))
    w.ready()
    time.sleep(1.0)
    quick = WakeWaiter(home, agent)
    qcode, _, _ = quick.finish()
    base = quick.rusage.ru_utime + quick.rusage.ru_stime
    time.sleep(0.5)
    t0, c0 = time.perf_counter(), _proc_cpu(w.p.pid)
    time.sleep(seconds)
    t1, c1 = time.perf_counter(), _proc_cpu(w.p.pid)
    w.p.send_signal(signal.SIGTERM)
    code, _, _ = w.finish(timeout=120)
    cpu = w.rusage.ru_utime + w.rusage.ru_stime
    res.update(
        exit=code,
        second_waiter_exit=qcode,
        waited_s=round(t1 - t0, 1),
        cpu_waiting_s=round(c1 - c0, 3),
        cpu_s_per_minute_waiting=round((c1 - c0) * 60 / max(t1 - t0, 1e-9), 3),
        cpu_whole_life_s=round(cpu, 3),
        startup_cpu_s=round(base, 3),
    )
    if code != 0 or qcode != 0:
        res["problems"].append(f"exits {code} / {qcode}, expected 0 / 0")
    log("waiter cpu: " + json.dumps(res))
    cleanup(home, res["problems"])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench wake")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--cpu-seconds", type=int, default=60)
    ap.add_argument("--code", help="run the waiter from the relay_cli in DIR (a checkout)")
    a = ap.parse_args(argv)
    global CODE
    CODE = a.code
    print_machine()
    if CODE:
        print(f"waiter: the relay_cli in {CODE}")
    r = [send_to_waiter(a.trials), waiting_cpu(a.cpu_seconds)]
    return 1 if any(x["problems"] for x in r) else 0


if __name__ == "__main__":
    sys.exit(main())
