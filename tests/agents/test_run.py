"""`relay run`: the launcher, in real processes (design.md §6 run, §3 leases)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import new_id

PY = sys.executable


def _signals_at_default() -> None:
    """For a relay under test: the signals it forwards start at their default action, as
    in a terminal, even when the test run itself inherited them ignored (`nohup`, a
    background job), which relay rightly keeps ignored for CMD (design.md §6)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _wait_for(path: Path, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


def _script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


def _peer(relay, name: str) -> dict | None:
    r = relay("peers", "list", "--json")
    if r.code == 7 and "no relay home exists" in r.err:  # nothing made it: no peer either
        return None
    peers = r.json["peers"]
    return next((p for p in peers if p["name"] == name), None)


def test_everything_after_double_dash_reaches_the_child_untouched(relay, tmp_path):
    out = tmp_path / "seen.json"
    child = _script(
        tmp_path,
        "child.py",
        (
            "import json, os, sys\n"
            f"json.dump({{'argv': sys.argv[1:], 'env': {{k: os.environ.get(k) for k in "
            f"('RELAY_PEER', 'RELAY_SESSION', 'RELAY_HOME')}}}}, open({str(out)!r}, 'w'))\n"
        ),
    )
    args = ["--json", "--help", "--as", "x", "--", "a b", "", "-h", "--kind=claude"]
    r = relay.proc("run", "--as", "c1", "--", PY, child, *args)
    assert r.code == 0, r.err
    assert r.out == "" and r.err == ""
    seen = json.loads(out.read_text())
    assert seen["argv"] == args
    assert seen["env"]["RELAY_PEER"] == "c1"
    assert seen["env"]["RELAY_SESSION"].startswith("rly_")
    assert seen["env"]["RELAY_HOME"] == str(relay.home)
    # the session was left when the child ended: its token is no longer valid
    hb = relay(
        "peers",
        "heartbeat",
        "--json",
        env={"RELAY_PEER": "c1", "RELAY_SESSION": seen["env"]["RELAY_SESSION"]},
    )
    assert hb.code == 5 and hb.error["code"] == "invalid_session"
    assert _peer(relay, "c1")["active"] is False


def test_options_without_double_dash_also_belong_to_the_child(relay, tmp_path):
    out = tmp_path / "argv.json"
    child = _script(
        tmp_path,
        "child.py",
        f"import json, sys; json.dump(sys.argv[1:], open({str(out)!r}, 'w'))\n",
    )
    r = relay.proc("run", "--as", "c1", PY, child, "--resume", "abc", "--json")
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == ["--resume", "abc", "--json"]


def test_relay_home_given_relative_is_exported_absolute(relay, tmp_path):
    out = tmp_path / "home.txt"
    env = relay._env({"RELAY_HOME": None})
    p = subprocess.run(
        [
            PY,
            "-m",
            "relay_cli",
            "run",
            "--home",
            "rel-home",
            "--as",
            "c1",
            "--",
            PY,
            "-c",
            f"import os; open({str(out)!r}, 'w').write(os.environ['RELAY_HOME'])",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_text() == str(tmp_path / "rel-home")


@pytest.mark.parametrize("xdg", [True, False])
def test_the_default_home_of_run_is_the_one_every_command_uses(relay, tmp_path, xdg):
    """No RELAY_HOME and no --home: `relay run` joins in the per-user state directory of
    its environment (XDG_STATE_HOME, else HOME; design.md §2), as `relay peers list`
    reads it, and exports that directory to the child."""
    out = tmp_path / "home.txt"
    env = relay._env({"RELAY_HOME": None, "RELAY_DATABASE_URL": None})
    env["HOME"] = str(tmp_path / "user")
    if xdg:
        env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    else:
        env.pop("XDG_STATE_HOME", None)
    expected = tmp_path / "xdg" / "relay" if xdg else tmp_path / "user/.local/state/relay"
    script = f"import os; open({str(out)!r}, 'w').write(os.environ['RELAY_HOME'])"
    p = subprocess.run(
        [PY, "-m", "relay_cli", "run", "--as", "c1", "--", PY, "-c", script],
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_text() == str(expected)
    listed = subprocess.run(
        [PY, "-m", "relay_cli", "peers", "list", "--json"], env=env, capture_output=True
    )
    assert listed.returncode == 0, listed.stderr
    assert "c1" in [peer["name"] for peer in json.loads(listed.stdout)["peers"]]


@pytest.mark.parametrize("code", [3, 255])
def test_exit_status_is_the_childs(relay, code):
    r = relay.proc("run", "--as", "c1", "--", PY, "-c", f"import sys; sys.exit({code})")
    assert r.code == code, r.err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGUSR1])
def test_child_killed_by_signal_exits_128_plus_n(relay, sig):
    r = relay.proc(
        "run", "--as", "c1", "--", PY, "-c", f"import os; os.kill(os.getpid(), {int(sig)})"
    )
    assert r.code == 128 + sig, r.err
    assert _peer(relay, "c1")["active"] is False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_sent_to_relay_reach_the_child(relay, tmp_path, sig):
    ready, got = tmp_path / "ready", tmp_path / "got"
    child = _script(
        tmp_path,
        "trap.py",
        (
            "import signal, sys, time\n"
            "def on(n, f):\n"
            f"    open({str(got)!r}, 'w').write(str(n)); sys.exit(42)\n"
            "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, on)\n"
            f"open({str(ready)!r}, 'w').close()\n"
            "time.sleep(30)\n"
            "sys.exit(1)\n"
        ),
    )
    p = relay.popen("run", "--as", "c1", "--", PY, child, preexec_fn=_signals_at_default)
    try:
        _wait_for(ready)
        p.send_signal(sig)
        assert p.wait(timeout=15) == 42
    finally:
        p.kill()
    assert got.read_text() == str(int(sig))
    assert _peer(relay, "c1")["active"] is False


def test_ctrl_c_at_a_terminal_reaches_the_child_once(relay, tmp_path):
    """The terminal sends SIGINT to the whole process group: relay must not add a second."""
    ready = tmp_path / "ready"
    child = _script(
        tmp_path,
        "count.py",
        (
            "import signal, sys, time\n"
            "count = 0\n"
            "def on(n, f):\n"
            "    global count; count += 1\n"
            "signal.signal(signal.SIGINT, on)\n"
            f"open({str(ready)!r}, 'w').close()\n"
            "while count == 0: time.sleep(0.01)\n"
            "time.sleep(1.0)\n"
            "sys.exit(10 + count)\n"
        ),
    )
    env = relay._env(None)
    pid, fd = pty.fork()
    if pid == 0:  # child: session leader with the pty as controlling terminal
        os.execve(PY, [PY, "-m", "relay_cli", "run", "--as", "c1", "--", PY, str(child)], env)
    try:
        _wait_for(ready)
        os.write(fd, b"\x03")
        end = time.monotonic() + 15
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < end, "relay run did not end"
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    os.read(fd, 4096)
                except OSError:
                    pass
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 11


def test_claimed_work_becomes_delivery_unknown_when_the_child_ends(relay):
    alice = relay.join("alice")
    relay("peers", "add", "worker")
    rid = new_id()
    assert relay.send(alice, "worker", "do it", request_id=rid).code == 0
    # the child is relay itself, claiming as the session that `run` joined
    r = relay.proc("run", "--as", "worker", "--", PY, "-m", "relay_cli", "claim", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["id"] == rid
    assert "delivery_unknown" in r.err  # relay's note for the person
    shown = relay("show", rid, "--json").json
    assert shown["state"] == "delivery_unknown"
    assert shown["reason"] == "recipient_disconnected"
    assert _peer(relay, "worker")["active"] is False


def test_run_that_replaces_a_live_session_names_the_work_that_became_delivery_unknown(relay):
    """`relay run --as worker` while another worker session holds claimed work supersedes
    it (design.md §3): that work becomes delivery_unknown, and the person starting the
    agent is told which, as `peers join` and `peers leave` tell; --json adds no note."""
    alice = relay.join("alice")
    worker = relay.join("worker", "--lease", "1h")
    rid = new_id()
    assert relay.send(alice, "worker", "do it", request_id=rid).code == 0
    assert relay("claim", "--id", rid, env=worker).code == 0
    r = relay.proc("run", "--as", "worker", "--", PY, "-c", "pass")
    assert r.code == 0, r.err
    flat = " ".join(r.err.split())
    assert rid in flat and "delivery_unknown" in flat and "peer_superseded" in flat, r.err
    assert relay("show", rid, "--json").json["reason"] == "peer_superseded"
    quiet = relay.proc("run", "--as", "worker", "--json", "--", PY, "-c", "pass")
    assert quiet.code == 0 and quiet.err == ""


def test_lease_is_renewed_and_a_superseded_session_is_reported(relay, tmp_path):
    """Two launchers at once (10 s leases, so a renewal every 3.3 s): one is left alone and
    must renew; the other is superseded and must say so on stderr, without crashing --
    with --json as its one error line (design.md §7), while its command goes on."""
    import threading

    def start(name: str, *extra: str):
        stop, ready = tmp_path / f"stop-{name}", tmp_path / f"ready-{name}"
        child = (
            f"import os, time; open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(stop)!r}): time.sleep(0.02)\n"
        )
        p = relay.popen("run", "--as", name, "--lease", "10s", *extra, "--", PY, "-c", child)
        return p, ready, stop

    (pa, ready_a, stop_a), (pb, ready_b, stop_b) = start("ra"), start("rb", "--json")
    err_b: list[str] = []
    noticed = threading.Event()

    def read_b():
        for line in iter(pb.stderr.readline, b""):
            err_b.append(line.decode())
            if b"peer_superseded" in line:
                noticed.set()

    reader = threading.Thread(target=read_b, daemon=True)
    reader.start()
    try:
        _wait_for(ready_a)
        _wait_for(ready_b)
        first = _peer(relay, "ra")["lease_expires_at"]
        relay.join("rb")  # a newer session supersedes rb's launcher
        end = time.monotonic() + 15
        while _peer(relay, "ra")["lease_expires_at"] == first:
            assert time.monotonic() < end, "the lease of ra was never renewed"
            time.sleep(0.1)
        assert _peer(relay, "ra")["active"] is True
        assert noticed.wait(timeout=15), "".join(err_b)
        stop_a.touch()
        stop_b.touch()
        assert pa.wait(timeout=20) == 0
        assert pb.wait(timeout=20) == 0
    finally:
        stop_a.touch()  # the commands end too, even when relay was killed before them
        stop_b.touch()
        pa.kill()
        pb.kill()
    reader.join(timeout=20)  # all of rb's stderr, to its end
    assert "Traceback" not in "".join(err_b)
    assert len(err_b) == 1 and json.loads(err_b[0])["error"]["code"] == "peer_superseded"
    assert _peer(relay, "rb")["active"] is True  # relay did not end the newer session
    assert _peer(relay, "ra")["active"] is False


def test_command_not_found_exits_127_and_leaves_no_session(relay):
    r = relay.proc("run", "--as", "c1", "--", "no-such-command-relay-test")
    assert r.code == 127
    assert "not found" in r.err
    assert "Traceback" not in r.err
    assert _peer(relay, "c1") is None  # looked up before joining: no session, no peer


def test_not_found_with_json_is_one_error_line(relay):
    r = relay.proc("run", "--json", "--as", "c1", "--", "./no-such-file")
    assert r.code == 127 and r.out == ""
    assert r.error["exit_code"] == 127 and r.error["code"] == "usage_error"


@pytest.mark.parametrize("kind", ["plain_file", "directory"])
def test_not_executable_exits_126_and_leaves_no_session(relay, tmp_path, kind):
    target = tmp_path / "target"
    if kind == "directory":
        target.mkdir()
    else:
        target.write_text("#!/bin/sh\necho hi\n")
        target.chmod(0o644)
    r = relay.proc("run", "--as", "c1", "--", str(target))
    assert r.code == 126, r.err
    assert {"plain_file": "not executable", "directory": "is a directory"}[kind] in r.err
    assert _peer(relay, "c1") is None  # looked up before joining: no session, no peer


def test_spawn_failure_after_join_leaves_the_session(relay, tmp_path):
    bad = tmp_path / "bad-format"
    bad.write_bytes(b"\x7fELF-not-really\x00\x01")
    bad.chmod(0o755)  # passes the executable check, fails in exec (ENOEXEC)
    r = relay.proc("run", "--as", "c1", "--", str(bad))
    assert r.code == 126, r.err
    assert _peer(relay, "c1")["active"] is False


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "--", "true"], "--as"),
        (["run", "--as", "c1"], "no command given: relay run --as NAME"),
        (["run", "--as", "c1", "--bogus", "--", "true"], "bogus"),
        (["run", "--as", "Bad Name", "--", "true"], "Bad Name"),
        (["run", "--as", "c1", "--lease", "5s", "--", "true"], "--lease"),
    ],
)
def test_bad_command_lines_are_refused_before_anything_happens(relay, argv, needle):
    r = relay(*argv, "--json") if argv[-1] != "true" else relay(*argv)
    assert r.code == 2, r.err
    assert needle in r.err
    assert not (relay.home / "relay.db").exists()


