"""Processes relay starts and watches, for `relay once` (design.md §10) and `relay run`
(design.md §6).

- Identity: a process is (pid, start time, host); the start time (``<boot id>:<ticks>``
  from /proc/<pid>/stat field 22) makes sure a reused pid is not mistaken for the
  original process (:func:`process_alive`, :class:`Me`). A pid means something only in
  its PID namespace (:func:`pid_namespace`), so the ledger also records that namespace
  and looks up only its own (design.md §10).
- Exit status: the shell's convention, CMD's own exit code or 128+N when signal N killed
  it (:func:`exit_status`); 127 when CMD is not found, 126 when it cannot be executed
  (:class:`CannotStart`).
- Signals: SIGINT, SIGTERM and SIGHUP are held while relay waits or CMD runs, so none is
  lost or acted on half-way, and forwarded to CMD (:class:`Signals`).
- Spawning. `relay once` forks CMD's process held at a gate until its pid is committed
  (:func:`spawn_gated`, :class:`Child`), set on Linux to die with relay
  (``PR_SET_PDEATHSIG``: a kill of relay kills CMD too), and learns only from the ``exec`` itself whether
  CMD can start: the ledger gate runs first (a replay never looks at PATH), and nothing
  but the exec tells the truth about a file that changes meanwhile. `relay run` has no
  pid to commit, so it starts CMD at once (:func:`spawn`); it looks CMD up beforehand
  (:func:`resolve_command`), so a command that cannot start never joins a session.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Union

from .errors import (  # as a shell exits (the error table)
    NOT_EXECUTABLE_EXIT,
    NOT_FOUND_EXIT,
    RelayError,
)
from .record import record

if TYPE_CHECKING:
    import subprocess
    from types import FrameType

    # what signal.signal() takes and returns for a signal
    Handler = Union[Callable[[int, Union[FrameType, None]], Any], int, signal.Handlers, None]

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Python ignores these at start-up; a command must get the default back (as subprocess does).
_RESET_IN_CHILD = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGPIPE", "SIGXFSZ", "SIGXFZ")) if s
)


def command_argv(words: Iterable[str] | None, usage: str) -> list[str]:
    """The command a wrapper runs (the words after ``--`` of `relay once` and `relay run`),
    or usage_error naming the command line it takes (``usage``)."""
    argv = list(words or [])
    if not argv:
        raise RelayError("usage_error", f"no command given: {usage}")
    return argv


# --------------------------------------------------------------------------- identity
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
    fields = data[data.rindex(b")") + 2 :].split()  # fields from 3 (state) on
    return fields[0].decode(), f"{_boot_id()}:{int(fields[19])}"  # field 22: starttime


_PROC_OURS: bool | None = None


def _have_proc() -> bool:
    """Is there a /proc that shows this process's own PID namespace? One mounted for
    another (``unshare -p`` without a new /proc) names other processes by these pids."""
    global _PROC_OURS
    if _PROC_OURS is None:
        try:
            _PROC_OURS = os.readlink("/proc/self") == str(os.getpid())
        except OSError:
            _PROC_OURS = False
    return _PROC_OURS


def process_start(pid: int) -> str | None:
    if not _have_proc():
        return None
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def this_host() -> str:
    import socket  # only where a host is named: not on every call's start

    return socket.gethostname()


_PID_NAMESPACE: str | None = None


def pid_namespace() -> str:
    """Where this process's pids mean something: ``<boot id>:<inode>`` of its PID
    namespace (/proc/self/ns/pid) in this boot. A pid is looked up only by a process with
    the same value; any other (a container or sandbox sharing the host name, ``unshare
    -p``, an earlier boot) counts as another host (design.md §10). Where relay cannot read
    it on Linux the value is this process's own, so no other process takes its pids for
    its own; elsewhere (no PID namespaces) it is ``-``."""
    global _PID_NAMESPACE
    if _PID_NAMESPACE is None:
        import sys

        try:
            _PID_NAMESPACE = f"{_boot_id()}:{os.stat('/proc/self/ns/pid').st_ino}"
        except OSError:
            if sys.platform.startswith("linux"):
                import uuid

                _PID_NAMESPACE = f"unknown:{uuid.uuid4()}"
            else:
                _PID_NAMESPACE = "-"
    return _PID_NAMESPACE


def process_alive(pid: int | None, start: str | None, host: str | None) -> bool:
    """Is the process that was recorded as (pid, start, host) still running?

    On another host relay cannot look, so the process counts as alive (nothing is rerun).
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


