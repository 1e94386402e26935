"""Shared fixtures: run the real `relay` command, in-process (fast) or as a subprocess.

``relay(...)`` runs in-process through ``relay_cli.cli.run`` with its own stdin, stdout,
stderr and environment; ``relay.proc(...)`` runs the installed console script in a real
process (use it for parallelism, signals, terminals and start-up behaviour).
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

RELAY_ENV_VARS = ("RELAY_HOME", "RELAY_PEER", "RELAY_SESSION", "RELAY_TIME_OFFSET",
                  "RELAY_RATE_LIMIT", "RELAY_DEBUG", "NO_COLOR", "FORCE_COLOR", "CLAUDE_ENV_FILE")


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


class Relay:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env: dict[str, str] = {}

    def _env(self, env: dict | None) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if k not in RELAY_ENV_VARS}
        base["RELAY_HOME"] = str(self.home)
        base.update(self.env)
        if env:
            base.update({k: v for k, v in env.items() if v is not None})
            for k, v in env.items():
                if v is None:
                    base.pop(k, None)
        return base

    def __call__(self, *args: str, input: str | bytes | None = None,
                 env: dict | None = None, terminal: bool = False) -> Result:
        """``terminal``: standard input is a real pseudo-terminal (a person typing), with
        ``input`` already typed into it (design.md §14: a person's acts need one)."""
        from relay_cli.cli import run

        data = input.encode() if isinstance(input, str) else (input or b"")
        saved_env = dict(os.environ)
        saved = sys.stdin, sys.stdout, sys.stderr
        out, err = io.StringIO(), io.StringIO()
        os.environ.clear()
        os.environ.update(self._env(env))
        master = None
        if terminal:
            master, slave = os.openpty()
            if data:
                os.write(master, data)
            sys.stdin = open(slave, encoding="utf-8", closefd=True)
        else:
            sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        try:
            code = run([str(a) for a in args])
        finally:
            if master is not None:
                sys.stdin.close()
                os.close(master)
            sys.stdin, sys.stdout, sys.stderr = saved
            os.environ.clear()
            os.environ.update(saved_env)
        return Result(code, out.getvalue(), err.getvalue())

    def proc(self, *args: str, input: str | bytes | None = None, env: dict | None = None,
             timeout: float = 60) -> Result:
        data = input.encode() if isinstance(input, str) else input
        p = subprocess.run(
            [sys.executable, "-m", "relay_cli", *map(str, args)], input=data,
            capture_output=True, env=self._env(env), timeout=timeout,
        )
        return Result(p.returncode, p.stdout.decode("utf-8", "replace"),
                      p.stderr.decode("utf-8", "replace"))

    def pty(self, *args: str, env: dict | None = None, cols: int = 80, rows: int = 24,
            timeout: float = 30) -> tuple[int, str]:
        """`relay ARGS` in a real process whose stdin and stdout are a terminal of
        cols x rows: (exit status, everything it wrote, escape codes included)."""
        import fcntl
        import pty
        import select
        import struct
        import termios

        pid, fd = pty.fork()
        if pid == 0:  # the child: relay with the terminal as stdin, stdout and stderr
            e = self._env({"TERM": "xterm-256color", "COLUMNS": None, "LINES": None,
                           **(env or {})})
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

    def popen(self, *args: str, env: dict | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "relay_cli", *map(str, args)], env=self._env(env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw,
        )

    # ---------------------------------------------------------------- helpers
    def join(self, name: str, *extra: str) -> dict[str, str]:
        """Join ``name``; return the env (RELAY_PEER, RELAY_SESSION) that acts as it."""
        r = self("peers", "join", name, "--json", *extra)
        assert r.code == 0, r.err
        return {"RELAY_PEER": name, "RELAY_SESSION": r.json["token"]}

    def send(self, who: dict, to: str, text: str = "hello", *extra: str,
             request_id: str | None = None) -> Result:
        rid = request_id or str(uuid.uuid4())
        return self("send", "--to", to, "--id", rid, "--json", *extra, "-", input=text, env=who)

    def snapshot(self) -> dict[str, list]:
        """Every row of every table, to prove a refused command changed nothing."""
        db = sqlite3.connect(self.home / "relay.db")
        try:
            tables = [r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return {t: db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                    for t in tables}
        finally:
            db.close()


def new_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def relay(tmp_path) -> Relay:
    return Relay(tmp_path / "relay-home")
