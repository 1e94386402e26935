"""The small things a person meets (design.md §14): a closed pipe, plain words on a
duplicate, what `peers leave` did, a waiting line, "not yet", `--file -`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_fits, at, new_id

BIN = str(Path(sys.executable).parent)


# ------------------------------------------------------------------ closed pipe: 141
def _many_requests(relay, alice, n: int, monkeypatch) -> None:
    from relay_cli.core import clock
    from relay_cli.core.context import Limits
    from relay_cli.requests import peers, sending

    # no rate limit, no queue cap: more than one recipient's queue holds (design.md §4)
    limits = Limits(rate_limit_raw="0", queue_cap_raw="0")
    store = relay.open_store()
    try:
        with store.transaction():
            caller = peers.identify(store, "alice", alice["RELAY_SESSION"])
            now = clock.Clock().now_ms()
            for i in range(n):
                sending.send(
                    store,
                    now,
                    caller,
                    to="bob",
                    text=f"request {i}",
                    request_id=None,
                    limits=limits,
                    ttl_s=3600,
                    reply_within_s=None,
                    on_lost="unknown",
                    max_attempts=3,
                    in_reply_to=None,
                )
    finally:
        store.close()


def test_a_closed_pipe_exits_141_every_time_in_real_processes(world):
    """50 real runs whose reader is gone (`relay list | head -1` once head has left):
    each exits 141 (killed-by-SIGPIPE's status) with nothing on stderr — not 1, the
    "bug" code, as when Click caught the broken pipe first."""
    relay, alice, bob = world
    for i in range(3):
        relay.send(alice, "bob", f"r{i}")
    read, write = os.pipe()
    os.close(read)  # the reader went away before relay wrote
    commands = [["list"], ["list", "--json"], ["peers", "list"], ["--help"], ["id"]]
    try:
        for run in range(50):
            args = commands[run % len(commands)]
            p = subprocess.run(
                [sys.executable, "-m", "relay_cli", *args],
                stdout=write,
                stderr=subprocess.PIPE,
                env=relay._env(None),
                timeout=60,
            )
            assert (p.returncode, p.stderr) == (141, b""), (run, args, p.stderr)
    finally:
        os.close(write)


def test_relay_list_piped_into_head_exits_141(world, monkeypatch):
    """The shell's own pipe: more output than the pipe holds, the reader leaves after one
    line; relay's status (PIPESTATUS) is 141, and head printed the first line."""
    relay, alice, bob = world
    _many_requests(relay, alice, 1500, monkeypatch)  # ~160 KB listed: 2.5x a 64 KiB pipe
    env = relay._env(None)
    env["PATH"] = BIN + ":" + env["PATH"]
    for _ in range(3):
        p = subprocess.run(
            ["bash", "-c", 'relay list --all | head -1; echo "status=${PIPESTATUS[0]}"'],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert p.stdout.splitlines()[-1] == "status=141", p.stdout[-300:] + p.stderr
        assert p.stdout.startswith("id"), p.stdout[:200]
        assert p.stderr == ""


# ------------------------------------------------------------------ plain words
def test_submit_human_output_says_yes_and_no_and_a_repeat_says_already_sent(world):
    relay, alice, bob = world
    draft = relay("prepare", "--to", "bob", "work", "--json", env=alice).json["id"]
    first = relay("submit", draft, env=alice)
    assert first.code == 0
    assert "True" not in first.out and "False" not in first.out
    assert ["duplicate", "no"] in [ln.split()[:2] for ln in first.out.splitlines()]
    assert "already sent" not in first.out
    again = relay("submit", draft, env=alice)
    assert ["duplicate", "yes"] in [ln.split()[:2] for ln in again.out.splitlines()]
    assert "already sent, nothing new queued" in again.out
    assert json.loads(relay("submit", draft, "--json", env=alice).out)["duplicate"] is True


def test_a_duplicate_send_says_already_sent_in_plain_words(world):
    relay, alice, bob = world
    rid = new_id()
    first = relay("send", "--to", "bob", "--id", rid, "hello", env=alice)
    assert first.code == 0 and "already sent" not in first.out
    again = relay("send", "--to", "bob", "--id", rid, "hello", env=alice)
    assert again.code == 0
    assert "already sent, nothing new queued" in again.out
    doc = relay("send", "--to", "bob", "--id", rid, "hello", "--json", env=alice)
    assert doc.json["duplicate"] is True and "already sent" not in doc.out + doc.err


def test_peers_leave_names_the_work_that_became_delivery_unknown(world):
    relay, alice, bob = world
    rids = [new_id(), new_id()]
    for rid in rids:
        relay.send(alice, "bob", "x", request_id=rid)
        assert relay("claim", "--id", rid, env=bob).code == 0
    r = relay("peers", "leave", env=bob)
    assert r.code == 0
    assert "2 requests you claimed and did not finish are now delivery_unknown:" in r.out
    assert max(len(line) for line in r.out.splitlines()) <= 80
    for rid in rids:
        assert f"  {rid}" in r.out
    for rid in rids:  # each settled by its own commands, one per outcome (design.md §14)
        assert f"relay resolve {rid} --outcome requeue" in r.out
    carol = relay.join("carol")
    quiet = relay("peers", "leave", env=carol)
    assert quiet.code == 0 and "delivery_unknown" not in quiet.out
    doc = relay("peers", "leave", "--json", env=relay.join("dave"))
    assert set(doc.json) == {
        "name",
        "kind",
        "active",
        "session_id",
        "lease_expires_at",
        "last_seen_at",
        "wakeup",
        "activity",
        "activity_since",
        "activity_cause",
        "activity_detail",
        "last_event_at",
    }


def test_what_to_do_next_fits_80_columns_and_keeps_every_id_whole(world):
    """The lines after `claim`, `prepare` and a plain `peers join` that say what to do
    next are wrapped between words at 80 columns: an id is never cut in two, and a plain
    join says how this shell acts as the new session (its token is in no variable)."""
    relay, alice, bob = world
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    _, text = relay.screen("claim", "--id", rid, cols=80, rows=24, env=bob)
    lines = assert_fits(text, 80)
    assert any(f"relay ack {rid}" in ln for ln in lines), text
    assert any(f"relay reply {rid}" in ln for ln in lines), text
    _, text = relay.screen("prepare", "--to", "bob", "a draft", cols=80, rows=24, env=alice)
    lines = assert_fits(text, 80)
    draft = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", text).group()
    assert any(f"relay submit {draft}" in ln for ln in lines), text
    _, text = relay.screen("peers", "join", "carol", cols=80, rows=24)
    assert_fits(text, 80)
    words = " ".join(text.split())
    assert 'eval "$(relay peers join carol --shell)"' in words
    assert "RELAY_SESSION" in words


# ------------------------------------------------------------------ waiting, not yet
def _with_stderr_terminal(relay, *args, env=None) -> tuple[int, str, str]:
    """Run relay in a real process whose stderr is a pseudo-terminal (stdout a pipe)."""
    master, slave = os.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "relay_cli", *args],
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=relay._env(env),
        )
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        out = p.stdout.read().decode()
        p.wait(timeout=60)
        return p.returncode, out, seen.decode().replace("\r\n", "\n")
    finally:
        os.close(master)


