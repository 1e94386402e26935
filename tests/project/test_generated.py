"""Generated files (completions, man page, reference) are current and actually work."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import generate  # noqa: E402


def relay_bin_dir() -> str:
    """The directory of the `relay` console script of this test's Python."""
    here = Path(sys.executable).parent
    if (here / "relay").exists():
        return str(here)
    found = shutil.which("relay")
    assert found, "the relay console script is not installed"
    return str(Path(found).parent)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "_RELAY"))}
    env["PATH"] = relay_bin_dir() + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def test_generated_files_match_a_fresh_generation():
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 0, (
        "generated files are out of date; run `python scripts/generate.py`:\n" + p.stderr
    )


def test_check_names_a_file_that_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "outputs", lambda: {"man/relay.1": "new\n"})
    (tmp_path / "man").mkdir()
    (tmp_path / "man" / "relay.1").write_text("old\n")
    assert generate.main(["--check"]) == 1
    assert (tmp_path / "man" / "relay.1").read_text() == "old\n"
    assert generate.main([]) == 0
    assert (tmp_path / "man" / "relay.1").read_text() == "new\n"
    assert generate.main(["--check"]) == 0


def test_design_tables_are_written_between_their_markers_and_a_stale_one_is_caught():
    """docs/design.md is prose with generated tables (states, transitions, errors)."""
    from relay_cli.cli import schema

    doc = schema.build()
    current = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert generate.design(doc, current) == current
    for stale in (
        current.replace("| `queued` | accepted durably", "| `queued` | accepted"),
        current.replace("| `resolve_forget` |", "| `forget` |"),
        current.replace("| `busy` | 75 | yes |", "| `busy` | 75 | no |"),
    ):
        assert stale != current and generate.design(doc, stale) == current
    with pytest.raises(SystemExit, match="END GENERATED errors"):
        generate.design(doc, current.replace("<!-- END GENERATED errors -->", ""))


