"""`relay hook install|uninstall claude|codex|gemini|opencode|copilot` (design.md §12) on
real settings files (opencode: relay's own plugin file).

The installed entries are checked against each runtime's settings format, stored as data in
tests/fixtures/*/schemas/ from the runtimes' shipped packages.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from testsupport.schema_subset import errors

# runtime settings files only, never the store: once (tests/conftest.py)
pytestmark = pytest.mark.one_backend

FIXTURES = Path(__file__).parents[1] / "fixtures"
SETTINGS_SCHEMA = {
    "claude": "claude/schemas/settings.hooks.json",
    "codex": "codex/schemas/hooks-json.hooks.json",
    "gemini": "gemini/schemas/settings.hooks.json",
    "copilot": "copilot/schemas/hooks-file.hooks.json",
}


@pytest.fixture
def home(tmp_path, relay, monkeypatch):
    """A person's home directory with no agent configuration yet."""
    h = tmp_path / "person"
    h.mkdir()
    for var in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_CLI_HOME",
        "XDG_CONFIG_HOME",
        "COPILOT_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    relay.env["HOME"] = str(h)
    return h


def settings_file(home: Path, runtime: str) -> Path:
    return {
        "claude": home / ".claude" / "settings.json",
        "codex": home / ".codex" / "hooks.json",
        "gemini": home / ".gemini" / "settings.json",
        "opencode": home / ".config" / "opencode" / "plugins" / "relay.js",
        "copilot": home / ".copilot" / "hooks" / "relay.json",
    }[runtime]


# What a person already has: other keys, another tool's hooks on the same events.
THEIRS = {
    "claude": {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PreToolUse": [
                {
                    "matcher": "Bash",
                    "hooks": [{"type": "command", "command": "./audit.sh", "timeout": 5}],
                }
            ],
        },
    },
    "codex": {
        "hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": "echo hi", "timeout": 2}]}]
        }
    },
    "gemini": {
        "theme": "GitHub",
        "hooksConfig": {"enabled": True},
        "hooks": {
            "AfterAgent": [
                {
                    "matcher": "*",
                    "hooks": [
                        {
                            "name": "lint",
                            "type": "command",
                            "command": "npm run lint",
                            "timeout": 30000,
                        }
                    ],
                }
            ]
        },
    },
    # Copilot CLI's own format (camelCase events, `bash`/`timeoutSec`) next to relay's
    "copilot": {
        "version": 1,
        "hooks": {
            "sessionStart": [{"type": "command", "bash": "./log.sh", "timeoutSec": 5}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
    },
}


def install(relay, *args):
    r = relay("hook", "install", *args, "--json")
    assert r.code == 0, r.err
    return r.json


def commands(doc: dict, event: str) -> list[str]:
    return [h["command"] for g in doc.get("hooks", {}).get(event, []) for h in g["hooks"]]


@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "copilot"])
def test_install_merges_keeps_everything_else_and_a_second_install_changes_nothing(
    relay, home, runtime
):
    path = settings_file(home, runtime)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(THEIRS[runtime], indent=4))
    path.chmod(0o640)
    original = path.read_bytes()

    first = install(relay, runtime)
    assert first["changed"] and first["file"] == str(path) and first["added"]
    doc = json.loads(path.read_text())
    mine = {**doc, "hooks": {e: g for e, g in doc["hooks"].items() if e[0].isupper()}}
    assert errors(mine, json.loads((FIXTURES / SETTINGS_SCHEMA[runtime]).read_text())) == []
    for key, value in THEIRS[runtime].items():  # every other key and hook is still there
        if key != "hooks":
            assert doc[key] == value
    for event, groups in THEIRS[runtime]["hooks"].items():
        for group in groups:
            assert group in doc["hooks"][event]
    assert Path(first["backup"]).read_bytes() == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    events = {
        "claude": ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"],
        "codex": ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"],
        "gemini": ["SessionStart", "BeforeAgent", "AfterAgent", "SessionEnd"],
        "copilot": ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"],
    }[runtime]
    for event in events:
        assert f"relay hook {runtime}" in commands(doc, event)

    after_first = path.read_bytes()
    second = install(relay, runtime)
    assert not second["changed"] and second["added"] == [] and second["backup"] is None
    assert len(second["unchanged"]) == len(first["added"])
    assert path.read_bytes() == after_first
    assert len(list(path.parent.glob("*.relay-backup-*"))) == 1

    removed = relay("hook", "uninstall", runtime, "--json").json
    assert removed["changed"] and len(removed["removed"]) == len(first["added"])
    assert json.loads(path.read_text()) == THEIRS[runtime]
    again = relay("hook", "uninstall", runtime, "--json").json
    assert not again["changed"] and json.loads(path.read_text()) == THEIRS[runtime]


