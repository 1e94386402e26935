"""Faults on the network between relay hosts and PostgreSQL (design.md §13).

The server runs in its own network namespace, the workers on two "hosts" (namespaces
joined to it by veth links, testsupport/netns.py); host-b's system clock is 15 minutes behind
(libfaketime preloaded, when installed). One fault kind at a time is put on the path:

- ``cut``: a TCP proxy in each host's namespace forwards relay's connections to the server
  and, for a seeded random share of them, cuts the connection (RST both ways) after a
  random number of bytes in one direction, chosen uniformly up to the bytes a connection
  usually carries in that direction: before login, mid-transaction, or after; and, for
  another share, exactly after the 1st, 2nd or 3rd COMMIT reached the server: the
  transaction committed, its answer is lost (the narrowest window, hit on purpose).
- ``loss``: the same proxy emulates lost segments as TCP experiences them: a lost segment's
  bytes arrive after a retransmission timeout (200 ms, doubling while losses repeat), a lost
  SYN delays the connection by 1 s. (``tc netem`` would drop real packets, but the kernel
  must have sch_netem: ``netem_available()`` checks, and this kernel's answer is printed.)
- ``delay``: the proxy delays every chunk by a random time (exponential, mean 40 ms, with
  rare spikes of 1–3 s).
- ``partition``: no proxy; the server's end of one host's veth is set down for several
  seconds and up again (the host's packets vanish; its TCP connections time out or
  resume), again and again while the workers run.

Concurrent workers (half on each host) run full cycles: ``send --id``, ``claim``, ``ack``,
``reply``, ``wait``, and ``once --key`` whose command appends a line to a per-key file.
Every failure is retried as the agent guide says: the same command with the same id or key,
for ``database_unavailable`` and ``busy`` (75). Every call is recorded (argv, host, exit
code, stderr, duration). The checker then proves: one row per id and only ids that were
sent; every state explained by its events; every send, ack, reply and once that returned 0
is in the database; every failure a JSON error of relay's with its documented exit code,
never a traceback or ``internal_error``, and ``database_unavailable`` within the bound
below; every claim made with an attempt id and retried is answered with the request the
server stored for that attempt (``duplicate: true`` when an earlier try stored it), and an
attempt with a stored claim is never left unanswered; no ``once`` command ran twice; every timestamp relay wrote (requests, events,
ledger) is on the server's clock, also those written from the skewed host.

``python -m bench netfault [--kind cut|loss|delay|partition|all] [--workers N]
[--cycles N] [--seed S]``; ``python -m bench.netfault proxy …`` is the proxy itself.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from testsupport import netns, pgserver

from . import common

KINDS = ("cut", "loss", "delay", "partition")
SKEW_S = -900  # host-b's system clock: 15 minutes behind (leases are 10 minutes)
LEASE = "10m"
RETRYABLE = ("database_unavailable", "busy")
CONNECT_S = 5  # design.md §13: connecting gives up after 5 s
# The longest a failing non-waiting call may take to answer database_unavailable or busy
# (design.md §13): one statement's client-side deadline (15 s; connecting gives up after
# 5 s, the write lock after 5 s) + 5 s for starting Python on a loaded 2-core machine.
# Anything slower is counted as a slow answer; a call still running after CALL_LIMIT_S is
# killed and counted as no answer (untyped).
FAIL_BOUND_S = 20.0
CALL_LIMIT_S = 120.0  # the bench kills a call still running after this: "no answer"
CLOCK_TOLERANCE_MS = 5000
# RELAY_DEBUG=1: an internal_error carries its traceback into the record of the call.
# FAKETIME_DONT_FAKE_MONOTONIC is left unset on purpose (netns.faketime_env).
ENV = {"RELAY_RATE_LIMIT": "0", "FAKETIME_DONT_FAKE_MONOTONIC": None, "RELAY_DEBUG": "1"}

# --------------------------------------------------------------------------- the proxy


class Proxy:
    """A TCP proxy listening on 127.0.0.1:``port`` (in the namespace it runs in) that forwards
    to ``target`` with the fault its control socket sets. Every connection's faults are drawn
    from random.Random(seed, connection number), so a run is reproducible from its seed and
    the order of connections."""

    def __init__(self, port: int, target: tuple[str, int], seed: int, ctl: str, log: str) -> None:
        self.port, self.target, self.seed, self.ctl = port, target, seed, ctl
        self.mode, self.params = "pass", {}
        self.stats: Counter = Counter()
        self.sizes = {"up": [], "down": []}  # bytes of connections that ended by themselves
        self.n = 0
        self.lock = threading.Lock()
        self.log = open(log, "a", buffering=1)  # noqa: SIM115 - lives as long as the proxy

    def note(self, line: str) -> None:
        with self.lock:
            self.log.write(f"{time.time():.3f} {line}\n")

    def serve(self) -> None:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(512)
        threading.Thread(target=self.control, daemon=True).start()
        print("ready", flush=True)
        while True:
            c, _ = ls.accept()
            with self.lock:
                self.n += 1
                n, mode, params = self.n, self.mode, dict(self.params)
            threading.Thread(target=self.handle, args=(c, n, mode, params), daemon=True).start()

    def control(self) -> None:
        try:
            os.unlink(self.ctl)
        except OSError:
            pass
        cs = socket.socket(socket.AF_UNIX)
        cs.bind(self.ctl)
        cs.listen(8)
        while True:
            c, _ = cs.accept()
            with c, c.makefile("rw") as f:
                msg = json.loads(f.readline())
                with self.lock:
                    if "mode" in msg:
                        self.mode, self.params = msg["mode"], msg.get("params", {})
                    if msg.get("reset"):
                        self.stats = Counter()
                    out = dict(self.stats)
                f.write(json.dumps(out) + "\n")
                f.flush()

    def _typical(self, direction: str) -> int:
        with self.lock:
            s = sorted(self.sizes[direction][-200:])
        return s[len(s) // 2] if len(s) >= 5 else (1500 if direction == "up" else 3000)

    def handle(self, c: socket.socket, n: int, mode: str, params: dict) -> None:
        rng = random.Random(self.seed * 1_000_003 + n)
        self.stats["connections"] += 1
        plan: dict = {}
        if mode == "cut" and "at" in params:  # a sweep: every connection at that byte
            plan = {"cut": params["dir"], "at": params["at"]}
        elif mode == "cut" and rng.random() < params.get("p", 0.3):
            d = rng.choice(("up", "down"))
            plan = {"cut": d, "at": rng.randint(0, self._typical(d))}
        elif mode == "cut" and rng.random() < params.get("p_commit", 0.0):
            # the narrowest window, on purpose: the k-th COMMIT reaches the server (it
            # commits) and its answer is lost
            plan = {"commit": rng.randint(1, 3)}
        if mode == "loss":
            syn = 1.0  # Linux resends a SYN after 1 s, then 2 s, 4 s ...
            while rng.random() < params.get("p_syn", 0.05) and syn < 8:
                self.stats["lost_syn"] += 1
                time.sleep(syn)
                syn *= 2
        try:
            u = socket.create_connection(self.target, timeout=10)
            u.settimeout(None)
        except OSError as e:
            self.stats["upstream_failed"] += 1
            self.note(f"conn {n}: upstream {e}")
            c.close()
            return
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"closed": False, "up": 0, "down": 0, "cut": False, "commits": 0}
        lock = threading.Lock()

        def close(abort: bool) -> None:
            with lock:
                if state["closed"]:
                    return
                state["closed"] = True
            for s in (c, u):
                # SHUT_RD wakes the other pump, blocked in recv() on this socket (close()
                # alone would not release the socket while it is blocked there)
                try:
                    if abort:  # RST, as a dropped connection looks to both ends
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        s.shutdown(socket.SHUT_RD)
                    else:
                        s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        def pump(src: socket.socket, dst: socket.socket, d: str) -> None:
            prng = random.Random(rng.random())
            losses = 0
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if mode == "delay":
                        wait = min(prng.expovariate(1 / params.get("mean", 0.04)), 1.0)
                        if prng.random() < params.get("p_spike", 0.01):
                            wait = prng.uniform(1.0, 3.0)
                            self.stats["delay_spikes"] += 1
                        self.stats["delayed_chunks"] += 1
                        time.sleep(wait)
                    elif mode == "loss":
                        rto = 0.2
                        stall = 0.0
                        while prng.random() < params.get("p", 0.05) and rto < 7:
                            stall += rto
                            rto *= 2
                        if stall:
                            losses += 1
                            self.stats["lost_segments"] += 1
                            time.sleep(stall)
                    if d == "up" and data[:1] == b"Q":  # a simple query: for the log
                        state["query"] = data[5:205].decode("utf-8", "replace")
                    if d == "up" and plan.get("commit") and b"COMMIT" in data:
                        state["commits"] += 1  # (before the server can answer it)
                    elif d == "down" and plan.get("commit") == state["commits"]:
                        state["cut"] = True
                        self.stats["cut_commit_answer"] += 1
                        self.note(
                            f"conn {n}: COMMIT {state['commits']} reached the server, "
                            f"its answer ({len(data)} bytes) was dropped"
                        )
                        close(abort=True)
                        return
                    if plan.get("cut") == d and state[d] + len(data) > plan["at"]:
                        keep = plan["at"] - state[d]
                        if keep > 0:
                            dst.sendall(data[:keep])
                        state[d] += max(keep, 0)
                        state["cut"] = True
                        self.stats[f"cut_{d}"] += 1
                        self.note(
                            f"conn {n}: cut {d} after {state[d]} bytes "
                            f"(up {state['up']}, down {state['down']}); the last "
                            f"query sent: {state.get('query', '')!r}"
                        )
                        close(abort=True)
                        return
                    dst.sendall(data)
                    state[d] += len(data)
            except OSError:
                pass
            close(abort=False)

        t = threading.Thread(target=pump, args=(u, c, "down"), daemon=True)
        t.start()
        pump(c, u, "up")
        t.join()
        if not state["cut"]:
            with self.lock:
                for d in ("up", "down"):
                    self.sizes[d].append(state[d])


def proxy_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.netfault proxy")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args(argv)
    host, port = a.target.rsplit(":", 1)
    Proxy(a.port, (host, int(port)), a.seed, a.ctl, a.log).serve()
    return 0


def ctl(path: str, msg: dict) -> dict:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        with s.makefile("rw") as f:
            f.write(json.dumps(msg) + "\n")
            f.flush()
            return json.loads(f.readline())


# --------------------------------------------------------------------------- netem


def netem_available() -> str | None:
    """None when ``tc qdisc … netem`` works here, else why not (e.g. a kernel without
    sch_netem: "Specified qdisc kind is unknown")."""
    if shutil.which("tc") is None:
        return "`tc` (iproute2) is not installed"
    ns = f"relay-netem-probe-{os.getpid()}"
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        subprocess.run(
            ["ip", "-n", ns, "link", "add", "nfa", "type", "veth", "peer", "name", "nfb"],
            check=True,
            capture_output=True,
        )
        p = subprocess.run(
            ["tc", "-n", ns, "qdisc", "add", "dev", "nfa", "root", "netem", "delay", "10ms"],
            capture_output=True,
            text=True,
        )
        return None if p.returncode == 0 else (p.stderr.strip() or f"tc exit {p.returncode}")
    except (OSError, subprocess.CalledProcessError) as e:
        return str(e)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# --------------------------------------------------------------------------- calls


@dataclass
class Call:
    worker: int
    host: str
    argv: list[str]
    start: float  # time.time()
    seconds: float
    code: int | None  # None: killed by the bench after CALL_LIMIT_S
    stdout: str
    stderr: str
    retry_of: int | None = None  # index of the first attempt of the same command

    @property
    def error(self) -> dict | None:
        for line in self.stderr.splitlines():
            if line.startswith('{"error"'):
                try:
                    return json.loads(line)["error"]
                except (ValueError, KeyError):
                    return None
        return None

    @property
    def error_code(self) -> str | None:
        e = self.error
        return e.get("code") if e else None

    @property
    def json(self) -> dict:
        return json.loads(self.stdout)


@dataclass
class Host:
    name: str
    prefix: list[str]
    url: str
    home: Path
    env: dict = field(default_factory=dict)  # e.g. libfaketime's, for a skewed clock


@dataclass
class Run:
    kind: str
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: dict = field(default_factory=dict)  # id -> (worker, text)
    claimed: dict = field(default_factory=dict)  # id -> worker whose claim returned it
    acked: set = field(default_factory=set)
    replied: dict = field(default_factory=dict)  # id -> reply text
    once_ok: set = field(default_factory=set)
    once_answers: dict = field(default_factory=dict)  # key -> last (code, error code)
    keys: list = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    t0: float = 0.0
    t1: float = 0.0


def run_call(
    run: Run,
    w: int,
    host: Host,
    env: dict,
    args: list[str],
    input: str | None,
    retry_of: int | None = None,
) -> tuple[int, Call]:
    argv = [*host.prefix, *common.RELAY, *args]
    e = common.base_env(host.home, {**ENV, **host.env, **env, "RELAY_DATABASE_URL": host.url})
    t0, wall = time.perf_counter(), time.time()
    p = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=e,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(
            input.encode() if input is not None else None, timeout=CALL_LIMIT_S
        )
        code = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        code = None
    c = Call(
        w,
        host.name,
        args,
        wall,
        time.perf_counter() - t0,
        code,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        retry_of,
    )
    with run.lock:
        run.calls.append(c)
        return len(run.calls) - 1, c


def retried(
    run: Run,
    w: int,
    host: Host,
    env: dict,
    args: list[str],
    input: str | None = None,
    also: tuple[str, ...] = (),
    limit_s: float = 150.0,
) -> Call:
    """The same command until it is not a retryable failure (design.md §7: same id, same key),
    pausing 1 s between attempts (the hint says retry_after_seconds, 5 s; the bench is
    more impatient, which only makes more retries)."""
    first, c = run_call(run, w, host, env, args, input)
    end = time.monotonic() + limit_s
    while c.code and c.error_code in RETRYABLE + also and time.monotonic() < end:
        time.sleep(1.0)
        _, c = run_call(run, w, host, env, args, input, retry_of=first)
    return c


def claimed(
    run: Run, w: int, host: Host, env: dict, args: list[str], limit_s: float = 150.0
) -> Call:
    """A claim, retried the way the agent guide says (design.md §6): with an attempt id
    made once, so a retry after a retryable failure whose answer may have been lost is
    answered from what that attempt took (``duplicate: true``) and takes nothing new."""
    args = [*args, "--attempt", str(uuid.uuid4())]
    first, c = run_call(run, w, host, env, args, None)
    end = time.monotonic() + limit_s
    while c.code and c.error_code in RETRYABLE and time.monotonic() < end:
        time.sleep(1.0)
        _, c = run_call(run, w, host, env, args, None, retry_of=first)
    return c


# --------------------------------------------------------------------------- workers


def worker(
    run: Run,
    w: int,
    workers: int,
    host: Host,
    env: dict,
    cycles: int,
    keydir: Path,
    seed: int,
    stop_at: float,
) -> None:
    to = f"w{(w + 1) % workers}"
    for k in range(cycles):
        if time.monotonic() > stop_at:
            break
        rid = str(uuid.uuid4())
        text = f"cycle {k} from w{w}: {rid}"
        c = retried(run, w, host, env, ["send", "--to", to, "--id", rid, "--json", "-"], text)
        if c.code == 0:
            with run.lock:
                run.sent[rid] = (w, text)
        got = None
        for _ in range(3):  # claim what w-1 sent this round
            c = claimed(run, w, host, env, ["claim", "--wait", "15", "--lease", LEASE, "--json"])
            if c.code == 0:
                got = c.json
                with run.lock:
                    run.claimed[got["id"]] = w
                break
            if c.error_code != "nothing_to_claim":
                break
        if got is not None:
            if retried(run, w, host, env, ["ack", got["id"], "--json"]).code == 0:
                with run.lock:
                    run.acked.add(got["id"])
            reply = f"done: {got['text']}"
            if retried(run, w, host, env, ["reply", got["id"], "--json", "-"], reply).code == 0:
                with run.lock:
                    run.replied[got["id"]] = reply
        if rid in run.sent:
            retried(
                run,
                w,
                host,
                env,
                ["wait", rid, "--timeout", "15", "--json"],
                also=("timeout",),
                limit_s=30,
            )
        key = f"nf-{run.kind}-{seed}-w{w}-c{k}"
        marker = keydir / key
        with run.lock:
            run.keys.append(key)
        c = retried(
            run,
            w,
            host,
            env,
            ["once", "--key", key, "--json", "--", "sh", "-c", f"echo ran >> {marker}"],
            also=("in_progress",),
        )
        with run.lock:
            run.once_answers[key] = (c.code, c.error_code)
            if c.code == 0:
                run.once_ok.add(key)


# --------------------------------------------------------------------------- faults


def partitioner(
    run: Run,
    net: netns.Net,
    rng: random.Random,
    done: threading.Event,
    down_s=(2.0, 7.0),
    gap_s=(1.0, 4.0),
) -> None:
    names = list(net.hosts)
    i = 0
    # the first cut comes while the first cycles run (a short run, as the tests make, may
    # be over before a full gap has passed, and then it was never partitioned at all)
    first = (0.2, 0.5)
    while not done.wait(rng.uniform(*(gap_s if i else first))):
        host = names[i % len(names)]
        i += 1
        dev = f"rs{net.index[host]}-{net.tag}"
        secs = rng.uniform(*down_s)
        subprocess.run(["ip", "-n", net.server_ns, "link", "set", dev, "down"], check=True)
        t0 = time.time()
        try:
            done.wait(secs)
        finally:
            subprocess.run(["ip", "-n", net.server_ns, "link", "set", dev, "up"], check=True)
        with run.lock:
            run.faults["partitions"] += 1
            run.faults["partition_ms"] += int((time.time() - t0) * 1000)
        print(f"  partition: {host} cut off for {time.time() - t0:.1f} s", flush=True)


FAULT_PARAMS = {
    "cut": {"p": 0.25, "p_commit": 0.25},
    "loss": {"p": 0.05, "p_syn": 0.1},
    "delay": {"mean": 0.04, "p_spike": 0.01},
}


# --------------------------------------------------------------------------- the checker


STORED_TOLERANCE_MS = 1000  # the server's clock against the bench's, same machine


def storing_attempt(calls: list[Call], argv: list[str], created_ms: int) -> int | None:
    """Which attempt of the command ``argv`` stored a row created at ``created_ms`` (the
    server's clock): the index of the attempt whose run holds that moment, or is nearest
    to it within ``STORED_TOLERANCE_MS``; None when none is. A worker runs its attempts
    one after another, so their runs do not overlap."""
    best, best_gap = None, STORED_TOLERANCE_MS
    for i, x in enumerate(calls):
        if x.argv != argv:
            continue
        lo, hi = x.start * 1000, (x.start + x.seconds) * 1000
        gap = 0 if lo <= created_ms <= hi else min(abs(created_ms - lo), abs(created_ms - hi))
        if gap <= best_gap:
            best, best_gap = i, gap
    return best


def check(run: Run, url: str, keydir: Path) -> dict:
    """Every violation of the promise, by kind; and the figures."""
    v: dict[str, list[str]] = {
        k: []
        for k in (
            "lost",
            "duplicated",
            "unexplained_state",
            "double_runs",
            "untyped",
            "slow_failure",
            "skewed_clock",
            "stranded",
            "once_false_unknown",
            "once_not_recorded",
            "false_nothing_changed",
            "claim_attempt",
        )
    }
    from relay_cli.core.errors import ERRORS

    with common.Target(Path("/nonexistent"), url) as db:
        rows = {r["id"]: r for r in db.dicts("SELECT * FROM requests")}
        events = db.dicts("SELECT * FROM events ORDER BY seq")
        ledger = {r["key"]: r for r in db.dicts("SELECT * FROM ledger")}
        per_id = db.rows(
            "SELECT lower(id), count(*) FROM requests GROUP BY lower(id) HAVING count(*) > 1"
        )
        stored_attempts = {
            r["attempt"]: r["request_id"]
            for r in db.dicts("SELECT attempt, request_id FROM claims WHERE attempt IS NOT NULL")
        }
    # one request per id, and only ids that were sent
    attempted = {c.argv[4] for c in run.calls if c.argv[0] == "send"}
    if per_id:
        v["duplicated"].append(f"ids with two rows: {per_id[:5]}")
    extra = set(rows) - attempted
    if extra:
        v["duplicated"].append(f"requests nobody sent: {sorted(extra)[:5]} ({len(extra)})")
    # acknowledged writes
    for rid in run.sent:
        if rid not in rows:
            v["lost"].append(f"send {rid} returned 0 but the request does not exist")
    for rid in run.acked:
        if rows.get(rid, {}).get("state") not in ("acknowledged", "completed"):
            v["lost"].append(f"ack {rid} returned 0; state {rows.get(rid, {}).get('state')}")
    for rid, reply in run.replied.items():
        r = rows.get(rid, {})
        if r.get("state") != "completed" or r.get("reply") != reply:
            v["lost"].append(f"reply {rid} returned 0; state {r.get('state')}")
    for key in run.once_ok:
        e = ledger.get(key)
        if e is None or e["state"] != "succeeded":
            v["lost"].append(f"once {key} returned 0; ledger {e and e['state']}")
    # states explained by their events
    pairs = common.allowed_pairs()
    chains: dict[str, list] = {}
    for e in events:
        chains.setdefault(e["request_id"], []).append(e)
    for rid, r in rows.items():
        cur = None
        for e in chains.get(rid, []):
            if e["from_state"] != cur or (e["from_state"], e["to_state"]) not in pairs:
                v["unexplained_state"].append(
                    f"{rid}: {e['from_state']}->{e['to_state']} after {cur}"
                )
                break
            cur = e["to_state"]
        if cur != r["state"]:
            v["unexplained_state"].append(f"{rid}: events end at {cur}, row says {r['state']}")
    # a request delivered to a session whose claim never returned it
    for rid, r in rows.items():
        if r["state"] in ("delivered", "acknowledged") and rid not in run.claimed:
            v["stranded"].append(
                f"{rid} is {r['state']} (claim_session {r['claim_session']}) "
                f"but no claim returned it to its worker"
            )
        if r["state"] == "delivery_unknown":
            v["stranded"].append(f"{rid} became delivery_unknown ({r['reason']})")
    # typed failures, in time
    for i, c in enumerate(run.calls):
        if c.code == 0:
            continue
        what = f"call {i} on {c.host}: relay {' '.join(c.argv)} -> exit {c.code}"
        err = c.error
        waits = c.argv[0] == "wait" or "--wait" in c.argv
        if c.code is None:
            v["untyped"].append(f"{what}: no answer within {CALL_LIMIT_S:.0f} s")
            continue
        if "Traceback" in c.stderr or err is None:
            v["untyped"].append(f"{what}: {c.stderr.strip()[-300:]!r}")
            continue
        code = err.get("code")
        spec = ERRORS.get(code)
        exits = {spec.exit_code, *(s for s, _ in spec.also_exits)} if spec else set()
        if spec is None or code == "internal_error" or c.code not in exits:
            v["untyped"].append(f"{what}: {code}: {err.get('message')}")
            continue
        if code in RETRYABLE and not waits and c.seconds > FAIL_BOUND_S:
            v["slow_failure"].append(f"{what} ({code}) after {c.seconds:.1f} s")
    # "nothing was changed" said by the very attempt of a send that stored its request.
    # (Not "the next attempt was answered duplicate: true": an earlier attempt whose
    # answer was lost may have stored it, and then the later one truly changed nothing.)
    for i, c in enumerate(run.calls):
        if c.argv[0] != "send" or not c.code or "nothing was changed" not in c.stderr:
            continue
        row = rows.get(c.argv[4])
        if row is None:
            continue  # nothing was stored by any attempt
        by = storing_attempt(run.calls, c.argv, row["created_at"])
        if by == i:
            v["false_nothing_changed"].append(
                f"call {i} on {c.host}: send {c.argv[4]} said 'nothing was changed' "
                f"({c.error_code}), but the request was created while it ran "
                f"(created_at {row['created_at']})"
            )
    # claim attempts (design.md §6): a claim made with an attempt id and retried after a
    # failure whose answer may have been lost is answered from what that attempt took.
    # The last answer a worker got for an attempt id must name the request the server
    # stored for it, `duplicate: true` exactly when an earlier try had stored it; an
    # attempt with no stored claim took nothing.
    tries: dict[str, list[Call]] = {}
    for c in run.calls:
        if c.argv[0] == "claim" and "--attempt" in c.argv:
            tries.setdefault(c.argv[c.argv.index("--attempt") + 1], []).append(c)
    attempts = Counter()
    for attempt, cs in tries.items():
        last, stored = cs[-1], stored_attempts.get(attempt)
        retried = len(cs) > 1
        attempts["retried"] += retried
        if last.code == 0:
            got = last.json
            dup = got.get("duplicate")
            attempts["recovered" if retried and dup else "took"] += 1
            if stored != got["id"]:
                v["claim_attempt"].append(
                    f"attempt {attempt}: answered {got['id']}, the server stored {stored}"
                )
            elif dup and not retried:
                v["claim_attempt"].append(f"attempt {attempt}: duplicate on its first try")
        elif stored is not None and last.code is not None:
            v["claim_attempt"].append(
                f"attempt {attempt}: the server stored a claim of {stored}, but the last "
                f"answer was exit {last.code} {last.error_code}"
            )
        elif last.code is not None:
            attempts["took_nothing"] += 1
    # once: never twice; effect_unknown only when it may have run
    for key in run.keys:
        f = keydir / key
        n = len(f.read_text().splitlines()) if f.exists() else 0
        if n > 1:
            v["double_runs"].append(f"once {key}: the command ran {n} times")
        code, err = run.once_answers.get(key, (None, None))
        if code == 0 and n != 1:
            v["lost"].append(f"once {key} returned 0 but its command ran {n} times")
        if err == "effect_unknown" and n == 0:
            v["once_false_unknown"].append(f"once {key}: effect_unknown, the command never ran")
        e = ledger.get(key)
        if n == 1 and code not in (0, None) and e is not None and e["state"] == "succeeded":
            v["once_not_recorded"].append(
                f"once {key}: ran and is succeeded in the ledger, "
                f"but the last answer was exit {code} {err}"
            )
    # every time relay wrote is the server's (the skewed host's too)
    lo, hi = (run.t0 * 1000 - CLOCK_TOLERANCE_MS, run.t1 * 1000 + CLOCK_TOLERANCE_MS)

    def when(what: str, ms) -> None:
        if ms is not None and not lo <= ms <= hi:
            v["skewed_clock"].append(
                f"{what} = {ms} is {(ms - time.time() * 1000) / 1000:+.0f} s "
                f"from now, outside the run"
            )

    for rid, r in rows.items():
        for col in ("created_at", "updated_at", "delivered_at", "acknowledged_at", "finished_at"):
            when(f"{rid}.{col}", r[col])
        if r["delivered_at"] and r["lease_expires_at"] is not None and r["state"] == "delivered":
            got = r["lease_expires_at"] - r["delivered_at"]
            if abs(got - 600_000) > CLOCK_TOLERANCE_MS:
                v["skewed_clock"].append(f"{rid}: lease of {got} ms, not 10 min")
    for e in events:
        when(f"event {e['seq']} of {e['request_id']}", e["at"])
    for key, e in ledger.items():
        for col in ("created_at", "updated_at", "started_at", "finished_at"):
            when(f"ledger {key}.{col}", e[col])
    finals = Counter(r["state"] for r in rows.values())
    fails = Counter(c.error_code or f"exit {c.code}" for c in run.calls if c.code)
    return {
        "violations": v,
        "states": dict(finals),
        "failures": dict(fails),
        "claim_attempts": dict(attempts),
    }


# --------------------------------------------------------------------------- one kind


def run_kind(
    kind: str,
    net: netns.Net,
    server: pgserver.Server,
    root: Path,
    workers: int,
    cycles: int,
    seed: int,
    time_s: float,
    proxies: dict,
    skewed: bool,
    log=print,
) -> dict:
    server.execute("DROP DATABASE IF EXISTS relay WITH (FORCE)")
    server.execute("CREATE DATABASE relay")
    sock_url = server.url("relay")
    d = root / kind
    keydir = d / "keys"
    keydir.mkdir(parents=True)
    hosts = {}
    for h in net.hosts:
        if kind == "partition":
            url = f"postgresql://postgres@{net.server_addr(h)}:{server.port}/relay"
        else:
            url = f"postgresql://postgres@127.0.0.1:{proxies[h]['port']}/relay"
        skew = netns.faketime_env(SKEW_S) if (skewed and h == "host-b") else None
        (d / h).mkdir(mode=0o700)
        hosts[h] = Host(h, net.prefix(h), url, d / h / "home", skew or {})
    names = list(hosts)
    # the skew the hosts' programs really see (a check that the fake clock is in place)
    skews = {}
    for h, host in hosts.items():
        p = subprocess.run(
            [*host.prefix, sys.executable, "-c", "import time; print(time.time())"],
            capture_output=True,
            text=True,
            timeout=60,
            env=common.base_env(host.home, {**ENV, **host.env}),
        )
        skews[h] = round(float(p.stdout.strip() or "nan") - time.time())
    envs = []
    old = common.DATABASE_URL
    common.DATABASE_URL = sock_url  # set-up over the unix socket, without faults
    try:
        for w in range(workers):
            envs.append(common.join(hosts[names[w % 2]].home, f"w{w}", "1h"))
    finally:
        common.DATABASE_URL = old
    run = Run(kind)
    rng = random.Random(seed)
    done = threading.Event()
    side = None
    for p in proxies.values():
        ctl(
            p["ctl"],
            {
                "mode": kind if kind in FAULT_PARAMS else "pass",
                "params": FAULT_PARAMS.get(kind, {}),
                "reset": True,
            },
        )
    run.t0 = time.time()
    stop_at = time.monotonic() + time_s
    threads = [
        threading.Thread(
            target=worker,
            args=(run, w, workers, hosts[names[w % 2]], envs[w], cycles, keydir, seed, stop_at),
        )
        for w in range(workers)
    ]
    try:
        for t in threads:
            t.start()
        if kind == "partition":
            side = threading.Thread(target=partitioner, args=(run, net, rng, done))
            side.start()
        for t in threads:
            t.join()
    finally:
        done.set()
        if side is not None:
            side.join()
        for p in proxies.values():
            st = ctl(p["ctl"], {"mode": "pass"})
            for k2, n in st.items():
                run.faults[k2] += n
    run.t1 = time.time()
    res = check(run, sock_url, keydir)
    v = res["violations"]
    faults = {k2: n for k2, n in run.faults.items() if k2 not in ("connections", "log")}
    injected = (
        sum(n for k2, n in faults.items() if k2.startswith(("cut_", "lost_")))
        + faults.get("delayed_chunks", 0)
        + faults.get("partitions", 0)
    )
    retries = sum(1 for c in run.calls if c.retry_of is not None)
    out = {
        "kind": kind,
        "workers": workers,
        "cycles_asked": cycles,
        "clock_skew_s": skews,
        "cycles_done": len(run.keys),
        "calls": len(run.calls),
        "connections": run.faults.get("connections", 0),
        "faults": faults,
        "faults_injected": injected,
        "retries": retries,
        "sends_ok": len(run.sent),
        "replied": len(run.replied),
        "once_ok": len(run.once_ok),
        "wall_s": round(run.t1 - run.t0, 1),
        "max_failure_s": round(
            max(
                (
                    c.seconds
                    for c in run.calls
                    if c.code and not (c.argv[0] == "wait" or "--wait" in c.argv)
                ),
                default=0.0,
            ),
            1,
        ),
        "states": res["states"],
        "failures": res["failures"],
        "claim_attempts": res["claim_attempts"],
        "counts": {k2: len(x) for k2, x in v.items()},
        "examples": {k2: x[:5] for k2, x in v.items() if x},
    }
    with open(d / "calls.jsonl", "w") as f:
        for c in run.calls:
            f.write(json.dumps({**asdict(c)}) + "\n")
    log(json.dumps(out))
    return out


VIOLATIONS = (
    "lost",
    "duplicated",
    "unexplained_state",
    "double_runs",
    "untyped",
    "slow_failure",
    "skewed_clock",
    "stranded",
    "once_false_unknown",
    "once_not_recorded",
    "false_nothing_changed",
    "claim_attempt",
)


def table(results: list[dict]) -> str:
    head = (
        "| fault | cycles | relay calls | faults injected | retries | lost | duplicated "
        "| double runs | untyped errors | slow failures | stranded deliveries "
        "| false effect_unknown | false 'nothing was changed' | skewed clock "
        "| unexplained states | claim attempts retried (recovered) | wrong claim answers |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        c = r["counts"]
        lines.append(
            f"| {r['kind']} | {r['cycles_done']} | {r['calls']} | {r['faults_injected']} "
            f"| {r['retries']} | {c['lost']} | {c['duplicated']} | {c['double_runs']} "
            f"| {c['untyped']} | {c['slow_failure']} | {c['stranded']} "
            f"| {c['once_false_unknown']} | {c['false_nothing_changed']} "
            f"| {c['skewed_clock']} | {c['unexplained_state']} "
            f"| {r.get('claim_attempts', {}).get('retried', 0)} "
            f"({r.get('claim_attempts', {}).get('recovered', 0)}) | {c['claim_attempt']} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the harness


class Harness:
    """Namespaces, a server, and a proxy in each host's namespace; all removed by close()."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.root = Path(tempfile.mkdtemp(prefix="relay-netfault-"))
        os.chmod(self.root, 0o755)
        self.net = None
        self.server = None
        self.procs: list[subprocess.Popen] = []
        self.proxies: dict = {}
        self.skewed = netns.faketime_env(SKEW_S) is not None
        self.keep = False

    def __enter__(self) -> Harness:
        try:
            self.net = netns.Net().up()
            self.server = pgserver.Server(
                listen=self.net.listen(), netns=self.net.server_ns, fsync=True
            )
            self.server.init().start()
            for i, h in enumerate(self.net.hosts):
                port = 15432 + i
                ctlp = str(self.root / f"proxy-{h}.ctl")
                argv = [
                    *self.net.prefix(h),
                    sys.executable,
                    "-m",
                    "bench.netfault",
                    "proxy",
                    "--port",
                    str(port),
                    "--target",
                    f"{self.net.server_addr(h)}:{self.server.port}",
                    "--seed",
                    str(self.seed + i),
                    "--ctl",
                    ctlp,
                    "--log",
                    str(self.root / f"proxy-{h}.log"),
                ]
                p = subprocess.Popen(
                    argv,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=common.ROOT,
                    env=common.base_env(self.root),
                    start_new_session=True,
                )
                self.procs.append(p)
                if p.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"the proxy on {h} did not start")
                self.proxies[h] = {"port": port, "ctl": ctlp}
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
        self.procs = []
        if self.server is not None:
            self.server.remove()
            self.server = None
        if self.net is not None:
            self.net.down()
            self.net = None
        if self.keep or os.environ.get("RELAY_BENCH_KEEP") == "1":
            print(f"(kept {self.root} for inspection)", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def run(self, kind: str, workers: int, cycles: int, time_s: float, log=print) -> dict:
        r = run_kind(
            kind,
            self.net,
            self.server,
            self.root,
            workers,
            cycles,
            self.seed,
            time_s,
            self.proxies,
            self.skewed,
            log=log,
        )
        if any(r["counts"].values()):
            self.keep = True  # the calls (calls.jsonl) and the proxies' logs, to reproduce
            r["kept"] = str(self.root / kind)
        return r


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["proxy"]:
        return proxy_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench netfault")
    ap.add_argument("--kind", choices=(*KINDS, "all"), default="all")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument(
        "--time",
        type=float,
        default=180.0,
        help="seconds per fault kind after which workers start no new cycle",
    )
    a = ap.parse_args(argv)
    why = netns.unavailable()
    if why:
        print(f"network namespaces: {why}", file=sys.stderr)
        return 2
    seed = a.seed if a.seed is not None else random.randrange(10**9)
    common.print_machine()
    skew = (
        f"host-b, system clock {SKEW_S} s (libfaketime)"
        if netns.faketime_env(SKEW_S)
        else "none (libfaketime is not installed)"
    )
    print(f"seed {seed}; netem: {netem_available() or 'works'}; skewed host: {skew}", flush=True)
    kinds = KINDS if a.kind == "all" else (a.kind,)
    results = []
    with Harness(seed) as h:
        for kind in kinds:
            print(f"== {kind}", flush=True)
            results.append(h.run(kind, a.workers, a.cycles, a.time))
    print(table(results))
    bad = {r["kind"]: {k: n for k, n in r["counts"].items() if n} for r in results}
    bad = {k: x for k, x in bad.items() if x}
    if bad:
        print(f"violations: {json.dumps(bad)}")
        for r in results:
            for k, ex in r["examples"].items():
                for line in ex:
                    print(f"  {r['kind']} {k}: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
