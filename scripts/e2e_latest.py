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

Claude Code is published in two packages with the same binary: ``@anthropic-ai/claude-code``
and ``@anthropic-ai/claude-agent-sdk`` (whose ``claudeCodeVersion`` says which Claude Code
it carries; some releases came out only there). The newest set takes the SDK instead when
it carries a newer Claude Code; ``--claude-from code|sdk`` takes that package whatever it
carries. The harness runs the binary of the package installed (e2e/harness.py).
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
sys.path.insert(0, str(ROOT))

from e2e.harness import npm_cause, version_key  # noqa: E402


def npm(*args: str, cwd: Path | None = None) -> str:
    r = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"npm {' '.join(args)} failed: {npm_cause(r.stderr)}")
    return r.stdout.strip()


def prune_unserved(lock_dir: Path) -> list[str]:
    """Leave out of the generated lock the optional dependencies it holds no entry for.

    A package with platform packages (opencode-ai) names all of them as optional
    dependencies; ``npm install --package-lock-only`` writes an entry only for those the
    registry served (opencode-ai 1.18.33: the two for linux-x64 of twelve), and `npm ci`
    then refuses the lock as out of step with itself. The pinned lock was trimmed the same
    way (docs/e2e.md). Returns ``PKG: NAME`` for each one left out."""
    path = lock_dir / "package-lock.json"
    lock = json.loads(path.read_text())
    packages = lock.get("packages", {})
    dropped = []
    for where, entry in packages.items():
        optional = entry.get("optionalDependencies")
        if not optional:
            continue
        for name in list(optional):
            held = any(
                k == f"node_modules/{name}" or k.endswith(f"/node_modules/{name}") for k in packages
            )
            if not held:
                del optional[name]
                dropped.append(f"{where.removeprefix('node_modules/') or 'the root'}: {name}")
    if dropped:
        path.write_text(json.dumps(lock, indent=2) + "\n")
    return dropped


CLAUDE_CODE = "@anthropic-ai/claude-code"
CLAUDE_SDK = "@anthropic-ai/claude-agent-sdk"


def claude_from_sdk(deps: dict, choice: str) -> str | None:
    """Swap the Claude Code package for the Agent SDK when it carries a newer Claude Code
    (or when ``choice`` is ``sdk``); return a line saying which one the newest set tests."""
    if CLAUDE_CODE not in deps or choice == "code":
        return None
    code = deps[CLAUDE_CODE]
    sdk = json.loads(npm("view", CLAUDE_SDK, "version", "claudeCodeVersion", "--json"))
    carries = sdk.get("claudeCodeVersion") or "?"
    newer = carries != "?" and version_key(carries) > version_key(code)
    line = f"{CLAUDE_SDK} {sdk['version']} carries Claude Code {carries}"
    if choice == "sdk" or newer:
        del deps[CLAUDE_CODE]
        deps[CLAUDE_SDK] = sdk["version"]
        return f"{line}: the newest set tests its binary"
    return f"{line}: not newer than {CLAUDE_CODE} {code}"


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
    p.add_argument(
        "--claude-from",
        choices=("newest", "code", "sdk"),
        default="newest",
        help=f"Claude Code from {CLAUDE_CODE} (code), {CLAUDE_SDK} (sdk), or whichever "
        "carries the newer Claude Code (newest)",
    )
    args, extra = p.parse_known_args(argv)
    pinned = json.loads((E2E / "package.json").read_text())
    newest = dict(pinned)
    newest["dependencies"] = {pkg: npm("view", pkg, "version") for pkg in pinned["dependencies"]}
    via_sdk = claude_from_sdk(newest["dependencies"], args.claude_from)
    changed = {
        pkg: (pinned["dependencies"].get(pkg), new)
        for pkg, new in newest["dependencies"].items()
        if pinned["dependencies"].get(pkg) != new
    }
    print("versions:")
    for pkg in {**pinned["dependencies"], **newest["dependencies"]}:
        old, new = pinned["dependencies"].get(pkg, "-"), newest["dependencies"].get(pkg, "-")
        print(f"  {pkg}: pinned {old}, newest {new}{'' if old == new else '  <- changed'}")
    if via_sdk:
        print(f"  {via_sdk}")
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
        dropped = prune_unserved(lock)
        if dropped:
            print(
                f"left out of the newest lock, the registry serves no package for them: "
                f"{', '.join(dropped)}"
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
        # "-": the case was not run (e.g. `--runtime claude`); "skip": it could not run
        o = (mark[old_cases[case].get("ok")] if case in old_cases else "-") if base else "(same)"
        n = mark[new_cases[case].get("ok")] if case in new_cases else "-"
        flag = "  <- changed" if base and o != n and "-" not in (o, n) else ""
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
