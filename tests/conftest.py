"""Shared fixtures and helpers: run the real `relay` command, in-process (fast) or as a
subprocess.

``relay(...)`` runs in-process through ``relay_cli.cli.run``, handed a context of its own
(``relay_cli.core.context.Context``: its environment, stdin, stdout and stderr, its clock)
and never changing the process's (design.md §8); ``relay.proc(...)`` runs the installed console script in a real
process (use it for parallelism, signals, terminals and start-up behaviour);
``relay.at_terminal(...)`` runs it with a terminal as standard input (a person's act) and
``relay.pty(...)``/``relay.screen(...)`` on a whole terminal of a given size.

Helpers every file uses: ``at(seconds)`` (relay's clock moved, as an env),
``relay.move_clock(seconds)`` (for every later call), ``refused(...)`` (a command fails
with a code and changes nothing), the fixtures ``pair`` (alice and bob joined),
``world`` (the same, with ``relay``) and ``seeded`` (``world`` plus one queued request).

The ``relay`` fixture runs every test twice: on SQLite (relay.db in a temporary home) and
on PostgreSQL (a fresh database of a throwaway server that this session starts:
testsupport/pgserver.py), because the contract holds on both (design.md §13): every test about
the store's behaviour (a transition, a refusal that changes nothing, a race, a wait, the
ledger, the hooks) runs on both. Tests about the local file itself are marked
``sqlite_only`` and run on SQLite alone. Tests that use ``relay`` only to run commands
that never reach the store -- help and guide text, choices, generated files, packaging,
start-up imports, runtime settings files, the demo (which always runs on its own
relay.db) -- are marked ``one_backend`` and run once (on SQLite), to keep CI's time
reasonable; a PostgreSQL run of them would test nothing more. Without the server
programs or the driver the PostgreSQL half is skipped with the reason, unless
RELAY_REQUIRE_POSTGRES=1 (CI), where that is an error.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import relay_cli.cli.commands  # noqa: E402, F401  (every command registered, as a call but a hook's does)
from relay_cli.agents.codex_server import REMOTE_ENV  # noqa: E402
from relay_cli.core.context import ENVIRONMENT  # noqa: E402
from testsupport import pgserver  # noqa: E402

DAY = 86400  # seconds
# Escape sequences a terminal acts on: CSI, OSC (a title), charset and keypad switches.
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>]")

# what relay reads (its one list), what `relay run` sets for the Codex session it starts,
# and what the runtimes set that relay looks at: a suite run from inside an agent's
# session must not inherit them
RELAY_ENV_VARS = (
    *ENVIRONMENT,
    REMOTE_ENV,
    "FORCE_COLOR",
    "CLAUDE_ENV_FILE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ATTENDED",
    "CODEX_THREAD_ID",
)
BACKENDS = ("sqlite", "postgres")


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self):
        return json.loads(self.out)

    @property
    def error(self) -> dict:
        """The JSON error line on stderr (with --json)."""
        lines = [ln for ln in self.err.splitlines() if ln.startswith('{"error"')]
        assert len(lines) == 1, f"expected one JSON error line, got stderr={self.err!r}"
        return json.loads(lines[0])["error"]


_TREES: dict[tuple, object] = {}


def _reuse_command_trees() -> None:
    """Build each Click command tree once per test process, not once per in-process call.

    Every relay process builds its tree at start (``relay_cli.cli.app._click_command``:
    ~8 ms of Typer's introspection, half the CPU of a call); in-process calls would build
    the same tree again for each of the ~40,000 calls in the suite. Which tree a call gets
    depends only on its first word, on whether that is all it has and on whether it is a
    completion request (``_RELAY_COMPLETE``), so the tree is kept under that key; Click makes a new context for
    each invocation and never changes the tree. The real processes (``relay.proc``,
    ``relay.pty``, ...) still build theirs at every start."""
    import importlib

    cli_app = importlib.import_module("relay_cli.cli.app")  # the module, not its Typer app
    build = cli_app._click_command
    if getattr(build, "reused", False):
        return

    def reused(argv: list[str], completing: bool = False):
        # the command's name, after the root's scope options (`relay --home DIR list`)
        key = (cli_app._command_name(argv), len(argv) <= 1, completing)
        if key not in _TREES:
            _TREES[key] = build(argv, completing)
        return _TREES[key]

    reused.reused = True
    cli_app._click_command = reused


class Relay:
    def __init__(self, home: Path, url: str | None = None) -> None:
        self.home = home
        self.url = url  # the PostgreSQL database of this test, or None for relay.db
        self.backend = "postgres" if url else "sqlite"
        self.env: dict[str, str] = {}
        self.clock = None  # the clock handed to every later in-process call (move_clock)

    def _env(self, env: dict | None) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if k not in RELAY_ENV_VARS}
        base["RELAY_HOME"] = str(self.home)
        if self.url:
            base["RELAY_DATABASE_URL"] = self.url
        base.update(self.env)
        if env:
            base.update({k: v for k, v in env.items() if v is not None})
            for k, v in env.items():
                if v is None:
                    base.pop(k, None)
        return base

    def __call__(
        self,
        *args: str,
        input: str | bytes | None = None,
        env: dict | None = None,
        terminal: bool = False,
        clock=None,
    ) -> Result:
        """``terminal``: standard input is a real pseudo-terminal (a person typing), with
        ``input`` already typed into it (design.md §14: a person's acts need one).
        ``clock``: a ``relay_cli.core.clock.Clock`` the call uses (a fake one), instead of
        the one of ``move_clock`` or of RELAY_TIME_OFFSET in ``env``."""
        from relay_cli.cli import run
        from relay_cli.core.context import Context

        if clock is None and not (env and "RELAY_TIME_OFFSET" in env):
            clock = self.clock

        _reuse_command_trees()
        data = input.encode() if isinstance(input, str) else (input or b"")
        out, err = io.StringIO(), io.StringIO()
        master = None
        if terminal:
            master, slave = os.openpty()
            if data:
                os.write(master, data)
            stdin = open(slave, encoding="utf-8", closefd=True)  # noqa: SIM115
        else:
            stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        # the call's context: the process's environment and streams are left alone
        context = Context.from_environ(
            self._env(env), stdin=stdin, stdout=out, stderr=err, clock=clock
        )
        try:
            code = run([str(a) for a in args], context=context)
        finally:
            stdin.close()
            if master is not None:
                os.close(master)
        return Result(code, out.getvalue(), err.getvalue())

    def proc(
        self,
        *args: str,
        input: str | bytes | None = None,
        env: dict | None = None,
        timeout: float = 60,
    ) -> Result:
        data = input.encode() if isinstance(input, str) else input
        p = subprocess.run(
            [sys.executable, "-m", "relay_cli", *map(str, args)],
            input=data,
            capture_output=True,
            env=self._env(env),
            timeout=timeout,
        )
        return Result(
            p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        )

    def pty(
        self,
        *args: str,
        env: dict | None = None,
        cols: int = 80,
        rows: int = 24,
        timeout: float = 30,
    ) -> tuple[int, str]:
        """`relay ARGS` in a real process whose stdin and stdout are a terminal of
        cols x rows: (exit status, everything it wrote, escape codes included)."""
        import fcntl
        import pty
        import select
        import struct
        import termios

        pid, fd = pty.fork()
        if pid == 0:  # the child: relay with the terminal as stdin, stdout and stderr
            e = self._env({"TERM": "xterm-256color", "COLUMNS": None, "LINES": None, **(env or {})})
            os.execve(sys.executable, [sys.executable, "-m", "relay_cli", *map(str, args)], e)
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        chunks = []
        while select.select([fd], [], [], timeout)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")

    def screen(self, *args: str, cols: int, rows: int, env: dict | None = None) -> tuple[str, str]:
        """`relay ARGS` on a terminal of cols x rows: (everything it wrote, the same text
        without escape codes and carriage returns)."""
        _, raw = self.pty(*args, cols=cols, rows=rows, env=env)
        return raw, plain(raw)

    def screen_here(
        self, *args: str, cols: int, rows: int, env: dict | None = None
    ) -> tuple[str, str]:
        """``screen`` in this process: the call's standard input, output and error are one
        pseudo-terminal of cols x rows, as ``pty`` gives a process (line-buffered, with the
        same environment), and what it wrote is read from the terminal's other end. For a
        test about the text a screen shows, not about a process (its start, signals,
        exit): it costs no interpreter start (~0.1-0.2 s of CPU)."""
        import fcntl
        import struct
        import termios
        import threading

        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        chunks: list[bytes] = []

        def drain() -> None:  # (a screen longer than the terminal's buffer never blocks)
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every end of the terminal's slave side is closed
                    return
                if not data:
                    return
                chunks.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        streams = [
            open(  # noqa: SIM115 - closed below
                os.dup(slave), mode, encoding="utf-8", errors="backslashreplace", **kw
            )
            for mode, kw in (("r", {}), ("w", {"buffering": 1}), ("w", {"buffering": 1}))
        ]
        os.close(slave)
        e = self._env({"TERM": "xterm-256color", "COLUMNS": None, "LINES": None, **(env or {})})
        from relay_cli.cli import run
        from relay_cli.core.context import Context

        _reuse_command_trees()
        stdin, stdout, stderr = streams
        try:
            context = Context.from_environ(e, stdin=stdin, stdout=stdout, stderr=stderr)
            run([str(a) for a in args], context=context)
        finally:
            for stream in streams:
                stream.close()
        reader.join(30)
        os.close(master)
        raw = b"".join(chunks).decode("utf-8", "replace")
        return raw, plain(raw)

    def at_terminal(
        self, *args: str, typed: bytes = b"", env: dict | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """`relay ARGS` in a real process whose standard input is a pseudo-terminal (a
        person at a terminal), with ``typed`` already typed into it; stdout and stderr are
        pipes (text). ``.terminal`` is what relay wrote to that terminal (after the echo of
        what was typed)."""
        master, slave = os.openpty()
        try:
            if typed:
                os.write(master, typed)
            p = subprocess.run(
                [sys.executable, "-m", "relay_cli", *map(str, args)],
                stdin=slave,
                capture_output=True,
                text=True,
                env=self._env(env),
                timeout=timeout,
            )
            os.close(slave)
            slave = None
            shown = b""
            try:
                while chunk := os.read(master, 65536):
                    shown += chunk
            except OSError:  # EIO: the terminal is closed at its other end and drained
                pass
            p.terminal = shown.decode(errors="replace").replace("\r\n", "\n")
            return p
        finally:
            os.close(master)
            if slave is not None:
                os.close(slave)

    def move_clock(self, seconds: float) -> None:
        """Move relay's clock by ``seconds`` for every later call: handed to an in-process
        call as its clock, to a process (and what an in-process call starts) as
        RELAY_TIME_OFFSET."""
        from relay_cli.core.clock import Clock

        self.clock = Clock(str(seconds))
        self.env["RELAY_TIME_OFFSET"] = str(seconds)

    def popen(self, *args: str, env: dict | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "relay_cli", *map(str, args)],
            env=self._env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **kw,
        )

    # ---------------------------------------------------------------- helpers
    def join(self, name: str, *extra: str) -> dict[str, str]:
        """Join ``name``; return the env (RELAY_PEER, RELAY_SESSION) that acts as it."""
        r = self("peers", "join", name, "--json", *extra)
        assert r.code == 0, r.err
        return {"RELAY_PEER": name, "RELAY_SESSION": r.json["token"]}

    def send(
        self, who: dict, to: str, text: str = "hello", *extra: str, request_id: str | None = None
    ) -> Result:
        rid = request_id or str(uuid.uuid4())
        return self("send", "--to", to, "--id", rid, "--json", *extra, "-", input=text, env=who)

    def snapshot(self) -> dict[str, list]:
        """Every row of every table, to prove a refused command changed nothing."""
        if self.url:
            conn = self._pg()
            try:
                tables = [
                    r[0]
                    for r in self.sql(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                        "current_schema() ORDER BY table_name",
                        conn=conn,
                    )
                ]
                return {t: self.sql(f'SELECT * FROM "{t}" ORDER BY 1', conn=conn) for t in tables}
            finally:
                conn.close()
        db = sqlite3.connect(self.home / "relay.db")
        try:
            tables = [
                r[0]
                for r in db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            return {t: db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables}
        finally:
            db.close()

    def _pg(self):
        import psycopg2

        conn = psycopg2.connect(self.url)
        conn.autocommit = True
        return conn

    def sql(self, query: str, params=(), conn=None) -> list[tuple]:
        """Run one statement on this test's database (``?`` placeholders on both);
        ``conn``: a PostgreSQL connection to reuse (``snapshot`` reads every table
        through one, instead of a connection per table)."""
        if self.url:
            own = conn is None
            conn = self._pg() if own else conn
            try:
                with conn.cursor() as cur:
                    cur.execute(query.replace("%", "%%").replace("?", "%s"), tuple(params))
                    rows = cur.fetchall() if cur.description else []
                    return [
                        tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows
                    ]
            finally:
                if own:
                    conn.close()
        db = sqlite3.connect(self.home / "relay.db", isolation_level=None)
        try:
            return db.execute(query, tuple(params)).fetchall()
        finally:
            db.close()

    def make_home(self) -> None:
        """Make this test's home and its database, as a command that starts from nothing
        (`peers join`) would, without adding a row (a read makes none, design.md §2)."""
        self.open_store().close()

    def open_store(self):
        """A store object on this test's database, in this process."""
        from relay_cli.store import open_store

        return open_store(self.home, self.url, self.clock, environ={})


class Tmux:
    """`relay ARGS` in a real terminal of cols x rows: a detached tmux session (its own
    server) whose screen can be read and typed into. The shell records the terminal's
    settings before and after relay (``stty.before``/``stty.after`` in ``cwd``) and prints
    ``EXITED rc=N`` when relay ends."""

    def __init__(
        self,
        relay: Relay,
        *args: str,
        cols: int = 120,
        rows: int = 45,
        env: dict | None = None,
        cwd: Path | None = None,
    ) -> None:
        import shlex
        import tempfile

        self.socket = f"relay-test-{uuid.uuid4().hex[:8]}"
        self.cwd = Path(cwd or tempfile.mkdtemp(prefix="relay-tmux-"))
        full = {"TERM": "xterm-256color", **relay._env(None), **(env or {})}
        exports = " ".join(
            f"{k}={shlex.quote(v)}"
            for k, v in full.items()
            if k.startswith("RELAY_") or k in ("PATH", "HOME", "LANG", "NO_COLOR", "TERM")
        )
        command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "relay_cli", *args))
        script = self.cwd / "run-relay.sh"
        script.write_text(
            "stty -g > stty.before\n"
            f"env {exports} {command}\n"
            "rc=$?\n"
            "stty -g > stty.after\n"
            'echo "EXITED rc=$rc"\n'
            "sleep 60\n"
        )
        self.tmux(
            "new-session",
            "-d",
            "-s",
            "w",
            "-x",
            str(cols),
            "-y",
            str(rows),
            "-c",
            str(self.cwd),
            f"bash {shlex.quote(str(script))}",
        )

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def pane(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "w")

    def wait_for(self, text: str, timeout: float = 15.0) -> float:
        """Seconds until ``text`` is on the screen."""
        import time

        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if text in self.pane():
                return time.monotonic() - start
            time.sleep(0.02)
        raise AssertionError(f"{text!r} not on screen after {timeout}s:\n{self.pane()}")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "w", *keys)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def new_id() -> str:
    return str(uuid.uuid4())


