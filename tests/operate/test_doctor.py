"""`relay doctor`: every check of design.md §11, on healthy and on broken homes (design.md §2)."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from conftest import new_id

from relay_cli.core.limits import KINDS
from relay_cli.store import LATEST_SCHEMA

COMMON = {
    "relay_version",
    "python",
    "time_offset",
    "schema",
    "tables",
    "requests",
    "delivery_unknown",
    "ledger",
    "stale_drafts",
    "peers",
}
REQUIRED = COMMON | {
    "sqlite",
    "state_dir",
    "db_file",
    "wal_file",
    "shm_file",
    "database",
    "quick_check",
    "journal_mode",
    "synchronous",
    "db_size",
}
# design.md §13: on PostgreSQL the server's checks replace those of the local file
REQUIRED_POSTGRES = COMMON | {
    "database_url",
    "reachable",
    "server",
    "synchronous_commit",
    "tls",
    "clock",
}


def _checks(r) -> dict[str, dict]:
    doc = r.json
    assert set(doc) >= {"ok", "checks"}
    for c in doc["checks"]:
        assert set(c) >= {"name", "status", "detail"}  # plus "group" and "fix"
        assert c["status"] in ("ok", "warn", "fail")
        assert c["detail"] and "\n" not in c["detail"]
    return {c["name"]: c for c in doc["checks"]}


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _files(path) -> dict:
    """Every file under path with its mode and content, to prove nothing changed."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            out[p] = (
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                open(p, "rb").read()
                if stat.S_ISREG(st.st_mode) and not name.endswith(("-wal", "-shm"))
                else None,
            )
    return out


def test_healthy_home_passes_every_check(relay):
    alice = relay.join("alice")
    relay.join("bob")
    relay.send(alice, "bob", "hi")
    before = relay.snapshot()
    r = relay("doctor", "--json")
    assert r.code == 0, r.err
    checks = _checks(r)
    assert all(c["status"] != "fail" for c in checks.values())
    assert checks["schema"]["detail"] == (
        f"schema version {LATEST_SCHEMA} (newest supported {LATEST_SCHEMA})"
    )
    if relay.backend == "postgres":
        assert REQUIRED_POSTGRES <= set(checks), sorted(REQUIRED_POSTGRES - set(checks))
        assert all(
            c["status"] == "ok" for c in checks.values() if c["name"] in REQUIRED_POSTGRES - COMMON
        ), checks
        assert "state_dir" not in checks and "sqlite" not in checks
        assert not relay.home.exists()  # relay.db is not used
    else:
        assert REQUIRED <= set(checks)
        assert checks["state_dir"]["status"] == "ok" and "0700" in checks["state_dir"]["detail"]
        assert checks["journal_mode"]["detail"] == "wal"
        assert checks["quick_check"]["status"] == "ok"
    doc = r.json
    assert doc["ok"] is True
    assert doc["requests_by_state"]["queued"] == 1
    assert doc["schema_version"] == doc["schema_supported"] == LATEST_SCHEMA
    assert {p["name"] for p in doc["active_peers"]} == {"alice", "bob"}
    assert all(p["lease_left_seconds"] > 0 for p in doc["active_peers"])
    assert "2 active session(s)" in checks["peers"]["detail"]
    assert relay.snapshot() == before  # doctor writes nothing, not even a lease


def test_human_report_is_plain_and_exits_0(relay):
    relay.join("alice")
    r = relay("doctor")
    assert r.code == 0, r.err
    assert ("database_url" if relay.url else "state_dir") in r.out and "\x1b" not in r.out
    assert r.out.rstrip().splitlines()[-1].startswith("relay doctor: 0 fail, ")


