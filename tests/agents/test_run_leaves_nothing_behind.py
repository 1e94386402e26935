"""Nothing a run started outlives it (design.md §12, §6): with real processes, checked in
/proc. Codex's private app server and what it started in its process group are stopped
when the server ended by itself, when relay's watchdog was killed and relay later, and —
relay and its watchdog killed together — by the next run; a program relay runs with a
timeout (`opencode --version` at install, `codex queue` of the waiter) is killed with
everything it started."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from test_run import _fake_codex_with_server, _gone, _short_tmp, _wait_for

PY = sys.executable


def _until(pred, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _children(pid: int) -> set[int]:
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            data = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
            out.add(int(name))
    return out


def _kill(*pids) -> None:
    for pid in pids:
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


class KilledRun:
    """`relay run -- codex` (the fake) with a server that starts a child in its group."""

    def __init__(self, relay, tmp_path: Path, name: str = "codex-k") -> None:
        env, self.rec = _fake_codex_with_server(tmp_path)
        self.base = _short_tmp(tmp_path)
        self.env = {**env, "XDG_RUNTIME_DIR": str(self.base)}
        self.relay = relay
        self.p = relay.popen(
            "run",
            "--as",
            name,
            "--",
            "codex",
            env={**self.env, "FAKE_SERVER": "child", "FAKE_TUI_WAIT": "1"},
        )
        _wait_for(self.rec / "tui")
        found = json.loads((self.rec / "server").read_text())
        self.server, self.child = found["pid"], found["child"]
        tui = json.loads((self.rec / "tui").read_text())
        self.tui = tui["pid"]
        self.directory = Path(tui["env"]["RELAY_CODEX_REMOTE"][len("unix://") :]).parent
        assert self.directory.parent == self.base and self.directory.is_dir()

    def watchdogs(self) -> set[int]:
        return _children(self.p.pid) - {self.server, self.tui}

    def close(self) -> None:
        _kill(self.child, self.server, self.tui, *self.watchdogs())
        if self.p.poll() is None:
            self.p.kill()
        shutil.rmtree(self.base, ignore_errors=True)


def test_an_app_server_that_ends_by_itself_leaves_nothing_once_the_run_ends(relay, tmp_path):
    """The server exits while the TUI runs; what it started in its group kept running
    after `relay run` returned (relay signalled the group only while its leader lived)."""
    env, rec = _fake_codex_with_server(tmp_path)
    base = _short_tmp(tmp_path)
    child = None
    try:
        env = {
            **env,
            "FAKE_SERVER": "child-exit",
            "FAKE_TUI_WAIT": "server-ended",
            "XDG_RUNTIME_DIR": str(base),
        }
        r = relay.proc("run", "--as", "codex-e", "--", "codex", env=env)
        assert r.code == 0, r.err
        found = json.loads((rec / "server").read_text())
        child = found["child"]
        assert _gone(found["pid"])
        assert _until(lambda: _gone(child), 2.0), "what the server started outlived the run"
        assert list(base.iterdir()) == []
    finally:
        _kill(child)
        shutil.rmtree(base, ignore_errors=True)


def test_a_killed_watchdog_is_replaced_and_a_later_kill_of_relay_leaves_nothing(relay, tmp_path):
    run = KilledRun(relay, tmp_path)
    try:
        (first,) = run.watchdogs()
        os.kill(first, signal.SIGKILL)
        assert _until(lambda: bool(run.watchdogs() - {first}), 10), "no new watchdog"
        assert _until(
            lambda: (
                json.loads((run.directory / "owner").read_text())["watchdog"][0] in run.watchdogs()
            )
        ), "the owner file does not name the new watchdog"
        os.kill(run.p.pid, signal.SIGKILL)
        run.p.wait(timeout=10)
        assert _until(lambda: _gone(run.server) and _gone(run.child) and not run.directory.exists())
        assert _gone(run.child), "what the app server started outlived relay"
        assert not run.directory.exists()
    finally:
        run.close()


def test_relay_and_its_watchdog_killed_together_leave_what_the_next_run_reaps(relay, tmp_path):
    """Both killed before relay could replace its watchdog: the server ends (the kernel's
    SIGTERM at relay's death), its child keeps running in the group; the next `relay run`
    of Codex finds the directory stale and kills that group, whose member still carries
    the run's address in its environment."""
    run = KilledRun(relay, tmp_path)
    try:
        (watchdog,) = run.watchdogs()
        os.kill(run.p.pid, signal.SIGSTOP)
        os.kill(watchdog, signal.SIGKILL)
        os.kill(run.p.pid, signal.SIGKILL)
        run.p.wait(timeout=10)
        assert _until(lambda: _gone(run.server))
        time.sleep(0.5)
        assert not _gone(run.child) and run.directory.exists()  # nobody was left to stop it
        r = relay.proc("run", "--as", "codex-n", "--", "codex", env=run.env)
        assert r.code == 0, r.err
        assert _until(lambda: _gone(run.child), 5), "the next run did not reap the group"
        assert not run.directory.exists()
    finally:
        run.close()


# ---------------------------------------------------------------- programs with a timeout
HUNG = """#!/bin/sh
echo $$ > {rec}/child
sleep 300 &
echo $! > {rec}/grandchild
wait
"""


def _hung_program(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A program that starts a grandchild holding its output open and never answers."""
    bin_dir, rec = tmp_path / "hung-bin", tmp_path / "hung-rec"
    bin_dir.mkdir(exist_ok=True)
    rec.mkdir(exist_ok=True)
    prog = bin_dir / name
    prog.write_text(HUNG.format(rec=rec))
    prog.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}", rec


def _left(rec: Path) -> list[int]:
    pids = [int((rec / n).read_text()) for n in ("child", "grandchild") if (rec / n).exists()]
    assert len(pids) == 2, "the program did not start"
    return [pid for pid in pids if not _gone(pid)]


@pytest.mark.one_backend
def test_a_hung_runtime_version_is_killed_with_what_it_started(relay, tmp_path, monkeypatch):
    from relay_cli.agents import install

    monkeypatch.setattr(install, "VERSION_TIMEOUT_S", 1, raising=False)
    path, rec = _hung_program(tmp_path, "opencode")
    home = tmp_path / "home"
    home.mkdir()
    try:
        r = relay("hook", "install", "opencode", "--json", env={"PATH": path, "HOME": str(home)})
        assert r.code == 0, r.err
        assert any("did not answer" in t for t in r.json["todo"])
        assert _until(lambda: not _left(rec), 2.0), f"left running: {_left(rec)}"
    finally:
        _kill(*_left(rec))


@pytest.mark.one_backend
def test_a_hung_codex_queue_is_killed_with_what_it_started(tmp_path, monkeypatch):
    from relay_cli.agents import hook, wake

    monkeypatch.setattr(wake, "CODEX_QUEUE_TIMEOUT_S", 1)
    path, rec = _hung_program(tmp_path, "codex")
    henv = hook.HookEnv(peer=None, token=None, env_file=None, environ={"PATH": path})
    try:
        t0 = time.monotonic()
        assert wake._codex_queue(henv, str(tmp_path / "hung-bin" / "codex"), "t-1", "note") is False
        assert time.monotonic() - t0 < 10
        assert _until(lambda: not _left(rec), 2.0), f"left running: {_left(rec)}"
    finally:
        _kill(*_left(rec))


def test_the_private_directory_goes_where_the_calls_tmpdir_says(relay, tmp_path):
    """Where a Codex run's private directory goes (and where doctor and the next run look
    for stale ones) is read from the call's environment, not the process's TMPDIR."""
    from relay_cli.agents import codex_server
    from relay_cli.core.process import pid_namespace

    base = _short_tmp(tmp_path)
    try:
        stale = base / "relay-codex-abcd1234"
        stale.mkdir(mode=0o700)
        (stale / "owner").write_text(json.dumps({"relay": [2**22 + 7, "gone:1", pid_namespace()]}))
        env = {"TMPDIR": str(base), "XDG_RUNTIME_DIR": None}
        assert os.environ.get("TMPDIR") != str(base)
        r = relay("doctor", "--json", env=env)
        checks = [c for c in r.json["checks"] if c["name"] == "codex_dirs"]
        assert checks and str(stale) in checks[0]["detail"], r.out
        server = codex_server.AppServer("codex", [], {"TMPDIR": str(base)})
        server.prepare()
        assert Path(server.private_dir).parent == base and not stale.exists()
        server.stop()
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
