"""relay's opencode plugin (relay_cli/agents/opencode_plugin.py, design.md §12), run by
Node.js with the payloads opencode 1.18.33 itself handed a plugin (tests/fixtures/opencode/
native/, captured from the real binary), a stand-in for opencode's in-process client, and
the real `relay hook opencode` behind it.

Every document the plugin sends relay must validate against tests/fixtures/opencode/
schemas/; what relay answers must reach the session the way opencode takes it (a
synthetic text part, a noReply message, a promptAsync prompt).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import new_id

from relay_cli.agents import install as hook_install
from relay_cli.agents import opencode_plugin
from testsupport.schema_subset import errors

FIXTURES = Path(__file__).parents[1] / "fixtures" / "opencode"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")

DRIVER = r"""
import { readFileSync } from "node:fs"
const [pluginPath, fixtures] = process.argv.slice(2)
const fx = (n) => JSON.parse(readFileSync(`${fixtures}/native/${n}.json`, "utf8"))
const calls = []
const client = { session: {
  prompt: async (o) => { calls.push(["prompt", o]) },
  promptAsync: async (o) => { calls.push(["promptAsync", o]) },
} }
const mod = await import(pluginPath)
const hooks = await mod.default.server({ client, directory: "/work/project", worktree: "/work/project" })
const out = { calls }
const cm = fx("chat_message")
await hooks["chat.message"](cm.input, cm.output)
out.parts = cm.output.parts
const tc = fx("text_complete")
await hooks["experimental.text.complete"](tc.input, tc.output)
await hooks.event(fx("session_idle").input)
console.log("IDLE")
const end = Date.now() + 30000
while (!calls.some((c) => c[0] === "promptAsync") && Date.now() < end) {
  await new Promise((r) => setTimeout(r, 50))
}
const woke = calls.find((c) => c[0] === "promptAsync")
if (woke) {  // opencode hands the note back as the next chat.message
  const again = fx("chat_message")
  again.output.parts[0].text = woke[1].body.parts[0].text
  await hooks["chat.message"](again.input, again.output)
  out.note_parts = again.output.parts.length
}
console.log(JSON.stringify(out))
"""


def _setup(tmp_path: Path, relay) -> tuple[Path, Path]:
    events = tmp_path / "events"
    events.mkdir()
    wrapper = tmp_path / "relay"
    wrapper.write_text(
        "#!/bin/bash\n"
        f'f=$(mktemp "{events}/ev.XXXXXX"); cat > "$f"; printf "%s" "$*" > "$f.args"\n'
        f'exec "{sys.executable}" -m relay_cli "$@" < "$f"\n'
    )
    wrapper.chmod(0o755)
    plugin = tmp_path / "relay.mjs"
    plugin.write_text(hook_install.plugin_text("opencode", str(wrapper)))
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    return plugin, driver


def _sent(tmp_path: Path) -> list[tuple[str, dict]]:
    out = []
    for f in sorted((tmp_path / "events").glob("ev.??????"), key=os.path.getmtime):
        out.append((Path(str(f) + ".args").read_text(), json.loads(f.read_text())))
    return out


def _schema(name: str) -> dict:
    return json.loads((FIXTURES / "schemas" / f"{name}.json").read_text())


@pytest.mark.one_backend
def test_the_plugin_carries_relay_into_a_session_with_opencodes_own_payloads(relay, tmp_path):
    plugin, driver = _setup(tmp_path, relay)
    alice = relay.join("alice")
    me = relay.join("oc-1", "--kind", "opencode")  # what `relay run` gives the session
    first = new_id()
    relay.send(alice, "oc-1", "please review the diff", request_id=first)
    env = relay._env({**me, "PATH": os.environ["PATH"]})
    p = subprocess.Popen(
        [NODE, str(driver), str(plugin), str(FIXTURES)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "IDLE", p.stderr.read()
    second = new_id()
    relay.send(alice, "oc-1", "and the tests", request_id=second)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])

    # SessionStart's and UserPromptSubmit's context: synthetic parts of the same message
    original, *added = result["parts"]
    assert [a["synthetic"] for a in added] == [True, True]
    assert all(a["messageID"] == original["messageID"] for a in added)
    assert len({original["id"], *(a["id"] for a in added)}) == 3
    assert "relay peer 'oc-1'" in added[0]["text"]
    assert first[:12] in added[1]["text"] and "please review" not in added[1]["text"]
    # Stop: the block's reason goes in as a noReply message (the loop goes on)
    kinds = [c[0] for c in result["calls"]]
    assert kinds == ["prompt", "promptAsync"], result["calls"]
    block = result["calls"][0][1]
    # (the request the prompt listed is pointed at, not named a second time)
    assert block["body"]["noReply"] is True
    assert "1 request listed earlier" in block["body"]["parts"][0]["text"]
    assert first[:8] not in block["body"]["parts"][0]["text"]
    # the idle session's waiter: its note, promptAsync'd, names the new request only
    note = result["calls"][1][1]["body"]["parts"][0]["text"]
    assert note.startswith("[relay] ") and second[:12] in note and first[:8] not in note
    assert not set(note) & set("<>&")
    assert result["note_parts"] == 1  # relay's own note gets no context added

    sent = _sent(tmp_path)
    names = [(args, doc["hook_event_name"], doc["opencode_event"]) for args, doc in sent]
    assert names == [
        ("hook opencode", "SessionStart", "chat.message"),
        ("hook opencode", "UserPromptSubmit", "chat.message"),
        ("hook opencode", "Stop", "experimental.text.complete"),
        ("hook opencode --wake", "Stop", "session.idle"),
    ]  # the note's own chat.message runs no relay process
    for _, doc in sent:
        assert errors(doc, _schema(f"{doc['hook_event_name']}.input")) == [], doc
    # the waiter named its request: the next Stop does not name it again
    stop = json.loads((FIXTURES / "stop.json").read_text())
    r = relay("hook", "opencode", input=json.dumps(stop), env=me)
    assert r.code == 0 and (not r.out or second not in r.out)


@pytest.mark.one_backend
def test_without_an_identity_the_plugin_runs_nothing(relay, tmp_path):
    plugin, driver = _setup(tmp_path, relay)
    env = relay._env({"PATH": os.environ["PATH"], "RELAY_PEER": None, "RELAY_SESSION": None})
    p = subprocess.Popen(
        [NODE, str(driver), str(plugin), str(FIXTURES)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "IDLE"
    p.kill()
    p.communicate()
    assert _sent(tmp_path) == []


@pytest.mark.one_backend
def test_the_plugin_refuses_a_plugin_api_it_does_not_know(tmp_path):
    """A plugin shape relay does not know fails at load, saying what to do."""
    plugin = tmp_path / "relay.mjs"
    plugin.write_text(opencode_plugin.text("relay", 10))
    script = (
        f"const m = await import({json.dumps(str(plugin))});"
        "try { await m.default.server({ client: {} }); console.log('loaded') }"
        "catch (e) { console.log(e.message) }"
    )
    out = subprocess.run(
        [NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    ).stdout
    assert "not the one relay's plugin was written for" in out
    assert "relay hook uninstall opencode" in out


def test_the_plugin_text_names_relay_and_has_no_other_runtime_left():
    text = hook_install.plugin_text("opencode", "/opt/relay bin/relay")
    assert text.splitlines()[0] == opencode_plugin.MARKER
    assert 'const RELAY = "/opt/relay bin/relay"' in text
    assert opencode_plugin.is_relays(text.encode())
    assert not opencode_plugin.is_relays(b"export default {}\n" + text.encode())


BUS_DRIVER = r"""
import { readFileSync } from "node:fs"
const args = process.argv.slice(2)
const [pluginPath, eventsPath] = args.filter((a) => a !== "run")
const client = { session: { prompt: async () => {}, promptAsync: async () => {} } }
const mod = await import(pluginPath)
const hooks = await mod.default.server({ client, directory: "/work/project", worktree: "/work/project" })
for (const e of JSON.parse(readFileSync(eventsPath, "utf8"))) await hooks.event({ event: e })
console.log("SENT")
"""


def bus_events(sid: str) -> list[dict]:
    """Bus events of opencode 1.18.33 in the shapes its binary publishes (research read
    from the binary: PermissionRequest, QuestionRequest, the replies, session.error's
    named errors), as the plugin's ``event`` hook receives them."""

    def ev(type_: str, **props) -> dict:
        return {"id": f"evt_{type_}", "type": type_, "properties": {"sessionID": sid, **props}}

    return [
        ev(
            "permission.asked",
            id="per_1",
            permission="bash",
            patterns=["rm -rf build\n\x1b[2J"],
            metadata={},
            always=["rm *"],
            tool={"messageID": "msg_1", "callID": "call_1"},
        ),
        ev("permission.replied", requestID="per_1", reply="once"),
        ev("question.asked", id="que_1", questions=[{"question": "Which database?"}]),
        ev("question.rejected", requestID="que_1"),
        ev("session.error", error={"name": "MessageAbortedError", "data": {"message": "x"}}),
        ev("session.error", error={"name": "APIError", "data": {"message": "Bad Request"}}),
        ev("session.status", status={"type": "busy"}),
    ]


