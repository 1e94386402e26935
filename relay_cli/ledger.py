"""The side-effect ledger (design.md §10): run a shell command at most once per key.

Plain functions over a store. ``once`` is the whole of `relay once`: the idempotency gate
(did I already do this?) first, then the approval gate (should I do this?), then the run.

Entry states::

    awaiting_approval --approve--> approved --(a call takes it)--> running
    awaiting_approval / approved --deny--> denied             (every later call: exit 10)
    (new key) ---------------------------------------------> running
    running --CMD ends--> succeeded (exit 0) | failed          (later calls replay it)
    running, recording relay and CMD gone --> stored state stays running, but every view
        shows the derived state effect_unknown (a person settles it with `ledger resolve`);
        --idempotent entries run again on the next call
    any state but a live running one --resolve forget--> forgotten (the key is free again,
        but an entry made with --approve passes its approval requirement on: the next call
        with the key waits for a person again, whatever its options)

A person's decision stays a person's: for an entry made with --approve (or denied),
`ledger resolve` refuses unless standard input is a terminal (approval_needs_terminal),
exactly like `relay approve` and `relay deny`.

Retention (`relay prune`, the rule of design.md §4 for requests): a final entry (succeeded,
failed, denied, forgotten) whose state is older than the retention (default 30 days, by
``updated_at``: when it reached that state) loses only its captured stdout/stderr
(``output_pruned_at`` is set); the rest stays as a tombstone, so a late retry still
replays the outcome or is still denied. 120 days after that (or the retention, if longer)
the row is removed and the key is new again. Running, awaiting and approved entries are
never touched.

Which process is "the process" of a running entry: the entry records the relay process
that will record the outcome (``pid``/``process_start``) and, once spawned, the command
(``child_pid``/``child_start``). The entry counts as alive while either of them is alive;
start times (``<boot id>:<ticks>`` from /proc/<pid>/stat field 22) make sure a reused pid
is not mistaken for the original process. Only when both are gone — relay crashed between
start and record, and the command is no longer running — is the effect unknown.

Across machines (design.md §13: several hosts share one PostgreSQL database) a process
on another host cannot be looked at. While its command runs, the relay process renews its
entry's ``updated_at`` every RENEW_S seconds; an entry recorded by another host counts as
alive while that renewal is at most STALE_S seconds old (relay's clock is the database's,
so the hosts agree on it), and as crashed (effect_unknown) after that.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from . import clock, lifecycle
from .errors import RelayError
from .store.sql_ledger import LEDGER_FINAL_STATES

KEY_RE = re.compile(r"^[!-~]{1,200}$")
TAIL_BYTES = 64 * 1024
DEFAULT_APPROVAL_WAIT_S = 50
RENEW_S = 10  # a running entry's relay process renews it this often (updated_at)
STALE_S = 30  # an entry of another host without a renewal for this long has crashed
STORED_STATES = ("awaiting_approval", "approved", "denied", "running", "succeeded", "failed",
                 "forgotten")
# what the views show: a running entry whose processes are gone is effect_unknown
STATES = (*STORED_STATES[:4], "effect_unknown", *STORED_STATES[4:])
OUTCOMES = ("succeeded", "failed", "forget")
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NOT_FOUND_EXIT = 127
NOT_EXECUTABLE_EXIT = 126
_CHUNK = 64 * 1024
_DRAIN_AFTER_EXIT_S = 2.0  # a background grandchild holding the pipes open is not waited for


class EntryError(RelayError):
    """A refusal that concerns an existing entry; ``entry`` is its public object."""

    def __init__(self, code: str, message: str, entry: dict, detail: str | None = None) -> None:
        super().__init__(code, message, detail=detail)
        self.entry = entry


# --------------------------------------------------------------------------- validation
def validate_key(key: str) -> str:
    if not isinstance(key, str) or not KEY_RE.match(key):
        shown = key if isinstance(key, str) and len(key) <= 60 else f"{str(key)[:60]}..."
        raise RelayError("invalid_key", f"--key {shown!r} is not 1 to 200 printable ASCII "
                         f"characters (got {len(key) if isinstance(key, str) else 0})")
    return key


def validate_states(values: list[str] | None) -> list[str]:
    for v in values or []:
        if v not in STATES:
            raise RelayError("usage_error", f"unknown ledger state {v!r}; states: "
                             f"{', '.join(STATES)}")
    return list(values or [])


def canonical_argv(argv: list[str]) -> str:
    """argv as stored: JSON with every non-ASCII character escaped (lossless, canonical)."""
    return json.dumps(list(argv), ensure_ascii=True, separators=(",", ":"))


def fingerprint(argv: list[str], cwd: str) -> str:
    """SHA-256 over the canonical JSON of ``[argv, cwd]`` (design.md §10)."""
    import hashlib

    doc = json.dumps([list(argv), cwd], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode("ascii")).hexdigest()


def command_text(argv: list[str]) -> str:
    return shlex.join(argv)


# --------------------------------------------------------------------------- the public object
def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "replace")


def shown_state(row) -> str:
    """The state relay can vouch for: a ``running`` entry whose relay process and command
    are both gone (checked on this host) is ``effect_unknown`` — its outcome was never
    recorded, and only a person can say whether the effect happened."""
    state = row["state"]
    if state == "running" and not entry_alive(row):
        return "effect_unknown"
    return state


def entry_object(row, *, output: bool = False) -> dict:
    """The one serializer of a ledger entry (``--json`` of once, ledger show/list, approve).

    ``state`` is the derived state (:func:`shown_state`); ``effect_unknown`` says the same
    as a flag. ``output_pruned`` says `relay prune` dropped the captured output (the
    entry is a tombstone: its outcome still replays).
    """
    iso = clock.iso
    state = shown_state(row)
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
            obj[name] = _text(data)
            obj[f"{name}_truncated"] = bool(total is not None and data is not None
                                            and total > len(data))
    return obj


def not_started_object(key: str, argv: list[str], cwd: str, exit_code: int, error: str) -> dict:
    """The document of a call whose command could not be started (no entry is kept)."""
    return {
        "key": key, "state": "not_started", "argv": list(argv), "cwd": cwd,
        "exit_code": exit_code, "replayed": False, "error": error,
    }


# --------------------------------------------------------------------------- processes
_BOOT_ID: str | None = None


def _boot_id() -> str:
    global _BOOT_ID
    if _BOOT_ID is None:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                _BOOT_ID = f.read().strip()
        except OSError:
            _BOOT_ID = "-"
    return _BOOT_ID


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start identity) from /proc/<pid>/stat, None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()  # fields from 3 (state) on
    return fields[0].decode(), f"{_boot_id()}:{int(fields[19])}"  # field 22: starttime


def _have_proc() -> bool:
    return os.path.isdir("/proc/self")


def process_start(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def this_host() -> str:
    return socket.gethostname()


def process_alive(pid: int | None, start: str | None, host: str | None) -> bool:
    """Is the process that was recorded as (pid, start, host) still running?

    On another host relay cannot look, so the process counts as alive here (the entry's
    renewal decides: :func:`entry_alive`).
    """
    if pid is None:
        return False
    if host is not None and host != this_host():
        return True
    if _have_proc():
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X", "x"):
            return False
        return start is None or stat[1] == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def entry_alive(row, now: int | None = None) -> bool:
    """A running entry of this host: its relay process or its command still runs. Of
    another host: its relay process renewed it within STALE_S (by relay's clock)."""
    if row["host"] is not None and row["host"] != this_host():
        if row["pid"] is None:
            return False
        now = clock.now_ms() if now is None else now
        return now - row["updated_at"] <= STALE_S * 1000
    return (process_alive(row["pid"], row["process_start"], row["host"])
            or process_alive(row["child_pid"], row["child_start"], row["host"]))


@dataclass(frozen=True)
class Me:
    """The relay process that runs the command and records its outcome."""

    pid: int
    start: str | None
    host: str

    @classmethod
    def current(cls) -> Me:
        pid = os.getpid()
        return cls(pid, process_start(pid), this_host())


# --------------------------------------------------------------------------- the gates
@dataclass
class Decision:
    action: str  # "run" | "replay" | "wait"
    row: object


def _get(store, key: str):
    row = store.get_ledger(key)
    if row is None:
        raise RelayError("ledger_key_not_found", f"no ledger entry has the key {key!r}")
    return row


def _running_values(now: int, me: Me, runs: int) -> dict:
    return {
        "state": "running", "runs": runs, "pid": me.pid, "process_start": me.start,
        "host": me.host, "child_pid": None, "child_start": None, "started_at": now,
        "finished_at": None, "exit_code": None, "signal": None, "stdout": None,
        "stderr": None, "stdout_bytes": None, "stderr_bytes": None, "updated_at": now,
    }


def begin(store, now: int, key: str, argv: list[str], cwd: str, *, idempotent: bool,
          approve: bool, me: Me) -> Decision:
    """Inside a write transaction: decide what this call does with the key.

    Records a new entry (``running``, or ``awaiting_approval`` with ``approve``) or takes
    an approved / rerunnable one; raises key_conflict, in_progress, effect_unknown or
    denied. The idempotency gate comes first: a finished entry replays without asking.
    """
    fp = fingerprint(argv, cwd)
    row = store.get_ledger(key)
    if row is not None and row["state"] == "forgotten":
        # the key is free again, but a person's approval requirement is not forgotten
        approve = approve or bool(row["approve"])
        store.delete_ledger(key)
        row = None
    if row is None:
        values = {
            "key": key, "fingerprint": fp, "argv": canonical_argv(argv), "cwd": cwd,
            "idempotent": int(idempotent), "approve": int(approve), "created_at": now,
            "updated_at": now, "runs": 0, "state": "awaiting_approval",
        }
        if not approve:
            values.update(_running_values(now, me, 1))
        store.insert_ledger(values)
        row = store.get_ledger(key)
        return Decision("wait" if approve else "run", row)
    if row["fingerprint"] != fp:
        raise RelayError(
            "key_conflict", f"the key {key!r} was used for another command or directory",
            detail=f"it ran `{command_text(json.loads(row['argv']))}` in {row['cwd']}",
        )
    state = row["state"]
    entry = entry_object(row)
    if state in ("succeeded", "failed"):
        return Decision("replay", row)
    if state == "denied":
        raise EntryError("denied", f"a person denied the command of key {key!r}", entry,
                         detail=f"denied by {row['decided_by']}")
    if state == "awaiting_approval":
        return Decision("wait", row)
    if state == "running":
        if entry_alive(row, now):
            raise EntryError("in_progress", f"key {key!r} is running in process {row['pid']} "
                             f"on {row['host']}", entry)
        if not row["idempotent"]:
            raise EntryError(
                "effect_unknown",
                f"key {key!r} started at {entry['started_at']} but its outcome was never "
                "recorded (relay and the command are gone); nothing was run now", entry,
            )
    # approved, or a crashed run of an --idempotent entry: this call runs it
    store.update_ledger(key, _running_values(now, me, row["runs"] + 1))
    return Decision("run", store.get_ledger(key))


def wait_for_decision(store, key: str, argv: list[str], cwd: str, *, idempotent: bool,
                      me: Me, timeout_s: float, sleep=None,
                      on_tick=None) -> Decision | None:
    """Wait (no lock held while sleeping) until a person decided; None on timeout."""
    fp = fingerprint(argv, cwd)

    def check():
        with lifecycle.unit(store, write=False):
            row = store.get_ledger(key)
        if row is not None and row["state"] == "awaiting_approval" and row["fingerprint"] == fp:
            return None
        with lifecycle.unit(store) as now:
            # approve=True: an entry forgotten while we waited must be approved again
            decision = begin(store, now, key, argv, cwd, idempotent=idempotent, approve=True,
                             me=me)
        return None if decision.action == "wait" else decision

    return lifecycle.poll(store, check, timeout_s, on_tick=on_tick, sleep=sleep)


# --------------------------------------------------------------------------- running
class Tail:
    """The last ``limit`` bytes of a stream, and how many bytes it had in all."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(chunk) >= self.limit:
            self.buf[:] = chunk[-self.limit:]
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

    def __init__(self, stream) -> None:
        self.stream = stream
        self.fd = None
        self.broken = stream is None
        self._decoder = None
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
            else:
                self.stream.write(self._decoder.decode(chunk))
        except (OSError, ValueError):
            self.broken = True


@dataclass
class RunResult:
    exit_code: int
    signal: int | None
    stdout: Tail
    stderr: Tail


class NotStarted(Exception):
    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message


SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel sent (e.g. Ctrl-C on a terminal)


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


class Signals:
    """Holds SIGINT/SIGTERM/SIGHUP while `once` waits or runs, so none is lost or acted on
    half-way, and forwards them to CMD.

    On Linux the signals are blocked and collected with ``sigtimedwait``, which tells who
    sent them: a signal the terminal driver sent (Ctrl-C, hangup) already reached CMD,
    which shares relay's foreground process group, so it is not sent a second time (a
    second Ctrl-C means "force quit" to some programs). Signals sent to relay with
    ``kill`` are forwarded. Elsewhere (or off the main thread) Python handlers collect
    them and every one is forwarded.
    """

    def __init__(self) -> None:
        self.mode = "none"
        self.pending: list[tuple[int, bool]] = []
        self.saved: dict[int, object] = {}
        self.old_mask = None
        self.ignored: set[int] = set()

    def __enter__(self) -> Signals:
        import threading

        # what relay's caller set to be ignored (e.g. `nohup`) stays ignored, for CMD too
        self.ignored = {sig for sig in FORWARDED_SIGNALS
                        if signal.getsignal(sig) == signal.SIG_IGN}

        main = threading.current_thread() is threading.main_thread()
        if main and hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
            self.old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)
            self.mode = "mask"
        elif main:
            for sig in FORWARDED_SIGNALS:
                self.saved[sig] = signal.signal(sig, self._handle)
            self.mode = "handler"
        return self

    def _handle(self, signum, frame) -> None:
        self.pending.append((signum, False))

    def take(self) -> list[tuple[int, bool]]:
        """Signals that arrived since the last call: (signal number, sent by the kernel)."""
        if self.mode == "mask":
            while True:
                info = signal.sigtimedwait(FORWARDED_SIGNALS, 0)
                if info is None:
                    break
                self.pending.append((info.si_signo, info.si_code == SI_KERNEL))
        got, self.pending = self.pending, []
        return [(signum, kern) for signum, kern in got if signum not in self.ignored]

    def child_setup(self) -> None:
        """Runs in the child between fork and exec: CMD starts with no signal blocked."""
        if self.mode == "mask":
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask or ())

    def check(self) -> None:
        """While nothing runs yet: a signal ends the call (nothing is started)."""
        got = self.take()
        if got:
            raise Interrupted(got[0][0])

    def forward(self, proc: subprocess.Popen) -> None:
        for signum, from_kernel in self.take():
            if from_kernel and _same_group(proc.pid):
                continue  # the terminal sent it to CMD too
            with contextlib.suppress(OSError):
                proc.send_signal(signum)

    def __exit__(self, *exc) -> None:
        if self.mode == "mask":
            self.take()  # CMD has ended or never started: what came late is dropped
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask)
        for sig, old in self.saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old)


def _same_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == os.getpgrp()
    except OSError:
        return False


def spawn(argv: list[str], signals: Signals | None = None) -> subprocess.Popen:
    preexec = signals.child_setup if signals is not None and signals.mode == "mask" else None
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                close_fds=True, preexec_fn=preexec)  # noqa: PLW1509
    except FileNotFoundError as e:
        raise NotStarted(NOT_FOUND_EXIT, f"command not found: {argv[0]}") from e
    except PermissionError as e:
        raise NotStarted(NOT_EXECUTABLE_EXIT, f"not executable: {argv[0]}") from e
    except OSError as e:  # ENOEXEC, EISDIR, ...
        raise NotStarted(NOT_EXECUTABLE_EXIT,
                         f"cannot execute {argv[0]}: {e.strerror or e}") from e


def pump(proc: subprocess.Popen, out_sink: Sink, err_sink: Sink,
         limit: int = TAIL_BYTES, signals: Signals | None = None,
         on_tick: Callable[[], None] | None = None) -> RunResult:
    """Stream the command's output through while keeping the last ``limit`` bytes of each."""
    tails = {proc.stdout.fileno(): (Tail(limit), out_sink),
             proc.stderr.fileno(): (Tail(limit), err_sink)}
    out_tail, err_tail = tails[proc.stdout.fileno()][0], tails[proc.stderr.fileno()][0]
    sel = selectors.DefaultSelector()
    for fd in tails:
        sel.register(fd, selectors.EVENT_READ)
    exited_at = None
    try:
        while sel.get_map():
            ready = sel.select(timeout=0.05)
            if signals is not None:
                signals.forward(proc)
            if on_tick is not None:
                on_tick()
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
    rc = proc.wait()
    if rc < 0:
        return RunResult(128 - rc, -rc, out_tail, err_tail)
    return RunResult(rc, None, out_tail, err_tail)