def test_claude_gets_the_asyncrewake_waiter_and_codex_only_when_asked(relay, home):
    install(relay, "claude")
    claude = json.loads(settings_file(home, "claude").read_text())
    wake = [
        h
        for g in claude["hooks"]["Stop"]
        for h in g["hooks"]
        if h["command"] == "relay hook claude --wake"
    ]
    assert wake == [
        {
            "type": "command",
            "command": "relay hook claude --wake",
            "timeout": 3660,
            "asyncRewake": True,
        }
    ]
    assert "relay hook claude --wake" in commands(claude, "SessionStart")

    plain = install(relay, "codex")
    assert any("--wake" in t for t in plain["todo"])
    codex = json.loads(settings_file(home, "codex").read_text())
    assert not any("--wake" in c for e in codex["hooks"] for c in commands(codex, e))
    assert [h["timeout"] for g in codex["hooks"]["SessionEnd"] for h in g["hooks"]] == [3]
    woken = install(relay, "codex", "--wake")
    assert [a["event"] for a in woken["added"]] == ["SessionStart", "Stop"]
    codex = json.loads(settings_file(home, "codex").read_text())
    wake = [h for g in codex["hooks"]["Stop"] for h in g["hooks"] if "--wake" in h["command"]]
    assert wake == [
        {"type": "command", "command": "relay hook codex --wake", "timeout": 3660, "async": True}
    ]
    assert any("Hooks need review" in t for t in woken["todo"])
    r = relay("hook", "install", "gemini", "--wake", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error")


def test_gemini_timeouts_are_milliseconds(relay, home):
    install(relay, "gemini")
    doc = json.loads(settings_file(home, "gemini").read_text())
    timeouts = [h["timeout"] for e in doc["hooks"] for g in doc["hooks"][e] for h in g["hooks"]]
    assert timeouts == [10000] * 5  # its four events and the Notification relay records


@pytest.mark.parametrize("runtime", ["claude", "codex", "gemini", "copilot"])
def test_invalid_json_is_refused_and_the_file_is_unchanged(relay, home, runtime):
    path = settings_file(home, runtime)
    path.parent.mkdir(parents=True)
    for bad in (
        b'{"hooks": {',
        b'// my settings\n{"model": "opus"}\n',
        b"[1, 2]",
        b'{"hooks": []}',
        b'{"hooks": {"SessionStart": {"hooks": []}}}',
        # NaN and Infinity are not JSON (Python's reader takes them); 1e999 is, but
        # no double holds it, so writing it back would give `Infinity`: not JSON
        b'{"x": NaN}',
        b'{"x": -Infinity}',
        b'{"x": [1e999]}',
    ):
        path.write_bytes(bad)
        for args in (("install", runtime), ("uninstall", runtime)):
            r = relay("hook", *args, "--json")
            assert (r.code, r.error["code"], r.out) == (2, "usage_error", ""), bad
            assert "nothing was changed" in r.error["message"]
            assert path.read_bytes() == bad
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no backup, no temp


def test_dry_run_writes_nothing(relay, home):
    r = relay("hook", "install", "claude", "--dry-run")
    assert r.code == 0 and "would change" in r.out and "+ Stop: relay hook claude --wake" in r.out
    assert not settings_file(home, "claude").exists()


def test_a_missing_file_is_created_private_and_uninstall_removes_what_it_added(relay, home):
    first = install(relay, "codex")
    path = settings_file(home, "codex")
    assert first["created"] and first["backup"] is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    relay("hook", "uninstall", "codex")
    assert json.loads(path.read_text()) == {}


def test_project_settings_and_runtime_home_variables(relay, home, tmp_path, monkeypatch):
    project = tmp_path / "shop"
    project.mkdir()
    monkeypatch.chdir(project)
    assert install(relay, "claude", "--project")["file"] == str(project / ".claude/settings.json")
    assert install(relay, "gemini", "--project")["file"] == str(project / ".gemini/settings.json")
    codex = install(relay, "codex", "--project")
    assert codex["file"] == str(project / ".codex/hooks.json")
    assert any("trusts" in t for t in codex["todo"])
    relay.env.update(
        {
            "CODEX_HOME": str(tmp_path / "ch"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
            "GEMINI_CLI_HOME": str(tmp_path / "gh"),
        }
    )
    assert install(relay, "codex")["file"] == str(tmp_path / "ch" / "hooks.json")
    assert install(relay, "claude")["file"] == str(tmp_path / "cc" / "settings.json")
    assert install(relay, "gemini")["file"] == str(tmp_path / "gh" / ".gemini" / "settings.json")


def test_copilot_hooks_go_to_its_hooks_directories(relay, home, tmp_path, monkeypatch):
    """Copilot CLI 1.0.102 combines every ``*.json`` in ``$COPILOT_HOME/hooks/`` (default
    ``~/.copilot/hooks/``) and, in a trusted folder, ``.github/hooks/``: relay's is
    ``relay.json`` there, in Claude Code's format, 10 s timeouts, no waiter."""
    project = tmp_path / "shop"
    project.mkdir()
    monkeypatch.chdir(project)
    first = install(relay, "copilot")
    assert first["file"] == str(home / ".copilot" / "hooks" / "relay.json")
    doc = json.loads(Path(first["file"]).read_text())
    assert doc == {
        "hooks": {
            e: [{"hooks": [{"type": "command", "command": "relay hook copilot", "timeout": 10}]}]
            for e in (
                "SessionStart",
                "UserPromptSubmit",
                "Stop",
                "SessionEnd",
                "Notification",  # observed only (design.md §19)
                "ErrorOccurred",
            )
        }
    }
    assert any("relay run --as NAME --kind copilot -- copilot" in t for t in first["todo"])
    proj = install(relay, "copilot", "--project")
    assert proj["file"] == str(project / ".github" / "hooks" / "relay.json")
    assert any("trust" in t for t in proj["todo"])
    relay.env["COPILOT_HOME"] = str(tmp_path / "cp")
    assert install(relay, "copilot")["file"] == str(tmp_path / "cp" / "hooks" / "relay.json")
    r = relay("hook", "install", "copilot", "--wake", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error")
    assert "cannot wake an idle GitHub Copilot CLI session" in r.error["message"]


def test_a_symlinked_settings_file_is_refused_and_its_target_untouched(relay, home, tmp_path):
    """A settings file kept elsewhere (dotfiles) and linked in: relay does not write
    through the link (design.md §12); the person edits the file or replaces the link."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text('{"model": "opus"}')
    (home / ".claude").mkdir()
    os.symlink(real, settings_file(home, "claude"))
    err = _refused_unchanged(relay, home, "claude", "storage_error")
    assert "symbolic link" in err["message"] and "replace" in err["hint"]
    assert settings_file(home, "claude").is_symlink()
    assert real.read_text() == '{"model": "opus"}' and list(dotfiles.iterdir()) == [real]


def test_relays_entries_are_recognised_by_their_command_only(relay, home):
    """An entry with relay's command written by hand (an absolute path, the old snippet)
    counts as installed; a different relay command is the person's own."""
    path = settings_file(home, "claude")
    path.parent.mkdir()
    own = {"type": "command", "command": "relay hook claude --as reviewer"}
    path.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": "/opt/relay/bin/relay hook claude",
                                    "timeout": 10,
                                }
                            ]
                        },
                        {"hooks": [own]},
                    ]
                }
            }
        )
    )
    added = install(relay, "claude")["added"]
    assert {"event": "Stop", "command": "relay hook claude"} not in added
    relay("hook", "uninstall", "claude")
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [own]}]}}


