"""Bad input for every argument: a clear error code, its exit code, and nothing changed."""

from __future__ import annotations

import pytest
from conftest import new_id

from relay_cli.errors import ERRORS


@pytest.fixture
def world(relay):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "seed", request_id=rid).code == 0
    return relay, alice, bob, rid


def refused(relay, code, *args, input=None, env=None, terminal=False):
    """``args`` fail with ``code`` (its exit code and fixed hint) and change nothing."""
    before = relay.snapshot()
    r = relay(*args, "--json", input=input, env=env, terminal=terminal)
    err = r.error
    assert err["code"] == code, r.err
    assert r.code == err["exit_code"] == ERRORS[code].exit_code
    assert err["hint"].startswith(ERRORS[code].hint)
    assert r.out == ""
    assert "Traceback" not in r.err
    assert relay.snapshot() == before
    return err


BAD_IDS = ["", "123", "not-a-uuid", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "1" * 40]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize("cmd", [
    ["show"], ["wait"], ["cancel"], ["ack"], ["reply", "{}", "x"], ["submit"],
    ["fail", "{}", "--reason", "x"], ["reject", "{}", "--reason", "x"],
    ["resolve", "{}", "--outcome", "failed"],
])
def test_non_uuid_ids_are_invalid_id(world, cmd, bad):
    relay, alice, bob, _ = world
    args = [a.replace("{}", bad) for a in cmd] if "{}" in cmd else cmd + [bad]
    refused(relay, "invalid_id", *args, env=alice)


@pytest.mark.parametrize("option", ["--id", "--in-reply-to"])
def test_non_uuid_send_options_are_invalid_id(world, option):
    relay, alice, bob, _ = world
    refused(relay, "invalid_id", "send", "--to", "bob", option, "nope", "x", env=alice)
    refused(relay, "invalid_id", "claim", "--id", "nope", env=bob)


@pytest.mark.parametrize("cmd", [
    ["send", "--to", "bob", "--id", "", "x"],
    ["send", "--to", "bob", "--in-reply-to", "", "x"],
    ["prepare", "--to", "bob", "--id", "", "x"],
    ["prepare", "--to", "bob", "--in-reply-to", "", "x"],
])
def test_an_empty_id_option_is_invalid_id_not_no_id(world, cmd):
    """`--id ""` (e.g. `ID=$(uuidgen)` where uuidgen is missing) must not quietly become a
    fresh id: a retry of the same line would queue a second job (design.md §4)."""
    relay, alice, bob, _ = world
    refused(relay, "invalid_id", *cmd, env=alice)
    refused(relay, "invalid_id", *cmd, env=alice)  # the retry is refused the same way


def test_claim_with_an_empty_id_claims_nothing(world):
    relay, alice, bob, rid = world
    refused(relay, "invalid_id", "claim", "--id", "", env=bob)
    assert relay("show", rid, "--json").json["state"] == "queued"


def test_uuid_in_any_case_is_stored_canonical_lowercase(world):
    relay, alice, bob, _ = world
    rid = new_id()
    r = relay("send", "--to", "bob", "--id", rid.upper(), "x", "--json", env=alice)
    assert r.json["id"] == rid
    again = relay("send", "--to", "bob", "--id", "{" + rid.upper() + "}", "x", "--json", env=alice)
    assert again.json["duplicate"] is True


@pytest.mark.parametrize("option,value", [
    ("--ttl", "29s"), ("--ttl", "8d"), ("--ttl", "1w"), ("--ttl", "-5"), ("--ttl", "abc"),
    ("--ttl", "1.5h"), ("--reply-within", "10s"), ("--reply-within", "8d"), ("--ttl", ""),
])
def test_bad_send_durations_are_invalid_duration(world, option, value):
    relay, alice, *_ = world
    refused(relay, "invalid_duration", "send", "--to", "bob", option, value, "x", env=alice)


@pytest.mark.parametrize("args", [
    ["claim", "--lease", "9s"], ["claim", "--lease", "61m"], ["claim", "--wait", "11m"],
    ["wait", "{rid}", "--timeout", "601"], ["peers", "join", "carol", "--lease", "9"],
    ["peers", "join", "carol", "--lease", "25h"],
])
def test_bad_lease_and_wait_durations_are_invalid_duration(world, args):
    relay, alice, bob, rid = world
    refused(relay, "invalid_duration", *[a.format(rid=rid) for a in args], env=bob)