@pytest.mark.sqlite_only
def test_missing_home_is_ok_and_doctor_creates_nothing(relay, tmp_path):
    assert not relay.home.exists()
    r = relay("doctor", "--json")
    assert r.code == 0, r.err
    checks = _checks(r)
    assert checks["state_dir"]["status"] == "ok" and checks["database"]["status"] == "ok"
    assert "not created yet" in checks["state_dir"]["detail"]
    assert "relay peers join NAME" in checks["state_dir"]["detail"]  # the command that creates it
    assert all(c["status"] == "ok" for c in checks.values())
    assert not relay.home.exists()
    assert relay("doctor", "--fix").code == 0
    assert not relay.home.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite_only  # a state directory holding no relay.db
def test_an_empty_home_is_ok_too_and_names_the_command_that_creates_the_database(relay):
    """design.md §11: a home a person made (`mkdir -m 700`) that holds no relay.db yet is
    as fresh as a missing one: nothing is wrong, nothing to act on, so no warn."""
    relay.home.mkdir(mode=0o700)
    r = relay("doctor", "--json")
    assert r.code == 0, r.err
    checks = _checks(r)
    assert checks["database"]["status"] == "ok", checks["database"]
    assert "not created yet" in checks["database"]["detail"]
    assert "relay peers join NAME" in checks["database"]["detail"]
    assert all(c["status"] == "ok" for c in checks.values()), checks
    assert list(relay.home.iterdir()) == []  # doctor created nothing


