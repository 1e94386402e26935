"""`relay demo`: the main job, end to end, with two real peer processes (design.md §14).

In a throwaway home, peer ``alice`` sends a request with an id it chose to peer ``bob``,
who is already waiting for work in its own `relay claim --wait` process; bob acknowledges
and replies while alice's `relay wait` process blocks; then alice's answer is "lost"
and alice sends again, the same id and text, and relay answers ``duplicate: true``:
already sent, nothing new queued. Each step is a real `relay` subprocess running the
command it narrates (plus ``--json``, so the demo can read the answer); at the end
`relay list` and `relay show ID --events` print their tables. Nothing here touches the
person's own relay home.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from ..core.errors import RelayError
from ..core.record import field, record

if TYPE_CHECKING:
    from ..core.output import JsonObject

TEXT = "Summarise the open TODO comments in src/ and reply with a list.\n"
REPLY = "3 TODOs: src/login.py:42 (retry), src/api.py:7 (paging), src/db.py:90 (index).\n"
WAIT = "30s"  # how long bob's claim and alice's wait may block (they return in well under 1 s)


@record
class Step:
    who: str
    argv: list[str]
    exit_code: int
    result: JsonObject | None = None  # the process's answer (--json)


@record
class Demo:
    """One run: the throwaway home, the request id, what each process answered."""

    home: Path
    # the environment of the call that runs the demo: its processes inherit it, but for
    # relay's own variables
    environ: Mapping[str, str] = field(default_factory=dict)
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    tokens: dict[str, str] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)

    def to_json(self, kept: bool) -> JsonObject:
        """What `relay demo --json` answers: the home, whether it was kept, the request
        id and each step's process, exit status and answer."""
        return {
            "home": str(self.home),
            "kept": kept,
            "id": self.request_id,
            "steps": [
                {"who": s.who, "argv": s.argv, "exit_code": s.exit_code, "result": s.result}
                for s in self.steps
            ],
        }

    def env(self, who: str | None) -> dict[str, str]:
        env = {
            k: v
            for k, v in self.environ.items()
            if k
            not in (
                "RELAY_PEER",
                "RELAY_SESSION",
                "RELAY_TIME_OFFSET",
                "RELAY_DEBUG",
                "RELAY_DATABASE_URL",
            )
        }
        env["RELAY_HOME"] = str(self.home)
        if who is not None:
            env["RELAY_PEER"] = who
            if who in self.tokens:
                env["RELAY_SESSION"] = self.tokens[who]
        return env

    def start(self, who: str | None, *args: str, text: str | None = None) -> Running:
        """A real `relay ARGS` process acting as ``who`` (``--json``: its answer is parsed)."""
        p = subprocess.Popen(
            [sys.executable, "-m", "relay_cli", *args, "--json"],
            env=self.env(who),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdin = p.stdin
        assert stdin is not None  # stdin=PIPE
        if text is not None:
            stdin.write(text.encode())
        stdin.close()
        p.stdin = None  # written and closed: communicate() only reads
        return Running(p, who, list(args))

    def finish(self, running: Running, expect: int = 0) -> JsonObject:
        p = running.process
        out, err = p.communicate(timeout=120)
        step = Step(running.who or "-", ["relay", *running.args], p.returncode)
        self.steps.append(step)
        if p.returncode != expect:
            raise _step_error(running, err)
        step.result = json.loads(out) if out.strip() else None
        if not isinstance(step.result, dict):
            raise _step_error(running, err, "printed no JSON object")
        return step.result

    def run(
        self, who: str | None, *args: str, text: str | None = None, expect: int = 0
    ) -> JsonObject:
        return self.finish(self.start(who, *args, text=text), expect)


class Say(Protocol):
    """How the demo narrates: ``say(kind, text, who)`` (``run``)."""

    def __call__(self, kind: str, text: str, who: str | None = None) -> None: ...


@record
class Running:
    """A step's `relay` process while it runs, with what the narration says of it."""

    process: subprocess.Popen[bytes]
    who: str | None
    args: list[str]


def _step_error(running: Running, err: bytes, what: str | None = None) -> RelayError:
    """Why a demo step failed: the step's own error (e.g. ``unsafe_state_dir`` for a
    --home relay refuses), passed on with its code; anything else is relay's bug."""
    p = running.process
    step = f"demo step `relay {' '.join(running.args)}`"
    if what is not None:
        return RelayError("internal_error", f"{step} {what}")
    for line in err.decode(errors="replace").splitlines():
        try:
            e = json.loads(line)["error"]
            return RelayError(e["code"], f"{step}: {e['message']}")
        except (ValueError, KeyError, TypeError):
            continue
    return RelayError(
        "internal_error", f"{step} exited {p.returncode}: {err.decode(errors='replace').strip()}"
    )


def throwaway_home() -> Path:
    """A fresh directory for the demo's home (relay creates it, mode 0700)."""
    return Path(tempfile.mkdtemp(prefix="relay-demo-")) / "home"


def home_for(home: str | None) -> Path:
    """The demo's home: ``--home`` when it names an empty or missing directory (the demo
    never uses a home that holds data: ``usage_error``), else a throwaway one."""
    if home is None:
        return throwaway_home()
    path = Path(home).resolve()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise RelayError(
            "usage_error",
            f"--home {home}: the demo needs an empty or missing "
            "directory (it never uses a home that holds data)",
        )
    return path


def run(home: Path, say: Say, environ: Mapping[str, str]) -> Demo:
    """The demo, step by step, its processes run in ``environ`` (the call's, but for
    relay's own variables). ``say(kind, text, who)`` narrates: ``step`` (what happens
    next), ``cmd`` (the command that runs now, as a person would type it, and which peer
    runs it), ``result`` (what relay answered)."""
    d = Demo(home, environ)
    rid = d.request_id

    def cmd(who: str, *args: str, text: str | None = None) -> Running:
        say("cmd", "relay " + shlex.join(args) + (" <<'EOF' ... EOF" if text else ""), who)
        return d.start(who, *args, text=text)

    say("step", "Two peers join, each with its own session: alice sends work, bob does it.")
    for name in ("alice", "bob"):
        d.tokens[name] = d.finish(
            cmd(name, "peers", "join", name, "--kind", "script", "--lease", "5m")
        )["token"]

    say("step", "bob waits for work: its `claim --wait` blocks until a request arrives.")
    claim = cmd("bob", "claim", "--wait", WAIT)

    say("step", "alice sends a request with an id it chose, so that a retry is safe.")
    sent = d.finish(cmd("alice", "send", "--to", "bob", "--id", rid, "-", text=TEXT))
    say("result", f"state {sent['state']}, duplicate: {_yes(sent['duplicate'])}")
    claimed = d.finish(claim)
    say(
        "result",
        f"bob's claim returned with the text: state {claimed['state']} (a session "
        "of bob took it; that says nothing about whether anyone read it)",
    )

    say("step", "alice waits for the outcome in its own process.")
    short = rid[:8]  # an existing request is named by its first 8 characters too
    waiting = cmd("alice", "wait", short, "--timeout", WAIT)

    say("step", "bob confirms it has read the request, then replies.")
    acked = d.finish(cmd("bob", "ack", short))
    say("result", f"state {acked['state']} (read; that says nothing about work done)")
    replied = d.finish(cmd("bob", "reply", short, "-", text=REPLY))
    say("result", f"state {replied['state']}")
    done = d.finish(waiting)
    say("result", f"alice's wait returned: state {done['state']}, exit 0")

    say(
        "step",
        "The answer to alice's send was lost (say, its tool runner timed out), so "
        "alice sends again: the same id, the same text.",
    )
    again = d.finish(cmd("alice", "send", "--to", "bob", "--id", rid, "-", text=TEXT))
    if not again["duplicate"]:
        raise RelayError("internal_error", "the resend was not answered as a duplicate")
    say("result", f"duplicate: yes, state {again['state']}: already sent, nothing new queued")
    return d


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def relay_command(
    home: Path, *args: str, environ: Mapping[str, str], stdout: TextIO | None = None
) -> int:
    """`relay ARGS` on the demo's home, printing to ``stdout`` (the person's terminal), in
    ``environ`` (the call's) without relay's own variables."""
    env = {k: v for k, v in environ.items() if not k.startswith("RELAY_")}
    env["RELAY_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "relay_cli", *args], env=env, stdout=stdout, check=False
    ).returncode


def look_around(home: Path, url_given: bool) -> str:
    """The shell line that points relay at a kept demo home. The demo always runs on a
    relay.db of its own, so when this call names a database URL (``url_given``, design.md
    §13) the line empties RELAY_DATABASE_URL too; otherwise relay would go on reading that
    database."""
    line = f"export RELAY_HOME={shlex.quote(str(home))}"
    return line + " RELAY_DATABASE_URL=" if url_given else line


def remove(home: Path) -> None:
    shutil.rmtree(home.parent, ignore_errors=True)
