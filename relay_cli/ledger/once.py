"""`relay once` (design.md §10): run a ledger entry's command, at most once per key.

``once`` is the whole command: the ledger's gates first (``ledger.begin``: did I already
do this? should I do this?), then the run. The entry is committed ``running`` before the
command starts, and the command's own process is committed before it begins executing:
it is forked held at a gate (a pipe only relay writes to, ``process.spawn_gated``) and
released only after that commit, so a kill of relay at any moment leaves no command
running behind an entry that names no live process. The outcome (exit status, signal,
the last 64 KiB of stdout and stderr) is committed the moment the command ends.

Signals are held from the first moment (``process.Signals``), so one arriving between
committing the ``running`` entry and starting the command cannot leave a ``running``
entry behind a command that never started: the entry is withdrawn and the call ends
with 128+N.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from typing import TYPE_CHECKING, Callable, TextIO, TypeGuard, TypeVar

from ..core.command import Said, relay
from ..core.errors import RelayError
from ..core.limits import RENEW_S, TAIL_BYTES
from ..core.process import (
    CannotStart,
    Child,
    Interrupted,
    Me,
    Signals,
    command_argv,
    exit_status,
    process_start,
    signal_status,
    spawn_gated,
)
from ..core.record import record
from ..requests import due
from .entries import (
    DEFAULT_APPROVAL_WAIT_S,
    Decision,
    EntryError,
    begin,
    entry_object,
    output_text,
    running_values,
    validate_key,
    wait_for_decision,
)
from .outcome import (
    OnceResult,
    interrupted,
    not_started,
    ran,
    refused,
    replayed,
    timed_out,
    unrecorded,
)
from .states import apply, move, touch

if TYPE_CHECKING:
    import codecs

    from relay_cli.core.output import JsonObject
    from relay_cli.store import LedgerStore, Row, Store


T = TypeVar("T")

USAGE = "relay once --key KEY -- CMD [ARGS]..."  # the command line a usage_error names
_CHUNK = 64 * 1024
_DRAIN_AFTER_EXIT_S = 2.0  # a background grandchild holding the pipes open is not waited for


def not_started_object(
    key: str, argv: list[str], cwd: str, exit_code: int, error: str
) -> JsonObject:
    """The document of a call whose command could not be started (no entry is kept)."""
    return {
        "key": key,
        "state": "not_started",
        "argv": list(argv),
        "cwd": cwd,
        "exit_code": exit_code,
        "replayed": False,
        "error": error,
    }


# --------------------------------------------------------------------------- capture
class Tail:
    """The last ``limit`` bytes of a stream, and how many bytes it had in all."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(chunk) >= self.limit:
            self.buf[:] = chunk[-self.limit :]
            return
        self.buf += chunk
        extra = len(self.buf) - self.limit
        if extra > 0:
            del self.buf[:extra]

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Sink:
    """Writes the command's bytes through to one of relay's streams as they arrive.

    Uses the stream's file descriptor when it has one (no extra buffering); a reader that
    went away (broken pipe) stops the pass-through, never the capture or the command.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.fd: int | None = None
        self.broken = stream is None
        self._decoder: codecs.IncrementalDecoder | None = None
        if stream is not None:
            try:
                stream.flush()
                self.fd = stream.fileno()
            except (AttributeError, OSError, ValueError):
                import codecs

                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, chunk: bytes) -> None:
        if self.broken or not chunk:
            return
        try:
            if self.fd is not None:
                view = memoryview(chunk)
                while view:
                    n = os.write(self.fd, view)
                    view = view[n:]
            elif self.stream is not None and self._decoder is not None:
                self.stream.write(self._decoder.decode(chunk))
        except (OSError, ValueError):
            self.broken = True


@record
class RunResult:
    exit_code: int
    signal: int | None
    stdout: Tail
    stderr: Tail


def pump(
    proc: Child,
    out_sink: Sink,
    err_sink: Sink,
    limit: int = TAIL_BYTES,
    signals: Signals | None = None,
) -> RunResult:
    """Stream the command's output through while keeping the last ``limit`` bytes of each
    (a write blocks while its reader does not read: ``Renewal`` runs beside it)."""
    tails = {
        proc.stdout.fileno(): (Tail(limit), out_sink),
        proc.stderr.fileno(): (Tail(limit), err_sink),
    }
    out_tail, err_tail = tails[proc.stdout.fileno()][0], tails[proc.stderr.fileno()][0]
    sel = selectors.DefaultSelector()
    for fd in tails:
        sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    try:
        while sel.get_map():
            ready = sel.select(timeout=0.05)
            if signals is not None:
                signals.forward(proc.pid, proc.send_signal)
            for key, _ in ready:
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                tail, sink = tails[key.fd]
                tail.add(chunk)
                sink.write(chunk)
            if exited_at is None:
                if proc.poll() is not None:
                    exited_at = time.monotonic()
            elif not ready or time.monotonic() - exited_at > _DRAIN_AFTER_EXIT_S:
                break  # CMD ended; whatever still holds its pipes is not CMD
    finally:
        sel.close()
        proc.stdout.close()
        proc.stderr.close()
    status, killed_by = exit_status(proc.wait())
    return RunResult(status, killed_by, out_tail, err_tail)


def _mine(row: Row | None, me: Me, runs: int) -> TypeGuard[Row]:
    """Does the entry name this relay process (pid, start time, host) and its run?"""
    return (
        row is not None
        and row["runs"] == runs
        and (row["pid"], row["process_start"], row["host"], row["pid_namespace"])
        == (me.pid, me.start, me.host, me.ns)
    )


def _owned(row: Row | None, me: Me, runs: int) -> TypeGuard[Row]:
    return _mine(row, me, runs) and row["state"] == "running"


def _my_outcome(row: Row | None, me: Me, runs: int, result: RunResult) -> TypeGuard[Row]:
    """Is the entry's outcome the one this process committed, although the answer of its
    COMMIT was lost (design.md §13)? Then a retry finds it recorded, not resolved by
    someone else."""
    return (
        _mine(row, me, runs)
        and row["state"] in ("succeeded", "failed")
        and row["resolution"] is None
        and row["exit_code"] == result.exit_code
        and row["signal"] == result.signal
        and row["stdout_bytes"] == result.stdout.total
        and row["stderr_bytes"] == result.stderr.total
    )


def _retrying(fn: Callable[[], T], attempts: int = 4, unavailable_s: float = 30.0) -> T:
    """Run a write; on ``busy`` try again, and while the database server cannot be
    reached (a restart, design.md §13) keep trying for ``unavailable_s``: the outcome must
    not be lost to a lock or a restart."""
    deadline = time.monotonic() + unavailable_s
    tries = 0
    while True:
        try:
            return fn()
        except RelayError as e:
            tries += 1
            if e.code == "busy" and tries < attempts:
                continue
            if e.code == "database_unavailable" and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            raise


def record_child(store: LedgerStore, key: str, me: Me, runs: int, child_pid: int) -> bool:
    """Commit the command's pid and start time; False when the entry is no longer ours."""
    start = process_start(child_pid)

    def write() -> bool:
        with store.transaction():
            now = store.clock.now_ms()
            if not _owned(store.get_ledger(key), me, runs):
                return False
            touch(store, key, now, {"child_pid": child_pid, "child_start": start})
            return True

    return _retrying(write)


