"""relay's start-up and per-call cost, side by side in one run.

- ``relay send`` / ``relay claim``: median wall time and peak memory (max RSS from
  wait4) against a bare Typer command of the same venv that only prints.
- ``relay list`` with 100,000 requests against ``relay list`` with 10.
- ``relay send`` against the ``sqlite3`` CLI doing the same insert (request row + event).
- ``relay send`` on an empty database against one with 100,000 (and 1,000,000 when that
  cache exists) requests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from . import bulk
from .common import CACHE, RELAY, ROOT, base_env, join, median, new_id, print_machine

BARE = [sys.executable, str(ROOT / "bench" / "bare_typer.py")]


TIME = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
_RSS: list[Path] = []


def _rss_file() -> Path:
    """One scratch file for GNU time's output, made on first use, removed at exit."""
    if not _RSS:
        import atexit

        fd, name = tempfile.mkstemp(prefix="relay-perf-rss-")
        os.close(fd)
        _RSS.append(Path(name))
        atexit.register(lambda: _RSS[0].unlink(missing_ok=True))
    return _RSS[0]


def measure(
    argv: list[str], env: dict, input: bytes | None = None, cwd: Path | None = None
) -> tuple[float, int, int]:
    """(wall seconds, max RSS KiB, exit code) of one process.

    Peak memory comes from GNU time (``%M``): the rusage that wait4 gives this process for
    its own child counts the memory the child shared with this (larger) process before
    exec, so it has a floor of this process's size. Without GNU time that floor applies.
    """
    full = [TIME, "-f", "%M", "-o", str(_rss_file()), *argv] if TIME else argv
    t0 = time.perf_counter()
    p = subprocess.Popen(
        full,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
    )
    if input is not None:
        p.stdin.write(input)
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    rss = ru.ru_maxrss
    if TIME:
        rss = int(_rss_file().read_text().split()[-1])
    return wall, rss, p.returncode


def round_robin(makers: dict, reps: int) -> dict:
    """Measure every row once per repetition, in turn, so a change in the machine's load
    during the run hits every row alike; then median wall time and peak memory."""
    walls: dict = {k: [] for k in makers}
    rss: dict = {k: [] for k in makers}
    for i in range(-1, reps):  # -1: warm-up, not counted (page cache; migrates a cached db)
        for k, make in makers.items():
            argv, env, inp = make(i)
            w, m, code = measure(argv, env, inp)
            if code != 0:
                raise RuntimeError(f"{k}: {argv} exited {code}")
            if i >= 0:
                walls[k].append(w)
                rss[k].append(m)
    return {
        k: {
            "median_ms": round(median(walls[k]) * 1000, 1),
            "min_ms": round(min(walls[k]) * 1000, 1),
            "peak_rss_mib": round(max(rss[k]) / 1024, 1),
        }
        for k in makers
    }


def series(make, reps: int) -> dict:
    walls, rss = [], []
    argv, env, inp = make(-1)  # warm-up, not counted (page cache; migrates a cached db)
    measure(argv, env, inp)
    for i in range(reps):
        argv, env, inp = make(i)
        w, m, code = measure(argv, env, inp)
        if code != 0:
            raise RuntimeError(f"{argv} exited {code}")
        walls.append(w)
        rss.append(m)
    return {"median_ms": round(median(walls) * 1000, 1), "peak_rss_mib": round(max(rss) / 1024, 1)}


def _home_copy(src: Path) -> Path:
    d = Path(tempfile.mkdtemp(prefix="relay-perf-", dir=CACHE)) / "home"
    shutil.copytree(src, d)
    return d


def _send(home: Path, a: dict):
    def make(i):
        return (
            [*RELAY, "send", "--to", "b", "--id", new_id(), "--json", "-"],
            base_env(home, {**a, "RELAY_RATE_LIMIT": "0"}),
            b"perf test request",
        )

    return make


def _sqlite_insert(home: Path):
    def make(i):
        rid = str(uuid.uuid4())
        now = int(time.time() * 1000)
        sql = (
            "PRAGMA busy_timeout=5000; PRAGMA synchronous=FULL; BEGIN IMMEDIATE; "
            "INSERT INTO requests (id, fingerprint, from_peer, to_peer, text, text_bytes, state,"
            " created_at, updated_at, expires_at, ttl_seconds, attempts, max_attempts, on_lost,"
            f" depth, pruned) VALUES ('{rid}', 'fp', 'a', 'b', 'perf test request', 17, "
            f"'queued', {now}, {now}, {now + 3600000}, 3600, 0, 3, 'unknown', 0, 0); "
            "INSERT INTO events (request_id, at, from_state, to_state, actor) VALUES "
            f"('{rid}', {now}, NULL, 'queued', 'a'); COMMIT;"
        )
        return ["sqlite3", str(home / "relay.db"), sql], dict(os.environ), None

    return make


