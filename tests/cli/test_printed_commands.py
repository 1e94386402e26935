"""Every command relay prints is runnable as printed (design.md §14), as a property.

The commands are discovered, never listed by hand: every `relay …` line and backquoted
`relay …` in the fixed hints, in every command's help (the live Click tree), in README.md
and docs/, and in what relay prints in a prepared situation (errors and their hints,
`next:`/`then:`/`→` lines, the guide, doctor, watch). Each is run in that same situation
with the same shell environment (RELAY_HOME, the caller's identity), placeholders made
concrete (ID: a request in the state the command needs; NAME, KEY, `a|b|c`: the first
choice), and must parse and be accepted as input: no usage error, no invalid_*, no
internal error, no request_id_conflict. Commands whose line promises an outcome (`next:`,
the help's two `send` examples run one after the other) must succeed.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import Relay, fake_crash

pytestmark = pytest.mark.sqlite_only  # a situation is a copied relay.db

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
# error codes that say the command itself is wrong as printed
MALFORMED = {
    "usage_error",
    "invalid_id",
    "invalid_text",
    "invalid_name",
    "invalid_duration",
    "invalid_key",
    "ambiguous_id",
    "self_message",
    "internal_error",
    "request_id_conflict",
}
ERROR_LINE = re.compile(
    r'^relay: (?:error|not yet): ([a-z_]+):|^\{"error": \{"code": "([a-z_]+)"', re.M
)
UNREACHABLE = "postgresql://relay@127.0.0.1:9/relay"  # a URL (design.md §13) nobody serves
# Printed by code another part of relay owns, and known not to run as printed: each with
# why, so the report names it (a new one fails the test).
KNOWN = {
    "relay hook install gemini --wake": "design.md names it as refused, and it is",
    "relay hook install copilot --wake": "agents.md names it as refused, and it is",
}
RAN: list[tuple[str, str, str]] = []
_SEEN: dict[
    str, str
] = {}  # concrete line run in the base situation -> its outcome  # (where it was printed, the command, the outcome)


# ------------------------------------------------------------------ discovery
def _tree():
    """The live Click command tree, built once per test process (it is only read here)."""
    from relay_cli.cli.app import build_command
    from relay_cli.cli.commands import app

    return build_command(app)


TREE = _tree()
TOP = set(TREE.commands)
_LEAD = re.compile(r"^(?:→ |-> |next: |then: |run: |\$ |[a-z]+\$ |\+\d+ more: )?(.*)$")


def _strip_tail(cmd: str) -> str:
    """A command without what follows it on its line: a comment (`  # …`), a
    parenthesised remark after two spaces, trailing punctuation of prose."""
    cmd = re.split(r"\s{2,}[#(]|\s+#\s", cmd, maxsplit=1)[0]
    return cmd.rstrip().rstrip(".,;:")


def _is_relay(cmd: str) -> bool:
    words = cmd.split()
    return len(words) >= 2 and words[0] == "relay" and words[1] in TOP


def printed_commands(text: str) -> list[str]:
    """Every relay command in ``text``: a line that is one (``relay …``, ``→ relay …``,
    ``next: relay …``, ``$ relay …``), a backquoted ``relay …``, an ``eval "$(relay …)"``."""
    found = []
    for line in text.splitlines():
        s = line.strip()
        spans = re.findall(r"`((?:eval \"\$\()?relay [^`]*)`", s)
        found += spans
        rest = re.sub(r"`[^`]*`", "", s)
        found += re.findall(r'(eval "\$\(relay [^)]*\)")', rest)
        m = _LEAD.match(s)
        body = m.group(1) if m else s
        if body.startswith("relay ") and not spans:
            found.append(body)
    out = []
    for cmd in found:
        cmd = _strip_tail(cmd)
        core = cmd.split('"$(', 1)[1] if cmd.startswith("eval ") else cmd
        if _is_relay(core) and cmd not in out:
            out.append(cmd)
    return out


def _help_texts() -> list[tuple[str, str]]:
    """(path, help + examples) of every command in the live Click tree."""
    texts = []

    def walk(cmd, path):
        texts.append((path, f"{cmd.help or ''}\n{cmd.epilog or ''}"))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(TREE, "relay")
    return texts


def _doc_texts() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [
        (p.name, p.read_text().replace("\\|", "|"))  # (a table cell's escaped bar)
        for p in docs
        if p.name != "reference.md"
    ]  # (reference.md is the help, again)  # (help, again)


# ------------------------------------------------------------------ the situation
class World:
    """A home with something in every state a printed command may name, and the envs of
    its peers; ``copy()`` gives a fresh home in the same situation for each command."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._n = itertools.count()
        self.relay = Relay(root / "base")
        r = self.relay
        self.alice = r.join("alice", "--kind", "claude", "--lease", "24h")
        self.bob = r.join("bob", "--kind", "codex", "--lease", "24h")
        dave = r.join("dave", "--lease", "24h")
        r("peers", "add", "carol", "--kind", "human")
        r("peers", "add", "reviewer", "--kind", "codex")  # the help's examples send to it
        ids = self.ids = {}
        ids["completed"] = self._send(self.alice, "bob", "done soon")
        for step in (
            ("claim", "--id", ids["completed"]),
            ("ack", ids["completed"]),
            ("reply", ids["completed"], "ok"),
        ):
            assert r(*step, env=self.bob).code == 0
        ids["unknown"] = self._send(self.alice, "dave", "migrate")
        assert r("claim", "--id", ids["unknown"], env=dave).code == 0
        assert r("peers", "leave", env=dave).code == 0
        ids["delivered"] = self._send(self.alice, "bob", "review")
        assert r("claim", "--id", ids["delivered"], "--lease", "1h", env=self.bob).code == 0
        ids["queued"] = self._send(self.alice, "bob", "later")
        ids["draft"] = r("prepare", "--to", "bob", "draft", "--json", env=self.alice).json["id"]
        assert r("once", "--key", "k1", "--", "true").code == 0
        assert r("once", "--approve", "--timeout", "0", "--key", "deploy", "--", "true").code == 75
        assert r("once", "--key", "crashed", "--", "true").code == 0
        fake_crash(r, "crashed")
        for name in ("task.md", "reply.md", "review.md"):
            (root / name).write_text("some text\n")

    def _send(self, who, to, text) -> str:
        r = self.relay("send", "--to", to, text, "--json", env=who)
        assert r.code == 0, r.err
        return r.json["id"]

    def copy(self, tag: str) -> Relay:
        home = self.root / f"h{next(self._n)}-{tag}"
        shutil.copytree(self.relay.home, home)
        return Relay(home)

    # placeholders made concrete for the command they appear in
    def concrete(self, cmd: str) -> tuple[str, dict]:
        words = cmd.split()
        verb = words[1] if len(words) > 1 else ""
        if verb == "claim" or (verb in ("ack", "reply", "fail", "reject")):
            rid, env = (self.ids["queued"] if verb == "claim" else self.ids["delivered"]), self.bob
        elif verb == "cancel":
            rid, env = self.ids["queued"], self.alice
        elif verb == "resolve":
            rid, env = self.ids["unknown"], self.alice
        elif verb == "submit":
            rid, env = self.ids["draft"], self.alice
        else:
            rid, env = self.ids["completed"], self.alice
        key = (
            "deploy"
            if verb in ("approve", "deny")
            else "crashed"
            if "resolve" in words and verb == "ledger"
            else "k1"
        )
        subst = {
            "ID": rid,
            "1a2b3c4d": rid[:8],
            "NAME": "alice",
            "PEER": "bob",
            "KEY": key,
            "TEXT": "x",
            "D": "5m",
            "N": "3",
            "PATH": "task.md",
            "P": "task.md",
            "CMD": "true",
            "AGENT": "claude",
            "KIND": "claude",
            "STATE": "queued",
            "K": "claude",
            "PREFIX": rid[:8],
            "TOKEN": "$RELAY_SESSION",
            "S": "queued",
            "URL": UNREACHABLE,
            '"$RELAY_DATABASE_URL"': UNREACHABLE,
        }
        cmd = re.sub(r"<<'EOF' \.\.\. EOF", "<<< 'some text'", cmd)
        cmd = re.sub(r"<<-?'?EOF'?$", "<<< 'some text'", cmd)  # a heredoc's first line
        cmd = re.sub(r"\s*\[[^\]]*\]\u2026?", "", cmd)  # a synopsis's optional parts
        cmd = cmd.replace(" ... ", " ").replace(" \u2026", "")
        if verb in ("send", "prepare"):  # `--id "$ID"` names new work: a fresh id
            cmd = cmd.replace('--id "$ID"', f"--id {uuid.uuid4()}")
        cmd = re.sub(
            r"(?<![\w$-])[a-z_-]+(?:\|[a-z_-]+)+(?![\w-])", lambda m: m.group().split("|")[0], cmd
        )
        cmd = cmd.replace('"$ID"', rid).replace('"$RELAY_DATABASE_URL"', UNREACHABLE)
        cmd = re.sub(
            r"(?<![\w$-])("
            + "|".join(map(re.escape, sorted(subst, key=len, reverse=True)))
            + r")(?![\w-])",
            lambda m: subst[m.group()],
            cmd,
        )
        return cmd, {**env, "ID": rid, "KEY": key, "TOOL_USE_ID": "toolu_01"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("printed"))