def _owned(row, me: Me, runs: int) -> bool:
    return (row is not None and row["state"] == "running" and row["pid"] == me.pid
            and row["runs"] == runs)


def _retrying(fn, attempts: int = 4, unavailable_s: float = 30.0):
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


def record_child(store, key: str, me: Me, runs: int, child_pid: int) -> None:
    start = process_start(child_pid)

    def write():
        with store.transaction():
            now = clock.now_ms()
            if _owned(store.get_ledger(key), me, runs):
                store.update_ledger(key, {"child_pid": child_pid, "child_start": start,
                                          "updated_at": now})

    _retrying(write)


class Renewal:
    """While the command runs, renew the entry every RENEW_S seconds (``updated_at``), so
    relay on other hosts knows this process is alive (design.md §13). Best effort: a
    renewal that fails (server briefly unreachable) is tried again at the next tick."""

    def __init__(self, store, key: str, me: Me, runs: int) -> None:
        self.store, self.key, self.me, self.runs = store, key, me, runs
        self.next_at = time.monotonic() + RENEW_S

    def tick(self) -> None:
        if time.monotonic() < self.next_at:
            return
        try:
            with self.store.transaction():
                now = clock.now_ms()
                if _owned(self.store.get_ledger(self.key), self.me, self.runs):
                    self.store.update_ledger(self.key, {"updated_at": now})
        except RelayError:
            self.next_at = time.monotonic() + 1
            return
        self.next_at = time.monotonic() + RENEW_S


