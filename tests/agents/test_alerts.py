"""Alerts: the command relay runs when an agent needs the person (design.md §19) --
once per episode, detached from the hook, its facts in RELAY_ALERT_* variables."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from conftest import new_id, refused
from test_activity import observe
from test_hook_runtimes import Agent


def notifier(tmp_path: Path, gate: Path | None = None) -> tuple[str, Path]:
    """A command that keeps the environment of each run in a file of its own; with
    ``gate``, each run first waits (up to 60 s) for that file to exist."""
    out = tmp_path / "alerts"
    out.mkdir(exist_ok=True)
    script = tmp_path / "notify.sh"
    wait = (
        f'n=0; while [ ! -e "{gate}" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\n'
        if gate
        else ""
    )
    script.write_text("#!/bin/sh\n" + wait + f'env > "$(mktemp "{out}/alert.XXXXXX")"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), out


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_adopted: set[int] | None = None  # the children this test's process had before it adopted


def _children() -> set[int]:
    """The processes whose parent is this one."""
    me, kids = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat_line = Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # it ended meanwhile
                continue
            if int(stat_line.rsplit(")", 1)[1].split()[1]) == me:  # (the name may hold spaces)
                kids.add(int(entry))
    return kids


@pytest.fixture
def adopting(relay):
    """This test's process becomes a child subreaper (PR_SET_CHILD_SUBREAPER): a command
    relay starts detached (an alert: a grandchild whose parent exits at once, design.md
    §19) is reparented to it, not to init, so ``alerts`` can wait until every alert that
    was started has ended, instead of waiting a while for any that might still come.
    (After ``relay``: a PostgreSQL server it starts is a child of this process too.)"""
    global _adopted
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    _adopted = _children()
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in _children() - _adopted:  # an alert of a test that failed: not left behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        _adopted = None


def alerts(out: Path) -> list[dict[str, str]]:
    """Every run so far, oldest first, once every alert started so far has ended (the
    ``adopting`` fixture: they are this process's children until they end)."""
    assert _adopted is not None, "alerts() needs the adopting fixture"
    end = time.monotonic() + 60  # (only a command that never ends meets this)
    while running := _children() - _adopted:
        for pid in running:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        assert time.monotonic() < end, f"an alert still runs: {running}"
        time.sleep(0.01)
    runs = []
    for f in sorted(out.glob("alert.*"), key=lambda f: f.stat().st_mtime_ns):
        lines = f.read_text().splitlines()
        runs.append(dict(ln.split("=", 1) for ln in lines if "=" in ln))
    return runs


def peer(relay, name: str) -> dict:
    return next(p for p in relay("peers", "list", "--json").json["peers"] if p["name"] == name)


def test_an_agent_that_starts_needing_a_person_is_alerted_once_per_wait(relay, tmp_path, adopting):
    command, out = notifier(tmp_path)
    agent = Agent(relay, tmp_path, "claude")
    agent.env["RELAY_NOTIFY"] = command
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    observe(agent, "permission")
    first = alerts(out)
    assert len(first) == 1
    facts = first[0]
    p = peer(relay, agent.name)
    assert facts["RELAY_ALERT_PEER"] == "claude-1" and facts["RELAY_ALERT_KIND"] == "claude"
    assert facts["RELAY_ALERT_ACTIVITY"] == "needs_person"
    assert facts["RELAY_ALERT_CAUSE"] == "permission"
    assert facts["RELAY_ALERT_SINCE"] == p["activity_since"]
    assert facts["RELAY_ALERT_SESSION"] == p["session_id"]
    assert facts["RELAY_ALERT_DETAIL"] == "Bash"
    assert facts["RELAY_ALERT_TEXT"] == "claude-1 needs you (permission): Bash"
    assert facts["RELAY_ALERT_HOME"] == str(relay.home)
    # the agent's identity stays with the agent
    assert "RELAY_SESSION" not in facts and "RELAY_PEER" not in facts
    observe(agent, "permission_prompt")  # the same dialog, ~6 s later: the same wait
    assert len(alerts(out)) == 1
    observe(agent, "answered")
    observe(agent, "permission")  # a new wait
    runs = alerts(out)
    assert len(runs) == 2 and runs[1]["RELAY_ALERT_SINCE"] > runs[0]["RELAY_ALERT_SINCE"]


def test_the_hook_never_waits_for_the_alert_nor_hands_it_its_streams(relay, tmp_path, adopting):
    """The runtime waits for the hook and reads its stdout and stderr to the end: an alert
    that is still running must hold neither up. The alert here cannot end before the hook
    has ended and closed both streams (it waits for a file the test makes only then): a
    hook that waited for it, or handed it a stream, would never be seen to end."""
    go = tmp_path / "go"
    command, out = notifier(tmp_path, gate=go)
    agent = Agent(relay, tmp_path, "gemini")
    agent.env["RELAY_NOTIFY"] = command
    agent.hook("SessionStart")
    doc = json.dumps(
        json.loads((Path(__file__).parents[1] / "fixtures/gemini/notification.json").read_text())
        | {"session_id": agent.sid}
    )
    p = relay.popen("hook", "gemini", env=agent.env, stdin=subprocess.PIPE)
    try:
        got, err = p.communicate(doc.encode(), timeout=30)  # returns when both pipes close
    except subprocess.TimeoutExpired:
        go.touch()
        p.kill()
        p.communicate()
        raise AssertionError("the hook waited for its alert, or handed it its streams") from None
    finally:
        go.touch()
    assert (p.returncode, got, err) == (0, b"", b"")
    assert alerts(out)[0]["RELAY_ALERT_CAUSE"] == "permission"


def test_the_command_stored_in_the_home_runs_and_relay_notify_overrides_it(
    relay, tmp_path, adopting
):
    command, out = notifier(tmp_path)
    agent = Agent(relay, tmp_path, "codex")
    r = relay("notify", "set", "--json", "--", command, "a word with spaces")
    assert r.json == {"command": [command, "a word with spaces"], "source": "home"}
    assert relay("notify", "show", "--json").json["source"] == "home"
    agent.hook("SessionStart")
    observe(agent, "permission")
    assert len(alerts(out)) == 1
    (tmp_path / "other").mkdir()
    other, elsewhere = notifier(tmp_path / "other")
    shown = relay("notify", "show", "--json", env={"RELAY_NOTIFY": f"{other} 'one arg'"}).json
    assert shown == {"command": [other, "one arg"], "source": "RELAY_NOTIFY"}
    agent.hook("UserPromptSubmit")
    observe(agent, "permission", env={"RELAY_NOTIFY": other})
    assert len(alerts(elsewhere)) == 1 and len(alerts(out)) == 1


@pytest.mark.parametrize("holds", [False, True])
def test_a_failed_turn_is_alerted_only_while_it_holds_claimed_work(
    relay, tmp_path, holds, adopting
):
    command, out = notifier(tmp_path)
    agent = Agent(relay, tmp_path, "claude")
    agent.env["RELAY_NOTIFY"] = command
    agent.hook("SessionStart")
    rid = new_id()
    if holds:
        relay.send(relay.join("alice", "--lease", "1h"), agent.name, request_id=rid)
        relay("claim", "--id", rid, "--lease", "1h", env=agent.agent_env())
    agent.hook("UserPromptSubmit")
    observe(agent, "failed")
    runs = alerts(out)
    if not holds:
        assert runs == []
        return
    assert [(a["RELAY_ALERT_CAUSE"], a["RELAY_ALERT_HOLDS"]) for a in runs] == [
        ("turn_failed", rid)
    ]
    assert "its turn failed (rate_limit: 429 Too Many Requests)" in runs[0]["RELAY_ALERT_TEXT"]


def test_an_agent_gone_holding_claimed_work_is_alerted_once(relay, tmp_path, adopting):
    command, out = notifier(tmp_path)
    agent = Agent(relay, tmp_path, "copilot")
    agent.env["RELAY_NOTIFY"] = command
    agent.hook("SessionStart")
    rid = new_id()
    relay.send(relay.join("alice", "--lease", "1h"), agent.name, request_id=rid)
    relay("claim", "--id", rid, env=agent.agent_env())
    agent.hook("SessionEnd")
    runs = alerts(out)
    assert [(a["RELAY_ALERT_CAUSE"], a["RELAY_ALERT_HOLDS"]) for a in runs] == [("gone", rid)]
    assert runs[0]["RELAY_ALERT_TEXT"] == (
        "copilot-1 is gone (ended); the 1 claimed request it held became delivery_unknown"
    )
    agent.hook("SessionEnd")
    assert len(alerts(out)) == 1


def test_a_lease_that_lapsed_is_alerted_by_the_next_relay_process_that_sees_it(
    relay, tmp_path, adopting
):
    """Nobody runs when a lease lapses: the next hook (of any agent) takes the owed alert."""
    command, out = notifier(tmp_path)
    holder = relay.join("holder", "--kind", "script", "--lease", "30s")
    rid = new_id()
    relay.send(relay.join("alice", "--lease", "1h"), "holder", request_id=rid)
    relay("claim", "--id", rid, "--lease", "1h", env=holder)
    relay.move_clock(31)
    assert alerts(out) == []
    agent = Agent(relay, tmp_path, "codex")
    agent.env["RELAY_NOTIFY"] = command
    agent.hook("SessionStart")  # its due sweep ends the lapsed session; it takes the alert
    runs = alerts(out)
    assert [(a["RELAY_ALERT_PEER"], a["RELAY_ALERT_CAUSE"]) for a in runs] == [("holder", "gone")]
    assert "lease_lapsed" in runs[0]["RELAY_ALERT_TEXT"] and runs[0]["RELAY_ALERT_HOLDS"] == rid


def test_without_a_command_nothing_runs_and_a_later_command_replays_nothing(
    relay, tmp_path, adopting
):
    command, out = notifier(tmp_path)
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    observe(agent, "permission")
    relay("notify", "set", "--", command)
    agent.hook("Stop")
    assert alerts(out) == []
    observe(agent, "permission")
    assert len(alerts(out)) == 1


def test_an_unusable_relay_notify_breaks_no_hook(relay, tmp_path):
    agent = Agent(relay, tmp_path, "claude")
    agent.env["RELAY_NOTIFY"] = "'unbalanced"
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    observe(agent, "permission")  # (exit 0, no output: asserted by observe)
    agent.env["RELAY_NOTIFY"] = str(tmp_path / "no-such-program")
    agent.hook("Stop")
    observe(agent, "permission")
    assert peer(relay, agent.name)["activity"] == "needs_person"
    shown = relay("notify", "show", env={"RELAY_NOTIFY": "'unbalanced"}).out
    assert "RELAY_NOTIFY cannot be split into words" in shown


def test_notify_set_show_clear_and_test(relay, tmp_path, adopting):
    command, out = notifier(tmp_path)
    relay.join("alice")
    assert relay("notify", "show", "--json").json == {"command": None, "source": "none"}
    assert relay("notify", "show").out == (
        "no alerts: no command is set (`relay notify set --help` says how)\n"
    )
    assert relay("notify", "test", "--json").json == {
        "command": None,
        "source": "none",
        "exit_code": None,
    }
    refused(relay, "usage_error", "notify", "set")
    relay("notify", "set", "--", command)
    assert relay("notify", "show").out == f"alerts run: `{command}` (from the home)\n"
    r = relay("notify", "test", "--json")
    assert r.json == {"command": [command], "source": "home", "exit_code": 0}
    assert [a["RELAY_ALERT_CAUSE"] for a in alerts(out)] == ["test"]
    assert relay("notify", "clear", "--json").json == {"cleared": True}
    assert relay("notify", "clear", "--json").json == {"cleared": False}
    failing = relay("notify", "test", env={"RELAY_NOTIFY": "sh -c 'exit 3'"})
    assert failing.out == "ran `sh -c 'exit 3'`: exit 3\n"
    missing = relay("notify", "test", "--json", env={"RELAY_NOTIFY": "/no/such/program"})
    assert missing.json["exit_code"] == 127


@pytest.mark.sqlite_only
def test_notify_set_makes_no_home(relay, tmp_path):
    """A mistyped home is never made (design.md §14)."""
    r = relay("notify", "set", "--home", str(tmp_path / "typo"), "--", "true")
    assert r.code == 7 and not (tmp_path / "typo").exists()


def test_an_alert_command_with_a_control_character_is_refused_and_shown_nowhere(relay):
    """A printed command is one line of words (design.md §14): a word with a line break or
    an escape is never stored, and a RELAY_NOTIFY holding one runs nothing and says why."""
    relay.join("alice")
    before = relay.snapshot()
    for word in ("a\nb", "\x1b]0;title\x07", "tab\there"):
        r = relay("notify", "set", "--json", "--", "sh", "-c", word)
        assert (r.code, r.error["code"], r.out) == (2, "usage_error", ""), r.err
        assert "control character" in r.error["message"] and "\x1b" not in r.err
    assert relay.snapshot() == before
    assert relay("notify", "show", "--json").json == {"command": None, "source": "none"}
    env = {"RELAY_NOTIFY": "sh -c 'printf x\nexit 1'"}
    assert relay("notify", "show", "--json", env=env).json == {
        "command": None,
        "source": "RELAY_NOTIFY",
    }
    shown = relay("notify", "test", env=env).out
    assert shown.startswith("nothing ran: a word of RELAY_NOTIFY holds a control character")
    assert "\x1b" not in relay("notify", "show", env={"RELAY_NOTIFY": "echo '\x1b[2J'"}).out


def test_notify_test_ends_a_command_that_still_runs_and_all_it_started(
    relay, tmp_path, monkeypatch
):
    """`relay notify test` waits 10 s for the command, then ends it and everything it
    started (process.run_bounded): nothing the test ran outlives it (a real alert is never
    waited for, nor ended). The SQLite run waits the real 10 s; on PostgreSQL, which
    changes nothing about the bound, it is 2 s."""
    from relay_cli.cli import notify_cmd

    bound = notify_cmd.NOTIFY_TEST_TIMEOUT_S
    if relay.backend == "postgres":
        bound = 2
        monkeypatch.setattr(notify_cmd, "NOTIFY_TEST_TIMEOUT_S", bound)
    relay.join("alice")
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    started = time.monotonic()
    r = relay("notify", "test", "--json", env={"RELAY_NOTIFY": f"sh -c '{script}'"})
    took = time.monotonic() - started
    assert r.json["exit_code"] is None and bound <= took < bound + 20
    child = int(pidfile.read_text())
    end = time.monotonic() + 5
    while time.monotonic() < end:  # ended: gone, or a zombie that init has not reaped yet
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (OSError, IndexError):
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the command's child outlived relay notify test")
    r = relay("notify", "test", env={"RELAY_NOTIFY": "sh -c 'echo oops >&2; exit 4'"})
    assert r.out == "ran `sh -c 'echo oops >&2; exit 4'`: exit 4\n"
    assert "its stderr ended with:\n  oops" in r.err
