"""How soon `relay watch` shows a change another process made (design.md §14: within 1 s).

``relay watch`` runs in a real terminal (tmux, 80x24). Each trial sends one request from
another process; the time is from that `relay send` process's exit (its COMMIT came
before) to the first tmux capture of the pane that shows the new count of open requests.
The capture loop polls every 10 ms, so figures carry up to ~10 ms of sampling.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import time

from .common import (
    RELAY,
    base_env,
    cleanup,
    join,
    median,
    new_home,
    new_id,
    pct,
    print_machine,
    relay,
)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench watch", description=__doc__)
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args(argv)
    if shutil.which("tmux") is None:
        print("bench watch: tmux is not installed")
        return 2
    print_machine()
    home = new_home()
    socket = f"relay-bench-watch-{id(home)}"
    tmux = ["tmux", "-L", socket]
    try:
        alice = join(home, "alice")
        join(home, "bob")
        env = base_env(home)
        exports = " ".join(
            f"{k}={shlex.quote(v)}"
            for k, v in env.items()
            if k in ("RELAY_HOME", "PYTHONPATH", "PATH")
        )
        subprocess.run(
            [
                *tmux,
                "new-session",
                "-d",
                "-s",
                "w",
                "-x",
                "80",
                "-y",
                "24",
                f"env {exports} {shlex.join(RELAY)} watch",
            ],
            check=True,
            env=env,
        )

        def pane() -> str:
            return subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "w"], capture_output=True, text=True
            ).stdout

        def wait_for(text: str, timeout: float = 20.0) -> float:
            start = time.monotonic()
            while time.monotonic() - start < timeout:
                if text in pane():
                    return time.monotonic()
                time.sleep(0.01)
            raise SystemExit(f"bench watch: {text!r} never appeared:\n{pane()}")

        wait_for("open requests (0")
        times = []
        for i in range(1, args.trials + 1):
            r = relay(
                home,
                "send",
                "--to",
                "bob",
                "--id",
                new_id(),
                "--ttl",
                "1h",
                "-",
                input=f"trial {i}",
                env=alice,
            )
            sent = time.monotonic()
            if r.code != 0:
                raise SystemExit(f"bench watch: send failed: {r.err}")
            times.append(wait_for(f"open requests ({i}: {i} queued") - sent)
        ms = [t * 1000 for t in times]
        print(
            f"relay watch refresh after a send from another process, {len(ms)} trials: "
            f"median {median(ms):.1f} ms, p90 {pct(ms, 90):.1f} ms, max {max(ms):.1f} ms "
            f"(goal: within 1000 ms)"
        )
        return 0 if max(ms) < 1000 else 1
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        cleanup(home)
