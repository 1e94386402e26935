"""Ids for a person who types them (design.md §14): empty ids are refused everywhere,
`relay id` picks one, and a unique prefix of at least 8 characters names a request."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from conftest import new_id, refused

from relay_cli.core.errors import ERRORS

# Every command that takes an id, with "{}" where the id goes, and who calls it.
ID_COMMANDS = [
    (["send", "--to", "bob", "--id", "{}", "x"], "alice"),
    (["send", "--to", "bob", "--in-reply-to", "{}", "x"], "alice"),
    (["prepare", "--to", "bob", "--id", "{}", "x"], "alice"),
    (["prepare", "--to", "bob", "--in-reply-to", "{}", "x"], "alice"),
    (["submit", "{}"], "alice"),
    (["show", "{}"], None),
    (["show", "{}", "--events"], None),
    (["wait", "{}", "--timeout", "0"], "alice"),
    (["cancel", "{}"], "alice"),
    (["claim", "--id", "{}"], "bob"),
    (["ack", "{}"], "bob"),
    (["reply", "{}", "done"], "bob"),
    (["fail", "{}", "--reason", "x"], "bob"),
    (["reject", "{}", "--reason", "x"], "bob"),
    (["resolve", "{}", "--outcome", "failed"], None),
]


def _name(value) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize("cmd,who", ID_COMMANDS, ids=_name)
def test_an_empty_id_is_invalid_id_on_every_command_and_changes_nothing(seeded, cmd, who):
    """`ID=$(uuidgen)` where uuidgen is missing gives "": never "no id", never another
    request (design.md §14). Even at a terminal, and on the retry too."""
    relay, alice, bob, _ = seeded
    env = {"alice": alice, "bob": bob, None: None}[who]
    args = [a.replace("{}", "") for a in cmd]
    for _ in range(2):
        err = refused(relay, "invalid_id", *args, env=env, terminal=cmd[0] == "resolve")
        assert "''" in err["message"]


@pytest.mark.parametrize("cmd,who", ID_COMMANDS, ids=_name)
def test_too_short_or_malformed_prefixes_are_invalid_id(seeded, cmd, who):
    relay, alice, bob, rid = seeded
    env = {"alice": alice, "bob": bob, None: None}[who]
    for bad in (rid[:7], rid[:8] + "x", rid[:9].replace("-", "0") + "-", " ", "g" * 8):
        refused(
            relay,
            "invalid_id",
            *[a.replace("{}", bad) for a in cmd],
            env=env,
            terminal=cmd[0] == "resolve",
        )


def test_relay_id_prints_a_fresh_uuid_and_creates_nothing(relay):
    first = relay("id")
    assert first.code == 0 and first.err == ""
    line = first.out
    assert line.endswith("\n") and line.count("\n") == 1
    assert str(uuid.UUID(line.strip())) == line.strip()
    doc = relay("id", "--json")
    assert doc.code == 0 and list(doc.json) == ["id"]
    assert doc.json["id"] != line.strip()
    assert str(uuid.UUID(doc.json["id"])) == doc.json["id"]
    assert not relay.home.exists()  # no home was created


def test_relay_id_works_as_a_subprocess_for_a_shell_variable(relay):
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "id"],
        capture_output=True,
        text=True,
        env=relay._env(None),
        timeout=60,
    )
    assert p.returncode == 0 and uuid.UUID(p.stdout.strip())


@pytest.mark.parametrize("n", [8, 12], ids=["8", "12"])
def test_a_unique_prefix_names_the_request_on_every_command(seeded, n):
    """8 characters, and the 12 that relay's hooks print (design.md §18)."""
    relay, alice, bob, rid = seeded
    short = rid[:n]
    assert relay("show", short, "--json").json["id"] == rid
    assert relay("show", rid[:13].upper(), "--events", "--json").json["id"] == rid
    assert relay("wait", short, "--timeout", "0", "--json").json["id"] == rid
    claimed = relay("claim", "--id", short, "--json", env=bob)
    assert claimed.code == 0 and claimed.json["id"] == rid
    assert relay("ack", short, "--json", env=bob).json["state"] == "acknowledged"
    assert relay("reply", short, "done", "--json", env=bob).json["state"] == "completed"
    # fail / reject / cancel / resolve
    for command, who, args, state in (
        ("fail", bob, ["--reason", "no"], "failed"),
        ("reject", bob, ["--reason", "no"], "rejected"),
    ):
        other = new_id()
        assert relay.send(alice, "bob", command, request_id=other).code == 0
        assert relay("claim", "--id", other[:n], "--json", env=bob).code == 0
        r = relay(command, other[:n], *args, "--json", env=who)
        assert r.code == 0 and r.json["id"] == other and r.json["state"] == state
    queued = new_id()
    assert relay.send(alice, "bob", "cancel me", request_id=queued).code == 0
    r = relay("cancel", queued[:n], "--json", env=alice)
    assert r.code == 0 and r.json["state"] == "cancelled" and r.json["id"] == queued


@pytest.mark.parametrize("n", [8, 12], ids=["8", "12"])
def test_resolve_and_submit_take_prefixes_and_submit_finds_drafts(seeded, n):
    relay, alice, bob, rid = seeded
    draft = relay("prepare", "--to", "bob", "draft text", "--json", env=alice).json["id"]
    sub = relay("submit", draft[:n], "--json", env=alice)
    assert sub.code == 0 and sub.json["id"] == draft and sub.json["duplicate"] is False
    again = relay("submit", draft[:n], "--json", env=alice)  # now it is a request
    assert again.code == 0 and again.json["duplicate"] is True
    # a delivery_unknown settled by prefix, at a terminal
    relay("claim", "--id", rid, "--lease", "10s", env=bob)
    relay("sweep", env={"RELAY_TIME_OFFSET": "30"})
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"
    r = relay("resolve", rid[:n], "--outcome", "failed", "--json", terminal=True)
    assert r.code == 0 and r.json["id"] == rid and r.json["state"] == "failed"


