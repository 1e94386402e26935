"""relay's defaults, limits and vocabularies (design.md §3, §4, §6, §10, §12, §13), defined
once: the code checks them, and the error table's fixed hints (``errors``), the commands'
help and the agent guide state them from here, so no text can name another value than
the one enforced. Every module that uses one imports it from here, under this name (no
module passes one on: ``clock.TTL`` is not a name). It imports nothing of relay's:
everything may import this."""

from __future__ import annotations

DAY_S = 86400

# ---------------------------------------------------------------- requests (§4)
MAX_TEXT_BYTES = 32768  # a request's text, a reply
MAX_DEPTH = 8  # in_reply_to chain
MIN_PREFIX = 8  # characters of an id a command that names an existing request takes
MAX_OPEN_DRAFTS = 100  # unsubmitted drafts per sender
DRAFT_TTL_S = 3600  # a draft lives this long unsubmitted
DEFAULT_TTL_S = 3600  # `send --ttl`
DEFAULT_CLAIM_LEASE_S = 120  # `claim --lease`
DEFAULT_WAIT_S = 50  # `wait --timeout`, `claim --wait`, `once --approve`'s wait
DEFAULT_MAX_ATTEMPTS = 3  # `send --max-attempts`
MAX_ATTEMPTS_RANGE = (1, 100)
# New requests per sender per minute (RATE_WINDOW_MS); RELAY_RATE_LIMIT sets another
# limit for the calling process.
DEFAULT_RATE_LIMIT = 60
RATE_WINDOW_MS = 60_000
# Open requests (queued, delivered, acknowledged) per recipient; RELAY_QUEUE_CAP sets
# another cap for the calling process. A refused send is told to retry after
# QUEUE_RETRY_AFTER_S: the queue shrinks only when its recipient claims and finishes work
# or a deadline passes, neither of which relay can foresee, and one minute (the rate
# limit's window) keeps a sender that honours it to one attempt a minute per request.
QUEUE_CAP = 1000
QUEUE_RETRY_AFTER_S = 60
QUEUE_WARN_FRACTION = 0.8  # doctor warns above 80 % of the cap
SWEEP_BATCH = 250  # one batch of due transitions: ~40 ms of write lock at 1M requests

# The request states (§5), in the order the docs list them; what moves a request between
# them is requests/states.py's table; the open states are those not final.
STATES = (
    "queued",
    "delivered",
    "acknowledged",
    "completed",
    "failed",
    "rejected",
    "expired",
    "cancelled",
    "delivery_unknown",
)
FINAL_STATES = frozenset(
    {"completed", "failed", "rejected", "expired", "cancelled", "delivery_unknown"}
)
OPEN_STATES = tuple(s for s in STATES if s not in FINAL_STATES)
# the open states of a claimed request: a claim holds it (its lease runs) until it ends
CLAIMED_STATES = tuple(s for s in OPEN_STATES if s != "queued")

# ---------------------------------------------------------------- peers and sessions (§3)
DEFAULT_SESSION_LEASE_S = 45  # `peers join --lease`, `relay run --lease`
# a `human` peer's: its shell sends no heartbeats while the person reads (design.md §3)
DEFAULT_HUMAN_SESSION_LEASE_S = 3600


def default_session_lease(kind: str | None) -> int:
    """The session lease a join of ``kind`` gets without --lease (design.md §3)."""
    return DEFAULT_HUMAN_SESSION_LEASE_S if kind == "human" else DEFAULT_SESSION_LEASE_S


HOOK_RECENT_MS = 10 * 60 * 1000  # a hook ran this recently: the peer's runtime has hooks
# The lease of a session a hook joins (an agent has no heartbeat between its turns), and
# how long a wake waiter waits by default: as long as that session lives unrenewed.
HOOK_LEASE_S = 3600

# A peer name, matched against the whole value (fullmatch) in ASCII: "alice\n" is not one.
NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,63}"
# A peer's kind (design.md §3) and the agent runtimes relay has hooks for (design.md §12),
# as types: a misspelt kind or runtime is a type error.
# (for the type checker only: a hook starts without typing, design.md §18; a test reads
# them from this file)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    RuntimeName = Literal["claude", "codex", "gemini", "opencode", "copilot"]
    Kind = Literal[RuntimeName, "aider", "human", "script", "other"]
