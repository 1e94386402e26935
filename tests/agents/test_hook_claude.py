"""`relay hook claude` (design.md §12) driven with Claude Code event payloads.

The payloads in tests/fixtures/claude/ follow Claude Code 2.1.332's hook input types
(tests/fixtures/README.md names the package and file). tests/agents/test_hook_runtimes.py runs
the same events for Codex and Gemini CLI and validates every answer against the
runtimes' output schemas.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import new_id
from test_hook_runtimes import stop_words

FIXTURES = Path(__file__).parents[1] / "fixtures" / "claude"
CLAUDE_SID = "8f2c1d7e-4b5a-4e7d-9c3b-2a1f0e9d8c7b"


def payload(name: str, **changes) -> str:
    doc = json.loads((FIXTURES / f"{name}.json").read_text())
    doc.update(changes)
    return json.dumps(doc)


class Claude:
    """One Claude Code session of peer ``name`` whose hook is `relay hook claude`."""

    def __init__(self, relay, tmp_path: Path, name: str = "claude-1", sid: str = CLAUDE_SID):
        self.relay = relay
        self.name = name
        self.sid = sid
        self.env_file = tmp_path / f"claude-env-{name}.sh"
        self.env_file.touch()
        self.hook_env = {"RELAY_PEER": name, "CLAUDE_ENV_FILE": str(self.env_file)}

    def hook(self, event: str, env: dict | None = None, **changes):
        r = self.relay(
            "hook",
            "claude",
            input=payload(event, **{"session_id": self.sid, **changes}),
            env={**self.hook_env, **(env or {})},
        )
        assert r.code == 0 and r.err == "", r
        return json.loads(r.out) if r.out else None

    def start(self, **changes):
        return self.hook("session_start", **changes)

    def exports(self) -> dict[str, str]:
        """What the env file gives every Bash command of the session (sourced by a shell)."""
        out = subprocess.run(
            [
                "bash",
                "-c",
                f'. "{self.env_file}"; printf "%s\\0%s\\0%s\\0%s" '
                '"$RELAY_PEER" "$RELAY_SESSION" "$RELAY_HOME" "$RELAY_DATABASE_URL"',
            ],
            capture_output=True,
            check=True,
            env={"PATH": os.environ["PATH"]},
        ).stdout.decode()
        peer, token, home, url = out.split("\0")
        return {
            "RELAY_PEER": peer,
            "RELAY_SESSION": token,
            "RELAY_HOME": home,
            "RELAY_DATABASE_URL": url,
        }

    def agent_env(self) -> dict[str, str]:
        e = self.exports()
        return {"RELAY_PEER": e["RELAY_PEER"], "RELAY_SESSION": e["RELAY_SESSION"]}


@pytest.fixture
def claude(relay, tmp_path) -> Claude:
    return Claude(relay, tmp_path)


def peer(relay, name: str) -> dict:
    peers = relay("peers", "list", "--json").json["peers"]
    return next(p for p in peers if p["name"] == name)


def claim_cmd(rid: str) -> str:
    """How relay's texts name a request: its shortest unique prefix of at least 12
    characters (design.md §18), inside the command that takes it."""
    return f"`relay claim --id {rid[:12]}`"


def context(doc: dict, event: str) -> str:
    assert set(doc) == {"hookSpecificOutput"}
    assert doc["hookSpecificOutput"]["hookEventName"] == event
    return doc["hookSpecificOutput"]["additionalContext"]


# --------------------------------------------------------------------- SessionStart
def test_session_start_joins_and_writes_export_lines_to_claude_env_file(relay, claude):
    doc = claude.start()
    text = context(doc, "SessionStart")
    assert "'claude-1'" in text and "relay send" in text and "never the user's approval" in text
    lines = claude.env_file.read_text().splitlines()
    assert [ln.split("=")[0] for ln in lines] == [
        "export RELAY_PEER",
        "export RELAY_SESSION",
        "export RELAY_HOME",
    ] + (["export RELAY_DATABASE_URL"] if relay.url else [])  # design.md §13
    exported = claude.exports()
    if relay.url:
        from relay_cli.store.url import read

        assert exported["RELAY_DATABASE_URL"] == read(relay.url).url  # as relay prints it
    assert exported["RELAY_PEER"] == "claude-1"
    assert exported["RELAY_SESSION"].startswith("rly_")
    assert Path(exported["RELAY_HOME"]) == relay.home and Path(exported["RELAY_HOME"]).is_absolute()
    # The exported token is the live session: a Bash command of the session can use it.
    hb = relay.proc("peers", "heartbeat", "--json", env=claude.agent_env())
    assert hb.code == 0, hb.err
    p = peer(relay, "claude-1")
    assert p["active"] and p["kind"] == "claude" and p["wakeup"] == "hook"


def test_session_start_creates_a_missing_env_file_private(relay, claude):
    claude.env_file.unlink()
    claude.start()
    assert claude.env_file.stat().st_mode & 0o777 == 0o600
    assert claude.exports()["RELAY_PEER"] == "claude-1"


def test_session_start_appends_and_keeps_other_hooks_lines(relay, claude):
    claude.env_file.write_text("export NODE_ENV=production")  # no trailing newline
    claude.start()
    lines = claude.env_file.read_text().splitlines()
    assert lines[0] == "export NODE_ENV=production"
    assert lines[1].startswith("export RELAY_PEER=")


def test_session_start_under_relay_run_uses_that_session(relay, claude):
    own = relay.join("claude-1", "--kind", "claude")
    before = peer(relay, "claude-1")["session_id"]
    claude.start(env={"RELAY_SESSION": own["RELAY_SESSION"]})
    assert claude.exports()["RELAY_SESSION"] == own["RELAY_SESSION"]
    assert peer(relay, "claude-1")["session_id"] == before  # not superseded
    # ...and later events find it by Claude's session_id, without RELAY_SESSION.
    rid = new_id()
    assert relay.send(relay.join("alice"), "claude-1", request_id=rid).code == 0
    stop = claude.hook("stop")
    assert stop["decision"] == "block" and claim_cmd(rid) in stop_words(stop)


def test_compaction_keeps_the_relay_session_and_its_claimed_work(relay, claude):
    claude.start()
    agent = claude.agent_env()
    rid = new_id()
    relay.send(relay.join("alice"), "claude-1", request_id=rid)
    assert relay("claim", "--json", env=agent).json["id"] == rid
    size = claude.env_file.stat().st_size
    doc = claude.start(source="compact")
    assert "(kept through compaction)" in context(doc, "SessionStart")
    assert claude.env_file.stat().st_size == size  # nothing new to export
    assert relay("show", rid, "--json").json["state"] == "delivered"
    assert relay("peers", "heartbeat", "--json", env=agent).code == 0


def test_a_new_session_start_supersedes_the_old_one(relay, claude, tmp_path):
    claude.start()
    old = claude.agent_env()
    rid = new_id()
    relay.send(relay.join("alice"), "claude-1", request_id=rid)
    relay("claim", env=old)
    other = Claude(relay, tmp_path, sid="0b7d2c4e-1111-4a2b-9c3d-5e6f7a8b9c0d")
    other.env_file = tmp_path / "second.sh"
    other.hook_env["CLAUDE_ENV_FILE"] = str(other.env_file)
    other.start()
    assert other.agent_env()["RELAY_SESSION"] != old["RELAY_SESSION"]
    shown = relay("show", rid, "--json").json
    assert (shown["state"], shown["reason"]) == ("delivery_unknown", "peer_superseded")


def test_session_start_without_claude_env_file_starts_no_session(relay, claude):
    relay.make_home()  # the home exists
    snap_peers = relay("peers", "list", "--json").json
    doc = claude.start(env={"CLAUDE_ENV_FILE": None})
    assert "CLAUDE_ENV_FILE" in context(doc, "SessionStart")
    assert relay("peers", "list", "--json").json == snap_peers


def test_unwritable_env_file_leaves_no_session_behind(relay, claude, tmp_path):
    relay("peers", "add", "alice")
    before = relay.snapshot()
    r = relay(
        "hook",
        "claude",
        input=payload("session_start"),
        env={"RELAY_PEER": "claude-1", "CLAUDE_ENV_FILE": str(tmp_path / "missing-dir" / "env.sh")},
    )
    assert (r.code, r.out, r.err) == (0, "", "")
    assert relay.snapshot() == before


def test_a_failed_env_file_write_takes_back_its_lines_and_the_session(relay, claude, monkeypatch):
    relay("peers", "add", "alice")
    claude.env_file.write_text("export NODE_ENV=production\n")
    before = relay.snapshot()

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("relay_cli.agents.hook.os.fsync", full_disk)
    r = relay("hook", "claude", input=payload("session_start"), env=claude.hook_env)
    monkeypatch.undo()
    assert (r.code, r.out, r.err) == (0, "", "")
    assert claude.env_file.read_text() == "export NODE_ENV=production\n"
    assert relay.snapshot() == before


def test_session_start_without_relay_peer_does_nothing(relay, claude):
    relay("peers", "add", "alice")
    before = relay.snapshot()
    r = relay(
        "hook",
        "claude",
        input=payload("session_start"),
        env={"RELAY_PEER": None, "CLAUDE_ENV_FILE": str(claude.env_file)},
    )
    assert (r.code, r.out, r.err) == (0, "", "")
    assert relay.snapshot() == before and claude.env_file.read_text() == ""


def test_as_option_names_the_peer(relay, claude):
    r = relay(
        "hook",
        "claude",
        "--as",
        "reviewer",
        input=payload("session_start"),
        env={"RELAY_PEER": None, "CLAUDE_ENV_FILE": str(claude.env_file)},
    )
    assert r.code == 0 and r.out
    assert claude.exports()["RELAY_PEER"] == "reviewer"


# ----------------------------------------------------------------- UserPromptSubmit
def test_user_prompt_submit_lists_waiting_requests_and_unseen_notices_once(relay, claude):
    claude.start()
    agent = claude.agent_env()
    alice, bob = relay.join("alice"), relay.join("bob")
    waiting = new_id()
    relay.send(alice, "claude-1", "please review the diff", request_id=waiting)
    mine = new_id()
    relay.send(agent, "bob", "run the benchmarks", request_id=mine)
    relay("claim", env=bob)
    relay("reply", mine, "done: 3% faster", env=bob)

    text = context(claude.hook("user_prompt_submit"), "UserPromptSubmit")
    assert claim_cmd(waiting) in text and "from alice" in text
    assert f"- {mine[:12]} to bob: completed" in text
    assert waiting not in text and mine not in text  # named by a short prefix
    assert "please review the diff" not in text and "3% faster" not in text  # no bodies
    # an unchanged set is not announced again, and each notice is told once
    assert claude.hook("user_prompt_submit") is None
    assert relay("notices", "--json", env=agent).json["notices"] == []
    later = new_id()
    relay.send(alice, "claude-1", request_id=later)
    text = context(claude.hook("user_prompt_submit"), "UserPromptSubmit")
    assert claim_cmd(later) in text and waiting[:12] not in text and "(2 wait in all)" in text


def test_user_prompt_submit_with_nothing_to_say_prints_nothing(relay, claude):
    claude.start()
    assert claude.hook("user_prompt_submit") is None


def test_user_prompt_submit_after_the_lease_lapsed_says_so(relay, claude):
    claude.start()
    agent = claude.agent_env()
    rid = new_id()
    relay.send(relay.join("alice", "--lease", "24h"), "claude-1", request_id=rid)
    relay("claim", env=agent)
    relay("ack", rid, env=agent)  # past the claim lease, only the session lease counts
    late = {"RELAY_TIME_OFFSET": "3700"}  # the hook's session lease is 1 h
    text = context(claude.hook("user_prompt_submit", env=late), "UserPromptSubmit")
    assert "lease_expired" in text and "delivery_unknown" in text
    shown = relay("show", rid, "--json", env=late).json
    assert (shown["state"], shown["reason"]) == ("delivery_unknown", "recipient_disconnected")


def test_every_hook_run_renews_the_lease(relay, claude):
    claude.start()
    agent = claude.agent_env()
    assert claude.hook("user_prompt_submit", env={"RELAY_TIME_OFFSET": "3000"}) is None
    # 3000 s + 1 h > 3700 s: without the renewal at 3000 s this heartbeat would fail.
    hb = relay("peers", "heartbeat", "--json", env={**agent, "RELAY_TIME_OFFSET": "3700"})
    assert hb.code == 0, hb.err


# --------------------------------------------------------------------------- Stop
def test_stop_blocks_naming_the_waiting_requests_and_the_claim_command(relay, claude):
    claude.start()
    alice = relay.join("alice")
    r1, r2 = new_id(), new_id()
    relay.send(alice, "claude-1", "one", request_id=r1)
    relay.send(alice, "claude-1", "two", request_id=r2)
    doc = claude.hook("stop")
    # Claude Code sends a block's reason to the model twice, the Stop's context once: the
    # words go in the context, the reason points there (design.md §12)
    assert set(doc) == {"decision", "reason", "hookSpecificOutput"}
    assert doc["decision"] == "block" and doc["reason"] == (
        "relay: requests wait for claude-1; this Stop hook's context lists them."
    )
    assert claim_cmd(r1) in stop_words(doc) and claim_cmd(r2) in stop_words(doc)
    assert "from alice" in stop_words(doc) and "not the user's approval" in stop_words(doc)
    assert "one" not in stop_words(doc).split()  # no bodies


def test_stop_never_blocks_twice_for_the_same_requests(relay, claude):
    claude.start()
    alice = relay.join("alice")
    r1 = new_id()
    relay.send(alice, "claude-1", request_id=r1)
    assert claude.hook("stop")["decision"] == "block"
    assert claude.hook("stop_active") is None
    assert claude.hook("stop") is None
    r2 = new_id()
    relay.send(alice, "claude-1", request_id=r2)
    doc = claude.hook("stop_active")
    assert doc["decision"] == "block" and claim_cmd(r2) in stop_words(doc)
    assert r1[:12] not in stop_words(doc)


def test_stop_blocks_at_most_three_times_in_a_row(relay, claude):
    claude.start()
    alice = relay.join("alice")
    results = []
    for _ in range(5):
        relay.send(alice, "claude-1", request_id=new_id())  # always something new waits
        results.append(claude.hook("stop_active"))
    blocked = [d is not None and d["decision"] == "block" for d in results]
    # The 4th consecutive Stop is let through, which resets the count.
    assert blocked == [True, True, True, False, True]


def test_user_prompt_submit_resets_the_stop_count(relay, claude):
    claude.start()
    alice = relay.join("alice")
    for _ in range(3):
        relay.send(alice, "claude-1", request_id=new_id())
        assert claude.hook("stop_active")["decision"] == "block"
    claude.hook("user_prompt_submit")
    relay.send(alice, "claude-1", request_id=new_id())
    assert claude.hook("stop")["decision"] == "block"


def test_stop_with_nothing_waiting_lets_the_session_stop(relay, claude):
    claude.start()
    assert claude.hook("stop") is None


def test_events_fall_back_to_relay_session(relay, claude):
    token = relay.join("claude-1")["RELAY_SESSION"]
    relay.send(relay.join("alice"), "claude-1", request_id=new_id())
    doc = claude.hook(
        "stop", env={"RELAY_SESSION": token}, session_id="11111111-2222-4333-8444-555555555555"
    )
    assert doc["decision"] == "block"


# --------------------------------------------------------------------- SessionEnd
def test_session_end_leaves_and_claimed_work_becomes_delivery_unknown(relay, claude):
    claude.start()
    agent = claude.agent_env()
    rid = new_id()
    relay.send(relay.join("alice"), "claude-1", request_id=rid)
    relay("claim", env=agent)
    assert claude.hook("session_end") is None
    shown = relay("show", rid, "--json").json
    assert (shown["state"], shown["reason"]) == ("delivery_unknown", "recipient_disconnected")
    assert peer(relay, "claude-1")["active"] is False
    assert relay("peers", "heartbeat", env=agent).code == 5


# ------------------------------------------------------------ wakeup and bad input
def test_hook_runs_make_wakeup_say_hook_for_ten_minutes(relay, claude):
    claude.start()
    sent = relay.send(relay.join("alice"), "claude-1")
    assert sent.json["wakeup"] == "hook"
    later = {"RELAY_TIME_OFFSET": "660"}
    assert (
        relay("peers", "list", "--json", env=later).json["peers"][1]["wakeup"] == "not_configured"
    )
    claude.hook("stop", env=later)
    assert peer(relay, "claude-1")["wakeup"] == "hook"


GARBAGE = [
    b"",
    b"not json at all",
    b"\xff\xfe\x00garbage",
    b"[1, 2, 3]",
    b'"SessionStart"',
    b'{"hook_event_name": "SessionStart"}',
    b'{"session_id": "abc"}',
    b'{"hook_event_name": "Notification", "session_id": "abc", "message": "hi"}',
    b'{"hook_event_name": "Stop", "session_id": 42}',
    b'{"hook_event_name": "Stop", "session_id": "abc", "stop_hook_active": "yes"}',
    b'{"hook_event_name": "SessionStart", "session_id": "abc", "source": ["startup"]}',
    b'{"hook_event_name": "Stop", "session_id": "abc"',
    (FIXTURES / "pre_tool_use.json").read_bytes(),
]


@pytest.mark.parametrize("data", GARBAGE)
def test_bad_or_unknown_input_exits_0_with_no_output_and_changes_nothing(relay, claude, data):
    claude.start()
    relay.send(relay.join("alice"), "claude-1")
    before = relay.snapshot()
    size = claude.env_file.stat().st_size
    r = relay("hook", "claude", input=data, env=claude.hook_env)
    assert (r.code, r.out, r.err) == (0, "", "")
    assert relay.snapshot() == before and claude.env_file.stat().st_size == size


@pytest.mark.sqlite_only
def test_bad_identity_or_unusable_home_exits_0_with_no_output(relay, claude, tmp_path):
    r = relay(
        "hook",
        "claude",
        input=payload("session_start"),
        env={**claude.hook_env, "RELAY_PEER": "Not A Name"},
    )
    assert (r.code, r.out, r.err) == (0, "", "")
    unsafe = tmp_path / "unsafe-home"
    unsafe.mkdir(mode=0o777)
    os.chmod(unsafe, 0o777)
    r = relay(
        "hook", "claude", "--home", str(unsafe), input=payload("session_start"), env=claude.hook_env
    )
    assert (r.code, r.out, r.err) == (0, "", "")
    assert claude.env_file.read_text() == "" and not (unsafe / "relay.db").exists()
    r = relay(
        "hook", "claude", "--lease", "forever", input=payload("session_start"), env=claude.hook_env
    )
    assert (r.code, r.out, r.err) == (0, "", "")


def test_hook_as_a_real_process(relay, claude):
    start = time.monotonic()
    r = relay.proc("hook", "claude", input=payload("session_start"), env=claude.hook_env)
    took = time.monotonic() - start
    assert r.code == 0 and r.err == ""
    assert json.loads(r.out)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    relay.send(relay.join("alice"), "claude-1")
    r = relay.proc("hook", "claude", input=payload("stop"), env=claude.hook_env)
    assert json.loads(r.out)["decision"] == "block"
    r = relay.proc("hook", "claude", input=b"\x00garbage", env=claude.hook_env)
    assert (r.code, r.out, r.err) == (0, "", "")
    r = relay.proc("hook", "claude", input=payload("session_end"), env=claude.hook_env)
    assert (r.code, r.out) == (0, "")
    assert took < 5  # Claude Code gives SessionEnd hooks 1.5 s; a hook run takes ~0.2 s


def test_hook_with_malformed_option_exits_0_silently(relay):
    """design.md §12: the hook must never break the agent (exit 0, no output). Exit 2 from a
    UserPromptSubmit/Stop hook makes Claude Code block the prompt or the stop."""
    event = '{"hook_event_name": "UserPromptSubmit", "session_id": "cc-1", "prompt": "hi"}'
    r = relay("hook", "claude", "--lease", input=event, env={"RELAY_PEER": "c1"})
    assert (r.code, r.out, r.err) == (0, "", "")


# ------------------------------------------------------ relay's own wake turns
def test_claude_wake_turn_carrying_relays_note_is_not_a_persons_prompt(relay, claude):
    """Claude Code sends no `source` on UserPromptSubmit; its wake turn is a
    task-notification that carries relay's note. It must not reset the Stop count."""
    import subprocess as sp

    claude.start()
    alice = relay.join("alice", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "claude-1", request_id=rid)
    w = relay.popen("hook", "claude", "--wake", env=claude.hook_env, stdin=sp.PIPE)
    w.stdin.write(payload("stop", session_id=claude.sid).encode())
    w.stdin.close()
    w.stdin = None
    _, err = w.communicate(timeout=20)
    assert w.returncode == 2, err
    note = err.decode().strip()
    for _ in range(3):
        relay.send(alice, "claude-1", request_id=new_id())
        assert claude.hook("stop_active")["decision"] == "block"
    wrapped = (
        "<task-notification>\n<task-id>b1</task-id>\n<status>failed</status>\n"
        f"<summary>Hook exited with code 2</summary>\n<output>{note}\n</output>\n"
        "</task-notification>"
    )
    claude.hook("user_prompt_submit", prompt=wrapped)
    relay.send(alice, "claude-1", request_id=new_id())
    assert claude.hook("stop") is None  # the 4th block in a row is let through
    claude.hook("user_prompt_submit", prompt="please carry on")  # a person's prompt
    relay.send(alice, "claude-1", request_id=new_id())
    assert claude.hook("stop")["decision"] == "block"


