"""Review findings on the operating commands and the side-effect ledger (one test each).

Each test demonstrates behaviour that differed from design.md §2/§6/§10/§11/§12.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

DAY = 86400


def _in_pty(relay, *args: str) -> int:
    """Run a relay command whose standard input is a terminal (a person deciding)."""
    master, slave = os.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "relay_cli", *args], stdin=slave,
                           capture_output=True, env=relay._env(None), timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    return p.returncode


def test_denied_key_cannot_be_unlocked_without_a_terminal(relay, tmp_path):
    """design.md §10: after a denial every call with that key exits 10 and runs nothing; only a
    person at a terminal decides. `ledger resolve --outcome forget` from a non-terminal
    (an agent's shell, as the effect_unknown hint invites) must not undo the denial."""
    marker = tmp_path / "ran"
    cmd = ["sh", "-c", f"echo x >> {marker}"]
    r = relay("once", "--key", "deploy-1", "--approve", "--timeout", "0", "--", *cmd)
    assert r.code == 75, r.err
    assert _in_pty(relay, "deny", "deploy-1", "--note", "no") == 0
    # an agent (stdin not a terminal) tries to clear the denial
    relay("ledger", "resolve", "deploy-1", "--outcome", "forget")
    r = relay("once", "--key", "deploy-1", "--", *cmd)
    assert not marker.exists(), "the denied command ran after a non-terminal `forget`"
    assert r.code == 10, (r.code, r.err)


def test_prune_does_not_let_a_finished_key_run_again(relay, tmp_path):
    """design.md §1 + §4: retention must not turn a finished side effect into one
    that runs a second time; requests keep a tombstone for 120 days for exactly this."""
    marker = tmp_path / "ran"
    cmd = ["sh", "-c", f"echo x >> {marker}"]
    assert relay("once", "--key", "pr-create-1", "--", *cmd).code == 0
    later = {"RELAY_TIME_OFFSET": str(31 * DAY)}
    assert relay("prune", env=later).code == 0
    r = relay("once", "--key", "pr-create-1", "--", *cmd, env=later)
    assert r.code == 0
    assert marker.read_text().count("x") == 1, "the command ran twice after `relay prune`"


def test_ledger_does_not_call_a_crashed_entry_running(relay, tmp_path):
    """design.md §1 'never claims more than it knows': once relay and CMD are gone, `relay once`
    says effect_unknown, but `ledger list/show` still say `running`."""
    relay("peers", "list")  # create the home
    p = relay.popen("once", "--key", "crash-1", "--", "sleep", "30", start_new_session=True)
    try:
        child = None
        for _ in range(100):
            r = relay("ledger", "list", "--json")
            entries = r.json["entries"] if r.code == 0 else []
            if entries and entries[0]["child_pid"]:
                child = entries[0]["child_pid"]
                break
            time.sleep(0.05)
        assert child is not None
        p.kill()  # relay dies first ...
        p.wait()
        os.kill(child, signal.SIGKILL)  # ... then the command
        for _ in range(100):
            if not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split(") ")[1][0] == "Z":
                break
            time.sleep(0.02)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = relay("once", "--key", "crash-1", "--", "sleep", "30")
    assert r.code == 11, r.err  # effect_unknown: relay knows nothing is running
    entry = relay("ledger", "show", "crash-1", "--json").json
    assert entry["state"] != "running" or entry.get("effect_unknown") is True, entry
    human = relay("ledger", "list").out
    assert "running" not in human, human


def test_hook_with_malformed_option_exits_0_silently(relay):
    """design.md §12: the hook must never break the agent (exit 0, no output). Exit 2 from a
    UserPromptSubmit/Stop hook makes Claude Code block the prompt or the stop."""
    event = '{"hook_event_name": "UserPromptSubmit", "session_id": "cc-1", "prompt": "hi"}'
    r = relay("hook", "claude", "--lease", input=event, env={"RELAY_PEER": "c1"})
    assert (r.code, r.out, r.err) == (0, "", "")


@pytest.mark.sqlite_only
def test_doctor_creates_no_files(relay):
    """design.md §11: doctor creates nothing (§6: it writes nothing)."""
    assert relay("peers", "add", "al").code == 0
    before = sorted(os.listdir(relay.home))
    r = relay.proc("doctor")
    assert r.code == 0, r.out
    assert sorted(os.listdir(relay.home)) == before
