"""Start-up stays cheap: rich and sqlite_utils are never imported on the hot paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# what start-up imports (PostgreSQL's: tests/store/test_postgres.py): once (tests/conftest.py)
pytestmark = pytest.mark.one_backend

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("rich", "sqlite_utils")


# The PostgreSQL driver: imported only when a PostgreSQL URL is used (design.md §13)
DRIVERS = ("psycopg2", "psycopg")


def imported_heavy(
    args: list[str], env: dict | None = None, input: bytes | None = None, heavy_names=HEAVY
):
    """Run ``python -X importtime ARGS``; return (result, heavy top-level modules imported)."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        env=env,
        input=input,
        cwd=ROOT,
        timeout=60,
    )
    heavy = set()
    for line in p.stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip()
            if module.split(".")[0] in heavy_names:
                heavy.add(module)
    return p, heavy


def test_importing_the_cli_imports_neither_rich_nor_sqlite_utils():
    code = (
        "import sys, relay_cli.cli.commands, relay_cli.cli.schema; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_help_and_send_help_import_neither(relay):
    for args in (["--help"], ["send", "--help"]):
        p, heavy = imported_heavy(["-m", "relay_cli", *args], env=relay._env(None))
        assert p.returncode == 0, p.stderr
        assert heavy == set(), (args, heavy)


def test_root_help_and_relay_id_import_no_store_module(relay):
    """Neither reaches the database, so neither pays for the store's import (its SQL
    modules), not even to forget a --database-url after the call."""
    for args in (["--help"], ["id"]):
        p = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "relay_cli", *args],
            capture_output=True,
            env=relay._env(None),
            cwd=ROOT,
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        loaded = [
            line.rsplit("|", 1)[1].strip()
            for line in p.stderr.decode("utf-8", "replace").splitlines()
            if line.startswith("import time:") and "|" in line
        ]
        assert [m for m in loaded if m.startswith("relay_cli.store")] == [], args


# What each of these costs at every start of a call that has no use for it (callgrind,
# bench/startup.py): the runtime table's frozen dataclasses ~18M instructions, OpenSSL
# (hashlib) ~11M, store/api.py ~8M, strptime's first call ~5M, sqlite3 and json ~5M each.
NOT_FOR_HELP = ("relay_cli.agents.runtimes", "sqlite3", "json", "csv", "hashlib", "_strptime")


def _own_sha256() -> bool:
    """Whether this Python has its own SHA-256 (some builds leave it to OpenSSL, and
    relay then rightly falls back to hashlib)."""
    import importlib.util

    return any(importlib.util.find_spec(m) for m in ("_sha2", "_sha256"))


NOT_FOR_SEND = (
    "relay_cli.agents.runtimes",
    "relay_cli.store.api",
    "csv",
    "_strptime",
    *(("hashlib", "_hashlib") if _own_sha256() else ()),
)


def loaded_modules(args: list[str], env: dict, input: bytes | None = None) -> set[str]:
    """Every module ``python -X importtime -m relay_cli ARGS`` imported (beyond the
    interpreter's own start)."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "relay_cli", *args],
        capture_output=True,
        env=env,
        input=input,
        cwd=ROOT,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return {
        line.rsplit("|", 1)[1].strip()
        for line in p.stderr.decode("utf-8", "replace").splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_root_help_and_relay_id_import_only_what_they_use(relay):
    """Neither runs a hook, reads the database, writes JSON or a digest, or parses a
    timestamp: none of the modules for those is imported (design.md §15)."""
    for args in (["--help"], ["id"]):
        loaded = loaded_modules(args, relay._env(None))
        assert "relay_cli.cli.requests_cmd" in loaded  # (the probe sees relay's imports)
        assert sorted(loaded & set(NOT_FOR_HELP)) == [], args


def test_send_imports_neither_the_runtime_table_nor_openssl_nor_strptime(relay):
    """A send, in human output (which shows when the request was created), hashes the
    session token with Python's own SHA-256, reads relay's timestamps without strptime
    and opens the store without its declared interface (store/api.py)."""
    alice, _ = relay.join("alice"), relay.join("bob")
    loaded = loaded_modules(["send", "--to", "bob", "-"], relay._env(alice), input=b"hello")
    assert "relay_cli.store" in loaded
    assert sorted(loaded & set(NOT_FOR_SEND)) == []


def test_building_the_hook_group_registers_its_commands(relay):
    """The `hook` group's commands are registered when the group is first built (the
    runtime table's import is paid only then): `relay hook --help` lists them all."""
    r = relay("hook", "--help")
    assert r.code == 0
    for name in ("claude", "codex", "gemini", "install", "uninstall"):
        assert f"\n  {name} " in r.out, name


