"""SQL for operating relay: `doctor`'s read-only inspection and `prune`'s retention."""

from __future__ import annotations

from sqlite3 import Row

_FINAL = "('completed', 'failed', 'rejected', 'expired', 'cancelled', 'delivery_unknown')"

# A request that still carries its body and keeps it through this prune.
_BODY_KEPT = (
    f"r.pruned = 0 AND NOT (r.state IN {_FINAL} AND r.finished_at IS NOT NULL "
    "AND r.finished_at < :body_cutoff)"
)
# Drafts `prune` removes: unsubmitted ones that expired, and submitted ones whose request
# is gone or is (or is about to become) a tombstone.
_DRAFT_REMOVABLE = (
    "(d.submitted_at IS NULL AND d.expires_at <= :now) OR (d.submitted_at IS NOT NULL AND "
    f"NOT EXISTS (SELECT 1 FROM requests r WHERE r.id = d.id AND {_BODY_KEPT}))"
)

# Sessions `prune` may remove: ended (left, lease lapsed, superseded) before the cutoff.
# Of those it keeps every session a request row (or tombstone) or a draft still names, so
# a ghost's very late retry still answers duplicate: true (unused_sessions).
_SESSION_ENDED = (
    "state != 'active' AND COALESCE(ended_at, lease_expires_at) < :body_cutoff"
)
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
    db: object  # Connection

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
        return self.db.scalar("SELECT count(*) FROM requests WHERE pruned = 1")

    def count_due(self, now: int) -> int:
        """Time-based transitions whose deadline passed but that no command applied yet."""
        return self.db.scalar(
            "SELECT (SELECT count(*) FROM requests WHERE "
            "(state = 'queued' AND expires_at <= :now) OR "
            "(state = 'delivered' AND lease_expires_at <= :now) OR "
            "(state = 'acknowledged' AND reply_deadline_at <= :now)) + "
            "(SELECT count(*) FROM sessions WHERE state = 'active' AND lease_expires_at <= :now)",
            {"now": now},
        )

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
            "AND r.state IN ('delivered', 'acknowledged') "
            "WHERE s.state = 'active' AND s.lease_expires_at <= ? "
            "ORDER BY s.peer, r.created_at, r.id",
            (now,),
        )

    # ---------------------------------------------------------------- prune
    def prune_counts(self, now: int, body_cutoff: int, tomb_cutoff: int) -> dict[str, int]:
        """What a prune at ``now`` would do, counted in one read snapshot."""
        p = {"now": now, "body_cutoff": body_cutoff, "tomb_cutoff": tomb_cutoff}
        doomed = f"state IN {_FINAL} AND finished_at IS NOT NULL AND finished_at < :tomb_cutoff"
        return {
            "requests_pruned": self.db.scalar(
                f"SELECT count(*) FROM requests WHERE state IN {_FINAL} AND pruned = 0 "
                "AND finished_at IS NOT NULL AND finished_at < :body_cutoff "
                "AND finished_at >= :tomb_cutoff", p),
            "tombstones_removed": self.db.scalar(
                f"SELECT count(*) FROM requests WHERE {doomed}", p),
            "events_removed": self.db.scalar(
                f"SELECT count(*) FROM events WHERE request_id IN "
                f"(SELECT id FROM requests WHERE {doomed})", p),
            "drafts_removed": self.db.scalar(
                f"SELECT count(*) FROM drafts d WHERE {_DRAFT_REMOVABLE}", p),
            "sessions_removed": len(self.unused_sessions(now, body_cutoff, tomb_cutoff)),
            "hook_records_removed": self.db.scalar(
                f"SELECT count(*) FROM hook_state h WHERE {_HOOK_STATE_REMOVABLE}", p)
            + self.db.scalar(
                f"SELECT count(*) FROM wake_waiters w WHERE {_WAITER_REMOVABLE}", p),
        }

    def remove_old_tombstones(self, tomb_cutoff: int, limit: int) -> tuple[int, int]:
        """Delete up to ``limit`` final requests finished before ``tomb_cutoff`` (whether
        already tombstones or not) and their events. Returns (requests, events)."""
        ids = [r[0] for r in self.db.all(
            f"SELECT id FROM requests INDEXED BY requests_finished WHERE state IN {_FINAL} "
            "AND finished_at IS NOT NULL AND finished_at < ? ORDER BY finished_at LIMIT ?",
            (tomb_cutoff, limit))]
        if not ids:
            return 0, 0
        marks = ", ".join("?" * len(ids))
        events = self.db.execute(f"DELETE FROM events WHERE request_id IN ({marks})", ids)
        reqs = self.db.execute(f"DELETE FROM requests WHERE id IN ({marks})", ids)
        return reqs.rowcount, events.rowcount

    def prune_bodies(self, body_cutoff: int, limit: int) -> int:
        """Turn up to ``limit`` final requests finished before ``body_cutoff`` into
        tombstones: text, reply and detail (also in their events) become NULL."""
        ids = [r[0] for r in self.db.all(
            f"SELECT id FROM requests INDEXED BY requests_prunable WHERE state IN {_FINAL} "
            "AND pruned = 0 AND finished_at IS NOT NULL AND finished_at < ? "
            "ORDER BY finished_at LIMIT ?", (body_cutoff, limit))]
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        self.db.execute(
            f"UPDATE events SET detail = NULL WHERE request_id IN ({marks}) "
            "AND detail IS NOT NULL", ids)
        cur = self.db.execute(
            f"UPDATE requests SET text = NULL, reply = NULL, detail = NULL, pruned = 1 "
            f"WHERE id IN ({marks}) AND pruned = 0", ids)
        return cur.rowcount

    def unused_sessions(self, now: int, body_cutoff: int, tomb_cutoff: int) -> list[str]:
        """Ids of sessions that ended before ``body_cutoff`` and that no request (row or
        tombstone) or draft names, as sender or claimant, once this prune has removed the
        rows it removes (so a dry run counts what the real run does): they hold no work
        and answer no retry. Read in one snapshot without the write lock (one pass over
        requests: there is no index on from_session); safe to act on later, because an
        ended session never becomes active again and never gains a request."""
        p = {"now": now, "body_cutoff": body_cutoff, "tomb_cutoff": tomb_cutoff}
        ended = [r[0] for r in self.db.all(f"SELECT id FROM sessions WHERE {_SESSION_ENDED}", p)]
        if not ended:
            return []
        import json

        p["ids"] = json.dumps(ended)
        kept = (f"NOT (r.state IN {_FINAL} AND r.finished_at IS NOT NULL "
                "AND r.finished_at < :tomb_cutoff)")
        named = {r[0] for r in self.db.all(
            "SELECT r.from_session FROM requests r WHERE r.from_session IN "
            f"(SELECT value FROM json_each(:ids)) AND {kept} UNION "
            "SELECT r.claim_session FROM requests r WHERE r.claim_session IN "
            f"(SELECT value FROM json_each(:ids)) AND {kept} UNION "
            "SELECT d.from_session FROM drafts d WHERE d.from_session IN "
            f"(SELECT value FROM json_each(:ids)) AND NOT ({_DRAFT_REMOVABLE})", p)}
        return [i for i in ended if i not in named]

    def remove_sessions(self, ids: list[str]) -> int:
        """Delete these sessions (from ``unused_sessions``) unless one became active."""
        import json

        cur = self.db.execute(
            "DELETE FROM sessions WHERE state != 'active' AND id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(ids),))
        return cur.rowcount

    def remove_hook_records(self, body_cutoff: int, limit: int) -> int:
        """Up to ``limit`` hook_state rows, then wake_waiters rows, of sessions that are
        not active, untouched since ``body_cutoff``."""
        p = {"body_cutoff": body_cutoff, "limit": limit}
        n = self.db.execute(
            "DELETE FROM hook_state WHERE rowid IN (SELECT h.rowid FROM hook_state h "
            f"WHERE {_HOOK_STATE_REMOVABLE} LIMIT :limit)", p).rowcount
        if n < limit:
            p["limit"] = limit - n
            n += self.db.execute(
                "DELETE FROM wake_waiters WHERE rowid IN (SELECT w.rowid FROM wake_waiters w "
                f"WHERE {_WAITER_REMOVABLE} LIMIT :limit)", p).rowcount
        return n

    def remove_drafts(self, now: int, body_cutoff: int, limit: int) -> int:
        cur = self.db.execute(
            "DELETE FROM drafts WHERE rowid IN (SELECT d.rowid FROM drafts d "
            f"WHERE {_DRAFT_REMOVABLE} LIMIT :limit)",
            {"now": now, "body_cutoff": body_cutoff, "limit": limit},
        )
        return cur.rowcount