def record_outcome(store, key: str, me: Me, runs: int, result: RunResult):
    """Commit the outcome; returns the new row (None when the entry was no longer ours)."""
    def write():
        # a plain transaction: nothing else (such as due request transitions) may stand
        # between the command's end and its recorded outcome
        with store.transaction():
            now = clock.now_ms()
            if not _owned(store.get_ledger(key), me, runs):
                return None
            store.update_ledger(key, {
                "state": "succeeded" if result.exit_code == 0 else "failed",
                "exit_code": result.exit_code, "signal": result.signal,
                "stdout": result.stdout.bytes(), "stderr": result.stderr.bytes(),
                "stdout_bytes": result.stdout.total, "stderr_bytes": result.stderr.total,
                "finished_at": now, "updated_at": now,
            })
            return store.get_ledger(key)

    return _retrying(write)


def record_not_started(store, key: str, me: Me, runs: int) -> None:
    """The command never started, so nothing ran: the key must not block a retry.

    An entry that a person approved goes back to ``approved`` (the approval stands for
    this key and command); any other entry is removed, so the next call starts afresh.
    """
    def write():
        with store.transaction():
            now = clock.now_ms()
            row = store.get_ledger(key)
            if not _owned(row, me, runs):
                return
            if row["approve"] and row["decision"] == "approved":
                values = _running_values(now, me, runs - 1)
                values.update(state="approved", pid=None, process_start=None, host=None,
                              started_at=None)
                store.update_ledger(key, values)
            else:
                store.delete_ledger(key)

    _retrying(write)


