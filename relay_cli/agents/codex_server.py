"""A private Codex app server for one `relay run` peer (design.md §12).

Codex's TUI (the release in ``runtimes.CODEX_CHECKED``) started with ``--no-daemon`` (so that no shared daemon runs its thread
with another peer's environment) starts a turn queued by ``codex queue`` only on a fixed
10 s tick. A TUI connected to an app server over ``--remote`` starts it at once, so
`relay run` gives each interactive Codex its own server:

- ``codex app-server --listen unix://SOCK``, started with the peer's environment (its
  ``RELAY_PEER`` and ``RELAY_SESSION``), the socket in a directory of its own (mode 0700,
  under ``$XDG_RUNTIME_DIR`` or the temporary directory, both from the call's
  environment), in a process group of its own,
  set on Linux to get SIGTERM should relay die;
- relay waits until the socket accepts a connection (at most ``START_TIMEOUT_S``), then
  starts the TUI as ``codex --remote unix://SOCK …``; the session's environment names the
  address in ``RELAY_CODEX_REMOTE``, so the waiter runs ``codex queue --remote …``;
- when the TUI ends, the server's process group gets SIGTERM (SIGKILL after
  ``STOP_GRACE_S``) while any member of it runs, whether or not the server itself still
  does, and the directory is removed. relay reaps the server only after that: its
  unreaped leader keeps the group's id from being given to anyone else meanwhile;
- should relay be killed (SIGKILL), a watchdog it started for this (``_watch``, a process
  of its own in a session of its own) sees its pipe from relay close and does the same:
  nothing the run started outlives it, not the server, not what the server started in
  its group, not the directory. A watchdog that dies (killed) while relay runs is
  replaced at once (:meth:`AppServer.check`, between `relay run`'s waits, which a child's
  end cuts short). The directory records its owner (``owner``: relay's pid, start time
  and PID namespace, the server's and the watchdog's); a directory whose owner is gone
  (relay and its watchdog were killed together) is removed by the next `relay run` of
  Codex (:func:`remove_stale`: only relay's own ``relay-codex-*`` directories, owned by
  this user, never through a symlink), which also kills the server's group when a member
  of it still runs with the run's address in its environment, and `relay doctor` names
  it (:func:`stale_dirs`).

Only the interactive TUI (``codex [OPTIONS] [PROMPT]``) gets a server; a subcommand
(``codex exec`` and the rest), or a ``--no-daemon`` the person gave, keeps ``--no-daemon``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from typing import IO, TYPE_CHECKING, NamedTuple

from ..core.limits import CODEX_START_TIMEOUT_S as START_TIMEOUT_S
from ..core.limits import CODEX_STOP_GRACE_S as STOP_GRACE_S

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ..core.output import JsonObject

REMOTE_ENV = "RELAY_CODEX_REMOTE"  # the address the waiter's `codex queue --remote` uses
SOCKET_NAME = "app-server.sock"
OWNER_NAME = "owner"  # who made the directory: relay's process and the server's
DIR_PREFIX = "relay-codex-"
_DIR_RE = re.compile(re.escape(DIR_PREFIX) + r"[A-Za-z0-9_]{8}")  # as mkdtemp names them
_STOPPED = b"stopped"  # relay to its watchdog: I cleaned up myself
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes

# Codex's top-level options (runtimes.CODEX_CHECKED) (`codex --help`) that take a value, and its
# subcommands with their aliases.
_VALUE_OPTIONS = frozenset(
    {
        "-c",
        "--config",
        "--enable",
        "--disable",
        "--remote",
        "--remote-auth-token-env",
        "-m",
        "--model",
        "--local-provider",
        "-p",
        "--profile",
        "-s",
        "--sandbox",
        "-C",
        "--cd",
        "--add-dir",
        "-a",
        "--ask-for-approval",
    }
)
_MULTI_VALUE_OPTIONS = frozenset({"-i", "--image"})
_NO_SESSION_FLAGS = frozenset({"-h", "--help", "-V", "--version"})
SUBCOMMANDS = frozenset(
    {
        "agents",
        "exec",
        "e",
        "review",
        "login",
        "logout",
        "mcp",
        "plugin",
        "app-server",
        "remote-control",
        "completion",
        "update",
        "doctor",
        "sandbox",
        "debug",
        "apply",
        "a",
        "resume",
        "queue",
        "archive",
        "delete",
        "migrate-rollouts",
        "migrate-nfs-db",
        "unarchive",
        "fork",
        "cloud",
        "exec-server",
        "features",
        "help",
        "mcp-server",
    }
)
# Options of the TUI that shape the configuration the server loads: given to it too.
_SERVER_VALUE_OPTIONS = frozenset({"-c", "--config", "--enable", "--disable"})
_SERVER_FLAGS = frozenset({"--strict-config"})


def is_tui(args: list[str]) -> bool:
    """Does ``codex ARGS`` start the interactive TUI (no subcommand, no --help/--version)?"""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return True  # the rest is the prompt
        name = a.split("=", 1)[0]
        if a in _NO_SESSION_FLAGS:
            return False
        if a.startswith("--"):
            if name in _VALUE_OPTIONS and "=" not in a:
                i += 1
            elif name in _MULTI_VALUE_OPTIONS and "=" not in a:
                while i + 1 < len(args) and not args[i + 1].startswith("-"):
                    i += 1
        elif a.startswith("-") and len(a) > 1:
            if a[:2] in _VALUE_OPTIONS and len(a) == 2:
                i += 1
            elif a[:2] in _MULTI_VALUE_OPTIONS and len(a) == 2:
                while i + 1 < len(args) and not args[i + 1].startswith("-"):
                    i += 1
        else:
            return a not in SUBCOMMANDS  # a prompt, or a subcommand
        i += 1
    return True


def server_options(args: list[str]) -> list[str]:
    """The TUI's configuration options (``-c``, ``--enable``, ``--disable``,
    ``--strict-config``) that the app server is given as well."""
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        name = a.split("=", 1)[0]
        if a in _SERVER_FLAGS:
            out.append(a)
        elif name in _SERVER_VALUE_OPTIONS:
            if "=" in a:
                out.append(a)
            elif i + 1 < len(args):
                out += [a, args[i + 1]]
                i += 1
        elif a.startswith("-c") and len(a) > 2 and not a.startswith("--"):
            out.append(a)  # -ckey=value
        i += 1
    return out


CODEX_EXE = "codex"  # the name of Codex's native executable
_ANCESTORS = 4  # how far up the waiter looks for it (Codex -> a shell -> relay's waiter)


def is_npm_script(program: str) -> bool:
    """Is ``program`` (`codex` as PATH finds it) the npm package's Node script, which starts
    the native executable (``.../@openai/codex/bin/codex.js``, as npm links it)?"""
    real = os.path.realpath(program)
    bin_dir = os.path.dirname(real)
    package = os.path.dirname(bin_dir)
    return (
        os.path.basename(real) == "codex.js"
        and os.path.basename(bin_dir) == "bin"
        and os.path.basename(package) == "codex"
        and os.path.basename(os.path.dirname(package)) == "@openai"
    )


def running_codex(start: int | None = None, proc: str = "/proc") -> str | None:
    """The native Codex executable that runs this process's session: the nearest ancestor
    (from ``start``, by default this process's parent; at most ``_ANCESTORS`` up) whose
    executable, as ``proc`` shows it, is named ``codex``; None where that cannot be seen
    (no /proc of this PID namespace, another system) or no ancestor near runs one.

    A script named codex shows its interpreter as its executable, so only a native one is
    found; one whose file was replaced since it started reads "... (deleted)"."""
    from ..core.process import _have_proc

    if proc == "/proc" and not _have_proc():
        return None
    pid = os.getppid() if start is None else start
    for _ in range(_ANCESTORS):
        if pid <= 1:
            return None
        try:
            exe = os.readlink(f"{proc}/{pid}/exe")
        except OSError:
            exe = ""
        if os.path.basename(exe) == CODEX_EXE and os.path.isabs(exe) and os.access(exe, os.X_OK):
            return exe
        try:
            with open(f"{proc}/{pid}/stat", "rb") as f:
                data = f.read()
            pid = int(data[data.rindex(b")") + 2 :].split()[1])  # field 4: the parent
        except (OSError, ValueError, IndexError):
            return None
    return None


def queue_program(program: str, start: int | None = None, proc: str = "/proc") -> str:
    """What the waiter runs `codex queue` with (design.md §12): when `codex` on PATH
    (``program``) is the npm package's Node script, the native executable that runs this
    session, found among this process's ancestors (``running_codex``); else ``program``.

    The Node script only starts the native executable, after Node's own start-up: 0.15 s
    of CPU, 0.17-0.26 s of a wake at load average 2.7 (measured 2026-12-07). The
    executable that runs the session is also the version its app server speaks."""
    if not is_npm_script(program):
        return program
    return running_codex(start, proc) or program


def _bases(environ: Mapping[str, str]) -> list[str]:
    """Where a private directory may be made, in order of preference, read from the
    call's ``environ``: $XDG_RUNTIME_DIR, the temporary directory ($TMPDIR, else $TEMP,
    else $TMP, as Python's tempfile reads them), /tmp. A relative value is ignored."""
    temporary = environ.get("TMPDIR") or environ.get("TEMP") or environ.get("TMP")
    out = []
    for base in (environ.get("XDG_RUNTIME_DIR"), temporary, "/tmp"):
        if base and os.path.isabs(base) and base not in out:
            out.append(base)
    return out


def _socket_dir(environ: Mapping[str, str]) -> str:
    """A new directory (0700, relay's own) for the socket, short enough for sun_path."""
    for base in _bases(environ):
        if not os.path.isdir(base) or not os.access(base, os.W_OK | os.X_OK):
            continue
        if len(base) + len("/relay-codex-XXXXXXXX/") + len(SOCKET_NAME) > _MAX_SOCKET_PATH:
            continue
        return tempfile.mkdtemp(prefix=DIR_PREFIX, dir=base)
    raise OSError(
        "no writable directory short enough for a unix socket ($XDG_RUNTIME_DIR, $TMPDIR, /tmp)"
    )


class CannotListen(Exception):
    """The app server did not start or did not listen in time."""


class Watchdog(NamedTuple):
    proc: subprocess.Popen[bytes]
    fd: int  # relay's end of the pipe it watches


class AppServer:
    """One peer's ``codex app-server`` on a unix socket in a private directory."""

    def __init__(
        self, program: str, options: list[str], environ: Mapping[str, str] | None = None
    ) -> None:
        self.program = program  # the codex found on PATH
        self.options = options
        self.environ = environ or {}  # the call's: where the directory goes (``_bases``)
        self.dir: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.server_env: dict[str, str] = {}  # the environment the server was started with
        self.log: IO[bytes] | None = None  # the server's output, while it runs
        self._watchdog: Watchdog | None = None

    @property
    def private_dir(self) -> str:
        """The private directory ``prepare`` made (it is made before anything is in it)."""
        assert self.dir is not None
        return self.dir

    @property
    def socket_path(self) -> str:
        return os.path.join(self.private_dir, SOCKET_NAME)

    @property
    def address(self) -> str:
        return "unix://" + self.socket_path

    def prepare(self) -> str:
        """Remove what killed runs left (:func:`remove_stale`), create the private
        directory with its ``owner``; the address the server will listen on."""
        remove_stale(self.environ)
        self.dir = _socket_dir(self.environ)
        self._write_owner()
        return self.address

    def _write_owner(self) -> None:
        from ..core.process import Me

        me = Me.current()
        doc = {"relay": [me.pid, me.start, me.ns]}
        from ..core.process import process_start

        if self.proc is not None:
            doc["server"] = [self.proc.pid, process_start(self.proc.pid)]
        if self._watchdog is not None:
            pid = self._watchdog.proc.pid
            doc["watchdog"] = [pid, process_start(pid)]
        path = os.path.join(self.private_dir, OWNER_NAME)
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(path + ".tmp", path)

    def start(
        self,
        env: dict[str, str],
        child_mask: Iterable[int],
        interrupted: Callable[[], list[tuple[int, bool]]],
        timeout: float = START_TIMEOUT_S,
    ) -> list[tuple[int, bool]] | None:
        """Start the server with ``env`` and wait until its socket accepts a connection.
        Returns the signals ``interrupted()`` reported (the caller stops), None when it
        listens; raises CannotListen."""
        assert self.dir is not None
        argv = [self.program, "app-server", *self.options, "--listen", self.address]
        self.log = open(os.path.join(self.dir, "app-server.log"), "wb")  # noqa: SIM115
        from ..core.process import death_signal_setter

        death = death_signal_setter(signal.SIGTERM)  # the server stops when relay dies
        parent = os.getpid()

        def setup() -> None:  # in the child, before exec
            os.setpgid(0, 0)  # its own group: relay stops it and what it started
            signal.pthread_sigmask(signal.SIG_SETMASK, child_mask)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            if death is not None:
                death(parent)

        self.server_env = env
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                preexec_fn=setup,
                close_fds=True,
            )
        except OSError as e:
            raise CannotListen(f"{self.program} app-server could not start: {e.strerror}") from e
        self._watchdog = _start_watchdog(self.proc.pid, self.dir, STOP_GRACE_S, env)
        self._write_owner()
        end = time.monotonic() + timeout
        while True:
            got = interrupted()
            if got:
                return got
            self.check()
            status = _ended(self.proc.pid)
            if status is not None:
                raise CannotListen(
                    f"{self.program} app-server exited with status "
                    f"{status} before it listened"
                    f"{self._log_tail()}"
                )
            if self._accepts():
                return None
            if time.monotonic() >= end:
                raise CannotListen(
                    f"{self.program} app-server did not listen on "
                    f"{self.address} within {timeout:g} s{self._log_tail()}"
                )
            time.sleep(0.05)

    def _accepts(self) -> bool:
        return _accepts(self.socket_path)

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.private_dir, "app-server.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 400))
                tail = f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its output ends: {tail}" if tail else ""

    def check(self) -> None:
        """While the server runs (between `relay run`'s waits): a watchdog that died (it
        was killed) is replaced at once, so a later kill of relay still stops the group."""
        watchdog = self._watchdog
        if watchdog is None or self.proc is None or self.dir is None:
            return
        if watchdog.proc.poll() is None:
            return
        with contextlib.suppress(OSError):
            os.close(watchdog.fd)
        self._watchdog = _start_watchdog(self.proc.pid, self.dir, STOP_GRACE_S, self.server_env)
        self._write_owner()

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM to the server's process group while any member of it runs (its leader
        may have ended by itself), SIGKILL after ``grace``; then reap the server and
        remove the directory. Safe to call more than once."""
        from ..core.process import stop_group

        proc, self.proc = self.proc, None
        if proc is not None:
            stop_group(proc.pid, grace)  # the unreaped leader keeps the group id ours
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
        if self.log is not None:
            with contextlib.suppress(OSError):
                self.log.close()
            self.log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            with contextlib.suppress(OSError):
                os.write(watchdog.fd, _STOPPED)
            with contextlib.suppress(OSError):
                os.close(watchdog.fd)
            with contextlib.suppress(subprocess.TimeoutExpired):
                watchdog.proc.wait(grace)


def _ended(pid: int) -> int | None:
    """The exit status of child ``pid`` once it has ended (128+N for signal N), None
    while it runs; the child is not reaped (``WNOWAIT``), so its pid, and its process
    group's id, stay relay's."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return 255
    if info is None or info.si_pid == 0:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return 128 + info.si_status