def _byte_compile() -> None:
    """Byte-compile relay (and bench/, whose scripts start relay) once, before any test,
    as pip does at install time. The suite starts a few thousand real relay processes
    (``relay.proc``, ``relay.pty``, the races and crashes); with PYTHONDONTWRITEBYTECODE=1
    in the environment an editable checkout has no bytecode, so each of them would compile
    every relay module from source again: 0.30 s of CPU for `relay id` instead of 0.20 s
    here. Python reads bytecode whatever that variable says and checks it against each
    source's mtime, so an edited module is never run stale. The files go where Python puts
    its own (``__pycache__/``, ignored by git, excluded from the sdist by MANIFEST.in)."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for part in ("relay_cli", "bench"):
        compileall.compile_dir(str(root / part), quiet=1)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without workers)
        _byte_compile()
    # pytest keeps the test modules it rewrote (their asserts) as bytecode in __pycache__/
    # unless PYTHONDONTWRITEBYTECODE=1; then every process (each xdist worker collects every
    # module) rewrites and compiles all ~150 of them again: ~4 s of CPU each, collecting
    # the suite in 6 s instead of 2. Kept like relay's own bytecode (``_byte_compile``):
    # checked against each source's mtime and size, ignored by git and the sdist.
    sys.dont_write_bytecode = False
    config.addinivalue_line(
        "markers",
        "sqlite_only: about the local relay.db file itself (design.md §2, §9), "
        "so not run on PostgreSQL",
    )
    config.addinivalue_line(
        "markers", "postgres_only: about the PostgreSQL backend (design.md §13)"
    )
    config.addinivalue_line(
        "markers",
        "one_backend: never reaches the store (help text, generated files, "
        "rendering, packaging), so run once, on SQLite",
    )


# Tests that run on one pytest-xdist worker, one after another; every other test runs on
# whichever worker is free. (pytest-xdist's own xdist_group mark is not used: with pytest
# 9.2 the group it writes into the node id never reaches the scheduler.)
XDIST_GROUPS = {
    # setuptools writes relay_cli.egg-info/, build/ and relay_cli-VERSION/ into the
    # checkout: two builds at once delete each other's files.
    "build": (
        "test_wheel.py",
        "test_packaging.py::test_sdist_",
        "test_packaging.py::test_the_tests_run_from_the_unpacked_sdist",
        "test_readme.py::test_first_command_as_written_in_a_fresh_home",
    ),
    # the several-machines runs: namespaces, a server each and injected network faults,
    # timed runs that would only starve each other.
    "netns": ("test_netns.py", "test_netfault.py"),
}
# Modules whose tests share a module-scoped fixture (a server, a built wheel, a tmux
# screen, the printed-commands world): on one worker it is set up once. And modules whose
# last test checks what the earlier ones gathered (test_hints: every hint the module met),
# which must therefore run on one worker, in order.
SHARED_FIXTURE_MODULES = (
    "test_e2e_runtimes.py",
    "test_hints.py",
    "test_pg_faults.py",
    "test_pg_url.py",
    "test_postgres.py",
    "test_printed_commands.py",
    "test_schema.py",
    "test_screens_fit.py",
    "test_web_browser.py",
)


def xdist_group(nodeid: str) -> str:
    """The unit of work a test belongs to: a group above, its module, or itself."""
    path, _, rest = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    for group, prefixes in XDIST_GROUPS.items():
        if f"{module}::{rest}".startswith(prefixes):
            return group
    return path if module in SHARED_FIXTURE_MODULES else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's addopts): two workers more than there are CPUs. A
    good part of the suite waits rather than computes -- for a lock held past relay's
    busy timeout, a server's deadline, a lease, a process to end -- so with one worker a
    CPU, a CPU would sit idle while its worker waits (on 2 CPUs, one run after the
    other: 4 workers 4 min 30 s, 3 workers 4 min 50 s; docs/benchmarks.md).
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is taken as pytest-xdist takes it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cpus or 1) + 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's load scheduling, by the units of ``xdist_group``."""
    if config.getvalue("dist") != "load":
        return None  # an explicit --dist: as asked
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return Grouped(config, log)