# --------------------------------------------------------------------------- once
@dataclass
class OnceResult:
    # "ran" | "replayed" | "timeout" | "not_started" | "interrupted" | "unrecorded"
    kind: str
    exit_code: int
    entry: dict | None
    message: str | None = None
    raw: tuple = (None, None)  # the stored stdout and stderr bytes, for a replay


def once(store, key: str, argv: list[str], cwd: str, *, idempotent: bool = False,
         approve: bool = False, timeout_s: float = DEFAULT_APPROVAL_WAIT_S,
         on_waiting: Callable[[dict], None] | None = None, out_sink: Sink | None = None,
         err_sink: Sink | None = None, on_decided: Callable[[dict], None] | None = None,
         sleep=time.sleep) -> OnceResult:
    """`relay once`: replay, refuse, wait for a person, or run the command exactly once.

    Signals are held from the first moment, so one arriving between committing the
    ``running`` entry and starting CMD cannot leave a ``running`` entry behind a command
    that never started: the entry is withdrawn and the call ends with 128+N.
    """
    validate_key(key)
    if not argv:
        raise RelayError("usage_error", "no command given: relay once --key KEY -- CMD [ARGS]...")
    me = Me.current()
    with Signals() as signals:
        try:
            with lifecycle.unit(store) as now:
                decision = begin(store, now, key, argv, cwd, idempotent=idempotent,
                                 approve=approve, me=me)
            if decision.action == "wait":
                if on_waiting is not None:
                    on_waiting(entry_object(decision.row))
                decision = wait_for_decision(store, key, argv, cwd, idempotent=idempotent,
                                             me=me, timeout_s=timeout_s, sleep=sleep,
                                             on_tick=signals.check)
                if decision is not None and decision.action == "run" and on_decided:
                    on_decided(entry_object(decision.row))
        except Interrupted as e:
            with lifecycle.unit(store, write=False):
                row = store.get_ledger(key)
            return OnceResult("interrupted", 128 + e.signum,
                              entry_object(row) if row is not None else None,
                              f"interrupted by signal {e.signum} while waiting; nothing ran")
        if decision is None:
            with lifecycle.unit(store, write=False):
                row = store.get_ledger(key)
            entry = entry_object(row, output=True) if row is not None else None
            return OnceResult("timeout", 75, entry)
        row = decision.row
        if decision.action == "replay":
            entry = entry_object(row, output=True)
            entry["replayed"] = True
            return OnceResult("replayed", row["exit_code"], entry,
                              raw=(row["stdout"], row["stderr"]))
        return execute(store, key, row, argv, me, out_sink or Sink(None),
                       err_sink or Sink(None), signals)


