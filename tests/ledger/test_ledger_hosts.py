"""relay never runs a key's command while an earlier run may still be alive (design.md
§10, §13): a kill of relay kills its command; an entry of another host that stopped
renewing is not rerun without a person at a terminal; and a lost answer at COMMIT does not
make relay mistake its own entry for a crashed or someone else's one."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import fake_crash, refused
from test_ledger import _zombie, alive, counter, entry, runs, wait_until

from relay_cli.core import clock
from relay_cli.core.process import pid_namespace, this_host
from relay_cli.ledger import states
from testsupport.commit_faults import answer_lost_after_commit


def _as_another_host(relay, key: str, **extra) -> None:
    """Make ``key``'s entry a running one of host-b, renewed just now."""
    store = relay.open_store()
    try:
        with store.transaction():
            store.update_ledger(
                key,
                {
                    "state": "running",
                    "pid": 4242,
                    "process_start": "b-boot:1",
                    "child_pid": 4343,
                    "child_start": "b-boot:2",
                    "host": "host-b",
                    "exit_code": None,
                    "stdout": None,
                    "stderr": None,
                    "stdout_bytes": None,
                    "stderr_bytes": None,
                    "finished_at": None,
                    "updated_at": clock.Clock().now_ms(),
                    **extra,
                },
            )
    finally:
        store.close()


# ------------------------------------------------------------------ a kill of relay
def test_a_kill_of_relay_kills_its_command_so_no_live_command_hides_behind_it(relay, tmp_path):
    marker = tmp_path / "started"
    cmd = ["sh", "-c", f"touch {marker}; exec sleep 60"]
    p = relay.popen("once", "--key", "k", "--", *cmd)
    try:
        wait_until(marker.exists, what="the command to start")
        obj = wait_until(
            lambda: (e := entry(relay, "k")) and e["child_pid"] and e, what="the child pid"
        )
        child = obj["child_pid"]
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        wait_until(
            lambda: not alive(child) or _zombie(child),
            timeout=5,
            what="the command to die with relay",
        )
    finally:
        if p.poll() is None:
            p.kill()
    shown = entry(relay, "k")
    assert shown["state"] == "effect_unknown"
    r = relay("once", "--key", "k", "--json", "--", *cmd)
    assert (r.code, r.error["code"]) == (11, "effect_unknown")  # nothing reruns it


# ------------------------------------------------------------------ another host
def test_another_hosts_entry_that_stopped_renewing_is_not_rerun_without_a_person(relay, tmp_path):
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "far", "--idempotent", "--", *cmd).code == 0
    _as_another_host(relay, "far")
    r = relay("once", "--key", "far", "--json", "--", *cmd)
    assert (r.code, r.error["code"]) == (75, "in_progress") and "host-b" in r.error["message"]
    relay.move_clock(31)  # host-b stopped renewing (killed, stalled, or cut off)
    assert json.loads(relay("ledger", "show", "far", "--json").out)["state"] == "effect_unknown"
    before = relay.snapshot()
    r = relay("once", "--key", "far", "--idempotent", "--json", "--", *cmd)
    assert (r.code, r.error["code"]) == (11, "effect_unknown") and relay.snapshot() == before
    err = r.error
    assert "host-b" in err["message"]
    assert "cannot see whether the command still runs" in err["message"]
    err = refused(
        relay, "approval_needs_terminal", "ledger", "resolve", "far", "--outcome", "forget"
    )
    assert "host-b" in err["message"]
    refused(relay, "approval_needs_terminal", "ledger", "resolve", "far", "--outcome", "succeeded")
    assert runs(path) == 1
    # a person who checked host-b settles it at a terminal; then the key runs again
    done = relay("ledger", "resolve", "far", "--outcome", "forget", "--json", terminal=True)
    assert done.code == 0 and done.json["state"] == "forgotten"
    assert relay("once", "--key", "far", "--idempotent", "--", *cmd).code == 0
    assert runs(path) == 2


def test_another_hosts_entry_whose_command_never_started_is_run(relay, tmp_path):
    """Its command was held at the gate and its pid never committed: nothing ran there,
    and that host's relay can no longer start it (its own commit checks the entry)."""
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "gate", "--", *cmd).code == 0
    _as_another_host(relay, "gate", child_pid=None, child_start=None)
    assert relay("once", "--key", "gate", "--", *cmd).code == 75  # it may still start it
    relay.move_clock(31)
    r = relay("once", "--key", "gate", "--json", "--", *cmd)
    assert r.code == 0, r.err
    assert runs(path) == 2 and r.json["runs"] == 2 and r.json["host"] != "host-b"


