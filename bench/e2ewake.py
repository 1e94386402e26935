"""Wake latency inside the real runtimes (design.md §12; docs/e2e.md): send -> the next
model request, per runtime (Claude Code TUI, Codex TUI, opencode TUI), over >= 10 wakes.

Each runtime runs as in the end-to-end harness (``e2e/``): the pinned version, relay's hooks
installed (Codex with ``--wake``), a scripted model on 127.0.0.1 in a loopback-only network
namespace, the TUI in tmux at 80x24, idle with its wake waiter running. A ``send`` runs in
this process through relay's own entry point, so the moment its COMMIT returns is recorded;
the latency is from that moment to the model server receiving the request that names the
new request (the model then claims and replies, and the next wake waits for idle). Both
clocks are this process's monotonic clock. Goal: <= 1 s. Nothing is asserted; this prints.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from .common import median, pct, print_machine
from .latency import _commit_clock, inproc


def one_runtime(runtime: str, wakes: int, log=print, jitter: float = 0.0) -> dict:
    from e2e import harness, scenarios

    mods = harness.install()
    sb = harness.Sandbox(mods)
    try:
        sb.configure()
        sb.install_hooks(runtime, *(("--wake",) if runtime == "codex" else ()))
        sender = sb.join("sender", "script")
        peer = f"{runtime}-tui"
        sb.relay("peers", "add", peer, "--kind", runtime)

        def send(to: str) -> tuple[str, float]:
            code, out, commit = inproc(
                sb.relay_home, sender, "send", "--to", to, "wake up and say hello", "--json"
            )
            assert code == 0, out
            return json.loads(out)["id"], commit

        tui = scenarios.start_tui(sb, runtime, peer)
        lat, waiter, problems = [], [], []
        try:
            with _commit_clock():
                for n in range(wakes):
                    if not scenarios._wait(lambda: scenarios._waiter_ready(sb, peer), 30, 0.05):
                        problems.append(f"wake {n}: the waiter was not back within 30 s")
                        continue
                    # --jitter: a send at a random moment, not locked onto a
                    # runtime's own timer (Codex checks its queue every 10 s)
                    time.sleep(0.5 + random.uniform(0.0, jitter))
                    try:
                        w = scenarios.wake_once(sb, sender, peer, send=send)
                    except AssertionError as e:
                        problems.append(f"wake {n}: {e}")
                        continue
                    lat.append(w["wake_s"])
                    if w["waiter_s"] is not None:
                        waiter.append(w["waiter_s"])
                    part = (
                        f" (waiter exited after {w['waiter_s']:.3f} s)"
                        if w["waiter_s"] is not None
                        else ""
                    )
                    log(f"  {runtime} wake {n + 1}: {w['wake_s']:.3f} s{part}")
        finally:
            tui.close()
        return {
            "runtime": runtime,
            "version": harness.versions(mods).get(runtime),
            "wakes": len(lat),
            "median_s": median(lat),
            "p90_s": pct(lat, 90),
            "max_s": max(lat) if lat else float("nan"),
            "waiter_median_s": median(waiter),
            "problems": problems,
        }
    finally:
        sb.close()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench e2ewake", description=__doc__)
    p.add_argument("--wakes", type=int, default=10)
    p.add_argument("--runtime", action="append", choices=["claude", "codex", "opencode"])
    p.add_argument(
        "--jitter", type=float, default=0.0, help="wait a random 0..JITTER s more before each send"
    )
    args = p.parse_args(argv)
    from e2e import harness

    try:
        harness.install()
        harness.enter_netns()
    except harness.Missing as e:
        print(f"e2ewake: missing: {e}", file=sys.stderr)
        return 3
    print_machine()
    rows = [
        one_runtime(rt, args.wakes, jitter=args.jitter)
        for rt in args.runtime or ["claude", "codex", "opencode"]
    ]
    print("\nsend (commit) -> next model request, idle TUI woken by relay's waiter:")
    print(
        f"{'runtime':<22} {'wakes':>5} {'median':>8} {'p90':>8} {'max':>8} "
        f"{'of which waiter (median)':>25}"
    )
    for r in rows:
        print(
            f"{r['runtime'] + ' ' + str(r['version']):<22} {r['wakes']:>5} "
            f"{r['median_s']:>7.3f}s {r['p90_s']:>7.3f}s {r['max_s']:>7.3f}s "
            f"{r['waiter_median_s']:>24.3f}s"
        )
        for prob in r["problems"]:
            print(f"  problem: {prob}")
    return 0 if all(r["wakes"] for r in rows) else 1