def execute(store, key: str, row, argv: list[str], me: Me, out_sink: Sink, err_sink: Sink,
            signals: Signals) -> OnceResult:
    """Run a command whose ``running`` entry is committed, and commit its outcome."""
    runs = row["runs"]
    try:
        early = signals.take()
        if early:
            raise NotStarted(128 + early[0][0], f"relay received signal {early[0][0]} before "
                             "the command started; it did not run")
        proc = spawn(argv, signals)
    except NotStarted as e:
        record_not_started(store, key, me, runs)
        return OnceResult("not_started", e.exit_code,
                          not_started_object(key, argv, row["cwd"], e.exit_code, e.message),
                          e.message)
    try:
        try:
            record_child(store, key, me, runs, proc.pid)
        except RelayError:
            pass  # best effort: the entry already names this relay process
        renewal = Renewal(store, key, me, runs)
        result = pump(proc, out_sink, err_sink, signals=signals, on_tick=renewal.tick)
    except BaseException:
        with contextlib.suppress(OSError):
            proc.kill()
        raise
    new = record_outcome(store, key, me, runs, result)
    if new is None:
        entry = entry_object(row)
        entry.update(exit_code=result.exit_code, signal=result.signal, replayed=False)
        return OnceResult("unrecorded", result.exit_code, entry,
                          "the entry changed while the command ran (a person resolved it); "
                          "this outcome was not recorded")
    entry = entry_object(new, output=True)
    entry["replayed"] = False
    return OnceResult("ran", result.exit_code, entry)