# ------------------------------------------------------------------ a lost answer at COMMIT
def test_once_whose_entry_commit_answer_was_lost_runs_the_command_on_retry(
    relay, tmp_path, monkeypatch
):
    path, cmd = counter(tmp_path)
    with answer_lost_after_commit(monkeypatch) as cut:  # the COMMIT of the running entry
        r = relay("once", "--key", "cut", "--json", "--", *cmd)
    assert cut == [1] and (r.code, r.error["code"]) == (75, "database_unavailable")
    assert runs(path) == 0
    again = relay("once", "--key", "cut", "--json", "--", *cmd)
    assert again.code == 0, again.err
    assert "gone" not in again.err and runs(path) == 1
    assert again.json["state"] == "succeeded" and again.json["replayed"] is False


def test_once_retried_by_another_process_after_its_entry_commit_was_cut_runs_it(relay, tmp_path):
    """The relay process that made the entry is gone and no command pid was committed:
    the command never began executing (it waits at its gate), so it is not 'started'."""
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "cut", "--", *cmd).code == 0
    store = relay.open_store()
    try:
        with store.transaction():
            store.update_ledger(
                "cut",
                {
                    "state": "running",
                    "pid": os.getpid(),
                    "process_start": "other-boot:1",
                    "child_pid": None,
                    "child_start": None,
                    "exit_code": None,
                    "finished_at": None,
                },
            )
    finally:
        store.close()
    assert entry(relay, "cut")["state"] == "effect_unknown"
    r = relay("once", "--key", "cut", "--json", "--", *cmd)
    assert r.code == 0, r.err
    assert "relay and the command are gone" not in r.err and runs(path) == 2


def test_once_whose_outcome_commit_answer_was_lost_recognises_its_own_outcome(
    relay, tmp_path, monkeypatch
):
    path, cmd = counter(tmp_path)
    # write transactions: 1 the running entry, 2 the command's pid, 3 the outcome
    with answer_lost_after_commit(monkeypatch, which=lambda n: n == 3) as cut:
        r = relay("once", "--key", "out", "--json", "--", *cmd)
    assert cut == [3]
    assert r.code == 0, r.err
    assert "person resolved" not in r.err and "not recorded" not in r.err
    assert r.json["state"] == "succeeded" and r.json["replayed"] is False
    assert r.json["stdout"] == "out\n"
    stored = entry(relay, "out")
    assert stored["state"] == "succeeded" and stored["resolution"] is None
    assert relay("once", "--key", "out", "--json", "--", *cmd).json["replayed"] is True
    assert runs(path) == 1


def test_ledger_show_and_watch_say_another_hosts_stale_entry_needs_a_person(relay):
    assert relay("once", "--key", "far", "--idempotent", "--", "true").code == 0
    _as_another_host(relay, "far")
    relay.move_clock(31)
    shown = relay("ledger", "show", "far")
    assert "host-b stopped renewing it" in shown.out and "runs it again" not in shown.out
    # an --idempotent entry of this host reruns by itself; one of another host does not
    assert [e["key"] for e in relay("watch", "--json").json["effect_unknown"]] == ["far"]


def test_an_entry_whose_command_never_started_is_not_shown_as_needing_a_person(relay):
    assert relay("once", "--key", "gate", "--", "true").code == 0
    _as_another_host(relay, "gate", child_pid=None, child_start=None)
    relay.move_clock(31)
    shown = relay("ledger", "show", "gate")
    assert "never began executing" in shown.out and "the next call" in shown.out
    assert relay("watch", "--json").json["effect_unknown"] == []


def test_the_settle_command_printed_for_another_hosts_stale_entry_names_its_key(relay):
    """What relay prints for a person to run names the key it is about, so it runs as
    printed; the error's hint gives the command once, not twice."""
    assert relay("once", "--key", "far", "--idempotent", "--", "true").code == 0
    _as_another_host(relay, "far")
    relay.move_clock(31)
    hint = relay("once", "--key", "far", "--json", "--", "true").error["hint"]
    # one full command per outcome, each once; never `a|b|c`, which bash reads as a pipeline
    for outcome in ("succeeded", "failed", "forget"):
        assert hint.count(f"`relay ledger resolve far --outcome {outcome}`") == 1, hint
    assert "|" not in hint
    shown = [ln.strip() for ln in relay("ledger", "show", "far").out.splitlines()]
    for outcome in ("succeeded", "failed", "forget"):
        assert f"relay ledger resolve far --outcome {outcome}" in shown


