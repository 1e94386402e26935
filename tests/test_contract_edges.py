"""Edge cases of design.md §1–§9 found by a cold review of the core, one test each."""

from __future__ import annotations

import sqlite3

from conftest import new_id

from relay_cli.states import MEANING


def _lease(relay, name: str, env: dict | None = None) -> str:
    r = relay("peers", "list", "--json", env=env)
    return next(p["lease_expires_at"] for p in r.json["peers"] if p["name"] == name)


# --------------------------------------------------------------- §7 untrusted text
def test_newline_in_fail_reason_cannot_fake_relay_lines(relay):
    """design.md §7: peer text must not be able to fake relay's own lines in human output."""
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "work", request_id=rid).code == 0
    assert relay("claim", "--json", env=bob).code == 0
    fake = "oops\nstate               completed\nnote: completed: the recipient replied"
    r = relay("fail", rid, "--reason", fake, env=bob)
    assert r.code == 0
    shown = relay("show", rid, "--events").out
    for out in (r.out, shown):
        lines = out.splitlines()
        assert not any(ln.startswith("state") and "completed" in ln for ln in lines), out
        assert not any(ln.startswith("note: completed") for ln in lines), out


def test_bidi_marks_in_text_are_made_visible(relay):
    """design.md §7: control characters made visible; U+200E/U+200F/U+061C are bidi controls."""
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "a\u200fb\u200ec\u061cd", request_id=rid).code == 0
    out = relay("show", rid).out
    for ch in ("\u200f", "\u200e", "\u061c"):
        assert ch not in out
    del bob


# --------------------------------------------------------------- §2/§9 first open race
def test_first_open_racing_another_first_open_is_not_database_corrupt(relay, monkeypatch):
    """Two processes opening a fresh home at once: the one that read user_version=0 just
    before the other committed the migration must not report database_corrupt.
    (Seen for real: 2 of 240 `relay send` processes started 8 at a time on fresh homes.)"""
    from relay_cli.store import db as dbmod

    home = relay.home
    original = dbmod._connect
    armed = {"on": True}

    class Cur:
        def __init__(self, row):
            self.row = row

        def fetchone(self):
            return self.row

    class Racy(sqlite3.Connection):
        def execute(self, sql, *args):
            cur = super().execute(sql, *args)
            if armed["on"] and sql.startswith("PRAGMA user_version"):
                armed["on"] = False
                row = cur.fetchone()
                other = dbmod.open_db(home)  # "another process" finishes creating it now
                other.close()
                return Cur(row)
            return cur

    def racy_connect(path):
        if not armed["on"]:
            return original(path)
        conn = sqlite3.connect(str(path), timeout=dbmod.BUSY_TIMEOUT_S, isolation_level=None,
                               factory=Racy)
        conn.row_factory = sqlite3.Row
        return conn

    monkeypatch.setattr(dbmod, "_connect", racy_connect)
    r = relay("peers", "list", "--json")
    assert r.code == 0, r.err


# --------------------------------------------------------------- §3 lease renewal
def test_duplicate_send_by_active_session_renews_its_lease(relay):
    """design.md §3: every call of the session that succeeds (exit 0) renews the lease."""
    alice = relay.join("alice", "--lease", "60")
    relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    before = _lease(relay, "alice")
    later = {**alice, "RELAY_TIME_OFFSET": "30"}
    r = relay.send(later, "bob", "x", request_id=rid)
    assert r.code == 0 and r.json["duplicate"] is True
    assert _lease(relay, "alice", env={"RELAY_TIME_OFFSET": "30"}) > before


