"""A small sample of the crash-injection harness (the full run: python -m bench crash).

Each mutating command is started as a real relay process and killed with SIGKILL at a
random moment of its run; the database must then pass integrity_check, keep every request
a finished command accepted, hold one row per id, explain every state by its events, and
accept the command's retry (bench/crash.py has the rules).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import crash  # noqa: E402

TRIALS = 5


@pytest.mark.parametrize("command", crash.COMMANDS)
def test_sigkill_at_random_moments_breaks_no_promise(command, tmp_path):
    assert crash.available(command), f"`relay {command}` is not in relay --help"
    res = crash.run(
        [command], trials=TRIALS, seed=1234, root=tmp_path, log=lambda *a: None, calib_runs=1
    )
    r = res[command]
    assert r["trials"] == TRIALS
    assert r["problems"] == []


def test_the_checks_catch_a_state_its_events_do_not_explain(tmp_path):
    """The invariant checker itself must fail on a forged state (a test that can fail)."""
    import sqlite3

    from bench.common import check_db, join, new_id, relay

    home = tmp_path / "home"
    a = join(home, "a")
    join(home, "b")
    rid = new_id()
    assert relay(home, "send", "--to", "b", "--id", rid, "--json", "x", env=a).code == 0
    assert check_db(home, {rid}) == []
    db = sqlite3.connect(home / "relay.db")
    db.execute("UPDATE requests SET state = 'completed' WHERE id = ?", (rid,))
    db.commit()
    db.close()
    problems = check_db(home, {rid, new_id()})
    assert any("events end at queued" in p for p in problems)
    assert any("accepted requests missing" in p for p in problems)


@pytest.mark.parametrize("command", ["send", "claim", "once"])
def test_sigkill_on_postgres_breaks_no_promise(command, tmp_path, pg_cluster):
    """The PostgreSQL mode of the harness (design.md §13): each trial on its own database
    (the full run: python -m bench crash --postgres)."""
    res = crash.run(
        [command],
        trials=3,
        seed=4321,
        root=tmp_path,
        log=lambda *a: None,
        calib_runs=1,
        postgres=True,
    )
    r = res[command]
    assert r["trials"] == 3
    assert r["problems"] == []


def test_the_checks_catch_a_lost_request_on_postgres(tmp_path, pg_cluster):
    from bench import common

    name, url = pg_cluster.fresh()
    try:
        common.DATABASE_URL = url
        a = common.join(tmp_path / "home", "a")
        common.join(tmp_path / "home", "b")
        rid = common.new_id()
        assert (
            common.relay(tmp_path / "home", "send", "--to", "b", "--id", rid, "x", env=a).code == 0
        )
        assert common.check_db(tmp_path / "home", {rid}) == []
        with common.Target(tmp_path / "home") as db:
            db.rows("DELETE FROM requests WHERE id = ?", (rid,))
        problems = common.check_db(tmp_path / "home", {rid})
        assert any("accepted requests missing" in p for p in problems)
    finally:
        common.DATABASE_URL = None
        pg_cluster.drop(name)
