"""The ledger's state machine of design.md §10, as data.

``TRANSITIONS`` is the only place that says which event moves a ledger entry from which
stored state to which, and who or what causes it. Every change of an entry's state goes
through :func:`apply`, which consults it (fields that are not the state, such as the
command's pid, change through :func:`touch`); ``relay schema`` and docs/design.md print
the table.

``effect_unknown`` is not a stored state. It is a view (:data:`VIEWS`): every output shows
a ``running`` entry whose relay process and command are both gone as ``effect_unknown``
(:func:`shown_state`), because its outcome was never recorded and only a person can say
whether the effect happened. The entry stays ``running`` in the database, so the
transitions that concern it start from ``running``, and their condition names the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

from ..core.command import Said, relay
from ..core.errors import RelayError
from ..core.limits import STALE_S
from ..core.process import pid_namespace, process_alive, this_host

if TYPE_CHECKING:
    from relay_cli.core.process import Me
    from relay_cli.store import LedgerStore, Record, Row

STORED_STATES = (
    "awaiting_approval",
    "approved",
    "denied",
    "running",
    "succeeded",
    "failed",
    "forgotten",
)
# nothing runs or waits for a person: `relay prune` may make a tombstone of the entry and
# later remove it (design.md §10); a person may still resolve or forget it
FINAL_STATES = ("succeeded", "failed", "denied", "forgotten")
# Across machines (design.md §13) a process on another host cannot be looked at: while
# its command runs, the relay process renews its entry (``updated_at``) every RENEW_S
# seconds; an entry of another host without a renewal for STALE_S seconds is effect_unknown
# (relay cannot see whether its command still runs there: only a person reruns it).


class View(NamedTuple):
    stored: str  # the stored state it is a view of
    when: str  # when an entry in that stored state is shown this way


VIEWS = {
    "effect_unknown": View(
        "running",
        "the relay process and the command the entry names "
        "are both gone (checked on this host), or an entry "
        f"of another host was not renewed for {STALE_S} s "
        "(relay cannot see whether its command still runs)",
    ),
}
# what outputs show, in lifecycle order (``--state`` of `relay ledger list` takes these)
STATES = (*STORED_STATES[:4], "effect_unknown", *STORED_STATES[4:])


class Meaning(NamedTuple):
    claims: str
    does_not_claim: str | None
    on_call: str  # what a `relay once` call with the same key and command does


MEANING = {
    "awaiting_approval": Meaning(
        "the command needs a person's approval and has none yet; nothing ran",
        None,
        "waits for a person's decision (exit 75 `timeout` when none comes in time)",
    ),
    "approved": Meaning(
        "a person approved the command at a terminal; it has not started", None, "runs it"
    ),
    "denied": Meaning(
        "a person denied the command at a terminal; nothing ran",
        None,
        "exits 10 (`denied`); nothing runs",
    ),
    "running": Meaning(
        "relay committed the entry and started the command, or is starting it",
        "that the command is still running: once relay and the command are gone, the entry "
        "shows effect_unknown",
        "exits 75 (`in_progress`); nothing runs",
    ),
    "effect_unknown": Meaning(
        "the command was started but its outcome was never recorded: relay and the command "
        "are gone, or (another host's entry) that host stopped renewing it",
        "that it failed, that it did not run, that it is safe to run again, or (another "
        "host's entry) that the command stopped",
        "exits 11 (`effect_unknown`) and runs nothing; made with --idempotent, runs it "
        "again when it was started on this host (another host's: only after a person "
        "settled it at a terminal); one whose command pid was never committed never ran, "
        "and runs",
    ),
    "succeeded": Meaning(
        "the command exited 0, or a person said it succeeded",
        "that its effect is what was intended",
        "replays its stored output and exit status; nothing runs",
    ),
    "failed": Meaning(
        "the command exited with another status or was killed by a signal, or a person "
        "said it failed",
        "that it had no effect",
        "replays its stored output and exit status; nothing runs",
    ),
    "forgotten": Meaning(
        "a person forgot the entry: the key is free again",
        "whether the command ran",
        "starts afresh, waiting for a person's approval again when the entry was made "
        "with --approve",
    ),
}

ONCE = "relay once"
PERSON_RESOLVE = (
    "a person: `relay ledger resolve` (at a terminal for an entry made with --approve, or denied)"
)


class Transition(NamedTuple):
    from_state: str | None  # None: no entry has the key
    event: str
    to_state: str | None  # None: the entry is withdrawn and the key is free
    who: str
    when: str


def _each(
    from_states: Iterable[str | None], event: str, to_state: str | None, who: str, when: str
) -> tuple[Transition, ...]:
    return tuple(Transition(s, event, to_state, who, when) for s in from_states)


_RESOLVABLE = ("running", "succeeded", "failed")
_SETTLE = (
    "the entry shows effect_unknown, or already has an outcome; at a terminal only "
    "when it was started on another host, which stopped renewing it (relay cannot "
    "see whether the command still runs there)"
)

TRANSITIONS: tuple[Transition, ...] = (
    Transition(None, "call", "running", ONCE, "a new key, without --approve"),
    Transition(
        None,
        "call_approve",
        "awaiting_approval",
        ONCE,
        "a new key, with --approve: nothing runs until a person approves",
    ),
    Transition(
        "forgotten",
        "call",
        "running",
        ONCE,
        "the forgotten entry is replaced; neither it nor the call asks for approval",
    ),
    Transition(
        "forgotten",
        "call_approve",
        "awaiting_approval",
        ONCE,
        "the forgotten entry is replaced; the call has --approve, or the forgotten "
        "entry was made with it (the requirement passes on)",
    ),
    Transition(
        "awaiting_approval",
        "approve",
        "approved",
        "a person: `relay approve`, at a terminal",
        "after seeing the command",
    ),
    Transition(
        "awaiting_approval",
        "deny",
        "denied",
        "a person: `relay deny`, at a terminal",
        "nothing ran",
    ),
    Transition(
        "approved",
        "deny",
        "denied",
        "a person: `relay deny`, at a terminal",
        "before a call took it",
    ),
    Transition(
        "approved",
        "take",
        "running",
        ONCE,
        "the waiting call, or the next call with the key, runs it",
    ),
    Transition(
        "running",
        "rerun",
        "running",
        ONCE,
        "the entry shows effect_unknown, was made with --idempotent and was started on this host",
    ),
    Transition(
        "running",
        "reclaim",
        "running",
        ONCE,
        "the entry names no command process and its relay process is gone (or is "
        "this very process): the command never began executing, so this call runs "
        "it",
    ),
    Transition("running", "exit_zero", "succeeded", ONCE, "the command ended with exit 0"),
    Transition(
        "running",
        "exit_nonzero",
        "failed",
        ONCE,
        "the command ended with another status or was killed by a signal",
    ),
    Transition(
        "running",
        "not_started",
        None,
        ONCE,
        "the command could not start (127, 126), its pid could not be committed, or "
        "a signal stopped relay first: the entry is withdrawn",
    ),
    Transition(
        "running",
        "not_started_approved",
        "approved",
        ONCE,
        "the same, for an entry a person approved: the approval stands",
    ),
    *_each(_RESOLVABLE, "resolve_succeeded", "succeeded", PERSON_RESOLVE, _SETTLE),
    *_each(_RESOLVABLE, "resolve_failed", "failed", PERSON_RESOLVE, _SETTLE),
    *_each(
        STORED_STATES,
        "resolve_forget",
        "forgotten",
        PERSON_RESOLVE,
        "any entry but a running one that is alive (its relay process or command lives "
        f"on this host, or another host renewed it within {STALE_S} s); at a terminal only for a "
        "running one of another host that stopped renewing it",
    ),
)

# events that make a new entry (a forgotten one is replaced, not updated)
NEW_ENTRY_EVENTS = frozenset({"call", "call_approve"})

# What a refusal says after "key K is STATE", and its detail, for the events a person
# asks for; any other refused event is a bug in relay's own order of steps.
REFUSALS = {
    "approve": ("", "it cannot be approved now"),
    "deny": ("", "it already started or was settled; it cannot be denied now"),
    "resolve_succeeded": (": its command never ran", "only --outcome forget applies to it"),
    "resolve_failed": (": its command never ran", "only --outcome forget applies to it"),
}

_BY_KEY = {(t.from_state, t.event): t for t in TRANSITIONS}


def transition(key: str, from_state: str | None, event: str) -> Transition:
    """The allowed transition for ``event`` from ``from_state``, else ``state_conflict``."""
    t = _BY_KEY.get((from_state, event))
    if t is not None:
        return t
    if event in REFUSALS:
        more, why = REFUSALS[event]
        detail = Said.of(why)
        if event == "approve":  # the entry, as it is now (design.md §14)
            detail = Said.of(why, "; ", relay("ledger", "show", key), " shows it")
        raise RelayError("state_conflict", f"key {key!r} is {from_state}{more}", detail=detail)
    raise RelayError(
        "state_conflict",
        f"cannot {event.replace('_', ' ')} the ledger entry "
        f"of key {key!r}: it is {from_state or 'not there'}",
    )


def allowed(from_state: str | None, event: str) -> bool:
    return (from_state, event) in _BY_KEY


def entry_alive(row: Record, now: int) -> bool:
    """Is the relay process or the command of this entry still running? On this host it is
    looked up; an entry of another host is alive while its relay process renewed it within
    STALE_S seconds by relay's clock at ``now`` (the database's, so the hosts agree on it)."""
    if foreign(row):
        if row["pid"] is None:
            return False
        renewed_at: int = row["updated_at"]
        return now - renewed_at <= STALE_S * 1000
    return process_alive(row["pid"], row["process_start"], row["host"]) or process_alive(
        row["child_pid"], row["child_start"], row["host"]
    )


def foreign(row: Record) -> bool:
    """Was the entry's command started on another host (relay cannot look there)?

    "Host" is one PID namespace of one boot of one machine (design.md §10): a pid means
    nothing outside its namespace, so an entry of another namespace with the same host
    name (a container or sandbox, ``unshare -p``), or of an earlier boot, is another
    host's. An entry that does not say its namespace (recorded before relay kept it) is
    too: relay cannot tell where its pids were counted."""
    if row["host"] is None:
        return False
    host: str = row["host"]
    namespace: str | None = row["pid_namespace"]
    return host != this_host() or namespace != pid_namespace()


def place(row: Record) -> str:
    """Where a foreign entry's command was started, as relay's messages name it."""
    if row["host"] != this_host():
        return f"host {row['host']}"
    if row["pid_namespace"] is None:
        return f"host {row['host']} (in a PID namespace it did not record)"
    return f"host {row['host']} in another PID namespace (or an earlier boot)"


def never_started(row: Record, now: int, me: Me | None = None) -> bool:
    """A ``running`` entry whose command never began executing: it names no command
    process (the command is held at its gate until its pid is committed, design.md §10),
    and no relay process is left to start it — the one it names is gone, or it is ``me``
    (this very process: a retry after the answer of its own commit was lost). Another
    host's entry counts once that host stopped renewing it."""
    if row["state"] != "running" or row["child_pid"] is not None:
        return False
    if me is not None and (
        row["pid"],
        row["process_start"],
        row["host"],
        row["pid_namespace"],
    ) == (me.pid, me.start, me.host, me.ns):
        return True
    return not entry_alive(row, now)


