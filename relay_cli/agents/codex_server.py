"""A private Codex app server for one `relay run` peer (design.md §12).

Codex's TUI (the release in ``runtimes.CODEX_CHECKED``) started with ``--no-daemon`` (so that no shared daemon runs its thread
with another peer's environment) starts a turn queued by ``codex queue`` only on a fixed
10 s tick. A TUI connected to an app server over ``--remote`` starts it at once, so
`relay run` gives each interactive Codex its own server:

- ``codex app-server --listen unix://SOCK``, started with the peer's environment (its
  ``RELAY_PEER`` and ``RELAY_SESSION``), the socket in a directory of its own (mode 0700,
  under ``$XDG_RUNTIME_DIR`` or the temporary directory), in a process group of its own,
  set on Linux to get SIGTERM should relay die;
- relay waits until the socket accepts a connection (at most ``START_TIMEOUT_S``), then
  starts the TUI as ``codex --remote unix://SOCK …``; the session's environment names the
  address in ``RELAY_CODEX_REMOTE``, so the waiter runs ``codex queue --remote …``;
- when the TUI ends, the server's process group gets SIGTERM (SIGKILL after
  ``STOP_GRACE_S``) and the directory is removed;
- should relay be killed (SIGKILL), a watchdog it forked for this (``_watch``, in a
  session of its own) sees its pipe from relay close and does the same: nothing the run
  started outlives it, not the server, not what the server started in its group, not the
  directory. The directory records its owner (``owner``: relay's pid, start time and PID
  namespace, and the server's); a directory whose owner is gone (the watchdog was killed
  too) is removed by the next `relay run` of Codex (:func:`remove_stale`: only relay's own
  ``relay-codex-*`` directories, owned by this user, never through a symlink), and
  `relay doctor` names it (:func:`stale_dirs`).

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
import tempfile
import time
from typing import IO, TYPE_CHECKING

from ..core.limits import CODEX_START_TIMEOUT_S as START_TIMEOUT_S
from ..core.limits import CODEX_STOP_GRACE_S as STOP_GRACE_S

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

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


def _bases(runtime_dir: str | None) -> list[str]:
    """Where a private directory may be made, in order of preference: ``runtime_dir`` (the
    call's $XDG_RUNTIME_DIR), the temporary directory, /tmp."""
    out = []
    for base in (runtime_dir, tempfile.gettempdir(), "/tmp"):
        if base and base not in out:
            out.append(base)
    return out


def _socket_dir(runtime_dir: str | None) -> str:
    """A new directory (0700, relay's own) for the socket, short enough for sun_path."""
    for base in _bases(runtime_dir):
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


class AppServer:
    """One peer's ``codex app-server`` on a unix socket in a private directory."""

    def __init__(self, program: str, options: list[str], runtime_dir: str | None = None) -> None:
        self.program = program  # the codex found on PATH
        self.options = options
        self.runtime_dir = runtime_dir  # the call's $XDG_RUNTIME_DIR (``_bases``)
        self.dir: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None  # the server's output, while it runs
        self._watchdog: tuple[int, int] | None = None  # (pid, our end of its pipe)

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
        remove_stale(self.runtime_dir)
        self.dir = _socket_dir(self.runtime_dir)
        self._write_owner()
        return self.address

    def _write_owner(self) -> None:
        from ..core.process import Me

        me = Me.current()
        doc = {"relay": [me.pid, me.start, me.ns]}
        if self.proc is not None:
            from ..core.process import process_start

            doc["server"] = [self.proc.pid, process_start(self.proc.pid)]
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
        self._write_owner()
        self._watchdog = _start_watchdog(self.proc.pid, self.dir, STOP_GRACE_S)
        end = time.monotonic() + timeout
        while True:
            got = interrupted()
            if got:
                return got
            if self.proc.poll() is not None:
                raise CannotListen(
                    f"{self.program} app-server exited with status "
                    f"{self.proc.returncode} before it listened"
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

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace``; remove the
        directory. Safe to call more than once."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                _kill_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid, signal.SIGKILL)
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
            pid, fd = watchdog
            with contextlib.suppress(OSError):
                os.write(fd, _STOPPED)
            os.close(fd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


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


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _start_watchdog(server_pid: int, directory: str, grace: float) -> tuple[int, int]:
    """Fork the watchdog of a server (see :func:`_watch`); (its pid, relay's end of the
    pipe it watches). Forked from relay's main thread before any other thread runs."""
    r, w = os.pipe()
    os.set_inheritable(r, False)
    os.set_inheritable(w, False)
    pid = os.fork()
    if pid == 0:  # the watchdog: nothing here may return
        try:
            os.close(w)
            _watch(r, server_pid, directory, grace)
        finally:
            os._exit(0)
    os.close(r)
    return pid, w


def _watch(fd: int, server_pid: int, directory: str, grace: float) -> None:
    """In the watchdog: wait until relay's end of ``fd`` closes. When relay said it
    stopped the server itself, do nothing; else relay died (SIGKILL leaves it no word):
    SIGTERM to the server's process group, SIGKILL after ``grace``, remove the directory.

    The watchdog leads a session of its own (a terminal's signals do not reach it),
    holds none of relay's descriptors (a reader of relay's output sees it end), and
    relies on no parent-death signal, which the kernel clears when the server is a
    setuid, setgid or file-capability program."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
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
    _kill_group(server_pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while not _group_gone(server_pid) and time.monotonic() < end:
        time.sleep(0.05)
    _kill_group(server_pid, signal.SIGKILL)
    _remove_dir(directory)


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


def stale_dirs(runtime_dir: str | None) -> list[str]:
    """relay's private Codex directories (``relay-codex-*``: real directories owned by
    this user) whose `relay run` is gone, for doctor (design.md §12). Changes nothing.
    ``runtime_dir``: the call's $XDG_RUNTIME_DIR."""
    return [path for path, _ in _find_stale(runtime_dir)]


def _find_stale(runtime_dir: str | None) -> list[tuple[str, JsonObject | None]]:
    found = []
    now = time.time()
    for base in _bases(runtime_dir):
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


def remove_stale(runtime_dir: str | None) -> list[str]:
    """Remove what killed runs left: each stale directory (:func:`stale_dirs`), after a
    SIGKILL to its server's process group if that server still runs (its pid and start
    time as recorded, so a reused pid is left alone). Returns the paths removed."""
    from ..core.process import process_alive

    removed = []
    for path, owner in _find_stale(runtime_dir):
        server = (owner or {}).get("server")
        if isinstance(server, list) and len(server) == 2:
            pid, start = server
            # only a server whose start time was recorded: a bare pid may be reused
            if isinstance(pid, int) and isinstance(start, str) and process_alive(pid, start, None):
                with contextlib.suppress(OSError):
                    if os.getpgid(pid) == pid:
                        os.killpg(pid, signal.SIGKILL)
        _remove_dir(path)
        removed.append(path)
    return removed
