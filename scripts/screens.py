#!/usr/bin/env python3
"""Build a busy relay home and capture what a person sees, as text, at a given terminal size.

    python scripts/screens.py OUTDIR [--cols 80] [--rows 24] [--home PATH]

The home (a fresh temporary directory unless --home names an empty one) gets peers with
long names of every kind, requests in every state (two of them delivery_unknown, one
with a ten-event history), a session whose lease lapses while it holds claimed work, and
`relay once` entries: succeeded, failed, awaiting approval and effect_unknown (a relay
process killed together with its command). Its history is laid out over the last two
hours with RELAY_TIME_OFFSET, so ages read as they would on a real day; the screens
themselves are taken on the real clock.

Each screen runs the real `relay` (this checkout, `python -m relay_cli`) in a tmux pane
of COLSxROWS (TERM=xterm-256color) and is saved as OUTDIR/<name>.txt: everything the
pane printed, scrollback included; for `watch` (full screen) the screen as drawn.
Screens: doctor (first: it applies no due transitions, so it still sees the lapsed
session), list, show --events, peers list, ledger list, inbox, watch, watch under
TERM=dumb in the same terminal, and `watch` piped (watch-piped.txt). Needs tmux.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELAY = [sys.executable, "-m", "relay_cli"]

CLAUDE = "claude-frontend-refactor"
CODEX = "codex-backend-migrations-runner-eu-west"
GEMINI = "gemini-docs-reviewer"
AIDER = "aider-pair-programmer"
SCRIPT = "nightly-integration-check-script"
PERSON = "ana"
TEMP = "scratch-runner-temporary"
LAPSING = "claude-review-bot-lapsing"


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tokens: dict[str, str] = {}

    def env(self, offset: float | None = None, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("RELAY_") and k not in ("NO_COLOR", "FORCE_COLOR")
        }
        env["RELAY_HOME"] = str(self.path)
        env["PYTHONPATH"] = str(ROOT)
        if offset is not None:
            env["RELAY_TIME_OFFSET"] = str(-offset)
        env.update(extra)
        return env

    def run(
        self,
        ago: float,
        *args: str,
        who: str | None = None,
        input: str = "",
        ok: tuple[int, ...] = (0,),
    ) -> dict | str:
        """`relay ARGS` as if it ran ``ago`` seconds before now, as peer ``who``."""
        env = self.env(ago)
        if who is not None:
            env["RELAY_PEER"] = who
            if who in self.tokens:
                env["RELAY_SESSION"] = self.tokens[who]
        p = subprocess.run(
            [*RELAY, *args], input=input.encode(), capture_output=True, env=env, cwd=ROOT
        )
        if p.returncode not in ok:
            raise SystemExit(f"relay {' '.join(args)} exited {p.returncode}:\n{p.stderr.decode()}")
        out = p.stdout.decode()
        return json.loads(out) if "--json" in args and out.strip() else out

    def join(self, ago: float, name: str, kind: str, lease: str = "3h") -> None:
        self.tokens[name] = self.run(
            ago, "peers", "join", name, "--kind", kind, "--lease", lease, "--json"
        )["token"]

    def send(self, ago: float, sender: str, to: str, text: str, *extra: str) -> str:
        rid = str(uuid.uuid4())
        self.run(
            ago, "send", "--to", to, "--id", rid, *extra, "--json", "-", who=sender, input=text
        )
        return rid

    def in_terminal(self, ago: float, *args: str) -> None:
        """A person's act (resolve): run with a terminal as stdin, as a person would."""
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(sys.executable, [*RELAY, *args], self.env(ago))
        out = b""
        while True:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                break
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
            if b"[y/N]" in out or b"(y/n)" in out.lower():  # a confirmation question
                os.write(fd, b"y\n")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"relay {' '.join(args)} in a terminal failed:\n{out.decode()}")


