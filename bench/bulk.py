"""Build big relay databases fast with direct SQL that matches relay's schema.

Rows look exactly like the ones relay writes (same columns, fingerprints, and the event
chain each state needs), so every command works on them and the crash checks replay them.
"""

from __future__ import annotations

import random
import sqlite3
import time
import uuid
from pathlib import Path

from .common import relay

DAY = 86_400_000

# (state, share): the event chain of each state is in CHAINS.
MIX = (
    ("completed", 0.85),
    ("expired", 0.04),
    ("failed", 0.03),
    ("rejected", 0.02),
    ("cancelled", 0.02),
    ("delivery_unknown", 0.02),
    ("queued", 0.02),
)
CHAINS = {
    "queued": [(None, "queued", None)],
    "completed": [
        (None, "queued", None),
        ("queued", "delivered", None),
        ("delivered", "acknowledged", None),
        ("acknowledged", "completed", None),
    ],
    "expired": [(None, "queued", None), ("queued", "expired", "request_expired")],
    "failed": [
        (None, "queued", None),
        ("queued", "delivered", None),
        ("delivered", "failed", "failed_by_recipient"),
    ],
    "rejected": [
        (None, "queued", None),
        ("queued", "delivered", None),
        ("delivered", "rejected", "rejected_by_recipient"),
    ],
    "cancelled": [(None, "queued", None), ("queued", "cancelled", "cancelled_by_sender")],
    "delivery_unknown": [
        (None, "queued", None),
        ("queued", "delivered", None),
        ("delivered", "delivery_unknown", "claim_lease_expired"),
    ],
}
TEXT = "please review the change in src/module.py and say whether the tests cover it. " * 2


def init_home(home: Path, peers=("a", "b")) -> None:
    """Create the database through the real relay (schema, modes) and add peers."""
    for p in peers:
        r = relay(home, "peers", "add", p, "--kind", "script", "--json")
        if r.code != 0:
            raise RuntimeError(r.err)


def insert(
    home: Path,
    n: int,
    *,
    now: int,
    spread_ms: int,
    states=MIX,
    pairs=(("a", "b"), ("b", "a")),
    ttl_s: int = 3600,
    seed: int = 1,
    queued_ttl_s: int | None = None,
    batch: int = 50_000,
) -> dict:
    """Insert ``n`` requests created over ``[now - spread_ms, now)`` with their events.

    Queued rows get ``queued_ttl_s`` (default ``ttl_s``) counted from ``now``, so they are
    not due unless the caller moves the clock. Returns counts by state.
    """
    from relay_cli.requests.validate import fingerprint

    rng = random.Random(seed)
    names = [s for s, _ in states]
    weights = [w for _, w in states]
    db = sqlite3.connect(home / "relay.db", isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA cache_size = -1000000")
    counts: dict[str, int] = {}
    t0 = time.perf_counter()
    step = max(1, spread_ms // max(1, n))
    created = now - spread_ms
    done = 0
    while done < n:
        reqs, evs = [], []
        for _ in range(min(batch, n - done)):
            created += step
            state = rng.choices(names, weights)[0]
            counts[state] = counts.get(state, 0) + 1
            frm, to = pairs[rng.randrange(len(pairs))]
            rid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            ttl = ttl_s
            expires = created + ttl * 1000
            if state == "queued":
                ttl = queued_ttl_s or ttl_s
                expires = now + ttl * 1000
            text = TEXT
            fp = fingerprint([frm, to, text, ttl, None, "unknown", 3, None])
            chain = CHAINS[state]
            t = created
            delivered = acked = finished = None
            for i, (_a, b, _reason) in enumerate(chain):
                t = created + i * 1000
                if b == "delivered":
                    delivered = t
                if b == "acknowledged":
                    acked = t
            final = state != "queued"
            finished = t if final else None
            reason = chain[-1][2]
            reqs.append(
                (
                    rid,
                    fp,
                    frm,
                    to,
                    text,
                    len(text.encode()),
                    "done: the tests cover it" if state == "completed" else None,
                    state,
                    reason,
                    created,
                    t,
                    expires,
                    delivered,
                    acked,
                    finished,
                    ttl,
                    1 if delivered else 0,
                    3,
                    "unknown",
                )
            )
            for i, (a, b, r) in enumerate(chain):
                actor = {"queued": frm}.get(
                    b,
                    to
                    if b in ("delivered", "acknowledged", "completed", "failed", "rejected")
                    else (frm if b == "cancelled" else "relay"),
                )
                evs.append((rid, created + i * 1000, a, b, r, actor))
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO requests (id, fingerprint, from_peer, to_peer, text, text_bytes, "
            "reply, state, reason, created_at, updated_at, expires_at, delivered_at, "
            "acknowledged_at, finished_at, ttl_seconds, attempts, max_attempts, on_lost) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            reqs,
        )
        db.executemany(
            "INSERT INTO events (request_id, at, from_state, to_state, reason, actor) "
            "VALUES (?,?,?,?,?,?)",
            evs,
        )
        db.execute("COMMIT")
        done += len(reqs)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    counts["_seconds"] = round(time.perf_counter() - t0, 1)
    return counts


def cache_dir(n: int, name: str | None = None) -> Path:
    """Where the cached database of ``n`` requests lives; the name carries a hash of the
    migrations, so a database made with another schema is never reused."""
    import hashlib

    from relay_cli.store.migrations import MIGRATIONS

    from .common import CACHE

    schema = hashlib.sha256("\n".join(MIGRATIONS).encode()).hexdigest()[:10]
    return CACHE / f"{name or f'n{n}'}-{schema}"


def cached_home(n: int, name: str | None = None) -> Path:
    """A home with ``n`` bulk requests, built once under the cache directory and reused."""
    from .common import CACHE

    home = cache_dir(n, name) / "home"
    for stale in CACHE.glob(f"{name or f'n{n}'}-*"):
        if stale != home.parent:
            import shutil

            shutil.rmtree(stale, ignore_errors=True)
    marker = home.parent / "ready"
    if marker.exists() and (home / "relay.db").exists():
        return home
    import shutil

    if home.parent.exists():
        shutil.rmtree(home.parent)
    home.parent.mkdir(parents=True, mode=0o700)
    init_home(home)
    now = int(time.time() * 1000)
    if n:
        insert(home, n, now=now - DAY, spread_ms=90 * DAY, queued_ttl_s=7 * 86400)
    marker.write_text(str(now))
    return home
