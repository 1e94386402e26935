"""Wake-up latency and the CPU a blocked waiter uses.

The waiter is a real ``relay wait`` / ``relay claim --wait`` process. The waking command
(``reply`` / ``send``) runs in this process through relay's own entry point so the moment
its transaction's COMMIT returns can be recorded; the latency is from that moment to the
waiter's JSON arriving on its stdout pipe (both on this process's monotonic clock).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .common import RELAY, base_env, cleanup, join, median, new_id, pct, print_machine, relay

COMMITS: list[float] = []


@contextmanager
def _commit_clock():
    """Record when each write transaction of the in-process relay committed."""
    from relay_cli.store import db as dbmod

    orig = dbmod.Connection.transaction

    @contextmanager
    def timed(self, write: bool = True):
        with orig(self, write) as c:
            yield c
        if write:
            COMMITS.append(time.perf_counter())

    dbmod.Connection.transaction = timed
    try:
        yield
    finally:
        dbmod.Connection.transaction = orig


def inproc(home: Path, env: dict, *args: str, input: str = "") -> tuple[int, str, float]:
    """Run relay in this process; returns (exit, stdout, time of its last commit)."""
    from relay_cli.cli import run

    saved = dict(os.environ), sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(base_env(home, env))
    sys.stdin = io.TextIOWrapper(io.BytesIO(input.encode()), encoding="utf-8")
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    COMMITS.clear()
    try:
        code = run(list(args))
        out = sys.stdout.getvalue()
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        sys.stdin, sys.stdout, sys.stderr = saved[1:]
    return code, out, (COMMITS[-1] if COMMITS else float("nan"))


class Waiter:
    """A real relay process whose first stdout byte time is recorded by a thread."""

    def __init__(self, home: Path, env: dict, *args: str) -> None:
        self.p = subprocess.Popen(
            [*RELAY, *args], env=base_env(home, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.first = None
        self.out = b""
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.db = home / "relay.db"

    def _read(self):
        chunk = os.read(self.p.stdout.fileno(), 1 << 16)
        self.first = time.perf_counter()
        rest = self.p.stdout.read()
        self.out = chunk + rest

    def ready(self, settle: float = 0.15, limit: float = 30) -> None:
        """Block until the process has opened relay.db (it then checks, then sleeps)."""
        end = time.monotonic() + limit
        fd_dir = f"/proc/{self.p.pid}/fd"
        while time.monotonic() < end:
            try:
                if any(
                    os.readlink(os.path.join(fd_dir, f)) == str(self.db) for f in os.listdir(fd_dir)
                ):
                    time.sleep(settle)
                    return
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError("waiter never opened the database")

    def finish(self, timeout: float = 120) -> tuple[int, dict, float]:
        self.p.wait(timeout)
        self.t.join(timeout)
        return self.p.returncode, json.loads(self.out or b"null"), self.first


def reply_to_wait(trials: int, log=print) -> dict:
    home = Path(tempfile.mkdtemp(prefix="relay-lat-")) / "home"
    a = {**join(home, "a", "1h"), "RELAY_RATE_LIMIT": "0"}
    b = {**join(home, "b", "1h"), "RELAY_RATE_LIMIT": "0"}
    lat, problems = [], []
    with _commit_clock():
        for _ in range(trials):
            rid = new_id()
            assert (
                inproc(home, a, "send", "--to", "b", "--id", rid, "--json", "-", input="x")[0] == 0
            )
            assert inproc(home, b, "claim", "--id", rid, "--json")[0] == 0
            w = Waiter(home, a, "wait", rid, "--timeout", "60", "--json")
            w.ready()
            code, _, committed = inproc(home, b, "reply", rid, "--json", "-", input="done")
            wcode, doc, first = w.finish()
            if code != 0 or wcode != 0 or doc["state"] != "completed":
                problems.append(f"reply {code}, wait {wcode}")
                continue
            lat.append(first - committed)
    cleanup(home, problems)
    return _summary("reply -> wait", lat, problems, log)


def send_to_claim(trials: int, log=print) -> dict:
    home = Path(tempfile.mkdtemp(prefix="relay-lat-")) / "home"
    a = {**join(home, "a", "1h"), "RELAY_RATE_LIMIT": "0"}
    b = {**join(home, "b", "1h"), "RELAY_RATE_LIMIT": "0"}
    lat, problems = [], []
    with _commit_clock():
        for _ in range(trials):
            rid = new_id()
            w = Waiter(home, b, "claim", "--wait", "60", "--json")
            w.ready()
            code, _, committed = inproc(
                home, a, "send", "--to", "b", "--id", rid, "--json", "-", input="x"
            )
            wcode, doc, first = w.finish()
            if code != 0 or wcode != 0 or doc["id"] != rid:
                problems.append(f"send {code}, claim {wcode}")
                continue
            lat.append(first - committed)
    cleanup(home, problems)
    return _summary("send -> claim --wait", lat, problems, log)


def _summary(name, lat, problems, log) -> dict:
    res = {
        "what": name,
        "trials": len(lat),
        "median_ms": round(median(lat) * 1000, 1),
        "p99_ms": round(pct(lat, 99) * 1000, 1),
        "max_ms": round(max(lat, default=0) * 1000, 1),
        "problems": problems,
    }
    if lat and median(lat) > 0.1:
        problems.append(f"median {median(lat) * 1000:.0f} ms is above 100 ms")
    log(f"{name}: " + json.dumps(res))
    return res


def _cpu_of(args, home, env, seconds_hint) -> tuple[float, float, int]:
    p = subprocess.Popen(
        [*RELAY, *args],
        env=base_env(home, env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    t0 = time.perf_counter()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, time.perf_counter() - t0, p.returncode


def waiting_cpu(seconds: int = 60, log=print) -> dict:
    """CPU (user+sys, from wait4's rusage) of a wait and a claim --wait blocked for
    ``seconds``, next to the same command returning at once (start-up cost)."""
    home = Path(tempfile.mkdtemp(prefix="relay-cpu-")) / "home"
    a = join(home, "a", "1h")
    b = join(home, "b", "1h")
    rid = new_id()
    assert relay(home, "send", "--to", "b", "--id", rid, "--json", "x", env=a).code == 0
    res = {"seconds": seconds, "problems": []}
    for name, args, env in (
        ("wait", ["wait", rid, "--json", "--timeout"], a),
        ("claim --wait", ["claim", "--id", new_id(), "--json", "--wait"], b),
    ):
        if name == "claim --wait":
            # nothing queued for b apart from rid: claim the one that exists first
            assert relay(home, "claim", "--json", env=b).code == 0
            args = ["claim", "--json", "--wait"]
        base, _, _ = _cpu_of([*args, "0"], home, env, 0)
        cpu, wall, code = _cpu_of([*args, str(seconds)], home, env, seconds)
        per_min = (cpu - base) * 60 / wall
        res[name] = {
            "exit": code,
            "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 3),
            "startup_cpu_s": round(base, 3),
            "cpu_s_per_minute_blocked": round(per_min, 3),
        }
        if code != 75:
            res["problems"].append(f"{name}: exit {code}, expected 75")
        if cpu * 60 / wall >= 1.0 and seconds >= 60:
            res["problems"].append(f"{name}: {cpu:.2f} s CPU in {wall:.0f} s")
    log("cpu while blocked: " + json.dumps(res))
    cleanup(home, res["problems"])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench latency")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--cpu-seconds", type=int, default=60)
    a = ap.parse_args(argv)
    print_machine()
    r = [reply_to_wait(a.trials), send_to_claim(a.trials), waiting_cpu(a.cpu_seconds)]
    return 1 if any(x["problems"] for x in r) else 0


if __name__ == "__main__":
    sys.exit(main())