def pytest_collection_modifyitems(config, items):
    """A sqlite_only or one_backend test runs once, on SQLite; a postgres_only one on
    PostgreSQL."""
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        backend = spec.params.get("relay") if spec is not None else None
        if (
            backend == "postgres"
            and (item.get_closest_marker("sqlite_only") or item.get_closest_marker("one_backend"))
        ) or (backend == "sqlite" and item.get_closest_marker("postgres_only")):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _postgres_missing() -> str | None:
    if pgserver.bindir() is None:
        return "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
    if not pgserver.driver_available():
        return "the PostgreSQL driver is not installed (pip install 'relay-cli[postgres]')"
    return None


# What makes a database what it is, besides its rows: every relation (with its kind,
# owner and grants), column, default, index, constraint, function, trigger, type, schema,
# extension and per-database setting outside the system catalogs, and each sequence's
# position. Two databases with the same fingerprint and the same rows are alike to relay.
_USER_NS = (
    "n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
)
_FINGERPRINT = f"""
SELECT x FROM (
  SELECT 'rel ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' '
         || c.relowner::regrole::text || ' ' || coalesce(c.relacl::text, '') AS x
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_NS}
  UNION ALL
  SELECT 'col ' || a.attrelid::regclass::text || '.' || a.attname || ' '
         || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' '
         || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attnum > 0 AND NOT a.attisdropped AND {_USER_NS}
  UNION ALL
  SELECT 'idx ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE {_USER_NS}
  UNION ALL
  SELECT 'con ' || o.conrelid::regclass::text || ' ' || o.conname || ' '
         || pg_get_constraintdef(o.oid)
    FROM pg_constraint o JOIN pg_namespace n ON n.oid = o.connamespace WHERE {_USER_NS}
  UNION ALL
  SELECT 'fn ' || p.oid::regprocedure::text FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {_USER_NS}
  UNION ALL
  SELECT 'trg ' || t.tgrelid::regclass::text || ' ' || t.tgname || ' ' || t.tgenabled::text
    FROM pg_trigger t WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'type ' || n.nspname || '.' || t.typname FROM pg_type t
    JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {_USER_NS}
  UNION ALL
  SELECT 'ns ' || nspname || ' ' || nspowner::regrole::text || ' '
         || coalesce(nspacl::text, '') FROM pg_namespace
  UNION ALL
  SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL
  SELECT 'set ' || array_to_string(setconfig, ';') FROM pg_db_role_setting
   WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT 'seq ' || schemaname || '.' || sequencename || ' ' || coalesce(last_value::text, '-')
    FROM pg_sequences
  UNION ALL
  SELECT 'lo ' || count(*) FROM pg_largeobject_metadata
) facts ORDER BY x
"""