@record(frozen=True)
class Me:
    """This relay process, as another process can find out whether it is still alive;
    ``ns`` is its :func:`pid_namespace` (its pid means nothing outside it)."""

    pid: int
    start: str | None
    host: str
    ns: str | None = None

    @classmethod
    def current(cls) -> Me:
        pid = os.getpid()
        return cls(pid, process_start(pid), this_host(), pid_namespace())


# --------------------------------------------------------------------------- exit status
def signal_status(signum: int) -> int:
    """The shell's exit status for signal N: 128+N (never 0)."""
    return 128 + signum


def exit_status(returncode: int) -> tuple[int, int | None]:
    """(exit status, signal) of an ended process, from its ``returncode`` as
    ``os.waitstatus_to_exitcode`` gives it (-N when signal N killed it): the status is
    the process's exit code, or 128+N when signal N killed it."""
    if returncode < 0:
        return signal_status(-returncode), -returncode
    return returncode, None


class CannotStart(Exception):
    """CMD did not start: ``status`` is 127 (not found), 126 (not executable), or 128+N
    when relay was told to stop by signal N before CMD started."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_of_exec_error(err: int | None) -> int:
    """The shell's status for an ``exec`` that failed with ``errno`` ``err``: 127 when
    there is no such file, 126 for every other reason."""
    return NOT_FOUND_EXIT if err in (errno.ENOENT, errno.ENOTDIR) else NOT_EXECUTABLE_EXIT


def resolve_command(argv0: str, path_env: str | None) -> str:
    """Find the program as ``execvp`` would, or raise CannotStart (127 / 126)."""
    if not argv0:
        raise CannotStart(NOT_FOUND_EXIT, "the command name is empty")
    if "/" in argv0:
        return _check_file(argv0)
    denied = None
    for d in (path_env if path_env is not None else os.defpath).split(os.pathsep):
        candidate = os.path.join(d or ".", argv0)
        if not os.path.exists(candidate):
            continue
        try:
            return _check_file(candidate)
        except CannotStart as e:
            denied = denied or e
    if denied is not None:
        raise denied
    raise CannotStart(NOT_FOUND_EXIT, f"{argv0}: command not found on PATH")


def _check_file(path: str) -> str:
    if not os.path.exists(path):
        raise CannotStart(NOT_FOUND_EXIT, f"{path}: no such file")
    if os.path.isdir(path):
        raise CannotStart(NOT_EXECUTABLE_EXIT, f"{path}: is a directory")
    if not os.access(path, os.X_OK):
        raise CannotStart(NOT_EXECUTABLE_EXIT, f"{path}: permission denied (not executable)")
    return path


# --------------------------------------------------------------------------- signals
class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def sent_by_kernel(si_code: int) -> bool:
    """Did the kernel send the signal (Ctrl-C or a hang-up from the terminal driver:
    ``SI_KERNEL``)? Senders in user space (``kill``, ``sigqueue``, ``tgkill``) always
    give a ``si_code`` of 0 or below."""
    return si_code > 0


def same_group(pid: int) -> bool:
    """Is ``pid`` in relay's own process group (where the terminal's signals go)?"""
    try:
        return os.getpgid(pid) == os.getpgrp()
    except OSError:
        return False


class Signals:
    """Holds SIGINT/SIGTERM/SIGHUP while relay waits or CMD runs, so none is lost or acted
    on half-way, and forwards them to CMD.

    On Linux the signals are blocked and collected with ``sigtimedwait``, which tells who
    sent them: a signal the terminal driver sent (Ctrl-C, hangup) already reached CMD,
    which shares relay's foreground process group, so it is not sent a second time (a
    second Ctrl-C means "force quit" to some programs). Signals sent to relay with
    ``kill`` are forwarded. Elsewhere (or off the main thread) Python handlers collect
    them and every one is forwarded. A signal relay's caller set to be ignored (e.g.
    ``nohup``) stays ignored: it is neither acted on nor forwarded, and CMD starts with it
    ignored too.

    ``children``: SIGCHLD is blocked as well, so :meth:`wait` returns the moment a child
    ends (`relay run` sleeps in it; `relay once` polls its output pipes instead).
    """

    def __init__(self, children: bool = False) -> None:
        self.mode = "none"
        self.pending: list[tuple[int, bool]] = []
        self.saved: dict[int, Handler] = {}
        self.old_mask: set[int | signal.Signals] | None = None
        self.ignored: set[int] = set()
        self.watched = FORWARDED_SIGNALS + ((signal.SIGCHLD,) if children else ())

    def __enter__(self) -> Signals:
        import threading

        # what relay's caller set to be ignored (e.g. `nohup`) stays ignored, for CMD too
        self.ignored = {sig for sig in FORWARDED_SIGNALS if signal.getsignal(sig) == signal.SIG_IGN}

        main = threading.current_thread() is threading.main_thread()
        if main and hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
            self.old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, self.watched)
            self.mode = "mask"
        elif main:
            for sig in FORWARDED_SIGNALS:
                self.saved[sig] = signal.signal(sig, self._handle)
            self.mode = "handler"
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pending.append((signum, False))

    def _collect(self, info: signal.struct_siginfo | None) -> bool:
        if info is None:
            return False
        if info.si_signo != signal.SIGCHLD:  # SIGCHLD only wakes a waiter up
            self.pending.append((info.si_signo, sent_by_kernel(info.si_code)))
        return True

    def take(self) -> list[tuple[int, bool]]:
        """Signals that arrived since the last call: (signal number, sent by the kernel)."""
        if self.mode == "mask":
            while self._collect(signal.sigtimedwait(self.watched, 0)):
                pass
        got, self.pending = self.pending, []
        return [(signum, kern) for signum, kern in got if signum not in self.ignored]

    def wait(self, timeout: float) -> None:
        """Sleep until a signal arrives (SIGCHLD too, with ``children``) or ``timeout``
        seconds passed; it is collected for :meth:`take`."""
        if self.mode == "mask":
            self._collect(signal.sigtimedwait(self.watched, timeout))
        else:
            import time

            time.sleep(min(timeout, 0.05))

    def check(self) -> None:
        """While nothing runs yet: a signal ends the call (nothing is started)."""
        got = self.take()
        if got:
            raise Interrupted(got[0][0])

    def forward(self, pid: int, send: Callable[[int], object] | None = None) -> None:
        """Send CMD (process ``pid``) what arrived, except what the terminal sent it too.
        ``send(signum)`` delivers one (default: ``os.kill(pid, signum)``)."""
        for signum, from_kernel in self.take():
            if from_kernel and same_group(pid):
                continue  # the terminal sent it to CMD too
            with contextlib.suppress(OSError):
                if send is None:
                    os.kill(pid, signum)
                else:
                    send(signum)

    def child_defaults(self) -> tuple[int, ...]:
        """Signals CMD starts with at their default action: the forwarded ones relay's
        caller did not ignore, and those Python ignores at start-up."""
        return (*(s for s in FORWARDED_SIGNALS if s not in self.ignored), *_RESET_IN_CHILD)

    def child_mask(self) -> Iterable[int]:
        """The signal mask CMD starts with: the one relay was started with."""
        if self.old_mask is not None:
            return self.old_mask
        return signal.pthread_sigmask(signal.SIG_BLOCK, ())

    def child_setup(self) -> None:
        """Runs in the child between fork and exec: CMD starts with relay's own mask."""
        if self.mode == "mask":
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask or ())

    def __exit__(self, *exc: object) -> None:
        if self.mode == "mask":
            self.take()  # CMD has ended or never started: what came late is dropped
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old_mask or ())
        for sig, old in self.saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old)


