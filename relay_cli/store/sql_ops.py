"""SQL for operating relay: `doctor`'s read-only inspection and `prune`'s retention."""

from __future__ import annotations

from .sql_requests import CLAIMED_STATES

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)

if TYPE_CHECKING:
    from .api import Row, Statements
    from .dialect import Dialect


def _final(final: tuple[str, ...]) -> tuple[str, dict[str, object]]:
    """``(:final0, ...)`` and its parameters: the domain's final request states
    (design.md §5), passed in by the caller, never copied into the statement."""
    names = [f"final{i}" for i in range(len(final))]
    return "(" + ", ".join(f":{n}" for n in names) + ")", dict(zip(names, final, strict=True))


def _body_kept(final_sql: str) -> str:
    """A request that still carries its body and keeps it through this prune."""
    return (
        f"r.pruned = 0 AND NOT (r.state IN {final_sql} AND r.finished_at IS NOT NULL "
        "AND r.finished_at < :body_cutoff)"
    )


def _draft_removable(final_sql: str) -> str:
    """Drafts `prune` removes: unsubmitted ones that expired, and submitted ones whose
    request is gone or is (or is about to become) a tombstone."""
    return (
        "(d.submitted_at IS NULL AND d.expires_at <= :now) OR (d.submitted_at IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM requests r WHERE r.id = d.id AND "
        f"{_body_kept(final_sql)}))"
    )


# Sessions `prune` may remove: ended (left, lease lapsed, superseded) before the cutoff.
# Of those it keeps every session a request row (or tombstone) or a draft still names, so
# a ghost's very late retry still answers duplicate: true (unused_sessions).
_SESSION_ENDED = "state != 'active' AND COALESCE(ended_at, lease_expires_at) < :body_cutoff"
# The hook's bookkeeping of a session that is not active (or gone), untouched since the
# cutoff: its Stop-block record and its wake waiter's row.
_HOOK_STATE_REMOVABLE = (
    "h.updated_at < :body_cutoff AND NOT EXISTS "
    "(SELECT 1 FROM sessions s WHERE s.id = h.session_id AND s.state = 'active')"
)
_WAITER_REMOVABLE = (
    "w.started_at < :body_cutoff AND NOT EXISTS "
    "(SELECT 1 FROM sessions s WHERE s.id = w.session_id AND s.state = 'active')"
)


