"""The migrations of migrations.py as PostgreSQL runs them (design.md §13), written out
once per migration instead of translated: 64-bit integers (BIGINT, BIGSERIAL), BYTEA for
BLOB, text compared byte by byte as SQLite does (COLLATE "C"), and on every table the
``rowid`` column that SQLite has implicitly and relay's statements use as a tie-breaker
(last, so ``SELECT *`` lists the columns in SQLite's order; on a table whose key is an
INTEGER PRIMARY KEY it is that key). Same numbering and the same append-only rule as
SQLite's: ``PG_MIGRATIONS[n - 1]`` is migration n, and the tests pin each one's text.
"""

from __future__ import annotations

PG_MIGRATIONS: list[str] = [
    # 1
    """
    CREATE TABLE peers (
        name TEXT COLLATE "C" PRIMARY KEY,
        kind TEXT COLLATE "C" NOT NULL,
        created_at BIGINT NOT NULL,
        last_seen_at BIGINT,
        hook_seen_at BIGINT,
        rowid BIGSERIAL NOT NULL
    );
    CREATE TABLE sessions (
        id TEXT COLLATE "C" PRIMARY KEY,
        peer TEXT COLLATE "C" NOT NULL REFERENCES peers(name),
        token_hash TEXT COLLATE "C" NOT NULL UNIQUE,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('active', 'left', 'expired',
            'superseded')),
        created_at BIGINT NOT NULL,
        lease_seconds BIGINT NOT NULL,
        lease_expires_at BIGINT NOT NULL,
        ended_at BIGINT,
        waiting_until BIGINT,
        agent_session_id TEXT COLLATE "C",
        rowid BIGSERIAL NOT NULL
    );
    CREATE INDEX sessions_active_peer ON sessions(peer) WHERE state = 'active';
    CREATE INDEX sessions_active_lease ON sessions(lease_expires_at) WHERE state = 'active';
    CREATE INDEX sessions_agent ON sessions(agent_session_id)
        WHERE agent_session_id IS NOT NULL;

    CREATE TABLE requests (
        id TEXT COLLATE "C" PRIMARY KEY,
        fingerprint TEXT COLLATE "C" NOT NULL,
        from_peer TEXT COLLATE "C" NOT NULL,
        to_peer TEXT COLLATE "C" NOT NULL,
        from_session TEXT COLLATE "C",
        text TEXT COLLATE "C",
        text_bytes BIGINT NOT NULL,
        reply TEXT COLLATE "C",
        state TEXT COLLATE "C" NOT NULL,
        reason TEXT COLLATE "C",
        detail TEXT COLLATE "C",
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        delivered_at BIGINT,
        acknowledged_at BIGINT,
        finished_at BIGINT,
        lease_expires_at BIGINT,
        claim_session TEXT COLLATE "C",
        reply_deadline_at BIGINT,
        ttl_seconds BIGINT NOT NULL,
        reply_within_seconds BIGINT,
        attempts BIGINT NOT NULL DEFAULT 0,
        max_attempts BIGINT NOT NULL,
        on_lost TEXT COLLATE "C" NOT NULL,
        in_reply_to TEXT COLLATE "C",
        depth BIGINT NOT NULL DEFAULT 0,
        pruned BIGINT NOT NULL DEFAULT 0,
        notified_at BIGINT,
        rowid BIGSERIAL NOT NULL
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
        id TEXT COLLATE "C" PRIMARY KEY,
        fingerprint TEXT COLLATE "C" NOT NULL,
        from_peer TEXT COLLATE "C" NOT NULL,
        from_session TEXT COLLATE "C",
        to_peer TEXT COLLATE "C" NOT NULL,
        text TEXT COLLATE "C",
        text_bytes BIGINT NOT NULL,
        ttl_seconds BIGINT NOT NULL,
        reply_within_seconds BIGINT,
        on_lost TEXT COLLATE "C" NOT NULL,
        max_attempts BIGINT NOT NULL,
        in_reply_to TEXT COLLATE "C",
        depth BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        submitted_at BIGINT,
        rowid BIGSERIAL NOT NULL
    );
    CREATE INDEX drafts_open_from ON drafts(from_peer, expires_at) WHERE submitted_at IS NULL;

    CREATE TABLE events (
        seq BIGSERIAL PRIMARY KEY,
        request_id TEXT COLLATE "C" NOT NULL,
        at BIGINT NOT NULL,
        from_state TEXT COLLATE "C",
        to_state TEXT COLLATE "C" NOT NULL,
        reason TEXT COLLATE "C",
        actor TEXT COLLATE "C" NOT NULL,
        detail TEXT COLLATE "C",
        rowid BIGINT GENERATED ALWAYS AS (seq) STORED
    );
    CREATE INDEX events_request ON events(request_id, seq);
    CREATE INDEX events_at ON events(at);
""",
    # 2
    """
    CREATE TABLE ledger (
        key TEXT COLLATE "C" PRIMARY KEY,
        fingerprint TEXT COLLATE "C" NOT NULL,
        argv TEXT COLLATE "C" NOT NULL,
        cwd TEXT COLLATE "C" NOT NULL,
        state TEXT COLLATE "C" NOT NULL CHECK (state IN ('awaiting_approval', 'approved', 'denied',
            'running', 'succeeded', 'failed', 'forgotten')),
        idempotent BIGINT NOT NULL DEFAULT 0,
        approve BIGINT NOT NULL DEFAULT 0,
        runs BIGINT NOT NULL DEFAULT 0,
        pid BIGINT,
        process_start TEXT COLLATE "C",
        child_pid BIGINT,
        child_start TEXT COLLATE "C",
        host TEXT COLLATE "C",
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        started_at BIGINT,
        finished_at BIGINT,
        exit_code BIGINT,
        signal BIGINT,
        stdout BYTEA,
        stderr BYTEA,
        stdout_bytes BIGINT,
        stderr_bytes BIGINT,
        decision TEXT COLLATE "C",
        decided_by TEXT COLLATE "C",
        decided_at BIGINT,
        decision_note TEXT COLLATE "C",
        resolution TEXT COLLATE "C",
        resolved_by TEXT COLLATE "C",
        resolved_at BIGINT,
        resolution_note TEXT COLLATE "C",
        output_pruned_at BIGINT,
        rowid BIGSERIAL NOT NULL
    );
    CREATE INDEX ledger_state ON ledger(state, updated_at);
    CREATE INDEX ledger_updated ON ledger(updated_at);
""",
    # 3
    """
    CREATE TABLE hook_state (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        stop_blocks BIGINT NOT NULL DEFAULT 0,
        blocked_ids TEXT COLLATE "C",
        updated_at BIGINT NOT NULL,
        rowid BIGSERIAL NOT NULL
    );
""",
    # 4
    """
    CREATE INDEX IF NOT EXISTS requests_prunable ON requests(finished_at)
        WHERE pruned = 0 AND finished_at IS NOT NULL;
""",
    # 5
    """
    CREATE TABLE IF NOT EXISTS wake_waiters (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        peer TEXT COLLATE "C" NOT NULL,
        runtime TEXT COLLATE "C" NOT NULL,
        pid BIGINT NOT NULL,
        process_start TEXT COLLATE "C",
        host TEXT COLLATE "C" NOT NULL,
        started_at BIGINT NOT NULL,
        until_at BIGINT NOT NULL,
        rowid BIGSERIAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS wake_waiters_peer ON wake_waiters(peer);
    ALTER TABLE hook_state ADD COLUMN own_prompts TEXT COLLATE "C";
""",
    # 6
    """
    CREATE INDEX IF NOT EXISTS ledger_updated ON ledger(updated_at);
""",
    # 7
    """
    CREATE INDEX IF NOT EXISTS requests_open_to ON requests(to_peer)
        WHERE state IN ('queued', 'delivered', 'acknowledged');
""",
    # 8
    """
    ALTER TABLE requests ADD CONSTRAINT requests_state_check CHECK (state IN ('queued',
        'delivered', 'acknowledged', 'completed', 'failed', 'rejected', 'expired',
        'cancelled', 'delivery_unknown'));
    """,
    # 9
    """
    ALTER TABLE ledger ADD COLUMN pid_namespace TEXT COLLATE "C";
    """,
    # 10
    """
    CREATE TABLE IF NOT EXISTS claims (
        attempt TEXT COLLATE "C",
        request_id TEXT COLLATE "C" NOT NULL,
        peer TEXT COLLATE "C" NOT NULL,
        session_id TEXT COLLATE "C" NOT NULL,
        claimed_at BIGINT NOT NULL,
        rowid BIGSERIAL NOT NULL
    );
    CREATE UNIQUE INDEX IF NOT EXISTS claims_attempt ON claims(attempt)
        WHERE attempt IS NOT NULL;
    CREATE INDEX IF NOT EXISTS claims_session ON claims(session_id, claimed_at);
    CREATE INDEX IF NOT EXISTS claims_request ON claims(request_id);
    CREATE INDEX IF NOT EXISTS claims_peer ON claims(peer, claimed_at);
    """,
    # 11
    """
    ALTER TABLE claims ADD COLUMN request_removed_at BIGINT;
    CREATE INDEX IF NOT EXISTS claims_removed ON claims(request_removed_at)
        WHERE request_removed_at IS NOT NULL;
    """,
    # 12
    """
    ALTER TABLE sessions ADD COLUMN claims_overlap_at BIGINT;
    """,
    # 13
    """
    ALTER TABLE requests ADD COLUMN notice_batch TEXT COLLATE "C";
    CREATE INDEX IF NOT EXISTS requests_notice_batch ON requests(notice_batch)
        WHERE notice_batch IS NOT NULL;
    ALTER TABLE sessions ADD COLUMN notices_batch TEXT COLLATE "C";
    ALTER TABLE sessions ADD COLUMN notices_at BIGINT;
    ALTER TABLE peers ADD COLUMN notices_batch TEXT COLLATE "C";
    ALTER TABLE peers ADD COLUMN notices_at BIGINT;
    """,
    # 14
    """
    ALTER TABLE requests ADD COLUMN text_hash TEXT COLLATE "C";
    CREATE INDEX IF NOT EXISTS requests_open_text ON requests(to_peer, from_peer, text_hash)
        WHERE state IN ('queued', 'delivered', 'acknowledged');
    DROP INDEX IF EXISTS requests_open_to;
    """,
    # 15
    """
    ALTER TABLE sessions ADD COLUMN activity TEXT COLLATE "C";
    ALTER TABLE sessions ADD COLUMN activity_since BIGINT;
    ALTER TABLE sessions ADD COLUMN activity_cause TEXT COLLATE "C";
    ALTER TABLE sessions ADD COLUMN activity_detail TEXT COLLATE "C";
    ALTER TABLE sessions ADD COLUMN activity_event TEXT COLLATE "C";
    ALTER TABLE sessions ADD COLUMN activity_event_at BIGINT;
    ALTER TABLE sessions ADD COLUMN activity_end_seen BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN activity_alert TEXT COLLATE "C";
    CREATE INDEX IF NOT EXISTS sessions_alert_owed ON sessions(activity_alert)
        WHERE activity_alert = 'owed';
    CREATE TABLE IF NOT EXISTS settings (
        key TEXT COLLATE "C" PRIMARY KEY,
        value TEXT COLLATE "C" NOT NULL,
        updated_at BIGINT NOT NULL,
        rowid BIGSERIAL NOT NULL
    );
    """,
]