def _accepts(path: str) -> bool:
    """Does a server accept connections on the unix socket ``path``?"""
    if not os.path.exists(path):
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(1.0)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _start_watchdog(
    server_pid: int, directory: str, grace: float, env: Mapping[str, str]
) -> Watchdog:
    """Start the watchdog of a server (see :func:`_watch`): a new Python process (not a
    fork: relay's heartbeat thread may run by then) in a session of its own, given only
    the read end of a pipe whose write end relay keeps, and the server's environment
    (whoever ends the run's processes by their environment finds it too; Python's own
    variables are ignored, ``-E``)."""
    r, w = os.pipe()
    os.set_inheritable(w, False)
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from relay_cli.agents.codex_server import _watch; "
        "_watch(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))"
    )
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-S",
                "-c",
                code,
                package,
                str(r),
                str(server_pid),
                directory,
                str(grace),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(r,),
            start_new_session=True,
            env=dict(env),
        )
    except BaseException:
        os.close(w)
        raise
    finally:
        os.close(r)
    return Watchdog(proc, w)


def _watch(fd: int, server_pid: int, directory: str, grace: float) -> None:
    """In the watchdog: wait until relay's end of ``fd`` closes. When relay said it
    stopped the server itself, do nothing; else relay died (SIGKILL leaves it no word):
    SIGTERM to the server's process group while a member of it runs, SIGKILL after
    ``grace``, remove the directory.

    The watchdog leads a session of its own (a terminal's signals do not reach it),
    holds none of relay's descriptors (a reader of relay's output sees it end), and
    relies on no parent-death signal, which the kernel clears when the server is a
    setuid, setgid or file-capability program."""
    from ..core.process import stop_group

    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    said = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        said += chunk
    if said == _STOPPED:
        return
    stop_group(server_pid, grace)
    _remove_dir(directory)


