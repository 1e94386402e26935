"""Hints fit the situation (design.md §14): each code's fixed hint comes first (agents
match on it); what the caller's situation adds follows as the error's detail, and every
command a hint names is one that works."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import new_id

from relay_cli.core.errors import ERRORS

BIN = str(Path(sys.executable).parent)  # where the `relay` console script is


def bash(relay, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a real bash whose PATH finds this relay, as a person's shell."""
    env = relay._env(None)
    env["PATH"] = BIN + ":" + env.get("PATH", "")
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120
    )


def _commands(text: str) -> list[list[str]]:
    """Every relay command line a hint names: in backquotes or in eval "$(...)"."""
    found = []
    for quoted, dollar in re.findall(r"`([^`]+)`|\$\(([^)]+)\)", text):
        words = shlex.split(quoted or dollar)
        if words and words[0] == "relay":
            found.append(words[1:])
    return found


def _concrete(words: list[str]) -> list[str]:
    """Placeholders made concrete: NAME, ID, KEY and the first of `a|b|c`."""
    subst = {"NAME": "alice", "ID": str(uuid.uuid4()), "KEY": "k", "TEXT": "x"}
    return [subst.get(w, w.split("|")[0] if "|" in w else w) for w in words]


HINTS_SEEN: list[str] = []


def test_every_command_that_a_fixed_hint_names_exists_with_its_options(relay):
    named = [(code, w) for code, spec in ERRORS.items() for w in _commands(spec.hint)]
    assert len(named) >= 15
    for code, words in named:
        r = relay(*_concrete(words), "--help")
        assert r.code == 0, (code, words, r.err)
        assert r.out.startswith("Usage: relay"), (code, words)


# ------------------------------------------------------------------ sessions
def _failing(relay, script: str) -> subprocess.CompletedProcess:
    p = bash(relay, script)
    HINTS_SEEN.extend(
        ln[len("hint: ") :] for ln in p.stderr.splitlines() if ln.startswith("hint: ")
    )
    return p


def test_after_lease_expired_the_hint_is_the_eval_line_that_repairs_the_shell(relay):
    relay("peers", "add", "bob")
    p = _failing(
        relay,
        """
        set -u
        eval "$(relay peers join alice --kind claude --lease 30s --shell)"
        export RELAY_TIME_OFFSET=120          # the person read for two minutes
        relay send --to bob --id "$(relay id)" hello; echo "send: $?"
        line=$(relay peers heartbeat 2>&1 | sed -n 's/.*(run: \\(eval .*\\))$/\\1/p')
        echo "line: $line"
        eval "$line"
        relay send --to bob --id "$(relay id)" hello >/dev/null; echo "again: $?"
    """,
    )
    out = p.stdout
    assert "send: 5" in out, p.stdout + p.stderr
    assert "relay: error: lease_expired" in p.stderr
    hint = next(ln for ln in p.stderr.splitlines() if ln.startswith("hint: "))
    assert hint[len("hint: ") :].startswith(ERRORS["lease_expired"].hint)
    assert 'run: eval "$(relay peers join alice --kind claude --lease 30s --shell)"' in hint
    assert 'line: eval "$(relay peers join alice --kind claude --lease 30s --shell)"' in out
    assert "again: 0" in out, p.stdout + p.stderr


def test_after_peer_superseded_the_hint_is_the_eval_line_too(relay):
    relay("peers", "add", "bob")
    ghost = relay.join("alice", "--lease", "5m")
    relay.join("alice")  # another shell took the name
    r = relay("send", "--to", "bob", "--id", new_id(), "x", "--json", env=ghost)
    err = r.error
    assert err["code"] == "peer_superseded"
    assert err["hint"].startswith(ERRORS["peer_superseded"].hint)
    assert err["hint"].endswith('(run: eval "$(relay peers join alice --lease 5m --shell)")')
    HINTS_SEEN.append(err["hint"])


def test_a_session_that_left_gets_the_eval_line(relay):
    alice = relay.join("alice", "--kind", "codex")
    assert relay("peers", "leave", env=alice).code == 0
    err = relay("peers", "heartbeat", "--json", env=alice).error
    assert err["code"] == "invalid_session"
    assert err["hint"].endswith('(run: eval "$(relay peers join alice --kind codex --shell)")')


def test_claim_without_a_session_names_the_join_line(relay):
    relay("peers", "add", "bob", "--kind", "gemini")
    err = relay("claim", "--as", "bob", "--json").error
    assert err["code"] == "session_required"
    assert err["hint"].endswith('(run: eval "$(relay peers join bob --kind gemini --shell)")')
    # a name that is live elsewhere: joining would take it away from that agent
    relay.join("bob")
    relay("peers", "add", "carol")
    err = relay("send", "--as", "bob", "--to", "carol", "x", "--json").error
    assert err["code"] == "session_required"
    assert "live in another shell" in err["hint"] and "run: eval" not in err["hint"]