def _fake_codex(tmp_path: Path) -> tuple[dict, Path]:
    """A stand-in `codex` on PATH that records its arguments and RELAY_PEER."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "codex-argv.json"
    script = bin_dir / "codex"
    script.write_text(
        f"#!{PY}\nimport json, os, sys\n"
        f"json.dump([sys.argv[1:], os.environ.get('RELAY_PEER')], "
        f"open({str(out)!r}, 'w'))\n"
    )
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, out


def test_codex_subcommands_under_relay_run_start_without_the_shared_daemon(relay, tmp_path):
    """design.md §12: Codex's shared app-server daemon runs every thread with the
    environment of the peer that started it; --no-daemon keeps one identity per peer."""
    env, out = _fake_codex(tmp_path)
    r = relay.proc("run", "--as", "codex-b", "--", "codex", "exec", "--json", "hi", env=env)
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == [["--no-daemon", "exec", "--json", "hi"], "codex-b"]
    r = relay.proc("run", "--as", "codex-b", "--", "codex", "-m", "o3", "resume", env=env)
    assert json.loads(out.read_text())[0] == ["--no-daemon", "-m", "o3", "resume"]
    # a --no-daemon the person gave: the TUI runs in-process, as asked (not twice)
    r = relay.proc(
        "run", "--as", "codex-a", "--kind", "codex", "--", "codex", "--no-daemon", env=env
    )
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == [["--no-daemon"], "codex-a"]


FAKE_CODEX = """#!{py}
import json, os, signal, socket, sys, time
rec = {rec!r}
args = sys.argv[1:]
def record(name, extra=None):
    data = {{"argv": args, "pid": os.getpid(), **(extra or {{}}),
            "env": {{k: os.environ.get(k) for k in
                    ("RELAY_PEER", "RELAY_SESSION", "RELAY_CODEX_REMOTE")}}}}
    with open(os.path.join(rec, name + ".tmp"), "w") as f:
        json.dump(data, f)
    os.replace(os.path.join(rec, name + ".tmp"), os.path.join(rec, name))
