"""`relay web` (design.md §17): how soon a commit shows in the page, and what the view
costs while nothing happens, on SQLite and on a throwaway PostgreSQL server.

latency: the page open in headless chromium (testsupport/browser.py), served by a real
`relay web` process. Each trial sends one request through relay's own entry point in this
process, so the time starts when that call returns (its COMMIT came just before; a
process's exit would come later, after the interpreter's shutdown, which the page does not
wait for); it ends when the page's DOM holds the request's row, which a MutationObserver
in the page stamps with ``Date.now()`` (this machine's clock, as ``time.time()`` here).
Median of ``--trials``.

cpu: user + system time (``/proc/PID/stat``) over ``--seconds`` of `relay web` with one
page listening on its event stream (a client in this process: the server's cost is the
same whatever reads it) and nothing happening, next to a `relay wait` blocked on an open
request over the same window, both measured after their start-up. And `relay web` with no
page open, for comparison.
"""

from __future__ import annotations

import argparse
import http.client
import os
import threading
import time
from pathlib import Path

from testsupport import browser as browsers
from testsupport import pgserver

from . import common
from .common import RELAY, base_env, cleanup, join, median, new_home, new_id, pct, print_machine

OBSERVE = """
const id = arguments[0];
window.__seen = null;
new MutationObserver((_, observer) => {
  if (document.querySelector('li[data-id="' + id + '"]')) {
    window.__seen = Date.now();
    observer.disconnect();
  }
}).observe(document.body, {childList: true, subtree: true});
"""


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _serve(home: Path) -> browsers.RelayWeb:
    return browsers.RelayWeb(RELAY[0], base_env(home))


def _send(home: Path, who: dict[str, str], rid: str, text: str) -> tuple[int, str]:
    """`relay send` in this process (its own context: this process's environment and
    streams are left alone); returns when it committed and printed its answer."""
    import io

    from relay_cli.cli import run
    from relay_cli.core.context import Context

    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")
    context = Context.from_environ(base_env(home, who), stdin=stdin, stdout=out, stderr=err)
    code = run(["send", "--to", "bob", "--id", rid, "--json", "-"], context=context)
    return code, err.getvalue()


def latency(home: Path, trials: int) -> list[float]:
    alice = join(home, "alice")
    join(home, "bob")
    served = _serve(home)
    page = browsers.Browser()
    try:
        page.go(served.url)
        if not page.wait_for("return !!document.querySelector('#live .ok')", timeout=30):
            raise SystemExit("bench web: the page never went live")
        times = []
        for i in range(trials):
            rid = new_id()
            page.run(OBSERVE, rid)
            code, err = _send(home, alice, rid, f"trial {i}")
            committed = time.time() * 1000
            if code != 0:
                raise SystemExit(f"bench web: send failed: {err}")
            seen = page.wait_for("return window.__seen", timeout=20, every=0.005)
            if not seen:
                raise SystemExit(f"bench web: request {rid} never appeared")
            times.append((seen - committed) / 1000)
        return times
    finally:
        page.close()
        served.stop()


def _listen(served: browsers.RelayWeb, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
        conn.request("GET", served.at("/events")[len(served.base) :])
        stream = conn.getresponse()
        while not stop.is_set():
            if not stream.fp.readline():
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def idle_cpu(home: Path, seconds: int) -> dict[str, float]:
    """CPU seconds per minute of a listened-to view, a blocked wait and an unwatched
    view, measured together over the same ``seconds``."""
    alice = join(home, "alice")
    join(home, "bob")
    rid = new_id()
    assert common.relay(home, "send", "--to", "bob", "--id", rid, "x", env=alice).code == 0
    watched, unwatched = _serve(home), _serve(home)
    stop = threading.Event()
    listener = _listen(watched, stop)
    import subprocess

    wait = subprocess.Popen(
        [*RELAY, "wait", rid, "--timeout", str(seconds + 30)],
        env=base_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)  # every start-up done, the page's first document sent
        procs = {"web, one page open": watched.proc.pid, "wait": wait.pid}
        procs["web, no page open"] = unwatched.proc.pid
        before = {k: _cpu_ticks(p) for k, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        after = {k: _cpu_ticks(p) for k, p in procs.items()}
        tick = os.sysconf("SC_CLK_TCK")
        return {k: (after[k] - before[k]) / tick * 60 / wall for k in procs}
    finally:
        stop.set()
        wait.kill()
        wait.wait()
        watched.stop()
        unwatched.stop()
        listener.join(timeout=5)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench web", description=__doc__)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=60, help="the idle CPU window")
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = ap.parse_args(argv)
    if browsers.missing():
        print(f"bench web: {browsers.missing()}")
        return 2
    print_machine()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    code = 0
    for backend in backends:
        server = None
        home = new_home()
        try:
            if backend == "postgres":
                server = pgserver.Server(fsync=True)
                server.init().start()
                server.execute("CREATE DATABASE relay")
                common.DATABASE_URL = server.url("relay")
            ms = [t * 1000 for t in latency(home, args.trials)]
            print(
                f"{backend}: a commit -> the page's DOM shows it, {len(ms)} trials: median "
                f"{median(ms):.1f} ms, p90 {pct(ms, 90):.1f} ms, max {max(ms):.1f} ms "
                "(goal: within 1000 ms)",
                flush=True,
            )
            code |= 0 if median(ms) < 1000 else 1
            if server is not None:
                server.execute("DROP DATABASE relay WITH (FORCE)")
                server.execute("CREATE DATABASE relay")
            else:
                cleanup(home)
                home = new_home()
            cpu = idle_cpu(home, args.seconds)
            print(
                f"{backend}: CPU while idle over {args.seconds} s, in CPU seconds per minute: "
                + ", ".join(f"{k} {v:.3f}" for k, v in cpu.items()),
                flush=True,
            )
            if cpu["web, one page open"] > max(cpu["wait"] * 1.25, cpu["wait"] + 0.01):
                print(f"{backend}: the view costs more than a blocked wait")
                code |= 1
        finally:
            common.DATABASE_URL = None
            if server is not None:
                server.remove()
            cleanup(home)
    return code
