"""Scale: relay's everyday commands with 1,000,000 requests in the database against an
empty one, and how long sweep / prune hold the write lock while they work.

The big database is built once with direct SQL (``bulk.cached_home``) under
``$RELAY_BENCH_CACHE`` (default /tmp/relay-bench-cache) and reused; commands that change
many rows (sweep, prune) run on a copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import bulk
from .common import RELAY, base_env, has_command, join, median, new_id, print_machine, relay

PROBE = r"""
import sqlite3, sys, time, os
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("PRAGMA busy_timeout = 30000")
stop = sys.argv[2]
waits = []
while not os.path.exists(stop):
    t0 = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    waits.append(time.perf_counter() - t0)
    db.execute("COMMIT")
    time.sleep(0.002)
waits.sort()
print(len(waits), waits[-1] if waits else 0, waits[len(waits) // 2] if waits else 0,
      sum(1 for w in waits if w > 0.1), flush=True)
"""


HOLDS = r"""
import json, os, sys, time
from contextlib import contextmanager
from relay_cli.store import db as dbmod
orig = dbmod.Connection.transaction
holds = []
@contextmanager
def timed(self, write=True):
    # SQLite's automatic WAL checkpoint runs inside COMMIT but after the write lock is
    # released (sqlite3_wal_hook); run it here instead, outside the timed span, so the
    # span is the lock hold alone
    self.conn.execute("PRAGMA wal_autocheckpoint = 0")
    t0 = time.perf_counter()
    with orig(self, write) as c:
        yield c
    if write:
        holds.append(time.perf_counter() - t0)
        self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
dbmod.Connection.transaction = timed
from relay_cli.cli import run
sys.stdout = open(os.devnull, "w")
code = run(sys.argv[1:])
order = [round(h * 1000, 1) for h in holds]
holds.sort()
os.write(2, ("HOLDS " + json.dumps({"exit": code, "transactions": len(holds),
    "longest_at": order.index(max(order)) if order else None, "first_ms": order[:3],
    "longest_ms": round(holds[-1] * 1000, 1) if holds else 0,
    "p99_ms": round(holds[int(0.99 * (len(holds) - 1))] * 1000, 1) if holds else 0,
    "median_ms": round(holds[len(holds) // 2] * 1000, 1) if holds else 0,
    "over_100ms": sum(1 for h in holds if h > 0.1)}) + "\n").encode())
"""


def holds(home: Path, args: list[str], env: dict) -> dict:
    """Each write transaction's duration (BEGIN IMMEDIATE to COMMIT returned) inside the
    command itself: the time it held the write lock. The WAL checkpoint that SQLite would
    run inside COMMIT after releasing the lock runs right after each transaction instead."""
    p = subprocess.run(
        [sys.executable, "-c", HOLDS, *args],
        env=base_env(home, env),
        capture_output=True,
        text=True,
    )
    for line in p.stderr.splitlines():
        if line.startswith("HOLDS "):
            return json.loads(line[6:])
    raise RuntimeError(p.stderr[-500:])


def timings(homes: list[tuple[Path, dict, dict, list[str]]], reps: int) -> list[dict]:
    """Median wall time of send, claim, show, list as real processes, for each home; the
    homes take turns within each repetition so a change in machine load hits all alike."""
    outs = [{"send": [], "claim": [], "show": [], "list": []} for _ in homes]
    for i in range(reps):
        for (home, env_a, env_b, show_ids), out in zip(homes, outs, strict=True):
            r = relay(
                home, "send", "--to", "b", "--id", new_id(), "--json", "-", input="scale", env=env_a
            )
            assert r.code == 0, r.err
            out["send"].append(r.seconds)
            r = relay(home, "claim", "--json", env=env_b)
            assert r.code == 0, r.err
            out["claim"].append(r.seconds)
            r = relay(home, "show", show_ids[i % len(show_ids)], "--json")
            assert r.code == 0, r.err
            out["show"].append(r.seconds)
            r = relay(home, "list", "--json")
            assert r.code == 0, r.err
            out["list"].append(r.seconds)
    return [{k: median(v) for k, v in out.items()} for out in outs]


def lock_hold(home: Path, args: list[str], env: dict) -> dict:
    """Run ``relay *args`` while a probe keeps taking BEGIN IMMEDIATE; the probe's longest
    wait is an upper bound of the longest single write-lock hold of the command."""
    stop = Path(tempfile.mkdtemp()) / "stop"
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(home / "relay.db"), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)
    t0 = time.perf_counter()
    p = subprocess.run([*RELAY, *args], env=base_env(home, env), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    stop.write_text("")
    n, longest, med, over = probe.communicate(timeout=120)[0].split()
    return {
        "command": "relay " + " ".join(args),
        "exit": p.returncode,
        "wall_s": round(wall, 2),
        "output": p.stdout.strip()[:300] if p.returncode == 0 else p.stderr.strip()[-300:],
        "probe_lock_grants": int(n),
        "longest_wait_ms": round(float(longest) * 1000, 1),
        "median_wait_ms": round(float(med) * 1000, 2),
        "waits_over_100ms": int(over),
    }


def prepare(home: Path) -> tuple[dict, dict, list[str]]:
    a = {**join(home, "a", "24h")}
    b = {**join(home, "b", "24h")}
    db = sqlite3.connect(home / "relay.db")
    ids = [
        r[0] for r in db.execute("SELECT id FROM requests WHERE rowid % 49999 = 7 LIMIT 20")
    ] or ["0" * 32]
    db.close()
    return a, b, ids


def run(n: int = 1_000_000, reps: int = 9, log=print) -> dict:
    res: dict = {"requests": n, "problems": []}
    big = bulk.cached_home(n, f"n{n}")
    size = os.path.getsize(big / "relay.db")
    res["db_bytes"] = size
    res["bytes_per_request"] = round(size / n)
    log(
        f"database: {n} requests, {size / 1e6:.0f} MB, {size / n:.0f} bytes per request "
        "(request row with a 160-byte text and a reply, 2-4 events, and their indexes)"
    )
    empty = Path(tempfile.mkdtemp(prefix="relay-scale-")) / "home"
    bulk.init_home(empty)
    ea, eb, _ = prepare(empty)
    r = relay(empty, "send", "--to", "b", "--id", new_id(), "--json", "first", env=ea)
    eids = [r.json["id"]]
    relay(empty, "claim", "--json", env=eb)
    ba, bb, bids = prepare(big)
    t_empty, t_big = timings([(empty, ea, eb, eids), (big, ba, bb, bids)], reps)
    res["timings"] = {}
    for k in t_empty if reps else ():
        ratio = t_big[k] / t_empty[k]
        res["timings"][k] = {
            "empty_ms": round(t_empty[k] * 1000, 1),
            "full_ms": round(t_big[k] * 1000, 1),
            "ratio": round(ratio, 2),
        }
        log(
            f"{k:6} empty {t_empty[k] * 1000:7.1f} ms   {n} requests {t_big[k] * 1000:7.1f} ms"
            f"   ratio {ratio:.2f}"
        )
        if ratio > 1.5:
            res["problems"].append(f"{k} is {ratio:.2f}x slower at {n} requests")
    # sweep and prune on a copy
    work = Path(tempfile.mkdtemp(prefix="relay-scale-copy-", dir=big.parent.parent)) / "home"
    try:
        shutil.copytree(big, work)
        db = sqlite3.connect(work / "relay.db")
        due = db.execute("SELECT count(*) FROM requests WHERE state='queued'").fetchone()[0]
        db.close()
        res["sweep"] = lock_hold(work, ["sweep", "--json"], {"RELAY_TIME_OFFSET": str(8 * 86400)})
        res["sweep"]["due_requests"] = due
        log("sweep, probe: " + json.dumps(res["sweep"]))
        shutil.rmtree(work)
        shutil.copytree(big, work)
        res["sweep_holds"] = holds(work, ["sweep", "--json"], {"RELAY_TIME_OFFSET": str(8 * 86400)})
        log("sweep, write transactions: " + json.dumps(res["sweep_holds"]))
        if res["sweep_holds"]["longest_ms"] > 100:
            res["problems"].append(f"sweep held the lock {res['sweep_holds']['longest_ms']} ms")
        if has_command("prune"):
            res["prune"] = lock_hold(work, ["prune", "--json"], {})
            log("prune, probe: " + json.dumps(res["prune"]))
            shutil.rmtree(work)
            shutil.copytree(big, work)
            res["prune_holds"] = holds(work, ["prune", "--json"], {})
            log("prune, write transactions: " + json.dumps(res["prune_holds"]))
            if res["prune_holds"]["longest_ms"] > 100:
                res["problems"].append(f"prune held the lock {res['prune_holds']['longest_ms']} ms")
        else:
            res["prune"] = {"skipped": "`relay prune` does not exist yet"}
            log("prune: SKIPPED, `relay prune` does not exist yet")
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
        shutil.rmtree(empty.parent, ignore_errors=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench scale")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--locks-only", action="store_true", help="skip the command timings")
    a = ap.parse_args(argv)
    print_machine()
    res = run(a.requests, 0 if a.locks_only else a.reps)
    for p in res["problems"]:
        print("PROBLEM:", p)
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