def test_ledger_list_counts_the_entries_that_need_a_person_as_show_and_watch_do(relay):
    """Another host's --idempotent entry that stopped renewing needs a person; an entry
    whose command never began does not (the next call runs it)."""
    assert relay("once", "--key", "far", "--idempotent", "--", "true").code == 0
    _as_another_host(relay, "far")
    relay.move_clock(31)
    listed = " ".join(relay("ledger", "list").out.split())
    assert "1 effect_unknown, needing a person" in listed
    assert "relay and the command are gone" not in listed  # host-b may still run it
    assert relay("once", "--key", "gate", "--", "true").code == 0
    _as_another_host(relay, "gate", child_pid=None, child_start=None)
    relay.move_clock(31)
    listed = " ".join(relay("ledger", "list").out.split())
    assert "1 effect_unknown, needing a person" in listed


def test_an_unrecorded_start_that_could_not_be_withdrawn_says_what_the_next_call_does(
    relay, tmp_path, monkeypatch
):
    """The command's pid could not be committed and the entry could not be withdrawn: the
    entry names no command process, so the next call with the key runs the command, with
    or without --idempotent (design.md §10); the error says so instead of asking for
    --idempotent or a person."""
    from relay_cli.core.errors import RelayError
    from relay_cli.ledger import once

    def lost(*_a, **_k):
        raise RelayError("database_unavailable", "the connection to the database was lost")

    path, cmd = counter(tmp_path)
    monkeypatch.setattr(once, "record_child", lost)
    monkeypatch.setattr(once, "record_not_started", lost)
    r = relay("once", "--key", "gate", "--json", "--", *cmd)
    monkeypatch.undo()
    assert r.error["code"] == "database_unavailable" and runs(path) == 0
    assert "could not be withdrawn" in r.error["message"]
    assert "--idempotent" not in r.error["message"]
    assert "the next call with key 'gate' runs" in r.error["message"]
    assert relay("once", "--key", "gate", "--", *cmd).code == 0 and runs(path) == 1


def test_ledger_list_help_says_what_effect_unknown_covers(relay):
    """`--state effect_unknown` also lists another host's entry that stopped renewing,
    whose command may still run there: the help does not say the command is gone."""
    text = " ".join(relay("ledger", "list", "--help").out.split())
    assert "another host stopped renewing it" in text


