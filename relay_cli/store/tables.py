"""One description of relay's tables: each table's columns in the order the migrations
create them, and which a write may set. The column lists and the insert and update
whitelists of sql_*.py derive from it, so a column is named once; tests/store/test_store_schema.py
checks it against the tables the migrations make, on both backends.

The migrations (migrations.py) stay the definition of the tables themselves: they are
append-only, and this describes where they end up.
"""

from __future__ import annotations

from ..core.record import record

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Iterable


@record(frozen=True)  # (not a typing.NamedTuple: requests/states.py says why)
class Table:
    name: str
    columns: tuple[str, ...]  # in the order of the table's definition
    fixed: frozenset[str] = frozenset()  # set by an insert, never changed by an update

    @property
    def updatable(self) -> frozenset[str]:
        return frozenset(self.columns) - self.fixed

    def without(self, *columns: str) -> tuple[str, ...]:
        """The columns but ``columns`` (the bodies a listing leaves out), in order."""
        return tuple(c for c in self.columns if c not in columns)

    def check_insert(self, values: Iterable[str]) -> list[str]:
        """The columns of an insert of ``values``, in table order; ValueError when one is
        not this table's (a row is never stored without a field it was given)."""
        unknown = set(values) - set(self.columns)
        if unknown:
            raise ValueError(f"not columns of {self.name}: {sorted(unknown)}")
        return [c for c in self.columns if c in values]

    def check_update(self, values: Iterable[str]) -> list[str]:
        """The columns an update of ``values`` sets, in table order; ValueError when one
        may not be changed."""
        bad = set(values) - self.updatable
        if bad:
            raise ValueError(f"not updatable in {self.name}: {sorted(bad)}")
        return [c for c in self.columns if c in values]


PEERS = Table(
    "peers",
    ("name", "kind", "created_at", "last_seen_at", "hook_seen_at", "notices_batch", "notices_at"),
)
SESSIONS = Table(
    "sessions",
    (
        "id",
        "peer",
        "token_hash",
        "state",
        "created_at",
        "lease_seconds",
        "lease_expires_at",
        "ended_at",
        "waiting_until",
        "agent_session_id",
        "claims_overlap_at",
        "notices_batch",
        "notices_at",
        "activity",
        "activity_since",
        "activity_cause",
        "activity_detail",
        "activity_event",
        "activity_event_at",
        "activity_end_seen",
        "activity_alert",
    ),
)
REQUESTS = Table(
    "requests",
    (
        "id",
        "fingerprint",
        "from_peer",
        "to_peer",
        "from_session",
        "text",
        "text_bytes",
        "reply",
        "state",
        "reason",
        "detail",
        "created_at",
        "updated_at",
        "expires_at",
        "delivered_at",
        "acknowledged_at",
        "finished_at",
        "lease_expires_at",
        "claim_session",
        "reply_deadline_at",
        "ttl_seconds",
        "reply_within_seconds",
        "attempts",
        "max_attempts",
        "on_lost",
        "in_reply_to",
        "depth",
        "pruned",
        "notified_at",
        "notice_batch",
        "text_hash",
    ),
    fixed=frozenset({"id", "fingerprint", "from_peer", "to_peer"}),
)
DRAFTS = Table(
    "drafts",
    (
        "id",
        "fingerprint",
        "from_peer",
        "from_session",
        "to_peer",
        "text",
        "text_bytes",
        "ttl_seconds",
        "reply_within_seconds",
        "on_lost",
        "max_attempts",
        "in_reply_to",
        "depth",
        "created_at",
        "expires_at",
        "submitted_at",
    ),
    fixed=frozenset({"id"}),
)
EVENTS = Table(
    "events", ("seq", "request_id", "at", "from_state", "to_state", "reason", "actor", "detail")
)
LEDGER = Table(
    "ledger",
    (
        "key",
        "fingerprint",
        "argv",
        "cwd",
        "state",
        "idempotent",
        "approve",
        "runs",
        "pid",
        "process_start",
        "child_pid",
        "child_start",
        "host",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "exit_code",
        "signal",
        "stdout",
        "stderr",
        "stdout_bytes",
        "stderr_bytes",
        "decision",
        "decided_by",
        "decided_at",
        "decision_note",
        "resolution",
        "resolved_by",
        "resolved_at",
        "resolution_note",
        "output_pruned_at",
        "pid_namespace",
    ),
    fixed=frozenset({"key"}),
)
HOOK_STATE = Table(
    "hook_state", ("session_id", "stop_blocks", "blocked_ids", "updated_at", "own_prompts")
)
WAKE_WAITERS = Table(
    "wake_waiters",
    ("session_id", "peer", "runtime", "pid", "process_start", "host", "started_at", "until_at"),
)
# every claim (design.md §6), kept as long as the request it took (or its tombstone); one
# made with an attempt id is kept longer, marked with when its request was removed
CLAIMS = Table(
    "claims",
    ("attempt", "request_id", "peer", "session_id", "claimed_at", "request_removed_at"),
)
# what a person set in this home (design.md §19: `relay notify set`), one row per key
SETTINGS = Table("settings", ("key", "value", "updated_at"), fixed=frozenset({"key"}))

TABLES = {
    t.name: t
    for t in (
        PEERS,
        SESSIONS,
        REQUESTS,
        DRAFTS,
        EVENTS,
        LEDGER,
        HOOK_STATE,
        WAKE_WAITERS,
        CLAIMS,
        SETTINGS,
    )
}

# What a listing of requests shows (`list`, `export`): every column but the bodies.
REQUEST_LISTED = REQUESTS.without("text", "reply")
# A ledger listing leaves out the captured output.
LEDGER_LISTED = LEDGER.without("stdout", "stderr")