# The catalogs whose rows are what the fingerprint reads (and a few more that define a
# database's objects), with pg_db_role_setting's rows for this database. A copy of the
# template still holds exactly the template's catalog rows when each of these has the
# same number of rows and the same newest writer (the largest xmin): a row added or
# changed since carries a newer xmin, one dropped lowers the count. (Statistics and
# VACUUM's in-place updates of pg_class's counters change no xmin and are not part of
# what a database is.) One cheap query, where the fingerprint costs ~20 ms of the
# server's CPU.
_CATALOGS = (
    "pg_class",
    "pg_attribute",
    "pg_attrdef",
    "pg_index",
    "pg_constraint",
    "pg_proc",
    "pg_trigger",
    "pg_type",
    "pg_namespace",
    "pg_extension",
    "pg_sequence",
    "pg_rewrite",
    "pg_policy",
    "pg_inherits",
    "pg_event_trigger",
    "pg_default_acl",
    "pg_largeobject_metadata",
)
_WRITERS = " UNION ALL ".join(
    [f"SELECT '{c}', count(*), max(xmin::text::bigint) FROM pg_catalog.{c}" for c in _CATALOGS]
    + [
        "SELECT 'pg_db_role_setting', count(*), max(xmin::text::bigint) FROM "
        "pg_catalog.pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database "
        "WHERE datname = current_database())"
    ]
)