if args[:1] == ["app-server"]:
    mode = os.environ.get("FAKE_SERVER", "")
    if mode == "exit":
        print("error: no config here"); sys.exit(3)
    path = args[args.index("--listen") + 1][len("unix://"):]
    def stop(n, f):
        open(os.path.join(rec, "server-stopped"), "w").write(str(n)); sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    if mode != "mute":
        s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
    extra = {{}}
    if mode in ("child", "child-exit"):  # what a real server starts: a helper in its group
        import subprocess
        extra["child"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid
    record("server", {{"mode": oct(os.stat(os.path.dirname(path)).st_mode & 0o777), **extra}})
    if mode == "child-exit":  # the server ends by itself, once the TUI is connected;
        end = time.monotonic() + 30  # what it started does not end
        while not os.path.exists(os.path.join(rec, "tui")) and time.monotonic() < end:
            time.sleep(0.02)
        sys.exit(0)
    while True:
        time.sleep(0.1)
remote = args[args.index("--remote") + 1] if "--remote" in args else None
connected = False
if remote:
    c = socket.socket(socket.AF_UNIX); c.connect(remote[len("unix://"):]); connected = True
record("tui", {{"connected": connected}})
def server_ended():
    with open(os.path.join(rec, "server")) as f:
        pid = json.load(f)["pid"]
    try:
        with open(f"/proc/{{pid}}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True
wait = os.environ.get("FAKE_TUI_WAIT")
if wait == "server-ended":  # until the server has ended (relay has not reaped it)
    end = time.monotonic() + 30
    while not server_ended() and time.monotonic() < end:
        time.sleep(0.02)
elif wait:
    signal.signal(signal.SIGTERM, lambda n, f: sys.exit(42))
    time.sleep(float(wait) if wait != "1" else 30)
"""


def _fake_codex_with_server(tmp_path: Path) -> tuple[dict, Path]:
    """A stand-in `codex`: `app-server --listen unix://P` listens on P until SIGTERM; the
    TUI connects to its --remote. Both record argv, pid and identity under ``rec``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rec = tmp_path / "rec"
    rec.mkdir()
    script = bin_dir / "codex"
    script.write_text(FAKE_CODEX.format(py=PY, rec=str(rec)))
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, rec


def test_codex_tui_under_relay_run_gets_its_own_app_server_with_its_identity(relay, tmp_path):
    """design.md §12: the interactive TUI gets a private `codex app-server` on a unix
    socket, started with the peer's environment, and `--remote` to it; the session names
    the address (RELAY_CODEX_REMOTE) for the waiter; the server is stopped at the end."""
    env, rec = _fake_codex_with_server(tmp_path)
    r = relay.proc(
        "run",
        "--as",
        "codex-a",
        "--kind",
        "codex",
        "--",
        "codex",
        "-c",
        'model="x"',
        "--dangerously-bypass-hook-trust",
        "fix it",
        env=env,
    )
    assert r.code == 0, r.err
    server = json.loads((rec / "server").read_text())
    tui = json.loads((rec / "tui").read_text())
    address = tui["env"]["RELAY_CODEX_REMOTE"]
    assert address.startswith("unix:///") and address.endswith("/app-server.sock")
    assert tui["argv"] == [
        "--remote",
        address,
        "-c",
        'model="x"',
        "--dangerously-bypass-hook-trust",
        "fix it",
    ]
    assert tui["connected"]
    assert server["argv"] == ["app-server", "-c", 'model="x"', "--listen", address]
    assert server["mode"] == "0o700"
    assert server["env"] == tui["env"]  # the same peer, session and address
    assert tui["env"]["RELAY_PEER"] == "codex-a"
    assert tui["env"]["RELAY_SESSION"].startswith("rly_")
    assert (rec / "server-stopped").read_text() == str(int(signal.SIGTERM))
    assert not os.path.exists(os.path.dirname(address[len("unix://") :]))
    assert _peer(relay, "codex-a")["active"] is False


def test_a_signal_to_relay_run_ends_codex_and_then_its_app_server(relay, tmp_path):
    env, rec = _fake_codex_with_server(tmp_path)
    p = relay.popen("run", "--as", "codex-a", "--", "codex", env={**env, "FAKE_TUI_WAIT": "1"})
    try:
        _wait_for(rec / "tui")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=15) == 42  # the TUI's own status
    finally:
        p.kill()
    assert (rec / "server-stopped").exists()
    address = json.loads((rec / "tui").read_text())["env"]["RELAY_CODEX_REMOTE"]
    assert not os.path.exists(os.path.dirname(address[len("unix://") :]))
    assert _peer(relay, "codex-a")["active"] is False


def test_an_app_server_that_cannot_start_is_a_clear_error_and_leaves_nothing(relay, tmp_path):
    env, rec = _fake_codex_with_server(tmp_path)
    r = relay.proc(
        "run", "--as", "codex-a", "--", "codex", "--json", env={**env, "FAKE_SERVER": "exit"}
    )
    assert r.code == 126, r.err
    assert "usage_error" in r.err and "private app server did not start" in r.err
    assert "exited with status 3" in r.err and "no config here" in r.err
    assert "--no-daemon" in r.err  # the way to run without it
    assert not (rec / "tui").exists()
    assert _peer(relay, "codex-a")["active"] is False


@pytest.mark.one_backend
def test_an_app_server_that_never_listens_is_stopped_after_the_bound(tmp_path):
    from relay_cli.agents import codex_server

    env, rec = _fake_codex_with_server(tmp_path)
    server = codex_server.AppServer(str(tmp_path / "bin" / "codex"), [])
    address = server.prepare()
    full_env = {**os.environ, **env, "FAKE_SERVER": "mute"}
    t0 = time.monotonic()
    with pytest.raises(codex_server.CannotListen, match="did not listen on"):
        server.start(
            full_env, signal.pthread_sigmask(signal.SIG_BLOCK, ()), lambda: [], timeout=1.0
        )
    assert time.monotonic() - t0 < 10
    _wait_for(rec / "server")
    pid = json.loads((rec / "server").read_text())["pid"]
    server.stop()
    assert (rec / "server-stopped").exists()
    assert not os.path.exists(os.path.dirname(address[len("unix://") :]))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "args, tui",
    [
        ([], True),
        (["fix the bug"], True),
        (["-m", "o3", "exec"], False),
        (["-m", "o3"], True),
        (["--model=o3", "explain"], True),
        (["--", "exec"], True),
        (["exec", "hi"], False),
        (["e", "hi"], False),
        (["-c", "a=1", "resume"], False),
        (["app-server", "daemon", "start"], False),
        (["--help"], False),
        (["-V"], False),
        (["--config=a=1", "queue"], False),
        (["-i", "a.png", "b.png", "--", "x"], True),
    ],
)
def test_which_codex_command_lines_start_the_interactive_tui(args, tui):
    from relay_cli.agents import codex_server

    assert codex_server.is_tui(args) is tui