@pytest.mark.sqlite_only
def test_symlinked_home_fails_and_fix_leaves_it(relay, tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    relay.home.symlink_to(real)
    r = relay("doctor", "--json", "--fix")
    assert r.code == 7
    checks = _checks(r)
    assert checks["state_dir"]["status"] == "fail"
    assert "symbolic link" in checks["state_dir"]["detail"]
    assert relay.home.is_symlink() and _mode(real) == 0o755  # not followed, not replaced
    assert any("symbolic link" in line for line in r.json["fixed"])


@pytest.mark.sqlite_only
def test_symlinked_db_fails_and_fix_leaves_it(relay, tmp_path):
    relay.join("alice")
    other = tmp_path / "elsewhere.db"
    (relay.home / "relay.db").rename(other)
    other.chmod(0o644)
    (relay.home / "relay.db").symlink_to(other)
    r = relay("doctor", "--json", "--fix")
    assert r.code == 7
    checks = _checks(r)
    assert checks["db_file"]["status"] == "fail"
    assert "symbolic link" in checks["db_file"]["detail"]
    assert checks["database"]["status"] != "ok"  # not opened through the link
    assert (relay.home / "relay.db").is_symlink() and _mode(other) == 0o644


@pytest.mark.sqlite_only
def test_group_readable_dir_fails_then_fix_tightens_it(relay):
    relay.join("alice")
    relay.home.chmod(0o750)
    r = relay("doctor", "--json")
    assert r.code == 7
    assert _checks(r)["state_dir"]["status"] == "fail"
    assert "0750" in _checks(r)["state_dir"]["detail"]
    f = relay("doctor", "--json", "--fix")
    assert f.code == 0, f.out
    assert _mode(relay.home) == 0o700
    assert f.json["fixed"] == [f"{relay.home}: mode 0750 -> 0700"]
    assert _checks(f)["state_dir"]["status"] == "ok"


@pytest.mark.sqlite_only
def test_fix_tightens_a_0755_dir_and_a_0644_db_and_says_so(relay):
    relay.join("alice")
    relay.home.chmod(0o755)
    (relay.home / "relay.db").chmod(0o644)
    before = relay.snapshot()
    r = relay("doctor", "--fix")
    assert r.code == 0, r.out
    assert _mode(relay.home) == 0o700
    assert _mode(relay.home / "relay.db") == 0o600
    assert f"fixed: {relay.home}: mode 0755 -> 0700" in r.out
    assert f"fixed: {relay.home / 'relay.db'}: mode 0644 -> 0600" in r.out
    assert relay.snapshot() == before
    again = relay("doctor", "--fix")
    assert "fixed: nothing needed changing" in again.out


@pytest.mark.sqlite_only
def test_open_db_mode_fails_like_every_command_and_fix_tightens_it(relay):
    relay.join("alice")
    (relay.home / "relay.db").chmod(0o640)
    listed = relay("list", "--json")
    assert (listed.code, listed.error["code"]) == (7, "unsafe_state_dir")
    r = relay("doctor", "--json")
    assert r.code == 7
    assert _checks(r)["db_file"]["status"] == "fail"
    assert "doctor --fix" in _checks(r)["db_file"]["detail"]
    assert relay("doctor", "--fix").code == 0
    assert relay("list", "--json").code == 0


@pytest.mark.sqlite_only
@pytest.mark.parametrize("target", ["dir", "db"])
def test_foreign_owner_fails_and_fix_does_not_touch_it(relay, target):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another uid")
    relay.join("alice")
    path = relay.home if target == "dir" else relay.home / "relay.db"
    os.chown(path, 4242, 4242)
    before = _files(relay.home)
    r = relay("doctor", "--json", "--fix")
    assert r.code == 7
    name = "state_dir" if target == "dir" else "db_file"
    assert _checks(r)[name]["status"] == "fail"
    assert "uid 4242" in _checks(r)[name]["detail"]
    assert _files(relay.home) == before


@pytest.mark.sqlite_only
def test_file_that_is_not_sqlite_is_reported_not_overwritten(relay):
    relay.home.mkdir(mode=0o700)
    db = relay.home / "relay.db"
    db.write_bytes(b"this is not a database at all\n" * 10)
    db.chmod(0o600)
    r = relay("doctor", "--json")
    assert r.code == 7
    checks = _checks(r)
    assert checks["database"]["status"] == "fail"
    assert checks["database"]["detail"].startswith("database_corrupt")
    assert checks["state_dir"]["status"] == "ok"
    assert db.read_bytes() == b"this is not a database at all\n" * 10


@pytest.mark.sqlite_only
@pytest.mark.parametrize("where", ["data_pages", "every_page_after_the_header"])
def test_damaged_pages_are_reported_not_a_crash(relay, where):
    alice = relay.join("alice")
    relay.join("bob")
    for _ in range(6):
        relay.send(alice, "bob", "x" * 20000)
    relay("sweep")  # last connection closed: everything is in relay.db
    db = relay.home / "relay.db"
    data = bytearray(db.read_bytes())
    page, pages = 4096, len(data) // 4096
    first = pages - 12 if where == "data_pages" else 1
    for n in range(first, pages):
        data[n * page : n * page + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))
    r = relay("doctor", "--json")
    assert r.code == 7, r.out
    checks = _checks(r)
    if where == "data_pages":
        assert checks["database"]["status"] == "ok"
        assert checks["quick_check"]["status"] == "fail"
    bad = [c for c in checks.values() if c["status"] == "fail"]
    assert all(c["detail"].startswith("database_corrupt") for c in bad)
    assert checks["state_dir"]["status"] == "ok"
    assert "Traceback" not in r.err and r.err == ""


@pytest.mark.sqlite_only
def test_newer_schema_is_reported_and_other_checks_still_run(relay):
    relay.join("alice")
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("PRAGMA user_version = 99")
    db.close()
    r = relay("doctor", "--json")
    assert r.code == 7
    checks = _checks(r)
    assert checks["schema"]["status"] == "fail"
    assert "schema_too_new" in checks["schema"]["detail"] and "99" in checks["schema"]["detail"]
    assert checks["state_dir"]["status"] == "ok"
    assert checks["quick_check"]["status"] == "ok"
    assert r.json["schema_version"] == 99


def test_time_offset_is_a_warning(relay):
    relay.join("alice")
    r = relay("doctor", "--json", env={"RELAY_TIME_OFFSET": "3600"})
    assert r.code == 0
    c = _checks(r)["time_offset"]
    assert c["status"] == "warn" and "RELAY_TIME_OFFSET=3600" in c["detail"]
    bad = relay("doctor", "--json", env={"RELAY_TIME_OFFSET": "soon"})
    assert bad.code == 7 and _checks(bad)["time_offset"]["status"] == "fail"
    # the one failure: everything else is still read, by this machine's clock
    assert [name for name, c in _checks(bad).items() if c["status"] == "fail"] == ["time_offset"]
    assert bad.json["requests_by_state"] is not None and len(bad.json["active_peers"]) == 1