def test_a_claude_session_bound_elsewhere_is_not_adopted(relay, claude, tmp_path):
    """A RELAY_SESSION bound to one runtime session (e.g. a `claude` started inside
    another's shell inherits it) is neither adopted nor superseded by another."""
    own = relay.join("claude-1", "--kind", "claude")
    claude.start(env={"RELAY_SESSION": own["RELAY_SESSION"]})
    before = relay.snapshot()
    size = claude.env_file.stat().st_size
    other = "0b7d2c4e-2222-4a2b-9c3d-5e6f7a8b9c0d"
    for fixture in ("session_start", "user_prompt_submit", "stop", "session_end"):
        r = relay(
            "hook",
            "claude",
            input=payload(fixture, session_id=other),
            env={**claude.hook_env, "RELAY_SESSION": own["RELAY_SESSION"]},
        )
        assert (r.code, r.out, r.err) == (0, "", "")
    assert relay.snapshot() == before and claude.env_file.stat().st_size == size
    assert relay("peers", "heartbeat", env=own).code == 0


# ------------------------------------------------------ Claude Code's Interrupt event
def test_claude_interrupt_is_not_an_event_relay_acts_on(relay, claude):
    """Claude Code 2.1.335+ sends Interrupt when a turn is stopped (Esc): no Stop runs.
    Its output is ignored, an asyncRewake hook on it included (a waiter there exited 2 in
    2.1.336 and the model was not woken), so relay installs nothing there and a
    `relay hook claude [--wake]` that gets it does nothing: no answer, no change, no wait
    (a waiter would mark the ids named and so keep later waiters from waking for them)."""
    from testsupport.schema_subset import errors

    doc = json.loads(payload("interrupt"))
    schema = json.loads((FIXTURES / "schemas" / "InterruptHookInput.json").read_text())
    assert errors(doc, schema) == []
    claude.start()
    relay.send(relay.join("alice", "--lease", "1h"), "claude-1", request_id=new_id())
    before = relay.snapshot()
    for flags in ((), ("--wake",)):
        p = relay.popen("hook", "claude", *flags, env=claude.hook_env, stdin=subprocess.PIPE)
        out, err = p.communicate(payload("interrupt", session_id=claude.sid).encode(), timeout=20)
        assert (p.returncode, out, err) == (0, b"", b""), flags
    assert relay.snapshot() == before
