"""What relay's hooks cost a headless run of each real runtime (design.md §12; docs/e2e.md).

Each runtime runs as in the end-to-end harness (``e2e/``): the pinned version, a scripted
model on 127.0.0.1 in a loopback-only network namespace, a throwaway HOME and relay state
directory. The prompt is a trivial one ("Say hello."): the scripted model answers it in
one turn with no tool call. Every run gets a freshly joined session of the runtime's peer
(``relay peers join NAME --kind RUNTIME``, its ``RELAY_PEER`` and ``RELAY_SESSION`` in the
environment, as ``relay run`` hands them to its child), and nothing is queued. A round is
one run in each mode, in an order that rotates from round to round, so a change in the
machine's load hits every mode alike:

- ``without``: relay's hooks not installed (the runtime's settings as before
  ``relay hook install``; opencode without relay's plugin);
- ``with``: ``relay hook install RUNTIME`` (Codex: its default hooks, no ``--wake``), the
  hooks calling the real ``relay`` as a person's would;
- ``traced``: the same hooks through the harness's ``relay`` wrapper, which keeps each hook
  event with its start and end: how many hooks ran and how long each relay process took
  (the wrapper itself adds a shell and a few small processes per hook, so this run's wall
  time is a little above ``with``'s).

The figure of the requirement is ``with`` minus ``without``, medians of N runs each (goal:
<= +0.25 s on a quiet machine); ``paired`` is the median of each round's with - without.
From the traced runs: ``hooks/run`` (relay processes a run started, waiters included),
``in hooks`` (seconds during which at least one ran; hooks side by side count once) and,
below the table, each hook's median time. A run that fails (exit code not 0, timeout)
counts in no median and is reported, and so is a run with hooks whose model requests lack
relay's session-start context (its hooks did not do their work). Processes a run leaves behind (a runtime's daemon, a wake
waiter) are ended after it and counted; the sandbox's close() ends the rest. Nothing is
asserted; this prints. ``--relay PATH`` measures another relay (e.g. one installed from
another commit), as the harness's ``RELAY_E2E_RELAY`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from .common import print_machine

MODES = ("without", "with", "traced")
PROMPT = "Say hello."
# the first words of relay's session-start context (relay_cli/agents/guide.py short_text)
START_CONTEXT = "relay: this session is relay peer"


def order(round_no: int, modes: tuple[str, ...] = MODES) -> list[str]:
    """The modes of one round, rotated by the round's number (without, with, traced; with,
    traced, without; …): each mode comes first, second and last equally often."""
    k = round_no % len(modes)
    return [*modes[k:], *modes[:k]]


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(runtime: str, runs: list[dict], version: str | None = None) -> dict:
    """One runtime's figures from its runs (each: mode, round, ok, secs; a traced run also
    hooks: [{event, secs, exit}]). Medians over the runs that succeeded; ``paired`` is the
    median over rounds of with - without where both succeeded."""
    ok = {m: [r for r in runs if r["mode"] == m and r["ok"]] for m in MODES}
    med = {m: _median([r["secs"] for r in ok[m]]) for m in MODES}
    by_round: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["ok"]:
            by_round.setdefault(r["round"], {})[r["mode"]] = r["secs"]
    paired = [d["with"] - d["without"] for d in by_round.values() if "with" in d and "without" in d]
    traced = ok["traced"]
    per_event: dict[str, list[float]] = {}
    for r in traced:
        for h in r.get("hooks", []):
            if h.get("secs") is not None:
                per_event.setdefault(h["event"], []).append(h["secs"])
    hook_counts = [len(r.get("hooks", [])) for r in traced]
    hook_secs = [sum(h.get("secs") or 0.0 for h in r.get("hooks", [])) for r in traced]
    hook_wall = [covered(r.get("hooks", [])) for r in traced]

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    return {
        "runtime": runtime,
        "version": version,
        "runs": {m: len(ok[m]) for m in MODES},
        "failed": [r for r in runs if not r["ok"]],
        "median_s": med,
        "diff_s": minus(med["with"], med["without"]),
        "paired_diff_s": _median(paired),
        "traced_diff_s": minus(med["traced"], med["without"]),
        "hooks_per_run": _median(hook_counts),
        "hook_s_per_run": _median(hook_secs),
        "hook_wall_s_per_run": _median(hook_wall),
        "per_event_s": {e: (statistics.median(v), len(v)) for e, v in per_event.items()},
        "hook_failures": sum(
            1 for r in traced for h in r.get("hooks", []) if h.get("exit") not in ("0", None)
        ),
        "context_runs": sum(1 for r in runs if r["mode"] != "without" and r.get("context")),
        "hooked_runs": sum(1 for r in runs if r["mode"] != "without" and r["ok"]),
        "turns": {m: sorted({r.get("turns") for r in ok[m]} - {None}) for m in MODES},
        "leftovers": sum(r.get("leftovers", 0) for r in runs),
    }


def covered(hooks: list[dict]) -> float:
    """Seconds during which at least one of ``hooks`` (each: start, secs) was running:
    hooks that run side by side (Claude Code's Stop and its waiter) count once."""
    spans = sorted(
        (h["start"], h["start"] + h["secs"])
        for h in hooks
        if h.get("start") is not None and h.get("secs") is not None
    )
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _s(x: float | None, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.2f}" if sign else f"{x:.2f}"


def table(rows: list[dict]) -> str:
    """The printed table: one line per runtime, then its details."""
    head = (
        f"{'runtime':<10} {'version':<10} {'runs':>5} {'without':>8} {'with':>8} {'+s':>7} "
        f"{'paired':>7} {'traced':>8} {'+s':>7} {'hooks/run':>9} {'in hooks':>8}"
    )
    lines = [head]
    for r in rows:
        m = r["median_s"]
        runs = f"{min(r['runs']['without'], r['runs']['with'])}"
        hooks = "-" if r["hooks_per_run"] is None else f"{r['hooks_per_run']:g}"
        lines.append(
            f"{r['runtime']:<10} {str(r['version'] or '?')[:10]:<10} {runs:>5} "
            f"{_s(m['without']):>8} {_s(m['with']):>8} {_s(r['diff_s'], True):>7} "
            f"{_s(r['paired_diff_s'], True):>7} {_s(m['traced']):>8} "
            f"{_s(r['traced_diff_s'], True):>7} {hooks:>9} {_s(r['hook_wall_s_per_run']):>8}"
        )
    lines.append("")
    for r in rows:
        per = ", ".join(
            f"{e} {s:.3f} s" + (f" (x{n})" if n != r["runs"]["traced"] else "")
            for e, (s, n) in sorted(r["per_event_s"].items(), key=lambda p: -p[1][1])
        )
        total = "" if r["hook_s_per_run"] is None else f"; {r['hook_s_per_run']:.2f} s summed"
        lines.append(f"{r['runtime']}: per hook (median, traced runs): {per or 'none ran'}{total}")
        notes = []
        if r["hooked_runs"] and r["context_runs"] < r["hooked_runs"]:
            notes.append(
                f"relay's start context reached the model in {r['context_runs']} of "
                f"{r['hooked_runs']} runs with hooks"
            )
        turns = {m: t for m, t in r["turns"].items() if t}
        if len({tuple(t) for t in turns.values()}) > 1:
            notes.append(f"model requests a run differ by mode: {turns}")
        if r["hook_failures"]:
            notes.append(f"{r['hook_failures']} hook run(s) exited non-zero")
        if r["leftovers"]:
            notes.append(f"{r['leftovers']} process(es) outlived their run (ended after it)")
        for f in r["failed"]:
            notes.append(f"failed: round {f['round'] + 1} {f['mode']}: {f.get('why', '')}"[:300])
        lines += [f"  {n}" for n in notes]
    return "\n".join(lines)


# ------------------------------------------------------------------ running


def _use_wrapper(sb, wrapper: str, traced: bool) -> None:
    """The sandbox's ``relay`` (first on the runtimes' PATH, and in Codex's login shell):
    the event-keeping wrapper, or a link to the real relay."""
    target = sb.bin / "relay"
    tmp = sb.bin / ".relay.new"
    tmp.unlink(missing_ok=True)
    if traced:
        tmp.write_text(wrapper)
        tmp.chmod(0o755)
    else:
        tmp.symlink_to(sb.real_relay)
    os.replace(tmp, target)


def one_runtime(runtime: str, runs: int, warmup: int = 1, log=print, timeout: float = 90) -> dict:
    from e2e import harness

    mods = harness.install()
    sb = harness.Sandbox(mods)
    results: list[dict] = []
    try:
        sb.configure()
        settings = sb.home / harness.SETTINGS[runtime]
        plain = settings.read_bytes() if settings.exists() else None
        sb.install_hooks(runtime)
        hooked = settings.read_bytes()
        wrapper = (sb.bin / "relay").read_text()
        peer = f"{runtime}-1"
        for n in range(-warmup, runs):
            for mode in order(n):
                if mode == "without":
                    if plain is None:
                        settings.unlink(missing_ok=True)
                    else:
                        settings.write_bytes(plain)
                else:
                    settings.write_bytes(hooked)
                _use_wrapper(sb, wrapper, traced=mode == "traced")
                ident = sb.join(peer, runtime)
                seen = {f.name for f in sb.events.glob("ev.*")}
                turns0 = len(sb.model.log.model_turns())
                r = sb.headless(runtime, PROMPT, env=ident, timeout=timeout)
                turns = sb.model.log.model_turns()[turns0:]
                left = harness.kill_sandbox_processes(sb.dir, timeout=5)
                ok = r["code"] == 0
                run = {
                    "round": n,
                    "mode": mode,
                    "ok": ok,
                    "secs": r["secs"],
                    "turns": len(turns),
                    "context": any(START_CONTEXT in json.dumps(t["body"]) for t in turns),
                    "leftovers": len(left),
                }
                if not ok:
                    run["why"] = f"exit {r['code']}: {(r['err'] or r['out'])[-200:]!r}"
                new = _new_events(sb, seen)
                if mode == "traced":
                    run["hooks"] = new
                elif new:
                    run["why"] = f"{len(new)} hook event(s) through the wrapper in a {mode} run"
                    run["ok"] = False
                tag = "warm-up" if n < 0 else f"round {n + 1}"
                extra = f", {len(new)} hooks" if mode == "traced" else ""
                log(
                    f"  {runtime} {tag} {mode:<7} {r['secs']:6.2f} s (exit {r['code']}, "
                    f"{len(turns)} model request(s){extra}"
                    + (f", {len(left)} left over" if left else "")
                    + ")"
                )
                if n >= 0:
                    results.append(run)
        return summarize(runtime, results, harness.versions(mods).get(runtime))
    finally:
        sb.close()


def _new_events(sb, seen: set[str]) -> list[dict]:
    """The hook events kept since ``seen`` (names of the ev.* files before the run)."""
    out = []
    for f in sorted(sb.events.glob("ev.*")):
        if f.name in seen or f.suffix in (".meta", ".out", ".err"):
            continue
        meta = f.parent / (f.name + ".meta")
        lines = meta.read_text().splitlines() if meta.exists() else []
        try:
            doc = json.loads(f.read_text() or "null")
        except ValueError:
            doc = None
        name = (doc.get("hook_event_name") if isinstance(doc, dict) else None) or "?"
        if lines and "--wake" in lines[0].split():
            name += " (waiter)"
        start = float(lines[2]) if len(lines) > 2 else None
        end = float(lines[3]) if len(lines) > 4 else None
        out.append(
            {
                "event": name,
                "args": lines[0] if lines else "",
                "start": start,
                "secs": round(end - start, 4) if start is not None and end is not None else None,
                "exit": lines[4] if len(lines) > 4 else None,
            }
        )
    return sorted(out, key=lambda e: e["start"] or 0.0)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench e2ehooks", description=__doc__)
    p.add_argument("--runs", type=int, default=5, help="rounds counted (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="rounds run first, not counted")
    p.add_argument(
        "--runtime",
        action="append",
        choices=["claude", "codex", "gemini", "opencode", "copilot"],
        help="repeatable; default all five",
    )
    p.add_argument("--timeout", type=float, default=90, help="seconds a run may take")
    p.add_argument("--json", metavar="FILE", help="also write every run and figure here")
    p.add_argument(
        "--relay",
        metavar="PATH",
        help="the relay program the hooks run (say, one built from another commit; "
        "default: the one next to this Python)",
    )
    args = p.parse_args(argv)
    if args.relay:
        os.environ["RELAY_E2E_RELAY"] = os.path.abspath(args.relay)
    from e2e import harness

    try:
        harness.install()
        harness.enter_netns()
    except harness.Missing as e:
        print(f"e2ehooks: missing: {e}", file=sys.stderr)
        return 3
    machine = print_machine()
    relay = os.environ.get("RELAY_E2E_RELAY") or shutil.which(
        "relay", path=os.path.dirname(sys.executable)
    )
    print(f"relay: {relay}")
    t0 = time.monotonic()
    rows = []
    for rt in args.runtime or list(harness.RUNTIMES):
        try:
            rows.append(one_runtime(rt, args.runs, args.warmup, timeout=args.timeout))
        except harness.Missing as e:
            print(f"  {rt}: missing: {e}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the other runtimes are measured all the same
            why = f"{type(e).__name__}: {e}"
            print(f"  {rt}: stopped: {why}", file=sys.stderr)
            rows.append(
                summarize(rt, [{"round": 0, "mode": "-", "ok": False, "secs": 0.0, "why": why}])
            )
    print(
        f"\nheadless run, '{PROMPT}' (one model request), a joined peer, nothing queued; "
        f"median of {args.runs} rounds, seconds:"
    )
    print(table(rows))
    print(f"\n{time.monotonic() - t0:.0f} s in all; load average now: {os.getloadavg()}")
    if args.json:
        doc = {"machine": machine, "relay": relay, "runs": args.runs, "rows": rows}
        Path(args.json).write_text(json.dumps(doc, indent=2))
    return 0 if rows and all(r["runs"]["with"] and r["runs"]["without"] for r in rows) else 1