def test_delivery_unknown_and_stale_drafts_are_counted(relay):
    alice, bob = relay.join("alice"), relay.join("bob")
    rid = new_id()
    relay.send(alice, "bob", "work", request_id=rid)
    assert relay("claim", "--json", env=bob).code == 0
    assert relay("peers", "leave", env=bob).code == 0  # claimed work -> delivery_unknown
    assert relay("prepare", "--to", "bob", "draft", "--json", env=alice).code == 0
    r = relay("doctor", "--json", env={"RELAY_TIME_OFFSET": "7200"})
    checks = _checks(r)
    assert r.json["delivery_unknown"] == 1
    assert checks["delivery_unknown"]["status"] == "warn"
    assert "relay resolve" in checks["delivery_unknown"]["detail"]
    assert r.json["stale_drafts"] == 1
    assert r.json["due_transitions"] >= 1  # alice's lease lapsed; doctor does not sweep it


def test_wakeup_per_active_peer(relay):
    relay.join("c1", "--kind", "claude")
    relay.join("c2", "--kind", "claude", "--lease", "1h")
    relay.join("x1", "--kind", "codex")
    relay.join("a1", "--kind", "aider")
    relay.sql(
        "UPDATE peers SET hook_seen_at = (SELECT max(created_at) FROM sessions) WHERE name = 'c2'"
    )
    r = relay("doctor", "--json")
    checks = _checks(r)
    assert checks["wakeup:c1"]["status"] == "warn"
    assert checks["wakeup:c1"]["detail"].startswith("not_configured")
    assert checks["wakeup:c1"]["fix"] == "relay hook install claude"
    assert checks["wakeup:c2"]["status"] == "ok"
    assert checks["wakeup:c2"]["detail"].startswith("hook")
    assert checks["wakeup:x1"]["status"] == "warn"
    assert checks["wakeup:x1"]["detail"].startswith("not_configured")
    assert checks["wakeup:x1"]["fix"] == "relay hook install codex"
    assert checks["wakeup:a1"]["status"] == "ok"  # nothing a person could install
    assert "nothing to install for an aider peer" in checks["wakeup:a1"]["detail"]
    wake = {p["name"]: p["wakeup"] for p in r.json["active_peers"]}
    assert wake == {
        "a1": "not_configured",
        "c1": "not_configured",
        "c2": "hook",
        "x1": "not_configured",
    }
    # 15 min later: the hook is no longer recent; the 45 s leases lapsed
    later = relay("doctor", "--json", env={"RELAY_TIME_OFFSET": "900"})
    checks = _checks(later)
    assert checks["wakeup:c2"]["status"] == "warn"
    assert "last ran 15m ago" in checks["wakeup:c2"]["detail"]
    assert "wakeup:c1" not in checks and "wakeup:x1" not in checks
    assert [p["name"] for p in later.json["active_peers"]] == ["c2"]
    assert "3 session(s) whose lease lapsed" in checks["peers"]["detail"]


def test_wakeup_on_a_database_from_before_wake_waiters(relay):
    """Doctor opens an older schema read-only; it has no waiters, and says so without error."""
    relay.join("c1", "--kind", "claude")
    relay.sql("DROP TABLE wake_waiters")
    relay.sql(
        "PRAGMA user_version = 4"
        if relay.backend == "sqlite"
        else "UPDATE relay_schema SET version = 4"
    )
    r = relay("doctor", "--json")
    assert r.code == 0, r.err
    assert _checks(r)["wakeup:c1"]["detail"].startswith("not_configured")