class PgCluster:
    """The session's server (one per xdist worker) and a migrated template database,
    copied for each test.

    A test's copy is used again by a later test only when, after its rows are deleted and
    its sequences set back to their start, it is indistinguishable from a new copy: no
    connection to it is left, its catalogs hold exactly the template's rows (``_WRITERS``:
    so its fingerprint, ``_FINGERPRINT``, is the template's; tests/project/test_pg_reuse.py holds
    the two together) and every table holds exactly the template's rows. Otherwise it is
    dropped, as every copy was before. (``CREATE DATABASE`` and ``DROP DATABASE`` cost
    ~0.25 s of the server's time per test; the reset ~22 ms of its CPU, its connection
    included.)"""

    TEMPLATE = "relay_template"

    def __init__(self) -> None:
        self.server = pgserver.start()
        self.count = 0
        self.server.execute(f"CREATE DATABASE {self.TEMPLATE}")
        from relay_cli.store import pg

        pg.connect(self.server.url(self.TEMPLATE), environ={}).close()
        conn = self._connect(self.TEMPLATE)
        try:
            self.facts = self._facts(conn)
            self.writers = self._writers(conn)
            self.rows = self._rows(conn)
        finally:
            conn.close()
        # one batch that empties every table the template has empty (foreign keys not
        # checked: any order) and sets every sequence back to its start (what a new copy
        # has: is_called false). Every one: a sequence set with setval(..., false), as
        # `relay db copy` does, shows no last value, like an unused one.
        self.clear = "; ".join(
            [
                "BEGIN",
                "SET LOCAL session_replication_role = replica",
                *(f"DELETE FROM {t}" for t, kept in self.rows.items() if not kept),
                "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, "
                "start_value, false) FROM pg_sequences",
                "COMMIT",
            ]
        )
        self.spare: list[str] = []  # reset copies of the template, ready to use again
        self.reused = 0

    def _connect(self, name: str):
        import psycopg2

        conn = psycopg2.connect(self.server.url(name))
        conn.autocommit = True
        return conn

    @staticmethod
    def _writers(conn) -> list[tuple]:
        with conn.cursor() as cur:
            cur.execute(_WRITERS)
            return sorted(cur.fetchall())

    @staticmethod
    def _facts(conn) -> list[str]:
        with conn.cursor() as cur:
            cur.execute(_FINGERPRINT)
            return [r[0] for r in cur.fetchall()]

    @staticmethod
    def _tables(cur) -> list[str]:
        cur.execute(
            "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) "
            "FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', "
            "'information_schema') ORDER BY 1"
        )
        return [r[0] for r in cur.fetchall()]

    def _rows(self, conn) -> dict[str, list[str]]:
        with conn.cursor() as cur:
            out = {}
            for table in self._tables(cur):
                cur.execute(f"SELECT t::text FROM {table} t ORDER BY 1")
                out[table] = [r[0] for r in cur.fetchall()]
            return out

    def fresh(self, template: str = TEMPLATE) -> tuple[str, str]:
        if template == self.TEMPLATE and self.spare:
            name = self.spare.pop()
            self.reused += 1
            return name, self.server.url(name)
        self.count += 1
        name = f"t{os.getpid()}_{self.count}"
        return name, self.server.create_db(name, template)

    def release(self, name: str) -> None:
        """Done with a copy of the template: keep it for a later test when it can be
        made exactly like a new copy, else drop it."""
        try:
            if self._reset(name):
                self.spare.append(name)
                return
        except Exception:  # noqa: BLE001 - whatever the test did to it, it is dropped
            pass
        self.drop(name)

    def _reset(self, name: str) -> bool:
        conn = self._connect(name)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND pid <> pg_backend_pid()) + (SELECT count(*) "
                    "FROM pg_prepared_xacts WHERE database = current_database())"
                )
                if cur.fetchone()[0]:  # a connection or a prepared transaction is left
                    return False
                cur.execute(_WRITERS)
                if sorted(cur.fetchall()) != self.writers:  # its objects changed
                    return False
                cur.execute(self.clear)
                for table, kept in self.rows.items():
                    if kept:
                        cur.execute(f"SELECT t::text FROM {table} t ORDER BY 1")
                        if [r[0] for r in cur.fetchall()] != kept:
                            return False
            return True
        finally:
            conn.close()

    def drop(self, name: str) -> None:
        try:
            self.server.drop_db(name)
        except Exception:  # noqa: BLE001 - the server may have been stopped by the test
            pass


