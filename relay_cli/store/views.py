"""Read-only views of relay.db for people and their tools (sqlite-utils, datasette, sqlite3).

relay keeps times as integer milliseconds and peer text verbatim. These views show times as
the RFC 3339 strings of relay's JSON (``2026-11-29T18:52:01.123Z``) and leave out every
column that holds free text a peer or a command wrote (request text, reply, detail,
notes, a command's cwd and output), so printing a view on a terminal replays no escape
sequence. They show what is stored: a deadline that passed but that no relay command has
applied yet still shows the old state (``relay sweep`` applies it). docs/data.md
documents each column.

They are not part of the numbered schema (migrations.py): relay creates them, or
replaces one whose definition differs from this relay's, when it opens the database
(design.md §2). A view of another name is never touched.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing.TYPE_CHECKING, without importing typing: design.md §18)


if TYPE_CHECKING:
    from .api import Database


def iso(column: str) -> str:
    """SQL for ``clock.iso`` of an integer-milliseconds column (NULL stays NULL)."""
    return (
        f"strftime('%Y-%m-%dT%H:%M:%S', {column} / 1000, 'unixepoch') "
        f"|| printf('.%03dZ', {column} % 1000)"
    )


VIEWS: dict[str, str] = {
    # The request object's fields (design.md §7) without detail, and tombstones too
    # (pruned = 1); from/to keep the table's names so that no column needs quoting.
    "requests_view": f"""SELECT id, from_peer, to_peer, state, reason,
    {iso("created_at")} AS created_at,
    {iso("updated_at")} AS updated_at,
    {iso("expires_at")} AS expires_at,
    {iso("delivered_at")} AS delivered_at,
    {iso("acknowledged_at")} AS acknowledged_at,
    {iso("finished_at")} AS finished_at,
    CASE WHEN state = 'delivered' THEN {iso("lease_expires_at")} END AS lease_expires_at,
    {iso("reply_deadline_at")} AS reply_deadline_at,
    attempts, max_attempts, on_lost, in_reply_to, depth, text_bytes, pruned
FROM requests""",
    # Every transition (relay show ID --events) without detail.
    "events_view": f"""SELECT seq, request_id, {iso("at")} AS at, from_state, to_state, reason, actor
FROM events""",
    # Each peer with its stored active session, if any (a lapsed lease shows until swept).
    "peers_view": f"""SELECT p.name, p.kind, {iso("p.created_at")} AS created_at,
    {iso("p.last_seen_at")} AS last_seen_at,
    {iso("p.hook_seen_at")} AS hook_seen_at,
    s.id AS session_id,
    {iso("s.created_at")} AS session_started_at,
    {iso("s.lease_expires_at")} AS lease_expires_at
FROM peers p LEFT JOIN sessions s ON s.id = (
    SELECT id FROM sessions WHERE peer = p.name AND state = 'active'
    ORDER BY created_at DESC LIMIT 1)""",
    # The side-effect ledger of `relay once`: argv is stored as ASCII-only JSON (C0
    # controls and non-ASCII characters escaped), so it stays; cwd, output and notes do not.
    "ledger_view": f"""SELECT key, state, argv, host, runs, idempotent, approve,
    exit_code, signal, stdout_bytes, stderr_bytes,
    {iso("created_at")} AS created_at,
    {iso("updated_at")} AS updated_at,
    {iso("started_at")} AS started_at,
    {iso("finished_at")} AS finished_at,
    decision, decided_by, {iso("decided_at")} AS decided_at,
    resolution, resolved_by, {iso("resolved_at")} AS resolved_at,
    {iso("output_pruned_at")} AS output_pruned_at
FROM ledger""",
}


def _create(name: str) -> str:
    return f"CREATE VIEW {name} AS {VIEWS[name]}"


def _stale(db: Database) -> list[str]:
    """Views to (re)create: missing, or a view of that name with another definition. A
    table or index that took one of the names is left alone (the view is then absent)."""
    stored = {
        r[0]: (r[1], r[2])
        for r in db.all(
            "SELECT name, type, sql FROM sqlite_master WHERE name IN "
            f"({', '.join('?' * len(VIEWS))})",
            list(VIEWS),
        )
    }
    return [
        name
        for name in VIEWS
        if name not in stored
        or stored[name] == ("view", stored[name][1])
        and stored[name][1] != _create(name)
    ]


def sync(db: Database) -> None:
    """Create the views that are missing and replace those whose definition differs.

    One read of sqlite_master when they are current (every open); otherwise one
    ``BEGIN IMMEDIATE`` that looks again, so concurrent first opens create them once.
    """
    if not _stale(db):
        return
    with db.transaction():
        for name in _stale(db):
            db.execute(f"DROP VIEW IF EXISTS {name}")
            db.execute(_create(name))
