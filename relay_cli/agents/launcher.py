"""`relay run`: run an agent (or any command) inside a relay session (design.md §6).

join -> start CMD with RELAY_PEER / RELAY_SESSION / RELAY_HOME -> renew the lease from a
background thread while CMD runs -> leave when CMD ends (its claimed, unfinished work
becomes delivery_unknown, reason recipient_disconnected) -> exit with CMD's status.

Signals: SIGINT, SIGTERM and SIGHUP are held by ``process.Signals``, together with
SIGCHLD, so relay itself never dies of them while CMD runs. Each one is forwarded to CMD,
except a signal the kernel sent to the whole foreground process group (Ctrl-C, a terminal
hang-up): CMD is in that group and has received it already, and a second Ctrl-C would
mean "quit" to many agents. Exit statuses, and the 127/126 of a command that cannot
start, are the shell's (``process``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import NOT_EXECUTABLE_EXIT, RelayError
from ..core.process import CannotStart, Signals, exit_status, resolve_command, signal_status, spawn
from ..core.record import record
from ..requests import due, peers
from ..requests.peers import Caller
from . import alerts

if TYPE_CHECKING:
    from collections.abc import Callable

    from relay_cli.store import Store

    from ..core.errors import ErrorCode
    from .codex_server import AppServer

    # Prints a RelayError or a note for the person on stderr.
    Report = Callable[[RelayError | str], None]

__all__ = ["CannotStart", "launch_argv", "launch_plan", "run", "supported"]


def launch_argv(argv: list[str]) -> list[str]:
    """The command as `relay run` starts it (design.md §12): for a runtime whose entry has
    ``launch_args`` (Codex: ``--no-daemon``, so that no shared daemon runs its threads with
    another peer's environment) they follow the program's name unless already given; an
    option in ``launch_refuses`` (Codex's ``--remote``, a shared server) is refused."""
    return launch_plan(argv)[0]


def launch_plan(argv: list[str]) -> tuple[list[str], bool]:
    """(the command as `relay run` starts it, whether it gets a private app server).

    Codex's interactive TUI (``codex [OPTIONS] [PROMPT]``, no ``--no-daemon`` given) gets
    its own ``codex app-server`` (``codex_server``); the address is added as ``--remote``
    once the server listens. Everything else is :func:`launch_argv`'s."""
    from . import runtimes

    rt = runtimes.for_program(argv[0]) if argv else None
    if rt is None:
        return argv, False
    for opt in rt.launch_refuses:
        if any(a == opt or a.startswith(opt + "=") for a in argv[1:]):
            raise RelayError(
                "usage_error",
                f"relay run: {rt.program} {opt} runs the session in a shared "
                "server with another environment, so it would not keep this peer's identity",
                hint=f"start {rt.program} under relay run without {opt}",
            )
    if rt.private_server and not any(a in rt.launch_args for a in argv[1:]):
        from . import codex_server

        if codex_server.is_tui(argv[1:]):
            return argv, True
    missing = [a for a in rt.launch_args if a not in argv[1:]]
    return [argv[0], *missing, *argv[1:]], False


@record
class Session:
    name: str
    session_id: str
    token: str
    lease_seconds: int


class Heartbeat(threading.Thread):
    """Renews the session's lease every min(10 s, lease/3) on its own connection.

    A lapsed or superseded session is reported once on stderr and renewal stops; errors
    such as a busy database are reported and retried at the next tick. Never raises.
    """

    def __init__(
        self,
        open_store: Callable[[], Store],
        session: Session,
        report: Report,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(name="relay-run-heartbeat", daemon=True)
        self.open_store = open_store
        self.environ = environ or {}
        self.session = session
        self.report = report
        self.interval = peers.renew_interval_s(session.lease_seconds)
        self.stopped = threading.Event()
        self.lost: ErrorCode | None = None  # "lease_expired" / "peer_superseded" once known
        self.last_error: str | None = None  # report a repeated failure once, not every tick

    def run(self) -> None:
        store = None
        try:
            while not self.stopped.wait(self.interval):
                try:
                    if store is None:
                        store = self.open_store()
                    if not self.beat(store):
                        return
                    self.last_error = None
                except RelayError as e:
                    self._report_once(e)
                except Exception as e:  # noqa: BLE001 - a heartbeat must never crash relay
                    self._report_once(RelayError("internal_error", f"heartbeat: {e}"))
        finally:
            if store is not None:
                store.close()

    def _report_once(self, err: RelayError) -> None:
        if err.code != self.last_error:
            self.last_error = err.code
            self.report(err)

    def beat(self, store: Store) -> bool:
        """Renew once; False when the session is no longer active (reported). Alerts
        owed meanwhile (design.md §19: a lease of any session that lapsed) are started."""
        with due.unit(store) as now:
            row = store.get_session(self.session.session_id)
            status = peers.session_status(store, row)
            if status == "active":
                peers.renew(store, Caller(self.session.name, row, "active"), now)
            owed = alerts.take(store, self.environ, now)
        alerts.start(owed, self.environ)
        if status == "active":
            return True
        if status == "left":
            return False
        self.lost = peers.STATUS_ERRORS[status]
        self.report(
            RelayError(
                self.lost,
                f"relay run: the session of {self.session.name!r} "
                + ("was replaced by a newer session" if status == "superseded" else "lease lapsed")
                + "; its claimed, unfinished work became delivery_unknown. The command keeps "
                "running without a live session; restart it under `relay run` to join again",
            )
        )
        return False

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=10)


def join(
    store: Store,
    name: str,
    kind: str | None,
    lease_seconds: int,
    environ: Mapping[str, str] | None = None,
) -> tuple[Session, list[str]]:
    """A new session of ``name``, and the ids of the claimed work of the live session it
    superseded (now delivery_unknown; its alert is started, design.md §19)."""
    with due.unit(store) as now:
        info, moved = peers.join_session(store, name, kind, lease_seconds, now)
        owed = alerts.take(store, environ or {}, now)
    alerts.start(owed, environ or {})
    return Session(name, info["session_id"], info["token"], lease_seconds), moved


def leave(store: Store, session: Session, environ: Mapping[str, str] | None = None) -> int | None:
    """Leave if the session is still active; how many requests became delivery_unknown.
    The alert owed for it (it went holding work, design.md §19) is started."""
    with due.unit(store) as now:
        row = store.get_session(session.session_id)
        if row is None or row["state"] != "active":
            return None
        moved = len(store.in_flight_of_session(session.session_id))
        peers.leave(store, Caller(session.name, row, "active"), now)
        owed = alerts.take(store, environ or {}, now)
    alerts.start(owed, environ or {})
    return moved


def child_env(
    session: Session, home: Path, environ: Mapping[str, str], url: str | None = None
) -> dict[str, str]:
    """The environment CMD runs in: the call's (``environ``), with the session's."""
    env = dict(environ)
    env["RELAY_PEER"] = session.name
    env["RELAY_SESSION"] = session.token
    env["RELAY_HOME"] = str(Path(os.path.abspath(home)))
    if url is not None:  # the same PostgreSQL database, also when given by --database-url
        env["RELAY_DATABASE_URL"] = url
    return env


def run(
    open_store: Callable[[], Store],
    name: str,
    kind: str | None,
    lease_seconds: int,
    argv: list[str],
    report: Report,
    environ: Mapping[str, str],
) -> int:
    """The whole launcher; returns the exit status for relay. CMD runs in ``environ`` (the
    call's) with the session's variables, found on its PATH.

    ``open_store()`` opens a new store connection (one for this thread, one for the
    heartbeat); ``report(item)`` prints a RelayError or a note for the person on stderr.
    Raises CannotStart or RelayError; either way no live session is left behind.
    """
    argv, private_server = launch_plan(argv)
    path = resolve_command(argv[0], environ.get("PATH"))
    heartbeat = None
    store = None
    server = None
    with Signals(children=True) as signals:
        try:
            store = open_store()
            session, replaced = join(store, name, kind, lease_seconds, environ)
            if replaced:
                report(
                    f"relay run: joining as {name} replaced its live session; "
                    f"{len(replaced)} claimed request(s) that session did not finish "
                    "became delivery_unknown (reason peer_superseded): "
                    f"{', '.join(replaced)}; ask the person, do not rerun them "
                    "automatically"
                )
            try:
                early = signals.take()
                if early:  # asked to stop before CMD existed: start nothing
                    _leave_reporting(store, session, report, environ)
                    return signal_status(early[0][0])
                env = child_env(session, store.home, environ, store.shared_url(with_password=True))
                if private_server:
                    server, argv, meanwhile = _start_server(path, argv, env, signals)
                    if meanwhile:
                        server.stop()
                        _leave_reporting(store, session, report, environ)
                        return signal_status(meanwhile[0][0])
                pid = spawn(path, argv, env, signals)
            except BaseException:
                if server is not None:
                    server.stop()
                _leave_reporting(store, session, report, environ)
                raise
            heartbeat = Heartbeat(open_store, session, report, environ)
            heartbeat.start()
            status = _supervise(pid, signals, server.check if server is not None else None)
            if server is not None:
                server.stop()
            heartbeat.stop()
            _leave_reporting(store, session, report, environ)
            return status
        finally:
            if server is not None:
                server.stop()
            if heartbeat is not None:
                heartbeat.stop()
            if store is not None:
                store.close()


def _start_server(
    path: str, argv: list[str], env: dict[str, str], signals: Signals
) -> tuple[AppServer, list[str], list[tuple[int, bool]] | None]:
    """Start the peer's private Codex app server with the session's environment (design.md
    §12); (server, the TUI's argv with ``--remote``, signals that arrived meanwhile).
    ``env`` gains ``RELAY_CODEX_REMOTE``. Raises RelayError when it cannot listen."""
    from . import codex_server

    options = codex_server.server_options(argv[1:])
    server = codex_server.AppServer(path, options, env)
    try:
        address = server.prepare()
        env[codex_server.REMOTE_ENV] = address
        early = server.start(env, signals.child_mask(), signals.take)
    except (OSError, codex_server.CannotListen) as e:
        server.stop()
        raise RelayError(
            "usage_error",
            f"relay run: {argv[0]}'s private app server did not start: {e}",
            exit_code=NOT_EXECUTABLE_EXIT,
            hint="nothing was left running and the session was left; to run without it, "
            f"give {argv[0]} --no-daemon in the relay run command line",
        ) from None
    return server, [argv[0], "--remote", address, *argv[1:]], early


def _supervise(pid: int, signals: Signals, tick: Callable[[], None] | None = None) -> int:
    """Wait for the child, forwarding signals; return its exit status. ``tick()`` runs
    between waits (the app server's :meth:`~codex_server.AppServer.check`: a watchdog
    that died is replaced the moment its SIGCHLD ends the wait)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return exit_status(os.waitstatus_to_exitcode(status))[0]
        if tick is not None:
            tick()
        signals.wait(1.0)  # SIGCHLD ends the wait the moment a child ends
        signals.forward(pid)


def _leave_reporting(
    store: Store, session: Session, report: Report, environ: Mapping[str, str]
) -> None:
    try:
        moved = leave(store, session, environ)
    except RelayError as e:
        report(e)
        return
    if moved:
        report(
            f"relay run: {session.name} left; {moved} claimed request(s) it did not "
            "finish became delivery_unknown (reason recipient_disconnected): ask the person, "
            "do not rerun them automatically"
        )


def supported() -> bool:
    return (
        hasattr(signal, "sigtimedwait") and hasattr(os, "posix_spawn") and sys.platform != "win32"
    )
