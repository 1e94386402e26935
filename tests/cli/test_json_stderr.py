"""With --json, stderr carries one line -- the error object -- on failure, and nothing on
success, on every path of every command (design.md §7).

The one parametrized test walks the live command tree (``relay_cli.cli.schema.walk``): a
command added without a case here fails it. Every asserted call runs the real `relay` in
its own process with real file descriptors (pipes; a pseudo-terminal where a person's act
or a waiting line needs one); setup runs in-process.

The exceptions are those design.md §7 names: `wait`'s exit 75 (the request object on
stdout and the `timeout` line on stderr), the bytes `once` and `run` pass through from the
command they run (the commands run here write nothing to stderr; their pass-through is
tested on its own below), and `relay hook RUNTIME` (every runtime of the table), which
speak the runtime's hook protocol (a waiter's exit 2 with relay's note on stderr).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import Relay, new_id

from relay_cli.agents.runtimes import NAMES as RUNTIMES
from relay_cli.core.errors import ERRORS

FIXTURES = Path(__file__).parents[1] / "fixtures"
ERROR_KEYS = {"code", "message", "hint", "retryable", "retry_after_seconds", "exit_code"}
RELAY = [sys.executable, "-m", "relay_cli"]
HANG = 30  # seconds: a call that has not ended by then is broken


def leaf_commands() -> list[str]:
    from relay_cli.cli import schema

    return [
        ctx.command_path.removeprefix("relay ")
        for ctx, cmd in schema.walk()
        if not hasattr(cmd, "list_commands")
    ]


# ------------------------------------------------------------------ running relay
@dataclass
class Ran:
    code: int
    out: str
    err: str
    tty: str  # what relay wrote to the pseudo-terminal (echo of typed input included)


class World:
    """A fresh home, with helpers that build the situation a case needs."""

    def __init__(self, path: Path, request=None) -> None:
        path.mkdir()
        self.path = path
        self.relay = Relay(path / "home")
        self.request = request  # pytest's, for a PostgreSQL database when a case needs one

    def run(
        self,
        *args: str,
        env: dict | None = None,
        input: str = "",
        tty_in: bool = False,
        typed: bytes = b"",
        tty_err: bool = False,
        cwd: Path | None = None,
    ) -> Ran:
        """The real `relay` in its own process. Standard input is a pipe holding ``input``
        (never the terminal pytest may run in), or a pseudo-terminal (``tty_in``) with
        ``typed`` already typed; stderr is a pipe, or that pseudo-terminal (``tty_err``)."""
        master = slave = None
        if tty_in or tty_err:
            master, slave = os.openpty()
            if typed:
                os.write(master, typed)
        try:
            p = subprocess.Popen(
                [*RELAY, *args],
                env=self.relay._env(env),
                cwd=cwd,
                stdin=slave if tty_in else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=slave if tty_err else subprocess.PIPE,
            )
            out, err = p.communicate(None if tty_in else input.encode(), timeout=HANG)
        finally:
            if slave is not None:
                os.close(slave)
        tty = b""
        if master is not None:
            try:
                while chunk := os.read(master, 65536):
                    tty += chunk
            except OSError:  # EIO: every end of the terminal is closed and it is drained
                pass
            os.close(master)
        return Ran(
            p.returncode,
            out.decode(),
            (err or b"").decode(),
            tty.decode(errors="replace").replace("\r\n", "\n"),
        )

    # -------------------------------------------------------------- situations
    def peers(self) -> tuple[dict, dict]:
        return self.relay.join("alice", "--lease", "1h"), self.relay.join("bob", "--lease", "1h")

    def sent(self) -> tuple[dict, dict, str]:
        alice, bob = self.peers()
        rid = new_id()
        assert self.relay.send(alice, "bob", "do it", request_id=rid).code == 0
        return alice, bob, rid

    def claimed(self) -> tuple[dict, dict, str]:
        alice, bob, rid = self.sent()
        assert self.relay("claim", "--id", rid, "--json", env=bob).code == 0
        return alice, bob, rid

    def unknown(self) -> str:
        """A request that became delivery_unknown: its claiming session left."""
        alice, bob, rid = self.claimed()
        assert self.relay("peers", "leave", env=bob).code == 0
        return rid

    def unsafe(self) -> None:
        """A home open to others: every command that opens it refuses (unsafe_state_dir)."""
        self.relay("peers", "add", "someone")
        self.relay.home.chmod(0o755)

    def awaiting(self, key: str = "k") -> None:
        r = self.relay("once", "--key", key, "--approve", "--timeout", "0", "--json", "--", "true")
        assert r.code == 75, r

    def empty_database(self) -> str:
        """The URL of a new, empty database on the session's PostgreSQL server (dropped
        when the test ends)."""
        cluster = self.request.getfixturevalue("pg_cluster")
        name, url = cluster.fresh(template="template0")
        self.request.addfinalizer(lambda: cluster.drop(name))
        return url

    def settings(self, text: str | None = None) -> dict:
        """Claude Code's settings in a directory of this world (optionally with ``text``)."""
        config = self.path / "claude"
        if text is not None:
            config.mkdir(exist_ok=True)
            (config / "settings.json").write_text(text)
        return {"CLAUDE_CONFIG_DIR": str(config)}

    def hook_session(self) -> tuple[dict, str]:
        """A Claude Code session whose SessionStart hook joined it (as the runtime does)."""
        env_file = self.path / "claude.env"
        env_file.touch()
        env = {"RELAY_PEER": "agent-1", "CLAUDE_ENV_FILE": str(env_file)}
        start = event("claude", "session_start")
        assert self.relay("hook", "claude", input=start, env=env).code == 0
        return env, json.loads(start)["session_id"]