SHARED = "abcdef01-"


def _twins(relay, alice) -> list[str]:
    ids = [SHARED + f"0000-4000-8000-00000000000{i}" for i in (1, 2)]
    for i in ids:
        assert relay.send(alice, "bob", f"twin {i}", request_id=i).code == 0
    return ids


@pytest.mark.parametrize(
    "cmd,who", [c for c in ID_COMMANDS if c[0][0] not in ("send", "prepare")], ids=_name
)
def test_an_ambiguous_prefix_is_ambiguous_id_listing_the_candidates(seeded, cmd, who):
    relay, alice, bob, _ = seeded
    ids = _twins(relay, alice)
    env = {"alice": alice, "bob": bob, None: None}[who]
    err = refused(
        relay,
        "ambiguous_id",
        *[a.replace("{}", "ABCDEF01") for a in cmd],
        env=env,
        terminal=cmd[0] == "resolve",
    )
    assert err["exit_code"] == 2
    for i in ids:
        assert i in err["hint"]
    assert "queued, alice -> bob" in err["hint"]
    # one more character decides
    unique = relay("show", ids[1][:-1] + "2", "--json")
    assert unique.code == 0


def test_ambiguity_counts_unsubmitted_drafts_for_submit_only(seeded):
    relay, alice, bob, _ = seeded
    req = SHARED + "0000-4000-8000-000000000001"
    draft = SHARED + "0000-4000-8000-000000000002"
    assert relay.send(alice, "bob", "request", request_id=req).code == 0
    assert relay("prepare", "--to", "bob", "--id", draft, "draft", env=alice).code == 0
    assert relay("show", SHARED[:8], "--json").json["id"] == req  # drafts are not requests
    err = refused(relay, "ambiguous_id", "submit", SHARED[:8], env=alice)
    assert draft in err["hint"] and "unsubmitted draft" in err["hint"]


def test_many_candidates_are_listed_up_to_ten(seeded):
    relay, alice, bob, _ = seeded
    for i in range(12):
        assert (
            relay.send(alice, "bob", f"n{i}", request_id=f"{SHARED}0000-4000-8000-{i:012d}").code
            == 0
        )
    err = refused(relay, "ambiguous_id", "show", SHARED[:8])
    assert err["hint"].count(SHARED) == 10 and "and more" in err["hint"]
    assert "more than 10" in err["message"]


def test_a_prefix_that_matches_nothing_is_request_not_found(seeded):
    relay, alice, bob, rid = seeded
    other = "0" * 8 if not rid.startswith("0") else "f" * 8
    err = refused(relay, "request_not_found", "show", other)
    assert other in err["message"]
    refused(relay, "request_not_found", "ack", other, env=bob)


@pytest.mark.parametrize("option", ["--id", "--in-reply-to"])
def test_send_and_prepare_take_full_ids_only(seeded, option):
    """They go into a fingerprint or name a new request: a prefix would be ambiguous in
    time (design.md §14)."""
    relay, alice, bob, rid = seeded
    for command in ("send", "prepare"):
        err = refused(relay, "invalid_id", command, "--to", "bob", option, rid[:8], "x", env=alice)
        # The fixed hint says commands that name a request take prefixes; a person who
        # retries with the 8 characters a table showed learns why this one does not, and
        # how to get the whole id.
        assert "takes a full id, not a prefix" in err["hint"], err["hint"]
        assert f"`relay show {rid[:8]}`" in err["hint"], err["hint"]
        assert relay("show", rid[:8], "--json").json["id"] == rid  # the hint's command
    err = refused(relay, "invalid_id", "send", "--to", "bob", option, "not-an-id", "x", env=alice)
    assert "prefix" not in err["hint"].split(ERRORS["invalid_id"].hint)[1]


def test_show_of_a_pruned_request_by_prefix_answers_from_its_tombstone(seeded):
    relay, alice, bob, rid = seeded
    assert relay("cancel", rid, env=alice).code == 0
    assert relay("prune", "--older-than", "0", env={"RELAY_TIME_OFFSET": "1"}).code == 0
    r = relay("show", rid[:8], "--json", env={"RELAY_TIME_OFFSET": "1"})
    assert r.code == 0 and r.json["id"] == rid and r.json["pruned"] is True


@pytest.mark.sqlite_only  # SQLite's query plan; PostgreSQL's planner chooses its own
def test_the_prefix_lookup_is_a_range_scan_of_the_primary_key(seeded):
    relay, *_ = seeded
    from relay_cli.store import open_store

    store = open_store(relay.home, environ={})
    try:
        captured: list[str] = []
        store.db.conn.set_trace_callback(captured.append)
        store.requests_with_prefix("abcdef01", 11)
        store.drafts_with_prefix("abcdef01", 11)
        store.db.conn.set_trace_callback(None)
        assert len(captured) == 2
        for sql in captured:  # the statements as run, with their values
            plan = " / ".join(r[-1] for r in store.db.conn.execute("EXPLAIN QUERY PLAN " + sql))
            assert plan.startswith("SEARCH") and "(id>? AND id<?)" in plan, plan
    finally:
        store.close()
