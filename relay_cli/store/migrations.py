"""Schema migrations, applied on every open inside one BEGIN IMMEDIATE transaction.

``PRAGMA user_version`` holds how many of these have been applied. Migrations are
append-only: never edit one that has shipped, append a new one
(tests/store/test_schema_history.py pins the text of each shipped one by its hash, and
migrates databases made by every earlier revision, kept under tests/fixtures/schemas/).

PostgreSQL runs the same migrations as written out for it in pg_migrations.py.

``REPAIRS``: a migration that must look at the database before it can say what to change
(SQLite has no ``ADD COLUMN IF NOT EXISTS``) has a function here, run on SQLite in the
same transaction just before its text.
"""

from __future__ import annotations

from ..core.errors import RelayError

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)
if TYPE_CHECKING:
    from typing import Callable

if TYPE_CHECKING:
    from .api import Database

MIGRATIONS: list[str] = [
    # 1: peers, sessions, requests, drafts, events
    """
    CREATE TABLE peers (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        last_seen_at INTEGER,
        hook_seen_at INTEGER
    );
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        peer TEXT NOT NULL REFERENCES peers(name),
        token_hash TEXT NOT NULL UNIQUE,
        state TEXT NOT NULL CHECK (state IN ('active', 'left', 'expired', 'superseded')),
        created_at INTEGER NOT NULL,
        lease_seconds INTEGER NOT NULL,
        lease_expires_at INTEGER NOT NULL,
        ended_at INTEGER,
        waiting_until INTEGER,
        agent_session_id TEXT
    );
    CREATE INDEX sessions_active_peer ON sessions(peer) WHERE state = 'active';
    CREATE INDEX sessions_active_lease ON sessions(lease_expires_at) WHERE state = 'active';
    CREATE INDEX sessions_agent ON sessions(agent_session_id) WHERE agent_session_id IS NOT NULL;

    CREATE TABLE requests (
        id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        from_peer TEXT NOT NULL,
        to_peer TEXT NOT NULL,
        from_session TEXT,
        text TEXT,
        text_bytes INTEGER NOT NULL,
        reply TEXT,
        state TEXT NOT NULL,
        reason TEXT,
        detail TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        delivered_at INTEGER,
        acknowledged_at INTEGER,
        finished_at INTEGER,
        lease_expires_at INTEGER,
        claim_session TEXT,
        reply_deadline_at INTEGER,
        ttl_seconds INTEGER NOT NULL,
        reply_within_seconds INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        on_lost TEXT NOT NULL,
        in_reply_to TEXT,
        depth INTEGER NOT NULL DEFAULT 0,
        pruned INTEGER NOT NULL DEFAULT 0,
        notified_at INTEGER
    );
    CREATE INDEX requests_created ON requests(created_at);
    CREATE INDEX requests_from_created ON requests(from_peer, created_at);
    CREATE INDEX requests_to_created ON requests(to_peer, created_at);
    CREATE INDEX requests_state_created ON requests(state, created_at);
    CREATE INDEX requests_queued_to ON requests(to_peer, created_at) WHERE state = 'queued';
    CREATE INDEX requests_queued_ttl ON requests(expires_at) WHERE state = 'queued';
    CREATE INDEX requests_delivered_lease ON requests(lease_expires_at)
        WHERE state = 'delivered';
    CREATE INDEX requests_ack_deadline ON requests(reply_deadline_at)
        WHERE state = 'acknowledged';
    CREATE INDEX requests_claimed_by ON requests(claim_session)
        WHERE state IN ('delivered', 'acknowledged');
    CREATE INDEX requests_finished ON requests(finished_at)
        WHERE finished_at IS NOT NULL;
    CREATE INDEX requests_unnotified ON requests(from_peer, finished_at)
        WHERE notified_at IS NULL AND finished_at IS NOT NULL;

    CREATE TABLE drafts (
        id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        from_peer TEXT NOT NULL,
        from_session TEXT,
        to_peer TEXT NOT NULL,
        text TEXT,
        text_bytes INTEGER NOT NULL,
        ttl_seconds INTEGER NOT NULL,
        reply_within_seconds INTEGER,
        on_lost TEXT NOT NULL,
        max_attempts INTEGER NOT NULL,
        in_reply_to TEXT,
        depth INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        submitted_at INTEGER
    );
    CREATE INDEX drafts_open_from ON drafts(from_peer, expires_at) WHERE submitted_at IS NULL;

    CREATE TABLE events (
        seq INTEGER PRIMARY KEY,
        request_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        from_state TEXT,
        to_state TEXT NOT NULL,
        reason TEXT,
        actor TEXT NOT NULL,
        detail TEXT
    );
    CREATE INDEX events_request ON events(request_id, seq);
    CREATE INDEX events_at ON events(at);
    """,
    # 2: the side-effect ledger of `relay once` (design.md §10). pid/process_start identify the
    # relay process that records the outcome, child_pid/child_start the command it runs;
    # process_start is "<boot id>:<start time in ticks>" from /proc so a reused pid is not
    # mistaken for the original process. updated_at of a final entry is when it reached
    # that state (retention counts from it); output_pruned_at is set when `prune` dropped
    # stdout/stderr and kept the rest as a tombstone.
    """
    CREATE TABLE ledger (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        argv TEXT NOT NULL,
        cwd TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('awaiting_approval', 'approved', 'denied',
            'running', 'succeeded', 'failed', 'forgotten')),
        idempotent INTEGER NOT NULL DEFAULT 0,
        approve INTEGER NOT NULL DEFAULT 0,
        runs INTEGER NOT NULL DEFAULT 0,
        pid INTEGER,
        process_start TEXT,
        child_pid INTEGER,
        child_start TEXT,
        host TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        started_at INTEGER,
        finished_at INTEGER,
        exit_code INTEGER,
        signal INTEGER,
        stdout BLOB,
        stderr BLOB,
        stdout_bytes INTEGER,
        stderr_bytes INTEGER,
        decision TEXT,
        decided_by TEXT,
        decided_at INTEGER,
        decision_note TEXT,
        resolution TEXT,
        resolved_by TEXT,
        resolved_at INTEGER,
        resolution_note TEXT,
        output_pruned_at INTEGER
    );
    CREATE INDEX ledger_state ON ledger(state, updated_at);
    CREATE INDEX ledger_updated ON ledger(updated_at);
    """,
    # 3: Claude Code hook bookkeeping (design.md §12)
    """
    CREATE TABLE hook_state (
        session_id TEXT PRIMARY KEY,
        stop_blocks INTEGER NOT NULL DEFAULT 0,
        blocked_ids TEXT,
        updated_at INTEGER NOT NULL
    );
    """,
    # 4: `prune` finds the requests whose bodies it may drop without sorting every final
    # row (at 1,000,000 requests each batch of 500 sorted ~1M rows under the write lock)
    """
    CREATE INDEX IF NOT EXISTS requests_prunable ON requests(finished_at)
        WHERE pruned = 0 AND finished_at IS NOT NULL;
    """,
    # 5: wake waiters (design.md §12): at most one per relay session, identified by the
    # process that waits (pid, process_start "<boot id>:<ticks>", host) so that a waiter
    # that crashed does not keep the place of the next one; until_at is when it gives up.
    # hook_state.own_prompts: SHA-256 hashes of texts relay itself made a runtime submit as
    # a prompt (a Stop block's reason that Gemini CLI resubmits, a note `codex queue`
    # delivers), so such a prompt is not mistaken for a person's.
    """
    CREATE TABLE IF NOT EXISTS wake_waiters (
        session_id TEXT PRIMARY KEY,
        peer TEXT NOT NULL,
        runtime TEXT NOT NULL,
        pid INTEGER NOT NULL,
        process_start TEXT,
        host TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        until_at INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS wake_waiters_peer ON wake_waiters(peer);
    ALTER TABLE hook_state ADD COLUMN own_prompts TEXT;
    """,
    # 6: repair the ledger of a relay.db made by the first revisions. Migration 2 was
    # edited after it shipped, so such a ledger lacks columns that relay needs (the
    # command's pid, the run number, a person's decision and resolution, ...): on SQLite
    # ``REPAIRS[6]`` adds every one that is missing (NULL, runs 0). Then the index the
    # first revisions lacked. A database made by today's migration 2 changes nothing.
    """
    CREATE INDEX IF NOT EXISTS ledger_updated ON ledger(updated_at);
    """,
    # 7: the queue cap (design.md §4) counts a recipient's open requests inside the write
    # transaction of every send and submit: this index holds only open rows, so the count
    # reads at most the cap's worth of index entries however many finished requests exist
    """
    CREATE INDEX IF NOT EXISTS requests_open_to ON requests(to_peer)
        WHERE state IN ('queued', 'delivered', 'acknowledged');
    """,
    # 8: requests.state holds only the states of design.md §5 (a CHECK, as sessions and
    # the ledger have). SQLite adds a CHECK only by rebuilding the table: the rows move
    # with their rowids (relay's tie-breaker) and the indexes are made again. While the
    # table is swapped, legacy_alter_table keeps SQLite from rewriting or checking the
    # views that name requests (relay's, and any of a person's own). PostgreSQL adds the
    # constraint in place (pg_migrations.py).
    """
    PRAGMA legacy_alter_table = ON;
    CREATE TABLE requests_v8 (
        id TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        from_peer TEXT NOT NULL,
        to_peer TEXT NOT NULL,
        from_session TEXT,
        text TEXT,
        text_bytes INTEGER NOT NULL,
        reply TEXT,
        state TEXT NOT NULL CHECK (state IN ('queued', 'delivered', 'acknowledged',
            'completed', 'failed', 'rejected', 'expired', 'cancelled', 'delivery_unknown')),
        reason TEXT,
        detail TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        delivered_at INTEGER,
        acknowledged_at INTEGER,
        finished_at INTEGER,
        lease_expires_at INTEGER,
        claim_session TEXT,
        reply_deadline_at INTEGER,
        ttl_seconds INTEGER NOT NULL,
        reply_within_seconds INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        on_lost TEXT NOT NULL,
        in_reply_to TEXT,
        depth INTEGER NOT NULL DEFAULT 0,
        pruned INTEGER NOT NULL DEFAULT 0,
        notified_at INTEGER
    );
    INSERT INTO requests_v8 (rowid, id, fingerprint, from_peer, to_peer, from_session, text,
        text_bytes, reply, state, reason, detail, created_at, updated_at, expires_at,
        delivered_at, acknowledged_at, finished_at, lease_expires_at, claim_session,
        reply_deadline_at, ttl_seconds, reply_within_seconds, attempts, max_attempts,
        on_lost, in_reply_to, depth, pruned, notified_at)
    SELECT rowid, id, fingerprint, from_peer, to_peer, from_session, text,
        text_bytes, reply, state, reason, detail, created_at, updated_at, expires_at,
        delivered_at, acknowledged_at, finished_at, lease_expires_at, claim_session,
        reply_deadline_at, ttl_seconds, reply_within_seconds, attempts, max_attempts,
        on_lost, in_reply_to, depth, pruned, notified_at
    FROM requests;
    DROP TABLE requests;
    ALTER TABLE requests_v8 RENAME TO requests;
    PRAGMA legacy_alter_table = OFF;
    CREATE INDEX requests_created ON requests(created_at);
    CREATE INDEX requests_from_created ON requests(from_peer, created_at);
    CREATE INDEX requests_to_created ON requests(to_peer, created_at);
    CREATE INDEX requests_state_created ON requests(state, created_at);
    CREATE INDEX requests_queued_to ON requests(to_peer, created_at) WHERE state = 'queued';
    CREATE INDEX requests_queued_ttl ON requests(expires_at) WHERE state = 'queued';
    CREATE INDEX requests_delivered_lease ON requests(lease_expires_at)
        WHERE state = 'delivered';
    CREATE INDEX requests_ack_deadline ON requests(reply_deadline_at)
        WHERE state = 'acknowledged';
    CREATE INDEX requests_claimed_by ON requests(claim_session)
        WHERE state IN ('delivered', 'acknowledged');
    CREATE INDEX requests_finished ON requests(finished_at)
        WHERE finished_at IS NOT NULL;
    CREATE INDEX requests_unnotified ON requests(from_peer, finished_at)
        WHERE notified_at IS NULL AND finished_at IS NOT NULL;
    CREATE INDEX requests_prunable ON requests(finished_at)
        WHERE pruned = 0 AND finished_at IS NOT NULL;
    CREATE INDEX requests_open_to ON requests(to_peer)
        WHERE state IN ('queued', 'delivered', 'acknowledged');
    """,
    # 9: a pid means nothing outside its PID namespace (design.md §10): a ledger entry
    # records where its pids were counted, "<boot id>:<inode of /proc/self/ns/pid>" of the
    # relay process that runs it. An entry of another namespace (a container or sandbox
    # with the same host name) is another host's; one recorded before this column (NULL)
    # is judged as one of another host too, since relay cannot tell where it ran.
    """
    ALTER TABLE ledger ADD COLUMN pid_namespace TEXT;
    """,
    # 10: every claim, one row each (design.md §6): the request it took, the peer and
    # session that took it, when (the request's delivered_at then), and the attempt id the
    # caller chose (`claim --attempt`, NULL for a claim without one; at most one claim per
    # attempt id). A retry of an attempt is answered from its row, and `claim --again`
    # says what became of the request a claim took even after the request moved on.
    """
    CREATE TABLE IF NOT EXISTS claims (
        attempt TEXT,
        request_id TEXT NOT NULL,
        peer TEXT NOT NULL,
        session_id TEXT NOT NULL,
        claimed_at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX IF NOT EXISTS claims_attempt ON claims(attempt)
        WHERE attempt IS NOT NULL;
    CREATE INDEX IF NOT EXISTS claims_session ON claims(session_id, claimed_at);
    CREATE INDEX IF NOT EXISTS claims_request ON claims(request_id);
    CREATE INDEX IF NOT EXISTS claims_peer ON claims(peer, claimed_at);
    """,
    # 11: a claim made with an attempt id outlives its request (design.md §6): when prune
    # removes the request's tombstone it removes the claims made without one and marks
    # these with when (request_removed_at), so a very late retry of the attempt is told
    # that its request was pruned, not that it took nothing; prune removes them in turn
    # once the tombstones' age has passed again.
    """
    ALTER TABLE claims ADD COLUMN request_removed_at INTEGER;
    CREATE INDEX IF NOT EXISTS claims_removed ON claims(request_removed_at)
        WHERE request_removed_at IS NOT NULL;
    """,
    # 12: when a session first had two claims in flight at once (design.md §6): a claim
    # taken while the session held another. From then on relay cannot take a claim made
    # without an attempt id for the asker's own, and `claim --again` without one shows
    # no request's text.
    """
    ALTER TABLE sessions ADD COLUMN claims_overlap_at INTEGER;
    """,
    # 13: a batch of notices is tied to the call that told it (design.md §6): every
    # request told carries the batch id of that call (`notices` or the prompt hook), and a
    # session (a caller without one: its peer) keeps the batch of its latest `notices`
    # call, told something or nothing, which `notices --again` shows again.
    """
    ALTER TABLE requests ADD COLUMN notice_batch TEXT;
    CREATE INDEX IF NOT EXISTS requests_notice_batch ON requests(notice_batch)
        WHERE notice_batch IS NOT NULL;
    ALTER TABLE sessions ADD COLUMN notices_batch TEXT;
    ALTER TABLE sessions ADD COLUMN notices_at INTEGER;
    ALTER TABLE peers ADD COLUMN notices_batch TEXT;
    ALTER TABLE peers ADD COLUMN notices_at INTEGER;
    """,
    # 14: the SHA-256 of a request's text (design.md §14), so that a send whose text,
    # sender and recipient equal an open request's under another id (a retry whose id has
    # a typo) is noticed by one look in a partial index of open requests, never a scan.
    # Requests stored before it have none and are not compared. Its leading column serves
    # the queue cap's count as requests_open_to (migration 7) did, which it replaces: one
    # index of open requests to keep up to date, not two.
    """
    ALTER TABLE requests ADD COLUMN text_hash TEXT;
    CREATE INDEX IF NOT EXISTS requests_open_text ON requests(to_peer, from_peer, text_hash)
        WHERE state IN ('queued', 'delivered', 'acknowledged');
    DROP INDEX IF EXISTS requests_open_to;
    """,
    # 15: what each session's hooks last showed (design.md §19): its activity (working,
    # needs_person, idle, turn_failed, gone; NULL: nothing reported), since when, the cause
    # (permission or question; how a session went), the runtime's own words (a tool name,
    # a question, an error: untrusted, one line), the runtime's event that set it and when
    # the session's last event came, whether relay hears the end of a wait for a person
    # (activity_end_seen), and the alert of this episode (activity_alert: 'owed' until a
    # relay process starts it, then 'sent'; NULL: none). settings: what a person set in
    # this home (`relay notify set`), one row per key.
    """
    ALTER TABLE sessions ADD COLUMN activity TEXT;
    ALTER TABLE sessions ADD COLUMN activity_since INTEGER;
    ALTER TABLE sessions ADD COLUMN activity_cause TEXT;
    ALTER TABLE sessions ADD COLUMN activity_detail TEXT;
    ALTER TABLE sessions ADD COLUMN activity_event TEXT;
    ALTER TABLE sessions ADD COLUMN activity_event_at INTEGER;
    ALTER TABLE sessions ADD COLUMN activity_end_seen INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN activity_alert TEXT;
    CREATE INDEX IF NOT EXISTS sessions_alert_owed ON sessions(activity_alert)
        WHERE activity_alert = 'owed';
    CREATE TABLE IF NOT EXISTS settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    """,
]

