"""What each agent is doing, recorded from its runtime's hook events (design.md §19).

Each runtime's observed events come from tests/fixtures/ (tests/fixtures/README.md says
where each payload was read); relay records what they show, prints nothing for them, and
says `unknown` where nothing was reported.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import new_id
from test_hook_runtimes import FILES, Agent, event, schema

from testsupport.schema_subset import errors

# relay event -> (fixture, input schema) of the events relay only observes, per runtime
OBSERVED = {
    "claude": {
        "permission": ("permission_request", "PermissionRequestHookInput"),
        "permission_prompt": ("notification_permission", "NotificationHookInput"),
        "question": ("notification_elicitation", "NotificationHookInput"),
        "answered": ("post_tool_use", "PostToolUseHookInput"),
        "failed": ("stop_failure", "StopFailureHookInput"),
    },
    "codex": {
        "permission": ("permission_request", "permission-request.command.input"),
        "answered": ("post_tool_use", "post-tool-use.command.input"),
    },
    "gemini": {
        "permission": ("notification", "Notification.input"),
        "question": ("notification_ask_user", "Notification.input"),
    },
    "opencode": {
        "permission": ("notification_permission", "Notification.input"),
        "question": ("notification_question", "Notification.input"),
        "answered": ("post_tool_use", "PostToolUse.input"),
        "failed": ("stop_failure", "StopFailure.input"),
    },
    "copilot": {
        "permission": ("notification_permission", "Notification.input"),
        "failed": ("error_occurred", "ErrorOccurred.input"),
    },
}
RUNTIMES = list(OBSERVED)


def peer(relay, name: str) -> dict:
    return next(p for p in relay("peers", "list", "--json").json["peers"] if p["name"] == name)


def long_lived(relay, tmp_path, runtime: str) -> Agent:
    """An agent under `relay run` whose session outlives the clock moves of a test."""
    agent = Agent(relay, tmp_path, runtime)
    agent.env.update(relay.join(agent.name, "--kind", runtime, "--lease", "1h"))
    return agent


def observe(agent: Agent, kind: str, env: dict | None = None, **changes) -> None:
    """Feed one observed event: relay answers nothing."""
    fixture = OBSERVED[agent.runtime][kind][0]
    # (Copilot CLI 1.0.102 names the session `sessionId` in its Notification)
    key = "sessionId" if "sessionId" in event(agent.runtime, fixture) else "session_id"
    doc = event(agent.runtime, fixture, **{key: agent.sid}, **changes)
    assert agent.run(doc, env) is None


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_observed_fixture_is_an_event_of_the_runtimes_own_input_schema(runtime):
    for fixture, input_schema in OBSERVED[runtime].values():
        assert errors(event(runtime, fixture), schema(runtime, input_schema)) == [], fixture


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_turn_is_working_a_permission_needs_the_person_and_its_end_is_idle(
    relay, tmp_path, runtime
):
    agent = Agent(relay, tmp_path, runtime)
    if runtime != "claude":  # joined by `relay run`, no event yet
        assert peer(relay, agent.name)["activity"] == "unknown"
    agent.hook("SessionStart")
    started = peer(relay, agent.name)
    # a runtime that starts its session with the first prompt is working at once
    starts_in_turn = runtime in ("codex", "opencode", "copilot")
    assert started["activity"] == ("working" if starts_in_turn else "idle")
    agent.hook("UserPromptSubmit")
    assert peer(relay, agent.name)["activity"] == "working"
    observe(agent, "permission")
    p = peer(relay, agent.name)
    assert (p["activity"], p["activity_cause"]) == ("needs_person", "permission")
    assert p["activity_detail"]  # the tool or the runtime's words, one line
    assert "\n" not in p["activity_detail"] and len(p["activity_detail"]) <= 160
    since = p["activity_since"]
    if "answered" in OBSERVED[runtime]:
        observe(agent, "answered")
        p = peer(relay, agent.name)
        assert p["activity"] == "working" and p["activity_since"] > since
    agent.hook("Stop")
    assert peer(relay, agent.name)["activity"] == "idle"
    if "question" in OBSERVED[runtime]:
        observe(agent, "question")
        p = peer(relay, agent.name)
        assert (p["activity"], p["activity_cause"]) == ("needs_person", "question")
    if "failed" in OBSERVED[runtime]:
        agent.hook("UserPromptSubmit")
        observe(agent, "failed")
        p = peer(relay, agent.name)
        assert p["activity"] == "turn_failed" and p["activity_detail"]
    if runtime != "opencode":  # opencode has no session-end event: `relay run` leaves
        agent.hook("SessionEnd")
        p = peer(relay, agent.name)
        assert (p["activity"], p["activity_cause"]) == ("gone", "ended")


def test_a_peer_no_hook_reported_on_is_unknown_and_a_lapsed_lease_is_gone(relay):
    """relay infers nothing from silence: a session whose hooks said nothing is unknown;
    a lease that lapsed is gone before any command has ended the session."""
    alice = relay.join("alice", "--lease", "30s")
    relay("peers", "add", "bob")
    p = peer(relay, "alice")
    assert (p["activity"], p["activity_since"]) == ("unknown", None)
    assert peer(relay, "bob")["activity"] == "unknown"
    relay.move_clock(31)
    doc = relay("doctor", "--json").json
    listed = {a["peer"]: a for a in doc["activity"]}
    assert (listed["alice"]["activity"], listed["alice"]["activity_cause"]) == (
        "gone",
        "lease_lapsed",
    )
    assert peer(relay, "alice")["activity"] == "gone"  # (that command ended the session)
    assert relay("peers", "heartbeat", env=alice).code != 0


def test_a_stop_relay_blocks_keeps_the_session_working(relay, tmp_path):
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    relay.send(relay.join("alice"), agent.name, request_id=new_id())
    assert agent.hook("Stop")["decision"] == "block"
    assert peer(relay, agent.name)["activity"] == "working"


def test_the_same_wait_asked_twice_is_one_wait_where_relay_hears_its_end(relay, tmp_path):
    """Claude Code: PermissionRequest when the dialog shows, the permission_prompt
    Notification ~6 s later for the same dialog: one wait, since the first."""
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    observe(agent, "permission")
    first = peer(relay, agent.name)
    observe(agent, "permission_prompt")
    assert peer(relay, agent.name)["activity_since"] == first["activity_since"]


def test_each_ask_is_a_wait_of_its_own_where_relay_would_not_hear_its_end(relay, tmp_path):
    """Gemini CLI sends nothing when the person answers: a second dialog is a new ask."""
    agent = Agent(relay, tmp_path, "gemini")
    agent.hook("SessionStart")
    observe(agent, "permission")
    first = peer(relay, agent.name)["activity_since"]
    relay.move_clock(5)
    observe(agent, "permission")
    assert peer(relay, agent.name)["activity_since"] > first


def test_claude_print_mode_permission_request_asks_nobody(relay, tmp_path):
    """In print mode and the SDK, PermissionRequest runs before a rule, hook or host
    decides: no person is asked (design.md §19). A host that waits on one sends the
    permission_prompt Notification."""
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    headless = {"CLAUDE_CODE_ENTRYPOINT": "sdk-cli", "CLAUDE_CODE_SESSION_ATTENDED": "0"}
    observe(agent, "permission", env=headless)
    assert peer(relay, agent.name)["activity"] == "working"
    observe(agent, "permission_prompt", env=headless)
    assert peer(relay, agent.name)["activity"] == "needs_person"


def test_a_compaction_changes_nothing_and_a_tool_that_ran_ends_no_other_activity(relay, tmp_path):
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("Stop")
    idle = peer(relay, agent.name)
    agent.hook("SessionStart", fixture="session_start_compact")
    observe(agent, "answered")  # a PostToolUse while no one is asked: a sign of life only
    now = peer(relay, agent.name)
    assert (now["activity"], now["activity_since"]) == ("idle", idle["activity_since"])
    assert now["last_event_at"] >= idle["last_event_at"]


HOSTILE_WORDS = [
    "\x1b]0;owned\x07\x1b[2J rm -rf ~",
    "line one\nline two\r\n\tthree",
    "\u202eevil\u202c" + "x" * 5000,
    "$(touch /tmp/relay-pwned); `id`",
    "",
]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_permission_hook_prints_nothing_whatever_it_is_given(relay, tmp_path, runtime):
    """A hook on a permission event only records (design.md §19): for every such event,
    hostile ones and ones that try to pass as a decision included, relay prints nothing
    and exits 0; what it keeps of the runtime's words is one inert line."""
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    fixture = OBSERVED[runtime]["permission"][0]
    sid = {("sessionId" if "sessionId" in event(runtime, fixture) else "session_id"): agent.sid}
    docs = []
    for words in HOSTILE_WORDS:
        for key in ("tool_name", "message", "notification_type"):
            docs.append(event(runtime, fixture, **sid, **{key: words}))
        docs.append(event(runtime, fixture, **sid, details={"type": words, "title": words}))
    for bad in (42, None, ["Bash"], {"behavior": "allow"}, True):
        for key in ("tool_name", "message", "notification_type", "details", "tool_input"):
            docs.append(event(runtime, fixture, **sid, **{key: bad}))
    docs.append(
        event(
            runtime,
            fixture,
            **sid,
            hookSpecificOutput={"decision": {"behavior": "allow"}},
            decision="approve",
        )
    )
    for doc in docs:
        r = relay("hook", runtime, input=json.dumps(doc), env=agent.env)
        assert (r.code, r.out, r.err) == (0, "", ""), doc
    for doc in (b"\xff\xfe", b"{", b"[]", json.dumps({"hook_event_name": "PermissionRequest"})):
        r = relay("hook", runtime, input=doc, env=agent.env)
        assert (r.code, r.out, r.err) == (0, "", "")
    p = peer(relay, agent.name)
    detail = p["activity_detail"] or ""
    assert "\n" not in detail and "\x1b" not in detail and len(detail) <= 160
    shown = relay("peers", "list", env={"COLUMNS": "200"}).out
    assert "\x1b" not in shown and "\u202e" not in shown


