#!/usr/bin/env python3
"""Re-run the end-to-end harness against the newest published runtimes (docs/e2e.md).

``python scripts/e2e_latest.py [--baseline RESULTS.json] [--json OUT] [harness options]``

Asks npm for the newest version of each runtime pinned in ``e2e/package.json``
(``npm view PKG version``), writes a temporary package.json + lock with them
(``npm install --package-lock-only``), runs ``python -m e2e`` on it (installed with
``npm ci`` into the cache like the pinned set) and on the pinned set (or reads
``--baseline``), and reports what changed: versions, pass/fail per scenario, and the hook
event fields the runtimes now send beyond relay's fixture schemas (or no longer send).
Exit 0 when the newest versions pass everything, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "e2e"


def npm(*args: str, cwd: Path | None = None) -> str:
    r = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"npm {' '.join(args)} failed: {r.stderr.strip()[-800:]}")
    return r.stdout.strip()


def harness(lock_dir: Path, out: Path, extra: list[str]) -> dict:
    subprocess.run(
        [sys.executable, "-m", "e2e", "--lock-dir", str(lock_dir), "--json", str(out), *extra],
        cwd=ROOT,
    )
    return json.loads(out.read_text()) if out.exists() else {"missing": "no results"}


def by_case(doc: dict) -> dict:
    return {r["case"]: r for r in doc.get("results", [])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--baseline", help="results of the pinned set (python -m e2e --json)")
    p.add_argument("--json", help="write both results and the differences here")
    args, extra = p.parse_known_args(argv)
    pinned = json.loads((E2E / "package.json").read_text())
    newest = dict(pinned)
    newest["dependencies"] = {pkg: npm("view", pkg, "version") for pkg in pinned["dependencies"]}
    changed = {
        pkg: (old, newest["dependencies"][pkg])
        for pkg, old in pinned["dependencies"].items()
        if old != newest["dependencies"][pkg]
    }
    print("versions:")
    for pkg, old in pinned["dependencies"].items():
        new = newest["dependencies"][pkg]
        print(f"  {pkg}: pinned {old}, newest {new}{'' if old == new else '  <- changed'}")
    work = Path(tempfile.mkdtemp(prefix="relay-e2e-latest-"))
    try:
        lock = work / "lock"
        lock.mkdir()
        (lock / "package.json").write_text(json.dumps(newest, indent=2) + "\n")
        npm(
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            cwd=lock,
        )
        base = (
            json.loads(Path(args.baseline).read_text())
            if args.baseline
            else harness(E2E, work / "pinned.json", extra)
            if changed
            else None
        )
        new = harness(lock, work / "newest.json", extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "missing" in new:
        print(f"the newest set could not run: {new['missing']}")
        return 1
    old_cases, new_cases = by_case(base or new), by_case(new)
    print("\nscenario                                   pinned  newest")
    mark = {True: "pass", False: "FAIL", None: "skip"}
    for case in sorted(set(old_cases) | set(new_cases)):
        o = mark.get(old_cases.get(case, {}).get("ok"), "-") if base else "(same)"
        n = mark.get(new_cases.get(case, {}).get("ok"), "-")
        flag = "  <- changed" if base and o != n else ""
        print(f"  {case:<40} {o:>6}  {n:>6}{flag}")
    print("\nhook event fields vs relay's fixture schemas (tests/fixtures):")
    for rt, r in sorted(new.get("hook_events", {}).items()):
        before = (base or {}).get("hook_events", {}).get(rt, {})
        print(f"  {rt}: {r['count']} events {r['by_event']}")
        print(
            f"    fields sent beyond the schemas: {r['fields_added'] or 'none'}"
            + (f" (pinned: {before.get('fields_added') or 'none'})" if base else "")
        )
        gone = (
            {
                ev: sorted(set(f) - set(before.get("fields_never_sent", {}).get(ev, [])))
                for ev, f in r["fields_never_sent"].items()
            }
            if base
            else {}
        )
        gone = {ev: f for ev, f in gone.items() if f}
        if gone:
            print(f"    fields the pinned version sent and the newest does not: {gone}")
        for err in r["errors"][:5]:
            print(f"    schema error: {err}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"changed": changed, "pinned": base, "newest": new}, indent=1)
        )
    ok = all(r["ok"] is not False for r in new.get("results", []))
    print(f"\nnewest versions: {'everything passed' if ok else 'something FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