def test_send_to_a_peer_imports_neither(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    env = relay._env(alice)
    names = HEAVY + (DRIVERS if relay.backend == "sqlite" else ())
    p, heavy = imported_heavy(
        ["-m", "relay_cli", "send", "--to", "bob", "-"], env=env, input=b"hello", heavy_names=names
    )
    assert p.returncode == 0, p.stderr
    assert heavy == set()


def test_python_dash_m_relay_cli_works():
    p = subprocess.run(
        [sys.executable, "-m", "relay_cli", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert p.returncode == 0 and p.stdout.startswith("relay ")


def ruff(source: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--select",
            "TID253",
            "--stdin-filename",
            str(ROOT / "relay_cli" / "probe.py"),
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_ruff_bans_module_level_imports_of_rich_and_sqlite_utils():
    pytest.importorskip("ruff", reason="a dev tool: pip install '.[dev]'")
    for module in HEAVY:
        p = ruff(f"import {module}\n")
        assert p.returncode == 1 and "TID253" in p.stdout, p.stdout + p.stderr
        p = ruff(f"from {module} import x\n")
        assert p.returncode == 1 and "TID253" in p.stdout, p.stdout + p.stderr
    p = ruff("def f():\n    import rich\n    import sqlite_utils\n    return rich, sqlite_utils\n")
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_named_command_builds_only_its_own_click_command():
    from relay_cli.cli.app import _click_command

    assert list(_click_command(["send", "--to", "x"]).commands) == ["send"]
    assert list(_click_command(["peers", "join", "x"]).commands) == ["peers"]
    full = _click_command([])
    assert {"send", "peers", "schema"} <= set(full.commands)
    assert set(_click_command(["--help"]).commands) == set(full.commands)
    assert set(_click_command(["sned"]).commands) == set(full.commands)


def test_a_mistyped_command_still_gets_a_suggestion(relay):
    r = relay("sned", "--json")
    assert r.code == 2 and r.error["code"] == "usage_error"
    assert "send" in r.error["message"]


def test_send_does_not_execute_the_ledger_watch_or_hook_modules(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    code = (
        "import sys, types, io\n"
        "from relay_cli.cli import run\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b'hi'))\n"
        "rc = run(['send', '--to', 'bob', '-'])\n"
        "names = ('relay_cli.ledger.entries', 'relay_cli.ledger.once', 'relay_cli.operate.watch', 'relay_cli.agents.hook')\n"
        "loaded = [n for n in names if type(sys.modules.get(n)) is types.ModuleType]\n"
        "print(rc, loaded, file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=relay._env(alice),
        cwd=ROOT,
    )
    assert p.stderr.strip().splitlines()[-1] == "0 []", p.stderr


def test_root_help_from_the_light_listing_equals_the_full_tree_help(relay):
    sys.path.insert(0, str(ROOT / "scripts"))
    import generate  # builds the full tree

    full = generate.help_text([])
    for args in (["--help"], ["-h"]):
        r = relay(*args, env={"COLUMNS": generate.HELP_COLUMNS, "NO_COLOR": "1", "TERM": "dumb"})
        assert r.code == 0 and r.out.rstrip() + "\n" == full
    bare = relay(env={"COLUMNS": generate.HELP_COLUMNS})
    assert bare.code == 2 and "Requests:" in bare.err and "send" in bare.err


def test_parse_iso_reads_and_refuses_as_strptime_does():
    """clock.parse_iso reads relay's own timestamps without strptime (start-up): the same
    instant as strptime gives, and anything else still goes to strptime, which reads
    it or refuses it as before."""
    from datetime import datetime, timezone

    from relay_cli.core import clock

    def by_strptime(text: str):
        try:
            dt = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        except ValueError as e:
            return ("refused", str(e))
        return int(round(dt.timestamp() * 1000))

    def by_relay(text: str):
        try:
            return clock.parse_iso(text)
        except ValueError as e:
            return ("refused", str(e))

    instants = [0, 1, 999, 1_000, 951_782_400_000, 1_709_251_199_999, 253_402_300_799_999]
    instants += [i * 7_919_993_117 % 253_402_300_799_999 for i in range(2000)]
    texts = [clock.iso(ms) for ms in instants]
    texts += [
        "2023-02-29T00:00:00.000Z",  # no such day
        "2024-13-01T00:00:00.000Z",
        "2024-01-01T24:00:00.000Z",
        "2024-01-01T00:00:60.000Z",  # strptime reads a leap second; datetime refuses it
        "0000-01-01T00:00:00.000Z",
        "2024-1-01T00:00:00.0000Z",  # strptime's own widths
        "2024-01-01T00:00:00.5Z",
        "2024-01-01T00:00:00.123456Z",
        "\u0662\u0660\u0662\u0664-01-01T00:00:00.000Z",  # other scripts' digits
        "+024-01-01T00:00:00.000Z",
        "2024-01-01 00:00:00.000Z",
        "2024-01-01T00:00:00.000z",
        "",
    ]
    for text in texts:
        assert by_relay(text) == by_strptime(text), text
    assert [clock.parse_iso(t) for t in texts[: len(instants)]] == instants


@pytest.mark.parametrize("without", [(), ("_sha2",), ("_sha2", "_sha256")])
def test_sha256_hex_is_hashlibs_digest(monkeypatch, without):
    """On this Python, and as on one that lacks its own module(s): hashlib's digest."""
    import hashlib

    from relay_cli.core import digest

    monkeypatch.setattr(digest, "_SHA256", None)
    for name in without:
        monkeypatch.setitem(sys.modules, name, None)  # its import fails
    for data in (b"", b"abc", "t\u00f6k\udcffen".encode("utf-8", "surrogateescape"), b"x" * 70000):
        assert digest.sha256_hex(data) == hashlib.sha256(data).hexdigest()


# `relay web`'s server and page (design.md §17): loaded by `relay web` alone.
WEB_ONLY = ("relay_cli.operate.web", "http.server", "socketserver", "webbrowser")


def test_only_relay_web_loads_the_web_view(relay):
    alice, _ = relay.join("alice"), relay.join("bob")
    for args, env, data in (
        (["--help"], None, None),
        (["id"], None, None),
        (["send", "--to", "bob", "-"], alice, b"hello"),
        (["list"], None, None),
        (["watch"], None, None),  # (not a terminal: one snapshot)
    ):
        loaded = loaded_modules(args, relay._env(env), input=data)
        assert sorted(m for m in loaded if m.startswith(WEB_ONLY)) == [], args
    loaded = loaded_modules(["web", "--help"], relay._env(None))
    assert "http.server" not in loaded  # not even its help
