"""A hook with a peer starts without Typer (design.md §18): `relay hook RUNTIME` in the
words its settings use is read by ``relay_cli.cli.hook_call`` and answered without Typer,
rich, Click or the standard library's dataclasses; every other word goes to the command
line, which answers as it always has. The answers are the same either way."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import Relay, new_id
from test_hook_text import FIXTURE_NAMES, event

from relay_cli.agents import runtimes
from relay_cli.cli import hook_call
from relay_cli.entry import HOOK_RUNTIMES  # (the fast path's own copy of the names)

# what a hook with a peer must not start (the command line's and the screens' libraries;
# dataclasses brings inspect, ast and dis; typing, 16 million instructions, is for the
# type checker only on this path)
NOT_ON_THE_HOOK_PATH = (
    "typer",
    "click",
    "rich",
    "sqlite_utils",
    "dataclasses",
    "inspect",
    "typing",
)


def loaded_by(
    relay, args: list[str], data: str, env: dict
) -> tuple[subprocess.CompletedProcess, set]:
    """Run `relay ARGS` with ``data`` on stdin; the modules it imported of
    ``NOT_ON_THE_HOOK_PATH`` (``-X importtime`` names each as it is imported: a hook
    ends with ``os._exit``, so nothing can be asked at its exit)."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "relay_cli", *args],
        input=data.encode(),
        capture_output=True,
        env=relay._env(env),
        timeout=60,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in p.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "relay_cli.agents.hook" in modules  # (the probe sees the hook's imports)
    return p, {m for m in modules if m.split(".")[0] in NOT_ON_THE_HOOK_PATH}


def session(relay) -> dict[str, str]:
    """A request from boss waits for worker, whose session (as `relay run` starts one) is
    the environment returned."""
    relay("peers", "add", "boss")
    joined = json.loads(relay("peers", "join", "worker", "--lease", "1h", "--json").out)
    relay("send", "--as", "boss", "--to", "worker", "--id", new_id(), "please review")
    return {"RELAY_PEER": "worker", "RELAY_SESSION": joined["token"]}


@pytest.mark.parametrize("runtime", runtimes.NAMES)
def test_a_hook_with_a_peer_and_work_waiting_starts_without_typer(relay, runtime):
    worker = session(relay)
    prompt = event(runtime, FIXTURE_NAMES[runtime]["UserPromptSubmit"])
    p, heavy = loaded_by(relay, ["hook", runtime], prompt, worker)
    assert p.returncode == 0, p.stderr
    assert b"please review" not in p.stdout  # (the listing names it; never its text)
    assert b"boss" in p.stdout  # the hook did its work: the request is announced
    # (on PostgreSQL the store's driver modules, store/pg*.py, still import typing)
    assert heavy - ({"typing"} if relay.backend == "postgres" else set()) == set()


def test_hook_options_are_read_as_the_command_line_reads_them(relay):
    """Every option of `relay hook RUNTIME` is one ``hook_call`` reads, and no other."""
    from relay_cli.cli.app import build_command
    from relay_cli.cli.commands import app

    group = build_command(app).commands["hook"]
    for name in HOOK_RUNTIMES:
        command = group.commands[name]
        declared = {o for p in command.params for o in p.opts}
        assert declared - {"--help", "-h"} == set(hook_call.VALUE_OPTIONS) | set(hook_call.FLAGS)
        flags = {o for p in command.params if p.is_flag for o in p.opts}
        assert flags - {"--help", "-h"} == set(hook_call.FLAGS)
    assert set(HOOK_RUNTIMES) == set(runtimes.NAMES)


@pytest.mark.parametrize(
    "argv",
    [
        ["hook", "claude"],
        ["hook", "codex", "--wake"],
        ["hook", "claude", "--as", "w", "--kind", "claude", "--lease", "2h"],
        ["hook", "claude", "--as=w", "--home=/tmp/h", "--json", "--timeout", "60"],
        ["--home", "/tmp/h", "hook", "gemini"],
        ["--home=/tmp/h", "--database-url", "postgresql://u@h/db", "hook", "opencode"],
        ["hook", "copilot", "--database-url", ""],
    ],
)
def test_the_words_a_hook_is_given_are_read_without_typer(argv):
    assert hook_call.parse(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        ["hook"],
        ["hook", "--help"],
        ["hook", "claude", "--help"],
        ["hook", "claude", "-h"],
        ["hook", "install", "claude"],
        ["hook", "uninstall", "codex"],
        ["hook", "nosuch"],
        ["hook", "claude", "--as"],  # a value missing
        ["hook", "claude", "--as", "--wake"],  # a value that looks like an option
        ["hook", "claude", "--wake=yes"],  # a flag given a value
        ["hook", "claude", "--unknown"],  # an option only the command line knows
        ["hook", "claude", "extra"],
        ["hook", "claude", "--", "--as"],
        ["hook", "claude", "--database-url", "mysql://h/db"],  # refused, with its error
        ["--version", "hook", "claude"],
        ["list"],
        ["send", "--to", "hook", "claude"],
    ],
)
def test_every_other_word_goes_to_the_command_line(argv):
    assert hook_call.parse(argv) is None


