"""SQL for the side-effect ledger of `relay once` (design.md §10)."""

from __future__ import annotations

from sqlite3 import Row

# Columns a caller may set through ``update_ledger`` (never ``key``).
_LEDGER_COLUMNS = frozenset({
    "fingerprint", "argv", "cwd", "state", "idempotent", "approve", "runs", "pid",
    "process_start", "child_pid", "child_start", "host", "created_at", "updated_at",
    "started_at", "finished_at", "exit_code", "signal", "stdout", "stderr", "stdout_bytes",
    "stderr_bytes", "decision", "decided_by", "decided_at", "decision_note", "resolution",
    "resolved_by", "resolved_at", "resolution_note", "output_pruned_at",
})

# States whose entries `prune` may turn into tombstones and later remove: nothing is
# running or waiting for a person.
LEDGER_FINAL_STATES = ("succeeded", "failed", "denied", "forgotten")


class LedgerSQL:
    db: object  # Connection

    def get_ledger(self, key: str) -> Row | None:
        return self.db.one("SELECT * FROM ledger WHERE key = ?", (key,))

    def insert_ledger(self, values: dict) -> None:
        cols = sorted(values)
        unknown = set(cols) - _LEDGER_COLUMNS - {"key"}
        if unknown:
            raise ValueError(f"unknown ledger columns {sorted(unknown)}")
        self.db.execute(
            f"INSERT INTO ledger ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
            [values[c] for c in cols],
        )

    def update_ledger(self, key: str, values: dict) -> None:
        cols = sorted(values)
        unknown = set(cols) - _LEDGER_COLUMNS
        if unknown:
            raise ValueError(f"unknown ledger columns {sorted(unknown)}")
        self.db.execute(
            f"UPDATE ledger SET {', '.join(f'{c} = ?' for c in cols)} WHERE key = ?",
            [values[c] for c in cols] + [key],
        )

    def delete_ledger(self, key: str) -> None:
        self.db.execute("DELETE FROM ledger WHERE key = ?", (key,))

    def list_ledger(self, states: list[str] | None = None) -> list[Row]:
        """Entries without their captured output, most recently changed first."""
        cols = ("key, fingerprint, argv, cwd, state, idempotent, approve, runs, pid, "
                "process_start, child_pid, child_start, host, created_at, updated_at, "
                "started_at, finished_at, exit_code, signal, stdout_bytes, stderr_bytes, "
                "decision, decided_by, decided_at, decision_note, resolution, resolved_by, "
                "resolved_at, resolution_note, output_pruned_at")
        if states:
            marks = ", ".join("?" for _ in states)
            return self.db.all(
                f"SELECT {cols} FROM ledger WHERE state IN ({marks}) "
                "ORDER BY updated_at DESC, key", list(states),
            )
        return self.db.all(f"SELECT {cols} FROM ledger ORDER BY updated_at DESC, key")

    # Retention: a final entry's row goes ``tomb_cutoff`` after it reached its state
    # (``updated_at``); before that, from ``body_cutoff`` on, only its captured output is
    # dropped. Both work in batches (``limit`` rows) so the write lock is held briefly.
    _DOOMED = (f"state IN ({', '.join(repr(s) for s in LEDGER_FINAL_STATES)}) "
               "AND updated_at < ?")
    # (an entry has captured output once a run was recorded: stdout_bytes is set)
    _TRIMMABLE = (f"state IN ({', '.join(repr(s) for s in LEDGER_FINAL_STATES)}) "
                  "AND output_pruned_at IS NULL AND stdout_bytes IS NOT NULL "
                  "AND updated_at < ? AND updated_at >= ?")

    def ledger_prune_counts(self, body_cutoff: int, tomb_cutoff: int) -> tuple[int, dict]:
        """(entries whose output would be dropped, {state: entries that would be removed})."""
        rows = self.db.all(f"SELECT state, count(*) FROM ledger WHERE {self._DOOMED} "
                           "GROUP BY state ORDER BY state", [tomb_cutoff])
        trim = self.db.one(f"SELECT count(*) FROM ledger WHERE {self._TRIMMABLE}",
                           [body_cutoff, tomb_cutoff])[0]
        return trim, {r[0]: r[1] for r in rows}

    def remove_ledger_tombstones(self, tomb_cutoff: int, limit: int) -> dict[str, int]:
        """Delete up to ``limit`` final entries that reached their state before the cutoff."""
        rows = self.db.all(f"SELECT key, state FROM ledger WHERE {self._DOOMED} LIMIT ?",
                           [tomb_cutoff, limit])
        counts: dict[str, int] = {}
        for r in rows:
            self.db.execute("DELETE FROM ledger WHERE key = ?", (r[0],))
            counts[r[1]] = counts.get(r[1], 0) + 1
        return counts

    def prune_ledger_output(self, now: int, body_cutoff: int, tomb_cutoff: int,
                            limit: int) -> int:
        """Drop the captured output of up to ``limit`` finished entries (kept: the rest)."""
        cur = self.db.execute(
            "UPDATE ledger SET stdout = NULL, stderr = NULL, output_pruned_at = ? "
            f"WHERE key IN (SELECT key FROM ledger WHERE {self._TRIMMABLE} LIMIT ?)",
            [now, body_cutoff, tomb_cutoff, limit],
        )
        return cur.rowcount