def event(runtime: str, name: str, **changes) -> str:
    doc = json.loads((FIXTURES / runtime / f"{name}.json").read_text())
    doc.update(changes)
    return json.dumps(doc)


# ------------------------------------------------------------------ the cases
@dataclass
class Case:
    kind: str  # ok | refused | outcome | not_yet | protocol | silent
    fn: Callable[[World], Ran]
    code: str | None = None  # the error code of a refusal
    exit: int | None = None  # the exit status, when not the code's own (or 0)
    stdout: str = "document"  # document | optional | empty | any


CASES: dict[str, list[Case]] = {}


def case(
    command: str,
    kind: str,
    code: str | None = None,
    exit: int | None = None,
    stdout: str | None = None,
):
    default = {
        "ok": "document",
        "outcome": "document",
        "not_yet": "document",
        "refused": "optional",
        "protocol": "empty",
        "silent": "empty",
    }[kind]

    def register(fn):
        CASES.setdefault(command, []).append(Case(kind, fn, code, exit, stdout or default))
        return fn

    return register


# calls that need nothing set up first: (command, kind, error code, argv)
PLAIN = [
    ("id", "ok", None, ["id", "--json"]),
    ("id", "refused", "usage_error", ["id", "--json", "--nope"]),
    ("schema", "ok", None, ["schema", "--json"]),
    ("schema", "refused", "usage_error", ["schema", "--json", "--nope"]),
    ("guide", "ok", None, ["guide", "--for", "claude", "--json"]),
    ("guide", "refused", "usage_error", ["guide", "--for", "nobody", "--json"]),
    ("list", "refused", "usage_error", ["list", "--state", "nonsense", "--json"]),
    ("inbox", "refused", "no_identity", ["inbox", "--json"]),
    ("notices", "refused", "no_identity", ["notices", "--json"]),
    ("prune", "refused", "invalid_duration", ["prune", "--older-than", "soon", "--json"]),
    ("doctor", "refused", "usage_error", ["doctor", "--json", "--nope"]),
    ("run", "refused", "usage_error", ["run", "--json", "--", "true"]),
    ("peers join", "ok", None, ["peers", "join", "carol", "--kind", "claude", "--json"]),
    ("peers join", "refused", "invalid_name", ["peers", "join", "Not A Name", "--json"]),
    ("peers add", "ok", None, ["peers", "add", "carol", "--json"]),
    ("peers add", "refused", "invalid_name", ["peers", "add", "Carol", "--json"]),
    ("once", "ok", None, ["once", "--key", "k", "--json", "--", "true"]),
    ("ledger list", "refused", "usage_error", ["ledger", "list", "--state", "nonsense", "--json"]),
    # a read on a home that does not exist makes nothing and says so (design.md §2)
    ("ledger show", "refused", "storage_error", ["ledger", "show", "nothing-here", "--json"]),
]
for _command, _kind, _code, _argv in PLAIN:
    case(_command, _kind, _code)(lambda w, argv=_argv: w.run(*argv))


# requests
@case("send", "ok")
def _(w):
    alice, bob = w.peers()
    return w.run("send", "--to", "bob", "--id", new_id(), "--json", "-", input="hi", env=alice)