def test_watch_opens_with_the_agents_that_need_a_person_longest_first(relay, tmp_path):
    old = Agent(relay, tmp_path, "claude", name="claude-old")
    old.hook("SessionStart")
    old.hook("UserPromptSubmit")
    rid = new_id()
    relay.send(relay.join("alice", "--lease", "1h"), "claude-old", request_id=rid)
    relay("claim", "--id", rid, env=old.agent_env())
    observe(old, "permission")
    relay.move_clock(60)
    new = Agent(relay, tmp_path, "codex", name="codex-new")
    new.hook("SessionStart")
    observe(new, "permission")
    doc = relay("watch", "--json").json
    assert [(n["peer"], n["activity_cause"], n["holds"]) for n in doc["needs_you"]] == [
        ("claude-old", "permission", [rid]),
        ("codex-new", "permission", []),
    ]
    text = relay("watch").out
    assert text.startswith("relay watch: 2 need you, ")
    first = text.split("\n\n")[0].splitlines()
    assert first[1].startswith("needs you (2): agents waiting for a person, longest first")
    assert first[3].split()[0] == "claude-old" and rid[:8] in first[3] and "Bash" in first[3]


def test_show_names_what_the_session_holding_a_request_does(relay, tmp_path):
    agent = Agent(relay, tmp_path, "codex")
    agent.hook("SessionStart")
    rid = new_id()
    relay.send(relay.join("alice"), agent.name, request_id=rid)
    assert relay("show", rid, "--json").json.get("holder") is None  # queued: nobody holds it
    relay("claim", "--id", rid, env=agent.agent_env())
    observe(agent, "permission")
    holder = relay("show", rid, "--json").json["holder"]
    assert (holder["peer"], holder["activity"], holder["activity_cause"]) == (
        agent.name,
        "needs_person",
        "permission",
    )
    out = relay("show", rid).out
    assert re.search(
        rf"^held by +{agent.name}: needs_person \(permission\) since .*: Bash$", out, re.M
    )