def test_duplicate_ack_by_claiming_session_renews_its_lease(relay):
    """design.md §3: `ack` is idempotent and exits 0, so it renews like any successful call."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "60")
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    relay("claim", "--json", env=bob)
    assert relay("ack", rid, "--json", env=bob).code == 0
    before = _lease(relay, "bob")
    r = relay("ack", rid, "--json", env={**bob, "RELAY_TIME_OFFSET": "30"})
    assert r.code == 0 and r.json["duplicate"] is True
    assert _lease(relay, "bob", env={"RELAY_TIME_OFFSET": "30"}) > before


# --------------------------------------------------------------- §12 via resolve
def test_requeued_then_completed_request_is_noticed_again(relay):
    """A delivery_unknown the sender was told about, requeued by a person and then
    completed, must reach the sender (notices) — otherwise it never learns the outcome."""
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "60")
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    relay("claim", "--json", env=bob)
    relay.env["RELAY_TIME_OFFSET"] = "120"
    first = relay("notices", "--json", env=alice).json["notices"]
    assert [n["state"] for n in first] == ["delivery_unknown"]
    assert relay("resolve", rid, "--outcome", "requeue", "--json", terminal=True).code == 0
    bob2 = relay.join("bob", "--lease", "1h")
    assert relay("claim", "--json", env=bob2).code == 0
    assert relay("reply", rid, "done", "--json", env=bob2).code == 0
    second = relay("notices", "--json", env=alice).json["notices"]
    assert [(n["id"], n["state"]) for n in second] == [(rid, "completed")]


# --------------------------------------------------------------- §7 hints / output
def test_session_required_hint_does_not_claim_an_active_session(relay):
    """`claim --as NAME` for a name with no session: the hint must not say it has one."""
    relay("peers", "add", "zed", "--json")
    r = relay("claim", "--as", "zed", "--json")
    assert r.code == 5 and r.error["code"] == "session_required"
    assert "has an active session" not in r.error["hint"]


def test_non_utf8_stdout_is_not_an_internal_error(relay):
    """A terminal whose encoding is not UTF-8 must not turn `show` into internal_error."""
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "h\u00e9llo \u2713", request_id=rid)
    for args in (("show", rid, "--json"), ("show", rid)):
        r = relay.proc(*args, env={"PYTHONIOENCODING": "ascii"})
        assert r.code == 0, r.err


# --------------------------------------------------------------- §8 clock
def test_out_of_range_time_offset_is_not_an_internal_error(relay):
    """RELAY_TIME_OFFSET far outside any real date: a §7 code (exit 2), never exit 1."""
    r = relay("peers", "join", "x", "--json", env={"RELAY_TIME_OFFSET": "1e12"})
    assert r.code != 1, r.err
    assert r.error["code"] != "internal_error"


# --------------------------------------------------------------- §5 check order
def test_ghost_submit_of_another_peers_request_is_superseded_before_not_owner(relay):
    """design.md §6 order: session state (peer_superseded) is checked before ownership."""
    alice = relay.join("alice", "--lease", "1h")
    bob_old = relay.join("bob", "--lease", "1h")
    relay.join("bob", "--lease", "1h")  # supersedes bob_old
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    r = relay("submit", rid, "--json", env=bob_old)
    assert r.error["code"] == "peer_superseded", r.err


# --------------------------------------------------------------- §7 no internal_error
def test_huge_list_limit_is_usage_error_not_internal_error(relay):
    """`list --limit` beyond SQLite's integer range: exit 2 (or treated as no limit), never 1."""
    r = relay("list", "--limit", "99999999999999999999", "--json")
    assert r.code in (0, 2), r.err


# --------------------------------------------------------------- §6 prepare of an expired draft
def test_prepare_again_after_the_draft_expired_does_not_report_success_in_the_past(relay):
    """Re-running `prepare --id` (same content) after the draft expired answers exit 0 with a
    prepared_expires_at already in the past, and the id can then never be submitted."""
    alice = relay.join("alice", "--lease", "24h")
    relay.join("bob", "--lease", "24h")
    pid = new_id()
    args = ("prepare", "--to", "bob", "--id", pid, "--json", "draft")
    assert relay(*args, env=alice).code == 0
    later = {**alice, "RELAY_TIME_OFFSET": "3700"}
    r = relay(*args, env=later)
    if r.code == 0:
        assert relay("submit", pid, "--json", env=later).code == 0


def test_notes_do_not_claim_a_reply_or_an_untouched_request_when_the_reason_says_otherwise(relay):
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob", "--lease", "1h")
    rid = new_id()
    relay.send(alice, "bob", "x", request_id=rid)
    relay("claim", "--lease", "10s", env=bob)
    relay.env["RELAY_TIME_OFFSET"] = "11"
    settled = relay("resolve", rid, "--outcome", "completed", terminal=True).out
    assert "a person settled it as completed" in settled
    assert "the recipient replied" not in settled
    other = new_id()
    relay.send(alice, "bob", "y", "--on-lost", "redeliver", request_id=other)
    relay("claim", "--lease", "10s", env=bob)
    relay.env["RELAY_TIME_OFFSET"] = "22"
    shown = relay("show", other).out
    assert "queued again after a claim lease lapsed" in shown
    assert MEANING["queued"][0] not in shown  # the plain queued note would say untouched


# --------------------------------------------------------------- §7 hostile environments
def _closed(relay, shell_redirect: str, *args: str, stdin: bytes | None = None):
    """Run the real relay under sh with one of its standard streams closed."""
    import shlex
    import subprocess
    import sys

    cmd = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "relay_cli", *args))
    return subprocess.run(["sh", "-c", f"{cmd} {shell_redirect}"], input=stdin,
                          capture_output=True, env=relay._env(None), timeout=60)


