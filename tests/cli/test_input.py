"""Bad input for every argument: a clear error code, its exit code, and nothing changed."""

from __future__ import annotations

import pytest
from conftest import new_id, refused

# Python's uuid.UUID reads its 32 digits with int(), which also takes a sign and non-ASCII
# digits: "+" and 31 digits, or 32 Arabic-Indic zeros, would become some other UUID.
LENIENT = ["+" + "7" * 31, "\u0660" * 32, "{+" + "7" * 31 + "}"]
BAD_IDS = ["", "123", "not-a-uuid", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "1" * 40, *LENIENT]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize(
    "cmd",
    [
        ["show"],
        ["wait"],
        ["cancel"],
        ["ack"],
        ["reply", "{}", "x"],
        ["submit"],
        ["fail", "{}", "--reason", "x"],
        ["reject", "{}", "--reason", "x"],
        ["resolve", "{}", "--outcome", "failed"],
    ],
)
def test_non_uuid_ids_are_invalid_id(seeded, cmd, bad):
    relay, alice, bob, _ = seeded
    args = [a.replace("{}", bad) for a in cmd] if "{}" in cmd else cmd + [bad]
    refused(relay, "invalid_id", *args, env=alice)


@pytest.mark.parametrize("option", ["--id", "--in-reply-to"])
def test_non_uuid_send_options_are_invalid_id(seeded, option):
    relay, alice, bob, _ = seeded
    for bad in ("nope", *LENIENT):
        refused(relay, "invalid_id", "send", "--to", "bob", option, bad, "x", env=alice)
        refused(relay, "invalid_id", "prepare", "--to", "bob", option, bad, "x", env=alice)
        refused(relay, "invalid_id", "claim", "--id", bad, env=bob)


@pytest.mark.parametrize(
    "cmd",
    [
        ["send", "--to", "bob", "--id", "", "x"],
        ["send", "--to", "bob", "--in-reply-to", "", "x"],
        ["prepare", "--to", "bob", "--id", "", "x"],
        ["prepare", "--to", "bob", "--in-reply-to", "", "x"],
    ],
)
def test_an_empty_id_option_is_invalid_id_not_no_id(seeded, cmd):
    """`--id ""` (e.g. `ID=$(uuidgen)` where uuidgen is missing) must not quietly become a
    fresh id: a retry of the same line would queue a second job (design.md §4)."""
    relay, alice, bob, _ = seeded
    refused(relay, "invalid_id", *cmd, env=alice)
    refused(relay, "invalid_id", *cmd, env=alice)  # the retry is refused the same way


def test_claim_with_an_empty_id_claims_nothing(seeded):
    relay, alice, bob, rid = seeded
    refused(relay, "invalid_id", "claim", "--id", "", env=bob)
    assert relay("show", rid, "--json").json["state"] == "queued"


def test_uuid_in_any_case_is_stored_canonical_lowercase(seeded):
    relay, alice, bob, _ = seeded
    rid = new_id()
    r = relay("send", "--to", "bob", "--id", rid.upper(), "x", "--json", env=alice)
    assert r.json["id"] == rid
    again = relay("send", "--to", "bob", "--id", "{" + rid.upper() + "}", "x", "--json", env=alice)
    assert again.json["duplicate"] is True


@pytest.mark.parametrize(
    "option,value",
    [
        ("--ttl", "29s"),
        ("--ttl", "8d"),
        ("--ttl", "1w"),
        ("--ttl", "-5"),
        ("--ttl", "abc"),
        ("--ttl", "1.5h"),
        ("--reply-within", "10s"),
        ("--reply-within", "8d"),
        ("--ttl", ""),
    ],
)
def test_bad_send_durations_are_invalid_duration(seeded, option, value):
    relay, alice, *_ = seeded
    refused(relay, "invalid_duration", "send", "--to", "bob", option, value, "x", env=alice)