# --------------------------------------------------------------------------- spawning
def spawn(path: str, argv: list[str], env: dict[str, str], signals: Signals) -> int:
    """Start CMD now (`relay run`): ``path`` as found by :func:`resolve_command`, with
    relay's stdin, stdout and stderr. Returns its pid; raises CannotStart."""
    try:
        return os.posix_spawn(
            path, argv, env, setsigmask=signals.child_mask(), setsigdef=signals.child_defaults()
        )
    except OSError as e:
        raise CannotStart(status_of_exec_error(e.errno), f"{argv[0]}: {e.strerror}") from e


_GATE_OPEN = b"\x01"
_GATE_CLOSED_EXIT = 125  # the gated process ends this way when relay never opened the gate


class Child:
    """The command's process: forked, held at a gate until relay has committed its pid.

    :func:`spawn_gated` forks a process that waits, reading a pipe only relay holds the
    other end of; it has not begun executing the command. ``release`` opens the gate: the
    process execs the command, and an exec failure comes back over a close-on-exec pipe
    (as subprocess does it), so "not found" (127) and "not executable" (126) are still
    known before anything ran. ``abandon`` (or relay's death, which closes the gate's
    write end) makes the process end without ever executing the command.
    """

    def __init__(
        self, pid: int, out_fd: int, err_fd: int, gate_fd: int, report_fd: int, argv0: str
    ) -> None:
        self.pid = pid
        self.stdout = os.fdopen(out_fd, "rb", buffering=0)
        self.stderr = os.fdopen(err_fd, "rb", buffering=0)
        self._gate: int | None = gate_fd
        self._report: int | None = report_fd
        self._argv0 = argv0
        self.returncode: int | None = None

    def release(self) -> None:
        """Let the command begin executing; raise CannotStart when it cannot be executed."""
        gate, report_fd = self._gate, self._report
        assert gate is not None and report_fd is not None  # (released once, not abandoned)
        try:
            os.write(gate, _GATE_OPEN)
        except OSError:
            pass  # the process is gone already; waiting for it tells how it ended
        finally:
            os.close(gate)
            self._gate = None
        chunks = []
        try:
            while True:
                chunk = os.read(report_fd, 64)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(report_fd)
            self._report = None
        report = b"".join(chunks)
        if report:
            self.wait()
            self._close_pipes()
            try:
                err = int(report.split(b":", 1)[0])
            except ValueError:
                err = 0
            raise _exec_failed(
                self._argv0, err, report.split(b":", 1)[-1].decode("utf-8", "replace")
            )

    def abandon(self) -> None:
        """The command must never start: close the gate, kill and reap the process."""
        for name in ("_gate", "_report"):
            fd = getattr(self, name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, None)
        self.kill()
        self.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for f in (self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                f.close()

    def _set(self, status: int) -> int:
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 255
                return self.returncode
            if pid == self.pid:
                self._set(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 255
                break
            except InterruptedError:
                continue
            self._set(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.send_signal(signal.SIGKILL)


def _exec_failed(argv0: str, err: int, text: str) -> CannotStart:
    status = status_of_exec_error(err)
    if status == NOT_FOUND_EXIT:
        return CannotStart(status, f"command not found: {argv0}")
    if err in (errno.EACCES, errno.EPERM):
        return CannotStart(status, f"not executable: {argv0}")
    return CannotStart(
        status, f"cannot execute {argv0}: {os.strerror(err) if err else text or 'unknown error'}"
    )


def _pipe() -> tuple[int, int]:
    """A close-on-exec pipe whose ends are above 2 (relay's own 0-2 may be closed)."""
    import fcntl

    ends = []
    for fd in os.pipe():
        if fd < 3:
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(fd)
            fd = high
        ends.append(fd)
    return ends[0], ends[1]


def spawn_gated(argv: list[str], signals: Signals | None = None) -> Child:
    """Fork the command's process, held at its gate (see :class:`Child`).

    CMD's stdout and stderr are pipes to relay; its stdin is relay's; every other
    descriptor is closed (as subprocess's close_fds does).
    """
    die_with_relay = death_signal_setter(signal.SIGKILL)
    parent = os.getpid()
    out_r, out_w = _pipe()
    err_r, err_w = _pipe()
    gate_r, gate_w = _pipe()
    report_r, report_w = _pipe()  # close-on-exec: EOF means the exec happened
    try:
        pid = os.fork()
    except OSError as e:
        for fd in (out_r, out_w, err_r, err_w, gate_r, gate_w, report_r, report_w):
            os.close(fd)
        raise CannotStart(NOT_EXECUTABLE_EXIT, f"cannot start {argv[0]}: {e.strerror}") from e
    if pid == 0:  # the child: nothing here may return
        try:
            if die_with_relay is not None:
                die_with_relay(parent)
            _gated_exec(
                argv, out_w, err_w, gate_r, report_w, (out_r, err_r, gate_w, report_r), signals
            )
        finally:
            os._exit(NOT_EXECUTABLE_EXIT)
    for fd in (out_w, err_w, gate_r, report_w):
        os.close(fd)
    return Child(pid, out_r, err_r, gate_w, report_r, argv[0])


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def death_signal_setter(sig: int) -> Callable[[int], None] | None:
    """On Linux, a function that, run in the forked child, makes the kernel send it ``sig``
    the moment relay dies (``PR_SET_PDEATHSIG``, kept across ``exec``), so a kill of relay
    never leaves the command running behind an entry nobody renews (design.md §10, §13).
    None elsewhere, or when relay is not forking from its main thread: the signal follows
    the death of the forking *thread*, and only the main thread lives as long as relay."""
    import sys
    import threading

    if (
        not sys.platform.startswith("linux")
        or threading.current_thread() is not threading.main_thread()
    ):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def set_in_child(parent: int) -> None:
        if prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return  # (the gate still holds: relay's death closes it)
        if os.getppid() != parent:  # relay died before the death signal was set
            os._exit(_GATE_CLOSED_EXIT)

    return set_in_child


def _gated_exec(
    argv: list[str],
    out_w: int,
    err_w: int,
    gate_r: int,
    report_w: int,
    parents: Iterable[int],
    signals: Signals | None,
) -> None:
    """In the forked child: wait at the gate, then exec CMD (or report why not)."""
    try:
        for fd in parents:
            os.close(fd)  # above all the gate's write end: relay's death must close it
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        keep = sorted({gate_r, report_w})
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        defaults = (
            signals.child_defaults()
            if signals is not None
            else (*FORWARDED_SIGNALS, *_RESET_IN_CHILD)
        )
        for sig in defaults:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, signal.SIG_DFL)
        while True:
            try:
                opened = os.read(gate_r, 1)
                break
            except InterruptedError:
                continue
        if opened != _GATE_OPEN:
            os._exit(_GATE_CLOSED_EXIT)  # relay died or gave up before recording the pid
        os.close(gate_r)
        if signals is not None:
            signals.child_setup()  # CMD starts with relay's own mask
        os.execvp(argv[0], argv)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.write(report_w, f"{e.errno or 0}:{e.strerror or e}".encode())
    except BaseException as e:  # noqa: BLE001 - nothing may escape a forked child
        with contextlib.suppress(OSError):
            os.write(report_w, f"0:{type(e).__name__}".encode())


# --------------------------------------------------------------------------- process groups
def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that still run (a zombie has ended: it
    waits only to be reaped), as /proc shows them; without a /proc of this PID namespace,
    ``[pgid]`` while the kernel knows the group at all."""
    if not _have_proc():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except OSError:
            pass
        return [pgid]
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()  # from field 3 (state) on
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X", b"x"):
            out.append(int(name))
    return out


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


def stop_group(pgid: int, grace: float, sig: int = signal.SIGTERM) -> bool:
    """End process group ``pgid`` while any member of it runs, whether or not its leader
    still does: ``sig``, then SIGKILL after ``grace`` seconds, then wait (at most
    ``grace`` more) until no member runs. True when none does.

    The caller must know the group is still the one it started: a process group id is
    not given to a new process while any process is in that group, or while its leader
    is an unreaped child of the caller (a zombie holds its pid), so a caller that reaps
    its leader only after this returns is sure of it."""
    import time

    for s, end in ((sig, grace), (signal.SIGKILL, grace)):
        if not group_members(pgid):
            return True
        kill_group(pgid, s)
        deadline = time.monotonic() + end
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return not group_members(pgid)


def environ_holds(pid: int, entry: str) -> bool:
    """Does process ``pid``'s environment (as it was started) hold ``NAME=VALUE``?"""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return entry.encode() in data.split(b"\0")


def run_bounded(
    argv: list[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    capture: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run`` with a timeout that ends everything the command started, not
    only the command: it runs in a session (and so a process group) of its own, with no
    standard input, and when ``timeout`` passes — or relay is interrupted while it runs
    — its whole group gets SIGKILL (a grandchild holding its output open would otherwise
    outlive relay). Raises ``subprocess.TimeoutExpired`` then, OSError when it cannot
    start. ``capture``: stdout and stderr are kept (else stdout is discarded, stderr
    kept)."""
    import subprocess

    p = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        start_new_session=True,
        close_fds=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        kill_group(p.pid, signal.SIGKILL)  # the leader is unreaped: its group is still ours
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out or b"", err or b"")


def spawn_detached(argv: list[str], env: dict[str, str], cwd: str | None = None) -> bool:
    """Start ``argv`` so that nobody waits for it (design.md §19: an alert): a grandchild
    in a session of its own, reparented at once (the middle process exits), its standard
    streams /dev/null, every other descriptor closed, the default signal dispositions
    back. The caller waits only for the middle process, which exits at once. Returns
    whether the middle process was started; what the command does (or whether it could
    be found) is not known here."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:  # the middle process: nothing here may return
        code = 0
        try:
            os.setsid()
            if os.fork() == 0:  # the command's process
                code = NOT_FOUND_EXIT
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, _max_fd())
                for sig in (*_RESET_IN_CHILD, *FORWARDED_SIGNALS):
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                if cwd is not None:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
        except BaseException:  # noqa: BLE001 - nothing may escape a forked child
            code = NOT_FOUND_EXIT
        finally:
            os._exit(code)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return True


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (OSError, ValueError):
        return 1024