def _kill_stale_group(pid: int, start: str, mark: str) -> None:
    """SIGKILL to a killed run's server group, when it is still that run's: its leader is
    the server as recorded (pid and start time: a bare pid may be reused), or, the server
    gone, a member of the group runs with the run's own address in its environment
    (``mark``: a random directory name no other group carries)."""
    from ..core.process import environ_holds, group_members, kill_group, process_alive

    if process_alive(pid, start, None):
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                kill_group(pid, signal.SIGKILL)
        return
    if any(environ_holds(member, mark) for member in group_members(pid)):
        kill_group(pid, signal.SIGKILL)


def _remove_dir(path: str) -> None:
    """Remove a private directory: only a real directory (not a symlink to one) owned by
    this user; shutil.rmtree never follows a symlink inside it."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- stale dirs
def _read_owner(path: str) -> JsonObject | None:
    try:
        fd = os.open(os.path.join(path, OWNER_NAME), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read(4096))
        return doc if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None


def _stale(path: str, now: float) -> tuple[bool, JsonObject | None]:
    """(is this directory left by a run that is gone, its ``owner``). A directory of
    another PID namespace is never judged (relay cannot look there); one without an owner
    (made by an older relay) is stale once older than twice the start timeout and nobody
    listens on its socket."""
    from ..core.process import pid_namespace, process_alive

    owner = _read_owner(path)
    if owner is None:
        try:
            age = now - os.lstat(path).st_mtime
        except OSError:
            return False, None
        if age < 2 * START_TIMEOUT_S:
            return False, None
        return not _accepts(os.path.join(path, SOCKET_NAME)), None
    try:
        pid, start, ns = owner["relay"]
    except (KeyError, TypeError, ValueError):
        return False, owner
    if ns != pid_namespace():
        return False, owner
    return not process_alive(pid, start, None), owner


def stale_dirs(environ: Mapping[str, str]) -> list[str]:
    """relay's private Codex directories (``relay-codex-*``: real directories owned by
    this user) whose `relay run` is gone, for doctor (design.md §12). Changes nothing.
    ``environ``: the call's (:func:`_bases`)."""
    return [path for path, _ in _find_stale(environ)]


def _find_stale(environ: Mapping[str, str]) -> list[tuple[str, JsonObject | None]]:
    found = []
    now = time.time()
    for base in _bases(environ):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in sorted(names):
            if not _DIR_RE.fullmatch(name):
                continue
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue  # a symlink, a file, another user's: not relay's own
            stale, owner = _stale(path, now)
            if stale:
                found.append((path, owner))
    return found


def remove_stale(environ: Mapping[str, str]) -> list[str]:
    """Remove what killed runs left: each stale directory (:func:`stale_dirs`), after a
    SIGKILL to its server's process group if that server still runs (its pid and start
    time as recorded, so a reused pid is left alone). Returns the paths removed."""
    removed = []
    for path, owner in _find_stale(environ):
        server = (owner or {}).get("server")
        if isinstance(server, list) and len(server) == 2:
            pid, start = server
            if isinstance(pid, int) and isinstance(start, str):
                _kill_stale_group(pid, start, f"{REMOTE_ENV}=unix://{path}/{SOCKET_NAME}")
        _remove_dir(path)
        removed.append(path)
    return removed