def test_what_is_read_is_what_the_command_line_reads():
    call = hook_call.parse(
        ["--home", "/r", "hook", "claude", "--as", "w", "--home", "/c", "--wake", "--lease=2h"]
    )
    assert call is not None
    assert (call.runtime, call.root_home, call.home, call.as_, call.wake, call.lease) == (
        "claude",
        "/r",
        "/c",
        "w",
        True,
        "2h",
    )
    assert (call.kind, call.timeout, call.database_url, call.json_) == (None, None, None, False)
    # the scheme in lower case, as the command line's --database-url callback makes it
    url = hook_call.parse(["hook", "claude", "--database-url", " POSTGRESQL://u@h/db "])
    assert url is not None and url.database_url == "postgresql://u@h/db"


@pytest.mark.parametrize("runtime", runtimes.NAMES)
def test_the_answer_is_the_same_through_the_command_line(tmp_path, runtime):
    """The same hook in two homes alike (the parsing is the command line's: one backend
    shows it), once as the settings call it (``hook_call``) and once with an option only
    the command line knows, which a hook ignores (so Typer reads it): the same answer,
    byte for byte, and the same exit status."""
    rid = new_id()
    answers = []
    for n, extra in enumerate(([], ["--not-a-hook-option"])):
        relay = Relay(tmp_path / f"home{n}")
        relay("peers", "add", "boss")
        joined = json.loads(relay("peers", "join", "worker", "--lease", "1h", "--json").out)
        relay("send", "--as", "boss", "--to", "worker", "--id", rid, "please review")
        env = {"RELAY_SESSION": joined["token"]}
        for name in ("SessionStart", "UserPromptSubmit", "Stop"):
            data = event(runtime, FIXTURE_NAMES[runtime][name])
            r = relay("hook", runtime, "--as", "worker", *extra, input=data, env=env)
            answers.append((n, name, r.code, r.out, r.err))
    first = [a[1:] for a in answers if a[0] == 0]
    second = [a[1:] for a in answers if a[0] == 1]
    assert first == second
    assert any("boss" in out for _, _, out, _ in first)
    assert all(json.loads(out) for _, _, out, _ in first if out)


def test_a_waiter_claude_code_would_wait_for_exits_before_relay_is_imported():
    """In Claude Code's print mode and SDK a wake waiter does nothing (design.md §12): the
    entry point ends it before relay is imported, as the runtime table says when."""
    from relay_cli import entry

    assert entry.BACKGROUND_WHEN == {
        r.name: r.background_when for r in runtimes.ALL if r.background_when
    }
    peer = {"RELAY_PEER": "w", "RELAY_SESSION": "t"}
    wake = ["hook", "claude", "--wake"]
    assert entry.idle_hook(wake, {**peer, "CLAUDE_CODE_ENTRYPOINT": "sdk-py"})
    assert entry.idle_hook(wake, {**peer, "CLAUDE_CODE_SESSION_ATTENDED": "0"})
    # in the TUI it waits; without --wake it is a hook; debugging takes the whole path
    tui = {**peer, "CLAUDE_CODE_ENTRYPOINT": "cli", "CLAUDE_CODE_SESSION_ATTENDED": "1"}
    assert not entry.idle_hook(wake, tui)
    assert not entry.idle_hook(["hook", "claude"], {**peer, "CLAUDE_CODE_ENTRYPOINT": "sdk-py"})
    assert not entry.idle_hook(
        wake, {**peer, "CLAUDE_CODE_ENTRYPOINT": "sdk-py", "RELAY_DEBUG": "1"}
    )
    assert not entry.idle_hook([*wake, "--help"], {**peer, "CLAUDE_CODE_ENTRYPOINT": "sdk-py"})
    # and the runtime table agrees on each of these environments
    for environ in ({"CLAUDE_CODE_ENTRYPOINT": "sdk-py"}, tui, peer):
        assert entry.idle_hook(wake, {**peer, **environ}) == runtimes.CLAUDE.waits_in_foreground(
            environ
        )
