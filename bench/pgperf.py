"""PostgreSQL's performance figures (design.md §13), side by side in one run.

- ``relay send`` / ``relay claim`` on PostgreSQL over loopback TCP against the same
  commands on SQLite: median wall time and peak memory, measured round-robin
  (bench/perf.py's ``measure``); goal: wall time at most 1.2x, peak memory at most 1.5x.
- Wake-up latency reply -> ``wait`` across network namespaces: the server in one, the
  waiter on host-a, the replier on host-b (testsupport/netns.py). Latency is the waiter's first
  byte of output minus the reply's ``finished_at`` (set before its COMMIT, by the
  server's clock; both clocks are this machine's). Goal: median at most 100 ms.
- ``relay list`` at 1,000,000 requests against 10, both on PostgreSQL (the bulk database
  of bench/bulk.py moved with ``relay db copy``); goal: at most 1.5x.
- CPU of a ``wait`` and a ``claim --wait`` blocked on PostgreSQL (bench/latency.py's
  ``waiting_cpu``); goal: under 1 s per minute.

``python -m bench pgperf`` (``--reps``, ``--trials``, ``--cpu-seconds``, ``--no-1m``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from testsupport import netns, pgserver

from . import bulk, common, latency, perf
from .common import CACHE, RELAY, base_env, join, median, new_id, pct, print_machine

WALL_GOAL = 1.2
MEMORY_GOAL = 1.5


def _home() -> Path:
    d = Path(tempfile.mkdtemp(prefix="relay-pgperf-", dir=CACHE)) / "home"
    return d


def side_by_side(server, reps: int, log=print) -> dict:
    url = server.create_db("perf")
    sq = _home()
    shutil.copytree(bulk.cached_home(0, "empty"), sq)
    pgh = _home()
    pg_env = {"RELAY_DATABASE_URL": url}
    a_sq, b_sq = join(sq, "a", "1h"), join(sq, "b", "1h")
    common.DATABASE_URL = url
    try:
        a_pg, b_pg = join(pgh, "a", "1h"), join(pgh, "b", "1h")
    finally:
        common.DATABASE_URL = None

    def send(home, who, extra):
        return lambda i: (
            [*RELAY, "send", "--to", "b", "--id", new_id(), "--json", "-"],
            base_env(home, {**who, **extra, "RELAY_RATE_LIMIT": "0"}),
            b"perf test request",
        )

    def claim(home, who, extra):
        return lambda i: ([*RELAY, "claim", "--json"], base_env(home, {**who, **extra}), None)

    makers = {
        "relay send (SQLite)": send(sq, a_sq, {}),
        "relay send (PostgreSQL, TCP loopback)": send(pgh, a_pg, pg_env),
        "relay claim (SQLite)": claim(sq, b_sq, {}),
        "relay claim (PostgreSQL, TCP loopback)": claim(pgh, b_pg, pg_env),
    }
    rows = perf.round_robin(makers, reps)
    res = {"rows": rows, "ratios": [], "problems": []}
    for k, v in rows.items():
        log(
            f"{k:40} {v['median_ms']:8.1f} ms (fastest {v['min_ms']:.1f}) "
            f"{v['peak_rss_mib']:6.1f} MiB"
        )
    for cmd in ("send", "claim"):
        x, y = (f"relay {cmd} (PostgreSQL, TCP loopback)", f"relay {cmd} (SQLite)")
        rw = round(rows[x]["median_ms"] / rows[y]["median_ms"], 2)
        rm = round(rows[x]["peak_rss_mib"] / rows[y]["peak_rss_mib"], 2)
        res["ratios"].append(
            {
                "command": cmd,
                "wall": rw,
                "memory": rm,
                "goal": {"wall": WALL_GOAL, "memory": MEMORY_GOAL},
            }
        )
        ok = rw <= WALL_GOAL and rm <= MEMORY_GOAL
        log(
            f"{cmd}: PostgreSQL / SQLite = wall {rw} (goal <= {WALL_GOAL}), memory {rm} "
            f"(goal <= {MEMORY_GOAL}) {'ok' if ok else 'MISSED'}"
        )
        if not ok:
            res["problems"].append(f"{cmd}: wall {rw}, memory {rm}")
    for h in (sq, pgh):
        shutil.rmtree(h.parent, ignore_errors=True)
    return res


class _Waiter:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.first = None
        self.out = b""
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        import os

        chunk = os.read(self.p.stdout.fileno(), 1 << 16)
        self.first = time.time()
        self.out = chunk + self.p.stdout.read()


def wake_latency(trials: int, log=print) -> dict:
    """reply on host-b -> wait on host-a, the server in a third namespace."""
    why = netns.unavailable()
    if why:
        log(f"wake-up latency across namespaces: skipped ({why})")
        return {"skipped": why, "problems": []}
    with netns.server_and_hosts(fsync=True) as (net, server):
        home = _home()
        urls = {
            h: f"postgresql://postgres@{net.server_addr(h)}:{server.port}/relay" for h in net.hosts
        }
        common.DATABASE_URL = server.url("relay")
        a = {**join(home, "a", "1h"), "RELAY_RATE_LIMIT": "0"}
        b = {**join(home, "b", "1h"), "RELAY_RATE_LIMIT": "0"}
        common.DATABASE_URL = None
        lat, problems = [], []
        env_a = base_env(home, {**a, "RELAY_DATABASE_URL": urls["host-a"]})
        env_b = base_env(home, {**b, "RELAY_DATABASE_URL": urls["host-b"]})
        pa, pb = net.prefix("host-a"), net.prefix("host-b")
        for _ in range(trials):
            rid = new_id()
            subprocess.run(
                [*pa, *RELAY, "send", "--to", "b", "--id", rid, "--json", "x"],
                env=env_a,
                capture_output=True,
                check=True,
            )
            subprocess.run(
                [*pb, *RELAY, "claim", "--id", rid, "--json"],
                env=env_b,
                capture_output=True,
                check=True,
            )
            w = _Waiter([*pa, *RELAY, "wait", rid, "--timeout", "60", "--json"], env_a)
            time.sleep(0.6)  # let the waiter connect, LISTEN and block
            r = subprocess.run(
                [*pb, *RELAY, "reply", rid, "--json", "done"], env=env_b, capture_output=True
            )
            w.p.wait(90)
            w.t.join(30)
            if r.returncode != 0 or w.p.returncode != 0:
                problems.append(f"reply {r.returncode}, wait {w.p.returncode}")
                continue
            finished = json.loads(r.stdout)["finished_at"]
            from relay_cli.core.clock import parse_iso

            lat.append(w.first - parse_iso(finished) / 1000)
        res = {
            "what": "reply (host-b) -> wait (host-a), server in a third namespace",
            "trials": len(lat),
            "median_ms": round(median(lat) * 1000, 1),
            "p90_ms": round(pct(lat, 90) * 1000, 1),
            "max_ms": round(max(lat) * 1000, 1),
            "problems": problems,
        }
        if lat and median(lat) > 0.1:
            problems.append(f"median {median(lat) * 1000:.0f} ms is above 100 ms")
        log("wake-up latency: " + json.dumps(res))
        shutil.rmtree(home.parent, ignore_errors=True)
        common.DATABASE_URL = None
        return res


def list_scale(server, reps: int, log=print) -> dict:
    """``relay list`` at 1,000,000 requests against 10, both on PostgreSQL."""
    rows = {}
    homes = []
    for n, name in ((10, "n10"), (1_000_000, "n1000000")):
        src = bulk.cached_home(n, name)
        url = server.create_db(f"list_{n}")
        t0 = time.perf_counter()
        r = common.relay(src, "db", "copy", "--to", url, "--json", timeout=3600)
        if r.code != 0:
            raise RuntimeError(r.err)
        log(f"relay db copy of {n:,} requests: {time.perf_counter() - t0:.0f} s")
        home = _home()
        homes.append(home)
        rows[f"relay list ({n:,} requests, PostgreSQL)"] = lambda i, home=home, url=url: (
            [*RELAY, "list", "--json"],
            base_env(home, {"RELAY_DATABASE_URL": url}),
            None,
        )
    got = perf.round_robin(rows, reps)
    for k, v in got.items():
        log(
            f"{k:40} {v['median_ms']:8.1f} ms (fastest {v['min_ms']:.1f}) "
            f"{v['peak_rss_mib']:6.1f} MiB"
        )
    big, small = list(got.values())[1], list(got.values())[0]
    ratio = round(big["median_ms"] / small["median_ms"], 2)
    log(
        f"list: 1,000,000 / 10 on PostgreSQL = {ratio} (goal <= 1.5) "
        f"{'ok' if ratio <= 1.5 else 'MISSED'}"
    )
    for h in homes:
        shutil.rmtree(h.parent, ignore_errors=True)
    return {
        "rows": got,
        "ratio": ratio,
        "problems": [] if ratio <= 1.5 else [f"list ratio {ratio}"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench pgperf", description=__doc__)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--cpu-seconds", type=int, default=60)
    ap.add_argument("--no-1m", action="store_true", help="skip list at 1,000,000 requests")
    ap.add_argument("--only", choices=("send", "latency", "list", "cpu"), action="append")
    a = ap.parse_args(argv)
    print_machine()
    CACHE.mkdir(parents=True, exist_ok=True)
    import compileall

    compileall.compile_dir(str(common.ROOT / "relay_cli"), quiet=1)
    only = set(a.only or ("send", "latency", "list", "cpu"))
    problems = []
    server = pgserver.Server(listen="127.0.0.1", fsync=True).init().start()
    try:
        if "send" in only:
            problems += side_by_side(server, a.reps)["problems"]
        if "list" in only and not a.no_1m:
            problems += list_scale(server, a.reps)["problems"]
        if "cpu" in only:
            common.DATABASE_URL = server.create_db("cpu")
            try:
                problems += latency.waiting_cpu(a.cpu_seconds)["problems"]
            finally:
                common.DATABASE_URL = None
    finally:
        server.remove()
    if "latency" in only:
        problems += wake_latency(a.trials)["problems"]
    print("problems: " + json.dumps(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
