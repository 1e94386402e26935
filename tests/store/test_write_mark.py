"""The store's write mark (design.md §17): it moves when a write transaction of another
connection committed, and not when time passes or something is only read, so a reader
woken by PostgreSQL's safety poll knows whether anything was written."""

from __future__ import annotations

from conftest import new_id


def test_a_write_moves_the_mark_and_reads_and_time_do_not(relay):
    alice = relay.join("alice")
    relay.join("bob")
    store = relay.open_store()
    try:
        first = store.write_mark()
        assert relay("list", "--json").code == 0  # reads, in another connection
        assert relay("show", "--json", new_id()).code == 3
        store.data_version()  # (PostgreSQL's safety poll would move this one)
        assert store.write_mark() == first
        assert relay.send(alice, "bob", "a write").code == 0
        second = store.write_mark()
        assert second != first
        assert store.write_mark() == second
    finally:
        store.close()
