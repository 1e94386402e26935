"""SQL for the agent hooks' bookkeeping (design.md §12): the Stop-block count per session,
the request ids relay told the session about, the prompts relay itself injected, the wake
waiters, and the bounded reads of a peer's queue that the hooks use (never every row: a
hook must stay inside the runtime's timeout at any queue size)."""

from __future__ import annotations

import json
import sqlite3

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from .api import Row, Statements
    from .dialect import Dialect


def _id_list(raw: str | None) -> list[str]:
    if not raw:
        return []
    try:
        ids = json.loads(raw)
    except ValueError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


# Prefixes in hook_state.blocked_ids (design.md §12): a bare id was named to the session (a
# Stop block kept it going for that request, or a wake note announced it): no Stop block
# names it again; "pending:" ids are in a note queued into the runtime that has not been
# seen to arrive; "told:" ids were announced in the conversation (a listing, a Stop block,
# a wake note that reached it): no later text of the session names them again. An earlier
# relay wrote "listed:" (listed in a running turn's context): read as told.
PENDING = "pending:"
TOLD = "told:"
LISTED = "listed:"


class HookSQL:
    db: Statements
    _sql: type[Dialect]

    def hook_marks(self, session_id: str) -> dict[str, list[str]]:
        """{"named": [...], "pending": [...], "told": [...]} for one relay session."""
        out: dict[str, list[str]] = {"named": [], "pending": [], "told": []}
        for item in self._hook_raw_ids(session_id):
            if item.startswith(PENDING):
                out["pending"].append(item[len(PENDING) :])
            elif item.startswith((TOLD, LISTED)):
                out["told"].append(item.split(":", 1)[1])
            else:
                out["named"].append(item)
        return out

    def _hook_raw_ids(self, session_id: str) -> list[str]:
        row = self.get_hook_state(session_id)
        return [] if row is None else _id_list(row["blocked_ids"])

    def put_hook_marks(
        self, session_id: str, stop_blocks: int, marks: dict[str, list[str]], now: int, keep: int
    ) -> None:
        """Store the marks, each list cut to its newest ``keep`` ids."""
        raw = (
            list(marks.get("named", []))[-keep:]
            + [PENDING + i for i in list(marks.get("pending", []))[-keep:]]
            + [TOLD + i for i in list(marks.get("told", []))[-keep:]]
        )
        self._put_hook_state(session_id, stop_blocks, raw, now)

    def hook_queued(self, to_peer: str, limit: int) -> list[Row]:
        """The oldest ``limit`` queued requests of a peer, without their text."""
        return self.db.all(
            "SELECT id, from_peer, created_at, text_bytes FROM requests "
            "WHERE to_peer = ? AND state = 'queued' ORDER BY created_at, rowid LIMIT ?",
            (to_peer, limit),
        )

    def hook_queued_count(self, to_peer: str, cap: int) -> int:
        """How many requests are queued for a peer, counting no further than ``cap``."""
        return int(
            self.db.scalar(
                "SELECT count(*) FROM (SELECT 1 FROM requests WHERE to_peer = ? "
                "AND state = 'queued' LIMIT ?) AS q",
                (to_peer, cap),
            )
            or 0
        )

    def hook_unnotified(self, from_peer: str, limit: int) -> list[Row]:
        """The first ``limit`` final requests a peer sent and was not told of."""
        return self.db.all(
            "SELECT id, to_peer, state, reason FROM requests WHERE from_peer = ? "
            "AND notified_at IS NULL AND finished_at IS NOT NULL "
            "ORDER BY finished_at, rowid LIMIT ?",
            (from_peer, limit),
        )

    def get_hook_state(self, session_id: str) -> Row | None:
        """The hook's state for one relay session (``sessions.id``), or None."""
        return self.db.one("SELECT * FROM hook_state WHERE session_id = ?", (session_id,))

    def _put_hook_state(
        self, session_id: str, stop_blocks: int, blocked_ids: list[str], now: int
    ) -> None:
        self.db.execute(
            "INSERT INTO hook_state (session_id, stop_blocks, blocked_ids, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "stop_blocks = excluded.stop_blocks, blocked_ids = excluded.blocked_ids, "
            "updated_at = excluded.updated_at",
            (session_id, stop_blocks, json.dumps(blocked_ids), now),
        )

    def hook_own_prompts(self, session_id: str) -> list[str]:
        """Hashes of the prompts relay made the runtime submit for this session."""
        row = self.get_hook_state(session_id)
        return [] if row is None else _id_list(row["own_prompts"])

    def set_hook_own_prompts(self, session_id: str, hashes: list[str], now: int) -> None:
        self.db.execute(
            "INSERT INTO hook_state (session_id, stop_blocks, blocked_ids, updated_at, "
            "own_prompts) VALUES (?, 0, '[]', ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "own_prompts = excluded.own_prompts, updated_at = excluded.updated_at",
            (session_id, now, json.dumps(hashes)),
        )

    def session_for_agent(self, agent_session_id: str) -> Row | None:
        """The relay session bound to an agent runtime's session: an active one first, else
        the newest (a /resume can bind a second relay session to the same ``session_id``)."""
        return self.db.one(
            "SELECT * FROM sessions WHERE agent_session_id = ? "
            "ORDER BY state = 'active' DESC, created_at DESC, rowid DESC LIMIT 1",
            (agent_session_id,),
        )

    # ------------------------------------------------------------------ wake waiters
    def get_waiter(self, session_id: str) -> Row | None:
        return self.db.one("SELECT * FROM wake_waiters WHERE session_id = ?", (session_id,))

    def put_waiter(
        self,
        session_id: str,
        peer: str,
        runtime: str,
        pid: int,
        process_start: str | None,
        host: str,
        now: int,
        until_at: int,
    ) -> None:
        """Record this process as the session's waiter (replacing one that is gone), and
        forget the waiters of sessions that have ended."""
        self.db.execute(
            "DELETE FROM wake_waiters WHERE session_id IN "
            "(SELECT id FROM sessions WHERE state != 'active')"
        )
        self.db.execute(
            "INSERT INTO wake_waiters (session_id, peer, runtime, pid, process_start, host, "
            "started_at, until_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET peer = excluded.peer, "
            "runtime = excluded.runtime, pid = excluded.pid, "
            "process_start = excluded.process_start, host = excluded.host, "
            "started_at = excluded.started_at, until_at = excluded.until_at",
            (session_id, peer, runtime, pid, process_start, host, now, until_at),
        )

    def delete_waiter(
        self, session_id: str, pid: int, process_start: str | None, host: str
    ) -> None:
        """Remove the session's waiter row if it is still this process's."""
        self.db.execute(
            "DELETE FROM wake_waiters WHERE session_id = ? AND pid = ? AND host = ? "
            f"AND process_start {self._sql.same_as('?')}",
            (session_id, pid, host, process_start),
        )

    def live_session_waiters(self, peer: str, now: int) -> list[Row]:
        """Waiter rows of the peer's live sessions that have not passed their time yet
        (whether each process still runs is for the caller to check). A database whose
        schema predates waiters (doctor opens old ones read-only) has none."""
        try:
            return self.db.all(
                "SELECT w.* FROM wake_waiters w JOIN sessions s ON s.id = w.session_id "
                "WHERE w.peer = ? AND s.peer = w.peer AND s.state = 'active' "
                "AND s.lease_expires_at > ? AND w.until_at > ?",
                (peer, now, now),
            )
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return []
            raise
