"""Every installer and uninstaller reaches its file by one rule (design.md §12,
relay_cli/agents/own_files.py): no link below the project or user directory is followed,
relay writes only into directories and files of the caller's, and a refusal
(``storage_error``) changes nothing, not even a backup; ``--dry-run`` says the same."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.one_backend

RUNTIMES = ("claude", "codex", "gemini", "opencode", "copilot")
USER_FILE = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "opencode": ".config/opencode/plugins/relay.js",
    "copilot": ".copilot/hooks/relay.json",
}
PROJECT_FILE = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "opencode": ".opencode/plugins/relay.js",
    "copilot": ".github/hooks/relay.json",
}
RUNTIME_VARS = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "XDG_CONFIG_HOME",
    "COPILOT_HOME",
)


@pytest.fixture
def person(tmp_path, relay, monkeypatch):
    """(HOME, a project directory that is the current directory, a directory elsewhere of
    the person's that a link may point at)."""
    home, project, victim = tmp_path / "home", tmp_path / "project", tmp_path / "elsewhere"
    for d in (home, project, victim):
        d.mkdir()
    for var in RUNTIME_VARS:
        monkeypatch.delenv(var, raising=False)
    relay.env["HOME"] = str(home)
    monkeypatch.chdir(project)
    return home, project, victim


def content(runtime: str) -> bytes:
    """A file both install and uninstall would change: relay's entries in it (opencode:
    relay's own plugin, an older one)."""
    if runtime == "opencode":
        from relay_cli.agents import opencode_plugin

        return (opencode_plugin.MARKER + "\n// an older relay's plugin\n").encode()
    from relay_cli.agents import runtimes

    stop = runtimes.BY_NAME[runtime].runtime_event("Stop")
    handler = {"type": "command", "command": f"relay hook {runtime}"}
    return json.dumps({"model": "mine", "hooks": {stop: [{"hooks": [handler]}]}}).encode()


def tree(*roots: Path) -> dict:
    """Everything under ``roots``: each path's kind, owner, mode, bytes or link target."""
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st = os.lstat(p)
                if p.is_symlink():
                    body = ("link", os.readlink(p))
                elif p.is_file():
                    body = ("file", p.read_bytes(), st.st_mtime_ns)
                else:
                    body = ("dir",)
                out[str(p)] = (st.st_uid, st.st_mode, body)
    return out


def refused_unchanged(relay, roots, *args, why: str) -> dict:
    before = tree(*roots)
    for dry in ((), ("--dry-run",)):
        r = relay("hook", *args, *dry, "--json")
        assert (r.code, r.error and r.error["code"]) == (7, "storage_error"), (args, dry, r)
        assert why in r.error["message"], r.error
        assert "nothing was changed" in r.error["message"]
        assert tree(*roots) == before, (args, dry)
    return r.error


# ------------------------------------------------------------ a link as the file
@pytest.mark.parametrize("command", ["install", "uninstall"])
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("project", [False, True], ids=["user", "project"])
def test_a_link_as_the_file_is_refused_and_its_target_untouched(
    relay, person, runtime, command, project
):
    """E.g. `.github/hooks/relay.json` in a project another user controls, pointing at a
    JSON file of the caller's: relay used to rewrite that file (its backup beside it)."""
    home, proj, victim = person
    target = victim / ("theirs.js" if runtime == "opencode" else "settings.json")
    target.write_bytes(content(runtime))
    link = (proj / PROJECT_FILE[runtime]) if project else (home / USER_FILE[runtime])
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    args = (command, runtime, *(("--project",) if project else ()))
    err = refused_unchanged(relay, (home, proj, victim), *args, why="is a symbolic link")
    assert str(link) in err["message"] and target.read_bytes() == content(runtime)


# ------------------------------------------------------------ a link on the way
@pytest.mark.parametrize("command", ["install", "uninstall"])
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("project", [False, True], ids=["user", "project"])
def test_a_linked_directory_on_the_way_is_refused(relay, person, runtime, command, project):
    """A symlinked `.opencode` (`.claude`, `.github`, …) directory: relay would have
    written into the directory it points at."""
    home, proj, victim = person
    rel = Path(PROJECT_FILE[runtime] if project else USER_FILE[runtime])
    first = rel.parts[0]
    real = victim / first
    (real / Path(*rel.parts[1:])).parent.mkdir(parents=True, exist_ok=True)
    (real / Path(*rel.parts[1:])).write_bytes(content(runtime))
    base = proj if project else home
    (base / first).symlink_to(real, target_is_directory=True)
    args = (command, runtime, *(("--project",) if project else ()))
    err = refused_unchanged(relay, (home, proj, victim), *args, why="is a symbolic link")
    assert str(base / first) in err["message"]


def test_a_link_deeper_down_is_refused_too(relay, person):
    home, proj, victim = person
    (proj / ".opencode").mkdir()
    (victim / "plugins").mkdir()
    (proj / ".opencode" / "plugins").symlink_to(victim / "plugins")
    refused_unchanged(
        relay, (proj, victim), "install", "opencode", "--project", why="symbolic link"
    )
    assert list((victim / "plugins").iterdir()) == []


# ------------------------------------------------------------ another user's
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
OTHER = 65534


def _chown_tree(top: Path, uid: int = OTHER) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            os.chown(Path(dirpath) / name, uid, uid)
    os.chown(top, uid, uid)


@root_only
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_project_another_user_controls_is_refused(relay, person, runtime):
    """Its directories are another user's: a directory on the way, the file's directory,
    or the project directory relay would create the first directory in."""
    home, proj, victim = person
    args = ("install", runtime, "--project")
    _chown_tree(proj)  # nothing there yet: relay would create its directory in it
    refused_unchanged(relay, (proj,), *args, why="of another user")
    (proj / PROJECT_FILE[runtime]).parent.mkdir(parents=True)
    _chown_tree(proj)  # the whole way is theirs
    refused_unchanged(relay, (proj,), *args, why="of another user")
    _chown_tree(proj, os.geteuid())
    deepest = proj / Path(PROJECT_FILE[runtime]).parent
    os.chown(deepest, OTHER, OTHER)  # only the file's own directory is theirs
    refused_unchanged(relay, (proj,), *args, why="of another user")
    os.chown(deepest, os.geteuid(), os.geteuid())
    (proj / PROJECT_FILE[runtime]).write_bytes(content(runtime))
    os.chown(proj / PROJECT_FILE[runtime], OTHER, OTHER)  # the file is theirs
    for command in ("install", "uninstall"):
        refused_unchanged(relay, (proj,), command, runtime, "--project", why="another user")


@root_only
def test_relay_creates_a_directory_only_in_one_of_the_callers(relay, person, tmp_path):
    """CODEX_HOME names a directory that does not exist yet, inside another user's."""
    home, proj, victim = person
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, OTHER, OTHER)
    relay.env["CODEX_HOME"] = str(theirs / "codex")
    refused_unchanged(relay, (theirs,), "install", "codex", why="of another user")
    mine = tmp_path / "mine"
    mine.mkdir()
    relay.env["CODEX_HOME"] = str(mine / "a" / "codex")  # made (0700) on the way
    r = relay("hook", "install", "codex", "--json")
    assert r.code == 0, r.err
    assert (mine / "a" / "codex" / "hooks.json").is_file()
    assert (mine / "a").stat().st_mode & 0o777 == 0o700


