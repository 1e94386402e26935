"""Load: many real relay processes on one database at once (RELAY_RATE_LIMIT=0).

``cycles``: W workers in a ring; worker i sends to peer w{i+1}, claims what w{i-1} sent
it (``claim --wait``), acks, replies, then waits for its own request to complete. Every
call is a real ``relay`` process. ``dedupe``: W workers retry the same ids, sometimes with
changed content: one row per id, ``request_id_conflict`` for every changed retry.

On PostgreSQL (design.md §13): ``--postgres`` runs both on a throwaway server;
``--netns`` puts the server and the workers in network namespaces, half of the workers on
each of two "hosts" (testsupport/netns.py); ``--restart`` restarts the server in the middle of
the cycles: every call must then succeed or say database_unavailable/busy (and is retried
with the same id, as an agent would), and nothing acknowledged may be lost.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import Counter

from testsupport import netns, pgserver

from . import common
from .common import (
    Target,
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


RETRYABLE = ("database_unavailable", "busy")


def cycles(
    workers: int = 8,
    n: int = 200,
    log=print,
    hosts: list | None = None,
    during=None,
    wait_s: int = 300,
) -> dict:
    """``hosts``: per worker (command prefix, env) to run its calls on another host;
    ``during(progress)``: called from a side thread while the workers run (a restart).
    With ``during``, calls that say database_unavailable or busy are retried (same id)."""
    home = new_home(prefix="relay-load-")
    envs = [{**join(home, f"w{i}", "1h"), **ENV} for i in range(workers)]
    prefixes = [None] * workers
    if hosts:
        for i in range(workers):
            prefixes[i], extra = hosts[i % len(hosts)]
            envs[i].update(extra)
    retried: Counter = Counter()
    done_calls = [0]
    errors: Counter = Counter()
    sent: list[list[str]] = [[] for _ in range(workers)]
    replied: list[list[str]] = [[] for _ in range(workers)]
    calls = Counter()
    durations: list[float] = []
    lock = threading.Lock()

    def call(i, *args, input=None):
        for _ in range(240):
            r = relay(home, *args, input=input, env=envs[i], timeout=300, prefix=prefixes[i])
            if during is None or r.error_code not in RETRYABLE:
                break
            with lock:
                retried[(args[0], r.error_code)] += 1
            time.sleep(0.25)
        with lock:
            calls[args[0]] += 1
            done_calls[0] += 1
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
            call(i, "wait", rid, "--timeout", str(wait_s), "--json")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    side = None
    if during is not None:
        side = threading.Thread(target=during, args=(lambda: done_calls[0],))
        side.start()
    for t in threads:
        t.join()
    if side is not None:
        side.join()
    wall = time.perf_counter() - t0
    all_sent = [x for s in sent for x in s]
    with Target(home) as db:
        rows = dict(db.rows("SELECT id, state FROM requests"))
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
    res = {
        "workers": workers,
        "cycles": n,
        "requests": len(rows),
        "relay_calls": sum(calls.values()),
        "nothing_to_claim": sum(v for (c, e), v in errors.items() if e == "nothing_to_claim"),
        "wall_s": round(wall, 1),
        "calls_per_s": round(sum(calls.values()) / wall, 1),
        "call_median_ms": round(median(durations) * 1000, 1),
        "call_p99_ms": round(pct(durations, 99) * 1000, 1),
        "problems": problems,
    }
    if during is not None:
        res["retried"] = {f"{c}:{e}": v for (c, e), v in sorted(retried.items())}
    log("cycles: " + json.dumps(res))
    cleanup(home, problems)
    return res


def dedupe(
    workers: int = 16, ids: int = 100, change: float = 0.3, seed: int = 7, log=print
) -> dict:
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
    with Target(home) as db:
        stored = dict(db.rows("SELECT id, text FROM requests"))
        per_id = dict(db.rows("SELECT id, count(*) FROM requests GROUP BY id"))
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
        problems.append(
            f"created-once check failed: {len(created)} ids created, "
            f"max {max(created.values(), default=0)} times"
        )
    problems += check_db(home, set(idlist))
    res = {
        "workers": workers,
        "ids": ids,
        "sends": len(results),
        **dict(outcome),
        "wall_s": round(wall, 1),
        "problems": problems[:20],
    }
    log("dedupe: " + json.dumps(res))
    cleanup(home, problems)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench load")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--dedupe-workers", type=int, default=16)
    ap.add_argument("--ids", type=int, default=100)
    ap.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL server")
    ap.add_argument(
        "--netns",
        action="store_true",
        help="PostgreSQL in a network namespace, workers on two 'hosts'",
    )
    ap.add_argument(
        "--restart",
        action="store_true",
        help="PostgreSQL: restart the server in the middle of the cycles",
    )
    a = ap.parse_args(argv)
    print_machine()
    if not (a.postgres or a.netns or a.restart):
        r1 = cycles(a.workers, a.cycles)
        r2 = dedupe(a.dedupe_workers, a.ids)
        return 1 if r1["problems"] or r2["problems"] else 0
    return postgres_main(a)


def postgres_main(a) -> int:
    net = netns.Net().up() if a.netns else None
    server = None
    try:
        if net is not None:
            server = pgserver.Server(listen=net.listen(), netns=net.server_ns, fsync=True)
        else:
            server = pgserver.Server(fsync=True)
        server.init().start()
        server.execute("CREATE DATABASE relay")
        common.DATABASE_URL = server.url("relay")  # set-up and checks over the unix socket
        hosts = None
        if net is not None:
            hosts = [
                (
                    net.prefix(h),
                    {
                        "RELAY_DATABASE_URL": f"postgresql://postgres@{net.server_addr(h)}:"
                        f"{server.port}/relay"
                    },
                )
                for h in net.hosts
            ]
            print(
                f"backend: PostgreSQL in namespace {net.server_ns}; workers alternate "
                f"between {', '.join(net.hosts)}"
            )
        else:
            print("backend: PostgreSQL on a unix socket")
        during = None
        if a.restart:
            during = _restarter(server, a.workers * a.cycles * 5 // 3)
        r1 = cycles(
            a.workers, a.cycles, hosts=hosts, during=during, wait_s=60 if a.restart else 300
        )
        problems = list(r1["problems"])
        if a.restart:
            problems = [p for p in problems if not p.startswith("unexpected errors")]
            bad = {
                k: v for k, v in r1.get("retried", {}).items() if k.split(":")[1] not in RETRYABLE
            }
            if bad:
                problems.append(f"errors other than database_unavailable/busy: {bad}")
        else:
            server.execute("DROP DATABASE relay WITH (FORCE)")
            server.execute("CREATE DATABASE relay")
            r2 = dedupe(a.dedupe_workers, a.ids)
            problems += r2["problems"]
        return 1 if problems else 0
    finally:
        common.DATABASE_URL = None
        if server is not None:
            server.remove()
        if net is not None:
            net.down()


def _restarter(server, at_calls: int):
    """Restart the server once ``at_calls`` relay calls have ended (a third of the run)."""

    def run(progress):
        while progress() < at_calls:
            time.sleep(0.1)
        t0 = time.perf_counter()
        server._run(
            [
                str(server.bin / "pg_ctl"),
                "-D",
                str(server.data),
                "-m",
                "fast",
                "-w",
                "-t",
                "60",
                "restart",
                "-l",
                str(server.log),
            ]
        )
        print(
            f"restart: the server was restarted after {progress()} calls; pg_ctl took "
            f"{time.perf_counter() - t0:.2f} s",
            flush=True,
        )

    return run


if __name__ == "__main__":
    sys.exit(main())
