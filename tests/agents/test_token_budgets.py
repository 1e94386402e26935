"""What relay's texts cost an agent in tokens (design.md §18), counted with o200k_base
(testsupport/tokens.py): each budget on the texts relay makes, and no request named twice
where two of relay's texts meet in one model request.

Counts are deterministic: the same text is the same number of tokens. The texts are the
ones `relay hook RUNTIME` prints for the runtimes' own events (tests/fixtures/), and, for
the worst cases (a 64-character sender, a 32 KiB request, a queue of thousands), the words
agents/announce.py builds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import new_id
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hook_runtimes import RUNTIMES, Agent, context

from relay_cli.agents import announce, guide, runtimes, wake
from relay_cli.core.limits import MAX_TEXT_BYTES, NAME_PATTERN

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from testsupport.tokens import count  # noqa: E402

START = 150  # the session-start context
LINE = 45  # one request announced
FIXED = 60  # an announcement's text besides its request lines
INJECTION = 300  # any one injection, whatever the queue
GUIDE = 600  # `relay guide --for X`
CLAIM = 120  # claim's output for an agent, besides the request's text

WAKES = [r.name for r in runtimes.ALL if r.wake is not None]


def _text(doc: dict | None) -> str:
    """All a hook's answer tells the model: its context, a Stop block's reason."""
    if doc is None:
        return ""
    parts = [doc["reason"]] if "reason" in doc else []
    parts.append(doc.get("hookSpecificOutput", doc).get("additionalContext", ""))
    return "\n".join(p for p in parts if p)


def _times_named(texts: list[str], rid: str) -> int:
    return sum(t.count(rid[:8]) for t in texts)


# ------------------------------------------------------------------ session start
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_session_start_context_is_at_most_150_tokens(relay, tmp_path, runtime):
    agent = Agent(relay, tmp_path, runtime)
    text = context(agent.hook("SessionStart"))
    assert count(text) <= START, (count(text), text)
    compacted = agent.hook("SessionStart", source="compact") if runtime == "claude" else None
    if compacted is not None:  # the same session, compacted: one clause more
        assert "compaction" in context(compacted) and count(context(compacted)) <= START
    no_file = agent.hook("SessionStart", env={"RELAY_SESSION": None, "RELAY_PEER": "x-2"})
    assert count(context(no_file)) <= START  # (no env file: how to start it instead)


@given(peer=st.from_regex(NAME_PATTERN, fullmatch=True).filter(lambda n: len(n) <= 24))
@settings(max_examples=60, deadline=None)
def test_the_short_guide_fits_for_any_peer_name_of_up_to_24_characters(peer):
    for r in runtimes.ALL:
        assert count(guide.short_text(peer, r.name, kept=True)) <= START


# ------------------------------------------------------------------ announcements
def _req(sender: str = "alice", nbytes: int = 16, rid: str | None = None) -> announce.Named:
    rid = rid or str(uuid.uuid4())
    return announce.Named(rid, rid[: announce.SHOWN_ID], sender, nbytes)


# the ways a request's line can be worst: the longest names of the characters that
# tokenize worst, a prefix that had to grow, the largest request
WORST = [
    _req("0-" * 32),
    _req(".-_" * 21 + "a"),
    _req("x" + "9." * 31 + "z", MAX_TEXT_BYTES),
    _req("alice", 1023),
    announce.Named("abcdef01-2345-4678-9abc-def012345678", "abcdef01-2345-46", "a" * 64, 999),
]


@pytest.mark.parametrize("req", WORST, ids=lambda r: r.sender[:12])
def test_a_request_line_is_at_most_45_tokens_at_its_worst(req):
    assert count(announce.line(req)) <= LINE, announce.line(req)


@given(
    sender=st.from_regex(NAME_PATTERN, fullmatch=True),
    nbytes=st.integers(1, MAX_TEXT_BYTES),
    rid=st.uuids(),
    extra=st.integers(0, 4),
)
@settings(max_examples=200, deadline=None)
def test_any_request_line_is_at_most_45_tokens(sender, nbytes, rid, extra):
    """Any sender, any size; a prefix grows past 12 characters only when another request
    shares its first 12 (11 hex digits: 1 in 17 billion a pair), so up to 16 is shown."""
    req = announce.Named(str(rid), str(rid)[: announce.SHOWN_ID + extra], sender, nbytes)
    assert count(announce.line(req)) <= LINE


def _announcements(reqs: list[announce.Named], more: int) -> dict[str, str]:
    n = len(reqs) + more
    return {
        "listing": announce.listing("a-peer-name", reqs, more, n + 3),
        "stop": announce.stop_block("a-peer-name", reqs, more, 2),
        "stop, all listed earlier": announce.stop_block("a-peer-name", [], 0, n),
        "wake (a hook's output)": announce.wake_note("a-peer-name", reqs, more, False),
        "wake (a user turn)": announce.wake_note("a-peer-name", reqs, more, True),
        "notice": announce.notice(
            "a-peer-name",
            [
                (r.shown, {"to_peer": r.sender, "state": s, "reason": None})
                for r, s in zip(reqs, ("completed", "delivery_unknown", "failed"), strict=False)
            ],
        ),
    }


@pytest.mark.parametrize("n", [1, 3, 5, 10, 10_000])
def test_an_announcements_fixed_text_is_at_most_60_tokens(n):
    reqs = [_req() for _ in range(min(n, announce.MAX_LINES))]
    more = n - len(reqs)
    lines = sum(count(announce.line(r) + "\n") for r in reqs)
    for kind, text in _announcements(reqs, more).items():
        if kind == "notice":
            continue  # (its lines are not request lines)
        fixed = count(text) - (lines if "listed earlier" not in kind else 0)
        assert fixed <= FIXED, (kind, fixed, text)


@pytest.mark.parametrize("n", [1, 5, 6, 10, 500, 10_000])
def test_any_one_injection_is_at_most_300_tokens_whatever_the_queue(n):
    """At most MAX_LINES lines of the worst kind, then "and N more: `relay inbox`"."""
    worst = (WORST * n)[: min(n, announce.MAX_LINES)]
    for kind, text in _announcements(worst, n - len(worst)).items():
        assert count(text) <= INJECTION, (kind, count(text))
        if n > announce.MAX_LINES and kind != "notice" and "listed earlier" not in kind:
            assert f"and {n - announce.MAX_LINES} more: `relay inbox`" in text


# ------------------------------------------------------------ through the hook itself
@pytest.mark.parametrize("queued", [1, 10])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_what_each_hook_event_hands_the_runtime_keeps_its_budget(relay, tmp_path, runtime, queued):
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    alice = relay.join("alice")
    ids = [new_id() for _ in range(queued)]
    for rid in ids:
        relay.send(alice, agent.name, "please say hello", request_id=rid)
    listing = _text(agent.hook("UserPromptSubmit"))
    listed = ids[: announce.MAX_LINES]
    assert count(listing) <= min(INJECTION, FIXED + LINE * len(listed)), listing
    assert [rid for rid in ids if rid[:12] in listing] == listed  # the oldest first
    late = new_id()
    relay.send(alice, agent.name, "please say hello", request_id=late)
    stop = _text(agent.hook("Stop"))
    # the requests not told yet get lines; the listed ones are pointed at, not named
    untold = [*ids[len(listed) :], late][: announce.MAX_LINES]
    assert count(stop) <= min(INJECTION, FIXED + LINE * len(untold)), stop
    assert all(rid[:12] in stop for rid in untold)
    assert not any(rid[:8] in stop for rid in listed)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_first_model_request_names_a_request_once(relay, tmp_path, runtime):
    """A request queued before the start: the session-start context names none, the
    first prompt's listing names it once (design.md §18)."""
    agent = Agent(relay, tmp_path, runtime)
    if runtime == "claude":  # (its SessionStart joins: the peer is there before)
        relay("peers", "add", agent.name, "--kind", "claude")
    rid = new_id()
    assert relay.send(relay.join("alice"), agent.name, request_id=rid).code == 0
    start = _text(agent.hook("SessionStart"))
    prompt = _text(agent.hook("UserPromptSubmit"))
    assert _times_named([start, prompt], rid) == 1
    # ... and an unchanged set is not announced again at the next prompt
    assert agent.hook("UserPromptSubmit") is None


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_stop_reason_resubmitted_as_a_prompt_gets_no_second_listing(relay, tmp_path, runtime):
    """Gemini CLI, opencode and Copilot CLI send the Stop block's reason back as the next
    prompt: that prompt's context does not list the same requests again."""
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    rid = new_id()
    relay.send(relay.join("alice"), agent.name, request_id=rid)
    reason = _text(agent.hook("Stop"))
    again = _text(agent.hook("UserPromptSubmit", prompt=reason))
    assert _times_named([reason, again], rid) == 1