def build(home: Home) -> dict[str, str]:
    """The busy home. Returns the ids worth looking at."""
    h = home
    for name, kind in (
        (CLAUDE, "claude"),
        (CODEX, "codex"),
        (GEMINI, "gemini"),
        (AIDER, "aider"),
        (SCRIPT, "script"),
    ):
        h.join(7200, name, kind)
    h.run(7200, "peers", "add", PERSON, "--kind", "human")
    h.run(7200, "peers", "add", TEMP, "--kind", "script")

    ids: dict[str, str] = {}
    # completed
    ids["completed"] = rid = h.send(6000, CLAUDE, CODEX, "Add an index on orders.created_at.")
    h.run(5900, "claim", "--id", rid, "--json", who=CODEX)
    h.run(5890, "ack", rid, "--json", who=CODEX)
    h.run(5000, "reply", rid, "--json", "-", who=CODEX, input="Done: migration 0042.")
    # failed, with a long reason
    ids["failed"] = rid = h.send(4000, GEMINI, CODEX, "Rename the orders.state column.")
    h.run(3990, "claim", "--id", rid, "--json", who=CODEX)
    h.run(
        3900,
        "fail",
        rid,
        "--reason",
        "the migration needs a lock on the orders table that "
        "production holds during business hours; retry after 18:00 UTC",
        "--json",
        who=CODEX,
    )
    # rejected
    ids["rejected"] = rid = h.send(3800, CODEX, CLAUDE, "Rewrite the login page in Svelte.")
    h.run(3790, "claim", "--id", rid, "--json", who=CLAUDE)
    h.run(3780, "reject", rid, "--reason", "out of scope for this session", "--json", who=CLAUDE)
    # expired
    ids["expired"] = h.send(3700, CLAUDE, AIDER, "Pair on the flaky test.", "--ttl", "30s")
    h.run(3600, "sweep")
    # cancelled
    ids["cancelled"] = rid = h.send(3500, CLAUDE, GEMINI, "Proofread CHANGELOG.md.")
    h.run(3400, "cancel", rid, "--json", who=CLAUDE)
    # delivery_unknown: the claim lease lapsed before ack
    ids["unknown_lease"] = rid = h.send(3000, CLAUDE, CODEX, "Backfill the audit table.")
    h.run(2990, "claim", "--id", rid, "--lease", "10s", "--json", who=CODEX)
    h.run(2900, "sweep")
    # delivery_unknown: the claiming session left
    h.join(2800, TEMP, "script", lease="1h")
    ids["unknown_left"] = rid = h.send(2790, SCRIPT, TEMP, "Regenerate the fixtures.")
    h.run(2780, "claim", "--id", rid, "--json", who=TEMP)
    h.run(2500, "peers", "leave", "--json", who=TEMP)
    # a long history: redelivered, reply deadline elapsed, requeued by a person, completed
    ids["history"] = rid = h.send(
        2400,
        CLAUDE,
        CODEX,
        "Run the nightly data check.",
        "--on-lost",
        "redeliver",
        "--reply-within",
        "5m",
    )
    h.run(2390, "claim", "--id", rid, "--lease", "10s", "--json", who=CODEX)
    h.run(2300, "sweep")
    h.run(2200, "claim", "--id", rid, "--json", who=CODEX)
    h.run(2190, "ack", rid, "--json", who=CODEX)
    h.run(1800, "sweep")
    h.in_terminal(
        1700,
        "resolve",
        rid,
        "--outcome",
        "requeue",
        "--note",
        "checked the job log: it never started",
    )
    h.run(1600, "claim", "--id", rid, "--json", who=CODEX)
    h.run(1590, "ack", rid, "--json", who=CODEX)
    h.run(1500, "reply", rid, "--json", "-", who=CODEX, input="All 14 checks pass.")
    # open work: acknowledged, delivered, queued
    ids["acknowledged"] = rid = h.send(
        900, CLAUDE, CODEX, "Review PR 1234.", "--reply-within", "2h"
    )
    h.run(890, "claim", "--id", rid, "--json", who=CODEX)
    h.run(880, "ack", rid, "--json", who=CODEX)
    ids["delivered"] = rid = h.send(700, CLAUDE, GEMINI, "Document the new flags.")
    h.run(690, "claim", "--id", rid, "--lease", "1h", "--json", who=GEMINI)
    ids["queued"] = h.send(600, GEMINI, CLAUDE, "Check the README examples still run.")
    h.send(300, PERSON, CODEX, "Plan the database upgrade. " * 40)
    h.send(120, SCRIPT, AIDER, "The nightly check found 3 flaky tests.", "--ttl", "2h")
    # the side-effect ledger
    h.run(1000, "once", "--key", "pr-create-frontend-1234", "--", "true")
    h.run(950, "once", "--key", "email-weekly-report", "--", "false", ok=(1,))
    h.run(
        200,
        "once",
        "--approve",
        "--timeout",
        "0",
        "--key",
        "deploy-production-2026-11-29",
        "--",
        "./deploy.sh",
        "--env",
        "production",
        "--tag",
        "v2.14.0",
        ok=(75,),
    )
    _crashed_once(h, "migrate-orders-table", ["sleep", "300"])
    # last: a session whose lease lapses a few seconds from now while it holds claimed work
    h.join(8, LAPSING, "claude", lease="10s")
    ids["lapsing"] = rid = h.send(8, CLAUDE, LAPSING, "Look at the failing e2e test.")
    h.run(8, "claim", "--id", rid, "--lease", "1h", "--json", who=LAPSING)
    time.sleep(3)  # its 10 s lease (begun 8 s ago) lapses
    return ids


