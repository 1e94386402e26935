#!/usr/bin/env python3
"""Start-up cost of relay against a bare Typer command of the same Python.

    python bench/startup.py [-n RUNS]

Measures, each as a fresh process, the median wall time and the median peak RSS of:
  bare           a Typer app with one command that only prints (the baseline)
  relay --help
  relay send     to a peer, text on stdin, in a temporary RELAY_HOME
  hook, idle     `relay hook claude` in a session that is not relay's (no peer: the event
                 is read and the hook exits before relay is imported)
  hook, peer     `relay hook claude` with a peer (RELAY_PEER), a UserPromptSubmit event of
                 one session, nothing queued: its session is renewed and its queue read,
                 on every turn (design.md §18: no Typer and no rich on this path)
and prints the ratios to the baseline. Goals: relay --help within 1.3x, relay send within
1.5x, a hook with a peer within 0.6x. Results depend on the machine's load: run it on a quiet machine and say when not.

relay's modules are byte-compiled first (compileall), as pip does at install time: with
PYTHONDONTWRITEBYTECODE=1 an editable checkout would otherwise compile every module from
source at every start, while Typer's modules in site-packages are already compiled.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

BARE = """\
import typer

app = typer.Typer(add_completion=False)


@app.command()
def main() -> None:
    print("hello")


app()
"""

GOALS = {"relay --help": 1.3, "relay send": 1.5, "hook, peer": 0.6}
# what Claude Code writes to a UserPromptSubmit hook (tests/fixtures/ has the schema's)
HOOK_EVENT = {
    "session_id": "5d7e9f1a-2b3c-4d5e-8f90-a1b2c3d4e5f6",
    "transcript_path": "/tmp/bench-transcript.jsonl",
    "cwd": "/tmp",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "go on",
}


def relay_argv() -> list[str]:
    script = Path(sys.executable).parent / "relay"
    return [str(script)] if script.exists() else [sys.executable, "-m", "relay_cli"]


def run_once(argv: list[str], env: dict, stdin: bytes | None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process (os.wait4's own rusage)."""
    start = time.perf_counter()
    p = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if stdin is not None:
        p.stdin.write(stdin)
        p.stdin.close()
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    p.stderr.close()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {p.returncode}: {err.decode()}")
    return elapsed, usage.ru_maxrss


def summarize(times: list[float], rss: list[int]) -> dict:
    return {
        "median_ms": statistics.median(times) * 1000,
        "min_ms": min(times) * 1000,
        "median_rss_kib": statistics.median(rss),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs per command")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    package = Path(importlib.util.find_spec("relay_cli").origin).parent
    compileall.compile_dir(str(package), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(BARE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
        env.update(RELAY_HOME=str(Path(tmp) / "home"), RELAY_RATE_LIMIT="0", NO_COLOR="1")
        relay = relay_argv()
        joined = {}
        for name in ("bench-sender", "bench-peer", "bench-hook"):
            p = subprocess.run(
                [*relay, "peers", "join", name, "--lease", "24h", "--json"],
                env=env,
                capture_output=True,
                check=True,
            )
            joined[name] = json.loads(p.stdout)["token"]
        send_env = {**env, "RELAY_PEER": "bench-sender", "RELAY_SESSION": joined["bench-sender"]}

        event = json.dumps(HOOK_EVENT).encode()
        hook_env = {**env, "RELAY_PEER": "bench-hook"}
        cases = {
            "bare": (lambda i: [sys.executable, str(bare)], env, None),
            "relay --help": (lambda i: [*relay, "--help"], env, None),
            "relay send": (
                lambda i: [*relay, "send", "--to", "bench-peer", "--id", str(uuid.uuid4()), "-"],
                send_env,
                lambda i: f"bench message {i}".encode(),
            ),
            "hook, idle": (lambda i: [*relay, "hook", "claude"], env, lambda i: event),
            "hook, peer": (lambda i: [*relay, "hook", "claude"], hook_env, lambda i: event),
        }
        samples = {name: ([], []) for name in cases}
        # Round-robin, after one warm-up run each, so that load changes hit every case alike.
        for i in range(args.runs + 1):
            for name, (argv, case_env, stdin_for) in cases.items():
                t, m = run_once(argv(i), case_env, stdin_for(i) if stdin_for else None)
                if i:
                    samples[name][0].append(t)
                    samples[name][1].append(m)
        results = {name: summarize(*samples[name]) for name in cases}
    for name, r in results.items():
        r["ratio"] = r["median_ms"] / results["bare"]["median_ms"]
        r["ratio_min"] = r["min_ms"] / results["bare"]["min_ms"]
        r["goal"] = GOALS.get(name)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"python {sys.version.split()[0]}, {args.runs} runs each, cpus={os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'command':<14} {'median ms':>10} {'min ms':>8} {'peak RSS MiB':>13} "
        f"{'ratio (median)':>15} {'ratio (min)':>12}  goal"
    )
    for name, r in results.items():
        goal = (
            f"<= {r['goal']}x {'ok' if r['ratio'] <= r['goal'] else 'MISSED'}"
            if r["goal"]
            else ("baseline" if name == "bare" else "-")
        )
        print(
            f"{name:<14} {r['median_ms']:>10.1f} {r['min_ms']:>8.1f} "
            f"{r['median_rss_kib'] / 1024:>13.1f} {r['ratio']:>14.2f}x "
            f"{r['ratio_min']:>11.2f}x  {goal}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