@pytest.mark.parametrize("runtime", WAKES)
def test_a_wake_note_and_its_turn_name_a_request_once(relay, tmp_path, runtime):
    """The waiter's note names the request; the turn it starts (a prompt carrying the
    note: Codex's queued message, Claude Code's task-notification) lists nothing again."""
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    fake = tmp_path / "bin"
    fake.mkdir()
    kept = tmp_path / "queued.txt"
    (fake / "codex").write_text(
        f"#!{sys.executable}\nimport sys\nopen({str(kept)!r}, 'w').write(sys.argv[-1])\n"
    )
    (fake / "codex").chmod(0o755)
    alice = relay.join("alice")
    ids = [new_id() for _ in range(10)]
    for rid in ids:
        relay.send(alice, agent.name, request_id=rid)
    env = {
        **agent.env,
        "PATH": f"{fake}:{relay._env(None)['PATH']}",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "CLAUDE_CODE_SESSION_ATTENDED": "1",
    }
    stop = json.loads(Path(agent_fixture(runtime, "stop")).read_text())
    stop["session_id"] = agent.sid
    r = relay.proc("hook", runtime, "--wake", "--timeout", "10s", input=json.dumps(stop), env=env)
    note = r.err.strip() if r.code == 2 else kept.read_text()
    assert note.startswith("[relay] ") and count(note) <= INJECTION
    lines = [ln for ln in note.splitlines() if ln.startswith("- from ")]
    assert len(lines) == announce.MAX_LINES
    assert count(note) - sum(count(ln + "\n") for ln in lines) <= FIXED
    turn = _text(agent.hook("UserPromptSubmit", prompt=f"<task-notification>{note}</task>"))
    for rid in ids[: announce.MAX_LINES]:
        assert _times_named([note, turn], rid) == 1
    # the rest ("and 5 more") are listed by that turn, once
    for rid in ids[announce.MAX_LINES :]:
        assert _times_named([note, turn], rid) == 1


