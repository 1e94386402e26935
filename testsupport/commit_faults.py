"""A fault the tests control: the connection drops at COMMIT, after the server committed
(design.md §13). The store's write transaction commits, then raises
``database_unavailable`` as a lost answer does, so a test can check what a retry with
the same id or key is answered from."""

from __future__ import annotations

import contextlib

from relay_cli.core.errors import RelayError
from relay_cli.store.base import SQLStore as Store


@contextlib.contextmanager
def answer_lost_after_commit(monkeypatch, which=lambda n: n == 1):
    """While active, the write transactions whose number (1, 2, …, counted from here)
    ``which`` picks commit and then fail with database_unavailable. Yields the list of the
    numbers that were cut."""
    real = Store.transaction
    count = [0]
    cut: list[int] = []

    @contextlib.contextmanager
    def transaction(self, write: bool = True):
        with real(self, write) as tx:
            yield tx
        if write:
            count[0] += 1
            if which(count[0]):
                cut.append(count[0])
                raise RelayError(
                    "database_unavailable",
                    "the connection to the database "
                    "was lost at COMMIT; the commit outcome is unknown",
                )

    monkeypatch.setattr(Store, "transaction", transaction)
    try:
        yield cut
    finally:
        monkeypatch.setattr(Store, "transaction", real)