def _crashed_once(h: Home, key: str, argv: list[str]) -> None:
    """`relay once` killed together with its command: the entry is effect_unknown."""
    p = subprocess.Popen(
        [*RELAY, "once", "--key", key, "--", *argv],
        env=h.env(400),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        entry = h.run(0, "ledger", "show", key, "--json", ok=(0, 3))
        if isinstance(entry, dict) and entry.get("child_pid"):
            break
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


class Pane:
    """One tmux server with one pane of the given size."""

    def __init__(self, cols: int, rows: int) -> None:
        self.socket = f"relay-screens-{os.getpid()}"
        self.cols, self.rows = cols, rows
        self.n = 0
        # a session that lives as long as the server, so it never exits between screens
        self.tmux("new-session", "-d", "-s", "keep", "sleep 3600")

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def capture(
        self, home: Home, command: str, full_screen: bool = False, env: dict[str, str] | None = None
    ) -> str:
        self.n += 1
        name = f"s{self.n}"
        exports = " ".join(
            f"{k}={shlex.quote(v)}"
            for k, v in {**home.env(), "TERM": "xterm-256color", **(env or {})}.items()
            if k
            in (
                "RELAY_HOME",
                "PYTHONPATH",
                "TERM",
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "NO_COLOR",
                "FORCE_COLOR",
                "TZ",
            )
        )
        script = (
            f"stty cols {self.cols} rows {self.rows}; env {exports} "
            f"{shlex.quote(sys.executable)} -m relay_cli {command}; "
            'rc=$?; echo; echo "[exit $rc]"; sleep 600'
        )
        self.tmux(
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            str(self.cols),
            "-y",
            str(self.rows),
            "-c",
            str(ROOT),
            f"bash -c {shlex.quote(script)}",
        )
        self.tmux("set-option", "-t", name, "history-limit", "5000")
        deadline = time.monotonic() + (6 if full_screen else 30)
        while True:
            time.sleep(0.3)
            screen = self.tmux("capture-pane", "-p", "-t", name)
            if full_screen and ("relay watch" in screen or time.monotonic() > deadline):
                time.sleep(1.0)  # let it settle; a blank screen after 6 s is what it shows
                screen = self.tmux("capture-pane", "-p", "-S", "-5000", "-t", name)
                self.tmux("send-keys", "-t", name, "q")
                break
            if not full_screen and "[exit " in screen:
                screen = self.tmux("capture-pane", "-p", "-S", "-5000", "-t", name)
                screen = screen[: screen.rindex("[exit ")].rstrip("\n") + "\n"
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"relay {command}: did not finish within 30 s")
        self.tmux("kill-session", "-t", name)
        return screen.rstrip("\n") + "\n"

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def capture(home: Home, ids: dict[str, str], outdir: Path, cols: int, rows: int) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    pane = Pane(cols, rows)
    screens = [
        ("doctor", "doctor", False),
        ("list", "list", False),
        ("show-events", f"show {ids['history']} --events", False),
        ("peers-list", "peers list", False),
        ("ledger-list", "ledger list", False),
        ("inbox", f"inbox --as {CODEX}", False),
        ("watch", "watch", True),
    ]
    dumb_screen = ("watch-term-dumb-terminal", "watch", True)
    try:
        for name, command, full in screens:
            text = pane.capture(home, command, full_screen=full)
            (outdir / f"{name}.txt").write_text(f"$ relay {command}\n{text}")
            print(f"{name}: {len(text.splitlines())} lines", file=sys.stderr)
        name, command, full = dumb_screen
        text = pane.capture(home, command, full_screen=full, env={"TERM": "dumb"})
        (outdir / f"{name}.txt").write_text(
            f"$ TERM=dumb relay {command}   (in a terminal)\n{text}"
        )
        dumb = subprocess.run(
            [*RELAY, "watch"], capture_output=True, text=True, cwd=ROOT, env=home.env()
        )
        (outdir / "watch-piped.txt").write_text(f"$ relay watch | cat\n{dumb.stdout}{dumb.stderr}")
    finally:
        pane.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--cols", type=int, default=80)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--home", type=Path, help="an empty or missing directory to build in")
    ap.add_argument(
        "--again",
        action="store_true",
        help="capture from the --home an earlier run built (no new history)",
    )
    args = ap.parse_args()
    path = args.home or Path(tempfile.mkdtemp(prefix="relay-screens-")) / "home"
    home = Home(path.resolve())
    ids_file = home.path.parent / f"{home.path.name}.ids.json"
    if args.again:
        ids = json.loads(ids_file.read_text())
    else:
        ids = build(home)
        ids_file.write_text(json.dumps(ids))
    capture(home, ids, args.outdir, args.cols, args.rows)
    print(f"home: {home.path}\nscreens: {args.outdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