@case("send", "ok")
def _(w):  # without --id: the id a person is told about is the document's
    alice, bob = w.peers()
    return w.run("send", "--to", "bob", "--json", "hi", env=alice)


@case("send", "ok")
def _(w):  # a duplicate: "already sent" is the document's duplicate: true
    alice, bob, rid = w.sent()
    r = w.run("send", "--to", "bob", "--id", rid, "--json", "-", input="do it", env=alice)
    assert json.loads(r.out)["duplicate"] is True
    return r


@case("send", "refused", "unknown_peer")
def _(w):
    alice, bob = w.peers()
    return w.run("send", "--to", "nobody", "--json", "hi", env=alice)


@case("prepare", "ok")
def _(w):
    alice, bob = w.peers()
    return w.run("prepare", "--to", "bob", "--json", "hi", env=alice)


@case("prepare", "refused", "self_message")
def _(w):
    alice, bob = w.peers()
    return w.run("prepare", "--to", "alice", "--json", "hi", env=alice)


@case("submit", "ok")
def _(w):
    alice, bob = w.peers()
    draft = w.relay("prepare", "--to", "bob", "--json", "hi", env=alice).json["id"]
    return w.run("submit", draft, "--json", env=alice)


@case("submit", "refused", "prepared_not_found")
def _(w):
    alice, bob = w.peers()
    return w.run("submit", new_id(), "--json", env=alice)


@case("show", "ok")
def _(w):
    alice, bob, rid = w.sent()
    return w.run("show", rid[:8], "--events", "--json")


@case("show", "refused", "request_not_found")
def _(w):
    w.peers()
    return w.run("show", new_id(), "--json")


@case("list", "ok")
def _(w):
    w.sent()
    return w.run("list", "--json")


@case("wait", "ok")
def _(w):
    alice, bob, rid = w.claimed()
    assert w.relay("reply", rid, "done", env=bob).code == 0
    return w.run("wait", rid, "--json", env=alice)


@case("wait", "outcome", exit=10)
def _(w):
    alice, bob, rid = w.claimed()
    assert w.relay("fail", rid, "--reason", "no", env=bob).code == 0
    return w.run("wait", rid, "--json", env=alice)


@case("wait", "outcome", exit=11)
def _(w):
    return w.run("wait", w.unknown(), "--json")


@case("wait", "not_yet", "timeout")
def _(w):  # stderr on a terminal, where a person would be told what it waits for
    alice, bob, rid = w.sent()
    r = w.run("wait", rid, "--timeout", "1s", "--json", env=alice, tty_err=True)
    assert json.loads(r.out)["id"] == rid
    return Ran(r.code, r.out, r.tty, "")


@case("wait", "refused", "request_not_found")
def _(w):
    w.peers()
    return w.run("wait", new_id(), "--json")


@case("cancel", "ok")
def _(w):
    alice, bob, rid = w.sent()
    return w.run("cancel", rid, "--json", env=alice)


@case("cancel", "refused", "not_owner")
def _(w):
    alice, bob, rid = w.sent()
    return w.run("cancel", rid, "--json", env=bob)


@case("inbox", "ok")
def _(w):
    alice, bob, rid = w.sent()
    return w.run("inbox", "--json", env=bob)


@case("claim", "ok")
def _(w):
    alice, bob, rid = w.sent()
    return w.run("claim", "--json", env=bob)


@case("claim", "refused", "nothing_to_claim")
def _(w):  # stderr on a terminal, where a person would be told what it waits for
    alice, bob = w.peers()
    r = w.run("claim", "--wait", "1s", "--json", env=bob, tty_err=True)
    return Ran(r.code, r.out, r.tty, "")


@case("claim", "refused", "session_required")
def _(w):
    w.peers()
    return w.run("claim", "--json", "--as", "bob")


def _owned_act(command: str, *args: str):
    @case(command, "ok")
    def _(w):
        alice, bob, rid = w.claimed()
        return w.run(command, rid, *args, "--json", env=bob)

    @case(command, "refused", "not_owner")
    def _(w):
        alice, bob, rid = w.claimed()
        return w.run(command, rid, *args, "--json", env=alice)


_owned_act("ack")
_owned_act("reply", "done")
_owned_act("fail", "--reason", "no")
_owned_act("reject", "--reason", "no")


@case("resolve", "ok")
def _(w):
    return w.run("resolve", w.unknown(), "--outcome", "failed", "--json", tty_in=True)


@case("resolve", "refused", "approval_needs_terminal")
def _(w):
    return w.run("resolve", w.unknown(), "--outcome", "failed", "--json")


