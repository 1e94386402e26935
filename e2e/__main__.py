"""``python -m e2e [--scenario S]... [--runtime R]... [--json OUT] [--keep]``

Runs relay's end-to-end harness (docs/e2e.md): installs the pinned runtimes (npm ci into
the cache, once), enters a loopback-only network namespace, runs every scenario on every
runtime it applies to, checks every hook event against the fixture schemas, prints a table
and (with --json) writes the results. Exit 0 when everything passed, 1 when something
failed, 3 when a runtime or a tool is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

from . import events, harness, scenarios, tokens


def run_all(args) -> dict:
    mods = harness.install(args.lock_dir)
    harness.enter_netns()
    progs = harness.programs(mods)
    out = {"versions": harness.versions(mods), "results": [], "hook_events": {}}
    all_events = []
    for name, rt, variant, fn in scenarios.cases(args.scenario, args.runtime):
        cid = scenarios.case_id(name, rt, variant)
        res = {"case": cid, "scenario": name, "runtime": rt, "variant": variant}
        if rt not in progs:
            res.update(ok=None, error=f"{rt} is not installed")
            out["results"].append(res)
            continue
        t0 = time.monotonic()
        sb = harness.Sandbox(mods, keep=args.keep)
        try:
            res["facts"] = fn(sb, rt, variant)
            res["ok"] = True
        except AssertionError as e:
            res.update(ok=False, error=str(e)[-3000:])
        except Exception:  # a harness error is a failure too, with its traceback
            res.update(ok=False, error=traceback.format_exc()[-3000:])
        finally:
            if name in scenarios.TOKEN_SCENARIOS:
                try:  # what relay's texts cost as they reached the model (e2e/tokens.py)
                    res["tokens"] = getattr(sb, "token_facts", None) or tokens.analyse(sb)
                except Exception:
                    res["tokens_error"] = traceback.format_exc()[-1500:]
            evs = sb.hook_events()
            for e in evs:
                e["case"] = cid
            all_events += evs
            res["hook_events"] = [
                f"{e['args']} {e['event'].get('hook_event_name') if isinstance(e['event'], dict) else '?'} ({e['env']})"
                for e in evs
            ]
            if args.keep:
                res["dir"] = str(sb.dir)
            sb.close()
        res["secs"] = round(time.monotonic() - t0, 1)
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[res["ok"]]
        print(f"{mark} {cid} ({res['secs']} s) {json.dumps(res.get('facts'))[:300]}", flush=True)
        if res["ok"] is False:
            print("   " + res["error"].replace("\n", "\n   ")[:2000], flush=True)
        out["results"].append(res)
    checked = events.check(all_events)
    out["hook_events"] = checked
    for rt, r in checked.items():
        ok = not r["errors"]
        out["results"].append(
            {
                "case": f"hook_events_validate[{rt}]",
                "scenario": "hook_events_validate",
                "runtime": rt,
                "variant": "",
                "ok": ok,
                "facts": r,
                "error": "; ".join(r["errors"])[:3000],
            }
        )
        print(
            f"{'PASS' if ok else 'FAIL'} hook_events_validate[{rt}] "
            f"{r['count']} events {r['by_event']} added {r['fields_added']}",
            flush=True,
        )
        if not ok:
            print("   " + "\n   ".join(r["errors"][:10]), flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m e2e", description=__doc__.split("\n\n")[1])
    p.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
    p.add_argument("--runtime", action="append", help="only this runtime (repeatable)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--keep", action="store_true", help="keep each sandbox directory")
    p.add_argument(
        "--install-only",
        action="store_true",
        help="only npm ci the pinned runtimes into the cache; print where",
    )
    p.add_argument(
        "--lock-dir",
        default=str(harness.E2E),
        help="the directory of package.json + package-lock.json to install",
    )
    args = p.parse_args(argv)
    from pathlib import Path

    args.lock_dir = Path(args.lock_dir)
    try:
        if args.install_only:
            mods = harness.install(args.lock_dir)
            print(f"e2e: {harness.versions(mods)} in {mods}")
            return 0
        out = run_all(args)
    except harness.Missing as e:
        print(f"e2e: missing: {e}", file=sys.stderr)
        if args.json:
            Path(args.json).write_text(json.dumps({"missing": str(e)}))
        return 3
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    res = out["results"]
    passed = sum(r["ok"] is True for r in res)
    failed = sum(r["ok"] is False for r in res)
    print(f"e2e: {out['versions']}: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
