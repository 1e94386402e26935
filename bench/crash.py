"""Crash injection: SIGKILL each mutating relay command at a random moment, then check.

For each command a template home is built once (through the real relay, plus bulk rows
for sweep and prune); every trial copies it, starts the real ``relay`` process, kills it
with SIGKILL after a random delay drawn uniformly from [0, its uninterrupted run time],
then checks the invariants of design.md §1 (``common.check_db``) and the command's own retry
rule. ``python -m bench crash --trials 200`` is the full run.

``--postgres`` runs the same trials on PostgreSQL (design.md §13): each template is built
as a relay.db and moved into a template database with ``relay db copy``; every trial gets
its own database made from that template (``CREATE DATABASE … TEMPLATE``) on a throwaway
server (testsupport/pgserver.py), and the same checks run against it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from testsupport import pgserver

from . import bulk, common
from .common import (
    RELAY,
    Target,
    base_env,
    check_db,
    checkpoint,
    copy_home,
    has_command,
    join,
    new_id,
    print_machine,
    relay,
)

COMMANDS = (
    "send",
    "submit",
    "claim",
    "ack",
    "reply",
    "cancel",
    "fail",
    "reject",
    "sweep",
    "prune",
    "once",
)
TEXT = "crash test: please do the thing described here, exactly once\n"
REPLY = "done, exactly once\n"
REASON = "cannot do it: the crash test says so"
DAY_S = 86400
BULK = 3000


@dataclass
class Spec:
    name: str
    home: Path  # the template
    argv: list[str]
    env: dict = field(default_factory=dict)
    input: str | None = None
    rid: str | None = None  # the request the command is about
    ids: set = field(default_factory=set)  # every request id in the template
    calib: float = 0.0  # uninterrupted wall time (s)
    before: tuple = ()  # _count of the template
    template_db: str | None = None  # PostgreSQL: the template database


PG: pgserver.Server | None = None  # the server of a --postgres run
_TRIAL_DBS = iter(range(1 << 30))


def _count(home: Path) -> tuple:
    with Target(home) as db:
        out = [
            db.rows("SELECT count(*) FROM events")[0][0],
            db.rows("SELECT count(*) FROM requests")[0][0],
            db.rows("SELECT count(*) FROM requests WHERE pruned = 1")[0][0],
        ]
        for t in sorted(db.tables()):
            if t == "ledger" or "tomb" in t:
                out.append(db.rows(f"SELECT count(*) FROM {t}")[0][0])
        return tuple(out)


def _ids(home: Path) -> set[str]:
    with Target(home) as db:
        return {r[0] for r in db.rows("SELECT id FROM requests")}


def _fresh(spec: Spec, d: Path) -> Path:
    """A trial's home (a copy of the template); on PostgreSQL also its own database,
    which every relay call and check of the trial then uses."""
    home = d / "home"
    copy_home(spec.home, home)
    if PG is not None:
        common.DATABASE_URL = PG.create_db(f"trial_{next(_TRIAL_DBS)}", spec.template_db)
    return home


def _discard() -> None:
    if PG is not None and common.DATABASE_URL:
        PG.drop_db(common.DATABASE_URL.split("/")[3].split("?")[0])
        common.DATABASE_URL = None


def build(name: str, root: Path) -> Spec:
    """Make the template home for one command."""
    home = root / f"template-{name}" / "home"
    home.parent.mkdir(parents=True, mode=0o700)
    a = join(home, "a")
    b = join(home, "b")
    rid = new_id()
    env: dict = {"RELAY_RATE_LIMIT": "0"}
    inp = None
    if name == "send":
        argv = ["send", "--to", "b", "--id", rid, "--json", "-"]
        env.update(a)
        inp = TEXT
    elif name == "submit":
        r = relay(home, "prepare", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
        assert r.code == 0, r.err
        argv = ["submit", rid, "--json"]
        env.update(a)
    elif name == "cancel":
        r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
        assert r.code == 0, r.err
        argv = ["cancel", rid, "--json"]
        env.update(a)
    elif name in ("claim", "ack", "reply", "fail", "reject"):
        r = relay(home, "send", "--to", "b", "--id", rid, "--json", "-", input=TEXT, env=a)
        assert r.code == 0, r.err
        if name != "claim":
            r = relay(home, "claim", "--lease", "1h", "--json", env=b)
            assert r.code == 0, r.err
        if name == "reply":
            r = relay(home, "ack", rid, "--json", env=b)
            assert r.code == 0, r.err
        env.update(b)
        argv = {
            # with an attempt id, as the guide says: a retry of it is answered from
            # what that claim took (design.md §6)
            "claim": ["claim", "--json", "--attempt", new_id()],
            "ack": ["ack", rid, "--json"],
            "reply": ["reply", rid, "--json", "-"],
            "fail": ["fail", rid, "--reason", REASON, "--json"],
            "reject": ["reject", rid, "--reason", REASON, "--json"],
        }[name]
        inp = REPLY if name == "reply" else None
    elif name == "sweep":
        now = int(time.time() * 1000)
        bulk.insert(
            home, BULK, now=now, spread_ms=60_000, states=(("queued", 1.0),), queued_ttl_s=60
        )
        env["RELAY_TIME_OFFSET"] = str(2 * DAY_S)
        argv = ["sweep", "--json"]
    elif name == "prune":
        now = int(time.time() * 1000)
        bulk.insert(
            home,
            BULK,
            now=now - 60 * DAY_S * 1000,
            spread_ms=DAY_S * 1000,
            states=tuple((s, w) for s, w in bulk.MIX if s != "queued"),
        )
        argv = ["prune", "--json"]
    elif name == "once":
        argv = ["once", "--key", "crash-key-1", "--json", "--", "sh", "-c", "echo ran >> marker"]
    else:
        raise ValueError(name)
    checkpoint(home)
    spec = Spec(name, home, argv, env, inp, rid, _ids(home), before=_count(home))
    if PG is not None:  # the same content, moved into a template database
        spec.template_db = f"template_{name}"
        url = PG.create_db(spec.template_db)
        r = relay(home, "db", "copy", "--to", url, "--json")
        if r.code != 0:
            raise RuntimeError(f"relay db copy: {r.err[-500:]}")
    return spec


def _start(spec: Spec, home: Path, cwd: Path) -> subprocess.Popen:
    p = subprocess.Popen(
        [*RELAY, *spec.argv],
        env=base_env(home, spec.env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if spec.input is not None:
        try:
            p.stdin.write(spec.input.encode())
        except BrokenPipeError:
            pass
    p.stdin.close()
    p.stdin = None
    return p


def _group_alive(pgid: int) -> bool:
    """Does a process of the group ``pgid`` still run? A zombie has ended (whoever adopted
    it, init in a container, may reap it late), so it does not count."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, _ppid, pgrp = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def _reap_group(pgid: int, limit: float = 5.0) -> None:
    """Let the killed relay's children (the `once` command) finish, then make sure."""
    end = time.monotonic() + limit
    while time.monotonic() < end and _group_alive(pgid):
        time.sleep(0.01)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def calibrate(spec: Spec, root: Path, runs: int = 3) -> float:
    times = []
    for i in range(runs):
        d = root / f"calib-{spec.name}-{i}"
        home = _fresh(spec, d)
        t0 = time.perf_counter()
        p = _start(spec, home, d)
        out, err = p.communicate(timeout=300)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError(f"{spec.name} does not run cleanly: {err.decode()[-500:]}")
        _reap_group(p.pid)
        _discard()
        shutil.rmtree(d)
    spec.calib = max(times)
    return spec.calib


