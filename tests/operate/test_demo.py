"""`relay demo` (design.md §14): the main job with two real peer processes, narrated, in a
throwaway home that is never the person's own."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile

import pytest
from conftest import assert_fits


def test_demo_runs_the_main_job_and_leaves_nothing_behind(relay, tmp_path):
    r = relay.proc("demo", "--json", env={"TMPDIR": str(tmp_path)})
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    steps = [(s["who"], s["argv"][1:3]) for s in doc["steps"]]
    assert steps[:2] == [("alice", ["peers", "join"]), ("bob", ["peers", "join"])]
    by_cmd = {tuple(s["argv"][1:2]) + (s["who"],): s for s in doc["steps"]}
    sends = [s for s in doc["steps"] if s["argv"][1] == "send"]
    assert [s["result"]["duplicate"] for s in sends] == [False, True]  # the resend
    assert all(s["argv"][s["argv"].index("--id") + 1] == doc["id"] for s in sends)
    assert sends[1]["result"]["state"] == "completed"
    assert by_cmd[("claim", "bob")]["result"]["state"] == "delivered"
    assert by_cmd[("wait", "alice")]["exit_code"] == 0
    assert by_cmd[("wait", "alice")]["result"]["state"] == "completed"
    assert not os.path.exists(doc["home"]) and doc["kept"] is False
    assert list(tmp_path.iterdir()) == []  # the throwaway home is gone
    assert not relay.home.exists()  # and the person's own home was never touched


def test_demo_narrates_each_step_and_prints_the_tables_at_80_columns(relay, tmp_path):
    short = tempfile.mkdtemp(prefix="rd", dir="/tmp")  # the kept path is printed whole
    raw, text = relay.screen("demo", "--keep", cols=80, rows=24, env={"TMPDIR": short})
    lines = assert_fits(text, 80)
    assert "bob$ relay claim --wait 30s" in text
    assert "already sent, nothing new queued" in text
    assert "alice's wait returned: state completed, exit 0" in text
    table = lines.index("  $ relay list") + 1
    assert lines[table].split() == ["id", "state", "from", "to", "reason", "since"]
    assert lines[table + 1].split()[1:4] == ["completed", "alice", "bob"]
    assert "events (" in text and "\x1b[" in raw
    kept = lines.index("The home was kept; to look around in it:")
    export, *assignments = shlex.split(lines[kept + 1])
    assert export == "export" and assignments[0].startswith("RELAY_HOME=")
    # on PostgreSQL the line also empties RELAY_DATABASE_URL: the demo ran on a relay.db
    assert assignments[1:] == ([] if relay.backend == "sqlite" else ["RELAY_DATABASE_URL="])
    listed = relay.proc("list", "--json", env=dict(a.split("=", 1) for a in assignments))
    assert [r["state"] for r in listed.json["requests"]] == ["completed"]
    shutil.rmtree(short)


@pytest.mark.one_backend
def test_demo_refuses_a_home_that_holds_anything(relay, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    r = relay.proc("demo", "--home", str(full))
    assert r.code == 2 and "usage_error" in r.err
    assert [p.name for p in full.iterdir()] == ["keep.txt"]


def test_a_home_relay_refuses_is_reported_with_relays_own_code(tmp_path):
    """--home on an empty directory open to others: the step's unsafe_state_dir is passed
    on (exit 7), not reported as a bug in relay."""
    import json
    import os
    import subprocess
    import sys

    home = tmp_path / "open-home"
    home.mkdir()
    os.chmod(home, 0o755)
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "demo", "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 7, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["error"]["code"] == "unsafe_state_dir"