# ------------------------------------------------------------------ bash completion
def bash_complete(*words: str, env: dict | None = None) -> list[str]:
    """Complete the last of ``words`` in a real bash with completions/relay.bash sourced,
    through the function `complete -p relay` registered (which starts a real relay);
    nothing may reach stderr."""
    if not shutil.which("bash"):
        pytest.skip("bash is not installed")
    words_q = " ".join(f"'{w}'" for w in words)
    script = f"""
set -e
source {ROOT / "completions" / "relay.bash"}
spec=$(complete -p relay)
fn=$(printf '%s\\n' "$spec" | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')
test -n "$fn"
COMP_WORDS=({words_q})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
"$fn" relay "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    p = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=clean_env(**(env or {})),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    return [line for line in p.stdout.splitlines() if line]


def test_bash_completes_se_to_send():
    assert bash_complete("relay", "se") == ["send"]


def test_bash_completes_send_dash_dash_o_to_on_lost():
    assert bash_complete("relay", "send", "--o") == ["--on-lost"]


def test_bash_completes_subcommands_of_peers():
    assert "join" in bash_complete("relay", "peers", "")


def test_bash_completes_an_id_only_the_store_knows(relay):
    """The whole path for a value from the store: bash, the generated script, a real
    relay process that opens relay.db (or the server) and offers the request's id.
    (What each command offers is tests/cli/test_completion.py's, in-process.)"""
    alice = relay.join("alice")
    relay.join("bob")
    rid = relay.send(alice, "bob", "x").json["id"]
    env = {k: v for k, v in relay._env(None).items() if k.startswith("RELAY_")}
    assert bash_complete("relay", "show", "", env=env) == [rid]
    assert bash_complete("relay", "show", rid[:4], env=env) == [rid]


# Typer's --show-completion and --install-completion look for the shell that started
# relay (its parent process) and ignore a shell named after them. pytest may run under
# any shell (`dash -c 'python -m pytest ...'`): these tests either name the shell with
# Typer's switch for that (the option then takes the shell as its value), or start relay
# from a real bash, so they never depend on the shell that started pytest.
NAMED_SHELL = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def test_show_completion_prints_the_committed_bash_script():
    p = subprocess.run(
        ["relay", "--show-completion", "bash"],
        capture_output=True,
        text=True,
        env=clean_env(**NAMED_SHELL),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (ROOT / "completions" / "relay.bash").read_text().strip()


def test_show_completion_from_bash_detects_bash():
    if not shutil.which("bash"):
        pytest.skip("bash is not installed")
    # (a second command keeps bash from exec-ing relay: bash stays its parent)
    p = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", "relay --show-completion; exit $?"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (ROOT / "completions" / "relay.bash").read_text().strip()


def test_install_completion_writes_the_bash_script(tmp_path):
    p = subprocess.run(
        ["relay", "--install-completion", "bash"],
        capture_output=True,
        text=True,
        env=clean_env(HOME=str(tmp_path), **NAMED_SHELL),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    installed = tmp_path / ".bash_completions" / "relay.sh"
    assert (
        installed.read_text().strip() == (ROOT / "completions" / "relay.bash").read_text().strip()
    )
    assert "relay.sh" in (tmp_path / ".bashrc").read_text()


def test_installed_bash_copy_is_identical_and_zsh_is_autoloadable():
    assert (ROOT / "completions" / "bash" / "relay").read_text() == (
        ROOT / "completions" / "relay.bash"
    ).read_text()
    zsh = (ROOT / "completions" / "_relay").read_text()
    assert zsh.startswith("#compdef relay\n")
    assert '_relay_completion "$@"' in zsh and "compdef _relay_completion relay" in zsh


ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty -b z 'zsh -f -i'
zpty -w z 'PS1="> "; fpath=(%(fpath)s $fpath); autoload -U compinit; compinit -u -D'
zpty -w -n z $'%(line)s\t'
out=""
for i in {1..100}; do
  while zpty -r -t z chunk; do out+=$chunk; done
  [[ $out == *%(expect)s* ]] && break
  sleep 0.1
done
zpty -d z
print -r -- "$out"
"""


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
@pytest.mark.parametrize(
    "line, expect", [("relay se", "relay send "), ("relay send --o", "--on-lost ")]
)
def test_zsh_completes_on_the_first_tab_when_autoloaded_from_fpath(tmp_path, line, expect):
    """A real interactive zsh (through zpty) with completions/ on $fpath, as
    share/zsh/site-functions is: the very first TAB completes."""
    (tmp_path / "_relay").write_text((ROOT / "completions" / "_relay").read_text())
    script = ZSH_DRIVER % {"fpath": tmp_path, "line": line, "expect": f"'{expect.strip()}'"}
    p = subprocess.run(
        ["zsh", "-f", "-c", script], capture_output=True, text=True, env=clean_env(), timeout=60
    )
    screen = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|.\x08", "", p.stdout)
    assert expect in screen, screen[-500:]


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed")
def test_fish_completes_send_and_on_lost():
    script = (
        f"source {ROOT / 'completions' / 'relay.fish'}; complete -C 'relay se'; "
        "echo ---; complete -C 'relay send --o'"
    )
    p = subprocess.run(
        ["fish", "--no-config", "-c", script],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.split("---\n")
    assert [ln.split("\t")[0] for ln in first.splitlines()] == ["send"]
    assert [ln.split("\t")[0] for ln in second.splitlines()] == ["--on-lost"]


# ------------------------------------------------------------------ man page
def test_man_page_renders_without_warnings():
    if shutil.which("groff"):
        cmd = ["groff", "-man", "-Tutf8", "-ww", "-z", str(ROOT / "man" / "relay.1")]
    elif shutil.which("man"):
        cmd = ["man", "--warnings", "-l", str(ROOT / "man" / "relay.1")]
    else:
        pytest.skip("neither groff nor man is installed")
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "MANPAGER": "cat"})
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_man_page_has_every_section_command_and_option():
    from relay_cli.cli import schema

    page = (ROOT / "man" / "relay.1").read_text()
    for section in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "STATES",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "SECURITY",
        "EXAMPLES",
    ):
        assert f"\n.SH {section}\n" in page, section
    unescaped = page.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
    doc = schema.build()
    for c in doc["commands"][1:]:
        assert f".SS {c['usage']}" in unescaped, c["path"]
    for c in doc["commands"]:
        for o in c["options"]:
            assert o["flags"][0] in unescaped, (c["path"], o["name"])
            assert o["help"].replace("`", "") in unescaped, (c["path"], o["name"])
    from relay_cli.core.context import ENVIRONMENT

    for var in ENVIRONMENT:
        assert f"\n.TP\n{var}\n" in unescaped, var
    for e in doc["exit_status"]:
        assert f"\n.TP\n{e['code']}\n" in unescaped, e["code"]
    for s in doc["states"]["all"]:
        assert f"\n.TP\n{s}\n" in unescaped, s


# ------------------------------------------------------------------ reference and help
def commands():
    from relay_cli.cli import schema

    return schema.build()["commands"]


def test_every_command_and_option_has_help_text():
    missing = []
    for c in commands():
        if not c["help"]:
            missing.append(c["path"])
        missing += [
            f"{c['path']} {p['name']}" for p in c["options"] + c["arguments"] if not p["help"]
        ]
    assert missing == [], f"commands or options without help text: {missing}"


def test_every_command_is_in_the_reference_with_its_current_help():
    reference = (ROOT / "docs" / "reference.md").read_text()
    for c in commands():
        assert f"\n## {c['path']}\n" in reference, f"{c['path']} is missing from the reference"
        help_text = generate.help_text(c["path"].split()[1:])
        assert help_text.rstrip() in reference, f"the reference has stale help for {c['path']}"


def test_help_is_plain_text_without_boxes_or_escape_codes():
    for c in commands():
        text = generate.help_text(c["path"].split()[1:])
        assert not re.search(r"[\u2500-\u257f\x1b]", text), f"decorated help: {c['path']}"
        assert text.startswith(f"Usage: {c['path']}"), c["path"]