def trial(spec: Spec, root: Path, rng: random.Random, index: int) -> tuple[str, list[str]]:
    """One kill; returns (phase, problems). phase: untouched | committed | finished."""
    d = root / f"{spec.name}-{index}"
    home = _fresh(spec, d)
    try:
        return _trial(spec, d, home, rng)
    finally:
        _discard()


def _trial(spec: Spec, d: Path, home: Path, rng: random.Random) -> tuple[str, list[str]]:
    before = spec.before
    delay = rng.uniform(0, spec.calib)
    p = _start(spec, home, d)
    time.sleep(delay)
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out, err = p.communicate(timeout=60)
    _reap_group(p.pid)
    finished = p.returncode == 0
    problems: list[str] = []
    if p.returncode not in (0, -signal.SIGKILL):
        problems.append(f"exit {p.returncode}: {err.decode()[-300:]}")
    must = set(spec.ids)
    if finished and spec.name in ("send", "submit"):
        must.add(json.loads(out)["id"])
    problems += check_db(home, must)
    phase = "finished" if finished else ("committed" if _count(home) != before else "untouched")
    problems += RETRY[spec.name](spec, home, d, finished)
    problems += check_db(home, must | ({spec.rid} if spec.name in ("send", "submit") else set()))
    if not problems:
        shutil.rmtree(d)
    return phase, problems


# ------------------------------------------------------------------ retry rules
def _rows(home: Path, sql: str, args=()) -> list:
    with Target(home) as db:
        return db.rows(sql, args)