# ------------------------------------------------------------ what works
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_anchor_that_is_a_link_is_followed_as_given(relay, person, runtime, tmp_path):
    """The directory the person names (HOME, a runtime's variable, the project directory)
    is taken as given: only what lies below it is never followed."""
    home, proj, victim = person
    linked_home = tmp_path / "home-link"
    linked_home.symlink_to(home, target_is_directory=True)
    relay.env["HOME"] = str(linked_home)
    r = relay("hook", "install", runtime, "--json")
    assert r.code == 0, r.err
    assert (home / USER_FILE[runtime]).is_file()
    r = relay("hook", "uninstall", runtime, "--json")
    assert r.code == 0 and r.json["changed"], r.err


# ------------------------------------------------------------ races
def test_a_file_swapped_for_a_link_during_the_write_is_refused_and_no_backup_stays(
    relay, person, monkeypatch
):
    """Between the read and the rename, the name comes to hold something else: the new
    content is not renamed over it, and the backup and temporary file are removed."""
    from relay_cli.agents import own_files

    home, proj, victim = person
    path = home / USER_FILE["claude"]
    path.parent.mkdir()
    path.write_text('{"model": "mine"}')
    target = victim / "other.json"
    target.write_text('{"other": true}')
    real_backup = own_files._backup

    def swap(dfd, name, data, mode):
        made = real_backup(dfd, name, data, mode)
        path.unlink()
        path.symlink_to(target)
        return made

    monkeypatch.setattr(own_files, "_backup", swap)
    r = relay("hook", "install", "claude", "--json")
    assert (r.code, r.error["code"]) == (7, "storage_error"), r
    assert "was changed by someone else" in r.error["message"]
    assert path.is_symlink() and target.read_text() == '{"other": true}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_directory_replaced_by_a_link_after_the_checks_cannot_send_the_write_elsewhere(
    relay, person, monkeypatch
):
    """The directories are held open from the anchor down: a directory renamed away and
    replaced by a link meanwhile gets the write itself, not the link's target."""
    from relay_cli.agents import own_files

    home, proj, victim = person
    real_open = own_files._Dirs.open

    def open_then_swap(self, create):
        opened = real_open(self, create)
        if create:
            (proj / ".claude").rename(proj / ".claude-moved")
            (proj / ".claude").symlink_to(victim, target_is_directory=True)
        return opened

    monkeypatch.setattr(own_files._Dirs, "open", open_then_swap)
    r = relay("hook", "install", "claude", "--project", "--json")
    assert r.code == 0, r.err
    assert list(victim.iterdir()) == []
    assert "hooks" in json.loads((proj / ".claude-moved" / "settings.json").read_text())


# ------------------------------------------------------------ relative variables
@pytest.mark.parametrize(
    ("runtime", "var", "rel"),
    [
        ("opencode", "XDG_CONFIG_HOME", ".config/opencode/plugins/relay.js"),
        ("copilot", "COPILOT_HOME", ".copilot/hooks/relay.json"),
        ("claude", "CLAUDE_CONFIG_DIR", ".claude/settings.json"),
        ("codex", "CODEX_HOME", ".codex/hooks.json"),
        ("gemini", "GEMINI_CLI_HOME", ".gemini/settings.json"),
    ],
)
def test_a_relative_runtime_variable_is_ignored_and_said_so(relay, person, runtime, var, rel):
    """As the XDG rule says of XDG_CONFIG_HOME (and relay's own home does): a relative
    value would name another directory in every working directory."""
    home, proj, victim = person
    r = relay("hook", "install", runtime, "--json", env={var: "conf"})
    assert r.code == 0, r.err
    assert r.json["file"] == str(home / rel)
    assert not (proj / "conf").exists()
    assert any(f"{var}=conf is not an absolute path" in t for t in r.json["todo"])