# --------------------------------------------------------------------------- inspect, settle
def list_entries(store, states: list[str] | None = None) -> list[dict]:
    """Entries (no captured output), filtered by their shown state (effect_unknown too)."""
    wanted = validate_states(states)
    stored = sorted({"running" if s == "effect_unknown" else s for s in wanted})
    objs = [entry_object(r) for r in store.list_ledger(stored)]
    return [o for o in objs if not wanted or o["state"] in wanted]


def show(store, key: str) -> dict:
    return entry_object(_get(store, validate_key(key)), output=True)


def awaiting(store) -> list[dict]:
    """Entries waiting for a person's approval, oldest first (for `relay watch`)."""
    rows = store.list_ledger(["awaiting_approval"])
    return [entry_object(r) for r in sorted(rows, key=lambda r: (r["created_at"], r["key"]))]


def needs_terminal(row) -> bool:
    """Does settling this entry need a person at a terminal? Yes when a person's approval
    decides about it: it was made with --approve, or a person denied it."""
    return bool(row["approve"]) or row["decision"] is not None


def resolve(store, now: int, key: str, outcome: str, note: str | None, *,
            terminal: bool = False) -> dict:
    """A person settles an entry: it did succeed, it did fail, or forget it (key free again).

    ``terminal``: the caller's standard input is a terminal. Entries under a person's
    approval (made with --approve, or denied) are refused without one
    (approval_needs_terminal), so an agent cannot undo a denial or skip the approval.
    """
    if outcome not in OUTCOMES:
        raise RelayError("usage_error", f"--outcome must be one of {', '.join(OUTCOMES)}")
    row = _get(store, validate_key(key))
    if needs_terminal(row) and not terminal:
        raise RelayError(
            "approval_needs_terminal",
            f"`relay ledger resolve` refuses: key {key!r} is under a person's approval "
            f"({'denied' if row['state'] == 'denied' else 'made with --approve'}) and "
            "standard input is not a terminal; nothing changed")
    state = row["state"]
    if state == "running" and row["host"] in (None, this_host()) and entry_alive(row, now):
        # (an entry started on another host cannot be checked: a person may settle it)
        raise EntryError("in_progress", f"key {key!r} is still running in process "
                         f"{row['pid']}; settle it only after it ended", entry_object(row))
    values = {"resolution": outcome, "resolved_by": lifecycle.person(), "resolved_at": now,
              "resolution_note": note, "updated_at": now}
    if outcome == "forget":
        values["state"] = "forgotten"
    else:
        if state not in ("running", "succeeded", "failed"):
            raise RelayError("state_conflict", f"key {key!r} is {state}: its command never ran",
                             detail="only --outcome forget applies to it")
        exit_code = row["exit_code"]
        if outcome == "succeeded":
            exit_code = 0
        elif not exit_code:
            exit_code = 1
        values.update(state=outcome, exit_code=exit_code,
                      finished_at=row["finished_at"] or now)
        if outcome == "succeeded":
            values["signal"] = None
    store.update_ledger(key, values)
    return entry_object(store.get_ledger(key), output=True)


