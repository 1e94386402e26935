"""A person's acts need a person at a terminal (design.md §14): `resolve`, `approve`,
`deny`; `approve` shows the exact command, cwd and key and asks first."""

from __future__ import annotations

import json
import os

import pytest
from conftest import new_id


@pytest.fixture
def unknown(relay):
    """A request that became delivery_unknown (claim lease lapsed, on_lost=unknown)."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "deploy it", request_id=rid).code == 0
    assert relay("claim", "--lease", "10s", env=bob).code == 0
    assert relay("sweep", env={"RELAY_TIME_OFFSET": "30"}).code == 0
    relay.env["RELAY_TIME_OFFSET"] = "30"
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"
    return relay, alice, bob, rid


def test_resolve_without_a_terminal_is_refused_and_changes_nothing(unknown):
    relay, alice, bob, rid = unknown
    before = relay.snapshot()
    for who in (None, alice, bob):  # a person's shell or an agent's: no terminal, no act
        r = relay("resolve", rid, "--outcome", "completed", "--json", env=who)
        assert r.code == 5 and r.error["code"] == "approval_needs_terminal", r.err
        assert r.out == ""
        piped = relay.proc("resolve", rid, "--outcome", "requeue", input="y\n", env=who)
        assert piped.code == 5 and "approval_needs_terminal" in piped.err
        assert "Traceback" not in piped.err
    assert relay.snapshot() == before
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"


def test_resolve_at_a_terminal_is_recorded_as_the_person(unknown):
    relay, alice, bob, rid = unknown
    p = relay.at_terminal(
        "resolve", rid[:8], "--outcome", "completed", "--note", "saw it", "--json"
    )
    assert p.returncode == 0, p.stderr
    obj = json.loads(p.stdout)
    assert obj["state"] == "completed" and obj["reason"] == "resolved_by_human"
    events = relay("show", rid, "--events", "--json").json["events"]
    assert events[-1]["actor"].startswith("person:") and events[-1]["detail"] == "saw it"


def test_invalid_input_is_reported_before_the_terminal_rule(unknown):
    relay, *_ = unknown
    r = relay("resolve", "nope", "--outcome", "completed", "--json")
    assert r.error["code"] == "invalid_id"
    r = relay("resolve", new_id(), "--outcome", "maybe", "--json")
    assert r.error["code"] == "usage_error"


# ------------------------------------------------------------------ approve asks
@pytest.fixture
def awaiting(relay, tmp_path):
    marker = tmp_path / "ran"
    cmd = ["sh", "-c", f"echo ran >> {marker}"]
    r = relay("once", "--key", "deploy-1", "--approve", "--timeout", "0", "--", *cmd)
    assert r.code == 75
    return relay, cmd, marker


def test_approve_shows_command_cwd_and_key_and_approves_on_yes(awaiting):
    relay, cmd, marker = awaiting
    p = relay.at_terminal("approve", "deploy-1", typed=b"y\n")
    assert p.returncode == 0, p.stderr
    assert f"command: sh -c 'echo ran >> {marker}'" in p.stderr
    assert f"cwd:     {os.getcwd()}" in p.stderr
    assert "key:     deploy-1" in p.stderr
    assert "Approve it? [y/N]" in p.stderr
    assert "approved" in p.stdout
    entry = relay("ledger", "show", "deploy-1", "--json").json
    assert entry["state"] == "approved" and entry["decided_by"].startswith("person:")
    assert relay("once", "--key", "deploy-1", "--", *cmd).code == 0
    assert marker.read_text() == "ran\n"


@pytest.mark.parametrize("typed", [b"n\n", b"\n", b"whatever\n", b"\x04"])
def test_approve_does_nothing_unless_the_person_says_yes(awaiting, typed):
    relay, cmd, marker = awaiting
    before = relay.snapshot()
    p = relay.at_terminal("approve", "deploy-1", "--json", typed=typed)
    assert p.returncode == 0, p.stderr
    # with --json the question and its answer are on the terminal; stderr stays empty
    assert "Approve it? [y/N]" in p.terminal
    assert "not approved; nothing changed" in p.terminal and p.stderr == ""
    assert json.loads(p.stdout)["state"] == "awaiting_approval"
    p = relay.at_terminal("approve", "deploy-1", typed=typed)
    assert p.returncode == 0 and "not approved; nothing changed" in p.stderr
    assert relay.snapshot() == before
    assert not marker.exists()


def test_approve_yes_skips_the_question_but_not_the_terminal_rule(awaiting):
    relay, cmd, marker = awaiting
    before = relay.snapshot()
    for args in (("approve", "deploy-1", "--yes"), ("approve", "-y", "deploy-1")):
        r = relay(*args, "--json")
        assert r.code == 5 and r.error["code"] == "approval_needs_terminal"
        piped = relay.proc(*args, input="y\n")
        assert piped.code == 5 and "approval_needs_terminal" in piped.err
    assert relay.snapshot() == before
    p = relay.at_terminal("approve", "deploy-1", "--yes", "--json")
    assert p.returncode == 0, p.stderr
    assert "Approve it?" not in p.stderr
    assert json.loads(p.stdout)["state"] == "approved"


def test_approve_refuses_an_entry_that_changed_while_the_person_read_it(relay, tmp_path):
    """The person approves what they saw: if the key was forgotten and made again for
    another command in between, nothing is approved."""
    from relay_cli.core.errors import RelayError
    from relay_cli.ledger import entries as ledger

    assert relay("once", "--key", "k", "--approve", "--timeout", "0", "--", "true").code == 75
    store = relay.open_store()
    try:
        with store.transaction():
            shown = ledger.show(store, "k")
            store.update_ledger("k", {"argv": json.dumps(["rm", "-rf", "/tmp/x"])})
            with pytest.raises(RelayError) as e:
                ledger.approve(store, 0, "k", shown, terminal=True)
        assert e.value.code == "state_conflict"
    finally:
        store.close()


def test_denied_key_cannot_be_unlocked_without_a_terminal(relay, tmp_path):
    """design.md §10: after a denial every call with that key exits 10 and runs nothing; only a
    person at a terminal decides. `ledger resolve --outcome forget` from a non-terminal
    (an agent's shell, as the effect_unknown hint invites) must not undo the denial."""
    marker = tmp_path / "ran"
    cmd = ["sh", "-c", f"echo x >> {marker}"]
    r = relay("once", "--key", "deploy-1", "--approve", "--timeout", "0", "--", *cmd)
    assert r.code == 75, r.err
    assert relay.at_terminal("deny", "deploy-1", "--note", "no").returncode == 0
    # an agent (stdin not a terminal) tries to clear the denial
    relay("ledger", "resolve", "deploy-1", "--outcome", "forget")
    r = relay("once", "--key", "deploy-1", "--", *cmd)
    assert not marker.exists(), "the denied command ran after a non-terminal `forget`"
    assert r.code == 10, (r.code, r.err)


def test_the_terminal_rule_of_approve_and_deny_is_the_library_s(relay):
    """approve, deny and resolve keep their terminal rule in the library (design.md §6):
    ``entries.approve``, ``entries.deny`` and ``entries.to_decide`` refuse without a
    terminal, before they look the entry up, whoever calls them."""
    from relay_cli.core.errors import RelayError
    from relay_cli.ledger import entries as ledger

    assert relay("once", "--key", "k", "--approve", "--timeout", "0", "--", "true").code == 75
    before = relay.snapshot()
    store = relay.open_store()
    try:
        for act in (
            lambda: ledger.approve(store, 0, "k", terminal=False),
            lambda: ledger.deny(store, 0, "k", "no", terminal=False),
            lambda: ledger.to_decide(store, "k", "approve", terminal=False),
            lambda: ledger.deny(store, 0, "no-such-key", None, terminal=False),
        ):
            with store.transaction(), pytest.raises(RelayError) as e:
                act()
            assert e.value.code == "approval_needs_terminal"
    finally:
        store.close()
    assert relay.snapshot() == before
