"""The README works as written (design.md §14): its commands are run, so it cannot drift.

Marker convention: a shell block the tests run is preceded by a line
``<!-- relay-test: ROLE -->``. ROLE ``install`` is the first command (install and
`relay demo`), ``path`` puts relay on PATH, ``tests`` runs the test suite; ``A`` and
``B`` are the two terminals of the walkthrough and ``person`` is what the person types
at a terminal. The walkthrough's blocks run in the README's order in two interactive
bash shells on real pseudo-terminals that share one HOME (so one ``~/relay-walkthrough``),
each block after every earlier block has finished — except a block with
``relay claim --wait``, which keeps waiting while the other terminal goes on (and is
awaited before its own terminal's next block), exactly as in two tmux panes.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import plain

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKED = re.compile(r"<!-- relay-test: (\w+) -->\n```sh\n(.*?)```", re.S)
BIN = Path(sys.executable).parent  # this environment's `relay`
REVIEW = "7d8e2f4a-1b3c-4d5e-8f90-a1b2c3d4e5f6"
MIGRATION = "2c9b7e1d-5a4f-4c3b-9d2e-8f7a6b5c4d3e"


def blocks(role: str | None = None) -> list[tuple[str, str]]:
    found = MARKED.findall(README.read_text())
    return [(r, body) for r, body in found if role is None or r == role]


def test_readme_front_page_is_short_and_marks_its_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    roles = [r for r, _ in blocks()]
    assert roles[:4] == ["install", "path", "tests", "agents"]
    assert set(roles[4:]) == {"A", "B", "person"}
    assert text.count("<!-- relay-test:") == len(roles)  # every marker has its block


def test_first_command_installs_relay_and_runs_the_demo():
    ((_, body),) = blocks("install")
    assert body.strip() == (
        "python3 -m venv ~/.relay-venv && ~/.relay-venv/bin/pip install "
        ". && ~/.relay-venv/bin/relay demo"
    )


def test_second_command_runs_the_tests_as_ci_does():
    ((_, body),) = blocks("tests")
    assert body.strip().endswith("&& .venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\npython -m pytest\n" in ci
    # both backends: the driver is installed here and in CI (design.md §13)
    assert "pip install -e '.[test,postgres]'" in body and "postgres]'" in ci


def test_agent_setup_commands_exist_as_written(tmp_path):
    """Each `relay hook install` line runs (as a dry run, in an empty HOME); each other
    relay command line names a command relay has."""
    ((_, body),) = blocks("agents")
    env = {**_clean_env(), "HOME": str(tmp_path)}
    for line in body.splitlines():
        command = line.split("#")[0].strip()
        if command.startswith("relay hook install "):
            p = subprocess.run(
                ["bash", "-c", command + " --dry-run"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert p.returncode == 0, (command, p.stderr)
        elif command.startswith("relay "):
            words = command.split(">>")[0].split()
            sub = words[1 : words.index("--") if "--" in words else len(words)]
            p = subprocess.run(
                ["relay", *[w for w in sub if not w.startswith("-")][:1], "--help"],
                capture_output=True,
                text=True,
                env=env,
            )
            assert p.returncode == 0, (command, p.stderr)
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing


def test_the_demo_part_of_the_first_command_runs_as_written(tmp_path):
    """`~/.relay-venv/bin/relay demo`, literally, with this environment as ~/.relay-venv."""
    ((_, body),) = blocks("install")
    demo = body.strip().split(" && ")[-1]
    home = tmp_path / "home"
    (home / ".relay-venv").mkdir(parents=True)
    (home / ".relay-venv" / "bin").symlink_to(BIN)
    p = subprocess.run(
        ["bash", "-c", demo],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_clean_env(), "HOME": str(home), "TMPDIR": str(tmp_path)},
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert "already sent, nothing new queued" in p.stdout
    assert "\tcompleted\talice\tbob\t" in p.stdout  # the list, tab-separated when piped


@pytest.mark.skipif(
    os.environ.get("RELAY_SLOW_TESTS") != "1",
    reason="slow (a venv and a pip install): set RELAY_SLOW_TESTS=1",
)
def test_first_command_as_written_in_a_fresh_home(tmp_path):
    ((_, body),) = blocks("install")
    p = subprocess.run(
        ["bash", "-c", body],
        capture_output=True,
        text=True,
        timeout=900,
        env={**_clean_env(), "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "already sent, nothing new queued" in p.stdout


def _clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RELAY_")
        and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


# ------------------------------------------------------------------ two terminals
class Terminal:
    """An interactive bash on a real 80x24 pseudo-terminal, fed one block at a time."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.n = 0
        self.pending: str | None = None
        self.block: str | None = None
        self.outputs: list[tuple[str, int, str]] = []
        self.run("stty -echo; PS1=''; PS2=''; unset PROMPT_COMMAND")
        self.wait()

    def run(self, block: str) -> None:
        assert self.pending is None
        self.n += 1
        self.pending = f"__block_{self.name}_{self.n}__"
        self.block = block
        script = block.rstrip("\n") + f"\nprintf '\\n{self.pending} %s\\n' \"$?\"\n"
        os.write(self.fd, script.encode())

    def wait(self, timeout: float = 90) -> tuple[int, str]:
        """Until the pending block finished: (its exit status, what it printed)."""
        if self.pending is None:
            return 0, ""
        done = re.compile(rf"{self.pending} (\d+)\r?\n".encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while not done.search(buf):
            left = deadline - time.monotonic()
            assert left > 0, (
                f"terminal {self.name}: block did not finish:\n{self.block}\n"
                f"output so far:\n{buf.decode(errors='replace')}"
            )
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                buf += os.read(self.fd, 65536)
        m = done.search(buf)
        out = plain(buf[: m.start()].decode(errors="replace"))
        status = int(m.group(1))
        self.outputs.append((self.block, status, out))
        self.pending = None
        return status, out

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        os.close(self.fd)


def test_walkthrough_runs_as_written_in_two_terminals(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {**_clean_env(), "HOME": str(home), "TERM": "xterm-256color"}
    terminals = {name: Terminal(name, env, home) for name in ("A", "B")}
    try:
        ((_, path),) = blocks("path")
        for t in terminals.values():
            t.run(path)
            assert t.wait()[0] == 0
        for role, body in blocks():
            if role not in ("A", "B", "person"):
                continue
            t = terminals["A" if role == "person" else role]  # the person types in A
            for other in terminals.values():  # a person finishes one step before the next
                if other is t or "relay claim --wait" not in (other.block or ""):
                    status, out = other.wait()
                    assert status == 0, f"{other.name} exited {status}:\n{other.block}\n{out}"
            lines = body.splitlines(keepends=True)
            waits = [i for i, ln in enumerate(lines) if ln.startswith("relay claim --wait")]
            if waits and waits[0] > 0:  # what comes before the blocking claim is awaited
                t.run("".join(lines[: waits[0]]))
                status, out = t.wait()
                assert status == 0, f"{t.name} exited {status}:\n{t.block}\n{out}"
                body = "".join(lines[waits[0] :])
            t.run(body)
        for t in terminals.values():
            status, out = t.wait()
            assert status == 0, f"terminal {t.name} exited {status}:\n{t.block}\n{out}"
        outputs = {name: t.outputs for name, t in terminals.items()}
        for name, done in outputs.items():  # no command of any block failed
            for block, _, out in done:
                assert "relay: error" not in out, f"terminal {name}:\n{block}\n{out}"
    finally:
        for t in terminals.values():
            t.close()

    # what the person saw, step by step
    b_claim = next(out for block, _, out in outputs["B"] if "relay claim --wait" in block)
    assert "NOT user approval" in b_claim and "Please review the diff" in b_claim
    # the claim says by when to ack, as the walkthrough's text says it will
    assert re.search(r"ack by in (9|10)m \(\d\d:\d\d\)", " ".join(b_claim.split())), b_claim
    resend = [out for block, _, out in outputs["A"] if f"--id {REVIEW}" in block][1]
    assert resend.lstrip().startswith("already sent, nothing new queued")
    assert re.search(r"duplicate\s+yes", resend) and re.search(r"state\s+completed", resend)
    unknown = next(out for block, _, out in outputs["A"] if "--state delivery_unknown" in block)
    assert MIGRATION[:8] in unknown and "recipient_disconnected" in unknown
    left = next(out for block, _, out in outputs["B"] if "relay peers leave" in block)
    assert MIGRATION[:8] in left and "delivery_unknown" in left  # leave names the work

    # and what relay recorded
    relay_home = home / "relay-walkthrough"
    listed = subprocess.run(
        [sys.executable, "-m", "relay_cli", "list", "--json"],
        capture_output=True,
        text=True,
        env={**_clean_env(), "RELAY_HOME": str(relay_home)},
    )
    states = {r["id"]: (r["state"], r["reason"]) for r in json.loads(listed.stdout)["requests"]}
    assert states == {REVIEW: ("completed", None), MIGRATION: ("failed", "resolved_by_human")}
    shown = subprocess.run(
        [sys.executable, "-m", "relay_cli", "show", MIGRATION, "--events", "--json"],
        capture_output=True,
        text=True,
        env={**_clean_env(), "RELAY_HOME": str(relay_home)},
    )
    events = json.loads(shown.stdout)["events"]
    assert [e["to_state"] for e in events] == ["queued", "delivered", "delivery_unknown", "failed"]
    assert events[-1]["actor"].startswith("person:")
    assert events[-1]["detail"] == "bob left before starting; nothing ran"