def run(reps: int = 21, log=print) -> dict:
    res: dict = {"reps": reps, "problems": []}
    # byte-compile relay as an install does: with PYTHONDONTWRITEBYTECODE=1 a checkout
    # would otherwise compile changed modules from source at every start
    import compileall

    compileall.compile_dir(str(ROOT / "relay_cli"), quiet=1)
    CACHE.mkdir(parents=True, exist_ok=True)
    empty = _home_copy(bulk.cached_home(0, "empty"))
    a = join(empty, "a", "1h")
    b = join(empty, "b", "1h")
    env_plain = base_env(empty)
    makers = {}
    makers["bare typer (prints only)"] = lambda i: (BARE, env_plain, None)
    makers["relay --version"] = lambda i: ([*RELAY, "--version"], env_plain, None)
    makers["relay send (empty db)"] = _send(empty, a)
    makers["relay claim (empty db)"] = lambda i: (
        [*RELAY, "claim", "--json"],
        base_env(empty, b),
        None,
    )
    if shutil.which("sqlite3"):
        makers["sqlite3 CLI, same insert"] = _sqlite_insert(empty)
    ten = _home_copy(bulk.cached_home(10, "n10"))
    hundred_k = _home_copy(bulk.cached_home(100_000, "n100000"))
    makers["relay list (10 requests)"] = lambda i: ([*RELAY, "list", "--json"], base_env(ten), None)
    makers["relay list (100,000 requests)"] = lambda i: (
        [*RELAY, "list", "--json"],
        base_env(hundred_k),
        None,
    )
    a100 = join(hundred_k, "a", "1h")
    makers["relay send (100,000 requests)"] = _send(hundred_k, a100)
    big = bulk.cache_dir(1_000_000, "n1000000") / "home"
    if (big.parent / "ready").exists():
        a1m = join(big, "a", "1h")
        makers["relay send (1,000,000 requests)"] = _send(big, a1m)
        makers["relay list (1,000,000 requests)"] = lambda i: (
            [*RELAY, "list", "--json"],
            base_env(big),
            None,
        )
    rows = round_robin(makers, reps)
    res["rows"] = rows

    def ratio(x, y, key):
        return round(rows[x][key] / rows[y][key], 2)

    comparisons = [
        ("relay send (empty db)", "bare typer (prints only)", 1.5),
        ("relay claim (empty db)", "bare typer (prints only)", 1.5),
        ("relay list (100,000 requests)", "relay list (10 requests)", 1.5),
        ("relay send (empty db)", "sqlite3 CLI, same insert", None),
        ("relay send (100,000 requests)", "relay send (empty db)", 1.5),
        ("relay send (1,000,000 requests)", "relay send (empty db)", 1.5),
        ("relay list (1,000,000 requests)", "relay list (10 requests)", 1.5),
    ]
    log(f"{'command':34} {'median wall':>12} {'fastest':>10} {'peak RSS':>10}")
    for k, v in rows.items():
        log(f"{k:34} {v['median_ms']:9.1f} ms {v['min_ms']:7.1f} ms {v['peak_rss_mib']:7.1f} MiB")
    log("")
    log(f"{'ratio':66} {'wall':>6} {'memory':>7}  goal")
    res["ratios"] = []
    for x, y, goal in comparisons:
        if x not in rows or y not in rows:
            continue
        rw, rm = ratio(x, y, "median_ms"), ratio(x, y, "peak_rss_mib")
        res["ratios"].append({"a": x, "b": y, "wall": rw, "memory": rm, "goal": goal})
        ok = "" if goal is None else ("ok" if rw <= goal and (rm <= goal) else "MISSED")
        log(f"{x + ' / ' + y:66} {rw:6.2f} {rm:7.2f}  {'' if goal is None else f'<= {goal} '}{ok}")
        if goal is not None and (rw > goal or rm > goal):
            res["problems"].append(f"{x} / {y}: wall {rw}, memory {rm} (goal {goal})")
    for h in (empty, ten, hundred_k):
        shutil.rmtree(h.parent, ignore_errors=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench perf")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    print_machine()
    print(
        "peak memory: "
        + (
            "GNU time %M (max RSS of the measured process itself)"
            if TIME
            else "wait4 rusage (includes this process's size as a floor)"
        )
    )
    res = run(a.reps)
    if a.json:
        print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