KINDS: tuple[Kind, ...] = (
    "claude",
    "codex",
    "gemini",
    "opencode",
    "copilot",
    "aider",
    "human",
    "script",
    "other",
)

# ---------------------------------------------------------------- durations (§6, §8)
# The ranges options take, in seconds: (low, high)
TTL = (30, 7 * DAY_S)
REPLY_WITHIN = (30, 7 * DAY_S)
CLAIM_LEASE = (10, 3600)
SESSION_LEASE = (10, DAY_S)
WAIT = (0, 600)
PRUNE_AGE = (0, 10 * 365 * DAY_S)
EXPORT_SINCE = (1, 3650 * DAY_S)
MAX_OFFSET_S = 100 * 365 * DAY_S  # RELAY_TIME_OFFSET

# ---------------------------------------------------------------- retention (§9)
DEFAULT_RETENTION_S = 30 * DAY_S  # `prune --older-than`
TOMBSTONE_S = 120 * DAY_S  # a pruned request's row (and a ledger tombstone) is kept so long

# ---------------------------------------------------------------- the ledger (§10, §13)
# Across machines a process on another host cannot be looked at: while its command runs,
# the relay process renews its entry every RENEW_S seconds; an entry of another host
# without a renewal for STALE_S seconds is effect_unknown.
RENEW_S = 10
STALE_S = 30
TAIL_BYTES = 64 * 1024  # the captured stdout and stderr of a command, each

# ---------------------------------------------------------------- agents' hooks (§12)
MAX_STOP_BLOCKS = 3  # a Stop hook keeps an agent going this often in a row; then lets it stop
HOOK_TIMEOUT_S = 10  # the runtime's timeout for every event hook
WAKE_TIMEOUT_S = HOOK_LEASE_S + 60  # a waiter: its own timeout (HOOK_LEASE_S) ends it first
FIND_GRACE_S = 30.0  # how long a waiter looks for its session (SessionStart races the hook)
CODEX_QUEUE_TIMEOUT_S = 30  # `codex queue` of a wake-up
CODEX_START_TIMEOUT_S = 30.0  # Codex's app server listens within this, else usage_error
CODEX_STOP_GRACE_S = 5.0
COUNT_CAP = 10_000  # a queue is counted no further than this
MAX_HOOK_INPUT_BYTES = 16 * 1024 * 1024  # a runtime's event
MAX_SETTINGS_BYTES = 4 * 1024 * 1024  # a runtime's settings file larger than this is not read

# ---------------------------------------------------------------- activity and alerts (§19)
# What a session's hooks last showed (design.md §19), in the order a person reads them;
# ``unknown``: no hook of the session reported anything relay can name.
ACTIVITIES = ("needs_person", "turn_failed", "working", "idle", "gone", "unknown")
NEEDS_PERSON_CAUSES = ("permission", "question")
# how a session went: its own end (SessionEnd, `peers leave`, `relay run` ending), its
# lease lapsed, a newer session of its name replaced it
GONE_CAUSES = {"left": "ended", "expired": "lease_lapsed", "superseded": "superseded"}
SILENCE_NOTE_MS = 10 * 60 * 1000  # `working` with no event for this long says so
NEEDS_PERSON_WARN_MS = 5 * 60 * 1000  # doctor warns for an agent needing a person longer
MAX_ACTIVITY_DETAIL = 160  # characters of a runtime's tool name, question or error kept
NOTIFY_TEST_TIMEOUT_S = 10  # `relay notify test` waits this long for the command

# ---------------------------------------------------------------- the store (§9, §13)
BUSY_TIMEOUT_S = 5.0  # SQLite waits this long for the write lock, then `busy`
PG_LOCK_TIMEOUT_MS = 5000  # the same on PostgreSQL
PG_CONNECT_TIMEOUT_S = 5
PG_STATEMENT_TIMEOUT_MS = 60000
PG_IDLE_TX_TIMEOUT_MS = 60000
PG_RETRY_AFTER_S = 5.0  # retry_after_seconds of database_unavailable
CLOCK_WARN_MS = 1000  # doctor warns when the server's clock is further from this machine's
