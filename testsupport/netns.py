"""Several machines on one: network namespaces for the PostgreSQL server and two client
"hosts" (design.md §13), for tests/store/test_netns.py and the benchmarks.

Topology: the server's namespace is joined to each host's namespace by its own veth pair,
on a private /24 that exists only inside these namespaces (10.231.<n>.1 the server's end,
10.231.<n>.2 the host's). Traffic never leaves this machine. ``down()`` removes every
namespace (and with it every veth); it is safe to call twice.

A host command runs as ``ip netns exec <ns> unshare --uts sh -c 'hostname <name>; exec
…'``: its own network and its own host name (the ledger tells hosts apart by name), and
optionally its own system clock (libfaketime).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager

SUBNET = "10.231"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return "`unshare`/`setpriv` (util-linux) are not installed"
    probe = f"relay-probe-{os.getpid()}"
    p = _ip("netns", "add", probe, check=False)
    if p.returncode != 0:
        return f"`ip netns add` is not permitted here ({p.stderr.strip()})"
    _ip("netns", "del", probe, check=False)
    return None


class Net:
    def __init__(self, hosts: tuple[str, ...] = ("host-a", "host-b")) -> None:
        tag = f"{os.getpid() % 100000}"
        self.tag = tag
        self.server_ns = f"relay-srv-{tag}"
        self.hosts = {name: f"relay-{name}-{tag}" for name in hosts}
        self.index = {name: i for i, name in enumerate(hosts, 1)}
        self.made: list[str] = []

    def up(self) -> Net:
        try:
            for ns in (self.server_ns, *self.hosts.values()):
                _ip("netns", "add", ns)
                self.made.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            for name, ns in self.hosts.items():
                i = self.index[name]
                s_if, h_if = f"rs{i}-{self.tag}", f"rh{i}-{self.tag}"
                _ip("link", "add", s_if, "type", "veth", "peer", "name", h_if)
                _ip("link", "set", s_if, "netns", self.server_ns)
                _ip("link", "set", h_if, "netns", ns)
                _ip("-n", self.server_ns, "addr", "add", f"{SUBNET}.{i}.1/24", "dev", s_if)
                _ip("-n", self.server_ns, "link", "set", s_if, "up")
                _ip("-n", ns, "addr", "add", f"{SUBNET}.{i}.2/24", "dev", h_if)
                _ip("-n", ns, "link", "set", h_if, "up")
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True)
            _kill_all_in(ns)
            _ip("netns", "del", ns, check=False)
        self.made = []

    def listen(self) -> str:
        """The server's addresses, for listen_addresses."""
        return ",".join(f"{SUBNET}.{i}.1" for i in self.index.values())

    def server_addr(self, host: str) -> str:
        """The server as ``host`` reaches it."""
        return f"{SUBNET}.{self.index[host]}.1"

    def prefix(self, host: str, clock_offset_s: int | None = None) -> list[str]:
        """The command prefix that runs a program on ``host`` (its network, its host
        name, and with ``clock_offset_s`` a system clock that many seconds off, through
        libfaketime preloaded as ``faketime_env`` does, never the semaphore wrapper)."""
        fake = []
        if clock_offset_s:
            env = faketime_env(clock_offset_s)
            if env is None:
                raise RuntimeError("libfaketime is not installed")
            fake = ["env", *(f"{k}={v}" for k, v in env.items())]
        return [
            "ip",
            "netns",
            "exec",
            self.hosts[host],
            "unshare",
            "--uts",
            "sh",
            "-c",
            f'hostname {host} && exec "$@"',
            "sh",
            *fake,
        ]


LIBFAKETIME = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)


def faketime_env(offset_s: int) -> dict[str, str] | None:
    """The environment that puts a program's system clock ``offset_s`` seconds off, by
    preloading libfaketime directly (None when it is not installed). Unlike the
    ``faketime`` wrapper it needs no named semaphore: the wrapper's, left in /dev/shm by
    processes that were killed, make a later wrapper with a reused pid refuse to start
    ("sem_open: File exists"). The monotonic clock moves with it: with
    FAKETIME_DONT_FAKE_MONOTONIC=1, Python 3.11's time.sleep() fails with EINVAL."""
    for lib in LIBFAKETIME:
        if os.path.exists(lib):
            return {"LD_PRELOAD": lib, "FAKETIME": f"{offset_s:+d}"}
    return None


def _kill_all_in(ns: str) -> None:
    p = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    for pid in p.stdout.split():
        try:
            os.kill(int(pid), 9)
        except (OSError, ValueError):
            pass


@contextmanager
def server_and_hosts(**server_options):
    """(net, server): namespaces up, a PostgreSQL server listening in the server's
    namespace with a database ``relay``; both removed at the end, whatever happens."""
    from . import pgserver

    net = Net().up()
    server = None
    try:
        server = pgserver.Server(listen=net.listen(), netns=net.server_ns, **server_options)
        server.init().start()
        server.execute("CREATE DATABASE relay")
        yield net, server
    finally:
        if server is not None:
            server.remove()
        net.down()
