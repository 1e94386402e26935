"""The store is a declared interface (relay_cli/store/api.py's ``Store``, design.md §13):
both backends implement exactly it, and the library asks nothing else of a store."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Callable

import pytest
from conftest import new_id

from relay_cli.core.errors import RelayError
from relay_cli.store import PARTS, api
from relay_cli.store.api import Store
from relay_cli.store.base import SQLiteStore, SQLStore
from relay_cli.store.dialect import Dialect, PostgreSQL, SQLite
from relay_cli.store.pg_store import PgStore
from relay_cli.store.sql_activity import ActivitySQL
from relay_cli.store.sql_data import DataSQL
from relay_cli.store.sql_hook import HookSQL
from relay_cli.store.sql_ledger import LedgerSQL
from relay_cli.store.sql_ops import OpsSQL
from relay_cli.store.sql_peers import PeersSQL
from relay_cli.store.sql_requests import RequestsSQL

PACKAGE = Path(__file__).resolve().parents[2] / "relay_cli"


def _declared() -> set[str]:
    names = set()
    for klass in Store.__mro__:
        if klass in (Store,) or klass.__module__ == Store.__module__:
            names |= {n for n in vars(klass) if not n.startswith("_")}
            names |= set(getattr(klass, "__annotations__", {}))
    return names


def _public(klass) -> set[str]:
    return ({n for n in dir(klass) if not n.startswith("_")} | {"home", "clock"}) - {"db"}


@pytest.mark.one_backend
@pytest.mark.parametrize("klass", [SQLiteStore, PgStore])
def test_each_backend_implements_exactly_the_declared_store(klass):
    assert _public(klass) == _declared()
    for name in _declared() - {"backend", "poll_interval", "home", "clock", "read_only"}:
        want = inspect.signature(getattr(Store, name))
        got = inspect.signature(getattr(klass, name))
        assert list(got.parameters) == list(want.parameters), (klass.__name__, name)


def _own(klass) -> set[str]:
    """The members a class declares itself (not those of the classes it extends)."""
    return {n for n in vars(klass) if not n.startswith("_")} | set(
        getattr(klass, "__annotations__", {})
    )


# each part of the Store and the sql_*.py class that implements it for both backends
# (the connection's part: SQLStore's own methods, and what each backend answers itself)
IMPLEMENTED_BY = {
    "RequestStore": RequestsSQL,
    "PeerStore": PeersSQL,
    "LedgerStore": LedgerSQL,
    "HookStore": HookSQL,
    "ActivityStore": ActivitySQL,
    "OpsStore": OpsSQL,
    "DataStore": DataSQL,
}


@pytest.mark.one_backend
def test_the_store_is_its_parts_each_implemented_by_one_sql_module():
    parts = {name: _own(getattr(api, name)) for name in PARTS}
    assert set(Store.__mro__) >= {getattr(api, name) for name in PARTS}
    assert not _own(Store) - {"__doc__"}  # nothing of its own: the union of the parts
    every = [m for members in parts.values() for m in members]
    assert len(every) == len(set(every)), "a member declared in two parts"
    assert set(every) == _declared()
    for name, klass in IMPLEMENTED_BY.items():
        assert parts[name] == _own(klass) - {"db", "_sql"}, name
    rest = _declared() - set().union(*(parts[n] for n in IMPLEMENTED_BY))
    assert rest == parts["ConnectionStore"]
    assert parts["ConnectionStore"] <= _own(SQLStore) | _own(SQLiteStore) | {"home", "clock"}


@pytest.mark.one_backend
def test_each_connection_gives_what_the_statements_ask():
    from relay_cli.store.db import Connection
    from relay_cli.store.pg import PgConnection

    asked = _declared_of(api.Statements)
    assert {"execute", "all", "one", "scalar", "later", "transaction"} <= asked
    for connection in (Connection, PgConnection):
        given = {n for n in dir(connection) if not n.startswith("_")} | {"read_only"}
        assert asked <= given, connection.__name__


@pytest.mark.one_backend
def test_each_dialect_spells_every_difference():
    asked = {n for n in vars(Dialect) if not n.startswith("_")} | set(Dialect.__annotations__)
    for dialect in (SQLite, PostgreSQL):
        assert asked <= set(vars(dialect)), dialect.__name__


def _library() -> dict[str, ast.Module]:
    """Each module of the library outside relay_cli/store, by its dotted name under
    relay_cli (``requests.states``)."""
    return {
        ".".join(path.relative_to(PACKAGE).with_suffix("").parts): ast.parse(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if "store" not in path.relative_to(PACKAGE).parts[:-1]
    }


def _imports(tree: ast.Module, module: str) -> dict[str, str]:
    """The names a module imports from relay_cli (anywhere in it: many imports are
    inside functions), each to its dotted target (``requests.peers.renew``)."""
    names = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
        elif base == "relay_cli" or base.startswith("relay_cli."):
            base = base.removeprefix("relay_cli").removeprefix(".")
        else:
            continue
        for alias in node.names:
            names[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return names


def _store_params() -> list[tuple[str, str, ast.FunctionDef, dict[str, str]]]:
    """(module, what its ``store`` parameter asks for, the function, its module's
    imports) for every function of the library that takes a store."""
    found = []
    for module, tree in _library().items():
        imports = _imports(tree, module)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for arg in fn.args.args + fn.args.kwonlyargs:
                if arg.arg == "store" and arg.annotation is not None:
                    asks = ast.unparse(arg.annotation).strip("'\"")
                    found.append((module, asks, fn, imports))
    return found


def _uses(
    fn: ast.FunctionDef, module: str, imports: dict[str, str]
) -> tuple[set[str], set[tuple[str, str]]]:
    """What ``fn`` reads off ``store``, and the (module, function) it hands ``store`` to."""
    read, handed = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "store":
            read.add(node.attr)
        if isinstance(node, ast.Call) and any(
            getattr(a, "id", None) == "store"
            for a in [*node.args, *(k.value for k in node.keywords)]
        ):
            f = node.func
            if isinstance(f, ast.Name):
                target = imports.get(f.id)
                owner, name = target.rsplit(".", 1) if target else (module, f.id)
                handed.add((owner, name))
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                handed.add((imports.get(f.value.id, f.value.id), f.attr))
    return read, handed


@pytest.mark.one_backend
def test_a_function_that_asks_for_a_part_uses_only_that_part():
    found = _store_params()
    params = {(module, fn.name): asks for module, asks, fn, _ in found}
    assert ("requests.peers", "renew") in params  # (the scan finds the library's)
    narrowed = [(module, asks, fn, imports) for module, asks, fn, imports in found if asks in PARTS]
    assert len(narrowed) > 20
    wider = {}
    for module, asks, fn, imports in narrowed:
        name = fn.name
        has = _declared_of(getattr(api, asks))
        read, handed = _uses(fn, module, imports)
        more = sorted(read - has)
        for callee in sorted(handed & params.keys()):
            callee_asks = params[callee]
            callee_has = _declared() if callee_asks == "Store" else None
            if callee_asks in PARTS:
                callee_has = _declared_of(getattr(api, callee_asks))
            if callee_has is None or callee_has - has:
                more.append(f"{callee[0]}.{callee[1]} asks for {callee_asks}")
        if more:
            wider[(module, name, asks)] = more
    assert not wider, wider


def _declared_of(part) -> set[str]:
    return set().union(*(_own(k) for k in part.__mro__ if k.__module__ == api.__name__))


def _asked_of_a_store() -> dict[str, set[str]]:
    """Every attribute read off something named ``store`` outside relay_cli/store."""
    asked: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "store" in path.relative_to(PACKAGE).parts[:-1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            named = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else None
            )
            if named in ("store", "_store"):
                asked.setdefault(node.attr, set()).add(path.name)
    return asked


@pytest.mark.one_backend
def test_the_library_asks_a_store_only_what_it_declares():
    asked = _asked_of_a_store()
    assert "get_request" in asked  # (the scan finds the library's calls)
    undeclared = {name: where for name, where in asked.items() if name not in _declared()}
    assert not undeclared, undeclared


def _request(state: str, **more) -> dict:
    return {
        "id": new_id(),
        "fingerprint": "f",
        "from_peer": "alice",
        "to_peer": "bob",
        "from_session": None,
        "text": "x",
        "text_bytes": 1,
        "state": state,
        "created_at": 1,
        "updated_at": 1,
        "expires_at": 2,
        "ttl_seconds": 1,
        "max_attempts": 1,
        "on_lost": "unknown",
        **more,
    }


def _calls(store, now: int) -> list[tuple[str, bool, Callable[[], object]]]:
    """(operation, in a write transaction, the call) for every operation of the store,
    each statement variant of it at least once; in an order where each finds rows to act
    on (a final request to prune, an ended session, a ledger entry, ...)."""
    from relay_cli.ledger.states import FINAL_STATES as LEDGER_FINAL
    from relay_cli.operate.retention import FINAL

    rid = store.queued_for("bob", 1)[0]["id"]
    sid = store.active_session("alice")["id"]
    a = new_id()
    old = _request("completed", finished_at=1)
    gone = _request("expired", finished_at=1)
    draft = {
        **{
            k: v
            for k, v in _request("queued").items()
            if k not in ("state", "updated_at", "reason", "detail")
        },
        "depth": 0,
    }
    ledger = {
        "key": "k2",
        "fingerprint": "f",
        "argv": "[]",
        "cwd": "/",
        "state": "succeeded",
        "created_at": 1,
        "updated_at": 1,
        "stdout": b"out",
        "stdout_bytes": 3,
    }
    r, w = False, True
    return [
        # requests, drafts, events
        ("get_request", r, lambda: store.get_request(rid)),
        ("requests_with_prefix", r, lambda: store.requests_with_prefix(rid[:4], 5)),
        (
            "completion_requests",
            r,
            lambda: store.completion_requests(
                rid[:2],
                states=["queued"],
                from_peer="alice",
                to_peer="bob",
                claim_session=sid,
                limit=5,
            ),
        ),
        ("completion_requests", r, lambda: store.completion_requests("")),
        ("insert_request", w, lambda: [store.insert_request(x) for x in (old, gone)]),
        ("update_request", w, lambda: store.update_request(rid, "queued", {"reason": "x"})),
        ("oldest_queued_for", r, lambda: store.oldest_queued_for("bob")),
        ("queued_for", r, lambda: store.queued_for("bob")),
        ("queued_for", r, lambda: store.queued_for("bob", 2)),
        ("count_queued_for", r, lambda: store.count_queued_for("bob")),
        ("in_flight_of_session", r, lambda: store.in_flight_of_session(sid)),
        (
            "insert_claim",
            w,
            lambda: store.insert_claim(
                {"attempt": a, "request_id": rid, "peer": "bob", "session_id": sid, "claimed_at": 1}
            ),
        ),
        ("claim_by_attempt", r, lambda: store.claim_by_attempt(a)),
        ("claims_of_session", r, lambda: store.claims_of_session(sid)),
        ("recent_claims_of_peer", r, lambda: store.recent_claims_of_peer("bob", 5)),
        ("recent_sends", r, lambda: store.recent_sends("alice", 0)),
        ("count_open_to", r, lambda: store.count_open_to("bob", 10)),
        ("open_counts_at_least", r, lambda: store.open_counts_at_least(1)),
        ("list_requests", r, lambda: store.list_requests(["queued"], "bob", "alice", 5)),
        ("list_requests", r, lambda: store.list_requests(None, None, None, None)),
        ("recently_finished", r, lambda: store.recently_finished(0, 5)),
        ("count_by_state", r, lambda: store.count_by_state()),
        ("unnotified_finished", r, lambda: store.unnotified_finished("alice")),
        ("mark_notified", w, lambda: store.mark_notified([old["id"]], now, "b1")),
        ("notice_batch", r, lambda: store.notice_batch("b1")),
        ("oldest_in_state", r, lambda: store.oldest_in_state("queued", 5)),
        ("open_same_text", r, lambda: store.open_same_text("bob", "alice", "h", "t", "x", 3)),
        ("latest_notice_batch", r, lambda: store.latest_notice_batch("alice")),
        ("set_notices_batch", w, lambda: store.set_notices_batch(sid, "alice", "b1", now)),
        ("set_notices_batch", w, lambda: store.set_notices_batch(None, "alice", "b1", now)),
        ("due_requests", r, lambda: store.due_requests(now + 10**9, 5)),
        ("next_request_deadline", r, lambda: store.next_request_deadline()),
        ("add_event", w, lambda: store.add_event(rid, now, "queued", "queued", None, "t", "d")),
        ("events_of", r, lambda: store.events_of(rid)),
        ("recent_events", r, lambda: store.recent_events(5)),
        ("insert_draft", w, lambda: store.insert_draft(draft)),
        ("get_draft", r, lambda: store.get_draft(draft["id"])),
        ("drafts_with_prefix", r, lambda: store.drafts_with_prefix(draft["id"][:4], 5)),
        ("completion_drafts", r, lambda: store.completion_drafts("", "alice", 5)),
        ("completion_drafts", r, lambda: store.completion_drafts(draft["id"][:2], "alice", 5)),
        ("oldest_open_draft_expiry", r, lambda: store.oldest_open_draft_expiry("alice", 0)),
        ("count_open_drafts", r, lambda: store.count_open_drafts("alice", 0)),
        ("count_stale_drafts", r, lambda: store.count_stale_drafts(now)),
        ("mark_draft_submitted", w, lambda: store.mark_draft_submitted(draft["id"], now)),
        # peers and sessions
        ("get_peer", r, lambda: store.get_peer("alice")),
        ("insert_peer", w, lambda: store.insert_peer("carol", "human", now)),
        ("set_peer_kind", w, lambda: store.set_peer_kind("carol", "script")),
        ("touch_peer", w, lambda: store.touch_peer("alice", now)),
        ("set_hook_seen", w, lambda: store.set_hook_seen("alice", now)),
        ("list_peers", r, lambda: store.list_peers()),
        ("peer_names", r, lambda: store.peer_names()),
        ("get_session", r, lambda: store.get_session(sid)),
        ("session_by_token_hash", r, lambda: store.session_by_token_hash("h")),
        ("active_session", r, lambda: store.active_session("alice")),
        ("newest_session", r, lambda: store.newest_session("alice")),
        ("newer_session_exists", r, lambda: store.newer_session_exists(store.get_session(sid))),
        ("insert_session", w, lambda: store.insert_session("s-carol", "carol", "h", 1, 60, "a")),
        ("end_session", w, lambda: store.end_session("s-carol", "left", 2)),
        ("renew_session", w, lambda: store.renew_session(sid, now + 1000)),
        ("set_session_agent_id", w, lambda: store.set_session_agent_id(sid, "agent")),
        ("set_waiting", w, lambda: store.set_waiting(sid, now)),
        ("mark_claims_overlap", w, lambda: store.mark_claims_overlap(sid, now)),
        ("peer_is_polling", r, lambda: store.peer_is_polling("alice", now - 1)),
        ("due_sessions", r, lambda: store.due_sessions(now + 10**9, 5)),
        ("next_session_deadline", r, lambda: store.next_session_deadline()),
        # the side-effect ledger
        ("insert_ledger", w, lambda: store.insert_ledger(ledger)),
        ("get_ledger", r, lambda: store.get_ledger("k2")),
        ("update_ledger", w, lambda: store.update_ledger("k2", {"runs": 1})),
        ("list_ledger", r, lambda: store.list_ledger()),
        ("list_ledger", r, lambda: store.list_ledger(["succeeded"])),
        ("ledger_prune_counts", r, lambda: store.ledger_prune_counts(LEDGER_FINAL, now, 0)),
        ("prune_ledger_output", w, lambda: store.prune_ledger_output(LEDGER_FINAL, now, now, 0, 5)),
        (
            "remove_ledger_tombstones",
            w,
            lambda: store.remove_ledger_tombstones(LEDGER_FINAL, now, 5),
        ),
        ("delete_ledger", w, lambda: store.delete_ledger("k2")),
        # the hooks and wake waiters
        ("hook_marks", r, lambda: store.hook_marks(sid)),
        (
            "put_hook_marks",
            w,
            lambda: store.put_hook_marks("s-carol", 1, {"named": ["a"], "pending": ["b"]}, 1, 5),
        ),
        ("hook_queued", r, lambda: store.hook_queued("bob", 5)),
        ("hook_queued_count", r, lambda: store.hook_queued_count("bob", 5)),
        ("hook_unnotified", r, lambda: store.hook_unnotified("alice", 5)),
        ("get_hook_state", r, lambda: store.get_hook_state("s-carol")),
        ("hook_own_prompts", r, lambda: store.hook_own_prompts("s-carol")),
        ("set_hook_own_prompts", w, lambda: store.set_hook_own_prompts(sid, ["h"], now)),
        ("session_for_agent", r, lambda: store.session_for_agent("agent")),
        (
            "put_waiter",
            w,
            lambda: store.put_waiter(sid, "alice", "claude", 1, None, "h", now, now + 1000),
        ),
        ("get_waiter", r, lambda: store.get_waiter(sid)),
        ("live_session_waiters", r, lambda: store.live_session_waiters("alice", now)),
        ("delete_waiter", w, lambda: store.delete_waiter(sid, 1, None, "h")),
        # what each session does (design.md §19), and the home's settings
        (
            "set_activity",
            w,
            lambda: store.set_activity(
                sid,
                {
                    "activity": "needs_person",
                    "activity_since": now,
                    "activity_cause": "permission",
                    "activity_alert": "owed",
                },
            ),
        ),
        ("take_owed_alerts", w, lambda: store.take_owed_alerts(5)),
        ("sessions_for_activity", r, lambda: store.sessions_for_activity()),
        ("claimed_work", r, lambda: store.claimed_work()),
        ("work_left_by", r, lambda: store.work_left_by(sid)),
        ("put_setting", w, lambda: store.put_setting("notify", '["true"]', now)),
        ("get_setting", r, lambda: store.get_setting("notify")),
        ("delete_setting", w, lambda: store.delete_setting("notify")),
        # doctor and prune
        ("passed_deadlines", r, lambda: store.passed_deadlines(now)),
        ("count_tombstones", r, lambda: store.count_tombstones()),
        ("count_due", r, lambda: store.count_due(now)),
        ("active_sessions", r, lambda: store.active_sessions()),
        ("lapsed_sessions_holding_work", r, lambda: store.lapsed_sessions_holding_work(now)),
        ("prune_counts", r, lambda: store.prune_counts(FINAL, now, now, 0)),
        ("unused_sessions", r, lambda: store.unused_sessions(FINAL, now, now, 0)),
        ("remove_sessions", w, lambda: store.remove_sessions(["s-none"])),
        ("remove_hook_records", w, lambda: store.remove_hook_records(now, 5)),
        ("remove_drafts", w, lambda: store.remove_drafts(FINAL, now + 10**9, now, 5)),
        ("prune_bodies", w, lambda: store.prune_bodies(FINAL, now, 5)),
        ("remove_old_tombstones", w, lambda: store.remove_old_tombstones(FINAL, now, 5, now)),
        ("remove_old_attempts", w, lambda: store.remove_old_attempts(now, 5)),
        # a person's data
        ("export_requests", r, lambda: list(store.export_requests(["queued"], 0))),
        ("export_requests", r, lambda: list(store.export_requests(None, None))),
        # the connection
        ("data_version", None, lambda: store.data_version()),
        ("write_mark", None, lambda: store.write_mark()),
        ("pause", None, lambda: store.pause(0)),
        ("shared_url", None, lambda: store.shared_url()),
        ("health", None, lambda: store.health()),
        ("read_only", None, lambda: store.read_only),
        ("check_vacuum", None, store.check_vacuum),
        ("database_bytes", None, store.database_bytes),
        ("vacuum", None, store.vacuum),
    ]


# Operations the table above does not call itself: the harness's own, or (PostgreSQL)
# refused before any statement (relay prune --vacuum, design.md §13).
_NOT_CALLED = {"backend", "poll_interval", "home", "clock", "transaction", "close"}
_REFUSED_ON_POSTGRES = {"check_vacuum", "database_bytes", "vacuum"}


def _traced(store) -> list[str]:
    statements: list[str] = []
    if store.backend == "sqlite":
        store.db.conn.set_trace_callback(statements.append)
        return statements
    db = store.db
    for name in ("execute", "later"):
        real = getattr(db, name)

        def traced(sql, params=(), real=real):
            statements.append(sql)
            return real(sql, params)

        setattr(db, name, traced)
    return statements


def test_every_statement_the_store_can_issue_runs_on_this_backend(relay):
    from relay_cli.core import clock

    alice = relay.join("alice")
    relay.join("bob")
    relay.send(alice, "bob", "first")
    relay.send(alice, "bob", "second")
    assert relay("once", "--key", "k", "--", "true").code == 0
    store = relay.open_store()
    try:
        statements = _traced(store)
        now = clock.Clock().now_ms()
        with store.transaction(write=False):
            calls = _calls(store, now)
        assert {name for name, _, _ in calls} | _NOT_CALLED == _declared()
        for name, write, call in calls:
            if store.backend == "postgresql" and name in _REFUSED_ON_POSTGRES:
                with pytest.raises(RelayError) as e:
                    call()
                assert e.value.code == "usage_error", name
                continue
            if write is None:  # the connection's own (some issue no statement)
                call()
                continue
            before = len(statements)
            with store.transaction(write=write):
                call()
            assert len(statements) > before, name
        # what the table expects it to find, it found
        with store.transaction(write=False):
            assert store.get_peer("carol")["kind"] == "script"
            assert store.get_ledger("k2") is None
            assert len(store.queued_for("bob")) == 2
    finally:
        store.close()
    if store.backend == "postgresql":
        sqlite_only = ("INDEXED BY", "json_each", "PRAGMA", "sqlite_master", "max(lease")
        assert not [s for s in statements if any(w in s for w in sqlite_only)]
