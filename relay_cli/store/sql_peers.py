"""SQL for peers and sessions."""

from __future__ import annotations

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)


if TYPE_CHECKING:
    from .api import Row, Statements
    from .dialect import Dialect


class PeersSQL:
    db: Statements
    _sql: type[Dialect]

    # peers -------------------------------------------------------------------------
    def get_peer(self, name: str) -> Row | None:
        return self.db.one("SELECT * FROM peers WHERE name = ?", (name,))

    def insert_peer(self, name: str, kind: str, now: int) -> None:
        self.db.execute(
            "INSERT INTO peers (name, kind, created_at) VALUES (?, ?, ?)", (name, kind, now)
        )

    def set_peer_kind(self, name: str, kind: str) -> None:
        self.db.execute("UPDATE peers SET kind = ? WHERE name = ?", (kind, name))

    def touch_peer(self, name: str, now: int) -> None:
        self.db.later("UPDATE peers SET last_seen_at = ? WHERE name = ?", (now, name))

    def set_hook_seen(self, name: str, now: int) -> None:
        self.db.execute("UPDATE peers SET hook_seen_at = ? WHERE name = ?", (now, name))

    def list_peers(self) -> list[Row]:
        return self.db.all("SELECT * FROM peers ORDER BY name")

    def peer_names(self) -> list[str]:
        return [r[0] for r in self.db.all("SELECT name FROM peers ORDER BY name")]

    # sessions ----------------------------------------------------------------------
    def get_session(self, session_id: str) -> Row | None:
        return self.db.one("SELECT * FROM sessions WHERE id = ?", (session_id,))

    def session_by_token_hash(self, token_hash: str) -> Row | None:
        return self.db.one("SELECT * FROM sessions WHERE token_hash = ?", (token_hash,))

    def active_session(self, peer: str) -> Row | None:
        return self.db.one(
            "SELECT * FROM sessions WHERE peer = ? AND state = 'active' "
            "ORDER BY created_at DESC LIMIT 1",
            (peer,),
        )

    def newest_session(self, peer: str) -> Row | None:
        """The peer's newest session, whatever its state."""
        return self.db.one(
            "SELECT * FROM sessions WHERE peer = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (peer,),
        )

    def newer_session_exists(self, session: Row) -> bool:
        return (
            self.db.one(
                "SELECT 1 FROM sessions WHERE peer = ? AND id != ? "
                "AND (created_at > ? OR (created_at = ? AND rowid > "
                "(SELECT rowid FROM sessions WHERE id = ?))) LIMIT 1",
                (
                    session["peer"],
                    session["id"],
                    session["created_at"],
                    session["created_at"],
                    session["id"],
                ),
            )
            is not None
        )

    def insert_session(
        self,
        session_id: str,
        peer: str,
        token_hash: str,
        now: int,
        lease_seconds: int,
        agent_session_id: str | None = None,
    ) -> None:
        self.db.execute(
            "INSERT INTO sessions (id, peer, token_hash, state, created_at, lease_seconds, "
            "lease_expires_at, agent_session_id) VALUES (?, ?, ?, 'active', ?, ?, ?, ?)",
            (
                session_id,
                peer,
                token_hash,
                now,
                lease_seconds,
                now + lease_seconds * 1000,
                agent_session_id,
            ),
        )

    def end_session(self, session_id: str, state: str, at: int) -> None:
        self.db.execute(
            "UPDATE sessions SET state = ?, ended_at = ?, waiting_until = NULL "
            "WHERE id = ? AND state = 'active'",
            (state, at, session_id),
        )

    def renew_session(self, session_id: str, lease_expires_at: int) -> None:
        self.db.later(
            f"UPDATE sessions SET lease_expires_at = {self._sql.greatest}(lease_expires_at, ?) "
            "WHERE id = ? AND state = 'active'",
            (lease_expires_at, session_id),
        )

    def set_session_agent_id(self, session_id: str, agent_session_id: str | None) -> None:
        self.db.execute(
            "UPDATE sessions SET agent_session_id = ? WHERE id = ?", (agent_session_id, session_id)
        )

    def set_notices_batch(self, session_id: str | None, peer: str, batch: str, at: int) -> None:
        """The batch of the latest `notices` call of this session, or of this peer for a
        caller without one (design.md §6)."""
        if session_id is not None:
            self.db.execute(
                "UPDATE sessions SET notices_batch = ?, notices_at = ? WHERE id = ?",
                (batch, at, session_id),
            )
        else:
            self.db.execute(
                "UPDATE peers SET notices_batch = ?, notices_at = ? WHERE name = ?",
                (batch, at, peer),
            )

    def mark_claims_overlap(self, session_id: str, at: int) -> None:
        """This session took a claim while it held another (design.md §6): the first time
        is kept."""
        self.db.execute(
            "UPDATE sessions SET claims_overlap_at = ? WHERE id = ? AND claims_overlap_at IS NULL",
            (at, session_id),
        )

    def set_waiting(self, session_id: str, until: int | None) -> None:
        self.db.execute("UPDATE sessions SET waiting_until = ? WHERE id = ?", (until, session_id))

    def peer_is_polling(self, peer: str, now: int) -> bool:
        return (
            self.db.one(
                "SELECT 1 FROM sessions WHERE peer = ? AND state = 'active' "
                "AND waiting_until > ? LIMIT 1",
                (peer, now),
            )
            is not None
        )

    def due_sessions(self, now: int, limit: int) -> list[Row]:
        return self.db.all(
            "SELECT * FROM sessions WHERE state = 'active' AND lease_expires_at <= ? "
            "ORDER BY lease_expires_at, rowid LIMIT ?",
            (now, limit),
        )

    def next_session_deadline(self) -> int | None:
        value: int | None = self.db.scalar(
            "SELECT min(lease_expires_at) FROM sessions WHERE state = 'active'"
        )
        return value
