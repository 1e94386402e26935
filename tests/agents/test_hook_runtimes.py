"""`relay hook claude|codex|gemini|opencode|copilot` in each runtime's dialect (design.md §12).

The event payloads and the output schemas in tests/fixtures/ come from the runtimes' own
shipped packages (tests/fixtures/README.md names versions and files). Every answer relay
gives is validated against that runtime's output schema.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import new_id

from testsupport.schema_subset import errors, test_the_validator_itself_rejects_what_it_should  # noqa: F401

FIXTURES = Path(__file__).parents[1] / "fixtures"

# relay event -> (fixture file, input schema, output schema or None) per runtime
FILES = {
    "claude": {
        "SessionStart": ("session_start", "SessionStartHookInput", "SessionStart.output"),
        "UserPromptSubmit": (
            "user_prompt_submit",
            "UserPromptSubmitHookInput",
            "UserPromptSubmit.output",
        ),
        "Stop": ("stop", "StopHookInput", "Stop.output"),
        "SessionEnd": ("session_end", "SessionEndHookInput", None),
    },
    "codex": {
        "SessionStart": (
            "session_start",
            "session-start.command.input",
            "session-start.command.output",
        ),
        "UserPromptSubmit": (
            "user_prompt_submit",
            "user-prompt-submit.command.input",
            "user-prompt-submit.command.output",
        ),
        "Stop": ("stop", "stop.command.input", "stop.command.output"),
        "SessionEnd": ("session_end", "session-end.command.input", None),
    },
    "gemini": {
        "SessionStart": ("session_start", "SessionStart.input", "SessionStart.output"),
        "UserPromptSubmit": ("before_agent", "BeforeAgent.input", "BeforeAgent.output"),
        "Stop": ("after_agent", "AfterAgent.input", "AfterAgent.output"),
        "SessionEnd": ("session_end", "SessionEnd.input", None),
    },
    # relay's own plugin sends these (relay_cli/agents/opencode_plugin.py); opencode 1.18.33
    # has no session-end event: `relay run` leaves for it
    "opencode": {
        "SessionStart": ("session_start", "SessionStart.input", "SessionStart.output"),
        "UserPromptSubmit": (
            "user_prompt_submit",
            "UserPromptSubmit.input",
            "UserPromptSubmit.output",
        ),
        "Stop": ("stop", "Stop.input", "Stop.output"),
    },
    "copilot": {
        "SessionStart": ("session_start", "SessionStart.input", "SessionStart.output"),
        "UserPromptSubmit": (
            "user_prompt_submit",
            "UserPromptSubmit.input",
            "UserPromptSubmit.output",
        ),
        "Stop": ("stop", "Stop.input", "Stop.output"),
        "SessionEnd": ("session_end", "SessionEnd.input", None),
    },
}
EXTRA_EVENTS = {  # more fixtures of handled events, with their input schema
    "claude": [
        ("session_start_compact", "SessionStartHookInput"),
        ("user_prompt_submit_machine", "UserPromptSubmitHookInput"),
        ("user_prompt_submit_peer", "UserPromptSubmitHookInput"),
        ("stop_active", "StopHookInput"),
    ],
    "codex": [
        ("session_start_compact", "session-start.command.input"),
        ("stop_active", "stop.command.input"),
    ],
    "gemini": [("after_agent_active", "AfterAgent.input")],
    "opencode": [("stop_idle", "Stop.input")],
    "copilot": [("stop_active", "Stop.input")],
}


def schema(runtime: str, name: str) -> dict:
    return json.loads((FIXTURES / runtime / "schemas" / f"{name}.json").read_text())


def event(runtime: str, name: str, **changes) -> dict:
    doc = json.loads((FIXTURES / runtime / f"{name}.json").read_text())
    doc.update(changes)
    return doc


class Agent:
    """One session of ``runtime`` whose hooks are `relay hook RUNTIME`."""

    def __init__(self, relay, tmp_path: Path, runtime: str, name: str | None = None):
        self.relay, self.runtime = relay, runtime
        self.name = name or f"{runtime}-1"
        self.sid = event(runtime, FILES[runtime]["SessionStart"][0])["session_id"]
        self.env = {"RELAY_PEER": self.name, "CLAUDE_ENV_FILE": None, "CODEX_ENV_FILE": None}
        self.env_file = tmp_path / f"{runtime}-env.sh"
        if runtime == "claude":
            self.env_file.touch()
            self.env["CLAUDE_ENV_FILE"] = str(self.env_file)
        else:  # Codex 0.171.0, Gemini CLI and Copilot CLI give hooks no env file: `relay run` does
            self.env.update(relay.join(self.name, "--kind", runtime))

    def run(self, doc: dict, env: dict | None = None):
        r = self.relay("hook", self.runtime, input=json.dumps(doc), env={**self.env, **(env or {})})
        assert r.code == 0 and r.err == "", r
        return json.loads(r.out) if r.out else None

    def hook(
        self, relay_event: str, fixture: str | None = None, env: dict | None = None, **changes
    ):
        """Run the event; validate relay's answer against the runtime's output schema."""
        default, _, out_schema = FILES[self.runtime][relay_event]
        doc = self.run(event(self.runtime, fixture or default, session_id=self.sid, **changes), env)
        if doc is not None:
            assert out_schema is not None, f"relay answered {relay_event}, which has no output"
            assert errors(doc, schema(self.runtime, out_schema)) == [], doc
        return doc

    def agent_env(self) -> dict:
        if self.runtime != "claude":
            return {k: self.env[k] for k in ("RELAY_PEER", "RELAY_SESSION")}
        out = subprocess.run(
            ["bash", "-c", f'. "{self.env_file}"; printf "%s" "$RELAY_SESSION"'],
            capture_output=True,
            check=True,
            env={"PATH": os.environ["PATH"]},
        ).stdout.decode()
        return {"RELAY_PEER": self.name, "RELAY_SESSION": out}


def context(doc: dict) -> str:
    if set(doc) == {"additionalContext"}:  # GitHub Copilot CLI's form
        return doc["additionalContext"]
    assert set(doc) == {"hookSpecificOutput"}
    return doc["hookSpecificOutput"]["additionalContext"]


def stop_words(doc: dict) -> str:
    """What a Stop block tells the model: its reason, or where the runtime takes the
    block's words from the hook's context (Claude Code: ``Runtime.stop_context``), that."""
    return doc.get("hookSpecificOutput", {}).get("additionalContext") or doc["reason"]


def event_name(doc: dict) -> str | None:
    """The event name the answer carries (None: the top-level form names none)."""
    return doc["hookSpecificOutput"]["hookEventName"] if "hookSpecificOutput" in doc else None


RUNTIMES = ["claude", "codex", "gemini", "opencode", "copilot"]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_fixture_is_an_event_of_the_runtimes_own_input_schema(runtime):
    pairs = [(f, s) for f, s, _ in FILES[runtime].values()] + EXTRA_EVENTS[runtime]
    for fixture, input_schema in pairs:
        doc = event(runtime, fixture)
        assert errors(doc, schema(runtime, input_schema)) == [], fixture


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_whole_session_in_the_runtimes_dialect(relay, tmp_path, runtime):
    agent = Agent(relay, tmp_path, runtime)
    start = agent.hook("SessionStart")
    wanted_name = {
        "claude": "SessionStart",
        "codex": "SessionStart",
        "gemini": "SessionStart",
        "opencode": "SessionStart",
    }
    assert event_name(start) == wanted_name.get(runtime)
    assert repr(agent.name) in context(start) and "relay send" in context(start)
    assert "relay claim --id " not in context(start)  # the start names no request
    me = agent.agent_env()
    alice = relay.join("alice")
    waiting = new_id()
    relay.send(alice, agent.name, "please review the diff", request_id=waiting)
    mine = new_id()
    relay.send(me, "alice", "run the benchmarks", request_id=mine)
    relay("claim", env=alice)
    relay("reply", mine, "done", env=alice)

    prompt = agent.hook("UserPromptSubmit")
    prompt_event = {"gemini": "BeforeAgent", "copilot": None}.get(runtime, "UserPromptSubmit")
    assert event_name(prompt) == prompt_event
    assert f"`relay claim --id {waiting[:12]}`" in context(prompt)
    assert f"- {mine[:12]} to alice: completed" in context(prompt)
    assert "please review the diff" not in context(prompt)

    # the turn ends with the request still queued: the Stop block keeps the agent going
    # once, pointing at the listing instead of naming it again (design.md §18)
    stop = agent.hook("Stop")
    assert stop["decision"] == {"gemini": "deny"}.get(runtime, "block")
    assert "listed earlier" in stop_words(stop) and waiting[:8] not in stop_words(stop)
    # Gemini CLI, opencode and Copilot CLI send the reason back as the next prompt: no
    # listing names the request again, and the prompt is not a person's
    assert agent.hook("UserPromptSubmit", prompt=stop["reason"]) is None

    assert relay("claim", "--json", env=me).json["id"] == waiting
    if runtime == "opencode":  # no session-end event: `relay run` leaves at exit
        assert relay("peers", "leave", env=me).code == 0
    else:
        assert agent.hook("SessionEnd") is None
    shown = relay("show", waiting, "--json").json
    assert (shown["state"], shown["reason"]) == ("delivery_unknown", "recipient_disconnected")


@pytest.mark.parametrize("runtime", ["codex", "gemini", "opencode", "copilot"])
def test_under_relay_run_the_hook_adopts_the_launchers_session(relay, tmp_path, runtime):
    agent = Agent(relay, tmp_path, runtime)
    before = relay("peers", "list", "--json").json["peers"][0]["session_id"]
    agent.hook("SessionStart")
    assert relay("peers", "list", "--json").json["peers"][0]["session_id"] == before
    relay.send(relay.join("alice"), agent.name, request_id=new_id())
    # Later events find the session by the runtime's session_id alone.
    doc = agent.hook("Stop", env={"RELAY_SESSION": None})
    assert doc is not None and stop_words(doc).startswith(f"relay: 1 request for {agent.name}")


@pytest.mark.parametrize("runtime", ["codex", "gemini", "opencode", "copilot"])
def test_without_env_file_or_relay_run_the_hook_says_how_to_start(relay, tmp_path, runtime):
    agent = Agent(relay, tmp_path, runtime, name="solo")
    doc = agent.hook("SessionStart", env={"RELAY_SESSION": None, "RELAY_PEER": "other-1"})
    text = context(doc)
    assert f"relay run --as other-1 --kind {runtime} -- {runtime}" in text
    assert "other-1" not in [p["name"] for p in relay("peers", "list", "--json").json["peers"]]


@pytest.mark.parametrize("var", ["CODEX_ENV_FILE", "CLAUDE_ENV_FILE"])
def test_codex_writes_the_identity_to_codex_env_file_else_claude_env_file(relay, tmp_path, var):
    agent = Agent(relay, tmp_path, "codex", name="cx")
    codex_file, claude_file = tmp_path / "codex.env", tmp_path / "claude.env"
    files = {"CODEX_ENV_FILE": str(codex_file), "CLAUDE_ENV_FILE": str(claude_file)}
    if var == "CLAUDE_ENV_FILE":
        files["CODEX_ENV_FILE"] = None
    agent.hook("SessionStart", env={"RELAY_SESSION": None, **files})
    written = codex_file if var == "CODEX_ENV_FILE" else claude_file
    other = claude_file if var == "CODEX_ENV_FILE" else codex_file
    assert "export RELAY_PEER=cx" in written.read_text() and not other.exists()


@pytest.mark.postgres_only
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_the_env_file_never_holds_the_database_urls_password(relay, tmp_path, mode):
    """design.md §13: the hook's env file, private or not, gets the URL of the database the
    hook used as relay prints it, without its password (the test server trusts its unix
    socket, so the password in the URL is not needed); a URL with a password that came
    from $RELAY_DATABASE_URL is left to the agent's shells, which inherit it as the hook
    did (tests/store/test_pg_url.py logs in with both)."""
    agent = Agent(relay, tmp_path, "claude")
    os.chmod(agent.env_file, mode)
    url = relay.url + "&password=s3cret"
    r = relay(
        "hook",
        "claude",
        "--database-url",
        url,
        input=json.dumps(event("claude", "session_start", session_id=new_id())),
        env={**agent.env, "RELAY_DATABASE_URL": None},
    )
    assert r.code == 0, r.err
    text = agent.env_file.read_text()
    assert "export RELAY_DATABASE_URL=" in text and "s3cret" not in text
    exported = subprocess.run(
        ["bash", "-c", f'. "{agent.env_file}"; printf %s "$RELAY_DATABASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert relay("peers", "list", "--json", env={"RELAY_DATABASE_URL": exported}).code == 0
    agent.env_file.write_text("")
    agent.hook("SessionStart", env={"RELAY_DATABASE_URL": url})
    text = agent.env_file.read_text()
    assert "RELAY_SESSION=" in text and "RELAY_DATABASE_URL" not in text and "s3cret" not in text


# ------------------------------------------------- the Stop count and a person's prompt
def _always_new_work(relay, agent, alice):
    relay.send(alice, agent.name, request_id=new_id())


@pytest.mark.parametrize(
    "source,resets",
    [(None, True), ("user", True), ("sdk", False), ("system", False), ("loop_wakeup", False)],
)
def test_claude_resets_the_stop_count_only_for_a_persons_prompt(relay, tmp_path, source, resets):
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    alice = relay.join("alice")
    for _ in range(3):
        _always_new_work(relay, agent, alice)
        assert agent.hook("Stop", "stop_active")["decision"] == "block"
    doc = event("claude", "user_prompt_submit", session_id=agent.sid, source=source)
    if source is None:
        del doc["source"]
    agent.run(doc)
    _always_new_work(relay, agent, alice)
    after = agent.hook("Stop")
    assert (after is not None) == resets


@pytest.mark.parametrize(
    "prompt,resets",
    [
        (None, False),  # the fixture: a <cross-session-message> turn, as 2.1.336 sent it
        (
            '\n<teammate-message teammate_id="tester" color="blue">\nall green\n'
            "</teammate-message>",
            False,
        ),
        ("Look at <cross-session-message> handling in the parser.", True),
    ],
)
def test_claude_does_not_take_another_sessions_message_for_a_persons_prompt(
    relay, tmp_path, prompt, resets
):
    """Claude Code delivers another Claude session's SendMessage as a turn of its own,
    without a `source`, the text wrapped in its envelope: not the person's prompt, so the
    3-in-a-row Stop limit still holds. A person's prompt that mentions the tag resets it."""
    agent = Agent(relay, tmp_path, "claude")
    agent.hook("SessionStart")
    alice = relay.join("alice")
    for _ in range(3):
        _always_new_work(relay, agent, alice)
        assert agent.hook("Stop", "stop_active")["decision"] == "block"
    doc = event("claude", "user_prompt_submit_peer", session_id=agent.sid)
    assert "source" not in doc
    if prompt is not None:
        doc["prompt"] = prompt
    agent.run(doc)
    _always_new_work(relay, agent, alice)
    assert (agent.hook("Stop") is not None) == resets