# ------------------------------------------------------------------ another PID namespace
def _in_new_pid_namespace(relay, *args: str) -> subprocess.Popen:
    """`relay ARGS` in a new PID namespace of this machine (with its own /proc), with the
    same host name: what a container or sandbox that shares the host name is."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root for a new PID namespace")
    return subprocess.Popen(
        # --kill-child: relay is the namespace's first process; it ends with unshare
        ["unshare", "-p", "--kill-child", "--mount-proc", sys.executable, "-m", "relay_cli"]
        + list(args),
        env=relay._env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _once_refused(relay, code: str, key: str, cmd: list[str]) -> dict:
    """`relay once --idempotent` of ``key`` fails with ``code`` and changes nothing."""
    before = relay.snapshot()
    r = relay("once", "--key", key, "--idempotent", "--json", "--", *cmd)
    assert r.error["code"] == code, r.err
    assert relay.snapshot() == before
    return r.error


def test_a_live_entry_of_another_pid_namespace_is_never_rerun_nor_forgotten_by_an_agent(
    relay, tmp_path
):
    """A pid means nothing outside its namespace: this process cannot see the other
    namespace's relay, so the entry is another host's (design.md §10): alive while
    renewed, then effect_unknown that neither --idempotent nor a forget without a
    terminal reruns."""
    path, release = tmp_path / "runs", tmp_path / "release"
    # the first run waits for `release`; a second one would end at once
    cmd = [
        "sh",
        "-c",
        f"echo run >> {path}; [ $(wc -l < {path}) -gt 1 ] && exit 0; "
        f"while [ ! -e {release} ]; do sleep 0.05; done",
    ]
    p = _in_new_pid_namespace(relay, "once", "--key", "ns", "--idempotent", "--json", "--", *cmd)
    try:
        obj = wait_until(
            lambda: (e := entry(relay, "ns")) and e["child_pid"] and e, what="the child pid"
        )
        assert obj["host"] == this_host() and obj.get("pid_namespace") != pid_namespace()
        assert obj["state"] == "running"  # not effect_unknown: it still renews
        err = _once_refused(relay, "in_progress", "ns", cmd)
        assert "another PID namespace" in err["message"]
        refused(relay, "in_progress", "ledger", "resolve", "ns", "--outcome", "forget")
        # seen from here, it stops renewing (its relay stalled or was cut off)
        relay.move_clock(31)
        assert entry(relay, "ns")["state"] == "effect_unknown"
        err = _once_refused(relay, "effect_unknown", "ns", cmd)
        assert "cannot see whether the command still runs" in err["message"]
        refused(relay, "approval_needs_terminal", "ledger", "resolve", "ns", "--outcome", "forget")
        shown = relay("ledger", "show", "ns")
        assert "another PID namespace" in shown.out and "runs it again" not in shown.out
        assert runs(path) == 1
        release.touch()
        out, err_text = p.communicate(timeout=30)
    finally:
        release.touch()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err_text
    assert json.loads(out)["state"] == "succeeded" and runs(path) == 1
    relay.move_clock(0)
    assert entry(relay, "ns")["state"] == "succeeded"


def test_an_entry_of_this_namespace_is_another_namespaces_other_host(relay, tmp_path):
    """The other way round: a relay in a new PID namespace sees a live entry of this one
    as in_progress (renewed), never as gone."""
    release = tmp_path / "release"
    cmd = ["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.05; done"]
    p = relay.popen("once", "--key", "ns2", "--idempotent", "--", *cmd)
    try:
        wait_until(lambda: (e := entry(relay, "ns2")) and e["child_pid"], what="the child pid")
        q = _in_new_pid_namespace(
            relay, "once", "--key", "ns2", "--idempotent", "--json", "--", *cmd
        )
        try:
            out, err = q.communicate(timeout=30)
        finally:
            if q.poll() is None:
                q.kill()
                q.wait()
        assert q.returncode == 75 and json.loads(err)["error"]["code"] == "in_progress", err
        assert json.loads(out)["state"] == "running"
        release.touch()
        assert p.wait(timeout=30) == 0
    finally:
        release.touch()
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_running_entry_recorded_before_relay_kept_its_namespace_is_another_hosts(relay, tmp_path):
    """An entry of an earlier relay names no PID namespace: relay cannot tell where its
    pids were counted, so it judges it as another host's (renewal, and a person)."""
    path, cmd = counter(tmp_path)
    assert relay("once", "--key", "old", "--idempotent", "--", *cmd).code == 0
    fake_crash(relay, "old", pid_namespace=None, updated_at=clock.Clock().now_ms())
    _once_refused(relay, "in_progress", "old", cmd)
    relay.move_clock(31)
    err = _once_refused(relay, "effect_unknown", "old", cmd)
    assert "did not record" in err["message"]
    refused(relay, "approval_needs_terminal", "ledger", "resolve", "old", "--outcome", "forget")
    assert runs(path) == 1
    # an entry of this namespace that crashed is rerun by --idempotent, as before
    fake_crash(relay, "old")
    assert relay("once", "--key", "old", "--idempotent", "--", *cmd).code == 0
    assert runs(path) == 2