def _until(relay, predicate, what):
    import time

    end = time.monotonic() + 20
    while True:
        peers = {p["name"]: p["wakeup"] for p in relay("peers", "list", "--json").json["peers"]}
        if predicate(peers):
            return peers
        assert time.monotonic() < end, f"gave up waiting for {what}: {peers}"
        time.sleep(0.05)


@pytest.mark.parametrize("wakeup", ["waiter", "hook", "polling", "not_configured"])
def test_doctor_and_peers_list_agree_on_wakeup_for_every_kind(relay, wakeup):
    """One definition of `wakeup` (design.md §12): doctor shows what `peers list` shows."""
    import json
    import subprocess

    from relay_cli.agents import runtimes

    envs = {kind: relay.join(f"p-{kind}", "--kind", kind, "--lease", "1h") for kind in KINDS}
    procs = []
    try:
        if wakeup == "hook":
            relay.sql("UPDATE peers SET hook_seen_at = (SELECT max(created_at) FROM sessions)")
        elif wakeup == "polling":
            procs = [relay.popen("claim", "--wait", "60s", env=e) for e in envs.values()]
        elif wakeup == "waiter":
            stop = {"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": False}
            for e in envs.values():
                p = relay.popen("hook", "claude", "--wake", env=e, stdin=subprocess.PIPE)
                p.stdin.write(json.dumps(stop).encode())
                p.stdin.close()
                p.stdin = None
                procs.append(p)
        listed = _until(relay, lambda w: all(v == wakeup for v in w.values()), wakeup)
        r = relay("doctor", "--json")
        assert r.code == 0, r.err
        checks = _checks(r)
        shown = {p["name"]: p["wakeup"] for p in r.json["active_peers"]}
        assert shown == listed
        for kind in KINDS:
            check = checks[f"wakeup:p-{kind}"]
            assert check["detail"].startswith(f"{wakeup}: ")
            installable = kind in runtimes.NAMES
            needs_hook = installable and wakeup in ("polling", "not_configured")
            assert check["status"] == ("warn" if needs_hook else "ok"), check
            assert (check["fix"] == f"relay hook install {kind}") == needs_hook
            if not installable:
                assert "nothing to install" in check["detail"]
            if wakeup == "hook" and kind in ("gemini", "copilot"):  # no background hooks
                assert "relay cannot wake an idle" in check["detail"], check
    finally:
        for p in procs:
            p.kill()
            p.communicate()


def test_doctor_runs_as_a_real_process(relay):
    relay.join("alice")
    r = relay.proc("doctor", "--json")
    assert r.code == 0, r.err
    assert r.json["ok"] is True


@pytest.mark.sqlite_only
def test_home_that_is_a_file_is_reported_by_doctor_and_refused_by_commands(relay):
    relay.home.write_text("not a directory")
    r = relay("doctor", "--json", "--fix")
    assert r.code == 7
    checks = _checks(r)
    assert checks["state_dir"]["status"] == "fail"
    assert "not a directory" in checks["state_dir"]["detail"]
    assert relay.home.read_text() == "not a directory"
    other = relay("peers", "list", "--json")
    assert other.code == 7 and other.error["code"] == "unsafe_state_dir"


@pytest.mark.sqlite_only
def test_symlinked_wal_file_fails_and_is_left_alone(relay, tmp_path):
    relay.join("alice")
    target = tmp_path / "elsewhere-wal"
    target.write_bytes(b"")
    target.chmod(0o644)
    (relay.home / "relay.db-wal").symlink_to(target)
    r = relay("doctor", "--json", "--fix")
    assert r.code == 7
    checks = _checks(r)
    assert checks["wal_file"]["status"] == "fail"
    assert "symbolic link" in checks["wal_file"]["detail"]
    assert checks["database"]["status"] == "warn"  # not opened through the link
    assert (relay.home / "relay.db-wal").is_symlink() and _mode(target) == 0o644