@case("notices", "ok")
def _(w):
    alice, bob, rid = w.claimed()
    assert w.relay("reply", rid, "done", env=bob).code == 0
    return w.run("notices", "--json", env=alice)


# operate
@case("sweep", "ok")
def _(w):
    w.sent()
    return w.run("sweep", "--json")


@case("sweep", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("sweep", "--json")


@case("prune", "ok")
def _(w):
    w.sent()
    return w.run("prune", "--json")


@case("prune", "ok")
def _(w):
    w.sent()
    return w.run("prune", "--dry-run", "--older-than", "0s", "--json")


@case("doctor", "ok")
def _(w):
    w.peers()
    return w.run("doctor", "--json")


@case("doctor", "ok")
def _(w):  # --fix on a home with loose modes: what it tightened is in the document
    w.unsafe()
    (w.relay.home / "relay.db").chmod(0o644)
    r = w.run("doctor", "--fix", "--json")
    assert json.loads(r.out)["fixed"], r.out
    assert stat.S_IMODE(w.relay.home.stat().st_mode) == 0o700
    return r


@case("doctor", "outcome", exit=7)
def _(w):  # a failing check is the report's answer (ok: false), not an error line
    w.unsafe()
    return w.run("doctor", "--json")


@case("watch", "ok")
def _(w):
    w.sent()
    return w.run("watch", "--json")


@case("watch", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("watch", "--json")


@case("web", "ok")
def _(w):  # it serves until interrupted: its address, then Ctrl-C ends it (design.md §17)
    w.sent()
    p = subprocess.Popen(
        [*RELAY, "web", "--no-open", "--json"],
        env=w.relay._env(None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = p.stdout.readline()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=HANG)
    assert json.loads(first)["url"].startswith("http://127.0.0.1:")
    return Ran(p.returncode, (first + out).decode(), err.decode(), "")


@case("web", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("web", "--no-open", "--json")


@case("web", "refused", "usage_error")
def _(w):
    return w.run("web", "--no-open", "--port", "0", "--json")


# the alert command (design.md §19)
@case("notify set", "ok")
def _(w):
    w.peers()
    return w.run("notify", "set", "--json", "--", "true")


@case("notify set", "refused", "usage_error")
def _(w):
    w.peers()
    return w.run("notify", "set", "--json")


@case("notify show", "ok")
def _(w):
    w.peers()
    return w.run("notify", "show", "--json")


@case("notify show", "refused", "storage_error")
def _(w):  # no home: nothing is made
    return w.run("notify", "show", "--json")


@case("notify clear", "ok")
def _(w):
    w.peers()
    return w.run("notify", "clear", "--json")


@case("notify clear", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("notify", "clear", "--json")


@case("notify test", "ok")
def _(w):
    w.peers()
    return w.run("notify", "test", "--json", env={"RELAY_NOTIFY": "true"})


@case("notify test", "refused", "storage_error")
def _(w):  # no home: nothing is made
    return w.run("notify", "test", "--json")


@case("run", "ok", stdout="empty")
def _(w):
    return w.run("run", "--as", "worker", "--json", "--", "true")


@case("run", "ok", stdout="empty")
def _(w):  # the command leaves claimed work behind: it became delivery_unknown on leaving
    alice, bob = w.peers()
    assert w.relay("peers", "add", "worker").code == 0
    assert w.relay.send(alice, "worker", "x").code == 0
    claim = shlex.join([*RELAY, "claim", "--json"])
    r = w.run("run", "--as", "worker", "--json", "--", "sh", "-c", f"{claim} >/dev/null")
    assert w.relay("list", "--state", "delivery_unknown", "--json").json["requests"]
    return r


@case("run", "refused", "usage_error", exit=127)
def _(w):
    return w.run("run", "--as", "worker", "--json", "--", str(w.path / "no-such-program"))


@case("run", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("run", "--as", "worker", "--json", "--", "true")


# peers
@case("peers join", "ok")
def _(w):  # joining a live name supersedes it: the document says so through its fields
    w.relay.join("carol")
    return w.run("peers", "join", "carol", "--shell", "--json")


@case("peers heartbeat", "ok")
def _(w):
    alice, bob = w.peers()
    return w.run("peers", "heartbeat", "--json", env=alice)


@case("peers heartbeat", "refused", "lease_expired")
def _(w):
    alice, bob = w.peers()
    return w.run("peers", "heartbeat", "--json", env={**alice, "RELAY_TIME_OFFSET": "7200"})


@case("peers leave", "ok")
def _(w):  # with claimed work, which becomes delivery_unknown
    alice, bob, rid = w.claimed()
    return w.run("peers", "leave", "--json", env=bob)


@case("peers leave", "refused", "invalid_session")
def _(w):
    alice, bob = w.peers()
    assert w.relay("peers", "leave", env=bob).code == 0
    return w.run("peers", "leave", "--json", env=bob)


@case("peers list", "ok")
def _(w):
    w.peers()
    return w.run("peers", "list", "--json")


@case("peers list", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("peers", "list", "--json")


# the side-effect ledger
@case("once", "ok")
def _(w):  # a replay: "replayed" is the document's replayed: true
    assert w.relay("once", "--key", "k", "--", "true").code == 0
    r = w.run("once", "--key", "k", "--json", "--", "true")
    assert json.loads(r.out)["replayed"] is True
    return r


@case("once", "ok")
def _(w):  # approved while it waited: it runs, and says nothing on stderr
    p = subprocess.Popen(
        [*RELAY, "once", "--key", "k", "--approve", "--timeout", "1m", "--json", "--", "true"],
        env=w.relay._env(None),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + HANG
        while w.relay("ledger", "show", "k", "--json").out.find('"awaiting_approval"') < 0:
            assert time.monotonic() < end, "once never asked for approval"
            time.sleep(0.02)
        approved = w.run("approve", "k", "--yes", "--json", tty_in=True)
        assert approved.code == 0, approved
        out, err = p.communicate(timeout=HANG)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    doc = json.loads(out)
    assert doc["state"] == "succeeded" and doc["decision"] == "approved", doc
    return Ran(p.returncode, out.decode(), err.decode(), "")


@case("once", "refused", "timeout")
def _(w):  # needs a person: command, cwd and key are fields of the document
    r = w.run("once", "--key", "k", "--approve", "--timeout", "0", "--json", "--", "true")
    doc = json.loads(r.out)
    assert (doc["key"], doc["state"], doc["argv"], doc["cwd"]) == (
        "k",
        "awaiting_approval",
        ["true"],
        os.getcwd(),
    )
    return r


@case("once", "refused", "denied")
def _(w):
    w.awaiting()
    assert w.run("deny", "k", "--json", tty_in=True).code == 0
    return w.run("once", "--key", "k", "--approve", "--timeout", "0", "--json", "--", "true")


@case("once", "refused", "key_conflict")
def _(w):
    assert w.relay("once", "--key", "k", "--", "true").code == 0
    return w.run("once", "--key", "k", "--json", "--", "false")


@case("once", "refused", "usage_error", exit=127)
def _(w):
    return w.run("once", "--key", "k", "--json", "--", str(w.path / "no-such-program"))


@case("approve", "ok")
def _(w):
    w.awaiting()
    return w.run("approve", "k", "--yes", "--json", tty_in=True)


@case("approve", "ok")
def _(w):  # the question is for the person at the terminal, not for stderr
    w.awaiting()
    r = w.run("approve", "k", "--json", tty_in=True, typed=b"y\n")
    assert "Approve it? [y/N]" in r.tty and "command: true" in r.tty, r.tty
    assert json.loads(r.out)["state"] == "approved"
    return r


@case("approve", "ok")
def _(w):  # not approved: the entry as it still is, and the person was told at the terminal
    w.awaiting()
    r = w.run("approve", "k", "--json", tty_in=True, typed=b"n\n")
    assert "not approved; nothing changed" in r.tty, r.tty
    assert json.loads(r.out)["state"] == "awaiting_approval"
    return r


@case("approve", "refused", "approval_needs_terminal")
def _(w):
    w.awaiting()
    return w.run("approve", "k", "--yes", "--json", input="y\n")


@case("approve", "refused", "ledger_key_not_found")
def _(w):
    w.relay.make_home()  # the home exists
    return w.run("approve", "nothing-here", "--json", tty_in=True, typed=b"y\n")


@case("ledger show", "refused", "ledger_key_not_found")
def _(w):
    w.relay.make_home()  # the home exists
    return w.run("ledger", "show", "nothing-here", "--json")


@case("deny", "ok")
def _(w):
    w.awaiting()
    return w.run("deny", "k", "--note", "not today", "--json", tty_in=True)


@case("deny", "refused", "approval_needs_terminal")
def _(w):
    w.awaiting()
    return w.run("deny", "k", "--json")


@case("ledger list", "ok")
def _(w):
    w.awaiting()
    return w.run("ledger", "list", "--json")


@case("ledger show", "ok")
def _(w):
    assert w.relay("once", "--key", "k", "--", "true").code == 0
    return w.run("ledger", "show", "k", "--json")


@case("ledger resolve", "ok")
def _(w):
    assert w.relay("once", "--key", "k", "--", "true").code == 0
    return w.run("ledger", "resolve", "k", "--outcome", "forget", "--json")


@case("ledger resolve", "refused", "approval_needs_terminal")
def _(w):
    w.awaiting()
    return w.run("ledger", "resolve", "k", "--outcome", "forget", "--json")


# relay's data for a person's tools
@case("prune", "ok")
def _(w):
    w.sent()
    r = w.run("prune", "--vacuum", "--json")
    assert "vacuum" in json.loads(r.out)
    return r


@case("prune", "refused", "usage_error")
def _(w):
    w.sent()
    return w.run("prune", "--vacuum", "--dry-run", "--json")


@case("db path", "ok")
def _(w):  # not created yet: the note a person reads is the document's exists: false
    r = w.run("db", "path", "--json")
    assert json.loads(r.out)["exists"] is False
    return r


@case("db path", "refused", "unsafe_state_dir")
def _(w):
    w.unsafe()
    return w.run("db", "path", "--json")


@case("export", "ok", stdout="any")
def _(w):  # the output is the chosen format (JSON lines here); --json is about errors
    w.sent()
    w.sent()  # (joins again: the first request's recipient session was superseded)
    r = w.run("export", "--json")
    assert [json.loads(ln)["state"] for ln in r.out.splitlines()] == ["queued", "queued"]
    return r


@case("export", "refused", "invalid_duration")
def _(w):
    return w.run("export", "--since", "lately", "--json")


@case("db copy", "ok")
def _(w):
    w.sent()
    r = w.run("db", "copy", "--to", w.empty_database(), "--json")
    assert json.loads(r.out)["copied"]["requests"] == 1
    return r


@case("db copy", "refused", "usage_error")
def _(w):
    return w.run("db", "copy", "--to", "mysql://relay@db/relay", "--json")


# the demo: its narration is human output only
@case("demo", "ok")
def _(w):
    r = w.run("demo", "--home", str(w.path / "demo-home"), "--json")
    assert json.loads(r.out)["steps"], r.out
    return r


@case("demo", "refused", "usage_error")
def _(w):  # a home that holds data is never used
    (w.path / "data").write_text("mine")
    return w.run("demo", "--home", str(w.path), "--json")


# hooks: the runtime's protocol, whatever --json says
for _runtime in RUNTIMES:

    @case(f"hook {_runtime}", "ok", stdout="any")
    def _(w, runtime=_runtime):
        return w.run("hook", runtime, "--json", input=event(runtime, "session_start"))

    @case(f"hook {_runtime}", "silent")
    def _(w, runtime=_runtime):  # bad input: a hook never breaks the agent
        return w.run("hook", runtime, "--json", input="{not json")


@case("hook claude", "protocol", exit=2)
def _(w):  # the waiter wakes Claude Code: exit 2, relay's note on stderr (asyncRewake)
    env, sid = w.hook_session()
    alice = w.relay.join("alice")
    assert w.relay.send(alice, "agent-1", "x").code == 0
    return w.run(
        "hook", "claude", "--wake", "--json", env=env, input=event("claude", "stop", session_id=sid)
    )


@case("hook install", "ok")
def _(w):
    return w.run("hook", "install", "claude", "--json", env=w.settings())


@case("hook install", "ok")
def _(w):  # a second install changes nothing
    assert w.relay("hook", "install", "claude", env=w.settings()).code == 0
    r = w.run("hook", "install", "claude", "--json", env=w.settings())
    assert json.loads(r.out)["changed"] is False
    return r


@case("hook install", "refused", "usage_error")
def _(w):
    return w.run("hook", "install", "claude", "--json", env=w.settings("{not json"))


@case("hook install", "refused", "usage_error")
def _(w):  # a typo in install's own options is a usage error, not a hook's silence
    return w.run("hook", "install", "claude", "--nope", "--json", env=w.settings())


@case("hook uninstall", "ok")
def _(w):
    assert w.relay("hook", "install", "claude", env=w.settings()).code == 0
    return w.run("hook", "uninstall", "claude", "--json", env=w.settings())


@case("hook uninstall", "refused", "usage_error")
def _(w):
    return w.run("hook", "uninstall", "claude", "--json", env=w.settings("[]"))


# ------------------------------------------------------------------ the checks
def one_document(out: str) -> dict:
    """stdout is exactly one JSON document (``relay schema`` indents its one)."""
    assert out.endswith("\n"), f"stdout is not one JSON document: {out[:300]!r}"
    return json.loads(out)


def error_line(ran: Ran) -> dict:
    """stderr is exactly one line, {"error": {...}} with exactly the documented keys."""
    assert ran.err.endswith("\n") and ran.err.count("\n") == 1, (
        f"stderr is not exactly one line: {ran.err!r}"
    )
    doc = json.loads(ran.err)
    assert list(doc) == ["error"], doc
    err = doc["error"]
    assert set(err) == ERROR_KEYS, err
    assert err["code"] in ERRORS, err
    assert err["exit_code"] == ran.code, (err, ran.code)
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["hint"], str) and err["hint"]
    assert isinstance(err["retryable"], bool)
    assert err["retry_after_seconds"] is None or isinstance(
        err["retry_after_seconds"], (int, float)
    )
    return err


def check(c: Case, ran: Ran) -> None:
    if c.kind in ("ok", "outcome", "silent"):
        assert ran.code == (c.exit or 0), ran
        assert ran.err == "", f"stderr is not empty: {ran.err!r}"
    elif c.kind in ("refused", "not_yet"):
        err = error_line(ran)
        assert err["code"] == c.code, err
        assert ran.code == (c.exit or ERRORS[c.code].exit_code), ran
    elif c.kind == "protocol":
        assert ran.code == c.exit, ran
        # relay's one note (agents/announce.py: it ends as relay's texts end)
        assert ran.err.startswith("[relay] ") and ran.err.endswith("tell the person.\n"), ran.err
        assert ran.err.count("[relay] ") == 1, ran.err
    if c.stdout == "document":
        one_document(ran.out)
    elif c.stdout == "optional":
        assert ran.out == "" or one_document(ran.out)
    elif c.stdout == "empty":
        assert ran.out == "", ran.out


@pytest.mark.parametrize("command", leaf_commands())
def test_json_stderr_is_empty_on_success_and_one_error_line_on_failure(command, tmp_path, request):
    cases = CASES.get(command, [])
    kinds = {c.kind for c in cases}
    needed = (
        {"ok", "silent"}
        if command.startswith("hook ") and command.split()[1] in RUNTIMES
        else {"ok", "refused"}
    )
    assert needed <= kinds, (
        f"`relay {command}` needs a success and a refusal with --json in {__file__} "
        f"(has {sorted(kinds) or 'none'})"
    )
    failures = []
    for i, c in enumerate(cases):
        try:
            check(c, c.fn(World(tmp_path / f"case-{i}", request)))
        except AssertionError as e:
            failures.append(f"case {i} ({c.kind} {c.code or ''}): {e}")
    assert not failures, f"relay {command} --json:\n" + "\n".join(failures)


def test_every_case_names_a_live_command():
    assert sorted(set(CASES) - set(leaf_commands())) == []


# ------------------------------------------------------------------ the exceptions, and more
CHILD_STDERR = b"\xff not utf-8, \x1b[31mescapes\x1b[0m, no newline"


@pytest.mark.parametrize("command", [["once", "--key", "k"], ["run", "--as", "worker"]])
def test_the_command_s_own_stderr_passes_through_untouched(command, tmp_path):
    """What the command run by `once` or `run` writes to stderr is its own output: it
    passes through byte for byte, and relay adds nothing to it."""
    w = World(tmp_path / "w")
    script = "import sys; sys.stderr.buffer.write(%r)" % CHILD_STDERR
    p = subprocess.run(
        [*RELAY, *command, "--json", "--", sys.executable, "-c", script],
        env=w.relay._env(None),
        input=b"",
        capture_output=True,
        timeout=HANG,
    )
    assert p.returncode == 0, p
    assert p.stderr == CHILD_STDERR
    if command[0] == "once":  # and the document holds what was captured
        doc = json.loads(p.stdout)
        assert doc["stderr_bytes"] == len(CHILD_STDERR) and doc["replayed"] is False


def test_once_interrupted_while_it_waits_for_a_person(tmp_path):
    """Stopped by a signal: exit 128+N and nothing on stderr (nothing failed; it was
    stopped); the document says which signal, and that nothing ran."""
    import signal

    w = World(tmp_path / "w")
    p = subprocess.Popen(
        [*RELAY, "once", "--key", "k", "--approve", "--timeout", "1m", "--json", "--", "true"],
        env=w.relay._env(None),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + HANG
        while '"awaiting_approval"' not in w.relay("ledger", "show", "k", "--json").out:
            assert time.monotonic() < end, "once never asked for approval"
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=HANG)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM
    assert err == b""
    doc = json.loads(out)
    assert doc["interrupted_by_signal"] == signal.SIGTERM
    assert doc["state"] == "awaiting_approval" and doc["replayed"] is False


def test_once_whose_outcome_could_not_be_recorded_says_so_in_the_document(tmp_path):
    """The entry changed while the command ran: what the warning told a person is in the
    document (outcome_recorded, warning), not on stderr."""
    from relay_cli.store import open_store

    w = World(tmp_path / "w")
    go = tmp_path / "go"
    p = subprocess.Popen(
        [
            *RELAY,
            "once",
            "--key",
            "k",
            "--json",
            "--",
            "sh",
            "-c",
            f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.02; done",
        ],
        env=w.relay._env(None),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + HANG
        while (
            '"child_pid": null' in (shown := w.relay("ledger", "show", "k", "--json").out)
            or not shown
        ):
            assert time.monotonic() < end, "the command never started"
            time.sleep(0.02)
        store = open_store(w.relay.home, environ={})
        try:
            with store.transaction():
                store.update_ledger("k", {"state": "forgotten"})
        finally:
            store.close()
        go.touch()
        out, err = p.communicate(timeout=HANG)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and err == b""
    doc = json.loads(out)
    assert doc["outcome_recorded"] is False and "not recorded" in doc["warning"]
    assert doc["exit_code"] == 0


def test_with_json_a_note_is_never_written_and_the_first_error_is_the_one_line():
    """The rule is in Output itself, so a new note or a second error cannot add a line."""
    import io

    from relay_cli.core.context import Context
    from relay_cli.core.errors import RelayError, cannot_start
    from relay_cli.core.output import Output

    err = io.StringIO()
    call = Context(stdout=io.StringIO(), stderr=err)
    out = Output.of(call, json_mode=True)
    out.note("relay: a note for a person")
    assert err.getvalue() == ""
    out.error(RelayError("lease_expired", "the session lapsed"))
    Output.of(call, json_mode=True).error(RelayError("busy", "then this"))  # the same call
    out.error(cannot_start("cannot start", 127, "fix it"))
    assert [json.loads(ln)["error"]["code"] for ln in err.getvalue().splitlines()] == [
        "lease_expired"
    ]
    # a new call (in one process, a caller may run several) has its own one line
    Output.of(Context(stderr=err), json_mode=True).error(RelayError("busy", "a new call"))
    assert json.loads(err.getvalue().splitlines()[-1])["error"]["code"] == "busy"
    from relay_cli.cli import run

    shared = io.StringIO()
    codes = [
        run(["show", "not-an-id", "--json"], context=Context(stdout=io.StringIO(), stderr=shared))
        for _ in range(2)
    ]
    lines = shared.getvalue().splitlines()
    assert codes == [2, 2] and [json.loads(ln)["error"]["code"] for ln in lines] == [
        "invalid_id",
        "invalid_id",
    ]
    human = io.StringIO()
    Output(json_mode=False, stderr=human).note("relay: a note for a person")
    assert human.getvalue() == "relay: a note for a person\n"


def test_a_shifted_clock_adds_nothing_to_stderr_with_json_even_on_a_terminal(tmp_path):
    """RELAY_TIME_OFFSET (design.md §8): with --json the fact is doctor's `time_offset`
    check, never prose on stderr -- on a terminal too, where a person is warned in human
    output."""
    w = World(tmp_path / "w")
    w.peers()
    shifted = {"RELAY_TIME_OFFSET": "5"}
    r = w.run("list", "--json", env=shifted, tty_err=True)
    assert r.code == 0 and r.tty == "", r
    one_document(r.out)
    r = w.run("show", new_id(), "--json", env=shifted, tty_err=True)
    assert error_line(Ran(r.code, r.out, r.tty, ""))["code"] == "request_not_found"
    r = w.run("doctor", "--json", env=shifted, tty_err=True)
    assert r.tty == ""
    check = next(c for c in one_document(r.out)["checks"] if c["name"] == "time_offset")
    assert check["status"] == "warn" and "RELAY_TIME_OFFSET=5" in check["detail"]
