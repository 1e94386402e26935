"""SQL for the side-effect ledger of `relay once` (design.md §10)."""

from __future__ import annotations

from .tables import LEDGER, LEDGER_LISTED

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Iterable

if TYPE_CHECKING:
    from .api import Row, Statements


def _in(values: Iterable[str]) -> str:
    """``IN (?, ...)`` for ``values``, passed as parameters (a vocabulary of the domain's,
    never copied into the statement)."""
    return f"IN ({', '.join('?' for _ in values)})"


class LedgerSQL:
    db: Statements

    def get_ledger(self, key: str) -> Row | None:
        return self.db.one("SELECT * FROM ledger WHERE key = ?", (key,))

    def insert_ledger(self, values: dict[str, Any]) -> None:
        cols = LEDGER.check_insert(values)
        self.db.execute(
            f"INSERT INTO ledger ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
            [values[c] for c in cols],
        )

    def update_ledger(self, key: str, values: dict[str, Any]) -> None:
        cols = LEDGER.check_update(values)
        self.db.execute(
            f"UPDATE ledger SET {', '.join(f'{c} = ?' for c in cols)} WHERE key = ?",
            [values[c] for c in cols] + [key],
        )

    def delete_ledger(self, key: str) -> None:
        self.db.execute("DELETE FROM ledger WHERE key = ?", (key,))

    def list_ledger(self, states: list[str] | None = None) -> list[Row]:
        """Entries without their captured output, most recently changed first."""
        cols = ", ".join(LEDGER_LISTED)
        if states:
            marks = ", ".join("?" for _ in states)
            return self.db.all(
                f"SELECT {cols} FROM ledger WHERE state IN ({marks}) ORDER BY updated_at DESC, key",
                list(states),
            )
        return self.db.all(f"SELECT {cols} FROM ledger ORDER BY updated_at DESC, key")

    # Retention: a final entry's row goes ``tomb_cutoff`` after it reached its state
    # (``updated_at``); before that, from ``body_cutoff`` on, only its captured output is
    # dropped. Both work in batches (``limit`` rows) so the write lock is held briefly.
    # ``final`` is the domain's list of final states (design.md §10), passed as parameters.
    @staticmethod
    def _doomed(final: tuple[str, ...]) -> str:
        return f"state {_in(final)} AND updated_at < ?"

    # (an entry has captured output once a run was recorded: stdout_bytes is set)
    @staticmethod
    def _trimmable(final: tuple[str, ...]) -> str:
        return (
            f"state {_in(final)} AND output_pruned_at IS NULL "
            "AND stdout_bytes IS NOT NULL AND updated_at < ? AND updated_at >= ?"
        )

    def ledger_prune_counts(
        self, final: tuple[str, ...], body_cutoff: int, tomb_cutoff: int
    ) -> tuple[int, dict[str, int]]:
        """(entries whose output would be dropped, {state: entries that would be removed})."""
        rows = self.db.all(
            f"SELECT state, count(*) FROM ledger WHERE {self._doomed(final)} "
            "GROUP BY state ORDER BY state",
            [*final, tomb_cutoff],
        )
        trim = self.db.scalar(
            f"SELECT count(*) FROM ledger WHERE {self._trimmable(final)}",
            [*final, body_cutoff, tomb_cutoff],
        )
        return trim, {r[0]: r[1] for r in rows}

    def remove_ledger_tombstones(
        self, final: tuple[str, ...], tomb_cutoff: int, limit: int
    ) -> dict[str, int]:
        """Delete up to ``limit`` final entries that reached their state before the cutoff."""
        rows = self.db.all(
            f"SELECT key, state FROM ledger WHERE {self._doomed(final)} LIMIT ?",
            [*final, tomb_cutoff, limit],
        )
        counts: dict[str, int] = {}
        for r in rows:
            self.db.execute("DELETE FROM ledger WHERE key = ?", (r[0],))
            counts[r[1]] = counts.get(r[1], 0) + 1
        return counts

    def prune_ledger_output(
        self, final: tuple[str, ...], now: int, body_cutoff: int, tomb_cutoff: int, limit: int
    ) -> int:
        """Drop the captured output of up to ``limit`` finished entries (kept: the rest)."""
        cur = self.db.execute(
            "UPDATE ledger SET stdout = NULL, stderr = NULL, output_pruned_at = ? "
            f"WHERE key IN (SELECT key FROM ledger WHERE {self._trimmable(final)} LIMIT ?)",
            [now, *final, body_cutoff, tomb_cutoff, limit],
        )
        return cur.rowcount
