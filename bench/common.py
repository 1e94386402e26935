"""Shared helpers: run the real relay, machine facts, statistics, database checks."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELAY = [sys.executable, "-m", "relay_cli"]
RELAY_ENV_VARS = (
    "RELAY_HOME",
    "RELAY_PEER",
    "RELAY_SESSION",
    "RELAY_TIME_OFFSET",
    "RELAY_RATE_LIMIT",
    "RELAY_DEBUG",
    "NO_COLOR",
    "CLAUDE_ENV_FILE",
)
CACHE = Path(os.environ.get("RELAY_BENCH_CACHE", "/tmp/relay-bench-cache"))


# Set by a PostgreSQL run (``--postgres``): every relay call of the bench then uses this
# database instead of the home's relay.db (design.md §13).
DATABASE_URL: str | None = None


def base_env(home: Path | str, extra: dict | None = None) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in RELAY_ENV_VARS and k != "RELAY_DATABASE_URL"
    }
    env["RELAY_HOME"] = str(home)
    if DATABASE_URL:
        env["RELAY_DATABASE_URL"] = DATABASE_URL
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


@dataclass
class Res:
    code: int
    out: str
    err: str
    seconds: float = 0.0

    @property
    def json(self):
        return json.loads(self.out)

    @property
    def error_code(self) -> str | None:
        for line in self.err.splitlines():
            if line.startswith('{"error"'):
                return json.loads(line)["error"]["code"]
        return None


def relay(
    home,
    *args,
    input: str | bytes | None = None,
    env: dict | None = None,
    timeout: float = 120,
    prefix: list[str] | None = None,
) -> Res:
    """Run the real relay in a process; never raises on a non-zero exit. ``prefix`` runs
    it elsewhere (another network namespace: testsupport/netns.py)."""
    data = input.encode() if isinstance(input, str) else input
    t0 = time.perf_counter()
    p = subprocess.run(
        [*(prefix or []), *RELAY, *map(str, args)],
        input=data,
        capture_output=True,
        env=base_env(home, env),
        timeout=timeout,
    )
    return Res(
        p.returncode,
        p.stdout.decode("utf-8", "replace"),
        p.stderr.decode("utf-8", "replace"),
        time.perf_counter() - t0,
    )


def join(home, name: str, lease: str = "24h") -> dict[str, str]:
    r = relay(home, "peers", "join", name, "--lease", lease, "--json")
    if r.code != 0:
        raise RuntimeError(f"peers join {name} failed: {r.err}")
    return {"RELAY_PEER": name, "RELAY_SESSION": r.json["token"]}


def new_id() -> str:
    return str(uuid.uuid4())


def new_home(parent: Path | None = None, prefix: str = "relay-bench-") -> Path:
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(d, 0o700)
    return d / "home"


def cleanup(home: Path, problems=()) -> None:
    """Remove a scratch home made by ``new_home`` (kept when a check failed, or with
    RELAY_BENCH_KEEP=1, for a look at it)."""
    if problems or os.environ.get("RELAY_BENCH_KEEP") == "1":
        print(f"(kept {home.parent} for inspection)", file=sys.stderr)
        return
    shutil.rmtree(home.parent, ignore_errors=True)


def copy_home(src: Path, dst: Path) -> None:
    """Copy a closed relay home (relay.db with its WAL checkpointed) to ``dst``."""
    dst.mkdir(mode=0o700, parents=True)
    for name in os.listdir(src):
        shutil.copy2(src / name, dst / name)


def checkpoint(home: Path) -> None:
    db = sqlite3.connect(home / "relay.db")
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


def has_command(*words: str) -> bool:
    """True when ``relay <words> --help`` exists (for commands other helpers are writing)."""
    p = subprocess.run(
        [*RELAY, *words, "--help"],
        capture_output=True,
        env=base_env("/nonexistent-relay-home"),
        timeout=60,
    )
    return p.returncode == 0


# ---------------------------------------------------------------------------- stats
def median(xs) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs, p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


# ---------------------------------------------------------------------------- machine
def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        cli = subprocess.run(
            ["sqlite3", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.split()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        cli = "not installed"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite3_cli": cli,
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "platform": platform.platform(),
    }


def print_machine(out=sys.stdout) -> dict:
    m = machine()
    print(
        f"machine: {m['nproc']} CPUs, {m['cpu']}, Python {m['python']}, SQLite {m['sqlite']}"
        f" (sqlite3 CLI {m['sqlite3_cli']}), {m['platform']}",
        file=out,
    )
    print(f"date: {m['date']}; load average at start: {m['load_average']}", file=out)
    return m


# ---------------------------------------------------------------------------- checks
def allowed_pairs() -> set[tuple[str | None, str]]:
    from relay_cli.requests.states import TRANSITIONS

    return {(t.from_state, t.to_state) for t in TRANSITIONS}


class Target:
    """One relay database to inspect: relay.db in ``home``, or the PostgreSQL database at
    ``url`` (statements use ``?`` placeholders on both)."""

    def __init__(self, home: Path | str, url: str | None = None) -> None:
        self.home = Path(home)
        self.url = url if url is not None else DATABASE_URL
        self._conn = None

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def rows(self, sql: str, args=()) -> list[tuple]:
        if self.url:
            import psycopg2

            if self._conn is None:
                self._conn = psycopg2.connect(self.url)
                self._conn.autocommit = True
            with self._conn.cursor() as cur:
                cur.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(args))
                got = cur.fetchall() if cur.description else []
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in got]
        if self._conn is None:
            self._conn = sqlite3.connect(self.home / "relay.db")
        return self._conn.execute(sql, args).fetchall()

    def dicts(self, sql: str, args=()) -> list[dict]:
        if self.url:
            self.rows("SELECT 1")  # connected
            with self._conn.cursor() as cur:
                cur.execute(sql.replace("%", "%%").replace("?", "%s"), tuple(args))
                names = [d[0] for d in cur.description]
                return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        if self._conn is None:
            self._conn = sqlite3.connect(self.home / "relay.db")
        cur = self._conn.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def tables(self) -> set[str]:
        if self.url:
            return {
                r[0]
                for r in self.rows(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema()"
                )
            }
        return {r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type='table'")}

    def columns(self, table: str) -> list[str]:
        if self.url:
            return [
                r[0]
                for r in self.rows(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = ? ORDER BY ordinal_position",
                    (table,),
                )
            ]
        return [r[1] for r in self.rows(f"PRAGMA table_info({table})")]

    def integrity(self) -> list[str]:
        """SQLite's integrity_check; PostgreSQL keeps its own files consistent (WAL)."""
        if self.url:
            return ["ok"]
        return [r[0] for r in self.rows("PRAGMA integrity_check")]