def test_human_output_says_what_changed_and_what_is_left(relay, home):
    r = relay("hook", "install", "gemini")
    assert r.code == 0
    assert f"changed {settings_file(home, 'gemini')} (new file)" in r.out
    assert "+ BeforeAgent: relay hook gemini" in r.out
    assert "still to do:" in r.out and "relay run --as NAME --kind gemini -- gemini" in r.out
    r = relay("hook", "install", "gemini")
    assert "nothing to change" in r.out


def test_unknown_agent_is_a_usage_error(relay, home):
    r = relay("hook", "install", "aider", "--json")
    assert (r.code, r.error["code"]) == (2, "usage_error")


def test_human_output_fits_a_real_80_column_terminal(relay, monkeypatch):
    import tempfile

    short_home = tempfile.mkdtemp(prefix="h", dir="/tmp")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    code, out = relay.pty("hook", "install", "codex", env={"HOME": short_home})
    out = out.replace("\r\n", "\n")
    assert code == 0, out
    assert "+ Stop: relay hook codex" in out
    assert "Hooks need review" in " ".join(out.split())  # (wrapped at word boundaries)
    assert max(len(line) for line in out.splitlines()) <= 80, out


# ------------------------------------------------------------ odd settings files
def _refused_unchanged(relay, home, runtime: str, code: str) -> dict:
    path = settings_file(home, runtime)
    before = (os.lstat(path), path.read_bytes() if path.is_file() else None)
    r = relay("hook", "install", runtime, "--json")
    assert (r.code, r.error["code"]) == ({"storage_error": 7, "usage_error": 2}[code], code), r
    after = (os.lstat(path), path.read_bytes() if path.is_file() else None)
    assert after[0].st_mtime_ns == before[0].st_mtime_ns and after[1] == before[1]
    assert list(path.parent.glob("*.relay-backup-*")) == []
    return r.error


