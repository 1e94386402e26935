"""Which PostgreSQL driver relay uses, by measurement (design.md §13, docs/benchmarks.md).

Each driver gets its own virtual environment (made once under the bench cache, from PyPI:
``psycopg2-binary`` and ``psycopg[binary]``), and each round, alternating the drivers,
starts a fresh interpreter that does what a `relay send` does with its driver:

* ``import``: only import the driver (what every call pays first);
* ``send``: import relay's command layer and the driver, connect over the unix socket of
  a throwaway server, and run the statements of one send (the schema/clock query, BEGIN
  with the write lock, the reads, two INSERTs, NOTIFY and COMMIT), then exit.

Wall time and peak memory (GNU time's max RSS of the process itself) come from
bench/perf.py's ``measure``. ``python -m bench driver --rounds 15``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

from testsupport import pgserver

from .common import CACHE, ROOT, machine, median, pct

DRIVERS = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]"}

SEND = r"""
import sys, time, uuid
sys.path.insert(0, {root!r})
import relay_cli.cli.commands  # relay's command layer, as every call but a hook imports it
drv = sys.argv[1]
url = sys.argv[2]
if drv == "psycopg2":
    import psycopg2 as m
    conn = m.connect(url)
    conn.autocommit = True
else:
    import psycopg as m
    conn = m.connect(url, autocommit=True)
cur = conn.cursor()
rid = str(uuid.uuid4())
now = int(time.time() * 1000)
stmts = [
    ("SELECT extract(epoch FROM clock_timestamp()) * 1000, (SELECT 4)", None),
    ("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(1)", None),
    ("SELECT * FROM t WHERE id = %s", (rid,)),
    ("SELECT count(*) FROM t WHERE created_at > %s", (now - 60000,)),
    ("INSERT INTO t (id, body, created_at) VALUES (%s, %s, %s)", (rid, "hello", now)),
    ("INSERT INTO e (id, at) VALUES (%s, %s)", (rid, now)),
    ("NOTIFY relay_changes", None),
    ("COMMIT", None),
]
for sql, params in stmts:
    if drv == "psycopg" and ";" in sql:
        for part in sql.split(";"):
            cur.execute(part)
    else:
        cur.execute(sql, params)
conn.close()
"""


def ensure_venv(driver: str) -> Path:
    d = CACHE / "driver-venvs" / driver
    py = d / "bin" / "python"
    if not py.exists():
        venv.create(d, with_pip=True)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", DRIVERS[driver]], check=True)
    # relay's own dependencies (typer etc.) come from this interpreter's site-packages
    return py


def run_child(argv: list[str], env: dict) -> tuple[float, int]:
    from .perf import measure

    wall, kib, code = measure(argv, env)
    if code != 0:
        raise RuntimeError(f"{argv[:3]} exited {code}")
    return wall, kib


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench driver", description=__doc__)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    pys = {d: ensure_venv(d) for d in DRIVERS}
    site = [p for p in sys.path if p.endswith("site-packages")]
    server = pgserver.start()
    try:
        server.execute("CREATE DATABASE bench")
        server.execute(
            "CREATE TABLE t (id text PRIMARY KEY, body text, created_at bigint); "
            "CREATE TABLE e (seq bigserial PRIMARY KEY, id text, at bigint)",
            dbname="bench",
        )
        url = server.url("bench")
        results = {d: {"import": [], "send": [], "import_kib": [], "send_kib": []} for d in DRIVERS}
        for r in range(args.rounds):
            for d, py in pys.items():
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
                wall, kib = run_child([str(py), "-c", f"import {d}"], env)
                results[d]["import"].append(wall)
                results[d]["import_kib"].append(kib)
                wall, kib = run_child([str(py), "-c", SEND.format(root=str(ROOT)), d, url], env)
                results[d]["send"].append(wall)
                results[d]["send_kib"].append(kib)
            print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        print(f"machine: {machine()}")
        print(
            f"{'driver':10} {'import (median/p90)':>22} {'peak':>8} "
            f"{'send-like call (median/p90)':>30} {'peak':>8}"
        )
        for d, res in results.items():
            print(
                f"{d:10} {median(res['import']) * 1000:>10.1f} / "
                f"{pct(res['import'], 90) * 1000:>6.1f} ms {median(res['import_kib']) / 1024:>6.1f} MiB "
                f"{median(res['send']) * 1000:>16.1f} / {pct(res['send'], 90) * 1000:>6.1f} ms "
                f"{median(res['send_kib']) / 1024:>6.1f} MiB"
            )
    finally:
        server.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
