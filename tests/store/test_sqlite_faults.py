"""Faults (design.md §2, §7, §9): full disk, read-only state directory, a lock held past the
busy timeout, and a -wal file left by a killed writer. The full set of fill levels:
python -m bench faults."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import faults  # noqa: E402


def _mounting(fn, *args):
    if os.geteuid() != 0:
        pytest.skip("making a small tmpfs needs root; this run is not root")
    try:
        return fn(*args)
    except faults.MountUnavailable as e:
        pytest.skip(str(e))


def test_full_disk_is_storage_error_and_keeps_old_data():
    res = _mounting(faults.full_disk, (0, 16384))
    assert res["problems"] == []
    assert all(
        c["results"][-1] == (7, "storage_error") or c["results"][-1] == [7, "storage_error"]
        for c in res["cases"]
    )


def test_read_only_state_directory():
    res = _mounting(faults.read_only)
    assert res["problems"] == []
    assert res["results"]["send"] == {"exit": 7, "error": "storage_error"}
    assert res["side_files"] == []  # no -wal/-shm to lean on
    assert res["results"]["show"]["exit"] == 0
    assert res["results"]["list"]["exit"] == 0
    assert res["results"]["list_due"] == {"exit": 7, "error": "storage_error"}


def test_lock_held_past_busy_timeout_is_busy_then_retry_succeeds():
    res = faults.busy()
    assert res["problems"] == []
    assert res["busy"]["exit"] == 75 and res["busy"]["error"] == "busy"
    assert res["busy"]["retryable"] is True
    assert res["retry"] == {"exit": 0, "duplicate": False}


def test_wal_left_by_a_killed_writer_is_recovered():
    res = faults.wal_recovery(15)
    assert res["problems"] == []
    assert res["committed_before_kill"] == 15
    assert res["recovered"] == 15
    assert res["wal_bytes_after_kill"] > 0
    assert res["requests_in_main_file_alone"] < 15
