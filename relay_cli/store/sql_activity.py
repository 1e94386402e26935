"""SQL for what each session's hooks last showed (design.md §19): its activity columns in
``sessions``, the alerts owed for them, the claimed work each session holds, and the
settings a person stores in the home (`relay notify set`)."""

from __future__ import annotations

from .sql_requests import CLAIMED_STATES
from .tables import SESSIONS

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from .api import Row, Statements
    from .dialect import Dialect

ACTIVITY_COLUMNS = tuple(c for c in SESSIONS.columns if c.startswith("activity"))


class ActivitySQL:
    db: Statements
    _sql: type[Dialect]

    def set_activity(self, session_id: str, fields: dict[str, Any]) -> None:
        """Set some of a session's ``activity*`` columns."""
        cols = SESSIONS.check_update(fields)
        bad = [c for c in cols if c not in ACTIVITY_COLUMNS]
        if bad:
            raise ValueError(f"not activity columns: {bad}")
        sets = ", ".join(f"{c} = ?" for c in cols)
        self.db.execute(
            f"UPDATE sessions SET {sets} WHERE id = ?", [*(fields[c] for c in cols), session_id]
        )

    def take_owed_alerts(self, limit: int) -> list[Row]:
        """Up to ``limit`` sessions whose alert is owed, marked sent (one writer takes each:
        the caller holds the write transaction)."""
        rows = self.db.all(
            "SELECT * FROM sessions WHERE activity_alert = 'owed' "
            "ORDER BY activity_since, rowid LIMIT ?",
            (limit,),
        )
        if rows:
            import json

            self.db.execute(
                "UPDATE sessions SET activity_alert = 'sent' WHERE activity_alert = 'owed' "
                f"AND id IN ({self._sql.json_values('?')})",
                (json.dumps([r["id"] for r in rows]),),
            )
        return rows

    def sessions_for_activity(self) -> list[Row]:
        """Every active session, and the newest session of each peer that has none, with
        the peer's kind: what the activity snapshot reads (one pass; the peers with no
        session at all are not here)."""
        return self.db.all(
            "SELECT s.*, p.kind FROM sessions s JOIN peers p ON p.name = s.peer "
            "WHERE s.state = 'active' OR (NOT EXISTS (SELECT 1 FROM sessions a "
            "WHERE a.peer = s.peer AND a.state = 'active') AND s.rowid = "
            "(SELECT max(n.rowid) FROM sessions n WHERE n.peer = s.peer)) "
            "ORDER BY s.peer, s.created_at, s.rowid"
        )

    def claimed_work(self) -> list[Row]:
        """Every claimed, unfinished request (id, claim_session, state, from_peer, to_peer,
        updated_at), oldest first: the work each session holds."""
        return self.db.all(
            "SELECT id, claim_session, state, from_peer, to_peer, updated_at FROM requests "
            f"WHERE claim_session IS NOT NULL AND state IN {CLAIMED_STATES} "
            "ORDER BY created_at, rowid"
        )

    def work_left_by(self, session_id: str) -> list[Row]:
        """The requests a session held when it went: those its end (or its lease) made
        delivery_unknown and that nobody has settled yet."""
        return self.db.all(
            "SELECT id, state FROM requests WHERE claim_session = ? "
            "AND state = 'delivery_unknown' ORDER BY created_at, rowid",
            (session_id,),
        )

    # ------------------------------------------------------------------ settings
    def get_setting(self, key: str) -> str | None:
        value: str | None = self.db.scalar("SELECT value FROM settings WHERE key = ?", (key,))
        return value

    def put_setting(self, key: str, value: str, now: int) -> None:
        self.db.execute(
            "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at",
            (key, value, now),
        )

    def delete_setting(self, key: str) -> bool:
        return self.db.execute("DELETE FROM settings WHERE key = ?", (key,)).rowcount > 0
