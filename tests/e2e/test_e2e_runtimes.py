"""relay's hooks inside the real agent runtimes (design.md §12; docs/e2e.md).

The harness (``python -m e2e``) runs the pinned Claude Code, Codex, Gemini CLI and opencode against
scripted model servers on 127.0.0.1, in a loopback-only network namespace, once for this
module; each scenario on each runtime is one test here, asserting what the harness found
(the model's request bodies, relay's tables, every hook event against the fixtures).

Gated: set RELAY_E2E_TESTS=1 to run (root, Linux, npm, tmux, unshare). Without it the
tests skip with a reason; with RELAY_REQUIRE_E2E=1 a missing runtime or tool fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from e2e import scenarios  # noqa: E402

pytestmark = pytest.mark.one_backend  # the runtimes' hooks use the SQLite state dir

ENABLED = os.environ.get("RELAY_E2E_TESTS") == "1"
REQUIRED = os.environ.get("RELAY_REQUIRE_E2E") == "1"
CASES = [scenarios.case_id(n, rt, v) for n, rt, v, _ in scenarios.cases()]
VALIDATE = [
    f"hook_events_validate[{rt}]" for rt in ("claude", "codex", "gemini", "opencode", "copilot")
]


def _missing_tools() -> list[str]:
    import shutil

    need = ["npm", "node", "tmux", "unshare", "ip", "git"]
    out = [t for t in need if not shutil.which(t)]
    if os.geteuid() != 0:
        out.append("root (for unshare -n)")
    return out


def _unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"RELAY_REQUIRE_E2E=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if not ENABLED:
        _unavailable("the end-to-end harness runs with RELAY_E2E_TESTS=1 (docs/e2e.md)")
    missing = _missing_tools()
    if missing:
        _unavailable(f"the harness needs {', '.join(missing)}")
    out = tmp_path_factory.mktemp("e2e") / "results.json"
    r = subprocess.run(
        [sys.executable, "-m", "e2e", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,  # every scenario on every runtime: about 20 minutes on a loaded 2-core machine
    )
    sys.stdout.write(r.stdout)  # the numbers, shown with -s and in CI's log on failure
    if r.returncode == 3 or not out.exists():
        _unavailable(f"the harness could not start: {r.stderr.strip()[-1500:]}")
    doc = json.loads(out.read_text())
    if "missing" in doc:
        _unavailable(doc["missing"])
    return {res["case"]: res for res in doc["results"]} | {"_versions": doc["versions"]}


@pytest.mark.parametrize("case", CASES + VALIDATE)
def test_scenario_passes_in_the_real_runtime(harness, case):
    res = harness.get(case)
    if res is None:
        # hook_events_validate[...] exists only for runtimes that sent events
        pytest.fail(f"{case}: no result (no hook event reached relay?)")
    if res["ok"] is None:
        _unavailable(f"{case}: {res.get('error')}")
    print(case, harness["_versions"].get(res["runtime"]), json.dumps(res.get("facts"))[:800])
    assert res["ok"], f"{case} on {harness['_versions']}: {res.get('error')}"