class Renewal:
    """While the command runs, renew the entry every RENEW_S seconds (``updated_at``), so
    relay elsewhere (another host, another PID namespace) knows this process is alive
    (design.md §10, §13), from a thread of its own.

    Renewal must not wait on the command's output. relay's main thread writes that output
    through and blocks for as long as its reader does not read: a full pipe, a terminal
    paused with Ctrl-S, a stalled network file. Only a thread is free of that whatever the
    stream is: readiness (``select``) promises little for a terminal or a file, and
    O_NONBLOCK would change the terminal for every other process that shares it. While
    the command runs the thread is the only user of the store; it is stopped and joined
    before the outcome is committed. Best effort: a renewal that fails (the server briefly
    unreachable, the database busy) is tried again a second later."""

    def __init__(self, store: LedgerStore, key: str, me: Me, runs: int) -> None:
        import threading

        self.store, self.key, self.me, self.runs = store, key, me, runs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relay-renewal", daemon=True)

    def __enter__(self) -> Renewal:
        self._thread.start()  # with the main thread's signal mask: signals stay its own
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        wait: float = RENEW_S
        while not self._stop.wait(wait):
            wait = RENEW_S if self.renew() else 1.0

    def renew(self) -> bool:
        """One renewal; False when it failed (nothing may escape the thread)."""
        try:
            with self.store.transaction():
                now = self.store.clock.now_ms()
                if _owned(self.store.get_ledger(self.key), self.me, self.runs):
                    touch(self.store, self.key, now, {})
        except Exception:  # noqa: BLE001 - a RelayError, or a connection that broke
            return False
        return True


def record_outcome(
    store: LedgerStore, key: str, me: Me, runs: int, result: RunResult
) -> Row | None:
    """Commit the outcome; returns the new row (None when the entry was no longer ours)."""

    def write() -> Row | None:
        # a plain transaction: nothing else (such as due request transitions) may stand
        # between the command's end and its recorded outcome
        with store.transaction():
            now = store.clock.now_ms()
            row = store.get_ledger(key)
            if _my_outcome(row, me, runs, result):
                return row  # committed by an earlier try whose answer was lost
            if not _owned(row, me, runs):
                return None
            return move(
                store,
                key,
                row,
                "exit_zero" if result.exit_code == 0 else "exit_nonzero",
                now,
                {
                    "exit_code": result.exit_code,
                    "signal": result.signal,
                    "stdout": result.stdout.bytes(),
                    "stderr": result.stderr.bytes(),
                    "stdout_bytes": result.stdout.total,
                    "stderr_bytes": result.stderr.total,
                    "finished_at": now,
                },
            )

    return _retrying(write)


