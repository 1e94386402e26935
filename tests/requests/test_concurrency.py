"""Real parallel processes (design.md §9): dedupe and claims are atomic."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import new_id


def test_same_id_and_content_from_8_processes_is_one_row_and_one_new_request(relay):
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob")
    rid = new_id()
    procs = [
        relay.popen("send", "--to", "bob", "--id", rid, "--json", "same text", env=alice)
        for _ in range(8)
    ]
    results = [p.communicate(timeout=60) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), [e for _, e, _ in results]
    docs = [json.loads(out) for out, _, _ in results]
    assert sorted(d["duplicate"] for d in docs) == [False] + [True] * 7
    assert {d["id"] for d in docs} == {rid}
    assert relay.sql("SELECT count(*) FROM requests WHERE id = ?", (rid,)) == [(1,)]
    assert relay.sql("SELECT count(*) FROM events WHERE request_id = ?", (rid,)) == [(1,)]


def test_changed_content_is_request_id_conflict_and_every_table_is_unchanged(relay):
    alice = relay.join("alice")
    relay.join("bob")
    rid = new_id()
    assert relay.send(alice, "bob", "original", request_id=rid).code == 0
    before = relay.snapshot()
    for extra in ([], ["--ttl", "2h"], ["--on-lost", "redeliver"], ["--reply-within", "5m"]):
        text = "changed" if not extra else "original"
        r = relay.send(alice, "bob", text, *extra, request_id=rid)
        assert (r.code, r.error["code"]) == (4, "request_id_conflict"), r.err
        assert "same content" in r.error["hint"]
    assert relay.snapshot() == before


CLAIM_LOOP = r"""
import json, subprocess, sys
env = json.loads(sys.argv[1])
got = []
while True:
    p = subprocess.run([sys.executable, "-m", "relay_cli", "claim", "--json"],
                       capture_output=True, env=env)
    if p.returncode == 75:
        break
    if p.returncode != 0:
        print(json.dumps({"error": p.stderr.decode()}))
        sys.exit(1)
    got.append(json.loads(p.stdout)["id"])
print(json.dumps(got))
"""


def test_four_parallel_claim_loops_of_one_session_claim_each_request_exactly_once(relay):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    sent = []
    for i in range(30):
        r = relay.send(alice, "bob", f"job {i}")
        assert r.code == 0, r.err
        sent.append(r.json["id"])
    env = relay._env(bob)
    loops = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM_LOOP, json.dumps(env)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    claimed = []
    for p in loops:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0 and out, (out, err)
        claimed += json.loads(out)
    assert sorted(claimed) == sorted(sent)
    assert len(set(claimed)) == 30
    listed = relay("list", "--json", "--all")
    assert listed.code == 0, listed.err
    states = listed.json["requests"]
    assert {r["state"] for r in states} == {"delivered"}
    assert all(r["attempts"] == 1 for r in states)


def _lease(relay, name: str) -> str:
    peers = relay("peers", "list", "--json").json["peers"]
    return next(p["lease_expires_at"] for p in peers if p["name"] == name)


def _blocked(relay, waiter: subprocess.Popen, name: str, lease: str) -> None:
    """Until ``waiter`` (a blocked command of ``name``'s session) waits: past its first
    look, it renews the session's lease (design.md §3) before its first sleep."""
    end = time.monotonic() + 30
    while _lease(relay, name) == lease:
        assert waiter.poll() is None, waiter.communicate()
        assert time.monotonic() < end, "the waiter never began to wait"
        time.sleep(0.02)


def test_claim_wait_wakes_for_a_send_from_another_process(relay):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    lease = _lease(relay, "bob")
    waiter = relay.popen("claim", "--wait", "30s", "--json", env=bob)
    _blocked(relay, waiter, "bob", lease)
    assert waiter.poll() is None
    rid = new_id()
    assert relay.send(alice, "bob", "wake up", request_id=rid).code == 0
    out, err = waiter.communicate(timeout=20)
    assert waiter.returncode == 0, err
    assert json.loads(out)["id"] == rid


def test_wait_returns_when_another_process_replies(relay):
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "q", request_id=rid)
    relay("claim", env=bob)
    lease = _lease(relay, "alice")
    waiter = relay.popen("wait", rid, "--timeout", "30s", "--json", env=alice)
    _blocked(relay, waiter, "alice", lease)
    assert waiter.poll() is None
    assert relay("reply", rid, "answer", env=bob).code == 0
    out, err = waiter.communicate(timeout=20)
    assert waiter.returncode == 0, err
    assert json.loads(out)["reply"] == "answer"


@pytest.mark.sqlite_only
def test_a_lock_held_past_the_busy_timeout_is_busy_and_retryable(relay):
    alice = relay.join("alice")
    relay.join("bob")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"db = sqlite3.connect({str(relay.home / 'relay.db')!r}, isolation_level=None)\n"
            # held until the test says so: however slowly relay starts on a loaded
            # machine, the lock outlasts its busy timeout
            "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout.readline().strip() == b"locked"
    before = time.monotonic()
    try:
        r = relay.proc("send", "--to", "bob", "--id", new_id(), "--json", "x", env=alice)
    finally:
        holder.stdin.close()  # (end of input: the holder lets go)
    assert time.monotonic() - before >= 4.5
    assert (r.code, r.error["code"], r.error["retryable"]) == (75, "busy", True)
    assert "Traceback" not in r.err
    # the lock was held by a plain sqlite3 connection: the hint claims no more than a lock
    assert "another relay process" not in r.error["hint"]
    assert "a tool with relay.db open" in r.error["hint"]
    holder.wait(timeout=20)
    assert relay.send(alice, "bob", "x").code == 0


def _first_open(home: str, start, results) -> None:
    from pathlib import Path

    from relay_cli.core.errors import RelayError
    from relay_cli.store import db

    start.wait()
    try:
        db.open_db(Path(home)).close()
        results.put("ok")
    except RelayError as e:
        results.put(e.code)


@pytest.mark.sqlite_only
def test_first_calls_at_once_on_a_new_home_all_open_it(tmp_path):
    """Four processes open a new home at the same moment, 25 times: each opens it (one
    creates relay.db, makes it WAL and migrates it; the others wait for that). Switching
    to WAL is the step SQLite does not wait for by itself: before relay retried it, about
    one round in six had a call fail with `busy` at once (design.md §9)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    outcomes = []
    for round_ in range(25):
        start, results = ctx.Barrier(4), ctx.Queue()
        procs = [
            ctx.Process(target=_first_open, args=(str(tmp_path / f"home-{round_}"), start, results))
            for _ in range(4)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        outcomes += [results.get(timeout=10) for _ in procs]
    assert outcomes == ["ok"] * 100


@pytest.mark.sqlite_only
def test_a_new_home_held_past_the_busy_timeout_is_busy_and_left_as_it_was(relay, monkeypatch):
    """A reader holds the new relay.db (still in rollback mode) past the busy timeout, so
    it cannot be switched to WAL: the call is `busy` (75, retryable), and the file is left
    as it was -- no table, no WAL -- for the retry, which then sets it up."""
    import os
    import sqlite3

    from relay_cli.store import db

    monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 0.3)  # (5 s in use)
    relay.home.mkdir(mode=0o700)
    path = relay.home / "relay.db"
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # as relay makes it
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a read lock, kept
    try:
        r = relay("peers", "join", "alice", "--json")
        assert (r.code, r.error["code"], r.error["retryable"]) == (75, "busy", True), r.err
        assert holder.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert holder.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not path.with_name("relay.db-wal").exists()
    assert relay("peers", "join", "alice", "--json").code == 0
