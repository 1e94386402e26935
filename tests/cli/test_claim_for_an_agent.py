"""`relay claim` for an agent (stdout not a terminal, design.md §16): the request's text
framed, then the commands that act on it, in few tokens; no terminal hint; the scope
flags its command line was given, never the home the environment gave (design.md §14).
"""

from __future__ import annotations

import pytest
from conftest import new_id

# claim's output for an agent, besides the request's text, in o200k_base tokens
CLAIM_TOKENS = 120
TEXT = "Review the diff in src/ and say what breaks."


def _tokens(text: str) -> int:
    bpe = pytest.importorskip("bpe_openai")
    return len(bpe.get_encoding("o200k_base").encode(text))


def _claimed(relay, alice, bob, *args: str, env: dict | None = None) -> tuple[str, str]:
    rid = new_id()
    assert relay.send(alice, "bob", TEXT, request_id=rid).code == 0
    r = relay("claim", *args, env={**bob, **(env or {})})
    assert r.code == 0, r.err
    return rid, r.out


def test_an_agents_claim_costs_at_most_120_tokens_besides_the_text(world):
    relay, alice, bob = world
    _, out = _claimed(relay, alice, bob)
    assert TEXT in out
    assert _tokens(out) - _tokens(TEXT) <= CLAIM_TOKENS, out
    # nothing meant for a person at a terminal
    assert "Ctrl-D" not in out and "type the answer" not in out


def test_an_agents_claim_names_the_request_in_commands_that_take_it_back(world):
    relay, alice, bob = world
    rid, out = _claimed(relay, alice, bob)
    lines = out.splitlines()
    ack = next(ln for ln in lines if ln.startswith("next: relay ack "))
    ref = ack.split()[-1]
    assert rid.startswith(ref) and len(ref) >= 12
    assert f"then: relay reply {ref} -" in lines
    assert "--reason" in lines[-1]
    assert relay("ack", ref, env=bob).code == 0  # the prefix names the request
    assert relay("show", rid, "--json").json["state"] == "acknowledged"


@pytest.mark.sqlite_only
def test_an_agents_claim_carries_the_scope_flags_of_its_command_line_only(world):
    relay, alice, bob = world
    # the home from RELAY_HOME stays in the environment: the commands carry no --home
    rid, out = _claimed(relay, alice, bob)
    assert "--home" not in out and str(relay.home) not in out
    assert relay("ack", rid, env=bob).code == 0  # (the next claim holds only its own)
    # given --home, each command carries it
    _, out = _claimed(relay, alice, bob, "--home", str(relay.home), env={"RELAY_HOME": None})
    commands = [ln for ln in out.splitlines() if ln.startswith(("next: relay", "then: relay"))]
    assert len(commands) == 2
    assert all(f"--home {relay.home}" in ln for ln in commands), out
    # the flags are the call's own: besides them, the same budget
    flags = _tokens(f" --home {relay.home}") * len(commands)
    assert _tokens(out) - _tokens(TEXT) - flags <= CLAIM_TOKENS, out