class OpsSQL:
    db: Statements
    _sql: type[Dialect]

    # ---------------------------------------------------------------- doctor
    def passed_deadlines(self, now: int) -> list[Row]:
        """Open requests whose claim lease or reply deadline passed before ``now`` and
        that no command has moved yet (doctor: what the next command will decide)."""
        return self.db.all(
            "SELECT id, state, to_peer, on_lost, attempts, max_attempts, claim_session "
            "FROM requests WHERE (state = 'delivered' AND lease_expires_at <= ?) "
            "OR (state = 'acknowledged' AND reply_deadline_at <= ?) ORDER BY created_at, id",
            (now, now),
        )

    def count_tombstones(self) -> int:
        value: int = self.db.scalar("SELECT count(*) FROM requests WHERE pruned = 1")
        return value

    def count_due(self, now: int) -> int:
        """Time-based transitions whose deadline passed but that no command applied yet."""
        value: int = self.db.scalar(
            "SELECT (SELECT count(*) FROM requests WHERE "
            "(state = 'queued' AND expires_at <= :now) OR "
            "(state = 'delivered' AND lease_expires_at <= :now) OR "
            "(state = 'acknowledged' AND reply_deadline_at <= :now)) + "
            "(SELECT count(*) FROM sessions WHERE state = 'active' AND lease_expires_at <= :now)",
            {"now": now},
        )
        return value

    def active_sessions(self) -> list[Row]:
        """Every active session with its peer's kind and hook time, oldest name first."""
        return self.db.all(
            "SELECT s.peer, s.lease_expires_at, s.waiting_until, p.kind, p.hook_seen_at "
            "FROM sessions s JOIN peers p ON p.name = s.peer WHERE s.state = 'active' "
            "ORDER BY s.peer, s.created_at"
        )

    def lapsed_sessions_holding_work(self, now: int) -> list[Row]:
        """Sessions still marked active whose lease lapsed before ``now`` and that hold
        claimed work: one row per request (``peer``, ``lease_expires_at``, ``id``)."""
        return self.db.all(
            "SELECT s.peer, s.lease_expires_at, r.id FROM sessions s "
            "JOIN requests r ON r.claim_session = s.id "
            f"AND r.state IN {CLAIMED_STATES} "
            "WHERE s.state = 'active' AND s.lease_expires_at <= ? "
            "ORDER BY s.peer, r.created_at, r.id",
            (now,),
        )

    # ---------------------------------------------------------------- prune
    def prune_counts(
        self, final: tuple[str, ...], now: int, body_cutoff: int, tomb_cutoff: int
    ) -> dict[str, int]:
        """What a prune at ``now`` would do, counted in one read snapshot (``final``: the
        final request states)."""
        final_sql, p = _final(final)
        p.update(now=now, body_cutoff=body_cutoff, tomb_cutoff=tomb_cutoff)
        doomed = f"state IN {final_sql} AND finished_at IS NOT NULL AND finished_at < :tomb_cutoff"
        return {
            "requests_pruned": self.db.scalar(
                f"SELECT count(*) FROM requests WHERE state IN {final_sql} AND pruned = 0 "
                "AND finished_at IS NOT NULL AND finished_at < :body_cutoff "
                "AND finished_at >= :tomb_cutoff",
                p,
            ),
            "tombstones_removed": self.db.scalar(
                f"SELECT count(*) FROM requests WHERE {doomed}", p
            ),
            "events_removed": self.db.scalar(
                f"SELECT count(*) FROM events WHERE request_id IN "
                f"(SELECT id FROM requests WHERE {doomed})",
                p,
            ),
            "drafts_removed": self.db.scalar(
                f"SELECT count(*) FROM drafts d WHERE {_draft_removable(final_sql)}", p
            ),
            "sessions_removed": len(self.unused_sessions(final, now, body_cutoff, tomb_cutoff)),
            "claim_attempts_removed": self.db.scalar(
                "SELECT count(*) FROM claims WHERE request_removed_at IS NOT NULL "
                "AND request_removed_at < :tomb_cutoff",
                p,
            ),
            "hook_records_removed": self.db.scalar(
                f"SELECT count(*) FROM hook_state h WHERE {_HOOK_STATE_REMOVABLE}", p
            )
            + self.db.scalar(f"SELECT count(*) FROM wake_waiters w WHERE {_WAITER_REMOVABLE}", p),
        }

    def remove_old_tombstones(
        self, final: tuple[str, ...], tomb_cutoff: int, limit: int, now: int
    ) -> tuple[int, int]:
        """Delete up to ``limit`` final requests finished before ``tomb_cutoff`` (whether
        already tombstones or not), their events and their claims made without an attempt
        id; a claim made with one stays, marked removed at ``now`` (design.md §6).
        Returns (requests, events)."""
        final_sql, p = _final(final)
        p.update(tomb_cutoff=tomb_cutoff, limit=limit)
        ids = [
            r[0]
            for r in self.db.all(
                f"SELECT id FROM requests {self._sql.indexed_by('requests_finished')} WHERE state IN "
                f"{final_sql} AND finished_at IS NOT NULL AND finished_at < :tomb_cutoff "
                "ORDER BY finished_at LIMIT :limit",
                p,
            )
        ]
        if not ids:
            return 0, 0
        marks = ", ".join("?" * len(ids))
        events = self.db.execute(f"DELETE FROM events WHERE request_id IN ({marks})", ids)
        self.db.execute(
            f"DELETE FROM claims WHERE request_id IN ({marks}) AND attempt IS NULL", ids
        )
        self.db.execute(
            f"UPDATE claims SET request_removed_at = ? WHERE request_id IN ({marks}) "
            "AND attempt IS NOT NULL AND request_removed_at IS NULL",
            [now, *ids],
        )
        reqs = self.db.execute(f"DELETE FROM requests WHERE id IN ({marks})", ids)
        return reqs.rowcount, events.rowcount

    def remove_old_attempts(self, tomb_cutoff: int, limit: int) -> int:
        """Delete up to ``limit`` claims made with an attempt id whose request prune
        removed before ``tomb_cutoff`` (design.md §6)."""
        ids = [
            r[0]
            for r in self.db.all(
                f"SELECT attempt FROM claims {self._sql.indexed_by('claims_removed')} "
                "WHERE request_removed_at IS NOT NULL AND request_removed_at < ? "
                "ORDER BY request_removed_at LIMIT ?",
                (tomb_cutoff, limit),
            )
        ]
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        return self.db.execute(f"DELETE FROM claims WHERE attempt IN ({marks})", ids).rowcount

    def prune_bodies(self, final: tuple[str, ...], body_cutoff: int, limit: int) -> int:
        """Turn up to ``limit`` final requests finished before ``body_cutoff`` into
        tombstones: text, reply and detail (also in their events) become NULL."""
        final_sql, p = _final(final)
        p.update(body_cutoff=body_cutoff, limit=limit)
        ids = [
            r[0]
            for r in self.db.all(
                f"SELECT id FROM requests {self._sql.indexed_by('requests_prunable')} WHERE state IN "
                f"{final_sql} AND pruned = 0 AND finished_at IS NOT NULL "
                "AND finished_at < :body_cutoff ORDER BY finished_at LIMIT :limit",
                p,
            )
        ]
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        self.db.execute(
            f"UPDATE events SET detail = NULL WHERE request_id IN ({marks}) AND detail IS NOT NULL",
            ids,
        )
        cur = self.db.execute(
            f"UPDATE requests SET text = NULL, reply = NULL, detail = NULL, pruned = 1 "
            f"WHERE id IN ({marks}) AND pruned = 0",
            ids,
        )
        return cur.rowcount

    def unused_sessions(
        self, final: tuple[str, ...], now: int, body_cutoff: int, tomb_cutoff: int
    ) -> list[str]:
        """Ids of sessions that ended before ``body_cutoff`` and that no request (row or
        tombstone) or draft names, as sender or claimant, once this prune has removed the
        rows it removes (so a dry run counts what the real run does): they hold no work
        and answer no retry. Read in one snapshot without the write lock (one pass over
        requests: there is no index on from_session); safe to act on later, because an
        ended session never becomes active again and never gains a request."""
        ended = [
            r[0]
            for r in self.db.all(
                f"SELECT id FROM sessions WHERE {_SESSION_ENDED}", {"body_cutoff": body_cutoff}
            )
        ]
        if not ended:
            return []
        import json

        final_sql, p = _final(final)
        p.update(now=now, body_cutoff=body_cutoff, tomb_cutoff=tomb_cutoff, ids=json.dumps(ended))
        kept = (
            f"NOT (r.state IN {final_sql} AND r.finished_at IS NOT NULL "
            "AND r.finished_at < :tomb_cutoff)"
        )
        ids = self._sql.json_values(":ids")
        named = {
            r[0]
            for r in self.db.all(
                "SELECT r.from_session FROM requests r WHERE r.from_session IN "
                f"({ids}) AND {kept} UNION "
                "SELECT r.claim_session FROM requests r WHERE r.claim_session IN "
                f"({ids}) AND {kept} UNION "
                "SELECT d.from_session FROM drafts d WHERE d.from_session IN "
                f"({ids}) AND NOT ({_draft_removable(final_sql)})",
                p,
            )
        }
        return [i for i in ended if i not in named]

    def remove_sessions(self, ids: list[str]) -> int:
        """Delete these sessions (from ``unused_sessions``) unless one became active."""
        import json

        cur = self.db.execute(
            "DELETE FROM sessions WHERE state != 'active' AND id IN "
            f"({self._sql.json_values('?')})",
            (json.dumps(ids),),
        )
        return cur.rowcount

    def remove_hook_records(self, body_cutoff: int, limit: int) -> int:
        """Up to ``limit`` hook_state rows, then wake_waiters rows, of sessions that are
        not active, untouched since ``body_cutoff``."""
        p = {"body_cutoff": body_cutoff, "limit": limit}
        n = self.db.execute(
            "DELETE FROM hook_state WHERE rowid IN (SELECT h.rowid FROM hook_state h "
            f"WHERE {_HOOK_STATE_REMOVABLE} LIMIT :limit)",
            p,
        ).rowcount
        if n < limit:
            p["limit"] = limit - n
            n += self.db.execute(
                "DELETE FROM wake_waiters WHERE rowid IN (SELECT w.rowid FROM wake_waiters w "
                f"WHERE {_WAITER_REMOVABLE} LIMIT :limit)",
                p,
            ).rowcount
        return n

    def remove_drafts(self, final: tuple[str, ...], now: int, body_cutoff: int, limit: int) -> int:
        final_sql, p = _final(final)
        p.update(now=now, body_cutoff=body_cutoff, limit=limit)
        cur = self.db.execute(
            "DELETE FROM drafts WHERE rowid IN (SELECT d.rowid FROM drafts d "
            f"WHERE {_draft_removable(final_sql)} LIMIT :limit)",
            p,
        )
        return cur.rowcount
