"""SQL for requests, drafts and the event log."""

from __future__ import annotations

from ..core.limits import CLAIMED_STATES as CLAIMED
from ..core.limits import OPEN_STATES as OPEN
from .tables import CLAIMS, DRAFTS, REQUEST_LISTED, REQUESTS

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Any, Collection

if TYPE_CHECKING:
    from .api import Row, Statements
    from .dialect import Dialect

# the open states as an SQL list, written exactly as the partial index requests_open_text's
# WHERE (migration 14), so that both SQLite and PostgreSQL see the index applies
OPEN_STATES = "(" + ", ".join(f"'{s}'" for s in OPEN) + ")"
CLAIMED_STATES = "(" + ", ".join(f"'{s}'" for s in CLAIMED) + ")"


def _prefix_end(prefix: str) -> str:
    """The smallest string after every string that starts with ``prefix`` (ids are ASCII)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class RequestsSQL:
    db: Statements
    _sql: type[Dialect]

    # requests ----------------------------------------------------------------------
    def get_request(self, request_id: str) -> Row | None:
        return self.db.one("SELECT * FROM requests WHERE id = ?", (request_id,))

    def requests_with_prefix(self, prefix: str, limit: int) -> list[Row]:
        """Requests (tombstones included) whose id starts with ``prefix``: a range scan of
        the primary key, never a table scan."""
        return self.db.all(
            "SELECT id, state, from_peer, to_peer FROM requests WHERE id >= ? AND id < ? "
            "ORDER BY id LIMIT ?",
            (prefix, _prefix_end(prefix), limit),
        )

    def completion_requests(
        self,
        prefix: str,
        *,
        states: Collection[str] | None = None,
        from_peer: str | None = None,
        to_peer: str | None = None,
        claim_session: str | None = None,
        limit: int = 50,
    ) -> list[Row]:
        """Recent requests for shell completion, newest first (read-only; no bodies)."""
        where, params = ["pruned = 0"], []
        if prefix:
            where.append("id >= ? AND id < ?")
            params += [prefix, _prefix_end(prefix)]
        if states:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            params += list(states)
        for column, value in (
            ("from_peer", from_peer),
            ("to_peer", to_peer),
            ("claim_session", claim_session),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return self.db.all(
            "SELECT id, state, from_peer, to_peer, created_at FROM requests "
            f"WHERE {' AND '.join(where)} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*params, limit],
        )

    def insert_request(self, row: dict[str, Any]) -> None:
        cols = REQUESTS.check_insert(row)
        self.db.execute(
            f"INSERT INTO requests ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [row[c] for c in cols],
        )

    def update_request(self, request_id: str, expected_state: str, fields: dict[str, Any]) -> bool:
        """Change a request only if it is still in ``expected_state``; True if it was."""
        cols = REQUESTS.check_update(fields)
        sets = ", ".join(f"{c} = ?" for c in cols)
        cur = self.db.execute(
            f"UPDATE requests SET {sets} WHERE id = ? AND state = ?",
            [*(fields[c] for c in cols), request_id, expected_state],
        )
        return cur.rowcount == 1

    def oldest_queued_for(self, to_peer: str) -> Row | None:
        return self.db.one(
            "SELECT * FROM requests WHERE to_peer = ? AND state = 'queued' "
            "ORDER BY created_at, rowid LIMIT 1",
            (to_peer,),
        )

    def queued_for(self, to_peer: str, limit: int | None = None) -> list[Row]:
        """The oldest ``limit`` queued requests of a peer, without text or reply."""
        cols = ", ".join(REQUEST_LISTED)
        return self.db.all(
            f"SELECT {cols} FROM requests WHERE to_peer = ? AND state = 'queued' "
            "ORDER BY created_at, rowid" + ("" if limit is None else " LIMIT ?"),
            (to_peer,) if limit is None else (to_peer, limit),
        )

    def count_queued_for(self, to_peer: str) -> int:
        return int(
            self.db.scalar(
                "SELECT count(*) FROM requests WHERE to_peer = ? AND state = 'queued'",
                (to_peer,),
            )
            or 0
        )

    def in_flight_of_session(self, session_id: str) -> list[Row]:
        return self.db.all(
            "SELECT * FROM requests WHERE claim_session = ? "
            f"AND state IN {CLAIMED_STATES} ORDER BY created_at, rowid",
            (session_id,),
        )

    # claims (design.md §6) ----------------------------------------------------------
    def insert_claim(self, row: dict[str, Any]) -> None:
        cols = CLAIMS.check_insert(row)
        self.db.execute(
            f"INSERT INTO claims ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [row[c] for c in cols],
        )

    def claim_by_attempt(self, attempt: str) -> Row | None:
        return self.db.one("SELECT * FROM claims WHERE attempt = ?", (attempt,))

    def claims_of_session(self, session_id: str) -> list[Row]:
        """Every claim this session made, oldest first."""
        return self.db.all(
            "SELECT * FROM claims WHERE session_id = ? ORDER BY claimed_at, rowid",
            (session_id,),
        )

    def recent_claims_of_peer(self, peer: str, limit: int) -> list[Row]:
        """The newest claims of ``peer`` (any session), newest first."""
        return self.db.all(
            "SELECT * FROM claims WHERE peer = ? ORDER BY claimed_at DESC, rowid DESC LIMIT ?",
            (peer, limit),
        )

    def recent_sends(self, from_peer: str, since: int) -> tuple[int, int | None]:
        """How many requests ``from_peer`` created after ``since``, and the oldest time."""
        row = self.db.one(
            "SELECT count(*), min(created_at) FROM requests WHERE from_peer = ? AND created_at > ?",
            (from_peer, since),
        )
        assert row is not None  # (an aggregate's one row)
        return row[0], row[1]

    def open_same_text(
        self, to_peer: str, from_peer: str, text_hash: str, text: str, but: str, limit: int
    ) -> list[Row]:
        """Up to ``limit`` open requests, other than ``but``, from ``from_peer`` to ``to_peer``
        with this text (design.md §14): one look in the partial index
        ``requests_open_text``, the text compared on the rows it finds, stopping at
        ``limit`` (no sort: the same text queued 1,000 times reads ``limit`` rows)."""
        return self.db.all(
            "SELECT id, state, created_at, updated_at FROM requests "
            f"{self._sql.indexed_by('requests_open_text')} WHERE to_peer = ? "
            f"AND from_peer = ? AND text_hash = ? AND state IN {OPEN_STATES} AND id != ? "
            "AND text = ? LIMIT ?",
            (to_peer, from_peer, text_hash, but, text, limit),
        )

    def count_open_to(self, to_peer: str, limit: int) -> int:
        """How many open requests (queued, delivered, acknowledged) ``to_peer`` has,
        counted up to ``limit`` (the queue cap, design.md §4) through the partial index
        ``requests_open_text`` (its leading column)."""
        value: int = self.db.scalar(
            "SELECT count(*) FROM (SELECT 1 FROM requests WHERE to_peer = ? AND state IN "
            f"{OPEN_STATES} LIMIT ?) AS open_requests",
            (to_peer, limit),
        )
        return value

    def open_counts_at_least(self, minimum: int) -> list[Row]:
        """Recipients with at least ``minimum`` open requests (doctor's queue check):
        rows of (to_peer, n), fullest first."""
        return self.db.all(
            f"SELECT to_peer, count(*) AS n FROM requests WHERE state IN {OPEN_STATES} "
            "GROUP BY to_peer HAVING count(*) >= ? ORDER BY n DESC, to_peer",
            (minimum,),
        )

    def oldest_in_state(self, state: str, limit: int) -> list[Row]:
        """The ``limit`` oldest requests in ``state`` (no bodies), oldest first: a range of
        the index ``requests_state_created``, never every row of the state."""
        cols = ", ".join(REQUEST_LISTED)
        return self.db.all(
            f"SELECT {cols} FROM requests WHERE state = ? ORDER BY created_at, rowid LIMIT ?",
            (state, limit),
        )

    def list_requests(
        self,
        states: list[str] | None,
        to_peer: str | None,
        from_peer: str | None,
        limit: int | None,
    ) -> list[Row]:
        where: list[str] = ["pruned = 0"]
        params: list[object] = []
        if states:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            params += states
        if to_peer:
            where.append("to_peer = ?")
            params.append(to_peer)
        if from_peer:
            where.append("from_peer = ?")
            params.append(from_peer)
        cols = ", ".join(REQUEST_LISTED)
        sql = (
            f"SELECT {cols} FROM requests WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, rowid DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self.db.all(sql, params)

    def recently_finished(self, since: int, limit: int) -> list[Row]:
        """Requests that reached a final state at ``since`` or later, the newest first,
        apart from ``delivery_unknown`` (a person's matter, listed on its own): the web
        view's "recently final" lane (design.md §17). The index on finished_at serves it."""
        cols = ", ".join(REQUEST_LISTED)
        return self.db.all(
            f"SELECT {cols} FROM requests WHERE finished_at >= ? AND pruned = 0 "
            "AND state <> 'delivery_unknown' ORDER BY finished_at DESC, rowid DESC LIMIT ?",
            (since, limit),
        )

    def count_by_state(self) -> dict[str, int]:
        rows = self.db.all("SELECT state, count(*) FROM requests WHERE pruned = 0 GROUP BY state")
        return {r[0]: r[1] for r in rows}

    def unnotified_finished(self, from_peer: str) -> list[Row]:
        return self.db.all(
            "SELECT * FROM requests WHERE from_peer = ? AND notified_at IS NULL "
            "AND finished_at IS NOT NULL ORDER BY finished_at, rowid",
            (from_peer,),
        )

    def notice_batch(self, batch: str) -> list[Row]:
        """The requests one call told (design.md §6), oldest first."""
        return self.db.all(
            "SELECT * FROM requests WHERE notice_batch = ? ORDER BY finished_at, rowid",
            (batch,),
        )

    def latest_notice_batch(self, from_peer: str) -> tuple[str | None, int | None]:
        """The batch id and time of the latest call that told ``from_peer`` something."""
        row = self.db.one(
            "SELECT notice_batch, notified_at FROM requests WHERE from_peer = ? "
            "AND notice_batch IS NOT NULL ORDER BY notified_at DESC, rowid DESC LIMIT 1",
            (from_peer,),
        )
        return (row[0], row[1]) if row else (None, None)

    def mark_notified(self, request_ids: list[str], now: int, batch: str) -> None:
        """These requests were told now, by the call whose batch id is ``batch``."""
        self.db.executemany(
            "UPDATE requests SET notified_at = ?, notice_batch = ? WHERE id = ? "
            "AND notified_at IS NULL",
            [(now, batch, rid) for rid in request_ids],
        )

    # time-based deadlines --------------------------------------------------------------
    def due_requests(self, now: int, limit: int) -> list[tuple[int, Row]]:
        """Requests whose own deadline (TTL, claim lease, reply_within) has passed."""
        out = []
        # INDEXED BY the partial deadline indexes: without statistics SQLite otherwise
        # picks requests_state_created and sorts every row of the state (measured at 1M
        # requests: 150 ms instead of 1 ms; docs/benchmarks.md).
        for state, col, index in (
            ("queued", "expires_at", "requests_queued_ttl"),
            ("delivered", "lease_expires_at", "requests_delivered_lease"),
            ("acknowledged", "reply_deadline_at", "requests_ack_deadline"),
        ):
            for row in self.db.all(
                f"SELECT * FROM requests {self._sql.indexed_by(index)} WHERE state = '{state}' "
                f"AND {col} <= ? ORDER BY {col}, rowid LIMIT ?",
                (now, limit),
            ):
                out.append((row[col], row))
        return out

    def next_request_deadline(self) -> int | None:
        hint = self._sql.indexed_by
        value: int | None = self.db.scalar(
            "SELECT min(t) FROM ("
            f"SELECT min(expires_at) AS t FROM requests {hint('requests_queued_ttl')} "
            "WHERE state = 'queued' UNION ALL "
            f"SELECT min(lease_expires_at) FROM requests {hint('requests_delivered_lease')} "
            "WHERE state = 'delivered' UNION ALL "
            f"SELECT min(reply_deadline_at) FROM requests {hint('requests_ack_deadline')} "
            "WHERE state = 'acknowledged') AS due"
        )
        return value

    # events ------------------------------------------------------------------------
    def add_event(
        self,
        request_id: str,
        at: int,
        from_state: str | None,
        to_state: str,
        reason: str | None,
        actor: str,
        detail: str | None,
    ) -> None:
        self.db.later(
            "INSERT INTO events (request_id, at, from_state, to_state, reason, actor, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (request_id, at, from_state, to_state, reason, actor, detail),
        )

    def events_of(self, request_id: str) -> list[Row]:
        return self.db.all("SELECT * FROM events WHERE request_id = ? ORDER BY seq", (request_id,))

    def recent_events(self, limit: int) -> list[Row]:
        return self.db.all("SELECT * FROM events ORDER BY seq DESC LIMIT ?", (limit,))

    # drafts ------------------------------------------------------------------------
    def get_draft(self, draft_id: str) -> Row | None:
        return self.db.one("SELECT * FROM drafts WHERE id = ?", (draft_id,))

    def drafts_with_prefix(self, prefix: str, limit: int) -> list[Row]:
        """Unsubmitted drafts whose id starts with ``prefix`` (a range scan, as above)."""
        return self.db.all(
            "SELECT id, from_peer, to_peer FROM drafts WHERE id >= ? AND id < ? "
            "AND submitted_at IS NULL ORDER BY id LIMIT ?",
            (prefix, _prefix_end(prefix), limit),
        )

    def completion_drafts(self, prefix: str, from_peer: str, limit: int) -> list[Row]:
        """A sender's unsubmitted drafts for shell completion, newest first."""
        where, params = ["from_peer = ?", "submitted_at IS NULL"], [from_peer]
        if prefix:
            where.append("id >= ? AND id < ?")
            params += [prefix, _prefix_end(prefix)]
        return self.db.all(
            f"SELECT id, to_peer FROM drafts WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC LIMIT ?",
            [*params, limit],
        )

    def insert_draft(self, row: dict[str, Any]) -> None:
        cols = DRAFTS.check_insert(row)
        self.db.execute(
            f"INSERT INTO drafts ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [row[c] for c in cols],
        )

    def oldest_open_draft_expiry(self, from_peer: str, now: int) -> int | None:
        value: int | None = self.db.scalar(
            "SELECT min(expires_at) FROM drafts WHERE from_peer = ? AND submitted_at IS NULL "
            "AND expires_at > ?",
            (from_peer, now),
        )
        return value

    def count_open_drafts(self, from_peer: str, now: int) -> int:
        value: int = self.db.scalar(
            "SELECT count(*) FROM drafts WHERE from_peer = ? AND submitted_at IS NULL "
            "AND expires_at > ?",
            (from_peer, now),
        )
        return value

    def mark_draft_submitted(self, draft_id: str, now: int) -> None:
        self.db.execute(
            "UPDATE drafts SET submitted_at = ?, text = NULL WHERE id = ?", (now, draft_id)
        )

    def count_stale_drafts(self, now: int) -> int:
        value: int = self.db.scalar(
            "SELECT count(*) FROM drafts WHERE submitted_at IS NULL AND expires_at <= ?", (now,)
        )
        return value
