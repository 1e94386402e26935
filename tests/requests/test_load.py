"""Small samples of the load and wake-up runs (full sizes: python -m bench load / latency).

Every call is a real relay process, so the samples are kept small (~100 ms per call).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import latency, load  # noqa: E402


def _quiet(*a):
    pass


def test_concurrent_full_cycles_lose_and_duplicate_nothing():
    res = load.cycles(workers=3, n=3, log=_quiet)
    assert res["problems"] == []
    assert res["requests"] == 9


def test_concurrent_retries_of_the_same_ids_make_one_row_each():
    res = load.dedupe(workers=4, ids=6, change=0.4, seed=3, log=_quiet)
    assert res["problems"] == []
    assert res["sends"] == 24
    assert res.get("changed content: request_id_conflict", 0) > 0


def test_wakeup_latency_sample():
    r1 = latency.reply_to_wait(3, log=_quiet)
    r2 = latency.send_to_claim(3, log=_quiet)
    for r in (r1, r2):
        assert r["trials"] == 3
        # the 100 ms median goal is checked by `python -m bench latency` (200 trials);
        # here only a clear failure on a busy CI machine counts
        assert r["median_ms"] < 500, r


def test_concurrent_full_cycles_on_postgres_lose_and_duplicate_nothing(pg_cluster):
    """The PostgreSQL mode (design.md §13; the full run: python -m bench load --netns)."""
    from bench import common

    name, url = pg_cluster.fresh()
    common.DATABASE_URL = url
    try:
        res = load.cycles(workers=3, n=3, log=_quiet)
    finally:
        common.DATABASE_URL = None
        pg_cluster.drop(name)
    assert res["problems"] == []
    assert res["requests"] == 9