# ------------------------------------------------------------------ delivery_unknown
@pytest.mark.parametrize("reason", ["claim_lease_expired", "reply_deadline_elapsed"])
def test_state_conflict_on_delivery_unknown_says_why_and_who_settles_it(relay, reason):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "work", "--reply-within", "30s", request_id=rid)
    assert relay("claim", "--lease", "10s", env=bob).code == 0
    if reason == "reply_deadline_elapsed":
        assert relay("ack", rid, env=bob).code == 0
    relay.env["RELAY_TIME_OFFSET"] = "60"
    shown = relay("show", rid, "--json").json
    assert (shown["state"], shown["reason"]) == ("delivery_unknown", reason)
    before = relay.snapshot()
    for args, who in ((["reply", rid, "done"], bob), (["cancel", rid], alice)):
        r = relay(*args, "--json", env=who)
        err = r.error
        assert err["code"] == "state_conflict", r.err
        assert err["hint"].startswith(ERRORS["state_conflict"].hint)
        assert f"became delivery_unknown ({reason}:" in err["hint"]
        assert "a person settles it in their own terminal" in err["hint"]
        # one full command per outcome, never alternatives a shell reads as a pipeline
        for outcome in ("completed", "failed", "requeue"):
            assert f"`relay resolve {rid} --outcome {outcome}`" in err["hint"]
        assert "|" not in err["hint"]
        HINTS_SEEN.append(err["hint"])
    assert relay.snapshot() == before


def test_acting_on_a_queued_request_before_claiming_it_says_to_claim_it_first(relay):
    """An agent that sees an id in `relay inbox` and runs `relay ack ID` straight away was
    told "only the session that claimed ID may do this, not 'bob'", as if another session
    held it. Nobody claimed it: the error says so and names the claim that takes it."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "work", request_id=rid)
    before = relay.snapshot()
    for args in (
        ["ack", rid],
        ["reply", rid, "done"],
        ["fail", rid, "--reason", "x"],
        ["reject", rid, "--reason", "x"],
    ):
        err = relay(*args, "--json", env=bob).error
        assert err["code"] == "not_owner", err
        assert "the session that claimed" not in err["message"], err["message"]
        assert "no session has claimed it" in err["message"], err["message"]
        assert err["hint"].startswith(ERRORS["not_owner"].hint)
        assert f"`relay claim --id {rid}`" in err["hint"], err["hint"]
        HINTS_SEEN.append(err["hint"])
    assert relay.snapshot() == before
    # the hint's command works, and then so does the ack
    assert relay("claim", "--id", rid, env=bob).code == 0
    assert relay("ack", rid, env=bob).code == 0
    # the sender is still told only the claiming session may (it is claimed now)
    err = relay("ack", rid, "--json", env=alice).error
    assert err["code"] == "not_owner" and "relay claim" not in err["hint"]


def test_claiming_again_what_this_session_holds_says_where_its_text_is(relay):
    """A `claim --id ID` whose answer was lost, run again: the request is this session's
    already. It is still state_conflict (a claim takes queued work), but the hint says the
    session holds it and how to read it, instead of leaving the agent to guess."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "work", request_id=rid)
    assert relay("claim", "--id", rid, env=bob).code == 0
    before = relay.snapshot()
    err = relay("claim", "--id", rid[:8], "--json", env=bob).error
    assert err["code"] == "state_conflict"
    assert err["hint"].startswith(ERRORS["state_conflict"].hint)
    assert "this session claimed it already" in err["hint"], err["hint"]
    assert f"`relay show {rid}`" in err["hint"], err["hint"]
    HINTS_SEEN.append(err["hint"])
    assert relay.snapshot() == before
    assert relay("ack", rid, env=bob).code == 0  # it is still this session's to finish


def test_every_command_in_a_situation_hint_exists_with_its_options(relay):
    """The hints the tests above met (run them first: same module)."""
    assert any("run: eval" in h for h in HINTS_SEEN) and any("resolve" in h for h in HINTS_SEEN)
    for hint in HINTS_SEEN:
        for words in _commands(hint):
            r = relay(*_concrete(words), "--help")
            assert r.code == 0, (hint, words, r.err)


def test_session_required_hint_does_not_claim_an_active_session(relay):
    """`claim --as NAME` for a name with no session: the hint must not say it has one."""
    relay("peers", "add", "zed", "--json")
    r = relay("claim", "--as", "zed", "--json")
    assert r.code == 5 and r.error["code"] == "session_required"
    assert "has an active session" not in r.error["hint"]
