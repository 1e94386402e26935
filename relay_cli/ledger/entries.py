"""The side-effect ledger (design.md §10): one entry per key of `relay once`.

Plain functions over a store: the entry's fingerprint and its one public object; the
gates of a call, the idempotency gate (did I already do this?) first, then the approval
gate (should I do this?) (:func:`begin`, :func:`wait_for_decision`); and a person's acts
(:func:`approve`, :func:`deny`, :func:`resolve`). The entry's states and every transition
are the table of ``ledger.states``; every state change goes through its ``apply``. The
run itself is ``ledger.once``; retention (`relay prune`) is ``operate.retention.prune_ledger``.

A person's decision stays a person's: for an entry made with --approve (or denied),
`ledger resolve` refuses unless standard input is a terminal (approval_needs_terminal),
exactly like `relay approve` and `relay deny`; forgetting such an entry passes its
approval requirement on: the next call with the key waits for a person again, whatever
its options.

Which process is "the process" of a running entry: the entry records the relay process
that will record the outcome (``pid``/``process_start``) and the command
(``child_pid``/``child_start``), committed before the command begins executing (``once``).
The entry counts as alive while either of them is alive; start times (``process``) make
sure a reused pid is not mistaken for the original process. Only when both are gone —
relay crashed between start and record, and the command is no longer running — is the
effect unknown.

Across machines (design.md §13: several hosts share one PostgreSQL database) a process
on another host cannot be looked at. While its command runs, the relay process renews its
entry's ``updated_at`` every ``RENEW_S`` seconds (``once.Renewal``); an entry recorded by
another host counts as alive while that renewal is at most ``STALE_S`` seconds old
(relay's clock is the database's, so the hosts agree on it), and as crashed
(effect_unknown) after that (``ledger.states.entry_alive``).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING, Any, Callable

from ..core import clock
from ..core.command import Choices, Said, relay
from ..core.digest import sha256_hex
from ..core.errors import RelayError
from ..core.limits import DEFAULT_WAIT_S, STALE_S
from ..core.person import person, require_terminal
from ..core.process import Me, process_alive, this_host
from ..core.record import record
from ..requests import due, validate
from .states import (
    STATES,
    VIEWS,
    entry_alive,
    foreign,
    move,
    never_started,
    place,
    shown_state,
)

if TYPE_CHECKING:
    from relay_cli.core.output import JsonObject
    from relay_cli.store import LedgerStore, Record, Row, Store

    from ..core.errors import ErrorCode

KEY_RE = re.compile(r"[!-~]{1,200}", re.ASCII)  # the whole value (fullmatch): no "k\n"
DEFAULT_APPROVAL_WAIT_S = DEFAULT_WAIT_S  # it waits like `relay wait`
OUTCOMES = ("succeeded", "failed", "forget")


def settle(key: str) -> Choices:
    """What a person runs to settle the entry ``key``, one full command per outcome, as
    doctor, watch and the errors name them (design.md §14)."""
    return Choices(
        tuple(relay("ledger", "resolve", key, "--outcome", o, changes=True) for o in OUTCOMES)
    )


def decide(key: str) -> Choices:
    """What a person runs to decide on an entry awaiting approval: approve or deny it."""
    return Choices((relay("approve", key, changes=True), relay("deny", key, changes=True)))


class EntryError(RelayError):
    """A refusal that concerns an existing entry; ``entry`` is its public object."""

    def __init__(
        self, code: ErrorCode, message: str, entry: JsonObject, detail: str | Said | None = None
    ) -> None:
        super().__init__(code, message, detail=detail)
        self.entry = entry


# --------------------------------------------------------------------------- validation
def validate_key(key: str) -> str:
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        shown = key if isinstance(key, str) and len(key) <= 60 else f"{str(key)[:60]}..."
        raise RelayError(
            "invalid_key",
            f"--key {shown!r} is not 1 to 200 printable ASCII "
            f"characters (got {len(key) if isinstance(key, str) else 0})",
        )
    return key


def validate_states(values: list[str] | None) -> list[str]:
    for v in values or []:
        if v not in STATES:
            raise RelayError(
                "usage_error", f"unknown ledger state {v!r}; states: {', '.join(STATES)}"
            )
    return list(values or [])


def validate_cwd(cwd: str) -> str:
    """The working directory is recorded in the entry (and its fingerprint): it must be a
    UTF-8 path. A name that is not is an environment problem (usage_error), not a bug."""
    try:
        cwd.encode("utf-8")
    except UnicodeEncodeError:
        shown = cwd.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise RelayError(
            "usage_error",
            f"the working directory {shown} is not a UTF-8 "
            "path, and relay once records it with the key; run the command "
            "from a directory whose path is UTF-8 (cd there, or use sh -c "
            "'cd …; CMD')",
        ) from None
    return cwd


def canonical_argv(argv: list[str]) -> str:
    """argv as stored: JSON with every non-ASCII character escaped (lossless, canonical)."""
    return json.dumps(list(argv), ensure_ascii=True, separators=(",", ":"))


def fingerprint(argv: list[str], cwd: str) -> str:
    """SHA-256 over the canonical JSON of ``[argv, cwd]`` (design.md §10)."""
    doc = json.dumps([list(argv), cwd], ensure_ascii=True, separators=(",", ":"))
    return sha256_hex(doc.encode("ascii"))


def command_text(argv: list[str]) -> str:
    return shlex.join(argv)


# --------------------------------------------------------------------------- the public object
def output_text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "replace")


def entry_object(row: Record, now: int, *, output: bool = False) -> JsonObject:
    """The one serializer of a ledger entry (``--json`` of once, ledger show/list, approve).

    ``state`` is the derived state (:func:`shown_state`); ``effect_unknown`` says the same
    as a flag. ``output_pruned`` says `relay prune` dropped the captured output (the
    entry is a tombstone: its outcome still replays). ``now``: relay's clock, for the
    liveness of another host's entry.
    """
    iso = clock.iso
    state = shown_state(row, now)
    obj = {
        "key": row["key"],
        "state": state,
        "effect_unknown": state == "effect_unknown",
        "argv": json.loads(row["argv"]),
        "cwd": row["cwd"],
        "exit_code": row["exit_code"],
        "signal": row["signal"],
        "idempotent": bool(row["idempotent"]),
        "approval_required": bool(row["approve"]),
        "runs": row["runs"],
        "host": row["host"],
        "pid_namespace": row["pid_namespace"],
        "pid": row["pid"],
        "child_pid": row["child_pid"],
        "created_at": iso(row["created_at"]),
        "updated_at": iso(row["updated_at"]),
        "started_at": iso(row["started_at"]),
        "finished_at": iso(row["finished_at"]),
        "stdout_bytes": row["stdout_bytes"],
        "stderr_bytes": row["stderr_bytes"],
        "decision": row["decision"],
        "decided_by": row["decided_by"],
        "decided_at": iso(row["decided_at"]),
        "decision_note": row["decision_note"],
        "resolution": row["resolution"],
        "resolved_by": row["resolved_by"],
        "resolved_at": iso(row["resolved_at"]),
        "resolution_note": row["resolution_note"],
        "output_pruned": row["output_pruned_at"] is not None,
        "output_pruned_at": iso(row["output_pruned_at"]),
    }
    if output:
        for name in ("stdout", "stderr"):
            data = row[name]
            total = row[f"{name}_bytes"]
            obj[name] = output_text(data)
            obj[f"{name}_truncated"] = bool(
                total is not None and data is not None and total > len(data)
            )
    return obj


# --------------------------------------------------------------------------- the gates
@record
class Decision:
    action: str  # "run" | "replay" | "wait"
    row: Row  # the entry as the decision found or left it


def _get(store: LedgerStore, key: str) -> Row:
    row = store.get_ledger(key)
    if row is None:
        raise RelayError("ledger_key_not_found", f"no ledger entry has the key {key!r}")
    return row


def running_values(now: int, me: Me, runs: int) -> dict[str, Any]:
    """The fields of an entry whose command this relay process runs (run number ``runs``)."""
    return {
        "runs": runs,
        "pid": me.pid,
        "process_start": me.start,
        "host": me.host,
        "pid_namespace": me.ns,
        "child_pid": None,
        "child_start": None,
        "started_at": now,
        "finished_at": None,
        "exit_code": None,
        "signal": None,
        "stdout": None,
        "stderr": None,
        "stdout_bytes": None,
        "stderr_bytes": None,
    }


def begin(
    store: LedgerStore,
    now: int,
    key: str,
    argv: list[str],
    cwd: str,
    *,
    idempotent: bool,
    approve: bool,
    me: Me,
) -> Decision:
    """Inside a write transaction: decide what this call does with the key.

    Records a new entry (``running``, or ``awaiting_approval`` with ``approve``) or takes
    an approved / rerunnable one; raises key_conflict, in_progress, effect_unknown or
    denied. The idempotency gate comes first: a finished entry replays without asking.
    """
    fp = fingerprint(argv, cwd)
    row = store.get_ledger(key)
    if row is None or row["state"] == "forgotten":
        # the key is free (again), but a person's approval requirement is not forgotten
        approve = approve or bool(row is not None and row["approve"])
        values = {
            "fingerprint": fp,
            "argv": canonical_argv(argv),
            "cwd": cwd,
            "idempotent": int(idempotent),
            "approve": int(approve),
            "runs": 0,
        }
        if approve:
            return Decision("wait", move(store, key, row, "call_approve", now, values))
        values.update(running_values(now, me, 1))
        return Decision("run", move(store, key, row, "call", now, values))
    if row["fingerprint"] != fp:
        raise RelayError(
            "key_conflict",
            f"the key {key!r} was used for another command or directory",
            detail=f"it ran `{command_text(json.loads(row['argv']))}` in {row['cwd']}",
        )
    state = row["state"]
    entry = entry_object(row, now)
    if state in ("succeeded", "failed"):
        return Decision("replay", row)
    if state == "denied":
        raise EntryError(
            "denied",
            f"a person denied the command of key {key!r}",
            entry,
            detail=f"denied by {row['decided_by']}",
        )
    if state == "awaiting_approval":
        return Decision("wait", row)
    event = "take"
    if state == "running":
        if never_started(row, now, me):
            # its command was held at the gate and never began executing (the answer of
            # the commit that made the entry was lost, or relay stopped before it forked)
            event = "reclaim"
        elif entry_alive(row, now):
            raise EntryError(
                "in_progress",
                f"key {key!r} is running in {_process_text(row)} on "
                f"{place(row) if foreign(row) else row['host']}",
                entry,
            )
        elif foreign(row):
            raise EntryError(
                "effect_unknown",
                f"key {key!r} started at {entry['started_at']} on {place(row)}, "
                f"{stopped_renewing(row, now)}; nothing was run now",
                entry,
                detail=Said.of(
                    f"only at a terminal, once you know it ended on {row['host']}, with one of: ",
                    settle(key),
                ),
            )
        elif not row["idempotent"]:
            raise EntryError(
                "effect_unknown",
                f"key {key!r} started at {entry['started_at']} but its outcome was never "
                "recorded (relay and the command are gone); nothing was run now",
                entry,
                detail=Said.of("once you know whether it happened, with one of: ", settle(key)),
            )
        else:
            event = "rerun"
    # approved, a crashed run of an --idempotent entry of this host, or a run that never
    # started: this call runs it
    return Decision(
        "run", move(store, key, row, event, now, running_values(now, me, row["runs"] + 1))
    )


def _process_text(row: Record) -> str:
    """Which process of a live entry runs: relay's, or (on this host) only the command,
    which outlived relay (a setuid, setgid or file-capability command keeps no
    parent-death signal, design.md §10)."""
    if not foreign(row) and not process_alive(row["pid"], row["process_start"], row["host"]):
        return f"process {row['child_pid']} (its command; relay process {row['pid']} is gone)"
    return f"process {row['pid']}"


def stopped_renewing(row: Record, now: int) -> str:
    """What relay knows of another host's entry that is no longer renewed (design.md §13)."""
    age = max(0, (now - row["updated_at"]) // 1000)
    return (
        f"which stopped renewing it {age} s ago (more than {STALE_S} s); relay cannot "
        "see whether the command still runs there"
    )


def wait_for_decision(
    store: Store,
    key: str,
    argv: list[str],
    cwd: str,
    *,
    idempotent: bool,
    me: Me,
    timeout_s: float,
    sleep: Callable[[float], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> Decision | None:
    """Wait (no lock held while sleeping) until a person decided; None on timeout."""
    fp = fingerprint(argv, cwd)

    def check() -> Decision | None:
        with due.unit(store, write=False):
            row = store.get_ledger(key)
        if row is not None and row["state"] == "awaiting_approval" and row["fingerprint"] == fp:
            return None
        with due.unit(store) as now:
            # approve=True: an entry forgotten while we waited must be approved again
            decision = begin(store, now, key, argv, cwd, idempotent=idempotent, approve=True, me=me)
        return None if decision.action == "wait" else decision

    return due.poll(store, check, timeout_s, on_tick=on_tick, sleep=sleep)


# --------------------------------------------------------------------------- inspect, settle
def shown_here(obj: JsonObject) -> bool:
    """Was the entry (its public object) started on this host, where relay can look (in
    this PID namespace, ``states.foreign``)?"""
    return not foreign(obj)


def reruns_by_itself(obj: JsonObject) -> bool:
    """Does the next call run this effect_unknown entry, with no person needed? One whose
    command never began executing (no command pid was committed), and an --idempotent one
    of this host: another host's may still be running (design.md §13)."""
    return obj["child_pid"] is None or (bool(obj.get("idempotent")) and shown_here(obj))


def list_entries(store: LedgerStore, now: int, states: list[str] | None = None) -> list[JsonObject]:
    """Entries (no captured output), filtered by their shown state (effect_unknown too) at
    ``now`` by relay's clock."""
    wanted = validate_states(states)
    stored = sorted({VIEWS[s].stored if s in VIEWS else s for s in wanted})
    objs = [entry_object(r, now) for r in store.list_ledger(stored)]
    return [o for o in objs if not wanted or o["state"] in wanted]


def entries_object(entries: list[JsonObject]) -> JsonObject:
    """What `relay ledger list --json` answers: ``{"entries": [entry, ...]}``."""
    return {"entries": entries}


def show(store: LedgerStore, key: str) -> JsonObject:
    return entry_object(_get(store, validate_key(key)), store.clock.now_ms(), output=True)


def awaiting(store: LedgerStore, now: int) -> list[JsonObject]:
    """Entries waiting for a person's approval, oldest first (for `relay watch`), as shown
    at ``now``."""
    rows = store.list_ledger(["awaiting_approval"])
    return [entry_object(r, now) for r in sorted(rows, key=lambda r: (r["created_at"], r["key"]))]


def validate_outcome(value: str) -> str:
    """A `ledger resolve --outcome`: succeeded, failed or forget, else ``usage_error``."""
    return validate.one_of(value, OUTCOMES, "--outcome")


def needs_terminal(row: Record) -> bool:
    """Does settling this entry need a person at a terminal? Yes when a person's approval
    decides about it: it was made with --approve, or a person denied it."""
    return bool(row["approve"]) or row["decision"] is not None


def resolve(
    store: LedgerStore,
    now: int,
    key: str,
    outcome: str,
    note: str | None,
    *,
    terminal: bool = False,
) -> JsonObject:
    """A person settles an entry: it did succeed, it did fail, or forget it (key free again).

    ``terminal``: the caller's standard input is a terminal. Entries under a person's
    approval (made with --approve, or denied) are refused without one
    (approval_needs_terminal), so an agent cannot undo a denial or skip the approval.
    """
    validate_outcome(outcome)
    row = _get(store, validate_key(key))
    if needs_terminal(row) and not terminal:
        raise RelayError(
            "approval_needs_terminal",
            f"`relay ledger resolve` refuses: key {key!r} is under a person's approval "
            f"({'denied' if row['state'] == 'denied' else 'made with --approve'}) and "
            "standard input is not a terminal; nothing changed",
        )
    state = row["state"]
    if state == "running" and entry_alive(row, now):
        where = f" on {place(row)} (renewed by it)" if foreign(row) else ""
        raise EntryError(
            "in_progress",
            f"key {key!r} is still running in {_process_text(row)}{where}; settle it only "
            "after it ended",
            entry_object(row, now),
        )
    if state == "running" and foreign(row) and not never_started(row, now) and not terminal:
        # relay cannot see the other host: only a person who checked it reruns the command
        raise RelayError(
            "approval_needs_terminal",
            f"`relay ledger resolve` refuses: key {key!r} was started on {place(row)}, "
            f"{stopped_renewing(row, now)}, and standard input is not a terminal; nothing "
            "changed",
        )
    values = {
        "resolution": outcome,
        "resolved_by": person(),
        "resolved_at": now,
        "resolution_note": note,
    }
    if outcome != "forget":
        exit_code = row["exit_code"]
        if outcome == "succeeded":
            exit_code = 0
        elif not exit_code:
            exit_code = 1
        values.update(exit_code=exit_code, finished_at=row["finished_at"] or now)
        if outcome == "succeeded":
            values["signal"] = None
    return entry_object(move(store, key, row, f"resolve_{outcome}", now, values), now, output=True)


def to_decide(store: LedgerStore, key: str, command: str, *, terminal: bool) -> JsonObject:
    """The entry a person is about to approve or deny, to show them first (no captured
    output). Refused (``approval_needs_terminal``) unless standard input is a
    ``terminal``, checked after the key and before the entry is looked up, as for
    :func:`approve`, :func:`deny` and `relay resolve` (design.md §6)."""
    validate_key(key)
    require_terminal(command, terminal)
    return entry_object(_get(store, key), store.clock.now_ms())


def approve(
    store: LedgerStore, now: int, key: str, seen: JsonObject | None = None, *, terminal: bool
) -> JsonObject:
    """A person at a terminal approves a `once --approve` entry.

    Refused (``approval_needs_terminal``) unless standard input is a ``terminal``: an
    agent's shell must not decide in a person's name. ``seen``: the entry as it was shown
    to the person who confirmed; if its command or directory is no longer the same
    (forgotten and made again meanwhile), nothing is approved (state_conflict): a person
    approves what they saw, nothing else.
    """
    validate_key(key)
    require_terminal("approve", terminal)
    row = _get(store, key)
    if not row["approve"]:
        raise RelayError(
            "state_conflict",
            f"key {key!r} was not made with --approve",
            detail="there is nothing to approve",
        )
    if seen is not None and (json.loads(row["argv"]), row["cwd"]) != (seen["argv"], seen["cwd"]):
        raise RelayError(
            "state_conflict",
            f"key {key!r} now names another command or "
            "directory than the one shown; nothing was approved",
            detail=Said.of("run ", relay("approve", key, changes=True), " again to see it"),
        )
    if row["decision"] == "approved" and row["state"] != "forgotten":
        return entry_object(row, now)  # already approved: nothing changes
    return entry_object(
        move(
            store,
            key,
            row,
            "approve",
            now,
            {"decision": "approved", "decided_by": person(), "decided_at": now},
        ),
        now,
    )


def deny(store: LedgerStore, now: int, key: str, note: str | None, *, terminal: bool) -> JsonObject:
    """A person at a terminal denies a `once --approve` entry (refused without one, as
    :func:`approve`)."""
    validate_key(key)
    require_terminal("deny", terminal)
    row = _get(store, key)
    if not row["approve"]:
        raise RelayError(
            "state_conflict",
            f"key {key!r} was not made with --approve",
            detail="there is nothing to deny",
        )
    if row["state"] == "denied":
        return entry_object(row, now)  # already denied: nothing changes
    return entry_object(
        move(
            store,
            key,
            row,
            "deny",
            now,
            {
                "decision": "denied",
                "decided_by": person(),
                "decided_at": now,
                "decision_note": note,
            },
        ),
        now,
    )


__all__ = [
    "DEFAULT_APPROVAL_WAIT_S",
    "OUTCOMES",
    "decide",
    "settle",
    "STATES",
    "EntryError",
    "approve",
    "awaiting",
    "begin",
    "command_text",
    "deny",
    "entries_object",
    "entry_object",
    "fingerprint",
    "list_entries",
    "needs_terminal",
    "place",
    "reruns_by_itself",
    "resolve",
    "running_values",
    "show",
    "shown_here",
    "this_host",
    "to_decide",
    "validate_cwd",
    "validate_key",
    "validate_outcome",
    "validate_states",
    "wait_for_decision",
]
