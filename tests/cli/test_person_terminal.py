"""The person at an 80x24 terminal (design.md §14): the claim lease said at
claim, conflicts that name what differs, ids that stay unique when shortened, names cut
in the middle, tab-separated rows when piped, one time vocabulary, submit like send,
error lines wrapped between words, a question before replacing a live session, and ids
that are placeholders refused. Screens are real pseudo-terminals."""

from __future__ import annotations

import re
import uuid

import pytest
from conftest import assert_fits, new_id, refused

ELLIPSIS = "\u2026"


def _words_whole(lines: list[str], source: str) -> None:
    """Every word on screen is a word of ``source``: nothing was folded mid-word."""
    words = set(source.split())
    for ln in lines:
        for w in ln.split():
            assert w in words, f"{w!r} is not a whole word of the message: {ln!r}"


# ------------------------------------------------------------------ the claim lease
def test_claim_at_a_terminal_says_by_when_to_ack(world):
    relay, alice, bob = world
    first = relay.send(alice, "bob", "read me").json["id"]
    _, text = relay.screen("claim", cols=80, rows=24, env=bob)
    assert_fits(text, 80)
    joined = " ".join(text.split())
    assert re.search(
        r"ack by in 2m \(\d\d:\d\d\): the claim lease ends then and it becomes "
        r"delivery_unknown",
        joined,
    ), text
    relay("ack", first, env=bob)  # until then a plain claim returns the request held
    relay.send(alice, "bob", "again", "--on-lost", "redeliver")
    _, text = relay.screen("claim", "--lease", "10m", cols=80, rows=24, env=bob)
    assert re.search(
        r"ack by in 10m \(\d\d:\d\d\): the claim lease ends then and it is "
        r"queued again",
        " ".join(text.split()),
    ), text


# ------------------------------------------------------------------ request_id_conflict
@pytest.mark.parametrize(
    "change,names",
    [
        (("--to", "carol"), "recipient (--to) differs"),
        (("--ttl", "2h"), "--ttl differs"),
        (("--on-lost", "redeliver", "--max-attempts", "5"), "--on-lost, --max-attempts differ"),
        (("--reply-within", "30m"), "--reply-within differs"),
    ],
)
def test_an_id_conflict_names_the_part_that_differs(world, change, names):
    relay, alice, _ = world
    relay("peers", "add", "carol")
    rid = new_id()
    assert relay("send", "--to", "bob", "--id", rid, "-", input="task\n", env=alice).code == 0
    args = ["send", "--id", rid, *(("--to", "bob") if "--to" not in change else ()), *change, "-"]
    err = refused(relay, "request_id_conflict", *args, input="task\n", env=alice)
    assert err["message"].endswith(f"different content: {names}"), err["message"]


def test_a_text_that_differs_only_in_trailing_whitespace_says_so(world):
    relay, alice, _ = world
    rid = new_id()
    assert relay("send", "--to", "bob", "--id", rid, "-", input="task", env=alice).code == 0
    err = refused(
        relay,
        "request_id_conflict",
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "-",
        input="task\n",
        env=alice,
    )
    assert "text (it differs only in trailing whitespace" in err["message"], err
    err = refused(
        relay,
        "request_id_conflict",
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "-",
        input="other task",
        env=alice,
    )
    assert err["message"].endswith(": text differs")


def test_after_pruning_the_conflict_says_only_the_text_can_differ(world):
    relay, alice, bob = world
    rid = new_id()
    relay("send", "--to", "bob", "--id", rid, "-", input="task", env=alice)
    relay("cancel", rid, env=alice)
    assert relay("prune", "--older-than", "0", env={"RELAY_TIME_OFFSET": "60"}).code == 0
    assert relay("show", rid, "--json").json["pruned"] is True
    err = refused(
        relay,
        "request_id_conflict",
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "-",
        input="other",
        env=alice,
    )
    assert (
        "only its fingerprint is kept" in err["message"] and "the text differs" in err["message"]
    ), err
    err = refused(
        relay,
        "request_id_conflict",
        "send",
        "--to",
        "bob",
        "--id",
        rid,
        "--ttl",
        "2h",
        "-",
        input="other",
        env=alice,
    )
    assert "--ttl differs; its text was pruned, so relay cannot compare that" in err["message"], err


# ------------------------------------------------------------------ short ids
def test_ids_that_share_eight_characters_are_shown_with_as_many_more_as_tell_them_apart(world):
    relay, alice, bob = world
    twins = ["abcdef12-3456-4789-8abc-000000000001", "abcdef12-3499-4789-8abc-000000000002"]
    other = "12345678-0000-4000-8000-000000000003"
    for rid in (*twins, other):
        assert relay("send", "--to", "bob", "--id", rid, "x", env=alice).code == 0
    _, text = relay.screen("list", cols=80, rows=24)
    lines = assert_fits(text, 80)
    shown = {ln.split()[0] for ln in lines[1:]}
    assert shown == {"abcdef12-345", "abcdef12-349", "12345678"}, text  # not ending on "-"
    for prefix in shown:  # each, typed back, names its request
        assert relay("show", prefix, "--json").code == 0
    _, inbox = relay.screen("inbox", cols=80, rows=24, env=bob)
    assert {ln.split()[0] for ln in inbox.splitlines()[1:] if ln.strip()} == shown