@pytest.mark.parametrize("name", ["Alice", "_x", "", "a" * 65, "a b", "ä", ".x", "a/b"])
def test_bad_names_are_invalid_name(world, name):
    relay, alice, *_ = world
    refused(relay, "invalid_name", "peers", "join", name)
    refused(relay, "invalid_name", "peers", "add", name)
    refused(relay, "invalid_name", "send", "--to", name, "x", env=alice)
    refused(relay, "invalid_name", "send", "--to", "bob", "--as", name, "x")


def test_bad_kind_is_invalid_name(world):
    relay, *_ = world
    refused(relay, "invalid_name", "peers", "join", "carol", "--kind", "robot")


def test_64_character_name_is_accepted(relay):
    assert relay("peers", "add", "a" * 64).code == 0


@pytest.mark.parametrize("data,code", [
    (b"", "invalid_text"),
    (b"\xff\xfe bad utf-8", "invalid_text"),
    (b"nul \x00 inside", "invalid_text"),
    ("é".encode() * 16385, "text_too_large"),
    (b"x" * 32769, "text_too_large"),
])
def test_bad_texts_on_stdin(world, data, code):
    relay, alice, *_ = world
    refused(relay, code, "send", "--to", "bob", "--id", new_id(), "-", input=data, env=alice)


