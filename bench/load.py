"""Load: many real relay processes on one database at once (RELAY_RATE_LIMIT=0).

``cycles``: W workers in a ring; worker i sends to peer w{i+1}, claims what w{i-1} sent
it (``claim --wait``), acks, replies, then waits for its own request to complete. Every
call is a real ``relay`` process. ``dedupe``: W workers retry the same ids, sometimes with
changed content: one row per id, ``request_id_conflict`` for every changed retry.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import threading
import time
from collections import Counter

from .common import (
    check_db,
    cleanup,
    join,
    median,
    new_home,
    new_id,
    pct,
    print_machine,
    relay,
)

ENV = {"RELAY_RATE_LIMIT": "0"}


def cycles(workers: int = 8, n: int = 200, log=print) -> dict:
    home = new_home(prefix="relay-load-")
    envs = [{**join(home, f"w{i}", "1h"), **ENV} for i in range(workers)]
    errors: Counter = Counter()
    sent: list[list[str]] = [[] for _ in range(workers)]
    replied: list[list[str]] = [[] for _ in range(workers)]
    calls = Counter()
    durations: list[float] = []
    lock = threading.Lock()

    def call(i, *args, input=None):
        r = relay(home, *args, input=input, env=envs[i], timeout=300)
        with lock:
            calls[args[0]] += 1
            durations.append(r.seconds)
            if r.code != 0:
                errors[(args[0], r.error_code or f"exit {r.code}")] += 1
        return r

    def worker(i):
        to = f"w{(i + 1) % workers}"
        for k in range(n):
            rid = new_id()
            text = f"cycle {k} from w{i}: {rid}"
            r = call(i, "send", "--to", to, "--id", rid, "--json", "-", input=text)
            if r.code != 0:
                continue
            sent[i].append(rid)
            got = None
            for _ in range(20):  # claim until w{i-1}'s request for this round arrives
                r = call(i, "claim", "--wait", "60", "--lease", "10m", "--json")
                if r.code == 0:
                    got = r.json
                    break
                if r.error_code != "nothing_to_claim":
                    break
            if got is not None:
                call(i, "ack", got["id"], "--json")
                rr = call(i, "reply", got["id"], "--json", "-", input=f"done: {got['text']}")
                if rr.code == 0:
                    replied[i].append(got["id"])
            call(i, "wait", rid, "--timeout", "5m", "--json")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    all_sent = [x for s in sent for x in s]
    db = sqlite3.connect(home / "relay.db")
    rows = dict(db.execute("SELECT id, state FROM requests").fetchall())
    db.close()
    problems = []
    unexpected = {f"{c}:{e}": v for (c, e), v in errors.items() if e != "nothing_to_claim"}
    if unexpected:
        problems.append(f"unexpected errors: {unexpected}")
    if len(all_sent) != workers * n:
        problems.append(f"{len(all_sent)} sends accepted of {workers * n}")
    lost = set(all_sent) - set(rows)
    extra = set(rows) - set(all_sent)
    if lost or extra:
        problems.append(f"lost {len(lost)}, unexpected {len(extra)}")
    not_done = Counter(s for rid, s in rows.items() if s != "completed")
    if not_done:
        problems.append(f"not completed: {dict(not_done)}")
    all_replied = [x for s in replied for x in s]
    if len(all_replied) != len(set(all_replied)):
        problems.append("a request was replied to twice")
    problems += check_db(home, set(all_sent))
    res = {"workers": workers, "cycles": n, "requests": len(rows), "relay_calls": sum(
        calls.values()), "nothing_to_claim": sum(v for (c, e), v in errors.items()
                                                 if e == "nothing_to_claim"),
           "wall_s": round(wall, 1), "calls_per_s": round(sum(calls.values()) / wall, 1),
           "call_median_ms": round(median(durations) * 1000, 1),
           "call_p99_ms": round(pct(durations, 99) * 1000, 1), "problems": problems}
    log("cycles: " + json.dumps(res))
    cleanup(home, problems)
    return res


def dedupe(workers: int = 16, ids: int = 100, change: float = 0.3, seed: int = 7,
           log=print) -> dict:
    home = new_home(prefix="relay-dedupe-")
    a = {**join(home, "a", "1h"), **ENV}
    join(home, "b", "1h")
    idlist = [new_id() for _ in range(ids)]
    results: list[tuple[str, str, int, str | None, bool | None]] = []
    lock = threading.Lock()

    def worker(w):
        rng = random.Random(seed * 1000 + w)
        order = idlist[:]
        rng.shuffle(order)
        for rid in order:
            text = f"job {rid}" if rng.random() >= change else f"job {rid} v{rng.randrange(10**9)}"
            r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=text, env=a)
            dup = r.json.get("duplicate") if r.code == 0 else None
            with lock:
                results.append((rid, text, r.code, r.error_code, dup))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    db = sqlite3.connect(home / "relay.db")
    stored = dict(db.execute("SELECT id, text FROM requests").fetchall())
    per_id = dict(db.execute("SELECT id, count(*) FROM requests GROUP BY id").fetchall())
    db.close()
    problems = []
    if set(stored) != set(idlist) or any(v != 1 for v in per_id.values()):
        problems.append(f"rows: {len(stored)} for {len(idlist)} ids")
    created = Counter()
    outcome = Counter()
    for rid, text, code, err, dup in results:
        same = stored.get(rid) == text
        if same and code == 0:
            outcome["same content: ok"] += 1
            if dup is False:
                created[rid] += 1
        elif not same and code == 4 and err == "request_id_conflict":
            outcome["changed content: request_id_conflict"] += 1
        else:
            problems.append(f"{rid}: same={same} exit {code} {err}")
    if any(v != 1 for v in created.values()) or len(created) != len(idlist):
        problems.append(f"created-once check failed: {len(created)} ids created, "
                        f"max {max(created.values(), default=0)} times")
    problems += check_db(home, set(idlist))
    res = {"workers": workers, "ids": ids, "sends": len(results), **dict(outcome),
           "wall_s": round(wall, 1), "problems": problems[:20]}
    log("dedupe: " + json.dumps(res))
    cleanup(home, problems)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench load")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--dedupe-workers", type=int, default=16)
    ap.add_argument("--ids", type=int, default=100)
    a = ap.parse_args(argv)
    print_machine()
    r1 = cycles(a.workers, a.cycles)
    r2 = dedupe(a.dedupe_workers, a.ids)
    return 1 if r1["problems"] or r2["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