def test_unique_prefixes_are_at_least_eight_and_never_end_on_a_hyphen():
    from relay_cli.core.output import unique_prefixes

    ids = [str(uuid.UUID(int=n)) for n in (1, 2, 2**100)]
    short = unique_prefixes(ids)
    assert all(len(v) >= 8 for v in short.values())
    assert len(set(short.values())) == 3 and not any(v.endswith("-") for v in short.values())
    assert all(i.startswith(short[i]) for i in ids)


# ------------------------------------------------------------------ list
FRONT, BACK = "claude-code-reviewer-frontend", "claude-code-reviewer-backend"


def test_list_keeps_names_apart_shows_the_reason_and_since_when(relay):
    alice = relay.join(FRONT, "--lease", "24h")
    relay.join(BACK, "--lease", "24h")
    gone = relay.join("codex-migrations-runner-eu-west", "--lease", "24h")
    for to in (BACK, "codex-migrations-runner-eu-west"):
        relay("send", "--to", to, "x", env=alice)
    rid = relay("send", "--to", "codex-migrations-runner-eu-west", "y", "--json", env=alice).json[
        "id"
    ]
    relay("claim", "--id", rid, env=gone)
    relay("peers", "leave", env=gone)
    _, text = relay.screen("list", cols=80, rows=24, env={"RELAY_TIME_OFFSET": "3700"})
    lines = assert_fits(text, 80)
    lines = lines[next(i for i, ln in enumerate(lines) if ln.startswith("id  ")) :]  # (after
    # the shifted clock's warning)
    # the names are too long for every column: the sender is left out, and said so
    assert lines[0].split() == ["id", "state", "to", "reason", "since"]
    assert lines[-1].startswith("(from left out at this width")
    row = next(ln for ln in lines if "delivery_unknown" in ln)
    assert "recipient_disconnected" in row and re.search(r"1h1m ago$", row), row
    tos = {re.split(r" {2,}", ln)[2] for ln in lines[1:-1]}
    assert any(t.endswith("backend") for t in tos), tos  # back, not front


