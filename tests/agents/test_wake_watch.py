"""The wake waiter's sleep on SQLite (agents/wake_watch.py, design.md §12): it ends when
relay.db's files change, looks again on short steps just after, and otherwise sleeps its
interval. The clock and the wait are injected; the real inotify is used only to see which
changes end a sleep (a sleep that should end at once is given HANG seconds: a broken one
hangs the test, nothing is timed)."""

from __future__ import annotations

import os
import struct
import sys
from types import SimpleNamespace

import pytest

from relay_cli.agents import wake_watch
from relay_cli.agents.wake_watch import (
    BURST_S,
    FIRST_STEP_S,
    IN_MODIFY,
    IN_Q_OVERFLOW,
    MAX_STEP_S,
    FileWatch,
    changed_names,
)

HANG = 20


def events(*items: tuple[int, str]) -> bytes:
    """inotify_event records as the kernel writes them (names padded with NULs)."""
    out = b""
    for mask, name in items:
        raw = name.encode() + b"\0" * (16 - len(name) % 16) if name else b""
        out += struct.pack("iIII", 1, mask, 0, len(raw)) + raw
    return out


def test_event_records_are_read_with_their_names_and_an_overflow_is_seen():
    assert changed_names(events((IN_MODIFY, "relay.db-wal"), (IN_MODIFY, "notes"))) == (
        ["relay.db-wal", "notes"],
        False,
    )
    assert changed_names(events((IN_Q_OVERFLOW, ""))) == ([""], True)
    assert changed_names(b"") == ([], False)


class Scripted:
    """A FileWatch whose descriptor is a pipe: ``event(name)`` makes it readable, and the
    wait records each timeout it was given (answering at once from the pipe's state)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.timeouts: list[float] = []
        self.watch = FileWatch(
            self.r, ("relay.db", "relay.db-wal"), wait=self._wait, monotonic=lambda: self.now
        )

    def _wait(self, fd: int, seconds: float) -> bool:
        self.timeouts.append(round(seconds, 6))
        import select

        return bool(select.select([fd], [], [], 0)[0])

    def event(self, name: str) -> None:
        os.write(self.w, events((IN_MODIFY, name)))

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)


@pytest.fixture
def scripted():
    s = Scripted()
    yield s
    s.close()


def test_without_an_event_the_sleep_is_the_whole_interval(scripted):
    assert scripted.watch.sleep(1.0) is False
    assert scripted.watch.sleep(0.4) is False
    assert scripted.timeouts == [1.0, 0.4]


def test_a_change_of_the_database_ends_the_sleep_and_the_next_sleeps_are_short(scripted):
    scripted.event("relay.db-wal")
    assert scripted.watch.sleep(1.0) is True  # look at data_version now
    # The commit may not be visible yet (SQLite publishes it after its fsync): look again
    # on short steps that grow, never past MAX_STEP_S, until BURST_S has passed.
    steps = []
    while scripted.now < 100.0 + BURST_S:
        assert scripted.watch.sleep(1.0) is False
        steps.append(scripted.timeouts[-1])
        scripted.now += steps[-1]
    assert steps[0] == FIRST_STEP_S
    full = steps[:-1]  # (the last one is cut short where the burst ends)
    assert full == sorted(full) and max(steps) <= MAX_STEP_S
    assert len(steps) < 25  # a few looks, not a busy loop
    scripted.watch.sleep(1.0)
    assert scripted.timeouts[-1] == 1.0  # the burst is over: the whole interval again


def test_a_new_event_during_a_burst_starts_it_again(scripted):
    scripted.event("relay.db")
    assert scripted.watch.sleep(1.0) is True
    for _ in range(6):
        scripted.watch.sleep(1.0)
        scripted.now += scripted.timeouts[-1]
    assert scripted.timeouts[-1] > FIRST_STEP_S
    scripted.event("relay.db-wal")
    assert scripted.watch.sleep(1.0) is True
    scripted.watch.sleep(1.0)
    assert scripted.timeouts[-1] == FIRST_STEP_S


def test_a_change_of_another_file_in_the_directory_does_not_count(scripted):
    scripted.event("relay.env")
    scripted.event("relay.db-journal-other")
    assert scripted.watch.sleep(1.0) is False
    scripted.watch.sleep(1.0)
    assert scripted.timeouts == [1.0, 1.0]  # (and no burst)


def test_a_sleep_of_nothing_only_reads_what_is_pending(scripted):
    assert scripted.watch.sleep(0.0) is False
    scripted.event("relay.db-wal")
    assert scripted.watch.sleep(0.0) is True
    assert scripted.timeouts == []  # never waited


# ------------------------------------------------------------------- the real inotify
@pytest.fixture
def watched(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    watch = wake_watch.watch_database(tmp_path / "relay.db")
    if watch is None:
        pytest.skip("no inotify here")
    yield tmp_path, watch
    watch.close()
    wake_watch._close_earlier()


def test_a_write_to_the_wal_ends_a_sleep(watched):
    home, watch = watched
    (home / "relay.db-wal").write_bytes(b"frame")
    assert watch.sleep(HANG) is True


def test_the_database_file_created_or_written_ends_a_sleep(watched):
    home, watch = watched
    with open(home / "relay.db", "ab") as f:
        f.write(b"page")
    assert watch.sleep(HANG) is True


def test_another_file_beside_the_database_does_not_end_a_sleep(watched):
    home, watch = watched
    (home / "relay.db-wal.bak").write_bytes(b"x")
    (home / "notes.txt").write_bytes(b"x")
    assert watch.sleep(0.0) is False


def test_a_closed_watch_is_removed_at_once_and_its_descriptor_closed_by_the_next(watched):
    home, watch = watched
    fd = watch.fd
    watch.close()
    watch.close()  # twice is harmless
    assert watch.fd == -1 and wake_watch._closing == [fd]
    again = wake_watch.watch_database(home / "relay.db")
    assert again is not None and wake_watch._closing == []
    again.close()


def test_only_sqlites_relay_db_is_watched(tmp_path):
    pg = SimpleNamespace(backend="postgresql")
    assert wake_watch.open_watch(pg) is None
    read_only = SimpleNamespace(
        backend="sqlite", read_only=True, db=SimpleNamespace(path=tmp_path / "relay.db")
    )
    assert wake_watch.open_watch(read_only) is None