def approve(store, now: int, key: str, seen: dict | None = None) -> dict:
    """A person at a terminal approves a `once --approve` entry (checked by the caller).

    ``seen``: the entry as it was shown to the person who confirmed; if its command or
    directory is no longer the same (forgotten and made again meanwhile), nothing is
    approved (state_conflict): a person approves what they saw, nothing else.
    """
    row = _get(store, validate_key(key))
    if not row["approve"]:
        raise RelayError("state_conflict", f"key {key!r} was not made with --approve",
                         detail="there is nothing to approve")
    if seen is not None and (json.loads(row["argv"]), row["cwd"]) != (seen["argv"],
                                                                       seen["cwd"]):
        raise RelayError("state_conflict", f"key {key!r} now names another command or "
                         "directory than the one shown; nothing was approved",
                         detail="run `relay approve KEY` again to see it")
    if row["state"] == "awaiting_approval":
        store.update_ledger(key, {"state": "approved", "decision": "approved",
                                  "decided_by": lifecycle.person(), "decided_at": now,
                                  "updated_at": now})
        return entry_object(store.get_ledger(key))
    if row["decision"] == "approved" and row["state"] != "forgotten":
        return entry_object(row)  # already approved: nothing changes
    raise RelayError("state_conflict", f"key {key!r} is {row['state']}",
                     detail="it cannot be approved now; `relay ledger show KEY` shows it")


