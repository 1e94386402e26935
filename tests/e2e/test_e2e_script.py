"""The end-to-end harness's own parts, without any runtime (design.md §12; docs/e2e.md):
the scripted model's decisions, its three wire formats, and the hook event check."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from e2e import events  # noqa: E402
from e2e.fake_models import FINAL, FakeModel, decide  # noqa: E402

pytestmark = pytest.mark.one_backend

RID = "9dfdef46-1234-4abc-8def-0123456789ab"
NOTE = (
    f"relay: 1 request(s) are queued for claude-1:\n- {RID} from sender\n"
    "`relay claim --id ID` takes a given one"
)


def test_the_script_runs_what_the_prompt_says_then_ends():
    assert decide([("user", "E2E-RUN: echo hi")]) == ("shell", "echo hi")
    assert decide([("user", "E2E-RUN: echo hi"), ("call", "echo hi"), ("result", "hi")]) == (
        "text",
        FINAL,
    )


def test_the_script_claims_what_a_relay_note_names_and_replies():
    assert decide([("user", NOTE)]) == ("shell", f"relay claim --id {RID}")
    after = [
        ("user", NOTE),
        ("call", f"relay claim --id {RID}"),
        ("result", f"{RID} from sender: please say hello"),
    ]
    assert decide(after) == ("shell", f"relay reply {RID} 'done by the e2e model'")
    assert decide(after[:1] + [("model", FINAL), ("user", "hello")]) == ("text", FINAL)


def test_the_script_never_claims_twice_and_keeps_noreply():
    turns = [
        ("user", NOTE + " E2E-NOREPLY"),
        ("call", f"relay claim --id {RID}"),
        ("result", f"{RID} claimed"),
    ]
    assert decide(turns) == ("text", FINAL)
    assert decide(turns + [("user", NOTE)]) == ("text", FINAL)


def test_a_uuid_without_relay_claim_is_not_a_note():
    assert decide([("user", f"the id is {RID}")]) == ("text", FINAL)


def _post(url: str, body: dict) -> bytes:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


@pytest.fixture
def model():
    m = FakeModel()
    yield m
    m.close()


def _sse_data(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]


def test_anthropic_messages_stream_a_bash_tool_call(model):
    raw = _post(
        model.url + "/v1/messages?beta=true",
        {
            "model": "m",
            "stream": True,
            "tools": [{"name": "Bash"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": NOTE}]}],
        },
    )
    data = _sse_data(raw)
    assert [d["type"] for d in data] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert data[1]["content_block"]["name"] == "Bash"
    assert json.loads(data[2]["delta"]["partial_json"])["command"] == f"relay claim --id {RID}"
    assert data[4]["delta"]["stop_reason"] == "tool_use"
    assert model.log.claims() == [(0, RID)]


def test_openai_responses_answer_with_the_offered_shell_tool(model):
    for tool, key in (("exec_command", "cmd"), ("shell_command", "command")):
        raw = _post(
            model.url + "/v1/responses",
            {
                "model": "m",
                "stream": True,
                "tools": [{"type": "function", "name": tool}],
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "E2E-RUN: echo hi"}],
                    }
                ],
            },
        )
        data = _sse_data(raw)
        assert data[0]["type"] == "response.created"
        assert data[-1]["type"] == "response.completed"
        item = data[-1]["response"]["output"][0]
        assert item["type"] == "function_call" and item["name"] == tool
        assert json.loads(item["arguments"])[key] == "echo hi"


def test_gemini_streams_a_run_shell_command_call(model):
    raw = _post(
        model.url + "/v1beta/models/g:streamGenerateContent?alt=sse",
        {
            "contents": [{"role": "user", "parts": [{"text": NOTE}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
        },
    )
    (doc,) = _sse_data(raw)
    call = doc["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {
        "name": "run_shell_command",
        "args": {"command": f"relay claim --id {RID}", "description": "relay"},
    }
    assert len(model.log.model_turns()) == 1


def test_the_event_check_flags_fields_beyond_the_fixture_schema():
    fixture = json.loads((events.FIXTURES / "claude" / "stop.json").read_text())
    good = {"args": "hook claude", "event": fixture}
    bad = {"args": "hook claude", "event": dict(fixture, brand_new_field=1)}
    r = events.check([good])["claude"]
    assert r["errors"] == [] and r["fields_added"] == {} and r["by_event"] == {"Stop": 1}
    r = events.check([good, bad])["claude"]
    assert r["fields_added"] == {"Stop": ["brand_new_field"]}
    assert r["errors"], "the closed schema must refuse an unknown field"


# ------------------------------------------------- which Claude Code binary the harness runs
def _claude_package(mods: Path, pkg: str, meta: dict) -> Path:
    d = mods / pkg
    d.mkdir(parents=True)
    (d / "package.json").write_text(json.dumps({"name": pkg, **meta}))
    exe = mods / f"{pkg}-linux-x64" / "claude"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    return exe


def test_the_harness_runs_the_newest_claude_code_of_either_package(tmp_path, monkeypatch):
    """Claude Code 2.1.333-2.1.336 came out only in the Agent SDK (its platform package
    holds the binary; `claudeCodeVersion` says which Claude Code it is)."""
    from e2e import harness

    monkeypatch.delenv("RELAY_E2E_CLAUDE", raising=False)
    mods = tmp_path / "node_modules"
    code = _claude_package(mods, "@anthropic-ai/claude-code", {"version": "2.1.332"})
    assert harness.programs(mods)["claude"] == [str(code)]
    sdk = _claude_package(
        mods,
        "@anthropic-ai/claude-agent-sdk",
        {"version": "0.3.336", "claudeCodeVersion": "2.1.336"},
    )
    assert harness.programs(mods)["claude"] == [str(sdk)]
    assert harness.versions(mods)["claude"] == "2.1.336 (@anthropic-ai/claude-agent-sdk 0.3.336)"
    monkeypatch.setenv("RELAY_E2E_CLAUDE", "@anthropic-ai/claude-code")
    assert harness.programs(mods)["claude"] == [str(code)]
    assert harness.versions(mods)["claude"] == "2.1.332"
    # a tie runs Claude Code's own package
    monkeypatch.delenv("RELAY_E2E_CLAUDE")
    (mods / "@anthropic-ai/claude-agent-sdk/package.json").write_text(
        json.dumps({"version": "0.3.332", "claudeCodeVersion": "2.1.332"})
    )
    assert harness.programs(mods)["claude"] == [str(code)]
    assert harness.version_key("2.1.40") < harness.version_key("2.1.336")


def test_e2e_latest_takes_the_sdk_when_it_carries_a_newer_claude_code(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "e2e_latest", Path(__file__).resolve().parents[2] / "scripts" / "e2e_latest.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    views = {"0.3.336": "2.1.336", "0.3.332": "2.1.332"}
    for sdk, carries in views.items():
        answer = json.dumps({"version": sdk, "claudeCodeVersion": carries})
        monkeypatch.setattr(mod, "npm", lambda *a, answer=answer: answer)
        deps = {mod.CLAUDE_CODE: "2.1.332", "@openai/codex": "0.171.0"}
        line = mod.claude_from_sdk(deps, "newest")
        if sdk == "0.3.336":
            assert deps == {"@openai/codex": "0.171.0", mod.CLAUDE_SDK: "0.3.336"}
            assert "carries Claude Code 2.1.336: the newest set tests its binary" in line
        else:
            assert deps == {mod.CLAUDE_CODE: "2.1.332", "@openai/codex": "0.171.0"}
            assert "not newer than" in line
            assert mod.claude_from_sdk(deps, "sdk") and mod.CLAUDE_SDK in deps
    deps = {mod.CLAUDE_CODE: "2.1.332"}
    assert mod.claude_from_sdk(deps, "code") is None and deps == {mod.CLAUDE_CODE: "2.1.332"}


# npm ci on a lock out of step: the cause, then npm's usage text (npm 11)
NPM_EUSAGE = (
    """npm error code EUSAGE
