"""A private Codex app server for one `relay run` peer (design.md §12).

Codex 0.171.0's TUI started with ``--no-daemon`` (so that no shared daemon runs its thread
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
  ``STOP_GRACE_S``) and the directory is removed.

Only the interactive TUI (``codex [OPTIONS] [PROMPT]``) gets a server; a subcommand
(``codex exec`` and the rest), or a ``--no-daemon`` the person gave, keeps ``--no-daemon``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from ..core.limits import CODEX_START_TIMEOUT_S as START_TIMEOUT_S
from ..core.limits import CODEX_STOP_GRACE_S as STOP_GRACE_S

REMOTE_ENV = "RELAY_CODEX_REMOTE"  # the address the waiter's `codex queue --remote` uses
SOCKET_NAME = "app-server.sock"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes

# Codex 0.171.0's top-level options (`codex --help`) that take a value, and its
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


def _socket_dir() -> str:
    """A new directory (0700, relay's own) for the socket, short enough for sun_path."""
    candidates = [os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"]
    for base in candidates:
        if not base or not os.path.isdir(base) or not os.access(base, os.W_OK | os.X_OK):
            continue
        if len(base) + len("/relay-codex-XXXXXXXX/") + len(SOCKET_NAME) > _MAX_SOCKET_PATH:
            continue
        return tempfile.mkdtemp(prefix="relay-codex-", dir=base)
    raise OSError(
        "no writable directory short enough for a unix socket ($XDG_RUNTIME_DIR, $TMPDIR, /tmp)"
    )


class CannotListen(Exception):
    """The app server did not start or did not listen in time."""


class AppServer:
    """One peer's ``codex app-server`` on a unix socket in a private directory."""

    def __init__(self, program: str, options: list[str]) -> None:
        self.program = program  # the codex found on PATH
        self.options = options
        self.dir: str | None = None
        self.proc: subprocess.Popen | None = None
        self.log = None

    @property
    def socket_path(self) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, SOCKET_NAME)

    @property
    def address(self) -> str:
        return "unix://" + self.socket_path

    def prepare(self) -> str:
        """Create the private directory; the address the server will listen on."""
        self.dir = _socket_dir()
        return self.address

    def start(
        self, env: dict[str, str], child_mask, interrupted, timeout: float = START_TIMEOUT_S
    ) -> list | None:
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
        if not os.path.exists(self.socket_path):
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(self.socket_path)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "app-server.log"), "rb") as f:
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


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)