def test_doctor_warns_for_an_agent_that_needs_a_person_for_more_than_5_minutes(relay, tmp_path):
    agent = long_lived(relay, tmp_path, "gemini")
    agent.hook("SessionStart")
    observe(agent, "permission")
    names = [c["name"] for c in relay("doctor", "--json").json["checks"]]
    assert f"activity:{agent.name}" not in names
    relay.move_clock(301)
    agent.run(event("gemini", "before_agent", session_id=agent.sid, prompt="x"), None)
    observe(agent, "permission")  # a new ask, since relay would not hear the first's end
    relay.move_clock(602)  # (an offset from now, not a step)
    checks = {c["name"]: c for c in relay("doctor", "--json").json["checks"]}
    warn = checks[f"activity:{agent.name}"]
    assert warn["status"] == "warn" and "asked a person (permission) 5m" in warn["detail"]


def test_doctor_warns_for_a_failed_turn_only_while_it_holds_claimed_work(relay, tmp_path):
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    agent.hook("UserPromptSubmit")
    observe(agent, "failed")
    assert "activity:claude-1" not in [c["name"] for c in relay("doctor", "--json").json["checks"]]
    rid = new_id()
    relay.send(relay.join("alice", "--lease", "1h"), agent.name, request_id=rid)
    relay("claim", "--id", rid, "--lease", "1h", env=agent.agent_env())
    agent.hook("UserPromptSubmit")
    observe(agent, "failed")
    checks = {c["name"]: c for c in relay("doctor", "--json").json["checks"]}
    assert checks["activity:claude-1"]["status"] == "warn"
    assert "its turn failed" in checks["activity:claude-1"]["detail"]
    assert rid[:8] in checks["activity:claude-1"]["detail"]