def deny(store, now: int, key: str, note: str | None) -> dict:
    row = _get(store, validate_key(key))
    if not row["approve"]:
        raise RelayError("state_conflict", f"key {key!r} was not made with --approve",
                         detail="there is nothing to deny")
    if row["state"] in ("awaiting_approval", "approved"):
        store.update_ledger(key, {"state": "denied", "decision": "denied",
                                  "decided_by": lifecycle.person(), "decided_at": now,
                                  "decision_note": note, "updated_at": now})
        return entry_object(store.get_ledger(key))
    if row["state"] == "denied":
        return entry_object(row)  # already denied: nothing changes
    raise RelayError("state_conflict", f"key {key!r} is {row['state']}",
                     detail="it already started or was settled; it cannot be denied now")


PRUNE_BATCH = 500


def prune(store, now_ms: int, cutoff_ms: int, dry_run: bool = False,
          tomb_cutoff_ms: int | None = None, batch: int = PRUNE_BATCH) -> dict:
    """The ledger's retention (the rule of design.md §4 for request tombstones).

    Final entries (succeeded, failed, denied, forgotten) that reached their state
    (``updated_at``) before ``tomb_cutoff_ms`` are removed; those that did so before
    ``cutoff_ms`` lose only their captured stdout/stderr and stay as tombstones (key,
    fingerprint, state, exit code, signal, times, decision, resolution), so a late retry
    still replays the outcome or is still denied. ``tomb_cutoff_ms`` defaults to 120 days
    before ``now_ms`` or ``cutoff_ms``, whichever is earlier (retention.cutoffs). Running,
    awaiting and approved entries are never touched.

    Inside the caller's write transaction if one is open, else in short transactions of
    ``batch`` rows. Returns ``{"entries_pruned": n, "entries_removed": m,
    "by_state": {state: removed}, "dry_run": bool}``.
    """
    from .retention import TOMBSTONE_S

    if tomb_cutoff_ms is None:
        tomb_cutoff_ms = min(cutoff_ms, now_ms - TOMBSTONE_S * 1000)
    tomb_cutoff_ms = min(tomb_cutoff_ms, cutoff_ms)
    in_tx = getattr(store.db, "in_tx", False)

    def step(fn):
        if in_tx:
            return fn()
        with store.transaction(write=not dry_run):
            return fn()

    if dry_run:
        trimmed, removed = step(lambda: store.ledger_prune_counts(cutoff_ms, tomb_cutoff_ms))
    else:
        removed: dict[str, int] = {}
        while True:  # removals first, so the output pass does not touch doomed rows
            done = step(lambda: store.remove_ledger_tombstones(tomb_cutoff_ms, batch))
            for state, n in done.items():
                removed[state] = removed.get(state, 0) + n
            if sum(done.values()) < batch:
                break
        trimmed = 0
        while True:
            n = step(lambda: store.prune_ledger_output(now_ms, cutoff_ms, tomb_cutoff_ms,
                                                       batch))
            trimmed += n
            if n < batch:
                break
    return {"entries_pruned": trimmed, "entries_removed": sum(removed.values()),
            "by_state": dict(sorted(removed.items())), "dry_run": dry_run}


__all__ = [
    "LEDGER_FINAL_STATES", "EntryError", "OnceResult", "Sink", "approve", "awaiting", "begin",
    "deny", "entry_object", "fingerprint", "list_entries", "needs_terminal", "once", "prune",
    "resolve", "shown_state", "show", "validate_key",
]
