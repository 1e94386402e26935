"""Each call works with one context, built once by the command line and handed down
(design.md §8): its clock, its database URL, its environment and its streams; nothing of
one call is left in the process for the next, and below the command line nothing of the
process is read."""

from __future__ import annotations

import ast
import io
import json
import os
import sys
from pathlib import Path

import pytest

from relay_cli.core.clock import Clock, iso


def test_a_call_handed_a_fake_clock_keeps_relays_time_by_it(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    frozen = Clock().now_ms() + 20_000  # a stopped clock, 20 s ahead (within the lease)
    r = relay(
        "send",
        "--to",
        "bob",
        "--json",
        "-",
        input="hi",
        env=alice,
        clock=Clock(source=lambda: frozen, fixed=True),
    )
    assert r.code == 0, r.err
    assert r.json["created_at"] == iso(frozen)
    # the next call, handed nothing, is back on the real clock
    assert relay("send", "--to", "bob", "--json", "-", input="hi", env=alice).json[
        "created_at"
    ] < iso(frozen)


def test_an_offset_clock_moves_time_as_relay_time_offset_does(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    rid = relay.send(alice, "bob", "hi", "--ttl", "60s").json["id"]
    r = relay("show", rid, "--json", env=alice, clock=Clock("61"))
    assert r.json["state"] == "expired"


def test_a_database_url_given_to_one_call_is_not_used_by_the_next(relay):
    relay.make_home()  # the home exists (a read makes none)
    r = relay("list", "--json", "--database-url", "mysql://nowhere/x")
    assert r.code == 2 and r.error["code"] == "usage_error"
    assert relay("list", "--json").code == 0


def test_a_store_carries_the_clock_it_was_opened_with(relay):
    store = relay.open_store()
    try:
        store.clock = Clock("3600")
        assert abs(store.clock.now_ms() - Clock().now_ms() - 3_600_000) < 5_000
    finally:
        store.close()


def test_a_calls_colour_choice_wins_over_the_environment():
    from relay_cli.core.output import Output

    forced = {"FORCE_COLOR": "1"}
    assert Output(environ=forced).color and not Output(color_choice=False, environ=forced).color
    plain = {"NO_COLOR": "1"}
    assert not Output(environ=plain).color and Output(color_choice=True, environ=plain).color
    assert not Output(json_mode=True, color_choice=True).color


# ------------------------------------------------- the context is the one reader
# (design.md §8): below the command line relay reads nothing of the process; a call's
# environment and streams are its context's.

PACKAGE = Path(__file__).resolve().parent.parent / "relay_cli"
# what reads the process below cli/: only the hook fast path, before relay is imported
ALLOWED_READS = {("entry.py", "os.environ")}
PROCESS = {
    ("os", "environ"),
    ("os", "getenv"),
    ("os", "putenv"),
    ("os", "unsetenv"),
    ("sys", "stdin"),
    ("sys", "stdout"),
    ("sys", "stderr"),
}
# module-level values that would hold one call's state for the next
PER_PROCESS_STATE = {("threading", "local"), ("weakref", "WeakSet"), ("contextvars", "ContextVar")}
# the module-level names a function may rebind: caches of facts of the process itself
# (the boot, /proc, the PID namespace, a module loaded on first use), never of a call
CACHES = {
    ("core/process.py", "_BOOT_ID"),
    ("core/process.py", "_PROC_OURS"),
    ("core/process.py", "_PID_NAMESPACE"),
    ("core/digest.py", "_SHA256"),
    ("store/pg.py", "_driver_mod"),
    ("store/pg.py", "_Connection"),
    ("store/pg.py", "_Cursor"),
}


def _process_reads(package: Path) -> list[str]:
    """Where a module below cli/ reads the process's environment or standard streams, or
    keeps state of a call in the module, as ``path:line: what``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            what = None
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr) in PROCESS
            ):
                what = f"{node.value.id}.{node.attr}"
            elif isinstance(node, ast.ImportFrom) and node.module in ("os", "sys"):
                names = [a.name for a in node.names if (node.module, a.name) in PROCESS]
                what = f"from {node.module} import {', '.join(names)}" if names else None
            elif isinstance(node, ast.Global):
                names = [n for n in node.names if (rel, n) not in CACHES]
                what = f"global {', '.join(names)}" if names else None
            if what and (rel, what) not in ALLOWED_READS:
                found.append(f"{rel}:{node.lineno}: {what}")
        for node in tree.body:  # module level
            value = getattr(node, "value", None)
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name)
                and (value.func.value.id, value.func.attr) in PER_PROCESS_STATE
            ):
                found.append(f"{rel}:{node.lineno}: {value.func.value.id}.{value.func.attr}()")
    return found


def test_nothing_below_the_command_line_reads_the_process():
    """os.environ, sys.stdin/stdout/stderr and module-level state of a call appear below
    cli/ nowhere but in entry.py's hook fast path: the library is handed its inputs."""
    assert _process_reads(PACKAGE) == []


def test_the_check_finds_a_read_of_the_process(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "x.py").write_text(
        "import os, sys, threading\n"
        "from os import environ\n"
        "_state = threading.local()\n"
        "_seen = 0\n"
        "def f():\n"
        "    global _seen\n"
        "    return os.environ.get('X'), sys.stdin.read()\n"
    )
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "y.py").write_text("import os\nos.environ.get('X')\n")
    assert _process_reads(tmp_path) == [
        "core/x.py:2: from os import environ",
        "core/x.py:6: global _seen",
        "core/x.py:7: os.environ",
        "core/x.py:7: sys.stdin",
        "core/x.py:3: threading.local()",
    ]


class _Trap(io.StringIO):
    """A process stream relay must not touch: what is read from it is poison, what is
    written to it is kept to be shown."""

    def __init__(self) -> None:
        super().__init__("poison from the process's stdin\n")
        self.written: list[str] = []

    def write(self, s: str) -> int:
        self.written.append(s)
        return len(s)


# what the process's environment says while the calls run: every answer below would
# differ, or fail, if relay read any of it
POISON = {
    "RELAY_HOME": "/nonexistent/poison-home",
    "RELAY_DATABASE_URL": "mysql://poison/db",
    "RELAY_PEER": "mallory",
    "RELAY_SESSION": "rly_poison",
    "RELAY_TIME_OFFSET": "not-a-number",
    "RELAY_RATE_LIMIT": "poison",
    "RELAY_QUEUE_CAP": "poison",
    "RELAY_DEBUG": "1",
    "XDG_STATE_HOME": "/nonexistent/poison-state",
    "COLUMNS": "7",
    "COMP_WORDS": "relay pee",
    "COMP_CWORD": "1",
    "FORCE_COLOR": "1",
}


def test_a_call_works_by_its_context_and_never_by_the_process(relay, monkeypatch, tmp_path):
    """A test builds a Context instead of changing the process: with every relay variable
    of the process poisoned and its standard streams trapped, calls handed a context of
    their own act as that context says (identity, home, database, clock, limits,
    terminal width, completion request), and leave the process as it was."""
    from relay_cli.cli import run
    from relay_cli.core.context import Context

    for name, value in POISON.items():
        monkeypatch.setenv(name, value)
    traps = {name: _Trap() for name in ("stdin", "stdout", "stderr")}
    for name, trap in traps.items():
        monkeypatch.setattr(sys, name, trap)
    before = dict(os.environ)
    base = {"PATH": before["PATH"], "HOME": str(tmp_path), "RELAY_HOME": str(relay.home)}
    if relay.url:
        base["RELAY_DATABASE_URL"] = relay.url

    def call(*args: str, env: dict | None = None, text: str = ""):
        out, err = io.StringIO(), io.StringIO()
        context = Context.from_environ(
            {**base, **(env or {})},
            stdin=io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"),
            stdout=out,
            stderr=err,
        )
        code = run(list(args), context=context)
        return code, out.getvalue(), err.getvalue()

    code, out, err = call("peers", "join", "alice", "--json")
    assert code == 0, err
    alice = {"RELAY_PEER": "alice", "RELAY_SESSION": json.loads(out)["token"]}
    assert call("peers", "join", "bob", "--json")[0] == 0
    # identity, text on stdin, the rate limit and queue cap: the context's
    code, out, err = call(
        "send", "--to", "bob", "--ttl", "60s", "--json", "-", env=alice, text="hi"
    )
    assert code == 0, err
    sent = json.loads(out)
    assert sent["from"] == "alice"
    # the clock: the context's offset (the process's is malformed)
    code, out, err = call("show", sent["id"], "--json", env={"RELAY_TIME_OFFSET": "61"})
    assert (code, json.loads(out)["state"]) == (0, "expired"), err
    # the limits: the context's queue cap, as doctor reports it
    code, out, err = call("doctor", "--json", env={"RELAY_QUEUE_CAP": "7"})
    assert json.loads(out)["queue_cap"] == 7, err
    # help as wide as the context's terminal (the process says 7 columns)
    code, out, _ = call("send", "--help", env={"COLUMNS": "100"})
    assert code == 0 and max(map(len, out.splitlines())) > 70
    # the shell's completion request: the context's words (the process's say `pee`)
    complete = {"_RELAY_COMPLETE": "complete_bash", "COMP_WORDS": "relay sen", "COMP_CWORD": "1"}
    code, out, _ = call(env=complete)
    assert (code, out.split()) == (0, ["send"])
    # nothing of the process was read, written or changed
    assert dict(os.environ) == before
    assert all(trap.written == [] for trap in traps.values())
    assert traps["stdin"].tell() == 0


@pytest.mark.parametrize(
    "env",
    [
        {"XDG_STATE_HOME": "/srv/state", "HOME": "/home/ana"},
        {"XDG_STATE_HOME": "", "HOME": "/home/ana"},
        {"HOME": "/home/ana"},
    ],
)
def test_the_default_home_of_a_calls_environment_is_platformdirs_answer_in_it(env, monkeypatch):
    """relay reads the per-user state directory from the call's environment (design.md
    §2, §8) by the rule platformdirs applies to the process's: the same directory, for
    the values every platformdirs relay allows reads alike."""
    import platformdirs

    from relay_cli.store.home import default_home

    for name in ("XDG_STATE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert default_home(env) == Path(platformdirs.user_state_dir("relay"))


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"XDG_STATE_HOME": "relative/state", "HOME": "/home/ana"}, "/home/ana/.local/state"),
        ({"XDG_STATE_HOME": "  ", "HOME": "/home/ana"}, "/home/ana/.local/state"),
        ({"HOME": ""}, None),
        ({"HOME": "relative-home"}, None),
        ({}, None),
    ],
)
def test_relative_or_empty_values_give_way_as_the_xdg_rule_says(env, expected):
    """A relative XDG_STATE_HOME is ignored and a HOME that is not absolute gives way to
    the passwd entry's home (design.md §2): relay's own reading on Unix, whatever the
    installed platformdirs does with such values (it took them as given before 4.14)."""
    import pwd

    from relay_cli.store.home import default_home

    base = expected or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".local", "state")
    assert default_home(env) == Path(base) / "relay"
