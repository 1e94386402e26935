"""SQL for the side-effect ledger of `relay once` (SPEC §10)."""

from __future__ import annotations

from sqlite3 import Row

# Columns a caller may set through ``update_ledger`` (never ``key``).
_LEDGER_COLUMNS = frozenset({
    "fingerprint", "argv", "cwd", "state", "idempotent", "approve", "runs", "pid",
    "process_start", "child_pid", "child_start", "host", "created_at", "updated_at",
    "started_at", "finished_at", "exit_code", "signal", "stdout", "stderr", "stdout_bytes",
    "stderr_bytes", "decision", "decided_by", "decided_at", "decision_note", "resolution",
    "resolved_by", "resolved_at", "resolution_note",
})

# States whose entries `prune` may remove: nothing is running or waiting for a person.
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
                "resolved_at, resolution_note")
        if states:
            marks = ", ".join("?" for _ in states)
            return self.db.all(
                f"SELECT {cols} FROM ledger WHERE state IN ({marks}) "
                "ORDER BY updated_at DESC, key", list(states),
            )
        return self.db.all(f"SELECT {cols} FROM ledger ORDER BY updated_at DESC, key")

    def prunable_ledger_counts(self, cutoff_ms: int) -> dict[str, int]:
        marks = ", ".join("?" for _ in LEDGER_FINAL_STATES)
        rows = self.db.all(
            f"SELECT state, count(*) FROM ledger WHERE state IN ({marks}) AND updated_at < ? "
            "GROUP BY state ORDER BY state", [*LEDGER_FINAL_STATES, cutoff_ms],
        )
        return {r[0]: r[1] for r in rows}

    def prune_ledger(self, cutoff_ms: int) -> int:
        marks = ", ".join("?" for _ in LEDGER_FINAL_STATES)
        cur = self.db.execute(
            f"DELETE FROM ledger WHERE state IN ({marks}) AND updated_at < ?",
            [*LEDGER_FINAL_STATES, cutoff_ms],
        )
        return cur.rowcount