def _at_once(*calls):
    """Run the calls (each a function of no arguments) at the same time; their results.
    Waits that each last their whole timeout take one timeout together."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


def test_a_blocked_wait_says_what_it_waits_for_on_a_terminal_only(world):
    relay, alice, bob = world
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    (code, out, err), piped, (jcode, jout, jerr) = _at_once(
        lambda: _with_stderr_terminal(relay, "wait", rid[:8], "--timeout", "1", env=alice),
        lambda: relay.proc("wait", rid, "--timeout", "1", env=alice),
        lambda: _with_stderr_terminal(relay, "wait", rid, "--timeout", "1", "--json", env=alice),
    )
    assert code == 75
    assert f"relay: waiting up to 1s for {rid[:8]} to finish (now queued)\n" in err
    assert "relay: not yet: timeout:" in err and "error" not in err
    assert piped.code == 75 and "waiting up to" not in piped.err
    assert "relay: not yet: timeout:" in piped.err
    assert jcode == 75 and "relay: waiting" not in jerr
    assert json.loads(jerr.strip().splitlines()[-1])["error"]["code"] == "timeout"
    assert json.loads(jout)["state"] == "queued"
    # a wait that need not block says nothing
    relay("cancel", rid, env=alice)
    code, out, err = _with_stderr_terminal(relay, "wait", rid, "--timeout", "1", env=alice)
    assert code == 10 and "relay: waiting" not in err


def test_a_blocked_claim_wait_says_so_on_a_terminal_and_its_75_is_not_yet(world):
    relay, alice, bob = world
    (code, out, err), (jcode, jout, jerr) = _at_once(
        lambda: _with_stderr_terminal(relay, "claim", "--wait", "1", env=bob),
        lambda: _with_stderr_terminal(relay, "claim", "--wait", "1", "--json", env=bob),
    )
    assert code == 75
    assert "relay: waiting up to 1s for a request to bob" in err
    assert "relay: not yet: nothing_to_claim:" in err and "error:" not in err
    assert jcode == 75 and "relay: waiting" not in jerr
    assert json.loads(jerr.strip().splitlines()[-1])["error"]["code"] == "nothing_to_claim"
    no_wait = relay("claim", env=bob)
    assert no_wait.code == 75 and no_wait.err.startswith("relay: not yet: nothing_to_claim")


# ------------------------------------------------------------------ --file -
def test_file_dash_reads_stdin_for_send_prepare_and_reply(world):
    relay, alice, bob = world
    rid = new_id()
    r = relay(
        "send", "--to", "bob", "--id", rid, "--file", "-", "--json", input="from stdin", env=alice
    )
    assert r.code == 0
    assert relay("show", rid, "--json").json["text"] == "from stdin"
    draft = relay("prepare", "--to", "bob", "--file", "-", "--json", input="draft", env=alice)
    assert draft.code == 0
    relay("claim", "--id", rid, env=bob)
    done = relay("reply", rid, "--file", "-", "--json", input="the answer", env=bob)
    assert done.code == 0 and done.json["reply"] == "the answer"
    both = relay("send", "--to", "bob", "--file", "-", "x", "--json", input="y", env=alice)
    assert both.error["code"] == "usage_error"


def test_a_delivery_unknown_request_is_not_shown_as_finished(world):
    """design.md §1: relay never claims more than it knows. A delivery_unknown request has a
    finished_at (it reached a final state), but a person reading `finished 14:05` under
    `delivered` and `acknowledged` would take it that the work finished: the line says
    since when its outcome is unknown."""
    relay, alice, bob = world
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    assert relay("claim", "--id", rid, env=bob).code == 0
    assert relay("peers", "leave", env=bob).code == 0
    for r in (relay("show", rid), relay("wait", rid)):
        lines = r.out.splitlines()
        assert any(ln.startswith("unknown since ") for ln in lines), r.out
        assert not any(ln.startswith("finished") for ln in lines), r.out
    _, screen = relay.screen("show", rid[:8], cols=80, rows=24)
    assert "unknown since" in screen and "finished" not in screen
    done = new_id()
    carol = relay.join("carol")
    assert relay.send(alice, "carol", "y", request_id=done).code == 0  # completed: finished
    assert relay("claim", "--id", done, env=carol).code == 0
    assert relay("reply", done, "ok", env=carol).code == 0
    assert any(ln.startswith("finished ") for ln in relay("show", done).out.splitlines())


def test_a_join_that_replaces_a_session_names_the_work_that_became_delivery_unknown(world):
    """design.md §3: joining a live name supersedes its session, and that session's claimed
    work becomes delivery_unknown. `peers leave` lists such work; a join did it silently, so
    a person restarting an agent under the same name did not learn what they had just
    turned into work only they can settle. Human output says so on stderr (stdout of
    --shell is eval'd); --json is unchanged."""
    relay, alice, bob = world
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    assert relay("claim", "--id", rid, env=bob).code == 0
    r = relay.proc("peers", "join", "bob", "--shell")
    assert r.code == 0
    assert [ln.split("=")[0] for ln in r.out.splitlines()] == [
        "export RELAY_PEER",
        "export RELAY_SESSION",
        "export RELAY_HOME",
    ] + (["export RELAY_DATABASE_URL"] if relay.url else [])  # design.md §13
    flat = " ".join(r.err.split())
    assert rid in flat and "now delivery_unknown" in flat, r.err
    for outcome in ("completed", "failed", "requeue"):  # one full command per outcome
        assert f"relay resolve {rid} --outcome {outcome}" in flat
    assert "|" not in flat
    assert relay("show", rid, "--json").json["state"] == "delivery_unknown"
    again = relay.proc("peers", "join", "bob")  # nothing claimed now: nothing said
    assert again.code == 0 and "delivery_unknown" not in again.err + again.out
    rid2 = new_id()
    relay.send(alice, "bob", "y", request_id=rid2)
    bob2 = relay.join("bob")
    assert relay("claim", "--id", rid2, env=bob2).code == 0
    doc = relay.proc("peers", "join", "bob", "--json")
    assert (
        doc.code == 0
        and doc.err == ""
        and set(doc.json) == {"peer", "kind", "session_id", "token", "lease_expires_at"}
    )


def test_text_read_from_a_terminal_says_how_to_end_it(world):
    """`relay send --to bob --id ID -` typed at a terminal waited in silence for the text,
    which looks like a hang to a person. With the terminal as stdin, human output says it
    reads the text there and how to end it; --json keeps stderr empty (design.md §7); a
    pipe is read without a word."""
    relay, alice, bob = world
    rid = new_id()
    p = relay.at_terminal("send", "--to", "bob", "--id", rid, "-", typed=b"hello\n\x04", env=alice)
    assert p.returncode == 0, p.stderr
    assert "end it with Ctrl-D" in p.stderr, p.stderr
    assert relay("show", rid, "--json").json["text"] == "hello\n"
    j = relay.at_terminal(
        "send", "--to", "bob", "--id", new_id(), "-", "--json", typed=b"x\n\x04", env=alice
    )
    assert j.returncode == 0 and j.stderr == ""
    piped = relay.proc("send", "--to", "bob", "--id", new_id(), "-", input="y", env=alice)
    assert piped.code == 0 and "Ctrl-D" not in piped.err


@pytest.mark.parametrize("end", ["cancel", "expire"])
def test_a_request_queued_again_after_a_claim_is_not_said_to_be_undelivered(world, end):
    """`cancel`'s help said "It was not delivered, so nobody started it", and cancelled and
    expired claim "it was not delivered". A request queued again after a claim lapsed
    (--on-lost redeliver) was delivered once, and that claim may have started work: the
    note under it says so, and cancel's help no longer promises nobody started it."""
    relay, alice, bob = world
    rid = new_id()
    relay.send(alice, "bob", "x", "--on-lost", "redeliver", "--ttl", "60s", request_id=rid)
    assert relay("claim", "--id", rid, "--lease", "10s", env=bob).code == 0
    relay.move_clock(15)  # the claim lease lapsed before ack: queued again
    assert relay("show", rid, "--json").json["state"] == "queued"
    if end == "cancel":
        r = relay("cancel", rid, env=alice)
        assert r.code == 0, r.err
    else:
        relay.move_clock(120)
        r = relay("show", rid)
    state = "cancelled" if end == "cancel" else "expired"
    assert re.search(rf"^state +{state}$", r.out, re.M), r.out
    flat = " ".join(r.out.split())
    assert "an earlier claim delivered it" in flat and "may have started work" in flat, r.out
    help_ = " ".join(relay("cancel", "--help").out.split())
    assert "nobody started it" not in help_ or "may have started" in help_
    never = new_id()  # never claimed: nothing to add
    relay.send(alice, "bob", "y", request_id=never)
    r = relay("cancel", never, env=alice)
    assert r.code == 0 and "earlier claim" not in r.out


def test_prepare_and_submit_show_times_as_every_view_does_on_a_terminal(world):
    """design.md §14: on a terminal times are relative, with the local clock time where a
    person plans by them; prepare's and submit's fields printed raw RFC 3339 times there.
    Piped, they stay exact."""
    relay, alice, bob = world
    _, shown = relay.screen("prepare", "--to", "bob", "x", cols=80, rows=24, env=alice)
    assert not re.search(r"\d{4}-\d\d-\d\dT", shown), shown
    assert re.search(r"draft expires +in (59m|1h) \(\d\d:\d\d\)", shown), shown
    rid = relay("prepare", "--to", "bob", "y", "--json", env=alice).json["id"]
    _, shown = relay.screen("submit", rid[:8], cols=80, rows=24, env=alice)
    assert not re.search(r"\d{4}-\d\d-\d\dT", shown), shown
    assert re.search(r"created +\d+s ago", shown) and re.search(r"expires +in (\d+m|1h)", shown)
    piped = relay("submit", rid, env=alice)
    assert re.search(r"expires +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", piped.out)


@pytest.mark.parametrize("ending", ["expired", "cancelled"])
def test_a_duplicate_answer_for_a_request_that_ended_queued_has_a_note(world, ending):
    relay, alice, bob = world
    rid = new_id()
    args = ("send", "--to", "bob", "--id", rid, "--ttl", "30s", "work")
    assert relay(*args, env=alice).code == 0
    later = alice
    if ending == "cancelled":
        assert relay("cancel", rid, env=alice).code == 0
    else:
        later = at(60, alice)
    r = relay(*args, env=later)
    assert r.code == 0, r.err
    assert "duplicate         yes" in r.out
    note = next(ln for ln in r.out.splitlines() if ln.startswith("note: "))
    assert note.startswith(f"note: {ending}: ") and "new id" in note, r.out


def test_list_narrowed_by_a_mistyped_peer_says_no_such_peer(world):
    """An empty table for a name no peer has is a typo, not an empty queue: human output
    says so and names the known peers; JSON stays the empty list it is."""
    relay, alice, _ = world
    relay.send(alice, "bob", "x")
    for option in ("--to", "--from"):
        r = relay("list", option, "bobb")
        assert r.code == 0, r.err
        assert r.out.splitlines() == [
            "no requests",
            "note: no peer is named 'bobb'; known peers: alice, bob",
        ]
        assert relay("list", option, "bobb", "--json").json == {"requests": [], "has_more": False}
    assert "no peer is named" not in relay("list", "--to", "alice").out  # a known peer


def test_a_send_with_the_text_of_an_open_request_under_another_id_says_so(world):
    """A retry whose id has a typo queues the same work twice: the send says so in a
    `note:` naming the open request (still a new request: nothing refused), and not for
    a duplicate, another text, another recipient, or a request no longer open."""
    relay, alice, bob = world
    first, typo = "1a2b3c4d-0000-4000-8000-000000000001", "1a2b3c4d-0000-4000-8000-000000000002"
    assert relay.send(alice, "bob", "deploy it", request_id=first).code == 0
    r = relay("send", "--to", "bob", "--id", typo, "-", input="deploy it", env=alice)
    assert r.code == 0, r.err
    note = " ".join(line for line in r.out.splitlines() if line.startswith("note: " + first))
    assert "open with the same text from alice to bob" in note and typo in note
    assert "a new request all the same" in note
    assert relay("show", typo, "--json").json["state"] == "queued"  # queued all the same
    again = relay("send", "--to", "bob", "--id", typo, "-", input="deploy it", env=alice)
    assert "open with the same text" not in again.out  # a duplicate is no second job
    other = relay("send", "--to", "bob", "-", input="deploy it now", env=alice)
    assert "open with the same text" not in other.out
    assert (
        relay("send", "--to", "bob", "--json", "-", input="deploy it", env=alice).json["duplicate"]
        is False
    )  # JSON keeps its shape
    relay("cancel", first, env=alice)
    relay("cancel", typo, env=alice)
    for rid in [r["id"] for r in relay("list", "--state", "queued", "--json").json["requests"]]:
        relay("cancel", rid, env=alice)
    later = relay("send", "--to", "bob", "-", input="deploy it", env=alice)
    assert "open with the same text" not in later.out  # none of them is open any more


@pytest.mark.sqlite_only
def test_the_same_text_look_is_one_search_of_a_partial_index(world):
    relay, alice, _ = world
    relay.send(alice, "bob", "deploy it")
    store = relay.open_store()
    try:
        captured: list[str] = []
        store.db.conn.set_trace_callback(captured.append)
        store.open_same_text("bob", "alice", "0" * 64, "deploy it", "x", 3)
        store.db.conn.set_trace_callback(None)
        (sql,) = captured
        plan = " / ".join(r[-1] for r in store.db.conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert plan.startswith("SEARCH") and "requests_open_text" in plan, plan
        assert "to_peer=? AND from_peer=? AND text_hash=?" in plan, plan
    finally:
        store.close()
