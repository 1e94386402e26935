"""SQL for the Claude Code hook's bookkeeping (design.md §12): the Stop-block count per session."""

from __future__ import annotations

import json
from sqlite3 import Row


class HookSQL:
    db: object  # Connection

    def get_hook_state(self, session_id: str) -> Row | None:
        """The hook's state for one relay session (``sessions.id``), or None."""
        return self.db.one("SELECT * FROM hook_state WHERE session_id = ?", (session_id,))

    def hook_blocked_ids(self, session_id: str) -> list[str]:
        row = self.get_hook_state(session_id)
        if row is None or not row["blocked_ids"]:
            return []
        try:
            ids = json.loads(row["blocked_ids"])
        except ValueError:
            return []
        return [str(i) for i in ids] if isinstance(ids, list) else []

    def put_hook_state(self, session_id: str, stop_blocks: int, blocked_ids: list[str],
                       now: int) -> None:
        self.db.execute(
            "INSERT INTO hook_state (session_id, stop_blocks, blocked_ids, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "stop_blocks = excluded.stop_blocks, blocked_ids = excluded.blocked_ids, "
            "updated_at = excluded.updated_at",
            (session_id, stop_blocks, json.dumps(blocked_ids), now),
        )

    def session_for_agent(self, agent_session_id: str) -> Row | None:
        """The relay session bound to a Claude Code session: an active one first, else the
        newest (a /resume can bind a second relay session to the same ``session_id``)."""
        return self.db.one(
            "SELECT * FROM sessions WHERE agent_session_id = ? "
            "ORDER BY state = 'active' DESC, created_at DESC, rowid DESC LIMIT 1",
            (agent_session_id,),
        )
