"""`relay once` and the side-effect ledger (design.md §10), through the real relay command."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DAY, at, fake_crash, refused

from relay_cli.core import clock
from relay_cli.ledger import entries as ledger
from relay_cli.ledger import once
from relay_cli.operate import retention


# ------------------------------------------------------------------ helpers
def counter(tmp_path: Path, name: str = "runs") -> tuple[Path, list[str]]:
    """A command that appends one line to a file each time it really runs."""
    path = tmp_path / name
    return path, ["sh", "-c", f"echo run >> {path}; echo out; echo err >&2"]


def runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def entry(relay, key: str) -> dict | None:
    r = relay("ledger", "show", key, "--json")
    return r.json if r.code == 0 else None


def wait_until(predicate, timeout: float = 15.0, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ------------------------------------------------------------------ runs once, replays
def test_runs_once_then_replays_stored_output_and_exit_code(relay, tmp_path):
    path, cmd = counter(tmp_path)
    first = relay("once", "--key", "toolu_01", "--", *cmd[:2], cmd[2] + "; exit 3")
    assert first.code == 3
    assert first.out == "out\n" and first.err == "err\n"
    assert runs(path) == 1
    again = relay.proc("once", "--key", "toolu_01", "--", *cmd[:2], cmd[2] + "; exit 3")
    assert again.code == 3
    assert again.out == "out\n"
    assert again.err.startswith("err\n") and "replayed" in again.err
    assert runs(path) == 1
    doc = relay("once", "--key", "toolu_01", "--json", "--", *cmd[:2], cmd[2] + "; exit 3")
    assert doc.code == 3
    obj = doc.json  # exactly one JSON document on stdout
    assert obj["replayed"] is True and obj["state"] == "failed" and obj["exit_code"] == 3
    assert obj["stdout"] == "out\n" and obj["stderr"] == "err\n"
    assert obj["argv"] == cmd[:2] + [cmd[2] + "; exit 3"] and obj["cwd"] == os.getcwd()
    assert runs(path) == 1


def test_json_run_captures_stdout_into_the_one_document(relay, tmp_path):
    path, cmd = counter(tmp_path)
    r = relay.proc("once", "--key", "k-json", "--json", "--", *cmd)
    assert r.code == 0
    obj = json.loads(r.out)
    assert obj["replayed"] is False and obj["state"] == "succeeded" and obj["exit_code"] == 0
    assert obj["stdout"] == "out\n" and obj["stderr"] == "err\n"
    assert r.err == "err\n"  # stderr still streams
    for field in (
        "key",
        "state",
        "argv",
        "cwd",
        "exit_code",
        "created_at",
        "started_at",
        "finished_at",
        "stdout_bytes",
        "stderr_bytes",
    ):
        assert field in obj
    assert obj["finished_at"].endswith("Z")


def test_exit_codes_and_signals_pass_through(relay, tmp_path):
    assert relay("once", "--key", "e0", "--", "true").code == 0
    assert relay("once", "--key", "e1", "--", "sh", "-c", "exit 42").code == 42
    killed = relay("once", "--key", "e2", "--", "sh", "-c", "kill -TERM $$")
    assert killed.code == 128 + signal.SIGTERM
    obj = entry(relay, "e2")
    assert obj["state"] == "failed" and obj["exit_code"] == 143 and obj["signal"] == 15
    replay = relay("once", "--key", "e2", "--", "sh", "-c", "kill -TERM $$")
    assert replay.code == 143 and "replayed" in replay.err


def test_sigterm_to_relay_is_forwarded_to_the_command(relay, tmp_path):
    script = 'trap "echo got-term; exit 7" TERM; echo ready; sleep 30 & wait'
    p = relay.popen("once", "--key", "fwd", "--", "sh", "-c", script)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 7
    assert out == b"got-term\n"
    assert entry(relay, "fwd")["stdout"] == "ready\ngot-term\n"


def test_command_not_found_or_not_executable_keeps_the_key_free(relay, tmp_path):
    r = relay("once", "--key", "nf", "--", "relay-no-such-command-xyz")
    assert r.code == 127 and "command not found" in r.err
    assert entry(relay, "nf") is None  # nothing ran: no entry blocks a retry
    plain = tmp_path / "not-exec"
    plain.write_text("#!/bin/sh\necho hi\n")
    r = relay("once", "--key", "nx", "--", str(plain))
    assert r.code == 126 and "not executable" in r.err
    assert entry(relay, "nx") is None
    plain.chmod(0o755)
    assert relay("once", "--key", "nx", "--", str(plain)).code == 0
    assert entry(relay, "nx")["state"] == "succeeded"
    doc = relay("once", "--key", "nf2", "--json", "--", "relay-no-such-command-xyz")
    assert doc.code == 127 and doc.json["state"] == "not_started"


# ------------------------------------------------------------------ refusals
def test_key_conflict_runs_nothing_and_changes_nothing(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "same", "--", *cmd).code == 0
    before = relay.snapshot()
    r = relay("once", "--key", "same", "--json", "--", "sh", "-c", f"echo run >> {path}")
    assert r.code == 4 and r.error["code"] == "key_conflict"
    assert r.out == ""
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "once", "--key", "same", "--", *cmd],
        cwd=elsewhere,
        capture_output=True,
        env=relay._env(None),
    )
    assert p.returncode == 4 and b"key_conflict" in p.stderr  # same argv, other directory
    assert relay.snapshot() == before
    assert runs(path) == 1


@pytest.mark.parametrize("key", ["", "has space", "tab\there", "é", "x" * 201, "nul\x7f"])
def test_invalid_keys_are_refused(relay, tmp_path, key):
    path, cmd = counter(tmp_path)
    r = relay("once", "--key", key, "--json", "--", *cmd)
    assert r.code == 2 and r.error["code"] == "invalid_key"
    assert runs(path) == 0
    assert relay("ledger", "show", key, "--json").error["code"] == "invalid_key"


def test_longest_and_oddest_valid_keys_run(relay, tmp_path):
    for key in ("x" * 200, "!", "~", "toolu_01AbC:-/=+{}"):
        assert relay("once", "--key", key, "--", "true").code == 0, key
        assert entry(relay, key)["state"] == "succeeded"


def test_once_without_a_command_is_a_usage_error(relay):
    r = relay("once", "--key", "k", "--json")
    assert r.code == 2 and r.error["code"] == "usage_error"
    assert r.error["message"] == "no command given: relay once --key KEY -- CMD [ARGS]..."


def test_show_of_unknown_key_is_not_found(relay):
    relay("once", "--key", "k", "--", "true")
    r = relay("ledger", "show", "nope", "--json")
    assert r.code == 3 and r.error["code"] == "ledger_key_not_found"
    r = relay("ledger", "resolve", "nope", "--outcome", "forget", "--json")
    assert r.code == 3


# ------------------------------------------------------------------ crashes
def _start_sleeper(relay, tmp_path, key: str, *extra: str):
    marker = tmp_path / f"{key}.started"
    path, _ = counter(tmp_path, f"{key}.runs")
    cmd = ["sh", "-c", f"echo run >> {path}; touch {marker}; sleep 60"]
    p = relay.popen("once", "--key", key, *extra, "--", *cmd)
    wait_until(marker.exists, what="the command to start")
    obj = wait_until(
        lambda: (e := entry(relay, key)) and e["child_pid"] and e, what="the child pid"
    )
    return p, cmd, path, obj


def test_running_key_in_another_process_is_in_progress(relay, tmp_path):
    p, cmd, path, _ = _start_sleeper(relay, tmp_path, "busy")
    try:
        r = relay("once", "--key", "busy", "--json", "--", *cmd)
        assert r.code == 75 and r.error["code"] == "in_progress" and r.error["retryable"]
        assert json.loads(r.out)["state"] == "running"
        assert runs(path) == 1
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=20)
    assert p.returncode == 143
    assert entry(relay, "busy")["state"] == "failed"


def test_crash_between_start_and_record_is_effect_unknown_and_runs_nothing(relay, tmp_path):
    p, cmd, path, obj = _start_sleeper(relay, tmp_path, "crash")
    assert obj["state"] == "running" and obj["pid"] == p.pid
    os.kill(p.pid, signal.SIGKILL)
    os.kill(obj["child_pid"], signal.SIGKILL)
    p.wait(timeout=10)
    wait_until(
        lambda: not alive(obj["child_pid"]) or _zombie(obj["child_pid"]), what="the child to die"
    )
    shown = entry(relay, "crash")  # the stored state is running; the view says what is known
    assert shown["state"] == "effect_unknown" and shown["effect_unknown"] is True
    before = relay.snapshot()
    r = relay("once", "--key", "crash", "--json", "--", *cmd)
    assert r.code == 11 and r.error["code"] == "effect_unknown"
    assert "relay ledger resolve" in r.error["hint"]
    assert json.loads(r.out)["state"] == "effect_unknown"
    assert runs(path) == 1 and relay.snapshot() == before
    # a person checked: it did happen -> later calls replay success without running
    res = relay(
        "ledger", "resolve", "crash", "--outcome", "succeeded", "--note", "PR exists", "--json"
    )
    assert res.code == 0 and res.json["state"] == "succeeded"
    assert res.json["resolved_by"].startswith("person:")
    assert res.json["resolution_note"] == "PR exists"
    assert relay("once", "--key", "crash", "--", *cmd).code == 0
    assert runs(path) == 1


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_forget_lets_the_key_run_again(relay, tmp_path):
    p, cmd, path, obj = _start_sleeper(relay, tmp_path, "forget")
    os.kill(p.pid, signal.SIGKILL)
    os.kill(obj["child_pid"], signal.SIGKILL)
    p.wait(timeout=10)
    wait_until(lambda: not alive(obj["child_pid"]) or _zombie(obj["child_pid"]))
    assert relay("once", "--key", "forget", "--", *cmd).code == 11
    r = relay("ledger", "resolve", "forget", "--outcome", "forget", "--json")
    assert r.code == 0 and r.json["state"] == "forgotten"
    short = ["sh", "-c", cmd[2].replace("sleep 60", "true")]
    assert relay("once", "--key", "forget", "--", *short).code == 0  # any command: key is new
    assert runs(path) == 2
    assert entry(relay, "forget")["state"] == "succeeded"


def test_idempotent_entry_runs_again_after_a_crash(relay, tmp_path):
    p, cmd, path, obj = _start_sleeper(relay, tmp_path, "idem", "--idempotent")
    os.kill(p.pid, signal.SIGKILL)
    os.kill(obj["child_pid"], signal.SIGKILL)
    p.wait(timeout=10)
    wait_until(lambda: not alive(obj["child_pid"]) or _zombie(obj["child_pid"]))
    q = relay.popen("once", "--key", "idem", "--", *cmd)
    wait_until(lambda: runs(path) == 2, what="the rerun")
    again = wait_until(lambda: (e := entry(relay, "idem")) and e["pid"] == q.pid and e)
    assert again["runs"] == 2 and again["state"] == "running"
    q.send_signal(signal.SIGTERM)
    q.communicate(timeout=20)
    assert q.returncode == 143


def test_a_reused_pid_with_another_start_time_is_not_the_original_process(relay, tmp_path):
    # the entry names this very pid, but with a start time it never had
    assert relay("once", "--key", "reuse", "--", "true").code == 0
    store = relay.open_store()
    try:
        with store.transaction():
            store.update_ledger(
                "reuse",
                {
                    "state": "running",
                    "pid": os.getpid(),
                    "process_start": "other-boot:1",
                    "child_pid": os.getpid(),
                    "child_start": "other-boot:2",
                    "host": ledger.this_host(),
                },
            )
    finally:
        store.close()
    r = relay("once", "--key", "reuse", "--json", "--", "true")
    assert r.code == 11 and r.error["code"] == "effect_unknown"


# ------------------------------------------------------------------ parallel
def test_eight_parallel_calls_with_one_key_run_the_command_exactly_once(relay, tmp_path):
    path = tmp_path / "par.runs"
    cmd = ["sh", "-c", f"echo run >> {path}; sleep 0.3; echo done"]
    relay("once", "--key", "warmup", "--", "true")  # create the database first
    procs = [relay.popen("once", "--key", "par", "--", *cmd) for _ in range(8)]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    assert runs(path) == 1
    codes = sorted(code for code, _, _ in results)
    assert set(codes) <= {0, 75}, results
    assert codes.count(0) >= 1
    for code, out, err in results:
        if code == 0:
            assert out == b"done\n"  # the run or its replay
        else:
            assert b"in_progress" in err


# ------------------------------------------------------------------ large output
MEASURE = r"""
import json, resource, subprocess, sys
p = subprocess.Popen([sys.executable, "-m", "relay_cli", "once", "--key", sys.argv[2], "--",
                      "sh", "-c", sys.argv[1]], stdout=subprocess.PIPE)