class Blocked(BaseException):
    """The command is still waiting (claim --wait, wait, once --approve): it parsed."""


def _alarm(signum, frame):
    raise Blocked()


def _pause(store, seconds: float) -> None:
    raise Blocked()


def _command_paths() -> set[tuple[str, ...]]:
    paths = set()

    def walk(cmd, path):
        paths.add(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(TREE, ())
    return paths


PATHS = _command_paths()


GROUPS = {p for p in PATHS if any(len(q) > len(p) and q[: len(p)] == p for q in PATHS)}


def is_name(cmd: str) -> bool:
    """`relay hook` in a sentence names a group of commands (nothing to run): it must
    exist. A leaf command runs; one that needs more (`relay peers join`) is a name, see
    ``run_printed``."""
    return tuple(cmd.split()[1:]) in GROUPS


def _run_shell(line: str, env: dict, cwd: Path, limit: float = 10) -> tuple[int | None, str, str]:
    """``bash -c LINE`` with "some text" on stdin: (exit status, stdout, stderr), or
    (None, "", "") once it is waiting -- still running after ``limit`` seconds, or as soon
    as relay says on stderr that it waits (`once --approve`: "relay: waiting. A person
    decides ..."), which it says only after parsing and checking every option."""
    import selectors
    import time

    p = subprocess.Popen(
        ["bash", "-c", line],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        p.stdin.write(b"some text\n")
        p.stdin.close()
    except BrokenPipeError:  # it never read its input
        pass
    got = {p.stdout: b"", p.stderr: b""}
    sel = selectors.DefaultSelector()
    for stream in got:
        sel.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + limit
    waiting = False
    code = None
    try:
        while sel.get_map() and not waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                waiting = True
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                got[key.fileobj] += chunk
            waiting = re.search(rb"(^|\n)relay: waiting\b", got[p.stderr]) is not None
        if not waiting:  # both pipes closed: it ended, or goes on without them
            try:
                code = p.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                waiting = True
    finally:
        sel.close()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what is left of it, background jobs included
        except ProcessLookupError:
            pass
        p.wait()
        p.stdout.close()
        p.stderr.close()
    if waiting:
        return None, "", ""
    out, err = (got[s].decode(errors="replace").replace("\r\n", "\n") for s in (p.stdout, p.stderr))
    return code, out, err


def run_printed(
    world: World, where: str, cmd: str, relay: Relay | None = None, env: dict | None = None
) -> tuple[int | None, str, str]:
    """Run ``cmd`` as printed (placeholders made concrete) in a copy of the situation;
    return (exit status or None when it was still waiting, stdout, stderr). A bare
    command name (`relay once`) is checked with --help instead."""
    if cmd in KNOWN:
        RAN.append((where, cmd, f"KNOWN, not run: {KNOWN[cmd]}"))
        return 0, "", ""
    relay_given = relay
    line, who = world.concrete(cmd)
    if relay is None and env is None and line in _SEEN:  # the same line, the same situation
        RAN.append((where, cmd, f"as above: {_SEEN[line]}"))
        return None, "", ""
    if is_name(line):
        r = (relay or world.relay)(*line.split()[1:], "--help")
        RAN.append((where, cmd, f"name: --help exit {r.code}"))
        assert r.code == 0 and r.out.startswith("Usage: relay"), (where, cmd, r.err)
        return 0, r.out, r.err
    relay = relay or world.copy("cmd")
    shell_env = {**who, **(env or {}), "HOME": str(world.root), "TERM": "dumb"}
    if re.search(r"[$<>|;]|^eval |^relay (demo|run|once)\b", line):  # (a real process)
        full = relay._env(shell_env)
        full["PATH"] = BIN + ":" + full.get("PATH", "")
        code, out, err = _run_shell(line, full, world.root)
    else:
        words = shlex.split(line)[1:]
        cwd = os.getcwd()
        os.chdir(world.root)
        # Waiting: a command that begins to wait (claim --wait, wait: due.poll sleeps
        # through the store's pause once its first look found nothing) is stopped there;
        # one that waits otherwise (`relay web` serves) once it still runs after 3 s.
        from relay_cli.store.base import SQLStore  # (the world is a relay.db)

        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, 3)
        real_pause, SQLStore.pause = SQLStore.pause, _pause  # type: ignore[method-assign]
        try:
            r = relay(
                *words,
                env=shell_env,
                terminal=words[:1] in (["resolve"], ["approve"], ["deny"]),
                input="y\n" if words[:1] == ["approve"] else "some text\n",
            )
            code, out, err = r.code, r.out, r.err
        except Blocked:
            code, out, err = None, "", ""
        finally:
            SQLStore.pause = real_pause  # type: ignore[method-assign]
            signal.setitimer(signal.ITIMER_REAL, 0)
            os.chdir(cwd)
    codes = {a or b for a, b in ERROR_LINE.findall(err)}
    if code in (126, 127):  # `run`/`once`: the agent it starts is not installed here
        codes.discard("usage_error")
    outcome = (
        "waiting"
        if code is None
        else f"exit {code}" + (f" ({', '.join(sorted(codes))})" if codes else "")
    )
    RAN.append((where, cmd, outcome))
    if relay_given is None and env is None:
        _SEEN[line] = outcome
    words = line.split()[1:]
    path = max((p for p in PATHS if tuple(words[: len(p)]) == p), key=len)
    reference = (
        codes == {"usage_error"}
        and re.search(r'(: |")(missing|relay \w+ needs) ', err)
        and all(w.startswith("--") for w in words[len(path) :])
    )
    if reference:  # `relay once --approve` in a sentence names a mode of a command
        RAN[-1] = (where, cmd, "name of a mode: --help")
        r = world.relay(*shlex.split(line)[1:], "--help")
        assert r.code == 0 and r.out.startswith("Usage: relay"), (where, cmd, r.err)
        return 0, r.out, r.err
    assert "Traceback" not in err, (where, cmd, err)
    assert not codes & MALFORMED, f"{where}: `{cmd}` ran as `{line}`: {err}"
    assert code not in (1, 2), f"{where}: `{cmd}` ran as `{line}` exited {code}: {err}"
    return code, out, err


def _all(runs) -> None:
    """Run every one (a generator of run_printed calls); then fail naming each that broke."""
    broken = []
    while True:
        try:
            next(runs)
        except StopIteration:
            break
        except AssertionError as e:
            broken.append(str(e).split("\nassert")[0])
    assert not broken, "\n".join(broken)


# ------------------------------------------------------------------ the property
def test_every_command_in_a_fixed_hint_runs(world):
    from relay_cli.core.errors import ERRORS

    named = [(code, c) for code, spec in ERRORS.items() for c in printed_commands(spec.hint)]
    assert len(named) >= 15
    _all(run_printed(world, f"hint of {code}", cmd) for code, cmd in named)


def test_every_command_in_help_runs(world):
    named = [(path, c) for path, text in _help_texts() for c in printed_commands(text)]
    assert len(named) >= 60
    _all(run_printed(world, f"`{path} --help`", cmd) for path, cmd in named)


def test_every_command_in_the_readme_and_docs_runs(world):
    named = [(doc, c) for doc, text in _doc_texts() for c in printed_commands(text)]
    assert len(named) >= 40
    _all(run_printed(world, doc, cmd) for doc, cmd in named)


# What relay prints in a situation, and who runs it: the commands it names are run right
# after, in the home as that call left it, as the same caller.
PROBES = [
    ("bob", ["claim"]),
    ("alice", ["prepare", "--to", "bob", "x"]),
    (None, ["peers", "join", "erin"]),
    (None, ["ledger", "list"]),
    (None, ["watch"]),
    (None, ["doctor"]),
    (None, ["guide"]),
    (None, ["guide", "--for", "claude"]),
    (None, ["guide", "--for", "codex"]),
    (None, ["guide", "--for", "gemini"]),
    (None, ["show", "ffffffff"]),
    ("alice", ["submit", "0b0b0b0b-0000-4000-8000-000000000000"]),
    ("alice", ["send", "--to", "bob", "--id", "{completed}", "other"]),
    ("alice", ["send", "--to", "bob", "--id", "{completed_prefix}", "x"]),
    ("alice", ["ack", "{queued}"]),
    ("bob", ["ack", "{queued}"]),
    ("bob", ["ack", "{unknown}"]),
    ("bob", ["claim", "--id", "{delivered}"]),
    ("alice", ["wait", "{queued}", "--timeout", "0"]),
    ("alice", ["claim"]),
    ("bob", ["peers", "leave"]),
    (None, ["send", "--to", "bob", "x"]),
    ("stranger", ["send", "--to", "bob", "x"]),
    ("alice", ["send", "--to", "nobody", "x"]),
    (None, ["inbox", "--as", "bob"]),
    ("alice:expired", ["send", "--to", "bob", "x"]),
    ("alice:superseded", ["send", "--to", "bob", "x"]),
]


@pytest.mark.parametrize("who,args", PROBES, ids=[" ".join(a) for _, a in PROBES])
def test_every_command_relay_prints_in_a_situation_runs_there(world, who, args):
    ids = world.ids
    fill = {f"{{{k}}}": v for k, v in ids.items()}
    fill.update({f"{{{k}_prefix}}": v[:8] for k, v in ids.items()})
    args = [fill.get(a, a) for a in args]
    relay = world.copy("probe")
    env = {
        "alice": world.alice,
        "bob": world.bob,
        "stranger": {"RELAY_PEER": "alice"},
        None: {},
    }.get(who)
    if who == "alice:expired":  # the session's lease lapsed: the hint repairs this shell
        env = {**relay.join("frank", "--lease", "10s"), "RELAY_TIME_OFFSET": "60"}
    elif who == "alice:superseded":
        env = relay.join("gina")
        relay.join("gina")
    r = relay(*args, env=env)
    assert "Traceback" not in r.err
    named = printed_commands(r.out + "\n" + r.err)
    if args[:1] in (["claim"], ["prepare"]) and r.code == 0:
        assert any(c.startswith(("relay ack", "relay submit")) for c in named), r.out
    for cmd in named:
        # a command printed with real ids runs as printed; `next:` promises success
        step = world.copy("after")
        shutil.rmtree(step.home)
        shutil.copytree(relay.home, step.home)
        code, _, _ = run_printed(
            world,
            f"`relay {' '.join(args)}`",
            cmd,
            relay=step,
            env={k: v for k, v in (env or {}).items()},
        )
        if f"next: {cmd}" in r.out:
            assert code == 0, (args, cmd)


def test_the_two_send_examples_run_one_after_the_other_in_one_shell(world):
    """The help's send examples, in order in one home: both create their request (a
    reused id with other options would be refused as request_id_conflict)."""
    from relay_cli.cli.app import build_command
    from relay_cli.cli.commands import app

    epilog = build_command(app).commands["send"].epilog
    lines = [ln.strip() for ln in epilog.split("\b\n", 1)[1].splitlines()]
    assert sum(ln.startswith("relay send") for ln in lines) == 2
    # as a person pastes them: one shell, in order; a `-` reads what they type
    script = "\n".join(ln + " <<< 'some text'" if ln.endswith(" -") else ln for ln in lines)
    relay = world.copy("send")
    env = relay._env(world.alice)
    env["PATH"] = BIN + ":" + env["PATH"]
    p = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, cwd=world.root, timeout=60
    )
    RAN.append(
        ("`relay send --help`, as one script", script.replace("\n", "; "), f"exit {p.returncode}")
    )
    assert p.returncode == 0 and "relay: error" not in p.stderr, p.stderr
    sent = relay("list", "--to", "bob", "--from", "alice", "--json").json["requests"]
    sent = [r for r in sent if r["id"] not in world.ids.values()]
    assert len(sent) == 2, sent  # two requests: the second line is new work, not a retry


def test_zz_report_the_commands_that_ran(world, capsys):
    """The list of what ran (for the record: pytest -s prints it)."""
    assert len(RAN) >= 100
    with capsys.disabled():
        if os.environ.get("RELAY_PRINTED_COMMANDS"):
            Path(os.environ["RELAY_PRINTED_COMMANDS"]).write_text(
                "\n".join(f"{w}\t{c}\t{o}" for w, c, o in RAN) + "\n"
            )
