"""relay's data for a person's own tools (design.md §2, §4, §6): `relay db path`, the
read-only views, `relay export` and `relay prune --vacuum`."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DAY, at, new_id, refused

ESC = "\x1b]0;owned\x07\x1b[2J"  # a title rewrite and a screen clear

# relay.db's path, its views and VACUUM are about the local file (design.md §2); export and
# the refusals run on both backends (design.md §13).
on_file = pytest.mark.sqlite_only


def query(relay, sql: str, params=()) -> list[dict]:
    db = sqlite3.connect(relay.home / "relay.db")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(sql, params)]
    finally:
        db.close()


def some_requests(relay, alice, bob) -> dict[str, str]:
    """One request in each of several states, some with hostile text in detail."""
    ids = {k: new_id() for k in ("queued", "delivered", "completed", "failed", "rejected")}
    for state, rid in ids.items():
        assert relay.send(alice, "bob", f"job {state}", request_id=rid).code == 0
        if state != "queued":
            assert relay("claim", "--id", rid, "--json", env=bob).code == 0
    assert relay("reply", ids["completed"], "done", "--json", env=bob).code == 0
    assert relay("fail", ids["failed"], "--reason", "a|b\\c " + ESC, "--json", env=bob).code == 0
    assert (
        relay("reject", ids["rejected"], "--reason", '=HYPERLINK("x")', "--json", env=bob).code == 0
    )
    return ids


# ------------------------------------------------------------------ relay db path
@on_file
def test_db_path_prints_the_database_that_relay_uses(relay, pair):
    r = relay("db", "path")
    assert r.code == 0 and r.err == ""
    assert r.out == f"{relay.home / 'relay.db'}\n"
    assert relay("db", "path", "--json").json == {
        "path": str(relay.home / "relay.db"),
        "exists": True,
    }


@on_file
def test_db_path_of_a_home_not_created_yet_creates_nothing(relay):
    r = relay("db", "path")
    assert r.code == 0 and r.out == f"{relay.home / 'relay.db'}\n"
    assert "does not exist yet" in r.err
    assert relay("db", "path", "--json").json["exists"] is False
    assert not relay.home.exists()


@on_file
def test_db_path_is_absolute_for_a_relative_home(relay, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = relay("db", "path", "--home", "rel")
    assert r.code == 0 and r.out == f"{tmp_path / 'rel' / 'relay.db'}\n"


@on_file
def test_db_path_refuses_an_unsafe_home(relay, pair, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(relay.home)
    r = relay("db", "path", "--home", str(link), "--json")
    assert r.code == 7 and r.error["code"] == "unsafe_state_dir" and r.out == ""


@on_file
def test_sqlite_utils_reads_the_path_relay_prints(relay, pair):
    """The documented workflow: sqlite-utils comes installed with relay."""
    alice, bob = pair
    some_requests(relay, alice, bob)
    path = relay.proc("db", "path").out.strip()
    cli = Path(sys.executable).with_name("sqlite-utils")
    p = subprocess.run([str(cli), "tables", path, "--counts"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert {"table": "requests", "count": 5} in json.loads(p.stdout)
    p = subprocess.run([str(cli), "views", path], capture_output=True, text=True)
    assert {v["view"] for v in json.loads(p.stdout)} >= {
        "requests_view",
        "events_view",
        "peers_view",
        "ledger_view",
    }
    p = subprocess.run(
        [str(cli), "rows", path, "requests_view", "--csv"], capture_output=True, text=True
    )
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 6


@pytest.mark.postgres_only
def test_db_path_on_postgresql_is_refused_naming_the_database_without_its_password(relay, pair):
    secret = relay.url.replace("postgresql://", "postgresql://nobody:s3cret@", 1)
    err = refused(relay, "usage_error", "db", "path", env={"RELAY_DATABASE_URL": secret})
    assert "PostgreSQL database postgresql://nobody@" in err["message"]
    assert "s3cret" not in json.dumps(err)
    assert not (relay.home / "relay.db").exists()


# ------------------------------------------------------------------ the views
@on_file
def test_requests_view_is_the_request_object_with_readable_times(relay, pair):
    alice, bob = pair
    some_requests(relay, alice, bob)
    # times whose milliseconds differ, a day ahead (every lease lapses) and an hour back
    for offset in ("0.999", "86400.0005", "-3600.5"):
        assert relay.send(at(float(offset), {"RELAY_PEER": "carol"}), "bob", "x").code == 0
    listed = {r["id"]: r for r in relay("list", "--all", "--json").json["requests"]}
    view = query(relay, "SELECT * FROM requests_view")
    assert len(view) == len(listed) == 8
    for row in view:
        names = {"from": "from_peer", "to": "to_peer"}
        obj = {
            names.get(k, k): v
            for k, v in listed[row["id"]].items()
            if k not in ("detail", "authority", "user_approval")
        }
        obj["pruned"] = int(obj["pruned"])
        assert row == obj
        assert list(row) == list(obj)


@on_file
def test_events_and_peers_views_match_what_relay_prints(relay, pair):
    alice, bob = pair
    ids = some_requests(relay, alice, bob)
    shown = relay("show", ids["failed"], "--events", "--json").json["events"]
    view = query(
        relay, "SELECT * FROM events_view WHERE request_id = ? ORDER BY seq", (ids["failed"],)
    )
    assert [
        {k: e[k] for k in ("at", "from_state", "to_state", "reason", "actor")} for e in shown
    ] == [{k: v[k] for k in ("at", "from_state", "to_state", "reason", "actor")} for v in view]
    peers = {p["name"]: p for p in relay("peers", "list", "--json").json["peers"]}
    for row in query(relay, "SELECT * FROM peers_view"):
        assert row["session_id"] == peers[row["name"]]["session_id"]
        assert row["lease_expires_at"] == peers[row["name"]]["lease_expires_at"]
        assert row["last_seen_at"] == peers[row["name"]]["last_seen_at"]
    assert relay("peers", "leave", "--json", env=bob).code == 0
    assert query(relay, "SELECT session_id FROM peers_view WHERE name = 'bob'") == [
        {"session_id": None}
    ]


@on_file
def test_ledger_view_matches_ledger_show(relay):
    assert relay("once", "--key", "k1", "--", sys.executable, "-c", "print('hi')").code == 0
    entry = relay("ledger", "show", "k1", "--json").json
    (row,) = query(relay, "SELECT * FROM ledger_view")
    assert row["key"] == "k1" and row["state"] == "succeeded" == entry["state"]
    assert json.loads(row["argv"]) == entry["argv"]
    for key in ("created_at", "started_at", "finished_at"):
        assert row[key] == entry[key], key


@on_file
def test_views_hold_no_peer_free_text(relay, pair):
    alice, bob = pair
    some_requests(relay, alice, bob)
    relay.send(alice, "bob", "text " + ESC)
    assert relay("once", "--key", "k2", "--", "sh", "-c", "printf '\\033[2J'").code == 0
    for view in ("requests_view", "events_view", "peers_view", "ledger_view"):
        for row in query(relay, f"SELECT * FROM {view}"):
            for value in row.values():
                assert "\x1b" not in str(value) and "\x07" not in str(value), (view, row)


@on_file
def test_views_are_read_only(relay, pair):
    db = sqlite3.connect(relay.home / "relay.db")
    try:
        with pytest.raises(sqlite3.OperationalError, match="cannot modify"):
            db.execute("DELETE FROM requests_view")
    finally:
        db.close()


@on_file
def test_a_changed_or_dropped_view_is_restored_and_a_table_of_that_name_left_alone(relay, pair):
    db = sqlite3.connect(relay.home / "relay.db")
    db.execute("DROP VIEW requests_view")
    db.execute("CREATE VIEW requests_view AS SELECT 1 AS one")
    db.execute("DROP VIEW events_view")
    db.execute("DROP VIEW peers_view")
    db.execute("CREATE TABLE peers_view (mine TEXT)")
    db.commit()
    db.close()
    assert relay("list", "--json").code == 0
    cols = [r["name"] for r in query(relay, "PRAGMA table_info(requests_view)")]
    assert cols[:4] == ["id", "from_peer", "to_peer", "state"]
    assert query(relay, "SELECT type FROM sqlite_master WHERE name = 'events_view'") == [
        {"type": "view"}
    ]
    assert query(relay, "SELECT type FROM sqlite_master WHERE name = 'peers_view'") == [
        {"type": "table"}
    ]


@on_file
def test_a_database_from_before_the_views_gets_them_on_the_next_command(relay, pair):
    db = sqlite3.connect(relay.home / "relay.db")
    for view in ("requests_view", "events_view", "peers_view", "ledger_view"):
        db.execute(f"DROP VIEW {view}")
    db.commit()
    db.close()
    assert relay.proc("list").code == 0
    names = {r["name"] for r in query(relay, "SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert names == {"requests_view", "events_view", "peers_view", "ledger_view"}


# ------------------------------------------------------------------ relay export
def test_export_jsonl_is_the_request_objects_oldest_first(relay, pair):
    alice, bob = pair
    some_requests(relay, alice, bob)
    r = relay("export", "--format", "jsonl")
    assert r.code == 0, r.err
    lines = [json.loads(line) for line in r.out.splitlines()]
    listed = relay("list", "--all", "--json").json["requests"]
    assert lines == list(reversed(listed))
    assert relay("export").out == r.out  # jsonl is the default


def test_export_csv_has_every_field_with_cells_made_inert(relay, pair):
    alice, bob = pair
    ids = some_requests(relay, alice, bob)
    r = relay("export", "--format", "csv")
    assert r.code == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    rows = list(csv.DictReader(io.StringIO(r.out)))
    schema = relay("schema").json["request_object"]["always"]
    assert list(rows[0]) == schema
    by_id = {row["id"]: row for row in rows}
    assert by_id[ids["failed"]]["detail"] == "a|b\\c \\x1b]0;owned\\x07\\x1b[2J"
    assert by_id[ids["rejected"]]["detail"] == '\'=HYPERLINK("x")'  # not a formula
    assert by_id[ids["queued"]]["delivered_at"] == "" and by_id[ids["queued"]]["pruned"] == "false"
    shown = relay("show", ids["completed"], "--json").json
    assert by_id[ids["completed"]]["finished_at"] == shown["finished_at"]


def test_export_md_is_a_table_whose_cells_cannot_break_it(relay, pair):
    alice, bob = pair
    ids = some_requests(relay, alice, bob)
    r = relay("export", "--format", "md")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == (
        "| id | from | to | state | reason | created_at | finished_at | text_bytes | detail |"
    )
    assert lines[1] == "|---|---|---|---|---|---|---|---|---|"
    assert len(lines) == 2 + len(ids)
    failed = next(line for line in lines if line.startswith(f"| {ids['failed']} "))
    assert failed.endswith("| a\\|b\\\\c \\\\x1b]0;owned\\\\x07\\\\x1b[2J |")
    # every row has exactly the header's number of unescaped pipes
    for line in lines[2:]:
        assert line.replace("\\\\", "").replace("\\|", "").count("|") == 10, line
    assert "\x1b" not in r.out


def test_export_filters_by_state_and_since(relay, pair):
    alice, bob = pair
    old = new_id()
    assert relay.send(at(-3 * DAY, alice), "bob", "old", "--ttl", "7d", request_id=old).code == 0
    ids = some_requests(relay, alice, bob)
    got = [
        json.loads(x)["id"]
        for x in relay("export", "--state", "failed", "--state", "rejected").out.splitlines()
    ]
    assert got == [ids["failed"], ids["rejected"]]
    recent = [json.loads(x)["id"] for x in relay("export", "--since", "2d").out.splitlines()]
    assert old not in recent and len(recent) == len(ids)
    assert old in relay("export", "--since", "4d").out


def test_export_applies_due_transitions_first_and_changes_nothing_else(relay, pair):
    alice, _ = pair
    rid = new_id()
    assert relay.send(alice, "bob", "soon stale", "--ttl", "30s", request_id=rid).code == 0
    (obj,) = [json.loads(x) for x in relay("export", env=at(60)).out.splitlines()]
    assert obj["id"] == rid and obj["state"] == "expired"
    before = relay.snapshot()
    assert relay("export", "--format", "csv", env=at(120)).code == 0
    assert relay.snapshot() == before


def test_export_leaves_tombstones_out_like_list(relay, pair):
    alice, bob = pair
    some_requests(relay, alice, bob)
    fresh = new_id()
    assert (
        relay.send(at(40 * DAY, {"RELAY_PEER": "carol"}), "bob", "new", request_id=fresh).code == 0
    )
    assert relay("prune", "--json", env=at(40 * DAY)).json["requests_pruned"] == 5
    out = [json.loads(x) for x in relay("export", env=at(40 * DAY)).out.splitlines()]
    listed = relay("list", "--all", "--json", env=at(40 * DAY)).json["requests"]
    assert out == listed and [o["id"] for o in out] == [fresh]


@pytest.mark.parametrize(
    "args, code, error",
    [
        (["--format", "xml"], 2, "usage_error"),
        (["--state", "done"], 2, "usage_error"),
        (["--since", "0"], 2, "invalid_duration"),
        (["--since", "yesterday"], 2, "invalid_duration"),
    ],
)
def test_export_refuses_bad_input_and_changes_nothing(relay, pair, args, code, error):
    before = relay.snapshot()
    r = relay("export", *args, "--json")
    assert r.code == code and r.error["code"] == error and r.out == ""
    assert relay.snapshot() == before


# ------------------------------------------------------------------ prune --vacuum
def fill_and_finish(relay, alice, n=60, size=20000):
    for _ in range(n):
        assert relay.send(alice, "bob", "x" * size, "--ttl", "30s").code == 0


@on_file
def test_prune_vacuum_shrinks_the_file_and_reports_bytes(relay, pair):
    alice, _ = pair
    fill_and_finish(relay, alice)
    r = relay.proc("prune", "--vacuum", "--json", env=at(200 * DAY))
    assert r.code == 0, r.err
    doc = r.json
    assert doc["tombstones_removed"] == 60
    vac = doc["vacuum"]
    assert vac["bytes_after"] < vac["bytes_before"] / 4
    on_disk = sum(
        p.stat().st_size for p in relay.home.iterdir() if p.name in ("relay.db", "relay.db-wal")
    )
    assert on_disk == vac["bytes_after"]
    assert relay("list", "--json", env=at(200 * DAY)).code == 0


def test_prune_vacuum_with_dry_run_is_refused_and_changes_nothing(relay, pair):
    alice, _ = pair
    fill_and_finish(relay, alice, n=3, size=10)
    before = relay.snapshot()
    r = relay("prune", "--vacuum", "--dry-run", "--json", env=at(200 * DAY))
    assert r.code == 2 and r.error["code"] == "usage_error" and r.out == ""
    assert relay.snapshot() == before


@pytest.mark.postgres_only
def test_prune_vacuum_on_postgresql_is_refused_before_anything_is_pruned(relay, pair):
    alice, _ = pair
    fill_and_finish(relay, alice, n=3, size=10)
    err = refused(relay, "usage_error", "prune", "--vacuum", env=at(200 * DAY))
    assert "autovacuum" in err["message"]
    assert relay("prune", "--json", env=at(200 * DAY)).json["tombstones_removed"] == 3


@on_file
def test_prune_vacuum_on_a_terminal_fits_80_columns(relay, pair):
    alice, _ = pair
    fill_and_finish(relay, alice, n=5, size=5000)
    code, screen = relay.pty("prune", "--vacuum", env=at(200 * DAY))
    assert code == 0, screen
    lines = [ln for ln in screen.replace("\r", "").split("\n") if ln.strip()]
    assert any("database size" in ln and "(VACUUM)" in ln for ln in lines), screen
    import re

    visible = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in lines]
    assert all(len(ln) <= 80 for ln in visible), visible


def test_export_md_on_a_terminal_is_the_same_text(relay, pair):
    alice, bob = pair
    some_requests(relay, alice, bob)
    piped = relay.proc("export", "--format", "md").out
    code, screen = relay.pty("export", "--format", "md")
    assert code == 0
    screen = screen.replace("\r\n", "\n")
    assert screen == piped