def test_working_with_no_event_for_long_says_so_and_nothing_more(relay, tmp_path):
    agent = long_lived(relay, tmp_path, "codex")
    agent.hook("SessionStart")
    relay.move_clock(12 * 60)
    relay("peers", "heartbeat", env=agent.agent_env())  # the lease lives on, no event
    p = peer(relay, agent.name)
    assert p["activity"] == "working"  # never a guess from silence
    out = relay.screen("peers", "list", cols=120, rows=24)[1]
    assert "working, no event for 12m" in out


@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "copilot"])
def test_install_registers_the_observed_events_and_uninstall_removes_them(
    relay, tmp_path, runtime, monkeypatch
):
    from relay_cli.agents import runtimes

    # a person's home of its own: never the machine's settings, nor another test's
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    (tmp_path / "person").mkdir()
    relay.env["HOME"] = str(tmp_path / "person")
    rt = runtimes.BY_NAME[runtime]
    dry = relay("hook", "install", runtime, "--dry-run", "--json").json
    assert set(rt.observes) <= {a["event"] for a in dry["added"]}
    done = relay("hook", "install", runtime, "--json").json
    path = done["file"]
    doc = json.loads(open(path).read())
    for ev, flags in rt.observe_flags.items():
        handler = doc["hooks"][ev][0]["hooks"][0]
        assert {k: handler[k] for k in flags} == flags
    for ev, matcher in rt.observe_matchers.items():
        assert doc["hooks"][ev][0]["matcher"] == matcher
    relay("hook", "uninstall", runtime)
    left = json.loads(open(path).read()) if open(path).read().strip() else {}
    assert not set(rt.observes) & set(left.get("hooks", {}))


def test_every_runtime_event_relay_handles_has_a_fixture():
    """The events relay registers are the events its fixtures show (so a new one cannot
    be installed without a payload read from the runtime's own package)."""
    from relay_cli.agents import runtimes

    for rt in runtimes.ALL:
        handled = set(FILES[rt.name]) | {rt.observes[e] for e in rt.observes}
        assert set(rt.events.values()) <= set(FILES[rt.name]) | {"SessionEnd"}
        kinds = {
            "PermissionRequest": "permission",
            "Notification": "permission",
            "PostToolUse": "answered",
            "StopFailure": "failed",
            "ErrorOccurred": "failed",
        }
        for name in handled - set(FILES[rt.name]):
            assert kinds[name] in OBSERVED[rt.name], (rt.name, name)