def agent_fixture(runtime: str, name: str) -> Path:
    return Path(__file__).parents[1] / "fixtures" / runtime / f"{name}.json"


def test_the_wake_notes_say_whose_words_are_whose_in_one_sentence():
    for r in runtimes.ALL:
        note = wake.note("a-peer", [_req()], 0, r.name)
        first = note.splitlines()[0]
        assert "relay's note, not the user's" in first
        assert "not the user's approval" in first
        assert note.count("user") == 2  # one sentence of authorship, no second


# ------------------------------------------------------------------ pasted guide
@pytest.mark.parametrize("audience", guide.AUDIENCES)
def test_the_guide_to_paste_is_at_most_600_tokens(relay, audience):
    short = relay("guide", "--for", audience).out
    full = relay("guide", "--for", audience, "--full").out
    assert count(short) <= GUIDE, count(short)
    assert count(full) > GUIDE  # the long form, for people


# ------------------------------------------------------------------ claim's output
def test_claims_output_for_an_agent_is_at_most_120_tokens_besides_the_text(relay):
    """claim's output read by an agent (not a terminal): at most 120 tokens besides the
    request's text and the scope flags the call itself gave, which every printed command
    carries again so that it acts on the same home (design.md §14, §18)."""
    alice, bob = relay.join("alice"), relay.join("bob")
    rid = new_id()
    relay.send(alice, "bob", "please say hello", request_id=rid)
    r = relay("claim", "--id", rid[:12], "--home", str(relay.home), env=bob)
    assert r.code == 0
    out = r.out + r.err
    scope = f" --home {relay.home}"
    flags = out.count(scope) * count(scope)
    assert count(out) - count("please say hello") - flags <= CLAIM, out
    # and without a scope of its own (the home from RELAY_HOME stays in the environment)
    assert relay("reply", rid, "hello", env=bob).code == 0
    relay.send(alice, "bob", "please say hello", request_id=(other := new_id()))
    r = relay("claim", "--id", other[:12], env=bob)
    assert r.code == 0 and "--home" not in r.out
    assert count(r.out + r.err) - count("please say hello") <= CLAIM, r.out + r.err


# ------------------------------------------------------ the printed command takes it
@pytest.mark.parametrize("runtime", ["claude", "gemini"])
def test_the_command_a_listing_prints_takes_that_request_as_pasted(relay, tmp_path, runtime):
    """Each line's `relay claim --id PREFIX` (design.md §14), run as printed in the
    agent's shell, claims exactly that request."""
    agent = Agent(relay, tmp_path, runtime)
    agent.hook("SessionStart")
    alice = relay.join("alice")
    ids = [new_id() for _ in range(3)]
    for rid in ids:
        relay.send(alice, agent.name, request_id=rid)
    listing = _text(agent.hook("UserPromptSubmit"))
    commands = re.findall(r"`(relay claim --id [^`]+)`", listing)
    assert len(commands) == 3
    env = relay._env(agent.agent_env())
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # the relay under test
    for rid, cmd in zip(ids, commands, strict=True):
        p = subprocess.run(["bash", "-c", cmd + " --json"], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["id"] == rid
