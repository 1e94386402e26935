"""Several machines, for real (design.md §13): the PostgreSQL server and two relay hosts in
separate network namespaces, talking over veth links on private addresses that exist only
inside the test's own namespaces (testsupport/netns.py). host-b's system clock is 7 minutes
behind (libfaketime) and one of its calls moves relay's clock by minutes
(RELAY_TIME_OFFSET); host-a's and host-b's relay still agree on every state.

Opt-in (it needs root for `ip netns`): RELAY_NETNS_TESTS=1, which .ci/run sets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from testsupport import netns, pgserver

pytestmark = pytest.mark.skipif(
    os.environ.get("RELAY_NETNS_TESTS") != "1", reason="opt-in: RELAY_NETNS_TESTS=1 (CI sets it)"
)

PASSWORD = "netns-secret-pw"


class Host:
    """relay on one simulated machine: its namespace, host name, clock and home."""

    def __init__(self, net, server, name: str, home, clock_offset_s: int | None = None):
        self.name = name
        self.prefix = net.prefix(name, clock_offset_s)
        self.url = f"postgresql://postgres:{PASSWORD}@{net.server_addr(name)}:{server.port}/relay"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "PG"))}
        self.env.update(
            RELAY_HOME=str(home),
            RELAY_DATABASE_URL=self.url,
            PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        )

    def argv(self, *args: str) -> list[str]:
        return [*self.prefix, sys.executable, "-m", "relay_cli", *args]

    def run(
        self, *args: str, env: dict | None = None, input: str | None = None, timeout: float = 60
    ):
        p = subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            input=input,
            timeout=timeout,
        )
        return p

    def popen(self, *args: str, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            self.argv(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **(env or {})},
            start_new_session=True,
        )

    def json(self, *args: str, env: dict | None = None, code: int = 0) -> dict:
        p = self.run(*args, "--json", env=env)
        assert p.returncode == code, (args, p.returncode, p.stderr)
        return json.loads(p.stdout) if p.stdout else {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = netns.unavailable()
    if why:
        pytest.skip(f"network namespaces: {why}")
    if pgserver.bindir() is None or not pgserver.driver_available():
        pytest.fail("PostgreSQL is not installed (RELAY_NETNS_TESTS=1 needs it)")
    with netns.server_and_hosts(password=PASSWORD) as (net, server):
        root = tmp_path_factory.mktemp("hosts")
        skew = -420 if netns.faketime_env(-420) else None
        yield {
            "a": Host(net, server, "host-a", root / "a"),
            "b": Host(net, server, "host-b", root / "b", clock_offset_s=skew),
            "server": server,
            "skewed": skew is not None,
        }


def test_two_hosts_send_claim_reply_and_wait_across_the_network(cluster):
    a, b = cluster["a"], cluster["b"]
    alice = a.json("peers", "join", "alice", "--lease", "1h")
    bob = b.json("peers", "join", "bob", "--lease", "1h")
    as_alice = {"RELAY_PEER": "alice", "RELAY_SESSION": alice["token"]}
    as_bob = {"RELAY_PEER": "bob", "RELAY_SESSION": bob["token"]}
    # bob waits for work on host-b before it exists; alice sends from host-a
    claimer = b.popen("claim", "--wait", "60", "--json", env=as_bob)
    rid = str(uuid.uuid4())
    sent = a.json("send", "--to", "bob", "--id", rid, "work across machines", env=as_alice)
    assert sent["state"] == "queued"
    out, err = claimer.communicate(timeout=90)
    assert claimer.returncode == 0, err
    claimed = json.loads(out)
    assert claimed["id"] == rid and claimed["text"] == "work across machines"
    # alice waits on host-a; bob replies from host-b
    waiter = a.popen("wait", rid, "--timeout", "60", "--json", env=as_alice)
    time.sleep(0.5)  # let the waiter block (it holds no transaction meanwhile)
    assert b.json("reply", rid, "done on host-b", env=as_bob)["state"] == "completed"
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    assert json.loads(out)["reply"] == "done on host-b"
    # the clocks of the two machines disagree; relay's times are the server's on both
    seen_a, seen_b = a.json("show", rid), b.json("show", rid)
    assert seen_a == seen_b
    # doctor on host-a: the server is not local and the URL has no sslmode: TLS warning
    doc = a.run("doctor", "--json")
    assert PASSWORD not in doc.stdout + doc.stderr
    checks = {c["name"]: c for c in json.loads(doc.stdout)["checks"]}
    assert checks["tls"]["status"] == "warn"
    if cluster["skewed"]:
        d = json.loads(b.run("doctor", "--json").stdout)
        clock = {c["name"]: c for c in d["checks"]}["clock"]
        assert clock["status"] == "warn" and "behind the server's" in clock["detail"]
        assert abs(d["clock_offset_ms"] - 420_000) < 30_000


def test_a_lease_lapse_on_one_host_is_the_same_delivery_unknown_on_the_other(cluster):
    a, b = cluster["a"], cluster["b"]
    alice = a.json("peers", "join", "alice2", "--lease", "1h")
    bob = b.json("peers", "join", "bob2", "--lease", "1h")
    as_alice = {"RELAY_PEER": "alice2", "RELAY_SESSION": alice["token"]}
    as_bob = {"RELAY_PEER": "bob2", "RELAY_SESSION": bob["token"]}
    rid = str(uuid.uuid4())
    a.json("send", "--to", "bob2", "--id", rid, "lapse me", env=as_alice)
    assert b.json("claim", "--id", rid, "--lease", "60s", env=as_bob)["state"] == "delivered"
    assert a.json("show", rid)["state"] == "delivered"  # host-a agrees the lease is live
    # host-b's relay clock moves 5 minutes on: the lease lapsed; host-b applies it
    later = {"RELAY_TIME_OFFSET": "300"}
    lapsed = b.json("show", rid, "--events", env=later)
    assert lapsed["state"] == "delivery_unknown"
    # host-a (its own clock, no offset) sees exactly the same request and history
    assert a.json("show", rid, "--events") == b.json("show", rid, "--events")
    assert a.json("show", rid)["reason"] == lapsed["reason"]
    p = a.run("wait", rid, "--timeout", "0", "--json", env=as_alice)
    assert p.returncode == 11 and json.loads(p.stdout)["state"] == "delivery_unknown"


def test_a_killed_host_s_relay_once_becomes_effect_unknown_after_30_s(cluster, tmp_path):
    a, b = cluster["a"], cluster["b"]
    key = f"deploy-{uuid.uuid4()}"
    cmd = ["sh", "-c", "sleep 600"]
    runner = a.popen("once", "--key", key, "--", *cmd)
    try:
        deadline = time.monotonic() + 30
        entry = None
        while time.monotonic() < deadline:
            p = b.run("ledger", "show", key, "--json")
            if p.returncode == 0 and json.loads(p.stdout)["child_pid"]:
                entry = json.loads(p.stdout)
                break
            time.sleep(0.2)
        assert entry is not None and entry["state"] == "running" and entry["host"] == "host-a"
        # host-b cannot look at host-a's processes: in_progress, naming the host
        p = b.run("once", "--key", key, "--json", "--", *cmd, env={"RELAY_TIME_OFFSET": "0"})
        err = json.loads(p.stderr.splitlines()[-1])["error"]
        assert (p.returncode, err["code"]) == (75, "in_progress") and "host-a" in err["message"]
        # while the command runs, host-a's relay renews the entry every 10 s
        first = entry["updated_at"]
        deadline = time.monotonic() + 25
        renewed = first
        while renewed == first and time.monotonic() < deadline:
            time.sleep(0.5)
            renewed = b.json("ledger", "show", key)["updated_at"]
        assert renewed > first, "no renewal within 25 s"
    finally:
        os.killpg(runner.pid, signal.SIGKILL)  # host-a dies: relay and its command
        runner.communicate(timeout=30)
    # 28 s after the last renewal: still in_progress; 32 s: crashed, effect_unknown
    last = a.json("ledger", "show", key)["updated_at"]
    from relay_cli.core.clock import parse_iso

    server_now = float(
        cluster["server"].execute("SELECT extract(epoch FROM clock_timestamp()) * 1000")[0][0]
    )
    since = (server_now - parse_iso(last)) / 1000

    def moved(seconds: float) -> dict:
        return {"RELAY_TIME_OFFSET": f"{seconds - since:.3f}"}

    p = b.run("once", "--key", key, "--json", "--", *cmd, env=moved(28))
    assert p.returncode == 75, p.stderr
    p = b.run("once", "--key", key, "--json", "--", *cmd, env=moved(32))
    err = json.loads(p.stderr.splitlines()[-1])["error"]
    assert (p.returncode, err["code"]) == (11, "effect_unknown")
    shown = a.json("ledger", "show", key, env=moved(32))
    assert shown["state"] == "effect_unknown"


def test_a_kill_of_one_host_s_relay_kills_its_command_and_nothing_reruns_it(cluster):
    """design.md §10, §13: SIGKILL of relay alone (its command left to itself) on host-a.
    The command dies with relay; host-b, which cannot look, reruns nothing after the
    renewals stop, not even --idempotent, and only a person at a terminal settles it."""
    a, b = cluster["a"], cluster["b"]
    key = f"deploy-{uuid.uuid4()}"
    cmd = ["sh", "-c", "sleep 600"]
    runner = a.popen("once", "--key", key, "--idempotent", "--", *cmd)
    try:
        deadline = time.monotonic() + 30
        entry = None
        while time.monotonic() < deadline:
            p = b.run("ledger", "show", key, "--json")
            if p.returncode == 0 and json.loads(p.stdout)["child_pid"]:
                entry = json.loads(p.stdout)
                break
            time.sleep(0.2)
        assert entry is not None and entry["host"] == "host-a"
        os.kill(entry["pid"], signal.SIGKILL)  # relay only: not its process group
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _running(entry["child_pid"]):
            time.sleep(0.05)
        assert not _running(entry["child_pid"]), "the command outlived its relay"
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.communicate(timeout=30)
    later = {"RELAY_TIME_OFFSET": "40"}
    p = b.run("once", "--key", key, "--json", "--", *cmd, env=later)
    err = json.loads(p.stderr.splitlines()[-1])["error"]
    assert (p.returncode, err["code"]) == (11, "effect_unknown")
    assert "host-a" in err["message"] and "cannot see" in err["message"]
    p = b.run("ledger", "resolve", key, "--outcome", "forget", "--json", env=later)
    err = json.loads(p.stderr.splitlines()[-1])["error"]
    assert (p.returncode, err["code"]) == (5, "approval_needs_terminal")


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