def test_piped_tables_are_tab_separated_rows_with_full_values(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    relay("once", "--key", "k1", "--", "true")
    out = relay("list").out.splitlines()
    assert out[0].split("\t") == ["id", "state", "from", "to", "reason", "since", "created"]
    cells = out[1].split("\t")
    assert cells[:5] == [rid, "queued", "alice", "bob", "-"] and cells[5].endswith("Z")
    inbox = relay("inbox", env=bob).out.splitlines()
    assert inbox[0] == "id\tfrom\tcreated\tsize" and inbox[1].split("\t")[::3] == [rid, "1"]
    peers = relay("peers", "list").out.splitlines()
    assert peers[0].split("\t")[0] == "name" and len(peers[1].split("\t")) == 8
    assert peers[0].split("\t")[6:] == ["activity", "activity since"]  # (design.md §19)
    ledger = relay("ledger", "list").out.splitlines()
    assert ledger[0].split("\t")[0] == "key" and ledger[1].split("\t")[0] == "k1"


# ------------------------------------------------------------------ times
def test_join_and_heartbeat_print_relative_and_local_times_at_a_terminal(relay):
    _, text = relay.screen("peers", "join", "alice", "--lease", "2h", cols=80, rows=24)
    assert not re.search(r"\d{4}-\d\d-\d\dT", text), text
    assert re.search(r"lease until +in 2h \(\d\d:\d\d\)", text), text
    piped = relay("peers", "join", "bob", "--lease", "2h").out
    assert re.search(r"lease until +\d{4}-\d\d-\d\dT", piped)  # exact when piped


def test_watch_writes_every_time_one_way(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    relay("claim", "--id", rid, "--lease", "1h", env=bob)
    text = relay("watch", env={"RELAY_TIME_OFFSET": "102"}).out  # one plain snapshot
    assert not re.search(r"\b\d{3,}s\b|\b\d{3,}m\b", text), text  # never 102s or 119m
    assert "1m ago" in text and re.search(r"in 58m \(\d\d:\d\d\)", text), text


# ------------------------------------------------------------------ submit
def test_submit_shows_what_send_shows_and_prepared_not_found_looked(world):
    relay, alice, _ = world
    rid = relay("prepare", "--to", "bob", "x", "--json", env=alice).json["id"]
    _, text = relay.screen("submit", rid, cols=80, rows=24, env=alice)
    for field in (r"to +bob", r"size +1 B", r"note: queued:", r"wakeup +not_configured"):
        assert re.search(field, text), (field, text)
    err = refused(relay, "prepared_not_found", "submit", new_id(), env=alice)
    assert "no request has it either" in err["message"]
    assert err["message"] not in err["hint"] and "compare" not in err["message"]


# ------------------------------------------------------------------ errors and help
def test_error_lines_wrap_between_words_and_keep_commands_whole(relay):
    relay.join("alice", "--lease", "10s")
    _, text = relay.screen(
        "send", "--to", "bob", "x", cols=80, rows=24, env={"RELAY_PEER": "alice"}
    )
    lines = assert_fits(text, 80)
    err = [ln for ln in lines if ln.strip()]
    assert err[0].startswith("relay: error: session_required")
    assert sum(1 for ln in err if ln.startswith("hint: ")) == 1 and len(err) > 3
    assert any('eval "$(relay peers join NAME --shell)"' in ln for ln in err), text
    r = relay("send", "--to", "bob", "x", env={"RELAY_PEER": "alice"})
    _words_whole(err, r.err)


def test_root_help_has_examples():
    from relay_cli.cli.app import build_command
    from relay_cli.cli.commands import app

    epilog = build_command(app).epilog
    assert epilog.startswith("Examples:") and "relay demo" in epilog and "relay send" in epilog


def test_send_file_that_cannot_be_read_is_a_usage_error_naming_the_path(world, tmp_path):
    relay, alice, _ = world
    missing = tmp_path / "nope.md"
    err = refused(relay, "usage_error", "send", "--to", "bob", "--file", str(missing), env=alice)
    assert str(missing) in err["message"] and "no such file" in err["hint"]
    assert "UTF-8" not in err["hint"]
    err = refused(relay, "usage_error", "send", "--to", "bob", "--file", str(tmp_path), env=alice)
    assert "it is a directory" in err["hint"]


# ------------------------------------------------------------------ join a live name
def _typed_at_terminal(relay, *args: str, typed: bytes) -> tuple[int, str]:
    """`relay ARGS` with stdin, stdout and stderr on one 80x24 pseudo-terminal, where a
    person types ``typed`` once relay has asked: (exit status, the screen's text)."""
    import os
    import pty
    import select
    import sys

    from conftest import plain

    pid, fd = pty.fork()
    if pid == 0:
        os.execve(
            sys.executable, [sys.executable, "-m", "relay_cli", *args], relay._env({"TERM": "dumb"})
        )
    seen = b""
    while select.select([fd], [], [], 30)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        if b"[y/N]" in chunk:
            os.write(fd, typed)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), plain(seen.decode(errors="replace"))


def test_joining_a_live_name_at_a_terminal_asks_first(world):
    relay, alice, bob = world
    rid = relay.send(alice, "bob", "x").json["id"]
    relay("claim", "--id", rid, env=bob)
    before = relay.snapshot()
    code, text = _typed_at_terminal(relay, "peers", "join", "bob", typed=b"n\n")
    assert code == 0 and "token" not in text, text
    assert "bob has a live session" in text and rid[:8] in text
    assert "Replace the live session of bob? [y/N]" in text and "not joined" in text
    assert_fits(text, 80)
    assert relay.snapshot() == before  # nothing changed
    code, text = _typed_at_terminal(relay, "peers", "join", "bob", "--shell", typed=b"y\n")
    assert code == 0 and "export RELAY_SESSION=" in text, text
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"


def test_joining_a_live_name_without_a_terminal_or_with_yes_does_not_ask(world):
    relay, alice, bob = world
    r = relay("peers", "join", "bob")  # an agent's or a script's shell
    assert r.code == 0 and "Replace" not in r.err
    p = relay.at_terminal("peers", "join", "bob")  # stderr captured: nobody sees a question
    assert p.returncode == 0 and "Replace" not in p.stderr and "token" in p.stdout
    code, text = _typed_at_terminal(relay, "peers", "join", "bob", "--yes", typed=b"")
    assert code == 0 and "Replace" not in text and "token" in text


# ------------------------------------------------------------------ placeholder ids
@pytest.mark.parametrize(
    "placeholder", ["00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"]
)
def test_the_nil_and_max_uuid_are_not_ids(world, placeholder):
    relay, alice, _ = world
    for args in (
        ["send", "--to", "bob", "--id", placeholder, "x"],
        ["prepare", "--to", "bob", "--id", placeholder, "x"],
        ["send", "--to", "bob", "--in-reply-to", placeholder, "x"],
    ):
        err = refused(relay, "invalid_id", *args, env=alice)
        assert "placeholder" in err["message"]


# ------------------------------------------------------------------ demo
@pytest.mark.one_backend  # the demo runs on a relay.db of its own; its screen is the same
def test_the_demo_ends_with_its_point_on_the_last_screen(relay):
    _, text = relay.screen("demo", cols=80, rows=24)
    last = assert_fits(text, 80)[-24:]
    assert any("duplicate: yes" in ln for ln in last), "\n".join(last)
    assert "nobody has read it" not in text