npm error
npm error `npm ci` can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync. Please update your lock file with `npm install` before continuing.
npm error
npm error Missing: opencode-darwin-arm64@ from lock file
npm error Missing: opencode-windows-x64@ from lock file
npm error
npm error Clean install a project
npm error
npm error Usage:
npm error npm ci
npm error
npm error Options:
npm error [--install-strategy <hoisted|nested|shallow|linked>] [--legacy-bundling]
"""
    + "npm error [--an option of npm ci]\n" * 60
    + """npm error
npm error Run "npm help ci" for more info
npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log
"""
)


def test_an_npm_failure_says_its_cause_not_its_usage_text():
    from e2e.harness import npm_cause

    said = npm_cause(NPM_EUSAGE)
    assert "can only install packages when" in said and "Missing: opencode-darwin-arm64@" in said
    assert "Usage" not in said and "Options" not in said and "Clean install" not in said
    assert said.endswith("x-debug-0.log")
    assert npm_cause("npm error code E404\nnpm error 404 Not Found - GET x") == (
        "npm error code E404\nnpm error 404 Not Found - GET x"
    )


def _e2e_latest():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "e2e_latest", Path(__file__).resolve().parents[2] / "scripts" / "e2e_latest.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_newest_lock_leaves_out_platform_packages_the_registry_does_not_serve(tmp_path):
    """`npm install --package-lock-only` writes entries only for the platform packages
    the registry served (opencode-ai 1.18.33: two of twelve) while opencode-ai's entry
    names all twelve, and `npm ci` refuses that lock."""
    lock = {
        "lockfileVersion": 3,
        "packages": {
            "": {"dependencies": {"opencode-ai": "1.18.33", "@openai/codex": "0.171.0"}},
            "node_modules/opencode-ai": {
                "version": "1.18.33",
                "optionalDependencies": {
                    "opencode-linux-x64": "1.18.33",
                    "opencode-darwin-arm64": "1.18.33",
                    "opencode-windows-x64": "1.18.33",
                },
            },
            "node_modules/opencode-linux-x64": {"version": "1.18.33", "optional": True},
            "node_modules/@openai/codex": {
                "version": "0.171.0",
                "optionalDependencies": {"@openai/codex-linux-x64": "npm:@openai/codex@0.171.0"},
            },
            "node_modules/@openai/codex/node_modules/@openai/codex-linux-x64": {"optional": True},
        },
    }
    (tmp_path / "package-lock.json").write_text(json.dumps(lock))
    dropped = _e2e_latest().prune_unserved(tmp_path)
    assert dropped == ["opencode-ai: opencode-darwin-arm64", "opencode-ai: opencode-windows-x64"]
    after = json.loads((tmp_path / "package-lock.json").read_text())["packages"]
    assert after["node_modules/opencode-ai"]["optionalDependencies"] == {
        "opencode-linux-x64": "1.18.33"
    }
    assert after["node_modules/@openai/codex"] == lock["packages"]["node_modules/@openai/codex"]
    assert _e2e_latest().prune_unserved(tmp_path) == []  # nothing more to leave out


def test_the_sandbox_sweep_ends_what_was_started_during_a_pass(tmp_path, monkeypatch):
    """A process killed late in a pass may have started another meanwhile (a runtime's
    hook starting a waiter): one pass left that one running; the sweep repeats."""
    import os
    import subprocess

    from e2e import harness

    sandbox = tmp_path / "run-x"
    (sandbox / "home").mkdir(parents=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(sandbox / "home")}
    sleeper = ["sleep", "60"]
    first = subprocess.Popen(sleeper, env=env)
    late: list[subprocess.Popen] = []
    real_listdir = os.listdir

    def listdir(path):
        names = real_listdir(path)
        if path == "/proc" and not late:  # started after this pass looked
            late.append(subprocess.Popen(sleeper, env={**env, "TMPDIR": f"{sandbox}/tmp"}))
        return names

    monkeypatch.setattr(harness.os, "listdir", listdir)
    try:
        killed = harness.kill_sandbox_processes(sandbox)
        assert first.pid in killed and late and late[0].pid in killed
        for p in (first, *late):
            assert p.wait(timeout=5) == -9
    finally:
        for p in (first, *late):
            p.kill()


def test_hook_bench_rounds_rotate_so_each_mode_leads_equally_often():
    from bench import e2ehooks

    rounds = [e2ehooks.order(n) for n in range(6)]
    assert rounds[:3] == [
        ["without", "with", "traced"],
        ["with", "traced", "without"],
        ["traced", "without", "with"],
    ]
    assert all(sorted(r) == sorted(e2ehooks.MODES) for r in rounds)
    assert e2ehooks.order(-1) == ["traced", "without", "with"]  # a warm-up round


def test_hook_bench_medians_leave_failed_runs_out_and_count_side_by_side_hooks_once():
    from bench import e2ehooks

    def hooks(*spans):
        return [{"event": e, "start": a, "secs": s, "exit": "0"} for e, a, s in spans]

    runs = [
        {"round": 0, "mode": "without", "ok": True, "secs": 1.0, "turns": 1},
        {"round": 0, "mode": "with", "ok": True, "secs": 1.5, "turns": 1, "context": True},
        {"round": 1, "mode": "without", "ok": True, "secs": 3.0, "turns": 1},
        {"round": 1, "mode": "with", "ok": True, "secs": 3.1, "turns": 1, "context": True},
        {"round": 2, "mode": "without", "ok": True, "secs": 2.0, "turns": 1},
        {"round": 2, "mode": "with", "ok": False, "secs": 90.0, "why": "exit timeout"},
        {
            "round": 0,
            "mode": "traced",
            "ok": True,
            "secs": 1.7,
            "turns": 1,
            "context": True,
            # Stop and its waiter side by side: 0.2 s of hooks in all, 0.3 summed
            "hooks": hooks(("Stop", 10.0, 0.2), ("Stop (waiter)", 10.1, 0.1)),
        },
    ]
    s = e2ehooks.summarize("claude", runs, "2.1.332")
    assert s["median_s"] == {"without": 2.0, "with": 2.3, "traced": 1.7}
    assert round(s["diff_s"], 6) == 0.3
    assert round(s["paired_diff_s"], 6) == 0.3  # rounds 0 and 1: +0.5, +0.1
    assert s["runs"] == {"without": 3, "with": 2, "traced": 1}
    assert [f["round"] for f in s["failed"]] == [2]
    assert s["hooks_per_run"] == 2
    assert round(s["hook_wall_s_per_run"], 6) == 0.2
    assert round(s["hook_s_per_run"], 6) == 0.3
    assert s["context_runs"] == s["hooked_runs"] == 3
    text = e2ehooks.table([s])
    assert "+0.30" in text and "failed: round 3 with: exit timeout" in text
