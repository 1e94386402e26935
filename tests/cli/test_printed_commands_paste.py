"""Every printed command pastes into a real shell as one command (design.md §14).

The screens a person reads (claim and its note of held requests, prepare, peers join, a
late ack's hint in human and JSON output, show of a delivery_unknown request, a draft's id
sent, peers leave, notify show with no command set, watch, doctor with a problem, an
unsafe home's hint; and of the ledger, once --approve's waiting note, ledger show and list
of an entry needing a person and once's refusal, human and JSON) are captured on a
pseudo-terminal of 80 and of 200 columns, under `--home DIR` on the command line (a path
with a space). Every command on them (a `next:`/`then:`/`→`/`run:`
line with its `` \\`` continuation lines, a line of choices, a backquoted command in a
hint) is pasted, as printed, into one real bash session (and zsh) on a terminal, where a
`relay` on PATH records the words it was given. Each paste must run exactly one relay
command, with the words the command's one-line form names, carrying `--home DIR`: a
hard-wrapped line, a `a|b|c` that bash reads as a pipeline, a parenthesis after it or a
lost scope flag all fail here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import new_id
from test_ledger_hosts import _as_another_host
from test_printed_commands import TOP  # relay's commands (the tree, built once)

from relay_cli.core.errors import ERRORS

pytestmark = pytest.mark.sqlite_only  # the screens are the same on both backends

FIXED_HINTS = " ".join(spec.hint for spec in ERRORS.values())
TEMPLATE = re.compile(r"\b(?:ID|KEY|NAME|PEER)\b")
LEAD = re.compile(r"^\s*(?:next: |then: |→ |-> |run: |\+\d+ more: )?(?=relay |eval \"\$\(relay )")


def _names_command(line: str) -> bool:
    """Whether ``relay ...`` (or ``eval "$(relay ...``) goes on with one of relay's commands
    (after the root's options, e.g. ``--home DIR``), not with prose: a line of a wrapped
    hint may begin with the word relay ("relay did not make ...")."""
    words = line.split()
    words = words[2:] if words[:1] == ["eval"] else words[1:]
    while words and words[0].startswith("-"):
        words = words[1:] if "=" in words[0] else words[2:]
    return bool(words) and words[0] in TOP


def commands_on(screen: str) -> list[str]:
    """Every command on a screen, as a person copies it: a line that is a command (after
    its lead), with the lines it continues onto (`` \\``); a backquoted command."""
    found: list[str] = []
    lines = screen.splitlines()
    i = 0
    while i < len(lines):
        m = LEAD.match(lines[i])
        rest = lines[i][m.end() :] if m else ""
        if m and not re.match(r"relay [a-z-]+:", rest) and _names_command(rest):
            block = [lines[i][m.end() :]]
            while block[-1].endswith(" \\") and i + 1 < len(lines):
                i += 1
                block.append(lines[i])
            found.append("\n".join(block))
        i += 1
    # backquoted commands in prose (hints): the prose is wrapped, the command never is
    prose = " ".join(ln.strip() for ln in lines)
    found += [c for c in re.findall(r"`(relay [^`]*)`", prose)]
    return found


def one_line(command: str) -> list[str]:
    """The words the shell reads from a pasted command."""
    return shlex.split(command.replace(" \\\n", " "))


def _shell_session(shell: str, pastes: list[str], log: Path, bindir: Path, cols: int) -> str:
    """Paste each command into one interactive ``shell`` on a terminal ``cols`` wide."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    script = "".join(p + "\n" for p in pastes) + "exit\n"
    pid, fd = pty.fork()
    if pid == 0:
        env = {
            "PATH": f"{bindir}:/usr/bin:/bin",
            "HOME": str(log.parent),
            "TERM": "dumb",
            "PS1": "$ ",
            "RELAY_LOG": str(log),
        }
        argv = (
            [shell, "--norc", "--noprofile", "-i"]
            if shell.endswith("bash")
            else [shell, "-f", "-i"]
        )
        os.execve(shutil.which(shell) or shell, argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    os.write(fd, script.encode())
    out = []
    while select.select([fd], [], [], 20)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out.append(data)
    if os.waitpid(pid, os.WNOHANG) == (0, 0):  # still reading (an unclosed quote): ended,
        os.kill(pid, signal.SIGKILL)  # so the test fails on what it saw instead of hanging
        os.waitpid(pid, 0)
    os.close(fd)
    return b"".join(out).decode("utf-8", "replace")


def _fake_relay(bindir: Path) -> None:
    """A `relay` that records the words it was given and the home in its environment: a
    POSIX shell script (a paste costs a shell's start, not an interpreter's), writing
    each word NUL-terminated after their count, then the home (`=` and it when set);
    ``_records`` reads them back."""
    bindir.mkdir()
    (bindir / "relay").write_text(
        "#!/bin/sh\n"
        "{\n"
        "  printf '%d\\0' \"$#\"\n"
        '  for word in "$@"; do printf \'%s\\0\' "$word"; done\n'
        "  printf '%s\\0' \"${RELAY_HOME+=$RELAY_HOME}\"\n"
        '} >> "$RELAY_LOG"\n'
    )
    (bindir / "relay").chmod(0o755)


def _records(log: Path) -> list[dict]:
    """What the fake relay recorded, one dict per run: its words and its RELAY_HOME."""
    if not log.exists():
        return []
    fields = iter(log.read_bytes().decode("utf-8", "surrogateescape").split("\0")[:-1])
    records = []
    for count in fields:
        argv = [next(fields) for _ in range(int(count))]
        home = next(fields)
        records.append({"argv": argv, "home": home[1:] if home else None})
    return records


def _screens(relay, home: Path, cols: int) -> dict[str, str]:
    """The screens a person reads, each from a call given `--home HOME` on its command line."""
    h = ("--home", str(home))
    no_env = {"RELAY_HOME": None, "RELAY_PEER": None, "RELAY_SESSION": None}

    def screen(*args: str, env: dict | None = None) -> str:
        return relay.screen_here(*args, *h, cols=cols, rows=24, env={**no_env, **(env or {})})[1]

    def quiet(*args: str, env: dict | None = None):
        r = relay(*args, *h, env={**no_env, **(env or {})})
        assert r.code == 0, (args, r.err)
        return r

    quiet("peers", "add", "alice")
    token = quiet("peers", "join", "bob", "--json").json["token"]
    bob = {"RELAY_PEER": "bob", "RELAY_SESSION": token}
    shown = {}
    rid = new_id()
    quiet("send", "--as", "alice", "--to", "bob", "--id", rid, "review the diff")
    shown["claim"] = screen("claim", env=bob)
    # nothing left to claim: the code's fixed hint names claim and claim --wait (design.md
    # §14: a fixed hint's commands are values too, with the call's flags)
    shown["nothing to claim"] = screen("claim", env=bob)
    shown["prepare"] = screen("prepare", "--as", "alice", "--to", "bob", "a draft")
    shown["join"] = screen("peers", "join", "carol")
    # a late ack: the claim lease ran out first
    late = new_id()
    quiet("send", "--as", "alice", "--to", "bob", "--id", late, "late one")
    quiet("claim", "--id", late, "--lease", "10s", "--json", env=bob)
    ahead = {**bob, "RELAY_TIME_OFFSET": "15"}
    quiet("peers", "heartbeat", env=ahead)
    shown["late ack"] = screen("ack", late, env=ahead)
    err = relay("ack", late, "--json", *h, env={**no_env, **ahead}).error
    shown["late ack --json"] = err["hint"]
    shown["watch"] = quiet("watch", env=ahead).out
    shown["doctor"] = screen("doctor", env=ahead)
    # the delivery_unknown request, shown: the commands that settle it
    shown["show"] = screen("show", late, env=ahead)
    held = new_id()
    quiet("send", "--as", "alice", "--to", "bob", "--id", held, "held one", env=ahead)
    quiet("claim", "--id", held, "--json", env=ahead)
    # a second claim while the first is held unacked: its note names show and ack
    quiet("send", "--as", "alice", "--to", "bob", "another", env=ahead)
    shown["claim note"] = screen("claim", env=ahead)
    # a draft's id sent: the error names the submit
    draft = quiet("prepare", "--as", "alice", "--to", "bob", "--json", "d", env=ahead).json["id"]
    shown["send a draft's id"] = screen(
        "send", "--as", "alice", "--to", "bob", "--id", draft, "d", env=ahead
    )
    shown["leave"] = screen("peers", "leave", env=ahead)
    # no alert command set: notify names the command that says how (design.md §19)
    shown["notify show"] = screen("notify", "show")

    # the ledger: an entry awaiting a person's approval (the waiting note, then the list)
    # and another host's entry that stopped renewing (show, list and once's error)
    # (`relay --home DIR once ...`: once's own words end with the command's)
    def first(*args: str, env: dict | None = None) -> str:
        return relay.screen_here(*h, *args, cols=cols, rows=24, env={**no_env, **(env or {})})[1]

    shown["once --approve"] = first(
        "once", "--key", "deploy-42", "--approve", "--timeout", "1s", "--", "true"
    )
    assert relay(*h, "once", "--key", "far", "--idempotent", "--", "true").code == 0
    relay.home = home
    _as_another_host(relay, "far")
    later = {"RELAY_TIME_OFFSET": "60"}
    shown["ledger show"] = screen("ledger", "show", "far", env=later)
    shown["ledger list"] = screen("ledger", "list", env=later)
    shown["once refused"] = first("once", "--key", "far", "--", "true", env=later)
    err = relay(*h, "once", "--key", "far", "--json", "--", "true", env={**no_env, **later})
    shown["once refused --json"] = err.error["hint"]
    return shown


@pytest.mark.parametrize("cols", [80, 200])
def test_every_printed_command_pastes_as_one_relay_command_with_its_scope(relay, tmp_path, cols):
    home = tmp_path / "a home"
    screens = _screens(relay, home, cols)
    unsafe = tmp_path / "project"
    unsafe.mkdir(mode=0o755)
    unsafe.chmod(0o755)
    screens["unsafe home"] = relay.screen_here(
        "list", "--home", str(unsafe), cols=cols, rows=24, env={"RELAY_HOME": None}
    )[1]
    pastes: list[tuple[str, str]] = []
    for name, text in screens.items():
        found = commands_on(text)
        assert found or name == "watch" and "relay" not in text, (name, text)
        pastes += [(name, c) for c in found]
    # the screens name what a person runs next; each is there, whole, with its scope
    names = {n for n, _ in pastes}
    for name in screens:
        if name not in ("watch", "unsafe home"):
            assert name in names, (name, screens[name])
    # the submit a prepare names is the sender's: the --as it was given goes with it
    submits = [one_line(c) for n, c in pastes if n == "prepare"]
    assert submits and all(w[1] == "submit" and "--as" in w for w in submits), submits
    bindir = tmp_path / "bin"
    _fake_relay(bindir)
    for shell in ("bash", "zsh"):
        if shutil.which(shell) is None:
            continue
        log = tmp_path / f"{shell}-{cols}.log"
        typed = [c.replace("\n", "\n") for _, c in pastes]
        seen = _shell_session(shell, typed, log, bindir, cols)
        records = _records(log)
        assert len(records) == len(pastes), (shell, seen, pastes, records)
        for (name, command), record in zip(pastes, records, strict=True):
            words = one_line(command)
            if words[0] == "eval":  # eval "$(relay ...)": the words inside
                words = shlex.split(words[1][2:-1])
            assert ["relay", *record["argv"]] == words, (shell, name, command, record)
            if "--home" in words:
                at = words.index("--home") + 1
                assert words[at] in (str(home), str(unsafe)), (name, command)
            elif not (f"`{command}`" in FIXED_HINTS and TEMPLATE.search(command)):
                # a relay command acting on the home carries the --home it was given (a
                # template in a code's fixed hint, `relay show ID`, is one text for every
                # call: the error's detail names the command itself)
                assert words[1] in ("hook",), (shell, name, command)
        assert "command not found" not in seen, seen


def test_the_resolve_hint_was_a_pipeline_in_bash(tmp_path):
    """What main printed after a late ack, pasted: bash runs `relay resolve ID --outcome
    completed`, recorded as completed, and then `failed` and `requeue` as commands."""
    bindir = tmp_path / "bin"
    _fake_relay(bindir)
    log = tmp_path / "old.log"
    old = f"relay resolve {uuid.uuid4()} --outcome completed|failed|requeue"
    seen = _shell_session("bash", [old], log, bindir, 200)
    records = _records(log)
    assert records[0]["argv"][-2:] == ["--outcome", "completed"]
    assert "failed: command not found" in seen or "command not found" in textwrap.dedent(seen)
