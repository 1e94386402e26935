"""What only the PostgreSQL backend has (design.md §13): selecting it, its errors, its
schema rules, its doctor checks, never a password in anything relay prints. The rest of the
contract runs on both backends through the ``relay`` fixture (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from conftest import Relay, new_id

from relay_cli.store.migrations import LATEST
from testsupport import pgserver

pytestmark = pytest.mark.postgres_only

SECRET = "s3cr:t/p@ss%word"  # characters that must be percent-encoded in a URL


@pytest.fixture
def pg(relay):
    assert relay.backend == "postgres"
    return relay


@pytest.fixture
def empty_db(pg_cluster, tmp_path):
    """A PostgreSQL database relay never touched (no schema)."""
    name, url = pg_cluster.fresh(template="template0")
    try:
        yield Relay(tmp_path / "home", url)
    finally:
        pg_cluster.drop(name)


@pytest.fixture(scope="module")
def tcp_server():
    """A second server on 127.0.0.1 that requires a password (scram), for the tests
    about credentials."""
    if pgserver.bindir() is None or not pgserver.driver_available():
        pytest.skip("PostgreSQL is not installed")
    server = pgserver.start(listen="127.0.0.1", password=SECRET)
    server.execute("CREATE DATABASE relay")
    try:
        yield server
    finally:
        server.remove()


def _leaks(r, secret: str = SECRET) -> bool:
    from urllib.parse import quote

    text = r.out + r.err
    return any(form in text for form in (secret, quote(secret, safe=""), "p@ss"))


# ------------------------------------------------------------------ selecting it
@pytest.mark.parametrize(
    "url", ["mysql://db/relay", "sqlite:///tmp/x.db", "relay.db", "http://example.invalid/"]
)
def test_another_scheme_is_usage_error_from_the_option_and_the_variable(relay, url):
    assert relay.join("alice")
    before = relay.snapshot()
    for r in (
        relay("list", "--json", "--database-url", url),
        relay("list", "--json", env={"RELAY_DATABASE_URL": url}),
    ):
        assert (r.code, r.error["code"]) == (2, "usage_error"), r.err
        assert "postgresql://" in r.error["message"]
    assert relay.snapshot() == before


def test_the_option_wins_over_the_variable_and_every_command_has_it(pg, tmp_path):
    r = pg(
        "peers",
        "join",
        "alice",
        "--json",
        "--database-url",
        pg.url,
        env={"RELAY_DATABASE_URL": "postgresql://nobody@/nowhere?host=/nonexistent"},
    )
    assert r.code == 0, r.err
    assert pg.sql("SELECT name FROM peers") == [("alice",)]
    assert not pg.home.exists()  # relay.db is not used (design.md §13)
    from relay_cli.cli.schema import walk

    missing = [
        ctx.command_path
        for ctx, cmd in walk()
        if not any(p.name == "database_url" for p in cmd.params)
    ]
    assert missing == []


def test_an_empty_option_means_the_local_relay_db(pg):
    r = pg("peers", "join", "alice", "--json", "--database-url", "")
    assert r.code == 0, r.err
    assert (pg.home / "relay.db").exists()
    assert pg.sql("SELECT count(*) FROM peers") == [(0,)]


def test_without_the_driver_a_postgres_url_is_storage_error_with_the_install_command(pg):
    # a real process in which psycopg2 cannot be imported (as when the extra is missing)
    code = "import sys; sys.modules['psycopg2'] = None\nfrom relay_cli.cli import main; main()"
    p = subprocess.run(
        [sys.executable, "-c", code, "list", "--json"],
        capture_output=True,
        text=True,
        env=pg._env(None),
        timeout=60,
    )
    err = json.loads(p.stderr.splitlines()[-1])["error"]
    assert (p.returncode, err["code"]) == (7, "storage_error")
    assert "pip install 'relay-cli[postgres]'" in err["hint"]


def test_the_sqlite_path_never_imports_the_driver(tmp_path):
    code = (
        "import sys\nfrom relay_cli.cli import run\n"
        "assert run(['peers', 'join', 'alice', '--json']) == 0\n"
        "assert run(['list', '--json']) == 0\n"
        "print(sorted(m for m in sys.modules if 'psycopg' in m or m.endswith('.pg')))"
    )
    env = Relay(tmp_path / "h")._env(None)
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------ errors
def test_a_server_that_is_down_is_database_unavailable_and_retryable(pg, tmp_path):
    port = pgserver.free_port()
    url = f"postgresql://relay@127.0.0.1:{port}/relay"
    r = pg.proc(
        "send",
        "--to",
        "bob",
        "--json",
        "x",
        env={"RELAY_DATABASE_URL": url, "RELAY_PEER": "alice"},
        timeout=20,
    )
    err = r.error
    assert (r.code, err["code"], err["retryable"]) == (75, "database_unavailable", True)
    assert err["retry_after_seconds"] > 0
    assert "nothing was changed" in err["hint"]


def test_a_server_that_never_answers_is_database_unavailable_within_the_timeout(pg):
    # a listening socket that accepts and then says nothing (a hung server)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    held = []
    threading.Thread(target=lambda: held.append(lsock.accept()), daemon=True).start()
    url = f"postgresql://relay@127.0.0.1:{lsock.getsockname()[1]}/relay?connect_timeout=60"
    try:
        # relay caps connect_timeout at 5 s; the process bound is the assertion
        r = pg.proc("list", "--json", env={"RELAY_DATABASE_URL": url}, timeout=15)
    finally:
        lsock.close()
    assert (r.code, r.error["code"]) == (75, "database_unavailable")


def test_a_held_write_lock_is_busy_and_changes_nothing(pg):
    alice = pg.join("alice")
    pg.join("bob")
    before = pg.snapshot()
    import psycopg2

    from relay_cli.store import pg as pgmod

    holder = psycopg2.connect(pg.url)
    try:
        with holder.cursor() as cur:
            cur.execute("BEGIN; SELECT pg_advisory_xact_lock(%s)", (pgmod.WRITE_LOCK,))
        r = pg.send(alice, "bob", "x")
        assert (r.code, r.error["code"], r.error["retryable"]) == (75, "busy", True)
    finally:
        holder.rollback()
        holder.close()
    assert pg.snapshot() == before


def test_a_wrong_password_is_storage_error_and_never_shown(tcp_server, tmp_path):
    from urllib.parse import quote

    home = tmp_path / "h"
    for url in (
        f"postgresql://postgres:{quote('wrong' + SECRET, safe='')}@127.0.0.1:"
        f"{tcp_server.port}/relay",
        f"postgresql://postgres@127.0.0.1:{tcp_server.port}/relay?password="
        f"{quote('wrong' + SECRET, safe='')}",
    ):
        r = Relay(home, url)("list", "--json")
        assert (r.code, r.error["code"]) == (7, "storage_error"), r.err
        assert "authentication" in r.error["message"]
        assert not _leaks(r, "wrong" + SECRET)


def test_no_password_in_any_output_error_hint_doctor_line_or_export(tcp_server, tmp_path):
    from urllib.parse import quote

    url = tcp_server.url("relay", host="127.0.0.1", password=True)
    assert quote(SECRET, safe="") in url
    relay = Relay(tmp_path / "h", url)
    results = []
    joined = relay("peers", "join", "alice", "--json")
    results.append(joined)
    alice = {"RELAY_PEER": "alice", "RELAY_SESSION": joined.json["token"]}
    results.append(relay("peers", "join", "bob", "--shell"))
    results.append(relay("send", "--to", "bob", "--json", "x", env=alice))
    results.append(relay("send", "--to", "nobody", "--json", "x", env=alice))
    results.append(relay("send", "--to", "nobody", "x", env=alice))
    results.append(relay("doctor"))
    results.append(relay("doctor", "--json"))
    results.append(relay("list"))
    results.append(relay("peers", "list", "--json"))
    results.append(
        relay("list", "--json", env={"RELAY_DATABASE_URL": url.replace("127.0.0.1", "127.0.0.1:1")})
    )  # a malformed URL (two ports)
    results.append(
        relay(
            "list",
            "--json",
            env={
                "RELAY_DATABASE_URL": url.replace(
                    f":{tcp_server.port}/", f":{pgserver.free_port()}/"
                )
            },
        )
    )  # nothing listens
    assert all(not _leaks(r) for r in results), [r.out + r.err for r in results if _leaks(r)]
    shell = results[1].out
    assert "RELAY_DATABASE_URL=" in shell and f"127.0.0.1:{tcp_server.port}/relay" in shell


# ------------------------------------------------------------------ schema
def test_eight_first_calls_at_once_migrate_exactly_once(empty_db):
    procs = [empty_db.popen("peers", "add", f"p{i}", "--json") for i in range(8)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [e for _, e in outs]
    assert empty_db.sql("SELECT version FROM relay_schema") == [(LATEST,)]
    assert empty_db.sql("SELECT count(*) FROM peers") == [(8,)]


def test_a_newer_schema_is_schema_too_new_and_nothing_changes(pg):
    pg.join("alice")
    pg.sql("UPDATE relay_schema SET version = ?", (LATEST + 1,))
    before = pg.snapshot()
    r = pg("peers", "join", "bob", "--json")
    assert (r.code, r.error["code"]) == (7, "schema_too_new")
    assert pg.snapshot() == before
    d = pg("doctor", "--json")
    assert d.code == 7
    check = next(c for c in d.json["checks"] if c["name"] == "schema")
    assert check["status"] == "fail" and "schema_too_new" in check["detail"]


def test_a_database_with_tables_named_like_relays_is_refused_unchanged(empty_db):
    empty_db.sql("CREATE TABLE requests (id integer, note text)")
    empty_db.sql("INSERT INTO requests VALUES (1, 'theirs')")
    r = empty_db("peers", "join", "alice", "--json")
    assert (r.code, r.error["code"]) == (7, "database_corrupt")
    assert empty_db.sql("SELECT * FROM requests") == [(1, "theirs")]
    assert empty_db.sql("SELECT to_regclass('relay_schema') IS NULL") == [(True,)]
    # doctor fails it and names a command that shows what is in that database
    check = next(c for c in empty_db("doctor", "--json").json["checks"] if c["name"] == "schema")
    assert check["status"] == "fail" and check["fix"].startswith("psql ")
    assert check["fix"].endswith(" -c '\\dt'")


def test_doctor_on_an_empty_database_creates_nothing(empty_db):
    r = empty_db("doctor", "--json")
    assert r.code == 0, r.err
    check = next(c for c in r.json["checks"] if c["name"] == "schema")
    # nothing for a person to do: the first writing command creates the schema (an ok
    # line, as for a home not created yet, design.md §11)
    assert check["status"] == "ok" and "schema 0" in check["detail"]
    assert empty_db.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    ) == [(0,)]


# ------------------------------------------------------------------ doctor
def test_doctor_reports_the_server(pg):
    pg.join("alice")
    r = pg("doctor", "--json")
    assert r.code == 0, r.err
    checks = {c["name"]: c for c in r.json["checks"]}
    assert checks["database_url"]["detail"].startswith("postgresql://postgres@/")
    assert checks["server"]["detail"].startswith("PostgreSQL 1")
    assert "round-trip" in checks["reachable"]["detail"]
    assert checks["synchronous_commit"]["status"] == "ok"
    assert checks["tls"]["status"] == "ok" and "local" in checks["tls"]["detail"]
    assert checks["clock"]["status"] == "ok"
    assert r.json["backend"] == "postgresql" and abs(r.json["clock_offset_ms"]) < 1000


def test_doctor_warns_when_synchronous_commit_is_off(pg):
    dbname = pg.sql("SELECT current_database()")[0][0]
    pg.sql(f'ALTER DATABASE "{dbname}" SET synchronous_commit = off')
    r = pg("doctor", "--json")
    check = next(c for c in r.json["checks"] if c["name"] == "synchronous_commit")
    assert check["status"] == "warn" and "could be lost" in check["detail"]


def test_doctor_warns_about_a_remote_host_without_tls(tcp_server, tmp_path):
    # the name is not local (hostaddr takes the connection to this machine's server)
    url = (
        f"postgresql://postgres@relay-db.example:{tcp_server.port}/relay?"
        f"hostaddr=127.0.0.1&password={SECRET.replace('%', '%25').replace('@', '%40')}"
    )
    r = Relay(tmp_path / "h", url)("doctor", "--json")
    checks = {c["name"]: c for c in r.json["checks"]}
    assert checks["tls"]["status"] == "warn" and "sslmode=verify-full" in checks["tls"]["detail"]
    assert not _leaks(r)


def test_the_server_clock_is_relays_clock(pg):
    """A lease is judged by the server's clock: a process whose clock source is the server
    (design.md §13) agrees with the server's clock_timestamp()."""
    alice = pg.join("alice")
    pg.join("bob")
    rid = new_id()
    assert pg.send(alice, "bob", "x", request_id=rid).code == 0
    created = pg.sql("SELECT created_at FROM requests WHERE id = ?", (rid,))[0][0]
    server = pg.sql("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0][0]
    assert 0 <= server - created < 60_000


def _skewed(seconds: int) -> list[str] | None:
    """A command prefix that runs a process whose system clock is ``seconds`` off
    (libfaketime preloaded, not the ``faketime`` wrapper, whose named semaphore can be
    left behind by a killed process and refuse a later start), or None when libfaketime
    is not installed."""
    from testsupport import netns

    env = netns.faketime_env(seconds)
    if env is None:
        return None
    return ["env", *(f"{k}={v}" for k, v in env.items())]


def test_a_machine_whose_clock_is_ten_minutes_off_agrees_on_every_deadline(pg):
    """design.md §13: relay's clock is the server's, so a machine whose own clock is
    wrong by minutes still writes the same times and judges leases the same."""
    prefix = _skewed(-600)
    if prefix is None:
        if os.environ.get("RELAY_REQUIRE_POSTGRES") == "1":
            pytest.fail("faketime is not installed (.ci/run installs it)")
        pytest.skip("faketime is not installed")
    env = pg._env(None)
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import time; print(time.time())"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    import time

    assert time.time() - float(probe.stdout) > 500  # the clock really is 10 min behind

    def skewed(*args, who=None):
        p = subprocess.run(
            [*prefix, sys.executable, "-m", "relay_cli", *args],
            capture_output=True,
            text=True,
            env={**env, **(who or {})},
            timeout=60,
        )
        return p.returncode, p.stdout, p.stderr

    code, out, err = skewed("peers", "join", "alice", "--json")
    assert code == 0, err
    alice = {"RELAY_PEER": "alice", "RELAY_SESSION": json.loads(out)["token"]}
    bob = pg.join("bob", "--lease", "1h")
    rid = new_id()
    code, out, err = skewed("send", "--to", "bob", "--id", rid, "--json", "x", who=alice)
    assert code == 0, err
    created = pg.sql("SELECT created_at FROM requests WHERE id = ?", (rid,))[0][0]
    server = pg.sql("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0][0]
    assert 0 <= server - created < 60_000  # the server's time, not 10 minutes ago
    # a claim lease taken on the correct machine is still live for the skewed one
    assert pg("claim", "--id", rid, "--lease", "60s", "--json", env=bob).code == 0
    code, out, err = skewed("show", rid, "--json")
    assert code == 0 and json.loads(out)["state"] == "delivered", err


# ------------------------------------------------------------------ relay db copy
def _columns(sqlite_relay, table: str) -> list[str]:
    return [r[1] for r in sqlite_relay.sql(f"PRAGMA table_info('{table}')")]


def _tables(sqlite_relay) -> list[str]:
    return [
        r[0]
        for r in sqlite_relay.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        )
    ]


def _populate(src: Relay) -> dict:
    """A relay.db with something in every table: live and final requests, a tombstone,
    a draft, sessions, a ledger entry with output, the hook's state."""
    alice, bob = src.join("alice", "--lease", "1h"), src.join("bob", "--lease", "1h")
    old = new_id()
    assert src.send(alice, "bob", "old work", request_id=old).code == 0
    assert src("claim", "--id", old, "--json", env=bob).code == 0
    assert src("reply", old, "old answer", env=bob).code == 0
    assert src("prune", "--older-than", "0", "--json").code == 0  # old is a tombstone now
    queued, done = new_id(), new_id()
    assert src.send(alice, "bob", "queued work", request_id=queued).code == 0
    assert src.send(alice, "bob", "done work", request_id=done).code == 0
    attempt = new_id()  # the claims table too (design.md §6)
    assert src("claim", "--id", done, "--attempt", attempt, "--json", env=bob).code == 0
    assert src("reply", done, "an answer", env=bob).code == 0
    assert src("prepare", "--to", "bob", "a draft", "--json", env=alice).code == 0
    assert src("once", "--key", "k1", "--", "sh", "-c", "echo out; echo err >&2").code == 0
    event = json.dumps(
        {"hook_event_name": "SessionStart", "session_id": "cc-1", "source": "startup"}
    )
    src("hook", "claude", input=event, env={"RELAY_PEER": "carol"})
    return {
        "alice": alice,
        "bob": bob,
        "queued": queued,
        "done": done,
        "old": old,
        "attempt": attempt,
    }


def test_db_copy_moves_every_row_and_the_work_goes_on_there(pg_cluster, tmp_path):
    src = Relay(tmp_path / "home")
    ids = _populate(src)
    name, url = pg_cluster.fresh(template="template0")
    try:
        before = src.snapshot()
        r = src("db", "copy", "--to", url, "--json")
        assert r.code == 0, r.err
        assert src.snapshot() == before  # relay.db is not changed
        dst = Relay(tmp_path / "home", url)
        for table in _tables(src):
            cols = ", ".join(f'"{c}"' for c in _columns(src, table))
            rows = src.sql(f"SELECT {cols} FROM {table} ORDER BY rowid")
            assert dst.sql(f"SELECT {cols} FROM {table} ORDER BY rowid") == rows, table
            assert r.json["copied"][table] == len(rows)
        assert r.json["copied"]["requests"] == 3 and r.json["copied"]["ledger"] == 1
        # the same requests, the same answers, and the work continues on PostgreSQL
        shown = dst("show", ids["done"], "--json")
        assert shown.json["state"] == "completed" and shown.json["reply"] == "an answer"
        retry = dst.send(ids["alice"], "bob", "queued work", request_id=ids["queued"])
        assert retry.code == 0 and retry.json["duplicate"] is True
        assert dst("claim", "--id", ids["queued"], "--json", env=ids["bob"]).code == 0
        again = dst("claim", "--attempt", ids["attempt"], "--json", env=ids["bob"])
        assert again.code == 4 and ids["done"] in again.err and "completed" in again.err
        replay = dst("once", "--key", "k1", "--", "sh", "-c", "echo out; echo err >&2")
        assert (replay.code, replay.out) == (0, "out\n")  # replayed, not run again
    finally:
        pg_cluster.drop(name)


def test_db_copy_refuses_a_target_that_holds_relay_data_and_changes_nothing(pg, tmp_path):
    pg.join("alice")
    src = Relay(tmp_path / "other-home")
    _populate(src)
    before = pg.snapshot()
    r = src("db", "copy", "--to", pg.url, "--json")
    assert (r.code, r.error["code"]) == (4, "state_conflict")
    assert "already holds relay data" in r.error["message"]
    assert pg.snapshot() == before


def test_db_copy_is_all_or_nothing(pg_cluster, tmp_path):
    src = Relay(tmp_path / "home")
    _populate(src)
    # a row PostgreSQL cannot store (a NUL in text), in the last table copied
    src.sql("UPDATE sessions SET agent_session_id = 'a' || char(0) || 'b' WHERE peer = 'bob'")
    name, url = pg_cluster.fresh(template="template0")
    try:
        r = src("db", "copy", "--to", url, "--json")
        assert r.code != 0
        dst = Relay(tmp_path / "home", url)
        counts = {t: dst.sql(f"SELECT count(*) FROM {t}")[0][0] for t in _tables(src)}
        assert set(counts.values()) == {0}, counts
    finally:
        pg_cluster.drop(name)


def test_db_copy_needs_a_postgres_url_and_a_relay_db(tmp_path):
    src = Relay(tmp_path / "home")
    r = src("db", "copy", "--to", "mysql://x/y", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error")
    r = src("db", "copy", "--to", "postgresql://x@/y?host=/nonexistent", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error")
    assert not src.home.exists()


# ------------------------------------------------------------------ a server restart
def _restart(server) -> None:
    server._run(
        [
            str(server.bin / "pg_ctl"),
            "-D",
            str(server.data),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
            "-l",
            str(server.log),
        ]
    )


def test_a_wait_and_a_running_once_outlive_a_server_restart(tcp_server, tmp_path):
    """design.md §13: a long call reconnects between transactions; a restart while it
    sleeps ends neither the wait nor the recording of a command's outcome."""
    relay = Relay(tmp_path / "h", tcp_server.url("relay", host="127.0.0.1", password=True))
    alice = relay.join("alice", "--lease", "1h")
    bob = relay.join("bob", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "bob", "x", request_id=rid).code == 0
    assert relay("claim", "--id", rid, "--json", env=bob).code == 0
    waiter = relay.popen("wait", rid, "--timeout", "60", "--json", env=alice)
    marker = tmp_path / "started"
    once = relay.popen(
        "once",
        "--key",
        "across-restart",
        "--json",
        "--",
        "sh",
        "-c",
        f"touch {marker}; sleep 4; echo finished",
    )
    import time

    end = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert marker.exists()
    time.sleep(0.5)  # the waiter is blocked by now
    _restart(tcp_server)
    assert relay("reply", rid, "after the restart", "--json", env=bob).code == 0
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    assert json.loads(out)["reply"] == "after the restart"
    out, err = once.communicate(timeout=90)
    assert once.returncode == 0, err
    shown = relay("ledger", "show", "across-restart", "--json").json
    assert shown["state"] == "succeeded" and shown["stdout"] == "finished\n"
    assert PASSWORD_FREE((out + err).decode())


def PASSWORD_FREE(text: str) -> bool:  # noqa: N802 - reads as a sentence in the assert
    from urllib.parse import quote

    return SECRET not in text and quote(SECRET, safe="") not in text


def test_libpq_conventions_apply_pgpassword_pgpass_and_pg_variables(tcp_server, tmp_path):
    """design.md §13: the URL goes to libpq as it is: PG* variables and ~/.pgpass work."""
    bare = f"postgresql://postgres@127.0.0.1:{tcp_server.port}/relay"
    relay = Relay(tmp_path / "h", bare)
    r = relay("peers", "list", "--json", env={"PGPASSWORD": SECRET})
    assert r.code == 0, r.err
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(
        f"127.0.0.1:{tcp_server.port}:relay:postgres:"
        + SECRET.replace("\\", "\\\\").replace(":", "\\:")
        + "\n"
    )
    pgpass.chmod(0o600)
    r = relay("peers", "list", "--json", env={"PGPASSFILE": str(pgpass)})
    assert r.code == 0, r.err
    # nothing but the scheme in the URL: host, port, user, database from PG* variables
    r = Relay(tmp_path / "h", "postgresql://")(
        "peers",
        "list",
        "--json",
        env={
            "PGHOST": "127.0.0.1",
            "PGPORT": str(tcp_server.port),
            "PGUSER": "postgres",
            "PGDATABASE": "relay",
            "PGPASSFILE": str(pgpass),
        },
    )
    assert r.code == 0, r.err
    r = relay("peers", "list", "--json", env={"PGPASSFILE": str(tmp_path / "none")})
    assert (r.code, r.error["code"]) == (7, "storage_error")  # no password: refused