def test_home_path_with_uri_characters_is_read_not_created_elsewhere(tmp_path):
    from conftest import Relay

    relay = Relay(tmp_path / "a#b?c%20d")
    relay.join("alice")
    r = relay("doctor", "--json")
    assert r.code == 0, r.out
    assert _checks(r)["schema"]["status"] == "ok"
    assert r.json["active_peers"][0]["name"] == "alice"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a#b?c%20d"]


def test_doctor_reports_rows_per_table(relay):
    alice = relay.join("alice")
    relay.join("bob")
    assert relay.send(alice, "bob", "x").code == 0
    r = relay("doctor", "--json")
    assert r.json["rows_by_table"]["requests"] == 1
    assert r.json["rows_by_table"]["peers"] == 2
    check = next(c for c in r.json["checks"] if c["name"] == "tables")
    assert check["status"] == "ok" and "requests 1" in check["detail"]


@pytest.mark.sqlite_only  # PostgreSQL lists its tables by name, as it always has
def test_doctor_lists_relay_db_tables_in_the_schema_order(relay):
    """A migration that rebuilds a table (requests, for its CHECK) moves it to the end of
    sqlite_master; doctor's table line keeps the schema's order all the same."""
    relay.join("alice")
    r = relay("doctor", "--json")
    assert list(r.json["rows_by_table"]) == [
        "peers",
        "sessions",
        "requests",
        "drafts",
        "events",
        "ledger",
        "hook_state",
        "wake_waiters",
        "claims",
        "settings",
    ]
    check = next(c for c in r.json["checks"] if c["name"] == "tables")
    assert check["detail"].startswith("peers 1, sessions 1, requests 0, drafts 0")


def test_a_lapsed_session_still_holding_claimed_work_is_a_warning(relay):
    alice, bob = relay.join("alice", "--lease", "1h"), relay.join("bob")  # bob: 45 s lease
    relay.join("carol")  # lapses too, but holds nothing: not a problem
    rid = new_id()
    relay.send(alice, "bob", "work", request_id=rid)
    assert relay("claim", "--id", rid, "--lease", "1h", env=bob).code == 0
    now = _checks(relay("doctor", "--json"))
    assert now["lapsed_sessions"]["status"] == "ok"
    later = relay("doctor", "--json", env={"RELAY_TIME_OFFSET": "60"})
    checks = _checks(later)
    assert checks["lapsed:bob"]["status"] == "warn" and "lapsed:carol" not in checks
    assert rid[:8] in checks["lapsed:bob"]["detail"]
    # the home (or database) came from the environment, which a pasted command inherits:
    # the command carries no scope flag (design.md §14) ...
    assert checks["lapsed:bob"]["fix"] == "relay list --state delivery_unknown"
    if not relay.url:  # ... and names the home the command line gave
        given = relay("doctor", "--json", "--home", relay.home, env={"RELAY_TIME_OFFSET": "60"})
        assert _checks(given)["lapsed:bob"]["fix"] == (
            f"relay list --state delivery_unknown --home {relay.home}"
        )
    assert later.json["lapsed_sessions"] == [
        {
            "peer": "bob",
            "lease_expires_at": later.json["lapsed_sessions"][0]["lease_expires_at"],
            "claimed": [rid],
        }
    ]
    assert relay("show", rid, "--json").json["state"] == "delivered"  # doctor swept nothing


def test_an_approval_waiting_for_a_person_is_a_warning(relay):
    assert relay.proc("once", "--approve", "--timeout", "0", "--key", "k", "--", "true").code == 75
    c = _checks(relay("doctor", "--json"))["approvals"]
    assert c["status"] == "warn" and "relay approve or relay deny" in c["detail"]


def test_doctor_creates_no_files(relay):
    """design.md §11: doctor creates nothing (§6: it writes nothing)."""
    assert relay("peers", "add", "al").code == 0

    def files():  # (on PostgreSQL nothing creates the state directory)
        return sorted(os.listdir(relay.home)) if relay.home.exists() else None

    before = files()
    r = relay.proc("doctor")
    assert r.code == 0, r.out
    assert files() == before