def check_db(home: Path, must_exist: set[str] = frozenset(), url: str | None = None) -> list[str]:
    """The crash invariants over one database; returns every violation found."""
    problems: list[str] = []
    db = Target(home, url)
    try:
        ic = db.integrity()
        if ic != ["ok"]:
            problems.append(f"integrity_check: {ic[:5]}")
            return problems
        tables = db.tables()
        dup = db.rows(
            "SELECT lower(id), count(*) FROM requests GROUP BY lower(id) HAVING count(*) > 1"
        )
        if dup:
            problems.append(f"ids with two rows: {dup[:5]}")
        ids = {r[0] for r in db.rows("SELECT id FROM requests")}
        tomb_ids: set[str] = set()
        for t in tables:
            if "tomb" in t:
                cols = db.columns(t)
                col = "id" if "id" in cols else ("request_id" if "request_id" in cols else None)
                if col:
                    rows = {r[0] for r in db.rows(f"SELECT {col} FROM {t}")}
                    both = rows & ids
                    if both:
                        problems.append(f"ids both in requests and {t}: {sorted(both)[:3]}")
                    tomb_ids |= rows
        missing = set(must_exist) - ids - tomb_ids
        if missing:
            problems.append(f"accepted requests missing: {sorted(missing)[:5]} ({len(missing)})")
        problems += check_events(db)
    finally:
        db.close()
    return problems


def check_events(db: Target) -> list[str]:
    """Replay the events table: every chain allowed by states.TRANSITIONS, ending at the
    row's state. Pruned requests whose events were removed are skipped."""
    pairs = allowed_pairs()
    problems = []
    state = {r[0]: (r[1], r[2]) for r in db.rows("SELECT id, state, pruned FROM requests")}
    chains: dict[str, list[tuple]] = {}
    for rid, frm, to in db.rows(
        "SELECT request_id, from_state, to_state FROM events ORDER BY request_id, seq"
    ):
        chains.setdefault(rid, []).append((frm, to))
    for rid, (st, pruned) in state.items():
        chain = chains.get(rid)
        if not chain:
            if not pruned:
                problems.append(f"{rid}: state {st} with no events")
            continue
        cur = None
        for frm, to in chain:
            if frm != cur or (frm, to) not in pairs:
                problems.append(f"{rid}: event {frm}->{to} after {cur} is not allowed")
                break
            cur = to
        else:
            if cur != st:
                problems.append(f"{rid}: events end at {cur} but the row says {st}")
        if len(problems) > 20:
            break
    orphans = set(chains) - set(state)
    if orphans:
        # events of a pruned request may outlive it only if a tombstone keeps the id
        if not any("tomb" in t for t in db.tables()):
            problems.append(f"events of requests that do not exist: {sorted(orphans)[:3]}")
    return problems
