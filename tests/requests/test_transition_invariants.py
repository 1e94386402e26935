"""A hypothesis state machine drives random operations through the library and checks §5.

Invariants: one row per id; every logged event is a transition of the table and the chain
of events explains the row's state; a final state changes only through `resolve`; a
duplicate send changes nothing; an event outside the table is state_conflict and changes
nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from relay_cli.core import clock
from relay_cli.core.context import Limits
from relay_cli.core.errors import RelayError
from relay_cli.core.limits import FINAL_STATES
from relay_cli.core.record import replace
from relay_cli.requests import claiming, due, lifecycle, peers, sending
from relay_cli.requests.states import TRANSITIONS
from relay_cli.store import open_store

# design.md §13: the same machine on PostgreSQL (test_the_state_machine_on_postgres) gets
# a fresh database for every example from this factory; None: relay.db in a temp home.
FRESH_DATABASE = None
IDS = [str(uuid.UUID(int=i + 1)) for i in range(6)]
TEXTS = ["alpha", "beta"]
ALLOWED = {(t.from_state, t.to_state, t.reason) for t in TRANSITIONS}
NO_RATE_LIMIT = Limits(rate_limit_raw="0")  # the machine sends as fast as it likes


class RelayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.offset = 0.0
        self.url = FRESH_DATABASE() if FRESH_DATABASE else None
        # relay's clock, moved by handing the store another (design.md §8)
        self.store = open_store(self.dir / "home", self.url, clock.Clock("0"), environ={})
        # another connection to relay.db, a reader of what the store committed (one for the
        # whole example: a connection per snapshot read the schema again each time)
        self.reader = None if self.url else sqlite3.connect(self.store.db.path)
        self.tokens: dict[str, str] = {}
        self.sent: dict[str, str] = {}  # id -> text it was first sent with
        self.seen_final: dict[str, str] = {}
        with due.unit(self.store) as now:
            self.tokens["alice"] = peers.join(self.store, "alice", None, 3600, now)["token"]
            self.tokens["bob"] = peers.join(self.store, "bob", None, 600, now)["token"]

    def teardown(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- helpers
    def caller(self, name):
        return peers.identify(self.store, name, self.tokens[name])

    def snapshot(self):
        if self.url:
            with self.store.transaction(write=False):
                return {
                    t: [tuple(r) for r in self.store.db.all(f"SELECT * FROM {t} ORDER BY rowid")]
                    for t in ("requests", "events", "drafts", "sessions")
                }
        return {
            t: self.reader.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
            for t in ("requests", "events", "drafts", "sessions")
        }

    def call(self, fn, *args, name="bob"):
        """Run one command; a refusal must change nothing but already-due transitions."""
        due.drain_due(self.store, self.store.clock.now_ms())
        before = self.snapshot()
        try:
            with due.unit(self.store) as now:
                return fn(self.store, now, self.caller(name), *args)
        except RelayError as e:
            assert e.code in {
                "state_conflict",
                "not_owner",
                "request_not_found",
                "lease_expired",
                "peer_superseded",
                "nothing_to_claim",
                "reply_conflict",
                "invalid_session",
            }, e.code
            assert self.snapshot() == before, f"refused {fn.__name__} ({e.code}) changed tables"
            return None

    # ---------------------------------------------------------------- rules
    @rule(
        rid=st.sampled_from(IDS),
        text=st.sampled_from(TEXTS),
        on_lost=st.sampled_from(["unknown", "redeliver"]),
    )
    def send(self, rid, text, on_lost):
        kwargs = dict(
            to="bob",
            text=text,
            request_id=rid,
            ttl_s=60,
            reply_within_s=60,
            on_lost=on_lost,
            max_attempts=2,
            in_reply_to=None,
        )
        due.drain_due(self.store, self.store.clock.now_ms())
        before = self.snapshot()
        try:
            with due.unit(self.store) as now:
                result = sending.send(
                    self.store, now, self.caller("alice"), limits=NO_RATE_LIMIT, **kwargs
                )
        except RelayError as e:
            assert e.code == "request_id_conflict"
            assert self.sent.get(rid) is not None
            assert self.snapshot() == before
            return
        if rid in self.sent:
            assert result["duplicate"] is True
            assert self.snapshot()["requests"] == before["requests"]
            assert self.snapshot()["events"] == before["events"]
        else:
            assert result["duplicate"] is False and result["state"] == "queued"
            self.sent[rid] = text

    @rule()
    def claim(self):
        self.call(lambda s, now, c: claiming.claim(s, now, c, 20, None))

    @rule(rid=st.sampled_from(IDS), op=st.sampled_from(["ack", "reply", "fail", "reject"]))
    def act(self, rid, op):
        fn = {
            "ack": lambda s, now, c: lifecycle.ack(s, now, c, rid),
            "reply": lambda s, now, c: lifecycle.reply(s, now, c, rid, "done"),
            "fail": lambda s, now, c: lifecycle.fail(s, now, c, rid, "no"),
            "reject": lambda s, now, c: lifecycle.reject(s, now, c, rid, "no"),
        }[op]
        fn.__name__ = op
        self.call(fn)

    @rule(rid=st.sampled_from(IDS))
    def cancel(self, rid):
        self.call(lambda s, now, c: lifecycle.cancel(s, now, c, rid), name="alice")

    @rule(rid=st.sampled_from(IDS), outcome=st.sampled_from(lifecycle.RESOLVE_OUTCOMES))
    def resolve(self, rid, outcome):
        self.call(lambda s, now, c: lifecycle.resolve(s, now, rid, outcome, None, terminal=True))

    @rule(seconds=st.sampled_from([5, 15, 25, 61]))
    def advance(self, seconds):
        self.offset += seconds
        self.store.clock = replace(self.store.clock, offset=str(self.offset))
        # alice stays alive; bob's lease may lapse (that is part of the model)
        with due.unit(self.store) as now:
            session = self.store.active_session("alice")
            if session is not None:
                self.store.renew_session(session["id"], now + 3600_000)

    @precondition(lambda self: True)
    @rule()
    def bob_rejoins(self):
        with due.unit(self.store) as now:
            self.tokens["bob"] = peers.join(self.store, "bob", None, 600, now)["token"]

    @rule()
    def bob_leaves(self):
        self.call(lambda s, now, c: peers.leave(s, c, now))

    # ---------------------------------------------------------------- invariants
    @invariant()
    def one_row_per_id_and_events_explain_every_state(self):
        with due.unit(self.store, write=False):
            rows = self.store.db.all("SELECT id, state FROM requests")
            ids = [r["id"] for r in rows]
            assert len(ids) == len(set(ids))
            assert set(ids) == set(self.sent)
            for r in rows:
                events = self.store.events_of(r["id"])
                state = None
                for e in events:
                    assert e["from_state"] == state
                    assert (e["from_state"], e["to_state"], e["reason"]) in ALLOWED
                    if state in FINAL_STATES:
                        assert e["reason"] == "resolved_by_human", "a final state changed"
                    state = e["to_state"]
                assert state == r["state"]

    @invariant()
    def final_states_stay_final_except_through_resolve(self):
        with due.unit(self.store, write=False):
            for r in self.store.db.all("SELECT id, state, reason FROM requests"):
                old = self.seen_final.get(r["id"])
                if old is not None and old != r["state"]:
                    assert r["reason"] == "resolved_by_human" or (
                        old == "delivery_unknown" and r["reason"] is not None
                    )
                if r["state"] in FINAL_STATES:
                    self.seen_final[r["id"]] = r["state"]
                else:
                    self.seen_final.pop(r["id"], None)


RelayMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRelayStateMachine = RelayMachine.TestCase


def test_the_state_machine_on_postgres(pg_cluster):
    """The same random operations and invariants on PostgreSQL (design.md §13)."""
    global FRESH_DATABASE
    made = []

    def fresh():
        name, url = pg_cluster.fresh()
        made.append(name)
        return url

    FRESH_DATABASE = fresh
    try:
        from hypothesis.stateful import run_state_machine_as_test

        run_state_machine_as_test(
            RelayMachine,
            settings=settings(
                max_examples=10,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        FRESH_DATABASE = None
        for name in made:
            pg_cluster.drop(name)