def test_codex_with_a_remote_server_is_refused_and_joins_nothing(relay, tmp_path):
    env, out = _fake_codex(tmp_path)
    relay("peers", "add", "alice")
    before = relay.snapshot()
    r = relay.proc(
        "run", "--as", "codex-a", "--", "codex", "--remote", "ws://127.0.0.1:9", "--json", env=env
    )
    assert r.code == 2 and "usage_error" in r.err and not out.exists()
    assert relay.snapshot() == before


# ---------------------------------------------------------------- a killed relay run
def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _short_tmp(tmp_path: Path) -> Path:
    """A base for the private directory that keeps the socket path short."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
    (tmp_path / "short-tmp").write_text(str(base))
    return base


def test_a_sigkill_of_relay_run_leaves_no_codex_server_child_or_directory(relay, tmp_path):
    """design.md §12: nothing a killed run started outlives it. The server got SIGTERM
    from the kernel when relay died, but what it started in its group survived, and its
    private directory stayed; relay's watchdog now stops the group and removes it."""
    import shutil

    env, rec = _fake_codex_with_server(tmp_path)
    base = _short_tmp(tmp_path)
    env = {**env, "FAKE_SERVER": "child", "FAKE_TUI_WAIT": "1", "XDG_RUNTIME_DIR": str(base)}
    p = relay.popen("run", "--as", "codex-k", "--", "codex", env=env)
    child = server = None
    try:
        _wait_for(rec / "tui")
        found = json.loads((rec / "server").read_text())
        server, child = found["pid"], found["child"]
        directory = Path(
            json.loads((rec / "tui").read_text())["env"]["RELAY_CODEX_REMOTE"][len("unix://") :]
        ).parent
        assert directory.parent == base and directory.is_dir()
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        end = time.monotonic() + 15
        while time.monotonic() < end and not (
            _gone(server) and _gone(child) and not directory.exists()
        ):
            time.sleep(0.05)
        assert _gone(server), "the app server outlived relay"
        assert _gone(child), "what the app server started outlived relay"
        assert not directory.exists(), "the private directory stayed"
    finally:
        for pid in (child, server):
            if pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        tui = json.loads((rec / "tui").read_text())["pid"] if (rec / "tui").exists() else None
        if tui is not None:
            with contextlib.suppress(OSError):
                os.kill(tui, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def test_a_stale_codex_directory_is_named_by_doctor_and_removed_by_the_next_run(relay, tmp_path):
    """A directory whose relay run is gone (its watchdog was killed too) is relay's own
    only when it is a real directory owned by this user with relay's name: doctor names
    it, the next `relay run` of Codex removes it and stops the server still running
    there; a symlink and another user's directory are left alone."""
    import shutil

    from relay_cli.core.process import pid_namespace, process_start

    env, rec = _fake_codex_with_server(tmp_path)
    base = _short_tmp(tmp_path)
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        orphan = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], process_group=0)
        stale = base / "relay-codex-abcd1234"
        stale.mkdir(mode=0o700)
        (stale / "app-server.log").write_text("old")
        (stale / "owner").write_text(
            json.dumps(
                {
                    "relay": [dead.pid, "gone:1", pid_namespace()],
                    "server": [orphan.pid, process_start(orphan.pid)],
                }
            )
        )
        target = tmp_path / "not-relays"
        target.mkdir()
        (target / "keep").write_text("x")
        (base / "relay-codex-link1234").symlink_to(target)
        theirs = base / "relay-codex-them1234"
        theirs.mkdir(mode=0o700)
        (theirs / "owner").write_text((stale / "owner").read_text())
        os.chown(theirs, 65534, 65534)
        live = base / "relay-codex-live1234"
        live.mkdir(mode=0o700)
        (live / "owner").write_text(
            json.dumps({"relay": [os.getpid(), process_start(os.getpid()), pid_namespace()]})
        )

        r = relay("doctor", "--json", env={"XDG_RUNTIME_DIR": str(base)})
        checks = [c for c in r.json["checks"] if c["name"] == "codex_dirs"]
        assert len(checks) == 1 and checks[0]["status"] == "warn", r.out
        assert str(stale) in checks[0]["detail"] and str(live) not in checks[0]["detail"]
        assert "link1234" not in checks[0]["detail"] and "them1234" not in checks[0]["detail"]
        assert stale.exists()  # doctor changes nothing

        r = relay.proc(
            "run", "--as", "codex-n", "--", "codex", env={**env, "XDG_RUNTIME_DIR": str(base)}
        )
        assert r.code == 0, r.err
        assert not stale.exists()
        orphan.wait(timeout=10)  # its server was stopped
        assert live.exists() and theirs.exists()
        assert (base / "relay-codex-link1234").is_symlink() and (target / "keep").exists()
        r = relay("doctor", "--json", env={"XDG_RUNTIME_DIR": str(base)})
        assert not [
            c for c in r.json["checks"] if c["name"] == "codex_dirs" and str(base) in c["detail"]
        ]
    finally:
        with contextlib.suppress(Exception):
            orphan.kill()
        shutil.rmtree(base, ignore_errors=True)