def _retry_send(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
    existed = bool(_rows(home, "SELECT 1 FROM requests WHERE id = ?", (spec.rid,)))
    r = relay(home, *spec.argv, input=spec.input, env=spec.env)
    if r.code != 0:
        return [f"retry of an interrupted {spec.name} failed: exit {r.code} {r.err[-300:]}"]
    doc = r.json
    if doc["duplicate"] != existed:
        return [f"retry said duplicate={doc['duplicate']} but the row existed={existed}"]
    rows = _rows(home, "SELECT state, text FROM requests WHERE id = ?", (spec.rid,))
    if len(rows) != 1 or rows[0][1] != TEXT or rows[0][0] != "queued":
        return [f"after the retry: rows {rows!r}"]
    return []


def _retry_claim(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
    state = _rows(home, "SELECT state FROM requests WHERE id = ?", (spec.rid,))[0][0]
    if state not in ("queued", "delivered"):
        return [f"claim left the request {state}"]
    if state == "queued":
        r = relay(home, *spec.argv, env=spec.env)
        if r.code != 0 or r.json["id"] != spec.rid:
            return [f"claim after an interrupted claim: exit {r.code} {r.err[-200:]}"]
        return []
    # the session holds it unacknowledged: a retry of the same attempt answers that one
    # (design.md §6), as does claim --again with it; a plain claim takes a new request,
    # and there is none
    for argv in (spec.argv, [*spec.argv[:-2], "--again", *spec.argv[-2:]]):
        r = relay(home, *argv, env=spec.env)
        if r.code != 0 or r.json["id"] != spec.rid or r.json["duplicate"] is not True:
            return [f"retry of a claim attempt: exit {r.code} {r.out[-200:]} {r.err[-200:]}"]
    r = relay(home, "claim", "--json", env=spec.env)
    if r.code != 75 or r.error_code != "nothing_to_claim":
        return [f"second claim of a claimed request: exit {r.code} {r.out[-200:]}"]
    return []


def _retry_same(expect_state: str):
    def check(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
        r = relay(home, *spec.argv, input=spec.input, env=spec.env)
        if r.code != 0:
            return [f"retry of {spec.name}: exit {r.code} {r.err[-300:]}"]
        st = _rows(home, "SELECT state FROM requests WHERE id = ?", (spec.rid,))
        if st != [(expect_state,)]:
            return [f"after retrying {spec.name}: {st}"]
        return []

    return check


def _retry_final(expect_state: str, reason: str, detail: str | None):
    """cancel, fail, reject: the same call again is answered from what is stored
    (``duplicate: true`` when the first one committed, design.md §6), the request is in the
    state the call leads to with the detail it gave, and exactly one event led there."""

    def check(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
        before = _rows(home, "SELECT state FROM requests WHERE id = ?", (spec.rid,))[0][0]
        r = relay(home, *spec.argv, input=spec.input, env=spec.env)
        if r.code != 0:
            return [f"retry of {spec.name}: exit {r.code} {r.err[-300:]}"]
        if r.json["duplicate"] != (before == expect_state):
            return [f"retry said duplicate={r.json['duplicate']} after {before}"]
        rows = _rows(home, "SELECT state, reason, detail FROM requests WHERE id = ?", (spec.rid,))
        if rows != [(expect_state, reason, detail)]:
            return [f"after retrying {spec.name}: {rows}"]
        led = _rows(
            home,
            "SELECT count(*) FROM events WHERE request_id = ? AND to_state = ?",
            (spec.rid, expect_state),
        )[0][0]
        if led != 1:
            return [f"{led} events led to {expect_state}"]
        return []

    return check


def _retry_sweep(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
    r = relay(home, *spec.argv, env=spec.env)
    if r.code != 0:
        return [f"sweep after an interrupted sweep: exit {r.code} {r.err[-300:]}"]
    left = _rows(home, "SELECT count(*) FROM requests WHERE state = 'queued'")[0][0]
    total = _rows(home, "SELECT count(*) FROM requests WHERE state = 'expired'")[0][0]
    if left or total != len(spec.ids):
        return [f"after two sweeps: {left} queued, {total} expired of {len(spec.ids)}"]
    return []


def _retry_prune(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
    r = relay(home, *spec.argv, env=spec.env)
    if r.code != 0:
        return [f"prune after an interrupted prune: exit {r.code} {r.err[-300:]}"]
    # every pruned request still answers show from its tombstone
    problems = []
    for rid in random.Random(0).sample(sorted(spec.ids), 1):
        s = relay(home, "show", rid, "--json")
        if s.code != 0:
            problems.append(f"show {rid} after prune: exit {s.code} {s.err[-200:]}")
    return problems


def _retry_once(spec: Spec, home: Path, d: Path, finished: bool) -> list[str]:
    marker = d / "marker"
    ran = len(marker.read_text().splitlines()) if marker.exists() else 0
    with Target(home) as db:
        found = db.dicts("SELECT * FROM ledger")
    row = found[0] if found else None
    problems = []
    state = row["state"] if row else None
    ONCE_STATES[state or "no entry"] += 1
    if ran and row is None:
        problems.append("the command ran but no ledger entry was committed before it")
    if ran > 1:
        problems.append(f"the command ran {ran} times")
    keys = row.keys() if row else []
    if state == "succeeded" and (
        "exit_code" in keys
        and row["exit_code"] != 0
        or "finished_at" in keys
        and row["finished_at"] is None
    ):
        problems.append(f"succeeded without an outcome: {dict(row)}")
    if state not in (None, "running", "succeeded"):
        problems.append(f"ledger state {state!r} after a kill")
    p = subprocess.run(
        [*RELAY, *spec.argv], env=base_env(home, spec.env), cwd=d, capture_output=True, timeout=60
    )
    after = len(marker.read_text().splitlines()) if marker.exists() else 0
    err = p.stderr.decode()
    if state == "running" and row["child_pid"] is None:
        # no command pid committed: the command never began executing (design.md §10),
        # so the next call runs it, once
        if ran != 0:
            problems.append("the command ran although its pid was never committed")
        if p.returncode != 0 or after != 1:
            problems.append(
                f"never-started entry, next call: exit {p.returncode}, ran {after} {err[-200:]}"
            )
    elif state == "running":
        if p.returncode != 11 or "effect_unknown" not in err:
            problems.append(f"running entry, next call: exit {p.returncode} {err[-200:]}")
        if after != ran:
            problems.append("a running entry was run again")
    elif state == "succeeded":
        if p.returncode != 0 or after != ran:
            problems.append(f"replay of a succeeded entry: exit {p.returncode}, ran {after}")
    else:
        if p.returncode != 0 or after != 1:
            problems.append(f"first real run: exit {p.returncode}, ran {after} {err[-200:]}")
    return problems


ONCE_STATES: Counter = Counter()  # ledger state found after each `once` kill

RETRY = {
    "send": _retry_send,
    "submit": _retry_send,
    "claim": _retry_claim,
    "ack": _retry_same("acknowledged"),
    "reply": _retry_same("completed"),
    "cancel": _retry_final("cancelled", "cancelled_by_sender", None),
    "fail": _retry_final("failed", "failed_by_recipient", REASON),
    "reject": _retry_final("rejected", "rejected_by_recipient", REASON),
    "sweep": _retry_sweep,
    "prune": _retry_prune,
    "once": _retry_once,
}


def available(name: str) -> bool:
    return has_command(name)


def run(
    commands=COMMANDS,
    trials: int = 200,
    seed: int | None = None,
    root: Path | None = None,
    log=print,
    calib_runs: int = 3,
    postgres: bool = False,
) -> dict:
    """Run the harness; returns {command: {"trials", "phases", "problems", "skipped"}}."""
    global PG
    if postgres:
        PG = pgserver.start(fsync=True)
        try:
            return run(commands, trials, seed, root, log, calib_runs)
        finally:
            PG.remove()
            PG = None
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    own = root is None
    root = Path(tempfile.mkdtemp(prefix="relay-crash-")) if own else root
    results: dict = {"_seed": seed}
    try:
        for name in commands:
            if not available(name):
                results[name] = {"skipped": f"`relay {name}` does not exist yet"}
                log(f"{name:7} SKIPPED: `relay {name}` does not exist yet")
                continue
            spec = build(name, root)
            calibrate(spec, root, calib_runs)
            phases: Counter = Counter()
            problems: list[str] = []
            t0 = time.perf_counter()
            for i in range(trials):
                phase, bad = trial(spec, root, rng, i)
                phases[phase] += 1
                problems += [f"trial {i}: {b}" for b in bad]
            results[name] = {
                "trials": trials,
                "phases": dict(phases),
                "problems": problems,
                "window_ms": round(spec.calib * 1000),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            log(
                f"{name:7} {trials} kills in [0, {spec.calib * 1000:.0f} ms]: "
                f"{phases['untouched']} before any commit, {phases['committed']} after a "
                f"commit, {phases['finished']} finished; violations: {len(problems)}"
            )
            if name == "once":
                results[name]["ledger_after_kill"] = dict(ONCE_STATES)
                log(f"        ledger entry found after the kill: {dict(ONCE_STATES)}")
            for p in problems[:10]:
                log(f"        {p}")
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench crash")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--only", action="append", choices=COMMANDS)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--postgres",
        action="store_true",
        help="run on a throwaway PostgreSQL server instead of relay.db",
    )
    a = ap.parse_args(argv)
    print_machine()
    if a.postgres:
        print("backend: PostgreSQL (a database per trial, fsync on)")
    res = run(a.only or COMMANDS, a.trials, a.seed, postgres=a.postgres)
    print(f"seed: {res['_seed']}")
    if a.json:
        print(json.dumps(res, indent=2))
    bad = sum(len(v.get("problems", [])) for k, v in res.items() if not k.startswith("_"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