@pytest.mark.parametrize(
    "args",
    [
        ["claim", "--lease", "9s"],
        ["claim", "--lease", "61m"],
        ["claim", "--wait", "11m"],
        ["wait", "{rid}", "--timeout", "601"],
        ["peers", "join", "carol", "--lease", "9"],
        ["peers", "join", "carol", "--lease", "25h"],
    ],
)
def test_bad_lease_and_wait_durations_are_invalid_duration(seeded, args):
    relay, alice, bob, rid = seeded
    refused(relay, "invalid_duration", *[a.format(rid=rid) for a in args], env=bob)


@pytest.mark.parametrize("name", ["Alice", "_x", "", "a" * 65, "a b", "ä", ".x", "a/b"])
def test_bad_names_are_invalid_name(seeded, name):
    relay, alice, *_ = seeded
    refused(relay, "invalid_name", "peers", "join", name)
    refused(relay, "invalid_name", "peers", "add", name)
    refused(relay, "invalid_name", "send", "--to", name, "x", env=alice)
    refused(relay, "invalid_name", "send", "--to", "bob", "--as", name, "x")


def test_bad_kind_is_invalid_name(seeded):
    relay, *_ = seeded
    refused(relay, "invalid_name", "peers", "join", "carol", "--kind", "robot")


def test_64_character_name_is_accepted(relay):
    assert relay("peers", "add", "a" * 64).code == 0


@pytest.mark.parametrize(
    "data,code",
    [
        (b"", "invalid_text"),
        (b"\xff\xfe bad utf-8", "invalid_text"),
        (b"nul \x00 inside", "invalid_text"),
        ("é".encode() * 16385, "text_too_large"),
        (b"x" * 32769, "text_too_large"),
    ],
)
def test_bad_texts_on_stdin(seeded, data, code):
    relay, alice, *_ = seeded
    refused(relay, code, "send", "--to", "bob", "--id", new_id(), "-", input=data, env=alice)