def shown_state(row: Record, now: int) -> str:
    """The state relay can vouch for: the stored state, or the view that applies to it
    (:data:`VIEWS`: a ``running`` entry whose processes are gone is ``effect_unknown``), at
    ``now`` by relay's clock."""
    state: str = row["state"]
    if state == VIEWS["effect_unknown"].stored and not entry_alive(row, now):
        return "effect_unknown"
    return state


def apply(
    store: LedgerStore,
    key: str,
    row: Row | None,
    event: str,
    at: int,
    values: dict[str, Any] | None = None,
) -> Row | None:
    """Move the ledger entry of ``key`` by ``event`` (consulting ``TRANSITIONS``).

    ``row`` is the entry as stored (None: there is none); ``values`` are the other fields
    the step sets. Must run inside a write transaction. A new entry replaces a forgotten
    one; a transition to no state withdraws the entry. Returns the stored row afterwards
    (None when withdrawn). Raises ``state_conflict`` when the table has no such step.
    """
    t = transition(key, None if row is None else row["state"], event)
    if t.to_state is None:
        store.delete_ledger(key)
        return None
    changes = {**(values or {}), "state": t.to_state, "updated_at": at}
    if event in NEW_ENTRY_EVENTS:
        if row is not None:
            store.delete_ledger(key)
        store.insert_ledger({"key": key, "created_at": at, **changes})
    else:
        store.update_ledger(key, changes)
    return store.get_ledger(key)


def move(
    store: LedgerStore,
    key: str,
    row: Row | None,
    event: str,
    at: int,
    values: dict[str, Any] | None = None,
) -> Row:
    """``apply`` for an event that leaves an entry (every one but ``not_started``): the
    stored row afterwards."""
    new = apply(store, key, row, event, at, values)
    if new is None:
        raise ValueError(f"the ledger event {event!r} withdraws the entry: use apply()")
    return new


def touch(store: LedgerStore, key: str, at: int, values: dict[str, Any]) -> None:
    """Change fields of an entry that are not its state (inside a write transaction)."""
    if "state" in values:
        raise ValueError("a ledger entry's state changes only through apply()")
    store.update_ledger(key, {**values, "updated_at": at})