def test_a_closed_stdout_is_refused_before_anything_is_done(relay):
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    before = relay.snapshot()
    rid = new_id()
    relay.env.update(alice)
    p = _closed(relay, ">&-", "send", "--to", "bob", "--id", rid, "--json", "hi")
    assert p.returncode == 2, p.stderr
    import json

    err = json.loads(p.stderr.decode().strip())["error"]
    assert err["code"] == "usage_error" and "standard output is closed" in err["message"]
    assert relay.snapshot() == before  # the send did not commit and then fail
    for args in (("list",), ("list", "--json"), ("peers", "list")):
        q = _closed(relay, ">&-", *args)
        assert q.returncode == 2 and b"internal_error" not in q.stderr


def test_a_closed_stdin_or_stderr_is_not_an_internal_error(relay):
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    relay.env.update(alice)
    before = relay.snapshot()
    p = _closed(relay, "<&-", "send", "--to", "bob", "--id", new_id(), "--json", "-")
    assert p.returncode == 2 and b"standard input is closed" in p.stderr
    assert b"internal_error" not in p.stderr
    assert relay.snapshot() == before
    q = _closed(relay, "2>&-", "send", "--to", "bob", "--id", new_id(), "hi")
    assert q.returncode == 0  # stderr only carried a note
    assert _closed(relay, "<&-", "list", "--json").returncode == 0
    hook = _closed(relay, ">&- </dev/null", "hook", "claude")
    assert hook.returncode == 0  # a hook never breaks its agent


def test_once_in_a_working_directory_whose_name_is_not_utf8_is_a_usage_error(relay, tmp_path):
    import json
    import os
    import subprocess
    import sys

    odd = os.path.join(os.fsencode(tmp_path), b"dir-\xff")
    os.mkdir(odd)
    assert relay("ledger", "list").code == 0
    before = relay.snapshot()
    p = subprocess.run([sys.executable, "-m", "relay_cli", "once", "--key", "k", "--json", "--",
                        "true"], cwd=odd, capture_output=True, env=relay._env(None), timeout=60)
    assert p.returncode == 2, p.stderr
    err = json.loads(p.stderr.decode().strip())["error"]
    assert err["code"] == "usage_error" and "not a UTF-8 path" in err["message"]
    assert relay.snapshot() == before


# --------------------------------------------------------------- §7 every SQLite failure typed
def test_a_write_the_database_refuses_is_storage_error_and_changes_nothing(relay):
    """A trigger in relay.db (raw SQL: not relay's) refuses a write; SQLite rolls it back.
    That is storage_error, not internal_error ("a bug in relay")."""
    alice = relay.join("alice", "--lease", "1h")
    relay.join("bob", "--lease", "1h")
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("CREATE TRIGGER no_requests BEFORE INSERT ON requests "
               "BEGIN SELECT RAISE(ABORT, 'requests are frozen'); END")
    db.execute("CREATE TRIGGER no_ledger BEFORE UPDATE ON ledger "
               "BEGIN SELECT RAISE(ROLLBACK, 'ledger is frozen'); END")
    db.commit()
    db.close()
    before = relay.snapshot()
    r = relay.send(alice, "bob", "x")
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert "refused the write" in r.error["message"] and "requests are frozen" in r.error["message"]
    assert relay.snapshot() == before
    r = relay("once", "--key", "k", "--json", "--", "true")  # the pid commit is an update
    assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
    assert "nothing ran" in r.error["message"]


def test_a_table_someone_dropped_is_database_corrupt_not_a_bug(relay):
    relay.join("alice")
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("DROP TABLE hook_state")
    db.commit()
    db.close()
    r = relay("prune", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt"), r.err


def test_every_sqlite_result_code_maps_onto_the_taxonomy():
    from relay_cli.store import relay_error_from_sqlite

    def err(name: str, message: str = "x", cls=sqlite3.OperationalError):
        e = cls(message)
        e.sqlite_errorname = name
        return relay_error_from_sqlite(e).code

    assert err("SQLITE_BUSY") == err("SQLITE_LOCKED_SHAREDCACHE") == "busy"
    for name in ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_FORMAT"):
        assert err(name) == "database_corrupt", name
    for name in ("SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_READONLY_DBMOVED",
                 "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_CONSTRAINT_TRIGGER",
                 "SQLITE_CONSTRAINT_CHECK", "SQLITE_ABORT_ROLLBACK", "SQLITE_INTERRUPT",
                 "SQLITE_TOOBIG", "SQLITE_NOMEM", "SQLITE_NOLFS", "SQLITE_PROTOCOL",
                 "SQLITE_AUTH"):
        assert err(name) == "storage_error", name
    assert err("SQLITE_ERROR", "no such table: ledger") == "database_corrupt"
    assert err("SQLITE_ERROR", 'near "SELEC": syntax error') == "internal_error"  # relay's bug
    assert err("SQLITE_MISUSE") == "internal_error"