def test_exactly_32768_bytes_of_multibyte_text_is_accepted(seeded):
    relay, alice, bob, _ = seeded
    text = "€" * (32768 // 3) + "é"  # 32766 + 2 bytes
    assert len(text.encode()) == 32768
    r = relay.send(alice, "bob", text)
    assert r.code == 0, r.err
    assert r.json["text_bytes"] == 32768
    rid = r.json["id"]
    assert relay("show", rid, "--json").json["text"] == text


def test_invalid_utf8_in_argv_is_invalid_text(seeded):
    relay, alice, *_ = seeded
    arg = b"bad \xff".decode("utf-8", "surrogateescape")
    refused(relay, "invalid_text", "send", "--to", "bob", arg, env=alice)


def test_text_from_file_and_missing_file(seeded, tmp_path):
    relay, alice, *_ = seeded
    f = tmp_path / "msg.txt"
    f.write_bytes("from a file\n".encode())
    r = relay("send", "--to", "bob", "--file", str(f), "--json", env=alice)
    assert r.code == 0, r.err
    assert relay("show", r.json["id"], "--json").json["text"] == "from a file\n"
    # a path that cannot be read is a usage error about the path, not about the text
    refused(relay, "usage_error", "send", "--to", "bob", "--file", str(tmp_path / "no"), env=alice)
    refused(relay, "invalid_text", "send", "--to", "bob", env=alice)


def test_bad_reply_texts_and_reasons(seeded):
    relay, alice, bob, rid = seeded
    relay("claim", env=bob)
    refused(relay, "invalid_text", "reply", rid, "-", input=b"", env=bob)
    refused(relay, "text_too_large", "reply", rid, "-", input=b"y" * 40000, env=bob)
    refused(relay, "invalid_text", "fail", rid, "--reason", "", env=bob)


def test_unknown_peer_lists_the_known_names(seeded):
    relay, alice, *_ = seeded
    err = refused(relay, "unknown_peer", "send", "--to", "nobody", "x", env=alice)
    assert "alice" in err["hint"] and "bob" in err["hint"]


def test_self_message(seeded):
    relay, alice, *_ = seeded
    refused(relay, "self_message", "send", "--to", "alice", "x", env=alice)


def test_unknown_request_is_request_not_found(seeded):
    relay, alice, bob, _ = seeded
    for args in (["show", new_id()], ["wait", new_id()], ["ack", new_id()], ["cancel", new_id()]):
        refused(relay, "request_not_found", *args, env=alice if args[0] == "cancel" else bob)


def test_wrong_owners_are_not_owner(seeded):
    relay, alice, bob, rid = seeded
    carol = relay.join("carol")
    refused(relay, "not_owner", "cancel", rid, env=bob)
    refused(relay, "not_owner", "claim", "--id", rid, env=carol)
    relay("claim", env=bob)
    refused(relay, "not_owner", "ack", rid, env=alice)
    refused(relay, "not_owner", "reply", rid, "x", env=carol)
    bob2 = {"RELAY_PEER": "bob", "RELAY_SESSION": None}
    refused(relay, "session_required", "reply", rid, "x", env=bob2)


def test_wrong_session_tokens(seeded):
    relay, alice, bob, rid = seeded
    refused(
        relay,
        "invalid_session",
        "send",
        "--to",
        "bob",
        "x",
        env={"RELAY_PEER": "alice", "RELAY_SESSION": "rly_not-a-token"},
    )
    refused(
        relay,
        "invalid_session",
        "claim",
        env={"RELAY_PEER": "alice", "RELAY_SESSION": bob["RELAY_SESSION"]},
    )
    refused(
        relay,
        "no_identity",
        "send",
        "--to",
        "bob",
        "x",
        env={"RELAY_PEER": None, "RELAY_SESSION": None},
    )
    refused(
        relay,
        "session_required",
        "send",
        "--to",
        "bob",
        "x",
        env={"RELAY_PEER": "alice", "RELAY_SESSION": None},
    )
    refused(relay, "session_required", "claim", env={"RELAY_PEER": "bob", "RELAY_SESSION": None})


def test_a_name_without_a_session_may_send(seeded):
    relay, *_ = seeded
    relay("peers", "add", "script-1", "--kind", "script")
    r = relay(
        "send",
        "--to",
        "bob",
        "--as",
        "ci-bot",
        "from a script",
        "--json",
        env={"RELAY_PEER": None, "RELAY_SESSION": None},
    )
    assert r.code == 0, r.err
    assert r.json["from"] == "ci-bot"


def test_usage_errors_are_json_and_exit_2(seeded):
    relay, alice, *_ = seeded
    for args in (
        ["send", "x"],
        ["send", "--to", "bob", "--bogus", "x"],
        ["send", "--to", "bob", "--max-attempts", "0", "x"],
        ["send", "--to", "bob", "--on-lost", "sometimes", "x"],
        ["list", "--state", "done"],
        ["resolve", new_id(), "--outcome", "maybe"],
    ):
        refused(relay, "usage_error", *args, env=alice)


def test_leave_then_token_is_invalid_session(seeded):
    relay, alice, bob, _ = seeded
    assert relay("peers", "leave", env=bob).code == 0
    refused(relay, "invalid_session", "peers", "heartbeat", env=bob)
    refused(relay, "invalid_session", "claim", env=bob)


def test_bad_time_offset_is_a_clear_error(seeded):
    relay, *_ = seeded
    refused(relay, "invalid_duration", "list", env={"RELAY_TIME_OFFSET": "soon"})


# ------------------------------------------------------------------ whole values, in ASCII
@pytest.mark.parametrize("name", ["alice\n", "bob\n", "carol\n", "x\r", "a\x00", "١٢"])
def test_a_name_is_checked_whole_a_trailing_newline_is_invalid_name(seeded, name):
    relay, alice, *_ = seeded
    refused(relay, "invalid_name", "peers", "join", name)
    refused(relay, "invalid_name", "peers", "add", name)
    refused(relay, "invalid_name", "send", "--to", name, "x", env=alice)
    refused(relay, "invalid_name", "list", "--to", name)


def test_relay_peer_with_a_trailing_newline_cannot_send_past_the_live_session(seeded):
    """alice has a live session: `RELAY_PEER=$'alice\\n'` must not send as a name that only
    looks like alice, without alice's token (and split the message frame)."""
    relay, *_ = seeded
    refused(
        relay,
        "invalid_name",
        "send",
        "--to",
        "bob",
        "x",
        env={"RELAY_PEER": "alice\n", "RELAY_SESSION": None},
    )


@pytest.mark.parametrize("kind", ["claude\n", "claude ", "CLAUDE"])
def test_a_kind_is_checked_whole(seeded, kind):
    relay, *_ = seeded
    refused(relay, "invalid_name", "peers", "join", "carol", "--kind", kind)


@pytest.mark.parametrize("value", ["٣٠s", "３０s", "30s\n", " 30s", "30s ", "1h\n", "²"])
def test_a_duration_is_checked_whole_in_ascii(seeded, value):
    relay, alice, *_ = seeded
    refused(relay, "invalid_duration", "send", "--to", "bob", "--ttl", value, "x", env=alice)


@pytest.mark.parametrize("key", ["k\n", "toolu_01\n", "k\r\n"])
def test_a_key_is_checked_whole(seeded, key):
    relay, *_ = seeded
    before = relay.snapshot()
    r = relay("once", "--key", key, "--json", "--", "true")
    assert r.code == 2 and r.error["code"] == "invalid_key" and r.out == ""
    assert relay.snapshot() == before
    refused(relay, "invalid_key", "ledger", "show", key)


@pytest.mark.parametrize("value", ["٣", "5\n5", "-1", "1e3", " 5", "5 ", "5\n", "+5", " "])
def test_a_rate_limit_that_is_not_ascii_digits_is_a_usage_error(seeded, value):
    relay, alice, *_ = seeded
    refused(
        relay, "usage_error", "send", "--to", "bob", "x", env={**alice, "RELAY_RATE_LIMIT": value}
    )


def test_out_of_range_time_offset_is_invalid_duration_not_an_internal_error(relay):
    """RELAY_TIME_OFFSET far outside any real date: invalid_duration (exit 2), never exit 1."""
    r = relay("peers", "join", "x", "--json", env={"RELAY_TIME_OFFSET": "1e12"})
    assert (r.code, r.error["code"]) == (2, "invalid_duration"), r.err
    assert "RELAY_TIME_OFFSET" in r.error["message"]


@pytest.mark.parametrize("value", ["٣٠", " 30", "30 ", "30\n", "1_0", "nan", "0x10", " "])
def test_a_time_offset_is_read_whole_in_ascii(relay, value):
    """design.md §8: RELAY_TIME_OFFSET is checked against its whole value, in ASCII, as
    every numeric RELAY_* setting is."""
    r = relay("peers", "join", "x", "--json", env={"RELAY_TIME_OFFSET": value})
    assert (r.code, r.error["code"]) == (2, "invalid_duration"), r.err
    for fine in ("-30", "1.5", ".5", "+2", "1e-05"):
        assert relay("peers", "list", "--json", env={"RELAY_TIME_OFFSET": fine}).code == 0


def test_huge_list_limit_is_usage_error_not_internal_error(world):
    """`list --limit` beyond SQLite's integer range is refused as input (exit 2), never a
    crash (exit 1) nor silently no limit."""
    relay, *_ = world
    err = refused(relay, "usage_error", "list", "--limit", "99999999999999999999")
    assert "--limit" in err["message"]


@pytest.mark.parametrize("text", [" ", "\n", "\n\n  \t\n", "\u3000\n"])
def test_text_that_is_only_whitespace_is_refused_as_empty(world, text):
    relay, alice, bob = world
    err = refused(relay, "invalid_text", "send", "--to", "bob", "-", input=text, env=alice)
    assert "only whitespace" in err["message"]
    err = refused(relay, "invalid_text", "prepare", "--to", "bob", "-", input=text, env=alice)
    assert "only whitespace" in err["message"]


def test_a_reply_that_is_only_whitespace_is_refused(seeded):
    relay, alice, bob, rid = seeded
    assert relay("claim", env=bob).code == 0
    refused(relay, "invalid_text", "reply", rid, "-", input="\n\n", env=bob)