def record_not_started(store: LedgerStore, key: str, me: Me, runs: int) -> None:
    """The command never started, so nothing ran: the key must not block a retry.

    An entry that a person approved goes back to ``approved`` (the approval stands for
    this key and command); any other entry is removed, so the next call starts afresh.
    """

    def write() -> None:
        with store.transaction():
            now = store.clock.now_ms()
            row = store.get_ledger(key)
            if not _owned(row, me, runs):
                return
            if row["approve"] and row["decision"] == "approved":
                values = running_values(now, me, runs - 1)
                values.update(
                    pid=None, process_start=None, host=None, pid_namespace=None, started_at=None
                )
                apply(store, key, row, "not_started_approved", now, values)
            else:
                apply(store, key, row, "not_started", now)

    _retrying(write)


# --------------------------------------------------------------------------- once
def once(
    store: Store,
    key: str,
    argv: list[str],
    cwd: str,
    *,
    idempotent: bool = False,
    approve: bool = False,
    timeout_s: float = DEFAULT_APPROVAL_WAIT_S,
    on_waiting: Callable[[JsonObject], None] | None = None,
    out_sink: Sink | None = None,
    err_sink: Sink | None = None,
    on_decided: Callable[[JsonObject], None] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> OnceResult:
    """`relay once`: replay, refuse, wait for a person, or run the command exactly once.

    Signals are held from the first moment, so one arriving between committing the
    ``running`` entry and starting CMD cannot leave a ``running`` entry behind a command
    that never started: the entry is withdrawn and the call ends with 128+N. A refusal
    that concerns the entry (``EntryError``) is a result too, carrying the entry.
    """
    validate_key(key)
    argv = command_argv(argv, USAGE)
    try:
        return _once(
            store,
            key,
            argv,
            cwd,
            idempotent=idempotent,
            approve=approve,
            timeout_s=timeout_s,
            on_waiting=on_waiting,
            out_sink=out_sink,
            err_sink=err_sink,
            on_decided=on_decided,
            sleep=sleep,
        )
    except EntryError as e:
        return refused(e)


def _once(
    store: Store,
    key: str,
    argv: list[str],
    cwd: str,
    *,
    idempotent: bool,
    approve: bool,
    timeout_s: float,
    on_waiting: Callable[[JsonObject], None] | None,
    out_sink: Sink | None,
    err_sink: Sink | None,
    on_decided: Callable[[JsonObject], None] | None,
    sleep: Callable[[float], None] | None,
) -> OnceResult:
    me = Me.current()
    decision: Decision | None  # None: the wait timed out
    with Signals() as signals:
        try:
            with due.unit(store) as now:
                decision = begin(
                    store, now, key, argv, cwd, idempotent=idempotent, approve=approve, me=me
                )
            if decision.action == "wait":
                if on_waiting is not None:
                    on_waiting(entry_object(decision.row, store.clock.now_ms()))
                decision = wait_for_decision(
                    store,
                    key,
                    argv,
                    cwd,
                    idempotent=idempotent,
                    me=me,
                    timeout_s=timeout_s,
                    sleep=sleep,
                    on_tick=signals.check,
                )
                if decision is not None and decision.action == "run" and on_decided:
                    on_decided(entry_object(decision.row, store.clock.now_ms()))
        except Interrupted as e:
            with due.unit(store, write=False):
                row = store.get_ledger(key)
            return interrupted(
                key,
                entry_object(row, store.clock.now_ms()) if row is not None else None,
                signal_status(e.signum),
                f"interrupted by signal {e.signum} while waiting; nothing ran",
            )
        if decision is None:
            with due.unit(store, write=False):
                row = store.get_ledger(key)
            entry = (
                entry_object(row, store.clock.now_ms(), output=True) if row is not None else None
            )
            return timed_out(key, entry, timeout_s)
        row = decision.row
        if decision.action == "replay":
            entry = entry_object(row, store.clock.now_ms(), output=True)
            entry["replayed"] = True
            return replayed(entry, row["exit_code"], (row["stdout"], row["stderr"]))
        return execute(
            store, key, row, argv, me, out_sink or Sink(None), err_sink or Sink(None), signals
        )


def execute(
    store: LedgerStore,
    key: str,
    row: Row,
    argv: list[str],
    me: Me,
    out_sink: Sink,
    err_sink: Sink,
    signals: Signals,
) -> OnceResult:
    """Run a command whose ``running`` entry is committed, and commit its outcome.

    The command's process is forked held at a gate (:class:`Child`); its pid and start
    time are committed first, and only then may it begin executing (design.md §10). A kill
    of relay before that commit closes the gate: the process ends without running the
    command. When the commit fails, the process is killed unstarted and the entry is
    withdrawn exactly as for a command that cannot start.
    """
    runs = row["runs"]
    early = signals.take()
    if early:  # told to stop before the command existed: withdraw the entry, start nothing
        record_not_started(store, key, me, runs)
        status = signal_status(early[0][0])
        message = f"relay received signal {early[0][0]} before the command started; it did not run"
        return interrupted(
            key, not_started_object(key, argv, row["cwd"], status, message), status, message
        )
    try:
        proc = spawn_gated(argv, signals)
        try:
            ours = record_child(store, key, me, runs, proc.pid)
        except BaseException as e:
            proc.abandon()
            if isinstance(e, RelayError):
                raise _unrecorded_start(store, key, me, runs, e) from e
            raise
        if not ours:
            proc.abandon()
            raise RelayError(
                "state_conflict",
                f"key {key!r} was settled by a person before its command started; nothing ran",
                detail=Said.of(relay("ledger", "show", key), " shows who settled it"),
            )
        proc.release()
    except CannotStart as e:
        record_not_started(store, key, me, runs)
        return not_started(
            not_started_object(key, argv, row["cwd"], e.status, e.message), e.status, e.message
        )
    try:
        with Renewal(store, key, me, runs):
            result = pump(proc, out_sink, err_sink, signals=signals)
    except BaseException:
        with contextlib.suppress(OSError):
            proc.kill()
        raise
    try:
        new = record_outcome(store, key, me, runs, result)
    except RelayError as e:
        raise _unrecorded_outcome(row, store.clock.now_ms(), result, e) from e
    if new is None:
        entry = entry_object(row, store.clock.now_ms())
        entry.update(exit_code=result.exit_code, signal=result.signal, replayed=False)
        return unrecorded(
            entry,
            result.exit_code,
            "the entry changed while the command ran (a person resolved it); "
            "this outcome was not recorded",
        )
    entry = entry_object(new, store.clock.now_ms(), output=True)
    entry["replayed"] = False
    return ran(entry, result.exit_code)


def _unrecorded_outcome(row: Row, now: int, result: RunResult, error: RelayError) -> EntryError:
    """The command ran, but its outcome could not be committed (disk full, a lock held past
    every retry): say exactly that. The entry stays ``running`` in the database and shows
    as effect_unknown once this relay process is gone."""
    entry = entry_object(row, now)
    how = (
        f"exit {result.exit_code}"
        if result.signal is None
        else f"killed by signal {result.signal}, exit {result.exit_code}"
    )
    entry.update(
        state="effect_unknown",
        effect_unknown=True,
        exit_code=result.exit_code,
        signal=result.signal,
        replayed=False,
        stdout=output_text(result.stdout.bytes()),
        stderr=output_text(result.stderr.bytes()),
        stdout_bytes=result.stdout.total,
        stderr_bytes=result.stderr.total,
        stdout_truncated=result.stdout.total > len(result.stdout.buf),
        stderr_truncated=result.stderr.total > len(result.stderr.buf),
    )
    rerun = (
        " (made with --idempotent: the next call with this key runs it again)"
        if row["idempotent"]
        else ""
    )
    return EntryError(
        "effect_unknown",
        f"the command ran ({how}), but relay could not record its outcome "
        f"({error.code}: {error.message}); the entry of key {row['key']!r} is effect_unknown"
        f"{rerun}",
        entry,
        detail=f"relay saw it end with {how}",
    )


def _unrecorded_start(
    store: LedgerStore, key: str, me: Me, runs: int, error: RelayError
) -> RelayError:
    """relay could not commit the command's pid: the command was killed before it began
    executing; withdraw the entry (as for a command that cannot start) and say so."""
    what = (
        f"relay could not record the command's process ({error.message}); the command "
        "was stopped before it began executing: nothing ran"
    )
    try:
        record_not_started(store, key, me, runs)
    except RelayError as again:
        return RelayError(
            error.code,
            f"{what}; the entry could not be withdrawn either "
            f"({again.message}): the next call with key {key!r} runs the command "
            "when the entry names no command process (relay ledger show says which), "
            "else a person settles it",
            detail=Said.of(
                *error.said.parts,
                "; " if error.said else "",
                "which: ",
                relay("ledger", "show", key),
                "; settled with ",
                relay("ledger", "resolve", key, "--outcome", "forget", changes=True),
            ),
        )
    return RelayError(error.code, f"{what}, and the key stays free", detail=error.said)