n, last = 0, b""
while True:
    chunk = p.stdout.read1(1 << 20)
    if not chunk:
        break
    n += len(chunk)
    last = (last + chunk)[-16:]
p.wait()
print(json.dumps({"bytes": n, "last": last.decode("latin-1"), "rc": p.returncode,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _measure(relay, tmp_path, shell: str, key: str) -> dict:
    script = tmp_path / "measure.py"
    script.write_text(MEASURE)
    p = subprocess.run(
        [sys.executable, str(script), shell, key],
        capture_output=True,
        env=relay._env(None),
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_large_output_streams_whole_keeps_its_tail_and_memory_stays_flat(relay, tmp_path):
    size = 200 * 1024 * 1024
    base = _measure(relay, tmp_path, "true", "small")
    big = _measure(
        relay,
        tmp_path,
        f"head -c {size} /dev/zero; printf END; head -c 100000 /dev/zero >&2; printf ERR >&2",
        "big",
    )
    assert big["rc"] == 0
    assert big["bytes"] == size + 3 and big["last"].endswith("END")  # streamed whole
    growth_kib = big["maxrss_kib"] - base["maxrss_kib"]
    assert growth_kib < 8 * 1024, (base, big)  # flat: not 200 MiB, not even 8 MiB
    obj = entry(relay, "big")
    assert obj["stdout_bytes"] == size + 3 and obj["stdout_truncated"] is True
    assert len(obj["stdout"]) == 64 * 1024 and obj["stdout"].endswith("\0\0END")
    assert obj["stderr_bytes"] == 100003 and len(obj["stderr"]) == 64 * 1024
    assert obj["stderr"].endswith("ERR")


def test_a_replay_of_a_cut_output_says_how_much_was_kept(relay):
    """The replay note quotes the kept tail from the one limit (core/limits.py)."""
    from relay_cli.core.limits import TAIL_BYTES

    cmd = ("once", "--key", "cut", "--", "sh", "-c", f"head -c {TAIL_BYTES + 10} /dev/zero")
    assert relay(*cmd).code == 0
    r = relay(*cmd)
    assert r.code == 0 and f"only the last {TAIL_BYTES // 1024} KiB of stdout was kept" in r.err


def test_tail_keeps_exactly_the_last_bytes():
    t = once.Tail(10)
    for chunk in (b"abc", b"defghij", b"klm", b"n" * 3, b"0123456789ABC"):
        t.add(chunk)
    assert t.bytes() == b"3456789ABC" and t.total == 29


# ------------------------------------------------------------------ approval
def test_approve_and_deny_from_a_non_terminal_are_refused_and_change_nothing(relay, tmp_path):
    path, cmd = counter(tmp_path)
    r = relay("once", "--key", "gate", "--approve", "--timeout", "0", "--json", "--", *cmd)
    assert r.code == 75 and r.error["code"] == "timeout"
    doc = json.loads(r.out)
    assert doc["state"] == "awaiting_approval" and doc["key"] == "gate"
    assert doc["argv"] == cmd and doc["cwd"] == os.getcwd()
    before = relay.snapshot()
    for args in (("approve", "gate"), ("deny", "gate", "--note", "no")):
        inproc = relay(*args, "--json")
        assert inproc.code == 5 and inproc.error["code"] == "approval_needs_terminal"
        piped = relay.proc(*args, input="y\n")
        assert piped.code == 5 and "approval_needs_terminal" in piped.err
    assert relay.snapshot() == before
    assert runs(path) == 0


def test_approval_in_a_terminal_lets_the_waiting_call_run_exactly_once(relay, tmp_path):
    path, cmd = counter(tmp_path)
    waiter = relay.popen("once", "--key", "deploy", "--approve", "--timeout", "60", "--", *cmd)
    wait_until(
        lambda: (e := entry(relay, "deploy")) and e["state"] == "awaiting_approval",
        what="the entry to await approval",
    )
    assert runs(path) == 0
    # another caller with the same key keeps waiting too, and runs nothing
    second = relay("once", "--key", "deploy", "--timeout", "0", "--", *cmd)
    assert second.code == 75 and runs(path) == 0
    t0 = time.monotonic()
    decided = relay.at_terminal("approve", "deploy", "--yes", "--json")
    assert decided.returncode == 0, decided.stderr
    obj = json.loads(decided.stdout)
    assert obj["state"] == "approved" and obj["decided_by"].startswith("person:")
    assert obj["decided_at"] is not None
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert time.monotonic() - t0 < 10
    assert out == b"out\n" and b"needs a person's approval" in err
    assert b"sh -c" in err and b"deploy" in err  # the exact command and key were shown
    assert runs(path) == 1
    # later calls replay without asking again
    again = relay("once", "--key", "deploy", "--approve", "--timeout", "0", "--json", "--", *cmd)
    assert again.code == 0 and again.json["replayed"] is True
    assert runs(path) == 1
    # the approval was for this command only
    other = relay("once", "--key", "deploy", "--approve", "--json", "--", "sh", "-c", "true")
    assert other.code == 4 and other.error["code"] == "key_conflict"


def test_approval_before_the_next_call_runs_it_on_that_call(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "later", "--approve", "--timeout", "0", "--", *cmd).code == 75
    assert relay.at_terminal("approve", "later", "--yes").returncode == 0
    r = relay("once", "--key", "later", "--approve", "--timeout", "0", "--", *cmd)
    assert r.code == 0 and runs(path) == 1
    assert relay("once", "--key", "later", "--", *cmd).code == 0 and runs(path) == 1


def test_deny_makes_every_call_exit_10_without_running(relay, tmp_path):
    path, cmd = counter(tmp_path)
    waiter = relay.popen(
        "once", "--key", "nope", "--approve", "--timeout", "60", "--json", "--", *cmd
    )
    wait_until(lambda: (e := entry(relay, "nope")) and e["state"] == "awaiting_approval")
    decided = relay.at_terminal("deny", "nope", "--note", "not today", "--json")
    assert decided.returncode == 0, decided.stderr
    assert json.loads(decided.stdout)["decision_note"] == "not today"
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 10
    assert json.loads(out)["state"] == "denied"
    assert b'"code": "denied"' in err
    for extra in ((), ("--approve",), ("--idempotent",)):
        r = relay("once", "--key", "nope", *extra, "--json", "--", *cmd)
        assert r.code == 10 and r.error["code"] == "denied"
    assert runs(path) == 0
    assert relay.at_terminal("approve", "nope", "--yes").returncode == 4  # a denial stands


def test_a_key_that_already_ran_replays_without_asking(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "ran", "--", *cmd).code == 0
    r = relay("once", "--key", "ran", "--approve", "--timeout", "0", "--", *cmd)
    assert r.code == 0 and "replayed" in r.err and "approval" not in r.err
    assert runs(path) == 1


def test_awaiting_entries_are_listed(relay, tmp_path):
    _, cmd = counter(tmp_path)
    relay("once", "--key", "w1", "--approve", "--timeout", "0", "--", *cmd)
    relay("once", "--key", "done", "--", "true")
    listed = relay("ledger", "list", "--json")
    assert listed.code == 0
    states = {e["key"]: e["state"] for e in listed.json["entries"]}
    assert states == {"w1": "awaiting_approval", "done": "succeeded"}
    assert "stdout" not in listed.json["entries"][0]  # no bodies in the list
    only = relay("ledger", "list", "--state", "awaiting_approval", "--json").json["entries"]
    assert [e["key"] for e in only] == ["w1"]
    human = relay("ledger", "list")
    assert "awaiting_approval" in human.out and "approve" in human.out
    store = relay.open_store()
    try:
        assert [e["key"] for e in ledger.awaiting(store, store.clock.now_ms())] == ["w1"]
    finally:
        store.close()
    assert relay("ledger", "list", "--state", "bogus").code == 2


# ------------------------------------------------------------------ retention
def test_prune_keeps_a_tombstone_that_still_replays_and_still_denies(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "pr-1", "--", *cmd).code == 0
    assert relay("once", "--key", "bad", "--", "sh", "-c", "echo no; exit 3").code == 3
    assert relay("once", "--key", "dep", "--approve", "--timeout", "0", "--", *cmd).code == 75
    assert relay.at_terminal("deny", "dep", "--note", "no").returncode == 0
    assert relay("once", "--key", "wait", "--approve", "--timeout", "0", "--", "true").code == 75
    assert relay("once", "--key", "gone", "--", "true").code == 0
    fake_crash(relay, "gone")  # effect_unknown: never touched by prune

    # after the retention (30 days): only the captured output goes
    r = relay("prune", "--json", env=at(31 * DAY))
    assert r.code == 0
    assert r.json["ledger"] == {
        "entries_pruned": 2,
        "entries_removed": 0,
        "by_state": {},
        "dry_run": False,
    }
    assert relay("prune", "--json", env=at(31 * DAY)).json["ledger"]["entries_pruned"] == 0
    again = relay("once", "--key", "pr-1", "--", *cmd, env=at(31 * DAY))
    assert again.code == 0 and runs(path) == 1
    assert again.out == "" and "removed by `relay prune`" in again.err
    doc = relay(
        "once", "--key", "bad", "--json", "--", "sh", "-c", "echo no; exit 3", env=at(31 * DAY)
    )
    assert doc.code == 3 and doc.json["replayed"] is True and doc.json["output_pruned"] is True
    assert doc.json["stdout"] is None and doc.json["stdout_bytes"] == 3
    assert relay("once", "--key", "dep", "--", *cmd, env=at(31 * DAY)).code == 10
    shown = relay("ledger", "show", "pr-1", env=at(31 * DAY))
    assert "removed by `relay prune`" in shown.out and "--- stdout" not in shown.out

    # still within 120 days: nothing is removed
    r = relay("prune", "--json", env=at(119 * DAY))
    assert r.json["ledger"]["entries_removed"] == 0
    # --older-than longer than 120 days moves the tombstone cutoff too (as for requests)
    r = relay("prune", "--older-than", "200d", "--json", env=at(150 * DAY))
    assert r.json["ledger"] == {
        "entries_pruned": 0,
        "entries_removed": 0,
        "by_state": {},
        "dry_run": False,
    }
    assert relay("once", "--key", "dep", "--", *cmd, env=at(150 * DAY)).code == 10

    # after 120 days the tombstones go; running and awaiting entries stay
    dry = relay("prune", "--dry-run", "--json", env=at(121 * DAY))
    assert dry.json["ledger"] == {
        "entries_pruned": 0,
        "entries_removed": 3,
        "by_state": {"denied": 1, "failed": 1, "succeeded": 1},
        "dry_run": True,
    }
    before = relay.snapshot()
    assert relay("prune", "--dry-run", env=at(121 * DAY)).code == 0
    assert relay.snapshot() == before
    assert relay("prune", "--json", env=at(121 * DAY)).json["ledger"]["entries_removed"] == 3
    left = {e["key"]: e["state"] for e in relay("ledger", "list", "--json").json["entries"]}
    assert left == {"wait": "awaiting_approval", "gone": "effect_unknown"}
    assert relay("once", "--key", "pr-1", "--", *cmd, env=at(121 * DAY)).code == 0
    assert runs(path) == 2  # only now is the key new again


def test_ledger_prune_function_counts_match_what_it_does(relay):
    relay("once", "--key", "a", "--", "true")
    relay("once", "--key", "b", "--", "false")
    relay("once", "--key", "c", "--", "echo", "c")
    assert relay("ledger", "resolve", "c", "--outcome", "forget").code == 0
    store = relay.open_store()
    try:
        now = clock.Clock().now_ms()
        with store.transaction():
            store.update_ledger("a", {"updated_at": now - 200 * DAY * 1000})
        body = now + 1000
        dry = retention.prune_ledger(store, now, body, dry_run=True)
        assert dry == {
            "entries_pruned": 2,
            "entries_removed": 1,
            "by_state": {"succeeded": 1},
            "dry_run": True,
        }
        assert retention.prune_ledger(store, now, body, batch=1) == {**dry, "dry_run": False}
        assert sorted(r["key"] for r in store.list_ledger()) == ["b", "c"]
        for key in ("b", "c"):  # a forgotten entry's output goes too
            assert store.get_ledger(key)["output_pruned_at"] == now
            assert store.get_ledger(key)["stdout"] is None
        assert store.get_ledger("b")["exit_code"] == 1
    finally:
        store.close()


def test_ledger_prune_pauses_after_every_full_batch_like_request_prune(relay, monkeypatch):
    """Between two batches prune lets waiting writers in (design.md §4): the ledger's
    batches go through the same pause as the requests'."""
    for key in ("a", "b", "c"):
        assert relay("once", "--key", key, "--", "true").code == 0
    pauses = []
    monkeypatch.setattr(retention.time, "sleep", pauses.append)
    store = relay.open_store()
    try:
        now = clock.Clock().now_ms()
        with store.transaction():
            store.update_ledger("a", {"updated_at": now - 200 * DAY * 1000})
        counts = retention.prune_ledger(store, now, now + 1000, batch=1)
    finally:
        store.close()
    assert (counts["entries_removed"], counts["entries_pruned"]) == (1, 2)
    # removal: 1 full batch, then a short one; output: 2 full batches, then a short one
    assert len(pauses) == 3 and all(0.005 <= p <= 0.1 for p in pauses), pauses


# ------------------------------------------------------------------ a person's approval stands
def test_resolve_of_an_approval_entry_needs_a_terminal(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "gate", "--approve", "--timeout", "0", "--", *cmd).code == 75
    assert relay("once", "--key", "no", "--approve", "--timeout", "0", "--", *cmd).code == 75
    assert relay.at_terminal("deny", "no").returncode == 0
    before = relay.snapshot()
    for key in ("gate", "no"):
        for outcome in ("forget", "succeeded", "failed"):
            r = relay("ledger", "resolve", key, "--outcome", outcome, "--json")
            assert r.code == 5 and r.error["code"] == "approval_needs_terminal", r.err
        piped = relay.proc("ledger", "resolve", key, "--outcome", "forget", input="y\n")
        assert piped.code == 5 and "approval_needs_terminal" in piped.err
    assert relay.snapshot() == before
    assert relay("once", "--key", "no", "--", *cmd).code == 10
    # a person at a terminal may forget a denial; the key then asks for approval again
    assert relay.at_terminal("ledger", "resolve", "no", "--outcome", "forget").returncode == 0
    r = relay("once", "--key", "no", "--timeout", "0", "--json", "--", *cmd)  # no --approve
    assert r.code == 75 and r.error["code"] == "timeout"
    assert r.json["state"] == "awaiting_approval" and r.json["approval_required"] is True
    assert runs(path) == 0


def test_forgetting_an_approved_entry_keeps_the_approval_requirement(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "ap", "--approve", "--timeout", "0", "--", *cmd).code == 75
    assert relay.at_terminal("approve", "ap", "--yes").returncode == 0
    assert relay("once", "--key", "ap", "--", *cmd).code == 0 and runs(path) == 1
    assert relay.at_terminal("ledger", "resolve", "ap", "--outcome", "forget").returncode == 0
    # forgotten: the key is free, but the next call (even another command) waits again
    other = ["sh", "-c", f"echo run >> {path}"]
    r = relay("once", "--key", "ap", "--timeout", "0", "--", *other)
    assert r.code == 75 and "needs a person's approval" in r.err
    assert runs(path) == 1
    assert relay.at_terminal("approve", "ap", "--yes").returncode == 0
    assert relay("once", "--key", "ap", "--", *other).code == 0 and runs(path) == 2


def test_resolve_of_a_plain_entry_works_without_a_terminal(relay):
    assert relay("once", "--key", "plain", "--", "true").code == 0
    r = relay("ledger", "resolve", "plain", "--outcome", "failed", "--json")
    assert r.code == 0 and r.json["state"] == "failed"


# ------------------------------------------------------------------ effect_unknown is shown
def test_a_crashed_entry_is_shown_as_effect_unknown_everywhere(relay, tmp_path):
    assert relay("once", "--key", "lost", "--", "true").code == 0
    assert relay("once", "--key", "idem", "--idempotent", "--", "true").code == 0
    assert relay("once", "--key", "ok", "--", "true").code == 0
    fake_crash(relay, "lost")
    fake_crash(relay, "idem")
    shown = entry(relay, "lost")
    assert shown["state"] == "effect_unknown" and shown["effect_unknown"] is True
    assert entry(relay, "ok")["effect_unknown"] is False
    only = relay("ledger", "list", "--state", "effect_unknown", "--json").json["entries"]
    assert sorted(e["key"] for e in only) == ["idem", "lost"]
    assert relay("ledger", "list", "--state", "running", "--json").json["entries"] == []
    human = relay("ledger", "list")
    assert "running" not in human.out
    assert "1 effect_unknown, needing a person" in human.out  # idem reruns by itself
    show = relay("ledger", "show", "lost").out
    assert "needs a person" in show and "relay ledger resolve" in show
    assert "runs it again" in relay("ledger", "show", "idem").out
    store = relay.open_store()
    try:
        assert ledger.awaiting(store, store.clock.now_ms()) == []
        assert store.get_ledger("lost")["state"] == "running"  # the stored record is unchanged
    finally:
        store.close()


def test_approval_timeout_says_what_is_true_for_a_key(relay):
    r = relay("once", "--key", "t", "--approve", "--timeout", "0", "--json", "--", "true")
    assert r.code == 75 and r.error["code"] == "timeout" and r.error["retryable"]
    assert "same id or key" in r.error["hint"] and "request" not in r.error["hint"]
    assert "approved or denied key 't'" in r.error["message"]


def test_a_replay_of_a_settled_entry_names_the_person(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "s", "--", *cmd).code == 0
    fake_crash(relay, "s")
    assert (
        relay("ledger", "resolve", "s", "--outcome", "succeeded", "--note", "PR #42 exists").code
        == 0
    )
    r = relay("once", "--key", "s", "--", *cmd)
    assert r.code == 0 and runs(path) == 1
    assert "settled as succeeded by person:" in r.err and "PR #42 exists" in r.err
    assert "never saw the command end" in r.err and "already ran" not in r.err
    # a person confirming an outcome relay recorded is still named, and relay's run is not denied
    assert relay("once", "--key", "f", "--", "false").code == 1
    assert relay("ledger", "resolve", "f", "--outcome", "failed").code == 0
    r = relay("once", "--key", "f", "--", "false")
    assert r.code == 1 and "settled as failed by person:" in r.err
    assert "never saw" not in r.err


def test_fingerprint_is_sha256_of_canonical_argv_and_cwd():
    import hashlib

    expected = hashlib.sha256(b'[["gh","pr","create"],"/w"]').hexdigest()
    assert ledger.fingerprint(["gh", "pr", "create"], "/w") == expected
    assert ledger.fingerprint(["a b"], "/w") != ledger.fingerprint(["a", "b"], "/w")


COUNT_SIGINT = """
import signal, sys, time
n = [0]
signal.signal(signal.SIGINT, lambda *a: n.__setitem__(0, n[0] + 1))
print("ready", flush=True)
end = time.monotonic() + 10
while not n[0] and time.monotonic() < end:
    time.sleep(0.01)
time.sleep(0.5)
sys.exit(n[0])
"""


@pytest.mark.skipif(not hasattr(signal, "sigtimedwait"), reason="needs sigtimedwait (Linux)")
def test_ctrl_c_at_a_terminal_reaches_the_command_once(relay, tmp_path):
    import pty

    relay("once", "--key", "warmup", "--", "true")
    args = [
        sys.executable,
        "-m",
        "relay_cli",
        "once",
        "--key",
        "ctrl-c",
        "--",
        sys.executable,
        "-c",
        COUNT_SIGINT,
    ]
    env = relay._env(None)
    pid, master = pty.fork()
    if pid == 0:  # the child: relay with the pty as its controlling terminal
        os.execve(args[0], args, env)
    seen = b""
    sent = False
    try:
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if not sent and b"ready" in seen:
                os.write(master, b"\x03")  # Ctrl-C: the kernel signals the foreground group
                sent = True
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(master)
    assert sent, seen
    assert os.waitstatus_to_exitcode(status) == 1, seen  # one SIGINT, not two
    assert entry(relay, "ctrl-c")["exit_code"] == 1


def test_an_approved_command_that_cannot_start_keeps_its_approval(relay, tmp_path):
    tool = tmp_path / "tool"
    assert relay("once", "--key", "ap", "--approve", "--timeout", "0", "--", str(tool)).code == 75
    assert relay.at_terminal("approve", "ap", "--yes").returncode == 0
    r = relay("once", "--key", "ap", "--", str(tool))
    assert r.code == 127
    assert entry(relay, "ap")["state"] == "approved"
    tool.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'tool.runs'}\n")
    tool.chmod(0o755)
    assert relay("once", "--key", "ap", "--", str(tool)).code == 0
    assert runs(tmp_path / "tool.runs") == 1
    assert entry(relay, "ap")["state"] == "succeeded"


def test_an_entry_running_on_another_host_is_in_progress_until_a_person_settles_it(relay):
    assert relay("once", "--key", "far", "--", "true").code == 0
    store = relay.open_store()
    try:
        with store.transaction():
            store.update_ledger(
                "far",
                {
                    "state": "running",
                    "pid": 1,
                    "process_start": None,
                    "child_pid": 2,
                    "host": "another-machine",
                    "updated_at": clock.Clock().now_ms(),
                },
            )
    finally:
        store.close()
    r = relay("once", "--key", "far", "--json", "--", "true")
    assert r.code == 75 and r.error["code"] == "in_progress"
    # renewed by its host: alive, even for a person
    refused(relay, "in_progress", "ledger", "resolve", "far", "--outcome", "failed", terminal=True)
    relay.move_clock(31)  # its host stopped renewing it: a person at a terminal decides
    refused(relay, "approval_needs_terminal", "ledger", "resolve", "far", "--outcome", "failed")
    settled = relay("ledger", "resolve", "far", "--outcome", "failed", "--json", terminal=True)
    assert settled.code == 0 and settled.json["state"] == "failed"
    assert settled.json["exit_code"] == 1
    assert relay("once", "--key", "far", "--", "true").code == 1  # replays the settled outcome


def _can_fake_a_host() -> bool:
    import shutil

    if shutil.which("unshare") is None:
        return False
    p = subprocess.run(
        ["unshare", "--uts", "sh", "-c", "hostname relay-test-host"], capture_output=True
    )
    return p.returncode == 0


def test_a_killed_host_s_running_entry_is_in_progress_for_30_s_then_effect_unknown(relay, tmp_path):
    """design.md §13: relay on another host cannot look at the process; the entry counts
    as alive while its renewal is fresh (in_progress names the host), and as crashed 30 s
    after the last renewal."""
    if not _can_fake_a_host():
        pytest.skip("needs `unshare --uts` (root) to run relay under another host name")
    marker = tmp_path / "far.started"
    path, _ = counter(tmp_path, "far.runs")
    cmd = ["sh", "-c", f"echo run >> {path}; touch {marker}; sleep 60"]
    script = 'hostname host-b && exec "$0" -m relay_cli once --key far -- "$@"'
    p = subprocess.Popen(
        ["unshare", "--uts", "sh", "-c", script, sys.executable, *cmd],
        env=relay._env(None),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(marker.exists, what="the command to start")
    obj = wait_until(
        lambda: (e := entry(relay, "far")) and e["child_pid"] and e, what="the child pid"
    )
    assert obj["host"] == "host-b"
    os.killpg(p.pid, signal.SIGKILL)  # host-b dies: relay and the command
    p.communicate(timeout=20)
    r = relay("once", "--key", "far", "--json", "--", *cmd)
    assert (r.code, r.error["code"]) == (75, "in_progress")
    assert "host-b" in r.error["message"]
    assert (
        relay("once", "--key", "far", "--json", "--", *cmd, env={"RELAY_TIME_OFFSET": "29"}).code
        == 75
    )
    late = {"RELAY_TIME_OFFSET": "31"}
    before = relay.snapshot()
    r = relay("once", "--key", "far", "--json", "--", *cmd, env=late)
    assert (r.code, r.error["code"]) == (11, "effect_unknown")
    assert relay.snapshot() == before and runs(path) == 1
    assert relay("ledger", "show", "far", "--json", env=late).json["state"] == "effect_unknown"


def test_ledger_show_prints_captured_output_inert(relay):
    assert relay("once", "--key", "esc", "--", "printf", "title\\033]0;pwned\\007\\n").code == 0
    shown = relay("ledger", "show", "esc")
    assert shown.code == 0
    assert "\x1b" not in shown.out and "\\x1b" in shown.out
    assert "--- stdout (" in shown.out and "state" in shown.out
    resolved_wrong = relay("ledger", "resolve", "esc", "--outcome", "maybe")
    assert resolved_wrong.code == 2


def test_watch_lists_crashed_entries_as_needing_a_person(relay):
    assert relay("once", "--key", "lost", "--", "true").code == 0
    assert relay("once", "--key", "idem", "--idempotent", "--", "true").code == 0
    fake_crash(relay, "lost")
    fake_crash(relay, "idem")
    snap = relay("watch")  # not a terminal: one plain snapshot
    assert snap.code == 0, snap.err
    assert snap.out.splitlines()[0] == "relay watch: 1 effect_unknown, 0 open"
    assert snap.out.splitlines()[1].startswith("effect_unknown (1): check whether it happened")
    assert "lost" in snap.out and "idem" not in snap.out
    doc = relay("watch", "--json").json
    assert [e["key"] for e in doc["effect_unknown"]] == ["lost"]


def test_doctor_warns_about_crashed_entries(relay):
    assert relay("once", "--key", "lost", "--", "true").code == 0
    r = relay("doctor", "--json")
    check = next(c for c in r.json["checks"] if c["name"] == "ledger")
    assert check["status"] == "ok"
    fake_crash(relay, "lost")
    r = relay("doctor", "--json")
    check = next(c for c in r.json["checks"] if c["name"] == "ledger")
    assert check["status"] == "warn" and "effect_unknown" in check["detail"]
    assert r.code == 0  # a warning, not a failure


# ------------------------------------------------------------------ the kill window
def test_a_kill_between_spawn_and_pid_commit_leaves_no_live_command(tmp_path):
    """relay SIGKILLed after the command's process exists and before its pid is committed,
    under a concurrent writer (bench/once_kill.py; the full run is 100 trials): the command
    never begins executing, so no entry looks crashed while its command runs, and the
    --idempotent retry runs it exactly once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import once_kill

    res = once_kill.run(trials=3, seed=7, root=tmp_path, log=lambda *a: None)
    assert res["trials"] == 3 and res["in_window"] == 3  # a 5 s pause, killed in its first 0.5 s
    assert res["gone_with_live_command"] == 0
    assert res["ran_after_kill"] == 0
    assert res["double_runs"] == 0
    assert res["problems"] == []


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_a_kill_in_another_pid_namespace_leaves_the_command_to_run_once(tmp_path):
    """The same kill across PID namespaces (bench/once_kill.py --pidns): relay killed in a
    sandbox and asked from this namespace, then killed here and asked from a sandbox. Seen
    from the other namespace the entry is another host's: in_progress while its renewal is
    fresh, and run exactly once when it went stale, since no command pid was committed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import once_kill

    res = once_kill.run_pidns(trials=2, seed=7, root=tmp_path, log=lambda *a: None)
    assert res["trials"] == 2 and res["in_window"] == 2 and res["killed_inside"] == 1
    assert res["in_progress_answers"] == 2 and res["reclaimed_when_stale"] == 2
    assert res["double_runs"] == 0
    assert res["problems"] == []


def test_the_product_has_no_test_pause(relay, tmp_path):
    """The crash benchmark's pause lives in bench/paused.py, outside the product: the
    installed relay pauses for no variable and no file (design.md §10)."""
    relay.make_home()
    relay.home.mkdir(mode=0o700, exist_ok=True)  # (on PostgreSQL nothing created it)
    (relay.home / "relay-test-pause").write_text("once-spawn=0.2\n")
    for env in ({"RELAY_TEST_PAUSE": "once-spawn=0.2"}, {"RELAY_BENCH_PAUSE": "once-spawn=0.2"}):
        r = relay.proc("once", "--key", f"p-{len(env)}-{sorted(env)[0]}", "--", "true", env=env)
        assert r.code == 0 and "PAUSE" not in r.err


def paused(relay, *args: str, seconds: float, busy_timeout_s: float | None = None):
    """relay run by the crash benchmark's wrapper, paused ``seconds`` at once-spawn (and
    with ``busy_timeout_s``, that SQLite busy timeout instead of 5 s)."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "paused.py"
    env = {"RELAY_BENCH_PAUSE": f"once-spawn={seconds}"}
    if busy_timeout_s is not None:
        env["RELAY_BENCH_BUSY_TIMEOUT_S"] = str(busy_timeout_s)
    return subprocess.Popen(
        [sys.executable, str(bench), *args],
        env=relay._env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_the_benchmark_wrapper_pauses_between_spawn_and_pid_commit(relay, tmp_path):
    path, cmd = counter(tmp_path)
    p = paused(relay, "once", "--key", "bench-pause", "--json", "--", *cmd, seconds=0.2)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and "TEST PAUSE at once-spawn (command pid" in err.decode()
    assert json.loads(out)["state"] == "succeeded"


@pytest.mark.sqlite_only  # holds SQLite's write lock
def test_a_pid_commit_that_fails_stops_the_command_before_it_begins(relay, tmp_path):
    """The write lock is held past relay's retries while it commits the command's pid: the
    held process is killed before it executes anything, the entry is withdrawn (the key
    stays free) and relay says `busy` and that nothing ran. relay's busy timeout is 0.3 s
    here (the benchmark wrapper's), so its four tries take about 1.2 s, not 20 s."""
    import re
    import sqlite3

    relay.make_home()
    path, cmd = counter(tmp_path)
    p = paused(
        relay, "once", "--key", "locked", "--json", "--", *cmd, seconds=0.3, busy_timeout_s=0.3
    )
    line = p.stderr.readline().decode()
    child = int(re.search(r"command pid (\d+)", line).group(1))
    holder = sqlite3.connect(relay.home / "relay.db", timeout=10, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the concurrent writer that never lets go in time
    try:
        wait_until(
            lambda: not alive(child) or _zombie(child),
            timeout=60,
            what="relay to give up and stop the held process",
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 75, err
    error = json.loads([ln for ln in err.decode().splitlines() if ln.startswith('{"error"')][0])
    assert error["error"]["code"] == "busy"
    assert "nothing ran" in error["error"]["message"]
    assert out == b""
    assert runs(path) == 0  # the command never began executing
    assert entry(relay, "locked") is None  # withdrawn: the key stays free
    assert relay("once", "--key", "locked", "--", *cmd).code == 0 and runs(path) == 1


def test_an_outcome_that_cannot_be_recorded_says_the_command_ran(tmp_path):
    """The command fills the disk that holds relay.db, so its outcome cannot be committed:
    relay says what is true — the command ran, its outcome was not recorded, the entry is
    effect_unknown (11) — never "nothing was half-written; retry"."""
    if os.geteuid() != 0:
        pytest.skip("making a small tmpfs needs root; this run is not root")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench import faults
    from tests.conftest import Relay

    try:
        mount_cm = faults.tmpfs("2m")
        mount = mount_cm.__enter__()
    except faults.MountUnavailable as e:
        pytest.skip(str(e))
    try:
        relay = Relay(mount / "home")
        relay.make_home()
        marker = tmp_path / "ran"
        filler = mount / "filler"
        cmd = [
            "sh",
            "-c",
            f"echo ran >> {marker}; head -c 100000 /dev/zero | tr '\\0' x; "
            f"cat /dev/zero > {filler} 2>/dev/null; exit 0",
        ]
        r = relay.proc("once", "--key", "full", "--json", "--", *cmd)
        assert r.code == 11, r.err
        err = json.loads(r.err.strip().splitlines()[-1])["error"]
        assert err["code"] == "effect_unknown"
        assert "the command ran (exit 0)" in err["message"]
        assert "could not record its outcome" in err["message"]
        assert "half-written" not in r.err
        doc = json.loads(r.out)
        assert doc["state"] == "effect_unknown" and doc["exit_code"] == 0
        assert doc["stdout_bytes"] == 100000
        assert marker.read_text() == "ran\n"
        filler.unlink()
        assert entry(relay, "full")["state"] == "effect_unknown"  # and a retry runs nothing
        again = relay("once", "--key", "full", "--json", "--", *cmd)
        assert again.code == 11 and marker.read_text() == "ran\n"
    finally:
        mount_cm.__exit__(None, None, None)


def test_a_persons_act_is_recorded_under_the_real_uid_not_logname(relay, tmp_path):
    import pwd

    real = f"person:{pwd.getpwuid(os.getuid()).pw_name}"
    fake = {"LOGNAME": "ana", "USER": "ana", "LNAME": "ana", "USERNAME": "ana"}
    assert relay("once", "--key", "who", "--", "true").code == 0
    r = relay("ledger", "resolve", "who", "--outcome", "failed", "--json", env=fake)
    assert r.code == 0 and r.json["resolved_by"] == real
    assert relay("once", "--key", "who-ap", "--approve", "--timeout", "0", "--", "true").code == 75
    master, slave = os.openpty()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "relay_cli", "approve", "who-ap", "--yes", "--json"],
            stdin=slave,
            capture_output=True,
            env=relay._env(fake),
            timeout=30,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["decided_by"] == real


def test_help_and_man_page_say_the_terminal_rule_stops_accidents_not_fake_terminals(relay):
    """The terminal rule is real (a pseudo-terminal passes it: relay.at_terminal is exactly such
    a program), so every place that states it says what it stops and what it does not."""
    for args in (("approve",), ("deny",), ("ledger", "resolve"), ("once",), ("resolve",)):
        r = relay.proc(*args, "--help")
        assert r.code == 0
        text = " ".join(r.out.split())
        assert "fakes a terminal" in text, args
        assert "accident" in text, args
    man = " ".join(
        (Path(__file__).resolve().parents[2] / "man" / "relay.1")
        .read_text()
        .replace("\\-", "-")
        .split()
    )
    assert man.count("fakes a terminal") >= 5
    guide = " ".join(relay.proc("guide", "--for", "claude", "--full").out.split())
    assert "cannot approve it yourself" not in guide
    assert "fakes a terminal" in guide
    # the guide to paste does not state the terminal rule, only who approves
    short = " ".join(relay.proc("guide", "--for", "claude").out.split())
    assert "at a terminal" not in short and "never approve a command yourself" in short


def test_the_threat_model_says_what_relay_does_not_protect_against():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "threat-model.md").read_text()
    protects, does_not = doc.split("## What relay does not protect against")
    assert "## What relay protects against" in protects
    for topic in (
        "Same-user programs",
        "Programs that fake a terminal",
        "script -qc",
        "pty.spawn",
        "RELAY_TIME_OFFSET",
        "Raw SQL on relay.db",
        "A tampered WAL",
    ):
        assert topic in does_not, topic


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
            if (
                not os.path.exists(f"/proc/{child}")
                or open(f"/proc/{child}/stat").read().split(") ")[1][0] == "Z"
            ):
                break
            time.sleep(0.02)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = relay("once", "--key", "crash-1", "--", "sleep", "30")
    assert r.code == 11, r.err  # effect_unknown: relay knows nothing is running
    entry = relay("ledger", "show", "crash-1", "--json").json
    assert (entry["state"], entry["effect_unknown"]) == ("effect_unknown", True), entry
    human = relay("ledger", "list").out
    assert "running" not in human, human


def test_a_signal_before_the_command_starts_is_an_interruption_not_a_usage_error(relay):
    """`relay once` told to stop between its ledger gate and the spawn runs nothing, frees
    the key, and ends as interrupted (128+N): a signal is not a command that cannot start,
    whose usage_error exits 2, 126 or 127 only (design.md §7)."""
    from relay_cli.core.process import Me, Signals
    from relay_cli.ledger import once
    from relay_cli.requests import due

    relay.make_home()  # the home exists
    store = relay.open_store()
    try:
        me = Me.current()
        with due.unit(store) as now:
            decision = once.begin(
                store, now, "early", ["true"], os.getcwd(), idempotent=False, approve=False, me=me
            )
        signals = Signals()
        signals.pending.append((signal.SIGTERM, False))  # arrived before the spawn
        result = once.execute(
            store, "early", decision.row, ["true"], me, once.Sink(None), once.Sink(None), signals
        )
    finally:
        store.close()
    assert (result.kind, result.exit_code) == ("interrupted", 128 + signal.SIGTERM)
    assert result.entry["state"] == "not_started"
    assert relay("ledger", "show", "early", "--json").error["code"] == "ledger_key_not_found"