_CLUSTER: list[PgCluster] = []


@pytest.fixture(scope="session")
def pg_cluster():
    missing = _postgres_missing()
    if missing:
        if os.environ.get("RELAY_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"RELAY_REQUIRE_POSTGRES=1, but {missing}")
        pytest.skip(missing)
    cluster = PgCluster()
    try:
        yield cluster
    finally:
        cluster.server.remove()


@pytest.fixture(params=BACKENDS)
def relay(request, tmp_path) -> Relay:
    if request.param == "sqlite":
        yield Relay(tmp_path / "relay-home")
        return
    cluster = request.getfixturevalue("pg_cluster")
    name, url = cluster.fresh()
    try:
        yield Relay(tmp_path / "relay-home", url)
    finally:
        cluster.release(name)


def at(seconds: float, who: dict | None = None) -> dict:
    """The env of a call made ``seconds`` later by relay's clock (as ``who``, if given)."""
    return {**(who or {}), "RELAY_TIME_OFFSET": str(seconds)}


def plain(raw: str) -> str:
    """What a terminal shows of ``raw``: no escape codes, no carriage returns."""
    return ANSI.sub("", raw).replace("\r", "")


def assert_fits(text: str, cols: int) -> list[str]:
    """The lines of ``text`` (a screen without escape codes), none wider than ``cols``
    terminal cells."""
    from relay_cli.core.output import cell_len

    lines = text.rstrip("\n").split("\n")
    wide = [ln for ln in lines if cell_len(ln) > cols]
    assert wide == [], f"lines wider than {cols}: {wide}"
    return lines


def fake_crash(relay: Relay, key: str, **extra) -> None:
    """Make the finished ledger entry ``key`` look like relay crashed mid-run: it names this
    very pid but with a start time it never had, so relay knows the process is gone, and a
    command process that is gone too (its pid was committed: the command had started)."""
    from relay_cli.core.process import pid_namespace, this_host

    store = relay.open_store()
    try:
        with store.transaction():
            store.update_ledger(
                key,
                {
                    "state": "running",
                    "pid": os.getpid(),
                    "process_start": "other-boot:1",
                    "child_pid": os.getpid(),
                    "child_start": "other-boot:2",
                    "host": this_host(),
                    "pid_namespace": pid_namespace(),
                    "exit_code": None,
                    "stdout": None,
                    "stderr": None,
                    "stdout_bytes": None,
                    "stderr_bytes": None,
                    "finished_at": None,
                    **extra,
                },
            )
    finally:
        store.close()


def refused(relay: Relay, code: str, *args, input=None, env=None, terminal=False) -> dict:
    """``relay ARGS --json`` fails with ``code`` (its exit code and fixed hint, nothing on
    stdout, no traceback) and changes nothing; returns the error."""
    from relay_cli.core.errors import ERRORS

    before = relay.snapshot()
    r = relay(*args, "--json", input=input, env=env, terminal=terminal)
    err = r.error
    assert err["code"] == code, r.err
    assert r.code == err["exit_code"] == ERRORS[code].exit_code
    assert err["hint"].startswith(ERRORS[code].hint)
    assert r.out == ""
    assert "Traceback" not in r.err
    assert relay.snapshot() == before
    return err


_NEW_HOME: list[Path] = []  # a home as relay makes it, made once per test process


def _new_sqlite_home(home: Path, tmp_path_factory) -> None:
    """Make ``home`` a copy of a home relay made (its relay.db migrated to the latest
    schema, no row), made once per test process: what the first command in an empty
    home makes (PostgreSQL's fresh databases are copies of a migrated template too,
    ``PgCluster.fresh``), without migrating a relay.db for each test (~15 ms of CPU:
    SQLite reads its schema again after each of the migrations' statements)."""
    import shutil

    if not _NEW_HOME:
        made = tmp_path_factory.mktemp("new-home") / "home"
        Relay(made).make_home()
        assert sorted(p.name for p in made.iterdir()) == ["relay.db"]  # (no -wal left)
        _NEW_HOME.append(made)
    home.mkdir(mode=0o700)
    home.chmod(0o700)  # (whatever the umask)
    shutil.copyfile(_NEW_HOME[0] / "relay.db", home / "relay.db")
    (home / "relay.db").chmod(0o600)


@pytest.fixture
def pair(relay, tmp_path_factory) -> tuple[dict, dict]:
    """alice and bob, each joined with a lease of 24 h (time moves in tests; leases lapse
    only where a test says so): the envs that act as them. On SQLite the home they join
    is a copy of a new one (``_new_sqlite_home``)."""
    if relay.url is None and not relay.home.exists():
        _new_sqlite_home(relay.home, tmp_path_factory)
    return relay.join("alice", "--lease", "24h"), relay.join("bob", "--lease", "24h")


@pytest.fixture
def world(relay, pair) -> tuple[Relay, dict, dict]:
    """``relay`` with ``pair``."""
    return relay, *pair


@pytest.fixture
def seeded(world) -> tuple[Relay, dict, dict, str]:
    """``world`` and one request alice sent bob (queued): its id last."""
    relay, alice, bob = world
    rid = new_id()
    assert relay.send(alice, "bob", "seed", request_id=rid).code == 0
    return relay, alice, bob, rid