@pytest.mark.parametrize("runtime", ["gemini", "copilot"])
def test_a_resubmitted_block_reason_is_not_a_persons_prompt(relay, tmp_path, runtime):
    """Gemini CLI resubmits an AfterAgent block's reason as a prompt (BeforeAgent), and
    Copilot CLI an agentStop block's (UserPromptSubmit; seen in the e2e harness); relay
    recognises its own text, so the 3-in-a-row limit still holds."""
    agent = Agent(relay, tmp_path, runtime)
    stop, active_fixture = {"gemini": ("after_agent", "after_agent_active")}.get(
        runtime, ("stop", "stop_active")
    )
    agent.hook("SessionStart")
    alice = relay.join("alice")
    answers = []
    active = False
    for _ in range(5):
        _always_new_work(relay, agent, alice)
        doc = agent.hook("Stop", active_fixture if active else stop)
        answers.append(doc is not None)
        if doc is None:
            active = False
            continue
        assert doc["decision"] == ("deny" if runtime == "gemini" else "block")
        agent.hook("UserPromptSubmit", prompt=doc["reason"])  # the runtime's continuation
        active = True
    assert answers == [True, True, True, False, True]
    # A person's own prompt does reset the count.
    for _ in range(2):
        _always_new_work(relay, agent, alice)
        agent.hook("Stop", active_fixture)
    agent.hook("UserPromptSubmit", prompt="Now the docs, please.")
    _always_new_work(relay, agent, alice)
    assert agent.hook("Stop") is not None


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_events_relay_does_not_handle_get_no_answer(relay, tmp_path, runtime):
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    relay.send(relay.join("alice"), agent.name, request_id=new_id())
    before = relay.snapshot()
    other = {
        "claude": "pre_tool_use",
        "codex": None,
        "gemini": "before_tool",
        "opencode": None,
        "copilot": "pre_tool_use",
    }[runtime]
    docs = [{"hook_event_name": "PreToolUse", "session_id": agent.sid}]
    if runtime == "opencode":  # opencode's own names are not events of relay's plugin
        docs += [
            {"hook_event_name": n, "session_id": agent.sid}
            for n in ("chat.message", "session.idle", "experimental.text.complete")
        ]
    if other:
        docs.append(event(runtime, other, session_id=agent.sid))
    if runtime == "gemini":  # Claude Code's names mean nothing to the Gemini dialect
        docs.append(event("claude", "stop", session_id=agent.sid))
    for doc in docs:
        assert agent.run(doc) is None
    assert relay.snapshot() == before


def test_copilot_gets_its_context_as_a_top_level_additional_context(relay, tmp_path):
    """Copilot CLI 1.0.102 reads a hook's context from a top-level ``additionalContext``
    and ignores Claude Code's ``hookSpecificOutput`` (its copilot-sdk types.d.ts
    ``SessionStartHookOutput``/``UserPromptSubmittedHookOutput``; the e2e harness shows
    the text reaching the model): every context relay gives it is in that form, with no
    character Copilot CLI would have to escape."""
    agent = Agent(relay, tmp_path, "copilot")
    relay.send(relay.join("alice"), agent.name, request_id=new_id())
    for doc in (agent.hook("SessionStart"), agent.hook("UserPromptSubmit")):
        assert set(doc) == {"additionalContext"}, doc
        assert "relay claim" in doc["additionalContext"]
        assert not set("<>&") & set(doc["additionalContext"])
    agent.hook("SessionEnd")
    ended = agent.hook("UserPromptSubmit")
    assert set(ended) == {"additionalContext"} and "has ended" in ended["additionalContext"]