# The ledger columns added to migration 2 after it first shipped, as migration 2 defines
# them now (a column that names no constraint other than NOT NULL DEFAULT can be added
# by ALTER TABLE on every row that exists).
LEDGER_COLUMNS_ADDED_LATE = (
    ("runs", "INTEGER NOT NULL DEFAULT 0"),
    ("child_pid", "INTEGER"),
    ("child_start", "TEXT"),
    ("signal", "INTEGER"),
    ("decision", "TEXT"),
    ("decision_note", "TEXT"),
    ("resolution", "TEXT"),
    ("resolved_by", "TEXT"),
    ("resolved_at", "INTEGER"),
    ("resolution_note", "TEXT"),
    ("output_pruned_at", "INTEGER"),
)


def _repair_ledger_columns(db: Database) -> None:
    """Migration 6 on SQLite: add the ledger columns a relay.db of the first revisions
    lacks (design.md §10)."""
    have = {row[1] for row in db.all("PRAGMA table_info(ledger)")}
    for name, decl in LEDGER_COLUMNS_ADDED_LATE:
        if name not in have:
            db.execute(f"ALTER TABLE ledger ADD COLUMN {name} {decl}")


REPAIRS: dict[int, Callable[[Database], None]] = {6: _repair_ledger_columns}

LATEST = len(MIGRATIONS)


def check_version(version: int, where: str, foreign: Callable[[], str | None]) -> None:
    """The schema-version guard of both backends (design.md §2): a database of a newer
    relay is ``schema_too_new``; one at version 0 that holds tables is not relay's
    (``foreign`` says so, or None) and is ``database_corrupt``."""
    if version > LATEST:
        raise RelayError(
            "schema_too_new",
            f"{where} has schema version {version}; this relay understands up to {LATEST}",
        )
    if version == 0:
        why = foreign()
        if why:
            raise RelayError("database_corrupt", why)
