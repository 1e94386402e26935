"""send's same-text look (design.md §14): what it costs `relay send` that a send whose
text, sender and recipient equal an open request's says so.

Two measures, on homes with N open requests from a to b (distinct texts of one length,
inserted with direct SQL):

- the look alone, in process: CPU time per call of ``open_same_text`` (one search of the
  partial index ``requests_open_text``), against the same look without the hash (every
  open request from a to b, its text compared): what a send would pay per call without
  it;
- ``relay send`` as a real process (human output, the only output that looks): its CPU
  time (user + system, from getrusage, less moved by other jobs than wall time), empty
  home against N open requests, the same text every time so that the look finds one.

``--code DIR`` runs the relay_cli found in DIR (a checkout of an earlier revision, to
compare before and after; that revision makes its own homes, so its schema is its own).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from .common import print_machine

TEXT = "job {:08d} please"


def _env(code: str | None, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    if code:
        env["PYTHONPATH"] = code
    env.update(RELAY_HOME=home, RELAY_QUEUE_CAP="0", RELAY_RATE_LIMIT="0")
    return env


def _relay(code: str | None, home: str, *args: str, text: str | None = None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", *args],
        input=text,
        capture_output=True,
        text=True,
        env=_env(code, home),
        # not the project root: `python -m` puts the working directory before PYTHONPATH
        cwd=os.path.dirname(home),
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 0, p.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p


def _home(code: str | None, n: int) -> str:
    home = tempfile.mkdtemp(prefix="relay-sametext-") + "/home"
    _relay(code, home, "peers", "add", "a")
    _relay(code, home, "peers", "add", "b")
    db = sqlite3.connect(home + "/relay.db")
    have = {r[1] for r in db.execute("PRAGMA table_info(requests)")}
    now = int(time.time() * 1000)
    rows = []
    for i in range(n):
        text = TEXT.format(i)
        row = {
            "id": str(uuid.uuid4()),
            "fingerprint": "bench",
            "from_peer": "a",
            "to_peer": "b",
            "text": text,
            "text_bytes": len(text),
            "state": "queued",
            "created_at": now,
            "updated_at": now,
            "expires_at": now + 86_400_000,
            "ttl_seconds": 86400,
            "max_attempts": 3,
            "on_lost": "unknown",
            "text_hash": hashlib.sha256(text.encode()).hexdigest(),
        }
        rows.append({k: v for k, v in row.items() if k in have})
    if rows:
        keys = list(rows[0])
        db.executemany(
            f"INSERT INTO requests ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
            [tuple(r[k] for k in keys) for r in rows],
        )
    db.commit()
    db.close()
    return home


def look(n: int, calls: int = 2000) -> dict:
    """CPU time per call of the look, and of the same read without its index."""
    from relay_cli.store import open_store

    home = _home(None, n)
    store = open_store(home, environ={})
    text = TEXT.format(7)
    digest = hashlib.sha256(text.encode()).hexdigest()

    def per_call(fn, k: int) -> float:
        started = time.process_time()
        for _ in range(k):
            fn()
        return (time.process_time() - started) / k * 1e6

    try:
        with store.transaction(write=False):
            indexed = per_call(lambda: store.open_same_text("b", "a", digest, text, "x", 3), calls)
            scanned = per_call(
                lambda: store.db.all(
                    "SELECT id FROM requests WHERE to_peer = 'b' AND from_peer = 'a' "
                    "AND state IN ('queued', 'delivered', 'acknowledged') AND text = ?",
                    (text,),
                ),
                max(5, calls // 100),
            )
    finally:
        store.close()
    return {"open": n, "look_us": round(indexed, 1), "without_hash_us": round(scanned)}


def send(code: str | None, n: int, reps: int) -> dict:
    """Median CPU time of `relay send` (human output) on an empty home and on N open."""
    homes = {"empty_ms": _home(code, 0), "open_ms": _home(code, n)}
    times: dict[str, list[float]] = {k: [] for k in homes}
    noted = False
    for _ in range(reps):
        for key, home in homes.items():  # taking turns: a change of load hits both
            cpu, p = _relay(
                code,
                home,
                "send",
                "--as",
                "a",
                "--to",
                "b",
                "--id",
                str(uuid.uuid4()),
                "-",
                text=TEXT.format(7),
            )
            times[key].append(cpu)
            noted = noted or "open with the same text" in p.stdout
    out = {k: round(statistics.median(v) * 1000, 1) for k, v in times.items()}
    return {"code": code or "this checkout", "open": n, **out, "note_shown": noted}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench sametext")
    ap.add_argument("--open", type=int, default=20_000, help="open requests from a to b")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--code", help="a directory whose relay_cli to run `relay send` with")
    a = ap.parse_args(argv)
    print_machine()
    if a.code is None:
        for n in (1_000, a.open):
            print(json.dumps(look(n)), flush=True)
    print(json.dumps(send(a.code, a.open, a.reps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
