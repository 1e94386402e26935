"""`relay schema` describes the real interface: commands, errors, states, request fields."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import new_id

from relay_cli.cli import schema as schema_mod
from relay_cli.core.errors import ERRORS, ExitStatus, RelayError
from relay_cli.core.limits import FINAL_STATES, STATES
from relay_cli.requests.states import MEANING, TRANSITIONS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def doc():
    from conftest import Relay

    r = Relay(Path("/nonexistent-relay-home"))("schema")
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.one_backend
def test_schema_is_one_json_document_on_stdout_and_reads_no_state(relay):
    r = relay("schema", "--json")
    assert r.code == 0 and r.err == ""
    assert json.loads(r.out)["program"] == "relay"
    assert not relay.home.exists()


def test_schema_lists_every_command_of_the_live_tree(doc):
    listed = {c["path"] for c in doc["commands"]}
    walked = {ctx.command_path for ctx, _ in schema_mod.walk()}
    assert listed == walked
    for name in ("relay send", "relay claim", "relay wait", "relay peers join", "relay schema"):
        assert name in listed


@pytest.mark.one_backend
def test_schema_options_match_what_each_command_accepts(doc, relay):
    for c in doc["commands"]:
        r = relay(*c["path"].split()[1:], "--help")
        assert r.code == 0, (c["path"], r.err)
        for o in c["options"]:
            assert o["flags"][0] in r.out, (c["path"], o["name"])
            assert o["type"] in ("string", "integer", "number", "boolean", "choice", "path")
    send = next(c for c in doc["commands"] if c["path"] == "relay send")
    opts = {o["name"]: o for o in send["options"]}
    assert opts["--to"]["required"] is True and opts["--to"]["type"] == "string"
    assert opts["--on-lost"]["default"] == "unknown"
    assert opts["--max-attempts"]["type"] == "integer" and opts["--max-attempts"]["default"] == 3
    assert opts["--json"]["is_flag"] is True and opts["--json"]["default"] is False
    assert opts["--id"]["help"].startswith("Your request id")


def test_schema_errors_are_the_taxonomy(doc):
    assert [e["code"] for e in doc["errors"]] == list(ERRORS)
    for e in doc["errors"]:
        spec = ERRORS[e["code"]]
        assert (e["exit_code"], e["retryable"], e["hint"]) == (
            spec.exit_code,
            spec.retryable,
            spec.hint,
        )
    listed_codes = {e["code"] for e in doc["exit_status"]}
    assert {spec.exit_code for spec in ERRORS.values()} <= listed_codes
    assert 0 in listed_codes


def test_every_exit_status_is_one_of_the_enum_and_the_table_is_its_meanings(doc):
    """design.md §7: the exit statuses are one enum (``ExitStatus``); the error table uses
    its members and `relay schema`'s table is its meanings (with ``also_exits``' whens)."""
    for spec in ERRORS.values():
        assert isinstance(spec.exit_code, ExitStatus)
        assert all(isinstance(status, ExitStatus) for status, _ in spec.also_exits)
    meanings = {int(s): s.meaning for s in ExitStatus if s.meaning}
    listed = {e["code"]: e["meaning"] for e in doc["exit_status"]}
    assert {k: v for k, v in listed.items() if k in meanings} == meanings
    assert set(listed) - set(meanings) == {ExitStatus.NOT_EXECUTABLE, ExitStatus.COMMAND_NOT_FOUND}


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "args, status",
    [
        (["run", "--as", "c1", "--", "no-such-command-relay-test"], 127),
        (["once", "--key", "k1", "--", "no-such-command-relay-test"], 127),
        (["once", "--key", "k2", "--", "/"], 126),
    ],
)
def test_a_command_that_cannot_start_is_a_real_entry_of_the_table(relay, doc, args, status):
    """`run`/`once` exit as a shell does when CMD cannot start (design.md §7): usage_error,
    whose entry says it also exits 127 and 126, and whose fixed hint comes first."""
    r = relay.proc(*args[:1], "--json", *args[1:])
    entry = next(e for e in doc["errors"] if e["code"] == "usage_error")
    err = r.error
    assert (r.code, err["code"], err["exit_code"]) == (status, "usage_error", status)
    assert status in [x["exit_code"] for x in entry["also_exits"]]
    assert err["hint"].startswith(entry["hint"] + " (")
    row = next(e for e in doc["exit_status"] if e["code"] == status)
    assert row["errors"] == ["usage_error"] and "`run` and `once`" in row["meaning"]


def test_an_exit_status_outside_the_table_cannot_be_raised():
    assert RelayError("usage_error", exit_code=127).exit_code == 127
    assert RelayError("usage_error").exit_code == 2
    with pytest.raises(ValueError):
        RelayError("usage_error", exit_code=5)
    with pytest.raises(ValueError):
        RelayError("invalid_id", exit_code=127)
    assert all(e["also_exits"] == [] for e in doc_errors() if e["code"] != "usage_error")


def doc_errors() -> list[dict]:
    return schema_mod.build()["errors"]


def _error_classes() -> set[str]:
    """RelayError and its subclasses, after every module of relay_cli was executed."""
    import importlib
    import pkgutil
    import types

    import relay_cli

    for info in pkgutil.walk_packages(relay_cli.__path__, "relay_cli."):
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as e:  # store/pg_driver.py without the postgres extra
            if e.name != "psycopg2":
                raise
            continue
        if type(module) is not types.ModuleType:  # a lazy module (cli.app.lazy_module)
            _ = module.__doc__  # the first attribute access executes it
    names, todo = set(), [RelayError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo += cls.__subclasses__()
    return names


def test_every_error_code_has_a_raise_site_in_the_code():
    """No code is listed that nothing can produce."""
    classes = "|".join(sorted(_error_classes()))
    pattern = re.compile(rf"\b(?:{classes})\(\s*\"([a-z_]+)\"")
    raised = set()
    for path in (ROOT / "relay_cli").rglob("*.py"):
        if path.name != "errors.py":
            raised |= set(pattern.findall(path.read_text(encoding="utf-8")))
    assert sorted(set(ERRORS) - raised) == [], "error codes listed but never raised"
    assert sorted(raised - set(ERRORS)) == [], "codes raised but not in ERRORS"


def _expect(r, code: str, doc) -> None:
    entry = next(e for e in doc["errors"] if e["code"] == code)
    err = r.error
    assert err["code"] == code, (code, err)
    assert r.code == entry["exit_code"] == err["exit_code"]
    assert err["retryable"] is entry["retryable"]
    # the fixed hint comes first; its commands carry the call's scope flags (design.md §14)
    assert re.sub(r" --home [^\s`]+", "", err["hint"]).startswith(entry["hint"])


def test_a_sample_of_error_codes_is_produced_through_the_cli(relay, doc, tmp_path):
    alice, bob = relay.join("alice"), relay.join("bob")
    _expect(relay("send", "--json", "--bogus"), "usage_error", doc)
    _expect(relay("show", "not-a-uuid", "--json"), "invalid_id", doc)
    _expect(relay("send", "--to", "bob", "--json", "-", input=b"", env=alice), "invalid_text", doc)
    _expect(relay("peers", "join", "Bad Name", "--json"), "invalid_name", doc)
    _expect(
        relay("send", "--to", "bob", "--ttl", "1s", "--json", "x", env=alice),
        "invalid_duration",
        doc,
    )
    _expect(relay("send", "--to", "alice", "--json", "x", env=alice), "self_message", doc)
    _expect(relay("show", new_id(), "--json"), "request_not_found", doc)
    _expect(relay("send", "--to", "nobody", "--json", "x", env=alice), "unknown_peer", doc)
    _expect(relay("submit", new_id(), "--json", env=alice), "prepared_not_found", doc)
    rid = new_id()
    assert relay.send(alice, "bob", "one", request_id=rid).code == 0
    _expect(relay.send(alice, "bob", "two", request_id=rid), "request_id_conflict", doc)
    assert relay("claim", "--json", env=bob).code == 0
    _expect(relay("cancel", rid, "--json", env=alice), "state_conflict", doc)
    _expect(relay("send", "--to", "bob", "--json", "x"), "no_identity", doc)
    _expect(relay("send", "--to", "bob", "--as", "alice", "--json", "x"), "session_required", doc)
    _expect(
        relay(
            "peers",
            "heartbeat",
            "--json",
            env={"RELAY_PEER": "alice", "RELAY_SESSION": "no-such-token"},
        ),
        "invalid_session",
        doc,
    )
    _expect(relay("cancel", rid, "--json", env=bob), "not_owner", doc)
    _expect(
        relay("send", "--to", "bob", "--json", "-", input="x" * 40000, env=alice),
        "text_too_large",
        doc,
    )
    _expect(
        relay(
            "send",
            "--to",
            "bob",
            "--id",
            new_id(),
            "--json",
            "x",
            env={**alice, "RELAY_RATE_LIMIT": "1"},
        ),
        "rate_limited",
        doc,
    )
    _expect(relay("claim", "--json", env=alice), "nothing_to_claim", doc)
    _expect(relay("wait", rid, "--timeout", "0", "--json", env=alice), "timeout", doc)

    if relay.url:  # design.md §13: no local file; the schema rule holds on the server
        relay.sql("UPDATE relay_schema SET version = 9999")
        _expect(relay("list", "--json"), "schema_too_new", doc)
        return
    unsafe = tmp_path / "open-home"
    unsafe.mkdir(mode=0o755)
    os.chmod(unsafe, 0o755)
    _expect(relay("list", "--json", "--home", str(unsafe)), "unsafe_state_dir", doc)

    newer = tmp_path / "newer-home"
    assert relay("peers", "add", "x", "--home", str(newer)).code == 0
    db = sqlite3.connect(newer / "relay.db")
    db.execute("PRAGMA user_version = 9999")
    db.close()
    _expect(relay("list", "--json", "--home", str(newer)), "schema_too_new", doc)

    corrupt = tmp_path / "corrupt-home"
    corrupt.mkdir(mode=0o700)
    (corrupt / "relay.db").write_bytes(b"this is not a database" * 100)
    os.chmod(corrupt / "relay.db", 0o600)
    _expect(relay("list", "--json", "--home", str(corrupt)), "database_corrupt", doc)


def test_every_state_is_in_the_transition_table(doc):
    assert doc["states"]["all"] == list(STATES)
    assert set(doc["states"]["final"]) == FINAL_STATES
    assert set(doc["states"]["meaning"]) == set(STATES) == set(MEANING)
    touched = {t["from"] for t in doc["transitions"]} | {t["to"] for t in doc["transitions"]}
    assert set(STATES) <= touched
    assert touched - {None} <= set(STATES)
    assert [(t["from"], t["event"], t["to"], t["reason"]) for t in doc["transitions"]] == [
        (t.from_state, t.event, t.to_state, t.reason) for t in TRANSITIONS
    ]
    for t in doc["transitions"]:
        if t["from"] in FINAL_STATES:
            assert t["from"] == "delivery_unknown" and t["event"].startswith("resolve")


def test_request_fields_are_what_send_and_show_print(relay, doc):
    alice, _ = relay.join("alice"), relay.join("bob")
    sent = relay.send(alice, "bob", "hello")
    assert sent.code == 0, sent.err
    fields = doc["request_object"]
    extra = {"duplicate", "recipient_active", "wakeup"}
    assert [k for k in sent.json if k not in extra] == fields["always"]
    shown = relay("show", sent.json["id"], "--json").json
    assert list(shown) == fields["always"] + fields["where_listed"]
    for key, value in fields["constant"].items():
        assert shown[key] == value


def test_environment_lists_every_variable_relay_reads(doc):
    names = {e["name"] for e in doc["environment"]}
    assert names == {
        "RELAY_HOME",
        "RELAY_PEER",
        "RELAY_SESSION",
        "RELAY_TIME_OFFSET",
        "RELAY_RATE_LIMIT",
        "RELAY_QUEUE_CAP",
        "RELAY_DEBUG",
        "NO_COLOR",
        "RELAY_DATABASE_URL",
    }
    source = "\n".join(p.read_text() for p in (ROOT / "relay_cli").rglob("*.py"))
    for name in names:
        assert f'"{name}"' in source, f"{name} is documented but relay never reads it"