def test_exactly_32768_bytes_of_multibyte_text_is_accepted(world):
    relay, alice, bob, _ = world
    text = "€" * (32768 // 3) + "é"  # 32766 + 2 bytes
    assert len(text.encode()) == 32768
    r = relay.send(alice, "bob", text)
    assert r.code == 0, r.err
    assert r.json["text_bytes"] == 32768
    rid = r.json["id"]
    assert relay("show", rid, "--json").json["text"] == text


def test_invalid_utf8_in_argv_is_invalid_text(world):
    relay, alice, *_ = world
    arg = b"bad \xff".decode("utf-8", "surrogateescape")
    refused(relay, "invalid_text", "send", "--to", "bob", arg, env=alice)


def test_text_from_file_and_missing_file(world, tmp_path):
    relay, alice, *_ = world
    f = tmp_path / "msg.txt"
    f.write_bytes("from a file\n".encode())
    r = relay("send", "--to", "bob", "--file", str(f), "--json", env=alice)
    assert r.code == 0, r.err
    assert relay("show", r.json["id"], "--json").json["text"] == "from a file\n"
    refused(relay, "invalid_text", "send", "--to", "bob", "--file", str(tmp_path / "no"),
            env=alice)
    refused(relay, "invalid_text", "send", "--to", "bob", env=alice)


def test_bad_reply_texts_and_reasons(world):
    relay, alice, bob, rid = world
    relay("claim", env=bob)
    refused(relay, "invalid_text", "reply", rid, "-", input=b"", env=bob)
    refused(relay, "text_too_large", "reply", rid, "-", input=b"y" * 40000, env=bob)
    refused(relay, "invalid_text", "fail", rid, "--reason", "", env=bob)


def test_unknown_peer_lists_the_known_names(world):
    relay, alice, *_ = world
    err = refused(relay, "unknown_peer", "send", "--to", "nobody", "x", env=alice)
    assert "alice" in err["hint"] and "bob" in err["hint"]


def test_self_message(world):
    relay, alice, *_ = world
    refused(relay, "self_message", "send", "--to", "alice", "x", env=alice)


def test_unknown_request_is_request_not_found(world):
    relay, alice, bob, _ = world
    for args in (["show", new_id()], ["wait", new_id()], ["ack", new_id()],
                 ["cancel", new_id()]):
        refused(relay, "request_not_found", *args, env=alice if args[0] == "cancel" else bob)


def test_wrong_owners_are_not_owner(world):
    relay, alice, bob, rid = world
    carol = relay.join("carol")
    refused(relay, "not_owner", "cancel", rid, env=bob)
    refused(relay, "not_owner", "claim", "--id", rid, env=carol)
    relay("claim", env=bob)
    refused(relay, "not_owner", "ack", rid, env=alice)
    refused(relay, "not_owner", "reply", rid, "x", env=carol)
    bob2 = {"RELAY_PEER": "bob", "RELAY_SESSION": None}
    refused(relay, "session_required", "reply", rid, "x", env=bob2)


def test_wrong_session_tokens(world):
    relay, alice, bob, rid = world
    refused(relay, "invalid_session", "send", "--to", "bob", "x",
            env={"RELAY_PEER": "alice", "RELAY_SESSION": "rly_not-a-token"})
    refused(relay, "invalid_session", "claim",
            env={"RELAY_PEER": "alice", "RELAY_SESSION": bob["RELAY_SESSION"]})
    refused(relay, "no_identity", "send", "--to", "bob", "x",
            env={"RELAY_PEER": None, "RELAY_SESSION": None})
    refused(relay, "session_required", "send", "--to", "bob", "x",
            env={"RELAY_PEER": "alice", "RELAY_SESSION": None})
    refused(relay, "session_required", "claim", env={"RELAY_PEER": "bob", "RELAY_SESSION": None})


def test_a_name_without_a_session_may_send(world):
    relay, *_ = world
    relay("peers", "add", "script-1", "--kind", "script")
    r = relay("send", "--to", "bob", "--as", "ci-bot", "from a script", "--json",
              env={"RELAY_PEER": None, "RELAY_SESSION": None})
    assert r.code == 0, r.err
    assert r.json["from"] == "ci-bot"


def test_usage_errors_are_json_and_exit_2(world):
    relay, alice, *_ = world
    for args in (["send", "x"], ["send", "--to", "bob", "--bogus", "x"],
                 ["send", "--to", "bob", "--max-attempts", "0", "x"],
                 ["send", "--to", "bob", "--on-lost", "sometimes", "x"],
                 ["list", "--state", "done"], ["resolve", new_id(), "--outcome", "maybe"]):
        refused(relay, "usage_error", *args, env=alice)


def test_leave_then_token_is_invalid_session(world):
    relay, alice, bob, _ = world
    assert relay("peers", "leave", env=bob).code == 0
    refused(relay, "invalid_session", "peers", "heartbeat", env=bob)
    refused(relay, "invalid_session", "claim", env=bob)


def test_bad_time_offset_is_a_clear_error(world):
    relay, *_ = world
    refused(relay, "invalid_duration", "list", env={"RELAY_TIME_OFFSET": "soon"})


# ------------------------------------------------------------------ whole values, in ASCII
@pytest.mark.parametrize("name", ["alice\n", "bob\n", "carol\n", "x\r", "a\x00", "١٢"])
def test_a_name_is_checked_whole_a_trailing_newline_is_invalid_name(world, name):
    relay, alice, *_ = world
    refused(relay, "invalid_name", "peers", "join", name)
    refused(relay, "invalid_name", "peers", "add", name)
    refused(relay, "invalid_name", "send", "--to", name, "x", env=alice)
    refused(relay, "invalid_name", "list", "--to", name)


def test_relay_peer_with_a_trailing_newline_cannot_send_past_the_live_session(world):
    """alice has a live session: `RELAY_PEER=$'alice\\n'` must not send as a name that only
    looks like alice, without alice's token (and split the message frame)."""
    relay, *_ = world
    refused(relay, "invalid_name", "send", "--to", "bob", "x",
            env={"RELAY_PEER": "alice\n", "RELAY_SESSION": None})


@pytest.mark.parametrize("kind", ["claude\n", "claude ", "CLAUDE"])
def test_a_kind_is_checked_whole(world, kind):
    relay, *_ = world
    refused(relay, "invalid_name", "peers", "join", "carol", "--kind", kind)


@pytest.mark.parametrize("value", ["٣٠s", "３０s", "30s\n", " 30s", "30s ", "1h\n", "²"])
def test_a_duration_is_checked_whole_in_ascii(world, value):
    relay, alice, *_ = world
    refused(relay, "invalid_duration", "send", "--to", "bob", "--ttl", value, "x", env=alice)


@pytest.mark.parametrize("key", ["k\n", "toolu_01\n", "k\r\n"])
def test_a_key_is_checked_whole(world, key):
    relay, *_ = world
    before = relay.snapshot()
    r = relay("once", "--key", key, "--json", "--", "true")
    assert r.code == 2 and r.error["code"] == "invalid_key" and r.out == ""
    assert relay.snapshot() == before
    refused(relay, "invalid_key", "ledger", "show", key)


@pytest.mark.parametrize("value", ["٣", "5\n5", "-1", "1e3"])
def test_a_rate_limit_that_is_not_ascii_digits_is_a_usage_error(world, value):
    relay, alice, *_ = world
    refused(relay, "usage_error", "send", "--to", "bob", "x",
            env={**alice, "RELAY_RATE_LIMIT": value})