def _run_bus(tmp_path: Path, relay, env: dict, *first: str) -> list[tuple[str, dict]]:
    plugin, _ = _setup(tmp_path, relay)
    driver = tmp_path / "bus.mjs"
    driver.write_text(BUS_DRIVER)
    events = tmp_path / "bus.json"
    events.write_text(json.dumps(bus_events("ses_test")))
    p = subprocess.run(
        [NODE, str(driver), *first, str(plugin), str(events)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "SENT" in p.stdout, p.stderr
    import time

    end = time.monotonic() + 20  # the event hook starts relay and does not wait for it
    while time.monotonic() < end:
        done = [f for f in (tmp_path / "events").glob("ev.??????")]
        if len(done) >= (0 if first else 5) and all(f.stat().st_size for f in done):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    return _sent(tmp_path)


@pytest.mark.one_backend
def test_the_plugin_forwards_what_the_bus_shows_of_the_session(relay, tmp_path):
    """permission.asked and question.asked become a Notification, their replies a
    PostToolUse, a session.error that is not an abort a StopFailure (design.md §19);
    nothing else is sent, and every document validates against the plugin's schemas."""
    me = relay.join("oc-1", "--kind", "opencode")
    env = relay._env({**me, "PATH": os.environ["PATH"]})
    sent = _run_bus(tmp_path, relay, env)
    got = sorted((doc["hook_event_name"], doc["opencode_event"]) for _, doc in sent)
    assert got == sorted(
        [
            ("Notification", "permission.asked"),
            ("PostToolUse", "permission.replied"),
            ("Notification", "question.asked"),
            ("PostToolUse", "question.rejected"),
            ("StopFailure", "session.error"),
        ]
    )
    for args, doc in sent:
        assert args == "hook opencode"
        assert errors(doc, _schema(f"{doc['hook_event_name']}.input")) == [], doc
    asked = next(d for _, d in sent if d["opencode_event"] == "permission.asked")
    assert asked["message"].startswith("bash rm -rf build")
    failed = next(d for _, d in sent if d["hook_event_name"] == "StopFailure")
    assert (failed["error"], failed["error_details"]) == ("APIError", "Bad Request")


@pytest.mark.one_backend
def test_in_opencode_run_the_plugin_forwards_no_ask(relay, tmp_path):
    """`opencode run` answers every permission itself: nobody is asked there."""
    me = relay.join("oc-1", "--kind", "opencode")
    env = relay._env({**me, "PATH": os.environ["PATH"]})
    sent = _run_bus(tmp_path, relay, env, "run")
    assert [(d["hook_event_name"], d["opencode_event"]) for _, d in sent] == [
        ("StopFailure", "session.error")
    ]