def test_a_fifo_as_the_settings_file_is_refused_without_hanging(relay, home):
    path = settings_file(home, "claude")
    path.parent.mkdir()
    os.mkfifo(path)
    err = _refused_unchanged(relay, home, "claude", "storage_error")
    assert "not a regular file" in err["message"]


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(relay, home):
    path = settings_file(home, "codex")
    path.parent.mkdir()
    path.symlink_to("/dev/zero")
    err = _refused_unchanged(relay, home, "codex", "storage_error")
    assert "symbolic link" in err["message"]


def test_a_read_only_settings_file_is_refused_unchanged(relay, home):
    path = settings_file(home, "claude")
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS["claude"]))
    path.chmod(0o444)
    err = _refused_unchanged(relay, home, "claude", "storage_error")
    assert "read-only" in err["message"] and str(path) in err["hint"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    dry = relay("hook", "install", "claude", "--dry-run", "--json")
    assert dry.error["code"] == "storage_error"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_settings_file_owned_by_another_user_is_refused_unchanged(relay, home):
    path = settings_file(home, "gemini")
    path.parent.mkdir()
    path.write_text(json.dumps(THEIRS["gemini"]))
    os.chown(path, 65534, 65534)
    err = _refused_unchanged(relay, home, "gemini", "storage_error")
    assert "another user" in err["message"]


def test_a_settings_file_that_is_not_json_gets_a_hint_that_says_so(relay, home):
    path = settings_file(home, "claude")
    path.parent.mkdir()
    path.write_text('{"model": "opus",}')
    err = _refused_unchanged(relay, home, "claude", "usage_error")
    assert "valid JSON" in err["hint"] and "command line" not in err["hint"]


def test_install_names_the_running_relay_by_path_when_path_has_none(
    relay, home, tmp_path, monkeypatch
):
    bin_dir = tmp_path / "venv bin"
    bin_dir.mkdir()
    me = bin_dir / "relay"
    me.write_text("#!/bin/sh\n")
    me.chmod(0o755)
    monkeypatch.setattr("sys.argv", [str(me)])
    r = relay("hook", "install", "claude", env={"PATH": "/usr/bin:/bin"})
    assert r.code == 0, r.err
    doc = json.loads(settings_file(home, "claude").read_text())
    assert commands(doc, "Stop") == [f"'{me}' hook claude", f"'{me}' hook claude --wake"]
    assert "absolute path" in " ".join(r.out.split())
    again = relay("hook", "install", "claude", "--json", env={"PATH": "/usr/bin:/bin"})
    assert again.json["changed"] is False  # relay's entries are known by their command
    # Run by a relay that PATH finds: a bare `relay`, as before.
    monkeypatch.setattr("sys.argv", [str(me)])
    r = relay("hook", "install", "codex", "--json", env={"PATH": f"{bin_dir}:/usr/bin"})
    assert commands(json.loads(settings_file(home, "codex").read_text()), "Stop") == [
        "relay hook codex"
    ]


def test_install_completes_runtimes_not_files(relay):
    from test_completion import complete

    assert complete(relay, "relay hook install ") == [
        "claude",
        "codex",
        "gemini",
        "opencode",
        "copilot",
    ]
    assert complete(relay, "relay hook uninstall co") == ["codex", "copilot"]


# ------------------------------------------------------------ opencode: a plugin file
def _fake_opencode(tmp_path: Path, version: str) -> str:
    """A PATH whose `opencode --version` prints ``version``."""
    d = tmp_path / f"bin-{version}"
    d.mkdir()
    prog = d / "opencode"
    prog.write_text(f"#!/bin/sh\necho {version}\n")
    prog.chmod(0o755)
    return f"{d}:{os.environ['PATH']}"


def test_opencode_gets_relays_plugin_file_next_to_the_persons_own(relay, home):
    from relay_cli.agents import opencode_plugin

    plugins = settings_file(home, "opencode").parent
    plugins.mkdir(parents=True)
    theirs = plugins / "notify.js"
    theirs.write_text("export default { id: 'notify', server: async () => ({}) }\n")
    first = install(relay, "opencode")
    path = settings_file(home, "opencode")
    assert first["changed"] and first["created"] and first["file"] == str(path)
    assert first["added"] == [{"event": "plugin", "command": "relay hook opencode"}]
    assert first["backup"] is None
    text = path.read_text()
    assert text.splitlines()[0] == opencode_plugin.MARKER and "hook" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert any("relay run --as NAME --kind opencode -- opencode" in t for t in first["todo"])
    second = install(relay, "opencode")
    assert not second["changed"] and second["unchanged"] == first["added"]
    assert path.read_text() == text
    removed = relay("hook", "uninstall", "opencode", "--json").json
    assert removed["changed"] and removed["removed"][0]["event"] == "plugin"
    assert not path.exists() and theirs.exists()
    assert sorted(p.name for p in plugins.iterdir()) == ["notify.js"]
    again = relay("hook", "uninstall", "opencode", "--json").json
    assert not again["changed"]


def test_an_older_relay_plugin_is_replaced_and_a_persons_file_refused_unchanged(relay, home):
    from relay_cli.agents import opencode_plugin

    path = settings_file(home, "opencode")
    path.parent.mkdir(parents=True)
    path.write_text(opencode_plugin.MARKER + "\n// an older relay's plugin\n")
    r = install(relay, "opencode")
    assert r["changed"] and r["removed"] and "an older" not in path.read_text()
    path.write_text("// the person's own relay.js\nexport default {}\n")
    for command in ("install", "uninstall"):
        before = (os.lstat(path).st_mtime_ns, path.read_bytes())
        out = relay("hook", command, "opencode", "--json")
        assert (out.code, out.error["code"]) == (2, "usage_error"), out
        assert "is not relay's plugin" in out.error["message"]
        assert (os.lstat(path).st_mtime_ns, path.read_bytes()) == before


def test_opencode_plugin_symlink_or_fifo_is_refused_unchanged(relay, home, tmp_path):
    path = settings_file(home, "opencode")
    path.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere.js"
    target.write_text("// relay-opencode-plugin: 1\n")
    path.symlink_to(target)
    err = _refused_unchanged(relay, home, "opencode", "storage_error")
    assert "symbolic link" in err["message"] and target.read_text().startswith("//")
    path.unlink()
    os.mkfifo(path)
    err = _refused_unchanged(relay, home, "opencode", "storage_error")
    assert "not a regular file" in err["message"]


def test_opencode_plugin_goes_where_opencode_looks(relay, home, tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    r = relay("hook", "install", "opencode", "--json", env={"XDG_CONFIG_HOME": str(xdg)}).json
    assert r["file"] == str(xdg / "opencode" / "plugins" / "relay.js")
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    r = install(relay, "opencode", "--project")
    assert r["file"] == str(project / ".opencode" / "plugins" / "relay.js")
    assert any("loads .opencode/plugins/" in t for t in r["todo"])


def test_an_opencode_version_relay_does_not_know_is_refused_before_anything_is_written(
    relay, home, tmp_path
):
    path = settings_file(home, "opencode")
    r = relay(
        "hook", "install", "opencode", "--json", env={"PATH": _fake_opencode(tmp_path, "2.0.1")}
    )
    assert (r.code, r.error["code"]) == (2, "usage_error"), r
    assert "opencode 2.0.1 is not a version" in r.error["message"]
    assert "opencode 1.x" in r.error["message"] and not path.parent.exists()
    ok = relay(
        "hook", "install", "opencode", "--json", env={"PATH": _fake_opencode(tmp_path, "1.19.2")}
    )
    assert ok.code == 0 and path.exists()
    assert not any("did not answer" in t for t in ok.json["todo"])
    unknown = install(relay, "opencode")  # no opencode on this PATH: installed, and said so
    assert any("could not check the version" in t for t in unknown["todo"])
