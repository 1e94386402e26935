"""The ledger's state machine is data (relay_cli/ledger/states.py, design.md §10): every
state change goes through its ``apply``, every row of the table is a real path through
the `relay` command, and `relay schema` prints it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import fake_crash

from relay_cli.core import clock
from relay_cli.core.errors import RelayError
from relay_cli.ledger import states as ledger_states
from relay_cli.ledger.states import (
    FINAL_STATES,
    MEANING,
    STATES,
    STORED_STATES,
    TRANSITIONS,
    VIEWS,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_names_only_stored_states_and_every_shown_state_has_a_meaning():
    for t in TRANSITIONS:
        assert t.from_state is None or t.from_state in STORED_STATES, t
        assert t.to_state is None or t.to_state in STORED_STATES, t
        assert t.who and t.when, t
    pairs = [(t.from_state, t.event) for t in TRANSITIONS]
    assert len(pairs) == len(set(pairs)), "one row per (from, event)"
    assert set(VIEWS) == {"effect_unknown"} and VIEWS["effect_unknown"].stored == "running"
    assert set(STATES) == set(STORED_STATES) | set(VIEWS)
    assert set(MEANING) == set(STATES)
    assert set(FINAL_STATES) < set(STORED_STATES)
    # a state outside the table's rows is a state nothing can reach
    assert {t.to_state for t in TRANSITIONS} - {None} == set(STORED_STATES)


def test_only_apply_and_touch_write_ledger_rows():
    """Every write of a ledger row outside relay_cli/store/ is in ledger/states.py, where
    apply consults the table (and touch refuses to change a state)."""
    writes = {"insert_ledger", "update_ledger", "delete_ledger"}
    found = []
    for path in (ROOT / "relay_cli").rglob("*.py"):
        if "store" in path.relative_to(ROOT / "relay_cli").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in writes
            ):
                found.append(path.relative_to(ROOT / "relay_cli").as_posix())
    assert found and set(found) == {"ledger/states.py"}, found


def _settle(relay, key: str, outcome: str) -> None:
    r = relay("ledger", "resolve", key, "--outcome", outcome, "--json", terminal=True)
    assert r.code == 0, r.err


def test_every_transition_of_the_table_is_a_path_through_the_relay_command(relay, monkeypatch):
    taken = []
    real = ledger_states.transition

    def spy(key, from_state, event):
        t = real(key, from_state, event)
        taken.append((from_state, event))
        return t

    monkeypatch.setattr(ledger_states, "transition", spy)

    def once(key, *args, code=0):
        r = relay("once", "--key", key, *args)
        assert r.code == code, (key, args, r.err)

    once("ok", "--", "true")  # call, exit_zero
    once("bad", "--", "false", code=1)  # exit_nonzero
    once("gone", "--", "/nonexistent/cmd", code=127)  # not_started
    once("ap", "--approve", "--timeout", "0", "--", "/nonexistent/cmd", code=75)
    assert relay("approve", "ap", "--yes", terminal=True).code == 0
    once("ap", "--", "/nonexistent/cmd", code=127)  # take, not_started_approved
    assert relay("deny", "ap", terminal=True).code == 0  # approved -> denied
    once("dn", "--approve", "--timeout", "0", "--", "true", code=75)
    assert relay("deny", "dn", terminal=True).code == 0  # awaiting -> denied
    once("idem", "--idempotent", "--", "true")
    fake_crash(relay, "idem")
    once("idem", "--idempotent", "--", "true")  # rerun
    once("gate", "--", "true")
    fake_crash(relay, "gate", child_pid=None, child_start=None)
    once("gate", "--", "true")  # reclaim: it never started
    for key, outcome in (("cs", "succeeded"), ("cf", "failed")):
        once(key, "--", "true")
        fake_crash(relay, key)
        _settle(relay, key, outcome)  # running -> outcome
    _settle(relay, "ok", "failed")  # succeeded -> failed
    _settle(relay, "bad", "succeeded")  # failed -> succeeded
    _settle(relay, "cs", "succeeded")  # succeeded -> succeeded
    _settle(relay, "cf", "failed")  # failed -> failed
    once("aw", "--approve", "--timeout", "0", "--", "true", code=75)
    _settle(relay, "aw", "forget")  # awaiting -> forgotten
    once("apf", "--approve", "--timeout", "0", "--", "true", code=75)
    assert relay("approve", "apf", "--yes", terminal=True).code == 0
    _settle(relay, "apf", "forget")  # approved -> forgotten
    _settle(relay, "dn", "forget")  # denied -> forgotten
    once("run", "--", "true")
    fake_crash(relay, "run")
    _settle(relay, "run", "forget")  # running -> forgotten
    _settle(relay, "ok", "forget")  # failed -> forgotten
    _settle(relay, "cs", "forget")  # succeeded -> forgotten
    _settle(relay, "cs", "forget")  # forgotten -> forgotten
    once("cs", "--", "true")  # forgotten -> running
    once("aw", "--timeout", "0", "--", "true", code=75)  # forgotten -> awaiting

    assert set(taken) == {(t.from_state, t.event) for t in TRANSITIONS}


def test_apply_refuses_a_step_the_table_lacks_and_changes_nothing(relay):
    assert relay("once", "--key", "done", "--", "true").code == 0
    before = relay.snapshot()
    store = relay.open_store()
    try:
        with pytest.raises(RelayError) as e:
            with store.transaction():
                row = store.get_ledger("done")
                ledger_states.apply(store, "done", row, "take", clock.Clock().now_ms(), {"runs": 9})
        assert e.value.code == "state_conflict" and "succeeded" in e.value.message
        with pytest.raises(ValueError), store.transaction():
            ledger_states.touch(store, "done", clock.Clock().now_ms(), {"state": "running"})
    finally:
        store.close()
    assert relay.snapshot() == before


def test_a_refused_person_step_says_why_from_the_table(relay):
    assert relay("once", "--key", "w", "--approve", "--timeout", "0", "--", "true").code == 75
    before = relay.snapshot()
    r = relay("ledger", "resolve", "w", "--outcome", "succeeded", "--json", terminal=True)
    assert r.code == 4 and r.error["code"] == "state_conflict"
    assert r.error["message"] == "key 'w' is awaiting_approval: its command never ran"
    assert relay.snapshot() == before


def test_schema_prints_the_ledger_table(relay):
    doc = json.loads(relay("schema").out)["ledger"]
    assert doc["states"]["all"] == list(STATES)
    assert doc["states"]["stored"] == list(STORED_STATES)
    assert doc["states"]["final"] == [s for s in STORED_STATES if s in FINAL_STATES]
    assert doc["states"]["views"] == {
        "effect_unknown": {"stored": "running", "when": VIEWS["effect_unknown"].when}
    }
    assert set(doc["states"]["meaning"]) == set(STATES)
    assert [(t["from"], t["event"], t["to"]) for t in doc["transitions"]] == [
        (t.from_state, t.event, t.to_state) for t in TRANSITIONS
    ]
    assert all(t["who"] and t["when"] for t in doc["transitions"])