# ------------------------------------------------------------------ renewal and output
def test_a_once_whose_output_reader_stalls_keeps_renewing_and_its_output_arrives_intact(
    relay, tmp_path, monkeypatch
):
    """relay blocks writing the command's output while nobody reads it (a full pipe, a
    terminal paused with Ctrl-S); its entry must still be renewed, or relay elsewhere
    would show a live command as effect_unknown (design.md §13)."""
    size = 1024 * 1024  # far more than a pipe holds: relay blocks writing it through
    cmd = [sys.executable, "-c", f"import sys; sys.stdout.write('x' * {size}); print('end')"]
    p = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve().parents[2] / "testsupport" / "renewing.py"),
            "once",
            "--key",
            "slow",
        ]
        + ["--", *cmd],
        env=relay._env({"RELAY_TEST_RENEW_S": "0.2"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: (e := entry(relay, "slow")) and e["child_pid"], what="the child pid")
        wchan = Path(f"/proc/{p.pid}/wchan")
        if wchan.exists():  # relay's main thread is blocked writing to its stdout
            wait_until(  # (a kernel that hides wait channels says 0)
                lambda: "pipe" in (w := wchan.read_text()) or w.strip() in ("", "0"),
                what="relay to block on its pipe",
            )
        # while the reader does not read, the entry is renewed again and again
        seen = {entry(relay, "slow")["updated_at"]}
        wait_until(
            lambda: seen.add(entry(relay, "slow")["updated_at"]) or len(seen) >= 4,
            timeout=10,
            what="three renewals while the output is not read",
        )
        # seen from another host (another PID namespace), it is alive: renewed just now
        monkeypatch.setattr(states, "pid_namespace", lambda: "elsewhere")
        shown = entry(relay, "slow")
        assert shown["state"] == "running" and shown["effect_unknown"] is False
        relay.move_clock(31)  # what the renewal protects from: 30 s without one
        assert entry(relay, "slow")["state"] == "effect_unknown"
        relay.move_clock(0)
        monkeypatch.undo()
        out, err = p.communicate(timeout=60)  # now the reader reads
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert out == b"x" * size + b"end\n"  # every byte, in order
    done = entry(relay, "slow")
    assert done["state"] == "succeeded" and done["stdout_bytes"] == size + 4


# ------------------------------------------------------------------ credentials change
def test_a_setgid_command_survives_a_kill_of_relay_and_the_docs_say_what_relay_records(
    relay, tmp_path
):
    """The kernel clears the parent-death signal on an exec that changes credentials
    (setuid, setgid, file capabilities): such a command outlives a SIGKILL of relay.
    The entry stays running with no outcome: in_progress here while the command runs,
    effect_unknown once it ended; design.md §10 and docs/once.md say so."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    section = docs.joinpath("design.md").read_text().split("## §10 ")[1].split("\n## ")[0]
    for text in (section, docs.joinpath("once.md").read_text()):
        flat = " ".join(text.split())
        assert "setuid, setgid or file-capability" in flat
        assert "clears the parent-death signal" in flat
    if os.geteuid() != 0 or os.statvfs(tmp_path).f_flag & os.ST_NOSUID:
        pytest.skip("needs root and a file system that honours setgid")
    prog = tmp_path / "sleep-sgid"
    shutil.copy(shutil.which("sleep"), prog)
    os.chown(prog, 0, 65534)
    os.chmod(prog, 0o2755)
    os.chmod(tmp_path, 0o755)
    p = relay.popen("once", "--key", "sg", "--", str(prog), "60")
    child = None
    try:
        obj = wait_until(
            lambda: (e := entry(relay, "sg")) and e["child_pid"] and e, what="the child pid"
        )
        child = obj["child_pid"]
        status = Path(f"/proc/{child}/status")
        wait_until(  # it runs the setgid program: its effective group changed
            lambda: status.read_text().split("Gid:")[1].split()[1] == "65534",
            what="the setgid exec",
        )
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        time.sleep(0.5)  # a death signal would have ended it by now
        assert alive(child) and not _zombie(child), "the kernel kept the death signal"
        assert entry(relay, "sg")["state"] == "running"
        r = relay("once", "--key", "sg", "--json", "--", str(prog), "60")
        assert (r.code, r.error["code"]) == (75, "in_progress")
        assert f"process {child} (its command; relay process {p.pid} is gone)" in r.error["message"]
        os.kill(child, signal.SIGKILL)
        wait_until(lambda: not alive(child) or _zombie(child), what="the command to end")
        wait_until(lambda: entry(relay, "sg")["state"] == "effect_unknown", what="effect_unknown")
    finally:
        if p.poll() is None:
            p.kill()
        if child is not None:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)


def test_ledger_show_names_the_pid_namespace_of_the_pids_it_prints(relay):
    """The pids `ledger show` prints mean nothing outside their PID namespace: for an
    entry of another namespace of this host name the process line says so, so a person
    does not take them for this namespace's (and signal another process)."""
    assert relay("once", "--key", "ns", "--idempotent", "--", "true").code == 0
    _as_another_host(relay, "ns", host=this_host(), pid_namespace="elsewhere:1")
    shown = relay("ledger", "show", "ns")
    line = next(ln for ln in shown.out.splitlines() if ln.startswith("process"))
    assert "another PID namespace" in line, line
    assert relay("once", "--key", "here", "--", "true").code == 0
    shown = relay("ledger", "show", "here")
    line = next(ln for ln in shown.out.splitlines() if ln.startswith("process"))
    assert line.endswith(f"on {this_host()}"), line
